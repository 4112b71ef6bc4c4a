"""``examples/asyncio_http_client.py``: the core driven by hand from asyncio over
Streamable HTTP, run as a real process against the Trio notes server, in both eras."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trio

from mcp_trio import Context
from mcp_trio._cli_notes import NoteStore, create_server

from .trio.test_http_support import Proxy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "asyncio_http_client.py"
IO_TIMEOUT = 60  # seconds, absolute: a real process on a shared machine


async def _run_example(url: str, era: str) -> subprocess.CompletedProcess[bytes]:
    """The example run as a process against ``url`` in ``era``; its output captured."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with trio.fail_after(IO_TIMEOUT):
        return await trio.run_process(
            [sys.executable, str(EXAMPLE), url, era],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )


@pytest.mark.parametrize(
    ("era", "connected"),
    [
        ("legacy", "connected: legacy era, protocol 2025-11-25, server notes"),
        ("modern", "connected: modern era, protocol 2026-07-28, server notes"),
        ("auto", "connected: modern era, protocol 2026-07-28, server notes"),
    ],
    ids=["legacy", "modern", "auto"],
)
async def test_the_asyncio_http_example_runs_against_the_trio_server(
    nursery: trio.Nursery, era: str, connected: str
) -> None:
    store = NoteStore()
    server = create_server(store)
    # summarize_notes made to work until it is cancelled, to see that the cancellation
    # reached the server, and when: the example deletes its note only after it.
    server.remove_tool("summarize_notes")
    note_there_when_cancelled: list[bool] = []

    @server.tool()
    async def summarize_notes(ctx: Context) -> str:
        """Summarize the notes (until cancelled)."""
        await ctx.report_progress(0, 4, "reading 'Structured concurrency'")
        try:
            await trio.sleep_forever()
        finally:
            note_there_when_cancelled.append(store.get(5) is not None)
        raise AssertionError("unreachable")

    handle = await nursery.start(server.serve_http, "127.0.0.1", 0)
    done = await _run_example(handle.url, era)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        connected,
        "tools: add_note, delete_note, search_notes, summarize_notes",
        "add_note: #5",
        "progress: 0/4 reading 'Structured concurrency'",
        "summarize_notes: cancelled",
        "question: Delete note 5, 'Lemons'?",  # (legacy: a request; modern: input_required)
        "delete_note: Deleted note 5, 'Lemons'.",
    ]
    assert note_there_when_cancelled == [True]  # (not at the end: by the cancellation)
    assert store.get(5) is None
    await handle.aclose()


async def _cutting_proxy(
    nursery: trio.Nursery, upstream: int, cut: Callable[[bytes], bool], reply: bytes = b""
) -> int:
    """A TCP proxy to ``127.0.0.1:upstream`` (one HTTP request per connection, as the
    example makes them) that reads each request whole and, when ``cut`` says so of its
    body, closes the connection unanswered (the server never has it); or, given a
    ``reply``, writes that and holds the connection open until the client closes it.
    Its port."""

    async def relay(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await source.receive_some(65536):
                await sink.send_all(data)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await sink.send_eof()  # type: ignore[attr-defined]

    async def handle(client: trio.SocketStream) -> None:
        async with client:
            data = await Proxy._whole_request(client)
            _, found, body = data.partition(b"\r\n\r\n")
            if not found:
                return
            if cut(body):
                if reply:
                    await client.send_all(reply)
                    with contextlib.suppress(trio.BrokenResourceError):
                        while await client.receive_some(65536):
                            pass
                return  # (closed unanswered, or once the client closed)
            server = await trio.open_tcp_stream("127.0.0.1", upstream)
            async with server, trio.open_nursery() as inner:
                await server.send_all(data)
                inner.start_soon(relay, server, client)
                await relay(client, server)

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def test_the_asyncio_http_example_reissues_a_request_whose_connection_ended_unanswered(
    nursery: trio.Nursery,
) -> None:
    """Modern: the connection carrying ``tools/list`` ends after the request went out
    whole, before any answer (a proxy cut it): the example re-issues it under a new id
    (``split_broken``), as the spec requires, and the run goes on as usual (it failed
    the call, which ended the run)."""
    store = NoteStore()
    server = create_server(store)
    handle = await nursery.start(server.serve_http, "127.0.0.1", 0)
    cuts: list[bytes] = []

    def cut_first_list(body: bytes) -> bool:
        if b'"tools/list"' in body and not cuts:
            cuts.append(body)
            return True
        return False

    upstream = urlsplit(handle.url)
    port = await _cutting_proxy(nursery, upstream.port or 80, cut_first_list)
    url = f"http://127.0.0.1:{port}{upstream.path}"
    done = await _run_example(url, "modern")
    assert len(cuts) == 1
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert lines[:2] == [
        "connected: modern era, protocol 2026-07-28, server notes",
        "tools: add_note, delete_note, search_notes, summarize_notes",
    ]
    await handle.aclose()


async def test_the_asyncio_http_example_does_not_reissue_after_a_head_that_broke_http(
    nursery: trio.Nursery,
) -> None:
    """Modern: the answer to ``tools/list`` is a head that breaks HTTP (the connection
    stays open): that is the server's answer, broken, not a connection that ended, so
    the request fails ("the connection closed before the response") and is not sent
    again (http.py's module docs: re-issued only when the connection ended, "not a head
    that broke HTTP, which is the server's answer")."""
    store = NoteStore()
    server = create_server(store)
    handle = await nursery.start(server.serve_http, "127.0.0.1", 0)
    lists: list[bytes] = []

    def break_the_list(body: bytes) -> bool:
        if b'"tools/list"' in body:
            lists.append(body)
            return True
        return False

    upstream = urlsplit(handle.url)
    port = await _cutting_proxy(
        nursery, upstream.port or 80, break_the_list, reply=b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n"
    )
    url = f"http://127.0.0.1:{port}{upstream.path}"
    done = await _run_example(url, "modern")
    assert len(lists) == 1  # not re-issued
    assert done.returncode != 0
    assert "tools/list" in done.stderr.decode()
    assert "the connection closed before the response" in done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        "connected: modern era, protocol 2026-07-28, server notes"
    ]
    await handle.aclose()

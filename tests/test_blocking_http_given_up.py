"""``BlockingClient.http``: a legacy request whose answer the client gives up on is failed
as the transport's and cancelled on the server (as the Trio client's:
``tests/trio/test_http_resume_given_up.py``, which says why).

Against our real Trio server, behind a Trio proxy that cuts connections, both served in
a Trio run of their own in another thread. Every wait is bounded.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any

import pytest
import trio

from mcp_sansio.http import HttpClient, InMemoryEventStore
from mcp_trio import HandshakeFailed, HttpTransportConfig, TransportFailed
from mcp_trio._blocking import BlockingClient, CallClock
from mcp_trio._blocking_http import HttpTransport, _wait

from .core.test_http_client import JSON, read, result, rpc
from .test_blocking_http import RawServer, respond
from .trio.test_http_resume_given_up import DropsInitialize, _Runs
from .trio.test_http_support import App, Proxy, served_in_thread, start_server

TIMEOUT = 20.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets")


class _Served:
    """A server behind a :class:`Proxy`, in a Trio run of its own: ``in_trio`` runs a
    function there; ``cancelled`` is set once the server's handler is cancelled."""

    def __init__(self) -> None:
        self.proxy: Proxy | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self.cancelled = threading.Event()

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return self.proxy.url()

    def in_trio(self, fn: Callable[[], Any]) -> None:
        trio.from_thread.run_sync(fn, trio_token=self.token)

    async def start(
        self, nursery: trio.Nursery, app: App, cancelled: trio.Event, **options: Any
    ) -> _Served:
        server = await start_server(nursery, app, **options)
        self.proxy = Proxy(server.port)
        await self.proxy.start(nursery)
        self.token = trio.lowlevel.current_trio_token()

        async def note_cancelled() -> None:
            await cancelled.wait()
            self.cancelled.set()

        nursery.start_soon(note_cancelled)
        return self


class _TakesTheHeadOnly(Proxy):
    """A :class:`Proxy` that, from a request with a body of a megabyte or more, takes
    its head and no more: it closes its side (so the server never gets it), and the
    client, its body still unwritten, reads the end."""

    async def _pipe(
        self,
        src: trio.SocketStream,
        dst: trio.SocketStream,
        up: Any,
        scope: trio.CancelScope,
    ) -> None:
        if up is None:
            return await super()._pipe(src, dst, up, scope)
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await src.receive_some(65536):
                if re.search(rb"(?im)^content-length:\s*\d{7,}\r$", data):
                    await src.send_eof()
                    await trio.sleep_forever()  # (reading nothing more)
                up.feed(data)
                await dst.send_all(data)
        scope.cancel()


def _connect(url: str, **options: Any) -> BlockingClient:
    transport = HttpTransportConfig(open_get_stream=False)
    return BlockingClient.http(url, era="legacy", transport=transport, timeout=TIMEOUT, **options)


@pytest.fixture
def served() -> Iterator[Callable[..., _Served]]:
    opened: list[Any] = []

    def serve(app: App, cancelled: trio.Event, **options: Any) -> _Served:
        served = _Served()
        context = served_in_thread(lambda nursery: served.start(nursery, app, cancelled, **options))
        opened.append(context)
        return context.__enter__()

    yield serve
    for context in reversed(opened):
        context.__exit__(None, None, None)


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What the client core is asked to POST, in order (even one it would not get to
    write before it closes)."""
    payloads: list[bytes] = []
    post = HttpClient.post

    def noted(self: HttpClient, payload: bytes) -> Any:
        payloads.append(payload)
        return post(self, payload)

    monkeypatch.setattr(HttpClient, "post", noted)
    return payloads


def test_a_refused_resumption_of_one_request_fails_it_as_ours_and_cancels_it(
    served: Callable[..., _Served],
) -> None:
    runs = _Runs()
    store = InMemoryEventStore(max_events_per_stream=1)
    server = served(runs.app, runs.cancelled_event, event_store=store, http={"retry_ms": 10})
    assert server.proxy is not None
    proxy = server.proxy

    async def cut_then_go_on() -> None:
        proxy.cut()
        runs.go.set()
        await runs.moved_on.wait()  # (2 and 3 are sent, to the store only)

    def on_progress(progress: Any) -> None:
        if progress.progress == 1:  # the client has event 1's id
            trio.from_thread.run(cut_then_go_on, trio_token=server.token)

    with _connect(server.url) as client:
        with pytest.raises(TransportFailed, match="status 410: Gone: some events after"):
            client.call_tool("runs", {}, on_progress=on_progress)
        assert server.cancelled.wait(TIMEOUT)  # the server was told: the handler ended
    (cancelled,) = [s.message for s in proxy.seen if s.rpc_method == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == runs.cancelled[0]


def test_a_request_whose_connection_breaks_before_the_answer_is_cancelled(
    served: Callable[..., _Served],
) -> None:
    app = App()
    server = served(app, app.cancelled_event, http={"response_mode": "json"})
    assert server.proxy is not None
    proxy = server.proxy

    async def cut_once_started() -> None:
        await app.started_event.wait()
        proxy.cut()

    server.in_trio(lambda: trio.lowlevel.spawn_system_task(cut_once_started))
    with _connect(server.url) as client:
        with pytest.raises(TransportFailed, match="before it answered"):
            client.call_tool("block", {})
        assert server.cancelled.wait(TIMEOUT)  # the server was told: the handler ended
    (started,) = app.started
    assert app.cancelled == [started.request_id]
    (cancelled,) = [s.message for s in proxy.seen if s.rpc_method == "notifications/cancelled"]
    assert cancelled["params"]["requestId"] == started.request_id


def test_an_initialize_whose_connection_breaks_before_the_answer_is_not_cancelled(
    posted: list[bytes],
) -> None:
    async def start(nursery: trio.Nursery) -> DropsInitialize:
        server = await start_server(nursery, App())
        proxy = DropsInitialize(server.port)
        await proxy.start(nursery)
        return proxy

    with served_in_thread(start) as proxy, pytest.raises(HandshakeFailed, match="before it"):
        _connect(proxy.url())
    assert proxy.dropped
    assert [json.loads(payload)["method"] for payload in posted] == ["initialize"]
    assert [seen.rpc_method for seen in proxy.seen] == ["initialize"]


def test_a_request_not_written_whole_when_its_connection_breaks_is_not_cancelled(
    posted: list[bytes],
) -> None:
    """The server never had it: there is nothing to cancel (cancellation.mdx: only
    requests "previously issued")."""
    app = App()

    async def start(nursery: trio.Nursery) -> Proxy:
        server = await start_server(nursery, app)
        proxy = _TakesTheHeadOnly(server.port)
        await proxy.start(nursery)
        return proxy

    with served_in_thread(start) as proxy, _connect(proxy.url()) as client:
        # More than the sockets' buffers hold: the end is read before the body is written.
        with pytest.raises(TransportFailed, match="closed the connection"):
            client.call_tool("echo", {"text": "x" * 16_000_000})
        assert client.call_tool("echo", {"text": "then"}).text == "then"
    assert [json.loads(payload).get("method") for payload in posted] == [
        "initialize",
        "notifications/initialized",
        "tools/call",
        "tools/call",
    ]
    assert [seen.rpc_method for seen in proxy.seen].count("tools/call") == 1


def test_a_request_given_up_before_its_connection_breaks_is_not_cancelled_again(
    posted: list[bytes],
) -> None:
    """A 2025-03-26 batch of two requests (the one way for a request given up to leave
    its POST waiting: a lone one's is closed then), the first timed out and cancelled,
    then the connection cut before the answer's head: only the second is cancelled now.
    The transport itself, driven by hand: ``BlockingClient`` sends no batches."""
    got_batch, cut = threading.Event(), threading.Event()

    def serve(sock: socket.socket, head: bytes, body: bytes) -> None:
        if body.startswith(b"["):
            got_batch.set()
            assert cut.wait(TIMEOUT)  # (then closed, with no answer)
        else:
            respond(sock, "202 Accepted", {}, b"")

    server = RawServer(serve)
    transport = HttpTransport(
        server.url,
        http_config=None,
        transport=None,
        ssl_context=None,
        headers=None,
        write_timeout=None,
    )
    clock = CallClock()
    clock.run()  # (a call waiting: the clock runs)
    try:
        version = {"protocolVersion": "2025-03-26", "capabilities": {}}
        init = transport.http.post(rpc(1, "initialize", version))
        reader = transport.http.response(init, 200, (*JSON, (b"mcp-session-id", b"s")))
        read(reader, result(1, {**version, "serverInfo": {"name": "s", "version": "1"}}))
        batch = [json.loads(rpc(rid, "tools/call", {"name": "x"})) for rid in (2, 3)]
        transport.send(json.dumps(batch).encode(), clock.now())
        deadline = time.monotonic() + TIMEOUT
        while not got_batch.is_set() and time.monotonic() < deadline:
            _wait(transport, 0.05, clock, reading=True)
        assert got_batch.is_set()  # (written whole)
        cancel = {"requestId": 2, "reason": "timed out"}
        transport.send(
            json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}
            ).encode(),
            clock.now(),
        )
        cut.set()
        while not transport.inbox and time.monotonic() < deadline:
            _wait(transport, 0.05, clock, reading=True)
        (failed,) = transport.inbox
        assert isinstance(failed, bytes) and json.loads(failed)["id"] == 3
    finally:
        transport.close()
        server.close()
    cancelled = [
        message["params"]["requestId"]
        for message in map(json.loads, posted)
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled"
    ]
    assert cancelled == [2, 3]

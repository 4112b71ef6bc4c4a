"""Over Streamable HTTP, each JSON-RPC message is parsed once on each side.

The server parses a POST's body to route it and hands the parsed message to its
connection (``Connection.receive_message(..., decoded=)``); the clients' response
reader parses each answer (JSON body or SSE event) to track its requests and hands it
on parsed (the Trio client as a ``Decoded``, the blocking one as a ``Read``). Every
``loads`` our modules hold is replaced by one that records what it parsed, and for
which side: the server's parses are those made under ``HttpServer.handle_request``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import trio

from mcp_sansio import _json
from mcp_trio._blocking import BlockingClient
from mcp_trio._http_client import open_http_client

from .test_http_support import (
    IO_TIMEOUT,
    call,
    client_connection_config,
    served_in_thread,
    start_server,
    text_of,
)

MARK = "parsed-once-4f1c"
"""The text echoed: in the request's arguments and in its answer's content."""

Parses = Callable[[bytes], tuple[int, int]]
SERVER = "mcp_sansio/_http_server.py"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Parses]:
    """``count(kind)``: how many texts containing ``MARK`` and ``kind`` (``b'"method"'``:
    the request; ``b'"result"'``: its answer) were parsed, by the client and by the
    server."""
    seen: list[tuple[bool, bytes]] = []
    real = _json.loads

    def counting(data: Any) -> Any:
        text = data.encode() if isinstance(data, str) else bytes(data)
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.endswith(SERVER):
            frame = frame.f_back  # type: ignore[assignment]
        seen.append((frame is None, text))
        return real(data)

    for name, module in list(sys.modules.items()):
        ours = name.partition(".")[0] in ("mcp_sansio", "mcp_trio")
        if ours and getattr(module, "loads", None) is real:
            monkeypatch.setattr(module, "loads", counting)

    def count(kind: bytes) -> tuple[int, int]:
        ours = [mine for mine, text in seen if MARK.encode() in text and kind in text]
        return sum(ours), len(ours) - sum(ours)

    yield count


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_trio_client_and_our_server_parse_each_message_once(
    nursery: trio.Nursery, parses: Parses, era: str, mode: str
) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            result = await client.request("tools/call", call("echo", text=MARK))
    assert text_of(result) == MARK
    # The client parses its answer once (its own request it parses too, once: the POST's
    # headers are read from it); the server parses the request once, and no answer.
    assert parses(b'"result"') == (1, 0)
    assert parses(b'"method"') == (1, 1)


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_blocking_client_parses_each_answer_once(parses: Parses, era: str, mode: str) -> None:
    # (Our server serves in a thread of its own: the blocking client blocks the test's.)
    start = partial(start_server, http={"response_mode": mode})
    with (
        served_in_thread(start) as server,
        BlockingClient.http(
            server.url,
            era="auto" if era == "modern" else "legacy",
            timeout=IO_TIMEOUT,
            handshake_timeout=IO_TIMEOUT,
        ) as client,
    ):
        result = client.request("tools/call", call("echo", text=MARK))
    assert text_of(result) == MARK
    assert parses(b'"result"') == (1, 0)
    assert parses(b'"method"') == (1, 1)

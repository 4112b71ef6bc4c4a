"""A hand-written HTTP/1.1 server's parts for the HTTP client's slow-peer tests
(``test_http_slow_upload``, ``test_http_one_way``): h11 on loopback, port 0, a small
receive buffer, one answer per connection (then it closes), and a body larger than
:data:`STALL_ABOVE` left unread until the test says so."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import h11
import trio

from mcp_sansio._json import dumps
from mcp_trio._http_config import HttpTransportConfig

STALL_ABOVE = 100_000
"""A POST with a larger body is not read (until the test's ``drain``)."""
BIG = "x" * 8_000_000
"""Far more than the socket buffers on both sides hold."""
LONG = 300
"""``fail_after`` for these tests (virtual seconds: nothing here waits that long)."""
NO_GET = HttpTransportConfig(open_get_stream=False)
DISCOVER = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "slow", "version": "0"}},
}
INITIALIZED = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "slow", "version": "0"},
}


async def read_head(conn: h11.Connection, stream: trio.SocketStream) -> h11.Request | None:
    """The request's head, or ``None`` if the connection ended before it."""
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Request):
            return event
        if event is not h11.NEED_DATA:
            return None
        data = await stream.receive_some(4096)
        if not data:
            return None
        conn.receive_data(data)


async def read_body(conn: h11.Connection, stream: trio.SocketStream) -> bytes | None:
    """The body, or ``None`` if the connection ended before it did."""
    body = bytearray()
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            elif event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            else:
                return None
    except (h11.RemoteProtocolError, trio.BrokenResourceError):
        return None  # (h11: the connection ended mid-body; or it was reset)


def text_block(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def result(rid: Any, value: dict[str, Any]) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": rid, "result": value})


async def respond(
    conn: h11.Connection,
    stream: trio.SocketStream,
    status: int,
    payload: bytes,
    *,
    session: str | None = None,
    sse: bool = False,
    retry_after: bytes = b"1",
) -> None:
    """Answer, then close the connection (``Retry-After`` on a ``503``)."""
    headers = [("content-length", str(len(payload))), ("connection", "close")]
    if payload:
        headers.append(("content-type", "text/event-stream" if sse else "application/json"))
    if session is not None:
        headers.append(("mcp-session-id", session))
    if status == 503:
        headers.append(("retry-after", retry_after.decode()))
    out = [conn.send(h11.Response(status_code=status, headers=headers))]
    if payload:
        out.append(conn.send(h11.Data(data=payload)))
    out.append(conn.send(h11.EndOfMessage()))
    await stream.send_all(b"".join(part for part in out if part))
    await stream.aclose()


async def listen(
    nursery: trio.Nursery, handle: Callable[[trio.SocketStream], Awaitable[None]]
) -> str:
    """Serve ``handle`` on 127.0.0.1 (a free port, a small receive buffer); the URL."""
    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    sock = listeners[0].socket
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (accepted ones inherit it)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"

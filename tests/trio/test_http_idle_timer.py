"""The HTTP server's read timeouts fire when they did: the wait for a request (a new
connection's ``header_timeout``, a kept-alive one's ``keepalive_timeout``) and a body
that stops coming; a request that comes just before is served, one after is not."""

from __future__ import annotations

import os
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import h11
import pytest
import trio
import trio.testing

from mcp_trio import SessionConfig
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_server import HttpServeHandle

from .test_http_support import (
    IO_TIMEOUT,
    RawConnection,
    call,
    raw_session,
    rpc,
    server_writes,
    session_headers,
    start_server,
    text_of,
)

TIMEOUT = 2.0


async def _json_server(nursery: trio.Nursery, transport: HttpTransportConfig) -> HttpServeHandle:
    """A server that answers a legacy session's requests as JSON: served in the
    connection's own task, whose wait for the next request follows the answer."""
    return await start_server(nursery, http={"response_mode": "json"}, transport=transport)


@asynccontextmanager
async def _connected(
    nursery: trio.Nursery, transport: HttpTransportConfig
) -> AsyncIterator[tuple[HttpServeHandle, str, RawConnection]]:
    """A JSON server (:func:`_json_server`), a legacy session on it, and a raw kept-alive
    connection to it, closed after; all within ``IO_TIMEOUT``."""
    server = await _json_server(nursery, transport)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        conn = await RawConnection.open(server.port)
        try:
            yield server, sid, conn
        finally:
            await conn.aclose()


def _post(conn: RawConnection, sid: str, rid: int, text: str) -> bytes:
    """The bytes of an echo call in the session ``sid``, framed by ``conn``'s h11."""
    body = rpc(rid, "tools/call", call("echo", text=text))
    headers = [("host", "127.0.0.1"), *session_headers(sid), ("content-length", str(len(body)))]
    events = (h11.Request(method="POST", target="/mcp", headers=headers), h11.Data(data=body))
    return b"".join(conn.h11.send(event) or b"" for event in (*events, h11.EndOfMessage()))


async def _answer(conn: RawConnection) -> str:
    response = await conn.response()
    conn.next_cycle()
    assert response.status == 200 and response.headers["content-type"] == "application/json"
    return text_of(response.json()["result"])


async def _echo(conn: RawConnection, sid: str, rid: int, text: str) -> str:
    await conn.stream.send_all(_post(conn, sid, rid, text))
    return await _answer(conn)


async def _send_late(
    server: HttpServeHandle,
    conn: RawConnection,
    clock: trio.testing.MockClock,
    request: bytes,
    late_by: float,
) -> None:
    """Send ``request`` so that its bytes and a deadline ``late_by`` seconds on reach the
    server in the same scheduler pass, the bytes first: written with no checkpoint, made
    readable at the server's end, then the clock jumps (trio's next pass wakes the
    server's reader, then expires deadlines)."""
    await trio.testing.wait_all_tasks_blocked()
    (served,) = server._server.connections
    assert isinstance(served.wire.stream, trio.SocketStream)
    os.write(conn.stream.socket.fileno(), request)
    select.select([served.wire.stream.socket.fileno()], [], [], IO_TIMEOUT)
    clock.jump(late_by)


async def _open_after(clock: trio.testing.MockClock, seconds: float, conn: RawConnection) -> bool:
    """Let ``seconds`` pass; whether the server still keeps ``conn`` open (nothing to
    read: a close would be)."""
    await trio.testing.wait_all_tasks_blocked()
    clock.jump(seconds)
    await trio.testing.wait_all_tasks_blocked()
    return not conn.stream.socket.is_readable()


async def test_a_kept_alive_connection_waits_keepalive_timeout_for_each_request(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    transport = HttpTransportConfig(keepalive_timeout=TIMEOUT)
    async with _connected(nursery, transport) as (server, sid, conn):
        assert await _echo(conn, sid, 1, "a") == "a"
        for rid in (2, 3):  # just in time, twice: each answer starts the wait anew
            assert await _open_after(clock, TIMEOUT - 0.5, conn)
            assert await _echo(conn, sid, rid, str(rid)) == str(rid)
        assert await _open_after(clock, TIMEOUT - 0.5, conn)
        assert not await _open_after(clock, 1, conn)
        assert await conn.stream.receive_some(10) == b""  # closed without a word
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().connections == 0


async def test_a_new_connection_waits_header_timeout_for_its_first_request(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    transport = HttpTransportConfig(header_timeout=TIMEOUT, keepalive_timeout=2 * TIMEOUT)
    server = await _json_server(nursery, transport)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        silent = await RawConnection.open(server.port)
        conn = await RawConnection.open(server.port)
        try:
            assert await _open_after(clock, TIMEOUT - 0.5, conn)
            assert await _echo(conn, sid, 1, "in time") == "in time"
            assert not await _open_after(clock, 1, silent)
            assert await silent.stream.receive_some(10) == b""
            # The one served now waits keepalive_timeout from its answer (1 s ago).
            assert await _open_after(clock, 2 * TIMEOUT - 1.5, conn)
            assert not await _open_after(clock, 1, conn)
        finally:
            await conn.aclose()
            await silent.aclose()


async def test_a_request_woken_as_its_wait_times_out_is_served(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    """The request's bytes and the keep-alive deadline reach the server in the same
    scheduler pass, the bytes first: the wait has returned them, so the request is
    served (its deadline came too late to cancel the wait), and the connection goes
    on as usual."""
    transport = HttpTransportConfig(keepalive_timeout=TIMEOUT)
    async with _connected(nursery, transport) as (server, sid, conn):
        assert await _echo(conn, sid, 1, "a") == "a"
        await _send_late(server, conn, clock, _post(conn, sid, 2, "late"), TIMEOUT + 1)
        assert await _answer(conn) == "late"
        assert await _echo(conn, sid, 3, "after") == "after"
        assert await _open_after(clock, TIMEOUT - 0.5, conn)
        assert not await _open_after(clock, 1, conn)


async def test_a_body_that_stops_coming_is_408_after_body_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    transport = HttpTransportConfig(body_timeout=TIMEOUT)
    async with _connected(nursery, transport) as (_, sid, conn):
        await conn.stream.send_all(_post(conn, sid, 1, "cut")[:-10])
        assert await _open_after(clock, TIMEOUT - 0.5, conn)
        assert not await _open_after(clock, 1, conn)
        reply = b""
        while chunk := await conn.stream.receive_some(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 408 ")


async def test_a_json_answer_has_the_same_head_on_the_wire(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head of a legacy session's JSON answer, byte for byte (its content type is
    a constant, normalized once)."""
    server = await _json_server(nursery, HttpTransportConfig())
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        writes = server_writes(monkeypatch)
        conn = await RawConnection.open(server.port)
        try:
            assert await _echo(conn, sid, 1, "a") == "a"
        finally:
            await conn.aclose()
    head, _, body = b"".join(writes).partition(b"\r\n\r\n")
    assert head == (
        b"HTTP/1.1 200 \r\ncontent-type: application/json\r\ncontent-length: %d" % len(body)
    )


async def test_a_first_request_woken_as_its_wait_times_out_is_followed_by_the_keepalive_wait(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    """A new connection's first request, late as above (its ``header_timeout`` passes
    in the pass that wakes the server): served, and the wait for the next request is
    the kept-alive one's, ``keepalive_timeout``, not another ``header_timeout``."""
    transport = HttpTransportConfig(header_timeout=TIMEOUT, keepalive_timeout=2 * TIMEOUT)
    async with _connected(nursery, transport) as (server, sid, conn):
        await _send_late(server, conn, clock, _post(conn, sid, 1, "late"), TIMEOUT + 1)
        assert await _answer(conn) == "late"
        assert await _open_after(clock, 2 * TIMEOUT - 0.5, conn)
        assert not await _open_after(clock, 1, conn)


async def test_shutdown_closes_the_connections_waiting_for_a_request_at_once(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    """A new connection that sent nothing yet, and a kept-alive one whose answer its
    own task wrote: shutdown ends both waits at once (no handler runs), not at
    ``close_timeout``, when it cancels whatever is left."""
    server = await start_server(
        nursery,
        http={"response_mode": "json"},
        transport=HttpTransportConfig(header_timeout=60, keepalive_timeout=60),
        config=SessionConfig(close_timeout=30),
    )
    closed = trio.Event()

    async def close() -> None:
        await server.aclose()
        closed.set()

    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        silent = await RawConnection.open(server.port)
        kept = await RawConnection.open(server.port)
        try:
            assert await _echo(kept, sid, 1, "a") == "a"
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().connections == 2
            start = trio.current_time()
            nursery.start_soon(close)
            await closed.wait()
            assert trio.current_time() - start < 1  # (not close_timeout's 30 s)
            for conn in silent, kept:
                assert await conn.stream.receive_some(10) == b""
        finally:
            await silent.aclose()
            await kept.aclose()

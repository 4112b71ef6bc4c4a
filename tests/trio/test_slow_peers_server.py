"""A server and its slow or silent WebSocket peers: a broadcast is not held up by one
peer that stops reading, and a connection that never starts MCP does not keep its
place. Real sockets on 127.0.0.1 (port 0), timing on ``autojump_clock``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

from mcp_trio import Server, Session, SessionConfig
from mcp_trio._websocket import _open_ws

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "slow", "version": "0"},
    },
}
_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@asynccontextmanager
async def _raw(url: str) -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A plain WebSocket client (no MCP session) over a stream it closes, whoever
    closes the connection (trio-websocket's own client leaves its socket open when
    the server closes first)."""
    async with _open_ws(
        url, subprotocols=["mcp"], max_message_size=1 << 20, connect_timeout=10
    ) as (ws, _, _):
        yield ws


def _call(rid: int, name: str) -> str:
    params = {"name": name, "arguments": {}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


async def test_a_broadcast_is_not_held_up_by_a_peer_that_stops_reading(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # notify_*() waited for every session with no bound but the session's own
    # write_timeout (30 s): one client that stopped reading held up the caller (a tool
    # handler, say) that long. send_task_status was bounded already (1 s).
    server = Server("slow", session_config=SessionConfig(ws_ping_interval=None))

    @server.tool()
    async def big() -> str:
        return "x" * 100_000

    sessions: list[Session] = []

    async def on_session(session: Session) -> None:
        sessions.append(session)
        await trio.sleep_forever()

    handle = await nursery.start(partial(server.serve_websocket, on_session=on_session))
    async with _raw(handle.url) as ws:
        await ws.send_message(json.dumps(_INITIALIZE))
        await ws.get_message()  # (the only message this client reads)
        await ws.send_message(json.dumps(_INITIALIZED))
        for rid in range(1, 200):  # ~20 MB of answers, more than the socket buffers hold
            await ws.send_message(_call(rid, "big"))
        # Wait for the server's writes to back up, without letting the clock jump (a
        # checkpoint, not a blocking wait: the session's write_timeout must not pass).
        # Bounded by steps, not by fail_after: the clock stands still meanwhile. 20
        # answers (2 MB) are past what the sockets hold and within max_outbox_bytes
        # (4 MiB), past which the handlers wait and no more answers are queued.
        for _ in range(1_000_000):
            if sessions and sessions[0].statistics().queued_messages >= 20:
                break
            await trio.sleep(0)
        else:
            pytest.fail("the server's writes never backed up")
        session = sessions[0]
        queued = session.statistics().queued_messages
        start = trio.current_time()
        await server.notify_tools_changed()
        waited = trio.current_time() - start
        assert waited <= 1.0 + 1e-6  # (it waited for the session's write_timeout: 30 s)
        # It went to the session all the same: queued behind the stuck write, to go out
        # in turn (the session is still open: its write_timeout has not passed).
        assert not session.closed and session.statistics().queued_messages > queued


async def test_a_websocket_peer_that_sends_no_message_is_closed_at_handshake_timeout(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # Nothing ended a connection whose peer never began MCP (trio-websocket answers the
    # keep-alive pings itself): each held one of max_connections for good.
    server = Server("silent", session_config=SessionConfig(handshake_timeout=5))
    handle = await nursery.start(partial(server.serve_websocket, max_connections=1))
    with trio.fail_after(60):
        async with _raw(handle.url) as silent:
            start = trio.current_time()
            with pytest.raises(trio_websocket.ConnectionClosed) as info:
                await silent.get_message()
            waited = trio.current_time() - start
        await trio.testing.wait_all_tasks_blocked()  # (the server is done with it)
        # Its place is free again: the next client is served.
        async with _raw(handle.url) as ws:
            await ws.send_message(json.dumps(_INITIALIZE))
            answer = json.loads(await ws.get_message())
    closed = info.value.reason
    assert closed is not None and closed.code == 1008 and abs(waited - 5) < 0.5
    assert answer["id"] == 0 and "result" in answer


async def test_a_websocket_peer_that_speaks_in_time_is_not_closed(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    server = Server("talks", session_config=SessionConfig(handshake_timeout=5))
    handle = await nursery.start(partial(server.serve_websocket, max_connections=1))
    with trio.fail_after(60):
        async with _raw(handle.url) as ws:
            await ws.send_message(json.dumps(_INITIALIZE))
            await ws.get_message()
            await ws.send_message(json.dumps(_INITIALIZED))
            await trio.sleep(10)  # idle past handshake_timeout: a live session, kept
            await ws.send_message(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            assert json.loads(await ws.get_message()) == {"jsonrpc": "2.0", "id": 1, "result": {}}

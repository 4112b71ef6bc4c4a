"""Stopping a WebSocket server that never had a connection returns at once (nothing to
wait for), and so does a second stop."""

from __future__ import annotations

import trio
import trio.testing

from mcp_trio import Server, WebSocketServeHandle


async def test_a_server_with_no_connection_stops_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server("idle")
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(server.serve_websocket)
        assert isinstance(handle, WebSocketServeHandle)
        started = trio.current_time()
        with trio.fail_after(60):
            await handle.aclose()
            await handle.aclose()
        assert trio.current_time() == started  # (no grace period, no close to wait for)
        nursery.cancel_scope.cancel()

"""A request cancelled while the server is still starting it (waiting for a handler
slot, before its response is written) closes its response: the core is told the stream
is over (``HttpServer.stream_closed``), so no response of it is left open. Real sockets
on 127.0.0.1 (port 0), with ``fail_after``."""

from __future__ import annotations

from functools import partial

import trio
import trio.testing

from mcp_sansio.http import HttpServerConfig
from mcp_trio import SessionConfig
from mcp_trio._http_server import HttpServeHandle, serve_http

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    raw_session,
    rpc,
    server_connection_config,
    session_headers,
)


async def _second_waits_for_the_slot(
    nursery: trio.Nursery, app: App, second: bytes
) -> tuple[HttpServeHandle, list[RawConnection]]:
    """A legacy server with one handler slot, its first call (``block``) holding it and
    ``second`` waiting for it, its response open (registered) already: the server and
    the two connections (the caller closes them)."""
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            app.handlers,
            connection_config=server_connection_config(era="legacy"),
            http_config=HttpServerConfig(),
            config=SessionConfig(max_concurrent_handlers=1),
        )
    )
    sid = await raw_session(handle.port)
    headers = session_headers(sid)
    connections = [await RawConnection.open(handle.port) for _ in range(2)]
    await connections[0].send("POST", headers=headers, body=rpc(1, "tools/call", call("block")))
    await app.started_event.wait()
    await connections[1].send("POST", headers=headers, body=second)
    while handle.statistics().open_responses < 2:
        await trio.testing.wait_all_tasks_blocked()
    assert len(app.started) == 1  # (the second waits for the slot)
    return handle, connections


async def test_a_request_cancelled_while_it_waits_for_a_handler_slot_closes_its_response() -> None:
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            second = rpc(2, "tools/call", call("block"))
            handle, connections = await _second_waits_for_the_slot(nursery, app, second)
            try:
                nursery.cancel_scope.cancel()  # serve_http is cancelled: both are
            finally:
                with trio.CancelScope(shield=True):  # (each closes, cancelled or not)
                    for conn in connections:
                        await conn.aclose()
    assert len(app.started) == 1  # the second never ran
    assert handle.statistics().open_responses == 0


async def test_a_request_waiting_for_a_handler_slot_when_the_server_stops_is_not_started() -> None:
    # A graceful stop refuses new POSTs (503); one that came before and waits for a slot
    # is answered "server shutting down" when it gets one, not run (as over WebSocket).
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            second = rpc(2, "tools/call", call("echo", text="b"))
            handle, connections = await _second_waits_for_the_slot(nursery, app, second)
            try:
                nursery.start_soon(handle.aclose)
                await trio.testing.wait_all_tasks_blocked()
                app.release.set()  # the slot is free: the waiting request gets it
                first = await connections[0].response()
                second_answer = await connections[1].response()
            finally:
                with trio.CancelScope(shield=True):
                    for conn in connections:
                        await conn.aclose()
    assert b"released" in first.body
    assert b"server shutting down" in second_answer.body and b'"b"' not in second_answer.body
    assert len(app.started) == 1

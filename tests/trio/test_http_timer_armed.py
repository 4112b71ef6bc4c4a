"""After an answer written from the handler's task (the connection left parked), the
endpoint's timer is armed at the core's deadline: the response's end made the session
idle, and its idle expiry must be timed from then. (``Endpoint.pump`` re-arms once,
through the ``close_response`` that ends such a response.)"""

from __future__ import annotations

import trio

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    raw_session,
    rpc,
    session_headers,
    start_server,
)


async def test_the_timer_is_armed_at_the_core_deadline_after_a_direct_answer(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(
        nursery, App(), http={"session_idle_timeout": 5.0, "response_mode": "json"}
    )
    endpoint = server._endpoint
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=rpc(7, "tools/call", call("echo")))
            response = await conn.response()
            assert response.status == 200 and response.json()["id"] == 7
            deadline = server.http.next_deadline()
            assert deadline is not None  # the session's idle expiry
            assert endpoint._timer_scope is not None
            assert endpoint._timer_scope.deadline == deadline
        finally:
            await conn.aclose()

"""``Endpoint.pump`` closes every response finished in its pass: answers written whole
by the routing task while their connections' tasks stay parked (kept alive) are over
at once, each told to the core, not left until their connection next wakes."""

from __future__ import annotations

import trio
import trio.testing

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


async def test_answers_finished_in_one_pass_are_all_closed(nursery: trio.Nursery) -> None:
    # Two JSON responses wait for their handlers; the session's DELETE ends both in
    # one drain of the core, so one pump finds both written whole.
    app = App()
    server = await start_server(nursery, app, http={"response_mode": "json"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conns = [await RawConnection.open(server.port) for _ in range(3)]
        try:
            for rid, conn in enumerate(conns[:2], 10):
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", call("block")))
            while len(app.started) < 2:
                await trio.testing.wait_all_tasks_blocked()
            await trio.testing.wait_all_tasks_blocked()
            assert len(server._endpoint._responses) == 2
            await conns[2].send("DELETE", headers=(("mcp-session-id", sid),))
            for conn in conns[:2]:
                await conn.head()
                await conn.body()
            await trio.testing.wait_all_tasks_blocked()
            assert len(server._endpoint._responses) == 0  # (their connections still parked)
        finally:
            for conn in conns:
                await conn.aclose()

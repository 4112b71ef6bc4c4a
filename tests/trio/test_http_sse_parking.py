"""A connection parks after an answer written from the handler's task only while its
wait is live: an answer that ends an SSE response in the scheduler pass in which the
connection's wait timed out (its keep-alive comment timer) must not leave the woken
connection taking itself for an idle keep-alive connection and closing."""

from __future__ import annotations

import trio
import trio.testing

from mcp_trio._http_config import HttpTransportConfig

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

ROUNDS = 16
"""The handler's task runs first in about half of those passes: 16 tries miss it 1 in 65,536."""


async def test_an_answer_written_as_the_wait_times_out_keeps_the_connection(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    gates: list[trio.Event] = []
    app = App()

    async def gated(ctx: object) -> dict[str, object]:
        gate = trio.Event()
        gates.append(gate)
        await gate.wait()
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    app.handlers.set_request_handler("tools/call", gated)
    server = await start_server(
        nursery,
        app,
        http={"response_mode": "sse"},
        transport=HttpTransportConfig(sse_keepalive_interval=5.0),
    )
    with trio.fail_after(IO_TIMEOUT + ROUNDS * 5.0):  # (the clock jumps 5 s a request)
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            for rid in range(1, ROUNDS + 1):
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", call("g")))
                head = await conn.head()
                assert head.status_code == 200
                while len(gates) < rid:
                    await trio.sleep(0.001)
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(5.0)  # the keep-alive comment is due ...
                gates[-1].set()  # ... in the pass in which the answer ends the response
                body = await conn.body()
                assert f'"id":{rid}'.encode() in body
                conn.next_cycle()
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().connections == 1  # (the same one throughout)
        finally:
            await conn.aclose()

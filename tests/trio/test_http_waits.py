"""How the HTTP server waits: bodies read at once or over time, answers awaited by the
connection task itself (it reads its socket meanwhile, so a client that leaves is seen
and a pipelined request waits), answers ready at once, errors and SSE."""

from __future__ import annotations

import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    modern,
    raw_session,
    rpc,
    session_headers,
    start_server,
)


def request_bytes(
    conn: h11.Connection, headers: tuple[tuple[str, str], ...], body: bytes
) -> tuple[bytes, bytes]:
    """The head and the body of a POST framed by ``conn`` (not yet written)."""
    fields = [("host", "127.0.0.1"), *headers, ("content-length", str(len(body)))]
    head = conn.send(h11.Request(method="POST", target="/mcp", headers=fields)) or b""
    return head, (conn.send(h11.Data(data=body)) or b"") + (conn.send(h11.EndOfMessage()) or b"")


async def test_a_body_that_arrives_in_pieces_is_read(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        head, body = request_bytes(conn.h11, *modern(1, "echo", text="slow"))
        try:
            await conn.stream.send_all(head)
            await trio.testing.wait_all_tasks_blocked()
            for piece in (body[:7], body[7:]):
                await conn.stream.send_all(piece)
                await trio.testing.wait_all_tasks_blocked()
            response = await conn.response()
        finally:
            await conn.aclose()
    assert response.status == 200
    assert loads(response.body)["result"]["content"][0]["text"] == "slow"


async def test_a_body_that_stops_coming_is_408(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(nursery, transport=HttpTransportConfig(body_timeout=3.0))
    head, body = request_bytes(h11.Connection(h11.CLIENT), *modern(1, "echo", text="never"))
    with trio.fail_after(IO_TIMEOUT):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(head + body[:5])
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(4)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        await stream.aclose()
    assert data.startswith(b"HTTP/1.1 408 ")


async def test_a_pipelined_request_waits_for_the_answer_before_it(nursery: trio.Nursery) -> None:
    app = App()
    server = await start_server(nursery, app, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        first = b"".join(request_bytes(conn.h11, *modern(1, "block")))
        # The second request is framed by a connection of its own: ours must wait for
        # the first answer before it may send again.
        second = b"".join(request_bytes(h11.Connection(h11.CLIENT), *modern(2, "echo", text="2")))
        try:
            await conn.stream.send_all(first)
            await app.started_event.wait()
            await conn.stream.send_all(second)  # read while the first answer is awaited
            await trio.testing.wait_all_tasks_blocked()
            assert not app.cancelled  # the second request's bytes wait; they cancel nothing
            app.release.set()
            one = await conn.response()
            conn.next_cycle()
            request_bytes(conn.h11, *modern(2, "echo", text="2"))  # (already on the wire)
            two = await conn.response()
        finally:
            await conn.aclose()
    assert (one.json()["id"], one.json()["result"]["content"][0]["text"]) == (1, "released")
    assert (two.json()["id"], two.json()["result"]["content"][0]["text"]) == (2, "2")


async def test_a_client_that_leaves_while_its_answer_is_awaited_cancels_it(
    nursery: trio.Nursery,
) -> None:
    app = App()
    server = await start_server(nursery, app, era="modern")
    headers, body = modern(7, "block")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        await conn.send("POST", headers=headers, body=body)
        await app.started_event.wait()
        await conn.aclose()
        await app.cancelled_event.wait()
        await trio.testing.wait_all_tasks_blocked()
    assert app.cancelled == [7]
    assert server.statistics().modern_requests == 0
    assert server.statistics().open_responses == 0


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_answers_ready_at_once_and_errors_in_each_mode(
    nursery: trio.Nursery, mode: str
) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            answers = []
            for rid, tool in ((1, "echo"), (2, "no such tool"), (3, "echo")):
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", call(tool)))
                response = await conn.response()
                conn.next_cycle()
                assert response.status == 200
                if mode == "json":
                    assert response.headers["content-type"] == "application/json"
                    answers.append(loads(response.body))
                else:
                    assert response.headers["content-type"] == "text/event-stream"
                    data = [
                        line[6:]
                        for line in response.body.split(b"\n")
                        if line.startswith(b"data: ") and len(line) > 6
                    ]
                    answers.extend(loads(d) for d in data)
        finally:
            await conn.aclose()
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert "result" in answers[0] and "error" in answers[1] and "result" in answers[2]
    assert server.statistics().open_responses == 0


async def test_sse_events_pushed_while_a_write_is_pending_all_arrive(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery, http={"response_mode": "sse"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        body = rpc(5, "tools/call", {**call("progress", steps=20), "_meta": {"progressToken": "t"}})
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=body)
            response = await conn.response()
        finally:
            await conn.aclose()
    messages = [
        loads(line[6:])
        for line in response.body.split(b"\n")
        if line.startswith(b"data: ") and len(line) > 6
    ]
    progress = [m["params"]["progress"] for m in messages if "method" in m]
    assert progress == list(range(1, 21))
    assert messages[-1]["id"] == 5 and "result" in messages[-1]
    assert dumps(messages[-1]["result"]["content"][0]["text"]) == b'"done"'

"""The paths that skip a scheduler pass: writes the socket takes at once
(``H11Stream.write_nowait``), the client's ``send_nowait`` on a kept-alive connection,
and the server writing an awaited answer from the handler's task and leaving the
connection's task parked on its socket as an idle keep-alive connection."""

from __future__ import annotations

import logging
import socket
import struct
from typing import Any

import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio import McpError
from mcp_trio._http_client import HttpChannel, open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_pool import Pool
from mcp_trio._http_wire import H11Stream, WireError

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    client_connection_config,
    modern,
    raw_session,
    rpc,
    session_headers,
    start_server,
    text_of,
)
from .test_http_waits import request_bytes

BIG = 4_000_000
"""More than a loopback socket takes at once: the rest of a write must wait."""


# ------------------------------------------------------------------ H11Stream.write_nowait


def _pair() -> tuple[H11Stream, trio.SocketStream]:
    a, b = trio.socket.socketpair()
    return H11Stream(trio.SocketStream(a), h11.CLIENT, 65_536), trio.SocketStream(b)


async def test_write_nowait_writes_what_the_socket_takes_and_returns_the_rest() -> None:
    wire, peer = _pair()
    try:
        assert wire.writes_directly
        assert wire.write_nowait(b"hello") == b""
        assert await peer.receive_some(10) == b"hello"
        rest = wire.write_nowait(b"x" * BIG)
        assert 0 < len(rest) < BIG  # the kernel took a part, without waiting
        assert wire.write_nowait(b"") == b""
    finally:
        await wire.aclose()
        await peer.aclose()


async def test_write_nowait_on_a_closed_stream_is_a_wire_error() -> None:
    wire, peer = _pair()
    await wire.aclose()
    with pytest.raises(WireError):
        wire.write_nowait(b"late")
    await peer.aclose()


async def test_streams_other_than_plain_tcp_are_left_to_write() -> None:
    left, right = trio.testing.memory_stream_pair()
    wire = H11Stream(left, h11.CLIENT, 65_536)
    assert not wire.writes_directly
    assert wire.write_nowait(b"data") == b"data"
    await wire.send([h11.Request(method="GET", target="/", headers=[("host", "x")])], 1.0)
    assert (await right.receive_some()).startswith(b"GET / HTTP/1.1")


# ------------------------------------------------------------------ H11Stream.read_at_once

_HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"


class _Steps(trio.abc.Instrument):
    """Counts the scheduler's steps of one task (a step follows each yield)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def _receive_yields(wire: H11Stream) -> bool:
    """Whether ``wire.receive()`` went through the scheduler (and read something)."""
    steps = _Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        assert await wire.receive()
    finally:
        trio.lowlevel.remove_instrument(steps)
    return steps.steps > 0


async def test_the_first_read_of_an_answer_takes_what_is_there_without_yielding() -> None:
    wire, peer = _pair()
    try:
        await peer.send_all(_HEAD)
        wire.read_at_once = True
        assert not await _receive_yields(wire)
        assert wire.received == len(_HEAD) and not wire.read_at_once  # once only
        await peer.send_all(b"more")
        assert await _receive_yields(wire)  # later reads yield, as trio's do
        assert wire.received == len(_HEAD) + 4
    finally:
        await wire.aclose()
        await peer.aclose()


async def test_a_read_at_once_waits_for_bytes_not_there_yet(nursery: trio.Nursery) -> None:
    wire, peer = _pair()
    try:
        wire.read_at_once = True
        nursery.start_soon(peer.send_all, _HEAD)
        with trio.fail_after(IO_TIMEOUT):
            assert await wire.receive()
        assert wire.received == len(_HEAD)
    finally:
        await wire.aclose()
        await peer.aclose()


async def test_a_read_at_once_is_still_a_cancellation_point_and_fails_as_reads_do() -> None:
    wire, peer = _pair()
    try:
        await peer.send_all(_HEAD)
        wire.read_at_once = True
        with trio.CancelScope() as scope:
            scope.cancel()
            await wire.receive()
        assert scope.cancelled_caught and wire.received == 0  # nothing taken
        wire.close_nowait()
        wire.read_at_once = True
        with pytest.raises(WireError):
            await wire.receive()
    finally:
        await wire.aclose()
        await peer.aclose()


async def test_a_read_at_once_sees_the_end_of_input_as_reads_do() -> None:
    wire, peer = _pair()
    try:
        await peer.aclose()
        wire.read_at_once = True
        assert not await wire.receive()
        assert wire.ended and wire.received == 0
    finally:
        await wire.aclose()


async def test_a_read_at_once_of_a_reset_connection_is_a_wire_error() -> None:
    a, listener = trio.socket.socket(), trio.socket.socket()
    try:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        await a.connect(listener.getsockname())
        b, _ = await listener.accept()
        # Closing with a zero linger sends a reset, not a FIN.
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()
        wire = H11Stream(trio.SocketStream(a), h11.CLIENT, 65_536)
        await trio.lowlevel.wait_readable(a)
        wire.read_at_once = True
        with pytest.raises(WireError, match="ConnectionReset"):
            await wire.receive()
    finally:
        a.close()
        listener.close()


async def test_a_read_at_once_of_part_of_a_head_leaves_the_rest_to_later_reads() -> None:
    wire, peer = _pair()
    try:
        await peer.send_all(_HEAD[:10])
        wire.read_at_once = True
        assert await wire.receive()
        assert wire.received == 10
        assert wire.h11.next_event() is h11.NEED_DATA
        await peer.send_all(_HEAD[10:])
        with trio.fail_after(IO_TIMEOUT):
            event = await wire.next_event()
        assert isinstance(event, h11.Response) and event.status_code == 200
    finally:
        await wire.aclose()
        await peer.aclose()


async def test_a_read_at_once_waiting_on_a_stream_closed_meanwhile_is_a_wire_error(
    nursery: trio.Nursery,
) -> None:
    wire, peer = _pair()
    failures: list[BaseException] = []

    async def read() -> None:
        wire.read_at_once = True
        try:
            await wire.receive()
        except WireError as exc:
            failures.append(exc)

    try:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        wire.close_nowait()
        with trio.fail_after(IO_TIMEOUT):
            while not failures:
                await trio.sleep(0)
        assert "ClosedResourceError" in str(failures[0])
    finally:
        await peer.aclose()


# ------------------------------------------------------------------ the client


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_answer_to_a_request_on_a_new_connection_is_read_at_once_too(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    reads: list[str] = []
    original = H11Stream._read_at_once

    async def spy(self: H11Stream) -> bytes:
        reads.append(self.h11.their_state.__name__)
        return await original(self)

    monkeypatch.setattr(H11Stream, "_read_at_once", spy)
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(server.url, connection_config=client_connection_config(era)):
            # The handshake's request: no idle connection, so a task of its own sends
            # it (Pool.roundtrip) and reads the answer at once.
            assert reads[:1] == ["SEND_RESPONSE"]


async def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record whether each ``Pool.send_nowait`` started a request."""
    started: list[bool] = []
    original = Pool.send_nowait

    def spy(self: Pool, request: Any) -> Any:
        result = original(self, request)
        started.append(result is not None)
        return result

    monkeypatch.setattr(Pool, "send_nowait", spy)
    return started


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_requests_on_a_kept_alive_connection_are_sent_without_waiting(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    started = await _spy(monkeypatch)
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            for i in range(3):
                assert text_of(
                    await client.request("tools/call", call("echo", text=str(i)))
                ) == str(i)
    assert started.count(True) >= 2  # the first request opened the connection


async def test_a_request_the_socket_takes_in_part_is_finished_by_its_task(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await _spy(monkeypatch)
    server = await start_server(nursery, http={"max_body_size": 2 * BIG})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            await client.request("tools/call", call("echo", text="warm"))  # a connection
            result = await client.request("tools/call", call("echo", text="y" * BIG))
    assert text_of(result) == "y" * BIG
    assert started[-1]


async def test_a_failed_write_without_waiting_falls_back_to_a_new_connection(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await _spy(monkeypatch)
    original = H11Stream.write_nowait
    armed: list[bool] = []

    def flaky(self: H11Stream, data: bytes) -> bytes | memoryview:
        if self.h11.our_role is h11.CLIENT and armed:
            armed.clear()  # once: nothing of the request is out
            self.h11.send_failed()
            raise WireError("reset")
        return original(self, data)

    monkeypatch.setattr(H11Stream, "write_nowait", flaky)
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            first = await client.request("tools/call", call("echo", text="1"))
            armed.append(True)  # the next write, on the kept-alive connection, fails
            second = await client.request("tools/call", call("echo", text="2"))
    assert (text_of(first), text_of(second)) == ("1", "2")
    assert not armed and started[-1] is False  # send() then used a new connection


async def test_a_connection_the_server_closed_is_not_written_without_waiting(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, clock: trio.testing.MockClock
) -> None:
    started = await _spy(monkeypatch)
    server = await start_server(nursery, transport=HttpTransportConfig(keepalive_timeout=2.0))
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            await client.request("tools/call", call("echo", text="1"))
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(3)  # the server closes the idle connection
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().connections == 0
            result = await client.request("tools/call", call("echo", text="2"))
    assert text_of(result) == "2"
    assert started[-1] is False


# ------------------------------------------------------------------ the server


async def _answered(conn: RawConnection, rid: int, text: str) -> Any:
    await conn.send("POST", headers=modern(rid, "echo")[0], body=modern(rid, "echo", text=text)[1])
    response = await conn.response()
    conn.next_cycle()
    assert response.status == 200
    return response.json()


async def test_a_parked_connection_serves_the_next_request_even_in_pieces(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            assert (await _answered(conn, 1, "a"))["result"]["content"][0]["text"] == "a"
            await trio.testing.wait_all_tasks_blocked()
            stats = server.statistics()
            assert (stats.open_responses, stats.modern_requests, stats.connections) == (0, 0, 1)
            head, body = request_bytes(conn.h11, *modern(2, "echo", text="b"))
            for piece in (head[:10], head[10:], body):
                await conn.stream.send_all(piece)
                await trio.testing.wait_all_tasks_blocked()
            response = await conn.response()
        finally:
            await conn.aclose()
    assert response.json()["result"]["content"][0]["text"] == "b"


async def test_a_parked_connection_closes_after_the_keepalive_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(
        nursery, era="modern", transport=HttpTransportConfig(keepalive_timeout=2.0)
    )
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        await _answered(conn, 1, "a")
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(1)
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().connections == 1  # not yet
        clock.jump(2)
        assert await conn.stream.receive_some(10) == b""
        await conn.aclose()
        await trio.testing.wait_all_tasks_blocked()
    assert server.statistics().connections == 0


async def test_a_client_closing_a_parked_connection_is_quietly_forgotten(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.DEBUG, "mcp_trio"):
        conn = await RawConnection.open(server.port)
        await _answered(conn, 1, "a")
        await conn.aclose()
        await trio.testing.wait_all_tasks_blocked()
    assert server.statistics().connections == 0
    assert "idle HTTP connection closed" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_shutdown_closes_a_parked_connection_at_once(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        await _answered(conn, 1, "a")
        await trio.testing.wait_all_tasks_blocked()
        await server.aclose()
        assert await conn.stream.receive_some(10) == b""
        await conn.aclose()


async def test_an_answer_the_socket_takes_in_part_is_finished_by_the_connection(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send(
                "POST", headers=modern(1, "echo")[0], body=modern(1, "echo", text="z" * BIG)[1]
            )
            await trio.testing.wait_all_tasks_blocked()  # the rest waits for us to read
            big = await conn.response()
            conn.next_cycle()
            after = await _answered(conn, 2, "after")
        finally:
            await conn.aclose()
    assert loads(big.body)["result"]["content"][0]["text"] == "z" * BIG
    assert after["result"]["content"][0]["text"] == "after"


async def test_a_failed_direct_write_drops_the_connection_only(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = H11Stream.write_nowait
    fail = [True]

    def flaky(self: H11Stream, data: bytes) -> bytes | memoryview:
        if self.h11.our_role is h11.SERVER and fail and data.startswith(b"HTTP/1.1 200"):
            fail.clear()
            self.h11.send_failed()
            raise WireError("reset")
        return original(self, data)

    monkeypatch.setattr(H11Stream, "write_nowait", flaky)
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        await conn.send("POST", headers=modern(1, "echo")[0], body=modern(1, "echo", text="a")[1])
        assert await conn.stream.receive_some(10) == b""  # dropped without an answer
        await conn.aclose()
        again = await RawConnection.open(server.port)
        try:
            assert (await _answered(again, 2, "b"))["result"]["content"][0]["text"] == "b"
        finally:
            await again.aclose()
    assert server.statistics().open_responses == 0


async def test_a_pipelined_request_wakes_the_connection_after_a_direct_answer(
    nursery: trio.Nursery,
) -> None:
    app = App()
    server = await start_server(nursery, app, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        first = b"".join(request_bytes(conn.h11, *modern(1, "block")))
        second = b"".join(request_bytes(h11.Connection(h11.CLIENT), *modern(2, "echo", text="2")))
        try:
            await conn.stream.send_all(first)
            await app.started_event.wait()
            await conn.stream.send_all(second)
            await trio.testing.wait_all_tasks_blocked()
            app.release.set()  # answered from the handler's task, with bytes waiting
            one = await conn.response()
            conn.next_cycle()
            request_bytes(conn.h11, *modern(2, "echo", text="2"))  # (already on the wire)
            two = await conn.response()
        finally:
            await conn.aclose()
    assert (one.json()["id"], two.json()["id"]) == (1, 2)


async def test_send_nowait_takes_every_request_and_leaves_the_rest_to_send(
    nursery: trio.Nursery,
) -> None:
    """A request never waits for the session's writer: with no kept-alive connection,
    or every connection slot taken, ``send_nowait`` hands it to a task of its own all
    the same (which waits for a slot). ``notifications/initialized`` (awaited) and what
    is not JSON are left to ``send``; a cancellation joins the one-way queue at once (a
    closing session sends only what is taken so: its courtesy cancellations)."""
    server = await start_server(nursery)
    channel = HttpChannel(server.url)
    request = rpc(1, "tools/list")
    assert not channel.send_nowait(request)  # not running yet
    await nursery.start(channel.run)
    assert not channel.send_nowait(b"not json")  # send() raises the error
    notification = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert not channel.send_nowait(notification)  # awaits its 202
    cancel = {"requestId": 1}
    assert channel.send_nowait(
        dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    )
    assert len(channel._one_way) == 1
    with trio.fail_after(IO_TIMEOUT):
        assert channel.send_nowait(request)  # no kept-alive connection yet: its task
        assert loads(await channel.receive())["id"] == 1
        holders = [object() for _ in range(channel.transport.max_client_connections)]
        for holder in holders:
            channel._pool.limiter.acquire_on_behalf_of_nowait(holder)
        assert channel.send_nowait(rpc(2, "tools/list"))  # its task waits for a slot
        await trio.testing.wait_all_tasks_blocked()
        assert channel._streams.keys() == {2}  # (not sent: no slot)
        channel._pool.limiter.release_on_behalf_of(holders.pop())
        assert loads(await channel.receive())["id"] == 2
        for holder in holders:
            channel._pool.limiter.release_on_behalf_of(holder)
    await channel.aclose()
    assert not channel.send_nowait(request)


async def test_a_request_the_socket_took_none_of_goes_on_a_new_connection(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await _spy(monkeypatch)
    original = H11Stream.write_nowait
    armed: list[bool] = []

    def full(self: H11Stream, data: bytes) -> bytes | memoryview:
        if self.h11.our_role is h11.CLIENT and armed:
            armed.clear()
            return data  # as if the socket's buffer were full
        return original(self, data)

    monkeypatch.setattr(H11Stream, "write_nowait", full)
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            await client.request("tools/call", call("echo", text="1"))
            armed.append(True)
            result = await client.request("tools/call", call("echo", text="2"))
    assert text_of(result) == "2"
    assert started[-1] is False


async def test_a_failure_writing_the_rest_fails_only_that_request(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = H11Stream.write
    armed: list[bool] = []

    async def broken(self: H11Stream, data: Any, timeout: float | None) -> None:
        if self.h11.our_role is h11.CLIENT and armed:
            armed.clear()
            raise WireError("reset")
        await original(self, data, timeout)

    monkeypatch.setattr(H11Stream, "write", broken)
    server = await start_server(nursery, http={"max_body_size": 2 * BIG})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            await client.request("tools/call", call("echo", text="warm"))
            armed.append(True)
            with pytest.raises(McpError, match="reset"):
                await client.request("tools/call", call("echo", text="y" * BIG))
            result = await client.request("tools/call", call("echo", text="after"))
    assert text_of(result) == "after"


def _sse_messages(body: bytes) -> list[Any]:
    lines = body.split(b"\n")
    return [loads(line[6:]) for line in lines if line.startswith(b"data: ") and len(line) > 6]


async def _rest_of_body(conn: RawConnection) -> bytes:
    body = b""
    while not isinstance(event := await conn.next_event(), h11.EndOfMessage):
        body += event.data
    return body


async def test_keepalive_comments_go_on_after_events_written_directly(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    app = App()
    server = await start_server(
        nursery,
        app,
        http={"response_mode": "sse"},
        transport=HttpTransportConfig(sse_keepalive_interval=2.0),
    )
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        meta = {"_meta": {"progressToken": "t"}}
        body = rpc(3, "tools/call", {**call("block", progress=True), **meta})
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=body)
            await app.started_event.wait()
            await trio.testing.wait_all_tasks_blocked()
            head = await conn.head()
            seen = b""
            while b"progress" not in seen:  # the priming event, then progress 1
                seen += await conn.read_data()
            assert b"keep-alive" not in seen
            clock.jump(3)
            assert b"keep-alive" in await conn.read_data()
            app.release.set()
            seen += await _rest_of_body(conn)
        finally:
            await conn.aclose()
    assert head.status_code == 200
    messages = _sse_messages(seen)
    assert [m["params"]["progress"] for m in messages if "method" in m] == [1, 2]
    assert messages[-1]["id"] == 3 and "result" in messages[-1]


async def test_a_failed_direct_sse_write_drops_the_connection(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = H11Stream.write_nowait
    armed: list[bool] = []

    def flaky(self: H11Stream, data: bytes) -> bytes | memoryview:
        if self.h11.our_role is h11.SERVER and armed and bytes(data[:5]) != b"HTTP/":
            armed.clear()
            self.h11.send_failed()
            raise WireError("reset")
        return original(self, data)

    monkeypatch.setattr(H11Stream, "write_nowait", flaky)
    app = App()
    server = await start_server(nursery, app, http={"response_mode": "sse"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=rpc(4, "tools/call", call("block")))
            await app.started_event.wait()
            head = await conn.head()
            await trio.testing.wait_all_tasks_blocked()
            armed.append(True)
            app.release.set()
            rest = b""
            while chunk := await conn.stream.receive_some(65536):
                rest += chunk
        finally:
            await conn.aclose()
    assert head.status_code == 200
    assert b'"id":4' not in rest  # cut short: a legacy client resumes from the store
    await trio.testing.wait_all_tasks_blocked()
    assert server.statistics().open_responses == 0

"""A legacy request's SSE stream, resumed for as long as the server answers with a stream.

``2025-11-25/basic/transports.mdx``: after an event with an id, the server MAY close the
connection at any time, and the client SHOULD then poll (``GET`` + ``Last-Event-ID``);
disconnection SHOULD NOT be read as cancelling the request; the client MUST respect
``retry``. So a resumption answered with a stream (a priming event id, then the end) is
the server saying "come back later": the client keeps polling at the server's ``retry``
(backing off while nothing comes if it announced none), bounded by the request's own
timeout. Only attempts that get no stream (an error status the server may get over, no
answer) count towards ``max_resume_attempts``; past
it, or when a resumption is refused, the request fails and the server is told
(``notifications/cancelled``). Junk ``data:`` is no progress, and no stream is reopened
in a tight loop, whatever ``retry`` says.

Real sockets on 127.0.0.1, port 0: a hand-written server. The clock is the
``autojump_clock``: loopback I/O is done before the run loop would sleep, so virtual
time moves only for timers, and the client's waits are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

import attrs
import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps
from mcp_sansio.http import MIN_REOPEN_DELAY
from mcp_trio import McpError, RequestTimeout
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    call,
    client_connection_config,
    fake_server_url,
    read_request,
    respond,
    text_of,
)

JSON = ("content-type", "application/json")
SSE = ("content-type", "text/event-stream")
SESSION = ("mcp-session-id", "s1")
NO_GET = HttpTransportConfig(open_get_stream=False)
LONG = 10_000.0
"""A bound no test reaches in virtual time (every wait is exact)."""

Stream = tuple[int, tuple[tuple[str, str], ...], bytes] | None
"""What the server answers a request with: status, headers, body; ``None``: the
connection is closed without an answer."""


def primed(n: int, retry_ms: int = 100) -> Stream:
    """A stream that brings nothing but a new event id, then ends (a polling server)."""
    return 200, (SESSION, SSE), f"id: p{n}\nretry: {retry_ms}\ndata: \n\n".encode()


def answered(rid: Any, text: str) -> Stream:
    result = {"content": [{"type": "text", "text": text}]}
    message = dumps({"jsonrpc": "2.0", "id": rid, "result": result}).decode()
    return 200, (SESSION, SSE), f"id: end\ndata: {message}\n\n".encode()


@attrs.define
class Polling:
    """A legacy server whose ``tools/call`` stream, and each resumption of it, is what
    ``resume(n, call_id)`` says (``n``: 0 for the POST, then 1, 2, ... per resumption).
    It notes when each resumption came and the ``notifications/cancelled`` it got."""

    resume: Callable[[int, Any], Stream]
    get_stream: Stream = (405, (SESSION,), b"")
    """The answer to each GET that opens the session's stream (no ``Last-Event-ID``)."""
    opened: int = 0
    gets: list[float] = attrs.field(factory=list)
    last_event_ids: list[str] = attrs.field(factory=list)
    cancelled: list[dict[str, Any]] = attrs.field(factory=list)
    cancelled_event: trio.Event = attrs.field(factory=trio.Event)
    call_id: Any = None

    async def serve(self, stream: trio.SocketStream) -> None:
        with suppress(trio.BrokenResourceError):  # (a client that gave up may reset one)
            await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (found := await read_request(conn, stream)) is not None:
            head, message = found
            answer: Stream
            if message is not None and message.get("method") == "initialize":
                caps: dict[str, Any] = {"tools": {}}
                result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": {}}
                body = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
                answer = 200, (SESSION, JSON), body
            elif head.method == b"GET" and b"last-event-id" not in dict(head.headers):
                self.opened += 1
                assert self.opened < 500, "the client reopens its GET stream in a tight loop"
                answer = self.get_stream
            elif head.method == b"GET":
                self.gets.append(trio.current_time())
                # (A client that spins would never let virtual time pass: stop it here.)
                assert len(self.gets) < 500, "the client reconnects in a tight loop"
                headers = dict(head.headers)
                self.last_event_ids.append(headers[b"last-event-id"].decode())
                answer = self.resume(len(self.gets), self.call_id)
            elif head.method == b"DELETE" or "id" not in message:
                if message is not None and message.get("method") == "notifications/cancelled":
                    self.cancelled.append(message["params"])
                    self.cancelled_event.set()
                answer = 202, (SESSION,), b""
            else:  # the tools/call
                self.call_id = message["id"]
                answer = self.resume(0, self.call_id)
            if answer is None:
                return  # (closed without an answer)
            status, headers_out, payload = answer
            await respond(conn, stream, payload, status=status, headers=headers_out)
            if conn.our_state is h11.MUST_CLOSE or head.method == b"GET":
                return
            conn.start_next_cycle()


async def polling_client(nursery: trio.Nursery, server: Polling, **options: Any) -> Any:
    url = await fake_server_url(nursery, server.serve)
    return open_http_client(
        url, connection_config=client_connection_config("legacy"), transport=NO_GET, **options
    )


async def test_a_server_that_polls_answers_a_long_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Each resumption brings a new event id and nothing else, far more often in a row
    # than max_resume_attempts (5): the server is there, so the client keeps polling
    # (with no timeout, the default), each time from the last id, at its retry.
    polls = 20

    def resume(n: int, rid: Any) -> Stream:
        return answered(rid, f"after {n} polls") if n == polls else primed(n)

    server = Polling(resume)
    async with await polling_client(nursery, server) as client:
        started = trio.current_time()
        with trio.fail_after(LONG):
            result = await client.request("tools/call", call("long"))
    assert text_of(result) == f"after {polls} polls"
    assert server.last_event_ids == [f"p{n}" for n in range(polls)]
    assert not server.cancelled
    # The server's retry (100 ms) each time: it is polled at its pace.
    waits = [b - a for a, b in zip([started, *server.gets], server.gets, strict=False)]
    assert waits == pytest.approx([0.1] * polls, abs=0.01)


async def test_a_resumed_stream_with_no_event_is_resumed_from_the_same_id(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Resumptions answered with a stream that brings no event at all, not even an id (a
    # server with nothing new yet, a proxy's idle timeout): SSE keeps the last event id
    # across reconnections, so the client polls again from it, at the server's retry,
    # never failing nor cancelling the request (not even with max_resume_attempts 0:
    # a stream came each time).
    def resume(n: int, rid: Any) -> Stream:
        if n == 0:
            return primed(0)
        return answered(rid, "done") if n == 4 else (200, (SESSION, SSE), b"")

    server = Polling(resume)
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=0)
    url = await fake_server_url(nursery, server.serve)
    async with open_http_client(
        url, connection_config=client_connection_config("legacy"), transport=transport
    ) as client:
        started = trio.current_time()
        with trio.fail_after(LONG):
            result = await client.request("tools/call", call("long"))
    assert text_of(result) == "done"
    assert server.last_event_ids == ["p0"] * 4
    assert not server.cancelled
    waits = [b - a for a, b in zip([started, *server.gets], server.gets, strict=False)]
    assert waits == pytest.approx([0.1] * 4, abs=0.01)


async def test_a_get_stream_resumed_without_a_new_retry_keeps_the_announced_one(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The GET stream announces retry 5 s once; its resumptions bring a new id and no
    # retry: the announced one holds (then backs off, as nothing comes).
    opened = (200, (SESSION, SSE), b"id: g0\nretry: 5000\ndata: \n\n")
    server = Polling(lambda n, rid: (200, (SESSION, SSE), f"id: g{n}\ndata: \n\n".encode()))
    server.get_stream = opened
    url = await fake_server_url(nursery, server.serve)
    async with open_http_client(url, connection_config=client_connection_config("legacy")):
        started = trio.current_time()
        await trio.sleep(60)
    assert server.opened == 1
    assert server.last_event_ids == ["g0", "g1", "g2", "g3"]
    # 5 s after the first stream, and after the second (quiet 2); then 10, 20.
    times = [t - started for t in server.gets]
    assert times == pytest.approx([5, 10, 20, 40], abs=0.01)


async def test_a_polled_request_is_bounded_by_its_own_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = Polling(lambda n, rid: primed(n))
    async with await polling_client(nursery, server) as client:
        with trio.fail_after(LONG), pytest.raises(RequestTimeout):
            await client.request("tools/call", call("long"), timeout=6)
        with trio.fail_after(LONG):
            await server.cancelled_event.wait()
    assert server.cancelled == [{"requestId": server.call_id, "reason": "timeout"}]
    # One every 100 ms (the server's retry) until the timeout, none after.
    assert len(server.gets) == pytest.approx(6 / 0.1, abs=1)


@pytest.mark.parametrize("how", ["status 503", "dropped"])
async def test_resumptions_that_get_no_stream_are_bounded_and_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, how: str
) -> None:
    # Each resumption gets an error status (or no answer at all): after
    # max_resume_attempts of them in a row the request fails, saying why, and the
    # server is told it need not go on.
    def resume(n: int, rid: Any) -> Stream:
        if n == 0:
            return primed(0)
        return (503, (SESSION,), b"busy") if how == "status 503" else None

    server = Polling(resume)
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=3)
    url = await fake_server_url(nursery, server.serve)
    async with open_http_client(
        url, connection_config=client_connection_config("legacy"), transport=transport
    ) as client:
        with trio.fail_after(LONG), pytest.raises(McpError) as failed:
            await client.request("tools/call", call("long"))
        with trio.fail_after(LONG):
            await server.cancelled_event.wait()
    message = failed.value.message
    assert message.startswith("HTTP: the stream could not be resumed: 4 attempts in a row failed")
    assert ("status 503" in message) == (how == "status 503")
    assert len(server.gets) == 4
    assert server.last_event_ids == ["p0"] * 4  # (each from the last event that came)
    (cancelled,) = server.cancelled
    assert cancelled["requestId"] == server.call_id
    assert cancelled["reason"].startswith("HTTP: the stream could not be resumed")


async def test_a_failed_resumption_then_a_stream_starts_the_count_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Failures count only in a row: a stream in between (even one bringing nothing)
    # shows the server is there.
    def resume(n: int, rid: Any) -> Stream:
        if n == 12:
            return answered(rid, "done")
        return primed(n) if n % 3 == 0 else (503, (SESSION,), b"")

    server = Polling(resume)
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=2)
    url = await fake_server_url(nursery, server.serve)
    async with open_http_client(
        url, connection_config=client_connection_config("legacy"), transport=transport
    ) as client:
        with trio.fail_after(LONG):
            result = await client.request("tools/call", call("long"))
    assert text_of(result) == "done"
    assert not server.cancelled


async def test_a_refused_resumption_fails_the_request_and_tells_the_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A 4xx to a resumption: the events are gone, and so is the answer; the server may
    # still be working on the request.
    server = Polling(lambda n, rid: primed(n) if n == 0 else (400, (SESSION,), b""))
    async with await polling_client(nursery, server) as client:
        with trio.fail_after(LONG), pytest.raises(McpError, match="status 400"):
            await client.request("tools/call", call("long"))
        with trio.fail_after(LONG):
            await server.cancelled_event.wait()
    assert len(server.gets) == 1
    assert [c["requestId"] for c in server.cancelled] == [server.call_id]


@pytest.mark.parametrize("retry", ["retry: 0\n", ""])
async def test_junk_data_does_not_spin_the_resumptions(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, retry: str
) -> None:
    # data: that is no JSON-RPC message is no progress. With retry 0 the server is
    # polled as often as MIN_REOPEN_DELAY allows, never in a tight loop; without a
    # retry the waits grow as for nothing.
    server = Polling(
        lambda n, rid: (200, (SESSION, SSE), f"id: j{n}\n{retry}data: junk{n}\n\n".encode())
    )
    seconds = 20 if retry else 60
    async with await polling_client(nursery, server) as client:
        with trio.move_on_after(seconds):
            await client.request("tools/call", call("long"))
    if retry:
        assert len(server.gets) == pytest.approx(seconds / MIN_REOPEN_DELAY, abs=1)
    else:  # 1, 1, 2, 4, 8, 16, 30 (default_retry_ms doubling): 6 in 60 s.
        assert len(server.gets) == 6


async def test_a_message_per_connection_with_retry_0_reconnects_at_a_bounded_rate(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Each resumption brings a real message (a log notification) and ends, retry 0:
    # progress, so no backoff, but never a tight loop either.
    note = dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x"},
        }
    )

    def resume(n: int, rid: Any) -> Stream:
        body = f"id: m{n}\nretry: 0\ndata: {note.decode()}\n\n".encode()
        return 200, (SESSION, SSE), body

    server = Polling(resume)
    async with await polling_client(nursery, server) as client:
        with trio.move_on_after(5):
            await client.request("tools/call", call("long"))
    assert len(server.gets) == pytest.approx(5 / MIN_REOPEN_DELAY, abs=1)


async def test_a_get_stream_of_junk_with_retry_0_is_reopened_less_and_less(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: Any
) -> None:
    # The GET stream brings junk data: (no id), retry 0, and ends. Junk is no message:
    # each reopening waits longer (one warning each), for the whole session.
    junk = (200, (SESSION, SSE), b"retry: 0\ndata: junk\n\n")
    server = Polling(lambda n, rid: primed(n), get_stream=junk)
    url = await fake_server_url(nursery, server.serve)
    async with open_http_client(url, connection_config=client_connection_config("legacy")):
        await trio.sleep(60)
    # At 0, then after MIN_REOPEN_DELAY, 1, 2, 4, 8, 16 s (default_retry_ms doubling).
    assert server.opened == 7
    assert len([r for r in caplog.records if "not JSON" in r.getMessage()]) == 7

"""Messages taken in passing: a parked reader's work done in the task that brought it.

``MessageChannel.attach_reader`` (memory channels, the HTTP client) lets the sender of a
message hand it straight to the receiving session while that session's reader waits
on an empty channel, saving a task switch per message. These tests pin what must not
change with it: order, backpressure, and that a session is never re-entered.
"""

from __future__ import annotations

import contextvars
import random
from contextlib import suppress
from traceback import format_exception
from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import (
    Handlers,
    NotificationContext,
    RequestContext,
    Session,
    SessionClosed,
    SessionConfig,
    memory_channel_pair,
    open_session,
)
from mcp_trio._http_client import open_http_client

from .helpers import client_config, server_config
from .test_http_support import (
    ERAS,
    IO_TIMEOUT,
    call,
    client_connection_config,
    start_server,
    text_of,
)

# ---------------------------------------------------------------------- the channel


async def test_a_parked_reader_is_offered_the_message() -> None:
    a, b = memory_channel_pair(4)
    offered: list[bytes] = []

    def take(message: bytes) -> bool:
        offered.append(message)
        return message == b"taken"

    b.attach_reader(take)
    got: list[bytes] = []

    async def read_one() -> None:
        got.append(await b.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_one)
        await trio.testing.wait_all_tasks_blocked()
        assert a.send_nowait(b"taken")
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # taken in passing: the reader still waits
        assert a.send_nowait(b"refused")  # offered, refused: it goes to the reader
    assert offered == [b"taken", b"refused"]
    assert got == [b"refused"]


async def test_nothing_overtakes_a_message_on_its_way_to_the_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b = memory_channel_pair(4)
    offered: list[bytes] = []

    def take(message: bytes) -> bool:
        offered.append(message)
        return message != b"first"

    b.attach_reader(take)
    got: list[bytes] = []

    async def read_two() -> None:
        got.append(await b.receive())
        got.append(await b.receive())

    with trio.fail_after(5):  # a second message taken in passing would be lost
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_two)
            await trio.testing.wait_all_tasks_blocked()
            assert a.send_nowait(b"first")  # refused: handed to the waking reader
            assert a.send_nowait(b"second")  # the reader has not run yet: not offered
    assert offered == [b"first"]
    assert got == [b"first", b"second"]


async def test_no_offer_without_a_parked_reader() -> None:
    a, b = memory_channel_pair(4)
    offered: list[bytes] = []

    def take(message: bytes) -> bool:
        offered.append(message)
        return True

    b.attach_reader(take)
    assert a.send_nowait(b"1")  # nobody waits: buffered
    await a.send(b"2")  # the async send never offers
    assert offered == []
    assert await b.receive() == b"1"
    assert await b.receive() == b"2"


# ---------------------------------------------------------------------- sessions


@pytest.fixture
def takes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every ``Session._take_message`` call: (role, whether it took the message)."""
    seen: list[tuple[str, bool]] = []
    original = Session._take_message

    def spy(self: Session, data: bytes) -> bool:
        took = original(self, data)
        seen.append((self.role, took))
        return took

    monkeypatch.setattr(Session, "_take_message", spy)
    return seen


def _handlers(log: list[str], gate: trio.Event | None = None) -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        name = ctx.params["name"]
        log.append(name)
        if name == "wait" and gate is not None:
            await gate.wait()
        return {"content": [{"type": "text", "text": name}]}

    @handlers.on_notification("notifications/roots/list_changed")
    async def changed(ctx: NotificationContext) -> None:
        assert ctx.params is not None
        log.append(ctx.params["n"])

    return handlers


async def test_a_round_trip_is_taken_on_both_sides(
    takes: list[tuple[str, bool]], autojump_clock: trio.testing.MockClock
) -> None:
    a, b = memory_channel_pair()
    log: list[str] = []
    async with (
        open_session(b, "server", handlers=_handlers(log), connection_config=server_config()),
        open_session(a, "client", connection_config=client_config()) as client,
    ):
        await client.start()
        takes.clear()
        for i in range(3):
            result = await client.request("tools/call", {"name": f"t{i}", "arguments": {}})
            assert result["content"][0]["text"] == f"t{i}"
    assert log == ["t0", "t1", "t2"]
    # Each request was taken by the server in the client's write, each answer by the
    # client in the handler's write: no reader woke for them.
    assert takes.count(("server", True)) == 3
    assert takes.count(("client", True)) == 3


async def test_notifications_keep_their_order(
    takes: list[tuple[str, bool]], autojump_clock: trio.testing.MockClock
) -> None:
    # A taken notification needs a handler slot with a yield: it is finished by a task,
    # and what comes meanwhile waits for it, then goes in order.
    a, b = memory_channel_pair()
    log: list[str] = []
    sent = [str(i) for i in range(12)]
    async with (
        open_session(b, "server", handlers=_handlers(log), connection_config=server_config()),
        open_session(a, "client", connection_config=client_config()) as client,
    ):
        await client.start()
        for n in sent:
            await client.notify("notifications/roots/list_changed", {"n": n})
        result = await client.request("tools/call", {"name": "after", "arguments": {}})
        assert result["content"][0]["text"] == "after"
    assert log == [*sent, "after"]
    assert ("server", True) in takes


async def test_requests_beyond_the_handler_slots_wait_in_order(
    takes: list[tuple[str, bool]], autojump_clock: trio.testing.MockClock
) -> None:
    a, b = memory_channel_pair()
    log: list[str] = []
    gate = trio.Event()
    config = SessionConfig(max_concurrent_handlers=1, max_unanswered_requests=1)
    answers: list[str] = []

    async def call(name: str) -> None:
        result = await client.request("tools/call", {"name": name, "arguments": {}})
        answers.append(result["content"][0]["text"])

    async with (
        open_session(
            b,
            "server",
            handlers=_handlers(log, gate),
            config=config,
            connection_config=server_config(),
        ),
        open_session(a, "client", connection_config=client_config()) as client,
    ):
        await client.start()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "wait")
            await trio.testing.wait_all_tasks_blocked()
            for name in ("second", "third", "fourth"):
                nursery.start_soon(call, name)
                await trio.testing.wait_all_tasks_blocked()
            assert log == ["wait"]  # one slot: the others wait, unread or unstarted
            stats = [s.statistics() for s in (client,)]
            assert stats[0].waiting_requests == 4
            gate.set()
    assert log == ["wait", "second", "third", "fourth"]
    assert sorted(answers) == ["fourth", "second", "third", "wait"]


async def test_a_session_is_not_re_entered_from_its_own_write(
    takes: list[tuple[str, bool]], autojump_clock: trio.testing.MockClock
) -> None:
    # The server core answers `initialize` as it reads it: taken in the client's
    # write, that answer comes back while the client's writer is still sending. The
    # client must refuse it (its writer would be re-entered and send `initialize`
    # twice); its reader gets it instead, and the handshake completes once.
    a, b = memory_channel_pair()
    async with (
        open_session(b, "server", handlers=Handlers(), connection_config=server_config()),
        open_session(a, "client", connection_config=client_config()) as client,
    ):
        handshake = await client.start()
        assert handshake.protocol_version == client.connection.protocol_version
        result = await client.request("ping")
        assert result == {}
    assert ("server", True) in takes
    assert ("client", False) in takes  # the initialize answer, refused in the write


# ---------------------------------------------------------------------- HTTP client


@pytest.mark.parametrize("era", ERAS)
async def test_http_answers_are_taken_by_the_task_that_reads_them(
    nursery: trio.Nursery, takes: list[tuple[str, bool]], era: str
) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            takes.clear()
            for i in range(3):
                result = await client.request("tools/call", call("echo", text=f"x{i}"))
                assert text_of(result) == f"x{i}"
            # Several at once: whatever is taken or queued, each gets its own answer.
            results: dict[int, str] = {}

            async def one(i: int) -> None:
                results[i] = text_of(await client.request("tools/call", call("echo", text=str(i))))

            async with trio.open_nursery() as calls:
                for i in range(8):
                    calls.start_soon(one, i)
    assert results == {i: str(i) for i in range(8)}
    assert takes.count(("client", True)) >= 3


# ---------------------------------------------------------------------- what a take must not leak

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="unset")


async def test_a_taken_request_runs_in_the_servers_context(
    takes: list[tuple[str, bool]], autojump_clock: trio.testing.MockClock
) -> None:
    # The server takes the request in the client caller's task; its handler must still
    # see the server's contextvars (tracing spans, tenants), not the caller's.
    seen: list[str] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        seen.append(_who.get())
        return {"content": []}

    a, b = memory_channel_pair()
    async with (
        open_session(b, "server", handlers=handlers, connection_config=server_config()),
        open_session(a, "client", connection_config=client_config()) as client,
    ):
        await client.start()
        _who.set("the client caller")
        await client.request("tools/call", {"name": "x", "arguments": {}})
    assert seen == ["unset"]
    assert ("server", True) in takes


async def test_a_failure_while_taking_fails_the_receiver_not_the_sender(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # A bug in the server's reader work, hit in a take (in the client's task): the
    # server fails as if its reader had crashed; the client's call ends with
    # SessionClosed (not the server's error), and the request is not sent twice.
    calls: list[str] = []
    original = Session._start_request_handler

    def faulty(self: Session, event: Any) -> None:
        if self.role == "server":
            raise RuntimeError("a bug in the server's reader work")
        original(self, event)

    a, b = memory_channel_pair()
    outcome: list[BaseException] = []
    with pytest.raises(SessionClosed, match="internal error") as info:
        async with (
            open_session(b, "server", handlers=_handlers(calls), connection_config=server_config()),
            open_session(a, "client", connection_config=client_config()) as client,
        ):
            await client.start()
            monkeypatch.setattr(Session, "_start_request_handler", faulty)
            try:
                await client.request("tools/call", {"name": "x", "arguments": {}})
            except Exception as exc:
                outcome.append(exc)
    assert [type(e) for e in outcome] == [SessionClosed]
    assert calls == []
    assert "a bug in the server's reader work" in "".join(format_exception(info.value))


async def test_the_end_of_input_waits_for_a_message_taken_before_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The one handler slot is busy: a notification taken meanwhile waits for it in a
    # finishing task. The client then leaves; the server must still run that
    # notification's handler (within the grace period) before it acts on the end.
    log: list[str] = []
    gate = trio.Event()
    config = SessionConfig(
        max_concurrent_handlers=1, max_unanswered_requests=1, shutdown_grace_period=10
    )
    a, b = memory_channel_pair()

    async def busy() -> None:
        with suppress(SessionClosed):
            await client.request("tools/call", {"name": "wait", "arguments": {}})

    async with (
        trio.open_nursery() as nursery,
        open_session(
            b,
            "server",
            handlers=_handlers(log, gate),
            config=config,
            connection_config=server_config(),
        ) as server,
    ):
        async with open_session(a, "client", connection_config=client_config()) as client:
            await client.start()
            nursery.start_soon(busy)
            await trio.testing.wait_all_tasks_blocked()
            assert log == ["wait"]
            await client.notify("notifications/roots/list_changed", {"n": "late"})
            await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(1)
        gate.set()
        await server.wait_closed()
    assert log == ["wait", "late"]


# ---------------------------------------------------------------------- order under load


async def _progress_and_logs_round(rng: random.Random, buffer: int, slots: int) -> None:
    """Three calls whose handlers interleave progress, log lines and yields; each
    caller must see its progress in order and its result last, and the log lines of
    each call must arrive in order, however messages were taken or queued."""
    steps = 12
    server_handlers = Handlers()

    @server_handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        name = ctx.params["name"]
        for i in range(steps):
            if rng.random() < 0.5:
                await ctx.report_progress(i, steps)
            else:
                await ctx.log("info", f"{name}:{i}")
            if rng.random() < 0.3:
                await trio.sleep(0)
        return {"content": [{"type": "text", "text": name}]}

    logged: list[str] = []
    client_handlers = Handlers()

    @client_handlers.on_notification("notifications/message")
    async def message(ctx: NotificationContext) -> None:
        assert ctx.params is not None
        logged.append(ctx.params["data"])
        if rng.random() < 0.5:
            await trio.sleep(0)

    seen: dict[str, list[str]] = {}
    config = SessionConfig(max_concurrent_handlers=slots, max_unanswered_requests=slots)
    a, b = memory_channel_pair(buffer)
    async with (
        open_session(
            b, "server", handlers=server_handlers, config=config, connection_config=server_config()
        ),
        open_session(
            a, "client", handlers=client_handlers, config=config, connection_config=client_config()
        ) as client,
    ):
        await client.start()
        await client.request("logging/setLevel", {"level": "debug"})

        async def run(name: str) -> None:
            mine = seen.setdefault(name, [])

            async def on_progress(event: Any) -> None:
                mine.append(str(int(event.progress)))
                if rng.random() < 0.5:
                    await trio.sleep(0)

            result = await client.request(
                "tools/call", {"name": name, "arguments": {}}, on_progress=on_progress
            )
            assert result["content"][0]["text"] == name
            mine.append("result")

        async with trio.open_nursery() as nursery:
            for name in ("A", "B", "C"):
                nursery.start_soon(run, name)
    for name, events in seen.items():
        assert events[-1] == "result", events
        progress = [int(e) for e in events[:-1]]
        assert progress == sorted(progress), (name, events)
        lines = [int(line.split(":")[1]) for line in logged if line.startswith(f"{name}:")]
        assert lines == sorted(lines), (name, logged)


async def test_progress_logs_and_results_keep_their_order_under_load(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for seed in range(100):
        rng = random.Random(seed)
        await _progress_and_logs_round(rng, rng.choice([0, 1, 2, 16]), rng.choice([1, 2, 64]))

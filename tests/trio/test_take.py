"""Messages taken in passing: a parked reader's work done in the task that brought it.

``MessageChannel.attach_reader`` (memory channels, the HTTP client) lets the sender of a
message hand it straight to the receiving session while that session's reader waits
on an empty channel, saving a task switch per message. These tests pin what must not
change with it: order, backpressure, and that a session is never re-entered.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import (
    Handlers,
    NotificationContext,
    RequestContext,
    Session,
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

"""``Writer.unsent`` / ``Writer.withdraw``: a message taken back before any of it left.

Its entry stays in the outbox, emptied, so the marks of the others keep their
meaning; every way of writing (the non-waiting fast path, a writer's own loop, its
ride, the leftover task) skips it, and nothing empty ever reaches the channel.
"""

from __future__ import annotations

from typing import Any, ClassVar

import trio
import trio.testing

from mcp_trio import MemoryChannel, MessageChannel, SessionClosed
from mcp_trio._writer import Writer


class _Channel(MessageChannel):
    """``send_nowait`` takes ``nowait`` messages (then refuses); ``send`` takes a
    permit each. Never given an empty message."""

    atomic_send: ClassVar[bool] = False

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.nowait = 0
        self.permits = trio.Semaphore(0)

    def send_nowait(self, message: bytes) -> bool:
        assert message, "an empty message reached the channel"
        if not self.nowait:
            return False
        self.nowait -= 1
        self.sent.append(message)
        return True

    async def send(self, message: bytes) -> None:
        assert message, "an empty message reached the channel"
        await self.permits.acquire()
        self.sent.append(message)

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


def _queued(writer: Writer, *messages: bytes) -> list[int]:
    """Queue each message alone (none goes out: the channel refuses); their marks."""
    marks = [writer.queue([message]) for message in messages]
    assert not writer.write_nowait(marks[-1])
    return marks


async def _until_blocked() -> None:
    await trio.testing.wait_all_tasks_blocked()


def test_unsent_names_the_last_message_of_a_mark_until_it_is_written() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    two = writer.queue([b"1", b"2"])
    assert not writer.write_nowait(two)
    assert writer.unsent(two) == b"2" and writer.unsent(two - 1) == b"1"
    assert writer.unsent(two + 1) is None  # (not queued yet)
    channel.nowait = 1
    assert not writer.write_nowait(two)  # "1" is out
    assert writer.unsent(two - 1) is None and writer.unsent(two) == b"2"
    writer.withdraw(two)
    assert writer.unsent(two) is None  # (once)
    assert writer.backlog == 0 and writer.write_nowait(two)  # nothing left to write


async def test_the_message_being_written_is_not_unsent() -> None:
    # Half of it may be out (a byte stream): it goes out whole, never taken back.
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    async with trio.open_nursery() as nursery:
        first, second = _queued(writer, b"1", b"2")
        nursery.start_soon(writer.write_through, first)
        await _until_blocked()  # writing "1"
        assert writer.unsent(first) is None
        assert writer.unsent(second) == b"2"
        channel.permits.release()
    assert channel.sent == [b"1"]
    assert writer.unsent(second) == b"2"  # nobody writes it now: it can go


async def test_a_cancelled_atomic_write_leaves_its_message_unsent() -> None:
    # A memory channel's cancelled send sent nothing: the message can be taken back.
    send, receive = trio.open_memory_channel[bytes](0)
    writer = Writer(MemoryChannel(send, receive), write_timeout=30)
    mark = writer.queue([b"1"])
    assert not writer.write_nowait(mark)
    with trio.move_on_after(0) as gave_up:
        await writer.write_through(mark)
    assert gave_up.cancelled_caught
    assert writer.unsent(mark) == b"1"
    writer.withdraw(mark)
    assert writer.backlog == 0
    await send.aclose()
    await receive.aclose()


def test_the_fast_path_skips_what_was_withdrawn_and_keeps_the_order() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    marks = _queued(writer, b"1", b"2", b"3", b"4")
    writer.withdraw(marks[1])
    writer.withdraw(marks[3])  # (the last one too: its place is counted as written)
    assert writer.backlog == 2
    channel.nowait = 10
    assert writer.write_nowait(marks[3])
    assert channel.sent == [b"1", b"3"] and writer.backlog == 0
    assert writer.write_nowait(writer.queue([b"5"]))  # the plain fast path again
    assert channel.sent == [b"1", b"3", b"5"]


def test_a_withdrawn_head_is_skipped() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    first, second = _queued(writer, b"1", b"2")
    writer.withdraw(first)
    assert writer.backlog == 1 and writer.unsent(second) == b"2"
    channel.nowait = 1
    assert writer.write_nowait(second) and channel.sent == [b"2"]


async def test_a_writer_skips_what_was_withdrawn() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    marks = _queued(writer, b"1", b"2", b"3", b"4")
    writer.withdraw(marks[1])
    channel.nowait = 1
    assert writer.write_nowait(marks[0])  # "1" out; the head is the withdrawn entry
    assert writer.backlog == 2
    async with trio.open_nursery() as nursery:
        done: list[SessionClosed | None] = []

        async def write() -> None:
            done.append(await writer.write_through(marks[3]))

        nursery.start_soon(write)  # its loop starts on the withdrawn entry
        await _until_blocked()
        writer.withdraw(marks[3])  # behind the message being written
        channel.permits.release()
    assert done == [None]
    assert channel.sent == [b"1", b"3"] and writer.backlog == 0


async def test_the_leftover_task_skips_what_was_withdrawn() -> None:
    channel = _Channel()
    started: list[Any] = []
    async with trio.open_nursery() as nursery:

        def on_leftovers() -> bool:
            started.append(None)
            nursery.start_soon(writer.write_leftovers)
            return True

        writer = Writer(channel, write_timeout=30, on_leftovers=on_leftovers)
        first = writer.queue([b"1"])
        nursery.start_soon(writer.write_through, first)
        await _until_blocked()
        marks = []
        for message in (b"2", b"3", b"4"):  # queued by tasks that give up waiting
            with trio.CancelScope() as scope:
                scope.cancel()
                marks.append(writer.queue([message]))
                await writer.write_through(marks[-1])
        writer.withdraw(marks[1])
        channel.permits.release()  # "1" out; the rest is left to a task of its own
        await _until_blocked()
        assert len(started) == 1
        channel.permits.release()
        channel.permits.release()
    assert channel.sent == [b"1", b"2", b"4"] and writer.backlog == 0


def test_abort_forgets_withdrawn_entries() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=30)
    marks = _queued(writer, b"1", b"2")
    writer.withdraw(marks[1])
    writer.abort()
    assert writer.backlog == 0 and writer.unsent(marks[0]) is None

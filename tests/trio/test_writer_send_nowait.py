"""``Writer.send_nowait``: ``queue`` then ``write_nowait`` in one.

With no writer at work and nothing queued, the messages go straight to the channel
(the fast path); otherwise (a writer at work, messages queued, the writer aborted)
they take the general path. Either way the outcome is the one ``queue`` plus
``write_nowait`` gives: the same order on the channel, the same marks, the same
messages left in the outbox.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
import trio
import trio.testing

from mcp_trio import MessageChannel
from mcp_trio._writer import Writer


class _Channel(MessageChannel):
    """``send_nowait`` takes ``nowait`` messages (then refuses, or raises ``fail``);
    ``send`` takes a permit each. Records whether the writer said it was writing."""

    atomic_send: ClassVar[bool] = True

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.nowait = 0
        self.fail: BaseException | None = None
        self.permits = trio.Semaphore(0)
        self.writer: Writer | None = None
        self.writing: list[bool] = []

    def send_nowait(self, message: bytes) -> bool:
        if self.writer is not None:
            self.writing.append(self.writer.writing)
        if not self.nowait:
            if self.fail is not None:
                raise self.fail
            return False
        self.nowait -= 1
        self.sent.append(message)
        return True

    async def send(self, message: bytes) -> None:
        await self.permits.acquire()
        self.sent.append(message)

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


def test_an_idle_writer_sends_at_once_and_keeps_the_marks() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    channel.writer = writer
    channel.nowait = 1
    first = writer.queue([b"0"])
    assert writer.write_nowait(first)
    channel.nowait = 2
    assert writer.send_nowait([b"1", b"2"]) == 0
    assert channel.sent == [b"0", b"1", b"2"]
    assert channel.writing == [True, True, True]  # (a message taken in passing must not re-enter)
    assert not writer.writing and writer.backlog == 0
    # Those went out with no mark: a mark given out before stays reached, and the next
    # message's mark is its own.
    mark = writer.queue([b"3"])
    assert writer.write_nowait(first) and writer.unsent(first) is None
    assert not writer.write_nowait(mark) and writer.unsent(mark) == b"3"


def test_what_the_channel_does_not_take_waits_in_order() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    channel.nowait = 1
    mark = writer.send_nowait([b"1", b"2", b"3"])
    assert mark == 3 and channel.sent == [b"1"]
    assert writer.backlog == 2 and writer.unsent(mark) == b"3"
    assert writer.unsent(1) is None  # (out)
    channel.nowait = 5
    assert writer.write_nowait(mark)
    assert channel.sent == [b"1", b"2", b"3"]


def test_nothing_taken_queues_all() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    assert writer.send_nowait([b"1"]) == 1
    assert writer.backlog == 1 and writer.unsent(1) == b"1"


def test_queued_messages_are_not_overtaken() -> None:
    # General path: an earlier message the channel refused goes first.
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    assert writer.send_nowait([b"1"]) == 1
    channel.nowait = 5
    assert writer.send_nowait([b"2"]) == 0
    assert channel.sent == [b"1", b"2"]
    assert writer.backlog == 0 and writer.queue([b"3"]) == 3


async def test_a_writer_at_work_is_not_overtaken() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    async with trio.open_nursery() as nursery:
        mark = writer.queue([b"1"])
        nursery.start_soon(writer.write_through, mark)
        await trio.testing.wait_all_tasks_blocked()  # writing "1", waiting for a permit
        channel.nowait = 5
        later = writer.send_nowait([b"2"])
        assert later == 2 and channel.sent == []  # queued behind the write at work
        channel.permits.release()
    assert channel.sent == [b"1", b"2"]  # (it rode along)
    assert writer.backlog == 0


def test_an_aborted_writer_sends_nothing() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    writer.abort()
    channel.nowait = 5
    assert writer.send_nowait([b"1"]) == 0  # dropped, as queue() drops it
    assert channel.sent == [] and writer.backlog == 0


def test_a_failing_send_leaves_the_rest_queued() -> None:
    channel = _Channel()
    writer = Writer(channel, write_timeout=None)
    channel.writer = writer
    channel.nowait, channel.fail = 1, RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        writer.send_nowait([b"1", b"2", b"3"])
    assert not writer.writing
    assert channel.sent == [b"1"] and writer.backlog == 2
    assert writer.unsent(3) == b"3"
    channel.nowait = 5
    assert writer.write_nowait(3)
    assert channel.sent == [b"1", b"2", b"3"]

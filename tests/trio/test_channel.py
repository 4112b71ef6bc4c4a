"""The channels' fast paths: sends and receives that need no waiting do not yield.

Memory channels on the ``autojump_clock``; pipes are real (``os.pipe``), so those tests
use the real clock with an absolute ``fail_after``. "Did not yield" is checked with
``trio.testing.assert_checkpoints``, which fails on a block without a schedule point.
"""

from __future__ import annotations

import os
import select
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from mcp_trio import StreamChannel, memory_channel_pair
from mcp_trio._channel import RECEIVE_BUDGET

IO_TIMEOUT = 10  # seconds, absolute, for real pipes


async def _receive_without_yielding(receive: object) -> bytes:
    """Await ``receive()``, asserting that it returned without a scheduler tick."""
    assert callable(receive)
    result: bytes = b""
    with (
        pytest.raises(AssertionError, match="did not yield"),
        trio.testing.assert_checkpoints(),
    ):
        result = await receive()
    return result


# ---------------------------------------------------------------------- memory


async def test_memory_send_nowait_until_full() -> None:
    a, b = memory_channel_pair(2)
    assert a.send_nowait(b"1")
    assert a.send_nowait(b"2")
    assert not a.send_nowait(b"3")  # full: nothing sent, the caller must wait
    assert await _receive_without_yielding(b.receive) == b"1"
    assert a.send_nowait(b"3")
    assert await b.receive() == b"2"
    assert await b.receive() == b"3"


async def test_memory_send_nowait_refuses_when_closed() -> None:
    a, b = memory_channel_pair(2)
    await b.aclose()
    assert not a.send_nowait(b"x")
    with pytest.raises(trio.BrokenResourceError):
        await a.send(b"x")
    await a.aclose()
    assert not a.send_nowait(b"x")
    with pytest.raises(trio.ClosedResourceError):
        await a.send(b"x")


async def test_memory_receive_yields_once_per_budget() -> None:
    a, b = memory_channel_pair(RECEIVE_BUDGET + 2)
    for n in range(RECEIVE_BUDGET + 2):
        assert a.send_nowait(b"%d" % n)
    for n in range(RECEIVE_BUDGET):
        assert await _receive_without_yielding(b.receive) == b"%d" % n
    with trio.testing.assert_checkpoints():  # over budget: lets the other tasks run
        assert await b.receive() == b"%d" % RECEIVE_BUDGET
    assert await _receive_without_yielding(b.receive) == b"%d" % (RECEIVE_BUDGET + 1)


async def test_memory_receive_waits_and_ends(autojump_clock: trio.testing.MockClock) -> None:
    a, b = memory_channel_pair(2)
    async with trio.open_nursery() as nursery:

        async def later() -> None:
            await trio.sleep(1)
            await a.send(b"late")
            await a.aclose()

        nursery.start_soon(later)
        assert await b.receive() == b"late"
        with pytest.raises(trio.EndOfChannel):
            await b.receive()


async def test_cancelled_memory_receive_takes_nothing() -> None:
    a, b = memory_channel_pair(2)
    assert a.send_nowait(b"kept")
    with trio.CancelScope() as scope:
        scope.cancel()
        await b.receive()
    assert scope.cancelled_caught
    assert await b.receive() == b"kept"


# ---------------------------------------------------------------------- pipes

pipes_only = pytest.mark.skipif(sys.platform == "win32", reason="trio.lowlevel.FdStream")


@asynccontextmanager
async def pipe_channels(
    read_chunk_size: int = 65_536,
) -> AsyncIterator[tuple[StreamChannel, StreamChannel]]:
    """``(writer, reader)``: NDJSON over one pipe, each end an ``FdStream``."""
    r, w = os.pipe()
    reader_stream = trio.lowlevel.FdStream(r)
    writer_stream = trio.lowlevel.FdStream(w)
    writer = StreamChannel(writer_stream, trio.testing.MemoryReceiveStream())
    reader = StreamChannel(
        trio.testing.MemorySendStream(), reader_stream, read_chunk_size=read_chunk_size
    )
    with trio.fail_after(IO_TIMEOUT):
        try:
            yield writer, reader
        finally:
            writer_stream.close()
            reader_stream.close()


@pipes_only
async def test_pipe_send_nowait_and_receive_without_yielding() -> None:
    async with pipe_channels(read_chunk_size=4) as (writer, reader):
        assert writer.send_nowait(b'{"a":1}')
        # Full chunks: the pipe may hold more, so the next read is tried at once.
        assert await _receive_without_yielding(reader.receive) == b'{"a"'
        assert await _receive_without_yielding(reader.receive) == b":1}\n"
        await writer.send(b'{"b":2}')
        assert await _receive_without_yielding(reader.receive) == b'{"b"'


@pipes_only
async def test_pipe_receive_after_a_short_read_waits_first() -> None:
    async with pipe_channels() as (writer, reader):
        await writer.send(b"1")
        await writer.send(b"2")
        assert await _receive_without_yielding(reader.receive) == b"1\n2\n"
        # That read emptied the pipe: the next receive waits for data (one tick
        # when it is there already) instead of a read that would fail.
        await writer.send(b"3")
        with trio.testing.assert_checkpoints():
            assert await reader.receive() == b"3\n"
        await writer.send_stream.aclose()
        with pytest.raises(trio.EndOfChannel):
            await reader.receive()
        await reader.receive_stream.aclose()
        with pytest.raises(trio.ClosedResourceError):
            await reader.receive()


@pipes_only
async def test_pipe_send_nowait_never_sends_part_of_a_message() -> None:
    async with pipe_channels() as (writer, reader):
        # Larger than PIPE_BUF: a non-blocking write could go out in part.
        big = b"x" * select.PIPE_BUF
        assert not writer.send_nowait(big)
        # Fill the pipe with small messages until one does not fit whole.
        sent = 0
        while writer.send_nowait(b"y" * 1000):
            sent += 1001
        received = b""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.send, big)  # waits for room, then goes whole
            await trio.testing.wait_all_tasks_blocked()
            while len(received) < sent + len(big) + 1:
                received += await reader.receive()
        assert received == b"".join([b"y" * 1000 + b"\n"] * (sent // 1001)) + big + b"\n"


@pipes_only
async def test_pipe_receive_yields_once_per_budget() -> None:
    async with pipe_channels(read_chunk_size=1) as (writer, reader):
        assert writer.send_nowait(b"x" * RECEIVE_BUDGET)
        for _ in range(RECEIVE_BUDGET):
            assert await _receive_without_yielding(reader.receive) == b"x"
        with trio.testing.assert_checkpoints():
            assert await reader.receive() == b"\n"


@pipes_only
async def test_pipe_receive_waits_for_data_and_for_the_end() -> None:
    async with pipe_channels() as (writer, reader), trio.open_nursery() as nursery:

        async def later() -> None:
            await trio.testing.wait_all_tasks_blocked()
            await writer.send(b"late")
            await writer.send_stream.aclose()

        nursery.start_soon(later)
        with trio.testing.assert_checkpoints():
            assert await reader.receive() == b"late\n"
        with pytest.raises(trio.EndOfChannel):
            await reader.receive()


@pipes_only
async def test_pipe_errors_are_trios() -> None:
    async with pipe_channels() as (writer, reader):
        await reader.receive_stream.aclose()
        assert not writer.send_nowait(b"x")  # broken: send() says so
        with pytest.raises(trio.BrokenResourceError):
            await writer.send(b"x")
        with pytest.raises(trio.ClosedResourceError):
            await reader.receive()
        await writer.send_stream.aclose()
        assert not writer.send_nowait(b"x")
        with pytest.raises(trio.ClosedResourceError):
            await writer.send(b"x")


@pipes_only
async def test_closing_a_pipe_wakes_its_waiting_reader() -> None:
    async with pipe_channels() as (_writer, reader), trio.open_nursery() as nursery:

        async def close_soon() -> None:
            await trio.testing.wait_all_tasks_blocked()
            await reader.receive_stream.aclose()

        nursery.start_soon(close_soon)
        with pytest.raises(trio.ClosedResourceError):
            await reader.receive()


@pipes_only
async def test_an_fd_that_is_not_a_pipe_never_sends_nowait() -> None:
    left, right = socket.socketpair()
    ours = trio.lowlevel.FdStream(os.dup(left.fileno()))
    theirs = trio.lowlevel.FdStream(os.dup(right.fileno()))
    left.close()
    right.close()
    with trio.fail_after(IO_TIMEOUT):
        try:
            a = StreamChannel(ours, ours)
            b = StreamChannel(theirs, theirs)
            assert not a.send_nowait(b"x")  # a socket write may go out in part
            await a.send(b'{"x":1}')
            assert await b.receive() == b'{"x":1}\n'
        finally:
            ours.close()
            theirs.close()


@pipes_only
async def test_a_closed_fd_stream_never_sends_nowait() -> None:
    r, w = os.pipe()
    os.close(r)
    stream = trio.lowlevel.FdStream(w)
    stream.close()
    channel = StreamChannel(stream, trio.testing.MemoryReceiveStream())
    assert not channel.send_nowait(b"x")
    with pytest.raises(trio.ClosedResourceError):
        await channel.send(b"x")

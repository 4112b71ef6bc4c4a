"""Taking back unsent requests: what the first version missed.

* Nothing is parsed when a caller gives up: the session knows, from when it queued
  the request, which mark is the request's (params JSON that cannot be read back,
  such as an ``orjson.Fragment`` nested deeper than orjson reads, changes nothing).
* The writer that gives up on its own request leaves an outbox of emptied entries
  that the leftover task skips without writing anything.
* Emptied entries are counted (``SessionStatistics.withdrawn_messages``).
* The core's own timeout (``timeout=``) tells the caller at once, even behind a
  stuck write: the timer task waits for no write. A request none of which was
  written is taken back (no ``notifications/cancelled``); the cancellation of one
  written, or being written, is left to the writer at work or a leftover task.

The peer is a :class:`ManualPeer` on a memory channel without room: nothing goes out
until it reads. The clock is the ``autojump_clock``, so times below are exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
import trio
import trio.testing

from mcp_sansio import Event
from mcp_trio import RequestTimeout, Session, memory_channel_pair, open_session
from mcp_trio._channel import SessionLost

from .helpers import ManualPeer, client_config, server_config
from .test_withdraw_unsent import CONFIG, END, FIRST, _seen


async def _start(client: Session, peer: ManualPeer) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.start)
        await peer.next_events()  # initialize
        await peer.next_events()  # notifications/initialized


@asynccontextmanager
async def _started() -> AsyncIterator[tuple[Session, ManualPeer]]:
    """A started client session on a memory channel without room, and its peer, which
    reads only when the test says so."""
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=CONFIG, connection_config=client_config()
    ) as client:
        await _start(client, peer)
        yield client, peer


async def _read_until_end(client: Session, peer: ManualPeer) -> list[str]:
    """Send END and read everything up to it."""
    seen: list[Event] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.notify, END)
        with trio.fail_after(5):
            while END not in _seen(seen):
                seen.extend(await peer.next_events())
    return _seen(seen)


async def _block_writer(client: Session) -> None:
    """A notification the peer does not read holds the writer role."""
    assert client._io_nursery is not None
    client._io_nursery.start_soon(client.notify, FIRST)
    await trio.testing.wait_all_tasks_blocked()


async def test_params_that_cannot_be_read_back_are_withdrawn_all_the_same(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # orjson writes a Fragment as it is but reads no JSON nested deeper than 1024.
    # The first version read the queued request back to check it, and the caller got
    # JSONDecodeError instead of its cancellation (nothing withdrawn, nothing cancelled).
    deep = orjson.Fragment(b"[" * 1100 + b"]" * 1100)
    async with _started() as (client, peer):
        await _block_writer(client)
        with trio.move_on_after(1) as gave_up:
            await client.request("tools/call", {"name": "x", "arguments": {"a": deep}})
        assert gave_up.cancelled_caught
        assert client.connection.pending_requests() == ()
        assert await _read_until_end(client, peer) == [FIRST, END]


async def test_the_writer_giving_up_on_its_own_request_leaves_nothing_to_write(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The caller is the writer and its request the only message queued: its send
    # (atomic, in memory) is cancelled, the request taken back, and the leftover
    # task finds only an emptied entry. It skips it and stops there: it must not
    # go on to write past the end of the outbox (the session would fail).
    async with _started() as (client, peer):
        with trio.move_on_after(1) as gave_up:
            await client.request("tools/call", {"name": "x"})  # writes it, and waits
        assert gave_up.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert not client.closed
        assert client.connection.pending_requests() == ()
        assert client.statistics().withdrawn_messages == 0  # skipped by the leftover task
        assert await _read_until_end(client, peer) == [END]
        assert client.statistics().queued_messages == 0


async def test_withdrawn_entries_are_counted_until_the_stuck_write_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The emptied entries stay in the outbox (their marks keep the others' meaning)
    # behind the write that does not finish: the statistics show how many.
    async with _started() as (client, peer):
        await _block_writer(client)
        for _ in range(50):
            with trio.move_on_after(1):
                await client.request("tools/call", {"name": "x"})
        stats = client.statistics()
        assert (stats.queued_messages, stats.withdrawn_messages) == (1, 50)
        assert client.connection.pending_requests() == ()
        assert await _read_until_end(client, peer) == [FIRST, END]
        stats = client.statistics()
        assert (stats.queued_messages, stats.withdrawn_messages) == (0, 0)


async def test_a_core_timeout_behind_a_stuck_write_withdraws_and_tells_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # timeout=1 fires while the request waits behind FIRST: the caller hears of it
    # at 1 s (not when FIRST is finally read), and since none of the request was
    # written, neither it nor a notifications/cancelled ever goes out.
    async with _started() as (client, peer):
        await _block_writer(client)
        start = trio.current_time()
        timed_out: list[float] = []

        async def call() -> None:
            try:
                await client.request("tools/call", {"name": "x"}, timeout=1)
            except RequestTimeout:
                timed_out.append(trio.current_time() - start)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(5)  # the peer reads nothing meanwhile
            assert timed_out == [1]
        assert client.statistics().withdrawn_messages == 1
        assert client.connection.pending_requests() == ()
        assert await _read_until_end(client, peer) == [FIRST, END]


async def test_a_core_timeout_of_the_request_being_written_tells_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The caller is the writer, blocked in its own request's send: it is told at
    # 1 s all the same. The request may be partly out, so it is not taken back: its
    # cancellation follows it, written by the leftover task.
    async with _started() as (client, peer):
        start = trio.current_time()
        timed_out: list[float] = []

        async def call() -> None:
            try:
                await client.request("tools/call", {"name": "x"}, timeout=1)
            except RequestTimeout:
                timed_out.append(trio.current_time() - start)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(5)
            assert timed_out == [1]
        assert client.statistics().withdrawn_messages == 0
        assert await _read_until_end(client, peer) == ["tools/call", "cancelled 2", END]


async def test_timeouts_do_not_wait_for_a_stuck_write(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Two requests went out; then the peer stops reading. The first times out at 1 s:
    # its cancellation cannot be written, and no writer is at work. The second times
    # out at 2 s and is told then: the timer did not wait for the first's cancellation,
    # which a leftover task writes once the peer reads again.
    async with _started() as (client, peer):
        start = trio.current_time()
        timed_out: list[tuple[int, float]] = []

        async def call(timeout: int) -> None:
            try:
                await client.request("tools/call", {"name": "x"}, timeout=timeout)
            except RequestTimeout:
                timed_out.append((timeout, trio.current_time() - start))

        seen: list[Event] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, 1)
            seen.extend(await peer.next_events())
            nursery.start_soon(call, 2)
            seen.extend(await peer.next_events())
            await trio.sleep(5)  # the peer reads nothing meanwhile
            assert timed_out == [(1, 1), (2, 2)]
            with trio.fail_after(5):
                while "cancelled 3" not in _seen(seen):
                    seen.extend(await peer.next_events())
        assert _seen(seen) == ["tools/call", "tools/call", "cancelled 2", "cancelled 3"]
        assert client.statistics().queued_messages == 0


async def test_a_request_held_for_a_new_session_takes_nothing_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The server forgot the session: the core queues a new initialize and holds our
    # requests until it is answered. A request made before that initialize is drained
    # finds it at the end of its own drain: the mark is not the request's, and giving
    # up must not take the initialize back (nothing of the request is queued at all).
    async with _started() as (client, peer):
        await _block_writer(client)
        client._session_lost(SessionLost(restart=True, resend=()))
        with trio.move_on_after(1) as gave_up:
            await client.request("tools/call", {"name": "x"})
        assert gave_up.cancelled_caught
        stats = client.statistics()
        assert (stats.queued_messages, stats.withdrawn_messages) == (2, 0)
        with trio.fail_after(5):
            raw = [orjson.loads(await peer.channel.receive()) for _ in range(2)]
        assert [m["method"] for m in raw] == [FIRST, "initialize"]

"""The one-shot wake-up a caller of ``Session.request`` waits on (``_waiters.Waiter``).

It stands in for a ``trio.Event`` waited on by one task, so it must keep an event's
rules: an outcome settled before the wait is returned after a checkpoint (which a
cancellation interrupts), one settled during the wait wakes the task, and a wait that
was cancelled is never woken afterwards (trio would be asked to resume a task that no
longer waits).
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from mcp_trio import SessionClosed
from mcp_trio._waiters import Outcome, Waiter, Waiters


async def test_an_outcome_settled_before_the_wait_is_returned_at_a_checkpoint() -> None:
    waiter = Waiter(None)
    closed = SessionClosed("closed")
    waiter.settle(closed)
    await waiter.wait()
    assert waiter.outcome is closed
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            await waiter.wait()  # (a checkpoint, as trio.Event.wait is)


async def _wait_and_record(waiter: Waiter, got: list[Outcome | None]) -> None:
    """Wait on ``waiter``, then record the outcome it was woken with."""
    await waiter.wait()
    got.append(waiter.outcome)


async def test_settle_wakes_the_task_waiting() -> None:
    waiters = Waiters()
    waiter = waiters.add(7, None)
    got: list[Outcome | None] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_and_record, waiter, got)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        closed = SessionClosed("closed")
        assert waiters.resolve(7, closed)
        assert not waiters.resolve(7, closed)  # (delivered once)
    assert got == [closed]


async def test_a_cancelled_wait_is_not_woken_by_a_later_outcome() -> None:
    waiter = Waiter(None)
    cancelled = False

    async def wait(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        nonlocal cancelled
        with trio.CancelScope() as scope:
            task_status.started(scope)
            await waiter.wait()
        cancelled = scope.cancelled_caught
        await trio.sleep_forever()  # (still alive: it must not be resumed from here)

    async with trio.open_nursery() as nursery:
        scope = await nursery.start(wait)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert cancelled
        closed = SessionClosed("closed")
        waiter.settle(closed)  # nobody to wake
        await trio.testing.wait_all_tasks_blocked()
        await waiter.wait()
        assert waiter.outcome is closed
        nursery.cancel_scope.cancel()


async def test_fail_all_settles_every_waiter_once() -> None:
    waiters = Waiters()
    first, second = waiters.add(1, None), waiters.add(2, None)
    closed = SessionClosed("closed")
    waiters.fail_all(closed)
    assert len(waiters) == 0
    assert first.outcome is closed and second.outcome is closed


async def test_settled_twice_while_parked_wakes_once_with_the_latest() -> None:
    # The session's close (fail_all) may settle a waiter that _reissue has just
    # settled, before its task runs: the task is woken once (a second reschedule is
    # an error of trio's) and reads the latest outcome.
    waiter = Waiter(None)
    got: list[Outcome | None] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_and_record, waiter, got)
        await trio.testing.wait_all_tasks_blocked()
        first, latest = SessionClosed("first"), SessionClosed("latest")
        waiter.settle(first)
        waiter.settle(latest)
    assert got == [latest]


async def test_a_settled_wait_lets_other_tasks_run() -> None:
    # A schedule point as well as a cancel point, as trio.Event.wait is: a caller
    # whose answers are all in already does not starve the other tasks.
    waiter = Waiter(None)
    waiter.settle(SessionClosed("closed"))
    ran = False

    async def other() -> None:
        nonlocal ran
        ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(3):  # (one pass's tasks run in either order)
            await waiter.wait()
        assert ran

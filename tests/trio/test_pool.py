"""The handler pool's slots: taken without waiting when free, waited for otherwise."""

from __future__ import annotations

import trio
import trio.testing

from mcp_trio._pool import HandlerPool


async def test_slots_are_waited_for_and_handed_on() -> None:
    pool = HandlerPool(compute=1, backlog=2)
    freed: list[int] = []
    pool.on_freed = lambda: freed.append(1)
    assert pool.acquire_nowait()
    first = pool.begin("a")
    assert not pool.acquire_nowait()  # the compute slot is taken
    assert pool.reserve_nowait()  # a backlog slot alone: "b" waits for a compute slot
    assert not pool.compute_nowait()
    got: list[str] = []

    async def reserve(name: str) -> None:
        await pool.reserve()
        got.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reserve, "x")
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # the backlog is full
        pool.computed(first)  # the answer is queued: the compute slot comes back
        pool.computed(first)  # (only once)
        assert len(freed) == 1
        await trio.testing.wait_all_tasks_blocked()
        assert got == []  # a compute slot is no backlog slot
        assert pool.compute_nowait()  # "b" takes it
        second = pool.begin("b")
        pool.finish(first)  # a backlog slot comes back
        await trio.testing.wait_all_tasks_blocked()
        assert got == ["x"]
        pool.release_reserved()  # "x" will not start after all
        pool.finish(second)
    assert pool.count == 0
    # every slot is free again, and only those: one compute, two backlog
    assert pool.acquire_nowait() and not pool.compute_nowait()
    assert pool.reserve_nowait() and not pool.reserve_nowait()


async def test_unused_slots_go_back() -> None:
    pool = HandlerPool(compute=1, backlog=1)
    assert pool.acquire_nowait()
    assert not pool.acquire_nowait()
    pool.release_unused()
    assert pool.acquire_nowait()


async def test_wait_idle(autojump_clock: trio.testing.MockClock) -> None:
    pool = HandlerPool(compute=2, backlog=2)
    await pool.wait_idle()  # nothing runs
    assert pool.acquire_nowait()
    running = pool.begin(None)
    with trio.fail_after(5):  # (a hang is the failure, not a test run that never ends)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.wait_idle)
            nursery.start_soon(pool.wait_idle)
            await trio.testing.wait_all_tasks_blocked()
            pool.finish(running)


async def test_a_finished_handler_wakes_the_reader_without_on_freed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The backlog is full of running handlers, none reserved (no on_freed): the reader
    # waits in reserve() until one finishes. Mutation: finish() tells only on_freed
    # (the hot path skips the waiter) -> the reader waits forever.
    pool = HandlerPool(compute=1, backlog=1)
    assert pool.acquire_nowait()
    running = pool.begin("a")
    got: list[str] = []

    async def reserve() -> None:
        await pool.reserve()
        got.append("slot")

    with trio.fail_after(5):  # (a hang is the failure: the mock clock ends it)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reserve)
            await trio.testing.wait_all_tasks_blocked()
            pool.computed(running)  # a compute slot is no backlog slot
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            pool.finish(running)
    assert got == ["slot"]


async def test_wait_idle_is_woken_by_the_last_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Mutation: finish() does not wake wait_idle -> it waits forever.
    pool = HandlerPool(compute=1, backlog=1)
    assert pool.acquire_nowait()
    running = pool.begin(None)
    with trio.fail_after(5):  # (a hang is the failure: the mock clock ends it)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool.wait_idle)
            await trio.testing.wait_all_tasks_blocked()
            pool.finish(running)

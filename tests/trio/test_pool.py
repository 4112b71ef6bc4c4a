"""The handler pool's slots: taken without waiting when free, waited for otherwise."""

from __future__ import annotations

import trio
import trio.testing

from mcp_trio._pool import HandlerPool


async def test_slots_are_waited_for_and_handed_on() -> None:
    pool = HandlerPool(compute=1, backlog=2)
    assert pool.acquire_nowait()
    first = pool.begin("a")
    assert not pool.acquire_nowait()  # the compute slot is taken
    got: list[str] = []

    async def take(name: str) -> None:
        await pool.acquire()
        got.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, "x")
        nursery.start_soon(take, "y")
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        pool.computed(first)  # the answer is queued: one compute slot comes back
        pool.computed(first)  # (only once)
        await trio.testing.wait_all_tasks_blocked()
        assert len(got) == 1  # the other waits: no compute slot, and the backlog is full
        second = pool.begin("b")
        pool.finish(first)
        await trio.testing.wait_all_tasks_blocked()
        assert len(got) == 1  # a backlog slot came back, but not a compute slot
        pool.finish(second)
    assert sorted(got) == ["x", "y"]
    assert pool.count == 0


async def test_unused_slots_go_back() -> None:
    pool = HandlerPool(compute=1, backlog=1)
    assert pool.acquire_nowait()
    assert not pool.acquire_nowait()
    pool.release_unused()
    assert pool.acquire_nowait()


async def test_wait_idle() -> None:
    pool = HandlerPool(compute=2, backlog=2)
    await pool.wait_idle()  # nothing runs
    assert pool.acquire_nowait()
    running = pool.begin(None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pool.wait_idle)
        nursery.start_soon(pool.wait_idle)
        await trio.testing.wait_all_tasks_blocked()
        pool.finish(running)

"""The total byte bound on what tasks store (``TaskConfig.max_stored_bytes``).

Every test runs on the ``autojump_clock``: the tools' sleeps and the TTLs take no real time.
"""

from __future__ import annotations

import contextlib
import re
import tracemalloc
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from mcp_sansio import Era, ErrorData
from mcp_sansio._http_auth import Principal
from mcp_sansio._json import dumps, loads
from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_trio import Context, McpError, Server, TaskConfig
from mcp_trio._tasks import TaskRun, TaskRunner

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
FORM: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "string"}}}
TOOL_ERROR = -32000  # (the code our tools fail with: the one error kind that is counted)


def ctx(subject: str | None, method: str = "tools/call", **params: Any) -> Any:
    """A modern request's context with the extension declared (no session: as over HTTP)."""
    principal = None if subject is None else Principal(subject=subject)
    return SimpleNamespace(
        era=Era.MODERN, client_capabilities=EXT, principal=principal, method=method, params=params
    )


def text(size: int) -> dict[str, Any]:
    """A tool result of ``size`` characters of text."""
    return {"content": [{"type": "text", "text": "x" * size}]}


def result_bytes(size: int) -> int:
    """What a task completed with :func:`text` counts (``resultType`` is added)."""
    return len(dumps({**text(size), "resultType": "complete"}))


def returning(result: dict[str, Any], after: float = 1) -> Callable[[TaskRun], Awaitable[Any]]:
    async def run(_: TaskRun) -> dict[str, Any]:
        await trio.sleep(after)
        return result

    return run


async def start(runner: TaskRunner, who: str | None, run: Callable[[TaskRun], Any]) -> str:
    created = await runner.call(ctx(who), "required", "call", run, "t")
    assert isinstance(created, dict) and created["resultType"] == "task"
    return str(created["taskId"])


async def fetch(runner: TaskRunner, who: str | None, task_id: str) -> dict[str, Any]:
    """``tasks/get`` as the client reads it (the stored result is embedded encoded)."""
    answer: dict[str, Any] = loads(
        dumps(await runner.tasks_get(ctx(who, "tasks/get", taskId=task_id)))
    )
    return answer


def recount(runner: TaskRunner) -> int:
    """What the tasks in the table hold, counted afresh from what they keep."""
    total = 0
    by_caller: dict[object, int] = {}
    for run in runner._tasks.values():
        held = 0 if run.result is None else len(run.result)
        if run.error is not None and run.error.code == TOOL_ERROR:
            held += len(dumps(run.error.to_wire()))
        held += sum(len(dumps(q)) for q in run.pending.values())
        held += run.reserved  # (TaskConfig.reserved_bytes_per_task, while it runs)
        assert run.stored_bytes == held
        total += held
        if held:
            by_caller[run.caller] = by_caller.get(run.caller, 0) + held
    assert runner._held_bytes == by_caller
    return total


def test_task_config_max_stored_bytes() -> None:
    assert TaskConfig().max_stored_bytes == 64 * 1024 * 1024
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="max_stored_bytes"):
            TaskConfig(max_stored_bytes=bad)  # type: ignore[arg-type]


async def test_a_result_is_counted_once_and_served_as_it_was_returned(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner()
    runner.enabled = True
    async with runner.running() as nursery:
        task_id = await start(runner, "bob", returning(text(100)))
        assert runner.stored_bytes == 0  # (nothing stored while it runs)
        await trio.sleep(2)
        assert runner.stored_bytes == result_bytes(100) == recount(runner)
        got = await fetch(runner, "bob", task_id)
        assert got["status"] == "completed" and got["result"] == {
            **text(100),
            "resultType": "complete",
        }
        assert (await fetch(runner, "bob", task_id))["result"] == got["result"]  # (again)
        assert runner.stored_bytes == result_bytes(100)  # (fetching does not count again)
        nursery.cancel_scope.cancel()


async def test_kept_results_hold_the_memory_they_are_counted_for(
    autojump_clock: MockClock,
) -> None:
    # What orjson.dumps returns for a short text holds a 4 KiB buffer (orjson 3.13): kept
    # as it is, 200 results of ~70 bytes held ~800 KiB where ~14 KiB were counted.
    runner = TaskRunner()
    runner.enabled = True
    async with runner.running() as nursery:
        for _ in range(200):
            await start(runner, "bob", returning(text(10)))
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await trio.sleep(2)  # (every task completes, its result kept)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert runner.stored_bytes == 200 * result_bytes(10)
        assert grown < 200 * 1024, grown
        nursery.cancel_scope.cancel()


async def test_a_result_larger_than_the_bound_fails_its_task(autojump_clock: MockClock) -> None:
    # End to end: the client learns why, on tasks/get; the server goes on.
    server = Server("big", task_config=TaskConfig(max_stored_bytes=1000))

    @server.tool(task=True)
    async def big(size: int) -> str:
        """Returns ``size`` characters."""
        await trio.sleep(1)
        return "x" * size

    async with server.connect_in_memory(era="modern", capabilities=EXT) as c:
        huge = await c.request("tools/call", {"name": "big", "arguments": {"size": 5000}})
        small = await c.request("tools/call", {"name": "big", "arguments": {"size": 10}})
        await trio.sleep(2)
        failed = await c.request("tasks/get", {"taskId": huge["taskId"]})
        assert failed["status"] == "failed" and failed["error"]["code"] == -32603
        assert re.fullmatch(
            r"The outcome \(\d{5} bytes\) is larger than max_stored_bytes \(1000\)",
            failed["error"]["message"],
        )
        assert failed["statusMessage"] == failed["error"]["message"]
        done = await c.request("tasks/get", {"taskId": small["taskId"]})
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "x" * 10
        runner = server._methods.tasks
        assert 0 < runner.stored_bytes == recount(runner) <= 1000


async def test_a_full_store_evicts_collected_results_the_callers_own_first(
    autojump_clock: MockClock,
) -> None:
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(max_stored_bytes=3 * size, retention_after_fetch_ms=10_000))
    runner.enabled = True
    async with runner.running() as nursery:
        made = [
            (who, await start(runner, who, returning(text(100))))
            for who in ("bob", "alice", "alice")
        ]
        await trio.sleep(2)
        assert runner.stored_bytes == 3 * size  # (full)
        for who, task_id in made:
            await fetch(runner, who, task_id)  # (all collected)
        # Within the grace period nothing may go: no task starts whose end could not be
        # kept (as when the table is full: a required tool is refused).
        with pytest.raises(McpError) as full:
            await start(runner, "alice", returning(text(100)))
        assert full.value.error.message == (
            "The server's task store is full: a new task needs room for its outcome, "
            f"{3 * size} of {3 * size} bytes are held"
        )
        assert runner.stored_bytes == 3 * size == recount(runner)
        # Past it, alice's own oldest collected result makes room, not bob's (older).
        (_, bob), (_, a1), (_, a2) = made
        await trio.sleep(10)
        mine = await start(runner, "alice", returning(text(100)))
        await trio.sleep(2)
        assert (await fetch(runner, "alice", mine))["status"] == "completed"
        with pytest.raises(McpError):
            await fetch(runner, "alice", a1)
        assert (await fetch(runner, "bob", bob))["status"] == "completed"
        # Carol has no result of her own to give up: the oldest of anyone's goes (bob's).
        hers = await start(runner, "carol", returning(text(100)))
        await trio.sleep(2)
        assert (await fetch(runner, "carol", hers))["status"] == "completed"
        with pytest.raises(McpError):
            await fetch(runner, "bob", bob)
        assert (await fetch(runner, "alice", a2))["status"] == "completed"
        assert runner.stored_bytes == 3 * size == recount(runner)
        nursery.cancel_scope.cancel()


async def test_a_full_store_starts_no_task(autojump_clock: MockClock) -> None:
    # At the bound, a new task's outcome could not be kept: it is treated as when the
    # table is full, before any work starts (not run, then thrown away).
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(max_stored_bytes=size))
    runner.enabled = True
    runs: list[str] = []

    def counted(who: str) -> Callable[[TaskRun], Awaitable[Any]]:
        async def run(handle: TaskRun) -> dict[str, Any]:
            runs.append(who)
            return text(1)

        return run

    async with runner.running() as nursery:
        await start(runner, "bob", returning(text(100)))
        await trio.sleep(2)
        assert runner.stored_bytes == size  # (full, and nothing may be evicted)
        with pytest.raises(
            McpError, match=rf"^The server's task store is full: .*, {size} of {size} bytes "
        ):
            await start(runner, "alice", counted("required"))
        # An optional tool runs as an ordinary call: its outcome is the call's answer.
        plain = await runner.call(ctx("alice"), "optional", "call", counted("optional"), "t")
        assert plain == text(1) and runs == ["optional"]
        assert len(runner._tasks) == 1 and runner.stored_bytes == size
        nursery.cancel_scope.cancel()


def test_task_config_reserved_bytes_per_task() -> None:
    assert TaskConfig().reserved_bytes_per_task == 0
    assert TaskConfig(max_stored_bytes=10, reserved_bytes_per_task=10).reserved_bytes_per_task
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="reserved_bytes_per_task"):
            TaskConfig(reserved_bytes_per_task=bad)  # type: ignore[arg-type]
    # Larger than a bound, no task could ever be admitted.
    for config in (
        {"max_stored_bytes": 10},
        {"max_stored_bytes": 100, "max_stored_bytes_per_owner": 10},
    ):
        with pytest.raises(ValueError, match=r"reserved_bytes_per_task \(11\) must be at most"):
            TaskConfig(reserved_bytes_per_task=11, **config)


async def test_a_reservation_admits_no_task_whose_outcome_could_not_be_kept(
    autojump_clock: MockClock,
) -> None:
    # Two tasks run, each holding room for its outcome: a third finds no room for its
    # own (without the reservation it would be admitted, and fail "full" at its end).
    size = result_bytes(100)
    runner = TaskRunner(
        TaskConfig(max_stored_bytes=2 * size + size // 2, reserved_bytes_per_task=size)
    )
    runner.enabled = True
    async with runner.running() as nursery:
        first = await start(runner, "bob", returning(text(100), after=5))
        second = await start(runner, "carol", returning(text(10), after=5))
        assert runner.stored_bytes == 2 * size == recount(runner)  # (reserved while running)
        assert runner._held_bytes == {"bob": size, "carol": size}
        with pytest.raises(McpError) as full:
            await start(runner, "alice", returning(text(1)))
        assert full.value.error.message == (
            f"The server's task store is full: a new task needs {size} bytes reserved for "
            f"its outcome, {2 * size} of {2 * size + size // 2} bytes are held"
        )
        await trio.sleep(10)
        # Each outcome took its reservation's place (the smaller one gives the rest back).
        assert (await fetch(runner, "bob", first))["status"] == "completed"
        assert (await fetch(runner, "carol", second))["status"] == "completed"
        assert runner.stored_bytes == size + result_bytes(10) == recount(runner)
        nursery.cancel_scope.cancel()


async def test_a_reservation_is_released_however_the_task_ends(autojump_clock: MockClock) -> None:
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(max_stored_bytes=3 * size, reserved_bytes_per_task=size))
    runner.enabled = True
    async with runner.running() as nursery:
        cancelled = await start(runner, "bob", returning(text(1), after=100))
        larger = await start(runner, "bob", returning(text(200)))  # (needs more than it holds)
        expiring = await start(runner, "bob", returning(text(1), after=10_000))
        assert runner.stored_bytes == 3 * size
        await runner.tasks_cancel(ctx("bob", "tasks/cancel", taskId=cancelled))
        await trio.sleep(2)
        assert (await fetch(runner, "bob", cancelled))["status"] == "cancelled"
        # The larger outcome fits once the cancelled task's reservation is gone.
        assert (await fetch(runner, "bob", larger))["status"] == "completed"
        assert runner.stored_bytes == result_bytes(200) + size == recount(runner)
        await trio.sleep(runner.config.ttl_ms / 1000)
        assert runner.lookup(expiring) is None  # (purged at its TTL, reservation and all)
        await trio.sleep(1)
        assert runner.stored_bytes == 0 == recount(runner)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "bound",
    [{"max_stored_bytes": 1000}, {"max_stored_bytes_per_owner": 1000}],
    ids=["total", "share"],
)
async def test_a_reservation_filling_a_bound_leaves_no_room_for_questions(
    autojump_clock: MockClock, bound: dict[str, int]
) -> None:
    # A question is counted on top of the reservation (as documented): with none to
    # spare, the ask is refused and fails the task.
    runner = TaskRunner(TaskConfig(reserved_bytes_per_task=1000, **bound))
    runner.enabled = True
    question = {"method": "elicitation/create", "params": {"message": "Name?"}}

    async def asking(run: TaskRun) -> Any:
        return await run.ask("k", question, lambda answer: answer)

    async with runner.running() as nursery:
        refused = await start(runner, "bob", asking)
        await trio.sleep(1)
        failed = await fetch(runner, "bob", refused)
        assert failed["status"] == "failed"
        held = (
            "1000 of 1000 bytes are held"
            if "max_stored_bytes" in bound
            else "your tasks hold 1000 of the 1000 bytes one caller may"
        )
        assert failed["error"]["message"] == (
            f"The server's task store is full: the question needs {len(dumps(question))} "
            f"bytes, {held}"
        )
        assert runner.stored_bytes == 0 == recount(runner)
        nursery.cancel_scope.cancel()


def test_task_config_max_stored_bytes_per_owner() -> None:
    assert TaskConfig().max_stored_bytes_per_owner is None
    assert TaskConfig(max_stored_bytes_per_owner=1).max_stored_bytes_per_owner == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_stored_bytes_per_owner"):
            TaskConfig(max_stored_bytes_per_owner=bad)  # type: ignore[arg-type]


async def test_one_callers_results_cannot_starve_the_others(autojump_clock: MockClock) -> None:
    size = result_bytes(100)
    share = 2 * size
    runner = TaskRunner(
        TaskConfig(
            max_stored_bytes=5 * size, max_stored_bytes_per_owner=share, retention_after_fetch_ms=0
        )
    )
    runner.enabled = True
    async with runner.running() as nursery:
        # Mallory fills her share with results she never fetches.
        hoard = [await start(runner, "mallory", returning(text(100))) for _ in range(2)]
        await trio.sleep(2)
        with pytest.raises(McpError) as full:
            await start(runner, "mallory", returning(text(100)))
        assert full.value.error.message == (
            "The server's task store is full: a new task needs room for its outcome, "
            f"your tasks hold {share} of the {share} bytes one caller may"
        )
        # Everyone else still has room (anonymous HTTP callers have no share: only the total).
        alice = await start(runner, "alice", returning(text(100)))
        anonymous = [await start(runner, None, returning(text(100))) for _ in range(2)]
        await trio.sleep(2)
        assert (await fetch(runner, "alice", alice))["status"] == "completed"  # (collected)
        for task_id in anonymous:
            assert (await fetch(runner, None, task_id))["status"] == "completed"
        assert runner.stored_bytes == 5 * size == recount(runner)
        # Past her share, only her own collected results make room: once she fetches one,
        # it goes for her next.
        await fetch(runner, "mallory", hoard[0])
        mine = await start(runner, "mallory", returning(text(100)))
        await trio.sleep(2)
        assert (await fetch(runner, "mallory", mine))["status"] == "completed"
        with pytest.raises(McpError):
            await fetch(runner, "mallory", hoard[0])
        # An outcome past her share, with only others' collected results to evict: refused,
        # and theirs are kept.
        await fetch(runner, "mallory", mine)  # (makes room for the next task's admission)
        bigger = await start(runner, "mallory", returning(text(200)))
        await trio.sleep(2)
        refused = await fetch(runner, "mallory", bigger)
        assert refused["error"] == {
            "code": -32603,
            "message": "The server's task store is full: the outcome needs "
            f"{result_bytes(200)} bytes, your tasks hold {size} of the {share} bytes "
            "one caller may",
        }
        assert (await fetch(runner, "alice", alice))["status"] == "completed"
        # One larger than the share alone says so.
        huge = await start(runner, "mallory", returning(text(2 * size)))
        await trio.sleep(2)
        assert (await fetch(runner, "mallory", huge))["error"]["message"] == (
            f"The outcome ({result_bytes(2 * size)} bytes) is larger than "
            f"max_stored_bytes_per_owner ({share})"
        )
        assert runner.stored_bytes == recount(runner)
        nursery.cancel_scope.cancel()


async def test_the_quotas_victim_makes_room_in_the_share_too(
    autojump_clock: MockClock,
) -> None:
    # Bob is at his quota and his share, both held by one collected task: the quota
    # chooses it, and what it frees counts for the share as well (not chosen twice, nor
    # the call refused for want of a second victim).
    size = result_bytes(100)
    runner = TaskRunner(
        TaskConfig(
            max_tasks_per_owner=1, max_stored_bytes_per_owner=size, retention_after_fetch_ms=0
        )
    )
    runner.enabled = True
    async with runner.running() as nursery:
        first = await start(runner, "bob", returning(text(100)))
        await trio.sleep(2)
        assert (await fetch(runner, "bob", first))["status"] == "completed"  # (collected)
        assert runner._held_bytes == {"bob": size}
        second = await start(runner, "bob", returning(text(1), after=5))
        assert runner.lookup(first) is None and runner.lookup(second) is not None
        assert runner.stored_bytes == 0 == recount(runner)
        nursery.cancel_scope.cancel()


async def test_nothing_is_evicted_when_that_could_not_make_room(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner(
        TaskConfig(
            max_stored_bytes=result_bytes(100) + result_bytes(300) + 1,  # (not full)
            retention_after_fetch_ms=0,
        )
    )
    runner.enabled = True
    async with runner.running() as nursery:
        collected = await start(runner, "bob", returning(text(100)))
        unseen = await start(runner, "bob", returning(text(300)))
        await trio.sleep(2)
        await fetch(runner, "bob", collected)
        # Evicting the collected one would free too little for this one.
        big = await start(runner, "bob", returning(text(200)))
        await trio.sleep(2)
        failed = await fetch(runner, "bob", big)
        assert failed["status"] == "failed"
        held = result_bytes(100) + result_bytes(300)
        assert failed["error"]["message"] == (
            f"The server's task store is full: the outcome needs {result_bytes(200)} bytes, "
            f"{held} of {held + 1} bytes are held"
        )
        assert (await fetch(runner, "bob", collected))["status"] == "completed"
        assert (await fetch(runner, "bob", unseen))["status"] == "completed"
        # A smaller one fits in what the collected one frees.
        fits = await start(runner, "bob", returning(text(50)))
        await trio.sleep(2)
        assert (await fetch(runner, "bob", fits))["status"] == "completed"
        with pytest.raises(McpError):
            await fetch(runner, "bob", collected)
        assert runner.stored_bytes == recount(runner)
        nursery.cancel_scope.cancel()


async def test_a_refused_outcome_evicts_nothing_for_the_share_either(
    autojump_clock: MockClock,
) -> None:
    # Alice's share alone could be met by evicting her collected result, but the total
    # could not be even then: her outcome is refused and her collected result kept
    # (she must not lose both). Once another collected result can make up the rest,
    # both go, together, and her outcome is kept.
    old, bob, carol, new = (result_bytes(n) for n in (300, 500, 200, 400))
    runner = TaskRunner(
        TaskConfig(
            max_stored_bytes=old + bob + carol,
            max_stored_bytes_per_owner=bob,  # (bob's result fills his share exactly)
            retention_after_fetch_ms=0,
        )
    )
    runner.enabled = True
    assert new <= bob < old + new and old < new  # (the share evicts hers; the total not)
    async with runner.running() as nursery:
        alices = await start(runner, "alice", returning(text(300)))
        await start(runner, "bob", returning(text(500)))
        carols = await start(runner, "carol", returning(text(200)))
        refused = await start(runner, "alice", returning(text(400), after=5))
        kept = await start(runner, "alice", returning(text(400), after=10))
        await trio.sleep(2)
        assert runner.stored_bytes == old + bob + carol  # (full)
        await fetch(runner, "alice", alices)  # (collected: the share may evict it)
        await trio.sleep(4)
        assert (await fetch(runner, "alice", refused))["error"] == {
            "code": -32603,
            "message": f"The server's task store is full: the outcome needs {new} bytes, "
            f"{old + bob + carol} of {old + bob + carol} bytes are held",
        }
        assert (await fetch(runner, "alice", alices))["status"] == "completed"
        assert runner.stored_bytes == old + bob + carol == recount(runner)
        await fetch(runner, "carol", carols)  # (collected: the total may evict it)
        await trio.sleep(5)
        assert (await fetch(runner, "alice", kept))["status"] == "completed"
        for who, gone in (("alice", alices), ("carol", carols)):
            with pytest.raises(McpError):
                await fetch(runner, who, gone)
        assert runner.stored_bytes == bob + new == recount(runner)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "bound",
    [{"max_tasks": 3}, {"max_tasks_per_owner": 2}],
    ids=["table-full", "quota"],
)
async def test_a_refused_call_evicts_nothing(
    autojump_clock: MockClock, bound: dict[str, int]
) -> None:
    # A full table (or alice's quota) would evict alice's collected task, which holds no
    # bytes; the full store then refuses the call: her collected task is kept.
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(max_stored_bytes=2 * size, retention_after_fetch_ms=0, **bound))
    runner.enabled = True
    async with runner.running() as nursery:
        cancelled = await start(runner, "alice", returning(text(100), after=50))
        await runner.tasks_cancel(ctx("alice", "tasks/cancel", taskId=cancelled))
        await start(runner, "alice", returning(text(100)))
        await start(runner, "bob", returning(text(100)))
        await trio.sleep(2)
        assert runner.stored_bytes == 2 * size and len(runner._tasks) == 3
        with pytest.raises(McpError) as full:
            await start(runner, "alice", returning(text(1)))
        assert full.value.error.message == (
            "The server's task store is full: a new task needs room for its outcome, "
            f"{2 * size} of {2 * size} bytes are held"
        )
        assert (await fetch(runner, "alice", cancelled))["status"] == "cancelled"
        assert len(runner._tasks) == 3 and runner.stored_bytes == 2 * size == recount(runner)
        nursery.cancel_scope.cancel()


async def test_anonymous_callers_have_no_share(autojump_clock: MockClock) -> None:
    # Anonymous HTTP requests cannot be told apart: together they are bounded by the
    # total only, not by one caller's share (at admission nor when storing).
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(max_stored_bytes=3 * size, max_stored_bytes_per_owner=size))
    runner.enabled = True
    async with runner.running() as nursery:
        made = [await start(runner, None, returning(text(100))) for _ in range(2)]
        await trio.sleep(2)
        assert runner.stored_bytes == 2 * size  # (past one share)
        made.append(await start(runner, None, returning(text(100))))
        await trio.sleep(2)
        for task_id in made:
            assert (await fetch(runner, None, task_id))["status"] == "completed"
        assert runner.stored_bytes == 3 * size == recount(runner)
        nursery.cancel_scope.cancel()


async def test_a_tools_error_is_counted_and_failed_for_if_too_large(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner(TaskConfig(max_stored_bytes=500))
    runner.enabled = True

    def failing(data: str) -> Callable[[TaskRun], Awaitable[Any]]:
        async def run(_: TaskRun) -> dict[str, Any]:
            await trio.sleep(1)
            raise McpError(ErrorData(code=TOOL_ERROR, message="no", data=data))

        return run

    async with runner.running() as nursery:
        small = await start(runner, "bob", failing("y" * 10))
        large_id = await start(runner, "bob", failing("y" * 1000))
        await trio.sleep(2)
        kept = await fetch(runner, "bob", small)
        assert kept["error"] == {"code": TOOL_ERROR, "message": "no", "data": "y" * 10}
        assert runner.stored_bytes == len(dumps(kept["error"])) == recount(runner)
        lost = await fetch(runner, "bob", large_id)
        large = ErrorData(code=TOOL_ERROR, message="no", data="y" * 1000)
        assert lost["error"] == {
            "code": -32603,
            "message": f"The outcome ({len(dumps(large.to_wire()))} bytes) is larger than "
            "max_stored_bytes (500)",
        }
        nursery.cancel_scope.cancel()


def _circular() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    return loop


@pytest.mark.parametrize(
    "value",
    [object(), {1: "a"}, 2**64, -(2**63) - 1, _circular(), "\ud800"],
    ids=["object", "non-str-key", "int-too-large", "int-too-small", "circular", "surrogate"],
)
@pytest.mark.parametrize("kind", ["result", "error"])
async def test_an_outcome_that_cannot_be_encoded_fails_its_task(
    autojump_clock: MockClock, value: object, kind: str
) -> None:
    # orjson raises its JSONEncodeError (which is TypeError) for every one of these: the
    # task fails with the server's own error, nothing is counted, and the runner goes on.
    runner = TaskRunner()
    runner.enabled = True

    async def run(_: TaskRun) -> dict[str, Any]:
        await trio.sleep(1)
        if kind == "error":
            raise McpError(ErrorData(code=TOOL_ERROR, message="no", data={"x": value}))
        return {"content": [], "x": value}

    async with runner.running() as nursery:
        task_id = await start(runner, "bob", run)
        after = await start(runner, "bob", returning(text(1)))
        await trio.sleep(2)
        failed = await fetch(runner, "bob", task_id)
        assert failed["status"] == "failed"
        assert failed["error"] == {"code": -32603, "message": "Internal error"}
        assert (await fetch(runner, "bob", after))["status"] == "completed"
        assert runner.stored_bytes == result_bytes(1) == recount(runner)
        nursery.cancel_scope.cancel()


async def test_questions_are_counted_while_outstanding(autojump_clock: MockClock) -> None:
    server = Server("q", task_config=TaskConfig(max_stored_bytes=2000))

    @server.tool(task=True)
    async def ask(ctx: Context, size: int) -> str:
        """Asks a question ``size`` characters long."""
        answer = await ctx.elicit("?" * size, FORM)
        return f"got {answer.action}"

    async with server.connect_in_memory(era="modern", capabilities=EXT) as c:
        runner = server._methods.tasks
        asked = await c.request("tools/call", {"name": "ask", "arguments": {"size": 100}})
        waiting = await c.request("tasks/get", {"taskId": asked["taskId"]})
        assert waiting["status"] == "input_required"
        (key, question), *_ = waiting["inputRequests"].items()
        assert runner.stored_bytes == len(dumps(question)) == recount(runner)
        # A question too large to keep fails the ask: the tool fails with -32603.
        huge = await c.request("tools/call", {"name": "ask", "arguments": {"size": 5000}})
        await trio.testing.wait_all_tasks_blocked()
        failed = await c.request("tasks/get", {"taskId": huge["taskId"]})
        assert failed["status"] == "failed" and failed["error"]["code"] == -32603
        # Answered: the question's bytes go, the result's come.
        await c.request(
            "tasks/update",
            {"taskId": asked["taskId"], "inputResponses": {key: {"action": "decline"}}},
        )
        await trio.testing.wait_all_tasks_blocked()
        done = await c.request("tasks/get", {"taskId": asked["taskId"]})
        assert done["status"] == "completed"
        assert runner.stored_bytes == len(dumps(done["result"])) == recount(runner)


async def test_every_purge_releases_its_bytes(autojump_clock: MockClock) -> None:
    runner = TaskRunner(TaskConfig(ttl_ms=100_000, retention_after_fetch_ms=0, max_tasks=2))
    runner.enabled = True

    async def asks(run: TaskRun) -> dict[str, Any]:
        await run.ask("k", {"method": "elicitation/create", "params": {"x": "y" * 50}}, str)
        return text(1)

    async with runner.running() as nursery:
        # Expiry: a stored result and an outstanding question, both purged at the TTL.
        await start(runner, "bob", returning(text(100)))
        await start(runner, "bob", asks)
        await trio.sleep(2)
        assert runner.stored_bytes > result_bytes(100)
        await trio.sleep(100)
        assert runner.lookup("none") is None and runner.stored_bytes == 0 == recount(runner)
        # Eviction: a collected result makes room in the table for the next task.
        first = await start(runner, "bob", returning(text(100)))
        cancelled = await start(runner, "bob", returning(text(100), after=50))
        await trio.sleep(2)
        await fetch(runner, "bob", first)
        await runner.tasks_cancel(ctx("bob", "tasks/cancel", taskId=cancelled))
        await trio.testing.wait_all_tasks_blocked()
        await start(runner, "bob", asks)  # (evicts the fetched result)
        with pytest.raises(McpError):
            await fetch(runner, "bob", first)
        await start(runner, "bob", returning(text(100), after=50))  # (evicts the cancelled)
        await trio.sleep(60)
        assert runner.stored_bytes == recount(runner) > result_bytes(100)
        await trio.sleep(1000)
        assert runner.lookup("none") is None and runner.stored_bytes == 0
        nursery.cancel_scope.cancel()
    assert runner.stored_bytes == 0


async def test_an_outcome_purges_expired_tasks_nobody_looked_up(
    autojump_clock: MockClock,
) -> None:
    # The store is full of a task whose TTL elapsed, but nothing has looked at the table
    # since (no tasks/*, no new task): the next outcome purges it to make room.
    size = result_bytes(100)
    runner = TaskRunner(TaskConfig(ttl_ms=100_000, max_stored_bytes=size))
    runner.enabled = True
    async with runner.running() as nursery:
        expired = await start(runner, "bob", returning(text(100)))
        await trio.sleep(0.5)
        later = await start(runner, "bob", returning(text(100), after=99.6))
        await trio.sleep(0.6)
        assert runner.stored_bytes == size  # (the first, never fetched)
        await trio.sleep(99.2)  # (its TTL elapsed at 100 s; the second ended at 100.1 s)
        assert [run.task_id for run in runner._tasks.values()] == [later]
        assert (await fetch(runner, "bob", later))["status"] == "completed"
        with pytest.raises(McpError):
            await fetch(runner, "bob", expired)
        assert runner.stored_bytes == size == recount(runner)
        nursery.cancel_scope.cancel()


async def test_a_purged_task_says_nothing_more(autojump_clock: MockClock) -> None:
    # A waiting notifications/tasks would keep a purged task's result alive (outside
    # the count) and tell of a task that is unknown by then: it goes with the task.
    runner = TaskRunner(TaskConfig(ttl_ms=10_000))
    delivered: list[tuple[str | None, str]] = []
    gate = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        await gate.wait()
        delivered.append((owner, params["status"]))

    runner.deliver = deliver
    async with runner.running():
        early, done = TaskRun(runner, "optional", owner="a"), TaskRun(runner, "optional", owner="b")
        assert early.start() and done.start()
        early.set_message("on its way")  # (taken by the delivery loop, held at the gate)
        await trio.testing.wait_all_tasks_blocked()
        done.settle(text(100), None)  # (waits in the queue)
        assert runner.stored_bytes == result_bytes(100)
        await trio.sleep(20)
        assert runner.lookup("none") is None and runner.stored_bytes == 0
        early.settle(None, None)  # (ends after its purge: nobody to tell)
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
    assert delivered == [("a", "working")]


async def test_a_notification_in_flight_is_not_sent_again_after_a_purge(
    autojump_clock: MockClock,
) -> None:
    # A delivery is under way when the task is purged (TTL), then that delivering serve
    # block ends: its notification is not handed to the other block's loop.
    runner = TaskRunner(TaskConfig(ttl_ms=10_000))
    delivered: list[str] = []
    loops: list[trio.Nursery | None] = []
    gate = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        loops.append(trio.lowlevel.current_task().parent_nursery)
        if len(loops) == 1:
            await gate.wait()  # (the first delivery is slow)
        delivered.append(params["status"])

    runner.deliver = deliver
    ends: dict[trio.Nursery, trio.Event] = {}

    async def block(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with runner.running(inherit=False) as nursery:
            ends[nursery] = trio.Event()
            task_status.started()
            await ends[nursery].wait()

    async with trio.open_nursery() as holder:
        await holder.start(block)
        await holder.start(block)
        run = TaskRun(runner, "optional", owner="a")
        assert run.start()
        run.settle(text(100), None)
        await trio.testing.wait_all_tasks_blocked()  # (a loop took it: held at the gate)
        await trio.sleep(20)
        assert runner.lookup("none") is None and runner.stored_bytes == 0
        first = loops[0]
        assert first is not None
        ends[first].set()  # (the delivering block ends: its delivery is cancelled)
        await trio.testing.wait_all_tasks_blocked()
        assert delivered == [] and not runner._outbox
        holder.cancel_scope.cancel()


# ---------------------------------------------------------------- never drifting

_Op = tuple[str, int, int]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["result", "error", "ask", "fetch", "cancel", "answer", "sleep"]),
        st.integers(0, 3),  # who, or which task
        st.integers(0, 400),  # size, or seconds
    ),
    max_size=30,
)


async def _scenario(
    ops: list[_Op], limit: int, retention_ms: int, share: int | None, reserved: int
) -> None:
    reserved = min(reserved, limit, limit if share is None else share)
    runner = TaskRunner(
        TaskConfig(
            max_tasks=6,
            max_stored_bytes=limit,
            max_stored_bytes_per_owner=share,
            retention_after_fetch_ms=retention_ms,
            ttl_ms=200_000,
            max_input_requests=2,
            reserved_bytes_per_task=reserved,
        )
    )
    runner.enabled = True
    made: list[tuple[str, str]] = []

    def tool(kind: str, size: int) -> Callable[[TaskRun], Awaitable[Any]]:
        async def run(handle: TaskRun) -> dict[str, Any]:
            await trio.sleep(size % 7)
            if kind == "error":
                raise McpError(ErrorData(code=TOOL_ERROR, message="e", data="d" * size))
            if kind == "ask":
                await handle.ask(
                    "q", {"method": "elicitation/create", "params": {"m": "?" * size}}, str
                )
            return text(size)

        return run

    async with runner.running() as nursery:
        for op, which, size in ops:
            who = "abcd"[which]
            if op in ("result", "error", "ask"):
                with contextlib.suppress(McpError):  # (the table is full)
                    made.append((who, await start(runner, who, tool(op, size))))
            elif op == "sleep":
                await trio.sleep(size)
            elif made:
                owner, task_id = made[which % len(made)]
                if runner.lookup(task_id) is None:
                    continue
                if op == "fetch":
                    await fetch(runner, owner, task_id)
                elif op == "cancel":
                    await runner.tasks_cancel(ctx(owner, "tasks/cancel", taskId=task_id))
                else:
                    params = {"taskId": task_id, "inputResponses": {"q": "a"}}
                    await runner.tasks_update(ctx(owner, "tasks/update", **params))
            await trio.testing.wait_all_tasks_blocked()
            assert runner.stored_bytes == recount(runner) <= limit
            assert share is None or max(runner._held_bytes.values(), default=0) <= share
        await trio.sleep(300)  # (every TTL elapses)
        assert runner.lookup("none") is None
        assert not runner._tasks and runner.stored_bytes == 0
        nursery.cancel_scope.cancel()


@given(
    ops=_OPS,
    limit=st.integers(1, 2000),
    retention_ms=st.sampled_from([0, 5000]),
    share=st.none() | st.integers(1, 1000),
    reserved=st.sampled_from([0, 0, 50, 300]),
)
def test_the_count_never_drifts(
    ops: list[_Op], limit: int, retention_ms: int, share: int | None, reserved: int
) -> None:
    trio.run(
        _scenario, ops, limit, retention_ms, share, reserved, clock=MockClock(autojump_threshold=0)
    )

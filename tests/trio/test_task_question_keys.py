"""A task run's question keys, server side (``TaskRun.ask`` / ``TaskRun.deliver``): an
answer is taken once, and a key stays taken from its answer until the tool has read it."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from trio.testing import MockClock

from mcp_trio import TaskConfig
from mcp_trio._tasks import TaskRun, TaskRunner

QUESTION: dict[str, Any] = {"method": "elicitation/create", "params": {"message": "Name?"}}


def started_run() -> TaskRun:
    runner = TaskRunner(TaskConfig())
    runner.enabled = True
    run = TaskRun(runner, "optional")
    assert run.start()
    return run


async def test_a_second_answer_before_the_tool_resumes_is_ignored(
    autojump_clock: MockClock,
) -> None:
    # Answered, the question is no longer outstanding, even before the tool has read
    # its answer: a later tasks/update for the key (a client's retry) is ignored, and
    # the tool gets the first answer, checked once.
    run = started_run()
    got: list[str] = []
    checked: list[Any] = []

    def check(answer: Any) -> str:
        checked.append(answer)
        return str(answer)

    async def tool() -> None:
        got.append(await run.ask("k", QUESTION, check))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tool)
        await trio.testing.wait_all_tasks_blocked()
        assert list(run.pending) == ["k"]
        run.deliver({"k": "first"})
        run.deliver({"k": "second"})  # (the tool has not run since the first)
    assert got == ["first"] and checked == ["first"]
    assert run.task is not None and run.task.status == "working"


async def test_a_key_answered_but_not_yet_read_is_not_asked_again(
    autojump_clock: MockClock,
) -> None:
    # ask's key guard: between an answer and the asking tool reading it, the key is
    # still taken; another ask with it gets a key of its own (else the first tool's
    # clean-up would drop the second question, which nobody could then answer).
    run = started_run()
    got: dict[str, str] = {}

    async def first() -> None:
        got["first"] = await run.ask("k", QUESTION, str)

    async def answer_the_second() -> None:
        await trio.testing.wait_all_tasks_blocked()
        assert got == {"first": "a"}
        assert list(run.pending) == ["k.1"]
        run.deliver({"k.1": "b"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()
        run.deliver({"k": "a"})
        nursery.start_soon(answer_the_second)
        # (No checkpoint since the answer: the first tool has not read it yet.)
        got["second"] = await run.ask("k", QUESTION, str)
    assert got == {"first": "a", "second": "b"}

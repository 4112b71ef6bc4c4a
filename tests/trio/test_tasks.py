"""Task tools (the ``io.modelcontextprotocol/tasks`` extension) on a real server, in memory.

Every test runs on the ``autojump_clock``: the tools' sleeps, the polling and the TTLs
take no real time.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import partial
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing
from trio.testing import MockClock

import mcp_trio
from mcp_sansio import ConnectionConfig, Era, InputRequired
from mcp_sansio._http_auth import Principal
from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_trio import (
    Context,
    EraChoice,
    InputRequiredResult,
    McpError,
    Server,
    Session,
    StreamChannel,
    TaskConfig,
    ToolError,
    ToolResult,
    open_http_client,
    open_session,
    open_websocket_client,
)
from mcp_trio._tasks import TaskRun, TaskRunner

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def request_ctx(subject: str | None, method: str = "tools/call", **params: Any) -> Any:
    """A request's context as the task runner reads it: modern, the tasks extension
    declared, ``subject`` authenticated (``None``: anonymous), no session (as over HTTP)."""
    principal = None if subject is None else Principal(subject=subject)
    return SimpleNamespace(
        era=Era.MODERN, client_capabilities=EXT, principal=principal, method=method, params=params
    )


def make_server(config: TaskConfig | None = None) -> Server:
    server = Server("tasks", task_config=config)

    @server.tool()
    async def plain() -> str:
        """Never a task."""
        return "plain"

    @server.tool(task=True)
    async def slow(seconds: float = 10.0) -> str:
        """Sleeps, then answers."""
        await trio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(task="required")
    async def only_task() -> str:
        """Runs only as a task."""
        await trio.sleep(1)
        return "done"

    @server.tool(task="optional")
    async def crash() -> str:
        """A protocol error."""
        await trio.sleep(1)
        raise McpError.from_code(-32603, "crashed", {"why": "test"})

    @server.tool(task="optional")
    async def tool_error() -> str:
        """A tool error."""
        raise ToolError("bad input")

    @server.tool(task="optional")
    async def ask(ctx: Context) -> str:
        """Asks a name through the task."""
        answer = await ctx.elicit("Name?", FORM)
        return f"hi {(answer.content or {}).get('name')}"

    @server.tool(task="optional")
    async def ask_two(ctx: Context) -> str:
        """Asks two names at once."""
        names: list[str] = []

        async def one(message: str) -> None:
            names.append((await ctx.elicit(message, FORM)).content["name"])  # type: ignore[index]

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "First?")
            nursery.start_soon(one, "Second?")
        return ",".join(sorted(names))

    @server.tool(task="required", task_start="explicit")
    async def compose(ctx: Context) -> str:
        """An input-required round, then a task."""
        answer = await ctx.elicit("Name?", FORM)
        ids = [ctx.task_id]
        assert ctx.start_task() and ctx.start_task()  # (the second: already a task)
        ids.append(ctx.task_id)
        assert ids[0] is None and ids[1] is not None
        await trio.sleep(1)
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool(task="optional", task_start="explicit")
    async def maybe(quick: bool, ctx: Context) -> str:
        """A plain result when quick, else a task."""
        if quick:
            return "quick"
        ctx.start_task()
        await trio.sleep(5)
        return "slow"

    @server.tool(task="optional")
    async def ask_model(ctx: Context) -> str:
        """Samples through the task."""
        return (await ctx.sample("Hi?", max_tokens=5)).model

    @server.tool(task="optional")
    async def ask_roots(ctx: Context) -> str:
        """Lists the roots through the task."""
        return ",".join(str(root.uri) for root in await ctx.list_roots())

    @server.tool(task="optional")
    async def busy_then_ask(ctx: Context) -> str:
        """Reports progress, then asks, then works on."""
        await ctx.report_progress(1, 2, "compiling")
        await ctx.elicit("Name?", FORM)
        await trio.sleep(10)
        return "done"

    @server.tool(task="optional", task_start="explicit")
    def blocking(ctx: Context) -> str:
        """A plain function (a worker thread) that becomes a task."""
        started = ctx.start_task()
        return f"task {started}, id {ctx.task_id is not None}"

    @server.tool(task="optional")
    async def chatty(ctx: Context) -> str:
        """Reports progress and logs inside its task."""
        assert not await ctx.report_progress(1, 2, "half way")
        assert not await ctx.report_progress(1.5, 2)
        assert not await ctx.log("info", "unseen")
        assert not ctx.cancelled
        await trio.sleep(10)
        return "chatted"

    return server


@asynccontextmanager
async def client(
    server: Server, caps: dict[str, Any] | None = None, era: str = "modern"
) -> AsyncGenerator[Session]:
    async with server.connect_in_memory(
        era=cast(EraChoice, era), capabilities=EXT if caps is None else caps
    ) as c:
        yield c


async def call(c: Session, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return await c.request("tools/call", {"name": name, "arguments": arguments or {}})


async def get(c: Session, task_id: str) -> dict[str, Any]:
    return await c.request("tasks/get", {"taskId": task_id})


async def poll(c: Session, task_id: str, *statuses: str, interval: float = 0.1) -> dict[str, Any]:
    """Poll until one of ``statuses`` (``interval``: virtual seconds on the autojump clock;
    over real transports 0, each round trip taking what it takes)."""
    with trio.fail_after(1000):
        while True:
            got = await get(c, task_id)
            if got["status"] in statuses:
                return got
            await trio.sleep(interval)


async def error_of(c: Session, method: str, params: dict[str, Any]) -> McpError:
    with pytest.raises(McpError) as info:
        await c.request(method, params)
    return info.value


# ---------------------------------------------------------------- the lifecycle


async def test_a_task_is_created_polled_and_completed(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        created = await call(c, "slow", {"seconds": 10})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 1000
        assert not {"result", "error", "inputRequests", "requestState"} & set(created)
        task_id = created["taskId"]
        working = await get(c, task_id)  # created before the answer: found at once
        assert working["status"] == "working" and working["resultType"] == "complete"
        assert "result" not in working
        done = await poll(c, task_id, "completed")
        assert done["result"]["content"] == [{"type": "text", "text": "slept 10.0"}]
        assert done["result"]["resultType"] == "complete"
        assert done["lastUpdatedAt"] >= done["createdAt"]
        assert await get(c, task_id) == done  # terminal: it stays so


async def test_a_protocol_error_fails_the_task_and_a_tool_error_completes_it(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server()) as c:
        failed = await poll(c, (await call(c, "crash"))["taskId"], "completed", "failed")
        assert failed["status"] == "failed" and "result" not in failed
        assert failed["error"] == {"code": -32603, "message": "crashed", "data": {"why": "test"}}
        assert failed["statusMessage"] == "crashed"
        errored = await poll(c, (await call(c, "tool_error"))["taskId"], "completed", "failed")
        assert errored["status"] == "completed" and errored["result"]["isError"] is True


async def test_cancel_settles_a_running_task_and_is_idempotent(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "slow", {"seconds": 1000}))["taskId"]
        ack = await c.request("tasks/cancel", {"taskId": task_id})
        assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}
        cancelled = await poll(c, task_id, "cancelled", "completed")
        assert cancelled["status"] == "cancelled"
        assert cancelled["statusMessage"] == "Cancelled at the client's request"
        again = await c.request("tasks/cancel", {"taskId": task_id})
        assert again["resultType"] == "complete"
        done_id = (await call(c, "slow", {"seconds": 1}))["taskId"]
        await poll(c, done_id, "completed")
        await c.request("tasks/cancel", {"taskId": done_id})
        assert (await get(c, done_id))["status"] == "completed"


async def test_a_question_parks_the_task_until_tasks_update_answers_it(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "ask"))["taskId"]
        asking = await poll(c, task_id, "input_required")
        ((key, request),) = asking["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["requestedSchema"] == FORM
        assert (await get(c, task_id))["inputRequests"] == asking["inputRequests"]  # same key
        # Unknown keys are ignored; the ack is empty either way.
        ack = await c.request("tasks/update", {"taskId": task_id, "inputResponses": {"x": {}}})
        assert ack["resultType"] == "complete" and "taskId" not in ack
        assert (await get(c, task_id))["status"] == "input_required"
        answer = {key: {"action": "accept", "content": {"name": "Bo"}}}
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
        done = await poll(c, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "hi Bo"
        # The key is answered: answering it again changes nothing.
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert (await get(c, task_id))["status"] == "completed"


async def test_partial_answers_keep_the_task_waiting_for_the_rest(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "ask_two"))["taskId"]
        with trio.fail_after(100):
            while len((asking := await get(c, task_id)).get("inputRequests", {})) < 2:
                await trio.sleep(0.1)
        first, second = asking["inputRequests"]
        assert first != second
        accept = {"action": "accept", "content": {"name": "A"}}
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": {first: accept}})
        partial = await get(c, task_id)
        assert partial["status"] == "input_required"
        assert list(partial["inputRequests"]) == [second]
        accept = {"action": "accept", "content": {"name": "B"}}
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": {second: accept}})
        done = await poll(c, task_id, "completed")
        assert done["result"]["content"][0]["text"] == "A,B"


async def test_a_cancelled_question_leaves_input_required(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "ask"))["taskId"]
        await poll(c, task_id, "input_required")
        await c.request("tasks/cancel", {"taskId": task_id})
        cancelled = await poll(c, task_id, "cancelled")
        assert "inputRequests" not in cancelled


ASKING: dict[str, Any] = {**EXT, "sampling": {}, "roots": {}}
MODEL_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "content": {"type": "text", "text": "hi"},
    "model": "m1",
}


@pytest.mark.parametrize(
    ("tool", "bad", "good", "text"),
    [
        ("ask", "oops", {"action": "accept", "content": {"name": "Bo"}}, "hi Bo"),
        ("ask", {"roots": []}, {"action": "decline"}, "hi None"),  # another method's result
        ("ask", {"action": "accept", "content": {"name": 7}}, {"action": "cancel"}, "hi None"),
        ("ask_model", [], MODEL_ANSWER, "m1"),
        ("ask_model", {"action": "accept"}, MODEL_ANSWER, "m1"),
        ("ask_roots", {"roots": "/"}, {"roots": [{"uri": "file:///r"}]}, "file:///r"),
        ("ask_roots", MODEL_ANSWER, {"roots": []}, ""),
    ],
)
async def test_an_answer_that_does_not_fit_its_question_is_refused_and_stays_asked(
    tool: str, bad: Any, good: Any, text: str, autojump_clock: MockClock
) -> None:
    async with client(make_server(), caps=ASKING) as c:
        task_id = (await call(c, tool))["taskId"]
        asking = await poll(c, task_id, "input_required")
        ((key, request),) = asking["inputRequests"].items()
        assert "params" in request  # (the extension's InputRequest requires them)
        error = await error_of(c, "tasks/update", {"taskId": task_id, "inputResponses": {key: bad}})
        assert error.code == -32602 and repr(key) in error.message
        await trio.sleep(1)
        assert (await get(c, task_id)) == asking  # still asked, the task unharmed
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": {key: good}})
        done = await poll(c, task_id, "completed", "failed")
        assert done["status"] == "completed" and done["result"]["content"][0]["text"] == text


async def test_an_update_with_one_bad_answer_delivers_none(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "ask_two"))["taskId"]
        with trio.fail_after(100):
            while len((asking := await get(c, task_id)).get("inputRequests", {})) < 2:
                await trio.sleep(0.1)
        first, second = asking["inputRequests"]
        accept = {"action": "accept", "content": {"name": "A"}}
        both = {first: accept, second: "oops"}
        error = await error_of(c, "tasks/update", {"taskId": task_id, "inputResponses": both})
        assert error.code == -32602
        assert (await get(c, task_id))["inputRequests"] == asking["inputRequests"]


async def test_an_answer_keeps_the_status_message(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "busy_then_ask"))["taskId"]
        asking = await poll(c, task_id, "input_required")
        assert asking["statusMessage"] == "compiling"
        (key,) = asking["inputRequests"]
        answer = {key: {"action": "accept", "content": {"name": "x"}}}
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
        await trio.sleep(1)
        working = await get(c, task_id)
        assert working["status"] == "working" and working["statusMessage"] == "compiling"


async def test_progress_becomes_the_status_message_and_logs_are_dropped(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server()) as c:
        task_id = (await call(c, "chatty"))["taskId"]
        await trio.sleep(1)
        assert (await get(c, task_id))["statusMessage"] == "half way"
        assert (await poll(c, task_id, "completed"))["result"]["content"][0]["text"] == "chatted"


# ---------------------------------------------------------------- explicit start


async def test_input_required_rounds_before_the_task_then_the_task(
    autojump_clock: MockClock,
) -> None:
    rounds: list[InputRequired] = []

    async def answer(event: InputRequired) -> dict[str, Any]:
        rounds.append(event)
        return {
            key: {"action": "accept", "content": {"name": "Al"}} for key in event.input_requests
        }

    async with client(make_server()) as c:
        created = await c.request(
            "tools/call", {"name": "compose", "arguments": {}}, on_input_required=answer
        )
        (first,) = rounds  # one round on the call itself, before the task
        assert first.request_state is not None
        assert created["resultType"] == "task" and "requestState" not in created
        done = await poll(c, created["taskId"], "completed")
        assert done["result"]["content"][0]["text"] == "hello Al"


async def test_an_explicit_tool_may_answer_at_once(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        quick = await call(c, "maybe", {"quick": True})
        assert quick["resultType"] == "complete" and quick["content"][0]["text"] == "quick"
        slow = await call(c, "maybe", {"quick": False})
        assert slow["resultType"] == "task"


# ---------------------------------------------------------------- negotiation


async def test_a_client_without_the_extension_gets_plain_calls_or_32021(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server(), caps={}) as c:
        result = await call(c, "slow", {"seconds": 1})
        assert result["resultType"] == "complete" and result["content"][0]["text"] == "slept 1.0"
        error = await error_of(c, "tools/call", {"name": "only_task", "arguments": {}})
        assert error.code == -32021
        assert error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        for method, params in (
            ("tasks/get", {"taskId": "x"}),
            ("tasks/update", {"taskId": "x", "inputResponses": {}}),
            ("tasks/cancel", {"taskId": "x"}),
        ):
            assert (await error_of(c, method, params)).code == -32021
        plain = await call(c, "maybe", {"quick": False})  # start_task() is a no-op
        assert plain["content"][0]["text"] == "slow"


async def test_the_legacy_era_runs_task_tools_as_plain_calls(autojump_clock: MockClock) -> None:
    async with client(make_server(), era="legacy") as c:
        assert "extensions" not in c.connection.peer_capabilities
        assert (await call(c, "only_task"))["content"][0]["text"] == "done"


async def test_discover_advertises_the_extension_only_with_a_task_tool(
    autojump_clock: MockClock,
) -> None:
    async with client(make_server(), caps={}) as c:
        discovered = c.connection.peer_capabilities
        assert discovered["extensions"] == {TASKS_EXTENSION: {}}
    bare = Server("bare")

    @bare.tool()
    async def hello() -> str:
        """Hi."""
        return "hi"

    assert "extensions" not in bare.capabilities()
    async with client(bare) as c:
        assert (await error_of(c, "tasks/get", {"taskId": "x"})).code == -32601
        other = Server(
            "other", connection_config=ConnectionConfig(capabilities={"extensions": {"x/y": {}}})
        )
        other.add_tool(hello, name="t", task=True)
        extensions = other.connection_config().capabilities["extensions"]
        assert extensions == {"x/y": {}, TASKS_EXTENSION: {}}


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"taskId": "no-such-task"}, -32602),
        ({"taskId": 7}, -32602),
        ({}, -32602),
    ],
)
async def test_unknown_or_malformed_task_ids(
    params: dict[str, Any], code: int, autojump_clock: MockClock
) -> None:
    async with client(make_server()) as c:
        for method in ("tasks/get", "tasks/cancel"):
            assert (await error_of(c, method, params)).code == code
        update = {**params, "inputResponses": {}}
        assert (await error_of(c, "tasks/update", update)).code == code
        task_id = (await call(c, "slow"))["taskId"]
        bad = {"taskId": task_id, "inputResponses": [1]}
        assert (await error_of(c, "tasks/update", bad)).code == -32602


# ---------------------------------------------------------------- bounds


async def test_a_task_expires_after_its_ttl(autojump_clock: MockClock) -> None:
    server = make_server(TaskConfig(ttl_ms=5000))
    async with client(server) as c:
        done_id = (await call(c, "slow", {"seconds": 1}))["taskId"]
        running_id = (await call(c, "slow", {"seconds": 100}))["taskId"]
        await trio.sleep(4.5)
        assert (await get(c, done_id))["status"] == "completed"  # not before its TTL
        await trio.sleep(1)
        for task_id in (done_id, running_id):
            assert (await error_of(c, "tasks/get", {"taskId": task_id})).code == -32602
        # (Nothing is held for the caller any more: its quota is whole again.)
        assert server._methods.tasks._tasks == {} and server._methods.tasks._held == {}


async def test_expiry_cancels_running_work_with_nobody_looking(autojump_clock: MockClock) -> None:
    server = Server("ttl", task_config=TaskConfig(ttl_ms=1000))
    stopped: list[float] = []

    @server.tool(task=True)
    async def long() -> str:
        """Outlives its TTL."""
        try:
            await trio.sleep(100)
        finally:
            stopped.append(trio.current_time())
        return "done"

    async with client(server) as c:
        start = trio.current_time()
        task_id = (await call(c, "long"))["taskId"]
        run = server._methods.tasks.lookup(task_id)
        assert run is not None
        await trio.sleep(200)  # nobody polls
        assert stopped == [pytest.approx(start + 1)]
        assert run.task is not None and run.task.status == "failed"  # as the spec allows
        assert run.detailed()["error"]["code"] == -32603
        assert (await error_of(c, "tasks/get", {"taskId": task_id})).code == -32602


async def test_the_table_of_tasks_is_bounded(autojump_clock: MockClock) -> None:
    async with client(make_server(TaskConfig(max_tasks=2, ttl_ms=50_000))) as c:
        for _ in range(2):
            await call(c, "slow", {"seconds": 100})
        # Full: an optional tool runs as a plain call, a required one is refused.
        plain = await call(c, "slow", {"seconds": 1})
        assert plain["resultType"] == "complete"
        refused = await error_of(c, "tools/call", {"name": "only_task"})
        assert refused.code == -32603 and "server" in refused.message
        # Expiry frees room.
        await trio.sleep(50)
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "task"


async def test_only_a_collected_task_makes_room_before_its_ttl(autojump_clock: MockClock) -> None:
    config = TaskConfig(max_tasks=2, ttl_ms=500_000, retention_after_fetch_ms=60_000)
    async with client(make_server(config)) as c:
        done = (await call(c, "slow", {"seconds": 1}))["taskId"]
        running = (await call(c, "slow", {"seconds": 1000}))["taskId"]
        await trio.sleep(2)
        # Finished, but nobody has seen its result: it is kept.
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "complete"
        assert (await get(c, running))["status"] == "working"  # (not terminal: not collected)
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "complete"
        # Its result fetched (twice, as often as one likes)...
        assert (await get(c, done))["result"] == (await get(c, done))["result"]
        # ... it is kept for the grace period, in case that reply was lost ...
        await trio.sleep(59)
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "complete"
        assert (await get(c, done))["status"] == "completed"
        # ... counted from the first fetch: then it makes room for the next task.
        await trio.sleep(1)
        third = (await call(c, "slow", {"seconds": 1000}))["taskId"]
        assert (await error_of(c, "tasks/get", {"taskId": done})).code == -32602
        # A tasks/cancel of the running task collects it (its caller gave up on it).
        await c.request("tasks/cancel", {"taskId": running})
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(60)
        assert (await call(c, "slow", {"seconds": 100}))["resultType"] == "task"
        assert (await error_of(c, "tasks/get", {"taskId": running})).code == -32602
        assert (await get(c, third))["status"] == "working"


async def test_a_late_cancel_does_not_collect_a_finished_task(autojump_clock: MockClock) -> None:
    # The ack of tasks/cancel says nothing of the end: the caller may still fetch it.
    config = TaskConfig(max_tasks=1, ttl_ms=500_000, retention_after_fetch_ms=0)
    async with client(make_server(config)) as c:
        done = (await call(c, "slow", {"seconds": 1}))["taskId"]
        await trio.sleep(2)
        await c.request("tasks/cancel", {"taskId": done})
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "complete"
        assert (await get(c, done))["status"] == "completed"


async def test_a_task_that_ends_despite_a_cancel_keeps_its_result_to_its_ttl(
    autojump_clock: MockClock,
) -> None:
    # Cancellation is cooperative: a tool that shields its last step completes anyway,
    # and that result is still to fetch, so it does not make room for another task.
    runner = TaskRunner(TaskConfig(max_tasks=1, ttl_ms=3_600_000))
    runner.enabled = True

    ctx = partial(request_ctx, "bob")

    async def stubborn(run: TaskRun) -> dict[str, Any]:
        with trio.CancelScope(shield=True):
            await trio.sleep(10)
        return {"content": [{"type": "text", "text": "done"}]}

    async with runner.running() as nursery:
        created = await runner.call(ctx(), "required", "call", stubborn, "t")
        assert isinstance(created, dict)
        task_id = created["taskId"]
        await trio.sleep(1)
        await runner.tasks_cancel(ctx("tasks/cancel", taskId=task_id))
        await trio.sleep(100)
        with pytest.raises(McpError):  # (the table is full: nothing to evict)
            await runner.call(ctx(), "required", "call", stubborn, "t")
        got = await runner.tasks_get(ctx("tasks/get", taskId=task_id))
        assert got["status"] == "completed"
        nursery.cancel_scope.cancel()


async def test_a_full_table_evicts_the_callers_own_collected_task_first(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner(TaskConfig(max_tasks=3, retention_after_fetch_ms=1000))
    runner.enabled = True

    async def quick(run: TaskRun) -> dict[str, Any]:
        await trio.sleep(1)
        return {"content": []}

    async with runner.running():
        made = [("bob", ""), ("alice", ""), ("alice", "")]
        made = [
            (who, (await runner.call(request_ctx(who), "required", "call", quick, "t"))["taskId"])  # type: ignore[index]
            for who, _ in made
        ]
        await trio.sleep(2)
        for who, tid in made:
            await runner.tasks_get(request_ctx(who, "tasks/get", taskId=tid))  # (all collected)
        # Within the grace period nothing is evicted: the table is full.
        with pytest.raises(McpError):
            await runner.call(request_ctx("alice"), "required", "call", quick, "t")
        await trio.sleep(1)
        await runner.call(request_ctx("alice"), "required", "call", quick, "t")
        # Alice's own oldest went, not bob's (older still).
        (_, bob), (_, a1), (_, a2) = made
        with pytest.raises(McpError):
            await runner.tasks_get(request_ctx("alice", "tasks/get", taskId=a1))
        await runner.tasks_get(request_ctx("bob", "tasks/get", taskId=bob))
        await runner.tasks_get(request_ctx("alice", "tasks/get", taskId=a2))
        # Carol has none of her own: the oldest collected of anyone (bob's) goes.
        await runner.call(request_ctx("carol"), "required", "call", quick, "t")
        with pytest.raises(McpError):
            await runner.tasks_get(request_ctx("bob", "tasks/get", taskId=bob))


async def test_one_connection_cannot_take_every_task(autojump_clock: MockClock) -> None:
    # Without authentication, each connection is a caller of its own for the quota.
    server = make_server(TaskConfig(max_tasks=4, max_tasks_per_owner=2, ttl_ms=50_000))
    async with client(server) as greedy, client(server) as other:
        for _ in range(2):
            assert (await call(greedy, "slow", {"seconds": 100}))["resultType"] == "task"
        # At its quota: an optional tool runs as a plain call, a required one is refused.
        assert (await call(greedy, "slow", {"seconds": 1}))["resultType"] == "complete"
        refused = await error_of(greedy, "tools/call", {"name": "only_task"})
        assert refused.code == -32603 and "caller" in refused.message
        # Another caller still gets its tasks, up to its own quota.
        for _ in range(2):
            assert (await call(other, "slow", {"seconds": 100}))["resultType"] == "task"
        assert (await call(other, "slow", {"seconds": 1}))["resultType"] == "complete"


async def test_a_caller_at_its_quota_evicts_its_own_collected_task(
    autojump_clock: MockClock,
) -> None:
    config = TaskConfig(
        max_tasks=10, max_tasks_per_owner=2, ttl_ms=50_000, retention_after_fetch_ms=0
    )
    server = make_server(config)
    async with client(server) as c, client(server) as neighbour:
        theirs = (await call(neighbour, "slow", {"seconds": 1}))["taskId"]
        old = (await call(c, "slow", {"seconds": 1}))["taskId"]
        unseen = (await call(c, "slow", {"seconds": 1}))["taskId"]
        await trio.sleep(2)
        assert (await get(c, old))["status"] == "completed"
        assert (await get(neighbour, theirs))["status"] == "completed"
        assert (await call(c, "slow", {"seconds": 100}))["resultType"] == "task"
        # Its own collected task went; not the one it has not seen, nor another's.
        assert (await error_of(c, "tasks/get", {"taskId": old})).code == -32602
        assert (await get(c, unseen))["status"] == "completed"
        assert (await get(neighbour, theirs))["status"] == "completed"
        # Now every task it holds is running or just collected: the next evicts `unseen`.
        assert (await call(c, "slow", {"seconds": 100}))["resultType"] == "task"
        assert (await call(c, "slow", {"seconds": 1}))["resultType"] == "complete"


async def test_the_questions_of_a_task_are_bounded(autojump_clock: MockClock) -> None:
    server = make_server(TaskConfig(max_input_requests=1))
    async with client(server) as c:
        task_id = (await call(c, "ask_two"))["taskId"]
        failed = await poll(c, task_id, "failed", "completed")
        assert failed["status"] == "failed" and failed["error"]["code"] == -32603


@pytest.mark.parametrize(
    "field",
    ["max_tasks", "max_tasks_per_owner", "ttl_ms", "poll_interval_ms", "max_input_requests"],
)
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_task_config_takes_positive_integers(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        TaskConfig(**{field: value})


@pytest.mark.parametrize("value", [-1, 1.5, True, None])
def test_task_config_retention_after_fetch_is_checked(value: Any) -> None:
    with pytest.raises(ValueError, match="retention_after_fetch_ms"):
        TaskConfig(retention_after_fetch_ms=value)


def test_task_config_defaults_have_no_quota() -> None:
    config = TaskConfig()
    assert config.max_tasks_per_owner is None and config.retention_after_fetch_ms == 60_000
    assert TaskConfig(retention_after_fetch_ms=0).retention_after_fetch_ms == 0


def test_task_options_are_checked_at_registration() -> None:
    server = Server("s")

    async def fn() -> str:
        return ""

    with pytest.raises(ValueError, match="task must be"):
        server.add_tool(fn, task="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="task_start"):
        server.add_tool(fn, task=True, task_start="later")  # type: ignore[arg-type]


# ---------------------------------------------------------------- serving


async def test_without_a_runner_task_tools_run_plain_or_are_refused(
    autojump_clock: MockClock,
) -> None:
    # The handlers served without the server's serve_* methods: no nursery for tasks.
    from mcp_trio.testing import client_for  # noqa: PLC0415

    server = make_server()
    target = (server.handlers(), server.connection_config())
    async with client_for(target, era="modern", capabilities=EXT) as c:
        result = await c.call_tool("slow", {"seconds": 1})
        assert result.text == "slept 1.0"
        with pytest.raises(McpError) as info:
            await c.call_tool("only_task")
        assert info.value.code == -32603


async def test_stopping_the_server_cancels_its_tasks(autojump_clock: MockClock) -> None:
    server = make_server()
    async with client(server) as c:
        task_id = (await call(c, "slow", {"seconds": 1000}))["taskId"]
    run = server._methods.tasks.lookup(task_id)
    assert run is not None and run.task is not None
    assert run.task.status == "cancelled"
    assert run.task.status_message == "Cancelled: the server stopped"


async def test_a_withdrawn_call_cancels_the_run_before_its_task(autojump_clock: MockClock) -> None:
    server = Server("w")
    started = trio.Event()
    finished: list[str] = []

    @server.tool(task=True, task_start="explicit")
    async def hesitant(ctx: Context) -> ToolResult:
        """Takes its time before becoming a task."""
        started.set()
        try:
            await trio.sleep(100)
        finally:
            finished.append("cancelled")
        ctx.start_task()
        return ToolResult([])

    async with client(server) as c:
        with trio.move_on_after(1):
            await call(c, "hesitant")
        await trio.sleep(1)
    assert started.is_set() and finished == ["cancelled"]


async def test_a_call_withdrawn_before_its_run_starts_creates_no_task(
    autojump_clock: MockClock,
) -> None:
    # notifications/cancelled handled before the call waits: the run must neither keep a
    # task (whose id nobody would learn) nor do the work. (Trio may schedule the run
    # before the call sees its cancellation: then it stops at its first checkpoint.)
    runner = TaskRunner(TaskConfig(max_tasks=1))
    ctx: Any = SimpleNamespace(era=Era.MODERN, client_capabilities=EXT, principal=None)
    ran: list[str] = []

    async def work(run: TaskRun) -> dict[str, Any]:
        await trio.sleep(10)
        ran.append("ran")
        return {"content": []}

    async with runner.running():
        for _ in range(10):
            with trio.CancelScope() as scope:
                scope.cancel()
                await runner.call(ctx, "optional", "call", work, "t")
        await trio.sleep(20)
        assert ran == []
        created = await runner.call(ctx, "required", "call", work, "t")  # (not full)
        assert isinstance(created, dict) and created["resultType"] == "task"
        await trio.sleep(20)
        assert ran == ["ran"]


async def test_a_tool_cannot_start_the_task_of_a_withdrawn_call(
    autojump_clock: MockClock,
) -> None:
    # An explicit tool that has not seen its cancellation yet (a plain function's thread
    # is abandoned, not stopped) must not create a task nobody would learn of.
    runner = TaskRunner()
    ctx: Any = SimpleNamespace(era=Era.MODERN, client_capabilities=EXT, principal=None)
    gate = trio.Event()
    started: list[bool] = []

    async def work(run: TaskRun) -> dict[str, Any]:
        with trio.CancelScope(shield=True):
            await gate.wait()
        started.append(run.start())
        return {"content": []}

    async with runner.running():
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(runner.call, ctx, "optional", "explicit", work, "t")
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert started == [False] and runner._tasks == {}


async def test_a_call_withdrawn_as_its_task_is_created_leaves_no_task(
    autojump_clock: MockClock,
) -> None:
    # The client gives up in the scheduling round the task is created: the request's
    # task wakes cancelled, and the task (already in the table) must go with it.
    server = Server("race")
    finished: list[str] = []

    @server.tool(task=True)
    async def slow() -> str:
        """Takes a while."""
        await trio.sleep(10)
        finished.append("ran to completion")
        return "done"

    async with client(server) as c:
        for _ in range(5):
            with trio.move_on_after(0):
                await call(c, "slow")
        await trio.sleep(20)
        assert finished == []
        assert server._methods.tasks._tasks == {}


async def test_closing_one_serve_block_leaves_the_tasks_of_another(
    autojump_clock: MockClock,
) -> None:
    server = make_server()
    async with client(server) as first:
        async with client(server):  # the newest block
            task_id = (await call(first, "slow", {"seconds": 10}))["taskId"]
            await trio.sleep(1)
        done = await poll(first, task_id, "completed", "cancelled", "failed")
        assert done["status"] == "completed"


async def test_a_plain_function_may_start_its_task(autojump_clock: MockClock) -> None:
    async with client(make_server()) as c:
        created = await call(c, "blocking")
        assert created["resultType"] == "task"
        done = await poll(c, created["taskId"], "completed", "failed")
        assert done["result"]["content"][0]["text"] == "task True, id True"
    async with client(make_server(), caps={}) as c:  # no task: start_task() says so
        plain = await call(c, "blocking")
        assert plain["content"][0]["text"] == "task False, id False"


async def test_a_task_tool_cannot_answer_input_required_from_its_task(
    autojump_clock: MockClock,
) -> None:
    server = Server("low-level")

    @server.tool(task=True)
    async def raw() -> InputRequiredResult:
        """Returns an input-required result: meaningless once the call is a task."""
        return InputRequiredResult(input_requests={"k": {"method": "roots/list"}})

    async with client(server) as c:
        failed = await poll(c, (await call(c, "raw"))["taskId"], "failed", "completed")
        assert failed["status"] == "failed" and failed["error"]["code"] == -32603


async def test_a_bug_in_a_run_fails_its_task_not_the_server(autojump_clock: MockClock) -> None:
    # _run_tool turns a tool's exceptions into results; anything else that escapes a run
    # (a bug of ours) must fail the task, not the nursery every task runs in.
    runner = TaskRunner()
    ctx: Any = SimpleNamespace(era=Era.MODERN, client_capabilities=EXT)

    async def broken(run: TaskRun) -> dict[str, Any]:
        raise RuntimeError("bug")

    async with runner.running():
        created = await runner.call(ctx, "optional", "call", broken, "t")
        assert isinstance(created, dict) and created["resultType"] == "task"
        await trio.sleep(0)
        found = runner.lookup(created["taskId"])
        assert found is not None and found.detailed()["error"]["code"] == -32603


@pytest.mark.parametrize("transport", ["stdio", "websocket", "http"])
async def test_every_serve_method_runs_tasks(transport: str) -> None:
    # Each transport's calls inherit the nursery of their own serve block: closing
    # another block, opened later, leaves their tasks running.
    server = make_server()
    config = ConnectionConfig(era="modern", capabilities=EXT)
    release = trio.Event()

    @server.tool(task="required")
    async def gated() -> str:
        """Waits for the test."""
        await release.wait()
        return "released"

    async def exercise(c: Session) -> None:
        task_id = (await call(c, "slow", {"seconds": 0}))["taskId"]
        done = await poll(c, task_id, "completed", interval=0)
        assert done["result"]["content"][0]["text"] == "slept 0.0"
        async with server.connect_in_memory(era="modern", capabilities=EXT):
            gated_id = (await call(c, "gated"))["taskId"]
        release.set()
        done = await poll(c, gated_id, "completed", "cancelled", "failed", interval=0)
        assert done["status"] == "completed"

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            if transport == "stdio":
                to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
                server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
                await nursery.start(
                    partial(server.serve_stdio, stdin=server_stdin, stdout=server_stdout)
                )
                channel = StreamChannel(to_server, from_server)
                async with open_session(channel, "client", connection_config=config) as c:
                    await c.start()
                    await exercise(c)
            elif transport == "websocket":
                url = (await nursery.start(server.serve_websocket)).url
                async with open_websocket_client(url, connection_config=config) as c:
                    await exercise(c)
            else:
                handle = await nursery.start(partial(server.serve_http, port=0))
                async with open_http_client(handle.url, connection_config=config) as c:
                    await exercise(c)
            nursery.cancel_scope.cancel()


async def test_a_task_belongs_to_the_principal_that_created_it(autojump_clock: MockClock) -> None:
    # With authentication, another caller's task is as unknown as one never created.
    runner = TaskRunner()
    runner.enabled = True

    async def work(run: TaskRun) -> dict[str, Any]:
        await trio.sleep(10)
        return {"content": []}

    async with runner.running():
        created = await runner.call(request_ctx("alice"), "optional", "call", work, "t")
        assert isinstance(created, dict)
        task_id = created["taskId"]
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            for stranger in ("bob", None):
                with pytest.raises(McpError) as info:
                    handler = getattr(runner, method.replace("/", "_"))
                    await handler(request_ctx(stranger, method, taskId=task_id, inputResponses={}))
                assert info.value.code == -32602
        got = await runner.tasks_get(request_ctx("alice", "tasks/get", taskId=task_id))
        assert got["status"] == "working"
        await runner.tasks_cancel(request_ctx("alice", "tasks/cancel", taskId=task_id))
        await trio.testing.wait_all_tasks_blocked()
        cancelled = await runner.tasks_get(request_ctx("alice", taskId=task_id))
        assert cancelled["status"] == "cancelled"


async def test_the_quota_counts_per_subject_and_never_anonymous_http(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner(TaskConfig(max_tasks=10, max_tasks_per_owner=1))
    runner.enabled = True

    async def work(run: TaskRun) -> dict[str, Any]:
        await trio.sleep(10)
        return {"content": []}

    async with runner.running():
        for subject in ("alice", "bob"):
            created = await runner.call(request_ctx(subject), "optional", "call", work, "t")
            assert isinstance(created, dict) and created["resultType"] == "task"
            # The same subject again (another connection, as over HTTP): at its quota.
            plain = await runner.call(request_ctx(subject), "optional", "call", work, "t")
            assert plain == {"content": []}  # (a plain call)
            with pytest.raises(McpError) as info:
                await runner.call(request_ctx(subject), "required", "call", work, "t")
            assert info.value.code == -32603 and "You hold" in info.value.error.message
        # Anonymous HTTP callers cannot be told apart: only max_tasks bounds them.
        for _ in range(8):
            created = await runner.call(request_ctx(None), "required", "call", work, "t")
            assert isinstance(created, dict) and created["resultType"] == "task"
        with pytest.raises(McpError) as info:
            await runner.call(request_ctx(None), "required", "call", work, "t")
        assert "server" in info.value.error.message
        assert len(runner._tasks) == 10


async def test_a_cancel_taken_as_the_task_is_created_drops_the_task(
    autojump_clock: MockClock,
) -> None:
    # The reader took notifications/cancelled in the round the launch was answered: the
    # call's wait returned, its answer was dropped, and the task ran on unannounced.
    server = Server("race")
    finished: list[str] = []

    @server.tool(task=True, task_start="explicit")
    async def slow(ctx: Context) -> str:
        """Slow."""
        ctx.start_task()
        raw = ctx._raw  # what the session's reader does with notifications/cancelled
        raw.session._pool.cancel_request(raw.request_id)
        await trio.sleep(10)
        finished.append("ran to completion")  # pragma: no cover
        return "done"  # pragma: no cover

    async with client(server) as c:
        with trio.move_on_after(5) as waited:
            await call(c, "slow")
        assert waited.cancelled_caught  # (no answer: the call was cancelled)
        await trio.sleep(20)
    assert server._methods.tasks._tasks == {} and finished == []


async def test_a_thread_cannot_start_the_task_of_a_call_already_answered() -> None:
    # A def tool's thread, abandoned when its serve block ended (the call answered
    # "server stopped"), started a task later: "working" forever, in nobody's hands.
    runner = TaskRunner()
    ctx: Any = SimpleNamespace(era=Era.MODERN, client_capabilities=EXT, principal=None)
    release = threading.Event()
    out: dict[str, Any] = {}

    async def work(run: TaskRun) -> dict[str, Any]:
        def blocking() -> None:
            release.wait(10)
            out["started"] = trio.from_thread.run_sync(run.start)
            trio.from_thread.run_sync(tried.set)

        await trio.to_thread.run_sync(blocking, abandon_on_cancel=True)
        return {"content": []}  # pragma: no cover

    async def go() -> None:
        with pytest.raises(McpError, match="stopped"):
            await runner.call(ctx, "optional", "explicit", work, "t")
        answered.set()

    answered, tried = trio.Event(), trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as outer:  # the call outlives the serve block
            async with runner.running():
                outer.start_soon(go)
                await trio.testing.wait_all_tasks_blocked()
            await answered.wait()
            release.set()
            await tried.wait()
    assert out["started"] is False and runner._tasks == {}


async def test_the_in_memory_block_lends_its_tasks_to_nothing_else() -> None:
    # connect_in_memory's nursery leaked into the caller's own code: a server served
    # some other way inside the block ran task tools in it.
    server = make_server()
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    config = ConnectionConfig(era="modern", capabilities=EXT)
    with trio.fail_after(10):
        async with (
            server.connect_in_memory(era="modern", capabilities=EXT),
            trio.open_nursery() as n,
        ):
            serve = partial(
                mcp_trio.serve_stdio,
                server.handlers(),
                connection_config=server.connection_config(),
                stdin=server_stdin,
                stdout=server_stdout,
            )
            await n.start(serve)
            channel = StreamChannel(to_server, from_server)
            async with open_session(channel, "client", connection_config=config) as c:
                await c.start()
                with pytest.raises(McpError, match="runs no tasks now"):
                    await call(c, "only_task")
            n.cancel_scope.cancel()

"""The client's side of the tasks extension: ``call_tool_as_task``, ``ToolTask`` and
``call_tool`` driving a task to its end, against our own server (in memory and over
Streamable HTTP) and against servers that answer badly.

In memory, every test runs on the ``autojump_clock``: the tools' sleeps and the polling
take no real time, so counting the ``tasks/get`` requests measures the polling itself.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, LocalProtocolError, ProgressReceived, RemoteProtocolError
from mcp_sansio import types as t
from mcp_trio import (
    TASKS_EXTENSION,
    Client,
    Context,
    Handlers,
    InputRequiredError,
    McpError,
    RequestContext,
    RequestTimeout,
    Server,
    SessionConfig,
    TaskCancelled,
    TaskConfig,
    ToolTask,
    open_client,
)
from mcp_trio._client_tasks import AnsweredQuestions

from .test_client_hostile import HandDriven, Scripted, hand_driven

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
WORKING_T: dict[str, Any] = {
    "taskId": "t",
    "status": "working",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastUpdatedAt": "2026-01-01T00:00:00Z",
    "ttlMs": None,
}
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}


def make_server(config: TaskConfig | None = None) -> Server:
    server = Server("tasks", task_config=config)

    @server.tool(task=True)
    async def slow(seconds: float = 10.0) -> str:
        """Sleeps, then answers."""
        await trio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(task="required")
    async def structured() -> dict[str, int]:
        """A structured result, through a task."""
        await trio.sleep(1)
        return {"n": 7}

    @server.tool(task="optional")
    async def crash() -> str:
        """A protocol error."""
        await trio.sleep(1)
        raise McpError.from_code(-32603, "crashed", {"why": "test"})

    @server.tool(task="optional")
    async def ask(ctx: Context) -> str:
        """Asks a name through the task, then a model, then the roots."""
        answer = await ctx.elicit("Name?", FORM)
        model = (await ctx.sample("Hi?", max_tokens=5)).model
        roots = ",".join(str(root.uri) for root in await ctx.list_roots())
        await trio.sleep(3)
        return f"hi {(answer.content or {}).get('name')} {model} {roots}"

    @server.tool(task="optional", task_start="explicit")
    async def maybe(quick: bool, ctx: Context) -> str:
        """A plain result when quick, else a task."""
        if quick:
            return "quick"
        ctx.start_task()
        await trio.sleep(5)
        return "slow"

    @server.tool(task="optional")
    async def steps(n: int, ctx: Context) -> str:
        """A new statusMessage every 2 s, n times."""
        for i in range(n):
            await trio.sleep(2)
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
        return "stepped"

    @server.tool(task="optional", task_start="explicit")
    async def prepped(ctx: Context) -> str:
        """Progress as a plain call for 3 s, then a task for 3 s."""
        await ctx.report_progress(50, 100, "preparing")  # (on the request)
        await trio.sleep(3)
        ctx.start_task()
        await ctx.report_progress(60, 100, "working")  # (the task's statusMessage)
        await trio.sleep(3)
        return "done"

    @server.tool()
    async def plain() -> str:
        """Never a task."""
        return "plain"

    return server


async def on_elicitation(params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"name": "Ada"})


async def on_sampling(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(
        role="assistant", content=t.TextContent(type="text", text="ok"), model="m1"
    )


@asynccontextmanager
async def connected(
    server: Server, *, capabilities: dict[str, Any] | None = None, era: str = "modern"
) -> AsyncGenerator[Client]:
    with trio.fail_after(10_000):
        async with open_client(
            server,
            era=era,  # type: ignore[arg-type]
            capabilities=EXT if capabilities is None else capabilities,
            on_elicitation=on_elicitation,
            on_sampling=on_sampling,
            roots=["file:///work"],
        ) as client:
            yield client


def count_gets(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the methods the client's requests use (the handles go through them, as
    ``request`` does, and the client's own methods)."""
    methods: list[str] = []
    original = client._request

    async def counting(method: str, params: Any = None, **kwargs: Any) -> dict[str, Any]:
        methods.append(method)
        return await original(method, params, **kwargs)

    monkeypatch.setattr(client, "_request", counting)
    return methods


# ---------------------------------------------------------------- in memory


async def test_a_task_is_created_polled_and_its_result_converted(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connected(make_server(TaskConfig(poll_interval_ms=2000))) as client:
        methods = count_gets(client, monkeypatch)
        task = await client.call_tool_as_task("slow", {"seconds": 9})
        assert isinstance(task, ToolTask) and task.task_id is not None
        assert task.state is not None and task.state.status == "working"
        assert task.state.poll_interval_ms == 2000
        assert (await task.status()).status == "working"
        start = trio.current_time()
        output = await task.result()
        assert output.text == "slept 9.0" and not output.is_error
        # Polled every 2 s (the server's pollIntervalMs): about 9 / 2 polls, no more.
        assert trio.current_time() - start < 12
        assert 4 <= methods.count("tasks/get") <= 7
        # A finished task can be read again; cancelling it does no harm.
        assert (await task.status()).status == "completed"
        await task.cancel()


async def test_call_tool_drives_a_task_to_its_end(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        output = await client.call_tool("structured")
        assert output.structured_content == {"n": 7}
        assert (await client.call_tool("plain")).text == "plain"


async def test_a_call_answered_at_once_has_no_task(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        task = await client.call_tool_as_task("maybe", {"quick": True})
        assert task.task_id is None and task.state is None
        assert (await task.result()).text == "quick"
        await task.cancel()  # (nothing to cancel)
        with pytest.raises(RuntimeError):
            await task.status()
        slow = await client.call_tool_as_task("maybe", {"quick": False})
        assert slow.task_id is not None
        assert (await slow.result()).text == "slow"


async def test_questions_are_answered_with_the_clients_callbacks(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with connected(make_server()) as client:
        methods = count_gets(client, monkeypatch)
        task = await client.call_tool_as_task("ask")
        output = await task.result()
        assert output.text == "hi Ada m1 file:///work"
        # One tasks/update per question (three asked one after the other), never twice.
        assert methods.count("tasks/update") == 3


async def test_a_question_no_callback_answers_raises(autojump_clock: MockClock) -> None:
    server = make_server()
    with trio.fail_after(1000):
        # (elicitation declared by hand, with no callback to answer it)
        caps = {**EXT, "elicitation": {}}
        async with open_client(server, era="modern", capabilities=caps) as client:
            task = await client.call_tool_as_task("ask")
            with pytest.raises(InputRequiredError):
                await task.result()
            await task.cancel()
            assert (await client.call_tool("plain")).text == "plain"


async def test_a_cancelled_task_raises_task_cancelled(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        task = await client.call_tool_as_task("slow", {"seconds": 100})
        await task.cancel()
        with pytest.raises(TaskCancelled) as info:
            await task.result()
        assert info.value.state.status == "cancelled"


async def test_a_failed_task_raises_the_error_of_a_normal_call(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        task = await client.call_tool_as_task("crash")
        with pytest.raises(McpError) as info:
            await task.result()
        assert (info.value.code, info.value.message, info.value.data) == (
            -32603,
            "crashed",
            {"why": "test"},
        )
        with pytest.raises(McpError) as plain:
            await client.call_tool("crash")
        assert plain.value.code == -32603


async def test_a_task_resumed_by_id(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        task_id = (await client.call_tool_as_task("structured")).task_id
        assert task_id is not None
        resumed = client.task(task_id, name="structured")
        assert resumed.state is None
        assert (await resumed.result()).structured_content == {"n": 7}
        anonymous = client.task(task_id)
        assert (await anonymous.result()).structured_content == {"n": 7}


async def test_an_ended_task_is_not_asked_for_again(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server drops a task whose end it delivered when it needs the room: the handle
    # keeps what it saw.
    server = make_server(TaskConfig(max_tasks_per_owner=1, retention_after_fetch_ms=0))
    async with connected(server) as client:
        task = await client.call_tool_as_task("structured")
        assert (await task.result()).structured_content == {"n": 7}
        crashed = await client.call_tool_as_task("crash")
        with pytest.raises(McpError, match="crashed"):
            await crashed.result()
        methods = count_gets(client, monkeypatch)
        assert (await task.result()).structured_content == {"n": 7}
        with pytest.raises(McpError, match="crashed"):
            await crashed.wait_result()
        assert methods == []
        # (The server did drop the first: status() asks, and learns it.)
        with pytest.raises(McpError) as info:
            await task.status()
        assert info.value.code == -32602


async def test_unknown_and_expired_tasks(autojump_clock: MockClock) -> None:
    async with connected(make_server(TaskConfig(ttl_ms=5000))) as client:
        with pytest.raises(McpError) as info:
            await client.task("no-such-task").status()
        assert info.value.code == -32602
        task = await client.call_tool_as_task("slow", {"seconds": 60})
        with pytest.raises(McpError) as expired:
            await task.result()
        assert expired.value.code == -32602
        assert trio.current_time() < 10  # (found out at the first poll past the TTL)


async def test_a_caller_deadline_is_a_cancel_scope(autojump_clock: MockClock) -> None:
    async with connected(make_server()) as client:
        task = await client.call_tool_as_task("slow", {"seconds": 100})
        with trio.move_on_after(5) as scope:
            await task.result()
        assert scope.cancelled_caught
        assert (await task.status()).status == "working"  # (it lives on at the server)
        await task.cancel()


async def test_tasks_need_the_modern_era_and_the_extension(autojump_clock: MockClock) -> None:
    async with connected(make_server(), era="legacy") as client:
        with pytest.raises(LocalProtocolError, match="modern"):
            await client.call_tool_as_task("slow")
        with pytest.raises(LocalProtocolError, match="modern"):
            client.task("x")
        with pytest.raises(LocalProtocolError, match="modern"):
            async with client.subscribe(tasks=["x"]):
                pass  # pragma: no cover
        assert (await client.call_tool("slow", {"seconds": 1})).text == "slept 1.0"
    async with connected(make_server(), capabilities={}) as client:
        with pytest.raises(LocalProtocolError, match="declare the tasks extension"):
            await client.call_tool_as_task("slow")
        assert (await client.call_tool("slow", {"seconds": 1})).text == "slept 1.0"


async def test_call_tool_times_out_a_task_that_stalls_and_cancels_it(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # timeout= means what it means for a plain call: that long without a change of the
    # task (every tasks/get answer no longer counts); then the task is cancelled.
    async with connected(make_server()) as client:
        methods = count_gets(client, monkeypatch)
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.call_tool("slow", {"seconds": 100}, timeout=5)
        assert 5 <= trio.current_time() - start < 7
        assert methods[-1] == "tasks/cancel"
        assert methods.count("tasks/get") >= 4  # (polled meanwhile, at 1 s)


async def test_call_tool_reports_status_messages_as_progress_and_they_keep_it_alive(
    autojump_clock: MockClock,
) -> None:
    # A change every 2 s for 20 s, timeout 5: never 5 s without a change.
    reports: list[ProgressReceived] = []

    async def on_progress(report: ProgressReceived) -> None:
        reports.append(report)

    async with connected(make_server()) as client:
        output = await client.call_tool("steps", {"n": 10}, timeout=5, on_progress=on_progress)
        assert output.text == "stepped"
    # (Step 10 and the end come within one poll: the end is what it sees.)
    assert [(r.progress, r.message) for r in reports] == [(i, f"step {i}") for i in range(1, 10)]


@pytest.mark.parametrize("where", ["argument", "client"])
async def test_a_timeout_shorter_than_the_poll_interval_looks_before_giving_up(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # The server asks for a poll every 10 s; the call's timeout is 5 s. A task that ends
    # in 1 s is seen ended at the 5 s look; one that does not end is given up at 5 s
    # (not 10), after that look showed no change.
    server = make_server(TaskConfig(poll_interval_ms=10_000))
    timeout = 5 if where == "argument" else None
    config = ConnectionConfig(request_timeout=5 if where == "client" else None)
    async with open_client(
        server, era="modern", capabilities=EXT, connection_config=config
    ) as client:
        methods = count_gets(client, monkeypatch)
        start = trio.current_time()
        assert (await client.call_tool("slow", {"seconds": 1}, timeout=timeout)).text == "slept 1.0"
        assert trio.current_time() - start == pytest.approx(5)
        assert methods == ["tools/call", "tasks/get"]
        methods.clear()
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.call_tool("slow", {"seconds": 100}, timeout=timeout)
        assert trio.current_time() - start == pytest.approx(5)
        assert methods == ["tools/call", "tasks/get", "tasks/cancel"]


@pytest.mark.parametrize("tool", ["steps", "prepped"])
async def test_call_tool_caps_a_task_at_max_request_time(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    # A plain call's total cap holds for a task too, counted from the tools/call (the
    # prepped call takes 3 s before its task exists): a change every 2 s does not keep
    # a task going past it. It ends as a timeout does: RequestTimeout and tasks/cancel.
    config = ConnectionConfig(max_request_time=5)
    server = make_server()
    async with open_client(
        server, era="modern", capabilities=EXT, connection_config=config
    ) as client:
        methods = count_gets(client, monkeypatch)
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.call_tool(tool, {"n": 10} if tool == "steps" else {})
        assert trio.current_time() - start == pytest.approx(5)
        assert methods[-2:] == ["tasks/get", "tasks/cancel"]
        # Within the cap, the call ends as usual; and the look at the cap sees an end
        # the poll interval would have hidden.
        assert (await client.call_tool("steps", {"n": 2})).text == "stepped"
    async with open_client(
        make_server(TaskConfig(poll_interval_ms=10_000)),
        era="modern",
        capabilities=EXT,
        connection_config=config,
    ) as client:
        start = trio.current_time()
        assert (await client.call_tool("slow", {"seconds": 1})).text == "slept 1.0"
        assert trio.current_time() - start == pytest.approx(5)
    runs = list(server._methods.tasks._tasks.values())
    assert [run.task.status for run in runs if run.task] == ["cancelled", "completed"]


async def test_progress_goes_on_from_the_calls_to_the_tasks(autojump_clock: MockClock) -> None:
    # Progress on the request (50) before the task exists, then the task's messages,
    # counted on from there: the values only increase.
    reports: list[ProgressReceived] = []

    async def on_progress(report: ProgressReceived) -> None:
        reports.append(report)

    async with connected(make_server()) as client:
        assert (await client.call_tool("prepped", on_progress=on_progress)).text == "done"
    assert [(r.progress, r.message) for r in reports] == [(50, "preparing"), (51, "working")]


async def test_call_tool_given_up_cancels_the_task(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    async with connected(server) as client:
        methods = count_gets(client, monkeypatch)
        with trio.move_on_after(5):
            await client.call_tool("slow", {"seconds": 100})
        assert methods[-1] == "tasks/cancel"  # (shielded: sent though cancelled)
        # ...and an error ending the wait cancels it too.

    async def refuse(params: t.ElicitRequestParams) -> t.ElicitResult:
        raise RuntimeError("not now")

    async with open_client(server, era="modern", capabilities=EXT, on_elicitation=refuse) as bare:
        # (The callback fails at the task's first question: that ends the wait.)
        bare_methods = count_gets(bare, monkeypatch)
        with pytest.raises(RuntimeError, match="not now"):
            await bare.call_tool("ask")
        assert bare_methods[-1] == "tasks/cancel"
    runs = list(server._methods.tasks._tasks.values())
    assert [run.task.status for run in runs if run.task] == ["cancelled", "cancelled"]


def endless_questions(
    polls: list[int], updates: list[dict[str, Any]], per_round: int = 1, stop: int = 100
) -> tuple[Handlers, ConnectionConfig]:
    """A server whose every ``tasks/get`` asks new questions (``per_round`` of them),
    until the ``stop``-th, which completes."""
    handlers, config = tasks_by_hand(lambda n: {})
    base = {**WORKING_T, "taskId": "t1", "pollIntervalMs": 100}

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        polls.append(1)
        n = len(polls)
        if n >= stop:
            return {**base, "status": "completed", "result": {"content": []}}
        asked = {f"q{n}.{i}": {"method": "roots/list"} for i in range(per_round)}
        return {**base, "status": "input_required", "inputRequests": asked}

    @handlers.on_request("tasks/update")
    async def update(ctx: RequestContext) -> dict[str, Any]:
        updates.append((ctx.params or {})["inputResponses"])
        return {}

    @handlers.on_request("tasks/cancel")
    async def cancel(ctx: RequestContext) -> dict[str, Any]:
        updates.append({"cancelled": True})
        return {}

    return handlers, config


@pytest.mark.parametrize("transparent", [False, True])
async def test_a_task_asking_anew_at_every_poll_is_bounded(
    autojump_clock: MockClock, transparent: bool
) -> None:
    # At most one look at once after an answer, then the interval; and at most
    # max_input_rounds rounds: the eighth is refused before any callback is asked.
    polls: list[int] = []
    updates: list[dict[str, Any]] = []
    handlers, config = endless_questions(polls, updates)
    async with open_client(
        (handlers, config), era="modern", capabilities=EXT, roots=["file:///w"]
    ) as client:
        start = trio.current_time()
        with pytest.raises(RemoteProtocolError, match="max_input_rounds is 8"):
            if transparent:
                await client.call_tool("job")
            else:
                await (await client.call_tool_as_task("job")).result()
        answered = [u for u in updates if "cancelled" not in u]
        assert len(answered) == 7 and len(polls) == 8
        # Gets 2, 4, 6, 8 came at once after an answer; 3, 5, 7 waited the 100 ms.
        assert trio.current_time() - start >= 3 * 0.1
        # The transparent call gave up on the task: it cancels it; a handle does not.
        assert (updates[-1] == {"cancelled": True}) is transparent


async def test_the_rounds_bound_is_the_clients_max_input_rounds(autojump_clock: MockClock) -> None:
    polls: list[int] = []
    updates: list[dict[str, Any]] = []
    handlers, config = endless_questions(polls, updates, stop=5)
    client_config = ConnectionConfig(max_input_rounds=5)
    async with open_client(
        (handlers, config),
        era="modern",
        capabilities=EXT,
        roots=["file:///w"],
        connection_config=client_config,
    ) as client:
        assert (await client.call_tool("job")).content == []  # (4 rounds: within)
    polls.clear()
    client_config = ConnectionConfig(max_input_rounds=4)
    async with open_client(
        (handlers, config),
        era="modern",
        capabilities=EXT,
        roots=["file:///w"],
        connection_config=client_config,
    ) as client:
        with pytest.raises(RemoteProtocolError, match="max_input_rounds is 4"):
            await client.call_tool("job")


async def test_the_rounds_bound_is_per_handle(autojump_clock: MockClock) -> None:
    # (As documented: a handle made anew for the task starts from no round.)
    polls: list[int] = []
    updates: list[dict[str, Any]] = []
    handlers, config = endless_questions(polls, updates)
    async with open_client(
        (handlers, config), era="modern", capabilities=EXT, roots=["file:///w"]
    ) as client:
        task = await client.call_tool_as_task("job")
        for handle in (task, task, client.task("t1")):
            with pytest.raises(RemoteProtocolError, match="after 7 answered rounds"):
                await handle.result()
    assert len(updates) == 2 * 7  # (the same handle again: refused before any answer)


async def test_answered_keys_are_remembered_up_to_a_bound(autojump_clock: MockClock) -> None:
    # 600 questions a round, twice: 1200 keys, past the 1024 remembered. A later poll
    # showing a forgotten key gets it answered again; a remembered one does not.
    polls: list[int] = []
    updates: list[dict[str, Any]] = []
    handlers, config = endless_questions(polls, updates, per_round=600, stop=4)
    base = {**WORKING_T, "taskId": "t1", "pollIntervalMs": 100}

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        polls.append(1)
        n = len(polls)
        if n == 4:
            return {**base, "status": "completed", "result": {"content": []}}
        keys = [f"q{n}.{i}" for i in range(600)] if n < 3 else ["q1.0", "q2.599"]
        asked = {key: {"method": "roots/list"} for key in keys}
        return {**base, "status": "input_required", "inputRequests": asked}

    async with open_client(
        (handlers, config), era="modern", capabilities=EXT, roots=["file:///w"]
    ) as client:
        assert (await client.call_tool("job")).content == []
    assert [sorted(u)[:1] for u in updates] == [["q1.0"], ["q2.0"], ["q1.0"]]
    assert list(updates[2]) == ["q1.0"]


ASK_NAME: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Name?", "requestedSchema": FORM},
}


def lagging_question(
    updates: list[dict[str, Any]], *, lag: int
) -> tuple[Handlers, ConnectionConfig, trio.Event]:
    """A task that asks ``q`` and lists it for ``lag`` more polls after its answer came
    (the ack is eventually consistent), then completes; the event: an answer came."""
    handlers, config = tasks_by_hand(lambda n: {})
    base = {**WORKING_T, "taskId": "t1", "pollIntervalMs": 100}
    answered = trio.Event()
    after = [0]

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        if updates:
            after[0] += 1
            if after[0] > lag:
                return {**base, "status": "completed", "result": {"content": []}}
        return {**base, "status": "input_required", "inputRequests": {"q": ASK_NAME}}

    @handlers.on_request("tasks/update")
    async def update(ctx: RequestContext) -> dict[str, Any]:
        updates.append((ctx.params or {})["inputResponses"])
        answered.set()
        return {}

    return handlers, config, answered


async def test_a_handle_resumed_by_id_does_not_answer_again(autojump_clock: MockClock) -> None:
    # The first handle answered q and went away; the server still lists q for a while:
    # the handle resumed by id on the same client knows it was answered.
    updates: list[dict[str, Any]] = []
    asked: list[str] = []
    handlers, config, answered = lagging_question(updates, lag=3)

    async def name(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    with trio.fail_after(1000):  # (virtual: a question never answered polls for ever)
        async with open_client(
            (handlers, config), era="modern", capabilities=EXT, on_elicitation=name
        ) as client:
            first = await client.call_tool_as_task("job")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.wait_result)
                await answered.wait()
                nursery.cancel_scope.cancel()
            assert first.task_id is not None
            assert (await client.task(first.task_id).result()).content == []
            assert len(client._task_answers) == 0  # (the task ended: its keys are dropped)
    assert asked == ["Name?"] and len(updates) == 1


async def test_two_handles_waiting_at_once_answer_a_question_once(
    autojump_clock: MockClock,
) -> None:
    updates: list[dict[str, Any]] = []
    asked: list[str] = []
    handlers, config, _ = lagging_question(updates, lag=2)

    async def slow_name(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        await trio.sleep(5)  # (the other handle polls meanwhile, and sees q)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    with trio.fail_after(1000):  # (virtual: a question never answered polls for ever)
        async with (
            open_client(
                (handlers, config), era="modern", capabilities=EXT, on_elicitation=slow_name
            ) as client,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(client.call_tool, "job")
            await trio.sleep(1)
            nursery.start_soon(client.task("t1").wait_result)
    assert asked == ["Name?"] and len(updates) == 1


async def test_a_question_whose_answer_failed_is_asked_again(autojump_clock: MockClock) -> None:
    updates: list[dict[str, Any]] = []
    asked: list[str] = []
    handlers, config, _ = lagging_question(updates, lag=0)

    async def flaky(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:
            raise RuntimeError("not now")
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    with trio.fail_after(1000):  # (virtual: a question never answered polls for ever)
        async with open_client(
            (handlers, config), era="modern", capabilities=EXT, on_elicitation=flaky
        ) as client:
            task = await client.call_tool_as_task("job")
            with pytest.raises(RuntimeError, match="not now"):
                await task.result()
            assert (await task.result()).content == []  # (the same handle: q is free again)
    assert asked == ["Name?", "Name?"] and len(updates) == 1


def test_answered_questions_are_bounded_per_client() -> None:
    answered = AnsweredQuestions(max_tasks=2, max_keys=2)
    for task_id in ("a", "b"):
        assert answered.claim(task_id, {"q": 1}) == {"q": 1}
        assert answered.claim(task_id, {"q": 1}) == {}  # (being answered)
        answered.settle(task_id, ["q"], ["q"])
    assert answered.claim("a", {"q": 1, "r": 2}) == {"r": 2}  # (a is now the newest)
    answered.settle("a", ["r"], [])  # (not sent: free again)
    assert answered.claim("c", {"q": 1}) == {"q": 1}  # (a third task: b is forgotten)
    assert len(answered) == 2 and answered.claim("b", {"q": 1}) == {"q": 1}
    # At most max_keys keys per task, the oldest forgotten.
    answered.settle("b", ["q"], ["q", "r", "s"])
    assert answered.claim("b", {"q": 1, "r": 2, "s": 3}) == {"q": 1}


def test_a_clients_answered_questions_keep_the_newest_256_tasks() -> None:
    # The default bound, which a client's table has: past it the least recently used
    # tasks are forgotten, with what was answered for them and what was never acked.
    answered = AnsweredQuestions()
    for n in range(300):
        assert answered.claim(f"t{n}", {"q": 1, "r": 2}) == {"q": 1, "r": 2}
        answered.settle(f"t{n}", ["q", "r"], ["q"], {"r": "R"})  # (r's ack was lost)
    assert len(answered) == 256
    for n in range(44, 300):  # the newest 256: kept
        assert answered.unacked(f"t{n}", ["r"]) == {"r": "R"}
        assert answered.claim(f"t{n}", {"q": 1}) == {}
    for n in range(44):  # the oldest 44: forgotten
        assert answered.unacked(f"t{n}", ["r"]) == {}
    # A forgotten task's question is asked again, and the task is remembered anew in
    # place of the least recently used one.
    assert answered.claim("t0", {"q": 1}) == {"q": 1}
    assert len(answered) == 256 and answered.unacked("t44", ["r"]) == {}


def test_answered_questions_settle_after_forget_and_keep_busy_tasks() -> None:
    answered = AnsweredQuestions(max_tasks=2)
    # A handle answers q while another sees the end and forgets the task: its settle
    # does not bring the task back.
    assert answered.claim("t", {"q": 1}) == {"q": 1}
    answered.forget("t")
    answered.settle("t", ["q"], ["q"])
    assert len(answered) == 0
    # A task whose question is being answered is not the least recently used to go.
    assert answered.claim("t", {"q": 1}) == {"q": 1}
    answered.claim("u", {})
    answered.claim("v", {})  # (u goes, not t)
    assert answered.claim("t", {"q": 1}) == {}  # (still being answered)
    assert len(answered) == 2
    one = AnsweredQuestions(max_tasks=1)
    assert one.claim("t", {"q": 1}) == {"q": 1}
    assert one.claim("u", {"r": 1}) == {"r": 1}
    assert len(one) == 2  # (past max_tasks by the busy ones only)
    assert one.claim("t", {"q": 1}) == {}
    one.settle("t", ["q"], [])
    one.settle("u", ["r"], [])
    one.claim("w", {})
    assert len(one) == 1  # (idle again: bounded as before)


def test_unacked_answers_are_kept_and_bounded() -> None:
    answered = AnsweredQuestions(max_keys=2)
    assert answered.claim("t", {"a": 1, "b": 2, "c": 3}) == {"a": 1, "b": 2, "c": 3}
    answered.settle("t", ["a", "b", "c"], [], {"a": "A", "b": "B", "c": "C"})
    assert answered.unacked("t", ["a", "b", "c"]) == {"b": "B", "c": "C"}  # (oldest out)
    assert answered.claim("t", {"b": 2}) == {"b": 2}  # (not acked: to be sent again)
    answered.settle("t", ["b"], ["b"])
    assert answered.unacked("t", ["b", "c"]) == {"c": "C"}
    assert answered.unacked("gone", ["c"]) == {}


async def test_an_update_whose_ack_was_lost_is_resent_not_asked_again(
    autojump_clock: MockClock,
) -> None:
    # The handle is cancelled while its tasks/update is in flight (the server has the
    # answer, no ack came back): a handle resumed by id sends the same answer again
    # without calling the user's callback a second time.
    handlers, config = tasks_by_hand(lambda n: {})
    base = {**WORKING_T, "taskId": "t1", "pollIntervalMs": 100}
    updates: list[dict[str, Any]] = []
    got_update = trio.Event()

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        if len(updates) >= 2:
            return {**base, "status": "completed", "result": {"content": []}}
        return {**base, "status": "input_required", "inputRequests": {"q": ASK_NAME}}

    @handlers.on_request("tasks/update")
    async def update(ctx: RequestContext) -> dict[str, Any]:
        updates.append((ctx.params or {})["inputResponses"])
        got_update.set()
        if len(updates) == 1:
            await trio.sleep(5)  # (a slow ack: cancelled before it comes)
        return {}

    asked: list[str] = []

    async def name(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        return t.ElicitResult(action="accept", content={"name": f"Ada {len(asked)}"})

    with trio.fail_after(1000):
        async with open_client(
            (handlers, config), era="modern", capabilities=EXT, on_elicitation=name
        ) as client:
            first = await client.call_tool_as_task("job")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.wait_result)
                await got_update.wait()
                await trio.sleep(1)
                nursery.cancel_scope.cancel()
            assert (await client.task("t1").result()).content == []
    assert asked == ["Name?"]
    assert len(updates) == 2 and updates[0] == updates[1]


async def test_a_resent_answer_the_server_refuses_is_asked_anew(autojump_clock: MockClock) -> None:
    # An unacked answer is sent again once; refused then (-32602), the next round asks
    # the user instead of sending the refused answer for ever.
    handlers, config = tasks_by_hand(lambda n: {})
    base = {**WORKING_T, "taskId": "t1", "pollIntervalMs": 100}
    updates: list[dict[str, Any]] = []
    got_update = trio.Event()

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        return {**base, "status": "input_required", "inputRequests": {"q": ASK_NAME}}

    @handlers.on_request("tasks/update")
    async def update(ctx: RequestContext) -> dict[str, Any]:
        updates.append((ctx.params or {})["inputResponses"])
        got_update.set()
        if len(updates) == 1:
            await trio.sleep(5)  # (a slow ack: cancelled before it comes)
            return {}
        raise McpError.from_code(-32602, "Invalid params: bad answer")

    asked: list[str] = []

    async def name(params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.append(params.message)
        return t.ElicitResult(action="accept", content={"name": f"Ada {len(asked)}"})

    with trio.fail_after(1000):
        async with open_client(
            (handlers, config), era="modern", capabilities=EXT, on_elicitation=name
        ) as client:
            first = await client.call_tool_as_task("job")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.wait_result)
                await got_update.wait()
                await trio.sleep(1)
                nursery.cancel_scope.cancel()
            for _ in range(3):
                with pytest.raises(McpError):
                    await client.task("t1").wait_result()
    assert len(asked) == 3
    assert updates[1] == updates[0] and updates[2] != updates[0] and updates[3] != updates[2]


async def test_a_task_created_in_another_status_is_looked_at_first(
    autojump_clock: MockClock,
) -> None:
    # A CreateTaskResult carries no payload, whatever its status (the spec allows any):
    # the result, error or questions come from tasks/get.
    for created, got, expect in [
        ("completed", {"status": "completed", "result": {"content": []}}, None),
        ("failed", {"status": "failed", "error": {"code": -32000, "message": "no"}}, McpError),
        ("input_required", {"status": "completed", "result": {"content": []}}, None),
        ("cancelled", {"status": "cancelled"}, TaskCancelled),
    ]:
        handlers, config = tasks_by_hand(lambda n, got=got: got)

        @handlers.on_request("tools/call")
        async def call(ctx: RequestContext, created: str = created) -> dict[str, Any]:
            return {**WORKING_T, "taskId": "t1", "status": created, "resultType": "task"}

        async with open_client((handlers, config), era="modern", capabilities=EXT) as client:
            for attempt in (
                client.call_tool("job"),
                (await client.call_tool_as_task("job")).result(),
            ):
                if expect is None:
                    assert (await attempt).content == []
                else:
                    with pytest.raises(expect):
                        await attempt


# ---------------------------------------------------------------- notifications


async def test_the_wait_rides_on_notifications(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pollIntervalMs 1 s and a tool of 50 s: polling would take ~50 tasks/get, and
    # the one-minute backstop alone 1 more; the server's notifications leave only the
    # catch-up after subscribing.
    async with connected(make_server()) as client:
        methods = count_gets(client, monkeypatch)
        task = await client.call_tool_as_task("slow", {"seconds": 50})
        output = await task.result(notifications=True)
        assert output.text == "slept 50.0"
        assert methods.count("tasks/get") == 1
        # Questions go the same way.
        asked = await client.call_tool_as_task("ask")
        assert (await asked.result(notifications=True)).text == "hi Ada m1 file:///work"


async def test_a_server_that_refuses_to_listen_is_polled(autojump_clock: MockClock) -> None:
    # Our server refuses taskIds from a client that did not declare the extension
    # (-32021): the handle, made by hand here, polls instead.
    async with connected(make_server(), capabilities={}) as client:
        created = await client.request("tools/call", {"name": "maybe", "arguments": {}})
        assert created.get("resultType") != "task"  # (no extension: a plain call)
        with pytest.raises(McpError) as info:
            async with client.subscribe(tasks=["t"]):
                pass  # pragma: no cover
        assert info.value.code == -32021
        task = await client._tool_task("slow", {"resultType": "task", **WORKING_T}, None)
        with pytest.raises(McpError) as polled:
            await task.result(notifications=True)
        # (It polled: tasks/get, refused in turn for the same reason.)
        assert polled.value.code == -32021 and "tasks/get" in polled.value.message


async def test_a_server_that_pushes_nothing_is_polled(autojump_clock: MockClock) -> None:
    # A server without the extension in its capabilities honors no taskIds: the
    # client polls instead.
    handlers, config = tasks_by_hand(
        lambda n: {"status": "completed", "result": {"content": []}} if n >= 3 else {}
    )
    async with open_client((handlers, config), era="modern", capabilities=EXT) as client:
        task = await client.call_tool_as_task("job")
        assert (await task.result(notifications=True)).content == []


async def test_a_listen_that_brings_nothing_is_backed_by_a_look_a_minute(
    autojump_clock: MockClock,
) -> None:
    # The server honors taskIds (it declares the extension) but pushes nothing: the
    # wait looks with tasks/get when the backstop (a minute) is up, not at the
    # (1 ms, clamped to 100 ms) poll interval.
    handlers, config = tasks_by_hand(
        lambda n: {"status": "completed", "result": {"content": []}} if n >= 2 else {},
        server_caps=EXT,
    )
    async with open_client((handlers, config), era="modern", capabilities=EXT) as client:
        task = await client.call_tool_as_task("job")
        start = trio.current_time()
        assert (await task.result(notifications=True)).content == []
        assert trio.current_time() - start == pytest.approx(60, abs=1)


@pytest.mark.parametrize(
    ("listen", "when"),
    [
        ("ended", "before_ack"),  # RemoteProtocolError: ended before its acknowledgment
        ("silent", "before_ack"),  # RequestTimeout after listen_ack_timeout
        ("error", "after_ack"),  # McpError from the listen, mid-wait
        ("ended", "after_ack"),  # an end (EndOfChannel) mid-wait, as before
    ],
)
async def test_a_listen_that_fails_leaves_the_task_polled(
    autojump_clock: MockClock, listen: str, when: str
) -> None:
    # The listen is a nicety (README: a backstop polls anyway): however it fails, a
    # healthy task is polled to its end, not failed.
    gets = [0]

    async def call(server: HandDriven, message: dict[str, Any]) -> bool:
        result = {**WORKING_T, "pollIntervalMs": 1000, "resultType": "task"}
        await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return True

    async def get(server: HandDriven, message: dict[str, Any]) -> bool:
        gets[0] += 1
        done = {"status": "completed", "result": {"content": []}} if gets[0] >= 4 else {}
        result = {**WORKING_T, "pollIntervalMs": 1000, "resultType": "complete", **done}
        await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return True

    async def listen_(server: HandDriven, message: dict[str, Any]) -> bool:
        rid = message["id"]
        if when == "after_ack":
            meta = {"io.modelcontextprotocol/subscriptionId": rid}
            honored = {"taskIds": message["params"]["notifications"]["taskIds"]}
            ack = {"_meta": meta, "notifications": honored}
            method = "notifications/subscriptions/acknowledged"
            await server.send({"jsonrpc": "2.0", "method": method, "params": ack})
            await trio.sleep(5)
        if listen == "ended":
            await server.send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif listen == "error":
            error = {"code": -32603, "message": "listen failed"}
            await server.send({"jsonrpc": "2.0", "id": rid, "error": error})
        return True  # (silent: never acknowledged, never answered)

    script: dict[str, Scripted] = {
        "tools/call": call,
        "tasks/get": get,
        "subscriptions/listen": listen_,
    }
    config = SessionConfig(listen_ack_timeout=10)
    async with hand_driven(script, capabilities=EXT, config=config) as client:
        task = await client.call_tool_as_task("job")
        assert (await task.result(notifications=True)).content == []
        assert gets[0] == 4


# ---------------------------------------------------------------- hostile servers


def tasks_by_hand(
    answer: Any, server_caps: dict[str, Any] | None = None
) -> tuple[Handlers, ConnectionConfig]:
    """A server that answers ``tools/call`` with a task and the n-th ``tasks/get`` with
    a valid working task updated by ``answer(n)``."""
    handlers = Handlers()
    polls = [0]
    base = {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttlMs": None,
        "pollIntervalMs": 1,
    }

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {**base, "resultType": "task"}

    @handlers.on_request("tasks/get")
    async def get(ctx: RequestContext) -> dict[str, Any]:
        polls[0] += 1
        return {**base, **answer(polls[0])}

    @handlers.on_request("tools/list")
    async def tools(ctx: RequestContext) -> dict[str, Any]:
        return {"tools": []}

    config = ConnectionConfig(
        era="modern",
        capabilities={"tools": {}, **(server_caps or {})},
        implementation={"name": "by-hand", "version": "1"},
    )
    return handlers, config


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"status": "finished"}, "unknown status"),
        ({"status": "completed"}, "needs a result"),
        ({"status": "failed", "error": {"code": "x"}}, "JSON-RPC error"),
        ({"status": "input_required", "inputRequests": [1]}, "inputRequests"),
        ({"taskId": "t2"}, "expected task"),
        ({"pollIntervalMs": -5}, "pollIntervalMs"),
        ({"createdAt": 3}, "createdAt"),
    ],
)
async def test_a_malformed_task_is_a_clear_error_and_the_session_survives(
    autojump_clock: MockClock, answer: dict[str, Any], why: str
) -> None:
    handlers, config = tasks_by_hand(lambda n: answer if n >= 2 else {})
    async with open_client((handlers, config), era="modern", capabilities=EXT) as client:
        task = await client.call_tool_as_task("job")
        with pytest.raises(RemoteProtocolError, match=why):
            await task.result()
        assert await client.list_tools() == []
        # call_tool meets the same error, then the session goes on.
        with pytest.raises(RemoteProtocolError, match=why):
            await client.call_tool("job")
        assert await client.list_tools() == []


async def test_a_malformed_create_task_result_is_a_clear_error(
    autojump_clock: MockClock,
) -> None:
    # (Our server core refuses to send one: the raw message goes by hand.)
    async def bad_task(server: HandDriven, message: dict[str, Any]) -> bool:
        result = {"resultType": "task", "taskId": 5, "status": "working"}
        await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return True

    async with hand_driven({"tools/call": bad_task}, capabilities=EXT) as client:
        with pytest.raises(RemoteProtocolError, match="taskId"):
            await client.call_tool_as_task("job")
        with pytest.raises(RemoteProtocolError, match="taskId"):
            await client.call_tool("job")
        assert await client.list_tools() == []


async def test_a_server_asking_for_a_tiny_interval_is_polled_at_the_minimum(
    autojump_clock: MockClock,
) -> None:
    handlers, config = tasks_by_hand(
        lambda n: {"status": "completed", "result": {"content": []}} if n >= 50 else {}
    )
    async with open_client((handlers, config), era="modern", capabilities=EXT) as client:
        start = trio.current_time()
        await (await client.call_tool_as_task("job")).result()
        assert trio.current_time() - start >= 49 * 0.1  # (pollIntervalMs 1 ms: 100 ms)


# ---------------------------------------------------------------- Streamable HTTP


async def test_tasks_over_streamable_http() -> None:
    server = make_server(TaskConfig(poll_interval_ms=100))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, "127.0.0.1", 0))
            async with open_client(
                handle.url,
                era="modern",
                capabilities=EXT,
                on_elicitation=on_elicitation,
                on_sampling=on_sampling,
                roots=["file:///work"],
            ) as client:
                task = await client.call_tool_as_task("slow", {"seconds": 0.2})
                assert (await task.result()).text == "slept 0.2"
                asked = await client.call_tool_as_task("ask")
                output = await asked.result(notifications=True)
                assert output.text == "hi Ada m1 file:///work"
                doomed = await client.call_tool_as_task("slow", {"seconds": 60})
                await doomed.cancel()
                with pytest.raises(TaskCancelled):
                    await doomed.result(notifications=True)
                assert (await client.call_tool("structured")).structured_content == {"n": 7}
            nursery.cancel_scope.cancel()


async def test_over_streamable_http_the_wait_rides_on_notifications() -> None:
    # A poll interval of a minute: within the 20 s deadline, only notifications/tasks
    # can tell the handle that the task asked, then ended.
    server = Server("tasks", task_config=TaskConfig(poll_interval_ms=60_000))

    @server.tool(task=True)
    async def quick_ask(ctx: Context) -> str:
        """Asks a name, then answers."""
        await trio.sleep(0.1)
        answer = await ctx.elicit("Name?", FORM)
        await trio.sleep(0.1)
        return f"hi {(answer.content or {}).get('name')}"

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, "127.0.0.1", 0))
            async with open_client(
                handle.url, era="modern", capabilities=EXT, on_elicitation=on_elicitation
            ) as client:
                asked = await client.call_tool_as_task("quick_ask")
                assert (await asked.result(notifications=True)).text == "hi Ada"
            nursery.cancel_scope.cancel()

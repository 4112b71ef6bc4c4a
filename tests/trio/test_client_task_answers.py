"""The client's reading of task answers it did not ask for or cannot take: a
``CreateTaskResult`` outside the extension (a legacy session, or no extension declared),
durations written as JSON numbers with a fraction, a refused ``CreateTaskResult`` (its task
is cancelled), and rounds of more questions than the client remembers answers to (a task's
and an MRTR request's)."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ErrorCode, RemoteProtocolError
from mcp_sansio import types as t
from mcp_trio import TASKS_EXTENSION
from mcp_trio._client_common import MAX_QUESTIONS
from mcp_trio._client_tasks import AnsweredQuestions

from .test_client_hostile import HandDriven, hand_driven

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
STAMP = "2026-01-01T00:00:00Z"
ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


def a_task(status: str = "working", **more: Any) -> dict[str, Any]:
    return {
        "taskId": "t",
        "status": status,
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": 60_000,
        "pollIntervalMs": 100,
        **more,
    }


class Scripted:
    """Answers chosen methods with fixed results (the rest go to the core), and records
    every method the client sent to it."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.answers = answers

    def script(self) -> dict[str, Any]:
        async def answer(server: HandDriven, message: dict[str, Any]) -> bool:
            self.sent.append((message["method"], message.get("params")))
            result = self.answers[message["method"]]
            result = result() if callable(result) else result
            await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return True

        async def record(server: HandDriven, message: dict[str, Any]) -> bool:
            self.sent.append((message["method"], message.get("params")))
            return False  # (the core answers it)

        script: dict[str, Any] = dict.fromkeys(self.answers, answer)
        for method in ("tasks/get", "tasks/cancel", "tasks/update", "tasks/list"):
            script.setdefault(method, record)
        return script

    def methods(self) -> list[str]:
        return [method for method, _ in self.sent]


class Asked:
    """An elicitation callback that counts its calls."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(
        self, params: t.ElicitRequestFormParams | t.ElicitRequestURLParams
    ) -> t.ElicitResult:
        self.count += 1
        return t.ElicitResult(action="accept", content={"name": "Ada"})


# ------------------------------------------------------------- a task nobody asked for


async def test_a_task_in_a_legacy_session_is_an_invalid_result(autojump_clock: MockClock) -> None:
    # ext-tasks: "A server MUST NOT return CreateTaskResult to a client that did not
    # include the extension capability on its request", and legacy requests never carry
    # that modern-only extension: the answer is no CallToolResult, the peer's fault
    # (RemoteProtocolError, not a LocalProtocolError for a tasks/get the legacy server's
    # capabilities rule out), and no task is driven.
    server = Scripted({"tools/call": {"resultType": "task", **a_task()}})
    async with hand_driven(server.script(), era="legacy") as client:
        with pytest.raises(RemoteProtocolError, match="did not declare"):
            await client.call_tool("job")
        assert server.methods() == ["tools/call"]  # (no tasks/get, no tasks/cancel)
        assert await client.list_tools() == []  # (the session goes on)


async def test_a_task_without_the_extension_declared_is_refused(autojump_clock: MockClock) -> None:
    # (Modern: the core refuses the resultType of a request that did not declare it. The
    # error is the client's, not the server's: RemoteProtocolError, never an McpError.)
    server = Scripted({"tools/call": {"resultType": "task", **a_task()}})
    async with hand_driven(server.script(), capabilities={}) as client:
        with pytest.raises(RemoteProtocolError, match="resultType 'task'") as info:
            await client.call_tool("job")
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert server.methods() == ["tools/call"]


# ------------------------------------------------------------- durations as numbers


async def test_durations_written_with_a_fraction_are_read_as_milliseconds(
    autojump_clock: MockClock,
) -> None:
    # The schema types ttlMs and pollIntervalMs "number": 60000.0 is an integer (JSON
    # Schema), and 250.5 is rounded up (a poll no sooner than asked).
    floats: dict[str, Any] = {"ttlMs": 60_000.0, "pollIntervalMs": 250.5}
    done = {**a_task("completed", **floats), "result": {"content": []}}
    server = Scripted({"tools/call": {"resultType": "task", **a_task(**floats)}, "tasks/get": done})
    async with hand_driven(server.script(), capabilities=EXT) as client:
        task = await client.call_tool_as_task("job")
        assert task.state is not None
        assert (task.state.ttl_ms, task.state.poll_interval_ms) == (60_000, 251)
        assert type(task.state.ttl_ms) is int and type(task.state.poll_interval_ms) is int
        assert (await client.call_tool("job")).content == []


# ------------------------------------------------------------- a refused CreateTaskResult


@pytest.mark.parametrize("how", ["call_tool", "call_tool_as_task"])
async def test_a_refused_create_task_result_naming_a_task_cancels_it(
    autojump_clock: MockClock, how: str
) -> None:
    # Refused (a negative ttlMs), the task it names may run on with nobody waiting:
    # the client sends tasks/cancel for it before raising.
    server = Scripted(
        {"tools/call": {"resultType": "task", **a_task(ttlMs=-1)}, "tasks/cancel": {}}
    )
    async with hand_driven(server.script(), capabilities=EXT) as client:
        with pytest.raises(RemoteProtocolError, match="ttlMs"):
            await getattr(client, how)("job")
        assert [(method, params["taskId"]) for method, params in server.sent[1:]] == [
            ("tasks/cancel", "t")
        ]


async def test_a_refused_create_task_result_naming_no_task_cancels_nothing(
    autojump_clock: MockClock,
) -> None:
    server = Scripted({"tools/call": {"resultType": "task", **a_task(taskId=5)}})
    async with hand_driven(server.script(), capabilities=EXT) as client:
        with pytest.raises(RemoteProtocolError, match="taskId"):
            await client.call_tool("job")
        assert server.methods() == ["tools/call"]


# ------------------------------------------------------------- too many questions


def questions(n: int) -> dict[str, Any]:
    return {f"k{i}": ELICIT for i in range(n)}


@pytest.mark.parametrize(
    ("n", "asked"), [(MAX_QUESTIONS, MAX_QUESTIONS), (MAX_QUESTIONS + 1, 0)], ids=["at", "past"]
)
async def test_a_task_asking_more_questions_than_remembered_is_refused_first(
    autojump_clock: MockClock, n: int, asked: int
) -> None:
    # Past the keys a client remembers per task, some answered question would be
    # forgotten, then asked again while the server catches up: the round is refused
    # before any callback runs, and the task is cancelled (call_tool gave up).
    polls = [0]

    def get() -> dict[str, Any]:
        polls[0] += 1
        if polls[0] == 1:
            return a_task("input_required", inputRequests=questions(n))
        return {**a_task("completed"), "result": {"content": []}}

    server = Scripted(
        {
            "tools/call": {"resultType": "task", **a_task()},
            "tasks/get": get,
            "tasks/update": {},
            "tasks/cancel": {},
        }
    )
    callback = Asked()
    caps = {**EXT, "elicitation": {"form": {}}}
    async with hand_driven(server.script(), capabilities=caps, on_elicitation=callback) as client:
        if asked:
            assert (await client.call_tool("job")).content == []
            assert "tasks/cancel" not in server.methods()
        else:
            with pytest.raises(RemoteProtocolError, match=f"asked {n} questions in one round"):
                await client.call_tool("job")
            assert server.methods()[-1] == "tasks/cancel"
            assert "tasks/update" not in server.methods()
    assert callback.count == asked


@pytest.mark.parametrize(
    ("n", "asked"), [(MAX_QUESTIONS, MAX_QUESTIONS), (MAX_QUESTIONS + 1, 0)], ids=["at", "past"]
)
async def test_an_mrtr_round_of_more_questions_than_the_bound_is_refused_first(
    autojump_clock: MockClock, n: int, asked: int
) -> None:
    calls = [0]

    def call() -> dict[str, Any]:
        calls[0] += 1
        if calls[0] == 1:
            return {"resultType": "input_required", "inputRequests": questions(n)}
        return {"resultType": "complete", "content": []}

    server = Scripted({"tools/call": call})
    callback = Asked()
    async with hand_driven(
        server.script(), capabilities={"elicitation": {"form": {}}}, on_elicitation=callback
    ) as client:
        if asked:
            assert (await client.call_tool("job")).content == []
        else:
            with pytest.raises(RemoteProtocolError, match=f"asked {n} questions in one round"):
                await client.call_tool("job")
            assert server.methods() == ["tools/call"]  # (no retry)
    assert callback.count == asked


async def test_a_round_counts_the_questions_already_answered_too(autojump_clock: MockClock) -> None:
    # A server that has not caught up lists answered keys beside new ones: the round is
    # measured whole, for all its keys must be remembered (else the oldest answered one
    # is forgotten, and asked again if it is listed once more).
    polls = [0]

    def get() -> dict[str, Any]:
        polls[0] += 1
        n = {1: 3, 2: 5}.get(polls[0])
        if n is not None:
            return a_task("input_required", inputRequests=questions(n))
        return {**a_task("completed"), "result": {"content": []}}  # pragma: no cover

    server = Scripted(
        {
            "tools/call": {"resultType": "task", **a_task()},
            "tasks/get": get,
            "tasks/update": {},
            "tasks/cancel": {},
        }
    )
    callback = Asked()
    caps = {**EXT, "elicitation": {"form": {}}}
    async with hand_driven(server.script(), capabilities=caps, on_elicitation=callback) as client:
        client._task_answers = AnsweredQuestions(max_keys=4)
        with pytest.raises(RemoteProtocolError, match="asked 5 questions in one round"):
            await client.call_tool("job")
    assert callback.count == 3  # (the first round; none of the second)

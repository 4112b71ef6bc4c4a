"""The client's tasks, more: a question key the server still lists is never forgotten (and
asked again) however many rounds it takes the server to catch up; a legacy
``CallToolResult`` with a stray ``resultType`` is still one; and the courtesy
``tasks/cancel`` of a call given up is sent even when the caller is being cancelled, and
never holds the caller longer than its bound when the server does not answer it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import RemoteProtocolError
from mcp_sansio import types as t
from mcp_trio._client_common import MAX_QUESTIONS
from mcp_trio._client_tasks import _CANCEL_TIMEOUT, AnsweredQuestions

from .test_client_hostile import HandDriven, hand_driven
from .test_client_task_answers import EXT, Scripted, a_task

NEVER = 3600.0
"""Seconds a silent server takes to answer (virtual: past any bound a test expects)."""


def question(key: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": key,
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }


# ------------------------------------------------------------- keys still listed


def test_a_listed_answered_key_becomes_the_newest() -> None:
    # q and r answered; the next round lists q again beside a new s: answering s
    # forgets r (not listed), not q (listed, the server has not caught up).
    answered = AnsweredQuestions(max_keys=2)
    assert answered.claim("t", {"q": 1, "r": 2}) == {"q": 1, "r": 2}
    answered.settle("t", ["q", "r"], ["q", "r"])
    assert answered.claim("t", {"q": 1, "s": 3}) == {"s": 3}
    answered.settle("t", ["s"], ["s"])
    assert answered.claim("t", {"q": 1, "s": 3}) == {}
    assert answered.claim("t", {"r": 2}) == {"r": 2}  # (forgotten: it was not listed)


async def test_a_key_the_server_still_lists_is_never_asked_again(
    autojump_clock: MockClock,
) -> None:
    # Every round holds MAX_QUESTIONS keys (the bound passes): the first k0..k1023, then
    # (twice) k0..k1022, which the server has not caught up with, and a new k1024.
    # Answering k1024 must forget k1023 (no longer listed), never k0 (listed, and the
    # oldest answer): else the third round asks k0 again.
    first = {f"k{i}": question(f"k{i}") for i in range(MAX_QUESTIONS)}
    later = {**{f"k{i}": question(f"k{i}") for i in range(MAX_QUESTIONS - 1)}}
    later[f"k{MAX_QUESTIONS}"] = question(f"k{MAX_QUESTIONS}")
    rounds = [first, later, later]

    def get() -> dict[str, Any]:
        if rounds:
            return a_task("input_required", inputRequests=rounds.pop(0))
        return {**a_task("completed"), "result": {"content": []}}

    server = Scripted(
        {
            "tools/call": {"resultType": "task", **a_task()},
            "tasks/get": get,
            "tasks/update": {},
            "tasks/cancel": {},
        }
    )
    asked: Counter[str] = Counter()

    async def on_elicitation(
        params: t.ElicitRequestFormParams | t.ElicitRequestURLParams,
    ) -> t.ElicitResult:
        asked[params.message] += 1
        return t.ElicitResult(action="accept", content={})

    caps = {**EXT, "elicitation": {"form": {}}}
    async with hand_driven(server.script(), capabilities=caps, on_elicitation=on_elicitation) as c:
        assert (await c.call_tool("job")).content == []
    assert not rounds
    assert len(asked) == MAX_QUESTIONS + 1 and set(asked.values()) == {1}


# ------------------------------------------------------------- a legacy stray resultType


async def test_a_legacy_call_tool_result_with_a_stray_result_type_is_a_result(
    autojump_clock: MockClock,
) -> None:
    # 2025-11-25 defines no resultType: {"content": [...], "resultType": "task"} is a
    # valid CallToolResult with an extra key, returned as such (nothing polled). A task
    # (no content) is still refused: test_client_task_answers.
    result = {"content": [{"type": "text", "text": "hello"}], "resultType": "task"}
    server = Scripted({"tools/call": result})
    async with hand_driven(server.script(), era="legacy") as client:
        assert (await client.call_tool("job")).text == "hello"
    assert server.methods() == ["tools/call"]


# ------------------------------------------------------------- the courtesy tasks/cancel


def silent_cancel(server_sent: list[str]) -> Any:
    """A ``tasks/cancel`` answered only after :data:`NEVER` seconds."""

    async def answer(server: HandDriven, message: dict[str, Any]) -> bool:
        server_sent.append(message["method"])
        await trio.sleep(NEVER)
        await server.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        return True

    return answer


async def test_a_silent_servers_cancel_of_a_refused_task_holds_the_call_only_its_bound(
    autojump_clock: MockClock,
) -> None:
    # A refused CreateTaskResult (a negative ttlMs) is sent tasks/cancel; a server that
    # does not answer it keeps the caller _CANCEL_TIMEOUT seconds, then the refusal is
    # raised (not NEVER seconds later).
    received: list[str] = []
    server = Scripted({"tools/call": {"resultType": "task", **a_task(ttlMs=-1)}})
    script = {**server.script(), "tasks/cancel": silent_cancel(received)}
    async with hand_driven(script, capabilities=EXT) as client:
        start = trio.current_time()
        with pytest.raises(RemoteProtocolError, match="ttlMs"):
            await client.call_tool("job")
        assert trio.current_time() - start == pytest.approx(_CANCEL_TIMEOUT)
    assert received == ["tasks/cancel"]


@pytest.mark.parametrize("silent", [False, True], ids=["answered", "silent"])
async def test_a_call_its_caller_cancels_still_cancels_the_task(
    autojump_clock: MockClock, silent: bool
) -> None:
    # The caller's cancel scope ends the wait at 5 s: the courtesy tasks/cancel is
    # shielded, so it goes out (and its answer is awaited) though the caller is being
    # cancelled, for at most _CANCEL_TIMEOUT seconds when the server does not answer.
    received: list[str] = []
    create = {"resultType": "task", **a_task()}
    server = Scripted({"tools/call": create, "tasks/get": a_task(), "tasks/cancel": {}})
    script = server.script()
    if silent:
        script["tasks/cancel"] = silent_cancel(received)
    async with hand_driven(script, capabilities=EXT) as client:
        start = trio.current_time()
        with trio.move_on_after(5) as scope:
            await client.call_tool("job")
        assert scope.cancelled_caught
        assert trio.current_time() - start == pytest.approx(5 + (_CANCEL_TIMEOUT if silent else 0))
    if not silent:
        received = [method for method in server.methods() if method == "tasks/cancel"]
    assert received == ["tasks/cancel"]

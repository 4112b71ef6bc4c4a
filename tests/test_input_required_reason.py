"""A modern server's input request the client never declared is refused before any
callback runs, and the failure says why: an MRTR round by the core (the call fails with
its local error, which names what was not declared), by either client; a task's
questions (the tasks extension), which the core does not read, by the Trio client's
``Callbacks``, with an :class:`InputRequiredError` that says why (its message and
``reason``), not only with the text of a missing callback."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ErrorCode, RemoteProtocolError
from mcp_sansio import types as t
from mcp_trio import BlockingClient, InputRequiredError
from tests.test_blocking_client import TIMEOUT
from tests.trio.test_client_hostile import hand_driven
from tests.trio.test_client_task_answers import EXT, Scripted, a_task

WITH_TOOLS = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
    },
}


def asking(question: dict[str, Any]) -> Scripted:
    """A task server whose task asks ``question`` (under ``s``) once, then completes."""
    polls = [0]

    def get() -> dict[str, Any]:
        polls[0] += 1
        if polls[0] == 1:
            return a_task("input_required", inputRequests={"s": question})
        return {**a_task("completed"), "result": {"content": []}}  # pragma: no cover

    return Scripted(
        {
            "tools/call": {"resultType": "task", **a_task()},
            "tasks/get": get,
            "tasks/update": {},
            "tasks/cancel": {},
        }
    )


async def never(params: Any) -> Any:
    raise AssertionError("not run")  # pragma: no cover


async def test_a_tasks_undeclared_question_is_refused_with_the_reason(
    autojump_clock: MockClock,
) -> None:
    # Sampling declared, but not sampling.tools: tool use is refused, the callback
    # never runs, and the task is given up.
    server = asking(WITH_TOOLS)
    caps = {**EXT, "sampling": {}}
    async with hand_driven(server.script(), capabilities=caps, on_sampling=never) as client:
        with pytest.raises(InputRequiredError) as info:
            await client.call_tool("job")
    assert info.value.reason is not None and "sampling.tools" in info.value.reason
    assert str(info.value).endswith(f"refused: {info.value.reason}")
    assert "['s']" in str(info.value)
    assert "tasks/update" not in server.methods()
    # No callback at all: no reason, the message as before.
    server = asking(WITH_TOOLS)
    async with hand_driven(server.script(), capabilities=EXT) as client:
        with pytest.raises(InputRequiredError) as info:
            await client.call_tool("job")
    assert info.value.reason is None
    assert str(info.value) == "tools/call needs input: ['s']"


ROGUE = """
import json, os
from mcp_sansio import Connection, ConnectionConfig, RequestReceived
conn = Connection("server", ConnectionConfig(era="modern", capabilities={"tools": {}}))
url = {"mode": "url", "message": "m", "url": "https://example.com/", "elicitationId": "e"}
asked = {"q": {"method": "elicitation/create", "params": url}}
while data := os.read(0, 65_536):
    for event in conn.receive_bytes(data, now=0.0):
        if isinstance(event, RequestReceived) and event.method == "tools/call":
            # (Raw: the server core would refuse to ask what the client never declared.)
            result = {"resultType": "input_required", "inputRequests": asked}
            reply = {"jsonrpc": "2.0", "id": event.request_id, "result": result}
            os.write(1, json.dumps(reply).encode() + b"\\n")
    os.write(1, conn.bytes_to_send())
"""
"""A modern server that asks a URL-mode question in answer to any ``tools/call``."""


@pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")
def test_blocking_client_refuses_an_undeclared_round() -> None:
    asked: list[object] = []

    def form_only(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
        asked.append(params)  # pragma: no cover - must not run
        return t.ElicitResult(action="decline")  # pragma: no cover

    # A form-only client (mrtr.mdx: "Servers MUST NOT send an inputRequests that the
    # client has not declared support for"): the core refuses the round, the callback
    # never runs and the call fails with the core's local error, which says why.
    command = [sys.executable, "-c", ROGUE]
    with BlockingClient.stdio(command, on_elicitation=form_only, timeout=TIMEOUT) as client:
        with pytest.raises(RemoteProtocolError, match="input_required refused") as info:
            client.call_tool("greet")
        assert "'url'" in info.value.message
        assert info.value.error_code == ErrorCode.INVALID_PARAMS
        assert client.connection.pending_requests() == ()
    assert asked == []

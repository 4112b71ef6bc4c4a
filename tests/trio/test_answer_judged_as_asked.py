"""A callback's elicitation answer is judged against the form as the server sent it,
the input the core judges it against as it is sent (``send_result``,
``retry_with_input``), not against the typed form, which drops what the spec's
restricted schemas do not name (``anyOf`` on a string field). Judged on two inputs, an
answer could pass the binding and be refused by the core: a legacy server then got a
bare -32603 "Internal error" instead of the message that blames the callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from trio.testing import MockClock

from mcp_trio._client_common import CallbackAnswerError

from .test_client_answers import done, raw_served_client

#: A string field whose choices are given as ``anyOf`` consts (outside the spec's forms).
ASKED = {
    "method": "elicitation/create",
    "params": {
        "message": "f?",
        "requestedSchema": {
            "type": "object",
            "properties": {"f": {"type": "string", "anyOf": [{"const": "a"}]}},
        },
    },
}


def answering(value: str) -> Callable[[Any], Any]:
    async def callback(params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"f": value}}

    return callback


def legacy_asking(seen: list[dict[str, Any]]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """A legacy server's tools/call: it asks ``ASKED``, then answers the call."""

    def on_call(message: dict[str, Any]) -> list[dict[str, Any]]:
        if "method" in message:
            return [{"jsonrpc": "2.0", "id": "e1", **ASKED}]
        call = next(m for m in seen if m.get("method") == "tools/call")
        return [done(call["id"])]

    return on_call


def modern_asking(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A modern server's tools/call: input_required with ``ASKED``, then done."""
    if "inputResponses" in message["params"]:
        return [done(message["id"])]
    result = {"resultType": "input_required", "inputRequests": {"q": ASKED}}
    return [{"jsonrpc": "2.0", "id": message["id"], "result": result}]


async def test_a_legacy_server_is_told_the_callbacks_mistake(autojump_clock: MockClock) -> None:
    seen: list[dict[str, Any]] = []
    async with raw_served_client(
        "legacy", legacy_asking(seen), seen, on_elicitation=answering("zzz")
    ) as client:
        await client.call_tool("t")
    (answer,) = [m for m in seen if m.get("id") == "e1"]
    error = answer["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("on_elicitation accepted with content that does not fit")
    assert "'f': not one of its choices" in error["message"]


async def test_a_modern_call_fails_with_the_callbacks_mistake(autojump_clock: MockClock) -> None:
    seen: list[dict[str, Any]] = []
    async with raw_served_client(
        "modern", modern_asking, seen, on_elicitation=answering("zzz")
    ) as client:
        with pytest.raises(CallbackAnswerError, match="'f': not one of its choices"):
            await client.call_tool("t")
        assert client.session.connection.pending_requests() == ()
    assert len([m for m in seen if m.get("method") == "tools/call"]) == 1  # no retry


async def test_a_choice_of_the_form_goes_through(autojump_clock: MockClock) -> None:
    seen: list[dict[str, Any]] = []
    async with raw_served_client(
        "legacy", legacy_asking(seen), seen, on_elicitation=answering("a")
    ) as client:
        await client.call_tool("t")
    (answer,) = [m for m in seen if m.get("id") == "e1"]
    assert answer["result"] == {"action": "accept", "content": {"f": "a"}}
    seen.clear()
    async with raw_served_client(
        "modern", modern_asking, seen, on_elicitation=answering("a")
    ) as client:
        await client.call_tool("t")
    (retry,) = [m for m in seen if "inputResponses" in m.get("params", {})]
    assert retry["params"]["inputResponses"] == {"q": {"action": "accept", "content": {"f": "a"}}}

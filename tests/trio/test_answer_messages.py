"""What the client makes of its own callbacks' elicitation answers (``checked_answer``,
through a modern client answering a server's form): an answer the form and
``ElicitResult`` allow is sent, one they do not fails the call with a
:class:`CallbackAnswerError`, whose message names the server's form fields, peer data
that is logged and sent back, so what a terminal would act on in them is escaped; and an
``"integer"`` field's ``3.0`` is an integer (JSON Schema: a number with a zero
fractional part), sent as ``3``."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_trio._client_common import CallbackAnswerError

from .test_client_answers import done, raw_served_client

EVIL = "x\x1b[2J\u202e\n"


def form(**properties: Any) -> dict[str, Any]:
    """A form's params, as a server sends them (its first field required)."""
    return {
        "message": "m",
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": list(properties)[:1],
        },
    }


async def answered(params: dict[str, Any], answer: Any, **client_options: Any) -> Any:
    """What a modern client sends back (its retry's ``inputResponses`` entry) when a
    server asks ``elicitation/create`` with ``params`` and its ``on_elicitation`` returns
    ``answer``; raises what the call raises (a refused answer fails it, no retry sent)."""
    seen: list[dict[str, Any]] = []
    asked = {"method": "elicitation/create", "params": params}

    def on_call(message: dict[str, Any]) -> list[dict[str, Any]]:
        if "inputResponses" in message["params"]:
            return [done(message["id"])]
        result = {"resultType": "input_required", "inputRequests": {"q": asked}}
        return [{"jsonrpc": "2.0", "id": message["id"], "result": result}]

    async def callback(params: Any) -> Any:
        return answer

    failure: Exception | None = None
    async with raw_served_client(
        "modern", on_call, seen, on_elicitation=callback, **client_options
    ) as client:
        try:
            await client.call_tool("t")
        except Exception as exc:  # (raised below, out of the client's nursery)
            failure = exc
        assert client.session.connection.pending_requests() == ()
    if failure is not None:
        assert len([m for m in seen if m.get("method") == "tools/call"]) == 1  # no retry
        raise failure
    (retry,) = [m for m in seen if "inputResponses" in m.get("params", {})]
    return retry["params"]["inputResponses"]["q"]


async def test_an_answer_is_checked_against_what_the_schema_allows(
    autojump_clock: MockClock,
) -> None:
    titled = form(choice={"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]})
    accepted = {"action": "accept", "content": {"choice": "a"}}
    assert await answered(titled, accepted) == accepted
    with pytest.raises(CallbackAnswerError, match="field 'choice'"):
        await answered(titled, {"action": "accept", "content": {"choice": "c"}})
    # Declined and cancelled answers carry no form to check.
    assert await answered(titled, {"action": "decline"}) == {"action": "decline"}
    # A URL-mode answer has no content to check.
    url = {"mode": "url", "message": "m", "url": "https://example.com/", "elicitationId": "e"}
    assert await answered(url, {"action": "accept"}, capabilities={"elicitation": {"url": {}}}) == {
        "action": "accept"
    }
    with pytest.raises(TypeError, match="on_elicitation must return"):
        await answered(titled, "yes")


@pytest.mark.parametrize(
    "content",
    [
        {EVIL: "a"},  # too short: the form's check
        {},  # the required field missing: the form's check
        {EVIL: 1.5},  # no ElicitResult content value: the shape check
    ],
)
async def test_a_field_name_is_escaped_in_the_message(
    content: dict[str, Any], autojump_clock: MockClock
) -> None:
    params = form(**{EVIL: {"type": "string", "minLength": 3}})
    with pytest.raises(CallbackAnswerError) as info:
        await answered(params, {"action": "accept", "content": content})
    message = str(info.value)
    assert message.isprintable(), message
    assert "\\u202e" in message and ("\\x1b" in message or "\\u001b" in message)


async def test_an_integer_field_takes_a_whole_float(autojump_clock: MockClock) -> None:
    params = form(n={"type": "integer", "minimum": 1}, s={"type": "string"})
    answer: dict[str, Any] = {"action": "accept", "content": {"n": 3.0, "s": "a"}}
    data = await answered(params, answer)
    assert data["content"] == {"n": 3, "s": "a"}
    assert type(data["content"]["n"]) is int
    assert answer["content"]["n"] == 3.0  # (the callback's own value is left alone)
    # A fraction is no integer; still checked against the form too.
    for bad in (3.5, 0.0):
        with pytest.raises(CallbackAnswerError):
            await answered(params, {"action": "accept", "content": {"n": bad}})

"""What the client says of its own callbacks' answers (``checked_answer``): a
:class:`CallbackAnswerError` message names the server's form fields, peer data that is
logged and sent back, so what a terminal would act on in them is escaped; and an
``"integer"`` field's ``3.0`` is an integer (JSON Schema: a number with a zero
fractional part), sent as ``3``."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_trio._client_common import CallbackAnswerError, checked_answer, elicitation_params

EVIL = "x\x1b[2J\u202e\n"


def form(**properties: Any) -> Any:
    return elicitation_params(
        {
            "message": "m",
            "requestedSchema": {
                "type": "object",
                "properties": properties,
                "required": list(properties)[:1],
            },
        }
    )


@pytest.mark.parametrize(
    "content",
    [
        {EVIL: "a"},  # too short: the form's check
        {},  # the required field missing: the form's check
        {EVIL: 1.5},  # no ElicitResult content value: the shape check
    ],
)
def test_a_field_name_is_escaped_in_the_message(content: dict[str, Any]) -> None:
    params = form(**{EVIL: {"type": "string", "minLength": 3}})
    with pytest.raises(CallbackAnswerError) as info:
        checked_answer("elicitation/create", {"action": "accept", "content": content}, params)
    message = str(info.value)
    assert message.isprintable(), message
    assert "\\u202e" in message and ("\\x1b" in message or "\\u001b" in message)


def test_an_integer_field_takes_a_whole_float() -> None:
    params = form(n={"type": "integer", "minimum": 1}, s={"type": "string"})
    answer: dict[str, Any] = {"action": "accept", "content": {"n": 3.0, "s": "a"}}
    data = checked_answer("elicitation/create", answer, params)
    assert data["content"] == {"n": 3, "s": "a"}
    assert type(data["content"]["n"]) is int
    assert answer["content"]["n"] == 3.0  # (the callback's own value is left alone)
    # A fraction is no integer; still checked against the form too.
    for bad in (3.5, 0.0):
        with pytest.raises(CallbackAnswerError):
            checked_answer(
                "elicitation/create", {"action": "accept", "content": {"n": bad}}, params
            )

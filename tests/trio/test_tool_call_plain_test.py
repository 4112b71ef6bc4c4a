"""``tools/call``'s one-loop test (``plain_object_test``): arguments that are valid and
of exactly their parameters' types, said yes to in one loop; anything else goes the
general way (the flat test or ``validate``, then the plain types or
``coerce_arguments``), with the answers it always gave."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mcp_trio._server_rpc as server_rpc
from mcp_trio import Server, open_client
from mcp_trio._validation import flat_object_test, plain_object_test, validate

_NAMES = st.sampled_from(["a", "b", "c"])
_KINDS = st.sampled_from([str, int, bool, float])
_LEAVES: list[Any] = [
    True,
    {},
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
]
_VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=2)


@st.composite
def _schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = draw(st.dictionaries(_NAMES, st.sampled_from(_LEAVES), max_size=3))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(_NAMES, max_size=3, unique=True))
    if required:
        schema["required"] = required
    extra = draw(st.sampled_from([None, True, False]))
    if extra is not None:
        schema["additionalProperties"] = extra
    return schema


def _plain_fit(plain: dict[str, type], value: dict[str, Any]) -> bool:
    return all(type(item) is plain.get(key) for key, item in value.items())


@given(
    _schemas(),
    st.dictionaries(_NAMES, _KINDS, max_size=3),
    st.dictionaries(_NAMES, _VALUES, max_size=3) | _VALUES,
)
def test_a_yes_is_what_both_tests_say(
    schema: dict[str, Any], plain: dict[str, type], value: Any
) -> None:
    test = plain_object_test(flat_object_test(schema), plain)
    if test is not None and test(value):
        assert validate(value, schema) == []
        assert _plain_fit(plain, value)


@pytest.mark.parametrize("required", [["a", "b"], ["a"], []])
def test_it_says_yes_to_valid_arguments_of_exact_types(required: list[str]) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": True},
        "required": required,
    }
    test = plain_object_test(flat_object_test(schema), {"a": str, "b": int, "c": bool})
    assert test is not None
    assert test({"a": "x", "b": 1, "c": False})
    assert test({"a": "x", "b": 1})  # (c: not required)
    assert test({"b": 1}) == ("a" not in required)
    assert not test({"a": "x", "b": True})  # a bool is no int here
    assert not test({"a": "x", "b": 1, "d": 1})  # not a parameter
    assert not test([("a", "x")])


def test_a_required_member_missing_is_no() -> None:
    # The count shortcut (every parameter required) and the loop over ``required``.
    every = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    test = plain_object_test(flat_object_test(every), {"a": str})
    assert test is not None and test({"a": "x"}) and not test({})
    assert not test({"a": 1}) and not test({"b": "x"})  # (as many members: not these)
    some = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"],
    }
    test = plain_object_test(flat_object_test(some), {"a": str, "b": str})
    assert test is not None and test({"a": "x"}) and not test({"b": "x"})


@pytest.mark.parametrize(
    ("schema", "plain"),
    [
        ({"type": "object", "properties": {"a": {"type": "number"}}}, {"a": float}),  # NaN
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": str}),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"a": int}),
        ({"type": "object", "properties": {}, "additionalProperties": False}, {"a": str}),
        ({"type": "object", "properties": {"a": {"minLength": 1}}}, {"a": str}),  # not flat
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {}),
    ],
)
def test_none_where_it_cannot_say(schema: dict[str, Any], plain: dict[str, type]) -> None:
    assert plain_object_test(flat_object_test(schema), plain) is None


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(server_rpc, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(server_rpc, name, counted)
    return calls


async def test_both_ways_through_a_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server("s")
    seen: list[tuple[Any, ...]] = []

    @server.tool(output_schema=False)
    async def forecast(city: str, days: int, metric: bool = True) -> str:
        seen.append((city, days, metric))
        return "ok"

    general = _counting(monkeypatch, "_plain_fit")
    walks = _counting(monkeypatch, "validate")
    async with open_client(server) as client:
        assert (await client.call_tool("forecast", {"city": "x", "days": 2})).text == "ok"
        three = {"city": "x", "days": 3, "metric": False}
        assert (await client.call_tool("forecast", three)).text == "ok"
        assert general == [] and walks == []  # the one loop said yes
        converted = await client.call_tool("forecast", {"city": "x", "days": 4.0})
        assert converted.text == "ok" and general == [1] and walks == []
        bad = await client.call_tool("forecast", {"city": "x", "days": "two"})
        assert bad.is_error and "arguments.days: expected integer, got string" in bad.text
        missing = await client.call_tool("forecast", {"days": 1})
        assert missing.is_error and "city" in missing.text
        assert walks == [1, 1]
    assert seen == [("x", 2, True), ("x", 3, False), ("x", 4, True)]
    assert [type(v) for v in seen[2]] == [str, int, bool]

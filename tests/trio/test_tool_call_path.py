"""The quick paths of ``tools/call``: arguments checked by the registry's flat-object
test (the same verdict as ``validate``), and a ``Context`` built only for a tool that
takes one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mcp_trio._server_rpc as server_rpc
from mcp_trio import Context, Server, open_client
from mcp_trio._validation import flat_object_test, validate

_LEAVES: list[Any] = [
    True,
    {},
    {"description": "anything"},
    {"type": "string"},
    {"type": "integer", "title": "n"},
    {"type": "number", "default": 1},
    {"type": "boolean"},
    {"type": "null"},
    {"type": "array"},
    {"type": "object", "format": "x"},
]

_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # (NaN and the infinities too: no JSON number)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=5,
)
_NAMES = st.sampled_from(["a", "b", "c"])


@st.composite
def _flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = draw(st.dictionaries(_NAMES, st.sampled_from(_LEAVES), max_size=3))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(_NAMES, max_size=3))
    if required:
        schema["required"] = required
    extra = draw(st.sampled_from([None, True, False]))
    if extra is not None:
        schema["additionalProperties"] = extra
    if draw(st.booleans()):
        schema["description"] = "a tool's arguments"
    return schema


@given(
    _flat_schemas(),
    st.dictionaries(_NAMES, _VALUES, max_size=3) | _VALUES,
)
def test_the_flat_object_test_agrees_with_validate(schema: dict[str, Any], value: Any) -> None:
    test = flat_object_test(schema)
    assert test is not None
    assert test(value) == (validate(value, schema) == [])


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {}},  # (no type: any value is valid)
        {"type": ["object"]},
        {"type": "array"},
        {"type": "object", "minProperties": 1},
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
        {"type": "object", "properties": {"a": {"enum": [1]}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "properties": {"a": False}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "additionalProperties": 0},
        {"type": "object", "required": "a"},
        {"type": "object", "required": [1]},
        {"type": "object", "allOf": [{}]},
        {"type": "object", "properties": {"a": {"type": "strnig"}}},
        {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}},
    ],
)
def test_other_schemas_get_no_flat_test(schema: dict[str, Any]) -> None:
    assert flat_object_test(schema) is None


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(server_rpc, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(server_rpc, name, counted)
    return calls


async def test_valid_plain_arguments_skip_the_schema_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    server = Server("s")

    @server.tool(output_schema=False)
    async def add(a: int, b: int = 2) -> str:
        return str(a + b)

    walks = _counting(monkeypatch, "validate")
    async with open_client(server) as client:
        assert (await client.call_tool("add", {"a": 1})).text == "3"
        assert walks == []  # the flat test said yes
        bad = await client.call_tool("add", {"a": "one"})
        assert bad.is_error and "arguments.a: expected integer, got string" in bad.text
        assert walks == [1]  # it said no: validate() lists the problems


async def test_a_context_is_built_only_for_a_tool_that_takes_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server("s")

    @server.tool()
    async def plain(a: int) -> int:
        return a

    @server.tool()
    async def with_context(a: int, ctx: Context) -> str:
        return ctx.method

    built = _counting(monkeypatch, "Context")
    async with open_client(server) as client:
        assert (await client.call_tool("plain", {"a": 1})).structured_content == {"result": 1}
        assert built == []
        assert (await client.call_tool("with_context", {"a": 1})).text == "tools/call"
        assert built == [1]


async def test_a_fitting_structured_result_skips_the_schema_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server("s")

    @server.tool()
    async def half(n: int) -> int:
        return n // 2 if n > 0 else "negative"  # type: ignore[return-value]

    walks = _counting(monkeypatch, "validate")
    async with open_client(server) as client:
        assert (await client.call_tool("half", {"n": 8})).structured_content == {"result": 4}
        assert walks == []  # the flat tests said yes, to the arguments and the result
        assert (await client.call_tool("half", {"n": -1})).is_error
        assert walks == [1]  # the result's test said no: validate() lists the problems


async def test_a_string_result_becomes_one_text_block_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server("s")

    @server.tool(output_schema=False)
    async def echo(text: str) -> str:
        return text

    @server.tool(output_schema=False)
    async def both(text: str) -> list[str]:
        return [text, text]

    looked_at = _counting(monkeypatch, "content_blocks")
    async with open_client(server) as client:
        output = await client.call_tool("echo", {"text": "hi"})
        assert output.text == "hi" and len(output.content) == 1
        assert output.structured_content is None and not output.is_error
        assert looked_at == []  # no search for content of other kinds
        assert (await client.call_tool("both", {"text": "a"})).text == "a\na"
        assert looked_at == [1]


async def test_plain_arguments_of_their_exact_types_are_passed_as_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server("s")
    seen: list[tuple[Any, ...]] = []

    @server.tool(output_schema=False)
    async def mix(s: str, i: int, f: float, b: bool = False) -> str:
        seen.append((s, i, f, b))
        return "ok"

    @server.tool(output_schema=False)
    async def listed(xs: list[int]) -> str:
        seen.append(tuple(xs))
        return "ok"

    converted = _counting(monkeypatch, "coerce_arguments")
    async with open_client(server) as client:
        await client.call_tool("mix", {"s": "a", "i": 1, "f": 1.5, "b": True})
        assert converted == []  # nothing to convert
        await client.call_tool("mix", {"s": "a", "i": 2.0, "f": 3})  # integral float, int
        assert converted == [1]
        await client.call_tool("listed", {"xs": [1]})
        assert converted == [1, 1]
    assert seen == [("a", 1, 1.5, True), ("a", 2, 3.0, False), (1,)]
    assert [type(v) for v in seen[1]] == [str, int, float, bool]


CLOSED_OUTPUT = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "additionalProperties": False,
}


def test_the_flat_test_refuses_a_key_no_property_allows() -> None:
    test = flat_object_test(CLOSED_OUTPUT)
    assert test is not None and test({"a": 1}) and not test({"a": 1, "b": 2})


async def test_a_structured_result_with_a_key_the_schema_forbids_is_an_error() -> None:
    server = Server("s")

    @server.tool(output_schema=CLOSED_OUTPUT)
    async def t() -> Any:
        return {"a": 1, "b": 2}

    async with open_client(server) as client:
        assert (await client.call_tool("t", {})).is_error


async def test_an_output_schema_changed_after_registration_is_not_what_results_meet() -> None:
    # tools/list publishes the schema as registered, and results are checked against
    # that same schema: the caller's dict is copied whole (nested parts too).
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }
    server = Server("s")

    @server.tool(output_schema=schema)
    async def t() -> Any:
        return {"a": 1}

    schema["properties"]["a"]["type"] = "string"
    async with open_client(server) as client:
        (tool,) = await client.list_tools()
        assert tool.output_schema is not None
        assert tool.output_schema["properties"]["a"]["type"] == "integer"
        result = await client.call_tool("t", {})
        assert not result.is_error and result.structured_content == {"a": 1}

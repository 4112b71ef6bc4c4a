"""A hand-written ``input_schema=`` (how a TypeScript-SDK ``registerTool`` port lands) is
enforced, as a hand-written ``output_schema`` is: arguments are validated against it
before the function runs, and passed as JSON values, unconverted.

* Out of bounds, of the wrong type, undeclared under ``additionalProperties: false``,
  or missing while required: a tool error the model can act on; the function does not run.
* A parameter without a default that the schema lets the client leave out is a tool
  error naming it, not "internal error" (the function's ``TypeError``).
* ``x-mcp-header`` (MCP's annotation) does not stop the validation.
* A schema with a keyword the validator does not implement (``if``/``then``/``else``,
  the documented reason to write one by hand) is still published and served; its
  arguments reach the function unchecked, as before, and a warning at registration
  says so and why.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcp_trio import Context, Server

from .helpers import connected

ADD = {
    "type": "object",
    "properties": {"a": {"type": "number", "minimum": 0}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test runs once per era."""
    value: str = request.param
    return value


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"a": -5, "b": 2}, "arguments.a: must be >= 0, got -5"),
        ({"a": "1", "b": 2}, "arguments.a: expected number, got string"),
        ({"a": 1}, "arguments: missing required property 'b'"),
        ({"a": 1, "b": 2, "c": 3}, "arguments: unexpected property 'c'"),
    ],
)
async def test_arguments_are_validated_against_a_verbatim_schema(
    era: str, arguments: dict[str, Any], problem: str
) -> None:
    server = Server("ts-port")
    seen: list[dict[str, Any]] = []

    @server.tool(input_schema=ADD)
    async def add(**args: Any) -> float:
        seen.append(args)
        return float(args["a"] + args["b"])

    async with connected(server, era) as client:
        assert (await client.list_tools())[0].input_schema == ADD  # (published as written)
        refused = await client.call_tool("add", arguments)
        fine = await client.call_tool("add", {"a": 1, "b": 2})
    assert refused.is_error
    assert refused.text == f"Invalid arguments for tool 'add': {problem}"
    assert not fine.is_error
    assert seen == [{"a": 1, "b": 2}]  # (as sent: JSON values, unconverted)


async def test_a_parameter_the_schema_leaves_optional_is_asked_for(era: str) -> None:
    # The schema does not require 'b', the function does: answered as invalid
    # arguments, not as the function's TypeError ("internal error").
    server = Server("loose")
    loose = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}}

    @server.tool(input_schema=loose)
    def pair(a: int, b: Any, c: int = 0) -> str:
        return f"{a} {b} {c}"

    async with connected(server, era) as client:
        missing = await client.call_tool("pair", {"a": 1})
        given = await client.call_tool("pair", {"a": 1, "b": "x"})
    assert missing.is_error
    assert missing.text == "Invalid arguments for tool 'pair': missing ['b']"
    assert given.text == "1 x 0"


async def test_an_argument_the_schema_allows_but_the_function_does_not_take_is_refused(
    era: str,
) -> None:
    # A loose schema (no additionalProperties: false) lets 'z' through; the function has
    # no 'z' (nor **kwargs): invalid arguments, not the function's TypeError.
    server = Server("loose")
    ran: list[int] = []

    @server.tool(input_schema={"type": "object", "properties": {"a": {"type": "integer"}}})
    def one(a: int) -> str:
        ran.append(a)
        return str(a)

    async with connected(server, era) as client:
        unknown = await client.call_tool("one", {"a": 1, "z": 2})
    assert unknown.is_error
    assert unknown.text == "Invalid arguments for tool 'one': unknown ['z']"
    assert ran == []


async def test_a_tool_taking_the_context_is_called_with_the_schemas_arguments(era: str) -> None:
    # The Context parameter is the server's to pass: neither a missing argument nor an
    # unknown one the client could give.
    server = Server("ctx")
    closed = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": False,
    }

    @server.tool(input_schema=closed)
    async def echo(a: int, ctx: Context) -> str:
        return f"{a} {type(ctx).__name__}"

    async with connected(server, era) as client:
        called = await client.call_tool("echo", {"a": 1})
        smuggled = await client.call_tool("echo", {"a": 1, "ctx": 2})
    assert not called.is_error
    assert called.text == "1 Context"
    assert (
        smuggled.text == "Invalid arguments for tool 'echo': arguments: unexpected property 'ctx'"
    )


async def test_an_x_mcp_header_schema_is_validated_too(era: str) -> None:
    server = Server("headers")
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"],
    }

    @server.tool(input_schema=schema)
    def where(region: str) -> str:
        return f"in {region}"

    async with connected(server, era) as client:
        tools = await client.list_tools()
        refused = await client.call_tool("where", {"region": 7})
        fine = await client.call_tool("where", {"region": "eu"})
    assert tools[0].input_schema == schema  # (the annotation still published)
    assert (
        refused.text
        == "Invalid arguments for tool 'where': arguments.region: expected string, got integer"
    )
    assert fine.text == "in eu"


async def test_a_schema_the_validator_cannot_use_is_served_unchecked_with_a_warning(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server("conditional")
    schema = {
        "type": "object",
        "properties": {"kind": {"type": "string"}, "size": {"type": "integer"}},
        "if": {"properties": {"kind": {"const": "box"}}},
        "then": {"required": ["size"]},
    }
    seen: list[dict[str, Any]] = []
    with caplog.at_level(logging.WARNING, logger="mcp_trio.server"):

        @server.tool(input_schema=schema)
        def ship(**args: Any) -> str:
            seen.append(args)
            return "ok"

    assert caplog.messages == [
        "tool 'ship': its inputSchema is published but arguments are not validated against"
        " it (the function must check them): #: unsupported JSON Schema keyword(s) 'if',"
        " 'then'; validate() implements: " + caplog.messages[0].rpartition("implements: ")[2]
    ]
    async with connected(server, era) as client:
        assert (await client.list_tools())[0].input_schema == schema
        result = await client.call_tool("ship", {"kind": 3})
    assert result.text == "ok"
    assert seen == [{"kind": 3}]


async def test_the_schema_checked_is_the_one_registered(era: str) -> None:
    # What the caller does with its dict after registration changes nothing.
    server = Server("copied")
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 3}},
    }
    server.add_tool(lambda **kw: "ran", name="t", input_schema=schema)
    schema["properties"]["n"]["maximum"] = 100
    async with connected(server, era) as client:
        result = await client.call_tool("t", {"n": 50})
    assert result.text == "Invalid arguments for tool 't': arguments.n: must be <= 3, got 50"


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        # basic/index.mdx: an unsupported dialect MUST be handled with an error ...
        (
            {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
            "unsupported JSON Schema dialect",
        ),
        # ... and a $ref that does not resolve SHOULD be rejected (nothing is fetched),
        # even beside a keyword the validator lacks.
        (
            {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}},
            "unsupported \\$ref 'https://example.com/a.json'",
        ),
        (
            {"type": "object", "if": {}, "properties": {"a": {"$ref": "#/$defs/gone"}}},
            "unresolvable \\$ref '#/\\$defs/gone'",
        ),
        (  # (the root's own $id is the base every $ref resolves against already)
            {"$id": "https://example.com/s", "type": "object", "if": {}, "$ref": "#/$defs/gone"},
            "unresolvable \\$ref '#/\\$defs/gone'",
        ),
    ],
)
def test_a_schema_of_another_dialect_or_with_a_dangling_ref_is_refused(
    schema: dict[str, Any], problem: str
) -> None:
    server = Server("refused")
    with pytest.raises(ValueError, match=f"^tool 'f': inputSchema .*{problem}"):

        @server.tool(input_schema=schema)
        def f(**args: Any) -> str:
            return "never"


def test_refs_the_validator_cannot_follow_are_left_to_its_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Valid JSON Schema: an anchor, and a $ref that resolves against a nested $id.
    anchored = {"type": "object", "properties": {"a": {"$ref": "#thing"}}}
    rebased = {
        "type": "object",
        "properties": {
            "a": {"$id": "https://example.com/a", "$defs": {"n": {}}, "$ref": "#/$defs/n"}
        },
    }
    server = Server("kept")
    with caplog.at_level(logging.WARNING, logger="mcp_trio.server"):
        for name, schema in (("anchored", anchored), ("rebased", rebased)):
            server.tool(name=name, input_schema=schema)(lambda **args: "ok")
    assert len(caplog.messages) == 2
    assert all("arguments are not validated" in m for m in caplog.messages)

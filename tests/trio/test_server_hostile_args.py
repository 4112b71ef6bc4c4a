"""Hostile input and awkward handlers never crash a :class:`Server` into -32603.

* Strings read as JSON (prompt arguments, URI template variables) are read strictly:
  ``NaN``, ``Infinity`` and ``1e999`` are no numbers, and nesting too deep for the
  validator is a problem with the input, so each is -32602.
* What a tool returns must be writable JSON: NaN, the infinities and integers beyond 64
  bits make an ``isError`` result, and a default of that kind is not published.
* A verbatim ``output_schema`` is checked when the tool is registered (``pattern`` is
  implemented; keywords the validator lacks are refused then, not on every call).
* A recursive return type in ``Annotated`` still publishes an object schema.
* A ``Context | None`` parameter receives the context.
* A verbatim ``input_schema`` with ``**kwargs`` takes any argument names.

Every published list and result is validated against the negotiated revision's schema.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Optional

import jsonschema
import pytest

from mcp_sansio import ErrorCode
from mcp_trio import Session
from mcp_trio._context import Context
from mcp_trio._server import Server
from mcp_trio._server_content import ToolResult

from .test_server import call, check, connect, error_of


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test runs once per era."""
    value: str = request.param
    return value


async def tools_by_name(client: Session) -> dict[str, Any]:
    result = await client.request("tools/list")
    check(client, "ListToolsResult", result)
    return {tool["name"]: tool for tool in result["tools"]}


@dataclasses.dataclass
class Node:
    """A tree."""

    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


def nested(depth: int) -> str:
    """A :class:`Node` ``depth`` levels deep, as JSON text (twice as deep in JSON)."""
    return '{"value":1,"children":[' * depth + '{"value":1}' + "]}" * depth


# ================================================================== strings read as JSON


def string_server() -> Server:
    server = Server("strings")

    @server.prompt()
    def measure(x: float, items: list[int] | None = None, tree: Node | None = None) -> str:
        return f"{x} {items} {tree is not None}"

    @server.resource("x://num/{v}")
    def number(v: float) -> str:
        return repr(v)

    @server.prompt()
    def order(order_id: int, ids: list[int] | None = None) -> str:
        return f"{order_id} {ids}"

    @server.resource("x://order/{order_id}")
    def get_order(order_id: int) -> str:
        return str(order_id)

    return server


@pytest.mark.parametrize("number", [2**64, -(2**70) - 1, 123456789012345678901234, 10**4000])
async def test_big_integer_strings_arrive_exact(era: str, number: int) -> None:
    async with connect(string_server(), era) as client:
        params = {"name": "order", "arguments": {"order_id": str(number), "ids": f"[{number}]"}}
        result = await client.request("prompts/get", params)
        check(client, "GetPromptResult", result)
        assert result["messages"][0]["content"]["text"] == f"{number} [{number}]"
        result = await client.request("resources/read", {"uri": f"x://order/{number}"})
        check(client, "ReadResourceResult", result)
        assert result["contents"][0]["text"] == str(number)


async def test_integer_strings_too_long_to_read_are_invalid_params(era: str) -> None:
    text = "9" * 10_000  # beyond sys.get_int_max_str_digits: stays text
    async with connect(string_server(), era) as client:
        params = {"name": "order", "arguments": {"order_id": text}}
        error = await error_of(client, "prompts/get", params)
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "arguments.order_id: expected integer, got string" in error.message
        error = await error_of(client, "resources/read", {"uri": "x://order/1.5"})
        assert error.code == ErrorCode.INVALID_PARAMS
        # (the text that was sent: no JSON number the user never wrote as one)
        assert "arguments.order_id: expected integer, got string" in error.message


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999", "nan", "inf"])
async def test_non_finite_strings_are_invalid_params(era: str, text: str) -> None:
    async with connect(string_server(), era) as client:
        error = await error_of(client, "prompts/get", {"name": "measure", "arguments": {"x": text}})
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "arguments.x: expected number, got string" in error.message
        error = await error_of(client, "resources/read", {"uri": f"x://num/{text}"})
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "arguments.v: expected number, got string" in error.message
        # Real numbers still are.
        result = await client.request("prompts/get", {"name": "measure", "arguments": {"x": "1.5"}})
        check(client, "GetPromptResult", result)
        result = await client.request("resources/read", {"uri": "x://num/-2e3"})
        check(client, "ReadResourceResult", result)
        assert result["contents"][0]["text"] == "-2000.0"


@pytest.mark.parametrize("text", ['["\\ud800"]', '{"\\udc00": 1}'])
async def test_lone_surrogates_in_strings_are_invalid_params(era: str, text: str) -> None:
    # The stdlib parser reads "\ud800" as a lone surrogate, which no UTF-8 answer holds.
    async with connect(string_server(), era) as client:
        params = {"name": "order", "arguments": {"order_id": "1", "ids": text}}
        error = await error_of(client, "prompts/get", params)
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "arguments.ids: expected array or null, got string" in error.message


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"items": "[" * 100_000}, "arguments.items: expected array or null, got string"),
        # Parsed by json.loads: deep, but within the interpreter's recursion limit.
        ({"items": "[" * 500 + "]" * 500}, "arguments.items[0]: expected integer"),
        ({"tree": nested(400)}, "arguments: nested too deeply to check"),
    ],
)
async def test_deeply_nested_strings_are_invalid_params(
    era: str, arguments: dict[str, str], problem: str
) -> None:
    async with connect(string_server(), era) as client:
        params = {"name": "measure", "arguments": {"x": "1", **arguments}}
        error = await error_of(client, "prompts/get", params)
        assert error.code == ErrorCode.INVALID_PARAMS
        assert problem in error.message
        # A reasonable depth is fine.
        params = {"name": "measure", "arguments": {"x": "1", "tree": nested(20)}}
        result = await client.request("prompts/get", params)
        check(client, "GetPromptResult", result)
        assert result["messages"][0]["content"]["text"] == "1.0 None True"


# ================================================================== numbers JSON cannot carry


def number_server() -> Server:
    server = Server("numbers")

    @server.tool()
    def real(kind: str) -> float:
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "ok": 1.5}[kind]

    @server.tool()
    def whole(n: int) -> int:
        return 1 << n if n >= 0 else -(1 << -n)

    @server.tool()
    def mapping(n: int) -> dict[str, int]:
        return {"n": 1 << n}

    @server.tool(output_schema=False)
    def text(kind: str) -> Any:
        return {"nan": {"v": math.nan}, "big": {"v": 2**64}, "ok": {"v": 2**64 - 1}}[kind]

    @server.tool(output_schema=False)
    def factorial(n: int) -> Any:
        return math.factorial(n)

    @server.tool(output_schema=False)
    def listing() -> Any:
        return [2**64, -(2**70), math.inf]

    @server.tool()
    def explicit() -> ToolResult:
        return ToolResult("big", structured_content={"v": 2**64})

    @server.resource("x://big")
    def big() -> dict[str, Any]:
        return {"id": 2**70, "avogadro_ish": 602214076000000000000000}

    @server.tool()
    def defaults(x: float = math.inf, y: float = -math.inf, z: int = 2**80, w: float = 0.5) -> str:
        return f"{x} {y} {z} {w}"

    return server


async def test_a_default_without_json_form_is_not_published(era: str) -> None:
    async with connect(number_server(), era) as client:
        tools = await tools_by_name(client)
        assert tools["defaults"]["inputSchema"]["properties"] == {
            "x": {"type": "number"},
            "y": {"type": "number"},
            "z": {"type": "integer"},
            "w": {"type": "number", "default": 0.5},
        }
        result = await call(client, "defaults")
        assert result["structuredContent"] == {"result": f"inf -inf {2**80} 0.5"}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("real", {"kind": "nan"}),
        ("real", {"kind": "inf"}),
        ("real", {"kind": "-inf"}),
        ("whole", {"n": 64}),
        ("whole", {"n": 70}),
        ("whole", {"n": -64}),
        ("mapping", {"n": 70}),
        ("explicit", {}),
    ],
)
async def test_results_without_json_form_are_tool_errors(
    era: str, tool: str, arguments: dict[str, Any]
) -> None:
    async with connect(number_server(), era) as client:
        result = await call(client, tool, **arguments)
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": f"Tool {tool!r} failed with an internal error"}
    ]
    assert "structuredContent" not in result


async def test_results_at_the_edges_of_json_numbers(era: str) -> None:
    async with connect(number_server(), era) as client:
        tools = await tools_by_name(client)
        results = {
            "real": await call(client, "real", kind="ok"),
            "whole": await call(client, "whole", n=-63),
            "mapping": await call(client, "mapping", n=63),
        }
        for name, result in results.items():
            assert not result.get("isError"), result
            jsonschema.validate(result["structuredContent"], tools[name]["outputSchema"])
        assert results["whole"]["structuredContent"] == {"result": -(2**63)}
        result = await call(client, "text", kind="ok")
        assert result["content"] == [{"type": "text", "text": f'{{"v":{2**64 - 1}}}'}]


@pytest.mark.parametrize(("kind", "text"), [("nan", '{"v": NaN}'), ("big", f'{{"v": {2**64}}}')])
async def test_a_mapping_without_output_schema_beyond_json_data_is_text_only(
    era: str, kind: str, text: str
) -> None:
    # No output schema promised structured content: the text alone carries the value.
    async with connect(number_server(), era) as client:
        result = await call(client, "text", kind=kind)
    assert not result.get("isError"), result
    assert "structuredContent" not in result
    assert [block["type"] for block in result["content"]] == ["text"]
    assert result["content"][0]["text"].replace(" ", "") == text.replace(" ", "")


async def test_numbers_sent_only_as_text_may_be_beyond_json_data(era: str) -> None:
    async with connect(number_server(), era) as client:
        result = await call(client, "factorial", n=30)
        assert not result.get("isError"), result
        assert result["content"] == [{"type": "text", "text": str(math.factorial(30))}]
        assert "structuredContent" not in result
        result = await call(client, "listing")
        assert not result.get("isError"), result
        text = f"[{2**64},{-(2**70)},Infinity]"  # what json.dumps writes
        assert result["content"] == [{"type": "text", "text": text}]
        result = await client.request("resources/read", {"uri": "x://big"})
        check(client, "ReadResourceResult", result)
        text = f'{{"id":{2**70},"avogadro_ish":602214076000000000000000}}'
        assert result["contents"] == [
            {"uri": "x://big", "mimeType": "application/json", "text": text}
        ]


# ================================================================== verbatim output schemas


async def test_output_schema_pattern_is_checked(era: str) -> None:
    server = Server("pattern")
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}

    @server.tool(output_schema=schema)
    def starts(s: str) -> dict[str, str]:
        return {"s": s}

    async with connect(server, era) as client:
        tools = await tools_by_name(client)
        assert tools["starts"]["outputSchema"] == schema
        result = await call(client, "starts", s="xabc")  # not at the start: search, not match
        assert result["isError"] is True
        assert "internal error" in result["content"][0]["text"]
        result = await call(client, "starts", s="abc")
        assert result["structuredContent"] == {"s": "abc"}


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"patternProperties": {"^x": {}}}, "#: unsupported JSON Schema keyword(s) 'pattern"),
        ({"properties": {"s": {"dependentSchemas": {}}}}, "#/properties/s: unsupported"),
        ({"if": {}, "then": {}, "else": {}}, "'else', 'if', 'then'"),
        ({"properties": {"a": {"type": "array", "contains": {}}}}, "'contains'"),
        ({"dependentRequired": {"a": ["b"]}}, "'dependentRequired'"),
        ({"$defs": {"X": {"unevaluatedProperties": False}}}, "#/$defs/X: unsupported"),
        ({"anyOf": [{"minContains": 1}]}, "#/anyOf/0: unsupported"),
        ({"properties": {"a": {"pattern": "("}}}, "#/properties/a"),
        ({"properties": {"a": {"pattern": "("}}}, "is not a regular expression"),
        ({"properties": {"a": {"$ref": "#/$defs/Gone"}}}, "unresolvable $ref"),
        ({"properties": {"a": {"$ref": "https://example.com/s"}}}, "only local"),
        ({"properties": {"a": {"$ref": "#Int"}}}, "no anchors"),  # it resolved to the root
        ({"prefixItems": [{}], "properties": {"a": {"$ref": "#/prefixItems/00"}}}, "unresolvable"),
        (
            {"prefixItems": [{}], "properties": {"a": {"$ref": "#/prefixItems/\u00b2"}}},
            "unresolvable",
        ),
        ({"properties": {"a": {"type": "float"}}}, "unknown type(s) ['float']"),
        ({"properties": {"a": 3}}, "a schema is an object or a boolean"),
        # basic/index.mdx: validate by the declared dialect; refuse one we do not have
        ({"$schema": "https://json-schema.org/draft/2019-09/schema"}, "dialect"),
        ({"properties": {"a": {"$schema": "urn:mine"}}}, "#/properties/a: unsupported"),
        ({"$schema": 7}, "unsupported JSON Schema dialect 7"),
    ],
)
def test_an_output_schema_the_validator_cannot_use_is_refused_at_registration(
    schema: dict[str, Any], where: str
) -> None:
    server = Server("refused")
    with pytest.raises(ValueError, match="tool 'bad': outputSchema") as info:
        server.add_tool(lambda: {}, name="bad", output_schema={"type": "object", **schema})
    assert where in str(info.value)
    with pytest.raises(ValueError, match="tool 'bad': outputSchema"):

        @server.tool("bad", output_schema={"type": "object", **schema})
        def bad() -> dict[str, Any]:
            return {}

    assert server.add_tool(lambda: {}, name="bad") == "bad"  # the name is still free


# ================================================================== recursive return types


async def test_an_annotated_recursive_return_type_is_an_object_schema(era: str) -> None:
    server = Server("trees")

    @server.tool()
    def tree() -> Annotated[Node, "A tree"]:
        return Node(1, [Node(2, [Node(3)])])

    async with connect(server, era) as client:
        tools = await tools_by_name(client)
        schema = tools["tree"]["outputSchema"]
        assert schema == {
            "type": "object",
            "description": "A tree",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        }
        jsonschema.Draft202012Validator.check_schema(schema)
        result = await call(client, "tree")
        jsonschema.validate(result["structuredContent"], schema)
        assert result["structuredContent"]["children"][0]["children"][0]["value"] == 3


# ================================================================== optional contexts


async def test_an_optional_context_parameter_receives_the_context(era: str) -> None:
    server = Server("ctx")

    @server.tool()
    async def defaulted(x: int, ctx: Context | None = None) -> str:
        return f"{x} {type(ctx).__name__}"

    @server.tool()
    async def optional(x: int, ctx: Optional[Context]) -> str:  # noqa: UP045  # the old spelling
        return f"{x} {type(ctx).__name__}"

    @server.prompt()
    def prompt(ctx: Annotated[Context | None, "the context"] = None) -> str:
        return type(ctx).__name__

    async with connect(server, era) as client:
        tools = await tools_by_name(client)
        for name in ("defaulted", "optional"):
            assert tools[name]["inputSchema"]["properties"] == {"x": {"type": "integer"}}
            result = await call(client, name, x=1)
            assert result["structuredContent"] == {"result": "1 Context"}
        result = await client.request("prompts/get", {"name": "prompt"})
        check(client, "GetPromptResult", result)
        assert result["messages"][0]["content"]["text"] == "Context"


@pytest.mark.parametrize(
    "annotation",
    [
        "unresolved.Context | None",
        "None | unresolved.Context",
        "typing.Optional[unresolved.Context]",
        "'unresolved.Context'",
    ],
)
async def test_an_unresolvable_optional_context_goes_by_its_name(annotation: str) -> None:
    server = Server("ctx")

    async def tool(x: int, ctx: Any = None) -> str:
        return f"{x} {type(ctx).__name__}"

    tool.__annotations__ = {"x": "int", "ctx": annotation, "return": "str"}
    server.add_tool(tool)
    async with connect(server, "legacy") as client:
        tools = await tools_by_name(client)
        assert tools["tool"]["inputSchema"]["properties"] == {"x": {"type": "integer"}}
        result = await call(client, "tool", x=1)
    assert result["structuredContent"] == {"result": "1 Context"}


# ================================================================== verbatim input schemas


async def test_a_verbatim_input_schema_with_kwargs_takes_any_names(era: str) -> None:
    server = Server("verbatim")
    seen: list[dict[str, Any]] = []
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}}

    @server.tool(input_schema=schema)
    def custom(**arguments: Any) -> str:
        seen.append(arguments)
        return "ok"

    @server.tool(input_schema=schema)
    def mixed(a: int = 0, **rest: Any) -> str:
        seen.append({"a": a, **rest})
        return "ok"

    async with connect(server, era) as client:
        tools = await tools_by_name(client)
        assert tools["custom"]["inputSchema"] == schema
        for name in ("custom", "mixed"):
            result = await call(client, name, a=1, b=[2])
            assert result["structuredContent"] == {"result": "ok"}
            # With **kwargs the function takes any name (it checks its own arguments),
            # even the **kwargs parameter's own.
            result = await call(client, name, arguments=1, rest=2, c=3)
            assert result["structuredContent"] == {"result": "ok"}
    assert seen == [
        {"a": 1, "b": [2]},
        {"arguments": 1, "rest": 2, "c": 3},
        {"a": 1, "b": [2]},
        {"a": 0, "arguments": 1, "rest": 2, "c": 3},
    ]


@pytest.mark.parametrize("suffix", ["", "#"])
@pytest.mark.parametrize(
    "dialect",
    ["https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-07/schema"],
)
def test_the_dialects_the_validator_implements_may_be_declared(dialect: str, suffix: str) -> None:
    schema = {"$schema": dialect + suffix}
    server = Server("declared")
    assert server.add_tool(lambda: {}, name="ok", output_schema={"type": "object", **schema})


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "array", "items": {"type": "string", "x-mcp-header": "X"}},
        {"type": "number", "x-mcp-header": "N"},
        {"type": "string", "x-mcp-header": "bad name"},
    ],
    ids=["under-items", "number", "bad-name"],
)
def test_a_misplaced_header_annotation_is_refused_at_registration(prop: dict[str, Any]) -> None:
    # 2026-07-28 streamable-http#schema-extension: such an annotation makes the tool
    # invalid; it would otherwise be listed, and fail every call over modern HTTP.
    server = Server("refused")
    schema = {"type": "object", "properties": {"p": prop}}
    with pytest.raises(ValueError, match="tool 'bad': inputSchema x-mcp-header"):
        server.add_tool(lambda **kw: "", name="bad", input_schema=schema)
    assert server.add_tool(lambda **kw: "", name="bad") == "bad"  # the name is still free

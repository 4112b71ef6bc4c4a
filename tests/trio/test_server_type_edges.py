"""Return and parameter types at the edges of what ``Server`` maps to JSON.

* Content classes (``Image``, ``Audio``...) are content, never structured data: ``str``
  next to them is text (``str | Image``, ``list[str | Image]``), such a return type has no
  ``outputSchema``, and mixing them with data is refused when the tool is registered.
  ``InputRequiredResult`` in a return type is no part of the output.
* ``Literal[1, 2, 3]`` gives the function an ``int`` for ``2.0`` (a JSON integer), as a
  plain ``int`` parameter does.
* A typed resource template variable takes one spelling per value, so that one resource
  has one URI: ``notes://1`` only, not ``notes://1.0``, ``notes://%201``...
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, Literal

import pytest

from mcp_sansio import ErrorCode
from mcp_trio import (
    Audio,
    Client,
    Image,
    InputRequiredResult,
    McpError,
    Server,
    ToolResult,
)

from ..schema import validate
from .helpers import connected

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
IMAGE_BLOCK = {"type": "image", "data": "iVBORw0KGgoAAAAAAAAAAA==", "mimeType": "image/png"}


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test runs once per era."""
    value: str = request.param
    return value


def check(client: Client, name: str, value: Any) -> None:
    """Validate ``value`` as the schema type ``name`` of the negotiated revision."""
    validate(client.protocol_version, name, value)


async def tools_by_name(client: Client) -> dict[str, dict[str, Any]]:
    result = await client.request("tools/list")
    check(client, "ListToolsResult", result)
    return {tool["name"]: tool for tool in result["tools"]}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.request("tools/call", {"name": tool, "arguments": arguments})
    check(client, "CallToolResult", result)
    return result


# ------------------------------------------------------------------ content in unions


def content_server() -> Server:
    server = Server("content")

    @server.tool()
    def chart(render: bool) -> str | Image:
        """A chart, or a message when there is nothing to draw."""
        return Image(PNG, "image/png") if render else "no data"

    @server.tool()
    def gallery() -> list[str | Image]:
        return ["one chart:", Image(PNG, "image/png")]

    @server.tool()
    def maybe(render: bool) -> Image | str | None:
        return Image(PNG, "image/png") if render else None

    return server


async def test_str_or_image_has_no_output_schema(era: str) -> None:
    async with connected(content_server(), era) as client:
        tools = await tools_by_name(client)
    for name in ("chart", "gallery", "maybe"):
        assert "outputSchema" not in tools[name], name


async def test_str_or_image_returns_content_blocks(era: str) -> None:
    async with connected(content_server(), era) as client:
        await tools_by_name(client)  # the client checks results against what it lists
        image = await call(client, "chart", render=True)
        text = await call(client, "chart", render=False)
        gallery = await call(client, "gallery")
        nothing = await call(client, "maybe", render=False)
    assert image["content"] == [IMAGE_BLOCK]
    assert text["content"] == [{"type": "text", "text": "no data"}]
    assert gallery["content"] == [{"type": "text", "text": "one chart:"}, IMAGE_BLOCK]
    assert nothing["content"] == []
    for result in (image, text, gallery, nothing):
        assert "structuredContent" not in result


@dataclasses.dataclass
class Point:
    x: float
    y: float


def _returns(tp: Any) -> Callable[[], Any]:
    def tool() -> Any:
        raise AssertionError("never called")

    tool.__annotations__["return"] = tp
    return tool


@pytest.mark.parametrize(
    ("tp", "problem"),
    [
        (dict[str, int] | Image, "mixes MCP content with data (dict[str, int])"),
        (Point | Audio, "mixes MCP content with data (Point)"),
        (list[int | Image], "mixes MCP content with data (int)"),
        (list[Image | None], "mixes MCP content with data (None)"),
        (dict[str, Image], "Image is MCP content, not JSON data"),
        (list[list[Image]], "Image is MCP content, not JSON data"),
        (Point | list[Audio], "mixes MCP content with data (Point)"),
    ],
)
def test_content_mixed_with_data_is_refused_at_registration(tp: Any, problem: str) -> None:
    server = Server("mixed")
    with pytest.raises(TypeError, match="the return type of") as info:
        server.tool("mixed")(_returns(tp))
    assert problem in str(info.value)


async def test_content_is_never_sent_as_json_data(era: str) -> None:
    """No return type to go by: an image inside data has no JSON form (the tool fails)
    rather than going out as its Python fields."""
    server = Server("hidden")

    @server.tool()
    def report():  # type: ignore[no-untyped-def]  # (no annotation: decided by the value)
        return {"chart": Image(PNG, "image/png")}

    async with connected(server, era) as client:
        result = await call(client, "report")
    assert result["isError"] is True
    assert result["content"] == [
        {"type": "text", "text": "Tool 'report' failed with an internal error"}
    ]
    assert "structuredContent" not in result


async def test_data_or_a_spelled_out_result(era: str) -> None:
    """``Point | ToolResult``: data, or a result spelled out (an error, say). The output
    schema is the data's; a spelled-out result is sent as it is, and checked against it
    unless it is an error. Next to content (``str | ToolResult``) it stays content."""
    server = Server("either")

    @server.tool()
    def find(key: str) -> Point | ToolResult:
        if key == "missing":
            return ToolResult("no such key", is_error=True)
        if key == "spelled":
            return ToolResult("1, 2", structured_content={"x": 1.0, "y": 2.0})
        if key == "bare":
            return ToolResult(structured_content={"x": 3, "y": 4})
        return Point(1, 2)

    @server.tool()
    def note(loud: bool) -> str | ToolResult:
        return ToolResult("HEY") if loud else "hey"

    async with connected(server, era) as client:
        tools = await tools_by_name(client)
        found = await call(client, "find", key="k")
        spelled = await call(client, "find", key="spelled")
        missing = await call(client, "find", key="missing")
        bare = await call(client, "find", key="bare")
        loud = await call(client, "note", loud=True)
    assert tools["find"]["outputSchema"]["properties"] == {
        "x": {"type": "number"},
        "y": {"type": "number"},
    }
    assert "outputSchema" not in tools["note"]
    assert found["structuredContent"] == spelled["structuredContent"] == {"x": 1.0, "y": 2.0}
    assert missing["isError"] is True and missing["content"][0]["text"] == "no such key"
    # No content of its own: the structured content's JSON text is its block (tools.mdx:
    # "SHOULD also return the serialized JSON in a TextContent block").
    assert bare["content"] == [{"type": "text", "text": '{"x":3,"y":4}'}]
    assert loud["content"] == [{"type": "text", "text": "HEY"}]


async def test_input_required_result_is_no_part_of_the_output(era: str) -> None:
    server = Server("asks")

    @server.tool()
    def greet(who: str) -> str | InputRequiredResult:
        return f"hello {who}"

    @server.tool()
    def rich() -> ToolResult | InputRequiredResult:
        return ToolResult([Image(PNG, "image/png")])

    async with connected(server, era) as client:
        tools = await tools_by_name(client)
        greeting = await call(client, "greet", who="Ada")
        image = await call(client, "rich")
    if "outputSchema" in tools["greet"]:  # (none before 2025-06-18)
        assert tools["greet"]["outputSchema"] == {
            "type": "object",
            "properties": {"result": {"type": "string"}},
            "required": ["result"],
            "additionalProperties": False,
        }
        assert greeting["structuredContent"] == {"result": "hello Ada"}
    assert greeting["content"] == [{"type": "text", "text": "hello Ada"}]
    assert "outputSchema" not in tools["rich"]
    assert image["content"] == [IMAGE_BLOCK]


# ------------------------------------------------------------------ Literal parameters


async def test_integer_literal_takes_an_integral_float_as_int(era: str) -> None:
    server = Server("levels")

    @server.tool()
    def level(n: Literal[1, 2, 3], more: list[Literal[1, 2]] | None = None) -> str:
        return f"{type(n).__name__} {n!r} {more!r}"

    async with connected(server, era) as client:
        await tools_by_name(client)
        exact = await call(client, "level", n=2)
        integral = await call(client, "level", n=2.0, more=[1.0, 2])
        boolean = await call(client, "level", n=True)
    assert exact["content"] == [{"type": "text", "text": "int 2 None"}]
    assert integral["content"] == [{"type": "text", "text": "int 2 [1, 2]"}]
    assert boolean["isError"] is True
    assert "arguments.n: expected integer, got boolean" in boolean["content"][0]["text"]


# ------------------------------------------------------------------ template variables


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


def template_server() -> Server:
    server = Server("notes")

    @server.resource("notes://{id}")
    def note(id: int) -> str:
        return f"note {id!r}"

    @server.resource("flags://{on}")
    def flag(on: bool) -> str:
        return f"flag {on!r}"

    @server.resource("ratio://{x}")
    def ratio(x: float) -> str:
        return f"ratio {x!r}"

    @server.resource("sizes://{size}")
    def size(size: Size) -> str:
        return f"size {size.name}"

    @server.resource("levels://{n}")
    def level(n: Literal[1, 2, 3]) -> str:
        return f"level {n!r}"

    return server


async def read(client: Client, uri: str) -> str:
    result = await client.request("resources/read", {"uri": uri})
    check(client, "ReadResourceResult", result)
    [contents] = result["contents"]
    text: str = contents["text"]
    return text


async def refusal(client: Client, uri: str) -> str:
    with pytest.raises(McpError) as info:
        await client.request("resources/read", {"uri": uri})
    assert info.value.error.code == ErrorCode.INVALID_PARAMS, uri
    return info.value.error.message


# For each template: the spellings it takes (and what the function got), and the ones it
# refuses with the message any text gets (as ``notes://01`` always was: it is no JSON).
SPELLINGS: dict[str, tuple[dict[str, str], tuple[str, ...], str]] = {
    "notes": (
        {"1": "note 1", "0": "note 0", "-12": "note -12", "2" * 30: f"note {'2' * 30}"},
        ("01", "1.0", "1e0", "0.1e1", "-0", "%201", "1%20", "%0A1", "+1", "%20" + "2" * 30, "1.5"),
        "arguments.id: expected integer, got string",
    ),
    "flags": (
        {"true": "flag True", "false": "flag False"},
        ("%20true", "false%20", "True", "0", "null"),  # (JSON, but no boolean: text)
        "arguments.on: expected boolean, got string",
    ),
    "sizes": ({"2": "size LARGE"}, ("2.0", "%202"), "arguments.size: expected integer, got string"),
    "levels": ({"3": "level 3"}, ("3.0", "3e0"), "arguments.n: expected integer, got string"),
    # A float takes any JSON number spelling, as documented; no whitespace around it.
    "ratio": (
        {"1": "ratio 1.0", "1.0": "ratio 1.0", "2.5e-1": "ratio 0.25"},
        ("%201", "1.5%0A"),
        "arguments.x: expected number, got string",
    ),
}


@pytest.mark.parametrize("scheme", SPELLINGS)
async def test_template_variable_takes_one_spelling_per_value(era: str, scheme: str) -> None:
    taken, refused, problem = SPELLINGS[scheme]
    async with connected(template_server(), era) as client:
        for spelling, text in taken.items():
            assert await read(client, f"{scheme}://{spelling}") == text
        for spelling in refused:
            uri = f"{scheme}://{spelling}"
            assert await refusal(client, uri) == f"Invalid params: {uri}: {problem}"


async def test_prompt_arguments_take_any_json_spelling(era: str) -> None:
    """Prompt arguments are typed by people: ``"5.0"`` and ``" 5"`` are the int 5 (only
    URI template variables need one spelling per value)."""
    server = Server("prompts")

    @server.prompt()
    def count(n: int) -> str:
        return f"{n!r} {type(n).__name__}"

    async with connected(server, era) as client:
        for spelling in ("5", "5.0", " 5", "5e0"):
            result = await client.request(
                "prompts/get", {"name": "count", "arguments": {"n": spelling}}
            )
            assert result["messages"][0]["content"]["text"] == "5 int", spelling


async def test_prompt_arguments_that_do_not_fit_are_refused_as_the_text_sent(era: str) -> None:
    """A number, boolean or null read from the text that does not fit is not what the
    user sent: the message speaks of the string (``"0"`` for a bool said "got
    integer"). An array or object was written as JSON: what is wrong inside it is said."""
    server = Server("prompts")

    @server.prompt()
    def p(
        n: int = 0, flag: bool = False, mode: Literal["a", "b"] = "a", tags: list[str] | None = None
    ) -> str:
        return "ok"

    said = {
        "flag": ("0", "arguments.flag: expected boolean, got string"),
        "n": ("3.5", "arguments.n: expected integer, got string"),
        "mode": ("1", 'arguments.mode: expected one of "a", "b", got "1"'),
        "tags": ('["x", 1]', "arguments.tags[1]: expected string, got integer"),
    }
    async with connected(server, era) as client:
        for name, (text, problem) in said.items():
            with pytest.raises(McpError) as info:
                await client.request("prompts/get", {"name": "p", "arguments": {name: text}})
            assert info.value.error.message == f"Invalid arguments for prompt 'p': {problem}"

"""What a :class:`Server` emits must fit the negotiated revision, whatever its handlers do.

* Content a revision lacks is adapted (audio before 2025-03-26; resource links and
  structured output before 2025-06-18), so every result validates against that revision's
  schema.
* A :class:`ToolError`, :class:`McpError` or :class:`ResourceNotFound` raised inside a
  handler's own nursery (and so wrapped in an exception group) means what it means bare.
* ``ctx.elicit`` takes types whose schema shares a definition (an enum used twice).
* Resource template values are percent-decoded, so they are untrusted input.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from typing import Any

import pytest
import trio

from mcp_sansio import ErrorCode, ErrorData, RemoteProtocolError
from mcp_sansio import types as mcp_types
from mcp_sansio._json import loads
from mcp_trio import McpError, Session
from mcp_trio._client_common import sampling_params
from mcp_trio._context import Context
from mcp_trio._server import Server
from mcp_trio._server_content import (
    Audio,
    Message,
    ResourceLink,
    ToolError,
    ToolResult,
)
from mcp_trio._server_forms import form_spec, sampling_messages
from mcp_trio._server_rpc import ResourceNotFound

from ..schema import validate
from .test_server import connect
from .test_server_context import Asker, accept, text

WAV = b"RIFF\x00\x00\x00\x00WAVE"
WAV_B64 = base64.b64encode(WAV).decode()

LEGACY = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
NO_AUDIO = {"2024-11-05"}
NO_LINKS = {"2024-11-05", "2025-03-26"}


@pytest.fixture(params=[*LEGACY, "2026-07-28"])
def version(request: pytest.FixtureRequest) -> str:
    """Every revision: legacy ones pinned one at a time, and the modern one."""
    value: str = request.param
    return value


def pinned(server: Server, version: str) -> Any:
    if version == "2026-07-28":
        return connect(server, "modern")
    return connect(server, "legacy", supported_versions=(version,))


def negotiated(client: Session) -> str:
    assert client.handshake is not None
    return client.handshake.protocol_version


# ================================================================== content per revision


def content_server() -> Server:
    server = Server("content")
    link = ResourceLink("x://a", "a", title="The A", description="All about a")

    @server.tool()
    def audio() -> Audio:
        return Audio(WAV, "audio/wav", annotations={"priority": 0.5})

    @server.tool()
    def linked() -> ResourceLink:
        return link

    @server.tool()
    def mixed() -> ToolResult:
        return ToolResult(["see:", Audio(WAV, "audio/wav"), link])

    @server.tool(output_schema=False)
    def raw_blocks() -> list[Any]:
        return [
            {"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "x://b", "name": "b"},
        ]

    @server.tool()
    def typed_result() -> Any:
        return mcp_types.CallToolResult(
            content=[mcp_types.AudioContent(data=WAV_B64, mime_type="audio/wav")]
        )

    @server.prompt()
    def talk() -> list[Message]:
        return [Message.user(Audio(WAV, "audio/wav")), Message.assistant(link)]

    return server


def kinds(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["type"] for b in blocks]


def audio_kind(version: str) -> str:
    return "resource" if version in NO_AUDIO else "audio"


def link_kind(version: str) -> str:
    return "text" if version in NO_LINKS else "resource_link"


async def call_tool(client: Session, name: str) -> dict[str, Any]:
    result: dict[str, Any] = await client.request("tools/call", {"name": name, "arguments": {}})
    validate(negotiated(client), "CallToolResult", result)
    return result


async def test_tool_content_fits_every_revision(version: str) -> None:
    async with pinned(content_server(), version) as client:
        assert negotiated(client) == version
        audio = await call_tool(client, "audio")
        linked = await call_tool(client, "linked")
        mixed = await call_tool(client, "mixed")
        raw = await call_tool(client, "raw_blocks")
        typed = await call_tool(client, "typed_result")
    assert kinds(audio["content"]) == [audio_kind(version)]
    assert kinds(linked["content"]) == [link_kind(version)]
    assert kinds(mixed["content"]) == ["text", audio_kind(version), link_kind(version)]
    assert kinds(raw["content"]) == [audio_kind(version), link_kind(version)]
    assert kinds(typed["content"]) == [audio_kind(version)]
    if version in NO_AUDIO:
        # The audio itself still travels: an embedded blob with the audio's MIME type.
        (block,) = audio["content"]
        assert block["resource"]["blob"] == WAV_B64
        assert block["resource"]["mimeType"] == "audio/wav"
        assert block["annotations"] == {"priority": 0.5}
        assert typed["content"][0]["resource"]["uri"] == block["resource"]["uri"]
    if version in NO_LINKS:
        # The link becomes text naming it, so the model still learns where to look.
        (block,) = linked["content"]
        assert "x://a" in block["text"]
        assert "The A" in block["text"]
        assert "All about a" in block["text"]
        assert "x://b" in raw["content"][1]["text"]
    else:
        assert linked["content"] == [
            {
                "type": "resource_link",
                "uri": "x://a",
                "name": "a",
                "title": "The A",
                "description": "All about a",
            }
        ]


async def test_prompt_content_fits_every_revision(version: str) -> None:
    async with pinned(content_server(), version) as client:
        result = await client.request("prompts/get", {"name": "talk"})
        validate(version, "GetPromptResult", result)
    assert [m["content"]["type"] for m in result["messages"]] == [
        audio_kind(version),
        link_kind(version),
    ]


# ================================================================== data that looks like content


def lookalike_server() -> Server:
    server = Server("lookalikes")

    @server.tool()
    def record(kind: str):  # type: ignore[no-untyped-def]  # (no annotation: any value)
        return {"type": kind, "name": "widget", "price": 3}

    @server.tool()
    def records() -> Any:
        return [{"type": "text", "body": "hello"}]

    @server.prompt()
    def chat() -> list[Any]:
        return [{"role": "user", "content": "Summarize."}, {"role": "assistant", "content": "OK"}]

    @server.prompt()
    def system() -> list[Any]:
        return [{"role": "system", "content": "You are terse."}]

    return server


@pytest.mark.parametrize("kind", ["product", "text", "image", "audio", "resource", "resource_link"])
async def test_a_record_whose_type_names_a_content_type_is_data(version: str, kind: str) -> None:
    # A mapping is a raw content block only when it is one (the fields its type requires,
    # no others); a catalogue record {"type": "text", ...} went out as a broken block.
    structured = version not in NO_LINKS
    async with pinned(lookalike_server(), version) as client:
        one = await client.request("tools/call", {"name": "record", "arguments": {"kind": kind}})
        validate(version, "CallToolResult", one)
        many = await call_tool(client, "records")
    record = {"type": kind, "name": "widget", "price": 3}
    assert loads(text(one)) == record
    assert one.get("structuredContent") == (record if structured else None)
    assert loads(text(many)) == [{"type": "text", "body": "hello"}]


async def test_prompt_messages_are_checked_and_strings_are_text(version: str) -> None:
    async with pinned(lookalike_server(), version) as client:
        chat = await client.request("prompts/get", {"name": "chat"})
        validate(version, "GetPromptResult", chat)
        with pytest.raises(McpError):  # a role MCP does not have: the prompt fails
            await client.request("prompts/get", {"name": "system"})
    assert chat["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarize."}},
        {"role": "assistant", "content": {"type": "text", "text": "OK"}},
    ]


def test_message_roles_and_sampling_messages_are_checked() -> None:
    with pytest.raises(ValueError, match="role"):
        Message("system", "hello")  # type: ignore[arg-type]
    asked = sampling_messages(
        [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": ["4", {"type": "text", "text": "!"}]},
        ]
    )
    assert asked == [
        {"role": "user", "content": {"type": "text", "text": "What is 2+2?"}},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "!"}],
        },
    ]
    for message in asked:
        validate("2025-11-25", "SamplingMessage", message)
    with pytest.raises(TypeError, match="role"):
        sampling_messages([{"role": "system", "content": "Be terse."}])
    with pytest.raises(TypeError, match="content"):
        sampling_messages([{"role": "user", "content": 42}])


USE = {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}}
RESULT = {"type": "tool_result", "toolUseId": "c1", "content": [{"type": "text", "text": "18C"}]}
ASK = {"role": "user", "content": {"type": "text", "text": "Weather in Paris?"}}
USES = {"role": "assistant", "content": [USE]}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([ASK, USES, {"role": "user", "content": [RESULT]}], None),
        ([ASK, {"role": "assistant", "content": USE}, {"role": "user", "content": RESULT}], None),
        ([{"role": "user", "content": [{"type": "text", "text": "so:"}, RESULT]}], "mixes"),
        ([ASK, USES, ASK], "next message"),
        ([ASK, USES], "next message"),
        ([ASK, USES, {"role": "user", "content": [{**RESULT, "toolUseId": "c2"}]}], "next message"),
    ],
)
def test_sampling_messages_with_tools_keep_the_content_rules(
    messages: list[dict[str, Any]], problem: str | None
) -> None:
    # client/sampling.mdx, "Message Content Constraints": tool results stand alone, and
    # every tool use is answered by the next message. The server refuses to send what a
    # client would answer with -32602; our client answers it with -32602.
    params = {"messages": messages, "maxTokens": 5}
    if problem is None:
        assert sampling_messages(messages) == messages
        validate("2025-11-25", "CreateMessageRequestParams", params)
        assert sampling_params(params).max_tokens == 5
        return
    with pytest.raises(TypeError, match=problem):
        sampling_messages(messages)
    with pytest.raises(RemoteProtocolError, match=problem) as info:
        sampling_params(params)
    assert info.value.error_code == ErrorCode.INVALID_PARAMS


def test_a_resource_decorator_without_its_uri_is_refused() -> None:
    server = Server("bare")
    with pytest.raises(TypeError, match="needs the URI"):

        @server.resource  # type: ignore[arg-type]
        def note() -> str:
            return "text"


# ================================================================== structured output


def structured_server() -> Server:
    server = Server("structured")

    @server.tool()
    def number() -> int:
        return 3

    @server.tool()
    def mapping() -> Any:
        return {"a": 1}

    @server.tool()
    def only_structured() -> ToolResult:
        return ToolResult(structured_content={"b": [1, 2]})

    return server


async def test_structured_output_only_from_2025_06_18(version: str) -> None:
    structured = version not in NO_LINKS  # the same two revisions lack both
    async with pinned(structured_server(), version) as client:
        listed = await client.request("tools/list", {})
        validate(version, "ListToolsResult", listed)
        number = await call_tool(client, "number")
        mapping = await call_tool(client, "mapping")
        only = await call_tool(client, "only_structured")
    schemas = {t["name"]: "outputSchema" in t for t in listed["tools"]}
    assert schemas["number"] is structured
    assert text(number) == "3"
    assert ("structuredContent" in number) is structured
    assert ("structuredContent" in mapping) is structured
    assert text(mapping) == '{"a":1}'
    # tools.mdx: a tool that returns structured content SHOULD also return the serialized
    # JSON in a TextContent block; before 2025-06-18 that block is all there is.
    assert only["content"] == [{"type": "text", "text": '{"b":[1,2]}'}]
    if structured:
        assert only["structuredContent"] == {"b": [1, 2]}
    else:
        assert "structuredContent" not in only


# ================================================================== errors from a nursery


def nursery_server() -> Server:
    server = Server("nursery")

    async def run_all(*failures: BaseException) -> None:
        async def fail(exc: BaseException) -> None:
            raise exc

        async with trio.open_nursery() as nursery:
            for exc in failures:
                nursery.start_soon(fail, exc)

    @server.tool()
    async def jammed() -> str:
        await run_all(ToolError("the widget is jammed"))
        return "unreachable"

    @server.tool()
    async def two_jams() -> str:
        await run_all(ToolError("left jammed"), ToolError("right jammed"))
        return "unreachable"

    @server.tool()
    async def custom_error() -> str:
        await run_all(McpError.from_code(-32001, "custom", {"why": "because"}))
        return "unreachable"

    @server.tool()
    async def jam_and_bug() -> str:
        await run_all(ToolError("jammed"), ValueError("secret detail"))
        return "unreachable"

    @server.tool()
    async def two_mcp_errors() -> str:
        await run_all(McpError.from_code(-32001, "one"), McpError.from_code(-32001, "two"))
        return "unreachable"

    @server.prompt()
    async def refusing() -> str:
        await run_all(McpError.from_code(-32001, "no prompt for you"))
        return "unreachable"

    @server.resource("x://gone")
    async def gone() -> str:
        await run_all(ResourceNotFound("x://gone"))
        return "unreachable"

    return server


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_tool_errors_raised_in_the_tools_nursery(era: str) -> None:
    async with connect(nursery_server(), era) as client:
        version = negotiated(client)

        async def tool(name: str) -> dict[str, Any]:
            result: dict[str, Any] = await client.request(
                "tools/call", {"name": name, "arguments": {}}
            )
            validate(version, "CallToolResult", result)
            return result

        jammed = await tool("jammed")
        assert jammed["isError"] is True
        assert text(jammed) == "the widget is jammed"

        both = await tool("two_jams")
        assert both["isError"] is True
        assert set(text(both).split("; ")) == {"left jammed", "right jammed"}

        # Anything else in the group is a bug: a generic message, nothing leaked.
        for name in ("jam_and_bug", "two_mcp_errors"):
            bug = await tool(name)
            assert bug["isError"] is True
            assert text(bug) == f"Tool {name!r} failed with an internal error"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_mcp_errors_raised_in_a_handlers_nursery(era: str) -> None:
    async with connect(nursery_server(), era) as client:
        with pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "custom_error", "arguments": {}})
        assert (info.value.code, info.value.message) == (-32001, "custom")
        assert info.value.data == {"why": "because"}

        with pytest.raises(McpError) as info:
            await client.request("prompts/get", {"name": "refusing"})
        assert (info.value.code, info.value.message) == (-32001, "no prompt for you")


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_resource_not_found_raised_in_the_resources_nursery(era: str) -> None:
    async with connect(nursery_server(), era) as client:
        with pytest.raises(McpError) as info:
            await client.request("resources/read", {"uri": "x://gone"})
    expected = ErrorCode.RESOURCE_NOT_FOUND if era == "legacy" else ErrorCode.INVALID_PARAMS
    assert info.value.code == expected
    assert info.value.data == {"uri": "x://gone"}


# ================================================================== elicitation forms


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass
class Prefs:
    primary: Color
    secondary: Color
    accent: Color | None = None


@dataclasses.dataclass
class Node:
    name: str
    child: Node | None = None


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_elicit_a_type_that_shares_an_enum(era: str) -> None:
    server = Server("forms")

    @server.tool()
    async def choose(ctx: Context) -> str:
        answer = await ctx.elicit("Pick colours", Prefs)
        assert isinstance(answer.data, Prefs)
        return f"{answer.data.primary.value}/{answer.data.secondary.value}"

    asker = Asker(server, era, accept({"primary": "red", "secondary": "green"}))
    async with asker.connect() as client:
        result = await asker.call(client, "choose")
        version = negotiated(client)
    assert text(result) == "red/green"
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    validate(version, "ElicitRequest", message)
    schema = params["requestedSchema"]
    enum_field = {"type": "string", "enum": ["red", "green"]}
    assert schema["properties"] == {
        "primary": enum_field,
        "secondary": enum_field,
        "accent": enum_field,
    }
    assert sorted(schema["required"]) == ["primary", "secondary"]


def test_form_spec_checks_structure_not_text() -> None:
    # A type's shared definitions are inlined (above); a hand-written schema is sent as
    # written, so a structural $ref or $defs there is refused...
    shared = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/C"}},
        "$defs": {"C": {"type": "string", "enum": ["x", "y"]}},
    }
    with pytest.raises(TypeError, match="without \\$defs or \\$ref"):
        form_spec(shared)
    with pytest.raises(TypeError, match="without \\$defs or \\$ref"):
        form_spec({"type": "object", "properties": {"a": {"$ref": "#/x"}}})
    nested = {"type": "object", "properties": {"a": {"type": "string", "$defs": {}}}}
    with pytest.raises(TypeError, match="'a'"):
        form_spec(nested)
    # ...but text that merely mentions "$ref" is data, not a reference (it used to be
    # refused), and so is a field *named* "$ref".
    spec = form_spec(
        {
            "type": "object",
            "properties": {
                "n": {"type": "string", "title": "$ref", "description": 'see {"$ref": 1}'},
                "$ref": {"type": "string", "enum": ["$ref"], "default": "$ref"},
            },
        }
    )
    assert spec.schema["properties"]["n"]["title"] == "$ref"
    assert spec.schema["properties"]["$ref"]["enum"] == ["$ref"]
    # A recursive type cannot be a flat form.
    with pytest.raises(TypeError, match="recursive"):
        form_spec(Node)


@dataclasses.dataclass
class Described:
    """A form whose field's description mentions $ref."""

    colour: Color
    other: Color


def test_form_spec_inlines_a_types_shared_definitions() -> None:
    spec = form_spec(Described, protocol_version="2025-06-18")
    assert spec.schema["properties"] == {
        "colour": {"type": "string", "enum": ["red", "green"]},
        "other": {"type": "string", "enum": ["red", "green"]},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": spec.schema},
    }
    validate("2025-06-18", "ElicitRequest", message)


# ================================================================== template values


@pytest.mark.parametrize(
    "tail", ["..%2Fsecret.txt", "%2Fetc%2Fhostname", "..", "%2E%2E", "a%5Cb", "a%00b"]
)
async def test_a_template_value_is_one_segment(tail: str) -> None:
    # The security review's path traversal: file:///docs/{name} read "../secret.txt" from
    # ..%2Fsecret.txt. A {name} value is one path segment (the _uritemplate module
    # docstring), so the URI matches no template: "Resource not found", as for any other.
    server = Server("files")
    seen: list[str] = []

    @server.resource("file:///docs/{name}")
    def segment(name: str) -> str:
        seen.append(name)
        return "ok"

    async with connect(server, "legacy") as client:
        assert (await client.request("resources/read", {"uri": "file:///docs/a.txt"}))["contents"][
            0
        ]["text"] == "ok"
        with pytest.raises(McpError) as info:
            await client.request("resources/read", {"uri": "file:///docs/" + tail})
    assert info.value.code == ErrorCode.RESOURCE_NOT_FOUND
    assert seen == ["a.txt"]


async def test_reserved_template_values_are_decoded_so_handlers_must_check_them() -> None:
    # A URI no segment template takes falls through to later templates; {+path} spans
    # segments by design, so its value holds what the client sent, decoded.
    server = Server("files")
    seen: list[tuple[str, str]] = []

    @server.resource("x://seg/{name}")
    def segment(name: str) -> str:
        seen.append(("segment", name))
        return "ok"

    @server.resource("x://seg/{+path}")
    def spanning(path: str) -> str:
        seen.append(("path", path))
        return "ok"

    async with connect(server, "legacy") as client:
        for uri in ("x://seg/..%2F..%2Fetc", "x://seg/a"):
            result = await client.request("resources/read", {"uri": uri})
            validate(negotiated(client), "ReadResourceResult", result)
    assert seen == [("path", "../../etc"), ("segment", "a")]


async def test_an_error_whose_data_is_not_json_is_still_an_answer() -> None:
    # The request must get exactly one answer: the handler's error cannot be written,
    # so it is replaced by -32603 (it used to leave the client waiting forever).
    server = Server("odd-errors")

    @server.tool()
    def fails() -> str:
        raise McpError(ErrorData(code=-32000, message="boom", data={"ids": {1, 2}}))

    async with pinned(server, "2025-11-25") as client:
        with pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "fails", "arguments": {}})
        assert (info.value.code, info.value.message) == (-32603, "Internal error")
        assert (await client.request("ping")) == {}  # and the session goes on

"""The ``_meta`` a server author gives a tool, resource, template or prompt has keys of
the spec's form (basic/index.mdx#_meta: an optional prefix of dot-separated labels, each
starting with a letter and ending with a letter or digit, then ``/``; a name that begins
and ends with an alphanumeric), outside MCP's reserved namespace (a prefix whose second
label is ``modelcontextprotocol`` or ``mcp``): anything else is refused at registration,
naming the key and the rule.

The same rule holds for the ``_meta`` of what a handler returns (a ``ToolResult``'s, a
content block's, an embedded resource's, resource contents') and of the messages a
handler asks to sample: such a result is the handler's bug, which the client is told
as -32603 naming the key (not a tool error: no other call of the model's mends it), and
a sampling request is refused with ``ValueError`` before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ErrorCode, types
from mcp_trio import Context, McpError, ToolResult
from mcp_trio._client import open_client
from mcp_trio._server import Server

from .test_server import connect


def register(kind: str, meta: Any) -> None:
    server = Server("m")

    async def fn() -> str:
        return "x"

    if kind == "tool":
        server.tool(meta=meta)(fn)
    elif kind == "prompt":
        server.prompt(meta=meta)(fn)
    elif kind == "resource":
        server.resource("mem://r", meta=meta)(fn)
    else:

        async def tfn(id: str) -> str:
            return id

        server.resource("mem://r/{id}", meta=meta)(tfn)


KINDS = ["tool", "prompt", "resource", "template"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "key",
    [
        "k",
        "",
        "a.b_c-d",
        "com.example/",
        "com.example/k",
        "ui/resourceUri",
        "com.example.mcp/x",  # (the second label is "example": not reserved)
        "mcp/x",  # (one label: there is no second)
        "a1.b-2.c/x9",
        "progressToken",
        "traceparent",
    ],
)
def test_well_formed_meta_keys_are_accepted(kind: str, key: str) -> None:
    register(kind, {key: 1})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("bad key!", "has a malformed name"),
        ("-x", "has a malformed name"),
        ("x-", "has a malformed name"),
        ("com.example/_x", "has a malformed name"),
        ("a/b/c", "has a malformed prefix"),
        ("1abc.com/x", "has a malformed prefix"),
        ("/x", "has a malformed prefix"),
        ("a..b/x", "has a malformed prefix"),
        ("a-/x", "has a malformed prefix"),
        ("exa mple/x", "has a malformed prefix"),
        ("é.com/x", "has a malformed prefix"),
        ("io.modelcontextprotocol/x", "has a prefix reserved for MCP"),
        ("dev.mcp/x", "has a prefix reserved for MCP"),
        ("org.modelcontextprotocol.api/x", "has a prefix reserved for MCP"),
        ("com.MCP/x", "has a prefix reserved for MCP"),
    ],
)
def test_malformed_or_reserved_meta_keys_are_refused(kind: str, key: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        register(kind, {"com.example/ok": 1, key: 1})
    assert f"_meta key {key!r} {why}" in str(info.value)
    assert str(info.value).endswith("(basic/index.mdx#_meta)")


@pytest.mark.parametrize("kind", KINDS)
def test_meta_that_is_not_a_mapping_of_strings_is_refused(kind: str) -> None:
    with pytest.raises(TypeError, match="meta must be a mapping, not list"):
        register(kind, [("k", 1)])
    with pytest.raises(ValueError, match="_meta key 1 must be a string, not int"):
        register(kind, {1: 1})


# ---------------------------------------------------------------------- what handlers return

RESERVED = "io.modelcontextprotocol/x"
WHY = f"_meta key {RESERVED!r} has a prefix reserved for MCP"


def returning(value: Any) -> Server:
    """A server whose tool, prompt and resource return ``value`` (as each can)."""
    server = Server("m")

    @server.tool()
    async def tool() -> Any:
        return value

    @server.prompt()
    async def prompt() -> Any:
        return value

    @server.resource("mem://r")
    async def resource() -> Any:
        return value

    return server


BLOCK = {"type": "text", "text": "x", "_meta": {RESERVED: 1}}
EMBEDDED = {"type": "resource", "resource": {"uri": "mem://e", "text": "e", "_meta": {RESERVED: 1}}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(
    ("value", "where"),
    [
        (ToolResult("x", meta={RESERVED: 1}), "result"),
        (ToolResult(["ok", BLOCK]), "content[1]"),
        ([BLOCK], "content[0]"),
        (EMBEDDED, "content[0].resource"),
        (types.TextContent(text="x", meta={"bad key!": 1}), "content[0]"),
    ],
)
async def test_a_tool_result_with_such_a_key_is_an_internal_error(
    era: str, value: Any, where: str
) -> None:
    async with connect(returning(value), era) as client:
        with pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "tool", "arguments": {}})
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        message = info.value.message
        assert message.startswith(f"Tool 'tool' returned a result that cannot be sent: {where}: ")
        assert message.endswith("(basic/index.mdx#_meta)")
        assert (RESERVED in message) or ("'bad key!' has a malformed name" in message)
        # (the session goes on)
        assert (await client.request("tools/list"))["tools"][0]["name"] == "tool"


async def test_a_prompt_or_resource_with_such_a_key_is_an_internal_error() -> None:
    async with connect(
        returning(types.TextResourceContents(uri="mem://r", text="t", meta={RESERVED: 1})), "legacy"
    ) as client:
        with pytest.raises(McpError) as info:
            await client.request("resources/read", {"uri": "mem://r"})
        assert info.value.message == (
            f"Resource 'resource' returned a result that cannot be sent: contents[0]: {WHY}"
            " (its second label is 'modelcontextprotocol' or 'mcp'); use a prefix of your"
            " own, such as 'com.example/' (basic/index.mdx#_meta)"
        )
    async with connect(returning(BLOCK), "legacy") as client:
        with pytest.raises(McpError) as info:
            await client.request("prompts/get", {"name": "prompt"})
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert (
            f"Prompt 'prompt' returned a result that cannot be sent: messages[0].content: {WHY}"
            in info.value.message
        )


async def test_well_formed_keys_of_a_result_are_sent() -> None:
    meta = {"com.example/k": 1, "progressToken": 2, "com.example.mcp/x": 3}
    value = ToolResult([{"type": "text", "text": "x", "_meta": meta}], meta=meta)
    async with connect(returning(value), "legacy") as client:
        result = await client.request("tools/call", {"name": "tool", "arguments": {}})
    assert result["_meta"] == result["content"][0]["_meta"] == meta


async def test_sampling_messages_with_such_a_key_are_refused_before_sending() -> None:
    server = Server("m")
    seen: list[str] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        for messages in (
            [{"role": "user", "content": {"type": "text", "text": "x"}, "_meta": {RESERVED: 1}}],
            [{"role": "user", "content": BLOCK}],
        ):
            try:
                await ctx.sample(messages, max_tokens=1)
            except ValueError as exc:
                seen.append(str(exc))
        return "done"

    asked: list[Any] = []

    async def on_sampling(params: Any) -> dict[str, Any]:
        asked.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "y"}, "model": "m"}

    async with open_client(server, era="legacy", on_sampling=on_sampling) as client:
        assert (await client.call_tool("ask", {})).text == "done"
    assert [why.split(":")[0] for why in seen] == [
        "sampling messages[0]",
        "sampling messages[0].content",
    ]
    assert all(WHY in why for why in seen)
    assert asked == []

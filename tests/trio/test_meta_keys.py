"""The ``_meta`` a server author gives a tool, resource, template or prompt has keys of
the spec's form (basic/index.mdx#_meta: an optional prefix of dot-separated labels, each
starting with a letter and ending with a letter or digit, then ``/``; a name that begins
and ends with an alphanumeric), outside MCP's reserved namespace (a prefix whose second
label is ``modelcontextprotocol`` or ``mcp``): anything else is refused at registration,
naming the key and the rule.

In the ``_meta`` of what a handler returns (a ``ToolResult``'s, a content block's, an
embedded resource's, resource contents'), a malformed key is the handler's bug, which
the client is told as -32603 naming the key (not a tool error: no other call of the
model's mends it); a key of the reserved prefix is dropped with a warning (once per key
and handler), since a gateway relaying a downstream server's result passes on the
protocol's own keys (``io.modelcontextprotocol/serverInfo``), which the core sets
itself. The messages a handler asks to sample are held to the registration rule: a
sampling request with either is refused with ``ValueError`` before anything is sent."""

from __future__ import annotations

import copy
from typing import Any
from unittest.mock import ANY

import attrs
import pytest

from mcp_sansio import ErrorCode, types
from mcp_trio import Context, McpError, Message, ToolResult
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
BAD = "bad key!"
MALFORMED = f"_meta key {BAD!r} has a malformed name"


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


def block(meta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "text", "text": "x", "_meta": meta}


def embedded(meta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": "mem://e", "text": "e", "_meta": meta}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(
    ("value", "where"),
    [
        (ToolResult("x", meta={BAD: 1}), "result"),
        (ToolResult(["ok", block({BAD: 1})]), "content[1]"),
        ([block({RESERVED: 1, BAD: 1})], "content[0]"),  # (dropping mends no malformed key)
        (embedded({BAD: 1}), "content[0].resource"),
        (types.TextContent(text="x", meta={BAD: 1}), "content[0]"),
        ([{"type": "text", "text": "x", "_meta": [RESERVED]}], "content[0]"),
    ],
)
async def test_a_tool_result_with_a_malformed_key_is_an_internal_error(
    era: str, value: Any, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with connect(returning(value), era) as client:
        with pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "tool", "arguments": {}})
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        message = info.value.message
        assert message.startswith(f"Tool 'tool' returned a result that cannot be sent: {where}: ")
        assert (
            MALFORMED in message and message.endswith("(basic/index.mdx#_meta)")
        ) or message.endswith("_meta must be an object, not list")
        assert message in caplog.text  # (logged at ERROR, where the author looks)
        # (the session goes on)
        assert (await client.request("tools/list"))["tools"][0]["name"] == "tool"


async def test_a_prompt_or_resource_with_a_malformed_key_is_an_internal_error() -> None:
    async with connect(
        returning(types.TextResourceContents(uri="mem://r", text="t", meta={BAD: 1})), "legacy"
    ) as client:
        with pytest.raises(McpError) as info:
            await client.request("resources/read", {"uri": "mem://r"})
        assert info.value.message == (
            f"Resource 'resource' returned a result that cannot be sent: contents[0]: {MALFORMED}:"
            " it must begin and end with a letter or digit (letters, digits, '-', '_' and '.'"
            " between) (basic/index.mdx#_meta)"
        )
    async with connect(returning(block({BAD: 1})), "legacy") as client:
        with pytest.raises(McpError) as info:
            await client.request("prompts/get", {"name": "prompt"})
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert (
            f"Prompt 'prompt' returned a result that cannot be sent: messages[0].content: "
            f"{MALFORMED}" in info.value.message
        )


async def test_of_several_malformed_keys_the_first_in_the_result_is_named() -> None:
    # (A message's content comes before the next message, as in a sampling request's
    # refusal: one walk over both.)
    late = {"role": "user", "content": {"type": "text", "text": "y"}, "_meta": {"worse!": 1}}
    async with connect(returning([Message("user", block({BAD: 1})), late]), "legacy") as client:
        with pytest.raises(McpError) as info:
            await client.request("prompts/get", {"name": "prompt"})
    assert info.value.message.startswith(
        f"Prompt 'prompt' returned a result that cannot be sent: messages[0].content: {MALFORMED}"
    )


OWN = {"com.example/k": 1}
BOTH = {RESERVED: 1, "dev.mcp/y": 2, **OWN}


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(
    ("value", "path", "kept"),
    [
        (ToolResult("x", meta=BOTH), (), OWN),
        (ToolResult("x", meta={RESERVED: 1}), (), None),
        (ToolResult(["ok", block(BOTH)]), ("content", 1), OWN),
        ([block(BOTH)], ("content", 0), OWN),
        ([block({RESERVED: 1})], ("content", 0), None),
        (embedded(BOTH), ("content", 0, "resource"), OWN),
        (types.TextContent(text="x", meta=BOTH), ("content", 0), OWN),
    ],
)
async def test_reserved_keys_of_a_tool_result_are_dropped(
    era: str,
    value: Any,
    path: tuple[Any, ...],
    kept: dict[str, Any] | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = copy.deepcopy(value)
    async with connect(returning(value), era) as client:
        result = await client.request("tools/call", {"name": "tool", "arguments": {}})
    held = result
    for step in path:
        held = held[step]
    meta: Any = held.get("_meta")
    if not path and era == "modern":  # (the core's own key, set as on any result)
        assert meta.pop("io.modelcontextprotocol/serverInfo")["name"] == "m"
        meta = meta or None
    assert meta == kept  # (an emptied _meta goes)
    assert value == before  # (what the handler returned is not modified)
    assert f"whose _meta has the key {RESERVED!r}" in caplog.text


async def test_reserved_keys_of_a_prompt_or_resource_are_dropped() -> None:
    contents = types.TextResourceContents(uri="mem://r", text="t", meta=BOTH)
    async with connect(returning(contents), "legacy") as client:
        read = await client.request("resources/read", {"uri": "mem://r"})
    assert read["contents"][0]["_meta"] == OWN
    async with connect(returning(block(BOTH)), "modern") as client:
        got = await client.request("prompts/get", {"name": "prompt"})
    assert got["messages"][0]["content"]["_meta"] == OWN
    assert got["_meta"] == {"io.modelcontextprotocol/serverInfo": {"name": "m", "version": ANY}}


async def test_a_dropped_key_is_warned_of_once_per_key_and_handler(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = Server("m")

    @server.tool()
    async def one() -> ToolResult:
        return ToolResult([block(BOTH)], meta={RESERVED: 1})

    @server.tool()
    async def two() -> ToolResult:
        return ToolResult("x", meta={RESERVED: 1})

    async with connect(server, "modern") as client:
        for name in ("one", "one", "two", "one", "two"):
            await client.request("tools/call", {"name": name, "arguments": {}})
    warnings = [
        (r.levelname, r.getMessage().split(" returned")[0], r.args[1])  # type: ignore[index]
        for r in caplog.records
        if "reserved for MCP" in r.getMessage()
    ]
    assert warnings == [
        ("WARNING", "Tool 'one'", RESERVED),
        ("WARNING", "Tool 'one'", "dev.mcp/y"),
        ("WARNING", "Tool 'two'", RESERVED),
    ]


# A gateway: a tool that returns what a downstream server answered (its typed result,
# whose _meta carries the downstream's io.modelcontextprotocol/serverInfo in the modern
# era) relays it; the reserved keys it passes on are dropped, the core sets its own.


def downstream() -> Server:
    down = Server("down", version="1")

    @down.tool()
    async def hello() -> ToolResult:
        return ToolResult([block(OWN)], meta=OWN)

    return down


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("more", [False, True])
async def test_a_gateway_tool_relays_a_downstream_modern_result(era: str, more: bool) -> None:
    gateway = Server("up", version="2")

    @gateway.tool()
    async def relay() -> Any:
        async with open_client(downstream(), era="modern") as down:
            out = await down.call_tool("hello", {})
        result: Any = out.result
        assert result.meta["io.modelcontextprotocol/serverInfo"]["name"] == "down"
        if more:  # (and other keys of MCP's, on the result and on its content)
            content = [attrs.evolve(b, meta={**b.meta, RESERVED: 1}) for b in result.content]
            meta = {**result.meta, RESERVED: 2, "dev.mcp/y": 3}
            result = attrs.evolve(result, content=content, meta=meta)
        return result

    async with connect(gateway, era) as client:
        result = await client.request("tools/call", {"name": "relay", "arguments": {}})
    assert result["content"] == [block(OWN)]
    own = {"io.modelcontextprotocol/serverInfo": {"name": "up", "version": "2"}}
    assert result["_meta"] == {**(own if era == "modern" else {}), **OWN}


async def test_sampling_messages_with_such_a_key_are_refused_before_sending() -> None:
    server = Server("m")
    seen: list[str] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        for messages in (
            [{"role": "user", "content": {"type": "text", "text": "x"}, "_meta": {RESERVED: 1}}],
            [{"role": "user", "content": block({RESERVED: 1})}],
            [{"role": "user", "content": [{"type": "text", "text": "x"}, block({RESERVED: 1})]}],
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
        "sampling messages[0].content[1]",  # (a list of blocks, each walked)
    ]
    assert all(WHY in why for why in seen)
    assert asked == []

"""The user-facing server: tools, resources, prompts and completion, in both eras.

Every test talks to a :class:`Server` through an in-memory client session, once per era
(``era`` fixture), and checks what it produces against the official schema of the
negotiated revision.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import logging
import threading
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, cast

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorCode, LocalProtocolError, ProgressReceived
from mcp_sansio import types as mcp_types
from mcp_trio import EraChoice, Handlers, McpError, NotificationContext, Session
from mcp_trio._context import Context
from mcp_trio._jsonschema import Description
from mcp_trio._server import Server
from mcp_trio._server_content import (
    Audio,
    Completion,
    EmbeddedResource,
    Image,
    Message,
    ResourceLink,
    ToolError,
    ToolResult,
)
from mcp_trio._server_rpc import CompletionRequest, ResourceNotFound

from ..schema import validate

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


# ------------------------------------------------------------------ shared helpers


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test runs once per era."""
    value: str = request.param
    return value


def check(client: Session, name: str, value: Any) -> None:
    """Validate ``value`` as the schema type ``name`` of the negotiated revision."""
    assert client.handshake is not None
    validate(client.handshake.protocol_version, name, value)


class Inbox:
    """Client notification handlers that collect into a channel."""

    def __init__(self, *methods: str) -> None:
        self.handlers = Handlers()
        self._send, self._receive = trio.open_memory_channel[NotificationContext](64)
        for method in methods:
            self.handlers.set_notification_handler(method, self._collect)

    async def _collect(self, ctx: NotificationContext) -> None:
        await self._send.send(ctx)

    async def next(self) -> NotificationContext:
        with trio.fail_after(5):
            return await self._receive.receive()

    async def assert_empty(self) -> None:
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.WouldBlock):
            self._receive.receive_nowait()


@asynccontextmanager
async def connect(
    server: Server, era: str, *, handlers: Handlers | None = None, **options: Any
) -> AsyncGenerator[Session]:
    """A client of ``server`` in ``era``."""
    options.setdefault("implementation", {"name": "test-client", "version": "1"})
    with trio.fail_after(10):
        async with server.connect_in_memory(
            client_handlers=handlers, era=cast(EraChoice, era), **options
        ) as c:
            yield c


async def call(client: Session, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.request("tools/call", {"name": name, "arguments": arguments})
    check(client, "CallToolResult", result)
    return result


async def error_of(client: Session, method: str, params: dict[str, Any]) -> McpError:
    with pytest.raises(McpError) as info:
        await client.request(method, params)
    return info.value


# ------------------------------------------------------------------ a server to test


@dataclasses.dataclass
class Point:
    """A point."""

    x: float
    y: float


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


def make_server(**kwargs: Any) -> Server:
    server = Server("test-server", "2.0", instructions="Be nice.", **kwargs)

    @server.tool(
        title="Adder",
        annotations=mcp_types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        icons=[{"src": "https://example.com/add.png", "mimeType": "image/png"}],
    )
    async def add(a: int, b: Annotated[int, Description("The second term")] = 2) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def midpoint(p: Point, q: Point) -> Point:
        """The point halfway between two points."""
        return Point((p.x + q.x) / 2, (p.y + q.y) / 2)

    @server.tool(annotations={"destructiveHint": False})
    def where() -> str:
        """The thread it runs in."""
        return "main" if threading.current_thread() is threading.main_thread() else "worker"

    @server.tool
    async def fail(kind: str) -> None:
        if kind == "tool":
            raise ToolError("the frobnicator is offline")
        if kind == "protocol":
            raise McpError.from_code(-32001, "custom failure")
        raise RuntimeError("secret internal detail")

    return server


# ------------------------------------------------------------------ tools


async def test_tools_list_schemas_in_registration_order(era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await client.request("tools/list")
    check(client, "ListToolsResult", result)
    tools = result["tools"]
    assert [t["name"] for t in tools] == ["add", "midpoint", "where", "fail"]
    add = tools[0]
    assert add["title"] == "Adder"
    assert add["description"] == "Add two integers."
    assert add["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    assert add["icons"] == [{"src": "https://example.com/add.png", "mimeType": "image/png"}]
    assert add["inputSchema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer", "description": "The second term", "default": 2},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert add["outputSchema"]["properties"] == {"result": {"type": "integer"}}
    assert tools[1]["outputSchema"]["required"] == ["x", "y"]
    assert "outputSchema" not in tools[3]
    assert tools[2]["inputSchema"] == {"type": "object", "additionalProperties": False}


async def test_structured_output(era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await call(client, "add", a=40)
        assert result["structuredContent"] == {"result": 42}
        assert result["content"] == [{"type": "text", "text": "42"}]
        assert not result.get("isError")
        result = await call(client, "midpoint", p={"x": 0, "y": 0}, q={"x": 2, "y": 4})
        assert result["structuredContent"] == {"x": 1.0, "y": 2.0}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"a": "one"}, "arguments.a: expected integer, got string"),
        ({}, "'a'"),
        ({"a": 1, "c": 3}, "'c'"),
        ({"a": 1.5}, "arguments.a"),
    ],
)
async def test_invalid_arguments_are_a_tool_error(
    era: str, arguments: dict[str, Any], problem: str
) -> None:
    ran = False
    server = Server("s")

    @server.tool()
    async def add(a: int) -> int:
        nonlocal ran
        ran = True
        return a

    async with connect(server, era) as client:
        result = await call(client, "add", **arguments)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("Invalid arguments for tool 'add': ")
    assert problem in result["content"][0]["text"]
    assert not ran  # validated before the handler runs


async def test_unknown_tool_is_invalid_params(era: str) -> None:
    async with connect(make_server(), era) as client:
        error = await error_of(client, "tools/call", {"name": "nope", "arguments": {}})
        assert error.code == ErrorCode.INVALID_PARAMS
        assert error.message == "Unknown tool: nope"
        error = await error_of(client, "tools/call", {"name": "add", "arguments": [1]})
        assert error.code == ErrorCode.INVALID_PARAMS


async def test_null_arguments_are_invalid_params(era: str) -> None:
    """``arguments`` is an object when present (CallToolRequest, GetPromptRequest, and
    CompleteRequest's ``context``): ``null`` is a malformed request, -32602, and the
    handler does not run; only an absent ``arguments`` means none."""
    server = Server("nulls")
    ran: list[str] = []

    @server.tool()
    def hello(name: str = "world") -> str:
        ran.append(name)
        return f"hello {name}"

    @server.prompt()
    def greet(tone: Literal["warm", "cold"] = "warm") -> str:
        ran.append(tone)
        return f"a {tone} greeting"

    complete: dict[str, Any] = {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "tone", "value": "w"},
    }
    async with connect(server, era) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("tools/call", {"name": "hello", "arguments": None}, "arguments must be an object"),
            ("prompts/get", {"name": "greet", "arguments": None}, "arguments must be an object"),
            (
                "completion/complete",
                {**complete, "context": {"arguments": None}},
                "context.arguments must be an object",
            ),
        ]
        for method, params, message in cases:
            error = await error_of(client, method, params)
            assert error.code == ErrorCode.INVALID_PARAMS
            assert message in error.message
        assert not ran
        result = await client.request("tools/call", {"name": "hello"})
        check(client, "CallToolResult", result)
        assert result["structuredContent"] == {"result": "hello world"}
        result = await client.request("prompts/get", {"name": "greet"})
        check(client, "GetPromptResult", result)
        contexts: list[dict[str, Any]] = [{}, {"context": {}}]
        for context in contexts:
            result = await client.request("completion/complete", {**complete, **context})
            assert result["completion"]["values"] == ["warm"]
    assert ran == ["world", "warm"]


async def test_sync_tools_run_in_a_worker_thread(era: str) -> None:
    async with connect(make_server(), era) as client:
        result = await call(client, "where")
    assert result["structuredContent"] == {"result": "worker"}


async def test_tool_errors(era: str, caplog: pytest.LogCaptureFixture) -> None:
    async with connect(make_server(), era) as client:
        result = await call(client, "fail", kind="tool")
        assert result == {
            **result,
            "content": [{"type": "text", "text": "the frobnicator is offline"}],
            "isError": True,
        }
        with caplog.at_level(logging.ERROR, logger="mcp_trio.server"):
            result = await call(client, "fail", kind="crash")
        assert result["isError"] is True
        assert "secret" not in result["content"][0]["text"]
        assert "internal error" in result["content"][0]["text"]
        assert "secret internal detail" in caplog.text
        error = await error_of(
            client, "tools/call", {"name": "fail", "arguments": {"kind": "protocol"}}
        )
        assert (error.code, error.message) == (-32001, "custom failure")


def content_server() -> Server:
    server = Server("content")

    @server.tool(output_schema=False)
    async def blocks(kind: str) -> Any:
        values: dict[str, Any] = {
            "text": "plain",
            "png": PNG,
            "image": Image(b"GIF89a...", "image/gif", annotations={"priority": 0.5}),
            "audio": Audio(b"RIFF", "audio/wav"),
            "embedded-text": EmbeddedResource("file:///a.txt", "hello", "text/plain"),
            "embedded-blob": EmbeddedResource("file:///a.bin", b"\x00\x01"),
            "link": ResourceLink("file:///a.txt", "a.txt", mime_type="text/plain"),
            "typed": mcp_types.TextContent(text="typed"),
            "raw": {"type": "text", "text": "raw"},
            "list": ["one", Image(PNG, "image/png")],
            "none": None,
            "dict": {"answer": 42},
            "number": 7,
            "result": ToolResult(["partial"], structured_content={"n": 1}, is_error=True),
            "typed-result": mcp_types.CallToolResult(
                content=[mcp_types.TextContent(text="t")], is_error=False
            ),
            "bad-bytes": b"not an image",
        }
        return values[kind]

    return server


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("text", [{"type": "text", "text": "plain"}]),
        (
            "png",
            [{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}],
        ),
        (
            "image",
            [
                {
                    "type": "image",
                    "data": base64.b64encode(b"GIF89a...").decode(),
                    "mimeType": "image/gif",
                    "annotations": {"priority": 0.5},
                }
            ],
        ),
        ("audio", [{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]),
        (
            "embedded-text",
            [
                {
                    "type": "resource",
                    "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"},
                }
            ],
        ),
        (
            "embedded-blob",
            [
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///a.bin",
                        "mimeType": "application/octet-stream",
                        "blob": "AAE=",
                    },
                }
            ],
        ),
        (
            "link",
            [
                {
                    "type": "resource_link",
                    "uri": "file:///a.txt",
                    "name": "a.txt",
                    "mimeType": "text/plain",
                }
            ],
        ),
        ("typed", [{"type": "text", "text": "typed"}]),
        ("raw", [{"type": "text", "text": "raw"}]),
        ("none", []),
        ("number", [{"type": "text", "text": "7"}]),
    ],
)
async def test_content_types(era: str, kind: str, content: list[dict[str, Any]]) -> None:
    async with connect(content_server(), era) as client:
        result = await call(client, "blocks", kind=kind)
    assert result["content"] == content
    assert "structuredContent" not in result
    assert not result.get("isError")


async def test_other_results(era: str, caplog: pytest.LogCaptureFixture) -> None:
    async with connect(content_server(), era) as client:
        tools = (await client.request("tools/list"))["tools"]
        assert all("outputSchema" not in t for t in tools)
        result = await call(client, "blocks", kind="list")
        assert [b["type"] for b in result["content"]] == ["text", "image"]
        result = await call(client, "blocks", kind="dict")
        assert result["structuredContent"] == {"answer": 42}
        assert result["content"] == [{"type": "text", "text": '{"answer":42}'}]
        result = await call(client, "blocks", kind="result")
        assert (result["isError"], result["structuredContent"]) == (True, {"n": 1})
        result = await call(client, "blocks", kind="typed-result")
        assert result["content"] == [{"type": "text", "text": "t"}]
        with caplog.at_level(logging.ERROR, logger="mcp_trio.server"):
            result = await call(client, "blocks", kind="bad-bytes")
        assert result["isError"] is True
        assert "PNG" in caplog.text


async def test_output_that_breaks_the_schema_is_an_internal_error(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server("s")

    @server.tool()
    async def liar() -> int:
        return "not a number"  # type: ignore[return-value]

    @server.tool(output_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    async def explicit(n: int) -> Any:
        return {"n": n}

    async with connect(server, era) as client:
        with caplog.at_level(logging.ERROR, logger="mcp_trio.server"):
            result = await call(client, "liar")
        assert result["isError"] is True
        assert "structuredContent.result" in caplog.text
        tools = (await client.request("tools/list"))["tools"]
        assert tools[1]["outputSchema"]["properties"] == {"n": {"type": "integer"}}
        assert (await call(client, "explicit", n=3))["structuredContent"] == {"n": 3}


async def test_a_spelled_out_result_must_fit_the_output_schema_too(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    # tools.mdx: with an output schema, servers MUST provide structured results that
    # conform to it; a ToolResult (or typed CallToolResult) is checked like a value.
    server = Server("s")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    @server.tool(output_schema=schema)
    async def spelled(what: str) -> Any:
        if what == "good":
            return ToolResult(["3"], structured_content={"n": 3})
        if what == "wrong":
            return ToolResult(["x"], structured_content={"n": "not an int"})
        if what == "failed":
            return ToolResult(["it broke"], is_error=True)  # an error needs none
        return ToolResult(["no structure"])

    async with connect(server, era) as client:
        assert (await call(client, "spelled", what="good"))["structuredContent"] == {"n": 3}
        assert (await call(client, "spelled", what="failed"))["content"][0]["text"] == "it broke"
        with caplog.at_level(logging.ERROR, logger="mcp_trio.server"):
            wrong = await call(client, "spelled", what="wrong")
            missing = await call(client, "spelled", what="missing")
    assert wrong["isError"] is True and "structuredContent" not in wrong
    assert missing["isError"] is True and "structuredContent" not in missing
    assert "structuredContent.n" in caplog.text and "needs structured content" in caplog.text


async def test_progress(era: str) -> None:
    # (every report: the coalescing of reports that come too fast is in test_rate_limits)
    server = Server("s", progress_interval=None)

    @server.tool()
    async def work(steps: int, ctx: Context) -> str:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return "done"

    seen: list[ProgressReceived] = []

    async def on_progress(event: ProgressReceived) -> None:
        seen.append(event)

    async with connect(server, era) as client:
        params = {"name": "work", "arguments": {"steps": 3}}
        result = await client.request("tools/call", params, on_progress=on_progress)
        assert result["structuredContent"] == {"result": "done"}
        # no progress token: nothing is sent, the tool is none the wiser
        assert (await call(client, "work", steps=2))["structuredContent"] == {"result": "done"}
    assert [(e.progress, e.total, e.message) for e in seen] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]


async def test_logging_is_filtered_per_era(era: str) -> None:
    server = Server("s")

    @server.tool()
    async def chatty(ctx: Context) -> list[bool]:
        return [
            await ctx.debug("d"),
            await ctx.info({"detail": 1}),
            await ctx.warning("w", logger="mine"),
            await ctx.error("e"),
        ]

    inbox = Inbox("notifications/message")
    options = {"log_level": "warning"} if era == "modern" else {}
    async with connect(server, era, handlers=inbox.handlers, **options) as client:
        if era == "legacy":
            await client.request("logging/setLevel", {"level": "warning"})
        result = await call(client, "chatty")
        assert result["structuredContent"] == {"result": [False, False, True, True]}
        first, second = await inbox.next(), await inbox.next()
        await inbox.assert_empty()
    assert first.params == {"level": "warning", "data": "w", "logger": "mine"}
    assert second.params == {"level": "error", "data": "e"}


async def test_client_cancels_a_running_tool(era: str) -> None:
    server = Server("s")
    started, stopped = trio.Event(), trio.Event()

    @server.tool()
    async def forever() -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async with connect(server, era) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, client, "forever")
            await started.wait()
            nursery.cancel_scope.cancel()
        with trio.fail_after(5):
            await stopped.wait()
        # the session goes on
        assert (await client.request("tools/list"))["tools"][0]["name"] == "forever"


def test_registration_errors() -> None:
    server = make_server()
    with pytest.raises(ValueError, match="already registered"):
        server.add_tool(lambda: None, name="add")
    with pytest.raises(ValueError, match="tool name"):
        server.add_tool(lambda: None, name="has space")
    with pytest.raises(TypeError, match="parameter 'x'"):

        @server.tool()
        def bad(x: complex) -> None: ...

    with pytest.raises(ValueError, match="object schema"):
        server.add_tool(lambda: None, name="o", output_schema={"type": "string"})
    server.remove_tool("add")
    with pytest.raises(KeyError):
        server.remove_tool("add")


# ------------------------------------------------------------------ resources


def resource_server(page_size: int = 50) -> Server:
    server = Server("resources", page_size=page_size)

    @server.resource("config://app", mime_type="application/toml", description="The config.")
    def config() -> str:
        return "debug = true"

    @server.resource("file:///logo.png", mime_type="image/png")
    async def logo() -> bytes:
        return PNG

    @server.resource("data://numbers")
    async def numbers() -> list[int]:
        return [1, 2, 3]

    @server.resource("users://{user_id}/profile", title="A user's profile")
    async def profile(user_id: int) -> dict[str, Any]:
        if user_id > 100:
            raise ResourceNotFound(f"users://{user_id}/profile")
        return {"id": user_id}

    @server.resource("search://{+path}{?q,limit}")
    async def search(path: str, q: str = "", limit: int = 10) -> str:
        return f"{path}|{q}|{limit}"

    @server.resource("multi://both")
    async def both() -> list[mcp_types.TextResourceContents | mcp_types.BlobResourceContents]:
        return [
            mcp_types.TextResourceContents(uri="multi://both/a", text="a"),
            mcp_types.BlobResourceContents(uri="multi://both/b", blob="AA=="),
        ]

    return server


async def read(client: Session, uri: str) -> list[dict[str, Any]]:
    result = await client.request("resources/read", {"uri": uri})
    check(client, "ReadResourceResult", result)
    contents: list[dict[str, Any]] = result["contents"]
    return contents


async def test_read_resources(era: str) -> None:
    async with connect(resource_server(), era) as client:
        assert await read(client, "config://app") == [
            {"uri": "config://app", "mimeType": "application/toml", "text": "debug = true"}
        ]
        assert await read(client, "file:///logo.png") == [
            {
                "uri": "file:///logo.png",
                "mimeType": "image/png",
                "blob": base64.b64encode(PNG).decode(),
            }
        ]
        assert await read(client, "data://numbers") == [
            {"uri": "data://numbers", "mimeType": "application/json", "text": "[1,2,3]"}
        ]
        assert await read(client, "users://7/profile") == [
            {"uri": "users://7/profile", "mimeType": "application/json", "text": '{"id":7}'}
        ]
        assert (await read(client, "search://a/b%20c?limit=3"))[0]["text"] == "a/b c||3"
        assert (await read(client, "search://x?q=hi"))[0]["text"] == "x|hi|10"
        assert [c["uri"] for c in await read(client, "multi://both")] == [
            "multi://both/a",
            "multi://both/b",
        ]


async def test_unknown_resource_error_per_era(era: str) -> None:
    code = ErrorCode.RESOURCE_NOT_FOUND if era == "legacy" else ErrorCode.INVALID_PARAMS
    async with connect(resource_server(), era) as client:
        for uri in ("nope://x", "users://101/profile"):
            error = await error_of(client, "resources/read", {"uri": uri})
            assert (error.code, error.data) == (code, {"uri": uri})
            assert error.message == f"Resource not found: {uri}"  # (both eras name it)
        error = await error_of(client, "resources/read", {"uri": "users://abc/profile"})
        assert (error.code, error.data) == (
            ErrorCode.INVALID_PARAMS,
            {"uri": "users://abc/profile"},
        )
        error = await error_of(client, "resources/read", {})
        assert error.code == ErrorCode.INVALID_PARAMS


async def test_resource_lists_paginate(era: str) -> None:
    async with connect(resource_server(page_size=2), era) as client:
        uris: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            result = await client.request(
                "resources/list", {} if cursor is None else {"cursor": cursor}
            )
            check(client, "ListResourcesResult", result)
            uris += [r["uri"] for r in result["resources"]]
            pages += 1
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert pages == 2
        assert uris == ["config://app", "file:///logo.png", "data://numbers", "multi://both"]
        first = await client.request("resources/list")
        assert first["resources"][0] == {
            "uri": "config://app",
            "name": "config",
            "description": "The config.",
            "mimeType": "application/toml",
        }
        templates = await client.request("resources/templates/list")
        check(client, "ListResourceTemplatesResult", templates)
        assert "nextCursor" not in templates
        assert templates["resourceTemplates"] == [
            {
                "uriTemplate": "users://{user_id}/profile",
                "name": "profile",
                "title": "A user's profile",
            },
            {"uriTemplate": "search://{+path}{?q,limit}", "name": "search"},
        ]
        for bad in ("garbage", first["nextCursor"] + "x", 17):
            error = await error_of(client, "resources/list", {"cursor": bad})
            assert error.code == ErrorCode.INVALID_PARAMS


def test_resource_registration_errors() -> None:
    server = Server("s")
    with pytest.raises(ValueError, match="cannot be matched"):
        server.add_resource(lambda a, b: "", "x://{a}{b}")
    with pytest.raises(TypeError, match="no parameters"):
        server.add_resource(lambda a: "", "x://{a}/{b}")
    with pytest.raises(TypeError, match="required parameters"):
        server.add_resource(lambda a, b: "", "x://{a}")
    with pytest.raises(TypeError, match="URI template"):
        server.add_resource(lambda a: "", "x://fixed")
    with pytest.raises(ValueError, match="no scheme"):
        server.add_resource(lambda: "", "relative/path")
    server.add_resource(lambda: "", "x://fixed")
    with pytest.raises(ValueError, match="already registered"):
        server.add_resource(lambda: "", "x://fixed")
    server.remove_resource("x://fixed")
    assert "resources" not in server.capabilities()


# ------------------------------------------------------------------ prompts


def prompt_server() -> Server:
    server = Server("prompts")

    @server.prompt(title="Code review")
    def review(code: str, language: Literal["python", "rust", "go"] = "python") -> str:
        """Review some code.

        Args:
            code: the code to review
            language: its language
        """
        return f"Review this {language}:\n{code}"

    @server.prompt("chat")
    async def conversation(topic: str, turns: int, color: Color = Color.RED) -> list[Any]:
        return [
            f"Let us talk about {topic} ({color.value})",
            Message.assistant(f"Sure, {turns} turns."),
            Message.user(Image(PNG, "image/png")),
            {"role": "assistant", "content": {"type": "text", "text": "raw"}},
            mcp_types.PromptMessage(role="user", content=mcp_types.TextContent(text="typed")),
        ]

    return server


async def test_prompts(era: str) -> None:
    async with connect(prompt_server(), era) as client:
        listed = await client.request("prompts/list")
        check(client, "ListPromptsResult", listed)
        assert listed["prompts"][0] == {
            "name": "review",
            "title": "Code review",
            "description": "Review some code.",
            "arguments": [
                {"name": "code", "description": "the code to review", "required": True},
                {"name": "language", "description": "its language", "required": False},
            ],
        }
        result = await client.request(
            "prompts/get", {"name": "review", "arguments": {"code": "x=1"}}
        )
        check(client, "GetPromptResult", result)
        assert result["description"] == "Review some code."
        assert result["messages"] == [
            {"role": "user", "content": {"type": "text", "text": "Review this python:\nx=1"}}
        ]
        params = {"name": "chat", "arguments": {"topic": "trio", "turns": "3", "color": "blue"}}
        result = await client.request("prompts/get", params)
        check(client, "GetPromptResult", result)
        assert [m["role"] for m in result["messages"]] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
        ]
        assert result["messages"][0]["content"]["text"] == "Let us talk about trio (blue)"
        assert result["messages"][1]["content"]["text"] == "Sure, 3 turns."
        assert result["messages"][2]["content"]["type"] == "image"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": "review", "arguments": {}}, "'code'"),
        ({"name": "review"}, "'code'"),
        ({"name": "review", "arguments": {"code": "x", "language": "cobol"}}, "arguments.language"),
        ({"name": "chat", "arguments": {"topic": "t", "turns": "many"}}, "arguments.turns"),
        ({"name": "review", "arguments": {"code": 3}}, "object of strings"),
        ({"name": "nope"}, "Unknown prompt: nope"),
    ],
)
async def test_prompt_errors(era: str, params: dict[str, Any], message: str) -> None:
    async with connect(prompt_server(), era) as client:
        error = await error_of(client, "prompts/get", params)
    assert error.code == ErrorCode.INVALID_PARAMS
    assert message in error.message


# ------------------------------------------------------------------ completion


def completion_server() -> Server:
    server = prompt_server()

    @server.resource("repo://{owner}/{name}")
    async def repo(owner: str, name: str) -> str:
        return f"{owner}/{name}"

    @server.completion("ref/prompt", "chat", "topic")
    def topics(request: CompletionRequest) -> list[str]:
        return [t for t in ("trio", "triangles", "asyncio") if t.startswith(request.value)]

    @server.completion("ref/resource", "repo://{owner}/{name}")
    async def repos(request: CompletionRequest, ctx: Context) -> Completion:
        assert ctx.method == "completion/complete"
        if request.argument == "owner":
            return Completion(["python-trio"], total=1, has_more=False)
        return Completion([f"{request.context.get('owner')}-{i}" for i in range(150)])

    return server


async def complete(client: Session, ref: dict[str, str], name: str, value: str, **ctx: str) -> Any:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if ctx:
        params["context"] = {"arguments": ctx}
    result = await client.request("completion/complete", params)
    check(client, "CompleteResult", result)
    return result["completion"]


async def test_completion(era: str) -> None:
    chat = {"type": "ref/prompt", "name": "chat"}
    review = {"type": "ref/prompt", "name": "review"}
    repo = {"type": "ref/resource", "uri": "repo://{owner}/{name}"}
    async with connect(completion_server(), era) as client:
        assert client.handshake is not None
        assert "completions" in client.handshake.peer_capabilities
        assert await complete(client, chat, "topic", "tri") == {
            "values": ["trio", "triangles"],
            "total": 2,
            "hasMore": False,
        }
        # Literal and Enum parameters complete by themselves
        assert (await complete(client, review, "language", "r"))["values"] == ["rust"]
        assert (await complete(client, chat, "color", ""))["values"] == ["red", "green", "blue"]
        assert (await complete(client, chat, "turns", "1"))["values"] == []
        assert await complete(client, repo, "owner", "py") == {
            "values": ["python-trio"],
            "total": 1,
            "hasMore": False,
        }
        many = await complete(client, repo, "name", "", owner="me")
        assert len(many["values"]) == 100
        assert many["values"][0] == "me-0"
        assert many["hasMore"] is True
        for params in (
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
            {
                "ref": {"type": "ref/resource", "uri": "x://{y}"},
                "argument": {"name": "y", "value": ""},
            },
            {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
            {"ref": chat},
        ):
            error = await error_of(client, "completion/complete", params)
            assert error.code == ErrorCode.INVALID_PARAMS


def lookup_server() -> Server:
    server = completion_server()
    server.add_tool(lambda: None, name="noop")
    return server


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tools/call", {"name": "nope"}, "Unknown tool: nope"),
        ("prompts/get", {"name": "nope"}, "Unknown prompt: nope"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
            "Unknown prompt: nope",
        ),
    ],
)
async def test_unknown_names_are_answered_alike(
    era: str, method: str, params: dict[str, Any], message: str
) -> None:
    async with connect(lookup_server(), era) as client:
        error = await error_of(client, method, params)
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.message == message
    assert error.data == {"name": "nope"}


@pytest.mark.parametrize(
    ("method", "params", "message"),
    [
        ("tools/call", {}, "Invalid params: tools/call needs 'name' (a string)"),
        ("prompts/get", {"name": 3}, "Invalid params: prompts/get needs 'name' (a string)"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt"}, "argument": {"name": "a", "value": ""}},
            "Invalid params: ref/prompt needs 'name' (a string)",
        ),
    ],
)
async def test_a_missing_name_is_invalid_params(
    era: str, method: str, params: dict[str, Any], message: str
) -> None:
    async with connect(lookup_server(), era) as client:
        error = await error_of(client, method, params)
    assert error.code == ErrorCode.INVALID_PARAMS
    assert error.message == message


def test_decorators_register_and_return_the_function_unchanged() -> None:
    server = Server("decorators")

    def tool(x: int) -> int:
        return x

    def prompt(topic: str) -> str:
        return topic

    def resource() -> str:
        return ""

    def template(id: str) -> str:
        return id

    def languages(request: CompletionRequest) -> list[str]:
        return []

    assert server.tool(tool) is tool
    assert server.tool("named", title="T")(tool) is tool
    assert server.prompt(prompt) is prompt
    assert server.prompt("p2", description="D")(prompt) is prompt
    assert server.resource("x://fixed", mime_type="text/plain")(resource) is resource
    assert server.resource("x://{id}")(template) is template
    assert server.completion("ref/prompt", "prompt", "topic")(languages) is languages
    assert server.completion("ref/resource", "x://{id}")(languages) is languages
    reg = server._registry
    assert list(reg.tools) == ["tool", "named"]
    assert reg.tools["named"].definition["title"] == "T"
    assert list(reg.prompts) == ["prompt", "p2"]
    assert reg.prompts["p2"].definition["description"] == "D"
    assert reg.resources["x://fixed"].mime_type == "text/plain"
    assert list(reg.templates) == ["x://{id}"]
    assert set(reg.completions) == {
        ("ref/prompt", "prompt", "topic"),
        ("ref/resource", "x://{id}", None),
    }
    with pytest.raises(ValueError, match="no argument 'nope'"):
        server.completion("ref/prompt", "prompt", "nope")(languages)
    with pytest.raises(ValueError, match="already registered"):
        server.resource("x://fixed")(resource)


def test_completion_registration_errors() -> None:
    server = completion_server()
    noop: Callable[[CompletionRequest], list[str]] = lambda request: []  # noqa: E731
    with pytest.raises(ValueError, match="no ref/prompt 'nope'"):
        server.add_completion(noop, "ref/prompt", "nope")
    with pytest.raises(ValueError, match="no argument 'x'"):
        server.add_completion(noop, "ref/prompt", "chat", "x")
    with pytest.raises(TypeError, match="one argument"):
        server.add_completion(lambda: [], "ref/prompt", "chat")
    server.remove_prompt("chat")
    assert ("ref/prompt", "chat", "topic") not in server._registry.completions


# ------------------------------------------------------------------ capabilities


async def test_capabilities_and_info_follow_the_registry(era: str) -> None:
    async with connect(completion_server(), era) as client:
        assert client.handshake is not None
        assert client.handshake.peer_capabilities == {
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "completions": {},
        }
        assert client.handshake.peer_info is not None
        assert client.handshake.peer_info["name"] == "prompts"
    server = Server(
        "bare",
        title="Bare",
        website_url="https://example.com",
        icons=[{"src": "https://example.com/x.png"}],
    )
    async with connect(server, era) as client:
        assert client.handshake is not None
        assert client.handshake.peer_capabilities == {"logging": {}}
        assert client.handshake.peer_info is not None
        assert client.handshake.peer_info["title"] == "Bare"
        with pytest.raises(LocalProtocolError, match="'tools' capability"):
            await client.request("tools/list")


async def test_tools_list_pagination_and_stale_cursors(era: str) -> None:
    server = Server("many", page_size=3)
    for i in range(7):
        server.add_tool(lambda: None, name=f"t{i}")
    async with connect(server, era) as client:
        names: list[str] = []
        result = await client.request("tools/list")
        while True:
            check(client, "ListToolsResult", result)
            names += [t["name"] for t in result["tools"]]
            if "nextCursor" not in result:
                break
            cursor = result["nextCursor"]
            result = await client.request("tools/list", {"cursor": cursor})
        assert names == [f"t{i}" for i in range(7)]
        server.remove_tool("t0")
        error = await error_of(client, "tools/list", {"cursor": cursor})
        assert error.code == ErrorCode.INVALID_PARAMS
        assert "stale" in error.message

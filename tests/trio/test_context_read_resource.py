"""``ctx.read_resource(uri)``: a handler reads its own server's resources in process,
resolved and refused as ``resources/read`` resolves and refuses them."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mcp_sansio import ErrorCode, unstructure
from mcp_sansio import types as t
from mcp_trio import Context, McpError, ResourceNotFound, open_client
from mcp_trio._server import Server

ERAS = ["legacy", "modern"]


def make_server() -> Server:
    server = Server("reader")

    @server.resource("config://app", mime_type="application/toml")
    def config() -> str:
        return 'mode = "fast"'

    @server.resource("data://blob")
    def blob() -> bytes:
        return b"\x00\x01"

    @server.resource("notes://{id}")
    def note_by_id(id: int) -> dict[str, Any]:
        if id > 9:
            raise ResourceNotFound(f"notes://{id}")
        return {"id": id}

    @server.resource("notes://{name}")
    def note_by_name(name: str) -> str:
        return f"note {name}"

    @server.resource("count://{n}")
    def count(n: int) -> str:
        return str(n)

    @server.resource("ask://name")
    async def asks(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", str)
        return f"{ctx.method}: {answer.data}"

    @server.resource("broken://x")
    def broken() -> str:
        raise ZeroDivisionError("a bug")

    @server.tool()
    async def read(uri: str, ctx: Context) -> dict[str, Any]:
        try:
            result = await ctx.read_resource(uri)
        except McpError as exc:
            return {"error": unstructure(exc.error)}
        except ZeroDivisionError as exc:
            return {"raised": repr(exc)}
        assert isinstance(result, t.ReadResourceResult)
        contents: dict[str, Any] = unstructure(result)
        return contents

    return server


async def read_in_tool(client: Any, uri: str) -> dict[str, Any]:
    result = await client.call_tool("read", {"uri": uri})
    assert not result.is_error, result
    value: dict[str, Any] = result.structured_content
    return value


async def read_by_client(client: Any, uri: str) -> dict[str, Any]:
    """What ``resources/read`` answers: the result, or the error as data."""
    try:
        result = await client.read_resource(uri)
    except McpError as exc:
        return {"error": unstructure(exc.error)}
    # (the contents: what the core adds to a modern result, ttlMs and such, is its own)
    return {"contents": unstructure(result.contents)}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    "uri",
    [
        "config://app",  # a fixed URI, its MIME type
        "data://blob",  # a blob
        "notes://7",  # the first template whose variables convert
        "notes://groceries",  # ...the second, when the first's do not
        "notes://12",  # ResourceNotFound from the function: the not-found of the era
        "nothing://here",  # nothing serves it
        "count://many",  # a template matches, but its variables do not convert: -32602
    ],
)
async def test_it_answers_what_resources_read_answers(era: str, uri: str) -> None:
    async with open_client(make_server(), era=era) as client:  # type: ignore[arg-type]
        with trio.fail_after(10):
            assert await read_in_tool(client, uri) == await read_by_client(client, uri)


@pytest.mark.parametrize("era", ERAS)
async def test_not_found_has_the_code_of_the_era(era: str) -> None:
    async with open_client(make_server(), era=era) as client:  # type: ignore[arg-type]
        error = (await read_in_tool(client, "nothing://here"))["error"]
        raised = (await read_in_tool(client, "notes://12"))["error"]
    code = ErrorCode.RESOURCE_NOT_FOUND if era == "legacy" else ErrorCode.INVALID_PARAMS
    assert error == {
        "code": code,
        "message": "Resource not found: nothing://here",
        "data": {"uri": "nothing://here"},
    }
    assert raised["code"] == code and raised["data"] == {"uri": "notes://12"}


async def test_a_bug_in_the_resource_is_raised_to_the_caller_as_is() -> None:
    async with open_client(make_server()) as client:
        assert await read_in_tool(client, "broken://x") == {"raised": "ZeroDivisionError('a bug')"}


@pytest.mark.parametrize("era", ERAS)
async def test_the_resource_runs_with_the_callers_context_and_asks_through_it(era: str) -> None:
    async def elicit(params: Any) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"value": "Ada"})

    async with open_client(
        make_server(),
        era=era,  # type: ignore[arg-type]
        on_elicitation=elicit,
    ) as client:
        result = await read_in_tool(client, "ask://name")
    (contents,) = result["contents"]
    assert contents["text"] == "tools/call: Ada"


async def test_a_uri_that_is_no_string_is_refused() -> None:
    server = make_server()

    @server.tool()
    async def odd(ctx: Context) -> str:
        try:
            await ctx.read_resource(42)  # type: ignore[arg-type]
        except TypeError as exc:
            return str(exc)
        return "read"  # pragma: no cover

    async with open_client(server) as client:
        result = await client.call_tool("odd")
    assert result.structured_content == {"result": "the resource URI must be a string, not int"}


async def test_templates_resolve_in_registration_order() -> None:
    async with open_client(make_server()) as client:
        by_id = await read_in_tool(client, "notes://7")
        by_name = await read_in_tool(client, "notes://groceries")
        unconverted = await read_in_tool(client, "count://many")
    assert by_id["contents"][0]["text"] == '{"id":7}'
    assert by_name["contents"][0]["text"] == "note groceries"
    assert unconverted["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert "count://many" in unconverted["error"]["message"]

"""``ctx: Context[App]`` with ``App`` imported only under ``TYPE_CHECKING`` (the usual
way to type :attr:`Context.lifespan` without importing the application at run time):
the annotation cannot be resolved, so the parameter is known by the name it spells,
type argument or not, and receives the context."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import pytest

import mcp_trio
from mcp_trio import Context
from mcp_trio._server import Server

from .test_server import call, connect

if TYPE_CHECKING:
    from .never_imported import App  # type: ignore[import-not-found]  # (no such module)


@asynccontextmanager
async def lifespan(server: Server) -> AsyncIterator[str]:
    yield f"{server.name}'s pool"


async def test_a_context_of_an_app_imported_for_type_checking_only_is_the_context() -> None:
    server = Server("app", lifespan=lifespan)

    @server.tool()
    async def pool(ctx: Context[App]) -> str:
        return str(ctx.lifespan)

    @server.tool()
    def pool_in_a_thread(x: int, ctx: mcp_trio.Context[App] | None = None) -> str:
        assert ctx is not None
        return f"{x} {ctx.lifespan}"

    async with connect(server, "legacy") as client:
        listed = await client.request("tools/list", None)
        schemas = {tool["name"]: tool["inputSchema"] for tool in listed["tools"]}
        assert "ctx" not in schemas["pool"].get("properties", {})
        assert list(schemas["pool_in_a_thread"]["properties"]) == ["x"]
        assert (await call(client, "pool"))["structuredContent"] == {"result": "app's pool"}
        result = await call(client, "pool_in_a_thread", x=1)
    assert result["structuredContent"] == {"result": "1 app's pool"}


@pytest.mark.parametrize(
    "annotation",
    [
        "Context[App]",
        "mcp_trio.Context[App]",
        "unresolved.Context[App] | None",
        "None | Context[App]",
        "typing.Optional[Context[App]]",
        "Optional[Context[dict[str, App]]]",
        "Context[App | Other]",
        "'Context[App]'",
    ],
)
async def test_an_unresolvable_context_with_a_type_argument_goes_by_its_name(
    annotation: str,
) -> None:
    server = Server("ctx")

    async def tool(x: int, ctx: Any = None) -> str:
        return f"{x} {type(ctx).__name__}"

    tool.__annotations__ = {"x": "int", "ctx": annotation, "return": "str"}
    server.add_tool(tool)
    async with connect(server, "legacy") as client:
        listed = await client.request("tools/list", None)
        assert listed["tools"][0]["inputSchema"]["properties"] == {"x": {"type": "integer"}}
        result = await call(client, "tool", x=1)
    assert result["structuredContent"] == {"result": "1 Context"}


@pytest.mark.parametrize("annotation", ["list[Context[App]]", "Mapping[str, Context]"])
def test_a_context_inside_another_type_is_no_context(annotation: str) -> None:
    # (only the parameter's own type counts: such a parameter is an argument, and one
    # whose type cannot be resolved has no schema)
    server = Server("ctx")

    async def tool(ctx: Any) -> str:
        return "unreachable"  # pragma: no cover

    tool.__annotations__ = {"ctx": annotation, "return": "str"}
    with pytest.raises(TypeError, match="cannot resolve"):
        server.add_tool(tool)

"""``@server.tool`` and ``@server.prompt`` take the name positionally or by keyword.

This file is type-checked too (mypy --strict over ``tests``): the decorated functions
keep their types whichever way the name is given.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, assert_type

import pytest

from mcp_trio import Server


async def listed(server: Server, method: str, key: str) -> list[tuple[Any, Any]]:
    async with server.connect_in_memory() as client:
        result = await client.request(method)
    return [(entry["name"], entry.get("description")) for entry in result[key]]


async def test_tool_name_by_keyword() -> None:
    server = Server("names")

    @server.tool(name="renamed", description="By keyword.")
    async def original() -> str:
        return "x"

    @server.tool("positional")
    async def other() -> str:
        """By position."""
        return "y"

    assert_type(original, Callable[[], Coroutine[Any, Any, str]])
    assert await original() == "x"
    assert sorted(await listed(server, "tools/list", "tools")) == [
        ("positional", "By position."),
        ("renamed", "By keyword."),
    ]


async def test_prompt_name_by_keyword() -> None:
    server = Server("names")

    @server.prompt(name="renamed", description="By keyword.")
    def original() -> str:
        return "x"

    @server.prompt("positional")
    def other() -> str:
        """By position."""
        return "y"

    assert_type(original(), str)
    assert sorted(await listed(server, "prompts/list", "prompts")) == [
        ("positional", "By position."),
        ("renamed", "By keyword."),
    ]


def test_name_twice_is_a_type_error() -> None:
    server = Server("names")
    with pytest.raises(TypeError):
        server.tool("a", name="b")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        server.prompt("a", name="b")  # type: ignore[call-overload]

"""``mcp_trio.testing``: ``client_for`` and the pytest fixtures, used as a user would.

The fixtures come from ``mcp_trio.pytest_plugin``, named in ``pytest_plugins`` as a
``conftest.py`` names it where mcp-trio is not installed. The README's recipe itself, run
by pytest with warnings as errors, is in ``test_pytest_plugin.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, Era
from mcp_trio import Handlers, RequestContext
from mcp_trio._client import Client

from .client_server_app import make_handlers, server_config

pytest_plugins = ["mcp_trio.pytest_plugin"]
ERAS = ("legacy", "modern")


class AppServer:
    """A user's server object."""

    def handlers(self) -> Handlers:
        return make_handlers()

    def connection_config(self) -> ConnectionConfig:
        return server_config()


@pytest.fixture
def mcp_server() -> AppServer:
    return AppServer()


@pytest.fixture(params=ERAS)
def mcp_era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_fixture_in_both_eras(mcp_client: Client, mcp_era: str) -> None:
    assert mcp_client.era is Era(mcp_era)
    assert (await mcp_client.call_tool("echo", {"text": "fixture"})).text == "fixture"


def tiny_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        return {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "hello"}]}

    @handlers.on_request("resources/subscribe")
    async def subscribe(ctx: RequestContext) -> dict[str, Any]:
        return {}

    return handlers


@pytest.mark.parametrize("era", ERAS)
async def test_client_for_a_bare_handler_table(era: str, autojump_clock: MockClock) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415 - see the module docstring

    async with client_for(tiny_handlers(), era=era, timeout=5) as client:  # type: ignore[arg-type]
        assert client.era is Era(era)
        assert [tool.name for tool in await client.list_tools()] == ["hi"]
        assert (await client.call_tool("hi")).text == "hello"


async def test_client_for_a_pair_and_a_server(autojump_clock: MockClock) -> None:
    from mcp_trio import testing  # noqa: PLC0415 - see the module docstring

    eras, client_for = testing.ERAS, testing.client_for

    assert eras == ERAS
    async with client_for((make_handlers(), server_config()), era="legacy") as client:
        assert client.era is Era.LEGACY
    async with client_for(AppServer()) as client:
        assert client.era is Era.MODERN


def test_capabilities_for() -> None:
    from mcp_trio.testing import capabilities_for  # noqa: PLC0415

    assert capabilities_for(tiny_handlers()) == {
        "logging": {},
        "tools": {"listChanged": True},
        "resources": {"subscribe": True},
    }
    assert capabilities_for(Handlers()) == {"logging": {}}

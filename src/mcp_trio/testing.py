"""Test your MCP server with a real client, in memory, in either era.

::

    from mcp_trio.testing import client_for

    async def test_add():
        async with client_for(my_server, era="modern") as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"

``my_server`` is a ``Server`` (anything with ``handlers()`` and ``connection_config()``),
a ``(Handlers, ConnectionConfig)`` pair, or a bare :class:`~mcp_trio.Handlers` table
(whose capabilities are then inferred from the methods it handles).

The pytest fixtures (``mcp_client``, ``mcp_era``, ``mcp_client_options``) are in
:mod:`mcp_trio.pytest_plugin`, which pytest loads by itself once mcp-trio is installed.
This module is not a plugin, so a ``conftest.py`` may import from it freely.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Final

from mcp_sansio import ConnectionConfig

from ._client import Client, open_client
from ._client_common import EraChoice
from ._client_targets import InMemoryServer
from ._handlers import Handlers

__all__ = ["ERAS", "capabilities_for", "client_for"]

# (an older conftest.py names this module as a plugin: it still gets the fixtures)
pytest_plugins = ["mcp_trio.pytest_plugin"]

ERAS: Final[tuple[EraChoice, ...]] = ("legacy", "modern")
"""Both eras, for ``@pytest.fixture(params=ERAS)``."""

_CAPABILITY_OF: Final = {
    "tools/list": ("tools", {"listChanged": True}),
    "tools/call": ("tools", {"listChanged": True}),
    "prompts/list": ("prompts", {"listChanged": True}),
    "prompts/get": ("prompts", {"listChanged": True}),
    "resources/list": ("resources", {"listChanged": True}),
    "resources/templates/list": ("resources", {"listChanged": True}),
    "resources/read": ("resources", {"listChanged": True}),
    "resources/subscribe": ("resources", {"subscribe": True}),
    "completion/complete": ("completions", {}),
}


def capabilities_for(handlers: Handlers) -> dict[str, Any]:
    """The server capabilities a handler table implies.

    ``tools``, ``prompts`` and ``resources`` (with ``listChanged``) for the methods it
    handles; ``resources.subscribe`` when it handles ``resources/subscribe``;
    ``completions`` for ``completion/complete``; ``logging`` always (harmless: a
    server that never logs sends nothing).
    """
    caps: dict[str, Any] = {"logging": {}}
    for method, (section, flags) in _CAPABILITY_OF.items():
        if handlers.request_handler(method) is not None:
            caps.setdefault(section, {}).update(flags)
    return caps


@asynccontextmanager
async def client_for(
    server: InMemoryServer | tuple[Handlers, ConnectionConfig] | Handlers,
    *,
    era: EraChoice = "auto",
    **client_options: Any,
) -> AsyncGenerator[Client]:
    """A :class:`~mcp_trio.Client` connected in memory to ``server``.

    Args:
        server: a ``Server``, a ``(Handlers, ConnectionConfig)`` pair, or a
            ``Handlers`` table (capabilities from :func:`capabilities_for`).
        era: ``"legacy"``, ``"modern"`` or ``"auto"`` (which picks modern for a
            server that serves both).
        client_options: any other keyword argument of :func:`~mcp_trio.open_client`
            (``on_sampling``, ``roots``, ``timeout``, ...).

    Resource handling:
        Both sessions close when the block exits; nothing outlives it.
    """
    target: InMemoryServer | tuple[Handlers, ConnectionConfig]
    if isinstance(server, Handlers):
        config = ConnectionConfig(
            implementation={"name": "mcp-trio-test-server", "version": "0"},
            capabilities=capabilities_for(server),
        )
        target = (server, config)
    else:
        target = server
    async with open_client(target, era=era, **client_options) as client:
        yield client

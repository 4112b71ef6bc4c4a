"""The pytest plugin of mcp-trio: the ``mcp_client`` fixture and the fixtures it uses.

Installed with pip, pytest loads it by itself (the ``pytest11`` entry point, under the
name ``mcp_trio.pytest_plugin``); otherwise, or with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``,
name it in your top-level ``conftest.py``: ``pytest_plugins = ["mcp_trio.pytest_plugin"]``
(or ``pytest -p mcp_trio.pytest_plugin``).

It is a module of its own, apart from :mod:`mcp_trio.testing`, so that a ``conftest.py``
may import ``ERAS`` or ``client_for`` from ``mcp_trio.testing`` before pytest loads the
plugin: pytest rewrites a plugin's asserts, and warns about a plugin imported before it
could (``PytestAssertRewriteWarning``, an error under ``filterwarnings = error``).

Fixtures (they need pytest-trio: ``trio_mode = true``, or ``@pytest.mark.trio``):

- ``mcp_client``: a :class:`~mcp_trio.Client` connected in memory to the server your
  ``mcp_server`` fixture returns (anything :func:`~mcp_trio.testing.client_for` takes);
- ``mcp_era``: the era it connects in, ``"auto"``; override it, e.g. with
  ``@pytest.fixture(params=ERAS)``, to run each test in both eras;
- ``mcp_client_options``: the other keyword arguments of :func:`~mcp_trio.open_client`
  it connects with, ``{}``; override it to give ``on_elicitation``, ``on_sampling``,
  ``roots``, ``timeout``...

As with :func:`~mcp_trio.testing.client_for`, what a callback given in
``mcp_client_options`` raises fails the test, even when the session goes on past it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._client import Client
    from ._client_common import EraChoice

__all__ = ["mcp_client", "mcp_client_options", "mcp_era"]


@pytest.fixture
def mcp_era() -> EraChoice:
    """The era ``mcp_client`` connects in: ``"auto"`` (override it to parametrize)."""
    return "auto"


@pytest.fixture
def mcp_client_options() -> dict[str, Any]:
    """Keyword arguments of :func:`~mcp_trio.open_client` for ``mcp_client``: none
    (override it to give ``on_elicitation``, ``on_sampling``, ``roots``, ...)."""
    return {}


@pytest.fixture
async def mcp_client(
    mcp_server: Any, mcp_era: EraChoice, mcp_client_options: dict[str, Any]
) -> AsyncGenerator[Client]:
    """A client connected in memory to your ``mcp_server`` fixture's server.

    The first exception each callback of ``mcp_client_options`` raises is raised again
    when the fixture ends (see :func:`~mcp_trio.testing.client_for`).
    """
    # (imported here: an installed plugin loads in every pytest run, most of them
    # without an MCP server to test)
    from .testing import _open_watched_client  # noqa: PLC0415

    async with _open_watched_client(
        mcp_server, mcp_era, mcp_client_options, where="the mcp_client fixture"
    ) as client:
        yield client

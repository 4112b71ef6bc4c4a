"""The pytest plugin of mcp-trio: the ``mcp_client`` fixture and the fixtures it uses.

Installed with pip, pytest loads it by itself (the ``pytest11`` entry point, under the
name ``mcp_trio.pytest_plugin``); otherwise, or with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``,
name it in your top-level ``conftest.py``: ``pytest_plugins = ["mcp_trio.pytest_plugin"]``
(or ``pytest -p mcp_trio.pytest_plugin``).

It is a module of its own, apart from :mod:`mcp_trio.testing`, so that a ``conftest.py``
may import ``ERAS`` or ``client_for`` from ``mcp_trio.testing`` before pytest loads the
plugin: pytest rewrites a plugin's asserts, and warns about a plugin imported before it
could (``PytestAssertRewriteWarning``, an error under ``filterwarnings = error``).

Fixtures (they need Trio: pytest-trio's ``trio_mode = true`` or ``@pytest.mark.trio``,
or anyio's plugin with ``anyio_backend`` ``"trio"``; pytest-asyncio in ``asyncio_mode =
auto`` runs every async fixture on asyncio, so use its strict mode beside them):

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
    when the fixture ends (see :func:`~mcp_trio.testing.client_for`). Run anywhere but
    in Trio, it fails the test saying which runner to use.
    """
    _require_trio()
    # (imported here: an installed plugin loads in every pytest run, most of them
    # without an MCP server to test)
    from .testing import _open_watched_client  # noqa: PLC0415

    async with _open_watched_client(
        mcp_server, mcp_era, mcp_client_options, where="the mcp_client fixture"
    ) as client:
        yield client


def _require_trio() -> None:
    """Fail the test, saying what to do, unless this runs in a Trio task: another
    runner's fixture would die deep inside Trio (pytest-asyncio's ``asyncio_mode =
    auto`` takes every async fixture, this one included, even for a Trio test)."""
    import trio  # noqa: PLC0415 - (see mcp_client)

    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        return
    pytest.fail(
        f"mcp_client needs Trio, but runs under {_running_library()}: run the test with "
        "pytest-trio (trio_mode = true, or @pytest.mark.trio), or with anyio's plugin "
        "and an anyio_backend fixture that returns 'trio'. With pytest-asyncio, set "
        "asyncio_mode = strict: its auto mode runs every async fixture on asyncio, this "
        "one included, even for a Trio test.",
        pytrace=False,
    )


def _running_library() -> str:
    """The async library running this code, as sniffio names it (Trio's dependency)."""
    import sniffio  # noqa: PLC0415 - (see mcp_client)

    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "no async library sniffio knows"

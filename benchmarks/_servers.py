"""The servers and clients the transport groups measure, built one way everywhere.

Every group serves the same tool the same way, so their figures differ only by the
transport: ``tools/call`` of ``get_forecast`` answered with the canned 1 KB
``CallToolResult`` of :mod:`benchmarks.workloads`. This module is imported by the
in-process cases and by the subprocess scripts (``_stdio_server``), so it imports
nothing but :mod:`mcp_sansio`, :mod:`mcp_trio`, the workloads and the timed loops of
:mod:`benchmarks._trio`.

* :func:`low_level_handlers` -- ``mcp_trio.Handlers`` with one ``tools/call`` handler
  returning :data:`~benchmarks.workloads.CALL_TOOL_RESULT` (the same dict every time).
* :func:`high_level_server` -- ``mcp_trio.Server`` with a ``get_forecast`` tool whose
  return value becomes the same 1 KB result (one text block, ``isError: false``).
* :data:`SERVER_CONFIG` / :data:`CLIENT_CONFIG` -- the cores' configurations. The client
  is pinned to the legacy era so that the request on the wire is the 159-byte workload
  (a modern request carries the ``_meta`` envelope; ``core.roundtrip.modern`` measures
  that).
* :func:`call_tool_fixture` -- the high-level client's side: ``open_client(...)`` and
  ``call_tool`` in the timed loop.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Final

import trio

import mcp_trio
from mcp_sansio import ConnectionConfig
from mcp_trio import Handlers, RequestContext, Server

from ._trio import Driver, driver, until_closed
from .workloads import CALL_TOOL_ARGUMENTS, CALL_TOOL_NAME, CALL_TOOL_RESULT

__all__ = [
    "CLIENT_CONFIG",
    "CLIENT_INFO",
    "MODERN_CLIENT_CONFIG",
    "SERVER_CONFIG",
    "SERVER_INFO",
    "TOOL_TEXT",
    "call_tool_fixture",
    "high_level_server",
    "low_level_handlers",
]

CLIENT_INFO: Final = {"name": "bench-client", "version": "1"}
SERVER_INFO: Final = {"name": "bench-server", "version": "1"}
SERVER_CONFIG: Final = ConnectionConfig(implementation=SERVER_INFO, capabilities={"tools": {}})
"""The server core: serves both eras, declares ``tools``."""
CLIENT_CONFIG: Final = ConnectionConfig(era="legacy", implementation=CLIENT_INFO)
"""The client core, pinned to the legacy era: the request is the 159-byte workload."""
MODERN_CLIENT_CONFIG: Final = ConnectionConfig(era="modern", implementation=CLIENT_INFO)
"""A client pinned to the modern era (heavier messages), for informational cases."""
TOOL_TEXT: Final[str] = CALL_TOOL_RESULT["content"][0]["text"]
"""The text of the canned result: what the high-level tool returns."""


def low_level_handlers() -> Handlers:
    """A handler table answering every ``tools/call`` with the canned result."""
    handlers = Handlers()
    result = CALL_TOOL_RESULT

    @handlers.on_request("tools/call")
    async def call_tool(ctx: RequestContext) -> dict[str, Any]:
        return result

    return handlers


def high_level_server() -> Server:
    """An ``mcp_trio.Server`` whose ``get_forecast`` tool returns the canned text."""
    server = Server(SERVER_INFO["name"], SERVER_INFO["version"])
    text = TOOL_TEXT

    async def get_forecast(city: str, days: int, units: str, note: str) -> str:
        """The forecast for a city (canned)."""
        return text

    # No output schema: the result is the one text block, as in the workload.
    server.add_tool(get_forecast, name=CALL_TOOL_NAME, output_schema=False)
    return server


async def call_tool_fixture(
    where: Any,
    in_flight: int,
    *,
    cwd: Path | None = None,
    server_pid: int | None = None,
    task_status: trio.TaskStatus[Driver],
) -> None:
    """The high-level client's fixture: ``open_client(where, era="legacy")``, checked
    once; the driver times bare ``call_tool`` calls (their text is checked after each
    round, untimed)."""
    async with mcp_trio.open_client(where, era="legacy", cwd=cwd) as client:
        call = functools.partial(client.call_tool, CALL_TOOL_NAME, CALL_TOOL_ARGUMENTS)
        assert (await call()).text == TOOL_TEXT

        def accept(output: Any) -> bool:
            return bool(output.text == TOOL_TEXT)

        task_status.started(driver(call, in_flight=in_flight, accept=accept, server_pid=server_pid))
        await until_closed()

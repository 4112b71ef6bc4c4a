"""The official ``mcp`` SDK's side of group ``sdk``: its servers, and the timed worker.

Runs in a subprocess with an interpreter that has the SDK installed (asyncio through
anyio; never in the same process as Trio). Imports :mod:`mcp` and the workloads only,
never :mod:`mcp_trio`, so it works in an environment that has only the SDK (and orjson).

``python -m benchmarks._sdk_app server [--high-level]``
    Serve the SDK's stdio transport: the low-level ``mcp.server.lowlevel.Server`` with an
    ``on_call_tool`` returning the canned 1 KB ``CallToolResult`` (``--high-level``:
    ``MCPServer`` with a ``get_forecast`` tool returning the canned text).
``python -m benchmarks._sdk_app worker TARGET IN_FLIGHT``
    Connect ``mcp.Client(..., mode="legacy")`` to TARGET (``inmemory``, ``inmemory-high``:
    the server object in this process over the SDK's memory streams; ``stdio``: the
    server above as a child), check one call, print ``ready <sdk version>``, then for
    each line ``N`` of stdin: collect garbage, disable the collector, time ``N`` calls
    (``IN_FLIGHT`` tasks doing ``N`` calls each when above 1), re-enable it, check the
    last result and print the nanoseconds. The parent reads that figure (the harness's
    ``self_timed``), so the pipe hop is not in it.
"""

from __future__ import annotations

import gc
import importlib
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from .workloads import CALL_TOOL_ARGUMENTS, CALL_TOOL_NAME, CALL_TOOL_RESULT

# Imported by name: this module is type-checked where neither the SDK nor anyio is
# installed, and it only runs where they are.
anyio: Any = importlib.import_module("anyio")
to_thread: Any = importlib.import_module("anyio.to_thread")
mcp: Any = importlib.import_module("mcp")
types: Any = importlib.import_module("mcp_types")
Server: Any = importlib.import_module("mcp.server.lowlevel").Server
MCPServer: Any = importlib.import_module("mcp.server.mcpserver").MCPServer
stdio_server: Any = importlib.import_module("mcp.server.stdio").stdio_server

TEXT: str = CALL_TOOL_RESULT["content"][0]["text"]
ROOT = Path(__file__).resolve().parent.parent


_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "units": {"type": "string"},
        "note": {"type": "string"},
    },
    "required": ["city", "days", "units", "note"],
}


def low_level_server() -> Any:
    """The SDK's low-level server answering ``tools/call`` with the canned result (and
    ``tools/list``, which the SDK's client asks once to validate results)."""
    result = types.CallToolResult(content=[types.TextContent(type="text", text=TEXT)])
    tools = types.ListToolsResult(
        tools=[types.Tool(name=CALL_TOOL_NAME, input_schema=_INPUT_SCHEMA)]
    )

    async def list_tools(ctx: Any, params: Any) -> Any:
        return tools

    async def call_tool(ctx: Any, params: Any) -> Any:
        return result

    return Server("bench-server", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


def high_level_server() -> Any:
    """The SDK's ``MCPServer`` with a ``get_forecast`` tool returning the canned text."""
    server = MCPServer("bench-server")

    async def get_forecast(city: str, days: int, units: str, note: str) -> str:
        """The forecast for a city (canned)."""
        return TEXT

    server.tool(name=CALL_TOOL_NAME, structured_output=False)(get_forecast)
    return server


async def serve(high_level: bool) -> None:
    """Serve one stdio session until stdin ends."""
    if high_level:
        await high_level_server().run_stdio_async()
        return
    server = low_level_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _target(name: str) -> Any:
    if name == "inmemory":
        return low_level_server()
    if name == "inmemory-high":
        return high_level_server()
    if name == "stdio":
        return mcp.StdioServerParameters(
            command=sys.executable,
            args=["-m", f"{__package__}._sdk_app", "server"],
            cwd=ROOT,
        )
    raise SystemExit(f"unknown target {name!r}")


def _text(result: Any) -> str:
    assert not result.is_error, result
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    text: str = block.text
    return text


async def work(target: str, in_flight: int) -> None:
    """Connect, then time batches of calls as the parent asks."""
    async with mcp.Client(_target(target), mode="legacy", cache=None) as client:
        call_tool, arguments = client.call_tool, CALL_TOOL_ARGUMENTS
        assert _text(await call_tool(CALL_TOOL_NAME, arguments)) == TEXT
        last: list[Any] = []

        async def calls(n: int) -> None:
            result = None
            for _ in range(n):
                result = await call_tool(CALL_TOOL_NAME, arguments)
            assert result is not None
            last.append(result)

        print(f"ready {metadata.version('mcp')}", flush=True)
        while line := await to_thread.run_sync(sys.stdin.readline):
            n = int(line)
            last.clear()
            gc.collect()
            gc.disable()
            try:
                t0 = time.perf_counter_ns()
                if in_flight == 1:
                    await calls(n)
                else:
                    async with anyio.create_task_group() as tasks:
                        for _ in range(in_flight):
                            tasks.start_soon(calls, n)
                elapsed = time.perf_counter_ns() - t0
            finally:
                gc.enable()
            assert len(last) == in_flight and all(_text(r) == TEXT for r in last)
            print(elapsed, flush=True)


def main(argv: list[str]) -> None:
    """``server [--high-level]`` or ``worker TARGET IN_FLIGHT``."""
    if argv[:1] == ["server"]:
        anyio.run(serve, "--high-level" in argv)
    elif argv[:1] == ["worker"] and len(argv) == 3:
        anyio.run(work, argv[1], int(argv[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

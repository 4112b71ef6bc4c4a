"""The official ``mcp`` SDK's side of group ``sdk``: its servers, and the timed worker.

Runs in a subprocess with an interpreter that has the SDK installed (asyncio through
anyio; never in the same process as Trio). Imports :mod:`mcp` and the workloads only,
never :mod:`mcp_trio`, so it works in an environment that has only the SDK (and orjson).

``python -m benchmarks._sdk_app server [--high-level]``
    Serve the SDK's stdio transport: the low-level ``mcp.server.lowlevel.Server`` with an
    ``on_call_tool`` returning the canned 1 KB ``CallToolResult`` (``--high-level``:
    ``MCPServer`` with a ``get_forecast`` tool returning the canned text).
``python -m benchmarks._sdk_app server-http sse|json``
    Serve the same low-level server over the SDK's Streamable HTTP transport: its
    ``Server.streamable_http_app(json_response=...)`` (a Starlette app around
    ``StreamableHTTPSessionManager``; stateful sessions; DNS rebinding protection for
    localhost, as the SDK sets it) run by uvicorn (pinned to its h11 parser and the
    asyncio loop, which it picks when httptools and uvloop are not installed; access log
    off) on a socket bound to ``127.0.0.1``, a port the kernel picks. Writes the port
    and a newline to stdout, then serves until its stdin ends.
``python -m benchmarks._sdk_app worker TARGET IN_FLIGHT``
    Connect ``mcp.Client(..., mode="legacy")`` to TARGET (``inmemory``, ``inmemory-high``:
    the server object in this process over the SDK's memory streams; ``stdio``: the
    server above as a child; ``http-sse``, ``http-json``: the HTTP server above as a
    child, ``Client("http://127.0.0.1:PORT/mcp")``), check one call, print
    ``ready <sdk version>``, then for each line ``N`` of stdin: collect garbage, disable
    the collector, time ``N`` calls (``IN_FLIGHT`` tasks doing ``N`` calls each when above
    1), re-enable it, check the last result and print the nanoseconds. The parent reads
    that figure (the harness's ``self_timed``), so the pipe hop is not in it. A server
    child's stderr is this process's (so its errors show); it is stopped by closing its
    stdin when the client has closed.
"""

from __future__ import annotations

import gc
import importlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, Final

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
HOST: Final = "127.0.0.1"
PATH: Final = "/mcp"
HTTP_MODES: Final = ("sse", "json")
"""``server-http`` response modes: the SDK's default (``json_response=False``), or JSON."""
_STOP_TIMEOUT: Final = 10.0
_GRACEFUL_SHUTDOWN: Final = 5


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


async def serve_http(mode: str) -> None:
    """Serve Streamable HTTP on ``127.0.0.1`` until stdin ends (see the module docstring)."""
    uvicorn: Any = importlib.import_module("uvicorn")
    app = low_level_server().streamable_http_app(
        streamable_http_path=PATH, json_response=mode == "json", host=HOST
    )
    # proto=IPPROTO_TCP as ``loop.create_server(host, port)`` makes it: asyncio sets
    # TCP_NODELAY only on sockets whose proto says TCP (with proto 0, Nagle and
    # delayed ACKs add 40 ms to each answer written in two pieces).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, 0))
    listener.listen(1024)  # connections wait in the backlog until uvicorn has started
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            http="h11",  # what it picks without httptools; ours parses with h11 too
            loop="asyncio",  # what it picks without uvloop
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN,
        )
    )

    def stop_at_end_of_stdin() -> None:
        while sys.stdin.readline():
            pass
        server.should_exit = True  # uvicorn polls it

    threading.Thread(target=stop_at_end_of_stdin, daemon=True).start()
    print(listener.getsockname()[1], flush=True)
    await server.serve(sockets=[listener])


@contextmanager
def _server_child(*args: str) -> Iterator[str]:
    """``python -m benchmarks._sdk_app ARGS`` serving HTTP: yield the first line it writes
    (its port); on exit close its stdin and wait for it (kill it if it hangs)."""
    child = subprocess.Popen(
        [sys.executable, "-m", f"{__package__}._sdk_app", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        line = child.stdout.readline().strip()
        if not line.isdigit():
            raise RuntimeError(f"the SDK's HTTP server did not start: {line!r}")
        yield line
    finally:
        child.stdin.close()
        try:
            child.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            print("the SDK's HTTP server did not stop; killed", file=sys.stderr)
            child.kill()
            child.wait()
        child.stdout.close()


@contextmanager
def _target(name: str) -> Iterator[Any]:
    """What ``mcp.Client`` connects to for target ``name`` (a server child runs meanwhile)."""
    if name == "inmemory":
        yield low_level_server()
    elif name == "inmemory-high":
        yield high_level_server()
    elif name == "stdio":
        yield mcp.StdioServerParameters(
            command=sys.executable,
            args=["-m", f"{__package__}._sdk_app", "server"],
            cwd=ROOT,
        )
    elif name.startswith("http-") and name[5:] in HTTP_MODES:
        with _server_child("server-http", name[5:]) as port:
            yield f"http://{HOST}:{port}{PATH}"
    else:
        raise SystemExit(f"unknown target {name!r}")


def _text(result: Any) -> str:
    assert not result.is_error, result
    (block,) = result.content
    assert isinstance(block, types.TextContent), block
    text: str = block.text
    return text


async def work(target: str, in_flight: int) -> None:
    """Connect, then time batches of calls as the parent asks."""
    with _target(target) as server:
        async with mcp.Client(server, mode="legacy", cache=None) as client:
            await _timed_batches(client, in_flight)


async def _timed_batches(client: Any, in_flight: int) -> None:
    """Check one call, say ``ready``, then time a batch per line of stdin."""
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
    """``server [--high-level]``, ``server-http MODE`` or ``worker TARGET IN_FLIGHT``."""
    if argv[:1] == ["server"]:
        anyio.run(serve, "--high-level" in argv)
    elif argv[:1] == ["server-http"] and len(argv) == 2 and argv[1] in HTTP_MODES:
        anyio.run(serve_http, argv[1])
    elif argv[:1] == ["worker"] and len(argv) == 3:
        anyio.run(work, argv[1], int(argv[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

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
``python -m benchmarks._sdk_app codec KIND MESSAGE``
    The SDK's own parse or serialize of one workload (``MESSAGE``: ``request``,
    ``result``, ``tools_list``, ``resource``, ``progress``), timed the same way (no
    event loop). ``KIND``:

    - ``parse``: what its transports do with a line or body they receive,
      ``mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False)`` (a
      ``JSONRPCRequest`` / ``JSONRPCResponse`` / ``JSONRPCNotification``; params and
      result stay dicts);
    - ``typed.parse``: that, then the payload's model, as its sessions validate a result
      (``CallToolResult.model_validate(result, by_name=False)``, ``ListToolsResult``,
      ``ReadResourceResult``) or a request or notification (``CallToolRequest``,
      ``ProgressNotification``, from the envelope's method and params);
    - ``serialize``: what its transports write, the envelope model around the params
      or result dict, ``model_dump_json(by_alias=True, exclude_unset=True)``;
    - ``typed.serialize``: the typed value first dumped as its peer does
      (``model_dump(by_alias=True, mode="json", exclude_none=True)``), then the same.

    Each checks, untimed, that it parsed the workload's values or wrote its JSON.
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

import orjson

from .workloads import (
    CALL_TOOL_ARGUMENTS,
    CALL_TOOL_NAME,
    CALL_TOOL_REQUEST,
    CALL_TOOL_REQUEST_BYTES,
    CALL_TOOL_RESPONSE,
    CALL_TOOL_RESPONSE_BYTES,
    CALL_TOOL_RESULT,
    PROGRESS_NOTIFICATION,
    PROGRESS_NOTIFICATION_BYTES,
    READ_RESOURCE_RESPONSE,
    READ_RESOURCE_RESPONSE_BYTES,
    TOOLS_LIST_RESPONSE,
    TOOLS_LIST_RESPONSE_BYTES,
)

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


# -- parse and serialize -------------------------------------------------------------------

CODEC_MESSAGES: Final[dict[str, tuple[bytes, dict[str, Any], str]]] = {
    # name: (its bytes, its dict, the SDK's model of its payload)
    "request": (CALL_TOOL_REQUEST_BYTES, CALL_TOOL_REQUEST, "CallToolRequest"),
    "result": (CALL_TOOL_RESPONSE_BYTES, CALL_TOOL_RESPONSE, "CallToolResult"),
    "tools_list": (TOOLS_LIST_RESPONSE_BYTES, TOOLS_LIST_RESPONSE, "ListToolsResult"),
    "resource": (READ_RESOURCE_RESPONSE_BYTES, READ_RESOURCE_RESPONSE, "ReadResourceResult"),
    "progress": (PROGRESS_NOTIFICATION_BYTES, PROGRESS_NOTIFICATION, "ProgressNotification"),
}
"""The workloads, by the names of group ``core``'s message cases."""
CODEC_KINDS: Final = ("parse", "typed.parse", "serialize", "typed.serialize")


def _envelope(message: dict[str, Any], payload: Any) -> Any:
    """The SDK's JSON-RPC model of ``message`` around ``payload`` (params or result)."""
    if "result" in message:
        return types.JSONRPCResponse(jsonrpc="2.0", id=message["id"], result=payload)
    if "id" in message:
        return types.JSONRPCRequest(
            jsonrpc="2.0", id=message["id"], method=message["method"], params=payload
        )
    return types.JSONRPCNotification(jsonrpc="2.0", method=message["method"], params=payload)


def codec(kind: str, name: str) -> Any:
    """``run(n)``: ``n`` of the SDK's parses or serializations of workload ``name``
    (see the module docstring), checked once first."""
    data, message, model = CODEC_MESSAGES[name]
    cls = getattr(types, model)
    validate = types.jsonrpc_message_adapter.validate_json
    dump_options: dict[str, Any] = {"by_alias": True, "mode": "json", "exclude_none": True}
    is_result = "result" in message
    if kind == "parse":

        def once() -> Any:
            return validate(data, by_name=False)

        parsed = once()
        assert (parsed.result if is_result else parsed.params) == (
            message["result"] if is_result else message["params"]
        )
    elif kind == "typed.parse" and is_result:

        def once() -> Any:
            return cls.model_validate(validate(data, by_name=False).result, by_name=False)

        assert isinstance(once(), cls)
    elif kind == "typed.parse":

        def once() -> Any:
            parsed = validate(data, by_name=False)
            return cls.model_validate(
                {"method": parsed.method, "params": parsed.params}, by_name=False
            )

        assert isinstance(once(), cls)
    elif kind == "serialize":
        payload = message["result"] if is_result else message["params"]

        def once() -> Any:
            return _envelope(message, payload).model_dump_json(by_alias=True, exclude_unset=True)

    elif kind == "typed.serialize" and is_result:
        value = cls.model_validate(message["result"], by_name=False)

        def once() -> Any:
            result = value.model_dump(**dump_options)
            return _envelope(message, result).model_dump_json(by_alias=True, exclude_unset=True)

    elif kind == "typed.serialize":
        value = cls.model_validate(
            {"method": message["method"], "params": message["params"]}, by_name=False
        )

        def once() -> Any:
            params = value.params.model_dump(**dump_options)
            return _envelope(message, params).model_dump_json(by_alias=True, exclude_unset=True)

    else:
        raise SystemExit(f"unknown codec kind {kind!r}")
    if kind.endswith("serialize"):
        # Every field of the workload, as it is (the typed result models add their
        # defaults: ``ttlMs``, ``cacheScope``).
        written = orjson.loads(once())
        for key, field in message.items():
            if key == "result":
                assert field.items() <= written["result"].items(), written
            else:
                assert written[key] == field, written

    def run(n: int) -> None:
        for _ in range(n):
            once()

    return run


def codec_batches(kind: str, name: str) -> None:
    """Say ``ready``, then time a batch of ``codec(kind, name)`` per line of stdin."""
    run = codec(kind, name)
    print(f"ready {metadata.version('mcp')}", flush=True)
    while line := sys.stdin.readline():
        n = int(line)
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter_ns()
            run(n)
            elapsed = time.perf_counter_ns() - t0
        finally:
            gc.enable()
        print(elapsed, flush=True)


def main(argv: list[str]) -> None:
    """``server [--high-level]``, ``server-http MODE``, ``worker TARGET IN_FLIGHT`` or
    ``codec KIND MESSAGE``."""
    if argv[:1] == ["codec"] and len(argv) == 3:
        codec_batches(argv[1], argv[2])
    elif argv[:1] == ["server"]:
        anyio.run(serve, "--high-level" in argv)
    elif argv[:1] == ["server-http"] and len(argv) == 2 and argv[1] in HTTP_MODES:
        anyio.run(serve_http, argv[1])
    elif argv[:1] == ["worker"] and len(argv) == 3:
        anyio.run(work, argv[1], int(argv[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

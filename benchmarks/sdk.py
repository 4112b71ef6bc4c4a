"""Group ``sdk``: the same workloads through the official ``mcp`` SDK, next to ours.

The SDK runs on asyncio (through anyio), so each of its measurements runs in a process
of its own (``python -m benchmarks._sdk_app worker ...``, see :mod:`benchmarks._sdk_app`)
that times itself; ours run here, in a Trio thread, in the same run. Every pair is one
``tools/call`` of ``get_forecast`` answered with the canned 1 KB text result, through
each library's *client API* (the SDK's ``mcp.Client.call_tool``, our
``open_client(...).call_tool``), in the legacy era. The SDK's case comes first and is
the reference of ours, so the **ratio is ours / theirs** in µs per call: below 1, ours is
faster.

``sdk.mcp.inmemory`` / ``sdk.ours.inmemory`` (and ``.100``: 100 in flight)
    SDK: low-level ``mcp.server.lowlevel.Server`` (``on_call_tool`` returning the canned
    ``CallToolResult``, ``on_list_tools``, which its client asks once to validate
    results) and ``mcp.Client(server, mode="legacy")``, over its in-memory transport
    (anyio memory streams of message objects, no JSON text). Ours: the low-level
    ``Handlers`` and ``open_client((handlers, config), era="legacy")``, over memory
    channels of JSON bytes.
``sdk.mcp.inmemory.server`` / ``sdk.ours.inmemory.server``
    The high-level servers: the SDK's ``MCPServer`` with a decorated ``get_forecast``
    (``structured_output=False``), our ``mcp_trio.Server`` with the same tool.
``sdk.mcp.stdio`` / ``sdk.ours.stdio`` (and ``.100``)
    The same low-level servers in a child process, over stdin/stdout: the SDK's
    ``stdio_server`` + ``Client(StdioServerParameters(...))``, our ``serve_stdio`` +
    ``open_client([...])``.
``sdk.mcp.http`` / ``sdk.ours.http`` (and ``.100``; ``.json``)
    The same low-level servers in a child process over Streamable HTTP, stateful legacy
    sessions (``initialize`` first, a session id), both answering each POST as one SSE
    event (``text/event-stream``: the SDK's default), or (``.json``, 1 in flight) as an
    ``application/json`` body. SDK: ``python -m benchmarks._sdk_app server-http sse|json``
    (its ``Server.streamable_http_app(json_response=...)``, i.e. Starlette around
    ``StreamableHTTPSessionManager``, run by uvicorn pinned to the h11 parser and the
    asyncio loop, access log off) and ``Client("http://127.0.0.1:PORT/mcp", mode="legacy")``
    (httpx2, its default pool: up to 100 connections, 20 kept idle). Ours:
    ``python -m benchmarks._net_server http-sse|http-json`` (``serve_http``,
    ``response_mode="sse" | "json"``) and ``open_client("http://127.0.0.1:PORT/mcp",
    era="legacy")`` (its default pool: 16 requests in progress, 4 idle). Both clients
    keep the legacy GET stream open beside; both servers bind ``127.0.0.1`` only.
``sdk.mcp.coldstart`` / ``sdk.ours.coldstart``
    Milliseconds from spawning a stdio server (``python -c SCRIPT``) to the first line of
    its answer to ``initialize`` (group ``coldstart``'s method): the SDK's low-level
    ``Server`` with one ``tools/call`` handler under ``anyio.run`` (in the SDK's
    interpreter) against our ``coldstart.STDIO_SCRIPT`` (``serve_stdio`` with one
    handler, in ours). Each script imports only its library.

``sdk.mcp.<kind>.<message>`` / ``sdk.ours.<kind>.<message>``
    Parse and serialize of each workload of group ``core`` (``request``: the 159-byte
    ``tools/call``; ``result``: its 1 KB result; ``tools_list``: 23 KB; ``resource``:
    1 MiB; ``progress``: the notification) with each library's own message types, no
    I/O. ``parse``: the SDK's transport parse,
    ``mcp_types.jsonrpc_message_adapter.validate_json`` (pydantic: the JSON-RPC envelope
    as a model, payload as dicts) against ``core.parse`` (``decode`` + ``classify``).
    ``typed.parse``: that plus the payload's model (``CallToolResult.model_validate``,
    ...) against ``core.typed.parse`` (``loads`` + cattrs ``structure``). ``serialize``:
    the envelope model's ``model_dump_json`` around the dict against ``core.serialize``.
    ``typed.serialize``: ``model_dump(mode="json")`` of the typed value, then that,
    against ``core.typed.serialize``. The SDK's side runs in a ``_sdk_app codec`` worker
    (its interpreter), timed as the others; ours here. The SDK's typed results add
    their defaults (``ttlMs``, ``cacheScope``) to what they write.

The HTTP, cold-start and most parse and serialize pairs are left out of ``--quick`` runs
(those measure ``parse.result`` and ``serialize.result``).

The SDK is found in this interpreter (the ``bench`` extra: ``pip install -e '.[bench]'``,
which pins ``mcp==2.3.0``), or in the one named
by the environment variable ``BENCH_SDK_PYTHON`` (a separate virtualenv with ``mcp`` and
``orjson``, so the SDK's dependencies never mix with ours). Without either the group
prints ``skipped: sdk: the official mcp SDK is not installed (...)``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from importlib import metadata
from typing import Any, Final, final

import trio

from . import _messages, coldstart
from ._harness import Bench, Case, SampledCase, Settings, Skip, TimedCase
from ._servers import SERVER_CONFIG, call_tool_fixture, high_level_server, low_level_handlers
from ._trio import (
    ROOT,
    Driver,
    bench_setup,
    module_command,
    open_net_server,
)

__all__ = ["DESCRIPTION", "SDK_VERSION", "cases", "unavailable"]

DESCRIPTION: Final = "the same workloads through the official `mcp` SDK, ours / theirs"

SDK_VERSION: Final = "2.3.0"
"""The SDK version this group was written against."""
SDK_PYTHON_VARIABLE: Final = "BENCH_SDK_PYTHON"
IN_FLIGHT: Final = 100
_TIMEOUT: Final = 60.0
_VERSION_SCRIPT: Final = "from importlib import metadata; print(metadata.version('mcp'))"


@cache
def _sdk() -> tuple[str, str] | str:
    """``(interpreter, SDK version)``, or why there is none."""
    if importlib.util.find_spec("mcp") is not None:
        try:
            return sys.executable, metadata.version("mcp")
        except metadata.PackageNotFoundError:
            return "a module named 'mcp' is importable, but it is not the SDK's distribution"
    python = os.environ.get(SDK_PYTHON_VARIABLE)
    if not python:
        return "the official mcp SDK is not installed (pip install -e '.[bench]')"
    try:
        found = subprocess.run(
            [python, "-c", _VERSION_SCRIPT],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except OSError as exc:
        return f"{SDK_PYTHON_VARIABLE}={python!r} cannot be run ({exc})"
    if found.returncode != 0:
        return f"{SDK_PYTHON_VARIABLE}={python!r} has no mcp SDK"
    return python, found.stdout.strip()


def unavailable() -> str | None:
    """Why this group cannot run here: no SDK."""
    found = _sdk()
    return found if isinstance(found, str) else None


# -- the SDK, in a worker process ----------------------------------------------------------


@final
class _SdkWorker:
    """A ``_sdk_app worker`` (or ``codec``) process: ``run(n)`` returns the nanoseconds
    of ``n`` calls (or parses, or serializations)."""

    def __init__(self, python: str, *args: str) -> None:
        self._process = subprocess.Popen(
            [python, "-m", f"{__package__}._sdk_app", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        ready = self._readline()
        if not ready.startswith("ready "):
            self.close()
            raise RuntimeError(f"the SDK worker did not start: {ready!r}")

    def _readline(self) -> str:
        assert self._process.stdout is not None
        return self._process.stdout.readline()

    def run(self, n: int) -> int:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{n}\n")
        self._process.stdin.flush()
        answer = self._readline()
        if not answer:
            raise RuntimeError("the SDK worker died (see its traceback above)")
        return int(answer)

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _sdk_python() -> str:
    found = _sdk()
    assert not isinstance(found, str), found
    return found[0]


def _theirs(*args: str) -> Callable[[], Bench]:
    """A setup running ``python -m benchmarks._sdk_app ARGS`` with the SDK's interpreter."""

    def setup() -> Bench:
        worker = _SdkWorker(_sdk_python(), *args)
        return Bench(worker.run, close=worker.close, self_timed=True)

    return setup


# -- ours ----------------------------------------------------------------------------------


async def _ours(target: str, in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    if target.startswith("http-"):
        # The same server kinds as group ``http``, reached through open_client.
        async with open_net_server(target) as (port, pid):
            url = f"http://127.0.0.1:{port}/mcp"
            await call_tool_fixture(url, in_flight, server_pid=pid, task_status=task_status)
        return
    where: Any
    if target == "inmemory":
        where = (low_level_handlers(), SERVER_CONFIG)
    elif target == "inmemory-high":
        where = high_level_server()
    else:
        where = module_command("_stdio_server")
    cwd = ROOT if target == "stdio" else None
    await call_tool_fixture(where, in_flight, cwd=cwd, task_status=task_status)


# -- cold start ----------------------------------------------------------------------------

SDK_COLDSTART_SCRIPT: Final = """
import anyio, mcp_types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
async def call_tool(ctx, params):
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="ok")])
server = Server("bench-server", version="1", on_call_tool=call_tool)
async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
anyio.run(main)
"""
"""The SDK's counterpart of ``coldstart.STDIO_SCRIPT``: its low-level server with one
``tools/call`` handler serving stdio, importing only the SDK."""


def _coldstart_sampler(python: Callable[[], str], script: str) -> Callable[[], float]:
    """Samples of ``python -c script``'s cold start, measured as group ``coldstart``
    measures ours."""
    return coldstart.sampler(lambda: [python(), "-c", script])


# -- the group -----------------------------------------------------------------------------

PAIRS: Final = (
    # suffix, target, in flight, what theirs is, what ours is
    ("inmemory", "inmemory", 1, "low-level Server + Client, memory streams", "Handlers"),
    ("inmemory.100", "inmemory", IN_FLIGHT, "the same, 100 in flight", "Handlers"),
    ("inmemory.server", "inmemory-high", 1, "MCPServer + Client, memory streams", "Server"),
    ("stdio", "stdio", 1, "low-level Server child + Client, stdio", "serve_stdio child"),
    ("stdio.100", "stdio", IN_FLIGHT, "the same, 100 in flight", "serve_stdio child"),
    ("http", "http-sse", 1, "low-level Server + uvicorn child, SSE", "serve_http child, SSE"),
    ("http.100", "http-sse", IN_FLIGHT, "the same, 100 in flight", "serve_http child, SSE"),
    ("http.json", "http-json", 1, "the same, json_response=True", "serve_http child, JSON"),
)

CODEC_KINDS: Final = (
    # kind, what theirs does, what ours does (group core's case of the same name)
    ("parse", "jsonrpc_message_adapter.validate_json", "decode+classify"),
    ("typed.parse", "validate_json + the payload's model_validate", "loads+structure"),
    ("serialize", "envelope model.model_dump_json", "envelope + dumps"),
    ("typed.serialize", "model_dump + envelope model_dump_json", "unstructure + dumps"),
)
"""The parse and serialize pairs, for each message of :data:`_messages.MESSAGES`."""

COLDSTART: Final = "coldstart"
"""The suffix of the cold-start pair (sampled, not timed)."""

QUICK: Final = frozenset({"inmemory", "stdio", "parse.result", "serialize.result"})
"""The pairs a ``--quick`` run measures (each SDK case starts an interpreter with the SDK;
the HTTP pairs a server child too; the cold start spawns a dozen)."""


def _codec_pairs() -> list[tuple[str, str, _messages.Message]]:
    """``(suffix, kind, message)`` of each parse and serialize pair."""
    return [(f"{kind}.{m.name}", kind, m) for m in _messages.MESSAGES for kind, *_ in CODEC_KINDS]


def pair_names() -> list[str]:
    """The suffixes of every pair: the calls, parse and serialize, the cold start last."""
    return [suffix for suffix, *_ in PAIRS] + [s for s, *_ in _codec_pairs()] + [COLDSTART]


def cases(settings: Settings) -> list[Case | Skip]:
    """Each SDK case, then ours with the SDK's as its reference."""
    found = _sdk()
    version = SDK_VERSION if isinstance(found, str) else found[1]
    result: list[Case | Skip] = []
    for suffix, target, in_flight, theirs, ours in PAIRS:
        if settings.quick and suffix not in QUICK:
            result.append(Skip(name=f"sdk.*.{suffix}", reason="not in --quick runs"))
            continue
        flight = f"{in_flight} in flight"
        result += [
            TimedCase(
                name=f"sdk.mcp.{suffix}",
                title=f"mcp {version}: {theirs}, call_tool (µs/call)",
                setup=_theirs("worker", target, str(in_flight)),
                ops_per_call=in_flight,
            ),
            TimedCase(
                name=f"sdk.ours.{suffix}",
                title=f"mcp_trio: {ours} + open_client().call_tool, {flight} (ours / theirs)",
                setup=bench_setup(_ours, target, in_flight),
                ops_per_call=in_flight,
                reference=f"sdk.mcp.{suffix}",
            ),
        ]
    what = {kind: (theirs, ours) for kind, theirs, ours in CODEC_KINDS}
    for suffix, kind, m in _codec_pairs():
        if settings.quick and suffix not in QUICK:
            result.append(Skip(name=f"sdk.*.{suffix}", reason="not in --quick runs"))
            continue
        theirs, ours = what[kind]
        size = f"{len(m.data):,} B"
        result += [
            TimedCase(
                name=f"sdk.mcp.{suffix}",
                title=f"mcp {version}: {theirs} of the {m.name} message ({size}) (µs)",
                setup=_theirs("codec", kind, m.name),
            ),
            TimedCase(
                name=f"sdk.ours.{suffix}",
                title=f"mcp_sansio: {ours}, as core.{suffix} (ours / theirs)",
                setup=functools.partial(_messages.SETUPS[kind], m),
                reference=f"sdk.mcp.{suffix}",
            ),
        ]
    if settings.quick:
        result.append(Skip(name=f"sdk.*.{COLDSTART}", reason="not in --quick runs"))
        return result
    result += [
        SampledCase(
            name=f"sdk.mcp.{COLDSTART}",
            title=f"mcp {version}: python -c low-level Server, stdio: spawn → initialize answered",
            sample=_coldstart_sampler(_sdk_python, SDK_COLDSTART_SCRIPT),
            unit="ms",
        ),
        SampledCase(
            name=f"sdk.ours.{COLDSTART}",
            title="mcp_trio: python -c serve_stdio (Handlers): the same (ours / theirs)",
            sample=_coldstart_sampler(lambda: sys.executable, coldstart.STDIO_SCRIPT),
            unit="ms",
            reference=f"sdk.mcp.{COLDSTART}",
        ),
    ]
    return result

"""Group ``coldstart``: spawn a stdio server and get its ``initialize`` answered.

Each sample spawns a fresh interpreter (this one, ``sys.executable``, with the same
environment) running a ``python -c`` script, writes the client's ``initialize`` request
(the bytes ``mcp_trio``'s legacy client sends) to its stdin at once, and stops the clock
when the first line comes back on its stdout. Then it closes stdin and waits for the
child to exit (untimed). Milliseconds, median over the rounds.

``coldstart.floor``
    The least a Python stdio server can do: import ``trio`` and ``orjson``, ``trio.run``
    a function that reads one line from stdin (``trio.lowlevel.FdStream``), loads it and
    answers with a canned ``InitializeResult`` under its id.
``coldstart.stdio``
    ``import mcp_trio``; ``trio.run(mcp_trio.serve_stdio, handlers)`` with one
    low-level ``tools/call`` handler (no ``mcp-trio`` command, no ``benchmarks``
    import): the import of the binding and the core, the session start, the handshake.
``coldstart.server``
    The same with the high-level ``mcp_trio.Server`` and one decorated tool (its JSON
    Schema is built at registration): informational.

The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed from
their environment) and one untimed spawn of each script comes first, so every figure
is a start with warm ``__pycache__`` and a warm page cache, as after an install.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Final

from mcp_sansio import Connection

from ._harness import Case, SampledCase, Settings, Skip
from ._servers import CLIENT_CONFIG
from ._trio import ROOT

__all__ = ["DESCRIPTION", "cases", "sampler", "unavailable"]

DESCRIPTION: Final = "spawn a stdio server and get initialize answered, against a bare interpreter"

_TIMEOUT: Final = 60.0

FLOOR_SCRIPT: Final = """
import os, trio, orjson
async def main():
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    line = b""
    while not line.endswith(b"\\n"):
        chunk = await stdin.receive_some(65536)
        if not chunk:
            return
        line += chunk
    request = orjson.loads(line)
    result = {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "bench-server", "version": "1"},
    }
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    await stdout.send_all(orjson.dumps(answer) + b"\\n")
    while await stdin.receive_some(65536):
        pass
trio.run(main)
"""
"""The floor: a Trio + orjson process that answers one line."""

STDIO_SCRIPT: Final = """
import functools, trio, mcp_trio
from mcp_sansio import ConnectionConfig
handlers = mcp_trio.Handlers()
@handlers.on_request("tools/call")
async def call_tool(ctx):
    return {"content": [{"type": "text", "text": "ok"}], "isError": False}
config = ConnectionConfig(
    implementation={"name": "bench-server", "version": "1"}, capabilities={"tools": {}}
)
trio.run(functools.partial(mcp_trio.serve_stdio, handlers, connection_config=config))
"""
"""Ours: the low-level binding serving stdio, no ``mcp-trio`` command."""

SERVER_SCRIPT: Final = """
import trio, mcp_trio
server = mcp_trio.Server("bench-server", "1")
@server.tool()
async def get_forecast(city: str, days: int, units: str, note: str) -> str:
    '''The forecast for a city.'''
    return "ok"
trio.run(server.serve_stdio)
"""
"""Ours, high-level: ``mcp_trio.Server`` with one tool."""


def unavailable() -> str | None:
    """Why this group cannot run here."""
    if sys.platform == "win32":
        return "measured with POSIX pipes"
    return None


def initialize_request() -> bytes:
    """The ``initialize`` line ``mcp_trio``'s legacy client writes first."""
    client = Connection("client", CLIENT_CONFIG)
    client.start(now=0.0)
    (message,) = client.data_to_send()
    return message + b"\n"


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _spawn_once(command: list[str], request: bytes, env: dict[str, str]) -> float:
    """Milliseconds from spawning ``command`` to the first line of its answer; then close
    its stdin and reap it, untimed."""
    t0 = time.perf_counter_ns()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    try:
        process.stdin.write(request)
        process.stdin.flush()
        line = process.stdout.readline()
        elapsed = time.perf_counter_ns() - t0
        process.stdin.close()
        stderr = process.stderr.read()
        process.wait(_TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if b'"result"' not in line or b'"protocolVersion"' not in line:
        raise RuntimeError(f"no initialize result: {line[:200]!r}; stderr: {stderr[-2000:]!r}")
    return elapsed / 1e6


def sampler(command: Callable[[], list[str]]) -> Callable[[], float]:
    """Samples of the cold start of the stdio server ``command()`` starts (milliseconds
    from spawn to the first line of its ``initialize`` answer); the first call spawns it
    once more, untimed, before its sample (``__pycache__`` and the page cache warm)."""
    request = initialize_request()
    env = _environment()
    warm: list[bool] = []

    def sample() -> float:
        if not warm:
            _spawn_once(command(), request, env)
            warm.append(True)
        return _spawn_once(command(), request, env)

    return sample


def _sampler(script: str) -> Callable[[], float]:
    return sampler(lambda: [sys.executable, "-c", script])


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, the floor first."""
    del settings  # --quick only shrinks the rounds
    return [
        SampledCase(
            name="coldstart.floor",
            title="floor: python -c (trio + orjson) answering one line",
            sample=_sampler(FLOOR_SCRIPT),
            unit="ms",
        ),
        SampledCase(
            name="coldstart.stdio",
            title="python -c serve_stdio (Handlers): spawn → initialize answered",
            sample=_sampler(STDIO_SCRIPT),
            unit="ms",
            reference="coldstart.floor",
        ),
        SampledCase(
            name="coldstart.server",
            title="python -c Server + one tool: spawn → initialize answered (informational)",
            sample=_sampler(SERVER_SCRIPT),
            unit="ms",
            reference="coldstart.floor",
        ),
    ]

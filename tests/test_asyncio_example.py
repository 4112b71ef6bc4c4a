"""``examples/asyncio_stdio_server.py``: the core driven by hand from asyncio, run as a
real process on pipes (as an MCP client spawns a server), both eras."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp_sansio._json import dumps, loads

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "asyncio_stdio_server.py"
IO_TIMEOUT = 60  # seconds, absolute: a real process on a shared machine
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _run(messages: list[Any], last: Any) -> dict[Any, Any]:
    """Feed ``messages`` and then ``last`` with no final newline; the answers by id."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    body = b"".join(dumps(m) + b"\n" for m in messages) + dumps(last)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        input=body,
        capture_output=True,
        env=env,
        timeout=IO_TIMEOUT,
        check=True,
    )
    answers = [loads(line) for line in done.stdout.splitlines()]
    assert all("id" in a for a in answers), answers  # (no notification here)
    assert len({a["id"] for a in answers}) == len(answers)  # one answer per request
    return {a["id"]: a for a in answers}


def _call(rid: int, arguments: Any, **extra: Any) -> dict[str, Any]:
    params = {"name": "add", "arguments": arguments, **extra}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def test_the_asyncio_example_serves_a_legacy_session() -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    answers = _run(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            _call(3, {"a": 2, "b": 3}),
            _call(4, {"a": "2", "b": 3}),  # peer input: refused, not a crash
            {"jsonrpc": "2.0", "id": 5, "method": "ping"},
        ],
        {"jsonrpc": "2.0", "id": 6, "method": "prompts/list"},  # the unterminated last line
    )
    assert answers[1]["result"]["serverInfo"]["name"] == "asyncio-adder"
    assert [t["name"] for t in answers[2]["result"]["tools"]] == ["add"]
    assert answers[3]["result"]["content"][0]["text"] == "5"
    assert answers[4]["error"]["code"] == -32602
    assert answers[5]["result"] == {}
    assert answers[6]["error"]["code"] == -32601


def test_the_asyncio_example_serves_modern_requests() -> None:
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    answers = _run([discover], _call(2, {"a": 40, "b": 2}, _meta=META))
    assert "2026-07-28" in answers[1]["result"]["supportedVersions"]
    assert answers[2]["result"]["content"][0]["text"] == "42"
    assert answers[2]["result"]["resultType"] == "complete"

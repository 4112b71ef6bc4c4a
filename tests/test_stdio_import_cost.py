"""What a stdio server imports: the cold start of ``python -c "...serve_stdio..."``.

A stdio server is spawned per client session, so its import is on the clock of every
start (``benchmarks coldstart``). These tests pin what that import does, in a fresh
interpreter: which of our modules it loads, and that every attrs class it creates is
public API (an attrs class costs ~0.4 ms at import; private records on this path are
plain slotted classes), and which modules compile regular expressions at import.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_sansio
import mcp_sansio.http
import mcp_sansio.types
import mcp_trio

SRC = Path(mcp_trio.__file__).resolve().parent.parent

# What a stdio server script touches (benchmarks/coldstart.py's STDIO_SCRIPT), then a
# report of the modules loaded and the attrs classes defined in ours.
PROBE = """
import json, re, sys
import attrs
compiled_by = []
def compile(pattern, flags=0, _compile=re.compile):
    compiled_by.append(sys._getframe(1).f_globals.get("__name__"))
    return _compile(pattern, flags)
re.compile = compile
import mcp_trio
from mcp_sansio import ConnectionConfig
mcp_trio.Handlers, mcp_trio.serve_stdio, mcp_trio.SessionConfig
ours = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp_sansio", "mcp_trio"))
classes = sorted(
    f"{name}.{value.__qualname__}"
    for name in ours
    for value in list(vars(sys.modules[name]).values())
    if isinstance(value, type) and value.__module__ == name and attrs.has(value)
)
ours_compiling = sorted({m for m in compiled_by if m in ours})
print(json.dumps({"modules": sorted(sys.modules), "attrs_classes": classes, "re": ours_compiling}))
"""

# Internal attrs classes still on the path, each for a reason: RequestStateCodec keeps
# its keys out of repr; SubscriptionFilter converts its fields and is compared by value;
# Task is copied with attrs.evolve; UpdateParams is compared by value in the tasks tests.
INTERNAL_ATTRS_ALLOWED = frozenset(
    {
        "mcp_sansio._modern.RequestStateCodec",
        "mcp_sansio._modern.SubscriptionFilter",
        "mcp_sansio._tasks.Task",
        "mcp_sansio._tasks.UpdateParams",
    }
)

# Loaded only by what needs them (the high-level Server, the HTTP and WebSocket
# transports, the typed models, schema building): never by a bare stdio server.
NOT_IMPORTED = (
    "cattrs",
    "h11",
    "mcp_sansio._http_server",
    "mcp_sansio._serde",
    "mcp_sansio.http",
    "mcp_sansio.types",
    "mcp_trio._client",
    "mcp_trio._http_server",
    "mcp_trio._jsonschema",
    "mcp_trio._server",
    "mcp_trio._websocket",
)


@pytest.fixture(scope="module")
def probe() -> dict[str, list[str]]:
    # (No empty entry: it would put the current directory on the probe's path.)
    path = [str(SRC), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    report: dict[str, list[str]] = json.loads(done.stdout)
    return report


def test_the_probe_sees_the_stdio_path(probe: dict[str, list[str]]) -> None:
    assert {"mcp_trio._stdio", "mcp_trio._session", "mcp_sansio._connection"} <= set(
        probe["modules"]
    )
    assert "mcp_sansio._events.RequestReceived" in probe["attrs_classes"]


def test_a_stdio_server_does_not_import_the_heavy_modules(probe: dict[str, list[str]]) -> None:
    assert sorted(set(NOT_IMPORTED) & set(probe["modules"])) == []


def _class(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_attrs_class_on_the_stdio_path_is_public(probe: dict[str, list[str]]) -> None:
    exported = {
        id(getattr(module, name))
        for module in (mcp_sansio, mcp_sansio.http, mcp_sansio.types, mcp_trio)
        for name in module.__all__
    }
    private = [
        name
        for name in probe["attrs_classes"]
        if id(_class(name)) not in exported and name not in INTERNAL_ATTRS_ALLOWED
    ]
    assert private == [], private


def test_only_the_receive_path_compiles_patterns_at_import(probe: dict[str, list[str]]) -> None:
    # (The receive fast path's patterns serve the first message anyway; the others are
    # compiled by ``re`` on first use: extension ids, surrogates, terminal escapes.)
    assert probe["re"] == ["mcp_sansio._conn_receive"]

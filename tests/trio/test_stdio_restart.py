"""A stdio server that exits unexpectedly is not restarted by the client
(``2026-07-28/basic/transports/stdio``, "Unexpected Termination": the client SHOULD
restart it): every later call raises ``ServerExited``, and restarting is the
application's, with the pattern the README shows (run here as written)."""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import mcp_trio

README = Path(__file__).resolve().parents[2] / "README.md"
IO_TIMEOUT = 20

# Appends a line to the file it is given each time it starts; its tool "once" kills
# the process the first time (``always``: every time), and answers "ok" after that.
SERVER = r"""
import os, sys
import trio
import mcp_trio

log, mode = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write("start\n")
server = mcp_trio.Server("restartable")

@server.tool()
async def once() -> str:
    with open(log) as f:
        starts = f.read().count("start")
    if mode == "always" or starts == 1:
        sys.stderr.write("dying\n")
        sys.stderr.flush()
        os._exit(3)
    return "ok"

trio.run(server.serve_stdio)
"""


def readme_pattern() -> Callable[..., Awaitable[Any]]:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [block] = [b for b in blocks if "def call_restarting" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, str(README), "exec"), namespace)
    pattern: Callable[..., Awaitable[Any]] = namespace["call_restarting"]
    return pattern


def command(log: Path, mode: str) -> list[str]:
    return [sys.executable, "-c", SERVER, str(log), mode]


async def test_a_server_that_exited_is_not_restarted(tmp_path: Path) -> None:
    log = tmp_path / "starts"
    with trio.fail_after(IO_TIMEOUT):
        async with mcp_trio.open_client(command(log, "once"), era="modern") as client:
            with pytest.raises(mcp_trio.ServerExited) as caught:
                await client.call_tool("once", {})
            assert caught.value.returncode == 3
            assert b"dying" in caught.value.stderr_tail
            with pytest.raises(mcp_trio.ServerExited):
                await client.list_tools()
    assert log.read_text().count("start") == 1


async def test_the_readme_pattern_restarts_it(tmp_path: Path) -> None:
    call_restarting = readme_pattern()
    log = tmp_path / "starts"
    with trio.fail_after(IO_TIMEOUT):
        result = await call_restarting(command(log, "once"), "once", {})
    assert result.text == "ok"
    assert log.read_text().count("start") == 2


async def test_the_readme_pattern_gives_up_on_a_server_that_keeps_dying(
    tmp_path: Path,
) -> None:
    call_restarting = readme_pattern()
    log = tmp_path / "starts"
    with trio.fail_after(IO_TIMEOUT), pytest.raises(mcp_trio.ServerExited):
        await call_restarting(command(log, "always"), "once", {}, attempts=2)
    assert log.read_text().count("start") == 2

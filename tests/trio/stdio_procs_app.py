"""A stdio server for the process tests: ``python stdio_procs_app.py [mode]``.

Modes: ``normal``; ``junk`` (writes 200 KB of lines that are not JSON to stdout
before it reads anything, as a chatty start-up does); ``helper`` (starts a helper
process that inherits its stdout and stderr, and says ``helper pid N`` on stderr,
before it serves); ``linger`` (stays 60 s after its stdin ends: only a signal stops
it).

Its tools: ``crash`` exits at once (status 3); ``pid`` answers its process id; ``wait``
says ``server pid N`` on stderr and never answers; any other runs a child process that
reads the stdin it inherits, as many programs do (a prompt, ``ssh``, ``git``), and
answers with what the child read (or how it failed). After serving, it says on stderr
whether fd 0 is the stdin it started with again, and blocking.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import trio

from mcp_sansio import ConnectionConfig
from mcp_trio import Handlers, RequestContext, serve_stdio

_READ_STDIN = "import sys; sys.stdout.write(repr(sys.stdin.buffer.read()))"


def make_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        names = ("crash", "pid", "wait", "child-stdin")
        return {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in names]}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        if ctx.params["name"] == "crash":
            os._exit(3)
        if ctx.params["name"] == "wait":
            sys.stderr.write(f"server pid {os.getpid()}\n")
            sys.stderr.flush()
            await trio.sleep_forever()
        if ctx.params["name"] == "pid":
            return {"content": [{"type": "text", "text": str(os.getpid())}]}
        # (blocking the loop, as a plain def tool run in a thread would block its own)
        child = subprocess.run(
            [sys.executable, "-c", _READ_STDIN], capture_output=True, timeout=10, check=False
        )
        text = (child.stdout + child.stderr).decode()
        return {"content": [{"type": "text", "text": text}]}

    return handlers


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "junk":
        with os.fdopen(os.dup(1), "wb") as out:  # (blocks while the client does not read)
            out.write(b"starting up, not JSON\n" * 10_000)
    if mode == "helper":
        helper = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)
        sys.stderr.write(f"helper pid {helper.pid}\n")
        sys.stderr.flush()
    before = os.fstat(0)
    config = ConnectionConfig(
        implementation={"name": "stdio-fds", "version": "1"}, capabilities={"tools": {}}
    )
    trio.run(lambda: serve_stdio(make_handlers(), connection_config=config))
    after = os.fstat(0)
    same = (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    sys.stderr.write(f"fd 0 restored: {same}, blocking: {os.get_blocking(0)}\n")
    if mode == "linger":
        time.sleep(60)


if __name__ == "__main__":
    main()

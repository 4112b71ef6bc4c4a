"""A tiny MCP server on stdio for the transport tests: ``python stdio_server_app.py [mode]``.

Modes: ``normal``; ``ignore-stdin-close`` (keeps running after stdin ends, until
SIGTERM); ``ignore-sigterm`` (also ignores SIGTERM, until SIGKILL); ``exit-at-once``
(writes to stderr and exits 5 before reading anything).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

import trio

from mcp_sansio import ConnectionConfig
from mcp_trio import Handlers, RequestContext, SessionConfig, serve_stdio


def make_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        name = ctx.params["name"]
        if name == "echo":
            print("a stray print() must not reach the protocol stream")
            return {"content": [{"type": "text", "text": ctx.params["arguments"]["text"]}]}
        if name == "crash":
            sys.stderr.write("fatal: the server broke\n")
            sys.stderr.flush()
            os._exit(3)
        raise ValueError(name)

    return handlers


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "normal"
    if mode == "exit-at-once":
        sys.stderr.write("cannot start: no configuration\n")
        sys.exit(5)
    if mode == "ignore-sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    config = ConnectionConfig(
        implementation={"name": "stdio-test-server", "version": "1"}, capabilities={"tools": {}}
    )
    trio.run(
        lambda: serve_stdio(
            make_handlers(),
            config=SessionConfig(shutdown_grace_period=1),
            connection_config=config,
        )
    )
    if mode in ("ignore-stdin-close", "ignore-sigterm"):
        time.sleep(60)


if __name__ == "__main__":
    main()

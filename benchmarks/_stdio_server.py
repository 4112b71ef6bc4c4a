"""The measured stdio server: ``python -m benchmarks._stdio_server [--high-level]``.

Serves one session on stdin/stdout with :func:`mcp_trio.serve_stdio` and the low-level
handler table of :mod:`benchmarks._servers` (``--high-level``: the ``mcp_trio.Server``
with the ``get_forecast`` tool). Ends at the end of stdin.
"""

from __future__ import annotations

import functools
import sys

import trio

import mcp_trio

from ._servers import SERVER_CONFIG, high_level_server, low_level_handlers


def main(argv: list[str]) -> None:
    """Serve until stdin ends."""
    if "--high-level" in argv:
        trio.run(high_level_server().serve_stdio)
    else:
        trio.run(
            functools.partial(
                mcp_trio.serve_stdio, low_level_handlers(), connection_config=SERVER_CONFIG
            )
        )


if __name__ == "__main__":
    main(sys.argv[1:])

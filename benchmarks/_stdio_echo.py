"""The stdio floor's server: a Trio newline-JSON echo, ``python -m benchmarks._stdio_echo``.

Reads chunks of stdin, splits them into lines, and for each request writes the canned
1 KB result under the request's id, one ``send_all`` per answer (as the MCP stdio server
writes one message at a time). No protocol, no validation: the least a stdio server
can do. Ends at the end of stdin.
"""

from __future__ import annotations

import os

import trio

from ._trio import floor_answer


async def main() -> None:
    """Answer every line of stdin until it ends."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    answer, receive_some, send_all = floor_answer, stdin.receive_some, stdout.send_all
    pending = b""
    while chunk := await receive_some(65_536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            await send_all(answer(line) + b"\n")


if __name__ == "__main__":
    trio.run(main)

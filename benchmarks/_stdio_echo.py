"""The stdio floors' server: a Trio newline-JSON echo, ``python -m benchmarks._stdio_echo``.

Reads chunks of stdin, splits them into lines, and for each request writes the canned
1 KB result under the request's id. No protocol, no validation: the least a stdio server
can do. Ends at the end of stdin.

Plain (``stdio.floor.*``): ``FdStream.receive_some`` and one ``send_all`` per answer
(Trio's ordinary calls, which always yield). ``--tight`` (``stdio.floor.tight.*``): the
cheapest paths, as ``serve_stdio`` takes them: ``os.read`` on the non-blocking pipe
(``wait_readable`` only when it is empty) and one ``os.write`` for all the answers to
what one read brought (``wait_writable`` only when the pipe is full).
"""

from __future__ import annotations

import os
import sys

import trio

from ._trio import floor_answer, read_fd, write_fd


async def main() -> None:
    """Answer every line of stdin until it ends, one write per answer."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    answer, receive_some, send_all = floor_answer, stdin.receive_some, stdout.send_all
    pending = b""
    while chunk := await receive_some(65_536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            await send_all(answer(line) + b"\n")


async def main_tight() -> None:
    """Answer every line of stdin until it ends, one write per read."""
    stdin, stdout = os.dup(0), os.dup(1)
    os.set_blocking(stdin, False)
    os.set_blocking(stdout, False)
    answer, pending = floor_answer, b""
    while chunk := await read_fd(stdin):
        *lines, pending = (pending + chunk).split(b"\n")
        if lines:
            await write_fd(stdout, b"".join([answer(line) + b"\n" for line in lines]))


if __name__ == "__main__":
    trio.run(main_tight if "--tight" in sys.argv[1:] else main)

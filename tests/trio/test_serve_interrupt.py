"""Ctrl-C while serving: ``trio.run(serve_*)`` raises a plain ``KeyboardInterrupt``.

Each case runs in its own process, which interrupts itself (SIGINT) as soon as it
serves (scheduled from ``task_status.started``), so no timing is involved.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mcp_trio._util import plain_interrupt

IO_TIMEOUT = 30  # seconds, absolute: a fresh interpreter imports the library

CHILD = """
import signal, sys, traceback
from functools import partial
import trio, mcp_trio

class InterruptOnStart:
    def started(self, value=None):
        # Ctrl-C once serving: the signal comes from Trio's run loop, which hands the
        # KeyboardInterrupt to the main task where it next waits (as a real one does).
        token = trio.lowlevel.current_trio_token()
        token.run_sync_soon(signal.raise_signal, signal.SIGINT)

# As at a terminal: Ctrl-C raises KeyboardInterrupt, even when the test runner was
# started with SIGINT ignored (a background job of a non-interactive shell, nohup),
# which a child inherits.
signal.signal(signal.SIGINT, signal.default_int_handler)

server = mcp_trio.Server("interrupted")
serve = {
    "Server.serve_stdio": server.serve_stdio,
    "Server.serve_http": partial(server.serve_http, port=0),
    "Server.serve_websocket": partial(server.serve_websocket, port=0),
    "serve_stdio": partial(mcp_trio.serve_stdio, server.handlers()),
    "serve_http": partial(mcp_trio.serve_http, server.handlers(), port=0),
    "serve_websocket": partial(mcp_trio.serve_websocket, server.handlers(), port=0),
}[sys.argv[1]]
try:
    trio.run(partial(serve, task_status=InterruptOnStart()))
except KeyboardInterrupt as exc:
    # How many times plain_interrupt re-raised it on its way out (once is enough).
    frames = traceback.walk_tb(exc.__traceback__)
    unwrapped = [f for f, _ in frames if f.f_code.co_qualname == "plain_interrupt.<locals>.wrapper"]
    print("unwrapped", len(unwrapped), file=sys.stderr)
    print("caught", type(exc).__name__, file=sys.stderr)
except BaseException as exc:
    print("caught", type(exc).__name__, repr(exc), file=sys.stderr)
"""

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.mark.parametrize(
    "which",
    [
        "Server.serve_stdio",
        "Server.serve_http",
        "Server.serve_websocket",
        "serve_stdio",
        "serve_http",
        "serve_websocket",
    ],
)
def test_ctrl_c_is_a_plain_keyboard_interrupt(which: str) -> None:
    # stdin stays open (we hold the pipe's write end): stdio serves until interrupted.
    stdin, hold = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, which],
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(stdin)
        try:
            _, err = proc.communicate(timeout=IO_TIMEOUT)
        finally:
            proc.kill()
            proc.wait()
    finally:
        os.close(hold)
    lines = err.decode().strip().splitlines()
    assert lines[-2:] == ["unwrapped 1", "caught KeyboardInterrupt"], err.decode()
    assert proc.returncode == 0


async def test_an_interrupt_nested_in_groups_comes_out_bare() -> None:
    interrupt = KeyboardInterrupt()

    @plain_interrupt
    async def serve() -> None:
        raise BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [interrupt])])

    with pytest.raises(KeyboardInterrupt) as caught:
        await serve()
    assert caught.value is interrupt


async def test_an_interrupt_beside_an_error_keeps_its_group() -> None:
    group = BaseExceptionGroup("nursery", [KeyboardInterrupt(), ValueError("bug")])

    @plain_interrupt
    async def serve() -> None:
        raise group

    with pytest.raises(BaseExceptionGroup) as caught:
        await serve()
    assert caught.value is group

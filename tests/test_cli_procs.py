"""``mcp-trio`` and the processes around it: closed descriptors, signals.

Subprocesses as a user (or a supervisor) runs them, each with a timeout.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from contextlib import suppress
from typing import IO

import pytest

from .test_cli import NOTES, ROOT, TIMEOUT, assert_error

APP = str(ROOT / "tests" / "trio" / "stdio_procs_app.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors and signals")


@pytest.mark.parametrize(("closing", "which"), [("<&-", "stdin (fd 0)"), (">&-", "stdout (fd 1)")])
def test_run_stdio_with_stdin_or_stdout_closed_is_one_error_line(closing: str, which: str) -> None:
    # (Before: a traceback from sys.stdin.isatty(), or, stdout closed, fds crossed.)
    result = subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", sys.executable, "-m", "mcp_trio", "run", NOTES],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert_error(result, 1, f"the stdio transport needs stdin and stdout: {which} is closed")


def _read_until(stream: IO[bytes], pattern: bytes, timeout: float) -> re.Match[bytes]:
    """Read ``stream`` (a pipe) until ``pattern`` matches what came, within ``timeout``."""
    seen = b""
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, seen)) is None:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"not seen within {timeout} s: {seen!r}"
        chunk = os.read(stream.fileno(), 65_536)
        assert chunk, f"the stream ended first: {seen!r}"
        seen += chunk
    return found


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the server with a pidfd")
def test_sigterm_stops_a_client_command_and_the_server_it_spawned() -> None:
    # The server (mode ``linger``) stays after its stdin ends: only our close's signals
    # stop it. (Before: the command died of SIGTERM at once, the server orphaned.)
    server_command = f"{shlex.quote(sys.executable)} {shlex.quote(APP)} linger"
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_trio", "call", server_command, "wait", "-v"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    server = pidfd = None
    try:
        assert process.stderr is not None
        server = int(_read_until(process.stderr, rb"server pid (\d+)", TIMEOUT)[1])
        pidfd = os.pidfd_open(server)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=TIMEOUT)
        assert process.returncode == 143
        assert err.decode().splitlines()[-1] == "mcp-trio: error: terminated"
        assert select.select([pidfd], [], [], 10)[0] == [pidfd]  # the server exited
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if server is not None:
            with suppress(ProcessLookupError):
                os.kill(server, signal.SIGKILL)
        if pidfd is not None:
            os.close(pidfd)

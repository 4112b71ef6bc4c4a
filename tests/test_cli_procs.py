"""``mcp-trio`` and the processes around it: closed descriptors, signals.

Subprocesses as a user (or a supervisor) runs them, each with a timeout.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .test_cli import NOTES, ROOT, TIMEOUT, assert_error

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

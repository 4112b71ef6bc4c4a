"""``mcp-trio call --timeout``: the time the user takes to answer the server's question
is not counted, in the legacy era as in the modern one.

On a pseudo-terminal, as a user: the server asks (``[y/n]``), the user waits past the
call's ``--timeout`` before answering, and the call still completes (it used to fail
with "tools/call timed out" in the middle of the question, legacy era only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Literal

import pytest

from .test_cli import NOTES, ROOT, TIMEOUT, _read_terminal


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_slow_answer_does_not_time_the_call_out(era: Literal["legacy", "modern"]) -> None:
    pty = pytest.importorskip("pty")
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "mcp_trio", "call", NOTES, "delete_note", "-a", "note_id=3"]
    argv += ["--timeout", "1", "--era", era]
    with subprocess.Popen(argv, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal) as proc:
        os.close(terminal)
        try:
            deadline = time.monotonic() + TIMEOUT
            question = _read_terminal(controller, b"[y/n]: ", deadline)
            assert b"The server asks: Delete note 3, 'Groceries'?" in question
            # The user thinks for longer than --timeout: nothing may interrupt the question.
            meanwhile = _read_terminal(controller, b"timed out", time.monotonic() + 2.0)
            assert b"timed out" not in meanwhile, meanwhile
            assert proc.poll() is None
            os.write(controller, b"y\n")
            answer = _read_terminal(controller, b"Deleted note 3", deadline)
            answer += _read_terminal(controller, b"\n", deadline)
            assert proc.wait(timeout=TIMEOUT) == 0, answer
        finally:
            proc.kill()
            os.close(controller)
    assert b"Deleted note 3, 'Groceries'." in answer

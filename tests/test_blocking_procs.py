"""The blocking client and the processes around its stdio server.

The server is ``tests/trio/stdio_procs_app.py`` (see its modes); every wait is bounded.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

from mcp_trio import ServerExited
from mcp_trio._blocking import BlockingClient

APP = str(Path(__file__).parent / "trio" / "stdio_procs_app.py")
TIMEOUT = 15.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_a_server_that_dies_while_a_helper_holds_its_stdout_is_noticed(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this system")
    client = BlockingClient.stdio(
        [sys.executable, APP, "helper"], stderr=subprocess.PIPE, stop_timeout=0.5, era="legacy"
    )
    transport = client._link.transport  # type: ignore[attr-defined]  # (to find the helper)
    try:
        with client:
            start = time.monotonic()
            # Its stdout never ends while the helper lives: only its exit says it is gone.
            with pytest.raises(ServerExited) as info:
                client.call_tool("crash", timeout=TIMEOUT)
            assert time.monotonic() - start < TIMEOUT / 2
            assert info.value.returncode == 3
            assert info.value.reason == "the server exited"
    finally:
        found = re.search(rb"helper pid (\d+)", bytes(transport._tail))
        if found is not None:
            with suppress(ProcessLookupError):
                os.kill(int(found[1]), signal.SIGKILL)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the server with a pidfd")
def test_a_server_behind_a_wrapper_is_stopped_at_close_too() -> None:
    # The server of mode ``linger`` through a shell that does not exec it: the shell's
    # child, not ours, and it stays after its stdin ends.
    wrapped = ["sh", "-c", '"$0" "$1" linger; true', sys.executable, APP]
    with BlockingClient.stdio(wrapped, stop_timeout=0.5, era="legacy") as client:
        server = int(client.call_tool("pid", timeout=TIMEOUT).text)
        pidfd = os.pidfd_open(server)
    try:
        # (Signalled alone, the shell exited and the server went on, orphaned.)
        assert select.select([pidfd], [], [], 5)[0] == [pidfd]  # it exited
    finally:
        with suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)
        os.close(pidfd)

"""The blocking client and the processes around its stdio server.

The servers are ``tests/trio/stdio_procs_app.py`` (see its modes) and
``tests/blocking_server_app.py``; every wait is bounded.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest

from mcp_sansio import ProgressReceived
from mcp_trio import ServerExited, SessionClosed
from mcp_trio._blocking import BlockingClient

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "tests" / "trio" / "stdio_procs_app.py")
BLOCKING_APP = [sys.executable, "-m", "tests.blocking_server_app", "stdio"]
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


def _in_another_thread(call: Callable[[], object]) -> BaseException | None:
    """Run ``call`` in a new thread, wait for it; what it raised (``None``: nothing)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # (reported to the test)
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    return raised[0] if raised else None


def test_a_call_from_a_second_thread_meanwhile_is_a_clear_error() -> None:
    # (Before: BufferError from the outbox, duplicate request ids on the wire.)
    failures: list[BaseException | None] = []
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT) as client:

        def on_progress(event: ProgressReceived) -> None:  # (inside the call, its thread)
            failures.append(_in_another_thread(lambda: client.call_tool("echo", {"text": "x"})))
            failures.append(_in_another_thread(lambda: client.notify("notifications/x")))

        result = client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert result.text == "done"
        assert len(failures) == 2
        for failure in failures:
            assert isinstance(failure, RuntimeError)
            assert str(failure).startswith("BlockingClient used by two threads at once")
        # Free again once the call is over: any thread may make the next one.
        assert _in_another_thread(lambda: client.call_tool("echo", {"text": "y"})) is None
        assert client.call_tool("echo", {"text": "z"}).text == "z"


def test_close_from_another_thread_still_ends_a_waiting_call() -> None:
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, stop_timeout=0.5) as client:

        def on_progress(event: ProgressReceived) -> None:
            assert _in_another_thread(client.close) is None

        with pytest.raises(SessionClosed, match="the client was closed"):
            client.call_tool("slow", {"steps": 2, "delay": 0}, on_progress=on_progress)

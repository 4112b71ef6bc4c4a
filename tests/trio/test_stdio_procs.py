"""The stdio transport and the process around it: inherited descriptors, closed ones.

Real subprocesses, the real clock, an absolute ``fail_after`` (as ``test_stdio.py``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
import trio

from mcp_trio import ServerExited, SessionConfig, open_stdio_client

from .helpers import client_config

APP = str(Path(__file__).with_name("stdio_procs_app.py"))
IO_TIMEOUT = 20
FAST = SessionConfig(stdin_close_timeout=5, terminate_timeout=0.5, exit_status_timeout=2)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors")


async def test_a_child_of_a_handler_reads_an_empty_stdin_not_the_protocol() -> None:
    chunks: list[bytes] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            [sys.executable, APP],
            stderr=chunks.append,
            config=FAST,
            connection_config=client_config(),
        ) as session:
            # Inherited, fd 0 would be the protocol's input, non-blocking: the child
            # failed with EAGAIN, or read the client's next message.
            result = await session.request("tools/call", {"name": "child-stdin"})
            assert result["content"][0]["text"] == "b''"
            again = await session.request("tools/call", {"name": "child-stdin"})
            assert again["content"][0]["text"] == "b''"
    assert b"fd 0 restored: True, blocking: True" in b"".join(chunks)


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_server_that_writes_junk_before_it_reads_is_not_answered(era: str) -> None:
    # 10,000 stray lines: answered with an error each, the replies filled the server's
    # stdin (it did not read yet) while it filled its stdout: both waited for ever.
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            [sys.executable, APP, "junk"],
            config=FAST,
            connection_config=client_config(era=era),
        ) as session:
            result = await session.request("tools/call", {"name": "child-stdin"})
            assert result["content"][0]["text"] == "b''"


@contextmanager
def helper_killed(stderr: list[bytes]) -> Iterator[None]:
    """Kill the helper the server of mode ``helper`` names on its stderr, at the end."""
    try:
        yield
    finally:
        found = re.search(rb"helper pid (\d+)", b"".join(stderr))
        if found is not None:
            with suppress(ProcessLookupError):
                os.kill(int(found[1]), signal.SIGKILL)


async def test_a_server_that_dies_while_a_helper_holds_its_stdout_is_noticed() -> None:
    # Its stdout never ends while the helper lives: only its exit says it is gone.
    chunks: list[bytes] = []
    with helper_killed(chunks), trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            [sys.executable, APP, "helper"],
            stderr=chunks.append,
            config=FAST,
            connection_config=client_config(),
        ) as session:
            start = trio.current_time()
            with pytest.raises(ServerExited) as info:
                await session.request("tools/call", {"name": "crash"})
            assert info.value.returncode == 3
            assert info.value.reason == "the server exited"
            assert b"helper pid" in info.value.stderr_tail
            assert trio.current_time() - start < IO_TIMEOUT / 2


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the helper with a pidfd")
async def test_a_helper_left_by_a_server_that_exits_at_the_end_of_its_input_is_stopped() -> None:
    # The server exits cleanly when its stdin ends, before any signal: its helper, in
    # its process group, is signalled once it is reaped. (Before: it ran on.)
    chunks: list[bytes] = []
    with helper_killed(chunks), trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            [sys.executable, APP, "helper"],
            stderr=chunks.append,
            config=FAST,
            connection_config=client_config(),
        ) as session:
            await session.request("tools/call", {"name": "pid"})
            found = re.search(rb"helper pid (\d+)", b"".join(chunks))
            assert found is not None
            pidfd = os.pidfd_open(int(found[1]))
        try:
            with trio.fail_after(5):
                await trio.lowlevel.wait_readable(pidfd)  # the helper exited
        finally:
            os.close(pidfd)


WRAPPED = ["sh", "-c", '"$0" "$1" linger; true', sys.executable, APP]
"""The server of mode ``linger`` started through a shell that does not exec it: the
server is the shell's child, not ours, and stays after its stdin ends."""


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the server with a pidfd")
async def test_a_server_behind_a_wrapper_is_stopped_at_close_too() -> None:
    config = SessionConfig(stdin_close_timeout=0.2, terminate_timeout=2, exit_status_timeout=1)
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            WRAPPED, config=config, connection_config=client_config()
        ) as session:
            result = await session.request("tools/call", {"name": "pid"})
            server = int(result["content"][0]["text"])
            pidfd = os.pidfd_open(server)
    try:
        # (Signalled alone, the shell exited and the server went on, orphaned.)
        with trio.fail_after(5):
            await trio.lowlevel.wait_readable(pidfd)  # it exited
    finally:
        with suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)
        os.close(pidfd)


_SERVE = (
    "import trio, mcp_trio\n"
    "try:\n"
    "    trio.run(mcp_trio.serve_stdio)\n"
    "except OSError as exc:\n"
    "    raise SystemExit(f'{type(exc).__name__} {exc.errno}: {exc.strerror}')\n"
)


@pytest.mark.parametrize(("closing", "which"), [("<&-", "stdin (fd 0)"), (">&-", "stdout (fd 1)")])
def test_serve_stdio_refuses_a_closed_stdin_or_stdout(closing: str, which: str) -> None:
    # Started with fd 1 closed, the first file opened takes number 1 (Trio's wakeup
    # socket): the protocol wrote into it, and read what stderr's file holds.
    result = subprocess.run(
        ["sh", "-c", f'exec "$@" {closing}', "sh", sys.executable, "-c", _SERVE],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=IO_TIMEOUT,
        check=False,
    )
    assert result.returncode == 1
    needs = "serve_stdio needs stdin and stdout"
    assert result.stderr == f"OSError 9: {needs}: {which} was closed when Python started\n"

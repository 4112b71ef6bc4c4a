"""Group ``stdio``: ``mcp_trio`` over a subprocess's stdin/stdout, against a Trio floor.

The client runs in this process (a Trio loop in a thread, see :mod:`benchmarks._trio`),
the server in a child started with the same interpreter; newline-delimited JSON crosses
two pipes. Throughput in calls/s, with 1 and with 100 requests in flight.

``stdio.floor.1`` / ``stdio.floor.100``
    The floor: the child is ``python -m benchmarks._stdio_echo``, a Trio loop that splits
    stdin into lines and answers each with the canned 1 KB result under its id (orjson,
    one ``send_all`` per answer). The client dumps each request with a fresh id and
    writes it under a ``trio.Lock`` (concurrent writers must not interleave), a reader
    task splits stdout into lines, loads each and wakes the caller by id.
``stdio.floor.tight.1`` / ``stdio.floor.tight.100``
    The same work through the cheapest paths, as mcp_trio takes them on a pipe: the
    child is ``_stdio_echo --tight`` (``os.read``, one ``os.write`` for the answers to
    each read); the client writes each request with one ``os.write`` on the non-blocking
    pipe (whole: it is under ``PIPE_BUF``, so no lock; ``wait_writable`` only when the
    pipe is full) and its reader reads stdout with ``os.read``, waiting only when it is empty.
    The honest lower bound: ``stdio.calls.*`` report their ratio to it beside the
    target's ratio to ``stdio.floor.*``.
``stdio.calls.1`` / ``stdio.calls.100``
    ``mcp_trio.open_stdio_client`` to ``python -m benchmarks._stdio_server``
    (``serve_stdio`` with the low-level ``Handlers``), ``Session.request``; legacy era.
``stdio.client``
    The high-level API: ``open_client([...]).call_tool(...)`` against the child serving
    ``mcp_trio.Server`` (``--high-level``); its reference is ``stdio.calls.1``.
``stdio.rss_growth``
    The server child's ``VmRSS`` (``/proc/<pid>/status``) over 10,000 calls, after
    10,000 warm-up ones.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Final

import trio

import mcp_trio

from ._harness import Case, Settings, Skip
from ._servers import CLIENT_CONFIG, call_tool_fixture
from ._trio import (
    ROOT,
    RSS_CALLS,
    Driver,
    FloorClient,
    calls_case,
    driver,
    module_command,
    open_pipe_process,
    read_fd,
    rss_case,
    until_closed,
    write_fd,
)
from .workloads import CALL_TOOL_PARAMS

__all__ = ["DESCRIPTION", "cases", "unavailable"]

DESCRIPTION: Final = "calls/s over a subprocess's stdin/stdout at 1 and 100 in flight"

IN_FLIGHT: Final = 100


def unavailable() -> str | None:
    """Why this group cannot run here."""
    if sys.platform == "win32":
        return "the Trio subprocess pipes used here are POSIX-only"
    return None


# -- the floor -----------------------------------------------------------------------------


async def _floor(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    async with open_pipe_process(module_command("_stdio_echo")) as process:
        assert process.stdin is not None and process.stdout is not None
        stdin, lock = process.stdin, trio.Lock()

        async def send(request: bytes) -> None:
            async with lock:
                await stdin.send_all(request + b"\n")

        client = FloorClient(send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                client.read_lines, functools.partial(process.stdout.receive_some, 65_536)
            )
            await client.call()
            task_status.started(
                driver(client.call, in_flight=in_flight, quiet=client.quiet, server_pid=process.pid)
            )
            await until_closed()
            nursery.cancel_scope.cancel()  # the reader (and server) tasks


async def _floor_tight(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    async with open_pipe_process(module_command("_stdio_echo", "--tight")) as process:
        assert isinstance(process.stdin, trio.lowlevel.FdStream)
        assert isinstance(process.stdout, trio.lowlevel.FdStream)
        stdin = process.stdin.fileno()  # (FdStream made both non-blocking)
        write = os.write

        def send_nowait(request: bytes) -> bool:
            try:
                write(stdin, request + b"\n")  # all or nothing: under PIPE_BUF
            except BlockingIOError:
                return False
            return True

        async def send(request: bytes) -> None:
            await write_fd(stdin, request + b"\n")

        client = FloorClient(send, send_nowait)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                client.read_lines, functools.partial(read_fd, process.stdout.fileno())
            )
            await client.call()
            task_status.started(
                driver(client.call, in_flight=in_flight, quiet=client.quiet, server_pid=process.pid)
            )
            await until_closed()
            nursery.cancel_scope.cancel()  # the reader task


# -- mcp_trio ------------------------------------------------------------------------------


async def _ours(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    async with mcp_trio.open_stdio_client(
        module_command("_stdio_server"), cwd=ROOT, connection_config=CLIENT_CONFIG
    ) as client:
        call = functools.partial(client.request, "tools/call", CALL_TOOL_PARAMS)
        await call()
        channel = client.channel
        assert isinstance(channel, mcp_trio.ProcessChannel)

        def quiet() -> bool:
            return client.statistics().waiting_requests == 0

        task_status.started(
            driver(call, in_flight=in_flight, quiet=quiet, server_pid=channel.process.pid)
        )
        await until_closed()


async def _client(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    command = module_command("_stdio_server", "--high-level")
    await call_tool_fixture(command, in_flight, cwd=ROOT, task_status=task_status)


# -- the group -----------------------------------------------------------------------------


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, floors first."""
    found: list[Case | Skip] = [
        calls_case(
            "stdio.floor.1",
            "floor: Trio NDJSON echo child + orjson, 1 in flight",
            _floor,
            in_flight=1,
        ),
        calls_case(
            "stdio.floor.100", "floor: the same, 100 in flight", _floor, in_flight=IN_FLIGHT
        ),
        calls_case(
            "stdio.floor.tight.1",
            "tight floor: the same through os.read / os.write, one write per read, 1 in flight",
            _floor_tight,
            in_flight=1,
            reference="stdio.floor.1",
        ),
        calls_case(
            "stdio.floor.tight.100",
            "tight floor: the same, 100 in flight",
            _floor_tight,
            in_flight=IN_FLIGHT,
            reference="stdio.floor.100",
        ),
        calls_case(
            "stdio.calls.1",
            "open_stdio_client + serve_stdio (Handlers), legacy, 1 in flight",
            _ours,
            in_flight=1,
            reference="stdio.floor.1",
            tight="stdio.floor.tight.1",
        ),
        calls_case(
            "stdio.calls.100",
            "open_stdio_client + serve_stdio (Handlers), legacy, 100 in flight",
            _ours,
            in_flight=IN_FLIGHT,
            reference="stdio.floor.100",
            tight="stdio.floor.tight.100",
        ),
        calls_case(
            "stdio.client",
            "high-level Server + open_client().call_tool, 1 in flight (vs low-level)",
            _client,
            in_flight=1,
            reference="stdio.calls.1",
        ),
    ]
    found.append(
        rss_case(
            "stdio.rss_growth",
            f"server child's RSS growth over {RSS_CALLS:,} calls (after a warm-up)",
            functools.partial(_ours, 1),
            settings,
        )
    )
    return found

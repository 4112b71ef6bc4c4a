"""Trio plumbing of the transport groups: a case's event loop, its timed loops, the floors.

Theory of operation
-------------------
A transport case needs state that outlives one timed round (connected sessions, a
listening socket, a server subprocess), and Trio state lives inside one ``trio.run``.
So each case gets its own :class:`TrioThread`: a ``trio.run`` in a background thread
that starts the case's *fixture* (an ``async def fixture(task_status)`` that connects
everything, hands back a :class:`Driver` with ``task_status.started(...)``, then awaits
:func:`until_closed`). The harness's ``run(n)`` hands ``driver.run(n)`` to that loop
with ``trio.from_thread.run`` and blocks until it returns; the hop costs tens of
microseconds a round, against rounds of 20 ms or more. Closing the case makes
:func:`until_closed` return, so the fixture's ``async with`` blocks close the sessions
and stop the processes the ordinary way (cancelled after 10 s if they hang), and joins
the thread.

The timed loops (:func:`driver`) call one ``async () -> result`` function: ``n`` times
in a row (1 in flight), or from ``in_flight`` tasks that each call it ``n`` times (the
whole batch counts ``n * in_flight`` operations). They count the answers; the check,
run untimed after every round, asserts that every call was answered with the canned
result and that nothing is left waiting.

The floors (:class:`FloorClient`, :func:`floor_answer`) are the least a concurrent
JSON-RPC client and server can do over a transport, hand-written with orjson: the
caller dumps its request with a fresh id and waits on a ``trio.Event``; the server loads
the request and dumps the canned result under its id; the client's reader loads the
answer and wakes the caller waiting for that id. The plain floors use Trio's ordinary
calls, which always yield (``await send``, ``receive_some``, ``send_all``), and write
one message at a time. The *tight* floors (:class:`FloorClient` with ``send_nowait``,
:func:`read_fd`, :func:`write_fd`, ``*.floor.tight`` cases) do the same work
through the cheapest paths a careful hand-written echo would take, the ones mcp_trio
takes too: a send that does not yield when it need not (``send_nowait``, ``os.write``
on a non-blocking descriptor), a read that does not yield while data is there
(``receive_nowait``, ``os.read``), waiting only when nothing can be done
(``wait_readable`` / ``wait_writable``), and one write for every answer a read brought.
"""

from __future__ import annotations

import functools
import gc
import os
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Final, Generic, TypeVar, final

import attrs
import orjson
import trio

from ._harness import RSS_CALLS, Bench, SampledCase, Settings, Skip, TimedCase
from .workloads import CALL_TOOL_PARAMS, CALL_TOOL_RESULT

__all__ = [
    "ROOT",
    "RSS_CALLS",
    "Call",
    "Driver",
    "FloorClient",
    "RssSampler",
    "TrioThread",
    "bench_setup",
    "calls_case",
    "driver",
    "floor_answer",
    "is_canned_result",
    "module_command",
    "open_net_server",
    "open_pipe_process",
    "read_fd",
    "rss_case",
    "rss_kib",
    "trio_bench",
    "until_closed",
    "write_fd",
]

T = TypeVar("T")
R = TypeVar("R")
Call = Callable[[], Awaitable[Any]]
"""One operation: a ``tools/call`` round trip; returns the result (or the tool's text)."""
Fixture = Callable[..., Awaitable[None]]
"""``async def fixture(*, task_status)``: connect, ``task_status.started(value)``, then
``await until_closed()``."""

ROOT: Final = Path(__file__).resolve().parent.parent
"""The directory holding the ``benchmarks`` package: the working directory of the
subprocesses, so that ``python -m benchmarks.<script>`` finds it."""

_STARTUP_TIMEOUT: Final = 60.0
_CLOSE_TIMEOUT: Final = 10.0
_JOIN_TIMEOUT: Final = 30.0
_STOP: Final = trio.lowlevel.RunVar[trio.Event]("benchmarks_stop")


async def until_closed() -> None:
    """What a fixture awaits after ``task_status.started``: returns when the case is
    closed, so that the fixture's ``async with`` blocks exit normally (not cancelled)."""
    await _STOP.get().wait()


@final
class TrioThread(Generic[T]):
    """One ``trio.run`` in a daemon thread, hosting a fixture until :meth:`close`.

    Args:
        fixture: ``async def fixture(*, task_status)``; what it passes to
            ``task_status.started`` becomes :attr:`value`.

    Raises:
        Whatever the fixture raised before it started.
    """

    def __init__(self, fixture: Fixture) -> None:
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._value: list[T] = []
        self._thread = threading.Thread(
            target=self._main, args=(fixture,), name="benchmarks-trio", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(_STARTUP_TIMEOUT):
            raise TimeoutError("the benchmark fixture did not start")
        if not self._value:
            self._thread.join(_JOIN_TIMEOUT)
            raise RuntimeError("the benchmark fixture failed") from self._failure

    @property
    def value(self) -> T:
        """What the fixture started with."""
        return self._value[0]

    def _main(self, fixture: Fixture) -> None:
        try:
            trio.run(self._run, fixture)
        except BaseException as exc:  # reported by __init__ or close
            self._failure = exc
        finally:
            self._ready.set()

    async def _run(self, fixture: Fixture) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        _STOP.set(self._stop)
        async with trio.open_nursery() as nursery:
            self._value.append(await nursery.start(fixture))
            self._ready.set()
            await self._stop.wait()
            # The fixture returns from until_closed() and closes its blocks normally
            # (a cancelled block may wait out timeouts); cancel it if it hangs.
            nursery.cancel_scope.deadline = trio.current_time() + _CLOSE_TIMEOUT

    def call(self, afn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """Run ``await afn(*args)`` in the loop (a new task) and return its value."""
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def call_sync(self, fn: Callable[[], object]) -> object:
        """Run ``fn()`` in the loop's thread."""
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    def close(self) -> None:
        """Let the fixture return (its ``async with`` blocks clean up), join the thread."""
        if self._thread.is_alive() and self._stop is not None:
            with suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(_JOIN_TIMEOUT)
        if self._thread.is_alive():
            raise RuntimeError("the benchmark fixture did not stop")
        if self._failure is not None:
            raise RuntimeError("the benchmark fixture failed") from self._failure


# -- subprocesses --------------------------------------------------------------------------


def module_command(module: str, *args: str) -> list[str]:
    """``python -m benchmarks.<module> args...`` with this interpreter (run it in :data:`ROOT`)."""
    return [sys.executable, "-m", f"{__package__}.{module}", *args]


@asynccontextmanager
async def open_pipe_process(command: list[str]) -> AsyncGenerator[trio.Process]:
    """Spawn ``command`` in :data:`ROOT` with piped stdin/stdout; on exit close its stdin
    and wait for it (kill it after 5 s)."""
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
    )
    try:
        yield process
    finally:
        with trio.CancelScope(shield=True):
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.aclose()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.stdout.aclose()


@asynccontextmanager
async def open_net_server(kind: str) -> AsyncGenerator[tuple[int, int]]:
    """Start ``python -m benchmarks._net_server KIND``; yield ``(port, pid)``."""
    async with open_pipe_process(module_command("_net_server", kind)) as process:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(_STARTUP_TIMEOUT):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(64)
                if not chunk:
                    raise RuntimeError(f"the {kind} server exited before it listened")
                line += chunk
        yield int(line), process.pid


# -- the timed loops -----------------------------------------------------------------------


def is_canned_result(result: Any) -> bool:
    """Whether ``result`` is the workload's ``CallToolResult`` (either era's envelope)."""
    return (
        isinstance(result, dict)
        and result.get("content") == CALL_TOOL_RESULT["content"]
        and result.get("isError") is False
    )


@attrs.define(slots=True)
class _Tally:
    issued: int = 0
    answered: int = 0
    last: Any = None


@final
@attrs.frozen
class Driver:
    """What a fixture hands back: the timed loop and its untimed check."""

    run: Callable[[int], Awaitable[None]]
    """Does ``n`` operations (``n`` batches of ``in_flight``)."""
    check: Callable[[], None]
    """Asserts every call was answered with the expected result; nothing waits."""
    server_pid: int | None = None
    """The server's process, when it is not this one (for its resident memory)."""


def driver(
    call: Call,
    *,
    in_flight: int = 1,
    accept: Callable[[Any], bool] | None = None,
    quiet: Callable[[], bool] | None = None,
    server_pid: int | None = None,
) -> Driver:
    """The timed loop over ``call``, and its check.

    Args:
        call: one operation.
        in_flight: 1: ``run(n)`` awaits ``n`` calls in a row; more: ``in_flight`` tasks
            each await ``n`` calls in a row.
        accept: whether a call's return value is right (checked on the last one of each
            task); default: a result whose content is the canned one, not an error.
        quiet: returns whether nothing is left waiting (checked after each round).
        server_pid: the server's process, if it is another one.
    """
    tally = _Tally()

    async def worker(n: int) -> None:
        result = None
        for _ in range(n):
            result = await call()
        tally.answered += n
        tally.last = result

    if in_flight == 1:

        async def run(n: int) -> None:
            tally.issued += n
            await worker(n)  # (one await a round, not a call)

    else:

        async def run(n: int) -> None:
            tally.issued += n * in_flight
            async with trio.open_nursery() as nursery:
                for _ in range(in_flight):
                    nursery.start_soon(worker, n)

    def check() -> None:
        assert tally.answered == tally.issued, (tally.answered, tally.issued)
        assert (accept or is_canned_result)(tally.last), f"a call returned {tally.last!r:.200}"
        assert quiet is None or quiet(), "something is still waiting after the round"

    return Driver(run, check, server_pid)


def trio_bench(fixture: Fixture) -> Bench:
    """A :class:`~benchmarks._harness.Bench` whose loop runs in ``fixture``'s thread."""
    loop: TrioThread[Driver] = TrioThread(fixture)
    drive = loop.value

    def run(n: int) -> None:
        loop.call(drive.run, n)

    def check() -> None:
        loop.call_sync(drive.check)

    return Bench(run, check, close=loop.close, in_thread=loop.call_sync)


def bench_setup(fixture: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[], Bench]:
    """A case's ``setup``: ``fixture(*args, **kwargs)`` in a Trio thread (:func:`trio_bench`)."""

    def setup() -> Bench:
        return trio_bench(functools.partial(fixture, *args, **kwargs))

    return setup


def calls_case(
    name: str,
    title: str,
    fixture: Callable[..., Any],
    *args: Any,
    in_flight: int,
    reference: str | None = None,
    tight: str | None = None,
) -> TimedCase:
    """A throughput case (calls/s) of ``fixture(*args, in_flight)``, ``in_flight`` calls
    at a time (each counted as one operation)."""
    return TimedCase(
        name=name,
        title=title,
        setup=bench_setup(fixture, *args, in_flight),
        ops_per_call=in_flight,
        unit="calls/s",
        reference=reference,
        tight=tight,
    )


# -- memory --------------------------------------------------------------------------------


def rss_kib(pid: int | None = None) -> float:
    """``VmRSS`` of process ``pid`` (default: this one), from ``/proc/<pid>/status``."""
    with open(f"/proc/{'self' if pid is None else pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    raise LookupError("no VmRSS line")


@final
class RssSampler:
    """Samples the server's resident memory growth over :data:`RSS_CALLS` calls.

    The fixture starts once, at the first sample, and does :data:`RSS_CALLS` warm-up
    calls (filling the bounded tables and the allocator's pools); each sample then
    reads ``VmRSS``, does :data:`RSS_CALLS` calls, reads it again. :meth:`close` stops it.
    """

    def __init__(self, fixture: Fixture) -> None:
        self._fixture = fixture
        self._loop: TrioThread[Driver] | None = None

    def sample(self) -> float:
        """KiB of growth over one batch of calls."""
        if self._loop is None:
            self._loop = TrioThread(self._fixture)
            self._loop.call(self._loop.value.run, RSS_CALLS)
        loop = self._loop
        drive = loop.value
        gc.collect()
        before = rss_kib(drive.server_pid)
        loop.call(drive.run, RSS_CALLS)
        gc.collect()
        after = rss_kib(drive.server_pid)
        loop.call_sync(drive.check)
        return after - before

    def close(self) -> None:
        """Stop the fixture."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None


# -- the floors ----------------------------------------------------------------------------

_dumps: Final = orjson.dumps
_loads: Final = orjson.loads


def floor_answer(request: bytes | str) -> bytes:
    """The floor server: load the request, dump the canned result under its id."""
    return _dumps({"jsonrpc": "2.0", "id": _loads(request)["id"], "result": CALL_TOOL_RESULT})


@attrs.define(slots=True, eq=False)
class _Slot:
    event: trio.Event = attrs.Factory(trio.Event)
    message: Any = None


@final
class FloorClient:
    """The floor client: requests with fresh ids, answers matched back by id.

    Args:
        send: writes one serialized request (the transport adds its framing), waiting
            as needed.
        send_nowait: the tight floors' first try: sends the request whole without
            waiting, or returns ``False`` (nothing sent) when that would need a wait;
            only then is ``send`` called. ``None`` (the plain floors): always ``send``.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[object]],
        send_nowait: Callable[[bytes], bool] | None = None,
    ) -> None:
        self._send = send
        self._send_nowait = send_nowait
        self._waiting: dict[int, _Slot] = {}
        self._last_id = 0

    async def call(self) -> Any:
        """One ``tools/call``: dump it, send it, wait for the answer with its id."""
        self._last_id = rid = self._last_id + 1
        slot = _Slot()
        self._waiting[rid] = slot
        request = _dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": CALL_TOOL_PARAMS}
        )
        if self._send_nowait is None or not self._send_nowait(request):
            await self._send(request)
        await slot.event.wait()
        return slot.message["result"]

    def deliver(self, message: bytes | str) -> None:
        """The reader: load one answer and wake its caller."""
        answer = _loads(message)
        slot = self._waiting.pop(answer["id"])
        slot.message = answer
        slot.event.set()

    def quiet(self) -> bool:
        """Whether no caller is waiting."""
        return not self._waiting

    async def read_messages(self, receive: Callable[[], Awaitable[bytes | str]]) -> None:
        """Reader of a message transport (memory channel, WebSocket): until it ends."""
        deliver = self.deliver
        try:
            while True:
                deliver(await receive())
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            return

    async def read_channel(self, channel: trio.MemoryReceiveChannel[bytes]) -> None:
        """Reader of a memory channel for the tight floor: takes what is queued without
        yielding, waits only on an empty channel; until it ends."""
        deliver, receive_nowait, receive = self.deliver, channel.receive_nowait, channel.receive
        try:
            while True:
                try:
                    deliver(receive_nowait())
                except trio.WouldBlock:
                    deliver(await receive())
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            return

    async def read_lines(self, receive: Callable[[], Awaitable[bytes | bytearray]]) -> None:
        """Reader of newline-delimited JSON from a byte stream, until it ends (``receive``
        returns ``b""``): ``partial(stream.receive_some, 65_536)`` for the plain floors,
        ``partial(read_fd, fd)`` for the tight ones."""
        deliver = self.deliver
        pending = b""
        while chunk := await receive():
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                deliver(line)


async def read_fd(fd: int, size: int = 65_536) -> bytes:
    """Read at most ``size`` bytes from non-blocking ``fd`` (``b""`` at its end):
    ``os.read`` first, ``wait_readable`` only when nothing is there (no yield while
    data is)."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)


async def write_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to non-blocking ``fd``: ``os.write`` first,
    ``wait_writable`` only when it is full (no yield when it is not)."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await trio.lowlevel.wait_writable(fd)


def rss_case(name: str, title: str, fixture: Fixture, settings: Settings) -> SampledCase | Skip:
    """A transport group's ``*.rss_growth`` case: :class:`RssSampler` over ``fixture``
    (Linux only: it reads ``/proc/<pid>/status``)."""
    if not (sys.platform.startswith("linux") and os.path.exists("/proc/self/status")):
        return Skip(name=name, reason="needs Linux /proc/<pid>/status")
    sampler = RssSampler(fixture)
    return SampledCase(
        name=name,
        title=title,
        sample=sampler.sample,
        close=sampler.close,
        unit="KiB",
        max_rounds=1 if settings.quick else None,  # the first sample: 20,000 calls
    )

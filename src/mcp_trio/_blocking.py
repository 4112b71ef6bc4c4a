"""A blocking MCP client: :class:`BlockingClient`, on ``mcp_sansio`` alone.

No trio, no asyncio, no threads: one ``selectors`` loop over a subprocess's pipes (stdio),
a TCP socket (newline-delimited JSON), or the sockets of Streamable HTTP exchanges
(:meth:`BlockingClient.http`; :mod:`mcp_trio._blocking_http`, loaded on first use, with
h11 and ``ssl``). It is the proof that the core is sans-IO --
everything protocol-shaped (handshake and era probe, ids, timeouts, cancellation,
progress, the MRTR bookkeeping) is the core's; this module only moves bytes and reads
the clock.

Theory of operation
-------------------
Every call into the core is followed by draining its output into ``_outbox``. A method
that waits (:meth:`BlockingClient.request`, the handshake) runs :meth:`_run_until`: it
waits on a selector (not ``select()``, which fails on descriptors past
``FD_SETSIZE``) for reading, for writing while the outbox holds bytes, with a timeout
that is the earlier of the core's ``next_deadline()`` and the caller's own deadline.
Readable input goes to ``receive_bytes``; an expired timer to ``handle_timer``; the
resulting events are all handled at once (outcomes stored by request id, server requests
answered synchronously with the callbacks; a callback's exception is raised once the
rest are handled, so one failing callback cannot leave a server request unanswered).
Reading while writing means a server that writes a lot while we write a lot cannot
deadlock us.

Nothing runs between calls, so whatever is still queued when the awaited outcome
arrives (answers to the server's requests, the core's ``notifications/cancelled``, the
legacy ``notifications/initialized``) is written at once, as far as the transport takes
it without blocking (over HTTP, where writing a message means connecting first, the call
drives those POSTs until written, for ``_COURTESY_WRITE_TIMEOUT`` at most, and does
nothing else: what answers bring meanwhile waits for the next call, and no callback
runs); :meth:`BlockingClient.close` writes the rest, for a bounded time, before closing.
A call that raises (a callback's exception, Ctrl-C, a timeout) skips that: it cancels
its request on the wire, for ``_COURTESY_WRITE_TIMEOUT`` at most (:meth:`_abandon`,
where an ``Exception``, a callback's too, is logged, and the writing goes on), and
raises its own exception.

Memory is bounded: what handling the server's messages queues (answers, cancellations)
may exceed ``_OUTBOX_MESSAGES`` maximum-size messages only by what one read produces;
above that we stop reading until it drains, so a server that floods us with requests
without reading its input blocks on its own output, and ``write_timeout`` then ends the
session. Our own requests do not count (``_own`` marks where they lie in the outbox):
however large one is, we keep reading while we write it. A piped stderr is read in the same
loop and only its last ``_STDERR_TAIL_SIZE`` bytes are kept, for
:class:`~mcp_trio.ServerExited`.

Over HTTP the unit is the message, not the byte: the core's output is handed message by
message to the transport (each a POST, built by ``mcp_sansio.http.HttpClient``), which
the loop drives (:meth:`_http_loop`): it waits on every exchange's socket at once, with
the earliest of the core's deadline, the caller's and the exchanges' own (connect,
write, a resumption's ``retry``); what the answers bring (messages, and the sans-IO
rules' "start a new session" / "send these requests again") is handed to the core in
order (:meth:`_take`). The outbox and its backpressure are the byte transports'; the
HTTP transport bounds its own connections and stops reading streams instead.

Every time is on one clock (:class:`_CallClock`) that runs only while a call waits:
nothing is read or written between calls, so nothing comes due there -- not the
``initialize`` of a new session that replaces one the server forgot (``404``), which
outlives the call that started it, nor its ``handshake_timeout``, nor an HTTP
exchange's own bounds -- and what arrived during a pause is read before any timer fires.

Only this module's imports of ``mcp_sansio`` and the standard library carry the
protocol; the exceptions are shared with the Trio binding (:mod:`mcp_trio._errors_base`,
which imports no trio), and timeouts raise the built-in :class:`TimeoutError`. Shared
too are the pure helpers of :mod:`mcp_trio._client_common` and the JSON Schema validator
(:mod:`mcp_trio._validation`), so ``tools/call`` results are checked as the Trio client
checks them, by the same code.
"""

from __future__ import annotations

import logging
import math
import os
import selectors
import shlex
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Final, Protocol, final

import attrs

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    Event,
    HandshakeCompleted,
    InputRequired,
    LocalProtocolError,
    NotificationReceived,
    ProgressReceived,
    RemoteProtocolError,
    RequestId,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
    structure,
)
from mcp_sansio import types as t
from mcp_sansio._tasks import TASKS_EXTENSION, declares_tasks

from ._client_common import (
    EraChoice,
    HandshakeFacts,
    OutputSchemas,
    RootLike,
    ToolOutput,
    check_log_level,
    checked_roots,
    client_config,
    complete_params,
    elicitation_params,
    log_params,
    named_params,
    pager,
    read_bound,
    request_params,
    roots_result,
    sampling_params,
    timed,
    to_wire,
)
from ._errors_base import (
    HandshakeFailed,
    InputRequiredError,
    McpError,
    ServerExited,
    SessionClosed,
    refuse_endless_input,
)

if TYPE_CHECKING:
    import ssl

    from mcp_sansio.http import HttpClientConfig
    from mcp_sansio.skills import Skill, SkillListing

    from ._blocking_http import HttpTransport
    from ._http_config import HttpTransportConfig

__all__ = ["BlockingClient"]

logger = logging.getLogger("mcp_trio")

SamplingFunction = Callable[
    [t.CreateMessageRequestParams], t.CreateMessageResult | Mapping[str, Any]
]
ElicitationFunction = Callable[
    [t.ElicitRequestFormParams | t.ElicitRequestURLParams], t.ElicitResult | Mapping[str, Any]
]
RootsFunction = Callable[[], Iterable[RootLike]]
LogFunction = Callable[[t.LoggingMessageNotificationParams], object]
ProgressFunction = Callable[[ProgressReceived], object]


def _ignore_progress(event: ProgressReceived) -> None:
    pass


NotificationFunction = Callable[[NotificationReceived], object]

_READ_SIZE: Final = 65_536
_OUTBOX_MESSAGES: Final = 4
"""Reading stops while the outbox holds this many ``max_message_size`` messages' worth of
output queued in reply to the server (not counting our own requests)."""
_STDERR_TAIL_SIZE: Final = 65_536
"""Bytes of a piped stderr kept for :class:`ServerExited` (as the Trio client's default)."""
_COURTESY_WRITE_TIMEOUT: Final = 1.0
"""Seconds to write what is left when a call is abandoned or the client closed."""
_LONGEST_WAIT: Final = 3600.0
"""Seconds: the longest single wait on the selector (a longer one is waited in pieces)."""
_EXIT_POLL: Final = 0.05
"""Seconds between looks at a process that may have exited while its stderr stays open."""
_START_METHODS: Final = frozenset({"initialize", "server/discover"})
_Outcome = ResultReceived | ErrorReceived | RequestTimedOut | InputRequired


class _Transport(Protocol):
    """A byte pipe with file descriptors to wait on, non-blocking."""

    def read_fd(self) -> int: ...
    def write_fd(self) -> int: ...
    def side_fd(self) -> int | None:
        """A descriptor to read whenever it is readable (a piped stderr), or ``None``."""
        ...

    def read(self) -> bytes | None:
        """Bytes available: ``b""`` at the end of input, ``None`` if none after all."""
        ...

    def read_side(self) -> None:
        """Read what :meth:`side_fd` has (it is readable)."""
        ...

    def write(self, data: memoryview) -> int:
        """Write some of ``data`` without blocking; return how much (``0``: it would
        block). Raises ``OSError`` if broken."""
        ...

    def failure(self, what: str) -> SessionClosed:
        """Why the input ended or a write failed, for the waiting callers."""
        ...

    def close(self) -> None: ...


def _sleep(timeout: float | None) -> list[tuple[selectors.SelectorKey, int]]:
    """Wait with nothing to wait on (every exchange waits for its time)."""
    time.sleep(_LONGEST_WAIT if timeout is None else timeout)
    return []


def _http_wait(
    http: HttpTransport,
    times: Iterable[float | None],
    clock: _CallClock,
    *,
    reading: bool,
) -> None:
    """Wait on the exchanges' sockets until the earliest of ``times`` at the latest, and
    let the transport move the bytes of the ready ones (``reading``: as
    :meth:`HttpTransport.wanted`)."""
    wake = min((d for d in times if d is not None), default=None)
    wait = None if wake is None else min(max(0.0, wake - clock.now()), _LONGEST_WAIT)
    wanted = http.wanted(reading=reading)
    with selectors.DefaultSelector() as selector:
        # (a new selector each time: a closed socket's number may be reused)
        for fd, (events, exchange) in wanted.items():
            selector.register(fd, events, exchange)
        ready = selector.select(wait) if wanted else _sleep(wait)
    for key, events in ready:
        http.ready(
            key.data,
            bool(events & selectors.EVENT_READ),
            bool(events & selectors.EVENT_WRITE),
            clock.now(),
        )


def _wait_readable(fd: int, timeout: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout))


@final
class _CallClock:
    """The client's time: ``time.monotonic()`` with the time between calls taken out.

    Nothing runs between calls -- nothing is read, written or timed out -- so nothing
    may come due there either: a request's ``timeout`` (a new session's ``initialize``
    outlives the call that started it), a restart's ``handshake_timeout``, an HTTP
    exchange's connect, write or answer bound all count the time calls wait, and what
    arrived during a pause is read before a timer can fire for want of it. (The Trio
    client always runs, so its wall-clock time is the same thing.)"""

    def __init__(self) -> None:
        self._stopped: float | None = time.monotonic()  # (stopped: no call is waiting)
        self._paused = 0.0  # seconds spent stopped
        self._running = 0  # loops in progress (a callback may wait on the client)

    def now(self) -> float:
        stopped = self._stopped
        return (time.monotonic() if stopped is None else stopped) - self._paused

    def run(self) -> None:
        """A call starts waiting: the clock runs on from where it stopped."""
        self._running += 1
        stopped = self._stopped
        if stopped is not None:
            self._paused += time.monotonic() - stopped
            self._stopped = None

    def stop(self) -> None:
        """A call stopped waiting."""
        self._running -= 1
        if not self._running:
            self._stopped = time.monotonic()


@final
class _ProcessTransport:
    def __init__(self, process: subprocess.Popen[bytes], stop_timeout: float) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin: IO[bytes] = process.stdin
        self._stdout: IO[bytes] = process.stdout
        self._stderr: IO[bytes] | None = process.stderr  # stderr=subprocess.PIPE
        self._stderr_ended = False
        self._tail = bytearray()
        self._stop_timeout = stop_timeout
        for stream in (self._stdin, self._stdout, self._stderr):
            if stream is not None:
                os.set_blocking(stream.fileno(), False)

    def read_fd(self) -> int:
        return self._stdout.fileno()

    def write_fd(self) -> int:
        return self._stdin.fileno()

    def side_fd(self) -> int | None:
        if self._stderr is None or self._stderr_ended:
            return None
        return self._stderr.fileno()

    def read(self) -> bytes | None:
        try:
            return os.read(self._stdout.fileno(), _READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return None

    def read_side(self) -> None:
        """Keep the last ``_STDERR_TAIL_SIZE`` bytes of the server's stderr."""
        assert self._stderr is not None
        try:
            chunk = os.read(self._stderr.fileno(), _READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return
        except OSError:  # pragma: no cover - a pipe's read end does not fail
            chunk = b""
        if not chunk:
            self._stderr_ended = True  # closed in close(): the selector may still hold it
            return
        self._tail += chunk
        del self._tail[: max(0, len(self._tail) - _STDERR_TAIL_SIZE)]

    def write(self, data: memoryview) -> int:
        try:
            return os.write(self._stdin.fileno(), data)
        except BlockingIOError:
            return 0

    def failure(self, what: str) -> SessionClosed:
        self._wait(self._stop_timeout)
        code = self.process.returncode
        reason = what if code is None else "the server exited"
        return ServerExited(reason, code, bytes(self._tail))

    def _wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the process to exit, reading its stderr meanwhile
        (a server blocked on a full stderr pipe could not exit); whether it has."""
        deadline = time.monotonic() + timeout
        while (fd := self.side_fd()) is not None:
            remaining = deadline - time.monotonic()
            if _wait_readable(fd, min(_EXIT_POLL, max(0.0, remaining))):
                self.read_side()
                if remaining > 0:
                    continue
            if remaining <= 0 or self.process.poll() is not None:
                break
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(max(0.0, deadline - time.monotonic()))
        return self.process.returncode is not None

    def close(self) -> None:
        """Close stdin and wait; SIGTERM and wait; SIGKILL (the stdio shutdown)."""
        process = self.process
        with suppress(OSError):
            self._stdin.close()
        for stop in (None, process.terminate, process.kill):
            if stop is not None and process.poll() is None:
                with suppress(ProcessLookupError):
                    stop()
            if self._wait(self._stop_timeout):
                break
        process.wait()
        self._stdout.close()
        if self._stderr is not None:
            self._stderr.close()


@final
class _SocketTransport:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)

    def read_fd(self) -> int:
        return self.sock.fileno()

    def write_fd(self) -> int:
        return self.sock.fileno()

    def side_fd(self) -> int | None:
        return None

    def read(self) -> bytes | None:
        try:
            return self.sock.recv(_READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return None
        except ConnectionResetError:
            return b""

    def read_side(self) -> None:  # pragma: no cover - there is no side_fd()
        pass

    def write(self, data: memoryview) -> int:
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0

    def failure(self, what: str) -> SessionClosed:
        return SessionClosed(what.replace("the server", "the peer"))

    def close(self) -> None:
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@final
class _NoTransport:
    """The byte transport of a client whose messages go over HTTP: never used."""

    def read_fd(self) -> int:
        raise AssertionError("no byte transport")

    write_fd = read_fd

    def side_fd(self) -> int | None:
        return None

    def read(self) -> bytes | None:
        raise AssertionError("no byte transport")

    def read_side(self) -> None:
        raise AssertionError("no byte transport")

    def write(self, data: memoryview) -> int:
        raise AssertionError("no byte transport")

    def failure(self, what: str) -> SessionClosed:
        return SessionClosed(what)

    def close(self) -> None:
        pass


_NO_TRANSPORT: Final = _NoTransport()


@attrs.define(kw_only=True)
class _Options:
    """The arguments of :meth:`BlockingClient.stdio` / ``tcp`` / ``http``, except the
    transport's own."""

    era: EraChoice = "auto"
    protocol_version: str | None = None
    on_sampling: SamplingFunction | None = None
    on_elicitation: ElicitationFunction | None = None
    roots: Iterable[RootLike] | RootsFunction | None = None
    on_log: LogFunction | None = None
    on_notification: NotificationFunction | None = None
    log_level: str | None = None
    client_info: t.Implementation | Mapping[str, Any] | None = None
    capabilities: Mapping[str, Any] | None = None
    timeout: float | None = None
    handshake_timeout: float | None = 30.0
    write_timeout: float | None = 30.0
    connection_config: ConnectionConfig | None = None

    def core_config(self) -> ConnectionConfig:
        """Check the arguments (a list of roots is taken once, and checked); the core's
        configuration.

        Raises:
            ValueError: ``capabilities`` declare the tasks extension, which this client
                cannot handle (a ``CreateTaskResult`` would come back as an empty
                output).
        """
        self.roots = checked_roots(self.roots)
        config = client_config(
            self.connection_config,
            era=self.era,
            protocol_version=self.protocol_version,
            log_level=self.log_level,
            client_info=self.client_info,
            sampling=self.on_sampling is not None,
            elicitation=self.on_elicitation is not None,
            roots=self.roots is not None,
            capabilities=self.capabilities,
            timeout=self.timeout,
        )
        if declares_tasks(config.capabilities):
            raise ValueError(
                f"BlockingClient does not handle tasks: do not declare extensions"
                f"[{TASKS_EXTENSION!r}] (mcp_trio.Client does)"
            )
        return config


@final
class BlockingClient(HandshakeFacts):
    """A synchronous MCP client over stdio, TCP or Streamable HTTP, driving ``mcp_sansio``
    directly.

    Open one with :meth:`stdio`, :meth:`tcp` or :meth:`http` (each connects and runs the
    handshake); use it as a context manager so the server is shut down::

        with BlockingClient.stdio("python my_server.py", timeout=10) as client:
            print(client.call_tool("add", {"a": 1, "b": 2}).text)

    Methods mirror :class:`mcp_trio.Client` and return the same types; callbacks are
    plain functions. Server requests (legacy sampling, elicitation, roots) are answered
    while a call waits; without a callback the core answers -32601. It has no task
    handling: ``capabilities`` that declare the tasks extension raise ``ValueError``.

    Error handling:
        ``McpError`` (the server answered with an error), built-in ``TimeoutError``
        (the request was cancelled on the wire), ``SessionClosed`` / ``ServerExited``
        (the connection ended), ``InputRequiredError``, ``HandshakeFailed``;
        ``LocalProtocolError`` for calls the server's capabilities or era rule out;
        ``RemoteProtocolError`` for a result that does not fit the protocol's types
        (or, for :meth:`call_tool`, the tool's known output schema).

    Callbacks (and ``on_progress``) run inside the call that is waiting; an exception
    from one propagates out of that call (the request is cancelled on the wire), except
    from a legacy server-request callback, which is answered -32603 and logged. The
    other messages of the same read are handled first (server requests among them are
    answered); if more callbacks fail, the first exception is raised and the others are
    logged. Once a call raises, its cancellation is written (a second at most): a callback
    that fails meanwhile is logged and does not replace the exception (Ctrl-C does). While
    :meth:`close` writes what is left, callback exceptions are logged only.

    Not thread-safe: one thread uses one client.
    """

    def __init__(
        self,
        transport: _Transport,
        conn: Connection,
        options: _Options,
        http: HttpTransport | None = None,
    ) -> None:
        self._transport = transport
        self._http = http  # Streamable HTTP: messages, not bytes (transport is unused)
        self._close_timeout = _COURTESY_WRITE_TIMEOUT
        self._conn = conn
        self._options = options
        self._log_level: str | None = None
        self._outbox = bytearray()
        self._written = 0  # bytes ever written: the outbox starts at this offset
        self._own: deque[tuple[int, int]] = deque()  # offsets of our requests' bytes
        self._outcomes: dict[RequestId, _Outcome] = {}
        self._progress: dict[RequestId, ProgressFunction] = {}
        self._handshake: HandshakeCompleted | None = None
        self._handshake_failure: BaseException | None = None
        self._failure: SessionClosed | None = None
        self._restarting = False  # HTTP: a new session replaces one the server forgot
        self._restart_deadline: float | None = None  # ... ready by then (handshake_timeout)
        self._clock = _CallClock()
        self._write_since: float | None = None
        self._outbox_limit = _OUTBOX_MESSAGES * conn.config.max_message_size
        self._selector = selectors.DefaultSelector()
        self._closed = False
        # One connection, one handshake: there is no new session for the schemas to
        # follow (the Trio client's may start anew over HTTP).
        self._output_schemas = OutputSchemas()

    # ------------------------------------------------------------------ opening

    @classmethod
    def stdio(
        cls,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[Any] | None = None,
        stop_timeout: float = 2.0,
        era: EraChoice = "auto",
        protocol_version: str | None = None,
        on_sampling: SamplingFunction | None = None,
        on_elicitation: ElicitationFunction | None = None,
        roots: Iterable[RootLike] | RootsFunction | None = None,
        on_log: LogFunction | None = None,
        on_notification: NotificationFunction | None = None,
        log_level: str | None = None,
        client_info: t.Implementation | Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        handshake_timeout: float | None = 30.0,
        write_timeout: float | None = 30.0,
        connection_config: ConnectionConfig | None = None,
    ) -> BlockingClient:
        """Spawn a server (POSIX) and connect to it over its stdin/stdout.

        Args:
            command: a command line (split like a POSIX shell) or an argument list.
            env: the server's environment (default: ours).
            cwd: the server's working directory.
            stderr: where the server's stderr goes (``subprocess`` style; default:
                ours). With ``subprocess.PIPE`` it is read while calls wait and its last
                64 KiB are kept for :class:`~mcp_trio.ServerExited`.
            stop_timeout: on close, seconds to wait after closing its stdin, and again
                after SIGTERM, before SIGKILL.
            era, protocol_version, on_sampling, on_elicitation, roots, on_log,
                log_level, client_info, capabilities, timeout, connection_config:
                as for :func:`mcp_trio.open_client` (callbacks are plain functions).
            on_notification: called with every other notification the server sends.
            handshake_timeout: seconds for the handshake (``None``: no limit).
            write_timeout: seconds the server may go without reading what we send
                before it is taken for dead (``None``: no limit).

        Raises:
            ValueError: ``command`` is empty, or ``capabilities`` declare the tasks
                extension (``mcp_trio.TASKS_EXTENSION``): this client cannot run a tool
                as a task (:class:`mcp_trio.Client` can), so it does not let a server
                answer with one.
            OSError: the program could not be started.
            HandshakeFailed, TimeoutError, ServerExited: the handshake failed.
        """
        options = _Options(
            era=era,
            protocol_version=protocol_version,
            on_sampling=on_sampling,
            on_elicitation=on_elicitation,
            roots=roots,
            on_log=on_log,
            on_notification=on_notification,
            log_level=log_level,
            client_info=client_info,
            capabilities=capabilities,
            timeout=timeout,
            handshake_timeout=handshake_timeout,
            write_timeout=write_timeout,
            connection_config=connection_config,
        )
        config = options.core_config()
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("the server command is empty")
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=cwd,
            bufsize=0,
        )
        return cls._started(_ProcessTransport(process, stop_timeout), config, options)

    @classmethod
    def tcp(
        cls,
        host: str,
        port: int,
        *,
        connect_timeout: float = 10.0,
        era: EraChoice = "auto",
        protocol_version: str | None = None,
        on_sampling: SamplingFunction | None = None,
        on_elicitation: ElicitationFunction | None = None,
        roots: Iterable[RootLike] | RootsFunction | None = None,
        on_log: LogFunction | None = None,
        on_notification: NotificationFunction | None = None,
        log_level: str | None = None,
        client_info: t.Implementation | Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        handshake_timeout: float | None = 30.0,
        write_timeout: float | None = 30.0,
        connection_config: ConnectionConfig | None = None,
    ) -> BlockingClient:
        """Connect over TCP, newline-delimited JSON (stdio framing on a socket: a
        custom transport; the server must speak it). Arguments as for :meth:`stdio`.

        Raises:
            ValueError: ``capabilities`` declare the tasks extension (as for :meth:`stdio`).
            OSError: no connection.
            HandshakeFailed, TimeoutError, SessionClosed: the handshake failed.
        """
        options = _Options(
            era=era,
            protocol_version=protocol_version,
            on_sampling=on_sampling,
            on_elicitation=on_elicitation,
            roots=roots,
            on_log=on_log,
            on_notification=on_notification,
            log_level=log_level,
            client_info=client_info,
            capabilities=capabilities,
            timeout=timeout,
            handshake_timeout=handshake_timeout,
            write_timeout=write_timeout,
            connection_config=connection_config,
        )
        config = options.core_config()
        sock = socket.create_connection((host, port), timeout=connect_timeout)
        return cls._started(_SocketTransport(sock), config, options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer: str | None = None,
        http_config: HttpClientConfig | None = None,
        transport: HttpTransportConfig | None = None,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout: float | None = None,
        close_timeout: float = 2.0,
        era: EraChoice = "auto",
        protocol_version: str | None = None,
        on_sampling: SamplingFunction | None = None,
        on_elicitation: ElicitationFunction | None = None,
        roots: Iterable[RootLike] | RootsFunction | None = None,
        on_log: LogFunction | None = None,
        on_notification: NotificationFunction | None = None,
        log_level: str | None = None,
        client_info: t.Implementation | Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        handshake_timeout: float | None = 30.0,
        write_timeout: float | None = 30.0,
        connection_config: ConnectionConfig | None = None,
    ) -> BlockingClient:
        """Connect to an MCP server over Streamable HTTP (both eras), e.g.
        ``http://127.0.0.1:8000/mcp``, and run the handshake.

        Each message is one POST on a connection of its own (kept-alive ones are reused), in
        the same selector loop; the sans-IO rules of :class:`mcp_sansio.http.HttpClient` do
        the rest (headers, session, era probe, SSE, resumption, session expiry: a ``404``
        starts a new session and sends the refused request again; a new session not ready
        within ``handshake_timeout``, counting only the time calls run, as its
        ``initialize``'s own ``timeout`` does (nothing can start it between calls), or
        refused, closes the client with :class:`~mcp_trio.SessionClosed`). Redirects are not
        followed. Answers to the server's requests are written before the call that handled
        them returns, for a second at most (then in the next call). The legacy GET stream is
        opened when ``transport.open_get_stream`` (the default), once the server has taken
        ``notifications/initialized``; the session's first request waits for the stream's
        head, ``connect_timeout`` at most. What the server says on its own is handled while
        a call waits.

        Args:
            url: the MCP endpoint, ``http://`` or ``https://``.
            headers: extra headers for every request.
            bearer: a static OAuth bearer token (``Authorization: Bearer ...``). A
                server that refuses it (``401``) fails the request with an error naming
                its ``WWW-Authenticate`` challenge; OAuth flows are the Trio client's.
            http_config: the sans-IO rules' bounds (``max_body_size``,
                ``max_event_size``) and a known era.
            transport: connection bounds (``max_client_connections``,
                ``max_idle_connections``, ``max_header_size``, ``max_resume_attempts``,
                ``open_get_stream``, ``connect_timeout``); the server fields are unused.
            ssl_context: for ``https://`` (default: ``ssl.create_default_context()``,
                which verifies certificates).
            connect_timeout: seconds to connect (and finish the TLS handshake); default:
                ``transport``'s.
            close_timeout: seconds the closing ``DELETE`` of a legacy session may take.
            write_timeout: seconds a request may go without progress while written;
                also the bound on the whole answer to a one-way POST (a notification,
                an answer to the server), from its writing.
            era, protocol_version, on_sampling, on_elicitation, roots, on_log,
                on_notification, log_level, client_info, capabilities, timeout,
                handshake_timeout, connection_config: as for :meth:`stdio`.

        Resolving: an address literal (``127.0.0.1``, ``[::1]``) is used as it is; a host
        name is resolved once (again after a failure to connect) with the system's
        resolver, which blocks the calling thread for as long as it takes -- no timeout
        of the client's applies and, without threads, nothing can interrupt it (Ctrl-C
        is seen only after); give an address to avoid it. Connecting tries the
        addresses in turn within one ``connect_timeout``, each for its share (at least
        2 s, or what is left) so that one that never answers leaves time for the next;
        the one that answered is tried first for later connections.

        Raises:
            ValueError: ``url`` is not an absolute http(s) URL, or a header is
                malformed, given twice, or one the transport writes itself; or
                ``capabilities`` declare the tasks extension (as for :meth:`stdio`).
            SessionClosed: the server cannot be reached.
            HandshakeFailed, TimeoutError: the handshake failed.
        """
        from mcp_sansio.http import pinned_http_config  # noqa: PLC0415 -- (HTTP only)

        from ._blocking_http import HttpTransport  # noqa: PLC0415 -- h11, ssl: on first use
        from ._http_config import HttpTransportConfig  # noqa: PLC0415

        options = _Options(
            era=era,
            protocol_version=protocol_version,
            on_sampling=on_sampling,
            on_elicitation=on_elicitation,
            roots=roots,
            on_log=on_log,
            on_notification=on_notification,
            log_level=log_level,
            client_info=client_info,
            capabilities=capabilities,
            timeout=timeout,
            handshake_timeout=handshake_timeout,
            write_timeout=write_timeout,
            connection_config=connection_config,
        )
        config = options.core_config()
        http_config = pinned_http_config(http_config, config.era)  # (no probe if pinned)
        extra = dict(headers or {})
        if bearer is not None:
            if any(name.lower() == "authorization" for name in extra):
                raise ValueError("give the token as bearer= or an Authorization header, not both")
            extra["Authorization"] = f"Bearer {bearer}"
        bounds = transport if transport is not None else HttpTransportConfig()
        if connect_timeout is not None:
            bounds = attrs.evolve(bounds, connect_timeout=connect_timeout)
        http = HttpTransport(
            url,
            http_config=http_config,
            transport=bounds,
            ssl_context=ssl_context,
            headers=extra,
            write_timeout=write_timeout,
        )
        client = cls(_NO_TRANSPORT, Connection("client", config), options, http)
        client._close_timeout = close_timeout
        try:
            client._start()
        except BaseException:
            client.close()
            raise
        return client

    @classmethod
    def _started(
        cls, transport: _Transport, config: ConnectionConfig, options: _Options
    ) -> BlockingClient:
        client = cls(transport, Connection("client", config), options)
        try:
            client._start()
        except BaseException:
            client.close()
            raise
        return client

    def _start(self) -> None:
        self._conn.start(now=self._clock.now())
        self._queue(own=True)
        limit = self._options.handshake_timeout
        deadline = None if limit is None else self._clock.now() + limit
        self._run_until(
            lambda: self._handshake is not None or self._handshake_failure is not None,
            deadline,
            "the handshake",
        )
        if self._handshake_failure is not None:
            raise self._handshake_failure
        level = self._options.log_level
        if level is None and self._options.on_log is not None and self.era is Era.MODERN:
            level = "debug"
        if level is not None and (
            self.era is Era.MODERN or "logging" in self._conn.peer_capabilities
        ):
            self.set_logging_level(level)

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; a spawned server gets its stdin closed, then SIGTERM,
        then SIGKILL (``stop_timeout`` apart). Idempotent.

        What is still queued for the server (answers to its requests, a cancellation)
        is written first, for one second at most; the server's messages that arrive
        meanwhile are handled as during a call, but a callback's exception is logged,
        not raised.
        """
        if self._closed:
            return
        self._closed = True
        if self._http is not None:
            self._close_http(self._http)
            return
        try:
            if self._failure is None and self._outbox:
                deadline = self._clock.now() + _COURTESY_WRITE_TIMEOUT
                try:
                    self._run_until(lambda: not self._outbox, deadline, "closing")
                except Exception:
                    logger.debug("could not write everything before closing", exc_info=True)
        finally:
            self._conn.receive_eof()
            if self._failure is None:
                self._failure = SessionClosed("the client was closed")
            self._selector.close()
            self._transport.close()

    def _close_http(self, http: HttpTransport) -> None:
        """Write what is left (a second at most), end a legacy session (``DELETE``,
        ``close_timeout``), close every connection."""
        try:
            if self._failure is None and self._unwritten():
                deadline = self._clock.now() + _COURTESY_WRITE_TIMEOUT
                try:
                    self._run_until(
                        lambda: not self._unwritten(), deadline, "closing", courtesy=False
                    )
                except Exception:
                    logger.debug("could not write everything before closing", exc_info=True)
            if self._failure is None and http.terminate(self._clock.now()):
                deadline = self._clock.now() + self._close_timeout
                try:
                    self._run_until(http.idle, deadline, "closing the session", courtesy=False)
                except Exception:
                    logger.debug("the session's DELETE was not answered", exc_info=True)
        finally:
            self._conn.receive_eof()
            if self._failure is None:
                self._failure = SessionClosed("the client was closed")
            self._selector.close()
            http.close()

    def _unwritten(self) -> bool:
        """Whether something queued for the server is not written yet."""
        if self._http is not None:
            return self._http.busy_writing()
        return bool(self._outbox)

    # ------------------------------------------------------------------ introspection

    @property
    def _completed(self) -> HandshakeCompleted:
        assert self._handshake is not None
        return self._handshake

    @property
    def connection(self) -> Connection:
        """The core connection (read-only use)."""
        return self._conn

    # ------------------------------------------------------------------ requests

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFunction | None = None,
    ) -> dict[str, Any]:
        """Send any request and wait for its result (see :meth:`mcp_trio.Client.request`).

        Raises:
            TimeoutError: no answer or progress within ``timeout`` (default: the
                client's); the request was cancelled on the wire.
        """
        return self._request(method, params, timeout=timeout, on_progress=on_progress)

    def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFunction | None = None,
        deadline: float | None = None,
    ) -> dict[str, Any]:
        """:meth:`request`, also given up at ``deadline`` (on ``self._clock``; then
        ``TimeoutError``, the request cancelled on the wire), whatever its progress."""
        self._raise_if_closed()
        wire = request_params(params, self.era, self._log_level)
        rid = self._conn.send_request(
            method, wire, now=self._clock.now(), progress=on_progress is not None, timeout=timeout
        )
        while True:
            outcome = self._wait_for(rid, method, on_progress, deadline)
            if isinstance(outcome, ResultReceived):
                return outcome.result
            if isinstance(outcome, ErrorReceived):
                raise McpError(outcome.error)
            if isinstance(outcome, RequestTimedOut):
                raise TimeoutError(f"request {rid!r} ({method}) timed out")
            try:
                # Bounded before anyone is asked (an answer past it would be thrown away).
                refuse_endless_input(outcome, self._conn.config.max_input_rounds)
                responses = self._provide_input(outcome)
                rid = self._conn.retry_with_input(rid, responses, now=self._clock.now())
            except BaseException:
                self._conn.abandon_request(outcome.request_id)
                raise

    def _wait_for(
        self,
        rid: RequestId,
        method: str,
        on_progress: ProgressFunction | None,
        deadline: float | None,
    ) -> _Outcome:
        self._queue(own=True)
        if on_progress is not None:
            self._progress[rid] = on_progress
        try:
            self._run_until(lambda: rid in self._outcomes, deadline, method)
        except BaseException:
            self._abandon(rid)
            raise
        finally:
            self._progress.pop(rid, None)
        return self._outcomes.pop(rid)

    def _abandon(self, rid: RequestId) -> None:
        """The caller gave up (an exception, Ctrl-C): cancel on the wire, briefly.

        The caller's exception is the one that ends the call: what goes wrong here is
        logged, not raised -- the cancellation not written in time, the session lost,
        a callback's exception (the write goes on after it, within the same second).
        Anything but an ``Exception`` (a second Ctrl-C) is raised at once."""
        self._outcomes.pop(rid, None)
        if self._failure is not None:
            return
        with suppress(LocalProtocolError):  # (answered or timed out: nothing to say)
            self._conn.cancel_request(rid, "cancelled by the caller")
        self._queue(own=True)
        deadline = self._clock.now() + _COURTESY_WRITE_TIMEOUT
        while self._failure is None:
            try:
                self._run_until(
                    lambda: not self._unwritten(), deadline, "cancelling", courtesy=False
                )
            except (TimeoutError, SessionClosed) as exc:
                logger.debug("request %r given up; the cancellation: %s", rid, exc)
                return
            except Exception:
                logger.exception("a callback failed while request %r was given up", rid)
                continue
            return

    def _raise_if_closed(self) -> None:
        if self._failure is not None:
            raise self._failure

    # ------------------------------------------------------------------ the loop

    def _queue(self, *, own: bool = False) -> None:
        """Move the core's output to the outbox; ``own``: our requests, not replies."""
        if self._http is not None:
            now = self._clock.now()
            for message in self._conn.data_to_send():
                self._http.send(message, now)
            if self._handshake is not None:
                self._http.open_get_stream(now)
            return
        data = self._conn.bytes_to_send()
        if own and data:
            start = self._written + len(self._outbox)
            self._own.append((start, start + len(data)))
        self._outbox += data

    def _replies_queued(self) -> int:
        """Bytes in the outbox queued in reply to what we read (the rest are ours)."""
        written = self._written
        return len(self._outbox) - sum(end - max(start, written) for start, end in self._own)

    def _run_until(
        self,
        done: Callable[[], bool],
        deadline: float | None,
        what: str,
        *,
        courtesy: bool = True,
    ) -> None:
        """Move bytes and fire timers until ``done()`` or ``deadline`` (``TimeoutError``),
        then write what the transport takes without blocking (over HTTP, once ``done()``
        and with ``courtesy``: write what is queued, for a second at most, handling
        nothing: see :meth:`_flush_nowait`; not when the loop raised, so nothing runs
        after the exception that ends the call).

        Raises:
            SessionClosed: the connection ended first.
        """
        returned = False
        self._clock.run()
        try:
            self._loop(done, deadline, what)
            returned = True
        finally:
            try:
                self._flush_nowait(courtesy=courtesy and returned)
            finally:
                self._clock.stop()

    def _loop(self, done: Callable[[], bool], deadline: float | None, what: str) -> None:
        if self._http is not None:
            self._http_loop(self._http, done, deadline, what)
            return
        transport = self._transport
        while not done():
            self._raise_if_closed()
            now = self._clock.now()
            timer = self._conn.next_deadline()
            if timer is not None and timer <= now:
                self._handle(self._conn.handle_timer(now))
                continue
            if deadline is not None and deadline <= now:
                raise TimeoutError(f"{what} timed out")
            stalled = self._write_deadline()
            if stalled is not None and stalled <= now:
                self._conn.send_failed()
                self._lost("the server stopped reading its input (write_timeout)")
                continue
            wake = min((d for d in (timer, deadline, stalled) if d is not None), default=None)
            # Backpressure: above the limit, the server waits for us to read.
            reading = self._replies_queued() < self._outbox_limit
            # (a far or infinite deadline is waited for in pieces: select() overflows)
            wait = None if wake is None else min(max(0.0, wake - now), _LONGEST_WAIT)
            readable, writable, side = self._select(reading, bool(self._outbox), wait)
            if side:
                transport.read_side()
            if writable:
                self._write()
            if readable and self._failure is None:
                data = transport.read()
                if data == b"":
                    # An unterminated last line is a message too (a server that exits
                    # right after writing its answer without a newline).
                    try:
                        self._handle(self._conn.receive_bytes_eof(now=self._clock.now()))
                    finally:
                        self._lost("the server closed its output")
                elif data is not None:
                    self._handle(self._conn.receive_bytes(data, now=self._clock.now()))

    def _http_loop(
        self,
        http: HttpTransport,
        done: Callable[[], bool],
        deadline: float | None,
        what: str,
    ) -> None:
        """:meth:`_loop` over Streamable HTTP: the exchanges' sockets, the core's timers
        and the exchanges' own (connect, write), and a new session's
        ``handshake_timeout`` (all on the :class:`_CallClock`)."""
        self._take(http)  # (sending may have failed at once: no address, say)
        while not done():
            self._raise_if_closed()
            now = self._clock.now()
            timer = self._conn.next_deadline()
            if timer is not None and timer <= now:
                self._handle(self._conn.handle_timer(now))
                continue
            if deadline is not None and deadline <= now:
                raise TimeoutError(f"{what} timed out")
            restart = self._restart_deadline
            if restart is not None and restart <= now:
                limit = self._options.handshake_timeout
                self._restart_failed(
                    f"the server forgot the session and did not start a new one in {limit:g} s"
                )
                continue
            own = http.next_deadline()
            if own is not None and own <= now:
                http.handle_timer(now)
                self._take(http)
                continue
            _http_wait(http, (timer, deadline, own, restart), self._clock, reading=True)
            self._take(http)

    def _http_write(self, http: HttpTransport, deadline: float) -> None:
        """Drive the one-way POSTs queued (answers to the server's requests, a
        cancellation) until written or ``deadline``, and nothing else: no answer that
        could bring messages is read (heads and one-way answers are), what the answers
        bring stays in ``http.inbox`` (no callback runs), no timer of the core's fires;
        all that is the next call's."""
        while http.busy_writing() and http.failure is None:
            now = self._clock.now()
            if deadline <= now:
                logger.debug("HTTP: left unwritten for now")
                return
            own = http.next_deadline()
            if own is not None and own <= now:
                http.handle_timer(now)
                continue
            _http_wait(http, (deadline, own), self._clock, reading=False)

    def _take(self, http: HttpTransport) -> None:
        """Hand the core what the answers brought, in order (messages; a new session;
        requests to send again); then take in a failure of the transport's."""
        from ._blocking_http import Restart  # noqa: PLC0415 -- (loaded with the transport)

        inbox = http.inbox
        while inbox and self._failure is None:
            item = inbox.popleft()
            now = self._clock.now()
            if isinstance(item, bytes):
                self._handle(self._conn.receive_message(item, now=now))
            elif isinstance(item, Restart):
                try:
                    self._conn.restart_session(now=now)
                except LocalProtocolError as exc:
                    self._http_lost(
                        SessionClosed(
                            f"the server forgot the session, and a new one cannot start: {exc}"
                        )
                    )
                    return
                logger.debug("the server forgot the session: starting a new one")
                self._restarting = True
                limit = self._options.handshake_timeout
                if limit is not None:  # (as the first handshake: Session._bound_restart)
                    self._restart_deadline = now + limit
                self._output_schemas.forget()
                self._queue()
            else:
                for rid in item.request_ids:
                    with suppress(LocalProtocolError):  # (answered or cancelled meanwhile)
                        self._conn.resend_request(rid)
                self._queue()
        if http.failure is not None and self._failure is None:
            self._http_lost(http.failure)

    def _restart_failed(self, reason: str) -> None:
        """The session that was to replace a forgotten one did not start: the client
        is closed (as the Trio session does)."""
        self._restarting = False
        self._restart_deadline = None
        if self._failure is None:
            self._http_lost(SessionClosed(reason))

    def _http_lost(self, failure: SessionClosed) -> None:
        self._handle_quietly(self._conn.receive_eof())
        self._failure = failure
        self._handshake_failure = self._handshake_failure or failure

    def _handle_quietly(self, events: list[Event]) -> None:
        for event in events:
            try:
                self._dispatch(event)
            except Exception:
                logger.exception("handling %s failed as the session ended", type(event).__name__)

    def _select(
        self, reading: bool, writing: bool, timeout: float | None
    ) -> tuple[bool, bool, bool]:
        """Wait; whether the input is readable, the output writable, the side readable."""
        transport = self._transport
        read_fd, write_fd, side_fd = transport.read_fd(), transport.write_fd(), transport.side_fd()
        wanted: dict[int, int] = {}
        if reading:
            wanted[read_fd] = selectors.EVENT_READ
        if writing:
            wanted[write_fd] = wanted.get(write_fd, 0) | selectors.EVENT_WRITE
        if side_fd is not None:
            wanted[side_fd] = wanted.get(side_fd, 0) | selectors.EVENT_READ
        selector = self._selector
        for fd in [fd for fd in selector.get_map() if fd not in wanted]:
            selector.unregister(fd)
        registered = selector.get_map()
        for fd, events in wanted.items():
            key = registered.get(fd)
            if key is None:
                selector.register(fd, events)
            elif key.events != events:
                selector.modify(fd, events)
        readable = writable = side = False
        for key, events in selector.select(timeout):
            if key.fd == read_fd and reading and events & selectors.EVENT_READ:
                readable = True
            if key.fd == write_fd and writing and events & selectors.EVENT_WRITE:
                writable = True
            if key.fd == side_fd and events & selectors.EVENT_READ:
                side = True
        return readable, writable, side

    def _write_deadline(self) -> float | None:
        """When waiting to write is given up (``write_timeout`` after the last progress)."""
        limit = self._options.write_timeout
        if not self._outbox or limit is None:
            self._write_since = None
            return None
        if self._write_since is None:
            self._write_since = self._clock.now()
        return self._write_since + limit

    def _write(self) -> int:
        """Write some of the outbox; how much (``0``: it would block, or it failed)."""
        try:
            with memoryview(self._outbox) as view:
                sent = self._transport.write(view)
        except OSError:
            self._conn.send_failed()
            self._lost("the server stopped reading its input")
            return 0
        if sent:
            self._write_since = None
        del self._outbox[:sent]
        self._written += sent
        while self._own and self._own[0][1] <= self._written:
            self._own.popleft()
        return sent

    def _flush_nowait(self, *, courtesy: bool = True) -> None:
        """Write what the transport takes now; the rest waits for the next call (or
        :meth:`close`), whose ``write_timeout`` clock starts afresh.

        Over HTTP a message is written by driving its exchange (connecting, maybe the
        TLS handshake): with ``courtesy``, what is queued (answers to the server's
        requests, a cancellation) is driven until written, for
        ``_COURTESY_WRITE_TIMEOUT`` at most, handling nothing (:meth:`_http_write`: no
        callback runs, no exception but a bug's comes out); what is left then goes on
        in the next call (or :meth:`close`)."""
        http = self._http
        if http is not None:
            if courtesy and self._failure is None:
                self._http_write(http, self._clock.now() + _COURTESY_WRITE_TIMEOUT)
            return
        while self._outbox and self._failure is None and self._write():
            pass
        self._write_since = None

    def _lost(self, what: str) -> None:
        self._conn.receive_eof()
        self._outbox.clear()
        self._own.clear()
        self._failure = self._transport.failure(what)
        self._handshake_failure = self._handshake_failure or self._failure

    def _handle(self, events: list[Event]) -> None:
        """Handle every event; then raise the first callback exception, if any.

        Anything but an ``Exception`` (Ctrl-C in a callback) is raised at once, the
        rest of the events unhandled; an earlier callback's exception is logged then."""
        self._queue()
        failed: Exception | None = None
        try:
            for event in events:
                try:
                    self._dispatch(event)
                except Exception as exc:
                    if failed is None:
                        failed = exc
                    else:
                        logger.exception("a callback failed after another one had")
        except BaseException:
            if failed is not None:
                logger.error("a callback failed before the call was interrupted", exc_info=failed)
            raise
        finally:
            self._queue()
        if failed is not None:
            if self._closed:  # close() is writing what is left: raising would stop it
                logger.error("a callback failed while closing", exc_info=failed)
                return
            raise failed

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, ResultReceived | ErrorReceived | InputRequired | RequestTimedOut):
            if (
                isinstance(event, ErrorReceived | RequestTimedOut)
                and event.method in _START_METHODS
                and self._restarting
            ):
                why = event.error.message if isinstance(event, ErrorReceived) else "timeout"
                self._restart_failed(
                    f"the server forgot the session and did not start a new one: {why}"
                )
            elif isinstance(event, ErrorReceived | RequestTimedOut) and (
                event.method in _START_METHODS and self._handshake is None
            ):
                self._handshake_failure = (
                    HandshakeFailed(event.error)
                    if isinstance(event, ErrorReceived)
                    else TimeoutError(f"{event.method} timed out")
                )
            else:
                self._outcomes[event.request_id] = event
        elif isinstance(event, HandshakeCompleted):
            self._handshake = event
            self._restarting = False
            self._restart_deadline = None
        elif isinstance(event, RequestReceived):
            self._answer(event)
        elif isinstance(event, NotificationReceived):
            self._notified(event)
        elif isinstance(event, ProgressReceived):
            callback = self._progress.get(event.request_id)
            if callback is not None:
                callback(event)

    # ------------------------------------------------------------------ the server's turn

    def _callback_result(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        options = self._options
        if method == "sampling/createMessage" and options.on_sampling is not None:
            return to_wire(options.on_sampling(sampling_params(params)), "on_sampling")
        if method == "elicitation/create" and options.on_elicitation is not None:
            return to_wire(options.on_elicitation(elicitation_params(params)), "on_elicitation")
        if method == "roots/list" and options.roots is not None:
            roots = options.roots
            return roots_result(roots() if callable(roots) else roots)
        raise McpError.from_code(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")

    def _answer(self, event: RequestReceived) -> None:
        """Legacy: answer a server request now, with the callbacks."""
        rid = event.request_id
        try:
            try:
                result = self._callback_result(event.method, event.params)
            except McpError as exc:
                self._conn.send_error(rid, exc.code, exc.message, exc.data)
            except RemoteProtocolError as exc:
                self._conn.send_error(rid, exc.error_code, exc.message)
            except Exception:
                logger.exception("the %s callback failed", event.method)
                self._conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "Internal error")
            else:
                self._conn.send_result(rid, result)
        except (TypeError, ValueError):  # the core refused the answer (not JSON...)
            logger.exception("the answer to %s cannot be sent", event.method)
            self._conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "Internal error")

    def _provide_input(self, event: InputRequired) -> dict[str, Any]:
        """Modern: answer every entry of ``inputRequests`` with the callbacks."""
        options = self._options
        given: dict[str, object] = {
            "sampling/createMessage": options.on_sampling,
            "elicitation/create": options.on_elicitation,
            "roots/list": options.roots,
        }
        entries = event.input_requests.values()
        if not all(
            isinstance(e, Mapping) and given.get(str(e.get("method"))) is not None for e in entries
        ):
            raise InputRequiredError(event)
        responses: dict[str, Any] = {}
        for key, entry in event.input_requests.items():
            params = entry.get("params")
            responses[key] = self._callback_result(
                entry["method"], params if isinstance(params, Mapping) else None
            )
        return responses

    def _notified(self, event: NotificationReceived) -> None:
        if event.method == "notifications/tools/list_changed":
            self._output_schemas.forget()
        if event.method == "notifications/message" and self._options.on_log is not None:
            self._options.on_log(log_params(event.params))
        elif self._options.on_notification is not None:
            self._options.on_notification(event)

    # ------------------------------------------------------------------ typed methods

    def _list(
        self, method: str, deadline: float | None = None, timeout: float | None = None
    ) -> list[Any]:
        pages = pager(method)
        while pages.add(self._request(method, pages.params(), timeout=timeout, deadline=deadline)):
            pass
        return pages.items

    def list_tools(self, *, timeout: float | None = None) -> list[t.Tool]:
        """Every tool, across all pages (``timeout``: for each page; default: the
        client's).

        The client remembers each tool's ``outputSchema`` to check :meth:`call_tool`
        results against, until the server says the tools changed
        (``notifications/tools/list_changed``)."""
        return self._list_tools(None, timeout)

    def _list_tools(self, deadline: float | None, timeout: float | None = None) -> list[t.Tool]:
        tools: list[t.Tool] = self._list("tools/list", deadline, timeout)
        self._output_schemas.remember(tools)
        return tools

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressFunction | None = None,
        timeout: float | None = None,
    ) -> ToolOutput:
        """Call a tool (see :meth:`mcp_trio.Client.call_tool`).

        Raises:
            RemoteProtocolError: the result is malformed: its ``structuredContent`` is
                not an object where the protocol version requires one, or does not match
                the tool's ``outputSchema`` when the client knows it (from
                :meth:`list_tools`). Before a result is rejected for its schema, the tools
                are listed again, once, within ``timeout``, and the result is checked
                against the fresh schema, if any.
            ValueError: an argument holds NaN or an infinity. Nothing is sent.
        """
        params = named_params(name, arguments)
        progress = self._long_progress(on_progress, timeout)
        result = self.request("tools/call", params, timeout=timeout, on_progress=progress)
        output = ToolOutput.from_wire(result)
        schemas = self._output_schemas
        schemas.check_shape(result, self.protocol_version)
        try:
            schemas.check_schema(name, result)
        except RemoteProtocolError as stale:
            # The server may have changed the tool without our hearing of it (a modern
            # server tells only listeners): list again, within the call's own timeout.
            # No limit for None and infinity, as the Trio client (the core has refused
            # NaN and negative timeouts by now).
            deadline = None
            if timeout is not None and timeout < math.inf:
                deadline = self._clock.now() + timeout
            try:
                self._list_tools(deadline)
            except Exception:
                raise stale from None
            schemas.check_schema(name, result)
        return output

    def list_resources(self, *, timeout: float | None = None) -> list[t.Resource]:
        """Every resource, across all pages (``timeout``: as for :meth:`list_tools`)."""
        return self._list("resources/list", timeout=timeout)

    def list_resource_templates(self, *, timeout: float | None = None) -> list[t.ResourceTemplate]:
        """Every resource template, across all pages (``timeout``: as for
        :meth:`list_tools`)."""
        return self._list("resources/templates/list", timeout=timeout)

    def read_resource(self, uri: str, *, timeout: float | None = None) -> t.ReadResourceResult:
        """Read a resource."""
        progress = self._long_progress(None, timeout)
        result = self.request("resources/read", {"uri": uri}, timeout=timeout, on_progress=progress)
        return structure(result, t.ReadResourceResult)

    # ---------------------------------------------------------------- skills

    def _skills(self, flow: Any, timeout: float | None) -> Any:
        from ._client_skills import run_sync  # noqa: PLC0415 -- on first use

        return run_sync(flow, lambda method, params: self.request(method, params, timeout=timeout))

    def list_skills(self, *, timeout: float | None = None) -> SkillListing:
        """Every skill entry, the invalid ones reported apart (see
        :meth:`mcp_trio.Client.list_skills`)."""
        from ._client_skills import list_skills  # noqa: PLC0415 -- on first use

        listing: SkillListing = self._skills(list_skills(), timeout)
        return listing

    def get_skill(self, uri: str, *, timeout: float | None = None) -> Skill:
        """One skill's entry (see :meth:`mcp_trio.Client.get_skill`)."""
        from ._client_skills import get_skill  # noqa: PLC0415 -- on first use

        skill: Skill = self._skills(get_skill(uri), timeout)
        return skill

    def read_resource_directory(
        self, uri: str, *, timeout: float | None = None
    ) -> list[t.Resource]:
        """A directory's children (see :meth:`mcp_trio.Client.read_resource_directory`)."""
        from ._client_skills import read_resource_directory  # noqa: PLC0415 -- on first use

        children: list[t.Resource] = self._skills(read_resource_directory(uri), timeout)
        return children

    def _read_bound(self) -> tuple[int, str]:
        """As :meth:`mcp_trio.Client._read_bound` (only Streamable HTTP has a bound of
        its own)."""
        own = None if self._http is None else self._http.message_bound()
        return read_bound(self._conn.config.max_message_size, own)

    def load_skill(
        self, skill: Skill, *, allow_dynamic: bool = False, timeout: float | None = None
    ) -> str:
        """A skill's verified ``SKILL.md`` (see :meth:`mcp_trio.Client.load_skill`)."""
        from ._client_skills import load_skill  # noqa: PLC0415 -- on first use

        limit, setting = self._read_bound()
        flow = load_skill(
            skill, allow_dynamic=allow_dynamic, max_message_size=limit, setting=setting
        )
        text: str = self._skills(flow, timeout)
        return text

    def read_skill_file(
        self,
        skill: Skill,
        file: str,
        *,
        allow_dynamic: bool = False,
        timeout: float | None = None,
    ) -> bytes:
        """One verified file of a skill (see :meth:`mcp_trio.Client.read_skill_file`)."""
        from ._client_skills import read_skill_file  # noqa: PLC0415 -- on first use

        limit, setting = self._read_bound()
        flow = read_skill_file(
            skill, file, allow_dynamic=allow_dynamic, max_message_size=limit, setting=setting
        )
        data: bytes = self._skills(flow, timeout)
        return data

    def list_prompts(self, *, timeout: float | None = None) -> list[t.Prompt]:
        """Every prompt, across all pages (``timeout``: as for :meth:`list_tools`)."""
        return self._list("prompts/list", timeout=timeout)

    def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, *, timeout: float | None = None
    ) -> t.GetPromptResult:
        """Get a prompt filled in with ``arguments``."""
        params = named_params(name, arguments)
        progress = self._long_progress(None, timeout)
        result = self.request("prompts/get", params, timeout=timeout, on_progress=progress)
        return structure(result, t.GetPromptResult)

    def _long_progress(
        self, on_progress: ProgressFunction | None, timeout: float | None
    ) -> ProgressFunction | None:
        """The progress callback of a long request (see ``_client_common.timed``)."""
        if on_progress is None and timed(timeout, self._conn.config):
            return _ignore_progress
        return on_progress

    def complete(
        self,
        ref: t.PromptReference | t.ResourceTemplateReference | Mapping[str, Any],
        argument_name: str,
        value: str,
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> t.CompleteResultCompletion:
        """Completions of an argument (``completion/complete``; ``timeout``: seconds
        without an answer, default: the client's)."""
        params = complete_params(ref, argument_name, value, context)
        result = self.request("completion/complete", params, timeout=timeout)
        return structure(result, t.CompleteResult).completion

    def set_logging_level(self, level: str) -> None:
        """Legacy: ``logging/setLevel``; modern: the level of later requests' envelopes."""
        check_log_level(level)
        if self.era is Era.LEGACY:
            self.request("logging/setLevel", {"level": level})
        self._log_level = level

    def ping(self) -> None:
        """Legacy era: ``ping``.

        Raises:
            LocalProtocolError: modern era (there is no ping).
        """
        if self.era is not Era.LEGACY:
            raise LocalProtocolError("'ping' does not exist in the modern era")
        self.request("ping")

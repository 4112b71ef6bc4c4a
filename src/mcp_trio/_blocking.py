"""A blocking MCP client: :class:`BlockingClient`, on ``mcp_sansio`` alone.

No trio, no asyncio, no threads: one ``selectors`` loop over a subprocess's pipes (stdio),
a TCP socket (newline-delimited JSON), or the sockets of Streamable HTTP exchanges
(:meth:`BlockingClient.http`; :mod:`mcp_trio._blocking_http`, loaded on first use, with
h11 and ``ssl``). It is the proof that the core is sans-IO --
everything protocol-shaped (handshake and era probe, ids, timeouts, cancellation,
progress, the MRTR bookkeeping) is the core's; the client and its links only move bytes
and read the clock.

Theory of operation
-------------------
The client is transport-neutral; how its messages travel is a *link* (:class:`Link`),
one of two loop strategies: bytes over a subprocess's pipes or a TCP socket
(:class:`~mcp_trio._blocking_bytes.ByteLink`: an outbox, backpressure, a piped stderr)
or one message per Streamable HTTP exchange
(:class:`~mcp_trio._blocking_http.HttpLink`). Every call into the core is followed by
handing its output to the link. A method that waits (:meth:`BlockingClient.request`,
the handshake) runs :meth:`~BlockingClient._run_until`, one loop for both: it fires the
core's timers (``next_deadline()`` / ``handle_timer``), gives up at the caller's
deadline, ends a new session not ready in time, fires the link's own timer, and lets the
link wait until the earliest of them, moving bytes both ways and handing what came to the
core (:class:`Hooks` is what a link may do to the client). The resulting events are all
handled at once (outcomes stored by request id, server requests answered synchronously
with the callbacks; a callback's exception is raised once the rest are handled, so one
failing callback cannot leave a server request unanswered).

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

Every time is on one clock (:class:`CallClock`) that runs only while a call waits:
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

import functools
import inspect
import logging
import math
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import (
    IO,
    TYPE_CHECKING,
    Any,
    Concatenate,
    Final,
    ParamSpec,
    Protocol,
    TypeAlias,
    TypeVar,
    final,
)

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
    SubscriptionNotificationReceived,
    structure,
)
from mcp_sansio import types as t
from mcp_sansio._tasks import TASKS_EXTENSION, declares_tasks
from mcp_sansio._versions import has_capability

from ._blocking_bytes import ByteLink, ByteTransport, ProcessTransport, SocketTransport
from ._blocking_dial import dial
from ._blocking_subscriptions import BlockingSubscription
from ._client_common import (
    CallbackAnswerError,
    EraChoice,
    HandshakeFacts,
    OutputSchemas,
    RootLike,
    ToolOutput,
    answer_roots,
    check_log_level,
    checked_answer,
    checked_plain,
    checked_roots,
    checked_str,
    checked_strings,
    client_config,
    complete_params,
    elicitation_params,
    legacy_honored,
    listen_params,
    log_params,
    name_the_argument,
    named_params,
    not_a_program,
    pager,
    read_bound,
    refuse_unanswerable,
    refused_answer,
    request_params,
    sampling_params,
    timed,
)
from ._errors_base import (
    HandshakeFailed,
    McpError,
    SessionClosed,
    name_the_endpoint,
    received_error,
    refuse_endless_input,
)
from ._text import LOG_TEXT_LIMIT, clip

if TYPE_CHECKING:
    import ssl

    from mcp_sansio.http import HttpClientConfig
    from mcp_sansio.skills import Skill, SkillListing

    from ._http_config import HttpTransportConfig

__all__ = [
    "BlockingClient",
    "ElicitationFunction",
    "LogFunction",
    "NotificationFunction",
    "ProgressFunction",
    "RootsFunction",
    "SamplingFunction",
]

logger = logging.getLogger("mcp_trio")

# The callbacks of BlockingClient: plain functions (the *Callback twins of open_client
# are async ones).
SamplingFunction: TypeAlias = Callable[
    [t.CreateMessageRequestParams], t.CreateMessageResult | Mapping[str, Any]
]
"""``def on_sampling(params) -> types.CreateMessageResult`` (or the result as a dict):
:class:`BlockingClient`'s twin of :data:`~mcp_trio.SamplingCallback`."""
ElicitationFunction: TypeAlias = Callable[
    [t.ElicitRequestFormParams | t.ElicitRequestURLParams], t.ElicitResult | Mapping[str, Any]
]
"""``def on_elicitation(params) -> types.ElicitResult`` (or the result as a dict):
:class:`BlockingClient`'s twin of :data:`~mcp_trio.ElicitationCallback`."""
RootsFunction: TypeAlias = Callable[[], Iterable[RootLike]]
"""``def roots() -> [types.Root | "file://..." | {"uri": ...}, ...]``:
:class:`BlockingClient`'s twin of :data:`~mcp_trio.RootsCallback`."""
LogFunction: TypeAlias = Callable[[t.LoggingMessageNotificationParams], object]
"""``def on_log(params) -> None``: one ``notifications/message`` (what it returns is
ignored)."""
ProgressFunction: TypeAlias = Callable[[ProgressReceived], object]
"""``def on_progress(event) -> None``: one ``notifications/progress`` of the call (what it
returns is ignored)."""


def _ignore_progress(event: ProgressReceived) -> None:
    pass


NotificationFunction: TypeAlias = Callable[[NotificationReceived], object]
"""``def on_notification(note) -> None``: each notification no other callback takes
(what it returns is ignored); :class:`BlockingClient`'s ``on_notification``."""

_COURTESY_WRITE_TIMEOUT: Final = 1.0
"""Seconds to write what is left when a call is abandoned or the client closed."""
_LONGEST_WAIT: Final = 3600.0
"""Seconds: the longest single wait on the selector (a longer one is waited in pieces)."""
_START_METHODS: Final = frozenset({"initialize", "server/discover"})
_LISTEN_ACK_TIMEOUT: Final = 30.0
"""Seconds a modern server has to acknowledge a ``subscriptions/listen`` (the Trio
client's ``SessionConfig.listen_ack_timeout``)."""
_UNSUBSCRIBE_TIMEOUT: Final = 2.0
"""Legacy: seconds each courtesy ``resources/unsubscribe`` may take, leaving a
:meth:`BlockingClient.subscribe` block."""
_INTERRUPTED: Final = "Internal error: the client was interrupted"
"""The error message of a server request left by Ctrl-C in a callback."""
_Outcome = ResultReceived | ErrorReceived | RequestTimedOut | InputRequired
_P = ParamSpec("_P")
_R = TypeVar("_R")
_TWO_THREADS: Final = (
    "BlockingClient used by two threads at once: it is not thread-safe; "
    "use one client per thread (or a lock around every call)"
)


def _one_thread(
    method: Callable[Concatenate[BlockingClient, _P], _R],
) -> Callable[Concatenate[BlockingClient, _P], _R]:
    """Decorate a method that touches the connection: it raises ``RuntimeError`` while
    another thread is inside one (see :meth:`BlockingClient._in_use`)."""

    def guarded(self: BlockingClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._in_use():
            return method(self, *args, **kwargs)

    functools.update_wrapper(guarded, method)  # (not @wraps: mypy loses Concatenate)
    return guarded


@final
class CallClock:
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


class Link(Protocol):
    """How the client's messages travel, one of two strategies: bytes over a pipe or a
    socket (:class:`~mcp_trio._blocking_bytes.ByteLink`), or a message per HTTP
    exchange (:class:`~mcp_trio._blocking_http.HttpLink`). The client's loop
    (:meth:`BlockingClient._loop`) fires the core's timers and asks the link for the
    rest."""

    def attach(self, hooks: Hooks) -> None:
        """Learn what to drive (once, before anything else)."""
        ...

    def message_bound(self) -> tuple[int, str] | None:
        """The link's own bound on one message and the setting that sets it, if any."""
        ...

    def begin(self) -> None:
        """A loop starts: hand the core what came meanwhile (a failure to send, say)."""
        ...

    def queue(self, *, own: bool = False) -> None:
        """Take the core's output (``own``: our requests, not replies to the server)."""
        ...

    def unwritten(self) -> bool:
        """Whether something queued for the server is not written yet."""
        ...

    def next_deadline(self) -> float | None:
        """When the link's own timer is due (on the client's clock)."""
        ...

    def handle_timer(self, now: float) -> None:
        """The link's timer is due."""
        ...

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds; move what is ready, what came to the core."""
        ...

    def flush(self, *, within: float | None) -> None:
        """The loop ended: write what can be written (over HTTP, for ``within`` seconds
        at most, handling nothing; ``None``: not at all)."""
        ...

    def goodbye(self, now: float) -> tuple[Callable[[], bool], float] | None:
        """Closing: start ending the session; what to wait for, and how long."""
        ...

    def close(self, *, urgent: bool = False) -> None:
        """Release everything (the spawned server stopped, the sockets closed);
        ``urgent`` (Ctrl-C while closing): a spawned server killed at once."""
        ...


@final
@attrs.frozen(kw_only=True)
class Hooks:
    """What a :class:`Link` may do to the client whose messages it carries."""

    conn: Connection
    """The core: its output to send, the input to give it."""
    clock: CallClock
    """The client's time."""
    handle: Callable[[list[Event]], None]
    """Handle the core's events (raises the first callback exception, once all are)."""
    handle_uncalled: Callable[[list[Event]], None]
    """Handle them with no callback (after Ctrl-C in one): the server's requests answered
    with an error."""
    fail: Callable[[SessionClosed], None]
    """The session ended (the input ended, writing failed, the server is unreachable)."""
    failed: Callable[[], bool]
    """Whether the session ended."""
    handshaken: Callable[[], bool]
    """Whether the handshake is done."""
    restart: Callable[[float], None]
    """The server forgot the session (HTTP ``404``): start a new one, now."""
    reissue: Callable[[RequestId], int | None]
    """The answer to our modern request was lost after it was written (HTTP: its stream
    broke): ``None`` if the core sent it again under a new id, else how many times it
    was re-issued before (fail it then; see :meth:`BlockingClient._reissue`)."""
    wake: socket.socket | None = None
    """Readable when another thread asks the waiting call to end (its
    :meth:`BlockingClient.close`): :meth:`Link.wait` returns then too (the client reads
    it)."""


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
    on_progress: ProgressFunction | None = None
    log_level: str | None = None
    client_info: t.Implementation | Mapping[str, Any] | None = None
    capabilities: Mapping[str, Any] | None = None
    timeout: float | None = None
    handshake_timeout: float | None = 30.0
    write_timeout: float | None = 30.0
    connection_config: ConnectionConfig | None = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> _Options:
        """The options among a constructor's arguments: its ``locals()``, taken first
        thing (every field is a parameter of each, of the same name and default:
        ``tests/test_blocking_client.py`` checks)."""
        return cls(**{field.name: arguments[field.name] for field in attrs.fields(cls)})

    def core_config(self) -> ConnectionConfig:
        """Check the arguments (a list of roots is taken once, and checked); the core's
        configuration.

        Raises:
            ValueError: ``capabilities`` declare the tasks extension, which this client
                cannot handle (a ``CreateTaskResult`` would come back as an empty
                output), or hold a top-level ``tasks`` (the 2025-11-25 tasks, which
                mcp_trio does not implement).
        """
        self.roots = checked_roots(self.roots)
        self.on_notification = checked_plain(self.on_notification, "on_notification")
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
    handling: ``capabilities`` that declare the tasks extension, or hold a top-level
    ``tasks`` (the 2025-11-25 tasks), raise ``ValueError``.

    Error handling:
        ``McpError`` (the server answered with an error), built-in ``TimeoutError``
        (the request was cancelled on the wire), ``SessionClosed`` / ``ServerExited``
        (the connection ended), ``InputRequiredError``, ``HandshakeFailed``;
        ``LocalProtocolError`` for calls the server's capabilities or era rule out;
        ``RemoteProtocolError`` for a result that does not fit the protocol's types
        (a ``resultType`` it does not recognize, a malformed input-required result; or,
        for :meth:`call_tool`, the tool's known output schema).

    Callbacks (and ``on_progress``) run inside the call that is waiting; an exception
    from one propagates out of that call (the request is cancelled on the wire), except
    from a legacy server-request callback, which is answered -32603 and logged. The
    other messages of the same read are handled first (server requests among them are
    answered); if more callbacks fail, the first exception is raised and the others are
    logged. Once a call raises, its cancellation is written (a second at most): a callback
    that fails meanwhile is logged and does not replace the exception (Ctrl-C does). While
    :meth:`close` writes what is left, callback exceptions are logged only. Ctrl-C in a
    callback is raised at once, the rest of the read handled with no callback: every
    server request among them, and the one interrupted, is answered -32603.

    Not thread-safe: one thread uses one client. A call while another thread's call
    runs raises ``RuntimeError`` (it used to corrupt the connection: duplicate request
    ids, buffer errors), and so does leaving a :meth:`subscribe` block then;
    :meth:`close` from another thread still closes it, and the waiting call raises
    ``SessionClosed``.
    """

    def __init__(self, link: Link, conn: Connection, options: _Options) -> None:
        self._link = link
        self._conn = conn
        self._options = options
        self._log_level: str | None = None
        self._outcomes: dict[RequestId, _Outcome] = {}
        self._progress: dict[RequestId, ProgressFunction] = {}
        self._awaited: set[RequestId] = set()  # our requests a call waits for
        self._moved: dict[RequestId, RequestId] = {}  # re-issued: old id -> new id
        self._handshake: HandshakeCompleted | None = None
        self._handshake_failure: BaseException | None = None
        self._expired: TimeoutError | None = None
        """The last loop deadline's own ``TimeoutError`` (see :meth:`_abandon`)."""
        self._failure: SessionClosed | None = None
        self._restarting = False  # HTTP: a new session replaces one the server forgot
        self._restart_deadline: float | None = None  # ... ready by then (handshake_timeout)
        self._clock = CallClock()
        self._closed = False
        self._state = threading.Lock()  # held briefly, for the next three: see _in_use
        self._user: int | None = None  # the thread inside a call (see _in_use)
        self._close_asked = False  # by another thread's close(), while _user's call runs
        # (wakes _user's wait for it: a socket pair, which every selector takes)
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        self._waker.setblocking(False)
        # One connection, one handshake: there is no new session for the schemas to
        # follow (the Trio client's may start anew over HTTP).
        self._output_schemas = OutputSchemas()
        self._subscriptions: list[BlockingSubscription] = []  # legacy, open
        self._listens: dict[RequestId, BlockingSubscription] = {}  # modern, by listen id
        self._uri_refs: dict[str, int] = {}  # legacy: resources/subscribe, counted
        self._uri_explicit: set[str] = set()  # subscribe_resource()'s (one count each)
        link.attach(
            Hooks(
                conn=conn,
                clock=self._clock,
                handle=self._handle,
                handle_uncalled=self._handle_uncalled,
                fail=self._fail,
                failed=lambda: self._failure is not None,
                handshaken=lambda: self._handshake is not None,
                restart=self._restart_session,
                reissue=self._reissue,
                wake=self._wake,
            )
        )

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
        on_progress: ProgressFunction | None = None,
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
                after SIGTERM, before SIGKILL. The server leads a new session
                (``setsid``) and the signals go to its process group: one started
                through a wrapper (``sh -c``) is stopped too; Ctrl-C in a terminal
                reaches only this process, and closing the client stops the server.
                Once the server has exited, what it left in its group (a helper) gets
                SIGTERM, then SIGKILL ``stop_timeout`` later; a daemon meant to outlive
                it starts a session of its own. The server has no controlling
                terminal: one that prompts on ``/dev/tty`` (``ssh`` asking for a
                password, ``sudo``) cannot; use keys, an agent or ``SSH_ASKPASS``.
            era, protocol_version, on_sampling, on_elicitation, roots, on_log,
                log_level, client_info, capabilities, timeout, connection_config:
                as for :func:`mcp_trio.open_client` (callbacks are plain functions).
            on_notification: called with every other notification the server sends,
                in the call that was waiting when it came; what it raises propagates
                from that call. A plain function: an ``async`` one is a ``TypeError``.
            on_progress: the default progress function of :meth:`call_tool`,
                :meth:`read_resource` and :meth:`get_prompt` (as ``open_client``'s).
            handshake_timeout: seconds for the handshake (``None``: no limit).
            write_timeout: seconds the server may go without reading what we send
                before it is taken for dead (``None``: no limit).

        Raises:
            ValueError: ``command`` is empty, or ``capabilities`` declare the tasks
                extension (``mcp_trio.TASKS_EXTENSION``): this client cannot run a tool
                as a task (:class:`mcp_trio.Client` can), so it does not let a server
                answer with one; or ``capabilities`` hold a top-level ``tasks`` (the
                2025-11-25 tasks, which mcp_trio does not implement: it would promise a
                legacy server task-augmented requests never served).
            OSError: the program could not be started. A ``.py`` file is not a program:
                its ``FileNotFoundError`` / ``PermissionError`` says to spawn it with the
                interpreter (``[sys.executable, "server.py"]``), as
                :func:`mcp_trio.open_client`'s does.
            HandshakeFailed, TimeoutError, ServerExited: the handshake failed.
        """
        options = _Options.of(locals())
        config = options.core_config()
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("the server command is empty")
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=cwd,
                bufsize=0,
                # Its own process group, signalled whole at close (a server behind a
                # wrapper, its helpers); Ctrl-C in a terminal reaches us alone, and
                # close() then stops it (see ProcessTransport.close).
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            if not argv[0].endswith(".py"):
                raise
            raise type(exc)(not_a_program(argv, exc, spawn="BlockingClient.stdio")) from exc
        return cls._started(ProcessTransport(process, stop_timeout), config, options)

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
        on_progress: ProgressFunction | None = None,
        log_level: str | None = None,
        client_info: t.Implementation | Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        handshake_timeout: float | None = 30.0,
        write_timeout: float | None = 30.0,
        connection_config: ConnectionConfig | None = None,
    ) -> BlockingClient:
        """Connect over TCP, newline-delimited JSON (stdio framing on a socket: a
        custom transport; the server must speak it). Arguments as for :meth:`stdio`;
        ``connect_timeout`` is shared by the host's addresses, tried in turn, each for
        its share (at least 2 s, or what is left), counted from when the host is
        resolved; the first address is tried whatever is left. A host name is resolved
        with the system's resolver, which blocks and cannot be interrupted (no timeout
        applies); an IP address is not looked up.

        Raises:
            ValueError: ``capabilities`` declare the tasks extension, or hold a
                top-level ``tasks`` (as for :meth:`stdio`).
            TimeoutError: no address answered within ``connect_timeout``.
            OSError: no connection (the name does not resolve; the last address's error).
            HandshakeFailed, TimeoutError, SessionClosed: the handshake failed.
        """
        options = _Options.of(locals())
        config = options.core_config()
        sock = dial(host, port, connect_timeout)
        return cls._started(SocketTransport(sock), config, options)

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
        on_progress: ProgressFunction | None = None,
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
            close_timeout: seconds the closing ``DELETE`` of a legacy session may take
                (half of it at most spent first waiting for the server to take the
                one-way messages before it, a call's cancellation).
            write_timeout: seconds a request may go without progress while written;
                also the bound on the whole answer to a one-way POST (a notification,
                an answer to the server), from its writing.
            era, protocol_version, on_sampling, on_elicitation, roots, on_log,
                on_notification, on_progress, log_level, client_info, capabilities,
                timeout, handshake_timeout, connection_config: as for :meth:`stdio`.

        Resolving: an address literal (``127.0.0.1``, ``[::1]``) is used as it is; a host
        name is resolved for the first connection with the system's resolver, which
        blocks the calling thread for as long as it takes -- no timeout of the client's
        applies and, without threads, nothing can interrupt it (Ctrl-C is seen only
        after); give an address to avoid it. Connecting tries the addresses in turn
        within one ``connect_timeout``, each for its share (at least 2 s, or what is
        left) so that one that never answers leaves time for the next; later
        connections use the same addresses, the one that answered first, within the
        first half of ``connect_timeout``. When none of them is connected to by then
        (refused, or silent: the server moved, say), the name is resolved again and
        that connection tried once more within the other half; only then is the
        server unreachable (``SessionClosed``).

        Raises:
            ValueError: ``url`` is not an absolute http(s) URL, or a header is
                malformed, given twice, or one the transport writes itself; or
                ``capabilities`` declare the tasks extension, or hold a top-level
                ``tasks`` (as for :meth:`stdio`).
            SessionClosed: the server cannot be reached.
            HandshakeFailed, TimeoutError: the handshake failed (a 404, no MCP
                endpoint at the URL's path, or a bare 400, a WebSocket server, says so,
                naming the URL).
        """
        options = _Options.of(locals())
        from mcp_sansio.http import pinned_http_config  # noqa: PLC0415 -- (HTTP only)

        from ._blocking_http import HttpLink, HttpTransport  # noqa: PLC0415 -- h11, ssl
        from ._http_config import HttpTransportConfig  # noqa: PLC0415

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
        try:
            return cls._opened(HttpLink(http, close_timeout=close_timeout), config, options)
        except HandshakeFailed as exc:
            name_the_endpoint(exc, url)  # (as open_client's)
            raise

    @classmethod
    def _started(
        cls, transport: ByteTransport, config: ConnectionConfig, options: _Options
    ) -> BlockingClient:
        limit = config.max_message_size
        link = ByteLink(transport, max_message_size=limit, write_timeout=options.write_timeout)
        return cls._opened(link, config, options)

    @classmethod
    def _opened(cls, link: Link, config: ConnectionConfig, options: _Options) -> BlockingClient:
        client = cls(link, Connection("client", config), options)
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
        not raised. Ctrl-C meanwhile: a spawned server is killed at once, and Ctrl-C
        raised.

        From another thread while a call runs: that call is asked to end, and this
        returns at once. The call's own thread closes the client (as above), at once
        even if it waits for the server, and the call raises ``SessionClosed``; no
        two threads use the connection at once.
        """
        with self._in_use(closing=True) as ours:  # (no call may start meanwhile)
            if ours:
                self._close()

    def _close(self) -> None:
        """:meth:`close`, in the thread that uses the connection."""
        if self._closed:
            return
        self._closed = True
        link = self._link
        urgent = False
        try:
            if self._failure is None and self._conn.pending_requests():
                # (Closed from another thread while a call waits.) Tell the server its
                # requests are no longer wanted, as the Trio session's close does, so it
                # stops them rather than finish work nobody reads; written below, with
                # the rest, for _COURTESY_WRITE_TIMEOUT at most.
                for rid in self._conn.pending_requests():
                    with suppress(LocalProtocolError):  # (initialize cannot be cancelled)
                        self._conn.cancel_request(rid, "the client is closing")
                self._queue(own=True)
            if self._failure is None and link.unwritten():
                deadline = self._clock.now() + _COURTESY_WRITE_TIMEOUT
                try:
                    self._run_until(
                        lambda: not link.unwritten(), deadline, "closing", courtesy=False
                    )
                except Exception:
                    logger.debug("could not write everything before closing", exc_info=True)
            now = self._clock.now()
            bye = link.goodbye(now) if self._failure is None else None
            if bye is not None:  # (HTTP, legacy: the DELETE that ends the session)
                done, limit = bye
                try:
                    self._run_until(done, now + limit, "closing the session", courtesy=False)
                except Exception:
                    logger.debug("the session was not ended in time", exc_info=True)
        except BaseException as exc:
            urgent = isinstance(exc, KeyboardInterrupt)  # (Ctrl-C: no graceful stop awaited)
            raise
        finally:
            self._conn.receive_eof(now=self._clock.now())
            if self._failure is None:
                self._failure = SessionClosed("the client was closed")
            self._end_subscriptions(self._failure)
            try:
                link.close(urgent=urgent)
            finally:
                with self._state:  # (so that close() never wakes a closed socket)
                    self._wake.close()
                    self._waker.close()

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

    @_one_thread
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
            rid, outcome = self._wait_for(rid, method, on_progress, deadline)
            if isinstance(outcome, ResultReceived):
                return outcome.result
            if isinstance(outcome, ErrorReceived):
                raise received_error(outcome)
            if isinstance(outcome, RequestTimedOut):
                config = self._conn.config
                limit = timeout if timeout is not None else config.request_timeout
                # (Said only when it is the one deadline that applies.)
                known = limit is not None and config.max_request_time is None
                after = f" after {limit:g} s" if known else ""
                raise TimeoutError(f"{method} timed out{after} (request {rid!r})")
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
    ) -> tuple[RequestId, _Outcome]:
        """Wait for the outcome of our request ``rid``, and of each re-issue of it
        (:meth:`_reissue`; ``on_progress`` follows the new id): the id that ends it,
        and its outcome."""
        self._queue(own=True)
        while True:
            self._awaited.add(rid)
            if on_progress is not None:
                self._progress[rid] = on_progress
            try:
                self._run_until(self._ended(rid), deadline, method)
            except BaseException:
                self._awaited.discard(rid)  # (a break now fails it: it is not re-issued)
                self._abandon(self._newest(rid))
                raise
            finally:
                self._awaited.discard(rid)
                self._progress.pop(rid, None)
            moved = self._moved.pop(rid, None)
            if moved is None:
                return rid, self._outcomes.pop(rid)
            rid = moved

    def _ended(self, rid: RequestId) -> Callable[[], bool]:
        """Whether our request ``rid`` has its outcome, or was re-issued."""
        return lambda: rid in self._outcomes or rid in self._moved

    def _newest(self, rid: RequestId) -> RequestId:
        """The last re-issue of our request ``rid`` (itself if none), the ones before
        forgotten."""
        while (moved := self._moved.pop(rid, None)) is not None:
            rid = moved
        return rid

    def _reissue(self, rid: RequestId) -> int | None:
        """The link's ``reissue`` hook (:class:`Hooks`): the answer to our request
        ``rid`` was lost after it was written (a modern Streamable HTTP stream broke).
        If a call waits for it, the core makes it again under a new id
        (``Connection.reissue_request``: same params, new progress token, the deadline
        as it stands, at most ``max_reissues`` times), queued for the link, and the
        call waits for that one (:meth:`_wait_for`). ``None`` when re-issued; else how
        many times it was before, for the error the link then fails it with (the
        bound, its deadline passed, or no call waits for it: the Trio session's rule)."""
        conn = self._conn
        if rid not in self._awaited:
            return conn.reissue_count(rid)
        try:
            new = conn.reissue_request(rid, now=self._clock.now())
        except LocalProtocolError:
            return conn.reissue_count(rid)
        self._moved[rid] = new  # (its progress callback is set when the call waits for it)
        return None

    @_one_thread  # (its loop would retry another thread's RuntimeError for good)
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
                    lambda: not self._link.unwritten(), deadline, "cancelling", courtesy=False
                )
            except Exception as exc:
                # (A callback's TimeoutError or SessionClosed is a callback's failure.)
                ran_out = exc is self._expired
                if ran_out or exc is self._failure:
                    logger.debug("request %r given up; the cancellation: %s", rid, exc)
                    return
                logger.exception("a callback failed while request %r was given up", rid)
                continue
            return

    def _raise_if_closed(self) -> None:
        if self._failure is not None:
            raise self._failure

    @contextmanager
    def _in_use(self, *, closing: bool = False) -> Iterator[bool]:
        """This thread uses the connection meanwhile (yields ``True``); another thread's
        call raises ``RuntimeError`` at once rather than wait (a blocking client is for
        one thread: waiting would only hide that). A call inside a call of the same
        thread (a callback's, the loop's own) goes on. ``closing`` (:meth:`close`):
        while another thread's call runs, that call is asked to end instead, and it
        yields ``False`` (that thread closes the client)."""
        me = threading.get_ident()
        with self._state:
            user = self._user
            if user is None:
                self._user = me
            elif user != me and closing and not self._closed:
                self._close_asked = True
                with suppress(OSError):  # (full: a wake-up is pending already)
                    self._waker.send(b"\0")
        if user is None:
            try:
                yield True
            finally:
                self._leave()
        elif user == me:
            yield True
        elif closing:
            yield False
        else:
            raise RuntimeError(_TWO_THREADS)

    def _leave(self) -> None:
        """This thread's call is over: the connection is free again, once the client
        is closed if another thread asked for it meanwhile (its :meth:`close` left that
        to us: the call may have ended before it saw the request).

        "No request pending, so release" is one step under the lock: a :meth:`close`
        that came between a look and the release would return, its request wiped, the
        client left open and its wake-up unread (every later wait would wake at once).

        A flag, not ``except BaseException``: Python may raise a Ctrl-C at its signal
        check just after the lock is let go, once the connection is free and perhaps
        taken by another thread: a handler would free it under that thread's feet. No
        signal is checked between freeing it and setting the flag."""
        released = False
        try:
            while True:
                with self._state:
                    if not self._close_asked:
                        self._user = None
                        released = True
                        return
                    asked = self._take_close_request_locked()
                if asked:
                    self._close()
        finally:
            if not released:  # (a failure while closing: free it all the same)
                with self._state:
                    self._user = None
                    self._take_close_request_locked()

    def _take_close_request(self) -> bool:
        """Whether another thread's :meth:`close` asked the running call to end (the
        request and its wake-up taken: asked once, answered once)."""
        if not self._close_asked:  # (the common case, without the lock: a request
            return False  # missed here is taken by _leave, under the lock)
        with self._state:
            return self._take_close_request_locked()

    def _take_close_request_locked(self) -> bool:
        """:meth:`_take_close_request`, ``_state`` held: the flag cleared and the
        wake-up read with it, so that no wake-up outlives its request."""
        self._close_asked = False
        with suppress(OSError):  # (nothing to read, or closed: nothing to take)
            self._wake.recv(64)
        return not self._closed

    def _end_if_asked(self) -> None:
        """Another thread's :meth:`close` asked the running call to end: close the
        client here, in the thread that uses it, and end the call.

        Raises:
            SessionClosed: it was asked.
        """
        if self._take_close_request():
            self._close()
            assert self._failure is not None
            raise self._failure

    # ------------------------------------------------------------------ the loop

    def _queue(self, *, own: bool = False) -> None:
        """Hand the core's output to the link; ``own``: our requests, not replies."""
        self._link.queue(own=own)

    @_one_thread
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
        nothing: see :meth:`HttpLink.flush <mcp_trio._blocking_http.HttpLink.flush>`; not
        when the loop raised, so nothing runs after the exception that ends the call).

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
                within = _COURTESY_WRITE_TIMEOUT if courtesy and returned else None
                self._link.flush(within=within)
            finally:
                self._clock.stop()

    def _loop(self, done: Callable[[], bool], deadline: float | None, what: str) -> None:
        """Until ``done()``: fire the core's timers, give up at ``deadline``, end a new
        session not ready in time, fire the link's own timer, and let the link wait
        until the earliest of them (a far or infinite one in pieces: ``select()``
        overflows)."""
        link = self._link
        link.begin()
        while True:
            # (Asked first: an outcome that came in the same read as a callback that
            # asked for the end does not win over it.)
            self._end_if_asked()
            if done():
                return
            self._raise_if_closed()
            now = self._clock.now()
            timer = self._conn.next_deadline()
            if timer is not None and timer <= now:
                self._handle(self._conn.handle_timer(now))
                continue
            if deadline is not None and deadline <= now:
                # (A plain TimeoutError; _abandon tells it from a callback's by identity.)
                self._expired = TimeoutError(f"{what} timed out")
                raise self._expired
            restart = self._restart_deadline
            if restart is not None and restart <= now:
                limit = self._options.handshake_timeout
                self._restart_failed(
                    f"the server forgot the session and did not start a new one in {limit:g} s"
                )
                continue
            own = link.next_deadline()
            if own is not None and own <= now:
                link.handle_timer(now)
                continue
            wake = min((d for d in (timer, deadline, restart, own) if d is not None), default=None)
            link.wait(_LONGEST_WAIT if wake is None else min(max(0.0, wake - now), _LONGEST_WAIT))

    def _restart_session(self, now: float) -> None:
        """The server forgot the session (HTTP ``404``): start a new one, ready within
        ``handshake_timeout`` (as the first handshake: ``Session._bound_restart``)."""
        try:
            self._conn.restart_session(now=now)
        except LocalProtocolError as exc:
            self._fail(
                SessionClosed(f"the server forgot the session, and a new one cannot start: {exc}")
            )
            return
        logger.debug("the server forgot the session: starting a new one")
        self._restarting = True
        limit = self._options.handshake_timeout
        if limit is not None:
            self._restart_deadline = now + limit
        self._output_schemas.forget()
        self._queue()

    def _restart_failed(self, reason: str) -> None:
        """The session that was to replace a forgotten one did not start: the client
        is closed (as the Trio session does)."""
        self._restarting = False
        self._restart_deadline = None
        if self._failure is None:
            self._fail(SessionClosed(reason))

    def _fail(self, failure: SessionClosed) -> None:
        """The session ended: every waiter gets ``failure``."""
        self._handle_quietly(self._conn.receive_eof(now=self._clock.now()))
        self._failure = failure
        self._handshake_failure = self._handshake_failure or failure
        self._end_subscriptions(failure)

    def _end_subscriptions(self, failure: SessionClosed) -> None:
        """The session ended: so does every open subscription (what it holds can still
        be read, then ``failure`` is raised), as :class:`~mcp_trio.Subscription` does."""
        for sub in [*self._subscriptions, *self._listens.values()]:
            sub._end(failure.reason, failure)
        self._subscriptions.clear()
        self._listens.clear()

    def _handle_quietly(self, events: list[Event]) -> None:
        for event in events:
            try:
                self._dispatch(event)
            except Exception:
                logger.exception("handling %s failed as the session ended", type(event).__name__)

    def _handle(self, events: list[Event]) -> None:
        """Handle every event; then raise the first callback exception, if any.

        Anything but an ``Exception`` (Ctrl-C in a callback) is raised once the rest of
        the events are handled with no callback: the server's requests among them are
        answered with an error (every request gets its answer), and an earlier
        callback's exception is logged."""
        self._queue()
        failed: Exception | None = None
        done = 0
        try:
            for event in events:
                done += 1
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
            self._handle_uncalled(events[done:])
            raise
        finally:
            self._queue()
        if failed is not None:
            if self._closed:  # close() is writing what is left: raising would stop it
                logger.error("a callback failed while closing", exc_info=failed)
                return
            raise failed

    def _handle_uncalled(self, events: list[Event]) -> None:
        """Handle ``events`` with no callback (the call was interrupted): the server's
        requests are answered with an error, notifications and progress dropped."""
        for event in events:
            try:
                if isinstance(event, RequestReceived):
                    self._conn.send_error(event.request_id, ErrorCode.INTERNAL_ERROR, _INTERRUPTED)
                elif not isinstance(event, NotificationReceived | ProgressReceived):
                    self._dispatch(event)  # (outcomes, the handshake: no user code)
            except Exception:
                logger.exception("handling %s failed as the call was interrupted", event)

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, ResultReceived | ErrorReceived) and event.request_id in self._listens:
            self._listen_ended(event)
        elif isinstance(event, ResultReceived | ErrorReceived | InputRequired | RequestTimedOut):
            if (
                isinstance(event, ErrorReceived | RequestTimedOut)
                and event.method in _START_METHODS
                and (self._restarting or self._handshake is None)
            ):
                self._start_failed(event)
            elif self._restarting and isinstance(event, ErrorReceived) and event.held:
                # A request held for the new session, which could not be started (the
                # core's error, not the server's): it ends with the session, whose close
                # follows in this batch (the start's failure), as when none comes in time.
                pass
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
        elif isinstance(event, SubscriptionNotificationReceived):
            self._listened(event)
        elif isinstance(event, ProgressReceived):
            callback = self._progress.get(event.request_id)
            if callback is not None:
                callback(event)

    def _start_failed(self, event: ErrorReceived | RequestTimedOut) -> None:
        """The ``initialize`` / ``server/discover`` of a restart or of the handshake
        failed."""
        if self._restarting:
            why = event.error.message if isinstance(event, ErrorReceived) else "timeout"
            self._restart_failed(
                f"the server forgot the session and did not start a new one: {why}"
            )
        else:
            self._handshake_failure = (
                HandshakeFailed(event.error)
                if isinstance(event, ErrorReceived)
                else TimeoutError(f"{event.method} timed out")
            )

    # ------------------------------------------------------------------ the server's turn

    def _callback_result(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        options = self._options
        if method == "sampling/createMessage" and options.on_sampling is not None:
            typed = sampling_params(params)
            return checked_answer(method, options.on_sampling(typed), typed, params)
        if method == "elicitation/create" and options.on_elicitation is not None:
            form = elicitation_params(params)
            return checked_answer(method, options.on_elicitation(form), form, params)
        if method == "roots/list" and options.roots is not None:
            roots = options.roots
            return answer_roots(roots() if callable(roots) else roots)
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
            except CallbackAnswerError as exc:  # (the application's bug)
                refused = refused_answer(event.method, rid, exc)
                self._conn.send_error(rid, refused.code, refused.message)
            except Exception:
                logger.exception("the %s callback failed", event.method)
                self._conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "Internal error")
            except BaseException:  # (Ctrl-C: answered all the same, then raised)
                self._conn.send_error(rid, ErrorCode.INTERNAL_ERROR, _INTERRUPTED)
                raise
            else:
                self._conn.send_result(rid, result)
        except (LocalProtocolError, TypeError, ValueError):  # the core refused the answer
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
        # (An MRTR round: the core held it to the declared capabilities already.)
        refuse_unanswerable(event, lambda method: given.get(method) is not None)
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
        for sub in self._subscriptions:
            sub._put(event)
        if event.method == "notifications/message" and self._options.on_log is not None:
            self._options.on_log(log_params(event.params))
        elif self._options.on_notification is not None:
            returned = self._options.on_notification(event)
            if inspect.isawaitable(returned):  # (a callable object that returns one)
                close = getattr(returned, "close", None)
                if callable(close):
                    close()  # (no "never awaited" warning on top)
                logger.error(
                    "on_notification returned an awaitable, which is not awaited (for %r): "
                    "give a plain function",
                    clip(event.method, LOG_TEXT_LIMIT),
                )

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
            TypeError: ``name`` is not a string, or ``arguments`` cannot be sent (as
                for :meth:`mcp_trio.Client.call_tool`). Nothing is sent.
            ValueError: an argument holds NaN or an infinity. Nothing is sent.
        """
        params = named_params(name, arguments)
        progress = self._long_progress(on_progress, timeout)
        try:
            result = self.request("tools/call", params, timeout=timeout, on_progress=progress)
        except TypeError:  # (the JSON library's, for an int beyond 64 bits: name it)
            name_the_argument(params)
            raise
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

    def read_resource(
        self,
        uri: str,
        *,
        on_progress: ProgressFunction | None = None,
        timeout: float | None = None,
    ) -> t.ReadResourceResult:
        """Read a resource (``on_progress``: default, the client's).

        Raises:
            TypeError: ``uri`` is not a string. Nothing is sent.
        """
        progress = self._long_progress(on_progress, timeout)
        params = {"uri": checked_str(uri, "the resource URI")}
        result = self.request("resources/read", params, timeout=timeout, on_progress=progress)
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
        own = self._link.message_bound()
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
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        on_progress: ProgressFunction | None = None,
        timeout: float | None = None,
    ) -> t.GetPromptResult:
        """Get a prompt filled in with ``arguments`` (``on_progress``: default, the
        client's).

        Raises:
            TypeError / ValueError: a ``name`` or ``arguments`` that cannot be sent: not
                a string, not a mapping, or a name or value that is not a string
                (``prompts/get`` takes strings only). Nothing is sent.
            McpError: the server refused (an unknown prompt, a missing argument).
        """
        params = named_params(name, arguments, strings=True)
        progress = self._long_progress(on_progress, timeout)
        result = self.request("prompts/get", params, timeout=timeout, on_progress=progress)
        return structure(result, t.GetPromptResult)

    def _long_progress(
        self, on_progress: ProgressFunction | None, timeout: float | None
    ) -> ProgressFunction | None:
        """The progress callback of a request (default: the client's ``on_progress``);
        one that a long request asks for progress with (see ``_client_common.timed``)."""
        chosen = on_progress or self._options.on_progress
        if chosen is None and timed(timeout, self._conn.config):
            return _ignore_progress
        return chosen

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

    @_one_thread  # (modern: it sends nothing, but changes what requests carry)
    def set_logging_level(self, level: str) -> None:
        """Legacy: ``logging/setLevel``; modern: the level of later requests' envelopes."""
        check_log_level(level)
        if self.era is Era.LEGACY:
            self.request("logging/setLevel", {"level": level})
        self._log_level = level

    @_one_thread
    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification; return once it is written (within ``write_timeout``).

        Raises:
            LocalProtocolError: a notification the session cannot send now.
            SessionClosed: the connection ended.
        """
        self._raise_if_closed()
        self._conn.send_notification(method, None if params is None else dict(params))
        self._queue(own=True)
        self._run_until(lambda: not self._link.unwritten(), None, method)

    # ------------------------------------------------------------------ subscriptions

    @contextmanager
    def subscribe(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resource_list: bool = False,
        resources: Iterable[str] = (),
        timeout: float | None = None,
    ) -> Iterator[BlockingSubscription]:
        """Receive change notifications for the ``with`` block, in either era (see
        :meth:`mcp_trio.Client.subscribe`)::

            with client.subscribe(tools=True) as updates:
                for note in updates:  # waits, running the client
                    ...

        Notifications are read while any call of the client waits, and kept by the
        subscription (bounded) until read (:meth:`BlockingSubscription.receive`).
        Legacy: the session's notifications, and ``resources/subscribe`` /
        ``resources/unsubscribe`` for ``resources`` when the server declares
        ``resources.subscribe`` (counted across overlapping blocks). Modern: one
        ``subscriptions/listen`` request, cancelled when the block exits.

        Args:
            tools, prompts, resource_list, resources: as for ``Client.subscribe``.
            timeout: seconds for the server to acknowledge (modern; at most 30) or to
                answer ``resources/subscribe`` (legacy); default: the client's.

        Raises:
            McpError: the server refused the subscription.
            TimeoutError: the server did not acknowledge in time; the listen was
                cancelled.
            RemoteProtocolError: modern: the server ended the listen before
                acknowledging it.
            RuntimeError: entered, or left, in one thread while another thread's call
                runs (one thread at a time: see the class). Left so, the subscription
                ends for its reader, but nothing is sent or changed on the connection
                (the listen is not cancelled, the URIs not unsubscribed: the session's
                end ends them).
        """
        self._raise_if_closed()
        sub = BlockingSubscription(
            self._wait,
            tools=tools,
            prompts=prompts,
            resource_list=resource_list,
            resources=checked_strings(resources, "the resource URI"),
        )
        limit = self._options.timeout if timeout is None else timeout
        opened = self._open_listen if self.era is Era.MODERN else self._open_legacy
        close = opened(sub, limit)
        try:
            yield sub
        finally:
            sub._end("the subscription was closed")  # (the reader's side, whatever follows)
            # What the exit sends and changes is a call: checked before anything is done
            # (from another thread it would cancel on the wire under a running call's feet).
            with self._in_use():
                close()

    def _wait(self, done: Callable[[], bool], timeout: float | None) -> None:
        """Run the client until ``done()``; ``TimeoutError`` after ``timeout`` s."""
        self._raise_if_closed()
        deadline = None if timeout is None else self._clock.now() + timeout
        self._run_until(done, deadline, "waiting for a notification")

    @_one_thread
    def _open_listen(self, sub: BlockingSubscription, limit: float | None) -> Callable[[], None]:
        sub_params = listen_params(
            tools=sub.tools,
            prompts=sub.prompts,
            resource_list=sub.resource_list,
            resources=sub.resources,
        )
        wire = request_params(sub_params, self.era, self._log_level)
        rid = self._conn.send_request("subscriptions/listen", wire, now=self._clock.now())
        self._listens[rid] = sub
        bound = _LISTEN_ACK_TIMEOUT if limit is None else min(limit, _LISTEN_ACK_TIMEOUT)

        def close() -> None:
            if self._listens.pop(rid, None) is not None:
                self._abandon(rid)  # (cancelled on the wire, briefly)

        self._queue(own=True)
        try:
            self._wait(lambda: sub.subscription_id is not None or sub.ended, bound)
        except TimeoutError as exc:
            close()
            waited = f"the server never acknowledged it (waited {bound:g} s)"
            raise TimeoutError(f"subscriptions/listen: {waited}") from exc
        except BaseException:
            close()
            raise
        if sub.subscription_id is None:  # (ended before it was acknowledged)
            close()
            assert sub._failure is not None
            raise sub._failure.with_traceback(None)
        return close

    def _listened(self, event: SubscriptionNotificationReceived) -> None:
        """A notification of one of our listens: its acknowledgment, its end (the server
        cancelled it), or one to deliver."""
        sub = self._listens.get(event.subscription_id)
        if sub is None:
            return  # (a listen given up on)
        if event.method == "notifications/subscriptions/acknowledged":
            honored = (event.params or {}).get("notifications")
            sub.honored = dict(honored) if isinstance(honored, dict) else {}
            sub.subscription_id = event.subscription_id
        elif event.method == "notifications/cancelled":
            del self._listens[event.subscription_id]
            sub._end("the server cancelled the subscription", self._not_acknowledged(sub))
        else:
            sub._put(NotificationReceived(method=event.method, params=event.params))

    def _listen_ended(self, event: ResultReceived | ErrorReceived) -> None:
        sub = self._listens.pop(event.request_id)
        if isinstance(event, ErrorReceived):
            sub._end(f"the subscription failed: {event.error.message}", received_error(event))
        else:
            sub._end("the server ended the subscription", self._not_acknowledged(sub))

    @staticmethod
    def _not_acknowledged(sub: BlockingSubscription) -> RemoteProtocolError | None:
        if sub.subscription_id is not None:
            return None
        return RemoteProtocolError("the server ended subscriptions/listen before acknowledging it")

    @_one_thread  # (it may send nothing, but it changes what the loop reads)
    def _open_legacy(self, sub: BlockingSubscription, limit: float | None) -> Callable[[], None]:
        sub.honored = legacy_honored(
            self._conn.peer_capabilities,
            tools=sub.tools,
            prompts=sub.prompts,
            resource_list=sub.resource_list,
            resources=sub.resources,
        )
        uris = list(sub.honored.get("resourceSubscriptions", ()))
        subscribed: list[str] = []

        def close() -> None:
            if sub in self._subscriptions:
                self._subscriptions.remove(sub)
            for uri in subscribed:
                self._uri_refs[uri] -= 1
                if not self._uri_refs[uri]:
                    del self._uri_refs[uri]
                    # A courtesy: a server that does not answer only sends more updates.
                    with suppress(McpError, SessionClosed, TimeoutError, LocalProtocolError):
                        self.request(
                            "resources/unsubscribe", {"uri": uri}, timeout=_UNSUBSCRIBE_TIMEOUT
                        )

        self._subscriptions.append(sub)
        try:
            for uri in uris:
                if not self._uri_refs.get(uri):
                    self.request("resources/subscribe", {"uri": uri}, timeout=limit)
                self._uri_refs[uri] = self._uri_refs.get(uri, 0) + 1
                subscribed.append(uri)
        except BaseException:
            close()
            raise
        return close

    @_one_thread  # (the counts the subscribe() blocks share)
    def subscribe_resource(self, uri: str) -> None:
        """Legacy era: ``resources/subscribe``; each ``notifications/resources/updated``
        then goes to ``on_notification``, while a call waits (see
        :meth:`mcp_trio.Client.subscribe_resource`). Counted with the :meth:`subscribe`
        blocks that ask for ``uri``: the subscription lasts until
        :meth:`unsubscribe_resource` and the last block both let go of it (nothing is
        sent while it is held already, or when called again).

        Raises:
            LocalProtocolError: modern era (there is no such method), or the server
                did not declare ``resources.subscribe``.
            TypeError: ``uri`` is not a string. Nothing is sent.
        """
        uri = checked_str(uri, "the resource URI")
        self._legacy_only("resources/subscribe")
        if uri in self._uri_explicit:
            return
        if not self._uri_refs.get(uri):  # (else a subscribe() block holds it already)
            self.request("resources/subscribe", {"uri": uri})
        self._uri_explicit.add(uri)
        self._uri_refs[uri] = self._uri_refs.get(uri, 0) + 1

    @_one_thread  # (the counts the subscribe() blocks share)
    def unsubscribe_resource(self, uri: str) -> None:
        """Legacy era: ``resources/unsubscribe`` (see :meth:`subscribe_resource`); not
        sent while a :meth:`subscribe` block still needs ``uri`` (it is sent when the
        last one exits)."""
        uri = checked_str(uri, "the resource URI")
        self._legacy_only("resources/unsubscribe")
        if uri in self._uri_explicit:
            self._uri_explicit.discard(uri)
            self._uri_refs[uri] -= 1
            if not self._uri_refs[uri]:
                del self._uri_refs[uri]
        if not self._uri_refs.get(uri):
            self.request("resources/unsubscribe", {"uri": uri})

    @_one_thread  # (the roots a running call's answer reads)
    def set_roots(self, roots: Iterable[RootLike] | RootsFunction) -> None:
        """Change the roots (see :meth:`mcp_trio.Client.set_roots`); legacy era: tell
        the server (``notifications/roots/list_changed``) when ``roots.listChanged``
        was declared (as it is by default). Modern servers ask each time.

        Raises:
            LocalProtocolError: the client was opened without ``roots`` (the
                capability was not declared).
            TypeError, ValueError: a root that is not a ``file://`` URI (or a root).
        """
        if self._options.roots is None:
            raise LocalProtocolError("open the client with roots=... to declare the capability")
        self._options.roots = checked_roots(roots)
        capabilities = self._conn.config.capabilities
        if self.era is Era.LEGACY and has_capability(capabilities, ("roots", "listChanged")):
            self.notify("notifications/roots/list_changed")

    def _legacy_only(self, method: str) -> None:
        if self.era is not Era.LEGACY:
            raise LocalProtocolError(f"{method!r} does not exist in the modern era")

    def ping(self) -> None:
        """Legacy era: ``ping``. The blocking client has no keep-alive
        (``SessionConfig.ping_interval``): call this to check the server, as often as
        you see fit.

        Raises:
            LocalProtocolError: modern era (there is no ping).
        """
        if self.era is not Era.LEGACY:
            raise LocalProtocolError("'ping' does not exist in the modern era")
        self.request("ping")

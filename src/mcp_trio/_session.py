"""The session runtime: one :class:`mcp_sansio.Connection` driven over a message channel.

Theory of operation
-------------------
The core decides everything about the protocol; this module only moves bytes and runs
tasks. Per session:

* **One reader task** receives from the channel, feeds the core, flushes what the
  core wants to send, then acts on the events. A request gets a slot from the
  handler pool (``_pool.py``) *before* its handler task starts. While every running
  slot is busy, requests wait their turn in order, each holding a backlog slot, and
  the reader reads on (the answers those handlers may wait for come later); when the
  backlog (``max_unanswered_requests``) is full the reader waits, so it stops reading
  and the peer's writes block. That is the backpressure; the queue is bounded.
  A notification with a handler starts at once, with a running slot if one is free
  and otherwise with its backlog slot alone (in order, never behind the answers).
* **Messages taken in passing.** While the reader is parked on an empty channel, a
  message channel may hand a message straight to :meth:`Session._take_message`, in
  the task that brought it (the peer's writer in memory, an HTTP response's reader),
  which does the reader's work for it with no task switch. It refuses, and the
  message waits for the reader as usual, whenever taking it could reorder or
  re-enter: the session is already taking one or is inside a non-waiting write of
  its own (the write path would be re-entered), an earlier taken message is still
  being finished, or the session is closing. What cannot be done without waiting
  (a write that blocks, a full backlog, a notification or progress callback)
  is finished by a task of its own, and the reader waits for that task before it
  acts on its next message (or on the end of input), so the order of events is the
  order of messages. A taken message runs in the reader's contextvars context, so
  handlers never see the sender's; and a failure while taking it fails this session
  (as a crashed reader would), never the sender.
* **One write path**, one writer at a time (skipped, with no scheduler pass, when no
  write is in progress and the channel takes the message at once:
  ``Writer.write_nowait``). Whoever calls the core drains its output into an ordered
  outbox and then writes up to the last message it queued, after those queued before
  (aioquic's ``transmit()``), so messages leave in the order the core produced them;
  others wait for that writer, and it sends their messages along when that needs no
  waiting (what cancelled tasks leave with nobody waiting, a task of the I/O nursery
  writes: ``_start_leftover_writer``). Each single message write is shielded from
  the caller's cancellation (half a frame would corrupt a stream) and bounded by
  ``write_timeout``; a failed write calls ``conn.send_failed()`` and closes the session.
  A request's write that must wait is left to one task of the I/O nursery, the
  drainer (``_start_drainer``), so that its caller may leave mid-write.
  A message over the channel's ``send_bound()`` (a WebSocket's frame size, which would
  close the connection) is never written: only what it belongs to fails (``_fit``).
* **One timer task** sleeps in a cancel scope whose deadline is the core's
  ``next_deadline()``; every core call brings it forward if need be (a later
  deadline is left for it to find stale, once), and when it fires it calls
  ``handle_timer(now, withdraw=)`` and tells the callers at once: it never waits for
  a write (a timed-out request none of which was written is taken back, the other
  cancellations are left to the writer at work or a leftover task).
* **Each inbound request** runs in its own task, inside its own ``CancelScope``, in
  the handler nursery (ours, or one the caller passed). The peer's
  ``notifications/cancelled`` cancels that scope; the core drops any answer.
* **A caller's request** waits on a one-shot wake-up (``_waiters.Waiter``). If the
  caller is cancelled, the request is cancelled in the core and the
  ``notifications/cancelled`` goes out with a bounded, shielded write before the
  cancellation propagates; if none of the request was written yet (it waits behind a
  slow write), it is taken back from the outbox instead and nothing goes out
  (``Writer.withdraw``).

* **A session the server forgot** (Streamable HTTP ``404``; the channel's ``receive``
  raises ``SessionLost``) is started anew in place: the core sends a new
  ``initialize`` (``Connection.restart_session``), and the requests the server never
  processed are sent again once it is answered (``Connection.resend_request``). Until
  then new requests (``ping`` too) are held by the core with them, their timeouts
  running as usual, and notifications wait here (what was written before the signal
  was read waits in the channel: see ``_http_client``); when it is answered,
  :attr:`Session.handshake` has the new session's facts. If the server refuses the
  new session, the held requests fail and the session closes; so does it if the new
  session is not ready within ``handshake_timeout`` (or its ``initialize`` times out,
  ``request_timeout``). With neither bound a notification waits as long as the
  server takes, as :meth:`Session.start` would.

Closing has one entry, :meth:`Session._begin_close`: end of input, a failed write, a
local close or an internal failure. It closes the core, fails every waiter with one
:class:`~mcp_trio.SessionClosed` (with the reason), and stops the reader and timer.
After the peer's end of input on a channel whose output outlives its input
(``half_close``: stdio, where a client shuts the server down by closing its stdin),
running handlers get ``shutdown_grace_period`` to finish, and the channel still carries
their answers, their progress and their log messages until then; a server answers the
requests still running at the end -32603 "server shutting down" before cancelling them.
Any other end of input means the peer is gone (a WebSocket or in-memory peer closed, a
connection broke): nothing could carry the answers, so the handlers are cancelled at
once, as after any other close. Then the channel is closed.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
from collections import deque
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Final, cast, final

import attrs
import trio

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorData,
    ErrorReceived,
    Event,
    HandshakeCompleted,
    InputRequired,
    InvalidMessageReceived,
    LifecycleState,
    LocalProtocolError,
    NotificationReceived,
    ProgressReceived,
    RequestCancelled,
    RequestId,
    RequestReceived,
    RequestTimedOut,
    ResponseIgnored,
    ResultReceived,
    Role,
    SubscriptionNotificationReceived,
)
from mcp_sansio._conn_receive import _PER_REQUEST
from mcp_sansio._errors import SHUTTING_DOWN
from mcp_sansio._events import transport_errors
from mcp_sansio._json import dumps, loads
from mcp_sansio._jsonrpc import error_response

from ._channel import Decoded, LocalReply, MessageChannel, SessionLost
from ._config import SessionConfig, with_wall_clock
from ._errors import (
    HandshakeFailed,
    InputRequiredError,
    RequestTimeout,
    SessionClosed,
    request_error,
)
from ._errors_base import fresh, refuse_endless_input
from ._handlers import Handlers, NotificationContext, RequestContext
from ._keepalive import keep_alive
from ._pool import (
    HandlerPool,
    _Running,
    call_request_handler,
    checked_result,
    checked_scopes,
    drop_cancelled,
    handler_failed,
    send_answer,
    serve_notification,
)
from ._text import for_log
from ._util import PeerWarnings, is_internal_failure
from ._waiters import InputCallback, Outcome, ProgressCallback, Reissued, Waiter, Waiters
from ._writer import Writer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Collection, Mapping

    from mcp_sansio._http_auth import Principal

__all__ = ["Session", "SessionStatistics"]

logger = logging.getLogger("mcp_trio")

_START = frozenset({"initialize", "server/discover"})
# The server's requests our user answers (legacy): the core holds our requests' timers
# until the answer (Connection.next_deadline), and the timer must hear of it then. The
# core's own set, which it holds the timers for (_on_client_side_request).
_QUESTIONS: Final = _PER_REQUEST

#: The types of message a channel marks (see Session._receive_marked): a type in a set
#: is one test, as one type alone was, for the plain bytes (or str) of the common path.
_MARKED: Final = frozenset({Decoded, LocalReply})


async def _reraise(exc: BaseException) -> None:
    raise exc


@final
@attrs.frozen(kw_only=True)
class SessionStatistics:
    """A snapshot of a session's bookkeeping (trio's ``statistics()`` convention)."""

    role: Role
    """``"client"`` or ``"server"``."""
    era: Era | None
    """The era, once settled."""
    protocol_version: str | None
    """The protocol version, once settled."""
    waiting_requests: int
    """Our requests whose callers wait for an answer."""
    running_handlers: int
    """Handler tasks started and not finished (the peer's requests and notifications,
    including those only writing their answer and notifications running on a backlog
    slot alone): it may exceed ``max_concurrent_handlers``."""
    max_concurrent_handlers: int
    """The number of running slots: beyond it requests wait their turn
    (``waiting_handlers``) and notifications run on their backlog slot alone."""
    waiting_handlers: int = 0
    """The peer's requests read and waiting, in order, for a running slot (at most
    ``max_unanswered_requests`` with the running ones; then the reader stops)."""
    queued_messages: int
    """Messages produced by the core and not yet written."""
    withdrawn_messages: int = 0
    """Requests taken back before any of them was written (their caller gave up, or
    they timed out) whose emptied places in the outbox still wait behind the write in
    progress: they leave with it. Many of them point at a write that does not finish."""
    closed: bool
    """Whether the session is closed (or closing)."""


def _chars(message: bytes) -> int:
    """The size of ``message`` as a WebSocket's bound counts it: in characters."""
    return len(message.decode())


def _too_large_reply(answer: dict[str, Any], over: str, limit: int) -> dict[str, Any]:
    """The JSON-RPC error (-32603) that replaces ``answer``, too large for the transport
    (``over`` says by how much): its request fails alone. ``data`` is the core's for a
    message too large on arrival, so a caller tells it from the peer's own -32603."""
    what = "result" if "result" in answer else "error"
    error = ErrorData(
        code=ErrorCode.INTERNAL_ERROR,
        message=f"the {what} is too large for the transport: {over}",
        data={"maxMessageSize": limit},
    )
    return error_response(answer.get("id"), error)


@final
class Session:
    """One MCP conversation over a :class:`~mcp_trio.MessageChannel`.

    Build it with :func:`open_session` / :func:`connect_session` (or a transport's
    ``open_*`` / ``serve_*``); the constructor alone starts nothing.

    Args:
        channel: the transport.
        role: ``"client"`` or ``"server"``.
        handlers: the handler table for the peer's requests and notifications.
        config: runtime bounds and timeouts.
        connection_config: the core's configuration (who we are, versions, bounds).
        handler_nursery: where handler tasks run (default: the session's own).

    Error handling:
        Waiting methods raise :class:`~mcp_trio.SessionClosed` once the session is
        closed; ``LocalProtocolError`` from the core (a misuse) passes through.
    """

    def __init__(
        self,
        channel: MessageChannel,
        role: Role,
        *,
        handlers: Handlers | None = None,
        config: SessionConfig | None = None,
        connection_config: ConnectionConfig | None = None,
        handler_nursery: trio.Nursery | None = None,
        principal: Principal | None = None,
        resource_metadata: str | None = None,
        base_scopes: Collection[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config if config is not None else SessionConfig()
        self.principal = principal
        """Server role: who the transport authenticated the peer as, or ``None``."""
        self.resource_metadata = resource_metadata
        """Server role: the protected-resource metadata URL that ``insufficient_scope``
        errors name (``data.resource_metadata``), if the transport knows it."""
        self.base_scopes = frozenset(base_scopes)
        """Server role: the scopes the transport's authenticator requires of every
        request and checked already (:attr:`~mcp_trio.BearerAuth.required_scopes`):
        an ``insufficient_scope`` error for a request that needs more names these too
        (the scopes needed to satisfy the request, 2025-11-25
        basic/authorization.mdx)."""
        self.headers = headers
        """Server role: the header fields of the HTTP request that opened the transport
        (``serve_websocket``: the opening handshake's), which its requests' handlers
        read as ``ctx.headers``; ``None`` when there was none (stdio, in memory)."""
        self.handlers = handlers if handlers is not None else Handlers()
        if role == "server":
            connection_config = with_wall_clock(connection_config)
        subject = principal.subject if principal is not None else None
        self._conn = Connection(role, connection_config, principal=subject)
        if principal is not None:  # a modern subscriptions/listen is scope-checked too
            self._conn.refuse_listen = functools.partial(self._refuse_listen, principal)
        self._channel = channel
        self._handler_nursery = handler_nursery
        self._pool = HandlerPool(
            self.config.max_concurrent_handlers, self.config.max_unanswered_requests
        )
        # Requests read while every compute slot was busy, in order, each holding a
        # backlog slot (see _pool): started as compute slots come free.
        # The pool calls _start_reserved when a slot comes back only while some wait
        # (_reserve sets it, _start_reserved clears it once none is left): most
        # requests find a slot free, and free theirs twice (computed, finished).
        self._reserved: deque[RequestReceived] = deque()
        self._starting_reserved = False
        self._writer = Writer(
            channel,
            self.config.write_timeout,
            on_leftovers=self._start_leftover_writer,
            start_drainer=self._start_drainer,
            max_bytes=self.config.max_outbox_bytes,
        )
        # The channel's bound on one message (see _fit): the size alone, checked against
        # each message drained from the core, or None; and the whole, for messages.
        self._send_bound = channel.send_bound()
        self._send_limit = None if self._send_bound is None else self._send_bound[0]
        # our requests _fit did not send, by id: the error their caller raises
        self._too_large: dict[RequestId, ValueError] = {}
        self._notifications_dropped = 0  # (by _fit, over the bound: see log)
        self._peer_warnings = PeerWarnings()  # (invalid messages: bounded in the log)
        # requests of ours, handlers of theirs
        self._waiters = Waiters()
        self._queued: dict[RequestId, _Queued] = {}  # callers waiting for their write
        self._on_held: dict[RequestId, Callable[[RequestId, bool], object]] = {}
        # timers, tasks, lifecycle
        self._timer_scope: trio.CancelScope | None = None
        self._io_scope = trio.CancelScope()
        self._handshake: HandshakeCompleted | None = None
        self._handshake_failure: BaseException | None = None
        self._handshake_done = trio.Event()
        self._restarting: trio.Event | None = None  # set once a new session is started
        self._close_exc: SessionClosed | None = None
        self._forced = False
        self._grace_ends: float | None = None  # (see _grace)
        self._answering = False  # half-closed: the peer's requests in flight get answers
        self._draining = False  # a graceful stop began: new requests are refused (_drain)
        self._initialized: trio.Event | None = None  # someone waits in until_initialized
        self._closing = trio.Event()
        self._closed = trio.Event()
        self._channel_closed = False
        # messages taken in passing (see the module docs)
        self._io_nursery: trio.Nursery | None = None
        self._reader_context: contextvars.Context | None = None
        # _take run in the reader's context: set with it (_io), before any message is
        # taken; one bound call per message taken
        self._take_in_reader: Callable[[bytes], object] = self._take
        self._taking = False
        self._finishing: trio.Event | None = None  # a taken message is being finished
        # trio.current_time for the hot paths (a request, a message read): the run's
        # clock itself once the session runs (_run), without the two calls around it
        self._now: Callable[[], float] = trio.current_time
        # when the peer was last heard from (the keep-alive reads it: _keepalive.py)
        self._heard_at = 0.0
        # the keep-alive's ping while it is out (left out of statistics())
        self._ping_id: RequestId | None = None

    # ------------------------------------------------------------------ introspection

    @property
    def connection(self) -> Connection:
        """The core connection (read-only use: era, versions, tables)."""
        return self._conn

    @property
    def channel(self) -> MessageChannel:
        """The transport channel."""
        return self._channel

    @property
    def role(self) -> Role:
        """``"client"`` or ``"server"``."""
        return self._conn.role

    @property
    def handshake(self) -> HandshakeCompleted | None:
        """The completed handshake, once there is one (the latest: a session the server
        forgot is started anew, with a new handshake)."""
        return self._handshake

    @property
    def closed(self) -> bool:
        """Whether the session is closed or closing."""
        return self._close_exc is not None

    @property
    def close_reason(self) -> SessionClosed | None:
        """Why the session closed, once it has."""
        return self._close_exc

    def statistics(self) -> SessionStatistics:
        """A snapshot of the session's bookkeeping."""
        return SessionStatistics(
            role=self._conn.role,
            era=self._conn.era,
            protocol_version=self._conn.protocol_version,
            waiting_requests=len(self._waiters) - self._ping_waits(),
            running_handlers=self._pool.count,
            max_concurrent_handlers=self._pool.compute_limit,
            waiting_handlers=len(self._reserved),
            queued_messages=self._writer.backlog,
            withdrawn_messages=self._writer.withdrawn,
            closed=self.closed,
        )

    def _ping_waits(self) -> int:
        """1 while the keep-alive's ping waits among our requests (its waiter goes when
        it is answered or the session fails, before the keep-alive task hears of it)."""
        rid = self._ping_id
        return 0 if rid is None or self._waiters.get(rid) is None else 1

    # ------------------------------------------------------------------ public API

    async def start(self) -> HandshakeCompleted:
        """Client: run the handshake (``server/discover`` and/or ``initialize``).

        Returns:
            The completed handshake (era, version, server capabilities and info).

        Raises:
            HandshakeFailed: the server refused, or no common version exists.
            RequestTimeout: no answer within ``handshake_timeout`` (or the core's
                ``request_timeout``).
            SessionClosed: the session closed first.
            LocalProtocolError: not a client, or already started.
        """
        self._raise_if_closed()
        self._conn.start(now=trio.current_time())
        self._rearm_timer()
        await self._flush()
        timeout = self.config.handshake_timeout
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            await self._handshake_done.wait()
        if scope.cancelled_caught:
            raise RequestTimeout("handshake", None)
        if self._handshake is not None:
            return self._handshake
        if self._handshake_failure is not None:
            raise self._handshake_failure
        raise self._closed_error()

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        on_input_required: InputCallback | None = None,
        log_level: str | None = None,
        related_request_id: RequestId | None = None,
        on_sent: Callable[[RequestId], object] | None = None,
        on_held: Callable[[RequestId, bool], object] | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its result.

        Args:
            method: the method name.
            params: the params object.
            timeout: seconds without progress before the request is cancelled
                (default: the core's ``request_timeout``; the core's
                ``max_request_time`` caps the total).
            on_progress: called (by the session's reader) with each progress report; asks
                the peer for progress.
            on_input_required: modern era: called with an input-required result; its
                return value (the ``inputResponses``) is sent in a retry.
            log_level: modern client: the ``logLevel`` of this request's envelope.
            related_request_id: legacy server: the client request this one is made
                for (HTTP bindings send it on that request's stream).
            on_sent: called with the request's id as soon as the core has it (before
                anything is written or awaited), and with each retry's (modern
                input-required rounds) and re-issue's: the id its answer and
                notifications name. It must not raise.
            on_held: called with the request's id (as ``on_sent`` names it) and
                ``True`` when the transport starts holding it back to obtain
                credentials (the HTTP client's OAuth: a token refresh, an authorization
                that may wait for the user) or a free connection (the HTTP client's
                ``max_client_connections``), and with ``False`` when it stops; only
                while the request is waited for. It must not raise.

        Returns:
            The result object.

        Raises:
            McpError: the peer answered with an error.
            RequestTimeout: the request timed out (it was cancelled on the wire).
            InputRequiredError: the server asked for input and ``on_input_required``
                is ``None``.
            RemoteProtocolError: modern era: the answer could not be used (a
                ``resultType`` the core does not recognize or ``method`` may not return,
                a malformed input-required result, or one asking for input the client
                did not declare or more than ``max_input_requests`` questions: the
                core's ``ErrorReceived`` with ``local``, its code kept), or the server
                asked for input a
                ``max_input_rounds``-th time (``ConnectionConfig``; that round is not
                answered).
            SessionClosed: the session closed before the answer came (also a request
                held for a new session, the server having forgotten the old one, that
                could not be started).
            LocalProtocolError: the core refused the request (e.g. a capability the
                peer lacks).
            ValueError: the request is larger than the channel's ``send_bound()``
                (WebSocket: ``SessionConfig.ws_max_message_size``). Nothing was sent;
                the core forgot it.

        Cancellation: if the caller is cancelled, the request is cancelled on the wire
        (a bounded, shielded write of ``notifications/cancelled``) and any later
        answer is dropped; a request none of which was written yet (queued behind
        another write) is not sent at all, and no cancellation is.

        Re-issue (modern era): a request whose answer the transport lost after writing
        it (a Streamable HTTP response stream that broke: ``MessageChannel.attach_reissue``)
        is sent again by the core as a new request, with a new id and progress token
        and the same params (an input round's answers included), at most
        ``ConnectionConfig.max_reissues`` times (2026-07-28 changelog: "clients MUST
        re-issue it"); past that it fails, its message saying how many times it was
        re-issued. Its timeout and ``max_request_time`` keep counting across re-issues
        (the core keeps its deadline), and the time an input round waits for the user
        is not counted, as for any request.
        """
        if self._close_exc is not None:  # (_raise_if_closed, inline)
            raise self._closed_error()
        if self._conn.lifecycle is LifecycleState.ANSWERED and method != "ping":
            await self.until_initialized()  # (a server's request served early)
            self._raise_if_closed()
        # (A session started anew in place of a forgotten one: the core holds the
        # request until it is ready, and its timeout runs meanwhile.)
        rid = self._conn.send_request(
            method,
            params,
            now=self._now(),
            progress=on_progress is not None,
            timeout=timeout,
            log_level=log_level,
            related_request_id=related_request_id,
        )
        while True:
            if on_sent is not None:
                on_sent(rid)
            if on_held is not None:
                self._on_held[rid] = on_held
            # Wait for the answer (the caller's part of every call, inline): register,
            # bring the timer forward, write the request (queued behind a write in
            # progress: wait for that, see _write_queued), then wait for the outcome.
            waiter = self._waiters.add(rid, on_progress)
            self._rearm_timer()
            mark = 0
            try:
                mark = self._flush_nowait()
                if self._too_large:  # (over the channel's bound: not sent, see _fit)
                    refused = self._too_large.pop(rid, None)
                    if refused is not None:
                        raise refused
                if mark:
                    await self._write_queued(rid, mark)
                await waiter.wait()
            except BaseException:
                await self._gave_up(rid, waiter)
                raise
            finally:
                if mark:
                    self._queued.pop(rid, None)
                if on_held is not None:
                    del self._on_held[rid]
            outcome = waiter.outcome
            assert outcome is not None
            if isinstance(outcome, ResultReceived):
                return outcome.result
            if isinstance(outcome, Reissued):
                rid, outcome = await self._reissued(rid, outcome, on_sent, on_held)
                if isinstance(outcome, ResultReceived):
                    return outcome.result
            if not isinstance(outcome, InputRequired):
                raise request_error(method, rid, outcome)
            rid = await self._answer_input(rid, outcome, on_input_required)

    async def _reissued(
        self,
        rid: RequestId,
        moved: Reissued,
        on_sent: Callable[[RequestId], object] | None,
        on_held: Callable[[RequestId, bool], object] | None,
    ) -> tuple[
        RequestId, ResultReceived | ErrorReceived | RequestTimedOut | InputRequired | SessionClosed
    ]:
        """Wait for the request ``rid`` that :meth:`_reissue` sent again, under its new
        id (and again, should it be re-issued once more): the id and outcome that end
        it. The waiters of the old ids stay until then, for progress they reported
        before the break that is still being handed out."""
        gone = [rid]
        try:
            while True:
                rid = moved.request_id
                if on_sent is not None:
                    on_sent(rid)
                if on_held is not None:
                    self._on_held[rid] = on_held
                try:
                    outcome = await self._wait_reissued(rid, moved.waiter)
                finally:
                    if on_held is not None:
                        del self._on_held[rid]
                if not isinstance(outcome, Reissued):
                    return rid, outcome
                gone.append(rid)
                moved = outcome
        finally:
            for old in gone:
                self._waiters.forget(old)

    def _reissue(self, rid: RequestId) -> int | None:
        """The channel's ``reissue`` hook (``MessageChannel.attach_reissue``): the
        answer to our request ``rid`` was lost after it was written (a modern
        Streamable HTTP stream broke). The core makes it again under a new id, queued
        here and written by the caller's task (``Connection.reissue_request``: same
        params, new progress token, the deadline as it stands, at most
        ``max_reissues`` times) and its caller is woken to wait
        for that one (:class:`Reissued`: ``on_sent`` and ``on_held`` follow the new
        id, its caller's cancellation cancels it). ``None`` when re-issued; else how
        many times it was before, for the error the channel then fails it with (the
        bound, its deadline passed, or nobody waits for it any more)."""
        conn = self._conn
        waiter = self._waiters.get(rid)
        if waiter is None or waiter.outcome is not None:
            return conn.reissue_count(rid)
        try:
            new = conn.reissue_request(rid, now=trio.current_time())
        except LocalProtocolError:
            return conn.reissue_count(rid)
        # The new request is queued now, not written: the caller's task writes it
        # (_wait_reissued), as it wrote the first, and a caller who gives up before
        # then takes it back unsent (_withdraw), so the tool does not run again. The
        # old waiter stays registered for progress from before the break, which may
        # still be on its way to it: _reissued forgets it.
        messages = conn.data_to_send()
        if self._send_limit is not None:
            messages = self._fit(messages)
        self._note_queued(new, self._writer.queue(messages))
        waiter.settle(Reissued(new, self._waiters.add(new, waiter.on_progress)))
        self._rearm_timer()
        return None

    def _held(self, request_ids: tuple[RequestId, ...], held: bool) -> None:
        """The channel holds ``request_ids`` back for credentials, or no longer
        (``MessageChannel.attach_holds``): tell their ``on_held``."""
        for rid in request_ids:
            on_held = self._on_held.get(rid)
            if on_held is not None:
                on_held(rid, held)

    async def _answer_input(
        self, rid: RequestId, outcome: InputRequired, on_input_required: InputCallback | None
    ) -> RequestId:
        """Modern client: answer one input-required round and retry; the retry's id.

        The round bound is checked *before* anyone is asked, so a server that keeps
        asking never gets a question answered that would then be thrown away. On any
        failure the core forgets the request (``abandon_request``)."""
        try:
            if on_input_required is None:
                raise InputRequiredError(outcome)
            refuse_endless_input(outcome, self._conn.config.max_input_rounds)
            responses = await on_input_required(outcome)
            self._raise_if_closed()
            return self._conn.retry_with_input(rid, responses, now=trio.current_time())
        except BaseException:
            self._conn.abandon_request(rid)
            raise

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification.

        If the caller is cancelled while waiting for its turn to write, the
        notification stays queued and still goes out, in order (a task of the session
        writes it if no other write comes to). While a new
        session replaces one the server forgot, it waits for the new one (at most
        ``handshake_timeout``, see the module docs).

        Raises:
            SessionClosed: the session is closed.
            LocalProtocolError: the core refused it (not allowed now).
        """
        self._raise_if_closed()
        if self._restarting is not None:
            await self._until_restarted()
        self._conn.send_notification(method, params)
        await self._flush()

    async def log(
        self,
        level: str,
        data: Any,
        *,
        logger: str | None = None,
        request_id: RequestId | None = None,
    ) -> bool:
        """Server: send ``notifications/message`` if the client wants it.

        Returns:
            Whether it was sent (see ``Connection.send_log``); ``False`` once closed,
            or when it is over the channel's ``send_bound()`` (dropped, with a warning).
        """
        if self._close_exc is not None and not self._answering:
            return False
        sent = self._conn.send_log(level, data, logger=logger, request_id=request_id)
        if sent:
            # (every core call is flushed at once: what this drain dropped is this one)
            sent = not await self._flush()
        return sent

    async def until_initialized(self) -> None:
        """Legacy server: wait (at most ``config.handshake_timeout``) for the client's
        ``notifications/initialized``. A request served before it (lifecycle.mdx lets
        the server serve once it has answered ``initialize``) may not ask the client
        anything until then; :meth:`request` waits here by itself."""
        if self._conn.lifecycle is not LifecycleState.ANSWERED:
            return
        if self._initialized is None:
            self._initialized = trio.Event()
        event = self._initialized
        limit = self.config.handshake_timeout
        with trio.move_on_after(math.inf if limit is None else limit):
            await event.wait()

    async def _until_restarted(self) -> None:
        """Wait until the session that replaces a forgotten one is ready (or closed):
        bounded by the restart's own bounds (see the module docs)."""
        assert self._restarting is not None
        await self._restarting.wait()
        self._raise_if_closed()

    def _session_lost(self, lost: SessionLost) -> None:
        """The channel says the peer forgot the session: start a new one (the core sends
        ``initialize``), and send the requests the peer never processed again. While a
        new session starts the core holds them; otherwise it sends them at once, which
        the channel asks only once the new session can carry them (never before the
        restart signal was read)."""
        conn = self._conn
        if lost.restart:
            try:
                conn.restart_session(now=trio.current_time())
            except LocalProtocolError as exc:
                reason = f"the server forgot the session, and a new one cannot be started: {exc}"
                self._begin_close(SessionClosed(reason), graceful=True)
                return
            self._restarting = trio.Event()
            limit = self.config.handshake_timeout
            if limit is not None:
                assert self._io_nursery is not None
                self._io_nursery.start_soon(self._bound_restart, self._restarting, limit)
            logger.debug("the server forgot the session: starting a new one")
        for rid in lost.resend:
            # Not in flight any more (answered, cancelled, timed out meanwhile): nothing to do.
            with suppress(LocalProtocolError):
                conn.resend_request(rid)

    async def _bound_restart(self, restarting: trio.Event, limit: float) -> None:
        """Close the session if the new one is not ready within ``limit`` seconds
        (``handshake_timeout``, as for :meth:`start`)."""
        with trio.move_on_after(limit):
            await restarting.wait()
            return
        reason = f"the server forgot the session and did not start a new one in {limit:g} s"
        self._begin_close(SessionClosed(reason), graceful=True)

    def _restarted(self, event: HandshakeCompleted) -> None:
        """The session that replaces a forgotten one is ready."""
        assert self._restarting is not None
        self._restarting.set()
        self._restarting = None
        info = event.peer_info or {}
        logger.warning(
            "the server forgot the session; a new one was started (protocol version %s, "
            "server %s %s). What the server kept for the old session is lost: resource "
            "subscriptions, the logging level, anything else it held per session.",
            event.protocol_version,
            for_log(str(info.get("name", "?"))),
            for_log(str(info.get("version", "?"))),
        )

    def _note_initialized(self) -> None:
        """After a core call: wake :meth:`until_initialized` once the lifecycle has left
        ANSWERED. Checked on the core's state, not on the HandshakeCompleted event,
        which may sit behind requests waiting for handler slots that the waiters hold."""
        event = self._initialized
        if event is not None and self._conn.lifecycle is not LifecycleState.ANSWERED:
            self._initialized = None
            event.set()

    async def wait_closed(self) -> None:
        """Wait until the session is closed and its handlers have finished."""
        await self._closed.wait()

    async def aclose(self) -> None:
        """Close the session now: cancel running handlers, fail every waiter with
        :class:`~mcp_trio.SessionClosed`, close the channel. Idempotent.

        A client first tells the server that its requests still in flight are no longer
        wanted (``notifications/cancelled``, sent only if the channel takes it at once),
        so the server stops them rather than finishing work nobody will read: a stdio
        server then exits when its stdin closes instead of after its grace period,
        which outlasts the wait before SIGTERM. A modern server ends the subscriptions
        it serves with their result the same way."""
        self._close_locally()
        await self._closed.wait()

    def _close_locally(self, reason: SessionClosed | None = None) -> None:
        """:meth:`aclose` without the wait (also leaving ``open_session``): a client
        first tells the server that its requests still in flight are no longer wanted,
        and a modern server ends the ``subscriptions/listen`` streams it serves with
        their result (2026-07-28 subscriptions.mdx: SHOULD, on shutdown), if the channel
        takes it at once. ``reason``: the :attr:`close_reason` (default: a local close),
        for a transport that ends the session for a reason of its own."""
        if self._close_exc is None:
            conn = self._conn
            if self.role == "client":
                for rid in conn.pending_requests():
                    with suppress(LocalProtocolError):  # (initialize cannot be cancelled)
                        conn.cancel_request(rid, "the client is closing")
            else:
                self._end_listens()
            self._flush_nowait()
        if reason is None:
            reason = SessionClosed("the session was closed locally")
        self._begin_close(reason, graceful=False)

    def _end_listens(self) -> None:
        """A server stops serving: each ``subscriptions/listen`` still open ends with
        its result, as the 2026-07-28 specification asks of a server shutting down
        (subscriptions.mdx: SHOULD), not with the error the other requests get."""
        for sid in self._conn.subscriptions():
            self._conn.end_subscription(sid)

    async def _drain(self, error: tuple[int, str]) -> None:
        """A server's graceful stop, for a transport that has one (WebSocket): running
        handlers get ``shutdown_grace_period`` to answer, while the session goes on
        (their answers, the peer's notifications and its answers to their requests);
        then the peer's requests still in flight are answered ``error`` (within
        ``abandon_write_timeout``) and nothing more goes out. Close the session next
        (:meth:`_close_locally`): that cancels the handlers left. Returns at once if
        the session closes meanwhile.

        A request not started yet (waiting for a handler slot, or arriving during the
        stop) is answered -32603 "server shutting down" at once and never started, as
        Streamable HTTP answers new work ``503`` from the start of its stop: a busy
        peer cannot stretch the stop to the whole grace period, nor start work that
        would be cut off."""
        if self._close_exc is None:
            self._draining = True
            self._start_reserved()  # (refuses those waiting for a slot)
            await self._grace()
        if self._close_exc is None:
            self._end_listens()
            self._conn.receive_eof(
                now=trio.current_time(), fail_inflight=error
            )  # (late answers: dropped)
            with trio.move_on_after(self.config.abandon_write_timeout):
                await self._flush()

    async def _grace(self) -> None:
        """Give the running handlers ``shutdown_grace_period`` to finish (or until they
        are cancelled): one period per session, from the first stop that waits, however
        many do (a drain, then the end of input the peer sends meanwhile), so that a
        stop takes one period, not one each."""
        if self._grace_ends is None:
            self._grace_ends = trio.current_time() + self.config.shutdown_grace_period
        with trio.move_on_at(self._grace_ends):
            await self._pool.wait_idle(or_cancelled=True)

    # ------------------------------------------------------------------ waiting

    async def _wait_reissued(self, rid: RequestId, waiter: Waiter) -> Outcome:
        """Wait for our request ``rid`` that :meth:`_reissue` sent again: it
        was queued there, unwritten (so that a caller who gives up in the meantime
        takes it back unsent), and its caller's task writes it here."""
        try:
            queued = self._queued.get(rid)
            if queued is not None:
                with queued.scope:
                    await self._write_through(queued.mark, detach=True)
            await waiter.wait()
        except BaseException:
            await self._gave_up(rid, waiter)
            raise
        finally:
            self._queued.pop(rid, None)
        assert waiter.outcome is not None
        return waiter.outcome

    async def _gave_up(self, rid: RequestId, waiter: Waiter) -> None:
        """The caller of our request ``rid`` stopped waiting for its ``waiter``."""
        if waiter.outcome is None:
            await self._abandon(rid)
        elif isinstance(waiter.outcome, Reissued):
            await self._abandon_reissued(rid, waiter.outcome)

    async def _write_queued(self, rid: RequestId, mark: int) -> None:
        """Write our request ``rid``, queued up to ``mark`` and not out at once; stop
        waiting if the core times it out meanwhile (see :meth:`_timer_loop`).

        The request is the last message queued up to ``mark``, a single request:
        ``send_request`` and ``retry_with_input`` emit it as the core's last message,
        and nothing runs between them and this drain that could emit another; unless
        the core held it for a session that replaces a forgotten one (nothing went
        out for it then). That is known here, so nothing needs parsing later."""
        queued = self._note_queued(rid, mark)
        with queued.scope:
            # (detached: if the caller gives up while its own request is being written,
            # a task of the session's finishes that write and the caller returns now)
            await self._write_through(mark, detach=True)

    def _note_queued(self, rid: RequestId, mark: int) -> _Queued:
        """Record that our request ``rid`` is the last message queued up to ``mark``
        (what :meth:`_withdraw` checks), unless the core holds it for a session that
        replaces a forgotten one: then nothing went out for it, and ``mark`` is not its."""
        queued = _Queued(mark if self._restarting is None else 0)
        self._queued[rid] = queued
        return queued

    async def _abandon_reissued(self, rid: RequestId, moved: Reissued) -> None:
        """The caller gave up on the request ``rid`` just re-issued (its task not yet
        waiting for the new id): cancel the newest attempt, unless it is answered."""
        self._waiters.forget(rid)
        while isinstance(moved.waiter.outcome, Reissued):
            self._waiters.forget(moved.request_id)
            self._queued.pop(moved.request_id, None)
            moved = moved.waiter.outcome
        if moved.waiter.outcome is None:
            await self._abandon(moved.request_id)
        else:
            self._waiters.forget(moved.request_id)
        self._queued.pop(moved.request_id, None)  # (queued by _reissue; nobody writes it)

    async def _abandon(self, rid: RequestId) -> None:
        """The caller gave up: take the request back if none of it was written
        (:meth:`_withdraw`), else cancel on the wire with a bounded, shielded write."""
        self._waiters.forget(rid)
        if self._withdraw(rid):
            return
        try:
            self._conn.cancel_request(rid, "cancelled by the caller")
        except LocalProtocolError:
            return  # already finished (closed, timed out) or initialize
        self._rearm_timer()
        queued = self._queued.get(rid)
        if queued is not None and queued.mark and not self._writer.out(queued.mark):
            # Its own write goes on without its caller (detached): the cancellation
            # can only follow it, so it is left to the writer, as the timer's are.
            if self._flush_nowait():
                self._writer.write_later()
            return
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.config.abandon_write_timeout
            await self._flush()

    def _withdraw(self, rid: RequestId) -> bool:
        """Take back our request ``rid`` if none of it was written (its caller gave
        up). The core forgets it without a ``notifications/cancelled``, since the peer
        never saw the id (cancellation.mdx: a cancellation references a request
        previously issued); its place and progress token are free. Whether it was
        taken back."""
        if not self._unsent(rid):
            return False
        try:
            self._conn.forget_request(rid)
        except LocalProtocolError:
            return False  # finished meanwhile (closed): nothing to take back for
        self._writer.withdraw(self._queued[rid].mark)
        return True

    def _unsent(self, rid: RequestId) -> bool:
        """Whether our request ``rid`` is queued and none of it written (see
        :meth:`_write_queued`): queued behind another write, not being written."""
        queued = self._queued.get(rid)
        if queued is None or not queued.mark:
            return False
        return self._writer.unsent(queued.mark) is not None

    def _take_back_unsent(self, rid: RequestId) -> bool:
        """Take our request ``rid``, which the core no longer has, out of the outbox if
        none of it was written; whether it was (the core's ``handle_timer(withdraw=)``:
        then it sends no ``notifications/cancelled`` for it). (No timer to re-arm: a
        request gone never brings a deadline forward.)"""
        if not self._unsent(rid):
            return False
        self._writer.withdraw(self._queued[rid].mark)
        return True

    def _raise_if_closed(self) -> None:
        if self._close_exc is not None:
            raise self._closed_error()

    def _closed_error(self) -> SessionClosed:
        assert self._close_exc is not None
        return fresh(self._close_exc)

    # ------------------------------------------------------------------ writing

    async def _flush(self) -> int:
        """Write what the core has queued since the last drain, after everything queued
        before it (see ``_writer``). A call that queued nothing does not wait: the
        reader must not block behind other tasks' writes, or a full pipe each way
        would stop both readers.

        Used by the public sending methods (``notify``, ``log``, progress), which stay
        schedule points as Trio's rules want even when the write needed no waiting;
        the hot paths use :meth:`_flush_nowait` and wait on something else anyway.

        Returns:
            How many notifications of what it drained :meth:`_fit` dropped (counted
            before it waits: another task's drop meanwhile is not this call's).
        """
        messages = self._conn.data_to_send()
        dropped = 0
        if self._send_limit is not None:  # (a WebSocket's: see _fit)
            before = self._notifications_dropped
            messages = self._fit(messages)
            dropped = self._notifications_dropped - before
        if not messages:
            return dropped
        writer = self._writer
        mark = writer.queue(messages)
        if writer.write_nowait(mark):
            # Sent: yield, but do not raise Cancelled for a message that went out.
            await trio.lowlevel.cancel_shielded_checkpoint()
        else:
            await self._write_through(mark)
        return dropped

    def _flush_nowait(self) -> int:
        """The part of :meth:`_flush` that needs no waiting, for the hot paths (no
        coroutine, no scheduler tick): drain the core and write what goes at once.

        Returns:
            0 when everything is out, else the mark to ``_write_through`` next
            (before anything else that could yield).
        """
        messages = self._conn.data_to_send()
        if self._send_limit is not None:
            messages = self._fit(messages)
        if not messages:
            return 0
        return self._writer.send_nowait(messages)

    def _fit(self, messages: list[bytes]) -> list[bytes]:
        """``messages``, each within the channel's ``send_bound()``: a larger one would
        end the connection (a WebSocket closes with 1009), and every call with it,
        where only what it belongs to should fail (as a message too large for the
        core's ``max_message_size`` fails on arrival). One length test per message;
        the rare one over the bound is looked at in full (:meth:`_too_large_instead`)."""
        limit = self._send_limit
        assert limit is not None
        for message in messages:
            if len(message) > limit:
                break
        else:
            return messages
        kept: list[bytes] = []
        for message in messages:
            # (the bound counts characters, as trio-websocket does, and UTF-8 has as
            # many bytes or more)
            if len(message) > limit and (size := _chars(message)) > limit:
                kept += self._too_large_instead(message, size)
            else:
                kept.append(message)
        return kept

    def _too_large_instead(self, message: bytes, size: int) -> list[bytes]:
        """What goes out instead of ``message``, ``size`` characters, over the
        channel's bound: for an answer, a JSON-RPC error (-32603) under its id, with
        the core's ``data`` for a message too large (``{"maxMessageSize": ...}``), so
        the peer's request fails alone; for a batch's answers, :meth:`_split_answers`;
        nothing for a request of our caller's (the core forgets it; ``request`` raises
        ``ValueError``) or for a notification (dropped, with a warning). A request
        nobody waits for here (the core's own ``initialize``, say) goes out as it is:
        the peer ends the connection, there is nothing to fail instead."""
        limit, setting = self._send_bound or (0, "")
        obj = loads(message)
        if type(obj) is list:  # a batch's answers (2025-03-26)
            return self._split_answers(obj, limit, setting)
        over = f"{size} characters, over {setting} ({limit})"
        method = obj.get("method")
        if method is None:
            return self._error_within(obj, over, limit)
        if "id" not in obj:
            logger.warning("a %s notification was not sent: it is %s", method, over)
            self._notifications_dropped += 1
            return []
        rid = obj["id"]
        if self._waiters.get(rid) is None:
            return [message]
        with suppress(LocalProtocolError):  # (the peer never saw it: no cancellation)
            self._conn.forget_request(rid)
        self._too_large[rid] = ValueError(
            f"the {method} request is too large to send: {over}; nothing was sent"
        )
        return []

    @staticmethod
    def _error_within(
        answer: dict[str, Any], over: str, limit: int, room: int | None = None
    ) -> list[bytes]:
        """The -32603 error that replaces ``answer``, if it fits ``room`` characters
        (default: the bound ``limit``; in a batch's array, two less); else nothing, with
        a warning (its id alone is that long: the peer's request cannot be answered over
        this channel, and a frame over the bound would end every other)."""
        error = dumps(_too_large_reply(answer, over, limit))
        if _chars(error) > (limit if room is None else room):
            logger.warning("an answer was not sent: it is %s, and so is its error", over)
            return []
        return [error]

    @staticmethod
    def _split_answers(answers: list[Any], limit: int, setting: str) -> list[bytes]:
        """A batch's answers (2025-03-26) too large together for the bound, in as many
        arrays as it takes, each within it: JSON-RPC asks for one array, but several
        are better than a frame that ends the connection. An answer too large alone is
        replaced by its error, if that fits (:meth:`_error_within`)."""
        arrays: list[bytes] = []
        group: list[bytes] = []
        used = 2  # the brackets, and a comma between two answers
        for answer in answers:
            encoded = dumps(answer)
            size = _chars(encoded)
            if size + 2 > limit:  # (too large alone, in an array of its own)
                over = f"{size} characters, over {setting} ({limit})"
                replaced = Session._error_within(answer, over, limit, limit - 2)
                if not replaced:
                    continue
                encoded = replaced[0]
                size = _chars(encoded)
            if group and used + 1 + size > limit:
                arrays.append(b"[" + b",".join(group) + b"]")
                group, used = [], 2
            used += size + (1 if group else 0)
            group.append(encoded)
        if group:
            arrays.append(b"[" + b",".join(group) + b"]")
        return arrays

    async def _write_through(self, mark: int, *, detach: bool = False) -> None:
        failure = await self._writer.write_through(mark, detach=detach)
        if failure is not None:
            self._write_failed(failure)

    def _start_drainer(self) -> bool:
        """The writer's ``start_drainer``: at the first request write that must wait,
        the task that writes such writes from then on, so that their callers may leave
        mid-write (``_writer``: "Detached writes"), in the I/O nursery, for the rest of
        the session; in the reader's context, not the first caller's. Not once the
        session is closing (as for leftovers)."""
        nursery, context = self._io_nursery, self._reader_context
        if nursery is None or context is None or self._close_exc is not None:
            return False
        try:  # (start_soon copies the context it is called in)
            context.run(lambda: nursery.start_soon(self._drain_outbox, name="mcp drainer"))
        except RuntimeError:  # the nursery has closed
            return False
        return True

    async def _drain_outbox(self) -> None:
        failure = await self._writer.drain()
        if failure is not None:
            self._write_failed(failure)

    def _start_leftover_writer(self) -> bool:
        """The writer's ``on_leftovers``: messages whose tasks were cancelled (a
        request, its ``notifications/cancelled``) are written by a task of the I/O
        nursery. Not once the session is closing: its last writes are its own."""
        nursery = self._io_nursery
        if nursery is None or self._close_exc is not None:
            return False
        try:
            nursery.start_soon(self._write_leftovers, name="mcp leftover writer")
        except RuntimeError:  # the nursery has closed
            return False
        return True

    async def _write_leftovers(self) -> None:
        failure = await self._writer.write_leftovers()
        if failure is not None:
            self._write_failed(failure)

    def _write_failed(self, reason: SessionClosed) -> None:
        self._conn.send_failed()
        self._begin_close(reason, graceful=False)

    # ------------------------------------------------------------------ reading

    def _refuse_listen(
        self, principal: Principal, rid: RequestId, params: dict[str, Any] | None
    ) -> ErrorData | None:
        """The core's ``refuse_listen``: the scopes of the resources a
        ``subscriptions/listen`` names (``Handlers.required_scopes``), as for a
        request a handler serves."""
        hook = self.handlers.required_scopes
        if hook is None:
            return None
        found = checked_scopes(
            hook,
            principal,
            "subscriptions/listen",
            params,
            rid,
            self.resource_metadata,
            self.base_scopes,
        )
        return found if isinstance(found, ErrorData) else None

    async def _read_loop(self) -> None:
        conn = self._conn
        ndjson = self._channel.framing == "ndjson"
        # The HTTP channel's messages as its response reader parsed them (a Decoded: see
        # _receive_marked); its public receive gives plain bytes.
        receive: Callable[[], Awaitable[bytes | str]] = getattr(
            self._channel, "_receive_decoded", self._channel.receive
        )
        while True:
            ended: SessionClosed | None = None
            lost: SessionLost | None = None
            half = False
            try:
                data = await receive()
            except SessionLost as exc:
                lost = exc
            except trio.EndOfChannel:
                ended = SessionClosed("the peer closed the connection")
                half = self._channel.half_close
            except SessionClosed as exc:
                ended = exc
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                ended = SessionClosed(f"the connection broke: {exc!r}")
            if self._finishing is not None:
                await self._finishing.wait()  # a message taken before this one (or the end)
            if self._close_exc is not None:
                # Closing (locally, say) after this wakeup brought data but before the
                # reader ran: the core's input is over (_begin_close), and a closed core
                # drops late messages (a byte stream's chunk must not even be fed).
                return
            if lost is not None:
                self._session_lost(lost)
                await self._process([])
                continue
            if ended is not None:
                if ndjson:  # an unterminated last line is a message too
                    events = conn.receive_bytes_eof(now=trio.current_time())
                    if half:
                        await self._process(events)
                    else:  # the peer's output is over: no reply of ours is waited for
                        self._note_initialized()
                        self._flush_nowait()
                        await self._act(events)
                # Only a half-close can still carry the handlers' answers: any other end
                # of input means the peer is gone, and its requests are cancelled at once
                # (as Streamable HTTP treats a client disconnect, 2026-07-28
                # basic/patterns/cancellation.mdx), not left running for nobody.
                self._begin_close(ended, graceful=half, keep_answering=half)
                return
            now = self._now()
            if type(data) in _MARKED:
                events = self._receive_marked(data, now)
            else:
                self._heard_at = now
                if ndjson:
                    assert isinstance(data, bytes)
                    events = conn.receive_bytes(data, now=now)
                else:
                    events = conn.receive_message(data, now=now)
            await self._process(events)

    def _take_message(self, data: bytes) -> bool:
        """The channel's ``take`` (see the module docs): do the reader's work for one
        message now, in the caller's task; ``False`` refuses it.

        It runs in the reader's context (contextvars), so the handlers it starts see
        the session's context, not the sender's. It never raises into the sender: the
        message is consumed, and a failure here is this session's internal failure,
        reported as a crashed reader's would be."""
        if (
            self._taking
            or self._writer.writing
            or self._finishing is not None
            or self._close_exc is not None
        ):
            return False
        self._taking = True
        try:
            self._take_in_reader(data)
        except BaseException as exc:
            self._fail_internally(exc)
        finally:
            self._taking = False
        return True

    def _receive_marked(self, data: bytes | str, now: float) -> list[Event]:
        """The core's events for a message a channel marked by its type (one test for
        both on the common path, :data:`_MARKED`): the peer's, parsed already
        (:class:`Decoded`: not parsed again), or the channel's own error
        (:class:`LocalReply`: no ``_heard_at`` unless it says the peer answered; its
        ``ErrorReceived`` marked ``transport``)."""
        if type(data) is Decoded:
            self._heard_at = now
            return self._conn.receive_message(data, now=now, decoded=data.decoded)
        assert type(data) is LocalReply
        if data.heard:
            self._heard_at = now
        events = self._conn.receive_message(bytes(data), now=now)  # (the parser: exact bytes)
        # (An error the channel made fails its request with TransportFailed, not as the
        # peer's McpError.)
        return transport_errors(events)

    def _take(self, data: bytes) -> None:
        conn = self._conn
        now = self._now()
        if type(data) in _MARKED:
            events = self._receive_marked(data, now)
        else:
            self._heard_at = now
            events = conn.receive_message(data, now=now)
        if self._initialized is not None:  # (_note_initialized, inline: once it is)
            self._note_initialized()
        scope = self._timer_scope  # (_rearm_timer, inline: once per message)
        if scope is not None:
            deadline = conn.next_deadline()
            if deadline is not None and deadline < scope.deadline:
                scope.deadline = deadline
        messages = conn.data_to_send()  # (_flush_nowait, inline: the same)
        if self._send_limit is not None:
            messages = self._fit(messages)
        mark = self._writer.send_nowait(messages) if messages else 0
        done = 0 if mark else self._act_nowait(events, 0)
        if mark or done < len(events):
            # The rest needs waiting: finish it in a task the reader waits for.
            assert self._io_nursery is not None
            self._finishing = trio.Event()
            self._io_nursery.start_soon(self._finish_taken, mark, events[done:])

    def _fail_internally(self, exc: BaseException) -> None:
        """A failure outside the reader's task: raise it in a task of the session's
        I/O nursery, so the session fails the way a crashed reader makes it fail."""
        nursery = self._io_nursery
        try:
            assert nursery is not None
            nursery.start_soon(_reraise, exc)
        except (AssertionError, RuntimeError):  # no nursery to report in: close
            failure = SessionClosed("internal error in the session runtime (see __cause__)")
            failure.__cause__ = exc
            self._begin_close(failure, graceful=False)

    async def _finish_taken(self, mark: int, events: list[Event]) -> None:
        try:
            if mark:
                await self._write_through(mark)
            await self._act(events)
        finally:
            finishing, self._finishing = self._finishing, None
            assert finishing is not None
            finishing.set()

    async def _timer_loop(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self._timer_scope = scope
                self._rearm_timer()
                await trio.sleep_forever()
            self._timer_scope = None
            # The callers are told before anything is written, and the timer waits for
            # no write: a request timed out while queued behind a stuck write is taken
            # back (nothing goes out for it); the cancellations of the others are left
            # to the writer at work or a leftover task. Else every timeout in the session
            # would wait for that write (up to write_timeout; unbounded in memory).
            events = self._conn.handle_timer(trio.current_time(), withdraw=self._take_back_unsent)
            for event in events:
                if isinstance(event, RequestTimedOut):
                    queued = self._queued.get(event.request_id)
                    if queued is not None:
                        queued.scope.cancel()  # its caller waits for its write no more
            self._note_initialized()
            self._rearm_timer()
            if self._flush_nowait():
                self._writer.write_later()
            await self._act(events)

    def _rearm_timer(self) -> None:
        """After a core call: bring the timer forward to the core's next deadline.

        Only ever forward. A deadline that moved later (its request was answered) is
        left in place: the timer wakes then, finds nothing due, and its next round arms
        the core's deadline exactly. Every request sets a deadline and its answer
        clears it, and trio re-registers a scope's deadline on each change, so that is
        two re-registrations saved per request, for one early wake per stale deadline.
        The timer never fires later than the core's deadline."""
        scope = self._timer_scope
        if scope is not None:
            deadline = self._conn.next_deadline()
            if deadline is not None and deadline < scope.deadline:
                scope.deadline = deadline

    async def _process(self, events: list[Event]) -> None:
        """After a core call: re-arm the timer, flush, then act on the events.

        The two events of every call (a request to serve, an answer to hand over)
        are handled inline, awaiting only when no handler slot is free."""
        self._note_initialized()
        self._rearm_timer()
        mark = self._flush_nowait()
        if mark:
            await self._write_through(mark)
        await self._act(events)

    def _act_nowait(self, events: list[Event], start: int) -> int:
        """Act on ``events`` from ``start`` on while none needs waiting.

        Returns:
            The index of the first event that needs waiting (a request when the
            backlog is full, a notification, progress), or ``len(events)``.
        """
        count = len(events)
        for index in range(start, count):
            event = events[index]
            if isinstance(event, RequestReceived):
                if self._draining:
                    self._refuse_draining(event.request_id)
                elif not self._reserved and self._pool.acquire_nowait():
                    self._start_request_handler(event)
                elif self._pool.reserve_nowait():
                    self._reserve(event)  # the reader goes on (see _pool)
                else:
                    return index  # the backlog is full
            elif isinstance(event, ResultReceived):
                self._waiters.resolve(event.request_id, event)
            elif not self._dispatch_nowait(event):
                return index
        return count

    async def _act(self, events: list[Event]) -> None:
        """Act on ``events`` in order, waiting where one needs it."""
        index = 0
        while (index := self._act_nowait(events, index)) < len(events):
            event = events[index]
            if isinstance(event, RequestReceived):
                await self._pool.reserve()
                self._reserve(event)
                self._start_reserved()
            else:
                await self._dispatch(event)
            index += 1

    async def _dispatch(self, event: Event) -> None:
        """Act on an event :meth:`_dispatch_nowait` leaves: one that may wait."""
        if isinstance(event, NotificationReceived | SubscriptionNotificationReceived):
            await self._start_notification_handler(event)
        elif isinstance(event, ProgressReceived):
            waiter = self._waiters.get(event.request_id)
            if waiter is not None and waiter.on_progress is not None:
                try:
                    await waiter.on_progress(event)
                except Exception:
                    logger.exception("progress callback for request %r failed", event.request_id)

    def _dispatch_nowait(self, event: Event) -> bool:
        """Act on an event that needs no waiting; ``False`` for those that may wait
        (notifications, progress): :meth:`_dispatch` them."""
        if isinstance(event, ResultReceived | InputRequired):
            self._waiters.resolve(event.request_id, event)
        elif isinstance(event, ErrorReceived | RequestTimedOut):
            if self._restarting is not None and isinstance(event, ErrorReceived) and event.held:
                # A request held for the new session, which could not be started (the
                # core's error, not the server's): it ends with the session, whose close
                # follows in this batch (the start's failure), as when none comes in time.
                return True
            if not self._waiters.resolve(event.request_id, event) and event.method in _START:
                if self._restarting is not None:
                    why = event.error.message if isinstance(event, ErrorReceived) else "timeout"
                    reason = f"the server forgot the session and did not start a new one: {why}"
                    self._begin_close(SessionClosed(reason), graceful=True)
                    return True
                self._handshake_failure = (
                    HandshakeFailed(event.error)
                    if isinstance(event, ErrorReceived)
                    else RequestTimeout(event.method, event.request_id)
                )
                self._handshake_done.set()
        elif isinstance(event, RequestCancelled):
            self._cancel_request(event.request_id)
        elif isinstance(event, HandshakeCompleted):
            self._handshake = event
            self._handshake_done.set()
            if self._restarting is not None:
                self._restarted(event)
        elif isinstance(event, ResponseIgnored):
            logger.debug("response ignored (%s): %r", event.reason, event.request_id)
        elif isinstance(event, InvalidMessageReceived):
            self._peer_warnings.invalid(
                "invalid message from the peer", event, server=self._conn.role == "server"
            )
        elif isinstance(
            event, NotificationReceived | SubscriptionNotificationReceived | ProgressReceived
        ):
            return False
        # ConnectionClosed only comes from receive_eof()/send_failed(), in _begin_close.
        return True

    # ------------------------------------------------------------------ handlers

    def _reserve(self, event: RequestReceived) -> None:
        """Queue a request that holds a backlog slot, to start when a compute slot is
        free: from now on the pool says when one comes back."""
        self._reserved.append(event)
        self._pool.on_freed = self._start_reserved

    def _start_reserved(self) -> None:
        """Start reserved requests, in order, while compute slots are free (the pool
        calls this whenever a slot comes back, while any is reserved)."""
        reserved, pool = self._reserved, self._pool
        if not reserved:
            pool.on_freed = None  # (none waits: slots may come back unheard)
            return
        if self._starting_reserved:
            return  # (re-entered from a slot given back below: the loop goes on)
        self._starting_reserved = True
        try:
            if self._close_exc is not None and not self._answering:
                while reserved:  # abandoned by the close: they will never start
                    reserved.popleft()
                    pool.release_reserved()
                return
            if self._draining:
                while reserved:  # a graceful stop: refused, never started
                    rid = reserved.popleft().request_id
                    pool.release_reserved()
                    self._refuse_draining(rid)
                return
            context = self._reader_context
            while reserved and pool.compute_nowait():
                # Often called from another handler's task (its slot came back): the
                # new handler must see the reader's context, never that handler's.
                if context is None:
                    self._start_request_handler(reserved.popleft())
                else:
                    context.copy().run(self._start_request_handler, reserved.popleft())
        finally:
            self._starting_reserved = False

    def _refuse_draining(self, rid: RequestId) -> None:
        """During a graceful stop (:meth:`_drain`): answer the peer's request ``rid``
        -32603 "server shutting down" instead of starting its handler. The answer is
        written without waiting (what the channel does not take at once, a leftover
        task writes), so the reader goes on."""
        with suppress(LocalProtocolError):  # (cancelled by the peer in the same read)
            self._conn.send_error(rid, *SHUTTING_DOWN)
        if self._flush_nowait():
            self._writer.write_later()

    def _cancel_request(self, rid: RequestId) -> None:
        """The peer cancelled its request ``rid``: stop its handler (or drop it from
        the requests waiting for a slot) and free its place against
        ``max_inflight_requests`` now, so a request sent right after is not refused."""
        if not self._pool.cancel_request(rid):
            for index, waiting in enumerate(self._reserved):
                if waiting.request_id == rid:
                    del self._reserved[index]  # (it will never start)
                    self._pool.release_reserved()
                    break
            else:
                return  # (not read yet: _start_request_handler frees it)
        drop_cancelled(self._conn, rid)

    def _start_request_handler(self, event: RequestReceived) -> None:
        """Spawn the handler of ``event``, with the pool's slots already taken."""
        if self._conn.request_era(event.request_id) is None:
            drop_cancelled(self._conn, event.request_id)  # by the peer, in the same read
            self._pool.release_unused()
            return
        running = self._pool.begin(event.request_id)
        assert self._handler_nursery is not None
        try:
            self._handler_nursery.start_soon(
                self._serve_request,
                event,
                running,
                name=f"mcp {event.method} #{event.request_id!r}",
            )
        except BaseException:
            self._pool.finish(running)  # (a caller's nursery that has closed)
            raise

    async def _serve_request(self, event: RequestReceived, running: _Running) -> None:
        try:
            with running.scope:
                handlers, method = self.handlers, event.method
                handler = handlers.request_handler(method)
                ctx = RequestContext(self, event, running)
                scopes = None if self.principal is None else handlers.required_scopes
                if handler is None or scopes is not None:
                    meta = self.resource_metadata
                    outcome = await call_request_handler(
                        handler, ctx, scopes, meta, self.base_scopes
                    )
                else:  # (call_request_handler, inline: nothing to refuse, no scope to check)
                    try:
                        result = await handler(ctx)
                    except BaseException as exc:
                        outcome = handler_failed(exc, method, event.request_id)
                    else:
                        outcome = result if type(result) is dict else checked_result(result, method)
                if self._writer.full:
                    # The peer reads too slowly (max_outbox_bytes): wait for room with
                    # the running slot held, so the reader soon stops taking requests.
                    await self._writer.wait_room()
                if not running.cancelled and (self._close_exc is None or self._answering):
                    send_answer(self._conn, method, event.request_id, outcome)
                    if method in _QUESTIONS:
                        # Legacy client: our timers stood still while the user answered;
                        # the core now says "now" to count the pause (next_deadline).
                        self._rearm_timer()
                mark = self._flush_nowait()
                if mark:
                    # The answer waits to be written: its compute slot comes back now,
                    # so the reader may take the next request meanwhile. (Written at
                    # once, it comes back with the rest in finish, below: nothing can
                    # take a request in between, the peer's messages are refused
                    # while we write.)
                    self._pool.computed(running)
                    await self._write_through(mark)
        finally:
            if running.cancelled:
                drop_cancelled(self._conn, event.request_id)
            self._pool.finish(running)

    async def _start_notification_handler(
        self, event: NotificationReceived | SubscriptionNotificationReceived
    ) -> None:
        handler = self.handlers.notification_handler(event.method)
        if handler is None:
            logger.debug("no handler for notification %r", event.method)
            return
        sub = event.subscription_id if isinstance(event, SubscriptionNotificationReceived) else None
        ctx = NotificationContext(
            session=self,
            method=event.method,
            params=event.params,
            subscription_id=sub,
            principal=self.principal,
        )
        # A backlog slot, and a running slot if one is free: a notification that comes
        # while every running slot waits for the peer's answers (which follow it in the
        # stream) runs without one, so the reader goes on. The backlog bounds them.
        await self._pool.reserve()
        running = self._pool.begin(None, computing=self._pool.compute_nowait())
        assert self._handler_nursery is not None
        self._handler_nursery.start_soon(
            serve_notification, handler, ctx, running, self._pool.finish
        )
        # Let it start before the next one is spawned: Trio runs the tasks woken in one
        # scheduler batch in either order, and the peer's notifications (log lines,
        # list changes) should reach their handlers in the order they were sent.
        await trio.lowlevel.checkpoint()

    async def _send_progress(
        self, ctx: RequestContext, progress: float, total: float | None, message: str | None
    ) -> bool:
        if ctx.cancelled or (self._close_exc is not None and not self._answering):
            return False
        sent = self._conn.send_progress(ctx.request_id, progress, total, message)
        if sent:
            sent = not await self._flush()  # (as in log)
        return sent

    # ------------------------------------------------------------------ closing

    def _begin_close(
        self, exc: SessionClosed, *, graceful: bool, keep_answering: bool = False
    ) -> None:
        """Close the core, fail every waiter, stop reading. Synchronous, idempotent;
        ``graceful=False`` (or a second, forced call) also cancels the handlers.
        ``keep_answering`` (the end of input of a half-closing channel): until then,
        running handlers' answers, progress and log messages are still written."""
        if self._close_exc is None:
            self._close_exc = exc
            self._answering = keep_answering
            self._conn.receive_eof(now=trio.current_time(), keep_answering=keep_answering)
            self._note_initialized()
            self._waiters.fail_all(exc)
            # (A request _reissue queued for a caller not yet run is an entry only its
            # _wait_reissued removes; the close replaced that caller's Reissued, so it
            # never runs: every caller has its outcome now, and none needs an entry.)
            self._queued.clear()
            self._handshake_done.set()
            if self._restarting is not None:
                self._restarting.set()  # (its waiters see the session closed)
                self._restarting = None
            self._io_scope.cancel()
            self._closing.set()
            logger.debug("%s session closing: %s", self.role, exc.reason)
        if not graceful and not self._forced:
            self._forced = True
            if self._answering:
                self._answering = False
                self._conn.receive_eof(
                    now=trio.current_time()
                )  # the rest is abandoned: nothing more goes out
                self._flush_nowait()  # but a partial batch of answers given (best effort)
            self._pool.cancel_all()
            # (a message half out goes out whole first, by its own write deadline)
            self._channel.finish_write(self._writer.deadline)
            self._writer.abort()

    async def _io(self) -> None:
        with self._io_scope:
            async with trio.open_nursery() as nursery:
                self._io_nursery = nursery
                # What the reader task will run in (trio copies the context at each
                # spawn): taken messages, and handlers started off the reader's task
                # (waiting requests), run in a copy of it too.
                self._reader_context = contextvars.copy_context()
                # (typeshed's run takes a ParamSpec, which mypy's partial cannot bind)
                run = cast("Callable[..., object]", self._reader_context.run)
                self._take_in_reader = functools.partial(run, self._take)
                if self._channel.framing == "message":
                    self._channel.attach_reader(self._take_message)
                self._channel.attach_holds(self._held)
                self._channel.attach_reissue(self._reissue)
                nursery.start_soon(self._read_loop, name="mcp reader")
                nursery.start_soon(self._timer_loop, name="mcp timer")
                interval = self.config.ping_interval
                if interval is not None:  # (legacy era only: see _keepalive)
                    timeout = self.config.ping_timeout
                    nursery.start_soon(keep_alive, self, interval, timeout, name="mcp keep-alive")

    async def _shutdown(self) -> None:
        try:
            if not self._forced:
                await self._grace()
            if self._answering and not self._forced:
                # The end of the half-close: what is left is answered "server shutting
                # down" (as Streamable HTTP does) and abandoned; those answers and the
                # ones of a batch given so far go out (bounded) before the handlers are cut.
                self._answering = False
                if self.role == "server":
                    self._end_listens()
                    for rid in self._conn.inflight_requests():
                        self._conn.send_error(rid, *SHUTTING_DOWN)
                self._conn.receive_eof(now=trio.current_time())
                deadline = trio.current_time() + self.config.abandon_write_timeout
                self._writer.cap(deadline)  # (a write in progress is shielded)
                with trio.move_on_at(deadline):
                    await self._flush()
            assert self._close_exc is not None
            self._begin_close(self._close_exc, graceful=False)
            await self._pool.wait_idle()
        finally:
            await self._close_channel()

    async def _close_channel(self) -> None:
        """Close the channel once, bounded, even when cancelled from outside."""
        if self._channel_closed:
            return
        self._channel_closed = True
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self.config.close_timeout
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self._channel.aclose()

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the session's tasks until it is closed (see :func:`connect_session`)."""
        self._now = trio.lowlevel.current_clock().current_time
        try:
            async with trio.open_nursery() as nursery:
                if self._handler_nursery is None:
                    self._handler_nursery = nursery
                nursery.start_soon(self._io, name="mcp io")
                task_status.started()
                await self._closing.wait()
                await self._shutdown()
        except BaseExceptionGroup as group:
            if not is_internal_failure(group):
                raise
            reason = "internal error in the session runtime (see __cause__)"
            self._begin_close(SessionClosed(reason), graceful=False)
            raise SessionClosed(reason) from group
        finally:
            self._begin_close(SessionClosed("the session was cancelled"), graceful=False)
            await self._close_channel()
            self._release_cancelled()
            self._closed.set()

    def _release_cancelled(self) -> None:
        """The session is over: no answer will come for the peer's requests that were
        cancelled or abandoned by the close (their handlers have ended, or never
        started: a request waiting for a slot, one read but not acted on), so free
        their entries in the core, which would otherwise keep them for as long as the
        :class:`~mcp_sansio.Connection` lives. (A handler in a caller's nursery that
        outlives the session answers nothing: see :meth:`_serve_request`.)"""
        conn = self._conn
        for rid in conn.cancelled_requests():
            drop_cancelled(conn, rid)


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
class _Queued:
    """A request of ours queued but maybe not written yet: by its caller
    (:meth:`Session._write_queued`), or by :meth:`Session._reissue` for a re-issue that
    :meth:`Session._wait_reissued` writes; what :meth:`Session._withdraw` checks.

    Attributes:
        mark: the mark its request was queued up to, the last message of that queue
            call; 0 if it is not known to be there (held by the core).
        scope: cancelled when the core times the request out: the caller stops waiting.
    """

    __slots__ = ("mark", "scope")

    def __init__(self, mark: int) -> None:
        self.mark = mark
        self.scope = trio.CancelScope()

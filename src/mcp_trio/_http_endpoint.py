"""The task side of one Streamable HTTP endpoint: handlers, timers and output routing.

Theory of operation
-------------------
:class:`~mcp_sansio.http.HttpServer` decides everything about HTTP and MCP; the
:class:`Endpoint` runs what it decided, with tasks. It is shared by every TCP connection
of a server (all in one trio thread, so no locks: nothing here awaits between a core
call and the routing of its output).

* **Output.** After *every* call into the core (a request, a handler's answer or
  progress, a closed stream, a timer, a broadcast) :meth:`Endpoint.pump` drains
  ``HttpServer.data_to_send()`` and appends each item to the :class:`ResponseSlot` of the
  HTTP response it names; the connection task that owns that response wakes and writes.
  A slot holds at most ``max_response_buffer`` bytes beside the largest event waiting
  (one event of any size goes out whole: :meth:`ResponseSlot.push`); past that its
  reader is too slow and the connection is dropped (a legacy client resumes from the
  event store).
* **Handlers.** Each ``RequestReceived`` gets one of the endpoint's handler slots
  (``SessionConfig.max_concurrent_handlers``, shared by every client; first come first
  served, one client holding at most ``HttpTransportConfig.max_client_handlers``:
  :class:`_Slots`) *before* its task starts, so a full server stops taking new requests
  instead of queueing tasks; one that gets no slot within ``handler_slot_timeout`` is
  answered "server busy" (its POST ``503``), never left waiting, and a modern one whose
  client closes its connection meanwhile leaves the line at once (that is its
  cancellation). A notification for a handler waits the same way, and its POST is
  ``503`` rather than ``202`` if it gets none: never dropped in silence. A request then
  runs in its own task and
  ``CancelScope`` (a lone request of a legacy POST answered as JSON: in its connection's
  task, which would only wait for the answer, in a copy of its context). Request ids
  are unique per core connection only (each legacy session and each modern request
  has its own), so handlers are keyed by ``(connection, id)``.
  ``RequestCancelled`` (a modern stream closed, a legacy ``notifications/cancelled``)
  and ``ConnectionClosed`` (a session ended) cancel the scopes.
* **Server → client requests** (legacy): a handler's ``ctx.send_request`` waits on a
  ``trio.Event``; the client's answer arrives as a separate POST whose events resolve it.
* **Sessions.** A legacy session's end (``SessionClosed``) is passed to
  :attr:`Endpoint.on_session_closed` (a :class:`~mcp_trio.Server` keeps its legacy
  sessions' resource subscriptions until then).
* **Timer.** One task sleeps until ``HttpServer.next_deadline()`` (re-armed after every
  pump) and calls ``handle_timer``: idle sessions expire, requests of ours time out. It
  also ends the legacy GET streams and modern listens whose principal's token expired
  (:meth:`Endpoint.release_at`): a heap of ``(deadline, stream id)``, an entry dropped
  lazily once its response is over (rebuilt when stale entries outnumber the live ones).
"""

from __future__ import annotations

import contextvars
import heapq
import logging
import math
import types
import weakref
from collections import deque
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Generator,
    Iterable,
    Sequence,
)
from contextlib import suppress
from typing import Any, Final, NoReturn, TypeAlias, TypeVar, cast, final

import attrs
import trio

from mcp_sansio import (
    Connection,
    ConnectionClosed,
    Era,
    ErrorCode,
    ErrorData,
    ErrorReceived,
    InvalidMessageReceived,
    LifecycleState,
    LocalProtocolError,
    NotificationReceived,
    RequestCancelled,
    RequestId,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
)
from mcp_sansio._errors import SHUTTING_DOWN
from mcp_sansio._http_common import RETRY_SOON, error_body, json_response
from mcp_sansio.http import (
    HttpResponse,
    HttpServer,
    HttpServerEvent,
    OpenStream,
    Principal,
    ResponseReady,
    ServerEvent,
    StreamData,
)
from mcp_sansio.http import SessionClosed as HttpSessionClosed

from ._config import SessionConfig
from ._errors import SessionClosed, request_error
from ._handlers import Handlers
from ._http_auth import Authenticate
from ._http_config import HttpTransportConfig
from ._http_context import HttpNotificationContext, HttpRequestContext, Running
from ._pool import call_request_handler, drop_cancelled, send_answer, serve_notification
from ._util import PeerWarnings, rearm

__all__ = ["Endpoint", "ResponseSlot"]

logger = logging.getLogger("mcp_trio")

_SESSIONLESS_WARNINGS_PERIOD: Final = 3600.0
"""Seconds after which the warnings about what belongs to no session get their bound
(``MAX_PEER_WARNINGS``) afresh."""
_BUSY_WARNING_PERIOD: Final = 60.0
"""Seconds between two warnings that requests were refused for want of a handler slot
(the ones between are counted, and the count goes with the next warning)."""

T = TypeVar("T")
_Outcome = ResultReceived | ErrorReceived | RequestTimedOut | SessionClosed
_ANSWERED = LifecycleState.ANSWERED


@attrs.define(slots=True, eq=False)
class _InitializedWait:
    """Requests of one legacy session waiting for its ``notifications/initialized``."""

    event: trio.Event = attrs.field(factory=trio.Event)
    waiting: int = 0


@attrs.define(slots=True, eq=False)
class _Waiter:
    method: str
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: _Outcome | None = None


@types.coroutine
def _in_context(
    context: contextvars.Context, coro: Coroutine[Any, Any, T]
) -> Generator[Any, Any, T]:
    """Await ``coro`` with each of its steps run in ``context``: what a task of its own
    gives a coroutine (trio runs each step of a task in the task's context), without
    the task. What trio sends or throws in at a yield is passed on to ``coro``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                trap = context.run(coro.send, value)
            else:
                trap, error = context.run(coro.throw, error), None
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            value = yield trap
        except BaseException as exc:  # (a Cancelled, say, or a close) goes to coro
            error = exc


_ClientKey: TypeAlias = tuple[str, str]
"""Whose requests share a slice of the handler slots (see :class:`_Slots`): an
authenticated principal's (``("principal", subject)``), else a legacy session's
(``("session", id)``)."""


def _client_of(tagged: ServerEvent, principal: Principal | None) -> _ClientKey | None:
    """Whose share of the handler slots a request of ``tagged``'s counts against: its
    principal's (every session and request of one token holder together), else its
    legacy session's; ``None`` for a modern request of an anonymous client."""
    if principal is not None:
        return ("principal", principal.subject)
    if tagged.session_id is not None:
        return ("session", tagged.session_id)
    return None


@final
class _SlotWait:
    """One request waiting for a handler slot (see :meth:`_Slots.take`)."""

    __slots__ = ("event", "granted", "key")

    def __init__(self, key: _ClientKey | None) -> None:
        self.key = key
        self.granted = False
        """Given a slot (which it now holds, whatever happens to its wait)."""
        self.event = trio.Event()


@final
class _Slots:
    """An endpoint's handler slots (``max_concurrent_handlers``), shared by every client
    of the server, and the part of them one client may hold (``max_client_handlers``).

    A slot is taken at once when one is free and the client holds less than its share;
    else the request waits, first come first served among those that may take one (a
    waiter whose client is at its share is passed over, not in the way of others),
    with a deadline (``handler_slot_timeout``): every request is answered, a busy
    server's ``503`` rather than a wait with no end. Without the share, one client's
    requests that never end (legacy ones outlive their connections) would hold every
    slot and starve every other client until its session expires.

    A request with no client key (a modern request of an anonymous client: nothing
    ties two of them together) counts only against the total.
    """

    __slots__ = ("free", "held", "share", "waiting")

    def __init__(self, total: int, share: int) -> None:
        self.free = total
        """Slots nobody holds (none while a waiter could take one)."""
        self.share = share
        """The most slots one client key holds at once."""
        self.held: dict[_ClientKey, int] = {}
        """Slots held per client key (keys that hold none are dropped)."""
        self.waiting: deque[_SlotWait] = deque()
        """Who waits for a slot, in the order they came."""

    def _may_take(self, key: _ClientKey | None) -> bool:
        return key is None or self.held.get(key, 0) < self.share

    def at_share(self, key: _ClientKey | None) -> bool:
        """Whether ``key`` holds all the slots one client may hold."""
        return not self._may_take(key)

    def _grant(self, key: _ClientKey | None) -> None:
        self.free -= 1
        if key is not None:
            self.held[key] = self.held.get(key, 0) + 1

    def take_nowait(self, key: _ClientKey | None) -> bool:
        """Take a slot if one is free and ``key`` is under its share; whether it did.
        (A free slot while others wait means each of them is at its share: taking it
        jumps no one who could have had it.)"""
        if self.free and self._may_take(key):
            self._grant(key)
            return True
        return False

    async def take(self, key: _ClientKey | None, deadline: float) -> bool:
        """Wait until ``deadline`` (trio time) for a slot (none could be taken at once:
        :meth:`take_nowait`); whether it got one. Cancelled, it holds none."""
        wait = _SlotWait(key)
        self.waiting.append(wait)
        try:
            with trio.move_on_at(deadline):
                await wait.event.wait()
        except BaseException:
            if wait.granted:
                self.give_back(key)
            elif not wait.event.is_set():
                self.waiting.remove(wait)
            raise
        if not wait.event.is_set():
            self.waiting.remove(wait)  # timed out (a woken waiter left the queue already)
        return wait.granted

    def give_back(self, key: _ClientKey | None) -> None:
        """Give back a slot held for ``key``: to the first waiter that may take it."""
        self.free += 1
        if key is not None:
            left = self.held[key] - 1
            if left:
                self.held[key] = left
            else:
                del self.held[key]
        if self.waiting:
            self._wake()

    def _wake(self) -> None:
        for wait in self.waiting:
            if self.free and self._may_take(wait.key):
                self.waiting.remove(wait)
                self._grant(wait.key)
                wait.granted = True
                wait.event.set()
                return

    def release_waiters(self) -> None:
        """Wake every waiter without a slot (the server stops: they are refused)."""
        while self.waiting:
            self.waiting.popleft().event.set()


@final
class ResponseSlot:
    """What the core has routed to one HTTP response and the connection has not written.

    The connection task that owns the response waits for it by reading its socket under
    :attr:`waker`, a cancel scope :meth:`push` cancels: one task both watches for the
    client leaving and wakes for output, with no watcher task per response.
    """

    # What is the same for every new slot is a class attribute, shadowed once an
    # instance sets it (most are never set: one assignment each per response saved).
    ready: HttpResponse | None = None
    """A complete answer (for a response that was awaited)."""
    sse_headers: tuple[tuple[bytes, bytes], ...] | None = None
    """An awaited response turned into an SSE stream with these headers."""
    end = False
    """Finish the response after :attr:`data`."""
    overflow = False
    """More than :attr:`max_size` is waiting beside the largest piece of output in
    :attr:`data`: the reader is too slow (what overflowed is not kept)."""
    largest = 0
    """The size of the largest piece of output in :attr:`data`, which does not count
    against :attr:`max_size` (see :meth:`push`)."""
    changed = False
    """:meth:`push` was called since the owner last looked."""
    waker: trio.CancelScope | None = None
    """The scope the owner waits in; :meth:`push` cancels it to wake the owner."""
    abort: trio.CancelScope | None = None
    """The scope of the write in progress, cancelled on overflow: the writer may be
    stuck in a write the client never reads."""
    direct: Callable[[ResponseSlot], bool] | None = None
    """Set while the owner waits for output it lets any task write: :meth:`push`
    calls it at once (see ``_Connection._direct_answer``); ``True`` means it is
    written and the owner need not wake."""
    written = False
    """:attr:`direct` has framed the end of the response (what the socket did not
    take is in :attr:`rest`)."""
    rest: bytes | memoryview = b""
    """The part of a directly written answer the socket did not take at once."""
    failure: Exception | None = None
    """Why the direct write failed (the owner raises it)."""
    parked = False
    """The answer is out whole and the owner was not woken: the response is over
    (:meth:`Endpoint.pump` closes it) and the owner's wait is its idle wait."""

    def __init__(self, stream_id: int, limit: int) -> None:
        self.stream_id: int = stream_id
        self.data = bytearray()
        """SSE bytes to write."""
        self.max_size: int = limit
        """The bound on :attr:`data`, beside its largest piece."""

    def push(self, item: OpenStream | StreamData | ResponseReady) -> None:
        """Take one output item of the core.

        The bound is on bytes piling up for a slow reader, not on the size of one
        message: the largest piece of output waiting does not count against it, so an
        SSE event over :attr:`max_size` goes out whole, into an empty buffer or beside
        small ones not written yet. (Not only into an empty one: a handler that logs,
        then answers, may route both before the owner's turn to write, in either
        order.) A piece is what one :meth:`Endpoint.pump` routed here, the output of
        one call into the core: usually one message, which its handler held in memory
        already. So :attr:`data` holds at most ``max_size`` bytes beside its largest
        piece; what would pass that is dropped with the connection.
        """
        if isinstance(item, ResponseReady):
            self.ready = item.response
        else:
            if self.overflow:
                return  # the connection is being dropped: nothing more is kept for it
            if isinstance(item, OpenStream):
                self.sse_headers = item.headers
            size = len(item.data)
            if not self.data:
                self.largest = size  # (let in whole, whatever its size)
                self.data += item.data
            elif len(self.data) + size - max(self.largest, size) > self.max_size:
                # Bytes pile up beside the largest piece: the reader is too slow.
                self.overflow = True
                if self.abort is not None:
                    self.abort.cancel()
            else:
                self.largest = max(self.largest, size)
                self.data += item.data
            self.end = self.end or item.end
        direct = self.direct
        # The output goes out from the task that produced it (a handler's, usually)
        # rather than a scheduler pass later from the owner's, which is not woken.
        if (
            direct is not None
            and not self.overflow
            and not isinstance(item, OpenStream)
            and direct(self)
        ):
            return
        self.changed = True
        if self.waker is not None:
            self.waker.cancel()


@final
class Endpoint:
    """Runs an :class:`HttpServer`'s decisions: see the module docstring.

    Args:
        http: the sans-IO endpoint.
        handlers: the handler table.
        config: handler slots, write timeout, shutdown bounds.
        transport: socket timeouts and buffers.
        authenticate: who makes each request (``None``: nobody is asked).
    """

    def __init__(
        self,
        http: HttpServer,
        handlers: Handlers,
        config: SessionConfig,
        transport: HttpTransportConfig,
        authenticate: Authenticate | None = None,
    ) -> None:
        self.http = http
        self.authenticate = authenticate
        self.handlers = handlers
        self.config = config
        self.transport = transport
        total = config.max_concurrent_handlers
        share = transport.max_client_handlers
        self.slots = _Slots(total, max(1, total // 4) if share is None else min(share, total))
        self.nursery: trio.Nursery | None = None
        """Where handler tasks run (set before serving)."""
        self.closing = False
        """Shutting down: no new requests are taken (set by :meth:`stop_taking`)."""
        self._busy_refused = 0  # requests refused for want of a slot since the last warning
        self._busy_warned_at = -math.inf
        self.now: Callable[[], float] = trio.current_time
        """The run's clock, read directly once serving (:meth:`timer_loop`): what
        ``trio.current_time()`` reads, minus two calls."""
        self._running: dict[tuple[Connection, RequestId], Running] = {}
        self._all: set[Running] = set()
        self._waiters: dict[tuple[Connection, RequestId], _Waiter] = {}
        self._initialized: dict[Connection, _InitializedWait] = {}  # see until_initialized
        self._warnings: weakref.WeakKeyDictionary[Connection, PeerWarnings] = (
            weakref.WeakKeyDictionary()
        )  # a legacy session's (its Connection lives as long)
        self._sessionless_warnings = PeerWarnings()  # what belongs to no session: one bound
        self._sessionless_since = trio.current_time()  # ... renewed each hour (see below)
        self._responses: dict[int, ResponseSlot] = {}
        self._timer_scope: trio.CancelScope | None = None
        self._releases: list[tuple[float, int]] = []  # heap: see release_at
        self._release_of: dict[int, float] = {}  # live entries of _releases
        self._idle: trio.Event | None = None
        """Set when the last handler ends; made only while someone waits for that
        (:meth:`wait_handlers_idle`), not for every request that finds the server idle."""
        self.on_session_closed: Callable[[str], None] | None = None
        """Called with the id of each legacy session that ends (deleted, expired,
        evicted or shut down), once the core has closed it: what is kept per session
        elsewhere (a server's resource subscriptions) goes with it."""

    # ------------------------------------------------------------------ output

    def open_response(self, stream_id: int) -> ResponseSlot:
        """Register the response ``stream_id`` before its output can be routed."""
        slot = ResponseSlot(stream_id, self.transport.max_response_buffer)
        self._responses[stream_id] = slot
        return slot

    def close_response(self, slot: ResponseSlot) -> None:
        """The response is over (finished or the client went away): tell the core.
        Idempotent (a parked response is closed by :meth:`pump`, then by its owner)."""
        if self._responses.pop(slot.stream_id, None) is None:
            return
        released = self._release_of.pop(slot.stream_id, None)
        if released is not None and len(self._releases) > 2 * len(self._release_of) + 16:
            self._releases = [(d, i) for i, d in self._release_of.items()]
            heapq.heapify(self._releases)
        events = self.http.stream_closed(slot.stream_id, now=self.now())
        self.pump(drain_all=False)
        self.handle_events_nowait(events)

    def pump(
        self, connection: Connection | None = None, *, drain_all: bool = True, timer: bool = True
    ) -> None:
        """Route what the core wants written to the responses it names; re-arm the timer.

        ``connection``: drain only the connection a handler just used. ``drain_all=False``:
        only route what the core has already routed (after ``handle_request`` and
        ``stream_closed``, which drain what they touch): no pass over every session.
        ``timer=False``: the caller knows the timer is right as it is (see
        :meth:`_serve_request`).
        """
        finished: list[ResponseSlot] = []
        for item in self.http.data_to_send(connection=connection, drain_all=drain_all):
            slot = self._responses.get(item.stream_id)
            if slot is not None:
                slot.push(item)
                if slot.parked:
                    finished.append(slot)
        if finished:
            for slot in finished:
                # Written whole by push, with the owner left parked: the response is over.
                self.close_response(slot)
            return  # (the first close_response pumped and re-armed after the drain above)
        scope = self._timer_scope
        if scope is not None and timer:
            # (No stream expiry pending, the usual case: the core's deadline alone.)
            rearm(scope, self._next_deadline() if self._releases else self.http.next_deadline())

    def release_at(self, stream_id: int, deadline: float) -> None:
        """End the SSE response ``stream_id`` (a legacy GET stream, a modern
        ``subscriptions/listen``) at ``deadline`` (trio time) if it is still open then
        (``HttpServer.token_expired``: a GET stream resumably, the client reconnects
        with ``Last-Event-ID`` and its current token; a listen with an error that has
        the client authorize and listen again): a stream is authenticated once, when
        it opens, so it must not outlive the token it was opened with."""
        self._release_of[stream_id] = deadline
        heapq.heappush(self._releases, (deadline, stream_id))
        scope = self._timer_scope
        if scope is not None:
            rearm(scope, self._next_deadline())

    def _next_deadline(self) -> float | None:
        core = self.http.next_deadline()
        releases = self._releases
        while releases and self._release_of.get(releases[0][1]) != releases[0][0]:
            heapq.heappop(releases)  # its response is over (or was released)
        if not releases:
            return core
        return releases[0][0] if core is None else min(core, releases[0][0])

    def _release_due(self, now: float) -> None:
        releases = self._releases
        while releases and releases[0][0] <= now:
            deadline, stream_id = heapq.heappop(releases)
            if self._release_of.get(stream_id) != deadline:
                continue
            del self._release_of[stream_id]
            self.http.token_expired(stream_id)  # (ended meanwhile: nothing to do)

    def send_notification(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        sessions: Collection[str] | None = None,
    ) -> int:
        """Broadcast a change notification (see ``HttpServer.send_notification``)."""
        sent = self.http.send_notification(method, params, sessions=sessions)
        self.pump()
        return sent

    def send_task_status(self, params: dict[str, Any], *, principal: str | None) -> int:
        """Send a ``notifications/tasks`` (see ``HttpServer.send_task_status``)."""
        sent = self.http.send_task_status(params, principal=principal)
        self.pump()
        return sent

    # ------------------------------------------------------------------ events

    async def handle_events(
        self,
        events: Sequence[HttpServerEvent],
        principal: Principal | None = None,
        *,
        inline: bool = False,
        left: Callable[[], Awaitable[NoReturn]] | None = None,
    ) -> HttpResponse | None:
        """Act on what a request produced; waits for a handler slot when all are busy
        (or the client holds its share of them), at most ``handler_slot_timeout``.
        ``principal``: who made the HTTP request (handlers see it). ``inline``: the
        caller waits for the whole answer anyway (a legacy POST answered as JSON), so a
        lone request of a legacy session is served in the caller's task (see
        :meth:`_start_request`). ``left``: watches the HTTP connection while a modern
        request waits for its slot, raising when the client closes it (see
        :meth:`_take_watching`).

        Raises:
            What ``left`` raised: the wait is over, the request neither started nor
            refused; the caller closes its response (which cancels it in the core).

        Returns:
            ``None``, or a ``503`` for a message refused for want of a slot, which the
            caller may write instead of the core's decision when the POST holds that
            message alone (``not Reply.batch``: a batch's other messages were taken).
            A request's: the core has the same error as its answer. A notification's:
            it was not taken (transports.mdx: a server that cannot accept the input
            MUST answer an HTTP error status, not ``202``), and nothing of it ran, so
            the client may send it again after ``Retry-After``; in a batch it is only
            counted in the busy warning.
        """
        inline = inline and len(events) == 1
        deadline = self.now() + self.transport.handler_slot_timeout
        busy: HttpResponse | None = None
        if self._initialized:
            # A notifications/initialized that came in this POST (say, last in a batch)
            # wakes its waiters now, not after the requests ahead of it got a slot.
            for conn in [c for c in self._initialized if c.lifecycle is not _ANSWERED]:
                self._wake_initialized(conn)
        for tagged in events:
            if not isinstance(tagged, ServerEvent):
                self._session_event(tagged)
                continue
            event = tagged.event
            if isinstance(event, RequestReceived):
                refused = await self._start_request(
                    tagged, event, principal, deadline, inline, left
                )
                busy = busy or refused
            elif isinstance(event, NotificationReceived):
                refused = await self._start_notification(tagged, event, principal, deadline)
                busy = busy or refused
            else:
                self._handle_nowait(tagged)
        return busy

    def handle_events_nowait(self, events: Iterable[HttpServerEvent]) -> None:
        """Act on events that start no handler (closed streams, timers, shutdown)."""
        for tagged in events:
            if isinstance(tagged, ServerEvent):
                assert not isinstance(tagged.event, RequestReceived | NotificationReceived)
                self._handle_nowait(tagged)
            else:
                self._session_event(tagged)

    def _session_event(self, event: HttpServerEvent) -> None:
        if isinstance(event, HttpSessionClosed):
            logger.debug("HTTP session %s closed (%s)", event.session_id, event.reason)
            if self.on_session_closed is not None:
                self.on_session_closed(event.session_id)

    def _handle_nowait(self, tagged: ServerEvent) -> None:
        event, conn = tagged.event, tagged.connection
        if isinstance(event, RequestCancelled):
            self._cancel(conn, event.request_id)
        elif isinstance(event, ResultReceived | ErrorReceived | RequestTimedOut):
            self._resolve(conn, event.request_id, event)
        elif isinstance(event, ConnectionClosed):
            self._wake_initialized(conn)
            for rid in event.abandoned:
                self._cancel(conn, rid)
            for rid in event.unanswered:
                self._resolve(conn, rid, SessionClosed("the HTTP session ended"))
        elif isinstance(event, InvalidMessageReceived):
            self._peer_warnings(tagged).invalid(
                "invalid message from an HTTP client", event, server=True
            )

    def _peer_warnings(self, tagged: ServerEvent) -> PeerWarnings:
        """The warning bound of the session ``tagged`` belongs to; one shared by what
        belongs to no session (each modern request, and each initialize that starts
        none, has a Connection of its own: a bound per Connection would bound
        nothing), renewed every :data:`_SESSIONLESS_WARNINGS_PERIOD`."""
        if tagged.session_id is None:
            # Renewed each hour: one noisy client must not silence, for the life of the
            # server, the warnings about every other client that has no session.
            now = trio.current_time()
            if now - self._sessionless_since >= _SESSIONLESS_WARNINGS_PERIOD:
                self._sessionless_warnings = PeerWarnings()
                self._sessionless_since = now
            return self._sessionless_warnings
        found = self._warnings.get(tagged.connection)
        if found is None:
            found = self._warnings[tagged.connection] = PeerWarnings()
        return found

    def _wake_initialized(self, conn: Connection) -> None:
        wait = self._initialized.pop(conn, None)
        if wait is not None:
            wait.event.set()

    async def until_initialized(self, conn: Connection) -> None:
        """Legacy session: wait (at most ``config.handshake_timeout``) for the client's
        ``notifications/initialized`` when a request served before it wants to ask
        the client something. Over HTTP that POST may come after the first request's
        (lifecycle.mdx lets the server serve then, but not ask)."""
        if conn.lifecycle is not LifecycleState.ANSWERED:
            return
        wait = self._initialized.get(conn)
        if wait is None:
            wait = self._initialized[conn] = _InitializedWait()
        wait.waiting += 1
        limit = self.config.handshake_timeout
        try:
            with trio.move_on_after(math.inf if limit is None else limit):
                await wait.event.wait()
        finally:
            wait.waiting -= 1
            if not wait.waiting and self._initialized.get(conn) is wait:
                del self._initialized[conn]  # the last one gave up (or was cancelled)

    def _cancel(self, conn: Connection, rid: RequestId) -> None:
        """The peer cancelled ``rid`` (or its session ended): stop its handler, or
        keep it from starting, and free its place against ``max_inflight_requests``
        at once (a request sent right after would find it taken). One not begun yet
        is freed when it would start (see :meth:`_start_request`)."""
        running = self._running.get((conn, rid))
        if running is not None:
            running.cancelled = True
            running.scope.cancel()
            drop_cancelled(conn, rid)

    def _resolve(self, conn: Connection, rid: RequestId, outcome: _Outcome) -> None:
        waiter = self._waiters.pop((conn, rid), None)
        if waiter is not None:
            waiter.outcome = outcome
            waiter.done.set()

    # ------------------------------------------------------------------ handlers

    def _begin(self, conn: Connection, rid: RequestId | None) -> Running:
        running = Running(connection=conn, request_id=rid)
        if rid is not None:
            self._running[(conn, rid)] = running
        self._all.add(running)
        return running

    def _finish(self, running: Running, *, slot: bool = True) -> None:
        """Forget ``running``, its handler over or never started, and give back its
        handler slot (``slot=False``: it got none). A request the peer cancelled frees
        its place in the core (:func:`drop_cancelled`, idempotent)."""
        rid = running.request_id
        if running.cancelled and rid is not None:
            drop_cancelled(running.connection, rid)
        if rid is not None and self._running.get((running.connection, rid)) is running:
            del self._running[(running.connection, rid)]
        self._all.discard(running)
        if slot:
            self.slots.give_back(running.client)
        if not self._all:
            self._set_idle()

    async def _acquire(
        self,
        tagged: ServerEvent,
        rid: RequestId | None,
        principal: Principal | None,
        deadline: float,
        left: Callable[[], Awaitable[NoReturn]] | None = None,
    ) -> Running | None:
        """A handler slot for the request ``rid`` (``None``: a notification) of
        ``tagged``'s connection, taken under its client's share, by ``deadline``:
        its bookkeeping, or ``None`` when none came (the server is full or stops).
        ``left``: see :meth:`_take_watching` (what it raises is raised here)."""
        running = self._begin(tagged.connection, rid)
        running.client = _client_of(tagged, principal)
        # A free slot is taken without a scheduler round trip; only a full server (or a
        # client at its share) waits.
        if self.slots.take_nowait(running.client):
            return running
        try:
            if self.closing:
                got = False
            elif left is None:
                got = await self.slots.take(running.client, deadline)
            else:
                got = await self._take_watching(running.client, deadline, left)
        except BaseException:
            self._finish(running, slot=False)
            raise
        if got:
            return running
        self._finish(running, slot=False)
        if not running.cancelled and not self.closing:
            self._note_busy(running.client)
        return None

    async def _take_watching(
        self,
        key: _ClientKey | None,
        deadline: float,
        left: Callable[[], Awaitable[NoReturn]],
    ) -> bool:
        """:meth:`_Slots.take`, while ``left`` reads the request's HTTP connection.

        A modern client that gives up closes its connection, and that is its
        cancellation (``2026-07-28/basic/patterns/cancellation``): its request must
        leave the line at once, not hold its place there until it gets a slot (when it
        would start for nobody) or until ``handler_slot_timeout`` (when a 503 would be
        written to nobody, and counted as busy). The connection's task, which waits
        here, cannot read its socket meanwhile, so a second task does, only for a wait
        that blocks (the common free slot needs none).

        Raises:
            What ``left`` raised (the client left): the slot, if one came meanwhile,
            is given back.
        """
        gone: list[Exception] = []
        got = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                try:
                    await left()
                except Exception as exc:  # (the client left: the wait is over)
                    gone.append(exc)
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            got = await self.slots.take(key, deadline)
            nursery.cancel_scope.cancel()  # (the watch; a take cancelled holds none)
        if gone:
            if got:
                self.slots.give_back(key)  # (came as the client left: not started)
            raise gone[0]
        return got

    def _busy(
        self, tagged: ServerEvent, principal: Principal | None, rid: RequestId | None = None
    ) -> tuple[ErrorData, HttpResponse]:
        """A message (the request ``rid``, else a notification) got no handler slot: the
        "server busy" error, and its ``503`` with ``Retry-After`` (nothing of it ran)."""
        slots = self.slots
        if slots.at_share(_client_of(tagged, principal)):
            text = (
                f"server busy: this client's {slots.share} handler slots are all taken"
                " (its share of max_concurrent_handlers); retry later"
            )
        else:
            text = "server busy: every handler slot is taken (max_concurrent_handlers); retry later"
        error = ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message=text)
        return error, json_response(503, error_body(error, rid), RETRY_SOON)

    def _note_busy(self, client: _ClientKey | None) -> None:
        """Warn that requests are refused for want of a slot: at most once every
        :data:`_BUSY_WARNING_PERIOD` (a flood of them floods no log), with the count."""
        self._busy_refused += 1
        now = self.now()
        if now - self._busy_warned_at < _BUSY_WARNING_PERIOD:
            return
        logger.warning(
            "HTTP: %d message(s) refused as busy for want of a handler slot within %g s"
            " (%s; %d slots, %d per client)",
            self._busy_refused,
            self.transport.handler_slot_timeout,
            "the last one's client at its share" if self.slots.at_share(client) else "all taken",
            self.config.max_concurrent_handlers,
            self.slots.share,
        )
        self._busy_refused = 0
        self._busy_warned_at = now

    def stop_taking(self) -> None:
        """The server stops: take no new request, and refuse those waiting for a slot
        now ("server shutting down", as one that gets its slot late is)."""
        self.closing = True
        self.slots.release_waiters()

    async def _start_request(
        self,
        tagged: ServerEvent,
        event: RequestReceived,
        principal: Principal | None,
        deadline: float,
        inline: bool = False,
        left: Callable[[], Awaitable[NoReturn]] | None = None,
    ) -> HttpResponse | None:
        """Start the handler of ``event`` (or serve it here: ``inline``) once it has a
        slot; a ``503`` (see :meth:`handle_events`) if none came by ``deadline``.
        A modern request's wait ends when ``left`` raises (its client closed the
        connection); a legacy client leaving cancels nothing (its answer is kept for
        it to resume), so its request waits on."""
        conn = tagged.connection
        watch = left if tagged.session_id is None else None
        running = await self._acquire(tagged, event.request_id, principal, deadline, watch)
        if running is None:
            return self._refuse_unslotted(tagged, event.request_id, principal)
        if running.cancelled or conn.request_era(event.request_id) is None:
            running.cancelled = True  # (by the peer in the same POST, too: see _finish)
            self._finish(running)  # cancelled (or the session ended) while we waited
            return None
        if self.closing:
            # The server began to stop while it waited for its slot: it is not started
            # (a new POST gets 503 now), as a WebSocket session refuses it while draining.
            conn.send_error(event.request_id, *SHUTTING_DOWN)
            self.pump(conn)
            self._finish(running)
            return None
        ctx = HttpRequestContext(
            self, event, running, tagged.session_id, principal, tagged.needed_scopes
        )
        if inline and tagged.session_id is not None:
            # A lone request of a legacy POST answered as JSON: its connection's task
            # would only wait for the answer (a legacy client leaving cancels nothing,
            # so nothing need watch its socket meanwhile), so it serves the request
            # itself, in the request's own scope and in a copy of its context, as a
            # task of its own would: no task to start, and none to wake afterwards.
            await _in_context(
                contextvars.copy_context(), self._serve_request(ctx, running, inline=True)
            )
            return None
        assert self.nursery is not None
        self.nursery.start_soon(
            self._serve_request, ctx, running, name=f"mcp http {event.method} #{event.request_id!r}"
        )
        return None

    def _refuse_unslotted(
        self, tagged: ServerEvent, rid: RequestId, principal: Principal | None
    ) -> HttpResponse | None:
        """Answer the request ``rid``, which got no handler slot: "server shutting
        down" if the server stops, else "server busy", which is also returned as a
        ``503`` with ``Retry-After`` (the client may try again: nothing of it ran).
        Nothing if it was cancelled, or its session ended, while it waited."""
        conn = tagged.connection
        if conn.request_era(rid) is None:
            return None
        if self.closing:
            conn.send_error(rid, *SHUTTING_DOWN)
            self.pump(conn)
            return None
        error, busy = self._busy(tagged, principal, rid)
        conn.send_error(rid, error.code, error.message)
        self.pump(conn)
        return busy

    async def _serve_request(
        self, ctx: HttpRequestContext, running: Running, inline: bool = False
    ) -> None:
        """Run the handler and send its answer. ``inline``: in the task of the connection
        that waits for the answer (see :meth:`_start_request`), whose timer the answer
        need not re-arm: the connection re-arms it when it closes the response, with
        no yield before unless the socket cannot take the answer at once; and meanwhile
        the deadline armed before stays right, as an answer brings none forward: the
        core arms timers only for requests of ours, and the session is not idle (its
        expiry starts) until the response is closed (a test pins it:
        test_an_answer_never_brings_the_deadline_forward)."""
        try:
            with running.scope:
                handler = self.handlers.request_handler(ctx.method)
                # The HTTP context duck-types RequestContext (there is no Session over HTTP).
                outcome = await call_request_handler(handler, cast(Any, ctx))
                if not running.cancelled:
                    send_answer(running.connection, ctx.method, ctx.request_id, outcome)
                    self.pump(running.connection, timer=not inline)
        finally:
            self._finish(running)

    async def _start_notification(
        self,
        tagged: ServerEvent,
        event: NotificationReceived,
        principal: Principal | None,
        deadline: float,
    ) -> HttpResponse | None:
        """Start the handler of ``event`` once it has a slot, waited for as a request's
        is (at most until ``deadline``): a notification is not dropped because the
        server is busy for a moment. If none came: a ``503`` with ``Retry-After`` (see
        :meth:`handle_events`), and the refusal is counted in the busy warning."""
        handler = self.handlers.notification_handler(event.method)
        if handler is None:
            logger.debug("no handler for notification %r", event.method)
            return None
        # The HTTP context duck-types NotificationContext, as for requests.
        ctx: Any = HttpNotificationContext(
            method=event.method,
            params=event.params,
            session_id=tagged.session_id,
            principal=principal,
        )
        running = await self._acquire(tagged, None, principal, deadline)
        if running is None:
            if self.closing:  # (the POST of a server that stops is 503 already)
                logger.debug("notification %r dropped: the server stops", event.method)
                return None
            return self._busy(tagged, principal)[1]
        assert self.nursery is not None
        self.nursery.start_soon(serve_notification, handler, ctx, running, self._finish)
        return None

    def cancel_handlers(self) -> None:
        """Cancel every running handler (shutdown)."""
        for running in self._all:
            running.cancelled = True
            running.scope.cancel()

    def _set_idle(self) -> None:
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.set()

    async def wait_handlers_idle(self) -> None:
        """Wait until no handler is running."""
        while self._all:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    @property
    def running_handlers(self) -> int:
        """Handler tasks running."""
        return len(self._all)

    # ------------------------------------------------------------------ handler services

    async def send_progress(
        self, running: Running, progress: float, total: float | None, message: str | None
    ) -> bool:
        """``ctx.report_progress``: see :class:`HttpRequestContext`."""
        conn, rid = running.connection, running.request_id
        assert rid is not None
        if running.cancelled or conn.closed:
            return False
        sent = conn.send_progress(rid, progress, total, message)
        self.pump(conn)
        await trio.lowlevel.checkpoint()
        return sent

    async def send_log(self, running: Running, level: str, data: Any, logger_: str | None) -> bool:
        """``ctx.log``: see :class:`HttpRequestContext`."""
        conn = running.connection
        if running.cancelled:
            return False
        sent = conn.send_log(level, data, logger=logger_, request_id=running.request_id)
        self.pump(conn)
        await trio.lowlevel.checkpoint()
        return sent

    async def send_request(
        self,
        running: Running,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
    ) -> dict[str, Any]:
        """``ctx.send_request``: see :class:`HttpRequestContext`."""
        conn = running.connection
        if conn.era is not Era.LEGACY:
            raise LocalProtocolError(
                "in the modern era servers send no requests: return InputRequiredResult instead"
            )
        if method != "ping":
            await self.until_initialized(conn)
        if conn.closed:
            raise SessionClosed("the HTTP session ended")
        rid = conn.send_request(
            method,
            params,
            now=trio.current_time(),
            timeout=timeout,
            related_request_id=running.request_id,
        )
        waiter = _Waiter(method=method)
        self._waiters[(conn, rid)] = waiter
        self.pump(conn)
        try:
            await waiter.done.wait()
        except BaseException:
            if waiter.outcome is None:
                self._waiters.pop((conn, rid), None)
                with suppress(LocalProtocolError):
                    conn.cancel_request(rid, "cancelled by the server")
                self.pump(conn)
            raise
        outcome = waiter.outcome
        if isinstance(outcome, ResultReceived):
            return outcome.result
        assert outcome is not None
        raise request_error(method, rid, outcome)

    # ------------------------------------------------------------------ timer

    async def timer_loop(self) -> None:
        """Run ``HttpServer.handle_timer`` at each deadline, forever."""
        self.now = trio.lowlevel.current_clock().current_time
        while True:
            with trio.CancelScope() as scope:
                self._timer_scope = scope
                self.pump()  # arms the deadline
                await trio.sleep_forever()
            self._timer_scope = None
            now = trio.current_time()
            self._release_due(now)
            events = self.http.handle_timer(now)
            self.pump()
            self.handle_events_nowait(events)

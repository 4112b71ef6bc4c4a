"""The server side of Streamable HTTP, both eras, as values in and values out.

Theory of operation
-------------------
One :class:`HttpServer` serves one MCP endpoint. The binding (h11, ASGI, aiohttp) turns
each HTTP request into an :class:`HttpRequest` and calls :meth:`HttpServer.handle_request`,
which returns a :class:`Reply`: exactly one *decision* for that request plus the core events
to act on. The decision is one of

* :class:`HttpResponse` -- write it, done (errors, ``202 Accepted``, answers the core gave
  at once such as ``initialize``, ``ping`` or ``server/discover``);
* :class:`OpenStream` -- answer ``200 text/event-stream`` now, write ``data``, then keep
  writing what :meth:`HttpServer.data_to_send` routes to ``stream_id``;
* :class:`AwaitResponse` -- write nothing yet; the answer for ``stream_id`` comes later from
  :meth:`HttpServer.data_to_send` as a :class:`ResponseReady` (one JSON body) or an
  :class:`OpenStream` (a modern response that turned into a stream).

``stream_id`` names one HTTP response in progress. After *every* call into the server or
into one of its :class:`Connection` objects (a handler answering, reporting progress, ...),
the binding drains :meth:`HttpServer.data_to_send` and writes each item to the response it
names; ``end=True`` finishes it. When a response is over for any reason (finished, or the
client went away) the binding calls :meth:`HttpServer.stream_closed`. That call is what
makes a modern request cancelled (``2026-07-28/basic/patterns/cancellation``) and what
lets a legacy session become idle.

Connections. A *legacy* session (``initialize`` → ``Mcp-Session-Id``) owns one
``Connection("server")`` for its whole life: the legacy lifecycle, negotiated version,
log level and the server's own requests (sampling, roots, elicitation) are per-session
state. A *modern* request gets a fresh ``Connection("server")`` of its own, dropped once the
request is answered or its stream closed. One shared modern connection would be smaller,
but JSON-RPC ids are unique only per client and the modern era has no client identity on
HTTP: two clients both sending ``"id": 1`` at once would collide in one in-flight table.
Per request, ids never collide, "closing the stream cancels the request" is simply "close
that connection" (``receive_eof``: later answers are dropped by the core), and the table
of live modern requests is bounded by ``max_modern_requests``.

Routing. Each outbound message carries the id of the peer request it belongs to
(``Connection.messages_to_send``). Legacy: a message for a request whose POST is an open
SSE stream goes to that stream, everything else (and, in JSON-response mode, every
notification or server request made for a request) goes to the session's *standalone*
stream, the one a GET attaches to; with no GET attached it waits in the event store for
the next GET. Modern: everything a per-request connection emits belongs to that request.

Legacy SSE streams are resumable (``2025-11-25/basic/transports#resumability-and-redelivery``):
event ids are ``"<stream>:<seq>"``, ``<stream>`` unique in this server and ``<seq>``
counting from 1 per stream (``0`` is the priming event's id). Every event is kept in a
bounded :class:`EventStore`; ``GET`` with ``Last-Event-ID`` replays what followed on that
stream only, then continues live (or ends, if the stream's request was answered). An
ended stream is replayable only while it is among the session's last
``max_ended_streams`` to end with events stored (the client that lost its final answer
comes back within its ``retry``; a stream answered as JSON, or cancelled before any
event, stored none and does not count); older ones are discarded from the store, not
kept for the session's life. Streams that ended with no connection attached (whose
client is yet to come back) are counted apart, as many again, so that the answers a
busy session delivers meanwhile do not push them out.
Replay never skips silently: if the store no longer holds every event after the cursor,
the answer is ``410 Gone``. Modern streams carry no ids and are not resumable.

Timers. The Trio binding asks :meth:`HttpServer.next_deadline` after every HTTP request, so
it must not walk the session table. Two indexes keep it O(log n):

* ``_idle`` holds the sessions with no response in progress, least recently active first:
  the same order as ``_sessions``, restricted to those sessions. Its head is the next to
  expire and the one to evict. A session joins when it is created, joins or moves to the
  end in ``_touch`` (every activity, including the end of its last response, touches it),
  and leaves in ``_attach`` (it gained a response) and ``_close_session``. ``handle_timer``
  runs the due connections' timers in this same LRU order (``_Session.order``).
* ``_timers`` is a heap of ``(deadline, token, session id)``: each session's
  ``conn.next_deadline()`` as last seen, with lazy invalidation (an entry counts only
  while its session is live and ``session.timer_token`` is its token; ids, not sessions,
  so that a stale entry keeps no closed session alive). A deadline moves *earlier* only when
  the connection arms a timer (a request of ours sent by a handler, or re-armed by
  progress); the connection reports that through its ``_on_arm`` hook, which puts the
  session in ``_watched``, and watched sessions are looked at again at their next drain,
  :meth:`HttpServer.next_deadline` or :meth:`HttpServer.handle_timer`, however the
  connection was reached. A deadline that moved *later* unseen (an answer, a
  cancellation, a timer run) is found when its entry reaches the top: the top is checked
  against the connection before it is believed. The heap is rebuilt when stale entries
  outnumber the sessions, which keeps it bounded.

Status codes (both eras unless noted):

====  ==========================================================================
200   ``GET`` of the Protected Resource Metadata (``resource_metadata`` configured)
204   a CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``; ``cors`` on)
400   bad JSON, bad JSON-RPC, bad ``MCP-Protocol-Version``, legacy request without
      ``Mcp-Session-Id``, batch outside 2025-03-26, bad ``Last-Event-ID``; modern
      header mismatch (-32020), unsupported version (-32022), -32021
403   ``Origin`` present and not allowed (spec MUST); a principal's token lacks a scope a
      request needs (``required_scopes``; ``WWW-Authenticate: Bearer
      error="insufficient_scope"``, a 2025-03-26 batch refused whole)
404   wrong path; unknown or terminated session, or another principal's (legacy);
      unknown method (modern, -32601)
405   GET/DELETE when not offered (always in the modern era); other methods
406   ``Accept`` lacks ``application/json`` and ``text/event-stream`` (POST) or
      ``text/event-stream`` (GET); wildcards count, ``q=0`` refuses
410   ``Last-Event-ID`` names events the store no longer holds
413   body (or ``Content-Length``) over ``max_body_size``
415   ``Content-Type`` is not ``application/json``
421   ``Host`` not allowed (DNS-rebinding protection; RFC 9110 §15.5.20 "Misdirected
      Request" says the request reached a server not meant to answer for that authority)
503   session table full with no idle session to evict; too many modern requests
====  ==========================================================================
"""

from __future__ import annotations

import functools
import heapq
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, final

import attrs

from ._config import ConnectionConfig, check_count
from ._connection import Connection
from ._errors import SHUTTING_DOWN, ErrorCode, ErrorData, LocalProtocolError
from ._events import Event, InvalidMessageReceived, RequestCancelled
from ._events import RequestReceived as _RequestReceived
from ._framing import encode_sse_event
from ._http_auth import (
    Principal,
    ProtectedResourceMetadata,
    RequiredScopes,
    check_metadata_url,
    insufficient_scope,
    insufficient_scope_response,
    scope_set,
    token_expired,
)
from ._http_common import (
    HTTP_HOSTS_SETTING,
    JSON_TYPE,
    LAST_EVENT_ID,
    LOCAL_HOSTS,
    LOCAL_ORIGINS,
    MCP_METHOD,
    MCP_NAME,
    MCP_NAME_KEYS,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    RETRY_SOON,
    SSE_TYPE,
    HeaderParam,
    Headers,
    HttpRequest,
    HttpResponse,
    decode_header_value,
    error_body,
    header_value_matches,
    host_allowed,
    is_json_content_type,
    json_response,
    media_type_allowed,
    misdirected,
    origin_allowed,
)
from ._json import dumps, kept, loads
from ._jsonrpc import (
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    RequestId,
    Response,
    classify,
    decode,
    error_response,
    is_request_id,
)
from ._modern import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, SUBSCRIPTIONS_LISTEN_METHOD
from ._state import LifecycleState
from ._tasks import TASKS_NOTIFICATION
from ._versions import REVISIONS, Era

__all__ = [
    "AwaitResponse",
    "Decision",
    "EventStore",
    "HttpServer",
    "HttpServerConfig",
    "HttpServerEvent",
    "InMemoryEventStore",
    "OpenStream",
    "Output",
    "Reply",
    "ResponseMode",
    "ResponseReady",
    "ServerEvent",
    "SessionClosed",
    "SessionCreated",
    "StreamData",
]

ResponseMode: TypeAlias = Literal["auto", "json", "sse"]
"""How a request that is not answered at once is answered.

``"json"``: one ``application/json`` body when the answer is ready; notifications made for
the request are dropped (modern) or sent on the session's GET stream (legacy).
``"sse"``: a ``text/event-stream``; legacy opens it at once, modern with its first
message, so that an error the spec gives a status of its own (-32021 and the like: 400)
still has it when nothing came before. ``"auto"``: legacy as ``"sse"`` (so the priming
event makes it resumable from the start); modern as JSON unless a notification
(progress, log) comes first, which turns the response into a stream.
``subscriptions/listen`` is always a stream, opened at once.
"""

_SSE_HEADERS: Final[Headers] = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
_CORS_EXPOSE: Final = (
    b"access-control-expose-headers",
    b"Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After",
)
_CORS_VARY: Final = (b"vary", b"Origin")
_CORS_ALLOW_HEADERS: Final = (
    b"Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, "
    b"Mcp-Name, Last-Event-ID"
)
"""The request headers every preflight grants (with those asked for): a page that sends
one more ``Mcp-Param-*`` later needs a new preflight, one that adds these does not."""
_CORS_GRANTED: Final = frozenset(_CORS_ALLOW_HEADERS.decode().lower().split(", "))
_CORS_MAX_AGE: Final = (b"access-control-max-age", b"600")
_ASCII_VISIBLE: Final = frozenset(range(0x21, 0x7F))


# ================================================================================ values


@final
@attrs.frozen(kw_only=True)
class OpenStream:
    """Answer ``200 text/event-stream`` with ``headers``, write ``data``, keep the response open.

    Later bytes for ``stream_id`` arrive as :class:`StreamData`. When ``end`` is true the
    stream is already complete: write ``data`` and finish the response.
    """

    stream_id: int
    """The handle of this HTTP response."""
    headers: Headers
    """The response headers (``content-type: text/event-stream`` and friends)."""
    data: bytes = b""
    """SSE bytes to write first (priming event, replayed events, first messages)."""
    end: bool = False
    """Whether to finish the response after ``data``."""


@final
@attrs.frozen(kw_only=True)
class AwaitResponse:
    """Write nothing yet: the answer for ``stream_id`` comes from ``data_to_send``."""

    stream_id: int
    """The handle of this HTTP response."""


@final
@attrs.frozen(kw_only=True)
class StreamData:
    """More SSE bytes for an open stream."""

    stream_id: int
    """The handle of the HTTP response to write to."""
    data: bytes
    """The bytes (whole SSE events; may be empty when only ``end`` is news)."""
    end: bool = False
    """Whether to finish the response after ``data``."""


@final
@attrs.frozen(kw_only=True)
class ResponseReady:
    """The complete answer for a request that got :class:`AwaitResponse`."""

    stream_id: int
    """The handle of the HTTP response."""
    response: HttpResponse
    """What to write (usually ``200 application/json``)."""


Decision: TypeAlias = HttpResponse | OpenStream | AwaitResponse
Output: TypeAlias = OpenStream | StreamData | ResponseReady


@final
@attrs.frozen(kw_only=True)
class ServerEvent:
    """A core event, with where it came from so the binding can answer on the right channel."""

    event: Event
    """The core event (``RequestReceived``, ``RequestCancelled``, ``ResultReceived``, ...)."""
    connection: Connection
    """The connection to answer through (``send_result``, ``send_progress``, ...)."""
    session_id: str | None
    """The legacy session, or ``None`` for a modern request."""
    stream_id: int | None
    """The HTTP response the request arrived on, when the event is about one."""
    needed_scopes: frozenset[str] | None = None
    """A ``RequestReceived``: the scopes :attr:`HttpServerConfig.required_scopes` said
    it needs, which its principal's token was checked to grant (``None``: nothing was
    checked, no hook or no principal). What checked them hands them on, so that no
    one asks the hook again."""


@final
@attrs.frozen(kw_only=True)
class SessionCreated:
    """A legacy session started (its ``initialize`` was answered)."""

    session_id: str
    """The ``Mcp-Session-Id`` minted."""
    connection: Connection
    """The session's connection."""


@final
@attrs.frozen(kw_only=True)
class SessionClosed:
    """A legacy session ended; a ``ServerEvent(ConnectionClosed)`` lists what it abandoned."""

    session_id: str
    """The session."""
    reason: Literal["deleted", "expired", "evicted", "shutdown"]
    """``deleted``: the client sent DELETE; ``expired``: idle for ``session_idle_timeout``;
    ``evicted``: made room for a new session; ``shutdown``: :meth:`HttpServer.close`."""


HttpServerEvent: TypeAlias = ServerEvent | SessionCreated | SessionClosed


@final
@attrs.frozen(kw_only=True)
class Reply:
    """What :meth:`HttpServer.handle_request` decided."""

    decision: Decision
    """What to do with this HTTP request."""
    events: tuple[HttpServerEvent, ...] = ()
    """What happened, to act on (run handlers for ``RequestReceived``, ...)."""
    batch: bool = False
    """The body was a JSON-RPC batch (an array, whatever whitespace came before it):
    the answers of its requests go together in one array, so the response that the
    decision names never answers one message alone. A binding that answers a request
    itself in place of the decision (a ``503`` for a request that found no handler
    free, say) may do so only when this is false: the body was that one message."""


# ================================================================================ event store


class EventStore(Protocol):
    """Where legacy SSE events are kept for ``Last-Event-ID`` replay. Must be bounded.

    Sequence numbers of a stream start at 1 and increase by one.

    A store may also have ``discard_stream(session_id: str, stream: int) -> None``:
    forget every event of one stream. The server calls it for a session's ended streams
    past :attr:`HttpServerConfig.max_ended_streams` (a resumption of one is then
    ``410``), so that a long-lived session does not fill the store with answers nobody
    will ask for again. It is optional (looked up once, with ``getattr``): a store
    without it keeps those events until :meth:`discard_session` or its own bounds drop
    them, as before. :class:`InMemoryEventStore` has it.
    """

    def append(self, session_id: str, stream: int, seq: int, message: bytes) -> None:
        """Keep one event (the JSON-RPC message bytes) of ``stream``. The bytes may hold
        a larger allocation than their length (``orjson.dumps``'s output does): a store
        that keeps them in memory should keep a copy (``bytes(memoryview(message))``)."""

    def replay(
        self, session_id: str, stream: int, after: int
    ) -> Sequence[tuple[int, bytes]] | None:
        """The held events of ``stream`` with ``seq > after``, oldest first, or ``None``
        when nothing of ``stream`` is held. Evicted events are simply missing; the server
        checks for gaps."""

    def discard_session(self, session_id: str) -> None:
        """Forget every event of the session."""


_EVENT_COST: Final = 128
"""What :class:`InMemoryEventStore` counts for each event besides its message's length:
the ``bytes`` object's header (33), the entry and its sequence number (~95), measured
with tracemalloc on CPython 3.11."""
_STREAM_COST: Final = 1024
"""What :class:`InMemoryEventStore` counts for each stream it holds events of: its deque
(a block of 64 slots), its key and its place in the table (~900, measured alike). In a
legacy session every POST answered as SSE is a stream of its own, so with many small
answers this is most of the store."""


@final
class InMemoryEventStore:
    """The default :class:`EventStore`: bounded per stream and in total.

    Args:
        max_events_per_stream: events kept per stream; the oldest go first.
        max_bytes: the memory the store may hold, estimated as each event's message
            bytes plus 128 for its bookkeeping, and 1 KiB for each stream; over it, the
            oldest events of the stream least recently appended to go first.

    A message is kept as a copy of its own size (``_json.kept``): counting ``len`` alone
    of what ``orjson.dumps`` returns let the store grow to ~50 times ``max_bytes``.

    Sizing ``max_bytes``. It is one pool for the whole server, and what goes first is
    what was appended to least recently, whether its client has it or not: it should
    hold, at once, the answers clients may still come back for within their ``retry``
    (those cut mid-answer in a burst, too). An answer costs its JSON size (a tool
    result with ``structuredContent`` carries its data twice: a 300 KB text is about
    680 KB here). Past the bound, a burst of large answers pushes out those of clients
    cut a moment before, whose resumption is then ``410`` (the call fails). Make it
    larger than the largest answer times the calls that may be answered at once (a
    server of 300 KB text answers, 50 at a time: some 34 MB, over twice the default).
    """

    def __init__(
        self, *, max_events_per_stream: int = 1_000, max_bytes: int = 16 * 1024 * 1024
    ) -> None:
        if max_events_per_stream < 0 or max_bytes < 0:
            raise ValueError("event store bounds must not be negative")
        self.max_events_per_stream: Final = max_events_per_stream
        self.max_bytes: Final = max_bytes
        self._streams: OrderedDict[tuple[str, int], deque[tuple[int, bytes]]] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """The memory held, as :attr:`max_bytes` counts it."""
        return self._bytes

    @property
    def held_events(self) -> int:
        """Events currently held."""
        return sum(len(q) for q in self._streams.values())

    def append(self, session_id: str, stream: int, seq: int, message: bytes) -> None:
        """See :meth:`EventStore.append`."""
        key = (session_id, stream)
        queue = self._streams.get(key)
        if queue is None:
            queue = self._streams[key] = deque()
            self._bytes += _STREAM_COST
        else:
            self._streams.move_to_end(key)
        queue.append((seq, kept(message)))
        self._bytes += len(message) + _EVENT_COST
        if len(queue) > self.max_events_per_stream:
            self._bytes -= len(queue.popleft()[1]) + _EVENT_COST
            if not queue:  # (max_events_per_stream=0: nothing is kept, not even the key)
                del self._streams[key]
                self._bytes -= _STREAM_COST
        while self._bytes > self.max_bytes:
            oldest_key, oldest = next(iter(self._streams.items()))
            self._bytes -= len(oldest.popleft()[1]) + _EVENT_COST
            if not oldest:
                del self._streams[oldest_key]
                self._bytes -= _STREAM_COST

    def replay(
        self, session_id: str, stream: int, after: int
    ) -> Sequence[tuple[int, bytes]] | None:
        """See :meth:`EventStore.replay`."""
        queue = self._streams.get((session_id, stream))
        if queue is None:
            return None
        return [item for item in queue if item[0] > after]

    def discard_session(self, session_id: str) -> None:
        """See :meth:`EventStore.discard_session`."""
        for key in [k for k in self._streams if k[0] == session_id]:
            self._drop(key)

    def discard_stream(self, session_id: str, stream: int) -> None:
        """Forget every event of one stream (nothing if none is held): see
        :class:`EventStore`, which calls it for a session's ended streams past
        :attr:`HttpServerConfig.max_ended_streams`."""
        if (session_id, stream) in self._streams:
            self._drop((session_id, stream))

    def _drop(self, key: tuple[str, int]) -> None:
        events = self._streams.pop(key)
        self._bytes -= sum(len(m) for _, m in events) + _EVENT_COST * len(events)
        self._bytes -= _STREAM_COST


# ================================================================================ config


def _check_endpoint(_inst: object, _attr: object, value: str) -> None:
    if not value.startswith("/"):
        raise ValueError(f"endpoint must be an absolute path, not {value!r}")


def _check_metadata(_inst: object, _attr: object, value: ProtectedResourceMetadata | None) -> None:
    if value is not None:
        # Its URL goes in every insufficient_scope challenge (RFC 9728 §5.1), which
        # cannot quote a '"', a backslash or a control character (RFC 6750 §3), and
        # clients fetch it only over https (or http on loopback): refused here, at
        # start-up, rather than answering every such request 500 or with a dead link.
        check_metadata_url(value.url)


@final
@attrs.frozen(kw_only=True)
class HttpServerConfig:
    """The HTTP rules an :class:`HttpServer` applies. Which eras it serves comes from the
    :class:`ConnectionConfig` (``supported_versions`` and ``era``). Each field has its
    own docstring in the source; in brief:

    Attributes:
        endpoint: the MCP endpoint path (any other is 404).
        allowed_origins: ``Origin`` values allowed (another is 403).
        cors: answer browsers of the allowed origins (preflight, exposed headers).
        allowed_hosts: ``Host`` values accepted (another is 421); ``None``: any.
        max_body_size: the largest request body, in bytes (413 above).
        response_mode: JSON or SSE, or a callable of the method and era that says.
        max_sessions: legacy sessions held at once.
        max_sessions_per_principal: legacy sessions one principal may hold.
        session_idle_timeout: seconds an idle legacy session lives.
        max_modern_requests: modern requests in progress at once (503 above).
        standalone_stream: legacy: offer the GET stream for server-initiated
            messages; ``False`` for a binding that cannot hold it open.
        allow_delete: legacy: let a client end its session with DELETE.
        retry_ms: legacy: the SSE ``retry`` announced to polling clients.
        max_ended_streams: legacy: a session's ended streams whose events are kept
            for ``Last-Event-ID`` replay (the most recently ended).
        tool_header_params: modern: a tool's ``x-mcp-header`` parameters, by name.
        resource_metadata: the Protected Resource Metadata to serve (RFC 9728).
        required_scopes: the scopes each request needs, by principal and method.
    """

    endpoint: str = attrs.field(default="/mcp", validator=_check_endpoint)
    """The MCP endpoint path; any other path is 404."""
    allowed_origins: tuple[str, ...] = LOCAL_ORIGINS
    """Origins allowed to call us (``"*"``: any; ``"http://host:*"``: any port). A request
    with another ``Origin`` is 403; one without ``Origin`` (not a browser) passes."""
    cors: bool = False
    """Let browser pages of the :attr:`allowed_origins` read our answers (CORS): answer
    preflight ``OPTIONS`` requests, and give every response to an allowed ``Origin``
    ``Access-Control-Allow-Origin`` with ``Mcp-Session-Id``, ``MCP-Protocol-Version`` and
    ``WWW-Authenticate`` exposed (see :meth:`HttpServer.cors_headers`)."""
    allowed_hosts: tuple[str, ...] | None = LOCAL_HOSTS
    """``Host`` values accepted (``"name:*"``: any port), else 421 (the authority of an
    absolute-form target is checked in its place). The default suits a server bound to
    localhost; list your public names, or ``None`` to skip the check."""
    max_body_size: int = 4 * 1024 * 1024
    """Largest request body, bytes (413 above). Read at most this much plus one."""
    response_mode: ResponseMode | Callable[[str, Era], ResponseMode] = "auto"
    """JSON or SSE for requests not answered at once; a callable decides per request from
    the method (of the first request of a batch) and the era."""
    max_sessions: int = 1_000
    """Legacy sessions held at once. A new ``initialize`` beyond it evicts the least
    recently used session that has no response in progress, else gets 503."""
    max_sessions_per_principal: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_count(1))
    )
    """Legacy sessions one authenticated principal may hold at once; ``None``: only
    :attr:`max_sessions` bounds them. An ``initialize`` beyond it replaces that principal's
    least recently used idle session, else gets 429 with ``Retry-After``, so one caller
    cannot fill the table that all callers share. Unauthenticated callers (no
    ``authenticate`` hook) count against :attr:`max_sessions` only."""
    session_idle_timeout: float | None = 1_800.0
    """Seconds after its last HTTP activity an idle legacy session (no response in
    progress) is closed; ``None``: never."""
    max_modern_requests: int = 1_000
    """Modern requests in progress at once (each holds a connection); 503 above."""
    standalone_stream: bool = True
    """Legacy: offer the GET stream for server-initiated messages (else GET without
    ``Last-Event-ID`` is 405 and messages with nowhere to go are dropped)."""
    allow_delete: bool = True
    """Legacy: let clients end their session with DELETE (else 405)."""
    retry_ms: int | None = 1_000
    """Legacy: the SSE ``retry`` (ms) announced in priming events and before a released
    stream's end (:meth:`HttpServer.release_stream`), for polling clients; ``None``:
    none is announced (clients wait their own default)."""
    max_ended_streams: int = attrs.field(default=64, validator=check_count(0))
    """Legacy: how many of a session's ended streams (its POSTs answered as SSE, once
    every request of one is answered or cancelled) keep their events in the event store
    for ``Last-Event-ID`` replay: a client whose connection broke before the final
    answer reached it resumes that stream after the ``retry`` it was told, and gets it.
    Only the most recently ended ones are kept; an older one's events are discarded
    (the store's ``discard_stream``, see :class:`EventStore`) and a resumption of it is
    ``410``. Without this bound every answer of a long-lived session stayed in the store
    until the session ended (about 1.3 KB for a small one: a busy client filled the
    default 16 MiB in minutes, and from then on each event evicted another). Streams
    in progress and the GET stream are not counted (the store's own bounds hold them);
    ``0`` keeps no ended stream. A stream that ended with no connection attached (its
    connection broke or was released: its answer went to the store only, and its
    client will come back for it) is counted apart, with a bound of this same number,
    so that answers delivered meanwhile (a busy session ends more than 64 calls within
    a client's ``retry``) cannot push it out first; replayed whole, it counts as
    delivered."""
    tool_header_params: Callable[[str], Sequence[HeaderParam]] | None = None
    """Modern: the ``x-mcp-header`` parameters of a tool by name (see
    :func:`parse_header_params`), so ``Mcp-Param-*`` headers are checked against the
    body. ``None``: no tool has any."""
    resource_metadata: ProtectedResourceMetadata | None = attrs.field(
        default=None, validator=_check_metadata
    )
    """OAuth 2.0 Protected Resource Metadata (RFC 9728) to serve, to ``GET`` (and
    ``HEAD``) with no token, at ``/.well-known/oauth-protected-resource`` followed by the
    endpoint's path (and the resource's, if it differs), and at the bare well-known path
    (``2026-07-28/basic/authorization/authorization-server-discovery``). ``None``: those
    paths are 404. A protected server sets it. A document whose ``url`` has what a
    challenge cannot carry (a quote, a backslash, a control or a non-ASCII character)
    is a ``ValueError`` here."""
    required_scopes: RequiredScopes | None = None
    """The scopes each request needs, by principal, method and params (see
    :data:`~mcp_sansio.http.RequiredScopes`): a POST from a :class:`Principal` whose
    token lacks one is refused ``403`` with an ``insufficient_scope`` challenge naming
    them all and :attr:`resource_metadata`'s URL
    (``authorization#runtime-insufficient-scope-errors``), before anything of it is
    served. A 2025-03-26 batch is refused whole if one of its requests is (one POST has
    one status; every request of it is answered with the error). Called for every
    request of every POST from a principal: it should be quick. An exception from it is
    answered ``500`` (the request is refused: a check that fails is no pass).
    ``None``: no request needs any (only the ``authenticate`` hook decides). What it
    said of a request that is served is handed on with it
    (:attr:`ServerEvent.needed_scopes`), once: a task of the tasks extension (in
    ``mcp_trio``) keeps those scopes, and its ``tasks/*`` requests need them too."""


# ================================================================================ internals


@attrs.define(eq=False)
class _Buf:
    start: Headers | None = None
    data: bytearray = attrs.Factory(bytearray)
    end: bool = False
    response: HttpResponse | None = None


@attrs.define(eq=False)
class _Session:
    id: str
    conn: Connection
    standalone: _Stream
    last_active: float
    streams: dict[int, _Stream] = attrs.Factory(dict)
    by_request: dict[RequestId, _Stream] = attrs.Factory(dict)
    handles: set[int] = attrs.Factory(set)
    order: int = 0  # rank in the LRU order of HttpServer._sessions (larger: more recent)
    deadline: float | None = None  # our entry in HttpServer._timers, valid while ...
    timer_token: int = 0  # ... this is its token (0: no entry)
    primings: int = 0  # priming events sent again: their ids' suffix (see _prime)
    principal: str | None = None  # who created it: nobody else may use it
    # Ended streams with stored events, oldest first, at most config.max_ended_streams
    # each (see HttpServer._keep_ended): those delivered (their end went to a connection),
    # and apart, those undelivered (none attached: their client is yet to come back).
    ended: dict[int, None] = attrs.Factory(dict)
    undelivered: dict[int, None] = attrs.Factory(dict)


@attrs.define(eq=False)
class _Stream:
    key: int
    conn: Connection
    session: _Session | None
    mode: Literal["sse", "json", "lazy"]
    pending: set[RequestId] = attrs.Factory(set)
    request_id: RequestId | None = None
    handle: int | None = None
    seq: int = 0
    delivered: int = 0
    parts: list[bytes] = attrs.Factory(list)
    batch: bool = False
    opened: bool = False
    subscription: bool = False
    answer_as_sse: bool = False  # modern "sse": a 200 answer opens a stream if none is open


def _is_response_to(payload: bytes, request_id: RequestId) -> bool:
    # The core serialises responses as {"jsonrpc","id","result"|"error"} in that order
    # (_jsonrpc.result_response / error_response through orjson), so a prefix test tells a
    # response from a request or notification without parsing a possibly large body.
    prefix = b'{"jsonrpc":"2.0","id":' + dumps(request_id) + b","
    if not payload.startswith(prefix):
        return False
    return payload[len(prefix) : len(prefix) + 8] in (b'"result"', b'"error":')


def _error_code(payload: bytes) -> int | None:
    if b'"error":{' not in payload:
        return None
    obj = loads(payload)
    error = obj.get("error") if type(obj) is dict else None
    code = error.get("code") if type(error) is dict else None
    return code if type(code) is int else None


def _status_for(payload: bytes, era: Era) -> int:
    code = _error_code(payload)
    if code in (ErrorCode.PARSE_ERROR, ErrorCode.INVALID_REQUEST):
        return 400
    if era is Era.MODERN:
        if code == ErrorCode.METHOD_NOT_FOUND:
            return 404
        if code in (
            ErrorCode.HEADER_MISMATCH,
            ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        ):
            return 400
    return 200


def _fail(
    status: int,
    message: str,
    code: int = ErrorCode.INVALID_REQUEST,
    *,
    request_id: RequestId | None = None,
    data: Any = None,
    headers: Headers = (),
) -> HttpResponse:
    body = error_body(ErrorData(code=code, message=message, data=data), request_id)
    return json_response(status, body, headers)


def _needed(event: Event, checked: Mapping[RequestId, frozenset[str]]) -> frozenset[str] | None:
    """The scopes ``event``, a request, was checked to need (see
    :attr:`ServerEvent.needed_scopes`)."""
    return checked.get(event.request_id) if isinstance(event, _RequestReceived) else None


def _is_request(item: Any) -> bool:
    """Whether a decoded body item looks like a request (what a scope check asks about)."""
    return type(item) is dict and type(item.get("method")) is str and is_request_id(item.get("id"))


def _is_answer(item: Any) -> bool:
    """Whether a decoded body item looks like an answer (to a request of ours)."""
    return type(item) is dict and "method" not in item and ("result" in item or "error" in item)


_MAX_SEQ: Final = 2**63


def _primes(session: _Session) -> bool:
    """Whether the streams of ``session`` start with a priming event: only from 2025-11-25
    on (:attr:`Revision.sse_priming`; the official SDKs stopped sending it to earlier
    clients too). An earlier client still resumes from the first event's id."""
    version = session.conn.protocol_version
    return version is not None and REVISIONS[version].sse_priming


def _decimal(text: str | None) -> int | None:
    """A non-negative decimal from peer input: ASCII digits only (``str.isdigit`` also
    takes ``²``), and huge values are capped instead of tripping ``int``'s digit limit."""
    if text is None or not text or not text.isascii() or not text.isdigit():
        return None
    return int(text) if len(text) <= 19 else _MAX_SEQ + 1


def _default_session_id() -> str:
    return secrets.token_urlsafe(24)  # 192 bits, [A-Za-z0-9_-]


# ================================================================================ the server


@final
class HttpServer:
    """The Streamable HTTP rules of one MCP endpoint, both eras, no I/O.

    Args:
        config: the HTTP rules; defaults documented on :class:`HttpServerConfig`.
        connection_config: given to every :class:`Connection` the server makes; it also
            says which eras and versions are served.
        session_id_factory: makes legacy session ids (default: 192 random bits from
            :mod:`secrets`, URL-safe Base64). Ids must be visible ASCII and unique.
        event_store: where legacy SSE events are kept for resumption (default:
            :class:`InMemoryEventStore` with its default bounds).

    Error handling:
        Nothing a peer sends makes a method raise: it becomes a status code, a JSON-RPC
        error, or an event. :class:`LocalProtocolError` means the caller misused the API
        (a session id factory returning something unusable, an unknown stream). Anything
        else is a bug.
    """

    def __init__(
        self,
        config: HttpServerConfig | None = None,
        *,
        connection_config: ConnectionConfig | None = None,
        session_id_factory: Callable[[], str] | None = None,
        event_store: EventStore | None = None,
    ) -> None:
        self.config: Final = config if config is not None else HttpServerConfig()
        self.connection_config: Final = (
            connection_config if connection_config is not None else ConnectionConfig()
        )
        cc = self.connection_config
        self._legacy_versions = tuple(
            v
            for v in cc.supported_versions
            if REVISIONS[v].era is Era.LEGACY and cc.era != "modern"
        )
        self._modern_versions = tuple(
            v
            for v in cc.supported_versions
            if REVISIONS[v].era is Era.MODERN and cc.era != "legacy"
        )
        if not self._legacy_versions and not self._modern_versions:
            raise ValueError("the connection config leaves no version to serve")
        self._session_id_factory = session_id_factory or _default_session_id
        self._store: EventStore = event_store if event_store is not None else InMemoryEventStore()
        # (Optional in the protocol: a custom store written before it has none.)
        self._discard_stream: Callable[[str, int], None] | None = getattr(
            self._store, "discard_stream", None
        )
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently active first
        self._idle: OrderedDict[str, _Session] = OrderedDict()  # those with no handles, same order
        self._idle_of: dict[str, OrderedDict[str, _Session]] = {}  # the same, per principal
        self._count_of: dict[str, int] = {}  # sessions held, per principal
        self._timers: list[tuple[float, int, str]] = []  # see "Timers" above
        self._watched: dict[str, _Session] = {}  # armed a timer since last looked at
        self._order = 0
        self._timer_token = 0
        self._modern: dict[int, _Stream] = {}
        self._handles: dict[int, _Stream] = {}
        self._owners: dict[Connection, _Session | _Stream] = {}
        self._out: dict[int, _Buf] = {}
        self._next_id = 0
        methods = ["POST"]
        if self._legacy_versions:
            methods.append("GET")
            if self.config.allow_delete:
                methods.append("DELETE")
        self._methods: Final = tuple(methods)
        self._allow: Final = ", ".join(methods).encode()
        metadata = self.config.resource_metadata
        self._metadata_paths: Final = (
            metadata.paths(self.config.endpoint) if metadata is not None else frozenset()
        )
        self._metadata: Final = metadata.response() if metadata is not None else None

    # ------------------------------------------------------------------ introspection

    @property
    def serves_legacy(self) -> bool:
        """Whether legacy sessions (``initialize``) are served."""
        return bool(self._legacy_versions)

    @property
    def serves_modern(self) -> bool:
        """Whether modern (2026-07-28) requests are served."""
        return bool(self._modern_versions)

    def sessions(self) -> tuple[str, ...]:
        """The live legacy session ids, least recently active first."""
        return tuple(self._sessions)

    def session_connection(self, session_id: str) -> Connection | None:
        """The connection of a live legacy session."""
        session = self._sessions.get(session_id)
        if session is None:
            return None
        return session.conn

    def statistics(self) -> dict[str, int]:
        """Table sizes: ``sessions``, ``modern_requests``, ``open_responses``."""
        return {
            "sessions": len(self._sessions),
            "modern_requests": len(self._modern),
            "open_responses": len(self._handles),
        }

    # ------------------------------------------------------------------ requests

    def check_head(self, request: HttpRequest) -> HttpResponse | None:
        """The checks that need no body: path, ``Origin``, ``Host``, method, media types,
        ``Content-Length``. Call it before reading the body to refuse early; returns the
        refusal, or ``None`` to go on. :meth:`handle_request` runs it again unless told
        ``head_checked``."""
        cfg = self.config
        if request.path != cfg.endpoint:
            return self._other_path(request)
        origin = request.header("origin")
        if origin is not None and not origin_allowed(origin, cfg.allowed_origins):
            return _fail(403, f"Forbidden: Origin {origin!r} is not allowed")
        wrong_host = self._misdirected(request)
        if wrong_host is not None:
            return wrong_host
        method = request.method
        if method not in self._methods:
            if method == "OPTIONS" and cfg.cors:
                return self._preflight(request, self._allow)
            return HttpResponse(status=405, headers=((b"allow", self._allow),))
        accept = request.header("accept")
        if method == "POST":
            if not is_json_content_type(request.header("content-type")):
                return _fail(415, "Unsupported Media Type: Content-Type must be application/json")
            if not (media_type_allowed(accept, JSON_TYPE) and media_type_allowed(accept, SSE_TYPE)):
                return _fail(
                    406, "Not Acceptable: Accept must allow application/json and text/event-stream"
                )
            length = _decimal(request.header("content-length"))
            if length is not None and length > cfg.max_body_size:
                return _fail(413, f"Content Too Large: over {cfg.max_body_size} bytes")
        elif method == "GET" and not media_type_allowed(accept, SSE_TYPE):
            return _fail(406, "Not Acceptable: Accept must allow text/event-stream")
        return None

    def _other_path(self, request: HttpRequest) -> HttpResponse:
        """A request for another path than the endpoint: the resource metadata, or 404."""
        metadata = self._metadata
        if metadata is None or request.path not in self._metadata_paths:
            return HttpResponse(status=404)
        if request.method == "OPTIONS" and self.config.cors:
            return self._preflight(request, b"GET, HEAD", public=True)
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(status=405, headers=((b"allow", b"GET, HEAD"),))
        # Public: no Origin check and no token (the client reads it to learn where to
        # get one; RFC 9728 §3); the Host check still holds.
        return self._misdirected(request) or metadata

    def _misdirected(self, request: HttpRequest) -> HttpResponse | None:
        """``421`` for a ``Host`` not in ``allowed_hosts`` (DNS-rebinding protection):
        the host the request is for (:attr:`HttpRequest.host`: an absolute-form target's
        authority takes the place of the header)."""
        allowed = self.config.allowed_hosts
        host = request.host
        if allowed is None or host_allowed(host, allowed):
            return None
        return misdirected(host, HTTP_HOSTS_SETTING)

    def cors_headers(self, request: HttpRequest) -> Headers:
        """The CORS headers of any response to ``request``: none unless ``cors`` is on
        and the request has an allowed ``Origin`` (a refused one got 403 already). The
        binding adds them to every response, SSE streams included: the preflight lets a
        page send the request, these let it read the answer."""
        if not self.config.cors:
            return ()
        origin = request.header("origin")
        if origin is None or not origin_allowed(origin, self.config.allowed_origins):
            return (_CORS_VARY,)  # (the answer depends on Origin: caches must know)
        return (
            (b"access-control-allow-origin", origin.encode("latin-1")),
            _CORS_VARY,
            _CORS_EXPOSE,
        )

    def _preflight(
        self, request: HttpRequest, methods: bytes, public: bool = False
    ) -> HttpResponse:
        """A CORS preflight (Fetch standard, "CORS protocol"): which methods and request
        headers a page may use. It carries no credentials, so it is answered before any
        authentication. Whatever headers the page asks for are granted (its origin is
        trusted): ``Authorization``, ``Mcp-Session-Id``, ``Mcp-Param-*``, ..."""
        if request.header("access-control-request-method") is None:
            return HttpResponse(status=405, headers=((b"allow", methods),))  # not a preflight
        allow: Headers = (
            ((b"access-control-allow-origin", b"*"),) if public else self.cors_headers(request)
        )
        asked = request.header("access-control-request-headers")
        if public:  # (the metadata: a GET needs no header of MCP's)
            if asked is not None:
                allow = (*allow, (b"access-control-allow-headers", asked.encode("latin-1")))
        else:
            more = {  # (once each, in the order asked)
                name.lower(): name
                for name in map(str.strip, (asked or "").split(","))
                if name and name.lower() not in _CORS_GRANTED
            }
            granted = b", ".join(
                [_CORS_ALLOW_HEADERS, *(n.encode("latin-1") for n in more.values())]
            )
            allow = (*allow, (b"access-control-allow-headers", granted))
        allow = (*allow, (b"vary", b"Access-Control-Request-Headers"))
        return HttpResponse(
            status=204,
            headers=(*allow, (b"access-control-allow-methods", methods), _CORS_MAX_AGE),
        )

    def handle_request(
        self,
        request: HttpRequest,
        *,
        now: float,
        head_checked: bool = False,
        principal: Principal | str | None = None,
    ) -> Reply:
        """Decide what to answer to one HTTP request.

        Args:
            request: the request, with its whole body (at most ``max_body_size + 1``
                bytes need be read: more is refused anyway).
            now: the current time (seconds, any monotonic origin).
            head_checked: :meth:`check_head` already passed for this method, target
                and headers (it is not run again).
            principal: who the binding authenticated the request as (a
                :class:`Principal`, or just its ``subject``), or ``None``. A
                :class:`Principal`'s scopes are checked against
                :attr:`HttpServerConfig.required_scopes`; a bare subject, or ``None``,
                is never refused for want of a scope. A legacy session belongs to the
                principal of its ``initialize``: a request of another one for it is
                answered as for an unknown session (``404``), so its existence does not
                leak. A modern request's ``requestState`` is sealed for, and only
                accepted from, its principal.

        Returns:
            The decision and the events to act on. Drain :meth:`data_to_send` afterwards
            (``drain_all=False`` is enough: this call drains the connections it uses);
            it may also have produced output for other responses.
        """
        early = None if head_checked else self.check_head(request)
        if early is not None:
            return Reply(decision=early)
        who = principal if isinstance(principal, Principal) else None
        if who is not None:
            principal = who.subject
        assert not isinstance(principal, Principal)
        if request.method == "GET":
            return Reply(decision=self._get(request, now, principal))
        if request.method == "DELETE":
            return self._delete(request, now, principal)
        if len(request.body) > self.config.max_body_size:
            return Reply(
                decision=_fail(413, f"Content Too Large: over {self.config.max_body_size} bytes")
            )
        obj = decode(request.body)
        if type(obj) is Invalid:
            return Reply(decision=_fail(400, obj.error.message, ErrorCode.PARSE_ERROR))
        if self._is_modern(request, obj):
            reply = self._modern_post(request, obj, now, principal, who)
        else:
            reply = self._legacy_post(request, obj, now, principal, who)
        # Said here, where the body is parsed, so a binding need not look at its bytes.
        return attrs.evolve(reply, batch=True) if type(obj) is list else reply

    def _scope_refusal(
        self,
        who: Principal,
        hook: RequiredScopes,
        requests: Sequence[dict[str, Any]],
        batch: bool,
    ) -> HttpResponse | dict[RequestId, frozenset[str]]:
        """The ``403`` for ``requests`` (the body's, each a valid request object) when
        they need scopes ``who``'s token lacks (every scope of every request in one
        challenge), or the scopes each one needs, by id (all granted). Called only with
        a hook and a :class:`Principal`."""
        needed: set[str] = set()
        checked: dict[RequestId, frozenset[str]] = {}
        try:
            for item in requests:
                params = item.get("params")
                scopes = hook(who, item["method"], params if type(params) is dict else None)
                found = scope_set(scopes) if scopes else frozenset()
                checked.setdefault(item["id"], found)  # (a repeated id is refused anyway)
                needed |= found
            if not needed:
                return checked  # (the usual case: nothing to check)
            metadata = self.config.resource_metadata
            error = insufficient_scope(
                who, needed, resource_metadata=None if metadata is None else metadata.url
            )
            if error is None:
                return checked
            ids = [item["id"] for item in requests]
            return insufficient_scope_response(error, ids, batch=batch)
        except Exception:  # the deployer's hook failed (or named no scope token): a
            # failed check is no pass. Every request read is answered, under its id
            # (one POST, one status).
            internal = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="Internal error")
            if batch:
                answers = [error_response(item["id"], internal) for item in requests]
                return json_response(500, dumps(answers))
            return _fail(
                500, "Internal error", ErrorCode.INTERNAL_ERROR, request_id=requests[0]["id"]
            )

    def _is_modern(self, request: HttpRequest, obj: Any) -> bool:
        if not self._legacy_versions:
            return True
        if not self._modern_versions:
            return False
        version = request.header(MCP_PROTOCOL_VERSION)
        if version is not None and version not in REVISIONS:
            return True  # unknown: answer as a modern server would (-32022 lists ours)
        if version is not None and REVISIONS[version].era is Era.MODERN:
            return True
        params = obj.get("params") if type(obj) is dict else None
        meta = params.get("_meta") if type(params) is dict else None
        return type(meta) is dict and PROTOCOL_VERSION_KEY in meta

    # ------------------------------------------------------------------ modern

    def _modern_headers_error(self, request: HttpRequest, msg: Request) -> ErrorData | None:
        def mismatch(message: str) -> ErrorData:
            return ErrorData(code=ErrorCode.HEADER_MISMATCH, message=f"Header mismatch: {message}")

        def unsupported() -> ErrorData:
            return ErrorData(
                code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                message="Unsupported protocol version",
                data={"supported": supported, "requested": version},
            )

        version = request.header(MCP_PROTOCOL_VERSION)
        supported = list(self._modern_versions + self._legacy_versions)
        meta = (msg.params or {}).get("_meta")
        claimed = meta.get(PROTOCOL_VERSION_KEY) if type(meta) is dict else None
        if version is not None and version not in supported and claimed in (None, version):
            # streamable-http.mdx#protocol-version-header: a version we do not implement
            # is -32022 listing ours, before any rule of this revision is applied to the
            # request: a client of a later revision learns what to retry with, and a
            # legacy client's initialize learns what this server speaks (versioning.mdx).
            # A body that claims another version is a header mismatch first (-32020).
            return unsupported()
        if msg.method != "initialize" and (
            type(meta) is not dict
            or type(meta.get(PROTOCOL_VERSION_KEY)) is not str
            or type(meta.get(CLIENT_CAPABILITIES_KEY)) is not dict
        ):
            # The envelope rung of the ladder comes first (basic/versioning.mdx): a
            # request without its _meta (or with a required field that is no string,
            # no object) is malformed, invalid params at 400 (basic/index.mdx#_meta),
            # whatever its headers say.
            return ErrorData(
                code=ErrorCode.INVALID_PARAMS,
                message=f"Invalid params: _meta must carry {PROTOCOL_VERSION_KEY!r} (a string)"
                f" and {CLIENT_CAPABILITIES_KEY!r} (an object)",
            )
        if version is None:
            if msg.method == "initialize":
                return ErrorData(
                    code=ErrorCode.HEADER_MISMATCH,
                    message="Missing MCP-Protocol-Version header; this server speaks only "
                    + ", ".join(self._modern_versions)
                    + " (no initialize)",
                    data={"supported": supported},
                )
            return mismatch("missing required header MCP-Protocol-Version")
        method = request.header(MCP_METHOD)
        if method is None:
            return mismatch("missing required header Mcp-Method")
        if method != msg.method:
            return mismatch(
                f"Mcp-Method header value {method!r} does not match body value {msg.method!r}"
            )
        if claimed != version:
            return mismatch(
                f"MCP-Protocol-Version header value {version!r} does not match "
                f"body value {claimed!r}"
            )
        if version not in self._modern_versions:
            return unsupported()
        key = MCP_NAME_KEYS.get(msg.method)
        params = msg.params or {}
        if key is not None:
            raw = request.header(MCP_NAME)
            if raw is None:
                return mismatch("missing required header Mcp-Name")
            name = decode_header_value(raw)
            if name is None:
                return mismatch("Mcp-Name header value has invalid characters or encoding")
            if name != params.get(key):
                return mismatch(
                    f"Mcp-Name header value {name!r} does not match body value {params.get(key)!r}"
                )
        lookup = self.config.tool_header_params
        tool = params.get("name")
        if msg.method == "tools/call" and lookup is not None and type(tool) is str:
            arguments = params.get("arguments")
            for param in lookup(tool):
                raw = request.header(param.header)
                value = param.value_in(arguments)
                if raw is None:
                    if value is not None:
                        return mismatch(
                            f"missing header Mcp-Param-{param.name} for a value in the body"
                        )
                    continue
                decoded = decode_header_value(raw)
                if decoded is None:
                    return mismatch(
                        f"Mcp-Param-{param.name} header value has invalid characters or encoding"
                    )
                if value is None or not header_value_matches(decoded, value):
                    return mismatch(
                        f"Mcp-Param-{param.name} header value {decoded!r} does not match "
                        f"body value {value!r}"
                    )
        return None

    def _modern_post(
        self,
        request: HttpRequest,
        obj: Any,
        now: float,
        principal: str | None,
        who: Principal | None = None,
    ) -> Reply:
        if type(obj) is list:
            return Reply(
                decision=_fail(
                    400, "Invalid Request: batches are not allowed in protocol version 2026-07-28"
                )
            )
        msg = classify(obj)
        if isinstance(msg, Invalid):
            return Reply(decision=_fail(400, msg.error.message, msg.error.code, request_id=msg.id))
        if isinstance(msg, Response | ErrorResponse):
            return Reply(
                decision=_fail(
                    400, "Invalid Request: clients send no responses in protocol version 2026-07-28"
                )
            )
        if isinstance(msg, Notification):
            return Reply(decision=HttpResponse(status=202))
        problem = self._modern_headers_error(request, msg)
        if problem is not None:
            return Reply(decision=json_response(400, error_body(problem, msg.id)))
        hook = self.config.required_scopes
        checked: dict[RequestId, frozenset[str]] = {}
        if hook is not None and who is not None:  # (else nothing to check: no call)
            scoped = self._scope_refusal(who, hook, (obj,), batch=False)
            if isinstance(scoped, HttpResponse):
                return Reply(decision=scoped)
            checked = scoped
        if len(self._modern) >= self.config.max_modern_requests:
            return Reply(
                decision=_fail(
                    503,
                    "Service Unavailable: too many requests in progress",
                    ErrorCode.INTERNAL_ERROR,
                    request_id=msg.id,
                    headers=RETRY_SOON,
                )
            )
        conn = Connection("server", self.connection_config, principal=principal, routing=True)
        core_events = conn.receive_message(request.body, now=now, decoded=obj)
        out = conn.messages_to_send()
        rid = msg.id
        if conn.request_era(rid) is None:  # answered at once (discover, errors)
            payload = out[-1][0]
            events = tuple(
                ServerEvent(event=e, connection=conn, session_id=None, stream_id=None)
                for e in core_events
            )
            return Reply(
                decision=json_response(_status_for(payload, Era.MODERN), payload), events=events
            )
        key = self._new_id()
        listen = msg.method == SUBSCRIPTIONS_LISTEN_METHOD
        mode = "sse" if listen else self._mode(msg.method, Era.MODERN)
        stream = _Stream(
            key=key,
            conn=conn,
            session=None,
            mode="json" if mode == "json" else "lazy",
            pending={rid},
            request_id=rid,
            handle=key,
            # A listen's stream opens at once; the rest at their first message, so that an
            # error answered before it still has its HTTP status (-32021: "On HTTP, the
            # response status MUST be 400", 2026-07-28/basic/index.mdx).
            opened=listen,
            subscription=listen,
            answer_as_sse=mode == "sse",
        )
        self._modern[key] = stream
        self._handles[key] = stream
        self._owners[conn] = stream
        for payload, _ in out:
            self._route_modern(stream, payload)
        events = tuple(
            ServerEvent(
                event=e,
                connection=conn,
                session_id=None,
                stream_id=key,
                needed_scopes=_needed(e, checked),
            )
            for e in core_events
        )
        buf = self._out.pop(key, None)
        if stream.opened:
            data = bytes(buf.data) if buf is not None else b""
            return Reply(
                decision=OpenStream(stream_id=key, headers=_SSE_HEADERS, data=data), events=events
            )
        return Reply(decision=AwaitResponse(stream_id=key), events=events)

    def _route_modern(self, stream: _Stream, payload: bytes) -> None:
        rid = stream.request_id
        assert rid is not None and stream.pending  # finished streams have no owner any more
        key = stream.key
        if _is_response_to(payload, rid):
            stream.pending.clear()
            buf = self._buf(key)
            status = 200 if stream.opened else _status_for(payload, Era.MODERN)
            if stream.answer_as_sse and status == 200 and not stream.opened:
                stream.opened = True
                buf.start = _SSE_HEADERS
            if stream.opened:
                buf.data += encode_sse_event(payload)
                buf.end = True
            else:
                buf.response = json_response(status, payload)
            self._modern.pop(key, None)
            self._owners.pop(stream.conn, None)
            stream.handle = None
            return
        if stream.mode == "json":
            return  # nowhere to send a notification in a single JSON answer
        buf = self._buf(key)
        if not stream.opened:
            stream.opened = True
            buf.start = _SSE_HEADERS
        buf.data += encode_sse_event(payload)

    # ------------------------------------------------------------------ legacy POST

    def _legacy_version_error(self, request: HttpRequest) -> HttpResponse | None:
        version = request.header(MCP_PROTOCOL_VERSION)
        if version is None or version in self._legacy_versions:
            return None
        if request.method != "POST" and version in self._modern_versions:
            # A modern client's GET or DELETE: the modern era has neither (405). To a
            # legacy-only server a modern version is just unsupported (400, below).
            return HttpResponse(status=405, headers=((b"allow", b"POST"),))
        return _fail(
            400,
            f"Bad Request: unsupported MCP-Protocol-Version {version!r} "
            f"(supported: {', '.join(self._legacy_versions)})",
        )

    def _session_for(
        self, request: HttpRequest, now: float, principal: str | None
    ) -> _Session | HttpResponse:
        sid = request.header(MCP_SESSION_ID)
        if sid is None:
            return _fail(
                400, "Bad Request: Mcp-Session-Id header is required (send initialize first)"
            )
        session = self._sessions.get(sid)
        if session is None or session.principal != principal:
            # Another principal's session is unknown to this one: the same 404, so that
            # a guessed or stolen id reveals nothing (2025-11-25 security best practices,
            # "Session Hijacking": bind session ids to the user).
            return _fail(404, "Not Found: no such session (it may have expired); initialize again")
        self._touch(session, now)
        return session

    def _legacy_post(
        self,
        request: HttpRequest,
        obj: Any,
        now: float,
        principal: str | None,
        who: Principal | None = None,
    ) -> Reply:
        problem = self._legacy_version_error(request)
        if problem is not None:
            return Reply(decision=problem)
        batch = type(obj) is list
        items: list[Any] = obj if batch else [obj]
        initialize = any(
            type(i) is dict and i.get("method") == "initialize" and "id" in i for i in items
        )
        if initialize and not batch and request.header(MCP_SESSION_ID) is None:
            return self._initialize(request, obj, now, principal)
        found = self._session_for(request, now, principal)
        if isinstance(found, HttpResponse):
            return Reply(decision=found)
        session = found
        if batch:
            version = session.conn.protocol_version
            why = None
            if version is None or not REVISIONS[version].batching:
                why = "batches are allowed only in protocol version 2025-03-26"
            elif not items:
                why = "empty batch"
            elif len(items) > session.conn.config.max_batch_size:
                why = f"batch larger than {session.conn.config.max_batch_size}"
            elif initialize:
                why = "initialize cannot be part of a batch"
            if why is not None:
                refused = _fail(400, f"Invalid Request: {why}")
                if initialize or not any(_is_answer(item) for item in items):
                    return Reply(decision=refused)
                return self._refused_batch(session, request, obj, refused, now)
        hook = self.config.required_scopes
        checked: dict[RequestId, frozenset[str]] = {}
        if hook is not None and who is not None:  # (else nothing to check: no call)
            requests = [item for item in items if _is_request(item)]
            scoped = self._scope_refusal(who, hook, requests, batch) if requests else checked
            if isinstance(scoped, HttpResponse):
                return self._refused_post(session, request, scoped, items, now)
            checked = scoped
        return self._feed_session(session, request, items, batch, now, checked)

    def _refused_batch(
        self,
        session: _Session,
        request: HttpRequest,
        batch: list[Any],
        refused: HttpResponse,
        now: float,
    ) -> Reply:
        """Answer ``refused`` (400: a batch the session's revision does not allow, or
        too large), and let the core refuse it too, by the same rule: it ends each
        request of ours that the batch answers (-32603), as over stdio, where the
        request would otherwise wait for an answer that already came. What the core
        would send back (-32600, id null) is what ``refused`` says: dropped."""
        conn = session.conn
        self._drain(conn)  # anything queued before belongs to earlier requests
        core_events = conn.receive_message(request.body, now=now, decoded=batch)
        conn.messages_to_send()  # (the -32600 of the refusal: in ``refused``)
        return Reply(
            decision=refused,
            events=tuple(
                ServerEvent(event=e, connection=conn, session_id=session.id, stream_id=None)
                for e in core_events
            ),
        )

    def _refused_post(
        self,
        session: _Session,
        request: HttpRequest,
        refused: HttpResponse,
        items: list[Any],
        now: float,
    ) -> Reply:
        """Answer ``refused`` (a scope refusal of the requests of ``items``), and feed
        the session the rest: the batch's answers (to our requests) and notifications
        still reach it, else a server request would hang, and what the core answers
        of it (an invalid element) joins the refusal's array (one POST, one body;
        a batch's answers may come in any order, JSON-RPC 2.0 §6)."""
        others = [item for item in items if not _is_request(item)]
        if not others:
            return Reply(decision=refused)
        fed = self._feed_session(session, request, others, True, now, {})  # (no request)
        decision = fed.decision
        # (Only requests open a stream, and none was fed.)
        assert isinstance(decision, HttpResponse), decision
        if decision.status == 200:  # the core answered some of them: a JSON array
            assert refused.body.startswith(b"[{") and decision.body.startswith(b"[{")
            body = refused.body[:-1] + b"," + decision.body[1:]
            refused = attrs.evolve(refused, body=body)
        return Reply(decision=refused, events=fed.events)

    def _initialize(
        self, request: HttpRequest, obj: Any, now: float, principal: str | None
    ) -> Reply:
        quota = self.config.max_sessions_per_principal
        at_quota = False
        if (
            principal is not None
            and quota is not None
            and self._count_of.get(principal, 0) >= quota
        ):
            if not self._idle_of.get(principal):
                return Reply(
                    decision=_fail(
                        429,
                        "Too Many Requests: too many sessions for this caller",
                        ErrorCode.INTERNAL_ERROR,
                        headers=RETRY_SOON,
                    )
                )
            at_quota = True
        if len(self._sessions) >= self.config.max_sessions and self._evictable(principal) is None:
            return Reply(
                decision=_fail(
                    503,
                    "Service Unavailable: too many sessions",
                    ErrorCode.INTERNAL_ERROR,
                    headers=RETRY_SOON,
                )
            )
        conn = Connection("server", self.connection_config, principal=principal, routing=True)
        core_events = conn.receive_message(request.body, now=now, decoded=obj)
        payload = conn.messages_to_send()[-1][0]
        if conn.lifecycle is not LifecycleState.ANSWERED:
            return Reply(
                decision=json_response(_status_for(payload, Era.LEGACY), payload),
                events=tuple(
                    ServerEvent(event=e, connection=conn, session_id=None, stream_id=None)
                    for e in core_events
                ),
            )
        evicted: list[HttpServerEvent] = []
        if at_quota or len(self._sessions) >= self.config.max_sessions:
            # At its quota, the caller's own idle session goes (checked above that one
            # exists); in a full table, _evictable prefers the caller's own too.
            victim = self._evictable(principal)
            assert victim is not None
            self._close_session(victim, "evicted", evicted)
        sid = self._mint_session_id()
        key = self._new_id()
        standalone = _Stream(key=key, conn=conn, session=None, mode="sse")
        self._order += 1
        session = _Session(
            id=sid,
            conn=conn,
            standalone=standalone,
            last_active=now,
            order=self._order,
            principal=principal,
        )
        standalone.session = session
        self._sessions[sid] = session
        if principal is not None:
            self._count_of[principal] = self._count_of.get(principal, 0) + 1
        self._set_idle(session)
        conn._on_arm = functools.partial(self._watched.__setitem__, sid, session)
        self._owners[conn] = session
        events: tuple[HttpServerEvent, ...] = (
            *evicted,
            SessionCreated(session_id=sid, connection=conn),
            *(
                ServerEvent(event=e, connection=conn, session_id=sid, stream_id=None)
                for e in core_events
            ),
        )
        headers = ((MCP_SESSION_ID.encode(), sid.encode()),)
        return Reply(decision=json_response(200, payload, headers), events=events)

    def _mint_session_id(self) -> str:
        for _ in range(3):
            sid = self._session_id_factory()
            if type(sid) is not str or not sid or any(ord(c) not in _ASCII_VISIBLE for c in sid):
                raise LocalProtocolError(f"session id factory returned {sid!r}: not visible ASCII")
            if sid not in self._sessions:
                return sid
        raise LocalProtocolError("session id factory keeps returning ids already in use")

    def _feed_session(
        self,
        session: _Session,
        request: HttpRequest,
        items: list[Any],
        batch: bool,
        now: float,
        checked: Mapping[RequestId, frozenset[str]],
    ) -> Reply:
        conn = session.conn
        self._drain(conn)  # anything queued before belongs to earlier requests
        core_events: list[Event] = []
        has_request = False
        for item in items:
            has_request = has_request or (type(item) is dict and "method" in item and "id" in item)
            if batch:  # each element alone: its answer is routed to this POST by its id
                core_events.extend(conn.receive_decoded(item, now=now))
            else:  # the body is this one message, parsed once (decoded)
                core_events.extend(conn.receive_message(request.body, now=now, decoded=item))
        # During the feed the core only answers this body (errors, ping, setLevel, ...).
        answered = [payload for payload, _ in conn.messages_to_send()]
        # In order: a cancellation after its request in this body ends a request that has
        # no stream yet; one before it (or alone) ends a request of an earlier POST.
        received: dict[RequestId, str] = {}  # id -> method, in the order received
        for e in core_events:
            if isinstance(e, _RequestReceived):
                received[e.request_id] = e.method
            elif isinstance(e, RequestCancelled) and received.pop(e.request_id, None) is None:
                self._cancel_legacy(session, e.request_id)
        key = self._new_id() if received else None
        events = tuple(
            ServerEvent(
                event=e,
                connection=conn,
                session_id=session.id,
                stream_id=key
                if isinstance(e, _RequestReceived) and e.request_id in received
                else None,
                needed_scopes=_needed(e, checked),
            )
            for e in core_events
        )
        if not received:
            if answered:
                if batch:
                    body = b"[" + b",".join(answered) + b"]"
                    return Reply(decision=json_response(200, body), events=events)
                payload = answered[0]
                return Reply(
                    decision=json_response(_status_for(payload, Era.LEGACY), payload), events=events
                )
            invalid = [e for e in core_events if isinstance(e, InvalidMessageReceived)]
            if invalid and not has_request:
                return Reply(
                    decision=json_response(400, error_body(invalid[0].error)), events=events
                )
            return Reply(decision=HttpResponse(status=202), events=events)
        assert key is not None
        mode = self._mode(next(iter(received.values())), Era.LEGACY)
        stream = _Stream(
            key=key,
            conn=conn,
            session=session,
            mode="json" if mode == "json" else "sse",
            pending=set(received),
            batch=batch,
            opened=mode != "json",
        )
        session.streams[key] = stream
        for rid in received:
            session.by_request[rid] = stream
        self._attach(stream, key)
        if stream.mode == "json":
            stream.parts.extend(answered)
            return Reply(decision=AwaitResponse(stream_id=key), events=events)
        # A new stream's first id, which no event of it reuses (_record counts from 1).
        data = bytearray(
            encode_sse_event(b"", id=f"{key}:0", retry=self.config.retry_ms)
            if _primes(session)
            else b""
        )
        for payload in answered:
            data += self._record(stream, payload)
        stream.delivered = stream.seq
        return Reply(
            decision=OpenStream(stream_id=key, headers=_SSE_HEADERS, data=bytes(data)),
            events=events,
        )

    def _mode(self, method: str, era: Era) -> ResponseMode:
        mode = self.config.response_mode
        return mode(method, era) if callable(mode) else mode

    # ------------------------------------------------------------------ legacy GET / DELETE

    def _get(self, request: HttpRequest, now: float, principal: str | None) -> Decision:
        problem = self._legacy_version_error(request)
        if problem is not None:
            return problem
        found = self._session_for(request, now, principal)
        if isinstance(found, HttpResponse):
            return found
        session = found
        self._drain(session.conn)  # so the backlog and the replay are complete
        last = request.header(LAST_EVENT_ID)
        if last is not None:
            return self._resume(session, last)
        if not self.config.standalone_stream:
            return HttpResponse(status=405, headers=((b"allow", self._allow),))
        stream = session.standalone
        handle = self._new_id()
        data = bytearray()
        for seq, payload in self._store.replay(session.id, stream.key, stream.delivered) or ():
            data += encode_sse_event(payload, id=f"{stream.key}:{seq}")
        if _primes(session):
            data += self._prime(stream)
        stream.delivered = stream.seq
        self._attach(stream, handle)
        return OpenStream(stream_id=handle, headers=_SSE_HEADERS, data=bytes(data))

    def _resume(self, session: _Session, last: str) -> Decision:
        key_text, _, position = last.partition(":")
        seq_text, dot, priming = position.partition(".")  # <seq>.<n>: a priming event
        key, after = _decimal(key_text), _decimal(seq_text)
        if key is None or after is None or after > _MAX_SEQ or (dot and _decimal(priming) is None):
            return _fail(400, f"Bad Request: malformed Last-Event-ID {last!r}")
        live = session.standalone if key == session.standalone.key else session.streams.get(key)
        if live is not None and live.mode == "json":
            live = None
        if live is not None and after > live.seq:
            return _fail(400, f"Bad Request: Last-Event-ID {last!r} was never sent")
        events = self._store.replay(session.id, key, after)
        if live is None and events is None:
            return _fail(410, f"Gone: the events after {last!r} are no longer held")
        held = list(events or ())
        expected_last = live.seq if live is not None else (held[-1][0] if held else after)
        if [seq for seq, _ in held] != list(range(after + 1, expected_last + 1)):
            return _fail(410, f"Gone: some events after {last!r} are no longer held")
        data = bytearray()
        for seq, payload in held:
            data += encode_sse_event(payload, id=f"{key}:{seq}")
        handle = self._new_id()
        if live is None:  # an ended stream: its events, then the end (nothing to prime)
            if key in session.undelivered:  # (delivered now: see _keep_ended)
                del session.undelivered[key]
                self._keep_ended(session, key, delivered=True)
            return OpenStream(stream_id=handle, headers=_SSE_HEADERS, data=bytes(data), end=True)
        if _primes(session):
            data += self._prime(live)
        if live is session.standalone:
            live.delivered = live.seq
        self._attach(live, handle)
        return OpenStream(stream_id=handle, headers=_SSE_HEADERS, data=bytes(data))

    def _delete(self, request: HttpRequest, now: float, principal: str | None) -> Reply:
        problem = self._legacy_version_error(request)
        if problem is not None:
            return Reply(decision=problem)
        found = self._session_for(request, now, principal)
        if isinstance(found, HttpResponse):
            return Reply(decision=found)
        events: list[HttpServerEvent] = []
        self._close_session(found, "deleted", events)
        return Reply(decision=HttpResponse(status=204), events=tuple(events))

    # ------------------------------------------------------------------ legacy streams

    def _prime(self, stream: _Stream) -> bytes:
        """The priming event (an id, empty data, ``retry``) of a stream opened again
        (GET, resumption), after what it replays. Event ids MUST be unique across the
        session's streams (``2025-11-25/basic/transports#resumability-and-redelivery``),
        so its id is the stream's position and a suffix counted per session,
        ``<stream>:<seq>.<n>``: resuming from it is resuming from ``<stream>:<seq>``.
        Nothing is stored for it (the event store holds messages only)."""
        session = stream.session
        assert session is not None
        session.primings += 1
        return encode_sse_event(
            b"",
            id=f"{stream.key}:{stream.seq}.{session.primings}",
            retry=self.config.retry_ms,
        )

    def _record(self, stream: _Stream, payload: bytes) -> bytes:
        session = stream.session
        assert session is not None
        stream.seq += 1
        self._store.append(session.id, stream.key, stream.seq, payload)
        return encode_sse_event(payload, id=f"{stream.key}:{stream.seq}")

    def _attach(self, stream: _Stream, handle: int) -> None:
        session = stream.session
        assert session is not None
        if stream.handle is not None:
            self._buf(stream.handle).end = True  # a newer response replaces the stale one
        stream.handle = handle
        self._handles[handle] = stream
        session.handles.add(handle)
        self._unset_idle(session)

    def _route_session(self, session: _Session, payload: bytes, related: RequestId | None) -> None:
        stream = session.by_request.get(related) if related is not None else None
        if stream is not None:
            assert related is not None
            final = _is_response_to(payload, related)
            if final or stream.mode != "json":
                if final:
                    del session.by_request[related]
                    stream.pending.discard(related)
                if stream.mode == "json":
                    stream.parts.append(payload)
                else:
                    event = self._record(stream, payload)
                    if stream.handle is not None:
                        self._buf(stream.handle).data += event
                if final and not stream.pending:
                    self._finish_legacy(stream)
                return
        if not self.config.standalone_stream:
            return
        standalone = session.standalone
        event = self._record(standalone, payload)
        if standalone.handle is not None:
            self._buf(standalone.handle).data += event
            standalone.delivered = standalone.seq

    def _cancel_legacy(self, session: _Session, rid: RequestId) -> None:
        # The core reports a cancellation only for a request in flight, and every request
        # in flight in a session was registered when its POST arrived.
        stream = session.by_request.pop(rid)
        stream.pending.discard(rid)
        if not stream.pending:
            self._finish_legacy(stream)

    def _finish_legacy(self, stream: _Stream) -> None:
        session = stream.session
        assert session is not None
        session.streams.pop(stream.key, None)
        handle = stream.handle
        if stream.seq:  # (events of it went to the store)
            self._keep_ended(session, stream.key, delivered=handle is not None)
        stream.handle = None
        if handle is None:
            return
        buf = self._buf(handle)
        if stream.mode == "sse":
            buf.end = True
        elif not stream.parts:
            # Every request of it was cancelled, and a cancelled request gets no answer
            # (cancellation.mdx), yet a POST of requests MUST be answered as JSON or as
            # an event stream (transports.mdx, sending messages): an empty stream.
            buf.response = HttpResponse(status=200, headers=_SSE_HEADERS)
        elif stream.batch:
            buf.response = json_response(200, b"[" + b",".join(stream.parts) + b"]")
        else:
            buf.response = json_response(_status_for(stream.parts[0], Era.LEGACY), stream.parts[0])

    def _keep_ended(self, session: _Session, key: int, *, delivered: bool) -> None:
        """The stream ``key`` of ``session`` ended, its events in the store: they stay
        for a resumption (a client that lost the final answer asks for it again with
        ``Last-Event-ID``), but only for the last :attr:`HttpServerConfig.max_ended_streams`
        streams of the session to end with events stored (only those are counted: see
        :meth:`_finish_legacy`); the oldest beyond is discarded from the store.
        Counted in streams, not time: the core has no clock, and a client resumes within
        the ``retry`` it was told, while a few more of its calls end at most.

        ``delivered``: its end went to a connection. One that ended with none attached
        (its connection broke, or was released) is the one its client will come back
        for: counted apart, with a bound of its own (the same number), so that a busy
        session's answers, delivered meanwhile, cannot push it out before the client's
        ``retry`` is over; once replayed whole (:meth:`_resume`) it counts as delivered."""
        discard = self._discard_stream
        if discard is None:
            return  # (the store keeps them until the session ends, or its own bounds)
        kept = session.ended if delivered else session.undelivered
        kept[key] = None
        while len(kept) > self.config.max_ended_streams:
            oldest = next(iter(kept))
            del kept[oldest]
            discard(session.id, oldest)

    # ------------------------------------------------------------------ sessions

    def _touch(self, session: _Session, now: float) -> None:
        session.last_active = max(session.last_active, now)
        self._sessions.move_to_end(session.id)
        self._order += 1
        session.order = self._order
        if not session.handles:
            self._set_idle(session)

    def _set_idle(self, session: _Session) -> None:
        """``session`` has no response in progress: it is the most recent idle one."""
        self._idle[session.id] = session
        self._idle.move_to_end(session.id)
        if session.principal is not None:
            own = self._idle_of.setdefault(session.principal, OrderedDict())
            own[session.id] = session
            own.move_to_end(session.id)

    def _unset_idle(self, session: _Session) -> None:
        self._idle.pop(session.id, None)
        if session.principal is not None and (own := self._idle_of.get(session.principal)):
            own.pop(session.id, None)
            if not own:
                del self._idle_of[session.principal]

    def _evictable(self, principal: str | None = None) -> _Session | None:
        """The session a new one replaces in a full table: the least recently used idle
        one, the caller's own first when callers are authenticated, so that a principal
        cannot push the others' sessions out while it has idle ones of its own."""
        if principal is not None and (own := self._idle_of.get(principal)):
            return next(iter(own.values()))
        return next(iter(self._idle.values()), None)

    def _refresh_timer(self, session: _Session) -> None:
        """Make the session's ``_timers`` entry match its connection's deadline."""
        deadline = session.conn.next_deadline()
        if deadline != session.deadline:
            self._set_timer(session, deadline)

    def _set_timer(self, session: _Session, deadline: float | None) -> None:
        session.deadline = deadline
        if deadline is None:
            session.timer_token = 0
            return
        self._timer_token += 1
        session.timer_token = token = self._timer_token
        timers = self._timers
        heapq.heappush(timers, (deadline, token, session.id))
        if len(timers) > 2 * len(self._sessions) + 64:
            # Mostly stale entries: rebuild. It costs less than the entries it drops,
            # each pushed once, so this is O(1) amortised per push.
            timers[:] = [
                (s.deadline, s.timer_token, s.id)
                for s in self._sessions.values()
                if s.deadline is not None
            ]
            heapq.heapify(timers)

    def _next_timer(self) -> _Session | None:
        """The session whose connection's deadline comes first, its entry checked."""
        timers = self._timers
        while timers:
            deadline, token, sid = timers[0]
            session = self._sessions.get(sid)
            if session is None or session.timer_token != token:
                heapq.heappop(timers)
            elif (moved := session.conn.next_deadline()) != deadline:
                self._set_timer(session, moved)  # it moved later unseen; look again
            else:
                return session
        return None

    def _close_session(
        self,
        session: _Session,
        reason: Any,
        events: list[HttpServerEvent],
        fail_inflight: tuple[int, str] | None = None,
    ) -> None:
        conn = session.conn
        for e in conn.receive_eof(fail_inflight=fail_inflight):
            events.append(
                ServerEvent(event=e, connection=conn, session_id=session.id, stream_id=None)
            )
        if fail_inflight is not None:
            self._drain(conn)  # the errors, each to its request's stream
        for handle in session.handles:
            stream = self._handles.pop(handle)
            if stream.handle != handle:
                continue
            buf = self._buf(handle)
            if stream.mode == "json":
                buf.response = _fail(404, "Not Found: the session ended")
            else:
                buf.end = True
        session.handles.clear()
        self._store.discard_session(session.id)
        del self._sessions[session.id]
        if (principal := session.principal) is not None:
            left = self._count_of[principal] - 1
            if left:
                self._count_of[principal] = left
            else:
                del self._count_of[principal]
        self._unset_idle(session)
        self._watched.pop(session.id, None)
        conn._on_arm = None
        session.deadline = None
        session.timer_token = 0
        self._owners.pop(conn, None)
        events.append(SessionClosed(session_id=session.id, reason=reason))

    # ------------------------------------------------------------------ output

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _buf(self, handle: int) -> _Buf:
        buf = self._out.get(handle)
        if buf is None:
            buf = self._out[handle] = _Buf()
        return buf

    def _drain(self, conn: Connection) -> None:
        owner = self._owners.get(conn)
        messages = conn.messages_to_send()
        if owner is None:
            return  # a finished request or closed session: nothing may be sent any more
        if isinstance(owner, _Session):
            for payload, related in messages:
                self._route_session(owner, payload, related)
            if self._watched.pop(owner.id, None) is not None:
                self._refresh_timer(owner)  # a timer was armed since (a request of ours)
        else:
            for payload, _ in messages:
                self._route_modern(owner, payload)

    def data_to_send(
        self, *, connection: Connection | None = None, drain_all: bool = True
    ) -> list[Output]:
        """Drain the connections' output and return what to write, per HTTP response.

        Args:
            connection: drain only this connection (cheaper when you know which one a
                handler just used); by default every connection is drained.
            drain_all: with no ``connection``, whether to drain every connection;
                ``False`` only collects what is already routed (enough right after
                :meth:`handle_request` and :meth:`stream_closed`, which drain the
                connections they use, and O(1) in the number of sessions).

        Returns:
            At most one item per response, in no particular order across responses:
            :class:`OpenStream` (an awaited modern response became a stream),
            :class:`StreamData`, or :class:`ResponseReady`.
        """
        if connection is not None:
            self._drain(connection)
        elif drain_all:
            for conn in list(self._owners):
                self._drain(conn)
        if not self._out:
            return []
        out: list[Output] = []
        for handle, buf in self._out.items():
            if buf.response is not None:
                out.append(ResponseReady(stream_id=handle, response=buf.response))
            elif buf.start is not None:
                out.append(
                    OpenStream(
                        stream_id=handle, headers=buf.start, data=bytes(buf.data), end=buf.end
                    )
                )
            else:
                out.append(StreamData(stream_id=handle, data=bytes(buf.data), end=buf.end))
        self._out.clear()
        return out

    def stream_closed(self, stream_id: int, *, now: float) -> list[HttpServerEvent]:
        """The HTTP response ``stream_id`` is over: finished, or the client went away.

        Call it once for every ``stream_id`` a decision or an output carried. For a modern
        request still unanswered this is its cancellation (``2026-07-28`` cancellation):
        the request's connection is closed, a ``RequestCancelled`` is returned for the
        handler, and nothing more is sent for it. For a legacy stream it only detaches:
        disconnection is not cancellation there, events keep going to the store for a
        ``Last-Event-ID`` resumption. An unknown or already closed id is ignored.
        """
        stream = self._handles.pop(stream_id, None)
        self._out.pop(stream_id, None)
        if stream is None:
            return []
        if stream.handle == stream_id:
            stream.handle = None
        session = stream.session
        if session is not None:
            session.handles.discard(stream_id)  # (a closed session dropped its handles)
            self._touch(session, now)
            return []
        return self._cancel_modern(stream, "stream closed")

    def _cancel_modern(self, stream: _Stream, reason: str) -> list[HttpServerEvent]:
        self._modern.pop(stream.key, None)
        self._owners.pop(stream.conn, None)
        if not stream.pending:
            return []
        stream.pending.clear()
        stream.conn.receive_eof()
        if stream.subscription:
            return []
        assert stream.request_id is not None
        return [
            ServerEvent(
                event=RequestCancelled(request_id=stream.request_id, reason=reason),
                connection=stream.conn,
                session_id=None,
                stream_id=stream.key,
            )
        ]

    def release_stream(self, stream_id: int) -> None:
        """Legacy: end the HTTP response ``stream_id`` without ending its SSE stream (polling).

        A ``retry`` field goes out last (:attr:`HttpServerConfig.retry_ms`; none when it
        is ``None``, as in priming events: the client waits its own default), then
        ``end``; the client resumes with GET and ``Last-Event-ID`` (``2025-11-25`` "server
        MAY close the connection"). Still call :meth:`stream_closed` when the response
        is over.

        Raises:
            LocalProtocolError: not an open legacy SSE response (modern streams cannot
                be released: closing one cancels its request).
        """
        stream = self._handles.get(stream_id)
        if (
            stream is None
            or stream.session is None
            or stream.mode != "sse"
            or stream.handle != stream_id
        ):
            raise LocalProtocolError(f"{stream_id} is not an open legacy SSE response")
        self._drain(stream.conn)  # what is already queued goes out before the retry
        buf = self._buf(stream_id)
        if self.config.retry_ms is not None:  # (not 0: "reconnect at once")
            buf.data += b"retry: %d\n\n" % self.config.retry_ms
        buf.end = True
        stream.handle = None

    def is_listen(self, stream_id: int) -> bool:
        """Whether the HTTP response ``stream_id`` serves a modern
        ``subscriptions/listen`` that is still open (a stream that lasts until someone
        ends it: see :meth:`token_expired`)."""
        stream = self._modern.get(stream_id)
        return stream is not None and stream.subscription

    def token_expired(self, stream_id: int) -> bool:
        """The token that authenticated the HTTP response ``stream_id`` when it opened
        has expired (``Principal.expires_at``): end the response if it is a stream
        that would otherwise outlive it, so that the client comes back with a fresh
        token.

        * A legacy SSE response is released resumably (:meth:`release_stream`): the
          client reconnects with ``Last-Event-ID``, and its current token.
        * A modern ``subscriptions/listen`` is answered with the
          :func:`~mcp_sansio.http.token_expired` error (``401``, naming
          :attr:`HttpServerConfig.resource_metadata`'s URL), which ends its stream: the
          client authorizes again and listens again. A result would say the
          subscription is over (``basic/patterns/subscriptions#graceful-closure``),
          and a stream cut without an answer, that the connection was lost.

        Still call :meth:`stream_closed` when the response is over. Drain
        :meth:`data_to_send` afterwards.

        Returns:
            Whether it was ended: ``False`` for a response already over or one that
            ends with its answer anyway (any other request's).
        """
        stream = self._handles.get(stream_id)
        if stream is None or stream.handle != stream_id:
            return False
        if stream.session is not None:
            if stream.mode != "sse":
                return False
            self.release_stream(stream_id)
            return True
        rid = stream.request_id
        if not stream.subscription or rid is None or stream.key not in self._modern:
            return False
        conn = stream.conn
        if rid not in conn.inflight_requests():
            return False  # answered already (a result not yet drained): it ends anyway
        metadata = self.config.resource_metadata
        error = token_expired(
            resource_metadata=None if metadata is None else metadata.url, subscription_id=rid
        )
        conn.send_error(rid, error.code, error.message, error.data)
        self._drain(conn)  # (what was queued before goes out first, in order)
        return True

    # ------------------------------------------------------------------ broadcast, timers, close

    def send_notification(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        sessions: Collection[str] | None = None,
    ) -> int:
        """Send a change notification everywhere it is wanted.

        Legacy sessions that are ready get it (on their GET stream): all of them, or
        only those named in ``sessions`` (``notifications/resources/updated`` goes only
        to the sessions that subscribed to its URI, which the application tracks);
        modern ``subscriptions/listen`` streams whose filter asks for it get it, tagged
        with their subscription id. A session whose negotiated version or our declared
        capabilities do not allow it is skipped.

        Returns:
            How many sessions and subscription streams were sent it. Drain
            :meth:`data_to_send` afterwards.
        """
        sent = 0
        if sessions is None:
            targets = list(self._sessions.values())
        else:
            targets = [s for sid in sessions if (s := self._sessions.get(sid)) is not None]
        for session in targets:
            if session.conn.lifecycle is not LifecycleState.READY:
                continue
            self._drain(session.conn)
            try:
                session.conn.send_notification(method, params)
            except LocalProtocolError:
                continue
            sent += 1
            self._drain(session.conn)
        for stream in list(self._modern.values()):
            if stream.subscription:
                sent += self._notify_stream(stream, method, params)
        return sent

    def send_task_status(self, params: dict[str, Any], *, principal: str | None) -> int:
        """Send a ``notifications/tasks`` (the tasks extension) to the modern
        ``subscriptions/listen`` streams of ``principal`` whose filter names the task:
        another principal's streams never hear of it, whatever they asked for.

        Returns:
            How many streams were sent it. Drain :meth:`data_to_send` afterwards.
        """
        sent = 0
        for stream in list(self._modern.values()):
            if stream.subscription and stream.conn.principal == principal:
                sent += self._notify_stream(stream, TASKS_NOTIFICATION, params)
        return sent

    def _notify_stream(self, stream: _Stream, method: str, params: dict[str, Any] | None) -> bool:
        """Send a notification on a modern ``subscriptions/listen`` stream, after what
        its connection had queued; whether anything went (its filter may not ask: for a
        method no modern filter can name -- a custom one, or legacy-only -- that is no
        error of the broadcast, whose legacy sessions may want it)."""
        self._drain(stream.conn)
        try:
            stream.conn.send_notification(method, params)
        except LocalProtocolError:
            return False
        messages = stream.conn.messages_to_send()
        for payload, _ in messages:
            self._route_modern(stream, payload)
        return bool(messages)

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called, or ``None``."""
        # (Called after every request: no list, and no call for a table that is empty.)
        deadline = None
        timeout = self.config.session_idle_timeout
        if timeout is not None and (idle := self._evictable()) is not None:
            deadline = idle.last_active + timeout  # (the least recently active idle one)
        if self._watched:
            for session in self._watched.values():
                self._refresh_timer(session)
            self._watched.clear()
        first = self._next_timer() if self._timers else None
        if first is not None:
            assert first.deadline is not None
            if deadline is None or first.deadline < deadline:
                deadline = first.deadline
        return deadline

    def handle_timer(self, now: float) -> list[HttpServerEvent]:
        """Close sessions idle for ``session_idle_timeout`` and run the connections' timers."""
        events: list[HttpServerEvent] = []
        timeout = self.config.session_idle_timeout
        if timeout is not None:
            while (idle := self._evictable()) is not None:
                if idle.last_active + timeout > now:
                    break  # least recently active first: the rest are younger
                self._close_session(idle, "expired", events)
        for watched in self._watched.values():
            self._refresh_timer(watched)
        self._watched.clear()
        due: list[_Session] = []
        while (session := self._next_timer()) is not None:
            assert session.deadline is not None
            if session.deadline > now:
                break
            heapq.heappop(self._timers)
            self._set_timer(session, None)
            due.append(session)
        due.sort(key=lambda s: s.order)  # in session order, as a walk of the table would
        for session in due:
            conn = session.conn
            for e in conn.handle_timer(now):
                events.append(
                    ServerEvent(event=e, connection=conn, session_id=session.id, stream_id=None)
                )
            self._refresh_timer(session)
        return events

    def close(self) -> list[HttpServerEvent]:
        """Shut down: end subscriptions gracefully, cancel other modern requests, close
        every session. Drain :meth:`data_to_send` afterwards to finish the responses."""
        events: list[HttpServerEvent] = []
        for stream in list(self._modern.values()):
            conn, rid = stream.conn, stream.request_id
            assert rid is not None
            self._drain(conn)  # what is queued goes out first: an answer ends the stream
            if stream.key not in self._modern:
                continue
            if stream.subscription:
                conn.end_subscription(rid, notify=False)  # (the stream's close ends it)
                self._drain(conn)
                continue
            if stream.opened and rid in conn.inflight_requests():
                # An event stream under way: its last event says why it ends (one that
                # just ends reads as a lost connection); the handler is cancelled.
                conn.receive_eof(fail_inflight=SHUTTING_DOWN)
                self._drain(conn)
                cancelled = RequestCancelled(request_id=rid, reason=SHUTTING_DOWN[1])
                events.append(
                    ServerEvent(
                        event=cancelled, connection=conn, session_id=None, stream_id=stream.key
                    )
                )
                continue
            events.extend(self._cancel_modern(stream, SHUTTING_DOWN[1]))
            buf = self._buf(stream.key)  # a modern stream's handle is its key
            if stream.opened:
                buf.end = True
            else:
                # The same words as every other transport's (and either era's) answer.
                buf.response = _fail(503, SHUTTING_DOWN[1], SHUTTING_DOWN[0], request_id=rid)
        for session in list(self._sessions.values()):
            # Every request gets one answer: a stream that just ended would send the
            # client resuming (SSE) or restarting its session (JSON 404) against a server
            # going away. The handlers are abandoned (ConnectionClosed) as before.
            self._close_session(session, "shutdown", events, SHUTTING_DOWN)
        return events

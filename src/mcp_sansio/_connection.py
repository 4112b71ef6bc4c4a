"""The one stateful class of the core: an MCP connection on a message channel.

Theory of operation
-------------------
A :class:`Connection` sits between a message channel (stdio, WebSocket, memory; one
JSON-RPC message per frame) and the application. It plays the client role or the
server role. Input arrives through ``receive_message`` (one JSON text),
``receive_bytes`` (a newline-delimited byte stream) and ``receive_eof``; each returns
the :mod:`events <mcp_sansio._events>` it produced. Output collects in one queue the
driver drains with ``data_to_send`` / ``bytes_to_send`` after *every* call, because
the core sometimes answers on its own (parse errors, ``ping``, ``initialize``,
``server/discover``, capability refusals).

There is no clock: every call that may start or reset a timer takes ``now`` (seconds,
any monotonic origin), ``next_deadline()`` says when to call ``handle_timer(now)``.

Four tables hold all per-request state, each with a bound:

* ``_pending``: our requests awaiting an answer (``max_pending_requests``);
* ``_inflight``: the peer's requests awaiting our answer (``max_inflight_requests``);
* ``_finished_out`` / ``_cancelled_in``: recently finished ids, remembered
  (``remembered_ids``) so that late and duplicate answers are recognised and dropped;
* ``_subscriptions``: modern ``subscriptions/listen`` streams we serve.

One answer per request, exactly: an answer the application gives for a request the
peer cancelled is dropped; a response for a request we cancelled or timed out is
dropped (and reported as :class:`ResponseIgnored`); closing lists every request that
will never be answered.

Eras (``2026-07-28/basic/versioning.mdx``): a server decides per request. A request
whose ``_meta`` carries ``io.modelcontextprotocol/protocolVersion`` is served
statelessly in the modern era; ``initialize`` starts a legacy session; the two never
mix on one request. A client probes with ``server/discover`` and falls back to
``initialize``, unless the era is pinned.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final, Literal, final

import attrs

from . import _modern
from ._config import ConnectionConfig, Role
from ._errors import ErrorCode, ErrorData, LocalProtocolError
from ._events import (
    ConnectionClosed,
    ErrorReceived,
    Event,
    HandshakeCompleted,
    InputRequired,
    InvalidMessageReceived,
    NotificationReceived,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    RequestTimedOut,
    ResponseIgnored,
    ResultReceived,
    SubscriptionNotificationReceived,
    new_request_received,
    new_result_received,
)
from ._framing import LineSplitter, MessageTooLarge
from ._json import JSONDecodeError, dumps, loads
from ._jsonrpc import (
    JSONRPC,
    ErrorResponse,
    Invalid,
    RequestId,
    classify,
    error_response,
    is_request_id,
    notification,
    parse_error,
    request,
    result_response,
)
from ._state import (
    PRE_READY_REQUESTS,
    PRE_READY_SERVER_NOTIFICATIONS,
    HandshakeInput,
    LifecycleState,
    transition,
)
from ._versions import REVISIONS, Era, Revision, has_capability

__all__ = ["Connection"]

_LOG_RANK: Final = _modern._LEVEL_RANK  # one table of the log levels, in _modern
_MODERN_REVISION: Final = REVISIONS["2026-07-28"]
# The eras as module constants: reading an Enum member off its class costs a slow
# attribute lookup (~60 ns on CPython 3.11), several times per round trip.
_LEGACY: Final = Era.LEGACY
_MODERN: Final = Era.MODERN
# Requests whose answer moves the handshake: never on the fast path.
_HANDSHAKE_METHODS: Final = frozenset({"initialize", "server/discover"})
# The names the hot paths read, as module constants of their own (an attribute of the
# _modern module costs a second lookup, ~10 of them per modern round trip).
_PROTOCOL_VERSION_KEY: Final = _modern.PROTOCOL_VERSION_KEY
_CLIENT_CAPABILITIES_KEY: Final = _modern.CLIENT_CAPABILITIES_KEY
_CLIENT_INFO_KEY: Final = _modern.CLIENT_INFO_KEY
_LOG_LEVEL_KEY: Final = _modern.LOG_LEVEL_KEY
_PROGRESS_TOKEN_KEY: Final = _modern.PROGRESS_TOKEN_KEY
_SERVER_INFO_KEY: Final = _modern.SERVER_INFO_KEY
_COMPLETE: Final = _modern.RESULT_TYPE_COMPLETE
_CACHEABLE_METHODS: Final = _modern.CACHEABLE_METHODS
_new: Final = object.__new__


# The table entries below are plain slotted classes rather than attrs classes: they
# are private, mutable, and built once per request on the hot path.


class _Req:
    """A request being dispatched (the fast path builds no jsonrpc.Request)."""

    __slots__ = ("id", "method", "params")

    def __init__(self, rid: RequestId, method: str, params: dict[str, Any] | None) -> None:
        self.id = rid
        self.method = method
        self.params = params


class _Outbound:
    """One request of ours awaiting an answer.

    Only what every request has is a slot: the send_request fast path fills the five
    slots inline, with no ``__init__`` frame (see :func:`_outbound`). What only timed,
    progress-watching or input-required requests use lives in the instance ``__dict__``,
    created on first write, and reads as the class default until then.
    """

    __slots__ = ("__dict__", "era", "method", "params", "progress_token", "started")

    method: str
    params: dict[str, Any] | None
    started: float
    progress_token: RequestId | None
    era: Era
    deadline: float | None = None
    last_progress: float | None = None
    request_state: Any = None
    rounds: int = 0
    timeout: float | None = None


def _outbound(
    method: str,
    params: dict[str, Any] | None,
    started: float,
    progress_token: RequestId | None,
    era: Era,
    timeout: float | None = None,
) -> _Outbound:
    entry: _Outbound = _new(_Outbound)
    entry.method = method
    entry.params = params
    entry.started = started
    entry.progress_token = progress_token
    entry.era = era
    if timeout is not None:
        entry.timeout = timeout
    return entry


@attrs.define(slots=True)
class _Batch:
    """An inbound 2025-03-26 batch whose replies are being collected."""

    waiting: set[RequestId]
    replies: list[dict[str, Any]]


def _ids_of(table: Mapping[RequestId, object]) -> tuple[RequestId, ...]:
    return tuple(table)


@final
class Connection:
    """An MCP connection, client or server role, on a message channel.

    Args:
        role: ``"client"`` or ``"server"``.
        config: what we are and our bounds; defaults are documented on
            :class:`ConnectionConfig`.

    Error handling:
        Methods that receive peer input never raise for bad input: it becomes a
        JSON-RPC error on the wire and/or an event. Methods that send raise
        :class:`LocalProtocolError` when the call breaks the protocol, and then change
        no state. Any other exception is a bug.
    """

    def __init__(self, role: Role, config: ConnectionConfig | None = None) -> None:
        if role not in ("client", "server"):
            raise ValueError(f"role must be 'client' or 'server', not {role!r}")
        self.role: Final[Role] = role
        self.config: Final = config if config is not None else ConnectionConfig()
        self._lifecycle = LifecycleState.IDLE
        self._era: Era | None = None
        self._version: str | None = None
        self._peer_capabilities: dict[str, Any] = {}
        self._peer_info: dict[str, Any] | None = None
        self._instructions: str | None = None
        self._next_id = 0
        self._pending: dict[RequestId, _Outbound] = {}
        self._timers: list[tuple[float, int, RequestId]] = []
        self._timer_seq = 0
        self._progress_in: dict[RequestId, RequestId] = {}  # our token -> our request id
        self._finished_out: OrderedDict[RequestId, str] = OrderedDict()
        # The peer's requests awaiting our answer, as delivered: the event is the record.
        self._inflight: dict[RequestId, RequestReceived] = {}
        # What little per-request state an inbound request gathers later, kept aside so
        # that the common request (no progress sent, no modern logLevel) costs no record
        # beyond its event. Entries leave with the request (_forget_inbound).
        self._inbound_progress: dict[RequestId, float] = {}  # last progress we sent
        self._inbound_log_level: dict[RequestId, str] = {}  # modern envelope logLevel
        self._cancelled_in: OrderedDict[RequestId, None] = OrderedDict()
        self._batches: dict[RequestId, _Batch] = {}
        self._awaiting_input: OrderedDict[RequestId, _Outbound] = OrderedDict()
        self._subscriptions: dict[RequestId, _modern.SubscriptionFilter] = {}
        self._listening: set[RequestId] = set()
        self._probe_id: RequestId | None = None
        self._probe_retried = False
        self._log_level: str | None = None
        # Methods that already passed every check of the era that is now settled: the
        # verdicts depend only on the era, the negotiated revision and both sides'
        # capabilities, none of which change afterwards. They let the common case skip
        # the general checks (the fast paths of send_request and receive_message).
        self._send_ok: set[str] = set()  # legacy session READY, or modern client
        self._accept_ok: set[str] = set()  # legacy session READY
        self._modern_accept_ok: set[str] = set()  # modern server, plain requests
        self._closed = False
        # The output queue, as two parallel lists (payloads and the request each belongs
        # to) so that data_to_send hands over the first list without copying.
        self._out: list[bytes] = []
        self._out_ids: list[RequestId | None] = []
        self._splitter = LineSplitter(self.config.max_message_size)
        self._state_codec = (
            _modern.RequestStateCodec(
                self.config.request_state_key, ttl=self.config.request_state_ttl
            )
            if role == "server"
            else None
        )
        supported = self.config.supported_versions
        self._legacy_versions = tuple(v for v in supported if REVISIONS[v].era is _LEGACY)
        self._modern_versions = tuple(v for v in supported if REVISIONS[v].era is _MODERN)
        if self.config.era == "legacy":
            self._modern_versions = ()
        elif self.config.era == "modern":
            self._legacy_versions = ()
        if not self._legacy_versions and not self._modern_versions:
            raise ValueError("no supported version is left for the chosen era")
        # Per-connection constants of the hot path, read once (the config is frozen).
        self._max_message_size = self.config.max_message_size
        self._max_pending = self.config.max_pending_requests
        self._max_inflight = self.config.max_inflight_requests
        self._remembered_ids = self.config.remembered_ids
        # Sending a request needs no timer at all (the fast path of send_request).
        self._untimed = self.config.request_timeout is None and self.config.max_request_time is None
        # Server: whether a request whose _meta names a protocol version is served in
        # the modern era (otherwise it is just a legacy request with odd _meta).
        self._modern_server = role == "server" and bool(
            self._modern_versions or not self._legacy_versions
        )
        # Modern client: the envelope of a plain request, built (and so validated) by
        # _modern.build_request_meta on first use, for _version.
        self._envelope: tuple[str, dict[str, Any]] | None = None
        # Modern server: set once _modern.decorate_result accepted our configured
        # caching hints, which then never change.
        self._hints_ok = False
        # Modern server: the _meta of a plain result, shared by every reply that carries
        # it (replies are serialized, never handed out, so it is never mutated).
        info = self.config.implementation
        self._server_meta = None if info is None else {_SERVER_INFO_KEY: info}

    # ------------------------------------------------------------------ introspection

    @property
    def era(self) -> Era | None:
        """The era in use: fixed by the handshake (legacy) or the probe (client)."""
        return self._era

    @property
    def protocol_version(self) -> str | None:
        """The negotiated (legacy) or chosen (modern client) protocol version."""
        return self._version

    @property
    def lifecycle(self) -> LifecycleState:
        """Where the legacy session is (IDLE for a purely modern channel)."""
        return self._lifecycle

    @property
    def peer_capabilities(self) -> dict[str, Any]:
        """The capabilities the peer declared (empty until known)."""
        return self._peer_capabilities

    @property
    def peer_info(self) -> dict[str, Any] | None:
        """The peer's ``Implementation`` object, once known."""
        return self._peer_info

    @property
    def instructions(self) -> str | None:
        """Client: the server's instructions, once known."""
        return self._instructions

    @property
    def closed(self) -> bool:
        """Whether the input ended or a write failed."""
        return self._closed

    def pending_requests(self) -> tuple[RequestId, ...]:
        """Our requests awaiting an answer, oldest first."""
        return _ids_of(self._pending)

    def inflight_requests(self) -> tuple[RequestId, ...]:
        """The peer's requests awaiting our answer, oldest first."""
        return _ids_of(self._inflight)

    def has_progress_token(self, request_id: RequestId) -> bool:
        """Whether the peer asked for progress on its request ``request_id``."""
        inbound = self._inflight.get(request_id)
        return inbound is not None and inbound.progress_token is not None

    def request_era(self, request_id: RequestId) -> Era | None:
        """The era the peer's in-flight request ``request_id`` is served in."""
        inbound = self._inflight.get(request_id)
        return None if inbound is None else inbound.era

    # ------------------------------------------------------------------ output

    def data_to_send(self) -> list[bytes]:
        """Drain the output queue: one JSON text per message, in order."""
        out = self._out
        self._out = []
        self._out_ids = []
        return out

    def messages_to_send(self) -> list[tuple[bytes, RequestId | None]]:
        """Drain the output queue with routing: each message and the request it belongs to.

        The request id is the peer's request a response/progress/log answers, the
        ``subscriptions/listen`` id of a subscription notification, or the
        ``related_request_id`` given to :meth:`send_request`; ``None`` otherwise.
        HTTP bindings use it to pick the stream.
        """
        out = list(zip(self._out, self._out_ids, strict=True))
        self._out = []
        self._out_ids = []
        return out

    def bytes_to_send(self) -> bytes:
        """Drain the output queue as newline-delimited JSON (stdio framing)."""
        out = self._out
        if not out:
            return b""
        self._out = []
        self._out_ids = []
        return b"\n".join(out) + b"\n"

    def _emit(self, obj: dict[str, Any], related: RequestId | None = None) -> None:
        self._queue(dumps(obj), related)

    def _queue(self, payload: bytes, related: RequestId | None) -> None:
        self._out.append(payload)
        self._out_ids.append(related)

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called, or ``None`` for never."""
        timers = self._timers
        pending = self._pending
        while timers:
            deadline, _, rid = timers[0]
            entry = pending.get(rid)
            if entry is not None and entry.deadline == deadline:
                return deadline
            heapq.heappop(timers)
        return None

    def handle_timer(self, now: float) -> list[Event]:
        """Expire every request whose deadline is at or before ``now``.

        An expired request is cancelled (``notifications/cancelled``, reason
        ``"timeout"``) and reported as :class:`RequestTimedOut`. An expired
        ``server/discover`` probe instead falls back to ``initialize``.
        """
        events: list[Event] = []
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            _, _, rid = heapq.heappop(self._timers)
            entry = self._pending.pop(rid)
            self._forget_out(rid, entry, "late")
            if rid == self._probe_id:
                self._probe_id = None
                self._fall_back_to_initialize(now)
                continue
            if entry.method != "initialize" and not self._closed:
                self._emit(
                    notification(
                        "notifications/cancelled", {"requestId": rid, "reason": "timeout"}
                    ),
                    rid,
                )
            events.append(RequestTimedOut(request_id=rid, method=entry.method))
        return events

    def _arm(self, rid: RequestId, entry: _Outbound, now: float, timeout: float | None) -> None:
        deadline = None if timeout is None else now + timeout
        if self.config.max_request_time is not None:
            cap = entry.started + self.config.max_request_time
            deadline = cap if deadline is None else min(deadline, cap)
        entry.deadline = deadline
        if deadline is not None:
            self._timer_seq += 1
            heapq.heappush(self._timers, (deadline, self._timer_seq, rid))

    # ------------------------------------------------------------------ client start

    def start(self, *, now: float = 0.0) -> RequestId:
        """Client: open the conversation.

        ``era="legacy"`` sends ``initialize``; otherwise ``server/discover`` is sent
        (with ``era="auto"`` a non-modern answer or a timeout falls back to
        ``initialize``). :class:`HandshakeCompleted` follows when the era is settled.

        Returns:
            The id of the request sent.

        Raises:
            LocalProtocolError: not a client, or already started.
        """
        if self.role != "client":
            raise LocalProtocolError("only a client starts the conversation")
        if self._lifecycle is not LifecycleState.IDLE or self._era is not None or self._probe_id:
            raise LocalProtocolError("the conversation is already started")
        if not self._modern_versions:
            return self._send_initialize(now)
        rid = self._new_id()
        version = self._modern_versions[0]
        params = self._modern_params(None, version, None)
        timeout = self.config.probe_timeout if self._legacy_versions else None
        self._register_out(rid, "server/discover", params, _MODERN, now, None, timeout)
        self._probe_id = rid
        self._emit(request(rid, "server/discover", params))
        return rid

    def _send_initialize(self, now: float) -> RequestId:
        state = transition(self._lifecycle, HandshakeInput.INITIALIZE)
        assert state is not None
        rid = self._new_id()
        params = {
            "protocolVersion": self._legacy_versions[0],
            "capabilities": self.config.capabilities,
            "clientInfo": self.config.implementation,
        }
        self._register_out(
            rid, "initialize", params, _LEGACY, now, None, self.config.request_timeout
        )
        self._lifecycle = state
        self._emit(request(rid, "initialize", params))
        return rid

    def _fall_back_to_initialize(self, now: float) -> None:
        if self._legacy_versions:
            self._send_initialize(now)

    def _modern_params(
        self,
        params: dict[str, Any] | None,
        version: str,
        progress_token: RequestId | None,
        log_level: str | None = None,
    ) -> dict[str, Any]:
        if log_level is not None:  # a per-request logLevel: build this envelope afresh
            meta = _modern.build_request_meta(
                protocol_version=version,
                client_capabilities=self.config.capabilities,
                client_info=self.config.implementation,
                log_level=log_level,
                progress_token=progress_token,
            )
            return _modern.attach_meta(params, meta)
        # Every other request of a version carries the same envelope, so it is built
        # (and its parts validated) once; a build that raises caches nothing. The dict is
        # shared by the requests' params and never mutated (attach_meta copies).
        envelope = self._envelope
        if envelope is None or envelope[0] != version:
            envelope = self._envelope = (
                version,
                _modern.build_request_meta(
                    protocol_version=version,
                    client_capabilities=self.config.capabilities,
                    client_info=self.config.implementation,
                    log_level=self.config.log_level,
                ),
            )
        meta = envelope[1]
        if progress_token is not None:  # our own request id: valid, and goes last
            meta = {**meta, _modern.PROGRESS_TOKEN_KEY: progress_token}
        if params is None:
            return {"_meta": meta}
        if type(params) is dict and params.get("_meta") is None:
            return {**params, "_meta": meta}  # what attach_meta builds, in one step
        return _modern.attach_meta(params, meta)

    # ------------------------------------------------------------------ sending

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _register_out(
        self,
        rid: RequestId,
        method: str,
        params: dict[str, Any] | None,
        era: Era,
        now: float,
        progress_token: RequestId | None,
        timeout: float | None,
    ) -> _Outbound:
        entry = _outbound(method, params, now, progress_token, era, timeout)
        self._pending[rid] = entry
        if progress_token is not None:
            self._progress_in[progress_token] = rid
        if timeout is not None or self.config.max_request_time is not None:
            self._arm(rid, entry, now, timeout)
        return entry

    def _check_open(self) -> None:
        if self._closed:
            raise LocalProtocolError("the connection is closed")

    def _revision(self) -> Revision | None:
        return None if self._version is None else REVISIONS[self._version]

    def send_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        now: float = 0.0,
        progress: bool = False,
        timeout: float | None = None,
        log_level: str | None = None,
        related_request_id: RequestId | None = None,
    ) -> RequestId:
        """Send a request; its answer arrives later as an event.

        Args:
            method: the method name.
            params: the params object (not mutated; ``_meta`` keys are merged in).
            now: the current time, for timeouts.
            progress: ask the peer for progress (adds ``_meta.progressToken``).
            timeout: seconds without progress before the request is cancelled
                (default: ``config.request_timeout``).
            log_level: modern client: the ``logLevel`` for this request's envelope.
            related_request_id: legacy server: the client request this one is made
                for (routing hint for HTTP bindings).

        Returns:
            The new request id.

        Raises:
            LocalProtocolError: closed; before the handshake; a method the peer's
                capabilities do not allow; a method our role may not send; or too
                many requests in flight. No state changed.
            TypeError: ``params`` is not JSON-serializable. No state changed.
        """
        if (
            # Fast path: a method that passed every check below before, in the era now
            # settled (see _send_ok), no timer to arm, no progress token, and in the
            # modern era the cached envelope. What is left is per-call.
            method in self._send_ok
            and not progress
            and timeout is None
            and self._untimed
            and not self._closed
            and len(self._pending) < self._max_pending
        ):
            rid = self._next_id + 1
            era = self._era
            assert era is not None  # settled: _send_ok is not empty
            if era is _MODERN:
                envelope = self._envelope
                if (
                    log_level is not None
                    or envelope is None
                    or envelope[0] != self._version
                    or (params is not None and (type(params) is not dict or "_meta" in params))
                ):
                    return self._send_request(
                        method, params, now, progress, timeout, log_level, related_request_id
                    )
                # What _modern_params builds for a plain request, in one step.
                params = (
                    {"_meta": envelope[1]} if params is None else {**params, "_meta": envelope[1]}
                )
            payload = dumps(
                {"jsonrpc": JSONRPC, "id": rid, "method": method}
                if params is None
                else {"jsonrpc": JSONRPC, "id": rid, "method": method, "params": params}
            )
            # Serialized (which may raise): now change state. _outbound, written out.
            self._next_id = rid
            entry: _Outbound = _new(_Outbound)
            entry.method = method
            entry.params = params
            entry.started = now
            entry.progress_token = None
            entry.era = era
            self._pending[rid] = entry
            self._out.append(payload)
            self._out_ids.append(related_request_id)
            return rid
        return self._send_request(
            method, params, now, progress, timeout, log_level, related_request_id
        )

    def _send_request(
        self,
        method: str,
        params: dict[str, Any] | None,
        now: float,
        progress: bool,
        timeout: float | None,
        log_level: str | None,
        related_request_id: RequestId | None,
    ) -> RequestId:
        """send_request, every check made."""
        self._check_open()
        if len(self._pending) >= self._max_pending:
            raise LocalProtocolError(f"too many requests in flight ({self._max_pending})")
        if method in ("initialize", "server/discover") and self.role == "client":
            raise LocalProtocolError(f"use start() to send {method}")
        era = self._era
        if self.role == "server":
            if era is not _LEGACY:
                raise LocalProtocolError(
                    "a server sends requests only in a legacy session; in the modern era "
                    "return an input-required result (send_input_required)"
                )
            self._check_legacy_send(method)
        elif era is _MODERN:
            self._check_modern_client_send(method)
        elif era is _LEGACY or self._lifecycle is not LifecycleState.IDLE:
            era = _LEGACY
            self._check_legacy_send(method)
        else:
            raise LocalProtocolError(
                "the era is not settled yet: call start() and wait for HandshakeCompleted"
            )
        if timeout is None:
            timeout = self.config.request_timeout
        # Build and serialize first (either may raise), change state after.
        rid = self._next_id + 1
        token: RequestId | None = rid if progress else None
        if era is _MODERN:
            assert self._version is not None
            params = self._modern_params(params, self._version, token, log_level)
        elif token is not None:
            params = _modern.attach_meta(params, {"progressToken": token})
        payload = dumps(
            {"jsonrpc": JSONRPC, "id": rid, "method": method}
            if params is None
            else {"jsonrpc": JSONRPC, "id": rid, "method": method, "params": params}
        )
        self._next_id = rid
        if era is _MODERN and method == "subscriptions/listen":
            self._listening.add(rid)
        self._register_out(rid, method, params, era, now, token, timeout)
        self._out.append(payload)
        self._out_ids.append(related_request_id)
        return rid

    def _check_legacy_send(self, method: str) -> None:
        if method in self._send_ok:
            return  # checked before: capabilities do not change within a session
        if self._lifecycle is not LifecycleState.READY:
            allowed = PRE_READY_REQUESTS.get(self._lifecycle, frozenset())
            if method not in allowed or method == "initialize":
                raise LocalProtocolError(
                    f"cannot send {method!r} before the session is ready "
                    f"(state {self._lifecycle.value})"
                )
            return
        revision = self._revision()
        assert revision is not None
        if self.role == "client":
            own, theirs = revision.client_requests, revision.server_requests
        else:
            own, theirs = revision.server_requests, revision.client_requests
        if method in own:
            path = own[method]
            if not has_capability(self._peer_capabilities, path):
                assert path is not None
                raise LocalProtocolError(
                    f"the peer did not declare the {'.'.join(path)!r} capability "
                    f"needed for {method!r}"
                )
        elif method in theirs:
            raise LocalProtocolError(f"a {self.role} does not send {method!r}")
        self._send_ok.add(method)

    def _check_modern_client_send(self, method: str) -> None:
        revision = _MODERN_REVISION
        if method in revision.client_requests:
            path = revision.client_requests[method]
            if self._peer_capabilities and not has_capability(self._peer_capabilities, path):
                assert path is not None
                raise LocalProtocolError(
                    f"the server did not declare the {'.'.join(path)!r} capability "
                    f"needed for {method!r}"
                )
        elif method in _modern.MODERN_REMOVED_METHODS:
            raise LocalProtocolError(f"{method!r} does not exist in the modern era")
        if method != "subscriptions/listen":  # which the fast path does not track
            self._send_ok.add(method)  # the server's capabilities are settled by discovery

    def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification.

        Server: change notifications (``notifications/*/list_changed``,
        ``notifications/resources/updated``) go to the legacy session when it is
        ready, and to every modern ``subscriptions/listen`` whose filter asks for
        them, tagged with its subscription id.

        Raises:
            LocalProtocolError: closed, or not allowed now. No state changed.
        """
        self._check_open()
        if method == "notifications/cancelled":
            raise LocalProtocolError("use cancel_request() to cancel")
        if method == "notifications/progress":
            raise LocalProtocolError("use send_progress() to report progress")
        if self.role == "server":
            sent = False
            for sub_id, flt in self._subscriptions.items():
                if flt.matches(method, params or {}):
                    self._emit(
                        notification(method, _modern.tag_subscription_notification(params, sub_id)),
                        sub_id,
                    )
                    sent = True
            if self._era is _LEGACY:
                revision = self._revision()
                assert revision is not None
                if self._lifecycle is not LifecycleState.READY and (
                    method not in PRE_READY_SERVER_NOTIFICATIONS
                ):
                    raise LocalProtocolError(f"cannot send {method!r} before initialized")
                path = revision.server_notifications.get(method)
                if method in revision.server_notifications and not has_capability(
                    self.config.capabilities, path
                ):
                    raise LocalProtocolError(
                        f"{method!r} needs our {'.'.join(path or ())!r} capability"
                    )
                self._emit(notification(method, params))
            elif not sent and method not in _MODERN_REVISION.server_notifications:
                raise LocalProtocolError(f"no session or subscription to send {method!r} to")
            return
        if self._era is _LEGACY or self._lifecycle is not LifecycleState.IDLE:
            if self._lifecycle is not LifecycleState.READY:
                raise LocalProtocolError(f"cannot send {method!r} before the session is ready")
        elif self._era is not _MODERN:
            raise LocalProtocolError("the era is not settled yet")
        self._emit(notification(method, params))

    def send_result(self, request_id: RequestId, result: dict[str, Any]) -> None:
        """Answer the peer's request ``request_id`` with ``result``.

        In the modern era the core adds ``resultType``, ``_meta`` server info and
        caching hints. An answer for a request the peer cancelled (or that was
        abandoned by a close) is dropped silently.

        Raises:
            LocalProtocolError: ``request_id`` is not a request of the peer's that
                awaits an answer. No state changed.
            TypeError: ``result`` is not JSON-serializable. No state changed: the
                request can still be answered (e.g. with an error).
        """
        inbound = self._inflight.get(request_id)
        if inbound is None:
            self._take_inbound(request_id)  # drops a cancelled one, else raises
            return
        if inbound.era is _MODERN:
            server_meta = self._server_meta
            if (
                # Fast path: what decorate_result adds to a plain complete result of a
                # method without caching hints, once it has accepted our configured
                # hints (they never change).
                self._hints_ok
                and server_meta is not None
                and type(result) is dict
                and "resultType" not in result
                and "_meta" not in result
                and inbound.method not in _CACHEABLE_METHODS
            ):
                result = {**result, "resultType": _COMPLETE, "_meta": server_meta}
            else:
                result = _modern.decorate_result(
                    inbound.method,
                    result,
                    server_info=self.config.implementation,
                    ttl_ms=self.config.cache_ttl_ms,
                    cache_scope=self.config.cache_scope,
                )
                self._hints_ok = True
        reply = {"jsonrpc": JSONRPC, "id": request_id, "result": result}
        payload = dumps(reply)  # check first (may raise), change state after
        del self._inflight[request_id]
        if self._inbound_progress or self._inbound_log_level:
            self._forget_inbound(request_id)
        if self._batches:
            self._reply(request_id, reply, payload)
        else:  # as _reply, which the closed check there cannot stop: closing empties _inflight
            self._out.append(payload)
            self._out_ids.append(request_id)

    def send_error(self, request_id: RequestId, code: int, message: str, data: Any = None) -> None:
        """Answer the peer's request ``request_id`` with an error.

        Raises:
            LocalProtocolError: as for :meth:`send_result`.
        """
        inbound = self._take_inbound(request_id)
        if inbound is None:
            return
        self._reply(
            request_id,
            error_response(request_id, ErrorData(code=code, message=message, data=data)),
        )

    def send_input_required(
        self,
        request_id: RequestId,
        input_requests: dict[str, Any],
        *,
        state: Any = None,
        now: float = 0.0,
    ) -> bool:
        """Modern server: answer ``resultType: "input_required"`` (MRTR).

        ``state`` (any JSON value) is sealed into ``requestState`` with an HMAC and
        an expiry; the retry delivers it back as ``RequestReceived.request_state``.

        Returns:
            ``True`` when sent; ``False`` when the client's envelope lacks a capability
            the input requests need (the request was answered with -32021 instead) or
            the request had been cancelled.

        Raises:
            LocalProtocolError: not a modern ``tools/call``, ``resources/read`` or
                ``prompts/get`` awaiting an answer. No state changed.
        """
        inbound = self._inflight.get(request_id)
        if inbound is None:
            self._take_inbound(request_id)  # drops a cancelled one, else raises
            return False
        if inbound.era is not _MODERN or not _modern.may_require_input(inbound.method):
            raise LocalProtocolError(
                f"{inbound.method!r} ({inbound.era.value} era) cannot return input_required"
            )
        required = _modern.required_capabilities_for_input_requests(input_requests)
        missing = _modern.check_client_capabilities(inbound.client_capabilities or {}, required)
        if missing is not None:
            # mrtr.mdx: never ask for input the client has not declared it can give.
            self._take_inbound(request_id)
            self._reply(request_id, error_response(request_id, missing))
            return False
        assert self._state_codec is not None
        token = self._state_codec.seal(
            method=inbound.method, params=inbound.params or {}, state=state, now=now
        )
        self._take_inbound(request_id)
        result = _modern.build_input_required_result(input_requests, token)
        result = _modern.decorate_result(
            inbound.method,
            result,
            server_info=self.config.implementation,
            ttl_ms=None,
            cache_scope=None,
        )
        self._reply(request_id, result_response(request_id, result))
        return True

    def _take_inbound(self, request_id: RequestId) -> RequestReceived | None:
        inbound = self._inflight.pop(request_id, None)
        if inbound is None:
            if request_id in self._cancelled_in:
                self._cancelled_in.pop(request_id)
                return None
            raise LocalProtocolError(f"no request {request_id!r} awaits an answer")
        self._forget_inbound(request_id)
        return inbound

    def _forget_inbound(self, request_id: RequestId) -> None:
        """Drop the side records of the peer's request ``request_id`` (it left _inflight)."""
        self._inbound_progress.pop(request_id, None)
        self._inbound_log_level.pop(request_id, None)

    def _reply(
        self, request_id: RequestId, obj: dict[str, Any], payload: bytes | None = None
    ) -> None:
        if self._closed:
            return
        batch = self._batches.pop(request_id, None) if self._batches else None
        if batch is None:
            self._queue(payload if payload is not None else dumps(obj), request_id)
            return
        batch.replies.append(obj)
        batch.waiting.discard(request_id)
        self._maybe_flush_batch(batch)

    def _maybe_flush_batch(self, batch: _Batch) -> None:
        if not batch.waiting and batch.replies:
            self._queue(dumps(batch.replies), None)
            batch.replies = []

    def send_progress(
        self,
        request_id: RequestId,
        progress: float,
        total: float | None = None,
        message: str | None = None,
    ) -> bool:
        """Report progress on the peer's request ``request_id``.

        Returns:
            ``False`` (nothing sent) when the peer did not ask for progress.

        Raises:
            LocalProtocolError: the request is not in flight (finished or unknown),
                ``progress`` does not increase, or a modern client tries to send
                progress (it flows server to client only). No state changed.
        """
        if self.role == "client" and self._era is _MODERN:
            raise LocalProtocolError("in the modern era progress flows server to client only")
        inbound = self._inflight.get(request_id)
        if inbound is None:
            if request_id in self._cancelled_in:
                return False
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if inbound.progress_token is None:
            return False
        last = self._inbound_progress.get(request_id)
        if last is not None and progress <= last:
            raise LocalProtocolError(f"progress must increase ({progress} after {last})")
        self._inbound_progress[request_id] = progress
        params: dict[str, Any] = {"progressToken": inbound.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._emit(notification("notifications/progress", params), request_id)
        return True

    def send_log(
        self,
        level: str,
        data: Any,
        *,
        logger: str | None = None,
        request_id: RequestId | None = None,
    ) -> bool:
        """Server: send ``notifications/message`` if the client wants it.

        Legacy: when we declared ``logging`` and ``level`` is at or above the level
        the client set with ``logging/setLevel`` (all levels before it set one).
        Modern: only for an in-flight ``request_id`` whose envelope set a
        ``logLevel``, and only at or above it.

        Returns:
            Whether a message was sent.

        Raises:
            LocalProtocolError: not a server, or an unknown level.
        """
        if self.role != "server":
            raise LocalProtocolError("only a server sends log messages")
        if level not in _LOG_RANK:
            raise LocalProtocolError(f"unknown log level {level!r}")
        if self._closed:
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        inbound = None if request_id is None else self._inflight.get(request_id)
        if inbound is not None and inbound.era is _MODERN:
            if not _modern.should_log(self._inbound_log_level.get(inbound.request_id), level):
                return False
            self._emit(notification("notifications/message", params), request_id)
            return True
        if self._era is not _LEGACY or "logging" not in self.config.capabilities:
            return False
        if self._log_level is not None and _LOG_RANK[level] < _LOG_RANK[self._log_level]:
            return False
        self._emit(notification("notifications/message", params), request_id)
        return True

    def cancel_request(self, request_id: RequestId, reason: str | None = None) -> None:
        """Cancel a request of ours: send ``notifications/cancelled`` and forget it.

        A response that arrives later is dropped (:class:`ResponseIgnored`, ``late``).

        Raises:
            LocalProtocolError: not in flight, or it is ``initialize`` (which the
                lifecycle forbids cancelling). No state changed.
        """
        entry = self._pending.get(request_id)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if entry.method == "initialize":
            raise LocalProtocolError("initialize cannot be cancelled")
        del self._pending[request_id]
        self._forget_out(request_id, entry, "late")
        if not self._closed:
            params: dict[str, Any] = {"requestId": request_id}
            if reason is not None:
                params["reason"] = reason
            self._emit(notification("notifications/cancelled", params), request_id)

    def forget_request(self, request_id: RequestId) -> None:
        """Stop waiting for a request of ours without telling the peer.

        For bindings where the transport itself carries cancellation (closing an
        HTTP stream). A later response is dropped as ``late``.

        Raises:
            LocalProtocolError: not in flight.
        """
        entry = self._pending.pop(request_id, None)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        self._forget_out(request_id, entry, "late")

    def _forget_out(self, rid: RequestId, entry: _Outbound, why: str) -> None:
        if entry.progress_token is not None:
            self._progress_in.pop(entry.progress_token, None)
        self._listening.discard(rid)
        finished = self._finished_out
        finished[rid] = why
        if len(finished) > self.config.remembered_ids:
            finished.popitem(False)  # positional: no keyword parsing

    def retry_with_input(
        self, request_id: RequestId, input_responses: dict[str, Any], *, now: float = 0.0
    ) -> RequestId:
        """Modern client: answer an :class:`InputRequired` by retrying with a new id.

        Raises:
            LocalProtocolError: ``request_id`` is not awaiting input, or the round
                bound (``max_input_rounds``) is reached. No state changed.
        """
        entry = self._awaiting_input.get(request_id)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not awaiting input")
        if entry.rounds >= self.config.max_input_rounds:
            raise LocalProtocolError(
                f"gave up after {entry.rounds} input-required rounds (max_input_rounds)"
            )
        self._check_open()
        del self._awaiting_input[request_id]
        params = _modern.build_retry_params(
            entry.params or {}, input_responses, entry.request_state
        )
        rid = self._new_id()
        token = entry.progress_token
        if token is not None:
            params = _modern.attach_meta(params, {"progressToken": rid})
            token = rid
        new = self._register_out(rid, entry.method, params, entry.era, now, token, entry.timeout)
        new.rounds = entry.rounds
        self._emit(request(rid, entry.method, params))
        return rid

    def abandon_request(self, request_id: RequestId) -> None:
        """Modern client: give up on a request that awaits input."""
        self._awaiting_input.pop(request_id, None)

    def end_subscription(self, subscription_id: RequestId) -> None:
        """Modern server: end a ``subscriptions/listen`` gracefully (its result is sent).

        Raises:
            LocalProtocolError: no such subscription.
        """
        if subscription_id not in self._subscriptions:
            raise LocalProtocolError(f"no subscription {subscription_id!r}")
        del self._subscriptions[subscription_id]
        self._inflight.pop(subscription_id, None)
        self._forget_inbound(subscription_id)
        result = _modern.build_listen_closed_result(
            subscription_id, server_info=self.config.implementation
        )
        self._reply(subscription_id, result_response(subscription_id, result))

    def subscriptions(self) -> tuple[RequestId, ...]:
        """Modern server: the ids of the ``subscriptions/listen`` streams being served."""
        return _ids_of(self._subscriptions)

    def send_failed(self) -> list[Event]:
        """Tell the core a write failed: the connection is closed as at end of input."""
        return self.receive_eof()

    # ------------------------------------------------------------------ receiving

    def receive_bytes(self, data: bytes, *, now: float = 0.0) -> list[Event]:
        """Feed bytes of a newline-delimited JSON stream (stdio).

        A line longer than ``config.max_message_size`` is discarded up to its
        newline and answered with -32600 (id null); the stream goes on.
        """
        events: list[Event] = []
        splitter = self._splitter
        splitter.feed(data)
        while (item := splitter.next_message()) is not None:
            if isinstance(item, MessageTooLarge):
                err = ErrorData(
                    code=ErrorCode.INVALID_REQUEST,
                    message=f"Message too large: over {item.limit} bytes",
                )
                self._emit(error_response(None, err))
                events.append(InvalidMessageReceived(error=err))
                continue
            # A line is at most max_message_size bytes: receive_message takes it whole.
            events += self.receive_message(item, now=now)
        return events

    def receive_message(
        self, data: bytes | bytearray | memoryview | str, *, now: float = 0.0
    ) -> list[Event]:
        """Feed one complete JSON text (one WebSocket frame, one in-memory message)."""
        if len(data) > self._max_message_size:
            err = ErrorData(
                code=ErrorCode.INVALID_REQUEST,
                message=f"Message too large: over {self._max_message_size} bytes",
            )
            self._emit(error_response(None, err))
            return [InvalidMessageReceived(error=err)]
        if self._closed:
            return []
        try:
            obj = loads(data)
        except JSONDecodeError as exc:
            obj = parse_error(exc)
        # Fast path: the common message, delivered in one pass over the decoded dict
        # with no intermediate objects and no calls but the event's construction. It
        # is a request whose method already passed every check of the settled era
        # (_accept_ok, _modern_accept_ok) or a complete result of an ordinary request
        # of ours, and for it this does exactly what the general path (_receive_one)
        # does. Anything else, including every error and every message that touches
        # more than its own table entry, leaves by `break` *before changing any state*
        # for the general path. tests/core/test_fastpath.py checks that both paths
        # give the same events, bytes and state.
        while type(obj) is dict:  # a block to break out of; never loops
            if obj.get("jsonrpc") != JSONRPC:
                break
            method = obj.get("method")
            if method is None:  # a response
                rid = obj.get("id")
                result = obj.get("result")
                if (
                    type(result) is not dict
                    or "error" in obj
                    or (type(rid) is not int and type(rid) is not str)
                ):
                    break
                entry = self._pending.get(rid)
                if (
                    entry is None
                    or entry.method in _HANDSHAKE_METHODS
                    or (entry.era is _MODERN and result.get("resultType", _COMPLETE) != _COMPLETE)
                ):
                    break
                # _finish_out, written out.
                del self._pending[rid]
                if entry.progress_token is not None:
                    self._progress_in.pop(entry.progress_token, None)
                if self._listening:
                    self._listening.discard(rid)
                finished = self._finished_out
                finished[rid] = "duplicate"
                if len(finished) > self._remembered_ids:
                    finished.popitem(False)  # positional: no keyword parsing
                return [new_result_received(rid, entry.method, result)]
            if type(method) is not str or "id" not in obj:
                break
            rid = obj["id"]
            if type(rid) is not int and type(rid) is not str:
                break
            inflight = self._inflight
            if rid in inflight or len(inflight) >= self._max_inflight:
                break
            params = obj.get("params")
            token = None
            if params is None:
                meta = None
            elif type(params) is dict:
                meta = params.get("_meta")
            else:
                break
            if meta is not None:
                if type(meta) is not dict:
                    break
                if _PROTOCOL_VERSION_KEY in meta and self._modern_server:
                    # A modern request: the envelope rungs of validate_envelope, and no
                    # MRTR retry (which needs the requestState codec).
                    assert params is not None
                    version = meta[_PROTOCOL_VERSION_KEY]
                    caps = meta.get(_CLIENT_CAPABILITIES_KEY)
                    info = meta.get(_CLIENT_INFO_KEY)
                    if (
                        method not in self._modern_accept_ok
                        or version not in self._modern_versions
                        or type(caps) is not dict
                        or (
                            type(info) is not dict
                            and (info is not None or _CLIENT_INFO_KEY in meta)
                        )
                        or "requestState" in params
                        or "inputResponses" in params
                    ):
                        break
                    level = token = None
                    if len(meta) > (2 if info is None else 3):  # more than the above
                        level = meta.get(_LOG_LEVEL_KEY)
                        token = meta.get(_PROGRESS_TOKEN_KEY)
                        if (
                            (level is not None or _LOG_LEVEL_KEY in meta)
                            and (type(level) is not str or level not in _LOG_RANK)
                        ) or (
                            (token is not None or _PROGRESS_TOKEN_KEY in meta)
                            and type(token) is not int
                            and type(token) is not str
                        ):
                            break
                    event = new_request_received(
                        rid, method, params, _MODERN, version, token, caps, None, None
                    )
                    inflight[rid] = event
                    if level is not None:
                        self._inbound_log_level[rid] = level
                    return [event]
                token = meta.get("progressToken")
                if type(token) is not int and type(token) is not str:
                    token = None
            if method not in self._accept_ok:
                break
            version = self._version
            assert version is not None
            event = new_request_received(
                rid, method, params, _LEGACY, version, token, None, None, None
            )
            inflight[rid] = event
            return [event]

        events: list[Event] = []
        if type(obj) is list:
            self._receive_batch(obj, now, events)
        else:
            self._receive_one(obj, now, events, None)
        return events

    def receive_eof(self) -> list[Event]:
        """The input ended: every request still in flight will never be answered."""
        if self._closed:
            return []
        self._closed = True
        state = transition(self._lifecycle, HandshakeInput.CLOSE)
        assert state is not None
        self._lifecycle = state
        unanswered = _ids_of(self._pending)
        abandoned = _ids_of(self._inflight)
        for rid in unanswered:
            self._forget_out(rid, self._pending[rid], "late")
        self._pending.clear()
        self._timers.clear()
        for rid in abandoned:
            self._remember_cancelled(rid)
        self._inflight.clear()
        self._inbound_progress.clear()
        self._inbound_log_level.clear()
        self._batches.clear()
        self._subscriptions.clear()
        self._awaiting_input.clear()
        self._probe_id = None
        return [ConnectionClosed(unanswered=unanswered, abandoned=abandoned)]

    def _remember_cancelled(self, rid: RequestId) -> None:
        cancelled = self._cancelled_in
        cancelled[rid] = None
        if len(cancelled) > self.config.remembered_ids:
            cancelled.popitem(False)

    def _receive_batch(self, items: list[Any], now: float, events: list[Event]) -> None:
        revision = self._revision()
        problem = None
        if revision is None or not revision.batching:
            problem = "Invalid Request: batches are allowed only in protocol version 2025-03-26"
        elif not items:
            problem = "Invalid Request: empty batch"
        elif len(items) > self.config.max_batch_size:
            problem = f"Invalid Request: batch larger than {self.config.max_batch_size}"
        if problem is not None:
            err = ErrorData(code=ErrorCode.INVALID_REQUEST, message=problem)
            self._emit(error_response(None, err))
            events.append(InvalidMessageReceived(error=err))
            return
        batch = _Batch(waiting=set(), replies=[])
        for item in items:
            self._receive_one(item, now, events, batch)
        self._maybe_flush_batch(batch)

    def _reject(
        self,
        rid: RequestId | None,
        code: int,
        message: str,
        events: list[Event],
        batch: _Batch | None,
        data: Any = None,
    ) -> None:
        err = ErrorData(code=code, message=message, data=data)
        reply = error_response(rid, err)
        if batch is not None:
            batch.replies.append(reply)
        else:
            self._queue(dumps(reply), rid)
        events.append(InvalidMessageReceived(error=err, request_id=rid))

    def _receive_one(self, obj: Any, now: float, events: list[Event], batch: _Batch | None) -> None:
        # A well-formed request, notification or result is dispatched straight from
        # the decoded dict, with no intermediate message object.
        if type(obj) is dict and obj.get("jsonrpc") == "2.0":
            method = obj.get("method")
            if type(method) is str:
                params = obj.get("params")
                if params is None or type(params) is dict:
                    if "id" not in obj:
                        self._on_notification(method, params, now, events)
                        return
                    rid = obj["id"]
                    if type(rid) is int or type(rid) is str:
                        self._on_request(rid, method, params, now, events, batch)
                        return
            elif method is None and "result" in obj and "error" not in obj:
                rid = obj.get("id")
                result = obj["result"]
                if (type(rid) is int or type(rid) is str) and type(result) is dict:
                    self._on_response(rid, result, now, events)
                    return
        # Slow path: everything else is classified in full.
        msg = obj if type(obj) is Invalid else classify(obj)
        if type(msg) is ErrorResponse:
            self._on_error_response(msg, now, events)
        elif type(msg) is Invalid:
            if msg.is_request:
                self._reject(msg.id, msg.error.code, msg.error.message, events, batch)
            else:
                events.append(InvalidMessageReceived(error=msg.error, request_id=msg.id))
        else:  # pragma: no cover - the fast path takes every valid non-error message
            raise AssertionError(f"unclassified message {msg!r}")

    # -- requests

    def _on_request(
        self,
        rid: RequestId,
        method: str,
        params: dict[str, Any] | None,
        now: float,
        events: list[Event],
        batch: _Batch | None,
    ) -> None:
        msg = _Req(rid, method, params)
        if rid in self._inflight or (batch is not None and rid in batch.waiting):
            self._reject(
                rid, ErrorCode.INVALID_REQUEST, f"Duplicate request id {rid!r}", events, batch
            )
            return
        if len(self._inflight) >= self.config.max_inflight_requests:
            self._reject(
                rid,
                ErrorCode.INTERNAL_ERROR,
                f"Too many requests in flight (limit {self.config.max_inflight_requests})",
                events,
                batch,
            )
            return
        if self.role == "server":
            meta = params.get("_meta") if params is not None else None
            if (
                type(meta) is dict
                and _modern.PROTOCOL_VERSION_KEY in meta
                and (self._modern_versions or not self._legacy_versions)
            ):
                if batch is not None:
                    self._reject(
                        rid,
                        ErrorCode.INVALID_REQUEST,
                        "Invalid Request: modern requests cannot be batched",
                        events,
                        batch,
                    )
                    return
                self._on_modern_request(msg, now, events)
                return
            self._on_legacy_server_request(msg, events, batch)
            return
        self._on_client_side_request(msg, events, batch)

    def _accept(
        self,
        msg: _Req,
        era: Era,
        version: str,
        events: list[Event],
        batch: _Batch | None,
        *,
        envelope: _modern.Envelope | None = None,
        input_responses: dict[str, Any] | None = None,
        request_state: Any = None,
    ) -> None:
        params = msg.params
        token: RequestId | None = None
        if envelope is not None:
            token = envelope.progress_token
        elif params is not None:
            meta = params.get("_meta")
            if type(meta) is dict:
                candidate = meta.get("progressToken")
                if is_request_id(candidate):
                    token = candidate
        event = RequestReceived(
            request_id=msg.id,
            method=msg.method,
            params=params,
            era=era,
            protocol_version=version,
            progress_token=token,
            client_capabilities=None if envelope is None else envelope.client_capabilities,
            input_responses=input_responses,
            request_state=request_state,
        )
        self._inflight[msg.id] = event
        if envelope is not None and envelope.log_level is not None:
            self._inbound_log_level[msg.id] = envelope.log_level
        if batch is not None:
            batch.waiting.add(msg.id)
            self._batches[msg.id] = batch
        events.append(event)

    def _answer_now(self, rid: RequestId, result: dict[str, Any], batch: _Batch | None) -> None:
        reply = result_response(rid, result)
        if batch is not None:
            batch.replies.append(reply)
        else:
            self._queue(dumps(reply), rid)

    def _on_legacy_server_request(
        self, msg: _Req, events: list[Event], batch: _Batch | None
    ) -> None:
        rid, method = msg.id, msg.method
        if method in self._accept_ok:  # passed every check below before, in READY
            assert self._version is not None
            self._accept(msg, _LEGACY, self._version, events, batch)
            return
        if method == "initialize":
            if batch is not None:
                self._reject(
                    rid,
                    ErrorCode.INVALID_REQUEST,
                    "Invalid Request: initialize cannot be part of a batch",
                    events,
                    batch,
                )
                return
            self._on_initialize(msg, events)
            return
        state = self._lifecycle
        if state is not LifecycleState.READY and method not in PRE_READY_REQUESTS.get(
            state, frozenset()
        ):
            if state is LifecycleState.IDLE and self._modern_versions:
                self._reject(
                    rid,
                    ErrorCode.INVALID_PARAMS,
                    "Invalid params: missing _meta "
                    f"{_modern.PROTOCOL_VERSION_KEY!r} (or send initialize first for a "
                    "legacy session)",
                    events,
                    batch,
                )
            else:
                self._reject(
                    rid,
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid Request: {method!r} before the session is initialized",
                    events,
                    batch,
                )
            return
        if method == "ping":
            self._answer_now(rid, {}, batch)
            return
        revision = self._revision()
        assert revision is not None
        if method in revision.server_requests and method not in revision.client_requests:
            self._reject(
                rid, ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", events, batch
            )
            return
        path = revision.client_requests.get(method)
        if path is not None and not has_capability(self.config.capabilities, path):
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (capability {'.'.join(path)!r} not declared)",
                events,
                batch,
            )
            return
        if method == "logging/setLevel":
            level = (msg.params or {}).get("level")
            if level not in _LOG_RANK:
                self._reject(
                    rid,
                    ErrorCode.INVALID_PARAMS,
                    f"Invalid params: unknown log level {level!r}",
                    events,
                    batch,
                )
                return
            self._log_level = level
            self._answer_now(rid, {}, batch)
            return
        assert self._version is not None
        if state is LifecycleState.READY:
            self._accept_ok.add(method)
        self._accept(msg, _LEGACY, self._version, events, batch)

    def _on_initialize(self, msg: _Req, events: list[Event]) -> None:
        rid, params = msg.id, msg.params or {}
        if not self._legacy_versions:
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                "Method not found: initialize; this server speaks only "
                + ", ".join(self._modern_versions),
                events,
                None,
                data={"supported": list(self._modern_versions)},
            )
            return
        state = transition(self._lifecycle, HandshakeInput.INITIALIZE)
        if state is None:
            self._reject(
                rid, ErrorCode.INVALID_REQUEST, "Invalid Request: already initialized", events, None
            )
            return
        requested = params.get("protocolVersion")
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        if type(requested) is not str or type(caps) is not dict or type(info) is not dict:
            self._reject(
                rid,
                ErrorCode.INVALID_PARAMS,
                "Invalid params: initialize needs protocolVersion (string), capabilities "
                "(object) and clientInfo (object)",
                events,
                None,
            )
            return
        # lifecycle.mdx: echo a requested version we support, else offer our latest.
        version = requested if requested in self._legacy_versions else self._legacy_versions[0]
        self._version = version
        self._era = _LEGACY
        self._peer_capabilities = caps
        self._peer_info = info
        answered = transition(state, HandshakeInput.ANSWER)
        assert answered is not None
        self._lifecycle = answered
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": self.config.capabilities,
            "serverInfo": self.config.implementation,
        }
        if self.config.instructions is not None:
            result["instructions"] = self.config.instructions
        self._queue(dumps(result_response(rid, result)), rid)

    def _on_modern_request(self, msg: _Req, now: float, events: list[Event]) -> None:
        rid, method, params = msg.id, msg.method, msg.params
        if method in _modern.MODERN_REMOVED_METHODS:
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} does not exist in protocol version 2026-07-28",
                events,
                None,
            )
            return
        envelope = _modern.validate_envelope(
            method,
            params,
            supported_versions=self._modern_versions + self._legacy_versions,
            stateless_versions=self._modern_versions,
        )
        if isinstance(envelope, ErrorData):
            self._reject(rid, envelope.code, envelope.message, events, None, envelope.data)
            return
        path = _MODERN_REVISION.client_requests.get(method)
        if path is not None and not has_capability(self.config.capabilities, path):
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (capability {'.'.join(path)!r} not declared)",
                events,
                None,
            )
            return
        if method == "server/discover":
            result = _modern.build_discover_result(
                supported_versions=self._modern_versions + self._legacy_versions,
                capabilities=self.config.capabilities,
                server_info=self.config.implementation,
                instructions=self.config.instructions,
                ttl_ms=self.config.cache_ttl_ms,
                cache_scope=self.config.cache_scope,
            )
            self._queue(dumps(result_response(rid, result)), rid)
            return
        if method == "subscriptions/listen":
            flt = _modern.parse_listen_filter(params)
            if isinstance(flt, ErrorData):
                self._reject(rid, flt.code, flt.message, events, None, flt.data)
                return
            # The record of a request the application never sees: the core serves it.
            self._inflight[rid] = RequestReceived(
                request_id=rid,
                method=method,
                params=params,
                era=_MODERN,
                protocol_version=envelope.protocol_version,
            )
            flt = flt.honored_by(self.config.capabilities)
            self._subscriptions[rid] = flt
            self._emit(_modern.build_acknowledged_notification(rid, flt), rid)
            return
        # Every rung above depends only on the method and the envelope, which the fast
        # path re-checks per request: the method is settled for it.
        self._modern_accept_ok.add(method)
        input_responses = None
        state = None
        p = params or {}
        if "requestState" in p or "inputResponses" in p:
            if not _modern.may_require_input(method):
                self._reject(
                    rid,
                    ErrorCode.INVALID_PARAMS,
                    f"Invalid params: {method} does not take inputResponses/requestState",
                    events,
                    None,
                )
                return
            parsed = _modern.parse_input_responses(p)
            if isinstance(parsed, ErrorData):
                self._reject(rid, parsed.code, parsed.message, events, None, parsed.data)
                return
            input_responses = parsed
            token = p.get("requestState")
            if token is not None:
                assert self._state_codec is not None
                try:
                    state = self._state_codec.open(token, method=method, params=p, now=now)
                except Exception as exc:  # RemoteProtocolError from the codec
                    code = getattr(exc, "error_code", ErrorCode.INVALID_PARAMS)
                    self._reject(rid, code, str(exc), events, None)
                    return
        self._accept(
            msg,
            _MODERN,
            envelope.protocol_version,
            events,
            None,
            envelope=envelope,
            input_responses=input_responses,
            request_state=state,
        )

    def _on_client_side_request(self, msg: _Req, events: list[Event], batch: _Batch | None) -> None:
        rid, method = msg.id, msg.method
        if self._era is not _LEGACY:
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (servers send no requests in the modern era)",
                events,
                batch,
            )
            return
        if method == "ping":
            self._answer_now(rid, {}, batch)
            return
        revision = self._revision()
        assert revision is not None and self._version is not None
        if method in revision.client_requests and method not in revision.server_requests:
            self._reject(
                rid, ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", events, batch
            )
            return
        path = revision.server_requests.get(method)
        if path is not None and not has_capability(self.config.capabilities, path):
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (capability {'.'.join(path)!r} not declared)",
                events,
                batch,
            )
            return
        self._accept_ok.add(method)  # a legacy client is READY once its era is set
        self._accept(msg, _LEGACY, self._version, events, batch)

    # -- notifications

    def _on_notification(
        self, method: str, params: dict[str, Any] | None, now: float, events: list[Event]
    ) -> None:
        if method == "notifications/progress":
            self._on_progress(params, now, events)
            return
        if method == "notifications/cancelled":
            self._on_cancelled(params, events)
            return
        if method == "notifications/initialized" and self.role == "server":
            state = transition(self._lifecycle, HandshakeInput.CONFIRM)
            if state is None:
                events.append(
                    InvalidMessageReceived(
                        error=ErrorData(
                            code=ErrorCode.INVALID_REQUEST,
                            message="notifications/initialized out of order",
                        )
                    )
                )
                return
            self._lifecycle = state
            assert self._version is not None
            events.append(
                HandshakeCompleted(
                    era=_LEGACY,
                    protocol_version=self._version,
                    peer_capabilities=self._peer_capabilities,
                    peer_info=self._peer_info,
                )
            )
            return
        if self.role == "client" and params is not None:
            meta = params.get("_meta")
            if type(meta) is dict and _modern.SUBSCRIPTION_ID_KEY in meta:
                sub_id = meta[_modern.SUBSCRIPTION_ID_KEY]
                if sub_id in self._listening:
                    events.append(
                        SubscriptionNotificationReceived(
                            subscription_id=sub_id, method=method, params=params
                        )
                    )
                    return
        events.append(NotificationReceived(method=method, params=params))

    def _on_progress(self, params: dict[str, Any] | None, now: float, events: list[Event]) -> None:
        if params is None:
            return
        token = params.get("progressToken")
        rid = self._progress_in.get(token) if is_request_id(token) else None  # type: ignore[arg-type]
        if rid is None:
            return  # progress.mdx: receivers may ignore unknown tokens
        progress = params.get("progress")
        if type(progress) is not int and type(progress) is not float:
            return
        assert isinstance(progress, int | float)
        entry = self._pending[rid]
        if entry.last_progress is not None and progress <= entry.last_progress:
            return  # not increasing: the sender broke the rule; ignore it
        entry.last_progress = progress
        if entry.timeout is not None:
            self._arm(rid, entry, now, entry.timeout)
        total = params.get("total")
        message = params.get("message")
        events.append(
            ProgressReceived(
                request_id=rid,
                progress=progress,
                total=total if type(total) in (int, float) else None,
                message=message if type(message) is str else None,
            )
        )

    def _on_cancelled(self, params: dict[str, Any] | None, events: list[Event]) -> None:
        if params is None:
            return
        rid = params.get("requestId")
        reason = params.get("reason")
        reason = reason if type(reason) is str else None
        if self.role == "client" and rid in self._listening:
            # The server tore down one of our subscriptions.
            assert is_request_id(rid)
            entry = self._pending.pop(rid, None)
            if entry is not None:
                self._forget_out(rid, entry, "late")
            events.append(
                SubscriptionNotificationReceived(
                    subscription_id=rid, method="notifications/cancelled", params=params
                )
            )
            return
        if not is_request_id(rid) or rid not in self._inflight:
            return  # cancellation.mdx: unknown or finished requests are ignored
        inbound = self._inflight[rid]
        if inbound.method == "initialize":
            return
        del self._inflight[rid]
        self._subscriptions.pop(rid, None)
        self._remember_cancelled(rid)
        batch = self._batches.pop(rid, None)
        if batch is not None:
            batch.waiting.discard(rid)
            self._maybe_flush_batch(batch)
        if inbound.method != "subscriptions/listen":
            events.append(RequestCancelled(request_id=rid, reason=reason))

    # -- responses

    def _finish_out(self, rid: RequestId) -> _Outbound | None:
        entry = self._pending.pop(rid, None)
        if entry is not None:
            self._forget_out(rid, entry, "duplicate")
        return entry

    def _ignored(
        self, rid: RequestId | None, events: list[Event], error: ErrorData | None = None
    ) -> None:
        why = self._finished_out.get(rid) if rid is not None else None
        reason: Literal["late", "duplicate", "unknown"] = (
            "late" if why == "late" else "duplicate" if why == "duplicate" else "unknown"
        )
        events.append(ResponseIgnored(request_id=rid, reason=reason, error=error))

    def _on_response(
        self, rid: RequestId, result: dict[str, Any], now: float, events: list[Event]
    ) -> None:
        entry = self._finish_out(rid)
        if entry is None:
            self._ignored(rid, events)
            return
        method = entry.method
        if method == "initialize":
            self._on_initialize_result(rid, result, events)
            return
        if rid == self._probe_id:
            self._on_discover_result(rid, result, now, events)
            return
        if entry.era is _MODERN:
            kind = _modern.classify_result(result)
            if isinstance(kind, ErrorData):
                events.append(ErrorReceived(request_id=rid, method=method, error=kind))
                return
            if kind == "input_required":
                entry.rounds += 1
                state = result.get("requestState")
                entry.request_state = state
                self._awaiting_input[rid] = entry
                if len(self._awaiting_input) > self.config.max_pending_requests:
                    self._awaiting_input.popitem(last=False)
                events.append(
                    InputRequired(
                        request_id=rid,
                        method=method,
                        input_requests=result.get("inputRequests") or {},
                        request_state=state if type(state) is str else None,
                        round=entry.rounds,
                    )
                )
                return
        events.append(ResultReceived(request_id=rid, method=method, result=result))

    def _on_error_response(self, msg: ErrorResponse, now: float, events: list[Event]) -> None:
        rid = msg.id
        entry = None if rid is None else self._finish_out(rid)
        if entry is None:
            self._ignored(rid, events, msg.error)
            return
        assert rid is not None
        if entry.method == "initialize":
            state = transition(self._lifecycle, HandshakeInput.REJECT)
            if state is not None:
                self._lifecycle = state
        elif rid == self._probe_id:
            self._on_discover_error(rid, msg.error, now, events)
            return
        events.append(ErrorReceived(request_id=rid, method=entry.method, error=msg.error))

    def _on_initialize_result(
        self, rid: RequestId, result: dict[str, Any], events: list[Event]
    ) -> None:
        version = result.get("protocolVersion")
        caps = result.get("capabilities")
        info = result.get("serverInfo")
        if version not in self._legacy_versions or type(caps) is not dict:
            state = transition(self._lifecycle, HandshakeInput.FAIL)
            assert state is not None
            self._lifecycle = state
            message = (
                f"server chose protocol version {version!r}, which this client does not "
                f"support (we support {', '.join(self._legacy_versions)})"
                if version not in self._legacy_versions
                else "initialize result has no capabilities object"
            )
            events.append(
                ErrorReceived(
                    request_id=rid,
                    method="initialize",
                    error=ErrorData(code=ErrorCode.INVALID_PARAMS, message=message),
                )
            )
            return
        assert type(version) is str
        answered = transition(self._lifecycle, HandshakeInput.ANSWER)
        assert answered is not None
        ready = transition(answered, HandshakeInput.CONFIRM)
        assert ready is not None
        self._lifecycle = ready
        self._era = _LEGACY
        self._version = version
        self._peer_capabilities = caps
        self._peer_info = info if type(info) is dict else None
        instructions = result.get("instructions")
        self._instructions = instructions if type(instructions) is str else None
        self._emit(notification("notifications/initialized", None))
        events.append(
            HandshakeCompleted(
                era=_LEGACY,
                protocol_version=version,
                peer_capabilities=caps,
                peer_info=self._peer_info,
                instructions=self._instructions,
            )
        )

    def _on_discover_result(
        self, rid: RequestId, result: dict[str, Any], now: float, events: list[Event]
    ) -> None:
        self._probe_id = None
        supported = result.get("supportedVersions")
        offered = supported if type(supported) is list else []
        common = [v for v in self._modern_versions if v in offered]
        if not common:
            if self._legacy_versions and any(v in offered for v in self._legacy_versions):
                self._send_initialize(now)
                return
            events.append(
                ErrorReceived(
                    request_id=rid,
                    method="server/discover",
                    error=ErrorData(
                        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                        message=f"no common protocol version (server offers {offered!r})",
                    ),
                )
            )
            return
        caps = result.get("capabilities")
        meta = result.get("_meta")
        # discover.mdx: the server's Implementation travels in the result's _meta.
        info = meta.get(_modern.SERVER_INFO_KEY) if type(meta) is dict else None
        instructions = result.get("instructions")
        self._era = _MODERN
        self._version = common[0]
        self._peer_capabilities = caps if type(caps) is dict else {}
        self._peer_info = info if type(info) is dict else None
        self._instructions = instructions if type(instructions) is str else None
        events.append(
            HandshakeCompleted(
                era=_MODERN,
                protocol_version=common[0],
                peer_capabilities=self._peer_capabilities,
                peer_info=self._peer_info,
                instructions=self._instructions,
            )
        )

    def _on_discover_error(
        self, rid: RequestId, error: ErrorData, now: float, events: list[Event]
    ) -> None:
        self._probe_id = None
        if error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION and not self._probe_retried:
            data = error.data if isinstance(error.data, dict) else {}
            offered = data.get("supported")
            offered = offered if type(offered) is list else []
            common = [v for v in self._modern_versions if v in offered]
            if common:
                # versioning.mdx: a recognised modern error identifies a modern server;
                # retry with a mutually supported version.
                self._probe_retried = True
                new = self._new_id()
                params = self._modern_params(None, common[0], None)
                self._register_out(new, "server/discover", params, _MODERN, now, None, None)
                self._probe_id = new
                self._emit(request(new, "server/discover", params))
                return
        if self._legacy_versions and error.code not in _modern.MODERN_ERROR_CODES:
            self._send_initialize(now)
            return
        if self._legacy_versions and error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION:
            self._send_initialize(now)
            return
        events.append(ErrorReceived(request_id=rid, method="server/discover", error=error))

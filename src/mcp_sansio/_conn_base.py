"""The state every part of a :class:`~mcp_sansio._connection.Connection` shares.

:class:`_ConnectionBase` creates all of a connection's state (``__init__``) and holds
the few primitives that more than one side uses: queueing output, arming timers,
registering and forgetting our requests, and accepting or rejecting the peer's
requests. The module constants the hot paths read live here too, imported by name
into each module that uses them (a module global costs one lookup).

The connection is assembled from mixins, each in its own module, all built on this
base (see :mod:`mcp_sansio._connection`).
"""

from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from . import _modern
from ._config import ConnectionConfig, Role
from ._conn_records import _Batch, _Outbound, _outbound, _Req
from ._errors import ErrorCode, ErrorData, LocalProtocolError
from ._events import Event, InvalidMessageReceived, RequestReceived
from ._framing import LineSplitter
from ._json import Fragment, dumps
from ._jsonrpc import RequestId, error_response, is_request_id
from ._revision_fields import LACKING, RESULTS_FITTED
from ._state import LifecycleState
from ._versions import FOREIGN_METHODS, REVISIONS, Era, Revision, has_capability

_LOG_RANK: Final = _modern._LEVEL_RANK  # one table of the log levels, in _modern
_MODERN_REVISION: Final = REVISIONS["2026-07-28"]
# The standard methods the modern revision lacks: those it removed, and the requests a
# legacy server sends (which travel only inside results in 2026-07-28).
_MODERN_FOREIGN: Final = FOREIGN_METHODS[_MODERN_REVISION.version]
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
# The methods whose legacy answer send_result checks before it goes: an elicitation's,
# against its form (only a client has one to answer: a server refuses the request on
# receipt); and, in a session of a revision that lacks fields, those it fits
# (RESULTS_FITTED). One set per session (_settle_legacy_version), so that any other
# answer costs one test, on either side, whatever the revision.
_CHECKED_ANSWERS: Final = frozenset({"elicitation/create"})
_CHECKED_OR_FITTED_ANSWERS: Final = _CHECKED_ANSWERS | frozenset(RESULTS_FITTED)


def _bad_error_parts(code: object, message: object) -> LocalProtocolError:
    """The refusal of an error whose ``code`` is not an ``int`` (a ``bool`` is not one)
    or whose ``message`` is not a ``str``: :meth:`send_error`'s, and
    :meth:`receive_eof`'s for ``fail_inflight``. Each makes the test inline, for speed,
    and calls this only to raise."""
    return LocalProtocolError(
        f"an error's code is an int and its message a str: {code!r}, {message!r}"
    )


class _ConnectionBase:
    """A connection's state and shared primitives; see :class:`Connection`."""

    # Every attribute of a connection is a slot: the hot paths read a slot faster than
    # an entry of an instance dict, which a class with this many attributes gets
    # (CPython keeps at most 30 in its compact form). ``__dict__`` stays, so that anything
    # else can still be set on a connection; ``__weakref__``, so that it can be weakly
    # referenced, as any object. tests/core/test_connection_slots.py checks that every
    # attribute set here is a slot. Its subclasses declare no slots of their own.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "_accept_ok",
        "_answering",
        "_answers_checked",
        "_asking",
        "_awaiting_input",
        "_batches",
        "_cancelled_in",
        "_capabilities",
        "_closed",
        "_envelope",
        "_era",
        "_finished_before",
        "_finished_out",
        "_finished_rank",
        "_held",
        "_inbound_log_level",
        "_inbound_progress",
        "_inflight",
        "_instructions",
        "_legacy_versions",
        "_lifecycle",
        "_listening",
        "_log_level",
        "_max_inflight",
        "_max_message_size",
        "_max_pending",
        "_modern_accept_ok",
        "_modern_server",
        "_modern_versions",
        "_next_id",
        "_on_arm",
        "_out",
        "_out_ids",
        "_paused_since",
        "_peer_capabilities",
        "_peer_capabilities_known",
        "_peer_info",
        "_pending",
        "_probe_id",
        "_probe_retried",
        "_probe_too_large",
        "_progress_in",
        "_remembered_ids",
        "_restarting",
        "_routing",
        "_send_ok",
        "_server_meta",
        "_side_records",
        "_splitter",
        "_state_codec",
        "_subscriptions",
        "_timer_seq",
        "_timers",
        "_untimed",
        "_version",
        "config",
        "principal",
        "refuse_listen",
        "role",
    )

    def __init__(
        self,
        role: Role,
        config: ConnectionConfig | None = None,
        *,
        principal: str | None = None,
        routing: bool = False,
    ) -> None:
        if role not in ("client", "server"):
            raise ValueError(f"role must be 'client' or 'server', not {role!r}")
        self.role: Final[Role] = role
        self.config: Final = config if config is not None else ConnectionConfig()
        self.principal: Final = principal
        """Server: the authenticated caller's id (``Principal.subject``), or ``None``.
        The modern era's ``requestState`` is sealed for it and refused for any other
        (mrtr#server-requirements-basic-workflow)."""
        # What we declare. A server with a capabilities_source reads it again as a
        # legacy session initializes (kept for the session) and as a modern request
        # is checked (_declare_capabilities).
        self._capabilities: dict[str, Any] = self.config.capabilities
        self.refuse_listen: (
            Callable[[RequestId, dict[str, Any] | None], ErrorData | None] | None
        ) = None
        """Server: ``(request_id, params) -> error or None``, asked about a valid
        ``subscriptions/listen`` before it is acknowledged (the core serves it; no
        handler sees it): an error refuses it (e.g. a principal's token lacks the scopes
        of a resource it names, ``authorization#runtime-insufficient-scope-errors``).
        The error is queued as the answer and no event is emitted (the refusal is the
        hook's decision, already known to its caller: no ``InvalidMessageReceived``,
        which reports a peer's broken message). Not asked about any other request."""
        self._lifecycle = LifecycleState.IDLE
        self._era: Era | None = None
        self._version: str | None = None
        # What send_result checks or fits in a legacy answer, by method: set with the
        # legacy session's version (_settle_legacy_version).
        self._answers_checked: frozenset[str] = _CHECKED_ANSWERS
        self._peer_capabilities: dict[str, Any] = {}
        # Modern client: whether the discover result gave the server's capabilities (an
        # object, `{}` included: it declared nothing). A result without one leaves them
        # unknown, and then capability-gated sends are not refused.
        self._peer_capabilities_known = False
        self._peer_info: dict[str, Any] | None = None
        self._instructions: str | None = None
        self._next_id = 0
        self._pending: dict[RequestId, _Outbound] = {}
        self._timers: list[tuple[float, int, RequestId]] = []
        self._timer_seq = 0
        self._on_arm: Callable[[], None] | None = None
        """Called when a timer is armed (a deadline may have moved earlier): the hook
        through which ``HttpServer`` keeps its deadline index without scanning."""
        # Client, legacy: the server's questions for our user (elicitation/create,
        # sampling/createMessage) not answered yet, and since when our timers stand
        # still for them (None: they run). The time a question is open is not counted
        # against our requests, as a modern input round's is not (see _hold_timers).
        # _paused_since stays set past the last answer until handle_timer, the first
        # call that gives the time again, counts the pause (next_deadline says "now").
        self._asking: dict[RequestId, None] = {}
        self._paused_since: float | None = None
        self._progress_in: dict[RequestId, RequestId] = {}  # our token -> our request id
        # Our finished ids and why, in two generations of plain dicts (in the order they
        # finished): the current one takes up to remembered_ids, then becomes the one
        # before. Of that one, only the last remembered_ids - len(current) are still
        # remembered (_finished_why): the window is exactly the last remembered_ids to
        # finish, and a finish costs one dict store (an OrderedDict's store and popitem,
        # or a dict and a deque of the order, cost ~1.3k and ~0.7k instructions more).
        self._finished_out: dict[RequestId, str] = {}
        self._finished_before: dict[RequestId, str] = {}
        self._finished_rank: dict[RequestId, int] | None = None  # of _finished_before
        # The peer's requests awaiting our answer, as delivered: the event is the record.
        self._inflight: dict[RequestId, RequestReceived] = {}
        # What little per-request state an inbound request gathers later, kept aside so
        # that the common request (no progress sent, no modern logLevel) costs no record
        # beyond its event. Entries leave with the request (_forget_inbound).
        self._inbound_progress: dict[RequestId, float] = {}  # last progress we sent
        self._inbound_log_level: dict[RequestId, str] = {}  # modern envelope logLevel
        # The peer's requests it cancelled (or a close abandoned) that the application
        # has not answered yet: its answer is dropped silently, whenever it comes (then
        # the entry goes). They hold their places against max_inflight_requests (see
        # _max_inflight), so this table and _inflight together stay within that bound.
        self._cancelled_in: dict[RequestId, None] = {}
        self._batches: dict[RequestId, _Batch] = {}
        self._awaiting_input: OrderedDict[RequestId, _Outbound] = OrderedDict()
        self._subscriptions: dict[RequestId, _modern.SubscriptionFilter] = {}
        # Whether _inbound_progress, _inbound_log_level, _subscriptions, _batches or
        # _asking may hold an entry: set wherever one gains one, so that send_result,
        # while all are empty (the common case), asks one attribute instead of five.
        # False only when all five are empty (send_result clears it when it sees that).
        self._side_records = False
        self._listening: set[RequestId] = set()
        self._probe_id: RequestId | None = None
        self._probe_too_large = False  # the probe's answer was over the limit
        self._probe_retried = False
        # Client: restart_session() sent a new initialize and it is not answered yet;
        # the requests to send once it is (resend_request, send_request), in order.
        self._restarting = False
        self._held: dict[RequestId, None] = {}
        self._log_level: str | None = None
        # Methods that already passed every check of the era that is now settled: the
        # verdicts depend only on the era, the negotiated revision and both sides'
        # capabilities, none of which change afterwards. They let the common case skip
        # the general checks (the fast paths of send_request and receive_message).
        self._send_ok: set[str] = set()  # legacy session READY, or modern client
        self._accept_ok: set[str] = set()  # legacy session READY
        self._modern_accept_ok: set[str] = set()  # modern server, plain requests
        self._closed = False  # the input ended (or a write failed)
        self._answering = False  # closed, but the peer's requests in flight still get answers
        # The output queue: the payloads, handed over by data_to_send without copying.
        self._out: list[bytes] = []
        # Routing (an HTTP binding's opt-in, for messages_to_send): the request each
        # queued message belongs to, noted by _route. Without it no message pays for
        # ids nobody reads: every place that queues a payload asks _routing first.
        self._routing = routing
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
        # (_max_message_size is -1 once closed: _end_input, so that receive_message's
        # size test also turns away a closed connection's input.)
        self._max_message_size = self.config.max_message_size
        self._max_pending = self.config.max_pending_requests
        # (Lowered by one for each entry of _cancelled_in: the room left for _inflight.)
        self._max_inflight = self.config.max_inflight_requests
        self._remembered_ids = self.config.remembered_ids
        # Sending a request needs no timer at all (the fast path of send_request).
        self._untimed = self.config.request_timeout in (None, math.inf) and (
            self.config.max_request_time in (None, math.inf)
        )
        # Server: whether a request whose _meta names a protocol version is served in
        # the modern era (otherwise it is just a legacy request with odd _meta).
        # (One version list at least is not empty: checked above.)
        self._modern_server = role == "server" and bool(self._modern_versions)
        # Modern client: the envelope of a plain request, built (and so validated) by
        # _modern.build_request_meta on first use, for _version.
        # (version, envelope, the envelope encoded)
        self._envelope: tuple[str, dict[str, Any], Fragment] | None = None
        # Modern server: the _meta of a plain result, encoded once (a Fragment: dumps
        # embeds it as it is) and shared by every reply that carries it (replies are
        # serialized, never handed out). The config is frozen: its implementation is
        # read once, as a client's envelope is (its caching hints were checked when it
        # was built). One that cannot be encoded leaves the fast path off: each reply
        # then fails in _modern.decorate_result.
        info = self.config.implementation
        self._server_meta: Fragment | None
        try:
            self._server_meta = None if info is None else Fragment(dumps({_SERVER_INFO_KEY: info}))
        except TypeError:
            self._server_meta = None

    # ------------------------------------------------------------------ output

    def _emit(self, obj: dict[str, Any], related: RequestId | None = None) -> None:
        self._queue(dumps(obj), related)

    def _queue(self, payload: bytes, related: RequestId | None) -> None:
        self._out.append(payload)
        if self._routing:
            self._route(related)

    def _route(self, related: RequestId | None) -> None:
        """Routing: note ``related``, the request of the message just queued.

        ``_out_ids`` holds the ids of the messages in ``_out``, in order, one each,
        except while ``_out`` is empty: :meth:`data_to_send` and :meth:`bytes_to_send`
        hand over the messages and leave their ids (so that a drain pays nothing for
        routing), and they go here, with the next message (so they never outnumber the
        longest the queue has been)."""
        ids = self._out_ids
        if len(ids) >= len(self._out):  # (the message is in _out: these are left over)
            ids.clear()
        ids.append(related)

    # ------------------------------------------------------------------ timers

    def _state_now(self, now: float) -> float:
        """The time a ``requestState`` is sealed or opened at (see
        ``ConnectionConfig.request_state_clock``)."""
        clock = self.config.request_state_clock
        return now if clock is None else clock()

    def _arm(self, rid: RequestId, entry: _Outbound, now: float, timeout: float | None) -> None:
        paused = self._paused_since
        if paused is not None:
            # Our timers stand still while the user answers the server (_hold_timers):
            # armed as at the pause's start, queued when it ends (_resume_timers).
            now = paused
        deadline = None if timeout is None else now + timeout
        cap = entry.cap
        if cap is not None:
            deadline = cap if deadline is None else min(deadline, cap)
        if deadline is not None and deadline == entry.deadline and entry.timer_seq:
            return  # (re-armed to the time it had: its entry stands)
        entry.deadline = deadline
        entry.timer_seq = 0
        if deadline is not None and paused is None:
            self._timer_seq += 1
            entry.timer_seq = seq = self._timer_seq
            timers = self._timers
            heapq.heappush(timers, (deadline, seq, rid))
            pending = self._pending
            if len(timers) > 2 * len(pending) + 64:
                # Entries of finished or re-armed requests leave the heap only from its
                # top; under an early live deadline they would pile up (one per
                # progress notification, one per quick request). Keep the live ones.
                timers[:] = [
                    t
                    for t in timers
                    if (e := pending.get(t[2])) is not None and e.timer_seq == t[1]
                ]
                heapq.heapify(timers)
            if self._on_arm is not None:
                self._on_arm()

    def _hold_timers(self, rid: RequestId, now: float) -> None:
        """Client, legacy: the server asks our user ``rid`` (``elicitation/create``, or
        ``sampling/createMessage``, which waits for a model and, the spec asks, for a
        human who may review or deny it: 2025-11-25 client/sampling.mdx). Until it is
        answered (or cancelled, or the connection closes), none of our requests' timers
        runs: the time a question is open is not counted against a request's
        ``timeout`` nor its ``max_request_time``, as a modern input round's is not (its
        retry's timers start afresh). A legacy question names none of our requests
        (stdio cannot tie it to one), so it holds them all, those sent meanwhile too.
        Overlapping questions make one pause, from the first asked to the last answered."""
        self._asking[rid] = None
        self._side_records = True  # (send_result then looks at _asking: _forget_inbound)
        if self._paused_since is None:
            self._paused_since = now
            for entry in self._pending.values():
                entry.timer_seq = 0  # (its deadline stays, to be moved on by the pause)
            self._timers.clear()

    def _resume_timers(self, now: float) -> None:
        """The questions are answered: every deadline (and ``max_request_time``) of
        ours moves on by the time they were open, and the timers run again. A
        request armed during the pause was armed as at its start (:meth:`_arm`), so
        it gets its whole timeout from now. Never nearer: a ``now`` behind the pause's
        start moves nothing."""
        since = self._paused_since
        assert since is not None
        self._paused_since = None
        shift = now - since if now > since else 0.0
        timers = self._timers
        for rid, entry in self._pending.items():
            deadline = entry.deadline
            if deadline is None:
                continue
            if entry.cap is not None:
                entry.cap += shift
            entry.deadline = deadline = deadline + shift
            self._timer_seq += 1
            entry.timer_seq = self._timer_seq
            timers.append((deadline, self._timer_seq, rid))
        heapq.heapify(timers)
        if timers and self._on_arm is not None:
            self._on_arm()

    # ------------------------------------------------------------------ request tables

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
        if timeout == math.inf:
            timeout = None  # never: no deadline (next_deadline says None, not infinity)
        entry = _outbound(method, params, now, progress_token, era, timeout)
        after = self.config.max_request_time
        if after is not None and after != math.inf and method != "subscriptions/listen":
            # (A listen stream is open-ended: no total either. While the user answers
            # the server, the total counts from the pause's start, as _arm does.)
            paused = self._paused_since
            entry.cap = (now if paused is None else paused) + after
        self._pending[rid] = entry
        if progress_token is not None:
            self._progress_in[progress_token] = rid
        if timeout is not None or entry.cap is not None:
            self._arm(rid, entry, now, timeout)
        return entry

    def _settle_legacy_version(self, version: str) -> None:
        """The legacy session's revision is ``version`` (negotiated: both sides "MUST
        respect the negotiated protocol version", lifecycle.mdx), and so what
        send_result fits in its answers."""
        self._version = version
        self._answers_checked = (
            _CHECKED_OR_FITTED_ANSWERS if version in LACKING else _CHECKED_ANSWERS
        )

    def _revision(self) -> Revision | None:
        return None if self._version is None else REVISIONS[self._version]

    def _forget_out(self, rid: RequestId, entry: _Outbound, why: str) -> None:
        if entry.progress_token is not None:
            self._progress_in.pop(entry.progress_token, None)
        self._listening.discard(rid)
        finished = self._finished_out
        finished[rid] = why  # (a new key: ids are never reused)
        if len(finished) >= self._remembered_ids:
            self._next_finished_generation()

    def _next_finished_generation(self) -> None:
        """The current generation of finished ids is full: it becomes the one before."""
        self._finished_before = self._finished_out
        self._finished_out = {}
        self._finished_rank = None

    def _finished_why(self, rid: RequestId) -> str | None:
        """Why our request ``rid`` finished (``"late"``, ``"duplicate"``), if it is one of
        the last ``remembered_ids`` to finish; else ``None``."""
        why = self._finished_out.get(rid)
        if why is not None:
            return why
        before = self._finished_before
        why = before.get(rid)
        if why is None:
            return None
        # Remembered if among the last remembered_ids - len(current) of the generation
        # before, i.e. at or past its place len(before) - that (a rank built once per
        # generation, when first needed: late answers are rare).
        rank = self._finished_rank
        if rank is None:
            rank = self._finished_rank = {r: i for i, r in enumerate(before)}
        first = len(before) - (self._remembered_ids - len(self._finished_out))
        return why if rank[rid] >= first else None

    def _maybe_flush_batch(self, batch: _Batch) -> None:
        if not batch.waiting and batch.replies:
            self._queue(dumps(batch.replies), None)
            batch.replies = []

    # ------------------------------------------------------------------ the peer's requests

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
        if self.role == "client" and (
            rid is None or self._era is _MODERN or (self._era is None and not self._legacy_versions)
        ):
            # 2026-07-28 (basic/transports/stdio): the client MUST NOT write JSON-RPC
            # responses, so what a modern server got wrong is reported, not answered.
            # In any era, nothing with no usable id is answered either (a server's stray
            # stdout line, a refused batch, an invalid request's bad id): an error with
            # a null id is a JSON-RPC server's reply to a client, and written back to a
            # server that is busy writing such lines it fills our side of the pipe while
            # the server fills its own (a stdio handshake deadlocked so). A server still
            # answers them (JSON-RPC 2.0 §5: id null when the id cannot be detected).
            pass
        elif batch is not None:
            batch.replies.append(reply)
        else:
            self._queue(dumps(reply), rid)
        events.append(InvalidMessageReceived(error=err, request_id=rid))

    def _mark_cancelled(self, request_id: RequestId) -> None:
        """The peer's request ``request_id`` left ``_inflight`` unanswered (cancelled,
        or abandoned by a close): its place is held until the application answers it."""
        if request_id not in self._cancelled_in:
            self._cancelled_in[request_id] = None
            self._max_inflight -= 1

    def _unmark_cancelled(self, request_id: RequestId) -> bool:
        """The application answered the cancelled request ``request_id`` (the answer is
        dropped): its place is free. Returns whether it was one."""
        if self._cancelled_in.pop(request_id, 0) is None:
            self._max_inflight += 1
            return True
        return False

    def _forget_inbound(self, request_id: RequestId) -> None:
        """Drop the side records of the peer's request ``request_id``: every way out
        of ``_inflight`` (answer, cancellation, subscription end, close) calls this."""
        self._inbound_progress.pop(request_id, None)
        self._inbound_log_level.pop(request_id, None)
        self._subscriptions.pop(request_id, None)  # a listen answered early is over
        self._asking.pop(request_id, None)  # a question: answered (or withdrawn)

    def _declare_capabilities(self) -> None:
        """Server: read our capabilities again from ``config.capabilities_source``, if
        any (they may have grown since the connection was made)."""
        source = self.config.capabilities_source
        if source is not None:
            self._capabilities = source()

    def _refuse_unserved(
        self,
        rid: RequestId,
        method: str,
        ours: Mapping[str, tuple[str, ...] | None],
        theirs: Mapping[str, tuple[str, ...] | None],
        events: list[Event],
        batch: _Batch | None,
        *,
        version: str | None = None,
    ) -> bool:
        """Answer -32601 to a request we do not serve: a method only the other side
        sends (in ``theirs``, not in ``ours``), a standard method of another revision
        that ``version`` lacks (``FOREIGN_METHODS``: ``elicitation/create`` in a
        2025-03-26 session, say), or one whose capability (its path in ``ours``) we did
        not declare. A name no revision defines is the application's to answer.
        Returns whether it was refused."""
        if method in theirs and method not in ours:
            self._reject(
                rid, ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", events, batch
            )
            return True
        if version is not None and method in FOREIGN_METHODS[version]:
            self._reject_foreign(rid, method, version, events, batch)
            return True
        path = ours.get(method)
        if path is not None and not has_capability(self._capabilities, path):
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (capability {'.'.join(path)!r} not declared)",
                events,
                batch,
            )
            return True
        return False

    def _reject_foreign(
        self,
        rid: RequestId,
        method: str,
        version: str,
        events: list[Event],
        batch: _Batch | None,
    ) -> None:
        """Answer -32601 to a request for a method that ``version`` does not define."""
        self._reject(
            rid,
            ErrorCode.METHOD_NOT_FOUND,
            f"Method not found: {method} does not exist in protocol version {version}",
            events,
            batch,
        )

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
            self._side_records = True
        if batch is not None:
            batch.waiting.add(msg.id)
            self._batches[msg.id] = batch
            self._side_records = True
        events.append(event)

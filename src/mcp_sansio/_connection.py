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
* ``_cancelled_in``: the peer's requests it cancelled (or a close abandoned) that the
  application has not answered yet, so that its answer is dropped however late it
  comes; they count against ``max_inflight_requests`` with ``_inflight``;
* ``_finished_out`` (and ``_finished_before``, the generation before it): our
  recently finished ids, the last ``remembered_ids`` of them remembered so that late
  and duplicate answers are recognised and dropped;
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

Layout
------
The class is assembled from mixins, one module each, all built on the shared state:

* ``_conn_records``: the table entries (``_Outbound``, ``_Req``, ``_Batch``);
* ``_conn_base``: ``_ConnectionBase``, all the state (``__init__``) and the primitives
  more than one side uses, with the constants the hot paths read;
* ``_conn_handshake``: ``_Handshake``, era selection on both sides;
* ``_conn_receive``: ``_Receiving`` (on top of ``_Handshake``), input to events;
* ``_conn_answer``: ``_Answering``, replies to the peer's requests;
* this module: the public introspection, output, timers and the sending side.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any, Final, final

from . import _modern
from ._config import check_request_timeout
from ._conn_answer import _Answering
from ._conn_base import _HANDSHAKE_METHODS, _LEGACY, _MODERN, _MODERN_REVISION
from ._conn_receive import _PER_REQUEST, _Receiving, undeclared_request
from ._conn_records import _ids_of, _Outbound
from ._errors import LocalProtocolError
from ._events import Event, RequestTimedOut
from ._json import dumps
from ._jsonrpc import JSONRPC, RequestId, notification, request
from ._revision_fields import LACKING, PARAMS_FITTED, fit_params
from ._state import PRE_READY_REQUESTS, PRE_READY_SERVER_NOTIFICATIONS, LifecycleState
from ._versions import FOREIGN_METHODS, REVISIONS, Era, Revision, has_capability

__all__ = ["Connection"]


#: Every method some revision defines as a request: never sent as a notification.
_REQUEST_METHODS: Final = frozenset(
    method
    for revision in REVISIONS.values()
    for method in (*revision.client_requests, *revision.server_requests)
)


def _foreign(method: str, version: str) -> LocalProtocolError:
    return LocalProtocolError(f"{method!r} does not exist in protocol version {version}")


def _undeclared_send(
    method: str, params: dict[str, Any] | None, revision: Revision, capabilities: dict[str, Any]
) -> str | None:
    """Why a legacy server's ``elicitation/create`` or ``sampling/createMessage`` asks,
    in its params, for more than the session has; ``None`` when it does not.

    The client's rule on receipt (:func:`undeclared_request`), kept before sending:
    "Servers MUST NOT send tool-enabled sampling requests to Clients that have not
    declared support for tool use via the sampling.tools capability" (2025-11-25
    client/sampling.mdx); "Servers MUST NOT send elicitation requests with modes that
    are not supported by the client" (client/elicitation.mdx). Also what the negotiated
    revision lacks, whatever the client declares ("respect the negotiated protocol
    version", lifecycle.mdx): URL mode, and tool use in sampling (which came with the
    ``tool_use`` content type), are 2025-11-25's, as the binding's ``Context`` has it.
    """
    given: Mapping[str, Any] = params if isinstance(params, Mapping) else {}
    if method == "elicitation/create":
        mode = given.get("mode", "form")
        if not revision.elicitation_modes and mode != "form":
            return (
                f"elicitation mode {mode!r} does not exist in protocol version {revision.version}"
            )
    elif ("tools" in given or "toolChoice" in given) and (
        "tool_use" not in revision.sampling_content_types
    ):
        return (
            "tool use in sampling (tools, toolChoice) does not exist in protocol version "
            f"{revision.version}"
        )
    return undeclared_request(method, params, capabilities)


@final
class Connection(_Receiving, _Answering):
    """An MCP connection, client or server role, on a message channel.

    Args:
        role: ``"client"`` or ``"server"``.
        config: what we are and our bounds; defaults are documented on
            :class:`ConnectionConfig`.
        principal: server role: the authenticated caller's id, to which modern
            ``requestState`` is bound (``None``: no authentication).
        routing: note, for each message queued, the request it belongs to, for a
            binding that routes the output by request (Streamable HTTP: a response
            goes to its request's stream) and drains it with
            :meth:`messages_to_send`. Off by default: a binding that writes every
            message to one channel (stdio, WebSocket, memory) drains with
            :meth:`data_to_send` or :meth:`bytes_to_send` and pays nothing for ids.

    Error handling:
        Methods that receive peer input never raise for bad input: it becomes a
        JSON-RPC error on the wire and/or an event. Methods that send raise
        :class:`LocalProtocolError` when the call breaks the protocol, and then change
        no state. Any other exception is a bug.
    """

    __slots__ = ()  # (all in _ConnectionBase)

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
        """The capabilities the peer declared (empty until known, and when a modern
        ``server/discover`` result carried none: then nothing is gated)."""
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

    def cancelled_requests(self) -> tuple[RequestId, ...]:
        """The peer's requests it cancelled (or a close abandoned) that the application
        has not answered yet: each holds its place against ``max_inflight_requests``
        until it is answered (the answer is dropped, nothing is sent)."""
        return tuple(self._cancelled_in)

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
        return out

    def messages_to_send(self) -> list[tuple[bytes, RequestId | None]]:
        """Drain the output queue with routing: each message and the request it belongs to.

        The request id is the peer's request a response/progress/log answers, the
        ``subscriptions/listen`` id of a subscription notification, or the
        ``related_request_id`` given to :meth:`send_request`; ``None`` otherwise.
        HTTP bindings use it to pick the stream. Only a connection made with
        ``routing=True`` notes these ids (:class:`~mcp_sansio.http.HttpServer` makes
        its connections so); the others spend nothing on them.

        Raises:
            LocalProtocolError: the connection was made without ``routing=True``.
                Nothing is drained.
        """
        if not self._routing:
            raise LocalProtocolError(
                "messages_to_send needs the routing ids, which only a connection made with "
                "Connection(..., routing=True) notes; drain this one with data_to_send() "
                "or bytes_to_send()"
            )
        out = self._out
        if not out:
            return []  # (ids that data_to_send or bytes_to_send left go in _route)
        self._out = []
        ids = self._out_ids  # (as many as the messages: see _route)
        self._out_ids = []
        return list(zip(out, ids, strict=True))

    def bytes_to_send(self) -> bytes:
        """Drain the output queue as newline-delimited JSON (stdio framing)."""
        out = self._out
        if not out:
            return b""
        self._out = []
        return b"\n".join(out) + b"\n"

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called, or ``None`` for never.

        Client, legacy: while the server's ``elicitation/create`` or
        ``sampling/createMessage`` awaits our answer, our requests' timers stand
        still (``None``, unless nothing else is due); once the last is answered, the
        time the pause began (a time past): call :meth:`handle_timer` now, which counts
        the pause and moves every deadline on by it."""
        timers = self._timers
        pending = self._pending
        while timers:
            deadline, seq, rid = timers[0]
            entry = pending.get(rid)
            if entry is not None and entry.timer_seq == seq:
                return deadline
            heapq.heappop(timers)
        # (While paused the heap is empty. A pause over: now, to count it.)
        return None if self._asking else self._paused_since

    def handle_timer(
        self, now: float, *, withdraw: Callable[[RequestId], bool] | None = None
    ) -> list[Event]:
        """Expire every request whose deadline is at or before ``now``.

        An expired request is cancelled (``notifications/cancelled``, reason
        ``"timeout"``) and reported as :class:`RequestTimedOut`. An expired
        ``server/discover`` era probe (``era="auto"``) instead falls back to
        ``initialize``; a pinned modern era's ``server/discover`` times out as any
        request does (:meth:`start` may then be called again). Legacy client: once the
        server's questions for our user are answered, it first moves every deadline of
        ours on by the time they were open (see :meth:`next_deadline`).

        Args:
            now: the current time, on the clock every ``now=`` is given on.
            withdraw: for a binding that queues what :meth:`data_to_send` returns:
                called with the id of each expired request a cancellation would be
                sent for (not ``initialize``, not one held for a new session), before
                it is queued; it returns ``True`` if the binding took the request back
                with none of it written (the peer never saw the id), and then no
                cancellation is sent: it still ends as :class:`RequestTimedOut`. The
                request is already forgotten when it is called; it must not call
                back into the connection. ``None``: every one is cancelled.
        """
        events: list[Event] = []
        if self._paused_since is not None and not self._asking:
            self._resume_timers(now)  # (the questions are answered: count the pause)
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            _, _, rid = heapq.heappop(self._timers)
            entry = self._pending.pop(rid)
            self._forget_out(rid, entry, "late")
            if rid == self._probe_id:
                self._probe_id = None
                if self._legacy_versions and not self._probe_retried:
                    self._send_initialize(now)  # the era probe: fall back
                    continue
                # A pinned modern era's discover (or the retry of a server that named
                # its modern versions): nothing to fall back to; it times out as any
                # request does (cancelled below, reported), and start() may be tried
                # again.
            if entry.method == "initialize" and self._restarting:
                self._fail_held("initialize timed out", events)
            if rid in self._held:
                del self._held[rid]  # never sent on the new session: nothing to cancel
            elif (
                entry.method != "initialize"
                and not self._closed
                and (withdraw is None or not withdraw(rid))
            ):
                # Routed as the request was (HTTP: the stream of the client's request it
                # was made for), not by its own id, which names none of the peer's.
                self._emit(
                    notification(
                        "notifications/cancelled", {"requestId": rid, "reason": "timeout"}
                    ),
                    entry.related,
                )
            events.append(
                RequestTimedOut(request_id=rid, method=entry.method, origin_id=entry.origin)
            )
        return events

    # ------------------------------------------------------------------ client start

    def start(self, *, now: float) -> RequestId:
        """Client: open the conversation.

        ``era="legacy"`` sends ``initialize``; otherwise ``server/discover`` is sent
        (with ``era="auto"`` a non-modern answer or a timeout falls back to
        ``initialize``). :class:`HandshakeCompleted` follows when the era is settled.
        The era probe waits ``probe_timeout``; ``initialize`` and a pinned modern era's
        ``server/discover`` wait ``request_timeout`` (and ``max_request_time``), and a
        timeout ends them with :class:`RequestTimedOut`.

        Args:
            now: the current time (seconds, on the clock :meth:`handle_timer` is given),
                from which the request's timeout counts. Required: a made-up
                time would put its deadline in the past or far ahead.

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
        # The era probe waits probe_timeout, then falls back to initialize; a pinned
        # modern era has nothing to fall back to: its discover is a request like any
        # other, bounded by request_timeout (as a legacy client's initialize is).
        timeout = (
            self.config.probe_timeout if self._legacy_versions else self.config.request_timeout
        )
        self._register_out(rid, "server/discover", params, _MODERN, now, None, timeout)
        self._probe_id = rid
        self._emit(request(rid, "server/discover", params))
        return rid

    def restart_session(self, *, now: float) -> RequestId:
        """Legacy client: start a new session in place of one the server forgot.

        Over Streamable HTTP, a ``404`` to a request that carried ``Mcp-Session-Id``
        means the server no longer knows the session, and the client MUST start a new
        one by sending a new ``initialize`` without a session id
        (``2025-11-25/basic/transports.mdx``, "Session Management"). This sends it, with
        the same client info, capabilities and preferred version (the version is
        negotiated again; its timeout counts from ``now``, as for :meth:`start`), and
        the lifecycle goes back to ``INITIALIZING``. Until the
        answer no session can carry anything else: :meth:`send_request` holds each new
        request (its timeout counts from the call, as always) and notifications are
        refused. Then, as the first time, the answer brings :class:`HandshakeCompleted`
        (with the new session's version, capabilities and server info) and
        ``notifications/initialized`` goes out, followed by the held requests, in order:
        those given to :meth:`resend_request` and those sent meanwhile. If the server
        refuses, the held requests end with :class:`ErrorReceived` (-32603) before the
        ``initialize`` failure is reported.

        Our other requests in flight stay in flight: only the binding knows which ones
        the server never got (:meth:`resend_request` them) and which ones can no
        longer be answered (answer them with an error, as for a broken stream). What
        the server kept for the old session (resource subscriptions, the logging
        level) is gone; the application decides whether to ask again.

        Returns:
            The id of the new ``initialize`` request.

        Raises:
            LocalProtocolError: not a client, or not a ready legacy session (not
                started, restarting already, failed, or closed). No state changed.
        """
        if self.role != "client":
            raise LocalProtocolError("only a client starts a new session")
        if self._era is not _LEGACY or self._lifecycle is not LifecycleState.READY:
            raise LocalProtocolError(
                f"only a ready legacy session can be restarted (state {self._lifecycle.value})"
            )
        return self._restart(now)

    def resend_request(self, request_id: RequestId) -> None:
        """Send a request of ours again, unchanged (same id, method and params),
        because the peer never received it: over Streamable HTTP, a ``404`` to the
        request's POST says its session was unknown, so it was not processed.

        While :meth:`restart_session` waits for its answer, the request is held and
        goes out right after ``notifications/initialized`` (or ends with the restart's
        failure); otherwise it goes out now. Its timeout keeps counting from when it
        was first sent. Cancelling a held request tells the peer nothing (it never saw
        the request); an answer that arrives for it meanwhile (a stream of the old
        session, a confused server) ends it like any answer, and it is not sent.

        Raises:
            LocalProtocolError: closed, the request is not in flight, or it is
                ``initialize`` or ``server/discover`` (which no session carries). No
                state changed.
        """
        self._check_open()
        entry = self._pending.get(request_id)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if entry.method in _HANDSHAKE_METHODS:
            raise LocalProtocolError(f"{entry.method} is not sent again")
        if self._restarting:
            self._held[request_id] = None
            return
        self._emit(request(request_id, entry.method, entry.params))

    # ------------------------------------------------------------------ sending

    def _check_open(self) -> None:
        if self._closed:
            raise LocalProtocolError("the connection is closed")

    def send_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        now: float,
        progress: bool = False,
        timeout: float | None = None,
        log_level: str | None = None,
        related_request_id: RequestId | None = None,
    ) -> RequestId:
        """Send a request; its answer arrives later as an event.

        Args:
            method: the method name.
            params: the params object (not mutated; ``_meta`` keys are merged in).
            now: the current time (seconds, on the clock :meth:`handle_timer` is
                given), from which the timeouts count.
            progress: ask the peer for progress (adds ``_meta.progressToken``).
            timeout: seconds without progress before the request is cancelled,
                more than 0 (default: ``config.request_timeout``).
            log_level: modern client: the ``logLevel`` for this request's envelope.
            related_request_id: legacy server: the client request this one is made
                for (routing hint for HTTP bindings).

        Legacy: what ``params`` holds that the session's revision lacks is left out of
        what is sent (``_revision_fields.PARAMS_FITTED``: a ``SamplingMessage``'s and its
        content's later fields, ``completion/complete``'s ``context`` before 2025-06-18).

        While :meth:`restart_session` waits for the new session, the request is held
        (nothing goes out; see there), checked against the forgotten session's
        capabilities; its timer runs from ``now`` all the same.

        Returns:
            The new request id.

        Raises:
            LocalProtocolError: closed; before the handshake; a method the peer's
                capabilities do not allow; a method our role may not send; params that
                ask for what the client did not declare or the revision lacks (legacy
                server: an elicitation mode, tool use in sampling; checked every
                time); or too many requests in flight. No state changed.
            TypeError: ``params`` is not JSON-serializable, or ``timeout`` is no
                number. No state changed.
            ValueError: ``timeout`` is 0, negative or NaN (``None`` is no timeout: see
                :func:`~mcp_sansio._config.check_request_timeout`). No state changed.
        """
        if (
            # Fast path: a method that passed every check below before, in the era now
            # settled (see _send_ok, which closing empties), no timer to arm, no progress
            # token, and in the modern era the cached envelope. What is left is per-call.
            method in self._send_ok
            and not progress
            and timeout is None
            and self._untimed
            and len(self._pending) < self._max_pending
        ):
            rid = self._next_id + 1
            era = self._era
            assert era is not None  # settled: _send_ok is not empty
            if era is _MODERN:
                envelope = self._envelope  # (of _version: reset when the modern era is settled)
                if (
                    log_level is not None
                    or envelope is None
                    or (params is not None and (type(params) is not dict or "_meta" in params))
                ):
                    return self._send_request(
                        method, params, now, progress, timeout, log_level, related_request_id
                    )
                # What _modern_params builds for a plain request, in one step (for speed,
                # copy() and a store: {**params, ...} builds two dicts and merges twice,
                # and dict(params, _meta=...), fewer bytecodes, takes longer in C), first
                # with the envelope encoded, for dumps (cheaper than encoding the
                # envelope's dicts again), then, the same dict, with the dict envelope
                # the entry keeps: one copy of params, not one for each.
                if params is None:
                    params = {"_meta": envelope[2]}
                else:
                    params = params.copy()
                    params["_meta"] = envelope[2]
                payload = dumps({"jsonrpc": JSONRPC, "id": rid, "method": method, "params": params})
                params["_meta"] = envelope[1]
            else:
                payload = dumps(
                    {"jsonrpc": JSONRPC, "id": rid, "method": method}
                    if params is None
                    else {"jsonrpc": JSONRPC, "id": rid, "method": method, "params": params}
                )
            # Serialized (which may raise): now change state. _outbound, written out.
            self._next_id = rid
            entry = _Outbound()
            entry.method = method
            entry.params = params
            entry.started = now
            entry.progress_token = None
            entry.era = era
            if related_request_id is not None:
                entry.related = related_request_id
            self._pending[rid] = entry
            self._out.append(payload)
            if self._routing:
                self._route(related_request_id)
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
        if method in _HANDSHAKE_METHODS and self.role == "client":
            raise LocalProtocolError(f"use start() to send {method}")
        era = self._era
        if self.role == "server":
            if era is not _LEGACY:
                raise LocalProtocolError(
                    "a server sends requests only in a legacy session; in the modern era "
                    "return an input-required result (send_input_required)"
                )
            self._check_legacy_send(method, params)
        elif era is _MODERN:
            self._check_modern_client_send(method)
        elif era is _LEGACY or self._lifecycle is not LifecycleState.IDLE:
            era = _LEGACY
            self._check_legacy_send(method, params)
        else:
            raise LocalProtocolError(
                "the era is not settled yet: call start() and wait for HandshakeCompleted"
            )
        if timeout is None:
            # A subscriptions/listen stream is open-ended: quiet is no sign of trouble,
            # so the configured timeouts are not its (an explicit one still is).
            timeout = None if method == "subscriptions/listen" else self.config.request_timeout
        else:
            check_request_timeout("timeout", timeout)
        # Build and serialize first (either may raise), change state after.
        rid = self._next_id + 1
        token: RequestId | None = rid if progress else None
        if era is _MODERN:
            assert self._version is not None
            params = self._modern_params(params, self._version, token, log_level)
        else:
            version = self._version
            if params is not None and method in PARAMS_FITTED and version is not None:
                params = fit_params(method, params, version)
            if token is not None:
                params = _modern.attach_meta(params, {"progressToken": token})
        payload = dumps(request(rid, method, params))
        self._next_id = rid
        if era is _MODERN and method == "subscriptions/listen":
            self._listening.add(rid)
        entry = self._register_out(rid, method, params, era, now, token, timeout)
        if related_request_id is not None:
            entry.related = related_request_id
        if self._restarting:
            self._held[rid] = None  # (no session to carry it: see restart_session)
            return rid
        self._out.append(payload)
        if self._routing:
            self._route(related_request_id)
        return rid

    def _check_legacy_send(self, method: str, params: dict[str, Any] | None) -> None:
        if method in self._send_ok:
            return  # checked before: capabilities do not change within a session
        restarting = self._restarting
        if self._lifecycle is not LifecycleState.READY and not restarting:
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
            if method in _PER_REQUEST:
                # What its params ask for is checked each time, so never cached: the
                # fast path would send a tool-enabled request after a plain one.
                why = _undeclared_send(method, params, revision, self._peer_capabilities)
                if why is not None:
                    raise LocalProtocolError(f"cannot send {method!r}: {why}")
                return
        elif method in theirs:
            raise LocalProtocolError(f"a {self.role} does not send {method!r}")
        elif method in FOREIGN_METHODS[revision.version]:
            raise _foreign(method, revision.version)
        if not restarting and not (method in PARAMS_FITTED and revision.version in LACKING):
            # (Restarting: checked against the forgotten session's facts, so not cached;
            # the fast path must not send it past the hold either. Nor one whose params
            # are fitted to the revision: the fast path sends them as they are.)
            self._send_ok.add(method)

    def _check_modern_client_send(self, method: str) -> None:
        revision = _MODERN_REVISION
        if method in revision.client_requests:
            path = revision.client_requests[method]
            # Gated whenever discovery told us what the server declares, nothing
            # (`{}`) included: "Clients MUST NOT call resources/directory/read against
            # a server that has not declared directoryRead: true" (skills extension).
            if self._peer_capabilities_known and not has_capability(self._peer_capabilities, path):
                assert path is not None
                raise LocalProtocolError(
                    f"the server did not declare the {'.'.join(path)!r} capability "
                    f"needed for {method!r}"
                )
        elif method in FOREIGN_METHODS[revision.version]:  # with MODERN_REMOVED_METHODS
            raise LocalProtocolError(f"{method!r} does not exist in the modern era")
        if method != "subscriptions/listen":  # which the fast path does not track
            self._send_ok.add(method)  # the server's capabilities are settled by discovery

    def send_notification(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification.

        Server: change notifications (``notifications/*/list_changed``,
        ``notifications/resources/updated``) go to the legacy session when it is
        ready, and to every modern ``subscriptions/listen`` whose filter asks for
        them, tagged with its subscription id.

        A notification that another revision defines but the negotiated one does not
        (``notifications/elicitation/complete`` before 2025-11-25, say) is refused; a
        name no revision defines is sent as a custom notification.

        Raises:
            LocalProtocolError: closed, or not allowed now; ``method`` is a request's
                (``tools/call``, say: use :meth:`send_request`), or ``params`` is
                neither ``None`` nor a mapping (MCP's params are an object). No state
                changed.
        """
        self._check_open()
        if method == "notifications/cancelled":
            raise LocalProtocolError("use cancel_request() to cancel")
        if method == "notifications/progress":
            raise LocalProtocolError("use send_progress() to report progress")
        if method in _REQUEST_METHODS:
            raise LocalProtocolError(f"{method!r} is a request: use send_request()")
        if params is not None and type(params) is not dict:
            if not isinstance(params, Mapping):
                raise LocalProtocolError(f"a notification's params are an object, not {params!r}")
            params = dict(params)  # (orjson writes dicts only)
        if self.role == "server":
            legacy = self._era is _LEGACY
            if legacy:
                revision = self._revision()
                assert revision is not None
                if self._lifecycle is not LifecycleState.READY and (
                    method not in PRE_READY_SERVER_NOTIFICATIONS
                ):
                    raise LocalProtocolError(f"cannot send {method!r} before initialized")
                if method in FOREIGN_METHODS[revision.version]:
                    raise _foreign(method, revision.version)
                path = revision.server_notifications.get(method)
                if method in revision.server_notifications and not has_capability(
                    self._capabilities, path
                ):
                    raise LocalProtocolError(
                        f"{method!r} needs our {'.'.join(path or ())!r} capability"
                    )
            sent = False
            for sub_id, flt in self._subscriptions.items():
                if flt.matches(method, params or {}):
                    self._emit(
                        notification(method, _modern.tag_subscription_notification(params, sub_id)),
                        sub_id,
                    )
                    sent = True
            if legacy:
                self._emit(notification(method, params))
            elif not sent and method not in _MODERN_REVISION.server_notifications:
                raise LocalProtocolError(f"no session or subscription to send {method!r} to")
            return
        if self._era is _LEGACY or self._lifecycle is not LifecycleState.IDLE:
            if self._lifecycle is not LifecycleState.READY:
                raise LocalProtocolError(f"cannot send {method!r} before the session is ready")
        elif self._era is not _MODERN:
            raise LocalProtocolError("the era is not settled yet")
        version = self._version
        assert version is not None  # settled: a ready legacy session, or discovery
        if method in FOREIGN_METHODS[version]:
            raise _foreign(method, version)
        if method == "notifications/roots/list_changed" and not has_capability(
            self._capabilities, ("roots", "listChanged")
        ):
            # roots.mdx: only a client that declared roots.listChanged sends it.
            raise LocalProtocolError(f"{method!r} needs our 'roots.listChanged' capability")
        self._emit(notification(method, params))

    def cancel_request(self, request_id: RequestId, reason: str | None = None) -> None:
        """Cancel a request of ours: send ``notifications/cancelled`` and forget it.

        A response that arrives later is dropped (:class:`ResponseIgnored`, ``late``).

        A modern request awaiting input (its :class:`InputRequired` came, and no
        :meth:`retry_with_input` yet: a question on the user's screen) is given up as
        :meth:`abandon_request` gives it up: nothing is sent, as the server holds nothing
        of it (its answer finished it; mrtr.mdx: "Servers MUST NOT assume that clients
        will fulfill the inputRequests or retry the original request").

        Raises:
            LocalProtocolError: neither in flight nor awaiting input, or it is
                ``initialize`` (which the lifecycle forbids cancelling). No state changed.
        """
        entry = self._pending.get(request_id)
        if entry is None:
            if self._awaiting_input.pop(request_id, None) is not None:
                return  # (abandoned)
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if entry.method == "initialize":
            raise LocalProtocolError("initialize cannot be cancelled")
        del self._pending[request_id]
        self._forget_out(request_id, entry, "late")
        if request_id in self._held:
            del self._held[request_id]  # the peer never saw it: nothing to tell
        elif not self._closed:
            params: dict[str, Any] = {"requestId": request_id}
            if reason is not None:
                params["reason"] = reason
            self._emit(notification("notifications/cancelled", params), entry.related)

    def forget_request(self, request_id: RequestId) -> None:
        """Stop waiting for a request of ours without telling the peer.

        For bindings where the transport itself carries cancellation (closing an
        HTTP stream), and for a request the binding took back before any of it was
        written (the peer never saw the id, so nothing is sent for it, ever). Its
        place, timer and progress token are free. A later response is dropped as
        ``late``. A modern request awaiting input is given up, as :meth:`cancel_request`
        gives it up (:meth:`abandon_request`).

        Raises:
            LocalProtocolError: neither in flight nor awaiting input.
        """
        entry = self._pending.pop(request_id, None)
        if entry is None:
            if self._awaiting_input.pop(request_id, None) is not None:
                return  # (abandoned)
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        self._forget_out(request_id, entry, "late")
        self._held.pop(request_id, None)

    def retry_with_input(
        self, request_id: RequestId, input_responses: dict[str, Any], *, now: float
    ) -> RequestId:
        """Modern client: answer an :class:`InputRequired` by retrying with a new id.

        ``now`` is the current time, as for :meth:`send_request` (the retry's timeout
        counts from it). The events about the retry name it by the new id, with the id
        the call was first sent under as their ``origin_id``.

        ``input_responses`` answers questions of the round, under their keys (one the
        server did not ask answers nothing: refused), each with its result's shape
        (``ElicitResult``, ``CreateMessageResult``, ``ListRootsResult``), and an
        accepted form's ``content`` fits the form asked
        (client/elicitation.mdx: "Clients SHOULD validate all responses against the
        provided schema"): the types, choices, bounds and required fields of
        ``requestedSchema`` (not ``format``).

        Raises:
            LocalProtocolError: ``request_id`` is not awaiting input, the round bound
                (``max_input_rounds``) is reached, or ``input_responses`` is not a
                mapping, or does not answer the round as said above (the message names
                the key and what is wrong). No state changed: answer again, or give up
                (:meth:`abandon_request`).
            TypeError: ``input_responses`` is not JSON-serializable. No state changed.
        """
        entry = self._awaiting_input.get(request_id)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not awaiting input")
        if input_responses is not None and not isinstance(input_responses, Mapping):
            raise LocalProtocolError("input_responses must be a mapping")
        problem = _modern.input_responses_problem(entry.asked or {}, input_responses or {})
        if problem is not None:
            raise LocalProtocolError(f"cannot retry with these answers: {problem}")
        if entry.rounds >= self.config.max_input_rounds:
            raise LocalProtocolError(
                f"gave up after {entry.rounds} input-required rounds (max_input_rounds)"
            )
        self._check_open()
        params = _modern.build_retry_params(
            entry.params or {}, input_responses, entry.request_state
        )
        rid = self._next_id + 1
        token = entry.progress_token
        if token is not None:
            params = _modern.attach_meta(params, {"progressToken": rid})
            token = rid
        payload = dumps(request(rid, entry.method, params))
        # Built and serialized (either may raise): now change state.
        del self._awaiting_input[request_id]
        self._next_id = rid
        new = self._register_out(rid, entry.method, params, entry.era, now, token, entry.timeout)
        new.rounds = entry.rounds
        new.origin = request_id if entry.origin is None else entry.origin
        self._queue(payload, None)
        return rid

    def reissue_request(self, request_id: RequestId, *, now: float) -> RequestId:
        """Modern client: send a request of ours again as a new request, with a new id,
        because its answer was lost: over Streamable HTTP its response stream broke
        after it was sent, and since 2026-07-28 "clients MUST re-issue it as a new
        request with a new request ID" (changelog, "Remove SSE stream resumability").

        The new request carries the params the core holds for it, an input round's
        ``inputResponses`` and ``requestState`` included (a retry of
        :meth:`retry_with_input` is re-issued as that retry), with a new
        ``_meta.progressToken`` if it had one. It keeps its start, its deadline as it
        stands (not re-armed from ``now``: the timeout and ``max_request_time`` count
        across re-issues), its ``related_request_id`` and its input rounds; a
        ``subscriptions/listen`` moves to the new id (its notifications are taken
        under it), and the events about it carry the id the call was first sent under
        as their ``origin_id``. The old id is finished: a late answer to it is dropped
        (:class:`ResponseIgnored`, ``late``), as is progress under its old token.
        Nothing is sent to cancel the old one (the broken stream was its cancellation).

        Args:
            request_id: our request in flight (not awaiting input).
            now: the current time, as for :meth:`send_request`; a request whose
                deadline is at or before it is refused (:meth:`handle_timer` times it
                out).

        Returns:
            The new request's id.

        Raises:
            LocalProtocolError: ``request_id`` is not in flight, not a modern request
                of a client, re-issued ``max_reissues`` times already
                (``ConnectionConfig``; ``0``: re-issuing is off), past its deadline,
                or the connection is closed. No state changed.
        """
        entry = self._pending.get(request_id)
        if entry is None:
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if self.role != "client" or entry.era is not _MODERN:
            raise LocalProtocolError("only a modern client's request is re-issued")
        if entry.reissues >= self.config.max_reissues:
            raise LocalProtocolError(
                f"request {request_id!r} was re-issued {entry.reissues} times (max_reissues)"
            )
        deadline = entry.deadline
        if deadline is not None and deadline <= now:
            raise LocalProtocolError(f"request {request_id!r} is past its deadline")
        self._check_open()
        rid = self._next_id + 1
        params = entry.params
        token = entry.progress_token
        if token is not None:
            params = _modern.attach_meta(params, {"progressToken": rid})
            token = rid
        payload = dumps(request(rid, entry.method, params))
        # Built and serialized (either may raise): now change state.
        self._next_id = rid
        del self._pending[request_id]
        listening = request_id in self._listening
        self._forget_out(request_id, entry, "late")
        entry.params = params
        entry.progress_token = token
        entry.last_progress = None  # (a new token: its reports count afresh)
        entry.reissues += 1
        if entry.origin is None:
            entry.origin = request_id
        self._pending[rid] = entry
        if token is not None:
            self._progress_in[token] = rid
        if listening:
            self._listening.add(rid)
        if deadline is not None:  # the same deadline, under the new id
            self._timer_seq += 1
            entry.timer_seq = seq = self._timer_seq
            heapq.heappush(self._timers, (deadline, seq, rid))
            if self._on_arm is not None:
                self._on_arm()
        self._queue(payload, entry.related)
        return rid

    def reissue_count(self, request_id: RequestId) -> int:
        """How many times our request ``request_id`` in flight was re-issued
        (:meth:`reissue_request`); 0 if never, or if it is not in flight."""
        entry = self._pending.get(request_id)
        return 0 if entry is None else entry.reissues

    def abandon_request(self, request_id: RequestId) -> None:
        """Modern client: give up on a request that awaits input (its
        :class:`InputRequired` came; no :meth:`retry_with_input` follows). Nothing is
        sent: the server holds nothing of it. An id that awaits no input is ignored.
        :meth:`cancel_request` and :meth:`forget_request` do the same for such a
        request, so a driver that cancels a call need not know which state it is in."""
        self._awaiting_input.pop(request_id, None)

    def send_failed(self) -> list[Event]:
        """Tell the core a write failed: the connection is closed as at end of input
        (and a half-close of :meth:`receive_eof` ends: nothing more can be sent, not
        even the answers a 2025-03-26 batch was holding)."""
        self._batches.clear()
        return self._end_input(False, None)  # (a last line held is dropped: none can answer)

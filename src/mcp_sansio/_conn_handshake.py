"""How a :class:`~mcp_sansio._connection.Connection` settles the era, both sides.

Client: ``initialize`` (legacy) or the ``server/discover`` probe (modern), the
envelope every modern request carries, and what the answers to both do (including the
fall-back from the probe to ``initialize``, and a new ``initialize`` in place of a session
the server forgot, with the requests held for it). Server: answering ``initialize``, and the
validation ladder of a modern request (envelope, capabilities, ``server/discover``,
``subscriptions/listen``, MRTR retries) before it is accepted.

Spec: ``2025-11-25/basic/lifecycle.mdx``, ``2026-07-28/basic/versioning.mdx``.
"""

from __future__ import annotations

from typing import Any

from . import _modern, _tasks
from ._conn_base import _LEGACY, _MODERN, _MODERN_FOREIGN, _MODERN_REVISION, _ConnectionBase
from ._conn_records import _Req
from ._errors import ErrorCode, ErrorData
from ._events import ErrorReceived, Event, HandshakeCompleted, RequestReceived
from ._json import Fragment, dumps
from ._jsonrpc import RequestId, error_response, notification, request, result_response
from ._revision_fields import fit
from ._state import HandshakeInput, transition


def _capabilities_of(version: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    """The client capabilities an ``initialize`` offering ``version`` declares: ours,
    without what that version does not define (``_revision_fields``; lifecycle.mdx:
    "Both parties MUST respect the negotiated protocol version"). No elicitation before
    2025-06-18; before 2025-11-25 no modes (``form``, ``url``) in its capability, whose
    empty object means the one kind there is, a form: declared by a client that takes
    forms, left out by one that takes URLs only. Nor the tasks extension, modern-only
    (a legacy server is not offered it either: ``without_tasks_extension``)."""
    fitted = fit("ClientCapabilities", _tasks.without_tasks_extension(capabilities), version)
    if fitted is capabilities:
        return capabilities
    out = dict(fitted)
    ours = capabilities.get("elicitation")
    if out.get("elicitation") == {} and type(ours) is dict and "url" in ours and "form" not in ours:
        del out["elicitation"]  # (URLs only: an empty object would promise forms)
    return out


class _Handshake(_ConnectionBase):
    """The handshake and era selection of :class:`Connection`."""

    __slots__ = ()  # (all in _ConnectionBase)

    # ------------------------------------------------------------------ client: opening

    def _send_initialize(self, now: float) -> RequestId:
        state = transition(self._lifecycle, HandshakeInput.INITIALIZE)
        assert state is not None
        rid = self._new_id()
        version = self._legacy_versions[0]
        params = {
            "protocolVersion": version,
            "capabilities": _capabilities_of(version, self._capabilities),
            # (no ``title`` before 2025-06-18, no ``icons``... before 2025-11-25)
            "clientInfo": fit("Implementation", self.config.implementation, version),
        }
        self._register_out(
            rid, "initialize", params, _LEGACY, now, None, self.config.request_timeout
        )
        self._lifecycle = state
        self._emit(request(rid, "initialize", params))
        return rid

    # ------------------------------------------------------------------ client: restarting

    def _restart(self, now: float) -> RequestId:
        """Start the legacy handshake over (checked by ``restart_session``): the
        verdicts cached for the old session do not hold for the new one."""
        idle = transition(self._lifecycle, HandshakeInput.RESTART)
        assert idle is not None
        self._lifecycle = idle
        self._send_ok.clear()
        self._accept_ok.clear()
        self._restarting = True
        return self._send_initialize(now)

    def _release_held(self) -> None:
        """The new session is ready: send the held requests, in order, right after
        ``notifications/initialized``.

        Every way a request ends takes it out of ``_held`` too; the ``_pending`` lookup
        is a second guard, so a held id whose request ended some other way can never
        make the answer to ``initialize`` raise."""
        self._restarting = False
        held, self._held = self._held, {}
        pending = self._pending
        for rid, entry in [(rid, pending[rid]) for rid in held if rid in pending]:
            self._emit(request(rid, entry.method, entry.params))

    def _fail_held(self, why: str, events: list[Event]) -> None:
        """The new session could not be started: the held requests end with an error
        (before the ``initialize`` failure itself is reported)."""
        self._restarting = False
        error = ErrorData(
            code=ErrorCode.INTERNAL_ERROR,
            message=f"the session was lost and a new one could not be started: {why}",
        )
        held, self._held = self._held, {}
        pending = self._pending
        for rid, entry in [(rid, pending.pop(rid)) for rid in held if rid in pending]:
            self._forget_out(rid, entry, "late")
            events.append(
                ErrorReceived(
                    request_id=rid,
                    method=entry.method,
                    error=error,
                    local=True,
                    held=True,
                    origin_id=entry.origin,
                )
            )

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
                client_capabilities=self._capabilities,
                client_info=self.config.implementation,
                log_level=log_level,
                progress_token=progress_token,
            )
            return _modern.attach_meta(params, meta)
        # Every other request of a version carries the same envelope, so it is built
        # (and its parts validated) once; a build that raises caches nothing. The dict is
        # shared by the requests' params and never mutated (attach_meta copies). It is
        # kept encoded too (a Fragment: send_request's fast path has dumps embed it).
        envelope = self._envelope
        if envelope is None or envelope[0] != version:
            meta = _modern.build_request_meta(
                protocol_version=version,
                client_capabilities=self._capabilities,
                client_info=self.config.implementation,
                log_level=self.config.log_level,
            )
            envelope = self._envelope = (version, meta, Fragment(dumps(meta)))
        meta = envelope[1]
        if progress_token is not None:  # our own request id: valid, and goes last
            meta = {**meta, _modern.PROGRESS_TOKEN_KEY: progress_token}
        if params is None:
            return {"_meta": meta}
        if type(params) is dict and params.get("_meta") is None:
            return {**params, "_meta": meta}  # what attach_meta builds, in one step
        return _modern.attach_meta(params, meta)

    # ------------------------------------------------------------------ server: era intake

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
        self._settle_legacy_version(version)
        self._era = _LEGACY
        self._peer_capabilities = caps
        self._peer_info = info
        self._declare_capabilities()  # (what this session is told, and keeps)
        answered = transition(state, HandshakeInput.ANSWER)
        assert answered is not None
        self._lifecycle = answered
        result: dict[str, Any] = {
            "protocolVersion": version,
            # The tasks extension is modern-only: a legacy session is not offered it;
            # nor what its revision lacks (`completions` before 2025-03-26, ...).
            "capabilities": fit(
                "ServerCapabilities", _tasks.without_tasks_extension(self._capabilities), version
            ),
            "serverInfo": fit("Implementation", self.config.implementation, version),
        }
        if self.config.instructions is not None:
            result["instructions"] = self.config.instructions
        self._queue(dumps(result_response(rid, result)), rid)

    def _on_modern_request(self, msg: _Req, now: float, events: list[Event]) -> None:
        rid, method, params = msg.id, msg.method, msg.params
        if method in _MODERN_FOREIGN:
            # The ladder's first rung (validate_envelope): a method this revision does
            # not define (removed, or a server's request) is -32601 before the envelope.
            self._reject_foreign(rid, method, _MODERN_REVISION.version, events, None)
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
        # Each modern request is judged by what the server declares now (no session
        # fixed them). The fast path skips this for a method accepted here before: it
        # stays accepted on this channel.
        self._declare_capabilities()
        if self._refuse_unserved(rid, method, _MODERN_REVISION.client_requests, {}, events, None):
            return
        if method == "server/discover":
            result = _modern.build_discover_result(
                supported_versions=self._modern_versions + self._legacy_versions,
                capabilities=self._capabilities,
                server_info=self.config.implementation,
                instructions=self.config.instructions,
                ttl_ms=self.config.cache_ttl_ms,
                cache_scope=self.config.cache_scope,
            )
            self._queue(dumps(result_response(rid, result)), rid)
            return
        if method == "subscriptions/listen":
            flt = _modern.parse_listen_filter(
                params,
                max_resource_subscriptions=self.config.max_resource_subscriptions,
                max_task_ids=self.config.max_task_ids,
            )
            if isinstance(flt, ErrorData):
                self._reject(rid, flt.code, flt.message, events, None, flt.data)
                return
            if (
                flt.task_ids
                and _tasks.declares_tasks(self._capabilities)
                and not _tasks.declares_tasks(envelope.client_capabilities)
            ):
                # ext-tasks "Task Status Notifications": asking for taskIds without
                # declaring the extension MUST be an error naming what is missing.
                err = _tasks.missing_tasks_capability("notifications.taskIds")
                self._reject(rid, err.code, err.message, events, None, err.data)
                return
            refuse = self.refuse_listen
            refused = None if refuse is None else refuse(rid, params)
            if refused is not None:
                # Answered before the acknowledgement (nothing was honored), and no
                # event: the listen is well-formed, the application refused it (no
                # InvalidMessageReceived, which says the peer broke the protocol).
                self._queue(dumps(error_response(rid, refused)), rid)
                return
            # The record of a request the application never sees: the core serves it.
            self._inflight[rid] = RequestReceived(
                request_id=rid,
                method=method,
                params=params,
                era=_MODERN,
                protocol_version=envelope.protocol_version,
            )
            flt = flt.honored_by(self._capabilities)
            self._subscriptions[rid] = flt
            self._side_records = True  # (see _conn_base)
            self._emit(_modern.build_acknowledged_notification(rid, flt), rid)
            return
        # Every rung above depends only on the method and the envelope, which the fast
        # path re-checks per request: the method is settled for it. Only the revision's
        # own methods are cached: the peer names any other method it likes.
        if method in _MODERN_REVISION.client_requests:
            self._modern_accept_ok.add(method)
        input_responses = None
        state = None
        p = params or {}
        # (tasks/update's inputResponses answer a task's questions, not an MRTR round:
        # they are its params, for the handler.)
        if ("requestState" in p or "inputResponses" in p) and method != _tasks.TASKS_UPDATE:
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
                    state = self._state_codec.open(
                        token,
                        method=method,
                        params=p,
                        now=self._state_now(now),
                        principal=self.principal,
                    )
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

    # ------------------------------------------------------------------ client: the answers

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
            if self._restarting:
                self._fail_held(message, events)
            events.append(
                ErrorReceived(
                    request_id=rid,
                    method="initialize",
                    error=ErrorData(code=ErrorCode.INVALID_PARAMS, message=message),
                    local=True,
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
        self._settle_legacy_version(version)
        self._peer_capabilities = caps
        self._peer_info = info if type(info) is dict else None
        instructions = result.get("instructions")
        self._instructions = instructions if type(instructions) is str else None
        self._emit(notification("notifications/initialized", None))
        if self._restarting:
            self._release_held()
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
        kind = _modern.classify_result(result, method="server/discover")
        if isinstance(kind, ErrorData):
            # basic/index.mdx: a resultType the client does not recognise (or
            # input_required, which discover may not return) makes the result invalid.
            events.append(
                ErrorReceived(request_id=rid, method="server/discover", error=kind, local=True)
            )
            return
        supported = result.get("supportedVersions")
        if type(supported) is not list and self._legacy_versions:
            # Not a DiscoverResult: a legacy server that answers any method (versioning.mdx,
            # "Anything else identifies a legacy server").
            self._send_initialize(now)
            return
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
                    local=True,
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
        self._envelope = None  # (built for another version, if any: see send_request)
        self._peer_capabilities = caps if type(caps) is dict else {}
        self._peer_capabilities_known = type(caps) is dict
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
        data = error.data if isinstance(error.data, dict) else {}
        offered = data.get("supported")
        offered = offered if type(offered) is list else []
        if error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION and not self._probe_retried:
            common = [v for v in self._modern_versions if v in offered]
            if common:
                # versioning.mdx: a recognised modern error identifies a modern server;
                # retry with a mutually supported version.
                self._probe_retried = True
                new = self._new_id()
                params = self._modern_params(None, common[0], None)
                # (A modern server, known: no probe, a request as any other.)
                timeout = self.config.request_timeout
                self._register_out(new, "server/discover", params, _MODERN, now, None, timeout)
                self._probe_id = new
                self._emit(request(new, "server/discover", params))
                return
        if (
            self._legacy_versions
            and error.code not in _modern.MODERN_ERROR_CODES
            and not self._probe_too_large  # (only a modern server answers at length)
        ):
            self._send_initialize(now)  # not a modern server: fall back
            return
        if error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION and any(
            v in offered for v in self._legacy_versions
        ):
            # A modern server that also speaks a legacy version of ours: that version is
            # the mutually supported one, and initialize is how it is spoken. Offering
            # none, there is nothing to retry with (2026-07-28/basic/transports/stdio:
            # do not fall back to initialize).
            self._send_initialize(now)
            return
        events.append(ErrorReceived(request_id=rid, method="server/discover", error=error))

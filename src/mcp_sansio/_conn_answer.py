"""How a :class:`~mcp_sansio._connection.Connection` answers the peer's requests.

Results, errors and modern ``input_required`` results (MRTR), progress and log
notifications about a request in flight, and the end of a ``subscriptions/listen``
stream we serve. An answer for a request the peer cancelled is dropped; one that
belongs to an inbound batch waits for the rest of the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import isfinite
from typing import Any, Final

from . import _modern, _tasks
from ._conn_base import (
    _CACHEABLE_METHODS,
    _COMPLETE,
    _LEGACY,
    _LOG_RANK,
    _MODERN,
    _bad_error_parts,
    _ConnectionBase,
)
from ._conn_records import _ids_of
from ._errors import LocalProtocolError
from ._events import RequestReceived
from ._json import dumps
from ._jsonrpc import JSONRPC, RequestId, error_response, notification, result_response
from ._revision_fields import LACKING, RESULTS_FITTED, fit_result

#: The revisions whose progress notification has no ``message`` (2024-11-05: it came in
#: 2025-03-26), where send_progress leaves it out rather than fit a dict built with it.
_NO_PROGRESS_MESSAGE: Final = frozenset(
    version
    for version, lacking in LACKING.items()
    if "message" in lacking.get("ProgressNotificationParams", ())
)


class _Answering(_ConnectionBase):
    """The answering side of :class:`Connection`: replies to the peer's requests."""

    __slots__ = ()  # (all in _ConnectionBase)

    def send_result(self, request_id: RequestId, result: dict[str, Any]) -> None:
        """Answer the peer's request ``request_id`` with ``result``.

        In the modern era the core adds ``resultType``, ``_meta`` server info and
        caching hints.

        In a legacy session the result goes without the fields the negotiated revision
        lacks (lifecycle.mdx: both parties "MUST respect the negotiated protocol
        version"), by the request's method (``_revision_fields.RESULTS_FITTED``), so a
        result may be built in the newest revision's terms. A server's answers:
        ``tools/list``, ``prompts/list``, ``resources/list`` and
        ``resources/templates/list`` (each item's ``title``, ``icons``, ``_meta``,
        ``outputSchema``...), ``tools/call`` (``structuredContent`` before 2025-06-18,
        and the content blocks' later fields), ``prompts/get`` (its messages' content
        blocks) and ``resources/read`` (the contents' ``_meta``). A client's:
        ``roots/list`` (a root's ``_meta``) and ``sampling/createMessage`` (its
        content's fields). ``result`` itself is never changed. A 2025-11-25 session
        has nothing to fit.

        Left to the driver: a content block of a type the revision lacks altogether
        (``audio`` before 2025-03-26, ``resource_link`` before 2025-06-18) goes as it
        is, to be translated (to an embedded resource, a text block...) or left out
        before; and a ``tools/call`` result whose ``structuredContent`` is left out
        should carry its JSON in a text block too (tools.mdx: a tool returning
        structured content SHOULD), or an older client sees none of it. A method not
        listed (``completion/complete``, a custom one) goes as it is.

        An answer for a request the peer cancelled (or that was
        abandoned by a close) is dropped silently, however late it comes: such a
        request keeps its place against ``max_inflight_requests`` until it is
        answered (with a result or an error), so answer every
        :class:`RequestReceived`, cancelled or not.

        Raises:
            LocalProtocolError: ``request_id`` is not a request of the peer's that
                awaits an answer; ``result`` is not a mapping (the schema's ``Result``
                is an object, in both eras); or, modern era, ``result`` has a
                ``resultType`` other
                than ``"complete"`` (see :meth:`send_input_required`) -- except a
                well-formed ``"task"`` (a ``CreateTaskResult``) for a ``tools/call``
                whose envelope declared the tasks extension -- or cannot be
                decorated (see :func:`~mcp_sansio._modern.decorate_result`); or, legacy
                era, the answer to an ``elicitation/create`` does not fit its form, as
                :meth:`retry_with_input` refuses a modern one (client/elicitation.mdx:
                "Clients SHOULD validate all responses against the provided schema"),
                or, to a task-augmented one (2025-11-25 tasks), is not a well-formed
                ``CreateTaskResult``. No state changed.
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
                # method without caching hints (server_meta: our configured hints are
                # valid, and they never change).
                server_meta is not None
                and type(result) is dict
                and "resultType" not in result
                and "_meta" not in result
                and inbound.method not in _CACHEABLE_METHODS
            ):
                # (For speed, copy() and two stores: {**result, ...} builds three dicts,
                # and dict(result, ...) with keywords takes longer in C.)
                result = result.copy()
                result["resultType"] = _COMPLETE
                result["_meta"] = server_meta
            else:
                result = _modern.decorate_result(
                    inbound.method,
                    result,
                    server_info=self.config.implementation,
                    ttl_ms=self.config.cache_ttl_ms,
                    cache_scope=self.config.cache_scope,
                )
                kind = result["resultType"]  # (decorate_result made sure of a string)
                if kind != _COMPLETE:
                    self._check_result_type(kind, inbound, result)
        else:
            if type(result) is not dict:
                # The schema's Result is an object, in every revision (the modern branch's
                # decorate_result refuses the same); another mapping (MappingProxyType,
                # ChainMap) is copied, as orjson writes dicts only.
                if not isinstance(result, Mapping):
                    raise LocalProtocolError(
                        f"result must be a mapping, not {type(result).__name__}"
                    )
                result = dict(result)
            if inbound.method in self._answers_checked:
                # (One test for the rest: set with the session's version, see there.)
                result = self._checked_legacy_result(inbound, result)
        reply = {"jsonrpc": JSONRPC, "id": request_id, "result": result}
        payload = dumps(reply)  # check first (may raise), change state after
        del self._inflight[request_id]
        if self._side_records:  # (else the five tables below are empty: one test, not five)
            if (
                self._inbound_progress
                or self._inbound_log_level
                or self._subscriptions
                or self._asking
            ):
                self._forget_inbound(request_id)
            if self._batches:
                self._reply(request_id, reply, payload)
                return
            if not (
                self._inbound_progress
                or self._inbound_log_level
                or self._subscriptions
                or self._asking
            ):
                self._side_records = False  # (all five are empty again)
        # As _reply, which the closed check there cannot stop: closing empties _inflight.
        self._out.append(payload)
        if self._routing:
            self._route(request_id)

    def _checked_legacy_result(
        self, inbound: RequestReceived, result: dict[str, Any]
    ) -> dict[str, Any]:
        """send_result's legacy ``result`` for ``inbound``, whose method is one of
        ``_answers_checked``: checked, and fitted to the session's revision."""
        if inbound.method == "elicitation/create":
            params = inbound.params
            if "task" in result and isinstance(params, Mapping) and "task" in params:
                # 2025-11-25 tasks.mdx: "Receivers that accept a task-augmented
                # request MUST return a CreateTaskResult" (the form is answered later).
                _tasks.check_legacy_create_task_result(result)
            else:
                # A modern round's answers are held to the same rule (retry_with_input).
                why = _modern.elicit_result_problem(params, result)
                if why is not None:
                    raise LocalProtocolError(f"cannot send this answer: {why}")
        if self._version in LACKING and inbound.method in RESULTS_FITTED:
            # In the session's revision's terms. The one check: fit_result makes
            # neither again.
            version = self._version
            assert version is not None  # (LACKING's keys are versions)
            result = fit_result(inbound.method, result, version)
        return result

    @staticmethod
    def _check_result_type(kind: str, inbound: RequestReceived, result: dict[str, Any]) -> None:
        """A modern result that is not ``complete`` goes out only where it may.

        mrtr.mdx: an input-required result carries input requests the client declared it
        can answer, or a requestState: send_input_required checks and seals them.
        basic/index.mdx: any other type belongs to an extension; the only one we know is
        the tasks extension's ``"task"``, for a supported method whose request declared it.
        """
        if kind == _tasks.RESULT_TYPE_TASK:
            if not _tasks.may_return_task(inbound.method, inbound.client_capabilities):
                raise LocalProtocolError(
                    f"a {inbound.method} request that did not declare extensions"
                    f"[{_tasks.TASKS_EXTENSION!r}] cannot be answered with a task"
                )
            _tasks.check_create_task_result(result)
            return
        raise LocalProtocolError(
            "use send_input_required for an input_required result"
            if kind == _modern.RESULT_TYPE_INPUT_REQUIRED
            else f"resultType {kind!r}: a result is 'complete' (or input_required, through"
            " send_input_required, or 'task' where the tasks extension was declared)"
        )

    def send_error(self, request_id: RequestId, code: int, message: str, data: Any = None) -> None:
        """Answer the peer's request ``request_id`` with an error.

        Raises:
            LocalProtocolError: as for :meth:`send_result`; or ``code`` is not an
                integer (a ``bool`` is not one) or ``message`` not a string. No state
                changed.
            TypeError: ``data`` is not JSON-serializable. No state changed: the request
                can still be answered (e.g. with an error without that ``data``).
        """
        if isinstance(code, bool) or not isinstance(code, int) or not isinstance(message, str):
            raise _bad_error_parts(code, message)  # (as receive_eof's fail_inflight)
        # ErrorData(...).to_wire(), written out (two frames less per error answer).
        error: dict[str, Any] = {"code": int(code), "message": message}
        if data is not None:
            error["data"] = data
        reply = {"jsonrpc": JSONRPC, "id": request_id, "error": error}
        payload = dumps(reply)  # check first (may raise), change state after
        if self._take_inbound(request_id) is None:
            return
        self._reply(request_id, reply, payload)

    def send_input_required(
        self,
        request_id: RequestId,
        input_requests: dict[str, Any],
        *,
        state: Any = None,
        now: float,
    ) -> bool:
        """Modern server: answer ``resultType: "input_required"`` (MRTR).

        ``state`` (any JSON value) is sealed into ``requestState`` with an HMAC and
        an expiry (``config.request_state_ttl`` from ``now``); the retry delivers it
        back as ``RequestReceived.request_state``. ``now`` is the time on the clock the
        ``receive_*`` calls are given (the retry's is checked against the expiry),
        unless ``config.request_state_clock`` is set, which then gives both.

        Returns:
            ``True`` when sent; ``False`` when the client's envelope lacks a capability
            the input requests need (the request was answered with -32021 instead) or
            the request had been cancelled.

        Raises:
            LocalProtocolError: not a modern ``tools/call``, ``resources/read`` or
                ``prompts/get`` awaiting an answer, or malformed ``input_requests``.
                No state changed.
            TypeError: ``input_requests`` or ``state`` is not JSON-serializable. No
                state changed: the request can still be answered.
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
            method=inbound.method,
            params=inbound.params or {},
            state=state,
            now=self._state_now(now),
            principal=self.principal,
        )
        result = _modern.build_input_required_result(input_requests, token)
        result = _modern.decorate_result(
            inbound.method,
            result,
            server_info=self.config.implementation,
            ttl_ms=None,
            cache_scope=None,
        )
        reply = result_response(request_id, result)
        payload = dumps(reply)  # check first (may raise), change state after
        self._take_inbound(request_id)
        self._reply(request_id, reply, payload)
        return True

    def _take_inbound(self, request_id: RequestId) -> RequestReceived | None:
        inbound = self._inflight.pop(request_id, None)
        if inbound is None:
            if self._unmark_cancelled(request_id):
                return None  # (its place against max_inflight_requests is free again)
            raise LocalProtocolError(f"no request {request_id!r} awaits an answer")
        self._forget_inbound(request_id)
        return inbound

    def _reply(
        self, request_id: RequestId, obj: dict[str, Any], payload: bytes | None = None
    ) -> None:
        if self._closed and not self._answering:
            return
        batch = self._batches.pop(request_id, None) if self._batches else None
        if batch is None:
            self._queue(payload if payload is not None else dumps(obj), request_id)
            return
        batch.replies.append(obj)
        batch.waiting.discard(request_id)
        self._maybe_flush_batch(batch)

    def send_progress(
        self,
        request_id: RequestId,
        progress: float,
        total: float | None = None,
        message: str | None = None,
    ) -> bool:
        """Report progress on the peer's request ``request_id``.

        ``message`` is left out in a 2024-11-05 session, which has no such field (it
        came in 2025-03-26; lifecycle.mdx: respect the negotiated protocol version).

        Returns:
            ``False`` (nothing sent) when the peer did not ask for progress, or
            cancelled the request (or a close abandoned it) and it is not answered yet.

        Raises:
            LocalProtocolError: the request is not in flight (finished or unknown),
                ``progress`` does not increase, ``progress`` or ``total`` is not a number
                (an ``int`` or ``float``, not a ``bool``) or is NaN or an infinity (JSON
                has neither), ``message`` is not a string, or a modern client tries to
                send progress (it flows server to client only). No state changed.
        """
        if (
            isinstance(progress, bool)
            or not isinstance(progress, int | float)
            or (
                total is not None
                and (isinstance(total, bool) or not isinstance(total, int | float))
            )
        ):
            raise LocalProtocolError(f"progress and total are numbers: {progress!r}, {total!r}")
        if message is not None and not isinstance(message, str):
            raise LocalProtocolError(f"a progress message is a string, not {message!r}")
        if self.role == "client" and self._era is _MODERN:
            raise LocalProtocolError("in the modern era progress flows server to client only")
        inbound = self._inflight.get(request_id)
        if inbound is None:
            if request_id in self._cancelled_in:
                return False
            raise LocalProtocolError(f"request {request_id!r} is not in flight")
        if inbound.progress_token is None:
            return False
        if not isfinite(progress) or (total is not None and not isfinite(total)):
            # NaN would pass the increase check below and go out as null.
            raise LocalProtocolError(f"progress {progress} of {total} is not a finite number")
        last = self._inbound_progress.get(request_id)
        if last is not None and progress <= last:
            raise LocalProtocolError(f"progress must increase ({progress} after {last})")
        self._inbound_progress[request_id] = progress
        self._side_records = True
        params: dict[str, Any] = {"progressToken": inbound.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and self._version not in _NO_PROGRESS_MESSAGE:
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

        Only when we declared ``logging`` (both eras). Legacy: when ``level`` is at or
        above the level the client set with ``logging/setLevel`` (all levels before it
        set one). Modern: only for an in-flight ``request_id`` whose envelope set a
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
        if self._closed and (not self._answering or request_id not in self._inflight):
            return False  # (after a half-close, only about a request still answerable)
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if "logging" not in self._capabilities:
            return False  # server/utilities/logging: who sends them MUST declare logging
        inbound = None if request_id is None else self._inflight.get(request_id)
        if inbound is not None and inbound.era is _MODERN:
            if not _modern.should_log(self._inbound_log_level.get(inbound.request_id), level):
                return False
            self._emit(notification("notifications/message", params), request_id)
            return True
        if self._era is not _LEGACY:
            return False
        if self._log_level is not None and _LOG_RANK[level] < _LOG_RANK[self._log_level]:
            return False
        self._emit(notification("notifications/message", params), request_id)
        return True

    def end_subscription(self, subscription_id: RequestId, *, notify: bool = True) -> None:
        """Modern server: end a ``subscriptions/listen`` gracefully: its result is sent
        (``subscriptions.mdx``, "Graceful Closure": SHOULD), then, with ``notify``, the
        ``notifications/cancelled`` naming it that ends its stream where every
        subscription shares one channel (stdio, WebSocket, in memory:
        ``cancellation.mdx``, a server MUST send it when it tears a subscription
        down). Over Streamable HTTP the response's close ends the stream: pass
        ``notify=False`` (:class:`~mcp_sansio.http.HttpServer` does).

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
        if notify:
            params = {"requestId": subscription_id, "reason": "the subscription ended"}
            self._emit(notification("notifications/cancelled", params), subscription_id)

    def subscriptions(self) -> tuple[RequestId, ...]:
        """Modern server: the ids of the ``subscriptions/listen`` streams being served."""
        return _ids_of(self._subscriptions)

    def listens_for(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Modern server: whether a ``subscriptions/listen`` stream being served asks
        for this notification (what :meth:`send_notification` would route to one),
        so that a caller can skip a connection that would take nothing."""
        return any(flt.matches(method, params) for flt in self._subscriptions.values())

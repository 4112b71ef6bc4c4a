"""The receiving side of a :class:`~mcp_sansio._connection.Connection`.

``receive_bytes``, ``receive_message`` (with the fast path of the common message) and
``receive_eof``, and the general path behind them: decoding and batches, then one
dispatcher each for the peer's requests, notifications (progress, cancellation,
``notifications/initialized``, subscription notifications) and responses. Messages
that move the handshake are handed to :class:`_Handshake`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from . import _modern, _tasks
from ._conn_base import (
    _CLIENT_CAPABILITIES_KEY,
    _CLIENT_INFO_KEY,
    _COMPLETE,
    _HANDSHAKE_METHODS,
    _LEGACY,
    _LOG_LEVEL_KEY,
    _LOG_RANK,
    _MODERN,
    _MODERN_REVISION,
    _PROGRESS_TOKEN_KEY,
    _PROTOCOL_VERSION_KEY,
    _bad_error_parts,
)
from ._conn_handshake import _Handshake
from ._conn_records import _Batch, _ids_of, _Outbound, _Req
from ._errors import ErrorCode, ErrorData
from ._events import (
    _REQUEST_RECEIVED_BLANK,
    _RESULT_RECEIVED_BLANK,
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
    ResponseIgnored,
    ResultReceived,
    SubscriptionNotificationReceived,
)
from ._framing import _HEAD_SIZE, _TAIL_SIZE, MessageTooLarge
from ._json import JSONDecodeError, dumps, loads
from ._jsonrpc import (
    JSONRPC,
    ErrorResponse,
    Invalid,
    RequestId,
    classify,
    error_response,
    is_request_id,
    parse_error,
    result_response,
)
from ._state import (
    PRE_READY_REQUESTS,
    SERVING_STATES,
    HandshakeInput,
    LifecycleState,
    transition,
)
from ._versions import FOREIGN_METHODS

#: Server requests whose params a client checks against its capabilities each time.
_PER_REQUEST: Final = frozenset({"elicitation/create", "sampling/createMessage"})

#: Requests the core answers (or refuses) itself, at once and without an in-flight place:
#: the in-flight bound does not apply to them (ping.mdx: "The receiver MUST respond
#: promptly with an empty response", also when the application is busy).
_CORE_ANSWERED: Final = frozenset({"ping", "server/discover", "logging/setLevel"})


_QUOTED_LENGTH: Final = 60


def _quoted(value: object) -> str:
    """``repr(value)`` for a message, of the peer's value: at most ``_QUOTED_LENGTH``
    characters of it, then how many more there were."""
    text = repr(value)
    if len(text) <= _QUOTED_LENGTH:
        return text
    return f"{text[:_QUOTED_LENGTH]}... ({len(text) - _QUOTED_LENGTH} more characters)"


def undeclared_request(method: str, params: object, capabilities: Mapping[str, Any]) -> str | None:
    """Why a server's request to a client asks for more than the client's
    ``capabilities`` declare; ``None`` when they cover it.

    One rule for both eras: a legacy ``elicitation/create`` or ``sampling/createMessage``
    request (refused with -32602) and a modern ``inputRequests`` entry (the whole
    input-required result is refused): "Servers MUST NOT send an inputRequests that the
    client has not declared support for" (basic/patterns/mrtr), an elicitation in an
    undeclared mode MUST get -32602 (client/elicitation), and tool-enabled sampling
    (``tools`` or ``toolChoice``) needs ``sampling.tools`` (client/sampling). Other
    methods are left to the caller (a legacy request's own capability is checked
    before: -32601).
    """
    given = params if isinstance(params, Mapping) else {}
    if method == "elicitation/create":
        mode = given.get("mode", "form")
        if type(mode) is not str or mode not in _modern.elicitation_modes(
            capabilities.get("elicitation")
        ):
            return f"elicitation mode {_quoted(mode)} was not declared in the client's capabilities"
    elif method == "sampling/createMessage":
        declared = capabilities.get("sampling")
        if not isinstance(declared, Mapping):
            return "sampling was not declared in the client's capabilities"
        if ("tools" in given or "toolChoice" in given) and not isinstance(
            declared.get("tools"), Mapping
        ):
            return "sampling.tools (tool use) was not declared in the client's capabilities"
    elif method == "roots/list" and not isinstance(capabilities.get("roots"), Mapping):
        return "roots were not declared in the client's capabilities"
    return None


def undeclared_input_request(
    input_requests: Mapping[str, Any], capabilities: Mapping[str, Any]
) -> str | None:
    """Why a modern server's ``inputRequests`` asks for more than a client that declared
    ``capabilities`` can be asked; ``None`` when every entry is covered.

    2026-07-28 basic/patterns/mrtr.mdx: "Servers MUST NOT send an inputRequests that the
    client has not declared support for in its capabilities". An entry is refused when it
    is not a request object with an ``elicitation/create``, ``sampling/createMessage`` or
    ``roots/list`` method, or asks for what :func:`undeclared_request` finds undeclared:
    sampling or roots without that capability, an elicitation in a mode not declared
    (client/elicitation.mdx: "Servers MUST NOT send elicitation requests with modes that
    are not supported by the client"), tool-enabled sampling without ``sampling.tools``.

    A :class:`~mcp_sansio.Connection` applies it to every input-required result it
    receives (the request then ends with a local :class:`~mcp_sansio.ErrorReceived`);
    it is public for questions that reach a client otherwise (a task's, in the tasks
    extension).

    Returns:
        The first refused entry's key and the reason, for people; or ``None``.
    """
    for key, entry in input_requests.items():
        if not isinstance(entry, Mapping):
            return f"inputRequests[{key!r}] is not a request object"
        method = entry.get("method")
        if method not in _modern.INPUT_REQUEST_METHODS:
            return f"inputRequests[{_quoted(key)}] asks {_quoted(method)}, no input request"
        why = undeclared_request(method, entry.get("params"), capabilities)
        if why is not None:
            return f"inputRequests[{_quoted(key)}] ({method}): {why}"
    return None


# Where JSON-RPC libraries put the id: first, after "jsonrpc" or before it, followed by
# the member that says what the message is (Python SDKs); or last (the TypeScript SDK
# writes {"result": ..., "jsonrpc": "2.0", "id": 1}), where a single closing brace after
# it shows it is a member of the top-level object. Ids: integers, strings without
# escapes. Anything else is not guessed at. Tokens are joined by JSON whitespace.
_WS = rb"[ \t\r\n]*"
_ID = rb'(-?(?:0|[1-9][0-9]{0,17})|"[^"\\\x00-\x1f]{0,128}")'
_VERSION = _WS.join([rb'"jsonrpc"', rb":", rb'"2\.0"'])
_MEMBER_ID = _WS.join([rb'"id"', rb":", _ID])
_KIND = _WS.join([rb'"(method|result|error)"', rb":"])
_ID_FIRST = re.compile(
    _WS.join(
        [
            b"",
            rb"\{",
            rb"(?:" + _WS.join([_VERSION, rb",", _MEMBER_ID]),
            rb"|" + _WS.join([_MEMBER_ID, rb",", _VERSION]) + rb")",
            rb",",
            _KIND,
        ]
    )
)
_KIND_FIRST = re.compile(_WS.join([b"", rb"\{", rb"(?:" + _VERSION + _WS + rb",)?", _KIND]))
# An answer whose id is out of sight: "jsonrpc" and "id" members may come first (an id
# of null, a number or a string with escapes), then "result" or "error". The head is
# at most _HEAD_SIZE bytes, so the scan is bounded; each alternative begins with its own
# member name and strings are read escape by escape, so the match never backtracks far.
_STRING = rb'"(?:[^"\\\x00-\x1f]|\\.)*"'
_NUMBER = rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_LEADING = (
    rb'(?:"jsonrpc"' + _WS + rb":" + _WS + _STRING
    + rb'|"id"' + _WS + rb":" + _WS + rb"(?:null|" + _NUMBER + rb"|" + _STRING + rb"))"
    + _WS + rb"," + _WS
)  # fmt: skip
_ANSWER_FIRST = re.compile(
    _WS + rb"\{" + _WS + rb"(?:" + _LEADING + rb')*"(?:result|error)"' + _WS + rb":"
)
_ID_LAST = re.compile(_WS.join([rb"[{,]", _MEMBER_ID, rb"\}", rb"\Z"]))


def _message_id(head: bytes, tail: bytes) -> tuple[RequestId, bool] | None:
    """The id of an oversize message, from its first and last bytes, and whether it is
    a request's (else an answer's); ``None`` if it cannot be seen."""
    found = _ID_FIRST.match(head)
    if found is not None:
        raw, kind = found[1] if found[1] is not None else found[2], found[3]
    else:
        first = _KIND_FIRST.match(head)
        last = _ID_LAST.search(tail)
        if first is None or last is None:
            return None
        raw, kind = last[1], first[1]
    if raw.startswith(b'"'):
        try:
            return raw[1:-1].decode(), kind == b"method"
        except UnicodeDecodeError:
            return None
    return int(raw), kind == b"method"


def _is_answer(head: bytes) -> bool:
    """Whether a message whose id cannot be seen shows, first thing, that it is an
    answer (``"result"`` or ``"error"``, after any ``"jsonrpc"`` and ``"id"`` members),
    which JSON-RPC never answers."""
    return _ANSWER_FIRST.match(head) is not None


def _ends(data: bytes | bytearray | memoryview | str) -> tuple[bytes, bytes]:
    """The first and last bytes of a message, where :func:`_message_id` looks."""
    ends = data[:_HEAD_SIZE], data[-_TAIL_SIZE:]
    head, tail = (
        e.encode("utf-8", "surrogatepass") if isinstance(e, str) else bytes(e) for e in ends
    )
    return head, tail


class _Receiving(_Handshake):
    """The receiving side of :class:`Connection`: input in, events out."""

    __slots__ = ()  # (all in _ConnectionBase)

    if TYPE_CHECKING:  # (the answering side's, which Connection also is)

        def send_error(
            self, request_id: RequestId, code: int, message: str, data: Any = None
        ) -> None: ...

    def receive_bytes(self, data: bytes, *, now: float) -> list[Event]:
        """Feed bytes of a newline-delimited JSON stream (stdio).

        A line longer than ``config.max_message_size`` is discarded up to its
        newline and the stream goes on: the request it is gets -32600 under its id
        (read from the line's first or last bytes), an answer ends the request of ours
        it answers with :class:`ErrorReceived` (-32603, ``data`` of
        ``{"maxMessageSize": ...}``), and one whose id cannot be seen is reported as
        :class:`InvalidMessageReceived` (a server then answers a request's with id
        null; a client answers nothing without an id).

        ``now`` is the current time on the clock of :meth:`handle_timer`, as for every
        ``receive_*`` call (:meth:`receive_eof` needs it only while a line is held). It
        is required: a message may start a timer (a client whose
        ``server/discover`` is refused sends ``initialize``, timed from ``now``), re-arm
        one (progress), or be checked against an expiry (a ``requestState``, when
        ``config.request_state_clock`` is ``None``). A made-up ``now`` behind the real
        clock would time that ``initialize`` out at the next :meth:`handle_timer`, and
        take an expired ``requestState`` as valid.

        Once the connection is closed (:meth:`receive_eof`, :meth:`send_failed`), bytes
        are dropped and nothing is returned, as :meth:`receive_message` drops messages:
        a binding whose read races its own close need not tell the two apart.
        """
        if self._closed:
            return []
        self._splitter.feed(data)
        return self._receive_lines(now)

    def _receive_lines(self, now: float) -> list[Event]:
        events: list[Event] = []
        splitter = self._splitter
        while (item := splitter.next_message()) is not None:
            if isinstance(item, MessageTooLarge):
                self._receive_too_large(item.head, item.tail, item.limit, now, events)
                continue
            # A line is at most max_message_size bytes: receive_message takes it whole.
            events += self.receive_message(item, now=now)
        return events

    def receive_message(
        self, data: bytes | bytearray | memoryview | str, *, now: float, decoded: Any = None
    ) -> list[Event]:
        """Feed one complete JSON text (one WebSocket frame, one in-memory message).

        ``decoded``: what ``data`` parses to, when the caller has parsed it already (the
        Streamable HTTP layers read each message to route it): it is taken as it is
        instead of parsing ``data`` again, with everything else as for ``data`` alone:
        ``config.max_message_size`` applies to ``len(data)``, and a list is a batch.
        ``None`` (the default) parses ``data`` (a JSON ``null`` is parsed again, to the
        same). The caller must not change it afterwards (events hold its parts).
        An element of a batch split by the caller is :meth:`receive_decoded`'s.
        """
        if len(data) > self._max_message_size:  # (-1 once closed: see _end_input)
            if self._closed:
                return []
            too_large: list[Event] = []
            limit = self.config.max_message_size
            self._receive_too_large(*_ends(data), limit, now, too_large)
            return too_large
        if decoded is None:
            try:
                obj = loads(data)
            except JSONDecodeError as exc:
                # Malformed, or valid JSON the parser cannot hold (a number past float
                # range, a lone surrogate, nesting past its depth): answered under its id
                # if it can be seen, so the request it is (or answers) does not hang.
                unreadable: list[Event] = []
                why = parse_error(exc).error.message
                self._receive_unreadable(*_ends(data), ErrorCode.PARSE_ERROR, why, now, unreadable)
                return unreadable
        else:  # (a test on every message, paid for by the asserts left out below)
            obj = decoded
        # Fast path: the common message, delivered in one pass over the decoded dict
        # with no intermediate objects and no Python-level calls (the event is built
        # here, one slot store per field, and in one place per kind of message). It
        # is a request whose method already passed every check of the settled era
        # (_accept_ok, _modern_accept_ok) or a complete result of an ordinary request
        # of ours, and for it this does exactly what the general path (_receive_one)
        # does. Anything else, including every error and every message that touches
        # more than its own table entry, leaves by `break` *before changing any state*
        # for the general path. tests/core/test_fastpath.py checks that both paths
        # give the same events, bytes and state.
        while True:  # a block to break out of; never loops
            try:  # (subscripts, where a missing member means the general path)
                if obj["jsonrpc"] != JSONRPC:
                    break
            except (KeyError, TypeError):  # (TypeError: not an object; a batch, say)
                break
            method = obj.get("method")
            if method is None:  # a response
                try:
                    rid = obj["id"]
                    result = obj["result"]
                except KeyError:
                    break
                if (
                    type(result) is not dict
                    or "error" in obj
                    or (type(rid) is not int and type(rid) is not str)
                ):
                    break
                try:
                    entry = self._pending[rid]
                except KeyError:
                    break
                if (
                    entry.method in _HANDSHAKE_METHODS
                    or (entry.era is _MODERN and result.get("resultType", _COMPLETE) != _COMPLETE)
                    or (self._held and rid in self._held)  # (held for a new session)
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
                if len(finished) >= self._remembered_ids:
                    self._next_finished_generation()
                # ResultReceived(...), built as _events explains.
                answer = _RESULT_RECEIVED_BLANK()
                answer.request_id = rid
                answer.method = entry.method
                answer.result = result
                answer.origin_id = entry.origin
                answer.__class__ = ResultReceived
                return [answer]
            if type(method) is not str:
                break
            # No "id" (a notification: get, no exception, as they are many) or a null
            # one reads as None, and leaves with any other id that is not an int or str.
            rid = obj.get("id")
            if type(rid) is not int and type(rid) is not str:
                break
            inflight = self._inflight
            if (
                rid in inflight
                or len(inflight) >= self._max_inflight
                or (self._cancelled_in and rid in self._cancelled_in)
            ):
                break
            params = obj.get("params")
            if params is None:
                meta = None
            elif type(params) is dict:
                meta = params.get("_meta")
            else:
                break
            if meta is None:  # the legacy branch below, without a _meta (the common case)
                if method not in self._accept_ok:
                    break
                version = self._version  # (set: _accept_ok is a settled era's; no assert)
                token = caps = None
                era = _LEGACY
            elif type(meta) is not dict:
                break
            elif _PROTOCOL_VERSION_KEY in meta and self._modern_server:
                # A modern request: the envelope rungs of validate_envelope, and no
                # MRTR retry (which needs the requestState codec). (params is the dict
                # meta came from: no assert, a test per message.)
                version = meta[_PROTOCOL_VERSION_KEY]
                caps = meta.get(_CLIENT_CAPABILITIES_KEY)
                info = meta.get(_CLIENT_INFO_KEY)
                if (
                    method not in self._modern_accept_ok
                    or version not in self._modern_versions
                    or type(caps) is not dict
                    or (type(info) is not dict and (info is not None or _CLIENT_INFO_KEY in meta))
                    or "requestState" in params
                    or "inputResponses" in params
                ):
                    break
                token = None
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
                    if level is not None:  # (checked: no break below)
                        self._inbound_log_level[rid] = level
                        self._side_records = True
                era = _MODERN
            else:
                if method not in self._accept_ok:
                    break
                version = self._version  # (set: _accept_ok is a settled era's; no assert)
                caps = None
                token = meta.get("progressToken")
                if type(token) is not int and type(token) is not str:
                    token = None
                era = _LEGACY
            # RequestReceived(...), built as _events explains.
            event = _REQUEST_RECEIVED_BLANK()
            event.request_id = rid
            event.method = method
            event.params = params
            event.era = era
            event.protocol_version = version
            event.progress_token = token
            event.client_capabilities = caps
            event.input_responses = None
            event.request_state = None
            event.__class__ = RequestReceived
            inflight[rid] = event
            return [event]

        events: list[Event] = []
        if type(obj) is list:
            self._receive_batch(obj, now, events)
        else:
            self._receive_one(obj, now, events, None)
        return events

    def receive_bytes_eof(self, *, now: float) -> list[Event]:
        """The NDJSON stream of :meth:`receive_bytes` ended: an unterminated last line
        (``mcp-trio run app.py < file`` whose file lacks a final newline) is taken as a
        final message. :meth:`receive_eof` does this first by itself; call it alone to
        take that message with its ``now`` (for a half-close, say) and keep the
        connection open. Calling it again does nothing.
        """
        if self._closed:
            return []
        self._splitter.feed_eof()
        return self._receive_lines(now)

    def receive_decoded(self, obj: Any, *, now: float) -> list[Event]:
        """Feed one message already decoded: an element of a batch that the binding
        splits itself (the HTTP server routes each answer to its own POST).

        An array here is not a batch but an invalid element (-32600, id null, from a
        server; a client only reports it), as JSON-RPC 2.0 answers ``[[...]]``. Nothing
        is re-serialized, so a message nested deeper than orjson writes (254 levels) is
        taken as it is.
        """
        if self._closed:
            return []
        events: list[Event] = []
        self._receive_one(obj, now, events, None)
        return events

    def receive_eof(
        self,
        *,
        now: float | None = None,
        keep_answering: bool = False,
        fail_inflight: tuple[int, str] | None = None,
    ) -> list[Event]:
        """The input ended: no message of the peer's will arrive any more.

        An unterminated last line that :meth:`receive_bytes` holds is taken as a final
        message first (as :meth:`receive_bytes_eof` does; its events come first).
        Our requests still in flight will never be answered
        (``ConnectionClosed.unanswered``), nor those awaiting input (an
        :class:`InputRequired` not yet retried or abandoned), whose retry cannot go
        out. By default the peer's requests in flight are abandoned too
        (``ConnectionClosed.abandoned``) and nothing more is sent: what
        the core would answer by itself to that last line (a ping's result, -32700 for
        an invalid line) is not queued. What was queued before the call is left to
        drain. With ``keep_answering`` or ``fail_inflight`` the output goes on, and
        those replies are queued.

        ``keep_answering=True`` is a half-close, for a transport whose output outlives
        its input (stdio: the client closes the server's stdin to shut it down and may
        still read its stdout). The peer's requests in flight stay answerable: their
        results, errors, progress and log messages are still sent, and nothing else
        is. A later ``receive_eof()`` or :meth:`send_failed` abandons what is left and
        reports it in a second :class:`ConnectionClosed`; the replies of a 2025-03-26
        batch given so far are then queued as a partial batch rather than lost.

        ``fail_inflight=(code, message)``: a server shutting down answers the peer's
        requests in flight with this error first (it goes out: drain it), then abandons
        them as usual (``abandoned`` lists them, a late answer is dropped silently), so
        the peer is not left waiting for answers that will never come.

        ``now``: the current time, which that last line is taken at (see
        :meth:`receive_bytes`). It may be left out when no line can be held: on a message
        transport (:meth:`receive_message`), or after :meth:`receive_bytes_eof`.

        Raises:
            ValueError: ``fail_inflight`` with ``keep_answering``; or ``now`` left out
                while :meth:`receive_bytes` holds an unterminated line (or is skipping
                an oversize one). No state changed.
            LocalProtocolError: ``fail_inflight``'s code is not an integer or its
                message not a string, as :meth:`send_error` refuses them (also with
                no request in flight). No state changed.
        """
        if fail_inflight is not None:
            if keep_answering:
                raise ValueError("fail_inflight answers what keep_answering keeps open")
            code, message = fail_inflight
            if isinstance(code, bool) or not isinstance(code, int) or not isinstance(message, str):
                raise _bad_error_parts(code, message)  # (send_error's refusal)
        if self._closed:
            last = []
        else:
            splitter = self._splitter
            if now is None:
                if splitter.buffered_bytes or splitter.skipping:
                    raise ValueError("receive_eof: an unterminated last line is held: pass now")
                now = 0.0  # (not read: the splitter has no line to give)
            out = self._out
            queued = len(out)
            last = self.receive_bytes_eof(now=now)
            if not keep_answering and fail_inflight is None:
                dropped = len(out) - queued
                del out[queued:]  # (nothing more is sent: see above)
                if dropped and self._routing:
                    del self._out_ids[queued:]  # (one id a message, once one was queued)
        closing = self._end_input(keep_answering, fail_inflight)
        return closing if not last else last + closing

    def _end_input(
        self, keep_answering: bool, fail_inflight: tuple[int, str] | None
    ) -> list[Event]:
        """receive_eof, once the last line is taken (send_failed: never taken)."""
        if fail_inflight is not None and not self._closed:
            return self._fail_inflight(*fail_inflight)
        if self._closed:
            if not self._answering or keep_answering:
                return []
            # The end of a half-close: stop answering.
            self._answering = False
            abandoned = _ids_of(self._inflight)
            for batch in {id(b): b for b in self._batches.values()}.values():
                batch.waiting.clear()
                self._maybe_flush_batch(batch)
            self._abandon_inflight()
            return [ConnectionClosed(unanswered=(), abandoned=abandoned)]
        self._closed = True
        self._send_ok.clear()  # (the fast path of send_request asks only this)
        # Every message is "too large" now, so that receive_message asks _closed only
        # past its size test: a test less per message (a closed connection drops them).
        self._max_message_size = -1
        state = transition(self._lifecycle, HandshakeInput.CLOSE)
        assert state is not None
        self._lifecycle = state
        unanswered = _ids_of(self._pending)
        for rid in unanswered:
            self._forget_out(rid, self._pending[rid], "late")
        self._pending.clear()
        self._timers.clear()
        self._paused_since = None  # (no request of ours is left to hold)
        if self._awaiting_input:
            # Calls whose InputRequired the driver has not answered yet: no retry can
            # go out now, so they end here too, under the id the driver holds.
            unanswered += _ids_of(self._awaiting_input)
            self._awaiting_input.clear()
        self._probe_id = None
        self._restarting = False
        self._held.clear()
        if keep_answering and self._inflight:
            self._answering = True
            return [ConnectionClosed(unanswered=unanswered)]
        abandoned = _ids_of(self._inflight)
        self._abandon_inflight()
        return [ConnectionClosed(unanswered=unanswered, abandoned=abandoned)]

    def _fail_inflight(self, code: int, message: str) -> list[Event]:
        failed = _ids_of(self._inflight)
        for rid in failed:
            self.send_error(rid, code, message)
        (closed,) = self._end_input(False, None)
        assert isinstance(closed, ConnectionClosed)
        for rid in failed:
            self._mark_cancelled(rid)  # (answered for it: its own answer is dropped)
        return [attrs.evolve(closed, abandoned=(*failed, *closed.abandoned))]

    def _abandon_inflight(self) -> None:
        for rid in self._inflight:
            self._mark_cancelled(rid)  # (closed: no request follows to need the places)
        self._inflight.clear()
        self._subscriptions.clear()
        self._inbound_progress.clear()
        self._inbound_log_level.clear()
        self._batches.clear()
        self._asking.clear()

    def _receive_batch(self, items: list[Any], now: float, events: list[Event]) -> None:
        revision = self._revision()
        problem = why = None
        if revision is None or not revision.batching:
            problem = "Invalid Request: batches are allowed only in protocol version 2025-03-26"
            when = (
                "before a protocol version was agreed"
                if revision is None
                else f"which protocol version {revision.version} does not allow"
            )
            why = f"Answered in a batch, {when} (only 2025-03-26 allows batches)"
        elif not items:
            problem = "Invalid Request: empty batch"
        elif len(items) > self.config.max_batch_size:
            problem = f"Invalid Request: batch larger than {self.config.max_batch_size}"
            why = f"Answered in a batch larger than {self.config.max_batch_size}, refused whole"
        if problem is not None:
            self._reject(None, ErrorCode.INVALID_REQUEST, problem, events, None)
            if why is not None:
                self._fail_answered(items, why, now, events)
            return
        batch = _Batch(waiting=set(), replies=[])
        for item in items:
            self._receive_one(item, now, events, batch)
        self._maybe_flush_batch(batch)

    def _fail_answered(self, items: list[Any], why: str, now: float, events: list[Event]) -> None:
        """A refused batch's answers to requests of ours: each ends its request with
        -32603 ``why`` (one answer per request: its own is not read), where it would
        otherwise wait for an answer that already came, forever with no timeout. The
        batch's requests got the one -32600 with id null (JSON-RPC 2.0 §6) from a
        server, or nothing from a client (which answers nothing without an id)."""
        for item in items:
            if type(item) is not dict or "method" in item:
                continue
            rid = item.get("id")
            if (
                (type(rid) is int or type(rid) is str)
                and ("result" in item or "error" in item)
                and rid in self._pending
            ):
                self._answered_with_error(rid, why, now, events)

    def _receive_too_large(
        self, head: bytes, tail: bytes, limit: int, now: float, events: list[Event]
    ) -> None:
        """A message over ``limit`` bytes, unread but for its ``head`` and ``tail``.

        Every request must get exactly one answer, so its id is looked for there (see
        :func:`_message_id`). A request of the peer gets -32600 under its id; an answer
        ends the request of ours it answers with an error (-32603) instead of leaving it
        waiting forever, or is ignored like any late answer; that error's ``data`` is
        ``{"maxMessageSize": limit}``, so a caller can tell it from the peer's own -32603
        without reading its message. Without an id in sight: a server answers -32600
        with id null (JSON-RPC 2.0: the id could not be detected), unless the message
        begins as an answer (a response is never answered); then, and always for a
        client, it is only reported (:class:`InvalidMessageReceived` with no id).
        """
        if self._closed:
            return  # (as for any message after the end)
        why = f"Message too large: over {limit} bytes"
        self._receive_unreadable(
            head,
            tail,
            ErrorCode.INVALID_REQUEST,
            why,
            now,
            events,
            modern_probe=True,
            data={"maxMessageSize": limit},
        )

    def _receive_unreadable(
        self,
        head: bytes,
        tail: bytes,
        code: int,
        why: str,
        now: float,
        events: list[Event],
        *,
        modern_probe: bool = False,
        data: Any = None,
    ) -> None:
        """A message that cannot be read, but for its ``head`` and ``tail`` (see
        :meth:`_receive_too_large`): a request of the peer's gets ``code`` under its id,
        an answer ends the request of ours it answers (-32603, with ``data``).
        ``modern_probe``: such an answer to ``server/discover`` shows a modern server
        (no fallback)."""
        found = _message_id(head, tail)
        if found is not None:
            rid, is_request = found
            if not is_request:
                if rid == self._probe_id:
                    self._probe_too_large = modern_probe
                try:
                    self._answered_with_error(rid, f"{why} (the answer)", now, events, data)
                finally:
                    self._probe_too_large = False
                return
            if rid not in self._inflight:
                self._reject(rid, code, why, events, None)
                return
        elif _is_answer(head):
            # An answer whose id is out of sight (in the middle): replying would answer
            # a response, and no request of ours can be told from it. Reported only;
            # the request it answers ends by its timeout (or a close).
            error = ErrorData(code=code, message=f"{why} (an answer; its id is not in sight)")
            events.append(InvalidMessageReceived(error=error, request_id=None))
            return
        self._reject(None, code, why, events, None)  # (a client's: reported only)

    def _answered_with_error(
        self, rid: RequestId, why: str, now: float, events: list[Event], data: Any = None
    ) -> None:
        """An answer to ``rid`` came unusable: take it as an error answer (-32603, with
        ``data``), so the request ends the ordinary way (or the answer is ignored, if
        late)."""
        error = ErrorData(code=ErrorCode.INTERNAL_ERROR, message=why, data=data)
        self._receive_one(error_response(rid, error), now, events, None)

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
                return
            events.append(InvalidMessageReceived(error=msg.error, request_id=msg.id))
            if (
                msg.id is not None
                and msg.id in self._pending
                and type(obj) is dict
                and "method" not in obj
                and ("result" in obj or "error" in obj)
            ):
                # A malformed answer to a request of ours: it ends that request with an
                # error, or the request would wait for an answer that already came.
                why = f"{msg.error.message} (the peer's answer)"
                self._answered_with_error(msg.id, why, now, events)
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
        if (
            rid in self._inflight
            or rid in self._cancelled_in  # (cancelled, but its answer may still come)
            or (batch is not None and rid in batch.waiting)
        ):
            self._reject(
                rid, ErrorCode.INVALID_REQUEST, f"Duplicate request id {rid!r}", events, batch
            )
            return
        if (
            len(self._inflight) >= self._max_inflight  # (cancelled ones hold places too)
            and method not in _CORE_ANSWERED
        ):
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
            if self._modern_server and type(meta) is dict and _modern.PROTOCOL_VERSION_KEY in meta:
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
        self._on_client_side_request(msg, now, events, batch)

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
        if state not in SERVING_STATES and method not in PRE_READY_REQUESTS.get(state, frozenset()):
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
        if self._refuse_unserved(
            rid,
            method,
            revision.client_requests,
            revision.server_requests,
            events,
            batch,
            version=revision.version,
        ):
            return
        if method == "logging/setLevel":
            level = (msg.params or {}).get("level")
            if type(level) is not str or level not in _LOG_RANK:
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
        # Verdicts are cached for the revision's own methods only: the peer names any
        # other method it likes, and a cache of those would have no bound.
        if state is LifecycleState.READY and method in revision.client_requests:
            self._accept_ok.add(method)
        self._accept(msg, _LEGACY, self._version, events, batch)

    def _on_client_side_request(
        self, msg: _Req, now: float, events: list[Event], batch: _Batch | None
    ) -> None:
        rid, method = msg.id, msg.method
        if method == "ping" and self._era is not _MODERN and self._legacy_versions:
            # ping.mdx: the receiver MUST respond promptly, and lifecycle.mdx lets a
            # server ping before it has answered initialize (the era is not set yet).
            self._answer_now(rid, {}, batch)
            return
        if self._era is _MODERN or (self._era is None and not self._legacy_versions):
            self._reject(
                rid,
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method} (servers send no requests in the modern era)",
                events,
                batch,
            )
            return
        if self._era is None:
            # Still handshaking (initialize, or the era probe, unanswered): lifecycle.mdx
            # "The server SHOULD NOT send requests other than pings and logging before
            # receiving the initialized notification" (ping is answered above).
            self._reject(
                rid,
                ErrorCode.INVALID_REQUEST,
                f"Invalid Request: {method!r} before the session is initialized "
                "(only ping is answered before the initialize result)",
                events,
                batch,
            )
            return
        revision = self._revision()
        assert revision is not None and self._version is not None
        if self._refuse_unserved(
            rid,
            method,
            revision.server_requests,
            revision.client_requests,
            events,
            batch,
            version=revision.version,
        ):
            return
        if method in _PER_REQUEST:
            # An elicitation's mode and a sampling request's tools must have been declared
            # (-32602). Checked per request, so never cached for the fast path.
            why = undeclared_request(method, msg.params, self._capabilities)
            if why is not None:
                self._reject(rid, ErrorCode.INVALID_PARAMS, why, events, batch)
                return
        elif method in revision.server_requests:  # (bounded: see _on_legacy_server_request)
            self._accept_ok.add(method)  # a legacy client is READY once its era is set
        self._accept(msg, _LEGACY, self._version, events, batch)
        if method in _PER_REQUEST:  # a question for our user: our timers wait for it
            self._hold_timers(rid, now)

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
        version = self._version
        if version is None and self.role == "server" and not self._legacy_versions:
            # A modern-only server: every notification is of 2026-07-28, which removed
            # notifications/roots/list_changed and the like (changelog.mdx). A dual-era
            # server cannot tell which era a notification belongs to.
            version = _MODERN_REVISION.version
        if version is not None and method in FOREIGN_METHODS[version]:  # the era is settled
            # A standard notification of another revision (notifications/elicitation/
            # complete in a 2025-06-18 session, say): it means nothing here. Notifications
            # are never answered, so it is only reported.
            events.append(
                InvalidMessageReceived(
                    error=ErrorData(
                        code=ErrorCode.METHOD_NOT_FOUND,
                        message=f"Method not found: {method} does not exist in protocol "
                        f"version {version}",
                    )
                )
            )
            return
        if self.role == "client" and params is not None:
            meta = params.get("_meta")
            if type(meta) is dict and _modern.SUBSCRIPTION_ID_KEY in meta:
                sub_id = meta[_modern.SUBSCRIPTION_ID_KEY]
                # A list or object id is no id of ours (and cannot be looked up).
                if is_request_id(sub_id) and sub_id in self._listening:
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
        timeout = entry.timeout
        if timeout is not None and (entry.deadline is None or now + timeout > entry.deadline):
            # Progress never brings a deadline nearer: a ``now`` behind the clock the
            # request was sent by (left out, say) leaves its timer as it was.
            self._arm(rid, entry, now, timeout)
        total = params.get("total")
        message = params.get("message")
        events.append(
            ProgressReceived(
                request_id=rid,
                progress=progress,
                total=total if type(total) in (int, float) else None,
                message=message if type(message) is str else None,
                origin_id=entry.origin,
            )
        )

    def _on_cancelled(self, params: dict[str, Any] | None, events: list[Event]) -> None:
        if params is None:
            return
        rid = params.get("requestId")
        reason = params.get("reason")
        reason = reason if type(reason) is str else None
        if self.role == "client" and is_request_id(rid) and rid in self._listening:
            # The server tore down one of our subscriptions.
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
        self._forget_inbound(rid)
        if inbound.method != "subscriptions/listen":  # (which the core serves itself)
            self._mark_cancelled(rid)
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
            if self._held:
                # Answered while held for a new session (a stream of the old one, or a
                # confused server): it is done, and must not be sent again.
                self._held.pop(rid, None)
        return entry

    def _ignored(
        self, rid: RequestId | None, events: list[Event], error: ErrorData | None = None
    ) -> None:
        why = self._finished_why(rid) if rid is not None else None
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
            # mrtr.mdx: only tools/call, resources/read and prompts/get may ask for
            # input; a malformed or forbidden input_required result is invalid, and the
            # request ends with that error (nothing of it is kept for a retry).
            kind: str | ErrorData | _modern.InputRequiredResult
            if (
                type(result) is dict
                and result.get("resultType") == _tasks.RESULT_TYPE_TASK
                and _tasks.may_return_task(method, self._capabilities)
            ):
                # The tasks extension, declared by us: a CreateTaskResult is a final answer
                # to the request (the task itself is polled with further requests).
                events.append(
                    ResultReceived(
                        request_id=rid, method=method, result=result, origin_id=entry.origin
                    )
                )
                return
            kind = _modern.classify_result(result, method=method)
            if kind == "input_required":
                kind = _modern.parse_input_required(result)
                if isinstance(kind, _modern.InputRequiredResult):
                    # (a round asking what the client never declared, or one that finds
                    # the table of calls awaiting input full, ends as a malformed one)
                    kind = self._refused_input(kind.input_requests) or kind
            if isinstance(kind, ErrorData):
                events.append(
                    ErrorReceived(
                        request_id=rid,
                        method=method,
                        error=kind,
                        local=True,
                        origin_id=entry.origin,
                    )
                )
                return
            if isinstance(kind, _modern.InputRequiredResult):
                entry.rounds += 1
                entry.request_state = kind.request_state
                entry.asked = kind.input_requests
                self._awaiting_input[rid] = entry  # (_refused_input kept a place for it)
                events.append(
                    InputRequired(
                        request_id=rid,
                        method=method,
                        input_requests=kind.input_requests,
                        request_state=kind.request_state,
                        round=entry.rounds,
                        origin_id=entry.origin,
                    )
                )
                return
        events.append(
            ResultReceived(request_id=rid, method=method, result=result, origin_id=entry.origin)
        )

    def _refused_input(self, input_requests: dict[str, Any]) -> ErrorData | None:
        """The local error that refuses a round of ``input_requests`` before the
        application sees any of it, or ``None``: more questions than
        ``max_input_requests`` (-32603), one the client never declared it can answer
        (-32602, as a legacy client answers an undeclared elicitation mode:
        :func:`undeclared_input_request`), or ``max_pending_requests`` calls awaiting
        input already (-32603).

        That last bound refuses the new round, as every bound of the core refuses the
        newcomer (a send past ``max_pending_requests``, the peer's request past
        ``max_inflight_requests``): the call ends with an error while its answer is
        awaited, as any call may, and the calls already awaiting input keep their
        rounds. Dropping the oldest instead would end a call whose question may be on
        the user's screen, after its InputRequired, where no driver waits for an end
        (the Trio session would find its retry refused once the user had answered)."""
        bound = self.config.max_input_requests
        if len(input_requests) > bound:
            return ErrorData(
                code=ErrorCode.INTERNAL_ERROR,
                message=f"the server asked {len(input_requests)} questions in one round "
                f"(inputRequests); ConnectionConfig.max_input_requests is {bound}",
                data={"maxInputRequests": bound},
            )
        why = undeclared_input_request(input_requests, self._capabilities)
        if why is not None:
            return ErrorData(
                code=ErrorCode.INVALID_PARAMS,
                message=f"input_required refused: {why}",
            )
        bound = self._max_pending
        if len(self._awaiting_input) < bound:
            return None
        return ErrorData(
            code=ErrorCode.INTERNAL_ERROR,
            message="too many calls awaiting input (ConnectionConfig.max_pending_requests "
            f"is {bound}): answer or abandon them",
            data={"maxPendingRequests": bound},
        )

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
            if self._restarting:
                self._fail_held(f"initialize failed: {msg.error.message}", events)
        elif rid == self._probe_id:
            self._on_discover_error(rid, msg.error, now, events)
            return
        events.append(
            ErrorReceived(
                request_id=rid, method=entry.method, error=msg.error, origin_id=entry.origin
            )
        )

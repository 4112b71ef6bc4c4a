"""The client side of Streamable HTTP, both eras, as values in and values out.

Theory of operation
-------------------
An :class:`HttpClient` sits between a client :class:`~mcp_sansio.Connection` and an HTTP
library. For each message the connection wants sent, :meth:`HttpClient.post` builds the
POST (``Accept``, ``Content-Type``, ``MCP-Protocol-Version``, ``Mcp-Session-Id``, and for a
modern request ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*``, Base64-encoded where a
value is not plain ASCII). For each answer, :meth:`HttpClient.response` looks at the
status line and headers and returns a :class:`ClientResponse`; the binding feeds it the
body (``feed`` / ``feed_eof``) and gets back JSON-RPC message bytes to hand to
``Connection.receive_message``. Whatever goes wrong at the HTTP level (an error status,
a stream that ends early, a body too large) comes back as a JSON-RPC error response *for
the request ids of that POST*, so the connection's waiters always get exactly one answer.

Era (``2026-07-28/basic/versioning#backward-compatibility-with-initialization-based-versions``).
While the era is unknown, the first modern request is the probe: a 2xx, or a 4xx whose
body is a recognised modern JSON-RPC error (-32020, -32021, -32022, or -32601 with 404),
fixes the era as modern; any other failure fixes it as legacy and the synthesised error
carries a non-modern code, which makes the connection fall back to ``initialize``. The
result is a property of the origin: pass it back in (``era=``) to skip the probe.

Legacy sessions: the ``Mcp-Session-Id`` of the ``initialize`` response is sent on every
later request, with the negotiated version as ``MCP-Protocol-Version``.

Session expiry (``2025-11-25/basic/transports.mdx``, "Session Management"). A 404 to a
request that carried the session id means the server no longer knows that session, and
the client MUST start a new one with a new ``initialize`` sent without a session id. The
session is forgotten at once, and :attr:`ClientResponse.session_expired` says what to do:

* ``"restart"``: the session in use is gone. Start a new one
  (``Connection.restart_session``) at once, without waiting for the body: from this
  head until its ``initialize`` is answered, :meth:`post` of anything else raises
  :class:`SessionPending` (no session can carry it), and the requests it names can only
  wait for the new session.
* ``"resend"``: the request was sent on a session already replaced: nothing more to do
  than what follows.
* ``"end"``: starting over did not help: the new session was lost before it answered
  any request (or carried the GET stream), or a request sent again was refused again.
  Trying once more could loop for ever; the conversation is over: from this head on,
  :meth:`post` raises :class:`SessionEnded` (without a session a POST could only be
  refused), and every later 404 is ``"end"`` too.

Either way the server never processed a POST it answered with 404, so its requests can
be sent again unchanged on the new session: with ``"restart"`` and ``"resend"`` they are
listed in :attr:`ClientResponse.resend` (give them to ``Connection.resend_request``)
instead of failing; with ``"end"`` they fail like any HTTP error. A request sent again is
:attr:`ClientRequest.resent`, and a second 404 to it is ``"end"``. Requests whose POST
was accepted on the old session are not in the list: they may have been processed, and
their answers are lost (a stream of a replaced session is never resumed; the stream
of an ``initialize`` belongs to the session its response started). SSE
responses are tracked (last event id, ``retry``) so a stream that ends before every
request was answered can be resumed with :meth:`ClientResponse.resume` (GET with
``Last-Event-ID``), after waiting :meth:`HttpClient.resume_delay`.

Resumption (``2025-11-25/basic/transports.mdx``: after an event with an id the server
MAY close the connection at any time; the client SHOULD poll; disconnection SHOULD NOT
be read as cancelling; ``retry`` MUST be respected). A resumption the server answers
with a stream is never a failure, even when it brings nothing but a new event id (a
server that polls): it is resumed again, waiting the server's ``retry``, then twice as
long each time while no JSON-RPC message comes (:func:`reopen_delay`; junk ``data:`` is
no message), never less than :data:`MIN_REOPEN_DELAY`, so no stream is resumed in a
tight loop; the request's own timeout is the bound. A resumption that gets an error
status the server may get over (``5xx``, ``408``, ``429``), or no answer at all (the
binding's :meth:`ClientRequest.failed_again`), is tried again, counted
(:attr:`ClientRequest.failed`); past the binding's bound (:meth:`ClientRequest.given_up`)
the requests fail. Any other refusal fails them at once (the events are gone). What the
client gives up on a stream the server accepted (those, or a stream that ends with no
event id to resume from: :attr:`ClientResponse.abandoned`) the server is told of
(:func:`abandoned_request`, a ``notifications/cancelled``): it may still be working on
it. A request the client
cancels (:meth:`HttpClient.cancelled_request` finds it in the ``notifications/cancelled``
being sent) is no longer awaited (:meth:`ClientResponse.forget`): its stream is not
resumed for it.

Modern: cancellation is closing the request's stream, never a ``notifications/cancelled``
POST (:meth:`HttpClient.stream_cancellation` spots those). A modern stream is never resumed
(``2026-07-28`` removed resumability): when one breaks after the request was sent (an SSE
stream that ends before the answer; a JSON body cut short, ``feed_eof(cut_short=True)``),
the requests it leaves unanswered are listed in :attr:`ClientResponse.broken` instead of
failed, because the client MUST re-issue them as new requests with new ids (changelog
item 9); the connection owns ids, so that is the binding's to do
(``Connection.reissue_request``), or to fail them with :func:`http_error` when it will
not. Not a ``subscriptions/listen`` (it fails as before: re-listening is the
subscription's business). An error status, an answer that is whole but does not
answer, an SSE event dropped for its size (the answer, most likely, which would be too
large again) and any legacy stream never break that way. The mark is the binding's own
knowledge of its transport, never anything the server sent: a JSON-RPC error is an
answer whatever its ``data``.

Whose words. Of the errors a response synthesises, those that stand in for an answer
that never came are listed in :attr:`ClientResponse.unheard` (a ``5xx`` without a
JSON-RPC error response, such as a gateway's ``502``, whose own JSON error with no
``jsonrpc`` is quoted, below, but listed too; a stream or body that ended first; a
``202``): the server was not heard. A binding that weighs the peer's silence (a keep-alive
``ping``) must not take those for the server's answer. A JSON-RPC error response the
server sent (with an error status too, forwarded or quoted), a refusal below 500
(``401``, ``429``: something of the server's answered), a message of the server's too
deep to pass on, a ``2xx`` JSON body past ``max_body_size`` (bytes of the server's
answer came, too many to read: the error is ours, the silence is not; a body cut short
too) and a stream that ends after an SSE event past ``max_event_size`` was dropped
(likewise; on a resumed stream too, whose mark only an earlier stream of the same
request can have set, after the request went out) are the server's words: not listed.
Only a JSON-RPC error response in an error status's body is passed on as it came (the
server's code, message and data), except to a resumption: it refuses the ``GET``, and
answers none of the requests resumed, which are abandoned. Any other error status fails
its requests with an :func:`http_error` (``-32603``, ``HTTP: status ...``, quoting the
body's ``message`` if it has one), a :data:`Read` with no dict, which the bindings mark as the
transport's, heard or not: a gateway's or a rate limiter's own JSON error
(``{"error": {"code": 502, ...}}``, no ``jsonrpc``) has no JSON-RPC code to pass on.

Modern tool definitions with invalid ``x-mcp-header`` annotations are removed from
``tools/list`` results (the spec's MUST), and the valid ones are remembered so
``tools/call`` gets its ``Mcp-Param-*`` headers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Final, Literal, TypeAlias, final
from urllib.parse import urljoin, urlsplit

import attrs

from ._errors import ErrorCode, ErrorData, LocalProtocolError
from ._events import transport_errors
from ._framing import SSEDecoder, SSEEvent
from ._http_common import (
    JSON_TYPE,
    LAST_EVENT_ID,
    MCP_METHOD,
    MCP_NAME,
    MCP_NAME_KEYS,
    MCP_PARAM_PREFIX,
    MCP_PROTOCOL_VERSION,
    MCP_SESSION_ID,
    SSE_TYPE,
    HeaderInput,
    HeaderParam,
    HttpRequest,
    HttpResponse,
    _normalize_headers,
    encode_header_value,
    field_value,
    parse_header_params,
)
from ._json import JSONDecodeError, dumps, loads
from ._jsonrpc import JSONRPC, RequestId, error_response, is_request_id, notification
from ._modern import MODERN_ERROR_CODES, PROTOCOL_VERSION_KEY
from ._versions import Era

__all__ = [
    "FORGOTTEN_BEFORE_ANSWER",
    "FORGOTTEN_TWICE",
    "MAX_REOPEN_DELAY",
    "MIN_REOPEN_DELAY",
    "NEVER_REISSUED",
    "RETRY_AFTER_CAP",
    "ClientRequest",
    "ClientResponse",
    "GetDecision",
    "GetStream",
    "HttpClient",
    "HttpClientConfig",
    "SessionEnded",
    "SessionPending",
    "abandoned_request",
    "http_error",
    "pinned_http_config",
    "reissue_refused",
    "reopen_delay",
    "split_broken",
    "transport_errors",
]

_ACCEPT: Final = b"application/json, text/event-stream"
_REDIRECTS: Final = frozenset({307, 308})
_SESSION_ID_FIELD: Final = MCP_SESSION_ID.encode()
_OLD_SESSION_NOTIFICATIONS: Final = frozenset({"notifications/cancelled", "notifications/progress"})
"""Notifications about messages of the session they were written in: meaningless to the
session that replaces a lost one (see :class:`SessionPending`)."""
_PCHAR: Final = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_ORIGIN_FORM: Final = re.compile(rf"(?:/{_PCHAR}*)+(?:\?(?:{_PCHAR}|[/?])*)?")
"""``origin-form`` (RFC 9112 section 3.2.1: ``absolute-path [ "?" query ]``, RFC 3986's
characters): a request-target h11 accepts and any server can parse."""


FORGOTTEN_BEFORE_ANSWER: Final = "the server forgot the session (404) before answering"
"""The ``why`` (:func:`http_error`) of a request whose answer was coming on a session
the server forgot (:meth:`ClientResponse.lost_with`): it may have been processed, and
no answer can come any more."""
FORGOTTEN_TWICE: Final = (
    "the server forgot the HTTP session (404), and the new session started "
    "in its place too; open a new client to try again"
)
"""Why the conversation ends when a 404 is ``session_expired == "end"``, for people."""
NEVER_REISSUED: Final = frozenset({"subscriptions/listen"})
"""Methods a broken modern stream fails instead of re-issuing (:attr:`ClientResponse.broken`,
and the binding's own read of a dropped connection): a listen's subscription is keyed by
its first id, so listening again is the subscription's business."""


def _era(value: Era | str | None) -> Era | None:
    """:attr:`HttpClientConfig.era` as an :class:`Era` (``"modern"`` is ``Era.MODERN``;
    ``"auto"``, as ``ConnectionConfig.era`` spells "not known", is ``None``).

    Raises:
        ValueError: neither ``None``, ``"auto"`` nor an era's name (the message names them).
    """
    if value is None or isinstance(value, Era):
        return value
    if value == "auto":
        return None
    try:
        return Era(value)
    except ValueError:
        names = ", ".join(repr(era.value) for era in Era)
        raise ValueError(f"era must be None, 'auto' or one of {names}, not {value!r}") from None


SSE_FIELD_ROOM: Final = 1024
"""Bytes of an SSE event's bound left for its fields other than the message
(:attr:`HttpClientConfig.max_message_size`)."""


@final
@attrs.frozen(kw_only=True)
class HttpClientConfig:
    """The bounds and defaults of an :class:`HttpClient`. Each field has its own
    docstring in the source; in brief:

    Attributes:
        max_body_size: the largest JSON (or error) response body kept, in bytes.
        max_event_size: the largest SSE event, in bytes.
        max_warnings: warnings one response keeps.
        default_retry_ms: the wait before resuming a stream with no ``retry``.
        era: the era already known for this origin, if any.

    Raises:
        ValueError: an ``era`` that is neither ``None`` nor an era's name.
    """

    max_body_size: int = 16 * 1024 * 1024
    """Largest JSON (or error) response body kept, bytes; above it the request fails."""
    max_event_size: int = 4 * 1024 * 1024
    """Largest SSE event, bytes (bigger ones are dropped and reported in ``warnings``)."""
    max_warnings: int = 64
    """Warnings one response keeps (``ClientResponse.warnings``); later ones are only
    counted, so a peer sending junk for the life of a stream grows neither memory nor
    the log."""
    default_retry_ms: int = 1_000
    """Wait before resuming a stream whose server announced no ``retry``."""
    era: Era | None = attrs.field(default=None, converter=_era)
    """The era already known for this origin (cached from an earlier probe), if any: an
    :class:`Era` or its name (``"modern"`` becomes ``Era.MODERN``; another string is a
    ``ValueError``)."""

    @property
    def max_message_size(self) -> int:
        """The largest JSON-RPC message a response is sure to deliver, in bytes, whichever
        way the server answers: ``max_body_size`` for a JSON body, ``max_event_size``
        less :data:`SSE_FIELD_ROOM` for an SSE event (its ``data:``, ``id:`` and
        ``event:`` fields count towards the bound)."""
        return min(self.max_body_size, max(self.max_event_size - SSE_FIELD_ROOM, 0))

    MAX_MESSAGE_SIZE_SETTINGS: ClassVar[str] = (
        f"HttpClientConfig: min(max_body_size, max_event_size - {SSE_FIELD_ROOM})"
    )
    """What sets :attr:`max_message_size`, for messages that tell a user to raise it."""


def pinned_http_config(config: HttpClientConfig | None, era: str) -> HttpClientConfig | None:
    """``config`` for a client connection whose era is ``era`` (``ConnectionConfig.era``):
    a pinned era (not ``"auto"``) pins :attr:`HttpClientConfig.era` too, unless ``config``
    names one already. No probe then: a refusal is the server's word, not a sign to fall
    back, and its status is what the caller sees (a wrong path is a 404)."""
    if era == "auto" or (config is not None and config.era is not None):
        return config
    return attrs.evolve(config if config is not None else HttpClientConfig(), era=Era(era))


@final
@attrs.frozen(kw_only=True)
class ClientRequest:
    """An HTTP request to send, with what the client needs to read its answer."""

    request: HttpRequest
    """The request: method, target, headers, body."""
    request_ids: tuple[RequestId, ...] = ()
    """The JSON-RPC requests in the body (or, for a resumption, still unanswered)."""
    methods: tuple[str, ...] = ()
    """Their methods, in the same order."""
    modern: bool = False
    """Whether the body is a modern (per-request ``_meta``) request."""
    session_id: str | None = None
    """The ``Mcp-Session-Id`` sent, if any (a 404 then means that session is gone)."""
    resent: bool = False
    """Whether this POST sends requests again after a 404 (a second 404 ends it all)."""
    initialized: bool = False
    """Legacy: the message is ``notifications/initialized`` (a binding has the requests
    after it wait until the server has taken it)."""
    sent_again: Literal["", "retried", "resent"] = ""
    """A one-way message sent a second time (:meth:`again`): ``"retried"`` after a
    ``503`` with ``Retry-After`` (:meth:`ClientResponse.retry_delay`), ``"resent"``
    after its connection broke once it was written, before its answer's head; ``""``
    the first time."""
    dropped: int | None = None
    """A resumption: the ``max_event_size`` an SSE event of the streams it resumes was
    dropped for, if any (named should the answers never come)."""
    quiet: int = 0
    """A resumption: the attempts in a row before it (the POST's stream included) that
    brought no message; the wait before it grows with them (:meth:`HttpClient.resume_delay`)."""
    failed: int = 0
    """A resumption: the attempts in a row before it that got no stream (no connection, an
    error status the server may get over); past the binding's bound, the client gives up
    (:meth:`given_up`)."""
    problem: str = ""
    """A resumption after :attr:`failed` attempts: what the last of them got instead of a
    stream, for people."""
    retry_ms: int | None = None
    """A resumption: the ``retry`` the streams it resumes announced last, if any (an SSE
    reconnection time holds until the server sends another); ``None`` if none did."""
    last_event_id: str = ""
    """A resumption: the ``Last-Event-ID`` it sends. A stream that answers it with no event
    id of its own is resumed from this one again (SSE keeps the last event id across
    reconnections; :meth:`ClientResponse.resume`)."""

    @property
    def with_session(self) -> bool:
        """Whether ``Mcp-Session-Id`` was sent."""
        return self.session_id is not None

    @property
    def one_way(self) -> bool:
        """Whether this is a POST that carries no request (a notification, an answer to
        a request of the server's): nothing answers it but its ``202``."""
        return not self.request_ids and self.request.method == "POST"

    @property
    def resumption(self) -> bool:
        """Whether this is the ``GET`` (with ``Last-Event-ID``) that resumes the SSE stream
        of requests (legacy; :meth:`ClientResponse.resume`)."""
        return self.request.method == "GET" and bool(self.request_ids)

    def failed_again(self, why: str, waiting: Collection[RequestId] | None = None) -> ClientRequest:
        """This resumption got no stream (``why``: no connection, or the connection ended
        before an answer's head): the same resumption for its requests still ``waiting``
        (all by default), to try again once :meth:`HttpClient.resume_delay` has passed,
        unless :meth:`given_up`. (An error status is the response's to judge:
        :meth:`ClientResponse.resume`.)"""
        ids, methods = self.request_ids, self.methods
        if waiting is not None and any(rid not in waiting for rid in ids):
            kept = [(rid, m) for rid, m in zip(ids, methods, strict=True) if rid in waiting]
            ids, methods = tuple(r for r, _ in kept), tuple(m for _, m in kept)
        return attrs.evolve(
            self,
            request_ids=ids,
            methods=methods,
            quiet=self.quiet + 1,
            failed=self.failed + 1,
            problem=why,
        )

    def again(self, why: Literal["retried", "resent"]) -> ClientRequest | None:
        """This one-way message (a POST with no request) may not have been taken: the
        same POST to send once more (:attr:`sent_again` says ``why``), or ``None`` when
        it is the second already: it is lost (say so). Once, whatever the reason: a
        server that refuses or cuts every time costs one more POST, never a loop.

        ``why``: ``"retried"``, it was refused ``503`` with ``Retry-After`` (send it
        after :meth:`ClientResponse.retry_delay`); ``"resent"``, its connection broke
        after it was written, before its answer's head (send it at once, on another
        connection): the server may never have had it, and what it waits for (the
        answer to its request) would never come; had it, a second copy is harmless (an
        answer to a request no longer pending is ignored, a cancellation of a finished
        one too). Nothing is sent again after the session's ``DELETE``."""
        return None if self.sent_again else attrs.evolve(self, sent_again=why)

    def given_up(self, max_attempts: int) -> str | None:
        """Why this resumption is not tried, its requests given up (fail each with
        :func:`http_error` and tell the server, :func:`abandoned_request`), or ``None``
        to try it: more than ``max_attempts`` attempts in a row got no stream.

        Only those count: a server that answers each resumption with a stream, even one
        that brings nothing but a new event id before it closes, is there and polled
        (``2025-11-25/basic/transports.mdx``: the server MAY close the connection at
        any time, the client SHOULD poll; disconnection SHOULD NOT be read as
        cancelling), for as long as the request's own timeout allows.
        """
        if self.failed <= max_attempts:
            return None
        attempts = f"{self.failed} attempt{'' if self.failed == 1 else 's'}"
        last = f" (the last: {self.problem})" if self.problem else ""
        return f"the stream could not be resumed: {attempts} in a row failed{last}"


@final
class ReplyNotCarried(LocalProtocolError):
    """:meth:`HttpClient.post`: a response in the modern era, which has no way to carry
    one. Not a bug of the caller's: drop the message and go on."""


@final
class SessionPending(LocalProtocolError):
    """:meth:`HttpClient.post`: the session was lost (404) and the new one has not
    been started yet, so no session can carry the message. Not a bug of the caller's:
    hand :attr:`request_ids` to ``Connection.resend_request`` (they go out on the new
    session); post a notification that is :attr:`deferrable` again once the new
    session is ready (after its ``notifications/initialized``); drop anything else."""

    def __init__(self, request_ids: tuple[RequestId, ...], *, deferrable: bool = False) -> None:
        super().__init__("the session was lost and the new one is not started yet")
        self.request_ids: Final = request_ids
        """The requests of the message, to send again on the new session."""
        self.deferrable: Final = deferrable
        """The message is a notification that means as much to the new session (not a
        ``notifications/cancelled`` or ``notifications/progress``, which are about
        the old session's messages); ``False`` for a response too (to a request of
        the old session's)."""


@final
class SessionEnded(LocalProtocolError):
    """:meth:`HttpClient.post`: the server forgot the legacy session and starting a new
    one did not help (a 404 was ``session_expired == "end"``), so nothing can be sent
    any more. Not a bug of the caller's: drop the message and end the connection."""

    def __init__(self) -> None:
        super().__init__(
            "the server forgot the session, and the one started in its place too: "
            "nothing more can be sent"
        )


def http_error(request_id: RequestId, why: str, *, data: Mapping[str, Any] | None = None) -> bytes:
    """The JSON-RPC error response that fails ``request_id`` because HTTP, not the
    server, kept its answer from coming: -32603, ``"HTTP: " + why``.

    :class:`ClientResponse` synthesises these (with ``data`` ``{"httpStatus": ...}`` when
    a status came); a binding sends its connection one for a request its transport
    failed (a broken connection, a timeout), so every client words them alike.

    Args:
        request_id: the request that fails.
        why: what happened, for people.
        data: the error's ``data`` (none when empty).
    """
    error = ErrorData(
        code=ErrorCode.INTERNAL_ERROR, message=f"HTTP: {why}", data=dict(data) if data else None
    )
    return dumps(error_response(request_id, error))


def abandoned_request(request_id: RequestId, why: str) -> bytes:
    """The ``notifications/cancelled`` that tells a legacy server the client gave up on
    ``request_id``, whose stream it accepted (:attr:`ClientResponse.abandoned`,
    :meth:`ClientRequest.given_up`): the server would otherwise go on working for nobody
    (a disconnection is not a cancellation). ``why`` is the reason, clipped. The
    connection has forgotten the request already (its error came): POST this as it is."""
    params = {"requestId": request_id, "reason": f"HTTP: {why}"[:200]}
    return dumps(notification("notifications/cancelled", params))


def reissue_refused(request_id: RequestId, why: str, times: int) -> bytes:
    """The error (:func:`http_error`) that fails ``request_id``, whose modern stream broke
    (``why``), when the session does not re-issue it (again): ``why``, and how many
    ``times`` it was re-issued before, if any. Both bindings' clients word it so."""
    if times:
        why = f"{why} (re-issued {times} time{'' if times == 1 else 's'})"
    return http_error(request_id, why)


def split_broken(
    sent: ClientRequest, waiting: Collection[RequestId]
) -> tuple[tuple[RequestId, ...], tuple[RequestId, ...]]:
    """The requests of ``sent`` still ``waiting`` when the connection broke after
    ``sent`` was written whole, before its answer's head (a binding's own read): those
    that fail (a ``subscriptions/listen``, :data:`NEVER_REISSUED`), and those the
    session re-issues, each in the order sent."""
    methods = dict(zip(sent.request_ids, sent.methods, strict=True))
    rids = [rid for rid in sent.request_ids if rid in waiting]
    fail = tuple(rid for rid in rids if methods[rid] in NEVER_REISSUED)
    return fail, tuple(rid for rid in rids if rid not in fail)


def _refusal(head: HttpResponse) -> tuple[str, dict[str, Any]] | None:
    """What an error status the client does not act on says, for people, with the
    headers quoted in the error's ``data``: a redirect not followed names its
    ``Location``, a ``401`` the server's ``WWW-Authenticate`` challenge (so does a
    ``400`` or ``403`` that has one: a malformed token, RFC 6750 ``invalid_request``;
    a scope too narrow), a ``2xx`` (with a body neither JSON nor SSE) its
    ``Content-Type``."""
    if 300 <= head.status < 400 and (shown := (head.header("location") or "")[:200]):
        return f"the redirect is not followed (Location: {shown})", {"location": shown}
    if 200 <= head.status < 300:  # (neither JSON nor SSE: the spec's MUST, transports.mdx)
        ctype = head.header("content-type")
        if ctype is None:
            why = "no Content-Type (application/json or text/event-stream expected)"
            return why, {}
        shown = ctype[:200]
        why = f"Content-Type {shown!r} is neither application/json nor text/event-stream"
        return why, {"contentType": shown}
    challenge = head.header("www-authenticate")
    if head.status == 401 or (challenge and head.status in (400, 403)):
        shown = (challenge or "")[:500]
        why = (
            "the server wants authorization"
            if head.status == 401
            else "the server refused the credentials sent"
        )
        why += f" (WWW-Authenticate: {shown})" if shown else ""
        return why, {"wwwAuthenticate": shown}
    return None


Read: TypeAlias = tuple[bytes, dict[str, Any] | None]
"""A message read from a response, for the bindings (``ClientResponse._feed``): its
bytes (what :meth:`ClientResponse.feed` returns) and the dict they parse to, to hand to
``Connection.receive_message`` as ``decoded`` so that they are not parsed again;
``None`` for a message made here (an ``http_error``: no answer of the server's), which
the Connection parses (and a binding marks: ``transport_errors``)."""


def _dumps_peer(obj: Any) -> bytes | None:
    """``dumps`` of a value parsed from the peer, or ``None`` when it cannot be written.

    The parser reads JSON nested up to 1024 levels, but orjson writes at most 254: a
    deep (but valid) message read from the peer can fail to serialize again. Values
    from ``loads`` can fail in no other way.
    """
    try:
        return dumps(obj)
    except TypeError:  # orjson.JSONEncodeError: "Recursion limit reached"
        return None


def _forwarded_error(rid: RequestId, error: dict[str, Any]) -> Read:
    """The server's JSON-RPC ``error`` (whose ``code`` is an int) re-addressed to ``rid``,
    with the dict it parses to (the server's words, not an :func:`http_error`); when it
    nests too deep to serialize, the same ``code`` and ``message`` alone."""
    obj = {"jsonrpc": "2.0", "id": rid, "error": error}
    out = _dumps_peer(obj)
    if out is not None:
        return out, obj
    message = error.get("message")
    trimmed = {"code": error["code"], "message": message if type(message) is str else ""}
    obj = {"jsonrpc": "2.0", "id": rid, "error": trimmed}
    return dumps(obj), obj


@final
class ClientResponse:
    """One HTTP response being read. Feed it the body; hand what comes out to the connection.

    Do not create it yourself: :meth:`HttpClient.response` does.
    """

    # What most answers never change is a class default, shadowed per instance only
    # when set (an answer is read per request: each assignment in __init__ costs).
    session_expired: Literal["restart", "resend", "end"] | None = None
    """404 to a request that carried a session id: what to do (see the module docs);
    ``None`` for any other answer."""
    resend: tuple[RequestId, ...] = ()
    """With ``session_expired`` ``"restart"`` or ``"resend"``, once the body ended: the
    requests of this POST, which the server never processed (not cancelled
    meanwhile). Give them to ``Connection.resend_request``."""
    fell_back: bool = False
    """This answer settled the era probe as legacy: the connection will ``initialize``."""
    redirect: ClientRequest | None = None
    """For ``redirect``: the same request aimed at the new same-origin location."""
    warnings_dropped: int = 0
    """Warnings of this response past the first ``max_warnings``: counted, not kept."""
    events_with_data: int = 0
    """SSE events so far that carried a JSON-RPC message (a request, a notification, a
    response): a resumption that brings none (only a priming event, whatever its id;
    ``data:`` that is not JSON, or JSON that is not a message) brought nothing new, and
    the next waits longer (:meth:`HttpClient.resume_delay`, :func:`reopen_delay`)."""
    abandoned: tuple[RequestId, ...] = ()
    """Legacy, after :meth:`feed_eof`: the requests failed here whose stream the server
    accepted (an SSE stream that ended with no way to resume it; a resumption refused):
    the server may still be working on them (a disconnection is not a cancellation), so
    POST :func:`abandoned_request` for each, with :attr:`abandoned_why`."""
    abandoned_why: str = ""
    """Why :attr:`abandoned` were given up, for people (their errors say the same)."""
    broken: tuple[RequestId, ...] = ()
    """Modern: after :meth:`feed_eof`, the requests whose stream broke after they
    were sent, left unanswered and not failed: the binding re-issues each
    (``Connection.reissue_request``) or fails it with ``http_error(rid,
    broken_why)`` (see the module docs)."""
    broken_why: str = ""
    """Why :attr:`broken` broke, for people."""
    unheard: tuple[RequestId, ...] = ()
    """After :meth:`feed_eof`: the requests whose error is not the server's (made
    here in place of an answer that never came, or a gateway's passed on; see the
    module docs, "Whose words"), in order; their errors are the last messages it
    returned. Empty when the server answered (even with an error) or nothing was
    failed."""
    _warned = 0
    _too_large = False
    _done = False
    _problem: str | None = None
    _failed: tuple[RequestId, ...] = ()  # (the requests _fail_waiting failed, and why)
    _failed_why = ""
    _refusal: tuple[str, dict[str, Any]] | None = None  # (see _refusal)
    _retry_after: bytes | None = None  # (a one-way POST refused 503: see retry_delay)

    def __init__(
        self,
        client: HttpClient,
        sent: ClientRequest,
        status: int,
        kind: Literal["json", "sse", "accepted", "error", "redirect"],
    ) -> None:
        self._client = client
        self._sent = sent
        self.status: Final = status
        """The HTTP status code."""
        self.kind: Final = kind
        """``json``, ``sse``, ``accepted`` (202/204), ``error``, or ``redirect``."""
        self.warnings: list[str] = []
        """Things dropped on the way (oversize events, tools with invalid ``x-mcp-header``),
        not taken yet (:meth:`take_warnings`): the first ``max_warnings`` of this response
        (:class:`HttpClientConfig`), then a note that later ones are only counted."""
        self._body = bytearray()
        self._dropped = sent.dropped  # the bound an SSE event was dropped for, if any
        self._decoder = SSEDecoder(client.config.max_event_size) if kind == "sse" else None
        request_ids = sent.request_ids
        self._waiting = dict.fromkeys(request_ids)
        self._methods = dict(zip(request_ids, sent.methods, strict=True))
        # The session the stream belongs to: the one the request carried, or the one
        # an initialize response starts. Only a stream of the session in use resumes.
        self._session_id = sent.session_id

    # ------------------------------------------------------------------ reading

    @property
    def sent(self) -> ClientRequest:
        """The request this answers."""
        return self._sent

    @property
    def last_event_id(self) -> str:
        """The id of the last SSE event received (``""`` if none)."""
        return self._decoder.last_event_id if self._decoder is not None else ""

    @property
    def retry_ms(self) -> int:
        """The server's reconnection time (``retry``), in milliseconds: the last this
        stream (or one it resumes) announced, else ``default_retry_ms``. Wait at least
        that before :meth:`resume` (:meth:`HttpClient.resume_delay` says how long)."""
        retry = self._decoder.retry if self._decoder is not None else None
        if retry is None:
            retry = self._sent.retry_ms
        return retry if retry is not None else self._client.config.default_retry_ms

    @property
    def unanswered(self) -> tuple[RequestId, ...]:
        """Request ids of the POST not answered (yet) on this response."""
        return tuple(self._waiting)

    def retry_delay(self, now: float) -> float | None:
        """A one-way message (a POST with no request) refused ``503`` with a valid
        ``Retry-After`` (a server with no handler slot for it, or over its connection
        bound: nothing of it ran; transports.mdx): the seconds to wait before it is sent
        again (:meth:`ClientRequest.again`), at most :data:`RETRY_AFTER_CAP`; ``None``
        for any other answer (a refused one is lost).

        Args:
            now: the time, in seconds since the epoch (``time.time()``), for a
                ``Retry-After`` that is an HTTP-date.
        """
        value = self._retry_after
        delay = None if value is None else _retry_after_seconds(value, now)
        return None if delay is None else min(delay, RETRY_AFTER_CAP)

    def lost_with(self, lost: ClientResponse) -> bool:
        """Whether this answer dies with the session the ``404`` ``lost`` (``session_expired
        == "restart"``) says is gone: another answer, on that session, not a ``404`` itself
        (whose requests are sent again). Its :attr:`unanswered` requests may have been
        processed and can be answered no more: fail them (:data:`FORGOTTEN_BEFORE_ANSWER`)
        and stop reading it."""
        return (
            self is not lost
            and self.session_expired is None
            and self._sent.session_id == lost._sent.session_id
        )

    def forget(self, request_id: RequestId) -> None:
        """Stop waiting for the answer to ``request_id``: the caller cancelled it (in the
        legacy era, by sending ``notifications/cancelled``).

        No error is synthesised for it when the body ends, and it is not what keeps the
        stream resumable: once no request of this response is awaited, :meth:`resume`
        returns ``None``, so the binding can close or reuse the connection at once. An
        answer that still arrives is passed on as usual (the connection drops it). An id
        this response does not wait for is ignored.
        """
        self._waiting.pop(request_id, None)

    def take_warnings(self) -> list[str]:
        """The :attr:`warnings` not taken yet, which are forgotten: call it after each
        :meth:`feed` so that a long stream holds none."""
        taken, self.warnings = self.warnings, []
        return taken

    def _warn(self, warning: str) -> None:
        limit = self._client.config.max_warnings
        if self._warned < limit:
            self.warnings.append(warning)
        else:
            if not self.warnings_dropped:
                self.warnings.append(f"more than {limit} warnings: further ones are only counted")
            self.warnings_dropped += 1
        self._warned += 1

    def feed(self, data: bytes) -> list[bytes]:
        """Take the next piece of the body.

        Returns:
            JSON-RPC messages to give to ``Connection.receive_message`` (SSE yields them as
            they arrive; other kinds only at :meth:`feed_eof`).

        Raises:
            LocalProtocolError: called after :meth:`feed_eof`.
        """
        return [message for message, _ in self._feed(data)]

    def _feed(self, data: bytes) -> list[Read]:
        """:meth:`feed`, each message with what it parses to (see :data:`Read`)."""
        if self._done:
            raise LocalProtocolError("feed() after feed_eof()")
        if self._decoder is None:
            if not self._too_large:
                self._body += data
                if len(self._body) > self._client.config.max_body_size:
                    self._too_large = True
                    self._body.clear()
            return []
        self._decoder.feed(data)
        out: list[Read] = []
        while (item := self._decoder.next_event()) is not None:
            if not isinstance(item, SSEEvent):
                self._dropped = item.limit
                self._warn(f"dropped an SSE event over {item.limit} bytes")
            elif item.event == "message" and item.data:
                read = self._message(item.data.encode())
                if any(obj is None or _is_message(obj) for _, obj in read):
                    self.events_with_data += 1  # (junk is no progress: see the attribute)
                out.extend(read)
        return out

    def feed_eof(self, *, cut_short: bool = False) -> list[bytes]:
        """The body ended. Returns the last messages, including the synthesised errors for
        requests this response will not answer (unless :meth:`resume` can still get them).

        Args:
            cut_short: the body did not end as HTTP frames it (the connection closed or
                failed first). A modern request that a JSON body cut short leaves
                unanswered is :attr:`broken`, as one whose SSE stream ends before its
                answer is (either way).
        """
        return [message for message, _ in self._feed_eof(cut_short)]

    def _feed_eof(self, cut_short: bool) -> list[Read]:
        """:meth:`feed_eof`, each message with what it parses to (see :data:`Read`)."""
        if self._done:
            return []
        self._done = True
        modern = self._sent.modern
        if self._decoder is not None:
            self._decoder.feed_eof()
            if self.resume() is not None:
                return []
            why = "the stream ended before the response arrived"
            if self._dropped is not None:  # (the answer, most likely)
                why += (
                    f" (an SSE event over {self._dropped} bytes was dropped:"
                    " HttpClientConfig.max_event_size)"
                )
                # Our error, but the server was heard, as for a JSON body past its bound;
                # on a resumed stream too: the mark comes only from an earlier stream of
                # this same request, so the server spoke after it was sent.
                return self._abandon(self._fail_waiting(0, why, heard=True))
            if modern:
                return self._break(0, why)
            return self._abandon(self._fail_waiting(0, why))
        if self.kind == "error" and self.resume() is not None:
            return []  # (a failed resumption, tried again: its body says nothing)
        if self.kind == "json":
            if self._too_large:
                # Our error, but the server was heard: a 2xx body that grew past our
                # bound is its answer, too large to read (module docs, "Whose words").
                return self._fail_waiting(
                    self.status,
                    f"response body over {self._client.config.max_body_size} bytes"
                    " (HttpClientConfig.max_body_size)",
                    heard=True,
                )
            if cut_short and modern:
                # Whole after all, an answer; most likely cut mid-way (no warning for that).
                out = self._message(bytes(self._body), quiet=True)
                why = "the connection closed before the response body ended"
                return out + self._break(self.status, why)
            # An empty body that nothing waits on (a notification answered 200 where
            # transports.mdx says 202, a DELETE's answer) holds nothing to drop: no
            # warning, each time such a server answers (the binding notes it).
            quiet = not self._body and not self._waiting
            out = self._message(bytes(self._body), quiet=quiet)
            return out + self._fail_waiting(self.status, "the response did not answer the request")
        if self.kind == "accepted":
            return self._fail_waiting(
                self.status, "the server accepted the request without answering it"
            )
        if self.kind == "redirect":
            return []
        if self._sent.resumption and not self.session_expired:
            return self._abandon(self._error_body())  # (refused: the events are gone)
        return self._error_body()

    def resume(self) -> ClientRequest | None:
        """After the body ended: the GET that resumes this SSE stream, if one can.

        Legacy streams only, and only with an event id to resume from (this stream's;
        for a resumption that brought none, the one it sent,
        :attr:`ClientRequest.last_event_id`, unless an SSE event was dropped): a stream
        whose requests are not all answered yet, or the standalone GET stream (which has
        none).
        Also a resumption of requests that got an error status the server may get over
        (``5xx``, ``408``, ``429``): the same resumption again, counted
        (:attr:`ClientRequest.failed`); any other refusal fails them (the events are
        gone). Wait :meth:`HttpClient.resume_delay` first, and give up when
        :meth:`ClientRequest.given_up` says so.
        """
        sent = self._sent
        if sent.request_ids and not self._waiting:
            return None  # (the usual: every answer came)
        if self._client.session_id is None or self._session_id != self._client.session_id:
            return None  # (a stream of a session that is gone: its answers are lost)
        if self._decoder is None:
            if self.kind != "error" or not sent.resumption or self.session_expired:
                return None
            if not (self.status >= 500 or self.status in (408, 429)):
                return None
            return sent.failed_again(f"status {self.status}", self._waiting)
        # The id to resume from: this stream's last, else the one it was asked for (SSE
        # keeps it across reconnections). A resumed stream that brings no event at all (a
        # server with nothing new yet, a proxy's idle timeout) is polled again, quiet;
        # unless an event over max_event_size was dropped: the answer, most likely, which
        # no later stream brings (so the request fails, saying so: _feed_eof).
        last_id = self.last_event_id
        if not last_id and self._dropped is None:
            last_id = sent.last_event_id
        if sent.modern or self._client.era is Era.MODERN or not last_id:
            return None
        again = self._client._get(last_id, tuple(self._waiting), sent)
        # Progress is a message: a new event id alone is not (a polling server primes
        # each resumption with one).
        quiet = 0 if self.events_with_data else sent.quiet + 1
        announced = self._decoder.retry  # (the server's own, or None: see resume_delay)
        retry = announced if announced is not None else sent.retry_ms
        return attrs.evolve(again, dropped=self._dropped, quiet=quiet, retry_ms=retry)

    # ------------------------------------------------------------------ internals

    def _message(self, data: bytes, *, quiet: bool = False) -> list[Read]:
        """The messages of one body or event (``quiet``: none, and no warning, when it is
        not JSON)."""
        try:
            obj = loads(data)
        except JSONDecodeError:
            if not quiet:
                self._warn("dropped a body that is not JSON")
            return []
        if type(obj) is list:
            return [m for item in obj for m in self._one(item, None)]
        return self._one(obj, data)

    def _one(self, obj: Any, raw: bytes | None) -> list[Read]:
        """Track one message; return the bytes to hand to the Connection (``raw``
        as received when nothing had to change, so it is not serialized again), with
        the dict they parse to: ``obj``, or the copy changed here (what the bytes
        serialize), so that the Connection need not parse them again.

        A message that must be serialized again (a batch item, a ``tools/list`` result
        with tools dropped) but nests too deep to be is dropped with a warning; when it
        answered one of our requests, that request gets a synthesised error instead.
        """
        if type(obj) is not dict:
            self._warn("dropped a JSON value that is not a message")
            return []
        rid = obj.get("id")
        answered: RequestId | None = None
        if "method" not in obj and is_request_id(rid) and rid in self._waiting:
            answered = rid
            del self._waiting[rid]
            method = self._methods.get(rid)
            result = obj.get("result")
            if type(result) is dict:
                if method == "initialize":
                    version = result.get("protocolVersion")
                    if type(version) is str:
                        self._client.protocol_version = version
                        # An initialize result is legacy, even after a probe whose -32022
                        # (which set MODERN) offered a legacy version to fall back to.
                        self._client.era = Era.LEGACY
                elif method == "tools/list" and self._sent.modern:
                    # x-mcp-header is a 2026-07-28 extension: a legacy list is the server's.
                    kept = self._client._filter_tools(result, self._warn)
                    if kept is not result:
                        obj = {**obj, "result": kept}
                        raw = None
        if raw is not None:
            return [(raw, obj)]
        out = _dumps_peer(obj)
        if out is not None:
            return [(out, obj)]
        why = "a message nested too deep to pass on"
        self._warn(f"dropped {why}")
        if answered is None:
            return []
        data = {"httpStatus": self.status} if self.status else None
        return [(http_error(answered, why, data=data), None)]

    def _abandon(self, failed: list[Read]) -> list[Read]:
        """``failed`` are the errors of legacy requests whose stream the server accepted:
        they are :attr:`abandoned` too."""
        if failed and not self._sent.modern:
            methods = self._methods
            # (Never initialize, which the lifecycle forbids cancelling.)
            self.abandoned = tuple(r for r in self._failed if methods[r] != "initialize")
            self.abandoned_why = self._failed_why
        return failed

    def _break(self, status: int, why: str) -> list[Read]:
        """The modern stream broke before answering: the requests still waiting are
        :attr:`broken` (but a ``subscriptions/listen``, failed as before)."""
        waiting = self._waiting
        methods = self._methods
        broken = tuple(r for r in waiting if methods.get(r) not in NEVER_REISSUED)
        for rid in broken:
            del waiting[rid]
        self.broken = broken
        self.broken_why = why
        return self._fail_waiting(status, why)

    def _fail_waiting(
        self,
        status: int,
        why: str,
        extra: Mapping[str, Any] | None = None,
        *,
        heard: bool = False,
    ) -> list[Read]:
        """Fail the requests still waiting (``heard``: the error quotes the server's)."""
        waiting = self._waiting
        if not waiting:
            return []  # (every answer came: the common case, nothing to build)
        data = {"httpStatus": status, **(extra or {})} if status else extra
        out: list[Read] = [(http_error(rid, why, data=data), None) for rid in waiting]
        self._failed, self._failed_why = tuple(waiting), why
        if not heard:
            self.unheard = self._failed
        waiting.clear()
        return out

    def _error_body(self) -> list[Read]:
        status, sent, client = self.status, self._sent, self._client
        if self._problem is not None:
            return self._fail_waiting(
                status, f"status {status}: {self._problem}", heard=status < 500
            )
        error: Any = None
        obj: Any = None
        if not self._too_large and self._body:
            try:
                obj = loads(self._body)
            except JSONDecodeError:
                obj = None
            error = obj.get("error") if type(obj) is dict else None
        code = error.get("code") if type(error) is dict else None
        spoke = type(code) is int
        # Whose words (module docs): a JSON-RPC error response is the server's (passed
        # on); so is a refusal below 500 (something of the server's answered: 401, 404,
        # 429), but quoted in our error. A 5xx without one is a gateway's or a dying
        # server's, even with a JSON error body of its own (``{"error": {"code": 503,
        # ...}}``, no ``jsonrpc``): not heard, and quoted too, never passed on.
        rpc = spoke and obj.get("jsonrpc") == JSONRPC
        heard = status < 500 or rpc
        # Only an int can be a JSON-RPC error code; anything else (a list, an object, a
        # float) is an unrecognised error, never looked up (lists and objects cannot be).
        recognised = spoke and (
            code in MODERN_ERROR_CODES or (status == 404 and code == ErrorCode.METHOD_NOT_FOUND)
        )
        if sent.modern and recognised:
            if client.era is None:
                client.era = Era.MODERN
            out: list[Read] = [_forwarded_error(rid, error) for rid in self._waiting]
            self._waiting.clear()
            return out
        if self.session_expired == "end":
            return self._fail_waiting(
                status, "the server forgot the new session too; not starting another", heard=heard
            )
        if self.session_expired:
            if sent.request.method == "POST":
                self.resend = tuple(self._waiting)  # never processed: sent again
                self._waiting.clear()
                return []
            return self._fail_waiting(
                status, "the session expired before the answer came", heard=heard
            )
        if sent.modern and client.era is None and 400 <= status < 500:
            client.era = Era.LEGACY
            self.fell_back = True
            return self._fail_waiting(
                status, "not a modern MCP server; falling back to initialize", heard=heard
            )
        message = error.get("message") if type(error) is dict else None
        # A refused resumption (a GET) is no answer to the request it resumes, whatever
        # its body says: quoted in our error, which the requests fail with, abandoned.
        if rpc and type(message) is str and len(self._waiting) == 1 and not sent.resumption:
            (rid,) = self._waiting
            self._waiting.clear()
            return [_forwarded_error(rid, error)]
        detail = f"status {status}" + (f": {message}" if type(message) is str else "")
        if self._refusal is None:
            return self._fail_waiting(status, detail, heard=heard)
        why, extra = self._refusal
        detail += f"; {why}" if type(message) is str else f": {why}"
        return self._fail_waiting(status, detail, extra, heard=heard)


_MAX_TOOLS_WITH_HEADERS: Final = 4_096
"""The most tools whose ``x-mcp-header`` parameters an :class:`HttpClient` remembers
(learnt from ``tools/list``); past it, those listed longest ago are forgotten. A call to
a forgotten one goes without its ``Mcp-Param-*`` headers, which the server refuses
(-32020): then the client lists the tools again and retries."""

RETRY_AFTER_CAP: Final = 5.0
"""Seconds: the longest ``Retry-After`` a refused one-way message waits before it is sent
again (:meth:`ClientResponse.retry_delay`)."""


def _retry_after_seconds(value: bytes, now: float) -> float | None:
    """The seconds a ``Retry-After`` field's ``value`` asks to wait (RFC 9110 section
    10.2.3: a number of seconds, or an HTTP-date, for which ``now`` is the time in
    seconds since the epoch), at least 0; ``None`` when it is not valid."""
    text = value.decode("latin-1").strip()
    if text.isascii() and text.isdigit():  # (not str.isdigit's "²": no number)
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # (an HTTP-date is GMT; a malformed one names no zone)
        return None
    return max(0.0, when.timestamp() - now)


MAX_REOPEN_DELAY: Final = 30.0
"""Seconds: the longest wait before the legacy GET stream is opened again (after many
attempts in a row that brought nothing; the server's ``retry`` if longer)."""


MIN_REOPEN_DELAY: Final = 0.1
"""Seconds: the shortest wait before a legacy stream is opened again or resumed, whatever
the server's ``retry`` (``retry: 0``, one message per connection, would have the client
reconnect in a tight loop); waiting longer than ``retry`` still respects it."""


def reopen_delay(retry_ms: int, quiet: int, floor_ms: int) -> float:
    """Seconds to wait before a legacy stream (the GET stream, or a request's) is opened
    again or resumed, after ``quiet`` attempts in a row that brought no message: the
    server's ``retry`` after the first; then twice as long each time, from at least
    ``floor_ms``, up to :data:`MAX_REOPEN_DELAY` (never less than ``retry``); never less
    than :data:`MIN_REOPEN_DELAY`. A quiet server that closes its streams is polled less
    and less often, and none is reconnected to in a tight loop, by every binding alike."""
    if quiet <= 1:
        return max(retry_ms / 1000, MIN_REOPEN_DELAY)
    backoff = max(retry_ms, floor_ms) / 1000 * (1 << min(quiet - 2, 16))
    return max(retry_ms / 1000, min(backoff, MAX_REOPEN_DELAY), MIN_REOPEN_DELAY)


def _is_message(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` (read from an SSE event) is a JSON-RPC message: progress on a
    stream, unlike junk (:attr:`ClientResponse.events_with_data`)."""
    if obj.get("jsonrpc") != JSONRPC:
        return False
    return type(obj.get("method")) is str or "result" in obj or "error" in obj


def _redirect_target(base: str, location: str) -> str | None:
    """The request-target of a same-origin ``Location`` (resolved against ``base``), or
    ``None`` when it is not a valid ``origin-form`` (RFC 9112 section 3.2.1).

    The raw value is checked too: ``urlsplit`` silently drops tabs and line breaks,
    which would aim the request somewhere the server never named. A fragment is not
    part of a request-target and is left out.
    """
    if not all(0x21 <= ord(c) <= 0x7E for c in location):
        return None
    parts = urlsplit(urljoin(base, location))
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return target if _ORIGIN_FORM.fullmatch(target) else None


# ================================================================================ the client


@final
class HttpClient:
    """The Streamable HTTP rules of an MCP client for one endpoint URL, no I/O.

    Args:
        url: the MCP endpoint, ``http://`` or ``https://``.
        config: bounds and defaults, documented on :class:`HttpClientConfig`.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL.
    """

    def __init__(self, url: str, config: HttpClientConfig | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an absolute http(s) URL: {url!r}")
        self.config: Final = config if config is not None else HttpClientConfig()
        self.url: str = url
        self._origin = self._origin_of(url)
        self._host = parts.netloc.rpartition("@")[2]
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.era: Era | None = self.config.era
        """The origin's era, once known (see the module docs)."""
        self.session_id: str | None = None
        """Legacy: the session id the server gave, once initialized."""
        self.protocol_version: str | None = None
        """Legacy: the negotiated version (from the ``initialize`` result)."""
        self._tool_params: dict[str, tuple[HeaderParam, ...]] = {}
        # Session expiry (see the module docs): a session was lost and the initialize
        # of the next one is not answered yet; the session in use replaces a lost one
        # and has neither answered a request nor carried the GET stream yet; the
        # requests refused with 404 and not sent again yet (a 404 to a POST sending
        # one again is the end). An id leaves _lost when the answer to the POST that
        # sends it again begins (not at post(), which may be called again for the same
        # message: a binding's fast path that gives up) or when it is cancelled
        # (cancelled_request); one whose POST gets no answer, or that the connection
        # drops while it holds it (cancelled or timed out there, which puts nothing on
        # the wire), stays until the next loss clears the set: bounded by the requests
        # in flight at a loss.
        self._restarting = False
        self._unconfirmed = False
        self._lost: set[RequestId] = set()
        self._ended = False  # a 404 was "end": nothing more is posted
        self._post: HttpRequest | None = None  # (see _legacy_post)
        self._post_key: tuple[str | None, str | None] = (None, None)

    @staticmethod
    def _origin_of(url: str) -> tuple[str, str, int]:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        return scheme, (parts.hostname or "").lower(), port

    def resume_delay(self, again: ClientRequest) -> float:
        """Seconds to wait before the resumption ``again`` (:meth:`ClientResponse.resume`,
        :meth:`ClientRequest.failed_again`): the server's ``retry`` while its last answer
        was a stream (a server that polls is polled at its pace: "the client SHOULD
        respect the retry field", 2025-11-25 transports.mdx), at least
        :data:`MIN_REOPEN_DELAY`; without a ``retry``, or after an attempt that got no
        stream, longer after each attempt in a row that brought no message
        (:func:`reopen_delay`, from ``default_retry_ms``)."""
        if again.retry_ms is not None and not again.failed:
            return max(again.retry_ms / 1000, MIN_REOPEN_DELAY)
        floor = self.config.default_retry_ms
        retry = again.retry_ms if again.retry_ms is not None else floor
        return reopen_delay(retry, again.quiet, floor)

    # ------------------------------------------------------------------ requests

    def _base_headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (
                b"host",
                self._host.encode("idna") if not self._host.isascii() else self._host.encode(),
            )
        ]

    def post(self, payload: bytes) -> ClientRequest:
        """The POST that carries one message (or a 2025-03-26 batch) from the connection.

        Raises:
            ReplyNotCarried: in the modern era, ``payload`` is a response. Modern HTTP
                clients send none, so the connection's reply to something the server
                should not have sent (a request, a message too large) cannot travel:
                drop it, the server's mistake must not end the session.
            LocalProtocolError: ``payload`` is not a JSON-RPC message; or in the modern era
                it is ``notifications/cancelled`` (close the request's stream to cancel
                it) or a batch.
            SessionPending: a legacy session was lost and the next one is not started
                yet (see the module docs); the message cannot be sent now.
            SessionEnded: a legacy session was lost and so was the one started in its
                place (see the module docs); nothing can be sent any more.
        """
        try:
            obj = loads(payload)
        except JSONDecodeError as exc:
            raise LocalProtocolError(f"not JSON: {exc}") from exc
        items = obj if type(obj) is list else [obj]
        if type(obj) is not dict and (not items or any(type(i) is not dict for i in items)):
            raise LocalProtocolError("not a JSON-RPC message or batch")
        requests = [i for i in items if "method" in i and is_request_id(i.get("id"))]
        ids = tuple([i["id"] for i in requests])
        methods = tuple([str(i["method"]) for i in requests])
        first = items[0]
        params = first.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        modern = (
            type(obj) is dict
            and bool(requests)
            and type(meta) is dict
            and type(meta.get(PROTOCOL_VERSION_KEY)) is str
        )
        if modern:
            assert type(params) is dict and type(meta) is dict
            method = first["method"]
            headers = self._base_headers()
            headers += [(b"accept", _ACCEPT), (b"content-type", JSON_TYPE.encode())]
            headers.append((MCP_PROTOCOL_VERSION.encode(), meta[PROTOCOL_VERSION_KEY].encode()))
            headers.append((MCP_METHOD.encode(), method.encode()))
            key = MCP_NAME_KEYS.get(method)
            value = params.get(key) if key is not None else None
            if type(value) is str:
                headers.append((MCP_NAME.encode(), encode_header_value(value).encode()))
            if method == "tools/call" and type(value) is str:
                headers += self._param_headers(value, params.get("arguments"))
            return ClientRequest(
                request=HttpRequest(
                    method="POST", target=self._target, headers=headers, body=payload
                ),
                request_ids=ids,
                methods=methods,
                modern=True,
            )
        if self.era is Era.MODERN:
            if type(obj) is dict and "method" not in obj:
                raise ReplyNotCarried("modern HTTP clients send no responses")
            if any("method" not in i for i in items):
                raise LocalProtocolError("modern HTTP clients send no responses (a batch)")
            if any(i.get("method") == "notifications/cancelled" for i in items):
                raise LocalProtocolError(
                    "in the modern era cancel by closing the request's stream, not by a POST"
                )
        if self._ended:
            raise SessionEnded
        if self._restarting and "initialize" not in methods:
            method = first.get("method")
            raise SessionPending(
                ids,
                deferrable=type(obj) is dict
                and not ids
                and type(method) is str
                and method not in _OLD_SESSION_NOTIFICATIONS,
            )
        return ClientRequest(
            request=self._legacy_post().with_body(payload),
            request_ids=ids,
            methods=methods,
            session_id=self.session_id,
            resent=bool(self._lost) and any(rid in self._lost for rid in ids),
            initialized=first.get("method") == "notifications/initialized" and type(obj) is dict,
        )

    def _legacy_post(self) -> HttpRequest:
        """A legacy POST without its body: its headers are the same for each message of a
        session, so they are built (and normalized) once per session id and version."""
        key = (self.protocol_version, self.session_id)
        if self._post is None or key != self._post_key:
            headers = self._base_headers()
            headers += [(b"accept", _ACCEPT), (b"content-type", JSON_TYPE.encode())]
            if self.protocol_version is not None:
                headers.append((MCP_PROTOCOL_VERSION.encode(), self.protocol_version.encode()))
            if self.session_id is not None:
                headers.append((MCP_SESSION_ID.encode(), self.session_id.encode()))
            self._post = HttpRequest(method="POST", target=self._target, headers=headers)
            self._post_key = key
        return self._post

    def _param_headers(self, tool: str, arguments: Any) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        for param in self._tool_params.get(tool, ()):
            value = param.value_in(arguments)
            if type(value) is float and value.is_integer():
                value = int(value)
            if type(value) in (str, int, bool):
                try:
                    encoded = encode_header_value(value)
                except ValueError:
                    continue
                out.append(((MCP_PARAM_PREFIX + param.name).encode(), encoded.encode()))
        return out

    def stream_cancellation(self, payload: bytes) -> RequestId | None:
        """In the modern era, the request a ``notifications/cancelled`` message cancels.

        Do not POST such a message: close the HTTP response of that request instead
        (``2026-07-28/basic/patterns/cancellation``). ``None`` for any other message.
        """
        return self.cancelled_request(payload) if self.era is Era.MODERN else None

    def cancelled_request(self, payload: bytes) -> RequestId | None:
        """The request a ``notifications/cancelled`` message cancels, in either era
        (``None`` for any other message).

        Whatever the era, stop reading that request's answer: tell its reader
        (:meth:`ClientResponse.forget`), so a legacy SSE stream is not resumed for a
        request nobody waits for. In the modern era do not POST the message either
        (see :meth:`stream_cancellation`); in the legacy era POST it as usual. A
        request refused with 404 and not sent again yet is forgotten here too (it will
        not be sent again).
        """
        if b"notifications/cancelled" not in payload:
            return None
        try:
            obj = loads(payload)
        except JSONDecodeError:
            return None
        if type(obj) is not dict or obj.get("method") != "notifications/cancelled":
            return None
        params = obj.get("params")
        rid = params.get("requestId") if type(params) is dict else None
        if not is_request_id(rid):
            return None
        self._lost.discard(rid)  # (refused with 404 but never sent again: not any more)
        return rid

    def _get(
        self, last_event_id: str | None, ids: tuple[RequestId, ...], sent: ClientRequest | None
    ) -> ClientRequest:
        headers = [*self._base_headers(), (b"accept", SSE_TYPE.encode())]
        if self.protocol_version is not None:
            headers.append((MCP_PROTOCOL_VERSION.encode(), self.protocol_version.encode()))
        assert self.session_id is not None  # GET streams exist only in a legacy session
        headers.append((MCP_SESSION_ID.encode(), self.session_id.encode()))
        if last_event_id:
            headers.append((LAST_EVENT_ID.encode(), last_event_id.encode()))
        methods = (
            tuple(dict(zip(sent.request_ids, sent.methods, strict=True))[rid] for rid in ids)
            if sent is not None
            else ()
        )
        return ClientRequest(
            request=HttpRequest(method="GET", target=self._target, headers=headers),
            request_ids=ids,
            methods=methods,
            session_id=self.session_id,
            last_event_id=last_event_id or "",
        )

    def open_stream(self) -> ClientRequest:
        """Legacy: the GET that opens the session's stream for server-initiated messages.

        Raises:
            LocalProtocolError: no legacy session (the modern era has no GET stream).
        """
        if self.session_id is None or self.era is Era.MODERN:
            raise LocalProtocolError("a GET stream needs a legacy session")
        return self._get(None, (), None)

    def get_stream(self, max_attempts: int) -> GetStream:
        """Legacy: the rules that keep the session in use's GET stream open (see
        :class:`GetStream`), giving up after more than ``max_attempts`` attempts in a row
        that got no stream. One per session: a new session opens a stream of its own."""
        return GetStream(self, max_attempts)

    def terminate(self) -> ClientRequest | None:
        """Legacy: the DELETE that ends the session (``None`` without one). The session is
        forgotten at once; any answer (204, 405, 404) may be ignored."""
        if self.session_id is None:
            return None
        headers = [*self._base_headers(), (MCP_SESSION_ID.encode(), self.session_id.encode())]
        if self.protocol_version is not None:
            headers.append((MCP_PROTOCOL_VERSION.encode(), self.protocol_version.encode()))
        self.session_id = None
        self.protocol_version = None
        return ClientRequest(
            request=HttpRequest(method="DELETE", target=self._target, headers=headers)
        )

    # ------------------------------------------------------------------ responses

    def response(
        self,
        sent: ClientRequest,
        status: int,
        headers: HeaderInput,
        *,
        follow_redirects: bool = True,
    ) -> ClientResponse:
        """Start reading the answer to ``sent``: look at its status and headers.

        A ``307`` / ``308`` whose ``Location`` is on the same origin and resolves to a
        valid ``origin-form`` request-target (RFC 9112 section 3.2.1) is a ``redirect``
        (unless ``follow_redirects`` is false: a binding that follows none);
        any other redirect (another origin, or a target no HTTP/1.1 request line may
        carry: spaces, control characters, non-ASCII) is an ``error`` for the requests
        of ``sent`` alone. The errors synthesised for a redirect not followed name its
        ``Location``, those for a ``401`` the server's ``WWW-Authenticate`` challenge
        (both quoted in the error's ``data`` too: ``location``, ``wwwAuthenticate``).

        Returns:
            The reader: feed it the body (even for errors: a modern server explains itself
            in a JSON-RPC error body).
        """
        # Looked up by a scan each (a few lookups: cheaper than a table); an HttpResponse
        # is built only for an error (_refusal).
        fields = _normalize_headers(headers)
        ctype = field_value(fields, b"content-type")
        media = ctype.split(";", 1)[0].strip().lower() if ctype else None
        location = field_value(fields, b"location") if status in _REDIRECTS else None
        target: str | None = None
        problem: str | None = None
        kind: Literal["json", "sse", "accepted", "error", "redirect"]
        if status in (202, 204):
            kind = "accepted"
        elif media == SSE_TYPE and 200 <= status < 300:
            kind = "sse"
        elif media == JSON_TYPE and 200 <= status < 300:
            kind = "json"
        elif follow_redirects and location and self._same_origin(location):
            target = _redirect_target(self.url, location)
            if target is not None:
                kind = "redirect"
            else:
                # Fails this request only (an error like any unusable answer), never
                # the connection that would have to carry an illegal request line.
                kind = "error"
                shown = repr(location[:80])
                problem = f"the redirect's Location {shown} is not a valid request target"
        else:
            kind = "error"
        reader = ClientResponse(self, sent, status, kind)
        if kind == "error":
            reader._problem = problem
            reader._refusal = _refusal(HttpResponse(status=status, headers=fields))
            if status == 503 and sent.one_way:
                reader._retry_after = next((v for k, v in fields if k == b"retry-after"), None)
        if sent.modern and self.era is None and kind in ("json", "sse", "accepted"):
            self.era = Era.MODERN
        if target is not None:
            reader.redirect = attrs.evolve(sent, request=attrs.evolve(sent.request, target=target))
        if sent.session_id is not None and not sent.modern:
            if sent.resent:
                self._lost.difference_update(sent.request_ids)  # (a second 404 is "end")
            if status == 404:
                reader.session_expired = self._session_lost(sent)
            if (
                200 <= status < 300
                and (sent.request_ids or sent.request.method == "GET")
                and sent.session_id == self.session_id
            ):
                # The new session works: it answers a request, or carries the GET
                # stream (a client that only listens makes no requests; everything it
                # receives comes after such a head).
                self._unconfirmed = False
        if "initialize" not in sent.methods:
            return reader
        if kind != "redirect":
            self._restarting = False  # a new session, or none: post() may go on
        if kind in ("json", "sse") and (sid := field_value(fields, _SESSION_ID_FIELD)) is not None:
            if sid and all(0x21 <= ord(c) <= 0x7E for c in sid):
                self.session_id = reader._session_id = sid  # (its stream is that session's)
            else:
                reader._warn("ignored an Mcp-Session-Id that is not visible ASCII")
        return reader

    def _session_lost(self, sent: ClientRequest) -> Literal["restart", "resend", "end"]:
        """A 404 to ``sent``, which carried a session id: forget that session if it is
        the one in use, and say what to do (see the module docs)."""
        current = sent.session_id == self.session_id
        verdict: Literal["restart", "resend", "end"]
        if self._ended or sent.resent or (current and self._unconfirmed):
            verdict = "end"
            self._ended = True
        elif current:
            verdict = "restart"
            self._restarting = self._unconfirmed = True
            self._lost.clear()  # (left from an earlier loss: requests never sent again)
        else:
            verdict = "resend"
        if current:
            self.session_id = None
            self.protocol_version = None
        if verdict != "end" and sent.request.method == "POST":
            self._lost.update(sent.request_ids)
        return verdict

    def _same_origin(self, location: str) -> bool:
        try:
            return self._origin_of(urljoin(self.url, location)) == self._origin
        except ValueError:  # urlsplit: "Invalid IPv6 URL", a port that is not 0-65535
            return False

    # ------------------------------------------------------------------ tools

    def header_params(self, tool: str) -> tuple[HeaderParam, ...]:
        """The ``x-mcp-header`` parameters learnt for ``tool`` from ``tools/list``."""
        return self._tool_params.get(tool, ())

    def _learn_header_params(self, tool: str, params: tuple[HeaderParam, ...]) -> None:
        """Remember ``tool``'s header parameters as listed now: only a tool that has some
        takes room (most have none, and a server may list new names forever), the most
        recently listed last, at most :data:`_MAX_TOOLS_WITH_HEADERS`."""
        table = self._tool_params
        table.pop(tool, None)
        if params:
            table[tool] = params
            if len(table) > _MAX_TOOLS_WITH_HEADERS:
                del table[next(iter(table))]

    def _filter_tools(self, result: dict[str, Any], warn: Callable[[str], None]) -> dict[str, Any]:
        """``result`` with the tools whose ``x-mcp-header`` annotations are invalid left out
        (``streamable-http#schema-extension``), remembering the valid ones' parameters.
        Returns ``result`` itself (not a copy) when no tool was dropped."""
        tools = result.get("tools")
        if type(tools) is not list:
            return result
        kept: list[Any] = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            try:
                params = parse_header_params(
                    tool.get("inputSchema") if isinstance(tool, Mapping) else None
                )
            except ValueError as exc:
                shown = repr(name) if type(name) is str else "without a name"
                warn(f"dropped tool {shown}: {exc}")
                continue
            if type(name) is str:
                self._learn_header_params(name, params)
            kept.append(tool)
        return {**result, "tools": kept} if len(kept) != len(tools) else result


# ================================================================================ GET stream


@final
@attrs.frozen(kw_only=True)
class GetDecision:
    """What to do after an attempt at the legacy GET stream (:class:`GetStream`)."""

    action: Literal["reopen", "not_offered", "give_up", "stop"]
    """``"reopen"``: send :meth:`GetStream.request` after :attr:`delay`; ``"not_offered"``:
    the server offers no GET stream, stop quietly (not asked again in this session);
    ``"give_up"``: end the session, saying :attr:`reason`; ``"stop"``: the session the
    stream belonged to is gone (started anew, or over): a new one opens its own."""
    delay: float = 0.0
    """``"reopen"``: seconds to wait first (:func:`reopen_delay`)."""
    reason: str = ""
    """Why, for people: for ``"give_up"``, why the session ends; for ``"not_offered"``,
    what the server answered (``"status 405"``) or what the last attempt got instead."""


_STOP: Final = GetDecision(action="stop")


@final
class GetStream:
    """The legacy GET stream of one session: which GET to send next, and what to do
    after each attempt (``2025-11-25/basic/transports.mdx``, "Listening for Messages
    from the Server", "Resumability and Redelivery"). Make it with
    :meth:`HttpClient.get_stream`; both bindings' clients drive one, doing only the I/O.

    Theory of operation: the driver sends :meth:`request`, then hands over the attempt's
    outcome: :meth:`answered` with its :class:`ClientResponse` (a stream once its body
    ended; anything else from its head on), or :meth:`no_answer` (no head came, or no
    connection at all). Each returns a :class:`GetDecision`. The rules:

    * A stream that ends is resumed from the last event id seen (``Last-Event-ID``);
      one that carried no id of its own leaves that id in place, as EventSource does.
      Without one, or after a refused resumption (a status under ``500`` to a GET with
      ``Last-Event-ID``: the events are gone, a ``410`` say), the stream is opened
      afresh; that refusal is not counted as a failed attempt.
    * The wait is the last stream's ``retry`` (``default_retry_ms`` until one came),
      then twice as long for each attempt in a row that brought no JSON-RPC message,
      whatever it got (:func:`reopen_delay`): a quiet server that closes its streams is
      polled less and less often.
    * A ``405``, or any answer but a stream from a server that never gave one, means the
      server offers no GET stream: ``"not_offered"``.
    * More than ``max_attempts`` attempts in a row that got no stream (no answer, no
      connection; once a stream came, an error status too) give up: the session ends
      if a stream ever came (what the server says on its own could no longer reach the
      client, which must not look connected) or if the server cannot be reached at all;
      else (a server whose POSTs work drops every GET) there is no GET stream, quietly.

    No clock, no I/O: delays are relative seconds. A ``401`` that waits for a new token
    is the binding's (it is not an attempt here: do not hand it over).
    """

    def __init__(self, client: HttpClient, max_attempts: int) -> None:
        self._client = client
        self._max_attempts = max_attempts
        self.session_id: Final = client.session_id
        """The session whose stream this is."""
        self.opened = False
        """A stream came once (from then on only a ``405`` means "no GET stream")."""
        self.over = False
        """It gave up, or the server offers no GET stream: nothing more to send."""
        self._last: ClientResponse | None = None  # the stream to resume from
        self._retry_ms = client.config.default_retry_ms  # the last stream's retry
        self._quiet = 0  # attempts in a row that brought no message
        self._failed = 0  # attempts in a row that got no stream

    def request(self) -> ClientRequest | None:
        """The GET to send: the resumption of the last stream (from the last event id
        seen), else one that opens the stream afresh; ``None`` once it is :attr:`over`
        or its session is gone (a new session opens its own)."""
        client = self._client
        if self.over or client.session_id != self.session_id:
            return None
        again = self._last.resume() if self._last is not None else None
        if again is not None:
            return again
        try:
            return client.open_stream()
        except LocalProtocolError:
            return None  # (no legacy session)

    def answered(self, reader: ClientResponse) -> GetDecision:
        """The attempt got an answer: ``reader``, a stream once its body ended; for
        anything else its head is enough (its body changes nothing here)."""
        if reader.session_expired:
            return _STOP  # (a 404: the session is started anew, or over)
        if reader.kind == "sse":
            self.opened, self._retry_ms, self._failed = True, reader.retry_ms, 0
            self._quiet = 0 if reader.events_with_data else self._quiet + 1
            last = self._last
            if reader.last_event_id or last is None or not last.last_event_id:
                self._last = reader  # (else resumed from the last id seen, as EventSource)
            return self._next("")
        if reader.status == 405 or not self.opened:
            self.over = True
            return GetDecision(action="not_offered", reason=f"status {reader.status}")
        self._quiet += 1
        if reader.sent.last_event_id and reader.status < 500:
            self._last = None  # the resumption was refused (the events are gone): afresh
        else:
            self._failed += 1
        return self._next(f"status {reader.status}")

    def no_answer(self, problem: str, *, connected: bool = True) -> GetDecision:
        """The attempt got no answer: ``problem`` says why, for people (the connection
        closed before the head, too many redirects); ``connected`` false: no connection
        could be opened (the server cannot be reached)."""
        self._quiet += 1
        self._failed += 1
        return self._next(problem, unreachable=not connected)

    def _next(self, problem: str, *, unreachable: bool = False) -> GetDecision:
        if self._client.session_id != self.session_id:
            return _STOP
        if self._failed > self._max_attempts:
            self.over = True
            if unreachable:
                reason = f"the server cannot be reached any more: {problem}"
            elif self.opened:
                reason = f"the session's GET stream cannot be opened again: {problem}"
            else:
                # Dropped (or redirected in a loop) every time, from a server whose POSTs
                # work: it offers no GET stream after all.
                return GetDecision(action="not_offered", reason=problem)
            return GetDecision(action="give_up", reason=reason)
        floor = self._client.config.default_retry_ms
        delay = reopen_delay(self._retry_ms, self._quiet, floor)
        return GetDecision(action="reopen", delay=delay)

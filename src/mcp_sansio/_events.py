"""Events: what the core tells its driver happened.

Events are frozen values. Don't subclass them. Names are in the past tense and say
which way data moved.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias, final

import attrs

from ._errors import ErrorData
from ._jsonrpc import RequestId
from ._versions import Era

__all__ = [
    "ConnectionClosed",
    "ErrorReceived",
    "Event",
    "HandshakeCompleted",
    "InputRequired",
    "InvalidMessageReceived",
    "NotificationReceived",
    "ProgressReceived",
    "RequestCancelled",
    "RequestReceived",
    "RequestTimedOut",
    "ResponseIgnored",
    "ResultReceived",
    "SubscriptionNotificationReceived",
]


class _Weakrefable:
    """The weak-reference slot of the events built by the fast path, kept in a base.

    Not an event: it only puts ``__weakref__`` first in the layout (see the end of this
    module for why). attrs sees it there and adds no second one.
    """

    __slots__ = ("__weakref__",)


@final
@attrs.frozen(kw_only=True)
class RequestReceived(_Weakrefable):
    """The peer sent a request that the application must answer exactly once.

    Answer with :meth:`Connection.send_result` or :meth:`Connection.send_error` (or,
    for a modern ``tools/call``, ``resources/read`` or ``prompts/get``,
    :meth:`Connection.send_input_required`); answer it even if the peer cancels it
    (:class:`RequestCancelled`: the answer is dropped, and frees its place).
    """

    request_id: RequestId
    """The peer's id for this request."""
    method: str
    """The method name."""
    params: dict[str, Any] | None
    """The decoded params, untouched (including ``_meta``)."""
    era: Era
    """The era this request is served in."""
    protocol_version: str
    """The protocol version this request is served under."""
    progress_token: str | int | None = None
    """The peer's progress token, when it asked for progress."""
    client_capabilities: dict[str, Any] | None = None
    """Modern era: the capabilities from this request's envelope."""
    input_responses: dict[str, Any] | None = None
    """Modern era: the answers to an earlier input-required result (a retry)."""
    request_state: Any = None
    """Modern era: the application state sealed into the earlier input-required result."""


@final
@attrs.frozen(kw_only=True)
class NotificationReceived:
    """The peer sent a notification the core does not consume itself."""

    method: str
    """The method name."""
    params: dict[str, Any] | None
    """The decoded params."""


@final
@attrs.frozen(kw_only=True)
class SubscriptionNotificationReceived:
    """Modern era: a notification that belongs to one of our ``subscriptions/listen``."""

    subscription_id: RequestId
    """The id of the ``subscriptions/listen`` request it belongs to."""
    method: str
    """The method name."""
    params: dict[str, Any] | None
    """The decoded params."""


@final
@attrs.frozen(kw_only=True)
class ResultReceived(_Weakrefable):
    """A request of ours was answered with a (complete) result."""

    request_id: RequestId
    """Our request id."""
    method: str
    """The method of our request."""
    result: dict[str, Any]
    """The result object."""
    origin_id: RequestId | None = None
    """The id :meth:`Connection.send_request` returned for this call, when
    ``request_id`` is a later one it went under (:meth:`Connection.retry_with_input`,
    :meth:`Connection.reissue_request`, modern era); ``None`` when ``request_id`` is that
    id. A driver that knows its calls by their first id looks them up by
    ``origin_id if origin_id is not None else request_id``."""


@final
@attrs.frozen(kw_only=True)
class ErrorReceived:
    """A request of ours ended with an error: the peer's, or (:attr:`local`) one this
    connection made because the peer's answer could not be used."""

    request_id: RequestId
    """Our request id."""
    method: str
    """The method of our request."""
    error: ErrorData
    """The error."""
    local: bool = False
    """``True`` when the peer did not send this error: the connection made it, about an
    answer it could not use (a ``resultType`` it does not recognize or that the method may
    not return, a malformed input-required result, one whose ``inputRequests`` ask for
    what the client did not declare (-32602) or hold more than
    ``ConnectionConfig.max_input_requests`` questions (-32603), an ``initialize`` or
    ``server/discover`` result that settles no version) or, legacy era, for a request held
    for a new session that could not be started. Its ``code`` (``-32603``, ``-32602``,
    ``-32022``) only classifies the failure; a binding must not report it as the peer's
    (2026-07-28 basic/index.mdx, Error Codes: local errors in JSON-RPC-shaped structures
    should not be mistaken for errors received from the peer)."""
    transport: bool = False
    """``True`` when the peer did not send this error: the transport failed to carry
    the request or its answer, and made this error itself (Streamable HTTP: the
    ``-32603`` ``"HTTP: ..."`` errors of :func:`mcp_sansio.http.http_error`, with
    ``data.httpStatus`` when a status came). The connection cannot tell (the error
    response comes as bytes, as the peer's do): the HTTP layer's binding marks it
    (:func:`mcp_sansio.http.transport_errors`), so that a caller can tell it from the
    peer's own ``-32603``."""
    held: bool = False
    """Legacy era, with :attr:`local`: the request was held for a new session (the
    server forgot the old one: :meth:`Connection.restart_session`) that could not be
    started. It ends with that session, whose failure (the ``initialize``'s error or
    timeout) follows in the same list of events, so a binding ends the call with the
    session rather than with this error."""
    origin_id: RequestId | None = None
    """The id :meth:`Connection.send_request` returned for this call, when
    ``request_id`` is a later one it went under (:meth:`Connection.retry_with_input`,
    :meth:`Connection.reissue_request`, modern era); ``None`` when ``request_id`` is that
    id. A driver that knows its calls by their first id looks them up by
    ``origin_id if origin_id is not None else request_id``."""


@final
@attrs.frozen(kw_only=True)
class InputRequired:
    """Modern era: a request of ours came back ``resultType: "input_required"``.

    Fulfil ``input_requests`` and call :meth:`Connection.retry_with_input` (a new
    request id), or give up with :meth:`Connection.abandon_request` (or
    :meth:`Connection.cancel_request`, which does the same for a request awaiting input).

    The core has already held the round to the client's rules: every entry asks for
    what the client declared in its capabilities (sampling, ``sampling.tools`` for tool
    use, each elicitation mode, roots: mrtr.mdx, "Servers MUST NOT send an inputRequests
    that the client has not declared support for"), and there are at most
    ``ConnectionConfig.max_input_requests`` of them. A round that breaks either ends
    the request with a local :class:`ErrorReceived` instead (-32602, -32603), and the
    application is asked nothing. The answers are checked in turn
    (:meth:`Connection.retry_with_input`).
    """

    request_id: RequestId
    """Our request id (now finished; the retry gets a new one)."""
    method: str
    """The method of our request."""
    input_requests: dict[str, Any]
    """What the server asks for, by key (each a ``{"method", "params"}`` object)."""
    request_state: str | None
    """The opaque state to send back with the retry."""
    round: int
    """How many input-required rounds this request has been through (1 for the first)."""
    origin_id: RequestId | None = None
    """The id :meth:`Connection.send_request` returned for this call, when
    ``request_id`` is a later one it went under (:meth:`Connection.retry_with_input`,
    :meth:`Connection.reissue_request`, modern era); ``None`` when ``request_id`` is that
    id. A driver that knows its calls by their first id looks them up by
    ``origin_id if origin_id is not None else request_id``."""


@final
@attrs.frozen(kw_only=True)
class ProgressReceived:
    """The peer reported progress on a request of ours."""

    request_id: RequestId
    """Our request id."""
    progress: float
    """Progress so far (increases with every notification)."""
    total: float | None
    """Total, when known."""
    message: str | None
    """A human-readable status, when given."""
    origin_id: RequestId | None = None
    """The id :meth:`Connection.send_request` returned for this call, when
    ``request_id`` is a later one it went under (:meth:`Connection.retry_with_input`,
    :meth:`Connection.reissue_request`, modern era); ``None`` when ``request_id`` is that
    id. A driver that knows its calls by their first id looks them up by
    ``origin_id if origin_id is not None else request_id``."""


@final
@attrs.frozen(kw_only=True)
class RequestCancelled:
    """The peer cancelled a request it had sent us. Any answer we give is dropped.

    Stop its work, and still answer it when that ends (with an error, say): the answer
    goes nowhere, but until it is given the request keeps its place against
    ``max_inflight_requests`` (so that a late answer is known to be late, however late
    it comes) and its id cannot be used again.
    """

    request_id: RequestId
    """The peer's id of the cancelled request."""
    reason: str | None
    """The reason the peer gave, if any."""


@final
@attrs.frozen(kw_only=True)
class RequestTimedOut:
    """A request of ours reached its deadline. The core sent ``notifications/cancelled``."""

    request_id: RequestId
    """Our request id."""
    method: str
    """The method of our request."""
    origin_id: RequestId | None = None
    """The id :meth:`Connection.send_request` returned for this call, when
    ``request_id`` is a later one it went under (:meth:`Connection.retry_with_input`,
    :meth:`Connection.reissue_request`, modern era); ``None`` when ``request_id`` is that
    id. A driver that knows its calls by their first id looks them up by
    ``origin_id if origin_id is not None else request_id``."""


@final
@attrs.frozen(kw_only=True)
class ResponseIgnored:
    """A response arrived that answers nothing in flight; it was dropped."""

    request_id: RequestId | None
    """The id it carried (``None`` for an error with a null id)."""
    reason: Literal["late", "duplicate", "unknown"]
    """``late``: we had cancelled or timed out that request; ``duplicate``: it was
    already answered; ``unknown``: we never sent it."""
    error: ErrorData | None = None
    """The error it carried, if it was an error response."""


@final
@attrs.frozen(kw_only=True)
class InvalidMessageReceived:
    """The peer sent something that is not a valid message. The core answered it when
    an answer was owed; this event is for logging."""

    error: ErrorData
    """What was wrong."""
    request_id: RequestId | None = None
    """The request id, when one could be read."""


@final
@attrs.frozen(kw_only=True)
class HandshakeCompleted:
    """The era and version are settled and the peer is known.

    Client: after the ``initialize`` result (legacy) or the ``server/discover`` result
    (modern). Server: after ``notifications/initialized`` (legacy only).
    """

    era: Era
    """The era chosen."""
    protocol_version: str
    """The negotiated (legacy) or chosen (modern) protocol version."""
    peer_capabilities: dict[str, Any]
    """The peer's capabilities."""
    peer_info: dict[str, Any] | None
    """The peer's ``Implementation`` (name, version, ...)."""
    instructions: str | None = None
    """Client only: the server's instructions, if any."""


@final
@attrs.frozen(kw_only=True)
class ConnectionClosed:
    """The input ended. Every request listed here will never be answered."""

    unanswered: tuple[RequestId, ...]
    """Our requests that were still in flight, in the order they were sent; then, modern
    era, those awaiting input (their :class:`InputRequired` came, and neither
    :meth:`Connection.retry_with_input` nor :meth:`Connection.abandon_request` followed),
    under that event's ``request_id``, in the order their rounds came."""
    abandoned: tuple[RequestId, ...] = ()
    """The peer's requests we had not answered yet (their answers can no longer be sent)."""


Event: TypeAlias = (
    RequestReceived
    | NotificationReceived
    | SubscriptionNotificationReceived
    | ResultReceived
    | ErrorReceived
    | InputRequired
    | ProgressReceived
    | RequestCancelled
    | RequestTimedOut
    | ResponseIgnored
    | InvalidMessageReceived
    | HandshakeCompleted
    | ConnectionClosed
)
"""Any event a :class:`~mcp_sansio.Connection` returns (the package docstring lists them
with a line each: ``help()`` of an alias shows only the union type)."""


# -- cheap construction on the hot path ---------------------------------------------------
#
# attrs builds a frozen slotted instance by binding keyword arguments in a Python frame and
# then calling ``object.__setattr__`` once per field through a bound method-wrapper (the
# generic attribute machinery, by name): about 13k instructions for RequestReceived's nine
# fields, half the round trip of benchmarks/core.py. Storing through each slot's descriptor
# (``__set__``) still costs a C call with an argument tuple, ~670 instructions a field.
#
# So the fast path of ``Connection.receive_message`` (_conn_receive) fills a *blank*: an
# instance of a private mutable class with the very same slots, where a field store is a
# plain (specialized) attribute store of ~60 instructions, and then makes it the event by
# assigning ``__class__`` (~750 instructions, once). Python allows that assignment between
# two classes whose instances have the same layout: same base, same slots. CPython adds the
# weak-reference slot after the named ones, and its layout check only accepts it right
# after the base: hence ``_Weakrefable``, which both the event and its blank derive from.
# A blank is made by calling its class (object's ``__new__`` and ``__init__``, in C), which
# costs less than ``object.__new__(blank)``; tests/core/test_event_blanks.py pins that.
# The instance is then an ordinary event (type, fields, eq, repr, hash, frozen-ness,
# ``attrs.evolve``, weak references, pickling: all as from ``__init__``); the blank never
# escapes. RequestReceived: ~7.3k -> ~2.5k instructions; ResultReceived: ~3.2k -> ~2.1k.
#
# It is equivalent to ``__init__`` because these events have no defaults that need
# computing, no validators, converters, ``__attrs_post_init__`` or cached hash;
# tests/core/test_fastpath.py checks that every field of the events the fast path builds is
# set and that they equal the attrs-built events, and tests/core/test_event_blanks.py that
# the blanks have the events' slots and turn into events equal field by field to
# ``__init__``'s (and that a new field, validator or converter is noticed).


def _blank_of(cls: type) -> Any:
    """A mutable class with ``cls``'s slots, whose instances can become ``cls``'s.

    Typed ``Any``: its fields are ``cls``'s, stored one by one before ``__class__``.
    """
    return type(f"_{cls.__name__}Blank", (_Weakrefable,), {"__slots__": cls.__dict__["__slots__"]})


_new: Final = object.__new__

_REQUEST_RECEIVED_BLANK: Final = _blank_of(RequestReceived)
_RESULT_RECEIVED_BLANK: Final = _blank_of(ResultReceived)


def transport_errors(events: list[Event]) -> list[Event]:
    """``events`` (what ``Connection.receive_message`` made of an error response the
    transport made itself, not the peer: Streamable HTTP's ``http_error``) with each
    :class:`ErrorReceived` marked ``transport=True``, which the connection cannot do:
    the bytes are the same as the peer's. The clients of both bindings mark them so,
    and raise their transport error for them."""
    return [
        attrs.evolve(event, transport=True) if type(event) is ErrorReceived else event
        for event in events
    ]

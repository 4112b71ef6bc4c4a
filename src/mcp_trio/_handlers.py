"""Handler tables and the context a handler receives.

A :class:`Handlers` table maps method names to async functions. One table may serve
many sessions (every WebSocket connection of a server, say); it is read when a message
arrives, so handlers added later are seen by running sessions.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, final

import attrs
import trio

from mcp_sansio import Connection, Era, RequestId, RequestReceived

from ._errors import SessionClosed

if TYPE_CHECKING:
    from mcp_sansio._http_auth import Principal, RequiredScopes

    from ._pool import _Running
    from ._session import Session

__all__ = [
    "Handlers",
    "InputRequiredResult",
    "NotificationContext",
    "NotificationHandler",
    "RequestContext",
    "RequestHandler",
]


@final
@attrs.frozen(kw_only=True)
class InputRequiredResult:
    """Return this from a request handler to answer ``resultType: "input_required"``.

    Modern era only (``tools/call``, ``resources/read``, ``prompts/get``): the client
    fulfils ``input_requests`` and retries; ``state`` (any JSON value) comes back,
    sealed and verified by the core, as ``RequestContext.request_state``. See the
    specification's multi round-trip requests (``basic/patterns/mrtr``).
    """

    input_requests: dict[str, Any]
    """What the client must provide, by key: ``{"method": ..., "params": ...}`` each."""
    state: Any = None
    """Application state to get back with the retry."""


_Notify: TypeAlias = Callable[[str, dict[str, Any] | None], Awaitable[bool]]
"""``await notify(method, params)``: send a notification to one session; ``False``
once it has ended (see :meth:`RequestFacts._session_notifier`)."""


@final
class Handlers:
    """Request and notification handlers, by method name.

    Args:
        requests: initial request handlers.
        notifications: initial notification handlers.
        required_scopes: ``(principal, method, params) -> scopes``, the scopes a request
            needs (see :attr:`required_scopes`).

    A request with no handler is answered -32601 (method not found). A notification
    with no handler is dropped (logged at debug level).
    """

    def __init__(
        self,
        requests: Mapping[str, RequestHandler] | None = None,
        notifications: Mapping[str, NotificationHandler] | None = None,
        *,
        required_scopes: RequiredScopes | None = None,
    ) -> None:
        self._requests: dict[str, RequestHandler] = dict(requests or {})
        self._notifications: dict[str, NotificationHandler] = dict(notifications or {})
        self._other_notifications: NotificationHandler | None = None
        # The handler of every notification no method's handler takes (the client's
        # on_notification, installed by _client_callbacks.Callbacks), if any.
        self.required_scopes: RequiredScopes | None = required_scopes
        """The scopes each request needs from an authenticated caller (a
        :class:`~mcp_trio.Server` fills it from what its tools, resources and prompts
        declare). A request whose principal's token lacks one is refused before its
        handler runs: over Streamable HTTP with ``403`` and an ``insufficient_scope``
        challenge (``serve_http`` unions it with ``HttpServerConfig.required_scopes``:
        a request needs the scopes of both; a value that is no scope token is logged and
        answered ``500``), on
        a message channel (WebSocket) with the JSON-RPC error
        :data:`~mcp_sansio.http.INSUFFICIENT_SCOPE_CODE` (its ``data`` names the
        ``resource_metadata`` URL when the session knows it: ``serve_websocket`` with a
        ``BearerAuth`` that has one), and the session goes on. A
        request with no principal (stdio, in memory, no ``authenticate``) is never
        refused: without authentication there is nothing to check. Asked once per
        request: what it said is the context's ``needed_scopes``."""

    def on_request(self, method: str) -> Callable[[_RH], _RH]:
        """Decorator: handle requests of ``method``."""

        def register(handler: _RH) -> _RH:
            self._requests[method] = handler
            return handler

        return register

    def on_notification(self, method: str) -> Callable[[_NH], _NH]:
        """Decorator: handle notifications of ``method``."""

        def register(handler: _NH) -> _NH:
            self._notifications[method] = handler
            return handler

        return register

    def set_request_handler(self, method: str, handler: RequestHandler | None) -> None:
        """Set (or with ``None`` remove) the handler of ``method`` requests."""
        if handler is None:
            self._requests.pop(method, None)
        else:
            self._requests[method] = handler

    def set_notification_handler(self, method: str, handler: NotificationHandler | None) -> None:
        """Set (or with ``None`` remove) the handler of ``method`` notifications."""
        if handler is None:
            self._notifications.pop(method, None)
        else:
            self._notifications[method] = handler

    def request_handler(self, method: str) -> RequestHandler | None:
        """The handler of ``method`` requests, if any."""
        return self._requests.get(method)

    def notification_handler(self, method: str) -> NotificationHandler | None:
        """The handler of ``method`` notifications, if any."""
        return self._notifications.get(method, self._other_notifications)


class RequestFacts:
    """What every transport's request context knows about the request being served.

    :class:`RequestContext` (message channels) and the HTTP binding's context share
    these read-only facts; each adds what its transport can do.
    """

    # (RequestContext.__init__ sets these itself, for speed: a slot added here must be
    # set there too.)
    __slots__ = ("_event", "_needed_scopes", "_principal")

    def __init__(
        self,
        event: RequestReceived,
        principal: Principal | None = None,
        needed_scopes: frozenset[str] | None = None,
    ) -> None:
        self._event = event
        self._principal = principal
        # (Set by whichever layer checked the scopes: the HTTP core before the body
        # was served, or the session's dispatch before the handler runs.)
        self._needed_scopes = needed_scopes

    @property
    def principal(self) -> Principal | None:
        """Who is calling: what ``serve_http(authenticate=...)`` returned for the HTTP
        request that carried this one (``serve_websocket``: for the connection's
        handshake); ``None`` without authentication (and on stdio and in memory)."""
        return self._principal

    @property
    def needed_scopes(self) -> frozenset[str] | None:
        """The OAuth scopes this request needs (what its tool, resource or prompt
        declares and the ``required_scopes`` hooks add), which :attr:`principal`'s
        token was checked to grant before the handler ran; ``None`` when nothing was
        checked (no principal, or no hook). The hooks are asked once per request:
        read this rather than asking them again (a task tool's task keeps them)."""
        return self._needed_scopes

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The header fields of the HTTP request that carried this one: over Streamable
        HTTP the request's own, over WebSocket the connection's opening handshake's; a
        read-only mapping, looked up in any case; ``None`` on other transports (stdio,
        in memory)."""
        return None

    @property
    def request_id(self) -> RequestId:
        """The peer's id of this request."""
        return self._event.request_id

    @property
    def method(self) -> str:
        """The method name."""
        return self._event.method

    @property
    def params(self) -> dict[str, Any] | None:
        """The params as decoded (``_meta`` included)."""
        return self._event.params

    @property
    def era(self) -> Era:
        """The era this request is served in."""
        return self._event.era

    @property
    def protocol_version(self) -> str:
        """The protocol version this request is served under."""
        return self._event.protocol_version

    @property
    def progress_token(self) -> RequestId | None:
        """The peer's progress token, if it asked for progress."""
        return self._event.progress_token

    @property
    def client_capabilities(self) -> dict[str, Any] | None:
        """Modern era: the client capabilities from this request's envelope."""
        return self._event.client_capabilities

    @property
    def input_responses(self) -> dict[str, Any] | None:
        """Modern era: answers to an earlier input-required result (a retry)."""
        return self._event.input_responses

    @property
    def request_state(self) -> Any:
        """Modern era: the state sealed into the earlier input-required result."""
        return self._event.request_state

    @property
    def event(self) -> RequestReceived:
        """The core's event, whole."""
        return self._event

    def _session_notifier(self) -> _Notify:
        """A sender of notifications to the session this request came on, holding it
        weakly (it may outlive the request: ``ctx.elicitation_completer``): the one
        way :class:`~mcp_trio.Context` reaches that session, whatever the transport
        (each context class gives its own).

        Raises:
            RuntimeError: this context knows no session (a transport's own context
                class that does not give one).
        """
        raise RuntimeError("this request came on no session to send notifications on")


@final
class RequestContext(RequestFacts):
    """What a request handler knows about its request, and what it may do meanwhile.

    Its own task runs the handler inside its own cancel scope; a
    ``notifications/cancelled`` from the peer cancels that scope (and nothing is
    answered).
    """

    __slots__ = ("_running", "session")

    def __init__(self, session: Session, event: RequestReceived, running: _Running) -> None:
        # (RequestFacts.__init__, inline: one of these is made for every request.)
        self._event = event
        self._principal = session.principal
        self._needed_scopes = None
        self.session: Session = session
        """The session the request arrived on (send requests or notifications with it)."""
        self._running = running

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The header fields of the HTTP request that opened the session's transport
        (``serve_websocket``: the opening handshake's, the same for each request of
        the connection), or ``None`` (stdio, in memory; see ``Session.headers``)."""
        return self.session.headers

    @property
    def cancelled(self) -> bool:
        """Whether the peer cancelled this request (the handler is being cancelled)."""
        return self._running.cancelled

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` for this request.

        Returns:
            ``False`` (nothing sent) when the peer asked for no progress, or the
            request is cancelled or the session closed.

        Raises:
            LocalProtocolError: ``progress`` does not increase.
        """
        return await self.session._send_progress(self, progress, total, message)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a ``notifications/message`` tied to this request, if the peer wants it.

        Returns:
            Whether a message was sent (see ``Connection.send_log``; not one over the
            channel's ``send_bound()``, dropped with a warning).

        Raises:
            LocalProtocolError: not a server, or an unknown level.
        """
        return await self.session.log(level, data, logger=logger, request_id=self.request_id)

    @property
    def connection(self) -> Connection:
        """The core connection the request arrived on (read-only use)."""
        return self.session.connection

    async def until_initialized(self) -> None:
        """Legacy server: wait (at most ``handshake_timeout``) for the client's
        ``notifications/initialized`` if this request was served before it;
        :meth:`send_request` waits here by itself."""
        await self.session.until_initialized()

    def _session_notifier(self) -> _Notify:
        """``session.notify``, holding the session weakly: ``False`` once it is
        closed or gone (stdio, WebSocket, in memory)."""
        session_ref = weakref.ref(self.session)

        async def notify(method: str, params: dict[str, Any] | None) -> bool:
            live = session_ref()
            if live is None:
                await trio.lowlevel.checkpoint()
                return False
            try:
                await live.notify(method, params)
            except SessionClosed:
                return False
            return True

        return notify

    async def send_request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Legacy server: ask the client something (``sampling/createMessage``,
        ``elicitation/create``, ``roots/list``) on behalf of this request.

        Raises:
            McpError: the client answered with an error.
            RequestTimeout, SessionClosed: as for :meth:`Session.request`.
            LocalProtocolError: the modern era (use :class:`InputRequiredResult`), or a
                capability the client did not declare.
        """
        return await self.session.request(
            method, params, timeout=timeout, related_request_id=self.request_id
        )


@final
@attrs.frozen(kw_only=True)
class NotificationContext:
    """A notification the peer sent, with the session it arrived on."""

    session: Session
    """The session it arrived on."""
    method: str
    """The method name."""
    params: dict[str, Any] | None
    """The decoded params."""
    subscription_id: RequestId | None = None
    """Modern era: the ``subscriptions/listen`` request it belongs to, if any."""
    principal: Principal | None = None
    """Who sent it (``serve_websocket(authenticate=...)``), or ``None``."""


# Defined after the context classes, with the classes themselves (not strings), so
# typing.get_type_hints resolves a user's annotation in a module that does not
# import the context classes.
RequestHandler: TypeAlias = Callable[
    [RequestContext], Awaitable[dict[str, Any] | InputRequiredResult]
]
"""``async def handler(ctx: RequestContext) -> dict``: the result object, or raise
:class:`~mcp_trio.McpError` to answer with an error (modern era: or return an
:class:`InputRequiredResult`)."""
NotificationHandler: TypeAlias = Callable[[NotificationContext], Awaitable[None]]
"""``async def handler(ctx: NotificationContext) -> None``."""

_RH = TypeVar("_RH", bound=RequestHandler)
_NH = TypeVar("_NH", bound=NotificationHandler)

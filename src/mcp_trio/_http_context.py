"""What a handler served over Streamable HTTP receives: :class:`HttpRequestContext`.

It quacks like :class:`~mcp_trio.RequestContext` (same attributes, same coroutines), so
one :class:`~mcp_trio.Handlers` table serves stdio, WebSocket and HTTP alike. Over HTTP
there is no :class:`~mcp_trio.Session` object: a legacy request belongs to an HTTP
session (``session_id``) and a modern one to nothing but itself.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from mcp_sansio import Connection, LocalProtocolError, RequestId, RequestReceived
from mcp_sansio._http_auth import Principal
from mcp_sansio._http_common import HttpRequest  # (not .http: serve_websocket needs no more)

from ._handlers import RequestFacts, _Notify

if TYPE_CHECKING:
    from ._http_endpoint import Endpoint

__all__ = ["HttpNotificationContext", "HttpRequestContext"]

PEER_ADDRESS: ContextVar[str | None] = ContextVar("mcp_trio_http_peer", default=None)
"""The IP address of the TCP peer whose connection the current task serves: set by
``serve_http``'s connection task, read when a request's context is built there (so the
endpoint needs not carry it)."""

REQUEST_HEAD: ContextVar[HttpRequest | None] = ContextVar("mcp_trio_http_head", default=None)
"""The head (no body) of the HTTP request the current connection task serves: set by
``serve_http``'s connection task as it reads each request, read when a request's context
is built there (as :data:`PEER_ADDRESS` is)."""


@final
class RequestHeaders(Mapping[str, str]):
    """The header fields of an HTTP request, read-only: a view of its head (nothing is
    copied; :meth:`HttpRequest.header` answers each lookup, in any case). What
    ``ctx.headers`` is over Streamable HTTP, and over WebSocket for the opening
    handshake.

    Names are listed lower-cased, in order of first appearance; a repeated field's
    values are joined with ``", "`` (RFC 9110 section 5.3); all is latin-1 text.
    """

    __slots__ = ("_head",)

    def __init__(self, head: HttpRequest) -> None:
        self._head = head

    def __getitem__(self, name: str) -> str:
        value = self._head.header(name) if isinstance(name, str) else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> dict[str, None]:
        return dict.fromkeys(name.decode("latin-1") for name, _ in self._head.headers)

    def __repr__(self) -> str:
        return f"<request headers {dict(self)!r}>"


@attrs.define(slots=True, eq=False)
class Running:
    """Bookkeeping of one running handler task."""

    connection: Connection
    """The core connection the request arrived on (a session's, or the request's own)."""
    request_id: RequestId | None
    """The client's request id (``None`` for a notification)."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """The handler's own cancel scope."""
    cancelled: bool = False
    """The client cancelled the request (closed its stream, or sent a cancellation)."""
    client: tuple[str, str] | None = None
    """Whose share of the endpoint's handler slots the slot it holds counts against
    (``_http_endpoint._Slots``)."""


@final
class HttpRequestContext(RequestFacts):
    """The request a handler serves over HTTP, and what it may do meanwhile.

    The handler runs in its own cancel scope and its own copy of the context (in its
    own task, or, for a lone request of a legacy POST answered as JSON, in the task of
    the connection that waits for its answer). The client closing a modern
    request's stream, or sending ``notifications/cancelled`` in a legacy session,
    cancels that scope (and nothing is answered).
    """

    __slots__ = ("_endpoint", "_head", "_running", "peer", "session_id")

    def __init__(
        self,
        endpoint: Endpoint,
        event: RequestReceived,
        running: Running,
        session_id: str | None,
        principal: Principal | None = None,
        needed_scopes: frozenset[str] | None = None,
    ) -> None:
        super().__init__(event, principal, needed_scopes)
        self._endpoint = endpoint
        self._running = running
        self.session_id: str | None = session_id
        """The legacy ``Mcp-Session-Id`` (``None`` for a modern request)."""
        self.peer: str | None = PEER_ADDRESS.get()
        """The IP address the request came from (the TCP peer: behind a reverse proxy,
        the proxy's), or ``None`` when unknown. Anonymous modern requests are told
        apart by it for ``Server(completion_rate_limit=)``."""
        self._head = REQUEST_HEAD.get()

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The header fields of the request (the head ``authenticate`` saw): a
        read-only view, looked up in any case, names listed lower-cased, a repeated
        field's values joined with ``", "``; ``None`` when unknown."""
        head = self._head
        return None if head is None else RequestHeaders(head)

    @property
    def connection(self) -> Connection:
        """The core connection this request arrived on (advanced use)."""
        return self._running.connection

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled this request (the handler is being cancelled)."""
        return self._running.cancelled

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Send ``notifications/progress`` for this request on its SSE stream.

        Returns:
            ``False`` (nothing sent) when the client asked for no progress, or the
            request is cancelled or its session closed.

        Raises:
            LocalProtocolError: ``progress`` does not increase.
        """
        return await self._endpoint.send_progress(self._running, progress, total, message)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a ``notifications/message`` tied to this request, if the client wants it.

        Returns:
            Whether a message was sent (see ``Connection.send_log``).

        Raises:
            LocalProtocolError: an unknown level.
        """
        return await self._endpoint.send_log(self._running, level, data, logger)

    async def until_initialized(self) -> None:
        """Legacy era: wait (at most ``handshake_timeout``) for the client's
        ``notifications/initialized`` if this request was served before it;
        :meth:`send_request` waits here by itself."""
        await self._endpoint.until_initialized(self._running.connection)

    async def notify_session(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Legacy era: send a notification to this request's session, not tied to the
        request: on the session's GET stream, as list changes go (kept for the stream's
        replay while the client has none open). What ``RequestContext.session.notify``
        is on the other transports. It may be sent after the request was answered
        (keep this context), for as long as the session lives.

        Returns:
            Whether it went to the session: ``False`` once the session has ended (or
            the server was stopped), or when the server offers no GET stream
            (``HttpServerConfig(standalone_stream=False)``: it would have nowhere to go).

        Raises:
            LocalProtocolError: a modern request (it belongs to no session), or a
                notification the session cannot carry now (one its protocol version
                lacks, say; see ``Connection.send_notification``).
        """
        return await self._session_notifier()(method, params)

    def _session_notifier(self) -> _Notify:
        """:meth:`notify_session`, bound to this request's session and holding nothing
        else: the server weakly, so that a notifier kept after it stopped keeps it
        alive no more than the session (``ctx.elicitation_completer``)."""
        session_id = self.session_id
        if session_id is None:
            raise LocalProtocolError("a modern request belongs to no session to notify")
        endpoint_ref = weakref.ref(self._endpoint)

        async def notify(method: str, params: dict[str, Any] | None) -> bool:
            await trio.lowlevel.checkpoint()  # (a checkpoint, as every send of a handler)
            endpoint = endpoint_ref()
            # (Session ids are random, never reused: a live session of this id is this
            # request's session, not one begun since by a client that lost it.)
            conn = None if endpoint is None else endpoint.http.session_connection(session_id)
            if endpoint is None or conn is None or conn.closed:
                return False
            if not endpoint.http.config.standalone_stream:
                return False  # (the core would drop it: no GET stream to take it)
            conn.send_notification(method, params)
            endpoint.pump(conn)
            return True

        return notify

    async def send_request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Legacy era: ask the client something (``sampling/createMessage``,
        ``elicitation/create``, ``roots/list``) and wait for its answer.

        The request goes out on this request's SSE stream (or the session's GET stream)
        with ``related_request_id`` set to :attr:`request_id`; the client answers with a
        separate POST. In the modern era servers send no requests: return an
        :class:`~mcp_trio.InputRequiredResult` instead.

        Args:
            method: the method name.
            params: the params object.
            timeout: seconds without progress before giving up (default: the core's
                ``request_timeout``).

        Returns:
            The result object.

        Raises:
            McpError: the client answered with an error.
            RequestTimeout: no answer in time (``notifications/cancelled`` was sent).
            SessionClosed: the session ended first.
            LocalProtocolError: the modern era, or a method the client's capabilities
                do not allow.
        """
        return await self._endpoint.send_request(self._running, method, params, timeout)


@final
@attrs.frozen(kw_only=True)
class HttpNotificationContext:
    """A notification a client sent over HTTP (duck-types ``NotificationContext``)."""

    method: str
    """The method name."""
    params: dict[str, Any] | None
    """The decoded params."""
    session_id: str | None = None
    """The legacy session it arrived in, if any."""
    principal: Principal | None = None
    """Who sent it (``serve_http(authenticate=...)``), or ``None``."""
    subscription_id: RequestId | None = None
    """Always ``None`` on a server (kept for the shape of ``NotificationContext``)."""

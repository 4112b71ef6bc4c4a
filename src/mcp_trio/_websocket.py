"""The WebSocket transport.

**This is a custom transport: the MCP specification does not define one.** (It allows
custom transports that keep the JSON-RPC message format and lifecycle; see
``basic/transports.mdx``, section "Custom Transports".) Both ends must use this
module's conventions:

* the endpoint path is ``/mcp`` and the subprotocol is ``mcp`` (a server rejects a
  handshake that does not offer it with HTTP 400, and any other path with 404). A
  server reads the handshake's target as the HTTP server reads a request's: a query
  is no part of the path, and the absolute form (``GET http://host/mcp``, RFC 9112
  section 3.2.2; RFC 6455 section 4.2.1: "an absolute HTTP/HTTPS URI") is served, its
  authority vetted in place of the ``Host`` header;
* one JSON-RPC message per **text** frame; a binary frame closes the connection with
  code 1003 (unsupported data);
* a message larger than ``SessionConfig.ws_max_message_size`` (in characters of its
  JSON text) is never sent: the session fails only what it belongs to (a request raises
  ``ValueError`` before anything is written, an answer goes out as a JSON-RPC error
  -32603 for its id, a notification is dropped with a warning logged), and the
  connection goes on. One that arrives all the same (from a peer that is not this
  module, or with a smaller setting) closes the connection with code 1009
  (trio-websocket's ``max_message_size``);
* each side pings every ``ws_ping_interval`` seconds and closes the connection (code
  1011) if the pong does not come within ``ws_ping_timeout``;
* a frame is never cut and then followed by more: a session closing while a message is
  being written sends it whole first, then the close frame, the two within one
  ``close_timeout`` (and the message within its ``write_timeout``); a write cut short
  (those bounds, the pong timeout) drops the connection (the peer sees code 1006);
* a connection authenticated with a token that expires (``Principal.expires_at``) is
  closed by the server then, with code 1008 (policy violation) and the reason
  ``invalid_token: the access token expired``; a client takes code 1008 with a reason
  that starts with ``invalid_token`` for that (:class:`~mcp_trio.TokenExpired`). A
  token already expired at the handshake is refused there: ``401``, ``invalid_token``;
* the opening handshake is checked as a Streamable HTTP request is, against cross-site
  pages and DNS rebinding (browsers let any page open a WebSocket to localhost): an
  ``Origin`` not in ``allowed_origins`` is refused ``403`` (a handshake without one, not
  from a browser, passes), a ``Host`` not in ``allowed_hosts`` ``421``, both before
  ``authenticate`` runs;
* a graceful stop (:meth:`WebSocketServeHandle.aclose`, ``mcp-trio run``'s Ctrl-C)
  closes the listeners, gives each session's running handlers
  ``shutdown_grace_period`` to answer, answers the requests still running then with
  JSON-RPC error -32603 ``server shutting down``, and closes each connection with code
  1001 (going away); a handshake that completes meanwhile is refused ``503``, and a
  request not started yet (arriving meanwhile, or waiting for a handler slot) is
  answered that error at once, never started (as HTTP answers ``503``).
  Cancelling :func:`serve_websocket` instead stops its connections at once.

Built on trio-websocket; the session runtime is the same as for stdio.
"""

from __future__ import annotations

import logging
import math
import ssl
import urllib.parse
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast, final

import trio
import trio_websocket
from wsproto.utilities import LocalProtocolError as WsprotoLocalProtocolError

from mcp_sansio import ConnectionConfig, ErrorCode, ErrorData
from mcp_sansio._errors import SHUTTING_DOWN
from mcp_sansio._http_auth import Principal
from mcp_sansio._http_common import (
    LOCAL_HOSTS,
    LOCAL_ORIGINS,
    HttpRequest,
    HttpResponse,
    error_body,
    extra_headers,
    host_allowed,
    json_response,
    misdirected,
    origin_allowed,
)

from ._channel import Framing, MessageChannel
from ._config import SessionConfig
from ._errors import SessionClosed, TokenExpired
from ._handlers import Handlers
from ._http_auth import (
    CONNECTION_SCHEME,
    Authenticate,
    BearerAuth,
    declared_scopes,
    expiry_clock,
    run_authenticate,
)
from ._http_context import RequestHeaders
from ._open import open_session
from ._serve_handle import ListeningHandle
from ._session import Session
from ._text import for_log
from ._util import (
    RefusedHosts,
    SessionHook,
    check_count,
    open_task_nursery,
    plain_interrupt,
    run_hook,
    turn_away,
    url_host,
)

if TYPE_CHECKING:
    from ._oauth import Authorizer, OAuth  # (the OAuth binding is imported when first used)

__all__ = [
    "MCP_PATH",
    "SUBPROTOCOL",
    "WebSocketChannel",
    "WebSocketServeHandle",
    "open_websocket_client",
    "serve_websocket",
]

logger = logging.getLogger("mcp_trio")

MCP_PATH = "/mcp"
"""The path of the MCP endpoint."""
SUBPROTOCOL = "mcp"
"""The WebSocket subprotocol both sides must agree on."""
_GOING_AWAY = 1001
_UNSUPPORTED_DATA = 1003
_POLICY_VIOLATION = 1008
_INTERNAL_ERROR = 1011
_TOKEN_EXPIRED_REASON = "invalid_token: the access token expired"
"""The close reason of a connection that outlived its token (with code 1008): RFC 6750's
error code first, which is what a client looks for."""
#: Headers of the opening handshake that trio-websocket writes (``*``: a prefix).
_HOSTS_SETTING = "serve_websocket's allowed_hosts"
"""Where the ``Host`` allow list is set, as a refusal and its warning name it."""
_RESERVED_HEADERS = ("host", "upgrade", "connection", "content-length", "sec-websocket-*")


def _describe(reason: trio_websocket.CloseReason | None) -> str:
    if reason is None:
        return "the WebSocket closed"
    text = f"the WebSocket closed with code {reason.code} ({reason.name})"
    return f"{text}: {reason.reason}" if reason.reason else text


def _token_expired(reason: trio_websocket.CloseReason | None) -> TokenExpired | None:
    """What a close by the peer because our token expired raises, else ``None``."""
    if (
        reason is None
        or reason.code != _POLICY_VIOLATION
        or not (reason.reason or "").startswith("invalid_token")
    ):
        return None
    return TokenExpired(
        f"the server ended the session: the access token expired ({_describe(reason)})"
    )


@final
class WebSocketChannel(MessageChannel):
    """One JSON-RPC message per text frame over a trio-websocket connection.

    Args:
        ws: an open connection.
        close_timeout: seconds to wait for the closing handshake.
        reader_done: set when ``ws``'s reader task has ended (see :class:`ReaderWatch`);
            a close then stops waiting for the peer's reply, which nobody would read.
        max_message_size: the ``max_message_size`` ``ws`` was opened with, if known
            (:meth:`message_bound`).
        client: whether this is the client's end (:func:`open_websocket_client`): a
            close by the server with code 1008 and a reason that starts with
            ``invalid_token`` is then :class:`~mcp_trio.TokenExpired`. A server's end
            takes no such close from its client for its own token's expiry.
        stream: the byte stream under ``ws``, closed at once when a message write is
            cut short (see :meth:`send`). The transport's own is a ``_WholeFrames``,
            which closes itself when any write on it is cut, and only then.

    A frame is never cut and then followed by more: the peer would read what follows as
    the rest of it (a close frame as text: code 1007). A :meth:`send` cancelled while
    its frame may be half out (the writer's ``write_timeout``) closes ``stream`` instead,
    so nothing more is written, not even a close frame: the peer sees the connection
    drop (code 1006). A session closing on its own (:meth:`finish_write`) lets the
    message in progress go out whole first, within ``close_timeout`` and what its
    ``write_timeout`` left; the close handshake then has what is left of that
    ``close_timeout``. (The other frames, pings and close frames, are guarded by the
    stream under ``ws``: see ``_WholeFrames``.)
    """

    framing: ClassVar[Framing] = "message"

    def __init__(
        self,
        ws: trio_websocket.WebSocketConnection,
        *,
        close_timeout: float = 2.0,
        reader_done: trio.Event | None = None,
        max_message_size: int | None = None,
        client: bool = False,
        stream: trio.abc.AsyncResource | None = None,
    ) -> None:
        self.ws = ws
        self._close_timeout = close_timeout
        self._reader_done = reader_done
        self._failure: SessionClosed | None = None
        self._close_code: tuple[int, str | None] = (1000, None)  # (what aclose sends)
        self._max_message_size = max_message_size
        self._client = client
        self._stream = stream
        # (the scope of the last write: finish_write extends it, which matters only while
        # the write runs; once it has ended, nothing reads it)
        self._frame: trio.CancelScope | None = None
        self._finish_by = math.inf  # (when finish_write's close_timeout ends)
        self._close_budget = close_timeout  # (what the close handshake may take)
        self._closing: trio.Event | None = None  # (set when the first aclose is done)
        self.heard = False
        """A message has come from the peer (see ``_hear_within``)."""

    @property
    def remote(self) -> trio_websocket.Endpoint | None:
        """The peer's address: a ``trio_websocket.Endpoint`` (``address``, an
        ``ipaddress`` address; ``port``; ``is_ssl``; ``url``), or ``None`` over a stream
        that is not a TCP socket (a memory stream), or once the socket is closed.
        (``ws.remote`` cannot say: the stream trio-websocket sees is wrapped, see
        ``_WholeFrames``.)"""
        return _endpoint(self._stream, self.ws, local=False)

    @property
    def local(self) -> trio_websocket.Endpoint | None:
        """Our own address, as :attr:`remote` gives the peer's."""
        return _endpoint(self._stream, self.ws, local=True)

    def message_bound(self) -> tuple[int, str] | None:
        """``SessionConfig.ws_max_message_size``, when known: a larger message closes
        the connection."""
        if self._max_message_size is None:
            return None
        return self._max_message_size, "SessionConfig.ws_max_message_size"

    def send_bound(self) -> tuple[int, str] | None:
        """:meth:`message_bound`, taken as the peer's too (both ends are this module's,
        with the same default): the session sends no larger message, which would close
        the connection (code 1009) and end every call with it."""
        return self.message_bound()

    async def send(self, message: bytes) -> None:
        try:
            with trio.CancelScope() as frame:
                self._frame = frame
                try:
                    await self.ws.send_message(message.decode("utf-8"))
                finally:
                    if frame.shield:  # (finished by finish_write: the close gets the rest)
                        self._close_budget = self._finish_by - trio.current_time()
        except trio.Cancelled:
            await self._drop()
            raise
        except trio_websocket.ConnectionClosed as exc:
            # (a write that finds the connection closed for an expired token says so,
            # in case it is what ends the session)
            raise self._token_expired(exc.reason) or trio.BrokenResourceError(
                _describe(exc.reason)
            ) from None
        if frame.cancelled_caught:  # (finish_write's bounds ran out)
            await self._drop()
            raise trio.BrokenResourceError("a message write was cut short while closing")

    def _cut(self) -> bool:
        """Whether a write was cut short: the connection was dropped (``_WholeFrames``)."""
        return isinstance(self._stream, _WholeFrames) and self._stream.cut

    async def _drop(self) -> None:
        """A write was cut short, half a frame may be out: nothing may follow it. A
        ``_WholeFrames`` stream has seen to that already: a write it cut closed it, and
        a send cancelled before its turn to write (behind a ping, say) put nothing out,
        so the close frame may still follow. Any other stream is closed."""
        if self._stream is not None and not isinstance(self._stream, _WholeFrames):
            await trio.aclose_forcefully(self._stream)

    async def receive(self) -> str:
        try:
            message = await self.ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
            raise (
                self._failure
                or self._token_expired(exc.reason)
                or SessionClosed(_describe(exc.reason))
            ) from None
        if isinstance(message, bytes):
            await self.fail(
                _UNSUPPORTED_DATA,
                "binary frames are not supported; send text",
                SessionClosed("the peer sent a binary frame; closed with code 1003"),
            )
            raise SessionClosed("the peer sent a binary frame; closed with code 1003")
        self.heard = True
        return message

    async def fail(self, code: int, reason: str, failure: SessionClosed) -> None:
        """Close the WebSocket with ``code``; ``receive`` raises ``failure`` from now on."""
        self._will_fail(code, reason, failure)
        await self.aclose()

    def _will_fail(self, code: int, reason: str, failure: SessionClosed) -> None:
        """:meth:`fail` without the close: the first close, whoever makes it, sends
        ``code`` and ``reason``; ``receive`` raises ``failure`` from now on."""
        if self._failure is None:
            self._failure = failure
            self._close_code = (code, reason)

    def _token_expired(self, reason: trio_websocket.CloseReason | None) -> TokenExpired | None:
        """At the client's end, what a close by the server because our token expired
        raises, else ``None``."""
        return _token_expired(reason) if self._client else None

    def finish_write(self, deadline: float = math.inf) -> None:
        """Let the message being written (if any) go out whole, whatever cancels the
        write meanwhile (the session's close), so that a close frame can follow it: by
        ``deadline`` (what its ``write_timeout`` left it) and within ``close_timeout``
        from now, which the close handshake after it shares (it gets what is left); cut
        short, the connection drops (code 1006)."""
        frame = self._frame
        if frame is not None:
            self._finish_by = trio.current_time() + self._close_timeout
            frame.shield = True
            frame.deadline = min(deadline, self._finish_by)

    async def aclose(self) -> None:
        # trio-websocket's aclose returns at once when a close is under way (it marks the
        # connection closed before its close frame is out): a second aclose waits for the
        # first, or the end of what called it could cut that close frame short.
        closing = self._closing
        if closing is not None:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self._close_timeout
                await closing.wait()
            return
        self._closing = trio.Event()
        try:
            await self._close(*self._close_code)
        finally:
            self._closing.set()

    async def _close(self, code: int, reason: str | None) -> None:
        with trio.CancelScope(shield=True) as scope:
            # (close_timeout, less what finish_write's message took of it)
            scope.deadline = trio.current_time() + self._close_budget
            await _close_ws(self.ws, self._reader_done, code, reason)


async def _close_ws(
    ws: trio_websocket.WebSocketConnection,
    reader_done: trio.Event | None,
    code: int = 1000,
    reason: str | None = None,
) -> None:
    """``ws.aclose(code, reason)``, which stops waiting for the peer's close reply once
    ``ws``'s reader task is gone (``reader_done``, see :class:`ReaderWatch`; ``None``:
    not watched, it waits).

    trio-websocket's aclose sends the close frame, then waits for the reply that its
    reader task reads. When the block around the close was cancelled, that task was
    cancelled too; or it stopped at a frame crossing the close (trio-websocket issue
    #184, see :class:`ReaderWatch`): the wait would last until the caller's bound. Once
    the reader is gone, only that wait for the reply ends (``_stop_waiting_for_reply``):
    the close frame, which may still be waiting for its turn behind a message being
    written, goes out after it, and then aclose closes the stream. (Cancelling the whole
    aclose instead would close the stream under that message, and neither it nor the
    close frame would reach the peer.) The caller's bound (``close_timeout``) still
    holds for all of it."""
    if reader_done is None:
        await ws.aclose(code, reason)
        return
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_waiting_for_reply, reader_done, ws, nursery.cancel_scope)
        await ws.aclose(code, reason)
        nursery.cancel_scope.cancel()


_REPLY_EVENT = "_close_handshake"
"""The ``trio.Event`` of a trio-websocket ``WebSocketConnection`` that its aclose waits
on for the peer's close reply (set by its reader). Private to trio-websocket (0.12):
``_reply_event`` checks it, and a test fails loudly if it goes away."""


def _reply_event(ws: trio_websocket.WebSocketConnection) -> trio.Event | None:
    """The event ``ws.aclose`` waits on for the peer's close reply, or ``None`` when this
    trio-websocket does not have it where we look (see ``_REPLY_EVENT``)."""
    event = getattr(ws, _REPLY_EVENT, None)
    return event if isinstance(event, trio.Event) else None


async def _stop_waiting_for_reply(
    reader_done: trio.Event, ws: trio_websocket.WebSocketConnection, aclose: trio.CancelScope
) -> None:
    """Once ``ws``'s reader is gone, end its aclose's wait for the close reply (nobody is
    left to read it), letting the close frame go out first. Without the event to set (a
    trio-websocket that renamed it) ``aclose`` is cancelled instead, as it was before: a
    message still being written is then cut (the peer sees code 1006)."""
    await reader_done.wait()
    event = _reply_event(ws)
    if event is not None:
        event.set()
    else:
        aclose.cancel()


def _endpoint(
    stream: trio.abc.AsyncResource | None, ws: trio_websocket.WebSocketConnection, *, local: bool
) -> trio_websocket.Endpoint | None:
    """The address of one end of the TCP socket under ``stream`` (our ``_WholeFrames``,
    over TLS or not), or, with no ``stream`` given, trio-websocket's own answer for
    ``ws`` when it is one; ``None`` when there is no socket (or it is closed)."""
    if stream is None:
        found = ws.local if local else ws.remote
        return found if isinstance(found, trio_websocket.Endpoint) else None
    if isinstance(stream, _WholeFrames):
        stream = stream.stream
    is_ssl = isinstance(stream, trio.SSLStream)
    if isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if not isinstance(stream, trio.SocketStream):
        return None
    sock = stream.socket
    try:
        address, port, *_ = sock.getsockname() if local else sock.getpeername()
    except OSError:
        return None  # (closed)
    return trio_websocket.Endpoint(address, port, is_ssl)


def _closing_reader(reader: Callable[..., Awaitable[object]]) -> bool:
    """Whether ``reader`` is the reader task of a WebSocket connection (a method of
    it) that is closing or closed: it has a close reason, given as the first close
    frame is sent or read (before any await: nothing is sent in between)."""
    ws = getattr(reader, "__self__", None)
    return isinstance(ws, trio_websocket.WebSocketConnection) and ws.closed is not None


def _undecodable_handshake(exc: BaseException) -> bool:
    """Whether a connection failed only because wsproto could not decode its opening
    handshake (a ``Host`` that is not IDNA raises ``UnicodeError`` in its reader)."""
    cause = exc.__cause__
    if not isinstance(cause, BaseExceptionGroup):
        return False
    matched, rest = cause.split(UnicodeError)
    return matched is not None and rest is None


@final
class ReaderWatch:
    """Stands in for the nursery given to trio-websocket, which starts only its reader
    task there; ``reader_done`` is set when that task ends, however it ends.

    A frame from the peer that crosses our close frame makes that task fail: wsproto
    then refuses to send anything but a close reply, yet the reader answers a ping
    with a pong and an oversized message with a 1009 close frame, and wsproto's
    ``LocalProtocolError`` escapes it (trio-websocket issue #184: the crossing ping is
    a race between two keep-alives and a close). Raised while its connection is
    closing, that error is the connection's end: the reader stops (a close waiting for
    the peer's reply stops waiting, see ``_close_ws``) and the error goes no further.
    At any other time it is a bug and is raised."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self.reader_done = trio.Event()
        self._until: trio.CancelScope | None = None  # (see until_done)

    @contextmanager
    def until_done(self) -> Iterator[trio.CancelScope]:
        """A block cancelled if the reader task ends before it does (entered before the
        reader starts): a wait for what only the reader brings, the opening handshake's
        request, which can then never come (trio-websocket's ``wrap_server_stream``
        would wait for it regardless). Gives its scope (``cancelled_caught``)."""
        with trio.CancelScope() as scope:
            self._until = scope
            try:
                yield scope
            finally:
                self._until = None

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object, **kw: Any) -> None:
        async def run() -> None:
            try:
                await fn(*args)
            except WsprotoLocalProtocolError as exc:
                if not _closing_reader(fn):
                    raise
                logger.debug("WebSocket: the reader stopped at a frame crossing the close: %s", exc)
            finally:
                self.reader_done.set()
                if self._until is not None:
                    self._until.cancel()

        self._nursery.start_soon(run, **kw)

    def nursery(self) -> trio.Nursery:
        """This object, typed as what trio-websocket asks for (it only calls start_soon)."""
        return cast(trio.Nursery, self)


@final
class _WholeFrames(trio.abc.Stream):
    """The byte stream under a WebSocket, which several tasks write in turn (trio-websocket
    serialises them): our messages, the keep-alive's pings, its reader's pongs and close
    replies, the close frame. A write that did not finish (cancelled: the pong timeout, a
    close's bound; or failed) may have put part of a frame out, and the peer would read
    whatever followed as the rest of it. So such a write closes the stream at once (every
    write after it fails): nothing follows the cut, not even a close frame, and the peer
    sees the connection drop (code 1006).

    (trio-websocket's ``local`` and ``remote`` then give this stream's ``repr``, not the
    socket's addresses: :attr:`WebSocketChannel.remote` / ``local`` give those.)"""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.cut = False
        """Whether a write was cut short (the stream is closed)."""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self.stream.send_all(data)
        except BaseException:
            self.cut = True
            await trio.aclose_forcefully(self.stream)
            raise

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()

    def __repr__(self) -> str:
        return f"<_WholeFrames {self.stream!r}>"


async def _keepalive(channel: WebSocketChannel, config: SessionConfig) -> None:
    """Ping every ``ws_ping_interval``; close with 1011 if a pong is late. (The timeout
    also counts the ping's wait for its turn to be written, behind a message write in
    progress: trio-websocket writes one frame at a time. One that cuts the ping's own
    write drops the connection instead: see ``_WholeFrames``.) It stops once a close
    has begun: no ping follows a close frame (trio-websocket refuses it), and a pong
    that has not come then is no failure, the close has its own bound
    (``close_timeout``); a peer that sent its own close frame before it read our ping
    cannot answer it (wsproto sends nothing after a close frame but its reply)."""
    ws = channel.ws
    interval = config.ws_ping_interval
    if interval is None:
        return
    while True:
        await trio.sleep(interval)
        with trio.move_on_after(config.ws_ping_timeout) as scope:
            try:
                await ws.ping()
            except trio_websocket.ConnectionClosed:
                return
        if scope.cancelled_caught and ws.closed is not None and not channel._cut():
            # (a close has begun, ours, trio-websocket's or the peer's, and not by this
            # timeout cutting the ping's write: a close does not cancel the ping)
            return
        if scope.cancelled_caught:
            how = "dropped the connection" if channel._cut() else "closed with code 1011"
            what = f"no pong within {config.ws_ping_timeout} s; {how}"
            logger.warning("WebSocket keep-alive: %s", what)
            await channel.fail(_INTERNAL_ERROR, "keep-alive ping timed out", SessionClosed(what))
            return


async def _hear_within(channel: WebSocketChannel, session: Session, timeout: float) -> None:
    """Close the connection with code 1008 if the peer has sent no message ``timeout``
    (``handshake_timeout``) after the opening handshake: it has not begun MCP (no
    ``initialize``; the 2026-07-28 era has no handshake, so no first request either).
    Such a connection held one of the ``max_connections`` places for good: nothing
    else ends it, trio-websocket answering the keep-alive pings itself. (A peer that
    speaks once and then idles holds one as a live idle session does.)"""
    await trio.sleep(timeout)
    if channel.heard or session.closed:
        return
    what = f"the peer sent no message within {timeout:g} s (handshake_timeout)"
    logger.info("WebSocket: %s; closing with code 1008", what)
    # (the session ends as its reader finds the connection closed: no handler runs)
    await channel.fail(_POLICY_VIOLATION, "no MCP message in time", SessionClosed(what))


async def _expire(channel: WebSocketChannel, session: Session, deadline: float) -> None:
    """End the session at ``deadline`` (trio time), when its token expires: close the
    session with :class:`~mcp_trio.TokenExpired` for its reason, which cancels its
    handlers at once, as a local close does (a peer's close would give them
    ``shutdown_grace_period``: not to a principal whose token is no longer valid), then
    close the WebSocket with code 1008. Nothing waits for the peer first: its answer to
    the close frame (up to ``close_timeout``) comes after the handlers are cancelled."""
    await trio.sleep_until(deadline)
    logger.info("WebSocket: the access token expired; closing with code 1008")
    failure = TokenExpired("the access token expired; the WebSocket was closed with code 1008")
    channel._will_fail(_POLICY_VIOLATION, _TOKEN_EXPIRED_REASON, failure)  # (whoever closes)
    session._close_locally(failure)  # (a message half out goes out whole: finish_write)
    await channel.aclose()  # (the 1008 frame now, not once the handlers have unwound)


@plain_interrupt
async def serve_websocket(
    handlers: Handlers | None,
    host: str | None = "127.0.0.1",
    port: int = 0,
    *,
    ssl_context: ssl.SSLContext | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    on_session: SessionHook | None = None,
    authenticate: Authenticate | None = None,
    allowed_origins: Sequence[str] = LOCAL_ORIGINS,
    allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
    handler_nursery: trio.Nursery | None = None,
    max_connections: int = 1_000,
    task_status: trio.TaskStatus[WebSocketServeHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over WebSocket at ``ws://host:port/mcp`` (a custom transport).

    Args:
        handlers: the request and notification handlers, shared by every connection.
        host: the interface to bind (default: loopback only; ``None``: all).
        port: the port (default 0: the kernel picks one; read it from the handle's
            ``port`` or ``url``).
        ssl_context: serve ``wss://`` with this context.
        config: runtime bounds, message size, pings, shared by every connection.
        connection_config: the server core's configuration.
        on_session: runs beside each connection's session; cancelled when it closes.
        authenticate: ``async (request_head) -> Principal | HttpResponse``, as for
            :func:`~mcp_trio.serve_http` (e.g. :class:`~mcp_trio.BearerAuth`), run on
            each connection's opening handshake (a ``GET`` and its headers, ``Host``
            first), in what is left of
            ``config.ws_connect_timeout`` (then ``503``): a refusal is the handshake's
            answer, a principal is the whole connection's (``ctx.principal``). The
            answer itself has ``ws_connect_timeout`` again to be written. A
            :class:`~mcp_trio.BearerAuth`'s ``resource_metadata_url`` is named in the
            ``data`` of every ``insufficient_scope`` error (JSON-RPC ``403``), as the
            HTTP challenge names it, so that a client can step up; its
            ``required_scopes`` are among that error's scopes (the request needs them
            too). A principal with
            ``expires_at`` (the token's ``exp``) ends the connection then: the
            server closes it with code 1008, reason ``invalid_token: the access token
            expired``, and its handlers are cancelled at once, as on a local close
            (no ``shutdown_grace_period``); one expired already is refused at the
            handshake (``401``, ``invalid_token``).
        allowed_origins: the browser origins that may connect, as
            ``HttpServerConfig.allowed_origins`` (``"*"``: any; ``"https://app:*"``:
            any port; default: localhost's pages). A handshake with another ``Origin``
            is refused ``403`` before ``authenticate`` runs: browsers do not keep pages
            of other sites from opening a WebSocket to this server, and the server must
            check. One without ``Origin`` (not a browser) passes.
        allowed_hosts: the ``Host`` values served, as ``HttpServerConfig.allowed_hosts``
            (``"name:*"``: any port; default: loopback names): another is refused
            ``421`` (DNS-rebinding protection). List the public names of a server
            bound to another interface; ``None`` accepts any.
        handler_nursery: where connection tasks run (default: an internal nursery).
        max_connections: TCP connections served at once, each counted from its accept
            until its task ends (opening handshake, session and close), as
            ``HttpTransportConfig.max_connections`` bounds :func:`~mcp_trio.serve_http`'s:
            a further one is answered ``503`` with ``Retry-After: 1`` (over TLS: closed)
            and closed at accept, unread and without a session, with a warning logged.
            Each served connection holds a session, idle or not, until the peer leaves;
            one that sends no handshake holds its place up to ``ws_connect_timeout``,
            unless it leaves first (or its TLS handshake fails): then it is free at once;
            one that sends no MCP message (no ``initialize``; in the 2026-07-28 era, no
            request) within ``config.handshake_timeout`` of its opening handshake is
            closed with code 1008 (``None``: never).
        task_status: ``await nursery.start(serve_websocket, ...)`` returns a
            :class:`WebSocketServeHandle` (``url``, ``port``, ``listeners``), as
            :func:`~mcp_trio.serve_http` returns an ``HttpServeHandle``.

    Returns:
        After :meth:`WebSocketServeHandle.aclose` (or never, until cancelled).

    Resource handling:
        Each TCP connection is closed when its session ends, whoever ended it.
        Cancelling ``serve_websocket`` closes the listeners and the connections it
        runs at once (not those in a ``handler_nursery``); ``aclose()`` stops
        gracefully (see the module docs) within ``shutdown_grace_period +
        abandon_write_timeout + close_timeout``, then cancels what is left, the
        connections in a ``handler_nursery`` included.

    Raises:
        ValueError: ``max_connections`` is not a positive integer.

    Error handling:
        A failure in one connection is logged and closes that connection only.
    """
    check_count("max_connections", max_connections)
    config = config if config is not None else SessionConfig()
    origins = _allow_list(allowed_origins)
    if origins is None:
        raise TypeError("allowed_origins is a sequence of origins ('*': any), not None")
    guard = _Guard(origins, _allow_list(allowed_hosts))
    listeners = await trio.open_tcp_listeners(port, host=host)
    stop = _Stop()
    limit = _Limit(max_connections, tls=ssl_context is not None)

    async def handle(tcp: trio.SocketStream) -> None:
        try:
            with stop.tracking():
                stream: trio.abc.Stream = tcp
                if ssl_context is not None:
                    stream = trio.SSLStream(tcp, ssl_context, server_side=True)
                    CONNECTION_SCHEME.set("https")  # (this task's: BearerAuth's DPoP htu)
                try:
                    await _serve_connection(
                        stream,
                        handlers,
                        config,
                        connection_config,
                        on_session,
                        authenticate,
                        guard,
                        stop.stopping,
                    )
                except Exception as exc:
                    if _undecodable_handshake(exc):
                        # (wsproto could not decode the handshake's Host as IDNA: a peer's
                        # junk, dropped like any malformed handshake, without a traceback)
                        logger.debug("WebSocket: dropped a handshake with an undecodable Host")
                    else:
                        logger.exception("MCP WebSocket connection failed")
                finally:
                    await trio.aclose_forcefully(stream)
        finally:
            limit.open -= 1  # (counted by _Limited.accept)

    accepting = trio.CancelScope()

    async def accept(conns: trio.Nursery, *, task_status: trio.TaskStatus[Any]) -> None:
        with accepting:
            limited = [_Limited(listener, limit) for listener in listeners]
            await trio.serve_listeners(
                handle, limited, handler_nursery=conns, task_status=task_status
            )

    try:
        async with trio.open_nursery() as nursery:
            conns = handler_nursery if handler_nursery is not None else nursery
            await nursery.start(accept, conns)
            secure = ssl_context is not None
            task_status.started(WebSocketServeHandle(listeners, secure=secure, stop=stop))
            await stop.requested.wait()
            accepting.cancel()
            for listener in listeners:
                await trio.aclose_forcefully(listener)
            stop.stopping.set()  # (each session drains: see _stop_when)
            bound = (
                config.shutdown_grace_period + config.abandon_write_timeout + config.close_timeout
            )
            with trio.move_on_after(bound):
                await stop.none_left.wait()
            stop.cancel_all()
            await stop.none_left.wait()  # (cancelled, they end promptly)
            nursery.cancel_scope.cancel()
    finally:
        stop.finished.set()
        for listener in listeners:
            await trio.aclose_forcefully(listener)


@final
class _Limit:
    """``serve_websocket``'s ``max_connections``, and the connections open (from their
    accept until their task ends), shared by its listeners."""

    def __init__(self, max_connections: int, *, tls: bool) -> None:
        self.max_connections = max_connections
        self.tls = tls
        self.open = 0


@final
class _Limited(trio.abc.Listener[trio.SocketStream]):
    """A listener that hands out a connection only while fewer than ``max_connections``
    are open (``serve_http``'s rule): it turns one over that away itself, unread
    (``503``, see :func:`~mcp_trio._util.turn_away`), and accepts the next. Failures
    to accept (out of descriptors) are ``trio.serve_listeners``'s to handle, as before."""

    def __init__(self, inner: trio.SocketListener, limit: _Limit) -> None:
        self._inner = inner
        self._limit = limit

    async def accept(self) -> trio.SocketStream:
        limit = self._limit
        while True:
            tcp = await self._inner.accept()
            if limit.open < limit.max_connections:
                limit.open += 1
                return tcp
            logger.warning(
                "refused a WebSocket connection: %d are open (max_connections)",
                limit.max_connections,
            )
            await turn_away(tcp, tls=limit.tls)

    async def aclose(self) -> None:
        await self._inner.aclose()


@final
class _Stop:
    """The graceful stop of one :func:`serve_websocket`, and its connections."""

    def __init__(self) -> None:
        self.requested = trio.Event()
        """:meth:`WebSocketServeHandle.aclose` was called."""
        self.stopping = trio.Event()
        """The listeners are closed: each session drains, then closes (code 1001)."""
        self.finished = trio.Event()
        """:func:`serve_websocket` has returned."""
        self.none_left = trio.Event()
        """No connection task is running."""
        self.none_left.set()
        self._scopes: set[trio.CancelScope] = set()

    @contextmanager
    def tracking(self) -> Iterator[None]:
        """A connection task's body: counted, and cancelled by :meth:`cancel_all`."""
        with trio.CancelScope() as scope:
            if not self._scopes:
                self.none_left = trio.Event()
            self._scopes.add(scope)
            try:
                yield
            finally:
                self._scopes.discard(scope)
                if not self._scopes:
                    self.none_left.set()

    def cancel_all(self) -> None:
        """Cancel every connection task (the graceful stop's time is up)."""
        for scope in self._scopes:
            scope.cancel()


async def _stop_when(stopping: trio.Event, channel: WebSocketChannel, session: Session) -> None:
    """At a graceful stop, drain ``session`` (``Session._drain``: new requests are
    answered -32603 ``server shutting down`` at once, running handlers get their grace
    period, then the requests left get the same error), then close it and the WebSocket
    with code 1001 (going away)."""
    await stopping.wait()
    await session._drain(SHUTTING_DOWN)
    if session.closed:
        return  # (the peer closed it meanwhile)
    failure = SessionClosed("the server shut down; the WebSocket was closed with code 1001")
    channel._will_fail(_GOING_AWAY, "server shutting down", failure)  # (whoever closes)
    session._close_locally(failure)


@final
class WebSocketServeHandle(ListeningHandle):
    """What :func:`serve_websocket` gives ``task_status.started``: the running server,
    as :class:`~mcp_trio.HttpServeHandle` is :func:`~mcp_trio.serve_http`'s."""

    def __init__(self, listeners: list[trio.SocketListener], *, secure: bool, stop: _Stop) -> None:
        self._listeners = listeners
        self._secure = secure
        self._stop = stop

    @property
    def listeners(self) -> list[trio.SocketListener]:
        """The listening sockets."""
        return self._listeners

    @property
    def url(self) -> str:
        """``ws://host:port/mcp`` of the first listener (``wss://`` with an
        ``ssl_context``)."""
        return self._url("wss" if self._secure else "ws", MCP_PATH)

    async def aclose(self) -> None:
        """Stop gracefully and wait until :func:`serve_websocket` has returned: stop
        listening, give each session's running handlers ``shutdown_grace_period``
        (new requests are answered -32603 ``server shutting down`` at once, not
        started), answer the requests left with that error, close each connection
        with code 1001 (going away). :meth:`Server.serve_websocket
        <mcp_trio.Server.serve_websocket>`'s waits until it has left the server's
        lifespan too. Idempotent."""
        self._stop.requested.set()
        await self._stop.finished.wait()
        await self._wait_returned()


async def _serve_connection(
    stream: trio.abc.Stream,
    handlers: Handlers | None,
    config: SessionConfig,
    connection_config: ConnectionConfig | None,
    on_session: SessionHook | None,
    authenticate: Authenticate | None = None,
    guard: _Guard | None = None,
    stopping: trio.Event | None = None,
) -> None:
    stream = _WholeFrames(stream)  # (closed by the caller: the one under it)
    async with open_task_nursery("WebSocket server", cancel_on_exit=True) as nursery:
        ws: trio_websocket.WebSocketConnection | None = None
        principal: Principal | None = None
        watch = ReaderWatch(nursery)
        request: trio_websocket.WebSocketRequest | None = None
        refused = False  # (a refusal cut short by the timeout must not go on to accept)
        head: HttpRequest | None = None  # (the handshake's, as an HTTP request head)
        deadline = trio.current_time() + config.ws_connect_timeout
        with trio.move_on_at(deadline):
            # (a peer that leaves before its handshake, or whose TLS handshake fails, ends
            # the reader: its place is free at once, not after ws_connect_timeout)
            with watch.until_done() as waiting:
                request = await trio_websocket.wrap_server_stream(
                    watch.nursery(), stream, max_message_size=config.ws_max_message_size
                )
            if waiting.cancelled_caught:
                return  # (the reader ended first: no handshake will come)
            # (read as HTTP's: request.path is the whole target, a query or the absolute
            # form included; HttpRequest.path is its path)
            head = HttpRequest(method="GET", target=request.path, headers=_head_headers(request))
            if head.path != MCP_PATH:
                refused = True
                await request.reject(404, body=b"not found: MCP is served at /mcp\n")
                return
            refusal = None if guard is None else guard.refusal(head)
            if refusal is not None:  # (before the rest, as HTTP does: see _Guard)
                refused = True
                await request.reject(
                    refusal.status, extra_headers=list(refusal.headers), body=refusal.body
                )
                return
            if SUBPROTOCOL not in request.proposed_subprotocols:
                refused = True
                await request.reject(400, body=b"the WebSocket subprotocol 'mcp' is required\n")
                return
        if request is None or refused:
            return  # no complete handshake in time, or its refusal was cut short
        assert head is not None  # (made with the request)
        refusal = None
        expires = None  # (when the token expires, in trio time)
        if authenticate is not None:  # (in what is left of the time: then a 503)
            left = max(deadline - trio.current_time(), 0.0)
            found = await run_authenticate(authenticate, head, left, f"WebSocket {MCP_PATH}")
            if isinstance(found, HttpResponse):
                refusal = found  # (an expired token's too: not accepted, then closed)
            else:
                principal = found
                if found.expires_at is not None:  # (the authenticator's clock to trio's)
                    now = expiry_clock(authenticate)()
                    expires = trio.current_time() + (found.expires_at - now)
        if refusal is None and stopping is not None and stopping.is_set():
            refusal = _STOPPING  # (a graceful stop began during the handshake)
        with trio.move_on_after(config.ws_connect_timeout):
            if refusal is not None:
                body = refusal.body or None
                await request.reject(refusal.status, extra_headers=list(refusal.headers), body=body)
                return
            ws = await request.accept(subprotocol=SUBPROTOCOL)
        if ws is None:
            return  # no complete handshake in time
        channel = WebSocketChannel(
            ws,
            close_timeout=config.close_timeout,
            reader_done=watch.reader_done,
            max_message_size=config.ws_max_message_size,
            stream=stream,
        )
        nursery.start_soon(_keepalive, channel, config)
        async with open_session(
            channel,
            "server",
            handlers=handlers,
            config=config,
            connection_config=connection_config,
            principal=principal,
            resource_metadata=(
                authenticate.resource_metadata_url if isinstance(authenticate, BearerAuth) else None
            ),
            base_scopes=declared_scopes(authenticate),
            headers=RequestHeaders(head),  # (ctx.headers: the handshake's, as HTTP's)
        ) as session:
            if expires is not None:  # authenticated once, at the handshake: ends with it
                nursery.start_soon(_expire, channel, session, expires)
            if config.handshake_timeout is not None:
                nursery.start_soon(_hear_within, channel, session, config.handshake_timeout)
            if stopping is not None:
                nursery.start_soon(_stop_when, stopping, channel, session)
            await run_hook(session, on_session)


def _allow_list(values: Sequence[str] | None) -> tuple[str, ...] | None:
    """An allow list given to :func:`serve_websocket`, as a tuple (``None`` stays)."""
    if values is None:
        return None
    if isinstance(values, str):  # (a lone name would be taken letter by letter)
        raise TypeError(f"an allow list is a sequence of strings, not the string {values!r}")
    return tuple(values)


@final
class _Guard:
    """The opening handshake's ``Origin`` and ``Host`` checks: those of Streamable HTTP
    (``HttpServerConfig.allowed_origins`` / ``allowed_hosts``: the same pure rules, the
    same statuses and bodies), in the same order, after the path's."""

    def __init__(self, origins: tuple[str, ...], hosts: tuple[str, ...] | None) -> None:
        self.origins = origins
        self.hosts = hosts
        self._refused = RefusedHosts("WebSocket: ", _HOSTS_SETTING)

    def refusal(self, head: HttpRequest) -> HttpResponse | None:
        """``403`` for an ``Origin`` not allowed (none: not a browser, it passes),
        ``421`` for a ``Host`` not allowed (warned about as HTTP's are: see
        :class:`~mcp_trio._util.RefusedHosts`): the host the handshake is for, an
        absolute-form target's authority in place of the header (:attr:`HttpRequest.host`,
        as HTTP); ``None`` to go on."""
        origin = head.header("origin")
        if origin is not None and not origin_allowed(origin, self.origins):
            logger.debug("WebSocket: refused a handshake from Origin %r (403)", origin)
            return _refusal(403, f"Forbidden: Origin {origin!r} is not allowed")
        host = head.host
        if self.hosts is not None and not host_allowed(host, self.hosts):
            self._refused.note(host)
            return misdirected(host, _HOSTS_SETTING)
        return None


def _refusal(status: int, message: str, code: int = ErrorCode.INVALID_REQUEST) -> HttpResponse:
    """A refusal of the handshake, with the JSON-RPC error body HTTP's would have."""
    return json_response(status, error_body(ErrorData(code=code, message=message), None))


_STOPPING = _refusal(503, "Service Unavailable: shutting down", ErrorCode.INTERNAL_ERROR)
"""A handshake that completes during a graceful stop (as HTTP refuses new work then)."""


def _head_headers(request: trio_websocket.WebSocketRequest) -> list[tuple[bytes, bytes]]:
    """The handshake's headers for the ``authenticate`` hook, as the HTTP one sees a
    request's: wsproto keeps ``Host``, ``Sec-WebSocket-Protocol`` and
    ``Sec-WebSocket-Extensions`` apart from the others (decoded); they are put back,
    ``Host`` first (an authenticator may check it, or name the server by it)."""
    event = getattr(request, "_event", None)  # (trio-websocket keeps wsproto's Request there)
    found: list[tuple[bytes, bytes]] = []
    host = getattr(event, "host", None)
    if isinstance(host, str):
        try:
            found.append((b"host", host.encode("idna")))  # (wsproto decoded it so)
        except UnicodeError:
            found.append((b"host", host.encode("utf-8", "surrogateescape")))
    found.extend(request.headers)
    if request.proposed_subprotocols:
        found.append((b"sec-websocket-protocol", ", ".join(request.proposed_subprotocols).encode()))
    extensions = getattr(event, "extensions", None)
    if extensions:
        found.append((b"sec-websocket-extensions", ", ".join(map(str, extensions)).encode()))
    return found


def _host_header(host: str, port: int, secure: bool) -> str:
    """The ``Host`` of the handshake: the host, and the port unless it is the scheme's
    default (RFC 6455 section 4.1; RFC 9110 section 7.2), an IPv6 address in brackets."""
    name = url_host(host)
    return name if port == _default_port(secure) else f"{name}:{port}"


def _default_port(secure: bool) -> int:
    """The port of a ``wss://`` (``True``) or ``ws://`` URL that names none (RFC 6455
    section 3)."""
    return 443 if secure else 80


def _split_url(url: str) -> tuple[str, int, str, bool]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"not a ws:// or wss:// URL: {url!r}")
    secure = parts.scheme == "wss"
    resource = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, parts.port or _default_port(secure), resource, secure


@final
class _HandshakeRejected(SessionClosed):
    """The server answered the opening handshake with another status than ``101``
    (its ``status`` and ``headers``: a ``401`` challenge, for OAuth)."""

    def __init__(self, message: str, status: int, headers: tuple[tuple[bytes, bytes], ...]) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _handshake_failure(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    rejected = group.subgroup(trio_websocket.HandshakeError)
    if rejected is None:
        return None
    first = rejected.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    if isinstance(first, trio_websocket.ConnectionRejected):
        # (what the server said, not trio-websocket's repr of it)
        said = (first.body or b"")[:200].decode("utf-8", "replace").strip()
        message = (
            f"the WebSocket handshake failed: the server answered HTTP {first.status_code}"
            + (f" ({said})" if said else "")
        )
        return _HandshakeRejected(message, first.status_code, tuple(first.headers or ()))
    return SessionClosed(f"the WebSocket handshake failed: {first!r}")


_Opened: TypeAlias = tuple[trio_websocket.WebSocketConnection, trio.Event, trio.abc.Stream]
"""A client WebSocket, the event set when its reader ends, and the stream under it."""
_WsOpener: TypeAlias = AbstractAsyncContextManager[_Opened]


async def _authorized_handshake(
    stack: AsyncExitStack,
    connect: Callable[[list[tuple[bytes, bytes]]], _WsOpener],
    url: str,
    auth: OAuth,
) -> _Opened:
    """The opening handshake with ``auth``'s token (entered into ``stack``): refused
    with a challenge, the :class:`~mcp_trio.Authorizer` gets a token (discovery,
    authorization: see :mod:`mcp_trio._oauth`) and the handshake is made again, as an
    HTTP request would be sent again.

    Raises:
        SessionClosed: refused for good (the last refusal), or the authorization
            failed (its ``OAuthError``, or ``trio.TooSlowError``, as the cause).
    """
    authorizer = auth._websocket_authorizer(url)  # (shared by the URL's connections)
    with authorizer.connecting():
        return await _handshake_rounds(stack, connect, authorizer, auth.max_authorizations)


async def _handshake_rounds(
    stack: AsyncExitStack,
    connect: Callable[[list[tuple[bytes, bytes]]], _WsOpener],
    authorizer: Authorizer,
    max_authorizations: int,
) -> _Opened:
    from mcp_sansio._oauth import OAuthError  # noqa: PLC0415 (for OAuth users only)

    rounds = 0
    nonce_retried = False
    while True:
        await authorizer.ready()  # (an expired token refreshed first, if it can be)
        sent = authorizer.authorization()
        more = [] if sent is None else [(b"authorization", sent)]
        proof = None if sent is None else authorizer.proof("GET", sent)
        if proof is not None:
            more.append((b"dpop", proof))  # (a DPoP token: RFC 9449 section 7)
        try:
            opened = await stack.enter_async_context(connect(more))
        except _HandshakeRejected as exc:
            challenge = authorizer.challenge_of(exc.status, exc.headers)
            if challenge is None:
                raise
            if rounds >= max_authorizations:  # (at least 1: OAuth checks it)
                # (Say why the refusal stands: the challenge, and the retry limit.)
                said = f" {for_log(challenge.error, 100)}" if challenge.error else ""
                raise _HandshakeRejected(
                    f"the WebSocket handshake was still refused ({exc.status}{said}) after "
                    f"{rounds} authorizations (max_authorizations={max_authorizations})",
                    exc.status,
                    exc.headers,
                ) from exc
            if (
                challenge.error == "use_dpop_nonce"
                and not nonce_retried
                and authorizer.took_nonce(sent, exc.headers)
            ):
                nonce_retried = True  # (once more with the server's nonce)
                await trio.lowlevel.checkpoint()
                continue
            rounds += 1
            try:
                await authorizer.challenged(exc.status, challenge, sent)
            except (OAuthError, trio.TooSlowError) as failure:
                why = failure if isinstance(failure, OAuthError) else "it took too long"
                logger.warning("WebSocket: authorization failed: %s", why)
                raise SessionClosed(
                    f"the WebSocket handshake was refused ({exc.status}) and the "
                    f"authorization failed: {why}"
                ) from failure
            continue
        authorizer.accepted(sent)
        if proof is not None:  # (its DPoP-Nonce, RFC 9449 section 9)
            authorizer.answered(opened[0].handshake_headers)
        return opened


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


@asynccontextmanager
async def _open_ws(
    url: str,
    *,
    subprotocols: list[str],
    max_message_size: int,
    connect_timeout: float,
    ssl_context: ssl.SSLContext | None = None,
    message_queue_size: int = 1,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> AsyncGenerator[_Opened]:
    """A client WebSocket over a TCP stream we own and always close (trio-websocket
    leaves it open when the server closes first), the event set when its reader
    task ends (see :class:`ReaderWatch`), and that stream."""
    host, port, resource, secure = _split_url(url)
    try:
        with trio.fail_after(connect_timeout):
            tcp = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        raise SessionClosed(f"could not connect to {host}:{port}: {exc}") from exc
    stream: trio.SocketStream | trio.SSLStream[trio.SocketStream] = tcp
    if secure:
        context = ssl_context if ssl_context is not None else ssl.create_default_context()
        stream = trio.SSLStream(tcp, context, server_hostname=host, https_compatible=True)
    try:
        async with open_task_nursery(
            "WebSocket client", cancel_on_exit=True, translate=_handshake_failure
        ) as nursery:
            watch = ReaderWatch(nursery)
            with trio.fail_after(connect_timeout):
                if isinstance(stream, trio.SSLStream):
                    # Our own TLS handshake first: trio-websocket would turn a refused
                    # certificate into a silent end of its reader, and wait for the
                    # WebSocket handshake until the timeout.
                    await stream.do_handshake()
                whole = _WholeFrames(stream)
                async with trio.open_nursery() as guard:
                    with trio.CancelScope() as handshake:
                        guard.start_soon(_cancel_when_set, watch.reader_done, handshake)
                        ws = await trio_websocket.wrap_client_stream(
                            watch.nursery(),
                            cast(trio.SocketStream, whole),  # (documented: any Stream)
                            _host_header(host, port, secure),
                            resource,
                            subprotocols=subprotocols,
                            max_message_size=max_message_size,
                            message_queue_size=message_queue_size,
                            extra_headers=extra_headers,
                        )
                    guard.cancel_scope.cancel()
                if handshake.cancelled_caught:
                    # The reader ended before the handshake did; a rejection it raised
                    # reaches the nursery (and _handshake_failure) at the next checkpoint.
                    await trio.lowlevel.checkpoint()
                    raise SessionClosed(
                        "the server closed the connection during the WebSocket handshake"
                    )
            yield ws, watch.reader_done, whole
    finally:
        await trio.aclose_forcefully(stream)


async def probe_handshake(
    url: str, *, ssl_context: ssl.SSLContext | None, timeout: float
) -> tuple[int, tuple[tuple[bytes, bytes], ...]] | None:
    """An opening handshake without a token (what :meth:`~mcp_trio.OAuth.authorize`
    starts from): the refusal's status and headers; ``None`` when the server accepts
    it (the connection is then closed); status ``0`` and no headers when it fails
    otherwise, or not at all within ``timeout`` (logged: discovery then goes on
    without a challenge)."""
    try:
        with trio.fail_after(timeout):
            async with _open_ws(
                url,
                subprotocols=[SUBPROTOCOL],
                max_message_size=SessionConfig().ws_max_message_size,
                connect_timeout=timeout,
                ssl_context=ssl_context,
            ) as (ws, reader_done, _):
                await _close_ws(ws, reader_done)
    except _HandshakeRejected as exc:
        return exc.status, exc.headers
    except (SessionClosed, trio.TooSlowError, trio.BrokenResourceError) as exc:
        logger.info("OAuth: the WebSocket handshake without a token failed: %s", exc)
        return 0, ()
    return None


@asynccontextmanager
async def open_websocket_client(
    url: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    handlers: Handlers | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | None = None,
    start: bool = True,
) -> AsyncGenerator[Session]:
    """Connect to an MCP WebSocket server (``ws://host:port/mcp``, a custom transport).

    Args:
        url: the ``ws://`` or ``wss://`` URL of the endpoint.
        ssl_context: for ``wss://`` (default: the system's).
        headers: extra headers for the opening handshake (e.g. ``Authorization``).
        auth: OAuth 2.1 authorization (:class:`~mcp_trio.OAuth`), as for HTTP: a
            handshake refused with ``401`` (or ``403`` ``insufficient_scope``) and a
            ``WWW-Authenticate`` challenge starts discovery and authorization (the
            server's protected-resource metadata is found at the ``http(s)`` twin
            of ``url``, or where the challenge says; its ``resource`` may name
            either), then the handshake is made again with the token, at most
            ``max_authorizations`` times. The connections of one ``auth`` to one
            ``url`` share its token (the last 16 URLs): a new connection's first
            handshake carries it, refreshed first if it has expired. The server
            checks the token at the handshake; ours closes the connection when the
            token expires (:class:`~mcp_trio.TokenExpired`): open a new one to go on.
        handlers: handlers for the server's requests and notifications.
        config: runtime bounds, message size, pings.
        connection_config: the client core's configuration.
        start: run the handshake before the block starts.

    Resource handling:
        On exit the session is closed, the WebSocket closing handshake is done
        (bounded by ``close_timeout``) and the TCP connection is closed.

    Raises:
        ValueError: an extra header is malformed or one the handshake writes itself,
            or ``Authorization`` with ``auth``.
        SessionClosed: the TCP connection could not be opened (the cause is the
            ``OSError``).
        trio.BrokenResourceError: the TLS handshake failed; the cause says why (e.g. an
            ``ssl.SSLCertVerificationError``).
        trio.TooSlowError: no connection or handshake within ``ws_connect_timeout``.
        SessionClosed: the server rejected the handshake (the cause says how), closed
            the connection during it, or did not accept the ``mcp`` subprotocol; with
            ``auth``, the authorization it asked for failed (the cause says why).
        TokenExpired: (a :class:`~mcp_trio.SessionClosed`, from the session's requests
            and waits) the server closed the connection because the token expired
            (code 1008, ``invalid_token``).
    """
    config = config if config is not None else SessionConfig()
    extra = extra_headers(headers, reserved=_RESERVED_HEADERS, transport="WebSocket")
    if auth is not None and any(name == b"authorization" for name, _ in extra):
        raise ValueError("pass auth= or an Authorization header, not both")

    def connect(more: list[tuple[bytes, bytes]]) -> _WsOpener:
        return _open_ws(
            url,
            subprotocols=[SUBPROTOCOL],
            max_message_size=config.ws_max_message_size,
            connect_timeout=config.ws_connect_timeout,
            ssl_context=ssl_context,
            extra_headers=[*extra, *more],
        )

    async with AsyncExitStack() as stack:
        if auth is None:
            ws, reader_done, stream = await stack.enter_async_context(connect([]))
        else:
            ws, reader_done, stream = await _authorized_handshake(stack, connect, url, auth)
        if ws.subprotocol != SUBPROTOCOL:
            with trio.move_on_after(config.close_timeout):
                await _close_ws(ws, reader_done, 1002, "the 'mcp' subprotocol is required")
            raise SessionClosed(f"the server did not accept the {SUBPROTOCOL!r} subprotocol")
        channel = WebSocketChannel(
            ws,
            close_timeout=config.close_timeout,
            reader_done=reader_done,
            max_message_size=config.ws_max_message_size,
            client=True,
            stream=stream,
        )
        async with (
            open_task_nursery("WebSocket client", cancel_on_exit=True) as nursery,
            open_session(
                channel,
                "client",
                handlers=handlers,
                config=config,
                connection_config=connection_config,
            ) as session,
        ):
            nursery.start_soon(_keepalive, channel, config)
            if start:
                await session.start()
            yield session

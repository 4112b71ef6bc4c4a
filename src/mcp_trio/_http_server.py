"""The Streamable HTTP server: :func:`serve_http`, HTTP/1.1 (h11) over trio sockets.

Theory of operation
-------------------
One :class:`~mcp_sansio.http.HttpServer` (the rules, both eras) and one
:class:`~._http_endpoint.Endpoint` (handlers, timer, output routing) serve every TCP
connection. Each connection is one task running h11, one request at a time (HTTP/1.1
keep-alive; a pipelined request waits in h11 until the one before it is answered):

1. **Head.** The head must arrive within ``header_timeout`` of its first byte (and a new
   connection's first byte within ``header_timeout`` of the accept; an idle keep-alive
   connection's within ``keepalive_timeout``). A slow head costs its own task only and
   ends with ``408``; an oversize one with ``431``.
2. **Early refusal.** ``HttpServer.check_head`` (path, ``Origin``, ``Host``, method,
   media types, ``Content-Length``) may refuse before any body is read; the connection
   is then closed if a body was coming, so it is never read. (It also answers ``GET``
   of the Protected Resource Metadata, which needs no token.)
3. **Authentication**, when ``serve_http(authenticate=...)`` is set: the hook sees the
   head, within ``authenticate_timeout``, before any MCP rule does. A refusal is
   written after the body is read and dropped (so the connection stays usable: clients
   retry with a token at once), unless the client waits for ``100 Continue``.
4. **Body**, at most ``max_body_size + 1`` bytes within ``body_timeout`` (over: the core
   answers ``413`` and the rest is never read).
5. **Decision.** A complete response is written at once. Otherwise the response is
   registered as a :class:`~._http_endpoint.ResponseSlot` and written as the core routes
   output to it: one JSON body when ready, or SSE events as they are produced, with a
   comment line every ``sse_keepalive_interval`` of silence. While it waits for output
   the connection task reads its socket (the slot wakes it by cancelling that read, so
   no second task is needed): the client closing it ends the response, and
   ``HttpServer.stream_closed`` turns that into cancellation (modern) or detachment
   (legacy, resumable); so too while a modern request waits for a handler slot (a
   second task reads then, only when the wait blocks). A client that leaves during a
   write is noticed by the write failing (or by ``write_timeout``).

Shutdown (:meth:`HttpServeHandle.aclose`): refuse new work with ``503`` and close each
connection after its current exchange, but keep accepting POSTs that carry only answers
and notifications (a legacy handler may be waiting for the client's answer to its
``sampling/createMessage``), while running handlers get ``shutdown_grace_period`` to
answer. Then stop listening, close idle connections, ``HttpServer.close()`` (sessions
end, streams finish, modern requests are cancelled), give the responses
``close_timeout`` to be written, and cancel the rest.
"""

from __future__ import annotations

import errno
import functools
import logging
import math
import ssl
from collections.abc import Callable, Collection
from contextlib import suppress
from itertools import chain
from typing import Any, Final, NoReturn, final

import attrs
import h11
import trio

from mcp_sansio import ConnectionConfig, encode_sse_comment
from mcp_sansio._http_common import HTTP_HOSTS_SETTING
from mcp_sansio._json import JSONDecodeError, loads
from mcp_sansio.http import (
    AwaitResponse,
    EventStore,
    Headers,
    HttpRequest,
    HttpResponse,
    HttpServer,
    HttpServerConfig,
    OpenStream,
    Principal,
    RequiredScopes,
)

from ._config import SessionConfig, with_wall_clock
from ._handlers import Handlers
from ._http_auth import (
    CONNECTION_SCHEME,
    Authenticate,
    BearerAuth,
    declared_scopes,
    expiry_clock,
    note_advertised_scopes,
    run_authenticate,
)
from ._http_auth import UNAVAILABLE as _UNAVAILABLE
from ._http_config import HttpTransportConfig
from ._http_context import PEER_ADDRESS, REQUEST_HEAD
from ._http_endpoint import Endpoint, ResponseSlot
from ._http_h11 import END_OF_MESSAGE, head_fields
from ._http_wire import H11Stream, WireError
from ._pool import scopes_needed
from ._serve_handle import ListeningHandle
from ._util import RefusedHosts, is_loopback_host, plain_interrupt, turn_away

__all__ = ["HttpServeHandle", "HttpServerStatistics", "serve_http"]

logger = logging.getLogger("mcp_trio")

_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_KEEPALIVE: Final = encode_sse_comment("keep-alive")
_NO_LENGTH: Final = frozenset({204, 304})
_REFUSE_TIMEOUT: Final = 1.0


_WILDCARD_HOSTS: Final = frozenset({None, "", "0.0.0.0", "::"})
"""``host`` values of :func:`serve_http` that bind every interface."""
_DEFAULT_ALLOWED_HOSTS: Final[tuple[str, ...] | None] = attrs.fields(
    HttpServerConfig
).allowed_hosts.default

_LINGER_SECONDS: Final = 2.0
_LINGER_BYTES: Final = 16 * 1024 * 1024
"""How long, and how much, a connection closing on an unread body reads and drops."""


@functools.lru_cache(maxsize=64)
def _stream_head(fields: tuple[tuple[bytes, bytes], ...]) -> h11.Response:
    """The head of an event stream with these fields: h11 validates them once, not for
    every response (a server sends the same few heads; h11 events are immutable, and
    cached by value, bounded: CORS may echo many origins)."""
    return h11.Response(status_code=200, headers=list(fields))


def _starts_work(body: bytes) -> bool:
    """Whether a body holds a JSON-RPC request (while shutting down, only answers and
    notifications are taken: a handler may be waiting for the client's answer)."""
    try:
        obj = loads(body)
    except JSONDecodeError:
        return False
    items = obj if type(obj) is list else [obj]
    return any(type(i) is dict and "method" in i and "id" in i for i in items)


@final
@attrs.frozen(kw_only=True)
class HttpServerStatistics:
    """A snapshot of a server's tables (trio's ``statistics()`` convention)."""

    connections: int
    """TCP connections open."""
    running_handlers: int
    """Handler tasks running."""
    sessions: int
    """Legacy sessions alive."""
    modern_requests: int
    """Modern requests in progress."""
    open_responses: int
    """HTTP responses in progress (SSE streams and awaited answers)."""


@final
class HttpServeHandle(ListeningHandle):
    """What :func:`serve_http` gives ``task_status.started``: the running server."""

    def __init__(self, server: _Server) -> None:
        self._server = server

    @property
    def listeners(self) -> list[trio.SocketListener]:
        """The listening sockets."""
        return self._server.listeners

    @property
    def url(self) -> str:
        """``http://host:port/path`` of the first listener (``https://`` with an
        ``ssl_context``)."""
        scheme = "https" if self._server.ssl_context is not None else "http"
        return self._url(scheme, self.http.config.endpoint)

    @property
    def http(self) -> HttpServer:
        """The sans-IO endpoint (sessions, statistics; read-only use)."""
        return self._server.endpoint.http

    @property
    def _endpoint(self) -> Endpoint:
        """The task side (a :class:`~mcp_trio.Server` tracks its sessions there)."""
        return self._server.endpoint

    def send_notification(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Broadcast a change notification (``notifications/tools/list_changed``, ...)
        to every ready legacy session (on its GET stream) and every modern
        ``subscriptions/listen`` stream that asked for it. Does not block.

        Returns:
            How many sessions and subscriptions it was sent to.
        """
        return self._server.endpoint.send_notification(method, params)

    def statistics(self) -> HttpServerStatistics:
        """A snapshot of the server's tables."""
        table = self.http.statistics()
        return HttpServerStatistics(
            connections=self._server.open_connections,
            running_handlers=self._server.endpoint.running_handlers,
            sessions=table["sessions"],
            modern_requests=table["modern_requests"],
            open_responses=table["open_responses"],
        )

    async def aclose(self) -> None:
        """Shut down gracefully (see the module docs) and wait until :func:`serve_http`
        has returned (:meth:`Server.serve_http <mcp_trio.Server.serve_http>`: until it
        has left the server's lifespan too, so that a caller who cancels next does not
        cut the lifespan's teardown). Idempotent."""
        self._server.shutdown_requested.set()
        await self._server.finished.wait()
        await self._wait_returned()


class _Idle(Exception):
    """A connection parked after its answer (see ``_Connection._direct_out``) timed
    out idle or was stopped by shutdown: close it."""


@final
class _More:
    """The type of :data:`_MORE`."""


_MORE: Final = _More()
"""h11 needs more bytes of the request body."""


@final
class _Server:
    def __init__(
        self,
        endpoint: Endpoint,
        listeners: list[trio.SocketListener],
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        self.endpoint = endpoint
        self.listeners = listeners
        self.ssl_context = ssl_context
        self.connections: set[_Connection] = set()
        self.open_connections = 0
        self.conn_nursery: trio.Nursery | None = None
        self.accept_scope = trio.CancelScope()
        self.shutdown_requested = trio.Event()
        self.finished = trio.Event()
        self._no_connections = trio.Event()
        self._no_connections.set()
        self.refused_hosts = RefusedHosts("", HTTP_HOSTS_SETTING)

    async def accept_all(self, *, task_status: trio.TaskStatus[None]) -> None:
        with self.accept_scope:
            async with trio.open_nursery() as nursery:
                for listener in self.listeners:
                    nursery.start_soon(self._accept_loop, listener)
                task_status.started()

    async def _accept_loop(self, listener: trio.SocketListener) -> None:
        limit = self.endpoint.transport.max_connections
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _CAPACITY_ERRNOS:
                    raise
                logger.error("accept failed (%s); retrying in 100 ms", errno.errorcode[exc.errno])
                await trio.sleep(0.1)
                continue
            if self.open_connections >= limit:
                logger.warning("refused a connection: %d are open (max_connections)", limit)
                await self._turn_away(stream)
                continue
            self.open_connections += 1
            self._no_connections = trio.Event()
            assert self.conn_nursery is not None
            self.conn_nursery.start_soon(self._serve_one, stream, name="mcp http connection")

    async def _turn_away(self, stream: trio.SocketStream) -> None:
        """A connection over ``max_connections``: ``503``, unread, and closed
        (:func:`~mcp_trio._util.turn_away`)."""
        await turn_away(stream, tls=self.ssl_context is not None)

    async def _serve_one(self, tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        with suppress(OSError):  # (the peer may be gone already: then unknown)
            PEER_ADDRESS.set(str(tcp.socket.getpeername()[0]))  # (this task's context)
        if self.ssl_context is not None:
            stream = trio.SSLStream(tcp, self.ssl_context, server_side=True)
            CONNECTION_SCHEME.set("https")  # (this task's context: BearerAuth's DPoP htu)
        conn = _Connection(self, stream)
        self.connections.add(conn)
        try:
            with conn.scope:
                await conn.run()
                if conn.unread_input:
                    await conn.linger()
        except (WireError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            logger.debug("HTTP connection dropped: %r", exc)
        except Exception:
            logger.exception("HTTP connection failed")
        finally:
            self.connections.discard(conn)
            self.open_connections -= 1
            if not self.open_connections:
                self._no_connections.set()
            await trio.aclose_forcefully(stream)

    async def shutdown(self) -> None:
        endpoint = self.endpoint
        endpoint.stop_taking()
        config = endpoint.config
        with trio.move_on_after(config.shutdown_grace_period):
            await endpoint.wait_handlers_idle()
        self.accept_scope.cancel()
        for listener in self.listeners:
            await trio.aclose_forcefully(listener)
        for conn in self.connections:
            conn.stop_if_idle()
        events = endpoint.http.close()
        endpoint.pump()
        endpoint.handle_events_nowait(events)
        endpoint.cancel_handlers()
        with trio.move_on_after(config.close_timeout):
            await self._no_connections.wait()
        self.cancel_everything()
        await self._no_connections.wait()  # cancelled tasks end promptly
        await endpoint.wait_handlers_idle()

    def cancel_everything(self) -> None:
        self.endpoint.stop_taking()
        self.accept_scope.cancel()
        for conn in self.connections:
            conn.scope.cancel()
        self.endpoint.cancel_handlers()


@final
class _Connection:
    """One TCP connection: h11, one request at a time."""

    def __init__(self, server: _Server, stream: trio.abc.Stream) -> None:
        self.server = server
        self.endpoint = server.endpoint
        self.transport = server.endpoint.transport
        self.wire = H11Stream(stream, h11.SERVER, self.transport.max_header_size)
        self.scope = trio.CancelScope()
        self._idle_scope: trio.CancelScope | None = None
        self._head_only = False  # answering a HEAD request: headers only (RFC 9110 9.3.2)
        self._post = False  # answering a POST (its handlers may answer at once)
        self._cors_on = server.endpoint.http.config.cors
        self._cors: Headers = ()  # the CORS headers of the current response (cors_headers)
        self.unread_input = False
        """The connection ends refusing a request whose body was not read (413, say)."""

    def stop_if_idle(self) -> None:
        """Shutdown: a connection waiting for its next request closes now."""
        if self._idle_scope is not None:
            self._idle_scope.cancel()

    async def run(self) -> None:
        first = True
        while True:
            # The wait for each request is bounded by this scope's deadline, set only
            # meanwhile (see _wait_request); it is left only after a late wake-up.
            timer = trio.CancelScope()
            with timer:
                while await self._wait_request(timer, first):
                    if timer.cancel_called:
                        break  # late: served outside the scope it would cancel
                    if not await self._serve_cycle():
                        return
                    first = False
                else:
                    return  # the client closed the connection
            if timer.cancelled_caught or not await self._serve_cycle():
                return  # timed out, or stopped by shutdown, while waiting
            first = False

    async def _wait_request(self, timer: trio.CancelScope, first: bool) -> bool:
        """Wait for the first bytes of the next request (unless h11 holds them already):
        a new connection's within ``header_timeout`` of the accept, a kept-alive one's
        within ``keepalive_timeout``. Returns ``False`` at end of input.

        The bound is the deadline of ``timer``, the scope around the connection's
        requests, set for the wait only: moving a deadline twice costs half of what a
        scope per wait does (trio 0.35: ~360 bytecodes against ~720, every request of
        a kept-alive connection). Shutdown cancels ``timer`` too (``_idle_scope``).
        A cancellation that comes once this task was woken, before it ran, is not
        delivered: the wait returns the bytes, as it did with a scope of its own, but
        ``timer`` stays cancelled; then the caller serves the request outside it.
        """
        wire, cfg = self.wire, self.transport
        if wire.h11.trailing_data[0]:
            return True
        timer.deadline = self.endpoint.now() + (
            cfg.header_timeout if first else cfg.keepalive_timeout
        )
        self._idle_scope = timer
        more = await wire.receive()
        self._idle_scope = None
        timer.deadline = math.inf
        return more

    async def _serve_cycle(self) -> bool:
        """Serve the request that has begun to arrive; whether the connection may
        serve another."""
        return await self._serve_next() and not self.endpoint.closing and self.wire.next_cycle()

    async def _serve_next(self) -> bool:
        """Read the next request and serve it; returns whether the connection may be
        reused.

        What the request was (its head, with the token; its principal; its body and
        the core's events, with the params) lives only in :meth:`_begin`'s frame, over
        by the time its response is written: a connection parked idle after its answer
        (``_direct_out``) keeps none of it alive.
        """
        begun = await self._begin()
        if isinstance(begun, bool):
            return begun
        decision, slot = begun
        try:
            gone = await self._stream(decision, slot)
        finally:
            self.endpoint.close_response(slot)
        return not gone

    # ------------------------------------------------------------------ reading

    async def _next_request(self) -> HttpRequest | None:
        """Read the head of the next request (within ``header_timeout`` if it is not
        all in), or refuse it; ``None``: close the connection."""
        wire, cfg = self.wire, self.transport
        self._head_only = False
        self._cors = ()
        try:
            # Usually the whole head came in one read: no timer is needed for it.
            event = wire.next_event_nowait()
            if event is None:
                with trio.move_on_after(cfg.header_timeout) as scope:
                    event = await wire.next_event()
                if scope.cancelled_caught:
                    await self._refuse(408, "Request Timeout: the request head took too long")
                    return None
        except h11.RemoteProtocolError as exc:
            await self._refuse(exc.error_status_hint, f"Bad request: {exc}")
            return None
        if not isinstance(event, h11.Request):
            return None
        # h11 bounds only a head still incomplete; one that arrived whole is measured here.
        # (raw_items: one list, not h11's Headers walked a pair at a time through
        # Sequence.__iter__; the raw names are as long as the lower-cased ones. Summed in
        # C: names and values, and 4 bytes of separators per field.)
        raw = event.headers.raw_items()
        size = len(event.target) + 4 * len(raw) + sum(map(len, chain.from_iterable(raw)))
        if size > cfg.max_header_size:
            await self._refuse(431, "Request Header Fields Too Large")
            return None
        return HttpRequest(
            method=event.method.decode("ascii"),
            target=event.target.decode("latin-1"),
            headers=raw,  # (HttpRequest lower-cases the names)
        )

    async def _read_body(self, limit: int) -> tuple[bytes, bool] | None:
        wire = self.wire
        if wire.h11.they_are_waiting_for_100_continue:
            await wire.send([h11.InformationalResponse(status_code=100, headers=[])], self._timeout)
        body = bytearray()
        try:
            # What has arrived is taken at once; the timer starts only when the rest of
            # the body has to be waited for.
            read = self._take_body(body, limit)
            if read is _MORE:
                with trio.move_on_after(self.transport.body_timeout) as scope:
                    while read is _MORE:
                        await wire.receive()
                        read = self._take_body(body, limit)
                if scope.cancelled_caught:
                    await self._refuse(408, "Request Timeout: the request body took too long")
                    return None
        except h11.RemoteProtocolError as exc:
            await self._refuse(exc.error_status_hint, f"Bad request: {exc}")
            return None
        assert not isinstance(read, _More)
        return read

    def _take_body(self, body: bytearray, limit: int) -> tuple[bytes, bool] | _More | None:
        """Move the body events h11 holds into ``body``: the body and whether it is
        complete (over ``limit``: incomplete), ``None`` if something else came, or
        :data:`_MORE` when h11 needs more bytes."""
        while True:
            event = self.wire.next_event_nowait()
            if event is None:
                return _MORE
            if isinstance(event, h11.Data):
                body += event.data
                if len(body) > limit:
                    return bytes(body), False
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body), True
            else:
                return None

    # ------------------------------------------------------------------ serving

    @property
    def _timeout(self) -> float | None:
        return self.endpoint.config.write_timeout

    async def _begin(self) -> bool | tuple[OpenStream | AwaitResponse, ResponseSlot]:
        """Read the next request and serve it up to its response: whether the
        connection may be reused when it is answered already, else the response to
        write over time and its slot (open: the caller closes it)."""
        request = await self._next_request()
        if request is None:
            return False
        REQUEST_HEAD.set(request)  # (this task's context: ctx.headers of its requests)
        endpoint, http = self.endpoint, self.endpoint.http
        self._head_only = request.method == "HEAD"
        self._post = request.method == "POST"
        if self._cors_on:
            self._cors = http.cors_headers(request)
        if endpoint.closing and request.method != "POST":
            await self._respond(_UNAVAILABLE, close=True)
            return False
        early = http.check_head(request)
        if early is not None:
            if early.status == 421:
                self.server.refused_hosts.note(request.host)
            # A request without a body (the metadata GET, a CORS preflight) is complete
            # already: take its end from h11 (no I/O) so that the connection stays usable.
            # A body is never read (a malformed one only means closing after the answer).
            with suppress(h11.RemoteProtocolError):
                self._take_body(bytearray(), 0)
            reusable = self.wire.h11.their_state is h11.DONE
            self.unread_input = not reusable
            await self._respond(early, close=not reusable)
            return reusable
        principal = None
        if endpoint.authenticate is not None:
            found = await run_authenticate(
                endpoint.authenticate,
                request,
                self.transport.authenticate_timeout,
                f"{request.method} {request.path}",
            )
            if isinstance(found, HttpResponse):
                return await self._refuse_request(found)
            principal = found
        read = await self._read_body(http.config.max_body_size)
        if read is None:
            return False
        body, complete = read
        if endpoint.closing and _starts_work(body):
            await self._respond(_UNAVAILABLE, close=True)
            return False
        reply = http.handle_request(
            request.with_body(body),
            now=endpoint.now(),
            head_checked=True,
            principal=principal,  # (its scopes are checked: http_config.required_scopes)
        )
        decision = reply.decision
        if isinstance(decision, HttpResponse):
            endpoint.pump(drain_all=False)
            busy = await endpoint.handle_events(reply.events, principal)
            if busy is not None and not reply.batch:
                # Its one notification found no handler slot in time: not taken, so
                # not 202 (the client may send it again; nothing of it ran).
                decision = busy
            self.unread_input = not complete
            await self._respond(decision, close=not complete)
            return complete
        slot = endpoint.open_response(decision.stream_id)
        try:  # (from here on, whatever happens closes the slot: here, or the caller)
            expires_at = None if principal is None else principal.expires_at
            if expires_at is not None and (
                request.method == "GET" or http.is_listen(decision.stream_id)
            ):
                # Authenticated once, at its start: the stream ends with its token
                # (a GET stream resumably, a listen with an error that says why).
                left = max(0.0, expires_at - expiry_clock(endpoint.authenticate)())
                endpoint.release_at(decision.stream_id, trio.current_time() + left)
            endpoint.pump(drain_all=False)
            busy = await endpoint.handle_events(
                reply.events,
                principal,
                inline=isinstance(decision, AwaitResponse),
                left=self._until_gone,
            )
        except BaseException:
            endpoint.close_response(slot)
            raise
        if busy is not None and not reply.batch:
            # Its one request found no handler slot in time (the core has the same error
            # as its answer): 503 with Retry-After, in place of a response nothing of
            # which is written yet. (A batch's other answers are in the decision.)
            endpoint.close_response(slot)
            self.unread_input = not complete
            await self._respond(busy, close=not complete)
            return complete
        return decision, slot

    async def _until_gone(self) -> NoReturn:
        """Read the socket until the client closes it, then raise: what a modern request
        waiting for a handler slot watches (``Endpoint.handle_events``), as
        :meth:`_wait_output` watches while a response waits. Bytes of a pipelined
        request (at most ``max_header_size``) wait in h11; past that, reading stops.

        Raises:
            WireError: the client left (or the connection broke).
        """
        wire, limit = self.wire, self.transport.max_header_size
        start = wire.received
        while wire.received - start < limit:
            if not await wire.receive():
                raise WireError("the client closed the connection")
        await trio.sleep_forever()

    async def _refuse_request(self, response: HttpResponse) -> bool:
        """Refuse a request the head of which is read: read and drop its body first
        (bounded as any body is), so that the connection can be used again; returns
        whether it can."""
        if self.wire.h11.they_are_waiting_for_100_continue:
            complete = False  # it sends no body unless told to: do not tell it
        else:
            read = await self._read_body(self.endpoint.http.config.max_body_size)
            if read is None:
                return False
            complete = read[1]
        self.unread_input = not complete
        await self._respond(response, close=not complete)
        return complete

    async def _stream(self, decision: OpenStream | AwaitResponse, slot: ResponseSlot) -> bool:
        """Write a response the core produces over time, watching for the client leaving.

        Returns:
            Whether the connection is unusable (the client left, or writing failed).
        """
        gone = False
        try:
            await self._write(decision, slot, self.wire.received)
        except _Idle:
            gone = True  # an idle keep-alive connection to close (see _direct_out)
        except WireError as exc:
            if slot.parked:
                logger.debug("idle HTTP connection closed: %s", exc)
            else:
                logger.debug("HTTP response not completed: %s", exc)
            gone = True
        if slot.overflow:
            # A live response is lost (its client may not know why): worth a warning,
            # which also says which bound to raise if the clients are not at fault.
            logger.warning(
                "dropped an HTTP response: its client reads too slowly (over %d bytes"
                " waiting: max_response_buffer)",
                slot.max_size,
            )
        return gone or slot.overflow

    async def _wait_output(self, slot: ResponseSlot, start: int, deadline: float) -> bool:
        """Wait until the core routes output to ``slot`` (``True``) or ``deadline``
        passes (``False``).

        Meanwhile the socket is read, in this same task: end of input means the client
        left. Bytes of a pipelined request (at most ``max_header_size`` since ``start``)
        wait in h11; past that, reading stops.

        Raises:
            WireError: the client left (or the connection broke).
        """
        wire, limit = self.wire, self.transport.max_header_size
        while not slot.changed:
            with trio.CancelScope(deadline=deadline) as scope:
                slot.waker = scope
                try:
                    if wire.received - start < limit:
                        if not await wire.receive():
                            raise WireError("the client closed the connection")
                    else:
                        await trio.sleep_forever()
                finally:
                    slot.waker = None
            if scope.cancelled_caught and not slot.changed:
                return False
        slot.changed = False
        return True

    async def _write(
        self, decision: OpenStream | AwaitResponse, slot: ResponseSlot, start: int
    ) -> None:
        if isinstance(decision, AwaitResponse):
            while slot.ready is None and slot.sse_headers is None:
                if slot.overflow:
                    raise WireError("response buffer overflow")
                await self._wait_direct(slot, start, math.inf, self._direct_answer)
            if slot.failure is not None:
                raise slot.failure
            if slot.written:
                await self._after_direct(slot, start)
                return
            if slot.ready is not None:
                await self._respond(slot.ready, slot=slot)
                return
            headers, data, end = slot.sse_headers or (), b"", False
        else:
            headers, data, end = decision.headers, decision.data, decision.end
            if self._post and not end:
                await self._let_handlers_start(slot)
        events: list[h11.Event] = [_stream_head((*headers, *self._cors))]
        if data:
            events.append(h11.Data(data=data))
        interval = self.transport.sse_keepalive_interval
        while True:
            if slot.failure is not None:
                raise slot.failure
            if slot.rest or slot.written:
                await self._after_direct(slot, start)
                if slot.written:
                    return
            if slot.overflow:
                raise WireError("the client reads too slowly (max_response_buffer)")
            if slot.data:
                events.append(h11.Data(data=bytes(slot.data)))
                slot.data.clear()
            if end or slot.end:
                # Head, data and end in one write when they are all ready.
                events.append(END_OF_MESSAGE)
                await self._send(events, slot)
                return
            if events:
                await self._send(events, slot)
                events = []
                continue
            deadline = math.inf if interval is None else trio.current_time() + interval
            if not await self._wait_direct(slot, start, deadline, self._direct_data):
                events.append(h11.Data(data=_KEEPALIVE))

    async def _let_handlers_start(self, slot: ResponseSlot) -> None:
        """Before writing the head of a POST's SSE stream: let the handlers its request
        started take their first step, so that an answer given at once goes out with the
        head and the priming event, in one write (and one read for the client). Two
        scheduler passes, not one: trio runs the tasks of a pass in either order. A
        handler that waits for something sees the head written two passes later, not
        at its first output.

        Shielded: the wait adds no cancel point. A cancellation that comes meanwhile
        is delivered at the next one, after the head (with whatever is ready) has gone
        out without waiting (``write_nowait``), as it did before this wait existed.
        (No test tells a plain checkpoint apart: it would need the connection's task
        cancelled within those two passes, which nothing outside can time.)"""
        await trio.lowlevel.cancel_shielded_checkpoint()
        if not slot.changed:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def _send(self, events: list[h11.Event], slot: ResponseSlot | None = None) -> None:
        """Write ``events`` within ``write_timeout``. With a ``slot``, its overflow (the
        client reads too slowly) cancels the write too: one scope for both.

        Raises:
            WireError: the write failed, timed out, or the slot overflowed.
        """
        wire, timeout = self.wire, self._timeout
        if slot is None:
            await wire.send(events, timeout)
            return
        rest = wire.write_nowait(wire.frame(events))
        if rest:
            await self._write_rest(rest, slot)
        # (else all out at once: no scope, no yield, the usual case)

    async def _write_rest(self, rest: bytes | memoryview, slot: ResponseSlot) -> None:
        """Write what the socket did not take at once, within ``write_timeout``; the
        slot's overflow cancels the write.

        Raises:
            WireError: the write failed, timed out, or the slot overflowed.
        """
        wire, timeout = self.wire, self._timeout
        if slot.overflow:
            self.wire.h11.send_failed()
            raise WireError("the client reads too slowly (max_response_buffer)")
        with trio.CancelScope() as scope:
            if timeout is not None:
                scope.deadline = trio.current_time() + timeout
            slot.abort = scope
            try:
                await wire.write(rest, None)
            finally:
                slot.abort = None
        if scope.cancelled_caught:
            self.wire.h11.send_failed()
            if slot.overflow:
                raise WireError("the client reads too slowly (max_response_buffer)")
            raise WireError(f"writing timed out after {timeout} s")

    def _response_events(self, response: HttpResponse, close: bool) -> list[h11.Event]:
        # Every answer but an event stream's head (_stream_head), errors included: its
        # fields validated once each (head_fields), the length added.
        headers = response.headers
        if self._cors and response.header("access-control-allow-origin") is None:
            headers += self._cors  # (a preflight's answer, or the public metadata, has its own)
        if close or self.endpoint.closing:
            headers += ((b"connection", b"close"),)
        length = None if response.status in _NO_LENGTH else str(len(response.body)).encode()
        head = h11.Response(status_code=response.status, headers=head_fields(headers, length))
        events: list[h11.Event] = [head]
        if response.body and not self._head_only:  # (the length still says what GET would get)
            events.append(h11.Data(data=response.body))
        events.append(END_OF_MESSAGE)
        return events

    async def _respond(
        self, response: HttpResponse, *, close: bool = False, slot: ResponseSlot | None = None
    ) -> None:
        await self._send(self._response_events(response, close), slot)

    async def _wait_direct(
        self,
        slot: ResponseSlot,
        start: int,
        deadline: float,
        direct: Callable[[ResponseSlot, int], bool],
    ) -> bool:
        """:meth:`_wait_output`, letting the task that routes output write it meanwhile
        (plain TCP only: see :meth:`_direct_out`)."""
        if self.wire.writes_directly:
            slot.direct = lambda slot: direct(slot, start)
        try:
            return await self._wait_output(slot, start, deadline)
        finally:
            slot.direct = None
            self._idle_scope = None

    def _direct_answer(self, slot: ResponseSlot, start: int) -> bool:
        """``slot.direct`` while an answer is awaited: write the complete answer."""
        if slot.ready is None:
            return False
        return self._direct_out(slot, self._response_events(slot.ready, False), start, True)

    def _direct_data(self, slot: ResponseSlot, start: int) -> bool:
        """``slot.direct`` while an SSE response waits for events: write them (and the
        end)."""
        events: list[h11.Event] = []
        if slot.data:
            events.append(h11.Data(data=bytes(slot.data)))
            slot.data.clear()
        if slot.end:
            events.append(END_OF_MESSAGE)
        if not events:
            return False
        return self._direct_out(slot, events, start, slot.end)

    def _direct_out(
        self, slot: ResponseSlot, events: list[h11.Event], start: int, final: bool
    ) -> bool:
        """Write output from the task that routed it (``ResponseSlot.push``), while this
        connection's task is parked reading its socket in :meth:`_wait_output` (so
        nothing else is using h11 or the socket): it leaves a scheduler pass sooner.
        What the socket did not take is left in ``slot.rest``, and a failure in
        ``slot.failure``, for the connection's task, which is then woken. Never raises:
        it runs inside the core's output routing.

        Returns:
            Whether the connection's task may stay parked: all is out and either more
            is to come (the keep-alive comment timer restarts), or the response is
            complete and the connection can be kept alive with nothing of a next request
            received yet (since ``start``, or with this request: h11 holds those bytes).
            Then it stays parked as an idle keep-alive connection (its wait gets the
            ``keepalive_timeout`` and shutdown may end it) and wakes when the next
            request's first bytes arrive.
        """
        wire = self.wire
        try:
            rest = wire.write_nowait(wire.frame(events))
        except WireError as exc:
            slot.failure = exc
            slot.direct = None
            return False
        slot.written = final
        if rest:
            slot.rest = rest
            slot.direct = None
            return False
        waker, h = slot.waker, wire.h11
        if not final:
            interval = self.transport.sse_keepalive_interval
            if waker is not None and interval is not None:
                waker.deadline = trio.current_time() + interval
            return True
        slot.direct = None
        if (
            waker is None
            or waker.cancel_called  # (its deadline passed: the owner wakes, unparked)
            or wire.received != start
            or self.endpoint.closing
            or h.our_state is not h11.DONE
            or h.their_state is not h11.DONE
            # Bytes of the next request came with this one's (in the same read, before
            # ``start``): they wait in h11, and no new bytes may ever wake a park.
            or h.trailing_data[0]
        ):
            return False
        waker.deadline = trio.current_time() + self.transport.keepalive_timeout
        self._idle_scope = waker
        slot.parked = slot.changed = True
        return True

    async def _after_direct(self, slot: ResponseSlot, start: int) -> None:
        """The connection's part after :meth:`_direct_out`: write what the socket did
        not take; a parked connection woken with no new bytes (its keep-alive timeout,
        or shutdown) is closed.

        Raises:
            WireError: the write failed.
            _Idle: close the connection.
        """
        rest, slot.rest = slot.rest, b""
        if rest:
            # (a client that does not read: the slot's overflow cancels this write)
            await self._write_rest(rest, slot)
        elif slot.parked and self.wire.received == start:
            raise _Idle

    async def linger(self) -> None:
        """After answering a request whose body is still coming: stop writing, and read
        and drop what the client goes on sending, a while. Closing with unread input
        makes the kernel reset the connection, and a reset may destroy the answer
        before the client reads it (RFC 9112 9.6, "lingering close")."""
        stream = self.wire.stream
        with trio.move_on_after(_LINGER_SECONDS), suppress(trio.BrokenResourceError, OSError):
            if isinstance(stream, trio.SocketStream):
                await stream.send_eof()
            dropped = 0
            while dropped < _LINGER_BYTES and (data := await stream.receive_some(65_536)):
                dropped += len(data)

    async def _refuse(self, status: int, message: str) -> None:
        """Best effort: tell a misbehaving client why it is being disconnected."""
        if self.wire.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        response = HttpResponse(
            status=status,
            headers=((b"content-type", b"text/plain; charset=utf-8"),),
            body=message.encode() + b"\n",
        )
        with trio.move_on_after(_REFUSE_TIMEOUT):
            with suppress(WireError, h11.LocalProtocolError):
                await self._respond(response, close=True)


def _scopes_of(
    hooks: tuple[RequiredScopes, ...], base: frozenset[str] = frozenset()
) -> RequiredScopes:
    """One ``required_scopes`` for the core: :func:`~mcp_trio._pool.scopes_needed` of
    ``hooks`` and ``base`` (the authenticator's scopes, :func:`declared_scopes`), the
    rule a session applies over WebSocket too. A hook that raises, or names what is
    no scope token, is logged here: the core answers ``500`` and has no logging."""

    def required_scopes(
        principal: Principal, method: str, params: dict[str, Any] | None
    ) -> Collection[str]:
        try:
            return scopes_needed(hooks, principal, method, params, base)
        except Exception:
            logger.exception("required_scopes failed for %r", method)
            raise

    return required_scopes


@plain_interrupt
async def serve_http(
    handlers: Handlers | None,
    *,
    connection_config: ConnectionConfig | None = None,
    host: str | None = "127.0.0.1",
    port: int = 0,
    path: str | None = None,
    http_config: HttpServerConfig | None = None,
    config: SessionConfig | None = None,
    transport: HttpTransportConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    session_id_factory: Callable[[], str] | None = None,
    event_store: EventStore | None = None,
    authenticate: Authenticate | None = None,
    handler_nursery: trio.Nursery | None = None,
    task_status: trio.TaskStatus[HttpServeHandle] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve MCP over Streamable HTTP (both eras) at ``http://host:port/path``.

    Args:
        handlers: the request and notification handlers (handlers receive an
            :class:`~mcp_trio.HttpRequestContext`, which duck-types ``RequestContext``).
        connection_config: the server core's configuration: who we are, capabilities,
            and which eras are served (``era="auto"``: both).
        host: the interface to bind (default: loopback only; ``None``: all).
        port: the port (0: the kernel picks one; read it from the handle).
        path: the endpoint path (default: ``http_config.endpoint``, ``/mcp``).
        http_config: the HTTP rules (origins, hosts, body bound, sessions, ...).
        config: handler slots, write timeout, ``shutdown_grace_period``, ``close_timeout``
            (never ``ping_interval``: ``serve_http`` sends no keep-alive pings).
        transport: socket timeouts and bounds (slowloris, keep-alive, SSE comments).
        ssl_context: serve ``https://`` with this context.
        session_id_factory: makes legacy session ids (default: 192 random bits).
        event_store: where legacy SSE events are kept for resumption.
        authenticate: ``async (request_head) -> Principal | HttpResponse``, called for
            every request to the endpoint before any MCP processing: who is calling, or
            the refusal to answer (see :class:`~mcp_trio.BearerAuth` for OAuth bearer
            tokens). Handlers see the principal as ``ctx.principal``; a legacy session
            serves only the principal (``subject``) that created it; a modern
            ``requestState`` is accepted only from the principal it was sealed for; a
            request whose principal lacks a scope it needs
            (``handlers.required_scopes`` and ``http_config.required_scopes``, both:
            a request needs the scopes of each) is refused ``403 insufficient_scope``
            (a failing one is logged and answered ``500``), the challenge naming
            the authenticator's own ``required_scopes`` too
            (:attr:`~mcp_trio.BearerAuth.required_scopes`, which the request also
            needs). Bounded by
            ``transport.authenticate_timeout`` (then ``503``); an exception is logged
            and answered ``500``. Serve the Protected Resource Metadata the
            challenges point to with ``http_config.resource_metadata``.
        handler_nursery: where connection and handler tasks run (default: internal).
        task_status: ``await nursery.start(serve_http, ...)`` returns an
            :class:`HttpServeHandle` (port, broadcasts, graceful ``aclose``).

    Returns:
        After :meth:`HttpServeHandle.aclose` (or never, until cancelled).

    Resource handling:
        Cancelling ``serve_http`` closes everything at once; ``aclose()`` shuts down
        gracefully within ``shutdown_grace_period + close_timeout``.

    Error handling:
        Whatever a client does costs only its own connection (logged at debug level,
        or with a traceback if it is a bug here).
    """
    config = config if config is not None else SessionConfig()
    if config.ping_interval is not None:
        logger.debug("serve_http: SessionConfig.ping_interval is ignored (no keep-alive pings)")
    http_config = http_config if http_config is not None else HttpServerConfig()
    if path is not None:
        http_config = attrs.evolve(http_config, endpoint=path)
    hooks = tuple(
        hook
        for hook in (
            http_config.required_scopes,
            None if handlers is None else handlers.required_scopes,
        )
        if hook is not None
    )
    if hooks:
        # The scopes the handlers' requests need (what a Server's tools declare) and
        # the config's, together, checked on the body before any is served
        # (authorization#runtime-insufficient-scope-errors: a 403 challenge).
        http_config = attrs.evolve(
            http_config, required_scopes=_scopes_of(hooks, declared_scopes(authenticate))
        )
    if isinstance(authenticate, BearerAuth) and http_config.resource_metadata is not None:
        # RFC 9728 section 2: the document says whether DPoP is taken, and which algs.
        advertised = authenticate.advertise(http_config.resource_metadata)
        http_config = attrs.evolve(http_config, resource_metadata=advertised)
    if http_config.resource_metadata is not None:
        note_advertised_scopes(http_config.resource_metadata)  # (offline_access)
    if authenticate is not None and http_config.resource_metadata is None:
        # 2026-07-28/basic/authorization#overview: servers MUST serve it; without it a
        # client that is refused cannot find where to get a token.
        logger.warning(
            "serve_http: authenticate is set but http_config.resource_metadata is not: "
            "clients cannot discover the authorization server"
        )
    if authenticate is None and not is_loopback_host(host):
        # The Host check is no access control: the client writes the header, so anyone
        # who reaches the port sends "Host: localhost" (transports.mdx, "Security
        # Warning": servers SHOULD implement proper authentication for all connections).
        logger.warning(
            "serve_http: listening on %s with no authentication: anyone who can connect to "
            "this port can use every tool, resource and prompt. The Host check only stops "
            "browsers (DNS rebinding); it is not access control. Pass authenticate= (a "
            "BearerAuth, say), or bind 127.0.0.1",
            "every interface" if host in _WILDCARD_HOSTS else repr(host),
        )
    if host in _WILDCARD_HOSTS and http_config.allowed_hosts == _DEFAULT_ALLOWED_HOSTS:
        logger.info(
            "serve_http: listening on every interface, but only loopback Host names "
            "(%s) are accepted, so a client that names this machine otherwise gets 421 "
            "(DNS-rebinding protection, not access control); list its names in "
            "HttpServerConfig.allowed_hosts (mcp-trio run --allow-host NAME)",
            ", ".join(name.removesuffix(":*") for name in _DEFAULT_ALLOWED_HOSTS or ()),
        )
    http = HttpServer(
        http_config,
        connection_config=with_wall_clock(connection_config),
        session_id_factory=session_id_factory,
        event_store=event_store,
    )
    endpoint = Endpoint(
        http,
        handlers if handlers is not None else Handlers(),
        config,
        transport if transport is not None else HttpTransportConfig(),
        authenticate,
    )
    listeners = await trio.open_tcp_listeners(port, host=host)
    try:
        server = _Server(endpoint, listeners, ssl_context)
        try:
            async with trio.open_nursery() as nursery:
                endpoint.nursery = handler_nursery if handler_nursery is not None else nursery
                server.conn_nursery = endpoint.nursery
                nursery.start_soon(endpoint.timer_loop, name="mcp http timer")
                await nursery.start(server.accept_all)
                task_status.started(HttpServeHandle(server))
                await server.shutdown_requested.wait()
                await server.shutdown()
                nursery.cancel_scope.cancel()
        finally:
            server.cancel_everything()
            server.finished.set()
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)

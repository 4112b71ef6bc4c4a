"""Client HTTP/1.1 connections to one origin: a small keep-alive pool over h11.

One request at a time per connection (no pipelining), so concurrent requests use
concurrent connections, at most ``max_client_connections``; finished connections the
server keeps alive are reused (at most ``max_idle_connections`` are kept), unless the
server closed them meanwhile (the socket reads as ready). A request is never retried:
a POST the server may have acted on must not be sent twice.

A request h11 refuses to frame (an illegal target or header value: our own bug, or a
value taken from the server) raises :class:`UnsendableRequest`, a :class:`WireError`,
before any byte of it goes out: it fails that request, never the whole client.
"""

from __future__ import annotations

import ssl
from collections import deque
from collections.abc import Callable, Mapping
from typing import final
from urllib.parse import urlsplit

import h11
import trio

from mcp_sansio.http import HttpRequest

from ._http_config import HttpTransportConfig
from ._http_h11 import Unframeable, client_headers, request_events, unsendable
from ._http_wire import H11Stream, WireError

__all__ = ["ConnectFailed", "Pool", "ReadFailed", "UnsendableRequest", "WriteFailed"]


class UnsendableRequest(WireError):
    """h11 refused to frame one of our requests (``h11.LocalProtocolError``): nothing of
    it went out, and the connection is not to blame (no other request is affected)."""


class ConnectFailed(WireError):
    """No connection could be opened (refused, unreachable, timed out, TLS refused):
    the server cannot be reached at all, and nothing was sent."""


class WriteFailed(WireError):
    """A connection was there, but writing the request on it failed: the server closed
    it meanwhile, say because the body is more than it takes (it answers ``413`` and
    closes). The server is reachable: only this request is affected."""


class ReadFailed(WireError):
    """The request was written whole, but the connection failed (closed, reset, broke
    HTTP/1.1) before the head of its answer came: the server may have acted on it, and
    its answer is lost."""


@final
class Pool:
    """Connections to the origin of ``url``.

    Args:
        url: any URL of the origin (``http://`` or ``https://``).
        transport: connection bounds and timeouts.
        ssl_context: for ``https://`` (default: the system's trust store).
        headers: extra headers for every request (e.g. ``Authorization``; a
            ``User-Agent`` replaces ours).
        write_timeout: seconds one request may take to be written.
        authorization: called as each request is framed: the ``Authorization`` value
            to send (an OAuth bearer token), or ``None`` for none. What was sent is
            :attr:`H11Stream.authorization` of the connection that sent it.
        proof: called with the method and that value when there is one: the ``DPoP``
            header to send with it (a DPoP proof), or ``None`` for none.

    Raises:
        ValueError: a malformed extra header, or one the transport writes itself
            (``Host``, ``Content-Type``, ``Mcp-Session-Id``, ...).
    """

    def __init__(
        self,
        url: str,
        transport: HttpTransportConfig,
        *,
        ssl_context: ssl.SSLContext | None = None,
        headers: Mapping[str, str] | None = None,
        write_timeout: float | None = None,
        authorization: Callable[[], bytes | None] | None = None,
        proof: Callable[[str, bytes], bytes | None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.secure = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.secure else 80)
        self.transport = transport
        self.limiter = trio.CapacityLimiter(transport.max_client_connections)
        """Held by each request in progress (not by the GET stream or one-way POSTs)."""
        self._ssl = ssl_context
        # With OAuth the token is ours to send: a user's own Authorization would clash.
        reserved = ("authorization", "dpop") if proof else ("authorization",)
        self._extra = client_headers(headers, reserved=reserved if authorization else ())
        self._write_timeout = write_timeout
        self._authorization = authorization
        self._proof = proof
        self._idle: deque[H11Stream] = deque()
        self._closed = False

    async def connect(self) -> H11Stream:
        """A new connection.

        Raises:
            ConnectFailed: it could not be opened within ``connect_timeout``.
        """
        stream: trio.abc.Stream | None = None
        try:
            with trio.fail_after(self.transport.connect_timeout):
                stream = await trio.open_tcp_stream(self.host, self.port)
                if self.secure:
                    context = self._ssl if self._ssl is not None else ssl.create_default_context()
                    stream = trio.SSLStream(
                        stream, context, server_hostname=self.host, https_compatible=True
                    )
                    await stream.do_handshake()
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            # trio reports a failed TLS handshake as a bare BrokenResourceError caused by
            # the ssl error (a refused certificate, say): name that cause.
            reason = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) else None
            raise ConnectFailed(
                f"could not connect to {self.host}:{self.port}: {reason or exc!r}"
            ) from exc
        return H11Stream(stream, h11.CLIENT, self.transport.max_header_size)

    def _events(self, request: HttpRequest) -> tuple[list[h11.Event], bytes | None]:
        """The h11 events of ``request``, and the ``Authorization`` value they carry.

        Raises:
            UnsendableRequest: h11 refused the request line or a header.
        """
        authorization = self._authorization() if self._authorization is not None else None
        extra = self._extra
        if authorization is not None:
            extra = [*extra, (b"authorization", authorization)]
            if self._proof is not None:
                proof = self._proof(request.method, authorization)
                if proof is not None:
                    extra.append((b"dpop", proof))
        try:
            return request_events(request, extra), authorization
        except Unframeable as exc:
            raise UnsendableRequest(str(exc)) from exc

    async def roundtrip(
        self, request: HttpRequest, on_written: Callable[[], None], *, read_at_once: bool = False
    ) -> tuple[H11Stream, h11.Response]:
        """Send ``request`` and read the response head; call ``on_written`` once the
        request is out. A kept-alive connection is reused unless the server has closed
        it meanwhile; a request is never sent twice. ``read_at_once``: the first read
        of the answer takes what the socket has without a scheduler round trip
        (``H11Stream.read_at_once``; for a task that writes a request and then reads
        nothing but its answer, as one started afresh for it would).

        Returns:
            The connection (read the body from it, then :meth:`release` it) and the head.

        Raises:
            WireError: no connection, or no answer.
        """
        wire = await self.send(request, self._write_timeout)
        on_written()
        if read_at_once:
            wire.read_at_once = wire.writes_directly
        return wire, await self.read_head(wire)

    async def send(self, request: HttpRequest, timeout: float | None) -> H11Stream:
        """Send ``request`` on a kept-alive connection (unless the server has closed it
        meanwhile) or a new one, within ``timeout`` seconds (``None``: the caller bounds
        it). A request is never sent twice.

        Returns:
            The connection: read the answer with :meth:`read_head`.

        Raises:
            UnsendableRequest: h11 refused to frame it (no connection was used).
            WriteFailed: the write failed (a :class:`WireError`).
            ConnectFailed: no connection (a :class:`WireError`).
        """
        events, authorization = self._events(request)
        wire = None
        while self._idle and wire is None:
            wire = self._idle.popleft()
            if wire.is_stale():
                await wire.aclose()
                wire = None
        if wire is None:
            wire = await self.connect()
        wire.authorization = authorization
        try:
            await wire.send(events, timeout)
        except h11.LocalProtocolError as exc:
            await wire.aclose()  # h11 is in its ERROR state: the connection is done
            raise UnsendableRequest(unsendable(request, exc)) from exc
        except WireError as exc:
            await wire.aclose()
            raise WriteFailed(
                f"{exc} (while writing the request: the server may take no body this large)"
            ) from exc
        except BaseException:
            await wire.aclose()
            raise
        return wire

    def has_direct_idle(self) -> bool:
        """Whether :meth:`send_nowait` may find an idle connection it can write to."""
        return bool(self._idle) and self._idle[0].writes_directly

    def send_nowait(self, request: HttpRequest) -> tuple[H11Stream, bytes | memoryview] | None:
        """Start ``request`` on a kept-alive connection without waiting, if one is idle
        and its socket takes the first bytes at once (see ``H11Stream.write_nowait``).

        Returns:
            The connection and what is left to write (empty, unless the kernel took only
            part), or ``None`` when nothing was sent (no idle connection, or the socket
            would block or failed, or h11 refused the request): then :meth:`send` it.
            Read the answer in a task that has just started: its first read takes the
            bytes already there without yielding (``H11Stream.read_at_once``).
        """
        if not self._idle:
            return None
        wire = self._idle[0]
        if not wire.writes_directly or wire.is_stale():
            return None  # send() closes a stale one, and writes through TLS
        try:
            events, authorization = self._events(request)
        except UnsendableRequest:
            return None  # send() raises it
        self._idle.popleft()
        wire.authorization = authorization
        try:
            data = wire.frame(events)
        except h11.LocalProtocolError:
            wire.close_nowait()  # h11 is in its ERROR state; send() raises the error
            return None
        try:
            rest = wire.write_nowait(data)
        except WireError:
            wire.close_nowait()  # nothing of the request went out: send() starts afresh
            return None
        if len(rest) == len(data):
            # Not a byte out, but h11 has recorded the request: this connection cannot
            # carry it again, so it is given up and send() uses another.
            wire.close_nowait()
            return None
        # The caller reads the answer in a task of its own, which starts afresh: its
        # first read need not yield again when the head is already in (saves a
        # scheduler pass per request on a fast server).
        wire.read_at_once = True
        return wire, rest

    async def write_rest(self, wire: H11Stream, rest: bytes | memoryview) -> None:
        """Finish a request :meth:`send_nowait` started, within ``write_timeout``
        (closed on failure).

        Raises:
            WriteFailed: the write failed or timed out (a :class:`WireError`).
        """
        try:
            await wire.write(rest, self._write_timeout)
        except WireError as exc:
            await wire.aclose()
            raise WriteFailed(f"{exc} (while writing the rest of the request)") from exc
        except BaseException:
            await wire.aclose()
            raise

    async def read_head(self, wire: H11Stream) -> h11.Response:
        """The response head of the request just sent on ``wire`` (closed on failure).

        Raises:
            ReadFailed: the server closed the connection, or it was reset, before the
                head (a :class:`WireError`).
            WireError: the server broke HTTP/1.1 (a malformed head).
        """
        try:
            while True:
                event = await wire.next_event()
                if isinstance(event, h11.Response):
                    return event
                if not isinstance(event, h11.InformationalResponse):
                    raise ReadFailed("the server closed the connection without answering")
        except h11.RemoteProtocolError as exc:
            await wire.aclose()
            if wire.ended:  # (h11 calls an end mid-head a protocol error)
                raise ReadFailed("the server closed the connection before it answered") from exc
            # (A malformed head on a live connection is the server's answer, broken:
            # not a lost one. The request fails; it is not re-issued.)
            raise WireError(f"the server broke HTTP/1.1: {exc}") from exc
        except ReadFailed:
            await wire.aclose()
            raise
        except WireError as exc:  # (reading failed: a reset, say)
            await wire.aclose()
            raise ReadFailed(str(exc)) from exc
        except BaseException:
            await wire.aclose()
            raise

    async def release(self, wire: H11Stream) -> None:
        """A finished exchange: keep the connection for reuse, or close it (always,
        once the pool is closed: a reader that finishes its exchange after the session
        closed the pool must not leave the connection open)."""
        if (
            not self._closed
            and len(self._idle) < self.transport.max_idle_connections
            and wire.next_cycle()
        ):
            self._idle.append(wire)
        else:
            await wire.aclose()

    async def aclose(self) -> None:
        """Close the idle connections, and every one released from now on."""
        self._closed = True
        while self._idle:
            await self._idle.popleft().aclose()

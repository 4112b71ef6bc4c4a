"""Streamable HTTP for :class:`~mcp_trio.BlockingClient`: sockets, TLS and h11, and the
link the client's loop drives them through (:class:`HttpLink`).

Loaded on first use by ``BlockingClient.http`` (so ``.stdio()`` users load neither h11
nor ``ssl``). Every protocol rule (request headers, session id and version, the era
probe, SSE parsing, resumption, session expiry, the bounds on bodies and events) is
:class:`mcp_sansio.http.HttpClient`'s; this module only moves bytes, as
``mcp_trio._http_client`` does for Trio.

Theory of operation
-------------------
Each message the core wants sent becomes an *exchange*: one HTTP request and its
answer, on a socket of its own (a kept-alive one when one is idle). The client's
selector loop waits on the sockets :meth:`HttpTransport.wanted` names, until
:meth:`HttpTransport.next_deadline` at the latest, and calls :meth:`HttpTransport.ready`
for each ready one (or :meth:`HttpTransport.handle_timer`), which moves its bytes; what
the answers carry lands in :attr:`HttpTransport.inbox`, in order: JSON-RPC messages for
the core, and the signals the sans-IO rules call for (:class:`Restart`: start a new
session; :class:`Resend`: send requests again), which :class:`HttpLink` hands to the
client in order. Nothing happens between those calls, so nothing happens between calls
of the client.

* Order: a POST with requests starts once a ``notifications/initialized`` before it
  has its answer's head (so it is taken before the first request); other one-way
  POSTs hold up no request (a server slow to take one, or to answer it, would hold
  up them all). One-way POSTs (notifications, answers to the server's requests) go
  one at a time, in the order written: each once the one before has its answer's
  head (the server took it) or is given up, as the Trio client's queue sends them,
  so they never overtake each other (a progress notification before the answer it
  precedes). A one-way POST refused ``503`` with ``Retry-After`` (nothing of it
  ran) is sent again once, after that delay (at most ``RETRY_AFTER_CAP`` seconds; the
  one-way POSTs after it wait meanwhile, to keep the order; no call waits for it to
  go, the next one sends it; the close drops it, and retries nothing refused
  meanwhile), as the Trio client's; any other refusal loses it, with a warning. One
  whose connection broke after it was written, before its answer's head, is sent once
  more at once, in its place (the server may never have had it), as the Trio client's
  (not once the ``DELETE`` is due); broken again, it is lost with a warning. A
  ``notifications/initialized`` so refused holds back the requests until its retry's
  head (or until the retry is given up), as the Trio client's.
  The legacy GET stream starts then too (a server may refuse it before it has taken
  ``notifications/initialized``), and a session's first one holds back the requests
  after it until its head came (or ``connect_timeout`` passed), as the Trio client's:
  what the server says on its own right away is not missed, and it sees the GET
  before any request. It is opened again (resumed, given up) by the Trio client's rules,
  the sans-IO core's ``GetStream``.
* Connections: at most ``max_client_connections`` exchanges with requests at once,
  and one-way POSTs on connections of their own (so an answer never waits for the
  stream that asked for it to end); further ones wait, in order. The legacy GET
  stream and the closing ``DELETE`` come on top. While
  ``max_client_connections`` one-way POSTs wait to start or for their answer's head
  (once it came, the server has taken the message), the answers that produce more
  (SSE streams, JSON bodies) are not read: a server flooding us with requests gets
  backpressure (what one read brought waits), not sockets.
* TLS: ``ssl.MemoryBIO`` and ``SSLObject``: the handshake and records are bytes in,
  bytes out on the same non-blocking socket (verified with the system's trust store by
  default).
* Timeouts: connecting (and the TLS handshake) within ``connect_timeout``, shared by a
  name's addresses, each tried for its share
  (:func:`~mcp_trio._blocking_dial.attempt_deadline`); writing, once connected, within
  ``write_timeout`` of the last progress; a one-way POST's whole answer (head and body)
  within ``write_timeout`` of its writing too (nothing else bounds it). A request's
  answer is bounded by the core's own request timeout. Closing waits for no one-way
  answer whose head came (the server took the message). The closing ``DELETE`` goes
  once the one-way POSTs before it (a cancellation the close wrote) are taken or given
  up, for half of ``close_timeout`` at most, as the Trio client's close: a cancellation
  that reached the server after it would find the session gone.
* Cancellation: modern, closing the request's connection (never a
  ``notifications/cancelled`` POST); legacy, the notification is POSTed and the
  request's stream is no longer read for it (nor resumed).
* Names: resolved with the system's blocking resolver (an address literal is not
  looked up) for the first connection; later ones use those addresses, the one that
  answered first, within the first half of ``connect_timeout``. When none of them is
  connected to by then (refused, or silent: the server may have moved), the name is
  resolved again and that exchange tried once more within what is left; only if that
  fails too is the server unreachable.
* Redirects are not followed: the request fails, naming the ``Location``.
* ``401``: the request fails with an error naming the server's ``WWW-Authenticate``
  challenge (OAuth flows are the Trio client's; here only a static bearer token).
* An exchange that cannot connect (after resolving again, as above) ends a legacy session
  (:class:`SessionClosed`): the server is unreachable; a modern request fails alone
  (-32603), and the next one tries again. One that breaks later fails its
  own requests only (-32603 ``HTTP: ...``), as the core's synthesised errors do. Each
  such error is marked as the transport's (``transport_errors``): the call raises
  :class:`~mcp_trio.TransportFailed` (an ``McpError``), as the Trio client's.
* Re-issue (modern; ``2026-07-28`` changelog item 9: "clients MUST re-issue it as a new
  request with a new request ID"), as the Trio client's (``mcp_trio._http_client``): a
  request whose answer was lost after it was written whole -- a stream that ended without
  the answer, a body cut short (``ClientResponse.broken``), the connection closed or
  reset before the head -- is handed to the client in order (:class:`Broken`), which has
  the core send it again (``Connection.reissue_request``: new id, same params, its
  deadline as it stands, at most ``ConnectionConfig.max_reissues`` times) if a call
  waits for it; else it fails here, -32603 ``HTTP: ...``, saying how many times it was
  re-issued. Never a ``subscriptions/listen`` (``NEVER_REISSUED``), an error status, a
  malformed head on a live connection (the server's answer, broken), a request not
  written whole, one cancelled or timed out, nor a legacy one (resumed instead).
* Resumption (legacy), the sans-IO rule the Trio client follows too
  (``mcp_trio._http_client``, "Resumption"): a call's stream is resumed for as long as
  the server answers each resumption with a stream, less and less often while nothing
  comes, within the call's timeout; ``max_resume_attempts`` failed attempts in a row
  (no connection, no answer, a ``5xx``, ``408`` or ``429``) fail the call, and the
  server is told (``notifications/cancelled``), as when a resumption is refused, a
  stream ends with no event id, or the connection of a POST written whole ends before
  the answer's head.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Final, Literal, final
from urllib.parse import urlsplit

import h11

from mcp_sansio import Era, Event, LocalProtocolError, RequestId
from mcp_sansio._http_client import Read
from mcp_sansio.http import (
    FORGOTTEN_BEFORE_ANSWER,
    FORGOTTEN_TWICE,
    ClientRequest,
    ClientResponse,
    GetDecision,
    GetStream,
    HttpClient,
    HttpClientConfig,
    ReplyNotCarried,
    SessionEnded,
    SessionPending,
    abandoned_request,
    http_error,
    reissue_refused,
    split_broken,
    transport_errors,
)

from ._blocking_dial import Address, attempt_deadline, resolve
from ._errors_base import SessionClosed
from ._http_config import HttpTransportConfig
from ._http_h11 import (
    Unframeable,
    client_headers,
    log_one_way_answer,
    log_warnings,
    request_events,
    unsendable,
)

if TYPE_CHECKING:
    from ._blocking import CallClock as Clock
    from ._blocking import Hooks

__all__ = ["Broken", "HttpLink", "HttpTransport", "Resend", "Restart"]

logger = logging.getLogger("mcp_trio")

_READ_SIZE: Final = 65_536
_MESSAGE: Final = (bytes, tuple)
"""What a message in the inbox is: ``bytes``, or a ``Read`` (the bytes and the dict they
parse to, handed to the core as ``decoded``: each message is parsed once)."""


@final
class Restart:
    """The server forgot the session (``404``): start a new one now
    (``Connection.restart_session``)."""


@final
class Resend:
    """Send these requests again (``Connection.resend_request``): the server never
    processed them."""

    def __init__(self, request_ids: tuple[RequestId, ...]) -> None:
        self.request_ids: Final = request_ids


@final
class Broken:
    """The answer to our modern request ``request_id`` was lost after the request was
    written (``why``): have the core re-issue it (``Hooks.reissue``), or fail it."""

    def __init__(self, request_id: RequestId, why: str) -> None:
        self.request_id: Final = request_id
        self.why: Final = why


class _WireError(Exception):
    """The connection is unusable (the peer vanished, broke HTTP, was too slow)."""


class _Lost(_WireError):
    """The connection ended (closed, reset, a TLS failure) before the answer's head: the
    pool's ``ReadFailed`` of the Trio client (a request written whole is re-issued)."""


class _ConnectFailed(_WireError):
    """No connection could be opened: the server cannot be reached."""


@final
class _Wire:
    """One HTTP/1.1 connection: a non-blocking socket, TLS in memory, h11.

    Connecting tries ``addresses`` one after another, all before ``deadline``, each for
    its share of the time (:func:`~mcp_trio._blocking_dial.attempt_deadline`)."""

    def __init__(
        self,
        host: str,
        addresses: list[Address],
        now: float,
        deadline: float,
        context: ssl.SSLContext | None,
        max_header_size: int,
    ) -> None:
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=max_header_size)
        self.out = bytearray()  # raw bytes for the socket
        self._plain = bytearray()  # plaintext written before the TLS handshake ended
        self.connected = False
        self.ended = False  # the peer's end of input was read
        self._tls: ssl.SSLObject | None = None
        self._incoming = ssl.MemoryBIO() if context is not None else None
        self._outgoing = ssl.MemoryBIO() if context is not None else None
        self._addresses = list(addresses)
        self._deadline = deadline
        self.address: Address = self._addresses[0]  # (the one in use)
        self.attempt_deadline = deadline  # (the next address is tried then)
        self.sock = self._connect(now)
        if context is not None:
            assert self._incoming is not None and self._outgoing is not None
            self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=host)
        self.handshaken = context is None

    def _connect(self, now: float) -> socket.socket:
        """Start connecting to the next address (the ones refused at once skipped, and
        those whose socket cannot be made: a family the system lacks, IPv6 off)."""
        while True:
            self.address = family, address = self._addresses.pop(0)
            self.attempt_deadline = attempt_deadline(now, self._deadline, len(self._addresses) + 1)
            sock: socket.socket | None = None
            try:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                code = sock.connect_ex(address)
            except OSError as exc:
                code = exc.errno or errno.EINVAL
            if sock is not None and code in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                break
            if sock is not None:
                sock.close()
            if not self._addresses:
                raise _ConnectFailed(f"could not connect: {errno.errorcode.get(code, code)}")
        with suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def next_address(self, now: float) -> bool:
        """Give up on the address being connected to, for the next one (``False``: it
        was the last; nothing changed)."""
        if self.connected or not self._addresses:
            return False
        self.sock.close()
        self.sock = self._connect(now)
        return True

    def fileno(self) -> int:
        return self.sock.fileno()

    def wants_write(self) -> bool:
        return not self.connected or bool(self.out)

    def queue(self, data: bytes) -> None:
        """Plaintext to send (through TLS once its handshake ended)."""
        if self._tls is None:
            self.out += data
        elif not self.handshaken:
            self._plain += data
        else:
            self._tls.write(data)
            self._pump()

    def _pump(self) -> None:
        assert self._outgoing is not None
        self.out += self._outgoing.read()

    def _handshake(self) -> None:
        assert self._tls is not None
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as exc:
            self._pump()
            raise _ConnectFailed(f"TLS handshake failed: {exc}") from exc
        else:
            self.handshaken = True
            plain, self._plain = bytes(self._plain), bytearray()
            if plain:
                self._tls.write(plain)
        self._pump()

    def on_writable(self, now: float) -> None:
        """Finish connecting (or try the next address), or write what the socket takes.

        Raises:
            _ConnectFailed: the connection was refused.
            _WireError: the write failed.
        """
        if not self.connected:
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                if self.next_address(now):
                    return
                self.sock.close()
                raise _ConnectFailed(f"could not connect: {errno.errorcode.get(code, code)}")
            self.connected = True
            if self._tls is not None:
                self._handshake()
        if self.out:
            try:
                sent = self.sock.send(self.out)
            except BlockingIOError:
                return
            except OSError as exc:
                raise _WireError(f"writing failed: {exc!r}") from exc
            del self.out[:sent]

    def on_readable(self) -> None:
        """Read once and hand the plaintext to h11.

        Raises:
            _WireError: reading failed (TLS included).
        """
        try:
            data = self.sock.recv(_READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return
        except OSError as exc:
            if not self.connected:
                raise _ConnectFailed(f"could not connect: {exc!r}") from exc
            data = b""  # (a reset: the end of input, h11 judges what it cut short)
        if self._tls is None:
            self._receive(data)
            return
        assert self._incoming is not None
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
        if not self.handshaken:
            if not data:
                raise _ConnectFailed("the server closed the connection during the TLS handshake")
            self._handshake()
            if not self.handshaken:
                return
        plain = bytearray()
        ended = False
        while True:
            try:
                chunk = self._tls.read(_READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                ended = True
                break
            except ssl.SSLError as exc:
                raise _Lost(f"TLS: {exc}") from exc
            if not chunk:
                ended = True
                break
            plain += chunk
        self._pump()  # (TLS 1.3 may answer on its own: session tickets, key updates)
        if plain:
            self._receive(bytes(plain))
        if ended or not data:
            self._receive(b"")

    def _receive(self, data: bytes) -> None:
        if not data:
            self.ended = True
        if self.h11.their_state is not h11.CLOSED:
            self.h11.receive_data(data)

    def is_stale(self) -> bool:
        """Whether an idle connection has something to read (the server closed it)."""
        if self.h11.trailing_data[0]:
            return True
        try:
            self.sock.recv(1, socket.MSG_PEEK)  # (data, or b"": closed)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return True

    def close(self) -> None:
        self.sock.close()


_State = Literal["queued", "waiting", "active", "done"]


@final
class _Exchange:
    """One HTTP request and its answer."""

    def __init__(
        self, sent: ClientRequest, *, start_at: float = 0.0, discard: bool = False
    ) -> None:
        self.sent = sent
        self.discard = discard
        """Its answer's body is not read (the ``DELETE`` that ends a session, as the Trio
        client's ``_discard``): nothing in it is used, and an empty ``200`` JSON body (the
        Python SDK's answer) is no JSON to warn of."""
        self.ids: set[RequestId] = set(sent.request_ids)
        """Its requests not cancelled yet."""
        self.wire: _Wire | None = None
        self.reader: ClientResponse | None = None
        self.state: _State = "queued"
        self.start_at = start_at
        """Not before (a resumption waits for the server's ``retry``)."""
        self.connect_deadline: float | None = None
        self.fresh = False
        """Its connection's addresses were resolved for it (not an earlier one's)."""
        self.events: list[h11.Event] = []
        """The request as h11 frames it (see ``_open``)."""
        self.write_since: float | None = None
        self.answer_deadline: float | None = None
        self.written = False

    @property
    def gates(self) -> bool:
        """``notifications/initialized``: the requests after it wait for its head."""
        return self.sent.initialized

    @property
    def retry_waits(self) -> bool:
        """A one-way message refused ``503`` that waits for its ``Retry-After`` before it
        is sent again (see :meth:`HttpTransport._one_way_refused`)."""
        return self.sent.sent_again == "retried" and self.state == "waiting"

    @property
    def counted(self) -> bool:
        """Whether it holds one of the ``max_client_connections``."""
        return bool(self.sent.request_ids)

    @property
    def one_way(self) -> bool:
        return self.sent.one_way


@final
class HttpTransport:
    """The HTTP exchanges of one :class:`~mcp_trio.BlockingClient` (see the module docs).

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL, or an extra header is
            malformed or one the transport writes itself.
    """

    def __init__(
        self,
        url: str,
        *,
        http_config: HttpClientConfig | None,
        transport: HttpTransportConfig | None,
        ssl_context: ssl.SSLContext | None,
        headers: Mapping[str, str] | None,
        write_timeout: float | None,
    ) -> None:
        self.http = HttpClient(url, http_config)
        self.config: Final = transport if transport is not None else HttpTransportConfig()
        split = urlsplit(url)
        self._secure = split.scheme.lower() == "https"
        self._host = split.hostname or ""
        self._port = split.port or (443 if self._secure else 80)
        self._context = (
            (ssl_context if ssl_context is not None else ssl.create_default_context())
            if self._secure
            else None
        )
        self._extra = client_headers(headers)
        self._addresses: list[Address] | None = None  # resolved once, the one that
        # answered first; again when connecting to them fails (see _unreachable)
        self._write_timeout = write_timeout
        self._exchanges: list[_Exchange] = []
        self._idle: deque[_Wire] = deque()
        self._get: _Exchange | None = None  # the GET stream's attempt under way, if any
        self._get_rules: GetStream | None = None  # the session's (the core's rules)
        self._get_decided: GetDecision | None = None  # on an answer's head, if no stream
        self._gate: _Exchange | None = None  # a session's first GET: requests wait for it
        self._gate_until: float | None = None  # ... for its head until then (connect_timeout)
        self._gated: str | None = None  # the session whose first GET that was
        self.inbox: deque[bytes | Read | Restart | Resend | Broken] = deque()
        """What the answers brought, for the client to take in order: messages (as a
        ``Read`` when the response reader parsed them), and signals."""
        self.failure: SessionClosed | None = None
        """Set when the session cannot go on (the server is unreachable, or forgot the
        session again)."""
        self._answered = False  # the server answered once (see _unreachable)
        self._closing = False  # terminate() ran: a refused one-way message is not retried
        self._delete: _Exchange | None = None  # the DELETE that ends the session, once due
        self._delete_until: float | None = None  # ... it waits for the one-way POSTs until

    def message_bound(self) -> tuple[int, str]:
        """As ``MessageChannel.message_bound``: an answer comes as one SSE event or one
        JSON body (:attr:`HttpClientConfig.max_message_size
        <mcp_trio.HttpClientConfig>`)."""
        config = self.http.config
        return config.max_message_size, config.MAX_MESSAGE_SIZE_SETTINGS

    # ------------------------------------------------------------------ sending

    def send(self, message: bytes, now: float) -> None:
        """Send one message of the core's (a POST, or for a modern cancellation the
        request's connection closed)."""
        http = self.http
        cancelled = http.cancelled_request(message)
        if cancelled is not None:
            for exchange in self._exchanges:
                if cancelled in exchange.ids:
                    self._stop_waiting(exchange, cancelled)
            if http.era is Era.MODERN:
                return
        try:
            sent = http.post(message)
        except ReplyNotCarried:
            logger.debug("HTTP: a reply to the server was dropped: %.200r", message)
            return
        except SessionPending as exc:
            # (Between a 404's head and the client taking in the Restart after it. The
            # blocking client sends no notification of its own that the new session
            # would want, so only requests are kept: for the new session.)
            if exc.request_ids:
                self.inbox.append(Resend(exc.request_ids))
            else:
                logger.debug("HTTP: dropped with the session it was for: %.200r", message)
            return
        except SessionEnded:
            logger.debug("HTTP: dropped, the session is over: %.200r", message)
            return
        self._start(_Exchange(sent), now)

    def _start(self, exchange: _Exchange, now: float, *, after: _Exchange | None = None) -> None:
        """Start ``exchange`` (or have it wait for its ``start_at``): last in order, or
        right ``after`` the one it is sent again for."""
        if after is None:
            self._exchanges.append(exchange)
        else:
            self._exchanges.insert(self._exchanges.index(after) + 1, exchange)
        exchange.state = "waiting" if exchange.start_at > now else "queued"
        self._admit(now)

    def _admit(self, now: float) -> None:
        """Start the queued exchanges that may start now, in order: at most
        ``max_client_connections`` with requests, and one-way POSTs one at a time."""
        limit = self.config.max_client_connections
        busy = sum(1 for e in self._exchanges if e.counted and e.state == "active")
        flying = sum(1 for e in self._exchanges if e.one_way and e.state == "active")
        unheard = False  # an earlier notifications/initialized has no answer yet
        gated = False  # an earlier first GET of the session has no answer yet
        ahead = False  # an earlier one-way POST is not taken yet (no answer's head)
        for exchange in list(self._exchanges):
            if exchange.state == "waiting" and exchange.start_at <= now:
                exchange.state = "queued"
            if exchange is self._gate:
                gated = self._gating(now)
            if exchange.state != "queued":
                unheard = unheard or (exchange.gates and exchange.reader is None)
                ahead = ahead or (exchange.one_way and exchange.reader is None)
                continue
            if exchange.counted:
                # A request goes after a notifications/initialized before it is taken
                # (its answer's head), so that it is processed before any later
                # request, as the Trio client's send() awaits its 202 (other one-way
                # messages hold up no request: a server slow to read a large one would
                # hold up them all); and after the session's GET stream is open (or
                # refused, or connect_timeout passed), as the Trio client's, so that
                # what the server says on its own right after is not missed.
                if busy >= limit or unheard or gated:
                    continue
                busy += 1
            elif exchange is self._get:
                # (The GET goes once the server has taken notifications/initialized:
                # a server may refuse it before, which would turn it off.)
                if unheard:
                    continue
            elif exchange is self._delete:
                # The DELETE goes once the one-way POSTs before it are taken (their
                # answer's head), as the Trio client's close awaits its queue's 202s: a
                # notifications/cancelled that reached the server after the DELETE
                # would find the session gone (404; spec basic/transports.mdx, session
                # management) and the request it cancels run on for nobody. For half of
                # close_timeout at most (see terminate), as the Trio client's.
                if ahead and self._delete_until is not None and now < self._delete_until:
                    continue
            elif exchange.one_way:
                # One at a time, in order: each waits for the head of the answer to
                # the one before (the server has taken it), as the Trio client's queue
                # awaits each 202, so that they never overtake each other (a progress
                # notification before the answer it precedes; one sent again after a
                # 503 keeps its place). A server slow to take one holds up the next
                # ones (each bounded by write_timeout), never a request.
                unheard = unheard or exchange.gates
                was, ahead = ahead, True
                if was or flying >= limit:
                    continue
                flying += 1
            self._open(exchange, now)

    def _gating(self, now: float) -> bool:
        """Whether the session's first GET holds back the requests after it."""
        gate, until = self._gate, self._gate_until
        if (
            gate is None
            or gate.state == "done"
            or gate.reader is not None
            or (until is not None and until <= now)
        ):
            self._gate = self._gate_until = None  # (for good: a later GET is not waited for)
            return False
        return True

    def _open(self, exchange: _Exchange, now: float) -> None:
        if exchange is self._gate:
            self._gate_until = now + self.config.connect_timeout
        exchange.state = "active"
        try:  # (framed once, before any connection: one h11 cannot frame makes none)
            exchange.events = request_events(exchange.sent.request, self._extra)
        except Unframeable as exc:
            self._failed(exchange, str(exc))
            return
        wire = None
        while self._idle and wire is None:
            wire = self._idle.popleft()
            if wire.is_stale():
                wire.close()
                wire = None
        if wire is None:
            self._dial(exchange, now, now + self.config.connect_timeout)
        else:
            self._send_head(exchange, wire, now)

    def _dial(self, exchange: _Exchange, now: float, deadline: float) -> None:
        """Connect a new wire for ``exchange`` by ``deadline`` (the name resolved unless
        its addresses are known) and queue the request on it. Known addresses get the
        first half of the time only: the server may have moved and its old address
        drop connection attempts, so the rest is kept for the name resolved again
        (see :meth:`_unreachable`)."""
        exchange.connect_deadline = deadline
        exchange.fresh = self._addresses is None
        try:
            if self._addresses is None:
                try:
                    self._addresses = resolve(self._host, self._port)
                except OSError as exc:
                    raise _ConnectFailed(f"could not resolve {self._host!r}: {exc}") from exc
            wire = _Wire(
                self._host,
                self._addresses,
                now,
                deadline if exchange.fresh else now + (deadline - now) / 2,
                self._context,
                self.config.max_header_size,
            )
        except _ConnectFailed as exc:
            self._unreachable(exchange, exc, now)
            return
        self._send_head(exchange, wire, now)

    def _send_head(self, exchange: _Exchange, wire: _Wire, now: float) -> None:
        request = exchange.sent.request
        exchange.wire = wire
        try:
            wire.queue(b"".join(wire.h11.send(e) or b"" for e in exchange.events))
        except h11.LocalProtocolError as exc:
            self._failed(exchange, unsendable(request, exc))
            return
        exchange.write_since = now

    # ------------------------------------------------------------------ the loop's side

    def wanted(self, reading: bool) -> dict[int, tuple[int, _Exchange]]:
        """File descriptors to wait on: read (unless held back), write while bytes wait."""
        flood = sum(1 for e in self._exchanges if e.one_way and e.reader is None)
        held = not reading or flood >= self.config.max_client_connections
        out: dict[int, tuple[int, _Exchange]] = {}
        for exchange in self._exchanges:
            wire = exchange.wire
            if exchange.state != "active" or wire is None:
                continue
            events = selectors.EVENT_WRITE if wire.wants_write() else 0
            producing = exchange.reader is not None and exchange.reader.kind in ("sse", "json")
            if wire.connected and not (held and producing):
                events |= selectors.EVENT_READ
            if events:
                out[wire.fileno()] = (events, exchange)
        return out

    def next_deadline(self) -> float | None:
        """The earliest time something of ours is due."""
        times: list[float] = []
        gate = self._gate
        if self._gate_until is not None and gate is not None and gate.state == "active":
            times.append(self._gate_until)  # (requests wait for its head until then)
        delete = self._delete
        if self._delete_until is not None and delete is not None and delete.state == "queued":
            times.append(self._delete_until)  # (it waits for the one-way POSTs until then)
        for exchange in self._exchanges:
            if exchange.state == "waiting":
                times.append(exchange.start_at)
            elif exchange.state == "active":
                times += self._deadlines(exchange)
        return min(times, default=None)

    def _deadlines(self, exchange: _Exchange) -> list[float]:
        out: list[float] = []
        wire = exchange.wire
        if wire is None:
            return out
        if exchange.connect_deadline is not None and not (wire.connected and wire.handshaken):
            out.append(exchange.connect_deadline)
            if not wire.connected:
                out.append(wire.attempt_deadline)
        limit = self._write_timeout
        if limit is not None:
            # (writing starts once connected: connecting has connect_timeout)
            if wire.out and wire.connected and exchange.write_since is not None:
                out.append(exchange.write_since + limit)
            if exchange.answer_deadline is not None:
                out.append(exchange.answer_deadline)
        return out

    def handle_timer(self, now: float) -> None:
        """Start what waited for its time; fail what is late."""
        self._admit(now)
        for exchange in list(self._exchanges):
            if exchange.state != "active" or exchange.wire is None:
                continue
            wire = exchange.wire
            if not wire.connected and wire.attempt_deadline <= now:
                try:
                    moved_on = wire.next_address(now)  # (the last: the time that is left)
                except _ConnectFailed as exc:  # (the rest refused at once)
                    self._unreachable(exchange, exc, now)
                    continue
                if not moved_on and not exchange.fresh:  # (known addresses' half: spent)
                    limit = self.config.connect_timeout
                    self._unreachable(
                        exchange, _ConnectFailed(f"connecting timed out ({limit:g} s / 2)"), now
                    )
                    continue
            if (
                exchange.connect_deadline is not None
                and not (wire.connected and wire.handshaken)
                and exchange.connect_deadline <= now
            ):
                what = "connecting" if not wire.connected else "the TLS handshake"
                self._unreachable(
                    exchange,
                    _ConnectFailed(f"{what} timed out after {self.config.connect_timeout:g} s"),
                    now,
                )
            elif any(d <= now for d in self._deadlines(exchange)):
                why = (
                    "the server did not answer in time"
                    if not wire.out
                    else f"writing timed out after {self._write_timeout:g} s"
                )
                self._broken(exchange, why, now, lost=False)  # (never re-issued)
        self._admit(now)

    def ready(self, exchange: _Exchange, readable: bool, writable: bool, now: float) -> None:
        """The selector says ``exchange``'s socket is ready."""
        wire = exchange.wire
        if exchange.state != "active" or wire is None:
            return
        try:
            if writable:
                before = len(wire.out)
                connected = wire.connected
                wire.on_writable(now)
                if wire.connected and not connected:
                    self._prefer(wire.address)
                    exchange.write_since = now
                if len(wire.out) < before or not wire.out:
                    exchange.write_since = now
                if not wire.out and not exchange.written and wire.handshaken and wire.connected:
                    exchange.written = True
                    if exchange.one_way and self._write_timeout is not None:
                        exchange.answer_deadline = now + self._write_timeout
            if readable:
                wire.on_readable()
            self._events(exchange, now)
        except _ConnectFailed as exc:
            self._unreachable(exchange, exc, now)
        except _WireError as exc:
            # (Once the answer began, whatever ends it cuts it short, as the Trio client's.)
            lost = isinstance(exc, _Lost) or exchange.reader is not None
            self._broken(exchange, str(exc), now, lost=lost)
        except h11.RemoteProtocolError as exc:
            lost = exchange.reader is not None
            if exc.error_status_hint == 431:  # (h11: "Receive buffer too long")
                limit = self.config.max_header_size
                why = f"the server broke HTTP/1.1: a response head over {limit} bytes"
            elif wire.ended and exchange.reader is None:
                why = "the server closed the connection before it answered"
                lost = True
            else:
                # (A malformed head on a live connection is the server's answer, broken:
                # not a lost one. The request fails; it is not re-issued.)
                why = f"the server broke HTTP/1.1: {exc}"
            self._broken(exchange, why, now, lost=lost)
        self._admit(now)

    def _events(self, exchange: _Exchange, now: float) -> None:
        wire = exchange.wire
        assert wire is not None
        while exchange.state == "active":
            event = wire.h11.next_event()
            if event is h11.NEED_DATA:
                if wire.ended:
                    raise _Lost("the server closed the connection")
                return
            if event is h11.PAUSED:
                raise _WireError("the server sent more than one response")
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                # h11 bounds a head still incomplete; one that came whole in a read is
                # measured here (its status line and fields, as written).
                size = len(event.reason) + 15 + sum(len(n) + len(v) + 4 for n, v in event.headers)
                if size > self.config.max_header_size:
                    limit = self.config.max_header_size
                    raise _WireError(
                        f"the server broke HTTP/1.1: a response head over {limit} bytes"
                    )
                self._head(exchange, event, now)
            elif isinstance(event, h11.Data):
                reader = exchange.reader
                assert reader is not None
                if exchange.discard:
                    continue
                self.inbox.extend(reader._feed(bytes(event.data)))
                log_warnings(reader)
            elif isinstance(event, h11.EndOfMessage):
                self._finish(exchange, now, complete=True)
            else:  # ConnectionClosed before a response
                raise _Lost("the server closed the connection without answering")

    def _head(self, exchange: _Exchange, head: h11.Response, now: float) -> None:
        sent = exchange.sent
        # (Redirects are not followed: the core words the error, naming the Location;
        # a 401's names the server's challenge.)
        reader = self.http.response(
            sent, head.status_code, list(head.headers), follow_redirects=False
        )
        exchange.reader = reader
        self._answered = True
        if not exchange.one_way:
            exchange.answer_deadline = None  # (a one-way answer stays bounded, body too)
        elif head.status_code >= 400:
            self._one_way_refused(exchange, head, now)
        for rid in sent.request_ids:
            if rid not in exchange.ids:
                reader.forget(rid)  # cancelled before this answer began
        if reader.session_expired == "restart":
            self._restart(reader)
        if exchange is self._get:
            self._get_head(exchange)

    def _one_way_refused(self, exchange: _Exchange, head: h11.Response, now: float) -> None:
        """A one-way message refused: lost, with a warning, unless it was a ``503``
        with ``Retry-After`` (a server with no handler slot for a notification, or
        over its connection bound: nothing of it ran), the first: then it is sent
        again after that delay (at most ``RETRY_AFTER_CAP``), as the Trio client's
        (the session's close drops it: ``terminate``; nor is one refused while the
        ``DELETE`` goes: no POST after it)."""
        assert exchange.reader is not None
        delay = exchange.reader.retry_delay(time.time())
        retry = exchange.sent.again("retried") if delay is not None else None
        if retry is None or self._closing:
            retried = exchange.sent.sent_again == "retried"
            logger.warning(
                "HTTP: a one-way message was refused%s: status %d%s",
                " again" if retried else "",
                head.status_code,
                " (closing)" if self._closing and delay is not None and not retried else "",
            )
            return
        # (In the original's place, not last: a notifications/initialized sent again
        # still holds back the requests queued behind it, until its head comes or it is
        # given up, as the Trio client's send() awaits the retry.)
        assert delay is not None
        self._start(_Exchange(retry, start_at=now + delay), now, after=exchange)

    def _finish(
        self, exchange: _Exchange, now: float, *, complete: bool, lost: bool = True
    ) -> None:
        """The answer ended (``complete``: as HTTP framed it; ``lost``: not by a timeout
        of ours, so a modern request it leaves unanswered is re-issued)."""
        reader, wire = exchange.reader, exchange.wire
        assert reader is not None
        exchange.state = "done"
        self._exchanges.remove(exchange)
        if wire is not None:
            exchange.wire = None
            if (
                complete
                and len(self._idle) < self.config.max_idle_connections
                and wire.h11.our_state is h11.DONE
                and wire.h11.their_state is h11.DONE
            ):
                wire.h11.start_next_cycle()
                self._idle.append(wire)
            else:
                wire.close()
        if exchange.discard:
            return
        self.inbox.extend(reader._feed_eof(not complete))
        for rid in reader.broken:  # (a modern stream broke: re-issued, see Broken)
            why = reader.broken_why
            self.inbox.append(Broken(rid, why) if lost else http_error(rid, why))
        log_warnings(reader)
        if exchange.one_way:
            log_one_way_answer(reader)
        if reader.session_expired == "end":
            self._end_session()
        elif reader.resend:
            self.inbox.append(Resend(reader.resend))
        if exchange is self._get:
            self._get_ended(exchange, now)
            return
        again = reader.resume()
        if again is None:
            self._abandon(reader.abandoned, reader.abandoned_why, now)
            return
        self._resume(again, now)

    def _resume(self, again: ClientRequest, now: float) -> None:
        """Resume a request's stream with ``again`` once its delay has passed, unless
        too many attempts in a row got no stream: then its requests fail, and the server
        is told (the sans-IO rule, ``ClientRequest.given_up``, the Trio client's too)."""
        why = again.given_up(self.config.max_resume_attempts)
        if why is None:
            self._start(_Exchange(again, start_at=now + self.http.resume_delay(again)), now)
            return
        self.inbox.extend(http_error(rid, why) for rid in again.request_ids)
        self._abandon(again.request_ids, why, now)

    def _abandon(self, request_ids: tuple[RequestId, ...], why: str, now: float) -> None:
        """The requests ``request_ids`` were given up (their errors are out): tell the
        server (``notifications/cancelled``), which may still be working on them."""
        if self.http.era is Era.MODERN:
            return
        for rid in request_ids:
            self.send(abandoned_request(rid, why), now)

    def _broken(self, exchange: _Exchange, why: str, now: float, *, lost: bool) -> None:
        """The connection broke: before an answer began, its requests fail (a modern
        request written whole, the connection ``lost``, is re-issued instead but a
        ``subscriptions/listen``); during one, it ends there (resumed if it can be)."""
        logger.debug("HTTP %s: %s", exchange.sent.request.method, why)
        wire = exchange.wire
        if wire is not None:
            wire.close()
            exchange.wire = None
        if exchange.reader is not None:
            self._finish(exchange, now, complete=False, lost=lost)
            return
        if exchange is self._get:
            self._close(exchange)
            self._get_ended(exchange, now, why)
            return
        sent = exchange.sent
        if lost and sent.resumption and exchange.ids:  # (no answer: tried again, counted)
            self._close(exchange)
            self._resume(sent.failed_again(why, exchange.ids), now)
            return
        if lost and exchange.written and sent.modern and exchange.counted:
            listens, rest = split_broken(sent, exchange.ids)
            self.inbox.extend(http_error(rid, why) for rid in listens)
            self.inbox.extend(Broken(rid, why) for rid in rest)
            exchange.ids.clear()
            self._close(exchange)
            return
        if lost and exchange.written and exchange.one_way:
            again = None if self._closing else sent.again("resent")
            if again is not None:
                # The server may never have had it (the answer to its request, which
                # it would wait for in vain): sent once more at once, in its place, as
                # the Trio client's (a second copy is ignored); not past the DELETE.
                self._start(_Exchange(again), now, after=exchange)
                self._close(exchange)
                self._admit(now)
            else:
                logger.warning("HTTP: a one-way message was lost: %s", why)
                self._close(exchange)
            return
        # A legacy request written whole, then no answer (``lost``): the server may be
        # working on it, as on a stream that ends with no event id, so it is told (never
        # of an initialize, which the lifecycle forbids cancelling), as the Trio client's.
        given_up = (
            tuple(
                rid
                for rid, method in zip(sent.request_ids, sent.methods, strict=True)
                if rid in exchange.ids and method != "initialize"
            )
            if lost and exchange.written
            else ()
        )
        self._failed(exchange, why)
        self._abandon(given_up, why, now)

    def _failed(self, exchange: _Exchange, why: str) -> None:
        if exchange.one_way:
            logger.warning("HTTP: a one-way message could not be sent: %s", why)
        for rid in exchange.sent.request_ids:
            if rid in exchange.ids:
                self.inbox.append(http_error(rid, why))
        exchange.ids.clear()
        self._close(exchange)

    def _prefer(self, address: Address) -> None:
        """The next connection tries first the address that answered last."""
        known = self._addresses
        if known is not None and address in known and known[0] != address:
            known.remove(address)
            known.insert(0, address)

    def _unreachable(self, exchange: _Exchange, exc: _WireError, now: float) -> None:
        """No connection for ``exchange``. With addresses an earlier connection resolved
        (the server may have moved: its name resolves elsewhere now), the name is
        resolved again and the exchange tried once more, within what is left of its
        ``connect_timeout``; otherwise the server is unreachable (but for a resumption,
        tried again after a while, at most ``max_resume_attempts`` times in a row)."""
        self._addresses = None
        deadline = exchange.connect_deadline
        if not exchange.fresh and deadline is not None and now < deadline:
            logger.debug("HTTP: %s; resolving %r again", exc, self._host)
            if exchange.wire is not None:
                exchange.wire.close()
                exchange.wire = None
            self._dial(exchange, now, deadline)
            return
        self._close(exchange)
        if exchange is self._get:
            # (Counted there: tried again, or given up: then the session ends.)
            self._get_ended(exchange, now, f"{self._host}:{self._port}: {exc}", connected=False)
            return
        sent = exchange.sent
        if sent.resumption and exchange.ids:
            # Counted and tried again, as the GET stream's; given up, its requests fail
            # (and the cancellation POST finds the server unreachable, if it still is).
            self._resume(sent.failed_again(str(exc), exchange.ids), now)
            return
        if sent.modern and exchange.ids and self._answered:
            # A modern request stands alone (no session to lose): once the server was
            # there (not at open), it fails alone, and the next one tries again (a server
            # restarting), as the Trio client's does.
            self._failed(exchange, str(exc))
            return
        if self.failure is None:
            self.failure = SessionClosed(
                f"the server cannot be reached: {self._host}:{self._port}: {exc}"
            )

    def _close(self, exchange: _Exchange) -> None:
        if exchange.wire is not None:
            exchange.wire.close()
            exchange.wire = None
        exchange.state = "done"
        if exchange in self._exchanges:
            self._exchanges.remove(exchange)

    def _stop_waiting(self, exchange: _Exchange, rid: RequestId) -> None:
        exchange.ids.discard(rid)
        if exchange.reader is not None:
            exchange.reader.forget(rid)
        if not exchange.ids:
            self._close(exchange)

    # ------------------------------------------------------------------ session expiry

    def _restart(self, lost: ClientResponse) -> None:
        """A ``404`` head says the session in use is gone: start a new one; what was
        being answered on the old one can be answered no more."""
        for exchange in list(self._exchanges):
            reader = exchange.reader
            if reader is None or not reader.lost_with(lost):
                continue
            for rid in reader.unanswered:
                if rid in exchange.ids:
                    self.inbox.append(http_error(rid, FORGOTTEN_BEFORE_ANSWER))
            exchange.ids.clear()
            self._close(exchange)
        if self._get is not None:
            self._close(self._get)
            self._get = None  # (the new session opens its own)
        self.inbox.append(Restart())

    def _end_session(self) -> None:
        if self.failure is None:
            self.failure = SessionClosed(FORGOTTEN_TWICE)

    # ------------------------------------------------------------------ GET stream

    def open_get_stream(self, now: float) -> None:
        """Legacy: open the session's GET stream (what the server says on its own is
        read while calls wait), unless it is open, not wanted, not offered, or there is
        no session. The rules of opening it again are the core's (``GetStream``), the
        Trio client's too."""
        http = self.http
        if (
            self._get is not None
            or not self.config.open_get_stream
            or http.session_id is None
            or http.era is not Era.LEGACY
        ):
            return
        rules = self._get_rules
        if rules is None or rules.session_id != http.session_id:
            rules = self._get_rules = http.get_stream(self.config.max_resume_attempts)
        request = rules.request()
        if request is None:  # (not offered, or given up)
            return
        self._get = _Exchange(request)
        if self._gated != http.session_id:  # (the session's first: requests wait for it)
            self._gated = http.session_id
            self._gate = self._get
        self._start(self._get, now)

    def _get_head(self, exchange: _Exchange) -> None:
        """The GET stream's head. A stream is judged once it ends (``_get_ended``);
        anything else now: the server offers no GET stream (a ``405``, or no stream
        ever came), and it is closed at once; else its body is read, and what was
        decided done once it ends."""
        reader = exchange.reader
        assert reader is not None and self._get_rules is not None
        if reader.kind == "sse":
            return
        decided = self._get_decided = self._get_rules.answered(reader)
        if decided.action == "not_offered":
            logger.debug("HTTP: no GET stream (%s)", decided.reason)
            self._close(exchange)
            self._get = self._get_decided = None
        elif decided.action != "stop":
            logger.debug("HTTP: the GET stream got status %d: opened again", reader.status)

    def _get_ended(
        self, exchange: _Exchange, now: float, problem: str = "", *, connected: bool = True
    ) -> None:
        """The GET stream's attempt ended (``problem``: why it got no answer, if it got
        none; ``connected`` false: not even a connection): do what the core's rules say,
        open it again after a while, or give up (the session ends)."""
        if self._get is not exchange:
            return
        self._get = None
        rules, reader = self._get_rules, exchange.reader
        assert rules is not None
        decided, self._get_decided = self._get_decided, None
        if reader is None:
            decided = rules.no_answer(problem, connected=connected)
        elif reader.kind == "sse":
            decided = rules.answered(reader)
        assert decided is not None  # (by _get_head)
        if decided.action == "give_up":
            logger.debug("HTTP: %s", decided.reason)
            if self.failure is None:
                self.failure = SessionClosed(decided.reason)
        elif decided.action == "not_offered":
            logger.debug("HTTP: no GET stream (%s)", decided.reason)
        elif decided.action == "reopen" and (request := rules.request()) is not None:
            self._get = _Exchange(request, start_at=now + decided.delay)
            self._start(self._get, now)

    # ------------------------------------------------------------------ closing

    def busy_writing(self) -> bool:
        """Whether a one-way message is not written yet (or not started), but one
        waiting for its ``Retry-After``: a call that ends, or the close, does not wait
        for that (it goes in a later call; the close drops it)."""
        return any(e.one_way and not e.written and not e.retry_waits for e in self._exchanges)

    def terminate(self, now: float, *, taken_within: float = 0.0) -> bool:
        """Legacy: send the ``DELETE`` that ends the session (``False``: no session),
        once the one-way POSTs still under way (a cancellation) are taken (their
        answer's head came, or they were given up), or ``taken_within`` seconds passed."""
        self._closing = True
        for exchange in list(self._exchanges):
            if exchange.retry_waits:
                # (Not sent again past the close: it waits for the server's Retry-After.)
                logger.warning("HTTP: a one-way message was refused: status 503 (closing)")
                self._close(exchange)
            elif exchange is self._get or exchange.sent.request_ids or exchange.reader is not None:
                self._close(exchange)  # (and a one-way POST taken already: its head came)
        self._get = None
        if self.failure is not None:
            return False
        sent = self.http.terminate()
        if sent is None:
            return False
        self._delete = _Exchange(sent, discard=True)
        self._delete_until = now + taken_within
        self._start(self._delete, now)
        return True

    def idle(self) -> bool:
        """Whether no exchange is in progress."""
        return not self._exchanges

    def close(self) -> None:
        """Close every connection."""
        for exchange in list(self._exchanges):
            self._close(exchange)
        while self._idle:
            self._idle.popleft().close()


# ---------------------------------------------------------------------- the client's link


def _wait(
    http: HttpTransport,
    timeout: float,
    clock: Clock,
    *,
    reading: bool,
    wake: socket.socket | None = None,
) -> None:
    """Wait on the exchanges' sockets for ``timeout`` seconds at most, and let the
    transport move the bytes of the ready ones (``reading``: as
    :meth:`HttpTransport.wanted`); ``wake`` readable ends the wait too (``Hooks.wake``)."""
    wanted = http.wanted(reading=reading)
    if not wanted and wake is None:  # (every exchange waits for its time)
        time.sleep(timeout)
        return
    with selectors.DefaultSelector() as selector:
        # (a new selector each time: a closed socket's number may be reused)
        for fd, (events, exchange) in wanted.items():
            selector.register(fd, events, exchange)
        if wake is not None:
            selector.register(wake, selectors.EVENT_READ)  # (data None: not an exchange)
        ready = selector.select(timeout)
    for key, events in ready:
        if key.data is None:
            continue
        http.ready(
            key.data,
            bool(events & selectors.EVENT_READ),
            bool(events & selectors.EVENT_WRITE),
            clock.now(),
        )


@final
class HttpLink:
    """The client's messages over Streamable HTTP: each one handed to the
    :class:`HttpTransport`, whose inbox is handed to the core in order (:meth:`take`).
    Backpressure and bounds are the transport's (see the module docs)."""

    def __init__(self, http: HttpTransport, *, close_timeout: float) -> None:
        self.http: Final = http
        self._close_timeout = close_timeout
        self._hooks: Hooks | None = None

    def attach(self, hooks: Hooks) -> None:
        self._hooks = hooks

    @property
    def hooks(self) -> Hooks:
        assert self._hooks is not None
        return self._hooks

    def message_bound(self) -> tuple[int, str] | None:
        return self.http.message_bound()

    def begin(self) -> None:
        self.take()  # (sending may have failed at once: no address, say)

    def queue(self, *, own: bool = False) -> None:
        """Hand the core's output to the transport, message by message (each a POST);
        once the handshake is done, a legacy session's GET stream too."""
        hooks = self.hooks
        now = hooks.clock.now()
        for message in hooks.conn.data_to_send():
            self.http.send(message, now)
        if hooks.handshaken():
            self.http.open_get_stream(now)

    def unwritten(self) -> bool:
        """Whether a one-way message is not written yet."""
        return self.http.busy_writing()

    def next_deadline(self) -> float | None:
        return self.http.next_deadline()

    def handle_timer(self, now: float) -> None:
        self.http.handle_timer(now)
        self.take()

    def wait(self, timeout: float) -> None:
        _wait(self.http, timeout, self.hooks.clock, reading=True, wake=self.hooks.wake)
        self.take()

    def flush(self, *, within: float | None) -> None:
        """Drive the one-way POSTs queued (answers to the server's requests, a
        cancellation) until written, for ``within`` seconds at most (``None``: not at
        all), and nothing else: no answer that could bring messages is read (heads and
        one-way answers are), what the answers bring stays in the inbox (no callback
        runs), no timer of the core's fires; all that is the next call's."""
        http, clock = self.http, self.hooks.clock
        if within is None or self.hooks.failed():
            return
        deadline = clock.now() + within
        while http.busy_writing() and http.failure is None:
            now = clock.now()
            if deadline <= now:
                logger.debug("HTTP: left unwritten for now")
                return
            own = http.next_deadline()
            if own is not None and own <= now:
                http.handle_timer(now)
                continue
            wake = deadline if own is None else min(deadline, own)
            _wait(http, wake - now, clock, reading=False)

    def goodbye(self, now: float) -> tuple[Callable[[], bool], float] | None:
        """Legacy: send the ``DELETE`` that ends the session, once the one-way POSTs
        under way (a cancellation) are taken, for half of ``close_timeout`` at most, as
        the Trio client's close; what to wait for, and how long (``close_timeout``)."""
        if not self.http.terminate(now, taken_within=self._close_timeout / 2):
            return None
        return self.http.idle, self._close_timeout

    def close(self, *, urgent: bool = False) -> None:
        self.http.close()  # (at once either way)

    def _take_messages(self, now: float) -> list[Event]:
        """The core's events for the messages at the head of the inbox, in a row."""
        inbox, conn = self.http.inbox, self.hooks.conn
        events: list[Event] = []
        while inbox and isinstance(inbox[0], _MESSAGE):
            message = inbox.popleft()
            if isinstance(message, tuple) and message[1] is not None:
                # (parsed by the reader: not parsed again)
                events += conn.receive_message(message[0], now=now, decoded=message[1])
            else:
                # An error the transport made (an http_error: a Read with no dict, or
                # bytes; a gateway's own JSON error quoted too), no JSON-RPC answer of
                # the server's: TransportFailed, as the Trio client's.
                data = message[0] if isinstance(message, tuple) else message
                assert isinstance(data, bytes)
                events += transport_errors(conn.receive_message(data, now=now))
        return events

    def _take_step(self, now: float, *, reissue: bool = True) -> None:
        """Act on the ``Restart``, ``Resend`` or ``Broken`` at the head of the inbox (a
        ``Broken`` not re-issued becomes the error that fails it, there; not ``reissue``:
        the call is being given up, so the core is not asked to make a new request)."""
        inbox = self.http.inbox
        item = inbox.popleft()
        if isinstance(item, Broken):
            rid = item.request_id
            times = self.hooks.reissue(rid) if reissue else self.hooks.conn.reissue_count(rid)
            if times is None:
                self.queue()
            else:
                inbox.appendleft(reissue_refused(item.request_id, item.why, times))
        elif isinstance(item, Restart):
            self.hooks.restart(now)
        elif isinstance(item, Resend):
            for rid in item.request_ids:
                with suppress(LocalProtocolError):  # (answered or cancelled meanwhile)
                    self.hooks.conn.resend_request(rid)
            self.queue()

    def _take_uncalled(self, now: float) -> None:
        """Empty the inbox with no callback run (Ctrl-C in one)."""
        inbox, hooks = self.http.inbox, self.hooks
        while inbox and not hooks.failed():
            if isinstance(inbox[0], _MESSAGE):
                hooks.handle_uncalled(self._take_messages(now))
            else:
                self._take_step(now, reissue=False)  # (the call is being given up)

    def take(self) -> None:
        """Hand the core what the answers brought, in order (messages; a new session;
        requests to send again); then take in a failure of the transport's."""
        hooks, http = self.hooks, self.http
        inbox = http.inbox
        while inbox and not hooks.failed():
            now = hooks.clock.now()
            if not isinstance(inbox[0], _MESSAGE):
                self._take_step(now)
                continue
            # The messages in a row, handled together (as ByteLink hands a read's): Ctrl-C
            # in one's callback answers the server's requests among the rest with an
            # error, and those in the rest of the inbox too (past a Resend or Restart):
            # none is left for a callback after the interrupt.
            try:
                hooks.handle(self._take_messages(now))
            except Exception:
                raise
            except BaseException:
                self._take_uncalled(now)
                raise
        if http.failure is not None and not hooks.failed():
            hooks.fail(http.failure)

"""The Streamable HTTP client: a :class:`~mcp_trio.Session` over an HTTP message channel.

Theory of operation
-------------------
The whole session runtime (handshake and era probe, requests, timeouts, progress,
cancellation, handlers for the server's requests) is the same as on stdio: only the
channel differs. :class:`HttpChannel` turns each message the session writes into one
POST, built by :class:`~mcp_sansio.http.HttpClient` (headers, session id, ``Mcp-Method``
/ ``Mcp-Name`` / ``Mcp-Param-*`` mirroring), and everything the answers carry (a JSON
body, SSE events) into messages the session reads.

* **Ordering.** A message with requests is handed to a task of its own (``send_nowait``
  takes it at once, as ``send`` does), which takes a connection (waiting for one when
  all ``max_client_connections`` are busy: the session's single writer never waits for
  a connection that only its own reader could free), writes the POST within
  ``write_timeout`` and reads its answer. So requests run concurrently, one connection
  each, and a server slow to read one large body holds up neither the session's writer
  nor any other request; that write timing out, or given up by its caller, ends that
  request alone and drops its connection (below). On an idle kept-alive connection whose
  socket takes the POST at once, it is written before the hand-off (no task waits to
  start it: a scheduler round trip less per request). Each request is a POST of its
  own, on its own connection: in what order concurrent ones reach the server is not
  kept (nor could it be: the server runs them concurrently). A message without
  requests (a notification, the answer to a server request) joins a queue (at most
  ``_MAX_ONE_WAY``; the session's writer waits for room, backpressure) that one task
  of the channel's sends in order, each POST awaiting its ``202`` before the next:
  so they keep their order among themselves (progress before the answer it
  precedes; a legacy ``notifications/cancelled`` after the request it cancels, which
  is out or withdrawn by then), and a server slow to take one (a large sampling
  result it does not read) holds up neither the session's writer nor any request.
  Each is bounded by ``write_timeout`` (its write and its answer): past it, it is lost
  with a warning, and the next goes; the session goes on. Only
  ``notifications/initialized`` is awaited by ``send`` (the writer, and the requests
  behind it, wait for its ``202``), so it is processed before any later request; for
  nine tenths of ``write_timeout`` at most (the writer's own bound, which would end
  the session): a server that never answers it has it lost, as any other. On
  close, what is queued gets half of ``close_timeout`` before the ``DELETE``.
* **Refused for now** (``503`` with ``Retry-After``: a server with no handler slot
  for a notification, or over its connection bound, which turns any POST away unread;
  nothing of it ran). A one-way message is sent again once, after that delay (at most
  ``RETRY_AFTER_CAP`` seconds; the queue waits meanwhile, to keep the order), never
  once the channel is closing; refused again, it is lost with a warning. A request so
  refused is not sent again: its caller gets the refusal.
* **Cancellation.** Legacy: ``notifications/cancelled`` is POSTed like any message.
  Modern: it is never sent; the request's connection is closed instead, which is how
  the server learns of it (``2026-07-28/basic/patterns/cancellation``). In both eras
  the client stops reading a cancelled request's answer at once: its task ends (its
  connection is closed, its slot freed) unless other requests of the same POST are
  still awaited, and its stream is never resumed. A request cancelled before its POST
  began to go out (waiting for a free connection or a token) is withdrawn, and nothing
  is sent: the server never had it.
* **Resumption** (legacy; ``basic/transports.mdx``: the server MAY close the
  connection at any time, the client SHOULD then poll, and disconnection SHOULD NOT be
  read as cancelling). An SSE response that ends before its requests are answered is
  resumed with ``GET`` + ``Last-Event-ID``, for as long as the server answers each
  resumption with a stream, even one that brings nothing but a new event id before it
  closes (a server that polls): after the server's ``retry`` each time, so it is polled
  at its pace (never sooner than ``mcp_sansio.http.MIN_REOPEN_DELAY``); a server that
  announced none, or after an attempt that got no stream, while nothing comes, twice as
  long each time from ``default_retry_ms``, up to ``MAX_REOPEN_DELAY`` (``reopen_delay``,
  ``HttpClient.resume_delay``). Only the
  request's own timeout (``timeout``, ``max_request_time``) bounds that. Only attempts
  that get no stream (no connection, no answer, a ``5xx``, ``408`` or ``429``) count:
  after ``max_resume_attempts`` of them in a row the requests fail (-32603 ``HTTP: the
  stream could not be resumed: ...``, naming the last problem); any other refusal (the
  events are gone) fails them at once. Either way, as for a stream that ends with no
  event id (or a POST written whole whose connection fails before the answer's head:
  ``ReadFailed``), the server is told (``notifications/cancelled``): it may still be
  working on requests nobody waits for any more. Progress is a JSON-RPC message: ``data:``
  that is none (junk) does not count, so no stream is resumed in a tight loop. The
  rule is the sans-IO core's (``ClientResponse.resume``, ``ClientRequest.given_up``,
  ``HttpClient.resume_delay``), the blocking client's too.
* **Re-issue** (modern; ``2026-07-28`` changelog item 9, "Remove SSE stream
  resumability": "clients MUST re-issue it as a new request with a new request ID").
  A request whose answer broke *after it was written* -- an SSE stream that ended
  without the answer, a JSON body cut short (``ClientResponse.broken``), the
  connection closed or reset before the head (:class:`~mcp_trio._http_pool.ReadFailed`)
  -- is handed to the session's ``reissue`` hook (``attach_reissue``, as
  ``attach_holds``), which has the core send it again (``Connection.reissue_request``:
  new id and progress token, same params, its deadline as it stands) at most
  ``ConnectionConfig.max_reissues`` times; when it will not (the bound, the deadline
  passed, nobody waits) the request fails here as before, -32603 ``HTTP: ...``, its
  message saying how many times it was re-issued. The mark is this channel's own
  knowledge of its transport, never the server's words: a JSON-RPC error is an answer
  whatever its ``data``. Never for an error status (the server answered), our own
  cancellation or a timeout (we closed the stream: for the server that *is* the
  cancellation, and it sends nothing more), a request not written whole
  (:class:`~mcp_trio._http_pool.WriteFailed`: a server may close the connection on a
  body larger than it takes, which a re-issue would only repeat; see the end of these
  docs), an SSE event dropped for its size (the answer, most likely: too large again),
  a ``subscriptions/listen`` (its subscription ends, as before: its hub keys it by the
  first listen's id), nor a legacy stream (resumed instead). Why the core and the
  session and not this channel: the core owns request ids and deadlines, the session
  its waiters (re-keyed to the new id, ``on_sent`` told).
* **GET stream** (legacy): once the session is initialized, one task keeps the session's
  GET stream open for what the server says on its own, for as long as the session lasts
  (the client may open it at any time). A stream that ends is resumed
  (``Last-Event-ID``) when it has an event id, else (or when the resumption is refused:
  the events are gone) opened again, after the last stream's ``retry`` (``default_retry_ms``
  until one came; never less than ``MIN_REOPEN_DELAY``); attempts in a row that bring no
  JSON-RPC message (junk ``data:`` is none) wait twice as long each time,
  from at least ``default_retry_ms``, up to ``mcp_sansio.http.MAX_REOPEN_DELAY`` (a
  quiet server that closes its streams is polled less often). A ``405`` means the server
  offers no GET stream (so does any other answer but a stream, before one ever came): it
  is not asked again. A ``404`` starts a new session (below), which opens its own. More
  than ``max_resume_attempts`` attempts in a row that get no stream (no connection; once
  a stream came, an error status too) end the session
  (:class:`~mcp_trio.SessionClosed`): what the server says could no longer reach it, and
  a client that only listens must not look connected. Before a stream ever came, that
  many dropped connections or redirect loops mean "no GET stream", quietly. These rules
  are the sans-IO core's (``mcp_sansio.http.GetStream``), the blocking client's too. With
  OAuth, the stream never starts an authorization (nobody asked for it: a prompt, a
  browser, must only ever answer something the user did): a ``401`` to its (re)open
  waits for the shared refresh, as a one-way message does (below), then, refused
  still, for the next token put in use (``Authorizer.new_token``: a refresh, or the
  flow a request of the user's starts), without polling the server and without
  counting as a failed attempt; the stream opens again with that token. The
  ``notifications/initialized`` send returns once the server answered that GET's head
  (or refused it, or ``connect_timeout`` passed), so the stream is open before the first
  request: what the server sends on its own right after is not missed, and a server sees
  the GET before any request (the conformance suite's ``sse-retry`` counts a GET during
  a call as that call's reconnection).
* **Session expiry** (legacy; ``basic/transports.mdx``, "Session Management"). A ``404``
  to a request with our session id means the server forgot the session; the client
  MUST start a new one with a new ``initialize``. The channel tells the session
  (``receive`` raises ``SessionLost``), which sends that ``initialize`` (without a
  session id) and ``notifications/initialized``, then sends again the requests the
  server refused with ``404``: it never processed them, so their callers just get
  their answers. Our other requests in flight on the forgotten session cannot be
  answered any more: they fail at once (``McpError`` -32603, ``HTTP: ...``), and the
  GET stream is opened again on the new session (the old one's is closed). A
  notification whose own POST got the ``404`` is not sent again. One new session per
  loss: if the new session is lost too before it answered a request or carried the GET
  stream, or a request sent again gets ``404`` again, that request fails and the
  session closes (:class:`~mcp_trio.SessionClosed` says why); what is written until
  the session has read that is dropped (``SessionEnded``: without a session the server
  could only refuse it) and fails with the session.

  The ``404``'s head is enough to know, so the restart is signalled the moment it
  arrives, with no checkpoint in between (and the doomed requests are failed by a task
  of the channel's): whatever is cancelled later, even the task reading the ``404``,
  the session hears of the loss exactly once. Until the session has read that signal
  it cannot know, and what it writes meanwhile no session can carry
  (``SessionPending``): its requests join the signal (the session holds them for the
  new session with the refused ones), a notification waits in the channel (at most
  ``_MAX_DEFERRED``) and goes out right after the new session's
  ``notifications/initialized``, and the rest (answers to the old session's requests,
  cancellations and progress about its messages) is dropped. After that signal the
  session holds what it writes itself (the core its requests, with their timers
  running; ``notify`` its notifications). So nothing is ever sent straight back to a
  session that cannot carry it (no busy loop), and everything waits at most for the
  new session, which must be ready within ``handshake_timeout`` (and its
  ``initialize`` answered within ``request_timeout``; with neither bound, as long as
  the server takes); a request's own timeout still counts meanwhile.
* **Redirects**: same-origin ``307`` / ``308`` only (the sans-IO rules), at most
  ``max_redirects``; any other redirect fails the request.
* **Authorization** (``auth=``, :mod:`mcp_trio._oauth`): every request carries the
  current bearer token (framed by the pool), from the first one when the storage kept
  one for the server (looked up before it, as a refresh); a request whose answer asks for
  authorization (``401``, ``403`` ``insufficient_scope``) is sent again once a token is
  obtained, at most ``max_authorizations`` times, in its own task; the authorization
  itself runs in the channel's nursery (bounded by ``authorize_timeout``, not cut short
  by the request's timeout). An expired token is refreshed before every request, by
  one task in the channel's nursery that all share. A one-way message never calls
  the authorization server nor waits for a user (nobody asked for it): it goes with
  the current token (starting the refresh of an expired one); refused with ``401``, it
  waits for that refresh (at most a third of ``write_timeout``, and ``timeout``) and
  is sent once more, else lost, as any refused one-way message. A ``ping`` is treated
  so too (it waits for that refresh as a request does, held: see ``attach_holds``): it
  asks whether the server is there, and a refusal answers that, so it never starts an
  authorization, which may be the user's browser (see :mod:`mcp_trio._keepalive`); nor
  does the GET stream's (above). A failed authorization fails that request (-32603,
  ``HTTP: authorization failed: ...``); the session goes on. While requests wait for a
  token (a refresh before them, an authorization after their refusal), the session is
  told (``attach_holds``): a modern listen's acknowledgment bound does not count that
  time.

Every error this channel makes for a request (-32603, ``HTTP: ...``; ``data`` ``{"httpStatus":
...}`` when a status came) is marked as its own (``LocalReply``), so that the request raises
:class:`~mcp_trio.TransportFailed` (an ``McpError``), never mistaken for the server's own
-32603; a JSON-RPC error the server put in an error status's body stays the server's. A
gateway's own JSON error (``{"error": {"code": 502, ...}}``, no ``jsonrpc``) is no
JSON-RPC error: quoted in ours, it is the transport's too.

A request that cannot be sent because no connection can be made closes a legacy session
(the server is unreachable, and with it what it kept); a modern request, which has no
session to lose, fails alone (-32603 ``HTTP: could not connect ...``) and the next one
tries again (a server restarting); a connection that fails while the request is being written,
or on which writing it takes longer than ``write_timeout`` (a server slow to read a large
body), fails only that request (a server may close the connection on a body larger than
it takes), and one that fails after it was written, before the answer, has the session re-issue it
(modern; above) or fails it (legacy). A one-way message whose connection fails after it
was written, before the answer, is sent once more at once (the server may never have had
it: an answer to its request it would wait for in vain; a second copy is ignored); one
refused while it is written, or with an error status (but a first ``503`` with
``Retry-After``: above), or broken twice, or not sent and answered within
``write_timeout``, is lost, with a warning logged; the session goes on. A request
h11 refuses to frame (say a redirect to a target no request line may carry) fails only
itself.
"""

from __future__ import annotations

import logging
import math
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import ClassVar, Final, final

import attrs
import h11
import trio

from mcp_sansio import ConnectionConfig, Era, LocalProtocolError, RequestId
from mcp_sansio._oauth import OAuthError
from mcp_sansio.http import (
    FORGOTTEN_BEFORE_ANSWER,
    FORGOTTEN_TWICE,
    ClientRequest,
    ClientResponse,
    HttpClient,
    HttpClientConfig,
    ReplyNotCarried,
    SessionEnded,
    SessionPending,
    abandoned_request,
    http_error,
    pinned_http_config,
    reissue_refused,
    split_broken,
)

from ._channel import (
    Decoded,
    Framing,
    Hold,
    Inbox,
    LocalReply,
    MessageChannel,
    Reissue,
    SessionLost,
    Take,
)
from ._config import SessionConfig
from ._errors import HandshakeFailed, SessionClosed
from ._errors_base import name_the_endpoint
from ._handlers import Handlers
from ._http_config import HttpTransportConfig
from ._http_h11 import log_one_way_answer, log_warnings
from ._http_pool import ConnectFailed, Pool, ReadFailed, WriteFailed
from ._http_wire import H11Stream, WireError
from ._oauth import OAuth
from ._open import open_session
from ._session import Session
from ._util import open_task_nursery

__all__ = ["HttpChannel", "open_http_client"]

logger = logging.getLogger("mcp_trio")


_INBOX_SIZE: Final = 16
_MAX_ONE_WAY: Final = 16
"""One-way messages queued to be sent (:meth:`HttpChannel._one_way_nowait`); a further
one waits for room."""
_ENDED: Final = "the HTTP channel's tasks have ended (cancelled)"
"""Why a message written after :meth:`HttpChannel.run` ended is refused."""
_MAX_DEFERRED: Final = 16
"""Notifications written while a lost session's replacement is not started yet, kept
to send on the new one; more are dropped, with a warning."""


@final
@attrs.frozen
class _Broken:
    """In the inbox, in order with the messages: the answer to our request
    ``request_id`` was lost after it was written (``why``); :meth:`HttpChannel.receive`
    has the session re-issue it, or fails it."""

    request_id: RequestId
    why: str


@attrs.define(slots=True)
class _Written:
    """Whether the request is out (set by calling it, once its first byte is)."""

    done: bool = False
    retry_after: float | None = None
    """A one-way message refused ``503`` with a ``Retry-After``: the seconds it asks
    to wait before it is sent again (:meth:`ClientResponse.retry_delay`;
    :meth:`HttpChannel._send_one_way`)."""

    broke: str | None = None
    """A one-way message whose connection failed after it was written, before the
    head of its answer: why (:meth:`HttpChannel._send_one_way` sends it once more)."""

    def __call__(self) -> None:
        self.done = True


@final
@attrs.frozen
class _OneWay:
    """A one-way message in the queue of :meth:`HttpChannel._one_way_sender`."""

    sent: ClientRequest
    done: trio.Event | None
    """Set once it is sent or lost (for a sender that awaits it)."""


@attrs.define(slots=True, eq=False)
class _Stream:
    """One POST with requests, in flight: what cancelling one of them needs."""

    scope: trio.CancelScope
    """The scope of the task that sends it and reads its answers."""
    ids: set[RequestId]
    """Its requests not cancelled yet (nor failed with the session they were on)."""
    reader: ClientResponse | None = None
    """The answer being read now (or last read), once a response head arrived."""
    out: bool = False
    """Whether the POST may have begun to go out (set before its first write): until
    then, a legacy cancellation of all its requests is not sent (the server never had
    them; see :meth:`HttpChannel.send`)."""

    def stop_waiting(self, rid: RequestId) -> None:
        """``rid`` was cancelled: stop reading for it; once no request of the POST is
        left, stop the task (which closes its connection and frees its slot)."""
        self.ids.discard(rid)
        if self.reader is not None:
            self.reader.forget(rid)
        if not self.ids:
            self.scope.cancel()


@final
class HttpChannel(MessageChannel):
    """JSON-RPC messages over Streamable HTTP, client side (see the module docs).

    Start its tasks with ``await nursery.start(channel.run)`` before using it.

    Args:
        url: the MCP endpoint, ``http://`` or ``https://``.
        http_config: the sans-IO client's bounds (and a known era, to skip the probe).
        transport: connection bounds and timeouts.
        ssl_context: for ``https://`` (default: the system's trust store).
        headers: extra headers for every request (e.g. ``Authorization``).
        write_timeout: seconds one request may take to be written.
        close_timeout: seconds the ``DELETE`` that ends a legacy session may take.
        auth: OAuth 2.1 authorization for a server that asks for it (``401``).

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL, or an extra header is
            malformed or one the transport writes itself (``Mcp-Session-Id``, ...;
            ``Authorization`` with ``auth``).
    """

    framing: ClassVar[Framing] = "message"

    def message_bound(self) -> tuple[int, str]:
        """:attr:`HttpClientConfig.max_message_size <mcp_trio.HttpClientConfig>`: an
        answer comes as one SSE event or one JSON body."""
        config = self.http.config
        return config.max_message_size, config.MAX_MESSAGE_SIZE_SETTINGS

    def __init__(
        self,
        url: str,
        *,
        http_config: HttpClientConfig | None = None,
        transport: HttpTransportConfig | None = None,
        ssl_context: ssl.SSLContext | None = None,
        headers: Mapping[str, str] | None = None,
        write_timeout: float | None = None,
        close_timeout: float = 2.0,
        auth: OAuth | None = None,
    ) -> None:
        self.http = HttpClient(url, http_config)
        """The sans-IO client: era, session id, negotiated version."""
        self.transport = transport if transport is not None else HttpTransportConfig()
        self._auth = (
            auth.bind(url, legacy_fallback=self._may_be_2025_03_26) if auth is not None else None
        )
        self._pool = Pool(
            url,
            self.transport,
            ssl_context=ssl_context,
            headers=headers,
            write_timeout=write_timeout,
            authorization=self._auth.authorization if self._auth is not None else None,
            # (Only with DPoP: a bearer token's requests make no proof, nor check.)
            proof=self._auth.proof
            if self._auth is not None and auth is not None and auth.dpop
            else None,
        )
        self._close_timeout = close_timeout
        self._write_timeout = write_timeout
        # One-way messages in the order written, sent by one task (see _one_way_sender).
        self._one_way: deque[_OneWay] = deque()
        self._one_way_busy = False  # (its task runs)
        self._one_way_room: trio.Event | None = None  # set when one leaves the queue
        self._one_way_idle: trio.Event | None = None  # set when its task ends
        self._retry_scope: trio.CancelScope | None = None  # a wait for Retry-After
        # How long a one-way message refused with 401 waits for the shared refresh:
        # well inside the write_timeout that bounds its whole exchange (_send_one_way).
        self._refresh_wait = (
            0.0
            if auth is None
            else auth.timeout
            if write_timeout is None
            else min(auth.timeout, write_timeout / 3)
        )
        self._inbox_send, inbox = trio.open_memory_channel[
            bytes | SessionClosed | SessionLost | _Broken
        ](_INBOX_SIZE)
        self._inbox = Inbox(inbox)
        self._held: Hold | None = None  # the session's (attach_holds)
        self._reissue: Reissue | None = None  # the session's (attach_reissue)
        self._tasks: trio.Nursery | None = None
        self._ended = False  # (run's nursery takes no task any more: see run)
        self._streams: dict[RequestId, _Stream] = {}
        self._get_started = False
        self._get_scope: trio.CancelScope | None = None
        self._expired = False
        self._closed = False
        self._answered = False  # the server answered a request of ours once (see send)
        # A lost session (see the module docs): the restart is signalled and the
        # session has not read the signal yet; the requests written meanwhile (they go
        # with the signal); the notifications written before the new session is ready.
        self._restart_due = False
        self._joining: list[RequestId] = []
        self._deferred: list[bytes] = []

    def _may_be_2025_03_26(self) -> bool:
        """Whether the session may be a ``2025-03-26`` one (OAuth's fallback for a
        server without protected-resource metadata): legacy, with that version or none
        negotiated yet."""
        http = self.http
        return http.era is not Era.MODERN and http.protocol_version in (None, "2025-03-26")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the channel's tasks until :meth:`aclose`."""
        async with trio.open_nursery() as nursery:
            self._tasks = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                # Cancelled: by aclose, or from outside (a client given up abruptly),
                # before the session knew. From now on the nursery takes no task, so
                # nothing more can be sent: refused before a byte of it is written (a
                # request written, then refused its task, was written again).
                self._ended = True

    # ------------------------------------------------------------------ MessageChannel

    async def send(self, message: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the HTTP channel is closed")
        if self._ended:
            raise trio.BrokenResourceError(_ENDED)
        cancelled = self.http.cancelled_request(message)
        if cancelled is not None and self._cancel(cancelled):
            return
        try:
            sent = self.http.post(message)
        except ReplyNotCarried:
            logger.debug("HTTP: a reply to the server was dropped: %.200r", message)
            return
        except SessionPending as exc:
            self._pending(message, exc)
            return
        except SessionEnded:
            # The session reads the end next (or already has): a request dropped here
            # fails with it, SessionClosed, as one made a moment later would.
            logger.debug("HTTP: dropped, the session is over: %.200r", message)
            return
        if sent.request_ids:
            self._send_request(sent)
            return
        if not sent.initialized:
            await self._one_way_later(sent)
            return
        # Awaited (the writer waits, and the requests behind it): the server takes
        # notifications/initialized before any later request. At most nine tenths of
        # write_timeout, the writer's own bound, which would end the session: it is a
        # notification, sent (the session is initialized on our side), and a server
        # that never answers its POST has it lost there, with a warning, as any other
        # one-way message (_send_one_way); the requests go meanwhile.
        done = trio.Event()
        limit = self._write_timeout
        # (The queue's wait and the 202's, together: _one_way_later's own bound is the
        # same, for its wait alone.)
        with trio.move_on_after(math.inf if limit is None else limit * 0.9):
            await self._one_way_later(sent, done)
            await done.wait()
        if self._deferred:
            # The new session is ready: what was written while none could carry it.
            deferred, self._deferred = self._deferred, []
            for note in deferred:
                await self.send(note)
        ready = self._maybe_open_get_stream()
        if ready is not None:
            with trio.move_on_after(self.transport.connect_timeout):
                await ready.wait()

    def _cancel(self, cancelled: RequestId) -> bool:
        """Our request ``cancelled`` is cancelled (its ``notifications/cancelled`` is
        being written): stop reading its answer; whether that is all (modern: closing
        its connection is the cancellation; a request withdrawn before it went out),
        else the notification is to be POSTed (legacy)."""
        stream = self._streams.pop(cancelled, None)
        if stream is not None:
            # Modern: closing the request's connection is the cancellation. Legacy:
            # the notification is; a stream nobody waits for is not resumed.
            stream.stop_waiting(cancelled)
        if cancelled in self._joining:
            self._joining.remove(cancelled)  # (never sent: nobody to tell)
        if self.http.era is Era.MODERN:
            return True
        # Still waiting for a free connection (or a token), now withdrawn: the server
        # never had it, so there is nobody to tell (a keep-alive ping held past its
        # timeout must not cost a POST each interval).
        return stream is not None and not stream.out and not stream.ids

    def _pending(self, message: bytes, refused: SessionPending) -> None:
        """``message`` was written while a lost session's replacement is not started:
        see the module docs."""
        if refused.request_ids:
            self._resend(refused.request_ids)
        elif refused.deferrable and len(self._deferred) < _MAX_DEFERRED:
            self._deferred.append(message)
        elif refused.deferrable:
            logger.warning(
                "HTTP: a notification was dropped while the session is started anew "
                "(%d wait already): %.200r",
                _MAX_DEFERRED,
                message,
            )
        else:
            logger.debug("HTTP: dropped with the session it was for: %.200r", message)

    def send_nowait(self, message: bytes) -> bool:
        """Take a message with requests now: it never waits for the session's writer
        (see :meth:`_send_request`). On a kept-alive connection that is idle, whose
        socket takes the POST at once, it is written here (no task waits for it
        first: a scheduler round trip less per request); else its own task writes it.
        A one-way message joins the others' queue (:meth:`_one_way_nowait`) if there
        is room; so does a cancellation, which stops its request's stream first (a
        modern one is only that: see :meth:`send`), so that the courtesy
        ``notifications/cancelled`` of a closing session (``Session.aclose``, which
        sends only what the channel takes at once) goes out, within half of
        ``close_timeout`` (:meth:`aclose`). Everything else
        (``notifications/initialized``, awaited; a one-way message that must wait for
        room) returns ``False`` untouched, for :meth:`send`.
        """
        if self._closed or self._ended or self._tasks is None:
            return False  # (send() says why)
        try:
            cancelled = self.http.cancelled_request(message)
            if cancelled is not None:
                if self.http.era is not Era.MODERN and len(self._one_way) >= _MAX_ONE_WAY:
                    return False  # (no room: send() waits for some)
                if self._cancel(cancelled):
                    return True
            sent = self.http.post(message)
        except LocalProtocolError:
            return False  # send() raises it (or drops the message, saying why)
        if not sent.request_ids:
            # (notifications/initialized is awaited: send() does it)
            return not sent.initialized and self._one_way_nowait(sent)
        pool = self._pool
        if (
            pool.limiter.available_tokens
            and pool.has_direct_idle()
            and (self._auth is None or not self._auth.needs_refresh())
            and self._send_at_once(sent)
        ):
            return True
        self._send_request(sent)
        return True

    def _send_at_once(self, sent: ClientRequest) -> bool:
        """Start ``sent`` on an idle kept-alive connection if its socket takes the first
        bytes at once; whether it did (its task then writes the rest, if any, and
        reads the answer)."""
        assert self._tasks is not None
        scope = trio.CancelScope()
        limiter = self._pool.limiter
        try:
            limiter.acquire_on_behalf_of_nowait(scope)
        except trio.WouldBlock:
            return False
        started = self._pool.send_nowait(sent.request)
        if started is None:
            limiter.release_on_behalf_of(scope)
            return False
        wire, rest = started
        stream = self._track(sent, scope)
        stream.out = True
        # The kernel took part of the POST: its own task writes the rest, and a failure
        # then fails only this request (bytes of it are out; it is never sent twice).
        self._tasks.start_soon(self._request, sent, stream, wire, rest)
        return True

    def attach_reader(self, take: Take) -> None:
        self._inbox.take = take

    def attach_holds(self, held: Hold) -> None:
        self._held = held

    def attach_reissue(self, reissue: Reissue) -> None:
        self._reissue = reissue

    @contextmanager
    def _holding(self, sent: ClientRequest) -> Iterator[None]:
        """While the requests of ``sent`` wait for a token or a free connection (see
        ``attach_holds``)."""
        held = self._held if sent.request_ids else None
        if held is not None:
            held(sent.request_ids, True)
        try:
            yield
        finally:
            if held is not None:
                held(sent.request_ids, False)

    async def receive(self) -> bytes:
        message = await self._receive_decoded()
        return bytes(message) if type(message) is Decoded else message

    async def _receive_decoded(self) -> bytes:
        """:meth:`receive` for the session: a message the response reader parsed comes
        as a :class:`Decoded` (``bytes``, but not of the exact type orjson reads), so
        that the session does not parse it again."""
        try:
            item = await self._inbox.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise trio.EndOfChannel from None
        while isinstance(item, _Broken):
            failed = self._reissued(item)
            if failed is not None:
                return failed
            try:
                item = await self._inbox.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                raise trio.EndOfChannel from None
        if isinstance(item, SessionLost) and item.restart:
            # Read: from now on the session holds what it writes itself.
            self._restart_due = False
            if self._joining:
                item = SessionLost(restart=True, resend=(*item.resend, *self._joining))
                self._joining.clear()
        if isinstance(item, SessionClosed | SessionLost):
            raise item
        return item

    async def aclose(self) -> None:
        """End the legacy session (``DELETE``, bounded by ``close_timeout``), stop every
        request and stream, close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        deadline = trio.current_time() + self._close_timeout
        if self._one_way_busy:
            # One-way messages still queued go first (the notification just written),
            # within half the bound; one waiting for its Retry-After is not sent again.
            if self._retry_scope is not None:
                self._retry_scope.cancel()
            idle = self._one_way_idle = trio.Event()
            with trio.move_on_after(self._close_timeout / 2):
                await idle.wait()
        delete = self.http.terminate() if not self._expired else None
        if delete is not None:
            with trio.move_on_at(deadline):
                await self._discard(delete)
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()
        await self._pool.aclose()
        await self._inbox_send.aclose()

    # ------------------------------------------------------------------ one-way messages

    def _one_way_nowait(self, sent: ClientRequest, done: trio.Event | None = None) -> bool:
        """Queue the one-way message ``sent`` for :meth:`_one_way_sender` if there is
        room (at most :data:`_MAX_ONE_WAY`); whether it was queued. ``done`` is set
        once it is sent or lost."""
        assert self._tasks is not None
        if self._ended:
            raise trio.BrokenResourceError(_ENDED)  # (it waited for room meanwhile)
        if len(self._one_way) >= _MAX_ONE_WAY:
            return False
        self._one_way.append(_OneWay(sent, done))
        if not self._one_way_busy:
            self._one_way_busy = True
            self._tasks.start_soon(self._one_way_sender, name="mcp http one-way")
        return True

    async def _one_way_later(self, sent: ClientRequest, done: trio.Event | None = None) -> None:
        """Queue ``sent`` once there is room (the session's writer waits here: the
        server is slow to take the messages before it; backpressure). At most nine
        tenths of ``write_timeout``, the writer's own bound, which would end the
        session: then it is lost, with a warning, as a one-way message the server does
        not take in time. (No checkpoint when there is room: the usual case.)"""
        if self._one_way_nowait(sent, done):
            return
        limit = self._write_timeout
        with trio.move_on_after(math.inf if limit is None else limit * 0.9):
            while not self._one_way_nowait(sent, done):
                if self._closed:
                    raise trio.ClosedResourceError("the HTTP channel is closed")
                if self._one_way_room is None:
                    self._one_way_room = trio.Event()
                await self._one_way_room.wait()
            return
        logger.warning(
            "HTTP: a one-way message was lost: %d before it wait for the server to take them",
            _MAX_ONE_WAY,
        )
        if done is not None:
            done.set()

    async def _one_way_sender(self) -> None:
        """Send the queued one-way messages (notifications, answers to the server's
        requests) in order, one at a time, each awaiting its ``202``: the task of the
        channel's that does what the session's writer did, so that a server slow to
        take one (a large sampling result it does not read) holds up neither the
        client's requests nor the session; each is sent, or lost with a warning
        (:meth:`_send_one_way`), and the next one goes. Order among them is kept (a
        progress notification before the answer it precedes)."""
        queue = self._one_way
        try:
            while queue:
                item = queue[0]
                try:
                    await self._send_one_way(item.sent)
                finally:
                    queue.popleft()
                    if item.done is not None:
                        item.done.set()
                    room, self._one_way_room = self._one_way_room, None
                    if room is not None:
                        room.set()
        finally:
            self._one_way_busy = False
            if queue:  # (cancelled: the channel closed)
                logger.warning("HTTP: %d one-way message(s) lost: the session closed", len(queue))
            for item in queue:
                if item.done is not None:
                    item.done.set()
            queue.clear()
            if self._one_way_idle is not None:
                self._one_way_idle.set()

    async def _send_one_way(self, sent: ClientRequest) -> None:
        """POST the one-way message ``sent`` and read its answer, within
        ``write_timeout`` (its write, the server's answer: the bound the session's
        writer had). Not taken in time, or refused, it is lost, with a warning; the
        session goes on. Refused ``503`` with ``Retry-After`` (a server with no
        handler slot for a notification, or over its connection bound: nothing of it
        ran; transports.mdx), it is sent again after that delay (at most
        :data:`~mcp_sansio.http.RETRY_AFTER_CAP`, and never once the channel is
        closing). Its connection failed after it was written, before the answer's head
        (closed, reset: :class:`~mcp_trio._http_pool.ReadFailed`), it is sent again at
        once, on another connection (``ctx.sample`` waits for its answer with no bound
        of its own). Either is once only, the core's rule
        (:meth:`ClientRequest.again <mcp_sansio.http.ClientRequest.again>`): a second
        refusal or break loses it with a warning. No connection at all ends a legacy
        session, as for a request."""
        limit = math.inf if self._write_timeout is None else self._write_timeout
        while True:
            written = _Written()
            with trio.move_on_after(limit) as scope:
                try:
                    await self._drive(sent, written)
                except trio.BrokenResourceError as exc:  # (nothing of it went out)
                    cause = exc.__cause__
                    if isinstance(cause, ConnectFailed) and not self._outlives_no_server(sent):
                        self._unreachable(cause)
                    else:
                        logger.warning("HTTP: a one-way message could not be sent: %s", exc)
                    return
            if scope.cancelled_caught:
                logger.warning(
                    "HTTP: a one-way message was lost: sending it timed out after %g s", limit
                )
                return
            if written.broke is not None:
                again = sent.again("resent")
                if again is None:
                    logger.warning("HTTP: a one-way message was lost: %s", written.broke)
                    return
                sent = again
                continue  # (at once, on another connection)
            delay = written.retry_after
            if delay is None:
                return
            again = sent.again("retried")
            if again is None or self._closed:
                logger.warning(
                    "HTTP: a one-way message was refused: status 503 (%s)",
                    "again" if again is None else "the session is closing",
                )
                return
            with trio.CancelScope() as wait:
                self._retry_scope = wait  # (aclose cancels it)
                await trio.sleep(delay)
            self._retry_scope = None
            if wait.cancelled_caught:
                logger.warning(
                    "HTTP: a one-way message was refused: status 503 (the session closed "
                    "before its Retry-After)"
                )
                return
            sent = again

    # ------------------------------------------------------------------ exchanges

    def _send_request(self, sent: ClientRequest) -> None:
        """Hand a POST with requests to a task of its own, which takes a connection slot
        (or waits for one), writes the POST on its connection within ``write_timeout``
        and reads its answer. Never the session's writer: a server slow to read one
        large body must hold up neither the requests after it (each has a connection
        of its own) nor the session's other messages. A write that times out fails
        that request alone (-32603 ``HTTP: ...``), as any POST lost while it is
        written; one whose caller gives up is cancelled with its task (its
        cancellation stops the stream, :meth:`send`); either way its connection is
        dropped, and the session goes on."""
        assert self._tasks is not None
        stream = self._track(sent, trio.CancelScope())
        self._tasks.start_soon(self._request, sent, stream, None)

    def _outlives_no_server(self, sent: ClientRequest) -> bool:
        """Whether the session goes on when ``sent`` finds no server (no connection can
        be made): a legacy session ends (the server, and what it kept, are gone); a
        modern request stands alone, with no session to lose, so once the server has
        answered one (not at open: an unreachable server fails that) it fails alone
        and the next one tries again (a server restarting)."""
        return sent.modern and self._answered

    def _track(self, sent: ClientRequest, scope: trio.CancelScope) -> _Stream:
        stream = _Stream(scope, set(sent.request_ids))
        for rid in sent.request_ids:
            self._streams[rid] = stream
        return stream

    async def _request(
        self,
        sent: ClientRequest,
        stream: _Stream,
        wire: H11Stream | None,
        rest: bytes | memoryview = b"",
    ) -> None:
        """Read the answer to ``sent`` (already written on ``wire``, or to be written
        once a connection is free), with its redirects and resumptions; holds a slot of
        the pool's limiter (already taken when ``wire`` is given)."""
        limiter = self._pool.limiter
        scope = stream.scope
        try:
            with scope:
                if wire is None and not limiter.available_tokens:
                    # Waiting for a free connection is our side's wait, as a token is
                    # (attach_holds): a keep-alive ping does not count it as silence.
                    with self._holding(sent):
                        await limiter.acquire_on_behalf_of(scope)
                elif wire is None:
                    await limiter.acquire_on_behalf_of(scope)
                try:
                    await self._drive(sent, _Written(done=True), wire, rest, stream=stream)
                finally:
                    limiter.release_on_behalf_of(scope)
        finally:
            self._forget(sent, stream)  # (a cancelled read has closed its connection)

    def _forget(self, sent: ClientRequest, stream: _Stream) -> None:
        for rid in sent.request_ids:
            if self._streams.get(rid) is stream:
                del self._streams[rid]

    async def _drive(
        self,
        sent: ClientRequest,
        written: _Written,
        wire: H11Stream | None = None,
        rest: bytes | memoryview = b"",
        *,
        stream: _Stream | None = None,
    ) -> None:
        """One logical request: the POST (already written on ``wire`` if given), its
        redirects and its resumptions; ``stream`` (for a POST with requests) is told of
        each reader."""
        current = sent
        while True:
            again: ClientRequest | None
            try:
                reader = await self._follow(current, written, wire, rest, stream=stream)
                self._answered = True
                wire, rest = None, b""
            except WireError as exc:
                if isinstance(exc, WriteFailed) and not current.request_ids:
                    # A one-way message the server would not take (a body too large for
                    # it): it is lost, but the server is there and the session goes on.
                    logger.warning("HTTP: a one-way message could not be sent: %s", exc)
                    return
                if not written.done:
                    raise trio.BrokenResourceError(str(exc)) from exc
                if (
                    isinstance(exc, ConnectFailed)
                    and not current.resumption
                    and not self._outlives_no_server(current)
                ):
                    # No server for a request: a legacy session ends (the server, and
                    # what it kept, are gone; see _outlives_no_server).
                    self._unreachable(exc)
                    return
                # Written, then no answer: a modern request is re-issued (the module docs);
                # a resumption that got no connection, or no answer, is tried again
                # (counted; not a failed authorization, nor an answer that broke HTTP).
                if isinstance(exc, ReadFailed) and current.modern:
                    await self._broke(current, str(exc))
                    return
                if not current.request_ids:
                    # A one-way message written, then no answer: the server may never
                    # have had it (the connection cut on its way), and nothing waits
                    # for it here (an answer to the server's request is awaited there):
                    # sent once more (_send_one_way) when the connection failed, lost
                    # with a warning otherwise (a head HTTP/1.1 cannot read).
                    if isinstance(exc, ReadFailed):
                        written.broke = str(exc)
                    else:
                        logger.warning("HTTP: a one-way message was lost: %s", exc)
                    return
                if not current.resumption or not isinstance(exc, ConnectFailed | ReadFailed):
                    await self._fail(current.request_ids, str(exc))
                    if isinstance(exc, ReadFailed):
                        # Written whole, then no answer: the server may be working on
                        # them, as on a stream that ends with no event id, so it is told
                        # (never of an initialize, which the lifecycle forbids cancelling).
                        sent_ids = zip(current.request_ids, current.methods, strict=True)
                        given_up = tuple(r for r, m in sent_ids if m != "initialize")
                        self._given_up_soon(given_up, str(exc))
                    return
                reader, again = None, current.failed_again(str(exc))
            else:
                if reader is None or reader.session_expired:
                    return  # (_exchange has done what a 404 to our session calls for)
                if not current.request_ids and reader.status >= 400:
                    written.retry_after = reader.retry_delay(time.time())
                    if written.retry_after is not None:
                        return  # (503, Retry-After: its sender may try again)
                    # A one-way message refused (a body too large, say): lost, as above.
                    logger.warning("HTTP: a one-way message was refused: status %d", reader.status)
                    return
                log_one_way_answer(reader)
                again = reader.resume()
            if again is None:
                if reader is not None and reader.abandoned:
                    self._given_up_soon(reader.abandoned, reader.abandoned_why)
                return
            # Only attempts that got no stream count: a server that answers each with a
            # stream (a priming event id, then the end) is polled at its retry (backing
            # off without one); the request's own timeout bounds it (the module docs).
            why = again.given_up(self.transport.max_resume_attempts)
            if why is not None:
                await self._fail(again.request_ids, why)
                self._given_up_soon(again.request_ids, why)
                return
            await trio.sleep(self.http.resume_delay(again))
            current = again  # (its reader forgets what was cancelled meanwhile)

    async def _follow(
        self,
        sent: ClientRequest,
        written: _Written,
        wire: H11Stream | None = None,
        rest: bytes | memoryview = b"",
        headed: Callable[[], None] | None = None,
        *,
        stream: _Stream | None = None,
    ) -> ClientResponse | None:
        """One HTTP request and its same-origin redirects (``headed`` is called when
        the first response head has arrived).

        Returns:
            The last answer read, or ``None`` after too many redirects (the requests
            of ``sent`` have failed).

        Raises:
            WireError: no connection, or no answer.
        """
        current, redirects = sent, 0
        while True:
            reader = await self._exchange(current, written, wire, rest, headed, stream)
            headed = None
            wire, rest = None, b""
            if reader.session_expired or reader.redirect is None:
                return reader
            redirects += 1
            if redirects > self.transport.max_redirects:
                await self._fail(current.request_ids, "too many redirects")
                return None
            current = reader.redirect

    async def _exchange(
        self,
        sent: ClientRequest,
        written: _Written,
        wire: H11Stream | None,
        rest: bytes | memoryview = b"",
        headed: Callable[[], None] | None = None,
        stream: _Stream | None = None,
    ) -> ClientResponse:
        """Send one HTTP request (unless it is already out on ``wire``, but for
        ``rest``); hand its answer's messages to the session. With OAuth, a refusal
        that asks for authorization is answered by authorizing and sending the request
        again (see :mod:`mcp_trio._oauth`), except for one-way messages: nobody asked
        for them, so they must not wait for a user to authorize, nor call the
        authorization server; a ``401`` to one waits (a bounded time) for the shared
        refresh, if any, and tries once more. So does a ``ping``, and the GET stream's
        ``GET`` (the module docs): only requests of the user's may authorize."""
        auth = self._auth
        interactive = bool(sent.request_ids) or sent.request.method == "GET"
        # Whether a refusal may start an authorization (perhaps the user's browser): only
        # for the user's requests; not for pings, which the refusal answers, nor for the
        # GET stream, which waits for a token (see the module docs).
        may_authorize = auth is not None and bool(sent.request_ids) and not _only_pings(sent)
        rounds = 0
        nonce_retried = False
        while True:
            if wire is None:
                if auth is not None:
                    # A refresh at most; it never raises. A one-way message never
                    # calls the authorization server: it starts the shared refresh
                    # and goes on with the current token.
                    assert self._tasks is not None
                    if interactive and auth.needs_refresh():
                        with self._holding(sent):
                            await auth.ready(self._tasks)
                    elif not interactive:
                        auth.refresh_soon(self._tasks)
                if stream is not None:
                    stream.out = True  # (from the connect on: it may go out)
                wire, head = await self._pool.roundtrip(
                    sent.request, written, read_at_once=stream is not None
                )
            else:
                if rest:
                    await self._pool.write_rest(wire, rest)
                head = await self._pool.read_head(wire)
            if auth is None:
                break
            challenge = auth.challenge_of(head.status_code, head.headers)
            if challenge is None:
                sent_auth = wire.authorization
                auth.accepted(sent_auth)
                if sent_auth is not None and sent_auth.startswith(b"DPoP "):
                    auth.answered(head.headers)  # (its DPoP-Nonce, RFC 9449 section 9)
                break
            refused = wire.authorization
            if stream is not None:
                # Refused (401/403): the server never had it, and a cancellation while
                # we wait for a token or a user has nobody to tell (until it goes again).
                stream.out = False
            if challenge.error == "use_dpop_nonce":
                # RFC 9449 section 9: once more with the server's nonce, once only.
                if nonce_retried or not auth.took_nonce(refused, head.headers):
                    break
                nonce_retried = True
                await wire.aclose()
                wire, rest = None, b""
                continue
            if not may_authorize:
                if head.status_code != 401 or rounds:
                    break
                assert self._tasks is not None
                with self._holding(sent):  # (a ping's wait is ours, not the server's)
                    try:
                        renewed = await auth.refreshed(refused, self._tasks, self._refresh_wait)
                    except BaseException:
                        await wire.aclose()  # (cancelled: a ping's timeout, the close)
                        raise
                if not renewed:
                    break
                rounds += 1
                await wire.aclose()
                wire, rest = None, b""
                continue
            if rounds >= auth.oauth.max_authorizations:
                break
            rounds += 1
            await wire.aclose()  # (its body is of no use)
            wire, rest = None, b""
            try:
                with self._holding(sent):
                    await auth.challenged(head.status_code, challenge, refused, nursery=self._tasks)
            except (OAuthError, trio.TooSlowError) as exc:
                why = str(exc) or "it took too long"  # (authorize_timeout: no text)
                logger.warning("HTTP: authorization failed: %s", why)
                raise WireError(f"authorization failed: {why}") from exc
        if headed is not None:
            headed()
        reader = self.http.response(sent, head.status_code, head.headers.raw_items())
        if stream is not None:
            stream.reader = reader
            for rid in sent.request_ids:
                if rid not in stream.ids:
                    reader.forget(rid)  # cancelled before this answer began
        if reader.session_expired == "restart":
            self._restart(reader)  # now, before any checkpoint: see the module docs
        try:
            complete = False
            offer = self._inbox.offer
            try:
                while True:
                    # (wire.next_event, without a coroutine per event: the body is most
                    # often in by the time its head is, and awaits nothing.)
                    event = wire.next_event_nowait()
                    if event is None:
                        await wire.receive()
                        continue
                    if type(event) is h11.Data:
                        read = reader._feed(bytes(event.data))
                        if reader.warnings:  # as they come: a stream may last for hours
                            log_warnings(reader)
                        for data, decoded in read:  # (parsed: handed on as a Decoded)
                            message = (
                                LocalReply(data, heard=True)  # (made here: too deep)
                                if decoded is None
                                else Decoded(data, decoded)
                            )
                            if not offer(message):  # (else the session took it in passing)
                                await self._queue(message)
                    elif isinstance(event, h11.EndOfMessage):
                        complete = True
                        break
                    else:
                        break
            except (WireError, h11.RemoteProtocolError) as exc:
                logger.debug("HTTP response to %s cut short: %r", sent.methods or "a message", exc)
            except BaseException:
                await wire.aclose()
                raise
            if complete:
                await self._pool.release(wire)
            else:
                await wire.aclose()
            read = reader._feed_eof(not complete)
            # Its own errors, last, for answers that never came (a gateway's 502, its own
            # JSON error quoted): the server unheard (LocalReply: no _heard_at, a failed
            # ping). Every error made here (no dict) is the transport's, heard or not.
            own = len(read) - len(reader.unheard)
            log_warnings(reader)
            if reader.warnings_dropped:
                logger.warning("HTTP: %d more warnings not shown", reader.warnings_dropped)
            for i, (data, decoded) in enumerate(read):
                if decoded is not None:  # (the server's, parsed: handed on as a Decoded)
                    message = Decoded(data, decoded)
                else:  # (made here: about the server's answer, a 429 say, if i < own)
                    message = LocalReply(data, heard=i < own)
                if not offer(message):
                    await self._queue(message)
            if reader.broken:
                await self._fail(reader.broken, reader.broken_why, broke=True)
        finally:
            if reader.session_expired is not None:
                self._session_lost(reader)  # (no checkpoint: even when cancelled)
        return reader

    async def _discard(self, sent: ClientRequest) -> None:
        """Send a request whose answer does not matter (``DELETE``)."""
        with suppress(WireError, h11.RemoteProtocolError):
            wire, _ = await self._pool.roundtrip(sent.request, lambda: None)
            try:
                while not isinstance(
                    await wire.next_event(), h11.EndOfMessage | h11.ConnectionClosed
                ):
                    pass
            finally:
                await wire.aclose()

    async def _deliver(self, message: bytes) -> None:
        if not self._inbox.offer(message):  # (else the session acted on it in this task)
            await self._queue(message)

    async def _queue(self, message: bytes) -> None:
        """Queue ``message`` for the session's reader (it was not taken in passing)."""
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            # Room in the inbox: no scheduler round trip (the async send always yields).
            try:
                self._inbox_send.send_nowait(message)
            except trio.WouldBlock:
                await self._inbox_send.send(message)

    async def _fail(
        self, request_ids: tuple[RequestId, ...], why: str, *, broke: bool = False
    ) -> None:
        """Fail ``request_ids`` (-32603, ``HTTP: why``); ``broke``: their stream broke
        after they were sent, so the session re-issues those it can first (in order
        with the messages delivered before: ``_Broken``, see :meth:`receive`)."""
        for rid in request_ids:
            if broke and self._reissue is not None:
                self._inbox.unpark()  # (taken in order by the reader, never offered)
                with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self._inbox_send.send(_Broken(rid, why))
            else:
                await self._deliver(LocalReply(http_error(rid, why)))

    def _reissued(self, broken: _Broken) -> bytes | None:
        """The session's reader reached ``broken``: ``None`` if the session re-issued
        the request (``attach_reissue``), else the error that fails it."""
        assert self._reissue is not None
        times = self._reissue(broken.request_id)
        if times is None:
            return None
        return LocalReply(reissue_refused(broken.request_id, broken.why, times))

    async def _broke(self, sent: ClientRequest, why: str) -> None:
        """The connection failed after ``sent`` was written, before its answer's head:
        fail its requests, re-issuing those that are not a ``subscriptions/listen``."""
        listens, rest = split_broken(sent, sent.request_ids)
        if listens:
            await self._fail(listens, why)
        await self._fail(rest, why, broke=True)

    def _given_up_soon(self, request_ids: tuple[RequestId, ...], why: str) -> None:
        """The requests ``request_ids`` were given up (their errors are out): tell the
        server (``notifications/cancelled``), which may still be working on them, in a
        task of the channel's (the caller's may be about to end)."""
        assert self._tasks is not None
        if request_ids and not self._closed and self.http.era is not Era.MODERN:
            self._tasks.start_soon(self._tell_given_up, request_ids, why)

    async def _tell_given_up(self, request_ids: tuple[RequestId, ...], why: str) -> None:
        for rid in request_ids:
            try:
                await self.send(abandoned_request(rid, why))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                logger.debug("HTTP: the cancellation of %r was not sent: %r", rid, exc)
                return

    def _restart(self, lost: ClientResponse) -> None:
        """The head of a ``404`` says the session in use is gone: tell the session to
        start a new one, fail our requests that were being answered on the lost one,
        and close its GET stream. Synchronous, so that nothing can stop it half-way."""
        failed = self._abandon(lost)
        # The GET stream of the lost session goes (perhaps this very task: it ends at
        # its next checkpoint); the new session's opens after its notifications/initialized.
        self._get_started = False
        if self._get_scope is not None:
            self._get_scope.cancel()
        self._restart_due = True
        self._signal_soon(SessionLost(restart=True, resend=()))
        if failed:
            assert self._tasks is not None
            self._tasks.start_soon(self._fail, failed, FORGOTTEN_BEFORE_ANSWER)

    def _session_lost(self, reader: ClientResponse) -> None:
        """A ``404`` to a request with a session id has been read (or its reading
        stopped): end the session, or send its requests again (see the module docs)."""
        if reader.session_expired == "end":
            if self._expired:
                return
            self._expired = True
            self._signal_soon(SessionClosed(FORGOTTEN_TWICE))
        elif reader.resend:
            self._resend(reader.resend)

    def _resend(self, request_ids: tuple[RequestId, ...]) -> None:
        """Have the session send ``request_ids`` again, on the new session: with the
        restart signal while the session has not read it (before it, the session would
        send them straight back), else on their own."""
        if self._restart_due:
            self._joining += request_ids
        else:
            self._signal_soon(SessionLost(restart=False, resend=request_ids))

    def _abandon(self, lost: ClientResponse) -> tuple[RequestId, ...]:
        """Stop reading for our requests whose answers were coming on the session
        ``lost`` was on, and return them: they may have been processed, and no answer
        can come any more."""
        failed: list[RequestId] = []
        for stream in {id(s): s for s in self._streams.values()}.values():
            reader = stream.reader
            if reader is None or not reader.lost_with(lost):
                continue
            ids = [rid for rid in reader.unanswered if rid in stream.ids]
            for rid in ids:
                stream.stop_waiting(rid)
                if self._streams.get(rid) is stream:
                    del self._streams[rid]
            stream.scope.cancel()  # (the stream belongs to the forgotten session)
            failed += ids
        return tuple(failed)

    def _unreachable(self, cause: BaseException) -> None:
        """No server for a legacy session: it ends, saying why (``cause``: what the
        connection failure wraps, a refused certificate, say)."""
        closed = SessionClosed(f"the server cannot be reached: {cause}")
        closed.__cause__ = cause
        self._signal_soon(closed)

    def _signal_soon(self, item: SessionClosed | SessionLost) -> None:
        """Hand the session something other than a message, after every message
        before, without waiting (the session's writer must not wait for the session's
        reader, which may be waiting for the writer; a cancelled task must still get
        it out): if the inbox is full, a task of the channel's waits (after the
        senders already waiting, so the order holds)."""
        assert self._tasks is not None
        self._inbox.unpark()  # nothing may overtake it
        try:
            self._inbox_send.send_nowait(item)
        except trio.WouldBlock:
            self._tasks.start_soon(self._signal, item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _signal(self, item: SessionClosed | SessionLost) -> None:
        self._inbox.unpark()  # (again: the reader may have parked since)
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._inbox_send.send(item)

    # ------------------------------------------------------------------ GET stream

    def _maybe_open_get_stream(self) -> trio.Event | None:
        """Start the GET stream if it is due; the event is set once its head arrived
        (or it failed)."""
        http = self.http
        if (
            self._get_started
            or self._ended
            or not self.transport.open_get_stream
            or http.session_id is None
            or http.era is not Era.LEGACY
        ):
            return None
        self._get_started = True
        assert self._tasks is not None
        ready = trio.Event()
        self._tasks.start_soon(self._get_stream, ready, name="mcp http GET stream")
        return ready

    async def _get_stream(self, ready: trio.Event) -> None:
        """Keep the session's GET stream open while the session lasts (see the module
        docs; the rules are the core's, ``GetStream``); ``ready`` is set once the first
        attempt has a head (or failed)."""
        get = self.http.get_stream(self.transport.max_resume_attempts)
        auth = self._auth
        try:
            with trio.CancelScope() as self._get_scope:
                while (request := get.request()) is not None:
                    tokens = auth.tokens_used if auth is not None else 0
                    try:
                        reader = await self._follow(request, _Written(), headed=ready.set)
                    except ConnectFailed as exc:
                        decision = get.no_answer(str(exc), connected=False)
                    except WireError as exc:
                        decision = get.no_answer(str(exc))
                    else:
                        if auth is not None and reader is not None and reader.status == 401:
                            # Refused, and the shared refresh (if any) brought no token:
                            # wait for the next one (a refresh, a flow of the user's
                            # requests), never asking; not a failed attempt (module docs).
                            ready.set()
                            logger.debug("HTTP: the GET stream waits for a new token")
                            await auth.new_token(tokens)
                            continue
                        if reader is None:
                            decision = get.no_answer("too many redirects")
                        else:
                            decision = get.answered(reader)
                    ready.set()
                    if decision.action != "reopen":
                        if decision.action == "give_up":
                            self._get_lost(decision.reason)
                        elif decision.action == "not_offered":
                            logger.debug("HTTP: no GET stream (%s)", decision.reason)
                        return
                    await trio.sleep(decision.delay)
        finally:
            ready.set()

    def _get_lost(self, reason: str) -> None:
        """More than ``max_resume_attempts`` attempts in a row to open the GET stream
        again got none: end the session (what the server says on its own could no
        longer reach it), saying why."""
        logger.debug("HTTP: %s", reason)
        self._signal_soon(SessionClosed(reason))


def _only_pings(sent: ClientRequest) -> bool:
    """Whether every request ``sent`` carries is a ``ping`` (a keep-alive's, most often)."""
    methods = sent.methods
    return bool(methods) and all(method == "ping" for method in methods)


@asynccontextmanager
async def open_http_client(
    url: str,
    *,
    handlers: Handlers | None = None,
    connection_config: ConnectionConfig | None = None,
    config: SessionConfig | None = None,
    http_config: HttpClientConfig | None = None,
    transport: HttpTransportConfig | None = None,
    ssl_context: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | None = None,
    start: bool = True,
) -> AsyncGenerator[Session]:
    """Connect to an MCP server over Streamable HTTP (both eras).

    Args:
        url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        handlers: handlers for the server's requests and notifications (legacy
            sampling, elicitation, roots; change notifications).
        connection_config: the client core's configuration; ``era`` pins the era
            (``auto``: probe with ``server/discover``, fall back to ``initialize``),
            for ``http_config`` too unless it names one: a refusal then shows its
            HTTP status rather than a fallback that does not happen.
        config: runtime bounds and timeouts (``write_timeout`` bounds writing one
            request: one whose body the server is slower to take fails alone, -32603
            ``HTTP: writing timed out ...``, and holds up no other; ``close_timeout``
            the closing ``DELETE``).
        http_config: the sans-IO client's bounds; ``era=`` skips the probe for an
            origin whose era is known.
        transport: connection pool bounds and timeouts.
        ssl_context: for ``https://`` (default: the system's trust store).
        headers: extra headers for every request (e.g. ``Authorization``).
        auth: OAuth 2.1 authorization (:class:`~mcp_trio.OAuth`) for a server that
            answers ``401``: discovery, registration, authorization and tokens happen
            when the server first asks; the refused request is then sent again. A
            token its storage kept for this server (``load_server``) goes from the
            first request, with no discovery first.
        start: run the handshake before the block starts.

    Returns:
        The running client :class:`~mcp_trio.Session` (``request``, ``notify``, ...).

    A session the server forgets (legacy; ``404`` to a request with our session id) is
    started anew (``basic/transports``, "Session Management"): a new ``initialize``, then
    the refused request again (the server never processed it). Meanwhile:

    * answers still coming on the forgotten session fail with -32603 (``HTTP: ...``,
      :class:`~mcp_trio.TransportFailed`);
    * new requests are held by the core until the new session is ready, their timeouts
      running (``RequestTimeout``; a held request that ends is never sent);
    * notifications wait for it: those written before the session took in the loss wait
      in the channel (at most 16, more are dropped with a warning), later ones in
      ``notify``; one whose own POST got the ``404`` is not sent again;
    * the high-level ``Client`` forgets the tools' output schemas of the old session.

    One new session per loss: if it is refused, forgotten before it answered a request
    or carried the GET stream, not ready within ``handshake_timeout``, or a request sent
    again gets ``404`` again, that request fails and the session closes (nothing more is
    posted). What the server kept per session (subscriptions, logging level) is not
    renewed; a warning says so.

    Resource handling:
        On exit a legacy session is ended with ``DELETE``, every request and stream is
        stopped and every connection closed; no task outlives the block.

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL, or an extra header is
            malformed or one the transport writes itself (``Mcp-Session-Id``, ...).
        SessionClosed: the server could not be reached (the reason says why).
        HandshakeFailed: the server refused the handshake (a 404, no MCP endpoint at
            the URL's path, or a bare 400, a WebSocket server, says so, naming the URL).
    """
    config = config if config is not None else SessionConfig()
    pinned = connection_config.era if connection_config is not None else "auto"
    http_config = pinned_http_config(http_config, pinned)  # (no probe if pinned)
    channel = HttpChannel(
        url,
        http_config=http_config,
        transport=transport,
        ssl_context=ssl_context,
        headers=headers,
        write_timeout=config.write_timeout,
        close_timeout=config.close_timeout,
        auth=auth,
    )
    async with open_task_nursery("HTTP client", cancel_on_exit=True) as nursery:
        await nursery.start(channel.run)
        async with open_session(
            channel, "client", handlers=handlers, config=config, connection_config=connection_config
        ) as session:
            if start:
                try:
                    await session.start()
                except HandshakeFailed as exc:
                    name_the_endpoint(exc, url)  # ("HTTP: status 404" named neither)
                    raise
            yield session

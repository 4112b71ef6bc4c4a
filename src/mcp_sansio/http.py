"""Streamable HTTP for MCP, both eras, sans-IO: the public names in one place
(``from mcp_sansio.http import HttpServer, HttpClient, ...``).

Theory of operation
-------------------
HTTP adds three things to the message-channel core (:class:`~mcp_sansio.Connection`):
*who* a message is for (sessions, streams), *how* it travels (JSON body or SSE, headers
that mirror the body), and *what the status line says* (403, 404, 406, ...). This layer
decides all three and leaves bytes on sockets to the binding, so the same rules serve
h11 + Trio (``mcp_trio``), ASGI or aiohttp: feed an :class:`HttpRequest` to
:meth:`HttpServer.handle_request`, act on its :class:`Reply` (a :data:`Decision` and the
events for your handlers), and write what :meth:`HttpServer.data_to_send` returns (each an
:data:`Output`) to the response it names.

What the binding still does: HTTP/1.1 (or 2) itself. Headers here are ``(name, value)``
pairs of ``bytes``, names lower-cased (:data:`Headers`; a request also takes ``str`` or a
mapping, normalised on the way in). A :class:`HttpResponse` or a stream's start carries
no ``Content-Length`` and no ``Transfer-Encoding``: frame its body as your server does
(``Content-Length`` for a whole body, chunked or HTTP/2 DATA for a stream). A binding that
cannot hold a response open without a request (a GET that waits for server-initiated
messages) sets ``HttpServerConfig(standalone_stream=False)``: that GET is 405 then.

* :mod:`._http_common` -- the values (:class:`HttpRequest`, :class:`HttpResponse`) and
  pure header rules: media types, ``Origin`` / ``Host`` allow-lists, the
  ``=?base64?…?=`` value encoding, ``x-mcp-header`` annotations.
* :mod:`._http_server` -- :class:`HttpServer`: one MCP endpoint; legacy sessions with
  resumable SSE and a GET stream, modern stateless requests with header validation and
  stream-closing cancellation, told apart per request.
* :mod:`._http_auth` -- authorization as a resource server: :class:`Principal`,
  :class:`ProtectedResourceMetadata` (RFC 9728), :func:`bearer_token` and
  :func:`bearer_challenge` (RFC 6750), per-operation scopes (:func:`insufficient_scope`);
  token verification is the deployer's.
* :mod:`._http_client` -- :class:`HttpClient`: request headers for each message, the
  reading of each answer into JSON-RPC messages, the era probe, session expiry and
  stream resumption.

Driving HttpClient
------------------
A client is one :class:`~mcp_sansio.Connection` (``"client"``), which speaks MCP, and one
:class:`HttpClient` for the endpoint URL, which says what HTTP request carries each of
its messages and what each answer means; ``examples/asyncio_http_client.py`` is a whole
one on asyncio and h11. Give both the same era (``ConnectionConfig(era=...)`` and
:func:`pinned_http_config`), or leave both to learn it (``"auto"``: the first modern
request is the probe, and the connection falls back to ``initialize`` by itself). After
every call into the connection, take ``Connection.data_to_send()``, and for each message,
in this order:

1. :meth:`HttpClient.stream_cancellation` not ``None`` (modern): the message cancels that
   request (your ``cancel_request``, or a timeout's). Close the connection its answer
   comes on: that is the cancellation. Send nothing.
2. :meth:`HttpClient.cancelled_request` not ``None`` (legacy): call
   :meth:`ClientResponse.forget` on the response reading that request, and once its
   :attr:`~ClientResponse.unanswered` is empty close that connection (a stream nobody
   waits on is not resumed); then send the message as any other.
3. :meth:`HttpClient.post` gives the :class:`ClientRequest` to send. Its headers hold
   ``Host`` and the MCP headers but nothing of framing: add ``Content-Length`` (or frame
   the body as your HTTP library does). :class:`ReplyNotCarried` (modern: a reply to the
   server, which no request can carry): drop the message and go on.
   :class:`SessionPending`, :class:`SessionEnded`: see "Session expiry" below.
4. On the answer's head, :meth:`HttpClient.response` gives a :class:`ClientResponse`.
   Give each piece of the body to ``feed``, and each message it returns to
   ``Connection.receive_message`` (then flush again: the connection may answer). When the
   body ends, ``feed_eof(cut_short=...)`` (``True``: the connection ended before HTTP said
   the body did) returns the rest, with an error for each request left unanswered; then
   see to what the response lists: ``broken`` (modern: its stream broke after the request
   went out; the client MUST re-issue it: ``Connection.reissue_request`` each, and when
   that refuses, re-issued too often or past its deadline, fail it with
   ``reissue_refused(rid, broken_why, Connection.reissue_count(rid))``), ``redirect``
   (send it instead), ``session_expired``, ``resume()`` and ``abandoned`` (below).
5. A connection that fails before any answer's head: hand ``Connection.receive_message``
   an :func:`http_error` for each of ``sent.request_ids`` (the mcp_trio clients mark the
   events with :func:`transport_errors`, so that no one takes them for the server's).
   Modern, a request written whole when the connection ended (closed, reset; not a head
   that broke HTTP, which is the server's answer): the server may have had it, so it is
   re-issued as for ``broken``; :func:`split_broken` says which (a
   ``subscriptions/listen``, :data:`NEVER_REISSUED`, fails instead).

The legacy GET stream, for what the server says on its own: open it once
:class:`~mcp_sansio.HandshakeCompleted` came and the server answered the
``notifications/initialized`` POST the connection queued with it (the one-way POST of that
same flush: :attr:`ClientRequest.methods` lists requests only); the session is then
initialized on both sides. Open it before the first request so that nothing is missed,
and read it as any response. :meth:`HttpClient.get_stream` gives the session's
:class:`GetStream`, which keeps the rules of opening it again: send its
:meth:`GetStream.request`, hand it each attempt's outcome (:meth:`GetStream.answered`,
:meth:`GetStream.no_answer`) and do what the :class:`GetDecision` says (open it again after
a delay; stop, the server offers none; end the session). The modern era has none.

Session expiry (legacy; ``2025-11-25/basic/transports.mdx``, "Session Management"). A
``404`` to a request that carried the session id sets
:attr:`ClientResponse.session_expired` from the head on. ``"restart"``: the session is
gone; call ``Connection.restart_session`` at once, and once the body ended hand
:attr:`ClientResponse.resend` (never processed) to ``Connection.resend_request``. Every
other response of the old session (:meth:`ClientResponse.lost_with`) can answer nothing
more: fail its ``unanswered`` with ``http_error(rid, FORGOTTEN_BEFORE_ANSWER)`` and close
it; open the GET stream again on the new session. Until the new ``initialize`` is
answered, :meth:`HttpClient.post` raises :class:`SessionPending`: resend its
``request_ids``, keep a ``deferrable`` notification until the new session's
``notifications/initialized``, drop anything else. ``"resend"`` (a request sent on a
session already replaced): only the ``resend`` part. ``"end"`` (the new session was lost
too, or a request sent again was refused again): the conversation is over, and ``post``
raises :class:`SessionEnded` from then on (:data:`FORGOTTEN_TWICE` says why, for people).

Resumption (legacy; the server MAY close an SSE stream at any time and the client SHOULD
then poll). A stream that ends before its requests are answered, with an event id to go
on from, fails none of them: :meth:`ClientResponse.resume` gives the GET
(``Last-Event-ID``) that picks it up. Send it after :meth:`HttpClient.resume_delay` and read
it as any response (its own ``resume()`` goes on, waiting longer while nothing comes). One
that gets no answer at all is ``failed_again(why)``, tried after ``resume_delay`` again
until :meth:`ClientRequest.given_up` says why not; then fail its requests with
:func:`http_error`. Requests given up on a stream the server accepted (those, and
:attr:`ClientResponse.abandoned`) may still be worked on: POST the server
``abandoned_request(rid, why)`` for each, a ``notifications/cancelled`` (the connection
has forgotten them: it would send none). The requests' own timeouts bound it all. The
modern era never resumes: it re-issues (``broken``, above).

One-way messages (notifications, answers to the server's requests). One refused ``503``
with ``Retry-After`` (:meth:`ClientResponse.retry_delay`, given the time), or whose
connection ended after it was written whole, before its answer's head, may never have
been taken: :meth:`ClientRequest.again` gives the same POST to send once more (after
that delay, or at once), or ``None`` when it was sent again already (lost). Nothing is
sent again after the session's ``DELETE``.

The method docstrings' "see the module docs" are this section, and at more length the
theory of operation of :mod:`._http_client`.

Specification: ``2025-03-26`` / ``2025-11-25`` ``basic/transports`` (legacy) and
``2026-07-28/basic/transports/streamable-http`` (modern).
"""

from __future__ import annotations

from ._http_auth import (
    INSUFFICIENT_SCOPE_CODE,
    TOKEN_EXPIRED_CODE,
    WELL_KNOWN_RESOURCE_PATH,
    BearerError,
    Principal,
    ProtectedResourceMetadata,
    RequiredScopes,
    bearer_challenge,
    bearer_token,
    check_metadata_url,
    check_scopes,
    insufficient_scope,
    insufficient_scope_response,
    scope_set,
    token_expired,
)
from ._http_client import (
    FORGOTTEN_BEFORE_ANSWER,
    FORGOTTEN_TWICE,
    MAX_REOPEN_DELAY,
    MIN_REOPEN_DELAY,
    NEVER_REISSUED,
    RETRY_AFTER_CAP,
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
    pinned_http_config,
    reissue_refused,
    reopen_delay,
    split_broken,
    transport_errors,
)
from ._http_common import (
    HeaderInput,
    HeaderParam,
    Headers,
    HttpRequest,
    HttpResponse,
    decode_header_value,
    encode_header_value,
    parse_header_params,
)
from ._http_server import (
    AwaitResponse,
    Decision,
    EventStore,
    HttpServer,
    HttpServerConfig,
    HttpServerEvent,
    InMemoryEventStore,
    OpenStream,
    Output,
    Reply,
    ResponseMode,
    ResponseReady,
    ServerEvent,
    SessionClosed,
    SessionCreated,
    StreamData,
)

__all__ = [
    "FORGOTTEN_BEFORE_ANSWER",
    "FORGOTTEN_TWICE",
    "INSUFFICIENT_SCOPE_CODE",
    "MAX_REOPEN_DELAY",
    "MIN_REOPEN_DELAY",
    "NEVER_REISSUED",
    "RETRY_AFTER_CAP",
    "TOKEN_EXPIRED_CODE",
    "WELL_KNOWN_RESOURCE_PATH",
    "AwaitResponse",
    "BearerError",
    "ClientRequest",
    "ClientResponse",
    "Decision",
    "EventStore",
    "GetDecision",
    "GetStream",
    "HeaderInput",
    "HeaderParam",
    "Headers",
    "HttpClient",
    "HttpClientConfig",
    "HttpRequest",
    "HttpResponse",
    "HttpServer",
    "HttpServerConfig",
    "HttpServerEvent",
    "InMemoryEventStore",
    "OpenStream",
    "Output",
    "Principal",
    "ProtectedResourceMetadata",
    "Reply",
    "ReplyNotCarried",
    "RequiredScopes",
    "ResponseMode",
    "ResponseReady",
    "ServerEvent",
    "SessionClosed",
    "SessionCreated",
    "SessionEnded",
    "SessionPending",
    "StreamData",
    "abandoned_request",
    "bearer_challenge",
    "bearer_token",
    "check_metadata_url",
    "check_scopes",
    "decode_header_value",
    "encode_header_value",
    "http_error",
    "insufficient_scope",
    "insufficient_scope_response",
    "parse_header_params",
    "pinned_http_config",
    "reissue_refused",
    "reopen_delay",
    "scope_set",
    "split_broken",
    "token_expired",
    "transport_errors",
]

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
    ClientRequest,
    ClientResponse,
    HttpClient,
    HttpClientConfig,
    ReplyNotCarried,
    SessionEnded,
    SessionPending,
    http_error,
    pinned_http_config,
    reopen_delay,
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
    "TOKEN_EXPIRED_CODE",
    "WELL_KNOWN_RESOURCE_PATH",
    "AwaitResponse",
    "BearerError",
    "ClientRequest",
    "ClientResponse",
    "Decision",
    "EventStore",
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
    "reopen_delay",
    "scope_set",
    "token_expired",
    "transport_errors",
]

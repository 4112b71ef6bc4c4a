"""Configuration of the Streamable HTTP transport's sockets: one frozen value.

The protocol rules of HTTP (statuses, sessions, event store, body bound) are
:class:`mcp_sansio.http.HttpServerConfig` / ``HttpClientConfig``; the session runtime's
bounds (handler slots, write timeout, shutdown grace) are :class:`~mcp_trio.SessionConfig`.
This object holds what only HTTP/1.1 over TCP needs: timeouts against slow peers,
connection counts and the SSE keep-alive.
"""

from __future__ import annotations

from typing import final

import attrs

from mcp_sansio.http import HttpClientConfig, HttpServerConfig

from ._config import _non_negative, _positive

# The sans-IO rules' own configurations, re-exported: serve_http and open_http_client
# take them (allowed hosts and origins, limits, response mode; the client's bounds).
__all__ = ["HttpClientConfig", "HttpServerConfig", "HttpTransportConfig"]


@final
@attrs.frozen(kw_only=True)
class HttpTransportConfig:
    """Timeouts and bounds of HTTP/1.1 connections, server and client side."""

    # ---------------------------------------------------------------- server
    header_timeout: float = attrs.field(default=10.0, validator=_positive)
    """Server: seconds a request head may take to arrive, counted from its first byte
    (and, on a new connection, also from the accept). A slower client (slowloris) gets
    ``408`` and is disconnected; it never holds up other connections."""
    keepalive_timeout: float = attrs.field(default=30.0, validator=_positive)
    """Server: seconds an idle keep-alive connection may wait for its next request."""
    body_timeout: float = attrs.field(default=30.0, validator=_positive)
    """Server: seconds a request body may take to arrive (then ``408``, disconnect)."""
    sse_keepalive_interval: float | None = attrs.field(default=15.0, validator=_positive)
    """Server: seconds of silence on an open SSE stream before a comment line
    (``": keep-alive"``) is written, so proxies keep it open; ``None``: never."""
    authenticate_timeout: float = attrs.field(default=10.0, validator=_positive)
    """Server: seconds the ``authenticate`` hook of ``serve_http`` may take for one
    request (a token introspection endpoint that hangs, say); then ``503`` with
    ``Retry-After``, logged."""
    max_connections: int = attrs.field(default=1_000, validator=_positive)
    """Server: TCP connections served at once; a further one is answered ``503`` with
    ``Retry-After: 1`` (over TLS: closed) and closed at accept, its request unread."""
    max_header_size: int = attrs.field(default=16_384, validator=_positive)
    """Both: the largest request or response head, bytes (h11's
    ``max_incomplete_event_size``); the server answers a larger one with ``431``."""
    handler_slot_timeout: float = attrs.field(default=5.0, validator=_non_negative)
    """Server: seconds a request may wait for a handler slot. Over HTTP
    ``SessionConfig.max_concurrent_handlers`` bounds the handlers of the whole server,
    every client together (over WebSocket and stdio: of each session). A request that
    gets none in time is answered ``503`` with ``Retry-After: 1`` and a JSON-RPC error
    "server busy" (in a batch: that error in the batch's answer), and nothing of it
    runs. A notification for a handler of yours waits too, and if none comes its POST
    is answered ``503`` the same way, not ``202`` (in a 2025-03-26 batch, whose other
    messages were taken: ``202``, and the busy warning counts it). A modern request
    whose client closes its connection while it waits leaves the line at once (that is
    its cancellation). ``0``: refuse at once when none is free."""
    max_client_handlers: int | None = attrs.field(default=None, validator=_positive)
    """Server: how many of the handler slots one client may hold at once; a further
    request of it waits for one of its own (``handler_slot_timeout``), even while
    others are free. A client is an authenticated principal (``subject``: all its
    sessions and requests), else a legacy session; modern requests of anonymous
    clients, which nothing ties together, count only against the total. ``None``: a
    quarter of ``max_concurrent_handlers`` (16 of the default 64, what the client
    here keeps in progress at most: ``max_client_connections``), so that one client
    whose requests never end (legacy ones outlive their connections) cannot take
    every slot; set it to ``max_concurrent_handlers`` for no share."""
    max_response_buffer: int = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    """Server: bytes waiting to be written to one response (a slow reader of a busy
    SSE stream), not counting the largest event among them: one event of any size (a
    large answer or log message) goes out whole to a client that reads. Above it the
    connection is dropped (logged as a warning); a legacy client resumes from the event
    store."""
    # ---------------------------------------------------------------- client
    connect_timeout: float = attrs.field(default=10.0, validator=_positive)
    """Client: seconds to open a TCP (and TLS) connection."""
    max_client_connections: int = attrs.field(default=16, validator=_positive)
    """Client: requests in progress at once, one TCP connection each (the legacy GET
    stream and short one-way POSTs come on top). Further requests wait for a free
    connection."""
    max_idle_connections: int = attrs.field(default=4, validator=_non_negative)
    """Client: finished keep-alive connections kept for reuse."""
    max_redirects: int = attrs.field(default=5, validator=_non_negative)
    """Client: same-origin ``307`` / ``308`` redirects followed per request (other
    redirects are refused: the request fails)."""
    max_resume_attempts: int = attrs.field(default=5, validator=_non_negative)
    """Client, legacy: failed attempts in a row to resume a request's SSE stream (no
    connection or no answer, a ``5xx``, ``408`` or ``429``) before its requests fail
    (and the server is told: ``notifications/cancelled``). A resumption the server
    answers with a stream is no failure, even one that brings nothing (a server that
    polls): those go on, less and less often, within the request's own timeout. For the
    session's GET stream, failed attempts in a row to open it again (no connection, an
    error status) before the session ends."""
    open_get_stream: bool = True
    """Client, legacy: open the session's GET stream for server-initiated messages
    (change notifications, requests made outside any request)."""

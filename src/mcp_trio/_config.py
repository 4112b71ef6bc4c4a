"""Configuration of the Trio binding: one frozen value with documented defaults.

The protocol's own bounds (message size, tables, request timeouts) live in
:class:`mcp_sansio.ConnectionConfig`; this object holds what only a runtime with tasks,
pipes and sockets needs. ``None`` for a timeout means "wait as long as it takes".
"""

from __future__ import annotations

import time
from typing import Any, Final, final

import attrs

from mcp_sansio import ConnectionConfig

__all__ = [
    "DEFAULT_COMPLETION_RATE_LIMIT",
    "DEFAULT_LOG_RATE_LIMIT",
    "DEFAULT_PROGRESS_INTERVAL",
    "RATE_LIMITED_CODE",
    "RateLimit",
    "SessionConfig",
]


def _positive(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not value > 0:
        raise ValueError(f"{attr.name} must be > 0 (or None where allowed), not {value!r}")


def _non_negative(_inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not value >= 0:
        raise ValueError(f"{attr.name} must be >= 0, not {value!r}")


@final
@attrs.frozen(kw_only=True)
class SessionConfig:
    """Bounds and timeouts of a session and its transport.

    Backpressure policy: at most ``max_concurrent_handlers`` of the peer's requests run
    at once, and at most ``max_unanswered_requests`` have been read without their
    answer being written yet. Requests read while every running slot is busy wait
    their turn, in order; at the second limit the reader stops reading, so the peer's
    writes block (a full pipe, a full socket buffer, a full memory channel) instead of
    requests piling up; nothing is dropped. The reader goes on while only the first
    limit is reached, because a handler that asked the peer something (sampling, roots)
    holds its running slot until the answer, which comes later in the stream; so keep
    ``max_unanswered_requests`` above the number of such requests you expect at once.
    For the same reason a notification with a handler that finds no running slot free
    runs with its backlog slot alone. A handler gives back its running slot as soon as
    its answer is queued, so two busy peers that both send requests do not wait for
    each other forever.
    """

    max_concurrent_handlers: int = attrs.field(default=64, validator=_positive)
    """How many of the peer's requests (and, while slots are free, notifications) are
    handled at once."""
    max_unanswered_requests: int = attrs.field(default=1024, validator=_positive)
    """How many of the peer's requests may be read and not yet answered on the wire
    (running, or waiting for their answer to be written); at least
    ``max_concurrent_handlers`` is used."""
    max_outbox_bytes: int | None = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    """Bytes of messages queued to be written (a peer that reads slowly, or not at all)
    past which a handler whose answer is ready waits for room before it answers,
    keeping its running slot: the handlers stop, then the reader stops reading at
    ``max_unanswered_requests`` (backpressure). So the queue holds at most this many
    bytes, plus the one message that crossed the bound and what tasks that do not
    wait for room queue meanwhile (the peers' answers to each other waiting behind at
    most ``max_concurrent_handlers`` messages of notifications and requests); a peer
    that never reads is still dropped at ``write_timeout``. (Streamable HTTP bounds
    each response with ``HttpServerConfig.max_response_buffer`` instead.) ``None``:
    no bound in bytes; the number of answers is bounded by ``max_unanswered_requests``."""
    shutdown_grace_period: float = attrs.field(default=5.0, validator=_non_negative)
    """When the peer ends its input over stdio (and other byte streams), seconds running
    handlers get to finish before they are cancelled; the answers of those that finish
    are still written, since a client closes the server's stdin to shut it down and may
    read on. Elsewhere (WebSocket, in memory) the end of input means the peer is gone:
    its handlers are cancelled at once. Also what a server's graceful stop gives them."""
    write_timeout: float | None = attrs.field(default=30.0, validator=_positive)
    """Byte streams and WebSockets: seconds one message may take to be accepted by the
    peer (a full pipe or socket buffer). Longer, and the peer is taken for dead: the
    session closes. Each such write is shielded from the caller's cancellation, so a
    frame is never cut in half (a caller that gives up leaves it to the session). Over
    Streamable HTTP (client) it bounds writing each POST: a request that takes longer
    fails alone (-32603) and its connection is dropped; the session goes on. (In-memory
    sends are atomic and cancellable: unbounded.)"""
    abandon_write_timeout: float = attrs.field(default=1.0, validator=_non_negative)
    """Seconds a cancelled caller waits for its turn to send the courtesy
    ``notifications/cancelled`` (a bounded, shielded write) before it returns, leaving
    the message queued for the session to write once the writes ahead of it are done; also
    how long the end of a stdio shutdown waits to write a batch's answers given so far."""
    handshake_timeout: float | None = attrs.field(default=30.0, validator=_positive)
    """Client: seconds ``start()`` waits for the handshake before raising ``TooSlowError``.
    Legacy server: seconds a request served before the client's
    ``notifications/initialized`` (over HTTP the two POSTs may race) waits for it before
    it may ask the client anything (sampling, elicitation, roots). WebSocket server:
    seconds after the opening handshake within which the peer must send a message
    (``initialize``, or a first 2026-07-28 request); else the connection is closed with
    code 1008."""
    listen_ack_timeout: float | None = attrs.field(default=30.0, validator=_positive)
    """Client, modern era: seconds a ``subscriptions/listen`` request (``subscribe()``,
    or a new listen after a token expired) waits for the server's acknowledgment, the
    first message it owes on it, even with no request ``timeout`` (with one, the shorter
    applies). Past it the listen is cancelled and ``subscribe()`` raises
    ``RequestTimeout`` (a new listen: the iteration ends with the expiry). Listens are
    opened concurrently: one the server ignores holds up no other ``subscribe()``. 30 s,
    as ``handshake_timeout``: acknowledging takes a server no work, but the request may
    wait on a slow link first. Time the transport spends obtaining a token for the
    request does not count (the HTTP client's OAuth refresh, or a re-authorization that
    waits for the user, bounded by ``OAuth(authorize_timeout=)``): the bound counts
    afresh from when the request goes out with one. ``None``: wait as long as it
    takes."""
    ping_interval: float | None = attrs.field(default=None, validator=_positive)
    """Legacy era (2024-11-05 … 2025-11-25, ``basic/utilities/ping``): seconds the peer
    may stay silent before a ``ping`` is sent to it (``None``, the default: never).
    Any message from the peer counts, so a busy session sends none, and one ping is
    out at a time. Either role, over stdio, WebSocket, in-memory channels and the
    Streamable HTTP client (a POST each); never in the modern era (2026-07-28 removed
    ``ping``), and never by ``serve_http``, which may have no stream to the client, nor
    by :class:`~mcp_trio.BlockingClient` (call its ``ping()`` yourself)."""
    ping_timeout: float = attrs.field(default=10.0, validator=_positive)
    """Seconds a keep-alive ``ping`` (``ping_interval``) waits for its answer. Past it
    the peer is taken for dead: the session closes (a connection failure,
    :class:`~mcp_trio.SessionClosed` with the ping's ``RequestTimeout`` as its
    ``__cause__``) and a warning is logged. An error answer is an answer: the peer is
    alive (not the HTTP client's own ``HTTP: ...`` error: the ping failed). Only the
    peer's silence counts: a ping that timed out after the peer said anything else, or
    that our side held back (the HTTP client waiting for a free connection or a token),
    or during a restart of a forgotten session, is tried again an interval later. The
    core's ``max_request_time``, when shorter, ends the ping first."""
    close_timeout: float = attrs.field(default=2.0, validator=_non_negative)
    """Seconds to wait for the transport's own closing. A WebSocket: the message being
    written when the session closes goes out whole first (within what its
    ``write_timeout`` left), then the close frame, and the two share this bound (the
    close handshake gets what the message left of it); a message cut short drops the
    connection (code 1006)."""
    memory_buffer_size: int = attrs.field(default=256, validator=_non_negative)
    """In-memory transport: messages buffered in each direction before the writer blocks.
    The peer's own bounds (handler slots, unanswered requests) stop a runaway sender;
    this buffer absorbs bursts. Once it is full, writes wait for the peer to read, so it
    is sized well above the usual concurrency."""
    read_chunk_size: int = attrs.field(default=65_536, validator=_positive)
    """Byte streams (stdio): the largest chunk read at once."""
    stdin_close_timeout: float = attrs.field(default=2.0, validator=_non_negative)
    """stdio client shutdown: seconds to wait for the server to exit after its stdin is
    closed, before SIGTERM."""
    terminate_timeout: float = attrs.field(default=2.0, validator=_non_negative)
    """stdio client shutdown: seconds to wait after SIGTERM, before SIGKILL."""
    exit_status_timeout: float = attrs.field(default=1.0, validator=_non_negative)
    """stdio client: when the server's stdout ends, seconds to wait for its exit status
    and the rest of its stderr before reporting :class:`ServerExited`."""
    stderr_tail_size: int = attrs.field(default=65_536, validator=_non_negative)
    """stdio client: bytes of the server's stderr kept for error messages."""
    ws_ping_interval: float | None = attrs.field(default=20.0, validator=_positive)
    """WebSocket: seconds between keep-alive pings (``None``: no pings)."""
    ws_ping_timeout: float = attrs.field(default=10.0, validator=_positive)
    """WebSocket: seconds to wait for the pong before the connection is closed."""
    ws_max_message_size: int = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    """WebSocket: the largest message, in characters of its JSON text, sent or accepted.
    A larger one is never sent (the session fails what it belongs to alone: a request
    of ours raises ``ValueError``, an answer becomes error -32603, a notification is
    dropped with a warning), so set it alike on both ends; one that arrives all the
    same closes the connection with code 1009 (trio-websocket's ``max_message_size``)."""
    ws_connect_timeout: float = attrs.field(default=10.0, validator=_positive)
    """WebSocket: seconds for the opening handshake (and for the closing one)."""


@final
@attrs.frozen(kw_only=True)
class RateLimit:
    """A token bucket: ``burst`` at once, then ``per_second`` on average.

    The bucket holds at most ``burst`` tokens and starts full; each admitted message
    takes one, and tokens come back at ``per_second``. Time is Trio's clock
    (``trio.current_time()``), so tests run it on a ``MockClock``.
    """

    per_second: float = attrs.field(validator=_positive)
    """Tokens given back per second: the sustained rate."""
    burst: int = attrs.field(validator=_positive)
    """The most tokens the bucket holds: how many may come at once after a quiet
    spell."""
    max_keys: int = attrs.field(default=4096, validator=_positive)
    """A limit kept per client (completions): how many clients' buckets are kept. Past
    it the least recently used is forgotten (that client starts again with a full
    bucket), so the table stays bounded whatever the number of clients."""


DEFAULT_COMPLETION_RATE_LIMIT: Final = RateLimit(per_second=20.0, burst=50)
"""``Server(completion_rate_limit=)``: per client, 50 at once and 20 a second after
that, far more than a user typing (clients SHOULD debounce, completion.mdx) needs."""
DEFAULT_LOG_RATE_LIMIT: Final = RateLimit(per_second=100.0, burst=500)
"""``Server(log_rate_limit=)``: per request, 500 log messages at once and 100 a second
after that."""
DEFAULT_PROGRESS_INTERVAL: Final = 0.05
"""``Server(progress_interval=)``: seconds between two progress notifications of one
request (20 a second)."""

RATE_LIMITED_CODE: Final = 429
"""The JSON-RPC error code of a request refused for coming too fast (a
``completion/complete`` past ``Server(completion_rate_limit=)``); its ``data`` is
``{"retryAfter": seconds}``.

No MCP revision defines one (``2026-07-28/basic/index#error-codes``): ``-32020`` to
``-32099`` are the specification's own and MUST NOT carry undefined codes, ``-32000``
to ``-32019`` SHOULD NOT be used by new implementations, ``-32603`` says the server
failed (it did not) and ``-32600``/``-32602`` that the request was malformed (it was
not). New codes SHOULD be allocated outside ``-32768..-32000``: ``429``, the HTTP
status of the same refusal (RFC 6585 section 4), as ``403`` and ``401`` are for the
scope and token refusals (``mcp_sansio.http.INSUFFICIENT_SCOPE_CODE``)."""


def with_wall_clock(config: ConnectionConfig | None) -> ConnectionConfig:
    """A server's core configuration whose ``requestState`` expiry counts in wall-clock
    time (``time.time``) unless it names a clock: the binding's own clock
    (``trio.current_time``) has an origin of its own in each process, and processes
    that share ``request_state_key`` open each other's states."""
    config = config if config is not None else ConnectionConfig()
    if config.request_state_clock is None:
        config = attrs.evolve(config, request_state_clock=time.time)
    return config

"""The request framing both HTTP clients share (no trio: ``BlockingClient.http`` uses it),
and the one h11 ``EndOfMessage`` every message of ours, request or response, ends with.

:class:`~mcp_trio._http_pool.Pool` (Trio) and
:class:`~mcp_trio._blocking_http.HttpTransport` (blocking) write each request the sans-IO
rules built (:class:`~mcp_sansio.http.HttpRequest`) with the caller's extra headers and
our ``User-Agent``, as h11 events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Final

import h11

from mcp_sansio._http_common import CLIENT_RESERVED_HEADERS, extra_headers
from mcp_sansio._json import loads
from mcp_sansio.http import ClientResponse, HttpRequest

from ._text import for_log

__all__ = [
    "END_OF_MESSAGE",
    "USER_AGENT",
    "Unframeable",
    "client_headers",
    "is_initialized",
    "log_warnings",
    "request_events",
    "retry_after",
    "unsendable",
]

_logger = logging.getLogger("mcp_trio")

USER_AGENT: Final = b"mcp-trio"
"""Sent unless the caller's headers name a ``User-Agent`` of their own."""
END_OF_MESSAGE: Final = h11.EndOfMessage()
"""Every message's end (no trailers), our requests' and the server's responses':
h11 events are immutable, one does for all."""


class Unframeable(Exception):
    """h11 refused to frame a request (an illegal target or header value: our own bug,
    or a value taken from the server). Nothing of it went out; its text says which."""


def client_headers(
    headers: Mapping[str, str] | None, *, reserved: Sequence[str] = ()
) -> list[tuple[bytes, bytes]]:
    """The caller's extra headers for every request, and our ``User-Agent`` unless they
    give one.

    Raises:
        ValueError: a malformed header, or one the transport writes itself
            (``Host``, ``Content-Type``, ``Mcp-Session-Id``, ...; and ``reserved``).
    """
    extra = extra_headers(headers, reserved=(*CLIENT_RESERVED_HEADERS, *reserved), transport="HTTP")
    if not any(name == b"user-agent" for name, _ in extra):
        extra.insert(0, (b"user-agent", USER_AGENT))
    return extra


def request_events(request: HttpRequest, extra: Sequence[tuple[bytes, bytes]]) -> list[h11.Event]:
    """The h11 events that send ``request`` with the headers ``extra`` (after its own),
    and a ``Content-Length`` for a body (and any POST).

    Raises:
        Unframeable: h11 refused the request line or a header.
    """
    headers = [*request.headers, *extra]
    if request.body or request.method == "POST":
        headers.append((b"content-length", str(len(request.body)).encode()))
    try:
        head = h11.Request(method=request.method, target=request.target, headers=headers)
    except (h11.LocalProtocolError, UnicodeEncodeError) as exc:  # (a non-ASCII target)
        raise Unframeable(unsendable(request, exc)) from exc
    events: list[h11.Event] = [head]
    if request.body:
        events.append(h11.Data(data=request.body))
    events.append(END_OF_MESSAGE)
    return events


def unsendable(request: HttpRequest, exc: Exception) -> str:
    """Why ``request`` could not be sent (h11 refused it), for people."""
    return f"cannot send {request.method} {request.target[:80]!r}: {exc}"


def log_one_way_answer(reader: ClientResponse) -> None:
    """Note at DEBUG a one-way message (a notification, a response) answered with a body
    (both HTTP clients): transports.mdx says the server MUST answer ``202 Accepted``
    with none. Nothing is lost, so no warning, which would come with each one."""
    if not reader.sent.request_ids and reader.kind in ("json", "sse"):
        _logger.debug(
            "HTTP: a one-way message was answered %d (%s), not 202", reader.status, reader.kind
        )


def log_warnings(reader: ClientResponse) -> None:
    """Log what the core warned of while reading ``reader`` (both HTTP clients), each on
    one line and clipped: a warning may quote the server (a dropped tool's name, its
    ``x-mcp-header`` value)."""
    if not reader.warnings:  # (the usual case, once per chunk of a stream)
        return
    for warning in reader.take_warnings():
        _logger.warning("HTTP: %s", for_log(warning))


def is_initialized(message: bytes) -> bool:
    """Whether ``message`` is ``notifications/initialized`` (both HTTP clients: the
    requests after it wait until the server has taken it)."""
    if b"notifications/initialized" not in message:
        return False
    obj = loads(message)
    return type(obj) is dict and obj.get("method") == "notifications/initialized"


RETRY_AFTER_CAP: Final = 5.0
"""The longest ``Retry-After`` a refused one-way message waits before it is sent again."""


def one_way_retry_delay(status: int, headers: Iterable[tuple[bytes, bytes]]) -> float | None:
    """How long a one-way message refused with ``status`` waits before it is sent again
    (once), both HTTP clients: only a ``503`` with a valid ``Retry-After`` (a server with
    no handler slot for it, or over its connection bound: nothing of it ran;
    transports.mdx) is, after that delay, at most :data:`RETRY_AFTER_CAP`; ``None``:
    it is lost."""
    if status != 503:
        return None
    delay = retry_after(headers)
    return None if delay is None else min(delay, RETRY_AFTER_CAP)


def retry_after(headers: Iterable[tuple[bytes, bytes]]) -> float | None:
    """The seconds an answer's ``Retry-After`` asks to wait (RFC 9110 section 10.2.3: a
    number of seconds, or an HTTP-date), at least 0; ``None`` without a valid one (both
    HTTP clients, for a one-way message refused ``503``). ``headers``: name (lower
    case, as h11 gives it) and value pairs."""
    for name, value in headers:
        if name != b"retry-after":
            continue
        text = value.decode("latin-1").strip()
        if text.isascii() and text.isdigit():  # (not str.isdigit's "²": no number)
            return float(text)
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # (an HTTP-date is GMT; a malformed one names no zone)
            return None
        return max(0.0, when.timestamp() - time.time())
    return None

"""The request framing both HTTP clients share (no trio: ``BlockingClient.http`` uses it),
and the one h11 ``EndOfMessage`` every message of ours, request or response, ends with.

:class:`~mcp_trio._http_pool.Pool` (Trio) and
:class:`~mcp_trio._blocking_http.HttpTransport` (blocking) write each request the sans-IO
rules built (:class:`~mcp_sansio.http.HttpRequest`) with the caller's extra headers and
our ``User-Agent``, as h11 events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias, cast

import h11

from mcp_sansio._http_common import CLIENT_RESERVED_HEADERS, extra_headers
from mcp_sansio.http import ClientResponse, HttpRequest

from ._text import for_log

if TYPE_CHECKING:
    from h11._headers import Headers

__all__ = [
    "END_OF_MESSAGE",
    "FIELD_MAX",
    "USER_AGENT",
    "VALIDATED_MAX",
    "Unframeable",
    "client_headers",
    "head_fields",
    "log_warnings",
    "request_events",
    "unsendable",
]

_logger = logging.getLogger("mcp_trio")

USER_AGENT: Final = b"mcp-trio"
"""Sent unless the caller's headers name a ``User-Agent`` of their own."""
END_OF_MESSAGE: Final = h11.EndOfMessage()
"""Every message's end (no trailers), our requests' and the server's responses':
h11 events are immutable, one does for all."""

# ------------------------------------------------------------------ validated header fields
#
# Theory of operation. h11 checks every field of every message it is given as a list:
# two regexes (name, value) and a lower-casing each (``h11._headers.normalize_and_validate``),
# about a tenth of an HTTP call's bytecodes. Yet a client sends the same fields with
# every request of a session (host, accept, content-type, session id, version, user
# agent, ...), and a server the same few with every answer: only the Content-Length,
# our own digits, changes. An h11 event takes an ``h11._headers.Headers`` as it is,
# unchecked. So each distinct field is validated once, by h11's own function (nothing
# passes that it would refuse), and kept in a bounded table; a message gets a ``Headers``
# of those fields and its length. Per field, not per message: a modern request's
# ``Mcp-Name`` (a resource's URI, a tool's name) and ``Mcp-Param-*`` values change from
# one request to the next, and only they are then checked again.
#
# Two exceptions. h11 checks Content-Length and Transfer-Encoding across fields (two
# lengths merge or conflict; two codings are refused), so a message naming either takes
# h11's public path, whole. And the table is the module's: it outlives the client or
# session that sent a field, so it keeps only fields the library writes itself whose
# values are no one's secret (``_KEPT_NAMES``: not a credential, a tool's argument in
# ``Mcp-Param-*``, nor any header a user adds, such as an ``X-API-Key``),
# and only short ones (``FIELD_MAX``), so that it holds at most
# ``VALIDATED_MAX * FIELD_MAX`` bytes. Every other field is checked each time it is sent.
#
# ``Headers``, ``normalize_and_validate`` and ``Headers._full_items`` are h11's private
# API (pyproject asks for h11>=0.16, with no upper bound). :func:`_h11_private` probes
# them once, at import: missing, or behaving otherwise than relied on here, every
# message takes h11's public path (a list), as before. tests/trio/test_http_h11_headers.py
# pins what is relied on, so an h11 that changes it fails a test, not users.

_Field: TypeAlias = tuple[bytes, bytes]
_Item: TypeAlias = tuple[bytes, bytes, bytes]
"""h11's stored field: the name as given, the name lower-cased, the value."""


class _Private(NamedTuple):
    headers: Callable[[list[_Item]], Headers]
    """``h11._headers.Headers``: its fields as they are, unchecked."""
    validate: Callable[[list[_Field]], Headers]
    """``h11._headers.normalize_and_validate``: what h11 does to a list it is given."""


def _h11_private() -> _Private | None:
    """h11's header table and validator, or ``None`` (use h11's public path) unless
    they behave as :func:`head_fields` relies on: the validator lower-cases names and
    refuses a line break in a value; an event takes a ``Headers`` as it is; and a
    request with one goes out byte for byte as with the list."""
    fields = [(b"Host", b"a"), (b"Transfer-Encoding", b"Chunked")]
    length = (b"content-length", b"content-length", b"0")
    try:
        from h11._headers import Headers, normalize_and_validate  # noqa: PLC0415

        items = normalize_and_validate(list(fields))._full_items
        if items != [
            (b"Host", b"host", b"a"),
            (b"Transfer-Encoding", b"transfer-encoding", b"chunked"),
        ]:
            return None
        try:
            normalize_and_validate([(b"x", b"a\r\nb")])
        except h11.LocalProtocolError:
            pass
        else:
            return None
        headers = Headers([*items, length])
        given = h11.Request(method="POST", target="/", headers=headers)
        listed = h11.Request(
            method="POST", target="/", headers=[*fields, (b"content-length", b"0")]
        )
        if given.headers is not headers or list(headers) != list(listed.headers):
            return None
        if h11.Connection(h11.CLIENT).send(given) != h11.Connection(h11.CLIENT).send(listed):
            return None
    except Exception:  # (ImportError, AttributeError, TypeError, ...: another h11)
        return None
    return _Private(Headers, normalize_and_validate)


_H11: Final = _h11_private()
"""h11's private header API, when it behaves as relied on; else ``None``."""

VALIDATED_MAX: Final = 256
"""How many distinct fields :func:`head_fields` keeps validated (then it forgets them
all, to validate again those still sent): a session's requests have under ten kept, and
one more per ``Mcp-Name`` value; a server's answers a few, and one per CORS origin it
echoes."""
FIELD_MAX: Final = 256
"""The longest field (name and value, in bytes) kept: with :data:`VALIDATED_MAX`, the
table holds at most 64 KiB of fields. A longer one (a long ``Mcp-Name`` URI) is checked
each time, a cost small next to sending it."""
_VALIDATED: Final[dict[_Field, _Item]] = {}
_CROSS_FIELD: Final = frozenset((b"content-length", b"transfer-encoding"))
"""Fields h11 checks across the message: one that names them takes the public path."""
_KEPT_NAMES: Final = frozenset(
    (
        # A client's requests (mcp_sansio.http.HttpRequest, client_headers).
        b"host",
        b"accept",
        b"content-type",
        b"user-agent",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
        b"last-event-id",
        # A legacy session's id: on every request of both ends, so checking it each time
        # costs ~260 bytecodes a head; not a credential (a server MUST NOT take it for
        # authentication: basic/security_best_practices), and each end holds it anyway.
        b"mcp-session-id",
        # A server's answers (mcp_sansio's HttpServer, the CORS fields).
        b"cache-control",
        b"connection",
        b"vary",
        b"allow",
        b"x-accel-buffering",
        b"access-control-allow-origin",
        b"access-control-allow-methods",
        b"access-control-allow-headers",
        b"access-control-expose-headers",
        b"access-control-max-age",
    )
)
"""The fields (lower-case names) whose short values are kept: those the library writes
itself and that carry no secret. Not ``Authorization``, ``DPoP``, cookies, an
``Mcp-Param-*`` (a tool's argument), nor any the user adds (``headers=``): those are
checked each time they are sent."""


def head_fields(fields: tuple[_Field, ...], length: bytes | None) -> Headers | list[_Field]:
    """A message head's ``headers`` for h11: ``fields`` (lower-case names, as
    :class:`~mcp_sansio.http.HttpRequest` and ``HttpResponse`` hold them) and a
    ``Content-Length: length`` unless ``None`` (our own digits). Each distinct field is
    validated once, by h11's own function (see the theory above); fields that name a
    ``Content-Length`` themselves (a hook's response) or a ``Transfer-Encoding`` take
    h11's public path every time, which merges the lengths or refuses them.

    Raises:
        h11.LocalProtocolError: an illegal field (each time it is given: a refused field
            is not kept).
    """
    private = _H11
    if private is not None:
        found = list(map(_VALIDATED.get, fields))  # (C loops: no bytecode per field)
        items = _validate(private, fields, found) if None in found else cast("list[_Item]", found)
        if items is not None:
            if length is not None:
                items.append((b"content-length", b"content-length", length))
            return private.headers(items)
    plain = list(fields)
    if length is not None:
        plain.append((b"content-length", length))
    return plain


def _validate(
    private: _Private, fields: tuple[_Field, ...], found: list[_Item | None]
) -> list[_Item] | None:
    """``fields`` as h11 validates them (``found``: those kept, else ``None``), each
    kept once validated if it may be (``_KEPT_NAMES``, ``FIELD_MAX``), or ``None`` when one names a
    ``Content-Length`` or ``Transfer-Encoding``.

    Raises:
        h11.LocalProtocolError: an illegal field.
    """
    table = _VALIDATED
    items = []
    for field, kept in zip(fields, found, strict=True):
        if kept is not None:
            items.append(kept)
            continue
        (item,) = private.validate([field])._full_items
        name = item[1]
        if name in _CROSS_FIELD:
            return None
        if name in _KEPT_NAMES and len(name) + len(item[2]) <= FIELD_MAX:
            if len(table) >= VALIDATED_MAX:
                table.clear()
            table[field] = item
        items.append(item)
    return items


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
    body = request.body
    length = str(len(body)).encode() if body or request.method == "POST" else None
    try:
        headers = head_fields((*request.headers, *extra), length)
        head = h11.Request(method=request.method, target=request.target, headers=headers)
    except (h11.LocalProtocolError, UnicodeEncodeError) as exc:  # (a non-ASCII target)
        raise Unframeable(unsendable(request, exc)) from exc
    events: list[h11.Event] = [head]
    if body:
        events.append(h11.Data(data=body))
    events.append(END_OF_MESSAGE)
    return events


def unsendable(request: HttpRequest, exc: Exception) -> str:
    """Why ``request`` could not be sent (h11 refused it), for people."""
    return f"cannot send {request.method} {request.target[:80]!r}: {exc}"


def log_one_way_answer(reader: ClientResponse) -> None:
    """Note at DEBUG a one-way message (a notification, a response) answered with a body
    (both HTTP clients): transports.mdx says the server MUST answer ``202 Accepted``
    with none. Nothing is lost, so no warning, which would come with each one."""
    if reader.sent.one_way and reader.kind in ("json", "sse"):
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

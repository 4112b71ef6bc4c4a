"""Opaque, tamper-proof cursors for the ``*/list`` methods.

Spec: ``specification/2025-11-25/server/utilities/pagination``.

Theory of operation
-------------------
A cursor is the URL-safe base64 (no padding) of ``payload || tag`` where ``payload`` is the
compact JSON ``{"o": offset, "v": list_version}`` and ``tag`` is the first 16 bytes of
``HMAC-SHA256(key, label || payload)``. The label keeps these tags from ever being confused
with other HMACs made with the same key.

*Why an HMAC:* the spec makes cursors opaque, but a client can still decode base64. Without
the tag a client could forge offsets (harmless for a list, but it turns the cursor into an
API we would then have to keep). With it, anything we did not issue is rejected.

*Why the list version:* an offset is only meaningful against the list it was issued for.
The caller passes a version string that changes whenever the list does (a counter bumped
on ``notifications/*/list_changed`` works); a cursor from an older version is stale and is
rejected, so the client starts over instead of silently skipping or repeating items.

The key is the caller's: one random key per server (``secrets.token_bytes(32)``) is the
intended use, so cursors do not survive a restart -- which the spec allows ("don't persist
cursors across sessions").

Error handling: every way a cursor can be wrong -- not base64, too long, wrong tag,
malformed payload, other version, offset past the end -- raises :class:`InvalidCursor`, which
the caller answers with ``-32602`` (Invalid params), as the spec asks.
:func:`list_result` is the whole of a paginated answer for a handler: the ``cursor``
param read, the page, ``nextCursor``, and -32602 raised as ``McpError``.

One key serves every list of a server: the list versions name their lists
(``"tools:3"``, ``"skills:1"``...), so a cursor of one list is stale for any other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mcp_sansio import ErrorCode

from ._errors_base import McpError

__all__ = ["InvalidCursor", "decode_cursor", "encode_cursor", "list_result", "paginate"]

T = TypeVar("T")

_LABEL = b"mcp-trio pagination cursor v1\x00"
_TAG_SIZE = 16
#: Cursors longer than this are rejected before any decoding (bounded work per request).
_MAX_CURSOR_LENGTH = 1024
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class InvalidCursor(ValueError):
    """The client sent a cursor we did not issue, or one for an older version of the list.

    Answer it with :attr:`error_code` (``-32602``, Invalid params).
    """

    #: The JSON-RPC error code to answer with.
    error_code: int = ErrorCode.INVALID_PARAMS


def _tag(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, _LABEL + payload, hashlib.sha256).digest()[:_TAG_SIZE]


def encode_cursor(offset: int, *, list_version: str, key: bytes) -> str:
    """The cursor that resumes a listing at ``offset``.

    Args:
        offset: the index of the first item of the next page (``>= 0``).
        list_version: identifies the current state of the list; see the module docstring.
        key: the HMAC key, secret to the server.

    Raises:
        ValueError: ``offset`` is negative (a bug in the caller).
    """
    if isinstance(offset, bool) or offset < 0:
        raise ValueError(f"offset must be a non-negative int, got {offset!r}")
    payload = json.dumps({"o": offset, "v": list_version}, separators=(",", ":")).encode()
    raw = payload + _tag(key, payload)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, *, list_version: str, key: bytes) -> int:
    """The offset a cursor made by :func:`encode_cursor` stands for.

    Args:
        cursor: the client's ``cursor`` parameter.
        list_version: the list's current version; a cursor issued for another is stale.
        key: the key the cursor was made with.

    Raises:
        InvalidCursor: ``cursor`` is garbage, was tampered with, or is stale.
    """
    # The alphabet and length checks leave nothing for the decoder to reject.
    if len(cursor) > _MAX_CURSOR_LENGTH or len(cursor) % 4 == 1 or not _B64URL.fullmatch(cursor):
        raise InvalidCursor("invalid cursor")
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    payload, tag = raw[:-_TAG_SIZE], raw[-_TAG_SIZE:]
    if len(raw) <= _TAG_SIZE or not hmac.compare_digest(_tag(key, payload), tag):
        raise InvalidCursor("invalid cursor")
    # From here on the payload is ours: a failure means a stale format, not an attack.
    try:
        data = json.loads(payload)
        offset, version = data["o"], data["v"]
    except (ValueError, TypeError, KeyError):
        raise InvalidCursor("invalid cursor") from None
    if version != list_version:
        raise InvalidCursor("stale cursor: the list has changed, start again without a cursor")
    if type(offset) is not int or offset < 0:
        raise InvalidCursor("invalid cursor")
    return offset


def paginate(
    items: Sequence[T], cursor: str | None, page_size: int, *, list_version: str, key: bytes
) -> tuple[list[T], str | None]:
    """One page of ``items`` and the cursor of the next page (``None`` on the last page).

    Args:
        items: the whole list, in a stable order.
        cursor: the client's ``cursor`` parameter, ``None`` for the first page.
        page_size: the number of items per page (``>= 1``); the server's choice.
        list_version: identifies the current state of ``items``.
        key: the HMAC key, secret to the server.

    Raises:
        InvalidCursor: the cursor is invalid or stale, or points past the end of ``items``.
        ValueError: ``page_size`` is less than 1 (a bug in the caller).
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size!r}")
    start = 0 if cursor is None else decode_cursor(cursor, list_version=list_version, key=key)
    if start > len(items):
        raise InvalidCursor("invalid cursor: past the end of the list")
    end = start + page_size
    page = list(items[start:end])
    if end >= len(items):
        return page, None
    return page, encode_cursor(end, list_version=list_version, key=key)


def list_result(
    params: Mapping[str, Any] | None,
    field: str,
    items: Sequence[T],
    page_size: int,
    *,
    list_version: str,
    key: bytes,
    render: Callable[[T], Any] | None = None,
) -> dict[str, Any]:
    """The result of a paginated list request: ``{field: [...]}`` with the page of
    ``items`` the request's ``cursor`` asks for, and ``nextCursor`` unless it is the
    last.

    Args:
        params: the request's params (``cursor``: absent for the first page).
        field: the result's member holding the page (``"tools"``, ``"skills"``...).
        items: the whole list, in a stable order.
        page_size: the number of items per page (``>= 1``).
        list_version: identifies the current state of ``items`` (and names the list).
        key: the HMAC key, secret to the server.
        render: turns one item of the page into its JSON (default: as it is).

    Raises:
        McpError: -32602 for a ``cursor`` that is not a string, or invalid or stale.
    """
    cursor = (params or {}).get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise McpError.from_code(
            ErrorCode.INVALID_PARAMS, "Invalid params: cursor must be a string"
        )
    try:
        page, next_cursor = paginate(items, cursor, page_size, list_version=list_version, key=key)
    except InvalidCursor as exc:
        raise McpError.from_code(exc.error_code, f"Invalid params: {exc}") from None
    result: dict[str, Any] = {field: page if render is None else [render(x) for x in page]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result

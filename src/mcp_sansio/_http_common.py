"""HTTP-shaped values and pure helpers shared by the Streamable HTTP server and client rules.

Nothing here keeps state. The values (:class:`HttpRequest`, :class:`HttpResponse`) are what
a binding builds from, or writes to, its HTTP library (h11, ASGI, aiohttp); header names are
compared case-insensitively (RFC 9110 §5.1), header values are case-sensitive.

The helpers implement the header-level rules of both Streamable HTTP revisions:

* media types in ``Accept`` / ``Content-Type`` (RFC 9110 §12.5.1, with ``q`` weights and
  wildcards);
* ``Origin`` and ``Host`` allow-lists against DNS rebinding
  (``2025-11-25/basic/transports#security-warning``);
* the ``=?base64?…?=`` value encoding of ``Mcp-Name`` and ``Mcp-Param-*``
  (``2026-07-28/basic/transports/streamable-http#value-encoding``);
* the ``x-mcp-header`` annotations of a tool's ``inputSchema``
  (``…/streamable-http#custom-headers-from-tool-parameters``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter, methodcaller
from typing import Any, Final, TypeAlias, final

import attrs

from ._errors import ErrorCode, ErrorData
from ._json import dumps
from ._jsonrpc import error_response
from ._tasks import NAME_KEYS as TASK_NAME_KEYS

__all__ = [
    "RETRY_SOON",
    "HeaderInput",
    "HeaderParam",
    "Headers",
    "HttpRequest",
    "HttpResponse",
    "decode_header_value",
    "encode_header_value",
    "extra_headers",
    "field_value",
    "header_value_matches",
    "media_type_allowed",
    "origin_allowed",
    "parse_header_params",
]

Headers: TypeAlias = tuple[tuple[bytes, bytes], ...]
"""Header fields as ``(name, value)`` byte pairs, names lower-cased, in wire order."""

HeaderInput: TypeAlias = (
    Iterable[tuple[bytes | str, bytes | str]]
    | Mapping[str, bytes | str]
    | Mapping[bytes, bytes | str]
)
"""What :class:`HttpRequest` / :class:`HttpResponse` accept as headers."""

MCP_SESSION_ID: Final = "mcp-session-id"
MCP_PROTOCOL_VERSION: Final = "mcp-protocol-version"
MCP_NAME_KEYS: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **TASK_NAME_KEYS,
}
"""The body field each method's ``Mcp-Name`` header mirrors (modern era)."""
MCP_METHOD: Final = "mcp-method"
MCP_NAME: Final = "mcp-name"
MCP_PARAM_PREFIX: Final = "mcp-param-"
LAST_EVENT_ID: Final = "last-event-id"

JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"

LOCAL_ORIGINS: Final = (
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
)
"""The browser origins allowed by default (a server's own pages on localhost, any port):
the HTTP server's ``allowed_origins`` and the WebSocket server's."""
LOCAL_HOSTS: Final = ("localhost:*", "127.0.0.1:*", "[::1]:*")
"""The ``Host`` values served by default (loopback names, any port): the HTTP server's
``allowed_hosts`` and the WebSocket server's."""

_ABSOLUTE_FORM: Final = re.compile(r"(https?)://([^/?#@]+)([/?][^#]*)?", re.IGNORECASE | re.DOTALL)
"""An ``http``/``https`` request target in absolute form (RFC 9112 §3.2.2): the scheme,
the authority, then the path and query. Not with userinfo (RFC 9110 §4.2.4: "treat its
presence as an error") nor an empty host (§4.2.1: "reject it as invalid"): such a
target, as any but these two forms, names no resource served here (404)."""

_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="
_TCHAR: Final = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SAFE_INT: Final = 2**53 - 1


def _as_bytes(value: bytes | str) -> bytes:
    return value.encode("latin-1") if isinstance(value, str) else bytes(value)


_LOWER: Final = bytes.lower
_STRIP: Final = bytes.strip
_OWS: Final = repeat(b" \t")
_PAIR: Final = frozenset({2})
_NAME: Final = itemgetter(0)
_VALUE: Final = itemgetter(1)
_LATIN1: Final = methodcaller("decode", "latin-1")


def _normalize_headers(value: HeaderInput) -> Headers:
    if value is _JSON_HEADERS:
        return value  # (every JSON answer's, normalized once: see json_response)
    if type(value) is list or type(value) is tuple:
        # The common case (an HTTP library's byte pairs) in C, no Python step per field:
        # anything but pairs fails the length check or the lookups, and the unbound
        # bytes methods refuse anything but bytes (a str, a bytearray: TypeError); all
        # of that takes the general path below.
        try:
            if set(map(len, value)) <= _PAIR:
                names = map(_LOWER, map(_NAME, value))
                values = map(_STRIP, map(_VALUE, value), _OWS)
                return tuple(zip(names, values, strict=True))
        except (TypeError, ValueError, LookupError):
            pass  # (not byte pairs: the general path converts, or raises as it always did)
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((_as_bytes(name).lower(), _as_bytes(val).strip(b" \t")) for name, val in items)


def _index(headers: Headers) -> dict[str, str]:
    """Header name → value (repeated fields joined with ``", "``), both latin-1 text."""
    # Built in C when no name repeats (the usual case): a request is asked for a few of
    # its fields, all of which are decoded here, and no Python step per field.
    names, values = map(_LATIN1, map(_NAME, headers)), map(_LATIN1, map(_VALUE, headers))
    index = dict(zip(names, values, strict=True))
    if len(index) == len(headers):
        return index
    index = {}
    for name, value in headers:
        key = name.decode("latin-1")
        text = value.decode("latin-1")
        index[key] = f"{index[key]}, {text}" if key in index else text
    return index


def _absolute_form(target: str) -> tuple[str, str, str] | None:
    """The scheme (lower case), authority and origin form (an empty path is ``/``,
    RFC 9110 §4.2.3) of an absolute-form ``target`` (see :data:`_ABSOLUTE_FORM`);
    ``None``: not one."""
    found = _ABSOLUTE_FORM.fullmatch(target)
    if found is None:
        return None
    scheme, authority, rest = found.groups()
    if rest is None:
        return scheme.lower(), authority, "/"
    return scheme.lower(), authority, rest if rest[0] == "/" else f"/{rest}"


def field_value(headers: Headers, name: bytes) -> str | None:
    """What ``header()`` returns for the lower-case ``name``, found by a scan: for a
    single lookup, cheaper than building the whole table."""
    found = [value.decode("latin-1") for key, value in headers if key == name]
    return ", ".join(found) if found else None


def _header(message: HttpRequest | HttpResponse, name: str) -> str | None:
    """What ``HttpRequest.header`` and ``HttpResponse.header`` return; the lookup
    table is built at the first call."""
    index = message._index
    if index is None:
        index = _index(message.headers)
        object.__setattr__(message, "_index", index)
    return index.get(name.lower())


@final
@attrs.frozen(kw_only=True)
class HttpRequest:
    """One HTTP request, as the binding received it (server) or must send it (client).

    ``headers`` accepts a sequence of ``(name, value)`` pairs or a mapping, as ``bytes`` or
    ``str`` (latin-1); it is stored lower-cased as :data:`Headers`.
    """

    method: str
    """The request method, e.g. ``"POST"`` (compared case-sensitively, as RFC 9110 says)."""
    target: str
    """The request target: path and optional query, e.g. ``"/mcp?x=1"``, or the
    absolute form (``"http://localhost:8000/mcp"``: see :attr:`path` and :attr:`host`)."""
    headers: Headers = attrs.field(default=(), converter=_normalize_headers)
    """The header fields, names lower-cased, in order; repeated names are kept."""
    body: bytes = b""
    """The whole request body (the binding bounds how much it reads)."""
    _index: dict[str, str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False, alias="_index"
    )
    """:meth:`header`'s lookup table, built at the first lookup (a request is asked
    for a dozen headers: one pass instead of a scan each)."""

    def with_body(self, body: bytes) -> HttpRequest:
        """This request with ``body``: what a binding that checks the head before it
        reads the body passes on. Unlike ``attrs.evolve`` it neither normalizes the
        headers again nor drops the :meth:`header` table the head checks built."""
        new = object.__new__(HttpRequest)
        set_ = object.__setattr__
        set_(new, "method", self.method)
        set_(new, "target", self.target)
        set_(new, "headers", self.headers)
        set_(new, "body", body)
        set_(new, "_index", self._index)
        return new

    @property
    def path(self) -> str:
        """The target without its query string, nor the scheme and authority of the
        absolute form (RFC 9112 §3.2.2: "a server MUST accept the absolute-form in
        requests"): ``"/mcp"`` for ``"/mcp?x=1"`` and ``"http://localhost/mcp"``."""
        target = self.target
        if not target.startswith("/"):
            absolute = _absolute_form(target)
            if absolute is not None:
                target = absolute[2]
        return target.partition("?")[0]

    @property
    def host(self) -> str | None:
        """The host (``name[:port]``) the request is for: the authority of an
        absolute-form target, else the ``Host`` header; ``None``: neither. RFC 9112
        §3.2.2: a server given the absolute form "MUST ignore the received Host header
        field (if any) and instead use the host information of the request-target"."""
        target = self.target
        if not target.startswith("/"):
            absolute = _absolute_form(target)
            if absolute is not None:
                return absolute[1]
        return _header(self, "host")

    @property
    def scheme(self) -> str | None:
        """The scheme of an absolute-form target, lower case (``"http"`` or
        ``"https"``); ``None`` for any other target (the origin form, ``"/mcp"``),
        which names none: the connection says which (a TLS one is ``https``)."""
        target = self.target
        if not target.startswith("/"):
            absolute = _absolute_form(target)
            if absolute is not None:
                return absolute[0]
        return None

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (any case), repeated fields joined with
        ``", "``, decoded as latin-1; ``None`` when absent."""
        return _header(self, name)


@final
@attrs.frozen(kw_only=True)
class HttpResponse:
    """A complete HTTP response to write now: status line, headers and the whole body."""

    status: int
    """The status code."""
    headers: Headers = attrs.field(default=(), converter=_normalize_headers)
    """The header fields (``content-type`` included when there is a body)."""
    body: bytes = b""
    """The body (empty for 202, 204 and most errors without a JSON-RPC body)."""
    _index: dict[str, str] | None = attrs.field(
        default=None, init=False, eq=False, repr=False, alias="_index"
    )
    """:meth:`header`'s lookup table, built at the first lookup."""

    def header(self, name: str) -> str | None:
        """The value of header ``name``, as :meth:`HttpRequest.header` gives it."""
        return _header(self, name)


_JSON_HEADERS: Final[Headers] = ((b"content-type", b"application/json"),)
RETRY_SOON: Final[Headers] = ((b"retry-after", b"1"),)
"""A 503 for a bound reached says when to try again (RFC 9110 Retry-After, seconds):
the sans-IO server's tables, the Trio binding's handler slots."""


def json_response(status: int, body: bytes, extra: Headers = ()) -> HttpResponse:
    """An ``application/json`` response."""
    # Without extra fields, the headers are the constant the converter knows to be
    # normalized: not lower-cased and stripped again for every answer.
    headers = (*_JSON_HEADERS, *extra) if extra else _JSON_HEADERS
    return HttpResponse(status=status, headers=headers, body=body)


def error_body(error: ErrorData, request_id: str | int | None = None) -> bytes:
    """A JSON-RPC error response as bytes (``id`` null when unknown)."""
    return dumps(error_response(request_id, error))


# ------------------------------------------------------------------------------- media types


@functools.lru_cache(maxsize=64)
def _media_ranges(value: str) -> tuple[tuple[str, str, float], ...]:
    # Cached (bounded): a client sends the same Accept with every request.
    out: list[tuple[str, str, float]] = []
    for part in value.split(","):
        fields = [f.strip() for f in part.split(";")]
        mtype, _, subtype = fields[0].lower().partition("/")
        if not mtype or not subtype:
            continue
        q = 1.0
        for param in fields[1:]:
            key, _, val = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(val.strip())
                except ValueError:
                    q = 0.0
        out.append((mtype, subtype, q))
    return tuple(out)


def media_type_allowed(accept: str | None, media_type: str) -> bool:
    """Whether an ``Accept`` value allows ``media_type`` (RFC 9110 §12.5.1).

    The most specific matching range decides (``text/event-stream`` over ``text/*`` over
    ``*/*``); ``q=0`` refuses. An absent header allows nothing here: MCP clients **MUST**
    send ``Accept`` (``2025-11-25/basic/transports#sending-messages-to-the-server``).
    """
    if accept is None:
        return False
    return _allowed(accept, media_type)


@functools.lru_cache(maxsize=64)
def _allowed(accept: str, media_type: str) -> bool:
    # Cached (bounded): every request asks the same two questions of the same Accept.
    mtype, _, subtype = media_type.partition("/")
    best: tuple[int, float] | None = None
    for rtype, rsub, q in _media_ranges(accept):
        if rtype == mtype and rsub == subtype:
            rank = 3
        elif rtype == mtype and rsub == "*":
            rank = 2
        elif rtype == "*" and rsub == "*":
            rank = 1
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, q)
    return best is not None and best[1] > 0


def is_json_content_type(value: str | None) -> bool:
    """Whether a ``Content-Type`` value is ``application/json`` (parameters allowed)."""
    if value is None:
        return False
    return value.split(";", 1)[0].strip().lower() == JSON_TYPE


# ---------------------------------------------------------------------------- origin and host


def _split_host_port(authority: str) -> tuple[str, str | None]:
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            return authority, None
        host, rest = authority[: end + 1], authority[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = authority.rpartition(":")
    if not sep:
        return authority, None
    return host, port


_split_entry: Final = functools.lru_cache(maxsize=64)(_split_host_port)
"""``_split_host_port`` of an allow-list entry: the configured entries, split once each
rather than for every request (bounded: a configuration names a few)."""


def host_allowed(host: str | None, allowed: Sequence[str]) -> bool:
    """Whether a ``Host`` value (``name[:port]``) is one of ``allowed``.

    An entry ``"name:*"`` allows ``name`` on any port (or none); ``"name"`` only without a
    port; ``"name:8000"`` exactly. Names compare case-insensitively.
    """
    if host is None:
        return False
    name, port = _split_host_port(host)
    for entry in allowed:
        ename, eport = _split_entry(entry)
        if ename != name:
            continue
        if eport in ("*", port):
            return True
    return False


HTTP_HOSTS_SETTING: Final = "HttpServerConfig.allowed_hosts"
"""Where Streamable HTTP's ``Host`` allow list is set (named by :func:`misdirected`)."""


def misdirected(host: str | None, setting: str) -> HttpResponse:
    """The ``421 Misdirected Request`` refusal of a ``Host`` not in an allow list
    (DNS-rebinding protection, :func:`host_allowed`), with the JSON-RPC error body of
    the other refusals.

    Its message says how to serve that name: in ``setting``, the allow list of the
    transport that refused it (:data:`HTTP_HOSTS_SETTING`; the WebSocket binding names
    its own), or with the command line's ``--allow-host``. ``host``: the request's
    ``Host`` (``None``: it had none)."""
    message = (
        f"Misdirected Request: Host {host!r} is not served here (allow it in {setting},"
        " or with mcp-trio run --allow-host NAME)"
    )
    return json_response(
        421, error_body(ErrorData(code=ErrorCode.INVALID_REQUEST, message=message))
    )


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    """Whether an ``Origin`` value (``scheme://host[:port]``) is one of ``allowed``.

    ``"*"`` allows every origin. An entry ``"http://localhost:*"`` allows that scheme and
    host on any port (or none). ``"null"`` (opaque origins) is allowed only if listed.
    """
    origin = origin.strip()
    for entry in allowed:
        if entry in ("*", origin):
            return True
        scheme, sep, authority = origin.lower().partition("://")
        escheme, esep, eauthority = entry.lower().partition("://")
        if not sep or not esep or scheme != escheme:
            continue
        if host_allowed(authority, [eauthority]):
            return True
    return False


# ---------------------------------------------------------------------- header value encoding


def _needs_base64(value: str) -> bool:
    if not value or value != value.strip(" \t"):
        return True
    if value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX):
        return True
    return any(not (0x20 <= ord(c) <= 0x7E) for c in value)


def encode_header_value(value: str | int | bool) -> str:
    """Encode a ``Mcp-Name`` / ``Mcp-Param-*`` value (``streamable-http#value-encoding``).

    Booleans become ``true`` / ``false``, integers their decimal form; a string that is not
    plain visible ASCII (non-ASCII, control characters, leading or trailing whitespace,
    empty, or itself looking like the sentinel) becomes ``=?base64?…?=`` of its UTF-8.

    Raises:
        ValueError: ``value`` is an integer outside the JavaScript-safe range.
    """
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) > _SAFE_INT:
            raise ValueError(f"integer {value} is outside the safe range for a header")
        return str(value)
    if _needs_base64(value):
        encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
        return f"{_B64_PREFIX}{encoded}{_B64_SUFFIX}"
    return value


def decode_header_value(raw: str) -> str | None:
    """Decode a ``Mcp-Name`` / ``Mcp-Param-*`` value as received.

    Returns:
        The decoded text, or ``None`` when the value has characters a header value may not
        carry (controls other than tab, non-ASCII) or a malformed Base64 sentinel.
    """
    if raw.startswith(_B64_PREFIX) and raw.endswith(_B64_SUFFIX) and len(raw) >= 11:
        inner = raw[len(_B64_PREFIX) : -len(_B64_SUFFIX)]
        try:
            return base64.b64decode(inner.encode("ascii"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError):
            return None
    if any(not (0x20 <= ord(c) <= 0x7E or c == "\t") for c in raw):
        return None
    return raw


def header_value_matches(decoded: str, body_value: Any) -> bool:
    """Whether a decoded header value mirrors ``body_value`` (``#server-validation``).

    Strings compare exactly, booleans as ``true`` / ``false``, numbers numerically (so
    ``42.0`` matches ``42``).
    """
    if isinstance(body_value, bool):
        return decoded == ("true" if body_value else "false")
    if isinstance(body_value, str):
        return decoded == body_value
    if isinstance(body_value, int | float):
        # Only a JSON number: Python's own spellings (``1_000``, ``+42``, `` 42``,
        # ``inf``) would match a body value that a gateway reading the header does not
        # see there (``#server-validation``: the two must not disagree).
        if _JSON_NUMBER.fullmatch(decoded) is None:
            return False
        try:
            number = float(decoded) if not decoded.lstrip("-").isdigit() else int(decoded)
            return math.isfinite(number) and number == body_value
        except (ValueError, OverflowError):  # (over 4,300 digits; an int past float range)
            return False
    return False


_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
"""A number as JSON spells it (RFC 8259 §6), ASCII digits only."""


# ------------------------------------------------------------------------------ x-mcp-header


@final
@attrs.frozen(kw_only=True)
class HeaderParam:
    """One tool parameter mirrored into an ``Mcp-Param-{name}`` header."""

    name: str
    """The ``x-mcp-header`` value: the header is ``Mcp-Param-{name}``."""
    path: tuple[str, ...]
    """The chain of ``properties`` keys from the arguments object to the value."""

    @property
    def header(self) -> str:
        """The header name, lower-cased."""
        return MCP_PARAM_PREFIX + self.name.lower()

    def value_in(self, arguments: Any) -> Any:
        """The value at :attr:`path` in ``arguments``, or ``None`` when absent."""
        node = arguments
        for key in self.path:
            if not isinstance(node, Mapping) or key not in node:
                return None
            node = node[key]
        return node


_PRIMITIVES: Final = frozenset({"string", "integer", "boolean"})
# Keywords whose values are instance data, not subschemas: never searched for annotations.
_VALUE_KEYWORDS: Final = frozenset(
    {"x-mcp-header", "const", "default", "enum", "examples", "required", "type"}
)
MAX_SCHEMA_DEPTH: Final = 64
"""Deepest JSON nesting (objects and arrays, the root schema being level 1) that
:func:`parse_header_params` searches for annotations.

A peer's ``inputSchema`` may nest as deep as the JSON parser allows (1024 levels), deeper
than Python's recursion limit. Rather than miss an annotation hidden deeper, a schema
whose subschemas nest deeper is invalid, and the client drops the tool. Values of the
keywords that hold instance data (``default``, ``enum``, ``const``, ...) are not searched,
so they may nest deeper. Real schemas stay far below 64 levels.
"""


_JSON_KINDS: Final = {
    list: "array",
    dict: "object",
    bool: "boolean",
    int: "number",
    float: "number",
}


def _shown(value: Any) -> str:
    """``value`` for an error message: a string quoted, anything else by its JSON type
    only (a peer's nested value could be huge, or too deep for ``repr``)."""
    if type(value) is str:
        return repr(value)
    return f"a JSON {_JSON_KINDS.get(type(value), 'null')}"


def _walk_annotations(
    schema: Any, path: tuple[str, ...], reachable: bool, out: list[HeaderParam], depth: int
) -> None:
    if not isinstance(schema, Mapping | list):
        return
    if depth > MAX_SCHEMA_DEPTH:
        where = ".".join(path) or "(root)"
        raise ValueError(
            f"the schema at {where} nests deeper than {MAX_SCHEMA_DEPTH} levels, "
            "so its x-mcp-header annotations cannot be checked"
        )
    if isinstance(schema, list):
        for item in schema:
            _walk_annotations(item, path, False, out, depth + 1)
        return
    if "x-mcp-header" in schema:
        name = schema["x-mcp-header"]
        where = ".".join(path) or "(root)"
        if not reachable or not path:
            raise ValueError(f"x-mcp-header at {where} is not statically reachable via properties")
        if type(name) is not str or not _TCHAR.fullmatch(name):
            raise ValueError(
                f"x-mcp-header {_shown(name)} at {where} is not an HTTP field-name token"
            )
        kind = schema.get("type")
        # ``type`` may legally be an array of types (``["string", "null"]``): not one of
        # the primitive types the spec allows, so invalid like any other type.
        if type(kind) is not str or kind not in _PRIMITIVES:
            raise ValueError(
                f"x-mcp-header {name!r} at {where} is on a parameter whose type is "
                f"{_shown(kind)} (only string, integer and boolean are allowed)"
            )
        out.append(HeaderParam(name=name, path=path))
    for key, sub in schema.items():
        if key == "properties" and isinstance(sub, Mapping):
            for prop, prop_schema in sub.items():
                # ``properties`` is itself one level, its entries the next.
                _walk_annotations(prop_schema, (*path, str(prop)), reachable, out, depth + 2)
        elif key not in _VALUE_KEYWORDS and isinstance(sub, Mapping | list):
            _walk_annotations(sub, path, False, out, depth + 1)


def parse_header_params(input_schema: Any) -> tuple[HeaderParam, ...]:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema``, validated.

    Implements the constraints of ``streamable-http#schema-extension``: a non-empty token,
    case-insensitively unique, only on ``string`` / ``integer`` / ``boolean`` properties,
    reachable from the root through ``properties`` keys only (never through ``items``,
    ``oneOf``, ``$ref``, …). Subschemas nested deeper than :data:`MAX_SCHEMA_DEPTH`
    levels make the schema invalid too (they could hide an annotation).

    Returns:
        The annotated parameters, in schema order (empty when there are none).

    Raises:
        ValueError: the annotations make the tool definition invalid; the message says why
            (a client **MUST** then drop the tool from its ``tools/list`` result).
    """
    out: list[HeaderParam] = []
    _walk_annotations(input_schema, (), True, out, 1)
    seen: set[str] = set()
    for param in out:
        folded = param.name.lower()
        if folded in seen:
            raise ValueError(f"x-mcp-header {param.name!r} is not unique (case-insensitively)")
        seen.add(folded)
    return tuple(out)


# RFC 9110 field-value: visible characters (obs-text too), single spaces or tabs between
# them, none at either end (h11 refuses those); no CR, LF, NUL or other controls.
_FIELD_VALUE: Final = re.compile(r"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")


CLIENT_RESERVED_HEADERS: Final = (
    *("host", "content-length", "transfer-encoding", "connection", "upgrade", "te"),
    *("trailer", "keep-alive", "content-type", "accept", LAST_EVENT_ID),
    *(MCP_SESSION_ID, MCP_PROTOCOL_VERSION, MCP_METHOD, MCP_NAME, MCP_PARAM_PREFIX + "*"),
)
"""Headers a client's HTTP transport writes itself (a ``*``: a prefix), never a user's
extra ones (:func:`extra_headers`' ``reserved``): every binding's client refuses them."""


def extra_headers(
    headers: Mapping[str, str] | None, *, reserved: Iterable[str], transport: str
) -> list[tuple[bytes, bytes]]:
    """A user's extra request headers (``Authorization``, ...) as wire pairs, checked
    up front: a malformed one would fail every request, and one the transport writes
    itself (``reserved``, lower case; a name ending in ``*`` is a prefix) would be sent
    twice.

    Raises:
        ValueError: a name that is not an HTTP token, or given twice (in any case); a
            value with a line break or another control character, a space at either
            end, or not Latin-1; or a reserved name.
    """
    out: list[tuple[bytes, bytes]] = []
    names = tuple(reserved)
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not _TCHAR.fullmatch(name):
            raise ValueError(f"header name {name!r} is not an HTTP token")
        if not isinstance(value, str) or not _FIELD_VALUE.fullmatch(value):
            raise ValueError(
                f"header {name!r}: its value must be Latin-1 text on one line, with no"
                " space at either end"
            )
        lower = name.lower()
        if any(lower.encode("latin-1") == seen for seen, _ in out):
            raise ValueError(f"header {name!r} is given twice (names ignore case)")
        if any(lower.startswith(r[:-1]) if r.endswith("*") else lower == r for r in names):
            raise ValueError(f"header {name!r} is written by the {transport} transport itself")
        out.append((lower.encode("latin-1"), value.encode("latin-1")))
    return out

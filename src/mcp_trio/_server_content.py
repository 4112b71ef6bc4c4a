"""What server handlers may return, and how it becomes MCP JSON.

Small value classes for the things that need more than a plain Python value (an image
is bytes *and* a MIME type), and the pure functions that turn a handler's return value
into ``CallToolResult``, ``GetPromptResult`` messages, ``ReadResourceResult`` contents
and ``CompleteResult`` objects. Nothing here awaits.

Content is built in the newest revision's terms, then :func:`adapt_tool_result` and
:func:`adapt_prompt_result` rewrite it for the session's protocol version: what an older
revision lacks (``AudioContent`` before 2025-03-26, ``ResourceLink`` and
``structuredContent`` before 2025-06-18) becomes the nearest thing it has. A field it
lacks (``_meta`` and ``annotations.lastModified`` before 2025-06-18, a link's ``icons``
before 2025-11-25, ``structuredContent`` itself) the core's ``send_result`` leaves out
(``mcp_sansio._revision_fields``), so that a handler written once answers every client
with a result its schema accepts.

Every content value may also be given as an ``mcp_sansio.types`` instance
(``TextContent``, ``ImageContent``, ``ResourceLink``...) or as the raw JSON object
(``{"type": "text", "text": "..."}``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, Literal, final

import attrs

from mcp_sansio import unstructure
from mcp_sansio._versions import REVISIONS

from ._jsonschema import to_jsonable
from ._typed import loaded_models
from ._uritemplate import URI_HINT, uri_problem

__all__ = [
    "Audio",
    "Completion",
    "EmbeddedResource",
    "Image",
    "Message",
    "ResourceLink",
    "ToolError",
    "ToolResult",
]

CONTENT_TYPES = frozenset().union(*(r.content_types for r in REVISIONS.values()))
"""The ``type`` of every content block (``ContentBlock`` in the schema)."""

_MISSING_CONTENT_TYPES: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        version: CONTENT_TYPES - revision.content_types
        for version, revision in REVISIONS.items()
        if CONTENT_TYPES - revision.content_types
    }
)
"""For each protocol version, the content block types its schema does not have
(``Revision.content_types``: audio came in 2025-03-26, resource links in 2025-06-18)."""

UNSTRUCTURED_VERSIONS = frozenset(v for v, r in REVISIONS.items() if not r.structured_output)
"""The protocol versions without structured tool output (``Revision.structured_output``):
``structuredContent`` and ``outputSchema`` came in 2025-06-18."""

_ADAPTED_VERSIONS = frozenset(_MISSING_CONTENT_TYPES) | UNSTRUCTURED_VERSIONS
"""The protocol versions whose results :func:`adapt_tool_result` may change (the others
are sent as built)."""

ROLES = ("user", "assistant")
"""The roles of prompt and sampling messages (``Role`` in the schema)."""

MAX_COMPLETION_VALUES = 100
"""``completion.values`` holds at most this many items (server/utilities/completion)."""

# Typed values are recognised without importing mcp_sansio.types (see _typed.py).
_TYPED_CONTENT = ("TextContent", "ImageContent", "AudioContent", "EmbeddedResource", "ResourceLink")
_TYPED_RESOURCE_CONTENTS = ("TextResourceContents", "BlobResourceContents")

# Each ContentBlock type: its required fields with their JSON type, and every field it
# may have, over every revision's schema (what _raw_block accepts as a raw block).
_ANNOTATED = frozenset({"type", "annotations", "_meta"})


def _block_shape(
    required: tuple[tuple[str, type], ...], optional: frozenset[str] = frozenset()
) -> tuple[tuple[tuple[str, type], ...], frozenset[str]]:
    return required, _ANNOTATED | optional | {key for key, _ in required}


_RAW_BLOCKS: Mapping[str, tuple[tuple[tuple[str, type], ...], frozenset[str]]] = MappingProxyType(
    {
        "text": _block_shape((("text", str),)),
        "image": _block_shape((("data", str), ("mimeType", str))),
        "audio": _block_shape((("data", str), ("mimeType", str))),
        "resource": _block_shape((("resource", Mapping),)),
        "resource_link": _block_shape(
            (("uri", str), ("name", str)),
            frozenset({"title", "description", "mimeType", "size", "icons"}),
        ),
    }
)
assert set(_RAW_BLOCKS) == CONTENT_TYPES

# RFC 6838 section 4.2 restricted-name (type and subtype), and RFC 9110 section 5.6.6
# parameters (token "=" token / quoted-string, ASCII only: the value is JSON text).
_RESTRICTED_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e]|\\[\t \x21-\x7e])*"'
_MIME_TYPE = re.compile(
    rf"{_RESTRICTED_NAME}/{_RESTRICTED_NAME}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*"
)


def check_mime_type(value: object, what: str = "MIME type") -> None:
    """Refuse what is not a valid MIME type: ``type/subtype`` of RFC 6838 restricted
    names, optionally followed by parameters (``text/html; charset=utf-8``,
    ``text/html;profile=mcp-app``). Content and resources a server describes carry one
    (``server/prompts.mdx``: image and audio data "MUST ... include a valid MIME type").

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: it is not a MIME type (the message names it and ``what``).
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__}")
    if _MIME_TYPE.fullmatch(value) is None:
        raise ValueError(
            f"{what} {value!r} is not a valid MIME type ('type/subtype', RFC 6838, "
            "optionally with '; name=value' parameters)"
        )


# basic/index.mdx, "_meta": a key is an optional prefix -- labels separated by dots,
# each starting with a letter and ending with a letter or digit, hyphens between; then
# "/" -- and a name, empty or beginning and ending with an alphanumeric, "-", "_" and
# "." between. A prefix whose second label is "modelcontextprotocol" or "mcp" is
# reserved for MCP use.
_META_LABEL = re.compile(r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_META_NAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?")
_RESERVED_LABELS = frozenset({"modelcontextprotocol", "mcp"})


def _malformed_key_problem(key: object) -> str | None:
    """Why ``key`` is not of the form of a ``_meta`` key, or ``None``."""
    if not isinstance(key, str):
        return f"must be a string, not {type(key).__name__}"
    prefix, slash, name = key.rpartition("/")
    if slash and not all(_META_LABEL.fullmatch(label) for label in prefix.split(".")):
        return (
            "has a malformed prefix: labels separated by dots, each starting with a "
            "letter and ending with a letter or digit (letters, digits and '-' between), "
            "then '/' (such as 'com.example/')"
        )
    if not _META_NAME.fullmatch(name):
        return (
            "has a malformed name: it must begin and end with a letter or digit "
            "(letters, digits, '-', '_' and '.' between)"
        )
    return None


def _reserved_key(key: str) -> bool:
    """Whether ``key``, a well-formed ``_meta`` key, is in MCP's reserved namespace."""
    prefix, slash, _ = key.rpartition("/")
    labels = prefix.split(".", 2) if slash else ()
    return len(labels) > 1 and labels[1].lower() in _RESERVED_LABELS


_RESERVED_KEY_PROBLEM = (
    "has a prefix reserved for MCP (its second label is 'modelcontextprotocol' "
    "or 'mcp'); use a prefix of your own, such as 'com.example/'"
)


def meta_key_problem(key: object) -> str | None:
    """Why ``key`` may not be a key of a ``_meta`` object we send, or ``None``: it is
    malformed, or in MCP's reserved namespace (``io.modelcontextprotocol/...``,
    ``dev.mcp/...``: the spec's and its official extensions' keys, not a server
    author's)."""
    problem = _malformed_key_problem(key)
    if problem is None and _reserved_key(str(key)):
        return _RESERVED_KEY_PROBLEM
    return problem


def meta_keys_problem(meta: Mapping[Any, Any]) -> str | None:
    """Why ``meta``, a ``_meta`` object we send, may not be sent, or ``None``: its
    first key that :func:`meta_key_problem` refuses, named, with why."""
    for key in meta:
        problem = meta_key_problem(key)
        if problem is not None:
            return f"_meta key {key!r} {problem} (basic/index.mdx#_meta)"
    return None


def sent_meta_problem(result: dict[str, Any]) -> str | None:
    """Why a request built from what a handler gave (the ``messages`` of a sampling
    request) may not be sent, for a ``_meta`` key that breaks the rule registration
    holds a definition's ``meta`` to (:func:`meta_key_problem`: malformed, or MCP's
    reserved prefix), or ``None``. Looks where :func:`fit_sent_meta` does, which fits a
    result instead (dropping a reserved key); here the first bad key is named, with its
    place."""
    try:
        fit_sent_meta(result, strict=True)
    except UnsendableMeta as exc:
        return str(exc)
    return None


class UnsendableMeta(ValueError):
    """A ``_meta`` of a handler's result that no fitting mends (one with a malformed
    key, or that is no object): ``str()`` names its place and why."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
        self.place = ""
        """Where, within the object that raised it (each holder prefixes its own)."""

    def within(self, place: str) -> UnsendableMeta:
        """This, its place prefixed with ``place``."""
        self.place = place + self.place
        return self

    def __str__(self) -> str:
        return f"{self.place}: {self.why}"


def _fit_meta(meta: Any, dropped: list[str], strict: bool) -> Any:
    """``meta`` (a ``_meta`` value) without its keys of MCP's reserved prefix, which
    are added to ``dropped``; ``meta`` itself when it has none, ``None`` when none is
    left.

    Raises:
        UnsendableMeta: ``meta`` is no object, or has a malformed key (or, ``strict``,
            a reserved one).
    """
    if not isinstance(meta, Mapping):
        raise UnsendableMeta(f"_meta must be an object, not {type(meta).__name__}")
    reserved: list[str] | None = None
    for key in meta:
        problem = _malformed_key_problem(key)
        if problem is None and _reserved_key(key):
            if not strict:
                if reserved is None:
                    reserved = []
                reserved.append(key)
                continue
            problem = _RESERVED_KEY_PROBLEM
        if problem is not None:
            raise UnsendableMeta(f"_meta key {key!r} {problem} (basic/index.mdx#_meta)")
    if reserved is None:
        return meta
    dropped += reserved
    kept = {key: value for key, value in meta.items() if key not in reserved}
    return kept or None


def _fit_held(holder: Any, dropped: list[str], strict: bool) -> Any:
    """``holder`` (a result, content block, message or resource contents) with its
    ``_meta``, and an embedded resource's, fitted (:func:`_fit_meta`): ``holder``
    itself when nothing is dropped, else a copy (what a handler returned is left as
    it is).

    Raises:
        UnsendableMeta: as :func:`_fit_meta` (its place relative to ``holder``).
    """
    if not isinstance(holder, Mapping):
        return holder
    out = holder
    meta = holder.get("_meta")
    if meta is not None:
        fitted = _fit_meta(meta, dropped, strict)
        if fitted is not meta:
            out = {key: value for key, value in holder.items() if key != "_meta"}
            if fitted is not None:
                out["_meta"] = fitted
    resource = holder.get("resource")
    if isinstance(resource, Mapping) and resource.get("_meta") is not None:
        try:
            fitted = _fit_held(resource, dropped, strict)
        except UnsendableMeta as exc:
            raise exc.within(".resource") from None
        if fitted is not resource:
            out = {**out, "resource": fitted}
    return out


def _fit_message(message: Any, dropped: list[str], strict: bool) -> Any:
    """``message`` (a prompt or sampling message) fitted as :func:`_fit_held` fits a
    holder, and its content too (one block; in sampling, a list of them too).

    Raises:
        UnsendableMeta: as :func:`_fit_meta` (its place relative to ``message``).
    """
    out = _fit_held(message, dropped, strict)
    if not isinstance(message, Mapping):
        return out
    content = message.get("content")
    try:
        if isinstance(content, list):
            fitted = _fit_each(content, _fit_held, dropped, strict)
        else:
            fitted = _fit_held(content, dropped, strict)
    except UnsendableMeta as exc:
        raise exc.within(".content") from None
    return out if fitted is content else {**out, "content": fitted}


def _fit_each(
    items: list[Any],
    fit: Callable[[Any, list[str], bool], Any],
    dropped: list[str],
    strict: bool,
) -> list[Any]:
    """``items`` with each fitted by ``fit`` (:func:`_fit_held` or :func:`_fit_message`);
    ``items`` itself when nothing is dropped, else a new list.

    Raises:
        UnsendableMeta: as :func:`_fit_meta` (its place from ``[index]``).
    """
    out = items
    for index, item in enumerate(items):
        try:
            fitted = fit(item, dropped, strict)
        except UnsendableMeta as exc:
            raise exc.within(f"[{index}]") from None
        if fitted is not item:
            if out is items:
                out = list(items)
            out[index] = fitted
    return out


def fit_sent_meta(
    result: dict[str, Any], *, strict: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """A result built from what a handler returned, fit to be sent: the keys of its
    ``_meta`` objects (its own, each content block's and an embedded resource's
    contents', each prompt message's and its content's, each resource contents') of a
    prefix "reserved for MCP use" (basic/index.mdx#_meta) dropped.

    Such keys are the protocol's and its extensions' (the core sets some itself, such
    as ``io.modelcontextprotocol/serverInfo``); a handler that relays what another MCP
    server answered passes them on, which is no reason to refuse its result. With
    ``strict`` such a key is refused instead (:func:`sent_meta_problem`: a request
    built from a handler's values).

    Returns:
        The result (itself when nothing is dropped, else a copy along the changed
        places: what the handler returned is not modified) and the keys dropped.

    Raises:
        UnsendableMeta: a ``_meta`` with a malformed key, or that is no object (the
            message names the first, in document order, its place and why).
    """
    dropped: list[str] = []
    try:
        out = _fit_held(result, dropped, strict)
    except UnsendableMeta as exc:
        raise exc.within("result") from None
    for field in ("content", "contents", "messages"):
        items = result.get(field)
        if not items or not isinstance(items, list):
            continue
        fit = _fit_message if field == "messages" else _fit_held
        try:
            fitted = _fit_each(items, fit, dropped, strict)
        except UnsendableMeta as exc:
            raise exc.within(field) from None
        if fitted is not items:
            out = {**out, field: fitted}
    return out, dropped


def _valid_uri(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: a resource URI is an RFC 3986 URI (prompts.mdx: embedded
    resources MUST include "a valid resource URI")."""
    if not isinstance(value, str):
        raise TypeError(
            f"{type(instance).__name__}.uri must be a string, not {type(value).__name__}"
        )
    problem = uri_problem(value)
    if problem is not None:
        raise ValueError(
            f"{type(instance).__name__}.uri {value!r} is not an RFC 3986 URI: {problem} {URI_HINT}"
        )


def _valid_mime_type(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: :func:`check_mime_type` (``None`` passes: not given)."""
    if value is not None:
        check_mime_type(value, f"{type(instance).__name__}.{attribute.name}")


# Magic numbers of the image formats clients render; enough to label bare ``bytes``.
_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class ToolError(Exception):
    """Raise from a tool to fail it with a message the model sees.

    The call is answered with a tool result ``{"isError": true, "content": [{"type":
    "text", "text": message}]}`` (a *tool execution error*, which the model can act
    on), not with a JSON-RPC error. Any other exception a tool raises is logged and
    answered with a generic message, so that no internal detail leaks.

    Args:
        message: what went wrong, written for the model.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _plain(value: Any) -> Any:
    """An ``mcp_sansio.types`` value (or a mapping) as plain JSON data."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    if attrs.has(type(value)):
        return unstructure(value)
    raise TypeError(f"expected a mapping or an mcp_sansio.types value, not {type(value)!r}")


# ------------------------------------------------------------------ icons and annotations
#
# Icons and annotations are copied to the wire as the author gave them, so they are
# checked once, when registered or when a content helper is built (never per call),
# against the schema's ``Icon``, ``ToolAnnotations`` and ``Annotations`` (2025-11-25,
# 2026-07-28): one bad value would otherwise break the schema of every ``tools/list``
# page that holds it, and a strict client (ours) refuses the whole list. Members the
# schema does not name are kept: it allows them.

_THEMES = ("light", "dark")
_TOOL_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _strings(value: object) -> bool:
    """Whether ``value`` is a JSON array (a list or tuple) of strings."""
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


def _array(value: Any, data: dict[str, Any], attribute: str, member: str) -> Any:
    """``data[member]``, or the string a typed ``value`` holds in ``attribute`` where
    the schema wants an array of strings (unstructured, ``"48x48"`` would become
    ``["4", "8", ...]``, which passes as an array)."""
    typed = None if isinstance(value, Mapping) else getattr(value, attribute, None)
    return typed if isinstance(typed, str) else data[member]


def plain_icons(icons: Any, what: str) -> list[dict[str, Any]] | None:
    """``icons`` (``Icon`` values or mappings) as plain JSON, each checked to be an
    ``Icon`` of the schema: ``src`` an RFC 3986 URI (``format: uri``), ``mimeType`` a
    MIME type, ``sizes`` an array of strings, ``theme`` ``"light"`` or ``"dark"``.

    Args:
        icons: what the author gave (``None``: none).
        what: who they describe, for messages (``"tool 'add'"``).

    Raises:
        TypeError: a member has the wrong JSON type (the message names it and ``what``).
        ValueError: a member has a value the schema does not allow.
    """
    if icons is None:
        return None
    if isinstance(icons, str | bytes | Mapping) or not isinstance(icons, Iterable):
        raise TypeError(f"{what}: icons must be a list of Icon values or mappings")
    out: list[dict[str, Any]] = []
    for at, icon in enumerate(icons):
        where = f"{what}: icons[{at}]"
        try:
            data: dict[str, Any] = _plain(icon)
        except TypeError:
            raise TypeError(f"{where} must be an Icon or a mapping, not {_kind(icon)}") from None
        src = data.get("src")
        if not isinstance(src, str):
            raise TypeError(f"{where}.src must be a string (a URI), not {_kind(src)}")
        problem = uri_problem(src)
        if problem is not None:
            raise ValueError(f"{where}.src {src!r} is not an RFC 3986 URI: {problem} {URI_HINT}")
        if "mimeType" in data:
            check_mime_type(data["mimeType"], f"{where}.mimeType")
        if "sizes" in data:
            sizes = _array(icon, data, "sizes", "sizes")
            if not _strings(sizes):
                raise TypeError(
                    f"{where}.sizes must be a list of strings such as ['48x48'] or "
                    f"['any'], not {sizes!r}"
                )
            data["sizes"] = list(sizes)
        if "theme" in data and data["theme"] not in _THEMES:
            raise ValueError(f"{where}.theme must be 'light' or 'dark', not {data['theme']!r}")
        out.append(data)
    return out


def plain_annotations(annotations: Any, what: str) -> dict[str, Any] | None:
    """``annotations`` (an ``Annotations`` value or a mapping) as plain JSON, checked to
    be the schema's ``Annotations``: ``audience`` an array of ``"user"`` and
    ``"assistant"``, ``priority`` a number from 0 to 1, ``lastModified`` a string.

    Raises:
        TypeError: a member has the wrong JSON type (the message names it and ``what``).
        ValueError: a member has a value the schema does not allow.
    """
    if annotations is None:
        return None
    data = _plain_object(annotations, what, "Annotations")
    if "audience" in data:
        audience = _array(annotations, data, "audience", "audience")
        if not _strings(audience):
            raise TypeError(
                f"{what}: annotations.audience must be a list of roles ('user', "
                f"'assistant'), not {audience!r}"
            )
        for role in audience:
            if role not in ROLES:
                raise ValueError(
                    f"{what}: annotations.audience holds {role!r}: a role is 'user' or 'assistant'"
                )
        data["audience"] = list(audience)
    if "priority" in data:
        priority = data["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int | float):
            raise TypeError(
                f"{what}: annotations.priority must be a number from 0 to 1, not {_kind(priority)}"
            )
        if not 0 <= priority <= 1:  # (NaN too)
            raise ValueError(
                f"{what}: annotations.priority must be from 0 (least important) to 1 "
                f"(most), not {priority!r}"
            )
    if "lastModified" in data and not isinstance(data["lastModified"], str):
        raise TypeError(
            f"{what}: annotations.lastModified must be an ISO 8601 string, not "
            f"{_kind(data['lastModified'])}"
        )
    return data


def plain_tool_annotations(annotations: Any, what: str) -> dict[str, Any] | None:
    """``annotations`` (a ``ToolAnnotations`` value or a mapping) as plain JSON, checked
    to be the schema's ``ToolAnnotations``: the hints are booleans, ``title`` a string.

    Raises:
        TypeError: a member has the wrong JSON type (the message names it and ``what``).
    """
    if annotations is None:
        return None
    data = _plain_object(annotations, what, "ToolAnnotations")
    for hint in _TOOL_HINTS:
        if hint in data and not isinstance(data[hint], bool):
            raise TypeError(f"{what}: annotations.{hint} must be True or False, not {data[hint]!r}")
    if "title" in data and not isinstance(data["title"], str):
        raise TypeError(f"{what}: annotations.title must be a string, not {_kind(data['title'])}")
    return data


def _plain_object(value: Any, what: str, name: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = _plain(value)
    except TypeError:
        raise TypeError(
            f"{what}: annotations must be a mapping or an mcp_sansio.types.{name}, "
            f"not {_kind(value)}"
        ) from None
    return data


def _valid_annotations(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """An attrs validator: :func:`plain_annotations` (``None`` passes: not given)."""
    plain_annotations(value, type(instance).__name__)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _with_annotations(block: dict[str, Any], annotations: Any) -> dict[str, Any]:
    if annotations is not None:
        block["annotations"] = _plain(annotations)
    return block


@final
@attrs.frozen
class Image:
    """An image for a tool result or a prompt message (``ImageContent``).

    >>> Image(png_bytes, "image/png")
    """

    __mcp_content__: ClassVar[bool] = True

    data: bytes
    """The raw image bytes (sent base64-encoded)."""
    mime_type: str = attrs.field(validator=_valid_mime_type)
    """Its MIME type, e.g. ``"image/png"`` (``ValueError`` if it is not one)."""
    annotations: Any = attrs.field(default=None, kw_only=True, validator=_valid_annotations)
    """Optional ``Annotations`` (audience, priority...), a mapping or a typed value."""

    def to_json(self) -> dict[str, Any]:
        """The ``ImageContent`` object."""
        block = {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}
        return _with_annotations(block, self.annotations)


@final
@attrs.frozen
class Audio:
    """Audio for a tool result or a prompt message (``AudioContent``)."""

    __mcp_content__: ClassVar[bool] = True

    data: bytes
    """The raw audio bytes (sent base64-encoded)."""
    mime_type: str = attrs.field(validator=_valid_mime_type)
    """Its MIME type, e.g. ``"audio/wav"`` (``ValueError`` if it is not one)."""
    annotations: Any = attrs.field(default=None, kw_only=True, validator=_valid_annotations)
    """Optional ``Annotations``, a mapping or a typed value."""

    def to_json(self) -> dict[str, Any]:
        """The ``AudioContent`` object."""
        block = {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}
        return _with_annotations(block, self.annotations)


@final
@attrs.frozen
class EmbeddedResource:
    """A resource's contents embedded in a tool result or a prompt message.

    ``data`` as ``str`` is sent as ``text``, as ``bytes`` base64-encoded as ``blob``.
    """

    __mcp_content__: ClassVar[bool] = True

    uri: str = attrs.field(validator=_valid_uri)
    """The resource's URI: an RFC 3986 URI, ASCII only (``ValueError`` otherwise: IRIs,
    and a raw ``[`` or ``]`` outside an IPv6 host, are refused; percent-encode them)."""
    data: str | bytes
    """Its contents."""
    mime_type: str | None = attrs.field(default=None, validator=_valid_mime_type)
    """Its MIME type, if known (``ValueError`` if it is not one); default ``text/plain``
    for text, ``application/octet-stream`` for bytes."""
    annotations: Any = attrs.field(default=None, kw_only=True, validator=_valid_annotations)
    """Optional ``Annotations``, a mapping or a typed value."""

    def to_json(self) -> dict[str, Any]:
        """The ``EmbeddedResource`` object."""
        return _with_annotations(
            {
                "type": "resource",
                "resource": resource_contents(self.uri, self.data, self.mime_type),
            },
            self.annotations,
        )


@final
@attrs.frozen
class ResourceLink:
    """A link to a resource the client may read or subscribe to (``ResourceLink``)."""

    __mcp_content__: ClassVar[bool] = True

    uri: str = attrs.field(validator=_valid_uri)
    """The resource's URI: an RFC 3986 URI, ASCII only (``ValueError`` otherwise: IRIs,
    and a raw ``[`` or ``]`` outside an IPv6 host, are refused; percent-encode them)."""
    name: str
    """Its name (programmatic identifier)."""
    title: str | None = attrs.field(default=None, kw_only=True)
    """A display name."""
    description: str | None = attrs.field(default=None, kw_only=True)
    """What it is."""
    mime_type: str | None = attrs.field(default=None, kw_only=True, validator=_valid_mime_type)
    """Its MIME type, if known (``ValueError`` if it is not one)."""
    annotations: Any = attrs.field(default=None, kw_only=True, validator=_valid_annotations)
    """Optional ``Annotations``, a mapping or a typed value."""

    def to_json(self) -> dict[str, Any]:
        """The ``ResourceLink`` object."""
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
        ):
            if value is not None:
                block[key] = value
        return _with_annotations(block, self.annotations)


_HELPERS = (Image, Audio, EmbeddedResource, ResourceLink)


@final
@attrs.frozen
class ToolResult:
    """A tool result spelled out, when the return-value conventions are not enough.

    >>> ToolResult(["partial output", Image(png, "image/png")], is_error=True)
    """

    __mcp_content__: ClassVar[bool] = True
    __mcp_result__: ClassVar[bool] = True  # a whole result: ``Point | ToolResult`` is data

    content: Any = ()
    """Content blocks: anything a tool may return as content (a string, an
    :class:`Image`, a list of them, typed or raw content blocks). Left empty next to
    ``structured_content``, the one block sent is that content's JSON text."""
    structured_content: Any = attrs.field(default=None, kw_only=True)
    """The ``structuredContent`` (JSON-able), if any. A tool with an output schema must
    give one that fits it (unless ``is_error``): else the call fails as a bug."""
    is_error: bool = attrs.field(default=False, kw_only=True)
    """Whether the tool failed."""
    meta: Mapping[str, Any] | None = attrs.field(default=None, kw_only=True)
    """The result's ``_meta``."""

    def to_json(self) -> dict[str, Any]:
        """The ``CallToolResult`` object."""
        blocks = content_blocks(self.content)
        if blocks is None:
            raise TypeError(f"ToolResult.content: {type(self.content).__name__} is not content")
        result: dict[str, Any] = {"content": blocks}
        if self.structured_content is not None:
            structured = result["structuredContent"] = to_jsonable(self.structured_content)
            if not blocks:
                # tools.mdx: "a tool that returns structured content SHOULD also return
                # the serialized JSON in a TextContent block" (as the other paths do).
                blocks.append({"type": "text", "text": jsonable_text(structured)})
        if self.is_error:
            result["isError"] = True
        if self.meta is not None:
            result["_meta"] = dict(self.meta)
        return result


@final
@attrs.frozen
class Message:
    """One message of a prompt (``PromptMessage``).

    ``content`` is a string (text) or one content value (:class:`Image`, a typed or raw
    content block...).
    """

    role: Literal["user", "assistant"] = attrs.field(validator=attrs.validators.in_(ROLES))
    """Who speaks: ``"user"`` or ``"assistant"`` (MCP has no system role)."""
    content: Any
    """What is said."""

    @classmethod
    def user(cls, content: Any) -> Message:
        """A message from the user."""
        return cls("user", content)

    @classmethod
    def assistant(cls, content: Any) -> Message:
        """A message from the assistant."""
        return cls("assistant", content)

    def to_json(self) -> dict[str, Any]:
        """The ``PromptMessage`` object."""
        blocks = content_blocks(self.content)
        if blocks is None or len(blocks) != 1:
            raise TypeError("Message.content must be exactly one content value")
        return {"role": self.role, "content": blocks[0]}


@final
@attrs.frozen
class Completion:
    """Completion suggestions, when a plain list of strings is not enough.

    A completion handler may return any iterable of strings instead: the first 100
    are sent, with ``total`` and ``hasMore`` filled in.
    """

    values: Sequence[str]
    """Suggestions, best first (at most 100 are sent)."""
    total: int | None = attrs.field(default=None, kw_only=True)
    """How many suggestions exist in all, if known."""
    has_more: bool | None = attrs.field(default=None, kw_only=True)
    """Whether there are more than those sent. Always true when ``values`` holds more
    than 100 (they are cut, so there are more: an explicit ``False`` is overruled)."""

    def to_json(self) -> dict[str, Any]:
        """The ``completion`` object of a ``CompleteResult``."""
        values = [str(v) for v in self.values[:MAX_COMPLETION_VALUES]]
        out: dict[str, Any] = {"values": values}
        if self.total is not None:
            out["total"] = self.total
        # completion.mdx: hasMore says whether options exist beyond those sent.
        has_more = True if len(self.values) > MAX_COMPLETION_VALUES else self.has_more
        if has_more is not None:
            out["hasMore"] = has_more
        return out


def completion_json(value: Any) -> dict[str, Any]:
    """A completion handler's return value as the ``completion`` object.

    Raises:
        TypeError: neither a :class:`Completion` nor an iterable of strings.
    """
    if isinstance(value, Completion):
        return value.to_json()
    if value is None:
        return {"values": []}
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"a completion handler returned {type(value).__name__}, not strings")
    values = list(value)
    if not all(isinstance(v, str) for v in values):
        raise TypeError("a completion handler must return strings")
    # (all there are: beyond the 100 sent, Completion.to_json says hasMore itself)
    return Completion(values, total=len(values), has_more=False).to_json()


def _sniff_image(data: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _one_block(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        return {"type": "text", "text": value}
    if isinstance(value, _HELPERS):
        return value.to_json()
    if isinstance(value, loaded_models(*_TYPED_CONTENT)):
        block: dict[str, Any] = unstructure(value)
        return block
    if isinstance(value, bytes | bytearray):
        mime = _sniff_image(bytes(value))
        if mime is None:
            raise TypeError(
                "bytes that are not a PNG, JPEG, GIF or WebP image: wrap them in "
                "Image(data, mime_type), Audio(...) or EmbeddedResource(...)"
            )
        return {"type": "image", "data": _b64(bytes(value)), "mimeType": mime}
    if isinstance(value, Mapping):
        return _raw_block(value)
    return None


def _raw_block(value: Mapping[Any, Any]) -> dict[str, Any] | None:
    """``value`` when it is a content block as the schema has it, else ``None``: a
    mapping whose ``"type"`` happens to be ``"text"`` (a record of a catalogue) is data,
    not a block missing its ``text``."""
    kind = value.get("type")
    shape = _RAW_BLOCKS.get(kind) if isinstance(kind, str) else None
    if shape is None:
        return None
    required, allowed = shape
    for key, json_type in required:
        if not isinstance(value.get(key), json_type):
            return None
    if not value.keys() <= allowed:
        return None
    if kind == "resource":
        resource = value["resource"]
        if not isinstance(resource.get("uri"), str) or not (
            isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str)
        ):
            return None
    return dict(value)


def content_blocks(value: Any) -> list[dict[str, Any]] | None:
    """``value`` as content blocks, or ``None`` when it is not content.

    Content is: a string (text), ``bytes`` of a common image format, :class:`Image`,
    :class:`Audio`, :class:`EmbeddedResource`, :class:`ResourceLink`, an
    ``mcp_sansio.types`` content block, a raw content block (a mapping with a content
    ``type``, the fields that type requires and no others), or a list or tuple of these.

    Raises:
        TypeError: ``bytes`` that are not a recognised image.
    """
    if isinstance(value, list | tuple):
        blocks: list[dict[str, Any]] = []
        for item in value:
            block = _one_block(item)
            if block is None:
                return None
            blocks.append(block)
        return blocks
    block = _one_block(value)
    return None if block is None else [block]


def json_text(value: Any) -> str:
    """``value`` as JSON text for a text block (strings stay as they are).

    Text is not the wire's JSON data: integers of any size pass, and NaN and the
    infinities are written as :func:`json.dumps` writes them (``NaN``, ``Infinity``).
    """
    if isinstance(value, str):
        return value
    return jsonable_text(to_jsonable(value, strict=False))


def jsonable_text(data: Any) -> str:
    """:func:`json_text` of a value already in its JSON form (no second conversion)."""
    if isinstance(data, str):
        return data
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _audio_as_resource(block: Mapping[str, Any]) -> dict[str, Any]:
    """An ``AudioContent`` as an ``EmbeddedResource`` holding the audio as a blob."""
    data, mime = block.get("data"), block.get("mimeType")
    if not isinstance(data, str) or not isinstance(mime, str):
        return {"type": "text", "text": "[audio omitted: this protocol version has no audio]"}
    # The audio has no URI of its own: name it by its contents, so equal audio is one URI.
    digest = hashlib.sha256(data.encode()).hexdigest()[:32]
    out: dict[str, Any] = {
        "type": "resource",
        "resource": {"uri": f"urn:mcp-trio:audio:{digest}", "mimeType": mime, "blob": data},
    }
    if "annotations" in block:
        out["annotations"] = block["annotations"]
    return out


def _link_as_text(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``ResourceLink`` as a ``TextContent`` naming the resource."""
    uri, mime, description = block.get("uri"), block.get("mimeType"), block.get("description")
    label = block.get("title") or block.get("name") or uri
    text = f"Resource link: {label} <{uri}>"
    if mime:
        text += f" ({mime})"
    if description:
        text += f"\n{description}"
    out: dict[str, Any] = {"type": "text", "text": text}
    if "annotations" in block:
        out["annotations"] = block["annotations"]
    return out


def adapt_block(block: Any, protocol_version: str) -> Any:
    """``block`` as ``protocol_version`` can carry it.

    A type that revision lacks becomes the nearest one it has: audio (before 2025-03-26)
    an ``EmbeddedResource`` whose ``blob`` is the audio (URI ``urn:mcp-trio:audio:<hash of
    the data>``, same ``mimeType``); a resource link (before 2025-06-18) a text block naming
    the resource (title or name, URI, MIME type and description). A block with nothing
    to change is returned as it is. (The fields that revision's block lacks the core's
    ``send_result`` leaves out: ``mcp_sansio._revision_fields``.)
    """
    missing = _MISSING_CONTENT_TYPES.get(protocol_version)
    if not missing or not isinstance(block, Mapping):
        return block
    kind = block.get("type")
    if kind in missing:
        return _audio_as_resource(block) if kind == "audio" else _link_as_text(block)
    return block


def adapt_tool_result(result: dict[str, Any], protocol_version: str) -> dict[str, Any]:
    """A ``CallToolResult`` as ``protocol_version`` can carry it.

    Content blocks go through :func:`adapt_block`. Before 2025-06-18 there is no
    ``structuredContent``: the core's ``send_result`` leaves it out, and the content
    is kept; when there is no content at all, the structured value becomes a JSON
    text block here, so nothing is lost.
    """
    if protocol_version not in _ADAPTED_VERSIONS:
        return result
    out = dict(result)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [adapt_block(block, protocol_version) for block in content]
    if (
        protocol_version in UNSTRUCTURED_VERSIONS
        and "structuredContent" in out
        and not out.get("content")
    ):
        out["content"] = [{"type": "text", "text": json_text(out["structuredContent"])}]
    return out


def adapt_prompt_result(result: dict[str, Any], protocol_version: str) -> dict[str, Any]:
    """A ``GetPromptResult`` whose messages' content :func:`adapt_block` has adapted."""
    messages = result.get("messages")
    if protocol_version not in _ADAPTED_VERSIONS or not isinstance(messages, list):
        return result
    adapted = [
        {**message, "content": adapt_block(message["content"], protocol_version)}
        if isinstance(message, Mapping) and "content" in message
        else message
        for message in messages
    ]
    return {**result, "messages": adapted}


def prompt_messages(value: Any) -> list[dict[str, Any]]:
    """A prompt function's return value as ``PromptMessage`` objects.

    A string is one user message; a :class:`Message`, an ``mcp_sansio.types.
    PromptMessage`` or a raw ``{"role", "content"}`` mapping is one message; any other
    content value is a user message holding it; a list is each of its items in turn.

    Raises:
        TypeError: something that is none of those.
    """
    items = value if isinstance(value, list | tuple) else [value]
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Message):
            out.append(item.to_json())
        elif isinstance(item, loaded_models("PromptMessage")):
            out.append(unstructure(item))
        elif isinstance(item, Mapping) and "role" in item and "content" in item:
            out.append(_raw_message(item, "prompt"))
        else:
            block = _one_block(item)
            if block is None:
                raise TypeError(f"a prompt returned {type(item).__name__}, not a message")
            out.append({"role": "user", "content": block})
    return out


def check_role(role: Any, what: str) -> None:
    """Raise ``TypeError`` unless ``role`` is one of :data:`ROLES`."""
    if role not in ROLES:
        raise TypeError(f"a {what} message's role is 'user' or 'assistant', not {role!r}")


def _raw_message(item: Mapping[Any, Any], what: str) -> dict[str, Any]:
    """A raw ``{"role", "content"}`` prompt message, its role checked and its content one
    content value (a string is text)."""
    check_role(item["role"], what)
    block = _one_block(item["content"])
    if block is None:
        raise TypeError(
            f"a {what} message's content is one content value (a string, Image, a "
            f"content block...), not {type(item['content']).__name__}"
        )
    return {**item, "content": block}


def resource_contents(uri: str, data: str | bytes, mime_type: str | None) -> dict[str, Any]:
    """One ``TextResourceContents`` (``str``) or ``BlobResourceContents`` (``bytes``)."""
    if isinstance(data, str):
        return {"uri": uri, "mimeType": mime_type or "text/plain", "text": data}
    return {"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": _b64(data)}


def read_result_contents(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """A resource function's return value as the ``contents`` of ``resources/read``.

    ``str`` is text, ``bytes`` a base64 ``blob``; typed ``TextResourceContents`` /
    ``BlobResourceContents`` (or a list of them, for several contents) are sent as they
    are; anything else JSON-able is sent as JSON text (``application/json`` unless the
    resource declares a MIME type).

    Raises:
        TypeError: the value has no JSON form.
    """
    if isinstance(value, str | bytes | bytearray):
        return [
            resource_contents(uri, value if isinstance(value, str) else bytes(value), mime_type)
        ]
    typed_contents = loaded_models(*_TYPED_RESOURCE_CONTENTS)
    if isinstance(value, typed_contents):
        return [unstructure(value)]
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, typed_contents) for v in value)
    ):
        return [unstructure(v) for v in value]
    return [resource_contents(uri, json_text(value), mime_type or "application/json")]

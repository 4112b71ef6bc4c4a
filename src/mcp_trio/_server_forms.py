"""Form-mode elicitation schemas, and the messages of sampling requests.

``elicitation/create`` in form mode takes a *restricted* JSON Schema: a flat object whose
properties are strings, numbers, integers, booleans or enums (client/elicitation,
"Requested Schema"). :func:`form_spec` builds one from a Python type (a dataclass, attrs
class or TypedDict, or a scalar asked as the single field ``value``) or checks a schema
given by hand, so a form that no client could render fails at the ``ctx.elicit`` call.
What a field may be depends on the session's protocol version: 2025-06-18 has no
multi-select or titled options and defaults only on booleans (``_FORM_KEYS``).

A form must be flat, but the schema of a type need not be: an enum used by two fields is
one ``$defs`` entry that both reference. :func:`_inline_refs` copies every such definition
into the places that use it first; only a recursive type (which no flat form can hold) is
refused. A schema written by hand is sent as written, so there a ``$ref`` or ``$defs``
is refused (found by walking the schema's structure: text that merely says "$ref" is fine).

The key check above says which keywords a field may have; :func:`_check_as_client_would`
then reads the form as a client does (into ``ElicitRequestFormParamsRequestedSchema``), so
the value of each keyword has its type too (a string ``default`` on a string field, a
number ``minimum``, a ``title`` on every titled option), and a form our client would
answer with -32602 is refused at ``ctx.elicit`` instead of being sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs

from mcp_sansio import RemoteProtocolError, structure, unstructure
from mcp_sansio._sampling import sampling_messages_problem
from mcp_sansio._versions import REVISIONS

from ._jsonschema import coerce_arguments, type_schema
from ._server_content import Message, check_role, content_blocks, sent_meta_problem
from ._uritemplate import URI_HINT, uri_problem
from ._util import clip

__all__ = [
    "ELICITATION_MODE_VERSIONS",
    "FormSpec",
    "check_elicitation_url",
    "form_spec",
    "sampling_messages",
    "structure_as",
]

_PRIMITIVE_KEYS: dict[str, frozenset[str]] = {
    # "enumNames": the 2025-11-25 LegacyTitledEnumSchema (titles beside enum values).
    "string": frozenset(
        {
            "type",
            "title",
            "description",
            "minLength",
            "maxLength",
            "format",
            "default",
            "enum",
            "enumNames",
        }
    ),
    "number": frozenset({"type", "title", "description", "minimum", "maximum", "default"}),
    "boolean": frozenset({"type", "title", "description", "default"}),
    "array": frozenset(
        {"type", "title", "description", "minItems", "maxItems", "items", "default"}
    ),
}
_PRIMITIVE_KEYS["integer"] = _PRIMITIVE_KEYS["number"]
# TitledSingleSelectEnumSchema: a string field whose options carry titles.
_ONE_OF_KEYS = frozenset({"type", "title", "description", "oneOf", "default"})

#: 2025-06-18's PrimitiveSchemaDefinition (StringSchema, NumberSchema, BooleanSchema,
#: EnumSchema): a default only on booleans, no titled options (oneOf), no multi-select.
_KEYS_2025_06_18: dict[str, frozenset[str]] = {
    "string": _PRIMITIVE_KEYS["string"] - {"default"},
    "number": _PRIMITIVE_KEYS["number"] - {"default"},
    "integer": _PRIMITIVE_KEYS["number"] - {"default"},
    "boolean": _PRIMITIVE_KEYS["boolean"],
}

#: What a form field may be, by the protocol version of the session: 2025-11-25 and
#: 2026-07-28 share one PrimitiveSchemaDefinition. A version without elicitation is not
#: listed (asking is refused there; see Context._ask). Field shapes are keyed by their
#: ``type``, and titled options by ``"oneOf"``.
_FORM_KEYS: Mapping[str, Mapping[str, frozenset[str]]] = {
    "2025-06-18": _KEYS_2025_06_18,
    "2025-11-25": {**_PRIMITIVE_KEYS, "oneOf": _ONE_OF_KEYS},
    "2026-07-28": {**_PRIMITIVE_KEYS, "oneOf": _ONE_OF_KEYS},
}
#: The versions whose elicitation has modes (form and URL): ``mode`` is sent, and
#: ``elicit_url`` may be asked.
ELICITATION_MODE_VERSIONS = tuple(v for v, r in REVISIONS.items() if r.elicitation_modes)

_KIND_NAMES = {
    "array": "multi-select (a list of enum strings)",
    "oneOf": "titled-option (oneOf)",
}


FORM_STRING_FORMATS = ("email", "uri", "date", "date-time")
"""The string formats an elicitation form may ask for (``StringSchema.format``)."""


def _flatten_property(
    name: str, prop: Mapping[str, Any], version: str | None, from_type: bool
) -> dict[str, Any]:
    """One property of a form schema, reduced to the primitive shapes the spec allows
    (in ``version``, or in the latest revision when ``None``)."""
    prop = dict(prop)
    options = prop.get("anyOf")
    if isinstance(options, list):  # T | None: optional in a form, so drop the null
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) != 1:
            raise TypeError(f"elicitation field {name!r}: unions are not supported in forms")
        del prop["anyOf"]
        if prop.get("default", ...) is None:
            del prop["default"]
        prop = {**rest[0], **prop}
    nulls = sorted(key for key, value in prop.items() if value is None)
    if nulls:  # (the schema has no nullable keyword: a null is a mistake, not "absent")
        raise TypeError(f"elicitation field {name!r}: {nulls} must not be null")
    kind = prop.get("type")
    if kind is None and isinstance(prop.get("enum"), list):
        kind = prop["type"] = "string"
    shape = "oneOf" if "oneOf" in prop else str(kind)
    allowed = _ONE_OF_KEYS if shape == "oneOf" else _PRIMITIVE_KEYS.get(shape)
    if allowed is None or not set(prop) <= allowed:
        raise TypeError(
            f"elicitation field {name!r}: a form field must be a string, number, integer, "
            f"boolean or enum (or a list of enum strings), not {kind or 'this'}: "
            f"{sorted(set(prop) - (allowed or set()))} are not allowed"
        )
    if kind == "string" and "enum" in prop and not all(isinstance(v, str) for v in prop["enum"]):
        raise TypeError(f"elicitation field {name!r}: enum values must be strings")
    if "format" in prop and prop["format"] not in FORM_STRING_FORMATS:
        # client/elicitation.mdx: StringSchema.format is one of these four.
        raise TypeError(
            f"elicitation field {name!r}: a form string's format is one of "
            f"{', '.join(FORM_STRING_FORMATS)}, not {prop['format']!r} (ask for "
            "a plain str and parse it)"
        )
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not ("enum" in items or "anyOf" in items):
            raise TypeError(f"elicitation field {name!r}: only lists of enum strings are allowed")
    if version is None or version not in _FORM_KEYS:
        return prop
    # What the negotiated revision can carry: a client of 2025-06-18 knows no multi-select
    # or titled options, and defaults only on booleans.
    allowed = _FORM_KEYS[version].get(shape)
    if allowed is None:
        since = ", ".join(v for v, keys in _FORM_KEYS.items() if shape in keys)
        raise TypeError(
            f"elicitation field {name!r}: {_KIND_NAMES.get(shape, shape)} fields exist only in "
            f"protocol versions {since}, and this session speaks {version}"
        )
    if from_type and "default" not in allowed:
        # A form built from a type: its defaults are the type's, which still apply to a
        # field the user leaves empty; the revision just cannot show them.
        prop.pop("default", None)
    extra = set(prop) - allowed
    if extra:
        raise TypeError(
            f"elicitation field {name!r}: {sorted(extra)} are not allowed on {kind!r} "
            f"fields in protocol version {version}"
        )
    return prop


#: Keywords whose value is one subschema, a list of them, or a map of name -> subschema.
#: Only these are walked: a ``$ref`` anywhere else (in a description, an ``enum`` value,
#: a ``default``, a property *named* ``$ref``) is data, not a reference.
_ONE_SCHEMA = ("items", "not", "additionalProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("properties",)
_DEFINITIONS = ("$defs", "definitions")


def _inline_refs(schema: Mapping[str, Any], *, inline: bool = True) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` replaced by a copy of what it names, and its
    ``$defs`` / ``definitions`` dropped (``inline``); or, with ``inline=False``, ``schema``
    checked to have neither.

    Raises:
        TypeError: a recursive reference (``"#"``, or a definition that reaches itself),
            or one that names no definition of this schema; with ``inline=False``, any
            ``$ref`` or ``$defs``.
    """
    flat_only = "an elicitation schema must be a flat object schema without $defs or $ref"
    if not inline and any(key in schema for key in _DEFINITIONS):
        raise TypeError(flat_only)
    defs: dict[str, Any] = {}
    for key in _DEFINITIONS:
        table = schema.get(key)
        if isinstance(table, Mapping):
            defs.update({f"#/{key}/{name}": body for name, body in table.items()})

    def walk(node: Any, active: tuple[str, ...]) -> Any:
        if not isinstance(node, Mapping):
            return node
        # Without inlining, a nested $defs is kept, for the field check to refuse.
        out = {k: v for k, v in node.items() if not (inline and k in _DEFINITIONS)}
        ref = out.pop("$ref", None)
        for key in _ONE_SCHEMA:
            if key in out:
                out[key] = walk(out[key], active)
        for key in _SCHEMA_LISTS:
            if isinstance(out.get(key), list):
                out[key] = [walk(item, active) for item in out[key]]
        for key in _SCHEMA_MAPS:
            if isinstance(out.get(key), Mapping):
                out[key] = {name: walk(sub, active) for name, sub in out[key].items()}
        if ref is None:
            return out
        if not inline:
            raise TypeError(flat_only)
        if ref == "#" or ref in active:
            raise TypeError(
                f"an elicitation schema cannot be recursive ({ref!r} refers back to itself): "
                "a form is a flat object"
            )
        if not isinstance(ref, str) or ref not in defs:
            raise TypeError(f"an elicitation schema has a $ref that names nothing: {ref!r}")
        # The definition first, then the referring node's own keywords (a description).
        return {**walk(defs[ref], (*active, ref)), **out}

    inlined: dict[str, Any] = walk(schema, ())
    return inlined


def _form_schema(
    schema: Mapping[str, Any], version: str | None, *, from_type: bool = False
) -> dict[str, Any]:
    if not from_type:  # (a type's schema comes inlined already: see form_spec)
        schema = _inline_refs(schema, inline=False)
    if schema.get("type") != "object":
        raise TypeError("an elicitation schema must be a flat object schema")
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {
        "type": "object",
        "properties": {
            n: _flatten_property(n, p, version, from_type) for n, p in properties.items()
        },
    }
    required = schema.get("required")
    if required:
        if not isinstance(required, list):
            raise TypeError(
                f"an elicitation schema's required is a list of field names, not "
                f"{type(required).__name__}"
            )
        missing = [n for n in required if not isinstance(n, str) or n not in out["properties"]]
        if missing:  # (no answer could ever fit: the client cannot show such a field)
            raise TypeError(
                f"an elicitation schema requires fields it does not have: {missing[:10]!r}"
            )
        out["required"] = list(required)
    _check_as_client_would(out)
    return out


def _check_as_client_would(schema: dict[str, Any]) -> None:
    """Read ``schema`` as our client reads a form it is sent (the spec's
    ``ElicitRequestFormParams.requestedSchema``, every keyword's value typed).

    Raises:
        TypeError: a keyword's value has the wrong type (``{"type": "string", "default":
            5}``, a string ``minimum``), or a titled option has no ``title``: what a
            client answers with -32602.
    """
    from mcp_sansio.types import (  # noqa: PLC0415 - see _typed.py
        ElicitRequestFormParamsRequestedSchema as Form,
    )

    try:
        structure(schema, Form)
    except RemoteProtocolError as exc:
        problem = exc.message.removeprefix(f"invalid {Form.__name__}: ")
        raise TypeError(
            f"an elicitation schema that a client would refuse (client/elicitation, "
            f"PrimitiveSchemaDefinition): {problem}"
        ) from None


@attrs.frozen
class FormSpec:
    """A checked form schema, and how to turn the answer into a value."""

    schema: dict[str, Any]
    target: Any
    wrapped: bool


def form_spec(schema_or_type: Any, *, protocol_version: str | None = None) -> FormSpec:
    """The form for ``schema_or_type`` (a type or a JSON Schema).

    Args:
        schema_or_type: the type, or the JSON Schema of a flat object.
        protocol_version: the session's version, whose PrimitiveSchemaDefinition the
            fields must fit (``None``: the latest revision's). A form built from a type
            has its ``$defs`` inlined (an enum shared by fields) and leaves off the
            defaults the revision cannot carry (its own defaults still apply); a JSON
            Schema is checked as given (no ``$ref`` or ``$defs``).

    Raises:
        TypeError: it is not a flat form of primitive fields (a recursive type, a
            hand-written ``$ref``), or one that
            ``protocol_version`` cannot carry (multi-select or titled options before
            2025-11-25, say).
    """
    version = protocol_version
    if isinstance(schema_or_type, Mapping):
        return FormSpec(_form_schema(schema_or_type, version), None, wrapped=False)
    raw = _inline_refs(type_schema(schema_or_type))
    if raw.get("type") == "object" and "properties" in raw:
        return FormSpec(_form_schema(raw, version, from_type=True), schema_or_type, wrapped=False)
    wrapped = {"type": "object", "properties": {"value": raw}, "required": ["value"]}
    return FormSpec(_form_schema(wrapped, version, from_type=True), schema_or_type, wrapped=True)


ELICITATION_URL_SCHEMES = ("https", "http")
"""The schemes of a URL-mode elicitation's ``url``: a page the user opens in a browser
(client/elicitation.mdx: servers "SHOULD use HTTPS URLs for non-development environments";
clients "SHOULD highlight the domain"). ``http`` is for development."""

_URL_SHOWN = 200
"""How much of a refused URL an error message repeats."""


def check_elicitation_url(url: object) -> None:
    """Check the ``url`` of a URL-mode elicitation before it is sent.

    client/elicitation.mdx: "The ``url`` parameter MUST contain a valid URL" (the
    schema's ``format: uri``). Valid here is an absolute RFC 3986 URI (ASCII only, as
    :func:`~mcp_trio._uritemplate.uri_problem` checks) whose scheme is one of
    :data:`ELICITATION_URL_SCHEMES`, with a host.

    Raises:
        TypeError: ``url`` is not a string.
        ValueError: it is not such a URL; the message shows the value (its first
            :data:`_URL_SHOWN` characters, clipped and escaped by ``repr``) and why.
    """
    if not isinstance(url, str):
        raise TypeError(f"an elicitation URL is a string, not {type(url).__name__}")
    shown = repr(clip(url, _URL_SHOWN))
    problem = uri_problem(url)
    if problem is not None:
        raise ValueError(f"elicitation URL {shown} is not a valid URL: {problem} {URI_HINT}")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ELICITATION_URL_SCHEMES:
        raise ValueError(
            f"elicitation URL {shown} is not a web URL: its scheme is {parts.scheme!r}, "
            "not https (or http, in development)"
        )
    if not parts.hostname:
        raise ValueError(f"elicitation URL {shown} has no host (https://host/...)")


def structure_as(target: Any, value: Any) -> Any:
    """``value`` (validated JSON) as an instance of the type ``target``."""

    def holder(value: Any) -> None: ...

    holder.__annotations__ = {"value": target}
    return coerce_arguments(holder, {"value": value})["value"]


def _raw_sampling_message(item: Mapping[Any, Any]) -> dict[str, Any]:
    """A raw ``{"role", "content"}`` sampling message, its role checked. Its content is
    one block or (2025-11-25 on) a list of them; a string is a text block, as elsewhere."""
    check_role(item["role"], "sampling")
    content = item.get("content")
    if isinstance(content, str):
        return {**item, "content": {"type": "text", "text": content}}
    if isinstance(content, list):
        blocks = [{"type": "text", "text": c} if isinstance(c, str) else c for c in content]
        return {**item, "content": blocks}
    if not isinstance(content, Mapping):
        raise TypeError(
            "a sampling message's content is a content block or a list of them, "
            f"not {type(content).__name__}"
        )
    return dict(item)


def sampling_messages(messages: str | Sequence[Any]) -> list[dict[str, Any]]:
    """``ctx.sample``'s messages as ``SamplingMessage`` objects.

    Raises:
        TypeError: an item is no message, or the messages break the content rules of
            sampling with tools (``sampling_messages_problem``).
        ValueError: a message's ``_meta``, or its content's, has a key a definition's
            ``meta`` may not have (``sent_meta_problem``: malformed, or reserved for MCP).
    """
    if isinstance(messages, str):
        messages = [messages]
    out: list[dict[str, Any]] = []
    for item in messages:
        if isinstance(item, Message):
            out.append(item.to_json())
        elif isinstance(item, Mapping) and "role" in item:
            out.append(_raw_sampling_message(item))
        elif attrs.has(type(item)) and hasattr(item, "role"):
            out.append(unstructure(item))
        else:
            blocks = content_blocks(item)
            if blocks is None or len(blocks) != 1:
                raise TypeError(f"not a sampling message: {type(item).__name__}")
            out.append({"role": "user", "content": blocks[0]})
    problem = sampling_messages_problem(out)
    if problem is not None:  # sampling.mdx: what a client answers with -32602
        raise TypeError(problem)
    problem = sent_meta_problem({"messages": out})
    if problem is not None:  # (as registration refuses a definition's meta)
        raise ValueError(f"sampling {problem}")
    return out

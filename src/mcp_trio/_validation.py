"""JSON Schema validation: :func:`validate` and :func:`check_schema`, pure functions.

The validator of ``@server.tool()`` arguments (:mod:`mcp_trio._jsonschema` builds the
schemas and re-exports these names) and of ``tools/call`` results in both clients
(``OutputSchemas`` in :mod:`mcp_trio._client_common`). It lives apart from the schema
builder, which needs cattrs and the type-hint machinery, because the blocking client
(:mod:`mcp_trio._blocking`) uses it and imports no more than the standard library, the
core and attrs: this module imports only the standard library and ``mcp_sansio._versions``.

Theory of operation
-------------------
A small validator for the schemas we generate, plus the usual keywords around them (see
:func:`validate`). It refuses keywords it does not implement instead of ignoring them, so
it is never silently wrong, and :func:`check_schema` finds those in a whole schema up
front. The tests check it agrees with the ``jsonschema`` package.

Two dialects (``basic/index.mdx``: implementations MUST support 2020-12, the default,
and SHOULD document the others): JSON Schema 2020-12, and draft-07, which every tool of a
TypeScript SDK server declares (zod's output). The root's ``$schema`` picks one for the
whole schema (:class:`_Draft07` is the draft-07 validator); the differences that matter
here are few: ``items`` may be an array of schemas (with ``additionalItems``) where
2020-12 has ``prefixItems``, ``dependencies`` is both ``dependentRequired`` and
``dependentSchemas``, and a ``$ref`` makes the rest of its object ignored. ``definitions``
and ``$defs`` are only places a ``$ref`` (a JSON pointer) leads to, in either.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Context, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, ClassVar, Final, final

from mcp_sansio._versions import JSON_SCHEMA_DIALECT

__all__ = [
    "DRAFT_07_DIALECT",
    "MAX_PROBLEMS",
    "Schema",
    "check_schema",
    "flat_object_test",
    "has_type",
    "plain_object_test",
    "validate",
]

Schema = dict[str, Any]
"""A JSON Schema object, decoded."""


_INDEX = re.compile(r"0|[1-9][0-9]*")  # RFC 6901 array index: ASCII digits, no leading 0


class AnchorRef(ValueError):
    """A ``$ref`` to a plain-name fragment (``#name``, an ``$anchor``): valid JSON
    Schema, which :func:`resolve_ref` does not resolve."""


DRAFT_07_DIALECT: Final = "http://json-schema.org/draft-07/schema"
"""The ``$schema`` of JSON Schema draft-07 (a final ``#`` or none), the second dialect
:func:`validate` implements: what the TypeScript SDK's tools declare."""

_DIALECT_ALIASES: Final = {"https://json-schema.org/draft-07/schema": DRAFT_07_DIALECT}
"""Other spellings of a dialect we implement, seen in the wild: draft-07's URI is
``http://``, but generators also write it with ``https://``."""


def dialect_of(schema: object) -> str | None:
    """The dialect ``schema`` declares, without its final ``#`` (2020-12, the default,
    when it declares none, as a boolean schema does); ``None`` for one :func:`validate`
    does not implement."""
    if not isinstance(schema, Mapping):
        return JSON_SCHEMA_DIALECT
    dialect = schema.get("$schema", JSON_SCHEMA_DIALECT)
    if not isinstance(dialect, str):
        return None
    dialect = dialect.rstrip("#")
    dialect = _DIALECT_ALIASES.get(dialect, dialect)
    return dialect if dialect in (JSON_SCHEMA_DIALECT, DRAFT_07_DIALECT) else None


def rebasing_objects(schema: object) -> frozenset[int]:
    """The ``id`` of every object in ``schema`` that declares a ``$id`` and holds a
    ``$ref`` (itself, or any object in it, keywords and data alike). Below the root,
    such a subschema's ``$ref`` would resolve against the ``$id`` (core §8.2.1, a new
    base URI), which :func:`resolve_ref` does not implement (it resolves against the
    root). A ``$id`` with no ``$ref`` under it changes nothing here.

    One walk for the whole schema (``schema`` outlives the answer, so ids stay unique):
    asking it of each subschema would walk each one's objects again for each ``$id``
    above them, a cost of the objects times their depth on a server's schema."""
    found: list[dict[str, Any]] = []  # (the objects with a "$id")
    parents: list[int] = []  # (the index in found of the nearest one above each; -1: none)
    holds: list[bool] = []  # (whether it, or an object in it, has a "$ref")
    values: list[object] = [schema]  # (the stack: values to visit...)
    above: list[int] = [-1]  # (...and the index in found of the nearest one above)
    while values:
        value, parent = values.pop(), above.pop()
        if isinstance(value, dict):
            if "$id" in value:
                found.append(value)
                parents.append(parent)
                holds.append(False)
                parent = len(found) - 1
            if "$ref" in value:
                index = parent
                while index >= 0 and not holds[index]:  # (each marked once)
                    holds[index] = True
                    index = parents[index]
            values.extend(value.values())
            above.extend([parent] * len(value))
        elif isinstance(value, list):
            values.extend(value)
            above.extend([parent] * len(value))
    return frozenset(id(obj) for obj, held in zip(found, holds, strict=True) if held)


def json_objects(value: object) -> Iterator[dict[str, Any]]:
    """Every object in the JSON ``value`` (itself first, if it is one), in document order.

    The one walk over a whole schema as JSON, keywords and data alike (an ``enum``'s
    values, a keyword no validator here knows): for a question that nothing in it may
    escape, such as where a ``$ref`` or a ``$id`` is.

    Iterative, with a stack of the values still to visit: a server's schema may be
    nested deeper than Python's recursion limit, and nested generators (``yield
    from``) would pass each object up through every level above it, a cost of the
    objects times their depth where this is one of the values.
    """
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(reversed(node.values()))  # (popped first to last)
        elif isinstance(node, list):
            stack.extend(reversed(node))


def dialect_supported(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` is in a dialect :func:`validate` implements: it declares none
    (2020-12 is the default), 2020-12 itself or draft-07."""
    return dialect_of(schema) is not None


def resolve_ref(root: Any, ref: str) -> Any:
    """The subschema of ``root`` a local ``$ref`` (a JSON pointer fragment) names.

    Raises:
        ValueError: ``ref`` is not local (nothing is fetched), or leads nowhere.
    """
    if not ref.startswith("#"):
        raise ValueError(f"unsupported $ref {ref[:100]!r}: only local references are")
    if ref[1:2] not in ("", "/"):
        raise AnchorRef(f"unsupported $ref {ref[:100]!r}: only JSON pointers are (no anchors)")
    node = root
    for escaped in ref[1:].split("/")[1:]:
        part = escaped.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and _INDEX.fullmatch(part) and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise ValueError(f"unresolvable $ref {ref[:100]!r}")
    return node


_DECIMAL: Final = Context(prec=28, traps=[InvalidOperation])
"""Our own context: the thread's may have been changed (a trap off would answer NaN)."""


def _is_multiple(value: float, step: float) -> bool:
    """Whether ``value`` is a multiple of ``step`` as the numbers are written in JSON:
    exactly for integers (a float quotient rounds past 2**53: 2**60 + 1 is no multiple
    of 3), and by their shortest decimal form for floats (19.99 is a multiple of 0.01,
    which is what it says, though ``19.99 / 0.01`` is 1998.9999999999998)."""
    if type(value) is int and type(step) is int:
        return value % step == 0
    try:  # (a tenth of Fraction's time: this runs on every call of such a tool)
        return _DECIMAL.remainder(Decimal(repr(value)), Decimal(repr(step))) == 0
    except InvalidOperation:  # (a quotient past 28 digits, as 1e300 by 0.01)
        return Fraction(repr(value)) % Fraction(repr(step)) == 0


def _json_type(value: object) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return None


#: Keywords that do not constrain the instance (``format`` is not enforced;
#: ``enumNames`` labels an ``enum``'s values in MCP's legacy titled enum of an
#: elicitation form, ``LegacyTitledEnumSchema``).
_ANNOTATIONS = frozenset(
    {
        *("$schema", "$id", "$comment", "$defs", "definitions", "title", "description"),
        *("default", "examples", "deprecated", "readOnly", "writeOnly", "format"),
        *("contentEncoding", "contentMediaType", "enumNames"),
    }
)
#: The keywords the validator implements.
_KEYWORDS = frozenset(
    {
        *("$ref", "type", "enum", "const", "anyOf", "allOf", "oneOf", "not", "multipleOf"),
        *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        *("minLength", "maxLength", "pattern"),
        *("items", "prefixItems", "minItems", "maxItems"),
        *("uniqueItems", "properties", "required", "additionalProperties"),
        *("minProperties", "maxProperties", "propertyNames"),
    }
)
_KNOWN = _KEYWORDS | _ANNOTATIONS
#: The same for draft-07 (validation §6.4.2, §6.5.7): no ``prefixItems``, and two
#: keywords 2020-12 replaced (by ``prefixItems`` and ``dependentRequired``/``dependentSchemas``).
_KEYWORDS_07 = (_KEYWORDS - {"prefixItems"}) | {"additionalItems", "dependencies"}
_KNOWN_07 = _KEYWORDS_07 | _ANNOTATIONS
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE_NAMES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})
#: Keywords whose value is a schema, a list of schemas, or an object of schemas.
_SUBSCHEMA = frozenset({"not", "items", "additionalProperties", "propertyNames"})
_SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAPS = frozenset({"properties", "$defs", "definitions"})
_BOUNDS: tuple[tuple[str, str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", ">=", operator.ge),
    ("maximum", "<=", operator.le),
    ("exclusiveMinimum", ">", operator.gt),
    ("exclusiveMaximum", "<", operator.lt),
)


@functools.lru_cache(maxsize=256)  # bounded: a caller's schema may be made up per call
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _regex(pattern: object) -> re.Pattern[str]:
    """A ``pattern``, compiled with Python's ``re`` (as the ``jsonschema`` package does).

    Raises:
        ValueError: not a string, or not a regular expression.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"pattern {_show(pattern)} is not a string")
    try:
        return _compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {_show(pattern)} is not a regular expression: {exc}") from None


_CONTAINER_NAMES: dict[type, str] = {list: "array", dict: "object"}


def _type_name(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return _show(value)  # NaN, Infinity, -Infinity
    return _json_type(value) or _CONTAINER_NAMES.get(type(value), type(value).__name__)


def has_type(value: object, name: str) -> bool:
    """Whether ``value`` is of JSON Schema type ``name`` (an integral float is an
    ``integer``; a bool is neither ``integer`` nor ``number``; NaN and the infinities
    are not JSON, so no ``number``)."""
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        if isinstance(value, float):
            return math.isfinite(value)
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "array":
        return isinstance(value, list)
    if name == "object":
        return isinstance(value, dict)
    return _json_type(value) == name


def _is_number(value: object) -> bool:
    """``has_type(value, "number")``, for the validator's inner loop."""
    kind = type(value)
    if kind is int:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return has_type(value, "number")  # (subclasses: bool is none)


_TYPE_TESTS: Final[dict[str, Callable[[object], bool]]] = {
    "string": lambda v: type(v) is str or _json_type(v) == "string",
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "integer": lambda v: type(v) is int or has_type(v, "integer"),
    "number": _is_number,
    "boolean": lambda v: v is True or v is False,
    "null": lambda v: v is None,
}
"""``has_type(value, name)`` for one type name, with the common case first."""


def _canonical(value: object) -> object:
    """A hashable stand-in with JSON equality: ``1 == 1.0``, ``True != 1``."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("list", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((k, _canonical(v)) for k, v in value.items()))
    return value


def _show(value: object) -> str:
    return _shorten(json.dumps(value, ensure_ascii=False, default=repr))


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{_show(key)}]"


_Path = str | tuple[Any, str | int]
"""Where a value is, built without formatting while nothing is wrong: the root's name,
or ``(parent, key)``; :func:`_where` spells it out for a problem message."""
_SIZE_KEYWORDS: Final = {
    suffix: (f"min{suffix}", f"max{suffix}") for suffix in ("Length", "Items", "Properties")
}


def _where(path: _Path) -> str:
    keys: list[str | int] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    for key in reversed(keys):
        path = _child(path, key)
    return path


class _Validator:
    """The validator of a JSON Schema 2020-12 schema, ``root``."""

    dialect: ClassVar[str] = JSON_SCHEMA_DIALECT
    keywords: ClassVar[frozenset[str]] = _KEYWORDS
    known: ClassVar[frozenset[str]] = _KNOWN
    """The keywords (and annotations) of the dialect that :meth:`check` takes."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.enums: dict[int, frozenset[object]] = {}
        """The canonical ``enum`` values per schema node (by ``id``; the schema outlives
        this validator, so ids stay unique), built once per validation."""
        self.enum_texts: dict[int, str] = {}
        """The same nodes' choices as a problem message shows them."""
        self._rebasing: frozenset[int] | None = None
        """:func:`rebasing_objects` of ``root``, found at the first :meth:`check_schema`."""

    def choices(self, schema: Schema) -> frozenset[object]:
        key = id(schema)
        found = self.enums.get(key)
        if found is None:
            found = self.enums[key] = frozenset(_canonical(v) for v in schema["enum"])
        return found

    def choices_text(self, schema: Schema) -> str:
        """The ``enum`` of ``schema`` for a problem message, shortened like a value."""
        key = id(schema)
        found = self.enum_texts.get(key)
        if found is None:
            found = self.enum_texts[key] = _shorten(", ".join(_show(v) for v in schema["enum"]))
        return found

    def resolve(self, ref: str) -> Any:
        return resolve_ref(self.root, ref)

    def errors(self, value: Any, schema: Any, path: _Path) -> list[str]:
        out: list[str] = []
        self.check(value, schema, path, out)
        return out

    def check(self, value: Any, schema: Any, path: _Path, out: list[str]) -> None:
        if schema is True:
            return
        if schema is False:
            out.append(f"{_where(path)}: not allowed")
            return
        if type(schema) is not dict:
            raise ValueError(f"a schema is an object or a boolean, not {_show(schema)}")
        if not self.known.issuperset(schema):
            unknown = sorted(schema.keys() - self.known)
            raise ValueError(f"unsupported JSON Schema keyword(s): {', '.join(unknown)}")
        if "$ref" in schema:
            self.check(value, self.resolve(schema["$ref"]), path, out)
        if "type" in schema:
            kind = schema["type"]
            test = _TYPE_TESTS.get(kind) if type(kind) is str else None
            names = [kind] if test is not None or not isinstance(kind, list) else kind
            if not (test(value) if test is not None else any(has_type(value, n) for n in names)):
                out.append(
                    f"{_where(path)}: expected {' or '.join(names)}, got {_type_name(value)}"
                )
                return
        if "enum" in schema and _canonical(value) not in self.choices(schema):
            out.append(
                f"{_where(path)}: expected one of {self.choices_text(schema)}, got {_show(value)}"
            )
        if "const" in schema and _canonical(value) != _canonical(schema["const"]):
            out.append(f"{_where(path)}: expected {_show(schema['const'])}, got {_show(value)}")
        if _is_number(value):
            self.check_number(value, schema, path, out)
        elif isinstance(value, str):
            self.check_size(len(value), schema, "Length", "characters", path, out)
            if "pattern" in schema and not _regex(schema["pattern"]).search(value):
                out.append(
                    f"{_where(path)}: must match {_show(schema['pattern'])}, got {_show(value)}"
                )
        elif isinstance(value, list):
            self.check_array(value, schema, path, out)
        elif isinstance(value, dict):
            self.check_object(value, schema, path, out)
        self.check_combinators(value, schema, path, out)

    def check_number(self, value: float, schema: Schema, path: _Path, out: list[str]) -> None:
        for keyword, op, holds in _BOUNDS:
            bound = schema.get(keyword)
            if bound is not None and not holds(value, bound):
                out.append(f"{_where(path)}: must be {op} {bound}, got {_show(value)}")
        step = schema.get("multipleOf")
        if step is not None and not _is_multiple(value, step):
            out.append(f"{_where(path)}: must be a multiple of {step}, got {_show(value)}")

    def check_size(
        self, size: int, schema: Schema, suffix: str, unit: str, path: _Path, out: list[str]
    ) -> None:
        low_key, high_key = _SIZE_KEYWORDS[suffix]
        low, high = schema.get(low_key), schema.get(high_key)
        if low is not None and size < low:
            out.append(f"{_where(path)}: expected at least {low} {unit}, got {size}")
        if high is not None and size > high:
            out.append(f"{_where(path)}: expected at most {high} {unit}, got {size}")

    def check_array(self, value: list[Any], schema: Schema, path: _Path, out: list[str]) -> None:
        self.check_size(len(value), schema, "Items", "items", path, out)
        if schema.get("uniqueItems"):
            self.check_unique(value, path, out)
        prefix, rest = schema.get("prefixItems", []), schema.get("items", True)
        for i, item in enumerate(value):
            self.check(item, prefix[i] if i < len(prefix) else rest, (path, i), out)

    def check_unique(self, value: list[Any], path: _Path, out: list[str]) -> None:
        seen: dict[object, int] = {}
        for i, item in enumerate(value):
            first = seen.setdefault(_canonical(item), i)
            if first != i:
                out.append(f"{_where((path, i))}: duplicate of item {first}")

    def check_object(
        self, value: dict[str, Any], schema: Schema, path: _Path, out: list[str]
    ) -> None:
        self.check_size(len(value), schema, "Properties", "properties", path, out)
        for name in schema.get("required", []):
            if name not in value:
                out.append(f"{_where(path)}: missing required property {name!r}")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                self.check(item, properties[key], (path, key), out)
            elif extra is False:
                out.append(f"{_where(path)}: unexpected property {key!r}")
            else:
                self.check(item, extra, (path, key), out)
        names = schema.get("propertyNames", True)
        if names is not True:
            for key in value:
                self.check(key, names, f"{_where(path)}: property name {_show(key)}", out)

    def check_combinators(self, value: Any, schema: Schema, path: _Path, out: list[str]) -> None:
        for sub in schema.get("allOf", []):
            self.check(value, sub, path, out)
        if "anyOf" in schema:
            self.check_any_of(value, schema["anyOf"], path, out)
        if "oneOf" in schema:
            passing = sum(not self.errors(value, sub, path) for sub in schema["oneOf"])
            if passing != 1:
                out.append(f"{_where(path)}: must match exactly one alternative, matches {passing}")
        if "not" in schema and not self.errors(value, schema["not"], path):
            out.append(f"{_where(path)}: must not match {_show(schema['not'])}")

    def check_any_of(self, value: Any, options: list[Any], path: _Path, out: list[str]) -> None:
        found = []
        for sub in options:
            errors = self.errors(value, sub, path)
            if not errors:
                return
            found.append(errors)
        # Report the one alternative of the right type, or else what would have fitted.
        fitting = [
            errors for sub, errors in zip(options, found, strict=True) if self.fits(value, sub)
        ]
        if len(fitting) == 1:
            out.extend(fitting[0])
            return
        wanted = list(dict.fromkeys(self.describe(sub) for sub in options))
        out.append(f"{_where(path)}: expected {' or '.join(wanted)}, got {_type_name(value)}")

    def fits(self, value: Any, schema: Any) -> bool:
        """Whether ``value`` has a JSON type the schema allows (ignoring the rest)."""
        if not isinstance(schema, dict):
            return schema is True
        if "$ref" in schema:
            return self.fits(value, self.resolve(schema["$ref"]))
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            return any(has_type(value, n) for n in names)
        if "enum" in schema:
            return any(_type_name(value) == _type_name(v) for v in schema["enum"])
        if "anyOf" in schema:
            return any(self.fits(value, sub) for sub in schema["anyOf"])
        return True

    def describe(self, schema: Any) -> str:
        if not isinstance(schema, dict):
            return "anything" if schema is True else "nothing"
        if "$ref" in schema:
            return self.describe(self.resolve(schema["$ref"]))
        if "enum" in schema:
            return "one of " + ", ".join(_show(v) for v in schema["enum"])
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            return " or ".join(names)
        if "anyOf" in schema:
            return " or ".join(self.describe(sub) for sub in schema["anyOf"])
        return "a valid value"

    def check_schema(self, node: Any, where: str) -> None:
        """Raise ``ValueError`` if :meth:`check` cannot use ``node`` or its subschemas."""
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            raise ValueError(f"{where}: a schema is an object or a boolean, not {_show(node)}")
        unknown = node.keys() - self.known
        if unknown:
            names = ", ".join(repr(k) for k in sorted(unknown))
            raise ValueError(
                f"{where}: unsupported JSON Schema keyword(s) {names}; "
                "validate() implements: " + ", ".join(sorted(self.keywords))
            )
        if "$schema" in node and dialect_of(node) != self.dialect:
            raise ValueError(f"{where}: {_unsupported(node['$schema'], self.dialect)}")
        if where != "#" and "$id" in node:
            if self._rebasing is None:
                self._rebasing = rebasing_objects(self.root)
            if id(node) in self._rebasing:
                raise ValueError(
                    f"{where}: a $id below the root with a $ref under it (a new base URI"
                    " for $ref) is not supported: references resolve against the root"
                )
        try:
            if "$ref" in node:
                if not isinstance(node["$ref"], str):
                    raise ValueError(f"$ref {_show(node['$ref'])} is not a string")
                self.resolve(node["$ref"])
            if "pattern" in node:
                _regex(node["pattern"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if "type" in node:
            kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
            wrong = [k for k in kinds if k not in _TYPE_NAMES]
            if wrong:
                raise ValueError(f"{where}: unknown type(s) {wrong}")
        self.check_subschemas(node, where)

    def check_subschemas(self, node: Schema, where: str) -> None:
        """:meth:`check_schema` for each subschema of ``node``."""
        for key in sorted(_SUBSCHEMA & node.keys()):  # (the first problem, every run)
            self.check_schema(node[key], f"{where}/{key}")
        for key in sorted(_SUBSCHEMA_LISTS & node.keys()):
            self.check_schema_list(node[key], f"{where}/{key}")
        self.check_schema_maps(node, where)

    def check_schema_list(self, nodes: object, where: str) -> None:
        if not isinstance(nodes, list):
            raise ValueError(f"{where}: expected a list of schemas")
        for i, sub in enumerate(nodes):
            self.check_schema(sub, f"{where}/{i}")

    def check_schema_maps(self, node: Schema, where: str) -> None:
        for key in sorted(_SUBSCHEMA_MAPS & node.keys()):
            if not isinstance(node[key], dict):
                raise ValueError(f"{where}/{key}: expected an object of schemas")
            for name, sub in node[key].items():
                self.check_schema(sub, f"{where}/{key}/{_escape(name)}")


def _escape(name: object) -> str:
    """A JSON pointer's reference token (RFC 6901)."""
    return str(name).replace("~", "~0").replace("/", "~1")


def _unsupported(dialect: object, root: str) -> str:
    """The problem with a ``$schema`` of ``dialect`` in a schema whose root is in
    ``root``."""
    if dialect_of({"$schema": dialect}) is None:
        # basic/index.mdx: validate by the declared dialect, refuse one we do not have.
        return (
            f"unsupported JSON Schema dialect {_show(dialect)} (validate() implements "
            f"{JSON_SCHEMA_DIALECT} and {DRAFT_07_DIALECT})"
        )
    return (
        f"JSON Schema dialect {_show(dialect)} inside a schema in {root}: validate() takes"
        " one dialect per schema"
    )


@final
class _Draft07(_Validator):
    """The validator of a JSON Schema draft-07 schema: where draft-07 differs from
    2020-12 (see the module docs)."""

    dialect = DRAFT_07_DIALECT
    keywords = _KEYWORDS_07
    known = _KNOWN_07

    def check(self, value: Any, schema: Any, path: _Path, out: list[str]) -> None:
        if type(schema) is dict and "$ref" in schema:
            # Core §8.3: "All other properties in a "$ref" object MUST be ignored."
            self.check(value, self.resolve(schema["$ref"]), path, out)
            return
        super().check(value, schema, path, out)

    def check_array(self, value: list[Any], schema: Schema, path: _Path, out: list[str]) -> None:
        items = schema.get("items", True)
        if not isinstance(items, list):
            super().check_array(value, schema, path, out)  # additionalItems is ignored
            return
        # Validation §6.4.1-2: an array of schemas checks the items by position, and
        # additionalItems those past its end.
        self.check_size(len(value), schema, "Items", "items", path, out)
        if schema.get("uniqueItems"):
            self.check_unique(value, path, out)
        rest = schema.get("additionalItems", True)
        for i, item in enumerate(value):
            self.check(item, items[i] if i < len(items) else rest, (path, i), out)

    def check_object(
        self, value: dict[str, Any], schema: Schema, path: _Path, out: list[str]
    ) -> None:
        super().check_object(value, schema, path, out)
        # Validation §6.5.7: an array names the properties the key's presence requires;
        # a schema is one the whole object must match then.
        for key, needed in schema.get("dependencies", {}).items():
            if key not in value:
                continue
            if isinstance(needed, list):
                for name in needed:
                    if name not in value:
                        out.append(
                            f"{_where(path)}: missing property {name!r}, required with {key!r}"
                        )
            else:
                self.check(value, needed, path, out)

    def check_schema(self, node: Any, where: str) -> None:
        if isinstance(node, dict) and "$ref" in node:
            # Its siblings are no keywords (core §8.3), but a $ref may lead into the
            # definitions beside it.
            super().check_schema({"$ref": node["$ref"]}, where)
            self.check_schema_maps(node, where)
            return
        super().check_schema(node, where)

    def check_subschemas(self, node: Schema, where: str) -> None:
        items = node.get("items")
        if isinstance(items, list):
            self.check_schema_list(items, f"{where}/items")
            node = {k: v for k, v in node.items() if k != "items"}
        super().check_subschemas(node, where)
        if "additionalItems" in node:
            self.check_schema(node["additionalItems"], f"{where}/additionalItems")
        if "dependencies" in node:
            dependencies = node["dependencies"]
            if not isinstance(dependencies, dict):
                raise ValueError(f"{where}/dependencies: expected an object")
            for key, needed in dependencies.items():
                at = f"{where}/dependencies/{_escape(key)}"
                if not isinstance(needed, list):
                    self.check_schema(needed, at)
                elif not all(isinstance(name, str) for name in needed):
                    raise ValueError(f"{at}: expected a schema or a list of property names")


_VALIDATORS: Final[dict[str | None, type[_Validator]]] = {DRAFT_07_DIALECT: _Draft07}


def _validator(schema: Any) -> _Validator:
    """The validator of the dialect ``schema`` declares (a 2020-12 one for a dialect
    :func:`validate` does not implement, which its :meth:`~_Validator.check_schema`
    refuses)."""
    return _VALIDATORS.get(dialect_of(schema), _Validator)(schema)


MAX_PROBLEMS: Final = 20
"""How many problems :func:`validate` lists before it only counts the rest."""


def validate(
    instance: Any, schema: Schema, *, root: str = "arguments", max_problems: int = MAX_PROBLEMS
) -> list[str]:
    """Check decoded JSON against a schema; the list of problems, empty when valid.

    Each problem names where it is, from ``root``: ``"arguments.count: expected integer,
    got string"``; past ``max_problems`` a last entry only counts the rest (``"... and
    12 more problems"``). ``format`` is not enforced. Supported keywords: ``$ref`` (local),
    ``$defs``, ``type``, ``enum``, ``const``, ``anyOf``, ``allOf``, ``oneOf``, ``not``,
    the numeric bounds and ``multipleOf``, ``minLength``/``maxLength``, ``items``,
    ``prefixItems``, ``minItems``/``maxItems``, ``uniqueItems``, ``properties``,
    ``required``, ``additionalProperties``, ``minProperties``/``maxProperties``,
    ``propertyNames``, ``pattern`` (``re.search``, as the ``jsonschema`` package does), plus the
    annotations (``description``, ``default``, ``format``...). NaN and the infinities
    are no JSON numbers: they fail ``"type": "number"`` and ``"integer"``.

    Dialects: JSON Schema 2020-12 (a schema that declares no ``$schema``, or
    ``https://json-schema.org/draft/2020-12/schema``) and draft-07
    (``http://json-schema.org/draft-07/schema#``: what the TypeScript SDK's tools
    declare), by the root's ``$schema``. In draft-07, ``items`` may be an array of
    schemas, with ``additionalItems``; ``dependencies`` (property names or a schema)
    takes the place of ``prefixItems``; and a ``$ref`` makes the other keywords of its
    object ignored, as that draft says. ``propertyNames`` is in both.

    Raises:
        ValueError: the schema declares another dialect, uses a keyword outside that
            list, an unresolvable ``$ref`` or an invalid ``pattern``: a bug in whoever
            wrote the schema, never in the instance. :func:`check_schema` finds these
            up front.
    """
    kind = _Validator
    if type(schema) is dict and "$schema" in schema:  # (else the default, 2020-12)
        dialect = dialect_of(schema)
        if dialect is None:
            raise ValueError(_unsupported(schema["$schema"], JSON_SCHEMA_DIALECT))
        kind = _VALIDATORS.get(dialect, _Validator)
    try:
        problems = kind(schema).errors(instance, schema, root)
    except RecursionError:
        # Legal JSON may nest 1024 levels deep (the wire's parser allows that much), and
        # each level of a recursive type costs a few frames here: too deep is a problem
        # with the instance, to report like any other.
        return [f"{root}: nested too deeply to check"]
    if len(problems) > max_problems:  # an answer of the peer's size, not a message of it
        rest = len(problems) - max_problems
        problems[max_problems:] = [f"... and {rest} more problem{'s' if rest > 1 else ''}"]
    return problems


def _anything(value: object) -> bool:
    return True


_FLAT_ROOT: Final = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
_FLAT_LEAF: Final = _ANNOTATIONS | {"type"}


def _leaf_test(schema: object) -> Callable[[object], bool] | None:
    """The whole of :func:`validate` for a property schema that only names one type
    (or none), else ``None``: past the type, :meth:`_Validator.check` finds nothing to
    check in such a schema, whatever the value (items and members of any schema)."""
    if schema is True:
        return _anything
    if type(schema) is not dict or not _FLAT_LEAF.issuperset(schema):
        return None
    if "type" not in schema:
        return _anything
    kind = schema["type"]
    return _TYPE_TESTS.get(kind) if type(kind) is str else None


def flat_object_test(schema: Schema) -> Callable[[Any], bool] | None:
    """A yes/no twin of :func:`validate` for the plainest object schemas, built once.

    For a schema of ``"type": "object"`` whose ``properties`` each name one type (or
    none), with ``required`` names and ``additionalProperties`` ``true``/``false``/absent
    (annotations anywhere) -- what ``@server.tool()`` makes of a function of plain
    parameters -- the test returns whether ``validate(instance, schema)`` finds no
    problem, without a walk over the schema. ``None`` for any other schema. Use
    :func:`validate` when the test says no: it lists the problems.
    """
    if (
        type(schema) is not dict
        or not _FLAT_ROOT.issuperset(schema)
        or schema.get("type") != "object"
    ):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (
        type(properties) is not dict
        or type(required) is not list
        or not all(type(name) is str for name in required)
        or type(extra) is not bool
    ):
        return None
    tests: dict[str, Callable[[object], bool]] = {}
    for name, sub in properties.items():
        test = _leaf_test(sub)
        if test is None:
            return None
        tests[name] = test
    return _FlatObject(tests, tuple(required), _anything if extra else None)


@final
class _FlatObject:
    """:func:`flat_object_test`'s test: the type test of each property, by name."""

    __slots__ = ("_extra", "_required", "_tests")

    def __init__(
        self,
        tests: dict[str, Callable[[object], bool]],
        required: tuple[str, ...],
        extra: Callable[[object], bool] | None,
    ) -> None:
        self._tests = tests
        self._required = required
        self._extra = extra  # (None: no other member allowed)

    def __call__(self, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for name in self._required:
            if name not in value:
                return False
        tests, extra = self._tests, self._extra
        for key, item in value.items():
            test = tests.get(key, extra)
            if test is None or not test(item):
                return False
        return True


_EXACT_TESTS: Final[dict[type, tuple[Callable[[object], bool], ...]]] = {
    str: (_anything, _TYPE_TESTS["string"]),
    int: (_anything, _TYPE_TESTS["integer"], _TYPE_TESTS["number"]),
    bool: (_anything, _TYPE_TESTS["boolean"]),
}
"""The property tests that every value of exactly the type passes (not ``float``: NaN
and the infinities fail ``"number"``)."""


def _exact_types(value: dict[str, Any], kind: Callable[[str], type | None]) -> bool:
    """Whether each member of ``value`` is of exactly the type ``kind`` gives for its
    name: in C iterators, keys and values in step (no Python bytecode per member)."""
    return all(map(operator.is_, map(type, value.values()), map(kind, value)))


def plain_object_test(
    test: Callable[[Any], bool] | None, plain: dict[str, type] | None
) -> Callable[[Any], bool] | None:
    """One yes/no test for what two would say: whether an object passes ``test`` (a
    :func:`flat_object_test`) and is made of exactly the types ``plain`` names (each
    member's type by name: a function's plain parameters), in one loop over it.

    A yes means both say yes; a no means nothing (ask them). ``None`` when ``test`` is
    not a flat object test, or some type ``plain`` names is not one that passes its
    property's test for every value (``float``: NaN; a property of another type, or
    none allowed).
    """
    if not isinstance(test, _FlatObject) or not plain:
        return None
    for name, kind in plain.items():
        if test._tests.get(name, test._extra) not in _EXACT_TESTS.get(kind, ()):
            return None
    required = test._required
    members = plain.get
    if set(required) == set(plain):
        # Every member named and none twice: all present when there are as many.
        count = len(plain)

        def test_all(value: Any) -> bool:
            if type(value) is not dict or len(value) != count:
                return False
            return _exact_types(value, members)

        return test_all

    def test_some(value: Any) -> bool:
        if type(value) is not dict or not _exact_types(value, members):
            return False
        for name in required:  # noqa: SIM110 (the same)
            if name not in value:
                return False
        return True

    return test_some


def check_schema(schema: Schema) -> None:
    """Check up front that :func:`validate` can use ``schema``, everywhere in it.

    :func:`validate` only sees the parts of a schema an instance leads it to, so a
    keyword it does not implement would otherwise surface on some later call.

    Raises:
        ValueError: a keyword :func:`validate` does not implement, an unknown ``type``,
            an invalid ``pattern``, a ``$ref`` that is not local or does not resolve, or
            one under a ``$id`` below the root (a new base URI); the message says where
            (as a JSON pointer: ``#/properties/name``).
    """
    _validator(schema).check_schema(schema, "#")

"""JSON Schema 2020-12 from Python type hints and docstrings, and a validator for it.

The building blocks of ``@server.tool()``: a tool's ``inputSchema`` and ``outputSchema``
come from its signature, its arguments are validated against the schema *before* the
handler runs, then structured into the annotated Python types; its return value is turned
back into JSON. Spec: ``specification/2025-11-25/server/tools`` and the "JSON Schema Usage"
section of ``specification/2025-11-25/basic``.

Theory of operation
-------------------
**Schema decisions** (the ones a user will notice):

* Objects are closed: the input schema and every class (attrs, dataclass, TypedDict) get
  ``"additionalProperties": false``. The spec recommends it for tools without parameters;
  for the rest, an argument the tool does not take is almost always a model's typo, and
  saying so ("unexpected property 'qeury'") lets the model correct itself, where silently
  dropping it would not. A ``**kwargs: T`` parameter opens the input object to values of
  type ``T``.
* ``T | None`` is ``{"anyOf": [<T>, {"type": "null"}]}``: one style for every union, which
  also works when ``T`` is a ``$ref`` or an enum. A parameter is required when it has no
  default, whatever its type (``x: int | None`` must be given, possibly as ``null``).
* ``default`` is written when the default value is JSON-able (after :func:`to_jsonable`)
  and valid against the schema it is the default of: ``limit: int = None`` has none (a
  model that sent ``null`` would be refused).
* ``integer`` follows JSON Schema: ``1.0`` is an integer, ``True`` is not. An ``int``
  argument takes a float only below 2**53, where it is one integer exactly: orjson reads
  an integer wider than 64 bits as a rounded float, which must not reach the function as
  another number than the one sent (refused by :func:`coerce_arguments`).
* ``enum.Flag`` (and ``IntFlag``) is refused: a schema of its members refuses their
  combinations, the point of a flag, and one of every combination would be huge.
* Named types (enums and classes) are built into ``$defs``; when done, a definition used
  exactly once and not recursive is inlined where it is used, because many clients handle
  ``$ref`` poorly. What stays in ``$defs`` is what must: shared and recursive types.
* No ``title``s: the property name already says it, and they cost tokens in every prompt.
* Descriptions come from, in order: ``Annotated[T, Description("...")]`` (or a plain
  string, pydantic's ``Field(description=...)`` or PEP 727's ``Doc("...")`` in
  ``Annotated``); for a class field, the docstring under the field; the docstring's
  ``Args:``/``Attributes:`` section (Google), ``:param x:`` (Sphinx) or ``Parameters``
  (NumPy). A function's or class's description is the first paragraph of its docstring.
* Bounds in ``Annotated`` become JSON Schema keywords, so :func:`validate` checks them
  before the tool runs and the model sees them: :class:`Constraints`; annotated-types'
  ``Gt``/``Ge``/``Lt``/``Le``/``Interval`` (``exclusiveMinimum``/``minimum``/...),
  ``MultipleOf`` (``multipleOf``, JSON Schema's meaning: the quotient is an integer),
  ``MinLen``/``MaxLen``/``Len`` (``minLength``, ``minItems`` or ``minProperties`` by the
  JSON type); pydantic's ``Field(...)`` (its ``ge``..., ``pattern``, ``description``,
  ``title``, ``examples``, ``deprecated``, a dict ``json_schema_extra``) and
  ``StringConstraints``. A ``Field(...)`` as a parameter's *default* (``days: int =
  Field(1, ge=1)``, the official SDK's idiom) gives the default (its factory is called
  per call) and the same keywords. These are recognised by the classes they derive
  from, looked up by name: neither library is imported, nor a dependency. Metadata of
  theirs with no JSON Schema equivalent is a ``TypeError`` at registration saying what
  to write instead, never dropped: ``Predicate``, ``Timezone`` (but ``Timezone(...)``:
  date-times are aware anyway), pydantic's validators and value transforms
  (``AfterValidator``, ``strip_whitespace``...), an ``alias`` other than the name
  (arguments go by the parameter's name), a bound on a type it does not apply to
  (``Annotated[str, Ge(1)]``, or a date). ``strict`` passes: arguments are never
  converted between JSON types. Metadata objects of any other library are ignored.
* Output: MCP wants ``outputSchema`` to be an object. An object-like return type (attrs,
  dataclass, TypedDict, ``dict[str, T]``) is used as it is; anything else (``int``,
  ``list[Point]``, ``Point | None``...) is wrapped as ``{"result": <schema>}`` and so must
  the ``structuredContent`` be (:func:`to_structured_content` does it). No annotation,
  ``None``, ``Any`` and MCP content types (``TextContent``..., ``CallToolResult``, or any
  class with ``__mcp_content__ = True``) give no output schema. Next to content types, in
  a union or a list (``str | Image``, ``list[str | Image]``), ``str`` is text and
  ``bytes`` an image: content too. Content classes are never data: a union of them with
  data (``dict | Image``) and a content class inside data (``dict[str, Image]``) are a
  ``TypeError`` when the tool is registered. ``InputRequiredResult`` in a return type is
  left out: it is answered as it is, never converted.

**Validation** is a small validator for the schemas we generate, plus the usual keywords
around them (see :func:`validate`); it refuses keywords it does not implement instead of
ignoring them, so it is never silently wrong, and :func:`check_schema` finds those in a
whole schema up front (a verbatim ``outputSchema`` is checked when its tool is
registered, not on each call). The tests check it agrees with the ``jsonschema`` package.
It lives in :mod:`mcp_trio._validation` (re-exported here), which imports neither cattrs
nor trio, so that the blocking client checks ``tools/call`` results with it too.

**Structuring** (:func:`coerce_arguments`) uses a cattrs converter private to this module.
Unions are resolved by validating the value against each member's schema, in order: the
first member that fits wins, so ``int | str`` and ``Cat | Dog`` work without guesswork.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import datetime as dt
import enum
import functools
import inspect
import math
import re
import textwrap
import types
import uuid
from collections import Counter
from collections.abc import (
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    MutableSequence,
    MutableSet,
    Sequence,
)
from collections.abc import Set as AbstractSet
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    NewType,
    NotRequired,
    Required,
    TypeVar,
    Union,
    cast,
    final,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

import attrs
import cattrs
from cattrs.v import format_exception

from ._handlers import InputRequiredResult
from ._typed import loaded_models
from ._validation import (
    MAX_PROBLEMS,
    Schema,
    _canonical,
    _child,
    _json_type,
    _show,
    check_schema,
    has_type,
    json_objects,
    validate,
)

__all__ = [
    "MAX_PROBLEMS",
    "Constraints",
    "Description",
    "check_schema",
    "coerce_arguments",
    "function_description",
    "function_input_schema",
    "function_output_schema",
    "has_type",
    "is_context_type",
    "to_jsonable",
    "to_structured_content",
    "type_schema",
    "validate",
]


@final
@attrs.frozen
class Description:
    """A description for a parameter or field: ``Annotated[int, Description("How many")]``.

    A plain string in ``Annotated`` (``Annotated[int, "How many"]``) means the same.
    """

    text: str
    """The description, in plain text or Markdown."""


@final
@attrs.frozen(kw_only=True)
class Constraints:
    """Bounds for a parameter or field: ``Annotated[int, Constraints(minimum=1)]``.

    Each one becomes the JSON Schema keyword of the same meaning and is checked by
    :func:`validate` before the tool runs.
    """

    minimum: float | None = None
    """``minimum``: numbers must be ``>=`` this."""
    maximum: float | None = None
    """``maximum``: numbers must be ``<=`` this."""
    exclusive_minimum: float | None = None
    """``exclusiveMinimum``: numbers must be ``>`` this."""
    exclusive_maximum: float | None = None
    """``exclusiveMaximum``: numbers must be ``<`` this."""
    min_length: int | None = None
    """``minLength``: strings need at least this many characters."""
    max_length: int | None = None
    """``maxLength``: strings may have at most this many characters."""
    min_items: int | None = None
    """``minItems``: arrays need at least this many items."""
    max_items: int | None = None
    """``maxItems``: arrays may have at most this many items."""
    pattern: str | None = None
    """``pattern``: strings must contain a match of this regular expression (anywhere,
    as JSON Schema says: anchor it with ``^...$`` to match the whole string). Checked
    with Python's ``re``; an invalid one is a ``TypeError`` when the tool is registered."""

    def keywords(self) -> Schema:
        """The JSON Schema keywords, without the unset ones."""
        names = {
            "minimum": self.minimum,
            "maximum": self.maximum,
            "exclusiveMinimum": self.exclusive_minimum,
            "exclusiveMaximum": self.exclusive_maximum,
            "minLength": self.min_length,
            "maxLength": self.max_length,
            "minItems": self.min_items,
            "maxItems": self.max_items,
            "pattern": self.pattern,
        }
        return {key: value for key, value in names.items() if value is not None}


# --------------------------------------------------------------------------------------
# Docstrings

_GOOGLE_SECTION = re.compile(
    r"(?P<indent>\s*)(?:Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments"
    r"|Other Parameters|Attributes|Fields):\s*"
)
_ANY_GOOGLE_SECTION = re.compile(r"\s*[A-Z][A-Za-z ]{1,30}:\s*")
_GOOGLE_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")
_SPHINX_FIELD = re.compile(
    r":(?:param|parameter|arg|argument|key|keyword|ivar|var|cvar)\s+"
    r"(?:[^:]*?\s)?\*{0,2}(?P<name>\w+)\s*:(?P<text>.*)"
)
_SPHINX_ANY_FIELD = re.compile(r":\w+[^:]*:")
_NUMPY_SECTIONS = ("Parameters", "Other Parameters", "Attributes")
_NUMPY_UNDERLINE = re.compile(r"\s*-{3,}\s*")
_NUMPY_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+)\s*(?::.*)?")


@attrs.frozen
class _Doc:
    summary: str | None
    params: dict[str, str]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines)
        and bool(lines[i].strip())
        and bool(_NUMPY_UNDERLINE.fullmatch(lines[i + 1]))
    )


def _parse_doc(doc: str | None) -> _Doc:
    """The first paragraph and the per-parameter texts of a docstring (three styles).

    ``doc`` must be cleaned once (``inspect.getdoc``/``cleandoc``): cleaning again would
    lose the indentation of a section that starts on the first line.
    """
    if not doc:
        return _Doc(None, {})
    lines = doc.splitlines()
    summary: list[str] = []
    for i, line in enumerate(lines):
        if (
            not line.strip()
            or _ANY_GOOGLE_SECTION.fullmatch(line)
            or _SPHINX_ANY_FIELD.match(line)
            or _is_numpy_header(lines, i)
        ):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if google := _GOOGLE_SECTION.fullmatch(line):
            # Cleaning strips the first line on its own: its entries may look unindented.
            indent = -1 if i == 0 else len(google.group("indent"))
            i = _parse_google(lines, i + 1, indent, params)
        elif sphinx := _SPHINX_FIELD.match(line):
            i = _collect(lines, i + 1, _indent(line), sphinx, params)
        elif line.strip() in _NUMPY_SECTIONS and _is_numpy_header(lines, i):
            i = _parse_numpy(lines, i + 2, _indent(line), params)
        else:
            i += 1
    return _Doc(" ".join(summary) or None, params)


def _collect(
    lines: list[str], i: int, indent: int, entry: re.Match[str], params: dict[str, str]
) -> int:
    """Add one entry's text, continued by the lines indented deeper than ``indent``."""
    text = [entry.group("text").strip()]
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        text.append(lines[i].strip())
        i += 1
    params.setdefault(entry.group("name"), " ".join(t for t in text if t))
    return i


def _parse_google(lines: list[str], i: int, indent: int, params: dict[str, str]) -> int:
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif _indent(line) <= indent or (indent < 0 and _ANY_GOOGLE_SECTION.fullmatch(line)):
            break
        elif entry := _GOOGLE_ENTRY.fullmatch(line.strip()):
            i = _collect(lines, i + 1, _indent(line), entry, params)
        else:
            i += 1
    return i


def _parse_numpy(lines: list[str], i: int, indent: int, params: dict[str, str]) -> int:
    while i < len(lines) and not _is_numpy_header(lines, i):
        line = lines[i]
        if line.strip() and _indent(line) == indent:
            entry = _NUMPY_ENTRY.fullmatch(line.strip())
            i += 1
            text: list[str] = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
                text.append(lines[i].strip())
                i += 1
            if entry is not None:
                params.setdefault(entry.group("name"), " ".join(t for t in text if t))
        else:
            i += 1
    return i


def _class_doc(cls: type) -> str | None:
    """The class's own docstring, cleaned, without the one ``dataclasses`` makes up."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return None
    # dataclasses writes "Name(field: type, ...)", or just "Name" without a signature.
    name = cls.__name__
    if dataclasses.is_dataclass(cls) and (
        doc == name or (doc.startswith(f"{name}(") and doc.endswith(")"))
    ):
        return None
    return inspect.cleandoc(doc)


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """The string literals written right under the class's annotated fields."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source: a dynamic class, a REPL...
        return {}
    node = tree.body[0]
    assert isinstance(node, ast.ClassDef)  # getsource gives the class, decorators and all
    docs: dict[str, str] = {}
    for field, after in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def function_description(fn: Callable[..., Any]) -> str | None:
    """The first paragraph of ``fn``'s docstring, on one line; ``None`` if it has none."""
    return _parse_doc(inspect.getdoc(fn)).summary


# --------------------------------------------------------------------------------------
# Type hints

_NoneType = type(None)
_ARRAY_ORIGINS: set[object] = {list, Sequence, MutableSequence}
_SET_ORIGINS: set[object] = {set, frozenset, AbstractSet, MutableSet}
_MAP_ORIGINS: set[object] = {dict, Mapping, MutableMapping}
_SCALARS: dict[type, Schema] = {
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bytes: {"type": "string", "contentEncoding": "base64"},
    dt.datetime: {"type": "string", "format": "date-time"},
    dt.date: {"type": "string", "format": "date"},
    dt.time: {"type": "string", "format": "time"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}


def _is_union(tp: object) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _strip(tp: Any) -> Any:
    """``tp`` without ``Annotated``, ``Required`` and ``NotRequired`` wrappers."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = tp.__origin__
        elif origin in (Required, NotRequired):
            tp = get_args(tp)[0]
        else:
            return tp


def _is_marked(tp: object, marker: str) -> bool:
    """Whether ``tp`` (or all non-None members of a union) has ``marker = True``."""
    tp = _strip(tp)
    if _is_union(tp):
        members = [m for m in get_args(tp) if m is not _NoneType]
        return bool(members) and all(_is_marked(m, marker) for m in members)
    cls = get_origin(tp) or tp
    return isinstance(cls, type) and getattr(cls, marker, False) is True


def is_context_type(tp: object) -> bool:
    """Whether a parameter annotated ``tp`` receives the request's context (a class with
    ``__mcp_context__ = True``, possibly ``Annotated`` or ``| None``): such parameters
    are no arguments."""
    return _is_marked(tp, "__mcp_context__")


def _is_class_like(tp: object) -> bool:
    return isinstance(tp, type) and (
        attrs.has(tp) or dataclasses.is_dataclass(tp) or is_typeddict(tp)
    )


def _class_hints(cls: type) -> dict[str, Any]:
    try:
        return get_type_hints(cls, localns={cls.__name__: cls}, include_extras=True)
    except Exception as exc:  # any error evaluating user annotations
        message = f"cannot resolve the annotations of {cls.__qualname__}: {exc}"
        raise _UnresolvedAnnotations(message) from exc


class _Missing(enum.Enum):
    MISSING = enum.auto()


_MISSING = _Missing.MISSING


class _UnresolvedAnnotations(TypeError):
    pass


@attrs.frozen
class _Field:
    name: str
    hint: Any
    required: bool
    default: Any = _MISSING


def _class_fields(cls: type) -> list[_Field]:
    hints = _class_hints(cls)
    if attrs.has(cls):
        out = []
        for a in attrs.fields(cls):
            if not a.init:
                continue
            has_default = a.default is not attrs.NOTHING
            factory = isinstance(a.default, attrs.Factory)  # type: ignore[arg-type]
            default = a.default if has_default and not factory else _MISSING
            out.append(_Field(a.name, hints.get(a.name, Any), not has_default, default))
        return out
    if dataclasses.is_dataclass(cls):
        return [
            _Field(
                f.name,
                hints.get(f.name, Any),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                _MISSING if f.default is dataclasses.MISSING else f.default,
            )
            for f in dataclasses.fields(cls)
            if f.init
        ]
    return [
        _Field(name, hint, _typeddict_required(cls, name, hint)) for name, hint in hints.items()
    ]


def _typeddict_required(cls: Any, name: str, hint: Any) -> bool:
    # With postponed annotations Python 3.11 cannot see Required/NotRequired when the class
    # is created, so __required_keys__ only reflects totality; the resolved hint decides.
    while get_origin(hint) is Annotated:
        hint = hint.__origin__
    if get_origin(hint) is Required:
        return True
    if get_origin(hint) is NotRequired:
        return False
    return name in cls.__required_keys__


# ------------------------------------------------------------------ Annotated metadata
#
# annotated-types and pydantic are read, never imported (neither is a dependency): their
# objects are known by the classes they derive from, looked up by name, and read through
# their documented attributes.

_METADATA_LIBRARIES = ("annotated_types", "pydantic")
#: The JSON types each keyword of :class:`Constraints` constrains (elsewhere ignored).
_CONSTRAINED: Final[dict[str, str]] = {
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), "number"),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), "string"),
    **dict.fromkeys(("minItems", "maxItems"), "array"),
}
_BOUND_KEYWORDS = {
    "gt": "exclusiveMinimum",
    "ge": "minimum",
    "lt": "exclusiveMaximum",
    "le": "maximum",
}
_LENGTH_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
#: Constraints every argument meets already: JSON values are never converted between
#: types (pydantic's ``strict``), a JSON number is finite (``allow_inf_nan``); the
#: rest say how pydantic reports or tries (``fail_fast``, ``union_mode``) or only
#: annotate (``unit``).
_SATISFIED = frozenset({"strict", "allow_inf_nan", "fail_fast", "union_mode", "unit"})
_INSTEAD = (
    "use bounds, lengths or a pattern (annotated-types Ge/Le/Gt/Lt/Interval/MultipleOf/"
    "MinLen/MaxLen/Len, pydantic Field(ge=..., pattern=...), or mcp_trio.Constraints),"
    " or check the value in the function and raise ToolError"
)
_WHY_NOT = {
    "func": (
        "a predicate is Python code, which no JSON Schema states (the model would never see"
        " the rule): " + _INSTEAD
    ),
    "strip_whitespace": "it changes the value; do that in the function",
    "to_upper": "it changes the value; do that in the function",
    "to_lower": "it changes the value; do that in the function",
    "coerce_numbers_to_str": (
        "arguments are never converted between JSON types: take `str | int | float`"
    ),
    "max_digits": "Decimal arguments are not supported: take a str or a float",
    "decimal_places": "Decimal arguments are not supported: take a str or a float",
}


def _class_derives(cls: type, module: str, name: str) -> bool:
    """Whether ``cls`` is, or derives from, the class ``module.name`` (compared by name:
    the library need not be imported)."""
    return any(c.__module__ == module and c.__name__ == name for c in cls.__mro__)


def _library_of(meta: object) -> str | None:
    """``"annotated_types"`` or ``"pydantic"`` when ``meta``'s class (or a base) comes
    from that library."""
    for cls in type(meta).__mro__:
        top = cls.__module__.partition(".")[0]
        if top in _METADATA_LIBRARIES:
            return top
    return None


def _label(meta: object) -> str:
    return f"{_library_of(meta) or type(meta).__module__}.{type(meta).__name__}"


def _is_doc(meta: object) -> bool:
    """Whether ``meta`` is PEP 727's ``Doc("...")`` (``typing_extensions.Doc``,
    ``annotated_types.doc``): a description."""
    return type(meta).__name__ == "Doc" and isinstance(getattr(meta, "documentation", None), str)


def _metadata_values(meta: object) -> dict[str, Any]:
    """The attributes an annotated-types constraint is made of: its dataclass fields
    (``Ge(1)``: ``{"ge": 1}``), or else its instance dictionary (pydantic keeps
    ``pattern`` and others so); unset ones (``None``) left out, but for
    ``Timezone(None)``, which means naive."""
    if dataclasses.is_dataclass(meta):
        values = {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)}
    else:
        values = dict(getattr(meta, "__dict__", {}))
    return {k: v for k, v in values.items() if v is not None or k == "tz"}


def _is_pydantic_model(tp: object) -> bool:
    """Whether ``tp`` is a subclass of pydantic's ``BaseModel``."""
    return isinstance(tp, type) and _class_derives(tp, "pydantic.main", "BaseModel")


def _is_field_info(value: object) -> bool:
    """Whether ``value`` is a pydantic ``FieldInfo`` (what ``Field(...)`` returns)."""
    return _class_derives(type(value), "pydantic.fields", "FieldInfo")


def _field_default(info: Any, *, call: bool) -> Any:
    """The default of a ``FieldInfo`` given as a parameter's default: its ``default``,
    or with ``call`` its ``default_factory()``; ``_MISSING`` when it has none (the
    argument is required) or only a factory and not ``call`` (a schema shows no
    default that may change from call to call)."""
    if info.is_required():
        return _MISSING
    factory = getattr(info, "default_factory", None)
    if factory is None:
        return info.default
    return factory() if call else _MISSING


def _json_default(value: object) -> tuple[bool, Any]:
    try:
        out = to_jsonable(value)
    except (TypeError, ValueError):
        return False, None
    return True, out


class _Builder:
    """Builds schemas, collecting named types into ``$defs``."""

    def __init__(self) -> None:
        self.defs: dict[str, Schema] = {}
        self.names: dict[object, str] = {}
        self.where: list[str] = []

    def error(self, message: str) -> TypeError:
        return TypeError(f"{' in '.join(reversed(self.where))}: {message}")

    def default(self, prop: Schema, value: object, tp: Any) -> None:
        """Write ``value`` as ``prop``'s ``default`` when it is JSON-able, valid against
        ``prop`` (JSON Schema 2020-12, meta-data: "It is RECOMMENDED that a default value be
        valid against the associated schema") and taken as a value of ``tp`` (the type
        the schema is of): a model that sends the announced default must not be refused
        (``limit: int = None`` announces none; nor does a naive ``datetime``, whose
        JSON lacks the offset an RFC 3339 date-time requires, which the schema's
        ``format`` alone does not check)."""
        ok, data = _json_default(value)
        if not ok:
            return
        root = {**prop, "$defs": self.defs} if self.defs else prop
        try:
            if validate(data, root):
                return
        except ValueError:  # (a keyword the validator lacks: unknown, so not written)
            return
        try:
            _converter.structure(data, tp)
        except Exception:  # (any refusal: the call would refuse it too)
            return
        prop["default"] = data

    def schema(self, tp: Any, field: str | None = None) -> Schema:
        """The schema of ``tp``; ``field``: the name of the parameter or class field
        whose type ``tp`` is (a pydantic ``Field(alias=...)`` is checked against it)."""
        if get_origin(tp) is Annotated:
            out = self.schema(tp.__origin__)
            for meta in tp.__metadata__:
                self.annotate(out, meta, field)
            return out
        if get_origin(tp) in (Required, NotRequired):
            return self.schema(get_args(tp)[0], field)
        if tp is Any or tp is object:
            return {}
        if tp is None or tp is _NoneType:
            return {"type": "null"}
        if isinstance(tp, NewType):
            return self.schema(tp.__supertype__)
        if get_origin(tp) is Literal:
            return _literal_schema(get_args(tp), self)
        if _is_union(tp):
            members = [self.schema(m) for m in get_args(tp)]
            if {} in members:
                return {}
            return {"anyOf": members}
        if isinstance(tp, type):
            if _is_marked(tp, "__mcp_content__"):
                raise self.error(
                    f"{tp.__qualname__} is MCP content, not JSON data: it has no JSON Schema"
                    " (a tool may return it, alone or in a list, but not inside other data)"
                )
            if issubclass(tp, enum.Flag):  # (IntFlag too)
                raise self.error(
                    f"{tp.__qualname__} is an enum.Flag: its values combine (A|B), and no"
                    " honest JSON Schema lists the combinations; take a set of a plain Enum"
                    " (set[...]) or an int instead"
                )
            if issubclass(tp, enum.Enum):
                return self.named(tp, self.enum_schema)
            if _is_class_like(tp):
                return self.named(tp, self.object_schema)
            for scalar, schema in _SCALARS.items():
                if issubclass(tp, scalar):
                    return dict(schema)
        return self.generic(tp)

    # ---------------------------------------------------------------- Annotated metadata

    def annotate(self, out: Schema, meta: object, field: str | None) -> None:
        """Apply one ``Annotated`` metadata object to ``out``, the schema it annotates.

        Ours (a string, :class:`Description`, :class:`Constraints`), annotated-types'
        and pydantic's are translated (see the module docstring); an object of either
        library that has no JSON Schema equivalent is a ``TypeError`` saying what to
        write instead. Anything else (another library's metadata) is left alone.
        """
        if isinstance(meta, str):
            out["description"] = meta
        elif isinstance(meta, Description):
            out["description"] = meta.text
        elif isinstance(meta, Constraints):
            if meta.pattern is not None:
                self.pattern(meta.pattern, "Constraints")
            keywords = meta.keywords()
            for keyword in keywords:  # (a bound JSON Schema would ignore: said, not dropped)
                self.need(out, {_CONSTRAINED[keyword]}, f"Constraints({keyword})")
            out.update(keywords)
        elif _is_field_info(meta):
            self.field_info(out, meta, field, in_annotated=True)
        elif getattr(meta, "__is_annotated_types_grouped_metadata__", False) is True:
            # annotated-types' GroupedMetadata (Interval, Len, pydantic's
            # StringConstraints): "Parsers should recognize this and unpack it".
            for part in cast("Iterable[object]", meta):
                self.annotate(out, part, field)
        elif _class_derives(type(meta), "annotated_types", "BaseMetadata"):
            self.constraint(out, meta)
        elif _is_doc(meta):
            out["description"] = cast("Any", meta).documentation
        elif _library_of(meta) is not None:
            raise self.error(
                f"{_label(meta)} has no JSON Schema equivalent, so the model would never see"
                f" the rule and it would not be checked: {_INSTEAD}"
            )

    def field_info(self, out: Schema, info: Any, field: str | None, *, in_annotated: bool) -> None:
        """Apply a pydantic ``FieldInfo`` (what ``Field(...)`` returns) to ``out``: its
        description, title, examples and constraints (its ``metadata``)."""
        if in_annotated and not info.is_required():
            raise self.error(
                "a default inside Annotated[..., Field(...)] (pydantic refuses it too):"
                " write it as the default, `x: Annotated[int, Field(ge=1)] = 1`"
            )
        if getattr(info, "default_factory_takes_validated_data", None):
            raise self.error(
                "a default_factory that takes the validated data: mcp-trio calls it with"
                " no argument; compute the value in the function instead"
            )
        for name in ("alias", "validation_alias", "serialization_alias"):
            alias = getattr(info, name, None)
            if field is not None and alias is not None and alias != field:
                raise self.error(
                    f"Field({name}={alias!r}) would make the argument's name on the wire"
                    f" other than {field!r}, and mcp-trio passes arguments by their"
                    f" parameter's name: rename the parameter to {alias!r} instead"
                )
        extra = getattr(info, "json_schema_extra", None)
        if extra is not None and not isinstance(extra, Mapping):
            raise self.error("Field(json_schema_extra=<a function>): give the keywords as a dict")
        for meta in getattr(info, "metadata", None) or ():
            self.annotate(out, meta, field)
        if isinstance(title := getattr(info, "title", None), str):
            out["title"] = title
        if isinstance(description := getattr(info, "description", None), str):
            out["description"] = description
        if (examples := getattr(info, "examples", None)) is not None:
            try:
                out["examples"] = to_jsonable(list(examples))
            except TypeError as exc:
                raise self.error(f"Field(examples=...): {exc}") from None
        if getattr(info, "deprecated", None):
            out["deprecated"] = True
        if extra:
            try:
                keywords = to_jsonable(extra)
                check_schema(keywords)
            except (TypeError, ValueError) as exc:
                raise self.error(f"Field(json_schema_extra=...): {exc}") from None
            out.update(keywords)

    def constraint(self, out: Schema, meta: object) -> None:
        """Apply one annotated-types constraint (``Ge(1)``, ``MaxLen(3)``...; pydantic's
        own derive from the same base: ``Strict``, its ``pattern``...) to ``out``, by
        its documented attributes."""
        label = _label(meta)
        values = _metadata_values(meta)
        if not values:
            raise self.error(f"{label} has no JSON Schema equivalent: {_INSTEAD}")
        for key, value in values.items():
            if key in _BOUND_KEYWORDS:
                self.bound(out, _BOUND_KEYWORDS[key], value, label)
            elif key == "multiple_of":
                self.bound(out, "multipleOf", value, label)
            elif key in ("min_length", "max_length"):
                self.length(out, key, value, label)
            elif key == "pattern":
                self.need(out, {"string"}, label)
                out["pattern"] = self.pattern(value, label)
            elif key == "tz" and value is Ellipsis:
                pass  # aware, any offset: what every date-time argument is
            elif key == "tz":
                raise self.error(
                    f"{label}: a date-time argument always has an offset (RFC 3339), and"
                    " any offset is taken: drop it, and convert in the function"
                    " (value.astimezone(...))"
                )
            elif key not in _SATISFIED:
                why = _WHY_NOT.get(key, _INSTEAD)
                raise self.error(f"{label} ({key}) has no JSON Schema equivalent: {why}")

    def bound(self, out: Schema, keyword: str, value: object, label: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(
                f"{label}: a JSON Schema bound is a number, not {type(value).__name__}"
                " (dates, strings... cannot be bounded in a schema): check it in the function"
            )
        if not math.isfinite(value) or (keyword == "multipleOf" and value <= 0):
            raise self.error(f"{label}: {value!r} is no valid {keyword}")
        self.need(out, {"integer", "number"}, label)
        out[keyword] = value

    def length(self, out: Schema, key: str, value: object, label: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.error(f"{label}: a length is an int >= 0, not {value!r}")
        kinds = self.need(out, set(_LENGTH_KEYWORDS), label)
        for kind, (low, high) in _LENGTH_KEYWORDS.items():
            if kinds is None or kind in kinds:
                out[low if key == "min_length" else high] = value

    def need(self, out: Schema, wanted: set[str], label: str) -> set[str] | None:
        """The JSON types ``out`` admits (``None``: any); a ``TypeError`` if none of
        them is one ``label`` constrains (JSON Schema would ignore it: silently)."""
        kinds = self.kinds(out)
        if "number" in wanted:
            wanted = wanted | {"integer"}
        if kinds is not None and not kinds & wanted:
            names = " or ".join(sorted(kinds))
            raise self.error(f"{label} does not apply to {names} values")
        return kinds

    def kinds(self, schema: Schema) -> set[str] | None:
        """The JSON types ``schema`` admits, as far as its ``type``, ``enum``,
        ``anyOf`` and references say; ``None``: it does not say (any)."""
        name = _ref_name(schema)
        if name is not None:
            target = self.defs.get(name)
            return self.kinds(target) if target else None  # (empty: still being built)
        kind = schema.get("type")
        if isinstance(kind, str):
            return {kind}
        if "enum" in schema:
            return {_json_type(v) or "?" for v in schema["enum"]}
        if "anyOf" in schema:
            found: set[str] = set()
            for member in schema["anyOf"]:
                more = self.kinds(member)
                if more is None:
                    return None
                found |= more
            return found
        return None

    def pattern(self, value: object, label: str) -> str:
        if not isinstance(value, str):
            raise self.error(f"{label}: a pattern is a string, not {type(value).__name__}")
        try:
            re.compile(value)
        except re.error as exc:
            raise self.error(f"{label}: invalid pattern {value!r}: {exc}") from None
        return value

    def generic(self, tp: Any) -> Schema:
        origin, args = get_origin(tp), get_args(tp)
        if origin is None:
            origin, args = tp, ()
        if origin is tuple:
            if not args and tp is not tuple:  # tuple[()]
                return {"type": "array", "maxItems": 0}
            if not args:
                return {"type": "array"}
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.schema(args[0])}
            return {
                "type": "array",
                "prefixItems": [self.schema(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        if origin in _ARRAY_ORIGINS or origin in _SET_ORIGINS:
            out: Schema = {"type": "array"}
            if args and (items := self.schema(args[0])):
                out["items"] = items
            if origin in _SET_ORIGINS:
                out["uniqueItems"] = True
            return out
        if origin in _MAP_ORIGINS:
            out = {"type": "object"}
            if args:
                if _strip(args[0]) not in (str, Any):
                    raise self.error(f"unsupported type {tp!r}: object keys must be str")
                if values := self.schema(args[1]):
                    out["additionalProperties"] = values
            return out
        if _is_pydantic_model(tp):
            raise self.error(
                f"{tp.__qualname__} is a pydantic model, which mcp-trio does not read:"
                " make it a dataclass (or an attrs class or TypedDict) of the same fields,"
                " Annotated[T, Field(...)] and all"
            )
        raise self.error(f"unsupported type {tp!r}")

    def named(self, cls: type, build: Callable[[type], Schema]) -> Schema:
        name = self.names.get(cls)
        if name is None:
            name = cls.__name__
            n = 1
            while name in self.defs:
                n += 1
                name = f"{cls.__name__}{n}"
            self.names[cls] = name
            self.defs[name] = {}  # a placeholder, so that recursion finds the name
            self.defs[name] = build(cls)
        return {"$ref": f"#/$defs/{name}"}

    def enum_schema(self, cls: type) -> Schema:
        values = [member.value for member in cast("type[enum.Enum]", cls)]
        out = _enum_keyword(values)
        if out is None:
            raise self.error(f"enum {cls.__qualname__} has values that are not JSON scalars")
        if summary := _parse_doc(_class_doc(cls)).summary:
            out["description"] = summary
        return out

    def object_schema(self, cls: type) -> Schema:
        doc = _parse_doc(_class_doc(cls))
        field_docs = _attribute_docstrings(cls)
        properties: Schema = {}
        required: list[str] = []
        try:
            fields = _class_fields(cls)
        except _UnresolvedAnnotations as exc:
            raise self.error(str(exc)) from exc
        for field in fields:
            self.where.append(f"field {field.name!r} of {cls.__qualname__}")
            if _is_field_info(field.default):
                raise self.error(
                    "its default is a pydantic Field(...), which this class would take as"
                    " the value itself: write `name: Annotated[T, Field(...)] = default`"
                )
            prop = self.schema(field.hint, field.name)
            self.where.pop()
            text = field_docs.get(field.name) or doc.params.get(field.name)
            if text and "description" not in prop:
                prop["description"] = text
            if field.default is not _MISSING:
                self.default(prop, field.default, field.hint)
            properties[field.name] = prop
            if field.required:
                required.append(field.name)
        out: Schema = {"type": "object"}
        if doc.summary:
            out["description"] = doc.summary
        out["properties"] = properties
        if required:
            out["required"] = required
        out["additionalProperties"] = False
        return out

    def finish(self, root: Schema) -> Schema:
        """Inline what may be inlined; attach the rest as ``$defs``.

        A root that is a reference to a recursive definition becomes that definition,
        its references ``"#"``, so the root is the object itself (MCP wants
        ``outputSchema`` to be ``"type": "object"``). Keywords next to the root's
        ``$ref`` (a description from ``Annotated``) are merged into it, as they are when
        a definition is inlined.
        """
        counts: Counter[str] = Counter()
        edges: dict[str, set[str]] = {}
        for name, body in self.defs.items():
            edges[name] = set(_refs(body))
            counts.update(_refs(body))
        counts.update(_refs(root))
        recursive = {name for name in self.defs if name in _reachable(name, edges)}
        inline = {name for name in self.defs if counts[name] == 1 and name not in recursive}
        top = _ref_name(root)
        if top not in self.defs or top in inline:
            top = None

        def subst(node: Any) -> Any:
            if isinstance(node, dict):
                name = _ref_name(node)
                if name in inline:
                    siblings = {k: subst(v) for k, v in node.items() if k != "$ref"}
                    return {**subst(self.defs[name]), **siblings}
                if name is not None and name == top:
                    return {k: "#" if k == "$ref" else subst(v) for k, v in node.items()}
                return {k: subst(v) for k, v in node.items()}
            if isinstance(node, list):
                return [subst(item) for item in node]
            return node

        if top is None:
            out: Schema = subst(root)
        else:
            siblings = {k: subst(v) for k, v in root.items() if k != "$ref"}
            out = {**subst(self.defs[top]), **siblings}
        kept = {
            name: subst(body)
            for name, body in self.defs.items()
            if name not in inline and name != top
        }
        if kept:
            out["$defs"] = kept
        return out


def _ref_name(node: dict[str, Any]) -> str | None:
    """The definition a node refers to, if it is a ``$ref`` of ours."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return ref.removeprefix("#/$defs/")
    return None


def _refs(node: Any) -> Iterator[str]:
    for obj in json_objects(node):
        if (name := _ref_name(obj)) is not None:
            yield name


def _reachable(start: str, edges: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges[name])
    return seen


def _enum_keyword(values: list[Any]) -> Schema | None:
    kinds = [_json_type(v) for v in values]
    if None in kinds:
        return None
    unique = list(dict.fromkeys(kinds))
    if len(unique) == 1:
        return {"type": unique[0], "enum": values}
    return {"enum": values}


def _literal_schema(args: tuple[Any, ...], builder: _Builder) -> Schema:
    values = [a.value if isinstance(a, enum.Enum) else a for a in args]
    out = _enum_keyword(values)
    if out is None:
        raise builder.error(f"unsupported Literal values {values!r}")
    return out


def type_schema(tp: Any) -> Schema:
    """The JSON Schema (2020-12) of values of type ``tp``.

    Named types that are shared or recursive are under ``$defs``, referenced by ``$ref``.
    See the module docstring for the mapping.

    Raises:
        TypeError: ``tp`` or a type it contains has no JSON Schema.
    """
    builder = _Builder()
    builder.where.append(f"type {tp!r}")
    return builder.finish(builder.schema(tp))


# --------------------------------------------------------------------------------------
# Functions


_T = TypeVar("_T")


def _memo(func: Callable[..., _T]) -> Callable[..., _T]:
    """``lru_cache`` that computes afresh for unhashable arguments (e.g. an unhashable
    callable object) instead of failing."""
    cached = functools.lru_cache(maxsize=512)(func)

    def call(*args: Any) -> _T:
        try:
            hash(args)
        except TypeError:
            return func(*args)
        return cached(*args)

    return call


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _hints(fn: Callable[..., Any], keys: Collection[str], tolerate: Collection[str]) -> Any:
    """The resolved annotations of ``fn`` named in ``keys`` (``"return"`` for the result).

    Each is resolved on its own, so that an annotation we do not need (say a context
    imported only under ``TYPE_CHECKING``) cannot break the others; those in ``tolerate``
    may fail and are then left out.
    """
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not inspect.isroutine(target):
        target = type(target).__call__  # a callable object
    target = inspect.unwrap(target)
    annotations = getattr(target, "__annotations__", None) or {}
    globalns = getattr(target, "__globals__", {})
    hints: dict[str, Any] = {}
    for key in keys:
        if key not in annotations:
            continue
        holder = types.SimpleNamespace(__annotations__={key: annotations[key]})
        try:
            hints[key] = get_type_hints(holder, globalns=globalns, include_extras=True)[key]
        except Exception as exc:  # any error evaluating user annotations
            if key in tolerate:
                continue
            what = "the return type" if key == "return" else f"parameter {key!r}"
            message = f"{what} of {_name(fn)}: cannot resolve {annotations[key]!r}: {exc}"
            raise TypeError(message) from exc
    return hints


@attrs.frozen
class _Signature:
    name: str
    params: dict[str, inspect.Parameter]
    hints: dict[str, Any]
    var_keyword: str | None
    doc: _Doc
    fields: dict[str, Any] = attrs.field(factory=dict)
    """The parameters whose default is a pydantic ``FieldInfo`` (``days: int =
    Field(1, ge=1)``, the official SDK's idiom), by name: Python would pass the
    ``FieldInfo`` itself, so :func:`coerce_arguments` puts its default in."""


@_memo
def _signature(fn: Callable[..., Any], skip: frozenset[str]) -> _Signature:
    name = _name(fn)
    parameters = inspect.signature(fn).parameters
    hints = _hints(fn, parameters, skip)
    params: dict[str, inspect.Parameter] = {}
    var_keyword = None
    for param in parameters.values():
        if param.name in skip or is_context_type(hints.get(param.name)):
            continue
        if param.kind is param.VAR_KEYWORD:
            var_keyword = param.name
        elif param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise TypeError(
                f"parameter {param.name!r} of {name}: tool arguments are passed by name,"
                f" so {param.kind.description} parameters are not supported"
            )
        else:
            params[param.name] = param
    fields = {n: p.default for n, p in params.items() if _is_field_info(p.default)}
    return _Signature(name, params, hints, var_keyword, _parse_doc(inspect.getdoc(fn)), fields)


def function_input_schema(fn: Callable[..., Any], *, skip: Collection[str] = ()) -> Schema:
    """The ``inputSchema`` of a tool (or the arguments of a prompt) implemented by ``fn``.

    An object with one property per parameter, required when the parameter has no
    default, and ``"additionalProperties": false`` (or the schema of ``**kwargs: T``).

    Args:
        fn: the handler; parameters are passed by name.
        skip: parameters that are not arguments (e.g. the context). Parameters annotated
            with a class that has ``__mcp_context__ = True`` are skipped too.

    Raises:
        TypeError: a parameter's type has no JSON Schema, cannot be resolved, or is
            positional-only or ``*args``; the message names the parameter.
    """
    sig = _signature(fn, frozenset(skip))
    builder = _Builder()
    properties: Schema = {}
    required: list[str] = []
    for name, param in sig.params.items():
        builder.where[:] = [f"parameter {name!r} of {sig.name}"]
        hint = sig.hints.get(name, Any)
        prop = builder.schema(hint, name)
        default = param.default
        if (info := sig.fields.get(name)) is not None:  # (days: int = Field(1, ge=1))
            builder.field_info(prop, info, name, in_annotated=False)
            default = _field_default(info, call=False)
        if "description" not in prop and name in sig.doc.params:
            prop["description"] = sig.doc.params[name]
        if default is param.empty or (info is not None and info.is_required()):
            required.append(name)
        elif default is not _MISSING:
            builder.default(prop, default, hint)
        properties[name] = prop
    out: Schema = {"type": "object"}
    if properties:
        out["properties"] = properties
    if required:
        out["required"] = required
    if sig.var_keyword is None:
        out["additionalProperties"] = False
    else:
        builder.where[:] = [f"parameter {sig.var_keyword!r} of {sig.name}"]
        extra = builder.schema(sig.hints.get(sig.var_keyword, Any))
        if extra:
            out["additionalProperties"] = extra
    return builder.finish(out)


_CONTENT_TYPE_NAMES = (
    "TextContent",
    "ImageContent",
    "AudioContent",
    "EmbeddedResource",
    "ResourceLink",
    "CallToolResult",
)


def _is_content_class(tp: Any) -> bool:
    """Whether ``tp`` is an MCP content type (``TextContent``..., ``CallToolResult``) or
    a class marked ``__mcp_content__ = True`` (``Image``, ``Audio``, ``ToolResult``...)."""
    return isinstance(tp, type) and (
        issubclass(tp, loaded_models(*_CONTENT_TYPE_NAMES)) or _is_marked(tp, "__mcp_content__")
    )


def _is_text(tp: Any) -> bool:
    """Whether values of ``tp`` are content next to content classes: a string is a text
    block, ``bytes`` an image (see ``content_blocks``)."""
    if get_origin(tp) is Literal:
        return all(isinstance(a, str) for a in get_args(tp))
    return isinstance(tp, type) and issubclass(tp, str | bytes | bytearray)


def _content_leaves(tp: Any, in_list: bool = False) -> Iterator[tuple[Any, bool]]:
    """The types a returned value may have as ``content_blocks`` sees it, through unions
    and one level of list or tuple; each with whether it is an item of that list."""
    tp = _strip(tp)
    if _is_union(tp):
        for member in get_args(tp):
            yield from _content_leaves(member, in_list)
        return
    origin = get_origin(tp)
    args = [a for a in get_args(tp) if a is not Ellipsis]
    if not in_list and args and (origin in _ARRAY_ORIGINS or origin is tuple):
        for arg in args:
            yield from _content_leaves(arg, True)
        return
    yield tp, in_list


def _is_content(tp: Any, where: str) -> bool:
    """Whether the return type ``tp`` is MCP content: content classes, alone, in unions
    or in a list, possibly mixed with strings (text) and ``bytes`` (images), or ``None``
    (no content) outside a list.

    Raises:
        TypeError: ``tp`` mixes content classes with other data (``dict | Image``): a
            value of it would be content or structured data depending on the call.
    """
    leaves = list(_content_leaves(tp))
    if not any(_is_content_class(leaf) for leaf, _ in leaves):
        return False
    others = [
        leaf
        for leaf, in_list in leaves
        if not (
            _is_content_class(leaf)
            or _is_text(leaf)
            or leaf in (Any, object)
            or (leaf in (None, _NoneType) and not in_list)
        )
    ]
    if others:
        names = ", ".join(dict.fromkeys(_type_label(t) for t in others))
        raise TypeError(
            f"{where}: {tp!r} mixes MCP content with data ({names}); a tool returns content"
            " (str, Image, Audio..., or a list of them) or structured data, not either:"
            " return a ToolResult to give both"
        )
    return True


def _type_label(tp: Any) -> str:
    if tp in (None, _NoneType):
        return "None"
    return tp.__qualname__ if isinstance(tp, type) else repr(tp)


def _without_asks(tp: Any) -> Any:
    """``tp`` without ``InputRequiredResult``: a tool returns one to ask the client for
    input, and it is answered as it is, before any result is made: no part of the output."""
    bare = _strip(tp)
    if bare is InputRequiredResult:
        return None
    if not _is_union(bare):
        return tp
    members = [m for m in get_args(bare) if _strip(m) is not InputRequiredResult]
    if len(members) == len(get_args(bare)):
        return tp
    return _union_of(members)


def _is_whole_result(tp: Any) -> bool:
    """Whether ``tp`` is a result spelled out (``ToolResult``, whose class says so with
    ``__mcp_result__``, or ``CallToolResult``): sent as it is."""
    return isinstance(tp, type) and (
        _is_marked(tp, "__mcp_result__") or issubclass(tp, loaded_models("CallToolResult"))
    )


def _without_whole_results(tp: Any) -> Any:
    """``Point | ToolResult`` as ``Point``: the data a tool returns, or else a result it
    spells out (an error, say), which is sent as it is and checked against the schema of
    the data. A union whose other members are content (``str | ToolResult``) is left
    as it is: content, with no output schema."""
    bare = _strip(tp)
    if not _is_union(bare):
        return tp
    members = get_args(bare)
    rest = [m for m in members if not _is_whole_result(_strip(m))]
    if len(rest) == len(members) or not rest:
        return tp
    if any(
        _is_content_class(leaf) or _is_text(leaf) for m in rest for leaf, _ in _content_leaves(m)
    ):
        return tp
    return _union_of(rest)


def _union_of(members: list[Any]) -> Any:
    """``members[0] | members[1] | ...`` (one member: itself)."""
    return members[0] if len(members) == 1 else cast("Any", Union)[tuple(members)]


@_memo
def _output_kind(fn: Callable[..., Any]) -> tuple[Literal["none", "object", "wrapped"], Any]:
    tp = _without_whole_results(
        _without_asks(_hints(fn, ("return",), ()).get("return", inspect.Signature.empty))
    )
    bare = _strip(tp)
    if bare in (inspect.Signature.empty, None, _NoneType, Any, object) or _is_content(
        bare, f"the return type of {_name(fn)}"
    ):
        return "none", tp
    origin = get_origin(bare) or bare
    if _is_class_like(bare) or origin in _MAP_ORIGINS:
        return "object", tp
    return "wrapped", tp


def function_output_schema(fn: Callable[..., Any]) -> Schema | None:
    """The ``outputSchema`` of a tool implemented by ``fn``, from its return annotation.

    Object-like return types (attrs, dataclass, TypedDict, ``dict[str, T]``) give their own
    schema. Any other type ``T`` gives ``{"type": "object", "properties": {"result": T},
    "required": ["result"]}``, and the ``structuredContent`` must then be ``{"result":
    value}`` (see :func:`to_structured_content`). No annotation, ``None``, ``Any`` and MCP
    content types give ``None``: no output schema; so do unions and lists of content types
    with ``str`` (text) and ``bytes`` (an image), such as ``str | Image``.

    Raises:
        TypeError: the return type has no JSON Schema, mixes content types with data
            (``dict | Image``) or cannot be resolved.
    """
    kind, tp = _output_kind(fn)
    if kind == "none":
        return None
    builder = _Builder()
    builder.where.append(f"the return type of {_name(fn)}")
    root = builder.schema(tp)
    if kind == "wrapped":
        root = {
            "type": "object",
            "properties": {"result": root},
            "required": ["result"],
            "additionalProperties": False,
        }
    return builder.finish(root)


def to_structured_content(fn: Callable[..., Any], value: object) -> dict[str, Any] | None:
    """The ``structuredContent`` for ``fn``'s return value, matching its output schema.

    ``None`` when ``fn`` has no output schema.

    Raises:
        TypeError: ``value`` is not JSON-able, or not an object where one is expected.
    """
    kind, _ = _output_kind(fn)
    if kind == "none":
        return None
    data = to_jsonable(value)
    if kind == "wrapped":
        return {"result": data}
    if not isinstance(data, dict):
        raise TypeError(f"{_name(fn)} returned {type(value).__name__}, not an object")
    return data


# --------------------------------------------------------------------------------------
# Structuring and unstructuring

_EXACT_FLOATS: Final = 2**53
"""Every integer below this in magnitude is exact as a float (a double's 53-bit
significand); at and beyond it, a float may stand for many integers."""


def _exact(value: float) -> bool:
    return value.is_integer() and abs(value) < _EXACT_FLOATS


def _structure_int(value: Any, cls: type[int]) -> int:
    """An ``int`` (or a subclass: ``IntEnum``, ``bool``) from a JSON integer. A float
    passes only while it is one integer exactly: JSON has one number type (``1.0`` is
    ``1``), but orjson reads an integer wider than 64 bits as a float, rounded, and the
    function must not get another number than the one sent (``18446744073709551617``
    arrives as ``18446744073709551616.0``)."""
    if isinstance(value, float) and not _exact(value):
        raise ValueError(
            f"{_show(value)} is not an exact integer: from 2**53 on, a float (what an"
            " integer wider than 64 bits arrives as) may have lost digits"
        )
    return cls(value)  # (as cattrs' own hook for int and its subclasses does)


_converter = cattrs.Converter()
_converter.register_structure_hook(int, _structure_int)  # (int's subclasses too)
# RFC 3339 section 5.6, what "format": "date-time" and "date" name: a date-time has a
# time and an offset ("T" and "Z" may be lower case); a full-date is YYYY-MM-DD.
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_FULL_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _structure_datetime(value: str, _: Any) -> dt.datetime:
    """A ``datetime`` from an RFC 3339 date-time: always aware (a date alone, or a time
    without an offset, would make a naive one, which fails a comparison with an aware
    ``now()`` only for some inputs)."""
    if not _DATE_TIME.fullmatch(value):
        raise ValueError(
            f"{_show(value)} is not an RFC 3339 date-time: it needs a date, a time and an"
            " offset, as in 2024-01-02T10:00:00Z or 2024-01-02T10:00:00+02:00"
        )
    return dt.datetime.fromisoformat(value.upper())


def _structure_date(value: str, _: Any) -> dt.date:
    if not _FULL_DATE.fullmatch(value):
        raise ValueError(f"{_show(value)} is not an RFC 3339 date (YYYY-MM-DD)")
    return dt.date.fromisoformat(value)


_converter.register_structure_hook(dt.datetime, _structure_datetime)
_converter.register_structure_hook(dt.date, _structure_date)
_converter.register_structure_hook(dt.time, lambda v, _: dt.time.fromisoformat(v))
_converter.register_structure_hook(uuid.UUID, lambda v, _: uuid.UUID(v))
_converter.register_structure_hook(bytes, lambda v, _: base64.b64decode(v, validate=True))


_cached_type_schema = _memo(type_schema)


def _structure_union(value: Any, tp: Any) -> Any:
    """The first member that ``value`` fits, in order; an ``int`` member is passed over
    for a float that is no exact integer (see :func:`_structure_int`) while a later one
    takes it (``int | float`` and ``1e20``), and refuses it when none does."""
    member: Any
    inexact: Any = None
    for member in get_args(tp):
        if member is _NoneType:
            if value is None:
                return None
            continue
        if not validate(value, _cached_type_schema(member)):
            if type(value) is float and _is_int_class(member) and not _exact(value):
                inexact = inexact or member
                continue
            return _converter.structure(value, member)
    if inexact is not None:
        return _converter.structure(value, inexact)  # (raises, saying why)
    raise ValueError(f"{_show(value)} fits none of {tp!r}")


def _is_int_class(tp: Any) -> bool:
    """Whether ``tp`` is ``int`` or a subclass, also as ``Annotated[int, ...]`` or a
    ``NewType`` of one (both structured as the class)."""
    while True:
        if get_origin(tp) is Annotated:
            tp = tp.__origin__
        elif isinstance(tp, NewType):
            tp = tp.__supertype__
        else:
            return isinstance(tp, type) and issubclass(tp, int)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _structure_literal(value: Any, tp: Any) -> Any:
    """The member of ``Literal[...]`` that ``value`` equals as JSON: ``2.0`` is the
    integer ``2``, never ``True``; an enum member for its value."""
    wanted = _canonical(value)
    for member in get_args(tp):
        if _canonical(member.value if isinstance(member, enum.Enum) else member) == wanted:
            return member
    raise ValueError(f"{_show(value)} is none of the values of {tp!r}")


def _typeddict_hook(cls: Any) -> Callable[[Any, Any], Any]:
    hints = {name: _strip(hint) for name, hint in _class_hints(cls).items()}

    def structure(value: Any, _: Any) -> Any:
        return {
            key: _converter.structure(item, hints[key]) if key in hints else item
            for key, item in value.items()
        }

    return structure


_converter.register_structure_hook_func(_is_union, _structure_union)
_converter.register_structure_hook_func(_is_literal, _structure_literal)
_converter.register_structure_hook_factory(is_typeddict, _typeddict_hook)


def _format_error(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, ValueError) and str(exc):
        return f"invalid value ({exc})"
    return format_exception(exc, tp)


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _for_the_caller(exc: BaseException) -> bool:
    """Whether a failure to build an argument may be told to whoever sent it: a
    ``ValueError`` (how a class says a value is wrong, and how this module's hooks do),
    or an error the converter itself raised (its innermost frame in cattrs or here).
    Anything else comes from the user's code (``__post_init__``, an attrs validator or
    converter, ``__init__``) and may carry internal details: a bug, not the caller's."""
    if isinstance(exc, ValueError):
        return True
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    module = frame.f_globals.get("__name__") or ""
    return (
        module == __name__
        or module.partition(".")[0] == "cattrs"
        or frame.f_code.co_filename.startswith("<cattrs generated")
    )


def coerce_arguments(
    fn: Callable[..., Any], arguments: Mapping[str, Any], *, skip: Collection[str] = ()
) -> dict[str, Any]:
    """Turn validated JSON arguments into the Python values ``fn``'s annotations ask for.

    Call it after :func:`validate` passed with ``function_input_schema(fn, skip=skip)``:
    attrs classes, dataclasses, TypedDicts, enums, tuples, sets, datetimes... are built;
    ``1`` becomes ``1.0`` for a ``float``. Missing arguments stay missing (the defaults
    apply when ``fn`` is called). A ``Literal`` gives its own member, so ``2.0`` (a JSON
    integer) is ``2`` for ``Literal[1, 2]``, like ``int`` makes it ``2``.

    Raises:
        ValueError: the arguments do not fit after all; with ``validate`` first, only a
            ``format`` it does not check can cause this (a malformed date-time, say), or
            a class that refuses a value with a ``ValueError`` (its text is the
            problem). The message lists each problem with its path, like
            ``arguments.when: ...``: it is meant for the caller.
        Exception: anything else a class raised while its value was built (in
            ``__init__``, ``__post_init__``, an attrs validator or converter), as raised
            (possibly in cattrs' exception group): a bug or an internal failure, whose
            text may hold what the caller must not see; log it, answer an internal error.
    """
    sig = _signature(fn, frozenset(skip))
    out: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in arguments.items():
        if name in sig.params:
            tp = sig.hints.get(name, Any)
        elif sig.var_keyword is not None:
            tp = sig.hints.get(sig.var_keyword, Any)
        else:
            problems.append(f"arguments: unexpected property {name!r}")
            continue
        try:
            out[name] = _converter.structure(value, tp)
        except Exception as exc:  # cattrs reports with ExceptionGroups; we flatten them
            if not all(map(_for_the_caller, _leaves(exc))):
                raise
            path = _child("arguments", name)
            for message in cattrs.transform_error(exc, path, _format_error):
                text, _, where = message.rpartition(" @ ")
                problems.append(f"{where}: {text}")
    if problems:
        raise ValueError("; ".join(problems))
    # A parameter whose default is a pydantic Field(...) and is missing gets that
    # Field's default: called bare, the function would get the FieldInfo itself.
    for name, info in sig.fields.items():
        if name not in out:
            value = _field_default(info, call=True)
            if value is not _MISSING:  # (required: validation said it is there)
                out[name] = value
    return out


_MIN_INT = -(2**63)
_MAX_INT = 2**64 - 1


def to_jsonable(value: object, *, strict: bool = True) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers, booleans, None).

    attrs and dataclass instances become objects of their init fields, enums their value,
    ``datetime``/``date``/``time`` ISO 8601 strings, ``UUID`` strings, ``bytes`` base64,
    tuples and sets lists; mappings keep their (string) keys.

    With ``strict`` (for data the wire carries as JSON: ``structuredContent``, schema
    defaults) numbers must be writable: NaN and the infinities are not JSON, and integers
    must fit in 64 bits (``-2**63`` to ``2**64 - 1``, what the wire's encoder writes).
    Without it (for JSON *text*, written by :func:`json.dumps`) any int and float pass.

    Raises:
        TypeError: something in ``value`` has no JSON form (including non-string keys,
            MCP content such as ``Image``, and with ``strict`` non-finite floats and
            integers outside that range).
    """
    return _jsonable(value, strict)


def _jsonable(value: object, strict: bool) -> Any:
    if isinstance(value, enum.Enum):  # before str and int: StrEnum, IntEnum
        return _jsonable(value.value, strict)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        if (
            strict and not _MIN_INT <= value <= _MAX_INT
        ):  # no repr: a huge int may not even have one
            raise TypeError(f"a {value.bit_length()}-bit integer does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        if strict and not math.isfinite(value):
            raise TypeError(f"{value!r} has no JSON form (JSON numbers are finite)")
        return float(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    cls: Any = type(value)
    if getattr(cls, "__mcp_content__", False) is True:
        raise TypeError(
            f"{cls.__qualname__} is MCP content, not JSON data: return it as content (alone"
            " or in a list), not inside other data"
        )
    if attrs.has(cls):
        return {
            a.name: _jsonable(getattr(value, a.name), strict) for a in attrs.fields(cls) if a.init
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _jsonable(getattr(value, f.name), strict)
            for f in dataclasses.fields(value)
            if f.init
        }
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            name = key.value if isinstance(key, enum.Enum) else key
            if not isinstance(name, str):
                raise TypeError(f"object keys must be strings, got {type(key).__name__}")
            out[name] = _jsonable(item, strict)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item, strict) for item in value]
    if _is_pydantic_model(cls):
        raise TypeError(
            f"{cls.__qualname__} (a pydantic model) has no JSON form here: return a"
            " dataclass, or its .model_dump(mode='json')"
        )
    raise TypeError(f"{type(value).__qualname__} has no JSON form")

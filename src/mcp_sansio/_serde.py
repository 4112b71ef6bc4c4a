"""The one cattrs converter: MCP values (``mcp_sansio.types``) to JSON-able data and back.

Theory of operation
-------------------
The model classes know nothing about the wire (style guide section 4); every rule lives here,
as hook factories that cattrs calls the first time it meets a type, so importing costs nothing
per class.

* **Names.** A field's wire name is its ``wire_name`` metadata if it has one (the generator
  emits it for ``$schema`` and the namespaced ``_meta`` keys), ``_meta`` for ``meta``, and the
  camelCase of the snake_case name otherwise.
* **Absent means None.** An optional field (default ``None``) is omitted from the output when
  it is ``None``. Required fields and constant members (``jsonrpc``, ``method``, ``type``)
  are always written.
* **Extensible objects** have an ``extra`` field: structuring puts every member the class does
  not name there, unstructuring merges it back (a named field wins over an ``extra`` key of
  the same name).
* **Strict scalars.** ``"5"`` is not an ``int`` and ``1`` is not a ``str`` or a ``bool``: a
  peer that sends the wrong type gets told so instead of being coerced. A JSON number for a
  ``float`` field is kept as it came (``1`` stays ``1``) so that data round-trips exactly.
* **Unions** are resolved by looking at the data, never by trial and error: a member fits when
  its required keys are present, its constant members (``type``, ``method``, ``mode``...)
  match, and required nested objects fit in turn. Of the members that fit, the one that names
  most of the data's keys wins; ties go to the first member (the newest revision's order). If
  nothing fits but exactly one member's constants match, the data is structured as that member
  so the error names the missing field. Scalars are tried member by member.
* **Errors** are rendered with wire names and paths, e.g. ``arguments.city: expected a string``,
  walking the cattrs exception tree the way :func:`cattrs.transform_error` does and using
  :func:`cattrs.v.format_exception` for leaf errors it knows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from itertools import repeat
from types import FrameType, NoneType, UnionType
from typing import Any, Final, Literal, Protocol, TypeVar, Union, get_args, get_origin, overload

import attrs
from cattrs import BaseValidationError, ClassValidationError, IterableValidationError
from cattrs.cols import list_structure_factory
from cattrs.fns import identity
from cattrs.gen import (
    make_dict_structure_fn,
    make_dict_unstructure_fn,
    mapping_structure_factory,
    override,
)
from cattrs.preconf.json import make_converter
from cattrs.v import format_exception

from ._errors import ErrorCode, RemoteProtocolError

__all__ = ["structure", "structure_params", "unstructure"]

T = TypeVar("T")

_StructureHook = Callable[[Any, Any], Any]
_UnstructureHook = Callable[[Any], Any]

#: The name of the catch-all field of extensible classes.
_EXTRA = "extra"


class _Invalid(ValueError):
    """Data of the wrong shape. The message is written for the peer and shown as is."""


_converter = make_converter()


class _Field(Protocol):
    """What :func:`_wire_name` reads of an ``attrs.Attribute``. Its ``metadata`` is a
    read-only ``mappingproxy`` at run time, though attrs' stubs call it a ``dict``."""

    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> Mapping[Any, Any]: ...


def _wire_name(field: _Field) -> str:
    """The member name on the wire (the generator relies on this exact rule)."""
    explicit = field.metadata.get("wire_name")
    if explicit is not None:
        return str(explicit)
    if field.name == "meta":
        return "_meta"
    head, *rest = field.name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _fields(cls: type) -> tuple[attrs.Attribute[Any], ...]:
    """The attrs fields of ``cls`` with their annotations evaluated."""
    attrs.resolve_types(cls)
    fields: tuple[attrs.Attribute[Any], ...] = attrs.fields(cls)
    return fields


def _kind(value: Any) -> str:
    """How a JSON value is called in messages to the peer."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _same(value: Any, allowed: Any) -> bool:
    """JSON equality: ``True`` is not ``1``."""
    return type(value) is type(allowed) and bool(value == allowed)


# --- Scalars --------------------------------------------------------------------------------


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Invalid(f"expected a string, got {_kind(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _Invalid(f"expected an integer, got {_kind(value)}")


def _structure_float(value: Any, _: Any) -> int | float:
    # (int | float, not float: an integer is kept as it came, and to a compiled build
    # a ``float`` result is one to convert.)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise _Invalid(f"expected a number, got {_kind(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _Invalid(f"expected a boolean, got {_kind(value)}")


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _literal_text(allowed: tuple[Any, ...]) -> str:
    # Sorted: typing's cache compares ``Literal`` members as a set, so ``Literal["a", "b"] |
    # None`` may hand back an earlier ``Literal["b", "a"] | None`` written anywhere else in the
    # process, and the order of get_args() would then depend on what was imported first.
    return " or ".join(sorted(json.dumps(a) for a in allowed))


def _literal_hook(tp: Any) -> _StructureHook:
    allowed = get_args(tp)
    expected = _literal_text(allowed)

    def structure_literal(value: Any, _: Any) -> Any:
        if any(_same(value, a) for a in allowed):
            return value
        raise _Invalid(f"expected {expected}, got {json.dumps(value, default=repr)}")

    if len(allowed) != 1:
        return structure_literal
    # The common case (``jsonrpc``, ``method``, ``type``): one value, compared without the
    # generator; :func:`_same`'s rule, inlined.
    only, only_type = allowed[0], type(allowed[0])

    def structure_constant(value: Any, _: Any) -> Any:
        if type(value) is only_type and value == only:
            return value
        return structure_literal(value, _)

    return structure_constant


# --- Containers -----------------------------------------------------------------------------


def _is_list(tp: Any) -> bool:
    return get_origin(tp) is list


def _list_hook(tp: Any) -> _StructureHook:
    inner = list_structure_factory(tp, _converter)

    def structure_list(value: Any, _: Any) -> Any:
        if not isinstance(value, list):
            raise _Invalid(f"expected an array, got {_kind(value)}")
        return inner(value, tp)

    return structure_list


def _is_dict(tp: Any) -> bool:
    return get_origin(tp) is dict


def _dict_hook(tp: Any) -> _StructureHook:
    inner = mapping_structure_factory(tp, _converter)

    def structure_dict(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, got {_kind(value)}")
        return inner(value, tp)

    if get_args(tp) != (str, Any):
        return structure_dict

    # ``dict[str, Any]`` (arguments, schemas, ``_meta``): the values are kept as they are,
    # so a plain dict whose keys are all strings (all JSON objects) is copied in one step,
    # without a call per key; anything else takes the checks above, and their errors.
    def structure_json_object(value: Any, _: Any) -> Any:
        if type(value) is dict and all(map(isinstance, value, _STR)):
            return dict(value)
        return structure_dict(value, _)

    return structure_json_object


_STR = repeat(str)
"""``str`` as often as :func:`map` asks: ``map(isinstance, keys, _STR)`` checks every key."""


# --- attrs classes --------------------------------------------------------------------------


def _attrs_structure_hook(cls: type) -> _StructureHook:
    fields = _fields(cls)
    wire = {f.name: _wire_name(f) for f in fields if f.name != _EXTRA}
    # ``Any``: the overrides share ``**kwargs`` with the generator's own flags.
    overrides: dict[str, Any] = {name: override(rename=w) for name, w in wire.items()}
    is_open = any(f.name == _EXTRA for f in fields)
    if is_open:
        overrides[_EXTRA] = override(omit=True)
    inner: _StructureHook = make_dict_structure_fn(cls, _converter, **overrides)
    known = frozenset(wire.values())

    def structure_attrs(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise _Invalid(f"expected an object, got {_kind(value)}")
        obj = inner(value, cls)
        if is_open:
            extra = {k: v for k, v in value.items() if k not in known}
            if extra:
                obj = attrs.evolve(obj, **{_EXTRA: extra})
        return obj

    return structure_attrs


def _attrs_unstructure_hook(cls: type) -> _UnstructureHook:
    fields = _fields(cls)
    overrides: dict[str, Any] = {}  # ``Any``: see _attrs_structure_hook
    for f in fields:
        if f.name == _EXTRA:
            overrides[f.name] = override(omit=True)
        else:
            optional = f.default is None  # required fields and constants are always written
            overrides[f.name] = override(rename=_wire_name(f), omit_if_default=optional)
    inner: _UnstructureHook = make_dict_unstructure_fn(cls, _converter, **overrides)
    if not any(f.name == _EXTRA for f in fields):
        return inner

    def unstructure_open(obj: Any) -> Any:
        out = inner(obj)
        for key, value in getattr(obj, _EXTRA).items():
            out.setdefault(key, _converter.unstructure(value))
        return out

    return unstructure_open


# --- Unions ---------------------------------------------------------------------------------


@attrs.frozen
class _Profile:
    """What the data of one class looks like, for telling union members apart."""

    required: frozenset[str]
    """Keys that must be present (required fields and constant members)."""
    constants: Mapping[str, tuple[Any, ...]]
    """The allowed values of ``Literal`` members."""
    nested: Mapping[str, type]
    """Required members that are objects of a known class, checked in turn."""
    known: frozenset[str]
    """Every member the class names."""


_profiles: dict[type, _Profile] = {}


def _profile(cls: type) -> _Profile:
    profile = _profiles.get(cls)
    if profile is None:
        required, known = set(), set()
        constants: dict[str, tuple[Any, ...]] = {}
        nested: dict[str, type] = {}
        for f in _fields(cls):
            if f.name == _EXTRA:
                continue
            key = _wire_name(f)
            known.add(key)
            members = get_args(f.type) if _is_union(f.type) else (f.type,)
            literals = [m for m in members if _is_literal(m)]
            if literals and all(m is NoneType or _is_literal(m) for m in members):
                constants[key] = tuple(v for m in literals for v in get_args(m))
            if f.default is attrs.NOTHING:
                required.add(key)
                if f.type is not None and attrs.has(f.type):
                    nested[key] = f.type
            elif f.default is not None and key in constants:
                required.add(key)  # a constant member such as ``type`` or ``method``
        profile = _Profile(frozenset(required), constants, nested, frozenset(known))
        _profiles[cls] = profile
    return profile


def _constants_match(profile: _Profile, data: dict[str, Any]) -> bool:
    return all(
        key not in data or any(_same(data[key], v) for v in allowed)
        for key, allowed in profile.constants.items()
    )


def _fits(cls: type, data: dict[str, Any]) -> bool:
    profile = _profile(cls)
    if not profile.required <= data.keys() or not _constants_match(profile, data):
        return False
    return all(
        isinstance(data[key], dict) and _fits(nested, data[key])
        for key, nested in profile.nested.items()
    )


def _pick(classes: list[type], data: dict[str, Any]) -> type | None:
    """The member class for ``data``; see "Unions" in the module docstring."""
    best: type | None = None
    best_score = -1
    for cls in classes:
        if _fits(cls, data):
            score = len(data.keys() & _profile(cls).known)
            if score > best_score:
                best, best_score = cls, score
    if best is not None:
        return best
    discriminated = [
        cls
        for cls in classes
        if _profile(cls).constants.keys() & data.keys() and _constants_match(_profile(cls), data)
    ]
    return discriminated[0] if len(discriminated) == 1 else None


def _discriminator(classes: list[type]) -> tuple[str, dict[str, type]] | None:
    """A member every class requires as a string constant of its own (``type`` of the
    content blocks), with the class of each value: the one class :func:`_pick` can
    choose for data carrying that value, whenever it fits."""
    if len(classes) < 2:
        return None
    profiles = [_profile(cls) for cls in classes]
    shared = set.intersection(*(p.constants.keys() & p.required for p in profiles))
    for key in sorted(shared):
        by_value: dict[str, type] = {}
        unique = True
        for cls, profile in zip(classes, profiles, strict=True):
            for value in profile.constants[key]:
                unique = unique and type(value) is str and value not in by_value
                by_value[value] = cls
        if unique:
            return key, by_value
    return None


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, UnionType)


def _describe(tp: Any) -> str:
    if tp is NoneType:
        return "null"
    if _is_literal(tp):
        return _literal_text(get_args(tp))
    if _is_list(tp):
        return "an array"
    if _is_dict(tp):
        return "an object"
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    return names.get(tp, getattr(tp, "__name__", repr(tp)))


def _union_hook(tp: Any) -> _StructureHook:
    members = get_args(tp)
    if Any in members:
        return lambda value, _: value
    others = [m for m in members if m is not NoneType]
    if len(others) == 1:  # ``X | None``: let X's hook word the error
        only = others[0]

        def structure_optional(value: Any, _: Any) -> Any:
            return None if value is None else _converter.structure(value, only)

        return structure_optional
    classes = [m for m in members if attrs.has(m)]
    lists = [m for m in members if _is_list(m)]
    maps = [m for m in members if _is_dict(m)]
    scalars = [m for m in members if m not in (*classes, *lists, *maps, NoneType)]
    expected = " or ".join(_describe(m) for m in members)
    structure = _converter.structure
    index = _discriminator(classes)
    # The exact types the plain scalar members take as they are (every scalar hook returns
    # the value it accepts): an ``int`` request id is not first tried, and refused, as a
    # ``str``. Subclasses (enums, ``bool`` for ``int``) go the long way, as before.
    takes: dict[Any, set[type]] = {str: {str}, int: {int}, float: {int, float}, bool: {bool}}
    plain = frozenset(t for m in scalars for t in takes.get(m, ()))

    def structure_union(value: Any, _: Any) -> Any:
        if type(value) in plain:
            return value
        if value is None and NoneType in members:
            return None
        if isinstance(value, dict):
            cls = None
            if index is not None:  # the common case: one class claims the tag, and fits
                tag = value.get(index[0])
                cls = index[1].get(tag) if type(tag) is str else None
                if cls is not None and not _fits(cls, value):
                    cls = None
            if cls is None and classes:
                cls = _pick(classes, value)
            if cls is not None:
                return structure(value, cls)
            if maps:
                return structure(value, maps[0])
        elif isinstance(value, list):
            if lists:
                return structure(value, lists[0])
        elif value is not None:
            for scalar in scalars:
                try:
                    return structure(value, scalar)
                except _Invalid:
                    continue
        if isinstance(value, dict) and classes:
            raise _Invalid(f"does not match {expected}")
        raise _Invalid(f"expected {expected}, got {_kind(value)}")

    return structure_union


# --- The converter --------------------------------------------------------------------------

_converter.register_structure_hook(str, _structure_str)
_converter.register_structure_hook(int, _structure_int)
_converter.register_structure_hook(float, _structure_float)
_converter.register_structure_hook(bool, _structure_bool)
_converter.register_structure_hook_factory(_is_literal, _literal_hook)
_converter.register_structure_hook_factory(_is_list, _list_hook)
_converter.register_structure_hook_factory(_is_dict, _dict_hook)
_converter.register_structure_hook_factory(_is_union, _union_hook)
_converter.register_structure_hook_factory(attrs.has, _attrs_structure_hook)
_converter.register_unstructure_hook_factory(attrs.has, _attrs_unstructure_hook)


# ``Any`` members (schemas, ``_meta``, extra fields) hold plain JSON almost always: copy it
# without cattrs' per-value dispatch, and dispatch only what is not plain JSON.
_JSON_SCALARS = frozenset({str, int, float, bool, NoneType})


def _unstructure_json(value: Any) -> Any:
    """A copy of plain JSON (anything else in it unstructured by its class).

    Recursive, as fast as a copy gets; JSON nested deeper than the stack (the parser
    accepts 1024 levels, the copy takes one or two frames a level) is copied again by
    :func:`_unstructure_deep`. A ``try`` costs nothing until it raises (3.11), so the
    usual shallow value pays no depth count. Only copies are made: what the failed
    attempt built is dropped, the value is untouched.

    Within an outer recursive copy (this value is a member of an object unstructured by
    its class, inside JSON), the error is left to that copy to start over: were each
    level to start over, objects nested in each other's JSON would be copied again at
    every level, twice as often per level (exponential). So each value is copied
    recursively at most once more than it nests objects."""
    try:
        return _unstructure_json_fast(value)
    except RecursionError:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_code in _RECURSIVE_COPY:
                raise
            frame = frame.f_back
        return _unstructure_deep(value)


def _unstructure_json_fast(value: Any) -> Any:
    kind = type(value)
    # An object or array of scalars only (most of a schema) is copied in one step; an
    # object with other members by _unstructure_mixed.
    if kind is dict:
        if _JSON_SCALARS.issuperset(map(type, value.values())):
            return value.copy()
        return _unstructure_mixed(value)
    if kind is list:
        if _JSON_SCALARS.issuperset(map(type, value)):
            return value.copy()
        return [v if type(v) in _JSON_SCALARS else _unstructure_json_fast(v) for v in value]
    if kind in _JSON_SCALARS:
        return value
    return _converter.unstructure(value)


def _unstructure_mixed(value: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of an object some of whose members are not scalars: copied, then those
    members replaced by their own copies; an object of scalars among them (a schema's
    properties) without a call, and an object of other members without checking its
    members' types again."""
    out = value.copy()
    for key, member in value.items():
        member_kind = type(member)
        if member_kind is dict:
            if _JSON_SCALARS.issuperset(map(type, member.values())):
                out[key] = member.copy()
            else:
                out[key] = _unstructure_mixed(member)
        elif member_kind not in _JSON_SCALARS:
            out[key] = _unstructure_json_fast(member)
    return out


_RECURSIVE_COPY = frozenset({_unstructure_json_fast.__code__, _unstructure_mixed.__code__})


_MAX_DEEP_COPY_DEPTH: Final = 100_000


def _unstructure_deep(value: Any) -> Any:
    """:func:`_unstructure_json` without recursing: plain dicts and lists are copied
    with a stack of their own, anything else is unstructured by its class. Past
    ``_MAX_DEEP_COPY_DEPTH`` levels (a hundred times what the parser accepts) it raises
    ``RecursionError``, as the recursive copy did: a list or dict that contains itself
    would otherwise be copied for ever."""
    top: list[Any] = [None]
    # (the source container, the copy, the key in the copy to fill, its depth)
    todo: list[tuple[Any, Any, Any, int]] = [(value, top, 0, 0)]
    while todo:
        item, parent, key, depth = todo.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if depth >= _MAX_DEEP_COPY_DEPTH:
                raise RecursionError(
                    f"a value nested more than {_MAX_DEEP_COPY_DEPTH} levels deep"
                    " (a list or dict that contains itself?)"
                )
            depth += 1
        if kind is dict:
            copy: Any = item.copy()
            todo.extend(
                (member, copy, name, depth)
                for name, member in item.items()
                if type(member) not in _JSON_SCALARS
            )
        elif kind is list:
            copy = list(item)
            todo.extend(
                (member, copy, index, depth)
                for index, member in enumerate(item)
                if type(member) not in _JSON_SCALARS
            )
        elif kind in _JSON_SCALARS:
            copy = item
        else:
            copy = _converter.unstructure(item)
        parent[key] = copy
    return top[0]


def _unstructure_json_object(obj: Mapping[Any, Any]) -> dict[Any, Any]:
    if type(obj) is dict:
        return _unstructure_json(obj)  # type: ignore[no-any-return]
    return {k: _unstructure_json(v) for k, v in obj.items()}  # (a subclass: its items())


def _unstructure_json_array(obj: list[Any]) -> list[Any]:
    if type(obj) is list:
        return _unstructure_json(obj)  # type: ignore[no-any-return]
    return [_unstructure_json(v) for v in obj]


_converter.register_unstructure_hook(dict, _unstructure_json_object)
_converter.register_unstructure_hook(list, _unstructure_json_array)
# ``dict[str, Any]`` members (schemas, arguments, ``_meta``): cattrs' own hook would dispatch
# each value through the converter; the JSON copy does the same in one step. (Keys pass
# as they are in both: ``str``'s unstructure hook is the identity. Anything but a plain
# dict is dispatched by its class, as cattrs would.)
_converter.register_unstructure_hook_factory(
    lambda tp: tp == dict[str, Any], lambda _: _unstructure_json
)


def _is_optional(tp: Any) -> bool:
    return _is_union(tp) and len(get_args(tp)) == 2 and NoneType in get_args(tp)


def _optional_unstructure_hook(tp: Any) -> _UnstructureHook:
    """``X | None``: cattrs' hook calls X's for a value that is not None; when X's is the
    identity (``str``, numbers, ``Literal``), so is this one, and the generated
    unstructure functions then copy the member without a call."""
    (other,) = (m for m in get_args(tp) if m is not NoneType)
    if _converter.get_unstructure_hook(other) is identity:
        return identity
    hook: _UnstructureHook = _converter.gen_unstructure_optional(tp)
    return hook


_converter.register_unstructure_hook_factory(_is_optional, _optional_unstructure_hook)


# --- Errors ---------------------------------------------------------------------------------


def _messages(exc: BaseException, path: str) -> list[str]:
    """``["path: problem", ...]`` for one structuring failure, with wire names in paths."""
    if isinstance(exc, ClassValidationError):
        wire = {f.name: _wire_name(f) for f in attrs.fields(exc.cl)}
        by_field, rest = exc.group_exceptions()
        out = [m for e, note in by_field for m in _messages(e, _join(path, wire[note.name]))]
        return out + [m for e in rest for m in _messages(e, path)]
    if isinstance(exc, IterableValidationError):
        by_index, rest = exc.group_exceptions()
        out = [m for e, note in by_index for m in _messages(e, _index(path, note.index))]
        return out + [m for e in rest for m in _messages(e, path)]
    text = str(exc) if isinstance(exc, _Invalid) else format_exception(exc, None)
    return [f"{path}: {text}" if path else text]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _index(path: str, index: Any) -> str:
    return _join(path, index) if isinstance(index, str) else f"{path}[{index}]"


def _structure(data: Any, cls: Any, what: str, code: int) -> Any:
    try:
        return _converter.structure(data, cls)
    except (BaseValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        problems = "; ".join(_messages(exc, ""))
        raise RemoteProtocolError(f"invalid {what}: {problems}", error_code=code) from exc


# --- Public API -----------------------------------------------------------------------------


@overload
def structure(data: Any, cls: type[T]) -> T: ...
@overload
def structure(data: Any, cls: Any) -> Any: ...
def structure(data: Any, cls: Any) -> Any:
    """Build a ``cls`` (a class or alias of ``mcp_sansio.types``) from decoded JSON.

    Args:
        data: What :func:`mcp_sansio._json.loads` returned (or any part of it).
        cls: The target, e.g. ``types.CallToolResult`` or the union ``types.ContentBlock``.

    Returns:
        The structured value. Members the class does not name are dropped, except on
        extensible classes, which keep them in ``extra``.

    Raises:
        RemoteProtocolError: ``data`` does not fit ``cls`` (the data came from the peer). The
            message names every bad member by its wire path; ``error_code`` is
            ``INVALID_REQUEST``. Any other exception is a bug.
    """
    return _structure(data, cls, getattr(cls, "__name__", "value"), ErrorCode.INVALID_REQUEST)


@overload
def structure_params(data: Any, cls: type[T]) -> T: ...
@overload
def structure_params(data: Any, cls: Any) -> Any: ...
def structure_params(data: Any, cls: Any) -> Any:
    """Build the ``params`` of a request or notification; a mismatch is ``-32602``.

    Omitted params (``None``) are read as ``{}``, so a params class with only optional
    members accepts a request without ``params``.

    Raises:
        RemoteProtocolError: with ``error_code`` ``INVALID_PARAMS`` and a message such as
            ``"invalid params: name: required field missing"``, ready to send back.
    """
    return _structure({} if data is None else data, cls, "params", ErrorCode.INVALID_PARAMS)


def unstructure(obj: Any) -> Any:
    """Turn a value of ``mcp_sansio.types`` (or a list or dict of them) into JSON-able data.

    Optional members that are ``None`` are left out; constants are written; ``extra`` members
    are merged back. The result is ready for :func:`mcp_sansio._json.dumps`.
    """
    return _converter.unstructure(obj)

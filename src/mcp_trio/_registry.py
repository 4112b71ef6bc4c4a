"""What a :class:`~mcp_trio.Server` serves: tools, prompts, resources, templates and
completion handlers, each checked and described once, when it is registered.

Registration does all the work that can fail on the author's side -- JSON Schemas from
type hints, URI template checks, names -- so that a mistake is a ``TypeError`` or
``ValueError`` at import time, not an error a client discovers. The records are frozen;
the :class:`Registry` keeps them in registration order (``tools/list`` is deterministic)
and counts changes per list, for list-changed notifications and cursor invalidation.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import logging
import math
import re
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, final, get_type_hints

import attrs
import trio

from mcp_sansio._http_common import HeaderParam, parse_header_params

from ._jsonschema import (
    _is_field_info,
    _signature,
    check_schema,
    coerce_arguments,
    function_description,
    function_input_schema,
    function_output_schema,
    is_context_type,
    to_jsonable,
    validate,
)
from ._server_content import (
    check_mime_type,
    meta_keys_problem,
    plain_annotations,
    plain_icons,
    plain_tool_annotations,
)
from ._uritemplate import URI_HINT, UriTemplate, uri_problem
from ._validation import (
    AnchorRef,
    dialect_supported,
    flat_object_test,
    json_objects,
    plain_object_test,
    resolve_ref,
)

if TYPE_CHECKING:
    from ._tasks import TaskStart, TaskSupport

_E = TypeVar("_E", bound="Entry")

__all__ = [
    "CompletionEntry",
    "Entry",
    "ListKind",
    "PromptEntry",
    "Registry",
    "ResourceEntry",
    "TemplateEntry",
    "ToolEntry",
    "invoke",
    "strict_json",
]

ListKind = Literal["tools", "prompts", "resources"]

logger = logging.getLogger("mcp_trio.server")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


# ------------------------------------------------------------------ inspecting functions


def _target(fn: Callable[..., Any]) -> Any:
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    return inspect.unwrap(target)


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (``async def``, also as a partial or a
    callable object)."""
    target = _target(fn)
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(type(target), "__call__", None)  # noqa: B004  # a callable object's method
    return not inspect.isroutine(target) and inspect.iscoroutinefunction(call)


_OPTIONAL = re.compile(r"(?:typing\.)?Optional\[(?P<inner>.*)\]")


def _names_context(text: str) -> bool:
    """Whether an unresolvable annotation's text names ``Context`` (or ``Context | None``,
    ``Optional[Context]``), with its type argument or not (``Context[App]``, ``App``
    imported under ``TYPE_CHECKING``: what leaves it unresolvable)."""
    text = text.strip().strip("'\"").strip()
    if optional := _OPTIONAL.fullmatch(text):
        text = optional.group("inner")
    while (bare := re.sub(r"\[[^\[\]]*\]", "", text)) != text:  # (innermost first)
        text = bare
    members = [m.strip() for m in text.split("|") if m.strip() != "None"]
    return len(members) == 1 and members[0].rpartition(".")[2] == "Context"


def _is_context_annotation(annotation: Any, globalns: dict[str, Any], name: str) -> bool:
    """Whether ``annotation`` is ``Context``, possibly ``Annotated`` or ``| None``: the
    rule ``function_input_schema`` uses to leave a parameter out."""
    if isinstance(annotation, str):
        text = annotation
        holder = types.SimpleNamespace(__annotations__={name: text})
        try:
            annotation = get_type_hints(holder, globalns=globalns, include_extras=True)[name]
        except Exception:  # unresolvable (e.g. imported under TYPE_CHECKING): go by the name
            return _names_context(text)
    return is_context_type(annotation)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s parameter annotated ``Context``, if any.

    Raises:
        TypeError: more than one parameter is a ``Context``.
    """
    target = _target(fn)
    globalns = getattr(target, "__globals__", {})
    found = [
        name
        for name, param in inspect.signature(fn).parameters.items()
        if param.annotation is not param.empty
        and _is_context_annotation(param.annotation, globalns, name)
    ]
    if len(found) > 1:
        raise TypeError(f"{fn!r} declares more than one Context parameter: {found}")
    return found[0] if found else None


async def invoke(fn: Callable[..., Any], run_async: bool, kwargs: Mapping[str, Any]) -> Any:
    """Call a handler: ``async`` ones in this task, plain ones in a worker thread.

    A plain function runs via ``trio.to_thread.run_sync`` so that it cannot block the
    event loop. If the request is cancelled, the thread is abandoned: it runs to its end
    in the background (a thread cannot be interrupted) and its result is dropped.
    """
    if run_async:
        return await fn(**kwargs)
    return await trio.to_thread.run_sync(functools.partial(fn, **kwargs), abandon_on_cancel=True)


def _choices(prop: Mapping[str, Any]) -> tuple[str, ...]:
    """The fixed string values a property allows (``Literal`` / ``Enum``), for completion."""
    values = prop.get("enum")
    if isinstance(values, list) and all(isinstance(v, str) for v in values):
        return tuple(values)
    return ()


def _fits(value: Any, prop: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether ``value`` fits ``prop``, a property of the schema ``root``."""
    schema = {**prop, "$defs": root["$defs"]} if "$defs" in root else dict(prop)
    return not validate(value, schema)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def strict_json(text: str) -> Any:
    """``text`` parsed as strict JSON, integers exact whatever their size.

    The stdlib parser, because orjson reads integers wider than 64 bits as (inexact)
    floats; what it lets through that JSON text on the wire cannot hold (a lone
    surrogate such as ``"\\ud800"``, which has no UTF-8) is refused after.

    Raises:
        ValueError: not JSON, ``NaN``/``Infinity``, a float out of range, a lone
            surrogate, or an integer too long to convert (``sys.get_int_max_str_digits``).
        RecursionError: nested too deep for the stdlib parser.
    """
    value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    json.dumps(value, ensure_ascii=False).encode()  # UnicodeEncodeError is a ValueError
    return value


def coerce_strings(
    fn: Callable[..., Any],
    schema: Mapping[str, Any],
    skip: Sequence[str],
    raw: Mapping[str, str],
    *,
    canonical: bool = False,
) -> dict[str, Any]:
    """String arguments (prompt arguments, URI template variables) as ``fn``'s types.

    A value whose parameter does not take a string is read as strict JSON (``"3"`` for an
    ``int``, exact at any size; not ``NaN``, ``Infinity``, floats out of range or nesting
    too deep: such text stays text); then everything is validated against ``schema`` and
    structured.

    With ``canonical`` (URI template variables), each value has one spelling, so that
    one resource has one URI (subscriptions and caches key on it): what becomes an
    ``int`` (also an ``IntEnum`` or ``Literal`` member) must be written as JSON writes
    it (``"1"``; not ``"01"``, ``"1.0"``, ``"1e0"``, ``"-0"`` or ``" 1"``), a ``bool``
    as ``"true"``/``"false"``, ``None`` as ``"null"``.
    A ``float`` takes any JSON number (``"1"``, ``"1.0"``, ``"1e0"``) without surrounding
    whitespace. Other spellings stay text, and so fail like any text would. Without it
    (prompt arguments, typed by people), any JSON spelling of the value is taken.

    Raises:
        ValueError: the values do not fit; the message names each problem.
    """
    properties = schema.get("properties") or {}
    values: dict[str, Any] = {}
    for name, text in raw.items():
        value: Any = text
        prop = properties.get(name)
        if isinstance(prop, Mapping) and not _fits(text, prop, schema):
            with contextlib.suppress(ValueError, RecursionError):  # not JSON: kept as text
                value = strict_json(text)
        values[name] = value
    problems = validate(values, dict(schema))
    if problems:
        # A number, boolean or null read from the text that does not fit either is
        # refused as the text it was, so the message speaks of what was sent: "0" for a
        # bool is "expected boolean, got string", not "got integer" (a reading the user
        # never asked for). An array or object was written as JSON: what is wrong inside
        # it says more ("tags[1]: expected string, got integer").
        unhelped = {
            name: text
            for name, text in raw.items()
            if values[name] is not text
            and not isinstance(values[name], list | dict)
            and not _fits(values[name], properties[name], schema)
        }
        if unhelped:
            problems = validate({**values, **unhelped}, dict(schema))
    else:
        out = coerce_arguments(fn, values, skip=skip)
        if not canonical:
            return out
        loose = {
            name: text
            for name, text in raw.items()
            if values[name] is not text and not _canonical_spelling(text, out.get(name))
        }
        if not loose:
            return out
        # As text they are refused (they were parsed because text did not fit), with the
        # message any other text gets: "expected integer, got string".
        problems = validate({**values, **loose}, dict(schema))
    raise ValueError("; ".join(problems))


def _canonical_spelling(text: str, value: Any) -> bool:
    """Whether ``text`` is how JSON writes ``value``, the structured argument: exactly
    for integers, booleans and null; without surrounding whitespace for other numbers."""
    try:
        data = to_jsonable(value, strict=False)  # (any size: integers are exact)
    except TypeError:  # no JSON form, so no spelling to compare
        return True
    if isinstance(data, float):
        return text == text.strip()
    if data is None or isinstance(data, bool | int):
        return text == json.dumps(data)
    return True


def _meta(meta: Mapping[str, Any] | None, what: str) -> dict[str, Any] | None:
    """``meta`` as the ``_meta`` of ``what``'s definition, its keys checked.

    Raises:
        TypeError: ``meta`` is not a mapping.
        ValueError: a key is malformed or reserved (:func:`meta_keys_problem`).
    """
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        raise TypeError(f"{what}: meta must be a mapping, not {type(meta).__name__}")
    problem = meta_keys_problem(meta)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
    return dict(meta)


def _definition(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


def _scopes(scopes: str | Iterable[str]) -> frozenset[str]:
    """Declared scopes as a set, each checked to be a scope token (``ValueError``),
    without ``offline_access`` (never a resource's scope: left out, warned once)."""
    if not scopes:
        return frozenset()
    from mcp_sansio._http_auth import check_scopes  # noqa: PLC0415 (stdio loads no HTTP)

    from ._http_auth import _drop_offline_access  # noqa: PLC0415 (the same)

    return _drop_offline_access(check_scopes(scopes), "tool scopes=")


def _skip(context_param: str | None) -> tuple[str, ...]:
    return () if context_param is None else (context_param,)


# ------------------------------------------------------------------ records


@attrs.frozen(kw_only=True)
class Entry:
    """What every record holds: the registered function and how to call it."""

    fn: Callable[..., Any]
    run_async: bool
    """Whether ``fn`` is ``async`` (else it runs in a worker thread; see :func:`invoke`)."""
    context_param: str | None
    """The parameter that receives the ``Context``, if any."""
    scopes: frozenset[str] = frozenset()
    """The OAuth scopes a caller's token needs to use it (see
    :meth:`Registry.scopes_for`); empty: none."""

    @property
    def skip(self) -> tuple[str, ...]:
        """The parameters the client does not give (the ``Context``'s)."""
        return _skip(self.context_param)


@final
@attrs.frozen(kw_only=True)
class ToolEntry(Entry):
    """A registered tool."""

    name: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    derived_output: bool
    """Whether ``output_schema`` comes from the return annotation (then
    ``to_structured_content`` shapes the value)."""
    definition: dict[str, Any]
    """The ``Tool`` object of ``tools/list``."""
    custom_input: bool = False
    """Whether ``input_schema`` was given verbatim. Arguments are then validated against
    ``input_check`` (when there is one) and passed as JSON values, unconverted."""
    input_check: dict[str, Any] | None = None
    """With ``custom_input``: what the arguments are validated against before the
    function runs -- ``input_schema`` without its ``x-mcp-header`` annotations (MCP's,
    no assertions) -- or ``None`` when :func:`~mcp_trio._validation.validate` cannot
    use it (a keyword it does not implement: ``if``/``then``/``else``,
    ``patternProperties``..., said in a warning at registration): then the function
    checks its arguments itself."""
    custom_params: frozenset[str] | None = frozenset()
    """With ``custom_input``: the argument names the function accepts (its named
    parameters), or ``None`` when it takes ``**kwargs`` (any name)."""
    custom_required: tuple[str, ...] = ()
    """With ``custom_input``: the parameters without a default, which a call must give
    (refused as invalid arguments, not failed in the call, when the schema lets one
    be left out)."""
    header_params: tuple[HeaderParam, ...] = ()
    """The ``x-mcp-header`` parameters of ``input_schema`` (modern HTTP checks the
    ``Mcp-Param-*`` headers of a call against them)."""
    task: TaskSupport | None = None
    """Whether a call may (``"optional"``) or must (``"required"``) run as a task of the
    tasks extension; ``None``: never."""
    task_start: TaskStart = "call"
    """When its task is created: before it runs, or when it calls ``ctx.start_task()``."""
    input_test: Callable[[Any], bool] | None = attrs.field(default=None, eq=False, repr=False)
    """Whether arguments fit ``input_schema``, answered without a walk over it (see
    :func:`~mcp_trio._validation.flat_object_test`), for a generated schema simple
    enough; ``None``: ``validate`` them."""
    output_test: Callable[[Any], bool] | None = attrs.field(default=None, eq=False, repr=False)
    """The same for structured results and ``output_schema``; ``None``: ``validate``
    them."""
    plain_params: dict[str, type] | None = attrs.field(default=None, eq=False, repr=False)
    """Each parameter's type, when every one is exactly ``str``, ``int``, ``float`` or
    ``bool`` (generated schema, no ``**kwargs``): valid arguments of exactly those types
    are passed as they are, which is what ``coerce_arguments`` would make of them."""
    plain_test: Callable[[Any], bool] | None = attrs.field(default=None, eq=False, repr=False)
    """``input_test`` and the ``plain_params`` types in one (see
    :func:`~mcp_trio._validation.plain_object_test`): yes, the arguments are valid and
    passed as they are; no: ask those two. ``None``: ask them."""

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None,
        title: str | None,
        description: str | None,
        annotations: Any,
        icons: Sequence[Any] | None,
        output_schema: bool | Mapping[str, Any],
        meta: Mapping[str, Any] | None,
        input_schema: Mapping[str, Any] | None = None,
        task: bool | TaskSupport = False,
        task_start: TaskStart = "call",
        scopes: str | Iterable[str] = (),
    ) -> ToolEntry:
        name = name or getattr(fn, "__name__", None)
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise ValueError(
                f"tool name {name!r}: use 1 to 128 of A-Z a-z 0-9 _ - . (server/tools#tool-names)"
            )
        ctx = context_parameter(fn)
        skip = _skip(ctx)
        custom_input = input_schema is not None
        input_check = None
        custom_params: frozenset[str] | None = frozenset()
        custom_required: tuple[str, ...] = ()
        if input_schema is not None:
            if input_schema.get("type") != "object":
                raise ValueError(f"tool {name!r}: an inputSchema must be an object schema")
            schema = dict(input_schema)
            input_check = _input_check(name, input_schema)
            custom_params, custom_required = _custom_signature(name, fn, skip)
        else:
            schema = function_input_schema(fn, skip=skip)
        try:
            # An annotation anywhere it may not be makes the tool invalid
            # (2026-07-28 streamable-http#schema-extension): refuse it now, not per call.
            header_params = parse_header_params(schema)
        except ValueError as exc:
            raise ValueError(f"tool {name!r}: inputSchema {exc}") from None
        if output_schema is True:
            out, derived = function_output_schema(fn), True
        elif output_schema is False:
            out, derived = None, False
        else:
            # A deep copy: what tools/list publishes and what results are checked
            # against (the test built below) stay as registered, whatever the caller
            # does with its dict afterwards.
            out, derived = copy.deepcopy(dict(output_schema)), False
            if out.get("type") != "object":
                raise ValueError(f"tool {name!r}: an outputSchema must be an object schema")
            try:  # every result is validated against it: fail now, not on each call
                check_schema(out)
            except ValueError as exc:
                raise ValueError(f"tool {name!r}: outputSchema {exc}") from None
        if custom_input:
            input_test = None if input_check is None else flat_object_test(input_check)
        else:
            input_test = flat_object_test(schema)
        plain = None if custom_input else _plain_params(fn, skip)
        definition = _definition(
            {
                "name": name,
                "title": title,
                "description": description or function_description(fn),
                "inputSchema": schema,
                "outputSchema": out,
                "annotations": plain_tool_annotations(annotations, f"tool {name!r}"),
                "icons": plain_icons(icons, f"tool {name!r}"),
                "_meta": _meta(meta, f"tool {name!r}"),
            }
        )
        return cls(
            name=name,
            fn=fn,
            run_async=is_async(fn),
            context_param=ctx,
            input_schema=schema,
            output_schema=out,
            derived_output=derived,
            definition=definition,
            custom_input=custom_input,
            input_check=input_check,
            custom_params=custom_params,
            custom_required=custom_required,
            header_params=header_params,
            task=_task_support(name, task, task_start),
            task_start=task_start,
            scopes=_scopes(scopes),
            input_test=input_test,
            output_test=None if out is None else flat_object_test(out),
            plain_params=plain,
            plain_test=plain_object_test(input_test, plain),
        )


def _input_check(name: str, input_schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``ToolEntry.input_check`` for a verbatim ``inputSchema``: a copy (what the caller
    does with its dict afterwards changes nothing), without ``x-mcp-header``; ``None``,
    with a warning, when ``validate`` cannot use it."""
    check: dict[str, Any] = _without_header_marks(copy.deepcopy(dict(input_schema)))
    try:
        check_schema(check)
    except ValueError as exc:
        # basic/index.mdx: an unsupported dialect MUST be handled with an error, and a
        # $ref that does not resolve SHOULD be rejected, not taken as permissive: as for
        # an outputSchema, refused here rather than published unchecked. (check_schema
        # stops at the first problem: a dangling $ref may come after a keyword it lacks.)
        why = _unresolved_ref(check) if dialect_supported(check) else exc
        if why is not None:
            raise ValueError(f"tool {name!r}: inputSchema {why}") from None
        logger.warning(
            "tool %r: its inputSchema is published but arguments are not validated against"
            " it (the function must check them): %s",
            name,
            exc,
        )
        return None
    return check


def _unresolved_ref(schema: dict[str, Any]) -> str | None:
    """What is wrong with the first ``$ref`` of ``schema`` that is not local or leads
    nowhere; ``None`` when there is none (anchors and ``$ref`` below a nested ``$id``,
    valid but which the validator does not follow, are left to its warning)."""
    refs: list[str] = []
    for node in json_objects(schema):
        if node is not schema and "$id" in node:
            return None
        if isinstance(node.get("$ref"), str):
            refs.append(node["$ref"])
    for ref in refs:
        try:
            resolve_ref(schema, ref)
        except AnchorRef:
            continue
        except ValueError as exc:
            return str(exc)
    return None


def _without_header_marks(node: Any) -> Any:
    """``node`` without the ``x-mcp-header`` annotations, which sit on properties
    reached from the root through ``properties`` only (see ``parse_header_params``)."""
    if not isinstance(node, dict):
        return node
    out = {key: value for key, value in node.items() if key != "x-mcp-header"}
    if isinstance(properties := out.get("properties"), dict):
        out["properties"] = {k: _without_header_marks(v) for k, v in properties.items()}
    return out


def _custom_signature(
    name: str, fn: Callable[..., Any], skip: Sequence[str]
) -> tuple[frozenset[str] | None, tuple[str, ...]]:
    """``ToolEntry.custom_params`` and ``custom_required`` of ``fn``, whose tool has a
    verbatim ``inputSchema``: the argument names it accepts (its named parameters), or
    ``None`` (any name) when it takes ``**kwargs`` -- the schema, which the function
    checks itself, may allow more than its ``properties`` --, and those without a
    default.

    Raises:
        TypeError: a parameter has a pydantic ``Field(...)`` as its default. Such a
            function gets its arguments as they are: the default would reach it as
            itself.
    """
    names: list[str] = []
    required: list[str] = []
    any_name = False
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            any_name = True
        if param.name in skip:
            continue
        if _is_field_info(param.default):
            raise TypeError(
                f"tool {name!r}: parameter {param.name!r} has a pydantic Field(...) as its"
                " default; with input_schema= the function gets the arguments as they are,"
                " so it would get the Field itself: give a plain default (and the bounds"
                " in the schema)"
            )
        if param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            names.append(param.name)
            if param.default is param.empty:
                required.append(param.name)
    return (None if any_name else frozenset(names)), tuple(required)


def _plain_params(fn: Callable[..., Any], skip: tuple[str, ...]) -> dict[str, type] | None:
    """``ToolEntry.plain_params`` of ``fn``: ``None`` unless every parameter (but the
    skipped) is annotated exactly ``str``, ``int``, ``float`` or ``bool``, none with a
    pydantic ``Field(...)`` as its default (whose default must be put in)."""
    sig = _signature(fn, frozenset(skip))
    if sig.var_keyword is not None or sig.fields:
        return None
    found: dict[str, type] = {}
    for name in sig.params:
        hint = sig.hints.get(name)
        if not isinstance(hint, type) or not any(hint is p for p in (str, int, float, bool)):
            return None
        found[name] = hint
    return found


def _task_support(name: str, task: object, start: object) -> TaskSupport | None:
    if start not in ("call", "explicit"):
        raise ValueError(f"tool {name!r}: task_start must be 'call' or 'explicit', not {start!r}")
    if task is True or task == "optional":
        return "optional"
    if task == "required":
        return "required"
    if task is False or task is None:
        return None
    raise ValueError(f"tool {name!r}: task must be True, False, 'optional' or 'required'")


@final
@attrs.frozen(kw_only=True)
class PromptEntry(Entry):
    """A registered prompt."""

    name: str
    schema: dict[str, Any]
    """The JSON Schema of the arguments (before they are read from strings)."""
    choices: dict[str, tuple[str, ...]]
    """Arguments with a fixed set of values (completed automatically)."""
    definition: dict[str, Any]
    """The ``Prompt`` object of ``prompts/list``."""

    @classmethod
    def build(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None,
        title: str | None,
        description: str | None,
        icons: Sequence[Any] | None,
        meta: Mapping[str, Any] | None,
        scopes: str | Iterable[str] = (),
    ) -> PromptEntry:
        name = name or getattr(fn, "__name__", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"prompt name {name!r}: give a non-empty name")
        ctx = context_parameter(fn)
        schema = function_input_schema(fn, skip=_skip(ctx))
        required = set(schema.get("required", ()))
        arguments = [
            _definition(
                {
                    "name": arg,
                    "description": prop.get("description"),
                    "required": arg in required,
                }
            )
            for arg, prop in (schema.get("properties") or {}).items()
        ]
        definition = _definition(
            {
                "name": name,
                "title": title,
                "description": description or function_description(fn),
                "arguments": arguments or None,
                "icons": plain_icons(icons, f"prompt {name!r}"),
                "_meta": _meta(meta, f"prompt {name!r}"),
            }
        )
        choices = {
            arg: c
            for arg, prop in (schema.get("properties") or {}).items()
            if (c := _choices(prop))
        }
        return cls(
            name=name,
            fn=fn,
            run_async=is_async(fn),
            context_param=ctx,
            schema=schema,
            choices=choices,
            definition=definition,
            scopes=_scopes(scopes),
        )


def _resource_fields(
    what: str,
    fn: Callable[..., Any],
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    icons: Sequence[Any] | None,
    annotations: Any,
    meta: Mapping[str, Any] | None,
) -> dict[str, Any]:
    if mime_type is not None:
        check_mime_type(mime_type, "the resource's mime_type")
    return {
        "name": name or getattr(fn, "__name__", None) or repr(fn),
        "title": title,
        "description": description or function_description(fn),
        "mimeType": mime_type,
        "icons": plain_icons(icons, what),
        "annotations": plain_annotations(annotations, what),
        "_meta": _meta(meta, what),
    }


@final
@attrs.frozen(kw_only=True)
class ResourceEntry(Entry):
    """A registered resource with a fixed URI."""

    uri: str
    mime_type: str | None
    definition: dict[str, Any]
    """The ``Resource`` object of ``resources/list``."""

    @classmethod
    def build(
        cls, fn: Callable[..., Any], uri: str, scopes: str | Iterable[str] = (), **fields: Any
    ) -> ResourceEntry:
        problem = uri_problem(uri)
        if problem is not None:  # (server/resources.mdx: URIs per RFC 3986)
            raise ValueError(f"resource URI {uri!r} is not an RFC 3986 URI: {problem} {URI_HINT}")
        ctx = context_parameter(fn)
        needed = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.name != ctx and p.default is p.empty and p.kind is not p.VAR_KEYWORD
        ]
        if needed:
            raise TypeError(
                f"resource {uri!r}: {fn!r} needs arguments {needed}; use a URI template "
                "such as 'scheme://{name}' to take them from the URI"
            )
        definition = _definition(
            {"uri": uri, **_resource_fields(f"resource {uri!r}", fn, **fields)}
        )
        return cls(
            uri=uri,
            fn=fn,
            run_async=is_async(fn),
            context_param=ctx,
            mime_type=fields.get("mime_type"),
            definition=definition,
            scopes=_scopes(scopes),
        )


@final
@attrs.frozen(kw_only=True)
class TemplateEntry(Entry):
    """A registered resource template (RFC 6570, levels 1 to 3)."""

    template: UriTemplate
    mime_type: str | None
    schema: dict[str, Any]
    """The JSON Schema of the variables (before they are read from strings)."""
    choices: dict[str, tuple[str, ...]]
    """Variables with a fixed set of values (completed automatically)."""
    definition: dict[str, Any]
    """The ``ResourceTemplate`` object of ``resources/templates/list``."""

    @classmethod
    def build(
        cls, fn: Callable[..., Any], template: str, scopes: str | Iterable[str] = (), **fields: Any
    ) -> TemplateEntry:
        parsed = UriTemplate(template)
        if not parsed.matchable:
            parsed.match("")  # raises ValueError saying why
        problem = parsed.uri_problem()
        if problem is not None:
            raise ValueError(
                f"resource template {template!r} does not make RFC 3986 URIs: {problem} {URI_HINT}"
            )
        ctx = context_parameter(fn)
        schema = function_input_schema(fn, skip=_skip(ctx))
        params = set(schema.get("properties") or {})
        variables = set(parsed.variables)
        open_ended = schema.get("additionalProperties") not in (None, False)
        unknown = variables - params
        if unknown and not open_ended:
            raise TypeError(f"resource template {template!r}: {fn!r} has no parameters {unknown}")
        missing = set(schema.get("required", ())) - variables
        if missing:
            raise TypeError(
                f"resource template {template!r} does not give {fn!r} its required "
                f"parameters {sorted(missing)}"
            )
        definition = _definition(
            {
                "uriTemplate": template,
                **_resource_fields(f"resource template {template!r}", fn, **fields),
            }
        )
        properties = schema.get("properties") or {}
        choices = {v: c for v in parsed.variables if (c := _choices(properties.get(v, {})))}
        return cls(
            template=parsed,
            fn=fn,
            run_async=is_async(fn),
            context_param=ctx,
            mime_type=fields.get("mime_type"),
            schema=schema,
            choices=choices,
            definition=definition,
            scopes=_scopes(scopes),
        )

    def arguments(self, values: Mapping[str, str]) -> dict[str, Any]:
        """The function's arguments from its variables' values in a URI it matches
        (:func:`coerce_strings`, canonical: one resource has one URI); raises as that does."""
        return coerce_strings(self.fn, self.schema, self.skip, values, canonical=True)


@final
@attrs.frozen(kw_only=True)
class CompletionEntry(Entry):
    """A registered completion handler."""

    request_param: str
    """The parameter that receives the :class:`CompletionRequest`."""

    @classmethod
    def build(cls, fn: Callable[..., Any]) -> CompletionEntry:
        ctx = context_parameter(fn)
        others = [name for name in inspect.signature(fn).parameters if name != ctx]
        if len(others) != 1:
            raise TypeError(
                f"a completion handler takes one argument (the CompletionRequest) and "
                f"optionally a Context; {fn!r} takes {others}"
            )
        return cls(fn=fn, run_async=is_async(fn), context_param=ctx, request_param=others[0])


# ------------------------------------------------------------------ the registry

CompletionKey = tuple[str, str, str | None]
"""``(ref type, prompt name or URI template, argument name or None for all)``."""


@final
class Registry:
    """The server's tables, in registration order, with a change count per list.

    Args:
        on_change: called with the list's kind after every change.
    """

    def __init__(self, on_change: Callable[[ListKind], None]) -> None:
        self.tools: dict[str, ToolEntry] = {}
        self.prompts: dict[str, PromptEntry] = {}
        self.resources: dict[str, ResourceEntry] = {}
        self.templates: dict[str, TemplateEntry] = {}
        self.completions: dict[CompletionKey, CompletionEntry] = {}
        self.versions: dict[ListKind, int] = {"tools": 0, "prompts": 0, "resources": 0}
        self._on_change = on_change
        self.scoped = 0
        """How many entries declare scopes: none, and :meth:`scopes_for` has nothing to
        find (a server that declares none pays nothing per request)."""
        self._scoped_templates = 0

    def changed(self, kind: ListKind) -> None:
        """Count a change of ``kind`` (the list is different now)."""
        self.versions[kind] += 1
        self._on_change(kind)

    def add(self, entry: ToolEntry | PromptEntry | ResourceEntry | TemplateEntry) -> None:
        """Add an entry.

        Raises:
            ValueError: the name, URI or template is taken.
        """
        table: dict[str, Any]
        kind: ListKind
        if isinstance(entry, ToolEntry):
            table, key, kind, what = self.tools, entry.name, "tools", "tool"
        elif isinstance(entry, PromptEntry):
            table, key, kind, what = self.prompts, entry.name, "prompts", "prompt"
        elif isinstance(entry, ResourceEntry):
            table, key, kind, what = self.resources, entry.uri, "resources", "resource"
        else:
            table, key, kind = self.templates, entry.template.template, "resources"
            what = "resource template"
        if key in table:
            raise ValueError(f"{what} {key!r} is already registered (remove it first)")
        table[key] = entry  # type: ignore[assignment]  # the table of entry's own type
        self._count_scoped(entry, 1)
        self.changed(kind)

    def _count_scoped(self, entry: Entry, by: int) -> None:
        if entry.scopes:
            self.scoped += by
            if isinstance(entry, TemplateEntry):
                self._scoped_templates += by

    def remove(self, kind: ListKind, key: str) -> None:
        """Remove a tool, prompt, or resource (by URI or template).

        Raises:
            KeyError: nothing is registered under ``key``.
        """
        entry: Entry
        if kind == "tools":
            entry = self.tools.pop(key)
        elif kind == "prompts":
            entry = self.prompts.pop(key)
            self._drop_completions("ref/prompt", key)
        elif key in self.resources:
            entry = self.resources.pop(key)
        else:
            entry = self.templates.pop(key)
            self._drop_completions("ref/resource", key)
        self._count_scoped(entry, -1)
        self.changed(kind)

    def _drop_completions(self, ref_type: str, ref: str) -> None:
        for key in [k for k in self.completions if k[:2] == (ref_type, ref)]:
            del self.completions[key]

    def _matching(self, uri: str) -> Iterator[tuple[TemplateEntry, dict[str, str]]]:
        """The templates that match ``uri``, in registration order (the priority), each
        with the values of its variables (``{}``: it has none)."""
        for entry in self.templates.values():
            values = entry.template.match(uri)
            if values is not None:
                yield entry, values

    def resolve_template(self, uri: str) -> tuple[TemplateEntry, dict[str, Any]] | None:
        """The template that serves ``uri`` for ``resources/read``, with its function's
        arguments: the first (in registration order) that matches ``uri`` and whose
        variables convert to the function's types (:func:`coerce_strings`). So
        ``notes://{id}`` (``id: int``) registered before ``notes://{name}`` (``name:
        str``) serves ``notes://7``, and leaves ``notes://groceries`` to the second.
        ``None`` when no template matches.

        Raises:
            ValueError: templates match, but the variables of none of them convert (the
                first one's problems: registration order is the priority).
            Exception: a class of a variable failed in its own code (see
                :func:`~mcp_trio._jsonschema.coerce_arguments`): that template serves,
                and fails (a bug, not the caller's).
        """
        refused: ValueError | None = None
        for entry, values in self._matching(uri):
            try:
                kwargs = entry.arguments(values)
            except ValueError as exc:
                refused = refused or exc
                continue
            return entry, kwargs
        if refused is not None:
            raise refused
        return None

    def match_template(self, uri: str) -> tuple[TemplateEntry, dict[str, str]] | None:
        """What a completion's ``ref/resource`` names when its ``uri`` is neither a
        registered template nor resource: the first template (in registration order)
        that matches it as a concrete URI, with its variables' values. ``None`` for a
        ``uri`` with ``{`` (a URI template, not one of ours: it names nothing)."""
        return None if "{" in uri else next(self._matching(uri), None)

    def scopes_for(self, method: str, params: Mapping[str, Any] | None) -> frozenset[str]:
        """The scopes declared for what a request names: the tool of ``tools/call``, the
        prompt of ``prompts/get``, the resource (or the first template that matches) of
        ``resources/read`` and ``resources/subscribe``, every resource a modern
        ``subscriptions/listen`` names in ``notifications.resourceSubscriptions`` (all
        their scopes together: the stream carries the updates of each), and the prompt
        or template whose arguments ``completion/complete`` completes (named, or matched
        by a concrete URI: :meth:`match_template`). Nothing for
        anything else, or for params that name nothing registered (the handler refuses
        those)."""
        if not params or not self.scoped:
            return frozenset()
        entry: Entry | None = None
        if method == "tools/call":
            entry = _get(self.tools, params.get("name"))
        elif method == "prompts/get":
            entry = _get(self.prompts, params.get("name"))
        elif method in ("resources/read", "resources/subscribe"):
            entry = self._resource(params.get("uri"))
        elif method == "subscriptions/listen":
            return self._listen_scopes(params.get("notifications"))
        elif method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, Mapping) and ref.get("type") == "ref/prompt":
                entry = _get(self.prompts, ref.get("name"))
            elif isinstance(ref, Mapping) and ref.get("type") == "ref/resource":
                uri = ref.get("uri")
                entry = _get(self.templates, uri) or _get(self.resources, uri)
                if entry is None and isinstance(uri, str) and self._scoped_templates:
                    found = self.match_template(uri)  # (as completion/complete finds it)
                    entry = None if found is None else found[0]
        return frozenset() if entry is None else entry.scopes

    def _resource(self, uri: object) -> Entry | None:
        if not isinstance(uri, str):
            return None
        if uri in self.resources:
            return self.resources[uri]
        if not self._scoped_templates:
            return None  # (no template declares scopes: none to match)
        return self._serving_template(uri)

    def _serving_template(self, uri: str) -> TemplateEntry | None:
        """The template whose scopes a read of ``uri`` needs: the one
        :meth:`resolve_template` picks. When several match, that means converting the
        variables (once more when the read comes: only then); when none converts, the
        read fails, and the first is asked."""
        matching = list(self._matching(uri))
        if len(matching) < 2:
            return matching[0][0] if matching else None
        for entry, values in matching:
            try:
                entry.arguments(values)
            except ValueError:
                continue
            except Exception:  # (its class failed in its own code: it serves, and fails)
                pass
            return entry
        return matching[0][0]

    def _listen_scopes(self, notifications: object) -> frozenset[str]:
        # 2026-07-28 schema, SubscriptionsListenRequest: params.notifications
        # .resourceSubscriptions is a list of URIs (the core bounds its length).
        uris = (
            notifications.get("resourceSubscriptions")
            if isinstance(notifications, Mapping)
            else None
        )
        if not isinstance(uris, list):
            return frozenset()
        needed: set[str] = set()
        for uri in uris:
            entry = self._resource(uri)
            if entry is not None:
                needed |= entry.scopes
        return frozenset(needed)


def _get(table: Mapping[str, _E], key: object) -> _E | None:
    return table.get(key) if isinstance(key, str) else None

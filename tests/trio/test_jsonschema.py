"""Schemas from type hints (golden files), the validator (against ``jsonschema``), and
structuring arguments / unstructuring results.

Regenerate the golden files with ``UPDATE_GOLDEN=1 pytest tests/trio/test_jsonschema.py``
and review the diff.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import json
import math
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NewType, NotRequired, Required, TypedDict

import attrs
import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import types as mcp_types
from mcp_trio import _validation
from mcp_trio._jsonschema import (
    MAX_PROBLEMS,
    Constraints,
    Description,
    check_schema,
    coerce_arguments,
    function_description,
    function_input_schema,
    function_output_schema,
    to_jsonable,
    to_structured_content,
    type_schema,
    validate,
)

GOLDEN = Path(__file__).parent / "golden"

# --------------------------------------------------------------------------------------
# Representative handlers, one per feature group


class Context:
    """Stands in for the server's context object."""

    __mcp_context__ = True


class Color(enum.Enum):
    """A primary colour."""

    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Point:
    """A point in the plane."""

    x: float
    """The abscissa."""
    y: float
    """The ordinate."""
    label: str | None = None
    """An optional name."""


@dataclasses.dataclass
class Box:
    """An axis-aligned rectangle.

    Attributes:
        top_left: one corner.
        bottom_right: the opposite corner.
    """

    top_left: Point
    bottom_right: Point
    color: Color = Color.RED
    tags: list[str] = dataclasses.field(default_factory=list)


class Options(TypedDict, total=False):
    """Search options."""

    verbose: bool
    depth: Required[int]


class Filters(TypedDict):
    kind: Literal["file", "folder"]
    owner: NotRequired[str]


@attrs.define
class TreeNode:
    """A node of a tree."""

    value: int
    children: list[TreeNode] = attrs.Factory(list)


@attrs.define
class Folder:
    name: str
    entries: list[File | Folder]


@attrs.define
class File:
    name: str
    size: int
    parent: Folder | None = None


def scalars(
    query: str,
    limit: int = 10,
    ratio: float = 0.5,
    exact: bool = False,
    note: str | None = None,
    anything: Any = None,
) -> str:
    """Search the catalogue.

    Matches are ranked by relevance.

    Args:
        query: the words to look for; quotes
            make a phrase.
        limit: at most this many results.
        ratio (float): the minimum score.
        note: kept with the search history.
    """
    return query


def choices(
    order: Literal["asc", "desc"],
    color: Color,
    priority: Priority = Priority.LOW,
    size: Literal[1, 2, 3] = 2,
    mixed: Literal["auto", 0, None] = "auto",
    flag: Literal[True] = True,
    maybe_color: Color | None = None,
) -> Color:
    """Pick things."""
    return color


def collections(
    ids: list[int],
    names: Sequence[str],
    unique: set[str],
    frozen: frozenset[int],
    stack: tuple[int, ...],
    pair: tuple[float, float],
    nothing: tuple[()],
    scores: dict[str, float],
    groups: Mapping[str, list[int]],
    matrix: list[list[int]],
    loose_list: list,  # type: ignore[type-arg]
    loose_dict: dict,  # type: ignore[type-arg]
    any_values: dict[str, Any],
) -> dict[str, int]:
    """Count things."""
    return {}


def classes(box: Box, center: Point, options: Options, filters: Filters | None = None) -> Point:
    """Move a box."""
    return center


def recursive(tree: TreeNode, root: Folder) -> TreeNode:
    """Walk a tree."""
    return tree


def formats(
    when: dt.datetime,
    day: dt.date,
    at: dt.time,
    id: uuid.UUID,
    blob: bytes,
    deadline: dt.datetime | None = None,
) -> dt.datetime:
    """Schedule a job."""
    return when


def annotated(
    count: Annotated[int, Description("How many items"), Constraints(minimum=1, maximum=100)],
    name: Annotated[str, "The display name", Constraints(min_length=1, max_length=40)],
    ratio: Annotated[float, Constraints(exclusive_minimum=0, exclusive_maximum=1)] = 0.5,
    tags: Annotated[list[str], Constraints(min_items=1, max_items=5)] = ("a",),  # type: ignore[assignment]
    documented: int = 0,
) -> None:
    """Annotated parameters win over the docstring.

    :param count: ignored, the Annotated description wins.
    :param int documented: from the Sphinx
        field list.
    """


def numpy_style(alpha: float, beta: int = 1) -> list[mcp_types.TextContent]:
    """Combine two values.

    Parameters
    ----------
    alpha : float
        The first value,
        on two lines.
    beta : int, optional
        The second value.

    Returns
    -------
    list
        Nothing useful.
    """
    return []


UserId = NewType("UserId", str)


def context_and_kwargs(
    ctx: Context, session: object, user: UserId, maybe_ctx: Context | None = None, **extra: int
) -> mcp_types.CallToolResult:
    """Take a context and any other integers."""
    raise NotImplementedError


def no_params() -> list[Point]:
    """Return points."""
    return []


HANDLERS: dict[str, Callable[..., Any]] = {
    "scalars": scalars,
    "choices": choices,
    "collections": collections,
    "classes": classes,
    "recursive": recursive,
    "formats": formats,
    "annotated": annotated,
    "numpy_style": numpy_style,
    "no_params": no_params,
    "context_and_kwargs": context_and_kwargs,
}
SKIP = {"context_and_kwargs": ("session",)}


def describe(name: str) -> dict[str, Any]:
    fn = HANDLERS[name]
    return {
        "description": function_description(fn),
        "inputSchema": function_input_schema(fn, skip=SKIP.get(name, ())),
        "outputSchema": function_output_schema(fn),
    }


# --------------------------------------------------------------------------------------
# Golden files


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_golden(name: str) -> None:
    generated = describe(name)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(generated, indent=2, ensure_ascii=False) + "\n")
    assert generated == json.loads(path.read_text()), f"regenerate with UPDATE_GOLDEN=1: {path}"


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_generated_schemas_are_valid_2020_12(name: str) -> None:
    generated = describe(name)
    for key in ("inputSchema", "outputSchema"):
        if generated[key] is not None:
            jsonschema.Draft202012Validator.check_schema(generated[key])
            assert generated[key]["type"] == "object"  # MCP requires object schemas


# --------------------------------------------------------------------------------------
# type_schema, one type at a time


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (object, {}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (int | Any, {}),
        (Literal["a"], {"type": "string", "enum": ["a"]}),
        (Literal[Color.RED], {"type": "string", "enum": ["red"]}),
        (UserId, {"type": "string"}),
        (list, {"type": "array"}),
        (list[Any], {"type": "array"}),
        (tuple, {"type": "array"}),
        (dict[str, Any], {"type": "object"}),
        (Annotated[int, Description("n")], {"type": "integer", "description": "n"}),
        (Annotated[int, 42], {"type": "integer"}),  # metadata we do not know is ignored
    ],
)
def test_type_schema(tp: Any, expected: dict[str, Any]) -> None:
    assert type_schema(tp) == expected


def test_type_schema_of_a_recursive_class_is_rooted() -> None:
    schema = type_schema(TreeNode)
    assert schema["type"] == "object"
    assert schema["properties"]["children"]["items"] == {"$ref": "#"}
    assert "$defs" not in schema
    jsonschema.Draft202012Validator.check_schema(schema)


def test_same_name_classes_get_distinct_definitions() -> None:
    first = attrs.make_class("Item", {"a": attrs.field(type=int)})
    second = attrs.make_class("Item", {"b": attrs.field(type=str)})
    schema = type_schema(tuple[first, first, second, second])  # type: ignore[valid-type]
    assert set(schema["$defs"]) == {"Item", "Item2"}


def test_dataclass_made_up_docstring_is_not_a_description() -> None:
    @dataclasses.dataclass
    class Plain:
        a: int

    schema = type_schema(Plain)
    assert "description" not in schema
    assert schema["properties"] == {"a": {"type": "integer"}}


class Unsupported:
    pass


@attrs.define
class HasBadField:
    when: Unsupported


class ObjectEnum(enum.Enum):
    A = object()


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        (Unsupported, "unsupported type"),
        (dict[int, str], "object keys must be str"),
        (HasBadField, "field 'when' of HasBadField"),
        (ObjectEnum, "not JSON scalars"),
        (Literal[b"x"], "unsupported Literal"),
        (complex, "unsupported type"),
    ],
)
def test_unsupported_types(tp: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        type_schema(tp)


def test_unsupported_parameter_is_named() -> None:
    def handler(good: int, bad: list[HasBadField]) -> None:
        pass

    with pytest.raises(TypeError) as info:
        function_input_schema(handler)
    message = str(info.value)
    assert "parameter 'bad' of" in message
    assert "handler" in message
    assert "field 'when' of HasBadField" in message


def test_unresolvable_annotations() -> None:
    def handler(ctx: NotDefinedAnywhere, x: int) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(TypeError, match=r"parameter 'ctx' of .*handler: cannot resolve"):
        function_input_schema(handler)
    # A skipped parameter may be unresolvable (e.g. imported under TYPE_CHECKING only).
    assert function_input_schema(handler, skip={"ctx"})["required"] == ["x"]


@attrs.define
class Dangling:
    other: NotDefinedEither  # type: ignore[name-defined]  # noqa: F821


def test_unresolvable_class_annotations() -> None:
    with pytest.raises(TypeError, match="cannot resolve the annotations of Dangling"):
        type_schema(Dangling)


def test_positional_only_and_var_positional_are_refused() -> None:
    def pos_only(a: int, /) -> None:
        pass

    def var_pos(*a: int) -> None:
        pass

    with pytest.raises(TypeError, match=r"'a' of .*positional-only"):
        function_input_schema(pos_only)
    with pytest.raises(TypeError, match=r"'a' of .*variadic positional"):
        function_input_schema(var_pos)


def test_unannotated_parameters_and_callables() -> None:
    def loose(a, b=3):  # type: ignore[no-untyped-def]
        """Loose."""

    assert function_input_schema(loose) == {
        "type": "object",
        "properties": {"a": {}, "b": {"default": 3}},
        "required": ["a"],
        "additionalProperties": False,
    }

    class Tool:
        """A callable object."""

        def __call__(self, n: int) -> int:
            return n

    assert function_input_schema(Tool())["properties"] == {"n": {"type": "integer"}}
    assert function_output_schema(Tool())["properties"] == {"result": {"type": "integer"}}  # type: ignore[index]
    assert function_description(Tool()) == "A callable object."


def test_defaults_that_are_not_json_are_left_out() -> None:
    sentinel = object()

    def handler(a: Any = sentinel, b: dt.date = dt.date(2024, 1, 2)) -> None:
        pass

    props = function_input_schema(handler)["properties"]
    assert props["a"] == {}
    assert props["b"] == {"type": "string", "format": "date", "default": "2024-01-02"}


class Shade(enum.Enum):
    LIGHT = "light"
    DARK = "dark"


@dataclasses.dataclass
class Paging:
    limit: int = None  # type: ignore[assignment]  # (a common sloppy hint)
    shade: Shade = Shade.DARK
    other: Shade = Shade.LIGHT


def test_a_default_is_written_only_when_valid_against_its_own_schema() -> None:
    """JSON Schema 2020-12 (meta-data): "It is RECOMMENDED that a default value be valid
    against the associated schema"; a model that sends the announced default must not be
    refused."""

    def search(
        query: str,
        limit: int = None,  # type: ignore[assignment]  # noqa: RUF013 (the sloppy hint tested)
        maybe: int | None = None,
        label: str = 5,  # type: ignore[assignment]
        bounded: Annotated[int, Constraints(minimum=1)] = 0,
        shade: Shade = Shade.LIGHT,
        paging: Paging | None = None,
    ) -> None:
        pass

    schema = function_input_schema(search)
    props = schema["properties"]
    for name in ("limit", "label", "bounded"):
        assert "default" not in props[name], name
    assert props["maybe"]["default"] is None
    assert props["shade"]["default"] == "light"  # (Shade's schema, in $defs: it fits)
    paging = props["paging"]["anyOf"][0]["properties"]  # (used once: inlined)
    assert "default" not in paging["limit"]
    assert paging["shade"]["default"] == "dark"
    # Every default published fits its schema, as the jsonschema package sees it.
    for prop in [*props.values(), *paging.values()]:
        if "default" in prop:
            root = {**prop, "$defs": schema.get("$defs", {})}
            assert jsonschema.Draft202012Validator(root).is_valid(prop["default"]), prop


@dataclasses.dataclass
class Window:
    start: dt.datetime = dt.datetime(2024, 1, 1)  # (naive: the case tested)


def test_a_default_the_call_would_refuse_is_left_out() -> None:
    # A naive datetime's JSON passes the schema (format is not checked there) but not
    # the call's RFC 3339 check: announced, it was refused when a model sent it back.
    utc = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

    def since(
        when: dt.datetime = dt.datetime(2024, 1, 1),  # (naive: the case tested)
        aware: dt.datetime = utc,
        window: Window | None = None,
    ) -> None:
        pass

    schema = function_input_schema(since)
    props = schema["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["aware"]["default"] == "2024-01-01T00:00:00+00:00"
    window = props["window"]["anyOf"][0]["properties"]
    assert "default" not in window["start"]
    # Every default announced is taken back.
    assert coerce_arguments(since, {"aware": props["aware"]["default"]}) == {"aware": utc}


class Perm(enum.IntFlag):
    R = 4
    W = 2


class Mode(enum.Flag):
    A = enum.auto()
    B = enum.auto()


@dataclasses.dataclass
class Granted:
    perm: Perm


@pytest.mark.parametrize(
    ("build", "where"),
    [
        (lambda: type_schema(Perm), "Perm is an enum.Flag"),
        (lambda: type_schema(list[Mode]), "Mode is an enum.Flag"),
        (lambda: type_schema(Granted), "field 'perm' of Granted"),
    ],
)
def test_flags_are_refused_not_published_as_their_members_alone(
    build: Callable[[], Any], where: str
) -> None:
    """A schema of a flag's members (``{"enum": [4, 2]}``) refused ``R|W`` (6), the point
    of a flag: refused when the tool is registered, with what to take instead."""
    with pytest.raises(TypeError, match=r"enum\.Flag: its values combine") as info:
        build()
    assert where in str(info.value)
    assert "set[...]" in str(info.value)


# --------------------------------------------------------------------------------------
# Docstrings


def test_docstring_styles() -> None:
    def google(a: int, b: int, c: int) -> None:
        """Summary line
        continued.

        Args:
            a: first.
            b (int): second,
                continued.
            *c: starred.

        Returns:
            nothing.
        """

    def sphinx(a: int, b: int) -> None:
        """Summary.

        :param a: first.
        :param list[int] b: second.
        :returns: nothing.
        """

    def only_sections(a: int, b: int) -> None:
        """
        Args:
            a: first.
        """

    def first_line_section(a: int, b: int) -> None:
        """Args:
            a: first.
            b: second.

        Returns:
            c: not a parameter.
        """

    for fn in (google, sphinx):
        schema = function_input_schema(fn)
        assert schema["properties"]["a"]["description"] == "first."
    assert function_description(google) == "Summary line continued."
    assert function_input_schema(google)["properties"]["b"]["description"] == "second, continued."
    assert function_input_schema(google)["properties"]["c"]["description"] == "starred."
    assert function_description(sphinx) == "Summary."
    assert function_description(only_sections) is None
    assert function_input_schema(only_sections)["properties"]["a"]["description"] == "first."
    assert function_description(first_line_section) is None
    props = function_input_schema(first_line_section)["properties"]
    assert props == {
        "a": {"type": "integer", "description": "first."},
        "b": {"type": "integer", "description": "second."},
    }

    def undocumented(a: int) -> None:
        pass

    assert function_description(undocumented) is None


# --------------------------------------------------------------------------------------
# Output schemas


class CustomContent:
    __mcp_content__ = True


def _returning(tp: Any) -> Callable[..., Any]:
    def handler() -> None:
        pass

    handler.__annotations__ = {"return": tp}
    return handler


@pytest.mark.parametrize(
    "tp",
    [
        None,
        type(None),
        Any,
        mcp_types.TextContent,
        mcp_types.CallToolResult,
        list[mcp_types.TextContent | mcp_types.ImageContent],
        mcp_types.ContentBlock,
        Sequence[mcp_types.ContentBlock],
        CustomContent,
        CustomContent | None,
    ],
)
def test_no_output_schema(tp: Any) -> None:
    handler = _returning(tp)
    assert function_output_schema(handler) is None
    assert to_structured_content(handler, "anything") is None


def test_no_return_annotation_means_no_output_schema() -> None:
    def handler():  # type: ignore[no-untyped-def]
        pass

    assert function_output_schema(handler) is None


@pytest.mark.parametrize(
    ("tp", "value", "structured"),
    [
        (int, 3, {"result": 3}),
        (str, "hi", {"result": "hi"}),
        (list[Point], [Point(1, 2)], {"result": [{"x": 1, "y": 2, "label": None}]}),
        (Point | None, None, {"result": None}),
        (Point, Point(1, 2), {"x": 1, "y": 2, "label": None}),
        (Options, {"depth": 1}, {"depth": 1}),
        (dict[str, int], {"a": 1}, {"a": 1}),
        (Annotated[Box, "a box"], Box(Point(0, 0), Point(1, 1)), None),
    ],
)
def test_output_schema_and_structured_content(tp: Any, value: Any, structured: Any) -> None:
    handler = _returning(tp)
    schema = function_output_schema(handler)
    assert schema is not None
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    content = to_structured_content(handler, value)
    if structured is not None:
        assert content == structured
    assert validate(content, schema, root="structuredContent") == []
    jsonschema.validate(content, schema)


def test_structured_content_must_be_an_object() -> None:
    with pytest.raises(TypeError, match="not an object"):
        to_structured_content(_returning(dict[str, int]), [1])


# --------------------------------------------------------------------------------------
# validate: messages


POINT = type_schema(Point)
BOX_ARGS = function_input_schema(classes)


@pytest.mark.parametrize(
    ("instance", "schema", "errors"),
    [
        ({"x": 1, "y": 2.5}, POINT, []),
        ({"x": "1", "y": 2}, POINT, ["arguments.x: expected number, got string"]),
        ({"x": True, "y": 2}, POINT, ["arguments.x: expected number, got boolean"]),
        ({"y": 2}, POINT, ["arguments: missing required property 'x'"]),
        ({"x": 1, "y": 2, "z": 3}, POINT, ["arguments: unexpected property 'z'"]),
        (
            {"x": 1, "y": 2, "label": 3},
            POINT,
            ["arguments.label: expected string or null, got integer"],
        ),
        ([], POINT, ["arguments: expected object, got array"]),
        (1.0, {"type": "integer"}, []),
        (1.5, {"type": "integer"}, ["arguments: expected integer, got number"]),
        (True, {"type": "integer"}, ["arguments: expected integer, got boolean"]),
        (None, {"type": ["string", "null"]}, []),
        ("c", {"enum": ["a", "b"]}, ['arguments: expected one of "a", "b", got "c"']),
        (1, {"enum": [True]}, ["arguments: expected one of true, got 1"]),
        (1.0, {"enum": [1]}, []),
        ("a", {"const": "b"}, ['arguments: expected "b", got "a"']),
        (0, {"minimum": 1}, ["arguments: must be >= 1, got 0"]),
        (5, {"maximum": 4}, ["arguments: must be <= 4, got 5"]),
        (1, {"exclusiveMinimum": 1}, ["arguments: must be > 1, got 1"]),
        (1, {"exclusiveMaximum": 1}, ["arguments: must be < 1, got 1"]),
        (3, {"multipleOf": 2}, ["arguments: must be a multiple of 2, got 3"]),
        # As written in JSON (a float quotient says 1998.9999999999998; pydantic agrees)...
        (19.99, {"multipleOf": 0.01}, []),
        (0.07, {"multipleOf": 0.01}, []),
        (0.35, {"multipleOf": 0.1}, ["arguments: must be a multiple of 0.1, got 0.35"]),
        # ... and exactly for integers (the quotient as a float rounds past 2**53).
        (2**60 + 1, {"multipleOf": 3}, [f"arguments: must be a multiple of 3, got {2**60 + 1}"]),
        (2**60 + 2, {"multipleOf": 3}, []),
        ("", {"minLength": 1}, ["arguments: expected at least 1 characters, got 0"]),
        ("abc", {"maxLength": 2}, ["arguments: expected at most 2 characters, got 3"]),
        ([1, 1.0], {"uniqueItems": True}, ["arguments[1]: duplicate of item 0"]),
        ([1, True], {"uniqueItems": True}, []),
        ({}, {"minProperties": 1}, ["arguments: expected at least 1 properties, got 0"]),
        (
            [1, "a", 3],
            {"prefixItems": [{"type": "integer"}], "items": False},
            [
                "arguments[1]: not allowed",
                "arguments[2]: not allowed",
            ],
        ),
        (
            {"a b": 1},
            {"additionalProperties": {"type": "string"}},
            ['arguments["a b"]: expected string, got integer'],
        ),
        (1, {"allOf": [{"type": "integer"}, {"minimum": 2}]}, ["arguments: must be >= 2, got 1"]),
        (
            1,
            {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            ["arguments: must match exactly one alternative, matches 2"],
        ),
        (1, {"not": {"type": "integer"}}, ['arguments: must not match {"type": "integer"}']),
        ("x" * 100, {"type": "integer"}, ["arguments: expected integer, got string"]),
        (
            ["x" * 100],
            {"items": {"enum": [1]}},
            ['arguments[0]: expected one of 1, got "' + "x" * 56 + "..."],
        ),
    ],
)
def test_validate_messages(instance: Any, schema: dict[str, Any], errors: list[str]) -> None:
    assert validate(instance, schema) == errors


def test_any_of_reports_the_branch_of_the_right_type() -> None:
    args = {
        "box": {"top_left": {"x": 0, "y": 0}, "bottom_right": {"x": 1, "y": 1}},
        "center": {"x": 0, "y": 0},
        "options": {"depth": 1},
        "filters": {"kind": "disk"},
    }
    assert validate(args, BOX_ARGS) == [
        'arguments.filters.kind: expected one of "file", "folder", got "disk"'
    ]
    args["filters"] = 3
    assert validate(args, BOX_ARGS) == ["arguments.filters: expected object or null, got integer"]
    schema = {"anyOf": [{"enum": ["a", "b"]}, {"$ref": "#/$defs/N"}, True], "$defs": {"N": {}}}
    assert validate(1, {"anyOf": [{"enum": ["a"]}, {"anyOf": [{"type": "null"}]}, False]}) == [
        'arguments: expected one of "a" or null or nothing, got integer'
    ]
    assert validate(1, schema) == []


def test_validate_paths_from_the_root_name() -> None:
    assert validate({"x": "a", "y": 1}, POINT, root="structuredContent") == [
        "structuredContent.x: expected number, got string"
    ]


def test_validate_refuses_what_it_does_not_implement() -> None:
    with pytest.raises(ValueError, match="unsupported JSON Schema keyword"):
        validate("a", {"patternProperties": {"^a$": {}}})
    with pytest.raises(ValueError, match="not a regular expression"):
        validate("a", {"pattern": "("})
    with pytest.raises(ValueError, match="only local"):
        validate("a", {"$ref": "https://example.com/schema"})
    with pytest.raises(ValueError, match="unresolvable"):
        validate("a", {"$ref": "#/$defs/Missing"})
    schema = {"$defs": {"a/b": {"type": "integer"}, "list": [{"type": "string"}]}}
    assert validate(1, {**schema, "$ref": "#/$defs/a~1b"}) == []
    assert validate(1, {**schema, "$ref": "#/$defs/list/0"}) == [
        "arguments: expected string, got integer"
    ]


def test_validate_pattern_searches() -> None:
    assert validate("xab", {"pattern": "ab"}) == []
    assert validate("xab", {"pattern": "^ab"}) == ['arguments: must match "^ab", got "xab"']
    assert validate(3, {"pattern": "^ab"}) == []  # only strings


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_validate_refuses_non_finite_numbers(value: float) -> None:
    shown = json.dumps(value)  # NaN, Infinity, -Infinity
    for schema in ({"type": "number"}, {"type": "number", "maximum": 1}, {"type": "integer"}):
        assert validate(value, schema) == [f"arguments: expected {schema['type']}, got {shown}"]
    either = {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]}
    assert validate(value, either) == [f"arguments: expected number or null, got {shown}"]
    # Not a number, so numeric keywords do not apply (and never compare with NaN).
    assert validate(value, {"minimum": 0, "exclusiveMaximum": 10, "multipleOf": 2}) == []


def test_validate_checks_only_the_bounds_it_has() -> None:
    assert validate(5, {"exclusiveMinimum": 5}) == ["arguments: must be > 5, got 5"]
    assert validate(5, {"maximum": 4, "minimum": 6}) == [
        "arguments: must be >= 6, got 5",
        "arguments: must be <= 4, got 5",
    ]


def test_validate_reports_what_is_too_deep_to_check() -> None:
    schema = type_schema(TreeNode)
    deep: dict[str, Any] = {"value": 1}
    for _ in range(2000):
        deep = {"value": 1, "children": [deep]}
    assert validate(deep, schema, root="n") == ["n: nested too deeply to check"]


def test_check_schema_finds_what_validate_cannot_use() -> None:
    check_schema(BOX_ARGS)
    check_schema({"type": "string", "pattern": "^a", "$defs": {"a/b": True}})
    with pytest.raises(ValueError, match=r"#/\$defs/a~1b/items: unsupported .* 'contains'"):
        check_schema({"$defs": {"a/b": {"items": {"contains": {}}}}})
    with pytest.raises(ValueError, match=r"#/prefixItems: expected a list of schemas"):
        check_schema({"prefixItems": {}})
    with pytest.raises(ValueError, match=r"#/properties: expected an object of schemas"):
        check_schema({"properties": []})
    with pytest.raises(ValueError, match=r"#/not: \$ref 1 is not a string"):
        check_schema({"not": {"$ref": 1}})
    with pytest.raises(ValueError, match=r"#: pattern 1 is not a string"):
        check_schema({"pattern": 1})


# --------------------------------------------------------------------------------------
# validate agrees with jsonschema


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, 2.5, -1.5])
    | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "a", "zz"]), children, max_size=3)
    ),
    max_leaves=6,
)


def _resolve(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        node = node[part]
    return node


def _sometimes(
    noise: st.SearchStrategy[Any], usual: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """Mostly ``usual``, now and then ``noise``."""
    return st.integers(0, 19).flatmap(lambda n: noise if n == 0 else usual)


def _toggle(pair: tuple[dict[str, Any], str]) -> dict[str, Any]:
    value, key = pair
    if key in value:
        return {k: v for k, v in value.items() if k != key}
    return {**value, key: 1}


def _instances(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of ``schema`` that are mostly valid, with mistakes now and then."""
    return _sometimes(json_values, _guided(schema, root, depth))


def _guided(schema: Any, root: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    if depth > 4 or not isinstance(schema, dict):
        return json_values
    if "$ref" in schema:
        return _guided(_resolve(root, schema["$ref"]), root, depth + 1)
    if "anyOf" in schema:
        return st.one_of([_instances(sub, root, depth + 1) for sub in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    options: list[st.SearchStrategy[Any]] = []
    kinds = schema.get("type", [])
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "integer":
            options.append(st.integers(-3, 150) | st.just(2.0))
        elif kind == "number":
            options.append(st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False))
        elif kind == "string":
            options.append(st.text(max_size=3))
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "null":
            options.append(st.none())
        elif kind == "array":
            prefix = [_instances(p, root, depth + 1) for p in schema.get("prefixItems", [])]
            items = _instances(schema.get("items", {}), root, depth + 1)
            room = max(0, schema.get("maxItems", len(prefix) + 2) - len(prefix))
            rest = _sometimes(st.lists(items, max_size=2), st.lists(items, max_size=room))
            options.append(
                st.tuples(st.tuples(*prefix), rest).map(lambda t: [*t[0], *t[1]] if t[0] else t[1])
            )
        elif kind == "object":
            props = {
                k: _instances(v, root, depth + 1) for k, v in schema.get("properties", {}).items()
            }
            required = [k for k in schema.get("required", []) if k in props]
            extra = schema.get("additionalProperties", {})
            if extra is not False:
                props.setdefault("zz", _instances(extra, root, depth + 1))
            usual = st.fixed_dictionaries(
                {k: props[k] for k in required},
                optional={k: v for k, v in props.items() if k not in required},
            )
            keys = st.sampled_from(sorted({*props, "zz"}))
            options.append(_sometimes(st.tuples(usual, keys).map(_toggle), usual))
    return st.one_of(options) if options else json_values


CROSS_CHECKED = {
    **{f"{name}.input": describe(name)["inputSchema"] for name in sorted(HANDLERS)},
    **{
        f"{name}.output": describe(name)["outputSchema"]
        for name in sorted(HANDLERS)
        if describe(name)["outputSchema"] is not None
    },
    "keywords": {
        "type": "array",
        "items": {"anyOf": [{"type": "integer", "multipleOf": 2}, {"const": "a"}]},
        "uniqueItems": True,
        "maxItems": 2,
        "minItems": 1,
    },
    "combinators": {
        "type": "number",
        "oneOf": [{"type": "integer", "maximum": 0}, {"type": "number", "minimum": 1}],
        "not": {"const": 3},
        "allOf": [{"maximum": 100}],
    },
    "object_bounds": {"type": "object", "minProperties": 1, "maxProperties": 2},
    "pattern": {"type": ["string", "integer"], "pattern": "^[a-c]+$|^$"},
}


STRATEGIES = {name: _instances(schema, schema) for name, schema in CROSS_CHECKED.items()}
VALIDATORS = {name: jsonschema.Draft202012Validator(s) for name, s in CROSS_CHECKED.items()}


@pytest.mark.parametrize("name", sorted(CROSS_CHECKED))
@given(data=st.data())
def test_validate_agrees_with_jsonschema(name: str, data: st.DataObject) -> None:
    instance = data.draw(STRATEGIES[name], label="instance")
    ours = validate(instance, CROSS_CHECKED[name])
    assert (not ours) == VALIDATORS[name].is_valid(instance), ours


# --------------------------------------------------------------------------------------
# coerce_arguments and to_jsonable


Points = NewType("Points", int)


def test_an_int_member_in_any_spelling_lets_a_later_float_take_an_inexact_float() -> None:
    # (Annotated and NewType members were not seen as int: 1e20 was refused.)
    def annotated(x: Annotated[int, "a count"] | float) -> None: ...
    def new_type(x: Points | float | None) -> None: ...
    def none_takes_it(x: Annotated[Points, "score"] | str) -> None: ...

    for fn in (annotated, new_type):
        assert coerce_arguments(fn, {"x": 1e20}) == {"x": 1e20}
        assert coerce_arguments(fn, {"x": 7.0}) == {"x": 7}
        assert type(coerce_arguments(fn, {"x": 7.0})["x"]) is int
    with pytest.raises(ValueError, match="1e\\+20 is not an exact integer"):
        coerce_arguments(none_takes_it, {"x": 1e20})


def test_coerce_arguments_builds_the_annotated_types() -> None:
    args = {
        "box": {
            "top_left": {"x": 0, "y": 0},
            "bottom_right": {"x": 1.5, "y": 1, "label": "end"},
            "color": "blue",
            "tags": ["t"],
        },
        "center": {"x": 1, "y": 2},
        "options": {"depth": 1},
    }
    assert validate(args, BOX_ARGS) == []
    out = coerce_arguments(classes, args)
    assert out == {
        "box": Box(Point(0, 0), Point(1.5, 1, "end"), Color.BLUE, ["t"]),
        "center": Point(1.0, 2.0),
        "options": {"depth": 1},
    }
    assert isinstance(out["center"].x, float)
    assert to_jsonable(out) == {
        "box": {
            "top_left": {"x": 0.0, "y": 0.0, "label": None},
            "bottom_right": {"x": 1.5, "y": 1.0, "label": "end"},
            "color": "blue",
            "tags": ["t"],
        },
        "center": {"x": 1.0, "y": 2.0, "label": None},
        "options": {"depth": 1},
    }


def test_coerce_formats_collections_and_kwargs() -> None:
    uid = uuid.uuid4()
    out = coerce_arguments(
        formats,
        {
            "when": "2024-05-06T07:08:09Z",
            "day": "2024-05-06",
            "at": "07:08",
            "id": str(uid),
            "blob": "aGk=",
            "deadline": None,
        },
    )
    assert out == {
        "when": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC),
        "day": dt.date(2024, 5, 6),
        "at": dt.time(7, 8),
        "id": uid,
        "blob": b"hi",
        "deadline": None,
    }
    out = coerce_arguments(
        collections,
        {"unique": ["a"], "frozen": [1], "stack": [1, 2.0], "pair": [1, 2], "nothing": []},
    )
    assert out == {
        "unique": {"a"},
        "frozen": frozenset({1}),
        "stack": (1, 2),
        "pair": (1.0, 2.0),
        "nothing": (),
    }
    assert coerce_arguments(context_and_kwargs, {"user": "u", "n": 3}, skip={"session"}) == {
        "user": "u",
        "n": 3,
    }


@attrs.frozen
class Cat:
    meow: bool


@attrs.frozen
class Dog:
    bark: int


def test_coerce_unions_by_schema() -> None:
    def handler(
        value: int | str,
        pet: Cat | Dog,
        pets: list[Cat | Dog | None],
        choice: Literal["a", "b"] | Color,
    ) -> None:
        pass

    out = coerce_arguments(
        handler,
        {
            "value": "1",
            "pet": {"bark": 2},
            "pets": [{"meow": True}, None, {"bark": 1}],
            "choice": "green",
        },
    )
    assert out == {
        "value": "1",
        "pet": Dog(2),
        "pets": [Cat(True), None, Dog(1)],
        "choice": Color.GREEN,
    }
    assert coerce_arguments(handler, {"value": 1})["value"] == 1


def test_coerce_typeddict_with_postponed_required_markers() -> None:
    def handler(options: Options, filters: Filters) -> None:
        pass

    assert coerce_arguments(handler, {"options": {"depth": 2}, "filters": {"kind": "file"}}) == {
        "options": {"depth": 2},
        "filters": {"kind": "file"},
    }


def test_coerce_reports_what_validation_cannot_see() -> None:
    with pytest.raises(ValueError, match=r"arguments\.when: invalid value \(\"yesterday\" is not"):
        coerce_arguments(formats, {"when": "yesterday"})
    with pytest.raises(ValueError, match=r"arguments\.box\.top_left\.x: required field missing"):
        coerce_arguments(classes, {"box": {"top_left": {}, "bottom_right": {"x": 1, "y": 1}}})
    with pytest.raises(ValueError, match="arguments: unexpected property 'nope'"):
        coerce_arguments(classes, {"nope": 1})
    with pytest.raises(ValueError, match="fits none of"):
        coerce_arguments(choices, {"maybe_color": "purple"})


def test_to_jsonable() -> None:
    @dataclasses.dataclass
    class WithInitFalse:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    uid = uuid.UUID(int=1)
    assert to_jsonable(
        {
            "enum": Color.RED,
            "int_enum": Priority.HIGH,
            "when": dt.datetime(2024, 1, 2, 3, 4, 5),
            "time": dt.time(1, 2),
            "uuid": uid,
            "bytes": b"hi",
            "tuple": (1, (2,)),
            "set": {3},
            "point": Point(1, 2),
            "dc": WithInitFalse(1),
            Color.GREEN: "enum key",
            "float": 1.5,
            "none": None,
        }
    ) == {
        "enum": "red",
        "int_enum": 2,
        "when": "2024-01-02T03:04:05",
        "time": "01:02:00",
        "uuid": str(uid),
        "bytes": "aGk=",
        "tuple": [1, [2]],
        "set": [3],
        "point": {"x": 1, "y": 2, "label": None},
        "dc": {"a": 1},
        "green": "enum key",
        "float": 1.5,
        "none": None,
    }

    class Mode(enum.StrEnum):
        FAST = "fast"

    converted = to_jsonable([Mode.FAST])
    assert converted == ["fast"]
    assert type(converted[0]) is str
    with pytest.raises(TypeError, match="keys must be strings"):
        to_jsonable({1: "a"})
    with pytest.raises(TypeError, match="Unsupported has no JSON form"):
        to_jsonable([Unsupported()])


def test_to_jsonable_refuses_numbers_json_cannot_carry() -> None:
    assert to_jsonable([-(2**63), 2**64 - 1, 1e308]) == [-(2**63), 2**64 - 1, 1e308]
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(TypeError, match="no JSON form"):
            to_jsonable({"a": [value]})
    for number in (2**64, -(2**63) - 1, 10**10_000):  # too big even for a repr
        with pytest.raises(TypeError, match="-bit integer does not fit in 64 bits"):
            to_jsonable(number)

    # Not for text (json.dumps): any int, and floats as json.dumps writes them.
    assert to_jsonable({"a": [2**70, math.inf]}, strict=False) == {"a": [2**70, math.inf]}


def test_enum_values_are_canonicalized_once_per_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    canonical = _validation._canonical

    def counting(value: object) -> object:
        nonlocal calls
        calls += 1
        return canonical(value)

    monkeypatch.setattr(_validation, "_canonical", counting)
    choices = [f"v{i}" for i in range(300)]
    schema: dict[str, Any] = {"type": "array", "items": {"enum": choices}}
    assert validate(["v299"] * 300, schema) == []
    assert calls <= 2 * 300 + 10  # each choice once, each value once: not 300 x 300
    # The distinctions stay: 1 == 1.0, True != 1, per node.
    schema = {
        "prefixItems": [{"enum": [1]}, {"enum": [True]}],
        "items": {"enum": [1.0]},
    }
    assert validate([1.0, True, 1, 1.0], schema) == []
    assert validate([True, 1, True], schema) == [
        "arguments[0]: expected one of 1, got true",
        "arguments[1]: expected one of true, got 1",
        "arguments[2]: expected one of 1.0, got true",
    ]


points = st.builds(
    Point,
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False),
    st.none() | st.text(max_size=5),
)


@given(
    box=st.builds(Box, points, points, st.sampled_from(Color), st.lists(st.text(max_size=3))),
    center=points,
    depth=st.integers(-(2**63), 2**64 - 1),  # what JSON on the wire carries
    verbose=st.none() | st.booleans(),
)
def test_round_trip_through_json(box: Box, center: Point, depth: int, verbose: bool | None) -> None:
    options: Options = {"depth": depth}
    if verbose is not None:
        options["verbose"] = verbose
    values = {"box": box, "center": center, "options": options}
    wire = json.loads(json.dumps(to_jsonable(values)))
    assert validate(wire, BOX_ARGS) == []
    jsonschema.validate(wire, BOX_ARGS, cls=jsonschema.Draft202012Validator)
    assert coerce_arguments(classes, wire) == values


class AnnotatedTotals(TypedDict, total=False):
    needed: Annotated[Required[int], "always there"]
    extra: Annotated[str, "maybe"]


@attrs.define
class AllDefaults:
    """Everything has a default.

    Attributes:
        when: not JSON as a default.
    """

    when: object = object()
    count: int = 1
    hidden: int = attrs.field(init=False, default=0)


def test_class_field_corner_cases() -> None:
    schema = type_schema(AnnotatedTotals)
    assert schema["required"] == ["needed"]
    assert schema["properties"]["needed"] == {"type": "integer", "description": "always there"}
    schema = type_schema(AllDefaults)
    assert "required" not in schema
    assert schema["properties"] == {
        "when": {"description": "not JSON as a default."},
        "count": {"type": "integer", "default": 1},
    }


def test_kwargs_of_any_type_open_the_object() -> None:
    def handler(a: int, **rest: Any) -> None:
        pass

    assert "additionalProperties" not in function_input_schema(handler)


def test_docstring_oddities() -> None:
    def google(a: int, b: int) -> None:
        """Summary.

        Args:

            a: first.

            not an entry line
            b: second.
        """

    def numpy(a: int, b: int) -> None:
        """Summary.

        Parameters
        ----------

        a : int
            first.
          misplaced line
        --- not a name ---
            ignored.
        b
            second.
        """

    assert function_input_schema(google)["properties"] == {
        "a": {"type": "integer", "description": "first."},
        "b": {"type": "integer", "description": "second."},
    }
    assert function_input_schema(numpy)["properties"] == {
        "a": {"type": "integer", "description": "first. misplaced line"},
        "b": {"type": "integer", "description": "second."},
    }


def test_partials_and_unhashable_callables() -> None:
    def add(a: int, b: Annotated[int, "second"]) -> int:
        return a + b

    partial = functools.partial(add, 1)
    assert function_input_schema(partial)["properties"] == {
        "b": {"type": "integer", "description": "second"}
    }
    assert coerce_arguments(partial, {"b": 2}) == {"b": 2}

    @attrs.define  # eq=True makes instances unhashable
    class Unhashable:
        scale: int

        def __call__(self, x: float) -> float:
            return x * self.scale

    tool = Unhashable(2)
    assert function_input_schema(tool)["properties"] == {"x": {"type": "number"}}
    assert coerce_arguments(tool, {"x": 1}) == {"x": 1.0}
    assert to_structured_content(tool, 2.0) == {"result": 2.0}


def test_each_annotation_is_resolved_on_its_own() -> None:
    def handler(ctx: OnlyForTypeCheckers, x: int) -> AlsoMissing:  # type: ignore[name-defined]  # noqa: F821
        pass

    assert function_input_schema(handler, skip={"ctx"})["properties"] == {"x": {"type": "integer"}}
    with pytest.raises(TypeError, match=r"the return type of .*handler: cannot resolve"):
        function_output_schema(handler)


def test_problems_are_listed_up_to_a_bound_and_enums_shown_short() -> None:
    schema = {"type": "array", "items": {"enum": [f"choice-{n}" for n in range(300)]}}
    problems = validate(["nope"] * 5_000, schema)
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == f"... and {5_000 - MAX_PROBLEMS} more problems"
    first = problems[0]
    assert first.startswith('arguments[0]: expected one of "choice-0", "choice-1"')
    assert len(first) < 150  # the 300 choices are shortened, not listed
    assert validate(["choice-7"] * 5_000, schema) == []


def test_the_validators_type_tests_agree_with_has_type() -> None:
    class Level(enum.IntEnum):
        LOW = 1

    class Name(str):
        pass

    values: list[object] = [None, True, False, 0, 1, -5, 2**70, 1.0, 1.5, -0.0]
    values += [math.nan, math.inf, -math.inf, "x", Name("y"), Level.LOW, [], {}, (1,), b"x"]
    for name, test in _validation._TYPE_TESTS.items():
        for value in values:
            assert test(value) == _validation.has_type(value, name), (name, value)
    assert set(_validation._TYPE_TESTS) == _validation._TYPE_NAMES


@pytest.mark.parametrize("sub", [None, 5, ["type"], "", []])
def test_a_subschema_that_is_no_schema_is_a_value_error(sub: Any) -> None:
    with pytest.raises(ValueError, match="a schema is an object or a boolean"):
        validate({"x": 1}, {"type": "object", "properties": {"x": sub}})


def test_check_schema_reports_the_same_problem_every_run() -> None:
    schema = {"not": {"zzz": 1}, "items": {"yyy": 1}, "allOf": [{"xxx": 1}]}
    with pytest.raises(ValueError, match="#/items"):
        check_schema(schema)

"""The validator's two JSON Schema dialects: 2020-12 (the default) and draft-07, which
the TypeScript SDK declares on every tool; checked against ``jsonschema``'s
``Draft7Validator`` where they differ."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_trio._validation import DRAFT_07_DIALECT, check_schema, dialect_supported, validate

DRAFT_07 = DRAFT_07_DIALECT + "#"

# What an official TypeScript SDK server (1.32.2, zod) lists as outputSchema for these
# zod shapes (captured from its tools/list).
TS_SCHEMAS: dict[str, dict[str, Any]] = {
    # { pair: z.tuple([z.string(), z.number().int()]),
    #   rest: z.tuple([z.string()]).rest(z.boolean()) }
    "tuple": {
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "items": [
                    {"type": "string"},
                    {"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991},
                ],
                "additionalItems": False,
                "minItems": 2,
                "maxItems": 2,
            },
            "rest": {
                "type": "array",
                "items": [{"type": "string"}],
                "additionalItems": {"type": "boolean"},
                "minItems": 1,
            },
        },
        "required": ["pair", "rest"],
        "$schema": DRAFT_07,
        "additionalProperties": False,
    },
    # { tree: Node }, with
    # Node = z.lazy(() => z.object({ value: z.number().int(), children: z.array(Node) }))
    "recursive": {
        "type": "object",
        "properties": {"tree": {"$ref": "#/definitions/__schema0"}},
        "required": ["tree"],
        "$schema": DRAFT_07,
        "additionalProperties": False,
        "definitions": {
            "__schema0": {
                "type": "object",
                "properties": {
                    "value": {
                        "type": "integer",
                        "minimum": -9007199254740991,
                        "maximum": 9007199254740991,
                    },
                    "children": {"type": "array", "items": {"$ref": "#/definitions/__schema0"}},
                },
                "required": ["value", "children"],
                "additionalProperties": False,
            }
        },
    },
    # { r: z.record(z.string(), z.number()), strict: z.object({ k: z.string() }).strict() }
    "record": {
        "type": "object",
        "properties": {
            "r": {
                "type": "object",
                "propertyNames": {"type": "string"},
                "additionalProperties": {"type": "number"},
            },
            "strict": {
                "type": "object",
                "properties": {"k": {"type": "string"}},
                "required": ["k"],
                "additionalProperties": False,
            },
        },
        "required": ["r", "strict"],
        "$schema": DRAFT_07,
        "additionalProperties": False,
    },
    # { s: z.discriminatedUnion("kind", [...]), v: z.union([z.string(), z.number()]), ... }
    "unions": {
        "type": "object",
        "properties": {
            "s": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "const": "a"},
                            "a": {"type": "string"},
                        },
                        "required": ["kind", "a"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string", "const": "b"},
                            "b": {"type": "number"},
                        },
                        "required": ["kind", "b"],
                        "additionalProperties": False,
                    },
                ]
            },
            "v": {"type": ["string", "number"]},
            "e": {"type": "string", "enum": ["a", "b"]},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        },
        "required": ["s", "v", "e", "x"],
        "$schema": DRAFT_07,
        "additionalProperties": False,
    },
}

TS_INSTANCES: dict[str, list[Any]] = {
    "tuple": [
        {"pair": ["a", 1], "rest": ["x", True, False]},
        {"pair": ["a", 1, 2], "rest": ["x"]},
        {"pair": ["a", "b"], "rest": ["x", 1]},
        {"pair": ["a"], "rest": []},
        {"pair": [1, 1], "rest": [1]},
    ],
    "recursive": [
        {"tree": {"value": 1, "children": [{"value": 2, "children": []}]}},
        {"tree": {"value": 1, "children": [{"value": "x", "children": []}]}},
        {"tree": {"value": 1, "children": [{"value": 2}]}},
        {"tree": {"value": 1.5, "children": []}, "more": 1},
    ],
    "record": [
        {"r": {"a": 1}, "strict": {"k": "v"}},
        {"r": {"a": "x"}, "strict": {"k": "v", "z": 1}},
        {"r": {}, "strict": {}},
    ],
    "unions": [
        {"s": {"kind": "a", "a": "s"}, "v": 1, "e": "a", "x": 0.5},
        {"s": {"kind": "b", "a": "s"}, "v": None, "e": "c", "x": 1},
        {"s": {"kind": "b", "b": 2}, "v": "t", "e": "b", "x": 0},
    ],
}


@pytest.mark.parametrize("name", sorted(TS_SCHEMAS))
def test_typescript_sdk_schemas_are_checked_as_draft_07_does(name: str) -> None:
    schema = TS_SCHEMAS[name]
    check_schema(schema)
    assert dialect_supported(schema)
    reference = jsonschema.Draft7Validator(schema)
    for instance in TS_INSTANCES[name]:
        ours = validate(instance, schema)
        assert (not ours) == reference.is_valid(instance), (instance, ours)


def test_a_tuple_is_checked_by_position_then_additional_items() -> None:
    schema = TS_SCHEMAS["tuple"]
    assert validate({"pair": ["a", 1, 2], "rest": ["x", 1]}, schema) == [
        "arguments.pair: expected at most 2 items, got 3",
        "arguments.pair[2]: not allowed",
        "arguments.rest[1]: expected boolean, got integer",
    ]


def test_a_recursive_schema_resolves_through_definitions() -> None:
    tree = {"value": 1, "children": [{"value": 2, "children": [{"value": "3", "children": []}]}]}
    assert validate({"tree": tree}, TS_SCHEMAS["recursive"]) == [
        "arguments.tree.children[0].children[0].value: expected integer, got string"
    ]


def test_draft_07_ignores_the_siblings_of_a_ref_and_2020_12_does_not() -> None:
    # Draft-07 core §8.3: "All other properties in a "$ref" object MUST be ignored."
    schema: dict[str, Any] = {
        "definitions": {"n": {"type": "integer"}},
        "properties": {"a": {"$ref": "#/definitions/n", "minimum": 10, "x-vendor": 1}},
    }
    assert validate({"a": 3}, {"$schema": DRAFT_07, **schema}) == []
    check_schema({"$schema": DRAFT_07, **schema})  # (an unknown sibling is no keyword)
    assert validate({"a": "3"}, {"$schema": DRAFT_07, **schema}) == [
        "arguments.a: expected integer, got string"
    ]
    del schema["properties"]["a"]["x-vendor"]
    assert validate({"a": 3}, schema) == ["arguments.a: must be >= 10, got 3"]
    assert jsonschema.Draft7Validator({"$schema": DRAFT_07, **schema}).is_valid({"a": 3})


def test_a_ref_at_a_draft_07_root_reaches_the_definitions_beside_it() -> None:
    schema = {
        "$schema": DRAFT_07,
        "$ref": "#/definitions/Out",
        "definitions": {"Out": {"type": "object", "required": ["a"]}},
    }
    check_schema(schema)
    assert validate({}, schema) == ["arguments: missing required property 'a'"]
    bad = {**schema, "definitions": {"Out": {"type": "object", "x-vendor": 1}}}
    with pytest.raises(ValueError, match="#/definitions/Out: unsupported JSON Schema keyword"):
        check_schema(bad)


def test_draft_07_dependencies_require_properties_or_a_schema() -> None:
    schema = {
        "$schema": DRAFT_07,
        "type": "object",
        "dependencies": {"card": ["billing"], "x": {"required": ["y"]}},
    }
    check_schema(schema)
    assert validate({"card": 1, "x": 1}, schema) == [
        "arguments: missing property 'billing', required with 'card'",
        "arguments: missing required property 'y'",
    ]
    assert validate({"billing": 1, "y": 1}, schema) == []


def test_property_names_are_checked_in_both_dialects() -> None:
    for dialect in ({}, {"$schema": DRAFT_07}):
        schema = {**dialect, "type": "object", "propertyNames": {"maxLength": 2}}
        check_schema(schema)
        assert validate({"ab": 1, "abc": 2}, schema) == [
            'arguments: property name "abc": expected at most 2 characters, got 3'
        ]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        # Keywords of the other dialect are refused, not ignored (nor guessed).
        ({"items": [{"type": "string"}]}, r"#/items: a schema is an object or a boolean"),
        ({"additionalItems": False}, r"unsupported JSON Schema keyword\(s\) 'additionalItems'"),
        ({"dependencies": {"a": ["b"]}}, r"unsupported JSON Schema keyword\(s\) 'dependencies'"),
        ({"$schema": DRAFT_07, "prefixItems": [{}]}, r"keyword\(s\) 'prefixItems'"),
        ({"$schema": DRAFT_07, "dependencies": {"a": [1]}}, r"#/dependencies/a: expected a"),
        ({"$schema": DRAFT_07, "dependencies": []}, r"#/dependencies: expected an object"),
        ({"$schema": DRAFT_07, "items": [3]}, r"#/items/0: a schema is an object"),
        (
            {"$schema": DRAFT_07, "items": [{}], "additionalItems": {"type": 5}},
            r"#/additionalItems",
        ),
        # One dialect per schema; others, not at all.
        ({"properties": {"a": {"$schema": DRAFT_07}}}, "#/properties/a: JSON Schema dialect"),
        (
            {
                "$schema": DRAFT_07,
                "not": {"$schema": "https://json-schema.org/draft/2020-12/schema"},
            },
            "#/not:",
        ),
        (
            {"$schema": "https://json-schema.org/draft/2019-09/schema"},
            "#: unsupported JSON Schema dialect",
        ),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "unsupported JSON Schema dialect"),
    ],
)
def test_what_a_dialect_does_not_have_is_refused(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_schema(schema)


@pytest.mark.parametrize(
    "dialect",
    [
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-07/schema#extra",
        7,
    ],
)
def test_validate_refuses_a_dialect_it_does_not_implement(dialect: object) -> None:
    schema = {"$schema": dialect, "type": "object"}
    assert not dialect_supported(schema)
    with pytest.raises(ValueError, match="unsupported JSON Schema dialect"):
        validate({}, schema)


@pytest.mark.parametrize("suffix", ["", "#"])
@pytest.mark.parametrize("scheme", ["http", "https"])  # https: as some generators write it
def test_draft_07_may_be_declared_with_or_without_the_fragment(suffix: str, scheme: str) -> None:
    dialect = DRAFT_07_DIALECT.replace("http", scheme, 1) + suffix
    schema = {"$schema": dialect, "type": "array", "items": [{"type": "null"}]}
    assert dialect_supported(schema)
    check_schema(schema)
    assert validate([1], schema) == ["arguments[0]: expected null, got integer"]


# --------------------------------------------------------------------------------------
# validate agrees with jsonschema's Draft7Validator where the dialects differ

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=2),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "dd"]), children, max_size=4)
    ),
    max_leaves=8,
)

DRAFT_07_SCHEMAS: dict[str, dict[str, Any]] = {
    "tuple": {"items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
    "tuple_rest": {"items": [{"type": "integer"}], "additionalItems": {"type": "boolean"}},
    "tuple_empty": {"items": [], "additionalItems": {"type": "null"}, "uniqueItems": True},
    "items_schema": {"items": {"type": "integer"}, "additionalItems": False},  # (ignored)
    "additional_alone": {"additionalItems": False},  # (ignored)
    "dependencies": {
        "dependencies": {"a": ["b", "c"], "b": {"properties": {"a": {"type": "string"}}}}
    },
    "ref_siblings": {
        "definitions": {"s": {"type": ["string", "array"]}},
        "anyOf": [{"$ref": "#/definitions/s", "type": "integer"}, {"type": "null"}],
    },
    "names": {"propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {"type": "integer"}},
}


@pytest.mark.parametrize("name", sorted(DRAFT_07_SCHEMAS))
@given(instance=json_values)
def test_validate_agrees_with_draft_7_validator(name: str, instance: Any) -> None:
    schema = {"$schema": DRAFT_07, **DRAFT_07_SCHEMAS[name]}
    check_schema(schema)
    ours = validate(instance, schema)
    assert (not ours) == jsonschema.Draft7Validator(schema).is_valid(instance), ours


# A $id below the root makes the $refs under it resolve against it (2020-12 core §8.2.1;
# draft-07 §8.2): the validator resolves against the root, so such a schema is refused
# up front rather than checked wrongly. A $id with no $ref under it changes nothing.
REBASED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {
            "$id": "https://example.com/n",
            "$defs": {"i": {"type": "integer"}},
            "$ref": "#/$defs/i",
        }
    },
}


def test_a_nested_id_with_a_ref_under_it_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="#/properties/n: a \\$id below the root"):
        check_schema(REBASED)
    jsonschema.Draft202012Validator(REBASED).validate({"n": 1})  # valid, and resolvable there
    harmless = {"properties": {"n": {"$id": "https://example.com/n", "type": "integer"}}}
    check_schema(harmless)
    assert validate({"n": "x"}, harmless) == ["arguments.n: expected integer, got string"]
    check_schema({"$id": "https://example.com/root", **REBASED["properties"]["n"]})  # the root's

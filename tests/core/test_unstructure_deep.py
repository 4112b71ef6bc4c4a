"""``unstructure`` (and the CLI's JSON renderers) on JSON nested as deep as the parser
reads (1024 levels): what the wire accepts must not raise ``RecursionError`` on the
way out."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from mcp_sansio import structure, unstructure
from mcp_sansio import types as t
from mcp_sansio._json import loads
from mcp_trio._cli_render import pretty_json, readable_json

# A result nested 1020 levels in all (its envelope's 2, then alternating objects and
# arrays), parsed by the wire's own parser.
DEEP_TEXT = (
    '{"content": [], "structuredContent": {"x": '
    + '[{"a": 1, "b": ["s"]}, ' * 509
    + "[]"
    + "]" * 509
    + "}}"
)


def test_the_wire_reads_it() -> None:
    assert loads('{"r":' + DEEP_TEXT + "}")  # (the depth a message can hold it at)


def test_unstructure_copies_deep_json() -> None:
    data = loads(DEEP_TEXT)
    result = structure(data, t.CallToolResult)
    out = unstructure(result)
    assert out is not data
    value, copied = data["structuredContent"]["x"], out["structuredContent"]["x"]
    depth = 0
    while value:  # (compared level by level: == itself recurses)
        assert copied is not value and copied[0] == value[0]
        assert copied[0] is not value[0]  # a copy, not the parsed object
        value, copied = value[1], copied[1]
        depth += 1
    assert depth == 509
    assert copied == []


def test_unstructure_unstructures_types_below_the_deep_part() -> None:
    inner = t.TextContent(text="hi")
    nested: Any = [inner]
    for _ in range(300):
        nested = [nested, {"k": [1]}]
    out = unstructure({"v": nested})["v"]
    for _ in range(300):
        assert out[1] == {"k": [1]}
        out = out[0]
    assert out == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, {"b": {}}, [], "é\u2192", None, 1.5, True], "k": None, 3: 4},
        [],
        {},
        "s",
        [[[]]],
        {"a": {"b": [1, 2, {"c": False}]}},
        ("tuple", [1]),
    ],
)
def test_pretty_json_is_json_dumps_indented(value: Any) -> None:
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_pretty_and_readable_json_of_deep_json() -> None:
    value = loads(DEEP_TEXT)
    shown = pretty_json(value)
    readable = readable_json(value)  # (past READABLE_DEPTH: on one line)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        assert shown == json.dumps(value, indent=2, ensure_ascii=False)
        assert readable == json.dumps(value, ensure_ascii=False)
    finally:
        sys.setrecursionlimit(limit)


def test_readable_json_of_a_deep_chain_grows_with_its_size_not_the_depth_squared() -> None:
    value: Any = ["é"]
    for _ in range(1000):
        value = [value, {"k": None}]
    shown = readable_json(value)
    assert len(shown) < 20 * 1000  # (indented: 2 spaces a level on each line)
    assert shown.startswith("[[[[") and '["é"], {"k": null}], {"k": null}]' in shown
    assert "\n" not in shown


def test_unstructure_copies_a_dict_only_chain() -> None:
    schema: Any = {"type": "string"}
    for _ in range(1000):  # (the usual deep shape: properties within properties)
        schema = {"properties": schema}
    out = unstructure(t.Tool(name="t", input_schema={"type": "object", "x": schema}))
    copied, depth = out["inputSchema"]["x"], 0
    while "properties" in copied:
        copied = copied["properties"]
        depth += 1
    assert depth == 1000
    assert copied == {"type": "string"}


def test_pretty_json_keeps_non_ascii_keys() -> None:
    value = {"é→": ["ü"], "k": {"日本": 1}}
    assert pretty_json(value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert '"日本": 1' in pretty_json(value)


def test_readable_json_keeps_what_fits_on_a_line() -> None:
    assert readable_json({"a": [1, 2]}) == '{"a": [1, 2]}'
    long = "x" * 80
    assert readable_json({"a": long, "b": [1]}) == f'{{\n  "a": "{long}",\n  "b": [1]\n}}'


def test_objects_nested_in_each_other_s_json_are_copied_once_per_level() -> None:
    # (Each object's JSON is its own copy: were each to start over when the stack runs
    # out, the work would double per level.)
    value = t.TextContent(text="x")
    for index in range(120):
        value = t.TextContent(text=str(index), meta={"a": [value]})
    out = unstructure(value)
    for index in reversed(range(120)):
        assert out["text"] == str(index)
        (out,) = out["_meta"]["a"]
    assert out == {"type": "text", "text": "x"}


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_a_value_that_contains_itself_raises_recursion_error(kind: str) -> None:
    # (the recursive copy raised RecursionError; the copy without recursion must not
    # go on for ever)
    cyclic: Any = []
    if kind == "list":
        cyclic.append(cyclic)
    else:
        cyclic = {"self": None}
        cyclic["self"] = cyclic
    with pytest.raises(RecursionError, match="contains itself"):
        unstructure({"v": cyclic})

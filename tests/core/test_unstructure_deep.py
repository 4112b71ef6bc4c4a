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
    assert shown == readable_json(value)  # (past READABLE_DEPTH: one member a line)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        assert shown == json.dumps(value, indent=2, ensure_ascii=False)
    finally:
        sys.setrecursionlimit(limit)


def test_readable_json_keeps_what_fits_on_a_line() -> None:
    assert readable_json({"a": [1, 2]}) == '{"a": [1, 2]}'
    long = "x" * 80
    assert readable_json({"a": long, "b": [1]}) == f'{{\n  "a": "{long}",\n  "b": [1]\n}}'

"""The raw walks over a schema as JSON (``json_objects``, ``rebasing_objects``), on
the schemas a hostile server can send: nested deeper than Python's recursion limit, or
deep enough that a walk per level (nested generators; a walk under each ``$id``) costs
the objects times their depth and blocks the event loop. Each walk visits a value once:
what is counted here (generator resumptions, ``values()`` calls), not time."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from itertools import pairwise
from types import FrameType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mcp_trio._client_common import _bounded_schema
from mcp_trio._validation import check_schema, json_objects, rebasing_objects


def _nested(depth: int, leaf: Any) -> Any:
    """``leaf`` under ``depth`` levels, lists and objects in turn."""
    node = leaf
    for level in range(depth):
        node = [node] if level % 2 else {"k": node}
    return node


def test_json_objects_walks_a_schema_deeper_than_the_recursion_limit() -> None:
    depth = 2000
    found = list(json_objects(_nested(depth, {"leaf": True})))
    assert len(found) == depth // 2 + 1
    assert found[-1] == {"leaf": True}
    for obj, nxt in pairwise(found):  # (each inside the one before)
        inner = obj["k"]
        assert inner is nxt or inner[0] is nxt


def test_json_objects_keeps_document_order() -> None:
    a, b, c, d, e = ({"n": n} for n in range(5))
    value = {"x": [a, {"y": b, "z": [c]}], "w": d, "v": [[e]], "s": "text"}
    names = [o.get("n", "?") for o in json_objects(value)]
    assert names == ["?", 0, "?", 1, 2, 3, 4]


def _resumptions(walk: Iterator[Any]) -> int:
    """How many times the frames of ``json_objects`` ran while ``walk`` is drained."""
    code = json_objects.__code__
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "call" and frame.f_code is code:
            count += 1

    sys.setprofile(profile)
    try:
        for _ in walk:
            pass
    finally:
        sys.setprofile(None)
    return count


def test_json_objects_costs_the_values_not_the_values_times_their_depth() -> None:
    # Nested generators passed each object up through every level above it: here 300
    # levels x 1000 objects. One walk: a resumption per object yielded.
    value = _nested(300, [{} for _ in range(1000)])
    objects = sum(1 for _ in json_objects(value))
    assert _resumptions(json_objects(value)) <= objects + 1


class _Counted(dict[str, Any]):
    """An object that counts how often its values are asked for (walked)."""

    walks = 0

    def values(self) -> Any:
        _Counted.walks += 1
        return super().values()


def _id_chain(depth: int, blob: list[Any]) -> dict[str, Any]:
    """A schema: ``depth`` subschemas nested in ``properties``, each with a ``$id`` and
    no ``$ref`` anywhere, the last with ``blob`` as its ``default``."""
    node: dict[str, Any] = {"default": blob}
    for i in range(depth):
        node = {"$id": f"https://example.com/{i}", "properties": {"a": node}}
    return {"type": "object", "properties": {"a": node}}


def test_nested_ids_are_checked_in_one_walk() -> None:
    # Asking "does it hold a $ref?" at each $id walked everything under it again:
    # 60 $ids above a 1 MB blob, 60 walks of it, seconds of a blocked event loop.
    blob = [_Counted() for _ in range(1000)]
    schema = _id_chain(60, blob)
    _Counted.walks = 0
    assert _bounded_schema(schema) is True
    assert _Counted.walks == len(blob)
    _Counted.walks = 0
    check_schema(schema)
    assert _Counted.walks == len(blob)


_KEYS = st.sampled_from(["$id", "$ref", "a", "b"])
_JSON = st.recursive(
    st.none() | st.integers() | st.just("x"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=25,
)


@given(_JSON)
def test_rebasing_objects_are_the_ids_with_a_ref_in_them(schema: Any) -> None:
    expected = {
        id(obj)
        for obj in json_objects(schema)
        if "$id" in obj and any("$ref" in inner for inner in json_objects(obj))
    }
    assert rebasing_objects(schema) == expected

"""``ToolOutput.from_wire``'s quick way for the commonest result (text blocks alone,
maybe ``isError``, ``structuredContent``, ``_meta``, and the modern era's ``resultType``
``"complete"``): the same ``ToolOutput`` as ``structure`` makes, and anything else
(other blocks, more members, other types, another ``resultType``) goes through
``structure``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mcp_trio._client_common as client_common
from mcp_sansio import RemoteProtocolError, structure
from mcp_sansio import types as t
from mcp_trio import ToolOutput

_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=3)


class _Str(str):
    """A ``str`` that is not one exactly: JSON never makes it, a direct caller may."""


_BLOCKS = st.fixed_dictionaries(
    {"type": st.just("text") | st.just(_Str("text")), "text": st.text(max_size=3)}
) | (
    st.dictionaries(
        st.sampled_from(["type", "text", "annotations", "_meta"]),
        st.sampled_from(["text", "image"]) | _SCALARS,
        max_size=3,
    )
)
_METAS: st.SearchStrategy[Any] = (
    st.dictionaries(
        st.sampled_from(["k", "io.modelcontextprotocol/serverInfo", _Str("s")]),
        _SCALARS | st.just({"name": "b"}),
        max_size=2,
    )
    | st.just({1: 2})
    | st.just([])
    | _SCALARS
)
_RESULT_TYPES = (
    st.sampled_from(["complete", "input_required", "task", "", _Str("complete")]) | _SCALARS
)
_RESULTS = st.fixed_dictionaries(
    {"content": st.lists(_BLOCKS, max_size=3) | _SCALARS},
    optional={
        "isError": _SCALARS,
        "structuredContent": _SCALARS | st.just({"result": "a"}) | st.just([1]),
        "_meta": _METAS,
        "resultType": _RESULT_TYPES,
        "inputRequests": st.just({"a": {"method": "roots/list"}}),
    },
)
_MODERN_RESULTS = st.fixed_dictionaries(
    {
        "content": st.lists(_BLOCKS, max_size=2),
        "resultType": _RESULT_TYPES,
        "_meta": _METAS,
    },
    optional={"isError": _SCALARS, "structuredContent": _SCALARS},
)


def _structured(result: Any) -> ToolOutput | str:
    try:
        typed = structure(result, t.CallToolResult)
    except RemoteProtocolError as exc:
        return str(exc)
    return ToolOutput(
        content=typed.content,
        structured_content=typed.structured_content,
        is_error=bool(typed.is_error),
        meta=typed.meta,
        result=typed,
    )


def _from_wire(result: Any) -> ToolOutput | str:
    try:
        return ToolOutput.from_wire(result)
    except RemoteProtocolError as exc:
        return str(exc)


@given(_RESULTS | _SCALARS)
def test_the_same_output_as_structure(result: Any) -> None:
    assert _from_wire(result) == _structured(result)


@given(_MODERN_RESULTS)
def test_the_same_output_as_structure_modern(result: Any) -> None:
    # (the shape a modern server sends: resultType and _meta always there)
    assert _from_wire(result) == _structured(result)


def test_meta_is_a_copy_and_structured_content_is_kept() -> None:
    meta = {"k": {"a": 1}}
    structured = {"result": "a"}
    result = {
        "content": [],
        "resultType": "complete",
        "_meta": meta,
        "structuredContent": structured,
    }
    typed = structure(result, t.CallToolResult)
    output = ToolOutput.from_wire(result)
    assert output.meta is not None and typed.meta is not None
    assert output.meta == meta and output.meta is not meta  # (as structure copies it)
    assert output.meta["k"] is meta["k"] and typed.meta is not meta and typed.meta["k"] is meta["k"]
    assert output.structured_content is structured is typed.structured_content


@pytest.mark.parametrize(
    "result",
    [
        {"content": []},
        {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]},
        {"content": [{"type": "text", "text": "a"}], "isError": False},
        {"content": [{"type": "text", "text": "a"}], "isError": True},
        {"content": [{"type": "text", "text": "a"}], "structuredContent": {}},
        {"content": [{"type": "text", "text": "a"}], "structuredContent": None},
        {"content": [{"type": "text", "text": "a"}], "isError": True, "_meta": {}},
        {"content": [], "resultType": "complete"},
        {
            "content": [{"type": "text", "text": "a"}],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "b", "version": "1"}},
        },
        {
            "content": [{"type": "text", "text": "a"}],
            "isError": False,
            "resultType": "complete",
            "structuredContent": {"result": "a"},
            "_meta": {},
        },
    ],
)
def test_text_results_are_typed_at_once(
    result: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _structured(result)
    monkeypatch.setattr(client_common, "structure", None)  # (not called)
    assert ToolOutput.from_wire(result) == expected


@pytest.mark.parametrize(
    "result",
    [
        {"content": [{"type": "text", "text": "a", "_meta": {}}]},
        {"content": [{"type": "text", "text": 1}]},
        {"content": [{"type": "image", "text": "a"}]},
        {"content": [{"type": _Str("text"), "text": "a"}]},
        {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
        {"content": [["type", "text"]]},
        {"content": [{"type": "text", "text": "a"}], "isError": None},
        {"content": [{"type": "text", "text": "a"}], "isError": "yes"},
        {"content": {"type": "text", "text": "a"}},
        {"isError": False, "other": 1},
        {"content": [], "resultType": "input_required"},
        {"content": [], "resultType": "task"},
        {"content": [], "resultType": "other"},
        {"content": [], "resultType": _Str("complete")},
        {"content": [], "resultType": 1},
        {"content": [], "resultType": None},
        {"content": [], "resultType": "input_required", "inputRequests": {}},
        {"content": [], "resultType": "complete", "requestState": "s"},
        {"content": [], "resultType": "complete", "_meta": None},
        {"content": [], "resultType": "complete", "_meta": []},
        {"content": [], "resultType": "complete", "_meta": {1: 2}},
        {"content": [], "resultType": "complete", "_meta": {_Str("k"): 2}},
        {"content": [{"type": "text", "text": "a", "_meta": {}}], "resultType": "complete"},
    ],
)
def test_anything_else_is_structured(
    result: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []

    def counted(data: Any, cls: Any) -> Any:
        calls.append(data)
        return structure(data, cls)

    monkeypatch.setattr(client_common, "structure", counted)
    assert _from_wire(result) == _structured(result)
    assert calls == [result]

"""``ToolOutput.from_wire``'s quick way for the commonest result (text blocks alone,
maybe ``isError``): the same ``ToolOutput`` as ``structure`` makes, and anything else
(other blocks, more members, other types) goes through ``structure``."""

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
_RESULTS = st.fixed_dictionaries(
    {"content": st.lists(_BLOCKS, max_size=3) | _SCALARS},
    optional={
        "isError": _SCALARS,
        "structuredContent": _SCALARS,
        "_meta": st.just({"k": 1}),
        "resultType": st.just("complete"),
    },
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


@pytest.mark.parametrize(
    "result",
    [
        {"content": []},
        {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]},
        {"content": [{"type": "text", "text": "a"}], "isError": False},
        {"content": [{"type": "text", "text": "a"}], "isError": True},
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
        {"content": [{"type": "text", "text": "a"}], "structuredContent": {}},
        {"content": [{"type": "text", "text": "a"}], "isError": True, "_meta": {}},
        {"content": {"type": "text", "text": "a"}},
        {"isError": False, "other": 1},
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

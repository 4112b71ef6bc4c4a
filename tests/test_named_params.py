"""``named_params``: the params of ``tools/call`` and ``prompts/get``. The common case is
told by the set of types present, the rest argument by argument; both must agree. No I/O."""

from __future__ import annotations

import enum
import math
from types import MappingProxyType
from typing import Any

import pytest

from mcp_trio._client_common import named_params


class Name(str):
    """A ``str`` subclass: a string all the same."""


class Real(float):
    """A ``float`` subclass: checked all the same."""


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"a": 1, "b": "two", "c": True, "d": None},
        {Name("a"): 1},
        {"a": Level.LOW, "b": Name("x"), "c": 2.5, "d": [1.0, {"e": -0.0}]},
        MappingProxyType({"a": 1}),
    ],
)
def test_what_json_carries_is_sent_as_a_copy(arguments: Any) -> None:
    params = named_params("t", arguments)
    assert params == {"name": "t", "arguments": dict(arguments)}
    assert type(params["arguments"]) is dict and params["arguments"] is not arguments


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"a": 1, 2: "b"}, TypeError, "argument names must be strings, not 2"),
        ({"a": 1, None: "b"}, TypeError, "argument names must be strings, not None"),
        ({"a": "s", "x": Real("nan")}, ValueError, "argument 'x' holds NaN"),
        ({"a": True, "x": {"y": [math.inf]}}, ValueError, "argument 'x' holds NaN"),
        ({"a": None, "x": (-math.inf,)}, ValueError, "argument 'x' holds NaN"),
    ],
)
def test_the_argument_at_fault_is_named(
    arguments: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        named_params("t", arguments)

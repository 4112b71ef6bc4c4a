"""annotated-types metadata in ``Annotated``: ``Gt``/``Ge``/``Lt``/``Le``/``Interval``/
``MultipleOf``/``MinLen``/``MaxLen``/``Len`` become JSON Schema keywords, so the model sees
them and arguments out of bounds are refused before the tool runs (they were dropped
without a word, and reached the tool); what has no equivalent is refused at registration.

annotated-types is no dependency (the ``dev`` extra has it): skipped without it.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import pytest

from mcp_trio import Server
from mcp_trio._jsonschema import function_input_schema, type_schema

from .test_annotated_metadata import connect, taking

at: Any = pytest.importorskip("annotated_types")


@pytest.mark.parametrize(
    ("make", "tp", "keywords"),
    [
        (lambda at: [at.Gt(0)], int, {"exclusiveMinimum": 0}),
        (lambda at: [at.Ge(1)], int, {"minimum": 1}),
        (lambda at: [at.Lt(1.5)], float, {"exclusiveMaximum": 1.5}),
        (lambda at: [at.Le(7)], int, {"maximum": 7}),
        (lambda at: [at.Interval(ge=1, lt=5)], int, {"minimum": 1, "exclusiveMaximum": 5}),
        (lambda at: [at.MultipleOf(0.5)], float, {"multipleOf": 0.5}),
        (lambda at: [at.MinLen(1)], str, {"minLength": 1}),
        (lambda at: [at.MaxLen(3)], list[int], {"maxItems": 3}),
        (lambda at: [at.Len(1, 3)], dict[str, int], {"minProperties": 1, "maxProperties": 3}),
        (lambda at: [at.Len(0, 2)], set[str], {"maxItems": 2}),
        (lambda at: [at.Ge(1)], int | None, {"minimum": 1}),
        # Of a value of any type, len() bounds whichever of the three it is.
        (
            lambda at: [at.MinLen(2)],
            Any,
            {"minLength": 2, "minItems": 2, "minProperties": 2},
        ),
        (lambda at: [at.Timezone(...)], dt.datetime, {}),  # (every date-time is aware)
        (lambda at: [at.Unit("m")], float, {}),
        (lambda at: [at.doc("How far")], float, {"description": "How far"}),
    ],
)
def test_annotated_types_become_keywords(make: Any, tp: Any, keywords: Any) -> None:
    hint = Annotated[(tp, *make(at))]
    assert type_schema(hint) == {**type_schema(tp), **keywords}


@pytest.mark.parametrize(
    ("make", "tp", "message"),
    [
        (lambda at: at.Predicate(str.islower), str, "Predicate.*Python code.*ToolError"),
        (lambda at: at.Timezone(None), dt.datetime, "Timezone.*always has an offset"),
        (lambda at: at.Timezone("Europe/Paris"), dt.datetime, "Timezone.*astimezone"),
        (lambda at: at.Ge(1), str, "Ge does not apply to string values"),
        (lambda at: at.MinLen(1), int, "MinLen does not apply to integer values"),
        (lambda at: at.Ge(dt.date(2020, 1, 1)), int, "bound is a number, not date"),
        (lambda at: at.MultipleOf(0), int, "0 is no valid multipleOf"),
    ],
)
def test_annotated_types_without_an_equivalent_are_refused(
    make: Any, tp: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=f"parameter 'x' of .*{message}"):
        function_input_schema(taking(Annotated[(tp, make(at))]))


async def test_out_of_bounds_arguments_never_reach_the_tool() -> None:
    server = Server("bounded")
    seen: list[Any] = []

    @server.tool()
    async def forecast(
        days: Annotated[int, at.Ge(1), at.Le(7)], city: Annotated[str, at.MinLen(1)]
    ) -> str:
        seen.append(days)
        return "sunny"

    async with connect(server) as client:
        ok = await client.call_tool("forecast", {"days": 7, "city": "Paris"})
        too_many = await client.call_tool("forecast", {"days": 9, "city": ""})
    assert not ok.is_error
    assert too_many.is_error
    assert too_many.text == (
        "Invalid arguments for tool 'forecast': arguments.days: must be <= 7, got 9;"
        " arguments.city: expected at least 1 characters, got 0"
    )
    assert seen == [7]

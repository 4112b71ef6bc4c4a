"""pydantic's ``Field(...)`` as users of the official SDK write it: in ``Annotated``
(``Annotated[int, Field(ge=1, le=7, description=...)]``) or as a parameter's default
(``days: int = Field(1, ge=1)``, FastMCP's idiom: the function gets the default, never
the ``FieldInfo``). Its bounds, pattern and description become JSON Schema keywords;
what has no equivalent (an alias that renames the argument, a validator, a value
transform) is refused at registration, saying what to write instead.

pydantic is no dependency (the ``dev`` extra has it): skipped without it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any

import pytest

from mcp_trio import Server
from mcp_trio._jsonschema import coerce_arguments, function_input_schema, type_schema

from .test_annotated_metadata import connect, taking

pydantic: Any = pytest.importorskip("pydantic")
Field: Any = pydantic.Field


def test_pydantic_field_in_annotated() -> None:
    def f(
        days: Annotated[int, Field(ge=1, le=7, description="How many days")],
        tag: Annotated[str, Field(pattern=r"^[a-z]+$", max_length=3, title="Tag")],
        ratio: Annotated[float, Field(gt=0, lt=1, multiple_of=0.25, examples=[0.5])] = 0.5,
        name: Annotated[str, Field(strict=True, json_schema_extra={"examples": ["ada"]})] = "x",
        code: Annotated[str, pydantic.StringConstraints(min_length=2, pattern="^[A-Z]")] = "AB",
        age: Annotated[int, Field(alias="age")] = 0,  # (its own name: nothing changes)
    ) -> None: ...

    schema = function_input_schema(f)
    assert schema["properties"] == {
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "description": "How many days"},
        "tag": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$", "title": "Tag"},
        "ratio": {
            "type": "number",
            "exclusiveMinimum": 0,
            "exclusiveMaximum": 1,
            "multipleOf": 0.25,
            "examples": [0.5],
            "default": 0.5,
        },
        "name": {"type": "string", "examples": ["ada"], "default": "x"},
        "code": {"type": "string", "minLength": 2, "pattern": "^[A-Z]", "default": "AB"},
        "age": {"type": "integer", "default": 0},
    }
    assert schema["required"] == ["days", "tag"]


def test_a_pydantic_field_as_the_default() -> None:
    def f(
        city: str,
        days: int = Field(1, ge=1, le=7, description="How many days"),
        tags: list[str] = Field(default_factory=list, max_length=3),  # noqa: B008  # (the idiom under test)
        units: str = Field(pattern="^(metric|imperial)$"),  # (no default: required)
    ) -> None: ...

    schema = function_input_schema(f)
    assert schema["properties"]["days"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 7,
        "description": "How many days",
        "default": 1,
    }
    # A factory's value may change from call to call: no default is shown.
    assert schema["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": 3,
    }
    assert schema["required"] == ["city", "units"]
    first = coerce_arguments(f, {"city": "Paris", "units": "metric"})
    second = coerce_arguments(f, {"city": "Oslo", "units": "metric"})
    assert first == {"city": "Paris", "units": "metric", "days": 1, "tags": []}
    assert first["tags"] is not second["tags"]  # (the factory runs per call)
    assert coerce_arguments(f, {"city": "Oslo", "units": "metric", "days": 3})["days"] == 3


async def test_a_pydantic_field_default_reaches_the_tool_as_its_value() -> None:
    server = Server("fields")
    seen: list[Any] = []

    @server.tool()
    def forecast(city: str, days: int = pydantic.Field(1, ge=1, le=7)) -> str:
        seen.append(days)
        return city

    @server.prompt()
    def brief(topic: str, words: int = pydantic.Field(50, ge=10)) -> str:
        seen.append(words)
        return topic

    async with connect(server) as client:
        assert not (await client.call_tool("forecast", {"city": "Paris"})).is_error
        refused = await client.call_tool("forecast", {"city": "Paris", "days": 0})
        await client.get_prompt("brief", {"topic": "tea"})
    assert (
        refused.text == "Invalid arguments for tool 'forecast': arguments.days: must be >= 1, got 0"
    )
    assert seen == [1, 50]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: Annotated[int, p.Field(alias="n_days")], r"alias='n_days'.*rename"),
        (lambda p: Annotated[int, p.Field(validation_alias="d")], r"validation_alias='d'"),
        (lambda p: Annotated[int, p.AfterValidator(abs)], r"AfterValidator has no JSON Schema"),
        (lambda p: Annotated[str, p.StringConstraints(to_lower=True)], r"to_lower.*function"),
        (lambda p: Annotated[int, p.Field(json_schema_extra=dict)], r"json_schema_extra"),
        (lambda p: Annotated[int, p.Field(json_schema_extra={"if": {}})], r"'if'"),
        (lambda p: Annotated[str, p.Field(gt=1)], "Gt does not apply to string"),
    ],
)
def test_pydantic_metadata_without_an_equivalent_is_refused(make: Any, message: str) -> None:
    with pytest.raises(TypeError, match=f"parameter 'x' of .*{message}"):
        function_input_schema(taking(make(pydantic)))


def test_pydantic_defaults_where_they_cannot_work_are_refused() -> None:
    def inside(days: Annotated[int, Field(default=1)]) -> None: ...

    with pytest.raises(TypeError, match=re.escape("`x: Annotated[int, Field(ge=1)] = 1`")):
        function_input_schema(inside)

    @dataclasses.dataclass
    class Query:
        days: int = Field(1, ge=1)

    with pytest.raises(TypeError, match=r"field 'days' of .*Query.*Annotated"):
        function_input_schema(taking(Query))

    # A class field bounded the supported way is fine.
    @dataclasses.dataclass
    class Bounded:
        days: Annotated[int, Field(ge=1)] = 1

    assert type_schema(Bounded)["properties"]["days"] == {
        "type": "integer",
        "minimum": 1,
        "default": 1,
    }


def test_a_real_pydantic_model_is_refused_saying_so() -> None:
    class Query(pydantic.BaseModel):  # type: ignore[misc]  # (pydantic: Any to mypy)
        city: str

    with pytest.raises(TypeError, match="Query is a pydantic model"):
        function_input_schema(taking(Query))


def test_a_pydantic_field_default_with_a_verbatim_input_schema_is_refused() -> None:
    # The function then gets the arguments as they are: the Field itself, when left out.
    server = Server("refused")

    def forecast(days: int = Field(1, ge=1)) -> str:
        return str(days)

    with pytest.raises(TypeError, match="parameter 'days' has a pydantic Field"):
        server.add_tool(forecast, input_schema={"type": "object"})

"""Parameters described and bounded the way users of the official SDK do it.

* annotated-types' ``Gt``/``Ge``/``Lt``/``Le``/``Interval``/``MultipleOf``/``MinLen``/
  ``MaxLen``/``Len`` and pydantic's ``Field(...)`` in ``Annotated`` become JSON Schema
  keywords: the model sees them, and arguments out of bounds are refused before the
  tool runs (they used to be dropped without a word, and reached the tool).
* ``days: int = Field(1, ge=1)`` (a ``Field`` as the default, FastMCP's idiom) gives the
  default and the bounds: the function gets ``1``, never the ``FieldInfo``.
* What has no JSON Schema equivalent (``Predicate``, ``Timezone(None)``, an ``alias``
  that renames the argument, a validator...) is a ``TypeError`` at registration that
  says what to write instead. Metadata of other libraries stays ignored.
* A pydantic model where a type is wanted (a parameter, an elicitation form) is refused
  with a message that says so, not "unsupported type".

Neither library is a dependency (nor imported by mcp-trio): the tests that use them are
skipped without them (they are in the ``dev`` extra); a few stand-ins of the same shape
(classes of the same module and name) run everywhere.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
import trio

from mcp_trio import Client, Constraints, Context, Server, open_client
from mcp_trio._jsonschema import function_input_schema, validate
from mcp_trio._server_forms import form_spec


@asynccontextmanager
async def connect(server: Server, **options: Any) -> AsyncGenerator[Client]:
    with trio.fail_after(10):
        async with open_client(server, **options) as client:
            yield client


def taking(hint: Any) -> Any:
    """A function of one parameter ``x`` annotated ``hint`` (made at run time)."""

    def f(x: Any) -> None: ...

    f.__annotations__ = {"x": hint, "return": None}
    return f


def prop(fn: Any, name: str) -> dict[str, Any]:
    schema = function_input_schema(fn)
    found: dict[str, Any] = schema["properties"][name]
    return found


# ------------------------------------------------------------------ stand-ins (no deps)
# Classes of the same module, name and attributes as annotated-types' own: how they are
# recognised (by the classes they derive from, looked up by name) is what is tested.


class BaseMetadata:
    __slots__ = ()


BaseMetadata.__module__ = "annotated_types"


@dataclasses.dataclass(frozen=True)
class Ge(BaseMetadata):
    ge: Any


Ge.__module__ = "annotated_types"


@dataclasses.dataclass(frozen=True)
class MaxLen(BaseMetadata):
    max_length: int


MaxLen.__module__ = "annotated_types"


@dataclasses.dataclass(frozen=True)
class Predicate(BaseMetadata):
    func: Any


Predicate.__module__ = "annotated_types"


class BaseModel:
    pass


BaseModel.__module__ = "pydantic.main"


class Pref(BaseModel):
    tip: int


def test_stand_ins_of_annotated_types_become_keywords() -> None:
    def f(n: Annotated[int, Ge(1)], tags: Annotated[list[str], MaxLen(2)]) -> None: ...

    assert prop(f, "n") == {"type": "integer", "minimum": 1}
    assert prop(f, "tags") == {"type": "array", "items": {"type": "string"}, "maxItems": 2}
    with pytest.raises(TypeError, match=r"parameter 'x' of .*Predicate.*ToolError"):
        function_input_schema(taking(Annotated[int, Predicate(bool)]))


@dataclasses.dataclass(frozen=True)
class OtherGe:
    ge: int


OtherGe.__name__ = OtherGe.__qualname__ = "Ge"  # (named as annotated-types' is)


class Marker:
    min_length = 3
    pattern = "x"


def test_metadata_of_other_libraries_is_ignored() -> None:
    # The same names and attributes, but not annotated-types' classes: not ours to read.
    def f(n: Annotated[int, OtherGe(5), Marker(), object()] = 1) -> None: ...

    assert prop(f, "n") == {"type": "integer", "default": 1}


def test_constraints_take_a_pattern() -> None:
    def f(code: Annotated[str, Constraints(pattern=r"^[A-Z]{3}$", max_length=3)]) -> None: ...

    schema = function_input_schema(f)
    assert schema["properties"]["code"] == {
        "type": "string",
        "maxLength": 3,
        "pattern": "^[A-Z]{3}$",
    }
    assert validate({"code": "ABC"}, schema) == []
    assert validate({"code": "abc"}, schema) == [
        'arguments.code: must match "^[A-Z]{3}$", got "abc"'
    ]

    def bad(code: Annotated[str, Constraints(pattern="(")]) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'code' .*invalid pattern"):
        function_input_schema(bad)


def test_a_pydantic_model_is_refused_saying_so() -> None:
    def f(pref: Pref) -> None: ...

    with pytest.raises(TypeError, match=r"Pref is a pydantic model.*dataclass"):
        function_input_schema(f)
    with pytest.raises(TypeError, match=r"Pref is a pydantic model.*dataclass"):
        form_spec(Pref)


async def test_elicit_with_a_pydantic_model_fails_before_asking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The official idiom ctx.elicit(message, SomeModel): checked before the question is
    # sent, as any form is; the log says why, the model gets the internal error any
    # form the server cannot build gives.
    server = Server("ask")
    asked: list[Any] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        await ctx.elicit("Tip?", Pref)
        return "asked"

    async def on_elicitation(params: Any) -> Any:
        asked.append(params)
        return {"action": "decline"}

    for era in ("legacy", "modern"):
        async with connect(server, era=era, on_elicitation=on_elicitation) as client:
            with caplog.at_level(logging.ERROR, logger="mcp_trio.server"):
                result = await client.call_tool("ask", {})
        assert result.is_error
        assert result.text == "Tool 'ask' failed with an internal error"
    assert asked == []
    assert "Pref is a pydantic model, which mcp-trio does not read" in caplog.text


def test_constraints_on_a_type_they_do_not_bound_are_refused() -> None:
    # JSON Schema ignores minimum on a string (and minLength on a number): the model
    # would see a bound nothing checks. Said at registration, as for annotated-types.
    def on_str(name: Annotated[str, Constraints(minimum=1)]) -> None: ...
    def on_int(n: Annotated[int, Constraints(max_length=3)]) -> None: ...
    def on_str_items(name: Annotated[str, Constraints(min_items=1)]) -> None: ...

    for f, keyword in ((on_str, "minimum"), (on_int, "maxLength"), (on_str_items, "minItems")):
        with pytest.raises(TypeError, match=rf"Constraints\({keyword}\) does not apply to"):
            function_input_schema(f)

    # Where one of the types is constrained, it is kept (null is not bounded, None is).
    def optional(n: Annotated[int | None, Constraints(minimum=1)] = None) -> None: ...
    def items(tags: Annotated[list[str], Constraints(min_items=1)]) -> None: ...

    assert function_input_schema(optional)["properties"]["n"]["minimum"] == 1
    assert function_input_schema(items)["properties"]["tags"]["minItems"] == 1

"""Arguments the client can refuse itself are refused before anything is sent: a tool,
prompt or resource named by what is not a string, and tool arguments that hold what
JSON cannot carry (the error names the argument, as it does for NaN)."""

from __future__ import annotations

import collections
import datetime
import enum
import re
from typing import Any

import pytest
import trio

from mcp_sansio._json import dumps
from mcp_trio._client_common import named_params
from mcp_trio._server import Server
from mcp_trio.testing import ERAS, client_for

IO_TIMEOUT = 10.0


class Name(str):
    pass


class Real(float):
    pass


class Level(enum.IntEnum):
    LOW = 1


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({1, 2}, "a value of type set"),
        (b"x", "a value of type bytes"),
        (frozenset(), "a value of type frozenset"),
        ([{"a": {3: "x"}}], "a key that is not a str (int 3)"),
        ({Name("k"): 1}, "a key that is not a str (Name 'k')"),
        ([2**64], "the integer 1.84e+19, beyond 64 bits"),
        ({"n": -(2**63) - 1}, "the integer -9.22e+18, beyond 64 bits"),
        (Real(1.5), "a value of type Real"),
        (Point(1, 2), "a value of type Point"),
        ([[[{"deep": {4}}]]], "a value of type set"),
    ],
)
def test_what_json_cannot_carry_is_named(value: Any, said: str) -> None:
    with pytest.raises(TypeError) as failed:
        dumps({"q": value})  # the JSON library refuses it too (unnamed)
    assert "'q'" not in str(failed.value)
    expected = f"argument 'q' holds {said}, which JSON cannot carry"
    with pytest.raises(TypeError, match=f"^{re.escape(expected)}$"):
        named_params("search", {"ok": "fine", "q": value})


@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2026, 1, 2),  # the JSON library writes these
        Level.LOW,
        Name("x"),
        [2**64 - 1, -(2**63)],
        collections.OrderedDict(a=[1.5]),
        ("a", 1.0),
        {"a": None, "b": True},
    ],
)
def test_what_the_json_library_writes_passes(value: Any) -> None:
    params = named_params("search", {"q": value, "n": 1.5})
    dumps(params)  # (does not raise)


def nested(levels: int) -> Any:
    value: Any = 1
    for index in range(levels):
        value = [value] if index % 2 else {"k": value}
    return value


def test_a_value_inside_itself_is_refused_at_once() -> None:
    # (it used to spin for ever; the JSON library refuses it unnamed)
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError, match=r"^argument 'q' holds values nested more than 251 deep"):
        named_params("search", {"q": loop})


def test_nesting_is_bounded_where_the_message_can_still_be_written() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    deepest = named_params("search", {"q": nested(251)})
    dumps({**message, "params": deepest})  # (does not raise)
    with pytest.raises(TypeError, match="nested more than 251 deep"):
        named_params("search", {"q": nested(252)})
    with pytest.raises(TypeError):  # (the JSON library's own limit, one level further)
        dumps({**message, "params": {"name": "search", "arguments": {"q": nested(252)}}})


def test_a_str_subclass_name_is_sent_as_a_str() -> None:
    params = named_params("t", {Name("a"): 1})
    assert [type(key) for key in params["arguments"]] == [str]
    assert dumps(params) == b'{"name":"t","arguments":{"a":1}}'


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize(("name", "shown"), [(3, "int 3"), (None, "NoneType None")])
def test_a_name_that_is_no_string(name: Any, shown: str, strings: bool) -> None:
    what = "prompt" if strings else "tool"
    with pytest.raises(TypeError, match=f"^the {what} name must be a string, not {shown}$"):
        named_params(name, {}, strings=strings)


def recording_server(calls: list[str]) -> Server:
    server = Server("checks")

    @server.tool()
    def search(query: Any = None) -> str:
        calls.append("search")
        return "found"

    @server.prompt()
    def summarize(id: str) -> str:
        calls.append("summarize")
        return id

    @server.resource("file:///a")
    def a() -> str:
        calls.append("read")
        return "a"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_refuses_before_sending(era: str) -> None:
    calls: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with client_for(recording_server(calls), era=era) as client:  # type: ignore[arg-type]
            # (sent, each would come back as an McpError from the server)
            with pytest.raises(TypeError, match="tool name must be a string, not int 3"):
                await client.call_tool(3, {})  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="argument 'query' holds a value of type set"):
                await client.call_tool("search", {"query": {1, 2}})
            with pytest.raises(TypeError, match="resource URI must be a string, not int 3"):
                await client.read_resource(3)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="prompt name must be a string, not int 3"):
                await client.get_prompt(3, {"id": "1"})  # type: ignore[arg-type]
            assert client.session.connection.pending_requests() == ()
            assert calls == []
            assert (await client.call_tool("search", {"query": "x"})).text == "found"
            assert (await client.read_resource("file:///a")).contents[0].text == "a"  # type: ignore[union-attr]
    assert calls == ["search", "read"]


async def test_subscribe_resource_checks_the_uri() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with client_for(recording_server([]), era="legacy") as client:
            for method in (client.subscribe_resource, client.unsubscribe_resource):
                with pytest.raises(TypeError, match="resource URI must be a string"):
                    await method(b"file:///a")  # type: ignore[arg-type]

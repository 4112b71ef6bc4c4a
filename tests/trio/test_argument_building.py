"""Building a function's arguments from what the client sent (``coerce_arguments``).

* A class of an argument that fails in its own code (``__post_init__``, an attrs
  validator, ``__init__``) with anything but a ``ValueError`` is a bug or an internal
  failure, not the caller's mistake: its text may hold a password or a host, so it is
  logged with its traceback and the caller gets the internal error a failing tool body
  gets (a tool result), or -32603 (prompts, resource templates). A ``ValueError`` is how
  a class says a value is wrong: its text is the caller's to see, as before.
* An ``int`` parameter takes a float only while it is one integer exactly: ``1.0`` is
  ``1``, but from 2**53 on a float may stand for many integers, and orjson reads an
  integer wider than 64 bits as such a float (rounded): refused, never another number.
* A ``datetime`` argument is an RFC 3339 date-time, as its schema's ``format`` says: a
  date, a time and an offset, so the function always gets an aware datetime; a ``date``
  is ``YYYY-MM-DD``.
* A URI that matches a typed template whose variables do not convert goes on to the next
  template that matches (registration order stays the priority).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from typing import Any

import attrs
import pytest
import trio

from mcp_sansio import ErrorCode
from mcp_trio import Client, McpError, Server

from .helpers import connected, handshaken, raw_pair

SECRET = "connect to postgres://admin:hunter2@10.0.0.5/accounts failed"


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test runs once per era."""
    value: str = request.param
    return value


@dataclasses.dataclass
class Account:
    number: str

    def __post_init__(self) -> None:
        if self.number == "down":
            raise RuntimeError(SECRET)  # (a lookup failing for an internal reason)


@dataclasses.dataclass
class Order:
    qty: int

    def __post_init__(self) -> None:
        if self.qty > 10:
            raise ValueError("at most 10 per order")


def _positive(instance: Any, attribute: Any, value: int) -> None:
    if value <= 0:
        raise TypeError(f"{SECRET} ({value})")


@attrs.define
class Checked:
    n: int = attrs.field(validator=_positive)


@dataclasses.dataclass(init=False)
class Plain:
    name: str

    def __init__(self, name: str) -> None:
        raise KeyError(SECRET)


@dataclasses.dataclass
class Both:
    """A class whose fields fail both ways: the caller's and an internal failure."""

    order: Order
    account: Account


def argument_server() -> Server:
    server = Server("args")

    @server.tool()
    def pay(account: Account) -> str:
        return "paid"

    @server.tool()
    def pay_all(accounts: list[Account]) -> str:
        return "paid"

    @server.tool()
    def order(o: Order) -> str:
        return "ok"

    @server.tool()
    def check(c: Checked) -> str:
        return "ok"

    @server.tool()
    def plain(p: Plain) -> str:
        return "ok"

    @server.tool()
    def both(b: Both) -> str:
        return "ok"

    @server.prompt()
    def greet(account: Account) -> str:
        return "hello"

    @server.resource("accounts://{account}")
    def account(account: Account) -> str:
        return "an account"

    return server


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = await client.request(
        "tools/call", {"name": tool, "arguments": arguments}
    )
    return result


CLASS_FAILURES: dict[str, dict[str, Any]] = {
    "pay": {"account": {"number": "down"}},
    "pay_all": {"accounts": [{"number": "1"}, {"number": "down"}]},
    "check": {"c": {"n": 0}},
    "plain": {"p": {"name": "x"}},
    # (one field the caller's mistake, one internal: internal, not told to the caller)
    "both": {"b": {"order": {"qty": 11}, "account": {"number": "down"}}},
}


@pytest.mark.parametrize("tool", CLASS_FAILURES)
async def test_a_class_failing_in_its_own_code_is_an_internal_error_logged(
    era: str, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with connected(argument_server(), era) as client:
        with caplog.at_level(logging.ERROR, logger="mcp_trio"):
            result = await call(client, tool, **CLASS_FAILURES[tool])
    assert result == {
        "content": [{"type": "text", "text": f"Tool {tool!r} failed with an internal error"}],
        "isError": True,
        **{k: v for k, v in result.items() if k not in ("content", "isError")},
    }
    assert "hunter2" not in str(result)
    (record,) = [r for r in caplog.records if "building its arguments" in r.getMessage()]
    assert record.getMessage() == f"tool {tool!r}: building its arguments failed"
    assert record.exc_text is not None
    assert "hunter2" in record.exc_text  # (the developer sees why, with the traceback)


async def test_a_value_error_of_a_class_is_the_callers_to_see(era: str) -> None:
    async with connected(argument_server(), era) as client:
        result = await call(client, "order", o={"qty": 11})
        fine = await call(client, "pay", account={"number": "1"})
    assert result["isError"] is True
    assert result["content"] == [
        {
            "type": "text",
            "text": "Invalid arguments for tool 'order': arguments.o: invalid value"
            " (at most 10 per order)",
        }
    ]
    assert fine["content"] == [{"type": "text", "text": "paid"}]


async def test_prompt_and_template_arguments_do_not_carry_the_failure_either(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with connected(argument_server(), era) as client:
        with caplog.at_level(logging.ERROR, logger="mcp_trio"):
            with pytest.raises(McpError) as prompt:
                await client.request(
                    "prompts/get", {"name": "greet", "arguments": {"account": '{"number":"down"}'}}
                )
            with pytest.raises(McpError) as template:
                await client.request(
                    "resources/read", {"uri": "accounts://%7B%22number%22:%22down%22%7D"}
                )
    for info in (prompt, template):
        assert info.value.error.code == ErrorCode.INTERNAL_ERROR
        assert "hunter2" not in str(info.value.error)
    logged = "\n".join(r.exc_text or "" for r in caplog.records)
    assert logged.count("hunter2") >= 2


# ------------------------------------------------------------------ inexact integers


def integer_server() -> Server:
    server = Server("ints")

    @server.tool()
    def echo(a: int, more: list[int] | None = None) -> str:
        return f"{a!r} {more!r}"

    return server


async def test_an_integer_wider_than_64_bits_on_the_wire_is_refused_not_rounded() -> None:
    """What any client (Python's ``json``, Go's ``big.Int``...) may send: orjson reads the
    number as a float, which no longer is the number sent."""
    server = integer_server()
    channel, peer = raw_pair("memory")
    with trio.fail_after(10):
        async with handshaken(
            channel,
            peer,
            "server",
            handlers=server.handlers(),
            connection_config=server.connection_config(),
        ):
            answers = {}
            for rid, arguments in (
                (1, b'{"a":18446744073709551617}'),
                (2, b'{"a":1,"more":[9223372036854775807,36893488147419103233]}'),
                (3, b'{"a":18446744073709551615,"more":[-9223372036854775808]}'),
            ):
                await peer.send_bytes(
                    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":'
                    b'{"name":"echo","arguments":%s}}' % (rid, arguments)
                )
                answer = await peer.receive()
                answers[answer["id"]] = answer["result"]
    assert answers[1]["isError"] is True
    assert answers[1]["content"][0]["text"] == (
        "Invalid arguments for tool 'echo': arguments.a: invalid value (1.8446744073709552e+19"
        " is not an exact integer: from 2**53 on, a float (what an integer wider than 64 bits"
        " arrives as) may have lost digits)"
    )
    assert answers[2]["isError"] is True
    assert "arguments.more[1]: invalid value" in answers[2]["content"][0]["text"]
    # Within 64 bits orjson reads integers exactly: they pass as they are.
    assert answers[3]["content"][0]["text"] == "18446744073709551615 [-9223372036854775808]"


async def test_a_float_passes_as_an_integer_only_while_it_is_exact(era: str) -> None:
    async with connected(integer_server(), era) as client:
        whole = await call(client, "echo", a=1.0, more=[2.0**53 - 1, -(2.0**53 - 1)])
        past = await call(client, "echo", a=2.0**53)
        negative = await call(client, "echo", a=1, more=[-(2.0**60)])
    assert whole["content"] == [{"type": "text", "text": f"1 [{2**53 - 1}, {-(2**53 - 1)}]"}]
    assert past["isError"] is True
    assert "arguments.a: invalid value (9007199254740992.0 is not an exact" in str(past)
    assert negative["isError"] is True
    assert "arguments.more[0]: invalid value" in str(negative)


async def test_a_union_with_float_takes_a_float_that_int_refuses(era: str) -> None:
    """``int | float``: ``1e20`` is no exact integer, so the ``float`` member takes it;
    ``int | str`` has no member that may, so the ``int`` member's refusal stands."""
    server = Server("unions")

    @server.tool()
    def number(x: int | float) -> str:
        return repr(x)

    @server.tool()
    def key(x: int | str) -> str:
        return repr(x)

    async with connected(server, era) as client:
        big = await call(client, "number", x=1e20)
        small = await call(client, "number", x=7.0)
        fraction = await call(client, "number", x=2.5)
        refused = await call(client, "key", x=1e20)
    assert big["content"] == [{"type": "text", "text": "1e+20"}]
    assert small["content"] == [{"type": "text", "text": "7"}]
    assert fraction["content"] == [{"type": "text", "text": "2.5"}]
    assert refused["isError"] is True
    assert "arguments.x: invalid value (1e+20 is not an exact integer" in str(refused)


# ------------------------------------------------------------------ dates and times


async def test_a_datetime_is_an_rfc_3339_date_time_and_always_aware(era: str) -> None:
    server = Server("when")

    @server.tool()
    def at(when: dt.datetime) -> str:
        return repr(when)

    @server.tool()
    def on(day: dt.date) -> str:
        return repr(day)

    utc = dt.UTC
    two = dt.timezone(dt.timedelta(hours=2))
    taken = {
        "2024-01-02T10:11:12Z": dt.datetime(2024, 1, 2, 10, 11, 12, tzinfo=utc),
        "2024-01-02t10:11:12.5z": dt.datetime(2024, 1, 2, 10, 11, 12, 500000, tzinfo=utc),
        "2024-01-02T10:11:12+02:00": dt.datetime(2024, 1, 2, 10, 11, 12, tzinfo=two),
    }
    refused = ("2024-01-02", "2024-01-02T10:11:12", "2024-01-02 10:11:12Z", "20240102T101112Z")
    async with connected(server, era) as client:
        for text, when in taken.items():
            result = await call(client, "at", when=text)
            assert result["content"] == [{"type": "text", "text": repr(when)}], text
        for text in refused:
            result = await call(client, "at", when=text)
            assert result["isError"] is True, text
            assert result["content"][0]["text"] == (
                f"Invalid arguments for tool 'at': arguments.when: invalid value (\"{text}\" is"
                " not an RFC 3339 date-time: it needs a date, a time and an offset, as in"
                " 2024-01-02T10:00:00Z or 2024-01-02T10:00:00+02:00)"
            )
        day = await call(client, "on", day="2024-01-02")
        basic = await call(client, "on", day="20240102")
    assert day["content"] == [{"type": "text", "text": repr(dt.date(2024, 1, 2))}]
    assert basic["isError"] is True
    assert '"20240102" is not an RFC 3339 date (YYYY-MM-DD)' in basic["content"][0]["text"]


# ------------------------------------------------------------------ typed templates


def shadow_server() -> Server:
    server = Server("notes")

    @server.resource("notes://{id}")
    def by_id(id: int) -> str:
        return f"by id {id!r}"

    @server.resource("notes://{name}")
    def by_name(name: str) -> str:
        return f"by name {name}"

    @server.resource("pages://{n}")
    def page(n: int) -> str:
        return f"page {n!r}"

    @server.resource("pages://{x}")
    def page_number(x: float) -> str:  # (not for an int: the first serves it)
        return f"page number {x!r}"

    return server


async def read(client: Client, uri: str) -> str:
    result = await client.request("resources/read", {"uri": uri})
    [contents] = result["contents"]
    text: str = contents["text"]
    return text


async def test_a_variable_that_does_not_convert_leaves_the_uri_to_the_next_template(
    era: str,
) -> None:
    async with connected(shadow_server(), era) as client:
        assert await read(client, "notes://7") == "by id 7"
        assert await read(client, "notes://groceries") == "by name groceries"
        assert await read(client, "notes://07") == "by name 07"  # (no int's one spelling)
        assert await read(client, "pages://3") == "page 3"
        assert await read(client, "pages://2.5") == "page number 2.5"
        with pytest.raises(McpError) as info:
            await client.request("resources/read", {"uri": "pages://x"})
    # None converts: the first template's problems (registration order is the priority).
    assert info.value.error.code == ErrorCode.INVALID_PARAMS
    assert info.value.error.message == (
        "Invalid params: pages://x: arguments.n: expected integer, got string"
    )

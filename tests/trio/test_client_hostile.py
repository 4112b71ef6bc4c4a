"""The high-level client against servers that break the rules or push its bounds.

Each test is one server misbehaving and what the client must do about it: fail the call
with a clear error (``RemoteProtocolError`` when the server broke the protocol), never
hang, and stay usable and leak nothing afterwards. The modern servers are a bare
``mcp_sansio.Connection`` driven by hand over an in-memory channel, with a script that
answers chosen methods with raw messages; the others are in-process ``Handlers``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio
import trio.testing
from trio.testing import MockClock

import mcp_trio._client_common
import mcp_trio._validation
from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    RemoteProtocolError,
    RequestReceived,
)
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    Handlers,
    InputRequiredResult,
    McpError,
    MemoryChannel,
    RequestContext,
    RequestTimeout,
    SessionConfig,
    memory_channel_pair,
)
from mcp_trio._client import Client, open_client
from mcp_trio._client_subscriptions import _UNSUBSCRIBE_TIMEOUT
from mcp_trio._server import Server

MAX_VALUES = mcp_trio._client_common.MAX_OUTPUT_SCHEMA_VALUES
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
}
Scripted = Callable[["HandDriven", dict[str, Any]], Awaitable[bool]]
"""Answers one request by hand; returns whether it did (else the core sees it)."""


class HandDriven:
    """A server core driven by hand: ``script`` answers chosen methods with raw messages;
    the rest goes to the core (which acknowledges ``subscriptions/listen`` itself) and
    any request the core hands over is answered with an empty result."""

    def __init__(
        self, channel: MemoryChannel, script: dict[str, Scripted], era: Literal["modern", "legacy"]
    ) -> None:
        self.channel = channel
        self.script = script
        self.conn = Connection(
            "server",
            ConnectionConfig(
                era=era,
                capabilities=CAPABILITIES,
                implementation={"name": "hand-driven", "version": "1"},
            ),
        )

    async def send(self, message: dict[str, Any]) -> None:
        await self.channel.send(dumps(message))

    async def serve(self) -> None:
        try:
            while True:
                data = await self.channel.receive()
                message = loads(data)
                answer = self.script.get(message.get("method"))
                if answer is not None and await answer(self, message):
                    continue
                for event in self.conn.receive_message(data, now=trio.current_time()):
                    if (
                        isinstance(event, RequestReceived)
                        and event.method != "subscriptions/listen"
                    ):
                        self.conn.send_result(event.request_id, {"tools": []})
                for out in self.conn.data_to_send():
                    await self.channel.send(out)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            pass


@asynccontextmanager
async def hand_driven(
    script: dict[str, Scripted],
    *,
    era: Literal["modern", "legacy"] = "modern",
    **client_kwargs: Any,
) -> AsyncGenerator[Client]:
    client_channel, server_channel = memory_channel_pair()
    server = HandDriven(server_channel, script, era)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve)
        async with open_client(client_channel, era=era, **client_kwargs) as client:
            yield client
        nursery.cancel_scope.cancel()


def first_time_only(answer: Scripted) -> Scripted:
    """``answer`` for the first request of its method; the core answers later ones."""
    done = False

    async def once(server: HandDriven, message: dict[str, Any]) -> bool:
        nonlocal done
        if done:
            return False
        done = True
        return await answer(server, message)

    return once


async def assert_nothing_left(client: Client) -> None:
    await trio.testing.wait_all_tasks_blocked()  # tasks that clean up have done so
    assert client.session.connection.pending_requests() == ()
    assert client.session.statistics().waiting_requests == 0


# ---------------------------------------------------------------------- subscriptions


async def _end_listen(server: HandDriven, message: dict[str, Any]) -> bool:
    result = {"resultType": "complete"}
    await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
    return True


async def _cancel_listen(server: HandDriven, message: dict[str, Any]) -> bool:
    params = {"requestId": message["id"], "reason": "no listeners today"}
    await server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    return True


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_listen_ended_before_its_acknowledgment(
    timeout: float | None, autojump_clock: MockClock
) -> None:
    # basic/patterns/subscriptions.mdx: the acknowledgment MUST come first.
    script = {"subscriptions/listen": first_time_only(_end_listen)}
    async with hand_driven(script, timeout=timeout) as client:
        with trio.fail_after(10), pytest.raises(RemoteProtocolError, match="before acknowledging"):
            async with client.subscribe(tools=True):
                pytest.fail("entered, unacknowledged")  # pragma: no cover
        await assert_nothing_left(client)
        async with client.subscribe(tools=True) as updates:  # the next one works
            assert updates.honored == {"toolsListChanged": True}


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_listen_cancelled_before_its_acknowledgment(
    timeout: float | None, autojump_clock: MockClock
) -> None:
    # Before the fix: a hang (no timeout) or a RequestTimeout that hid the reason.
    script = {"subscriptions/listen": first_time_only(_cancel_listen)}
    async with hand_driven(script, timeout=timeout) as client:
        with trio.fail_after(10), pytest.raises(RemoteProtocolError) as info:
            async with client.subscribe(tools=True):
                pytest.fail("entered, unacknowledged")  # pragma: no cover
        assert "before acknowledging it: no listeners today" in str(info.value)
        await assert_nothing_left(client)
        with trio.fail_after(10):
            async with client.subscribe(tools=True) as updates:  # the lock was released
                assert updates.subscription_id is not None
        await assert_nothing_left(client)


async def test_a_listen_never_acknowledged_is_given_up_at_listen_ack_timeout(
    autojump_clock: MockClock,
) -> None:
    # With no request timeout (the default): the wait for the acknowledgment is still
    # bounded, the listen is cancelled, and the lock every subscribe() takes is let go.
    listens: list[dict[str, Any]] = []
    cancelled: list[Any] = []
    servers: list[HandDriven] = []

    async def record_listen(server: HandDriven, message: dict[str, Any]) -> bool:
        listens.append(message)
        servers.append(server)
        return len(listens) == 1  # the first: no acknowledgment, no answer; then the core

    async def record_cancel(server: HandDriven, message: dict[str, Any]) -> bool:
        cancelled.append(message["params"]["requestId"])
        return False

    script: dict[str, Scripted] = {
        "subscriptions/listen": record_listen,
        "notifications/cancelled": record_cancel,
    }
    config = SessionConfig(listen_ack_timeout=20)
    async with hand_driven(script, config=config) as client:
        started = trio.current_time()
        with trio.fail_after(100), pytest.raises(RequestTimeout, match="never acknowledged"):
            async with client.subscribe(tools=True):
                pytest.fail("entered, unacknowledged")  # pragma: no cover
        assert trio.current_time() - started == pytest.approx(20)
        await assert_nothing_left(client)
        first = listens[0]["id"]
        assert cancelled == [first]  # notifications/cancelled went out
        # The acknowledgment, late: it belongs to no subscription, now or later.
        late = {"_meta": {SUBSCRIPTION_ID: first}, "notifications": {"toolsListChanged": True}}
        server = servers[0]
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged"}
        await server.send({**ack, "params": late})
        with trio.fail_after(100):
            async with client.subscribe(tools=True) as updates:  # the lock was let go
                assert updates.subscription_id == listens[1]["id"] != first
                assert updates.honored == {"toolsListChanged": True}
        await assert_nothing_left(client)


async def test_leaving_legacy_subscriptions_is_bounded_as_a_whole(
    autojump_clock: MockClock,
) -> None:
    unsubscribed: list[str] = []
    handlers = Handlers()

    @handlers.on_request("resources/subscribe")
    async def subscribe(ctx: RequestContext) -> dict[str, Any]:
        return {}

    @handlers.on_request("resources/unsubscribe")
    async def never_answer(ctx: RequestContext) -> dict[str, Any]:
        unsubscribed.append((ctx.params or {})["uri"])
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    config = ConnectionConfig(era="legacy", capabilities=CAPABILITIES)
    uris = [f"file:///r{i}" for i in range(8)]
    async with open_client((handlers, config), era="legacy") as client:
        start = trio.current_time()
        with trio.move_on_after(0.5) as caller:
            async with client.subscribe(resources=uris):
                await trio.sleep_forever()
        # One deadline for all eight, not one each (which took 8 x 2 s).
        assert trio.current_time() - start == pytest.approx(0.5 + _UNSUBSCRIBE_TIMEOUT)
        assert caller.cancelled_caught
        assert sorted(unsubscribed) == sorted(uris)  # sent concurrently, all of them
        await assert_nothing_left(client)


# ---------------------------------------------------------------------- MRTR rounds

ELICIT = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


def _asking_forever() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def greedy(ctx: RequestContext) -> InputRequiredResult:
        return InputRequiredResult(input_requests={"q": ELICIT}, state=1)

    return handlers


def _awaiting_input(client: Client) -> int:
    return len(client.session.connection._awaiting_input)  # the core has no public view


async def test_the_round_bound_is_checked_before_asking_the_user(
    autojump_clock: MockClock,
) -> None:
    asked: list[str] = []

    async def on_elicitation(params: Any) -> dict[str, Any]:
        asked.append(params.message)
        return {"action": "accept", "content": {"name": "Ada"}}

    config = ConnectionConfig(era="modern", capabilities={"tools": {}})
    async with open_client(
        (_asking_forever(), config), era="modern", on_elicitation=on_elicitation
    ) as client:
        rounds = client.session.connection.config.max_input_rounds
        for _ in range(3):
            asked.clear()
            with pytest.raises(RemoteProtocolError, match="asked for input again"):
                await client.call_tool("greedy")
            # The last round is not put to the user (its answer could not be sent).
            assert len(asked) == rounds - 1
            assert _awaiting_input(client) == 0  # nothing leaks, call after call
            await assert_nothing_left(client)


async def test_a_retry_that_cannot_be_sent_is_abandoned(autojump_clock: MockClock) -> None:
    async def unsendable(params: Any) -> dict[str, Any]:
        # A set is not JSON; in _meta (any value), past the check of the answer's shape.
        return {"action": "accept", "content": {"name": "Ada"}, "_meta": {"x": {1, 2}}}

    config = ConnectionConfig(era="modern", capabilities={"tools": {}})
    async with open_client(
        (_asking_forever(), config), era="modern", on_elicitation=unsendable
    ) as client:
        with pytest.raises(TypeError):
            await client.call_tool("greedy")
        assert _awaiting_input(client) == 0
        await assert_nothing_left(client)


async def test_a_retry_echoes_the_request_state_exactly(autojump_clock: MockClock) -> None:
    """mrtr.mdx: the client echoes ``requestState`` as it was sent, byte for byte (it is
    the server's opaque token: spaces around it, escapes and all are part of it)."""
    state = "  opaque \t state\\n é  "
    retries: list[dict[str, Any]] = []

    async def ask_then_answer(server: HandDriven, message: dict[str, Any]) -> bool:
        params = message["params"]
        result: dict[str, Any]
        if "requestState" not in params:
            result = {"resultType": "input_required", "inputRequests": {"q": ELICIT}}
            result["requestState"] = state
        else:
            retries.append(params)
            result = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
        await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return True

    async def on_elicitation(params: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    script: dict[str, Scripted] = {"tools/call": ask_then_answer}
    async with hand_driven(script, on_elicitation=on_elicitation) as client:
        assert (await client.call_tool("ask")).text == "done"
    assert [p["requestState"] for p in retries] == [state]
    assert retries[0]["inputResponses"] == {"q": {"action": "accept", "content": {"name": "Ada"}}}


# ---------------------------------------------------------------------- pagination


async def test_auto_pagination_bounds_the_items(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_trio._client_common, "MAX_LIST_ITEMS", 5)
    calls: list[Any] = []
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def endless(ctx: RequestContext) -> dict[str, Any]:
        calls.append((ctx.params or {}).get("cursor"))
        page = len(calls)
        tools = [{"name": f"t{page}.{i}", "inputSchema": {"type": "object"}} for i in range(3)]
        return {"tools": tools, "nextCursor": str(page)}

    async with open_client(
        (handlers, ConnectionConfig(era="legacy", capabilities=CAPABILITIES)), era="legacy"
    ) as client:
        with pytest.raises(RemoteProtocolError, match="more than 5 items"):
            await client.list_tools()
        assert calls == [None, "1"]  # gave up at the page that went past the bound


async def test_auto_pagination_takes_exactly_the_bound(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_trio._client_common, "MAX_LIST_ITEMS", 5)
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def two_pages(ctx: RequestContext) -> dict[str, Any]:
        second = (ctx.params or {}).get("cursor") == "2"
        tools = [{"name": f"t{i}", "inputSchema": {}} for i in range(2 if second else 3)]
        return {"tools": tools} if second else {"tools": tools, "nextCursor": "2"}

    async with open_client(
        (handlers, ConnectionConfig(era="legacy", capabilities=CAPABILITIES)), era="legacy"
    ) as client:
        assert len(await client.list_tools()) == 5


def _tools_page(names: list[str], cursor: str | None) -> dict[str, Any]:
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in names]
    return {"tools": tools} if cursor is None else {"tools": tools, "nextCursor": cursor}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_auto_pagination_follows_a_repeated_cursor(
    autojump_clock: MockClock, era: Literal["legacy", "modern"]
) -> None:
    """pagination.mdx: clients MUST treat cursors as opaque and make no determination
    from one but whether it is there: a stateful server may send the same one twice."""
    calls: list[Any] = []
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def stateful(ctx: RequestContext) -> dict[str, Any]:
        calls.append((ctx.params or {}).get("cursor"))
        return _tools_page([f"t{len(calls)}"], None if len(calls) == 3 else "more")

    async with open_client(
        (handlers, ConnectionConfig(era=era, capabilities=CAPABILITIES)), era=era
    ) as client:
        assert [tool.name for tool in await client.list_tools()] == ["t1", "t2", "t3"]
        assert calls == [None, "more", "more"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_auto_pagination_follows_an_empty_cursor(
    autojump_clock: MockClock, era: Literal["legacy", "modern"]
) -> None:
    """An empty ``nextCursor`` is a cursor, not the end: only its absence ends a list."""
    calls: list[Any] = []
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def two_pages(ctx: RequestContext) -> dict[str, Any]:
        calls.append((ctx.params or {}).get("cursor"))
        return _tools_page([f"t{len(calls)}"], "" if len(calls) == 1 else None)

    async with open_client(
        (handlers, ConnectionConfig(era=era, capabilities=CAPABILITIES)), era=era
    ) as client:
        assert [tool.name for tool in await client.list_tools()] == ["t1", "t2"]
        assert calls == [None, ""]


async def test_auto_pagination_bounds_the_pages_of_one_repeated_cursor(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers the same cursor forever is stopped by the page bound (and,
    with items on every page, by the item bound)."""
    monkeypatch.setattr(mcp_trio._client_common, "MAX_LIST_PAGES", 4)
    calls: list[Any] = []
    handlers = Handlers()
    names: list[str] = []

    @handlers.on_request("tools/list")
    async def endless(ctx: RequestContext) -> dict[str, Any]:
        calls.append((ctx.params or {}).get("cursor"))
        if len(calls) > 10:  # (a client without the bound fails, not hangs)
            raise RuntimeError("the client went past its bound")
        return _tools_page(names, "again")

    async with open_client(
        (handlers, ConnectionConfig(era="modern", capabilities=CAPABILITIES)), era="modern"
    ) as client:
        with pytest.raises(RemoteProtocolError, match="more than 4 pages"):
            await client.list_tools()
        assert calls == [None, "again", "again", "again"]
        calls.clear()
        names[:] = ["a", "b"]
        monkeypatch.setattr(mcp_trio._client_common, "MAX_LIST_ITEMS", 5)
        with pytest.raises(RemoteProtocolError, match="more than 5 items"):
            await client.list_tools()
        assert calls == [None, "again", "again"]


# ---------------------------------------------------------------------- structured output

SUM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}},
    "required": ["sum"],
}
RESULTS: dict[str, dict[str, Any]] = {
    "ok": {"content": [], "structuredContent": {"sum": 3}},
    "wrong_type": {"content": [], "structuredContent": {"sum": "three"}},
    "missing": {"content": [{"type": "text", "text": "3"}]},
    "array": {"content": [], "structuredContent": [3]},
    "failed": {"content": [{"type": "text", "text": "boom"}], "isError": True},
    "unlisted": {"content": [], "structuredContent": {"sum": "three"}},
}


def _structured_server(
    schemas: dict[str, Any] | None = None, listings: list[None] | None = None
) -> Handlers:
    """Tools with ``SUM_SCHEMA`` (or ``schemas``); each ``tools/list`` adds to ``listings``."""
    handlers = Handlers()
    listed = {name: SUM_SCHEMA for name in RESULTS if name != "unlisted"}
    listed.update(schemas or {})

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        if listings is not None:
            listings.append(None)
        tools = [
            {"name": name, "inputSchema": {"type": "object"}, "outputSchema": schema}
            for name, schema in listed.items()
        ]
        return {"tools": tools}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        name = (ctx.params or {})["name"]
        if name == "change":
            await ctx.session.notify("notifications/tools/list_changed")
            return {"content": []}
        return RESULTS.get(name, RESULTS["wrong_type"])

    return handlers


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_structured_content_is_validated_against_a_listed_output_schema(
    version: str, autojump_clock: MockClock
) -> None:
    config = ConnectionConfig(capabilities=CAPABILITIES)
    async with open_client((_structured_server(), config), protocol_version=version) as client:
        await client.list_tools()
        assert (await client.call_tool("ok")).structured_content == {"sum": 3}
        with pytest.raises(RemoteProtocolError, match=r"structuredContent\.sum: expected integer"):
            await client.call_tool("wrong_type")
        with pytest.raises(RemoteProtocolError, match="has no structuredContent"):
            await client.call_tool("missing")
        with pytest.raises(RemoteProtocolError, match="structuredContent"):
            await client.call_tool("array")
        assert (await client.call_tool("failed")).is_error  # tool errors are not checked
        # No schema known for it: no check (and no request to learn one).
        assert (await client.call_tool("unlisted")).structured_content == {"sum": "three"}


async def test_structured_content_must_be_an_object_where_the_revision_says(
    autojump_clock: MockClock,
) -> None:
    config = ConnectionConfig(capabilities=CAPABILITIES)
    target = (_structured_server(), config)
    async with open_client(target, protocol_version="2025-06-18") as client:
        # No listing needed: the revision's schema itself wants an object.
        with pytest.raises(RemoteProtocolError, match=r"must be an object .* not an array"):
            await client.call_tool("array")
    async with open_client(target, protocol_version="2026-07-28") as client:
        assert (await client.call_tool("array")).structured_content == [3]  # any JSON value


async def test_changed_tools_forget_their_output_schemas(autojump_clock: MockClock) -> None:
    config = ConnectionConfig(capabilities=CAPABILITIES)
    async with open_client((_structured_server(), config), era="legacy") as client:
        await client.list_tools()
        with pytest.raises(RemoteProtocolError):
            await client.call_tool("wrong_type")
        await client.call_tool("change")  # sends notifications/tools/list_changed first
        await trio.testing.wait_all_tasks_blocked()
        assert (await client.call_tool("wrong_type")).structured_content == {"sum": "three"}


def _doubling_chain(levels: int) -> dict[str, Any]:
    """A small schema whose validation doubles with each level: 2**levels checks."""
    defs: dict[str, Any] = {
        f"l{i}": {"anyOf": [{"$ref": f"#/$defs/l{i + 1}"}, {"$ref": f"#/$defs/l{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"l{levels}"] = {"type": "integer"}
    return {"$defs": defs, "type": "object", "properties": {"sum": {"$ref": "#/$defs/l0"}}}


DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def _draft_07(sub: dict[str, Any]) -> dict[str, Any]:
    """A draft-07 ``SUM_SCHEMA`` whose ``extra`` property has the schema ``sub``."""
    return {
        "$schema": DRAFT_07,
        **SUM_SCHEMA,
        "properties": {**SUM_SCHEMA["properties"], "extra": sub},
    }


LINKED = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "sum": {"type": "integer"},
                "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
            },
        }
    },
    "$ref": "#/$defs/node",
}
BRANCHING = {
    "$defs": {
        "node": {
            "anyOf": [
                {"type": "object", "properties": {"sum": {"$ref": "#/$defs/node"}}},
                {"type": "object", "properties": {"sum": {"$ref": "#/$defs/node"}}},
            ]
        }
    },
    "$ref": "#/$defs/node",
}


@pytest.mark.parametrize(
    ("schema", "checked"),
    [
        (_doubling_chain(60), False),  # 2**60 checks: too costly, not used
        (BRANCHING, False),  # recursion that could double at each level: not used
        ({"type": "object", "x-vendor": True}, False),  # a keyword the validator lacks
        ({"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}, False),
        ({"$schema": DRAFT_07, **SUM_SCHEMA}, True),  # the TypeScript SDK's dialect
        # Draft-07: a $ref's siblings are ignored, one that leads nowhere too.
        (
            {
                "$schema": DRAFT_07,
                "$ref": "#/definitions/sum",
                "definitions": {"sum": SUM_SCHEMA},
                "properties": {"sum": {"$ref": "#/nowhere"}},
            },
            True,
        ),
        # Draft-07 subschemas the 2020-12 ones do not name, a pattern in each: not used.
        (_draft_07({"items": [{"pattern": "^x"}]}), False),
        (_draft_07({"items": [], "additionalItems": {"pattern": "^x"}}), False),
        (_draft_07({"dependencies": {"a": {"properties": {"b": {"pattern": "^x"}}}}}), False),
        (_draft_07({"propertyNames": {"pattern": "^x"}}), False),
        ({"properties": {"sum": {"minLength": "x"}}}, False),  # the validator trips on it
        # an anchor: valid 2020-12, not resolved by the validator (it took the root)
        ({"properties": {"sum": {"$ref": "#S"}}, "$defs": {"S": {"$anchor": "S"}}}, False),
        (LINKED, True),  # recursive, but linear: checked
        (_doubling_chain(3), True),
        # Each value is compared with each enum/const value: items x values.
        ({"properties": {"sum": {"enum": [f"v{i}" for i in range(MAX_VALUES + 1)]}}}, False),
        ({"properties": {"sum": {"const": list(range(MAX_VALUES))}}}, False),
        ({"properties": {"sum": {"enum": [f"v{i}" for i in range(MAX_VALUES)]}}}, True),
        ({"properties": {"sum": {"enum": "three"}}}, False),  # not a list: invalid
        ({"properties": {"sum": {"pattern": "^x"}}}, False),  # re may backtrack for ever
        ({"properties": {"pattern": {"type": "string"}, "sum": {"const": 3}}}, True),
    ],
)
async def test_costly_or_unusable_output_schemas_are_not_used(
    schema: dict[str, Any], checked: bool, autojump_clock: MockClock
) -> None:
    # basic/index.mdx, "Composition-Keyword Resource Use": a server's schema must not
    # make the client spin; one the validator cannot use is not the result's fault.
    server = _structured_server({"hostile": schema})
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        if checked:
            with pytest.raises(RemoteProtocolError, match="does not match"):
                await client.call_tool("hostile")  # {"sum": "three"}
        else:
            assert (await client.call_tool("hostile")).structured_content == {"sum": "three"}


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "https://example.com/schema.json"},  # never fetched
        {"properties": {"sum": {"$ref": "#/$defs/gone"}}},
        {"properties": {"sum": {"$ref": "other.json#/x"}}},
    ],
)
async def test_a_schema_with_an_unresolved_ref_has_its_results_refused(
    schema: dict[str, Any], autojump_clock: MockClock
) -> None:
    # basic/index.mdx: such a schema SHOULD be rejected, not treated as permissive.
    server = _structured_server({"hostile": schema})
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        with pytest.raises(RemoteProtocolError, match="has a \\$ref that cannot be resolved"):
            await client.call_tool("hostile")


async def test_a_schema_of_another_dialect_is_not_used_and_said_so(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    schema = {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}
    server = _structured_server({"hostile": schema})
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        assert (await client.call_tool("hostile")).structured_content == {"sum": "three"}
    (record,) = [r for r in caplog.records if "dialect" in r.getMessage()]
    assert record.levelname == "WARNING" and "2019-09" in record.getMessage()


async def test_a_schema_whose_refs_a_nested_id_rebases_is_not_used_and_said_so(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Valid JSON Schema ("#/$defs/n" is the nested resource's): resolving it against the
    # root would find nothing and refuse every result of the tool.
    nested = {"$id": "https://example.com/sum", "$defs": {"n": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"sum": {**nested, "$ref": "#/$defs/n"}}}
    server = _structured_server({"hostile": schema})
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        assert (await client.call_tool("hostile")).structured_content == {"sum": "three"}
        with pytest.raises(RemoteProtocolError, match="does not match"):
            await client.call_tool("wrong_type")  # the others are still checked
    (record,) = [r for r in caplog.records if "$id" in r.getMessage()]
    assert record.levelname == "WARNING" and "'hostile'" in record.getMessage()


# The outputSchema of a tool of the TypeScript SDK (1.32.2; zod's draft-07), as listed:
# a z.tuple([z.string(), z.number().int()]) and a recursive z.lazy.
TS_SDK_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pair": {
            "type": "array",
            "items": [
                {"type": "string"},
                {"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991},
            ],
            "additionalItems": False,
            "minItems": 2,
            "maxItems": 2,
        },
        "tree": {"$ref": "#/definitions/__schema0"},
    },
    "required": ["pair", "tree"],
    "$schema": "http://json-schema.org/draft-07/schema#",
    "additionalProperties": False,
    "definitions": {
        "__schema0": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/definitions/__schema0"}},
            },
            "required": ["value", "children"],
            "additionalProperties": False,
        }
    },
}


@pytest.mark.parametrize(
    ("structured", "problem"),
    [
        ({"pair": ["a", 1], "tree": {"value": 1, "children": []}}, None),
        (
            {"pair": ["a", "b"], "tree": {"value": 1, "children": []}},
            r"structuredContent\.pair\[1\]",
        ),
        ({"pair": ["a", 1, 2], "tree": {"value": 1, "children": []}}, "at most 2 items"),
        (
            {"pair": ["a", 1], "tree": {"value": 1, "children": [{"value": 2.5, "children": []}]}},
            r"tree\.children\[0\]\.value: expected integer",
        ),
    ],
)
async def test_a_typescript_sdk_output_schema_is_used_without_a_warning(
    structured: dict[str, Any],
    problem: str | None,
    autojump_clock: MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # basic/index.mdx: implementations MUST support 2020-12 and SHOULD document the other
    # dialects they support; the TypeScript SDK declares draft-07 on every tool.
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        tool = {"name": "t", "inputSchema": {"type": "object"}}
        return {"tools": [{**tool, "outputSchema": TS_SDK_OUTPUT_SCHEMA}]}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [], "structuredContent": structured}

    async with open_client((handlers, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        if problem is None:
            assert (await client.call_tool("t")).structured_content == structured
        else:
            with pytest.raises(RemoteProtocolError, match=problem):
                await client.call_tool("t")
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


BACKTRACKING = "^(a+)+$"  # exponential in Python's re on "aaa...a!"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": BACKTRACKING}}},
        {  # a $ref to no schema, which the validator takes as one
            "type": "object",
            "$defs": {"m": {"properties": {"pattern": BACKTRACKING}}},
            "properties": {"s": {"$ref": "#/$defs/m/properties"}},
        },
        {  # in $defs, even unused
            "type": "object",
            "$defs": {"old": {"type": "string", "pattern": BACKTRACKING}},
            "properties": {"s": {"type": "string"}},
        },
    ],
)
async def test_output_schemas_with_a_pattern_are_not_used(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # A pattern can take seconds on a short string, synchronously: no timeout could end
    # it. (Here ~1 s without the rule; the validator's regex use is counted instead.)
    compiled: list[object] = []
    real_regex = mcp_trio._validation._regex

    def counting_regex(pattern: object) -> Any:
        compiled.append(pattern)
        return real_regex(pattern)

    monkeypatch.setattr(mcp_trio._validation, "_regex", counting_regex)
    handlers = Handlers()
    structured = {"s": "a" * 22 + "!"}

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        return {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}]}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [], "structuredContent": structured}

    async with open_client((handlers, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        assert (await client.call_tool("t")).structured_content == structured
    assert compiled == []


V1 = {"type": "object", "properties": {"temp": {"type": "integer"}}, "required": ["temp"]}
V2 = {"type": "object", "properties": {"temp_c": {"type": "number"}}, "required": ["temp_c"]}


async def test_a_changed_tool_unheard_of_is_listed_again_before_its_result_is_rejected(
    autojump_clock: MockClock,
) -> None:
    # Modern era: tools/list_changed reaches only a client that listens, so the client
    # still holds the old schema when the server replaces the tool.
    server = Server("s")
    server.add_tool(lambda: {"temp": 20}, name="weather", output_schema=V1)
    server.add_tool(lambda: {"temp": 20}, name="gone", output_schema=V1)
    async with open_client(server, era="modern") as client:
        await client.list_tools()
        assert (await client.call_tool("weather")).structured_content == {"temp": 20}
        server.remove_tool("weather")
        server.add_tool(lambda: {"temp_c": 20.5}, name="weather", output_schema=V2)
        server.remove_tool("gone")
        server.add_tool(lambda: {"temp_c": 20.5}, name="gone", output_schema=False)
        await trio.testing.wait_all_tasks_blocked()
        assert (await client.call_tool("weather")).structured_content == {"temp_c": 20.5}
        assert (await client.call_tool("gone")).structured_content == {"temp_c": 20.5}  # no schema
        # The fresh schemas are remembered: no more listing (see the test below).
        assert (await client.call_tool("weather")).structured_content == {"temp_c": 20.5}


async def test_a_rejected_result_costs_one_listing_at_most(autojump_clock: MockClock) -> None:
    listings: list[None] = []
    server = _structured_server(listings=listings)
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        with pytest.raises(RemoteProtocolError, match="does not match"):
            await client.call_tool("wrong_type")
        assert len(listings) == 2
        with pytest.raises(RemoteProtocolError, match="has no structuredContent"):
            await client.call_tool("missing")
        assert len(listings) == 3
        assert (await client.call_tool("ok")).structured_content == {"sum": 3}
        assert len(listings) == 3
    listings.clear()
    async with open_client(
        (server, ConnectionConfig(capabilities=CAPABILITIES)), protocol_version="2025-06-18"
    ) as client:
        await client.list_tools()
        # What the revision says of structuredContent needs no schema: no listing.
        with pytest.raises(RemoteProtocolError, match=r"must be an object .* not an array"):
            await client.call_tool("array")
        assert len(listings) == 1


async def test_the_listing_before_a_rejection_keeps_to_the_calls_timeout(
    autojump_clock: MockClock,
) -> None:
    server = _structured_server()
    listed = trio.Event()

    @server.on_request("tools/list")
    async def stuck_after_the_first(ctx: RequestContext) -> dict[str, Any]:
        if listed.is_set():
            await trio.sleep_forever()
        listed.set()
        return {
            "tools": [
                {
                    "name": "wrong_type",
                    "inputSchema": {"type": "object"},
                    "outputSchema": SUM_SCHEMA,
                }
            ]
        }

    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        started = trio.current_time()
        with pytest.raises(RemoteProtocolError, match="does not match"):
            await client.call_tool("wrong_type", timeout=5)
        assert trio.current_time() - started == pytest.approx(5)


@pytest.mark.parametrize(
    ("bad", "more"), [(3, ""), (4, " (and 1 more problem)"), (100, " (and 97 more problems)")]
)
async def test_a_mismatch_shows_three_problems_and_counts_the_rest(
    bad: int, more: str, autojump_clock: MockClock
) -> None:
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}}},
    }
    server = _structured_server({"many": schema})

    @server.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [], "structuredContent": {"xs": ["x"] * bad}}

    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        with pytest.raises(RemoteProtocolError) as caught:
            await client.call_tool("many")
    message = str(caught.value)
    assert message.count("expected integer") == 3
    assert message.endswith("got string" + more)


async def test_a_nan_timeout_is_refused_before_anything_is_sent(
    autojump_clock: MockClock,
) -> None:
    listings: list[None] = []
    server = _structured_server(listings=listings)
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        with pytest.raises(ValueError, match="more than 0 seconds"):
            await client.call_tool("wrong_type", timeout=math.nan)
        assert client.session.connection.pending_requests() == ()
    assert len(listings) == 1


@pytest.mark.parametrize(
    ("timeout", "error", "said"),
    [
        # 0 raced the timer: the first call of a session often came back, the next
        # ones timed out; open_client(timeout=0) made every call time out, or failed to
        # open. Refused, as the CLI's --timeout 0 means "never" to some.
        (0, ValueError, "timeout must be more than 0 seconds (or None for no timeout), not 0"),
        (-1, ValueError, "timeout must be more than 0 seconds (or None for no timeout), not -1"),
        # (was "'>=' not supported between instances of 'str' and 'int'"; and open_client
        # named the core's request_timeout, not the argument given)
        ("5", TypeError, "timeout must be a number of seconds (or None), not str '5'"),
    ],
)
async def test_a_timeout_that_is_no_positive_number_is_refused_naming_it(
    timeout: Any, error: type[Exception], said: str, autojump_clock: MockClock
) -> None:
    listings: list[None] = []
    server = _structured_server(listings=listings)
    target = (server, ConnectionConfig(capabilities=CAPABILITIES))
    with pytest.raises(error, match=f"^{re.escape(said)}$"):
        async with open_client(target, timeout=timeout):
            pass  # pragma: no cover (refused before anything is opened)
    async with open_client(target) as client:
        with pytest.raises(error, match=f"^{re.escape(said)}$"):
            await client.call_tool("wrong_type", timeout=timeout)
        with pytest.raises(error, match=f"^{re.escape(said)}$"):
            await client.list_tools(timeout=timeout)
        assert client.session.connection.pending_requests() == ()
        await client.list_tools(timeout=math.inf)  # (no timeout, as None)
    assert len(listings) == 1


# ---------------------------------------------------------------------- batches


async def _answer_in_a_batch(server: HandDriven, message: dict[str, Any]) -> bool:
    answer = [{"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}}]
    await server.channel.send(dumps(answer))
    return True


async def test_an_answer_in_a_batch_no_revision_allows_ends_the_call(
    autojump_clock: MockClock,
) -> None:
    # 2025-11-25 has no batches: the batch is refused, and the call it answered fails
    # at once with -32603, where it waited forever (it has no timeout).
    with trio.fail_after(5):
        async with hand_driven({"tools/list": _answer_in_a_batch}, era="legacy") as client:
            with pytest.raises(McpError, match="Answered in a batch") as caught:
                await client.list_tools()
            assert caught.value.code == ErrorCode.INTERNAL_ERROR
            await client.ping()  # (the session goes on)
            await assert_nothing_left(client)


async def _request_then_answer(server: HandDriven, message: dict[str, Any]) -> bool:
    evil = "x\nCRITICAL root: forged line\x1b[31m" + "A" * 100_000
    await server.send({"jsonrpc": "2.0", "id": "evil", "method": evil})
    return False  # (the core answers the list)


async def test_a_modern_servers_request_is_logged_clipped_and_escaped(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The method name is the server's: raw, it would forge a log line (a newline),
    # drive the terminal that shows the log (ESC) and write 100 KB into one record.
    async with hand_driven({"tools/list": _request_then_answer}) as client:
        await client.list_tools()
    (logged,) = [r.getMessage() for r in caplog.records if "forged" in r.getMessage()]
    assert logged.startswith(
        "invalid message from the peer: Method not found: "
        "x\\nCRITICAL root: forged line\\x1b[31mAAA"
    )
    assert "\n" not in logged and "\x1b" not in logged
    assert len(logged) < 1_000 and logged.endswith("more characters)")


async def test_a_schema_of_another_dialect_is_said_so_with_the_name_clipped(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    name = "hostile" + "h" * 100_000
    schema = {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}
    server = _structured_server({name: schema})
    async with open_client((server, ConnectionConfig(capabilities=CAPABILITIES))) as client:
        await client.list_tools()
        await client.call_tool(name)
    (logged,) = [r.getMessage() for r in caplog.records if "dialect" in r.getMessage()]
    assert logged.startswith("not validating tool 'hostilehhh")
    assert "2019-09" in logged and len(logged) < 1_000


async def _ask_in_an_undeclared_mode(server: HandDriven, message: dict[str, Any]) -> bool:
    mode = "m\n" + "M" * 100_000
    asked = {"method": "elicitation/create", "params": {"message": "?", "mode": mode}}
    result = {"resultType": "input_required", "inputRequests": {"who": asked}}
    await server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
    return True


async def test_an_undeclared_mode_is_refused_with_the_mode_clipped(
    autojump_clock: MockClock,
) -> None:
    # The core refuses the round (mrtr.mdx: servers MUST NOT send inputRequests the
    # client has not declared): the call fails with its local error, which quotes the
    # server's text clipped.
    async def elicit(params: Any) -> Any:
        raise AssertionError("not asked")  # pragma: no cover

    script: dict[str, Scripted] = {"tools/call": _ask_in_an_undeclared_mode}
    async with hand_driven(
        script, capabilities={"elicitation": {}}, on_elicitation=elicit
    ) as client:
        with pytest.raises(RemoteProtocolError) as info:
            await client.call_tool("anything")
    message = str(info.value)
    assert "inputRequests['who'] (elicitation/create): elicitation mode 'm\\nMMM" in message
    assert len(message) < 1_000 and "more characters)" in message

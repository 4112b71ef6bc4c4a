"""What the client says back to a server: its callbacks' answers checked, input it never
declared refused, and what it declares about itself (clientInfo, roots, extensions).

* client/elicitation: "Clients SHOULD validate all responses against the provided
  schema"; the schema's ``ElicitResult.action`` is accept/decline/cancel and
  ``CreateMessageResult`` requires ``model``. A bad answer is the application's bug:
  a legacy server gets -32603 naming it (and it is logged), a modern call fails with it.
* basic/patterns/mrtr: "Servers MUST NOT send an inputRequests that the client has not
  declared support for"; client/sampling: tool use needs ``sampling.tools``.
* schema ``Implementation`` requires ``name`` and ``version``; 2026-07-28's ``roots``
  capability has no ``listChanged``; basic/versioning: extension ids are ``_meta`` keys
  "with a mandatory prefix".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import Connection, ConnectionConfig, ErrorCode, RemoteProtocolError, RequestReceived
from mcp_sansio import types as t
from mcp_sansio._conn_receive import undeclared_request
from mcp_sansio._json import dumps, loads
from mcp_trio import Context, McpError, MemoryChannel, memory_channel_pair
from mcp_trio._client import Client, open_client
from mcp_trio._client_common import CallbackAnswerError
from mcp_trio._server import Server

ERAS = ["legacy", "modern"]
FORM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "ratio": {"type": "number"}},
    "required": ["name"],
}


def asking_server() -> Server:
    server = Server("asker", "1")

    @server.tool()
    async def elicit(ctx: Context) -> str:
        """Ask for a name."""
        try:
            answer = await ctx.elicit("Your name?", FORM)
        except McpError as exc:
            return f"error {exc.code}: {exc.message}"
        return f"{answer.action}:{answer.content}"

    @server.tool()
    async def sample(ctx: Context) -> str:
        """Ask the model."""
        try:
            answer = await ctx.sample("hi", max_tokens=5)
        except McpError as exc:
            return f"error {exc.code}: {exc.message}"
        return f"{answer.model}:{answer.content}"

    return server


# ---------------------------------------------------------------------- answers checked


@pytest.mark.parametrize(
    ("tool", "answer", "problem"),
    [
        ("sample", {"role": "assistant", "content": {"type": "text", "text": "x"}}, "model"),
        ("elicit", {"action": "maybe"}, "action"),
        ("elicit", {"action": "accept", "content": {"name": 5}}, "field 'name'"),
        ("elicit", {"action": "accept", "content": {"ratio": 0.5}}, "name"),  # required
        ("elicit", {"action": "accept", "content": {"name": "A", "x": [1]}}, "content.x"),
    ],
)
async def test_a_bad_answer_is_refused_legacy(
    tool: str,
    answer: dict[str, Any],
    problem: str,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: MockClock,
) -> None:
    async def callback(params: Any) -> dict[str, Any]:
        return answer

    async with open_client(
        asking_server(), era="legacy", on_sampling=callback, on_elicitation=callback
    ) as client:
        with caplog.at_level(logging.ERROR, logger="mcp_trio"):
            text = (await client.call_tool(tool)).text
    # The server is told what was wrong (not a bare "Internal error") ...
    assert text.startswith("error -32603: on_")
    assert problem in text
    # ... and so is the application's author, in the client's log.
    refused = [r.getMessage() for r in caplog.records if "is refused" in r.getMessage()]
    assert len(refused) == 1 and problem in refused[0]


@pytest.mark.parametrize(
    ("tool", "answer", "problem"),
    [
        ("sample", {"role": "assistant", "content": {"type": "text", "text": "x"}}, "model"),
        ("elicit", {"action": "maybe"}, "action"),
        ("elicit", {"action": "accept", "content": {"name": 5}}, "field 'name'"),
    ],
)
async def test_a_bad_answer_fails_the_call_modern(
    tool: str, answer: dict[str, Any], problem: str, autojump_clock: MockClock
) -> None:
    async def callback(params: Any) -> dict[str, Any]:
        return answer

    async with open_client(
        asking_server(), era="modern", on_sampling=callback, on_elicitation=callback
    ) as client:
        with pytest.raises(CallbackAnswerError, match=problem):
            await client.call_tool(tool)
        assert client.session.connection.pending_requests() == ()


@pytest.mark.parametrize("era", ERAS)
async def test_good_answers_still_go_through(era: str, autojump_clock: MockClock) -> None:
    async def elicit(params: Any) -> dict[str, Any]:
        # A fraction for a "number" field: ElicitResult's content types leave numbers
        # out, the form asks for one; the form wins.
        return {"action": "accept", "content": {"name": "Ada", "ratio": 0.5}}

    async def sample(params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}

    async with open_client(
        asking_server(),
        era=era,  # type: ignore[arg-type]
        on_sampling=sample,
        on_elicitation=elicit,
    ) as client:
        assert (await client.call_tool("elicit")).text == "accept:{'name': 'Ada', 'ratio': 0.5}"
        assert (await client.call_tool("sample")).text.startswith("m:")


@pytest.mark.parametrize("era", ERAS)
async def test_a_roots_callback_with_a_bad_root(era: str, autojump_clock: MockClock) -> None:
    server = Server("r", "1")

    @server.tool()
    async def roots(ctx: Context) -> str:
        """List the roots."""
        try:
            return repr(await ctx.list_roots())
        except McpError as exc:
            return f"error {exc.code}: {exc.message}"

    async def bad_roots() -> list[Any]:
        return [{"uri": "file:///a", "name": 7}]

    async with open_client(server, era=era, roots=bad_roots) as client:  # type: ignore[arg-type]
        if era == "legacy":
            text = (await client.call_tool("roots")).text
            assert text.startswith("error -32603: the roots callback returned")
            assert "name" in text
        else:
            with pytest.raises(CallbackAnswerError, match="name"):
                await client.call_tool("roots")


# ---------------------------------------------------------------------- undeclared input


SAMPLE_WITH_TOOLS = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
    },
}
ELICIT_URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "m", "url": "https://example.com/", "elicitationId": "e"},
}
ELICIT_FORM = {
    "method": "elicitation/create",
    "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}},
}


async def raw_server(
    channel: MemoryChannel,
    era: Literal["legacy", "modern"],
    on_call: Callable[[dict[str, Any]], list[dict[str, Any]]],
    seen: list[dict[str, Any]],
) -> None:
    """A server core for the handshake; ``tools/call`` is answered by ``on_call``'s raw
    messages (which the core would refuse to send), and every message is in ``seen``."""
    conn = Connection(
        "server",
        ConnectionConfig(
            era=era, capabilities={"tools": {}}, implementation={"name": "raw", "version": "1"}
        ),
    )
    try:
        while True:
            data = await channel.receive()
            message = loads(data)
            seen.append(message)
            if message.get("method") == "tools/call" or "method" not in message:
                for out in on_call(message):
                    await channel.send(dumps(out))
                continue
            for event in conn.receive_message(data, now=trio.current_time()):
                if isinstance(event, RequestReceived):
                    conn.send_result(event.request_id, {"tools": []})
            for raw in conn.data_to_send():
                await channel.send(raw)
    except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
        pass


@asynccontextmanager
async def raw_served_client(
    era: Literal["legacy", "modern"],
    on_call: Callable[[dict[str, Any]], list[dict[str, Any]]],
    seen: list[dict[str, Any]],
    **client_options: Any,
) -> AsyncIterator[Client]:
    """A client of :func:`raw_server`, open for the block; the server stops after it."""
    client_channel, server_channel = memory_channel_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(raw_server, server_channel, era, on_call, seen)
        async with open_client(client_channel, era=era, **client_options) as client:
            yield client
        nursery.cancel_scope.cancel()


def done(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}


@pytest.mark.parametrize(
    ("asked", "capabilities"),
    [
        (ELICIT_URL, None),  # a form-only client
        (ELICIT_FORM, {"elicitation": {"url": {}}}),  # a URL-only client
        (SAMPLE_WITH_TOOLS, None),  # no sampling.tools
        (  # toolChoice alone asks for tool use too
            {
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 5, "toolChoice": {"mode": "auto"}},
            },
            {"sampling": {}},
        ),
    ],
)
async def test_modern_undeclared_input_is_refused(
    asked: dict[str, Any], capabilities: dict[str, Any] | None, autojump_clock: MockClock
) -> None:
    ran: list[object] = []
    seen: list[dict[str, Any]] = []

    async def callback(params: Any) -> dict[str, Any]:
        ran.append(params)  # pragma: no cover - must not run
        return {"action": "accept"}  # pragma: no cover

    def on_call(message: dict[str, Any]) -> list[dict[str, Any]]:
        if "method" not in message or "inputResponses" in message["params"]:
            return [done(message.get("id"))]  # pragma: no cover - no retry comes
        result = {"resultType": "input_required", "inputRequests": {"q": asked}}
        return [{"jsonrpc": "2.0", "id": message["id"], "result": result}]

    async with raw_served_client(
        "modern",
        on_call,
        seen,
        on_elicitation=callback,
        on_sampling=callback,
        capabilities=capabilities,
    ) as client:
        # The core refuses the round (mrtr.mdx: servers MUST NOT send inputRequests the
        # client has not declared): the call fails with its local error, -32602.
        with pytest.raises(RemoteProtocolError, match="input_required refused") as info:
            await client.call_tool("t")
        assert info.value.error_code == ErrorCode.INVALID_PARAMS
        assert client.session.connection.pending_requests() == ()
    assert ran == []
    assert len([m for m in seen if m.get("method") == "tools/call"]) == 1  # no retry


async def test_modern_declared_tool_use_is_answered(autojump_clock: MockClock) -> None:
    seen: list[dict[str, Any]] = []

    async def sample(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        assert params.tools is not None
        return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}

    def on_call(message: dict[str, Any]) -> list[dict[str, Any]]:
        if "inputResponses" in message["params"]:
            return [done(message["id"])]
        result = {"resultType": "input_required", "inputRequests": {"q": SAMPLE_WITH_TOOLS}}
        return [{"jsonrpc": "2.0", "id": message["id"], "result": result}]

    async with raw_served_client(
        "modern", on_call, seen, on_sampling=sample, capabilities={"sampling": {"tools": {}}}
    ) as client:
        await client.call_tool("t")
    retry = [m for m in seen if "inputResponses" in m.get("params", {})]
    assert retry[0]["params"]["inputResponses"]["q"]["model"] == "m"


@pytest.mark.parametrize(
    ("capabilities", "answered"), [(None, False), ({"sampling": {"tools": {}}}, True)]
)
async def test_legacy_tool_use_needs_sampling_tools(
    capabilities: dict[str, Any] | None, answered: bool, autojump_clock: MockClock
) -> None:
    seen: list[dict[str, Any]] = []
    ran: list[object] = []

    async def sample(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        ran.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}

    call_id: list[Any] = []

    def on_call(message: dict[str, Any]) -> list[dict[str, Any]]:
        if "method" in message:  # tools/call: ask first
            call_id.append(message["id"])
            return [{"jsonrpc": "2.0", "id": "s1", **SAMPLE_WITH_TOOLS}]
        return [done(call_id[0])]  # the client's answer to s1: done

    async with raw_served_client(
        "legacy", on_call, seen, on_sampling=sample, capabilities=capabilities
    ) as client:
        await client.call_tool("t")
    (answer,) = [m for m in seen if m.get("id") == "s1"]
    if answered:
        assert answer["result"]["model"] == "m" and len(ran) == 1
    else:
        assert answer["error"]["code"] == -32602
        assert "sampling.tools" in answer["error"]["message"]
        assert ran == []


def test_undeclared_request_reads_the_capabilities() -> None:
    form_only: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
    params = ELICIT_URL["params"]
    assert "'url'" in (undeclared_request("elicitation/create", params, form_only) or "")
    assert undeclared_request("elicitation/create", params, {"elicitation": {"url": {}}}) is None
    # An empty elicitation object declares form mode (client/elicitation#capabilities).
    assert undeclared_request("elicitation/create", {}, {"elicitation": {}}) is None
    assert undeclared_request("elicitation/create", {"mode": 1}, form_only) is not None
    assert undeclared_request("elicitation/create", {}, {}) is not None
    tools = {"toolChoice": {"mode": "auto"}}
    assert undeclared_request("sampling/createMessage", tools, form_only) is not None
    assert undeclared_request("sampling/createMessage", tools, {"sampling": {"tools": {}}}) is None
    assert undeclared_request("sampling/createMessage", None, form_only) is None
    assert undeclared_request("sampling/createMessage", None, {}) is not None
    assert undeclared_request("roots/list", None, {}) is not None
    assert undeclared_request("roots/list", None, {"roots": {}}) is None
    assert undeclared_request("ping", None, {}) is None


# ---------------------------------------------------------------------- declarations


@pytest.mark.parametrize("missing", ["name", "version"])
async def test_client_info_needs_name_and_version(missing: str) -> None:
    info = {"name": "c", "version": "1"}
    del info[missing]
    with pytest.raises(ValueError, match=f"client_info needs a '{missing}'"):
        async with open_client(Server("s", "1"), client_info=info):
            pass  # pragma: no cover


@pytest.mark.parametrize(
    "key", ["noprefix", "1bad.x/y", "com.example-/x", "com..example/x", "com.example/-x", "/x"]
)
def test_extension_ids_need_a_valid_prefix(key: str) -> None:
    with pytest.raises(ValueError, match=f"extension id {key!r}"):
        ConnectionConfig(capabilities={"extensions": {key: {}}})


@pytest.mark.parametrize(
    "key", ["io.modelcontextprotocol/ui", "com.example/my_ext.v2", "x/y", "a-1.b2/", "com.x/7"]
)
def test_valid_extension_ids_are_taken(key: str) -> None:
    assert ConnectionConfig(capabilities={"extensions": {key: {}}}).capabilities


async def test_extension_ids_are_checked_for_clients_and_servers() -> None:
    with pytest.raises(ValueError, match="extension id 'noprefix'"):
        async with open_client(Server("s", "1"), capabilities={"extensions": {"noprefix": {}}}):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="extension id 'noprefix'"):
        Server(
            "s",
            "1",
            connection_config=ConnectionConfig(capabilities={"extensions": {"noprefix": {}}}),
        )
    with pytest.raises(ValueError, match="extensions must be an object"):
        ConnectionConfig(capabilities={"extensions": ["io.modelcontextprotocol/ui"]})

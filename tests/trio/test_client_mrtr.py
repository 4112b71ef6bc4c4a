"""Modern era: the client's multi round-trip loop (``basic/patterns/mrtr.mdx``).

The server here is a bare ``mcp_sansio.Connection`` driven by hand over an in-memory
channel (the client's ``MessageChannel`` target), so every round is under the test's
control: it answers ``input_required`` with the input requests of each round, then a
result that echoes what the client answered.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    RemoteProtocolError,
    RequestReceived,
)
from mcp_sansio import types as t
from mcp_trio import (
    InputRequiredError,
    InputRequiredResult,
    McpError,
    RequestContext,
    memory_channel_pair,
)
from mcp_trio._client import Client, open_client

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config

ELICIT = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
        "maxTokens": 5,
    },
}
ROOTS = {"method": "roots/list", "params": {}}


class ScriptedServer:
    """A modern server core that asks ``rounds[i]`` on the i-th attempt of a request."""

    def __init__(self, rounds: list[dict[str, Any]]) -> None:
        self.rounds = rounds
        self.conn = Connection(
            "server",
            ConnectionConfig(
                era="modern",
                capabilities={"tools": {}, "resources": {}, "prompts": {}},
                implementation={"name": "scripted", "version": "1"},
            ),
        )
        self.seen: list[RequestReceived] = []

    def _answer(self, event: RequestReceived) -> None:
        attempt = event.request_state or 0
        now = trio.current_time()
        if attempt < len(self.rounds):
            self.conn.send_input_required(
                event.request_id, self.rounds[attempt], state=attempt + 1, now=now
            )
            return
        echo = repr(sorted((event.input_responses or {}).items()))
        if event.method == "resources/read":
            result: dict[str, Any] = {"contents": [{"uri": "file:///x", "text": echo}]}
        elif event.method == "prompts/get":
            message = {"role": "user", "content": {"type": "text", "text": echo}}
            result = {"messages": [message]}
        else:
            result = {"content": [{"type": "text", "text": echo}]}
        self.conn.send_result(event.request_id, result)

    async def serve(self, channel: Any) -> None:
        try:
            while True:
                data = await channel.receive()
                for event in self.conn.receive_message(data, now=trio.current_time()):
                    if isinstance(event, RequestReceived):
                        self.seen.append(event)
                        self._answer(event)
                for message in self.conn.data_to_send():
                    await channel.send(message)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            pass


@asynccontextmanager
async def scripted(
    rounds: list[dict[str, Any]], **kwargs: Any
) -> AsyncGenerator[tuple[Client, ScriptedServer]]:
    server = ScriptedServer(rounds)
    client_channel, server_channel = memory_channel_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve, server_channel)
        async with open_client(client_channel, **kwargs) as client:
            yield client, server
        nursery.cancel_scope.cancel()


class Answers:
    """Callbacks that record what they were asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(
        self, params: t.ElicitRequestFormParams | t.ElicitRequestURLParams
    ) -> t.ElicitResult:
        self.asked.append(f"elicit:{params.message}")
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(self, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        self.asked.append(f"sample:{params.max_tokens}")
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text="4"), model="m")

    async def roots(self) -> list[str]:
        self.asked.append("roots")
        return ["file:///home"]


async def test_several_rounds_call_the_callbacks_and_retry(autojump_clock: MockClock) -> None:
    answers = Answers()
    rounds = [{"who": ELICIT}, {"math": SAMPLE, "where": ROOTS}]
    async with scripted(
        rounds,
        on_elicitation=answers.elicit,
        on_sampling=answers.sample,
        roots=answers.roots,
    ) as (client, server):
        result = await client.call_tool("anything", {"x": 1})
    assert answers.asked == ["elicit:Your name?", "sample:5", "roots"]
    assert [e.request_id for e in server.seen] == sorted({e.request_id for e in server.seen})
    assert len(server.seen) == 3
    first, second, third = server.seen
    assert first.input_responses is None
    assert second.input_responses == {"who": {"action": "accept", "content": {"name": "Ada"}}}
    assert third.input_responses == {
        "math": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
        "where": {"roots": [{"uri": "file:///home"}]},
    }
    assert all(e.params is not None and e.params["arguments"] == {"x": 1} for e in server.seen)
    assert third.request_state == 2
    assert "where" in result.text


async def test_read_resource_and_get_prompt_retry_too(autojump_clock: MockClock) -> None:
    answers = Answers()
    async with scripted([{"r": ROOTS}], roots=answers.roots) as (client, _server):
        read = await client.read_resource("file:///x")
        prompt = await client.get_prompt("p")
    assert answers.asked == ["roots", "roots"]
    content = read.contents[0]
    assert isinstance(content, t.TextResourceContents)
    assert "file:///home" in content.text
    assert prompt.messages[0].content == t.TextContent(text=content.text)


async def test_the_server_keeps_asking_until_the_round_limit(autojump_clock: MockClock) -> None:
    answers = Answers()
    async with scripted([{"r": ROOTS}] * 20, roots=answers.roots) as (client, _server):
        with pytest.raises(RemoteProtocolError, match="asked for input again"):
            await client.call_tool("greedy")
        # ConnectionConfig.max_input_rounds is 8: seven answered, the eighth not asked.
        assert len(answers.asked) == 7


async def test_no_capability_no_question(autojump_clock: MockClock) -> None:
    # The server's core checks the envelope: it answers -32021 instead of asking.
    async with scripted([{"who": ELICIT}]) as (client, _server):
        with pytest.raises(McpError) as info:
            await client.call_tool("anything")
        assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_capability_without_a_callback_raises(autojump_clock: MockClock) -> None:
    async with scripted([{"math": SAMPLE}], capabilities={"sampling": {}}) as (client, _server):
        with pytest.raises(InputRequiredError) as info:
            await client.call_tool("anything")
        assert list(info.value.event.input_requests) == ["math"]


async def test_a_failing_callback_fails_the_call_only(autojump_clock: MockClock) -> None:
    async def broken(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        raise RuntimeError("no model available")

    async with scripted([{"math": SAMPLE}], on_sampling=broken) as (client, server):
        with pytest.raises(RuntimeError, match="no model"):
            await client.call_tool("anything")
        with pytest.raises(RuntimeError):
            await client.call_tool("again")
    assert len(server.seen) == 2  # no retry was sent


async def test_malformed_input_request_params(autojump_clock: MockClock) -> None:
    answers = Answers()
    bad = {"method": "sampling/createMessage", "params": {"messages": "nope", "maxTokens": 5}}
    async with scripted([{"math": bad}], on_sampling=answers.sample) as (client, _server):
        with pytest.raises(RemoteProtocolError):
            await client.call_tool("anything")
    assert answers.asked == []


# ---------------------------------------------------------------------- the runtime


async def test_handlers_returning_input_required(autojump_clock: MockClock) -> None:
    handlers = make_handlers()

    async def ask(ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        if ctx.input_responses is None:
            return InputRequiredResult(input_requests={"who": ELICIT}, state="s")
        name = ctx.input_responses["who"]["content"]["name"]
        return {"content": [{"type": "text", "text": f"hello {name} ({ctx.request_state})"}]}

    handlers.set_request_handler("tools/call", ask)
    answers = Answers()
    async with open_client(
        (handlers, app_config()), era="modern", on_elicitation=answers.elicit
    ) as client:
        assert (await client.call_tool("ask")).text == "hello Ada (s)"

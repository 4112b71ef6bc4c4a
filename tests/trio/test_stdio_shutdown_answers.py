"""A scripted stdio run (``mcp-trio run app.py < requests.jsonl``) answers every request.

The end of stdin is the client's shutdown: requests still running when
``shutdown_grace_period`` ends are answered -32603 "server shutting down" (as
Streamable HTTP answers them) before they are cancelled, not left out of the transcript.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorCode, LineSplitter
from mcp_sansio._json import dumps, loads
from mcp_trio import Handlers, RequestContext, Server, SessionConfig, StreamChannel
from mcp_trio._open import open_session

from .helpers import client_config

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "script", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(rid: int, seconds: float) -> dict[str, Any]:
    params = {"name": "wait", "arguments": {"seconds": seconds}, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def test_a_request_outliving_the_grace_period_is_answered_shutting_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server("slow", session_config=SessionConfig(shutdown_grace_period=5))

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "done"

    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    script = b"".join(dumps(message) + b"\n" for message in (call(1, 2), call(2, 8)))
    await to_server.send_all(script)
    await to_server.aclose()  # the whole script, then the end of input
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: server.serve_stdio(stdin=stdin, stdout=stdout))
        splitter, answers = LineSplitter(), []
        while chunk := await from_server.receive_some():
            splitter.feed(chunk)
            while (line := splitter.next_message()) is not None:
                assert isinstance(line, bytes)
                answers.append(loads(line))
    assert trio.current_time() - start == pytest.approx(5)
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[0]["result"]["content"][0]["text"] == "done"
    assert answers[1]["error"] == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "server shutting down",
    }


async def test_a_listen_open_at_the_end_is_ended_with_its_result_not_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # 2026-07-28 schema, SubscriptionsListenResult: sent when the subscription has
    # ended gracefully, "for example, during server shutdown".
    server = Server("s", session_config=SessionConfig(shutdown_grace_period=5))

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "done"

    listen = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": ENVELOPE, "notifications": {"toolsListChanged": True}},
    }
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    script = b"".join(dumps(message) + b"\n" for message in (listen, call(2, 8)))
    await to_server.send_all(script)
    await to_server.aclose()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: server.serve_stdio(stdin=stdin, stdout=stdout))
        splitter, answers = LineSplitter(), []
        while chunk := await from_server.receive_some():
            splitter.feed(chunk)
            while (line := splitter.next_message()) is not None:
                assert isinstance(line, bytes)
                answers.append(loads(line))
    by_id = {answer["id"]: answer for answer in answers if "id" in answer}
    assert set(by_id) == {"listen-1", 2}
    assert "result" in by_id["listen-1"] and "error" not in by_id["listen-1"]
    assert by_id[2]["error"]["message"] == "server shutting down"
    # ... then the notifications/cancelled that ends its stream on stdio (cancellation.mdx:
    # a server MUST send it when it tears a subscription down), after the result.
    ends = [a for a in answers if a.get("method") == "notifications/cancelled"]
    assert [end["params"]["requestId"] for end in ends] == ["listen-1"]
    assert answers.index(ends[0]) > answers.index(by_id["listen-1"])


async def test_a_client_does_not_answer_for_a_server_shutting_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The answer is the server's to give: a client session on a half-closing channel
    whose input ends leaves the server's request it is still handling unanswered."""
    handlers = Handlers()

    @handlers.on_request("roots/list")
    async def roots(ctx: RequestContext) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    to_client, client_in = trio.testing.memory_stream_one_way_pair()
    client_out, from_client = trio.testing.memory_stream_one_way_pair()
    splitter = LineSplitter()

    async def receive() -> Any:
        while (line := splitter.next_message()) is None:
            chunk = await from_client.receive_some()
            if not chunk:
                return None
            splitter.feed(chunk)
        assert isinstance(line, bytes)
        return loads(line)

    async def send(message: dict[str, Any]) -> None:
        await to_client.send_all(dumps(message) + b"\n")

    channel = StreamChannel(client_out, client_in)
    config = SessionConfig(shutdown_grace_period=5)
    async with trio.open_nursery() as nursery:

        async def play_server() -> None:
            init = await receive()
            result = {
                "protocolVersion": init["params"]["protocolVersion"],
                "capabilities": {},
                "serverInfo": {"name": "by-hand", "version": "1"},
            }
            await send({"jsonrpc": "2.0", "id": init["id"], "result": result})
            assert (await receive())["method"] == "notifications/initialized"
            await send({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
            await trio.testing.wait_all_tasks_blocked()
            await to_client.aclose()  # the server's output ends

        nursery.start_soon(play_server)
        async with open_session(
            channel, "client", handlers=handlers, config=config, connection_config=client_config()
        ) as client:
            await client.start()
            await client.wait_closed()
    assert await receive() is None  # nothing after the handshake: no answer to id 7

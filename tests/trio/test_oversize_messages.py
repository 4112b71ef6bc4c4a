"""A message over ``max_message_size`` ends only the request it answers (or asks), on every
transport: its id is read from its first bytes, so nothing waits forever for it and the
session goes on. And a modern HTTP client never dies of the core's replies to a server's
mistakes (the modern era has no way to carry them)."""

from __future__ import annotations

from typing import Any

import h11
import pytest
import trio

from mcp_sansio import ConnectionConfig, ErrorCode
from mcp_sansio._json import dumps
from mcp_trio import Handlers, McpError, RequestContext, open_memory_pair
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    call,
    client_connection_config,
    fake_server_url,
    read_request,
    respond,
    start_server,
    text_of,
)

LIMIT = 20_000


def _echo_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def echo(ctx: RequestContext) -> dict[str, Any]:
        text = (ctx.params or {})["arguments"]["text"]
        return {"content": [{"type": "text", "text": text}]}

    return handlers


def _small(era: str, max_message_size: int) -> ConnectionConfig:
    return ConnectionConfig(
        implementation={"name": "t", "version": "1"},
        capabilities={"tools": {}},
        max_message_size=max_message_size,
        era=era,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("side", ["answer", "request"])
async def test_in_memory_an_oversize_message_fails_its_request_only(era: str, side: str) -> None:
    big = {"text": "x" * (LIMIT + 1)}
    small, large = LIMIT, 10 * LIMIT  # the side that refuses, the side that does not
    async with open_memory_pair(
        server_handlers=_echo_handlers(),
        server_connection_config=_small("auto", small if side == "request" else large),
        client_connection_config=_small(era, small if side == "answer" else large),
    ) as (client, _server):
        with trio.fail_after(IO_TIMEOUT), pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "echo", "arguments": big})
        expected = ErrorCode.INTERNAL_ERROR if side == "answer" else ErrorCode.INVALID_REQUEST
        assert info.value.code == expected
        assert "too large" in info.value.message
        with trio.fail_after(IO_TIMEOUT):
            result = await client.request(
                "tools/call", {"name": "echo", "arguments": {"text": "ok"}}
            )
        assert result["content"][0]["text"] == "ok"
        assert client.statistics().waiting_requests == 0


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_over_http_an_oversize_answer_fails_its_request_only(
    nursery: trio.Nursery, era: str, mode: str
) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era, max_message_size=LIMIT)
        ) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("echo", text="x" * (LIMIT + 1)))
            assert info.value.code == ErrorCode.INTERNAL_ERROR
            assert "too large" in info.value.message
            assert text_of(await client.request("tools/call", call("echo", text="ok"))) == "ok"


# -- a modern server that sends what it should not ------------------------------------------

_DISCOVER = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "rude", "version": "0"}},
}


async def _discovered(conn: h11.Connection, stream: trio.SocketStream, message: Any) -> bool:
    """Answer ``message`` if it is ``server/discover``; whether it was."""
    if message["method"] != "server/discover":
        return False
    answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": _DISCOVER})
    await respond(conn, stream, answer, headers=(("content-type", "application/json"),))
    return True


async def _next_message(conn: h11.Connection, stream: trio.SocketStream) -> Any:
    """The next request's JSON body, or ``None`` once the client has gone."""
    found = await read_request(conn, stream)
    return None if found is None else found[1]


async def _rude_server(stream: trio.SocketStream) -> None:
    """Answers ``server/discover``; answers anything else on an SSE stream that first
    carries a request (modern servers send none) and then the answer."""
    conn = h11.Connection(h11.SERVER)
    while (message := await _next_message(conn, stream)) is not None:
        if not await _discovered(conn, stream, message):
            answer = {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"}
            rude = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
            events = (rude, {"jsonrpc": "2.0", "id": message["id"], "result": answer})
            payload = b"".join(b"data: " + dumps(m) + b"\n\n" for m in events)
            await respond(conn, stream, payload, headers=(("content-type", "text/event-stream"),))
        conn.start_next_cycle()


async def test_a_modern_client_survives_a_request_from_the_server(nursery: trio.Nursery) -> None:
    url = await fake_server_url(nursery, _rude_server)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            url, connection_config=client_connection_config("modern")
        ) as client:
            for _ in range(2):  # (the first one used to end the session)
                assert text_of(await client.request("tools/call", call("x"))) == "hi"


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("idle", [0, 4])  # 0: every request on a new connection
async def test_over_http_a_body_the_server_refuses_fails_its_request_only(
    nursery: trio.Nursery, era: str, idle: int
) -> None:
    # The server answers 413 while the client is still writing, and reads (and drops)
    # the rest before it closes, so the client gets the answer, not a reset: that one
    # request fails with the server's error, and the session goes on.
    server = await start_server(nursery, http={"max_body_size": 50_000})
    transport = HttpTransportConfig(max_idle_connections=idle)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era), transport=transport
        ) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("echo", text="x" * 3_000_000))
            assert info.value.code == ErrorCode.INVALID_REQUEST
            assert info.value.message.startswith("Content Too Large")
            assert text_of(await client.request("tools/call", call("echo", text="ok"))) == "ok"


async def test_over_http_a_notification_the_server_refuses_is_lost_alone(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    server = await start_server(nursery, http={"max_body_size": 50_000})
    transport = HttpTransportConfig(max_idle_connections=0)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy"), transport=transport
        ) as client:
            await client.notify("notifications/roots/list_changed", {"pad": "x" * 3_000_000})
            assert text_of(await client.request("tools/call", call("echo", text="ok"))) == "ok"
    assert "a one-way message was refused: status 413" in caplog.text


async def _vanishing_server(stream: trio.SocketStream) -> None:
    """Answers server/discover, then reads a request and closes without a word."""
    conn = h11.Connection(h11.SERVER)
    message = await _next_message(conn, stream)
    if message is not None:
        await _discovered(conn, stream, message)
    await stream.aclose()


async def test_a_server_that_vanishes_before_answering_is_said_so_plainly(
    nursery: trio.Nursery,
) -> None:
    url = await fake_server_url(nursery, _vanishing_server)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            url, connection_config=client_connection_config("modern")
        ) as client:
            with pytest.raises(McpError, match="closed the connection before it answered"):
                await client.request("tools/call", call("x"))

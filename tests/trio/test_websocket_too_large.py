"""A message over ``SessionConfig.ws_max_message_size`` costs only what it belongs to
over WebSocket, as over every other transport: the sender never writes it (the peer
would close the connection with 1009, ending every call). Real sockets on 127.0.0.1,
both eras, a small bound on both ends."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio
import trio_websocket

from mcp_sansio import ProgressReceived
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    Client,
    Context,
    McpError,
    Server,
    SessionConfig,
    ToolError,
    memory_channel_pair,
    open_client,
)
from mcp_trio._websocket import _open_ws

from .helpers import RawPeer, handshaken

IO_TIMEOUT = 10
LIMIT = 64 * 1024
CONFIG = SessionConfig(ws_max_message_size=LIMIT)
SETTING = "SessionConfig.ws_max_message_size"


def _server() -> tuple[Server, list[int]]:
    server = Server("big", session_config=CONFIG)
    calls: list[int] = []

    @server.tool()
    async def echo_len(text: str) -> int:
        """Length of the text."""
        calls.append(len(text))
        return len(text)

    @server.tool()
    async def big_result(n: int, char: str = "x") -> str:
        """A long string."""
        return char * n

    @server.tool()
    async def big_log(n: int, ctx: Context) -> str:
        """Logs a long message and a short one, then answers whether each was sent."""
        big = await ctx.log("info", "y" * n)
        small = await ctx.log("info", "small")
        return f"logged {big} {small}"

    @server.tool()
    async def big_progress(n: int, ctx: Context) -> str:
        """Reports progress with a long message, then a short one: whether each was sent."""
        big = await ctx.report_progress(1, 2, "p" * n)
        small = await ctx.report_progress(2, 2, "done")
        return f"reported {big} {small}"

    @server.tool()
    async def roots(ctx: Context) -> str:
        """How many roots the client has, or why that cannot be known."""
        try:
            return str(len(await ctx.list_roots()))
        except McpError as exc:
            raise ToolError(f"{exc.error.code} {exc.error.message} {exc.error.data}") from None

    @server.tool()
    async def big_error(n: int) -> str:
        """Fails with an error whose data is ``n`` characters long."""
        raise McpError.from_code(-32000, "declined", "z" * n)

    @server.tool()
    async def ping2() -> str:
        """ok"""
        return "pong"

    return server, calls


@asynccontextmanager
async def _serving() -> AsyncIterator[tuple[str, list[int]]]:
    server, calls = _server()
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(functools.partial(server.serve_websocket, "127.0.0.1", 0))
        yield handle.url, calls
        nursery.cancel_scope.cancel()


async def _still_works(client: Client) -> None:
    assert (await client.call_tool("ping2", {})).text == "pong"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_argument_too_large_raises_at_once_and_nothing_is_sent(
    era: Literal["legacy", "modern"],
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with _serving() as (url, calls), open_client(url, era=era, config=CONFIG) as client:
            with pytest.raises(ValueError, match=SETTING) as info:
                await client.call_tool("echo_len", {"text": "y" * LIMIT})
            assert f"({LIMIT})" in str(info.value)
            assert "nothing was sent" in str(info.value)
            await _still_works(client)
            assert calls == []  # (the tool never ran)
            # just under the bound, it goes (the message is the text plus its envelope)
            assert (await client.call_tool("echo_len", {"text": "y" * (LIMIT - 400)})).text
            assert calls == [LIMIT - 400]
            assert client.session.statistics().waiting_requests == 0


async def test_a_request_too_large_is_forgotten_without_a_cancellation() -> None:
    # The peer never saw its id: the core forgets it with no notifications/cancelled
    # (cancellation.mdx: a cancellation references a request previously issued), and it
    # holds no place among our requests in flight. (A memory channel bounded as a
    # WebSocket is, so that what goes out can be seen.)
    ours, theirs = memory_channel_pair()
    ours.send_bound = lambda: (LIMIT, SETTING)  # type: ignore[method-assign]
    peer = RawPeer(theirs, None)
    big = {"name": "echo_len", "arguments": {"text": "y" * LIMIT}}
    with trio.fail_after(IO_TIMEOUT):
        async with handshaken(ours, peer, "client") as session:
            with pytest.raises(ValueError, match=SETTING):
                await session.request("tools/call", big)
            assert session.connection.pending_requests() == ()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.request, "ping")
                sent = await peer.receive()  # (the next message out is the ping)
                assert sent["method"] == "ping"
                await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {}})


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_result_too_large_fails_its_call_alone(era: Literal["legacy", "modern"]) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with _serving() as (url, _), open_client(url, era=era, config=CONFIG) as client:
            with pytest.raises(McpError) as info:
                await client.call_tool("big_result", {"n": LIMIT})
            error = info.value.error
            assert error.code == -32603
            assert error.message.startswith("the result is too large for the transport: ")
            assert f"over {SETTING} ({LIMIT})" in error.message
            assert error.data == {"maxMessageSize": LIMIT}
            await _still_works(client)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_error_too_large_fails_its_call_alone(era: Literal["legacy", "modern"]) -> None:
    # A handler's own error over the bound is replaced as a result would be: the peer
    # gets -32603 with the core's data for a message too large, not the frame over it.
    with trio.fail_after(IO_TIMEOUT):
        async with _serving() as (url, _), open_client(url, era=era, config=CONFIG) as client:
            with pytest.raises(McpError) as info:
                await client.call_tool("big_error", {"n": LIMIT})
            error = info.value.error
            assert error.code == -32603
            assert error.message.startswith("the error is too large for the transport: ")
            assert f"over {SETTING} ({LIMIT})" in error.message
            assert error.data == {"maxMessageSize": LIMIT}
            # just under the bound, the handler's own error goes through as it is
            with pytest.raises(McpError) as info:
                await client.call_tool("big_error", {"n": LIMIT - 400})
            assert info.value.error.code == -32000
            assert info.value.error.data == "z" * (LIMIT - 400)
            await _still_works(client)


async def test_the_bound_counts_characters_as_the_receiver_does() -> None:
    # 3 bytes each in UTF-8, 1 character each for trio-websocket: the result is about
    # twice as many bytes as the bound, and it fits.
    with trio.fail_after(IO_TIMEOUT):
        async with _serving() as (url, _), open_client(url, config=CONFIG) as client:
            n = (LIMIT - 1000) // 2  # (the text goes out twice: content, structuredContent)
            result = await client.call_tool("big_result", {"n": n, "char": "€"})
            assert result.text == "€" * n
            with pytest.raises(ValueError, match=SETTING):
                await client.call_tool("echo_len", {"text": "€" * LIMIT})
            await _still_works(client)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_log_message_too_large_is_dropped_with_a_warning(
    era: Literal["legacy", "modern"], caplog: pytest.LogCaptureFixture
) -> None:
    logged: list[Any] = []

    async def on_log(message: Any) -> None:
        logged.append(message.data)

    with trio.fail_after(IO_TIMEOUT):
        async with (
            _serving() as (url, _),
            open_client(url, era=era, config=CONFIG, on_log=on_log, log_level="info") as client,
        ):
            with caplog.at_level(logging.WARNING, logger="mcp_trio"):
                # (ctx.log says the large one was not sent)
                result = await client.call_tool("big_log", {"n": LIMIT})
                assert result.text == "logged False True"
            assert logged == ["small"]
            warned = [r.getMessage() for r in caplog.records if "was not sent" in r.getMessage()]
            assert len(warned) == 1
            assert warned[0].startswith("a notifications/message notification was not sent")
            assert f"over {SETTING} ({LIMIT})" in warned[0]
            await _still_works(client)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_progress_report_too_large_is_dropped_and_says_so(
    era: Literal["legacy", "modern"],
) -> None:
    messages: list[str | None] = []

    async def on_progress(event: ProgressReceived) -> None:
        messages.append(event.message)

    with trio.fail_after(IO_TIMEOUT):
        async with (
            _serving() as (url, _),
            open_client(url, era=era, config=CONFIG) as client,
        ):
            result = await client.call_tool("big_progress", {"n": LIMIT}, on_progress=on_progress)
            assert result.text == "reported False True"
            assert messages == ["done"]
            await _still_works(client)


async def test_a_client_answer_too_large_fails_the_server_request_alone() -> None:
    many = [f"file:///r/{i:06d}/{'d' * 40}" for i in range(LIMIT // 40)]
    with trio.fail_after(IO_TIMEOUT):
        async with (
            _serving() as (url, _),
            open_client(url, era="legacy", config=CONFIG, roots=many) as client,
        ):
            result = await client.call_tool("roots", {})
            assert result.is_error
            assert result.text.startswith("-32603 the result is too large for the transport")
            assert f"{{'maxMessageSize': {LIMIT}}}" in result.text
            await client.set_roots(many[:3])
            assert (await client.call_tool("roots", {})).text == "3"


def _call(rid: Any, n: int) -> dict[str, Any]:
    params = {"name": "big_result", "arguments": {"n": n}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


@asynccontextmanager
async def _raw_2025_03_26() -> AsyncIterator[trio_websocket.WebSocketConnection]:
    """A bounded peer of ours, by hand, in a 2025-03-26 session (batches allowed)."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    async with (
        _serving() as (url, _),
        _open_ws(url, subprotocols=["mcp"], max_message_size=LIMIT, connect_timeout=IO_TIMEOUT) as (
            ws,
            _,
            _,
        ),
    ):
        await ws.send_message(dumps(init).decode())
        assert "result" in loads(await ws.get_message())
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await ws.send_message(dumps(initialized).decode())
        yield ws


async def _answers(ws: trio_websocket.WebSocketConnection, count: int) -> dict[Any, Any]:
    """``count`` answers, by id, from as many arrays as they come in (each in the bound)."""
    answers: dict[Any, Any] = {}
    while len(answers) < count:
        message = await ws.get_message()
        assert len(message) <= LIMIT
        for answer in loads(message):
            answers[answer["id"]] = answer
    assert len(answers) == count
    return answers


async def test_a_batch_of_answers_too_large_together_goes_out_in_arrays_within_the_bound() -> None:
    # (2025-03-26 batches: the answers to a batch go out as one message, unless that is
    # over the bound: then in as many arrays as it takes, each answer whole)
    with trio.fail_after(IO_TIMEOUT):
        async with _raw_2025_03_26() as ws:
            await ws.send_message(dumps([_call(1, LIMIT // 2), _call(2, LIMIT // 2)]).decode())
            answers = await _answers(ws, 2)
            for answer in answers.values():
                assert answer["result"]["content"][0]["text"] == "x" * (LIMIT // 2)
            # 500 small answers, ~88,000 characters together: their errors were more still
            await ws.send_message(dumps([_call(i, 100) for i in range(3, 503)]).decode())
            answers = await _answers(ws, 500)
            assert all(a["result"]["content"][0]["text"] == "x" * 100 for a in answers.values())
            # an answer too large alone is its error; the connection goes on
            await ws.send_message(dumps([_call(503, 2 * LIMIT), _call(504, 10)]).decode())
            answers = await _answers(ws, 2)
            assert answers[503]["error"]["code"] == -32603
            assert answers[503]["error"]["data"] == {"maxMessageSize": LIMIT}
            assert answers[504]["result"]["content"][0]["text"] == "x" * 10


async def test_an_answer_whose_error_is_too_large_too_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An id as long as the bound: even the -32603 that replaces its answer is over it, and
    # a frame over the bound would end the connection for every other call.
    with trio.fail_after(IO_TIMEOUT):
        async with _raw_2025_03_26() as ws:
            await ws.send_message(dumps(_call("i" * (LIMIT - 150), 300)).decode())
            await ws.send_message(dumps(_call(2, 10)).decode())
            answer = loads(await ws.get_message())
            assert answer["id"] == 2 and "result" in answer
    assert any("and so is its error" in r.getMessage() for r in caplog.records)

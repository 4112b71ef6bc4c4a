"""A WebSocket server's graceful stop (``WebSocketServeHandle.aclose``, what ``mcp-trio
run`` does on Ctrl-C), as Streamable HTTP's: stop listening, give running handlers
``shutdown_grace_period``, answer the requests left -32603 "server shutting down", close
each connection with code 1001 (going away). Real sockets on 127.0.0.1 (port 0), trio's
autojump clock."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket

from mcp_trio import (
    McpError,
    Server,
    SessionClosed,
    SessionConfig,
    WebSocketServeHandle,
    open_client,
    open_websocket_client,
)
from mcp_trio._websocket import _serve_connection

from .test_websocket import raw
from .websocket_support import handshake_request

IO_TIMEOUT = 60  # (trio time: the autojump clock runs the grace periods)
CONFIG = SessionConfig(shutdown_grace_period=5, close_timeout=2, abandon_write_timeout=1)


class App:
    def __init__(self) -> None:
        self.server = Server("slow", session_config=CONFIG)
        self.started = trio.Event()
        self.finished: list[float] = []
        self.cancelled: list[float] = []
        self.first_cancelled = trio.Event()

        @self.server.tool()
        async def wait(seconds: float) -> str:
            """Sleeps ``seconds``."""
            self.started.set()
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                self.cancelled.append(seconds)
                self.first_cancelled.set()
                raise
            self.finished.append(seconds)
            return "done"


async def _start(nursery: trio.Nursery, app: App) -> WebSocketServeHandle:
    handle = await nursery.start(app.server.serve_websocket)
    assert isinstance(handle, WebSocketServeHandle)
    return handle


async def _call_then_stop(
    app: App, handle: WebSocketServeHandle, seconds: float
) -> tuple[dict[str, Any] | McpError, str, float]:
    """Call ``wait(seconds)``, stop the server once the tool runs: what the call got,
    the client session's close reason, and how long ``aclose`` took."""
    outcome: list[dict[str, Any] | McpError] = []
    took: list[float] = []
    async with open_websocket_client(handle.url) as session:

        async def call() -> None:
            try:
                params = {"name": "wait", "arguments": {"seconds": seconds}}
                outcome.append(await session.request("tools/call", params))
            except McpError as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await app.started.wait()
            start = trio.current_time()
            await handle.aclose()
            took.append(trio.current_time() - start)
        await session.wait_closed()
        assert session.close_reason is not None
        reason = session.close_reason.reason
    return outcome[0], reason, took[0]


async def test_a_call_in_flight_finishes_within_the_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            outcome, reason, took = await _call_then_stop(app, handle, 3)
            # serve_websocket returned: the nursery ends on its own
    assert isinstance(outcome, dict) and outcome["content"][0]["text"] == "done"
    assert app.finished == [3] and app.cancelled == []
    assert "code 1001" in reason and "server shutting down" in reason
    assert 3 <= took < 4  # (no need to wait for the whole grace period)


async def test_a_call_past_the_grace_period_is_answered_shutting_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            outcome, reason, took = await _call_then_stop(app, handle, 30)
    assert isinstance(outcome, McpError)
    assert (outcome.error.code, outcome.error.message) == (-32603, "server shutting down")
    assert app.cancelled == [30] and app.finished == []
    assert "code 1001" in reason
    assert CONFIG.shutdown_grace_period <= took < CONFIG.shutdown_grace_period + 1


async def test_a_call_made_during_the_stop_is_answered_shutting_down_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # As Streamable HTTP answers 503 from the start of its stop: a new request is not
    # started (no work cut off after the grace period, no side effects), and the stop
    # waits only for the call that was running.
    app = App()
    late: list[McpError] = []
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            async with (
                open_websocket_client(handle.url) as session,
                trio.open_nursery() as calls,
            ):

                async def call(seconds: float) -> None:
                    params = {"name": "wait", "arguments": {"seconds": seconds}}
                    await session.request("tools/call", params)

                async def stop() -> None:
                    await handle.aclose()
                    stopped.append(trio.current_time())

                stopped: list[float] = []
                calls.start_soon(call, 3)
                await app.started.wait()
                start = trio.current_time()
                calls.start_soon(stop)
                await trio.sleep(1)  # (the stop is under way)
                with pytest.raises(McpError) as caught:
                    await call(30)
                late.append(caught.value)
                assert trio.current_time() - start == pytest.approx(1)  # at once
    assert (late[0].error.code, late[0].error.message) == (-32603, "server shutting down")
    assert app.finished == [3] and app.cancelled == []  # the late call never ran
    assert 3 <= stopped[0] - start < 4


async def test_a_client_that_disconnects_has_its_calls_cancelled_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A WebSocket has no half-close: once the client is gone no answer can reach it,
    # so its handlers are cancelled (as Streamable HTTP treats a client disconnect,
    # 2026-07-28 basic/patterns/cancellation.mdx), not run for the grace period.
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            async with open_websocket_client(handle.url) as session:

                async def call() -> None:
                    params = {"name": "wait", "arguments": {"seconds": 30}}
                    with pytest.raises(SessionClosed):
                        await session.request("tools/call", params)

                nursery.start_soon(call)
                await app.started.wait()
                start = trio.current_time()
            await app.first_cancelled.wait()
            assert trio.current_time() - start < 0.1
            await handle.aclose()
    assert app.cancelled == [30] and app.finished == []


async def test_stopping_closes_idle_sessions_and_the_listeners_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            url = handle.url
            async with open_websocket_client(url) as session:
                start = trio.current_time()
                await handle.aclose()
                assert trio.current_time() - start < 1  # nothing to wait for
                await session.wait_closed()
                assert session.close_reason is not None
                assert "code 1001" in session.close_reason.reason
            await handle.aclose()  # idempotent
    with pytest.raises(SessionClosed, match="could not connect"):
        async with open_client(url):
            pass


async def test_what_is_left_when_the_stop_s_time_is_up_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A connection that never finishes its handshake would get ws_connect_timeout
    # (10 s): the stop cancels it once its own bound is over.
    app = App()
    bound = CONFIG.shutdown_grace_period + CONFIG.abandon_write_timeout + CONFIG.close_timeout
    assert bound < CONFIG.ws_connect_timeout
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            silent = await trio.open_tcp_stream("127.0.0.1", handle.port)
            await silent.send_all(b"GET /mcp HTTP/1.1\r\n")
            async with open_websocket_client(handle.url):
                pass  # (accepted after the silent one: that one was accepted too)
            start = trio.current_time()
            await handle.aclose()
            took = trio.current_time() - start
            assert await silent.receive_some() == b""  # closed, no answer
            await silent.aclose()
    assert bound <= took < bound + 0.5


async def test_a_handshake_that_completes_during_the_stop_is_refused_503() -> None:
    stopping = trio.Event()
    stopping.set()
    server_end, client_end = trio.testing.memory_stream_pair()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(
                    _serve_connection,
                    server_end,
                    App().server.handlers(),
                    CONFIG,
                    None,
                    None,
                    stopping=stopping,
                )
            )
            await client_end.send_all(handshake_request("127.0.0.1:9"))
            answer = b""
            while b"shutting down" not in answer:
                chunk = await client_end.receive_some()
                assert chunk, answer
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 503")
    assert b'"code":-32603' in answer.replace(b" ", b"")


SLOW_APP = """
import trio
import mcp_trio

server = mcp_trio.Server("slow")


@server.tool()
async def wait(ctx: mcp_trio.Context) -> str:
    await ctx.report_progress(0, 1)  # (the test's cue to stop the server)
    await trio.sleep(0.5)
    return "done"
"""


async def test_ctrl_c_on_mcp_trio_run_ws_lets_the_call_finish(tmp_path: Path) -> None:
    app = tmp_path / "slow.py"
    app.write_text(SLOW_APP)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "mcp_trio", "run", str(app), "--transport", "ws", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(30):
            assert process.stderr is not None
            seen = b""
            while b"/mcp" not in seen:
                chunk = await process.stderr.receive_some()
                assert chunk, seen
                seen += chunk
            url = seen.split(b" at ", 1)[1].split(b" ", 1)[0].decode()
            progressed = trio.Event()

            async def on_progress(*_: Any) -> None:
                progressed.set()

            async with open_client(url) as client, trio.open_nursery() as nursery:

                async def stop() -> None:
                    await progressed.wait()
                    process.send_signal(signal.SIGINT)

                nursery.start_soon(stop)
                result = await client.call_tool("wait", {}, on_progress=on_progress)
                assert result.text == "done"
            assert await process.wait() == 0
    finally:
        process.kill()
        await process.wait()


async def test_an_open_listen_ends_with_its_result_not_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # 2026-07-28 subscriptions.mdx: a server shutting down SHOULD end a listen with its
    # result (stdio's end of input and HTTP's close do; the graceful stop answered -32603).
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "script", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listen = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {"_meta": envelope, "notifications": {"toolsListChanged": True}},
    }
    app = App()
    received: list[dict[str, Any]] = []
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await _start(nursery, app)
            async with raw(handle.url) as ws:
                await ws.send_message(json.dumps(listen))
                received.append(json.loads(await ws.get_message()))  # (the acknowledgment)
                nursery.start_soon(handle.aclose)
                with pytest.raises(trio_websocket.ConnectionClosed):
                    while True:
                        received.append(json.loads(await ws.get_message()))
    answers = [message for message in received if message.get("id") == "listen-1"]
    assert len(answers) == 1 and "result" in answers[0] and "error" not in answers[0]

"""The stdio transport: a real subprocess for the client, memory streams for the server.

Subprocess tests use the real clock with an absolute ``fail_after``; the waits of the
shutdown sequence are made small through ``SessionConfig``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorCode, LineSplitter
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    Handlers,
    ProcessChannel,
    RequestContext,
    ServerExited,
    Session,
    SessionClosed,
    SessionConfig,
    open_stdio_client,
    serve_stdio,
)

from .helpers import client_config, server_config

APP = str(Path(__file__).with_name("stdio_server_app.py"))
IO_TIMEOUT = 20  # seconds, absolute, for anything that involves a real process
FAST = SessionConfig(stdin_close_timeout=0.5, terminate_timeout=0.5, exit_status_timeout=2)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def command(mode: str = "normal") -> list[str]:
    return [sys.executable, APP, mode]


def process_of(session: Session) -> trio.Process:
    channel = session.channel
    assert isinstance(channel, ProcessChannel)
    return channel.process


# ---------------------------------------------------------------------- client


async def test_handshake_request_and_clean_shutdown() -> None:
    chunks: list[bytes] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            command(), stderr=chunks.append, config=FAST, connection_config=client_config()
        ) as session:
            assert session.handshake is not None
            assert session.handshake.peer_info == {"name": "stdio-test-server", "version": "1"}
            for text in ("one", "two"):
                result = await session.request(
                    "tools/call", {"name": "echo", "arguments": {"text": text}}
                )
                assert result["content"][0]["text"] == text
            process = process_of(session)
        assert process.returncode == 0  # exited on its own when its stdin closed
    stderr = b"".join(chunks)
    assert b"a stray print() must not reach the protocol stream" in stderr


async def test_server_crash_fails_pending_requests_with_status_and_stderr() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            command(), config=FAST, connection_config=client_config()
        ) as session:
            with pytest.raises(ServerExited) as info:
                await session.request("tools/call", {"name": "crash", "arguments": {}})
            assert info.value.returncode == 3
            assert b"fatal: the server broke" in info.value.stderr_tail
            assert "exit status 3" in str(info.value)
            assert "fatal: the server broke" in str(info.value)
            # every later call fails with the same kind of error
            with pytest.raises(ServerExited):
                await session.request("tools/call", {"name": "echo", "arguments": {"text": ""}})
            assert isinstance(info.value, SessionClosed)
            assert b"fatal" in session.channel.stderr_tail()  # type: ignore[attr-defined]


async def test_server_that_exits_at_once_fails_the_handshake() -> None:
    with trio.fail_after(IO_TIMEOUT), pytest.raises(ServerExited) as info:
        async with open_stdio_client(command("exit-at-once"), config=FAST):
            raise AssertionError("unreachable")
    assert info.value.returncode == 5
    assert b"cannot start" in info.value.stderr_tail


async def test_server_ignoring_stdin_close_gets_sigterm() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            command("ignore-stdin-close"), config=FAST, connection_config=client_config()
        ) as session:
            process = process_of(session)
            start = trio.current_time()
        assert process.returncode == -signal.SIGTERM
        assert trio.current_time() - start >= FAST.stdin_close_timeout


async def test_server_ignoring_sigterm_gets_sigkill() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with open_stdio_client(
            command("ignore-sigterm"), config=FAST, connection_config=client_config()
        ) as session:
            process = process_of(session)
            start = trio.current_time()
        assert process.returncode == -signal.SIGKILL
        elapsed = trio.current_time() - start
        assert elapsed >= FAST.stdin_close_timeout + FAST.terminate_timeout


async def test_cancelled_block_still_shuts_the_server_down() -> None:
    with trio.fail_after(IO_TIMEOUT):
        with trio.CancelScope() as scope:
            async with open_stdio_client(
                command("ignore-stdin-close"), config=FAST, connection_config=client_config()
            ) as session:
                process = process_of(session)
                scope.cancel()
                await trio.sleep_forever()
        assert process.returncode == -signal.SIGTERM


async def test_stderr_tail_is_bounded() -> None:
    config = SessionConfig(
        stderr_tail_size=8, stdin_close_timeout=0.5, terminate_timeout=0.5, exit_status_timeout=2
    )
    with trio.fail_after(IO_TIMEOUT), pytest.raises(ServerExited) as info:
        async with open_stdio_client(command("exit-at-once"), config=config):
            raise AssertionError("unreachable")
    assert info.value.stderr_tail == b"guration\n"[-8:]


# ---------------------------------------------------------------------- server


class _Pipe:
    """Both ends of an in-process stdio conversation, NDJSON on memory streams."""

    def __init__(self) -> None:
        self.to_server, self.server_stdin = trio.testing.memory_stream_one_way_pair()
        self.server_stdout, self.from_server = trio.testing.memory_stream_one_way_pair()
        self.splitter = LineSplitter()

    async def send(self, obj: Any) -> None:
        await self.to_server.send_all(dumps(obj) + b"\n")

    async def receive(self) -> Any:
        while (line := self.splitter.next_message()) is None:
            chunk = await self.from_server.receive_some()
            assert chunk, "the server closed its output"
            self.splitter.feed(chunk)
        assert isinstance(line, bytes)
        return loads(line)


def _initialize(rid: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def _sleeping_handlers() -> Handlers:
    """``tools/call`` sleeps ``params["seconds"]``, then answers."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def work(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        await trio.sleep(ctx.params["seconds"])
        return {"content": []}

    return handlers


async def _serve_on(
    nursery: trio.Nursery,
    pipe: _Pipe,
    handlers: Handlers,
    config: SessionConfig,
    *,
    version: str = "2025-06-18",
    capabilities: dict[str, Any] | None = None,
    stdout: trio.abc.SendStream | None = None,
    initialized: bool = True,
) -> Session:
    """``serve_stdio`` on ``pipe``, and a client's ``initialize`` (and, unless told
    otherwise, ``notifications/initialized``) written by hand."""
    session: Session = await nursery.start(
        lambda task_status: serve_stdio(
            handlers,
            config=config,
            connection_config=server_config(),
            stdin=pipe.server_stdin,
            stdout=stdout or pipe.server_stdout,
            task_status=task_status,
        )
    )
    init = _initialize(1)
    init["params"]["protocolVersion"] = version
    init["params"]["capabilities"] = capabilities or {}
    await pipe.send(init)
    await pipe.receive()
    if initialized:
        await pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


async def test_serve_stdio_on_streams_until_end_of_input(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def slow(ctx: RequestContext) -> dict[str, Any]:
        await trio.sleep(1000)
        return {}

    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        session = await nursery.start(
            lambda task_status: serve_stdio(
                handlers,
                config=SessionConfig(shutdown_grace_period=3),
                connection_config=server_config(max_message_size=1000),
                stdin=pipe.server_stdin,
                stdout=pipe.server_stdout,
                task_status=task_status,
            )
        )
        assert isinstance(session, Session)
        await pipe.send(_initialize(1))
        reply = await pipe.receive()
        assert reply["result"]["protocolVersion"] == "2025-06-18"
        await pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # an oversize line is answered -32600 and the stream goes on
        await pipe.to_server.send_all(b'{"x": "' + b"a" * 2000 + b'"}\n')
        assert (await pipe.receive())["error"]["code"] == ErrorCode.INVALID_REQUEST
        await pipe.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await pipe.send(
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}
        )
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        await pipe.to_server.aclose()  # end of input
    # serve_stdio returned: the handler was cancelled after the grace period
    assert trio.current_time() - start == pytest.approx(3)
    assert session.closed


async def test_serve_stdio_needs_both_streams() -> None:
    with pytest.raises(ValueError, match="both"):
        await serve_stdio(stdin=trio.testing.memory_stream_one_way_pair()[1])


async def test_request_cancelled_in_the_same_read_never_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: list[int] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def record(ctx: RequestContext) -> dict[str, Any]:
        started.append(1)
        return {}

    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_stdio(
                handlers,
                connection_config=server_config(),
                stdin=pipe.server_stdin,
                stdout=pipe.server_stdout,
                task_status=task_status,
            )
        )
        await pipe.send(_initialize(1))
        await pipe.receive()
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await pipe.to_server.send_all(
            b"".join(dumps(m) + b"\n" for m in (initialized, call, cancel))
        )
        await pipe.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}
        assert started == []
        await pipe.to_server.aclose()


async def test_a_failing_session_hook_closes_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def hook(session: Session) -> None:
        raise RuntimeError("hook bug")

    pipe = _Pipe()
    with trio.fail_after(IO_TIMEOUT):
        await serve_stdio(
            connection_config=server_config(),
            on_session=hook,
            stdin=pipe.server_stdin,
            stdout=pipe.server_stdout,
        )
    assert "hook bug" in caplog.text


async def test_end_of_stdin_still_answers_the_requests_in_flight(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The client's shutdown (stdin closed) is a half-close: handlers that finish
    within the grace period are answered, with their progress and log messages, and
    what outlives it is cancelled."""
    asked: list[BaseException] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def work(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        await trio.sleep(ctx.params["seconds"])
        if ctx.params.get("ask"):
            try:
                await ctx.send_request("roots/list")
            except SessionClosed as exc:  # nothing could answer it now
                asked.append(exc)
        await ctx.report_progress(1)
        await ctx.log("info", "finishing")
        return {"content": [{"type": "text", "text": "done"}]}

    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        config = SessionConfig(shutdown_grace_period=5)
        session = await _serve_on(nursery, pipe, handlers, config, capabilities={"roots": {}})
        for rid, seconds in ((2, 2), (3, 1000)):
            params = {"name": "x", "seconds": seconds, "ask": True, "_meta": {"progressToken": rid}}
            await pipe.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        await pipe.to_server.aclose()  # end of input
        received = [await pipe.receive() for _ in range(3)]
        assert [m.get("method", m.get("id")) for m in received] == [
            "notifications/progress",
            "notifications/message",
            2,
        ]
        assert received[2]["result"]["content"][0]["text"] == "done"
        assert len(asked) == 1
        # id 3 outlived the grace period: answered as Streamable HTTP does, then cancelled
        assert await pipe.receive() == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": ErrorCode.INTERNAL_ERROR, "message": "server shutting down"},
        }
    assert trio.current_time() - start == pytest.approx(5)  # id 3 was cancelled
    assert session.connection.inflight_requests() == ()  # the core gave up on it too
    assert await pipe.from_server.receive_some() == b""  # and nothing more was written


async def test_end_of_stdin_sends_the_answers_of_a_batch_cut_short(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """2025-03-26: a batch whose last request outlives the grace period is answered
    whole: the answers that were given, and "server shutting down" for the rest."""
    handlers = _sleeping_handlers()
    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        config = SessionConfig(shutdown_grace_period=5)
        await _serve_on(nursery, pipe, handlers, config, version="2025-03-26")
        await pipe.send(
            [
                {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
                for rid, params in ((2, {"name": "x", "seconds": 1}), (3, {"seconds": 1e3}))
            ]
        )
        await trio.testing.wait_all_tasks_blocked()
        await pipe.to_server.aclose()  # end of input
        batch = await pipe.receive()
    assert [answer["id"] for answer in batch] == [2, 3]
    assert "result" in batch[0]
    assert batch[1]["error"] == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "server shutting down",
    }


class _Stalling(trio.abc.SendStream):
    """A stdout whose reader stops reading once ``stalled`` is set."""

    def __init__(self, inner: trio.abc.SendStream) -> None:
        self.inner, self.stalled = inner, False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.stalled:
            await trio.sleep_forever()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_last_answers_of_a_stdio_shutdown_wait_a_bounded_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that stopped reading holds the end of a shutdown for
    ``abandon_write_timeout``, not ``write_timeout``."""
    handlers = _sleeping_handlers()
    pipe = _Pipe()
    stdout = _Stalling(pipe.server_stdout)
    config = SessionConfig(shutdown_grace_period=5, abandon_write_timeout=1, write_timeout=30)
    async with trio.open_nursery() as nursery:
        await _serve_on(nursery, pipe, handlers, config, version="2025-03-26", stdout=stdout)
        stdout.stalled = True
        await pipe.send(
            [
                {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
                for rid, params in ((2, {"name": "x", "seconds": 1}), (3, {"seconds": 1e3}))
            ]
        )
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        await pipe.to_server.aclose()  # end of input
    assert trio.current_time() - start == pytest.approx(5 + 1)


async def test_initialized_behind_requests_for_busy_slots_still_lets_them_ask(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One read holds two calls and then notifications/initialized, with one handler
    slot: the first call, waiting for that notification, is not left waiting behind the
    second one's wait for a slot."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        roots = await ctx.send_request("roots/list")
        return {"content": [{"type": "text", "text": roots["roots"][0]["uri"]}]}

    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        config = SessionConfig(max_concurrent_handlers=1, handshake_timeout=30)
        await _serve_on(
            nursery, pipe, handlers, config, capabilities={"roots": {}}, initialized=False
        )
        start = trio.current_time()
        calls = [
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "x"}}
            for rid in (2, 3)
        ]
        lines = [*calls, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
        await pipe.to_server.send_all(b"".join(dumps(line) + b"\n" for line in lines))
        for _ in range(2):
            ask = await pipe.receive()
            assert ask["method"] == "roots/list"
            await pipe.send(
                {"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///w"}]}}
            )
            answer = await pipe.receive()
            assert answer["result"]["content"][0]["text"] == "file:///w"
        assert trio.current_time() == start  # nobody waited out handshake_timeout
        await pipe.to_server.aclose()

"""``Server(lifespan=...)``: entered by every ``serve_*`` (and ``connect_in_memory``,
``mcp-trio run``) before anything is served, exited after the last handler ended, its
value ``ctx.lifespan``; what a failing lifespan does; several serves at once."""

from __future__ import annotations

import io
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from mcp_trio import TASKS_EXTENSION, Context, Lifespan, open_client, serve_stdio
from mcp_trio._cli_run import Transport
from mcp_trio._cli_run import _serve as cli_serve
from mcp_trio._cli_util import CliError
from mcp_trio._server import Server


@attrs.define
class App:
    """What a lifespan holds: a stand-in for a database pool."""

    name: str
    closed: bool = False


class Recorder:
    """A lifespan factory that records what happens, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.entered = 0

    @asynccontextmanager
    async def __call__(self, server: Server) -> AsyncIterator[App]:
        self.entered += 1
        app = App(f"{server.name}-{self.entered}")
        self.events.append(f"enter {app.name}")
        try:
            yield app
        finally:
            app.closed = True
            self.events.append(f"exit {app.name}")


def make_server(lifespan: Lifespan | None) -> Server:
    server = Server("app", lifespan=lifespan)

    @server.tool()
    async def whoami(ctx: Context[App]) -> str:
        app = ctx.lifespan
        assert not app.closed
        return app.name

    @server.tool()
    def whoami_in_a_thread(ctx: Context[App]) -> str:
        return ctx.lifespan.name  # (a worker thread: the context is carried there)

    @server.tool()
    async def no_lifespan(ctx: Context) -> str:
        try:
            ctx.lifespan  # noqa: B018 (the property is the test)
        except RuntimeError as exc:
            return str(exc)
        return "entered"  # pragma: no cover

    return server


async def whoami(client: Any) -> str:
    result = await client.call_tool("whoami")
    assert not result.is_error, result
    text: str = result.structured_content["result"]
    return text


# ------------------------------------------------------------------ every transport


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_in_memory_and_open_client_enter_it_around_the_sessions(era: str) -> None:
    recorder = Recorder()
    server = make_server(recorder)
    with trio.fail_after(10):
        async with open_client(server, era=era) as client:  # type: ignore[arg-type]
            assert recorder.events == ["enter app-1"]
            assert await whoami(client) == "app-1"
            thread = await client.call_tool("whoami_in_a_thread")
            assert thread.structured_content == {"result": "app-1"}
        assert recorder.events == ["enter app-1", "exit app-1"]


async def test_serve_stdio_enters_it_before_reading_and_exits_after_the_last_handler() -> None:
    recorder = Recorder()
    server = make_server(recorder)
    release = trio.Event()

    @server.tool()
    async def slow(ctx: Context[App]) -> str:
        await release.wait()
        recorder.events.append("slow ended")
        return ctx.lifespan.name

    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    init = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow"}}\n'
    )
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                partial(server.serve_stdio, stdin=server_stdin, stdout=server_stdout)
            )
            await to_server.send_all(init)
            await to_server.aclose()  # stdin ends while slow runs: it gets the grace period
            await trio.testing.wait_all_tasks_blocked()
            assert recorder.events == ["enter app-1"]
            release.set()
        assert recorder.events == ["enter app-1", "slow ended", "exit app-1"]
        out = b""
        while chunk := await from_server.receive_some():
            out += chunk
    assert b'"result":"app-1"' in out.replace(b" ", b"")


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_serve_http_enters_it_and_exits_it_after_its_cancelled_handlers(era: str) -> None:
    recorder = Recorder()
    server = make_server(recorder)
    started = trio.Event()

    @server.tool()
    async def forever(ctx: Context[App]) -> str:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            assert not ctx.lifespan.closed  # (still open as the handler unwinds)
            recorder.events.append("forever ended")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            assert recorder.events == ["enter app-1"]
            async with open_client(handle.url, era=era) as client:  # type: ignore[arg-type]
                assert await whoami(client) == "app-1"
                nursery.start_soon(client.call_tool, "forever")
                await started.wait()
                nursery.cancel_scope.cancel()
    assert recorder.events == ["enter app-1", "forever ended", "exit app-1"]


async def test_a_task_of_the_tasks_extension_ends_before_it_exits() -> None:
    recorder = Recorder()
    server = make_server(recorder)
    running = trio.Event()

    @server.tool(task="required")
    async def background(ctx: Context[App]) -> str:
        running.set()
        try:
            await trio.sleep_forever()
        finally:
            assert not ctx.lifespan.closed
            recorder.events.append(f"task of {ctx.lifespan.name} ended")

    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    with trio.fail_after(10):
        async with open_client(server, era="modern", capabilities=caps) as client:
            task = await client.call_tool_as_task("background")
            assert task.task_id is not None
            await running.wait()
    assert recorder.events == ["enter app-1", "task of app-1 ended", "exit app-1"]


async def test_serve_http_stopped_gracefully_exits_it_uncancelled() -> None:
    closed: list[str] = []

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        yield "pool"
        await trio.sleep(0)  # a teardown that awaits (in a cancelled scope, this raises)
        closed.append("closed")

    server = Server("graceful", lifespan=lifespan)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            await nursery.start(_stop, handle)
    assert closed == ["closed"]


@pytest.mark.parametrize("transport", ["http", "websocket"])
async def test_handle_aclose_returns_after_the_lifespan_exited(transport: str) -> None:
    # aclose returned once the transport's function had, before the serve_* method left
    # the lifespan: a caller that cancelled next cut a teardown that awaits.
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        yield "pool"
        await trio.lowlevel.checkpoint()  # closing the pool awaits
        events.append("exit")

    server = Server("graceful", lifespan=lifespan)
    serve = server.serve_http if transport == "http" else server.serve_websocket
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(serve, port=0))
            await handle.aclose()
            assert events == ["exit"]
            nursery.cancel_scope.cancel()
    assert events == ["exit"]


async def test_handle_aclose_of_a_serve_inside_open_lifespan_leaves_it_entered() -> None:
    # (inside open_lifespan the serve enters nothing: aclose waits for it alone)
    recorder = Recorder()
    server = make_server(recorder)
    with trio.fail_after(10):
        async with server.open_lifespan(), trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            await handle.aclose()
            assert recorder.events == ["enter app-1"]
    assert recorder.events == ["enter app-1", "exit app-1"]


async def _stop(handle: Any, task_status: trio.TaskStatus[None]) -> None:
    task_status.started()
    await handle.aclose()


async def test_serve_websocket_enters_it() -> None:
    recorder = Recorder()
    server = make_server(recorder)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_websocket, port=0))
            async with open_client(f"ws://127.0.0.1:{handle.port}/mcp") as client:
                assert await whoami(client) == "app-1"
            nursery.cancel_scope.cancel()
    assert recorder.events == ["enter app-1", "exit app-1"]


async def test_mcp_trio_run_stops_gracefully_and_lets_the_teardown_await(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The command cancelled its nursery as soon as the HTTP server's close returned,
    # which is before serve_http has left the lifespan: a teardown that awaits was cut.
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[App]:
        events.append("enter")
        yield App("pool")
        await trio.sleep(1)  # closing the pool takes a while
        events.append("exit")

    server = make_server(lifespan)
    err = io.StringIO()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cli_serve, server, "http", "127.0.0.1", 0, "/mcp", err)
        while (found := re.search(r"http://\S+", err.getvalue())) is None:
            await trio.sleep(0.01)
        async with open_client(found.group(), era="modern") as client:
            assert await whoami(client) == "pool"
        os.kill(os.getpid(), signal.SIGTERM)
    assert events == ["enter", "exit"]


# ------------------------------------------------------------------ failures


class Refused(Exception):
    pass


def refuse() -> None:
    raise Refused("no database")


@asynccontextmanager
async def refusing(server: Server) -> AsyncIterator[None]:
    refuse()
    yield  # pragma: no cover


async def test_a_lifespan_that_fails_to_enter_fails_serve_stdio_before_it_reads() -> None:
    server = make_server(refusing)
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    await to_server.send_all(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    await to_server.aclose()
    with trio.fail_after(10), pytest.raises(Refused, match="no database"):
        await server.serve_stdio(stdin=server_stdin, stdout=server_stdout)
    await server_stdout.aclose()
    assert await from_server.receive_some() == b""  # nothing was answered
    assert await server_stdin.receive_some() != b""  # nor read


async def test_a_lifespan_that_fails_to_enter_fails_serve_http_before_it_listens() -> None:
    server = make_server(refusing)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            with pytest.raises(Refused, match="no database"):  # (bare: from start)
                await nursery.start(partial(server.serve_http, port=0))
    with pytest.raises(Refused):
        async with server.connect_in_memory():
            pass  # pragma: no cover


@pytest.mark.parametrize("transport", ["http", "ws", "stdio"])
async def test_mcp_trio_run_says_the_lifespan_failed(transport: Transport) -> None:
    # Its OSError (a database that refuses connections) read "cannot listen on ...".
    @asynccontextmanager
    async def unreachable(server: Server) -> AsyncIterator[None]:
        raise_refused()
        yield  # pragma: no cover

    server = make_server(unreachable)
    expected = (
        r"^the server's lifespan failed: ConnectionRefusedError: db:5432 refused "
        r"\(.*test_server_lifespan.py, line \d+\)$"
    )
    with (
        trio.fail_after(10),
        pytest.RaisesGroup(pytest.RaisesExc(CliError, match=expected), flatten_subgroups=True),
    ):
        await cli_serve(server, transport, "127.0.0.1", 0, "/mcp", io.StringIO())


def raise_refused() -> None:
    raise ConnectionRefusedError("db:5432 refused")


async def test_a_lifespan_that_fails_to_exit_fails_the_serve_after_serving() -> None:
    @asynccontextmanager
    async def failing_exit(server: Server) -> AsyncIterator[App]:
        yield App("a")
        raise Refused("pool did not close")

    server = make_server(failing_exit)
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    await to_server.send_all(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami",'
        b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n'
    )
    await to_server.aclose()
    with trio.fail_after(10), pytest.raises(Refused, match="did not close"):
        await server.serve_stdio(stdin=server_stdin, stdout=server_stdout)
    assert b'"a"' in await from_server.receive_some()  # served first


# ------------------------------------------------------------------ several serves


async def test_each_serve_enters_its_own_and_open_lifespan_shares_one() -> None:
    recorder = Recorder()
    server = make_server(recorder)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            first = await nursery.start(partial(server.serve_http, port=0))
            second = await nursery.start(partial(server.serve_websocket, port=0))
            async with (
                open_client(first.url) as one,
                open_client(f"ws://127.0.0.1:{second.port}/mcp") as two,
            ):
                assert {await whoami(one), await whoami(two)} == {"app-1", "app-2"}
            nursery.cancel_scope.cancel()
        assert sorted(recorder.events) == ["enter app-1", "enter app-2", "exit app-1", "exit app-2"]

        recorder.events.clear()
        async with server.open_lifespan() as app, trio.open_nursery() as nursery:
            assert app.name == "app-3"
            first = await nursery.start(partial(server.serve_http, port=0))
            second = await nursery.start(partial(server.serve_websocket, port=0))
            async with (
                open_client(first.url) as one,
                open_client(f"ws://127.0.0.1:{second.port}/mcp") as two,
                open_client(server) as three,
                server.open_lifespan() as again,
            ):
                assert again is app  # (entered already: nothing entered again)
                assert [await whoami(c) for c in (one, two, three)] == ["app-3"] * 3
            nursery.cancel_scope.cancel()
        assert recorder.events == ["enter app-3", "exit app-3"]


async def test_another_servers_lifespan_is_not_this_ones() -> None:
    outer, inner = Recorder(), Recorder()
    server, other = make_server(outer), make_server(inner)
    with trio.fail_after(10):
        async with other.open_lifespan(), open_client(server) as client:
            assert await whoami(client) == "app-1"
    assert outer.events == ["enter app-1", "exit app-1"]
    assert inner.events == ["enter app-1", "exit app-1"]


# ------------------------------------------------------------------ ctx.lifespan


async def test_ctx_lifespan_without_one_says_why() -> None:
    server = make_server(None)
    async with server.open_lifespan() as value:
        assert value is None
    async with open_client(server) as client:
        result = await client.call_tool("no_lifespan")
    assert result.text == "server 'app' has no lifespan: pass Server(lifespan=...)"


async def test_handlers_served_outside_it_say_so_and_open_lifespan_covers_them() -> None:
    recorder = Recorder()
    server = make_server(recorder)

    async def ask(tool: str) -> bytes:
        to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
        server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
        await to_server.send_all(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"%s",'
            b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            b'"io.modelcontextprotocol/clientCapabilities":{}}}}\n' % tool.encode()
        )
        await to_server.aclose()
        await serve_stdio(
            server.handlers(),
            connection_config=server.connection_config(),
            stdin=server_stdin,
            stdout=server_stdout,
        )
        return bytes(await from_server.receive_some())

    with trio.fail_after(10):
        assert b"is not entered where this request is served" in await ask("no_lifespan")
        async with server.open_lifespan():
            assert b'"result":"app-1"' in (await ask("whoami")).replace(b" ", b"")
    assert recorder.events == ["enter app-1", "exit app-1"]


def test_a_lifespan_must_be_callable() -> None:
    with pytest.raises(TypeError, match="lifespan= takes a function of the server"):
        Server("x", lifespan=App("not a factory"))  # type: ignore[arg-type]


async def test_a_context_annotated_with_the_lifespan_type_is_no_argument() -> None:
    server = make_server(Recorder())
    async with open_client(server) as client:
        (tool, *_) = [t for t in await client.list_tools() if t.name == "whoami"]
    assert tool.input_schema.get("properties", {}) == {}

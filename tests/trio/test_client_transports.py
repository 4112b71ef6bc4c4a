"""``open_client`` over real transports: a stdio subprocess and a WebSocket on 127.0.0.1.

Real clock, with an absolute ``fail_after`` on every test.
"""

from __future__ import annotations

import shlex
import sys
from functools import partial
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
import trio.testing
import trio_websocket

from mcp_sansio import Era, ProgressReceived
from mcp_sansio._json import dumps
from mcp_trio import Server, ServerExited, SessionClosed, SessionConfig, serve_websocket
from mcp_trio._client import open_client

from ..test_blocking_hostile import SERVER as HOSTILE_SERVER
from .client_server_app import TOOL_NAMES, make_handlers, server_config
from .test_http_support import (
    LEGACY,
    Proxy,
    fake_server_url,
    read_request,
    respond,
    start_proxied,
)

APP = str(Path(__file__).with_name("client_server_app.py"))
IO_TIMEOUT = 20
FAST = SessionConfig(stdin_close_timeout=2, terminate_timeout=1, exit_status_timeout=2)

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX command lines")


@posix_only
@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_stdio_command_line(era: str) -> None:
    command = shlex.join([sys.executable, APP])
    stderr: list[bytes] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(command, era=era, config=FAST, stderr=stderr.append) as client:  # type: ignore[arg-type]
            assert client.era is (Era.MODERN if era == "auto" else Era.LEGACY)
            assert [tool.name for tool in await client.list_tools()] == list(TOOL_NAMES)
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {
                "sum": 3
            }


@posix_only
async def test_stdio_argument_list_with_env_and_cwd(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    with trio.fail_after(IO_TIMEOUT):
        async with open_client([sys.executable, APP], env=env, cwd=tmp_path, config=FAST) as client:
            assert (await client.read_resource("file:///r0.txt")).contents


@posix_only
@pytest.mark.parametrize(
    ("how", "error", "spawn"),
    [
        ("notes.py", FileNotFoundError, "[sys.executable, 'notes.py']"),
        ("notes.py --port 1", FileNotFoundError, "[sys.executable, 'notes.py', '--port', '1']"),
        ("{path}", PermissionError, "[sys.executable, '{path}']"),  # (not executable)
    ],
)
async def test_a_server_file_that_is_not_a_program_says_how_to_run_it(
    how: str, error: type[OSError], spawn: str, tmp_path: Path
) -> None:
    # `mcp-trio list notes.py` loads a server file; open_client("notes.py") runs a
    # program, and said only "No such file or directory: 'notes.py'".
    server_file = tmp_path / "notes.py"
    server_file.write_text("raise SystemExit('a server file, never run here')\n")
    target = how.format(path=server_file)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(error) as caught:
        async with open_client(target, cwd=tmp_path, config=FAST):
            pytest.fail("nothing to connect to")  # pragma: no cover
    message = str(caught.value)
    assert message.startswith(f"cannot run {target.split()[0]!r} as a program")
    assert f"open_client({spawn.format(path=server_file)})" in message
    assert "open_client(server)" in message
    assert isinstance(caught.value.__cause__, error)


@posix_only
async def test_other_commands_that_cannot_run_fail_as_before(tmp_path: Path) -> None:
    with trio.fail_after(IO_TIMEOUT), pytest.raises(FileNotFoundError) as caught:
        async with open_client("no-such-command-xyz", config=FAST):
            pytest.fail("nothing to connect to")  # pragma: no cover
    assert caught.value.filename == "no-such-command-xyz"
    assert "sys.executable" not in str(caught.value)
    # A .py file that is a program (executable, with its interpreter line) runs as
    # one, and an error of the block's own is not taken for a spawn failure.
    program = tmp_path / "server.py"
    program.write_text(
        f"#!{sys.executable}\nimport runpy\nrunpy.run_path({APP!r}, run_name='__main__')\n"
    )
    program.chmod(0o755)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(FileNotFoundError, match=r"^mine$"):
        async with open_client(str(program), config=FAST) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
            raise FileNotFoundError("mine")


async def test_websocket_url() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            serve = partial(serve_websocket, connection_config=server_config())
            port = (await nursery.start(serve, make_handlers(), "127.0.0.1", 0)).port
            for era in ("legacy", "modern"):
                async with open_client(
                    f"ws://127.0.0.1:{port}/mcp",
                    era=era,
                ) as client:
                    assert client.era is Era(era)
                    prompt = await client.get_prompt("greet", {"who": "ws"})
                    assert prompt.description == "a greeting"
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_http_url(era: str) -> None:
    http_server = pytest.importorskip("mcp_trio._http_server")
    serve = partial(http_server.serve_http, connection_config=server_config())
    progress: list[float] = []

    async def on_progress(event: ProgressReceived) -> None:
        progress.append(event.progress)

    async def roots() -> list[str]:
        return ["file:///over-http"]

    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(serve, make_handlers())
            async with open_client(handle.url, era=era, roots=roots) as client:  # type: ignore[arg-type]
                assert client.era is Era(era)
                assert [tool.name for tool in await client.list_tools()] == list(TOOL_NAMES)
                done = await client.call_tool(
                    "slow", {"steps": 2, "delay": 0}, on_progress=on_progress
                )
                assert done.text == "done"
                assert progress == [1, 2]
                asked = await client.call_tool("ask", {"what": ["roots"]})
                assert asked.text == "roots=file:///over-http"
                async with client.subscribe(tools=True) as updates:
                    handle.send_notification("notifications/tools/list_changed")
                    note = await updates.receive()
                    assert note.method == "notifications/tools/list_changed"
            nursery.cancel_scope.cancel()


async def test_a_url_scheme_in_capitals_is_still_a_url() -> None:
    # RFC 3986: schemes are compared in any case; "HTTP://..." is not a command line.
    http_server = pytest.importorskip("mcp_trio._http_server")
    serve = partial(http_server.serve_http, connection_config=server_config())
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(serve, make_handlers())
            url = "HTTP" + handle.url.removeprefix("http")
            async with open_client(url, era="legacy") as client:
                assert [tool.name for tool in await client.list_tools()] == list(TOOL_NAMES)
            nursery.cancel_scope.cancel()


async def test_stdio_an_unterminated_last_answer_is_an_answer() -> None:
    # The server writes its answer without a final newline and exits: that line is a
    # message all the same (as a server takes an unterminated last line of its input).
    command = [sys.executable, "-c", HOSTILE_SERVER, "unterminated_then_exit"]
    with trio.fail_after(10):
        async with open_client(command, era="legacy") as client:
            assert (await client.call_tool("t")).text == "ok"


_SLOW_SERVER = """
import sys, trio, mcp_trio

server = mcp_trio.Server("slow")

@server.tool()
async def wait() -> str:
    print("the call started", file=sys.stderr, flush=True)
    try:
        await trio.sleep(60)
    except trio.Cancelled:
        print("the call was cancelled", file=sys.stderr, flush=True)
        raise
    return "done"

trio.run(server.serve_stdio)
"""


@pytest.mark.parametrize("how", ["aclose", "leave", "raise"])
async def test_closing_a_stdio_client_cancels_its_calls_so_the_server_stops_them(
    how: str,
) -> None:
    # The client no longer wants the answers of calls still running when it closes, and
    # says so (notifications/cancelled) before it closes the server's stdin: the server
    # stops them at once and exits, well inside the client's wait before SIGTERM (its
    # own grace period for running handlers is longer than that wait).
    said: list[bytes] = []
    started = trio.Event()

    def on_stderr(chunk: bytes) -> None:  # (called from the reading task)
        said.append(chunk)
        if b"the call started" in b"".join(said):
            started.set()

    async def call(client: Any) -> None:
        with pytest.raises(SessionClosed):
            await client.call_tool("wait")

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:  # (the call outlives the block)
            try:
                async with open_client(
                    [sys.executable, "-c", _SLOW_SERVER], era="legacy", stderr=on_stderr
                ) as client:
                    nursery.start_soon(call, client)
                    await started.wait()
                    if how == "aclose":
                        await client.aclose()
                    elif how == "raise":
                        raise KeyError("the application failed")
            except KeyError:
                assert how == "raise"
    assert b"the call was cancelled" in b"".join(said)


_STALLING_SERVER = """
import json, os, sys, time

out = sys.stdout.buffer
for raw in sys.stdin.buffer:
    message = json.loads(raw)
    if message.get("method") == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stalling", "version": "0"},
        }
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())
        out.write(b"\\n")
        out.flush()
    elif message.get("method") == "tools/call":
        out.write(b'{"jsonrpc": "2.0", "id": 2, "resu')  # half a line, then no output
        out.flush()
        os.close(1)
        time.sleep(60)  # alive, and never reads its input again
"""


async def test_stdio_a_server_that_stops_mid_line_and_reading_ends_the_session_at_once() -> None:
    # At the end of the server's output the leftover half line gets a -32700 reply; that
    # reply must not be waited for (the server reads no more), or closing would wait out
    # the write timeout and report it instead of the server's exit.
    config = SessionConfig(stdin_close_timeout=0.2, terminate_timeout=0.2)
    errors: list[BaseException] = []

    async def call(client: Any, arguments: dict[str, Any]) -> None:
        try:
            await client.call_tool("t", arguments)
        except SessionClosed as exc:
            errors.append(exc)

    with trio.fail_after(20):  # (the write timeout is 30 s)
        async with (
            open_client(
                [sys.executable, "-c", _STALLING_SERVER], era="legacy", config=config
            ) as client,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(call, client, {})
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call, client, {"blob": "x" * 1_000_000})  # fills the pipe
    assert [type(e) for e in errors] == [ServerExited, ServerExited], errors


async def test_extra_headers_go_with_every_http_request() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            proxy = await start_proxied(nursery)
            headers = {"Authorization": "Bearer t0ken", "User-Agent": "my-app/1"}
            async with open_client(proxy.url(), era="legacy", headers=headers) as client:
                await client.list_tools()
            nursery.cancel_scope.cancel()
    assert {seen.method for seen in proxy.seen} >= {"POST", "DELETE"}
    for seen in proxy.seen:
        assert seen.headers["authorization"] == "Bearer t0ken"
        assert seen.headers["user-agent"] == "my-app/1"  # replaces ours


async def test_extra_headers_go_with_the_websocket_handshake() -> None:
    seen: list[list[tuple[bytes, bytes]]] = []

    async def refuse(request: trio_websocket.WebSocketRequest) -> None:
        seen.append(list(request.headers))
        await request.reject(401)

    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                partial(trio_websocket.serve_websocket, refuse, "127.0.0.1", 0, ssl_context=None)
            )
            url = f"ws://127.0.0.1:{server.port}/mcp"
            with pytest.raises(SessionClosed):
                async with open_client(url, headers={"Authorization": "Bearer t0ken"}):
                    pass  # pragma: no cover
            nursery.cancel_scope.cancel()
    (headers,) = seen
    assert (b"authorization", b"Bearer t0ken") in headers


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Mcp-Session-Id": "mine"}, "written by the HTTP transport itself"),
        ({"Mcp-Param-Region": "eu"}, "written by the HTTP transport itself"),
        ({"Host": "example.com"}, "written by the HTTP transport itself"),
        ({"Bad Name": "x"}, "not an HTTP token"),
        ({"X-Token": "a\r\nInjected: yes"}, "on one line"),
        ({"X-Token": "é€"}, "Latin-1"),
        ({"Authorization": "Bearer tok "}, "no space at either end"),
        ({"X-Token": "\t"}, "no space at either end"),
        ({"authorization": "a", "Authorization": "b"}, "given twice"),
    ],
)
async def test_extra_headers_are_checked_before_connecting(
    headers: dict[str, str], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        async with open_client("http://127.0.0.1:9/mcp", headers=headers):
            pass  # pragma: no cover


async def test_websocket_handshake_headers_are_reserved() -> None:
    with pytest.raises(ValueError, match="written by the WebSocket transport itself"):
        async with open_client("ws://127.0.0.1:9/mcp", headers={"Sec-WebSocket-Key": "x"}):
            pass  # pragma: no cover


async def test_extra_headers_are_for_urls_only() -> None:
    with pytest.raises(TypeError, match="headers cannot be used with a non-URL target"):
        async with open_client((make_handlers(), server_config()), headers={"A": "b"}):
            pass  # pragma: no cover


async def test_a_call_refused_for_its_headers_is_made_again_after_listing_the_tools() -> None:
    # 2026-07-28 streamable-http, "Client Behavior": after -32020 the client SHOULD list
    # the tools (their x-mcp-header annotations say which Mcp-Param-* headers to send)
    # and retry. A client that had not listed them sent none and failed.
    server = Server("headers")
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    }

    @server.tool(input_schema=schema)
    def where(region: str) -> str:
        return f"in {region}"

    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            proxy = Proxy(handle.port)
            await proxy.start(nursery)
            async with open_client(proxy.url(), era="modern") as client:
                assert (await client.call_tool("where", {"region": "eu"})).text == "in eu"
                assert (await client.call_tool("where", {"region": "us"})).text == "in us"
            nursery.cancel_scope.cancel()
    calls = [s.rpc_method for s in proxy.seen if s.rpc_method != "server/discover"]
    assert calls == ["tools/call", "tools/list", "tools/call", "tools/call"]
    assert [s.headers.get("mcp-param-region") for s in proxy.seen[-2:]] == ["eu", "us"]


async def test_a_legacy_http_server_that_answers_every_method_is_found_out() -> None:
    # It answers server/discover with an empty result (200): no DiscoverResult, so a
    # legacy server (versioning.mdx); the client falls back to initialize.
    async def handle(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (found := await read_request(conn, stream)) is not None:
            _head, message = found
            if message is not None and "id" in message:
                result: dict[str, Any] = {}
                if message["method"] == "initialize":
                    info = {"name": "old", "version": "1"}
                    result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": info}
                answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
                headers = (("mcp-session-id", "s1"), ("content-type", "application/json"))
                await respond(conn, stream, answer, headers=headers)
            else:
                await respond(conn, stream, b"", status=202 if message else 405)
            conn.start_next_cycle()

    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            url = await fake_server_url(nursery, handle)
            async with open_client(url) as client:
                assert (client.era, client.protocol_version) == (Era.LEGACY, LEGACY)
            nursery.cancel_scope.cancel()

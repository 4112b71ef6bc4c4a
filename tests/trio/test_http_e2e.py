"""Our HTTP client against our HTTP server, both eras, over real sockets on 127.0.0.1."""

from __future__ import annotations

import time
from typing import Any

import h11
import pytest
import trio
import trio.testing

from mcp_sansio import Era, ErrorCode, ProgressReceived
from mcp_sansio._json import dumps
from mcp_sansio.http import parse_header_params
from mcp_trio import (
    Handlers,
    HandshakeFailed,
    McpError,
    NotificationContext,
    SessionClosed,
    SessionConfig,
)
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    ERAS,
    IO_TIMEOUT,
    LEGACY,
    MODERN,
    App,
    Proxy,
    call,
    client_connection_config,
    client_handlers,
    provide_roots,
    read_request,
    respond,
    start_proxied,
    start_server,
    text_of,
)


@pytest.mark.parametrize("era", ERAS)
async def test_our_client_and_our_server_talk_in_each_era(nursery: trio.Nursery, era: str) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            assert client.handshake is not None
            expected = (Era.LEGACY, LEGACY) if era == "legacy" else (Era.MODERN, MODERN)
            assert (client.handshake.era, client.handshake.protocol_version) == expected
            listing = await client.request("tools/list")
            assert listing["tools"][0]["name"] == "echo"
            result = await client.request("tools/call", call("echo", text="héllo"))
            assert text_of(result) == "héllo"
            with pytest.raises(McpError) as info:
                await client.request("resources/list")
            assert info.value.code == ErrorCode.METHOD_NOT_FOUND
        assert server.statistics().sessions == 0  # a legacy client ends its session


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_server_of_one_era_and_an_auto_client(nursery: trio.Nursery, era: str) -> None:
    server = await start_server(nursery, era=era)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(server.url, connection_config=client_connection_config()) as c:
            assert c.handshake is not None and c.handshake.era.value == era
            assert text_of(await c.request("tools/call", call("echo", text="x"))) == "x"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_concurrent_requests_on_one_session(nursery: trio.Nursery, era: str) -> None:
    app = App(expected=8)
    server = await start_server(nursery, app)
    results: dict[int, str] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:

            async def one(i: int) -> None:
                results[i] = text_of(await client.request("tools/call", call("barrier", i=i)))

            async with trio.open_nursery() as inner:
                for i in range(8):  # each waits until all 8 have arrived: truly concurrent
                    inner.start_soon(one, i)
    assert results == {i: str(i) for i in range(8)}


@pytest.mark.parametrize("connections", [1, 2])
async def test_a_small_connection_pool_still_serves_everyone(
    nursery: trio.Nursery, connections: int
) -> None:
    server = await start_server(nursery)
    transport = HttpTransportConfig(max_client_connections=connections, max_idle_connections=1)
    results: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy"), transport=transport
        ) as client:

            async def one(i: int) -> None:
                results.append(text_of(await client.request("tools/call", call("echo", text=i))))

            async with trio.open_nursery() as inner:
                for i in range(10):
                    inner.start_soon(one, i)
    assert sorted(results, key=int) == [str(i) for i in range(10)]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_progress_streams_over_sse(nursery: trio.Nursery, era: str) -> None:
    server = await start_server(nursery)
    seen: list[float] = []

    async def on_progress(event: ProgressReceived) -> None:
        seen.append(event.progress)

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            result = await client.request(
                "tools/call", call("progress", steps=3), on_progress=on_progress
            )
    assert text_of(result) == "done" and seen == [1, 2, 3]


async def test_a_legacy_handler_asks_the_client_to_sample(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url,
            handlers=client_handlers(),
            connection_config=client_connection_config("legacy"),
        ) as client:
            assert text_of(await client.request("tools/call", call("sample"))) == "sampled"


async def test_modern_handlers_send_no_requests(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("sample"))
            assert info.value.code == ErrorCode.INTERNAL_ERROR


async def test_a_modern_handler_asks_for_input_and_the_client_retries(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            result = await client.request(
                "tools/call", call("ask"), on_input_required=provide_roots
            )
            assert text_of(result) == "file:///srv"


async def test_logs_reach_a_modern_client_that_asked_for_them(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    got: list[Any] = []
    handlers = Handlers()

    @handlers.on_notification("notifications/message")
    async def on_log(ctx: NotificationContext) -> None:
        got.append(ctx.params)

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url,
            handlers=handlers,
            connection_config=client_connection_config("modern", log_level="info"),
        ) as client:
            assert text_of(await client.request("tools/call", call("log"))) == "True"
    assert got and got[0]["data"] == {"msg": "hello"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_cancelling_a_request_cancels_its_handler(nursery: trio.Nursery, era: str) -> None:
    app = App()
    server = await start_server(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            with trio.CancelScope() as scope:

                async def cancel_when_started() -> None:
                    await app.started_event.wait()
                    scope.cancel()

                nursery.start_soon(cancel_when_started)
                await client.request("tools/call", call("block"))
            assert scope.cancelled_caught
            await app.cancelled_event.wait()  # the server-side handler's scope was cancelled
            assert app.cancelled == [app.started[0].request_id]
            # the session goes on
            assert text_of(await client.request("tools/call", call("echo", text="ok"))) == "ok"
            assert server.statistics().running_handlers == 0


async def test_a_modern_cancellation_is_a_closed_stream_not_a_message(
    nursery: trio.Nursery,
) -> None:
    app = App()
    proxy = await start_proxied(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("modern")
        ) as client:
            with trio.move_on_after(IO_TIMEOUT) as scope:
                nursery.start_soon(_cancel_after_start, app, scope)
                await client.request("tools/call", call("block"))
            await app.cancelled_event.wait()
    assert b"notifications/cancelled" not in proxy.upstream
    assert b"mcp-method: tools/call" in proxy.upstream.lower()


async def _cancel_after_start(app: App, scope: trio.CancelScope) -> None:
    await app.started_event.wait()
    scope.cancel()


async def test_change_notifications_reach_a_legacy_client_on_its_get_stream(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    changed = trio.Event()
    handlers = Handlers()

    @handlers.on_notification("notifications/tools/list_changed")
    async def on_changed(ctx: NotificationContext) -> None:
        changed.set()

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, handlers=handlers, connection_config=client_connection_config("legacy")
        ):
            assert server.send_notification("notifications/tools/list_changed") == 1
            await changed.wait()


async def test_a_modern_subscription_gets_notifications_and_ends_at_shutdown(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    acknowledged, changed = trio.Event(), trio.Event()
    handlers = Handlers()

    @handlers.on_notification("notifications/subscriptions/acknowledged")
    async def on_ack(ctx: NotificationContext) -> None:
        acknowledged.set()

    @handlers.on_notification("notifications/tools/list_changed")
    async def on_changed(ctx: NotificationContext) -> None:
        assert ctx.subscription_id is not None
        changed.set()

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, handlers=handlers, connection_config=client_connection_config("modern")
        ) as client:
            results: list[dict[str, Any]] = []

            async def listen() -> None:
                results.append(
                    await client.request(
                        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
                    )
                )

            async with trio.open_nursery() as inner:
                inner.start_soon(listen)
                await acknowledged.wait()
                assert server.send_notification("notifications/tools/list_changed") == 1
                await changed.wait()
                await server.aclose()  # ends the subscription gracefully
            assert len(results) == 1


@pytest.mark.parametrize("era", ["auto", "legacy", "modern"])
async def test_an_unreachable_server_closes_the_client_with_a_reason(
    nursery: trio.Nursery, era: str
) -> None:
    server = await start_server(nursery)
    url = server.url
    await server.aclose()
    with trio.fail_after(IO_TIMEOUT), pytest.raises(SessionClosed) as info:
        async with open_http_client(url, connection_config=client_connection_config(era)):
            pass  # pragma: no cover
    assert "could not connect" in info.value.reason


async def test_a_modern_client_outlives_a_server_that_restarts(nursery: trio.Nursery) -> None:
    # A modern request stands alone (no session to lose): one that finds no server fails
    # alone, and the next one, once the server is back on its port, is answered.
    first = await start_server(nursery)
    port = first.port
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            first.url, connection_config=client_connection_config("modern")
        ) as client:
            assert text_of(await client.request("tools/call", call("echo", text="a"))) == "a"
            await first.aclose()
            with pytest.raises(McpError) as failed:
                await client.request("tools/call", call("echo", text="b"))
            assert failed.value.error.code == ErrorCode.INTERNAL_ERROR
            assert "could not connect" in failed.value.error.message
            await start_server(nursery, port=port)
            assert text_of(await client.request("tools/call", call("echo", text="c"))) == "c"


async def test_a_client_keeps_using_its_connections(nursery: trio.Nursery) -> None:
    proxy = await start_proxied(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(),
            connection_config=client_connection_config("modern"),
            config=SessionConfig(),
        ) as client:
            for i in range(5):
                await client.request("tools/call", call("echo", text=i))
            assert len(proxy.scopes) == 1  # keep-alive: one connection for everything


async def test_a_same_origin_redirect_is_followed(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    proxy = Proxy(server.port, redirect=(b"/old", b"/mcp"))
    await proxy.start(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url("/old"),
            connection_config=client_connection_config("legacy"),
            transport=HttpTransportConfig(max_idle_connections=0),  # the proxy sees each POST
        ) as client:
            assert text_of(await client.request("tools/call", call("echo", text="r"))) == "r"


async def test_a_redirect_to_another_origin_is_refused(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    proxy = Proxy(server.port, redirect=(b"/mcp", server.url.encode()))
    await proxy.start(nursery)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(HandshakeFailed) as info:
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy")
        ):
            pass  # pragma: no cover
    # (The core names the Location it does not follow: both clients word it alike.)
    assert info.value.error.data == {"httpStatus": 308, "location": server.url}
    assert f"the redirect is not followed (Location: {server.url})" in info.value.message


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_each_response_mode_carries_results_and_progress(
    nursery: trio.Nursery, era: str, mode: str
) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    seen: list[float] = []

    async def on_progress(event: ProgressReceived) -> None:
        seen.append(event.progress)

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            result = await client.request(
                "tools/call", call("progress", steps=2), on_progress=on_progress
            )
            assert text_of(result) == "done"
    # JSON mode: modern progress has nowhere to go; legacy progress takes the GET stream,
    # a race with the result on its own connection (progress after it is dropped).
    assert seen == [1, 2] if mode == "sse" else set(seen) <= {1, 2}


async def test_a_server_without_get_streams(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, http={"standalone_stream": False}, era="legacy")
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:
            assert text_of(await client.request("tools/call", call("echo", text="g"))) == "g"
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().open_responses == 0  # the GET was refused (405)


async def test_request_state_expiry_counts_in_wall_clock_time(nursery: trio.Nursery) -> None:
    # Modern HTTP servers are meant to run as several processes sharing the key.
    server = await start_server(nursery)
    assert server.http.connection_config.request_state_clock is time.time
    await server.aclose()


async def test_handlers_may_run_in_a_nursery_of_the_callers(nursery: trio.Nursery) -> None:
    app = App()
    async with trio.open_nursery() as handler_nursery:
        server = await start_server(nursery, app, handler_nursery=handler_nursery)
        with trio.fail_after(IO_TIMEOUT):
            async with open_http_client(
                server.url, connection_config=client_connection_config("modern")
            ) as client:
                assert text_of(await client.request("tools/call", call("echo", text="n"))) == "n"
        await server.aclose()


async def test_tool_parameters_are_mirrored_into_headers(nursery: trio.Nursery) -> None:
    schema = {
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    }
    app = App()

    async def tools_list(ctx: Any) -> dict[str, Any]:
        return {"tools": [{"name": "echo", "inputSchema": schema}]}

    app.handlers.set_request_handler("tools/list", tools_list)
    params = {"echo": parse_header_params(schema)}
    proxy = await start_proxied(
        nursery, app, http={"tool_header_params": lambda name: params.get(name, ())}
    )
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("modern")
        ) as client:
            await client.request("tools/list")  # teaches the client the annotation
            result = await client.request("tools/call", call("echo", text="é", region="eu-1"))
            assert text_of(result) == "é"
    wire = proxy.upstream.lower()
    assert b"mcp-param-region: eu-1" in wire and b"mcp-name: echo" in wire


async def test_a_client_error_reaches_the_handler_that_asked(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:  # no sampling handler: the client answers -32601
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("sample"))
            assert info.value.code == ErrorCode.METHOD_NOT_FOUND


async def test_a_server_request_times_out_on_the_servers_timer(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(nursery)
    asked = trio.Event()
    handlers = Handlers()

    @handlers.on_request("sampling/createMessage")
    async def sample(ctx: Any) -> dict[str, Any]:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, handlers=handlers, connection_config=client_connection_config("legacy")
        ) as client:
            async with trio.open_nursery() as inner:

                async def jump_when_asked() -> None:
                    await asked.wait()
                    await trio.testing.wait_all_tasks_blocked()
                    clock.jump(6)

                inner.start_soon(jump_when_asked)
                result = await client.request("tools/call", call("sample", timeout=5))
            assert text_of(result) == "timed out"


async def test_cancelling_a_request_cancels_the_servers_request_to_the_client(
    nursery: trio.Nursery,
) -> None:
    app = App()
    server = await start_server(nursery, app)
    asked, client_cancelled = trio.Event(), trio.Event()
    handlers = Handlers()

    @handlers.on_request("sampling/createMessage")
    async def sample(ctx: Any) -> dict[str, Any]:
        asked.set()
        try:
            await trio.sleep_forever()
        finally:
            client_cancelled.set()
        raise AssertionError  # pragma: no cover

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, handlers=handlers, connection_config=client_connection_config("legacy")
        ) as client:
            with trio.CancelScope() as scope:

                async def cancel_when_asked() -> None:
                    await asked.wait()
                    scope.cancel()

                nursery.start_soon(cancel_when_asked)
                await client.request("tools/call", call("sample"))
            await app.cancelled_event.wait()  # the server's handler was cancelled...
            await client_cancelled.wait()  # ...and so was its request to the client


async def test_a_legacy_client_has_its_get_stream_open_before_its_first_request(
    nursery: trio.Nursery,
) -> None:
    # The server must see the GET before any request: what it says on its own right after
    # the handshake is not missed, and a GET arriving during a call is not taken for that
    # call's reconnection (the conformance suite's sse-retry scenario does).
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:
            assert server.statistics().open_responses == 1  # the GET stream, already
            assert text_of(await client.request("tools/call", call("echo", text="x"))) == "x"


@pytest.mark.parametrize("era", ERAS)
async def test_an_answer_the_core_cannot_send_becomes_an_internal_error(
    nursery: trio.Nursery, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = App()

    async def unencodable(ctx: Any) -> dict[str, Any]:
        return {"content": [], "x": object()}

    app.handlers.set_request_handler("tools/call", unencodable)
    server = await start_server(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("echo"))
            assert info.value.code == ErrorCode.INTERNAL_ERROR
            assert info.value.message == "Internal error"
            assert (await client.request("tools/list"))["tools"]
    assert "cannot be sent" in caplog.text


async def test_a_failing_notification_handler_is_logged_and_the_server_goes_on(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    app = App()
    seen = trio.Event()

    async def boom(ctx: Any) -> None:
        seen.set()
        raise RuntimeError("a notification handler failed")

    app.handlers.set_notification_handler("notifications/roots/list_changed", boom)
    server = await start_server(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:
            await client.notify("notifications/roots/list_changed")
            await seen.wait()
            assert text_of(await client.request("tools/call", call("echo", text="on"))) == "on"
    assert "handler for notification 'notifications/roots/list_changed' failed" in caplog.text


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_request_that_waited_for_a_connection_finds_no_server_as_any_other(
    era: str,
) -> None:
    # One connection at most: the second call waits for the first's, which the server
    # closes as it answers, and meanwhile the server goes. The waiting call finds no
    # server: as for one that did not wait, a legacy session ends; a modern client whose
    # server answered before fails that call alone and goes on.
    session_id = ("mcp-session-id", "s1")
    got_slow, release = trio.Event(), trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (found := await read_request(conn, stream)) is not None:
            head, msg = found
            headers = [session_id, ("content-type", "application/json")]
            if head.method == b"GET":
                await respond(conn, stream, b"", status=405, headers=(session_id,))
                return
            if "id" not in msg:
                await respond(conn, stream, b"", status=202, headers=(session_id,))
            else:
                result: dict[str, Any] = {"content": [{"type": "text", "text": "ok"}]}
                if msg["method"] == "initialize":
                    result = {
                        "protocolVersion": LEGACY,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "x", "version": "1"},
                    }
                elif msg["method"] == "server/discover":
                    result = {
                        "supportedVersions": [MODERN],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "x", "version": "1"},
                    }
                elif msg["params"]["name"] == "slow":
                    got_slow.set()
                    await release.wait()
                    headers.append(("connection", "close"))
                body = dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                await respond(conn, stream, body, headers=tuple(headers))
            if conn.our_state is h11.MUST_CLOSE:
                await stream.aclose()
                return
            conn.start_next_cycle()

    transport = HttpTransportConfig(open_get_stream=False, max_client_connections=1)
    outcomes: dict[str, Any] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
            port = listeners[0].socket.getsockname()[1]
            accepting = trio.CancelScope()

            async def accept() -> None:
                with accepting:
                    await trio.serve_listeners(serve, listeners, handler_nursery=nursery)

            nursery.start_soon(accept)
            async with open_http_client(
                f"http://127.0.0.1:{port}/mcp",
                connection_config=client_connection_config(era),
                transport=transport,
            ) as client:

                async def call_tool(name: str) -> None:
                    try:
                        outcomes[name] = await client.request("tools/call", call(name))
                    except (McpError, SessionClosed) as exc:
                        outcomes[name] = exc

                async with trio.open_nursery() as calls:
                    calls.start_soon(call_tool, "slow")
                    await got_slow.wait()
                    calls.start_soon(call_tool, "queued")
                    await trio.testing.wait_all_tasks_blocked()
                    accepting.cancel()  # the server goes
                    for listener in listeners:
                        await listener.aclose()
                    release.set()
                if era == "modern":
                    assert isinstance(outcomes["queued"], McpError)
                    assert "could not connect" in outcomes["queued"].error.message
            nursery.cancel_scope.cancel()
    assert text_of(outcomes["slow"]) == "ok"
    if era == "legacy":
        assert isinstance(outcomes["queued"], SessionClosed)
        assert "cannot be reached" in str(outcomes["queued"])

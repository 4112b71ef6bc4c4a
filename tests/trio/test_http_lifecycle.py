"""Sessions over time: eviction, resumption after a dropped connection, shutdown."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from mcp_sansio import ProgressReceived
from mcp_trio import Handlers, McpError, SessionClosed, SessionConfig
from mcp_trio._http_client import open_http_client

from .test_http_support import (
    IO_TIMEOUT,
    App,
    call,
    client_connection_config,
    initialize_body,
    raw_request,
    raw_session,
    start_proxied,
    start_server,
    text_of,
)


async def test_a_hundred_idle_sessions_expire(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(nursery, http={"session_idle_timeout": 5.0})
    with trio.fail_after(IO_TIMEOUT):
        for _ in range(100):
            await raw_session(server.port)
        assert server.statistics().sessions == 100
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(6)
        await trio.testing.wait_all_tasks_blocked()
    assert server.statistics().sessions == 0


async def test_a_full_session_table_evicts_the_least_recently_used(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, http={"max_sessions": 10})
    with trio.fail_after(IO_TIMEOUT):
        ids = [await raw_session(server.port) for _ in range(100)]
    assert server.http.sessions() == tuple(ids[-10:])


async def test_a_dropped_legacy_stream_is_resumed_with_last_event_id(
    nursery: trio.Nursery,
) -> None:
    app = App()
    proxy = await start_proxied(nursery, app, http={"retry_ms": 10})
    seen: list[float] = []
    first = trio.Event()

    async def on_progress(event: ProgressReceived) -> None:
        seen.append(event.progress)
        first.set()

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy")
        ) as client:

            async def drop_then_release() -> None:
                await first.wait()
                proxy.cut()  # every connection drops; the server's handler goes on
                app.release.set()

            nursery.start_soon(drop_then_release)
            result = await client.request(
                "tools/call", call("block", progress=True), on_progress=on_progress
            )
    assert text_of(result) == "released" and seen == [1, 2]
    assert b"last-event-id: " in proxy.upstream.lower()
    assert app.cancelled == []  # a legacy disconnection is not a cancellation


async def test_a_dropped_modern_stream_fails_only_its_request(nursery: trio.Nursery) -> None:
    # (With re-issuing off: see the next test.)
    app = App()
    proxy = await start_proxied(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(),
            connection_config=attrs.evolve(client_connection_config("modern"), max_reissues=0),
        ) as client:

            async def drop() -> None:
                await app.started_event.wait()
                proxy.cut()

            nursery.start_soon(drop)
            with pytest.raises(McpError, match="HTTP"):
                await client.request("tools/call", call("block"))
            await app.cancelled_event.wait()  # closing the stream cancelled the handler
            assert text_of(await client.request("tools/call", call("echo", text="y"))) == "y"


async def test_a_dropped_modern_stream_is_reissued(nursery: trio.Nursery) -> None:
    # 2026-07-28 changelog: the client MUST re-issue it as a new request with a new id.
    app = App()
    proxy = await start_proxied(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("modern")
        ) as client:

            async def drop() -> None:
                await app.started_event.wait()
                proxy.cut()
                app.release.set()  # (for the re-issued request)

            nursery.start_soon(drop)
            assert text_of(await client.request("tools/call", call("block"))) == "released"
    calls = [s.message for s in proxy.seen if s.rpc_method == "tools/call"]
    assert len(calls) == 2
    assert calls[0]["id"] != calls[1]["id"]
    assert calls[0]["params"] == calls[1]["params"]
    assert len(app.started) == 2


async def test_graceful_shutdown_lets_running_requests_finish(nursery: trio.Nursery) -> None:
    app = App()
    server = await start_server(nursery, app)
    port = server.port
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            results: list[str] = []
            closed = trio.Event()

            async def request() -> None:
                results.append(text_of(await client.request("tools/call", call("block"))))

            async def close() -> None:
                await server.aclose()
                closed.set()

            async with trio.open_nursery() as inner:
                inner.start_soon(request)
                await app.started_event.wait()
                inner.start_soon(close)
                await trio.testing.wait_all_tasks_blocked()
                refused = await raw_request(port, "POST", body=initialize_body())
                assert (refused.status, refused.headers["connection"]) == (503, "close")
                assert not closed.is_set()
                app.release.set()
            assert results == ["released"] and closed.is_set()
            assert app.cancelled == []
    with pytest.raises(OSError):
        await trio.open_tcp_stream("127.0.0.1", port)  # no longer listening


async def test_shutdown_goes_on_as_soon_as_the_last_handler_ends(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Not at the end of the grace period: the last handler to end wakes the shutdown.
    app = App()
    config = SessionConfig(shutdown_grace_period=60.0)
    server = await start_server(nursery, app, config=config)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_http_client(
                server.url, connection_config=client_connection_config("legacy")
            ) as client,
            trio.open_nursery() as inner,
        ):
            inner.start_soon(client.request, "tools/call", call("block"))
            await app.started_event.wait()
            inner.start_soon(server.aclose)
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            app.release.set()
    assert trio.current_time() - started < 30  # (the clock runs at real time)
    assert app.cancelled == []


@pytest.mark.parametrize(
    ("era", "mode"), [("legacy", "sse"), ("legacy", "json"), ("modern", "sse"), ("modern", "json")]
)
async def test_shutdown_cancels_handlers_that_do_not_finish_in_time(
    nursery: trio.Nursery, clock: trio.testing.MockClock, era: str, mode: str
) -> None:
    app = App()
    config = SessionConfig(shutdown_grace_period=5.0, close_timeout=1.0)
    http = {"retry_ms": 10, "response_mode": mode}
    server = await start_server(nursery, app, config=config, http=http)
    outcome: list[BaseException] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config(era)
        ) as client:

            async def request() -> None:
                try:
                    await client.request("tools/call", call("block"))
                except (McpError, SessionClosed) as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as inner:
                inner.start_soon(request)
                await app.started_event.wait()
                inner.start_soon(server.aclose)
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(6)  # the grace period is over
                await app.cancelled_event.wait()
    # Answered, in both eras: not a stream that ends (the client would resume against a
    # server going away) nor a 404 (it would start a new session there).
    (error,) = outcome
    assert isinstance(error, McpError), error
    # (as over WebSocket and stdio: modern HTTP said "Service Unavailable: shutting down")
    assert (error.code, error.message) == (-32603, "server shutting down")
    assert server.statistics().running_handlers == 0


async def test_cancelling_serve_http_closes_everything_at_once(nursery: trio.Nursery) -> None:
    app = App()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as inner:
            server = await start_server(inner, app)
            client_failed: list[Any] = []

            async def request() -> None:
                async with open_http_client(
                    server.url, connection_config=client_connection_config("modern")
                ) as client:
                    try:
                        await client.request("tools/call", call("block"))
                    except McpError as exc:
                        client_failed.append(exc)

            nursery.start_soon(request)
            await app.started_event.wait()
            inner.cancel_scope.cancel()
        await app.cancelled_event.wait()


async def test_during_shutdown_a_handler_still_gets_the_clients_answer(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    asked, answer = trio.Event(), trio.Event()
    handlers = Handlers()

    @handlers.on_request("sampling/createMessage")
    async def sample(ctx: Any) -> dict[str, Any]:
        asked.set()
        await answer.wait()
        return {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, handlers=handlers, connection_config=client_connection_config("legacy")
        ) as client:
            results: list[str] = []

            async def request() -> None:
                results.append(text_of(await client.request("tools/call", call("sample"))))

            async with trio.open_nursery() as inner:
                inner.start_soon(request)
                await asked.wait()
                inner.start_soon(server.aclose)
                await trio.testing.wait_all_tasks_blocked()
                with pytest.raises(McpError) as refused:
                    await client.request("tools/call", call("echo", text="new work"))
                assert refused.value.error.data == {"httpStatus": 503}
                answer.set()  # the answer is a POST too, and it is taken
            assert results == ["late"]

"""The session runtime over the in-memory transport: requests, errors, handlers, closing.

Every timeout and cancellation path runs on the ``autojump_clock``; nothing sleeps to
wait for something to happen.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import (
    ConnectionConfig,
    Era,
    ErrorCode,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
)
from mcp_trio import (
    Handlers,
    HandshakeFailed,
    InputRequiredResult,
    McpError,
    NotificationContext,
    RequestContext,
    RequestTimeout,
    Session,
    SessionClosed,
    SessionConfig,
    StreamChannel,
    memory_channel_pair,
    open_memory_pair,
    open_session,
)

from .helpers import client_config, server_config


def tools() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        name = ctx.params["name"]
        args = ctx.params.get("arguments", {})
        if name == "echo":
            return {"content": [{"type": "text", "text": args["text"]}]}
        if name == "crash":
            raise ValueError("secret detail")
        if name == "refuse":
            raise McpError.from_code(-32602, "no such tool", {"tool": "refuse"})
        if name == "sleep":
            await trio.sleep(args["seconds"])
            return {"content": [], "slept": args["seconds"]}
        if name == "not-a-dict":
            return ["a", "list"]  # type: ignore[return-value]
        if name == "raw-input-required":  # MRTR goes through InputRequiredResult
            return {"resultType": "input_required", "requestState": "made up"}
        if name == "group":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_fail)
                await trio.sleep_forever()
        raise AssertionError(name)

    return handlers


async def _fail() -> None:
    raise KeyError("inner")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize("era", ["legacy", "modern", "auto"])
async def test_handshake_and_request_in_each_era(era: str) -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(era=era),
    ) as (client, server):
        assert client.handshake is not None
        expected = Era.LEGACY if era == "legacy" else Era.MODERN
        assert client.handshake.era is expected
        assert client.connection.era is expected
        assert client.handshake.peer_info == {"name": "test-server", "version": "1"}
        result = await client.request("tools/call", call("echo", text="hi"))
        assert result["content"] == [{"type": "text", "text": "hi"}]
        stats = client.statistics()
        assert stats.role == "client" and stats.era is expected and not stats.closed
        assert server.statistics().running_handlers == 0


async def test_handler_exception_becomes_internal_error_and_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        with pytest.raises(McpError) as info:
            await client.request("tools/call", call("crash"))
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert info.value.message == "Internal error"
        assert "secret" not in str(info.value.error.to_wire())
        assert "secret detail" in caplog.text  # the traceback is logged, not sent
        result = await client.request("tools/call", call("echo", text="still here"))
        assert result["content"][0]["text"] == "still here"


async def test_a_raw_input_required_dict_is_an_internal_error() -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(era="modern"),
    ) as (client, _server):
        with pytest.raises(McpError) as info:
            await client.request("tools/call", call("raw-input-required"))
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        result = await client.request("tools/call", call("echo", text="still here"))
        assert result["content"][0]["text"] == "still here"


async def test_handler_exception_group_and_bad_result_are_internal_errors() -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        for name in ("group", "not-a-dict"):
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call(name))
            assert info.value.code == ErrorCode.INTERNAL_ERROR


async def test_mcp_error_from_handler_reaches_the_caller() -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        with pytest.raises(McpError) as info:
            await client.request("tools/call", call("refuse"))
        assert (info.value.code, info.value.message) == (-32602, "no such tool")
        assert info.value.data == {"tool": "refuse"}


async def test_unknown_method_is_method_not_found() -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        for method in ("tools/list", "vendor/custom"):
            with pytest.raises(McpError) as info:
                await client.request(method)
            assert info.value.code == ErrorCode.METHOD_NOT_FOUND
            assert method in info.value.message


async def test_progress_reaches_the_callback_and_context_fields() -> None:
    handlers = Handlers()
    seen: dict[str, Any] = {}

    @handlers.on_request("tools/call")
    async def slow(ctx: RequestContext) -> dict[str, Any]:
        seen.update(
            era=ctx.era,
            version=ctx.protocol_version,
            token=ctx.progress_token,
            method=ctx.method,
            caps=ctx.client_capabilities,
            responses=ctx.input_responses,
            state=ctx.request_state,
            cancelled=ctx.cancelled,
        )
        assert ctx.event.request_id == ctx.request_id
        for step in (1, 2, 3):
            assert await ctx.report_progress(step, 3, f"step {step}")
        with pytest.raises(LocalProtocolError):
            await ctx.report_progress(1)  # must increase
        return {"content": []}

    reports: list[ProgressReceived] = []

    async def on_progress(event: ProgressReceived) -> None:
        reports.append(event)

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        await client.request("tools/call", call("x"), on_progress=on_progress)
        assert [(r.progress, r.total, r.message) for r in reports] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]
        assert seen["era"] is Era.LEGACY and seen["token"] is not None
        assert seen["method"] == "tools/call" and seen["cancelled"] is False


async def test_progress_without_token_is_a_no_op() -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def quiet(ctx: RequestContext) -> dict[str, Any]:
        return {"sent": await ctx.report_progress(1)}

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        assert await client.request("tools/call", call("x")) == {"sent": False}


async def test_notifications_and_logs_both_ways() -> None:
    got = trio.Event()
    received: list[NotificationContext] = []
    server_handlers = Handlers()
    client_handlers = Handlers()

    @server_handlers.on_notification("notifications/roots/list_changed")
    async def roots_changed(ctx: NotificationContext) -> None:
        received.append(ctx)
        got.set()

    @server_handlers.on_request("tools/call")
    async def logs(ctx: RequestContext) -> dict[str, Any]:
        assert await ctx.log("warning", {"note": "careful"}, logger="tool")
        return {}

    @client_handlers.on_notification("notifications/message")
    async def on_log(ctx: NotificationContext) -> None:
        received.append(ctx)

    @client_handlers.on_notification("notifications/boom")
    async def broken(ctx: NotificationContext) -> None:
        raise RuntimeError("a notification handler failed")

    async with open_memory_pair(
        server_handlers=server_handlers,
        client_handlers=client_handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        await client.notify("notifications/roots/list_changed")
        await got.wait()
        await client.request("tools/call", call("x"))
        await server.notify("notifications/boom")  # logged, nothing else happens
        await server.notify("notifications/unhandled")
        await trio.testing.wait_all_tasks_blocked()
        assert [c.method for c in received] == [
            "notifications/roots/list_changed",
            "notifications/message",
        ]
        assert received[1].params == {
            "level": "warning",
            "data": {"note": "careful"},
            "logger": "tool",
        }
        assert await server.log("info", "session-wide")
        assert received[0].session is server
        # still serving after the failed notification handler
        assert await client.request("tools/call", call("x")) == {}


async def test_server_to_client_request_in_a_legacy_session() -> None:
    server_handlers = Handlers()
    client_handlers = Handlers()

    @client_handlers.on_request("roots/list")
    async def roots(ctx: RequestContext) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}

    @server_handlers.on_request("tools/call")
    async def asks_back(ctx: RequestContext) -> dict[str, Any]:
        answer = await ctx.session.request("roots/list")
        return {"content": [{"type": "text", "text": answer["roots"][0]["uri"]}]}

    async with open_memory_pair(
        server_handlers=server_handlers,
        client_handlers=client_handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        result = await client.request("tools/call", call("x"))
        assert result["content"][0]["text"] == "file:///tmp"


async def test_slow_handler_does_not_stop_others(autojump_clock: trio.testing.MockClock) -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        results: list[str] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/call", call("sleep", seconds=1000))
            await trio.testing.wait_all_tasks_blocked()
            for i in range(5):
                result = await client.request("tools/call", call("echo", text=str(i)))
                results.append(result["content"][0]["text"])
            assert trio.current_time() < 1  # none of them waited for the slow one
            assert server.statistics().running_handlers == 1
            nursery.cancel_scope.cancel()
        assert results == ["0", "1", "2", "3", "4"]


async def test_flood_beyond_the_limiter_is_served_as_capacity_frees(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()
    started = 0
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def gated(ctx: RequestContext) -> dict[str, Any]:
        nonlocal started
        started += 1
        await release.wait()
        assert ctx.params is not None
        return {"n": ctx.params["n"]}

    results: list[int] = []

    async def one(n: int) -> None:
        results.append((await client.request("tools/call", {"name": "x", "n": n}))["n"])

    async with open_memory_pair(
        server_handlers=handlers,
        server_config=SessionConfig(max_concurrent_handlers=3, max_unanswered_requests=5),
        client_config=SessionConfig(memory_buffer_size=1),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        async with trio.open_nursery() as nursery:
            for n in range(50):
                nursery.start_soon(one, n)
            await trio.testing.wait_all_tasks_blocked()
            # three run, two wait their turn, the reader waits for a backlog slot and
            # stopped reading: the client's writes back up instead of queueing on the
            # server.
            assert started == 3
            assert server.statistics().running_handlers == 3
            assert server.statistics().max_concurrent_handlers == 3
            assert len(server.connection.inflight_requests()) <= 6
            assert client.statistics().queued_messages > 0
            release.set()
        assert sorted(results) == list(range(50))
        assert started == 50
        assert client.connection.pending_requests() == ()
        assert server.connection.inflight_requests() == ()


async def test_peer_cancellation_cancels_the_handler_and_nothing_is_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handler_cancelled = trio.Event()
    handlers = Handlers()
    contexts: list[RequestContext] = []

    @handlers.on_request("tools/call")
    async def forever(ctx: RequestContext) -> dict[str, Any]:
        contexts.append(ctx)
        try:
            await trio.sleep_forever()
        finally:
            handler_cancelled.set()
        raise AssertionError("unreachable")

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        with trio.move_on_after(5) as scope:
            await client.request("tools/call", call("x"))
        assert scope.cancelled_caught
        with trio.fail_after(5):  # (the cancellation never sent: fail, not hang)
            await handler_cancelled.wait()
        assert contexts[0].cancelled
        assert not await contexts[0].report_progress(1)
        await trio.testing.wait_all_tasks_blocked()
        assert client.connection.pending_requests() == ()
        assert server.connection.inflight_requests() == ()
        assert server.statistics().running_handlers == 0
        # the session goes on
        handlers.set_request_handler("tools/call", tools().request_handler("tools/call"))
        assert (await client.request("tools/call", call("echo", text="ok")))["content"]


async def test_request_timeout_from_the_core(autojump_clock: trio.testing.MockClock) -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        start = trio.current_time()
        with pytest.raises(RequestTimeout) as info:
            await client.request("tools/call", call("sleep", seconds=100), timeout=7)
        assert isinstance(info.value, trio.TooSlowError)
        assert info.value.method == "tools/call"
        assert trio.current_time() - start == pytest.approx(7)
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().running_handlers == 0  # cancelled on the wire


async def test_timeout_is_reset_by_progress_and_capped_in_total(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def steady(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        for step in range(ctx.params["steps"]):
            await trio.sleep(3)
            await ctx.report_progress(step + 1)
        return {"done": True}

    async def on_progress(event: ProgressReceived) -> None:
        pass

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(request_timeout=5, max_request_time=20),
    ) as (client, _server):
        # 4 x 3 s = 12 s > 5 s, but progress keeps it alive
        result = await client.request(
            "tools/call", {"name": "x", "steps": 4}, on_progress=on_progress
        )
        assert result == {"done": True}
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.request("tools/call", {"name": "x", "steps": 10}, on_progress=on_progress)
        assert trio.current_time() - start == pytest.approx(20)


async def test_closing_fails_every_waiter_with_one_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    errors: list[BaseException] = []

    async def waiter() -> None:
        try:
            await client.request("tools/call", call("sleep", seconds=1000))
        except SessionClosed as exc:
            errors.append(exc)

    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().running_handlers == 10
            await server.aclose()
        assert len(errors) == 10
        assert all(type(e) is SessionClosed for e in errors)
        assert "peer closed" in str(errors[0])
        assert client.closed and client.close_reason is not None
        with pytest.raises(SessionClosed):
            await client.request("tools/call", call("echo", text="x"))
        with pytest.raises(SessionClosed):
            await client.notify("notifications/roots/list_changed")
        assert not await server.log("info", "nobody listens")
        assert server.statistics().running_handlers == 0
        assert client.connection.pending_requests() == ()


async def test_local_close_fails_local_waiters(autojump_clock: trio.testing.MockClock) -> None:
    async with open_memory_pair(
        server_handlers=tools(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        async with trio.open_nursery() as nursery:

            async def close_soon() -> None:
                await trio.sleep(1)
                await client.aclose()

            nursery.start_soon(close_soon)
            with pytest.raises(SessionClosed, match="closed locally"):
                await client.request("tools/call", call("sleep", seconds=1000))
        await client.aclose()  # idempotent
        await client.wait_closed()


async def test_body_exception_is_not_wrapped_in_a_group() -> None:
    with pytest.raises(KeyError) as info:
        async with open_memory_pair(
            server_handlers=tools(),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ):
            raise KeyError("mine")
    assert type(info.value) is KeyError


async def test_cancelled_body_propagates_cancellation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.move_on_after(1) as scope:
        async with open_memory_pair(
            server_handlers=tools(),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, _server):
            await client.request("tools/call", call("sleep", seconds=1000))
    assert scope.cancelled_caught


async def test_handshake_failure_is_clear() -> None:
    with pytest.raises(HandshakeFailed) as info:
        async with open_memory_pair(
            server_connection_config=server_config(era="legacy"),
            client_connection_config=client_config(era="modern"),
        ):
            raise AssertionError("unreachable")
    assert info.value.code in (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_PARAMS)


async def test_start_twice_is_a_local_error() -> None:
    async with open_memory_pair(
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        with pytest.raises(LocalProtocolError):
            await client.start()
        with pytest.raises(LocalProtocolError):
            await server.start()


async def test_handshake_completed_on_the_server_side() -> None:
    async with open_memory_pair(
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        await client.request("ping")
        assert server.handshake is not None
        assert server.handshake.peer_info == {"name": "test-client", "version": "1"}


async def test_user_handler_nursery_tasks_end_with_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The handler runs in a nursery the caller owns; closing the session cancels it.
    cancelled = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def forever(ctx: RequestContext) -> dict[str, Any]:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    a, b = memory_channel_pair()
    async with trio.open_nursery() as user_nursery:
        async with (
            open_session(
                b,
                "server",
                handlers=handlers,
                connection_config=server_config(),
                handler_nursery=user_nursery,
            ),
            open_session(a, "client", connection_config=client_config()) as client,
        ):
            await client.start()
            with trio.move_on_after(1):
                await client.request("tools/call", call("x"))
            # move_on cancelled the request: the handler is cancelled by the peer
            with trio.fail_after(5):  # (the cancellation never sent: fail, not hang)
                await cancelled.wait()
            cancelled = trio.Event()
            client_nursery_done = trio.Event()

            async def caller() -> None:
                with pytest.raises(SessionClosed):
                    await client.request("tools/call", call("x"))
                client_nursery_done.set()

            user_nursery.start_soon(caller)
            await trio.testing.wait_all_tasks_blocked()
        await cancelled.wait()
        await client_nursery_done.wait()


def test_session_config_validates() -> None:
    with pytest.raises(ValueError, match="max_concurrent_handlers"):
        SessionConfig(max_concurrent_handlers=0)
    with pytest.raises(ValueError, match="shutdown_grace_period"):
        SessionConfig(shutdown_grace_period=-1)
    assert SessionConfig(write_timeout=None).write_timeout is None


def test_handlers_table() -> None:
    handlers = Handlers()

    async def h(ctx: RequestContext) -> dict[str, Any]:
        return {}

    async def n(ctx: NotificationContext) -> None:
        pass

    handlers.set_request_handler("a", h)
    handlers.set_notification_handler("b", n)
    assert handlers.request_handler("a") is h
    assert handlers.notification_handler("b") is n
    handlers.set_request_handler("a", None)
    handlers.set_notification_handler("b", None)
    assert handlers.request_handler("a") is None
    assert handlers.notification_handler("b") is None
    assert Handlers({"a": h}, {"b": n}).request_handler("a") is h


def test_mcp_error_fields() -> None:
    err = McpError.from_code(-1, "m", [1])
    assert (err.code, err.message, err.data) == (-1, "m", [1])
    assert "m (code -1)" in str(err)


def test_connection_config_defaults_are_usable() -> None:
    assert ConnectionConfig().max_message_size > 0


async def test_input_required_result_round_trip_between_sessions() -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def greet(ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        if ctx.input_responses is None:
            ask = {"where": {"method": "roots/list", "params": {}}}
            return InputRequiredResult(input_requests=ask, state={"asked": 1})
        assert ctx.request_state == {"asked": 1}
        roots = ctx.input_responses["where"]["roots"]
        return {"content": [{"type": "text", "text": roots[0]["uri"]}]}

    asked: list[InputRequired] = []

    async def provide(event: InputRequired) -> dict[str, Any]:
        asked.append(event)
        return {"where": {"roots": [{"uri": "file:///srv"}]}}

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(era="modern"),
    ) as (client, _server):
        result = await client.request("tools/call", call("greet"), on_input_required=provide)
        assert result["content"][0]["text"] == "file:///srv"
        assert [e.round for e in asked] == [1]


async def test_request_on_sent_reports_each_id_before_it_is_answered() -> None:
    # The id of the request, then of its retry with input: each reported as the core
    # gives it, before the server sees that request.
    sent: list[Any] = []
    seen: list[tuple[Any, list[Any]]] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def greet(ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        seen.append((ctx.request_id, list(sent)))
        if ctx.input_responses is None:
            ask = {"where": {"method": "roots/list", "params": {}}}
            return InputRequiredResult(input_requests=ask, state={"asked": 1})
        return {"content": []}

    async def provide(event: InputRequired) -> dict[str, Any]:
        return {"where": {"roots": []}}

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(era="modern"),
    ) as (client, _server):
        await client.request(
            "tools/call", call("greet"), on_input_required=provide, on_sent=sent.append
        )
    first, retry = sent
    assert first != retry
    assert seen == [(first, [first]), (retry, [first, retry])]


async def test_input_required_result_in_the_legacy_era_is_an_internal_error() -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def greet(ctx: RequestContext) -> InputRequiredResult:
        return InputRequiredResult(input_requests={})

    async with open_memory_pair(
        server_handlers=handlers,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        with pytest.raises(McpError) as info:
            await client.request("tools/call", call("greet"))
        assert info.value.code == ErrorCode.INTERNAL_ERROR


async def test_requests_beyond_the_running_slots_wait_in_order_and_the_reader_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With every running slot busy, requests wait their turn in order; the reader
    reads on (an answer the busy handler waits for comes later), a waiting request the
    peer cancels never starts, and the close gives back their slots."""
    order: list[int] = []
    release = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        order.append(ctx.params["n"])
        if ctx.params["n"] == 0:
            roots = await ctx.send_request("roots/list")  # answered after the others
            assert roots["roots"] == []
        await release.wait()
        return {"n": ctx.params["n"]}

    client_handlers = Handlers()

    @client_handlers.on_request("roots/list")
    async def roots(ctx: RequestContext) -> dict[str, Any]:
        return {"roots": []}

    results: list[int] = []

    async def one(n: int, scope: trio.CancelScope | None = None) -> None:
        with scope or trio.CancelScope():
            results.append((await client.request("tools/call", {"name": "x", "n": n}))["n"])

    async with open_memory_pair(
        server_handlers=handlers,
        client_handlers=client_handlers,
        server_config=SessionConfig(max_concurrent_handlers=1),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, 0)
            await trio.testing.wait_all_tasks_blocked()
            cancelled = trio.CancelScope()
            nursery.start_soon(one, 1, cancelled)
            await trio.testing.wait_all_tasks_blocked()
            for n in (2, 3):
                nursery.start_soon(one, n)
                await trio.testing.wait_all_tasks_blocked()
            assert order == [0]  # the roots/list answer was read past the waiting ones
            assert server.statistics().waiting_handlers == 3
            cancelled.cancel()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert order == [0, 2, 3]
        assert sorted(results) == [0, 2, 3]
        assert server.statistics().waiting_handlers == 0
        # Requests still waiting when the session closes give their slots back.
        release = trio.Event()

        async def unanswered(n: int) -> None:
            with pytest.raises(SessionClosed):
                await client.request("tools/call", {"name": "x", "n": n})

        async with trio.open_nursery() as nursery:
            for n in (4, 5, 6):
                nursery.start_soon(unanswered, n)
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().waiting_handlers == 2
            await server.aclose()
        assert server.statistics().waiting_handlers == 0
        assert server._pool._started == 0


async def test_many_waiting_requests_cancelled_by_the_peer_are_skipped_in_a_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        await release.wait()
        return {}

    async with open_memory_pair(
        server_handlers=handlers,
        server_config=SessionConfig(max_concurrent_handlers=1),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/call", {"name": "x"})
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as waiting:
                for _ in range(600):  # each one waiting behind the first
                    waiting.start_soon(client.request, "tools/call", {"name": "x"})
                await trio.testing.wait_all_tasks_blocked()
                assert server.statistics().waiting_handlers == 600
                waiting.cancel_scope.cancel()  # the client cancels them all
            await trio.testing.wait_all_tasks_blocked()
            release.set()  # the first ends: the cancelled ones are skipped, none started
        assert server.statistics().waiting_handlers == 0
        assert server.statistics().running_handlers == 0


_TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="unset")


@pytest.mark.parametrize("transport", ["memory", "stdio"])
async def test_a_waiting_request_starts_in_the_readers_context(
    autojump_clock: trio.testing.MockClock, transport: str
) -> None:
    """A request that waited for a running slot is started from the task of the
    handler that gave the slot back: it must not see that handler's contextvars."""
    seen: dict[int, str] = {}
    release = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        n = ctx.params["n"]
        seen[n] = _TENANT.get()
        _TENANT.set(f"tenant of request {n}")
        await release.wait()
        return {}

    config = SessionConfig(max_concurrent_handlers=1)
    if transport == "memory":
        pair = open_memory_pair(
            server_handlers=handlers,
            server_config=config,
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        )
    else:
        to_server, server_in = trio.testing.memory_stream_one_way_pair()
        server_out, from_server = trio.testing.memory_stream_one_way_pair()
        pair = _stdio_pair(handlers, config, to_server, server_in, server_out, from_server)
    async with pair as (client, _server), trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(client.request, "tools/call", {"name": "x", "n": n})
            await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert seen == {0: "unset", 1: "unset", 2: "unset"}


@asynccontextmanager
async def _stdio_pair(
    handlers: Handlers,
    config: SessionConfig,
    to_server: trio.abc.SendStream,
    server_in: trio.abc.ReceiveStream,
    server_out: trio.abc.SendStream,
    from_server: trio.abc.ReceiveStream,
) -> AsyncIterator[tuple[Session, Session]]:
    """A client and a server session over NDJSON byte streams (stdio's framing)."""
    async with (
        open_session(
            StreamChannel(server_out, server_in),
            "server",
            handlers=handlers,
            config=config,
            connection_config=server_config(),
        ) as server,
        open_session(
            StreamChannel(to_server, from_server),
            "client",
            connection_config=client_config(),
        ) as client,
    ):
        await client.start()
        yield client, server


async def test_a_notification_behind_busy_slots_does_not_stall_the_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The only running slot waits for the client's roots/list answer, and the client
    sends a notification (with a handler here) before that answer: the notification
    runs on its backlog slot alone and the reader reads on to the answer."""
    changes: list[str] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        roots = await ctx.send_request("roots/list")
        return {"n": len(roots["roots"])}

    @handlers.on_notification("notifications/roots/list_changed")
    async def changed(ctx: NotificationContext) -> None:
        changes.append(ctx.method)

    client_handlers = Handlers()

    @client_handlers.on_request("roots/list")
    async def roots(ctx: RequestContext) -> dict[str, Any]:
        await ctx.session.notify("notifications/roots/list_changed")
        return {"roots": [{"uri": "file:///w"}]}

    async with open_memory_pair(
        server_handlers=handlers,
        client_handlers=client_handlers,
        server_config=SessionConfig(max_concurrent_handlers=1),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        result = await client.request("tools/call", {"name": "x"})
        assert result["n"] == 1
        assert trio.current_time() == 0  # no timeout was waited out
        assert changes == ["notifications/roots/list_changed"]
        await trio.testing.wait_all_tasks_blocked()
        assert server._pool._started == 0 and server._pool._computing == 0


async def test_a_server_counts_request_state_expiry_in_wall_clock_time() -> None:
    # trio.current_time() has an origin of its own in each process: processes that share
    # request_state_key could not open each other's states. A clock given is kept.
    async with open_memory_pair(
        server_connection_config=server_config(), client_connection_config=client_config()
    ) as (client, server):
        assert server.connection.config.request_state_clock is time.time
        assert client.connection.config.request_state_clock is None
    mine = server_config(request_state_clock=lambda: 5.0)
    async with open_memory_pair(server_connection_config=mine) as (_client, server):
        assert server.connection.config.request_state_clock is mine.request_state_clock

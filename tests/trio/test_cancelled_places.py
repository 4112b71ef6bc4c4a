"""A request the peer cancels holds its place against ``max_inflight_requests`` in the
core until it is answered (the answer is dropped): the binding frees it when the
handler ends, or when the request never starts, so cancellations never use up the
places of the requests that follow."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from mcp_sansio import Connection
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpServerConfig
from mcp_trio import (
    Handlers,
    HttpServeHandle,
    RequestContext,
    SessionConfig,
    open_memory_pair,
    serve_http,
    serve_stdio,
)
from mcp_trio._pool import drop_cancelled
from tests.core.test_connection_legacy import ready_pair

from .helpers import client_config, server_config
from .test_http_support import (
    IO_TIMEOUT,
    POST_HEADERS,
    App,
    RawConnection,
    call,
    raw_request,
    raw_session,
    rpc,
    server_connection_config,
    session_headers,
    text_of,
)
from .test_stdio import _initialize, _Pipe


def _call(rid: int, name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}}


def pipe_line(obj: Any) -> bytes:
    return dumps(obj) + b"\n"


def _cancel(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


async def test_cancelled_requests_give_their_places_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        if (ctx.params or {}).get("name") == "slow":
            await trio.sleep(1000)
        return {"content": []}

    pipe = _Pipe()
    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: serve_stdio(
                handlers,
                connection_config=server_config(max_inflight_requests=2),
                stdin=pipe.server_stdin,
                stdout=pipe.server_stdout,
                task_status=task_status,
            )
        )
        await pipe.send(_initialize(1))
        await pipe.receive()
        await pipe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for rid in range(10, 15):  # more cancellations than places
            await pipe.send(_call(rid, "slow"))  # started, then cancelled
            await trio.testing.wait_all_tasks_blocked()
            await pipe.send(_cancel(rid))
            # cancelled in the same read: it never starts
            await pipe.to_server.send_all(
                b"".join(pipe_line(m) for m in (_call(rid + 100, "slow"), _cancel(rid + 100)))
            )
            await trio.testing.wait_all_tasks_blocked()
        await pipe.send(_call(10, "fast"))  # a cancelled id, once it is freed, is free
        assert await pipe.receive() == {"jsonrpc": "2.0", "id": 10, "result": {"content": []}}
        await pipe.to_server.aclose()


async def test_cancelled_http_requests_give_their_places_back(nursery: trio.Nursery) -> None:
    # The same over Streamable HTTP, legacy session (a notifications/cancelled POST).
    app = App()
    server: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            app.handlers,
            connection_config=server_connection_config(max_inflight_requests=1),
            http_config=HttpServerConfig(response_mode="json"),
        )
    )
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        for rid in range(7, 10):
            conn = await RawConnection.open(server.port)
            try:
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", call("block")))
                await app.started_event.wait()
                app.started_event = trio.Event()
                accepted = await raw_request(server.port, "POST", headers=headers, body=_note(rid))
                assert accepted.status == 202
                assert (await conn.response()).body == b""
            finally:
                await conn.aclose()
        body = rpc(7, "tools/call", call("echo", text="hi"))
        response = await raw_request(server.port, "POST", headers=headers, body=body)
    assert app.cancelled == [7, 8, 9]
    assert text_of(loads(response.body)["result"]) == "hi"


def _note(rid: int) -> bytes:
    return pipe_line(_cancel(rid))


def _cleanup_handlers(started: trio.Event, release: trio.Event) -> Handlers:
    """A ``tools/call`` whose "slow" call runs until cancelled, then cleans up until
    ``release`` is set (shielded): its task ends well after the cancellation."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        if (ctx.params or {}).get("name") == "slow":
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(10):
                    await release.wait()  # (bounded: a failing test does not hang)
        return {"content": []}

    return handlers


async def test_a_cancelled_request_frees_its_place_when_the_cancel_arrives() -> None:
    # At max_inflight_requests=1, a request sent right after a cancellation was refused
    # (-32603 "Too many requests in flight") while the cancelled handler still ran its
    # cleanup: the place came back only when that task ended.
    started, release = trio.Event(), trio.Event()
    async with open_memory_pair(
        server_handlers=_cleanup_handlers(started, release),
        client_connection_config=client_config(),
        server_connection_config=server_config(max_inflight_requests=1),
    ) as (client, _server):
        scope = trio.CancelScope()

        async def cancel_when_started() -> None:
            await started.wait()
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_when_started)
            with scope:  # (the cancellation goes out before the next request)
                await client.request("tools/call", {"name": "slow"})
            assert await client.request("tools/call", {"name": "fast"}) == {"content": []}
            release.set()


async def test_a_cancelled_request_waiting_for_a_slot_frees_its_place_at_once() -> None:
    # One handler runs at a time: the second request waits for its slot. Cancelled
    # there, it never starts, and its place is free before the running one ends.
    started, release = trio.Event(), trio.Event()
    async with (
        open_memory_pair(
            server_handlers=_cleanup_handlers(started, release),
            client_connection_config=client_config(),
            server_config=SessionConfig(max_concurrent_handlers=1),
            server_connection_config=server_config(max_inflight_requests=2),
        ) as (client, server),
        trio.open_nursery() as nursery,
    ):
        first, second = trio.CancelScope(), trio.CancelScope()

        async def call(scope: trio.CancelScope, name: str) -> None:
            with scope:
                await client.request("tools/call", {"name": name})

        nursery.start_soon(call, first, "slow")
        await started.wait()
        nursery.start_soon(call, second, "fast")
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().waiting_handlers == 1
        second.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().waiting_handlers == 0
        third = trio.CancelScope()
        nursery.start_soon(call, third, "fast")  # a place is free: not refused
        await trio.testing.wait_all_tasks_blocked()
        assert server.connection.inflight_requests() != ()
        assert server.statistics().waiting_handlers == 1
        first.cancel()
        release.set()


async def test_a_cancelled_http_request_frees_its_place_when_the_cancel_arrives(
    nursery: trio.Nursery,
) -> None:
    # The same over Streamable HTTP (legacy session): the place came back only when
    # the cancelled handler's task ended, so the next POST was refused with -32603.
    started, release = trio.Event(), trio.Event()
    server: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            _cleanup_handlers(started, release),
            connection_config=server_connection_config(max_inflight_requests=1),
            http_config=HttpServerConfig(response_mode="json"),
        )
    )
    try:
        with trio.fail_after(IO_TIMEOUT):
            sid = await raw_session(server.port)
            headers = session_headers(sid)
            conn = await RawConnection.open(server.port)
            try:
                body = rpc(7, "tools/call", {"name": "slow"})
                await conn.send("POST", headers=headers, body=body)
                await started.wait()
                accepted = await raw_request(server.port, "POST", headers=headers, body=_note(7))
                assert accepted.status == 202
                body = rpc(8, "tools/call", {"name": "fast"})
                response = await raw_request(server.port, "POST", headers=headers, body=body)
                assert loads(response.body) == {
                    "jsonrpc": "2.0",
                    "id": 8,
                    "result": {"content": []},
                }
            finally:
                await conn.aclose()
    finally:
        release.set()


async def test_http_batches_cancelling_their_own_request_keep_being_served(
    nursery: trio.Nursery,
) -> None:
    # 2025-03-26: a batch [request X, cancel X] cancels X before its handler begins.
    # Each such request must give its place back, however many batches come.
    started, release = trio.Event(), trio.Event()
    release.set()
    server: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            _cleanup_handlers(started, release),
            connection_config=server_connection_config(max_inflight_requests=1),
            http_config=HttpServerConfig(response_mode="json"),
        )
    )
    params = {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    with trio.fail_after(IO_TIMEOUT):
        opened = await raw_request(server.port, "POST", body=rpc(1, "initialize", params))
        assert loads(opened.body)["result"]["protocolVersion"] == "2025-03-26"
        headers = (*POST_HEADERS, ("mcp-session-id", opened.headers["mcp-session-id"]))
        note = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert (await raw_request(server.port, "POST", headers=headers, body=note)).status == 202
        for rid in range(10, 14):  # more batches than places
            batch = dumps([_call(rid, "slow"), _cancel(rid)])
            await raw_request(server.port, "POST", headers=headers, body=batch)
        body = rpc(20, "tools/call", {"name": "fast"})
        response = await raw_request(server.port, "POST", headers=headers, body=body)
    assert loads(response.body) == {"jsonrpc": "2.0", "id": 20, "result": {"content": []}}
    assert not started.is_set()  # (each was cancelled before its handler began)


def test_drop_cancelled_leaves_a_request_in_flight_alone() -> None:
    # It is called again when a cancelled handler ends, by which time the peer may have
    # sent a new request under the freed id: that one must not be answered for it.

    server: Connection = ready_pair().server
    server.receive_message(dumps(_call(5, "x")), now=0.0)
    drop_cancelled(server, 5)
    assert server.data_to_send() == []
    assert server.request_era(5) is not None  # still in flight
    server.send_result(5, {"content": []})
    assert [loads(p)["id"] for p in server.data_to_send()] == [5]
    drop_cancelled(server, 5)  # answered already: no error, nothing sent
    assert server.data_to_send() == []

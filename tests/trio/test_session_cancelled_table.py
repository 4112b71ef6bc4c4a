"""After a session closes, the core keeps none of the peer's requests: those that a
close abandoned (or the peer cancelled) leave ``Connection.cancelled_requests()`` once
no answer can come, whether their handlers ran, waited for a slot, or were cut off."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio._errors import SHUTTING_DOWN
from mcp_trio import (
    Handlers,
    McpError,
    RequestContext,
    Session,
    SessionClosed,
    SessionConfig,
    open_memory_pair,
)

from .helpers import client_config, server_config


def _stuck(method: str, started: trio.Event) -> Handlers:
    handlers = Handlers()

    @handlers.on_request(method)
    async def stuck(ctx: RequestContext) -> dict[str, Any]:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    return handlers


async def _call(session: Session, method: str, params: dict[str, Any] | None = None) -> None:
    with suppress(SessionClosed, McpError):
        await session.request(method, params)


def _left(session: Session) -> tuple[Any, ...]:
    conn = session.connection
    return (*conn.inflight_requests(), *conn.cancelled_requests())


async def test_the_peer_leaving_leaves_no_request_in_the_server_s_tables(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One handler slot: one request runs, two wait for the slot when the peer leaves.
    started = trio.Event()
    async with (
        open_memory_pair(
            server_handlers=_stuck("tools/call", started),
            server_config=SessionConfig(max_concurrent_handlers=1),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, server),
        trio.open_nursery() as nursery,
    ):
        for _ in range(3):
            nursery.start_soon(_call, client, "tools/call", {"name": "stuck", "arguments": {}})
        await started.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.connection.inflight_requests()) == 3
        await client.channel.aclose()
        await server.wait_closed()
        assert _left(server) == ()


async def test_a_drain_leaves_no_request_in_the_server_s_tables(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The handler outlives the grace period: answered "server shutting down", then cut off.
    started = trio.Event()
    async with (
        open_memory_pair(
            server_handlers=_stuck("tools/call", started),
            server_config=SessionConfig(shutdown_grace_period=1),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, server),
        trio.open_nursery() as nursery,
    ):

        async def call() -> None:
            with pytest.raises(McpError) as caught:
                await client.request("tools/call", {"name": "stuck", "arguments": {}})
            assert (caught.value.code, caught.value.message) == SHUTTING_DOWN

        nursery.start_soon(call)
        await started.wait()
        await server._drain(SHUTTING_DOWN)
        server._close_locally()
        await server.wait_closed()
        assert _left(server) == ()


async def test_closing_a_client_leaves_no_server_request_in_its_tables(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The client's handler (an answer to the server's roots/list) runs when it closes.
    started = trio.Event()
    async with (
        open_memory_pair(
            client_handlers=_stuck("roots/list", started),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, server),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_call, server, "roots/list")
        await started.wait()
        assert len(client.connection.inflight_requests()) == 1
        await client.aclose()
        assert _left(client) == ()

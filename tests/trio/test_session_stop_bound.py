"""A server session's stop waits for its running handlers once: a graceful stop's drain
(``Session._drain``, what a WebSocket server's ``aclose`` runs) and a half-close's end of
input share one ``shutdown_grace_period``; any other end of input cancels them at once. On the
``autojump_clock``: the bounds are checked in Trio's virtual time."""

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
    StreamChannel,
    open_memory_pair,
)
from mcp_trio._open import open_session

from .helpers import client_config, server_config

GRACE = 10.0
ABANDON = 1.0


def _stuck(started: trio.Event) -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def stuck(ctx: RequestContext) -> dict[str, Any]:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    return handlers


async def _call(client: Session) -> None:
    with suppress(SessionClosed):  # (the peer that leaves: its request fails)
        await client.request("tools/call", {"name": "stuck", "arguments": {}})


async def _call_answered(client: Session) -> None:
    with pytest.raises(McpError) as caught:  # (the end of the drain answers it)
        await client.request("tools/call", {"name": "stuck", "arguments": {}})
    assert (caught.value.code, caught.value.message) == SHUTTING_DOWN


async def _stop(server: Session) -> None:
    """What a WebSocket server's graceful stop does to each session."""
    await server._drain(SHUTTING_DOWN)
    if not server.closed:
        server._close_locally()


async def test_the_peer_half_closing_during_a_drain_starts_no_second_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A half-closing channel (stdio's framing): the end of input leaves the handlers
    # their grace, which the drain already started.
    started = trio.Event()
    config = SessionConfig(shutdown_grace_period=GRACE, abandon_write_timeout=ABANDON)
    to_server, server_in = trio.testing.memory_stream_one_way_pair()
    server_out, from_server = trio.testing.memory_stream_one_way_pair()
    async with (
        open_session(
            StreamChannel(server_out, server_in),
            "server",
            handlers=_stuck(started),
            config=config,
            connection_config=server_config(),
        ) as server,
        open_session(
            StreamChannel(to_server, from_server), "client", connection_config=client_config()
        ) as client,
        trio.open_nursery() as nursery,
    ):
        await client.start()
        nursery.start_soon(_call_answered, client)
        await started.wait()
        begin = trio.current_time()
        nursery.start_soon(_stop, server)
        await trio.sleep(GRACE - 1)
        await to_server.aclose()  # the peer ends its output, its request still running
        await server.wait_closed()
        took = trio.current_time() - begin
        assert GRACE <= took <= GRACE + ABANDON


async def test_the_peer_leaving_during_a_drain_cancels_its_handlers_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # In memory the peer's end of input means it is gone: nothing waits for the grace.
    started = trio.Event()
    config = SessionConfig(shutdown_grace_period=GRACE, abandon_write_timeout=ABANDON)
    async with (
        open_memory_pair(
            server_handlers=_stuck(started),
            server_config=config,
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, server),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_call, client)
        await started.wait()
        begin = trio.current_time()
        nursery.start_soon(_stop, server)
        await trio.sleep(GRACE - 1)
        await client.channel.aclose()  # the peer leaves, its request still running
        await server.wait_closed()
        assert trio.current_time() - begin == GRACE - 1
        assert server.statistics().running_handlers == 0


async def test_a_drain_alone_answers_shutting_down_after_one_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started = trio.Event()
    config = SessionConfig(shutdown_grace_period=GRACE, abandon_write_timeout=ABANDON)
    async with open_memory_pair(
        server_handlers=_stuck(started),
        server_config=config,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        begin: list[float] = []

        async def stop_once_started() -> None:
            await started.wait()
            begin.append(trio.current_time())
            await _stop(server)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_once_started)
            with pytest.raises(McpError) as caught:
                await client.request("tools/call", {"name": "stuck", "arguments": {}})
            answered = trio.current_time() - begin[0]
            await server.wait_closed()
        assert (caught.value.code, caught.value.message) == SHUTTING_DOWN
        assert answered == GRACE
        assert trio.current_time() - begin[0] <= GRACE + ABANDON


async def test_a_drain_refuses_at_once_the_requests_waiting_for_a_handler_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One handler slot: the second request waits for it. A graceful stop answers it
    # "server shutting down" at once rather than start it once the first one ends.
    started = trio.Event()
    config = SessionConfig(
        shutdown_grace_period=GRACE, abandon_write_timeout=ABANDON, max_concurrent_handlers=1
    )
    async with open_memory_pair(
        server_handlers=_stuck(started),
        server_config=config,
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        refused: list[float] = []

        async def refused_call() -> None:
            with pytest.raises(McpError) as caught:
                await client.request("tools/call", {"name": "stuck", "arguments": {}})
            assert (caught.value.code, caught.value.message) == SHUTTING_DOWN
            refused.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(refused_call)  # (after the grace period)
            await started.wait()
            nursery.start_soon(refused_call)  # (at once)
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().running_handlers == 1
            begin = trio.current_time()
            nursery.start_soon(_stop, server)
        assert refused == [begin, begin + GRACE]

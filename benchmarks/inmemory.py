"""Group ``inmemory``: ``mcp_trio`` sessions over in-memory channels, against a Trio floor.

Every case does ``tools/call`` round trips in one process and one ``trio.run`` (a thread
of its own, see :mod:`benchmarks._trio`): the 159-byte request, the 1 KB result.

``inmemory.floor`` / ``inmemory.floor.100``
    The least a concurrent JSON-RPC client and server can do over the same transport:
    two ``trio.open_memory_channel`` of ``bytes`` (256 messages each way, the binding's
    default), the caller ``orjson.dumps`` its request with a fresh id and waits on a
    ``trio.Event``, a server task ``loads`` it and ``dumps`` the canned result under its
    id, the client's reader task ``loads`` the answer and wakes the caller by id. One
    call at a time, or 100 tasks calling at once.
``inmemory.floor.tight`` / ``inmemory.floor.tight.100``
    The same floor (a server task, a client reader task, a ``trio.Event`` per id) through
    Trio's calls that do not yield when they need not, as mcp_trio does: the caller and
    the server ``send_nowait`` (``await send`` only on a full channel), the server and
    the reader ``receive_nowait`` (``await receive`` only on an empty one). Trio's
    ``send_nowait`` hands a message straight to a receiver parked on the channel. This
    is the honest lower bound: ``inmemory.roundtrip*`` report their ratio to it beside
    the target's ratio to ``inmemory.floor*``.
``inmemory.floor.task``
    The floor whose server spawns one task per request (``nursery.start_soon``), as a
    server must to run handlers concurrently and cancel one of them: informational,
    it shows how much of the gap that structure costs.
``inmemory.floor.scope``
    ``floor.task`` whose task runs the answer in a ``trio.CancelScope`` of its own, as the
    binding does so that the peer can cancel one request (informational: the least a server
    built that way needs; its ratio to the floor is the part of ours that structure costs).
``inmemory.roundtrip`` / ``inmemory.roundtrip.100``
    ``mcp_trio.open_memory_pair`` with the low-level ``Handlers`` (one ``tools/call``
    handler returning the canned dict) and ``Session.request``; legacy era, so the bytes
    are the workload's.
``inmemory.roundtrip.modern``
    The same, client pinned to the modern era (``_meta`` envelope, heavier result):
    informational.
``inmemory.client``
    The high-level API: ``mcp_trio.Server`` with a ``get_forecast`` tool and
    ``open_client(server).call_tool(...)`` (argument validation, ``ToolOutput``); its
    reference is ``inmemory.roundtrip``, so the ratio is the API's overhead.
``inmemory.rss_growth``
    Resident memory of this process (``VmRSS``) over 10,000 round trips, after 10,000
    warm-up ones (one fixture for every sample: the warm-up is done once).
"""

from __future__ import annotations

import functools
from typing import Final

import trio

import mcp_trio
from mcp_sansio import ConnectionConfig

from ._harness import Case, Settings, Skip, TimedCase
from ._servers import (
    CLIENT_CONFIG,
    MODERN_CLIENT_CONFIG,
    SERVER_CONFIG,
    call_tool_fixture,
    high_level_server,
    low_level_handlers,
)
from ._trio import (
    RSS_CALLS,
    Driver,
    FloorClient,
    bench_setup,
    driver,
    floor_answer,
    rss_case,
    until_closed,
)
from .workloads import CALL_TOOL_PARAMS

__all__ = ["DESCRIPTION", "cases", "unavailable"]

DESCRIPTION: Final = "mcp_trio over in-memory channels against a bare Trio channel floor"

IN_FLIGHT: Final = 100
BUFFER: Final = mcp_trio.SessionConfig().memory_buffer_size


def unavailable() -> str | None:
    """Why this group cannot run here (never: it needs only Trio)."""
    return None


# -- the floors ----------------------------------------------------------------------------


async def _floor(
    in_flight: int,
    *,
    task_per_request: bool = False,
    scope_per_task: bool = False,
    task_status: trio.TaskStatus[Driver],
) -> None:
    to_server, server_inbox = trio.open_memory_channel[bytes](BUFFER)
    to_client, client_inbox = trio.open_memory_channel[bytes](BUFFER)
    client = FloorClient(to_server.send)

    async def serve() -> None:
        answer, send = floor_answer, to_client.send
        async for request in server_inbox:
            await send(answer(request))

    async def serve_in_tasks(nursery: trio.Nursery) -> None:
        answer, send = floor_answer, to_client.send

        async def handle(request: bytes) -> None:
            await send(answer(request))

        async def handle_in_scope(request: bytes) -> None:
            with trio.CancelScope():
                await send(answer(request))

        handler = handle_in_scope if scope_per_task else handle

        async for request in server_inbox:
            nursery.start_soon(handler, request)

    async with trio.open_nursery() as nursery:
        if task_per_request:
            nursery.start_soon(serve_in_tasks, nursery)
        else:
            nursery.start_soon(serve)
        nursery.start_soon(client.read_messages, client_inbox.receive)
        await client.call()
        task_status.started(driver(client.call, in_flight=in_flight, quiet=client.quiet))
        await until_closed()
        nursery.cancel_scope.cancel()  # the reader (and server) tasks


async def _floor_tight(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    to_server, server_inbox = trio.open_memory_channel[bytes](BUFFER)
    to_client, client_inbox = trio.open_memory_channel[bytes](BUFFER)

    def send_nowait(request: bytes) -> bool:
        try:
            to_server.send_nowait(request)
        except trio.WouldBlock:
            return False
        return True

    client = FloorClient(to_server.send, send_nowait)

    async def serve() -> None:
        answer, receive_nowait, receive = (
            floor_answer,
            server_inbox.receive_nowait,
            server_inbox.receive,
        )
        reply_nowait, reply = to_client.send_nowait, to_client.send
        try:
            while True:
                try:
                    request = receive_nowait()
                except trio.WouldBlock:
                    request = await receive()
                result = answer(request)
                try:
                    reply_nowait(result)
                except trio.WouldBlock:
                    await reply(result)
        except trio.EndOfChannel:
            return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        nursery.start_soon(client.read_channel, client_inbox)
        await client.call()
        task_status.started(driver(client.call, in_flight=in_flight, quiet=client.quiet))
        await until_closed()
        nursery.cancel_scope.cancel()  # the reader and server tasks


# -- mcp_trio ------------------------------------------------------------------------------


async def _ours(
    in_flight: int, client_config: ConnectionConfig, *, task_status: trio.TaskStatus[Driver]
) -> None:
    async with mcp_trio.open_memory_pair(
        server_handlers=low_level_handlers(),
        server_connection_config=SERVER_CONFIG,
        client_connection_config=client_config,
    ) as (client, server):
        call = functools.partial(client.request, "tools/call", CALL_TOOL_PARAMS)
        await call()

        def quiet() -> bool:
            return (
                client.statistics().waiting_requests == 0
                and server.statistics().running_handlers == 0
            )

        task_status.started(driver(call, in_flight=in_flight, quiet=quiet))
        await until_closed()


async def _client(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    await call_tool_fixture(high_level_server(), in_flight, task_status=task_status)


# -- the group -----------------------------------------------------------------------------


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, floors first."""
    found: list[Case | Skip] = [
        TimedCase(
            name="inmemory.floor",
            title="floor: Trio memory channels + orjson echo, 1 in flight (µs/call)",
            setup=bench_setup(_floor, 1),
        ),
        TimedCase(
            name="inmemory.floor.100",
            title="floor: the same, 100 in flight (µs/call)",
            setup=bench_setup(_floor, IN_FLIGHT),
            ops_per_call=IN_FLIGHT,
        ),
        TimedCase(
            name="inmemory.floor.tight",
            title="tight floor: the same through send_nowait / receive_nowait, 1 in flight",
            setup=bench_setup(_floor_tight, 1),
            reference="inmemory.floor",
        ),
        TimedCase(
            name="inmemory.floor.tight.100",
            title="tight floor: the same, 100 in flight (µs/call)",
            setup=bench_setup(_floor_tight, IN_FLIGHT),
            ops_per_call=IN_FLIGHT,
            reference="inmemory.floor.100",
        ),
        TimedCase(
            name="inmemory.floor.task",
            title="floor + a server task per request, 1 in flight (informational)",
            setup=bench_setup(_floor, 1, task_per_request=True),
            reference="inmemory.floor",
        ),
        TimedCase(
            name="inmemory.floor.scope",
            title="floor + a task with its own cancel scope per request (informational)",
            setup=bench_setup(_floor, 1, task_per_request=True, scope_per_task=True),
            reference="inmemory.floor",
        ),
        TimedCase(
            name="inmemory.roundtrip",
            title="Handlers + Session.request, legacy, 1 in flight (µs/call)",
            setup=bench_setup(_ours, 1, CLIENT_CONFIG),
            reference="inmemory.floor",
            tight="inmemory.floor.tight",
        ),
        TimedCase(
            name="inmemory.roundtrip.100",
            title="Handlers + Session.request, legacy, 100 in flight (µs/call)",
            setup=bench_setup(_ours, IN_FLIGHT, CLIENT_CONFIG),
            ops_per_call=IN_FLIGHT,
            reference="inmemory.floor.100",
            tight="inmemory.floor.tight.100",
        ),
        TimedCase(
            name="inmemory.roundtrip.modern",
            title="Handlers + Session.request, modern era, 1 in flight (informational)",
            setup=bench_setup(_ours, 1, MODERN_CLIENT_CONFIG),
            reference="inmemory.floor",
        ),
        TimedCase(
            name="inmemory.client",
            title="high-level Server + open_client().call_tool, 1 in flight (vs low-level)",
            setup=bench_setup(_client, 1),
            reference="inmemory.roundtrip",
        ),
    ]
    found.append(
        rss_case(
            "inmemory.rss_growth",
            f"RSS growth of this process over {RSS_CALLS:,} round trips",
            functools.partial(_ours, 1, CLIENT_CONFIG),
            settings,
        )
    )
    return found

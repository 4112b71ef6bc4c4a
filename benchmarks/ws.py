"""Group ``ws``: ``mcp_trio`` over WebSocket (trio-websocket), against a trio-websocket floor.

The server runs in a child process (``python -m benchmarks._net_server``, loopback, a
port the kernel picks), the client in this one; one JSON-RPC message per text frame.
Throughput in calls/s, with 1 and with 100 requests in flight on one connection.

``ws.floor.1`` / ``ws.floor.100``
    trio-websocket on both sides: the child echoes the canned 1 KB result under each
    request's id; the client dumps requests with fresh ids (orjson), sends them as text
    and a reader task wakes each caller by id.
``ws.calls.1`` / ``ws.calls.100``
    ``mcp_trio.serve_websocket`` (low-level ``Handlers``) and
    ``mcp_trio.open_websocket_client``, ``Session.request``; legacy era.
"""

from __future__ import annotations

import functools
from typing import Final

import trio
import trio_websocket

import mcp_trio

from ._harness import Case, Settings, Skip
from ._servers import CLIENT_CONFIG
from ._trio import (
    Driver,
    FloorClient,
    calls_case,
    driver,
    open_net_server,
    until_closed,
)
from .workloads import CALL_TOOL_PARAMS

__all__ = ["DESCRIPTION", "cases", "unavailable"]

DESCRIPTION: Final = "calls/s over trio-websocket at 1 and 100 in flight"

IN_FLIGHT: Final = 100


def unavailable() -> str | None:
    """Why this group cannot run here (never: trio-websocket is a dependency)."""
    return None


async def _floor(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    async with (
        open_net_server("ws-floor") as (port, pid),
        trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}/") as ws,
    ):
        send_message = ws.send_message

        async def send(request: bytes) -> None:
            await send_message(request.decode())

        client = FloorClient(send)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.read_messages, ws.get_message)
            await client.call()
            task_status.started(
                driver(client.call, in_flight=in_flight, quiet=client.quiet, server_pid=pid)
            )
            await until_closed()
            nursery.cancel_scope.cancel()  # the reader (and server) tasks


async def _ours(in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    async with (
        open_net_server("ws") as (port, pid),
        mcp_trio.open_websocket_client(
            f"ws://127.0.0.1:{port}{mcp_trio.MCP_PATH}", connection_config=CLIENT_CONFIG
        ) as client,
    ):
        call = functools.partial(client.request, "tools/call", CALL_TOOL_PARAMS)
        await call()

        def quiet() -> bool:
            return client.statistics().waiting_requests == 0

        task_status.started(driver(call, in_flight=in_flight, quiet=quiet, server_pid=pid))
        await until_closed()


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, floors first."""
    del settings  # --quick only shrinks the rounds
    return [
        calls_case(
            "ws.floor.1",
            "floor: trio-websocket echo child + orjson, 1 in flight",
            _floor,
            in_flight=1,
        ),
        calls_case("ws.floor.100", "floor: the same, 100 in flight", _floor, in_flight=IN_FLIGHT),
        calls_case(
            "ws.calls.1",
            "open_websocket_client + serve_websocket (Handlers), legacy, 1 in flight",
            _ours,
            in_flight=1,
            reference="ws.floor.1",
        ),
        calls_case(
            "ws.calls.100",
            "open_websocket_client + serve_websocket (Handlers), legacy, 100 in flight",
            _ours,
            in_flight=IN_FLIGHT,
            reference="ws.floor.100",
        ),
    ]

"""The session's request timer: armed forward only, exact on every timeout.

The timer is only ever brought forward after a core call; a deadline that moved later
(an answered request) is left for the timer to find stale. These check that a stale
wake times nothing out and that each timeout still fires at its own deadline.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import Handlers, RequestContext, RequestTimeout, open_memory_pair

from .helpers import client_config, server_config


def _sleepy() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        await trio.sleep(ctx.params["seconds"])
        return {"content": [], "slept": ctx.params["seconds"]}

    return handlers


async def _timed_out_after(client: Any, seconds: float, timeout: float) -> float:
    start = trio.current_time()
    with pytest.raises(RequestTimeout):
        await client.request("tools/call", {"seconds": seconds}, timeout=timeout)
    return trio.current_time() - start


async def test_a_stale_deadline_wakes_the_timer_early_and_times_nothing_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_memory_pair(
        server_handlers=_sleepy(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        # Answered at once: its 2 s deadline stays armed, stale.
        assert (await client.request("tools/call", {"seconds": 0}, timeout=2))["slept"] == 0
        with trio.fail_after(1000):  # (a timer never re-armed would hang here)
            assert await _timed_out_after(client, 100, timeout=50) == pytest.approx(50)
        # Answered before the stale wake at 2 s: that wake must not touch it.
        assert (await client.request("tools/call", {"seconds": 5}, timeout=10))["slept"] == 5


async def test_an_earlier_deadline_brings_the_timer_forward(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_memory_pair(
        server_handlers=_sleepy(),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, _server):
        spent: list[float] = []

        async def long_one() -> None:
            spent.append(await _timed_out_after(client, 1000, timeout=60))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_one)
            await trio.testing.wait_all_tasks_blocked()
            assert await _timed_out_after(client, 1000, timeout=3) == pytest.approx(3)
        assert spent == [pytest.approx(60)]


async def test_a_slightly_earlier_deadline_still_fires_on_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A request with a deadline one second before the pending one: the timer must be
    # brought forward for it however small the difference.
    async with (
        open_memory_pair(
            server_handlers=_sleepy(),
            server_connection_config=server_config(),
            client_connection_config=client_config(),
        ) as (client, _server),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(_timed_out_after, client, 100, 10)
        await trio.testing.wait_all_tasks_blocked()
        assert await _timed_out_after(client, 100, 9) == pytest.approx(9)

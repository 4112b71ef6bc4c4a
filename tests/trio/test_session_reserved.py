"""Requests that wait for a compute slot start when one comes back, in order, and
only then is the pool asked to say when slots come back."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcp_trio import Handlers, RequestContext, SessionConfig, memory_channel_pair, open_memory_pair

from .helpers import RawPeer, client_config, handshaken, server_config


async def test_reserved_requests_start_as_slots_come_back_round_after_round(
    autojump_clock: trio.testing.MockClock,
) -> None:
    started: list[int] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        started.append(ctx.params["n"])
        await trio.sleep(1)
        return {"n": ctx.params["n"]}

    async with open_memory_pair(
        server_handlers=handlers,
        server_config=SessionConfig(max_concurrent_handlers=1),
        server_connection_config=server_config(),
        client_connection_config=client_config(),
    ) as (client, server):
        answers: list[int] = []

        async def ask(n: int) -> None:
            answers.append((await client.request("tools/call", {"n": n}))["n"])

        for round_ in range(2):  # (the second after the reserved ones all ran: none wait)
            answers.clear()

            with trio.fail_after(100):  # (a reserved request never started: stuck)
                async with trio.open_nursery() as nursery:
                    for n in range(3):
                        nursery.start_soon(ask, 10 * round_ + n)
                        await trio.testing.wait_all_tasks_blocked()
            assert answers == [10 * round_ + n for n in range(3)]
            assert server._pool.on_freed is None  # (none waits: the pool calls no one)
        assert started == [0, 1, 2, 10, 11, 12]  # one at a time, in order
        assert server.statistics().running_handlers == 0
        assert (await client.request("tools/call", {"n": 7}))["n"] == 7  # a free slot


async def test_a_reserved_request_starts_when_the_slot_comes_back_not_when_the_answer_is_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A compute slot comes back when its handler's answer is queued (HandlerPool.computed),
    # before that answer is written: a peer that reads its answers late (here, not until
    # both requests ran) must not hold up a request waiting for the slot. (Mutant: computed
    # wakes only a reader that waits for a backlog slot, not on_freed -> the second
    # request starts only once the first answer is out.)
    started: list[int] = []
    release = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        started.append(ctx.params["n"])
        if ctx.params["n"] == 0:
            await release.wait()
        return {"n": ctx.params["n"]}

    ours, theirs = memory_channel_pair(max_buffer_size=0)  # (a write waits for the peer)
    peer = RawPeer(theirs, None)
    config = SessionConfig(max_concurrent_handlers=1)
    with trio.fail_after(100):
        async with handshaken(ours, peer, "server", handlers=handlers, config=config) as server:
            for n in (0, 1):
                await peer.send(
                    {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"n": n}}
                )
                await trio.testing.wait_all_tasks_blocked()
            assert started == [0]
            assert server.statistics().waiting_handlers == 1
            release.set()
            await trio.testing.wait_all_tasks_blocked()
            assert started == [0, 1]  # the first answer is not read yet
            answers = [await peer.receive(), await peer.receive()]
            assert [a["result"]["n"] for a in answers] == [0, 1]

"""The outbox is bounded in bytes (``SessionConfig.max_outbox_bytes``).

A peer that sends requests and stops reading used to pin every answer, up to
``max_unanswered_requests`` (1024) of them whatever their size, until ``write_timeout``:
about 200 MB for one WebSocket client whose tool answers 100 KB. Past the bound a
handler whose answer is ready waits for room, keeping its running slot, so the reader
soon stops taking requests (backpressure); nothing is lost once the peer reads.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcp_trio import Handlers, RequestContext, SessionConfig, StreamChannel

from .helpers import RawPeer, handshaken

ANSWER = "z" * 4000
REQUESTS = 40


def _big_answers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": ANSWER}]}

    return handlers


async def test_answers_past_the_byte_bound_wait_for_room(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()  # the peer reads nothing meanwhile
    peer = RawPeer(None, theirs)
    config = SessionConfig(max_outbox_bytes=10_000, write_timeout=None)
    with trio.fail_after(60):
        async with handshaken(
            StreamChannel.from_stream(ours), peer, "server", handlers=_big_answers(), config=config
        ) as session:
            for rid in range(1, REQUESTS + 1):
                await peer.send(
                    {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "t"}}
                )
            await trio.testing.wait_all_tasks_blocked()
            stats = session.statistics()
            # Three answers of 4 KB fill 10 KB (the third crosses the bound, whole);
            # the other handlers wait for room, their answers not made yet.
            assert stats.queued_messages == 3
            assert stats.running_handlers == REQUESTS  # (holding their slots)
            # The peer reads again: every answer comes, once.
            answered = [(await peer.receive())["id"] for _ in range(REQUESTS)]
            assert sorted(answered) == list(range(1, REQUESTS + 1))
            await trio.testing.wait_all_tasks_blocked()
            assert session.statistics().queued_messages == 0
            assert session.statistics().running_handlers == 0

"""The session closing between a re-issue (``Session._reissue``, the hook the HTTP
channel calls when a response stream broke) and its caller's next step: the caller gets
the close (``SessionClosed``), exactly once, and nothing the re-issue queued for it is
left behind in the session."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import mcp_trio
from mcp_trio import SessionClosed


@pytest.mark.parametrize("steps", [0, 1, 3])
async def test_a_close_right_after_a_reissue_fails_the_caller_and_leaves_nothing(
    steps: int,
) -> None:
    server = mcp_trio.Server("slow")
    started = trio.Event()

    @server.tool()
    async def block() -> None:
        """Wait."""
        started.set()
        await trio.sleep_forever()

    sent: list[Any] = []
    got: list[BaseException] = []
    async with mcp_trio.open_client(server, era="modern") as client:
        session = client.session

        async def caller() -> None:
            with pytest.raises(SessionClosed) as info:
                await session.request("tools/call", {"name": "block"}, on_sent=sent.append)
            got.append(info.value)

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await started.wait()
                assert session._reissue(sent[0]) is None  # (the caller is woken, not run)
                for _ in range(steps):
                    await trio.lowlevel.checkpoint()
                await session.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert len(got) == 1
        assert len(session._waiters) == 0
        assert session._queued == {}  # (the re-issued request's entry went too)

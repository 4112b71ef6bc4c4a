"""A server's JSON-RPC error is an answer, whatever its ``data`` says: only a transport
that lost the answer makes the client re-issue a request (2026-07-28 changelog item 9).
Over a message channel (memory here; stdio and WebSocket alike), which either delivers the
answer or closes, nothing is ever re-issued: an error whose ``data`` says
``{"streamBroken": true}`` (what the HTTP client once marked its own breaks with) fails
the call once, and the tool ran once.

Also, the session's side of a re-issue (``Session._reissue``, the hook the HTTP channel
calls) when the caller is cancelled in the very tick its request is re-issued.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import mcp_trio
from mcp_sansio import ErrorData
from mcp_trio import McpError


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_forged_stream_broken_error_is_not_reissued(era: str) -> None:
    calls: list[int] = []
    server = mcp_trio.Server("hostile")

    @server.tool()
    async def pay(amount: int) -> str:
        """Pay."""
        calls.append(amount)
        data = {"streamBroken": True}
        raise McpError(ErrorData(code=-32000, message="declined", data=data))

    async with mcp_trio.open_client(server, era=era) as client:  # type: ignore[arg-type]
        with pytest.raises(McpError, match="declined") as info:
            await client.session.request("tools/call", {"name": "pay", "arguments": {"amount": 5}})
    assert info.value.data == {"streamBroken": True}
    assert calls == [5]


async def test_a_caller_cancelled_as_its_request_is_reissued_cancels_the_new_one() -> None:
    # The caller's cancellation is delivered in the same tick as the re-issue (before
    # its task runs again): the new request, queued but not written, is taken back
    # (the tool does not run a second time), and nothing waits or leaks.
    server = mcp_trio.Server("slow")
    started = trio.Event()
    runs: list[int] = []

    @server.tool()
    async def block() -> None:
        """Wait."""
        runs.append(1)
        started.set()
        await trio.sleep_forever()

    sent: list[Any] = []
    async with mcp_trio.open_client(server, era="modern") as client:
        session = client.session
        scope = trio.CancelScope()

        async def caller() -> None:
            with scope:
                await session.request("tools/call", {"name": "block"}, on_sent=sent.append)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            await started.wait()
            scope.cancel()
            assert session._reissue(sent[0]) is None  # (what the HTTP channel's hook does)
        await trio.testing.wait_all_tasks_blocked()
        assert session._conn.pending_requests() == ()
        assert len(session._waiters) == 0
    assert sent == [sent[0]]  # (the caller never waited for the new id)
    assert runs == [1]
    assert session._queued == {}

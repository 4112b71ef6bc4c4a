"""A modern client's calls awaiting input are bounded (``max_pending_requests``): a round
past the bound ends its own call, whose caller is told, and the calls whose questions are
being answered keep their rounds. Every request gets one answer: none ends unheard.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, ErrorCode, RemoteProtocolError
from mcp_trio import Context
from mcp_trio._client import open_client
from mcp_trio._server import Server

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def test_a_round_past_the_bound_fails_its_own_call(autojump_clock: MockClock) -> None:
    server = Server("asker", "1")

    @server.tool()
    async def elicit(ctx: Context) -> str:
        """Ask for a name."""
        answer = await ctx.elicit("Your name?", FORM)
        return f"{answer.action}:{answer.content}"

    asked: list[Any] = []
    on_screen = trio.Event()
    answered = trio.Event()

    async def on_elicitation(params: Any) -> dict[str, Any]:
        asked.append(params)
        on_screen.set()
        if len(asked) == 1:
            await answered.wait()  # (the user is still typing)
        return {"action": "accept", "content": {"name": "Ada"}}

    texts: list[str] = []

    async def first_call(client: Any) -> None:
        texts.append((await client.call_tool("elicit")).text)

    async with (
        open_client(
            server,
            era="modern",
            on_elicitation=on_elicitation,
            connection_config=ConnectionConfig(max_pending_requests=1),
        ) as client,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(first_call, client)
        await on_screen.wait()
        # One call awaits input (its question is on the screen): the bound is reached,
        # so the next round fails the call it belongs to (the core's local error), and
        # nobody is asked.
        with pytest.raises(RemoteProtocolError) as refused:
            await client.call_tool("elicit")
        assert refused.value.error_code == ErrorCode.INTERNAL_ERROR
        assert "max_pending_requests" in refused.value.message
        assert len(asked) == 1
        # The first call's round stands: its answer goes through.
        answered.set()
    assert texts == ["accept:{'name': 'Ada'}"]
    assert client.session.connection.pending_requests() == ()

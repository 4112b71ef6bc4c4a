"""A legacy server's question to the user does not eat the client's call timeout.

While ``on_elicitation`` (or ``on_sampling``: a model, and a human who may review it,
client/sampling.mdx) answers the server's request, the call that led to it does not
time out: the core holds the client's timers (``Connection.next_deadline``) and moves
them on by the time the question was open, as the modern era's input round, whose
retry starts its timers afresh, never counted it. The timer runs again afterwards.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
import trio
from trio.testing import MockClock

from mcp_trio import Context, RequestTimeout
from mcp_trio._client import open_client
from mcp_trio._server import Server

FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def asking_server(after: float = 0.0) -> Server:
    """Its tools ask the user (or the model), then work ``after`` seconds."""
    server = Server("asker", "1")

    @server.tool()
    async def delete(ctx: Context) -> str:
        """Ask before deleting."""
        answer = await ctx.elicit("Delete note 1?", FORM)
        await trio.sleep(after)
        return f"{answer.action}:{answer.content}"

    @server.tool()
    async def sample(ctx: Context) -> str:
        """Ask the model."""
        answer = await ctx.sample("hi", max_tokens=5)
        await trio.sleep(after)
        return answer.model

    return server


async def slow_user(params: Any) -> dict[str, Any]:
    await trio.sleep(30)  # the user reads, thinks, answers
    return {"action": "accept", "content": {"ok": True}}


async def slow_model(params: Any) -> dict[str, Any]:
    await trio.sleep(30)  # the model, then a human approving its answer
    return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(("tool", "expected"), [("delete", "accept:{'ok': True}"), ("sample", "m")])
async def test_the_time_the_user_answers_is_not_counted(
    era: Literal["legacy", "modern"], tool: str, expected: str, autojump_clock: MockClock
) -> None:
    async with open_client(
        asking_server(), era=era, on_elicitation=slow_user, on_sampling=slow_model, timeout=2
    ) as client:
        start = trio.current_time()
        assert (await client.call_tool(tool)).text == expected
        assert trio.current_time() - start >= 30


@pytest.mark.parametrize("tool", ["delete", "sample"])
async def test_the_timer_runs_again_once_answered(tool: str, autojump_clock: MockClock) -> None:
    # The tool works 5 s after the answer; the call's timeout is 2 s, none of it spent
    # before the question: it times out 2 s after the answer, not before, not never.
    async with open_client(
        asking_server(after=5),
        era="legacy",
        on_elicitation=slow_user,
        on_sampling=slow_model,
        timeout=2,
    ) as client:
        start = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.call_tool(tool)
        assert 32 <= trio.current_time() - start < 32.5

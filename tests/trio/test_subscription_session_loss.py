"""A :class:`~mcp_trio.Subscription` ends when its session is lost (the peer gone, no
goodbye): ``ended`` turns True, what came before can still be read, then
``SessionClosed`` -- as its blocking twin does (``tests/test_blocking_subscription_end.py``)."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from mcp_trio import SessionClosed, memory_channel_pair, open_session
from mcp_trio._client import open_client

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config

TOOLS_CHANGED = "notifications/tools/list_changed"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_peer_vanishing_ends_the_subscription(
    era: str, autojump_clock: MockClock
) -> None:
    client_channel, server_channel = memory_channel_pair()
    async with (
        open_session(
            server_channel, "server", handlers=make_handlers(), connection_config=app_config()
        ),
        open_client(client_channel, era=era) as client,  # type: ignore[arg-type]
        client.subscribe(tools=True) as updates,
    ):
        await client.call_tool("notify", {"method": TOOLS_CHANGED, "params": None})
        await trio.testing.wait_all_tasks_blocked()
        ended_before = updates.ended  # (a local: mypy would narrow the property)
        assert not ended_before
        await server_channel.aclose()  # (the server's end of the wire, gone)
        await trio.testing.wait_all_tasks_blocked()
        assert updates.ended and updates.end_reason is not None
        assert (await updates.receive()).method == TOOLS_CHANGED  # read before the end
        with pytest.raises(SessionClosed):
            await updates.receive()

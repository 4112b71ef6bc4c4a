"""A ``BlockingSubscription`` ends with its session, as its Trio twin does: ``ended``
turns True, what was read before can still be read, then ``SessionClosed``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcp_trio import ServerExited, SessionClosed

from .test_blocking_client import TIMEOUT, spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")

TOOLS = "notifications/tools/list_changed"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_the_server_dying_ends_the_subscription(era: str) -> None:
    with spawn(era=era, stderr=subprocess.DEVNULL) as client:
        with client.subscribe(tools=True) as updates:
            client.call_tool("notify", {"method": TOOLS, "params": None})
            ended_before = updates.ended  # (a local: mypy would narrow the property)
            assert not ended_before
            with pytest.raises(ServerExited):
                client.call_tool("crash")
            assert updates.ended
            assert updates.end_reason is not None and "exit" in updates.end_reason
            note = updates.receive(timeout=0)  # (read before the end)
            assert note is not None and note.method == TOOLS
            with pytest.raises(ServerExited):
                updates.receive(timeout=TIMEOUT)
            with pytest.raises(SessionClosed):
                list(updates)
        assert updates.ended  # (leaving the block after the loss raises nothing)
        assert client._listens == {} and client._subscriptions == []


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_closing_the_client_ends_the_subscription(era: str) -> None:
    client = spawn(era=era)
    with client.subscribe(tools=True) as updates:
        client.call_tool("notify", {"method": TOOLS, "params": None})
        client.close()
        assert updates.ended and updates.end_reason == "the client was closed"
        note = updates.receive()
        assert note is not None and note.method == TOOLS
        with pytest.raises(SessionClosed, match="the client was closed"):
            updates.receive()

"""mcp_trio implements tasks as the modern extension only: a top-level ``tasks`` capability
(the 2025-11-25 tasks) given to a client or a server is refused before anything is sent,
for it would promise a legacy peer task-augmented requests, ``tasks/list`` and
``tasks/cancel`` that are never served."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig
from mcp_trio import TASKS_EXTENSION, Server, memory_channel_pair, open_client
from mcp_trio._client_common import client_config

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}


def test_a_client_refuses_a_legacy_tasks_capability() -> None:
    # Tasks are the modern extension here: declaring the 2025-11-25 tasks would promise
    # CreateTaskResults to task-augmented requests this client answers plainly.
    legacy: dict[str, Any] = {"tasks": {"requests": {"elicitation": {"create": {}}}}}
    with pytest.raises(ValueError, match=r"capabilities\['tasks'\]"):
        client_config(
            None,
            era="auto",
            protocol_version=None,
            log_level=None,
            client_info=None,
            sampling=False,
            elicitation=True,
            roots=False,
            capabilities=legacy,
            timeout=None,
        )


async def test_open_client_refuses_a_legacy_tasks_capability_before_sending(
    autojump_clock: MockClock,
) -> None:
    client_channel, server_channel = memory_channel_pair()
    with pytest.raises(ValueError, match=r"capabilities\['tasks'\]"):
        async with open_client(client_channel, era="legacy", capabilities={"tasks": {}}):
            pass  # pragma: no cover
    with trio.move_on_after(1) as waited:
        await server_channel.receive()
    assert waited.cancelled_caught  # (nothing was sent)


def test_a_server_refuses_a_legacy_tasks_capability() -> None:
    legacy: dict[str, Any] = {
        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    }
    with pytest.raises(ValueError, match=r"capabilities\['tasks'\]"):
        Server("s", connection_config=ConnectionConfig(capabilities=legacy))
    # (The extension is the way: accepted.)
    Server("s", connection_config=ConnectionConfig(capabilities=EXT))

"""``ConnectionConfig.capabilities_source``: a server's capabilities read when they are
declared, so that what it gains after a connection was made reaches the clients that
come afterwards. A legacy session is told them at ``initialize`` and keeps them
(lifecycle.mdx: capabilities are negotiated then); a modern request is judged by those
of when it is checked (no session fixes them). No I/O."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    InvalidMessageReceived,
    LocalProtocolError,
    RequestReceived,
)

from .helpers import CLIENT_CAPS, ConnectionPair
from .test_connection_modern import feed, modern_request

BARE: dict[str, Any] = {"logging": {}}
TOOLS: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
MORE: dict[str, Any] = {**TOOLS, "prompts": {"listChanged": True}}


class Source:
    """What a server declares now, and how often it was asked."""

    def __init__(self, declared: dict[str, Any]) -> None:
        self.declared = declared
        self.asked = 0

    def __call__(self) -> dict[str, Any]:
        self.asked += 1
        return self.declared


def server_config(source: Source) -> ConnectionConfig:
    # ``capabilities`` are those of when the config was made: the source overrides them.
    return ConnectionConfig(
        implementation={"name": "s", "version": "1"},
        capabilities=BARE,
        capabilities_source=source,
    )


def legacy_request(rid: int, method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method}


def test_a_legacy_session_is_told_the_capabilities_of_initialize_and_keeps_them() -> None:
    source = Source(BARE)
    client = ConnectionConfig(
        implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="legacy"
    )
    pair = ConnectionPair(client, server_config(source))
    source.declared = TOOLS  # gained after the connection was made, before initialize
    pair.handshake()
    assert pair.client.peer_capabilities == TOOLS
    # The session keeps them: prompts gained now are not its (-32601, no notification),
    # tools still are; and the source is not asked per request.
    source.declared = MORE
    asked = source.asked
    events, answers = feed(pair.server, legacy_request(7, "prompts/list"))
    assert [type(e) for e in events] == [InvalidMessageReceived]
    assert answers[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert "capability 'prompts' not declared" in answers[0]["error"]["message"]
    with pytest.raises(LocalProtocolError, match=r"'prompts\.listChanged' capability"):
        pair.server.send_notification("notifications/prompts/list_changed")
    events, _ = feed(pair.server, legacy_request(8, "tools/list"))
    assert [type(e) for e in events] == [RequestReceived]
    pair.server.send_notification("notifications/tools/list_changed")
    assert source.asked == asked


def test_a_modern_request_is_judged_by_the_capabilities_of_now() -> None:
    source = Source(BARE)
    server = Connection("server", server_config(source))
    _, (discovered,) = feed(server, modern_request(1, "server/discover"))
    assert discovered["result"]["capabilities"] == BARE
    _, (refused,) = feed(server, modern_request(2, "tools/list"))
    assert refused["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    source.declared = TOOLS  # on the same channel: no session fixed them
    _, (discovered,) = feed(server, modern_request(3, "server/discover"))
    assert discovered["result"]["capabilities"] == TOOLS
    events, answers = feed(server, modern_request(4, "tools/list"))
    assert [type(e) for e in events] == [RequestReceived] and answers == []
    # A method accepted once takes the fast path: the source is not asked again.
    asked = source.asked
    events, _ = feed(server, modern_request(5, "tools/list"))
    assert [type(e) for e in events] == [RequestReceived]
    assert source.asked == asked


def test_without_a_source_the_capabilities_are_the_configured_ones() -> None:
    config = ConnectionConfig(implementation={"name": "s", "version": "1"}, capabilities=TOOLS)
    assert config.capabilities_source is None
    _, (discovered,) = feed(Connection("server", config), modern_request(1, "server/discover"))
    assert discovered["result"]["capabilities"] == TOOLS

"""Helpers for driving a client and a server connection against each other, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal, Unpack

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ConnectionConfigOptions,
    Event,
    HandshakeCompleted,
    _json,
)
from mcp_sansio._json import loads
from tests.schema import validate_message

SERVER_CAPS: dict[str, Any] = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "logging": {},
    "completions": {},
}
CLIENT_CAPS: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
#: What a ``ConnectionPair`` builds each side with when given no config (and what
#: ``handshaken`` puts its options on).
CLIENT_DEFAULTS: ConnectionConfigOptions = {
    "implementation": {"name": "test-client", "version": "1"},
    "capabilities": CLIENT_CAPS,
}
SERVER_DEFAULTS: ConnectionConfigOptions = {
    "implementation": {"name": "test-server", "version": "1"},
    "capabilities": SERVER_CAPS,
    "instructions": "be nice",
}


class ConnectionPair:
    """A client and a server connection wired back to back (h11's ConnectionPair idea)."""

    def __init__(
        self,
        client_config: ConnectionConfig | None = None,
        server_config: ConnectionConfig | None = None,
    ) -> None:
        self.client = Connection("client", client_config or ConnectionConfig(**CLIENT_DEFAULTS))
        self.server = Connection("server", server_config or ConnectionConfig(**SERVER_DEFAULTS))
        #: every message that went across, as decoded JSON, in order: (sender, message)
        self.wire: list[tuple[str, Any]] = []
        self.moved = 0

    def peer(self, conn: Connection) -> Connection:
        return self.server if conn is self.client else self.client

    def deliver(self, sender: Connection, *, now: float = 0.0) -> list[Event]:
        """Move everything ``sender`` has queued to its peer; return the peer's events."""
        receiver = self.peer(sender)
        events: list[Event] = []
        payloads = sender.data_to_send()
        self.moved += len(payloads)
        for payload in payloads:
            self.wire.append((sender.role, loads(payload)))
            events.extend(receiver.receive_message(payload, now=now))
        return events

    def exchange(self, *, now: float = 0.0) -> tuple[list[Event], list[Event]]:
        """Deliver both ways until quiet; return (client events, server events)."""
        client_events: list[Event] = []
        server_events: list[Event] = []
        while True:
            self.moved = 0
            server_events.extend(self.deliver(self.client, now=now))
            client_events.extend(self.deliver(self.server, now=now))
            if not self.moved:
                return client_events, server_events

    def handshake(self) -> tuple[list[Event], list[Event]]:
        self.client.start(now=0.0)
        c, s = self.exchange()
        assert any(isinstance(e, HandshakeCompleted) for e in c), c
        return c, s


def handshaken(
    era: Literal["auto", "legacy", "modern"],
    /,
    *,
    server: ConnectionConfig | Mapping[str, Any] | None = None,
    **client: Unpack[ConnectionConfigOptions],
) -> ConnectionPair:
    """A pair whose client of ``era`` has finished its handshake (``initialize`` and
    ``notifications/initialized``, or ``server/discover``), nothing left on the wire.

    Each side is built from its ``*_DEFAULTS`` with ``client`` (the keyword arguments)
    or ``server`` on top; ``server`` may also be a whole config (one built with
    validators off, say). For a test whose point is the handshake, drive it by hand.
    """
    if not isinstance(server, ConnectionConfig):
        served: dict[str, Any] = {**SERVER_DEFAULTS, **(server or {})}
        server = ConnectionConfig(**served)
    options: ConnectionConfigOptions = {**CLIENT_DEFAULTS, "era": era, **client}
    pair = ConnectionPair(ConnectionConfig(**options), server)
    pair.handshake()
    return pair


def validate_wire(pair: ConnectionPair, version: str) -> int:
    """Validate every message that crossed ``pair`` against ``version``'s schema."""
    methods: dict[tuple[str, Any], str] = {}
    for sender, msg in pair.wire:
        items = msg if isinstance(msg, list) else [msg]
        for item in items:
            if "method" in item and "id" in item:
                methods[(sender, item["id"])] = item["method"]
    for sender, msg in pair.wire:
        other = "server" if sender == "client" else "client"
        method = None
        if isinstance(msg, dict) and "result" in msg:
            method = methods.get((other, msg["id"]))
        validate_message(version, msg, method)
    return len(pair.wire)


def count_parses(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> list[bytes]:
    """Replace the ``loads`` each of ``modules`` holds by one that records the texts it
    parses, in order (the list returned; clear it between steps)."""
    seen: list[bytes] = []
    real = _json.loads

    def counting(data: Any) -> Any:
        seen.append(bytes(data))
        return real(data)

    for module in modules:
        monkeypatch.setattr(module, "loads", counting)
    return seen

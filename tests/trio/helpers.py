"""Shared pieces of the binding tests: configurations, a hand-driven peer, a test channel."""

from __future__ import annotations

from typing import Any

import trio

from mcp_sansio import Connection, ConnectionConfig, Event, Role
from mcp_trio import MemoryChannel, MessageChannel

SERVER_CAPS: dict[str, Any] = {"tools": {}, "logging": {}, "resources": {}}
CLIENT_CAPS: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}}


def server_config(**kwargs: Any) -> ConnectionConfig:
    """A server core that declares tools and logging."""
    return ConnectionConfig(
        implementation={"name": "test-server", "version": "1"},
        capabilities=SERVER_CAPS,
        **kwargs,
    )


def client_config(**kwargs: Any) -> ConnectionConfig:
    """A client core that declares roots and sampling (legacy era unless told)."""
    kwargs.setdefault("era", "legacy")
    return ConnectionConfig(
        implementation={"name": "test-client", "version": "1"},
        capabilities=CLIENT_CAPS,
        **kwargs,
    )


class ManualPeer:
    """The far end of a channel, driven by hand with a core :class:`Connection`.

    For tests that need to see (or forge) what goes over the wire.
    """

    def __init__(self, channel: MemoryChannel, role: Role, config: ConnectionConfig) -> None:
        self.channel = channel
        self.conn = Connection(role, config)

    async def flush(self) -> None:
        for message in self.conn.data_to_send():
            await self.channel.send(message)

    async def next_events(self) -> list[Event]:
        """Receive one message, feed it to the core, send what the core answers."""
        data = await self.channel.receive()
        events = self.conn.receive_message(data, now=trio.current_time())
        await self.flush()
        return events

    async def events_until(self, kind: type[Any]) -> list[Event]:
        """Receive until an event of ``kind`` arrives; return everything seen."""
        seen: list[Event] = []
        while not any(isinstance(e, kind) for e in seen):
            seen.extend(await self.next_events())
        return seen


class ScriptedChannel(MessageChannel):
    """A channel whose sends fail (or hang) and whose receives wait for a feed."""

    def __init__(self, *, send_error: BaseException | None = None, hang: bool = False) -> None:
        self.sent: list[bytes] = []
        self._send_error = send_error
        self._hang = hang
        self._incoming_send, self._incoming = trio.open_memory_channel[bytes | BaseException](8)
        self.closed = False

    async def feed(self, item: bytes | BaseException) -> None:
        await self._incoming_send.send(item)

    async def send(self, message: bytes) -> None:
        if self._hang:
            await trio.sleep_forever()
        if self._send_error is not None:
            raise self._send_error
        self.sent.append(message)

    async def receive(self) -> bytes:
        item = await self._incoming.receive()
        if isinstance(item, BaseException):
            raise item
        return item

    async def aclose(self) -> None:
        self.closed = True

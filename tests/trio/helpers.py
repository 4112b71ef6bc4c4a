"""Shared pieces of the binding tests: configurations, a hand-driven peer, a test channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from mcp_sansio import LATEST_LEGACY_VERSION, Connection, ConnectionConfig, Event, Role
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    Client,
    MemoryChannel,
    MessageChannel,
    Session,
    StreamChannel,
    memory_channel_pair,
    open_client,
    open_session,
)
from mcp_trio._server import Server

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


def config_for(role: Role) -> ConnectionConfig:
    """The test core configuration of ``role``."""
    return client_config() if role == "client" else server_config()


class RawPeer:
    """The far end, as JSON objects: over a memory channel (an idle session takes each
    message in passing), or NDJSON over a byte stream (its reader task reads them)."""

    def __init__(self, channel: MemoryChannel | None, stream: trio.abc.Stream | None) -> None:
        self._channel = channel
        self._stream = stream
        self._buffer = b""
        self.sent_at: list[float] = []  # when our messages went out

    async def send(self, obj: dict[str, Any]) -> None:
        self.sent_at.append(trio.current_time())
        data = dumps(obj)
        if self._channel is not None:
            # (as a peer session does: a message that goes at once is taken in passing,
            # Session._take, by a session whose reader is parked)
            if not self._channel.send_nowait(data):
                await self._channel.send(data)
        else:
            assert self._stream is not None
            await self._stream.send_all(data + b"\n")

    async def send_bytes(self, data: bytes) -> None:
        """Send ``data`` as it is over the memory channel (waiting for room)."""
        assert self._channel is not None
        await self._channel.send(data)

    async def receive(self) -> dict[str, Any]:
        if self._channel is not None:
            message: dict[str, Any] = loads(await self._channel.receive())
            return message
        assert self._stream is not None
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            if not chunk:
                raise trio.EndOfChannel
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = loads(line)
        return message


def raw_pair(transport: str) -> tuple[MessageChannel, RawPeer]:
    """A channel for a session and the :class:`RawPeer` at its far end: ``"memory"``
    (a memory channel pair) or ``"stream"`` (NDJSON over a memory stream pair)."""
    if transport == "memory":
        ours, theirs = memory_channel_pair()
        return ours, RawPeer(theirs, None)
    a, b = trio.testing.memory_stream_pair()
    return StreamChannel.from_stream(a), RawPeer(None, b)


def legacy_initialize(rid: int = 0) -> dict[str, Any]:
    """A legacy ``initialize`` request from a client with no capabilities."""
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


async def legacy_handshake(session: Session, peer: RawPeer) -> None:
    """Complete a legacy handshake with ``session``, the peer playing the other role;
    then the session is idle (a byte-stream reader parked in ``receive_some``)."""
    if session.role == "client":
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.start)
            init = await peer.receive()
            assert init["method"] == "initialize"
            result = {
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result})
            assert (await peer.receive())["method"] == "notifications/initialized"
    else:
        await peer.send(legacy_initialize())
        assert "result" in await peer.receive()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await trio.testing.wait_all_tasks_blocked()
    assert session.handshake is not None


@asynccontextmanager
async def handshaken(
    channel: MessageChannel, peer: RawPeer, role: Role, **kwargs: Any
) -> AsyncIterator[Session]:
    """An open session of ``role`` on ``channel`` (``open_session`` keywords in ``kwargs``,
    the core configuration :func:`config_for` its role unless given), its legacy
    handshake done with ``peer``."""
    kwargs.setdefault("connection_config", config_for(role))
    async with open_session(channel, role, **kwargs) as session:
        await legacy_handshake(session, peer)
        yield session


@asynccontextmanager
async def connected(server: Server, era: str) -> AsyncIterator[Client]:
    """A client of ``server``, in memory, in ``era`` (``"legacy"``/``"modern"``), within
    10 seconds."""
    with trio.fail_after(10):
        async with open_client(server, era=era) as client:  # type: ignore[arg-type]  # (a str era)
            yield client

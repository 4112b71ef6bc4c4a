"""A byte-stream session closed locally just as a chunk of the peer's arrives.

The reader is parked in ``receive_some``; the peer's write hands it a chunk and wakes it
(trio's memory streams pump synchronously), and the block that owns the session exits
before the reader runs. The close tells the core the input is over (``receive_eof``, so
the NDJSON splitter's ``feed_eof``), and the reader's wakeup still returns the chunk: it
came after the end of input and is dropped, as a closed core drops a message channel's
late messages. It used to be fed to the core and crash the session with "internal error
in the session runtime" (``LocalProtocolError: feed() called after feed_eof()``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import LATEST_LEGACY_VERSION, Role
from mcp_sansio._json import dumps, loads
from mcp_trio import Handlers, NotificationContext, Session, StreamChannel, open_session

from .helpers import client_config, server_config


class Peer:
    """The far end of the byte stream, as JSON objects (NDJSON)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._buffer = b""

    async def send(self, obj: dict[str, Any]) -> None:
        await self.stream.send_all(dumps(obj) + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self.stream.receive_some()
            assert chunk, "the session closed its output"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = loads(line)
        return message


async def _handshake(session: Session, peer: Peer) -> None:
    """A legacy handshake, the peer playing the other role; then the session is idle,
    its reader parked in ``receive_some``."""
    if session.role == "client":
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.start)
            init = await peer.receive()
            result = {
                "protocolVersion": LATEST_LEGACY_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result})
            assert (await peer.receive())["method"] == "notifications/initialized"
    else:
        params = {
            "protocolVersion": LATEST_LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        await peer.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert "result" in await peer.receive()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    await trio.testing.wait_all_tasks_blocked()
    assert session.handshake is not None


_LATE: dict[str, dict[str, Any]] = {
    "notification": {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
    "request": {"jsonrpc": "2.0", "id": 7, "method": "ping"},
    "answer": {"jsonrpc": "2.0", "id": 7, "result": {}},  # (a pong nobody asked for)
}


def _config(role: Role) -> Any:
    return client_config() if role == "client" else server_config()


@pytest.mark.parametrize("kind", sorted(_LATE))
@pytest.mark.parametrize("role", ["client", "server"])
async def test_a_chunk_that_wakes_the_reader_as_the_session_closes_is_dropped(
    autojump_clock: trio.testing.MockClock, role: Role, kind: str
) -> None:
    # Mutation: no closing check in _read_loop after the wakeup -> the chunk is fed to
    # the core after receive_eof, and the block raises SessionClosed("internal error in
    # the session runtime") from LocalProtocolError("feed() called after feed_eof()").
    ours, theirs = trio.testing.memory_stream_pair()
    peer = Peer(theirs)
    async with open_session(
        StreamChannel.from_stream(ours), role, connection_config=_config(role)
    ) as s:
        await _handshake(s, peer)
        await peer.send(_LATE[kind])  # wakes the parked reader, which has not run yet
    assert s.close_reason is not None
    assert s.close_reason.reason == "the session was closed locally"


@pytest.mark.parametrize("role", ["client", "server"])
async def test_the_peers_end_of_input_as_the_session_closes_keeps_the_local_reason(
    autojump_clock: trio.testing.MockClock, role: Role
) -> None:
    # The other wakeup the reader can carry into a close: the peer's end of input.
    ours, theirs = trio.testing.memory_stream_pair()
    peer = Peer(theirs)
    async with open_session(
        StreamChannel.from_stream(ours), role, connection_config=_config(role)
    ) as s:
        await _handshake(s, peer)
        send = theirs.send_stream
        assert isinstance(send, trio.testing.MemorySendStream)
        send.close()  # (synchronous: wakes the parked reader, which has not run yet)
    assert s.close_reason is not None
    assert s.close_reason.reason == "the session was closed locally"


async def test_messages_read_before_a_local_close_are_still_handled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # What the reader fed the core before the close is acted on as before: a ping is
    # answered, a notification reaches its handler (the check drops only what a
    # wakeup brings once the session is closing).
    seen: list[str] = []
    handlers = Handlers()

    @handlers.on_notification("notifications/roots/list_changed")
    async def changed(ctx: NotificationContext) -> None:
        seen.append(ctx.method)

    ours, theirs = trio.testing.memory_stream_pair()
    peer = Peer(theirs)
    async with open_session(
        StreamChannel.from_stream(ours),
        "server",
        handlers=handlers,
        connection_config=server_config(),
    ) as s:
        await _handshake(s, peer)
        await peer.send(_LATE["notification"])
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        await trio.testing.wait_all_tasks_blocked()
    assert seen == ["notifications/roots/list_changed"]
    assert s.close_reason is not None
    assert s.close_reason.reason == "the session was closed locally"

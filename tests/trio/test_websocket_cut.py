"""A WebSocket frame cut short is the end of the connection: nothing follows it on the
wire (the peer would read it as the rest of the frame).

The keep-alive ping, its own write cut by the pong timeout, on a server over a memory
stream whose writes a test can stall part way (a peer that stopped reading with room
left for a few bytes). Trio's autojump clock."""

from __future__ import annotations

import trio
import trio.testing
import wsproto
import wsproto.events

from mcp_trio import (
    MCP_PATH,
    Handlers,
    SessionConfig,
)
from mcp_trio._websocket import _serve_connection

IO_TIMEOUT = 100_000  # (virtual seconds: the clock jumps)
PING = 0x89  # (the first byte of a ping frame: FIN and opcode 9)


class _Stalling(trio.abc.Stream):
    """A stream whose next write after :meth:`stall` puts ``n`` bytes out and then waits
    until cancelled (the socket buffers had room for ``n`` bytes); later writes go
    through, as they would once the peer reads again."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self._stall: int | None = None
        self.stalled = trio.Event()

    def stall(self, n: int) -> None:
        self._stall = n

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        n, self._stall = self._stall, None
        if n is None:
            await self.inner.send_all(data)
            return
        await self.inner.send_all(bytes(data)[:n])
        self.stalled.set()
        await trio.sleep_forever()

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _handshake(stream: trio.abc.Stream) -> wsproto.WSConnection:
    client = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
    request = wsproto.events.Request(host="127.0.0.1", target=MCP_PATH, subprotocols=["mcp"])
    await stream.send_all(client.send(request))
    while True:
        for event in client.events():
            assert isinstance(event, wsproto.events.AcceptConnection)
            return client
        client.receive_data(bytes(await stream.receive_some(65536)) or None)


async def _read_to_the_end(stream: trio.abc.Stream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


async def test_a_ping_cut_by_the_pong_timeout_is_followed_by_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The pong timeout cut the ping's own write (3 of its bytes out) and the 1011 close
    # frame went out after them: the peer read it as the rest of the ping. Now the
    # connection drops at the cut (1006), and at once: no close frame, no close_timeout.
    config = SessionConfig(ws_ping_interval=10, ws_ping_timeout=5, close_timeout=50)
    peer, ours = trio.testing.memory_stream_pair()
    stalling = _Stalling(ours)
    nursery.start_soon(_serve_connection, stalling, Handlers(), config, None, None)
    with trio.fail_after(IO_TIMEOUT):
        client = await _handshake(peer)
        began = trio.current_time()
        stalling.stall(3)  # (the next write is the ping, at 10 s)
        data = await _read_to_the_end(peer)
    assert stalling.stalled.is_set()
    assert len(data) == 3 and data[0] == PING
    assert trio.current_time() - began == 15  # (the ping at 10 s, its timeout 5 s later)
    client.receive_data(data)
    client.receive_data(None)
    assert [(type(event), getattr(event, "code", None)) for event in client.events()] == [
        (wsproto.events.CloseConnection, 1006)
    ]

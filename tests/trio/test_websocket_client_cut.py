"""The client's end of a WebSocket frame cut short: its keep-alive ping, the ping's own
write cut by the pong timeout, is followed by nothing on the wire (a 1011 close frame
after it would be read by the server as the rest of the ping). The client connects,
through a patched ``trio.open_tcp_stream``, to a memory stream whose writes the test
can stall part way; a server on wsproto plays the other end. Trio's autojump clock."""

from __future__ import annotations

import pytest
import trio
import trio.testing
import wsproto
import wsproto.events

from mcp_trio import SessionConfig, open_websocket_client

from .conftest import Dial
from .test_websocket_cut import IO_TIMEOUT, PING, _read_to_the_end, _Stalling


async def _accept(peer: trio.abc.Stream) -> None:
    """The server's side of the opening handshake."""
    ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    while True:
        ws.receive_data(bytes(await peer.receive_some(65536)))
        events = list(ws.events())
        if events:
            [request] = events
            assert isinstance(request, wsproto.events.Request)
            await peer.send_all(ws.send(wsproto.events.AcceptConnection(subprotocol="mcp")))
            return


async def test_a_client_ping_cut_by_the_pong_timeout_is_followed_by_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, dial: Dial
) -> None:
    peer, ours = trio.testing.memory_stream_pair()
    stalling = _Stalling(ours)
    dialled = dial(stalling)
    config = SessionConfig(ws_ping_interval=10, ws_ping_timeout=5, close_timeout=50)
    accepted = trio.Event()
    got: list[bytes] = []

    async def serve() -> None:
        await _accept(peer)
        stalling.stall(3)  # the client's next write (its ping, at 10 s): 3 bytes, then stuck
        accepted.set()
        got.append(await _read_to_the_end(peer))

    nursery.start_soon(serve)
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client("ws://h:1/mcp", config=config, start=False) as session:
            await accepted.wait()
            began = trio.current_time()
            await session.wait_closed()
        # The connection dropped at the cut, at the pong timeout: no close_timeout.
        assert trio.current_time() - began == pytest.approx(10 + 5)
        while not got:
            await trio.sleep(1)
    [data] = got
    assert dialled == [("h", 1)]
    assert stalling.stalled.is_set()
    assert data[0] == PING and len(data) == 3, data

"""A WebSocket frame cut short is the end of the connection: nothing follows it on the
wire (the peer would read it as the rest of the frame); and a local close lets the
message being written go out whole first, within ``close_timeout``.

The keep-alive ping, its own write cut by the pong timeout, on a server over a memory
stream whose writes a test can stall part way (a peer that stopped reading with room
left for a few bytes). The client's local close on real sockets on 127.0.0.1 (port 0),
against a server on wsproto that reads only when told. Trio's autojump clock."""

from __future__ import annotations

import json
import logging
import socket

import attrs
import pytest
import trio
import trio.testing
import wsproto
import wsproto.events

from mcp_sansio import ConnectionConfig
from mcp_trio import (
    MCP_PATH,
    Handlers,
    Session,
    SessionClosed,
    SessionConfig,
    open_websocket_client,
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
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The pong timeout cut the ping's own write (3 of its bytes out) and the 1011 close
    # frame went out after them: the peer read it as the rest of the ping. Now the
    # connection drops at the cut (1006), and at once: no close frame, no close_timeout.
    config = SessionConfig(ws_ping_interval=10, ws_ping_timeout=5, close_timeout=50)
    peer, ours = trio.testing.memory_stream_pair()
    stalling = _Stalling(ours)
    with caplog.at_level(logging.WARNING, "mcp_trio"), trio.fail_after(IO_TIMEOUT):
        nursery.start_soon(_serve_connection, stalling, Handlers(), config, None, None)
        client = await _handshake(peer)
        began = trio.current_time()
        stalling.stall(3)  # (the next write is the ping, at 10 s)
        data = await _read_to_the_end(peer)
        took = trio.current_time() - began
        await trio.testing.wait_all_tasks_blocked()  # (the keep-alive logs after the cut)
    # (the log says what happened: the ping was cut, no 1011 close frame went out)
    assert "WebSocket keep-alive: no pong within 5 s; dropped the connection" in caplog.text
    assert "1011" not in caplog.text
    assert stalling.stalled.is_set()
    assert len(data) == 3 and data[0] == PING
    assert took == 15  # (the ping at 10 s, its timeout 5 s later)
    client.receive_data(data)
    client.receive_data(None)
    assert [(type(event), getattr(event, "code", None)) for event in client.events()] == [
        (wsproto.events.CloseConnection, 1006)
    ]


SIZE = 8 * 1024 * 1024  # (more than the socket buffers hold once the server stops reading)
CONFIG = SessionConfig(
    ws_ping_interval=None, ws_max_message_size=4 * SIZE, close_timeout=1000, write_timeout=None
)  # (a message over ws_max_message_size would not be sent at all)
LEGACY = ConnectionConfig(era="legacy")  # (the server on wsproto answers initialize only)


class _SlowServer:
    """A WebSocket server on wsproto over one TCP connection that answers the MCP
    handshake and then reads only when told."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)

    async def event(self) -> wsproto.events.Event:
        while True:
            for event in self.ws.events():
                return event
            self.ws.receive_data(await self.stream.receive_some(65536) or None)

    async def send(self, event: wsproto.events.Event) -> None:
        await self.stream.send_all(self.ws.send(event))

    async def handshake(self) -> None:
        assert isinstance(await self.event(), wsproto.events.Request)
        await self.send(wsproto.events.AcceptConnection(subprotocol="mcp"))
        initialize = await self.event()
        assert isinstance(initialize, wsproto.events.TextMessage)
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}}
        result["serverInfo"] = {"name": "slow", "version": "1"}
        answer = {"jsonrpc": "2.0", "id": json.loads(initialize.data)["id"], "result": result}
        await self.send(wsproto.events.TextMessage(json.dumps(answer)))
        assert isinstance(await self.event(), wsproto.events.TextMessage)  # (initialized)

    async def read_to_the_close(self) -> tuple[list[str | int], int]:
        """Everything until the close (answered) or the connection's end: the messages
        and then the close code; and the length of the text received."""
        found: list[str | int] = []
        parts: list[str] = []
        text = 0
        async with trio.open_nursery() as ticking:
            ticking.start_soon(_ticks)
            while True:
                event = await self.event()
                if isinstance(event, wsproto.events.TextMessage):
                    text += len(event.data)
                    parts.append(event.data)
                    if event.message_finished:
                        found.append("".join(parts))
                        parts.clear()
                    continue
                assert isinstance(event, wsproto.events.CloseConnection)
                found.append(event.code)
                if event.code != 1006:
                    await self.send(event.response())
                break
            ticking.cancel_scope.cancel()
        await self.stream.aclose()
        return found, text


async def _ticks() -> None:
    # The clock jumps to the next deadline whenever every task waits, socket I/O
    # included: small steps, so that a transfer in progress is not taken for stalled.
    while True:
        await trio.sleep(0.01)


async def _close_mid_request(
    config: SessionConfig, silence: float
) -> tuple[list[str | int], int, float]:
    """Leave ``open_websocket_client`` 10 s into writing a request of ``SIZE`` bytes to a
    server that reads nothing from then until ``silence`` seconds: what the server read
    (events, text length) and how long leaving the block took."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listeners[0].socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    url = f"ws://127.0.0.1:{listeners[0].socket.getsockname()[1]}{MCP_PATH}"
    failures: list[BaseException] = []
    read: list[tuple[list[str | int], int]] = []

    async def request(session: Session) -> None:
        try:
            await session.request("tools/call", {"name": "big", "arguments": {"x": "x" * SIZE}})
        except SessionClosed as exc:
            failures.append(exc)

    async def serve() -> None:
        server = _SlowServer(await listeners[0].accept())
        async with trio.open_nursery() as ticking:
            ticking.start_soon(_ticks)
            await server.handshake()
            ticking.cancel_scope.cancel()
        await trio.sleep_until(began + silence)
        read.append(await server.read_to_the_close())

    began = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        async with open_websocket_client(url, config=config, connection_config=LEGACY) as session:
            nursery.start_soon(request, session)
            await trio.sleep(10)  # (the request is being written; the server reads nothing)
            leaving = trio.current_time()
        took = trio.current_time() - leaving
    await listeners[0].aclose()
    [failure] = failures  # (the request, on the client's close)
    assert "closed locally" in str(failure)
    [(events, text)] = read
    return events, text, took


async def test_leaving_the_client_mid_message_sends_it_whole_then_closes_with_1000(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The client's close cut the request and dropped the connection (1006). Now it goes
    # out whole (the server reads again 100 s later, within close_timeout), then 1000.
    with trio.fail_after(IO_TIMEOUT):
        events, text, took = await _close_mid_request(CONFIG, silence=100)
    [request, code] = events
    assert isinstance(request, str) and json.loads(request)["method"] == "tools/call"
    assert text == len(request) > SIZE
    assert code == 1000
    assert 90 <= took < 1000


async def test_leaving_the_client_mid_message_to_a_server_that_never_reads_takes_close_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The request may take close_timeout to go out, no longer: then the connection drops
    # with nothing after the cut (1006), and the block is left.
    config = attrs.evolve(CONFIG, close_timeout=5)
    with trio.fail_after(IO_TIMEOUT):
        events, text, took = await _close_mid_request(config, silence=1000)
    assert events == [1006]  # (wsproto's word for the connection lost, no close frame)
    assert 0 < text < SIZE
    assert 5 <= took < 5.1

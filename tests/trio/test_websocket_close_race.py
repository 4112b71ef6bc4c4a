"""A WebSocket close that crosses a frame from the peer ends cleanly, at both ends.

After a close frame, wsproto refuses to send anything but the close reply, and
trio-websocket's reader does not ask: a ping that arrives then is answered with a pong
(``wsproto.utilities.LocalProtocolError``, python-trio/trio-websocket#184), an
oversized message with a 1009 close frame. That error escaped the reader into the
connection's nursery: the server logged its connection as failed, the client's block
raised ``SessionClosed`` (an internal error). The same when trio-websocket's own 1009
close is followed by a ping in the same read. And the keep-alive no longer takes a pong
that has not come during a close for a dead peer.

The peer is wsproto over a ``trio.testing.memory_stream_pair``, so the order of the
frames is the test's: the server's end is ``_serve_connection``, the client's
``open_websocket_client`` over a patched ``trio.open_tcp_stream``. Trio's autojump
clock."""

from __future__ import annotations

import logging
import types

import pytest
import trio
import trio.testing
import trio_websocket
import wsproto
import wsproto.events
import wsproto.utilities
from wsproto.frame_protocol import FrameProtocol

from mcp_trio import Handlers, Session, SessionConfig, open_websocket_client
from mcp_trio._websocket import ReaderWatch, _serve_connection, probe_handshake

from .conftest import Dial
from .test_websocket_cut import _handshake, _read_to_the_end

IO_TIMEOUT = 100_000  # (virtual seconds: the clock jumps)
BOUND = 1024  # (ws_max_message_size)
CONFIG = SessionConfig(ws_ping_interval=None, close_timeout=50, ws_max_message_size=BOUND)
# What the peer sends after reading our close frame, before its close reply: a frame
# that trio-websocket's reader would answer (a pong; a 1009 close frame). (wsproto
# sends neither once it has read a close frame: they are made apart.)
LATE = ["ping", "oversized message"]


def _late(what: str, *, client: bool) -> bytes:
    """A frame of :data:`LATE`, as a client (or a server) writes it."""
    frames = FrameProtocol(client=client, extensions=[])
    if what == "ping":
        return bytes(frames.ping(b"late"))
    return bytes(frames.send_data("x" * (2 * BOUND), fin=True))


async def _next(ws: wsproto.WSConnection, stream: trio.abc.Stream) -> wsproto.events.Event:
    while True:
        for event in ws.events():
            return event
        ws.receive_data(bytes(await stream.receive_some(65536)) or None)


class _Server:
    """``_serve_connection`` on one end of a memory stream pair: its sessions and how
    it ended (``None``: normally)."""

    def __init__(self, config: SessionConfig) -> None:
        self.peer, self.ours = trio.testing.memory_stream_pair()
        self.config = config
        self.sessions: list[Session] = []
        self.outcome: list[BaseException | None] = []
        self.done = trio.Event()

    async def on_session(self, session: Session) -> None:
        self.sessions.append(session)
        await trio.sleep_forever()

    async def run(self) -> None:
        try:
            await _serve_connection(self.ours, Handlers(), self.config, None, self.on_session)
        except Exception as exc:
            self.outcome.append(exc)
        else:
            self.outcome.append(None)
        finally:
            await trio.aclose_forcefully(self.ours)
            self.done.set()


@pytest.mark.parametrize("late", LATE)
async def test_a_server_s_close_crossed_by_a_frame_from_the_client_ends_cleanly(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, late: str
) -> None:
    server = _Server(CONFIG)
    with trio.fail_after(IO_TIMEOUT):
        nursery.start_soon(server.run)
        client = await _handshake(server.peer)
        await trio.testing.wait_all_tasks_blocked()
        [session] = server.sessions
        began = trio.current_time()
        nursery.start_soon(session.aclose)
        close = await _next(client, server.peer)
        assert isinstance(close, wsproto.events.CloseConnection)
        assert close.code == 1000
        await server.peer.send_all(_late(late, client=True))  # (sent before it read ours)
        await server.peer.send_all(client.send(close.response()))
        rest = await _read_to_the_end(server.peer)
        await server.done.wait()
    assert server.outcome == [None]  # (was SessionClosed, from wsproto's LocalProtocolError)
    assert rest == b""  # (nothing after the close frame, no pong: the connection's end)
    assert trio.current_time() - began < CONFIG.close_timeout
    assert session.closed


async def test_an_oversized_message_then_a_ping_does_not_crash_the_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Read together: trio-websocket's reader closes with 1009 at the message, then
    # meets the ping (a pong in state LOCAL_CLOSING), in the same batch of frames.
    server = _Server(CONFIG)
    with trio.fail_after(IO_TIMEOUT):
        nursery.start_soon(server.run)
        client = await _handshake(server.peer)
        await trio.testing.wait_all_tasks_blocked()
        [session] = server.sessions
        both = _late("oversized message", client=True) + _late("ping", client=True)
        await server.peer.send_all(both)
        close = await _next(client, server.peer)
        assert isinstance(close, wsproto.events.CloseConnection) and close.code == 1009
        await server.peer.send_all(client.send(close.response()))
        rest = await _read_to_the_end(server.peer)
        await server.done.wait()
    assert server.outcome == [None]
    assert rest == b""  # (no pong)
    assert session.close_reason is not None
    assert "1009" in session.close_reason.reason


async def _serve_one(
    peer: trio.abc.Stream,
    after_close: bytes,
    seen: list[wsproto.events.Event],
    subprotocol: str | None = "mcp",
) -> None:
    """The server's end on wsproto: accept (with ``subprotocol``), then read until the
    client's close frame and answer it after ``after_close`` (a frame's bytes); ``seen``:
    what it read."""
    ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    await _accept_with(ws, peer, subprotocol)
    while True:
        event = await _next(ws, peer)
        seen.append(event)
        if isinstance(event, wsproto.events.CloseConnection):
            break
    await peer.send_all(after_close)
    await peer.send_all(ws.send(event.response()))
    await _read_to_the_end(peer)
    await peer.aclose()


async def _accept_with(
    ws: wsproto.WSConnection, peer: trio.abc.Stream, subprotocol: str | None = "mcp"
) -> None:
    """The server's side of the opening handshake, on ``ws``."""
    request = await _next(ws, peer)
    assert isinstance(request, wsproto.events.Request)
    await peer.send_all(ws.send(wsproto.events.AcceptConnection(subprotocol=subprotocol)))


@pytest.mark.parametrize("late", LATE)
async def test_a_client_s_close_crossed_by_a_frame_from_the_server_ends_cleanly(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    dial: Dial,
    late: str,
) -> None:
    peer, ours = trio.testing.memory_stream_pair()
    dial(ours)
    seen: list[wsproto.events.Event] = []
    nursery.start_soon(_serve_one, peer, _late(late, client=False), seen)
    with trio.fail_after(IO_TIMEOUT):
        # (leaving the block raised SessionClosed: an internal error, wsproto's)
        async with open_websocket_client("ws://h:1/mcp", config=CONFIG, start=False) as session:
            await trio.testing.wait_all_tasks_blocked()
            began = trio.current_time()
        assert trio.current_time() - began < CONFIG.close_timeout
    assert session.closed
    [close] = seen
    assert isinstance(close, wsproto.events.CloseConnection) and close.code == 1000


async def test_a_ping_unanswered_during_a_close_is_no_keepalive_failure(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The keep-alive's ping went out at 10 s; the server's close at once after it. The
    # client reads both and answers the close only, 20 s later (within close_timeout):
    # the pong timeout (5 s) passing meanwhile said "no pong; closed with code 1011".
    config = SessionConfig(ws_ping_interval=10, ws_ping_timeout=5, close_timeout=50)
    server = _Server(config)
    with caplog.at_level(logging.INFO, "mcp_trio"), trio.fail_after(IO_TIMEOUT):
        nursery.start_soon(server.run)
        client = await _handshake(server.peer)
        await trio.testing.wait_all_tasks_blocked()
        [session] = server.sessions
        ping = await _next(client, server.peer)
        assert isinstance(ping, wsproto.events.Ping)
        nursery.start_soon(session.aclose)
        close = await _next(client, server.peer)
        assert isinstance(close, wsproto.events.CloseConnection) and close.code == 1000
        await trio.sleep(20)
        await server.peer.send_all(client.send(close.response()))
        rest = await _read_to_the_end(server.peer)
        await server.done.wait()
    assert "keep-alive" not in caplog.text
    assert server.outcome == [None]
    assert rest == b""


async def test_the_keepalive_sends_no_ping_once_the_close_began(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The server's close at 5 s; the client answers it only at 30 s: no ping at 10 s or
    # 20 s meanwhile (trio-websocket refuses it, ConnectionClosed: the keep-alive stops).
    config = SessionConfig(ws_ping_interval=10, ws_ping_timeout=5, close_timeout=50)
    server = _Server(config)
    with trio.fail_after(IO_TIMEOUT):
        nursery.start_soon(server.run)
        client = await _handshake(server.peer)
        began = trio.current_time()
        await trio.sleep(5)
        [session] = server.sessions
        nursery.start_soon(session.aclose)
        close = await _next(client, server.peer)
        assert isinstance(close, wsproto.events.CloseConnection)
        await trio.sleep_until(began + 30)
        await server.peer.send_all(client.send(close.response()))
        rest = await _read_to_the_end(server.peer)
        await server.done.wait()
    assert server.outcome == [None]
    assert rest == b""  # (no ping after the close frame)


async def test_a_reader_s_protocol_error_on_an_open_connection_is_not_hidden() -> None:
    # Only a close excuses it: at any other time it is a bug, and it is raised.
    ours, _ = trio.testing.memory_stream_pair()
    ws = trio_websocket.WebSocketConnection(
        ours, wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    )
    assert ws.closed is None

    async def reader(self: trio_websocket.WebSocketConnection) -> None:
        await trio.lowlevel.checkpoint()
        raise wsproto.utilities.LocalProtocolError("a bug")

    with pytest.RaisesGroup(wsproto.utilities.LocalProtocolError):
        async with trio.open_nursery() as nursery:
            watch = ReaderWatch(nursery)
            watch.start_soon(types.MethodType(reader, ws))
    assert watch.reader_done.is_set()


async def test_a_probe_s_close_crossed_by_a_ping_ends_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, dial: Dial
) -> None:
    # OAuth's handshake without a token (the server accepts it: None), then its close:
    # the reader stopped at the ping, and nothing read the reply, so the close waited
    # for it until the timeout, and the probe said "failed" (status 0).
    peer, ours = trio.testing.memory_stream_pair()
    dial(ours)
    seen: list[wsproto.events.Event] = []
    nursery.start_soon(_serve_one, peer, _late("ping", client=False), seen)
    began = trio.current_time()
    with trio.fail_after(IO_TIMEOUT):
        assert await probe_handshake("ws://h:1/mcp", ssl_context=None, timeout=50) is None
    assert trio.current_time() - began < 50
    [close] = seen
    assert isinstance(close, wsproto.events.CloseConnection) and close.code == 1000

"""How a WebSocket session's end looks on the wire: a frame the server is writing is never
cut and then followed by more (a close frame read as its payload: code 1007), the 1008
of an expiry goes out even while a large message is being written, and a normal close
is code 1000 both ways. Real sockets on 127.0.0.1 (port 0), trio's autojump clock, a
client on wsproto that reads only when told (a slow reader: the server's write blocks)."""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import pytest
import trio
import trio.testing
import trio_websocket
import wsproto.events

from mcp_trio import (
    BearerAuth,
    Handlers,
    Principal,
    Server,
    Session,
    SessionClosed,
    SessionConfig,
    TokenExpired,
    WebSocketChannel,
    open_websocket_client,
    serve_websocket,
)
from mcp_trio._websocket import _open_ws, _WholeFrames

from .test_websocket_expiry import _SilentClient

IO_TIMEOUT = 100_000  # (virtual seconds: the clock jumps)
LIFETIME = 3600.0
SIZE = 8 * 1024 * 1024  # (more than the socket buffers hold once the client stops reading)
CONFIG = SessionConfig(
    ws_ping_interval=None, ws_max_message_size=4 * SIZE, close_timeout=1000, write_timeout=None
)


async def _verify(token: str) -> Principal:
    await trio.lowlevel.checkpoint()
    expires = time.time() + LIFETIME if token == "short" else None
    return Principal(subject="alice", expires_at=expires)


async def _ticks() -> None:
    # The clock jumps to the next deadline whenever every task waits, socket I/O
    # included: small steps, so that a transfer in progress is not taken for stalled.
    while True:
        await trio.sleep(0.01)


async def _big_answer_then_close(
    nursery: trio.Nursery,
    token: str,
    on_session: Callable[[Session], Awaitable[None]],
    *,
    config: SessionConfig = CONFIG,
    silence: float = LIFETIME + 1,
    before: Callable[[], Awaitable[None]] | None = None,
    hold: float = 0,
) -> tuple[list[wsproto.events.Event], int, float]:
    """Call a tool whose answer is ``SIZE`` bytes (after ``before``, if given) and stop
    reading until ``silence`` seconds have passed; then read everything: the events, the
    text length, when it began. The connection is closed ``hold`` seconds after the
    close frame is read (never answered)."""
    server = Server("big", session_config=config)

    @server.tool()
    async def big() -> str:
        if before is not None:
            await before()
        return "x" * SIZE

    auth = BearerAuth(verify_token=_verify)
    handle = await nursery.start(
        partial(server.serve_websocket, authenticate=auth, on_session=on_session)
    )
    port = handle.port
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    client = _SilentClient(stream)
    began = trio.current_time()
    await client.handshake(token)
    params = {"protocolVersion": "2025-06-18", "capabilities": {}}
    params["clientInfo"] = {"name": "slow", "version": "1"}
    await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert isinstance(await client.event(), wsproto.events.TextMessage)
    await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "big", "arguments": {}}
    await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    await trio.sleep_until(began + silence)  # (not reading: the server's write blocks)
    events: list[wsproto.events.Event] = []
    text = 0
    async with trio.open_nursery() as ticking:
        ticking.start_soon(_ticks)
        while True:
            try:
                event = await client.event()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                break
            if isinstance(event, wsproto.events.TextMessage):
                text += len(event.data)
                if not event.message_finished:
                    continue
            events.append(event)
            if isinstance(event, wsproto.events.CloseConnection):
                break
        ticking.cancel_scope.cancel()
    await trio.sleep(hold)
    await stream.aclose()
    return events, text, began


async def _serve_forever(session: Session) -> None:
    await trio.sleep_forever()


async def test_an_expiry_while_a_large_message_is_written_still_closes_with_1008(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The writer's abort cut the message, and the session's own close returned at once
    # (trio-websocket marks the connection closed before its close frame is out): the
    # connection was torn down under the 1008 frame. Now the message goes out whole
    # (within close_timeout) and the 1008 follows it.
    with trio.fail_after(IO_TIMEOUT):
        events, text, _ = await _big_answer_then_close(nursery, "short", _serve_forever)
    [answer, closing] = events
    assert isinstance(answer, wsproto.events.TextMessage) and text > SIZE
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1008
    assert closing.reason == "invalid_token: the access token expired"


async def test_a_local_close_mid_message_sends_it_whole_then_closes_with_1000(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The close frame followed half a frame: the client read it as text (1007, invalid
    # UTF-8). Then the close cut the message and dropped the connection (1006). Now the
    # message half out goes out whole (within close_timeout), then the close frame.
    async def close_at_lifetime(session: Session) -> None:
        await trio.sleep(LIFETIME - 1)
        await session.aclose()

    with trio.fail_after(IO_TIMEOUT):
        events, text, _ = await _big_answer_then_close(nursery, "forever", close_at_lifetime)
    [answer, closing] = events
    assert isinstance(answer, wsproto.events.TextMessage) and text > SIZE
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1000


async def test_a_server_shutting_down_mid_message_sends_it_whole_then_closes_with_1000(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The server's tasks cancelled (its shutdown) cut the message and dropped the
    # connection (1006); it goes out whole now, as on a local close, then 1000.
    async with trio.open_nursery() as outer:
        serving = trio.CancelScope()

        async def serve(task_status: trio.TaskStatus[trio.Nursery]) -> None:
            with serving:
                async with trio.open_nursery() as nursery:
                    task_status.started(nursery)
                    await trio.sleep_forever()

        async def shut_down_at_lifetime(session: Session) -> None:
            await trio.sleep(LIFETIME - 1)
            serving.cancel()
            await trio.sleep_forever()

        server_nursery = await outer.start(serve)
        with trio.fail_after(IO_TIMEOUT):
            events, text, _ = await _big_answer_then_close(
                server_nursery, "forever", shut_down_at_lifetime
            )
    [answer, closing] = events
    assert isinstance(answer, wsproto.events.TextMessage) and text > SIZE
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1000


async def test_a_local_close_mid_message_to_a_peer_that_never_reads_ends_in_close_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The message may take close_timeout to go out, no longer: then the connection drops
    # with nothing after the cut (1006), and the session is over.
    config = attrs.evolve(CONFIG, close_timeout=5)
    took: list[float] = []

    async def close_at_lifetime(session: Session) -> None:
        await trio.sleep(LIFETIME - 1)
        closing = trio.current_time()
        await session.aclose()  # (returns once the session and its channel are closed)
        took.append(trio.current_time() - closing)

    with trio.fail_after(IO_TIMEOUT):
        events, text, _ = await _big_answer_then_close(
            nursery, "forever", close_at_lifetime, config=config, silence=LIFETIME + 100
        )
    [closing] = events
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1006  # (wsproto's word for the connection lost, no close frame)
    assert 0 < text < SIZE
    [seconds] = took
    assert 5 <= seconds < 5.1  # (the message's close_timeout; then nothing waits more)


async def test_a_message_finished_on_close_and_the_close_handshake_share_close_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The message took up to close_timeout, then the close handshake had close_timeout
    # again: Session.aclose() took 9 s of a close_timeout of 5. Now the handshake gets
    # what the message left of it (1 s here; the peer never answers the close frame).
    config = attrs.evolve(CONFIG, close_timeout=5)
    took: list[float] = []

    async def close_at_lifetime(session: Session) -> None:
        await trio.sleep(LIFETIME - 1)
        closing = trio.current_time()
        await session.aclose()
        took.append(trio.current_time() - closing)

    with trio.fail_after(IO_TIMEOUT):
        events, text, _ = await _big_answer_then_close(
            nursery, "forever", close_at_lifetime, config=config, silence=LIFETIME + 3, hold=100
        )
    [answer, closing] = events
    assert isinstance(answer, wsproto.events.TextMessage) and text > SIZE
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1000
    [seconds] = took
    assert 5 <= seconds < 5.1  # (close_timeout for the message and the handshake)


async def test_a_message_finished_on_close_still_keeps_its_write_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The close shielded the write for close_timeout (50 s) from the writer's
    # write_timeout, which had 1.5 s left: the close lasted 50 s. Now the message keeps
    # its own deadline: cut then, the connection drops (1006) and the close is over.
    config = attrs.evolve(CONFIG, close_timeout=50, write_timeout=2)
    took: list[float] = []
    answering = trio.Event()

    async def answer_later() -> None:
        answering.set()
        await trio.sleep(10)  # (then the answer is written, to a peer that never reads)

    async def close_while_writing(session: Session) -> None:
        await answering.wait()
        await trio.sleep(10.5)  # (the answer's write began 0.5 s ago)
        closing = trio.current_time()
        await session.aclose()
        took.append(trio.current_time() - closing)

    with trio.fail_after(IO_TIMEOUT):
        events, text, _ = await _big_answer_then_close(
            nursery, "forever", close_while_writing, config=config, before=answer_later
        )
    [closing] = events
    assert isinstance(closing, wsproto.events.CloseConnection)
    assert closing.code == 1006  # (cut: nothing after it)
    assert 0 < text < SIZE
    [seconds] = took
    assert 1.5 <= seconds < 1.6  # (what the write_timeout left)


async def test_a_normal_close_is_code_1000_both_ways(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    served: list[Session] = []
    closing = trio.Event()

    async def on_session(session: Session) -> None:
        served.append(session)
        if closing.is_set():
            await session.aclose()  # (the server's local close)
        await trio.sleep_forever()

    handle = await nursery.start(
        partial(
            serve_websocket,
            Handlers(),
            "127.0.0.1",
            0,
            config=CONFIG,
            on_session=on_session,
            authenticate=BearerAuth(verify_token=_verify),
        )
    )
    url = handle.url
    with trio.fail_after(IO_TIMEOUT):
        for token in ("short", "forever"):  # (an expiring principal closes as others do)
            headers = {"Authorization": f"Bearer {token}"}
            async with open_websocket_client(url, headers=headers, config=CONFIG):
                pass
            await served[-1].wait_closed()
            assert "code 1000 (NORMAL_CLOSURE)" in str(served[-1].close_reason)
        closing.set()
        for token in ("short", "forever"):
            auth = [(b"authorization", f"Bearer {token}".encode())]
            async with _open_ws(  # (a plain client over a stream it closes)
                url,
                subprotocols=["mcp"],
                max_message_size=1 << 20,
                connect_timeout=IO_TIMEOUT,
                extra_headers=auth,
            ) as (ws, _, _):
                try:
                    await ws.get_message()
                except trio_websocket.ConnectionClosed as exc:
                    assert exc.reason is not None and exc.reason.code == 1000
                else:
                    raise AssertionError("the server did not close")


class _SlowCloseWs:
    """A connection whose close handshake lasts until ``done`` is set; a second close
    returns at once, as trio-websocket's does (it marks the connection closed first)."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.closes: list[tuple[int, str | None]] = []

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        self.closes.append((code, reason))
        if len(self.closes) == 1:
            await self.done.wait()
        else:
            await trio.lowlevel.checkpoint()


async def test_a_second_close_waits_for_the_first(autojump_clock: trio.testing.MockClock) -> None:
    # The session's own close returned at once while the expiry's 1008 frame was still
    # waiting to go out; the end of the connection then cut it short.
    ws = _SlowCloseWs()
    channel = WebSocketChannel(ws, close_timeout=10)  # type: ignore[arg-type]
    ended: list[str] = []

    async def close(name: str) -> None:
        await channel.aclose()
        ended.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(close, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(close, "second")
        await trio.testing.wait_all_tasks_blocked()
        assert ended == [] and ws.closes == [(1000, None)]  # (one close frame)
        ws.done.set()
    assert sorted(ended) == ["first", "second"]
    began = trio.current_time()
    with trio.fail_after(100):  # (bounded by close_timeout, when the first never ends)
        ws2 = _SlowCloseWs()
        channel = WebSocketChannel(ws2, close_timeout=10)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.aclose)
            await trio.testing.wait_all_tasks_blocked()
            await channel.aclose()
            assert trio.current_time() - began <= 10


class _PeerClosedWs:
    """A connection the peer closed with ``reason``; it records our close's code."""

    def __init__(self, code: int, reason: str | None) -> None:
        self.reason = trio_websocket.CloseReason(code, reason)
        self.closes: list[tuple[int, str | None]] = []

    async def get_message(self) -> str:
        await trio.lowlevel.checkpoint()
        raise trio_websocket.ConnectionClosed(self.reason)

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        await trio.lowlevel.checkpoint()
        self.closes.append((code, reason))


async def test_the_first_failure_gives_the_close_code_and_the_reason() -> None:
    ws = _PeerClosedWs(1000, None)
    channel = WebSocketChannel(ws)  # type: ignore[arg-type]
    first = SessionClosed("no pong")
    channel._will_fail(1011, "keep-alive ping timed out", first)
    channel._will_fail(1008, "invalid_token: the access token expired", SessionClosed("later"))
    await channel.aclose()
    assert ws.closes == [(1011, "keep-alive ping timed out")]
    with pytest.raises(SessionClosed) as info:
        await channel.receive()
    assert info.value is first


async def test_a_client_s_own_failure_wins_over_the_server_s_expiry_close() -> None:
    # The client failed first (its close code is on the wire): that is why it ended,
    # whatever the server's close frame said meanwhile.
    ws = _PeerClosedWs(1008, "invalid_token: the access token expired")
    channel = WebSocketChannel(ws, client=True)  # type: ignore[arg-type]
    with pytest.raises(TokenExpired):  # (nothing failed: the server's close says why)
        await channel.receive()
    failure = SessionClosed("no pong")
    channel._will_fail(1011, "keep-alive ping timed out", failure)
    with pytest.raises(SessionClosed) as info:
        await channel.receive()
    assert info.value is failure


class _StuckWs:
    """A connection whose message writes last until ``written`` is set (the peer takes
    nothing meanwhile), and whose close handshake lasts 1000 s (the peer's close frame
    is that late: past every bound here)."""

    def __init__(self) -> None:
        self.written = trio.Event()
        self.closes: list[tuple[int, str | None]] = []

    async def send_message(self, message: str) -> None:
        await self.written.wait()

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        self.closes.append((code, reason))
        await trio.sleep(1000)


@attrs.define
class _Resource(trio.abc.AsyncResource):
    """The stream under a connection: records its closing."""

    closed: bool = False

    async def aclose(self) -> None:
        self.closed = True
        await trio.lowlevel.checkpoint()


async def test_a_send_cancelled_mid_message_closes_a_plain_stream_under_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Half a frame may be out: nothing may follow it on the stream (WebSocketChannel
    # made by hand, over a stream that does not guard its own writes).
    stream = _Resource()
    channel = WebSocketChannel(_StuckWs(), stream=stream)  # type: ignore[arg-type]
    with trio.move_on_after(1):
        await channel.send(b"{}")
    assert stream.closed


async def test_a_send_cancelled_with_the_transport_s_stream_leaves_it_to_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # _WholeFrames closes itself when a write on it is cut; a send cancelled before any
    # of its bytes went out (behind a ping, say) leaves it open, for the close frame.
    inner, _ = trio.testing.memory_stream_pair()
    whole = _WholeFrames(inner)
    channel = WebSocketChannel(_StuckWs(), stream=whole)  # type: ignore[arg-type]
    with trio.move_on_after(1):
        await channel.send(b"{}")
    assert not whole.cut
    await whole.send_all(b"still open")


@pytest.mark.parametrize(("write_left", "cut_after"), [(3.0, 3.0), (30.0, 10.0)])
async def test_a_message_finished_on_close_is_cut_at_the_earlier_bound(
    autojump_clock: trio.testing.MockClock, write_left: float, cut_after: float
) -> None:
    # What its write_timeout left it (3 s), or close_timeout (10 s), whichever ends first;
    # then nothing follows the cut on the stream.
    stream = _Resource()
    channel = WebSocketChannel(_StuckWs(), close_timeout=10, stream=stream)  # type: ignore[arg-type]

    async def send(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as writer:  # (the session's writer: aborted on close)
            task_status.started(writer)
            await channel.send(b"{}")

    async with trio.open_nursery() as nursery:
        writer = await nursery.start(send)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        channel.finish_write(began + write_left)  # (what its write_timeout left)
        writer.cancel()  # (the close's abort: the message goes on)
        await trio.testing.wait_all_tasks_blocked()
        assert not stream.closed
    assert trio.current_time() - began == cut_after
    assert stream.closed  # (nothing after the cut)


async def test_the_close_handshake_gets_what_the_message_finished_on_close_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The message and the close frame after it share one close_timeout.
    ws = _StuckWs()
    channel = WebSocketChannel(ws, close_timeout=10)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.send, b"{}")
        await trio.testing.wait_all_tasks_blocked()
        channel.finish_write()
        began = trio.current_time()
        await trio.sleep(4)
        ws.written.set()  # (out whole, 4 s into the close)
    await channel.aclose()
    assert ws.closes == [(1000, None)]
    assert trio.current_time() - began == 10


async def test_after_a_message_written_whole_the_close_handshake_has_close_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ws = _StuckWs()
    ws.written.set()
    channel = WebSocketChannel(ws, close_timeout=10)  # type: ignore[arg-type]
    await channel.send(b"{}")
    await trio.sleep(100)
    channel.finish_write()  # (no write in progress: nothing to share)
    began = trio.current_time()
    await channel.aclose()
    assert trio.current_time() - began == 10

"""A close frame queued behind a message being written goes out after it, even when
the peer's keep-alive ping crosses the close.

The server's session closes while a notification is being written (the peer is slow
to read): its close frame waits for trio-websocket's write lock. The peer's ping then
arrives; trio-websocket's reader answers with a pong that wsproto refuses after a close
frame (python-trio/trio-websocket#184), so the reader stops and ``reader_done`` is set.
``_close_ws`` used to cancel the whole ``ws.aclose()`` then, which closed the stream
under the notification: the peer got neither it nor the 1000 close frame (a response
lost that way is a request never answered). Now only aclose's wait for the close reply
ends, which needs trio-websocket's private reply event (``_REPLY_EVENT``): a test here
fails loudly if that goes away, and another shows the fallback (cancelling aclose) is
still bounded.

Also: the reader errors that a close does not excuse, and the client's refusal of a
server without the ``mcp`` subprotocol, crossed by a ping.

The peer is wsproto over a ``trio.testing.memory_stream_pair``; Trio's autojump clock."""

from __future__ import annotations

import contextlib
import json
import types
from typing import Any

import pytest
import trio
import trio.testing
import trio_websocket
import wsproto
import wsproto.connection
import wsproto.events
import wsproto.utilities

import mcp_trio._websocket as ws_module
from mcp_trio import Handlers, Session, SessionClosed, SessionConfig, open_websocket_client
from mcp_trio._websocket import ReaderWatch, _reply_event, _serve_connection

from .conftest import Dial
from .test_websocket_close_race import _late, _next, _serve_one
from .test_websocket_cut import _handshake

IO_TIMEOUT = 100_000  # (virtual seconds: the clock jumps)
CONFIG = SessionConfig(ws_ping_interval=None, close_timeout=50)


class _Gate(trio.abc.Stream):
    """Our end's stream: the next write after :meth:`hold` waits for :attr:`release`,
    then goes out whole (a peer slow to read)."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.held: trio.Event | None = None
        self.release = trio.Event()
        self.writing = trio.Event()  # (set once the held write has begun)

    def hold(self) -> None:
        self.held = self.release

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.writing.set()
            await held.wait()
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _send_json(client: wsproto.WSConnection, peer: trio.abc.Stream, obj: object) -> None:
    await peer.send_all(client.send(wsproto.events.TextMessage(json.dumps(obj))))


async def _read_all(client: wsproto.WSConnection, peer: trio.abc.Stream) -> list[Any]:
    """Every event the peer reads until the end of the stream (it replies to a close
    frame if the stream is still open; the last event is wsproto's for the end)."""
    got: list[Any] = []
    while True:
        data = await peer.receive_some(65536)
        client.receive_data(bytes(data) or None)
        for event in client.events():
            got.append(event)
            if (
                isinstance(event, wsproto.events.CloseConnection)
                and client.state is wsproto.connection.ConnectionState.REMOTE_CLOSING
            ):
                with contextlib.suppress(trio.BrokenResourceError):
                    await peer.send_all(client.send(event.response()))
        if not data:
            return got


async def _close_behind_a_write(
    nursery: trio.Nursery, crossing_ping: bool
) -> tuple[list[Any], list[BaseException | None], float]:
    """The scene of the module docstring: what the peer read, how the server ended,
    and how long the close took from the release of the write."""
    peer, ours = trio.testing.memory_stream_pair()
    gate = _Gate(ours)
    sessions: list[Session] = []
    done = trio.Event()
    outcome: list[BaseException | None] = []

    async def on_session(session: Session) -> None:
        sessions.append(session)
        await trio.sleep_forever()

    async def run() -> None:
        try:
            await _serve_connection(gate, Handlers(), CONFIG, None, on_session)
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)
        finally:
            await trio.aclose_forcefully(ours)
            done.set()

    nursery.start_soon(run)
    client = await _handshake(peer)
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "x", "version": "1"},
    }
    await _send_json(
        client, peer, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}
    )
    assert isinstance(await _next(client, peer), wsproto.events.TextMessage)
    await _send_json(client, peer, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    await trio.testing.wait_all_tasks_blocked()
    [session] = sessions
    gate.hold()  # (the notification's write waits: the peer is slow to read)
    nursery.start_soon(session.notify, "notifications/vendor/hello", {"x": 1})
    await gate.writing.wait()
    nursery.start_soon(session.aclose)  # (its close frame waits behind the notification)
    await trio.testing.wait_all_tasks_blocked()
    if crossing_ping:
        await peer.send_all(_late("ping", client=True))  # (the peer's keep-alive ping)
        await trio.testing.wait_all_tasks_blocked()
    await trio.sleep(1)
    began = trio.current_time()
    gate.release.set()  # (the peer reads again)
    got = await _read_all(client, peer)
    await done.wait()
    return got, outcome, trio.current_time() - began


@pytest.mark.parametrize("crossing_ping", [False, True], ids=["alone", "crossed-by-a-ping"])
async def test_the_message_being_written_then_the_close_frame_reach_the_peer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, crossing_ping: bool
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        got, outcome, took = await _close_behind_a_write(nursery, crossing_ping)
    assert outcome == [None]
    texts = [e for e in got if isinstance(e, wsproto.events.TextMessage)]
    assert [json.loads(e.data)["method"] for e in texts] == ["notifications/vendor/hello"]
    closes = [e for e in got if isinstance(e, wsproto.events.CloseConnection)]
    assert closes[0].code == 1000  # (was the 1006 of a dropped connection)
    assert got.index(texts[0]) < got.index(closes[0])
    assert took < CONFIG.close_timeout


def test_trio_websocket_still_has_the_reply_event() -> None:
    # _close_ws ends aclose's wait for the close reply through this private event of
    # trio-websocket. If this fails, trio-websocket renamed it: find what its aclose
    # now waits on and update _REPLY_EVENT (the fallback cuts a message being written).
    ours, _ = trio.testing.memory_stream_pair()
    ws = trio_websocket.WebSocketConnection(
        ours, wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    )
    event = _reply_event(ws)
    assert event is not None, f"trio_websocket has no {ws_module._REPLY_EVENT}"
    assert event is getattr(ws, ws_module._REPLY_EVENT)
    assert not event.is_set()


async def test_without_the_reply_event_the_close_is_still_bounded(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback (a trio-websocket without it): aclose is cancelled once the reader
    # is gone, as before; the message and the close frame are lost, but nothing hangs.
    monkeypatch.setattr(ws_module, "_REPLY_EVENT", "_no_such_event")
    with trio.fail_after(IO_TIMEOUT):
        got, outcome, took = await _close_behind_a_write(nursery, crossing_ping=True)
    assert outcome == [None]
    assert [type(e) for e in got] == [wsproto.events.CloseConnection]
    assert got[0].code == 1006  # (the connection dropped)
    assert took < CONFIG.close_timeout


@pytest.mark.parametrize(
    "error", [RuntimeError("a bug"), trio.BrokenResourceError("gone")], ids=repr
)
async def test_a_closing_reader_s_other_errors_are_not_hidden(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    # A close excuses only wsproto's LocalProtocolError (the refused pong of #184).
    closing = trio_websocket.CloseReason(1000, None)
    monkeypatch.setattr(trio_websocket.WebSocketConnection, "closed", property(lambda _: closing))
    ours, _ = trio.testing.memory_stream_pair()
    ws = trio_websocket.WebSocketConnection(
        ours, wsproto.WSConnection(wsproto.ConnectionType.SERVER)
    )

    async def reader(self: trio_websocket.WebSocketConnection, exc: BaseException) -> None:
        await trio.lowlevel.checkpoint()
        raise exc

    with pytest.RaisesGroup(type(error)):
        async with trio.open_nursery() as nursery:
            watch = ReaderWatch(nursery)
            watch.start_soon(types.MethodType(reader, ws), error)
    assert watch.reader_done.is_set()
    async with trio.open_nursery() as nursery:  # (and the refused pong is excused)
        watch = ReaderWatch(nursery)
        refused = wsproto.utilities.LocalProtocolError("pong after close")
        watch.start_soon(types.MethodType(reader, ws), refused)
    assert watch.reader_done.is_set()


async def test_a_subprotocol_refusal_crossed_by_a_ping_ends_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, dial: Dial
) -> None:
    # The refusal's close goes through _close_ws: the reader stops at the server's
    # ping (its pong refused) and nothing would read the reply; a plain ws.aclose
    # waited for it until close_timeout.
    peer, ours = trio.testing.memory_stream_pair()
    dial(ours)
    seen: list[Any] = []
    nursery.start_soon(_serve_one, peer, _late("ping", client=False), seen, None)
    began = trio.current_time()
    with trio.fail_after(IO_TIMEOUT), pytest.raises(SessionClosed, match="subprotocol"):
        async with open_websocket_client("ws://h:1/mcp", config=CONFIG, start=False):
            pass
    assert trio.current_time() - began < CONFIG.close_timeout
    [close] = seen
    assert isinstance(close, wsproto.events.CloseConnection)
    assert close.code == 1002

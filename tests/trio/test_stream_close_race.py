"""A byte-stream session closed locally just as a chunk of the peer's arrives.

The reader is parked in ``receive_some``; the peer's write hands it a chunk and wakes it
(trio's memory streams pump synchronously), and the block that owns the session exits
before the reader runs. The close tells the core the input is over (``receive_eof``, so
the NDJSON splitter's ``feed_eof``), and the reader's wakeup still returns the chunk: it
came after the end of input and is dropped, as a closed core drops a message channel's
late messages. It used to be fed to the core and crash the session with "internal error
in the session runtime" (``LocalProtocolError: feed() called after feed_eof()``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import Role
from mcp_trio import Handlers, NotificationContext, Session, StreamChannel

from .helpers import RawPeer, handshaken

_Stream = trio.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]


@asynccontextmanager
async def _idle(role: Role, **kwargs: Any) -> AsyncIterator[tuple[Session, RawPeer, _Stream]]:
    """A byte-stream session of ``role`` (``open_session`` keywords in ``kwargs``) after a
    legacy handshake with the peer it yields with it (and the peer's end of the stream):
    idle, its reader parked in ``receive_some``."""
    ours, theirs = trio.testing.memory_stream_pair()
    peer = RawPeer(None, theirs)
    async with handshaken(StreamChannel.from_stream(ours), peer, role, **kwargs) as s:
        yield s, peer, theirs


_LATE: dict[str, dict[str, Any]] = {
    "notification": {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
    "request": {"jsonrpc": "2.0", "id": 7, "method": "ping"},
    "answer": {"jsonrpc": "2.0", "id": 7, "result": {}},  # (a pong nobody asked for)
}


@pytest.mark.parametrize("kind", sorted(_LATE))
@pytest.mark.parametrize("role", ["client", "server"])
async def test_a_chunk_that_wakes_the_reader_as_the_session_closes_is_dropped(
    autojump_clock: trio.testing.MockClock, role: Role, kind: str
) -> None:
    # Mutation: no closing check in _read_loop after the wakeup -> the chunk is fed to
    # the core after receive_eof, and the block raises SessionClosed("internal error in
    # the session runtime") from LocalProtocolError("feed() called after feed_eof()").
    async with _idle(role) as (s, peer, _):
        await peer.send(_LATE[kind])  # wakes the parked reader, which has not run yet
    assert s.close_reason is not None
    assert s.close_reason.reason == "the session was closed locally"


@pytest.mark.parametrize("role", ["client", "server"])
async def test_the_peers_end_of_input_as_the_session_closes_keeps_the_local_reason(
    autojump_clock: trio.testing.MockClock, role: Role
) -> None:
    # The other wakeup the reader can carry into a close: the peer's end of input.
    async with _idle(role) as (s, _, theirs):
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

    async with _idle("server", handlers=handlers) as (s, peer, _):
        await peer.send(_LATE["notification"])
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "ping"})
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        await trio.testing.wait_all_tasks_blocked()
    assert seen == ["notifications/roots/list_changed"]
    assert s.close_reason is not None
    assert s.close_reason.reason == "the session was closed locally"

"""A request whose caller gives up before any of it was written is taken back.

The peer never saw its id, so it is not sent at all and no ``notifications/cancelled``
follows it (2026-07-28 cancellation.mdx: a cancellation MUST only reference a request
previously issued); otherwise the peer would start work the user already cancelled.
A request already written (even in part) is cancelled on the wire as before.

Each scenario blocks the session's writer on a first message the peer does not read
yet (a memory channel without room, a byte stream whose write waits for the reader),
queues the request behind it and gives up on it, then lets the peer read. A marker
notification sent last shows that nothing else came in between.

The clock is the ``autojump_clock``: the bounded writes of the old behaviour (the
cancellation's ``abandon_write_timeout``) pass without real waiting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import (
    Connection,
    Event,
    LocalProtocolError,
    NotificationReceived,
    RequestCancelled,
    RequestReceived,
)
from mcp_sansio._json import dumps
from mcp_trio import (
    Session,
    SessionConfig,
    StreamChannel,
    memory_channel_pair,
    open_session,
)
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._session import _Queued

from .helpers import ManualPeer, client_config, server_config
from .test_http_support import IO_TIMEOUT, call, client_connection_config, fake_server_url
from .test_writer_leftovers import _HoldingServer

FIRST = "notifications/test/first"  # the write the peer does not read at first
AFTER = "notifications/test/after"  # queued behind the request
END = "notifications/test/end"  # the marker: nothing may come before it
CONFIG = SessionConfig(abandon_write_timeout=2, handshake_timeout=None)


def _seen(events: list[Event]) -> list[str]:
    """What the peer received, by kind and method."""
    out: list[str] = []
    for event in events:
        if isinstance(event, RequestReceived | NotificationReceived):
            out.append(event.method)
        elif isinstance(event, RequestCancelled):
            out.append(f"cancelled {event.request_id!r}")
        else:
            out.append(type(event).__name__)
    return out


class _BytePeer:
    """The far end of a byte stream (stdio-like), read only when the test says so."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.conn = Connection("server", server_config())
        self.events: list[Event] = []

    async def read(self, max_bytes: int | None = None) -> None:
        """Read one chunk (one message's write: the stream is in lockstep), feed the
        core and send what it answers."""
        data = await self.stream.receive_some(max_bytes)
        self.events.extend(self.conn.receive_bytes(bytes(data), now=trio.current_time()))
        out = self.conn.bytes_to_send()
        if out:
            await self.stream.send_all(out)

    async def read_until(self, method: str) -> list[str]:
        while method not in _seen(self.events):
            await self.read()
        return _seen(self.events)


async def _start(client: Session, peer_read: Any, era: str) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.start)
        await peer_read()  # initialize (or server/discover)
        if era == "legacy":
            await peer_read()  # notifications/initialized


@asynccontextmanager
async def _byte_stream_client() -> AsyncIterator[tuple[Session, _BytePeer]]:
    """A started legacy client session on a lockstep byte stream, and its peer (what
    it read so far cleared)."""
    ours, theirs = trio.testing.lockstep_stream_pair()
    peer = _BytePeer(theirs)
    async with open_session(
        StreamChannel.from_stream(ours), "client", config=CONFIG, connection_config=client_config()
    ) as client:
        await _start(client, peer.read, "legacy")
        peer.events.clear()
        yield client, peer


async def _give_up_behind_a_blocked_write(client: Session) -> None:
    """Block the writer on FIRST, queue a request behind it and AFTER behind that,
    and give up on the request (its caller times out) before the peer reads."""
    assert client._io_nursery is not None
    client._io_nursery.start_soon(client.notify, FIRST)  # blocks: the peer reads nothing
    await trio.testing.wait_all_tasks_blocked()
    with trio.move_on_after(1) as gave_up:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/call", {"name": "x"})
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(client.notify, AFTER)  # queued behind the request
            await trio.testing.wait_all_tasks_blocked()
    assert gave_up.cancelled_caught


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_request_given_up_before_its_write_never_reaches_a_memory_peer(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=CONFIG, connection_config=client_config(era=era)
    ) as client:
        await _start(client, peer.next_events, era)
        await _give_up_behind_a_blocked_write(client)
        assert client.connection.pending_requests() == ()  # forgotten by the core
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.notify, END)
            seen: list[Event] = []
            with trio.fail_after(5):
                while END not in _seen(seen):
                    seen.extend(await peer.next_events())
        # The others keep their order; no tools/call, no notifications/cancelled.
        assert _seen(seen) == [FIRST, AFTER, END]
        await trio.testing.wait_all_tasks_blocked()
        assert client.statistics().queued_messages == 0


async def test_a_request_given_up_before_its_write_never_reaches_a_byte_stream_peer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _byte_stream_client() as (client, peer):
        await _give_up_behind_a_blocked_write(client)
        assert client.connection.pending_requests() == ()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.notify, END)
            with trio.fail_after(5):
                seen = await peer.read_until(END)
        assert seen == [FIRST, AFTER, END]


async def test_a_legacy_http_request_is_not_held_behind_a_held_notification(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The HTTP client's one-way messages are not written by the session's writer (a
    # task of the channel's sends them, in order): a request written while a
    # notification's POST waits for its 202 is not queued behind it, so there is
    # nothing to take back; it is POSTed and answered at once. (A request waiting for
    # a free connection is withdrawn by the channel: test_http_client_cancel.py.)
    server = _HoldingServer()
    url = await fake_server_url(nursery, server.handle)
    async with open_http_client(
        url,
        connection_config=client_connection_config("legacy"),
        config=SessionConfig(abandon_write_timeout=1),
        transport=HttpTransportConfig(open_get_stream=False),
    ) as client:
        await client.request("tools/call", call("echo"))  # a kept-alive connection
        nursery.start_soon(client.notify, "notifications/roots/list_changed")  # held
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        with trio.fail_after(IO_TIMEOUT):
            result = await client.request("tools/call", call("echo"))
        assert result["content"][0]["text"] == "ok"
        assert trio.current_time() == began  # it waited for nothing
        server.hold.set()  # the held write ends
        await trio.testing.wait_all_tasks_blocked()
        assert server.calls == [] and server.cancels == []
        assert client.statistics().queued_messages == 0


async def test_a_request_written_in_part_is_cancelled_on_the_wire(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The caller gives up while its own write is half out: the rest goes out (half a
    # line would corrupt the stream) and so does its notifications/cancelled.
    async with _byte_stream_client() as (client, peer):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def call() -> None:
                with scope:
                    await client.request("tools/call", {"name": "x"})

            nursery.start_soon(call)
            await peer.read(5)  # part of the request's line
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(5):
                seen = await peer.read_until("cancelled 2")
        assert seen == ["tools/call", "cancelled 2"]
        assert client.connection.pending_requests() == ()


async def test_a_request_written_whole_is_cancelled_on_the_wire(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=CONFIG, connection_config=client_config()
    ) as client:
        await _start(client, peer.next_events, "legacy")
        with trio.move_on_after(1):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.request, "tools/call", {"name": "x"})
                (request,) = await peer.next_events()  # it is out: the peer works on it
        with trio.fail_after(5):
            (cancelled,) = await peer.next_events()
        assert isinstance(request, RequestReceived) and isinstance(cancelled, RequestCancelled)
        assert cancelled.request_id == request.request_id


async def test_a_withdrawn_request_frees_its_place(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    progress: list[Any] = []

    async def on_progress(event: Any) -> None:
        progress.append(event)

    conn_config = client_config(max_pending_requests=1)
    async with open_session(ours, "client", config=CONFIG, connection_config=conn_config) as client:
        await _start(client, peer.next_events, "legacy")
        assert client._io_nursery is not None
        client._io_nursery.start_soon(client.notify, FIRST)
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1):
            await client.request("tools/call", {"name": "x"}, on_progress=on_progress)
        # The one place is free again: a request the core would refuse otherwise.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/list")
            with trio.fail_after(5):
                seen = _seen(await peer.next_events())
                seen += _seen(await peer.next_events())
            assert seen == [FIRST, "tools/list"]
            # A progress report (and an answer) for the withdrawn id: ignored (the core
            # forgot its token too: tests/core/test_forget_unsent.py).
            await peer.channel.send(
                dumps(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": 2, "progress": 1},
                    }
                )
            )
            await peer.channel.send(dumps({"jsonrpc": "2.0", "id": 2, "result": {}}))
            await trio.testing.wait_all_tasks_blocked()
            assert progress == []
            nursery.cancel_scope.cancel()
        assert not client.closed


async def test_only_the_mark_recorded_when_the_request_was_queued_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Nothing is parsed: the session records, as it queues the request, the mark whose
    # last message it is (0 when the core held it for a new session). Only that mark
    # is taken back: a request with no record, or one recorded as held, never is.
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=CONFIG, connection_config=client_config()
    ) as client:
        await _start(client, peer.next_events, "legacy")
        session: Any = client
        writer = session._writer
        rid = client.connection.send_request("tools/call", {"name": "x"}, now=0.0)
        request = client.connection.data_to_send()
        first = writer.queue([dumps({"jsonrpc": "2.0", "method": FIRST})])
        assert not writer.write_nowait(first)  # the peer reads nothing: all stay queued
        mark = writer.queue(request)
        assert not session._withdraw(rid)  # no record
        session._queued[rid] = _Queued(0)
        assert not session._withdraw(rid)  # held: the mark is not known to be its
        session._queued[rid] = _Queued(mark)
        assert session._withdraw(rid)
        assert not session._withdraw(rid)  # (once)
        assert client.connection.pending_requests() == ()
        assert writer.backlog == 1
        assert client.statistics().withdrawn_messages == 1


async def test_a_request_the_core_finished_meanwhile_is_not_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The core let it go already (timed out: its notifications/cancelled is queued
    # after it): taking the request back would leave that cancellation naming an id
    # the peer never saw, so both go out as they are.
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=CONFIG, connection_config=client_config()
    ) as client:
        await _start(client, peer.next_events, "legacy")
        session: Any = client
        writer = session._writer
        rid = client.connection.send_request("tools/call", timeout=1, now=0.0)
        first = writer.queue([dumps({"jsonrpc": "2.0", "method": FIRST})])
        assert not writer.write_nowait(first)
        mark = writer.queue(client.connection.data_to_send())
        session._queued[rid] = _Queued(mark)
        client.connection.handle_timer(5.0)
        with pytest.raises(LocalProtocolError):
            client.connection.forget_request(rid)
        assert not session._withdraw(rid)
        assert writer.backlog == 2

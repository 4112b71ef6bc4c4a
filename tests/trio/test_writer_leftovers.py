"""Messages left in the outbox by cancelled tasks still go out, with nobody waiting.

A caller cancelled (timed out) after its request went out leaves its
``notifications/cancelled`` queued behind a slow write: the session's own write of
that cancellation is bounded (``abandon_write_timeout``) and gives up. (A request
still queued when its caller gives up is taken back instead, with no cancellation:
``test_withdraw_unsent.py``.) A notification whose caller gives up while it waits is
left queued the same way. When the slow write ends, its writer sends only what needs
no waiting and leaves: the rest must still be written, in order (a task of the
session's, ``Writer.on_leftovers``), not only with the session's next write; until
then the server works on the request and an HTTP client holds a connection for it.

The clock is the ``autojump_clock`` (loopback I/O is done before the run loop would
sleep): a message that never goes out fails the ``fail_after`` at once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import h11
import pytest
import trio
import trio.testing

from mcp_sansio import RequestCancelled, RequestReceived
from mcp_sansio._json import dumps
from mcp_trio import (
    MemoryChannel,
    MessageChannel,
    SessionClosed,
    SessionConfig,
    memory_channel_pair,
    open_session,
)
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._writer import Writer

from .helpers import ManualPeer, client_config, server_config
from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    call,
    client_connection_config,
    fake_server_url,
    read_request,
    respond,
)

JSON = (("content-type", "application/json"),)


class _HoldingServer:
    """A legacy Streamable HTTP server that holds the ``202`` of
    ``notifications/roots/list_changed`` until ``hold`` is set; the tool ``never``
    answers with an SSE stream that never ends."""

    def __init__(self) -> None:
        self.hold = trio.Event()
        self.calls: list[Any] = []
        self.cancels: list[Any] = []
        self.cancelled = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (got := await read_request(conn, stream)) is not None:
            _head, body = got
            method = body.get("method") if isinstance(body, dict) else None
            if method == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "holding", "version": "1"},
                }
                answer = dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
                await respond(conn, stream, answer, headers=(*JSON, ("mcp-session-id", "s1")))
            elif method == "tools/call" and body["params"]["name"] == "never":
                self.calls.append(body["id"])
                head = h11.Response(
                    status_code=200, headers=[("content-type", "text/event-stream")]
                )
                await stream.send_all(conn.send(head) or b"")
                await trio.sleep_forever()
            elif method == "tools/call":
                ok = {"content": [{"type": "text", "text": "ok"}]}
                answer = dumps({"jsonrpc": "2.0", "id": body["id"], "result": ok})
                await respond(conn, stream, answer, headers=JSON)
            else:
                if method == "notifications/roots/list_changed":
                    await self.hold.wait()
                if method == "notifications/cancelled":
                    self.cancels.append(body["params"]["requestId"])
                    self.cancelled.set()
                await respond(conn, stream, b"", status=202)
            conn.start_next_cycle()


async def test_a_legacy_http_cancellation_queued_behind_a_held_write_still_goes_out(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = _HoldingServer()
    url = await fake_server_url(nursery, server.handle)
    async with open_http_client(
        url,
        connection_config=client_connection_config("legacy"),
        config=SessionConfig(abandon_write_timeout=1),
        transport=HttpTransportConfig(open_get_stream=False),
    ) as client:
        await client.request("tools/call", call("echo"))  # a kept-alive connection
        with trio.move_on_after(2) as gave_up:
            async with trio.open_nursery() as calls:
                calls.start_soon(client.request, "tools/call", call("never"))  # goes out
                await trio.testing.wait_all_tasks_blocked()
                assert len(server.calls) == 1
                nursery.start_soon(client.notify, "notifications/roots/list_changed")  # held
        # The cancellation is queued behind the held write (and the session's write of
        # it gave up).
        assert gave_up.cancelled_caught
        assert server.cancels == []
        server.hold.set()  # the held write ends; nothing else is written after it
        with trio.fail_after(IO_TIMEOUT):
            await server.cancelled.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert server.cancels == server.calls and len(server.calls) == 1
        pool = client.channel._pool  # type: ignore[attr-defined]
        assert pool.limiter.borrowed_tokens == 0  # the request's connection is free
        assert client.connection.pending_requests() == ()
        assert (await client.request("tools/call", call("echo")))["content"][0]["text"] == "ok"


async def test_a_memory_cancellation_left_queued_still_goes_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The peer does not read (buffer 0): the first request's write blocks; a second
    # caller times out behind it, before its request was written: it is taken back.
    # Then the first caller gives up too, its request written: its cancellation goes out.
    config = SessionConfig(abandon_write_timeout=2, handshake_timeout=None)
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=config, connection_config=client_config()
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()  # initialize
            await peer.next_events()  # notifications/initialized
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/list")  # blocks in its write
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1) as gave_up:
                await client.request("tools/call", {"name": "x"})
            assert gave_up.cancelled_caught
            await trio.testing.wait_all_tasks_blocked()
            with trio.fail_after(IO_TIMEOUT):
                (listing,) = await peer.next_events()
                assert isinstance(listing, RequestReceived) and listing.method == "tools/list"
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()  # the first caller gives up too
        # (Its write of the cancellation, bounded, gave up.) Nobody waits to write it
        # any more; it goes out all the same, and nothing of the request taken back
        # came before it.
        with trio.fail_after(IO_TIMEOUT):
            (cancelled,) = await peer.next_events()
        assert isinstance(cancelled, RequestCancelled)
        assert cancelled.request_id == listing.request_id
        await trio.testing.wait_all_tasks_blocked()  # (the send completes its side)
        assert client.statistics().queued_messages == 0


# ------------------------------------------------------------------ the Writer alone


class _SlowChannel(MessageChannel):
    """A WebSocket's way: ``send_nowait`` never takes a message (the writer rides
    nothing along); each ``send`` takes a permit. Optionally fails instead."""

    atomic_send: ClassVar[bool] = False

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.permits = trio.Semaphore(0)
        self.error: BaseException | None = None

    async def send(self, message: bytes) -> None:
        await self.permits.acquire()
        if self.error is not None:
            raise self.error
        self.sent.append(message)

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


class _Session:
    """What the session does with ``on_leftovers``: start ``write_leftovers`` in a
    nursery, and record its outcome (the session fails on a failure)."""

    def __init__(self, nursery: trio.Nursery, channel: MessageChannel, **kwargs: Any) -> None:
        self.nursery = nursery
        self.writer = Writer(channel, write_timeout=30, on_leftovers=self.start, **kwargs)
        self.started = 0
        self.accept = True
        self.outcomes: list[SessionClosed | None] = []

    def start(self) -> bool:
        if not self.accept:
            return False
        self.started += 1
        self.nursery.start_soon(self.run)
        return True

    async def run(self) -> None:
        self.outcomes.append(await self.writer.write_leftovers())


async def _leave_behind(writer: Writer, *batches: list[bytes]) -> None:
    """Queue each batch from a task that gives up at once (it waits behind a writer)."""
    for messages in batches:
        with trio.CancelScope() as scope:
            scope.cancel()
            await writer.write_through(writer.queue(messages))


async def test_what_cancelled_waiters_leave_is_written_in_order_by_one_task() -> None:
    channel = _SlowChannel()
    async with trio.open_nursery() as nursery:
        session = _Session(nursery, channel)
        writer = session.writer
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"2", b"3"], [b"4"])
        assert session.started == 0  # a writer is active: nothing is left yet
        channel.permits.release()  # "1" is out; its writer leaves, rides nothing
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1"] and session.started == 1
        await _leave_behind(writer, [b"5"])  # while the leftover task writes: its job
        for _ in range(4):
            channel.permits.release()
            await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1", b"2", b"3", b"4", b"5"]
        assert session.started == 1 and session.outcomes == [None]
        assert writer.backlog == 0
        # Done and gone: the next leftovers get a task of their own.
        nursery.start_soon(writer.write_through, writer.queue([b"6"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"7"])
        channel.permits.release()
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent[-2:] == [b"6", b"7"] and session.started == 2


async def test_a_leftover_task_refused_is_asked_for_again_next_time() -> None:
    channel = _SlowChannel()
    async with trio.open_nursery() as nursery:
        session = _Session(nursery, channel)
        writer = session.writer
        session.accept = False  # (a closing session starts no task)
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"2"])
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1"] and writer.backlog == 1  # left for the next write
        session.accept = True
        nursery.start_soon(writer.write_through, writer.queue([b"3"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"4"])
        for _ in range(3):
            channel.permits.release()
            await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1", b"2", b"3", b"4"] and session.started == 1


async def test_a_leftover_task_reports_a_failed_write_and_writes_no_more() -> None:
    channel = _SlowChannel()
    async with trio.open_nursery() as nursery:
        session = _Session(nursery, channel)
        writer = session.writer
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"2", b"3"])
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        channel.error = trio.BrokenResourceError("gone")
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
    (failure,) = session.outcomes
    assert failure is not None and "BrokenResourceError" in failure.reason
    assert channel.sent == [b"1"] and writer.backlog == 0


async def test_nothing_left_is_written_after_abort() -> None:
    channel = _SlowChannel()
    async with trio.open_nursery() as nursery:
        session = _Session(nursery, channel)
        writer = session.writer
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"2", b"3"])
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert session.started == 1  # writing "2"
        writer.abort()
        for _ in range(3):
            channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
    assert channel.sent == [b"1"]
    (failure,) = session.outcomes
    assert failure is not None and failure.reason == "the session was closed"


async def test_without_a_hook_leftovers_wait_for_the_next_write() -> None:
    channel = _SlowChannel()
    writer = Writer(channel, write_timeout=30)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        await _leave_behind(writer, [b"2"])
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1"] and writer.backlog == 1
        for _ in range(2):
            channel.permits.release()
        assert await writer.write_through(writer.queue([b"3"])) is None
    assert channel.sent == [b"1", b"2", b"3"]


async def test_a_failed_leftover_write_closes_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    to_peer, peer_inbox = trio.open_memory_channel[bytes](0)
    peer_outbox, from_peer = trio.open_memory_channel[bytes](0)
    ours, theirs = MemoryChannel(to_peer, from_peer), MemoryChannel(peer_outbox, peer_inbox)
    peer = ManualPeer(theirs, "server", server_config())
    config = SessionConfig(abandon_write_timeout=2, handshake_timeout=None)
    async with open_session(
        ours, "client", config=config, connection_config=client_config()
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
            await peer.next_events()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.notify, "notifications/roots/list_changed")
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1):
                await client.notify("notifications/roots/list_changed")  # left queued
            await peer.next_events()  # the first; the leftover task writes the second
            peer_inbox.close()  # the peer stops reading: the leftover write fails
            await trio.testing.wait_all_tasks_blocked()
            assert client.statistics().closed  # as any failed write closes it
            with pytest.raises(SessionClosed, match="BrokenResourceError"):
                await client.request("tools/list")


@pytest.mark.parametrize("closing", [False, True])
async def test_the_session_starts_a_leftover_writer_only_while_open(closing: bool) -> None:
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    config = SessionConfig(handshake_timeout=None)
    async with open_session(
        ours, "client", config=config, connection_config=client_config()
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
            await peer.next_events()
        session: Any = client
        if closing:  # (its I/O nursery is still open until its tasks see the cancel)
            session._begin_close(SessionClosed("closing"), graceful=True)
        assert session._start_leftover_writer() is not closing
        await trio.testing.wait_all_tasks_blocked()  # (an empty outbox: it ends at once)


async def test_no_leftover_task_when_the_writer_leaves_nothing() -> None:
    # A slow write that leaves nothing queued starts no task: the hook is only for
    # what cancelled waiters left behind (a task per slow write would tax every one).
    channel = _SlowChannel()
    async with trio.open_nursery() as nursery:
        session = _Session(nursery, channel)
        writer = session.writer
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1"] and session.started == 0

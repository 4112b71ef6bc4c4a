"""The session runtime against a hand-driven peer: what goes over the wire, and failures
of the channel itself (write errors, hung writes, end of input, internal errors)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import trio
import trio.testing

from mcp_sansio import (
    ErrorCode,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
    RequestCancelled,
    RequestId,
    RequestReceived,
    ResultReceived,
)
from mcp_sansio._json import loads
from mcp_trio import (
    Handlers,
    InputRequiredError,
    McpError,
    MemoryChannel,
    MessageChannel,
    NotificationContext,
    RequestContext,
    RequestTimeout,
    SessionClosed,
    SessionConfig,
    StreamChannel,
    connect_session,
    memory_channel_pair,
    open_session,
)
from mcp_trio._writer import Writer

from .helpers import ManualPeer, ScriptedChannel, client_config, server_config


async def test_caller_cancellation_sends_cancelled_and_drops_the_late_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(ours, "client", connection_config=client_config()) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()  # initialize
            await peer.next_events()  # notifications/initialized
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                with trio.move_on_after(3) as scope:
                    await client.request("tools/call", {"name": "x"})
                assert scope.cancelled_caught

            nursery.start_soon(caller)
            (request,) = await peer.next_events()
            assert isinstance(request, RequestReceived)
            (cancelled,) = await peer.next_events()
            assert isinstance(cancelled, RequestCancelled)
            assert cancelled.request_id == request.request_id
            assert cancelled.reason == "cancelled by the caller"
        assert trio.current_time() == pytest.approx(3)
        # a late answer is dropped, and the session goes on
        late = f'{{"jsonrpc":"2.0","id":{request.request_id},"result":{{}}}}'.encode()
        await theirs.send(late)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.request, "tools/list")
            (listing,) = await peer.next_events()
            assert isinstance(listing, RequestReceived)
            peer.conn.send_result(listing.request_id, {"tools": []})
            await peer.flush()
        assert client.connection.pending_requests() == ()


async def test_courtesy_cancel_write_is_bounded(autojump_clock: trio.testing.MockClock) -> None:
    # A caller is cancelled after its request went out, while a notification's write
    # blocks (nobody reads; memory buffer 0): its cancellation waits for its turn and
    # gives up after abandon_write_timeout instead of hanging. (A request none of which
    # was written is taken back instead, with no write: test_withdraw_unsent.py.)
    config = SessionConfig(abandon_write_timeout=2, handshake_timeout=None)
    ours, theirs = memory_channel_pair(0)
    peer = ManualPeer(theirs, "server", server_config())
    async with open_session(
        ours, "client", config=config, connection_config=client_config()
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
            await peer.next_events()
        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            with trio.move_on_after(1):
                async with trio.open_nursery() as calls:
                    calls.start_soon(client.request, "tools/call", {"name": "x"})
                    await peer.next_events()  # the request is out
                    nursery.start_soon(client.notify, "notifications/roots/list_changed")
                    await trio.testing.wait_all_tasks_blocked()  # (its write blocks)
            assert trio.current_time() - start == pytest.approx(1 + 2)
            nursery.cancel_scope.cancel()


async def test_write_failure_closes_the_session() -> None:
    channel = ScriptedChannel(send_error=trio.BrokenResourceError("pipe gone"))
    async with open_session(channel, "client", connection_config=client_config()) as client:
        with pytest.raises(SessionClosed, match="pipe gone"):
            await client.start()
        await client.wait_closed()
        assert client.connection.closed
        assert channel.closed


async def test_hung_write_on_a_stream_times_out(autojump_clock: trio.testing.MockClock) -> None:
    channel = ScriptedChannel(hang=True)
    config = SessionConfig(write_timeout=4)
    async with open_session(
        channel, "client", config=config, connection_config=client_config()
    ) as client:
        start = trio.current_time()
        with pytest.raises(SessionClosed, match="timed out after 4"):
            await client.start()
        assert trio.current_time() - start == pytest.approx(4)


async def test_hung_stream_write_is_shielded_from_the_caller(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A frame is never cut in half: the caller's cancellation waits for the write,
    # which is bounded by write_timeout.
    channel = ScriptedChannel(hang=True)
    config = SessionConfig(write_timeout=4)
    async with open_session(
        channel, "client", config=config, connection_config=client_config()
    ) as client:
        with trio.move_on_after(1):
            await client.start()
        assert trio.current_time() == pytest.approx(4)
        assert client.closed


async def test_handshake_timeout(autojump_clock: trio.testing.MockClock) -> None:
    ours, _theirs = memory_channel_pair()
    config = SessionConfig(handshake_timeout=5)
    async with open_session(
        ours, "client", config=config, connection_config=client_config()
    ) as client:
        with pytest.raises(RequestTimeout, match="handshake timed out"):
            await client.start()


async def test_initialize_timeout_from_the_core(autojump_clock: trio.testing.MockClock) -> None:
    ours, _theirs = memory_channel_pair()
    config = SessionConfig(handshake_timeout=None)
    async with open_session(
        ours, "client", config=config, connection_config=client_config(request_timeout=3)
    ) as client:
        with pytest.raises(RequestTimeout, match="initialize"):
            await client.start()


async def test_handshake_interrupted_by_close() -> None:
    channel = ScriptedChannel()
    async with open_session(channel, "client", connection_config=client_config()) as client:
        await channel.feed(trio.EndOfChannel())
        with pytest.raises(SessionClosed, match="peer closed"):
            await client.start()


async def test_the_peer_leaving_cancels_its_handlers_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A channel without a half-close (memory, WebSocket): the end of input means the
    # peer is gone and no answer can reach it, so its requests are cancelled (as
    # Streamable HTTP treats a client disconnect), not run for the grace period.
    # (stdio's half-close keeps them answered: test_stdio_shutdown_answers.py.)
    finished: list[str] = []
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def work(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        try:
            await trio.sleep(ctx.params["seconds"])
            finished.append("done")
        except trio.Cancelled:
            finished.append("cancelled")
            raise
        return {}

    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "client", client_config())
    config = SessionConfig(shutdown_grace_period=10)
    async with open_session(
        ours, "server", handlers=handlers, config=config, connection_config=server_config()
    ) as server:
        peer.conn.start(now=0.0)
        await peer.flush()
        await peer.next_events()  # initialize result; initialized goes out
        peer.conn.send_request("tools/call", {"name": "x", "seconds": 4}, now=0.0)
        peer.conn.send_request("tools/call", {"name": "x", "seconds": 1000}, now=0.0)
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().running_handlers == 2
        start = trio.current_time()
        await theirs.aclose()
        await server.wait_closed()
        assert trio.current_time() == start
        assert finished == ["cancelled", "cancelled"]
        assert server.close_reason is not None
        assert "peer closed" in server.close_reason.reason


async def test_end_of_input_without_handlers_closes_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair()
    async with open_session(ours, "server", connection_config=server_config()) as server:
        await theirs.aclose()
        await server.wait_closed()
        assert trio.current_time() == 0


async def test_internal_failure_is_our_error_from_the_group() -> None:
    channel = ScriptedChannel()
    with pytest.raises(SessionClosed, match="internal error") as info:
        async with open_session(channel, "server", connection_config=server_config()) as server:
            await channel.feed(RuntimeError("a bug in a transport"))
            await server.wait_closed()
    assert isinstance(info.value.__cause__, BaseExceptionGroup)
    assert _caused_by(info.value, RuntimeError)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``kind`` is somewhere in the cause chain / groups of ``exc``."""
    if isinstance(exc, kind):
        return True
    if isinstance(exc, BaseExceptionGroup) and any(_caused_by(e, kind) for e in exc.exceptions):
        return True
    return exc.__cause__ is not None and _caused_by(exc.__cause__, kind)


async def test_internal_failure_with_connect_session() -> None:
    channel = ScriptedChannel()
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            session = await connect_session(
                nursery, channel, "server", connection_config=server_config()
            )
            await channel.feed(RuntimeError("a bug"))
            await session.wait_closed()
    (closed,) = info.value.exceptions
    assert isinstance(closed, SessionClosed)
    assert session.closed


async def test_a_broken_channel_closes_the_session() -> None:
    channel = ScriptedChannel()
    async with open_session(channel, "server", connection_config=server_config()) as server:
        await channel.feed(trio.BrokenResourceError("reset"))
        await server.wait_closed()
        assert server.close_reason is not None
        assert "broke" in server.close_reason.reason


async def test_invalid_input_is_answered_by_the_core_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ours, theirs = memory_channel_pair()
    async with open_session(ours, "server", connection_config=server_config()):
        await theirs.send(b"{not json")
        reply = loads(await theirs.receive())
        assert reply["error"]["code"] == ErrorCode.PARSE_ERROR
    assert "invalid message" in caplog.text


# ---------------------------------------------------------------------- modern MRTR


async def _next_request(peer: ManualPeer) -> RequestReceived:
    while True:
        for event in await peer.next_events():
            if isinstance(event, RequestReceived):
                return event


async def test_input_required_round_trip() -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "server", server_config(era="modern"))
    rounds: list[InputRequired] = []

    async def provide(event: InputRequired) -> dict[str, Any]:
        rounds.append(event)
        return {"where": {"roots": [{"uri": "file:///home"}]}}

    async with open_session(
        ours, "client", connection_config=client_config(era="modern")
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
        result: dict[str, Any] = {}

        async def caller() -> None:
            result.update(
                await client.request("tools/call", {"name": "greet"}, on_input_required=provide)
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(caller)
            first = await _next_request(peer)
            peer.conn.send_input_required(
                first.request_id,
                {"where": {"method": "roots/list", "params": {}}},
                state={"step": 1},
                now=trio.current_time(),
            )
            await peer.flush()
            retry = await _next_request(peer)
            assert retry.input_responses is not None
            assert retry.request_state == {"step": 1}
            peer.conn.send_result(retry.request_id, {"content": [], "isError": False})
            await peer.flush()
        assert rounds[0].round == 1
        assert result["content"] == []


async def test_input_required_without_a_callback_raises() -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "server", server_config(era="modern"))
    async with open_session(
        ours, "client", connection_config=client_config(era="modern")
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                with pytest.raises(InputRequiredError) as info:
                    await client.request("tools/call", {"name": "greet"})
                assert info.value.event.method == "tools/call"

            nursery.start_soon(caller)
            first = await _next_request(peer)
            peer.conn.send_input_required(
                first.request_id, {"x": {"method": "roots/list"}}, now=0.0
            )
            await peer.flush()


async def test_input_callback_failure_abandons_the_request() -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "server", server_config(era="modern"))

    async def refuse(event: InputRequired) -> dict[str, Any]:
        raise McpError.from_code(-1, "user said no")

    async with open_session(
        ours, "client", connection_config=client_config(era="modern")
    ) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.start)
            await peer.next_events()
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                with pytest.raises(McpError, match="user said no"):
                    await client.request("tools/call", {"name": "g"}, on_input_required=refuse)

            nursery.start_soon(caller)
            first = await _next_request(peer)
            peer.conn.send_input_required(
                first.request_id, {"x": {"method": "roots/list"}}, now=0.0
            )
            await peer.flush()


async def test_ndjson_sessions_over_a_byte_stream(autojump_clock: trio.testing.MockClock) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def echo(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        await trio.sleep(ctx.params["n"] % 3)
        return {"n": ctx.params["n"]}

    left, right = trio.testing.memory_stream_pair()
    config = SessionConfig(max_concurrent_handlers=4)
    async with (
        open_session(
            StreamChannel.from_stream(right, read_chunk_size=64),
            "server",
            handlers=handlers,
            config=config,
            connection_config=server_config(),
        ),
        open_session(
            StreamChannel.from_stream(left), "client", connection_config=client_config()
        ) as client,
    ):
        await client.start()
        results: list[int] = []

        async def one(n: int) -> None:
            results.append((await client.request("tools/call", {"name": "x", "n": n}))["n"])

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(one, n)
        assert sorted(results) == list(range(40))


async def test_closing_cancels_a_hung_stream_write() -> None:
    channel = ScriptedChannel(hang=True)
    config = SessionConfig(write_timeout=None)
    async with open_session(
        channel, "client", config=config, connection_config=client_config()
    ) as client:
        async with trio.open_nursery() as nursery:

            async def starter() -> None:
                with pytest.raises(SessionClosed, match="closed"):
                    await client.start()

            nursery.start_soon(starter)
            await trio.testing.wait_all_tasks_blocked()
            assert client.statistics().queued_messages == 1
            await client.aclose()
        assert client.statistics().queued_messages == 0


async def test_closing_while_the_reader_waits_for_a_slot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def forever(ctx: RequestContext) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "client", client_config())
    config = SessionConfig(max_concurrent_handlers=1)
    async with open_session(
        ours, "server", handlers=handlers, config=config, connection_config=server_config()
    ) as server:
        peer.conn.start(now=0.0)
        await peer.flush()
        await peer.next_events()
        for _ in range(3):
            peer.conn.send_request("tools/call", {"name": "x"}, now=0.0)
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().running_handlers == 1
        await server.aclose()
        assert server.statistics().running_handlers == 0


async def test_a_failing_progress_callback_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def steps(ctx: RequestContext) -> dict[str, Any]:
        await ctx.report_progress(1)
        await ctx.report_progress(2)
        return {}

    async def broken(event: ProgressReceived) -> None:
        raise RuntimeError("callback bug")

    ours, theirs = memory_channel_pair()
    async with (
        open_session(theirs, "server", handlers=handlers, connection_config=server_config()),
        open_session(ours, "client", connection_config=client_config()) as client,
    ):
        await client.start()
        assert await client.request("tools/call", {"name": "x"}, on_progress=broken) == {}
    assert "callback bug" in caplog.text


async def test_cancelling_the_nursery_of_connect_session_closes_everything() -> None:
    channel = ScriptedChannel()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            session = await connect_session(
                nursery, channel, "server", connection_config=server_config()
            )
            scope.cancel()
    assert session.closed
    assert channel.closed
    with pytest.raises(SessionClosed, match="cancelled"):
        await session.notify("notifications/message")


async def test_notifications_reach_their_handlers_in_the_order_sent() -> None:
    # They arrive together and are read without a scheduler tick in between; each
    # handler task still starts before the next one is spawned.
    seen: list[int] = []
    handlers = Handlers()

    @handlers.on_notification("notifications/roots/list_changed")
    async def changed(ctx: NotificationContext) -> None:
        assert ctx.params is not None
        seen.append(ctx.params["n"])

    ours, theirs = memory_channel_pair(64)
    peer = ManualPeer(theirs, "client", client_config())
    async with open_session(
        ours, "server", handlers=handlers, connection_config=server_config()
    ) as server:
        peer.conn.start(now=0.0)
        await peer.flush()
        await peer.next_events()
        for n in range(40):
            peer.conn.send_notification("notifications/roots/list_changed", {"n": n})
        await peer.flush()
        await trio.testing.wait_all_tasks_blocked()
        assert seen == list(range(40))
        assert server.statistics().running_handlers == 0


class _GatedChannel(MessageChannel):
    """``send_nowait`` takes messages while ``open``; ``send`` waits for ``gate``."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.open = False
        self.gate = trio.Event()
        self.waited_sends = 0  # sends that went the async way

    async def send(self, message: bytes) -> None:
        self.waited_sends += 1
        await self.gate.wait()
        self.sent.append(message)

    def send_nowait(self, message: bytes) -> bool:
        if self.open:
            self.sent.append(message)
        return self.open

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


class _AtomicGatedChannel(_GatedChannel):
    """The same, with cancellable writes (like a memory channel's)."""

    atomic_send: ClassVar[bool] = True


async def test_messages_queue_behind_a_write_in_progress() -> None:
    channel = _GatedChannel()
    writer = Writer(channel, write_timeout=None)
    first = writer.queue([b"1", b"1+"])
    assert not writer.write_nowait(first)  # the channel is full
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.write_through, first)
        await trio.testing.wait_all_tasks_blocked()
        # The channel would take the next one at once, but "1" is being written:
        # "2" must not jump ahead of it.
        channel.open = True
        second = writer.queue([b"2", b"3"])
        assert not writer.write_nowait(second)
        assert channel.sent == []
        assert writer.backlog == 4
        channel.gate.set()
    # Once "1" is out, its writer sends what else goes without waiting.
    assert channel.sent == [b"1", b"1+", b"2", b"3"]
    assert writer.write_nowait(first)  # already out
    assert writer.write_nowait(second)
    assert writer.backlog == 0
    assert channel.waited_sends == 1


async def test_writers_parked_behind_a_full_channel_leave_together() -> None:
    # The convoy this guards against: each parked task waking in turn, one scheduler
    # tick each, to write its own message the slow way while newcomers queue behind.
    channel = _GatedChannel()
    writer = Writer(channel, write_timeout=None)
    done: list[int] = []

    async def write(n: int) -> None:
        assert await writer.write_through(writer.queue([b"%d" % n])) is None
        done.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(10):
            nursery.start_soon(write, n)
            await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [] and writer.backlog == 10
        channel.open = True
        channel.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        # The first writer sent all ten; a newcomer takes the fast path at once.
        assert channel.sent == [b"%d" % n for n in range(10)]
        assert writer.write_nowait(writer.queue([b"late"]))
    assert sorted(done) == list(range(10))
    assert channel.waited_sends == 1
    assert channel.sent[-1] == b"late"


async def test_parked_writers_outlive_a_cancelled_writer() -> None:
    channel = _AtomicGatedChannel()  # a write in progress is cancellable
    writer = Writer(channel, write_timeout=None)
    results: list[SessionClosed | None] = []

    async def write(message: bytes, scope: trio.CancelScope | None = None) -> None:
        with scope if scope is not None else trio.CancelScope():
            results.append(await writer.write_through(writer.queue([message])))

    first = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, b"1", first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(write, b"2")
        await trio.testing.wait_all_tasks_blocked()
        assert channel.waited_sends == 1
        first.cancel()  # the writer goes; "1" stays first in the outbox
        await trio.testing.wait_all_tasks_blocked()
        assert channel.waited_sends == 2  # the parked one took over, from "1"
        channel.open = True
        channel.gate.set()
    assert results == [None]  # the cancelled one returned nothing
    assert channel.sent == [b"1", b"2"]
    assert writer.backlog == 0


async def test_a_parked_writer_cancelled_still_has_its_message_sent() -> None:
    channel = _GatedChannel()
    writer = Writer(channel, write_timeout=None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.write_through, writer.queue([b"1"]))
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0) as gave_up:
            await writer.write_through(writer.queue([b"2"]))
        assert gave_up.cancelled_caught
        channel.open = True
        channel.gate.set()
    assert channel.sent == [b"1", b"2"]  # the writer rode "2" along


class _PermitChannel(MessageChannel):
    """Each ``send`` takes one permit (``permits.release()``); ``send_nowait`` never
    takes a message (a WebSocket, a long line on a pipe)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.permits = trio.Semaphore(0)

    async def send(self, message: bytes) -> None:
        await self.permits.acquire()
        self.sent.append(message)

    async def receive(self) -> bytes:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        pass


async def _write_through(
    writer: Writer,
    messages: list[bytes],
    results: dict[bytes, SessionClosed | None],
    scope: trio.CancelScope | None = None,
) -> None:
    """Queue ``messages`` and write them through; record the outcome under the first."""
    with scope if scope is not None else trio.CancelScope():
        results[messages[0]] = await writer.write_through(writer.queue(messages))


async def _returns_once_out() -> None:
    channel = _PermitChannel()
    writer = Writer(channel, write_timeout=60)
    results: dict[bytes, SessionClosed | None] = {}
    async with trio.open_nursery() as nursery:
        for messages in ([b"1"], [b"2"], [b"3", b"4"]):
            nursery.start_soon(_write_through, writer, messages, results)
            await trio.testing.wait_all_tasks_blocked()
        channel.permits.release()
        channel.permits.release()
        await trio.testing.wait_all_tasks_blocked()
        assert channel.sent == [b"1", b"2"]
        assert results == {b"1": None, b"2": None}
        channel.permits.release()
        channel.permits.release()
    assert channel.sent == [b"1", b"2", b"3", b"4"]
    assert results == {b"1": None, b"2": None, b"3": None}


async def test_a_waiting_writer_returns_once_its_messages_are_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Never behind messages queued after its own: the reader waiting to write its
    # answer must not wait for a handler's later notifications (two full pipes would
    # stop both readers). Trio runs woken tasks in either order, hence the rounds.
    # (write_timeout: on failure, the shielded writes end and the nursery with them.)
    for _ in range(30):
        await _returns_once_out()


async def _passed_over(cancel_with_turn: bool) -> None:
    channel = _PermitChannel()
    writer = Writer(channel, write_timeout=60)
    results: dict[bytes, SessionClosed | None] = {}
    scopes = {m: trio.CancelScope() for m in (b"1", b"2", b"3")}
    async with trio.open_nursery() as nursery:
        for message, scope in scopes.items():
            nursery.start_soon(_write_through, writer, [message], results, scope)
            await trio.testing.wait_all_tasks_blocked()
        if cancel_with_turn:
            channel.permits.release()  # "1" goes out and "2" is next...
        scopes[b"2"].cancel()  # ...but its task is gone
        await trio.testing.wait_all_tasks_blocked()
        if not cancel_with_turn:
            channel.permits.release()
        channel.permits.release()
        channel.permits.release()
    assert results == {b"1": None, b"3": None}
    assert channel.sent == [b"1", b"2", b"3"]  # "2" stayed queued, in its place


async def test_a_cancelled_waiting_writer_is_passed_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Cancelled before its turn, or as its turn came (trio runs the two wakeups in
    # either order, hence the rounds): the next waiter writes, nobody waits forever.
    for cancel_with_turn in [False, True] * 15:
        await _passed_over(cancel_with_turn)


async def test_a_write_already_out_never_waits_for_the_writer() -> None:
    channel = _GatedChannel()
    writer = Writer(channel, write_timeout=None)
    channel.open = True
    out = writer.queue([b"1"])
    assert writer.write_nowait(out)
    channel.open = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer.write_through, writer.queue([b"2"]))
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0) as waited:
            assert await writer.write_through(out) is None
        assert not waited.cancelled_caught
        channel.gate.set()
    assert channel.sent == [b"1", b"2"]


async def test_parked_writers_return_when_the_writer_fails() -> None:
    channel = _GatedChannel()
    writer = Writer(channel, write_timeout=None)
    results: list[SessionClosed | None] = []

    async def write(message: bytes) -> None:
        results.append(await writer.write_through(writer.queue([message])))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, b"1")
        await trio.testing.wait_all_tasks_blocked()
        for n in range(2, 5):
            nursery.start_soon(write, b"%d" % n)
        await trio.testing.wait_all_tasks_blocked()
        writer.abort()  # the session is closing: the write in progress is cancelled
    assert channel.sent == []
    assert results[0] is not None and "closed" in results[0].reason
    assert results[1:] == [None, None, None]  # their messages were dropped, not sent
    assert channel.waited_sends == 1


async def test_a_memory_peer_that_stopped_reading_fails_the_write() -> None:
    to_peer, peer_inbox = trio.open_memory_channel[bytes](4)
    _peer_outbox, from_peer = trio.open_memory_channel[bytes](4)
    ours = MemoryChannel(to_peer, from_peer)
    async with open_session(ours, "client", connection_config=client_config()) as client:
        peer_inbox.close()  # the peer stops reading, and has not said goodbye
        with pytest.raises(SessionClosed, match="BrokenResourceError") as info:
            await client.start()
        assert isinstance(info.value.__cause__, trio.BrokenResourceError)


async def test_a_cap_cuts_a_shielded_write_in_progress_short(
    autojump_clock: trio.testing.MockClock,
) -> None:
    channel = _GatedChannel()  # not atomic: each write is shielded, timed by write_timeout
    writer = Writer(channel, write_timeout=30)
    mark = writer.queue([b"1"])
    failures: list[SessionClosed | None] = []

    async def write() -> None:
        failures.append(await writer.write_through(mark))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.testing.wait_all_tasks_blocked()
        writer.cap(trio.current_time() + 1)  # the gate never opens
    assert trio.current_time() == pytest.approx(1)
    (failure,) = failures
    assert failure is not None and "timed out" in failure.reason


def _roots_asking_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        try:
            roots = await ctx.send_request("roots/list")
        except LocalProtocolError as exc:
            return {"content": [{"type": "text", "text": f"refused: {exc}"}]}
        return {"content": [{"type": "text", "text": roots["roots"][0]["uri"]}]}

    return handlers


async def _served_before_initialized(peer: ManualPeer) -> tuple[list[bytes], RequestId]:
    """Handshake up to the initialize result, then a tools/call ahead of the held-back
    notifications/initialized (over HTTP the two POSTs may race)."""
    peer.conn.start(now=0.0)
    await peer.flush()
    peer.conn.receive_message(await peer.channel.receive(), now=0.0)  # the initialize result
    held = peer.conn.data_to_send()  # notifications/initialized
    rid = peer.conn.send_request("tools/call", {"name": "x"}, now=0.0)
    await peer.flush()
    return held, rid


async def test_a_request_served_before_initialized_asks_once_it_comes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "client", client_config())
    handlers = _roots_asking_handlers()
    async with open_session(
        ours, "server", handlers=handlers, connection_config=server_config()
    ) as server:
        held, rid = await _served_before_initialized(peer)
        with trio.move_on_after(5) as waited:
            await peer.channel.receive()  # nothing may be asked yet
        assert waited.cancelled_caught
        assert server.statistics().running_handlers == 1
        for message in held:
            await peer.channel.send(message)
        (ask,) = await peer.next_events()
        assert isinstance(ask, RequestReceived) and ask.method == "roots/list"
        peer.conn.send_result(ask.request_id, {"roots": [{"uri": "file:///work"}]})
        await peer.flush()
        (answer,) = await peer.next_events()
        assert isinstance(answer, ResultReceived) and answer.request_id == rid
        assert answer.result["content"][0]["text"] == "file:///work"


async def test_a_request_served_before_initialized_waits_for_it_a_bounded_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = memory_channel_pair()
    peer = ManualPeer(theirs, "client", client_config())
    config = SessionConfig(handshake_timeout=7)
    async with open_session(
        ours,
        "server",
        handlers=_roots_asking_handlers(),
        config=config,
        connection_config=server_config(),
    ):
        _, rid = await _served_before_initialized(peer)
        start = trio.current_time()
        (answer,) = await peer.next_events()
        assert trio.current_time() - start == pytest.approx(7)
        assert isinstance(answer, ResultReceived) and answer.request_id == rid
        assert answer.result["content"][0]["text"].startswith("refused: ")

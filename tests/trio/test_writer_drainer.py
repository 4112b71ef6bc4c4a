"""Detached request writes go through one long-lived task of the session's, the drainer.

A request's write that must wait is detached so that its caller can leave mid-write
(``tests/trio/test_writer_detach.py``). On a WebSocket every write must wait (there is
no ``send_nowait``), and a task started per request write cost about 1,100 bytecodes
per call (``python -m benchmarks ws --bytecodes ws.calls.1``). The session now starts
one drainer at the first such write and hands it the writer role each time after
(``_writer``: "Detached writes"); it writes the outbox in order, others' messages too,
and the callers wait for their answers only.

The peer is the far end of a memory stream pair (every write goes through the slow
path: a byte stream other than a pipe has no ``send_nowait``), or of a lockstep stream
(``send_all`` returns only once the peer has read it all), on the ``autojump_clock``.
"""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_trio import RequestTimeout, SessionClosed, SessionConfig, StreamChannel, open_session

from .helpers import RawPeer, config_for, handshaken, legacy_handshake

BIG = "y" * 100_000


class _Spawns(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def _answer(peer: RawPeer, count: int) -> list[dict[str, Any]]:
    """Answer ``count`` requests of the session's, in the order they come."""
    requests = []
    for _ in range(count):
        request = await peer.receive()
        requests.append(request)
        await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"n": len(requests)}})
    return requests


async def test_request_writes_that_wait_start_no_task_each(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.memory_stream_pair()
    peer = RawPeer(None, theirs)
    spawns = _Spawns()
    with trio.fail_after(60):
        async with (
            handshaken(StreamChannel.from_stream(ours), peer, "client") as session,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(_answer, peer, 20)
            await trio.testing.wait_all_tasks_blocked()
            trio.lowlevel.add_instrument(spawns)
            try:
                for n in range(1, 21):
                    assert await session.request("ping") == {"n": n}
            finally:
                trio.lowlevel.remove_instrument(spawns)
    # One drainer for the session (started at the first write that waited, the
    # handshake's, or now), none per request: it was one task per request write.
    assert len([name for name in spawns.names if name != "mcp drainer"]) == 0
    assert spawns.names.count("mcp drainer") <= 1


async def test_callers_queued_behind_a_stuck_write_leave_on_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    peer = RawPeer(None, theirs)
    config = SessionConfig(write_timeout=30.0)
    with trio.fail_after(90):
        async with handshaken(
            StreamChannel.from_stream(ours), peer, "client", config=config
        ) as session:
            took: dict[str, float] = {}

            async def call(name: str, arguments: dict[str, Any]) -> None:
                start = trio.current_time()
                with pytest.raises(RequestTimeout):
                    await session.request(
                        "tools/call", {"name": name, "arguments": arguments}, timeout=1.0
                    )
                took[name] = trio.current_time() - start

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, "big", {"a": BIG})
                await trio.testing.wait_all_tasks_blocked()
                for name in ("small1", "small2"):  # queued behind the stuck request
                    nursery.start_soon(call, name, {})
                buffer = bytearray(await theirs.receive_some(1000))  # then stop reading
            assert took == {name: pytest.approx(1.0, abs=0.01) for name in took}
            assert len(took) == 3
            # The request started goes out whole, then its cancellation; the two none
            # of which was written are never sent, and need no cancellation.
            while buffer.count(b"\n") < 2:
                buffer += await theirs.receive_some()
            lines = [loads(line) for line in bytes(buffer).split(b"\n") if line]
            assert [m.get("method") for m in lines] == ["tools/call", "notifications/cancelled"]
            assert lines[0]["params"]["name"] == "big"
            assert lines[1]["params"]["requestId"] == lines[0]["id"]
            with trio.move_on_after(5):
                more = await theirs.receive_some()
                pytest.fail(f"more was written: {more!r}")
            assert session.close_reason is None


async def test_messages_leave_in_order_while_the_drainer_writes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    peer = RawPeer(None, theirs)
    with trio.fail_after(60):
        async with handshaken(StreamChannel.from_stream(ours), peer, "client") as session:
            results: list[dict[str, Any]] = []

            async def call(n: int) -> None:
                results.append(
                    await session.request("tools/call", {"name": "t", "arguments": {"n": n}})
                )

            async def notify() -> None:
                await session.notify("notifications/roots/list_changed")

            async with trio.open_nursery() as nursery:
                for n in range(30):
                    nursery.start_soon(call, n)
                    if n % 3 == 0:
                        nursery.start_soon(notify)
                received: list[dict[str, Any]] = []
                while len(received) < 40:
                    received.append(await peer.receive())
                requests = [m for m in received if "id" in m]
                # Whole messages, the requests in the order the core made them (ids).
                assert len(requests) == 30
                assert [m["id"] for m in requests] == sorted(m["id"] for m in requests)
                for request in requests:
                    await peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {}})
            assert len(results) == 30


async def test_a_close_fails_the_callers_whose_requests_the_drainer_holds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    peer = RawPeer(None, theirs)
    write_timeout = 30.0
    config = SessionConfig(write_timeout=write_timeout)
    with trio.fail_after(90):
        async with handshaken(
            StreamChannel.from_stream(ours), peer, "client", config=config
        ) as session:
            failed: list[BaseException] = []

            async def call(arguments: dict[str, Any]) -> None:
                try:
                    await session.request("tools/call", {"name": "t", "arguments": arguments})
                except SessionClosed as exc:
                    failed.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, {"a": BIG})
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(call, {})
                nursery.start_soon(call, {})
                await theirs.receive_some(1000)  # then stop reading
                await trio.testing.wait_all_tasks_blocked()
                start = trio.current_time()
                await session.aclose()
            assert len(failed) == 3
            assert trio.current_time() - start < write_timeout


_CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("_CALLER")


async def test_the_drainer_runs_in_the_session_s_context_not_the_first_caller_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The drainer is started by the first caller whose write waits, but lives for the
    whole session and writes everyone's messages: it runs in the reader's contextvars
    context, so nothing that caller set (a request id in a log context, say) shows in
    the channel's writes of others."""
    ours, theirs = trio.testing.memory_stream_pair()
    peer = RawPeer(None, theirs)
    seen: list[str] = []
    pump = ours.send_stream.send_all_hook

    async def record() -> None:  # (runs in the writing task, after each write)
        if trio.lowlevel.current_task().name == "mcp drainer":
            seen.append(_CALLER.get("unset"))
        if pump is not None:
            await pump()

    ours.send_stream.send_all_hook = record
    with trio.fail_after(60):
        async with (
            open_session(
                StreamChannel.from_stream(ours), "client", connection_config=config_for("client")
            ) as session,
            trio.open_nursery() as nursery,
        ):
            _CALLER.set("the first caller")  # (after the session's tasks began)
            await legacy_handshake(session, peer)  # (its initialize waits: the drainer)
            nursery.start_soon(_answer, peer, 3)
            for _ in range(3):
                await session.request("ping")
    assert seen
    assert set(seen) == {"unset"}


async def test_a_message_out_is_told_so_while_a_later_one_is_stuck(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The drainer wakes the callers whose messages are out before each write that
    waits, not only once the outbox is empty: a notification written between two
    large requests returns while the second is stuck (a peer that reads no more),
    where it waited for that write (up to ``write_timeout``, the session's end)."""
    ours, theirs = trio.testing.lockstep_stream_pair()
    peer = RawPeer(None, theirs)
    config = SessionConfig(write_timeout=30.0)
    with trio.fail_after(90):
        async with handshaken(
            StreamChannel.from_stream(ours), peer, "client", config=config
        ) as session:
            notified = trio.Event()

            async def call() -> None:
                await session.request("tools/call", {"name": "t", "arguments": {"a": BIG}})

            async def notify() -> None:
                await session.notify("notifications/roots/list_changed")
                notified.set()

            async with trio.open_nursery() as nursery:
                for start in (call, notify, call):  # the first one's write is stuck
                    nursery.start_soon(start)
                    await trio.testing.wait_all_tasks_blocked()
                buffer = bytearray()
                while buffer.count(b"\n") < 2:  # the first request, the notification
                    buffer += await theirs.receive_some()
                began = trio.current_time()
                await notified.wait()  # (the second request is not read: stuck)
                assert trio.current_time() - began < 1
                assert session.close_reason is None
                lines = [loads(line) for line in bytes(buffer).split(b"\n") if line]
                assert [m.get("method") for m in lines] == [
                    "tools/call",
                    "notifications/roots/list_changed",
                ]
                nursery.cancel_scope.cancel()

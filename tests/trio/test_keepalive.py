"""Keep-alive pings (``SessionConfig.ping_interval`` / ``ping_timeout``; legacy
``basic/utilities/ping``): sent only after a whole interval of silence from the peer, one
at a time, never in the modern era; an unanswered one ends the session."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import LATEST_LEGACY_VERSION, Role
from mcp_trio import (
    Handlers,
    MemoryChannel,
    MessageChannel,
    RequestTimeout,
    Session,
    SessionClosed,
    SessionConfig,
    memory_channel_pair,
    open_session,
)
from mcp_trio._channel import SessionLost

from .helpers import RawPeer, client_config, handshaken, raw_pair, server_config

_EVERY_5S = SessionConfig(ping_interval=5, ping_timeout=2)


@asynccontextmanager
async def _started(
    transport: str, role: Role, config: SessionConfig | None = _EVERY_5S, **kwargs: Any
) -> AsyncIterator[tuple[Session, RawPeer]]:
    """A session of ``role`` over ``transport`` (see ``raw_pair``), pinging every 5 s
    unless told, its legacy handshake done with the peer it yields with it.
    ``"forgetful"``: a memory channel on which the peer can say it forgot the session."""
    if transport == "forgetful":  # (a memory channel whose peer can say it forgot us)
        ours, theirs = memory_channel_pair()
        channel: MessageChannel = _Forgetful(ours)
        peer = RawPeer(theirs, None)
    else:
        channel, peer = raw_pair(transport)
    async with handshaken(channel, peer, role, config=config, **kwargs) as s:
        yield s, peer


def _pong(ping: dict[str, Any]) -> dict[str, Any]:
    assert ping["method"] == "ping"
    assert "params" not in ping
    return {"jsonrpc": "2.0", "id": ping["id"], "result": {}}


@pytest.mark.parametrize("role", ["client", "server"])
@pytest.mark.parametrize("transport", ["memory", "stream"])
async def test_an_idle_peer_is_pinged_each_interval(
    autojump_clock: trio.testing.MockClock, role: Role, transport: str
) -> None:
    # Mutation: no keep-alive task started (_session._io) -> no ping comes (fail_after).
    async with _started(transport, role) as (s, peer):
        heard = peer.sent_at[-1]
        with trio.fail_after(100):
            for _ in range(3):
                ping = await peer.receive()
                assert trio.current_time() == pytest.approx(heard + 5)
                await peer.send(_pong(ping))
                heard = trio.current_time()
        assert not s.closed


@pytest.mark.parametrize("transport", ["memory", "stream"])
async def test_no_ping_while_the_peer_talks(
    autojump_clock: trio.testing.MockClock, transport: str
) -> None:
    # Mutation: the reader does not note what it receives (_heard_at stores in
    # _read_loop, for the byte stream, or _take, for the memory channel) -> a ping
    # goes out 5 s after the handshake, in the middle of the traffic.
    async with _started(transport, "server") as (_, peer):
        with trio.move_on_after(40):
            async with trio.open_nursery() as nursery:

                async def talk() -> None:
                    while True:
                        await trio.sleep(4)
                        note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
                        await peer.send(note)

                nursery.start_soon(talk)
                message = await peer.receive()
                pytest.fail(f"sent while the peer talked: {message!r}")
        # Silent from now: the ping comes an interval after the last message.
        last = peer.sent_at[-1]
        with trio.fail_after(100):
            ping = await peer.receive()
        assert ping["method"] == "ping"
        assert trio.current_time() == pytest.approx(last + 5)


async def test_the_peers_own_pings_count_as_traffic(autojump_clock: trio.testing.MockClock) -> None:
    # The peer pings us every 3 s: we answer each (the core does) and, hearing from it,
    # send no ping of our own. Mutation: _heard_at not stored -> we ping it as well.
    async with _started("memory", "server") as (s, peer):
        with trio.fail_after(100):
            for rid in range(100, 110):
                await trio.sleep(3)
                await peer.send({"jsonrpc": "2.0", "id": rid, "method": "ping"})
                assert await peer.receive() == {"jsonrpc": "2.0", "id": rid, "result": {}}
        assert not s.closed


async def test_an_unanswered_ping_ends_the_session(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Mutation: keep_alive returns on RequestTimeout without _begin_close -> the session
    # stays open and the caller's request never fails (fail_after).
    async with _started("memory", "client", SessionConfig(ping_interval=5, ping_timeout=20)) as (
        s,
        peer,
    ):
        failure: list[BaseException] = []
        received: list[dict[str, Any]] = []

        async def caller() -> None:
            with pytest.raises(SessionClosed) as info:
                await s.request("tools/list", timeout=1000)
            failure.append(info.value)

        async def drain() -> None:
            with pytest.raises(trio.EndOfChannel):
                while True:
                    received.append(await peer.receive())

        with caplog.at_level(logging.WARNING, logger="mcp_trio"), trio.fail_after(200):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                nursery.start_soon(caller)
                await s.wait_closed()
                closed_at = trio.current_time()
        methods = [m.get("method") for m in received]
        # The caller's request (its sending counts as nothing heard), one ping (never two
        # out at once, although ping_timeout is four intervals), its cancellation.
        assert methods == ["tools/list", "ping", "notifications/cancelled"]
        assert closed_at == pytest.approx(peer.sent_at[-1] + 5 + 20)
        (exc,) = failure
        assert "did not answer a ping within 20 s" in str(exc)
        assert isinstance(exc.__cause__, RequestTimeout)
        assert exc.__cause__.method == "ping"
        assert s.close_reason is not None
        assert "ping" in s.close_reason.reason
        assert any("did not answer a ping within 20 s" in r.getMessage() for r in caplog.records)


async def test_an_error_answer_is_an_answer(autojump_clock: trio.testing.MockClock) -> None:
    # Mutation: an McpError from the ping closes the session as a timeout does.
    async with _started("memory", "client") as (s, peer):
        with trio.fail_after(100):
            for _ in range(3):
                ping = await peer.receive()
                assert ping["method"] == "ping"
                error = {"code": -32601, "message": "Method not found"}
                await peer.send({"jsonrpc": "2.0", "id": ping["id"], "error": error})
            await trio.sleep(4)  # (past the last ping's timeout; the next is not due)
        assert not s.closed


async def _silent_for(peer: RawPeer, seconds: float) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    with trio.move_on_after(seconds):
        while True:
            received.append(await peer.receive())
    return received


@pytest.mark.parametrize("role", ["client", "server"])
async def test_no_ping_interval_sends_nothing(
    autojump_clock: trio.testing.MockClock, role: Role
) -> None:
    # Mutation: the keep-alive starts with a default interval when ping_interval is None.
    assert SessionConfig().ping_interval is None
    async with _started("memory", role, None) as (s, peer):
        assert await _silent_for(peer, 1000) == []
        assert not s.closed


async def test_a_modern_session_never_pings(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Mutation: keep_alive does not check the era -> it tries to ping a modern server,
    # which (2026-07-28) has no ping: the core refuses (logged at DEBUG), nothing goes out.
    channel, peer = raw_pair("memory")
    config = SessionConfig(ping_interval=5, ping_timeout=2)
    connection_config = client_config(era="modern")
    async with open_session(
        channel, "client", config=config, connection_config=connection_config
    ) as s:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.start)
            discover = await peer.receive()
            assert discover["method"] == "server/discover"
            result = {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "raw", "version": "1"}},
            }
            await peer.send({"jsonrpc": "2.0", "id": discover["id"], "result": result})
        assert s.handshake is not None
        assert s.handshake.era == "modern"
        with caplog.at_level(logging.DEBUG, logger="mcp_trio"):
            assert await _silent_for(peer, 1000) == []
        assert not s.closed
    assert not [r for r in caplog.records if "ping" in r.getMessage()]


async def test_a_modern_server_session_never_pings(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # A server that serves modern requests has no handshake: the keep-alive never tries
    # a ping. Mutation: keep_alive does not wait for a legacy handshake -> it tries (the
    # core refuses, logged at DEBUG).
    channel, peer = raw_pair("memory")
    config = SessionConfig(ping_interval=5, ping_timeout=2)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    with caplog.at_level(logging.DEBUG, logger="mcp_trio"):
        async with open_session(
            channel, "server", config=config, connection_config=server_config()
        ) as s:
            await peer.send(discover)
            assert "supportedVersions" in (await peer.receive())["result"]
            assert await _silent_for(peer, 1000) == []
            assert not s.closed
    assert not [r for r in caplog.records if "ping" in r.getMessage()]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ping_interval": 0},
        {"ping_interval": -1.0},
        {"ping_interval": float("nan")},
        {"ping_timeout": 0},
        {"ping_timeout": -5},
    ],
)
def test_config_validation(kwargs: dict[str, Any]) -> None:
    # Mutation: no validator on the two fields.
    (name,) = kwargs
    with pytest.raises(ValueError, match=name):
        SessionConfig(**kwargs)


def test_config_defaults() -> None:
    config = SessionConfig(ping_interval=0.5)
    assert config.ping_interval == 0.5
    assert config.ping_timeout == 10.0


async def test_no_ping_while_our_requests_fill_the_table(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The core would take only one more request (max_pending_requests), which is the user's:
    # the keep-alive sends no ping and tries again
    # an interval later instead of failing the session. Mutation: LocalProtocolError
    # not caught in keep_alive -> the session fails (internal error).
    connection_config = client_config(max_pending_requests=2)
    with caplog.at_level(logging.DEBUG, logger="mcp_trio"):
        async with _started("memory", "client", connection_config=connection_config) as (s, peer):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(s.request, "tools/list")
                request = await peer.receive()
                assert request["method"] == "tools/list"
                assert await _silent_for(peer, 12) == []  # (pings refused at 5 and 10)
                assert not s.closed
                result = {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}
                await peer.send(result)
            answered = trio.current_time()
            with trio.fail_after(100):
                ping = await peer.receive()
            assert ping["method"] == "ping"
            assert trio.current_time() == pytest.approx(answered + 5)
    assert any("no ping sent" in r.getMessage() for r in caplog.records)


class _Forgetful(MessageChannel):
    """A memory channel on which the peer can say it forgot the session (an HTTP 404):
    the message ``LOST`` makes ``receive`` raise ``SessionLost``."""

    def __init__(self, inner: MemoryChannel) -> None:
        self._inner = inner

    async def send(self, message: bytes) -> None:
        await self._inner.send(message)

    async def receive(self) -> bytes:
        message = await self._inner.receive()
        if message == b"LOST":
            raise SessionLost(restart=True, resend=())
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_no_ping_while_a_forgotten_session_is_started_anew(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Mutation: keep_alive does not wait for the new session -> its ping is held by the
    # core with the new session's requests, times out, and closes the session.
    config = SessionConfig(ping_interval=5, ping_timeout=2, handshake_timeout=100)
    async with _started("forgetful", "client", config) as (s, peer):
        await peer.send_bytes(b"LOST")
        init = await peer.receive()
        assert init["method"] == "initialize"
        assert await _silent_for(peer, 30) == []  # no ping while it is not answered
        assert not s.closed
        result = {
            "protocolVersion": LATEST_LEGACY_VERSION,
            "capabilities": {},
            "serverInfo": {"name": "raw", "version": "1"},
        }
        await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result})
        answered = trio.current_time()
        assert (await peer.receive())["method"] == "notifications/initialized"
        with trio.fail_after(100):
            ping = await peer.receive()
        assert ping["method"] == "ping"
        assert trio.current_time() == pytest.approx(answered + 5)


async def test_the_new_session_is_logged_with_the_servers_info_escaped_and_clipped(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # serverInfo is the server's text: it reaches the log on one line, clipped.
    config = SessionConfig(ping_interval=None, handshake_timeout=100)
    async with _started("forgetful", "client", config) as (_s, peer):
        await peer.send_bytes(b"LOST")
        init = await peer.receive()
        info = {"name": "raw\nCRITICAL forged\x1b[31m", "version": "9" * 100_000}
        result = {"protocolVersion": LATEST_LEGACY_VERSION, "capabilities": {}, "serverInfo": info}
        await peer.send({"jsonrpc": "2.0", "id": init["id"], "result": result})
        assert (await peer.receive())["method"] == "notifications/initialized"
        await trio.testing.wait_all_tasks_blocked()
    (logged,) = [r.getMessage() for r in caplog.records if "forgot the session" in r.getMessage()]
    assert "server raw\\nCRITICAL forged\\x1b[31m 999" in logged
    assert "\n" not in logged and len(logged) < 1_000


async def test_a_late_answer_from_a_peer_that_talks_is_no_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The peer talks every second after the ping (its answer queued behind, a slow
    # link) and answers past ping_timeout: it is alive. Mutation: the timeout not
    # checked against _heard_at -> the session closes at 3 s.
    async with _started("memory", "client", SessionConfig(ping_interval=5, ping_timeout=3)) as (
        s,
        peer,
    ):
        ping = await peer.receive()
        for i in range(4):
            await trio.sleep(1)
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": i},
            }
            await peer.send(note)
        assert not s.closed, s.close_reason
        await peer.send(_pong(ping))
        await trio.sleep(1)
        assert not s.closed


async def test_a_ping_out_while_a_forgotten_session_restarts_is_no_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The ping is out when the peer says it forgot the session; the new handshake takes
    # longer than ping_timeout (handshake_timeout bounds it). Mutation: the restart not
    # checked on timeout -> the session closes at 10 s.
    config = SessionConfig(ping_interval=5, ping_timeout=10, handshake_timeout=100)
    async with _started("forgetful", "client", config) as (s, peer):
        assert (await peer.receive())["method"] == "ping"
        await peer.send_bytes(b"LOST")
        assert (await peer.receive())["method"] == "initialize"
        await trio.sleep(15)
        assert not s.closed, s.close_reason


async def test_the_close_reason_names_the_limit_that_ended_the_ping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # ping_timeout=20, but the core ends every request at max_request_time=3.
    # Mutation: ping_timeout named -> "20 s".
    config = SessionConfig(ping_interval=5, ping_timeout=20)
    connection_config = client_config(max_request_time=3)
    async with _started("memory", "client", config, connection_config=connection_config) as (
        s,
        peer,
    ):
        assert (await peer.receive())["method"] == "ping"
        sent = trio.current_time()
        await s.wait_closed()
        assert trio.current_time() - sent == pytest.approx(3)
        assert "within 3 s (ConnectionConfig.max_request_time)" in str(s.close_reason)


async def test_the_ping_is_not_in_the_statistics(autojump_clock: trio.testing.MockClock) -> None:
    # Mutation: the ping not left out -> waiting_requests == 1 with no caller waiting.
    async with _started("memory", "client") as (s, peer):
        assert (await peer.receive())["method"] == "ping"
        assert s.statistics().waiting_requests == 0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.request, "tools/list")
            assert (await peer.receive())["method"] == "tools/list"
            assert s.statistics().waiting_requests == 1
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("end", ["answered", "closed"])
async def test_the_statistics_never_count_below_zero_once_the_ping_is_over(
    autojump_clock: trio.testing.MockClock, end: str
) -> None:
    # The ping's waiter goes (answered in passing by the peer's send, or failed by a
    # close) before the keep-alive task hears of it. Mutation: a flag set while the
    # ping is out subtracted instead of whether its waiter is there -> -1.
    async with _started("memory", "server") as (s, peer):
        ping = await peer.receive()
        assert ping["method"] == "ping"
        assert s.statistics().waiting_requests == 0
        if end == "answered":
            await peer.send(_pong(ping))  # (taken in passing: the waiter goes now)
        else:
            s._begin_close(SessionClosed("closed locally"), graceful=True)
        assert s.statistics().waiting_requests == 0


async def test_the_ping_leaves_the_last_table_slot_to_the_user(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # max_pending_requests=2 and one request of the user's out: no ping takes the
    # last place, the user's next request goes out; retried an interval later.
    # Mutation: no table check -> the ping takes it and the request is refused.
    async with (
        _started("memory", "client", connection_config=client_config(max_pending_requests=2)) as (
            s,
            peer,
        ),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(s.request, "tools/list")
        first = await peer.receive()
        assert first["method"] == "tools/list"
        await trio.sleep(12)  # two intervals of silence
        nursery.start_soon(s.request, "tools/list")
        assert (await peer.receive())["method"] == "tools/list"
        nursery.cancel_scope.cancel()


async def test_the_retry_after_a_skipped_ping_is_one_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The table is too full at 5 s (no ping); it frees at 7 s: the ping goes at 10 s,
    # one interval after the skipped one. Mutation: the retry sleep changed -> not 10.
    async with _started(
        "memory", "client", connection_config=client_config(max_pending_requests=2)
    ) as (s, peer):
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.request, "tools/list")
            await peer.receive()
            await trio.sleep(7)
            nursery.cancel_scope.cancel()  # (a notifications/cancelled goes out)
        assert (await peer.receive())["method"] == "notifications/cancelled"
        assert (await peer.receive())["method"] == "ping"
        assert trio.current_time() - start == pytest.approx(10)


async def test_a_failed_ping_cancels_the_running_handlers_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A connection failure: no shutdown_grace_period for the peer's requests in flight.
    # Mutation: _begin_close(graceful=True) -> the handler runs the whole grace period.
    config = SessionConfig(ping_interval=5, ping_timeout=2, shutdown_grace_period=100)
    cancelled_at: list[float] = []

    async def slow(ctx: Any) -> dict[str, Any]:
        try:
            await trio.sleep_forever()
        finally:
            cancelled_at.append(trio.current_time())
        raise AssertionError("unreachable")

    session_handlers = Handlers()
    session_handlers.set_request_handler("roots/list", slow)
    async with _started("memory", "client", config, handlers=session_handlers) as (s, peer):
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
        assert (await peer.receive())["method"] == "ping"
        sent = trio.current_time()
        await s.wait_closed()
    assert cancelled_at == [pytest.approx(sent + 2)]

"""A modern ``subscriptions/listen`` over Streamable HTTP with OAuth: the bound on its
acknowledgment (``SessionConfig.listen_ack_timeout``) does not count the time the
client spends obtaining a token for it (a refresh, or an authorization that waits for
the user); it counts from when the request goes out with one.

The protected server is our own, its tokens issued by the fake authorization server of
``test_oauth_e2e``; a slow user (``on_authorize``) or a slow refresh takes virtual time
(the ``autojump_clock``)."""

from __future__ import annotations

import socket
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from mcp_trio import (
    BearerAuth,
    HttpServerConfig,
    HttpTransportConfig,
    Principal,
    ProtectedResourceMetadata,
    RequestTimeout,
    Server,
    SessionConfig,
    fetch_authorization_redirect,
    open_client,
)

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT
from .test_listen_expiry import FakeListens, ack_forever, ack_until_expired
from .test_oauth_e2e import FakeAS

USER = 60.0
"""Seconds the slow user (or authorization server) takes: twice listen_ack_timeout."""


@attrs.define
class Protected:
    """Our server behind OAuth: requests without a token pass while ``open`` (the
    handshake), and with ``ignore_listens`` a listen with a good token is never
    answered (no acknowledgment, ever)."""

    asrv: FakeAS
    url: str = ""
    open: bool = True
    ignore_listens: bool = False
    listens: list[float] = attrs.field(factory=list)  # when each authorized listen came


async def protect(nursery: trio.Nursery, **knobs: Any) -> Protected:
    asrv = FakeAS(**knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, asrv.serve, 0, host="127.0.0.1"))
    asrv.issuer = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    setup = Protected(asrv=asrv)

    async def verify(token: str) -> Principal | None:
        got = asrv.tokens.get(token)
        if got is None or got[1] != setup.url or asrv.clock() > got[2]:
            return None
        return Principal(subject="alice", scopes=got[0])

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    setup.url = f"http://127.0.0.1:{port}/mcp"
    prm = ProtectedResourceMetadata(
        resource=setup.url, authorization_servers=[asrv.issuer], scopes_supported=["mcp"]
    )
    bearer = BearerAuth(verify_token=verify, resource_metadata_url=prm.url)

    async def authenticate(request: Any) -> Any:
        if setup.open and not request.header("authorization"):
            return Principal(subject="alice")
        principal = await bearer(request)
        if isinstance(principal, Principal) and request.header("mcp-method") == (
            "subscriptions/listen"
        ):
            setup.listens.append(trio.current_time())
            if setup.ignore_listens:
                await trio.sleep_forever()
        return principal

    server = Server("protected")

    @server.tool()
    async def noop() -> str:
        return "ok"

    await nursery.start(
        partial(
            server.serve_http,
            port=port,
            http_config=HttpServerConfig(resource_metadata=prm),
            authenticate=authenticate,
            # (An ignored listen hangs in the hook: no answer, no acknowledgment.)
            transport=HttpTransportConfig(authenticate_timeout=100 * USER),
        )
    )
    return setup


async def slow_user(url: str) -> str:
    await trio.sleep(USER)  # (virtual time)
    return await fetch_authorization_redirect(url)


# ------------------------------------------------------------------ over HTTP, with OAuth


async def test_a_listen_waits_out_a_slow_authorization_and_opens(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await protect(nursery)
    config = SessionConfig(listen_ack_timeout=30)
    with trio.fail_after(IO_TIMEOUT + 10 * USER):
        async with open_client(
            s.url, era="modern", auth=oauth(on_authorize=slow_user), config=config
        ) as client:
            s.open = False  # the listen is refused (401): the user must authorize
            started = trio.current_time()
            async with client.subscribe(tools=True) as sub:
                assert trio.current_time() - started == pytest.approx(USER, abs=1)
                assert sub.subscription_id is not None and not sub.ended
    assert len(s.asrv.authorizations) == 1 and len(s.listens) == 1


async def test_a_listen_never_acknowledged_times_out_counted_from_the_token(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await protect(nursery)
    s.ignore_listens = True
    config = SessionConfig(listen_ack_timeout=30)
    with trio.fail_after(IO_TIMEOUT + 10 * USER):
        async with open_client(
            s.url, era="modern", auth=oauth(on_authorize=slow_user), config=config
        ) as client:
            s.open = False
            started = trio.current_time()
            with pytest.raises(RequestTimeout, match=r"never acknowledged it \(waited 30 s\)"):
                async with client.subscribe(tools=True):
                    pytest.fail("entered, unacknowledged")  # pragma: no cover
            [sent] = s.listens  # the listen with the token: the bound counts from it
            assert sent - started == pytest.approx(USER, abs=1)
            assert trio.current_time() - sent == pytest.approx(30, abs=1)


async def test_a_listen_waits_out_a_slow_refresh_and_opens(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    gate = trio.Event()
    knobs = {"scopes_supported": ["mcp", "offline_access"], "refresh_tokens": True}
    s = await protect(nursery, refresh_gate=gate, expires_in=100, **knobs)
    s.open = False
    config = SessionConfig(listen_ack_timeout=30)
    auth = oauth(clock=s.asrv.clock, timeout=10 * USER)  # (a slow refresh, not a failed one)
    with trio.fail_after(IO_TIMEOUT + 10 * USER):
        async with open_client(s.url, era="modern", auth=auth, config=config) as client:
            await client.list_tools()  # (authorized: a token with a refresh token)
            s.asrv.clock.advance(200)  # expired: the listen's token is refreshed first
            started = trio.current_time()
            async with trio.open_nursery() as slow:
                slow.start_soon(_open_gate_after, s.asrv.refresh_asked, gate, USER)
                async with client.subscribe(tools=True) as sub:
                    assert trio.current_time() - started == pytest.approx(USER, abs=1)
                    assert sub.subscription_id is not None and not sub.ended
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(s.asrv.authorizations) == 1


async def _open_gate_after(asked: trio.Event, gate: trio.Event, seconds: float) -> None:
    await asked.wait()
    await trio.sleep(seconds)
    gate.set()


# ------------------------------------------------------------------ the clock, in detail


async def hold(session: FakeListens, sid: int, seconds: float = USER) -> None:
    """The transport holds listen ``sid`` back ``seconds`` for a token."""
    session.on_held[sid](sid, True)
    await trio.sleep(seconds)
    session.on_held[sid](sid, False)


async def held_then_acked(session: FakeListens, sid: int) -> Any:
    await hold(session, sid)
    await trio.sleep(29)  # (within the bound, counted afresh)
    return await ack_forever(session, sid)


async def held_then_ignored(session: FakeListens, sid: int) -> Any:
    await hold(session, sid)
    await trio.sleep_forever()


async def test_an_opening_held_for_a_token_counts_the_bound_from_its_end(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(held_then_acked, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000):
        async with session.open(nursery) as sub:
            assert trio.current_time() - started == pytest.approx(USER + 29)
            assert sub.subscription_id == 1


async def test_an_opening_held_then_ignored_times_out_the_bound_after_the_hold(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def twice_held(session: FakeListens, sid: int) -> Any:
        await trio.sleep(10)  # (counts: the request is on its way)
        await hold(session, sid)
        await trio.sleep(10)
        await hold(session, sid)  # a refused token: held again (the clock stops again)
        await trio.sleep_forever()

    session = FakeListens(twice_held, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout, match="waited 30 s"):
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(10 + USER + 10 + USER + 30)
    await trio.testing.wait_all_tasks_blocked()
    assert session.cancelled == [1] and session.claiming() == []


async def test_a_hold_reported_for_another_request_id_stops_no_clock(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def others_held(session: FakeListens, sid: int) -> Any:
        session.on_held[sid](sid + 1000, True)  # (another request id: an earlier round's)
        await trio.sleep_forever()

    session = FakeListens(others_held, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout):
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(30)


async def test_with_no_bound_a_hold_changes_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(held_then_ignored, ack_timeout=None)
    with trio.move_on_after(10_000) as waited:
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert waited.cancelled_caught


async def test_a_new_listen_held_for_a_refresh_counts_the_bound_from_its_end(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The case that matters most: the token expired, the new listen's is refreshed
    # first, and the refresh (or a re-authorization) takes longer than the bound.
    session = FakeListens(ack_until_expired(), held_then_acked, ack_timeout=30)
    with trio.fail_after(1000):
        async with session.open(nursery) as sub:
            expired_at = trio.current_time()
            session.expire.set()
            await trio.sleep(USER + 30)
            assert sub.subscription_id == 2 and not sub.ended, sub.end_reason
    assert session.sent == 2 and session.claiming() == []
    assert expired_at < USER


async def test_a_new_listen_held_then_ignored_ends_with_the_expiry_after_the_bound(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(ack_until_expired(), held_then_ignored, ack_timeout=30)
    started = trio.current_time()
    sub, failed = await session.expire_and_fail(nursery, Exception)
    assert trio.current_time() - started == pytest.approx(USER + 30)
    assert sub.end_reason is not None and "not acknowledged again" in sub.end_reason
    assert session.sent == 2 and session.claiming() == []
    assert getattr(failed, "code", None) == 401


async def test_an_end_of_hold_never_begun_stops_no_clock(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def stray_end(session: FakeListens, sid: int) -> Any:
        await trio.sleep(10)
        session.on_held[sid](sid, False)  # (no hold began: the count stays at zero)
        await trio.sleep_forever()

    session = FakeListens(stray_end, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout):
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(10 + 30)

"""A modern ``subscribe()`` has two bounds on its acknowledgment: the caller's
``timeout``, which counts every second from ``subscribe()`` on, as any request's does
(the time the transport spends getting a token included), and
``SessionConfig.listen_ack_timeout``, whose clock stops while the transport holds the
listen back for a token. Also: the hub's bookkeeping of holds and request ids across
input-required rounds, duplicate acknowledgments, and ``Session._on_held``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from mcp_trio import McpError, RequestTimeout, SessionConfig, open_client

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config
from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT
from .test_listen_concurrency import Listens, _uri
from .test_listen_expiry import FakeListens, ack_forever, ack_until_expired
from .test_listen_holds import USER, hold, protect, slow_user

LOGIN = 200.0
"""Seconds a slow login takes: far past both bounds of the tests."""


async def held_long_then_ignored(session: FakeListens, sid: int) -> Any:
    await hold(session, sid, LOGIN)
    await trio.sleep_forever()


# ------------------------------------------------------------------ the caller's timeout


async def test_a_hold_does_not_stop_the_callers_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(held_long_then_ignored, ack_timeout=None)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout, match=r"waited 5 s") as failed:
        async with session.open(nursery, timeout=5):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(5)
    assert failed.value.request_id == 1
    await trio.testing.wait_all_tasks_blocked()
    assert session.cancelled == [1] and session.claiming() == []


async def test_a_hold_stops_listen_ack_timeout_but_not_a_longer_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # listen_ack_timeout (30 s) would end at 10 + 60 + 30 = 100 s (it stops for the
    # hold); the caller's 80 s count the hold, and end first.
    async def held_late(session: FakeListens, sid: int) -> Any:
        await trio.sleep(10)
        await hold(session, sid)
        await trio.sleep_forever()

    session = FakeListens(held_late, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout, match=r"waited 80 s"):
        async with session.open(nursery, timeout=80):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(80)


async def test_with_a_long_timeout_listen_ack_timeout_still_stops_for_a_hold(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(held_long_then_ignored, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout, match=r"waited 30 s"):
        async with session.open(nursery, timeout=500):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(LOGIN + 30)


async def test_a_listen_held_within_the_timeout_opens(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def held_then_acked(session: FakeListens, sid: int) -> Any:
        await hold(session, sid)
        return await ack_forever(session, sid)

    session = FakeListens(held_then_acked, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000):
        async with session.open(nursery, timeout=USER + 1) as sub:
            assert trio.current_time() - started == pytest.approx(USER)
            assert sub.subscription_id == 1 and not sub.ended


async def test_a_new_listen_held_counts_the_timeout_from_its_beginning(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # After an expiry the new listen's refresh takes 200 s: the caller's 20 s, counted
    # from when the new listen is begun, end it (with the expiry), hold or not.
    session = FakeListens(ack_until_expired(), held_long_then_ignored, ack_timeout=30)
    started = trio.current_time()
    sub, failed = await session.expire_and_fail(nursery, McpError, timeout=20)
    assert trio.current_time() - started == pytest.approx(20)
    assert failed.code == 401
    assert sub.end_reason is not None and "not acknowledged again" in sub.end_reason
    assert session.sent == 2 and session.claiming() == []


async def test_over_http_the_clients_timeout_counts_a_slow_login(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The user takes 60 s to log in; listen_ack_timeout would wait for them, the
    # client's timeout (10 s) does not.
    s = await protect(nursery)
    config = SessionConfig(listen_ack_timeout=30)
    with trio.fail_after(IO_TIMEOUT + 10 * USER):
        async with open_client(
            s.url, era="modern", auth=oauth(on_authorize=slow_user), config=config, timeout=10
        ) as client:
            s.open = False  # the listen is refused (401): the user must authorize
            started = trio.current_time()
            with pytest.raises(RequestTimeout, match=r"waited 10 s"):
                async with client.subscribe(tools=True):
                    pytest.fail("entered, unacknowledged")  # pragma: no cover
            assert trio.current_time() - started == pytest.approx(10, abs=1)
    assert s.listens == []  # (given up on before the token came)


# ------------------------------------------------------------------ input-required rounds


class Rounds(FakeListens):
    """Each listen request is answered by ``play(self, on_sent, on_held)``, which plays
    its input-required rounds: ``on_sent`` with each round's id, ``on_held`` as the
    transport reports holds."""

    def __init__(self, play: Any, ack_timeout: float | None = 30.0) -> None:
        super().__init__(ack_timeout=ack_timeout)
        self.play = play

    async def request(
        self, method: str, params: dict[str, Any], timeout: float, on_sent: Any, on_held: Any
    ) -> Any:
        return await self.play(self, on_sent, on_held)


async def test_a_new_rounds_holds_are_counted_afresh(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Round 1 is held and its end never reported for this opening (reported under
    # round 1's id after round 2 began, it names an earlier round: ignored). Round 2's
    # own hold, begun and ended, must let the clock run again.
    async def play(session: Rounds, on_sent: Any, on_held: Any) -> Any:
        on_sent(1)
        on_held(1, True)
        await trio.sleep(USER)
        on_sent(2)  # (an input-required round: the retry has a new id)
        on_held(1, False)
        await trio.sleep(10)
        on_held(2, True)
        await trio.sleep(USER)
        on_held(2, False)
        await trio.sleep_forever()

    session = Rounds(play, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(1000), pytest.raises(RequestTimeout, match=r"waited 30 s") as failed:
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(USER + 10 + USER + 30)
    assert failed.value.request_id == 2


async def test_an_earlier_rounds_id_claims_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    acked_1 = trio.Event()

    async def play(session: Rounds, on_sent: Any, on_held: Any) -> Any:
        on_sent(1)
        on_sent(2)  # (an input-required round)
        await session.acknowledge(1)  # an earlier round's id: not the listen
        await session.tools_changed(1)  # (nor is its notification kept for it)
        assert list(session.hub._opening) == [2]
        acked_1.set()
        await trio.sleep(5)
        return await ack_forever(session, 2)

    session = Rounds(play, ack_timeout=30)
    with trio.fail_after(1000):
        async with session.open(nursery) as sub:
            assert acked_1.is_set()
            assert sub.subscription_id == 2 and not sub.ended
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()
    assert session.hub._opening == {}


# ------------------------------------------------------------------ bookkeeping


async def test_a_duplicate_acknowledgment_changes_nothing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    listens = Listens(expected=1)
    got = []

    async def subscribe() -> None:
        async with listens.open(nursery, _uri(0)) as sub:
            got.append(sub)
            await trio.sleep_forever()

    nursery.start_soon(subscribe)
    await listens.all_out.wait()
    await listens.acknowledge(1)
    # Handled before the claimant wakes: the same listen named again, other params.
    ctx = SimpleNamespace(subscription_id=1, params={"notifications": {"again": True}})
    await listens.hub._on_acknowledged(cast(Any, ctx))
    await trio.testing.wait_all_tasks_blocked()
    [sub] = got
    assert sub.honored == {"n": 1} and sub.subscription_id == 1
    assert listens.hub._opening == {} and listens.hub._by_id == {1: sub}


async def test_on_held_entries_do_not_outlive_their_listen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_client((make_handlers(), app_config()), era="modern") as client:
        for i in range(3):
            async with client.subscribe(tools=True, resources=[_uri(i)]) as sub:
                assert list(client.session._on_held) == [sub.subscription_id]
            await trio.testing.wait_all_tasks_blocked()  # (the cancelled listen ends)
            assert client.session._on_held == {}

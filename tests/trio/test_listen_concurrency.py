"""Modern ``subscribe()`` calls open their listens concurrently: nothing serialises them
(a server that never acknowledges one holds up no other), and each acknowledgment, or
notification ahead of it, goes to the listen its id names, whatever the order."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from mcp_sansio import NotificationReceived
from mcp_trio import RequestTimeout, SessionConfig
from mcp_trio._client import open_client
from mcp_trio._client_subscriptions import _MAX_EARLY, Subscription, SubscriptionHub

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config

UPDATED = "notifications/resources/updated"
TOOLS_CHANGED = "notifications/tools/list_changed"


class Listens:
    """A session whose listen requests stay open until cancelled; each is told apart by
    the one URI its filter names (``ids``: URI -> request id). The test plays the
    server: :meth:`acknowledge`, :meth:`notify`."""

    def __init__(self, expected: int, ack_timeout: float | None = 30.0) -> None:
        self.hub = SubscriptionHub()
        self.config = SessionConfig(listen_ack_timeout=ack_timeout)
        self.connection = SimpleNamespace(pending_requests=lambda: ())
        self.expected = expected
        self.ids: dict[str, int] = {}
        self.all_out = trio.Event()
        self.cancelled: list[int] = []

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        timeout: float,
        on_sent: Any,
        on_held: Any = None,
    ) -> Any:
        assert method == "subscriptions/listen"
        [uri] = params["notifications"]["resourceSubscriptions"]
        sid = len(self.ids) + 1
        self.ids[uri] = sid
        on_sent(sid)
        if len(self.ids) == self.expected:
            self.all_out.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(sid)
            raise

    def open(self, nursery: trio.Nursery, uri: str) -> AbstractAsyncContextManager[Subscription]:
        return self.hub.open(
            cast(Any, self),
            nursery,
            modern=True,
            tools=False,
            prompts=False,
            resource_list=False,
            resources=[uri],
            timeout=None,
        )

    async def acknowledge(self, sid: int) -> None:
        ctx = SimpleNamespace(subscription_id=sid, params={"notifications": {"n": sid}})
        await self.hub._on_acknowledged(cast(Any, ctx))

    async def notify(self, sid: int, uri: str) -> None:
        ctx = SimpleNamespace(subscription_id=sid, method=UPDATED, params={"uri": uri})
        await self.hub._on_change(cast(Any, ctx))


def _uri(i: int) -> str:
    return f"file:///{i}"


def _drain(sub: Subscription) -> list[NotificationReceived]:
    out: list[NotificationReceived] = []
    while True:
        try:
            out.append(sub.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_ten_subscribes_at_once_each_get_their_own_acknowledgment(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    cancelled, never = {2, 7}, 5
    acked = [i for i in range(10) if i not in cancelled and i != never]
    session = Listens(expected=10)
    subs: dict[int, Subscription] = {}
    entered: dict[int, float] = {}
    outcomes: dict[int, str] = {}
    leave = trio.Event()

    async def subscriber(i: int) -> None:
        if i in cancelled:
            with trio.move_on_after(5) as gone:
                async with session.open(nursery, _uri(i)):
                    pytest.fail("entered, unacknowledged")  # pragma: no cover
            outcomes[i] = "cancelled" if gone.cancelled_caught else "?"
            return
        if i == never:
            with pytest.raises(RequestTimeout, match="waited 30 s"):
                async with session.open(nursery, _uri(i)):
                    pytest.fail("entered, unacknowledged")  # pragma: no cover
            outcomes[i] = f"timed out at {trio.current_time():g}"
            return
        async with session.open(nursery, _uri(i)) as sub:
            subs[i] = sub
            entered[i] = trio.current_time()
            await leave.wait()

    with trio.fail_after(1000):
        async with trio.open_nursery() as callers:
            for i in range(10):
                callers.start_soon(subscriber, i)
            # Every listen is out before any is acknowledged: none waits for another.
            await session.all_out.wait()
            assert trio.current_time() == 0
            await trio.sleep(1)
            ids = session.ids
            for i in reversed(acked):  # acknowledged in the reverse order, interleaved
                sid = ids[_uri(i)]
                await session.notify(sid, _uri(i))  # ahead of its acknowledgment: kept
                await session.notify(sid, _uri((i + 1) % 10))  # not in its filter
                await session.acknowledge(sid)
            await trio.sleep(5)  # the cancelled ones are left; their acks come late
            for i in sorted(cancelled):
                await session.acknowledge(ids[_uri(i)])
            await trio.sleep(100)  # past the bound: the one never acknowledged is given up
            hub = session.hub
            assert hub._by_id == {ids[_uri(i)]: subs[i] for i in acked}
            for i in acked:
                sub = subs[i]
                assert sub.subscription_id == ids[_uri(i)]
                assert sub.honored == {"n": ids[_uri(i)]}
                assert [n.params for n in _drain(sub)] == [{"uri": _uri(i)}]
                assert entered[i] == 1 and not sub.ended
            assert outcomes == {2: "cancelled", 7: "cancelled", never: "timed out at 30"}
            assert hub._opening == {}
            leave.set()
    await trio.testing.wait_all_tasks_blocked()  # (the listen tasks, cancelled, are done)
    assert sorted(session.cancelled) == sorted(session.ids.values())
    assert session.hub._by_id == {}


async def test_early_notifications_are_bounded_per_opening(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = Listens(expected=2)
    subs: list[Subscription] = []

    async def subscriber(i: int) -> None:
        async with session.open(nursery, _uri(i)) as sub:
            subs.append(sub)
            await trio.sleep_forever()

    with trio.fail_after(100):
        async with trio.open_nursery() as callers:
            for i in range(2):
                callers.start_soon(subscriber, i)
            await session.all_out.wait()
            first, second = session.ids[_uri(0)], session.ids[_uri(1)]
            for n in range(_MAX_EARLY + 5):
                await session.notify(first, f"{_uri(0)}/{n}")  # (distinct: none merged)
            await session.notify(second, _uri(1))
            openings = session.hub._opening
            assert len(openings[first].early) == _MAX_EARLY
            assert len(openings[second].early) == 1  # (the other's flood took none of it)
            await session.acknowledge(first)
            await session.acknowledge(second)
            await trio.testing.wait_all_tasks_blocked()
            by_sub = {sub.resources[0]: len(_drain(sub)) for sub in subs}
            assert by_sub == {_uri(0): _MAX_EARLY, _uri(1): 1}
            callers.cancel_scope.cancel()


async def test_ten_subscribes_at_once_against_a_real_server(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target = (make_handlers(), app_config())
    subs: list[Subscription] = []
    ready = trio.Event()
    leave = trio.Event()
    async with open_client(target, era="modern") as client:

        async def subscriber(i: int) -> None:
            if i == 3:  # left at once, while the others open
                with trio.CancelScope() as scope:
                    scope.cancel()
                    async with client.subscribe(tools=True):
                        pytest.fail("entered though cancelled")  # pragma: no cover
                return
            async with client.subscribe(tools=True, resources=[_uri(i)]) as sub:
                subs.append(sub)
                if len(subs) == 9:
                    ready.set()
                await leave.wait()

        with trio.fail_after(100):
            async with trio.open_nursery() as callers:
                for i in range(10):
                    callers.start_soon(subscriber, i)
                await ready.wait()
                ids = [sub.subscription_id for sub in subs]
                assert None not in ids and len(set(ids)) == 9
                await client.call_tool("notify", {"method": TOOLS_CHANGED, "params": None})
                await trio.testing.wait_all_tasks_blocked()
                for sub in subs:
                    assert [n.method for n in _drain(sub)] == [TOOLS_CHANGED]
                leave.set()

"""A modern ``subscriptions/listen`` over Streamable HTTP must not outlive its token: the
server answers it with the error ``401 invalid_token`` at ``Principal.expires_at``, and
our client listens again with the same filter, once per expiry, never in a loop."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorData, RemoteProtocolError
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import TOKEN_EXPIRED_CODE
from mcp_trio import (
    BearerAuth,
    HttpServerConfig,
    McpError,
    Principal,
    ProtectedResourceMetadata,
    RequestTimeout,
    Server,
    SessionConfig,
    _client_subscriptions,
    open_client,
)

from .test_http_support import IO_TIMEOUT, RawConnection

MODERN = "2026-07-28"
METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp", authorization_servers=["https://auth.example.com"]
)


class Tokens:
    """A verifier whose tokens last ``life`` seconds from each check (``None``: no
    expiry), and refuse everything once ``revoked``; it counts the listens it saw."""

    def __init__(self, life: float | None) -> None:
        self.life = life
        self.revoked = False
        self.checks = 0

    async def __call__(self, token: str) -> Principal | None:
        await trio.lowlevel.checkpoint()
        self.checks += 1
        if self.revoked:
            return None
        expires = None if self.life is None else time.time() + self.life
        return Principal(subject="alice", expires_at=expires)


async def _serve(
    nursery: trio.Nursery, tokens: Tokens, clock: Callable[[], float] = time.time
) -> tuple[Server, Any]:
    server = Server("watched")

    @server.tool()
    async def noop() -> str:
        return "ok"

    auth = BearerAuth(verify_token=tokens, resource_metadata_url=METADATA.url, clock=clock)
    handle = await nursery.start(
        partial(
            server.serve_http,
            port=0,
            authenticate=auth,
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    return server, handle


async def _post_listen(port: int) -> tuple[RawConnection, float]:
    """A raw modern listen with the token ``short``, its head read (``200``): the
    connection, and when it was sent."""
    conn = await RawConnection.open(port)
    started = trio.current_time()
    headers = (
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "subscriptions/listen"),
        ("authorization", "Bearer short"),
    )
    await conn.send("POST", headers=headers, body=_listen_body())
    assert (await conn.head()).status_code == 200
    return conn, started


def _listen_body(rid: int = 7) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta}
    return dumps({"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params})


async def test_the_server_answers_a_listen_with_401_when_its_token_expires(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=60.0)
    server, handle = await _serve(nursery, tokens)
    with trio.fail_after(IO_TIMEOUT + 120):
        conn, started = await _post_listen(handle.port)
        body = await conn.body()
        assert 59 < trio.current_time() - started <= 60  # (wall time moved a little)
        messages = [loads(line[5:]) for line in body.split(b"\n") if line.startswith(b"data:")]
        ack, answer = [m for m in messages if m]
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert answer["id"] == 7 and "result" not in answer
        assert answer["error"]["code"] == TOKEN_EXPIRED_CODE == 401
        assert answer["error"]["data"] == {
            "error": "invalid_token",
            "resource_metadata": METADATA.url,
            "io.modelcontextprotocol/subscriptionId": 7,
        }
        await conn.aclose()
        assert server is not None


async def test_a_listen_with_a_token_that_never_expires_stays_open(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=None)
    _, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 1000):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
            client.subscribe(tools=True) as sub,
        ):
            await trio.sleep(900)
            assert not sub.ended and not handle._endpoint._releases


async def test_the_client_listens_again_once_per_expiry(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=60.0)
    server, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 1000):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
            client.subscribe(tools=True) as sub,
        ):
            first = sub.subscription_id
            checks = tokens.checks
            await trio.sleep(150)  # two expiries: two new listens, the same subscription
            assert not sub.ended
            assert tokens.checks == checks + 2
            assert sub.subscription_id not in (None, first)
            server.add_tool(lambda: "x", name="added")  # reaches the third listen
            with trio.fail_after(5):
                note = await sub.receive()
            assert note.method == "notifications/tools/list_changed"
            # Revoked: the next expiry's new listen is refused (401): the iteration
            # ends with that failure, after exactly one attempt.
            tokens.revoked = True
            checks = tokens.checks
            with pytest.raises(McpError, match="status 401") as failed:
                async for _ in sub:
                    pass
            assert sub.end_reason is not None
            assert failed.value.code != TOKEN_EXPIRED_CODE  # (the HTTP refusal)
            await trio.sleep(300)
            assert tokens.checks == checks + 1


async def test_a_listen_that_expires_again_at_once_is_not_opened_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=0.25)  # a server handing out tokens that are about to expire
    _, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 100):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
        ):
            checks = tokens.checks
            async with client.subscribe(tools=True) as sub:
                with pytest.raises(McpError) as failed:
                    async for _ in sub:
                        pass
            assert failed.value.code == TOKEN_EXPIRED_CODE
            assert tokens.checks == checks + 2  # the listen, and one new listen
            await trio.sleep(10)
            assert tokens.checks == checks + 2


def test_the_client_knows_the_code_without_loading_http() -> None:
    assert _client_subscriptions._TOKEN_EXPIRED == TOKEN_EXPIRED_CODE


async def test_a_plain_request_with_an_expiring_token_arms_no_timer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=60.0)
    server, handle = await _serve(nursery, tokens)
    armed: list[dict[int, float]] = []

    @server.tool()
    async def peek() -> str:  # (while its request is open)
        armed.append(dict(handle._endpoint._release_of))
        return "ok"

    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as c:
            await c.call_tool("peek", {})
    assert tokens.checks and armed == [{}]  # (its answer ends it: nothing to arm)


# ================================================================== the client, in detail
# A fake session plays the server's part, one script per listen request (ids 1, 2, ...).

Play = Callable[["FakeListens", int], Awaitable[Any]]
E = TypeVar("E", bound=BaseException)


def _expired(data: object = None) -> McpError:
    data = {"error": "invalid_token"} if data is None else data
    return McpError(ErrorData(code=401, message="the access token expired", data=data))


class FakeListens:
    """A session, with a hub of its own, whose listen requests ``plays`` answer (the
    n-th request's id is ``n``; ``pending`` may hold other requests' too); ``expire``
    ends those of :func:`ack_until_expired`."""

    def __init__(self, *plays: Play, ack_timeout: float | None = 30.0) -> None:
        self.hub = _client_subscriptions.SubscriptionHub()
        self.plays = plays
        self.sent = 0
        self.pending: list[int | str] = []
        self.cancelled: list[int] = []
        """Listen requests cancelled (a real session sends ``notifications/cancelled``)."""
        self.expire = trio.Event()
        self.on_held: dict[int, Callable[[int, bool], object]] = {}
        """Each listen request's ``on_held`` (the transport holds it back for a token)."""
        self.config = SessionConfig(listen_ack_timeout=ack_timeout)
        self.connection = SimpleNamespace(pending_requests=lambda: tuple(self.pending))

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        timeout: float,
        on_sent: Callable[[int], object],
        on_held: Callable[[int, bool], object],
    ) -> Any:
        assert method == "subscriptions/listen"
        self.sent += 1
        sid = self.sent
        self.pending.append(sid)
        on_sent(sid)
        self.on_held[sid] = on_held
        try:
            return await self.plays[sid - 1](self, sid)
        except trio.Cancelled:
            self.cancelled.append(sid)
            raise
        finally:
            self.pending.remove(sid)

    def claiming(self) -> list[_client_subscriptions.Subscription]:
        """The subscriptions whose listen request is out and claiming (not acknowledged,
        not given up on)."""
        return [opening.sub for opening in self.hub._opening.values()]

    async def acknowledge(self, sid: int | str) -> None:
        ctx = SimpleNamespace(subscription_id=sid, params={"notifications": {}})
        await self.hub._on_acknowledged(cast(Any, ctx))

    async def tools_changed(self, sid: int | str) -> None:
        ctx = SimpleNamespace(
            subscription_id=sid, method="notifications/tools/list_changed", params={}
        )
        await self.hub._on_change(cast(Any, ctx))

    def open(
        self, nursery: trio.Nursery, timeout: float | None = None
    ) -> AbstractAsyncContextManager[_client_subscriptions.Subscription]:
        return self.hub.open(
            cast(Any, self),
            nursery,
            modern=True,
            tools=True,
            prompts=False,
            resource_list=False,
            resources=(),
            timeout=timeout,
        )

    async def expire_and_fail(
        self,
        nursery: trio.Nursery,
        expected: type[E],
        *,
        timeout: float | None = None,
        match: str | None = None,
    ) -> tuple[_client_subscriptions.Subscription, E]:
        """Subscribe, set ``expire``, and read until the iteration fails with
        ``expected``; returns the subscription (left) and the failure."""
        with trio.fail_after(100):
            async with self.open(nursery, timeout) as sub:
                self.expire.set()
                with pytest.raises(expected, match=match) as failed:
                    async for _ in sub:
                        pass
        return sub, failed.value


def ack_until_expired(data: object = None) -> Play:
    """Acknowledge, then answer 401 (``data``, by default ``invalid_token``) at
    ``expire``."""

    async def play(session: FakeListens, sid: int) -> Any:
        await session.acknowledge(sid)
        await session.expire.wait()
        raise _expired(data)

    return play


async def ack_forever(session: FakeListens, sid: int) -> Any:
    await session.acknowledge(sid)
    await trio.sleep_forever()


async def never_ack(session: FakeListens, sid: int) -> Any:
    await trio.sleep_forever()


async def refuse(session: FakeListens, sid: int) -> Any:
    await trio.lowlevel.checkpoint()
    raise _expired()


class _LeaveAtRelisten(logging.Handler):
    """Ends ``sub`` (as leaving its block does) the moment the client logs that it
    listens again: the 401 and the leaving in one scheduling batch, made certain."""

    def __init__(self, sub: _client_subscriptions.Subscription) -> None:
        super().__init__(logging.INFO)
        self.sub = sub

    def emit(self, record: logging.LogRecord) -> None:
        if "listening again" in record.getMessage():
            self.sub._end("the subscription was closed")


async def test_leaving_as_the_token_expires_leaves_the_next_subscribe_free(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(ack_until_expired(), ack_forever)
    log = _client_subscriptions.logger
    level = log.level
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            leave = _LeaveAtRelisten(sub)
            log.addHandler(leave)
            log.setLevel(logging.INFO)
            try:
                session.expire.set()
                with pytest.raises(trio.EndOfChannel):
                    await sub.receive()
            finally:
                log.removeHandler(leave)
                log.setLevel(level)
        async with session.open(nursery) as again:  # (the lock was let go)
            assert again.subscription_id == 2 and not again.ended
    assert session.sent == 2 and session.claiming() == []


async def test_an_acknowledgment_after_leaving_claims_nothing(nursery: trio.Nursery) -> None:
    session = FakeListens(ack_until_expired(), never_ack)
    hub = session.hub
    async with session.open(nursery) as sub:
        assert hub._by_id == {1: sub}
        session.expire.set()
        await trio.testing.wait_all_tasks_blocked()
        assert session.sent == 2 and session.claiming() == [sub]  # the new listen is claiming
    # Left: the acknowledgment comes before the claim is let go (no checkpoint since).
    await session.acknowledge(2)
    assert hub._by_id == {} and sub.subscription_id is None


async def test_a_new_listen_forgets_the_old_id(nursery: trio.Nursery) -> None:
    session = FakeListens(ack_until_expired(), ack_forever)
    hub = session.hub
    async with session.open(nursery) as sub:
        assert hub._by_id == {1: sub}
        session.expire.set()
        await trio.testing.wait_all_tasks_blocked()
        assert sub.subscription_id == 2 and not sub.ended
        assert hub._by_id == {2: sub}
    assert hub._by_id == {}


async def test_a_listen_refused_with_401_before_its_acknowledgment_is_not_repeated(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(refuse, ack_forever)
    with trio.fail_after(100), pytest.raises(McpError) as failed:
        async with session.open(nursery):
            pass
    assert failed.value.code == TOKEN_EXPIRED_CODE
    assert session.sent == 1


@pytest.mark.parametrize("data", [{"error": "insufficient_scope"}, "invalid_token", [1]])
async def test_a_401_that_is_no_expired_token_ends_the_iteration(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, data: object
) -> None:
    session = FakeListens(ack_until_expired(data), ack_forever)
    _, failed = await session.expire_and_fail(nursery, McpError)
    assert failed.error.data == data
    assert session.sent == 1


async def test_a_new_listen_never_acknowledged_ends_with_the_expiry(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(ack_until_expired(), never_ack)
    started = trio.current_time()  # (acknowledging, and leaving, take no time)
    sub, failed = await session.expire_and_fail(nursery, McpError, timeout=5)
    assert trio.current_time() - started == pytest.approx(5)  # (under listen_ack_timeout)
    assert failed.code == TOKEN_EXPIRED_CODE
    assert sub.end_reason is not None and "not acknowledged again" in sub.end_reason
    assert session.sent == 2 and session.claiming() == []


async def test_a_new_listen_with_no_timeout_is_given_up_at_listen_ack_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(ack_until_expired(), never_ack, ack_forever, ack_timeout=30)
    started = trio.current_time()
    sub, failed = await session.expire_and_fail(nursery, McpError)  # (timeout=None)
    assert trio.current_time() - started == pytest.approx(30)
    assert failed.code == TOKEN_EXPIRED_CODE
    assert sub.end_reason is not None and "not acknowledged again" in sub.end_reason
    await trio.testing.wait_all_tasks_blocked()  # (the listen task, cancelled, is done)
    assert session.cancelled == [2] and session.pending == []
    await session.acknowledge(2)  # late: claims nothing
    assert session.hub._by_id == {} and sub.subscription_id is None
    async with session.open(nursery) as again:  # the lock was let go
        assert again.subscription_id == 3 and not again.ended
    assert session.sent == 3


async def test_an_opening_with_no_timeout_is_given_up_at_listen_ack_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(never_ack, ack_forever, ack_timeout=30)
    started = trio.current_time()
    with trio.fail_after(100), pytest.raises(RequestTimeout) as failed:
        async with session.open(nursery):  # (timeout=None)
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(30)
    said = "subscriptions/listen timed out (request 1): the server never acknowledged it"
    assert str(failed.value) == f"{said} (waited 30 s)"
    assert failed.value.request_id == 1
    await trio.testing.wait_all_tasks_blocked()
    assert session.cancelled == [1] and session.pending == []
    assert session.claiming() == []
    with trio.fail_after(100):
        async with session.open(nursery) as again:
            assert again.subscription_id == 2 and not again.ended
    assert session.sent == 2


async def test_the_shorter_of_timeout_and_listen_ack_timeout_bounds_an_opening(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(never_ack, ack_timeout=3)
    started = trio.current_time()
    with trio.fail_after(100), pytest.raises(RequestTimeout, match=r"waited 3 s"):
        async with session.open(nursery, timeout=60):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert trio.current_time() - started == pytest.approx(3)


async def test_with_listen_ack_timeout_none_an_opening_waits_as_long_as_it_takes(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(never_ack, ack_timeout=None)
    with trio.move_on_after(10_000) as waited:
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert waited.cancelled_caught
    await trio.testing.wait_all_tasks_blocked()
    assert session.sent == 1 and session.cancelled == [1]


async def test_a_late_acknowledgment_of_a_listen_given_up_on_is_not_the_next_ones(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The core reported listen 1's acknowledgment (and a notification) just before it
    # was cancelled; their handler tasks run only once listen 2 is claiming.
    async def stale_then_own(session: FakeListens, sid: int) -> Any:
        await session.tools_changed(1)
        await session.acknowledge(1)
        assert session.claiming() != []  # still claiming: 1 claimed nothing
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(never_ack, stale_then_own)
    with trio.fail_after(100):
        with pytest.raises(RequestTimeout):
            async with session.open(nursery):
                pytest.fail("entered, unacknowledged")  # pragma: no cover
        await trio.testing.wait_all_tasks_blocked()
        assert session.pending == []  # (so listen 2 does not count 1 as older)
        async with session.open(nursery) as again:
            assert again.subscription_id == 2
            assert session.hub._by_id == {2: again}
            assert session.hub._opening == {}
            with pytest.raises(trio.WouldBlock):
                again.receive_nowait()


async def test_notifications_ahead_of_the_acknowledgment_are_bounded(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    bound = _client_subscriptions._MAX_EARLY
    hub_early: list[int] = []

    async def flood_then_ack(session: FakeListens, sid: int) -> Any:
        for _ in range(bound + 5):
            await session.tools_changed(sid)
        hub_early.append(len(session.hub._opening[sid].early))
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(flood_then_ack)
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            assert hub_early == [bound] and session.hub._opening == {}
            note = sub.receive_nowait()  # (identical ones merged: one)
            assert note.method == "notifications/tools/list_changed"
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()


async def test_notifications_of_a_listen_given_up_on_are_not_kept(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def notify_only(session: FakeListens, sid: int) -> Any:
        await session.tools_changed(sid)  # kept, ahead of an acknowledgment never sent
        assert len(session.hub._opening[sid].early) == 1
        await trio.sleep_forever()

    async def stale(session: FakeListens, sid: int) -> Any:
        await session.tools_changed(1)  # listen 1's, handled late
        await session.tools_changed("another")  # an id that is no listen of ours
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(notify_only, stale)
    with trio.fail_after(100), pytest.raises(RequestTimeout):
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert session.hub._opening == {}
    with trio.fail_after(100):
        async with session.open(nursery) as again:
            assert again.subscription_id == 2
            with pytest.raises(trio.WouldBlock):
                again.receive_nowait()


def test_listen_ack_timeout_is_positive_or_none() -> None:
    assert SessionConfig().listen_ack_timeout == 30.0
    assert SessionConfig(listen_ack_timeout=None).listen_ack_timeout is None
    with pytest.raises(ValueError, match="listen_ack_timeout"):
        SessionConfig(listen_ack_timeout=0)


async def test_a_listen_given_up_before_its_task_ran_sends_nothing() -> None:
    # (subscribe() timed out or was cancelled before the listen task was scheduled)
    session = FakeListens(ack_forever)
    sub = _client_subscriptions.Subscription(
        tools=True, prompts=False, resource_list=False, resources=()
    )
    sub._scope = trio.CancelScope()
    sub._end("the subscription was closed")
    opening = _client_subscriptions._Opening(sub, math.inf, math.inf)
    await session.hub._listen(cast(Any, session), {}, sub, opening)
    assert session.sent == 0 and session.hub._by_id == {}


async def ack_then_expire(session: FakeListens, sid: int) -> Any:
    """Acknowledge and answer 401 in one scheduling round (a verifier with leeway
    accepted a token already past its expiry)."""
    await session.acknowledge(sid)
    raise _expired()


async def test_a_listen_acknowledged_and_expired_at_once_opens(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The new listen replaces the event subscribe() waits on before subscribe() wakes:
    # subscribe() must still see its own listen acknowledged (timeout=None: no timeout).
    session = FakeListens(ack_then_expire, ack_forever)
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            assert not sub.ended
            await trio.testing.wait_all_tasks_blocked()
            assert sub.subscription_id == 2 and not sub.ended
    assert session.sent == 2 and session.claiming() == []


async def test_a_new_listen_acknowledged_and_expired_at_once_listens_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The claim of the second listen must see its own acknowledgment, though the third
    # listen has replaced the event by the time it wakes.
    async def slowly(session: FakeListens, sid: int) -> Any:
        await trio.sleep(2)  # (past _MIN_RELISTEN_LIFETIME: a third listen is due)
        return await ack_then_expire(session, sid)

    session = FakeListens(ack_until_expired(), slowly, ack_forever)
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            session.expire.set()
            await trio.sleep(10)
            assert sub.subscription_id == 3 and not sub.ended, sub.end_reason
            with pytest.raises(trio.WouldBlock):
                sub.receive_nowait()
    assert session.sent == 3 and session.claiming() == []


async def answer_unacknowledged(session: FakeListens, sid: int) -> Any:
    await trio.lowlevel.checkpoint()
    return {}


async def test_a_new_listen_answered_before_its_acknowledgment_fails_the_iteration(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    session = FakeListens(ack_until_expired(), answer_unacknowledged)
    await session.expire_and_fail(nursery, RemoteProtocolError, match="before acknowledging")
    await trio.testing.wait_all_tasks_blocked()  # (the claim, cancelled, lets go)
    assert session.sent == 2 and session.claiming() == []


async def test_another_error_code_with_invalid_token_is_not_listened_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def forbid(session: FakeListens, sid: int) -> Any:
        await session.acknowledge(sid)
        await session.expire.wait()
        raise McpError(ErrorData(code=403, message="no", data={"error": "invalid_token"}))

    session = FakeListens(forbid, ack_forever)
    _, failed = await session.expire_and_fail(nursery, McpError)
    assert failed.code == 403
    assert session.sent == 1


async def test_a_new_listen_claims_nothing_before_its_request_goes_out(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between taking the lock and the new listen request going out, an acknowledgment
    # (say a late duplicate of the old listen's) must not be taken for the new one's.
    session = FakeListens(ack_until_expired(), ack_forever)
    hub = session.hub
    seen: list[object] = []
    claim_again = hub._claim_again

    class Status:
        def __init__(self, status: trio.TaskStatus[None]) -> None:
            self.status = status

        def started(self, value: None = None) -> None:
            seen.append(hub._claimant(1))  # (the lock is held; the request not sent)
            self.status.started(value)

    async def claim(*args: Any, task_status: trio.TaskStatus[None]) -> None:
        await claim_again(*args, task_status=cast(Any, Status(task_status)))

    monkeypatch.setattr(hub, "_claim_again", claim)
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            session.expire.set()
            await trio.testing.wait_all_tasks_blocked()
            assert sub.subscription_id == 2 and not sub.ended
    assert seen == [None]


async def test_a_late_acknowledgment_of_a_cancelled_opening_is_not_the_next_ones(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # subscribe() left by the caller's own cancel scope, well before listen_ack_timeout:
    # listen 1's acknowledgment, reported before its cancellation, is handled once
    # listen 2 is claiming.
    async def stale_then_own(session: FakeListens, sid: int) -> Any:
        await session.acknowledge(1)
        assert session.claiming() != []  # still claiming: 1 claimed nothing
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(never_ack, stale_then_own, ack_timeout=30)
    with trio.move_on_after(5) as left:
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert left.cancelled_caught
    await trio.testing.wait_all_tasks_blocked()
    assert session.pending == [] and session.cancelled == [1]
    with trio.fail_after(100):
        async with session.open(nursery) as again:
            assert again.subscription_id == 2 and session.hub._by_id == {2: again}


async def test_a_late_acknowledgment_of_a_new_listen_left_is_not_the_next_ones(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The block left while the new listen after an expiry is claiming: listen 2's late
    # acknowledgment must not be taken for the next subscribe()'s listen 3.
    async def stale_then_own(session: FakeListens, sid: int) -> Any:
        await session.acknowledge(2)
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(ack_until_expired(), never_ack, stale_then_own)
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            session.expire.set()
            await trio.testing.wait_all_tasks_blocked()
            assert session.sent == 2 and session.claiming() == [sub]
        await trio.testing.wait_all_tasks_blocked()
        async with session.open(nursery) as again:
            assert again.subscription_id == 3 and session.hub._by_id == {3: again}


async def test_an_opening_knows_its_listen_among_older_and_later_requests(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Another request pending before the listen, one sent after it: acknowledgments
    # naming them claim nothing (whatever the core would report), the listen's does.
    async def among_others(session: FakeListens, sid: int) -> Any:
        session.pending.append("later")
        await session.acknowledge("older")
        await session.acknowledge("later")
        assert session.hub._by_id == {}
        await session.acknowledge(sid)
        await trio.sleep_forever()

    session = FakeListens(among_others)
    session.pending.append("older")
    with trio.fail_after(100):
        async with session.open(nursery) as sub:
            assert sub.subscription_id == 1 and session.hub._by_id == {1: sub}


async def test_a_listen_given_up_on_is_named_though_its_entry_is_gone(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The core popped the listen's entry (its answer is in) but the waiter has not woken
    # when the bound passes; an older and a later request are pending: RequestTimeout
    # names the listen, not either of them.
    async def answered_at_the_bound(session: FakeListens, sid: int) -> Any:
        session.pending.append("later")
        await trio.sleep(29)
        session.pending.remove(sid)  # (the reader: answered, entry popped)
        await trio.sleep(2)  # (the waiter wakes after the bound)
        session.pending.append(sid)  # (for the fake's own bookkeeping)
        return {}

    session = FakeListens(answered_at_the_bound, ack_timeout=30)
    session.pending.append("older")
    with trio.fail_after(100), pytest.raises(RequestTimeout) as failed:
        async with session.open(nursery):
            pytest.fail("entered, unacknowledged")  # pragma: no cover
    assert failed.value.request_id == 1
    assert "subscriptions/listen timed out (request 1)" in str(failed.value)


async def test_a_bearer_auth_s_clock_times_the_listen_too(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # It accepted the token by its clock (60 s left), the stream's end was measured by
    # time.time() (expired already): the listen ended at once.
    tokens = Tokens(life=-1000.0)
    _, handle = await _serve(nursery, tokens, clock=lambda: time.time() - 1060)
    with trio.fail_after(IO_TIMEOUT + 120):
        conn, started = await _post_listen(handle.port)
        await conn.body()
        assert 59 < trio.current_time() - started <= 60
        await conn.aclose()

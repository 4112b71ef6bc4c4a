"""Clients that share one :class:`OAuth`, or one storage, refresh their token one at a
time: refresh tokens are single-use (rotated; public clients MUST have them rotated,
``2026-07-28`` security considerations), and an authorization server that sees a spent
one presented again may revoke the whole family (RFC 9700 section 4.14.2). The client
that comes second waits for the first one's refresh and takes the token it stored,
whether the two run in one Trio run or in two threads, each running Trio.

The fake authorization server and the protected server are ``test_oauth_e2e``'s."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from mcp_sansio import BearerChallenge
from mcp_trio import (
    Client,
    FileOAuthStorage,
    OAuthToken,
    open_client,
)
from mcp_trio._oauth_turn import _TURNS, _Waiter, refresh_turn

from .oauth_support import Storage, User, oauth
from .test_http_support import IO_TIMEOUT
from .test_oauth_e2e import Setup, start_refreshing

GRANTED = "alice ['mcp', 'offline_access']"


async def _call_both(a: Client, b: Client) -> list[str]:
    """One ``whoami`` on each client, at once: their answers."""
    texts: list[str] = []

    async def call(client: Client) -> None:
        texts.append((await client.call_tool("whoami", {})).text)

    async with trio.open_nursery() as calls:
        calls.start_soon(call, a)
        calls.start_soon(call, b)
    return texts


def _grants(s: Setup) -> list[str]:
    return [t["grant_type"] for t in s.asrv.token_requests]


async def test_clients_of_one_oauth_never_present_one_refresh_token_twice(
    nursery: trio.Nursery,
) -> None:
    # Both clients hold the same token, which expires for both at once: both call.
    # Before, both sent its refresh token; the authorization server took it as a
    # replay and revoked everything: one client failed every call ("the server
    # refused the token its authorization server just issued"), the other had the user
    # authorize again.
    s = await start_refreshing(nursery, expires_in=100, reuse_detection=True)
    user = User()
    auth = oauth(clock=s.time, on_authorize=user)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(s.url, era="modern", auth=auth) as a,
            open_client(s.url, era="modern", auth=auth) as b,
        ):
            await a.call_tool("whoami", {})
            await b.call_tool("whoami", {})  # the stored token: no prompt
            for _ in range(2):
                s.time.advance(200)  # expired, for both
                assert await _call_both(a, b) == [GRANTED, GRANTED]
            assert await _call_both(a, b) == [GRANTED, GRANTED]
    assert s.asrv.reused == 0
    assert _grants(s) == ["authorization_code", "refresh_token", "refresh_token"]
    assert user.prompts == 1


async def test_a_client_waits_for_a_refresh_being_stored_rather_than_asking_the_user(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A lenient authorization server (a spent refresh token is refused, nothing else)
    # and a storage that takes a second to save (a keyring). Before, the second
    # client's refresh was refused, found the storage still holding the old token
    # (the first one's save under way), erased it and had the user authorize again.
    s = await start_refreshing(nursery, expires_in=100)
    user = User()
    storage = Storage(save_seconds=1)
    auth = oauth(clock=s.time, on_authorize=user, storage=storage)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(s.url, era="modern", auth=auth) as a,
            open_client(s.url, era="modern", auth=auth) as b,
        ):
            await a.call_tool("whoami", {})
            await b.call_tool("whoami", {})
            for _ in range(3):
                s.time.advance(200)
                assert await _call_both(a, b) == [GRANTED, GRANTED]
    assert s.asrv.reused == 0
    assert _grants(s) == ["authorization_code", *["refresh_token"] * 3]
    assert user.prompts == 1
    assert None not in storage.saved  # nothing was erased
    assert list(storage.tokens.values()) == [storage.saved[-1]]


async def test_storages_of_one_file_take_turns(nursery: trio.Nursery, tmp_path: Path) -> None:
    # Two OAuth objects, each with a FileOAuthStorage of one file (two spellings of
    # its path): one token there, so their refreshes of it take turns too. (Not
    # separate processes: they may still race.)
    s = await start_refreshing(nursery, expires_in=100, reuse_detection=True)
    user = User()
    (tmp_path / "sub").mkdir()
    first = FileOAuthStorage(tmp_path / "tokens.json")
    second = FileOAuthStorage(tmp_path / "sub" / ".." / "tokens.json")
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(
                s.url, era="modern", auth=oauth(clock=s.time, on_authorize=user, storage=first)
            ) as a,
            open_client(
                s.url, era="modern", auth=oauth(clock=s.time, on_authorize=user, storage=second)
            ) as b,
        ):
            await a.call_tool("whoami", {})
            await b.call_tool("whoami", {})  # the stored token: no prompt
            # (b's first refusal, after the first expiry, has it discover the metadata
            # it refreshes by: from the second on, both refresh at once.)
            for _ in range(3):
                s.time.advance(200)
                assert await _call_both(a, b) == [GRANTED, GRANTED]
    assert s.asrv.reused == 0
    assert _grants(s) == ["authorization_code", *["refresh_token"] * 3]
    assert user.prompts == 1


async def test_clients_of_one_storage_in_two_trio_runs_take_turns(nursery: trio.Nursery) -> None:
    # Two OAuth objects share one storage, one in this Trio run, one in a thread
    # running its own: a trio.Lock would not hold the second back. It calls while the
    # first one's refresh is at the authorization server (held there): it waits, then
    # takes the token the first one stored.
    s = await start_refreshing(nursery, expires_in=100, reuse_detection=True)
    user = User()
    storage = Storage()
    here = oauth(clock=s.time, on_authorize=user, storage=storage)
    there = oauth(clock=s.time, on_authorize=user, storage=storage)
    ours = trio.lowlevel.current_trio_token()
    theirs: list[tuple[trio.lowlevel.TrioToken, trio.Event]] = []  # (its run, its go)
    opened, blocked = trio.Event(), trio.Event()
    texts: list[str] = []

    async def in_the_thread(go: trio.Event) -> None:
        with trio.fail_after(IO_TIMEOUT):
            async with open_client(s.url, era="modern", auth=there) as client:
                await client.call_tool("whoami", {})  # the stored token, by discovery
                ours.run_sync_soon(opened.set)
                await go.wait()

                async def call() -> None:
                    texts.append((await client.call_tool("whoami", {})).text)

                async with trio.open_nursery() as calls:
                    calls.start_soon(call)
                    await trio.testing.wait_all_tasks_blocked()
                    ours.run_sync_soon(blocked.set)  # (waiting for its turn)

    def thread() -> None:
        async def main() -> None:
            go = trio.Event()
            theirs.append((trio.lowlevel.current_trio_token(), go))
            await in_the_thread(go)

        trio.run(main)

    async def call_here(client: Client) -> None:
        texts.append((await client.call_tool("whoami", {})).text)

    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=here) as client:
            await client.call_tool("whoami", {})
            async with trio.open_nursery() as tasks:
                tasks.start_soon(trio.to_thread.run_sync, thread)
                await opened.wait()
                s.time.advance(200)  # expired, for both
                s.asrv.refresh_gate = gate = trio.Event()
                tasks.start_soon(call_here, client)
                await s.asrv.refresh_asked.wait()  # its refresh is at the AS, held
                [(token, go)] = theirs
                token.run_sync_soon(go.set)
                await blocked.wait()
                gate.set()
    assert texts == [GRANTED, GRANTED]
    assert s.asrv.reused == 0
    assert _grants(s) == ["authorization_code", "refresh_token"]
    assert user.prompts == 1


async def test_a_refused_refresh_leaves_a_stored_token_it_cannot_use(
    nursery: trio.Nursery,
) -> None:
    # The refresh is refused; the storage now holds another token, bound to another
    # DPoP key (another process's client, which uses it). This client cannot use it,
    # and does not erase it: it forgets only the very token refused.
    s = await start_refreshing(nursery, expires_in=100)
    storage = Storage()
    gate = trio.Event()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(clock=s.time, storage=storage)) as c:
            await c.call_tool("whoami", {})
            s.time.advance(200)
            s.asrv.refresh_gate = gate
            key = (s.url, s.asrv.issuer)
            other = OAuthToken(
                access_token="theirs",
                token_type="DPoP",
                expires_at=s.time() + 100,
                dpop_jkt="their-key-thumbprint",
            )
            async with trio.open_nursery() as tasks:
                tasks.start_soon(c.call_tool, "whoami", {})
                await s.asrv.refresh_asked.wait()
                s.asrv.refresh.clear()  # spent, by the other process
                storage.tokens[key] = other
                storage.saved.clear()
                gate.set()
    # It authorized anew (its own token saved over the other's, as before), but never
    # saved None over the other's token first.
    assert storage.saved and None not in storage.saved


async def test_a_refused_refresh_does_not_forget_the_token_a_flow_stores_meanwhile(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Client a's refresh is refused and reads the storage again: the token it
    # refreshed, to forget. Meanwhile client b (a step-up) stores a new token there.
    # Before, a then erased b's token (the next client had the user authorize again);
    # now a sees that a save began since it read the storage, and forgets nothing:
    # the storage keeps b's token (b's save never waits for a refresh).
    s = await start_refreshing(nursery, expires_in=100, scopes_supported=["mcp", "more"])
    reread, resume = trio.Event(), trio.Event()
    loads: int | None = None  # (counted once a's refresh starts)

    class PausedReread(Storage):
        async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
            nonlocal loads
            found = await super().load_token(resource, issuer)
            if loads is not None:
                loads += 1
            if loads == 2:  # (a's second read, after the refusal: paused once read)
                reread.set()
                await resume.wait()
            return found

    storage = PausedReread()
    auth = oauth(clock=s.time, storage=storage)
    a, b = auth.bind(s.url), auth.bind(s.url)
    key = (s.url, s.asrv.issuer)
    with trio.fail_after(IO_TIMEOUT):
        await a.challenged(401, BearerChallenge(), None)
        await b.challenged(401, BearerChallenge(), None)  # the stored token
        s.time.advance(200)
        s.asrv.refresh.clear()  # revoked: the refresh is refused
        loads = 0
        async with trio.open_nursery() as tasks:
            tasks.start_soon(a.ready, nursery)
            await reread.wait()
            step_up = BearerChallenge(error="insufficient_scope", scope="mcp more")
            tasks.start_soon(b.challenged, 403, step_up, b.authorization())
            await trio.testing.wait_all_tasks_blocked()  # (b's flow has saved its token)
            resume.set()
    assert b.token is not None and "more" in (b.token.scope or "")
    assert a.token is None
    assert storage.tokens == {key: b.token}


async def test_a_refused_refresh_does_not_forget_a_token_whose_save_is_under_way(
    nursery: trio.Nursery,
) -> None:
    # A storage whose writes are slow and queued, its reads not (a keyring). Client b
    # (a step-up) begins to save its new token; then a's refresh is refused, and a
    # reads the storage again: still the token refused (b's write has not landed).
    # Before, a erased it, its erase queued after b's write: b's token was lost. Now a
    # sees a save under way and forgets nothing.
    s = await start_refreshing(nursery, expires_in=100, scopes_supported=["mcp", "more"])
    writing, erasing, landed = trio.Event(), trio.Event(), trio.Event()
    armed = False

    class SlowWrites(Storage):
        def __init__(self) -> None:
            super().__init__()
            self.write_lock = trio.Lock()

        async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
            if armed and token is None:
                erasing.set()
                landed.set()  # (the erase is queued: b's write lands first)
            async with self.write_lock:
                if armed and token is not None:
                    writing.set()
                    await landed.wait()
                await super().save_token(resource, issuer, token)

    storage = SlowWrites()
    auth = oauth(clock=s.time, storage=storage)
    a, b = auth.bind(s.url), auth.bind(s.url)
    key = (s.url, s.asrv.issuer)
    with trio.fail_after(IO_TIMEOUT):
        await a.challenged(401, BearerChallenge(), None)
        await b.challenged(401, BearerChallenge(), None)  # the stored token
        s.time.advance(200)
        s.asrv.refresh.clear()  # revoked: a's refresh is refused
        armed = True
        async with trio.open_nursery() as tasks:
            step_up = BearerChallenge(error="insufficient_scope", scope="mcp more")
            tasks.start_soon(b.challenged, 403, step_up, b.authorization())
            await writing.wait()
            await a.ready(nursery)  # (refused: it reads the storage again)
            landed.set()
    assert not erasing.is_set()
    assert b.token is not None and "more" in (b.token.scope or "")
    assert a.token is None
    assert storage.tokens == {key: b.token}
    assert not _TURNS


# ------------------------------------------------------------------ the turns themselves


async def _turns(cancel_when: str, autojump_clock: trio.testing.MockClock) -> list[str]:
    """Three takers of one turn, in order; the second one is cancelled while it waits
    (``cancel_when="waiting"``) or once the first has handed it the turn, before it
    runs (``"handed"``). Who held the turn, in order."""
    storage = object()
    held: list[str] = []
    second = trio.CancelScope()

    async def take(name: str) -> None:
        async with refresh_turn(storage, "https://mcp.example/mcp", "https://as.example"):
            held.append(name)
            await trio.sleep(1)

    async def first() -> None:
        await take("first")
        if cancel_when == "handed":
            second.cancel()  # (no checkpoint since the hand-over)

    async def cancelled_second() -> None:
        with second:
            await take("second")

    with trio.fail_after(10):  # (virtual: a turn never handed on ends the test)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(cancelled_second)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(take, "third")
            await trio.testing.wait_all_tasks_blocked()
            if cancel_when == "waiting":
                second.cancel()
    assert not _TURNS  # (no entry is left behind)
    return held


async def test_a_turn_is_first_come_first_served(autojump_clock: trio.testing.MockClock) -> None:
    assert await _turns("never", autojump_clock) == ["first", "second", "third"]


async def test_a_taker_cancelled_while_it_waits_leaves_the_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert await _turns("waiting", autojump_clock) == ["first", "third"]


async def test_a_taker_cancelled_once_handed_the_turn_passes_it_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert await _turns("handed", autojump_clock) == ["first", "third"]


RESOURCE, ISSUER = "https://mcp.example/mcp", "https://as.example"


async def test_a_turn_handed_on_is_not_taken_again_by_a_newcomer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a holds, b waits; a hands the turn to b and leaves. c, coming while b holds it,
    # waits for b: the entry outlives a (b still uses it; a stuck or doubled turn
    # would otherwise vanish with its last user, so a waiter is queued first).
    storage = object()
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []

    async def take(name: str, seconds: float) -> None:
        async with refresh_turn(storage, RESOURCE, ISSUER):
            inside.append(name)
            if len(inside) > 1:
                overlaps.append(tuple(inside))
            await trio.sleep(seconds)
            inside.remove(name)

    with trio.fail_after(10):  # (virtual)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, "a", 1)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(take, "b", 2)
            await trio.sleep(1.5)  # (b holds it now; a is gone)
            nursery.start_soon(take, "c", 1)
    assert overlaps == []
    assert not _TURNS


async def _cancelled_as_it_takes(storage: object) -> None:
    """A holder, a task that cancels it, and a waiter, all woken at once."""
    go, scope = trio.Event(), trio.CancelScope()

    async def holder() -> None:
        await go.wait()
        with scope:
            async with refresh_turn(storage, RESOURCE, ISSUER):
                await trio.sleep(1)

    async def canceller() -> None:
        await go.wait()
        scope.cancel()

    async def waiter() -> None:
        await go.wait()
        async with refresh_turn(storage, RESOURCE, ISSUER):
            await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        for task in (holder, canceller, waiter):
            nursery.start_soon(task)
        await trio.testing.wait_all_tasks_blocked()
        go.set()


async def test_a_taker_cancelled_as_it_takes_the_turn_still_releases_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A taker cancelled (by another task) at the checkpoint where it takes a free
    # turn, with a third task queuing meanwhile: the turn must not stay held (the
    # third one would wait for ever). Trio runs a batch in either order: a few rounds.
    storage = object()
    for _ in range(24):
        with trio.fail_after(10):  # (virtual: a turn left held ends the test)
            await _cancelled_as_it_takes(storage)
        assert not _TURNS


async def test_a_holder_that_raises_hands_the_turn_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The storage fails while a refresh holds the turn and another one waits: the
    # waiter gets the turn.
    storage = object()
    held: list[str] = []

    async def failing() -> None:
        with pytest.raises(ValueError, match="the storage failed"):
            async with refresh_turn(storage, RESOURCE, ISSUER):
                await trio.sleep(1)
                raise ValueError("the storage failed")

    async def next_one() -> None:
        async with refresh_turn(storage, RESOURCE, ISSUER):
            held.append("next")

    with trio.fail_after(10):  # (virtual)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(failing)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(next_one)
    assert held == ["next"]
    assert not _TURNS


async def _make_waiter(out: list[_Waiter]) -> None:
    out.append(_Waiter())


async def test_a_waiter_whose_run_is_gone_is_skipped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A waiter left queued by a run that ended abnormally: the release hands the turn
    # to the next live waiter instead of keeping it held.
    storage = object()
    stale: list[_Waiter] = []
    thread = threading.Thread(target=trio.run, args=(_make_waiter, stale))
    thread.start()
    thread.join()
    got, leave = trio.Event(), trio.Event()

    async def holder() -> None:
        async with refresh_turn(storage, RESOURCE, ISSUER) as turn:
            await leave.wait()
            turn.waiters.appendleft(stale[0])  # (first in the queue, its run gone)

    async def live() -> None:
        async with refresh_turn(storage, RESOURCE, ISSUER):
            got.set()

    with trio.fail_after(10):  # (virtual)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(holder)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(live)
            await trio.testing.wait_all_tasks_blocked()
            leave.set()
    assert got.is_set()
    assert not _TURNS


async def test_turns_of_two_issuers_or_resources_do_not_wait_for_each_other(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # One storage, one holder per (resource, issuer): another issuer's or another
    # resource's refresh goes at once.
    storage = object()
    started: list[float] = []

    async def take(resource: str, issuer: str) -> None:
        async with refresh_turn(storage, resource, issuer):
            started.append(trio.current_time())
            await trio.sleep(1)

    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, RESOURCE, ISSUER)
        nursery.start_soon(take, RESOURCE, "https://other-as.example")
        nursery.start_soon(take, "https://other-mcp.example/mcp", ISSUER)
    assert started == [t0, t0, t0]
    assert not _TURNS


async def test_the_hand_over_is_protected_from_keyboard_interrupt(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Ctrl-C between granting the turn to a waiter and waking it (through its run,
    # perhaps another thread's) would leave that waiter, and every later one, waiting
    # for ever: Trio defers it past the hand-over. So is a taker's body not protected.
    storage = object()
    protected: list[bool] = []
    wake = trio.lowlevel.TrioToken.run_sync_soon

    def spy(token: trio.lowlevel.TrioToken, sync_fn: Callable[[], object]) -> None:
        protected.append(trio.lowlevel.currently_ki_protected())
        wake(token, sync_fn)

    monkeypatch.setattr(trio.lowlevel.TrioToken, "run_sync_soon", spy)

    async def take() -> None:
        async with refresh_turn(storage, RESOURCE, ISSUER):
            protected.append(trio.lowlevel.currently_ki_protected())
            await trio.sleep(1)

    with trio.fail_after(10):  # (virtual)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(take)
    assert protected == [False, True, False]  # first's body, its hand-over, second's body
    assert not _TURNS

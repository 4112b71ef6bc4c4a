"""One refresh at a time per token of a storage, in the whole process.

Theory of operation
-------------------
Refresh tokens may be single-use (rotated: ``2026-07-28`` security considerations,
"public clients ... MUST rotate refresh tokens"), and an authorization server that
sees a spent one presented again may revoke the whole family (RFC 9700 section
4.14.2). So two clients that share a storage (the clients of one
:class:`~mcp_trio.OAuth`, or of two made with one storage object) must never send the
same refresh token at once: the second must wait for the first's outcome, then take
the token it stored. An :class:`~mcp_trio._oauth.Authorizer` is per client, and a
:class:`trio.Lock` is per Trio run, while one storage may serve clients in several
threads, each running Trio (an application that runs a client per thread). Hence
:func:`refresh_turn`: a lock per ``(storage, resource, issuer)``, first come first
served, that works across threads and Trio runs. A waiter parks on a
:class:`trio.Event` of its own run; the holder that releases hands the turn to the
first waiter and sets that event through the waiter's run (its
:class:`~trio.lowlevel.TrioToken`), which is safe from any thread. A waiter cancelled
after the turn was handed to it passes it on. The table of turns keeps an entry only
while someone holds or waits for it (as :mod:`._oauth_store`'s file locks do).

A flow's save of its new token does not wait for a refresh (the user just authorized;
the refresh may hang until its timeout): it only says it is under way
(:func:`note_save`), so that a refused refresh, which forgets the token it read in the
storage, does not forget the flow's instead (nor while that save has not landed).

Separate processes sharing one file are not serialized (no lock file: a process that
hangs would stall the others): they may still race.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Final, final

import trio

__all__ = ["Turn", "note_save", "refresh_turn"]

_MUTEX: Final = threading.Lock()
"""Guards :data:`_TURNS` and every :class:`Turn`'s state (any thread may touch them)."""


@final
class _Waiter:
    __slots__ = ("event", "granted", "token")

    def __init__(self) -> None:
        self.token: Final = trio.lowlevel.current_trio_token()
        self.event: Final = trio.Event()
        self.granted = False  # (under _MUTEX: the turn was handed to this waiter)


@final
class Turn:
    """A first-come-first-served lock that Trio tasks of any run (any thread) take
    turns at (see the module docs)."""

    __slots__ = ("held", "saves", "saving", "users", "waiters")

    def __init__(self) -> None:
        self.saves = 0
        """Saves of the token begun outside the turn (a flow's: :func:`note_save`)
        while the turn was in use: a holder compares it before and after reading the
        storage, so as not to forget a token saved meanwhile."""
        self.saving = 0
        """Of those, the saves under way: one begun before the holder read the
        storage may land after (a storage whose writes are slow or queued while its
        reads are not, as a keyring's), so the holder forgets nothing meanwhile."""
        self.held = False
        self.users = 0  # (holders, waiters, saves: the entry goes when none is left)
        self.waiters: deque[_Waiter] = deque()

    @trio.lowlevel.enable_ki_protection  # (see release)
    async def acquire(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        with _MUTEX:
            if not self.held:
                self.held = True
                waiter = None
            else:
                waiter = _Waiter()
                self.waiters.append(waiter)
        if waiter is None:
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        try:
            await waiter.event.wait()
        except BaseException:
            with _MUTEX:
                granted = waiter.granted
                if not granted:
                    self.waiters.remove(waiter)
            if granted:
                self.release()  # (handed over meanwhile: to the next one)
            raise

    @trio.lowlevel.enable_ki_protection
    def release(self) -> None:
        """Hand the turn to the first waiter, if any (else it is free). Protected
        from ``KeyboardInterrupt`` (Trio defers it to the next checkpoint): a waiter
        granted the turn but never woken (perhaps another thread's run) would wait
        for ever, and so would every later one."""
        while True:
            with _MUTEX:
                if not self.waiters:
                    self.held = False
                    return
                waiter = self.waiters.popleft()
                waiter.granted = True
            try:
                waiter.token.run_sync_soon(waiter.event.set)
            except trio.RunFinishedError:  # (its run is gone: cannot happen while it waits)
                continue
            return


_TURNS: Final[dict[tuple[object, str, str], Turn]] = {}
"""The turn of each ``(id(storage), resource, issuer)`` in use (an entry lives while a
user holds the storage: its id is not reused meanwhile); for a storage that names what
it keeps the tokens in (:class:`~mcp_trio.FileOAuthStorage`: its file and namespace),
that name instead of its id, so that two storages of one file take turns too."""


def _key(storage: object, resource: str, issuer: str) -> tuple[object, str, str]:
    where = getattr(storage, "_refresh_turn_key", None)
    return (id(storage) if where is None else where, resource, issuer)


def _enter(key: tuple[object, str, str]) -> Turn:
    """The turn of ``key``, its entry made if none, counted one user more (the
    caller's: :func:`_leave` when done). Under :data:`_MUTEX` (the caller holds it)."""
    turn = _TURNS.get(key)
    if turn is None:
        turn = _TURNS[key] = Turn()
    turn.users += 1
    return turn


def _leave(key: tuple[object, str, str], turn: Turn) -> None:
    """One user of ``turn`` less; its entry goes with the last. Under :data:`_MUTEX`."""
    turn.users -= 1
    if not turn.users:
        del _TURNS[key]


@contextmanager
@trio.lowlevel.enable_ki_protection  # (its counts: see Turn.release; not the save's)
def note_save(storage: object, resource: str, issuer: str) -> Iterator[None]:
    """Around a save of the token ``issuer`` issued for ``resource`` in ``storage``
    outside the turn (a flow's new token: it does not wait for a refresh): counted in
    :attr:`Turn.saves` as it begins, and in :attr:`Turn.saving` until it ends (the
    entry lives meanwhile, so that a refresh that takes the turn later sees it)."""
    key = _key(storage, resource, issuer)
    with _MUTEX:
        turn = _enter(key)
        turn.saves += 1
        turn.saving += 1
    try:
        yield
    finally:
        with _MUTEX:
            turn.saving -= 1
            _leave(key, turn)


@asynccontextmanager
@trio.lowlevel.enable_ki_protection  # (the turn taken is released: see Turn.release)
async def refresh_turn(storage: object, resource: str, issuer: str) -> AsyncIterator[Turn]:
    """Hold the turn to refresh the token ``issuer`` issued for ``resource`` in
    ``storage``: one holder at a time in the process, whatever the thread or Trio run;
    the others wait, first come first served (cancellable)."""
    key = _key(storage, resource, issuer)
    with _MUTEX:
        turn = _enter(key)
    try:
        await turn.acquire()
        try:
            yield turn
        finally:
            turn.release()
    finally:
        with _MUTEX:
            _leave(key, turn)

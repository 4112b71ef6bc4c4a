"""The live sessions of a :class:`~mcp_trio.Server`, and the notifications they are owed.

Theory of operation
-------------------
A session is *tracked* from its first request (any transport), or from the start when
it is served through the server (the ``on_session`` hook runs :meth:`SessionTracker.watch`
beside it). Tracking is a weak reference plus two facts: the list versions last
announced to it, and (legacy) the URIs it subscribed to.

List changes are announced by the watcher tasks: the registry calls :meth:`wake` on
every change (a synchronous call, so that decorators and ``add_*`` need no task of
their own); each watcher compares the versions with what its session last heard and
sends one ``notifications/<list>/list_changed`` per list that moved. A burst of changes
while a watcher is busy sending costs one notification per list, not one per change.

Where the notification goes is the core's business: a legacy session gets it directly;
for modern clients, ``Connection.send_notification`` routes it to each
``subscriptions/listen`` stream whose filter asked for it, and drops it when none did.
``notifications/resources/updated`` is the exception on our side: a legacy session only
gets it for URIs it subscribed to with ``resources/subscribe``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, final

import attrs
import trio

from mcp_sansio import Era, LocalProtocolError

from ._errors import SessionClosed
from ._registry import ListKind
from ._session import Session
from ._util import SessionHook

__all__ = ["SessionTracker"]


@attrs.define(slots=True, eq=False)
class Tracked:
    """What the server remembers about one live session."""

    seen: dict[ListKind, int]
    """The list versions last announced to it."""
    uris: set[str] = attrs.field(factory=set)
    """Legacy: the URIs it subscribed to with ``resources/subscribe``."""


async def _send(session: Session, method: str, params: dict[str, Any] | None) -> None:
    # A legacy session not initialized yet has nobody to tell (the client lists
    # afresh once ready); a session that closed meanwhile has nobody either.
    with suppress(SessionClosed, LocalProtocolError):
        await session.notify(method, params)


@final
class SessionTracker:
    """The sessions a server serves, and their notifications.

    Args:
        versions: the registry's list versions (read, never written, except by
            :meth:`announce`).
    """

    def __init__(self, versions: dict[ListKind, int]) -> None:
        self._versions = versions
        self._sessions: weakref.WeakKeyDictionary[Session, Tracked] = weakref.WeakKeyDictionary()
        self._changed = trio.Event()

    @property
    def sessions(self) -> list[Session]:
        """The sessions tracked now."""
        return list(self._sessions)

    def track(self, session: object) -> Tracked | None:
        """Start tracking ``session`` (if it is a :class:`Session`); idempotent."""
        if not isinstance(session, Session):
            return None
        tracked = self._sessions.get(session)
        if tracked is None:
            tracked = self._sessions[session] = Tracked(seen=dict(self._versions))
        return tracked

    def wake(self, _kind: ListKind | None = None) -> None:
        """A list changed: wake every watcher. Call from the Trio thread."""
        event, self._changed = self._changed, trio.Event()
        event.set()

    async def watch(self, session: Session) -> None:
        """Announce list changes to ``session`` until cancelled; then forget it."""
        tracked = self.track(session)
        assert tracked is not None
        try:
            while not session.closed:
                event = self._changed
                for kind, version in self._versions.items():
                    if tracked.seen[kind] != version:
                        tracked.seen[kind] = version
                        await _send(session, f"notifications/{kind}/list_changed", None)
                await event.wait()
        finally:
            self._sessions.pop(session, None)

    def hook(self, on_session: SessionHook | None) -> SessionHook:
        """An ``on_session`` hook that watches each session, beside ``on_session``."""
        if on_session is None:
            return self.watch
        user_hook = on_session

        async def both(session: Session) -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(user_hook, session)
                await self.watch(session)  # until the session's hooks are cancelled

        return both

    async def announce(self, kind: ListKind) -> None:
        """Count a change of ``kind`` and tell every session now (not via the watchers,
        which are told it is done)."""
        self._versions[kind] += 1
        for tracked in self._sessions.values():
            tracked.seen[kind] = self._versions[kind]
        await self.broadcast(f"notifications/{kind}/list_changed", None)

    async def broadcast(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        wanted: Callable[[Tracked], bool] | None = None,
    ) -> None:
        """Send a notification to every open session (legacy ones only if ``wanted``
        says so), concurrently, so that one slow peer does not hold up the others."""
        body = None if params is None else dict(params)
        async with trio.open_nursery() as nursery:
            for session, tracked in list(self._sessions.items()):
                if session.closed:
                    continue
                legacy = session.connection.era is Era.LEGACY
                if legacy and wanted is not None and not wanted(tracked):
                    continue
                nursery.start_soon(_send, session, method, body)

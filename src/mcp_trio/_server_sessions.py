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

Streamable HTTP has no :class:`Session` per client: one ``HttpServer`` holds every
legacy session and modern request. A running ``serve_http`` is *attached* for as long
as it serves (:meth:`SessionTracker.serving_http`), with one watcher of its own that
announces list changes through ``HttpServer.send_notification`` (every ready legacy
session, on its GET stream, and every listen stream whose filter asks). Its legacy
sessions' subscriptions are kept by ``Mcp-Session-Id`` and dropped when the session
ends (the endpoint reports each end), so that table is bounded by the HTTP server's
``max_sessions``; resource updates go to those sessions one by one.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, final

import attrs
import trio

from mcp_sansio import Era, LocalProtocolError
from mcp_sansio._tasks import TASKS_NOTIFICATION

from ._errors import SessionClosed
from ._handlers import RequestContext
from ._registry import ListKind
from ._session import Session
from ._util import SessionHook

if TYPE_CHECKING:
    from ._http_endpoint import Endpoint

__all__ = ["SessionTracker"]

_NOTIFY_TIMEOUT: Final = 1.0
"""Seconds a notification to all sessions (a change, a ``notifications/tasks``) waits for
one session's turn to write (see :meth:`SessionTracker.broadcast` and
:meth:`SessionTracker.send_task_status`)."""


@attrs.define(slots=True, eq=False)
class Tracked:
    """What the server remembers about one live session."""

    seen: dict[ListKind, int]
    """The list versions last announced to it."""
    uris: set[str] = attrs.field(factory=set)
    """Legacy: the URIs it subscribed to with ``resources/subscribe``."""


@attrs.define(slots=True, eq=False)
class HttpTracked:
    """What the server remembers about one running ``serve_http``."""

    endpoint: Endpoint
    """Its task side: broadcasts, sends to one session, reports session ends."""
    seen: dict[ListKind, int]
    """The list versions last announced through it."""
    uris: dict[str, set[str]] = attrs.field(factory=dict)
    """Legacy: the URIs each live session (by ``Mcp-Session-Id``) subscribed to."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    """Its watcher's scope, cancelled when serving ends."""


async def _send(session: Session, method: str, params: dict[str, Any] | None) -> None:
    # A legacy session not initialized yet has nobody to tell (the client lists
    # afresh once ready); a session that closed meanwhile has nobody either.
    with suppress(SessionClosed, LocalProtocolError):
        await session.notify(method, params)


async def _send_bounded(session: Session, method: str, params: dict[str, Any] | None) -> None:
    # A session slow to take its turn does not hold up the others' next notification:
    # past the bound the message stays queued in its session, which writes it once the
    # writes ahead of it are done (Session.notify); only a write already under way runs
    # to its own bound.
    with trio.move_on_after(_NOTIFY_TIMEOUT):
        await _send(session, method, params)


def session_of(ctx: object) -> Session | None:
    """The :class:`Session` a request context's request came on: a
    :class:`RequestContext`'s (stdio, WebSocket, in memory); ``None`` for the HTTP
    binding's, whose requests come on no ``Session`` object."""
    return ctx.session if isinstance(ctx, RequestContext) else None


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
        self._http: dict[Endpoint, HttpTracked] = {}
        self._changed = trio.Event()

    @property
    def sessions(self) -> list[Session]:
        """The sessions tracked now."""
        return list(self._sessions)

    def track(self, session: Session | None) -> Tracked | None:
        """Start tracking ``session`` (nothing for ``None``); idempotent."""
        if session is None:
            return None
        tracked = self._sessions.get(session)
        if tracked is None:
            tracked = self._sessions[session] = Tracked(seen=dict(self._versions))
        return tracked

    def subscriptions_of(self, ctx: object, *, create: bool) -> set[str] | None:
        """The URIs the legacy session of a request context subscribed to: a tracked
        :class:`Session`'s, or over HTTP the live session (``ctx.session_id``) of a
        ``serve_http`` attached here.

        Returns:
            ``None`` when there is no such session, or (unless ``create``) it has no
            subscription yet.
        """
        tracked = self.track(session_of(ctx))
        if tracked is not None:
            return tracked.uris
        session_id = getattr(ctx, "session_id", None)
        connection = getattr(ctx, "connection", None)
        if session_id is None or connection is None:
            return None
        for served in self._http.values():
            # Only a session still open: one that ended has already been forgotten.
            if served.endpoint.http.session_connection(session_id) is connection:
                uris = served.uris.get(session_id)
                if uris is None and create:
                    uris = served.uris[session_id] = set()
                return uris
        return None

    @contextmanager
    def serving_http(self) -> Iterator[Callable[[Endpoint], None]]:
        """Track a ``serve_http`` for the ``with`` block.

        Yields:
            ``attach(endpoint)``, to call with the server's endpoint once it runs (its
            handler nursery must be set): from then on list changes are announced
            through it and its legacy sessions' subscriptions are kept. On exit its
            watcher is cancelled and everything about it forgotten.
        """
        attached: list[HttpTracked] = []

        def attach(endpoint: Endpoint) -> None:
            served = HttpTracked(endpoint=endpoint, seen=dict(self._versions))

            def forget(session_id: str) -> None:
                served.uris.pop(session_id, None)

            endpoint.on_session_closed = forget
            self._http[endpoint] = served
            attached.append(served)
            assert endpoint.nursery is not None
            endpoint.nursery.start_soon(self._watch_http, served, name="mcp http list changes")

        try:
            yield attach
        finally:
            for served in attached:
                served.scope.cancel()
                served.endpoint.on_session_closed = None
                served.uris.clear()
                self._http.pop(served.endpoint, None)

    async def _watch_http(self, served: HttpTracked) -> None:
        """:meth:`watch` for a whole HTTP server, until its scope is cancelled."""
        with served.scope:
            while True:
                event = self._changed
                for kind in self._due(served.seen):
                    served.endpoint.send_notification(f"notifications/{kind}/list_changed")
                await event.wait()

    def _due(self, seen: dict[ListKind, int]) -> Iterator[ListKind]:
        """The lists that changed since ``seen``, each marked seen as it is yielded (so a
        change :meth:`announce` sends meanwhile is not sent twice)."""
        for kind, version in self._versions.items():
            if seen[kind] != version:
                seen[kind] = version
                yield kind

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
                for kind in self._due(tracked.seen):
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
        which are told it is done). A checkpoint, as :meth:`broadcast` is."""
        await trio.lowlevel.checkpoint_if_cancelled()  # (before the count: see broadcast)
        self._versions[kind] += 1
        for tracked in self._sessions.values():
            tracked.seen[kind] = self._versions[kind]
        for served in self._http.values():
            served.seen[kind] = self._versions[kind]
        await self._broadcast(f"notifications/{kind}/list_changed", None, subscribed=None)

    async def send_task_status(self, owner: str | None, params: dict[str, Any]) -> int:
        """Send a ``notifications/tasks`` to the modern listen streams of ``owner`` (the
        task's principal subject, ``None`` when unauthenticated) that asked for the task;
        never to a legacy session (the extension is modern-only) or another principal.
        Sessions get it concurrently, each waiting at most ``_NOTIFY_TIMEOUT`` for its
        turn to write, so that one slow peer does not stall the delivery of the rest
        (past it the message stays queued, and the session writes it once it can).
        Returns how many HTTP streams and sessions it went to. A checkpoint, as
        :meth:`broadcast` is."""
        await trio.lowlevel.checkpoint_if_cancelled()  # (see broadcast)
        sent = 0
        for served in list(self._http.values()):
            sent += served.endpoint.send_task_status(params, principal=owner)
        async with trio.open_nursery() as nursery:
            for session in list(self._sessions):
                conn = session.connection
                # (A dual-era server's channel has no era until one is settled: any
                # but a legacy session may carry modern listen streams.) A session
                # none of whose streams names the task is skipped: no task, no send.
                if (
                    not session.closed
                    and conn.era is not Era.LEGACY
                    and conn.principal == owner
                    and conn.listens_for(TASKS_NOTIFICATION, params)
                ):
                    nursery.start_soon(_send_bounded, session, TASKS_NOTIFICATION, params)
                    sent += 1
        return sent

    async def broadcast(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        subscribed: str | None = None,
    ) -> None:
        """Send a notification to every open session, concurrently, so that one slow
        peer does not hold up the others, and through every attached HTTP server (which
        does not block). Each session's send is bounded (``_NOTIFY_TIMEOUT``), as
        :meth:`send_task_status`'s: a peer that stops reading held up the caller (a tool
        handler, say) until its session's ``write_timeout`` (30 s); past the bound the
        message stays queued in its session, written once the writes ahead of it are.

        A checkpoint, as a Trio async function should be: a loop of updates with no
        other await (a publisher) can be cancelled, which it could not when nothing had
        to wait (no session, or sends that went out at once: the sends' own schedule
        point is shielded, so that a message sent is never reported cancelled). Hence
        the cancel point comes first, before anything is sent; the nursery's exit is
        the schedule point (shielded, after the sends) even when it has no child.

        Args:
            subscribed: legacy sessions get it only if they subscribed to this URI
                (``notifications/resources/updated``).
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._broadcast(method, params, subscribed=subscribed)

    async def _broadcast(
        self, method: str, params: Mapping[str, Any] | None, *, subscribed: str | None
    ) -> None:
        """:meth:`broadcast`, its cancel point passed (:meth:`announce`'s own comes
        before its count: the deadline may pass in between, and a change counted as
        announced must be sent)."""
        body = None if params is None else dict(params)
        for served in list(self._http.values()):
            sessions = None
            if subscribed is not None:
                sessions = [sid for sid, uris in served.uris.items() if subscribed in uris]
            served.endpoint.send_notification(method, body, sessions=sessions)
        async with trio.open_nursery() as nursery:
            for session, tracked in list(self._sessions.items()):
                if session.closed:
                    continue
                legacy = session.connection.era is Era.LEGACY
                if legacy and subscribed is not None and subscribed not in tracked.uris:
                    continue
                nursery.start_soon(_send_bounded, session, method, body)

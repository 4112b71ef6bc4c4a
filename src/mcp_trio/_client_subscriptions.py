"""Change notifications in both eras behind one ``async with client.subscribe(...)``.

Theory of operation
-------------------
*Legacy* servers send ``notifications/*/list_changed`` to the session whenever they
like, and ``notifications/resources/updated`` for URIs the client subscribed to with
``resources/subscribe``. Every open :class:`Subscription` sees the notifications its
filter asks for; ``resources/subscribe`` and ``resources/unsubscribe`` are reference
counted across overlapping subscriptions, so one URI is subscribed once.

*Modern* servers (``basic/patterns/subscriptions.mdx``) deliver them on a
``subscriptions/listen`` request that stays open; each notification carries the
listen request's id in ``_meta`` (``NotificationContext.subscription_id``), the first
one being ``notifications/subscriptions/acknowledged``. A subscription learns the id
of its listen request as the request goes out (``Session.request(on_sent=)``, before
anything is written), so an acknowledgment (or cancellation) is matched to the listen
being opened by that id alone: one for a listen given up on (timed out, or its
``subscribe()`` cancelled), handled late in a task of its own, claims nothing. So
listens are opened concurrently, each by an *opening* of its own (``_Opening``: the
hub's ``_opening``, by request id, from the request going out until it is
acknowledged or given up on), and a server that ignores one holds up no other
``subscribe()``. Notifications run in their own handler tasks, whose order trio does
not promise, so one that overtakes its acknowledgment is kept by its opening (at most
:data:`_MAX_EARLY` each) until the acknowledgment claims it; any other with an id we
do not know is dropped. (Openings are as many as the ``subscribe()`` calls under
way, the caller's own concurrency; nothing else needs them one at a time, as a lock
once did when an acknowledgment could only be matched to "the listen being
opened".) Leaving the block cancels the listen request
(``notifications/cancelled``); a server that ends it (a result, or a cancellation)
ends the iteration -- or, before acknowledging it, fails ``subscribe()`` with
``RemoteProtocolError`` (the acknowledgment must come first).

The wait for the acknowledgment is bounded even with no request timeout:
``SessionConfig.listen_ack_timeout``, and the client's ``timeout`` too, if it has one;
the listen request itself has no timeout (it stays open). Past either bound the listen
is given up on: ``subscribe()`` fails with ``RequestTimeout`` and the request is
cancelled. Both count from when the listen is begun. ``listen_ack_timeout`` leaves out
the time the transport holds the request back to obtain a token
(``Session.request(on_held=)``: the HTTP client's OAuth refresh, or a re-authorization
that waits for the user, each bounded by OAuth's own timeouts): its clock stops then,
and counts the whole bound afresh from when the token is there and the request goes
out. A slow authorization is not taken for a server that does not acknowledge;
everything else before the write (a connection, a free slot of the pool) counts. The
caller's ``timeout`` counts the token's time as it does for any request: a caller who
gives ``subscribe()`` 5 seconds gets its answer (or ``RequestTimeout``) within 5
seconds, however long a login would take.

A server ends a listen that would outlive the token it was opened with by answering it
with the error ``401`` ``invalid_token`` (``mcp_sansio.http.token_expired``). Then the
same filter is listened for again, transparently (the new request carries the
transport's current token: the HTTP client's OAuth refreshes or re-authorizes on its
way), by a new opening with the same bounds (both counted from when it begins), held
the same way. Bounded: one new listen per expiry, only after an acknowledged one, and
none when a listen opened again for an expiry expires again within
:data:`_MIN_RELISTEN_LIFETIME` (a server handing out dead tokens would make a loop of
it); any other end, or a failed new listen, ends the iteration as before (past a
bound, with the expiry). The bound is a rate, not a count: a server whose tokens each
outlive :data:`_MIN_RELISTEN_LIFETIME` gets a new listen about that often, as long as
the block lasts. Notifications the server sent in between are not delivered. Each
waiter keeps the acknowledgment event of its own listen: an acknowledgment and an
expiry handled in one scheduling round replace ``_acknowledged`` (for the next listen,
whose opening is another) before the waiter wakes.

Legacy: leaving the block sends the ``resources/unsubscribe`` courtesies concurrently,
shielded from the caller's cancellation but bounded by one deadline for them all.

Notifications are hints ("something changed, fetch again"), so each subscription keeps
at most one pending notification per kind (and per URI): a burst of identical ones
costs one slot. The buffer is therefore bounded by the filter itself.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, Final, final

import trio

from mcp_sansio import LocalProtocolError, NotificationReceived, RemoteProtocolError, RequestId
from mcp_sansio._tasks import TASKS_NOTIFICATION

from ._client_common import (
    checked_strings,
    legacy_honored,
    listen_params,
    queue_unread,
    wanted,
)
from ._errors import McpError, RequestTimeout, SessionClosed
from ._handlers import Handlers, NotificationContext
from ._session import Session

__all__ = ["Subscription", "SubscriptionHub"]

logger = logging.getLogger("mcp_trio")

CHANGE_METHODS: Final = (
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    TASKS_NOTIFICATION,
)
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
_MAX_EARLY: Final = 64
"""Modern: notifications of a listen being opened that overtook its acknowledgment,
kept (by its opening) until it comes; the rest are dropped."""
_NOT_ACKNOWLEDGED: Final = "the server ended subscriptions/listen before acknowledging it"
_TOKEN_EXPIRED: Final = 401
"""``mcp_sansio.http.TOKEN_EXPIRED_CODE`` (not imported: a stdio client loads no HTTP)."""
_MIN_RELISTEN_LIFETIME: Final = 1.0
"""Seconds a listen opened again after its token expired must last for its own expiry
to be followed by another new listen."""
_UNSUBSCRIBE_TIMEOUT: Final = 2.0
"""Legacy: seconds the courtesy ``resources/unsubscribe`` requests may take, all of them
together, on the way out of a ``subscribe()`` block."""


@final
class Subscription:
    """A stream of change notifications; iterate it with ``async for``.

    Each item is a :class:`mcp_sansio.NotificationReceived`: ``method`` is one of
    ``notifications/tools/list_changed``, ``notifications/prompts/list_changed``,
    ``notifications/resources/list_changed`` or ``notifications/resources/updated``
    (then ``params["uri"]`` names the resource), or, modern era with the tasks
    extension, ``notifications/tasks`` (``params`` is the task's full state). Identical
    notifications not yet read are merged into one (for a task: the latest state).

    Iteration ends when the server ends the subscription (modern era). It raises
    :class:`~mcp_trio.SessionClosed` when the session closes, and, modern era, what
    ended the ``subscriptions/listen`` request otherwise: :class:`~mcp_trio.McpError`
    when it failed (refused, or over HTTP a stream cut short: -32603),
    :class:`~mcp_sansio.RemoteProtocolError` when the server answered it without ever
    acknowledging it. ``end_reason`` says why it ended, either way. A listen the server
    ends because the token it was opened with expired (``401 invalid_token``, over HTTP)
    is opened again with the same filter, transparently: iteration goes on
    (:attr:`subscription_id` changes; notifications sent in between are missed).
    """

    def __init__(
        self,
        *,
        tools: bool,
        prompts: bool,
        resource_list: bool,
        resources: Iterable[str],
        tasks: Iterable[str] = (),
    ) -> None:
        self.tools = tools
        """Whether ``notifications/tools/list_changed`` was asked for."""
        self.prompts = prompts
        """Whether ``notifications/prompts/list_changed`` was asked for."""
        self.resource_list = resource_list
        """Whether ``notifications/resources/list_changed`` was asked for."""
        self.resources: tuple[str, ...] = tuple(
            dict.fromkeys(checked_strings(resources, "the resource URI"))
        )
        """The URIs whose ``notifications/resources/updated`` were asked for."""
        self.tasks: tuple[str, ...] = tuple(dict.fromkeys(checked_strings(tasks, "the task id")))
        """The task ids whose ``notifications/tasks`` were asked for."""
        self.honored: dict[str, Any] = {}
        """What the server agreed to deliver, as a ``subscriptions/listen`` filter
        (``{"toolsListChanged": true, "resourceSubscriptions": [...]}``): the
        acknowledgment's (modern), or what its capabilities promise (legacy)."""
        self.subscription_id: RequestId | None = None
        """Modern era: the id of the ``subscriptions/listen`` request."""
        self.end_reason: str | None = None
        """Why the stream ended, once it has."""
        self._pending: OrderedDict[tuple[str, str | None], NotificationReceived] = OrderedDict()
        self._wakeup = trio.Event()
        self._ended = False
        self._failure: BaseException | None = None
        self._acknowledged = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._relistened_at: float | None = None  # when a listen was last opened again

    def wants(self, method: str, params: dict[str, Any] | None) -> bool:
        """Whether a notification matches this filter (a legacy session's are
        session-wide; a modern server's are tagged, but may carry what was not asked)."""
        return wanted(
            method,
            params,
            tools=self.tools,
            prompts=self.prompts,
            resource_list=self.resource_list,
            resources=self.resources,
            tasks=self.tasks,
        )

    @property
    def ended(self) -> bool:
        """Whether the stream has ended (pending notifications may still be read)."""
        return self._ended

    def receive_nowait(self) -> NotificationReceived:
        """The next notification, if one is pending.

        Raises:
            trio.WouldBlock: none is pending and the stream goes on.
            trio.EndOfChannel: the stream ended and everything was read.
            SessionClosed: the session closed.
            McpError, RemoteProtocolError: the stream failed (see the class docs).
        """
        if self._pending:
            return self._pending.popitem(last=False)[1]
        if self._failure is not None:
            raise self._failure.with_traceback(None)
        if self._ended:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def receive(self) -> NotificationReceived:
        """Wait for the next notification.

        Raises:
            trio.EndOfChannel: the stream ended and everything was read.
            SessionClosed: the session closed.
            McpError, RemoteProtocolError: the stream failed (see the class docs).
        """
        while True:
            try:
                return self.receive_nowait()
            except trio.WouldBlock:
                await self._wakeup.wait()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> NotificationReceived:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    # ------------------------------------------------------------------ internal

    def _put(self, note: NotificationReceived) -> None:
        """Queue ``note`` if it is one this subscription asked for (a modern server may
        tag anything with its id; only what was asked bounds the queue)."""
        if self._ended or not self.wants(note.method, note.params):
            return
        queue_unread(self._pending, note)
        self._wake()

    def _end(self, reason: str, failure: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self.end_reason = reason
        self._failure = failure
        self._acknowledged.set()
        if self._scope is not None:
            self._scope.cancel()
        self._wake()

    def _wake(self) -> None:
        self._wakeup.set()
        self._wakeup = trio.Event()


@final
class _Opening:
    """One listen request being opened (see :meth:`SubscriptionHub._claim`): from its
    claim until it is acknowledged, or given up on."""

    __slots__ = ("ack", "active", "clock", "deadline", "early", "holds", "rid", "sub", "timeout")

    def __init__(self, sub: Subscription, timeout: float, ack: float) -> None:
        self.sub: Final = sub
        self.timeout: Final = timeout  # the caller's: counts from the claim, held or not
        self.ack: Final = ack  # listen_ack_timeout: stops while the request is held
        self.deadline = math.inf  # the caller's, from the claim on
        self.rid: RequestId | None = None  # the request's id, once it is sent
        self.active = True  # the claim goes on
        self.early: list[NotificationReceived] = []  # (see _MAX_EARLY)
        self.holds = 0  # the transport holds the request back for a token
        self.clock: trio.CancelScope | None = None  # the wait for the acknowledgment

    def held(self, rid: RequestId, held: bool) -> None:
        """``Session.request(on_held=)``: the transport starts or stops holding the
        request back to obtain a token; ``ack`` stops meanwhile, and counts afresh
        from when it has one (the request then goes out). ``timeout`` goes on, as it
        does for any request."""
        if rid != self.rid:
            return  # (an earlier round's, if any)
        self.holds = self.holds + 1 if held else max(self.holds - 1, 0)
        clock = self.clock
        if clock is not None:
            ack = math.inf if self.holds else trio.current_time() + self.ack
            clock.deadline = min(self.deadline, ack)

    def waited(self) -> float:
        """Seconds of the bound that ran out (the clock having fired): the caller's
        ``timeout`` if its deadline is past, else ``ack``."""
        return self.timeout if trio.current_time() >= self.deadline else self.ack


_Request = Callable[[str, dict[str, Any]], Awaitable[object]]
"""``Client.request``: send one request."""


@final
class SubscriptionHub:
    """Every subscription of one client, and the notification handlers that feed them."""

    def __init__(
        self,
        *,
        on_tools_changed: Callable[[], None] | None = None,
        on_notification: Callable[[NotificationReceived], None] | None = None,
    ) -> None:
        self._on_tools_changed = on_tools_changed
        self._on_notification = on_notification  # (legacy ones: the client's too)
        self._legacy: set[Subscription] = set()
        self._uri_refs: dict[str, int] = {}
        self._uri_explicit: set[str] = set()  # Client.subscribe_resource()'s: one count each
        self._by_id: dict[RequestId, Subscription] = {}
        self._opening: dict[RequestId, _Opening] = {}  # sent, claimed, not acknowledged

    def install(self, handlers: Handlers) -> None:
        """Register the notification handlers on the client's table."""
        for method in CHANGE_METHODS:
            handlers.set_notification_handler(method, self._on_change)
        handlers.set_notification_handler(_ACKNOWLEDGED, self._on_acknowledged)
        handlers.set_notification_handler("notifications/cancelled", self._on_cancelled)

    def close_all(self, failure: SessionClosed) -> None:
        """The session closed: fail every open subscription."""
        for sub in [*self._legacy, *self._by_id.values()]:
            sub._end(failure.reason, failure)

    # ------------------------------------------------------------------ handlers

    async def _on_change(self, ctx: NotificationContext) -> None:
        if ctx.method == "notifications/tools/list_changed" and self._on_tools_changed:
            self._on_tools_changed()
        note = NotificationReceived(method=ctx.method, params=ctx.params)
        sid = ctx.subscription_id
        if sid is None:
            for legacy in self._legacy:
                legacy._put(note)
            if self._on_notification is not None:
                self._on_notification(note)
            return
        sub = self._by_id.get(sid)
        if sub is not None:
            sub._put(note)
            return
        opening = self._claimant(sid)
        if opening is not None and len(opening.early) < _MAX_EARLY:
            opening.early.append(note)  # (overtook its acknowledgment)

    def _claimant(self, sid: RequestId) -> _Opening | None:
        """The opening whose listen request has the id ``sid``, if it is claiming."""
        opening = self._opening.get(sid)
        if opening is None or opening.sub._ended:  # (left, its claim not let go yet)
            return None
        return opening

    def _sent(self, opening: _Opening, rid: RequestId) -> None:
        """``Session.request(on_sent=)``: the listen request of ``opening`` goes out
        with the id ``rid`` (an acknowledgment naming it may claim it from now on)."""
        if opening.rid is not None:
            self._opening.pop(opening.rid, None)  # (an earlier round's)
        opening.rid = rid
        opening.holds = 0
        if opening.active:
            self._opening[rid] = opening

    async def _on_acknowledged(self, ctx: NotificationContext) -> None:
        sid = ctx.subscription_id
        opening = self._claimant(sid) if sid is not None else None
        if sid is None or opening is None:
            logger.debug("unexpected subscription acknowledgment for %r", sid)
            return
        del self._opening[sid]
        sub = opening.sub
        honored = (ctx.params or {}).get("notifications")
        sub.subscription_id = sid
        sub.honored = dict(honored) if isinstance(honored, dict) else {}
        self._by_id[sid] = sub
        early, opening.early = opening.early, []
        for note in early:
            sub._put(note)
        sub._acknowledged.set()

    async def _on_cancelled(self, ctx: NotificationContext) -> None:
        sid = ctx.subscription_id
        if sid is None:
            return
        reason = (ctx.params or {}).get("reason")
        why = reason if isinstance(reason, str) and reason else "no reason given"
        sub = self._by_id.pop(sid, None)
        if sub is not None:
            sub._end(f"the server cancelled the subscription: {why}")
            return
        opening = self._claimant(sid)
        if opening is not None:
            # The core has dropped the listen request: nothing else will ever end it.
            opening.early.clear()
            message = f"the server cancelled subscriptions/listen before acknowledging it: {why}"
            opening.sub._end(message, RemoteProtocolError(message))

    # ------------------------------------------------------------------ legacy, by hand

    async def subscribe_resource(self, request: _Request, uri: str) -> None:
        """:meth:`Client.subscribe_resource`: ``resources/subscribe``, unless ``uri``
        is held already (by a call before or a ``subscribe()`` block); counted with
        the blocks, so that leaving one does not unsubscribe it."""
        if not self._uri_refs.get(uri):
            await request("resources/subscribe", {"uri": uri})
        if uri not in self._uri_explicit:  # (else held by an earlier or concurrent call)
            self._uri_explicit.add(uri)
            self._uri_refs[uri] = self._uri_refs.get(uri, 0) + 1

    async def unsubscribe_resource(self, request: _Request, uri: str) -> None:
        """:meth:`Client.unsubscribe_resource`: let go of ``uri``; ``resources/unsubscribe``
        unless a ``subscribe()`` block still holds it (its exit sends it then)."""
        if uri in self._uri_explicit:
            self._uri_explicit.discard(uri)
            self._release(uri)
        if not self._uri_refs.get(uri):
            await request("resources/unsubscribe", {"uri": uri})

    def _release(self, uri: str) -> bool:
        """Count one holder of ``uri`` less; whether it was the last."""
        self._uri_refs[uri] -= 1
        if self._uri_refs[uri]:
            return False
        del self._uri_refs[uri]
        return True

    # ------------------------------------------------------------------ opening

    @asynccontextmanager
    async def open(
        self,
        session: Session,
        nursery: trio.Nursery,
        *,
        modern: bool,
        tools: bool,
        prompts: bool,
        resource_list: bool,
        resources: Iterable[str],
        timeout: float | None,
        tasks: Iterable[str] = (),
    ) -> AsyncGenerator[Subscription]:
        """Open a subscription for the ``async with`` block (see :meth:`Client.subscribe`)."""
        sub = Subscription(
            tools=tools,
            prompts=prompts,
            resource_list=resource_list,
            resources=resources,
            tasks=tasks,
        )
        if sub.tasks and not modern:
            raise LocalProtocolError("task notifications are modern-era only")
        opened = self._open_modern if modern else self._open_legacy
        async with opened(session, nursery, sub, timeout):
            yield sub

    @asynccontextmanager
    async def _open_legacy(
        self, session: Session, _nursery: trio.Nursery, sub: Subscription, timeout: float | None
    ) -> AsyncGenerator[None]:

        sub.honored = legacy_honored(
            session.connection.peer_capabilities,
            tools=sub.tools,
            prompts=sub.prompts,
            resource_list=sub.resource_list,
            resources=sub.resources,
        )
        can_subscribe = "resourceSubscriptions" in sub.honored
        subscribed: list[str] = []
        self._legacy.add(sub)
        try:
            for uri in sub.resources if can_subscribe else ():
                if not self._uri_refs.get(uri):
                    await session.request("resources/subscribe", {"uri": uri}, timeout=timeout)
                self._uri_refs[uri] = self._uri_refs.get(uri, 0) + 1
                subscribed.append(uri)
            yield
        finally:
            self._legacy.discard(sub)
            sub._end("the subscription was closed")
            unused: list[str] = []
            for uri in subscribed:
                if self._release(uri):
                    unused.append(uri)
            if unused:
                await self._unsubscribe(session, unused)

    async def _unsubscribe(self, session: Session, uris: list[str]) -> None:
        """Send ``resources/unsubscribe`` for ``uris``, concurrently: shielded (the
        caller may be leaving because it was cancelled) and bounded, all of them
        together, by :data:`_UNSUBSCRIBE_TIMEOUT`. Failures are ignored: it is a
        courtesy, and a server that does not answer only keeps sending updates."""

        async def unsubscribe(uri: str) -> None:
            with suppress(McpError, SessionClosed, RequestTimeout, LocalProtocolError):
                await session.request("resources/unsubscribe", {"uri": uri})

        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + _UNSUBSCRIBE_TIMEOUT
            async with trio.open_nursery() as nursery:
                for uri in uris:
                    nursery.start_soon(unsubscribe, uri, name="mcp resources/unsubscribe")

    @asynccontextmanager
    async def _open_modern(
        self, session: Session, nursery: trio.Nursery, sub: Subscription, timeout: float | None
    ) -> AsyncGenerator[None]:
        params = listen_params(
            tools=sub.tools,
            prompts=sub.prompts,
            resource_list=sub.resource_list,
            resources=sub.resources,
            tasks=sub.tasks,
        )
        ack = session.config.listen_ack_timeout
        bounds = (math.inf if timeout is None else timeout, math.inf if ack is None else ack)
        try:
            await self._start_listen(session, nursery, params, sub, *bounds)
            # Not ``subscription_id is None``: the listen may have been acknowledged and
            # then have expired, a new one already claiming (the id is None again).
            if sub._ended and sub._failure is not None:  # failed (before acknowledging)
                raise sub._failure.with_traceback(None)
            yield
        finally:
            sub._end("the subscription was closed")
            if sub.subscription_id is not None:
                self._by_id.pop(sub.subscription_id, None)

    async def _start_listen(
        self,
        session: Session,
        nursery: trio.Nursery,
        params: dict[str, Any],
        sub: Subscription,
        timeout: float,
        ack: float,
    ) -> None:
        """Send ``subscriptions/listen`` for ``sub`` (from a task of ``nursery``) and
        wait until it is acknowledged or ends; past ``timeout`` or ``ack`` seconds,
        end ``sub`` with :class:`RequestTimeout` (see :meth:`_claim`)."""
        sub._scope = trio.CancelScope()

        def give_up(rid: RequestId | None, bound: float) -> None:
            waited = f"the server never acknowledged it (waited {bound:g} s)"
            error = RequestTimeout("subscriptions/listen", rid, detail=waited)
            sub._end(str(error), error)

        listen = partial(self._listen, session, params, sub)

        def send(opening: _Opening) -> None:
            nursery.start_soon(listen, opening, name="mcp listen")

        await self._claim(sub, timeout, ack, send, give_up)

    async def _claim(
        self,
        sub: Subscription,
        timeout: float,
        ack: float,
        send: Callable[[_Opening], object],
        give_up: Callable[[RequestId | None, float], None],
    ) -> None:
        """The one way a listen is opened (see the module docs): have ``send(opening)``
        start the listen request, and wait until it is acknowledged or ends. Past
        ``timeout`` seconds, or ``ack`` seconds not counting while the transport holds
        the request back for a token (see :meth:`_Opening.held`), give up on it:
        ``give_up(id, bound)`` (``id`` ``None`` if the request has not gone out;
        ``bound`` the seconds that ran out) ends ``sub``, which cancels the request. Given
        up on any way (the caller cancelled, or left the block), the request's id names
        no opening any more: a late acknowledgment of it claims nothing."""
        # This listen's event: an acknowledgment and an expiry handled in one
        # scheduling round make ``_listen`` replace ``sub._acknowledged`` (for the next
        # listen, with an opening of its own) before this wakes.
        acked = sub._acknowledged
        opening = _Opening(sub, timeout, ack)
        now = trio.current_time()
        opening.deadline = now + timeout
        try:
            send(opening)  # (starts a task: nothing is held yet)
            with trio.CancelScope(deadline=min(opening.deadline, now + ack)) as clock:
                opening.clock = clock
                await acked.wait()
            if not acked.is_set():
                give_up(opening.rid, opening.waited())
        finally:
            opening.active = False
            opening.clock = None
            if opening.rid is not None and self._opening.get(opening.rid) is opening:
                del self._opening[opening.rid]
            opening.early.clear()  # (claimed, or of a listen given up on)

    def _may_relisten(self, sub: Subscription, exc: McpError) -> bool:
        """Whether ``exc``, which ended ``sub``'s listen, is an expired token that a new
        listen may recover from (see the module docs)."""
        data = exc.error.data
        if (
            exc.code != _TOKEN_EXPIRED
            or not isinstance(data, dict)
            or data.get("error") != "invalid_token"
            or sub.subscription_id is None  # (never acknowledged: no loop of refusals)
            or sub._ended
        ):
            return False
        last = sub._relistened_at
        return last is None or trio.current_time() - last >= _MIN_RELISTEN_LIFETIME

    async def _claim_again(
        self,
        sub: Subscription,
        timeout: float,
        ack: float,
        expired: McpError,
        *,
        task_status: trio.TaskStatus[_Opening] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """For a new listen of ``sub`` after its token expired: :meth:`_claim`, as an
        opening does (past its bounds, end ``sub`` with ``expired``). Reports started
        with its opening, for the new listen request to go out."""

        def give_up(_rid: RequestId | None, _bound: float) -> None:
            sub._end(f"the subscription failed: {expired} (not acknowledged again)", expired)

        await self._claim(sub, timeout, ack, task_status.started, give_up)

    async def _listen(
        self,
        session: Session,
        params: dict[str, Any],
        sub: Subscription,
        opening: _Opening,
    ) -> None:
        # Everything, new listens after an expiry included, runs under ``sub._scope``:
        # ending ``sub`` (leaving the block, the session closing) cancels all of it,
        # the claim of a new listen with it.
        scope = sub._scope
        assert scope is not None
        with scope:
            async with trio.open_nursery() as claims:
                expired: McpError | None = None
                while True:
                    if expired is not None:  # a new listen, claimed as an opening is
                        logger.info("subscription: the token expired, listening again")
                        old = sub.subscription_id
                        if old is not None:
                            self._by_id.pop(old, None)
                        sub.subscription_id = None
                        sub._acknowledged = trio.Event()
                        sub._relistened_at = trio.current_time()
                        bounds = (opening.timeout, opening.ack)
                        opening = await claims.start(self._claim_again, sub, *bounds, expired)
                    if sub._ended:  # given up before this: send nothing
                        return
                    try:
                        await session.request(
                            "subscriptions/listen",
                            params,
                            timeout=math.inf,
                            on_sent=partial(self._sent, opening),
                            on_held=opening.held,
                        )
                    except McpError as exc:
                        if not self._may_relisten(sub, exc):
                            sub._end(f"the subscription failed: {exc}", exc)
                            return
                        expired = exc
                    except Exception as exc:
                        sub._end(f"the subscription failed: {exc}", exc)
                        return
                    else:
                        if sub.subscription_id is None:
                            sub._end(_NOT_ACKNOWLEDGED, RemoteProtocolError(_NOT_ACKNOWLEDGED))
                        else:
                            sub._end("the server ended the subscription")
                        return

"""The one write path of a session.

Whoever calls the core drains its output into an ordered outbox (``queue``) and then
writes up to the last message it queued (``write_through``). One task writes at a time
(the *writer*); it writes the messages queued before its own too, so messages leave in
the order the core produced them, whichever task produced them (aioquic's
``transmit()``).

Most writes need no waiting (room in the memory channel, in the pipe):
:meth:`Writer.write_nowait` sends them with the channel's ``send_nowait``, with no
cancel scope and no scheduler tick. That is safe without further care because nothing
in it yields: if no writer is active, none can start before it returns. Whatever it
cannot send goes the slow way below. With nothing queued and no writer active,
:meth:`Writer.send_nowait` hands the core's messages to the channel without queueing
them first, and queues only those the channel does not take.

The slow way. A task that finds a writer active waits for its turn, in the order of
its messages. The writer waits only for its own messages and those before them; once
they are out, it also sends whatever else is queued as long as that needs no waiting
(it *rides* along). Every waiting task returns as soon as its messages are out (it
never waits for later ones: the reader's own answer must not wait behind a handler's
notifications, or two full pipes would stop both readers), and when the writer leaves,
the waiting task with the earliest messages still queued becomes the writer. So when
a full channel drains, the messages queued behind it leave in one go and the fast path
is free again at once, instead of a lock being handed from task to task, one scheduler
tick each, while newcomers queue behind (a lock convoy).

Leftovers. A task cancelled while it waits (or while it writes, on a channel whose
writes are cancellable) leaves its messages in the outbox (but a request none of which
was written is withdrawn, see below), and the session's own bounded write of a sent
request's ``notifications/cancelled`` may give up the same way.
While another task waits, the role reaches it and those messages go out before its
own. When the writer leaves with messages queued and nobody waiting, it does not write
them itself (that could hold the reader, or a caller, behind others' writes): it asks
the session (``on_leftovers``) for a task of its own, which writes them as any writer
does (in order, each write bounded as below; a failure closes the session) and keeps
at it while any are queued. One such task at a time; none once the session is closing
(its closing cancels the task, and :meth:`Writer.abort` drops what is left). Without
it a cancellation would reach the peer only with the session's next write, and the
peer would work on the request (and an HTTP client hold its connection) until then.
The session's timer does not wait for writes at all: the cancellations of the
requests it times out are queued and left to the writer at work or to that task
(:meth:`Writer.write_later`), so a stuck write holds no timeout back.

Withdrawn messages. A request whose caller gave up before any of it was written is
better never sent: the peer never saw its id, so it needs no cancellation either, and
does no work for nobody. The session takes it back (:meth:`Writer.withdraw`) while it
is still queued and not being written (:meth:`Writer.unsent`). Its entry stays in the
outbox, emptied, so that the marks of the others keep their meaning and their order;
whoever writes skips it as if written. The fast path tests for such entries once per
call and takes the skipping loop only while one is queued.

On a channel whose sends are atomic (a memory channel), a write is cancelled like any
other wait and the message stays first in the outbox. Otherwise each single message
write is shielded from the caller's cancellation, because half a frame would corrupt a
byte stream or a WebSocket, and bounded by ``write_timeout`` instead;
:meth:`Writer.abort` (the session is closing) cancels it.

Detached writes. A shielded write in the caller's own task would hold the caller for
up to ``write_timeout`` when its own message is the one stuck half-written (a peer
that stopped reading in the middle of a large request): its ``timeout=`` and cancel
scopes would wait for it. A writer that asks for it (``write_through(detach=True)``:
the session's callers of requests, which wait for the answer next, cancellably) does
not write a message that must wait itself: it hands the writer role to the session's
*drainer* and returns, or, finding the drainer at work, returns at once. The drainer
is one task of the session's (``start_drainer``), started at the first such write and
then parked between hand-overs: no task is started per write (on a WebSocket, which
has no ``send_nowait``, that is every request). Holding the role, it writes the whole
outbox in order, each write shielded and bounded as above, whoever queued the
messages (others' too: the waiters are woken as theirs are out, and several callers'
requests need no change of writer between them); then it leaves the role as any
writer does, and parks. A caller that gives up meanwhile is gone at once: its request
still goes out whole if it was started, followed by its ``notifications/cancelled``,
and is withdrawn if it was not (below); ``write_timeout`` ends the session as before
(the drainer reports the failure). Nothing else changes hands: the messages are the
outbox's, in order. What goes at once goes as before, in the caller's task; and
without the drainer (none given, or it has ended: the session is closing) the
writer writes itself.

Room. The outbox holds messages that each have a bound, but their number is bounded
only by the session's (``max_unanswered_requests``, the handlers at work), so a peer
that stops reading could pin that many answers of any size. ``max_bytes`` bounds it in
bytes: while the outbox holds more, :attr:`Writer.full` is true and
:meth:`Writer.wait_room` waits (a task that is about to queue an answer waits there
first: the session's handlers, which then keep their slots, so the reader stops
taking requests: backpressure). The message that crosses the bound is queued whole;
``write_timeout`` still ends a peer that never reads.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import Final, final

import trio

from ._channel import MessageChannel
from ._errors import SessionClosed

__all__ = ["Writer"]

_WITHDRAWN: Final = b""
"""A withdrawn message's entry in the outbox (no message is empty: each is a JSON text)."""


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
class _Waiter:
    """A task parked in :meth:`Writer.write_through` until its messages are out.

    Attributes:
        mark: the mark its messages were queued up to.
        task: the task, parked (``wait_task_rescheduled``) as soon as it is queued.
        turn: woken to become the writer (the role is reserved for it).
        gone: cancelled: skipped when its turn would come (never woken).
    """

    __slots__ = ("gone", "mark", "task", "turn")

    def __init__(self, mark: int) -> None:
        self.mark = mark
        self.task = trio.lowlevel.current_task()
        self.turn = False
        self.gone = False

    def wake(self) -> None:
        """Reschedule the task (once: it is off the heap), unless it was cancelled."""
        if not self.gone:
            trio.lowlevel.reschedule(self.task)

    def abort(self, _: object) -> trio.lowlevel.Abort:
        # (called by trio as the task is cancelled while parked: never woken from now)
        self.gone = True
        return trio.lowlevel.Abort.SUCCEEDED


# The drainer's states (see "Detached writes").
_UNSTARTED: Final = 0  # not started yet (nothing detached so far)
_IDLE: Final = 1  # parked, waiting for the writer role
_DRAINING: Final = 2  # holds the writer role (or is started or woken to take it)
_GONE: Final = 3  # ended (the session is closing): writers write themselves


@final
class Writer:
    """An ordered outbox drained to a channel by one writer at a time.

    Args:
        channel: where messages go.
        write_timeout: seconds one message may take (``None``: no bound).
        on_leftovers: called, without waiting, when the writer leaves messages queued
            that no task waits to write (see the module docs); it starts a task that
            awaits :meth:`write_leftovers` and returns ``True``, or ``False`` if it
            cannot (the session is closing). ``None``: they wait for the next write.
        start_drainer: starts a task that awaits :meth:`drain` (and closes the
            session with the failure it returns), without waiting; ``False`` if it
            cannot (the session is closing): then the writer writes itself, as
            without it (``None``). Called at the first detached write (see the
            module docs); the task lives until the session closes.
        max_bytes: the outbox's bound in bytes (see "Room" in the module docs);
            ``None``: none.
    """

    def __init__(
        self,
        channel: MessageChannel,
        write_timeout: float | None,
        *,
        on_leftovers: Callable[[], bool] | None = None,
        start_drainer: Callable[[], bool] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self._channel = channel
        self._timeout = write_timeout
        self._on_leftovers = on_leftovers
        self._start_drainer = start_drainer
        self._drainer_state = _UNSTARTED
        self._drainer: trio.lowlevel.Task | None = None  # the drainer, while _IDLE
        self._max_bytes = math.inf if max_bytes is None else max_bytes
        self._bytes = 0  # the bytes of the messages in the outbox (not withdrawn)
        self._room: trio.Event | None = None  # set when the outbox is back under its bound
        self._rescuing = False  # a write_leftovers task is started (or running)
        self._active = False  # a writer is writing, or the role is reserved for a waiter
        self._waiters: list[tuple[int, int, _Waiter]] = []  # a heap by (mark, arrival)
        self._arrivals = 0
        self._outbox: deque[bytes] = deque()
        # Marks count messages through the outbox: those queued so far, and of them
        # those written (or withdrawn, or dropped by abort). Their difference is the
        # outbox's length; messages send_nowait hands straight over (the outbox empty,
        # every mark given out reached) need no mark, and count in neither.
        self._queued = 0
        self._written = 0
        self._withdrawn = 0  # withdrawn messages still in the outbox (emptied entries)
        self._busy = False  # the head of the outbox is being written (_write_one)
        self._scope: trio.CancelScope | None = None
        self._cap: float | None = None  # see cap()
        self._aborted = False
        self.writing = False
        """Whether :meth:`write_nowait` is on the stack: a message taken in passing
        (``MessageChannel.attach_reader``) must not re-enter it, or the message at
        the head of the outbox would go out twice."""

    @property
    def backlog(self) -> int:
        """Messages queued and not yet written (nor withdrawn)."""
        return len(self._outbox) - self._withdrawn

    @property
    def withdrawn(self) -> int:
        """Withdrawn messages whose emptied entries are still in the outbox: they wait
        behind the write in progress (or the message it could not send) and leave with
        the messages before them. Each is a reference to one shared empty bytes."""
        return self._withdrawn

    @property
    def full(self) -> bool:
        """Whether the outbox holds more than ``max_bytes`` (see :meth:`wait_room`)."""
        return self._bytes > self._max_bytes

    async def wait_room(self) -> None:
        """Wait until the outbox is no longer :attr:`full` (or the writer is aborted).
        A task about to queue a message waits here first; several that wake together
        find it full again if one of them fills it, so check :attr:`full` again
        after each wait."""
        while self.full:
            if self._room is None:
                self._room = trio.Event()
            await self._room.wait()

    def _count_out(self, size: int) -> None:
        """``size`` bytes left the outbox: wake those waiting for room if there is."""
        self._bytes -= size
        room = self._room
        if room is not None and self._bytes <= self._max_bytes:
            self._room = None
            room.set()

    def queue(self, messages: list[bytes]) -> int:
        """Append ``messages``; return the mark to pass to :meth:`write_through`."""
        if messages and not self._aborted:
            self._outbox.extend(messages)
            self._queued += len(messages)
            self._bytes += sum(map(len, messages))
        return self._queued

    def send_nowait(self, messages: list[bytes]) -> int:
        """:meth:`queue` then :meth:`write_nowait`, in one (the hot path): with no
        writer at work and nothing queued, ``messages`` go straight to the channel and
        only those it does not take are queued, in order. Nothing may :meth:`queue`
        while it hands them over (from inside the channel's ``send_nowait``): such a
        message would overtake those not handed over yet. Nothing does: a peer taking
        in passing is refused while ``writing`` (``Session._take_message``).

        Returns:
            0 when every message is out, else the mark to :meth:`write_through`.
        """
        if self._active or self._outbox or self._aborted:
            mark = self.queue(messages)  # (the general path)
            return 0 if self.write_nowait(mark) else mark
        send_nowait, sent = self._channel.send_nowait, 0
        self.writing = True
        try:
            for sent, message in enumerate(messages):  # noqa: B007 (sent: read after it)
                if not send_nowait(message):
                    break
            else:
                return 0  # every one is out (no mark: see _queued)
        except BaseException:
            self._unsent(messages, sent)  # (as write_nowait leaves them)
            raise
        finally:
            self.writing = False
        return self._unsent(messages, sent)

    def _unsent(self, messages: list[bytes], sent: int) -> int:
        """Count ``messages`` queued, the first ``sent`` of them written, and queue
        the rest in order; return their mark."""
        rest = messages[sent:]
        self._outbox.extend(rest)
        self._bytes += sum(map(len, rest))
        self._queued += len(messages)
        self._written += sent
        return self._queued

    def write_nowait(self, mark: int) -> bool:
        """Write what can go without waiting; whether every message up to ``mark`` is out.

        ``False`` leaves the rest in order in the outbox: :meth:`write_through` it.
        """
        if self._active:
            return self._written >= mark  # a write is in progress: queue behind it
        if self._withdrawn:
            return self._send_ready(mark)
        # _send_ready without withdrawn messages to skip, inlined (the hot path).
        outbox, send_nowait = self._outbox, self._channel.send_nowait
        self.writing = True
        try:
            while self._written < mark:
                message = outbox[0]
                if not send_nowait(message):
                    return False
                outbox.popleft()
                self._written += 1
                self._count_out(len(message))
        finally:
            self.writing = False
        return True

    def unsent(self, mark: int) -> bytes | None:
        """The last message queued up to ``mark`` (the last of the :meth:`queue` call
        that returned it) if none of it has been written: still queued, not being
        written, not withdrawn. ``None`` otherwise."""
        index = mark - 1 - self._written
        if index < 0 or index >= len(self._outbox) or (index == 0 and self._busy):
            return None
        return self._outbox[index] or None

    def withdraw(self, mark: int) -> None:
        """Never write the message :meth:`unsent` returns for ``mark`` (the caller
        checked it is there): the others keep their order and their marks."""
        index = mark - 1 - self._written
        assert self.unsent(mark) is not None
        size = len(self._outbox[index])
        self._outbox[index] = _WITHDRAWN
        self._withdrawn += 1
        self._count_out(size)

    def write_later(self) -> None:
        """Leave what is queued to be written without waiting for it: by the writer at
        work (it rides, or hands it to a leftover task when it leaves), else by a
        leftover task started now (``on_leftovers``). For a task that must not wait
        behind a write (the session's timer: its cancellations follow the requests)."""
        if (
            not self._active
            and self._outbox
            and not self._rescuing
            and self._on_leftovers is not None
        ):
            self._rescuing = self._on_leftovers()

    def _skip_withdrawn(self) -> None:
        """Count the withdrawn messages at the head of the outbox as written."""
        outbox = self._outbox
        while outbox and not outbox[0]:
            outbox.popleft()  # (empty: no bytes to count out)
            self._written += 1
            self._withdrawn -= 1

    async def write_through(self, mark: int, *, detach: bool = False) -> SessionClosed | None:
        """Write until every message up to ``mark`` is out.

        Args:
            mark: what :meth:`queue` returned.
            detach: leave the messages to the drainer (``start_drainer``) as soon as
                one must wait, and return without waiting for them (see "Detached
                writes" in the module docs): then whether they go out is the
                drainer's to report (a failure closes the session).

        Returns:
            ``None``, or why writing failed (the channel broke, a write timed out, or
            :meth:`abort` was called). Nothing is written after a failure.
        """
        if self._written >= mark:
            return None
        if not self._active:
            self._active = True
            return await self._write_as_writer(mark, detach)
        if detach and self._drainer_state == _DRAINING:
            return None  # (the drainer holds the role: it writes ours too)
        return await self._wait_turn(mark, detach)

    async def _wait_turn(self, mark: int, detach: bool) -> SessionClosed | None:
        """Wait, as a waiter, until the messages up to ``mark`` are out, or until the
        writer role is handed to this task (then write as the writer)."""
        waiter = _Waiter(mark)
        self._arrivals += 1
        heapq.heappush(self._waiters, (mark, self._arrivals, waiter))
        try:
            await trio.lowlevel.wait_task_rescheduled(waiter.abort)
        except BaseException:
            waiter.gone = True
            if waiter.turn:  # the role was handed over as we were cancelled: pass it on
                self._leave()
            raise
        if not waiter.turn:
            return None  # our messages are out (or dropped by abort)
        return await self._write_as_writer(mark, detach)

    async def _write_as_writer(self, mark: int, detach: bool = False) -> SessionClosed | None:
        """Write up to ``mark`` holding the writer role, then ride (see the module docs);
        or, with ``detach``, hand the role to the drainer at the first write that must
        wait, and return."""
        handed = False
        try:
            while self._written < mark:
                if self._withdrawn:
                    self._skip_withdrawn()
                    if self._written >= mark:
                        break
                if detach and self._hand_over():
                    handed = True
                    break
                failure = await self._write_head()
                if failure is not None:
                    return failure
                self._send_ready(mark)  # the rest of ours, if it goes without waiting
            if not handed:
                self._send_ready(self._queued)  # ride: others' messages that need no wait
        finally:
            if not handed:
                self._leave()  # (else the drainer holds the role now)
        return None

    def _hand_over(self) -> bool:
        """Hand the writer role to the drainer, starting it if need be; whether it took
        it (not on a channel whose writes are cancellable, nor once it has ended)."""
        state = self._drainer_state
        if state == _IDLE:
            assert self._drainer is not None
            trio.lowlevel.reschedule(self._drainer)
            self._drainer = None
        elif (
            state != _UNSTARTED
            or self._channel.atomic_send
            or self._start_drainer is None
            or not self._start_drainer()
        ):
            return False
        self._drainer_state = _DRAINING
        return True

    async def drain(self) -> SessionClosed | None:
        """The drainer: a task that :meth:`_hand_over` starts holding the writer role.
        It writes until the outbox is empty, waking each waiter as its messages are
        out, leaves the role and waits for the next hand-over; and so on until it is
        cancelled (the session is closing) while it waits, or a write fails.

        Returns:
            why writing failed (as :meth:`write_through`); the session closes.
        """
        try:
            while True:
                try:
                    failure = await self._write_all()
                finally:
                    self._leave()
                if failure is not None:
                    return failure
                self._drainer_state = _IDLE
                self._drainer = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(self._drainer_cancelled)
        finally:
            self._drainer_state = _GONE
            self._drainer = None

    def _drainer_cancelled(self, _: object) -> trio.lowlevel.Abort:
        # (called by trio as the idle drainer is cancelled: from now on no writer hands
        # it the role, before its task has even run)
        self._drainer_state = _GONE
        self._drainer = None
        return trio.lowlevel.Abort.SUCCEEDED

    async def _write_all(self) -> SessionClosed | None:
        """Write everything queued, in order, holding the writer role; wake the waiters
        whose messages are out as they are. The failure, if any."""
        while not self._send_ready(self._queued):
            self._wake_done()  # (before a write that waits: some may be out already)
            failure = await self._write_head()
            if failure is not None:
                return failure
        return None

    async def _write_head(self) -> SessionClosed | None:
        """Write the oldest queued message, the writer role held (busy meanwhile); the
        failure, if any (see :meth:`_wrote`)."""
        self._busy = True
        try:
            failure = await self._write_one(self._outbox[0])
        finally:
            self._busy = False
        return self._wrote(failure)

    def out(self, mark: int) -> bool:
        """Whether every message up to ``mark`` is out (or dropped by abort)."""
        return self._written >= mark

    def _wrote(self, failure: SessionClosed | None) -> SessionClosed | None:
        """The head of the outbox was written (or failed): count it out; the failure."""
        if failure is None and self._aborted:
            failure = SessionClosed("the session was closed")
        if failure is not None:
            self.abort()
            return failure
        self._written += 1
        self._count_out(len(self._outbox.popleft()))
        return None

    def _wake_done(self) -> None:
        """Wake the waiters whose messages are all out (skip the cancelled ones)."""
        waiters, written = self._waiters, self._written
        while waiters and (waiters[0][0] <= written or waiters[0][2].gone):
            heapq.heappop(waiters)[2].wake()

    def _leave(self) -> None:
        """The writer leaves: wake those done, hand the role to the earliest left.

        Waiters before the writer's own messages were done when it began, so only
        its ride can have finished others' (and only in mark order)."""
        self._wake_done()
        if self._waiters:
            waiter = heapq.heappop(self._waiters)[2]
            waiter.turn = True  # the role stays taken (_active) for it
            waiter.wake()
        else:
            self._active = False
            if self._outbox and not self._rescuing and self._on_leftovers is not None:
                self._rescuing = self._on_leftovers()

    async def write_leftovers(self) -> SessionClosed | None:
        """Write until the outbox is empty, as a writer among the others: the task
        ``on_leftovers`` starts (see the module docs).

        Returns:
            ``None``, or why writing failed (as :meth:`write_through`).
        """
        try:
            while self._outbox:
                failure = await self.write_through(self._queued)
                if failure is not None:
                    return failure
        finally:
            self._rescuing = False
        return None

    @property
    def deadline(self) -> float:
        """When the write in progress times out (``write_timeout``, or :meth:`cap`),
        in trio time; ``math.inf`` when none is in progress or it has no bound."""
        scope = self._scope
        return math.inf if scope is None else scope.deadline

    def cap(self, deadline: float) -> None:
        """No write, the one in progress included, lasts past ``deadline`` (a closing
        session's last, bounded writes); one cut short fails as a timed-out write."""
        self._cap = deadline if self._cap is None else min(self._cap, deadline)
        if self._scope is not None:
            self._scope.deadline = min(self._scope.deadline, deadline)

    def abort(self) -> None:
        """Drop the outbox, cancel the write in progress, refuse further messages."""
        self._aborted = True
        self._outbox.clear()
        self._withdrawn = 0
        self._written = self._queued
        self._max_bytes = math.inf  # (nothing is queued any more: nobody waits for room)
        self._count_out(self._bytes)
        if self._scope is not None:
            self._scope.cancel()

    def _send_ready(self, mark: int) -> bool:
        """Send with ``send_nowait`` up to ``mark`` while the channel takes messages
        at once, skipping withdrawn ones; whether all are out."""
        outbox, send_nowait = self._outbox, self._channel.send_nowait
        self.writing = True
        try:
            while self._written < mark:
                message = outbox[0]
                if not message:
                    self._withdrawn -= 1
                elif not send_nowait(message):
                    return False
                outbox.popleft()
                self._written += 1
                if message:
                    self._count_out(len(message))
        finally:
            self.writing = False
        return True

    async def _write_one(self, message: bytes) -> SessionClosed | None:
        if self._channel.atomic_send:
            try:
                await self._channel.send(message)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                return _failed(exc)
            return None
        with trio.CancelScope(shield=True) as scope:
            if self._timeout is not None:
                scope.deadline = trio.current_time() + self._timeout
            if self._cap is not None:
                scope.deadline = min(scope.deadline, self._cap)
            self._scope = scope
            try:
                await self._channel.send(message)
            except SessionClosed as exc:
                return exc
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                return _failed(exc)
            finally:
                self._scope = None
        if scope.cancelled_caught:
            if self._aborted:
                return SessionClosed("the session was closed")
            return SessionClosed(f"writing to the peer timed out after {self._timeout} s")
        return None


def _failed(exc: Exception) -> SessionClosed:
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    failure = SessionClosed(f"writing to the peer failed: {detail}")
    failure.__cause__ = exc  # e.g. the TLS or OS error behind a broken stream
    return failure

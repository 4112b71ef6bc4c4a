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
cannot send goes the slow way below.

The slow way. A task that finds a writer active *parks* until that writer leaves. The
writer waits only for its own messages and those before them; once they are out, it
also sends whatever else is queued as long as that needs no waiting (it *rides* along),
then wakes every parked task at once. Those whose messages went out return; if any are
left, the first to run becomes the writer. So when a full channel drains, the messages
queued behind it leave in one go and the fast path is free again at once, instead of a
lock being handed from task to task, one scheduler tick each, while newcomers queue
behind (a lock convoy). A task cancelled while parked leaves its messages in the
outbox; the writer or the next one sends them. (The session cancels a request it could
not write with a bounded write of its own, so nothing waits there for long.)

On a channel whose sends are atomic (a memory channel), a write is cancelled like any
other wait and the message stays first in the outbox. Otherwise each single message
write is shielded from the caller's cancellation, because half a frame would corrupt a
byte stream or a WebSocket, and bounded by ``write_timeout`` instead;
:meth:`Writer.abort` (the session is closing) cancels it.
"""

from __future__ import annotations

from collections import deque
from typing import final

import trio

from ._channel import MessageChannel
from ._errors import SessionClosed

__all__ = ["Writer"]


@final
class Writer:
    """An ordered outbox drained to a channel by one writer at a time.

    Args:
        channel: where messages go.
        write_timeout: seconds one message may take (``None``: no bound).
    """

    def __init__(self, channel: MessageChannel, write_timeout: float | None) -> None:
        self._channel = channel
        self._timeout = write_timeout
        self._active = False  # a task is in write_through's writing part
        self._parked = trio.lowlevel.ParkingLot()  # tasks waiting for it to leave
        self._outbox: deque[bytes] = deque()
        self._queued = 0  # messages ever queued
        self._written = 0  # messages ever written (or dropped by abort)
        self._scope: trio.CancelScope | None = None
        self._cap: float | None = None  # see cap()
        self._aborted = False
        self.writing = False
        """Whether :meth:`write_nowait` is on the stack: a message taken in passing
        (``MessageChannel.attach_reader``) must not re-enter it, or the message at
        the head of the outbox would go out twice."""

    @property
    def backlog(self) -> int:
        """Messages queued and not yet written."""
        return len(self._outbox)

    def queue(self, messages: list[bytes]) -> int:
        """Append ``messages``; return the mark to pass to :meth:`write_through`."""
        if messages and not self._aborted:
            self._outbox.extend(messages)
            self._queued += len(messages)
        return self._queued

    def write_nowait(self, mark: int) -> bool:
        """Write what can go without waiting; whether every message up to ``mark`` is out.

        ``False`` leaves the rest in order in the outbox: :meth:`write_through` it.
        """
        if self._active:
            return self._written >= mark  # a write is in progress: queue behind it
        return self._send_ready(mark)

    async def write_through(self, mark: int) -> SessionClosed | None:
        """Write until every message up to ``mark`` is out.

        Returns:
            ``None``, or why writing failed (the channel broke, a write timed out, or
            :meth:`abort` was called). Nothing is written after a failure.
        """
        while self._written < mark:
            if not self._active:
                return await self._write_as_writer(mark)
            await self._parked.park()  # until the writer leaves (see the module docs)
        return None

    async def _write_as_writer(self, mark: int) -> SessionClosed | None:
        """Write up to ``mark`` as the one writer, then ride (see the module docs)."""
        self._active = True
        try:
            while self._written < mark:
                failure = await self._write_one(self._outbox[0])
                if failure is None and self._aborted:
                    failure = SessionClosed("the session was closed")
                if failure is not None:
                    self.abort()
                    return failure
                self._outbox.popleft()
                self._written += 1
                self._send_ready(mark)  # the rest of ours, if it goes without waiting
            self._send_ready(self._queued)  # ride: others' messages that need no wait
        finally:
            self._active = False
            self._parked.unpark_all()
        return None

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
        self._written = self._queued
        if self._scope is not None:
            self._scope.cancel()

    def _send_ready(self, mark: int) -> bool:
        """Send with ``send_nowait`` up to ``mark`` while the channel takes messages
        at once; whether all are out."""
        outbox, send_nowait = self._outbox, self._channel.send_nowait
        self.writing = True
        try:
            while self._written < mark:
                if not send_nowait(outbox[0]):
                    return False
                outbox.popleft()
                self._written += 1
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

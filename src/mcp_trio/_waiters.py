"""Our requests' callers, waiting for their answers.

Each caller of ``Session.request`` waits (:meth:`Waiter.wait`) for one outcome: a result,
an error, a timeout, an input-required round, or the session's close. The reader (or
the timer, or the close) resolves it; whoever resolves it first wins, and an outcome
is delivered at most once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, NoReturn, TypeAlias, final

import trio

from mcp_sansio import (
    ErrorReceived,
    InputRequired,
    ProgressReceived,
    RequestId,
    RequestTimedOut,
    ResultReceived,
)

from ._errors import SessionClosed

__all__ = ["InputCallback", "Outcome", "ProgressCallback", "Reissued", "Waiter", "Waiters"]


# Reissued and Waiter are private records on a stdio server's import path: plain
# slotted classes (see tests/test_stdio_import_cost.py).


@final
class Reissued:
    """The outcome of a request the session re-issued (its answer was lost: see
    ``Session._reissue``): wait for ``waiter``, the caller's under the new id.

    Attributes:
        request_id: the new request's id.
        waiter: already registered for it (progress and an early answer are not lost).
    """

    __slots__ = ("request_id", "waiter")

    def __init__(self, request_id: RequestId, waiter: Waiter) -> None:
        self.request_id: Final = request_id
        self.waiter: Final = waiter


ProgressCallback: TypeAlias = Callable[[ProgressReceived], Awaitable[None]]
"""``async def on_progress(event)``: runs where the session reads (its reader, or the
task finishing a message taken in passing), blocking what comes next; keep it short."""
InputCallback: TypeAlias = Callable[[InputRequired], Awaitable[dict[str, Any]]]
"""``async def on_input_required(event) -> input_responses`` (modern era, MRTR)."""
Outcome: TypeAlias = (
    ResultReceived | ErrorReceived | RequestTimedOut | InputRequired | SessionClosed | Reissued
)


class Waiter:
    """One caller waiting for the answer to one request id.

    A one-shot wake-up for one task: what a ``trio.Event`` waited on by one task does
    (:meth:`wait` returns once :meth:`settle` was called, before or after, and is a
    checkpoint either way), without the set of waiting tasks and the object per
    request that an event costs on the hot path of every call.

    Attributes:
        on_progress: the caller's progress callback, if any.
        outcome: how the request ended, once it has.
    """

    __slots__ = ("_task", "on_progress", "outcome")

    def __init__(self, on_progress: ProgressCallback | None) -> None:
        self.on_progress = on_progress
        self.outcome: Outcome | None = None
        self._task: trio.lowlevel.Task | None = None  # parked in wait()

    def settle(self, outcome: Outcome) -> None:
        """Set ``outcome`` (the latest wins) and wake the caller if it waits."""
        self.outcome = outcome
        task = self._task
        if task is not None:
            self._task = None
            trio.lowlevel.reschedule(task)

    def wait(self) -> Coroutine[Any, Any, object]:
        """What to await until the request has its outcome (then read :attr:`outcome`):
        a checkpoint even if it has one already, as ``trio.Event.wait`` is. Only one
        task waits at a time, and it awaits this at once.

        Not a coroutine function of its own: the caller awaits trio's wait directly
        (one coroutine less per request)."""
        if self.outcome is None:
            self._task = trio.lowlevel.current_task()
            return trio.lowlevel.wait_task_rescheduled(self._abort)
        return trio.lowlevel.checkpoint()

    def _abort(self, _: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        self._task = None  # (cancelled: nobody to wake)
        return trio.lowlevel.Abort.SUCCEEDED


@final
class Waiters:
    """The callers waiting, by request id."""

    def __init__(self) -> None:
        self._by_id: dict[RequestId, Waiter] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def add(self, rid: RequestId, on_progress: ProgressCallback | None) -> Waiter:
        """Register a caller for ``rid``."""
        waiter = Waiter(on_progress=on_progress)
        self._by_id[rid] = waiter
        return waiter

    def get(self, rid: RequestId) -> Waiter | None:
        """The caller waiting for ``rid``, if any."""
        return self._by_id.get(rid)

    def forget(self, rid: RequestId) -> None:
        """The caller of ``rid`` gave up."""
        self._by_id.pop(rid, None)

    def resolve(self, rid: RequestId, outcome: Outcome) -> bool:
        """Wake the caller of ``rid`` with ``outcome``; whether there was one."""
        waiter = self._by_id.pop(rid, None)
        if waiter is None:
            return False
        waiter.settle(outcome)
        return True

    def fail_all(self, exc: SessionClosed) -> None:
        """Wake every caller with the session's close."""
        waiters = list(self._by_id.values())
        self._by_id.clear()
        for waiter in waiters:
            waiter.settle(exc)

"""Our requests' callers, waiting for their answers.

Each caller of ``Session.request`` waits on a ``trio.Event`` for one outcome: a result,
an error, a timeout, an input-required round, or the session's close. The reader (or
the timer, or the close) resolves it; whoever resolves it first wins, and an outcome
is delivered at most once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, final

import attrs
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


@final
@attrs.frozen(eq=False)
class Reissued:
    """The outcome of a request the session re-issued (its answer was lost: see
    ``Session._reissue``): wait for ``waiter``, the caller's under the new id."""

    request_id: RequestId
    """The new request's id."""
    waiter: Waiter
    """Already registered for it (progress and an early answer are not lost)."""


ProgressCallback: TypeAlias = Callable[[ProgressReceived], Awaitable[None]]
"""``async def on_progress(event)``: runs where the session reads (its reader, or the
task finishing a message taken in passing), blocking what comes next; keep it short."""
InputCallback: TypeAlias = Callable[[InputRequired], Awaitable[dict[str, Any]]]
"""``async def on_input_required(event) -> input_responses`` (modern era, MRTR)."""
Outcome: TypeAlias = (
    ResultReceived | ErrorReceived | RequestTimedOut | InputRequired | SessionClosed | Reissued
)


@attrs.define(slots=True, eq=False)
class Waiter:
    """One caller waiting for the answer to one request id."""

    on_progress: ProgressCallback | None
    done: trio.Event = attrs.field(factory=trio.Event)
    outcome: Outcome | None = None


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
        waiter.outcome = outcome
        waiter.done.set()
        return True

    def fail_all(self, exc: SessionClosed) -> None:
        """Wake every caller with the session's close."""
        waiters = list(self._by_id.values())
        self._by_id.clear()
        for waiter in waiters:
            waiter.outcome = exc
            waiter.done.set()

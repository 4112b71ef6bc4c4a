"""The small private records of a :class:`~mcp_sansio._connection.Connection`.

The entries of its request tables (``_Req``, ``_Outbound``), the batch being answered
(``_Batch``), and the helpers that build or list them. Nothing here holds a reference
to a connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ._jsonrpc import RequestId
from ._versions import Era

_new: Final = object.__new__


# The table entries below are plain slotted classes rather than attrs classes: they
# are private, mutable, and built once per request on the hot path.


class _Req:
    """A request being dispatched (the fast path builds no jsonrpc.Request)."""

    __slots__ = ("id", "method", "params")

    def __init__(self, rid: RequestId, method: str, params: dict[str, Any] | None) -> None:
        self.id = rid
        self.method = method
        self.params = params


class _Outbound:
    """One request of ours awaiting an answer.

    Only what every request has is a slot: the send_request fast path fills the five
    slots inline, with no ``__init__`` frame (see :func:`_outbound`). What only timed,
    progress-watching or input-required requests use lives in the instance ``__dict__``,
    created on first write, and reads as the class default until then.
    """

    __slots__ = ("__dict__", "era", "method", "params", "progress_token", "started")

    method: str
    params: dict[str, Any] | None
    started: float
    progress_token: RequestId | None
    era: Era
    deadline: float | None = None
    timer_seq: int = 0
    """The sequence number of the live ``_timers`` entry (0: none)."""
    cap: float | None = None
    """When ``max_request_time`` ends it, progress or not (``None``: never)."""
    related: RequestId | None = None
    """The peer's request this one is made for (``related_request_id``): where HTTP
    routes what concerns it, its cancellation too."""
    last_progress: float | None = None
    request_state: Any = None
    rounds: int = 0
    reissues: int = 0
    """How many times :meth:`Connection.reissue_request` sent it again so far."""
    asked: dict[str, Any] | None = None
    """The ``inputRequests`` of the round it awaits input for (checked against the
    answers :meth:`Connection.retry_with_input` is given)."""
    origin: RequestId | None = None
    """The id the call was first sent under, once it goes under another (a retry of
    :meth:`Connection.retry_with_input`, a re-issue): the events' ``origin_id``."""
    timeout: float | None = None


def _outbound(
    method: str,
    params: dict[str, Any] | None,
    started: float,
    progress_token: RequestId | None,
    era: Era,
    timeout: float | None = None,
) -> _Outbound:
    entry: _Outbound = _new(_Outbound)
    entry.method = method
    entry.params = params
    entry.started = started
    entry.progress_token = progress_token
    entry.era = era
    if timeout is not None:
        entry.timeout = timeout
    return entry


class _Batch:
    """An inbound 2025-03-26 batch whose replies are being collected (plain slotted,
    like the entries above)."""

    __slots__ = ("replies", "waiting")

    def __init__(self, *, waiting: set[RequestId], replies: list[dict[str, Any]]) -> None:
        self.waiting = waiting
        self.replies = replies


def _ids_of(table: Mapping[RequestId, object]) -> tuple[RequestId, ...]:
    return tuple(table)

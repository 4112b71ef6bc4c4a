"""The handler pool: which of the peer's messages are being handled, and how many.

Two bounds limit the work the reader takes on; a handler is spawned only with its
slots taken (a request: both; a notification: a backlog slot, and a compute slot if
one is free), and the reader stops reading when the backlog is exhausted
(backpressure):

* a **compute slot** (``max_concurrent_handlers``) is held while the handler runs and
  given back as soon as its answer is queued in the core;
* a **backlog slot** (``max_unanswered_requests``) is held until the answer is
  written to the channel (or the handler ends without one).

The reader stops only when the backlog is full. A request read while every compute
slot is busy takes its backlog slot and waits, in order, for a compute slot (the
session's reserved requests); the reader goes on. It must: a handler holding a compute
slot may be waiting for the peer's answer to a question of its own (sampling, roots),
and that answer comes after the request in the stream.

Why two: if a handler kept its compute slot while it waits to write its answer, two
peers that both send requests could each fill the other's pipe with requests, stop
reading (all slots busy) and wait for each other forever. Handlers waiting only for
the write hold a backlog slot, and compute slots turn over whatever the peer does; the
backlog bound still stops a peer that sends requests and never reads the answers.

The slots are two counters, not ``trio.CapacityLimiter``s: only the session's reader
(and, in principle, its timer) takes them, and a free slot must cost no scheduler
round trip. A taker that finds none waits on an event that the next release sets;
each release also calls ``on_freed`` (the session starts its reserved requests).

Every handler runs inside its own ``CancelScope``. The pool can cancel one request's
scope (the peer cancelled it), cancel them all (the session is closing), and wait
until none is left.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, final

import trio

from mcp_sansio import Connection, ErrorCode, ErrorData, LocalProtocolError, RequestId

from ._errors import McpError
from ._handlers import InputRequiredResult

if TYPE_CHECKING:
    from mcp_sansio._http_auth import Principal, RequiredScopes

    from ._handlers import RequestContext, RequestHandler

__all__ = [
    "HandlerPool",
    "call_request_handler",
    "checked_result",
    "drop_cancelled",
    "handler_failed",
    "send_answer",
    "serve_notification",
]

logger = logging.getLogger("mcp_trio")
_INTERNAL = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="Internal error")


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
class _Running:
    """Bookkeeping of one running handler.

    Attributes:
        request_id: the peer's request id (``None`` for a notification).
        computing: whether it still holds its compute slot.
        scope: the handler's own cancel scope.
        cancelled: the peer cancelled the request: its answer will be dropped.
    """

    __slots__ = ("cancelled", "computing", "request_id", "scope")

    def __init__(self, request_id: RequestId | None, computing: bool = True) -> None:
        self.request_id = request_id
        self.computing = computing
        self.scope = trio.CancelScope()
        self.cancelled = False


@final
class HandlerPool:
    """Slots, scopes and counts of the handler tasks of one session.

    Args:
        compute: how many handlers may run at once.
        backlog: how many may be started and not finished (running, or waiting to
            write their answers); at least ``compute``.
    """

    def __init__(self, compute: int, backlog: int) -> None:
        self.compute_limit = compute
        """How many handlers may run at once."""
        self.backlog_limit = max(compute, backlog)
        """How many may be started and not finished."""
        self._computing = 0
        self._started = 0
        self._slot_freed: trio.Event | None = None  # someone waits in acquire()
        self._requests: dict[RequestId, _Running] = {}
        self._all: set[_Running] = set()
        self._changed: trio.Event | None = None  # someone waits in wait_idle()
        self.on_freed: Callable[[], None] | None = None
        """Called whenever a slot is given back (the session starts reserved requests)."""
        self.cancelled_all = False
        """Whether :meth:`cancel_all` was called (new handlers start cancelled)."""

    @property
    def count(self) -> int:
        """How many handlers hold a slot."""
        return len(self._all)

    def acquire_nowait(self) -> bool:
        """Take a backlog slot and a compute slot if both are free; whether it did."""
        if self._computing < self.compute_limit and self._started < self.backlog_limit:
            self._computing += 1
            self._started += 1
            return True
        return False

    def reserve_nowait(self) -> bool:
        """Take a backlog slot alone (a request read whose handler must wait for a
        compute slot: :meth:`compute_nowait` later); whether it did."""
        if self._started < self.backlog_limit:
            self._started += 1
            return True
        return False

    async def reserve(self) -> None:
        """Wait for a backlog slot and take it (no checkpoint when one is free)."""
        while not self.reserve_nowait():
            if self._slot_freed is None:
                self._slot_freed = trio.Event()
            await self._slot_freed.wait()

    def compute_nowait(self) -> bool:
        """Take a compute slot for a reserved request if one is free; whether it did."""
        if self._computing < self.compute_limit:
            self._computing += 1
            return True
        return False

    def release_reserved(self) -> None:
        """Give back the backlog slot of a reserved request that will not start."""
        self._started -= 1
        self._freed()

    def release_unused(self) -> None:
        """Give back slots that were not used."""
        self._computing -= 1
        self._started -= 1
        self._freed()

    def begin(self, request_id: RequestId | None, *, computing: bool = True) -> _Running:
        """Register a handler about to be spawned with the slots just taken
        (``computing=False``: a backlog slot alone, see ``Session``'s notifications)."""
        running = _Running(request_id, computing)
        if self.cancelled_all:
            running.scope.cancel()
        if request_id is not None:
            self._requests[request_id] = running
        self._all.add(running)
        return running

    def computed(self, running: _Running) -> None:
        """The handler's answer is queued: free its compute slot (the reader may go on)."""
        if running.computing:
            running.computing = False
            self._computing -= 1
            if self._slot_freed is not None or self.on_freed is not None:
                self._freed()  # (someone to tell: see _freed)

    def finish(self, running: _Running) -> None:
        """A handler ended: forget it, free its slots, wake :meth:`wait_idle`."""
        rid = running.request_id
        if rid is not None and self._requests.get(rid) is running:
            del self._requests[rid]
        self._all.discard(running)
        if running.computing:
            running.computing = False
            self._computing -= 1
        self._started -= 1
        if self._slot_freed is not None or self.on_freed is not None:
            self._freed()
        if self._changed is not None:
            self.wake()

    def _freed(self) -> None:
        """Tell who waits for a slot, and ``on_freed``. The hot paths (:meth:`computed`,
        :meth:`finish`: twice per request) call it only when there is one of them:
        most requests find nobody waiting, and a call less each time."""
        event = self._slot_freed
        if event is not None:
            self._slot_freed = None
            event.set()
        if self.on_freed is not None:
            self.on_freed()

    def cancel_request(self, request_id: RequestId) -> bool:
        """The peer cancelled ``request_id``: cancel its handler, if it runs, and mark
        it cancelled (its answer is not given). Returns whether one runs: the caller
        then frees the request's place at once (:func:`drop_cancelled`), not when the
        handler ends, or a request sent right after the cancellation could find the
        places all taken."""
        running = self._requests.get(request_id)
        if running is None:
            return False
        running.cancelled = True
        running.scope.cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every handler, and any started from now on."""
        self.cancelled_all = True
        for running in self._all:
            running.scope.cancel()
        self.wake()

    def wake(self) -> None:
        """Wake whoever waits in :meth:`wait_idle`."""
        event = self._changed
        if event is not None:
            self._changed = None
            event.set()

    async def wait_idle(self, *, or_cancelled: bool = False) -> None:
        """Wait until no handler is left (or, with ``or_cancelled``, until
        :meth:`cancel_all` is called)."""
        while self._all and not (or_cancelled and self.cancelled_all):
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()


def scopes_needed(
    hooks: Iterable[RequiredScopes],
    principal: Principal,
    method: str,
    params: dict[str, Any] | None,
    base_scopes: frozenset[str] = frozenset(),
) -> frozenset[str]:
    """The scopes a request needs, one rule for every transport (``serve_http``'s core
    hook, a session's check before dispatch): the union of what ``hooks`` name, each
    answer checked to be scope tokens a challenge can carry (``hook_scopes``), and, for
    a request that needs any, ``base_scopes``: those the authenticator requires of
    every request (``declared_scopes``), already checked by it but needed by this
    request too, so that a refusal names them (2025-11-25 basic/authorization.mdx:
    the scopes "needed to satisfy the current request").

    Raises:
        Exception: what a hook raises, or ``ValueError`` for what is no scope token
            (the caller logs it and refuses the request).
    """
    needed: frozenset[str] = frozenset()
    for hook in hooks:
        scopes = hook(principal, method, params)
        if scopes:  # (usually nothing)
            from ._http_auth import hook_scopes  # noqa: PLC0415 (stdio loads no HTTP)

            needed |= hook_scopes(scopes)
    return needed | base_scopes if needed else needed


def checked_scopes(
    required_scopes: RequiredScopes,
    principal: Principal,
    method: str,
    params: dict[str, Any] | None,
    request_id: RequestId,
    resource_metadata: str | None = None,
    base_scopes: frozenset[str] = frozenset(),
) -> frozenset[str] | ErrorData:
    """The scopes a request needs (``required_scopes`` asked once), all granted to
    ``principal``; else the refusal: ``insufficient_scope``, its ``data`` naming
    ``resource_metadata`` when given, or -32603 for a failing ``required_scopes``
    (logged here, once). A request that needs any needs ``base_scopes`` too (the
    authenticator's, ``Session.base_scopes``): the refusal names them, as the
    Streamable HTTP challenge does (:func:`scopes_needed`, the rule of both)."""
    try:
        found = scopes_needed((required_scopes,), principal, method, params, base_scopes)
        if not found:
            return frozenset()  # (the usual case: nothing to check)
        from mcp_sansio._http_auth import insufficient_scope  # noqa: PLC0415 (stdio loads no HTTP)

        refused = insufficient_scope(principal, found, resource_metadata=resource_metadata)
        return found if refused is None else refused
    except Exception:
        logger.exception("required_scopes failed for %r (request %r)", method, request_id)
        return _INTERNAL


async def call_request_handler(
    handler: RequestHandler | None,
    ctx: RequestContext,
    required_scopes: RequiredScopes | None = None,
    resource_metadata: str | None = None,
    base_scopes: frozenset[str] = frozenset(),
) -> dict[str, Any] | InputRequiredResult | ErrorData:
    """Run a request handler; return its answer, or the error to answer with.

    No handler: -32601. A principal whose token lacks a scope ``required_scopes``
    says the request needs: the ``insufficient_scope`` error (see
    :func:`mcp_sansio.http.insufficient_scope`, naming ``resource_metadata``, and
    ``base_scopes`` among the scopes: see :func:`checked_scopes`), and the
    handler does not run; else the scopes checked are the context's
    ``needed_scopes`` (the hook is asked once per request: the layers after read them).
    :class:`~mcp_trio.McpError`: its error. Any other exception: -32603 "Internal
    error", with the traceback logged here and never sent to the peer. Cancellation
    propagates.

    The session's handler task does the same in its own frame when there is nothing to
    refuse (a coroutine less per request: ``Session._serve_request``): it awaits the
    handler itself, then hands what it returned to :func:`checked_result`, or what it
    raised to :func:`handler_failed`, as here.
    """
    method = ctx.method
    if handler is None:
        return ErrorData(code=ErrorCode.METHOD_NOT_FOUND, message=f"Method not found: {method}")
    if required_scopes is not None and (principal := ctx.principal) is not None:
        found = checked_scopes(
            required_scopes,
            principal,
            method,
            ctx.params,
            ctx.request_id,
            resource_metadata,
            base_scopes,
        )
        if isinstance(found, ErrorData):
            return found
        ctx._needed_scopes = found  # (handed on with the request: see RequestFacts)
    try:
        result = await handler(ctx)
    except BaseException as exc:
        return handler_failed(exc, method, ctx.request_id)
    return checked_result(result, method)


def handler_failed(exc: BaseException, method: str, rid: RequestId) -> ErrorData:
    """What a request handler raised, ``exc``, as the error to answer with:
    :class:`~mcp_trio.McpError`, its error; any other exception, -32603 "Internal
    error" (the traceback logged here, never sent). Raises ``exc`` again when it is no
    failure of the handler's: a cancellation, ``KeyboardInterrupt`` & co, or a group of
    only those; a group that also holds failures is logged, and its cancellations
    raised."""
    if isinstance(exc, McpError):
        return exc.error
    if isinstance(exc, Exception):
        logger.error("handler for %r (request %r) failed", method, rid, exc_info=exc)
        return _INTERNAL
    if isinstance(exc, BaseExceptionGroup):
        cancelled, rest = exc.split(trio.Cancelled)
        if isinstance(rest, ExceptionGroup):
            logger.error("handler for %r (request %r) failed", method, rid, exc_info=rest)
            if cancelled is not None:
                raise cancelled from None
            return _INTERNAL
    raise exc  # only cancellations, or KeyboardInterrupt & co: not ours to stop


def checked_result(result: object, method: str) -> dict[str, Any] | InputRequiredResult | ErrorData:
    """What a request handler returned, if it is an answer (a ``dict``, or an
    :class:`InputRequiredResult`); else -32603 "Internal error", logged."""
    if type(result) is dict or isinstance(result, InputRequiredResult):
        return result
    logger.error("handler for %r returned %s, not a dict", method, type(result).__name__)
    return _INTERNAL


def send_answer(
    conn: Connection,
    method: str,
    rid: RequestId,
    outcome: dict[str, Any] | InputRequiredResult | ErrorData,
) -> None:
    """Queue ``outcome`` (from :func:`call_request_handler`) as the answer to ``rid``.

    An answer the core refuses (not serializable, too large, ...) is logged here and
    replaced by -32603 "Internal error".
    """
    try:
        if isinstance(outcome, ErrorData):
            conn.send_error(rid, outcome.code, outcome.message, outcome.data)
        elif isinstance(outcome, InputRequiredResult):
            conn.send_input_required(
                rid, outcome.input_requests, state=outcome.state, now=trio.current_time()
            )
        else:
            conn.send_result(rid, outcome)
    except (LocalProtocolError, TypeError, ValueError):
        logger.exception("the answer to %r (request %r) cannot be sent", method, rid)
        with suppress(LocalProtocolError):
            conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "Internal error")


def drop_cancelled(conn: Connection, rid: RequestId) -> None:
    """The peer cancelled its request ``rid`` (or a close abandoned it): hand the core
    an answer all the same, which it drops (nothing is sent) and which frees the place
    the request holds against ``max_inflight_requests``. Called when the cancellation
    arrives and again when the handler ends (or never starts): idempotent. A request
    still in flight (or a new one the peer sent under the freed id) is left alone, and
    one already answered is no error."""
    if conn.request_era(rid) is None:
        with suppress(LocalProtocolError):  # (answered already: nothing to free)
            conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "cancelled")


class _Scoped(Protocol):
    scope: trio.CancelScope


class _Named(Protocol):
    @property
    def method(self) -> str: ...


_R = TypeVar("_R", bound=_Scoped)
_C = TypeVar("_C", bound=_Named)


async def serve_notification(
    handler: Callable[[_C], Awaitable[None]],
    ctx: _C,
    running: _R,
    finish: Callable[[_R], None],
) -> None:
    """A notification handler's task: run it in ``running``'s scope, log what it
    raises (a notification has no answer), then ``finish(running)``."""
    try:
        with running.scope:
            await handler(ctx)
    except Exception:
        logger.exception("handler for notification %r failed", ctx.method)
    finally:
        finish(running)

"""Running tools as tasks (the ``io.modelcontextprotocol/tasks`` extension, modern era).

Theory of operation
-------------------
A tool registered with ``task="optional"`` or ``task="required"`` may be answered with a
``CreateTaskResult`` instead of its result, when the request's envelope declares the
extension (the core's :mod:`mcp_sansio._tasks` holds the rules and wire shapes). The work
then goes on after the request has been answered, so it cannot run in the request's own
task: it runs in a nursery the server owns (:meth:`TaskRunner.running`, opened by the
server's ``serve_*`` methods and ``connect_in_memory``).

Every task tool's call starts the same way, whatever its mode: the request's task spawns
the tool into the runner's nursery and waits for the *launch*, the first of

* the task being created (:meth:`TaskRun.start`): the request is answered with the
  ``CreateTaskResult`` and the tool runs on;
* the tool finishing before that: the request is answered as usual (a result, an error, or
  an MRTR ``input_required`` result whose retry runs the tool again from the top).

With ``task_start="call"`` (the default) the task is created before the tool runs, so every
question it asks goes through the task (``inputRequests`` on ``tasks/get``, answered by
``tasks/update``). With ``task_start="explicit"`` the tool decides: until it calls
:meth:`~mcp_trio.Context.start_task` it is an ordinary call (questions are MRTR rounds on the
request itself, as the extension recommends before a task exists); from then on it is a task.
If the request goes away before the launch (the client cancelled it, the connection closed),
the tool is cancelled with it.

If the request goes away in the very round the task is created, the task is dropped from
the table and its work cancelled: its id never reached anyone.

Bounds, all in :class:`TaskConfig`: at most ``max_tasks`` tasks are kept (running or
finished), at most ``max_tasks_per_owner`` (opt-in) of them for one identified caller; a
task has at most ``max_input_requests`` questions outstanding, and a ``statusMessage`` of
at most ``max_status_message_bytes`` (a longer one is cut, never refused). Each expires
``ttl_ms`` after its creation: the tool's cancel scope has that deadline, so trio cancels
work still running then (the task settles ``failed``, which only the table sees: an
expired task is unknown to ``tasks/get`` from then on). Records are purged lazily, on every
look-up and creation, oldest first (tasks share one TTL, so the oldest expires first): a
finished record may stay in memory past its TTL until then, which ``max_tasks`` bounds.

What the kept tasks store -- results, tools' errors, outstanding questions -- is bounded in
bytes, all together, by ``max_stored_bytes``: each is counted once, as its compact JSON
size, when it is stored (a result is kept encoded: the one encoding is what is counted and
what every ``tasks/get`` and ``notifications/tasks`` embeds). The count is the sum of
:attr:`TaskRun.stored_bytes` over the table: a run adds to it while in the table, and
leaves with all of it when purged (its waiting notification goes too: it would keep the
result alive, and tell of a task that is unknown by then). An outcome that does not fit
makes room as a full table does (below); else the task fails, saying so. A call that finds
the store at its bound (after that making room) is treated as when the table is full: no
work starts whose outcome could not be kept. ``max_stored_bytes_per_owner`` (opt-in) gives
each caller (below) a share of the store: past it only the caller's own collected tasks
make room, so one caller's unfetched results cannot starve the others.

"At its bound" means: without room for ``reserved_bytes_per_task`` more bytes (opt-in;
without it, for one byte). Nobody knows an outcome's size before the tool returns, so
admission can only ask for room for some outcome: with no reservation, a store one byte
short of full admits a task, and most outcomes then fail it ("full"); and many tasks
admitted at once into the same room all count on it. A reservation is held by each task
while it runs (counted in :attr:`TaskRun.stored_bytes`, the total and the caller's share,
so concurrent admissions see each other's), and released when the task settles, just
before its outcome is stored in its place: an outcome no larger than the reservation
always fits; a larger one needs the rest, as before. It costs the store ``max_tasks``
times the reservation at most while tasks run, nothing once they have ended.

A caller, for the quota (``max_tasks_per_owner``, off by default), is the authenticated
subject; without authentication, the connection the call came on (stdio, WebSocket, in
memory: one peer each, though one peer may open many connections). Anonymous HTTP requests
carry nothing that tells their senders apart: they are never counted against the quota,
only against ``max_tasks``.

The TTL is a task's lifetime: "After a task's ``ttl`` lifetime has elapsed, receivers
**MAY** delete the task and its results, regardless of the task status" (2025-11-25
tasks, "TTL and Resource Management", which ext-tasks' ``ttlMs`` carries on); nothing lets
a server drop one earlier. Here, as a documented server policy that applies only when a
bound is hit (the opt-in quota, a full table, or the stored bytes), a terminal task is
*collected* once its caller has fetched its end with ``tasks/get`` -- or sent
``tasks/cancel`` while it still ran -- and it may make room ``retention_after_fetch_ms``
after that (the grace lets a caller whose reply was lost ask again). A
``notifications/tasks`` does not collect: it may have reached only another stream, or
nobody. A call that finds its caller at the quota evicts that caller's oldest collected
task; one that finds the table full, the caller's own oldest collected task first, else
the oldest collected task of anyone. With nothing to evict, the call runs without a task
(``optional``) or is refused with -32603 (``required``): a task whose end nobody has
fetched is never dropped before its TTL. An outcome that would pass ``max_stored_bytes``
evicts collected tasks holding bytes in the same order (the caller's own oldest, then
anyone's; past ``max_stored_bytes_per_owner``, only the caller's own), only if that frees
enough; else the task ends ``failed`` with -32603 ("the server's task store is full", or
larger than the bound alone): the spec lets a failed task carry any JSON-RPC error, and
nothing is silently lost. Every bound only *chooses* its victims (what one chose counts
for the next); they are evicted once all the bounds are met, so a refused call or outcome
costs nobody a task.

A task belongs to the subject of the principal that made the call (``ctx.principal``, when
the transport authenticates): ``tasks/*`` from anyone else get the unknown-task error, so an
id leaks nothing across callers. Ids are 144 random bits either way. It also keeps the OAuth
scopes its ``tools/call`` was checked to need (the tool's and the hooks': :attr:`TaskRun.scopes`,
taken from ``ctx.needed_scopes``, so that no hook is asked twice about one call), and
:meth:`TaskRunner.scopes_of` makes ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and a
``subscriptions/listen`` naming it in ``taskIds`` need them too (the server's
``required_scopes``, checked before dispatch on every transport): another token of the same
subject without them can neither read, steer nor hear the task.

Cancellation is cooperative in the spec and prompt here: ``tasks/cancel`` cancels the tool's
cancel scope, and the task settles as ``cancelled`` unless it had already finished. When a
serve block ends, its nursery cancels what still runs there (the tasks created through that
block's transport, not another's), and those tasks settle as ``cancelled`` too. For a plain
``def`` tool, cancelling abandons its worker thread, as a cancelled request does: the thread
runs to its end in the background and its result is dropped.

Every change of a task's record (status, message, questions) queues its full state, as
``tasks/get`` would report it, for ``notifications/tasks``, through the server's sessions
and HTTP endpoints, to the ``subscriptions/listen`` streams of the task's owner whose filter
names it in ``taskIds`` (sessions with no such stream are skipped). The queue keeps the
latest state per task (each notification carries the whole state, so an older one waiting
says nothing the newer does not), in the order of the tasks' last changes, and holds
``max_pending_notifications`` tasks; past it an entry goes, the oldest not terminal if
any (polling still tells). One delivery loop runs per serve block; they park on one
``ParkingLot`` that every change unparks, and take turns through a lock, so any serve
block still open delivers whatever the others leave. When the last block closes, what
still waits is dropped (nothing would deliver it, and a later block would deliver it
stale).

Inside a task, :class:`~mcp_trio.Context` keeps working: asks park the task in
``input_required`` until ``tasks/update`` answers them; progress reports become the task's
``statusMessage`` (the extension sends no progress notifications for tasks); log messages
are dropped (no request is left to carry them).
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Collection, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar, cast, final

import attrs
import trio

from mcp_sansio import Era, ErrorCode, ErrorData
from mcp_sansio._config import check_count
from mcp_sansio._json import dumps, kept
from mcp_sansio._tasks import (
    TERMINAL_STATUSES,
    Task,
    TaskStatus,
    bounded_status_message,
    declares_tasks,
    missing_tasks_capability,
    parse_task_id,
    parse_update_params,
    status_notification,
    task_not_found,
)

from ._errors import McpError
from ._handlers import InputRequiredResult, RequestContext
from ._util import open_task_nursery

if TYPE_CHECKING:
    from mcp_sansio._http_auth import Principal

    from ._server import Server

_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
_T = TypeVar("_T")

__all__ = [
    "TaskConfig",
    "TaskRun",
    "TaskRunner",
    "TaskStart",
    "TaskSupport",
    "running_tasks",
]

logger = logging.getLogger("mcp_trio.server")

TaskSupport: TypeAlias = Literal["optional", "required"]
"""How a tool uses tasks: ``"optional"`` -- a task for a client that declared the
extension, a plain call otherwise; ``"required"`` -- -32021 for a client that did not."""
TaskStart: TypeAlias = Literal["call", "explicit"]
"""When a task tool's task is created: ``"call"`` -- before the tool runs;
``"explicit"`` -- when the tool calls :meth:`~mcp_trio.Context.start_task`."""

_Outcome: TypeAlias = dict[str, Any] | InputRequiredResult
_INTERNAL: Final = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="Internal error")
_EXPIRED: Final = ErrorData(
    code=ErrorCode.INTERNAL_ERROR, message="The task expired: its TTL elapsed before it finished"
)
_TOO_MANY_QUESTIONS: Final = ErrorData(
    code=ErrorCode.INTERNAL_ERROR, message="Too many questions outstanding"
)
#: The errors the server makes itself that a run may end with: shared, a few dozen bytes,
#: not counted against ``max_stored_bytes`` (``max_tasks`` bounds how many tasks hold one;
#: a refused store is not counted either: see :attr:`TaskRun._refused`).
_UNCOUNTED: Final = (_INTERNAL, _TOO_MANY_QUESTIONS)


def _store_full(need: str, held: int, bound: int, *, share: bool = False) -> str:
    """Why a task, or what it would store, is refused: it ``need``s room (a sentence's
    clause), and ``held`` of ``bound`` bytes are held by tasks that may not be evicted yet
    -- all callers' (``max_stored_bytes``), or the caller's own (``share``:
    ``max_stored_bytes_per_owner``). Computed before anything is evicted: a refusal
    evicts nothing."""
    where = (
        f"your tasks hold {held} of the {bound} bytes one caller may"
        if share
        else f"{held} of {bound} bytes are held"
    )
    return f"The server's task store is full: {need}, {where}"


def _too_large(what: str, size: int, bound: str, limit: int) -> str:
    """Why ``what`` (``size`` bytes) can never be kept: it alone passes ``bound``."""
    return f"The {what} ({size} bytes) is larger than {bound} ({limit})"


@final
@attrs.frozen(kw_only=True)
class TaskConfig:
    """The bounds and hints of a server's tasks.

    Raises:
        ValueError: a value is not a positive integer.
    """

    max_tasks: int = attrs.field(default=1024, validator=check_count(1))
    """How many tasks are kept at once, running or finished, for all callers together.
    A call that finds the table full (after expired tasks are purged, and a collected
    one evicted if any: see :mod:`mcp_trio._tasks`) runs without a task, or, for a
    ``task="required"`` tool, is refused with -32603."""
    max_tasks_per_owner: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_count(1))
    )
    """How many of them one identified caller may hold (the authenticated subject;
    without authentication, one connection: stdio, WebSocket, in memory), so that one
    caller cannot deny everyone else. ``None`` (the default): no quota, only
    ``max_tasks``. Anonymous HTTP requests cannot be told apart, so the quota never
    applies to them (only ``max_tasks``). Past it the caller's oldest collected task is
    evicted if it has one; else the call is treated as when the table is full."""
    retention_after_fetch_ms: int = attrs.field(default=60_000, validator=check_count(0))
    """How long, in ms, a terminal task stays after its caller fetched its end with
    ``tasks/get`` (or cancelled it while it ran) before a bound may evict it, so that a
    caller whose reply was lost can ask again. Default: a minute."""
    ttl_ms: int = attrs.field(default=3_600_000, validator=check_count(1))
    """How long a task is kept after its creation (``ttlMs``), in ms. Work still running
    then is cancelled at once, and ``tasks/get`` answers "unknown task"; the record is
    purged on the next look-up or creation (lazily: a finished record may outstay its TTL,
    within ``max_tasks``). Default: one hour."""
    poll_interval_ms: int = attrs.field(default=1000, validator=check_count(1))
    """The polling interval suggested to clients (``pollIntervalMs``), in ms."""
    max_input_requests: int = attrs.field(default=32, validator=check_count(1))
    """How many questions one task may have outstanding at once; one more fails the ask
    with -32603."""
    max_stored_bytes: int = attrs.field(default=64 * 1024 * 1024, validator=check_count(1))
    """How many bytes the tasks kept may hold, all together, in what a task stores for
    later: its result, a tool's error (code, message and data), and its outstanding
    questions. Each is counted once, as the length of its compact JSON encoding, when it
    is stored -- the result is kept in that encoding and embedded as it is in every
    ``tasks/get`` and ``notifications/tasks``, so it is encoded once, not once per poll.
    The errors the server makes itself (expired, internal, too large: a few dozen bytes
    each, which ``max_tasks`` bounds) are not counted.

    An outcome that would pass the bound evicts collected tasks as ``max_tasks`` does
    (the caller's own oldest collected tasks first, then anyone's; see
    :mod:`mcp_trio._tasks`); if that cannot make room (or it alone is larger than the
    bound), the task ends ``failed`` with -32603 saying its outcome was too large to
    keep. A question that cannot be kept fails the ask with -32603. The bytes are
    released when the task is purged (TTL, eviction, a withdrawn call) or the question
    answered or withdrawn.

    A call that finds the bound reached (after expired tasks are purged and collected
    ones evicted) is treated as when the table is full: it runs without a task, or, for
    a ``task="required"`` tool, is refused with -32603 ("the server's task store is
    full") -- no work is started only for its outcome to be thrown away.

    Default: 64 MiB -- sixteen results at the default 4 MiB message bound
    (:attr:`~mcp_sansio.ConnectionConfig.max_message_size`), or thousands of ordinary
    ones; without it, ``max_tasks`` results of any size could be kept (gigabytes).
    Raise it for a server whose tools return large results to many callers at once."""
    max_stored_bytes_per_owner: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_count(1))
    )
    """How many of those bytes one identified caller's tasks may hold (the caller of
    ``max_tasks_per_owner``; anonymous HTTP requests are never counted against it), so
    that one caller's unfetched results cannot fill ``max_stored_bytes`` for everyone.
    ``None`` (the default): no share, only ``max_stored_bytes``. Past it, the caller's
    own collected tasks are evicted (oldest first), never another caller's; if that
    cannot make room, its new task is treated as when the table is full, and an
    outcome or question is refused with -32603 ("the server's task store is full"),
    as for ``max_stored_bytes``."""
    reserved_bytes_per_task: int = attrs.field(default=0, validator=check_count(0))
    """How many bytes a new task reserves for its outcome: admitting it needs that much
    room (after the usual purge and evictions), and the reservation counts against
    ``max_stored_bytes`` (and the caller's ``max_stored_bytes_per_owner``) while the task
    runs, so a full store admits no task whose outcome could not be kept. When the task
    ends the reservation is released and its outcome stored in its place: an outcome of
    at most this size always fits; a larger one needs the rest as usual (it may still
    fail the task, "the server's task store is full"). ``0`` (the default): nothing is
    reserved, and a new task needs room for one byte -- a store filled to just below its
    bound still admits tasks whose outcomes may then not fit. Set it to the size of a
    typical result (a few KiB) on a server whose store can fill up. At most
    ``max_stored_bytes`` (and ``max_stored_bytes_per_owner``): else no task could be
    admitted. A running task's questions (``input_required``) are counted on top of its
    reservation: one equal to ``max_stored_bytes_per_owner`` (or ``max_stored_bytes``)
    leaves a task no room for any question -- each of its asks is refused as above, and
    fails the task unless the tool catches it."""
    max_status_message_bytes: int = attrs.field(default=4096, validator=check_count(3))
    """How long a task's ``statusMessage`` may be, in bytes of UTF-8: a longer one (a
    tool's :meth:`~mcp_trio.Context.report_progress` message, or the message of the
    error a task fails with) is cut between two characters to fit, ending with ``…``
    (U+2026) -- the tool goes on: a status message is a human-readable word, not a
    payload, so it is never refused. A lone surrogate in it (``os.fsdecode`` of a name
    that is not UTF-8, say), which no JSON text can carry, becomes U+FFFD. It is not
    counted against ``max_stored_bytes``: this bound and ``max_tasks`` bound it instead
    (4 MiB at the defaults). A failed task's ``error`` keeps the whole message (it is
    counted). Default: 4 KiB; at least 3 (room for the ellipsis)."""
    max_pending_notifications: int = attrs.field(default=256, validator=check_count(1))
    """How many tasks may have a ``notifications/tasks`` waiting to be delivered (only
    the latest state of each waits); past it one is dropped, the oldest not terminal if
    any, else the oldest (a client still learns the state by polling, which
    ``notifications/tasks`` only spares it)."""

    def __attrs_post_init__(self) -> None:
        reserved = self.reserved_bytes_per_task
        for name in ("max_stored_bytes", "max_stored_bytes_per_owner"):
            bound = getattr(self, name)
            if bound is not None and reserved > bound:
                raise ValueError(
                    f"reserved_bytes_per_task ({reserved}) must be at most {name} ({bound})"
                )


@final
class _Launch:
    """How a task tool's call is answered: the first outcome of its run."""

    __slots__ = ("done", "error", "outcome")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.outcome: _Outcome | None = None
        self.error: ErrorData | None = None

    def answer(self, outcome: _Outcome | None = None, error: ErrorData | None = None) -> None:
        if not self.done.is_set():
            self.outcome, self.error = outcome, error
            self.done.set()


@final
class TaskRun:
    """One task tool call's run: before :meth:`start`, an ordinary call; after, a task.

    The :class:`~mcp_trio.Context` of the tool reaches it; application code does not.
    """

    def __init__(
        self,
        runner: TaskRunner,
        support: TaskSupport,
        owner: str | None = None,
        *,
        caller: object = None,
    ) -> None:
        self._runner = runner
        self._support = support
        self.owner = owner
        """The subject of the principal that made the call (``None``: none was
        authenticated); only that subject finds the task."""
        self.caller = caller
        """Who the task counts against for ``max_tasks_per_owner`` (see
        ``TaskRunner._caller``)."""
        self.collected_at: float | None = None
        """When (trio's clock) its caller had what it needs: a ``tasks/get`` answered with
        the terminal state, or a ``tasks/cancel`` of the running task. A terminal task
        collected ``retention_after_fetch_ms`` ago may be evicted before its TTL to make
        room (see the module docstring)."""
        self.scopes: frozenset[str] = frozenset()
        """The OAuth scopes its ``tools/call`` needed (declared and added by the server's
        hook): ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and ``notifications/tasks``
        need them too."""
        self.scope = trio.CancelScope()
        """The tool's cancel scope: ``tasks/cancel`` cancels it, and its deadline is the
        task's expiry (``trio.current_time()`` plus the TTL, set when the task is created)."""
        self.launch = _Launch()
        self.task: Task | None = None
        """The task record, once started."""
        self.result: bytes | None = None
        """The result (``completed``), JSON-encoded (see :attr:`TaskConfig.max_stored_bytes`)."""
        self.error: ErrorData | None = None
        """The error (``failed``)."""
        self.stored_bytes = 0
        """What its stored outcome and questions, or its reservation while it runs, count
        against :attr:`TaskConfig.max_stored_bytes`."""
        self.reserved = 0
        """The bytes reserved for its outcome while it runs
        (:attr:`TaskConfig.reserved_bytes_per_task`; part of :attr:`stored_bytes`)."""
        self._question_bytes: dict[str, int] = {}
        self._refused: ErrorData | None = None
        """The error its last question was refused with, if any: made by the server,
        and not counted if the run ends with it."""
        self.cancel_requested = False
        """Whether the client asked for ``tasks/cancel``."""
        self.pending: dict[str, dict[str, Any]] = {}
        """The questions outstanding, by key (``inputRequests``)."""
        self._answers: dict[str, Any] = {}
        self._waiters: dict[str, trio.Event] = {}
        self._checks: dict[str, Callable[[Any], object]] = {}

    @property
    def started(self) -> bool:
        """Whether the task exists (the call was answered with it)."""
        return self.task is not None

    @property
    def task_id(self) -> str | None:
        """The task's id, once started."""
        return None if self.task is None else self.task.task_id

    def start(self) -> bool:
        """Create the task and answer the call with it (at most once).

        Returns:
            Whether the call is now a task: ``False`` when the table is full and the tool
            is ``optional`` (it runs on as an ordinary call), or when the call was
            withdrawn (its run is being cancelled, and nobody would learn the task's id).

        Raises:
            McpError: -32603, the table is full and the tool is ``required``.
        """
        if self.task is not None:
            return True
        if self.scope.cancel_called or self.launch.done.is_set():
            return False  # (withdrawn, or already answered: nobody would learn its id)
        task = self._runner._admit(self)
        if isinstance(task, str):
            if self._support == "required":
                raise McpError(ErrorData(code=ErrorCode.INTERNAL_ERROR, message=task))
            return False
        self.launch.answer(task.create_result())
        return True

    def set_message(self, message: str | None) -> None:
        """Set the task's ``statusMessage`` (nothing once it is terminal), cut to
        :attr:`TaskConfig.max_status_message_bytes`."""
        if self.task is not None and not self.task.terminal:
            self.task = self.task.with_message(self._bounded(message), now=time.time())
            self._runner._changed(self)

    def _move(self, status: TaskStatus, message: str | None = None) -> None:
        assert self.task is not None
        if not self.task.terminal:
            message = self._bounded(message)
            self.task = self.task.moved_to(status, now=time.time(), message=message)
            self._runner._changed(self)

    def _bounded(self, message: str | None) -> str | None:
        """``message`` cut to :attr:`TaskConfig.max_status_message_bytes`."""
        if message is None:
            return None
        return bounded_status_message(message, self._runner.config.max_status_message_bytes)

    async def ask(self, key: str, request: dict[str, Any], check: Callable[[Any], _T]) -> _T:
        """Ask the client ``request`` through the task: park it in ``input_required`` until
        ``tasks/update`` answers ``key``, and return the answer as ``check`` read it.

        Args:
            key: the question's key (made unique over the task's lifetime).
            request: the ``InputRequest`` (``method`` and ``params``).
            check: reads an answer, or raises :class:`~mcp_trio.McpError` (-32602) for
                one that does not fit ``request``: ``tasks/update`` refuses such an
                answer, and the question stays outstanding.

        Raises:
            McpError: -32603, too many questions outstanding.
        """
        if len(self.pending) >= self._runner.config.max_input_requests:
            raise McpError(_TOO_MANY_QUESTIONS)
        # A key names one request over the task's lifetime: the Context numbers its asks
        # (elicit-0, sample-1, ...) and never reuses a number; this guard keeps two open
        # questions apart whatever the caller does.
        base, n = key, 0
        while key in self.pending or key in self._answers:
            n += 1
            key = f"{base}.{n}"
        size = len(dumps(request))
        refused = self._runner._reserve(self, size, "question")
        if refused is not None:
            self._refused = ErrorData(code=ErrorCode.INTERNAL_ERROR, message=refused)
            raise McpError(self._refused)
        self._question_bytes[key] = size
        self.pending[key] = request
        self._checks[key] = check
        event = self._waiters[key] = trio.Event()
        self._move("input_required", self._message())
        try:
            await event.wait()
        finally:
            self._waiters.pop(key, None)
            self._checks.pop(key, None)
            if self._unask(key) and not self.pending:
                self._move("working", self._message())  # (asked, then cancelled)
        return cast("_T", self._answers.pop(key))

    def deliver(self, responses: dict[str, Any]) -> None:
        """``tasks/update``: answer the outstanding questions among ``responses`` (others
        -- never asked, answered already, withdrawn -- are ignored, as the spec says).

        Raises:
            McpError: -32602, an answer does not fit its question (see :meth:`ask`).
                Nothing was delivered: every question is still outstanding.
        """
        answers: dict[str, Any] = {}
        for key, value in responses.items():
            if key not in self.pending:
                continue
            try:
                answers[key] = self._checks[key](value)  # (read once: ask returns it)
            except McpError as exc:
                raise McpError(
                    ErrorData(
                        code=ErrorCode.INVALID_PARAMS,
                        message=f"Invalid params: inputResponses[{key!r}]: {exc.error.message}",
                    )
                ) from None
        for key, value in answers.items():
            self._unask(key)
            self._answers[key] = value
            self._waiters[key].set()
        if answers and not self.pending and self.task is not None:
            self._move("working", self._message())

    def _unask(self, key: str) -> bool:
        """Drop the question ``key`` if outstanding, releasing its bytes; whether it was."""
        if self.pending.pop(key, None) is None:
            return False
        self._runner._release(self, self._question_bytes.pop(key))
        return True

    def _message(self) -> str | None:
        return None if self.task is None else self.task.status_message

    def cancel(self) -> None:
        """``tasks/cancel``: cancel the work, if it still runs. A task cancelled while it
        ran is collected (its caller gave up on it); one already terminal is not: the
        ack says nothing of its end, which the caller may still fetch."""
        if self.task is not None and not self.task.terminal:
            self.collected_at = trio.current_time()
            self.cancel_requested = True
            self.scope.cancel()

    def _keep(self, outcome: dict[str, Any]) -> bytes | ErrorData:
        """Encode ``outcome`` (a result, or an error's wire form) and count it against
        :attr:`TaskConfig.max_stored_bytes`: the encoding, or the error the task fails
        with instead (too large to keep; not encodable)."""
        try:
            encoded = kept(dumps(outcome))  # (counted by its length: of its own size)
        except TypeError:  # (orjson.JSONEncodeError: a bug in the tool's output)
            logger.exception("task %s: its outcome cannot be encoded as JSON", self.task_id)
            return _INTERNAL
        refused = self._runner._reserve(self, len(encoded), "outcome")
        if refused is not None:
            logger.warning("task %s: its outcome cannot be kept: %s", self.task_id, refused)
            return ErrorData(code=ErrorCode.INTERNAL_ERROR, message=refused)
        return encoded

    def detailed(self) -> dict[str, Any]:
        """The ``tasks/get`` result."""
        assert self.task is not None
        status = self.task.status
        return self.task.detailed(
            result=self.result if status == "completed" else None,
            error=self.error if status == "failed" else None,
            input_requests=dict(self.pending) if status == "input_required" else None,
        )

    def settle(self, outcome: _Outcome | None, error: ErrorData | None) -> None:
        """The run ended: with ``outcome``, with ``error``, or cancelled (both ``None``)."""
        if self.task is None:
            # Not a task (yet): the call is answered as an ordinary one. A cancelled run
            # has nobody left to answer, unless the server stopped under a waiting call.
            if outcome is None and error is None:
                error = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="The server stopped")
            self.launch.answer(outcome, error)
            return
        if self.task.terminal:
            return
        if self.reserved:
            # Its outcome takes the reservation's place: released first, so an outcome
            # that fits in it always fits in the store.
            self._runner._release(self, self.reserved)
            self.reserved = 0
        if isinstance(outcome, InputRequiredResult):
            logger.error("task %s: a tool cannot return input_required in a task", self.task_id)
            outcome, error = None, _INTERNAL
        if outcome is not None or error is not None:
            # (A cancel came while it ran, but it ended anyway: its end is still to fetch.)
            self.collected_at = None
        if outcome is not None:
            kept = self._keep({**outcome, "resultType": outcome.get("resultType", "complete")})
            if isinstance(kept, bytes):
                self.result = kept
                self._move("completed")
                return
            error = kept
        elif error is not None and error is not self._refused and error not in _UNCOUNTED:
            kept = self._keep(error.to_wire())
            if isinstance(kept, ErrorData):
                error = kept
        if error is not None:
            self.error = error
            self._move("failed", error.message)
        elif self.cancel_requested:
            self._move("cancelled", "Cancelled at the client's request")
        elif trio.current_time() >= self.scope.deadline:
            # Its TTL elapsed: the spec lets a server mark such a task failed.
            self.error = _EXPIRED
            self._move("failed", _EXPIRED.message)
        else:
            self._move("cancelled", "Cancelled: the server stopped")


Deliver: TypeAlias = Callable[[str | None, dict[str, Any]], Awaitable[object]]
"""``async def deliver(owner, params)``: one ``notifications/tasks`` for a task's owner;
returns whether it went anywhere (truthy: a listen stream was sent it)."""


async def _drop(owner: str | None, params: dict[str, Any]) -> int:
    """A :data:`Deliver` that sends nothing."""
    del owner, params
    return 0


@final
class TaskRunner:
    """A server's tasks: the table, its bounds, and the nurseries the work runs in.

    Args:
        config: the bounds and hints.
        deliver: sends a ``notifications/tasks`` (see :attr:`deliver`); the default
            drops it (a runner of no server's, as in tests).
    """

    def __init__(self, config: TaskConfig | None = None, *, deliver: Deliver = _drop) -> None:
        self.config = config if config is not None else TaskConfig()
        self._tasks: dict[str, TaskRun] = {}  # (in order of creation, so of expiry)
        self._held: dict[object, int] = {}  # (how many tasks each caller holds)
        self._stored_bytes = 0  # (the sum of stored_bytes over the table)
        self._held_bytes: dict[object, int] = {}  # (the same, by caller: none hold 0)
        self._channels: weakref.WeakKeyDictionary[object, object] = weakref.WeakKeyDictionary()
        self._nurseries: set[trio.Nursery] = set()
        # The nursery of the serve block handling the current request: set in running(),
        # inherited by every task the block's transport spawns (trio copies the spawner's
        # context), so each request's work lives and dies with its own serve block.
        self._serving: ContextVar[trio.Nursery | None] = ContextVar(
            "mcp_trio tasks nursery", default=None
        )
        self.enabled = False
        """Whether a task tool is registered (the ``tasks/*`` methods exist)."""
        self.deliver: Deliver = deliver
        """Sends a ``notifications/tasks`` (its params) to the listen streams of the
        task's owner (a subject, or ``None``) that asked for it: the server's hook."""
        # By task id: the owner and the latest state, in the order of last change.
        self._outbox: OrderedDict[str, tuple[str | None, dict[str, Any]]] = OrderedDict()
        self._outbox_ready = trio.lowlevel.ParkingLot()
        self._delivering = trio.Lock()

    # ------------------------------------------------------------ the nursery

    @asynccontextmanager
    async def running(self, *, inherit: bool = True) -> AsyncGenerator[trio.Nursery]:
        """Run tasks in a nursery for the duration of the block (the server's
        ``serve_*`` methods do this). Blocks may nest or overlap: a task runs in the
        nursery of the block whose transport received its call (the innermost block
        around the code that spawned the request's task). On exit, the block's tasks
        that still run are cancelled; other blocks' tasks go on.

        ``inherit=False``: the block's own code does not hand its nursery on; only
        what is spawned inside :meth:`serving` does (``connect_in_memory``, whose block
        is the caller's).
        """
        async with open_task_nursery("tasks", cancel_on_exit=True) as nursery:
            self._nurseries.add(nursery)
            nursery.start_soon(self._notify_loop)
            token = self._serving.set(nursery) if inherit else None
            try:
                yield nursery
            finally:
                if token is not None:
                    self._serving.reset(token)
                self._nurseries.discard(nursery)
                if not self._nurseries:
                    # No loop is left to deliver what waits, and by the time a block
                    # opens again it would be stale: a listener polls instead.
                    self._outbox.clear()
                nursery.cancel_scope.cancel()

    @contextmanager
    def serving(self, nursery: trio.Nursery) -> Iterator[None]:
        """Tasks spawned inside this block (a transport's sessions) serve their calls
        with ``nursery`` (one of :meth:`running`)."""
        token = self._serving.set(nursery)
        try:
            yield
        finally:
            self._serving.reset(token)

    def _current_nursery(self) -> trio.Nursery | None:
        """The nursery of the serve block handling this request, while it is open."""
        nursery = self._serving.get()
        return nursery if nursery in self._nurseries else None

    # ------------------------------------------------------------ notifications

    def _changed(self, run: TaskRun) -> None:
        """A task's record changed: queue its latest state for ``notifications/tasks``
        (bounded: see :attr:`TaskConfig.max_pending_notifications`). A task purged from
        the table has nobody to tell: it is unknown from then on."""
        task_id = run.task_id or ""
        if not self._nurseries or self._tasks.get(task_id) is not run:
            return
        outbox = self._outbox
        outbox.pop(task_id, None)
        outbox[task_id] = (run.owner, status_notification(run.detailed()))
        if len(outbox) > self.config.max_pending_notifications:
            # A task's end is what a listener most needs: drop a state on the way first.
            victim = next(
                (key for key, (_, p) in outbox.items() if p.get("status") not in TERMINAL_STATUSES),
                next(iter(outbox)),
            )
            del outbox[victim]
        self._outbox_ready.unpark_all()

    async def _notify_loop(self) -> None:
        """Deliver the queued notifications (one loop per serve block; the lock lets
        one deliver at a time, and keeps them in order whichever loop sends). Checking
        the queue and parking involve no checkpoint: a change cannot slip in between."""
        while True:
            if not self._outbox:
                await self._outbox_ready.park()
            async with self._delivering:
                while self._outbox:
                    task_id, (owner, params) = self._outbox.popitem(last=False)
                    try:
                        await self.deliver(owner, params)
                    except BaseException:
                        # This block ends: leave the state to a loop still running, if
                        # any (its block is still open); else it goes, as it would have
                        # gone when the last block closed (see running()). A task purged
                        # meanwhile is unknown: nothing more is said of it.
                        if (
                            self._nurseries
                            and task_id in self._tasks
                            and task_id not in self._outbox
                        ):
                            self._outbox[task_id] = (owner, params)
                            self._outbox.move_to_end(task_id, last=False)
                        self._outbox_ready.unpark_all()
                        raise

    # ------------------------------------------------------------ the table

    def _purge(self) -> None:
        now = trio.current_time()
        while self._tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.scope.deadline > now:
                break
            self._forget(oldest)
            oldest.scope.cancel()

    @property
    def stored_bytes(self) -> int:
        """What the tasks in the table hold now, counted against
        :attr:`TaskConfig.max_stored_bytes`."""
        return self._stored_bytes

    def _forget(self, run: TaskRun) -> None:
        """Drop ``run`` from the table (it must be there), with its bytes and its waiting
        notification (a purged task is unknown: nothing more is said of it)."""
        task_id = run.task_id or ""
        del self._tasks[task_id]
        self._count(run.caller, -run.stored_bytes)
        self._outbox.pop(task_id, None)
        left = self._held[run.caller] - 1
        if left:
            self._held[run.caller] = left
        else:
            del self._held[run.caller]

    def _evictable(
        self, caller: object, *, anyone: bool, skip: Collection[TaskRun] = ()
    ) -> Iterator[TaskRun]:
        """The collected terminal tasks past their grace, not in ``skip``, in the order a
        bound evicts them: ``caller``'s own oldest first, then (``anyone``) any other
        caller's oldest. Only chooses: the table is not changed (see :meth:`_admit`)."""
        since = trio.current_time() - self.config.retention_after_fetch_ms / 1000
        others: list[TaskRun] = []
        for victim in self._tasks.values():
            if (
                victim.collected_at is not None
                and victim.collected_at <= since
                and victim.task is not None
                and victim.task.terminal
                and victim not in skip
            ):
                if victim.caller == caller:
                    yield victim
                elif anyone:
                    others.append(victim)
        yield from others

    def _count(self, caller: object, delta: int) -> None:
        """Add ``delta`` bytes to what the table holds, all together and by ``caller``."""
        self._stored_bytes += delta
        held = self._held_bytes.get(caller, 0) + delta
        if held:
            self._held_bytes[caller] = held
        else:
            self._held_bytes.pop(caller, None)

    def _reserve(self, run: TaskRun, size: int, what: str) -> str | None:
        """Count ``size`` more bytes stored by ``run`` (its ``what``: an outcome, a
        question), making room as a full table does (expired tasks purged, then
        collected ones evicted: past the caller's share, only its own; past the total,
        the caller's own oldest first, then anyone's; what the share evicts counts for
        the total too: :meth:`_make_room_for`). ``None`` if they fit; else why not, and
        nothing is evicted: the victims are evicted only if both bounds are then met. A run
        no longer in the table (purged, withdrawn) counts towards nothing: nobody can
        reach what it keeps, which goes with it."""
        config = self.config
        limit = config.max_stored_bytes
        share = config.max_stored_bytes_per_owner
        caller = run.caller
        if share is not None and caller is None:
            share = None  # (anonymous HTTP: only the total bounds it)
        if self._stored_bytes + size > limit or (
            share is not None and self._held_bytes.get(caller, 0) + size > share
        ):
            self._purge()
        if self._tasks.get(run.task_id or "") is not run:
            run.stored_bytes += size
            return None
        if size > limit:
            return _too_large(what, size, "max_stored_bytes", limit)
        if share is not None and size > share:
            return _too_large(what, size, "max_stored_bytes_per_owner", share)
        # A refused outcome must not cost its caller the collected tasks it had as well.
        refused = self._make_room_for(caller, size, f"the {what} needs {size} bytes", [])
        if refused is not None:
            return refused
        self._hold(run, size)
        return None

    def _hold(self, run: TaskRun, size: int) -> None:
        """``run`` stores ``size`` more bytes (room made already: see :meth:`_reserve`)."""
        run.stored_bytes += size
        if self._tasks.get(run.task_id or "") is run:
            self._count(run.caller, size)

    def _release(self, run: TaskRun, size: int) -> None:
        """``run`` no longer stores ``size`` of its bytes."""
        run.stored_bytes -= size
        if self._tasks.get(run.task_id or "") is run:
            self._count(run.caller, -size)

    def _make_room_for(
        self, caller: object, size: int, need: str, victims: list[TaskRun]
    ) -> str | None:
        """Make room for ``size`` more bytes of ``caller``'s: choose collected tasks to
        evict, past its share (``max_stored_bytes_per_owner``, when ``caller`` is
        identified: only its own), then past the total (its own oldest first, then
        anyone's), counting those already in ``victims`` (chosen by an earlier bound) as
        freed; then evict every victim. ``None`` if both bounds are met; else why not
        (:func:`_store_full` with ``need``, what wants the room), and nothing is evicted.
        Shared by :meth:`_reserve` (``size``: what is stored) and :meth:`_admit`
        (``size`` 1: a new task needs room for some outcome)."""
        config = self.config
        share = config.max_stored_bytes_per_owner
        if share is not None and caller is not None:  # (anonymous HTTP: only the total)
            held = self._held_bytes.get(caller, 0)
            over = held + size - share
            if victims:
                over -= sum(v.stored_bytes for v in victims if v.caller == caller)
            if over > 0 and not self._make_room(caller, over, victims, anyone=False):
                return _store_full(need, held, share, share=True)
        held = self._stored_bytes
        limit = config.max_stored_bytes
        over = held + size - limit
        if victims:
            over -= sum(victim.stored_bytes for victim in victims)
        if over > 0 and not self._make_room(caller, over, victims, anyone=True):
            return _store_full(need, held, limit)
        for victim in victims:
            self._forget(victim)
        return None

    def _make_room(
        self, caller: object, needed: int, victims: list[TaskRun], *, anyone: bool
    ) -> bool:
        """Choose collected tasks holding bytes, not yet in ``victims``, that would free
        ``needed`` bytes (in :meth:`_evictable`'s order), and add them to ``victims``.
        Whether they would; if not, ``victims`` is left as it was. Nothing is evicted
        here: the caller evicts ``victims`` once every bound is met."""
        chosen: list[TaskRun] = []
        for victim in self._evictable(caller, anyone=anyone, skip=victims):
            if victim.stored_bytes:
                chosen.append(victim)
                needed -= victim.stored_bytes
                if needed <= 0:
                    victims += chosen
                    return True
        return False

    def _admit(self, run: TaskRun) -> Task | str:
        """Make ``run`` a task, unless a bound refuses it: then why, in a sentence.
        A collected task makes room if needed (see the module docstring)."""
        self._purge()
        config = self.config
        caller = run.caller
        # Each bound chooses its victims in turn (what an earlier one chose counts for
        # the later ones); they are evicted only once every bound is met, so a refused
        # call costs nobody a task.
        victims: list[TaskRun] = []
        quota = config.max_tasks_per_owner
        if (
            quota is not None
            and caller is not None  # (anonymous HTTP: only max_tasks bounds it)
            and self._held.get(caller, 0) >= quota
        ):
            victim = next(self._evictable(caller, anyone=False), None)
            if victim is None:
                return (
                    "You hold as many tasks as this server allows one caller: fetch the "
                    "results of finished ones or cancel some, then try again"
                )
            victims.append(victim)
        if len(self._tasks) - len(victims) >= config.max_tasks:
            victim = next(self._evictable(caller, anyone=True, skip=victims), None)
            if victim is None:
                return "The server is running as many tasks as it may; try again later"
            victims.append(victim)
        # The stored bytes at their bound: a new task's outcome could not be kept, so
        # no work starts only to be thrown away (see TaskConfig.max_stored_bytes).
        reserved = config.reserved_bytes_per_task
        need = (
            f"a new task needs {reserved} bytes reserved for its outcome"
            if reserved
            else "a new task needs room for its outcome"
        )
        refused = self._make_room_for(caller, max(reserved, 1), need, victims)
        if refused is not None:
            return refused
        task_id = secrets.token_urlsafe(18)  # 144 bits: the id is the task's only key
        run.task = Task.created(
            task_id,
            now=time.time(),
            ttl_ms=config.ttl_ms,
            poll_interval_ms=config.poll_interval_ms,
        )
        # Trio cancels the work at its expiry, whether or not anyone looks at the table.
        run.scope.deadline = trio.current_time() + config.ttl_ms / 1000
        self._tasks[task_id] = run
        self._held[run.caller] = self._held.get(run.caller, 0) + 1
        if reserved:
            run.reserved = reserved
            self._hold(run, reserved)
        return run.task

    def _withdraw(self, run: TaskRun) -> None:
        """The call of ``run`` went away unanswered: cancel the work and forget its task,
        if one was created (its id never reached anyone)."""
        run.scope.cancel()
        task_id = run.task_id
        if task_id is not None and self._tasks.get(task_id) is run:
            self._forget(run)

    def lookup(self, task_id: str) -> TaskRun | None:
        """The task ``task_id``, unless unknown or expired."""
        self._purge()
        return self._tasks.get(task_id)

    # ------------------------------------------------------------ calls

    async def call(
        self,
        ctx: RequestContext,
        support: TaskSupport,
        start: TaskStart,
        run: Callable[[TaskRun], Awaitable[_Outcome]],
        what: str,
    ) -> _Outcome | None:
        """Answer a task tool's call: the ``CreateTaskResult``, the tool's own outcome
        (see the module docstring), or ``None`` when the call should run as an ordinary one
        (legacy era; an ``optional`` tool for a client without the extension, or with no
        runner serving).

        Raises:
            McpError: a ``required`` tool for a client without the extension (-32021) or
                with no runner serving (-32603); the tool's protocol error before a task
                existed.
        """
        if ctx.era is not Era.MODERN:
            return None  # the extension is modern-only: a legacy call runs as before
        if not declares_tasks(ctx.client_capabilities):
            if support == "required":
                raise McpError(missing_tasks_capability(what))
            return None
        nursery = self._current_nursery()
        if nursery is None:
            if support == "required":
                raise McpError(
                    ErrorData(
                        code=ErrorCode.INTERNAL_ERROR,
                        message="This server runs no tasks now (serve it with Server.serve_*)",
                    )
                )
            return None
        handle = TaskRun(self, support, _subject(ctx), caller=self._caller(ctx))
        # What the call's scope check found, handed on with the request (the hook is
        # asked once per request); nothing for a caller nobody authenticated.
        checked = getattr(ctx, "needed_scopes", None)
        handle.scopes = frozenset() if checked is None else checked
        nursery.start_soon(self._drive, handle, run, start == "call")
        try:
            await handle.launch.done.wait()
            # A cancel handled in the round the launch was answered: the wait returned,
            # but the answer will be dropped, so the task too (this adds no schedule
            # point when nothing was cancelled).
            await trio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            # The request went away (cancelled, connection closed), perhaps in the very
            # round its task was created: nobody will learn of it, so it must not run on
            # nor hold a place in the table.
            self._withdraw(handle)
            raise
        if handle.launch.error is not None:
            raise McpError(handle.launch.error)
        return handle.launch.outcome

    async def _drive(
        self, handle: TaskRun, run: Callable[[TaskRun], Awaitable[_Outcome]], start: bool
    ) -> None:
        """The tool's task, in the runner's nursery: run it, then settle the outcome."""
        if handle.scope.cancel_called:  # withdrawn before it was first scheduled
            handle.settle(None, None)
            return
        settled = False
        try:
            with handle.scope:
                try:
                    if start:
                        handle.start()
                    outcome = await run(handle)
                except McpError as exc:
                    handle.settle(None, exc.error)
                except Exception:
                    logger.exception("task tool failed")
                    handle.settle(None, _INTERNAL)
                else:
                    handle.settle(outcome, None)
                settled = True
        finally:
            if not settled:
                handle.settle(None, None)

    # ------------------------------------------------------------ the methods

    def _check_tasks_methods_available(self, ctx: RequestContext) -> None:
        """-32601 unless a task tool is registered and the era is modern; -32021 unless
        the request declares the extension."""
        if not self.enabled or ctx.era is not Era.MODERN:
            raise McpError(
                ErrorData(
                    code=ErrorCode.METHOD_NOT_FOUND, message=f"Method not found: {ctx.method}"
                )
            )
        if not declares_tasks(ctx.client_capabilities):
            raise McpError(missing_tasks_capability(ctx.method))

    def _find(self, ctx: RequestContext, task_id: str | ErrorData) -> TaskRun:
        if isinstance(task_id, ErrorData):
            raise McpError(task_id)
        found = self.lookup(task_id)
        if found is None or found.owner != _subject(ctx):
            # Another caller's task is as unknown as one never created: the id leaks
            # nothing (security considerations, "cross-caller correlation").
            raise McpError(task_not_found(task_id))
        return found

    async def tasks_get(self, ctx: RequestContext) -> dict[str, Any]:
        """``tasks/get``: the task's status, and its result, error or questions."""
        self._check_tasks_methods_available(ctx)
        found = self._find(ctx, parse_task_id(ctx.params))
        answer = found.detailed()
        if found.task is not None and found.task.terminal and found.collected_at is None:
            # The caller now has the end (unless this reply is lost: the grace of
            # retention_after_fetch_ms, counted from the first fetch, lets it ask again).
            found.collected_at = trio.current_time()
        return answer

    async def tasks_update(self, ctx: RequestContext) -> dict[str, Any]:
        """``tasks/update``: deliver answers to outstanding questions; an empty ack."""
        self._check_tasks_methods_available(ctx)
        params = parse_update_params(ctx.params)
        if isinstance(params, ErrorData):
            raise McpError(params)
        self._find(ctx, params.task_id).deliver(params.input_responses)
        return {}

    async def tasks_cancel(self, ctx: RequestContext) -> dict[str, Any]:
        """``tasks/cancel``: cancel the work if it still runs; an empty ack either way."""
        self._check_tasks_methods_available(ctx)
        self._find(ctx, parse_task_id(ctx.params)).cancel()
        return {}

    def scopes_of(self, principal: Principal, method: str, params: object) -> frozenset[str]:
        """The scopes a ``tasks/get``, ``tasks/update``, ``tasks/cancel`` (``taskId``)
        or ``subscriptions/listen`` (``notifications.taskIds``, all together: the stream
        carries each one's full state) needs from ``principal``: those of the named
        tasks it owns. Others' tasks and unknown ids need none (they are unknown to it)."""
        if not self._tasks or not isinstance(params, dict):
            return frozenset()
        if method == "subscriptions/listen":
            wanted = params.get("notifications")
            ids = wanted.get("taskIds") if isinstance(wanted, dict) else None
        else:
            ids = [params.get("taskId")]
        if not isinstance(ids, list):
            return frozenset()
        needed: set[str] = set()
        for task_id in ids:
            run = self.lookup(task_id) if isinstance(task_id, str) else None
            if run is not None and run.scopes and run.owner == principal.subject:
                needed |= run.scopes
        return frozenset(needed)

    def _caller(self, ctx: object) -> object:
        """Who a call counts against for ``max_tasks_per_owner``: the authenticated
        subject; else a token for the connection it came on (``ctx.session``: stdio,
        WebSocket, in memory), held weakly so a closed one is not kept alive; else
        ``None`` (anonymous HTTP: nothing tells its callers apart)."""
        subject = _subject(ctx)
        if subject is not None:
            return subject
        session = ctx.session if isinstance(ctx, RequestContext) else None  # (HTTP: none)
        if session is None:
            return None
        token = self._channels.get(session)
        if token is None:
            token = self._channels[session] = object()
        return token


def _subject(ctx: object) -> str | None:
    """The authenticated caller's subject (``None`` when the transport authenticates
    nobody): tasks belong to it."""
    principal = getattr(ctx, "principal", None)
    return None if principal is None else principal.subject


# ------------------------------------------------------------ the server's hooks


def running_tasks(method: _F) -> _F:
    """Decorate a ``Server.serve_*`` method: its tasks run while it serves."""

    @functools.wraps(method)
    async def serve(self: Server, /, *args: Any, **kwargs: Any) -> Any:
        async with self._methods.tasks.running():
            return await method(self, *args, **kwargs)

    return cast(_F, serve)

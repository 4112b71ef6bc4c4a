"""Tool calls that run as tasks (the ``io.modelcontextprotocol/tasks`` extension), client side.

Theory of operation
-------------------
A modern client that declares the extension (``capabilities={"extensions":
{mcp_trio.TASKS_EXTENSION: {}}}``) must take either answer to a ``tools/call``: the result, or
a ``CreateTaskResult`` whose work goes on at the server (ext-tasks, "Capability
Negotiation"). :class:`ToolTask` is the handle on such a call: :meth:`~ToolTask.status` asks
``tasks/get`` once, :meth:`~ToolTask.result` waits for the end, :meth:`~ToolTask.cancel` asks
``tasks/cancel``. ``Client.call_tool`` drives one to its end itself, so a caller who never
heard of tasks gets the tool's result as from any call ("Backwards Compatibility").

Waiting is polling: ``tasks/get`` after the interval the server suggests (``pollIntervalMs``,
which clients SHOULD honor, "Task Polling"), clamped by :func:`mcp_sansio._tasks.poll_delay`
(never faster than 100 ms, never slower than a minute) and measured on trio's clock.
:meth:`~ToolTask.result` has no deadline of its own: the caller puts one around the wait
with a cancel scope (``trio.fail_after``), and the task lives on at the server
(``cancel()`` ends it there). ``call_tool`` is a plain call from its caller's view
(:meth:`~ToolTask.drive`): its ``timeout`` counts the time the task goes without a change,
``ConnectionConfig.max_request_time`` caps the whole call (counted from its ``tools/call``),
``statusMessage`` changes are its progress (counted on from the call's own progress), and a
wait that ends before the task does sends ``tasks/cancel`` (clients SHOULD poll to a
terminal status or cancel, "Task Polling"). Those deadlines are not cancel scopes: the
wait sleeps until the next poll or the nearer deadline, whichever comes first, and at a
deadline looks once more -- a task that ended (or, for ``timeout``, changed) meanwhile is
not given up unseen because the server asked for a long poll interval.

A task in ``input_required`` lists its questions (``inputRequests``); the handle answers
them with the client's own sampling / elicitation / roots callbacks -- the ones that answer
an ordinary call's questions -- and sends the answers with ``tasks/update``. Keys are unique
over a task's lifetime (the spec), so a key answered once is never answered again, whatever
a later poll shows before the server has caught up (the ack is eventually consistent, and
``inputRequests`` says nothing of answers on their way: clients "SHOULD track
inputRequests keys to avoid responding to requests more than once"). The keys answered,
and those being answered, are kept per task by the ``Client`` (:class:`AnsweredQuestions`)
and shared by every handle on the task -- ``call_tool``'s, ``call_tool_as_task``'s,
``Client.task(id)``'s -- so a handle resumed by id, or two waiting at once, never answer a
question another has answered or is answering. They are dropped when a handle sees the
task end; past :data:`_MAX_TASKS_REMEMBERED` tasks, the least recently used are forgotten
(not one whose question is being answered), and past :data:`_MAX_ANSWERED` keys a task's
least recently answered or listed: a round lists at most that many (more is refused before
any callback runs) and each listing makes its keys the newest, so no key the server still
lists is forgotten (unless handles waiting at once see rounds that list more together).
A ``tasks/update`` that got no ack (the wait was cancelled or timed out, the connection
closed) may have reached the server: its answers are kept, and the next round on the task
sends them again instead of asking the user anew (a server ignores an answer to a question
no longer outstanding); one the server refused with an error is asked anew.
What no client can know is what another ``Client`` (another process, after a restart)
answered: one resuming a task there may answer again a question still listed
(``tasks/update`` ignores an answer to a question no longer outstanding, so that costs a
callback, not the task).

After an answer the handle looks again at once, but only once: a task that asks anew at
once is then polled at its interval. A handle answers at most
``ConnectionConfig.max_input_rounds - 1`` rounds of questions, as an MRTR request does
(``refuse_endless_input``): when the task asks a ``max_input_rounds``-th round,
``RemoteProtocolError`` is raised before any callback is asked. The round count belongs to
the handle (it bounds one wait): a new one for the same task starts from no round.

The end is read as an ordinary call's would be: ``completed`` carries the tool's result,
converted and checked as ``call_tool`` does; ``failed`` carries the JSON-RPC error, raised as
:class:`~mcp_trio.McpError`; ``cancelled`` raises :class:`TaskCancelled`. Whatever the server
says is checked first (:func:`mcp_sansio._tasks.parse_task_state`): a malformed task raises
``RemoteProtocolError`` and leaves the session as it was.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, suppress
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

import attrs
import trio

from mcp_sansio import (
    ErrorCode,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
    RemoteProtocolError,
)
from mcp_sansio._tasks import (
    MAX_POLL_INTERVAL_MS,
    TASKS_CANCEL,
    TASKS_EXTENSION,
    TASKS_GET,
    TASKS_UPDATE,
    TaskState,
    parse_task_state,
    poll_delay,
)

from ._client_common import MAX_QUESTIONS, refuse_too_many_questions
from ._errors import McpError, RequestTimeout, SessionClosed
from ._errors_base import refuse_endless_input
from ._text import for_log

if TYPE_CHECKING:
    from ._client_callbacks import Callbacks, ProgressCallback
    from ._client_common import ToolOutput
    from ._client_subscriptions import Subscription

__all__ = ["TASKS_EXTENSION", "TaskCancelled", "TaskState", "ToolTask"]

logger = logging.getLogger("mcp_trio")

_MAX_ANSWERED: Final = MAX_QUESTIONS
"""Keys of answered questions remembered per task (the oldest are forgotten past it);
a round asking more is refused (``_client_common.refuse_too_many_questions``)."""
_MAX_TASKS_REMEMBERED: Final = 256
"""Tasks whose answered keys a client remembers (the least recently used are forgotten)."""
_CANCEL_TIMEOUT: Final = 2.0
"""Seconds the courtesy ``tasks/cancel`` of a transparent call given up may take."""

_V = TypeVar("_V")


def _polling_instead(task_id: str, failure: Exception) -> None:
    """Log that a wait polls, as its listen failed (``INFO``: the server's listen
    misbehaved, the task may be fine)."""
    logger.info(
        "task %s: polling, as the listen failed: %s", for_log(task_id), for_log(str(failure))
    )


Request = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
Convert = Callable[[str | None, dict[str, Any]], Awaitable["ToolOutput"]]
Subscribe = Callable[[str], AbstractAsyncContextManager["Subscription"]]


class TaskCancelled(Exception):
    """The task ended ``cancelled``: there is no result.

    Args:
        state: the task as last reported.
    """

    def __init__(self, state: TaskState) -> None:
        super().__init__(f"task {state.task_id} was cancelled: {state.status_message or ''}")
        self.state = state


def _read(obj: Any, task_id: str | None, *, detailed: bool) -> TaskState:
    state = parse_task_state(obj, expected_id=task_id, detailed=detailed)
    if not isinstance(state, TaskState):
        raise RemoteProtocolError(state.message, error_code=ErrorCode.INTERNAL_ERROR)
    return state


def _outcome(state: TaskState) -> dict[str, Any] | None:
    """The end ``state`` reports: the tool's result (``completed``), or raised as the
    call's error; ``None`` while the task runs.

    Every state looked at here was read with ``detailed=True`` (``tasks/get``, a
    notification), which refuses a ``completed`` task without its result, a ``failed``
    one without its error and an ``input_required`` one without ``inputRequests``; a
    ``CreateTaskResult`` (no payload) seeds a wait only when ``working``.

    Raises:
        McpError: ``failed``, with the task's JSON-RPC error.
        TaskCancelled: ``cancelled``.
    """
    if state.status == "completed":
        assert state.result is not None
        return state.result
    if state.status == "failed":
        assert state.error is not None
        raise McpError(state.error)
    if state.status == "cancelled":
        raise TaskCancelled(state)
    return None


@final
class _Keys:
    __slots__ = ("answered", "busy", "unacked")

    def __init__(self) -> None:
        self.answered: OrderedDict[str, None] = OrderedDict()
        self.busy: set[str] = set()
        self.unacked: OrderedDict[str, Any] = OrderedDict()


@final
class AnsweredQuestions:
    """The questions of each task a client has answered or is answering, by key: shared
    by all its handles on the task (see the module docstring); and the answers sent
    with a ``tasks/update`` whose ack never came (cancelled, timed out, connection
    lost), which the next round sends again rather than ask the user anew.

    Bounded: at most ``max_tasks`` tasks, the least recently used forgotten -- but never
    one with a question being answered (a callback is running: forgetting it would let
    another handle ask the same question at once), so the count may exceed
    ``max_tasks`` by the tasks being answered at that moment, which the client's own
    concurrent waits bound; ``max_keys`` answered keys per task, the least recently
    answered or listed forgotten first (a round lists at most ``max_keys``, more is
    refused, so a key the server still lists is not forgotten, unless handles waiting
    at once see rounds that list more together), and ``max_keys`` unacknowledged
    answers per task (oldest forgotten)."""

    def __init__(
        self, *, max_tasks: int = _MAX_TASKS_REMEMBERED, max_keys: int = _MAX_ANSWERED
    ) -> None:
        self._tasks: OrderedDict[str, _Keys] = OrderedDict()
        self._max_tasks = max_tasks
        self._max_keys = max_keys

    @property
    def max_keys(self) -> int:
        """Answered keys (and unacknowledged answers) remembered per task."""
        return self._max_keys

    def _keys(self, task_id: str) -> _Keys:
        keys = self._tasks.get(task_id)
        if keys is None:
            keys = self._tasks[task_id] = _Keys()
            excess = len(self._tasks) - self._max_tasks
            if excess > 0:
                idle = [k for k, v in self._tasks.items() if not v.busy and k != task_id]
                for victim in idle[:excess]:
                    del self._tasks[victim]
        else:
            self._tasks.move_to_end(task_id)
        return keys

    def claim(self, task_id: str, requests: Mapping[str, _V]) -> dict[str, _V]:
        """The questions of ``requests`` nobody has answered or is answering, now marked
        as being answered (:meth:`settle` ends that). The answered keys ``requests``
        lists again become the newest: the server has not caught up with them, so they
        are the last to be forgotten."""
        keys = self._keys(task_id)
        for key in requests:
            if key in keys.answered:
                keys.answered.move_to_end(key)
        fresh = {k: v for k, v in requests.items() if k not in keys.answered and k not in keys.busy}
        keys.busy.update(fresh)
        return fresh

    def unacked(self, task_id: str, keys: Iterable[str]) -> dict[str, Any]:
        """The answers to ``keys`` sent before without an ack (to send again)."""
        entry = self._tasks.get(task_id)
        if entry is None:
            return {}
        return {key: entry.unacked[key] for key in keys if key in entry.unacked}

    def settle(
        self,
        task_id: str,
        claimed: Iterable[str],
        answered: Iterable[str],
        unacked: Mapping[str, Any] | None = None,
    ) -> None:
        """The ``claimed`` questions are no longer being answered; the ``answered`` ones
        (acknowledged by ``tasks/update``) never will be again; the ``unacked`` answers
        were sent, but no ack came: the next round sends them again. Nothing for a task
        forgotten meanwhile (another handle saw its end)."""
        keys = self._tasks.get(task_id)
        if keys is None:
            return
        for key in claimed:  # (kept below only if ``unacked`` still holds it)
            keys.busy.discard(key)
            keys.unacked.pop(key, None)
        for key in answered:
            keys.unacked.pop(key, None)
            keys.answered[key] = None
            keys.answered.move_to_end(key)
        while len(keys.answered) > self._max_keys:
            keys.answered.popitem(last=False)
        for key, value in (unacked or {}).items():
            keys.unacked[key] = value
            keys.unacked.move_to_end(key)
        while len(keys.unacked) > self._max_keys:
            keys.unacked.popitem(last=False)

    def forget(self, task_id: str) -> None:
        """The task ended: nothing of it is left to answer."""
        self._tasks.pop(task_id, None)

    def __len__(self) -> int:
        """How many tasks are remembered."""
        return len(self._tasks)


@final
class ToolTask:
    """A tool call running as a task at the server. Get one from
    ``Client.call_tool_as_task`` or ``Client.task``.

    Error handling: every method may raise what a request does (``McpError``,
    ``RequestTimeout``, ``SessionClosed``), and ``RemoteProtocolError`` for a task the
    server reports malformed.
    """

    def __init__(
        self,
        request: Request,
        convert: Convert,
        callbacks: Callbacks,
        *,
        name: str | None,
        state: TaskState | None = None,
        task_id: str | None = None,
        immediate: dict[str, Any] | None = None,
        subscribe: Subscribe | None = None,
        max_input_rounds: int = 8,
        answered: AnsweredQuestions | None = None,
    ) -> None:
        self._request = request
        self._subscribe = subscribe
        self._convert = convert
        self._callbacks = callbacks
        self._answered = answered if answered is not None else AnsweredQuestions(max_tasks=1)
        self._rounds = 0  # (rounds of questions answered)
        self._max_input_rounds = max_input_rounds
        self.name = name
        """The tool's name (``None`` for a task resumed by id without one: its result
        is then not checked against an output schema)."""
        self.state = state
        """The task as last reported (``None``: the server answered the call at once)."""
        self.task_id = state.task_id if state is not None else task_id
        """The task's id (``None``: the server answered the call at once, no task)."""
        self._immediate = immediate
        self._end: TaskState | None = None  # (the terminal state, once seen: detailed)

    @classmethod
    def from_call(
        cls,
        request: Request,
        convert: Convert,
        callbacks: Callbacks,
        name: str,
        result: dict[str, Any],
        subscribe: Subscribe | None = None,
        max_input_rounds: int = 8,
        answered: AnsweredQuestions | None = None,
    ) -> ToolTask:
        """The handle of a ``tools/call`` answered with ``result``: a task when it is a
        ``CreateTaskResult``, else an ended call holding its result."""
        if result.get("resultType") == "task":
            state = _read(result, None, detailed=False)
            return cls(
                request,
                convert,
                callbacks,
                name=name,
                state=state,
                subscribe=subscribe,
                max_input_rounds=max_input_rounds,
                answered=answered,
            )
        return cls(request, convert, callbacks, name=name, immediate=result)

    async def status(self) -> TaskState:
        """Ask the server (``tasks/get``) how the task is, once; questions are not
        answered (:meth:`result` does that).

        Raises:
            RuntimeError: the call ran without a task.
        """
        if self.task_id is None:
            raise RuntimeError("the server answered this call at once: there is no task")
        got = await self._request(TASKS_GET, {"taskId": self.task_id})
        return self._seen(_read(got, self.task_id, detailed=True))

    def _seen(self, state: TaskState) -> TaskState:
        self.state = state
        if state.terminal:
            self._end = state
            self._answered.forget(state.task_id)
        return state

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cancellation is
        cooperative: the task may still end otherwise. Nothing for an ended call."""
        if self.task_id is not None:
            await self._request(TASKS_CANCEL, {"taskId": self.task_id})

    async def result(self, *, notifications: bool = False) -> ToolOutput:
        """Wait for the task's end and return the tool's result, as ``call_tool`` would.
        Once the handle has seen the end, it returns (or raises) the same again without
        a request.

        Polls ``tasks/get`` at the server's ``pollIntervalMs`` (clamped to
        100 ms..60 s), and answers the task's questions with the client's callbacks
        through ``tasks/update``. Put a deadline around it with a cancel scope.

        Args:
            notifications: listen for ``notifications/tasks`` meanwhile (a
                ``subscriptions/listen`` for this task, for the wait): when the server
                agrees, each change arrives as it happens, and ``tasks/get`` is only
                a backstop, once a minute; when it does not, or the listen fails
                (refused, ended, never acknowledged within ``listen_ack_timeout``),
                this polls.

        Raises:
            McpError: the task failed with that JSON-RPC error.
            TaskCancelled: the task was cancelled.
            InputRequiredError: it asks for something no callback answers.
            RemoteProtocolError: the server reported a malformed task or result.
        """
        return await self._convert(self.name, await self.wait_result(notifications=notifications))

    async def wait_result(self, *, notifications: bool = False) -> dict[str, Any]:
        """:meth:`result`, the raw ``CallToolResult`` object (not converted)."""
        return await self._wait_result(notifications, None)

    async def _wait_result(self, notifications: bool, watch: _Watch | None) -> dict[str, Any]:
        if self._immediate is not None:
            return self._immediate
        if self._end is not None:
            # Seen to end: the same outcome again, without asking the server, which may
            # have dropped a task whose end it delivered (mcp_trio's does, when it needs
            # the room; and any may after the TTL).
            result = _outcome(self._end)
            assert result is not None  # (terminal: a result, or raised)
            return result
        task_id = self.task_id
        assert task_id is not None
        if notifications and self._subscribe is not None:
            async with AsyncExitStack() as stack:
                try:
                    sub = await stack.enter_async_context(self._subscribe(task_id))
                except (McpError, RemoteProtocolError, RequestTimeout) as exc:
                    # A server that refuses to listen, ends the listen before its
                    # acknowledgment or never acknowledges it (listen_ack_timeout) is
                    # polled: the task itself may be fine, and the listen was a
                    # nicety (the backstop polls anyway).
                    _polling_instead(task_id, exc)
                    sub = None
                if sub is not None and task_id in (sub.honored.get("taskIds") or ()):
                    # Changes before the listen began were not pushed: look once.
                    return await self._wait(await self.status(), sub, watch)
        # A CreateTaskResult carries no payload: a task created in any status but
        # ``working`` (the spec allows it) is looked at with tasks/get first.
        seed = self.state if self.state is not None and self.state.status == "working" else None
        return await self._wait(seed, None, watch)

    async def _wait(
        self, state: TaskState | None, sub: Subscription | None, watch: _Watch | None
    ) -> dict[str, Any]:
        hurried = False  # (whether the last look came at once, after an answer)
        while True:
            if state is None:
                state = await self.status()
            if watch is not None:
                await watch.seen(state)
            result = _outcome(state)
            if result is not None:
                return result
            if state.status == "input_required":
                assert state.input_requests is not None  # (_outcome's docstring)
                answered = await self._answer(state.input_requests)
                if watch is not None:
                    watch.rearm()  # (the time the client's callbacks took is not the server's)
                if answered and not hurried:
                    # Look again at once, once: the task may have moved on. A server that
                    # asks anew at once is then polled at its interval, as any other.
                    hurried = True
                    state = None
                    continue
            hurried = False
            state, sub = await self._next_state(state, sub, watch)

    async def _next_state(
        self, state: TaskState, sub: Subscription | None, watch: _Watch | None
    ) -> tuple[TaskState | None, Subscription | None]:
        """Wait for the next look at a running task: the poll interval on the polled
        path; on a listen, the next notification (the state it carries), or the
        backstop. Returns the state to look at (``None``: ask ``tasks/get``) and the
        listen still in use (``None`` once the server ended it)."""
        delay = poll_delay(state.poll_interval_ms)
        backstop = MAX_POLL_INTERVAL_MS / 1000
        if watch is not None:
            # Look (again) when the watch's deadline comes, whatever the interval:
            # the task may have ended meanwhile.
            delay, backstop = min(delay, watch.left()), min(backstop, watch.left())
        if sub is None:
            await trio.sleep(delay)
            return None, None
        ended = False
        with trio.move_on_after(backstop):
            try:
                note = await sub.receive()
            except (trio.EndOfChannel, McpError, RemoteProtocolError) as exc:
                # The server ended the listen, or it failed (an error answer, a
                # protocol breach): the task may be fine, so poll.
                if not isinstance(exc, trio.EndOfChannel):
                    _polling_instead(str(self.task_id), exc)
                ended = True
                await trio.sleep(delay)
            else:
                return self._seen(_read(note.params, self.task_id, detailed=True)), sub
        return None, None if ended else sub

    async def _answer(self, requests: dict[str, dict[str, Any]]) -> bool:
        """Answer the questions not answered yet; whether any were.

        Raises:
            InputRequiredError: a question no callback answers (its ``event`` holds
                them, with the task's id as ``request_id``).
            RemoteProtocolError: the task asked a ``max_input_rounds``-th round, or
                more questions in one than the client remembers answers to
                (:data:`~mcp_trio._client_common.MAX_QUESTIONS`).
        """
        task_id = self.task_id
        assert task_id is not None
        # More than the client remembers would be forgotten, then asked again, while the
        # server catches up: refused before anyone is asked, as an MRTR round is.
        refuse_too_many_questions(requests, f"task {task_id}", self._answered.max_keys)
        # (Claimed: another handle on the task does not answer these meanwhile.)
        fresh = self._answered.claim(task_id, requests)
        if not fresh:
            return False
        # Answers sent by an earlier round whose tasks/update got no ack (cancelled, timed
        # out, connection lost): the server may have them, and ignores a duplicate; asking
        # the user again would not be idempotent.
        answers = self._answered.unacked(task_id, fresh)
        acked: dict[str, Any] = {}
        unacked = answers
        try:
            ask = {key: value for key, value in fresh.items() if key not in answers}
            if ask:
                event = InputRequired(
                    request_id=task_id,
                    method="tools/call",
                    input_requests=ask,
                    request_state=None,
                    round=self._rounds + 1,
                )
                # As an MRTR request gives up (ConnectionConfig.max_input_rounds): a task
                # that asks anew for ever must not keep the user's callbacks busy for ever.
                refuse_endless_input(event, self._max_input_rounds, what=f"task {task_id}")
                answers = {**answers, **await self._callbacks.provide_input(event, of_task=True)}
                unacked = answers
            try:
                await self._request(TASKS_UPDATE, {"taskId": task_id, "inputResponses": answers})
            except McpError:
                unacked = {}  # (the server answered: refused, so ask anew)
                raise
            acked, unacked = answers, {}
        finally:
            # (Not acknowledged: free to be answered again, by this handle or another,
            # with the same answers when they were sent.)
            self._answered.settle(task_id, fresh, acked, unacked)
        if ask:
            self._rounds += 1
        return True

    async def drive(
        self,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        deadline: float = math.inf,
    ) -> dict[str, Any]:
        """Wait for the end as a plain ``tools/call`` would (what ``Client.call_tool`` does
        with a task; :meth:`wait_result` otherwise): polling, answering questions, and

        * ``timeout``: seconds the task may go without a change (of its status, its
          ``statusMessage`` or its ``lastUpdatedAt``) before the call gives up with
          ``RequestTimeout`` -- a plain call's "without an answer or progress" (time
          spent in the client's own callbacks does not count). The task is looked at
          when that time is up, whatever its poll interval, and the call gives up only
          if that look shows no change either;
        * ``deadline``: the time on trio's clock (``trio.current_time()``) after which the
          call gives up with ``RequestTimeout``, changes or not, once a last look shows
          the task still running (``Client.call_tool``: when it sent the ``tools/call``,
          plus ``ConnectionConfig.max_request_time``: a plain call's cap on its total);
        * ``on_progress``: each new ``statusMessage`` is reported as progress (``progress``
          counts the messages, ``message`` is the text; the extension sends no progress
          notifications for tasks);
        * when the wait ends before the task does (a timeout, the caller's cancellation,
          an error), ``tasks/cancel`` is sent (shielded, bounded by a few seconds): the
          caller gave up, so the server need not work on until the task's TTL.

        Each ``tasks/get`` is a request with its own timeout (the handle's), and a round
        of questions being answered is not cut short: giving up at a deadline may come
        that much after it.

        Raises:
            RequestTimeout: no change for ``timeout`` seconds, or ``deadline`` passed.
            McpError, TaskCancelled, InputRequiredError, RemoteProtocolError: as
                :meth:`wait_result`.
        """
        watch = _Watch(self.task_id, timeout, deadline, on_progress)
        try:
            return await self._wait_result(False, watch)
        finally:
            if self.task_id is not None and (self.state is None or not self.state.terminal):
                await self._abandon()

    async def _abandon(self) -> None:
        """Send ``tasks/cancel`` for a wait given up (see :func:`_courtesy_cancel`)."""
        if self.task_id is not None:
            await _courtesy_cancel(self._request, self.task_id)


async def _courtesy_cancel(request: Request, task_id: str) -> None:
    """Send ``tasks/cancel`` for a task the client gives up: shielded, bounded, failures
    ignored (a courtesy: the task ends at its TTL anyway)."""
    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + _CANCEL_TIMEOUT
        with suppress(McpError, SessionClosed, RequestTimeout, LocalProtocolError):
            await request(TASKS_CANCEL, {"taskId": task_id})


async def cancel_refused_task(request: Request, result: Mapping[str, Any]) -> None:
    """A ``CreateTaskResult`` was refused (malformed: a bad duration, timestamp,
    status...): if it names a task (a non-empty string ``taskId``), that task may run on
    at the server with nobody waiting, so send it ``tasks/cancel`` (shielded, bounded,
    failures ignored). Nothing for a result that names none."""
    task_id = result.get("taskId")
    if isinstance(task_id, str) and task_id:
        await _courtesy_cancel(request, task_id)


def unasked_task(method: str) -> str:
    """The message of the ``RemoteProtocolError`` for a task the client did not allow: a
    ``CreateTaskResult`` (no ``CallToolResult``) in a legacy session. (A modern one without
    the extension declared is refused by the core: ``McpError`` -32603.)"""
    return (
        f"{method}: the server answered with a task (resultType 'task'), but the client"
        f" did not declare the {TASKS_EXTENSION} extension on the request (a modern-era"
        " one): not a valid result"
    )


@final
class CallProgress:
    """The progress of one ``Client.call_tool``: the reports on its request, then the
    messages of the task it turned into (:meth:`ToolTask.drive`, which counts them from
    1), counted on from the highest value reported before, so the values the caller's
    callback sees only increase.

    Args:
        callback: the caller's progress callback.
    """

    def __init__(self, callback: ProgressCallback) -> None:
        self._callback = callback
        self._highest: float = 0

    async def __call__(self, report: ProgressReceived) -> None:
        """A report on the request itself."""
        self._highest = max(self._highest, report.progress)
        await self._callback(report)

    async def of_task(self, report: ProgressReceived) -> None:
        """A report of the task's (``drive``'s ``on_progress``)."""
        await self._callback(attrs.evolve(report, progress=self._highest + report.progress))


@final
class _Watch:
    """What :meth:`ToolTask.drive` sees of a task: its deadlines, and progress.

    The deadlines are checked when a state is read, not by a cancel scope: the wait
    sleeps until the nearer one at the latest, then looks, and gives up only if that
    look does not show the task moving (stalled) or ended (past the end). A scope
    would cut the sleep and give up on a task that ended meanwhile, unseen."""

    def __init__(
        self,
        task_id: str | None,
        timeout: float | None,
        end: float,
        on_progress: ProgressCallback | None,
    ) -> None:
        self._task_id = task_id or ""
        self._timeout = timeout
        self._end = end
        self._stall = math.inf
        self._on_progress = on_progress
        self._last: tuple[str, str | None, str] | None = None
        self._message: str | None = None
        self._messages = 0
        self.rearm()

    def rearm(self) -> None:
        """Count the stall deadline from now (a change was seen; or the client's
        callbacks answered questions: that time is not the server's)."""
        if self._timeout is not None:
            self._stall = trio.current_time() + self._timeout

    def left(self) -> float:
        """Seconds until the next look is due (0 when it is)."""
        return max(0.0, min(self._stall, self._end) - trio.current_time())

    async def seen(self, state: TaskState) -> None:
        """A state was read: a change re-arms the stall deadline; a new message is
        progress; a task still running past a deadline is given up.

        Raises:
            RequestTimeout: the task did not change for ``timeout`` seconds, or the
                end passed, and it has not ended.
        """
        key = (state.status, state.status_message, state.last_updated_at)
        changed = key != self._last
        if changed:
            self._last = key
            self.rearm()
            await self._progress(state.status_message)
        now = trio.current_time()
        if not state.terminal and (now >= self._end or (not changed and now >= self._stall)):
            raise RequestTimeout("tools/call", None)

    async def _progress(self, message: str | None) -> None:
        if message is None or message == self._message:
            return
        self._message = message
        self._messages += 1
        if self._on_progress is not None:
            await self._on_progress(
                ProgressReceived(
                    request_id=self._task_id, progress=self._messages, total=None, message=message
                )
            )

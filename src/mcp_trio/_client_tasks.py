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
(never faster than 100 ms, never slower than a minute) and measured on trio's clock. There
is no deadline of our own: the caller puts one around the wait with a cancel scope
(``trio.fail_after``), and the task lives on at the server (``cancel()`` ends it there).

A task in ``input_required`` lists its questions (``inputRequests``); the handle answers
them with the client's own sampling / elicitation / roots callbacks -- the ones that answer
an ordinary call's questions -- and sends the answers with ``tasks/update``. Keys are unique
over a task's lifetime (the spec), so a key answered once is never answered again, whatever
a later poll shows before the server has caught up (the ack is eventually consistent).

The end is read as an ordinary call's would be: ``completed`` carries the tool's result,
converted and checked as ``call_tool`` does; ``failed`` carries the JSON-RPC error, raised as
:class:`~mcp_trio.McpError`; ``cancelled`` raises :class:`TaskCancelled`. Whatever the server
says is checked first (:func:`mcp_sansio._tasks.parse_task_state`): a malformed task raises
``RemoteProtocolError`` and leaves the session as it was.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING, Any, Final, final

import trio

from mcp_sansio import ErrorCode, InputRequired, RemoteProtocolError
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

from ._errors import InputRequiredError, McpError

if TYPE_CHECKING:
    from ._client_callbacks import Callbacks
    from ._client_common import ToolOutput
    from ._client_subscriptions import Subscription

__all__ = ["TASKS_EXTENSION", "TaskCancelled", "TaskState", "ToolTask"]

_MAX_ANSWERED: Final = 1024
"""Keys of answered questions a handle remembers (the oldest are forgotten past it)."""

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
    ) -> None:
        self._request = request
        self._subscribe = subscribe
        self._convert = convert
        self._callbacks = callbacks
        self._answered: OrderedDict[str, None] = OrderedDict()
        self.name = name
        """The tool's name (``None`` for a task resumed by id without one: its result
        is then not checked against an output schema)."""
        self.state = state
        """The task as last reported (``None``: the server answered the call at once)."""
        self.task_id = state.task_id if state is not None else task_id
        """The task's id (``None``: the server answered the call at once, no task)."""
        self._immediate = immediate

    @classmethod
    def from_call(
        cls,
        request: Request,
        convert: Convert,
        callbacks: Callbacks,
        name: str,
        result: dict[str, Any],
        subscribe: Subscribe | None = None,
    ) -> ToolTask:
        """The handle of a ``tools/call`` answered with ``result``: a task when it is a
        ``CreateTaskResult``, else an ended call holding its result."""
        if result.get("resultType") == "task":
            state = _read(result, None, detailed=False)
            return cls(request, convert, callbacks, name=name, state=state, subscribe=subscribe)
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
        self.state = _read(got, self.task_id, detailed=True)
        return self.state

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cancellation is
        cooperative: the task may still end otherwise. Nothing for an ended call."""
        if self.task_id is not None:
            await self._request(TASKS_CANCEL, {"taskId": self.task_id})

    async def result(self, *, notifications: bool = False) -> ToolOutput:
        """Wait for the task's end and return the tool's result, as ``call_tool`` would.

        Polls ``tasks/get`` at the server's ``pollIntervalMs`` (clamped to
        100 ms..60 s), and answers the task's questions with the client's callbacks
        through ``tasks/update``. Put a deadline around it with a cancel scope.

        Args:
            notifications: listen for ``notifications/tasks`` meanwhile (a
                ``subscriptions/listen`` for this task, for the wait): when the server
                agrees, each change arrives as it happens, and ``tasks/get`` is only
                a backstop, once a minute; when it does not, this polls.

        Raises:
            McpError: the task failed with that JSON-RPC error.
            TaskCancelled: the task was cancelled.
            InputRequiredError: it asks for something no callback answers.
            RemoteProtocolError: the server reported a malformed task or result.
        """
        return await self._convert(self.name, await self.wait_result(notifications=notifications))

    async def wait_result(self, *, notifications: bool = False) -> dict[str, Any]:
        """:meth:`result`, the raw ``CallToolResult`` object (not converted)."""
        if self._immediate is not None:
            return self._immediate
        task_id = self.task_id
        assert task_id is not None
        if notifications and self._subscribe is not None:
            async with AsyncExitStack() as stack:
                try:
                    sub = await stack.enter_async_context(self._subscribe(task_id))
                except McpError:  # (a server that refuses to listen is polled)
                    sub = None
                if sub is not None and task_id in (sub.honored.get("taskIds") or ()):
                    # Changes before the listen began were not pushed: look once.
                    return await self._wait(await self.status(), sub)
        return await self._wait(self.state, None)

    async def _wait(self, state: TaskState | None, sub: Subscription | None) -> dict[str, Any]:
        while True:
            if state is None:
                state = await self.status()
            if state.status == "completed":
                assert state.result is not None
                return state.result
            if state.status == "failed":
                assert state.error is not None
                raise McpError(state.error)
            if state.status == "cancelled":
                raise TaskCancelled(state)
            if state.status == "input_required":
                assert state.input_requests is not None
                if await self._answer(state.input_requests):
                    state = None  # (answered: look again at once)
                    continue
            delay = poll_delay(state.poll_interval_ms)
            state = None
            if sub is None:
                await trio.sleep(delay)
                continue
            with trio.move_on_after(MAX_POLL_INTERVAL_MS / 1000):  # (the backstop)
                try:
                    note = await sub.receive()
                except trio.EndOfChannel:  # the server ended the listen: poll
                    sub = None
                    await trio.sleep(delay)
                else:
                    state = self.state = _read(note.params, self.task_id, detailed=True)

    async def _answer(self, requests: dict[str, dict[str, Any]]) -> bool:
        """Answer the questions not answered yet; whether any were."""
        fresh = {k: v for k, v in requests.items() if k not in self._answered}
        if not fresh:
            return False
        callbacks = self._callbacks
        if not all(callbacks.can_answer(str(entry.get("method"))) for entry in fresh.values()):
            raise InputRequiredError(
                InputRequired(
                    request_id=self.task_id or "",
                    method="tools/call",
                    input_requests=fresh,
                    request_state=None,
                    round=1,
                )
            )
        responses: dict[str, Any] = {}
        for key, entry in fresh.items():
            params = entry.get("params")
            responses[key] = await callbacks.answer(
                entry["method"], params if isinstance(params, Mapping) else None
            )
        await self._request(TASKS_UPDATE, {"taskId": self.task_id, "inputResponses": responses})
        for key in responses:
            self._answered[key] = None
        while len(self._answered) > _MAX_ANSWERED:
            self._answered.popitem(last=False)
        return True

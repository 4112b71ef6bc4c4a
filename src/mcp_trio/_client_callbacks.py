"""The client's answers to the server: sampling, elicitation, roots; log messages and
the other notifications.

One set of callbacks serves both eras:

* **legacy** -- the server sends ``sampling/createMessage``, ``elicitation/create`` and
  ``roots/list`` as requests; they are registered as request handlers on the session;
* **modern** -- the server answers ``tools/call``, ``resources/read`` or ``prompts/get``
  with ``resultType: "input_required"`` (``basic/patterns/mrtr.mdx``); the session calls
  :meth:`Callbacks.provide_input`, which runs the same callbacks for each entry of
  ``inputRequests`` and returns the ``inputResponses``; the session retries.

The capabilities the client declares follow from which callbacks were given, so a server
never asks for something nobody can answer.

``on_notification`` gets every notification the server sends outside a
``subscriptions/listen`` that no other callback takes (``notifications/message`` when
there is no ``on_log``, the legacy ``*/list_changed`` and ``resources/updated``, custom
ones), as :class:`~mcp_trio.BlockingClient`'s does; progress and cancellations are the
core's. It is a plain function, called in each notification's handler task as it starts
(so in the order they came), never awaited: it cannot hold up the session's reader.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeAlias, final

from mcp_sansio import (
    ErrorCode,
    InputRequired,
    NotificationReceived,
    RemoteProtocolError,
)
from mcp_sansio import types as t

from ._client_common import (
    CallbackAnswerError,
    RootLike,
    answer_roots,
    checked_answer,
    checked_plain,
    elicitation_params,
    log_params,
    refuse_unanswerable,
    refuse_undeclared,
    refused_answer,
    sampling_params,
)
from ._errors import McpError
from ._handlers import Handlers, NotificationContext, RequestContext
from ._text import LOG_TEXT_LIMIT, clip
from ._waiters import ProgressCallback  # (one alias: Session.request takes it too)

__all__ = [
    "Callbacks",
    "ElicitationCallback",
    "LogCallback",
    "NotificationCallback",
    "ProgressCallback",
    "RootsCallback",
    "SamplingCallback",
]

logger = logging.getLogger("mcp_trio")

SamplingCallback: TypeAlias = Callable[
    [t.CreateMessageRequestParams], Awaitable[t.CreateMessageResult | Mapping[str, Any]]
]
"""``async def on_sampling(params) -> types.CreateMessageResult`` (or the result as a dict)."""
ElicitationCallback: TypeAlias = Callable[
    [t.ElicitRequestFormParams | t.ElicitRequestURLParams],
    Awaitable[t.ElicitResult | Mapping[str, Any]],
]
"""``async def on_elicitation(params) -> types.ElicitResult`` (or the result as a dict).
Decline with ``ElicitResult(action="decline")``."""
RootsCallback: TypeAlias = Callable[[], Awaitable[Iterable[RootLike]]]
"""``async def roots() -> [types.Root | "file://..." | {"uri": ...}, ...]``."""
LogCallback: TypeAlias = Callable[[t.LoggingMessageNotificationParams], Awaitable[None]]
"""``async def on_log(params) -> None``: one ``notifications/message``."""
NotificationCallback: TypeAlias = Callable[[NotificationReceived], object]
"""``def on_notification(note) -> None``: a plain function (not awaited; what it returns
is ignored, what it raises is logged), called with each notification no other callback
takes (see the module docs)."""


@final
class Callbacks:
    """The user's callbacks, as session handlers (legacy) and as an MRTR answerer (modern).

    Args:
        on_sampling: answers ``sampling/createMessage``.
        on_elicitation: answers ``elicitation/create``.
        roots: the roots, or an async callable returning them (answers ``roots/list``).
        on_log: receives ``notifications/message``.
        on_notification: receives the other notifications (see the module docs).
        capabilities: the capabilities the client declares (the connection's:
            :func:`~mcp_trio._client_common.build_capabilities`); a modern server's
            input request for anything else is refused.

    Raises:
        TypeError: ``on_notification`` is an ``async`` function (it would never run:
            it is called, not awaited).
    """

    def __init__(
        self,
        *,
        on_sampling: SamplingCallback | None = None,
        on_elicitation: ElicitationCallback | None = None,
        roots: Iterable[RootLike] | RootsCallback | None = None,
        on_log: LogCallback | None = None,
        on_notification: NotificationCallback | None = None,
        capabilities: Mapping[str, Any],
    ) -> None:
        self.capabilities = capabilities
        self.on_sampling = on_sampling
        self.on_elicitation = on_elicitation
        self.roots: Iterable[RootLike] | RootsCallback | None = (
            roots if roots is None or callable(roots) else list(roots)
        )
        self.on_log = on_log
        self.on_notification = checked_plain(on_notification, "on_notification")

    def install(self, handlers: Handlers) -> None:
        """Register the legacy request handlers, the log handler and the handler of the
        other notifications on ``handlers``."""
        for method, given in (
            ("sampling/createMessage", self.on_sampling),
            ("elicitation/create", self.on_elicitation),
            ("roots/list", self.roots),
        ):
            if given is not None:
                handlers.set_request_handler(method, self._handle_request)
        if self.on_log is not None:
            handlers.set_notification_handler("notifications/message", self._handle_log)
        if self.on_notification is not None:
            handlers._other_notifications = self._handle_other

    def notified(self, note: NotificationReceived) -> None:
        """Hand ``note`` to ``on_notification``, if given; log what it raises (the
        notification has no answer, and the session reads on)."""
        if self.on_notification is None:
            return
        try:
            returned = self.on_notification(note)
        except Exception:
            logger.exception("on_notification failed (for %r)", clip(note.method, LOG_TEXT_LIMIT))
            return
        if inspect.isawaitable(returned):
            # An awaitable would never run: say so (once per notification) and close a
            # coroutine, so that Python does not also warn it was never awaited.
            close = getattr(returned, "close", None)
            if callable(close):
                close()
            logger.error(
                "on_notification returned an awaitable, which is not awaited (for %r): "
                "give a plain function",
                clip(note.method, LOG_TEXT_LIMIT),
            )

    def can_answer(self, method: str) -> bool:
        """Whether a callback for ``method`` was given."""
        given = {
            "sampling/createMessage": self.on_sampling,
            "elicitation/create": self.on_elicitation,
            "roots/list": self.roots,
        }.get(method)
        return given is not None

    async def answer(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run the callback for one server request; return its result object, checked
        (see :func:`~mcp_trio._client_common.checked_answer`).

        Raises:
            McpError: -32601 when no callback handles ``method``.
            RemoteProtocolError: the params do not fit the method (-32602).
            CallbackAnswerError: the callback's answer does not fit its result type
                (or the form asked).
            TypeError: the callback returned neither a ``mcp_sansio.types`` value nor
                a mapping.
            Exception: whatever the callback raises.
        """
        if method == "sampling/createMessage" and self.on_sampling is not None:
            typed = sampling_params(params)
            return checked_answer(method, await self.on_sampling(typed), typed, params)
        if method == "elicitation/create" and self.on_elicitation is not None:
            form = elicitation_params(params)
            return checked_answer(method, await self.on_elicitation(form), form, params)
        if method == "roots/list" and self.roots is not None:
            return answer_roots(await self._current_roots())
        raise McpError.from_code(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _current_roots(self) -> Iterable[RootLike]:
        roots = self.roots
        assert roots is not None
        if callable(roots):
            return await roots()
        return roots

    async def provide_input(self, event: InputRequired, *, of_task: bool = False) -> dict[str, Any]:
        """Modern era: answer every entry of ``inputRequests`` (one after the other).

        ``of_task``: the questions of a task (the tasks extension), which come in a
        ``tasks/get`` result the core does not read: held here to what the client
        declared. An MRTR round (the default) was held to it by the core already.

        Returns:
            The ``inputResponses`` for the retry.

        Raises:
            InputRequiredError: an entry asks for something no callback answers (or is
                malformed), or (``of_task``) for more than the client declared (mrtr:
                "Servers MUST NOT send an inputRequests that the client has not
                declared support for": an undeclared elicitation mode, tool use in
                sampling without ``sampling.tools``); no callback runs, the request is
                given up.
            RemoteProtocolError: an entry's params do not fit its method.
            CallbackAnswerError, TypeError: a callback's answer does not fit (see
                :meth:`answer`).
        """
        requests = event.input_requests
        refuse_unanswerable(event, self.can_answer)
        if of_task:  # (an MRTR round was held to the declared capabilities by the core)
            refuse_undeclared(event, self.capabilities)
        responses: dict[str, Any] = {}
        for key, entry in requests.items():
            params = entry.get("params")
            responses[key] = await self.answer(
                entry["method"], params if isinstance(params, Mapping) else None
            )
        return responses

    async def _handle_request(self, ctx: RequestContext) -> dict[str, Any]:
        try:
            return await self.answer(ctx.method, ctx.params)
        except RemoteProtocolError as exc:
            raise McpError(exc.error_data()) from None
        except CallbackAnswerError as exc:  # (the application's bug)
            raise refused_answer(ctx.method, ctx.request_id, exc) from None

    async def _handle_other(self, ctx: NotificationContext) -> None:
        if ctx.subscription_id is None:  # (a listen's belong to its subscription)
            self.notified(NotificationReceived(method=ctx.method, params=ctx.params))

    async def _handle_log(self, ctx: NotificationContext) -> None:
        assert self.on_log is not None
        await self.on_log(log_params(ctx.params))

"""What :meth:`BlockingClient.subscribe <mcp_trio.BlockingClient.subscribe>` yields: the
change notifications of one subscription, read by running the client while waiting.

The blocking twin of :class:`mcp_trio.Subscription` (same filter, same merging of
identical unread notifications, same bound), with no trio: nothing runs between calls,
so notifications are read while a call waits -- :meth:`BlockingSubscription.receive`,
or any other call of the client -- and queued here until read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any, final

from mcp_sansio import NotificationReceived, RequestId

from ._client_common import queue_unread, wanted

__all__ = ["BlockingSubscription"]

Wait = Callable[[Callable[[], bool], float | None], None]
"""The client's loop: run until ``done()``, or ``TimeoutError`` after ``timeout`` s."""


@final
class BlockingSubscription:
    """A stream of change notifications; iterate it (each step waits, running the
    client) or :meth:`receive` with a timeout.

    Items are :class:`~mcp_trio.NotificationReceived`, as for
    :class:`~mcp_trio.Subscription`: ``notifications/tools/list_changed``,
    ``.../prompts/list_changed``, ``.../resources/list_changed`` or
    ``notifications/resources/updated`` (``params["uri"]``). Identical notifications
    not yet read are merged into one; past ``MAX_UNREAD`` (1024) distinct ones, the
    oldest is dropped, with a warning.

    Iteration ends when the server ends the subscription (modern era). It raises
    :class:`~mcp_trio.SessionClosed` when the session ends (the server gone, or the
    client closed: :attr:`ended` turns True at once, and the notifications read before
    are delivered first), :class:`~mcp_trio.McpError` when the server failed the
    ``subscriptions/listen`` request.
    """

    def __init__(
        self,
        wait: Wait,
        *,
        tools: bool,
        prompts: bool,
        resource_list: bool,
        resources: Iterable[str],
    ) -> None:
        self._wait = wait
        self.tools = tools
        """Whether ``notifications/tools/list_changed`` was asked for."""
        self.prompts = prompts
        """Whether ``notifications/prompts/list_changed`` was asked for."""
        self.resource_list = resource_list
        """Whether ``notifications/resources/list_changed`` was asked for."""
        self.resources: tuple[str, ...] = tuple(dict.fromkeys(resources))
        """The URIs whose ``notifications/resources/updated`` were asked for."""
        self.honored: dict[str, Any] = {}
        """What the server agreed to deliver, as a ``subscriptions/listen`` filter: the
        acknowledgment's (modern), or what its capabilities promise (legacy)."""
        self.subscription_id: RequestId | None = None
        """Modern era: the id of the ``subscriptions/listen`` request, once acknowledged."""
        self.end_reason: str | None = None
        """Why the stream ended, once it has."""
        self._pending: OrderedDict[tuple[str, str | None], NotificationReceived] = OrderedDict()
        self._ended = False
        self._failure: BaseException | None = None

    @property
    def ended(self) -> bool:
        """Whether the stream has ended (pending notifications may still be read)."""
        return self._ended

    def receive(self, timeout: float | None = None) -> NotificationReceived | None:
        """The next notification, waiting for it (running the client) at most
        ``timeout`` seconds (``None``: as long as it takes; ``0``: only what earlier
        calls read); ``None`` once the stream has ended and everything was read.

        Raises:
            TimeoutError: none came within ``timeout``; the subscription goes on.
            SessionClosed: the session ended.
            McpError: the server failed the ``subscriptions/listen`` request.
        """
        if not self._pending and not self._ended:
            self._wait(lambda: bool(self._pending) or self._ended, timeout)
        if self._pending:
            return self._pending.popitem(last=False)[1]
        if self._failure is not None:
            raise self._failure.with_traceback(None)
        return None

    def __iter__(self) -> Iterator[NotificationReceived]:
        while (note := self.receive()) is not None:
            yield note

    def _put(self, note: NotificationReceived) -> None:
        """Queue ``note`` if it is one this subscription asked for."""
        if self._ended or not wanted(
            note.method,
            note.params,
            tools=self.tools,
            prompts=self.prompts,
            resource_list=self.resource_list,
            resources=self.resources,
        ):
            return
        queue_unread(self._pending, note)

    def _end(self, reason: str, failure: BaseException | None = None) -> None:
        if not self._ended:
            self._ended = True
            self.end_reason = reason
            self._failure = failure

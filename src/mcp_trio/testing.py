"""Test your MCP server with a real client, in memory, in either era.

::

    from mcp_trio.testing import client_for

    async def test_add():
        async with client_for(my_server, era="modern") as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"

``my_server`` is a ``Server`` (anything with ``handlers()`` and ``connection_config()``),
a ``(Handlers, ConnectionConfig)`` pair, or a bare :class:`~mcp_trio.Handlers` table
(whose capabilities are then inferred from the methods it handles).

A test fails when a callback given to the client fails: ``on_sampling``,
``on_elicitation``, ``roots``, ``on_log``, ``on_notification`` and ``on_progress`` are
watched, and the first exception each raises is raised again when the block ends (see
:func:`client_for`). Without that, an ``assert`` in a callback could pass unseen: what a
notification callback raises is only logged, and in the legacy era what a request
callback raises answers the server's request (-32603), which the server may handle.

The pytest fixtures (``mcp_client``, ``mcp_era``, ``mcp_client_options``) are in
:mod:`mcp_trio.pytest_plugin`, which pytest loads by itself once mcp-trio is installed.
This module is not a plugin, so a ``conftest.py`` may import from it freely.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, final

from mcp_sansio import ConnectionConfig

from ._client import Client, open_client
from ._client_common import EraChoice, checked_plain
from ._client_targets import InMemoryServer
from ._errors import McpError
from ._handlers import Handlers
from ._waiters import ProgressCallback

__all__ = ["ERAS", "capabilities_for", "client_for"]

# (an older conftest.py names this module as a plugin: it still gets the fixtures)
pytest_plugins = ["mcp_trio.pytest_plugin"]

ERAS: Final[tuple[EraChoice, ...]] = ("legacy", "modern")
"""Both eras, for ``@pytest.fixture(params=ERAS)``."""

_CAPABILITY_OF: Final = {
    "tools/list": ("tools", {"listChanged": True}),
    "tools/call": ("tools", {"listChanged": True}),
    "prompts/list": ("prompts", {"listChanged": True}),
    "prompts/get": ("prompts", {"listChanged": True}),
    "resources/list": ("resources", {"listChanged": True}),
    "resources/templates/list": ("resources", {"listChanged": True}),
    "resources/read": ("resources", {"listChanged": True}),
    "resources/subscribe": ("resources", {"subscribe": True}),
    "completion/complete": ("completions", {}),
}


def capabilities_for(handlers: Handlers) -> dict[str, Any]:
    """The server capabilities a handler table implies.

    ``tools``, ``prompts`` and ``resources`` (with ``listChanged``) for the methods it
    handles; ``resources.subscribe`` when it handles ``resources/subscribe``;
    ``completions`` for ``completion/complete``; ``logging`` always (harmless: a
    server that never logs sends nothing).
    """
    caps: dict[str, Any] = {"logging": {}}
    for method, (section, flags) in _CAPABILITY_OF.items():
        if handlers.request_handler(method) is not None:
            caps.setdefault(section, {}).update(flags)
    return caps


_REQUEST_CALLBACKS: Final = ("on_sampling", "on_elicitation", "roots")
"""The callbacks that answer a server's request: an ``McpError`` they raise is their
answer (the error the server gets), not a failure."""
_NOTIFICATION_CALLBACKS: Final = ("on_log", "on_notification", "on_progress")
_CALL_PROGRESS: Final = "a call's on_progress"


@final
class _CallbackFailures:
    """The first exception each watched callback raised, to raise again at the end.

    The callbacks still raise as they did (the session answers the server, or logs,
    as it always does): this only keeps a reference, so that the session going on
    past a failed ``assert`` does not hide it from the test.
    """

    def __init__(self, where: str) -> None:
        self._where = where
        self._first: dict[str, BaseException] = {}

    def watch(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` with each callback among them wrapped to record its failures."""
        watched = dict(options)
        for name in (*_REQUEST_CALLBACKS, *_NOTIFICATION_CALLBACKS):
            callback = watched.get(name)
            if callback is None or not callable(callback):  # (roots may be a list)
                continue
            if name == "on_notification":
                # (a plain function, called, not awaited: an async one is refused here,
                # as open_client refuses it, since the wrapper would hide what it is)
                watched[name] = self._watched_plain(name, checked_plain(callback, name) or callback)
            else:
                watched[name] = self._watched(name, callback)
        return watched

    def watch_call(self, callback: ProgressCallback) -> ProgressCallback:
        """``callback``, an ``on_progress`` given to one call, wrapped as :meth:`watch`
        wraps the client's own."""
        return self._watched(_CALL_PROGRESS, callback)

    def _record(self, name: str, exc: Exception) -> None:
        if isinstance(exc, McpError) and name in _REQUEST_CALLBACKS:
            return  # (its answer to the server: raising one is how to refuse)
        if name not in self._first:
            if name == _CALL_PROGRESS:
                given = f"the on_progress callback given to a call of {self._where}'s client"
            else:
                given = f"the {name} callback given to {self._where}"
            exc.add_note(f"(raised in {given})")
            self._first[name] = exc

    def _watched(self, name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(callback)
        async def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return await callback(*args, **kwargs)
            except Exception as exc:
                self._record(name, exc)
                raise

        return watched

    def _watched_plain(self, name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(callback)
        def watched(*args: Any, **kwargs: Any) -> Any:
            try:
                return callback(*args, **kwargs)
            except Exception as exc:
                self._record(name, exc)
                raise

        return watched

    def raise_unseen(self, ended: BaseException | None) -> None:
        """Raise what the callbacks raised and ``ended`` (what the block raised, if
        anything) does not already carry: the one exception alone, or several (the
        callbacks' and ``ended``) in an ``ExceptionGroup``. Return when there is none.
        """
        unseen = [exc for exc in self._first.values() if ended is None or not _carries(ended, exc)]
        if not unseen:
            return
        names = ", ".join(name for name, exc in self._first.items() if exc in unseen)
        for exc in unseen:
            exc.add_note(
                f"(raised again as {self._where} closed the client: the session had gone "
                "on past it, so the test could have passed)"
            )
        if ended is None and len(unseen) == 1:
            raise unseen[0]
        if ended is None:
            raise BaseExceptionGroup(f"client callbacks failed ({names})", unseen)
        # (from None: ended is in the group, not also its context)
        raise BaseExceptionGroup(
            f"client callbacks failed ({names}), and the block raised", [*unseen, ended]
        ) from None


def _carries(exc: BaseException, target: BaseException) -> bool:
    """Whether ``exc`` is ``target``, or holds it (a cause, a context, a group member)."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if current is target:
            return True
        if id(current) in seen:
            continue
        seen.add(id(current))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return False


@asynccontextmanager
async def client_for(
    server: InMemoryServer | tuple[Handlers, ConnectionConfig] | Handlers,
    *,
    era: EraChoice = "auto",
    **client_options: Any,
) -> AsyncGenerator[Client]:
    """A :class:`~mcp_trio.Client` connected in memory to ``server``.

    Args:
        server: a ``Server``, a ``(Handlers, ConnectionConfig)`` pair, or a
            ``Handlers`` table (capabilities from :func:`capabilities_for`).
        era: ``"legacy"``, ``"modern"`` or ``"auto"`` (which picks modern for a
            server that serves both).
        client_options: any other keyword argument of :func:`~mcp_trio.open_client`
            (``on_sampling``, ``roots``, ``timeout``, ...).

    Raises:
        Exception: the first exception a callback given here (``on_sampling``,
            ``on_elicitation``, ``roots``, ``on_log``, ``on_notification``,
            ``on_progress``) or to one call (``call_tool(..., on_progress=...)``)
            raised, again when the block ends, with notes naming the callback; when
            the block raised too, or several callbacks failed: an
            ``ExceptionGroup`` of them all. The session itself goes on as an
            :func:`~mcp_trio.open_client` session does (the server gets the error of a
            legacy request callback, a notification callback's is logged), so a failed
            ``assert`` in a callback fails the test even when the server handles the
            error. One it already raised out of a call (the modern era's request
            callbacks) is not raised twice. An ``McpError`` from a request callback
            (``on_sampling``, ``on_elicitation``, ``roots``) is its answer, not a
            failure: raise one to have the server see a refusal.

    Resource handling:
        Both sessions close when the block exits; nothing outlives it.
    """
    async with _open_watched_client(server, era, client_options, where="client_for") as client:
        yield client


@asynccontextmanager
async def _open_watched_client(
    server: InMemoryServer | tuple[Handlers, ConnectionConfig] | Handlers,
    era: EraChoice,
    client_options: Mapping[str, Any],
    *,
    where: str,
) -> AsyncGenerator[Client]:
    """:func:`client_for`, whose notes name ``where`` (``client_for``, or the fixture
    that opened it)."""
    target: InMemoryServer | tuple[Handlers, ConnectionConfig]
    if isinstance(server, Handlers):
        config = ConnectionConfig(
            implementation={"name": "mcp-trio-test-server", "version": "0"},
            capabilities=capabilities_for(server),
        )
        target = (server, config)
    else:
        target = server
    failures = _CallbackFailures(where)
    options = failures.watch(client_options)
    try:
        async with open_client(target, era=era, **options) as client:
            client._watch_progress = failures.watch_call  # (a call's own on_progress)
            yield client
    except GeneratorExit:
        raise
    except BaseException as exc:
        failures.raise_unseen(exc)
        raise
    failures.raise_unseen(None)

"""The user-facing MCP server: decorators for tools, prompts, resources and completions.

>>> server = Server("weather", "1.0")
>>> @server.tool()
... async def forecast(city: str, days: int = 3) -> Forecast:
...     '''The forecast for a city.'''
...     ...
>>> trio.run(server.serve_stdio)

A :class:`Server` is a description of what to serve plus the bookkeeping of the
sessions it serves; the transports (stdio, WebSocket, Streamable HTTP, in-memory) run
the sessions. One server may serve many sessions, in both eras at once: the same
handler code runs for a legacy session and for a modern stateless request (see
:class:`~mcp_trio.Context` for what differs).

Theory of operation
-------------------
*Registration* (decorators, ``add_*``/``remove_*``) is synchronous: it builds a frozen
record (:mod:`mcp_trio._registry`) and bumps the change count of its list. A session
served through this server's ``serve_*`` methods or :meth:`Server.connect_in_memory`
(or given ``on_session=server.track_session``) has a *watcher* task beside it that wakes
on every change and sends the matching ``notifications/*/list_changed``: to a legacy
session directly, and through the core to every modern ``subscriptions/listen`` stream
that asked for it. Bursts coalesce: a watcher sends one notification per list however
many changes happened while it was busy. Streamable HTTP has no session object per
client: :meth:`Server.serve_http` has one watcher for the whole HTTP server, and keeps
its legacy sessions' resource subscriptions by session id (see
:mod:`mcp_trio._server_sessions`).

A session that reaches the handlers some other way (``serve_stdio(server.handlers(),
...)`` without the hook) is tracked from its first request: it gets resource updates and
the explicit ``notify_*_changed()`` calls, but no automatic list-changed notifications.

*The lifespan* (``Server(lifespan=...)``) is entered by each ``serve_*`` and
:meth:`Server.connect_in_memory` before anything is served, and exited after the last
handler and task ended: it wraps the transport and the tasks nursery, in the serving
task. Its value is kept in a context variable (by server), so the tasks of that serve
(each request's, a worker thread's) see it as :attr:`Context.lifespan
<mcp_trio.Context.lifespan>`. Entered once per serve, not once per server with a count:
a Trio lifespan may open a nursery, which belongs to the task that opened it and must
close in it, so one shared entry would tie every serve to whichever started first. Serves
that must share one run inside :meth:`Server.open_lifespan`, which enters it once for
everything started within (a ``serve_*`` finds it entered, and does not enter again).

*Capabilities* are derived from what is registered, when they are declared: as a
legacy session initializes, and as a modern request is checked (``connection_config()``
hands the core :meth:`Server._declared_capabilities` as its ``capabilities_source``,
computed again only after a registration). A server that starts with no tool and gains
one declares ``tools`` to every client that comes afterwards, in either era; a legacy
session already open keeps what its ``initialize`` told it (lifecycle.mdx), so it never
sees the new kind of item: register everything before serving when such sessions
matter, or declare the capability up front in ``connection_config=`` (skills:
:meth:`Server.declare_skills` declares the extension before the first one is added).
"""

from __future__ import annotations

import functools
import importlib
import secrets
import ssl
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    TypeAlias,
    TypeVar,
    Unpack,
    cast,
    final,
    overload,
)

import attrs
import trio

from mcp_sansio import ConnectionConfig, ConnectionConfigOptions
from mcp_sansio._http_common import LOCAL_HOSTS, LOCAL_ORIGINS
from mcp_sansio._tasks import TASKS_EXTENSION, refuse_legacy_tasks

from ._config import (
    DEFAULT_COMPLETION_RATE_LIMIT,
    DEFAULT_LOG_RATE_LIMIT,
    DEFAULT_PROGRESS_INTERVAL,
    RateLimit,
    SessionConfig,
)
from ._handlers import Handlers
from ._memory import open_memory_pair
from ._registry import (
    CompletionEntry,
    ListKind,
    PromptEntry,
    Registry,
    ResourceEntry,
    TemplateEntry,
    ToolEntry,
)
from ._server_content import _plain, plain_icons
from ._server_rpc import ServerMethods
from ._server_sessions import SessionTracker
from ._session import Session
from ._stdio import serve_stdio as _serve_stdio
from ._tasks import (
    TaskConfig,
    TaskRunner,
    TaskStart,
    TaskSupport,
    running_tasks,
)
from ._util import SessionHook, check_seconds, open_task_nursery, plain_interrupt, undecorated

if TYPE_CHECKING:
    import os

    from mcp_sansio._http_auth import Principal, RequiredScopes
    from mcp_sansio.http import EventStore, HeaderParam, HttpServerConfig
    from mcp_sansio.skills import Skill
    from mcp_sansio.types import ReadResourceResult

    from ._context import Context
    from ._http_auth import Authenticate
    from ._http_config import HttpTransportConfig
    from ._http_server import HttpServeHandle
    from ._server_skills import SkillStore
    from ._websocket import WebSocketServeHandle

# The HTTP and WebSocket modules are imported by the methods that serve them: a stdio
# server starts without them (see benchmarks/coldstart.py).

__all__ = ["Lifespan", "Server"]

F = TypeVar("F", bound=Callable[..., Any])
_M = TypeVar("_M", bound=Callable[..., Any])
_TASK_SCOPED = frozenset({"tasks/get", "tasks/update", "tasks/cancel", "subscriptions/listen"})
"""Requests that may name a task: they need the scopes its ``tools/call`` needed."""


def _decorator(add: Callable[[Callable[..., Any]], object], /) -> Callable[[F], F]:
    """A decorator that registers the function with ``add`` and returns it unchanged."""

    def register(fn: F) -> F:
        add(fn)
        return fn

    return register


def _merge_capabilities(base: Mapping[str, Any], registered: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (a configured ``ServerCapabilities``) with ``registered`` over it; the
    ``extensions`` of both are kept."""
    merged = {**base, **registered}
    extensions = base.get("extensions")
    if isinstance(extensions, Mapping) and "extensions" in registered:
        merged["extensions"] = {**extensions, **registered["extensions"]}
    return merged


_LIFESPANS: ContextVar[Mapping[Server, Any] | None] = ContextVar("mcp_trio_lifespans", default=None)
"""The lifespan values entered where the current task runs, by server (see the module
docstring): set by :meth:`Server.open_lifespan`, inherited by every task and worker
thread started within."""


def _with_lifespan(serve: _M) -> _M:
    """Decorate a ``Server.serve_*`` method: its lifespan is entered around it (outside
    :func:`~mcp_trio._tasks.running_tasks`, so that the tasks end before it exits)."""

    @functools.wraps(serve)
    async def with_lifespan(self: Server, /, *args: Any, **kwargs: Any) -> Any:
        async with self.open_lifespan():
            return await serve(self, *args, **kwargs)

    return cast(_M, with_lifespan)


def _handle_waits_for_return(serve: _M) -> _M:
    """Decorate a ``Server.serve_*`` method that starts a handle (HTTP, WebSocket),
    outside :func:`_with_lifespan`: the handle's ``aclose()`` returns once this method
    has returned, its lifespan exited and its tasks ended, not as soon as the
    transport's function has (a caller that cancels right after ``await
    handle.aclose()`` would cut the lifespan's teardown)."""

    @functools.wraps(serve)
    async def returning(
        self: Server,
        /,
        *args: Any,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
        **kwargs: Any,
    ) -> Any:
        returned = trio.Event()
        started = _Started(task_status, lambda handle: handle._returns_with(returned))
        try:
            return await serve(self, *args, task_status=started, **kwargs)
        finally:
            returned.set()

    return cast(_M, returning)


@final
class _Started:
    """A ``task_status`` passed on, after ``before`` has seen the value."""

    def __init__(self, outer: trio.TaskStatus[Any], before: Callable[[Any], None]) -> None:
        self._outer = outer
        self._before = before

    def started(self, value: Any = None) -> None:
        self._before(value)
        self._outer.started(value)


@final
class Server:
    """An MCP server built from decorated Python functions.

    Args:
        name: the server's name (``serverInfo.name``).
        version: its version (``serverInfo.version``).
        title: a display name.
        instructions: how to use the server, for the client's model.
        website_url: ``serverInfo.websiteUrl``.
        icons: ``serverInfo.icons`` (``Icon`` values or mappings; ``TypeError`` or
            ``ValueError`` if one is not an ``Icon`` of the schema).
        page_size: items per page of ``tools/list``, ``prompts/list``,
            ``resources/list`` and ``resources/templates/list``.
        session_config: runtime bounds of the sessions it serves.
        connection_config: the core's configuration to start from (bounds, era,
            versions, caching hints, a ``request_state_key`` shared by several server
            processes); its implementation and instructions are replaced by the
            server's, and its capabilities merged with those of what is registered.
            A top-level ``tasks`` capability in it (the 2025-11-25 tasks: this
            server's tasks are the modern extension) raises ``ValueError``.
        task_config: the bounds and hints of the tasks of task tools (see
            :meth:`tool`'s ``task``).
        required_scopes: ``(principal, method, params) -> scopes``: more scopes a
            request needs than its tool, resource or prompt declares (``scopes=``),
            for needs that depend on the arguments or on who asks (the
            specification lets them be "determined dynamically"). Asked about each
            request the handlers serve (not ``initialize``, ``ping``,
            ``server/discover``) from an authenticated caller, and about
            ``subscriptions/listen`` (which the core serves, not a handler) with the
            listen's params; its scopes are added to
            the declared ones and all go in one challenge. An exception refuses the
            request (``500`` over HTTP, -32603 otherwise) and is logged.
        completion_rate_limit: how fast each client may send ``completion/complete``
            (completion.mdx: implementations MUST rate limit): a token bucket per
            client, where a client is the authenticated principal (its ``subject``,
            with the issuer its ``claims["iss"]`` names if any, whatever connection or
            session it uses), else the session (a stdio, in-memory or WebSocket
            connection; a legacy HTTP session), else, for unauthenticated modern
            requests over HTTP, which carry nothing else that tells their senders
            apart, the IP address they come from (behind a reverse proxy, the proxy's:
            all its clients then share one bucket; authenticate them, or have the
            proxy limit them). A request past it is answered
            with :data:`~mcp_trio.RATE_LIMITED_CODE` (429) and ``data:
            {"retryAfter": seconds}``; the handler does not run. Default:
            ``RateLimit(per_second=20, burst=50)``; ``None``: no limit.
        log_rate_limit: how many log messages (``ctx.log``, ``ctx.info``...) one
            request's handler may send (logging.mdx: servers SHOULD rate limit them):
            a token bucket per request. A message past it is dropped (the call
            returns ``False`` at once: the handler never waits), and the next one that
            goes out is preceded by a ``warning`` (or the message's own level, if
            higher) from logger ``mcp_trio`` whose data says how many were dropped,
            ``{"message": ..., "dropped": n}`` (so is the handler's end, if none
            follows). Default: ``RateLimit(per_second=100, burst=500)``;
            ``None``: no limit.
        progress_interval: the fewest seconds between two ``notifications/progress``
            of one request (progress.mdx: both parties SHOULD rate limit). A report
            that comes sooner is held, replacing any held before it, and sent when the
            interval ends (or before the handler's answer); the final one (``progress
            >= total``) goes out at once. ``ctx.report_progress`` never waits for it.
            Default: 0.05 (20 a second); ``None``: every report goes
            out.
        lifespan: ``lifespan(server)`` -> an async context manager (an
            ``@asynccontextmanager`` function, say) that holds what the handlers share
            while the server serves: a database pool, an HTTP client, a nursery of
            background tasks. Each ``serve_*`` and :meth:`connect_in_memory` enters it
            before it serves anything, and exits it after its last handler (and task of
            the tasks extension) ended (a ``handler_nursery=`` of yours holds the HTTP
            and WebSocket handlers: a cancelled serve leaves them unwinding there);
            handlers read what it yielded as
            :attr:`Context.lifespan <mcp_trio.Context.lifespan>`. See
            :meth:`open_lifespan` for what fails how, and for serving several transports
            with one entry.

    Register from the Trio thread (or before ``trio.run``), not from a worker thread.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        website_url: str | None = None,
        icons: Sequence[Any] | None = None,
        page_size: int = 50,
        session_config: SessionConfig | None = None,
        connection_config: ConnectionConfig | None = None,
        task_config: TaskConfig | None = None,
        required_scopes: RequiredScopes | None = None,
        completion_rate_limit: RateLimit | None = DEFAULT_COMPLETION_RATE_LIMIT,
        log_rate_limit: RateLimit | None = DEFAULT_LOG_RATE_LIMIT,
        progress_interval: float | None = DEFAULT_PROGRESS_INTERVAL,
        lifespan: Lifespan | None = None,
    ) -> None:
        if lifespan is not None and not callable(lifespan):
            raise TypeError(
                "lifespan= takes a function of the server that returns an async context "
                f"manager (an @asynccontextmanager function), not {type(lifespan).__name__}"
            )
        if progress_interval is not None:
            check_seconds("progress_interval", progress_interval)
        self.name = name
        self.version = version
        self.title = title
        self.instructions = instructions
        self.website_url = website_url
        plain_icons(icons, f"server {name!r}")  # (checked now, not at each initialize)
        self.icons = None if icons is None else list(icons)
        self.session_config = session_config
        self.log_rate_limit = log_rate_limit
        """The limit of each request's log messages (see ``log_rate_limit=``)."""
        self.progress_interval = progress_interval
        """The fewest seconds between two progress notifications of a request (see
        ``progress_interval=``). Settable: each request reads it as it starts, so
        ``server.progress_interval = None`` (in a test's fixture, say, for a server made
        at import) sends every report of the requests that come after."""
        base = connection_config if connection_config is not None else ConnectionConfig()
        refuse_legacy_tasks(base.capabilities)  # (a task tool's tasks are the extension)
        self._base_config = base
        self._registry = Registry(self._wake)
        self._tracker = SessionTracker(self._registry.versions)
        # One key for every list's cursors (the list versions name their lists).
        self._cursor_key = secrets.token_bytes(32)
        self._methods = ServerMethods(
            self._registry,
            self._tracker,
            page_size,
            self._cursor_key,
            server=self,
            tasks=TaskRunner(task_config, deliver=self._tracker.send_task_status),
            completion_rate_limit=completion_rate_limit,
        )
        self._handlers: Handlers | None = None
        self._page_size = page_size
        self._skills: SkillStore | None = None
        self._scope_hook = required_scopes
        self._declared: dict[str, Any] | None = None
        """What :meth:`_declared_capabilities` computed, until the registry changes."""
        self._lifespan = lifespan

    # ------------------------------------------------------------------ tools

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: Sequence[Any] | None = None,
        output_schema: bool | Mapping[str, Any] = True,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        task: bool | TaskSupport = False,
        task_start: TaskStart = "call",
        scopes: str | Iterable[str] = (),
    ) -> Callable[[F], F]: ...
    def tool(
        self,
        name: Any = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: Sequence[Any] | None = None,
        output_schema: bool | Mapping[str, Any] = True,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        task: bool | TaskSupport = False,
        task_start: TaskStart = "call",
        scopes: str | Iterable[str] = (),
    ) -> Any:
        """Decorator: register a function as a tool (``@server.tool``,
        ``@server.tool("name", ...)`` or ``@server.tool(name="name", ...)``); the
        function is returned unchanged.

        The ``inputSchema`` comes from the signature (see
        :func:`~mcp_trio._jsonschema.function_input_schema`); arguments are validated
        against it and converted to the annotated types *before* the function runs, and
        invalid ones are answered with ``isError: true`` so the model can correct
        them. A parameter annotated :class:`~mcp_trio.Context` receives the context.
        ``async def`` functions run in the request's task; plain ``def`` functions in a
        worker thread.

        What the function returns becomes the result:

        * with an output schema (from the return annotation, e.g. ``-> Forecast`` or
          ``-> int``, unless ``output_schema=False``): ``structuredContent`` (a
          non-object type is wrapped as ``{"result": value}``) plus its JSON as text;
        * otherwise content: ``str`` is text; ``bytes`` of a PNG/JPEG/GIF/WebP image an
          image; :class:`~mcp_trio.Image`, :class:`~mcp_trio.Audio`,
          :class:`~mcp_trio.EmbeddedResource`, :class:`~mcp_trio.ResourceLink`, typed or
          raw content blocks, or a list of these; ``None`` nothing; a ``dict`` (or other
          JSON-able value) its JSON as text, a ``dict`` also as ``structuredContent``;
        * :class:`~mcp_trio.ToolResult` or ``mcp_sansio.types.CallToolResult``: as is.

        Raise :class:`~mcp_trio.ToolError` to fail with a message for the model. Any
        other exception is logged and answered ``isError: true`` with a generic
        message; :class:`~mcp_trio.McpError` is answered as a JSON-RPC error.

        Args:
            name: the tool's name (default: the function's name).
            title: a display name.
            description: for the model (default: the docstring's first paragraph).
            annotations: ``ToolAnnotations`` (``readOnlyHint``, ``destructiveHint``,
                ``idempotentHint``, ``openWorldHint``), typed or as a mapping.
            icons: ``Icon`` values or mappings.
            output_schema: ``True``: from the return annotation; ``False``: none; or
                the schema itself (an object schema; the return value is then sent as
                ``structuredContent`` after a check against it, so the schema may use
                only the keywords that check knows: ``pattern`` yes,
                ``patternProperties`` or ``if``/``then``/``else`` no).
            meta: the tool's ``_meta``.
            input_schema: an ``inputSchema`` to publish verbatim instead of the one
                generated from the signature (for schemas type hints cannot say, e.g.
                ``x-mcp-header`` or ``if``/``then``/``else``). Arguments are validated
                against it before the function runs when the validator implements all
                its keywords (``x-mcp-header`` aside), as a verbatim ``output_schema``
                is, and passed by name as JSON values, unconverted. A schema with a
                keyword it does not implement is published and served unchecked (a
                warning at registration names the keyword): the function then checks
                its arguments itself; one of another dialect, or with a ``$ref`` that
                is not local or leads nowhere, is refused. A parameter without a
                default that a call leaves out is an invalid-arguments tool error, as
                is an argument the function has no parameter for (unless it takes
                ``**kwargs``).
            task: run calls as tasks of the tasks extension (2026-07-28,
                ``io.modelcontextprotocol/tasks``): ``"optional"`` (or ``True``) -- a task
                when the request declares the extension, a plain call otherwise;
                ``"required"`` -- a client that did not declare it gets -32021. The legacy
                era never has tasks: there the tool runs as a plain call. See
                :mod:`mcp_trio._tasks`.
            task_start: when the task is created: ``"call"`` -- before the function
                runs; ``"explicit"`` -- when it calls :meth:`Context.start_task
                <mcp_trio.Context.start_task>` (its questions before then are ordinary
                input-required rounds, and a return before then a plain result).
            scopes: the OAuth scopes a caller's token needs to call it (a collection,
                or a space-separated string; a verifier lists implied scopes in
                ``Principal.scopes``). A call without them is refused before the
                function runs: ``403 insufficient_scope`` naming them all over
                Streamable HTTP, so the client can step up, or the JSON-RPC error
                ``403`` on WebSocket (see ``Handlers.required_scopes``). ``tools/list``
                still lists the tool: a client must see it to ask for the scopes. Not
                checked for a caller with no principal (no ``authenticate``).

        Raises:
            TypeError: a parameter or the return type has no JSON Schema, or an
                annotation or icon member has the wrong type (``readOnlyHint="yes"``).
            ValueError: the name is invalid or taken, a verbatim ``output_schema``
                uses a keyword the result check does not know, a verbatim
                ``input_schema`` is not an object schema, declares another dialect or
                has a ``$ref`` that is not local or leads nowhere, a scope is no RFC
                6750 scope token, or an icon is not an ``Icon`` of the schema
                (``theme="blue"``, a ``src`` that is no URI).
        """
        if callable(name):
            self.add_tool(name)
            return name

        return _decorator(
            functools.partial(
                self.add_tool,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                icons=icons,
                output_schema=output_schema,
                meta=meta,
                input_schema=input_schema,
                task=task,
                task_start=task_start,
                scopes=scopes,
            )
        )

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        icons: Sequence[Any] | None = None,
        output_schema: bool | Mapping[str, Any] = True,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        task: bool | TaskSupport = False,
        task_start: TaskStart = "call",
        scopes: str | Iterable[str] = (),
    ) -> str:
        """Register ``fn`` as a tool (as :meth:`tool` does); returns its name. Sessions
        being served are sent ``notifications/tools/list_changed``."""
        entry = ToolEntry.build(
            fn,
            name=name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            output_schema=output_schema,
            meta=meta,
            input_schema=input_schema,
            task=task,
            task_start=task_start,
            scopes=scopes,
        )
        self._registry.add(entry)
        if entry.task is not None:
            self._methods.tasks.enabled = True
        return entry.name

    def remove_tool(self, name: str) -> None:
        """Remove a tool (sessions are notified).

        Raises:
            KeyError: no such tool.
        """
        self._registry.remove("tools", name)

    # ------------------------------------------------------------------ prompts

    @overload
    def prompt(self, fn: F, /) -> F: ...
    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: str | Iterable[str] = (),
    ) -> Callable[[F], F]: ...
    def prompt(
        self,
        name: Any = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: str | Iterable[str] = (),
    ) -> Any:
        """Decorator: register a function as a prompt template (``@server.prompt``,
        ``@server.prompt("name", ...)`` or ``@server.prompt(name="name", ...)``).

        Its parameters are the prompt's arguments (required when they have no default;
        descriptions from ``Annotated`` or the docstring). Arguments arrive as strings
        and are converted to the annotated types (``"3"`` for an ``int``); a missing
        required argument or a bad value is answered -32602. ``Literal`` and ``Enum``
        parameters are completed automatically.

        It returns a string (one user message), a :class:`~mcp_trio.Message`, a content
        value (a user message holding it), a ``{"role", "content"}`` mapping, or a list
        of these; or an ``mcp_sansio.types.GetPromptResult``.

        Args:
            name: the prompt's name (default: the function's name).
            title: a display name.
            description: what it is for (default: the docstring's first paragraph).
            icons: ``Icon`` values or mappings.
            meta: the prompt's ``_meta``.
            scopes: the OAuth scopes ``prompts/get`` (and completing its arguments)
                needs, as for :meth:`tool`.
        """
        if callable(name):
            self.add_prompt(name)
            return name

        return _decorator(
            functools.partial(
                self.add_prompt,
                name=name,
                title=title,
                description=description,
                icons=icons,
                meta=meta,
                scopes=scopes,
            )
        )

    def add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: str | Iterable[str] = (),
    ) -> str:
        """Register ``fn`` as a prompt (as :meth:`prompt` does); returns its name."""
        entry = PromptEntry.build(
            fn,
            name=name,
            title=title,
            description=description,
            icons=icons,
            meta=meta,
            scopes=scopes,
        )
        self._registry.add(entry)
        return entry.name

    def remove_prompt(self, name: str) -> None:
        """Remove a prompt and its completion handlers (sessions are notified).

        Raises:
            KeyError: no such prompt.
        """
        self._registry.remove("prompts", name)

    # ------------------------------------------------------------------ skills

    def add_skill(
        self,
        source: str | os.PathLike[str] | Mapping[str, bytes | str],
        /,
        *,
        prefix: str = "",
        scheme: str = "skill",
        replace: bool = False,
    ) -> Skill:
        """Serve a skill (the skills extension, ``io.modelcontextprotocol/skills``):
        ``SKILL.md`` at ``<scheme>://<prefix>/<name>/SKILL.md``, every file of it a
        resource, its entry in ``skills/list`` and ``skills/get``, its directories
        readable with ``resources/directory/read``. The server declares the extension
        from then on (see :meth:`declare_skills`).

        Args:
            source: the skill's directory (whose name is the skill's ``name``), or its
                files by ``/``-separated relative path (``{"SKILL.md": "---\\n..."}``).
                Files are read now, once; dot-files and symbolic links are skipped.
            prefix: the organisational prefix of its skill path (``"acme/billing"``).
            scheme: the URI scheme.
            replace: serve it in place of the skill served at its URI, if any, in one
                step (no request sees neither, and a refusal changes nothing); files it
                no longer has stop being resources. Clients holding the old entry fail
                verification on their next read and refresh it (``skills/get``); for
                ``resources/subscribe`` subscribers of a file that changed, call
                :meth:`notify_resource_updated`.

        Returns:
            The skill's entry (frontmatter, and each file's digest and size).

        Raises:
            ValueError: no ``SKILL.md`` with ``name`` and ``description`` frontmatter
                (a key repeated, or an integer beyond 64 bits, is refused), a ``name``
                that is invalid or not the directory's, a file path a URI cannot carry
                as is, a URI taken (without ``replace``, a skill's), or more files or
                bytes than the extension's limits (512 files, 16 MiB). Nothing changes.
            ImportError: PyYAML is missing (``pip install 'mcp-trio[skills]'``).
        """
        from ._server_skills import add_skill  # noqa: PLC0415 -- on first use

        return add_skill(self, source, prefix=prefix, scheme=scheme, replace=replace)

    def add_skills_dir(
        self,
        path: str | os.PathLike[str],
        /,
        *,
        prefix: str = "",
        scheme: str = "skill",
        replace: bool = False,
    ) -> list[Skill]:
        """Serve every skill under ``path``: each directory holding a ``SKILL.md``, at a
        skill path of ``prefix`` and its path below ``path`` (nested skills too: they
        are also files of the skills that enclose them). All are read and checked
        before any is served: if one is refused, none is. The extension is declared
        even when ``path`` holds no skill yet. See :meth:`add_skill`."""
        from ._server_skills import add_skills_dir  # noqa: PLC0415 -- on first use

        return add_skills_dir(self, path, prefix=prefix, scheme=scheme, replace=replace)

    def remove_skill(self, uri: str) -> None:
        """Stop serving the skill whose ``SKILL.md`` is at ``uri``: its entry and, in the
        same step, the resources of its files (but those another skill still lists, a
        nested skill's). Sessions are told the resources changed; the extension stays
        declared.

        Raises:
            KeyError: no skill is served at ``uri``.
        """
        from ._server_skills import remove_skill  # noqa: PLC0415 -- on first use

        remove_skill(self, uri)

    def declare_skills(self) -> None:
        """Declare the skills extension (and the ``resources`` capability it requires)
        with no skill yet. A legacy session keeps the capabilities its ``initialize``
        declared: a server that adds its first skill after such sessions opened (one
        that watches a directory, say) declares the extension first, or they never
        see the skills."""
        self._skill_store()

    def _skill_store(self) -> SkillStore:
        if self._skills is None:
            from ._server_skills import SkillStore  # noqa: PLC0415 -- on first use

            self._skills = SkillStore(self._page_size, self._cursor_key)
            self._declared = None  # (the extension is declared now)
            if self._handlers is not None:
                self._skills.install(self._handlers)
        return self._skills

    # ------------------------------------------------------------------ resources

    def resource(
        self,
        uri: str,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Any] | None = None,
        annotations: Any = None,
        meta: Mapping[str, Any] | None = None,
        scopes: str | Iterable[str] = (),
    ) -> Callable[[F], F]:
        """Decorator: register a function as a resource, or as a resource template when
        ``uri`` is an RFC 6570 template (``"users://{id}/profile"``, levels 1 to 3).

        A template's variables are passed to the parameters of the same names (as
        strings converted to the annotated types); every parameter without a default
        must be a variable. Templates are tried in registration order, after the fixed
        URIs. Templates that cannot be matched unambiguously (``{a}{b}``) are refused.

        Variables are percent-decoded, and the URI is the client's: check a value before
        you use it (server/resources.mdx: "Servers MUST validate all resource URIs"). A
        ``{x}``, ``{.x}`` or ``{/x}`` value is one path segment: a URI in which it would
        hold ``/``, ``\\`` or a NUL (``..%2Fsecret``, ``a%5Cb``, ``a%00``), or be ``.`` or
        ``..``, does not match, so falls through to later templates, then to "Resource not
        found" (completions match URIs the same way). ``{+x}`` and ``{#x}`` span segments
        by design, and ``{?x}``, ``{&x}`` and ``{;x}`` are parameters: their values may
        hold ``/`` and ``..``, so confine them yourself (resolve the path and check it
        stays under its root). Use ``{+x}`` for a variable that must accept an encoded
        slash (``a%2Fb``).

        A URI must be an RFC 3986 URI (server/resources.mdx), ASCII only: an IRI
        (``file:///café``) or a raw ``[`` / ``]`` outside an IPv6 host (``?q=[1]``) is
        refused; percent-encode them (``file:///caf%C3%A9``, ``?q=%5B1%5D``). A
        template's own text is checked so (each expression stands for a placeholder).

        It returns ``str`` (text), ``bytes`` (a base64 ``blob``), typed
        ``TextResourceContents`` / ``BlobResourceContents`` (or a list of them), or
        any JSON-able value (sent as JSON text). Raise
        :class:`~mcp_trio.ResourceNotFound` when what the URI names does not exist.

        Args:
            uri: the URI, or the URI template.
            name: its name (default: the function's name).
            title: a display name.
            description: what it is (default: the docstring's first paragraph).
            mime_type: the MIME type of its contents.
            icons: ``Icon`` values or mappings.
            annotations: ``Annotations`` (audience, priority...), typed or a mapping.
            meta: its ``_meta``.
            scopes: the OAuth scopes ``resources/read`` (and ``resources/subscribe``,
                completing a template's variables, and a modern ``subscriptions/listen``
                naming it in ``resourceSubscriptions``, checked when the listen is made)
                needs, as for :meth:`tool`; ``resources/list`` still lists it.

        Raises:
            ValueError: a malformed or unmatchable template, a URI that is not an RFC
                3986 URI (a template that makes none), or one already registered; an
                icon or annotation value the schema does not allow (``priority=5``,
                ``audience=["robot"]``).
            TypeError: the function's parameters do not fit the URI, no URI was
                given (``@server.resource`` without parentheses), or an icon or
                annotation member has the wrong type.
        """
        if not isinstance(uri, str):  # a bare @server.resource: uri is the function
            raise TypeError(
                "@server.resource needs the URI: @server.resource('notes://{id}'), "
                f"not {type(uri).__name__}"
            )
        return _decorator(
            functools.partial(
                self.add_resource,
                uri=uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                icons=icons,
                annotations=annotations,
                meta=meta,
                scopes=scopes,
            )
        )

    def add_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        icons: Sequence[Any] | None = None,
        annotations: Any = None,
        meta: Mapping[str, Any] | None = None,
        scopes: str | Iterable[str] = (),
    ) -> None:
        """Register ``fn`` as a resource or template (as :meth:`resource` does)."""
        fields: dict[str, Any] = {
            "name": name,
            "title": title,
            "description": description,
            "mime_type": mime_type,
            "icons": icons,
            "annotations": annotations,
            "meta": meta,
        }
        entry: ResourceEntry | TemplateEntry
        if "{" in uri:
            entry = TemplateEntry.build(fn, uri, scopes, **fields)
        else:
            entry = ResourceEntry.build(fn, uri, scopes, **fields)
        self._registry.add(entry)

    def remove_resource(self, uri: str) -> None:
        """Remove a resource or a template, by its URI or template text (sessions are
        notified).

        Raises:
            KeyError: no such resource or template.
        """
        self._registry.remove("resources", uri)

    # ------------------------------------------------------------------ completion

    def completion(
        self,
        ref_type: Literal["ref/prompt", "ref/resource"],
        ref: str,
        argument: str | None = None,
        /,
    ) -> Callable[[F], F]:
        """Decorator: complete the arguments of a prompt or the variables of a resource
        template (``completion/complete``).

        >>> @server.completion("ref/prompt", "review", "language")
        ... def languages(request: CompletionRequest) -> list[str]:
        ...     return [x for x in LANGUAGES if x.startswith(request.value)]

        The function takes one :class:`~mcp_trio.CompletionRequest` (and optionally a
        Context) and returns strings, best first (the first 100 are sent, with
        ``total`` and ``hasMore``), or a :class:`~mcp_trio.Completion`.

        Args:
            ref_type: ``"ref/prompt"`` or ``"ref/resource"``.
            ref: the prompt's name, or the resource template.
            argument: the argument or variable; ``None`` for all of them.

        Raises:
            ValueError: no such prompt, template, argument or variable is registered
                (register the prompt or template first).
        """
        return _decorator(
            functools.partial(self.add_completion, ref_type=ref_type, ref=ref, argument=argument)
        )

    def add_completion(
        self,
        fn: Callable[..., Any],
        ref_type: Literal["ref/prompt", "ref/resource"],
        ref: str,
        argument: str | None = None,
    ) -> None:
        """Register a completion handler (as :meth:`completion` does)."""
        names: Sequence[str]
        if ref_type == "ref/prompt" and ref in self._registry.prompts:
            names = list(self._registry.prompts[ref].schema.get("properties") or ())
        elif ref_type == "ref/resource" and ref in self._registry.templates:
            names = self._registry.templates[ref].template.variables
        else:
            raise ValueError(f"no {ref_type} {ref!r} is registered to complete")
        if argument is not None and argument not in names:
            raise ValueError(f"{ref_type} {ref!r} has no argument {argument!r} (it has {names})")
        self._registry.completions[(ref_type, ref, argument)] = CompletionEntry.build(fn)

    # ------------------------------------------------------------------ notifications

    async def notify_tools_changed(self) -> None:
        """Send ``notifications/tools/list_changed`` to every session now (registering
        or removing a tool does it for you); outstanding cursors become invalid."""
        await self._tracker.announce("tools")

    async def notify_prompts_changed(self) -> None:
        """Send ``notifications/prompts/list_changed`` to every session now."""
        await self._tracker.announce("prompts")

    async def notify_resources_changed(self) -> None:
        """Send ``notifications/resources/list_changed`` to every session now."""
        await self._tracker.announce("resources")

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients watching ``uri`` that its contents changed
        (``notifications/resources/updated``): legacy sessions that subscribed with
        ``resources/subscribe``, and modern ``subscriptions/listen`` streams that list
        it in ``resourceSubscriptions``."""
        await self._tracker.broadcast(
            "notifications/resources/updated", {"uri": uri}, subscribed=uri
        )

    def _wake(self, kind: ListKind) -> None:
        self._declared = None  # (a list changed: perhaps what is declared)
        self._tracker.wake(kind)

    async def track_session(self, session: Session) -> None:
        """Send list-changed notifications to ``session`` until cancelled, and remember
        it for :meth:`notify_resource_updated`. The ``serve_*`` methods do this; pass
        ``on_session=server.track_session`` when you run a transport yourself."""
        await self._tracker.watch(session)

    # ------------------------------------------------------------------ serving

    @asynccontextmanager
    async def open_lifespan(self) -> AsyncGenerator[Any]:
        """Enter the server's lifespan (``Server(lifespan=...)``) for the block, and yield
        its value. What is served within the block shares this one entry: each
        ``serve_*`` and :meth:`connect_in_memory` started inside it (which then enter
        nothing themselves), and transports run with :meth:`handlers` (a
        ``serve_stdio(server.handlers())``, say). Handlers see the value as
        :attr:`Context.lifespan <mcp_trio.Context.lifespan>`.

        Each ``serve_*`` enters the lifespan by itself, once per call: two serving at
        once (stdio and HTTP, say) each have their own (a lifespan may open a nursery,
        which belongs to the task that opened it). To share one, serve inside this
        block:

        >>> async with server.open_lifespan(), trio.open_nursery() as nursery:
        ...     nursery.start_soon(server.serve_stdio)
        ...     nursery.start_soon(server.serve_http)

        Inside a block of this server's lifespan already, it enters nothing and yields
        the value entered; without ``lifespan=``, it enters nothing and yields ``None``.

        Error handling:
            What the lifespan raises as it is entered propagates from here (so from the
            ``serve_*`` that entered it), and nothing is served: no socket is opened,
            no message read. What it raises as it exits propagates after the serving
            ended (chained to the serve's own error, if any). A serve that was cancelled
            (``serve_http`` without ``handle.aclose()``, Ctrl-C) exits the lifespan in
            its cancelled scope, as a ``finally`` in Trio is: a clean-up that must still
            await shields itself (``with trio.move_on_after(5, shield=True):``). A
            graceful stop (``handle.aclose()``, the end of stdin) exits it uncancelled,
            and ``handle.aclose()`` returns only once it has exited (a lifespan whose
            teardown never ends holds it: bound it with ``trio.move_on_after``).
        """
        factory = self._lifespan
        entered = _LIFESPANS.get() or {}
        if factory is None or self in entered:
            yield entered.get(self)
            return
        async with factory(self) as value:
            token = _LIFESPANS.set({**entered, self: value})
            try:
                yield value
            finally:
                _LIFESPANS.reset(token)

    def _lifespan_value(self) -> Any:
        """What :attr:`Context.lifespan <mcp_trio.Context.lifespan>` returns.

        Raises:
            RuntimeError: the lifespan is not entered where the caller runs.
        """
        entered = _LIFESPANS.get() or {}
        if self in entered:
            return entered[self]
        if self._lifespan is None:
            raise RuntimeError(f"server {self.name!r} has no lifespan: pass Server(lifespan=...)")
        raise RuntimeError(
            f"the lifespan of server {self.name!r} is not entered where this request is "
            "served: serve with a serve_* method or connect_in_memory, or run the "
            "transport inside 'async with server.open_lifespan():'"
        )

    async def _read_resource(self, context: Context[Any], uri: str) -> ReadResourceResult:
        """:meth:`Context.read_resource <mcp_trio.Context.read_resource>` (see
        :meth:`ServerMethods.read_in_process`)."""
        return await self._methods.read_in_process(context, uri)

    def capabilities(self) -> dict[str, Any]:
        """The ``ServerCapabilities`` for what is registered now."""
        reg = self._registry
        caps: dict[str, Any] = {"logging": {}}
        if reg.tools:
            caps["tools"] = {"listChanged": True}
        if reg.prompts:
            caps["prompts"] = {"listChanged": True}
        if reg.resources or reg.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if reg.prompts or reg.templates:
            caps["completions"] = {}
        if any(tool.task is not None for tool in reg.tools.values()):
            caps["extensions"] = {TASKS_EXTENSION: {}}
        if self._skills is not None:  # (declared even when it holds no skill yet)
            caps.setdefault("extensions", {}).update(self._skills.capability())
            # ext-skills: "A server declaring this extension MUST also declare the
            # resources capability."
            caps.setdefault("resources", {"subscribe": True, "listChanged": True})
        return caps

    def implementation(self) -> dict[str, Any]:
        """The ``serverInfo`` object."""
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if self.title is not None:
            info["title"] = self.title
        if self.website_url is not None:
            info["websiteUrl"] = self.website_url
        if self.icons is not None:
            info["icons"] = [_plain(icon) for icon in self.icons]
        return info

    def connection_config(self) -> ConnectionConfig:
        """The core's configuration for a transport serving this server (its info,
        instructions, and the capabilities of what is registered: those of now, and
        as ``capabilities_source`` those of when they are declared, so that what is
        registered after the transport started is declared to later clients)."""
        base = self._base_config
        return attrs.evolve(
            base,
            implementation=self.implementation(),
            capabilities=self._declared_capabilities(),
            capabilities_source=self._declared_capabilities,
            instructions=self.instructions if self.instructions is not None else base.instructions,
        )

    def _declared_capabilities(self) -> dict[str, Any]:
        """The configured capabilities with those of what is registered now; computed
        again only after a registration changed a list (the core reads it for every
        modern request over HTTP, and as every legacy session initializes)."""
        declared = self._declared
        if declared is None:
            base = self._base_config.capabilities
            declared = self._declared = _merge_capabilities(base, self.capabilities())
        return declared

    def handlers(self) -> Handlers:
        """The request handlers, one table for every transport and session."""
        if self._handlers is None:
            self._handlers = self._methods.handlers()
            self._handlers.required_scopes = self._required_scopes
            if self._skills is not None:
                self._skills.install(self._handlers)
        return self._handlers

    def _required_scopes(
        self, principal: Principal, method: str, params: dict[str, Any] | None
    ) -> frozenset[str]:
        """The scopes a request needs: what its tool, resource or prompt declares, and
        what the server's ``required_scopes`` adds (see ``Handlers.required_scopes``).
        An exception from the hook propagates: the caller refuses the request and logs
        it (once)."""
        # (scopes_for returns at once for a server that declares no scope.)
        needed = self._registry.scopes_for(method, params)
        if method in _TASK_SCOPED:
            # A task needs what its tools/call needed (see mcp_trio._tasks).
            needed |= self._methods.tasks.scopes_of(principal, method, params)
        hook = self._scope_hook
        if hook is None:
            return needed
        if method == "subscriptions/listen" or self.handlers().request_handler(method) is not None:
            # (subscriptions/listen is served by the core, not a handler: asked too.)
            extra = hook(principal, method, params)
            if extra:
                from mcp_sansio._http_auth import check_scopes  # noqa: PLC0415 (HTTP only)

                needed |= check_scopes(extra)
        return needed

    @plain_interrupt
    @_with_lifespan
    @running_tasks
    async def serve_stdio(
        self,
        *,
        on_session: SessionHook | None = None,
        stdin: trio.abc.ReceiveStream | None = None,
        stdout: trio.abc.SendStream | None = None,
        task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve one session on stdin/stdout until stdin ends (see
        :func:`~mcp_trio.serve_stdio`; ``stdin``/``stdout`` replace the process's own).

        >>> if __name__ == "__main__":
        ...     trio.run(server.serve_stdio)
        """
        await undecorated(_serve_stdio)(  # (this method is the entry point)
            self.handlers(),
            config=self.session_config,
            connection_config=self.connection_config(),
            on_session=self._tracker.hook(on_session),
            stdin=stdin,
            stdout=stdout,
            task_status=task_status,
        )

    @plain_interrupt
    @_handle_waits_for_return
    @_with_lifespan
    @running_tasks
    async def serve_websocket(
        self,
        host: str | None = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        on_session: SessionHook | None = None,
        authenticate: Authenticate | None = None,
        allowed_origins: Sequence[str] = LOCAL_ORIGINS,
        allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
        handler_nursery: trio.Nursery | None = None,
        max_connections: int = 1_000,
        task_status: trio.TaskStatus[WebSocketServeHandle] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve over WebSocket at ``ws://host:port/mcp`` until cancelled, or stopped
        gracefully by the started handle's ``aclose()`` (see
        :func:`~mcp_trio.serve_websocket`; ``authenticate`` as for :meth:`serve_http`,
        on each connection's handshake; ``allowed_origins`` / ``allowed_hosts`` as
        ``HttpServerConfig``'s, checked there too; ``max_connections`` as
        ``HttpTransportConfig``'s: one more is refused ``503`` at accept)."""
        from ._websocket import serve_websocket as _serve_websocket  # noqa: PLC0415

        await undecorated(_serve_websocket)(  # (this method is the entry point)
            self.handlers(),
            host,
            port,
            ssl_context=ssl_context,
            config=self.session_config,
            connection_config=self.connection_config(),
            on_session=self._tracker.hook(on_session),
            authenticate=authenticate,
            allowed_origins=allowed_origins,
            allowed_hosts=allowed_hosts,
            handler_nursery=handler_nursery,
            max_connections=max_connections,
            task_status=task_status,
        )

    @plain_interrupt
    @_handle_waits_for_return
    @_with_lifespan
    @running_tasks
    async def serve_http(
        self,
        host: str | None = "127.0.0.1",
        port: int = 8000,
        path: str | None = None,
        *,
        http_config: HttpServerConfig | None = None,
        config: SessionConfig | None = None,
        transport: HttpTransportConfig | None = None,
        ssl_context: ssl.SSLContext | None = None,
        session_id_factory: Callable[[], str] | None = None,
        event_store: EventStore | None = None,
        authenticate: Authenticate | None = None,
        handler_nursery: trio.Nursery | None = None,
        task_status: trio.TaskStatus[HttpServeHandle] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve Streamable HTTP at ``http://host:port/path`` until cancelled (see
        ``mcp_trio.serve_http`` for each argument; ``config`` defaults to the server's
        ``session_config``, ``path`` to ``http_config.endpoint``, whose default is
        ``/mcp``).

        Change notifications reach its clients as they do a session's: list changes
        every legacy session (on its GET stream) and every ``subscriptions/listen``
        stream that asked for them; resource updates the legacy sessions that
        subscribed with ``resources/subscribe`` (until they unsubscribe or end) and
        the listen streams whose filter names the resource.

        Protect it with ``authenticate=`` (a :class:`~mcp_trio.BearerAuth`, say, and
        ``http_config=HttpServerConfig(resource_metadata=...)``): tools then read who is
        calling from ``ctx.principal``.
        """
        from mcp_sansio.http import HttpServerConfig  # noqa: PLC0415

        module = importlib.import_module("mcp_trio._http_server")
        http_config = http_config or HttpServerConfig()
        if http_config.tool_header_params is None:
            # Modern era: Mcp-Param-* headers are checked against the tools'
            # x-mcp-header annotations (streamable-http#schema-extension).
            http_config = attrs.evolve(http_config, tool_header_params=self._header_params)
        with self._tracker.serving_http() as attach:
            await undecorated(module.serve_http)(  # (this method is the entry point)
                self.handlers(),
                connection_config=self.connection_config(),
                host=host,
                port=port,
                path=path,
                http_config=http_config,
                config=self.session_config if config is None else config,
                transport=transport,
                ssl_context=ssl_context,
                session_id_factory=session_id_factory,
                event_store=event_store,
                authenticate=authenticate,
                handler_nursery=handler_nursery,
                task_status=_Started(task_status, lambda handle: attach(handle._endpoint)),
            )

    def _header_params(self, tool: str) -> tuple[HeaderParam, ...]:
        entry = self._registry.tools.get(tool)
        return () if entry is None else entry.header_params

    @asynccontextmanager
    async def connect_in_memory(
        self,
        *,
        client_handlers: Handlers | None = None,
        client_config: SessionConfig | None = None,
        start: bool = True,
        **client_connection_config: Unpack[ConnectionConfigOptions],
    ) -> AsyncGenerator[Session]:
        """A client session connected to this server in memory (tests, embedding).

        >>> async with server.connect_in_memory(era="modern") as client:
        ...     result = await client.request("tools/list")

        Args:
            client_handlers: the client's handlers (``elicitation/create``,
                ``sampling/createMessage``, ``roots/list`` in a legacy session).
            client_config: the client's runtime configuration.
            start: run the client's handshake before the block.
            client_connection_config: keyword arguments of the client's
                :class:`~mcp_sansio.ConnectionConfig` (``era``, ``capabilities``...;
                :class:`~mcp_sansio.ConnectionConfigOptions`).

        Resource handling:
            Both sessions are closed when the block exits.
        """
        tasks = self._methods.tasks
        async with (
            self.open_lifespan(),
            tasks.running(inherit=False) as tasks_nursery,
            AsyncExitStack() as stack,
        ):
            # The sessions' tasks (which serve the calls) belong to its nursery; the
            # caller's block does not (what it serves some other way gets no tasks).
            with tasks.serving(tasks_nursery):
                pair = open_memory_pair(
                    server_handlers=self.handlers(),
                    client_handlers=client_handlers,
                    server_config=self.session_config,
                    client_config=client_config,
                    server_connection_config=self.connection_config(),
                    client_connection_config=ConnectionConfig(**client_connection_config),
                    start=False,
                )
                client, server_session = await stack.enter_async_context(pair)
            nursery = await stack.enter_async_context(
                open_task_nursery("in-memory server", cancel_on_exit=True)
            )
            self._tracker.track(server_session)
            nursery.start_soon(self._tracker.watch, server_session)
            if start:
                await client.start()
            yield client


Lifespan: TypeAlias = Callable[[Server], AbstractAsyncContextManager[Any]]
"""``Server(lifespan=...)``: ``lifespan(server)`` -> an async context manager, entered
while the server serves; what it yields is :attr:`Context.lifespan
<mcp_trio.Context.lifespan>`. As the official SDK's, e.g.::

    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[App]:
        async with open_pool() as pool:
            yield App(pool)
"""

"""The user-facing client: :func:`open_client` and :class:`Client`.

One client for both eras and every transport. ``open_client`` resolves the target
(a command line, a URL, a server object), runs the era probe (``server/discover``,
falling back to ``initialize``; ``2026-07-28/basic/versioning.mdx``) or the pinned era,
and hands back a :class:`Client` whose methods are typed (``mcp_sansio.types``),
paginate for you, and answer the server's questions (sampling, elicitation, roots)
with the callbacks you gave -- as requests in the legacy era, as ``input_required``
retries (MRTR) in the modern era.

Results are the typed values of :mod:`mcp_sansio.types` (``types.Tool``,
``types.ReadResourceResult``, ...), except ``call_tool``, which returns a
:class:`ToolOutput` (``content``, ``structured_content``, ``is_error``, ``text``, and
the whole ``types.CallToolResult`` as ``result``).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from os import PathLike
from typing import TYPE_CHECKING, Any, final

import trio

from mcp_sansio import (
    ConnectionConfig,
    Era,
    ErrorCode,
    HandshakeCompleted,
    LocalProtocolError,
    ProgressReceived,
    RemoteProtocolError,
    structure,
)
from mcp_sansio import types as t
from mcp_sansio._tasks import declares_tasks
from mcp_sansio._versions import has_capability

from ._client_callbacks import (
    Callbacks,
    ElicitationCallback,
    LogCallback,
    NotificationCallback,
    ProgressCallback,
    RootsCallback,
    SamplingCallback,
)
from ._client_common import (
    EraChoice,
    HandshakeFacts,
    OutputSchemas,
    RootLike,
    ToolOutput,
    check_log_level,
    checked_roots,
    checked_str,
    client_config,
    complete_params,
    name_the_argument,
    named_params,
    pager,
    read_bound,
    request_params,
    timed,
)
from ._client_subscriptions import Subscription, SubscriptionHub
from ._client_targets import ClientTarget, StderrCallback, open_target, start_target
from ._client_tasks import (
    AnsweredQuestions,
    CallProgress,
    ToolTask,
    cancel_refused_task,
    unasked_task,
)
from ._config import SessionConfig
from ._errors import McpError, RequestTimeout, SessionClosed
from ._handlers import Handlers
from ._session import Session
from ._util import open_task_nursery

if TYPE_CHECKING:
    from mcp_sansio.http import HttpClientConfig
    from mcp_sansio.skills import Skill, SkillListing

    from ._oauth import OAuth  # (the HTTP binding is imported when first used)

__all__ = ["Client", "ToolOutput", "open_client"]


async def _ignore_progress(event: ProgressReceived) -> None:
    pass


@final
class Client(HandshakeFacts):
    """A connected MCP client. Get one from :func:`open_client`.

    Error handling (every request method):
        McpError: the server answered with a JSON-RPC error (unknown tool, bad
            arguments, missing resource, ...).
        RequestTimeout: no answer (or progress) within the timeout; the request was
            cancelled on the wire.
        SessionClosed: the connection ended (``ServerExited`` for a stdio server that
            died, with its exit status and stderr).
        InputRequiredError: modern era: the server asked for input no callback answers.
        LocalProtocolError: the call is not possible with this server (a capability it
            did not declare, or a method its era does not have).
        RemoteProtocolError: the server's result does not fit the protocol's types
            (a ``resultType`` the client does not recognize or the method may not
            return, a malformed input-required result, or one asking for input the
            client did not declare or more than ``max_input_requests`` questions; or,
            for ``call_tool``, the tool's known output schema).
    """

    def __init__(
        self,
        session: Session,
        *,
        callbacks: Callbacks,
        hub: SubscriptionHub,
        output_schemas: OutputSchemas,
        nursery: trio.Nursery,
        on_progress: ProgressCallback | None,
        log_level: str | None,
        timeout: float | None,
    ) -> None:
        self._session = session
        self._callbacks = callbacks
        self._hub = hub
        self._output_schemas = output_schemas
        self._nursery = nursery
        self._on_progress = on_progress
        self._log_level = log_level
        self._timeout = timeout
        # The questions of each task answered so far, shared by every handle on it.
        self._task_answers = AnsweredQuestions()
        # What wraps a progress callback given to one call (the testing helpers' watch,
        # which the client's own callbacks get at open_client): None, as given.
        self._watch_progress: Callable[[ProgressCallback], ProgressCallback] | None = None

    # ------------------------------------------------------------------ introspection

    @property
    def session(self) -> Session:
        """The underlying session (raw requests, statistics, the channel)."""
        return self._session

    @property
    def _completed(self) -> HandshakeCompleted:
        handshake = self._session.handshake
        assert handshake is not None, "open_client() runs the handshake"
        return handshake

    @property
    def log_level(self) -> str | None:
        """The log level asked for (see :meth:`set_logging_level`)."""
        return self._log_level

    # ------------------------------------------------------------------ raw

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send any request; return the raw result object.

        Modern era: the log level is put in the envelope, and ``input_required``
        results are answered with the callbacks and retried.

        Args:
            method: the method name.
            params: the params object.
            timeout: seconds without an answer or progress before the request is
                cancelled, more than 0 (default: the client's ``timeout``; ``None``
                there: no limit).
            on_progress: receives progress reports (and asks the server for them).

        Raises:
            ValueError / TypeError: ``timeout`` is not a number more than 0 (0 is
                refused: see :func:`open_client`). Nothing is sent. Every method
                that takes a ``timeout`` refuses it alike.
        """
        if on_progress is not None and self._watch_progress is not None:
            on_progress = self._watch_progress(on_progress)
        return await self._request(method, params, timeout=timeout, on_progress=on_progress)

    async def _request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """:meth:`request`, for the methods that chose ``on_progress`` (:meth:`_progress`)."""
        era = self.era  # (a property over two more: read once)
        try:
            return await self._session.request(
                method,
                request_params(params, era, self._log_level),
                timeout=timeout,
                on_progress=on_progress,
                on_input_required=self._callbacks.provide_input if era is Era.MODERN else None,
            )
        except RequestTimeout as exc:
            config = self._session.connection.config
            if exc.timeout is None and config.max_request_time is None:
                # Only one deadline applies, so the message can say how long it was.
                exc.timeout = timeout if timeout is not None else config.request_timeout
            raise

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification."""
        await self._session.notify(method, None if params is None else dict(params))

    # ------------------------------------------------------------------ tools

    async def _list(self, method: str, timeout: float | None = None) -> list[Any]:
        pages = pager(method)
        while True:
            if not pages.add(await self.request(method, pages.params(), timeout=timeout)):
                return pages.items

    async def list_tools(self, *, timeout: float | None = None) -> list[t.Tool]:
        """Every tool, following ``nextCursor`` through all pages (``timeout``: for
        each page, as for any request; default: the client's).

        The client remembers each tool's ``outputSchema`` to check :meth:`call_tool`
        results against, until the server says the tools changed (or a new session
        replaces the one they were listed on)."""
        session = self._session.handshake  # (taken first: a listing may outlive it)
        tools: list[t.Tool] = await self._list("tools/list", timeout)
        self._output_schemas.remember(tools, session)
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> ToolOutput:
        """Call a tool.

        Args:
            name: the tool's name.
            arguments: its arguments (checked by the server against its input schema).
            on_progress: receives progress reports (default: the client's).
            timeout: seconds without an answer or progress (default: the client's).

        Returns:
            The result; a tool that failed returns ``is_error=True`` (not an exception).

        A server may answer with a task (the tasks extension, when the client declared
        it): the call then waits for the task's end (see :meth:`ToolTask.drive`):
        ``timeout`` counts the time the task goes without a change (looked at when it
        is up, whatever the server's poll interval), ``max_request_time`` caps the whole
        call from its ``tools/call`` on, each new ``statusMessage`` is reported to
        ``on_progress`` (counted on from the highest progress the call reported before
        its task existed, so the values only increase), questions are answered with
        the client's callbacks, and a wait that ends before the task does (timeout,
        cancellation, error) sends ``tasks/cancel``.

        Raises:
            McpError: the server refused the call. One refused for its ``Mcp-Param-*``
                headers (-32020, modern HTTP) is made again after listing the tools,
                once: the headers come from their ``x-mcp-header`` annotations.
            RemoteProtocolError: the result is malformed: its ``structuredContent``
                is not an object where the protocol version requires one, or does not
                match the tool's ``outputSchema`` when the client knows it (from
                :meth:`list_tools`; see ``OutputSchemas``). No request is made to learn
                a schema the client does not know; but before a result is rejected, the
                tools are listed again, once (the server may have changed the tool
                without the client hearing of it), and the result is checked against
                the fresh schema, if any.
            TypeError: ``name`` is not a string, ``arguments`` is not a mapping, a name
                in it is not a string, or a value holds what JSON cannot carry (a
                ``set``, ``bytes``; the message names the argument). Nothing is sent.
            ValueError: an argument holds NaN or an infinity (JSON has neither; it
                would arrive as ``null``). Nothing is sent. One inside an object the
                JSON library writes itself (a dataclass) is not seen: it goes out as
                ``null``. Over WebSocket: the request is larger than
                ``SessionConfig.ws_max_message_size`` (the peer would close the
                connection for it). Nothing is sent; the session goes on.
        """
        params = named_params(name, arguments)
        chosen = self._progress(on_progress, timeout)
        progress = None if chosen is None else CallProgress(chosen)
        started = trio.current_time()
        try:
            result = await self._request(
                "tools/call", params, timeout=timeout, on_progress=progress
            )
        except TypeError:  # (the JSON library's, for an int beyond 64 bits: name it)
            name_the_argument(params)
            raise
        except McpError as refused:
            # 2026-07-28 streamable-http, "Client Behavior": refused for its Mcp-Param-*
            # headers, the client SHOULD list the tools (whose x-mcp-header annotations
            # it learns from the list, or which changed) and retry, once.
            if refused.code != ErrorCode.HEADER_MISMATCH or not await self._relist(timeout):
                raise
            result = await self._request(
                "tools/call", params, timeout=timeout, on_progress=progress
            )
        if result.get("resultType") == "task" and self.era is not Era.MODERN:
            # 2025-11-25 defines no resultType: a CallToolResult with a stray one is still
            # one. A task is not (ext-tasks: "A server MUST NOT return CreateTaskResult to
            # a client that did not include the extension capability on its request", and
            # legacy requests never carry the modern-only extension): said so.
            try:
                ToolOutput.from_wire(result)
            except RemoteProtocolError as invalid:
                raise RemoteProtocolError(unasked_task("tools/call")) from invalid
        elif result.get("resultType") == "task":
            # Modern: the core passed it on, so we declared the extension (without it the
            # core refuses the resultType: RemoteProtocolError). The server answered with a task.
            # ext-tasks "Backwards Compatibility": drive it to its end, return the result,
            # with the timeout, total cap and progress of a plain call (see ToolTask.drive;
            # the cap counts from the tools/call).
            config = self._session.connection.config
            limit = timeout if timeout is not None else config.request_timeout
            cap = config.max_request_time
            result = await (await self._tool_task(name, result, timeout)).drive(
                timeout=limit,
                on_progress=None if progress is None else progress.of_task,
                deadline=math.inf if cap is None else started + cap,
            )
        return await self._tool_output(name, result, timeout)

    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> ToolTask:
        """Call a tool and return at once with a handle on its task (the tasks extension,
        ``io.modelcontextprotocol/tasks``, modern era): the server decides whether the call
        runs as a task; if it answers at once, the handle holds that result
        (``task_id`` is ``None``).

        The client must declare the extension (``open_client(...,
        capabilities={"extensions": {mcp_trio.TASKS_EXTENSION: {}}})``).

        Args:
            name: the tool's name.
            arguments: its arguments.
            timeout: seconds without an answer, for this request and each one the
                handle makes (default: the client's).

        Raises:
            LocalProtocolError: a legacy session (the extension is modern-only), or the
                client did not declare the extension. Nothing is sent.
            McpError, RemoteProtocolError: as :meth:`call_tool`.
        """
        self._check_tasks()
        params = named_params(name, arguments)
        try:
            result = await self.request("tools/call", params, timeout=timeout)
        except TypeError:  # (as call_tool)
            name_the_argument(params)
            raise
        return await self._tool_task(name, result, timeout)

    def task(
        self, task_id: str, *, name: str | None = None, timeout: float | None = None
    ) -> ToolTask:
        """A handle on a task known by its id (one created earlier, perhaps by another
        client of the same principal): resume polling it with ``status()`` /
        ``result()``. ``name``: the tool's, to check the result against its output
        schema. Nothing is sent until the handle is used. Every handle of this client on
        the task shares which questions were answered (none is answered twice).

        Raises:
            LocalProtocolError: as :meth:`call_tool_as_task`.
        """
        self._check_tasks()
        return ToolTask(
            self._task_request(timeout),
            self._converter(timeout),
            self._callbacks,
            name=name,
            task_id=task_id,
            subscribe=self._task_subscription,
            max_input_rounds=self._session.connection.config.max_input_rounds,
            answered=self._task_answers,
        )

    def _check_tasks(self) -> None:
        if self.era is not Era.MODERN:
            raise LocalProtocolError("tasks (io.modelcontextprotocol/tasks) are modern-era only")
        if not declares_tasks(self._session.connection.config.capabilities):
            raise LocalProtocolError(
                "declare the tasks extension first: open_client(..., capabilities="
                "{'extensions': {mcp_trio.TASKS_EXTENSION: {}}})"
            )

    def _task_request(
        self, timeout: float | None
    ) -> Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]:
        async def send(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
            return await self.request(method, params, timeout=timeout)

        return send

    def _converter(
        self, timeout: float | None
    ) -> Callable[[str | None, dict[str, Any]], Awaitable[ToolOutput]]:
        async def convert(name: str | None, result: dict[str, Any]) -> ToolOutput:
            return await self._tool_output(name, result, timeout)

        return convert

    async def _tool_task(
        self, name: str, result: dict[str, Any], timeout: float | None
    ) -> ToolTask:
        request = self._task_request(timeout)
        try:
            return ToolTask.from_call(
                request,
                self._converter(timeout),
                self._callbacks,
                name,
                result,
                self._task_subscription,
                self._session.connection.config.max_input_rounds,
                self._task_answers,
            )
        except RemoteProtocolError:
            await cancel_refused_task(request, result)  # (it may run on, named)
            raise

    def _task_subscription(self, task_id: str) -> AbstractAsyncContextManager[Subscription]:
        return self.subscribe(tasks=[task_id])

    async def _tool_output(
        self, name: str | None, result: dict[str, Any], timeout: float | None
    ) -> ToolOutput:
        """A ``CallToolResult`` read and checked (its shape; its output schema, when
        the tool's ``name`` is known)."""
        output = ToolOutput.from_wire(result)
        handshake = self._completed  # (its protocol version: a property over this one)
        self._output_schemas.check_shape(result, handshake.protocol_version)
        self._output_schemas.follow(handshake)
        if name is None:
            return output
        try:
            self._output_schemas.check_schema(name, result)
        except RemoteProtocolError as stale:
            if not await self._relist(timeout):  # (it remembers the fresh schemas)
                raise stale from None
            self._output_schemas.check_schema(name, result)
        return output

    def _progress(
        self, on_progress: ProgressCallback | None, timeout: float | None
    ) -> ProgressCallback | None:
        """The progress callback of a long request (see :func:`timed`): the call's own
        (watched, see ``_watch_progress``), else the client's."""
        if on_progress is not None and self._watch_progress is not None:
            on_progress = self._watch_progress(on_progress)
        chosen = on_progress or self._on_progress
        if chosen is None and timed(timeout, self._session.connection.config):
            return _ignore_progress
        return chosen

    async def _relist(self, timeout: float | None) -> bool:
        """List the tools again, within a call's own timeout (a listing may take many
        pages); whether that worked."""
        limit = math.inf if timeout is None else timeout
        with trio.move_on_after(limit) as scope:
            try:
                await self.list_tools()
            except Exception:
                return False
        return not scope.cancelled_caught

    # ------------------------------------------------------------------ resources

    async def list_resources(self, *, timeout: float | None = None) -> list[t.Resource]:
        """Every resource, following ``nextCursor`` through all pages (``timeout``: as
        for :meth:`list_tools`)."""
        return await self._list("resources/list", timeout)

    async def list_resource_templates(
        self, *, timeout: float | None = None
    ) -> list[t.ResourceTemplate]:
        """Every resource template, following ``nextCursor`` through all pages
        (``timeout``: as for :meth:`list_tools`)."""
        return await self._list("resources/templates/list", timeout)

    async def read_resource(
        self,
        uri: str,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> t.ReadResourceResult:
        """Read a resource; ``result.contents`` holds text or blob contents.

        Raises:
            TypeError: ``uri`` is not a string. Nothing is sent.
        """
        result = await self._request(
            "resources/read",
            {"uri": checked_str(uri, "the resource URI")},
            timeout=timeout,
            on_progress=self._progress(on_progress, timeout),
        )
        return structure(result, t.ReadResourceResult)

    # ------------------------------------------------------------------ skills

    async def _skills(self, flow: Any, timeout: float | None) -> Any:
        """Run a skills flow (its ``skills/*`` requests are gated by the core: the
        server must declare the extension)."""
        from ._client_skills import run_async  # noqa: PLC0415 -- on first use

        async def request(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            return await self.request(method, params, timeout=timeout)

        return await run_async(flow, request)

    def _read_bound(self) -> tuple[int, str]:
        """The largest answer this client can take, and the setting that bounds it
        (:func:`~mcp_trio._client_common.read_bound`)."""
        size = self._session.connection.config.max_message_size
        return read_bound(size, self._session.channel.message_bound())

    async def list_skills(self, *, timeout: float | None = None) -> SkillListing:
        """Every skill entry of ``skills/list`` (the skills extension), through all
        pages. Fetches no skill file (the spec forbids retrieval ahead of need).

        Returns:
            The valid entries, in order (a sequence: ``for skill in listing``), and in
            ``listing.invalid`` the entries refused, each with its reason: a malformed
            entry MUST NOT be loaded, and costs only itself (check ``invalid`` to tell
            the user).

        Raises:
            LocalProtocolError: the server did not declare ``io.modelcontextprotocol/skills``.
            RemoteProtocolError: a malformed page (no ``skills`` array, a ``nextCursor``
                that is not a string, more pages or entries than the client takes).
        """
        from ._client_skills import list_skills  # noqa: PLC0415 -- on first use

        listing: SkillListing = await self._skills(list_skills(), timeout)
        return listing

    async def get_skill(self, uri: str, *, timeout: float | None = None) -> Skill:
        """The entry of the skill whose ``SKILL.md`` is at ``uri`` (``skills/get``),
        listed or not.

        Raises:
            LocalProtocolError: as for :meth:`list_skills`.
            RemoteProtocolError: a malformed entry, or one for another URI.
            McpError: -32602 when the server serves no skill there.
        """
        from ._client_skills import get_skill  # noqa: PLC0415 -- on first use

        skill: Skill = await self._skills(get_skill(uri), timeout)
        return skill

    async def read_resource_directory(
        self, uri: str, *, timeout: float | None = None
    ) -> list[t.Resource]:
        """The direct children of the directory resource ``uri``
        (``resources/directory/read``, the skills extension), through all pages:
        files with their resource metadata, subdirectories with ``mimeType``
        ``inode/directory``. A live view of the server: reading a skill's files goes by
        its held entry all the same (:meth:`read_skill_file`).

        Raises:
            LocalProtocolError: the server did not declare the extension with
                ``directoryRead: true`` (the spec forbids the call then).
            McpError: -32602 for a URI that is not a directory.
            RemoteProtocolError: a malformed page (a ``nextCursor`` that is not a
                string, say), or more pages or entries than any list takes.
        """
        from ._client_skills import read_resource_directory  # noqa: PLC0415 -- on first use

        children: list[t.Resource] = await self._skills(read_resource_directory(uri), timeout)
        return children

    async def load_skill(
        self, skill: Skill, *, allow_dynamic: bool = False, timeout: float | None = None
    ) -> str:
        """Load a skill: read its ``SKILL.md`` and return its text, verified against
        the entry (size, ``sha256`` digest, and the frontmatter field by field).

        Args:
            skill: its entry (from :meth:`list_skills` or :meth:`get_skill`).
            allow_dynamic: load a skill whose ``resources`` is ``"dynamic"`` (no
                digests: only the frontmatter can be checked).
            timeout: for each request (default: the client's).

        Raises:
            SkillVerificationError: over the extension's limits, dynamic when not
                allowed, or the content is not what the entry describes. Nothing of it
                may be used; :meth:`get_skill` fetches a fresh entry.
            LocalProtocolError: the file's ``resources/read`` answer, sent as a blob,
                may be larger than ``ConnectionConfig.max_message_size`` allows (4 MiB
                by default), or, over Streamable HTTP, than the transport's bound
                (:attr:`HttpClientConfig.max_message_size
                <mcp_sansio.http.HttpClientConfig.max_message_size>`: ``max_event_size``,
                4 MiB, less 1 KiB; ``max_body_size``, 16 MiB): its size is known from
                the entry, so this is raised before anything is sent, naming the size
                needed (:func:`mcp_sansio.skills.read_message_size`: base64 and
                envelope) and the setting. A skill may hold a file of up to 16 MiB: a
                host that must read every skill the extension allows connects with
                ``max_message_size`` of at least ``23 * 1024 * 1024`` (over HTTP also
                ``http_config=HttpClientConfig(max_event_size=24 * 1024 * 1024,
                max_body_size=24 * 1024 * 1024)``).
            McpError: the answer was over that bound all the same (-32603, naming the
                file): a server may send a file as text, which JSON escaping can make
                up to 6 times its size (``"``, ``\\``, control characters). Ours sends
                such a file as a blob, within the size checked.
            ImportError: PyYAML is missing (``pip install 'mcp-trio[skills]'``).
        """
        from ._client_skills import load_skill  # noqa: PLC0415 -- on first use

        limit, setting = self._read_bound()
        flow = load_skill(
            skill, allow_dynamic=allow_dynamic, max_message_size=limit, setting=setting
        )
        text: str = await self._skills(flow, timeout)
        return text

    async def read_skill_file(
        self,
        skill: Skill,
        file: str,
        *,
        allow_dynamic: bool = False,
        timeout: float | None = None,
    ) -> bytes:
        """Read one file of a skill, verified against its entry (size and digest).

        Args:
            skill: the entry held while acting on the skill.
            file: the file's URI, or its path relative to the skill's root
                (``"references/FORMS.md"``).
            allow_dynamic: as for :meth:`load_skill`.
            timeout: as for :meth:`load_skill`.

        Raises:
            SkillVerificationError: the entry does not list the file, or its size or
                digest differs.
            LocalProtocolError: as for :meth:`load_skill` (a file too large for
                the bound; nothing is sent).
            McpError: as for :meth:`load_skill` (an answer over the bound all the same).
            ValueError: a path or URI that leaves the skill's directory (``..``,
                ``%2e%2e``, backslashes, ``?``, ``#``...).
        """
        from ._client_skills import read_skill_file  # noqa: PLC0415 -- on first use

        limit, setting = self._read_bound()
        flow = read_skill_file(
            skill, file, allow_dynamic=allow_dynamic, max_message_size=limit, setting=setting
        )
        data: bytes = await self._skills(flow, timeout)
        return data

    async def subscribe_resource(self, uri: str) -> None:
        """Legacy era: ``resources/subscribe``; updates then arrive on the session.

        Prefer :meth:`subscribe`, which works in both eras and delivers the updates.
        Counted with the :meth:`subscribe` blocks that ask for ``uri``: the
        subscription lasts until :meth:`unsubscribe_resource` and the last block both
        let go of it (nothing is sent while it is held already, or when called again).

        Raises:
            LocalProtocolError: modern era (there is no such method), or the server
                did not declare ``resources.subscribe``.
        """
        uri = checked_str(uri, "the resource URI")
        self._legacy_only("resources/subscribe", "use client.subscribe(resources=[uri])")
        await self._hub.subscribe_resource(self.request, uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Legacy era: ``resources/unsubscribe`` (see :meth:`subscribe_resource`); not
        sent while a :meth:`subscribe` block still holds ``uri`` (its exit sends it)."""
        uri = checked_str(uri, "the resource URI")
        self._legacy_only("resources/unsubscribe", "leave the client.subscribe() block")
        await self._hub.unsubscribe_resource(self.request, uri)

    def subscribe(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resource_list: bool = False,
        resources: Iterable[str] = (),
        tasks: Iterable[str] = (),
    ) -> AbstractAsyncContextManager[Subscription]:
        """Receive change notifications for the ``async with`` block, in either era::

            async with client.subscribe(tools=True, resources=["file:///a"]) as updates:
                async for note in updates:
                    ...  # note.method, note.params

        Legacy: listens to the session's notifications and sends
        ``resources/subscribe`` / ``resources/unsubscribe`` for ``resources`` (when
        the server declares ``resources.subscribe``). Modern: one
        ``subscriptions/listen`` request, cancelled when the block exits.
        ``updates.honored`` says what the server agreed to deliver.

        Args:
            tools: ``notifications/tools/list_changed``.
            prompts: ``notifications/prompts/list_changed``.
            resource_list: ``notifications/resources/list_changed``.
            resources: URIs whose ``notifications/resources/updated`` to receive.
            tasks: modern era, the tasks extension (declared by the client): ids of
                tasks whose ``notifications/tasks`` to receive (each carries the
                task's full state; :meth:`ToolTask.result` uses this with
                ``notifications=True``).

        Raises:
            LocalProtocolError: ``tasks`` in the legacy era.
            McpError: the server refused the subscription.
            RequestTimeout: modern: no acknowledgment within the client's timeout
                (counted from this call, as for any request, the time the HTTP client
                spends getting a token included) or within
                ``config.listen_ack_timeout`` (whose clock stops while the HTTP client
                gets a token for the listen: an OAuth refresh, or a login that waits
                for the user, and counts afresh once the listen goes out); the listen
                was cancelled.
            RemoteProtocolError: modern: the server ended or cancelled the
                ``subscriptions/listen`` request before acknowledging it.
        """
        return self._hub.open(
            self._session,
            self._nursery,
            modern=self.era is Era.MODERN,
            tools=tools,
            prompts=prompts,
            resource_list=resource_list,
            resources=resources,
            timeout=self._timeout,
            tasks=tasks,
        )

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self, *, timeout: float | None = None) -> list[t.Prompt]:
        """Every prompt, following ``nextCursor`` through all pages (``timeout``: as
        for :meth:`list_tools`)."""
        return await self._list("prompts/list", timeout)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> t.GetPromptResult:
        """Get a prompt, filled in with ``arguments``.

        Raises:
            TypeError / ValueError: a ``name`` or ``arguments`` that cannot be sent,
                as for :meth:`call_tool`, or a value that is not a string (``prompts/get``
                takes strings only: ``TypeError``, naming the argument and its type).
                Nothing is sent.
            McpError: the server refused (an unknown prompt, a missing argument).
        """
        result = await self._request(
            "prompts/get",
            named_params(name, arguments, strings=True),
            timeout=timeout,
            on_progress=self._progress(on_progress, timeout),
        )
        return structure(result, t.GetPromptResult)

    async def complete(
        self,
        ref: t.PromptReference | t.ResourceTemplateReference | Mapping[str, Any],
        argument_name: str,
        value: str,
        context: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> t.CompleteResultCompletion:
        """Ask for completions of an argument (``completion/complete``).

        Args:
            ref: the prompt (``types.PromptReference(name=...)``) or resource template
                (``types.ResourceTemplateReference(uri=...)``), or its dict.
            argument_name: the argument being completed.
            value: what the user typed so far.
            context: values of the arguments already filled in.
            timeout: seconds without an answer (default: the client's).

        Returns:
            ``values`` (at most 100), and ``total`` / ``has_more`` when the server says.

        Raises:
            TypeError: ``ref`` is neither a reference nor a dict. Nothing is sent.
        """
        params = complete_params(ref, argument_name, value, context)
        result = await self.request("completion/complete", params, timeout=timeout)
        return structure(result, t.CompleteResult).completion

    # ------------------------------------------------------------------ utilities

    async def set_logging_level(self, level: str) -> None:
        """Ask for log messages at ``level`` and above (delivered to ``on_log``).

        Legacy: sends ``logging/setLevel`` (the server must declare ``logging``).
        Modern: puts ``io.modelcontextprotocol/logLevel`` in every later request's
        envelope; the server logs only about those requests.

        Raises:
            LocalProtocolError: an unknown level, or a legacy server without
                ``logging``.
        """
        check_log_level(level)
        if self.era is Era.LEGACY:
            await self.request("logging/setLevel", {"level": level})
        self._log_level = level

    async def ping(self) -> None:
        """Legacy era: ``ping`` (the modern era has none; any request will do).

        Raises:
            LocalProtocolError: modern era.
        """
        self._legacy_only("ping", "send any request the server declares, e.g. list_tools()")
        await self.request("ping")

    async def set_roots(self, roots: Iterable[RootLike] | RootsCallback) -> None:
        """Change the roots; legacy era: tell the server
        (``notifications/roots/list_changed``) when ``roots.listChanged`` was declared
        (as it is by default). Modern servers ask each time.

        Raises:
            LocalProtocolError: the client was opened without ``roots`` (the
                capability was not declared).
        """
        if self._callbacks.roots is None:
            raise LocalProtocolError("open the client with roots=... to declare the capability")
        self._callbacks.roots = checked_roots(roots)
        capabilities = self._session.connection.config.capabilities
        if self.era is Era.LEGACY and has_capability(capabilities, ("roots", "listChanged")):
            # roots.mdx: a client that declared roots.listChanged says so; one that did
            # not leaves the server to ask again when it wants.
            await self.notify("notifications/roots/list_changed")

    async def aclose(self) -> None:
        """Close the connection (``open_client`` does this on exit)."""
        await self._session.aclose()

    def _legacy_only(self, method: str, instead: str) -> None:
        if self.era is not Era.LEGACY:
            raise LocalProtocolError(f"{method!r} does not exist in the modern era; {instead}")


@asynccontextmanager
async def open_client(
    target: ClientTarget,
    *,
    era: EraChoice = "auto",
    protocol_version: str | None = None,
    on_sampling: SamplingCallback | None = None,
    on_elicitation: ElicitationCallback | None = None,
    roots: Iterable[RootLike] | RootsCallback | None = None,
    on_log: LogCallback | None = None,
    on_notification: NotificationCallback | None = None,
    log_level: str | None = None,
    on_progress: ProgressCallback | None = None,
    client_info: t.Implementation | Mapping[str, Any] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | PathLike[str] | None = None,
    stderr: StderrCallback | None = None,
    ssl_context: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | None = None,
    http_config: HttpClientConfig | None = None,
) -> AsyncGenerator[Client]:
    """Connect to an MCP server, in whichever era it speaks, for the ``async with`` block.

    ::

        async with mcp_trio.open_client("python my_server.py") as client:
            tools = await client.list_tools()
            result = await client.call_tool("add", {"a": 1, "b": 2})
            print(result.text)

    Args:
        target: where the server is --
            a command line (``"python server.py --flag"``, split like a POSIX shell)
            or an argument list (``["python", "server.py"]``): spawn it, stdio;
            ``"http://…/mcp"`` / ``"https://…"``: Streamable HTTP;
            ``"ws://…/mcp"`` / ``"wss://…"``: WebSocket (a custom transport);
            a ``Server`` object (anything with ``handlers()`` and
            ``connection_config()``) or a ``(Handlers, ConnectionConfig)`` pair:
            in memory, in this process;
            a :class:`~mcp_trio.MessageChannel`: any transport you built.
        era: ``"auto"`` probes with ``server/discover`` and falls back to
            ``initialize``; ``"legacy"`` / ``"modern"`` pin the era (an
            :class:`~mcp_trio.Era` too: ``era=client.era`` reconnects in the same era).
        protocol_version: pin one protocol version (its era follows).
        on_sampling: answers the server's ``sampling/createMessage`` (declares
            ``sampling``).
        on_elicitation: answers ``elicitation/create`` (declares form-mode
            ``elicitation``; add ``url`` through ``capabilities``).
        roots: the roots (a list, or an async callable returning one) for
            ``roots/list`` (declares ``roots``).
        on_log: receives the server's log messages.
        on_notification: a plain function (not ``async``: it is not awaited), called
            with every other notification the server sends outside a subscription
            (a :class:`~mcp_trio.NotificationReceived`: ``method``, ``params``), in the
            order they came: log messages when there is no ``on_log``, the legacy
            ``notifications/*/list_changed`` and ``notifications/resources/updated``
            (also delivered to :meth:`Client.subscribe` blocks), custom ones. Not
            progress (``on_progress``), nor what a modern ``subscriptions/listen``
            delivers (its subscription's). What it raises is logged, not raised: the
            session reads on. To do async work, hand the notification on without
            waiting (a memory channel's ``send_nowait``, a nursery's ``start_soon``).
        log_level: the lowest level to receive (see
            :meth:`Client.set_logging_level`); applied after the handshake. With
            ``on_log`` and no level: everything (a legacy server's default; a modern
            server sends none unless asked, so ``"debug"`` is asked).
        on_progress: default progress callback of ``call_tool``, ``read_resource``
            and ``get_prompt``.
        client_info: our name and version (default: mcp-trio's).
        capabilities: client capabilities merged over the ones the callbacks imply.
            Tasks are the modern extension (``{"extensions": {TASKS_EXTENSION: {}}}``):
            a top-level ``tasks`` (the 2025-11-25 tasks) raises ``ValueError``.
        timeout: default seconds a request may go without an answer or progress,
            more than 0 (``None``: no limit; 0 is refused, as it is for a call's own
            ``timeout``: no answer comes in no time). It bounds the handshake's ``initialize`` and a
            pinned modern era's ``server/discover`` too, but not the era probe of
            ``era="auto"``, which waits ``ConnectionConfig.probe_timeout`` (10 s)
            before falling back to the legacy handshake: a server slow to start
            (a cold ``npx``/``uvx``) is still found modern. ``config.handshake_timeout``
            (30 s) bounds the whole handshake.
        config: runtime bounds of the session (see :class:`~mcp_trio.SessionConfig`).
        connection_config: the core's configuration to start from (bounds); its
            era, versions, implementation and capabilities are set from the
            arguments above.
        env: stdio: the server's environment.
        cwd: stdio: the server's working directory.
        stderr: stdio: called with each chunk of the server's stderr.
        ssl_context: ``wss://`` / ``https://``: the TLS context.
        headers: HTTP and WebSocket: extra headers for every request (the
            WebSocket handshake), e.g. ``{"Authorization": "Bearer ..."}``.
        auth: HTTP and WebSocket: OAuth 2.1 authorization (:class:`~mcp_trio.OAuth`)
            for a server that asks for it (``401``); see the README, "OAuth".
        http_config: HTTP: the transport's bounds (:class:`~mcp_trio.HttpClientConfig`:
            the largest SSE event and JSON body an answer may be).

    Raises:
        HandshakeFailed: no common era or version, or the server refused.
        RequestTimeout: a handshake request got no answer within ``timeout``, or
            the handshake took longer than ``config.handshake_timeout``; the message
            names the method, the target and the step (``"initialize timed out
            after 2 s (request 2): while opening 'python server.py' (the legacy
            handshake, after the era probe)"``). It is raised once the transport
            is closed: a spawned server that does not exit when its stdin closes
            is given ``config.stdin_close_timeout`` (2 s) before SIGTERM.
        SessionClosed: the connection could not be opened or ended during the
            handshake (``ServerExited`` for a stdio server that exited).
        TypeError / ValueError: a target or argument that makes no sense (a root
            that is not a ``file://`` URI, for one).
        FileNotFoundError / PermissionError: the command cannot be run. A ``.py``
            file is not a program: the message says to spawn it with the interpreter
            (``[sys.executable, "server.py"]``) or to pass its ``Server``.

    Resource handling:
        On exit: open subscriptions end, the session closes, and a spawned server is
        shut down (stdin closed, then SIGTERM, then SIGKILL).
    """
    core_config = client_config(
        connection_config,
        era=era,
        protocol_version=protocol_version,
        log_level=log_level,
        client_info=client_info,
        sampling=on_sampling is not None,
        elicitation=on_elicitation is not None,
        roots=roots is not None,
        capabilities=capabilities,
        timeout=timeout,
    )
    roots = checked_roots(roots)
    callbacks = Callbacks(
        on_sampling=on_sampling,
        on_elicitation=on_elicitation,
        roots=roots,
        on_log=on_log,
        on_notification=on_notification,
        capabilities=core_config.capabilities,
    )
    handlers = Handlers()
    callbacks.install(handlers)
    output_schemas = OutputSchemas()
    hub = SubscriptionHub(
        on_tools_changed=output_schemas.forget, on_notification=callbacks.notified
    )
    hub.install(handlers)
    async with (
        open_task_nursery("MCP client", cancel_on_exit=True) as nursery,
        open_target(
            target,
            handlers=handlers,
            config=config,
            connection_config=core_config,
            env=env,
            cwd=cwd,
            stderr=stderr,
            ssl_context=ssl_context,
            headers=headers,
            auth=auth,
            http_config=http_config,
        ) as session,
    ):
        await start_target(session, target)
        client = Client(
            session,
            callbacks=callbacks,
            hub=hub,
            output_schemas=output_schemas,
            nursery=nursery,
            on_progress=on_progress,
            log_level=None,
            timeout=timeout,
        )
        nursery.start_soon(_end_subscriptions_on_close, session, hub, name="mcp client watcher")
        if log_level is None and on_log is not None and client.era is Era.MODERN:
            log_level = "debug"
        if log_level is not None:
            await _apply_log_level(client, log_level)
        yield client


async def _apply_log_level(client: Client, level: str) -> None:
    if client.era is Era.LEGACY and "logging" not in client.session.connection.peer_capabilities:
        return  # nobody to ask; the server sends no logs anyway
    await client.set_logging_level(level)


async def _end_subscriptions_on_close(session: Session, hub: SubscriptionHub) -> None:
    await session.wait_closed()
    hub.close_all(session.close_reason or SessionClosed("the session was closed"))

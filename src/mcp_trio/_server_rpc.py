"""The MCP methods a :class:`~mcp_trio.Server` answers, on top of its :class:`Registry`.

Each method is an ``async def handler(ctx: RequestContext)`` for a
:class:`~mcp_trio.Handlers` table. Protocol errors (unknown names, malformed params,
bad cursors) raise :class:`~mcp_trio.McpError`, which the runtime sends as the JSON-RPC
error; any other exception from a prompt, resource or completion function is logged by
the runtime and answered -32603. Tools are different (server/tools#error-handling): bad
arguments and failures of the tool itself are *tool results* with ``isError: true``, so
that the model can correct itself.

Those exceptions count when a handler's own nursery wraps them in an exception group
too: a group of nothing but :class:`ToolError` is one tool error (messages joined), and
a group of a single :class:`McpError` or :class:`ResourceNotFound` is that exception
(see :func:`_raise_meant_for_peer`). Any other group is an internal error.

Results are written for the newest revision. The core's ``send_result`` leaves out
the fields a legacy session's revision lacks (a ``Tool``'s ``title`` before 2025-06-18,
``icons`` before 2025-11-25, ``structuredContent``, content blocks' ``_meta``...); what
it cannot do, a content type the revision lacks altogether, is translated here on the
way out (``adapt_tool_result``, ``adapt_prompt_result``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

import attrs
import trio

from mcp_sansio import Era, ErrorCode, ErrorData, structure, unstructure
from mcp_sansio._tasks import TASKS_CANCEL, TASKS_GET, TASKS_UPDATE

from ._config import RATE_LIMITED_CODE, RateLimit
from ._context import Context, _InputNeeded
from ._errors import McpError
from ._handlers import Handlers, InputRequiredResult, RequestContext, RequestHandler
from ._jsonschema import coerce_arguments, to_jsonable, to_structured_content, validate
from ._pagination import list_result
from ._registry import (
    Entry,
    ListKind,
    Registry,
    ResourceEntry,
    TemplateEntry,
    ToolEntry,
    coerce_strings,
    invoke,
)
from ._server_content import (
    ToolError,
    ToolResult,
    UnsendableMeta,
    adapt_prompt_result,
    adapt_tool_result,
    completion_json,
    content_blocks,
    fit_sent_meta,
    json_text,
    jsonable_text,
    prompt_messages,
    read_result_contents,
)
from ._server_sessions import SessionTracker, session_of
from ._tasks import TaskRun, TaskRunner
from ._typed import loaded_models
from ._util import KeyedBuckets

if TYPE_CHECKING:
    from mcp_sansio.types import ReadResourceResult

    from ._server import Server

__all__ = ["CompletionRequest", "ResourceNotFound", "ServerMethods"]

logger = logging.getLogger("mcp_trio.server")

_E = TypeVar("_E", bound=Entry)
_X = TypeVar("_X", bound=BaseException)

MAX_SUBSCRIPTIONS_PER_SESSION: Final = 1024
"""How many resource URIs one legacy session may subscribe to (the table is bounded)."""


class ResourceNotFound(Exception):
    """Raise from a resource function when what the URI names does not exist.

    It is answered with the not-found error of the request's era: -32002 (legacy) or
    -32602 (2026-07-28), with ``data: {"uri": uri}``. Never answer with empty contents
    (server/resources#error-handling).

    Args:
        uri: the URI that was asked for.
    """

    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}")
        self.uri = uri


@final
@attrs.frozen(kw_only=True)
class CompletionRequest:
    """What a completion handler is asked to complete (``completion/complete``)."""

    ref_type: str
    """``"ref/prompt"`` or ``"ref/resource"``."""
    ref: str
    """The prompt's name or the resource template (the one the client named, or the
    first that matches the concrete URI it named)."""
    argument: str
    """The argument (prompt) or variable (template) being completed."""
    value: str
    """What the user typed so far."""
    context: dict[str, str] = attrs.field(factory=dict)
    """Arguments already resolved (``context.arguments``; for a concrete URI, also the
    template's other variables as the URI gives them, where the request does not)."""


def _invalid(message: str, data: Any = None) -> McpError:
    return McpError(ErrorData(code=ErrorCode.INVALID_PARAMS, message=message, data=data))


def _not_found(era: Era, uri: str) -> McpError:
    """The not-found error of ``era`` (the code differs; the words name the URI in both:
    a client shows the message, and ``data`` seldom)."""
    message = f"Resource not found: {uri}"
    if era is Era.MODERN:
        return _invalid(message, {"uri": uri})
    return McpError(
        ErrorData(code=ErrorCode.RESOURCE_NOT_FOUND, message=message, data={"uri": uri})
    )


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _params(ctx: RequestContext) -> dict[str, Any]:
    return ctx.params or {}


def _string_param(params: Mapping[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise _invalid(f"Invalid params: {method} needs {key!r} (a string)")
    return value


def _named(
    table: Mapping[str, _E], params: Mapping[str, Any], method: str, what: str
) -> tuple[str, _E]:
    """The ``name`` in ``params`` and what ``table`` holds under it (-32602 if nothing)."""
    name = _string_param(params, "name", method)
    entry = table.get(name)
    if entry is None:
        raise _invalid(f"Unknown {what}: {name}", {"name": name})
    return name, entry


def _string_map(holder: Mapping[str, Any], key: str, what: str) -> dict[str, str]:
    """``holder[key]``, an object of strings; ``{}`` when the key is absent, but not when
    it is ``null``: the schema has it an object when present (-32602)."""
    value = holder.get(key)
    if value is None and key not in holder:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise _invalid(f"Invalid params: {what} must be an object of strings")
    return dict(value)


def _check_structured(structured: Any, tool: ToolEntry) -> None:
    """tools.mdx: structured results MUST conform to the output schema (ValueError).
    The registry's quick test first: ``validate`` walks the schema, to list problems."""
    test = tool.output_test
    if test is not None and test(structured):
        return
    assert tool.output_schema is not None
    problems = validate(structured, tool.output_schema, root="structuredContent")
    if problems:
        raise ValueError("; ".join(problems))


def _plain_fit(plain: dict[str, type], arguments: Mapping[str, Any]) -> bool:
    """Whether each argument is of exactly its parameter's type (``plain_params``)."""
    for key, value in arguments.items():  # noqa: SIM110 (a loop: no generator per call)
        if type(value) is not plain.get(key):
            return False
    return True


def _custom_arguments_problem(tool: ToolEntry, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with valid ``arguments`` of a tool with a verbatim input schema
    that its function cannot take (an unknown name, a parameter without a default
    left out), or ``None``."""
    if tool.custom_params is not None:  # (None: the function takes **kwargs)
        unknown = sorted(set(arguments) - tool.custom_params)
        if unknown:
            return f"unknown {unknown}"
    missing = [param for param in tool.custom_required if param not in arguments]
    return f"missing {missing}" if missing else None


_WARNED_MAX = 1024
"""How many (handler, key) pairs a server remembers having warned of
(:func:`fit_unsendable_meta`); past that it warns each time (a bound on the memory,
not on the log)."""


def fit_unsendable_meta(
    result: dict[str, Any], what: str, warned: set[tuple[str, str]]
) -> dict[str, Any]:
    """A result built from a handler's value, fit to be sent (:func:`fit_sent_meta`).

    A ``_meta`` key (the result's own, a content block's...) of a prefix "reserved for
    MCP use" (basic/index.mdx#_meta) is the protocol's and its extensions', not a
    handler's: it is dropped, with a warning logged once per key and handler
    (``warned``: the ``(what, key)`` pairs already warned of, the server's). That is
    what a gateway tool relaying a downstream server's result passes on (its
    ``io.modelcontextprotocol/serverInfo``...); the core then sets its own keys as
    for any result. A malformed key is the handler's bug, which no other call of the
    model's mends (so no tool error): -32603, naming the key, logged where the author
    looks too.

    Raises:
        McpError: -32603 when there is a malformed key.
    """
    try:
        fitted, dropped = fit_sent_meta(result)
    except UnsendableMeta as exc:
        logger.error("%s returned a result that cannot be sent: %s", what, exc)
        raise McpError.from_code(
            ErrorCode.INTERNAL_ERROR, f"{what} returned a result that cannot be sent: {exc}"
        ) from None
    for key in dropped:
        if (what, key) not in warned:
            if len(warned) < _WARNED_MAX:
                warned.add((what, key))
            logger.warning(
                "%s returned a result whose _meta has the key %r, of a prefix reserved for "
                "MCP (basic/index.mdx#_meta): dropped (the core sets the protocol's own "
                "keys); warned once per key",
                what,
                key,
            )
    return fitted


def tool_result(tool: ToolEntry, value: Any, warned: set[tuple[str, str]]) -> dict[str, Any]:
    """A tool's return value as a ``CallToolResult`` (see :meth:`Server.tool`); ``warned``
    as :func:`fit_unsendable_meta` takes it.

    Raises:
        TypeError, ValueError: the value does not fit the tool's output schema or has no
            JSON form (a bug in the tool).
        McpError: -32603, a malformed ``_meta`` key (:func:`fit_unsendable_meta`; a
            key of MCP's reserved prefix is dropped).
    """
    if type(value) is str and tool.output_schema is None:
        return {"content": [{"type": "text", "text": value}]}  # (the commonest, at once)
    if isinstance(value, (ToolResult, *loaded_models("CallToolResult"))):
        result: dict[str, Any] = (
            value.to_json() if isinstance(value, ToolResult) else unstructure(value)
        )
        result = fit_unsendable_meta(result, f"Tool {tool.name!r}", warned)
        if tool.output_schema is not None and not result.get("isError"):
            # tools.mdx: with an output schema, servers MUST provide structured
            # results that conform to it (a tool error is no result).
            if "structuredContent" not in result:
                raise ValueError(
                    "the tool declares an output schema: its result needs structured content"
                )
            _check_structured(result["structuredContent"], tool)
        return result
    if tool.output_schema is not None:
        if tool.derived_output:  # (wrapped as {"result": ...} where not an object)
            structured = to_structured_content(tool.fn, value)
            text = json_text(value)
        else:
            structured = to_jsonable(value)
            text = jsonable_text(structured)
        _check_structured(structured, tool)
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured}
    blocks = content_blocks(value)
    if blocks is not None:
        return fit_unsendable_meta({"content": blocks}, f"Tool {tool.name!r}", warned)
    if value is None:
        return {"content": []}
    # One conversion: as wire data (finite, 64-bit numbers) when the value fits; else
    # for the text alone (any int, NaN as json.dumps writes it): no output schema
    # promised structured content.
    try:
        data, wire = to_jsonable(value), True
    except TypeError:
        data, wire = to_jsonable(value, strict=False), False
    out: dict[str, Any] = {"content": [{"type": "text", "text": jsonable_text(data)}]}
    if wire and isinstance(data, dict):
        out["structuredContent"] = data
    return out


@final
class ServerMethods:
    """The request handlers of one server.

    Args:
        registry: what it serves.
        tracker: the live sessions (told of each session a request arrives on).
        page_size: items per page of the ``*/list`` methods.
        cursor_key: the HMAC key of the pagination cursors.
        server: handed to each :class:`Context`.
        tasks: runs the calls of task tools (see :mod:`mcp_trio._tasks`).
        completion_rate_limit: how fast each client may ask ``completion/complete``
            (see :class:`~mcp_trio.Server`); ``None``: no limit.
    """

    def __init__(
        self,
        registry: Registry,
        tracker: SessionTracker,
        page_size: int,
        cursor_key: bytes,
        *,
        server: Server | None = None,
        tasks: TaskRunner | None = None,
        completion_rate_limit: RateLimit | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, not {page_size!r}")
        self._server = server
        self.tasks = tasks if tasks is not None else TaskRunner()
        """The server's tasks."""
        self._tracker = tracker
        self._registry = registry
        self._page_size = page_size
        self._cursor_key = cursor_key
        self._meta_warned: set[tuple[str, str]] = set()
        """The (handler, ``_meta`` key) pairs of results already warned of
        (:func:`fit_unsendable_meta`)."""
        self._completion_buckets = (
            None if completion_rate_limit is None else KeyedBuckets(completion_rate_limit)
        )

    def handlers(self) -> Handlers:
        """A handler table with every method."""
        table: dict[str, RequestHandler] = {
            "tools/list": self.list_tools,
            "tools/call": self.call_tool,
            "prompts/list": self.list_prompts,
            "prompts/get": self.get_prompt,
            "resources/list": self.list_resources,
            "resources/templates/list": self.list_templates,
            "resources/read": self.read_resource,
            "resources/subscribe": self.subscribe,
            "resources/unsubscribe": self.unsubscribe,
            "completion/complete": self.complete,
            TASKS_GET: self.tasks.tasks_get,
            TASKS_UPDATE: self.tasks.tasks_update,
            TASKS_CANCEL: self.tasks.tasks_cancel,
        }
        return Handlers(table)

    # ------------------------------------------------------------ running user code

    async def _call(
        self,
        ctx: RequestContext,
        entry: Entry,
        kwargs: dict[str, Any],
        task: TaskRun | None = None,
    ) -> Any:
        """Run ``entry``'s function; a modern-era ask becomes :class:`InputRequiredResult`
        (unless ``task``, the call's task, has started: then the task asks).

        Raises:
            ToolError, McpError, ResourceNotFound: the function raised it, bare or in an
                exception group of its own nursery (see :func:`_raise_meant_for_peer`).
            BaseException: anything else the function raised (a bug in it), as raised.
        """
        self._tracker.track(session_of(ctx))
        # A Context only for a function that takes one (only a Context asks, so the
        # ask handlers below build one only on the path no other function reaches).
        context: Context | None = None
        try:
            if entry.context_param is None:  # (no Context: nothing to limit)
                return await invoke(entry.fn, entry.run_async, kwargs)
            context = kwargs[entry.context_param] = Context(ctx, self._server, task=task)
            async with context._limiting():
                return await invoke(entry.fn, entry.run_async, kwargs)
        except _InputNeeded as exc:
            return self._input_required(ctx, task, context, exc.requests, exc.asked)
        except BaseExceptionGroup as group:
            needed, rest = group.split(_InputNeeded)
            if needed is None:
                _raise_meant_for_peer(group)
                raise
            if rest is not None:  # cancelled, or a task failed: the questions are moot
                _raise_meant_for_peer(rest)
                raise rest from None
            requests: dict[str, Any] = {}
            asked: dict[str, str] = {}
            for leaf in _leaves(needed):
                requests.update(leaf.requests)
                asked.update(leaf.asked)
            return self._input_required(ctx, task, context, requests, asked)

    def _input_required(
        self,
        ctx: RequestContext,
        task: TaskRun | None,
        context: Context | None,
        requests: dict[str, Any],
        asked: dict[str, str],
    ) -> InputRequiredResult:
        """The modern answer that asks ``requests``, its state from ``context`` (built
        now if the function took none: another function's Context asked)."""
        if context is None:
            context = Context(ctx, self._server, task=task)
        return InputRequiredResult(input_requests=requests, state=context._state(asked))

    def _page(
        self, ctx: RequestContext, kind: ListKind, field: str, items: Sequence[Any]
    ) -> dict[str, Any]:
        version = self._registry.versions[kind]
        return list_result(
            ctx.params,
            field,
            items,
            self._page_size,
            list_version=f"{field}:{version}",
            key=self._cursor_key,
        )

    # ------------------------------------------------------------ tools

    async def list_tools(self, ctx: RequestContext) -> dict[str, Any]:
        """``tools/list``: registration order, paginated (the core leaves out what a
        legacy session's revision lacks: no ``outputSchema`` before 2025-06-18...)."""
        items = [entry.definition for entry in self._registry.tools.values()]
        return self._page(ctx, "tools", "tools", items)

    async def call_tool(self, ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        """``tools/call``: validate, run, convert (see :meth:`Server.tool`)."""
        params = _params(ctx)
        name, tool = _named(self._registry.tools, params, "tools/call", "tool")
        arguments = params.get("arguments")
        if arguments is None:
            # Absent means none; null is malformed (CallToolRequest: an object when
            # present), answered -32602 below as any other non-object.
            arguments = None if "arguments" in params else {}
        if type(arguments) is not dict and not isinstance(arguments, Mapping):
            raise _invalid("Invalid params: arguments must be an object")
        fit = tool.plain_test
        if fit is not None and fit(arguments):
            kwargs = dict(arguments)  # (valid, and what coerce_arguments would make of them)
        else:
            # Validated against the schema (a verbatim one when validate() can use it,
            # else the function checks them); the registry's quick test first:
            # validate() walks the schema, to list what is wrong.
            schema = tool.input_check if tool.custom_input else tool.input_schema
            test = tool.input_test
            if schema is not None and (test is None or not test(arguments)):
                problems = validate(arguments, schema)
                if problems:
                    why = "; ".join(problems)
                    return _tool_error(f"Invalid arguments for tool {name!r}: {why}")
            if tool.custom_input:
                problem = _custom_arguments_problem(tool, arguments)
                if problem is not None:
                    return _tool_error(f"Invalid arguments for tool {name!r}: {problem}")
                kwargs = dict(arguments)  # (passed as JSON values, unconverted)
            elif tool.plain_params is not None and _plain_fit(tool.plain_params, arguments):
                kwargs = dict(arguments)  # (what coerce_arguments would make of them)
            else:
                try:
                    kwargs = coerce_arguments(tool.fn, arguments, skip=tool.skip)
                except ValueError as exc:
                    return _tool_error(f"Invalid arguments for tool {name!r}: {exc}")
                except Exception:
                    # A class of an argument failed in its own code (see
                    # coerce_arguments): answered as a failure of the tool's body is.
                    logger.exception("tool %r: building its arguments failed", name)
                    return _tool_error(f"Tool {name!r} failed with an internal error")
        if tool.task is not None:
            run = functools.partial(self._run_tool, ctx, name, tool, kwargs)
            answer = await self.tasks.call(ctx, tool.task, tool.task_start, run, f"Tool {name!r}")
            if answer is not None:
                return answer
        return await self._run_tool(ctx, name, tool, kwargs)

    async def _run_tool(
        self,
        ctx: RequestContext,
        name: str,
        tool: ToolEntry,
        kwargs: dict[str, Any],
        task: TaskRun | None = None,
    ) -> dict[str, Any] | InputRequiredResult:
        """Run a tool with valid arguments; its result (or tool error) as a result.

        Raises:
            McpError: the tool raised one (a protocol error).
        """
        try:
            value = await self._call(ctx, tool, kwargs, task)
        except ToolError as exc:
            return _tool_error(exc.message)
        except McpError:
            raise
        except Exception:
            logger.exception("tool %r failed", name)
            return _tool_error(f"Tool {name!r} failed with an internal error")
        if isinstance(value, InputRequiredResult):
            return value
        try:
            return adapt_tool_result(
                tool_result(tool, value, self._meta_warned), ctx.protocol_version
            )
        except (TypeError, ValueError):
            logger.exception("tool %r returned a value that does not fit its result", name)
            return _tool_error(f"Tool {name!r} failed with an internal error")

    # ------------------------------------------------------------ prompts

    async def list_prompts(self, ctx: RequestContext) -> dict[str, Any]:
        """``prompts/list``: registration order, paginated."""
        items = [entry.definition for entry in self._registry.prompts.values()]
        return self._page(ctx, "prompts", "prompts", items)

    async def get_prompt(self, ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        """``prompts/get``: arguments checked against the signature (-32602)."""
        params = _params(ctx)
        name, prompt = _named(self._registry.prompts, params, "prompts/get", "prompt")
        arguments = _string_map(params, "arguments", "arguments")
        try:
            kwargs = coerce_strings(prompt.fn, prompt.schema, prompt.skip, arguments)
        except ValueError as exc:
            raise _invalid(f"Invalid arguments for prompt {name!r}: {exc}") from None
        value = await self._call(ctx, prompt, kwargs)
        if isinstance(value, InputRequiredResult):
            return value
        if isinstance(value, loaded_models("GetPromptResult")):
            result: dict[str, Any] = unstructure(value)
        else:
            result = {"messages": prompt_messages(value)}
            if "description" in prompt.definition:
                result["description"] = prompt.definition["description"]
        result = fit_unsendable_meta(result, f"Prompt {name!r}", self._meta_warned)
        return adapt_prompt_result(result, ctx.protocol_version)

    # ------------------------------------------------------------ resources

    async def list_resources(self, ctx: RequestContext) -> dict[str, Any]:
        """``resources/list``: the resources with fixed URIs, paginated."""
        items = [entry.definition for entry in self._registry.resources.values()]
        return self._page(ctx, "resources", "resources", items)

    async def list_templates(self, ctx: RequestContext) -> dict[str, Any]:
        """``resources/templates/list``: paginated."""
        items = [entry.definition for entry in self._registry.templates.values()]
        return self._page(ctx, "resources", "resourceTemplates", items)

    async def read_resource(self, ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        """``resources/read`` (see :meth:`_read`)."""
        uri = _string_param(_params(ctx), "uri", "resources/read")
        entry, value = await self._read(ctx.era, uri, functools.partial(self._call, ctx))
        if isinstance(value, InputRequiredResult):
            return value
        contents = read_result_contents(uri, value, entry.mime_type)
        return fit_unsendable_meta(
            {"contents": contents}, f"Resource {entry.definition['name']!r}", self._meta_warned
        )

    async def read_in_process(self, context: Context[Any], uri: str) -> ReadResourceResult:
        """:meth:`Context.read_resource <mcp_trio.Context.read_resource>`: what
        ``resources/read`` of ``uri`` answers, in process, the function run with
        ``context`` (so that its asks are the caller's)."""
        from mcp_sansio.types import ReadResourceResult  # noqa: PLC0415 (on first use)

        if not isinstance(uri, str):
            raise TypeError(f"the resource URI must be a string, not {type(uri).__name__}")

        async def run(entry: ResourceEntry | TemplateEntry, kwargs: dict[str, Any]) -> Any:
            if entry.context_param is not None:
                kwargs[entry.context_param] = context
            try:
                return await invoke(entry.fn, entry.run_async, kwargs)
            except BaseExceptionGroup as group:  # (of the function's own nursery)
                _raise_meant_for_peer(group)
                raise

        entry, value = await self._read(context.era, uri, run)
        contents = read_result_contents(uri, value, entry.mime_type)
        return structure({"contents": contents}, ReadResourceResult)

    async def _read(
        self,
        era: Era,
        uri: str,
        run: Callable[[ResourceEntry | TemplateEntry, dict[str, Any]], Awaitable[Any]],
    ) -> tuple[ResourceEntry | TemplateEntry, Any]:
        """What serves ``uri`` (a fixed URI first, then the templates in order: the first
        whose variables convert) and what ``run(entry, kwargs)`` of its function returns.

        Raises:
            McpError: the not-found error of ``era`` when nothing serves ``uri`` or the
                function raises :class:`ResourceNotFound`; -32602 when templates match
                but the variables convert for none.
        """
        entry: ResourceEntry | TemplateEntry
        static = self._registry.resources.get(uri)
        kwargs: dict[str, Any] = {}
        if static is not None:
            entry = static
        else:
            try:
                found = self._registry.resolve_template(uri)
            except ValueError as exc:
                raise _invalid(f"Invalid params: {uri}: {exc}", {"uri": uri}) from None
            if found is None:
                raise _not_found(era, uri)
            entry, kwargs = found
        try:
            return entry, await run(entry, kwargs)
        except ResourceNotFound as exc:
            raise _not_found(era, exc.uri) from None

    async def subscribe(self, ctx: RequestContext) -> dict[str, Any]:
        """``resources/subscribe`` (legacy): remember the URI for this session (a
        :class:`~mcp_trio.Session`, or an HTTP session of ``Server.serve_http``)."""
        uri = _string_param(_params(ctx), "uri", "resources/subscribe")
        uris = self._tracker.subscriptions_of(ctx, create=True)
        if uris is not None:
            if uri not in uris and len(uris) >= MAX_SUBSCRIPTIONS_PER_SESSION:
                raise _invalid(
                    f"Invalid params: this session is subscribed to {len(uris)} resources,"
                    " the most it may be; unsubscribe from one first",
                    {"uri": uri},
                )
            uris.add(uri)
        return {}

    async def unsubscribe(self, ctx: RequestContext) -> dict[str, Any]:
        """``resources/unsubscribe`` (legacy)."""
        uri = _string_param(_params(ctx), "uri", "resources/unsubscribe")
        uris = self._tracker.subscriptions_of(ctx, create=False)
        if uris is not None:
            uris.discard(uri)
        return {}

    # ------------------------------------------------------------ completion

    async def complete(self, ctx: RequestContext) -> dict[str, Any]:
        """``completion/complete``: a registered handler, else the fixed choices of a
        ``Literal`` / ``Enum`` parameter, else nothing."""
        self._check_completion_rate(ctx)
        params = _params(ctx)
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, Mapping) or not isinstance(argument, Mapping):
            raise _invalid("Invalid params: completion/complete needs ref and argument")
        arg_name = _string_param(argument, "name", "completion/complete argument")
        value = _string_param(argument, "value", "completion/complete argument")
        context = params.get("context")
        resolved = (
            _string_map(context, "arguments", "context.arguments")
            if isinstance(context, Mapping)
            else {}
        )
        ref_type = ref.get("type")
        choices: tuple[str, ...] = ()
        if ref_type == "ref/prompt":
            key, prompt = _named(self._registry.prompts, ref, "ref/prompt", "prompt")
            choices = prompt.choices.get(arg_name, ())
        elif ref_type == "ref/resource":
            key = _string_param(ref, "uri", "ref/resource")
            template = self._registry.templates.get(key)
            if template is None and key not in self._registry.resources:
                # completion.mdx: the uri is "a URI or URI template" (the schema says so
                # in every revision): a URI one of our templates matches completes for
                # that template, its variables the context the request does not give.
                found = self._registry.match_template(key)
                if found is None:
                    raise _invalid(f"Unknown resource template: {key}", {"uri": key})
                template, values = found
                key = template.template.template
                values.pop(arg_name, None)  # (being completed: not resolved yet)
                resolved = {**values, **resolved}
            choices = () if template is None else template.choices.get(arg_name, ())
        else:
            raise _invalid(f"Invalid params: unknown ref type {ref_type!r}")
        handler = self._registry.completions.get(
            (ref_type, key, arg_name)
        ) or self._registry.completions.get((ref_type, key, None))
        if handler is None:
            return {"completion": completion_json([c for c in choices if c.startswith(value)])}
        request = CompletionRequest(
            ref_type=ref_type, ref=key, argument=arg_name, value=value, context=resolved
        )
        result = await self._call(ctx, handler, {handler.request_param: request})
        if isinstance(result, InputRequiredResult):
            raise RuntimeError("a completion handler cannot ask the client for input")
        return {"completion": completion_json(result)}

    def _check_completion_rate(self, ctx: RequestContext) -> None:
        """Take a token from the client's completion bucket (see
        ``Server(completion_rate_limit=)``, which says what a client is).

        Raises:
            McpError: :data:`~mcp_trio.RATE_LIMITED_CODE` when its bucket is empty.
        """
        buckets = self._completion_buckets
        if buckets is None:
            return
        key: Hashable
        owner: object = None
        session = session_of(ctx)  # (HTTP: no Session object, ...)
        if ctx.principal is not None:
            # (A subject is unique within its issuer: two issuers may both have "alice".)
            issuer = ctx.principal.claims.get("iss")
            key = ("principal", issuer if isinstance(issuer, str) else None, ctx.principal.subject)
        elif session is not None:
            owner = session
            key = ("session", id(session))
        elif (session_id := getattr(ctx, "session_id", None)) is not None:
            key = ("http", session_id)  # (... but a legacy session's id)
        else:  # (an anonymous modern request: its IP address, when known)
            key = ("peer", getattr(ctx, "peer", None))
        wait = buckets.take(key, trio.current_time(), owner)
        if wait > 0:
            limit = buckets.limit
            raise McpError(
                ErrorData(
                    code=RATE_LIMITED_CODE,
                    message=f"Too many completion requests (at most {limit.per_second:g} "
                    f"a second, {limit.burst} at once): retry in {wait:.3g} s",
                    data={"retryAfter": wait},
                )
            )


def _raise_meant_for_peer(group: BaseExceptionGroup[Any]) -> None:
    """Raise the error a handler meant for the peer, if ``group`` (from a nursery in the
    handler) holds nothing else; otherwise return, and the group stays a bug.

    Only :class:`ToolError` leaves: one :class:`ToolError`, their messages joined by
    ``"; "``. A single :class:`McpError` or :class:`ResourceNotFound` leaf: a copy of it.
    What is raised is a new exception ``from group`` (trio's "Designing for multiple
    errors"), so the traceback keeps every task's part.
    """
    leaves = _leaves(group)
    if leaves and all(isinstance(leaf, ToolError) for leaf in leaves):
        messages = dict.fromkeys(leaf.message for leaf in leaves if isinstance(leaf, ToolError))
        raise ToolError("; ".join(messages)) from group
    if len(leaves) == 1:
        (leaf,) = leaves
        if isinstance(leaf, McpError):
            raise McpError(leaf.error) from group
        if isinstance(leaf, ResourceNotFound):
            raise ResourceNotFound(leaf.uri) from group


def _leaves(group: BaseExceptionGroup[_X]) -> list[_X]:
    out: list[_X] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out

"""The :class:`Context` a server handler may ask for, and what it can do in either era.

Theory of operation
-------------------
A handler that declares a parameter annotated :class:`Context` gets one. Progress and
logging map onto the request context, through per-request rate limits
(``Server(progress_interval=, log_rate_limit=)``): a held progress report gets a timer
in a nursery around the handler (see ``_limiting``). Asking the *client* for something
(``elicit``, ``sample``, ``list_roots``) differs by era, and the handler must not have
to care:

* **Legacy**: the server sends a request to the client (``elicitation/create``...) tied
  to the request being served, and waits for the answer.
* **Modern** (multi round-trip requests, ``basic/patterns/mrtr``): servers send no
  requests. The handler is *run again* instead. On the first run, the first ask raises
  the internal :class:`_InputNeeded`; the server turns it into an ``input_required``
  result whose ``inputRequests`` holds the ask under a deterministic key (``elicit-0``,
  ``sample-1``...: the kind and the position of the ask in the run). The client
  answers and retries; the handler runs from the top, and each ask that was answered
  returns its recorded answer at once, until the next unanswered one raises again.

  The answers of every round are carried in the signed ``requestState`` (the core seals
  it with an HMAC and an expiry), each with a digest of the request it answers, and an
  ask is matched to its answer by that digest: a run that asks something different (a
  handler whose questions depend on the clock, say) is asked again instead of getting a
  stale answer, and concurrent asks (in tasks of the handler's own nursery) may come in
  any order. Concurrent asks that all raise before a checkpoint share one round.

  So in the modern era **a handler may run more than once**: whatever it does before
  its last ask is repeated on every round. Put side effects after the asks, or make them
  idempotent.

``_InputNeeded`` derives from ``BaseException`` so that a handler's ``except
Exception:`` cannot swallow it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Literal,
    TypeVar,
    cast,
    final,
    overload,
)

import attrs
import trio

from mcp_sansio import (
    LEGACY_VERSIONS,
    Connection,
    Era,
    ErrorCode,
    ErrorData,
    LifecycleState,
    LocalProtocolError,
    RemoteProtocolError,
    RequestId,
    structure,
)
from mcp_sansio._modern import elicitation_modes
from mcp_sansio._versions import REVISIONS

from ._config import DEFAULT_LOG_RATE_LIMIT, DEFAULT_PROGRESS_INTERVAL
from ._errors import McpError, SessionClosed
from ._jsonschema import validate
from ._server_forms import (
    ELICITATION_MODE_VERSIONS,
    check_elicitation_url,
    form_spec,
    sampling_messages,
    structure_as,
)
from ._util import TokenBucket, open_task_nursery

if TYPE_CHECKING:
    from mcp_sansio import types as mcp_types
    from mcp_sansio._http_auth import Principal

    from ._handlers import RequestContext, _Notify
    from ._server import Server
    from ._tasks import TaskRun

__all__ = ["Context", "ElicitationCompleter", "ElicitationResult", "SamplingResult"]

T = TypeVar("T")
if TYPE_CHECKING:
    # (PEP 696's default, so that a bare ``Context`` is ``Context[Any]``, for type
    # checkers; at run time only the name of the parameter matters.)
    from typing_extensions import TypeVar as DefaultedTypeVar

    L = DefaultedTypeVar("L", default=Any)
else:
    L = TypeVar("L")

_logger = logging.getLogger("mcp_trio.server")

_CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
_LOG_RANK: dict[str, int] = {
    level: rank
    for rank, level in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
_WARNING = _LOG_RANK["warning"]
_MRTR_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


class _InputNeeded(BaseException):  # internal control flow, never seen by users
    """Modern era: a handler asked the client for input it does not have yet."""

    def __init__(self, requests: dict[str, dict[str, Any]], asked: dict[str, str]) -> None:
        super().__init__(sorted(requests))
        self.requests = requests
        """The ``inputRequests`` entries, by key."""
        self.asked = asked
        """key -> digest of the request asked under it."""


def _digest(request: Mapping[str, Any]) -> str:
    """A digest of ``request`` (an ask's method and params) that an answer is matched
    by: the same for equal requests, in every process and round; different for
    different ones. Never raises for JSON values: ``surrogatepass`` gives a lone
    surrogate (which has no UTF-8) bytes of its own, which no other text encodes to,
    and leaves every other text's bytes, so every digest sealed before is unchanged."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


#: A surrogate code point: alone in a ``str`` (``os.fsdecode`` of a name that is not
#: UTF-8, say) it has no UTF-8 encoding, so no JSON text on the wire can carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _readable(message: str) -> str:
    """``message`` (prose, for the user) with each lone surrogate replaced by U+FFFD,
    as a task's status message is: it can then be sent."""
    return message if message.isascii() else _SURROGATE.sub("\ufffd", message)


def _unsendable(value: Any, where: str) -> str | None:
    """Where in ``value`` (JSON data) a string holds a lone surrogate, if anywhere."""
    if isinstance(value, str):
        return where if not value.isascii() and _SURROGATE.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{where}[{key!r}]"
            found = _unsendable(key, inner + " (the key)") or _unsendable(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _unsendable(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def _missing_capability(what: str, required: dict[str, Any]) -> McpError:
    return McpError(
        ErrorData(
            code=ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"The client did not declare the capability needed for {what}",
            data={"requiredCapabilities": required},
        )
    )


_FREE_CONTEXT = frozenset(v for v, r in REVISIONS.items() if not r.sampling_context)
"""The protocol versions without the ``sampling.context`` capability (before 2025-11-25,
:attr:`~mcp_sansio._versions.Revision.sampling_context`): there
``includeContext`` is asked without one (the client "MAY ignore this request"); from
2025-11-25 on, ``thisServer`` and ``allServers`` are a SHOULD NOT unless the client
declares it (client/sampling.mdx, "Capabilities")."""

_SAMPLING_TYPES = frozenset().union(*(r.sampling_content_types for r in REVISIONS.values()))


def _check_sampling_content(messages: list[dict[str, Any]], version: str) -> None:
    """Refuse a content type the session's protocol version has no place for in a
    ``SamplingMessage`` (types no revision has are left for the client to judge)."""
    revision = REVISIONS.get(version)
    if revision is None:
        return
    for message in messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in _SAMPLING_TYPES and kind not in revision.sampling_content_types:
                since = [v for v, r in REVISIONS.items() if kind in r.sampling_content_types]
                raise _not_in_version(f"{kind} content in a sampling message", version, since)


def _check_sampling_tools(version: str) -> None:
    """Refuse ``tools`` / ``toolChoice`` in a sampling request of a protocol version
    without tool use in sampling (it came in 2025-11-25, with the ``tool_use`` content
    type), whatever the client's capabilities say."""
    revision = REVISIONS.get(version)
    if revision is not None and "tool_use" not in revision.sampling_content_types:
        since = [v for v, r in REVISIONS.items() if "tool_use" in r.sampling_content_types]
        raise _not_in_version(
            "tool use in sampling (the tools and toolChoice parameters)", version, since
        )


def _not_in_version(what: str, version: str, versions: Sequence[str]) -> McpError:
    """What a handler gets for asking what the session's protocol version cannot carry:
    the same error as for a capability the client lacks (-32021)."""
    return McpError(
        ErrorData(
            code=ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
            message=f"{what} does not exist in protocol version {version}, the version of "
            f"this session (it needs one of {', '.join(versions)})",
            data={"protocolVersion": version, "supported": list(versions)},
        )
    )


_UNSENDABLE = (
    LocalProtocolError,
    SessionClosed,
    trio.BrokenResourceError,
    trio.ClosedResourceError,
)
"""What sending what a rate limit held may fail with as the handler ends: the request
answered beside the Context, or the session going away. Logged, never raised over the
handler's own outcome."""


def _answered(exc: BaseException) -> bool:
    """Whether a handler that raised ``exc`` will be answered (with an error, or
    ``input_required``): every exception in it is an ``Exception`` or an ask, none a
    cancellation, Ctrl-C or other ``BaseException``."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_answered(inner) for inner in exc.exceptions)
    return isinstance(exc, Exception | _InputNeeded)


def _in_trio_thread() -> bool:
    """Whether this is trio's thread (else a worker thread of ``trio.to_thread``)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def _invalid_answer(what: str, problem: str) -> McpError:
    return McpError.from_code(ErrorCode.INVALID_PARAMS, f"invalid {what} response: {problem}")


# ------------------------------------------------------------------ results


@final
@attrs.frozen(kw_only=True)
class ElicitationResult(Generic[T]):
    """The user's answer to :meth:`Context.elicit` or :meth:`Context.elicit_url`."""

    action: Literal["accept", "decline", "cancel"]
    """``accept``: submitted (or, in URL mode, consented); ``decline``: refused
    explicitly; ``cancel``: dismissed without choosing."""
    data: T | None = None
    """On ``accept`` in form mode, the content as the requested type (or the content
    mapping when a JSON Schema was given); ``None`` otherwise."""
    content: dict[str, Any] | None = None
    """The content as received."""
    elicitation_id: str | None = None
    """URL mode, legacy era: the ``elicitationId`` the client was sent (the one given,
    else the random one chosen), for :meth:`Context.elicitation_completer`; ``None``
    otherwise."""

    @property
    def accepted(self) -> bool:
        """Whether the action is ``accept``."""
        return self.action == "accept"


@final
@attrs.frozen(kw_only=True)
class SamplingResult:
    """The client's answer to :meth:`Context.sample` (``CreateMessageResult``)."""

    role: str
    """Normally ``"assistant"``."""
    content: list[dict[str, Any]]
    """The content blocks (one, unless the model used tools)."""
    model: str
    """The model that answered."""
    stop_reason: str | None = None
    """Why it stopped (``endTurn``, ``stopSequence``, ``maxTokens``, ``toolUse``...)."""
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False)
    """The whole result object."""

    @property
    def text(self) -> str:
        """The text blocks, joined (empty when there are none)."""
        return "".join(b["text"] for b in self.content if b.get("type") == "text")


_ELICITATION_COMPLETE = "notifications/elicitation/complete"


@final
class ElicitationCompleter:
    """Tells the client that a URL-mode elicitation's out-of-band interaction is over
    (``notifications/elicitation/complete``): what
    :meth:`Context.elicitation_completer` returns. Await it when the interaction ends
    (``await complete()``), from any task of the server's Trio run (from a worker
    thread: ``trio.from_thread.run(complete)``), also long after the request that made
    it was answered. It goes to the session that request came on, and to no other
    (client/elicitation.mdx: "MUST only send the notification to the client that
    initiated the elicitation request").

    It holds that session weakly: kept after the session ended, it keeps nothing alive.
    """

    __slots__ = ("_elicitation_id", "_notify")

    def __init__(self, elicitation_id: str, notify: _Notify) -> None:
        self._elicitation_id = elicitation_id
        self._notify = notify

    @property
    def elicitation_id(self) -> str:
        """The ``elicitationId`` the notification names."""
        return self._elicitation_id

    async def __call__(self) -> bool:
        """Send the notification (each call sends it again: the client ignores an id it
        completed already).

        Returns:
            Whether it went to the session (written, or queued for it: over Streamable
            HTTP on the session's GET stream, kept for replay while none is open);
            ``False`` once the session has ended, as a completion that comes after the
            client left does: there is no one to tell (nor, over HTTP, when the server
            offers no GET stream).

        Raises:
            LocalProtocolError: the session cannot carry it now (an HTTP session whose
                client has not sent ``notifications/initialized`` yet).
        """
        return await self._notify(_ELICITATION_COMPLETE, {"elicitationId": self._elicitation_id})

    def __repr__(self) -> str:
        return f"<ElicitationCompleter {self._elicitation_id!r}>"


# ------------------------------------------------------------------ the context


@final
class Context(Generic[L]):
    """What a server handler can do while it runs. Declare a parameter annotated
    ``Context`` to get one; it is not a tool argument and is left out of the schema.
    ``Context[App]`` types :attr:`lifespan` as ``App`` (the value of
    ``Server(lifespan=...)``); a bare ``Context`` is ``Context[Any]``.

    >>> @server.tool()
    ... async def book(city: str, ctx: Context) -> str:
    ...     await ctx.report_progress(0.1, 1.0, "looking")
    ...     answer = await ctx.elicit("How many nights?", int)
    ...     ...

    The same code serves both eras. Asking the client (:meth:`elicit`,
    :meth:`elicit_url`, :meth:`sample`, :meth:`list_roots`) sends a request to the client
    in a legacy session; in the modern era it answers ``input_required`` and the handler
    **runs again** on the client's retry, with the answers at hand (see the module
    docstring): what it does before its last ask happens once per round.

    Error handling:
        Asking raises :class:`~mcp_trio.McpError` with code -32021 when the client did
        not declare the capability (check :attr:`client_capabilities` first to offer a
        fallback), and with the client's error when it refuses in a legacy session.
    """

    __mcp_context__: ClassVar[bool] = True

    def __init__(
        self, request: RequestContext, server: Server | None = None, *, task: TaskRun | None = None
    ) -> None:
        self._raw = request
        self._server = server
        self._task = task  # a task tool's call (see mcp_trio._tasks)
        self._asks = 0
        self._answers = self._recorded_answers()
        self._used: set[str] = set()
        # Rate limits (see Server's log_rate_limit= and progress_interval=).
        interval = DEFAULT_PROGRESS_INTERVAL if server is None else server.progress_interval
        limit = DEFAULT_LOG_RATE_LIMIT if server is None else server.log_rate_limit
        self._progress_interval = interval if request.progress_token is not None else None
        self._progress_due = -math.inf  # when the next one may go out
        self._progress_last: float | None = None  # the last value sent or held
        self._progress_held: tuple[float, float | None, str | None] | None = None
        self._progress_nursery: trio.Nursery | None = None  # (runs the held one's timer)
        self._progress_timer = False  # whether that timer runs
        self._log_limit = limit
        self._log_bucket: TokenBucket | None = None  # (made by the first log: most send none)
        self._log_dropped = 0
        self._log_sent_rank: int | None = None  # the lowest level that went out
        self._log_unsure = [0] * len(_LOG_RANK)  # dropped before any went out, by level

    # ------------------------------------------------------------ introspection

    @property
    def request_context(self) -> RequestContext:
        """The binding's request context (the low-level view)."""
        return self._raw

    @property
    def server(self) -> Server | None:
        """The server running the handler."""
        return self._server

    @property
    def request_id(self) -> RequestId:
        """The client's id of the request being served."""
        return self._raw.request_id

    @property
    def method(self) -> str:
        """The method being served (``tools/call``, ``resources/read``...)."""
        return self._raw.method

    @property
    def era(self) -> Era:
        """The era the request is served in."""
        return self._raw.era

    @property
    def protocol_version(self) -> str:
        """The protocol version the request is served under."""
        return self._raw.protocol_version

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``_meta`` (empty when absent)."""
        meta = (self._raw.params or {}).get("_meta")
        return dict(meta) if isinstance(meta, Mapping) else {}

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared: in the request envelope (modern) or at
        ``initialize`` (legacy)."""
        if self._raw.era is Era.MODERN:
            return dict(self._raw.client_capabilities or {})
        return dict(self._connection().peer_capabilities)

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The client's ``Implementation`` (name, version...), if it sent one."""
        if self._raw.era is Era.MODERN:
            info = self.meta.get(_CLIENT_INFO_KEY)
            return dict(info) if isinstance(info, Mapping) else None
        return self._connection().peer_info

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled the request, or in a task asked ``tasks/cancel``
        (the handler is being cancelled)."""
        if self._task is not None and self._task.started:
            return self._task.cancel_requested
        return self._raw.cancelled

    @property
    def principal(self) -> Principal | None:
        """Who is calling, as ``serve_http(authenticate=...)`` found out (subject,
        scopes, claims); ``None`` when the transport authenticates nobody. Scopes a
        tool needs are best declared (``@server.tool(scopes="files:write")``): a call
        without them is refused before the tool runs, with a challenge the client can
        step up on."""
        return self._raw.principal

    @property
    def lifespan(self) -> L:
        """What the server's lifespan (``Server(lifespan=...)``) yielded, in the
        ``serve_*`` (or :meth:`Server.open_lifespan <mcp_trio.Server.open_lifespan>`
        block) serving this request: the database pool, HTTP client... its handlers
        share. The same object for every request of that serve, in either era, in a
        worker thread (a plain ``def`` handler) and in a task of the tasks extension.

        Raises:
            RuntimeError: the server has no ``lifespan=``, or its lifespan is not entered
                where the request is served: its handlers were given to a transport
                directly (``serve_stdio(server.handlers())``) outside
                :meth:`Server.open_lifespan <mcp_trio.Server.open_lifespan>`.
        """
        server = self._server
        if server is None:
            raise RuntimeError("this Context serves no Server: it has no lifespan")
        return cast(L, server._lifespan_value())

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The header fields of the HTTP request that carried this one: over Streamable
        HTTP (either era) the request's own; over WebSocket the connection's opening
        handshake's (the same for each request of the connection). A read-only mapping,
        looked up in any case (``ctx.headers.get("X-Tenant")``), names listed
        lower-cased, a repeated field's values joined with ``", "``, decoded as
        latin-1; what the transport's ``authenticate`` hook saw. ``None`` on other
        transports (stdio, in memory). The head as received, so a client's word only:
        trust what an ``authenticate`` hook checked (:attr:`principal`), or what a
        reverse proxy you run sets."""
        return self._raw.headers

    @property
    def needed_scopes(self) -> frozenset[str] | None:
        """The OAuth scopes this request was checked to need (the tool's ``scopes=``
        and the scope hooks' answer), as the transport that checked them found them;
        ``None`` when nothing was checked (no principal, as on stdio and in memory, or
        no hook)."""
        return self._raw.needed_scopes

    # ------------------------------------------------------------ tasks

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as (tasks extension), or ``None``."""
        return None if self._task is None else self._task.task_id

    def start_task(self) -> bool:
        """Make this call a task now (for a tool registered with ``task_start="explicit"``;
        otherwise its task already exists): the client gets the ``CreateTaskResult``, and
        the function runs on. Ask what must be asked *before* the task first: those
        questions are ordinary input-required rounds of the call.

        Returns:
            Whether the call is a task: ``False`` for a tool without tasks, a client that
            did not declare the extension, the legacy era, or a ``task="optional"`` tool
            when the server keeps as many tasks as it may (it runs on as a plain call).

        Raises:
            McpError: -32603 for a ``task="required"`` tool when the server keeps as many
                tasks as it may.

        A plain ``def`` tool (run in a worker thread) may call it too: the task is created
        in trio's thread.
        """
        if self._task is None:
            return False
        if _in_trio_thread():
            return self._task.start()
        return trio.from_thread.run_sync(self._task.start)

    # ------------------------------------------------------------ progress and logs

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> bool:
        """Report progress, if the client asked for it (``notifications/progress``).

        In a task, no notification is sent (the extension has none for tasks): a
        ``message`` becomes the task's ``statusMessage`` instead (cut to
        :attr:`~mcp_trio.TaskConfig.max_status_message_bytes`).

        Rate limit (``Server(progress_interval=)``): a report that comes sooner than the
        interval after the last one sent is held, replacing any held before it, and
        sent when the interval ends (or before the handler's answer); the final one
        (``progress >= total``) goes out at once. This never waits for the interval.

        Returns:
            Whether a notification was sent (or held to be sent); not one too large for
            a WebSocket, over ``SessionConfig.ws_max_message_size`` (dropped, with a
            warning).

        Raises:
            LocalProtocolError: ``progress`` does not increase (held reports count), or
                it or ``total`` is not a finite number.
        """
        if self._task is not None and self._task.started:
            if message is not None:
                self._task.set_message(message)
            return False
        interval = self._progress_interval
        if interval is None:
            return await self._raw.report_progress(progress, total, message)
        if not math.isfinite(progress) or (total is not None and not math.isfinite(total)):
            raise LocalProtocolError(f"progress {progress} of {total} is not a finite number")
        last = self._progress_last
        if last is not None and progress <= last:
            raise LocalProtocolError(f"progress must increase ({progress} after {last})")
        now = trio.current_time()
        if now >= self._progress_due or (total is not None and progress >= total):
            self._progress_held = None  # (superseded)
            return await self._send_progress(progress, total, message, now + interval)
        self._progress_last = progress
        self._progress_held = (progress, total, message)
        nursery = self._progress_nursery
        if nursery is not None and not self._progress_timer:
            self._progress_timer = True
            nursery.start_soon(self._send_held_progress)
        return True

    async def _send_progress(
        self, progress: float, total: float | None, message: str | None, due: float
    ) -> bool:
        self._progress_last = progress
        self._progress_due = due
        return await self._raw.report_progress(progress, total, message)

    async def _send_held_progress(self) -> None:
        """The timer of a held progress report: send it once the interval is over (the
        newest held by then)."""
        try:
            while self._progress_held is not None:
                await trio.sleep_until(self._progress_due)
                held = self._progress_held
                now = trio.current_time()
                if held is not None and now >= self._progress_due:
                    self._progress_held = None
                    interval = self._progress_interval or 0.0
                    await self._send_held(held, now + interval)
        finally:
            self._progress_timer = False

    async def _send_held(self, held: tuple[float, float | None, str | None], due: float) -> None:
        try:
            await self._send_progress(*held, due)
        except _UNSENDABLE as exc:
            # (the handler reported beside the Context, or the session is going away:
            # no one is left to tell)
            _logger.debug("a held progress report was not sent: %s", exc)

    @asynccontextmanager
    async def _limiting(self) -> AsyncIterator[None]:
        """Run a handler that takes this Context in this: held progress gets its timer,
        and what the rate limits still hold (a progress report, the count of dropped
        log messages) goes out before the handler's answer -- whether it returns or
        raises (an error answer: ``McpError``, a tool error, ``-32603``; or a modern
        ask's ``input_required``). Not when it was cancelled (or the session is
        closing): nothing more may go out on it. A handler that turns the cancellation
        into an error, or swallows it and returns, meets it again before anything is
        sent here (``_send_what_is_held`` checks first: a log message is queued in the
        core before any checkpoint of its own). A failure to send what is held (the
        session going away) is logged, and the handler's own outcome stands."""
        try:
            if self._progress_interval is None or self._task is not None:
                # (A task tool's reports become its status once the task starts: no
                # timer; before, a held one goes out with a later report. Nor a nursery,
                # whose exit would let a poll see the last status before the task's end.)
                yield
            else:
                async with open_task_nursery(
                    "handler's progress timer", cancel_on_exit=True
                ) as nursery:
                    self._progress_nursery = nursery
                    try:
                        yield
                    finally:
                        self._progress_nursery = None
                        nursery.cancel_scope.cancel()
        except BaseException as exc:
            if _answered(exc):
                await self._send_what_is_held()
            raise
        await self._send_what_is_held()

    async def _send_what_is_held(self) -> None:
        """Send what the rate limits still hold, as the handler ends (not once it was
        cancelled: ``Cancelled`` is raised first)."""
        # (Before anything is queued: the core takes a log message or a progress report
        # at once, and it would go out after the cancellation, with whatever is written
        # next. Only if cancelled: no schedule point otherwise.)
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._task is not None and self._task.started:
            return  # (the request is answered: nothing may go out on it)
        held = self._progress_held
        if held is not None:
            self._progress_held = None
            await self._send_held(held, trio.current_time())
        if self._log_dropped:
            try:
                await self._log_drops("warning")
            except _UNSENDABLE as exc:
                # (as for a held progress report: the handler's own answer or error,
                # not this, says how it ended)
                _logger.debug("the count of dropped log messages was not sent: %s", exc)

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> bool:
        """Send a log message (``notifications/message``) if the client wants this level.

        Legacy: the level set with ``logging/setLevel`` (everything before one is set);
        modern: the ``logLevel`` of the request's envelope (nothing without one).

        Rate limit (``Server(log_rate_limit=)``, per request): past it the message is
        dropped at once (this never waits), and the next one that goes out (or the
        handler's end) is preceded by a message from logger ``mcp_trio`` whose data
        says how many were dropped.

        Returns:
            Whether it was sent (never in a task: no request is left to carry it; not
            when the rate limit dropped it, nor when it is too large for a WebSocket,
            over ``SessionConfig.ws_max_message_size``: dropped, with a warning).

        Raises:
            LocalProtocolError: an unknown level.
        """
        if self._task is not None and self._task.started:
            return False
        limit = self._log_limit
        if limit is None:
            return await self._raw.log(level, data, logger=logger)
        rank = _LOG_RANK.get(level)
        if rank is None:
            raise LocalProtocolError(f"unknown log level {level!r}")
        now = trio.current_time()
        bucket = self._log_bucket
        if bucket is None:  # (a full bucket, as one made with the Context would be by now)
            bucket = self._log_bucket = TokenBucket(limit, now)
        # The token is taken before the first await, so concurrent calls (subtasks of
        # one handler) cannot all pass one check; it is given back if nothing went out.
        if bucket.take(now) > 0:  # (none taken: the seconds until one is there)
            # Counted only when the client would have got it: a level at or above one
            # that went out (the client's threshold, which only the core knows). Before
            # any did (concurrent calls), counted by level until the first one does.
            if self._log_sent_rank is None:
                self._log_unsure[rank] += 1
            elif rank >= self._log_sent_rank:
                self._log_dropped += 1
            return False
        sent = False
        try:
            if self._log_dropped:
                await self._log_drops(level if rank > _WARNING else "warning")
            sent = await self._raw.log(level, data, logger=logger)
        finally:
            if not sent:
                bucket.give_back()
        if sent and self._log_sent_rank is None:
            self._log_dropped += sum(self._log_unsure[rank:])
            self._log_unsure = [0] * len(_LOG_RANK)
        if sent and (self._log_sent_rank is None or rank < self._log_sent_rank):
            self._log_sent_rank = rank
        return sent

    async def _log_drops(self, level: str) -> None:
        """Tell the client how many log messages the rate limit dropped since the last
        one that went out (at ``level``; not counted against the limit)."""
        dropped, self._log_dropped = self._log_dropped, 0
        data = {
            "message": f"{dropped} log message{'s' if dropped != 1 else ''} of this "
            "request dropped: more than the server's rate limit allows",
            "dropped": dropped,
        }
        await self._raw.log(level, data, logger="mcp_trio")

    async def debug(self, data: Any, *, logger: str | None = None) -> bool:
        """:meth:`log` at ``debug``."""
        return await self.log("debug", data, logger=logger)

    async def info(self, data: Any, *, logger: str | None = None) -> bool:
        """:meth:`log` at ``info``."""
        return await self.log("info", data, logger=logger)

    async def warning(self, data: Any, *, logger: str | None = None) -> bool:
        """:meth:`log` at ``warning``."""
        return await self.log("warning", data, logger=logger)

    async def error(self, data: Any, *, logger: str | None = None) -> bool:
        """:meth:`log` at ``error``."""
        return await self.log("error", data, logger=logger)

    # ------------------------------------------------------------ asking the client

    @overload
    async def elicit(
        self, message: str, schema: type[T], *, timeout: float | None = None
    ) -> ElicitationResult[T]: ...
    @overload
    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, timeout: float | None = None
    ) -> ElicitationResult[dict[str, Any]]: ...
    async def elicit(
        self, message: str, schema: Any, *, timeout: float | None = None
    ) -> ElicitationResult[Any]:
        """Ask the user to fill in a form (``elicitation/create``, form mode).

        Args:
            message: what to ask, for the user. A lone surrogate in it (from
                ``os.fsdecode`` of a name that is not UTF-8, say: no JSON text can
                carry one) is sent as U+FFFD, as a task's status message is.
            schema: a type (a dataclass, attrs class or TypedDict of strings, numbers,
                booleans and enums; or one such scalar type, asked as a single field) or
                a JSON Schema of a flat object. Never ask for secrets this way: use
                :meth:`elicit_url`.
            timeout: legacy era: seconds to wait for the user (default: no limit).

        Returns:
            The action, and on ``accept`` the data as ``schema`` (an instance of the type,
            or the content mapping for a JSON Schema).

        Raises:
            TypeError: the schema is not a flat form, or not one the session's protocol
                version can carry (2025-06-18: no multi-select, no titled options,
                defaults only on booleans; a type's other defaults are left off).
            ValueError: a string of the schema holds a lone surrogate (it is data the
                answer is checked against: not changed, refused), before anything is
                sent; the session goes on.
            McpError: -32021 if the client cannot elicit (no capability, or a protocol
                version before 2025-06-18); -32602 if its answer does not fit the
                schema; the client's error (legacy) if it refuses.
        """
        version = self.protocol_version
        spec = form_spec(schema, protocol_version=version)
        params: dict[str, Any] = {"message": _readable(message), "requestedSchema": spec.schema}
        if version in ELICITATION_MODE_VERSIONS:  # 2025-06-18 has no mode (form only)
            params = {"mode": "form", **params}
        if "form" not in elicitation_modes(self.client_capabilities.get("elicitation")):
            raise _missing_capability("elicitation (form)", {"elicitation": {"form": {}}})
        parse = functools.partial(_parse_elicit_answer, schema=spec.schema)
        action, content = await self._ask("elicit", "elicitation/create", params, timeout, parse)
        if action != "accept":
            return ElicitationResult(action=action, content=content)
        data: Any = content
        if spec.target is not None:
            data = structure_as(spec.target, (content or {})["value"] if spec.wrapped else content)
        return ElicitationResult(action=action, data=data, content=content)

    async def elicit_url(
        self,
        url: str,
        message: str,
        *,
        elicitation_id: str | None = None,
        timeout: float | None = None,
    ) -> ElicitationResult[None]:
        """Send the user to a URL for an interaction the client must not see (URL mode):
        credentials, payments, third-party authorization.

        ``accept`` means the user agreed to go, not that they finished: check for the
        outcome yourself (in the modern era, ask again on the next round until done).

        Args:
            url: where to send the user.
            message: why, for the user (a lone surrogate is sent as U+FFFD, as in
                :meth:`elicit`).
            elicitation_id: legacy era: the id tying a later
                ``notifications/elicitation/complete`` to this request (default: a
                random one, which the result's ``elicitation_id`` holds); to send that
                notification, pass it to :meth:`elicitation_completer` while the
                request runs.
            timeout: legacy era: seconds to wait for the user.

        Raises:
            McpError: -32021 if the client did not declare ``elicitation.url`` or the
                session's protocol version has no URL mode (before 2025-11-25); the
                client's error (legacy) if it refuses.
            ValueError: ``url`` is not a valid URL (client/elicitation.mdx: it "MUST
                contain a valid URL"; here an absolute ``https`` or ``http`` URL with a
                host, ASCII only), or ``elicitation_id`` holds a lone surrogate; before
                anything is sent.
            TypeError: ``url`` is not a string.
        """
        check_elicitation_url(url)
        params: dict[str, Any] = {"mode": "url", "message": _readable(message), "url": url}
        sent_id = None
        if self.era is not Era.MODERN:
            sent_id = params["elicitationId"] = elicitation_id or uuid.uuid4().hex
        if "url" not in elicitation_modes(self.client_capabilities.get("elicitation")):
            raise _missing_capability("elicitation (url)", {"elicitation": {"url": {}}})
        if self.protocol_version not in ELICITATION_MODE_VERSIONS:
            raise _not_in_version(
                "URL-mode elicitation", self.protocol_version, ELICITATION_MODE_VERSIONS
            )
        action, content = await self._ask(
            "elicit", "elicitation/create", params, timeout, _parse_elicit_answer
        )
        return ElicitationResult(action=action, content=content, elicitation_id=sent_id)

    def elicitation_completer(self, elicitation_id: str) -> ElicitationCompleter:
        """What tells the client, later, that the URL-mode elicitation ``elicitation_id``
        is complete (``notifications/elicitation/complete``, which a server MAY send
        when the out-of-band interaction ends: client/elicitation.mdx). Make it while
        the request runs; await it when the interaction ends, typically after this
        request was answered (``accept`` of :meth:`elicit_url` means only that the user
        agreed to go)::

            complete = ctx.elicitation_completer(eid)
            answer = await ctx.elicit_url(url, "Connect your account", elicitation_id=eid)
            pending[eid] = complete  # the OAuth callback later runs: await pending.pop(eid)()

        The id is the ``elicitation_id`` given to :meth:`elicit_url` (give one, to know
        it), or one sent in a -32042 ``URLElicitationRequiredError``'s ``elicitations``.
        The completer sends it on this request's session -- stdio, WebSocket, in memory;
        over Streamable HTTP on the session's GET stream -- and to no other client.

        Only 2025-11-25 has the notification. The modern era (2026-07-28) removed it:
        there the client learns the outcome by retrying the request, which the handler
        answers with another ask until the interaction is done.

        Raises:
            McpError: -32021 if the session's protocol version has no such notification
                (the modern era, or a legacy version before 2025-11-25), or the client
                did not declare ``elicitation.url`` (it started no URL elicitation).
            TypeError: ``elicitation_id`` is not a string.
            ValueError: ``elicitation_id`` is empty or holds a lone surrogate.
            RuntimeError: the request came on no session the Context can reach (the
                request context of a transport of your own, a :class:`~mcp_trio.RequestFacts`
                that knows no session).
        """
        if not isinstance(elicitation_id, str):
            raise TypeError(f"elicitation_id must be a string, not {type(elicitation_id)}")
        if not elicitation_id or _unsendable(elicitation_id, "elicitation_id") is not None:
            raise ValueError(
                f"elicitation_id {elicitation_id!r} cannot be sent (empty, or a lone surrogate)"
            )
        version = self.protocol_version
        revision = REVISIONS.get(version)
        if revision is None or _ELICITATION_COMPLETE not in revision.server_notifications:
            since = [
                v for v, r in REVISIONS.items() if _ELICITATION_COMPLETE in r.server_notifications
            ]
            error = _not_in_version(_ELICITATION_COMPLETE, version, since)
            if self.era is Era.MODERN:
                error = McpError(
                    ErrorData(
                        code=error.code,
                        message=f"{error.message}: in the modern era the client learns that an "
                        "out-of-band interaction is over by retrying its request (answer it "
                        "with another ask until then)",
                        data=error.data,
                    )
                )
            raise error
        if "url" not in elicitation_modes(self.client_capabilities.get("elicitation")):
            raise _missing_capability("elicitation (url)", {"elicitation": {"url": {}}})
        # (Each transport's context gives its session's notifier: RequestContext its
        # Session's, HttpRequestContext one for the HTTP session's GET stream.)
        return ElicitationCompleter(elicitation_id, self._raw._session_notifier())

    async def sample(
        self,
        messages: str | Sequence[Any],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: Sequence[str] | None = None,
        model_preferences: Mapping[str, Any] | None = None,
        include_context: Literal["allServers", "none", "thisServer"] | None = None,
        metadata: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> SamplingResult:
        """Ask the client's model for a message (``sampling/createMessage``).

        Sampling is deprecated as of 2026-07-28; prefer calling a model yourself.

        Args:
            messages: a string (one user message) or a list of messages: strings (user
                text), :class:`~mcp_trio.Message` values or ``SamplingMessage`` objects.
            max_tokens: the most tokens to generate.
            system_prompt, temperature, stop_sequences, model_preferences,
            include_context, metadata, tools, tool_choice: as in the spec's
                ``CreateMessageRequest``.
            timeout: legacy era: seconds to wait for the answer.

        Raises:
            McpError: -32021 if the client cannot sample (or sample with tools; or,
                from 2025-11-25 on, include context -- ``include_context`` other than
                ``"none"`` -- without declaring ``sampling.context``), or a
                message holds content the session's protocol version lacks (audio
                before 2025-03-26, tool use and results before 2025-11-25), or ``tools``
                / ``tool_choice`` are given before 2025-11-25; the
                client's error (legacy) if it refuses; -32602 if its answer is malformed.
            ValueError: a string of the request holds a lone surrogate (which no JSON
                text can carry), or a message's ``_meta`` (or its content's) a key that
                is malformed or of a prefix reserved for MCP (basic/index.mdx#_meta, as
                registration refuses in a definition's ``meta``), before anything is
                sent; the session goes on.
        """
        params: dict[str, Any] = {"messages": sampling_messages(messages), "maxTokens": max_tokens}
        _check_sampling_content(params["messages"], self.protocol_version)
        if tools is not None or tool_choice is not None:
            _check_sampling_tools(self.protocol_version)
        for key, value in (
            ("systemPrompt", system_prompt),
            ("temperature", temperature),
            ("stopSequences", None if stop_sequences is None else list(stop_sequences)),
            ("modelPreferences", None if model_preferences is None else dict(model_preferences)),
            ("includeContext", include_context),
            ("metadata", None if metadata is None else dict(metadata)),
            ("tools", None if tools is None else [dict(t) for t in tools]),
            ("toolChoice", None if tool_choice is None else dict(tool_choice)),
        ):
            if value is not None:
                params[key] = value
        needed: dict[str, Any] = {}
        if tools is not None or tool_choice is not None:
            needed["tools"] = {}
        if include_context not in (None, "none") and self.protocol_version not in _FREE_CONTEXT:
            needed["context"] = {}
        caps = self.client_capabilities.get("sampling")
        if not isinstance(caps, Mapping) or not all(k in caps for k in needed):
            raise _missing_capability("sampling", {"sampling": needed})
        return await self._ask(
            "sample", "sampling/createMessage", params, timeout, _parse_sampling_answer
        )

    async def list_roots(self, *, timeout: float | None = None) -> list[mcp_types.Root]:
        """The client's roots (``roots/list``): the directories or files it lets the
        server work in.

        Raises:
            McpError: -32021 if the client did not declare ``roots``; the client's error
                (legacy) if it refuses; -32602 if its answer is malformed.
        """
        if not isinstance(self.client_capabilities.get("roots"), Mapping):
            raise _missing_capability("roots", {"roots": {}})
        return await self._ask("roots", "roots/list", None, timeout, _parse_roots_answer)

    # ------------------------------------------------------------ the server's own

    async def read_resource(self, uri: str) -> mcp_types.ReadResourceResult:
        """Read one of this server's own resources, in process: what ``resources/read``
        of ``uri`` would answer (a fixed URI first, then the templates in registration
        order), as the client's ``read_resource`` returns it. The resource's function
        runs in this handler's task, with this Context (its progress, logs and asks are
        this request's). Its ``scopes=`` are not checked: the caller is the server's
        own code, which decides what it reads for whom.

        Raises:
            McpError: what ``resources/read`` answers: the not-found error of the
                request's era (-32002 legacy, -32602 modern, ``data: {"uri": uri}``) when
                nothing serves ``uri`` or the function raises
                :class:`~mcp_trio.ResourceNotFound`; -32602 when templates match but the
                variables convert for none. A function that raises :class:`McpError`
                raises it here.
            TypeError: ``uri`` is not a string, or the function's value has no JSON
                form.
            RuntimeError: the Context serves no :class:`~mcp_trio.Server`.
            Exception: anything else the function raised (``resources/read`` would
                answer -32603), as raised.
        """
        server = self._server
        if server is None:
            raise RuntimeError("this Context serves no Server: it has no resources")
        return await server._read_resource(self, uri)

    # ------------------------------------------------------------ machinery

    def _recorded_answers(self) -> dict[str, list[Any]]:
        """Modern era: key -> [digest, response] from earlier rounds and this retry."""
        raw = self._raw
        if raw.era is not Era.MODERN:
            return {}
        state = raw.request_state if isinstance(raw.request_state, Mapping) else {}
        previous = state.get("answers")
        answers: dict[str, list[Any]] = {}
        if isinstance(previous, Mapping):
            for key, entry in previous.items():
                if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
                    answers[key] = entry
        asked = state.get("asked")
        responses = raw.input_responses or {}
        if isinstance(asked, Mapping):
            for key, digest in asked.items():
                if key in responses and isinstance(digest, str):
                    answers[key] = [digest, responses[key]]
        return answers

    def _state(self, asked: Mapping[str, str]) -> dict[str, Any]:
        """The ``requestState`` of the next round."""
        return {"answers": self._answers, "asked": dict(asked)}

    async def _ask(
        self,
        kind: str,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        parse: Callable[[Any], T],
    ) -> T:
        """Ask the client ``method``; its answer, through ``parse`` (which raises -32602
        for one that does not fit: the same check on every path, and in a task before
        ``tasks/update`` accepts the answer)."""
        where = _unsendable(params, "params")
        if where is not None:
            # Found here, before anything is sent or recorded, the same in either era
            # and in a task (else: the encoder's TypeError in the legacy era, a
            # -32603 for the whole call in the modern one, a task that no tasks/get
            # can report).
            raise ValueError(
                f"cannot ask the client ({method}): {where} holds a lone surrogate, "
                "which no JSON text can carry (decode it without surrogateescape, or "
                "replace it)"
            )
        key = f"{kind}-{self._asks}"
        self._asks += 1
        if self._raw.era is not Era.MODERN:
            version = self.protocol_version
            if method not in REVISIONS[version].server_requests:
                # elicitation/create before 2025-06-18: the session's revision has no such
                # request, whatever the client declared (the core would refuse to send it).
                since = tuple(v for v in LEGACY_VERSIONS if method in REVISIONS[v].server_requests)
                raise _not_in_version(method, version, since)
            if self._connection().lifecycle is LifecycleState.ANSWERED:
                # Served before notifications/initialized (over HTTP that POST may come
                # second), but the server may not ask the client anything yet: wait for
                # it (bounded by handshake_timeout), then give up with a clear error.
                await self._raw.until_initialized()
            if self._connection().lifecycle is LifecycleState.ANSWERED:
                raise McpError.from_code(
                    ErrorCode.INVALID_REQUEST,
                    f"cannot send {method} before the client's notifications/initialized",
                )
            return parse(await self._send_request(method, params, timeout))
        if self._raw.method not in _MRTR_METHODS:
            raise RuntimeError(
                f"in the modern era only tools, resources and prompts may ask the client "
                f"for input, not {self._raw.method!r}"
            )
        request: dict[str, Any] = {"method": method}
        if params is not None:
            request["params"] = params
        digest = _digest(request)
        answer_key = self._find_answer(key, digest)
        if answer_key is None:
            if self._task is not None and self._task.started:
                # The extension's InputRequest requires params, even an empty one.
                request.setdefault("params", {})
                return await self._task.ask(key, request, parse)
            raise _InputNeeded({key: request}, {key: digest})
        self._used.add(answer_key)
        return parse(self._answers[answer_key][1])

    def _find_answer(self, key: str, digest: str) -> str | None:
        """The recorded answer to the question ``digest``: preferably the one under the
        same key, else any unused one (concurrent asks may come in another order)."""
        recorded = self._answers.get(key)
        if recorded is not None and recorded[0] == digest and key not in self._used:
            return key
        for other, (other_digest, _) in self._answers.items():
            if other_digest == digest and other not in self._used:
                return other
        return None

    def _connection(self) -> Connection:
        """The core connection of a legacy request (each transport's context names it)."""
        return self._raw.connection

    async def _send_request(
        self, method: str, params: dict[str, Any] | None, timeout: float | None
    ) -> dict[str, Any]:
        return await self._raw.send_request(method, params, timeout=timeout)


# ------------------------------------------------------------------ answers
#
# Each ask's answer goes through one of these, whichever way it came (a legacy response,
# an MRTR retry's inputResponses, a task's tasks/update): -32602 for one that does not fit.


def _parse_elicit_answer(
    answer: Any, schema: dict[str, Any] | None = None
) -> tuple[Literal["accept", "decline", "cancel"], dict[str, Any] | None]:
    """An ``ElicitResult``: its action and content (checked against the form's ``schema``
    on ``accept``)."""
    if not isinstance(answer, Mapping):
        raise _invalid_answer("elicitation", "not an object")
    action = answer.get("action")
    content = answer.get("content")
    if action not in ("accept", "decline", "cancel"):
        raise _invalid_answer("elicitation", f"unknown action {action!r}")
    if content is not None and not isinstance(content, Mapping):
        raise _invalid_answer("elicitation", "content must be an object")
    if action == "accept" and schema is not None:
        problems = validate(content or {}, schema, root="content")
        if problems:
            raise _invalid_answer("elicitation", "; ".join(problems))
    return action, None if content is None else dict(content)


def _parse_sampling_answer(answer: Any) -> SamplingResult:
    """A ``CreateMessageResult``."""
    if not isinstance(answer, Mapping):
        raise _invalid_answer("sampling", "not an object")
    content = answer.get("content")
    items: list[Any] = content if isinstance(content, list) else [content]
    blocks = [dict(b) for b in items if isinstance(b, Mapping) and isinstance(b.get("type"), str)]
    if len(blocks) != len(items):
        raise _invalid_answer("sampling", "content must be content blocks")
    model, role = answer.get("model"), answer.get("role")
    if not isinstance(model, str) or not isinstance(role, str):
        raise _invalid_answer("sampling", "model and role must be strings")
    stop = answer.get("stopReason")
    return SamplingResult(
        role=role,
        content=blocks,
        model=model,
        stop_reason=stop if isinstance(stop, str) else None,
        raw=dict(answer),
    )


def _parse_roots_answer(answer: Any) -> list[mcp_types.Root]:
    """A ``ListRootsResult``: its roots."""
    roots = answer.get("roots") if isinstance(answer, Mapping) else None
    if not isinstance(roots, list):
        raise _invalid_answer("roots", "roots must be a list")
    from mcp_sansio.types import Root  # noqa: PLC0415 - see _typed.py

    try:
        return [structure(r, Root) for r in roots]
    except RemoteProtocolError as exc:
        raise _invalid_answer("roots", exc.message) from None

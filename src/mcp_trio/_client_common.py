"""What the Trio client and the blocking client share: pure values and functions.

No I/O, no trio: :mod:`mcp_trio._blocking` imports this module, and the blocking client is
the proof that the core needs no event loop. Everything here turns the user's arguments
into wire data (capabilities, params, versions) or wire data into typed values.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Final, Literal, TypeAlias, TypeVar, final, get_args

import attrs

from mcp_sansio import (
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ConnectionConfig,
    Era,
    ErrorCode,
    HandshakeCompleted,
    InputRequired,
    LocalProtocolError,
    NotificationReceived,
    RemoteProtocolError,
    structure,
    structure_params,
    undeclared_input_request,
    unstructure,
)
from mcp_sansio import types as t
from mcp_sansio._config import check_request_timeout
from mcp_sansio._json import dumps
from mcp_sansio._modern import elicit_result_problem
from mcp_sansio._sampling import sampling_messages_problem
from mcp_sansio._tasks import TASKS_NOTIFICATION, refuse_legacy_tasks
from mcp_sansio._versions import REVISIONS

from ._errors_base import InputRequiredError, McpError
from ._text import LOG_TEXT_LIMIT, clip, for_log, terminal_safe
from ._validation import (
    DRAFT_07_DIALECT,
    AnchorRef,
    dialect_of,
    dialect_supported,
    rebasing_objects,
    resolve_ref,
    validate,
)

__all__ = [
    "LIST_METHODS",
    "LOG_LEVELS",
    "LOG_LEVEL_KEY",
    "MAX_LIST_ITEMS",
    "MAX_LIST_PAGES",
    "MAX_OUTPUT_SCHEMA_DEPTH",
    "MAX_OUTPUT_SCHEMA_NODES",
    "MAX_OUTPUT_SCHEMA_VALUES",
    "MAX_QUESTIONS",
    "MAX_UNREAD",
    "SHOWN_PROBLEMS",
    "CallbackAnswerError",
    "EraChoice",
    "EraName",
    "HandshakeFacts",
    "OutputSchemas",
    "Pager",
    "RootLike",
    "ToolOutput",
    "Validator",
    "answer_roots",
    "build_capabilities",
    "check_log_level",
    "checked_answer",
    "checked_plain",
    "checked_roots",
    "checked_str",
    "checked_strings",
    "client_config",
    "complete_params",
    "connection_versions",
    "elicitation_params",
    "implementation",
    "legacy_honored",
    "listen_params",
    "log_params",
    "name_the_argument",
    "named_params",
    "not_a_program",
    "pager",
    "param_str",
    "queue_unread",
    "read_bound",
    "refuse_too_many_questions",
    "refuse_unanswerable",
    "refuse_undeclared",
    "refused_answer",
    "request_params",
    "roots_result",
    "sampling_params",
    "timed",
    "to_wire",
    "unread_key",
    "wanted",
    "with_log_level",
    "within",
]

EraName = Literal["auto", "legacy", "modern"]
"""An era as the core's ``ConnectionConfig.era`` takes it."""
EraChoice: TypeAlias = EraName | Era
"""An ``era=`` argument: a name, or an :class:`~mcp_sansio.Era` (``client.era`` passed
back: ``Era`` is a ``str`` enum, equal to its name)."""
_ERA_NAMES: Final[Mapping[str, EraName]] = {"auto": "auto", "legacy": "legacy", "modern": "modern"}

LOG_LEVELS: Final[tuple[str, ...]] = get_args(t.LoggingLevel)
"""The log levels of the protocol (RFC 5424 names)."""
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
"""Modern era: the ``_meta`` key of a request's log level (``server/utilities/logging``)."""
MAX_LIST_PAGES: Final = 1_000
"""Auto-pagination gives up after this many pages (a server whose cursors never end)."""
MAX_LIST_ITEMS: Final = 100_000
"""Auto-pagination gives up past this many items, all pages together: the page bound
alone lets a server that never stops paging grow the list to pages x items per page."""
MAX_LIST_BYTES: Final = 64 * 1024 * 1024
"""Auto-pagination gives up past this many bytes of pages (their JSON), all pages
together: each page may be as large as a message (4 MiB by default), so the page bound
alone lets a server grow one listing to gigabytes (pages of one tool with a 4 MB
description). The first page is not counted (it is within the message bound, and a
listing of one page, the usual one, is not written out again to be measured).

It bounds the JSON, not the memory: the listing's objects take more than their text,
up to about 24 times as much for JSON of tiny objects (pages of ``{}``s in a schema:
about 1.6 GB at this bound)."""
MAX_OUTPUT_SCHEMA_NODES: Final = 2_000
"""A tool's ``outputSchema`` with more subschemas than this, its ``$ref``s expanded, is
not used to validate results: a small schema can expand to one too costly to validate
against (``basic/index.mdx``, "Composition-Keyword Resource Use")."""
MAX_OUTPUT_SCHEMA_DEPTH: Final = 64
"""Likewise, a tool's ``outputSchema`` nested deeper than this is not used."""
SHOWN_PROBLEMS: Final = 3
"""How many problems an error about ``structuredContent`` shows (then it counts the rest)."""

MAX_OUTPUT_SCHEMA_VALUES: Final = 1_000
"""Likewise, a tool's ``outputSchema`` whose ``enum`` and ``const`` values, all together
(``$ref`` expanded, the items of an array or object value counted too), outnumber this
is not used: each value of a result is compared with every one of them, so a large
``enum`` under ``items`` costs items x values."""

logger = logging.getLogger("mcp_trio")


@final
@attrs.frozen(kw_only=True)
class ToolOutput:
    """The outcome of ``tools/call``: what the tool produced, for people and for code.

    A tool that failed is *not* an exception: ``is_error`` is ``True`` and ``content``
    says what went wrong, so a model can read it (``server/tools.mdx``, "Error
    Handling"). Protocol errors (unknown tool, bad arguments) raise
    :class:`~mcp_trio.McpError` instead.
    """

    content: list[t.ContentBlock]
    """The unstructured result: text, images, audio, resource links, embedded resources."""
    structured_content: Any
    """The structured result (a JSON value), when the tool has one; otherwise ``None``."""
    is_error: bool
    """Whether the tool reported a failure."""
    meta: dict[str, Any] | None
    """The result's ``_meta``, if any."""
    result: t.CallToolResult
    """The whole typed result."""

    @property
    def text(self) -> str:
        """The text blocks of ``content``, joined with newlines (``""`` if none)."""
        return "\n".join(block.text for block in self.content if isinstance(block, t.TextContent))

    @classmethod
    def from_wire(cls, result: Mapping[str, Any]) -> ToolOutput:
        """Structure a ``tools/call`` result.

        Raises:
            RemoteProtocolError: the server's result does not fit ``CallToolResult``.
        """
        typed = _text_result(result)
        if typed is None:
            typed = structure(result, t.CallToolResult)
        return cls(
            content=typed.content,
            structured_content=typed.structured_content,
            is_error=bool(typed.is_error),
            meta=typed.meta,
            result=typed,
        )


def _text_result(result: Mapping[str, Any]) -> t.CallToolResult | None:
    """The commonest ``CallToolResult`` typed at once, as ``structure`` types it: a
    ``content`` of text blocks with nothing but their ``type`` and ``text``, and maybe an
    ``isError`` (a boolean), a ``resultType`` of ``"complete"`` (modern era), a ``_meta``
    (an object) and a ``structuredContent`` (any value, kept as it is), nothing else.
    ``None`` for any other result (a member ``null`` or of another type, another
    ``resultType``, another member): ``structure`` it (which also says what is wrong)."""
    if type(result) is not dict:
        return None
    content = result.get("content")
    if type(content) is not list:
        return None
    # The members besides ``content``, each looked for only while some are left (a
    # legacy result has none or ``isError``; a modern one ``resultType`` and ``_meta``).
    others = len(result) - 1
    is_error: bool | None = None
    result_type: str | None = None
    meta: dict[str, Any] | None = None
    structured: Any = None
    if others:
        is_error = result.get("isError")
        if is_error is not None:
            if type(is_error) is not bool:
                return None
            others -= 1
    if others:
        result_type = result.get("resultType")
        if result_type is not None:
            if type(result_type) is not str or result_type != "complete":
                return None  # (input_required, task, unknown ones: the general way)
            others -= 1
    if others:
        meta = result.get("_meta")
        if meta is not None:
            if type(meta) is not dict:
                return None
            for key in meta:
                if type(key) is not str:
                    return None
            meta = dict(meta)  # (a copy, as ``structure`` makes; its values kept as they are)
            others -= 1
    if others and "structuredContent" in result:
        structured = result["structuredContent"]
        others -= 1
    if others:
        return None  # (another member, or one of those above ``null``)
    blocks: list[t.ContentBlock] = []
    for block in content:
        if type(block) is not dict or len(block) != 2:  # (type and text)
            return None
        kind, text = block.get("type"), block.get("text")
        if kind != "text" or type(kind) is not str or type(text) is not str:
            return None
        blocks.append(t.TextContent(text=text))
    return t.CallToolResult(
        content=blocks,
        is_error=is_error,
        result_type=result_type,
        structured_content=structured,
        meta=meta,
    )


# ---------------------------------------------------------------------- arguments


def connection_versions(
    era: EraChoice, protocol_version: str | None
) -> tuple[EraName, tuple[str, ...] | None]:
    """The core's ``era`` and ``supported_versions`` for a client's choice.

    Args:
        era: ``auto`` (probe, then fall back), ``legacy`` or ``modern``; or an
            :class:`~mcp_sansio.Era` (its name is taken).
        protocol_version: pin one revision; its era follows (``era`` must agree or be
            ``auto``).

    Returns:
        ``(era, supported_versions)``; ``None`` means the core's default list.

    Raises:
        ValueError: an unknown version, or one of the other era.
    """
    name = _ERA_NAMES.get(era) if isinstance(era, str) else None
    if name is None:
        raise ValueError(f"era must be 'auto', 'legacy' or 'modern' (or an Era), not {era!r}")
    if protocol_version is None:
        return name, None
    if protocol_version in MODERN_VERSIONS:
        pinned: EraName = "modern"
    elif protocol_version in LEGACY_VERSIONS:
        pinned = "legacy"
    else:
        known = ", ".join(MODERN_VERSIONS + LEGACY_VERSIONS)
        raise ValueError(f"unknown protocol version {protocol_version!r} (known: {known})")
    if name not in ("auto", pinned):
        raise ValueError(f"protocol version {protocol_version} is {pinned}-era, not {name}")
    return pinned, (protocol_version,)


def implementation(info: t.Implementation | Mapping[str, Any] | None) -> dict[str, Any]:
    """Our ``clientInfo``: ``info`` as a dict, or mcp-trio's name and version.

    Raises:
        TypeError: ``info`` is neither a ``types.Implementation`` nor a mapping.
        ValueError: ``info`` lacks a string ``name`` or ``version`` (the schema's
            ``Implementation`` requires both).
    """
    if info is not None:
        data = to_wire(info, "client_info")
        for field in ("name", "version"):
            if not isinstance(data.get(field), str):
                raise ValueError(
                    f"client_info needs a {field!r} (a string): an Implementation "
                    f"requires name and version, and {data!r} has no {field!r}"
                )
        return data
    try:
        version = importlib.metadata.version("mcp-trio")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        version = "0"
    return {"name": "mcp-trio", "version": version}


def build_capabilities(
    *,
    sampling: bool,
    elicitation: bool,
    roots: bool,
    extra: Mapping[str, Any] | None = None,
    era: EraName = "auto",
) -> dict[str, Any]:
    """The client capabilities for the callbacks that were given.

    ``elicitation`` declares form mode only (a URL-mode client says so through
    ``extra``: ``{"elicitation": {"form": {}, "url": {}}}``); ``roots`` declares
    ``listChanged``, except in the ``modern`` era, whose ``roots`` capability has no
    such flag (2026-07-28 ``client/roots.mdx``: ``"roots": {}``; ``auto`` may fall back
    to a legacy server, which reads it). ``extra`` is merged over the result, key by key
    (:class:`~mcp_sansio.ConnectionConfig` checks its extension ids).
    """
    caps: dict[str, Any] = {}
    if sampling:
        caps["sampling"] = {}
    if elicitation:
        caps["elicitation"] = {"form": {}}
    if roots:
        caps["roots"] = {} if era == "modern" else {"listChanged": True}
    if extra:
        caps.update(extra)
    return caps


def read_bound(core_size: int, transport: tuple[int, str] | None) -> tuple[int, str]:
    """The largest answer a client can take, and the setting that bounds it (for an
    error message): the core's ``max_message_size``, or the transport's own bound
    (``message_bound()``: Streamable HTTP's ``HttpClientConfig``, WebSocket's frame size)
    when that is smaller."""
    if transport is not None and transport[0] < core_size:
        return transport
    return core_size, "ConnectionConfig.max_message_size"


def timed(timeout: float | None, config: ConnectionConfig) -> bool:
    """Whether a request runs under a timeout (its own, else the connection's). A long
    one then asks for progress even without a callback: progress keeps it alive (the
    timeout counts time without an answer *or progress*)."""
    return (timeout if timeout is not None else config.request_timeout) is not None


def client_config(
    base: ConnectionConfig | None,
    *,
    era: EraChoice,
    protocol_version: str | None,
    log_level: str | None,
    client_info: t.Implementation | Mapping[str, Any] | None,
    sampling: bool,
    elicitation: bool,
    roots: bool,
    capabilities: Mapping[str, Any] | None,
    timeout: float | None,
) -> ConnectionConfig:
    """Check a client's arguments and build the core's configuration from them.

    ``base`` (default: ``ConnectionConfig()``) gets the era, versions, implementation,
    capabilities (see :func:`build_capabilities`) and, if given, the request timeout.

    Raises:
        ValueError: see :func:`connection_versions`; a ``timeout`` of 0 or less, or NaN
            (``None`` is no timeout); a ``client_info`` without a name
            or version; an extension id that breaks the naming rule; a top-level
            ``tasks`` capability (the 2025-11-25 tasks, which this client does not
            handle: its tasks are the modern extension).
        LocalProtocolError: an unknown ``log_level``.
        TypeError: ``client_info`` is neither a ``types.Implementation`` nor a mapping;
            ``timeout`` is no number.
    """
    chosen, versions = connection_versions(era, protocol_version)
    if log_level is not None:
        check_log_level(log_level)
    changes: dict[str, Any] = {
        "era": chosen,
        "implementation": implementation(client_info),
        "capabilities": build_capabilities(
            sampling=sampling,
            elicitation=elicitation,
            roots=roots,
            extra=capabilities,
            era=chosen,
        ),
    }
    # (Tasks are the modern extension here: a legacy tasks capability is no promise
    # this client keeps.)
    refuse_legacy_tasks(changes["capabilities"])
    if versions is not None:
        changes["supported_versions"] = versions
    if timeout is not None:
        check_request_timeout("timeout", timeout)  # (named as the caller named it)
        changes["request_timeout"] = timeout
    return attrs.evolve(base if base is not None else ConnectionConfig(), **changes)


def check_log_level(level: str) -> str:
    """``level`` if it is a protocol log level.

    Raises:
        LocalProtocolError: it is not.
    """
    if level not in LOG_LEVELS:
        raise LocalProtocolError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
    return level


def with_log_level(params: Mapping[str, Any] | None, level: str) -> dict[str, Any]:
    """Modern era: ``params`` with ``_meta["io.modelcontextprotocol/logLevel"]`` set.

    The core keeps ``_meta`` keys it does not set itself, so the level reaches the
    envelope.
    """
    out = dict(params or {})
    meta = out.get("_meta")
    out["_meta"] = {**(meta if isinstance(meta, Mapping) else {}), LOG_LEVEL_KEY: level}
    return out


def request_params(
    params: Mapping[str, Any] | None, era: Era, log_level: str | None
) -> dict[str, Any] | None:
    """A request's params as sent: a copy, with the log level in a modern envelope."""
    if era is Era.MODERN and log_level is not None:
        return with_log_level(params, log_level)
    return None if params is None else dict(params)


def to_wire(value: Any, what: str, *, must_be: str | None = None) -> dict[str, Any]:
    """A callback's answer (or an argument) as a JSON object: a ``mcp_sansio.types``
    value or a mapping.

    Args:
        value: the answer or argument.
        what: its name, for the error.
        must_be: for an argument, what it must be (the error says so, rather than what
            a callback must return).

    Raises:
        TypeError: anything else (a bug in the callback, or the caller's).
    """
    if attrs.has(type(value)):
        data = unstructure(value)
        if isinstance(data, dict):
            return data
    elif isinstance(value, Mapping):
        return dict(value)
    if must_be is not None:
        raise TypeError(f"{what} must be {must_be}, not {value!r}")
    raise TypeError(f"{what} must return a mcp_sansio.types value or a dict, not {value!r}")


RootLike = t.Root | str | Mapping[str, Any]
"""A root: a ``types.Root``, a ``file://`` URI, or a ``{"uri": ..., "name": ...}`` dict."""


_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def checked_roots(
    roots: Iterable[RootLike] | _Callable | None,
) -> list[RootLike] | _Callable | None:
    """Roots as a client is given them: a list of them is taken once (a generator too)
    and checked now, not when the server asks; ``None`` and a callable pass as they are.

    Raises:
        TypeError, ValueError: as :func:`roots_result`.
    """
    if roots is None or callable(roots):
        return roots
    taken = list(roots)
    roots_result(taken)
    return taken


def answer_roots(roots: Iterable[RootLike]) -> dict[str, Any]:
    """The ``roots/list`` result for what the ``roots`` callback (or list) gave.

    Raises:
        CallbackAnswerError: it is no list of roots (:func:`roots_result`'s
            ``TypeError`` or ``ValueError``): the application's fault.
    """
    try:
        return roots_result(roots)
    except (TypeError, ValueError) as exc:
        raise CallbackAnswerError(f"the roots callback returned {exc}") from None


def refused_answer(method: str, request_id: object, exc: CallbackAnswerError) -> McpError:
    """The -32603 error that answers request ``request_id`` (``method``) whose callback
    answer was refused (``exc``), logged first: the application's bug, said where its
    author looks, and to the server, which would otherwise get an answer it cannot
    read."""
    logger.error("the answer to %s (request %r) is refused: %s", method, request_id, exc)
    return McpError.from_code(ErrorCode.INTERNAL_ERROR, str(exc))


MAX_QUESTIONS: Final = 1_024
"""Questions one round of a task's ``inputRequests`` may hold (a task in
``input_required``): a round with more is refused before any callback runs, as the core
refuses an MRTR round of more than ``ConnectionConfig.max_input_requests`` (by default
as many). A client
remembers as many answered keys per task (the extension: clients "SHOULD track
inputRequests keys to avoid responding to requests more than once"), so no key of a
round it answers is forgotten, and asked again, while the server catches up."""


def refuse_too_many_questions(
    requests: Mapping[str, Any], what: str, bound: int = MAX_QUESTIONS
) -> None:
    """Refuse a round of ``requests`` (``inputRequests``) holding more than ``bound``
    questions, before any callback runs; ``what`` asked (for the message).

    Raises:
        RemoteProtocolError: so refused.
    """
    if len(requests) > bound:
        raise RemoteProtocolError(
            f"{what}: the server asked {len(requests)} questions in one round; a client"
            f" answers at most {bound} at once: giving up"
        )


def refuse_unanswerable(event: InputRequired, can_answer: Callable[[str], bool]) -> None:
    """Refuse ``event``'s ``inputRequests`` before any callback runs when an entry is
    malformed or asks for what no callback answers (``can_answer``).

    Raises:
        InputRequiredError: so refused (the request is given up).
    """
    for entry in event.input_requests.values():
        if not isinstance(entry, Mapping) or not can_answer(str(entry.get("method"))):
            raise InputRequiredError(event)


def refuse_undeclared(event: InputRequired, capabilities: Mapping[str, Any]) -> None:
    """Refuse a task's ``inputRequests`` (``event``) before any callback runs when one asks
    for more than the client's declared ``capabilities`` (the core's rule,
    :func:`mcp_sansio.undeclared_input_request`; logged).

    A task's questions (the tasks extension) come in a ``tasks/get`` result, which the core
    does not read: they are held to the rule here. An MRTR round reaches a client only
    once the core has applied it (and its bound on questions,
    ``ConnectionConfig.max_input_requests``), failing the call with its local error
    (:class:`RemoteProtocolError`), so it is not applied twice.

    Raises:
        InputRequiredError: so refused (the request is given up).
    """
    why = undeclared_input_request(event.input_requests, capabilities)
    if why is not None:
        logger.warning("%s: the server's input request is refused: %s", event.method, for_log(why))
        raise InputRequiredError(event, why)


def roots_result(roots: Iterable[RootLike]) -> dict[str, Any]:
    """The ``roots/list`` result for ``roots``.

    Raises:
        TypeError: an item is none of the accepted kinds.
        ValueError: a root's URI is not a ``file://`` URI (``client/roots.mdx``: it
            MUST be one), or the root is no valid ``Root`` (a ``name`` that is not a
            string, say).
    """
    out: list[dict[str, Any]] = []
    for root in roots:
        wire = {"uri": root} if isinstance(root, str) else to_wire(root, "roots")
        uri = wire.get("uri")
        if not isinstance(uri, str) or not uri.startswith("file://"):
            raise ValueError(f"a root is a file:// URI, not {uri!r}")
        if len(wire) > 1:  # (a name, _meta: a bare URI needs no check)
            try:
                structure(wire, t.Root)
            except RemoteProtocolError as exc:
                raise ValueError(f"roots: {exc.message}") from None
        out.append(wire)
    return {"roots": out}


def not_a_program(argv: Sequence[str], exc: OSError, *, spawn: str) -> str:
    """Why a command that names a ``.py`` file could not be spawned (``exc``), and how to
    run a server file: by the interpreter, through ``spawn`` (the call that takes the
    command: ``open_client``, ``BlockingClient.stdio``), or in memory. ``mcp-trio list
    notes.py`` loads a server file; a client's command is a program it runs."""
    rest = "".join(f", {arg!r}" for arg in argv[1:])
    searched = isinstance(exc, FileNotFoundError) and os.sep not in argv[0] and "/" not in argv[0]
    why = "no such program on PATH" if searched else exc.strerror or str(exc)
    return (
        f"cannot run {argv[0]!r} as a program ({why}): a server file is"
        f" run by Python, so spawn it as {spawn}([sys.executable, {argv[0]!r}{rest}])"
        f" (it must serve stdio when run as a script), or import it and connect in memory"
        f" with open_client(server)"
    )


_STR_TYPE: Final = frozenset({str})
_NO_FLOAT: Final = frozenset({str, int, bool, type(None)})
"""Types of argument values that hold no float, nor anything JSON cannot carry (but an
``int`` beyond 64 bits, which the JSON library refuses when it is sent: see
:func:`name_the_argument`)."""
_NON_FINITE: Final = "NaN or an infinity"
_MAX_NESTING: Final = 251
"""Lists and objects an argument's value may nest: orjson writes 254 levels, and a
``tools/call`` holds the value three objects deep (message, params, arguments)."""
_INT_MIN: Final = -(2**63)
_INT_END: Final = 2**64
"""The integers the JSON library writes are from ``_INT_MIN`` to below this."""


def checked_str(value: object, what: str) -> str:
    """``value`` if it is a ``str``: a name or URI an argument gives.

    Raises:
        TypeError: it is not (nothing is sent).
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__} {value!r:.60}")
    return value


def named_params(
    name: str, arguments: Mapping[str, Any] | None, *, strings: bool = False
) -> dict[str, Any]:
    """The params of ``tools/call`` and (``strings``) ``prompts/get``, whose arguments
    are ``{[key: string]: string}`` in every revision.

    The common case (``str`` names; values that are strings, or for a tool ones with no
    ``float`` at the top) is told by the set of the types present, with no loop in
    Python; only otherwise is each argument looked at, to name the one at fault.

    Raises:
        TypeError: ``name`` is not a string; ``arguments`` is not a mapping (a JSON
            object), or has a name that is not a string; a value holds what JSON cannot
            carry (a ``set``, ``bytes``, a key that is not a string; the message names
            the argument); with ``strings``, a value that is not a string (the message
            names the argument and its type).
        ValueError: an argument holds NaN or an infinity, which JSON cannot carry (the
            JSON library would send ``null`` in its place, silently). Inside an object
            the library writes itself (a dataclass, whose fields are not walked) it is
            not seen, and goes out as ``null``.
    """
    checked_str(name, "the prompt name" if strings else "the tool name")
    params: dict[str, Any] = {"name": name}
    if arguments is None:
        return params
    if type(arguments) is not dict and not isinstance(arguments, Mapping):
        raise TypeError(
            "arguments must be a mapping of names to values (a dict),"
            f" not {type(arguments).__name__} {arguments!r:.60}"
        )
    checked = dict(arguments)
    if not _STR_TYPE.issuperset(map(type, checked)):
        for key in checked:
            if not isinstance(key, str):
                raise TypeError(f"argument names must be strings, not {key!r:.60}")
        # A str subclass is a name all the same; the JSON library takes str keys only.
        checked = {str.__str__(key): value for key, value in checked.items()}
    if strings:
        if not _STR_TYPE.issuperset(map(type, checked.values())):
            for key, value in checked.items():
                if not isinstance(value, str):
                    raise TypeError(
                        f"prompt arguments must be strings (prompts/get), but {key!r}"
                        f" is {type(value).__name__} {value!r:.60}"
                    )
    elif not _NO_FLOAT.issuperset(map(type, checked.values())):
        _check_values(checked)
    params["arguments"] = checked
    return params


def name_the_argument(params: Mapping[str, Any]) -> None:
    """Raise the error that names the argument at fault, when the JSON library refused
    the ``params`` of :func:`named_params` (a ``TypeError``) as they were sent; return
    if no argument is at fault (the ``TypeError`` came from elsewhere: re-raise it).

    The common case of :func:`named_params` lets a top-level ``int`` through unlooked
    at (checking each would slow every call); one beyond 64 bits is refused only by the
    JSON library, whose message names no argument. The caller catches that, and this
    names it, as for an integer further down. Nothing was sent: the core serializes a
    request before it changes any state.

    Raises:
        TypeError, ValueError: as :func:`named_params`.
    """
    arguments = params.get("arguments")
    if isinstance(arguments, dict):
        _check_values(arguments)


def _check_values(arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        fault = _json_fault(value)
        if fault is _NON_FINITE:
            raise ValueError(f"argument {key!r} holds {fault}, which JSON cannot carry")
        if fault is not None:
            raise TypeError(f"argument {key!r} holds {fault}, which JSON cannot carry")


def _json_fault(value: Any) -> str | None:
    """What in ``value`` JSON cannot carry, for an error message (:data:`_NON_FINITE`
    for a NaN or an infinity), or ``None``; as the JSON library (orjson) judges:
    subclasses of ``str``, ``int``, ``dict`` and ``list`` are written as their base,
    a key must be a ``str`` itself, and what is of none of JSON's types is asked of the
    library (it writes dataclasses, dates, UUIDs). Iterative, and bounded by the
    library's nesting limit: a value may be deeply nested, or contain itself."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if isinstance(item, float) and not math.isfinite(item):
            return _NON_FINITE
        if kind is float or isinstance(item, str):
            continue
        if isinstance(item, int):
            if not _INT_MIN <= item < _INT_END:  # (not "in range": slow for a subclass)
                return f"the integer {item:.3g}, beyond 64 bits"
        elif isinstance(item, dict | list) or kind is tuple:
            if depth >= _MAX_NESTING:
                return f"values nested more than {_MAX_NESTING} deep (or a value inside itself)"
            if isinstance(item, dict):
                for key in item:
                    if type(key) is not str:
                        return f"a key that is not a str ({type(key).__name__} {key!r:.60})"
                item = item.values()
            stack.extend((inner, depth + 1) for inner in item)
        else:
            try:
                dumps(item)
            except TypeError as exc:
                why = "" if str(exc).startswith("Type is not JSON serializable") else f" ({exc})"
                return f"a value of type {kind.__name__}{why}"
    return None


_REF_MUST_BE: Final = (
    "a types.PromptReference, a types.ResourceTemplateReference or a dict such as"
    ' {"type": "ref/prompt", "name": "summarize"}'
)


def complete_params(
    ref: t.PromptReference | t.ResourceTemplateReference | Mapping[str, Any],
    argument_name: str,
    value: str,
    context: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The params of ``completion/complete``.

    Raises:
        TypeError: ``ref`` is not a reference (a typed one or a dict).
    """
    params: dict[str, Any] = {
        "ref": to_wire(ref, "ref", must_be=_REF_MUST_BE),
        "argument": {"name": argument_name, "value": value},
    }
    if context is not None:
        params["context"] = {"arguments": dict(context)}
    return params


def listen_params(
    *,
    tools: bool,
    prompts: bool,
    resource_list: bool,
    resources: Iterable[str],
    tasks: Iterable[str] = (),
) -> dict[str, Any]:
    """The params of a modern ``subscriptions/listen`` (only what was asked for)."""
    wanted: dict[str, Any] = {}
    if tools:
        wanted["toolsListChanged"] = True
    if prompts:
        wanted["promptsListChanged"] = True
    if resource_list:
        wanted["resourcesListChanged"] = True
    uris = list(dict.fromkeys(resources))
    if uris:
        wanted["resourceSubscriptions"] = uris
    task_ids = list(dict.fromkeys(tasks))
    if task_ids:
        wanted["taskIds"] = task_ids  # (the tasks extension)
    return {"notifications": wanted}


MAX_UNREAD: Final = 1024
"""Distinct notifications a subscription keeps unread (sub-resources of a subscribed URI
each count); past it the oldest is dropped, with a warning."""


def within(uri: str, subscribed: str) -> bool:
    """Whether ``uri`` is ``subscribed`` or a sub-resource of it: a path below it, or
    a query or fragment of it (a URI with a fragment has no parts; one with a query,
    only fragments)."""
    if uri == subscribed or (subscribed.endswith("/") and uri == subscribed[:-1]):
        return True
    if not uri.startswith(subscribed) or "#" in subscribed:
        return False
    rest = uri[len(subscribed) :]
    if "?" in subscribed:
        return rest[0] == "#"
    return subscribed.endswith("/") or rest[0] in "/?#"


def param_str(params: Mapping[str, Any] | None, key: str) -> str | None:
    """``params[key]`` if it is a string (a notification's ``uri``, ``taskId``)."""
    value = (params or {}).get(key)
    return value if isinstance(value, str) else None


def wanted(
    method: str,
    params: Mapping[str, Any] | None,
    *,
    tools: bool,
    prompts: bool,
    resource_list: bool,
    resources: Sequence[str],
    tasks: Sequence[str] = (),
) -> bool:
    """Whether a change notification matches a subscription's filter (a legacy
    session's are session-wide; a modern server's are tagged, but may carry what was
    not asked)."""
    if method == "notifications/tools/list_changed":
        return tools
    if method == "notifications/prompts/list_changed":
        return prompts
    if method == "notifications/resources/list_changed":
        return resource_list
    if method == TASKS_NOTIFICATION:
        return param_str(params, "taskId") in tasks
    if method != "notifications/resources/updated":
        return False
    uri = param_str(params, "uri")
    # The schema: "might be a sub-resource of the one that the client actually
    # subscribed to" (a path below it, or a part of it).
    return uri is not None and any(within(uri, mine) for mine in resources)


def unread_key(method: str, params: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """What identical unread notifications share (one is kept: a hint to fetch again)."""
    return (method, param_str(params, "uri") or param_str(params, "taskId"))


def queue_unread(
    pending: MutableMapping[tuple[str, str | None], NotificationReceived],
    note: NotificationReceived,
) -> None:
    """Queue ``note`` in a subscription's unread ``pending`` (an insertion-ordered dict):
    it replaces an identical unread one, and past :data:`MAX_UNREAD` the oldest goes,
    with a warning."""
    pending[unread_key(note.method, note.params)] = note
    if len(pending) > MAX_UNREAD:
        oldest = next(iter(pending))
        dropped = pending.pop(oldest)
        logger.warning(
            "subscription: over %d notifications unread, dropped the oldest (%s)",
            MAX_UNREAD,
            dropped.method,
        )


def legacy_honored(
    capabilities: Mapping[str, Any],
    *,
    tools: bool,
    prompts: bool,
    resource_list: bool,
    resources: Sequence[str],
) -> dict[str, Any]:
    """What a legacy server honours of a subscription, by the capabilities it declared
    (``listChanged`` per list, ``resources.subscribe``), in the shape of a modern listen
    acknowledgement's ``honored``."""

    def declared(section: str, flag: str) -> bool:
        entry = capabilities.get(section)
        return isinstance(entry, dict) and entry.get(flag) is True

    honored: dict[str, Any] = {
        key: True
        for key, asked, section in (
            ("toolsListChanged", tools, "tools"),
            ("promptsListChanged", prompts, "prompts"),
            ("resourcesListChanged", resource_list, "resources"),
        )
        if asked and declared(section, "listChanged")
    }
    if resources and declared("resources", "subscribe"):
        honored["resourceSubscriptions"] = list(resources)
    return honored


# ---------------------------------------------------------------------- server requests


def sampling_params(params: Mapping[str, Any] | None) -> t.CreateMessageRequestParams:
    """Typed ``sampling/createMessage`` params (-32602 ``RemoteProtocolError`` if bad,
    including messages that break :func:`sampling_messages_problem`)."""
    typed = structure_params(params, t.CreateMessageRequestParams)
    problem = sampling_messages_problem(params.get("messages") if params else None)
    if problem is not None:
        raise RemoteProtocolError(f"invalid params: {problem}", error_code=ErrorCode.INVALID_PARAMS)
    return typed


def elicitation_params(
    params: Mapping[str, Any] | None,
) -> t.ElicitRequestFormParams | t.ElicitRequestURLParams:
    """Typed ``elicitation/create`` params (-32602 ``RemoteProtocolError`` if bad)."""
    typed: t.ElicitRequestFormParams | t.ElicitRequestURLParams = structure_params(
        params, t.ElicitRequestParams
    )
    return typed


class CallbackAnswerError(ValueError):
    """A callback's answer that its result type does not allow (or, for an
    elicitation, that does not fit the form asked): a bug in the application. A legacy
    server is answered -32603 with this message (and it is logged); a modern request
    fails with it, as when the callback raises."""


def checked_answer(
    method: str,
    value: Any,
    params: t.CreateMessageRequestParams | t.ElicitRequestFormParams | t.ElicitRequestURLParams,
    asked: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A sampling or elicitation callback's answer, checked, as wire data.

    "Clients SHOULD validate all responses against the provided schema"
    (client/elicitation): the answer is structured as its result type
    (``CreateMessageResult``: ``model``, ``role`` and ``content`` are required;
    ``ElicitResult``: ``action`` is ``accept``, ``decline`` or ``cancel``), and an
    accepted form's ``content`` is checked against ``requestedSchema`` by the core's
    rule (:func:`mcp_sansio._modern.elicit_result_problem`, which the core applies to
    what is sent in both eras).

    Args:
        method: ``sampling/createMessage`` or ``elicitation/create``.
        value: what the callback returned.
        params: the request's typed params (the form of an elicitation).
        asked: the request's params as they came, which the core judges the answer
            against as it is sent: judged here too, so that both agree (the typed form
            may have dropped what the spec's restricted schemas do not name, such as
            ``anyOf`` on a string field).

    Raises:
        TypeError: ``value`` is neither a ``mcp_sansio.types`` value nor a mapping.
        CallbackAnswerError: it does not fit (the message says where).
    """
    if method == "sampling/createMessage":
        data = to_wire(value, "on_sampling")
        _fits(data, t.CreateMessageResult, "on_sampling")
        return data
    data = to_wire(value, "on_elicitation")
    form = params if isinstance(params, t.ElicitRequestFormParams) else None
    content = data.get("content")
    shape = data
    if form is not None and isinstance(content, dict):
        # An "integer" field's 3.0 is an integer (JSON Schema: any number with a zero
        # fractional part): sent as 3, which ElicitResult's content values name.
        integers = {
            key
            for key, field in form.requested_schema.properties.items()
            if getattr(field, "type", None) == "integer"
            and type(content.get(key)) is float
            and content[key].is_integer()
        }
        if integers:
            content = {k: int(v) if k in integers else v for k, v in content.items()}
            data = {**data, "content": content}
            shape = data
        # A form's "number" field takes a fraction, which ElicitResult's content
        # values (string, integer, boolean, string list) do not name; it is checked
        # against the form below instead.
        numbers = {
            key
            for key, field in form.requested_schema.properties.items()
            if getattr(field, "type", None) == "number"
        }
        if any(type(content.get(key)) is float for key in numbers):
            shape = {
                **data,
                "content": {
                    k: 0 if k in numbers and type(v) is float else v for k, v in content.items()
                },
            }
    _fits(shape, t.ElicitResult, "on_elicitation")
    if form is not None and data["action"] == "accept":
        # The core's rule, which it holds the answer to as it is sent (retry_with_input,
        # send_result): asked here first to blame the callback, not the connection.
        why = elicit_result_problem(asked, data)
        if why is not None:
            raise CallbackAnswerError(
                "on_elicitation accepted with content that does not fit the requested "
                f"schema: {terminal_safe(why, one_line=True)}"
            )
    return data


def _fits(data: dict[str, Any], cls: type[Any], what: str) -> None:
    try:
        structure(data, cls)
    except RemoteProtocolError as exc:
        raise CallbackAnswerError(
            f"{what} returned an {terminal_safe(exc.message, one_line=True)}"
        ) from None


def log_params(params: Mapping[str, Any] | None) -> t.LoggingMessageNotificationParams:
    """Typed ``notifications/message`` params (-32602 ``RemoteProtocolError`` if bad)."""
    return structure_params(params, t.LoggingMessageNotificationParams)


# ---------------------------------------------------------------------- pagination


class Pager:
    """Auto-pagination over ``nextCursor`` (``server/utilities/pagination.mdx``).

    Feed each page's result to :meth:`add`; :attr:`cursor` is the next page's cursor,
    ``None`` when done.

    Args:
        method: the ``*/list`` method.
        key: the result member that holds the items (``"tools"``, ...).
        cls: the item class to structure each item into.

    Cursors are opaque: the only thing read from one is whether it is there (the spec
    forbids any other "determination based on cursor value", so a stateful server may
    hand out the same string twice, and ``""`` is a cursor like any other). A server
    that never stops is bounded by :data:`MAX_LIST_PAGES`, :data:`MAX_LIST_ITEMS` and
    :data:`MAX_LIST_BYTES` (the bytes of every page but the first: a one-page listing
    is not written out again to be measured, and the count falls short by at most one
    page, itself within the message bound).

    Error handling:
        :meth:`add` raises ``RemoteProtocolError`` when a page is malformed (no items
        array, a ``nextCursor`` that is not a string), or there are more than
        :data:`MAX_LIST_PAGES` pages, :data:`MAX_LIST_ITEMS` items or
        :data:`MAX_LIST_BYTES` bytes of pages.
    """

    def __init__(self, method: str, key: str, cls: type[Any]) -> None:
        self.method = method
        self._key = key
        self._cls = cls
        self.items: list[Any] = []
        self.cursor: str | None = None
        self._pages = 0
        self._bytes = 0

    def params(self) -> dict[str, Any] | None:
        """The params of the next page's request."""
        return None if self.cursor is None else {"cursor": self.cursor}

    def add(self, result: Mapping[str, Any]) -> bool:
        """Take one page; return whether another page follows."""
        items = result.get(self._key)
        if not isinstance(items, list):
            raise RemoteProtocolError(f"invalid {self.method} result: no {self._key!r} array")
        if len(self.items) + len(items) > MAX_LIST_ITEMS:
            raise RemoteProtocolError(f"{self.method}: more than {MAX_LIST_ITEMS} items")
        if self._pages:  # (the first page is within the message bound: see MAX_LIST_BYTES)
            self._bytes += _page_bytes(items)
        if self._bytes > MAX_LIST_BYTES:
            raise RemoteProtocolError(
                f"{self.method}: more than {MAX_LIST_BYTES} bytes of pages (MAX_LIST_BYTES)"
            )
        self.items.extend(structure(item, self._cls) for item in items)
        self._pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            self.cursor = None
            return False
        if not isinstance(cursor, str):
            raise RemoteProtocolError(f"invalid {self.method} result: nextCursor is not a string")
        if self._pages >= MAX_LIST_PAGES:
            raise RemoteProtocolError(f"{self.method}: more than {MAX_LIST_PAGES} pages")
        self.cursor = cursor
        return True


def _page_bytes(value: Any) -> int:
    """About the size of ``value``'s JSON: exact where ``dumps`` can write it, else (it
    writes 254 levels, the parser reads 1024) the length of its strings and numbers."""
    try:
        return len(dumps(value))
    except TypeError:  # (orjson.JSONEncodeError: nested too deep)
        pass
    size, todo = 0, [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            size += sum(len(key) + 4 for key in item)
            todo.extend(item.values())
        elif isinstance(item, list):
            size += 2 + len(item)
            todo.extend(item)
        else:
            size += len(str(item))
    return size


LIST_METHODS: Final[dict[str, tuple[str, type[Any]]]] = {
    "tools/list": ("tools", t.Tool),
    "resources/list": ("resources", t.Resource),
    "resources/templates/list": ("resourceTemplates", t.ResourceTemplate),
    "prompts/list": ("prompts", t.Prompt),
}
"""Each ``*/list`` method: the result member of its items and their class."""


def pager(method: str) -> Pager:
    """A :class:`Pager` for one of :data:`LIST_METHODS`."""
    key, cls = LIST_METHODS[method]
    return Pager(method, key, cls)


class HandshakeFacts:
    """What a client knows once its handshake completed: the properties
    :class:`~mcp_trio.Client` and :class:`~mcp_trio.BlockingClient` share."""

    __slots__ = ()

    @property
    def _completed(self) -> HandshakeCompleted:
        """The completed handshake (each client knows where it keeps it)."""
        raise NotImplementedError

    @property
    def era(self) -> Era:
        """``Era.LEGACY`` (an ``initialize`` session) or ``Era.MODERN`` (stateless)."""
        return self._completed.era

    @property
    def protocol_version(self) -> str:
        """The negotiated (legacy) or chosen (modern) protocol version."""
        return self._completed.protocol_version

    @property
    def server_info(self) -> t.Implementation | None:
        """The server's name and version, if it said (typed on each access)."""
        info = self._completed.peer_info
        return None if info is None else structure(info, t.Implementation)

    @property
    def server_capabilities(self) -> t.ServerCapabilities:
        """What the server offers (typed on each access; the raw dict is the core
        connection's ``peer_capabilities``)."""
        return structure(self._completed.peer_capabilities, t.ServerCapabilities)

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, if any."""
        return self._completed.instructions


# ---------------------------------------------------------------------- tool output


_OBJECT_ONLY_VERSIONS: Final = frozenset(
    v for v, r in REVISIONS.items() if r.structured_content_is_object
)
"""The revisions whose ``CallToolResult.structuredContent`` is an object (later ones
allow any JSON value; earlier ones have no such member)."""
_SAME_VALUE: Final = ("allOf", "anyOf", "oneOf")
"""Keywords whose subschemas all apply to the same value."""
_MAX_PROBLEM_CHARS: Final = 200
"""Each validation problem quoted in an error is cut to this (the server chose the keys)."""
_JSON_TYPES: Final[dict[type, str]] = {dict: "an object", list: "an array", str: "a string"}

Validator: TypeAlias = Callable[[Any, dict[str, Any]], list[str]]
"""Checks a value against a JSON Schema: the problems, each naming where it is from
``structuredContent``, none when valid. Raises on a schema it cannot use. (Given by the
client, so that this module imports nothing but the core: see the module docs.)"""


@final
class OutputSchemas:
    """The ``outputSchema`` of each tool a complete ``tools/list`` returned, to check
    ``tools/call`` results against (``server/tools.mdx``, "Output Schema": servers MUST
    conform, clients SHOULD validate).

    A schema is known only once the caller has listed the tools, and forgotten when the
    server says they changed, or when the session is not the one the tools were listed
    on (a server that forgot the session may have restarted with other tools; see
    :meth:`follow`), so calling a tool whose schema is unknown costs one dictionary
    lookup. The server may change a tool without the client hearing of it (a
    modern client hears only through ``subscriptions/listen``), so the client lists the
    tools again once before it rejects a result (:meth:`check_schema` raising), and
    checks it against the fresh schema. A schema is vetted the
    first time a result is checked against it; one that could be costly to validate
    against (more than :data:`MAX_OUTPUT_SCHEMA_NODES` subschemas, ``$ref`` expanded,
    deeper than :data:`MAX_OUTPUT_SCHEMA_DEPTH`, more ``enum``/``const`` values than
    :data:`MAX_OUTPUT_SCHEMA_VALUES`, a recursive schema whose alternatives could both
    recurse, a dialect other than 2020-12 and draft-07: a warning says so) is not used.
    Nor is one with a ``pattern`` anywhere: Python's ``re`` may backtrack for seconds on
    a short string, and it blocks the event loop (no timeout can interrupt it). One whose
    ``$ref`` leads nowhere, or out of the schema (nothing is fetched), has its results
    refused (``basic/index.mdx``: rejected, not treated as permissive).

    Args:
        validator: checks a value against a schema (default: ``_validation.validate``,
            problems named from ``structuredContent``, at most :data:`SHOWN_PROBLEMS`).
    """

    def __init__(self, validator: Validator | None = None) -> None:
        self._validate = (
            validator
            if validator is not None
            else functools.partial(validate, root="structuredContent", max_problems=SHOWN_PROBLEMS)
        )
        self._schemas: dict[str, dict[str, Any]] = {}
        self._usable: dict[str, bool] = {}
        self._session: object = None

    def remember(self, tools: Iterable[t.Tool], session: object = None) -> None:
        """Replace what is known with the schemas of ``tools`` (a complete list), listed
        on ``session`` (see :meth:`follow`)."""
        self._schemas = {
            tool.name: tool.output_schema for tool in tools if tool.output_schema is not None
        }
        self._usable = {}
        self._session = session

    def follow(self, session: object) -> None:
        """The session in use is ``session`` (any value that changes with it: the
        client passes ``Session.handshake``, which a session started anew replaces).
        Schemas listed on another session are forgotten."""
        if session is not self._session:
            self.forget()
            self._session = session

    def forget(self) -> None:
        """The tools changed: know nothing until they are listed again."""
        self._schemas = {}
        self._usable = {}

    def check(self, name: str, result: Mapping[str, Any], protocol_version: str) -> None:
        """Check the ``tools/call`` result of tool ``name`` (already structured):
        :meth:`check_shape`, then :meth:`check_schema`.

        Tool errors (``isError``) are not checked against the schema.

        Raises:
            RemoteProtocolError: ``structuredContent`` is not an object where the
                revision requires one, or does not match the tool's known
                ``outputSchema`` (or is missing though the tool has one).
        """
        self.check_shape(result, protocol_version)
        self.check_schema(name, result)

    @staticmethod
    def check_shape(result: Mapping[str, Any], protocol_version: str) -> None:
        """Check what the revision itself says of a ``tools/call`` result.

        Raises:
            RemoteProtocolError: ``structuredContent`` is not an object where the
                revision requires one.
        """
        structured = result.get("structuredContent")
        if (
            structured is not None
            and protocol_version in _OBJECT_ONLY_VERSIONS
            and not isinstance(structured, dict)
        ):
            kind = _JSON_TYPES.get(type(structured), "a scalar")
            raise RemoteProtocolError(
                f"invalid tools/call result: structuredContent must be an object in"
                f" protocol version {protocol_version}, not {kind}"
            )

    def check_schema(self, name: str, result: Mapping[str, Any]) -> None:
        """Check a ``tools/call`` result of tool ``name`` against its known schema (not
        a tool error's).

        Raises:
            RemoteProtocolError: ``structuredContent`` does not match the tool's known
                ``outputSchema`` (or is missing though the tool has one), or that schema
                has a ``$ref`` that cannot be resolved.
        """
        structured = result.get("structuredContent")
        schema = self._schemas.get(name)
        if schema is None or result.get("isError") is True:
            return
        usable = self._usable.get(name)
        if usable is None:
            if not dialect_supported(schema):
                # basic/index.mdx: a dialect we cannot validate by is said so.
                logger.warning(
                    "not validating tool %r's results: its outputSchema declares the JSON "
                    "Schema dialect %.100r, which this client does not implement",
                    clip(name, LOG_TEXT_LIMIT),
                    schema["$schema"],
                )
                usable = False
            else:
                try:
                    usable = _bounded_schema(schema)
                except _Rebased:
                    # Valid JSON Schema we cannot follow: said so, as for a dialect.
                    logger.warning(
                        "not validating tool %r's results: its outputSchema has a $id"
                        " below the root with a $ref under it (a new base URI), which"
                        " this client does not implement",
                        clip(name, LOG_TEXT_LIMIT),
                    )
                    usable = False
                except _Unresolved as exc:
                    # basic/index.mdx: a schema with an unresolved $ref SHOULD be
                    # rejected, not treated as permissive (nothing is fetched).
                    raise RemoteProtocolError(
                        f"tools/call {name!r}: the tool's outputSchema has a $ref that"
                        f" cannot be resolved ({exc}), so its results are refused"
                    ) from None
                if not usable:
                    logger.debug("not validating tool %r's results: its schema is too costly", name)
            self._usable[name] = usable
        if not usable:
            return
        if "structuredContent" not in result:
            raise RemoteProtocolError(
                f"tools/call {name!r}: the tool has an outputSchema but the result has no"
                " structuredContent"
            )
        try:
            problems = self._validate(structured, schema)
        except Exception:  # the server's schema, not its result, is at fault: skip it
            logger.debug("not validating the results of tool %r", name, exc_info=True)
            self._usable[name] = False
            return
        if problems:
            # validate lists SHOWN_PROBLEMS, then one entry counting the rest.
            shown = "; ".join(p[:_MAX_PROBLEM_CHARS] for p in problems[:SHOWN_PROBLEMS])
            rest = problems[SHOWN_PROBLEMS:]
            more = f" ({rest[0].removeprefix('... ')})" if rest else ""
            raise RemoteProtocolError(
                f"tools/call {name!r}: structuredContent does not match the tool's"
                f" outputSchema: {shown}{more}"
            )


class _TooCostly(Exception):
    pass


class _Rebased(Exception):
    """A subschema of a server's schema that declares a ``$id`` and holds a ``$ref``
    (see :func:`~mcp_trio._validation.rebasing_objects`), reached from the root."""


class _Unresolved(Exception):
    """A ``$ref`` of a server's schema that leads nowhere, or out of the schema."""


def _bounded_schema(schema: dict[str, Any]) -> bool:
    """Whether validating against ``schema`` (a server's) costs a bounded amount of work
    per value of the result: see :class:`OutputSchemas`.

    Work multiplies where one value is checked against several subschemas (``$ref``
    next to other keywords, ``allOf``/``anyOf``/``oneOf``, ``not``). Without recursion
    the expanded schema bounds it; with recursion, only if no schema has two such
    branches that lead to a ``$ref`` (else each level of the value could double it).
    Each ``enum``/``const`` value costs a comparison per value checked against it: their
    number, expanded, is bounded too. A ``pattern`` (reached or not: ``$defs`` too)
    makes it unusable, its cost being unbounded.

    Raises:
        _Unresolved: a ``$ref`` reached from the root leads nowhere, or out of the schema.
        _Rebased: a subschema reached from the root changes the base URI of a ``$ref``.
    """
    if _has_pattern(schema):
        return False
    nodes = values = 0
    recursive = branching = False
    # Draft-07 core §8.3: the other keywords of an object with a $ref are ignored.
    ref_alone = dialect_of(schema) == DRAFT_07_DIALECT
    rebasing: frozenset[int] | None = None  # (one walk, at the first $id, not one per $id)

    def resolve(ref: str) -> Any:
        try:
            return resolve_ref(schema, ref)
        except AnchorRef:
            raise _TooCostly from None  # valid, but the validator does not resolve anchors
        except ValueError as exc:
            raise _Unresolved(str(exc)) from None

    def walk(node: Any, refs: tuple[str, ...], depth: int) -> bool:
        """Count ``node``'s subschemas; whether it holds a ``$ref`` (refs not followed)."""
        nonlocal nodes, values, recursive, branching, rebasing
        if not isinstance(node, dict):
            return False
        if ref_alone and "$ref" in node:
            node = {"$ref": node["$ref"]}
        if depth and "$id" in node:
            if rebasing is None:
                rebasing = rebasing_objects(schema)
            if id(node) in rebasing:
                raise _Rebased
        nodes += 1
        if nodes > MAX_OUTPUT_SCHEMA_NODES or depth > MAX_OUTPUT_SCHEMA_DEPTH:
            raise _TooCostly
        if "pattern" in node:  # a $ref may reach what _has_pattern does not see as a schema
            raise _TooCostly
        if "enum" in node:
            if not isinstance(node["enum"], list):
                raise _TooCostly  # not a valid schema (a string would be taken char by char)
            for value in node["enum"]:
                values += _json_size(value, MAX_OUTPUT_SCHEMA_VALUES - values + 1)
        if "const" in node:
            values += _json_size(node["const"], MAX_OUTPUT_SCHEMA_VALUES - values + 1)
        if values > MAX_OUTPUT_SCHEMA_VALUES:
            raise _TooCostly
        branches = 0
        ref = node.get("$ref")
        if ref is not None:
            branches += 1
            if not isinstance(ref, str):
                raise _TooCostly
            if ref in refs:
                recursive = True
            else:
                walk(resolve(ref), (*refs, ref), depth + 1)
        same_value = [sub for key in _SAME_VALUE for sub in _as_list(node.get(key))]
        if "not" in node:
            same_value.append(node["not"])
        dependencies = node.get("dependencies")  # (draft-07: schemas for the same value)
        if isinstance(dependencies, dict):
            same_value.extend(sub for sub in dependencies.values() if isinstance(sub, dict))
        branches += sum(walk(sub, refs, depth + 1) for sub in same_value)
        properties = node.get("properties")
        children = [
            *(properties.values() if isinstance(properties, dict) else ()),
            *_as_list(node.get("prefixItems")),
            *_as_list(node.get("items")),  # (draft-07: by position)
            node.get("items"),
            node.get("additionalItems"),
            node.get("additionalProperties"),
            node.get("propertyNames"),
        ]
        holds_ref = [walk(sub, refs, depth + 1) for sub in children]  # walk them all
        branches += any(holds_ref)
        branching = branching or branches > 1
        return branches > 0

    try:
        walk(schema, ("#",), 0)
    except _TooCostly:
        return False
    return not (recursive and branching)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_SUBSCHEMA: Final = ("not", "items", "additionalProperties", "additionalItems", "propertyNames")
_SUBSCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems", "items")  # (draft-07 items)
_SUBSCHEMA_MAPS: Final = ("properties", "$defs", "definitions", "dependencies")


def _has_pattern(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` or any subschema of it (``$defs`` too) has a ``pattern``;
    iterative, as a server's schema may be deeply nested."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if "pattern" in node:
            return True
        stack.extend(node[key] for key in _SUBSCHEMA if key in node)
        for key in _SUBSCHEMA_LISTS:
            stack.extend(_as_list(node.get(key)))
        for key in _SUBSCHEMA_MAPS:
            subs = node.get(key)
            if isinstance(subs, dict):
                stack.extend(subs.values())
    return False


def _json_size(value: Any, limit: int) -> int:
    """How many JSON values ``value`` is made of (itself and, nested, its items), counted
    up to ``limit``."""
    count = 0
    stack = [value]
    while stack and count < limit:
        item = stack.pop()
        count += 1
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return count


_F = TypeVar("_F", bound=Callable[..., object])


def checked_plain(function: _F | None, name: str) -> _F | None:
    """``function``, a plain callable (or ``None``).

    Raises:
        TypeError: it is an ``async`` function (or a callable whose ``__call__`` is):
            calling it only makes a coroutine, which nothing would await.
    """
    if function is None:
        return None
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 (an object with async __call__)
    ):
        raise TypeError(
            f"{name} must be a plain function (it is called, not awaited), "
            f"not the async function {function!r:.80}"
        )
    return function


def checked_strings(values: Iterable[str], what: str) -> list[str]:
    """``values`` (URIs, ids) as a list, each checked to be a ``str`` (both clients'
    ``subscribe``).

    Raises:
        TypeError: ``values`` is itself a string (or bytes), which would be taken
            character by character, or one of them is not a string.
    """
    if isinstance(values, str | bytes | bytearray):
        raise TypeError(f"{what}s must be a list of strings, not the string {values!r:.60}")
    listed = []
    for value in values:
        if not isinstance(value, str):
            raise TypeError(f"{what} must be a string, not {type(value).__name__} {value!r:.60}")
        listed.append(value)
    return listed

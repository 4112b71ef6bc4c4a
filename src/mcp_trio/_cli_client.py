"""``mcp-trio list``, ``call``, ``read`` and ``prompt``: a client for people, on any target.

The target is resolved by :func:`~mcp_trio._cli_target.client_target` (a server file
loaded in memory, a command spoken to over stdio, or a URL) and opened with
:func:`~mcp_trio.open_client`, so everything here works in both eras and over every
transport.

What the server sent goes to stdout as it is when stdout is a pipe or a file (``read
URI > file`` keeps its text, ``--raw | jq`` its JSON), and
:func:`~mcp_trio._cli_util.terminal_safe` on a terminal (:func:`_show`): a hostile
server's escape sequences are shown, not obeyed. ``read --out -`` writes bytes as they
are, so it refuses a terminal. stderr (errors, logs, progress, questions) is always
terminal-safe.
"""

from __future__ import annotations

import binascii
import difflib
import functools
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final, TextIO

import attrs

from mcp_sansio import ErrorCode, unstructure
from mcp_sansio import types as t
from mcp_sansio._json import dumps

from ._cli_auth import AuthOptions, client_auth
from ._cli_form import terminal_elicitation
from ._cli_render import (
    ProgressDisplay,
    pretty_json,
    raw_items,
    render_contents,
    render_listing,
    render_prompt,
    render_tool_output,
)
from ._cli_target import client_target
from ._cli_util import (
    CliError,
    UsageError,
    clip,
    describe,
    error_line,
    one_line,
    terminal_safe,
    terminal_safe_json,
    too_large_limit,
)
from ._client import Client, open_client
from ._client_common import EraChoice
from ._config import SessionConfig
from ._errors import McpError, TransportFailed
from ._jsonschema import has_type
from ._registry import strict_json
from ._server import Server
from ._util import is_url as is_url_target

__all__ = [
    "LIST_KINDS",
    "ClientOptions",
    "Target",
    "arg_value",
    "call_command",
    "list_command",
    "list_kind",
    "parse_arguments",
    "prompt_command",
    "read_command",
]

LIST_KINDS: Final = ("tools", "resources", "templates", "prompts")
"""What ``list`` lists (``resources`` lists the templates too)."""
_KIND_ALIASES: Final = {"resource-templates": "templates", "resource_templates": "templates"}
TRACEBACK_HINT: Final = " (-v shows the server's traceback)"
"""Added to an internal error of a server this process runs or spawns: it logged why."""
HANDSHAKE_TIMEOUT: Final = 30.0
"""Seconds to wait for the handshake (less if ``--timeout`` is less)."""


@attrs.frozen(kw_only=True)
class ClientOptions:
    """The options ``list`` and ``call`` share."""

    era: EraChoice = "auto"
    """``auto``, ``legacy`` or ``modern``."""
    timeout: float | None = 60.0
    """Seconds a request may go without an answer or progress."""
    raw: bool = False
    """Print the JSON results instead of a readable rendering."""
    quiet: bool = False
    """No progress and no server logs on stderr."""
    verbose: bool = False
    """Forward a stdio server's stderr (and, in ``_cli``, show this process's logs)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra HTTP/WebSocket request headers (``--header``), in order."""
    auth: AuthOptions = attrs.field(factory=AuthOptions)
    """How to authorize to an HTTP server (``--bearer``, ``--oauth``, ...)."""


# ---------------------------------------------------------------------- arguments


def parse_arguments(
    pairs: Sequence[str], json_text: str | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``--json`` object and the ``--arg key=value`` pairs (values still text).

    Raises:
        UsageError: ``--json`` is not a JSON object, or a pair has no ``=``.
    """
    base: dict[str, Any] = {}
    if json_text is not None:
        try:
            loaded = strict_json(json_text)
        except (ValueError, RecursionError) as exc:
            raise UsageError(f"--json is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError('--json must be a JSON object, e.g. \'{"query": "trio"}\'')
        base = loaded
    pairs_out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise UsageError(f"--arg needs KEY=VALUE, not {pair!r}")
        pairs_out[key] = value
    return base, pairs_out


def _schema_types(schema: Any) -> set[str] | None:
    """The JSON types ``schema`` allows, or ``None`` when it does not say plainly."""
    if not isinstance(schema, Mapping):
        return None
    for key in ("anyOf", "oneOf"):
        if isinstance(members := schema.get(key), list):
            found: set[str] = set()
            for member in members:
                types = _schema_types(member)
                if types is None:
                    return None
                found |= types
            return found
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return None


def arg_value(text: str, schema: Any) -> Any:
    """An ``--arg`` value: its JSON when it parses and the parameter's schema allows
    that type, else the text itself (``title=123`` stays ``"123"`` for a string)."""
    try:
        value = strict_json(text)
    except (ValueError, RecursionError):
        return text
    allowed = _schema_types(schema)
    if allowed is None or any(has_type(value, kind) for kind in allowed):
        return value
    return text


def list_kind(text: str) -> str | None:
    """The :data:`LIST_KINDS` entry ``text`` names, singular or plural (``tool``,
    ``Templates``, ``resource-templates``), or ``None``."""
    kind = text.strip().lower()
    kind = _KIND_ALIASES.get(kind, kind)
    kind = kind if kind.endswith("s") else f"{kind}s"
    return kind if kind in LIST_KINDS else None


# ---------------------------------------------------------------------- connecting


async def _ask_user(
    display: ProgressDisplay, params: t.ElicitRequestFormParams | t.ElicitRequestURLParams
) -> dict[str, Any]:
    display.close()  # the questions must not land on the progress bar
    return await terminal_elicitation(params)


@attrs.frozen
class Target:
    """A resolved ``list``/``call`` target."""

    text: str
    """As the user typed it."""
    where: str | Server
    """What ``open_client`` connects to: a URL, a command line, or a loaded server."""

    @classmethod
    def resolve(cls, text: str) -> Target:
        """Resolve ``text`` (see :func:`~mcp_trio._cli_target.client_target`)."""
        return cls(text, client_target(text))

    @property
    def label(self) -> str:
        """How to name it in a message."""
        return f"{self.text} (in memory)" if isinstance(self.where, Server) else self.text

    @property
    def is_url(self) -> bool:
        """Whether it is an ``http(s)://`` or ``ws(s)://`` URL."""
        return is_url_target(self.where)

    @property
    def is_command(self) -> bool:
        """Whether it is a server process spoken to over stdio."""
        return isinstance(self.where, str) and not is_url_target(self.where)


def _forward_stderr(chunk: bytes) -> None:
    sys.stderr.buffer.write(chunk)
    sys.stderr.buffer.flush()


@asynccontextmanager
async def connect(
    target: Target, options: ClientOptions, display: ProgressDisplay, *, interactive: bool
) -> AsyncGenerator[Client]:
    """A client for ``target``.

    Raises:
        CliError: the target could not be reached (one line, with the target's name).
    """
    handshake = None if options.timeout is None else min(options.timeout, HANDSHAKE_TIMEOUT)
    forward = options.verbose and target.is_command
    headers = dict(options.headers) or None
    if headers is not None and not target.is_url:
        raise UsageError("--header is for http(s):// and ws(s):// targets")
    auth = None
    if options.auth != AuthOptions():
        if not isinstance(target.where, str) or not target.is_url:
            raise UsageError("--bearer, --oauth and --client-* are for URL targets")
        auth, headers = client_auth(options.auth, target.where, headers or {}, sys.stderr)
        if auth is not None and options.auth.oauth:
            # Before the first request: the user may take longer in the browser than
            # the handshake may wait (OAuth.authorize: a stored token asks nobody).
            # A server without protected-resource metadata has its authorization
            # server at its origin if it may be a 2025-03-26 one, as open_client
            # decides at a first 401 before any version is negotiated: not in the
            # modern era.
            try:
                await auth.authorize(target.where, legacy_fallback=options.era != "modern")
            except Exception as exc:
                problem = describe(exc)
                if problem is None:
                    raise
                raise CliError(f"cannot authorize at {target.label}: {problem.message}") from exc
    opened = open_client(
        target.where,
        era=options.era,
        timeout=options.timeout,
        config=SessionConfig(handshake_timeout=handshake),
        on_log=None if display.quiet else display.on_log,
        on_elicitation=functools.partial(_ask_user, display) if interactive else None,
        stderr=_forward_stderr if forward else None,
        headers=headers,
        auth=auth,
    )
    async with AsyncExitStack() as stack:
        try:
            client = await stack.enter_async_context(opened)
        except Exception as exc:
            if isinstance(exc, ValueError) and target.is_url:
                # What the user typed: a malformed URL or header, or one the transport
                # writes itself.
                raise UsageError(str(exc)) from None
            problem = describe(exc)
            if problem is None:
                raise
            message = problem.message
            # The library names its own setting; the user's knob is --timeout.
            cut = message.find("; SessionConfig.handshake_timeout (")
            if cut >= 0 and handshake is not None:
                message = (
                    f"{message[:cut]}; the handshake may take {handshake:g} s (--timeout, "
                    f"at most {HANDSHAKE_TIMEOUT:g} s)"
                )
            raise CliError(f"cannot connect to {target.label}: {message}") from exc
        try:
            yield client
        except McpError as exc:
            if not (_hint_traceback(target, options) and _internal(exc)):
                raise
            raise CliError(
                f"the server answered with an error: {exc.message}{TRACEBACK_HINT}"
            ) from exc


def _hint_traceback(target: Target, options: ClientOptions) -> bool:
    """Whether ``-v`` would show the server's logs: it runs in this process (its logs
    are this process's) or was spawned (``-v`` forwards its stderr)."""
    return not options.verbose and not target.is_url


def _internal(exc: McpError) -> bool:
    """An internal error the server answered (not one HTTP made up, ``HTTP: ...``, nor
    this process's refusal of an answer too large to read)."""
    return (
        exc.code == ErrorCode.INTERNAL_ERROR
        and not isinstance(exc, TransportFailed)
        and too_large_limit(exc) is None
    )


def _server_line(client: Client) -> str:
    info = client.server_info
    if info is None:
        name = "(unnamed server)"
    else:  # (a listing's fields are clipped too: see _cli_render)
        name = f"{clip(one_line(info.name, None), 200)} {clip(one_line(info.version, None), 100)}"
    return f"Server {name}, protocol {client.protocol_version} ({client.era.value} era)"


def _show(out: TextIO, text: str, *, is_json: bool = False) -> None:
    """Print ``text``, which holds what the server sent, on ``out``: as it is, in UTF-8
    (whatever the stream's own encoding: on Windows a redirected stdout is the ANSI code
    page), or terminal-safe when ``out`` is a terminal (JSON text with JSON escapes, so
    that it stays the same JSON; a character the terminal's encoding lacks as an escape,
    ``\u2192``)."""
    if out.isatty():
        text = terminal_safe_json(text) if is_json else terminal_safe(text)
        encoding = getattr(out, "encoding", None)
        if encoding:
            try:
                text.encode(encoding)
            except UnicodeEncodeError:
                text = text.encode(encoding, "backslashreplace").decode(encoding)
            except LookupError:
                pass
        print(text, file=out)
        return
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # (a text-only stream: it takes any str)
        print(text, file=out)
        return
    out.flush()
    buffer.write(text.encode("utf-8", "backslashreplace") + b"\n")
    buffer.flush()


# ---------------------------------------------------------------------- commands


async def list_command(
    target: Target, kinds: Sequence[str], options: ClientOptions, out: TextIO, err: TextIO
) -> int:
    """``mcp-trio list``: print what the server offers (``kinds``: all when empty)."""
    display = ProgressDisplay(err, quiet=options.quiet)
    async with connect(target, options, display, interactive=False) as client:
        header = _server_line(client)
        caps = client.server_capabilities
        offered = {
            "tools": caps.tools is not None,
            "resources": caps.resources is not None,
            "templates": caps.resources is not None,
            "prompts": caps.prompts is not None,
        }
        for kind in kinds:
            if not offered[kind]:
                raise CliError(f"the server offers no {kind}")
        defaults = [kind for kind in LIST_KINDS if kind != "templates"]  # (with resources)
        wanted = list(kinds) or [kind for kind in defaults if offered[kind]]
        sections: dict[str, list[Any]] = {}
        for kind in wanted:
            if kind == "tools":
                sections["tools"] = await client.list_tools()
            elif kind == "resources":
                sections["resources"] = await client.list_resources()
                sections["templates"] = await client.list_resource_templates()
            elif kind == "templates":
                sections["templates"] = await client.list_resource_templates()
            else:
                sections["prompts"] = await client.list_prompts()
    if options.raw:
        keys = {"templates": "resourceTemplates"}
        raw = {keys.get(kind, kind): raw_items(items) for kind, items in sections.items()}
        _show(out, pretty_json(raw), is_json=True)
        return 0
    blocks = [header]
    blocks += [render_listing(kind, items) for kind, items in sections.items()]
    if not sections:
        blocks.append("(the server offers no tools, resources or prompts)")
    _show(out, "\n\n".join(blocks))
    return 0


async def call_command(
    target: Target,
    tool: str,
    arguments: Mapping[str, Any],
    pairs: Mapping[str, str],
    options: ClientOptions,
    out: TextIO,
    err: TextIO,
) -> int:
    """``mcp-trio call``: call one tool and print its result (exit 1 if it failed)."""
    display = ProgressDisplay(err, quiet=options.quiet)
    interactive = sys.stdin.isatty() and err.isatty()
    try:
        async with connect(target, options, display, interactive=interactive) as client:
            tools = {found.name: found for found in await client.list_tools()}
            if tool not in tools:
                raise CliError(_unknown_tool(tool, sorted(tools)))
            props = tools[tool].input_schema.get("properties")
            if not isinstance(props, Mapping):  # (absent, or a server's malformed schema)
                props = {}
            args = dict(arguments)
            args.update({key: arg_value(value, props.get(key)) for key, value in pairs.items()})
            try:
                dumps(args)
            except TypeError as exc:  # e.g. an integer wider than the wire's 64 bits
                raise UsageError(f"the arguments cannot be sent as JSON: {exc}") from None
            output = await client.call_tool(tool, args, on_progress=display.on_progress)
    finally:
        display.close()
    if options.raw:
        _show(out, pretty_json(unstructure(output.result)), is_json=True)
    elif not output.is_error:
        rendered = render_tool_output(output)
        if rendered:
            _show(out, rendered)
    if output.is_error:
        message = one_line(output.text) or "(no message)"
        if "failed with an internal error" in message and _hint_traceback(target, options):
            message += TRACEBACK_HINT
        error_line(f"tool {tool!r} reported an error: {message}", err)
        return 1
    return 0


async def read_command(
    target: Target, uri: str, out_file: str | None, options: ClientOptions, out: TextIO, err: TextIO
) -> int:
    """``mcp-trio read``: print a resource (text as it is, a blob as its size), or
    write it to ``out_file`` (``-``: stdout, not a terminal) as bytes.

    Raises:
        UsageError: ``--out -`` with stdout a terminal (checked before connecting).
    """
    if out_file == "-" and out.isatty():
        # As curl does: bytes as they are (a blob, or text with escape sequences) can
        # leave a terminal unusable or act on it.
        raise UsageError(
            "--out - writes the resource's bytes as they are, and stdout is a terminal: "
            "use --out FILE or pipe it (without --out, text is printed)"
        )
    display = ProgressDisplay(err, quiet=options.quiet)
    try:
        async with connect(target, options, display, interactive=False) as client:
            result = await client.read_resource(uri, on_progress=display.on_progress)
    finally:
        display.close()
    if out_file is not None:
        if len(result.contents) != 1:
            raise CliError(f"--out writes one content; {uri} has {len(result.contents)}")
        (item,) = result.contents
        if isinstance(item, t.TextResourceContents):
            data = item.text.encode()
        else:
            try:
                data = binascii.a2b_base64(item.blob, strict_mode=True)
            except ValueError as exc:  # (binascii.Error; ValueError for non-ASCII)
                raise CliError(f"the server sent a blob that is not base64 ({exc})") from None
        if out_file == "-":
            out.flush()
            out.buffer.write(data)
            out.buffer.flush()
        else:
            with open(out_file, "wb") as file:
                file.write(data)
        return 0
    if options.raw:
        _show(out, pretty_json(unstructure(result)), is_json=True)
    else:
        _show(out, render_contents(result.contents, heading=len(result.contents) > 1))
    return 0


async def prompt_command(
    target: Target,
    name: str,
    arguments: Mapping[str, str],
    options: ClientOptions,
    out: TextIO,
    err: TextIO,
) -> int:
    """``mcp-trio prompt``: get a prompt, filled in with ``arguments``, and print it."""
    display = ProgressDisplay(err, quiet=options.quiet)
    try:
        async with connect(target, options, display, interactive=False) as client:
            result = await client.get_prompt(name, arguments, on_progress=display.on_progress)
    finally:
        display.close()
    if options.raw:
        _show(out, pretty_json(unstructure(result)), is_json=True)
    else:
        _show(out, render_prompt(result))
    return 0


def _unknown_tool(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listing = ", ".join(known) if known else "none"
    return f"unknown tool {name!r}{hint} (the server has: {listing})"

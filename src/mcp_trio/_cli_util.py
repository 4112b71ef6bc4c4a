"""What every ``mcp-trio`` command shares: its errors, and turning exceptions into one line.

Error handling policy: an *expected* failure (a bad target, a refused connection, an
unknown tool, a JSON-RPC error, a server that exited) is one line on stderr,
``mcp-trio: error: ...``, and exit status 1 (2 for a usage error). Anything else is a
bug in mcp-trio and keeps its traceback.

What a server sends is shown to people, and a server may be hostile (or buggy): text
with escape sequences would act on the terminal (clear it, retitle it, hide text, make
links). :func:`terminal_safe` shows those characters as escapes (``\\x1b``) instead, and
:func:`clip` bounds a field that has no reason to be long.
"""

from __future__ import annotations

import re
import sys
from typing import Final, TextIO

import trio

from mcp_sansio import LocalProtocolError, RemoteProtocolError

from ._errors import (
    HandshakeFailed,
    InputRequiredError,
    McpError,
    ServerExited,
    SessionClosed,
    TransportFailed,
)
from ._util import clip, terminal_safe  # (the CLI's names: one helper each)

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CliError",
    "UsageError",
    "clip",
    "describe",
    "error_line",
    "one_line",
    "terminal_safe",
    "terminal_safe_json",
    "too_large_limit",
]

EXIT_FAILURE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
"""128 + SIGINT, as shells report a command stopped with Ctrl-C."""


class CliError(Exception):
    """An expected failure: printed as one line, exit status :attr:`exit_code`.

    Args:
        message: what went wrong, for people (one line).
    """

    exit_code: int = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(CliError):
    """The command line itself is wrong (exit status 2)."""

    exit_code = EXIT_USAGE


def one_line(text: str, limit: int | None = 300) -> str:
    """``text`` on one line (newlines folded), at most ``limit`` characters (``None``:
    no limit)."""
    flat = " ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What :func:`json.dumps` leaves as it is of what :func:`terminal_safe` escapes (it
escapes C0 itself)."""


def terminal_safe_json(text: str) -> str:
    """JSON text (:func:`json.dumps` output) with the characters :func:`terminal_safe`
    escapes written as JSON escapes (``\\u009b``): the same JSON value."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _expected(exc: BaseException) -> BaseException | None:
    """The expected exception ``exc`` is (or the one a group of them holds), or ``None``."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [_expected(e) for e in exc.exceptions]
        found = [leaf for leaf in leaves if leaf is not None]
        return found[0] if found and len(found) == len(leaves) else None
    expected: tuple[type[BaseException], ...] = (
        CliError,
        McpError,
        SessionClosed,
        InputRequiredError,
        LocalProtocolError,
        RemoteProtocolError,
        trio.TooSlowError,
        OSError,
    )
    oauth = sys.modules.get("mcp_sansio._oauth")  # (loaded if an OAuth error can exist)
    if oauth is not None:
        expected += (oauth.OAuthError,)
    return exc if isinstance(exc, expected) else None


def describe(exc: BaseException) -> CliError | None:
    """The one-line error for an expected exception (see the module docstring), or
    ``None`` for a bug."""
    found = _expected(exc)
    if found is None:
        return None
    if isinstance(found, CliError):
        return found
    if isinstance(found, ServerExited):
        tail = found.stderr_tail.decode("utf-8", "replace").strip().splitlines()
        status = "" if found.returncode is None else f" (exit status {found.returncode})"
        last = f": {tail[-1].strip()}" if tail else ""
        return CliError(f"{found.reason}{status}{last}")
    if isinstance(found, HandshakeFailed):
        return CliError(f"the handshake failed: {found.message}")
    if isinstance(found, McpError):
        if isinstance(found, TransportFailed):
            # Made up by the HTTP client for a request the server did not answer (a broken
            # connection, an error status without a JSON-RPC error in its body).
            return CliError(f"the request failed: {found.message}")
        if (limit := too_large_limit(found)) is not None:
            return CliError(
                f"the server's answer is larger than {limit} bytes, the most mcp-trio reads "
                "in one message"
            )
        return CliError(f"the server answered with an error: {found.message} ({found.code})")
    if (network := _os_error_text(found)) is not None:
        return CliError(network)
    if isinstance(found, SessionClosed):
        return CliError(f"the connection closed: {found.reason}")
    if isinstance(found, trio.TooSlowError):
        # (a RequestTimeout says it itself: "tools/call timed out after 2 s (request 3)")
        text = str(found) or "timed out"
        return CliError(text if "timed out" in text else f"timed out: {text}")
    if isinstance(found, InputRequiredError):
        return CliError(f"the server needs input this command cannot give: {found}")
    return CliError(str(found) or type(found).__name__)


def too_large_limit(exc: McpError) -> int | None:
    """The client's own message-size bound ``exc`` reports (an answer this process
    discarded unread: ``data`` of ``{"maxMessageSize": N}``, see
    ``mcp_sansio._conn_receive``), or ``None`` for an error the server sent."""
    data = exc.error.data
    if isinstance(exc, TransportFailed) or not isinstance(data, dict):
        return None
    limit = data.get("maxMessageSize")
    return limit if type(limit) is int else None


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc``, what caused it, and the members of groups among them (each once)."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen[id(item)] = item
        if isinstance(item, BaseExceptionGroup):
            todo.extend(item.exceptions)
        todo.extend(e for e in (item.__cause__, item.__context__) if e is not None)
    return list(seen.values())


def _os_error_text(exc: BaseException) -> str | None:
    """What the first ``OSError`` behind ``exc`` says, with the system's reason
    (``all attempts to connect to h:1 failed (Connection refused)``)."""
    errors = [e for e in _causes(exc) if isinstance(e, OSError)]
    if not errors:
        return None
    outer = errors[0]
    if outer.strerror and outer.filename is not None:
        return f"{outer.strerror}: {outer.filename}"
    text = outer.strerror or str(outer) or type(outer).__name__
    reason = next((e.strerror for e in errors if e.strerror), None)
    if reason is None or reason in text:
        return text
    # trio says "Error connecting to ('h', 1): Connection refused"; the host is in `text`.
    return f"{text} ({reason.rpartition(': ')[2]})"


def error_line(message: str, stream: TextIO | None = None) -> None:
    """Print ``mcp-trio: error: message`` (one line) on stderr.

    The message often quotes the server: it is shown :func:`terminal_safe`, on a
    terminal or not (stderr is for people; a log file is read on a terminal later)."""
    out = stream if stream is not None else sys.stderr
    print(f"mcp-trio: error: {terminal_safe(one_line(message))}", file=out, flush=True)

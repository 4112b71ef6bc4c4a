"""The exceptions of the Trio binding.

Which one you get tells you who failed:

* :class:`McpError` -- the peer answered our request with a JSON-RPC error. Raise it
  from a request handler to answer with a chosen error.
* :class:`RequestTimeout` -- a request of ours hit its deadline (``trio.TooSlowError``).
* :class:`SessionClosed` -- the session ended (end of input, a failed write, a local
  close); every request still waiting fails with it. :class:`ServerExited` says the
  stdio server process died, with its exit status and the tail of its stderr.
* :class:`HandshakeFailed` -- ``start()`` could not settle the era and version.
* :class:`InputRequiredError` -- a modern server asked for input and no callback was
  given to provide it.

``LocalProtocolError`` still means *you* misused the API (for example a method the
peer's capabilities do not allow), and ``RemoteProtocolError`` that the peer sent what
it should not have (a tool result that does not match its schema, say); both are the
core's (``mcp_sansio``), raised unchanged and importable from here too.
"""

from __future__ import annotations

import copy
from typing import Any

import trio

from mcp_sansio import (
    ErrorData,
    ErrorReceived,
    InputRequired,
    LocalProtocolError,
    RemoteProtocolError,
    RequestId,
    RequestTimedOut,
)

__all__ = [
    "HandshakeFailed",
    "InputRequiredError",
    "LocalProtocolError",
    "McpError",
    "RemoteProtocolError",
    "RequestTimeout",
    "ServerExited",
    "SessionClosed",
]


class McpError(Exception):
    """A JSON-RPC error: received from the peer, or raised by a handler to send one.

    Args:
        error: the error object (code, message, data).
    """

    def __init__(self, error: ErrorData) -> None:
        super().__init__(f"{error.message} (code {error.code})")
        self.error = error

    @classmethod
    def from_code(cls, code: int, message: str, data: Any = None) -> McpError:
        """Build one from its parts, e.g. ``McpError.from_code(-32602, "bad name")``."""
        return cls(ErrorData(code=code, message=message, data=data))

    @property
    def code(self) -> int:
        """The JSON-RPC error code."""
        return self.error.code

    @property
    def message(self) -> str:
        """The error message."""
        return self.error.message

    @property
    def data(self) -> Any:
        """The optional structured detail."""
        return self.error.data


class HandshakeFailed(McpError):
    """The client could not complete ``initialize`` / ``server/discover``."""


class RequestTimeout(trio.TooSlowError):
    """A request of ours reached its deadline (no progress for ``timeout`` seconds, or
    ``max_request_time`` in total). ``notifications/cancelled`` was sent."""

    def __init__(self, method: str, request_id: int | str | None) -> None:
        what = method if request_id is None else f"request {request_id!r} ({method})"
        super().__init__(f"{what} timed out")
        self.method = method
        self.request_id = request_id


class InputRequiredError(Exception):
    """A modern server answered ``input_required`` and no ``on_input_required`` was given."""

    def __init__(self, event: InputRequired) -> None:
        super().__init__(f"{event.method} needs input: {sorted(event.input_requests)}")
        self.event = event


class SessionClosed(Exception):
    """The session is closed; the request can never be answered.

    Args:
        reason: what ended the session, for people.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ServerExited(SessionClosed):
    """The stdio server process closed its output or exited.

    Args:
        reason: what happened, for people.
        returncode: the exit status (negative: killed by that signal), or ``None``
            if the process was still running when its output ended.
        stderr_tail: the last bytes the server wrote to stderr (bounded).
    """

    def __init__(
        self, reason: str, returncode: int | None = None, stderr_tail: bytes = b""
    ) -> None:
        Exception.__init__(self, reason, returncode, stderr_tail)
        self.reason = reason
        self.returncode = returncode
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        """The reason and the last lines of the stderr tail (at most 20 of them, and the
        last 500 characters of each: the whole tail is :attr:`stderr_tail`)."""
        text = f"{self.reason} (exit status {self.returncode})"
        lines = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()
        if not lines:
            return text
        shown = [line if len(line) <= 500 else "… " + line[-500:] for line in lines[-20:]]
        more = len(lines) - len(shown)
        head = f"stderr tail ({more} earlier lines in .stderr_tail)" if more else "stderr tail"
        return f"{text}; {head}:\n" + "\n".join(shown)


def fresh(exc: SessionClosed) -> SessionClosed:
    """A copy of a close reason to raise in one more place (raising the one object
    everywhere would pile up tracebacks), keeping what caused it."""
    copied = copy.copy(exc)
    copied.__cause__ = exc.__cause__
    return copied


def request_error(
    method: str, rid: RequestId, outcome: ErrorReceived | RequestTimedOut | SessionClosed
) -> Exception:
    """The exception a request of ours that got no result raises: :class:`McpError`,
    :class:`RequestTimeout`, or (a copy of) the :class:`SessionClosed` that ended it."""
    if isinstance(outcome, ErrorReceived):
        return McpError(outcome.error)
    if isinstance(outcome, RequestTimedOut):
        return RequestTimeout(method, rid)
    return fresh(outcome)


def refuse_endless_input(event: InputRequired, max_rounds: int) -> None:
    """Raise before anyone is asked when the server asks for input the
    ``max_rounds``-th time (``ConnectionConfig.max_input_rounds``): the core would refuse
    that retry, and the answer would be thrown away.

    Raises:
        RemoteProtocolError: the round bound is reached.
    """
    if event.round >= max_rounds:
        raise RemoteProtocolError(
            f"{event.method}: the server asked for input again after {event.round - 1}"
            f" answered rounds; giving up (ConnectionConfig.max_input_rounds is {max_rounds})"
        )

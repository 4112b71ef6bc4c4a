"""The exceptions of ``mcp_trio`` that need no trio.

:class:`~mcp_trio.BlockingClient` (no trio, no asyncio) raises these, and so does the
Trio binding: :mod:`mcp_trio._errors` re-exports them (the same classes) with
:class:`~mcp_trio.RequestTimeout`, the one that derives from ``trio.TooSlowError``.
See :mod:`mcp_trio._errors` for which one means what. The core's
``LocalProtocolError`` / ``RemoteProtocolError`` are re-exported here too, so that
``mcp_trio`` hands out every exception but ``RequestTimeout`` without loading trio.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from mcp_sansio import (
    ErrorData,
    ErrorReceived,
    InputRequired,
    LocalProtocolError,
    RemoteProtocolError,
)

__all__ = [
    "HandshakeFailed",
    "InputRequiredError",
    "LocalProtocolError",
    "McpError",
    "RemoteProtocolError",
    "ServerExited",
    "SessionClosed",
    "TokenExpired",
    "TransportFailed",
    "fresh",
    "name_the_endpoint",
    "received_error",
    "refuse_endless_input",
]


class McpError(Exception):
    """A JSON-RPC error: received from the peer, or raised by a handler to send one.

    A request of ours raises it for an error the peer sent (or, over Streamable HTTP, for
    an exchange that failed: its subclass :class:`TransportFailed`, its message starting
    ``HTTP:``). An answer that could not be
    used (a ``resultType`` the client does not recognize, a malformed input-required
    result) raises :class:`RemoteProtocolError` instead, with the code the core gave it.

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


class TransportFailed(McpError):
    """A request of ours failed because the transport did, not the server: over
    Streamable HTTP, an exchange that could not carry the request or its answer (no
    connection, a write or a resumption that failed, a stream cut short and not
    re-issued, an error status, a refused authorization). No answer of the server's
    came: it may or may not have run the request.

    The error is the one the transport made (``code`` ``-32603``, ``message``
    ``"HTTP: ..."``; ``data`` ``{"httpStatus": ...}`` when a status came), so an
    ``except McpError`` catches it as before; catch this class to tell it from the
    server's own ``-32603``. Raised by :class:`~mcp_trio.Client`,
    :class:`~mcp_trio.Session` and :class:`~mcp_trio.BlockingClient` over HTTP alike.
    Over stdio and WebSocket a failed transport ends the session
    (:class:`SessionClosed`) instead: there is no failure of one request alone.

    Args:
        error: the error object (code, message, data).
    """


class InputRequiredError(Exception):
    """A modern server answered ``input_required`` and the client does not answer it:
    no ``on_input_required`` or callback for it was given, or (:attr:`reason`) the
    server asked for what the client never declared.

    Args:
        event: the server's ``input_required`` answer.
        reason: why the client refuses it, when it is no missing callback (the
            message says it too).
    """

    def __init__(self, event: InputRequired, reason: str | None = None) -> None:
        message = f"{event.method} needs input: {sorted(event.input_requests)}"
        if reason is not None:
            message += f"; refused: {reason}"
        super().__init__(message)
        self.event = event
        self.reason = reason
        """Why the request is refused (an undeclared capability, say); ``None`` when
        no callback answers it."""


class SessionClosed(Exception):
    """The session is closed; the request can never be answered.

    Args:
        reason: what ended the session, for people.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TokenExpired(SessionClosed):
    """The server ended the session because the access token it was authenticated with
    expired (``Principal.expires_at``): a WebSocket closed with code 1008 and a reason
    that starts with ``invalid_token``. Every request still waiting fails with it.

    The session is over: open a new one, with a fresh token (an ``OAuth`` refreshes
    it, or authorizes again, at the new handshake); a legacy-era session starts again
    from ``initialize``.

    Args:
        reason: what happened, for people.
    """


class ServerExited(SessionClosed):
    """The stdio server process closed its output or exited.

    The session is over: every later call raises it too. The client does not start
    the server again (``2026-07-28/basic/transports/stdio``, "Unexpected Termination":
    the client SHOULD restart it); that is the application's, which knows which calls
    are safe to send twice: catch it around ``open_client(command)`` and open a new
    client (the README, "Use a server from Python", shows the pattern).

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


def name_the_endpoint(failed: HandshakeFailed, url: str) -> None:
    """Say in ``failed``, an HTTP server's refusal of the handshake at ``url``, what its
    status suggests is wrong with the URL (in place: its message and ``args``), when it
    suggests anything; a bare ``HTTP: status 404`` names neither the URL nor the fix.

    - 404: no MCP endpoint at that path (``serve_http`` serves ``/mcp``; a URL without
      it, or with another path, is the common slip);
    - 400 with no words of the server's, nor a ``WWW-Authenticate`` challenge (a
      malformed token: its challenge is named instead): what a WebSocket server
      (``serve_websocket``) answers a plain HTTP request; the ``ws://`` URL is
      suggested.
    """
    error = failed.error
    data = error.data if isinstance(error.data, dict) else {}
    status = data.get("httpStatus")
    if status == 404:
        hint = f"no MCP endpoint at {url!r} (mcp_trio's serve_http serves one at /mcp)"
    elif status == 400 and error.message == "HTTP: status 400" and "wwwAuthenticate" not in data:
        scheme, rest = url.split(":", 1)
        ws = ("wss" if scheme.lower() == "https" else "ws") + ":" + rest
        hint = (
            f"the server at {url!r} refused a plain HTTP request: if it serves"
            f" WebSocket (serve_websocket), connect to {ws!r}"
        )
    else:
        return
    failed.error = attrs.evolve(error, message=f"{error.message}: {hint}")
    failed.args = (f"{failed.error.message} (code {error.code})",)


def fresh(exc: SessionClosed) -> SessionClosed:
    """A copy of a close reason to raise in one more place (raising the one object
    everywhere would pile up tracebacks), keeping what caused it."""
    copied = copy.copy(exc)
    copied.__cause__ = exc.__cause__
    return copied


def received_error(event: ErrorReceived) -> McpError | RemoteProtocolError:
    """What a request of ours that ended with ``event`` raises: :class:`McpError` for the
    peer's error, :class:`RemoteProtocolError` for one the core made about an answer it
    could not use (``event.local``), :class:`TransportFailed` for one the transport made
    (``event.transport``), so that neither can be mistaken for the peer's
    (2026-07-28 basic/index.mdx, Error Codes)."""
    error = event.error
    if event.local:
        return RemoteProtocolError(error.message, error_code=error.code)
    if event.transport:
        return TransportFailed(error)
    return McpError(error)


def refuse_endless_input(event: InputRequired, max_rounds: int, *, what: str | None = None) -> None:
    """Raise before anyone is asked when the server asks for input the
    ``max_rounds``-th time (``ConnectionConfig.max_input_rounds``): the core would refuse
    that retry, and the answer would be thrown away. A task's questions are bounded
    the same way.

    Args:
        event: the round of questions (its ``round`` counts from 1).
        max_rounds: the bound.
        what: what asked, for the message (default: ``event.method``).

    Raises:
        RemoteProtocolError: the round bound is reached.
    """
    if event.round >= max_rounds:
        raise RemoteProtocolError(
            f"{what or event.method}: the server asked for input again after"
            f" {event.round - 1} answered rounds; giving up"
            f" (ConnectionConfig.max_input_rounds is {max_rounds})"
        )

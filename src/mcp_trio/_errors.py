"""The exceptions of the Trio binding.

Which one you get tells you who failed:

* :class:`McpError` -- the peer answered our request with a JSON-RPC error. Raise it
  from a request handler to answer with a chosen error.
* :class:`RequestTimeout` -- a request of ours hit its deadline (``trio.TooSlowError``).
* :class:`SessionClosed` -- the session ended (end of input, a failed write, a local
  close); every request still waiting fails with it. :class:`ServerExited` says the
  stdio server process died, with its exit status and the tail of its stderr (it is
  not restarted: open a new client, see the README);
  :class:`TokenExpired`, that the server ended the session when its token expired.
* :class:`HandshakeFailed` -- ``start()`` could not settle the era and version.
* :class:`TransportFailed` -- an :class:`McpError` the transport made, not the peer:
  over Streamable HTTP, a request whose exchange failed (no connection, a write that
  failed, an answer cut short, an error status); the session goes on.
* :class:`InputRequiredError` -- a modern server asked for input and no callback was
  given to provide it.

``LocalProtocolError`` still means *you* misused the API (for example a method the
peer's capabilities do not allow), and ``RemoteProtocolError`` that the peer sent what
it should not have (a tool result that does not match its schema, a ``resultType`` the
client does not recognize, say); both are the core's (``mcp_sansio``), raised unchanged
and importable from here too.
"""

from __future__ import annotations

import trio

from mcp_sansio import (
    ErrorReceived,
    LocalProtocolError,
    RemoteProtocolError,
    RequestId,
    RequestTimedOut,
)

# (The classes that need no trio live in _errors_base, for BlockingClient; these are
# the same classes.)
from ._errors_base import (
    HandshakeFailed,
    InputRequiredError,
    McpError,
    ServerExited,
    SessionClosed,
    TokenExpired,
    TransportFailed,
    fresh,
    received_error,
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
    "TokenExpired",
    "TransportFailed",
]


class RequestTimeout(trio.TooSlowError):
    """A request of ours reached its deadline (no progress for ``timeout`` seconds, or
    ``max_request_time`` in total). ``notifications/cancelled`` follows it (queued: the
    caller is not kept waiting for its write), unless none of the request was written
    yet: then it is taken back and nothing is sent for it.

    The message leads with the method: ``"tools/call timed out after 2 s (request
    3)"``, then what was waited for, if said (``": the server never acknowledged it"``).

    Args:
        method: the method of the request (``"handshake"`` for a whole handshake).
        request_id: its id, or ``None`` when there is none to name.
        detail: what was waited for, for people.
        timeout: the seconds it was given, when known.
    """

    def __init__(
        self,
        method: str,
        request_id: int | str | None,
        *,
        detail: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.method = method
        self.request_id = request_id
        self.detail = detail
        self.timeout = timeout
        super().__init__(self._text())

    def _text(self) -> str:
        after = "" if self.timeout is None else f" after {self.timeout:g} s"
        rid = "" if self.request_id is None else f" (request {self.request_id!r})"
        detail = "" if self.detail is None else f": {self.detail}"
        return f"{self.method} timed out{after}{rid}{detail}"

    def __str__(self) -> str:
        """The message, from the attributes as they are now (a caller that knows more,
        such as ``open_client`` knowing what it was opening, fills them in)."""
        return self._text()


def request_error(
    method: str, rid: RequestId, outcome: ErrorReceived | RequestTimedOut | SessionClosed
) -> Exception:
    """The exception a request of ours that got no result raises: :class:`McpError`
    (:class:`RemoteProtocolError` for an answer the core could not use, see
    :func:`received_error`), :class:`RequestTimeout`, or (a copy of) the
    :class:`SessionClosed` that ended it."""
    if isinstance(outcome, ErrorReceived):
        return received_error(outcome)
    if isinstance(outcome, RequestTimedOut):
        return RequestTimeout(method, rid)
    return fresh(outcome)

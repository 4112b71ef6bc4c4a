"""Error codes and the two exception families of the core.

Errors that go on the wire are data: an :class:`ErrorData` built from an
:class:`ErrorCode`. Exceptions are for the code that drives the core:

* :class:`LocalProtocolError` -- *you* (the caller) misused the API. The call that
  raised it changed no state.
* :class:`RemoteProtocolError` -- *the peer* sent something the caller asked the core
  to read and it is not valid: params that do not structure (``structure_params``,
  -32602), a malformed ``Authorization`` header, a skill entry. Whether it goes on the
  wire is the caller's choice: to refuse the peer's request, answer it with
  ``error.code`` and ``error.message`` (or ``error.error_data()``).

Which one you get depends on which public method raised it (the h11 split).
"""

from __future__ import annotations

import enum
from typing import Any, Final, final

import attrs

__all__ = ["ErrorCode", "ErrorData", "LocalProtocolError", "RemoteProtocolError"]


class ErrorCode(enum.IntEnum):
    """JSON-RPC 2.0 and MCP error codes."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    #: Legacy era: a resource that does not exist (the modern era uses INVALID_PARAMS).
    RESOURCE_NOT_FOUND = -32002
    #: 2025-11-25: the server needs the user to complete a URL-mode elicitation.
    URL_ELICITATION_REQUIRED = -32042
    #: 2026-07-28: HTTP headers disagree with the body, or are missing/malformed.
    HEADER_MISMATCH = -32020
    #: 2026-07-28: the request needs a client capability the envelope lacks.
    MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
    #: 2026-07-28: the envelope names a protocol version the server does not speak.
    UNSUPPORTED_PROTOCOL_VERSION = -32022


SHUTTING_DOWN: Final = (int(ErrorCode.INTERNAL_ERROR), "server shutting down")
"""``(code, message)`` of the error a stopping server answers the requests it will not
finish: Streamable HTTP's ``HttpServer.close()``, and the binding's session and WebSocket
stops (one text on every transport)."""


@final
@attrs.frozen(kw_only=True)
class ErrorData:
    """The ``error`` member of a JSON-RPC error response."""

    code: int
    """The error code; see :class:`ErrorCode`."""
    message: str
    """A short, human-readable description."""
    data: Any = None
    """Optional structured detail; omitted from the wire when ``None``."""

    def to_wire(self) -> dict[str, Any]:
        """The JSON object for the ``error`` member."""
        out: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


class ProtocolError(Exception):
    """Base class of the core's exceptions. Do not raise directly."""

    #: The wire code that best describes this error, if it were sent to the peer.
    error_code: int = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if error_code is not None:
            self.error_code = error_code

    @property
    def code(self) -> int:
        """The same as :attr:`error_code`, under the name :class:`ErrorData` uses."""
        return self.error_code

    def error_data(self, data: Any = None) -> ErrorData:
        """This error as wire data, for a caller that chooses to send it."""
        return ErrorData(code=self.error_code, message=self.message, data=data)


class LocalProtocolError(ProtocolError):
    """The caller used the API in a way the protocol forbids. No state was changed."""


class RemoteProtocolError(ProtocolError):
    """Something the peer sent, which the caller asked the core to read, is not valid.

    ``code`` (or ``error_code``) is the wire code that fits: -32602 from
    :func:`~mcp_sansio.structure_params`, whose message says which field is wrong. The
    connection raised nothing and goes on; if it came in a request of the peer's,
    answer that request with it (``send_error(rid, exc.code, exc.message)``).
    """

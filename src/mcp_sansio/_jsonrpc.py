"""JSON-RPC 2.0 envelopes: decode, classify, validate ids, build replies.

Pure functions over decoded JSON. Nothing here knows about MCP methods, eras or
state; :mod:`mcp_sansio._connection` decides what a message means.

Classification never raises for peer input: a message that is not a valid JSON-RPC
envelope comes back as :class:`Invalid`, carrying the error to send (when the message
looks like a request whose id we could read) or to report.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias, final

from ._errors import ErrorCode, ErrorData
from ._json import JSONDecodeError, loads

__all__ = [
    "ErrorResponse",
    "Invalid",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "classify",
    "decode",
    "error_response",
    "is_request_id",
    "notification",
    "parse_error",
    "request",
    "result_response",
]

RequestId: TypeAlias = str | int
"""A JSON-RPC request id: a string or an integer (never null, bool or float in MCP)."""

JSONRPC: Final = "2.0"


# The message records below are private (what :func:`classify` hands the connection,
# read once and dropped) and on a stdio server's import path: plain slotted classes
# (see tests/test_stdio_import_cost.py).


@final
class Request:
    """A request: has an id and a method, expects exactly one answer.

    Attributes:
        id: the request id, unique among the sender's requests in flight.
        method: the method name.
        params: the params object, or ``None`` when absent.
    """

    __slots__ = ("id", "method", "params")

    def __init__(self, *, id: RequestId, method: str, params: dict[str, Any] | None) -> None:
        self.id: Final = id
        self.method: Final = method
        self.params: Final = params


@final
class Notification:
    """A notification: a method with no id; never answered.

    Attributes:
        method: the method name.
        params: the params object, or ``None`` when absent.
    """

    __slots__ = ("method", "params")

    def __init__(self, *, method: str, params: dict[str, Any] | None) -> None:
        self.method: Final = method
        self.params: Final = params


@final
class Response:
    """A successful response.

    Attributes:
        id: the id of the request this answers.
        result: the result object.
    """

    __slots__ = ("id", "result")

    def __init__(self, *, id: RequestId, result: dict[str, Any]) -> None:
        self.id: Final = id
        self.result: Final = result


@final
class ErrorResponse:
    """An error response. ``id`` is ``None`` when the peer could not read our id.

    Attributes:
        id: the id of the request this answers, if known.
        error: the error.
    """

    __slots__ = ("error", "id")

    def __init__(self, *, id: RequestId | None, error: ErrorData) -> None:
        self.id: Final = id
        self.error: Final = error


@final
class Invalid:
    """Input that is not a valid JSON-RPC message.

    Attributes:
        error: the error that describes what is wrong (-32700, -32600 or -32602).
        id: the request id, when the input looked like a request with a readable id.
        is_request: whether the input was meant as a request, so that an error reply
            is owed.
    """

    __slots__ = ("error", "id", "is_request")

    def __init__(
        self,
        *,
        error: ErrorData,
        id: RequestId | None = None,
        is_request: bool = False,
    ) -> None:
        self.error: Final = error
        self.id: Final = id
        self.is_request: Final = is_request


Message: TypeAlias = Request | Notification | Response | ErrorResponse


def is_request_id(value: object) -> bool:
    """Whether ``value`` is a valid MCP request id (str or int, not bool)."""
    t = type(value)
    return t is str or t is int


def decode(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text.

    Returns:
        The decoded value, or an :class:`Invalid` with -32700 when ``data`` is not JSON.
    """
    try:
        return loads(data)
    except JSONDecodeError as exc:
        return parse_error(exc)


def parse_error(exc: JSONDecodeError) -> Invalid:
    """The -32700 :class:`Invalid` for input the JSON parser refused with ``exc``."""
    return Invalid(
        error=ErrorData(code=ErrorCode.PARSE_ERROR, message=f"Parse error: {exc}"),
        is_request=True,
    )


def _invalid(message: str, obj: dict[str, Any], code: int = ErrorCode.INVALID_REQUEST) -> Invalid:
    rid = obj.get("id")
    ok_id = rid if is_request_id(rid) else None
    return Invalid(
        error=ErrorData(code=code, message=message),
        id=ok_id,
        is_request="method" in obj and "id" in obj,
    )


def classify(obj: Any) -> Message | Invalid:
    """Classify one decoded JSON value as a JSON-RPC message.

    Args:
        obj: a decoded JSON value (not a batch array; the caller splits batches).

    Returns:
        A :class:`Request`, :class:`Notification`, :class:`Response`,
        :class:`ErrorResponse`, or :class:`Invalid` describing what is wrong.
    """
    if type(obj) is not dict:
        return Invalid(
            error=ErrorData(
                code=ErrorCode.INVALID_REQUEST, message="Invalid Request: not a JSON object"
            ),
            is_request=True,
        )
    if obj.get("jsonrpc") != JSONRPC:
        return _invalid('Invalid Request: "jsonrpc" must be "2.0"', obj)
    method = obj.get("method")
    if method is not None:
        if type(method) is not str:
            return _invalid('Invalid Request: "method" must be a string', obj)
        params = obj.get("params")
        if params is not None and type(params) is not dict:
            return _invalid(
                'Invalid params: "params" must be an object', obj, ErrorCode.INVALID_PARAMS
            )
        if "id" in obj:
            rid = obj["id"]
            if type(rid) is not int and type(rid) is not str:  # (is_request_id, inline)
                return Invalid(
                    error=ErrorData(
                        code=ErrorCode.INVALID_REQUEST,
                        message='Invalid Request: "id" must be a string or an integer',
                    ),
                    is_request=True,
                )
            return Request(id=rid, method=method, params=params)
        return Notification(method=method, params=params)
    if "result" in obj:
        rid = obj.get("id")
        if "error" in obj:
            return _invalid('Invalid Response: both "result" and "error"', obj)
        if type(rid) is not int and type(rid) is not str:  # (ours are integers)
            return _invalid('Invalid Response: "id" must be a string or an integer', obj)
        result = obj["result"]
        if type(result) is not dict:
            return _invalid('Invalid Response: "result" must be an object', obj)
        return Response(id=rid, result=result)
    if "error" in obj:
        rid = obj.get("id")
        if rid is not None and not is_request_id(rid):
            return _invalid('Invalid Response: "id" must be a string, an integer or null', obj)
        err = obj["error"]
        if (
            type(err) is not dict
            or type(err.get("code")) is not int
            or type(err.get("message")) is not str
        ):
            return _invalid('Invalid Response: "error" needs an integer code and a message', obj)
        return ErrorResponse(
            id=rid, error=ErrorData(code=err["code"], message=err["message"], data=err.get("data"))
        )
    return _invalid("Invalid Request: neither a request, a notification nor a response", obj)


def request(request_id: RequestId, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """A request object (``params`` left out when ``None``)."""
    if params is None:
        return {"jsonrpc": JSONRPC, "id": request_id, "method": method}
    return {"jsonrpc": JSONRPC, "id": request_id, "method": method, "params": params}


def notification(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """A notification object."""
    if params is None:
        return {"jsonrpc": JSONRPC, "method": method}
    return {"jsonrpc": JSONRPC, "method": method, "params": params}


def result_response(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """A success response object."""
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: ErrorData) -> dict[str, Any]:
    """An error response object (``id`` null when the request id is unknown)."""
    return {"jsonrpc": JSONRPC, "id": request_id, "error": error.to_wire()}

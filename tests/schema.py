"""Validate what we emit against the official JSON schema of the negotiated revision."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import orjson

SPEC = Path(__file__).resolve().parents[1].parent / "shared" / "spec"


@functools.cache
def _schema(version: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((SPEC / "schema" / version / "schema.json").read_bytes())
    return data


def _defs(version: str) -> dict[str, Any]:
    schema = _schema(version)
    defs: dict[str, Any] = schema.get("$defs") or schema["definitions"]
    return defs


# Values that are free-form JSON (a JSON Schema, arguments, metadata), never closed.
_OPEN = frozenset(
    {
        "inputSchema",
        "outputSchema",
        "requestedSchema",
        "structuredContent",
        "properties",
        "_meta",
        "arguments",
        "experimental",
    }
)


def _close(node: Any) -> None:
    """Forbid, in place, every property an object schema does not define (where it says
    nothing of others), except in free-form values (:data:`_OPEN`)."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    if name not in _OPEN:
                        _close(sub)
            elif key not in _OPEN:
                _close(value)
    elif isinstance(node, list):
        for item in node:
            _close(item)


@functools.cache
def _strict_schema(version: str) -> dict[str, Any]:
    schema = copy.deepcopy(_schema(version))
    _close(schema.get("$defs") or schema["definitions"])
    return schema


@functools.cache
def _validator(version: str, name: str, strict: bool = False) -> Any:
    schema = _strict_schema(version) if strict else _schema(version)
    key = "$defs" if "$defs" in schema else "definitions"
    sub = {"$schema": schema["$schema"], "$ref": f"#/{key}/{name}", key: schema[key]}
    cls = jsonschema.validators.validator_for(sub)
    return cls(sub)


@functools.cache
def _method_defs(version: str) -> dict[str, str]:
    """method name -> the request/notification definition that has it as a const."""
    out: dict[str, str] = {}
    for name, d in _defs(version).items():
        method = d.get("properties", {}).get("method", {})
        if "const" in method and name.endswith(("Request", "Notification")):
            out[method["const"]] = name
    return out


def has_def(version: str, name: str) -> bool:
    return name in _defs(version)


def validate(version: str, name: str, value: Any, *, strict: bool = False) -> None:
    """Raise jsonschema.ValidationError unless ``value`` is a valid ``name``.

    ``strict``: no object may carry a property its definition does not name (every
    schema allows them; a strict peer does not), outside free-form values.
    """
    _validator(version, name, strict).validate(value)


def validate_message(
    version: str, message: Any, request_method: str | None = None, *, strict: bool = False
) -> None:
    """Validate one emitted JSON-RPC message (or a batch array) of ``version``
    (``strict``: see :func:`validate`).

    Requests and notifications are checked against the definition of their method;
    results against the result type of ``request_method`` when the schema has one.
    An error response with a null id (a parse error we could not correlate) is the
    documented exception: JSON-RPC requires ``id: null`` there, which the MCP schemas
    do not model, so it is checked with the id removed.
    """
    if isinstance(message, list):
        for item in message:
            validate_message(version, item, None, strict=strict)
        return
    if "error" in message and message.get("id") is None:
        message = {k: v for k, v in message.items() if k != "id"}
        err = _defs(version).get("JSONRPCErrorResponse") and "JSONRPCErrorResponse"
        validate(version, err or "JSONRPCError", {**message, "id": 0}, strict=strict)
        return
    validate(version, "JSONRPCMessage", message)  # (a union: never strict)
    method = message.get("method")
    if method is not None:
        name = _method_defs(version).get(method)
        if name is not None:
            if strict and "jsonrpc" not in _defs(version)[name]["properties"]:
                # Before 2025-11-25 a request's definition holds its method and params
                # only (the envelope is JSONRPCRequest's, checked above), and writes
                # its params out without the ``_meta`` every request's and
                # notification's params have (``Request``, ``Notification``).
                base = "Request" if "id" in message else "Notification"
                message = {k: v for k, v in message.items() if k not in ("jsonrpc", "id")}
                params = message.get("params")
                if isinstance(params, dict) and "_meta" in params:
                    assert "_meta" in _defs(version)[base]["properties"]["params"]["properties"]
                    message["params"] = {k: v for k, v in params.items() if k != "_meta"}
            validate(version, name, message, strict=strict)
        return
    if "result" in message and message["result"].get("resultType") == "input_required":
        validate(version, "InputRequiredResult", message["result"], strict=strict)
        return
    if "result" in message and request_method is not None:
        req = _method_defs(version).get(request_method)
        if req is not None:
            result_name = req.removesuffix("Request") + "Result"
            if has_def(version, result_name):
                validate(version, result_name, message["result"], strict=strict)

"""Validate what we emit against the official JSON schema of the negotiated revision."""

from __future__ import annotations

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


@functools.cache
def _validator(version: str, name: str) -> Any:
    schema = _schema(version)
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


def validate(version: str, name: str, value: Any) -> None:
    """Raise jsonschema.ValidationError unless ``value`` is a valid ``name``."""
    _validator(version, name).validate(value)


def validate_message(version: str, message: Any, request_method: str | None = None) -> None:
    """Validate one emitted JSON-RPC message (or a batch array) of ``version``.

    Requests and notifications are checked against the definition of their method;
    results against the result type of ``request_method`` when the schema has one.
    An error response with a null id (a parse error we could not correlate) is the
    documented exception: JSON-RPC requires ``id: null`` there, which the MCP schemas
    do not model, so it is checked with the id removed.
    """
    if isinstance(message, list):
        for item in message:
            validate_message(version, item, None)
        return
    if "error" in message and message.get("id") is None:
        message = {k: v for k, v in message.items() if k != "id"}
        err = _defs(version).get("JSONRPCErrorResponse") and "JSONRPCErrorResponse"
        validate(version, err or "JSONRPCError", {**message, "id": 0})
        return
    validate(version, "JSONRPCMessage", message)
    method = message.get("method")
    if method is not None:
        name = _method_defs(version).get(method)
        if name is not None:
            validate(version, name, message)
        return
    if "result" in message and message["result"].get("resultType") == "input_required":
        validate(version, "InputRequiredResult", message["result"])
        return
    if "result" in message and request_method is not None:
        req = _method_defs(version).get(request_method)
        if req is not None:
            result_name = req.removesuffix("Request") + "Result"
            if has_def(version, result_name):
                validate(version, result_name, message["result"])

"""The fixed, seeded messages every benchmark group uses.

Each workload is built once, from :data:`SEED`, by plain Python (no randomness at run
time), and its serialized size is asserted, so a figure measured today and one measured
next month move the same bytes. ``python -m benchmarks.workloads`` prints the sizes;
``benchmarks/README.md`` documents them.

The sizes are those of the compact UTF-8 JSON text (``orjson.dumps``) of the whole
JSON-RPC message, envelope included, with request/response id ``1``. A benchmark that
sends many requests uses growing ids, so its messages are a few bytes longer; that is
noise next to the figures it reports.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable
from typing import Any, Final

import orjson

__all__ = [
    "CALL_TOOL_ARGUMENTS",
    "CALL_TOOL_NAME",
    "CALL_TOOL_PARAMS",
    "CALL_TOOL_REQUEST",
    "CALL_TOOL_REQUEST_BYTES",
    "CALL_TOOL_RESPONSE",
    "CALL_TOOL_RESPONSE_BYTES",
    "CALL_TOOL_RESULT",
    "PROGRESS_NOTIFICATION",
    "PROGRESS_NOTIFICATION_BYTES",
    "READ_RESOURCE_RESPONSE",
    "READ_RESOURCE_RESPONSE_BYTES",
    "READ_RESOURCE_RESULT",
    "SEED",
    "SIZES",
    "TOOLS_LIST_RESPONSE",
    "TOOLS_LIST_RESPONSE_BYTES",
    "TOOLS_LIST_RESULT",
]

SEED: Final = 20260728
"""The one seed every workload derives from."""

REQUEST_SIZE: Final = 159
"""Bytes of the ``tools/call`` request."""
RESPONSE_SIZE: Final = 1024
"""Bytes of the ``tools/call`` response (a text ``CallToolResult``)."""
TOOL_COUNT: Final = 50
"""Tools in the ``tools/list`` result."""
TOOLS_LIST_SIZE: Final = 23 * 1024
"""Bytes of the ``tools/list`` response."""
BLOB_RAW_SIZE: Final = 768 * 1024
"""Raw bytes of the ``resources/read`` blob; its base64 text is exactly 1 MiB."""

_WORDS: Final = (
    *("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"),
    *("juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"),
    *("sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"),
    *("forecast", "pressure", "humidity", "wind", "rain", "cloud", "front", "gust", "knot"),
    *("sea", "level", "visibility", "sunrise", "sunset", "dew", "point", "station"),
    *("report", "hourly", "daily", "outlook"),
)


def _rng(salt: str) -> random.Random:
    # One independent stream per workload, so adding a workload never changes another.
    return random.Random(f"{SEED}:{salt}")


def _words(rng: random.Random, n_chars: int) -> str:
    """Seeded ASCII prose of exactly ``n_chars`` characters (nothing JSON must escape)."""
    parts: list[str] = []
    total = 0
    while total <= n_chars:  # the joined text is total - 1 characters long
        word = rng.choice(_WORDS)
        parts.append(word)
        total += len(word) + 1
    return " ".join(parts)[:n_chars]


def _size(obj: Any) -> int:
    return len(orjson.dumps(obj))


def _fit(build: Callable[[int], dict[str, Any]], size: int) -> dict[str, Any]:
    """Grow the one filler field ``build`` takes until the message is ``size`` bytes."""
    base = _size(build(0))
    message = build(size - base)
    assert _size(message) == size, (_size(message), size)
    return message


# -- tools/call: the request (159 bytes) and its ~1 KB text result --------------------------

CALL_TOOL_NAME: Final = "get_forecast"


def _call_tool_arguments(filler: int) -> dict[str, Any]:
    return {
        "city": "Reykjavik",
        "days": 3,
        "units": "metric",
        "note": _words(_rng("tools/call:note"), filler),
    }


def _call_tool_request(filler: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": CALL_TOOL_NAME, "arguments": _call_tool_arguments(filler)},
    }


CALL_TOOL_REQUEST: Final = _fit(_call_tool_request, REQUEST_SIZE)
"""The whole ``tools/call`` request message, id 1: exactly 159 bytes."""
CALL_TOOL_PARAMS: Final[dict[str, Any]] = CALL_TOOL_REQUEST["params"]
"""Its ``params``: what a client passes to ``send_request``."""
CALL_TOOL_ARGUMENTS: Final[dict[str, Any]] = CALL_TOOL_PARAMS["arguments"]
"""Its tool arguments."""


def _call_tool_response(filler: int) -> dict[str, Any]:
    text = _words(_rng("tools/call:result"), filler)
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }


CALL_TOOL_RESPONSE: Final = _fit(_call_tool_response, RESPONSE_SIZE)
"""The whole response message, id 1: exactly 1,024 bytes."""
CALL_TOOL_RESULT: Final[dict[str, Any]] = CALL_TOOL_RESPONSE["result"]
"""Its ``CallToolResult``: what a server passes to ``send_result``."""


# -- tools/list: 50 tools, 23 KiB ----------------------------------------------------------


def _tool(rng: random.Random, index: int, description_chars: int) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for p in range(3):
        name = f"{rng.choice(_WORDS)}_{p}"
        properties[name] = {
            "type": rng.choice(("string", "number", "integer", "boolean")),
            "description": _words(rng, 24),
        }
    return {
        "name": f"tool_{index:02d}_{rng.choice(_WORDS)}",
        "title": _words(rng, 20).title(),
        # Its own stream: the filler length must not shift the words drawn after it.
        "description": _words(_rng(f"tools/list:{index}"), description_chars),
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": sorted(properties)[:2],
        },
    }


def _tools_list_response(filler: int) -> dict[str, Any]:
    rng = _rng("tools/list")
    # Spread the filler over the descriptions: every tool gets an equal share and the
    # first ``filler % TOOL_COUNT`` tools one character more.
    share, extra = divmod(filler, TOOL_COUNT)
    tools = [_tool(rng, i, share + (i < extra)) for i in range(TOOL_COUNT)]
    return {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}


TOOLS_LIST_RESPONSE: Final = _fit(_tools_list_response, TOOLS_LIST_SIZE)
"""A ``tools/list`` response with 50 tools: exactly 23,552 bytes."""
TOOLS_LIST_RESULT: Final[dict[str, Any]] = TOOLS_LIST_RESPONSE["result"]
"""Its ``ListToolsResult``."""


# -- resources/read: one 1 MiB base64 blob -------------------------------------------------

_BLOB: Final = _rng("resources/read").randbytes(BLOB_RAW_SIZE)
READ_RESOURCE_RESULT: Final[dict[str, Any]] = {
    "contents": [
        {
            "uri": "file:///data/sample.bin",
            "mimeType": "application/octet-stream",
            "blob": base64.b64encode(_BLOB).decode("ascii"),
        }
    ]
}
"""A ``ReadResourceResult`` whose blob is 786,432 random bytes (1 MiB of base64)."""
READ_RESOURCE_RESPONSE: Final = {"jsonrpc": "2.0", "id": 1, "result": READ_RESOURCE_RESULT}
"""The whole response message, id 1."""
assert len(READ_RESOURCE_RESULT["contents"][0]["blob"]) == 1024 * 1024


# -- notifications/progress ----------------------------------------------------------------

PROGRESS_NOTIFICATION: Final = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": 1, "progress": 50, "total": 100, "message": "halfway there"},
}
"""A progress notification for request 1."""


# -- serialized forms ----------------------------------------------------------------------

CALL_TOOL_REQUEST_BYTES: Final = orjson.dumps(CALL_TOOL_REQUEST)
CALL_TOOL_RESPONSE_BYTES: Final = orjson.dumps(CALL_TOOL_RESPONSE)
TOOLS_LIST_RESPONSE_BYTES: Final = orjson.dumps(TOOLS_LIST_RESPONSE)
READ_RESOURCE_RESPONSE_BYTES: Final = orjson.dumps(READ_RESOURCE_RESPONSE)
PROGRESS_NOTIFICATION_BYTES: Final = orjson.dumps(PROGRESS_NOTIFICATION)

assert len(CALL_TOOL_REQUEST_BYTES) == 159
assert len(CALL_TOOL_RESPONSE_BYTES) == 1024

SIZES: Final[dict[str, int]] = {
    "tools/call request": len(CALL_TOOL_REQUEST_BYTES),
    "tools/call response (text CallToolResult)": len(CALL_TOOL_RESPONSE_BYTES),
    "tools/list response (50 tools)": len(TOOLS_LIST_RESPONSE_BYTES),
    "resources/read response (1 MiB base64 blob)": len(READ_RESOURCE_RESPONSE_BYTES),
    "notifications/progress": len(PROGRESS_NOTIFICATION_BYTES),
}
"""Serialized size in bytes of each workload, for reports."""


if __name__ == "__main__":
    for name, size in SIZES.items():
        print(f"{size:>9,} B  {name}")

"""The one JSON entry point of the project (orjson: 5-7x faster than ``json`` here)."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["JSONDecodeError", "dumps", "loads"]

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text. Raises :class:`JSONDecodeError` on malformed input."""
    return orjson.loads(data)


def dumps(obj: Any) -> bytes:
    """Serialize to compact UTF-8 JSON bytes."""
    return orjson.dumps(obj)

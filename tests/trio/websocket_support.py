"""Shared pieces of the WebSocket binding tests (this module holds no tests)."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence


def handshake_request(
    host: str | bytes | None,
    *,
    path: str = "/mcp",
    subprotocol: str | None = "mcp",
    headers: Sequence[tuple[str, str]] = (),
) -> bytes:
    """The bytes of a raw WebSocket opening handshake (RFC 6455 section 4.1), for tests
    that write it by hand on a socket: a ``GET`` of ``path`` with a fresh
    ``Sec-WebSocket-Key``, ``Host: host`` (as given, bytes and all: a ``Host`` a client
    library would refuse to send; ``None``: none, or the one in ``headers``), offering
    ``subprotocol`` (``None``: no ``Sec-WebSocket-Protocol``), then ``headers``."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1".encode()]
    if host is not None:
        lines.append(b"Host: " + (host if isinstance(host, bytes) else host.encode()))
    lines += [
        b"Upgrade: websocket",
        b"Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}".encode(),
        b"Sec-WebSocket-Version: 13",
    ]
    if subprotocol is not None:
        lines.append(f"Sec-WebSocket-Protocol: {subprotocol}".encode())
    lines += [f"{name}: {value}".encode() for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n"

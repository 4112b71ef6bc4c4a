"""Fixtures shared by the binding's tests."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing
import trustme


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Real-time pace, plus ``jump`` to make timeouts expire at once (the HTTP tests:
    real sockets, and timeouts that must not wait)."""
    return trio.testing.MockClock(rate=1)


Dial = Callable[[trio.abc.Stream], list[tuple[str, int]]]
"""``dial(stream)``: see :func:`dial`."""


@pytest.fixture
def dial(monkeypatch: pytest.MonkeyPatch) -> Dial:
    """``dial(stream)`` makes ``trio.open_tcp_stream`` (what the WebSocket client and
    probe call) return ``stream`` instead of a socket, so a test plays the server on the
    other end of a memory stream pair. Returns the list of ``(host, port)`` dialled."""

    def route(stream: trio.abc.Stream) -> list[tuple[str, int]]:
        dialled: list[tuple[str, int]] = []

        async def connect(host: str, port: int, **_: Any) -> trio.abc.Stream:
            dialled.append((host, port))
            return stream

        monkeypatch.setattr(trio, "open_tcp_stream", connect)
        return dialled

    return route


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throwaway certificate authority (one per test module)."""
    return trustme.CA()


@pytest.fixture
def server_context(ca: trustme.CA) -> ssl.SSLContext:
    """A server's TLS context with a certificate for 127.0.0.1 from ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


@pytest.fixture
def client_context(ca: trustme.CA) -> ssl.SSLContext:
    """A client's TLS context that trusts ``ca``."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context

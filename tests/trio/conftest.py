"""Fixtures shared by the binding's tests."""

from __future__ import annotations

import pytest
import trio
import trio.testing


@pytest.fixture
def clock() -> trio.testing.MockClock:
    """Real-time pace, plus ``jump`` to make timeouts expire at once (the HTTP tests:
    real sockets, and timeouts that must not wait)."""
    return trio.testing.MockClock(rate=1)

"""A connection released after the pool closed is closed, not kept idle: a reader that
finished its exchange after the session had closed the pool left its socket open (a
ResourceWarning when it was collected)."""

from __future__ import annotations

from typing import cast

from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_pool import Pool
from mcp_trio._http_wire import H11Stream


class _Wire:
    """What ``Pool.release`` uses of a connection: reusable, and whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    def next_cycle(self) -> bool:
        return True

    async def aclose(self) -> None:
        self.closed = True


async def test_a_connection_released_before_the_pool_closes_is_closed_with_it() -> None:
    pool = Pool("http://127.0.0.1:1/mcp", HttpTransportConfig())
    wire = _Wire()
    await pool.release(cast(H11Stream, wire))
    assert not wire.closed  # kept for reuse
    await pool.aclose()
    assert wire.closed


async def test_a_connection_released_after_the_pool_closed_is_closed() -> None:
    pool = Pool("http://127.0.0.1:1/mcp", HttpTransportConfig())
    await pool.aclose()
    wire = _Wire()
    await pool.release(cast(H11Stream, wire))
    assert wire.closed

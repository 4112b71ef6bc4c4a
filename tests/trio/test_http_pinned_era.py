"""A client whose era is pinned does not probe: a refusal shows its HTTP status.

``open_http_client`` (and ``open_client``) with the era pinned to modern: no
``server/discover`` probe, so no fallback to ``initialize`` either; a wrong path is a
``404`` and says so (it used to read "not a modern MCP server; falling back to
initialize", a fallback that never happened). Real sockets on 127.0.0.1, port 0.
"""

from __future__ import annotations

import pytest
import trio

import mcp_trio
from mcp_trio import HandshakeFailed
from mcp_trio._http_client import open_http_client

from .test_http_support import IO_TIMEOUT, client_connection_config, start_server


@pytest.mark.parametrize("entry", ["open_http_client", "open_client"])
async def test_a_pinned_modern_era_shows_the_status_of_a_refusal(
    nursery: trio.Nursery, entry: str
) -> None:
    # No probe, so no fallback: a wrong path is a 404, and says so.
    server = await start_server(nursery)
    url = server.url.replace("/mcp", "/wrong")
    opened = (
        open_http_client(url, connection_config=client_connection_config("modern"))
        if entry == "open_http_client"
        else mcp_trio.open_client(url, era="modern")
    )
    with trio.fail_after(IO_TIMEOUT), pytest.raises(HandshakeFailed) as info:
        async with opened:
            pass  # pragma: no cover
    assert info.value.error.message == (
        f"HTTP: status 404: no MCP endpoint at {url!r} (mcp_trio's serve_http serves one at /mcp)"
    )
    assert info.value.error.data == {"httpStatus": 404}

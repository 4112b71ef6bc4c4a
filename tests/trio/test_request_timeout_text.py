"""``RequestTimeout``'s message: the method first, then how long, then the request id."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig
from mcp_trio import RequestTimeout
from mcp_trio._client import open_client

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config


def test_request_timeout_leads_with_the_method() -> None:
    error = RequestTimeout("tools/call", 3, timeout=2)
    assert str(error) == "tools/call timed out after 2 s (request 3)"
    assert (error.method, error.request_id, error.timeout) == ("tools/call", 3, 2)
    assert isinstance(error, trio.TooSlowError)
    assert str(RequestTimeout("tools/call", None)) == "tools/call timed out"
    waited = RequestTimeout("subscriptions/listen", "a", detail="never acknowledged")
    assert str(waited) == "subscriptions/listen timed out (request 'a'): never acknowledged"


async def test_client_request_timeout_says_how_long(autojump_clock: MockClock) -> None:
    target = (make_handlers(), app_config())
    async with open_client(target, era="legacy", timeout=5) as client:
        with pytest.raises(RequestTimeout) as failed:
            await client.call_tool("sleep", {"seconds": 10})
        assert str(failed.value) == "tools/call timed out after 5 s (request 2)"
        with pytest.raises(RequestTimeout) as failed:
            await client.call_tool("sleep", {"seconds": 10}, timeout=1.5)
        assert str(failed.value) == "tools/call timed out after 1.5 s (request 3)"
    # with max_request_time too, which deadline fired is not known: no number
    core = ConnectionConfig(max_request_time=60)
    async with open_client(target, era="legacy", timeout=5, connection_config=core) as client:
        with pytest.raises(RequestTimeout) as failed:
            await client.call_tool("sleep", {"seconds": 10})
        assert str(failed.value) == "tools/call timed out (request 2)"

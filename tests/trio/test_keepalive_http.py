"""Keep-alive over Streamable HTTP (legacy era): the client pings with a POST; the server
(``serve_http``) never pings, whatever its ``SessionConfig.ping_interval`` says (it may
have no stream to the client: see ``mcp_trio._keepalive``)."""

from __future__ import annotations

import trio
import trio.testing

from mcp_trio import SessionConfig
from mcp_trio._http_client import open_http_client

from .test_http_support import IO_TIMEOUT, client_connection_config, start_proxied


async def test_a_legacy_http_client_pings_and_the_server_does_not(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Mutation: no keep-alive task started -> no ping POST comes (fail_after).
    server_config = SessionConfig(ping_interval=1, ping_timeout=1)  # (serve_http: unused)
    proxy = await start_proxied(nursery, config=server_config)
    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), config=config
        ) as client:
            heard = client._heard_at
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(5)  # a whole interval of silence: a ping (and, for the server, five)
            while client._heard_at == heard:  # (real sockets: the answer is on its way)
                await trio.sleep(0.001)
            await trio.testing.wait_all_tasks_blocked()
            assert not client.closed
    posts = [seen.message for seen in proxy.seen if seen.method == "POST"]
    pings = [m for m in posts if isinstance(m, dict) and m.get("method") == "ping"]
    assert len(pings) == 1
    # The client answered nothing: no request of the server's ever reached it.
    assert not [m for m in posts if isinstance(m, dict) and "method" not in m]

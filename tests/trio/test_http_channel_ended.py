"""The HTTP client's channel after its tasks ended, before the session knew.

A client cancelled from outside (a cancel scope around ``open_client``, the soak's
"vanish") cancels the channel's task nursery, which takes no task from then on,
while the session still writes its shielded courtesies (the ``resources/unsubscribe``
of a ``subscribe()`` block, cancellations). A request written then on an idle
kept-alive connection went out, and only then did ``start_soon`` raise ``RuntimeError:
Nursery is closed to new arrivals`` (the caller got that, from ``call_tool``); the
session's writer kept the message as unsent, and the next write sent it again: the
server saw the same request id twice ("Duplicate request id"). Now the channel says
it is broken before it writes anything: the request fails with
:class:`~mcp_trio.SessionClosed`, and nothing reaches the server.

Here the channel's nursery is cancelled alone (its cancel scope), which is what the
outer cancellation does to it first. Real sockets on 127.0.0.1, behind a recording
:class:`~tests.trio.test_http_support.Proxy`.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from mcp_trio import SessionClosed
from mcp_trio._http_client import HttpChannel, open_http_client

from .test_http_support import IO_TIMEOUT, client_connection_config, start_proxied


@pytest.mark.parametrize("idle", [True, False], ids=["idle connection", "no idle connection"])
async def test_a_request_after_the_channel_s_tasks_ended_fails_and_is_never_sent(
    nursery: trio.Nursery, idle: bool
) -> None:
    proxy = await start_proxied(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy")
        ) as session:
            await session.request("tools/list")  # (leaves an idle kept-alive connection)
            channel = session._channel
            assert isinstance(channel, HttpChannel)
            if not idle:
                await channel._pool.aclose()  # (closes the idle one; none is kept after)
            assert channel._tasks is not None
            channel._tasks.cancel_scope.cancel()
            await trio.testing.wait_all_tasks_blocked()  # (its nursery is closed now)
            with pytest.raises(SessionClosed):
                await session.request("ping")
    assert [r.rpc_method for r in proxy.seen].count("ping") == 0

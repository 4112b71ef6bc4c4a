"""Keep-alive over HTTP while the client waits for authorization: a ping refused with
``401`` and held while the user authorizes again was never processed by the server, so
its timeout sends no ``notifications/cancelled`` (``_Stream.out`` is taken back on a
refusal; see ``mcp_trio._http_client``, "Cancellation")."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_trio import SessionConfig, fetch_authorization_redirect, open_client

from .oauth_support import oauth
from .test_http_support import App, start_server
from .test_oauth import Fake


class _RecordingFake(Fake):
    """The fake MCP + authorization server, noting the method of each POST to /mcp."""

    posted: list[str]

    async def route(
        self, method: str, target: str, headers: Any, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method == "POST" and target.startswith("/mcp") and body:
            self.posted.append(str(loads(body).get("method")))
        return await super().route(method, target, headers, body)


async def test_a_ping_refused_and_held_for_authorization_is_withdrawn_unannounced(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Mutation: _Stream.out left True on a 401 -> a notifications/cancelled POST
    # (refused too) at each ping's timeout.
    upstream = await start_server(nursery, App())
    fake = _RecordingFake(upstream=upstream.url)
    fake.posted = []
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    authorizations = 0
    never = trio.Event()

    async def on_authorize(url: str) -> str:
        nonlocal authorizations
        authorizations += 1
        if authorizations > 1:
            await never.wait()  # the user takes their time
        return await fetch_authorization_redirect(url)

    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=on_authorize), config=config
        ) as client:
            await client.list_tools()
            fake.tokens.clear()  # every token the client holds is refused from now on
            fake.refresh.clear()
            fake.posted.clear()
            for _ in range(4):
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(5)
                await trio.sleep(0.05)
            await trio.testing.wait_all_tasks_blocked()
            assert authorizations == 2  # the second one still waits for the user
            assert "ping" in fake.posted
            assert "notifications/cancelled" not in fake.posted, fake.posted
            assert not client.session.closed  # (held on our side: not the silence)

"""The legacy GET stream with OAuth: a background stream the user did not ask for, so a
``401`` to its (re)open never starts an authorization (no prompt, no browser). It waits
for the shared refresh, or for the next token a flow of the user's own requests brings,
and does not count as a failed re-open meanwhile (the session stays); the stream opens
again once a new token exists (``mcp_trio._http_client``, "GET stream")."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from mcp_trio import fetch_authorization_redirect, open_client

from .oauth_support import oauth
from .test_http_support import App, start_server
from .test_oauth import Fake


class _StreamingFake(Fake):
    """The fake, offering a GET stream that ends at once (the server's ``retry`` 1 s);
    it counts the GETs, and those it answered with a stream."""

    gets: int = 0
    streams: int = 0

    async def route(self, method: str, target: str, headers: Any, body: bytes) -> Any:
        if method == "GET" and target.startswith("/mcp"):
            self.gets += 1
            if headers.get("authorization", "")[7:] not in self.tokens:
                where = f"{self.base}/.well-known/oauth-protected-resource/mcp"
                return 401, [("www-authenticate", f'Bearer resource_metadata="{where}"')], b""
            self.streams += 1
            return 200, [("content-type", "text/event-stream")], b"retry: 1000\n\n"
        return await super().route(method, target, headers, body)


async def _start(nursery: trio.Nursery, **knobs: Any) -> _StreamingFake:
    upstream = await start_server(nursery, App())
    fake = _StreamingFake(upstream=upstream.url, **knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    return fake


async def _pass(clock: trio.testing.MockClock, count: int, step: float) -> None:
    """Let ``count`` steps of ``step`` seconds pass (real sockets)."""
    for _ in range(count):
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(step)
        await trio.sleep(0.05)
    await trio.testing.wait_all_tasks_blocked()


async def test_a_refused_get_stream_asks_nobody_and_waits_for_the_users_token(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The token lapses while the user is away (no refresh token): the GET stream's
    # re-open is refused. Nobody is asked, the session stays, the stream waits without
    # polling; the user's next request asks the user, and its token re-opens the
    # stream. Mutations: the GET stream may authorize (_exchange) -> a prompt at each
    # re-open; its 401 counted as a failed re-open -> the session closes ("cannot be
    # opened again"); no wait for a new token -> a GET every re-open, or a busy loop.
    fake = await _start(nursery)
    prompts = 0

    async def on_authorize(url: str) -> str:
        nonlocal prompts
        prompts += 1
        return await fetch_authorization_redirect(url)

    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=on_authorize)
        ) as client:
            await client.list_tools()
            assert prompts == 1 and fake.streams >= 1
            fake.tokens.clear()  # the token lapses while the user is away
            await _pass(clock, 20, 5)  # 100 s, no request of the user's
            assert prompts == 1
            assert not client.session.closed, client.session.close_reason
            gets = fake.gets
            await _pass(clock, 20, 5)
            assert fake.gets == gets  # (waiting for a token, not re-trying)
            streams = fake.streams
            await client.list_tools()  # the user's request: the user is asked
            assert prompts == 2
            await _pass(clock, 2, 1)
            assert fake.streams > streams  # the new token opened the stream again
            assert not client.session.closed, client.session.close_reason


async def test_a_get_stream_refused_overnight_asks_nobody_at_each_authorize_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Half an hour of a lapsed token with nobody there: no prompt at all (before, one
    # at each re-open, each left to authorize_timeout), and the session stays.
    # Mutation: the GET stream may authorize -> prompts, the session closed.
    fake = await _start(nursery)
    prompts = 0

    async def on_authorize(url: str) -> str:
        nonlocal prompts
        prompts += 1
        if prompts > 1:
            await trio.sleep_forever()  # the user is asleep
        return await fetch_authorization_redirect(url)

    with trio.fail_after(5000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=on_authorize)
        ) as client:
            await client.list_tools()
            fake.tokens.clear()
            await _pass(clock, 12, 150)
            assert prompts == 1
            assert not client.session.closed, client.session.close_reason


async def test_a_refused_get_stream_reopens_with_the_shared_refresh(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # With a refresh token, the refusal is met by the shared refresh (no user), and
    # the stream opens again with its token. Mutation: the 401 waits for a token
    # without the refresh being asked for -> no new stream.
    fake = await _start(nursery, refresh_tokens=True)
    prompts = 0

    async def on_authorize(url: str) -> str:
        nonlocal prompts
        prompts += 1
        return await fetch_authorization_redirect(url)

    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=on_authorize)
        ) as client:
            await client.list_tools()
            fake.tokens.clear()
            streams = fake.streams
            await _pass(clock, 10, 1)
            assert fake.streams > streams
            assert prompts == 1
            assert not client.session.closed, client.session.close_reason

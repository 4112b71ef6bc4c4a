"""The legacy GET stream with OAuth: a background stream the user did not ask for, so a
``401`` to its (re)open never starts an authorization (no prompt, no browser). It waits
for the shared refresh, or for the next token a flow of the user's own requests brings,
and does not count as a failed re-open meanwhile (the session stays); the stream opens
again once a new token exists (``mcp_trio._http_client``, "GET stream")."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcp_trio import open_client

from .oauth_support import User, let_pass, oauth
from .test_oauth import Fake, start_fake_of


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


async def test_a_refused_get_stream_asks_nobody_and_waits_for_the_users_token(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The token lapses while the user is away (no refresh token): the GET stream's
    # re-open is refused. Nobody is asked, the session stays, the stream waits without
    # polling; the user's next request asks the user, and its token re-opens the
    # stream. Mutations: the GET stream may authorize (_exchange) -> a prompt at each
    # re-open; its 401 counted as a failed re-open -> the session closes ("cannot be
    # opened again"); no wait for a new token -> a GET every re-open, or a busy loop.
    fake = await start_fake_of(nursery, _StreamingFake)
    user = User()

    with trio.fail_after(1000):
        async with open_client(fake.url, era="legacy", auth=oauth(on_authorize=user)) as client:
            await client.list_tools()
            assert user.prompts == 1 and fake.streams >= 1
            fake.tokens.clear()  # the token lapses while the user is away
            await let_pass(clock, 20, 5)  # 100 s, no request of the user's
            assert user.prompts == 1
            assert not client.session.closed, client.session.close_reason
            gets = fake.gets
            await let_pass(clock, 20, 5)
            assert fake.gets == gets  # (waiting for a token, not re-trying)
            streams = fake.streams
            await client.list_tools()  # the user's request: the user is asked
            assert user.prompts == 2
            await let_pass(clock, 2, 1)
            assert fake.streams > streams  # the new token opened the stream again
            assert not client.session.closed, client.session.close_reason


async def test_a_get_stream_refused_overnight_asks_nobody_at_each_authorize_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Half an hour of a lapsed token with nobody there: no prompt at all (before, one
    # at each re-open, each left to authorize_timeout), and the session stays.
    # Mutation: the GET stream may authorize -> prompts, the session closed.
    fake = await start_fake_of(nursery, _StreamingFake)
    user = User(answers=1)  # then asleep

    with trio.fail_after(5000):
        async with open_client(fake.url, era="legacy", auth=oauth(on_authorize=user)) as client:
            await client.list_tools()
            fake.tokens.clear()
            await let_pass(clock, 12, 150)
            assert user.prompts == 1
            assert not client.session.closed, client.session.close_reason


async def test_a_refused_get_stream_reopens_with_the_shared_refresh(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # With a refresh token, the refusal is met by the shared refresh (no user), and
    # the stream opens again with its token. Mutation: the 401 waits for a token
    # without the refresh being asked for -> no new stream.
    fake = await start_fake_of(nursery, _StreamingFake, refresh_tokens=True)
    user = User()

    with trio.fail_after(1000):
        async with open_client(fake.url, era="legacy", auth=oauth(on_authorize=user)) as client:
            await client.list_tools()
            fake.tokens.clear()
            streams = fake.streams
            await let_pass(clock, 10, 1)
            assert fake.streams > streams
            assert user.prompts == 1
            assert not client.session.closed, client.session.close_reason

"""Keep-alive over HTTP with OAuth: a ping never asks the user to authorize (a ``401``
answers it: the server is there), nor starts any authorization; at most it waits for a
refresh, and that wait is ours, not the server's silence. One authorization at a time:
the user's second request waits for the first's, pings meanwhile ask nobody. A ping
refused and held for a refresh was never processed by the server, so its timeout sends
no ``notifications/cancelled`` (``_Stream.out`` is taken back on a refusal; see
``mcp_trio._http_client``, "Cancellation")."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio import SessionConfig, open_client
from mcp_trio._http_client import _only_pings

from ..core.test_http_client import legacy_client, rpc
from .oauth_support import User, let_pass, oauth
from .test_oauth import Fake, start_fake_of


class _RecordingFake(Fake):
    """The fake MCP + authorization server, noting the method of each POST to /mcp (and
    the token it carried, in ``carried``) and the refreshes asked for (which hang while
    ``hang_refresh``). With ``refuse_pings``, every ping is refused with ``401``, the
    ``hold_ping``-th one (counting from 1) only once ``release`` is set (``held`` is set
    when it arrives)."""

    posted: list[str]
    carried: list[tuple[str, str]]
    hang_refresh = False
    refreshes = 0
    refuse_pings = False
    hold_ping = 0
    held: trio.Event
    release: trio.Event

    async def route(
        self, method: str, target: str, headers: Any, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method == "POST" and target.startswith("/mcp") and body:
            posted = str(loads(body).get("method"))
            self.posted.append(posted)
            self.carried.append((posted, headers.get("authorization", "")[7:]))
            if posted == "ping" and self.refuse_pings:
                if self.posted.count("ping") == self.hold_ping:
                    self.held.set()
                    await self.release.wait()
                where = f"{self.base}/.well-known/oauth-protected-resource/mcp"
                return 401, [("www-authenticate", f'Bearer resource_metadata="{where}"')], b""
        if method == "POST" and b"grant_type=refresh_token" in body:
            self.refreshes += 1
            if self.hang_refresh:
                await trio.sleep_forever()  # (an authorization server that hangs)
        return await super().route(method, target, headers, body)


async def test_a_ping_refused_and_held_for_a_refresh_is_withdrawn_unannounced(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The token is refused; the authorization server takes its time to refresh it. The
    # ping waits for that refresh past its timeout: the wait was ours (the session
    # stays, the next ping an interval later), the server never had the ping (no
    # notifications/cancelled), and nobody is asked to authorize. Mutation: _Stream.out
    # left True on a 401 -> a notifications/cancelled POST at the ping's timeout; the
    # wait for the refresh not held (_holding) -> the session closes.
    fake = await _start(nursery, refresh_tokens=True)
    user = User()

    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=user), config=config
        ) as client:
            await client.list_tools()
            fake.tokens.clear()  # every token the client holds is refused from now on
            fake.hang_refresh = True
            fake.posted.clear()
            await _intervals(clock, 4)
            assert fake.refreshes  # (the ping started it)
            assert user.prompts == 1
            assert "ping" in fake.posted
            assert "notifications/cancelled" not in fake.posted, fake.posted
            assert not client.session.closed, client.session.close_reason


async def _start(nursery: trio.Nursery, **knobs: Any) -> _RecordingFake:
    fake = await start_fake_of(nursery, _RecordingFake, **knobs)
    fake.posted, fake.carried = [], []
    fake.held, fake.release = trio.Event(), trio.Event()
    return fake


async def _intervals(clock: trio.testing.MockClock, count: int, step: float = 5) -> None:
    """Let ``count`` keep-alive intervals of ``step`` seconds pass (real sockets)."""
    await let_pass(clock, count, step)


async def test_a_ping_refused_for_authorization_never_asks_the_user(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Nobody asked for the ping: a 401 answers its question (the server is there), and
    # the user is asked only for a request of theirs. Mutation: pings authorize as any
    # request (_exchange's may_authorize true for them) -> on_authorize once per
    # interval, the session's pings held meanwhile.
    fake = await _start(nursery)
    user = User()

    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=user), config=config
        ) as client:
            await client.list_tools()
            assert user.prompts == 1
            fake.tokens.clear()  # every token the client holds is refused from now on
            fake.posted.clear()
            heard = client.session._heard_at
            await _intervals(clock, 4)
            assert user.prompts == 1
            assert fake.posted.count("ping") >= 3  # one an interval, each refused
            assert client.session._heard_at > heard  # (a 401 is the server's words)
            assert not client.session.closed, client.session.close_reason
            await client.list_tools()  # the user's request: the user is asked
            assert user.prompts == 2


async def test_one_authorization_at_a_time_and_none_for_pings_while_the_user_is_away(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The user's request opens the browser; the user never comes back. A second request
    # of theirs waits for that authorization (no second prompt) and fails with it; pings
    # meanwhile, and after authorize_timeout ended it, ask nobody and keep the session.
    # Mutation: pings authorize -> a second prompt at the first ping after the timeout;
    # the flow's lock dropped -> a second prompt for the second request.
    fake = await _start(nursery)
    user = User(answers=1)  # then the user walks away

    config = SessionConfig(ping_interval=5, ping_timeout=5)
    failures: list[BaseException] = []

    async def call(client: Any) -> None:
        try:
            await client.list_tools()
        except Exception as exc:
            failures.append(exc)

    with trio.fail_after(2000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=user), config=config
        ) as client:
            await client.list_tools()
            fake.tokens.clear()
            fake.refresh.clear()
            async with trio.open_nursery() as calls:
                calls.start_soon(call, client)
                while user.prompts < 2:
                    await trio.sleep(0.01)
                calls.start_soon(call, client)
                await _intervals(clock, 6)  # pings while the browser is open
                assert user.prompts == 2
                assert not client.session.closed
                await _intervals(clock, 1, 300)  # authorize_timeout: the flow fails
            # (Both say why. Mutation: the flow's own TooSlowError shown as it is -> the
            # first one's reason is empty.)
            assert len(failures) == 2
            assert all("authorization failed: it took too long" in str(e) for e in failures)
            fake.posted.clear()
            await _intervals(clock, 4)
            assert user.prompts == 2
            assert "ping" in fake.posted
            assert not client.session.closed, client.session.close_reason


async def test_a_refresh_refused_before_a_ping_asks_nobody_and_the_401_answers_it(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The token has expired; the authorization server refuses to refresh it (the token
    # is dropped, as before any request). The ping then goes without a token and is
    # refused: that answers it (the session stays), and the user is not asked, here as
    # after any 401 to a ping. Mutation: pings authorize -> a prompt at the first ping.
    fake = await _start(nursery, refresh_tokens=True, expires_in=0)
    user = User()

    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_client(
            fake.url, era="legacy", auth=oauth(on_authorize=user), config=config
        ) as client:
            await client.list_tools()  # (refreshed before it: expires_in=0)
            refreshes = fake.refreshes
            fake.refresh.clear()  # every refresh is refused from now on
            fake.posted.clear()
            heard = client.session._heard_at
            await _intervals(clock, 3)
            assert fake.refreshes > refreshes
            assert user.prompts == 1
            assert "ping" in fake.posted
            assert client.session._heard_at > heard
            assert not client.session.closed, client.session.close_reason


async def test_a_ping_waits_for_a_due_refresh_before_it_is_sent(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # An expired token is refreshed before a ping as before any request (no user
    # needed): the ping goes with the new token, never with the expired one. Mutation:
    # pings treated as one-way messages before sending (refresh_soon, not ready) -> the
    # ping carries the token the request before it used.
    fake = await _start(nursery, refresh_tokens=True, expires_in=0)
    with trio.fail_after(1000):
        async with open_client(fake.url, era="legacy", auth=oauth()) as client:
            await client.list_tools()  # (a token refreshed before it: expires_in=0)
            refreshes = fake.refreshes
            (before,) = [token for method, token in fake.carried if method == "tools/list"]
            fake.carried.clear()
            await client.ping()
            assert fake.refreshes == refreshes + 1
            assert fake.carried[0][0] == "ping"
            assert fake.carried[0][1] != before  # (the refreshed token)
            assert fake.carried[0][1] in fake.tokens


async def test_a_pings_401_is_tried_again_exactly_once_after_a_refresh(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # The server refuses every ping. The first refusal waits for a refresh and the ping
    # goes once more with the new token; refused again, that answers it, even when the
    # new token has meanwhile proved good (a request of the user's took it). Mutations:
    # no second try -> one ping POST; no bound on the tries (``rounds`` ignored)
    # -> a second refresh and a third ping POST.
    fake = await _start(nursery, refresh_tokens=True)
    fake.hold_ping = 2
    outcome: list[BaseException | None] = []

    async def ping(client: Any) -> None:
        try:
            await client.ping()
        except Exception as exc:
            outcome.append(exc)
        else:
            outcome.append(None)
        fake.held.set()  # (tried only once: the test goes on, and fails)

    with trio.fail_after(1000):
        async with open_client(fake.url, era="legacy", auth=oauth()) as client:
            await client.list_tools()
            refreshes = fake.refreshes
            fake.refuse_pings = True
            fake.posted.clear()
            async with trio.open_nursery() as pinging:
                pinging.start_soon(ping, client)
                await fake.held.wait()  # the second try, with the refreshed token
                assert not outcome and fake.refreshes == refreshes + 1
                await client.list_tools()  # the new token serves the user's request
                fake.release.set()
            assert fake.posted.count("ping") == 2, fake.posted
            assert fake.refreshes == refreshes + 1
            assert len(outcome) == 1 and outcome[0] is not None  # (the 401: an error)
            assert not client.session.closed


def test_only_pings_means_every_request_is_a_ping() -> None:
    # Whether a POST may never authorize: all its requests pings (a batch of pings
    # too), not any (a ping batched with a request of the user's may authorize), and
    # never a message without requests (the GET stream, a notification), which have
    # their own rules. Mutations: any() for all() -> the mixed batch "only pings";
    # bool(methods) dropped -> the GET and the notification "only pings".
    client = legacy_client()
    assert _only_pings(client.post(rpc(1, "ping")))
    assert _only_pings(client.post(b"[" + rpc(1, "ping") + b"," + rpc(2, "ping") + b"]"))
    mixed = b"[" + rpc(1, "ping") + b"," + rpc(2, "tools/list") + b"]"
    assert not _only_pings(client.post(mixed))
    assert not _only_pings(client.post(rpc(1, "tools/list")))
    note = dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
    assert not _only_pings(client.post(note))
    assert not _only_pings(client.open_stream())

"""A new client of a server whose token its storage kept sends that token from its
first request: no ``401``, no discovery, no metadata fetched (it used to be refused
first, then discover, then find the token in the storage). Expired or revoked later,
the flow its ``401`` starts refreshes it with its refresh token; without one, or
refused that too, it authorizes as before. The storage records where the token is by
the server's URL (``save_server`` / ``load_server``): :class:`~mcp_trio.InMemoryOAuthStorage`
and :class:`~mcp_trio.FileOAuthStorage` do; a storage without them works as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_sansio import BearerChallenge, ClientCredentials, OAuthToken
from mcp_trio import FileOAuthStorage, InMemoryOAuthStorage, McpError, OAuthStorage, open_client

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT
from .test_oauth_e2e import ERAS, Era, start, start_refreshing


class _FourMethods:
    """A storage with the four required methods only (an application's own)."""

    def __init__(self) -> None:
        self.inner = InMemoryOAuthStorage()

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        return await self.inner.load_client(issuer)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        await self.inner.save_client(issuer, client)

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        return await self.inner.load_token(resource, issuer)

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        await self.inner.save_token(resource, issuer, token)


def _storage(kind: str, tmp_path: Path) -> OAuthStorage:
    if kind == "file":
        return FileOAuthStorage(tmp_path / "tokens.json")
    return InMemoryOAuthStorage() if kind == "memory" else _FourMethods()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", ["memory", "file", "four-methods"])
async def test_a_new_client_sends_the_stored_token_from_its_first_request(
    nursery: trio.Nursery, tmp_path: Path, era: Era, kind: str
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])
    storage = _storage(kind, tmp_path)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth(storage=storage)) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
        (token,) = s.accepted[:1]
        s.posts.clear()
        before = len(s.asrv.requests)
        # A new OAuth (a new process, say) over the same storage.
        async with open_client(s.url, era=era, auth=oauth(storage=storage)) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    if kind == "four-methods":  # (as before: refused, discovery, then the stored token)
        assert s.posts[0] == ""
        assert len(s.asrv.requests) > before
    else:
        assert set(s.posts) == {token}  # the first POST carried it
        assert len(s.asrv.requests) == before  # nothing asked of the authorization server
    assert len(s.asrv.authorizations) == 1  # (the user was asked once)


async def test_a_stored_token_refused_is_replaced_by_authorizing(
    nursery: trio.Nursery,
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
        s.asrv.tokens.clear()  # (revoked)
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 2
    assert len(s.refused) == 1  # the stored token, once
    [(_, stored)] = storage.tokens.items()
    assert stored.access_token == s.accepted[-1]


async def test_an_expired_stored_token_is_not_sent(nursery: trio.Nursery) -> None:
    s = await start(nursery, prm_scopes=["mcp"], expires_in=60)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        auth: Any = oauth(storage=storage, clock=s.time)
        async with open_client(s.url, era="modern", auth=auth) as client:
            await client.call_tool("whoami", {})
        s.time.advance(120)
        s.posts.clear()
        async with open_client(
            s.url, era="modern", auth=oauth(storage=storage, clock=s.time)
        ) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert s.posts[0] == ""  # (not the expired one: the server would refuse it)
    assert len(s.asrv.authorizations) == 2


async def test_authorize_with_a_stored_token_asks_nobody_unless_it_is_refused(
    nursery: trio.Nursery,
) -> None:
    """``OAuth.authorize`` (the CLI's, before each run): the probe carries the stored
    token; taken, nothing more is done (it used to be refused, then discover); refused
    (revoked), the flow runs as before."""
    s = await start(nursery, prm_scopes=["mcp"])
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        await oauth(storage=storage).authorize(s.url)
        asked = len(s.asrv.requests)
        await oauth(storage=storage).authorize(s.url)
        assert len(s.asrv.requests) == asked  # (the probe took the stored token)
        assert len(s.asrv.authorizations) == 1
        s.asrv.tokens.clear()  # (revoked)
        await oauth(storage=storage).authorize(s.url)
    assert len(s.asrv.authorizations) == 2
    [(_, stored)] = storage.tokens.items()
    assert stored.access_token in s.asrv.tokens


# ------------------------------------------------------------------ refreshed, not asked again

WITH_REFRESH = "alice ['mcp', 'offline_access']"  # (what whoami says with start_refreshing)


@pytest.mark.parametrize("how", ["expired", "revoked"])
async def test_a_stored_token_lapsing_mid_session_is_refreshed(
    nursery: trio.Nursery, how: str
) -> None:
    """The token a new client sent from its first request (no metadata known then, to
    refresh it by) expires, or is revoked, later in the session: the flow that its
    ``401`` starts refreshes it with the refresh token stored with it; the user is not
    asked to authorize again (they were, when the token was stored as the first
    client ran)."""
    s = await start_refreshing(nursery, expires_in=60)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(
            s.url, era="modern", auth=oauth(storage=storage, clock=s.time)
        ) as client:
            await client.call_tool("whoami", {})
        async with open_client(
            s.url, era="modern", auth=oauth(storage=storage, clock=s.time)
        ) as client:
            await client.call_tool("whoami", {})  # (the stored token, from the first POST)
            if how == "expired":
                s.time.advance(120)
            else:
                s.asrv.tokens.clear()  # (its refresh token still good)
            assert (await client.call_tool("whoami", {})).text == WITH_REFRESH
            await client.call_tool("whoami", {})
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(s.asrv.authorizations) == 1
    [(_, stored)] = storage.tokens.items()
    assert stored.access_token == s.accepted[-1]  # (the refreshed one, kept for the next)


async def test_a_stored_token_whose_refresh_is_refused_is_replaced_by_authorizing(
    nursery: trio.Nursery,
) -> None:
    s = await start_refreshing(nursery)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
            s.asrv.tokens.clear()
            s.asrv.refresh.clear()  # (all revoked)
            assert (await client.call_tool("whoami", {})).text == WITH_REFRESH
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]
    assert len(s.asrv.authorizations) == 2


async def test_a_stored_token_refreshed_and_refused_again_fails_the_request(
    nursery: trio.Nursery,
) -> None:
    """Refreshed, the stored token counts as just issued, as a token refreshed in the
    session that obtained it: refused too (the server refuses what its authorization
    server issues), the request fails; no second refresh, no user asked."""
    s = await start_refreshing(nursery)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
            s.asrv.tokens.clear()
            s.asrv.audience = "https://other.example/mcp"  # (every token is refused now)
            for _ in range(2):
                with pytest.raises(McpError, match="just issued"):
                    await client.call_tool("whoami", {})
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(s.asrv.authorizations) == 1


async def test_the_refresh_of_a_stored_token_is_made_as_the_client_stored_with_it(
    nursery: trio.Nursery,
) -> None:
    """A refresh token is bound to the client it was issued to (RFC 6749 section 6):
    the stored token's refresh goes as the client read with it, even if the storage
    holds another registration for that authorization server by then (another
    process registered anew, say)."""
    s = await start_refreshing(nursery, expires_in=60)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(
            s.url, era="modern", auth=oauth(storage=storage, clock=s.time)
        ) as client:
            await client.call_tool("whoami", {})
        [registered] = storage.clients.values()
        async with open_client(
            s.url, era="modern", auth=oauth(storage=storage, clock=s.time)
        ) as client:
            await client.call_tool("whoami", {})
            issuer = s.asrv.issuer
            storage.clients[issuer] = ClientCredentials(client_id="cid-other", issuer=issuer)
            s.time.advance(120)
            await client.call_tool("whoami", {})
    first, refresh = s.asrv.token_requests
    assert refresh["grant_type"] == "refresh_token"
    assert refresh["client_id"] == first["client_id"] == registered.client_id


# ------------------------------------------------------------------ the record, and races


class _Counting:
    """:class:`~mcp_trio.InMemoryOAuthStorage` that counts ``save_server`` calls and can
    hold the next ``load_token`` or ``load_client`` calls (one gate each, in order)
    until a test lets them go."""

    def __init__(self) -> None:
        self.inner = InMemoryOAuthStorage()
        self.servers_saved = 0
        self.token_gates: list[trio.Event] = []
        self.client_gates: list[trio.Event] = []
        self.held = trio.Event()  # set when a call is held at a gate

    async def _hold(self, gates: list[trio.Event]) -> None:
        if gates:
            gate = gates.pop(0)
            self.held.set()
            await gate.wait()

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        await self._hold(self.client_gates)
        return await self.inner.load_client(issuer)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        await self.inner.save_client(issuer, client)

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        await self._hold(self.token_gates)
        return await self.inner.load_token(resource, issuer)

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        await self.inner.save_token(resource, issuer, token)

    async def load_server(self, server_url: str) -> tuple[str, str] | None:
        return await self.inner.load_server(server_url)

    async def save_server(self, server_url: str, resource: str, issuer: str) -> None:
        self.servers_saved += 1
        await self.inner.save_server(server_url, resource, issuer)


async def test_the_server_entry_is_written_once_while_it_stays_the_same(
    nursery: trio.Nursery,
) -> None:
    """``save_server`` is called when a flow's token is somewhere the storage does
    not record yet for the server, not after every flow (a file storage rewrites its
    file each time): a token authorized again, or refreshed, is where it was."""
    s = await start_refreshing(nursery)
    storage = _Counting()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
            s.asrv.tokens.clear()
            s.asrv.refresh.clear()  # (revoked: the user authorizes again)
            await client.call_tool("whoami", {})
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})  # (the stored token)
            s.asrv.tokens.clear()  # (revoked: refreshed by a flow)
            await client.call_tool("whoami", {})
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants.count("authorization_code") == 2 and grants[-1] == "refresh_token"
    assert storage.servers_saved == 1


async def test_a_flow_that_ends_while_the_stored_token_is_read_keeps_its_token(
    nursery: trio.Nursery,
) -> None:
    """A flow (:meth:`OAuth.authorize` over a WebSocket's shared Authorizer, say) that
    began before the first ``ready()`` and put its token in use while ``ready()`` read
    the storage: the token read, older, does not replace the flow's."""
    s = await start(nursery, prm_scopes=["mcp"])
    storage = _Counting()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.call_tool("whoami", {})
        [old] = set(s.accepted)
        authorizer = oauth(storage=storage).bind(s.url)
        flow_gate, read_gate = trio.Event(), trio.Event()
        storage.token_gates.append(flow_gate)  # the flow's look in the storage
        storage.client_gates.append(read_gate)  # ready()'s, after it read the token
        async with trio.open_nursery() as tasks:
            tasks.start_soon(authorizer.challenged, 401, BearerChallenge(), None)
            await storage.held.wait()
            storage.held = trio.Event()
            tasks.start_soon(authorizer.ready)
            await storage.held.wait()  # (ready() read the old token, and waits)
            storage.inner.tokens.clear()  # (forgotten: the flow authorizes anew)
            flow_gate.set()
            await authorizer.new_token(0)
            new = authorizer.authorization()
            read_gate.set()
    assert new is not None and new != f"Bearer {old}".encode()
    assert authorizer.authorization() == new
    assert len(s.asrv.authorizations) == 2

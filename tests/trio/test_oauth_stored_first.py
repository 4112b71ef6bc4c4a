"""A new client of a server whose token its storage kept sends that token from its
first request: no ``401``, no discovery, no metadata fetched (it used to be refused
first, then discover, then find the token in the storage). Refused (revoked), it
authorizes as before. The storage records where the token is by the server's URL
(``save_server`` / ``load_server``): :class:`~mcp_trio.InMemoryOAuthStorage` and
:class:`~mcp_trio.FileOAuthStorage` do; a storage without them works as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_sansio import ClientCredentials, OAuthToken
from mcp_trio import FileOAuthStorage, InMemoryOAuthStorage, OAuthStorage, open_client

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT
from .test_oauth_e2e import ERAS, Era, start


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

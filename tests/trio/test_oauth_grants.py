"""Workload identity federation and enterprise-managed authorization end to end: the
fake MCP server and authorization server of ``test_oauth.py`` (which takes the
jwt-bearer grant), a fake identity provider (``oauth_support.FakeIdP``), all on
127.0.0.1, and the real client with ``auth=OAuth(workload_identity=|enterprise=)``."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest
import trio

from mcp_sansio import OAuthToken
from mcp_sansio._json import dumps
from mcp_trio import (
    ClientCredentials,
    EnterpriseAuthorization,
    InMemoryOAuthStorage,
    McpError,
    OAuth,
    OAuthError,
    WorkloadIdentity,
    open_client,
)
from mcp_trio._oauth_grants import _MAX_REFUSALS, Refusals

from .oauth_support import FakeIdP, oauth, start_idp
from .test_http_support import IO_TIMEOUT
from .test_oauth import Fake, list_and_call, start_fake

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
WORKLOAD_JWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2ln"


def counting(value: str, *, is_async: bool) -> tuple[Any, list[int]]:
    """A sync or async callable returning ``value``, and the list of its calls."""
    calls: list[int] = []

    def sync() -> str:
        calls.append(1)
        return value

    async def coro() -> str:
        calls.append(1)
        return value

    return (coro if is_async else sync), calls


# ------------------------------------------------------------------ workload identity


@pytest.mark.parametrize("source", ["string", "sync", "async"])
async def test_the_workload_jwt_is_the_jwt_bearer_assertion(
    nursery: trio.Nursery, source: str
) -> None:
    fake = await start_fake(nursery, challenge_scope="read", assertions={WORKLOAD_JWT})
    calls: list[int] = []
    assertion: Any = WORKLOAD_JWT
    if source != "string":
        assertion, calls = counting(WORKLOAD_JWT, is_async=source == "async")
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=assertion, issuer=fake.issuer))
    assert await list_and_call(fake, auth) == "hi"
    [request] = fake.token_requests
    # RFC 7523 section 2.1, SEP-1933: no client registration, no client_id.
    assert request == {
        "grant_type": JWT_BEARER,
        "assertion": WORKLOAD_JWT,
        "resource": fake.url,
        "scope": "read",
    }
    assert fake.token_auth == [None]
    assert not fake.registrations and not fake.authorizations
    assert calls == ([] if source == "string" else [1])


async def test_a_callable_is_asked_for_a_fresh_jwt_at_each_authorization(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery)
    jwts = iter(["jwt.one.a", "jwt.two.b"])
    fake.assertions = {"jwt.one.a", "jwt.two.b"}
    auth = OAuth(
        workload_identity=WorkloadIdentity(assertion=lambda: next(jwts), issuer=fake.issuer)
    )
    with trio.fail_after(IO_TIMEOUT):
        async with open_client_to(fake, auth) as client:
            await client.list_tools()
            fake.tokens.clear()  # the server forgets the token: a 401, a new authorization
            await client.list_tools()
    assert [r["assertion"] for r in fake.token_requests] == ["jwt.one.a", "jwt.two.b"]


def open_client_to(fake: Fake, auth: OAuth) -> Any:
    return open_client(fake.url, era="modern", auth=auth)


@pytest.mark.parametrize("error", ["invalid_grant", "invalid_scope", "unauthorized_client"])
async def test_a_refused_jwt_is_reported_once_never_retried_nor_another_grant(
    nursery: trio.Nursery, error: str
) -> None:
    fake = await start_fake(nursery, grant_error=error)
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError) as info:
        await auth.authorize(fake.url)
    assert info.value.error == error
    assert "not retried" in str(info.value) and error in str(info.value)
    assert WORKLOAD_JWT not in str(info.value)
    assert [r["grant_type"] for r in fake.token_requests] == [JWT_BEARER]
    assert not fake.registrations and not fake.authorizations
    # Through a client, mid-session: the request fails with the reason, no other grant
    # type is tried, and the session goes on.
    fake.token_requests.clear()
    fake.open = True
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT):
        async with open_client_to(fake, auth) as client:
            fake.open = False  # from now on a token is needed
            with pytest.raises(McpError, match=f"not retried.*{error}"):
                await client.list_tools()
            assert [r["grant_type"] for r in fake.token_requests] == [JWT_BEARER]
            fake.open = True
            assert await client.list_tools()  # the same session


async def test_the_workload_jwt_goes_only_to_its_own_authorization_server(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, assertions={WORKLOAD_JWT})
    calls: list[int] = []

    def source() -> str:
        calls.append(1)
        return WORKLOAD_JWT

    identity = WorkloadIdentity(assertion=source, issuer="https://auth.example.com")
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="not sent"):
        await OAuth(workload_identity=identity).authorize(fake.url)
    assert not fake.token_requests and not calls


async def test_a_workload_with_a_client_authenticates_and_keeps_its_refresh_token(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, assertions={WORKLOAD_JWT}, refresh_tokens=True)
    storage = InMemoryOAuthStorage()
    client = ClientCredentials(client_id="wl", client_secret="s3", issuer=fake.issuer)
    identity = WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer)
    with trio.fail_after(IO_TIMEOUT):
        await OAuth(workload_identity=identity, client=client, storage=storage).authorize(fake.url)
    [request] = fake.token_requests
    assert request["client_id"] == "wl" and request["client_secret"] == "s3"  # (post only)
    [token] = storage.tokens.values()
    assert token.refresh_token is not None
    # Without a client, nothing could authenticate a refresh: the token has none.
    fake.token_requests.clear()
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        await OAuth(workload_identity=identity, storage=storage).authorize(fake.url)
    [token] = storage.tokens.values()
    assert token.refresh_token is None
    assert "client_id" not in fake.token_requests[0]


@pytest.mark.parametrize("answer", [b"", 42, "has space"])
async def test_a_source_that_returns_no_jwt_fails_the_authorization(
    nursery: trio.Nursery, answer: Any
) -> None:
    fake = await start_fake(nursery, assertions={WORKLOAD_JWT})
    identity = WorkloadIdentity(assertion=lambda: answer, issuer=fake.issuer)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="JWT"):
        await OAuth(workload_identity=identity).authorize(fake.url)
    assert not fake.token_requests


async def test_a_source_that_raises_fails_the_authorization_not_the_session(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery)

    async def broken() -> str:
        raise RuntimeError("the token file is gone")

    fake.open = True
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=broken, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT):
        async with open_client_to(fake, auth) as client:
            fake.open = False  # from now on a token is needed
            with pytest.raises(
                McpError, match=r"RuntimeError raised by the workload JWT callable \("
            ) as info:
                await client.list_tools()
            assert "gone" not in str(info.value)  # (its type only: the text may be secret)
            fake.open = True
            assert await client.list_tools()  # the same session
    assert not fake.token_requests


# ------------------------------------------------------------------ enterprise


async def enterprise_setup(
    nursery: trio.Nursery, **idp_knobs: Any
) -> tuple[Fake, FakeIdP, ClientCredentials]:
    fake = await start_fake(nursery, challenge_scope="chat.read")
    idp = await start_idp(nursery, fake.assertions, **idp_knobs)
    client = ClientCredentials(
        client_id="mcp-client", client_secret="as-secret", issuer=fake.issuer
    )
    return fake, idp, client


def enterprise(
    idp: FakeIdP, id_token: Any = "id-token-1", **kwargs: Any
) -> EnterpriseAuthorization:
    return EnterpriseAuthorization(
        id_token=id_token,
        idp_issuer=idp.issuer,
        idp_client=ClientCredentials(
            client_id="idp-client", client_secret="idp-secret", issuer=idp.issuer
        ),
        **kwargs,
    )


async def test_the_id_token_is_exchanged_for_an_id_jag_then_a_token(
    nursery: trio.Nursery,
) -> None:
    fake, idp, client = await enterprise_setup(nursery)
    id_token, calls = counting("id-token-1", is_async=True)
    auth = OAuth(client=client, enterprise=enterprise(idp, id_token))
    assert await list_and_call(fake, auth) == "hi"
    # The IdP's metadata: RFC 8414 first, then OpenID Connect (it has only that).
    assert idp.paths[:2] == [
        "GET /.well-known/oauth-authorization-server/tenant",
        "GET /.well-known/openid-configuration/tenant",
    ]
    [exchange] = idp.exchanges
    assert exchange == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "audience": fake.issuer,
        "resource": fake.url,
        "scope": "chat.read",
        "subject_token": "id-token-1",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "client_id": "idp-client",  # client_secret_post, as the IdP's metadata says
        "client_secret": "idp-secret",
    }
    [request] = fake.token_requests
    assert request == {
        "grant_type": JWT_BEARER,
        "assertion": f"jag-1.{fake.issuer}.{fake.url}",
        "resource": fake.url,
        "scope": "chat.read",
        # The client authenticates as the AS's metadata asks (client_secret_post).
        "client_id": "mcp-client",
        "client_secret": "as-secret",
    }
    assert fake.token_auth == [None]
    assert calls == [1]
    assert not fake.registrations and not fake.authorizations


async def test_the_as_grant_authenticates_the_client_with_basic_when_asked(
    nursery: trio.Nursery,
) -> None:
    fake, idp, _ = await enterprise_setup(nursery)
    client = ClientCredentials(
        client_id="mcp-client",
        client_secret="as-secret",
        issuer=fake.issuer,
        token_endpoint_auth_method="client_secret_basic",
    )
    auth = OAuth(
        client=client,
        enterprise=enterprise(idp, idp_token_endpoint=f"{idp.issuer}/token"),
    )
    assert await list_and_call(fake, auth) == "hi"
    assert fake.token_auth == ["Basic " + base64.b64encode(b"mcp-client:as-secret").decode()]
    assert "client_secret" not in fake.token_requests[0]
    assert idp.paths == ["POST /tenant/token"]  # the configured endpoint: no discovery


@pytest.mark.parametrize(
    ("knobs", "match", "error"),
    [
        ({"error": "invalid_grant"}, "identity provider refused.*invalid_grant", "invalid_grant"),
        ({"error": "access_denied"}, "access_denied", "access_denied"),
        (
            {"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"},
            "issued_token_type",
            None,
        ),
        ({"id_tokens": set()}, "invalid_grant", "invalid_grant"),
    ],
)
async def test_an_idp_refusal_is_reported_and_nothing_goes_to_the_as(
    nursery: trio.Nursery, knobs: dict[str, Any], match: str, error: str | None
) -> None:
    fake, idp, client = await enterprise_setup(nursery, **knobs)
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match=match) as info:
        await auth.authorize(fake.url)
    assert info.value.error == error
    assert len(idp.exchanges) == 1 and not fake.token_requests


async def test_an_as_refusing_the_id_jag_is_reported_once(nursery: trio.Nursery) -> None:
    fake, idp, client = await enterprise_setup(nursery)
    fake.grant_error = "invalid_grant"
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="ID-JAG") as info:
        await auth.authorize(fake.url)
    assert info.value.error == "invalid_grant"
    assert len(idp.exchanges) == 1
    assert [r["grant_type"] for r in fake.token_requests] == [JWT_BEARER]


async def test_an_idp_answer_over_the_size_bound_is_refused(nursery: trio.Nursery) -> None:
    fake, idp, client = await enterprise_setup(nursery, padding=8192)
    auth = OAuth(client=client, enterprise=enterprise(idp), max_response_size=4096)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="over 4096 bytes"):
        await auth.authorize(fake.url)
    assert not fake.token_requests


async def test_a_hanging_idp_times_out(nursery: trio.Nursery, autojump_clock: Any) -> None:
    fake, idp, client = await enterprise_setup(nursery, hang=True)
    auth = OAuth(client=client, enterprise=enterprise(idp), timeout=5)
    with trio.fail_after(60), pytest.raises(trio.TooSlowError):
        await auth.authorize(fake.url)
    assert len(idp.exchanges) == 1 and not fake.token_requests


@pytest.mark.parametrize(
    "endpoint", ["http://idp.example.com/token", "ftp://127.0.0.1/token", "https://idp/t#x"]
)
async def test_an_idp_endpoint_that_may_not_carry_oauth_traffic_is_refused(
    nursery: trio.Nursery, endpoint: str
) -> None:
    fake, idp, client = await enterprise_setup(nursery)
    calls: list[int] = []

    def id_token() -> str:
        calls.append(1)
        return "id-token-1"

    auth = OAuth(client=client, enterprise=enterprise(idp, id_token, idp_token_endpoint=endpoint))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="token endpoint"):
        await auth.authorize(fake.url)
    assert not calls and not idp.exchanges


def test_the_grant_options_are_checked() -> None:
    identity = WorkloadIdentity(assertion="a.b.c", issuer="https://auth.example.com")
    client = ClientCredentials(client_id="c")
    idp_client = ClientCredentials(client_id="i")
    ema = EnterpriseAuthorization(
        id_token="t", idp_issuer="https://idp.example.com", idp_client=idp_client
    )

    async def never(url: str) -> str:
        raise AssertionError

    with pytest.raises(ValueError, match="at most one"):
        OAuth(workload_identity=identity, enterprise=ema, client=client)
    with pytest.raises(ValueError, match="at most one"):
        OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=never, workload_identity=identity)
    with pytest.raises(ValueError, match="enterprise needs client= or client_metadata_url="):
        OAuth(enterprise=ema)
    # A Client ID Metadata Document is a stable client_id at the AS too (the ID-JAG draft).
    OAuth(enterprise=ema, client_metadata_url="https://app.example.com/client.json")
    with pytest.raises(ValueError, match="not to the workload's authorization server"):
        OAuth(
            workload_identity=identity,
            client=ClientCredentials(client_id="c", client_secret="s", issuer="https://b.example"),
        )
    OAuth(
        workload_identity=identity, client=ClientCredentials(client_id="c", issuer=identity.issuer)
    )
    nothings: list[Any] = [None, "", 42]
    for nothing in nothings:
        with pytest.raises(ValueError, match="assertion must be a non-empty str or a callable"):
            WorkloadIdentity(assertion=nothing, issuer="https://auth.example.com")
        with pytest.raises(ValueError, match="id_token must be a non-empty str or a callable"):
            EnterpriseAuthorization(
                id_token=nothing, idp_issuer="https://idp.example.com", idp_client=idp_client
            )
    with pytest.raises(ValueError, match="bound to"):
        EnterpriseAuthorization(
            id_token="t",
            idp_issuer="https://idp.example.com",
            idp_client=ClientCredentials(client_id="i", client_secret="s", issuer="https://x"),
        )
    OAuth(workload_identity=identity)  # no client needed
    OAuth(enterprise=ema, client=client)
    assert "a.b.c" not in repr(identity) and "'t'" not in repr(ema)


# ------------------------------------------------------------------ review findings


async def test_a_workload_without_a_client_asks_for_no_refresh_token(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(
        nursery,
        challenge_scope="read",
        scopes_supported=["read", "offline_access"],
        refresh_tokens=True,
        assertions={WORKLOAD_JWT},
    )
    identity = WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer)
    with trio.fail_after(IO_TIMEOUT):
        await OAuth(workload_identity=identity).authorize(fake.url)
    # It could not use one: no client identity to refresh with.
    assert [r["scope"] for r in fake.token_requests] == ["read"]
    # With a client it could: asked for.
    fake.token_requests.clear()
    client = ClientCredentials(client_id="wl", client_secret="s3", issuer=fake.issuer)
    with trio.fail_after(IO_TIMEOUT):
        await OAuth(workload_identity=identity, client=client).authorize(fake.url)
    assert [r["scope"] for r in fake.token_requests] == ["read offline_access"]


async def test_enterprise_asks_the_as_not_the_idp_for_offline_access(
    nursery: trio.Nursery,
) -> None:
    fake, idp, client = await enterprise_setup(nursery)
    fake.scopes_supported = ["chat.read", "offline_access"]
    with trio.fail_after(IO_TIMEOUT):
        await OAuth(client=client, enterprise=enterprise(idp)).authorize(fake.url)
    [exchange] = idp.exchanges
    assert exchange["scope"] == "chat.read"  # scopes at the MCP server
    [request] = fake.token_requests
    assert request["scope"] == "chat.read offline_access"


@pytest.mark.parametrize("expired", [True, False])
async def test_a_workload_without_a_client_never_registers_nor_refreshes(
    nursery: trio.Nursery, expired: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A stored token with a refresh token (a storage shared with another
    # configuration): a workload without a client neither refreshes it (it would need a
    # client, and registered one) nor, taking it while it lasts, refreshes it later.
    now = [1000.0]
    fake = await start_fake(
        nursery, challenge_scope="read", refresh_tokens=True, assertions={WORKLOAD_JWT}
    )
    fake.refresh["ref-x"] = {"read"}
    fake.tokens["old"] = {"read"}
    storage = InMemoryOAuthStorage()
    stored = OAuthToken(
        access_token="old",
        issued_at=0.0,
        expires_at=10.0 if expired else 2000.0,
        refresh_token="ref-x",
        scope="read",
    )
    await storage.save_token(fake.url, fake.issuer, stored)
    auth = OAuth(
        workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer),
        storage=storage,
        clock=lambda: now[0],
    )
    with caplog.at_level(logging.DEBUG, "mcp_trio"), trio.fail_after(IO_TIMEOUT):
        async with open_client_to(fake, auth) as client:
            now[0] = 5000.0  # (the stored token, if taken, has expired)
            fake.tokens.pop("old")
            await client.list_tools()
    assert not fake.registrations
    assert [r["grant_type"] for r in fake.token_requests] == [JWT_BEARER]
    assert not [r for r in caplog.records if "refresh" in r.getMessage()]  # not even tried
    assert await storage.load_token(fake.url, fake.issuer) != stored  # (replaced)


async def test_a_refused_jwt_is_not_presented_again(nursery: trio.Nursery) -> None:
    # Each request refused with 401 starts an authorization; a static JWT the AS
    # refused would be presented at each (the workload identity extension: no
    # retries). The refusal is remembered: the request fails at once, no request made.
    fake = await start_fake(nursery, grant_error="invalid_grant", open=True)
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer))
    failures: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_client_to(fake, auth) as client:
            fake.open = False
            for _ in range(3):
                with pytest.raises(McpError) as info:
                    await client.list_tools()
                failures.append(str(info.value))
        # Another client of that OAuth too.
        with pytest.raises(OAuthError, match="not presented again") as refused:
            await auth.authorize(fake.url)
    assert refused.value.error == "invalid_grant"
    assert len(fake.token_requests) == 1
    assert "not retried" in failures[0]
    assert all("invalid_grant) and is not presented again" in f for f in failures[1:])


async def test_a_callable_returning_the_refused_jwt_fails_at_once_a_new_one_is_sent(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery)
    jwts = iter(["jwt.one.a", "jwt.one.a", "jwt.two.b"])
    fake.assertions = {"jwt.two.b"}
    auth = OAuth(
        workload_identity=WorkloadIdentity(assertion=lambda: next(jwts), issuer=fake.issuer)
    )
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        with pytest.raises(OAuthError, match="not presented again"):
            await auth.authorize(fake.url)  # the same one again: no request
        await auth.authorize(fake.url)  # a new one
    assert [r["assertion"] for r in fake.token_requests] == ["jwt.one.a", "jwt.two.b"]


async def test_a_refusal_that_may_not_stand_lets_the_jwt_be_sent_again(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, grant_error="temporarily_unavailable")
    fake.assertions = {WORKLOAD_JWT}
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="temporarily_unavailable"):
            await auth.authorize(fake.url)
        fake.grant_error = None
        await auth.authorize(fake.url)
    assert len(fake.token_requests) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [(429, "rate_limit_exceeded"), (503, "service_unavailable"), (500, "invalid_request")],
)
async def test_an_error_code_with_a_status_that_may_pass_lets_the_jwt_be_sent_again(
    nursery: trio.Nursery, status: int, error: str
) -> None:
    # RFC 6749 section 5.2: a refusal of the request is a 400 (401 for invalid_client);
    # a 429 or 5xx says nothing of the JWT, whatever error code it carries.
    fake = await start_fake(nursery, grant_error=error, grant_status=status)
    fake.assertions = {WORKLOAD_JWT}
    auth = OAuth(workload_identity=WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match=f"status {status}, {error}") as info:
            await auth.authorize(fake.url)
        assert info.value.error == error
        fake.grant_error = None
        await auth.authorize(fake.url)
    assert len(fake.token_requests) == 2


async def test_an_idp_error_with_a_status_that_may_pass_lets_the_id_token_be_sent_again(
    nursery: trio.Nursery,
) -> None:
    fake, idp, client = await enterprise_setup(nursery, error="invalid_request", error_status=503)
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="status 503, invalid_request"):
            await auth.authorize(fake.url)
        idp.error = None
        await auth.authorize(fake.url)
    assert len(idp.exchanges) == 2 and len(fake.token_requests) == 1


def test_refusals_keep_the_last_eight_of_each_kind() -> None:
    # invalid_scope covers one resource and scope: refusals for several servers (one
    # OAuth shared by clients of several) are each kept, up to the bound.
    refusals = Refusals()
    what = "workload JWT"
    scoped = OAuthError("refused", error="invalid_scope")
    servers = [f"https://mcp{i}.example.com/mcp" for i in range(_MAX_REFUSALS + 1)]

    def held_back(resource: str, what: str = what) -> bool:
        try:
            refusals.check(what, WORKLOAD_JWT, resource, "read", 0.0)
        except OAuthError as exc:
            assert exc.error == "invalid_scope"
            return True
        return False

    for resource in servers[:_MAX_REFUSALS]:
        refusals.note(what, scoped, 400, WORKLOAD_JWT, resource, "read", 0.0)
    assert all(held_back(r) for r in servers[:_MAX_REFUSALS])  # (each met again, in order)
    assert not held_back(servers[0], "ID token")  # (another kind: its own)
    assert held_back(servers[0])  # met again: now the most recent
    refusals.note(what, scoped, 400, WORKLOAD_JWT, servers[-1], "read", 0.0)  # one past the bound
    assert [held_back(r) for r in servers] == [True, False, *[True] * (_MAX_REFUSALS - 1)]
    # A refusal noted again does not take a second place.
    refusals.note(what, scoped, 400, WORKLOAD_JWT, servers[-1], "read", 0.0)
    assert [held_back(r) for r in servers] == [True, False, *[True] * (_MAX_REFUSALS - 1)]


async def test_an_id_token_the_idp_refused_is_not_presented_again(nursery: trio.Nursery) -> None:
    fake, idp, client = await enterprise_setup(nursery, id_tokens=set())
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        with pytest.raises(OAuthError, match=r"ID token was refused.*not presented again"):
            await auth.authorize(fake.url)
    assert len(idp.exchanges) == 1 and not fake.token_requests


async def test_enterprise_with_a_client_id_metadata_document(nursery: trio.Nursery) -> None:
    fake, idp, _ = await enterprise_setup(nursery)
    fake.cimd = True
    document = "https://app.example.com/client.json"
    auth = OAuth(client_metadata_url=document, enterprise=enterprise(idp))
    assert await list_and_call(fake, auth) == "hi"
    [request] = fake.token_requests
    assert request["grant_type"] == JWT_BEARER and request["client_id"] == document
    assert "client_secret" not in request and not fake.registrations
    # An AS without them: refused before the IdP is asked, and never a registration.
    fake.cimd = False
    fake.token_requests.clear()
    auth = OAuth(client_metadata_url=document, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="Client ID Metadata"):
        await auth.authorize(fake.url)
    assert not fake.token_requests and not fake.registrations and len(idp.exchanges) == 1


async def test_the_configured_authorization_server_is_used_when_listed(
    nursery: trio.Nursery,
) -> None:
    # The protected-resource metadata lists two; which to use is the client's choice.
    # (plain http off loopback: refused before any connection, should it be chosen)
    fake = await start_fake(
        nursery, assertions={WORKLOAD_JWT}, other_servers=["http://other-as.example.com"]
    )
    identity = WorkloadIdentity(assertion=WORKLOAD_JWT, issuer=fake.issuer)
    assert await list_and_call(fake, OAuth(workload_identity=identity)) == "hi"
    # A client bound to an issuer (the client credentials grant here).
    bound = ClientCredentials(client_id="cc", client_secret="s", issuer=fake.issuer)
    assert await list_and_call(fake, OAuth(client=bound)) == "hi"
    assert [r["grant_type"] for r in fake.token_requests] == [JWT_BEARER, "client_credentials"]
    # Nothing configured: the first one, as before.
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="other-as"):
        await oauth(client=ClientCredentials(client_id="public")).authorize(fake.url)


async def test_an_id_jag_the_as_refused_is_not_presented_again(nursery: trio.Nursery) -> None:
    # An IdP that caches its ID-JAGs hands out the refused one again: it is not sent
    # to the authorization server a second time.
    fake, idp, client = await enterprise_setup(nursery, same_grant=True)
    fake.grant_error = "invalid_grant"
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        with pytest.raises(OAuthError, match=r"ID-JAG was refused.*not presented again") as info:
            await auth.authorize(fake.url)
    assert info.value.error == "invalid_grant"
    assert len(idp.exchanges) == 2 and len(fake.token_requests) == 1


async def test_an_id_jag_refusal_that_may_not_stand_lets_it_be_sent_again(
    nursery: trio.Nursery,
) -> None:
    fake, idp, client = await enterprise_setup(nursery, same_grant=True)
    fake.grant_error = "temporarily_unavailable"
    auth = OAuth(client=client, enterprise=enterprise(idp))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="temporarily_unavailable"):
            await auth.authorize(fake.url)
        fake.grant_error = None
        await auth.authorize(fake.url)
    assert len(fake.token_requests) == 2


def jwt(**claims: Any) -> str:
    """An (unsigned) JWS with these claims: the client never verifies it."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(dumps(value)).rstrip(b"=").decode()

    return f"{part({'alg': 'ES256'})}.{part({'sub': 'workload', **claims})}.c2ln"


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_young_jwt_refused_for_the_clock_is_presented_again_a_minute_later(
    nursery: trio.Nursery,
) -> None:
    # An AS whose clock is behind ours refuses a JWT issued just now ("iat in the
    # future"); it takes the same JWT once its clock gets there.
    clock = Clock()
    assertion = jwt(iat=clock.now, exp=clock.now + 3600)
    fake = await start_fake(nursery, grant_error="invalid_grant")
    fake.assertions = {assertion}
    identity = WorkloadIdentity(assertion=assertion, issuer=fake.issuer)
    auth = OAuth(workload_identity=identity, clock=clock)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        clock.now += 59
        with pytest.raises(OAuthError, match="not presented again"):
            await auth.authorize(fake.url)
        clock.now += 1
        fake.grant_error = None
        await auth.authorize(fake.url)
    assert len(fake.token_requests) == 2


@pytest.mark.parametrize(
    "claims",
    [
        {"iat": -3600.0, "exp": 0.0},  # expired: never valid again
        {"iat": -301.0},  # older than any clock skew: not the clock
        {},  # no time claims: nothing says
    ],
)
async def test_a_jwt_refused_when_expired_or_old_is_never_presented_again(
    nursery: trio.Nursery, claims: dict[str, float]
) -> None:
    clock = Clock()
    assertion = jwt(**{name: clock.now + value for name, value in claims.items()})
    fake = await start_fake(nursery, grant_error="invalid_grant")
    identity = WorkloadIdentity(assertion=assertion, issuer=fake.issuer)
    auth = OAuth(workload_identity=identity, clock=clock)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        clock.now += 86400
        with pytest.raises(OAuthError, match="not presented again"):
            await auth.authorize(fake.url)
    assert len(fake.token_requests) == 1


@pytest.mark.parametrize(
    "error", ["unauthorized_client", "unsupported_grant_type", "invalid_scope"]
)
async def test_a_young_jwt_refused_for_another_reason_than_the_clock_stays_held_back(
    nursery: trio.Nursery, error: str
) -> None:
    clock = Clock()
    assertion = jwt(iat=clock.now, exp=clock.now + 3600)
    fake = await start_fake(nursery, grant_error=error)
    fake.assertions = {assertion}
    auth = OAuth(
        workload_identity=WorkloadIdentity(assertion=assertion, issuer=fake.issuer), clock=clock
    )
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)
        for _ in range(5):
            clock.now += 60
            with pytest.raises(OAuthError, match="not presented again: configure a new one"):
                await auth.authorize(fake.url)
    assert len(fake.token_requests) == 1


async def test_a_second_refusal_of_a_young_jwt_stands_for_another_minute(
    nursery: trio.Nursery,
) -> None:
    clock = Clock()
    assertion = jwt(iat=clock.now, exp=clock.now + 3600)
    fake = await start_fake(nursery, grant_error="invalid_grant")
    fake.assertions = {assertion}
    auth = OAuth(
        workload_identity=WorkloadIdentity(assertion=assertion, issuer=fake.issuer), clock=clock
    )
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)  # refused at t0: lapses at t0+60
        clock.now += 60
        with pytest.raises(OAuthError, match="not retried"):
            await auth.authorize(fake.url)  # presented again, refused: lapses at t0+120
        clock.now += 1
        # Held back, and the message says for how long (not "never").
        with pytest.raises(OAuthError, match=r"while young, and is not presented again for 59 s"):
            await auth.authorize(fake.url)
    assert len(fake.token_requests) == 2

"""The OAuth client end to end: a fake authorization server and a protected MCP server
on 127.0.0.1 (the protected server checks the bearer token, then forwards the request
to a real ``serve_http`` server), and the real client with ``auth=OAuth(...)``."""

from __future__ import annotations

import math
import secrets
from functools import partial
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import attrs
import pytest
import trio

from mcp_sansio import BearerChallenge
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    ClientCredentials,
    InMemoryOAuthStorage,
    McpError,
    OAuth,
    OAuthError,
    fetch_authorization_redirect,
    open_client,
)
from mcp_trio._oauth import oauth_fetch

from .oauth_support import REDIRECT, oauth, s256
from .test_http_support import IO_TIMEOUT, App, serve_routes, start_server


@attrs.define
class Fake:
    """One loopback server playing the MCP server (``/mcp``, its metadata) and its
    authorization server (the issuer is ``base`` + ``as_path``). Tests set the knobs
    and read what happened."""

    upstream: str
    base: str = ""
    as_path: str = ""
    # knobs
    prm_resource: str | None = None
    prm_scopes: list[str] | None = None
    prm_padding: int = 0
    metadata_issuer: str | None = None
    iss_supported: bool | None = True
    iss_mode: str = "correct"  # correct, omit, wrong, normalized
    scopes_supported: list[str] | None = None
    expires_in: int = 3600
    refresh_tokens: bool = False
    challenge_scope: str | None = "read"
    call_scope: str | None = None  # tools/call needs it (403 insufficient_scope)
    always_forbid_calls: bool = False
    no_prm: bool = False
    prm_path: str | None = None  # the metadata only there, named only in the challenge
    open: bool = False  # requests without a token pass (a handshake before auth is needed)
    assertions: set[str] = attrs.field(factory=set)  # what the jwt-bearer grant takes
    grant_error: str | None = None  # the jwt-bearer grant's answer: this error
    grant_status: int = 400  # ... with this status
    cimd: bool = False  # the AS supports Client ID Metadata Documents
    other_servers: list[str] = attrs.field(factory=list)  # listed before the issuer
    # what happened
    registrations: list[dict[str, Any]] = attrs.field(factory=list)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    token_requests: list[dict[str, str]] = attrs.field(factory=list)
    token_auth: list[str | None] = attrs.field(factory=list)  # each one's Authorization
    bearer_seen: list[str] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)
    tokens: dict[str, set[str]] = attrs.field(factory=dict)
    refresh: dict[str, set[str]] = attrs.field(factory=dict)
    challenges: dict[str, str] = attrs.field(factory=dict)

    @property
    def issuer(self) -> str:
        return self.base + self.as_path

    @property
    def url(self) -> str:
        return self.base + "/mcp"

    def _new_token(self, scopes: set[str]) -> dict[str, Any]:
        token = "tok-" + secrets.token_hex(8)
        self.tokens[token] = scopes
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": " ".join(sorted(scopes)),
        }
        if self.refresh_tokens:
            refresh = "ref-" + secrets.token_hex(8)
            self.refresh[refresh] = scopes
            answer["refresh_token"] = refresh
        return answer

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        path, _, query = target.partition("?")
        self.paths.append(f"{method} {path}")
        js = [("content-type", "application/json")]
        prm_path = self.prm_path or "/.well-known/oauth-protected-resource/mcp"
        if method == "GET" and path == prm_path and not self.no_prm:
            prm: dict[str, Any] = {
                "resource": self.prm_resource or self.url,
                "authorization_servers": [*self.other_servers, self.issuer],
            }
            if self.prm_scopes is not None:
                prm["scopes_supported"] = self.prm_scopes
            if self.prm_padding:
                prm["padding"] = "x" * self.prm_padding
            return 200, js, dumps(prm)
        if method == "GET" and path == "/.well-known/oauth-authorization-server" + self.as_path:
            meta: dict[str, Any] = {
                "issuer": self.metadata_issuer or self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "registration_endpoint": f"{self.issuer}/register",
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
            }
            if self.iss_supported is not None:
                meta["authorization_response_iss_parameter_supported"] = self.iss_supported
            if self.scopes_supported is not None:
                meta["scopes_supported"] = self.scopes_supported
            if self.cimd:
                meta["client_id_metadata_document_supported"] = True
            return 200, js, dumps(meta)
        if method == "POST" and path == self.as_path + "/register":
            request = loads(body)
            self.registrations.append(request)
            client = {"client_id": f"client-{len(self.registrations)}{self.as_path}"}
            return 201, js, dumps({**request, **client})
        if method == "GET" and path == self.as_path + "/authorize":
            params = dict(parse_qsl(query))
            self.authorizations.append(params)
            back = {"code": "code-" + params["code_challenge"], "state": params["state"]}
            iss = {
                "correct": self.issuer,
                "wrong": "https://evil.example",
                "normalized": self.issuer + "/",
            }.get(self.iss_mode)
            if iss is not None:
                back["iss"] = iss
            self.challenges[back["code"]] = params.get("scope", "")
            return 302, [("location", f"{params['redirect_uri']}?{urlencode(back)}")], b""
        if method == "POST" and path == self.as_path + "/token":
            form = dict(parse_qsl(body.decode()))
            self.token_requests.append(form)
            self.token_auth.append(headers.get("authorization"))
            if form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer":
                if self.grant_error is not None:
                    answer = {"error": self.grant_error, "error_description": "no"}
                    return self.grant_status, js, dumps(answer)
                if form.get("assertion") not in self.assertions:
                    return 400, js, dumps({"error": "invalid_grant"})
                return 200, js, dumps(self._new_token(set(form.get("scope", "").split())))
            if form["grant_type"] == "authorization_code":
                if form["code"] != "code-" + s256(form["code_verifier"]):
                    return 400, js, dumps({"error": "invalid_grant"})
                scopes = set(self.challenges[form["code"]].split())
                return 200, js, dumps(self._new_token(scopes))
            if form["grant_type"] == "client_credentials":
                return 200, js, dumps(self._new_token(set(form.get("scope", "").split())))
            if form["grant_type"] == "refresh_token" and form["refresh_token"] in self.refresh:
                return 200, js, dumps(self._new_token(self.refresh.pop(form["refresh_token"])))
            return 400, js, dumps({"error": "invalid_grant"})
        if method == "POST" and path == "/mcp":
            return await self.mcp(headers, body)
        if path == "/mcp":
            return 405, [("allow", "POST")], b""  # (no GET stream: legacy sessions)
        return 404, [], b""

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        metadata = self.base + (self.prm_path or "/.well-known/oauth-protected-resource/mcp")
        auth = headers.get("authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        if token not in self.tokens and not (self.open and not auth):
            scope = f', scope="{self.challenge_scope}"' if self.challenge_scope else ""
            www = f'Bearer resource_metadata="{metadata}"{scope}'
            return 401, [("www-authenticate", www)], b""
        self.bearer_seen.append(token)
        message = loads(body)
        needed = self.call_scope if message.get("method") == "tools/call" else None
        forbid = self.always_forbid_calls and message.get("method") == "tools/call"
        if forbid:
            needed = "admin"  # (asked for, granted, and refused all the same)
        if needed is not None and (forbid or needed not in self.tokens.get(token, set())):
            www = f'Bearer error="insufficient_scope", scope="{needed}"'
            return 403, [("www-authenticate", www)], b""
        forwarded = [
            (k, v)
            for k, v in headers.items()
            if k not in ("host", "authorization", "content-length", "connection")
        ]
        status, answer_headers, answer = await oauth_fetch(
            "POST", self.upstream, headers=forwarded, body=body, max_response_size=1 << 20
        )
        keep = [
            (k.decode(), v.decode())
            for k, v in answer_headers
            if k.decode().startswith(("content-type", "mcp-"))
        ]
        return status, keep, answer

    async def serve(self, stream: trio.SocketStream) -> None:
        await serve_routes(self.route, stream)


async def start_fake(nursery: trio.Nursery, **knobs: Any) -> Fake:
    return await start_fake_of(nursery, Fake, **knobs)


_F = TypeVar("_F", bound=Fake)


async def start_fake_of(nursery: trio.Nursery, kind: type[_F], **knobs: Any) -> _F:
    """A fake of ``kind`` (:class:`Fake` or a subclass) in front of a new MCP server,
    listening on loopback."""
    upstream = await start_server(nursery, App())
    fake = kind(upstream=upstream.url, **knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    return fake


async def list_and_call(
    fake: Fake, auth: OAuth, era: Literal["modern", "legacy"] = "modern"
) -> str:
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era=era, auth=auth) as client:
            await client.list_tools()
            result = await client.call_tool("echo", {"text": "hi"})
            return result.text


async def test_the_happy_path_discovers_registers_authorizes_and_retries(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, challenge_scope="read")
    assert await list_and_call(fake, oauth()) == "hi"
    assert fake.paths[:3] == [
        "POST /mcp",
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /.well-known/oauth-authorization-server",
    ]
    [registration] = fake.registrations
    assert registration["redirect_uris"] == [REDIRECT]
    assert registration["application_type"] == "native"
    assert "refresh_token" in registration["grant_types"]
    [authorization] = fake.authorizations
    assert authorization["resource"] == fake.url
    assert authorization["code_challenge_method"] == "S256"
    assert authorization["scope"] == "read"
    assert authorization["client_id"] == "client-1"
    [token] = fake.token_requests
    assert token["resource"] == fake.url
    assert token["client_id"] == "client-1"
    assert len(set(fake.bearer_seen)) == 1  # one token served every request


async def test_a_stored_token_is_used_without_authorizing_again(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery)
    storage = InMemoryOAuthStorage()
    assert await list_and_call(fake, oauth(storage=storage)) == "hi"
    assert await list_and_call(fake, oauth(storage=storage)) == "hi"
    assert len(fake.authorizations) == 1
    assert len(fake.registrations) == 1


async def test_step_up_on_insufficient_scope_asks_for_the_union(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, challenge_scope="read", call_scope="write")
    assert await list_and_call(fake, oauth()) == "hi"
    assert [a["scope"] for a in fake.authorizations] == ["read", "read write"]


async def test_step_up_stops_at_the_retry_limit(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, always_forbid_calls=True)
    with pytest.raises(McpError, match="403"):
        await list_and_call(fake, oauth(max_authorizations=1))
    # One for tools/list's 401, then one for tools/call's 403.
    assert len(fake.authorizations) == 2


async def test_a_scope_granted_and_still_refused_is_not_asked_for_again(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, always_forbid_calls=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=oauth()) as client:
            await client.list_tools()
            for _ in range(3):
                with pytest.raises(McpError, match="granted already"):
                    await client.call_tool("echo", {"text": "hi"})
            assert (await client.list_tools())[0].name  # the session goes on
    # tools/list's 401, then one step-up to "read admin": granted, still refused, and
    # never asked for again (not per request, not up to max_authorizations).
    assert [a["scope"] for a in fake.authorizations] == ["read", "read admin"]


async def test_an_expired_token_is_refreshed_before_the_request(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, expires_in=0, refresh_tokens=True)
    assert await list_and_call(fake, oauth()) == "hi"
    grants = [t["grant_type"] for t in fake.token_requests]
    assert grants[0] == "authorization_code"
    assert "refresh_token" in grants[1:]
    assert len(fake.authorizations) == 1  # no new authorization: refreshed instead
    assert len(set(fake.bearer_seen)) >= 2  # later requests carry the refreshed token


async def test_metadata_for_another_resource_is_refused(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, prm_resource="https://evil.example/mcp")
    with pytest.raises(McpError, match="not for the server"):
        await list_and_call(fake, oauth())
    assert not fake.authorizations
    assert not fake.registrations


async def test_authorization_server_metadata_for_another_issuer_is_refused(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, metadata_issuer="https://attacker.example")
    with pytest.raises(McpError, match="names issuer"):
        await list_and_call(fake, oauth())
    assert not fake.registrations
    assert not fake.authorizations


@pytest.mark.parametrize(
    ("supported", "mode", "accepted"),
    [
        (True, "correct", True),
        (True, "omit", False),
        (True, "wrong", False),
        (True, "normalized", False),
        (None, "omit", True),
        (None, "wrong", False),
        (False, "correct", True),
    ],
)
async def test_iss_rules_of_rfc_9207(
    nursery: trio.Nursery, supported: bool | None, mode: str, accepted: bool
) -> None:
    fake = await start_fake(nursery, iss_supported=supported, iss_mode=mode)
    if accepted:
        assert await list_and_call(fake, oauth()) == "hi"
        assert len(fake.token_requests) == 1
    else:
        with pytest.raises(McpError, match="iss"):
            await list_and_call(fake, oauth())
        assert fake.authorizations  # the authorization response came back...
        assert not fake.token_requests  # ...and its code went nowhere


async def test_a_metadata_response_over_the_size_bound_is_refused(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, prm_padding=4096)
    with pytest.raises(McpError, match="over 2048 bytes"):
        await list_and_call(fake, oauth(max_response_size=2048))
    assert not fake.authorizations


async def test_offline_access_only_when_the_server_lists_it(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, scopes_supported=["read", "offline_access"])
    assert await list_and_call(fake, oauth()) == "hi"
    assert fake.authorizations[0]["scope"] == "read offline_access"
    other = await start_fake(nursery, scopes_supported=["read"])
    assert await list_and_call(other, oauth()) == "hi"
    assert other.authorizations[0]["scope"] == "read"


async def test_a_new_authorization_server_gets_a_new_registration(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery)
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=oauth(storage=storage)) as client:
            await client.list_tools()
            # The server moves to another authorization server; old tokens stop working.
            fake.as_path = "/as2"
            fake.tokens.clear()
            assert (await client.call_tool("echo", {"text": "again"})).text == "again"
    assert [r["client_name"] for r in fake.registrations] == ["mcp-trio", "mcp-trio"]
    first, second = fake.authorizations
    assert first["client_id"] == "client-1"
    assert second["client_id"] == "client-2/as2"  # never the old AS's client id
    assert storage.clients.keys() == {fake.base, fake.base + "/as2"}


async def test_pre_registered_credentials_for_another_issuer_are_not_used(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery)
    client = ClientCredentials(client_id="pre", issuer="https://other.example")
    with pytest.raises(McpError, match="pre-registered"):
        await list_and_call(fake, oauth(client=client))
    assert not fake.authorizations


async def test_the_authorize_callback_sees_the_url_and_its_answer_is_checked(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery)
    seen: list[str] = []

    async def forge(url: str) -> str:
        seen.append(url)
        return REDIRECT + "?" + urlencode({"code": "x", "state": "forged", "iss": fake.issuer})

    with pytest.raises(McpError, match="state"):
        await list_and_call(fake, oauth(on_authorize=forge))
    assert seen and urlsplit(seen[0]).path == "/authorize"
    assert not fake.token_requests


async def test_the_client_credentials_grant_needs_no_user(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery)
    client = ClientCredentials(client_id="machine", client_secret="s3cr3t", issuer=fake.issuer)
    assert await list_and_call(fake, OAuth(client=client)) == "hi"
    assert not fake.authorizations and not fake.registrations
    [request] = fake.token_requests
    assert request["grant_type"] == "client_credentials"
    assert request["client_secret"] == "s3cr3t"  # the AS lists client_secret_post only
    assert request["resource"] == fake.url


async def test_a_server_without_resource_metadata_uses_its_origin(nursery: trio.Nursery) -> None:
    # 2025-03-26: no protected-resource metadata; the AS is at the server's origin. The
    # first 401 answers initialize: the version is not known yet, so it may be that one.
    fake = await start_fake(nursery, no_prm=True)
    assert await list_and_call(fake, oauth(), era="legacy") == "hi"
    assert fake.authorizations[0]["resource"] == fake.url
    assert "GET /.well-known/oauth-protected-resource" in fake.paths


async def test_the_2025_03_26_fallback_is_not_for_later_versions(nursery: trio.Nursery) -> None:
    # Since 2025-06-18 the metadata is required: a modern session is never 2025-03-26.
    fake = await start_fake(nursery, no_prm=True)
    with pytest.raises(McpError, match="no protected-resource metadata"):
        await list_and_call(fake, oauth())
    assert not fake.authorizations
    assert "GET /.well-known/oauth-authorization-server" not in fake.paths
    # A legacy session that negotiated 2025-11-25 (its first 401 comes after that).
    other = await start_fake(nursery, no_prm=True, open=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(other.url, era="legacy", auth=oauth()) as client:
            other.open = False  # from now on a token is needed
            with pytest.raises(McpError, match="no protected-resource metadata"):
                await client.list_tools()
    assert not other.authorizations


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "callback",
        "http://app.example/callback",  # plain http off loopback
        "ftp://127.0.0.1/cb",
        "https:///cb",
        "https://app.example/cb#frag",
        "http://127.0.0.1:99999/cb",  # no port (it matched any URL with a bad port)
        "myapp:/cb",  # a custom scheme: the spec says localhost or HTTPS
    ],
)
def test_the_redirect_uri_is_https_or_loopback(redirect_uri: str) -> None:
    with pytest.raises(ValueError, match="redirect_uri"):
        OAuth(redirect_uri=redirect_uri, on_authorize=fetch_authorization_redirect)


def test_oauth_arguments_are_checked() -> None:
    for good in ("https://app.example/cb", "http://localhost:8765/cb", "http://[::1]/cb"):
        assert oauth(redirect_uri=good).redirect_uri == good
    with pytest.raises(ValueError, match="redirect_uri"):
        OAuth(on_authorize=fetch_authorization_redirect)
    with pytest.raises(ValueError, match="client_secret"):
        OAuth(client=ClientCredentials(client_id="public"))
    for bad in ("http://app.example/client.json", "https://app.example", "https://app.example/"):
        with pytest.raises(ValueError, match="client_metadata_url"):
            oauth(client_metadata_url=bad)
    assert oauth(client_metadata_url="https://app.example/c.json").client_metadata_url


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_authorizations", 0),
        ("max_authorizations", 1.5),
        ("max_authorizations", True),
        ("max_response_size", -1),
        ("max_response_size", 1e6),
        ("authorize_timeout", 0),
        ("authorize_timeout", math.nan),
        ("timeout", math.inf),
        ("timeout", True),
        ("timeout", "30"),
    ],
)
def test_oauth_bounds_are_checked_up_front(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be"):
        oauth(**{name: value})
    oauth(**{name: 2})  # (an int is a number of seconds too)


async def test_the_redirect_must_come_back_to_the_redirect_uri(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery)

    async def elsewhere(url: str) -> str:
        location = await fetch_authorization_redirect(url)
        return location.replace("127.0.0.1:9/callback", "127.0.0.1:9/other")

    with pytest.raises(McpError, match="redirect URI"):
        await list_and_call(fake, oauth(on_authorize=elsewhere))
    assert fake.authorizations and not fake.token_requests


async def test_auth_with_a_static_authorization_header_is_refused() -> None:
    with pytest.raises(ValueError, match=r"(?i)authorization"):
        async with open_client(
            "http://127.0.0.1:9/mcp", auth=oauth(), headers={"Authorization": "Bearer x"}
        ):
            pass  # pragma: no cover


async def test_auth_is_for_http_targets_only() -> None:
    with pytest.raises(TypeError, match="auth"):
        async with open_client(["python", "server.py"], auth=oauth()):
            pass  # pragma: no cover


# ------------------------------------------------------------------ authorizing before connecting


async def test_authorize_finds_metadata_named_only_in_the_challenge(nursery: trio.Nursery) -> None:
    # 2025-11-25: a server may publish its metadata's URL in WWW-Authenticate only.
    # authorize() asks the server once without a token to see the challenge.
    fake = await start_fake(nursery, prm_path="/custom-prm", as_path="/tenant")
    storage = InMemoryOAuthStorage()
    with trio.fail_after(IO_TIMEOUT):
        await oauth(storage=storage).authorize(fake.url)
    assert fake.paths[:2] == ["POST /mcp", "GET /custom-prm"]
    [authorization] = fake.authorizations
    assert authorization["resource"] == fake.url
    assert "POST /register" not in fake.paths  # (the tenant's, not the server's origin)
    # The client then finds the token at the server's first 401.
    assert await list_and_call(fake, oauth(storage=storage)) == "hi"
    assert len(fake.authorizations) == 1


async def test_authorize_uses_the_2025_03_26_fallback_only_when_asked(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, no_prm=True)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError, match="no protected-resource metadata"):
            await oauth().authorize(fake.url)
        assert "POST /register" not in fake.paths and not fake.authorizations
        await oauth().authorize(fake.url, legacy_fallback=True)  # a 2025-03-26 server
    assert "POST /register" in fake.paths and len(fake.authorizations) == 1


# ------------------------------------------------------------------ failed flows


async def test_a_failed_flow_at_a_new_authorization_server_leaves_the_state_as_it_was(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, refresh_tokens=True)
    declined = False

    async def user(url: str) -> str:
        if declined:
            raise OAuthError("access_denied")
        return await fetch_authorization_redirect(url)

    authorizer = oauth(on_authorize=user).bind(fake.url)
    with trio.fail_after(IO_TIMEOUT):
        await authorizer.challenged(401, BearerChallenge(), None)
        authorizer.accepted(authorizer.authorization())  # the server took it
        before = (
            authorizer.issuer,
            authorizer.metadata,
            authorizer.resource,
            authorizer.client,
            authorizer.token,
        )
        # The server moves to another authorization server and resource; the user
        # declines there.
        fake.as_path, fake.prm_resource, declined = "/as2", fake.base + "/", True
        with pytest.raises(OAuthError, match="access_denied"):
            await authorizer.challenged(401, BearerChallenge(), authorizer.authorization())
    after = (
        authorizer.issuer,
        authorizer.metadata,
        authorizer.resource,
        authorizer.client,
        authorizer.token,
    )
    assert after == before


# ------------------------------------------------------------------ internal addresses


class _Remote:
    """``oauth_fetch`` for servers with public names, which tests cannot bind: the
    documents by URL; every request is recorded (``fetched``)."""

    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.fetched: list[str] = []

    async def __call__(self, method: str, url: str, **kwargs: Any) -> Any:
        await trio.lowlevel.checkpoint()
        self.fetched.append(url)
        if url in self.documents:
            return 200, [(b"content-type", b"application/json")], dumps(self.documents[url])
        return 404, [], b""


def _prm(server: str, authorization_server: str) -> dict[str, Any]:
    return {"resource": server, "authorization_servers": [authorization_server]}


@pytest.mark.parametrize(
    "target",
    [
        "https://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "https://127.0.0.1:8443/admin/delete?all=1",
        "https://10.0.0.5/internal",
        "https://[::1]:9000/x",
        "https://2130706433/",
    ],
)
async def test_a_remote_server_cannot_aim_the_client_at_internal_addresses(
    monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    # The security review: a remote https server's challenge (resource_metadata), its
    # metadata (authorization_servers) and the authorization server's metadata
    # (registration_endpoint) were fetched whatever their host.
    server = "https://mcp.attacker.example/mcp"
    prm_url = "https://mcp.attacker.example/.well-known/oauth-protected-resource/mcp"
    issuer = "https://as.attacker.example"
    as_url = "https://as.attacker.example/.well-known/oauth-authorization-server"
    as_doc = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "code_challenge_methods_supported": ["S256"],
    }
    cases = [
        (BearerChallenge(resource_metadata=target), {}),
        (BearerChallenge(), {prm_url: _prm(server, target)}),
        (
            BearerChallenge(),
            {prm_url: _prm(server, issuer), as_url: {**as_doc, "registration_endpoint": target}},
        ),
    ]
    for challenge, documents in cases:
        remote = _Remote(documents)
        monkeypatch.setattr("mcp_trio._oauth.oauth_fetch", remote)
        authorizer = oauth().bind(server)
        with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="private network"):
            await authorizer.challenged(401, challenge, None)
        assert all(
            urlsplit(url).hostname in ("mcp.attacker.example", "as.attacker.example")
            for url in remote.fetched
        ), remote.fetched


async def test_a_trusted_public_server_may_be_allowed_oauth_on_a_private_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A company's server with a public name, its authorization server on 10.x: refused
    # by default (see above), allowed when the user says so.
    server = "https://mcp.corp.example/mcp"
    prm_url = "https://mcp.corp.example/.well-known/oauth-protected-resource/mcp"
    for allowed in (False, True):
        remote = _Remote({prm_url: _prm(server, "https://10.20.0.5")})
        monkeypatch.setattr("mcp_trio._oauth.oauth_fetch", remote)
        authorizer = oauth(allow_private_networks=allowed).bind(server)
        problem = "publishes no metadata" if allowed else "private network"
        with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match=problem):
            await authorizer.challenged(401, BearerChallenge(), None)
        internal = [url for url in remote.fetched if urlsplit(url).hostname == "10.20.0.5"]
        assert bool(internal) is allowed, remote.fetched


async def test_a_server_on_a_private_network_may_have_its_oauth_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Local development, a server on the LAN: the server is itself internal.
    server = "https://10.0.0.5/mcp"
    prm_url = "https://10.0.0.6/prm"
    remote = _Remote({prm_url: _prm(server, "https://10.0.0.7")})
    monkeypatch.setattr("mcp_trio._oauth.oauth_fetch", remote)
    authorizer = oauth().bind(server)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="publishes no metadata"):
        await authorizer.challenged(401, BearerChallenge(resource_metadata=prm_url), None)
    assert remote.fetched[0] == prm_url
    assert all(urlsplit(url).hostname == "10.0.0.7" for url in remote.fetched[1:])
    assert len(remote.fetched) > 1

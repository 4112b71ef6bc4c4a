"""The OAuth client against our own protected server: ``serve_http`` with
``authenticate=BearerAuth(...)`` and ``ProtectedResourceMetadata``, a fake authorization
server on 127.0.0.1, and ``open_client(auth=OAuth(...))``. Besides the happy paths, the
ways a server or an authorization server can misbehave that must fail one request (or
nothing), never the session, nor ask the user again and again.

No test waits for real time. Token lifetimes run on a :class:`FakeTime` that the
authorization server, the server's token check and the client (``OAuth(clock=...)``)
share, and that a test advances; Trio's timeouts (a hanging authorization server, a
slow user) run on the ``autojump_clock``: loopback I/O is done before the run loop would
sleep, so virtual time moves only for timers."""

from __future__ import annotations

import logging
import secrets
import socket
from functools import partial
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode

import attrs
import pytest
import trio
import trio.testing

from mcp_sansio import BearerChallenge
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    BearerAuth,
    Client,
    ClientCredentials,
    Context,
    HttpServerConfig,
    InMemoryOAuthStorage,
    McpError,
    OAuth,
    OAuthError,
    OAuthToken,
    Principal,
    ProtectedResourceMetadata,
    RequestTimeout,
    Server,
    SessionConfig,
    fetch_authorization_redirect,
    open_client,
)

from .oauth_support import Storage, User, oauth, s256
from .test_http_support import IO_TIMEOUT, serve_routes

Era = Literal["legacy", "modern"]
ERAS: list[Era] = ["legacy", "modern"]


@attrs.define
class FakeTime:
    """The wall clock of a test: it moves when the test says."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@attrs.define
class FakeAS:
    """An authorization server that grants whatever is asked, with knobs for the
    misbehaviours under test; it records what it was sent."""

    issuer: str = ""
    scopes_supported: list[str] | None = None
    pkce_methods: list[str] | None = attrs.field(factory=lambda: ["S256"])
    refresh_tokens: bool = False
    expires_in: float = 3600
    metadata_status: int = 200
    hang_refresh: bool = False
    audience: str | None = None  # the resource its tokens are for (default: as asked)
    token_prefix: str = "at-"
    refresh_gate: trio.Event | None = None  # a refresh waits for it, once it is asked
    refresh_asked: trio.Event = attrs.field(factory=trio.Event)
    # RFC 9700 section 4.14.2: a spent refresh token presented again revokes every
    # token (one user here: the whole family).
    reuse_detection: bool = False
    spent: list[str] = attrs.field(factory=list)  # refresh tokens used, in order
    reused: int = 0  # spent refresh tokens presented again
    clock: FakeTime = attrs.field(factory=FakeTime)
    requests: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list)
    authorizations: list[dict[str, str]] = attrs.field(factory=list)
    token_requests: list[dict[str, str]] = attrs.field(factory=list)
    tokens: dict[str, tuple[frozenset[str], str | None, float]] = attrs.field(factory=dict)
    codes: dict[str, dict[str, str]] = attrs.field(factory=dict)
    refresh: dict[str, tuple[frozenset[str], str | None]] = attrs.field(factory=dict)

    def _issue(self, scopes: frozenset[str], resource: str | None) -> dict[str, Any]:
        token = self.token_prefix + secrets.token_hex(8)
        audience = self.audience or resource
        self.tokens[token] = (scopes, audience, self.clock() + self.expires_in)
        answer: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": " ".join(sorted(scopes)),
        }
        if self.refresh_tokens:
            refresh = "rt-" + secrets.token_hex(8)
            self.refresh[refresh] = (scopes, audience)
            answer["refresh_token"] = refresh
        return answer

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        self.requests.append((method, target, headers))
        path, _, query = target.partition("?")
        js = [("content-type", "application/json")]
        if method == "GET" and path == "/.well-known/oauth-authorization-server":
            if self.metadata_status != 200:
                return self.metadata_status, [], b""
            meta: dict[str, Any] = {
                "issuer": self.issuer,
                "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token",
                "registration_endpoint": f"{self.issuer}/register",
                "token_endpoint_auth_methods_supported": ["none", "client_secret_basic"],
                "authorization_response_iss_parameter_supported": True,
            }
            if self.pkce_methods is not None:
                meta["code_challenge_methods_supported"] = self.pkce_methods
            if self.scopes_supported is not None:
                meta["scopes_supported"] = self.scopes_supported
            return 200, js, dumps(meta)
        if method == "POST" and path == "/register":
            return 201, js, dumps({**loads(body), "client_id": "cid-" + secrets.token_hex(4)})
        if method == "GET" and path == "/authorize":
            params = dict(parse_qsl(query))
            self.authorizations.append(params)
            code = "code-" + secrets.token_hex(8)
            self.codes[code] = params
            back = urlencode({"code": code, "state": params["state"], "iss": self.issuer})
            return 302, [("location", f"{params['redirect_uri']}?{back}")], b""
        if method == "POST" and path == "/token":
            form = dict(parse_qsl(body.decode()))
            self.token_requests.append(form)
            if form.get("grant_type") == "authorization_code":
                asked = self.codes.pop(form.get("code", ""), None)
                if asked is None or s256(form["code_verifier"]) != asked["code_challenge"]:
                    return 400, js, dumps({"error": "invalid_grant"})
                scopes = frozenset(asked.get("scope", "").split())
                return 200, js, dumps(self._issue(scopes, form.get("resource")))
            if form.get("grant_type") == "refresh_token":
                self.refresh_asked.set()
                if self.hang_refresh:
                    await trio.sleep_forever()
                if self.refresh_gate is not None:
                    await self.refresh_gate.wait()
                presented = form.get("refresh_token", "")
                got = self.refresh.pop(presented, None)
                if got is None:
                    if presented in self.spent:
                        self.reused += 1
                        if self.reuse_detection:
                            self.refresh.clear()
                            self.tokens.clear()
                    return 400, js, dumps({"error": "invalid_grant"})
                self.spent.append(presented)
                return 200, js, dumps(self._issue(got[0], form.get("resource") or got[1]))
            return 400, js, dumps({"error": "unsupported_grant_type"})
        return 404, [], b""

    async def serve(self, stream: trio.SocketStream) -> None:
        await serve_routes(self.route, stream)


@attrs.define
class Setup:
    """The authorization server, the protected server's URL, and what its token
    check saw. While ``open`` is true, requests without a token pass (so a test can
    finish the handshake before authorization is needed)."""

    asrv: FakeAS
    url: str
    open: bool = False
    single_use: bool = False  # each token is taken once, then refused (401 invalid_token)
    accepted: list[str] = attrs.field(factory=list)
    refused: list[str] = attrs.field(factory=list)
    posts: list[str] = attrs.field(factory=list)  # the token each POST carried ("": none)
    changed: trio.Event = attrs.field(factory=trio.Event)  # set (and replaced) at each POST

    @property
    def time(self) -> FakeTime:
        """The clock the tokens live by (pass it to the client: ``clock=s.time``)."""
        return self.asrv.clock

    async def until(self, condition: Any) -> None:
        """Wait until ``condition()`` holds, re-checked after each POST the server gets."""
        while not condition():
            await self.changed.wait()


def _server(setup: Setup) -> Server:
    server = Server("protected")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        p = ctx.principal
        return "nobody" if p is None else f"{p.subject} {sorted(p.scopes)}"

    return server


async def start(
    nursery: trio.Nursery,
    *,
    required_scopes: str = "",
    prm_scopes: list[str] | None = None,
    open: bool = False,
    **knobs: Any,
) -> Setup:
    asrv = FakeAS(**knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, asrv.serve, 0, host="127.0.0.1"))
    asrv.issuer = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    setup = Setup(asrv=asrv, url="", open=open)

    async def verify(token: str) -> Principal | None:
        got = asrv.tokens.get(token)
        if got is None or got[1] != setup.url or setup.time() > got[2]:
            setup.refused.append(token)
            return None
        setup.accepted.append(token)
        if setup.single_use:
            del asrv.tokens[token]
        return Principal(subject="alice", scopes=got[0])

    holder: dict[str, BearerAuth] = {}

    async def authenticate(request: Any) -> Any:
        token = request.header("authorization") or ""
        try:
            if request.method == "POST":
                setup.posts.append(token.removeprefix("Bearer "))
            if setup.open and not token:
                return Principal(subject="alice")
            return await holder["bearer"](request)
        finally:
            setup.changed.set()
            setup.changed = trio.Event()

    # The metadata names the server's URL: pick its port first.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    setup.url = f"http://127.0.0.1:{port}/mcp"
    prm = ProtectedResourceMetadata(
        resource=setup.url, authorization_servers=[asrv.issuer], scopes_supported=prm_scopes
    )
    holder["bearer"] = BearerAuth(
        verify_token=verify, resource_metadata_url=prm.url, required_scopes=required_scopes
    )
    await nursery.start(
        partial(
            _server(setup).serve_http,
            port=port,
            http_config=HttpServerConfig(resource_metadata=prm),
            authenticate=authenticate,
        )
    )
    return setup


async def start_refreshing(nursery: trio.Nursery, **knobs: Any) -> Setup:
    """:func:`start` with refresh tokens (``offline_access`` offered, ``mcp`` needed)."""
    knobs = {"prm_scopes": ["mcp"], "scopes_supported": ["mcp", "offline_access"], **knobs}
    return await start(nursery, refresh_tokens=True, **knobs)


# ------------------------------------------------------------------ the happy paths


@pytest.mark.parametrize("era", ERAS)
async def test_discovery_authorization_and_the_retried_request(
    nursery: trio.Nursery, era: Era
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth()) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
            await client.list_tools()
    [authorization] = s.asrv.authorizations
    assert authorization["resource"] == s.url
    assert authorization["code_challenge_method"] == "S256"
    assert all(t["resource"] == s.url for t in s.asrv.token_requests)
    assert not any("authorization" in h for _, _, h in s.asrv.requests)  # no token to the AS


@pytest.mark.parametrize("era", ERAS)
async def test_the_scope_of_the_first_challenge_is_asked_for(
    nursery: trio.Nursery, era: Era
) -> None:
    s = await start(nursery, required_scopes="files:read mcp", prm_scopes=["mcp"])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth()) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['files:read', 'mcp']"
    assert len(s.asrv.authorizations) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_an_expiring_token_is_refreshed(nursery: trio.Nursery, era: Era) -> None:
    s = await start_refreshing(nursery, expires_in=0.3)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth(clock=s.time)) as client:
            for _ in range(3):
                assert (await client.call_tool("whoami", {})).text.startswith("alice")
                s.time.advance(0.35)
    assert len(s.asrv.authorizations) == 1
    assert [t["grant_type"] for t in s.asrv.token_requests].count("refresh_token") >= 2


# ------------------------------------------------------------------ refused outright


async def test_an_authorization_server_without_pkce_metadata_is_refused(
    nursery: trio.Nursery,
) -> None:
    # No code_challenge_methods_supported: PKCE support is unknown, and the client MUST
    # refuse to proceed (2025-11-25 authorization, "Authorization Code Protection").
    s = await start(nursery, prm_scopes=["mcp"], pkce_methods=None)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(Exception, match="S256"):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            await client.call_tool("whoami", {})  # pragma: no cover
    assert s.asrv.authorizations == []  # the user agent was never sent there


async def test_a_client_secret_goes_only_to_its_own_authorization_server(
    nursery: trio.Nursery,
) -> None:
    # A server names its own authorization server: a secret bound to another issuer is
    # never presented there (and one bound to none cannot be made).
    s = await start(nursery, prm_scopes=["mcp"])
    with pytest.raises(ValueError, match="issuer"):
        ClientCredentials(client_id="prod-client", client_secret="s3cr3t")
    client = ClientCredentials(
        client_id="prod-client", client_secret="s3cr3t", issuer="https://as.example"
    )
    with trio.fail_after(IO_TIMEOUT), pytest.raises(Exception, match="pre-registered"):
        async with open_client(s.url, era="modern", auth=OAuth(client=client)):
            pass  # pragma: no cover
    sent = [h for _, _, h in s.asrv.requests if "authorization" in h]
    assert sent == [] and s.asrv.token_requests == []


# ------------------------------------------------------------ a request fails, not the session


async def test_a_failed_discovery_fails_the_request_and_leaves_no_half_state(
    nursery: trio.Nursery,
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], metadata_status=500, open=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            s.open = False  # from now on a token is needed
            with pytest.raises(McpError, match="authorization failed"):
                await client.call_tool("whoami", {})
            s.asrv.metadata_status = 200  # the authorization server is back
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    # The same, on the authorizer itself: issuer and metadata are set together or not.
    s.asrv.metadata_status = 500
    authorizer = oauth().bind(s.url)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(OAuthError):
            await authorizer.challenged(401, BearerChallenge(), None)
        assert authorizer.issuer is None and authorizer.metadata is None
        s.asrv.metadata_status = 200
        await authorizer.challenged(401, BearerChallenge(), None)
    assert authorizer.token is not None


async def test_a_refresh_that_times_out_falls_back_to_authorizing(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await start_refreshing(nursery, expires_in=0.5, hang_refresh=True)
    with trio.fail_after(IO_TIMEOUT):
        auth = oauth(timeout=0.5, clock=s.time)
        async with open_client(s.url, era="modern", auth=auth) as client:
            await client.call_tool("whoami", {})
            s.time.advance(0.5)  # expired: the refresh before the next request hangs
            assert (await client.call_tool("whoami", {})).text.startswith("alice")
            assert (await client.call_tool("whoami", {})).text.startswith("alice")
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants[:3] == ["authorization_code", "refresh_token", "authorization_code"]
    assert len(s.asrv.authorizations) == 2


async def test_an_unusable_access_token_fails_the_request_not_the_session(
    nursery: trio.Nursery,
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True, token_prefix="x\r\nX-Injected: 1\r\n")
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            s.open = False
            with pytest.raises(McpError, match="visible ASCII") as caught:
                await client.call_tool("whoami", {})
            assert "Injected" not in str(caught.value)
            s.asrv.token_prefix = "at-"
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"


# ------------------------------------------------------------------ no endless asking


async def test_a_server_refusing_fresh_tokens_does_not_make_the_user_authorize_again(
    nursery: trio.Nursery,
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True)
    s.asrv.audience = "https://other.example/mcp"  # every token is refused
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            s.open = False
            for _ in range(3):
                with pytest.raises(McpError, match="just issued"):
                    await client.call_tool("whoami", {})
    assert len(s.asrv.authorizations) == 1  # not 3 per request


@pytest.mark.parametrize("refresh", [False, True])
async def test_a_server_taking_each_token_once_has_the_user_authorize_3_times_in_10_minutes(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, refresh: bool
) -> None:
    # Each token is taken for one request, then refused: without a limit across
    # requests (max_authorizations is per request), each request had the user authorize
    # (a browser tab each). A refresh that the authorization server refuses (its refresh
    # tokens single-use and spent by a theft, say) ends the same way.
    s = await start(nursery, prm_scopes=["mcp"], refresh_tokens=refresh, open=True)
    s.single_use = True
    user = User()

    async def whoami(client: Client) -> str:
        s.asrv.refresh.clear()  # (every refresh is refused)
        return (await client.call_tool("whoami", {})).text

    with trio.fail_after(IO_TIMEOUT + 1200):
        async with open_client(s.url, era="modern", auth=oauth(on_authorize=user)) as client:
            s.open = False
            for _ in range(2):
                for _ in range(3):
                    assert await whoami(client) == "alice ['mcp']"
                for _ in range(5):
                    with pytest.raises(McpError, match="keeps refusing fresh tokens"):
                        await whoami(client)
                assert user.prompts in (3, 6)
                await trio.sleep(600)  # (virtual time) the first of them 10 minutes ago
    assert user.prompts == 6 and len(s.asrv.authorizations) == 6


@pytest.mark.parametrize("era", ERAS)
async def test_short_lived_tokens_are_not_refreshed_before_every_request(
    nursery: trio.Nursery, era: Era
) -> None:
    s = await start_refreshing(nursery, expires_in=20)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth(clock=s.time)) as client:
            for _ in range(10):
                await client.call_tool("whoami", {})
                s.time.advance(1.5)  # 15 s in all: within 18 s, a 20 s token is good
    assert [t["grant_type"] for t in s.asrv.token_requests] == ["authorization_code"]


async def test_concurrent_refusals_share_one_authorization(nursery: trio.Nursery) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True)
    out: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            s.open = False

            async def one() -> None:
                out.append((await client.call_tool("whoami", {})).text)

            async with trio.open_nursery() as calls:
                for _ in range(8):
                    calls.start_soon(one)
    assert out == ["alice ['mcp']"] * 8
    assert len(s.asrv.authorizations) == 1


# ------------------------------------------------------------------ one-way messages


async def test_a_notification_after_expiry_goes_out_and_again_with_the_refreshed_token(
    nursery: trio.Nursery,
) -> None:
    # The session's writer does not call the authorization server: the notification
    # goes with the token there is (it starts the refresh); refused, it waits for that
    # refresh and goes again.
    s = await start_refreshing(nursery, expires_in=0.5)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="legacy", auth=oauth(clock=s.time)) as client:
            await client.call_tool("whoami", {})
            s.time.advance(0.6)  # expired; a refresh token exists
            s.refused.clear()
            s.posts.clear()
            await client.notify("notifications/message_from_client_test")
            await s.until(lambda: len(s.posts) == 2)
    assert s.refused == s.posts[:1]
    assert s.asrv.token_requests[-1]["grant_type"] == "refresh_token"
    assert s.accepted[-1] == s.posts[1]  # taken with the refreshed token


async def test_a_one_way_message_never_waits_for_a_hanging_authorization_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The refresh runs apart from the session's writer (whose write_timeout would
    # otherwise close the session): the notification waits a bounded time for it, is
    # lost, and the session goes on; the next request waits for the refresh, which
    # times out, and authorizes afresh.
    s = await start_refreshing(nursery, expires_in=0.5, hang_refresh=True)
    config = SessionConfig(write_timeout=1.0)
    auth = oauth(timeout=3.0, clock=s.time)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="legacy", auth=auth, config=config) as client:
            await client.call_tool("whoami", {})
            s.time.advance(0.6)  # expired; the authorization server now hangs
            await client.notify("notifications/message_from_client_test")
            assert (await client.call_tool("whoami", {})).text.startswith("alice")
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]


async def test_a_notification_racing_a_requests_refresh_waits_for_it(
    nursery: trio.Nursery,
) -> None:
    # One refresh, shared: the notification refused meanwhile is sent again with its
    # token (it was lost when the request's refresh held the flow's lock).
    gate = trio.Event()
    s = await start_refreshing(nursery, expires_in=0.5, refresh_gate=gate)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="legacy", auth=oauth(clock=s.time)) as client:
            await client.call_tool("whoami", {})
            s.time.advance(0.6)  # expired for the server too
            s.posts.clear()
            s.refused.clear()
            async with trio.open_nursery() as tasks:
                tasks.start_soon(client.call_tool, "whoami", {})
                await s.asrv.refresh_asked.wait()  # the request's refresh is under way
                tasks.start_soon(client.notify, "notifications/message_from_client_test")
                await s.until(lambda: s.refused)  # the notification, with the old token
                gate.set()
            await s.until(lambda: len(s.posts) == 3)
    old, new = s.posts[0], s.posts[1]
    assert s.refused == [old] and s.posts == [old, new, new] and new in s.accepted
    assert [t["grant_type"] for t in s.asrv.token_requests].count("refresh_token") == 1


async def test_a_notification_refused_with_401_is_sent_again_after_a_refresh(
    nursery: trio.Nursery,
) -> None:
    s = await start_refreshing(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="legacy", auth=oauth()) as client:
            await client.call_tool("whoami", {})
            s.asrv.tokens.clear()  # revoked: the server refuses the token in use
            s.posts.clear()
            await client.notify("notifications/message_from_client_test")
            await s.until(lambda: len(s.posts) == 2)
    # Refused once, then taken with the refreshed token.
    assert s.refused[-1] == s.posts[0] and s.accepted[-1] == s.posts[1]
    assert len(s.asrv.authorizations) == 1  # no user for a one-way message


# ------------------------------------------------------------------ a user who takes time


async def test_authorizing_before_connecting_is_bounded_by_authorize_timeout_alone(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])

    async def slow_user(url: str) -> str:
        await trio.sleep(1.2)  # a human in a browser (virtual time)
        return await fetch_authorization_redirect(url)

    auth = oauth(on_authorize=slow_user)
    config = SessionConfig(handshake_timeout=1.0)
    with trio.fail_after(IO_TIMEOUT):
        await auth.authorize(s.url)
        async with open_client(s.url, era="legacy", auth=auth, config=config) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 1


async def test_an_on_authorize_that_returns_no_str_fails_the_authorization_saying_so(
    nursery: trio.Nursery,
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])

    async def confused(url: str) -> str:
        return None  # type: ignore[return-value]

    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="on_authorize returned"):
        await oauth(on_authorize=confused).authorize(s.url)


async def test_a_request_timeout_does_not_cut_the_authorization_short(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True)
    done = trio.Event()

    async def slow_user(url: str) -> str:
        await trio.sleep(0.6)  # (virtual time)
        try:
            return await fetch_authorization_redirect(url)
        finally:
            done.set()

    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(on_authorize=slow_user)) as client:
            s.open = False
            with pytest.raises(RequestTimeout):
                await client.call_tool("whoami", {}, timeout=0.2)
            await done.wait()  # the flow went on without the request
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 1
    assert [t["grant_type"] for t in s.asrv.token_requests] == ["authorization_code"]


async def test_an_authorization_over_authorize_timeout_fails_the_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True)

    async def absent_user(url: str) -> str:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    auth = oauth(on_authorize=absent_user, authorize_timeout=0.3)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=auth) as client:
            s.open = False
            with pytest.raises(McpError, match="authorization failed"):
                await client.call_tool("whoami", {})
            s.open = True
            assert (await client.call_tool("whoami", {})).text == "alice []"  # still alive


# ------------------------------------------------------------------ the application's errors


async def test_an_on_authorize_that_raises_fails_the_waiting_requests_not_the_session(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # The user closed the browser: the application's callback raises what it likes.
    # Every request waiting for that authorization fails (asking once), the session
    # goes on, and the log names the exception's type, not its text.
    s = await start(nursery, prm_scopes=["mcp"], open=True)
    prompts: list[str] = []
    waiting = 4

    async def closed_browser(url: str) -> str:
        prompts.append(url)
        await s.until(lambda: s.posts.count("") >= waiting)  # all of them refused
        await trio.testing.wait_all_tasks_blocked()
        raise RuntimeError("the user closed the browser (details: hush)")

    failures: list[str] = []
    with caplog.at_level(logging.DEBUG, "mcp_trio"), trio.fail_after(IO_TIMEOUT):
        async with open_client(
            s.url, era="modern", auth=oauth(on_authorize=closed_browser)
        ) as client:
            s.open = False
            s.posts.clear()

            async def one() -> None:
                with pytest.raises(McpError, match="authorization failed") as caught:
                    await client.call_tool("whoami", {})
                failures.append(str(caught.value))

            async with trio.open_nursery() as calls:
                for _ in range(waiting):
                    calls.start_soon(one)
            s.open = True
            assert (await client.call_tool("whoami", {})).text == "alice []"  # still alive
    assert len(prompts) == 1 and len(failures) == waiting
    # (what raised is named: on_authorize)
    assert all("RuntimeError raised by on_authorize (" in f and "hush" not in f for f in failures)
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("RuntimeError" in m for m in loud) and not any("hush" in m for m in loud)
    assert any(r.exc_info is not None for r in caplog.records if r.levelno == logging.DEBUG)


async def test_a_storage_that_raises_fails_the_authorization_not_the_session(
    nursery: trio.Nursery,
) -> None:
    class LockedKeyring:
        def __init__(self) -> None:
            self.memory = InMemoryOAuthStorage()

        async def load_client(self, issuer: str) -> ClientCredentials | None:
            return await self.memory.load_client(issuer)

        async def save_client(self, issuer: str, client: ClientCredentials) -> None:
            await self.memory.save_client(issuer, client)

        async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
            return None

        async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
            raise OSError("the keyring is locked")

    s = await start(nursery, prm_scopes=["mcp"], open=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth(storage=LockedKeyring())) as client:
            s.open = False
            with pytest.raises(McpError, match=r"OSError raised by the storage \("):
                await client.call_tool("whoami", {})
            s.open = True
            assert (await client.call_tool("whoami", {})).text == "alice []"


# ------------------------------------------------------------------ clients sharing a storage


async def test_a_client_takes_the_token_another_client_of_the_storage_refreshed(
    nursery: trio.Nursery,
) -> None:
    # Two clients of one OAuth share its storage, and refresh tokens are single-use:
    # the second one takes the token the first one refreshed and stored, rather than
    # spending the spent refresh token, deleting the good token and asking the user.
    s = await start_refreshing(nursery, expires_in=100)
    prompts: list[str] = []

    async def user(url: str) -> str:
        prompts.append(url)
        return await fetch_authorization_redirect(url)

    auth = oauth(clock=s.time, on_authorize=user)
    storage = auth.storage
    assert isinstance(storage, InMemoryOAuthStorage)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(s.url, era="modern", auth=auth) as a,
            open_client(s.url, era="modern", auth=auth) as b,
        ):
            await a.call_tool("whoami", {})
            await b.call_tool("whoami", {})  # the stored token: no prompt
            s.time.advance(200)  # expired
            await a.call_tool("whoami", {})  # refreshed (a new refresh token) and stored
            [refreshed] = storage.tokens.values()
            assert (await b.call_tool("whoami", {})).text == "alice ['mcp', 'offline_access']"
            assert storage.tokens == {(s.url, s.asrv.issuer): refreshed}
    assert len(prompts) == 1
    assert [t["grant_type"] for t in s.asrv.token_requests] == [
        "authorization_code",
        "refresh_token",
    ]
    assert s.accepted[-1] == refreshed.access_token


async def test_a_refused_refresh_takes_the_token_stored_meanwhile_and_keeps_it(
    nursery: trio.Nursery,
) -> None:
    # Another client refreshes while this one's refresh is on its way: this one is
    # refused (the refresh token is spent), reads the storage again and takes the
    # other's token; the storage keeps it (only the token that failed is forgotten).
    gate = trio.Event()
    s = await start_refreshing(nursery, expires_in=100)
    prompts: list[str] = []

    async def user(url: str) -> str:
        prompts.append(url)
        return await fetch_authorization_redirect(url)

    auth = oauth(clock=s.time, on_authorize=user)
    storage = auth.storage
    assert isinstance(storage, InMemoryOAuthStorage)
    key = (s.url, s.asrv.issuer)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=auth) as client:
            await client.call_tool("whoami", {})
            s.time.advance(200)  # expired
            s.asrv.refresh_gate = gate
            async with trio.open_nursery() as tasks:
                tasks.start_soon(client.call_tool, "whoami", {})
                await s.asrv.refresh_asked.wait()
                # Meanwhile another client spends the refresh token and stores its token.
                s.asrv.refresh.clear()
                answer = s.asrv._issue(frozenset({"mcp"}), s.url)
                other = OAuthToken(
                    access_token=answer["access_token"],
                    expires_at=s.time() + s.asrv.expires_in,
                    scope="mcp",
                    issued_at=s.time(),
                )
                storage.tokens[key] = other
                gate.set()
    assert len(prompts) == 1
    assert s.accepted[-1] == other.access_token
    assert storage.tokens == {key: other}


# ------------------------------------------------------------------ races with a flow


async def test_a_refresh_ending_while_a_flow_stores_its_token_is_dropped(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A step-up flow stores its wider token (the keyring takes its time); a refresh of
    # the narrower token it replaces ends meanwhile: its outcome is dropped, in memory
    # and in the storage, which keeps the flow's token.
    s = await start(
        nursery,
        prm_scopes=["mcp"],
        refresh_tokens=True,
        expires_in=100,
        scopes_supported=["mcp", "more", "offline_access"],
    )
    stepping_up = False
    gate = trio.Event()

    class SlowKeyring(Storage):
        async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
            await self.memory.save_token(resource, issuer, token)
            if stepping_up and token is not None and "more" in (token.scope or ""):
                gate.set()  # the refresh's answer comes now
                await trio.sleep(1)  # the keyring takes its time (virtual)

    storage = SlowKeyring()

    async def user(url: str) -> str:
        if stepping_up:
            s.time.advance(200)  # the token expires while the user is at the browser
            nursery.start_soon(authorizer.ready, nursery)  # a request: the shared refresh
            await s.asrv.refresh_asked.wait()
        return await fetch_authorization_redirect(url)

    authorizer = oauth(clock=s.time, storage=storage, on_authorize=user).bind(s.url)
    with trio.fail_after(IO_TIMEOUT):
        await authorizer.challenged(401, BearerChallenge(), None)
        authorizer.accepted(authorizer.authorization())
        s.asrv.refresh_gate = gate
        stepping_up = True
        challenge = BearerChallenge(error="insufficient_scope", scope="mcp more")
        await authorizer.challenged(403, challenge, authorizer.authorization(), nursery=nursery)
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(2)
    assert authorizer.token is not None and "more" in (authorizer.token.scope or "")
    assert list(storage.tokens.values()) == [authorizer.token]
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]


async def test_a_one_way_message_never_waits_for_the_user(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A request refused with a revoked token waits for the user at the browser; a
    # notification meanwhile goes out at once with the current token, is refused and
    # lost (no refresh token), alone: the request then gets its new token.
    s = await start(nursery, prm_scopes=["mcp"])
    at_browser = trio.Event()
    back = trio.Event()
    prompts: list[str] = []

    async def user(url: str) -> str:
        prompts.append(url)
        if len(prompts) > 1:
            at_browser.set()
            await back.wait()
        return await fetch_authorization_redirect(url)

    result: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="legacy", auth=oauth(on_authorize=user)) as client:
            await client.call_tool("whoami", {})
            s.asrv.tokens.clear()  # revoked
            old = s.posts[-1]

            async def call() -> None:
                result.append((await client.call_tool("whoami", {})).text)

            async with trio.open_nursery() as tasks:
                tasks.start_soon(call)
                await at_browser.wait()
                s.posts.clear()
                t0 = trio.current_time()
                with trio.fail_after(1):
                    await client.notify("notifications/message_from_client_test")
                    await s.until(lambda: s.posts == [old])
                    await trio.testing.wait_all_tasks_blocked()
                assert trio.current_time() - t0 < 1
                assert s.posts == [old] and not result  # sent once, lost; the user still away
                back.set()
    assert result == ["alice ['mcp']"] and len(prompts) == 2


# ------------------------------------------------------------------ no refresh storm


async def test_a_server_refusing_refreshed_tokens_gets_one_refresh_not_one_per_request(
    nursery: trio.Nursery,
) -> None:
    # A token obtained by refresh is as just issued: refused, it fails the request at
    # once (no more refreshes, no user), for the requests after it and one-way messages.
    s = await start_refreshing(nursery, open=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era="modern", auth=oauth()) as client:
            s.open = False
            await client.call_tool("whoami", {})  # a good token first
            s.asrv.tokens.clear()  # revoked
            s.asrv.audience = "https://other.example/mcp"  # every token is refused now
            for _ in range(3):
                with pytest.raises(McpError, match="just issued"):
                    await client.call_tool("whoami", {})
            s.posts.clear()
            await client.notify("notifications/message_from_client_test")
            await s.until(lambda: s.posts)
            with pytest.raises(McpError, match="just issued"):
                await client.call_tool("whoami", {})
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(s.asrv.authorizations) == 1


# ------------------------------------------------------------------ authorize() before connecting


async def _stream_kept_open(nursery: trio.Nursery, seen: list[bytes]) -> str:
    """A server that answers a POST with 200 and an event stream it keeps open (and
    404 to anything else): the URL of its MCP endpoint."""

    async def handle(stream: trio.SocketStream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        head = data.partition(b"\r\n\r\n")[0]
        seen.append(head)
        if head.startswith(b"POST"):
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
                b'event: message\ndata: {"jsonrpc":"2.0","id":"mcp-trio-authorize","result":{}}'
                b"\n\n"
            )
            await trio.sleep_forever()
        await stream.send_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"


async def test_authorize_reads_only_the_head_of_the_probes_answer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    seen: list[bytes] = []
    url = await _stream_kept_open(nursery, seen)
    prompts: list[str] = []

    async def user(url: str) -> str:
        prompts.append(url)
        raise AssertionError  # pragma: no cover

    t0 = trio.current_time()
    with trio.fail_after(IO_TIMEOUT):
        await oauth(on_authorize=user).authorize(url)
    assert trio.current_time() - t0 < 1  # not the whole timeout for a body never read
    assert len(seen) == 1 and not prompts
    assert b"authorization" not in seen[0].lower()


async def test_authorize_does_nothing_for_a_server_that_needs_no_token(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    s = await start(nursery, prm_scopes=["mcp"], open=True)
    prompts: list[str] = []

    async def user(url: str) -> str:
        prompts.append(url)
        return await fetch_authorization_redirect(url)

    caplog.set_level(logging.INFO, logger="mcp_trio")
    auth = oauth(on_authorize=user)
    with trio.fail_after(IO_TIMEOUT):
        await auth.authorize(s.url, legacy_fallback=True)
    assert s.posts == [""]  # the probe, and nothing else
    assert not prompts and not s.asrv.requests
    assert isinstance(auth.storage, InMemoryOAuthStorage) and not auth.storage.tokens
    assert any("no authorization needed" in r.getMessage() for r in caplog.records)

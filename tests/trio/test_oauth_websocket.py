"""OAuth over the WebSocket transport: ``serve_websocket(authenticate=BearerAuth(...))``
answers a handshake without a good token with its challenge, and
``open_client("ws://…", auth=OAuth(...))`` discovers, authorizes and makes the
handshake again with the token, as the HTTP client sends a request again. The
authorization server is ``test_oauth_e2e``'s fake, on 127.0.0.1; it also serves the
WebSocket server's protected-resource metadata (a WebSocket server serves no
documents: the challenge names where it is)."""

from __future__ import annotations

import socket
from functools import partial
from typing import Any

import attrs
import pytest
import trio

from mcp_sansio._json import dumps
from mcp_sansio.http import HttpRequest
from mcp_trio import (
    BearerAuth,
    Context,
    InMemoryOAuthStorage,
    OAuthError,
    Principal,
    ProtectedResourceMetadata,
    Server,
    SessionClosed,
    open_client,
)
from mcp_trio._util import URL_SCHEMES, is_websocket_url, url_host
from mcp_trio._websocket import _host_header

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT, serve_routes
from .test_oauth_e2e import FakeAS, FakeTime

PRM_PATH = "/.well-known/oauth-protected-resource/ws/mcp"


@attrs.define
class WsSetup:
    asrv: FakeAS
    url: str  # ws://127.0.0.1:PORT/mcp
    resource: str  # what the metadata names
    heads: list[HttpRequest] = attrs.field(factory=list)  # what the hook saw
    required_scopes: str = "mcp"  # what the server asks of a token (may change)
    accepted: list[str] = attrs.field(factory=list)
    prm: bool = True  # whether the metadata is served


async def start_ws(
    nursery: trio.Nursery, *, resource_scheme: str = "http", **knobs: Any
) -> WsSetup:
    """A protected WebSocket server and its authorization server (``knobs``)."""
    asrv = FakeAS(**knobs)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    setup = WsSetup(
        asrv=asrv,
        url=f"ws://127.0.0.1:{port}/mcp",
        resource=f"{resource_scheme}://127.0.0.1:{port}/mcp",
    )

    async def route(
        method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method == "GET" and target == PRM_PATH and setup.prm:
            prm = ProtectedResourceMetadata(
                resource=setup.resource, authorization_servers=[asrv.issuer]
            )
            return 200, [("content-type", "application/json")], dumps(prm.document())
        return await asrv.route(method, target, headers, body)

    listeners = await nursery.start(
        partial(trio.serve_tcp, partial(serve_routes, route), 0, host="127.0.0.1")
    )
    asrv.issuer = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"

    async def verify(token: str) -> Principal | None:
        got = asrv.tokens.get(token)
        if got is None or got[1] != setup.resource or asrv.clock() > got[2]:
            return None
        setup.accepted.append(token)
        return Principal(subject="alice", scopes=got[0])

    async def authenticate(request: HttpRequest) -> Any:
        setup.heads.append(request)
        bearer = BearerAuth(
            verify_token=verify,
            resource_metadata_url=f"{asrv.issuer}{PRM_PATH}",
            required_scopes=setup.required_scopes,
        )
        return await bearer(request)

    server = Server("protected-ws")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        p = ctx.principal
        return "nobody" if p is None else f"{p.subject} {sorted(p.scopes)}"

    await nursery.start(partial(server.serve_websocket, port=port, authenticate=authenticate))
    return setup


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("resource_scheme", ["http", "ws"])
async def test_a_websocket_client_authorizes_and_calls_a_tool(
    nursery: trio.Nursery, era: str, resource_scheme: str
) -> None:
    s = await start_ws(nursery, resource_scheme=resource_scheme)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, era=era, auth=oauth()) as client:  # type: ignore[arg-type]
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    [authorization] = s.asrv.authorizations
    assert authorization["resource"] == s.resource  # as the metadata names it
    assert authorization["scope"] == "mcp"  # the challenge's
    # The handshake without a token was refused; the one with it, taken.
    assert [h.header("authorization") for h in s.heads] == [None, f"Bearer {s.accepted[0]}"]


async def test_the_hook_sees_the_handshake_as_an_http_request(nursery: trio.Nursery) -> None:
    # wsproto keeps Host and the Sec-WebSocket-Protocol header apart: the hook had
    # neither, so an authenticator could not tell which server was asked.
    s = await start_ws(nursery)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(SessionClosed, match="handshake failed"):
        async with open_client(s.url):
            pass  # pragma: no cover
    [head] = s.heads
    assert (head.method, head.target) == ("GET", "/mcp")
    assert head.headers[0] == (b"host", s.url.removeprefix("ws://").removesuffix("/mcp").encode())
    assert head.header("sec-websocket-protocol") == "mcp"
    # (The token is case-insensitive, RFC 6455 section 4.1: wsproto 1.2 sends "WebSocket".)
    upgrade = head.header("upgrade")
    assert upgrade is not None and upgrade.lower() == "websocket"


async def test_a_stored_token_serves_the_next_connection_and_is_refreshed(
    nursery: trio.Nursery,
) -> None:
    # A new connection (a reconnect) starts with the token of the last: expired, it is
    # refreshed before the first handshake, and the user is not asked again.
    time = FakeTime()
    s = await start_ws(
        nursery,
        refresh_tokens=True,
        expires_in=60,
        scopes_supported=["mcp", "offline_access"],
        clock=time,
    )
    auth = oauth(storage=InMemoryOAuthStorage(), clock=time)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, auth=auth) as client:
            await client.call_tool("whoami", {})
        time.advance(120)
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp', 'offline_access']"
    assert len(s.asrv.authorizations) == 1
    grants = [t["grant_type"] for t in s.asrv.token_requests]
    assert grants == ["authorization_code", "refresh_token"]
    assert len(set(s.accepted)) == 2
    # Each connection's handshakes: none refused for want of a (fresh) token.
    assert [h.header("authorization") is not None for h in s.heads] == [False, True, True]


async def test_a_token_the_server_keeps_refusing_fails_the_connection(
    nursery: trio.Nursery,
) -> None:
    # The authorization server issues tokens for another resource: the server refuses
    # each. The user is asked once, then the refusal is the answer.
    s = await start_ws(nursery, audience="https://elsewhere.example/mcp")
    with (
        trio.fail_after(IO_TIMEOUT),
        pytest.raises(SessionClosed, match=r"refused \(401\) and the authorization failed"),
    ):
        async with open_client(s.url, auth=oauth()):
            pass  # pragma: no cover
    assert len(s.asrv.authorizations) == 1
    assert len(s.heads) == 2


async def test_auth_and_an_authorization_header_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="not both"):
        async with open_client(
            "ws://127.0.0.1:9/mcp", auth=oauth(), headers={"Authorization": "Bearer x"}
        ):
            pass  # pragma: no cover


async def test_auth_is_for_urls_only() -> None:
    server = Server("plain")
    with pytest.raises(TypeError, match="auth cannot be used with a non-URL target"):
        async with open_client(server, auth=oauth()):
            pass  # pragma: no cover


@pytest.mark.parametrize(
    ("host", "port", "secure", "header"),
    [
        ("127.0.0.1", 8000, False, "127.0.0.1:8000"),
        ("mcp.example.com", 80, False, "mcp.example.com"),
        ("mcp.example.com", 443, True, "mcp.example.com"),
        ("mcp.example.com", 80, True, "mcp.example.com:80"),
        ("::1", 8000, False, "[::1]:8000"),
    ],
)
def test_the_host_header_has_the_port_unless_it_is_the_default(
    host: str, port: int, secure: bool, header: str
) -> None:
    assert _host_header(host, port, secure) == header


@pytest.mark.parametrize(
    ("url", "websocket"),
    [("ws://h/mcp", True), ("WSS://h/mcp", True), ("https://h/mcp", False), ("ws", False)],
)
def test_one_websocket_scheme_test_for_oauth_the_cli_and_open_client(
    url: str, websocket: bool
) -> None:
    assert is_websocket_url(url) is websocket
    assert url.lower().startswith(URL_SCHEMES) is (websocket or url.startswith("https"))
    assert url_host("::1") == "[::1]"
    assert url_host("127.0.0.1") == "127.0.0.1"


async def test_authorize_before_connecting_to_a_websocket_server(nursery: trio.Nursery) -> None:
    # OAuth.authorize probes with a handshake (not an HTTP POST, which a WebSocket
    # server cannot answer); the client's first handshake then carries the token.
    s = await start_ws(nursery)
    auth = oauth()
    with trio.fail_after(IO_TIMEOUT):
        await auth.authorize(s.url)
        assert len(s.asrv.authorizations) == 1
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 1
    assert [h.header("authorization") is not None for h in s.heads] == [False, True]


async def test_authorize_a_websocket_server_that_needs_no_token(nursery: trio.Nursery) -> None:
    server = Server("open")
    url = (await nursery.start(partial(server.serve_websocket, port=0))).url
    auth = oauth()
    with trio.fail_after(IO_TIMEOUT):
        await auth.authorize(url)  # no authorization needed: nothing more is done


async def test_authorize_a_websocket_server_that_does_not_answer(nursery: trio.Nursery) -> None:
    # No answer to the probe: discovery goes on without a challenge, at the http twin's
    # well-known URLs (nothing there either: it fails, saying so).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # (Looked for at the http twin: a ws:// metadata URL would be refused as such.)
    twin = rf"GET http://127\.0\.0\.1:{port}/\.well-known/oauth-protected-resource/mcp"
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match=twin):
        await oauth().authorize(f"ws://127.0.0.1:{port}/mcp")


@pytest.mark.parametrize("url", ["ws:///mcp", "wss://[::1/mcp", "ws://h:bad/mcp"])
async def test_authorize_a_malformed_websocket_url(url: str) -> None:
    with pytest.raises(OAuthError, match="not valid"):
        await oauth().authorize(url)


async def test_a_403_insufficient_scope_at_the_handshake_steps_up(nursery: trio.Nursery) -> None:
    # The stored token (scope mcp) is refused by a server that now needs files:write
    # too: 403 insufficient_scope, and the client asks for both, then connects.
    s = await start_ws(nursery)
    auth = oauth()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, auth=auth) as client:
            await client.call_tool("whoami", {})
        s.required_scopes = "files:write mcp"
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['files:write', 'mcp']"
    scopes = [set(a["scope"].split()) for a in s.asrv.authorizations]
    assert scopes == [{"mcp"}, {"files:write", "mcp"}]
    # The second connection's first handshake carried the token: refused with 403.
    assert [h.header("authorization") is not None for h in s.heads[2:]] == [True, True]


async def test_a_websocket_server_without_metadata_has_no_legacy_fallback(
    nursery: trio.Nursery,
) -> None:
    # 2025-03-26's rule (the server's origin as its authorization server) is for its
    # HTTP transport: a WebSocket server has the metadata, or no authorization.
    s = await start_ws(nursery)
    s.prm = False
    with (
        trio.fail_after(IO_TIMEOUT),
        pytest.raises(SessionClosed, match="publishes no protected-resource metadata"),
    ):
        async with open_client(s.url, auth=oauth()):
            pass  # pragma: no cover
    assert s.asrv.authorizations == []


async def test_max_authorizations_bounds_the_handshake_rounds(nursery: trio.Nursery) -> None:
    # A server that asks for one more scope at each handshake (403 insufficient_scope):
    # max_authorizations rounds, then the refusal is the answer.
    s = await start_ws(nursery)

    class Bumping(list[HttpRequest]):
        def append(self, head: HttpRequest) -> None:
            super().append(head)
            if head.header("authorization") is not None:
                s.required_scopes = f"{s.required_scopes} x{len(self)}"

    s.heads = Bumping()
    # The error says why: the challenge's error, and the limit.
    refused = r"still refused \(403 insufficient_scope\) after 2 authorizations \(max_auth"
    with trio.fail_after(IO_TIMEOUT), pytest.raises(SessionClosed, match=refused):
        async with open_client(s.url, auth=oauth(max_authorizations=2)):
            pass  # pragma: no cover
    assert len(s.asrv.authorizations) == 2
    assert len(s.heads) == 3


def test_an_oauth_keeps_the_authorizers_of_the_last_16_websocket_urls_used() -> None:
    auth = oauth()
    first = auth._websocket_authorizer("ws://127.0.0.1:1/mcp")
    second = auth._websocket_authorizer("ws://127.0.0.1:2/mcp")
    for port in range(3, 17):
        auth._websocket_authorizer(f"ws://127.0.0.1:{port}/mcp")
    assert auth._websocket_authorizer("ws://127.0.0.1:1/mcp") is first  # (used again)
    auth._websocket_authorizer("ws://127.0.0.1:17/mcp")
    assert len(auth._websocket_authorizers) == 16
    assert auth._websocket_authorizer("ws://127.0.0.1:1/mcp") is first
    assert auth._websocket_authorizer("ws://127.0.0.1:2/mcp") is not second  # (forgotten)


@pytest.mark.parametrize("authorize_first", [False, True])
async def test_a_new_connection_asks_again_after_a_token_refused_as_just_issued(
    nursery: trio.Nursery, authorize_first: bool
) -> None:
    # The authorization server issues tokens for another audience: the first
    # connection fails (the user is not asked twice for it). Once that is repaired, a
    # new connection of the same OAuth asks again, as a new HTTP client would (or
    # OAuth.authorize does, before it).
    s = await start_ws(nursery, audience="https://elsewhere.example/mcp")
    auth = oauth()
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(SessionClosed, match="authorization failed"):
            async with open_client(s.url, auth=auth):
                pass  # pragma: no cover
        s.asrv.audience = None
        if authorize_first:
            await auth.authorize(s.url)  # (keeps the token it holds, as for HTTP)
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 2


async def test_a_token_revoked_between_connections_is_replaced(nursery: trio.Nursery) -> None:
    # The shared Authorizer learns that its token was taken (else the later 401 would
    # be taken for a refusal of a token just issued).
    s = await start_ws(nursery)
    auth = oauth()
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, auth=auth) as client:
            await client.call_tool("whoami", {})
        s.asrv.tokens.clear()  # (revoked)
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert len(s.asrv.authorizations) == 2


def test_overlapping_connections_share_one_attempt_and_a_later_one_starts_afresh() -> None:
    authorizer = oauth()._websocket_authorizer("ws://127.0.0.1:1/mcp")

    def memory() -> tuple[bytes | None, dict[str, set[frozenset[str]]]]:
        return authorizer._unconfirmed, authorizer._refused_scopes

    with authorizer.connecting():
        authorizer._unconfirmed = b"Bearer t"
        authorizer._refused_scopes["r"] = {frozenset({"mcp"})}
        with authorizer.connecting():  # (begun meanwhile: the same attempt)
            assert memory() == (b"Bearer t", {"r": {frozenset({"mcp"})}})
    with authorizer.connecting():
        assert memory() == (None, {})

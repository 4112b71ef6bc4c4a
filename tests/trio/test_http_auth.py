"""serve_http(authenticate=...) over real sockets: bearer challenges, the Protected
Resource Metadata, the principal in handlers of both eras, sessions and requestState
bound to their principal, and a failing or hanging authenticator."""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Literal

import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps
from mcp_sansio.http import HttpRequest, HttpResponse
from mcp_trio import (
    BearerAuth,
    Context,
    HandshakeFailed,
    HttpTransportConfig,
    NotificationContext,
    Principal,
    ProtectedResourceMetadata,
    Server,
    bearer_challenge,
    open_client,
)
from mcp_trio._http_server import HttpServeHandle

from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    MODERN,
    POST_HEADERS,
    App,
    RawConnection,
    RawResponse,
    call,
    initialize_body,
    raw_request,
    rpc,
    server_connection_config,
    start_server,
    text_of,
)

METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp",
    authorization_servers=["https://auth.example.com"],
    scopes_supported=["mcp"],
)
TOKENS = {
    "alice-token": Principal(subject="alice", scopes={"mcp", "files:read"}, claims={"n": 1}),
    "bob-token": Principal(subject="bob", scopes={"mcp"}),
    "weak-token": Principal(subject="carol", scopes={"files:read"}),
    "expired-token": Principal(subject="dave", scopes={"mcp"}, expires_at=1.0),
    "expired-weak-token": Principal(subject="erin", scopes={"files:read"}, expires_at=1.0),
}


class Verifier:
    """A token table, counting what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, token: str) -> Principal | None:
        self.asked.append(token)
        await trio.lowlevel.checkpoint()
        return TOKENS.get(token)


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (*POST_HEADERS, ("authorization", f"Bearer {token}"))


def challenge_params(response: RawResponse) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    params = {}
    for part in value[len("Bearer ") :].split(", "):
        name, _, quoted = part.partition("=")
        assert quoted.startswith('"') and quoted.endswith('"'), value
        params[name] = quoted[1:-1]
    return params


async def protected(
    nursery: trio.Nursery, app: App | None = None, **kwargs: Any
) -> tuple[HttpServeHandle, Verifier]:
    verifier = Verifier()
    auth = BearerAuth(
        verify_token=verifier, resource_metadata_url=METADATA.url, required_scopes={"mcp"}
    )
    http = {"resource_metadata": METADATA, **kwargs.pop("http", {})}
    server = await start_server(nursery, app, authenticate=auth, http=http, **kwargs)
    return server, verifier


# ================================================================== refusals


async def test_no_token_is_401_with_a_challenge_naming_the_metadata(nursery: trio.Nursery) -> None:
    server, verifier = await protected(nursery)
    with trio.fail_after(IO_TIMEOUT):
        refused = await raw_request(server.port, "POST", body=initialize_body())
    assert refused.status == 401
    assert challenge_params(refused) == {
        "scope": "mcp",
        "resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
    }
    assert verifier.asked == [] and server.statistics().sessions == 0


@pytest.mark.parametrize(
    ("token", "status", "error"),
    [
        ("stolen-token", 401, "invalid_token"),
        ("weak-token", 403, "insufficient_scope"),
        ("expired-token", 401, "invalid_token"),
        # Expired and short of a scope: refresh it, not ask for more (RFC 6750 section 3.1).
        ("expired-weak-token", 401, "invalid_token"),
    ],
)
async def test_a_refused_token_gets_its_error(
    nursery: trio.Nursery, token: str, status: int, error: str
) -> None:
    app = App()
    server, verifier = await protected(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        for body in (initialize_body(), rpc(1, "tools/call", call("echo", text="x"))):
            refused = await raw_request(server.port, "POST", headers=bearer(token), body=body)
            assert refused.status == status
            params = challenge_params(refused)
            assert params["error"] == error and params["scope"] == "mcp"
            assert params["resource_metadata"] == METADATA.url
            assert refused.json()["error"] == error
    assert verifier.asked == [token, token]
    assert server.statistics().sessions == 0 and app.started == []


async def test_a_malformed_authorization_header_is_400(nursery: trio.Nursery) -> None:
    server, verifier = await protected(nursery)
    with trio.fail_after(IO_TIMEOUT):
        refused = await raw_request(
            server.port,
            "POST",
            headers=(*POST_HEADERS, ("authorization", "Bearer two tokens")),
            body=initialize_body(),
        )
    assert refused.status == 400 and challenge_params(refused)["error"] == "invalid_request"
    assert verifier.asked == []


async def test_every_method_is_authenticated_before_anything_else(nursery: trio.Nursery) -> None:
    server, _ = await protected(nursery)
    with trio.fail_after(IO_TIMEOUT):
        for method, headers in [
            ("GET", (("accept", "text/event-stream"), ("mcp-session-id", "whatever"))),
            ("DELETE", (("mcp-session-id", "whatever"),)),
            ("POST", POST_HEADERS),  # an empty body: would be a parse error (400)
        ]:
            refused = await raw_request(server.port, method, headers=headers)
            assert refused.status == 401, (method, refused)


# ================================================================== the metadata


@pytest.mark.parametrize(
    "path",
    ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
)
async def test_the_metadata_is_served_without_a_token(nursery: trio.Nursery, path: str) -> None:
    server, verifier = await protected(nursery)
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(
            server.port, "GET", path, headers=(("origin", "https://app.example"),)
        )
    assert response.status == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
    }
    assert verifier.asked == []


async def test_the_metadata_and_a_preflight_keep_the_connection(nursery: trio.Nursery) -> None:
    # Early answers closed the connection even for a request without a body: every CORS
    # preflight (one per new Mcp-Param-* name) and metadata fetch cost a new connection.
    server, _ = await protected(nursery, http={"cors": True})
    page = ("origin", f"http://127.0.0.1:{server.port}")
    preflight = (page, ("access-control-request-method", "POST"))
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("GET", "/.well-known/oauth-protected-resource/mcp", headers=(page,))
            first = await conn.response()
            assert first.status == 200 and "connection" not in first.headers
            conn.next_cycle()
            await conn.send("OPTIONS", headers=preflight)
            second = await conn.response()
            assert second.status == 204 and "connection" not in second.headers
            conn.next_cycle()
            await conn.send("POST", headers=(*bearer("alice-token"), page), body=initialize_body())
            assert (await conn.response()).status == 200  # the same connection, still
        finally:
            await conn.aclose()


# ================================================================== who is calling


def principal_server() -> Server:
    server = Server("whoami")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        principal = ctx.principal
        raw = ctx.request_context.principal
        assert raw is principal
        if principal is None:
            return "nobody"
        return f"{principal.subject} {sorted(principal.scopes)} {dict(principal.claims)}"

    return server


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_handlers_see_the_principal_in_both_eras(
    nursery: trio.Nursery, era: Literal["legacy", "modern"]
) -> None:
    verifier = Verifier()
    server = principal_server()
    handle = await nursery.start(
        partial(
            server.serve_http,
            port=0,
            authenticate=BearerAuth(verify_token=verifier, resource_metadata_url=METADATA.url),
        )
    )
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(
            handle.url, era=era, headers={"Authorization": "Bearer alice-token"}
        ) as client:
            assert client.era.value == era
            result = await client.call_tool("whoami", {})
            assert result.text == "alice ['files:read', 'mcp'] {'n': 1}"
    assert set(verifier.asked) == {"alice-token"}  # once per HTTP request


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_client_without_auth_names_the_challenge(
    nursery: trio.Nursery, era: Literal["legacy", "modern"]
) -> None:
    # The core words the 401 (as BlockingClient.http's): the challenge is quoted, so
    # the caller sees what the server wants (the Trio client said "status 401").
    server = principal_server()
    auth = BearerAuth(verify_token=Verifier(), resource_metadata_url=METADATA.url)
    handle = await nursery.start(partial(server.serve_http, port=0, authenticate=auth))
    with trio.fail_after(IO_TIMEOUT), pytest.raises(HandshakeFailed) as refused:
        async with open_client(handle.url, era=era):
            pass  # pragma: no cover
    assert "status 401: the server wants authorization (WWW-Authenticate: Bearer" in str(
        refused.value
    )
    assert f'resource_metadata="{METADATA.url}"' in str(refused.value)
    assert refused.value.data["wwwAuthenticate"].startswith("Bearer")


async def test_without_authenticate_the_principal_is_none(nursery: trio.Nursery) -> None:
    server = principal_server()
    handle = await nursery.start(partial(server.serve_http, port=0))
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(handle.url, era="modern") as client:
            assert (await client.call_tool("whoami", {})).text == "nobody"
        async with open_client(server, era="legacy") as client:  # (in memory: no HTTP)
            assert (await client.call_tool("whoami", {})).text == "nobody"


async def test_a_legacy_session_refuses_another_principal(nursery: trio.Nursery) -> None:
    app = App()
    noted: list[Any] = []
    got_note = trio.Event()

    async def roots_changed(ctx: Any) -> None:
        noted.append(ctx.principal)
        got_note.set()

    app.handlers.set_notification_handler("notifications/roots/list_changed", roots_changed)
    server, _ = await protected(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        created = await raw_request(
            server.port, "POST", headers=bearer("alice-token"), body=initialize_body()
        )
        assert created.status == 200
        sid = created.headers["mcp-session-id"]
        in_session = (("mcp-session-id", sid), ("mcp-protocol-version", LEGACY))
        note = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        done = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), *in_session), body=note
        )
        assert done.status == 202
        roots = dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        changed = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), *in_session), body=roots
        )
        assert changed.status == 202
        await got_note.wait()
        assert noted == [TOKENS["alice-token"]]  # notification handlers see it too
        echo = rpc(2, "tools/call", call("echo", text="mine"))
        hijack = await raw_request(
            server.port, "POST", headers=(*bearer("bob-token"), *in_session), body=echo
        )
        unknown = await raw_request(
            server.port,
            "POST",
            headers=(*bearer("bob-token"), ("mcp-session-id", "nope"), in_session[1]),
            body=echo,
        )
        assert hijack.status == unknown.status == 404 and hijack.body == unknown.body
        stream = await raw_request(
            server.port,
            "DELETE",
            headers=(*bearer("bob-token"), *in_session),
        )
        assert stream.status == 404 and server.statistics().sessions == 1
        mine = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), *in_session), body=echo
        )
        assert mine.status == 200 and b'"mine"' in mine.body


def ask_body(rid: int, **extra: Any) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
    }
    return rpc(rid, "tools/call", {"name": "ask", "arguments": {}, **extra, "_meta": meta})


ASK_HEADERS = (("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "ask"))


async def test_a_request_state_is_refused_to_another_principal(nursery: trio.Nursery) -> None:
    server, _ = await protected(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        first = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), *ASK_HEADERS), body=ask_body(1)
        )
        assert first.status == 200
        result = first.json()["result"]
        assert result["resultType"] == "input_required"
        retry = ask_body(
            2,
            requestState=result["requestState"],
            inputResponses={"where": {"roots": [{"uri": "file:///srv"}]}},
        )
        stolen = await raw_request(
            server.port, "POST", headers=(*bearer("bob-token"), *ASK_HEADERS), body=retry
        )
        error = stolen.json()["error"]
        assert error["code"] == -32602 and "requestState" in error["message"]
        mine = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), *ASK_HEADERS), body=retry
        )
        assert text_of(mine.json()["result"]) == "file:///srv"


# ================================================================== a faulty authenticator


async def test_an_authenticator_that_fails_is_500_and_the_server_goes_on(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    async def authenticate(request: HttpRequest) -> Principal | HttpResponse:
        await trio.lowlevel.checkpoint()
        token = request.header("authorization")
        if token == "Bearer boom":
            raise ValueError(f"invalid literal for int(): {token!r}")  # (int(token))
        if token == "Bearer odd":
            return "not a principal"  # type: ignore[return-value]
        if token == "Bearer ok":
            return Principal(subject="ok")
        return bearer_challenge()

    server = await start_server(nursery, authenticate=authenticate)
    echo = rpc(1, "tools/call", call("echo", text="still here"))
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.ERROR, "mcp_trio"):
        conn = await RawConnection.open(server.port)
        try:
            for token in ("boom", "odd"):
                await conn.send("POST", headers=bearer(token), body=initialize_body())
                failed = await conn.response()
                assert failed.status == 500
                conn.next_cycle()  # the same connection serves the next request
            modern = (*bearer("ok"), ("mcp-protocol-version", MODERN), ("mcp-method", "x"))
            await conn.send("POST", headers=modern, body=echo)
            assert (await conn.response()).status == 400  # (a header mismatch: served)
        finally:
            await conn.aclose()
        async with open_client(server.url, headers={"Authorization": "Bearer ok"}) as client:
            assert (await client.request("tools/call", call("echo", text="x")))["content"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("authenticate hook failed for POST /mcp: ValueError" in m for m in messages)
    assert any("returned a str, neither a Principal nor an HttpResponse" in m for m in messages)
    # No token in the log: not in a message, not in an exception's text or traceback.
    assert "boom" not in caplog.text and "Bearer" not in caplog.text


async def test_an_authenticator_that_hangs_is_503_after_its_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    entered = trio.Event()

    async def authenticate(request: HttpRequest) -> Principal:
        entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    server = await start_server(
        nursery, authenticate=authenticate, transport=HttpTransportConfig(authenticate_timeout=3)
    )
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", body=initialize_body())
            await entered.wait()
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(4)
            response = await conn.response()
        finally:
            await conn.aclose()
    assert response.status == 503 and response.headers["retry-after"] == "1"


async def test_any_hook_s_expired_principal_is_refused(nursery: trio.Nursery) -> None:
    # As BearerAuth's is: a hook of one's own need not compare expires_at itself.
    async def authenticate(request: HttpRequest) -> Principal:
        return Principal(subject="dave", expires_at=1.0)

    app = App()
    server = await start_server(nursery, app, authenticate=authenticate)
    with trio.fail_after(IO_TIMEOUT):
        refused = await raw_request(server.port, "POST", body=initialize_body())
    assert refused.status == 401
    assert challenge_params(refused) == {
        "error": "invalid_token",
        "error_description": "The access token expired",
    }
    assert server.statistics().sessions == 0 and app.started == []


async def test_a_bearer_auth_s_principal_is_judged_by_its_clock_only(
    nursery: trio.Nursery,
) -> None:
    # The server does not check it again by the wall clock (for which it expired long
    # ago): BearerAuth has judged it by its own.
    async def verify(token: str) -> Principal:
        return Principal(subject="dave", scopes={"mcp"}, expires_at=1000.0)

    auth = BearerAuth(verify_token=verify, resource_metadata_url=METADATA.url, clock=lambda: 999.0)
    server = await start_server(
        nursery, App(), authenticate=auth, http={"resource_metadata": METADATA}
    )
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(
            server.port, "POST", headers=bearer("t"), body=initialize_body()
        )
    assert response.status == 200


@pytest.mark.parametrize("dpop", ["off", "allowed"])
@pytest.mark.parametrize(("now", "accepted"), [(999.0, True), (1000.0, False), (1001.0, False)])
async def test_bearer_auth_reads_expiry_by_its_own_clock(
    dpop: Literal["off", "allowed"], now: float, accepted: bool
) -> None:
    principal = Principal(subject="dave", scopes={"mcp"}, expires_at=1000.0)

    async def verify(token: str) -> Principal:
        return principal

    auth = BearerAuth(verify_token=verify, required_scopes={"mcp"}, dpop=dpop, clock=lambda: now)
    request = HttpRequest(method="POST", target="/mcp", headers=((b"authorization", b"Bearer t"),))
    found = await auth(request)
    if accepted:
        assert found is principal
    else:
        assert isinstance(found, HttpResponse) and found.status == 401
        challenge = b" ".join(v for k, v in found.headers if k == b"www-authenticate")
        assert b'error="invalid_token"' in challenge and b"expired" in challenge


def test_bearer_auth_refuses_what_a_challenge_cannot_carry_at_once() -> None:
    # Not at the first request, as a 500 (bearer_challenge's ValueError).
    with pytest.raises(ValueError, match="not a scope token"):
        BearerAuth(verify_token=Verifier(), required_scopes=['files"read'])
    with pytest.raises(ValueError, match="a character a URL may not have"):
        BearerAuth(verify_token=Verifier(), resource_metadata_url="https://m.example/\r\nX: 1")
    with pytest.raises(ValueError, match="cannot carry"):
        BearerAuth(verify_token=Verifier(), resource_metadata_url='https://m.example/"x')


@pytest.mark.parametrize(
    "url",
    [
        "/.well-known/oauth-protected-resource",  # relative
        "mcp.example.com/.well-known/oauth-protected-resource",
        "http://mcp.example.com/.well-known/oauth-protected-resource",  # http, not loopback
        "https://mcp.example.com/.well-known/oauth-protected-resource#top",
        "https://mcp.example.com:99999/.well-known/oauth-protected-resource",
    ],
)
def test_bearer_auth_refuses_a_metadata_url_clients_would_not_follow(url: str) -> None:
    with pytest.raises(ValueError, match="resource_metadata URL"):
        BearerAuth(verify_token=Verifier(), resource_metadata_url=url)


def test_bearer_auth_takes_an_https_or_loopback_metadata_url() -> None:
    for url in (
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "http://127.0.0.1:8000/.well-known/oauth-protected-resource",
    ):
        assert BearerAuth(verify_token=Verifier(), resource_metadata_url=url).resource_metadata_url
    assert BearerAuth(verify_token=Verifier()).resource_metadata_url is None


async def test_authenticating_without_the_metadata_is_warned_of(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # 2026-07-28/basic/authorization: servers MUST serve it; a refused client cannot find
    # the authorization server otherwise.
    auth = BearerAuth(verify_token=Verifier())
    with caplog.at_level(logging.WARNING, "mcp_trio"):
        await start_server(nursery, authenticate=auth)
        assert "clients cannot discover the authorization server" in caplog.text
        caplog.clear()
        await protected(nursery)
        assert "cannot discover" not in caplog.text


# ================================================================== CORS


async def test_a_browser_page_can_read_every_answer(nursery: trio.Nursery) -> None:
    server, _ = await protected(nursery, http={"cors": True})
    page = ("origin", "http://localhost:3000")

    def readable(response: RawResponse) -> bool:
        exposed = response.headers.get("access-control-expose-headers", "").lower()
        return (
            response.headers.get("access-control-allow-origin") == page[1]
            and "mcp-session-id" in exposed
            and "www-authenticate" in exposed
        )

    with trio.fail_after(IO_TIMEOUT):
        preflight = await raw_request(
            server.port,
            "OPTIONS",
            headers=(
                page,
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "authorization, content-type"),
            ),
        )
        assert preflight.status == 204  # before authentication: a preflight has no token
        granted = preflight.headers["access-control-allow-headers"].lower().split(", ")
        assert "authorization" in granted and "content-type" in granted
        refused = await raw_request(server.port, "POST", headers=(*POST_HEADERS, page))
        assert refused.status == 401 and readable(refused)
        created = await raw_request(
            server.port, "POST", headers=(*bearer("alice-token"), page), body=initialize_body()
        )
        assert created.status == 200 and readable(created)
        sid = created.headers["mcp-session-id"]
        streamed = await raw_request(
            server.port,
            "POST",
            headers=(
                *bearer("alice-token"),
                page,
                ("mcp-session-id", sid),
                ("mcp-protocol-version", LEGACY),
            ),
            body=rpc(2, "tools/call", call("echo", text="sse")),
        )
        assert streamed.headers["content-type"] == "text/event-stream" and readable(streamed)
        metadata = await raw_request(
            server.port, "GET", "/.well-known/oauth-protected-resource", headers=(page,)
        )
        assert metadata.headers["access-control-allow-origin"] == "*"  # public, and only once
        plain = await raw_request(server.port, "POST", headers=bearer("alice-token"))
        assert "access-control-allow-origin" not in plain.headers  # not a browser


async def test_a_notification_handler_reads_the_principal_on_every_transport() -> None:
    # HttpNotificationContext had it, NotificationContext (in memory, stdio, WebSocket)
    # did not: one handler for every transport raised AttributeError off HTTP.
    app = App()
    seen: list[Principal | None] = []
    got = trio.Event()

    async def roots_changed(ctx: NotificationContext) -> None:
        seen.append(ctx.principal)
        got.set()

    app.handlers.set_notification_handler("notifications/roots/list_changed", roots_changed)
    with trio.fail_after(IO_TIMEOUT):
        pair = (app.handlers, server_connection_config())
        async with open_client(pair, era="legacy", roots=[]) as client:
            await client.notify("notifications/roots/list_changed")
            await got.wait()
    assert seen == [None]

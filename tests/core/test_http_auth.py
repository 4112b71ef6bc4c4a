"""Authorization as a resource server, sans-IO: principals, the Protected Resource
Metadata document and where it is served, bearer credentials and challenges, and the
binding of legacy sessions and modern ``requestState`` to a principal. No I/O."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from mcp_sansio import Connection, ErrorCode, RemoteProtocolError, RequestReceived
from mcp_sansio._json import loads
from mcp_sansio.http import (
    WELL_KNOWN_RESOURCE_PATH,
    AwaitResponse,
    HttpRequest,
    HttpResponse,
    HttpServer,
    HttpServerConfig,
    Principal,
    ProtectedResourceMetadata,
    ResponseReady,
    bearer_challenge,
    bearer_token,
    check_metadata_url,
)

from .test_http_server import (
    CC,
    error_of,
    in_session,
    initialize,
    make_server,
    modern,
    modern_headers,
    note,
    received,
    req,
    rpc,
)

METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp",
    authorization_servers=["https://auth.example.com"],
    scopes_supported=["files:read"],
    resource_name="Files",
)

# ================================================================== values


def test_a_principal_is_a_frozen_value_compared_without_its_claims() -> None:
    alice = Principal(subject="alice", scopes=["a", "b"], claims={"exp": 1})
    assert alice.scopes == frozenset({"a", "b"})
    assert alice == Principal(subject="alice", scopes={"b", "a"}, claims={"exp": 2})
    assert alice != Principal(subject="alice", scopes={"a"})
    assert hash(alice) == hash(Principal(subject="alice", scopes={"a", "b"}))
    with pytest.raises(TypeError):
        alice.claims["exp"] = 5  # type: ignore[index]
    assert alice.has_scopes({"a"}) and alice.has_scopes(()) and not alice.has_scopes({"a", "c"})
    assert (
        Principal(subject="x").scopes == frozenset() and dict(Principal(subject="x").claims) == {}
    )
    # A token's scope claim is a space-separated string (RFC 6749 §3.3).
    assert Principal(subject="x", scopes="a  b").scopes == frozenset({"a", "b"})
    assert alice.has_scopes("b a") and not alice.has_scopes("a c")


@pytest.mark.parametrize(
    ("resource", "url"),
    [
        (
            "https://mcp.example.com/mcp",
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        ),
        ("https://mcp.example.com", "https://mcp.example.com/.well-known/oauth-protected-resource"),
        (
            "https://mcp.example.com/",
            "https://mcp.example.com/.well-known/oauth-protected-resource",
        ),
        (
            "https://mcp.example.com:8443/public/mcp/",
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource/public/mcp",
        ),
    ],
)
def test_the_metadata_url_inserts_the_well_known_suffix_before_the_path(
    resource: str, url: str
) -> None:
    # RFC 9728 §3.1; authorization-server-discovery: path-based first.
    metadata = ProtectedResourceMetadata(resource=resource, authorization_servers=["https://a"])
    assert metadata.url == url


@pytest.mark.parametrize(
    ("resource", "servers"),
    [
        ("mcp.example.com", ["https://a"]),  # no scheme
        ("https:///mcp", ["https://a"]),  # no authority
        ("https://mcp.example.com/mcp#frag", ["https://a"]),  # a fragment
        ("https://mcp.example.com/mcp", []),  # MUST list an authorization server
    ],
)
def test_bad_metadata_is_refused(resource: str, servers: list[str]) -> None:
    with pytest.raises(ValueError):
        ProtectedResourceMetadata(resource=resource, authorization_servers=servers)


def test_metadata_lists_are_not_strings_but_scopes_may_be() -> None:
    # A string was a list of its characters: ["h", "t", "t", "p", ...] in the document.
    with pytest.raises(TypeError, match="not the string"):
        ProtectedResourceMetadata(
            resource="https://m.example/mcp", authorization_servers="https://a"
        )
    with pytest.raises(TypeError, match="not the string"):
        ProtectedResourceMetadata(
            resource="https://m.example/mcp",
            authorization_servers=["https://a"],
            bearer_methods_supported="header",
        )
    # Scopes are an OAuth scope string as anywhere else (Principal, BearerAuth).
    spaced = ProtectedResourceMetadata(
        resource="https://m.example/mcp",
        authorization_servers=["https://a"],
        scopes_supported="mcp files:read",
    )
    assert spaced.document()["scopes_supported"] == ["mcp", "files:read"]


def test_the_metadata_url_keeps_the_resource_query() -> None:
    # RFC 9728 §3.1: the well-known suffix goes before the path; the query stays.
    metadata = ProtectedResourceMetadata(
        resource="https://m.example/mcp?tenant=7", authorization_servers=["https://a"]
    )
    assert metadata.url == "https://m.example/.well-known/oauth-protected-resource/mcp?tenant=7"


def test_the_metadata_document_has_the_rfc_9728_fields() -> None:
    metadata = ProtectedResourceMetadata(
        resource="https://mcp.example.com/mcp",
        authorization_servers=("https://auth.example.com",),
        extra={"jwks_uri": "https://mcp.example.com/jwks", "resource": "overridden?"},
    )
    assert metadata.document() == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "bearer_methods_supported": ["header"],
        "jwks_uri": "https://mcp.example.com/jwks",
    }
    assert METADATA.document() == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        "scopes_supported": ["files:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Files",
    }
    response = METADATA.response()
    assert response.status == 200 and response.header("content-type") == "application/json"
    assert loads(response.body) == METADATA.document()
    assert METADATA.paths("/mcp") == {WELL_KNOWN_RESOURCE_PATH, WELL_KNOWN_RESOURCE_PATH + "/mcp"}
    assert METADATA.paths("/v1/mcp") == {
        WELL_KNOWN_RESOURCE_PATH,
        WELL_KNOWN_RESOURCE_PATH + "/mcp",
        WELL_KNOWN_RESOURCE_PATH + "/v1/mcp",
    }


# ================================================================== bearer credentials


def head(*headers: tuple[str, str]) -> HttpRequest:
    return HttpRequest(method="POST", target="/mcp", headers=list(headers))


@pytest.mark.parametrize(
    ("headers", "token"),
    [
        ((), None),
        ((("authorization", "Basic YWxhZGRpbjpvcGVuc2VzYW1l"),), None),
        ((("authorization", 'Digest username="a", realm="b"'),), None),
        ((("authorization", "Bearer abc.DEF-_~+/=="),), "abc.DEF-_~+/=="),
        ((("authorization", "bearer   tok  "),), "tok"),
        ((("Authorization", "BEARER tok"),), "tok"),
    ],
)
def test_bearer_token_reads_the_authorization_header(
    headers: tuple[tuple[str, str], ...], token: str | None
) -> None:
    assert bearer_token(head(*headers)) == token


@pytest.mark.parametrize(
    "headers",
    [
        (("authorization", "Bearer"),),
        (("authorization", "Bearer "),),
        (("authorization", "Bearer a b"),),
        (("authorization", "Bearer a=b"),),
        (("authorization", 'Bearer "quoted"'),),
        (("authorization", "Bearer a"), ("authorization", "Bearer b")),
    ],
)
def test_malformed_bearer_credentials_are_the_peers_error(
    headers: tuple[tuple[str, str], ...],
) -> None:
    with pytest.raises(RemoteProtocolError):
        bearer_token(head(*headers))


def test_challenges_follow_rfc_6750() -> None:
    url = METADATA.url
    missing = bearer_challenge(resource_metadata=url, scope={"b", "a"})
    assert missing.status == 401 and missing.body == b""
    assert missing.header("www-authenticate") == f'Bearer scope="a b", resource_metadata="{url}"'
    invalid = bearer_challenge("invalid_token", resource_metadata=url, description="expired")
    assert invalid.status == 401
    assert invalid.header("www-authenticate") == (
        f'Bearer error="invalid_token", resource_metadata="{url}", error_description="expired"'
    )
    assert loads(invalid.body) == {"error": "invalid_token", "error_description": "expired"}
    short = bearer_challenge("insufficient_scope", scope=["files:write", "files:read"])
    assert short.status == 403
    assert short.header("www-authenticate") == (
        'Bearer error="insufficient_scope", scope="files:read files:write"'
    )
    assert bearer_challenge("invalid_request").status == 400
    assert bearer_challenge().header("www-authenticate") == "Bearer"


@pytest.mark.parametrize(
    "bad",
    [
        {"description": 'say "no"'},  # RFC 6750 §3 allows no quote, no escaping
        {"description": "a \\ b"},
        {"description": "a\nX-Injected: 1"},  # (h11 refused the header: connection dropped)
        {"description": "caf\u00e9"},
        {"resource_metadata": 'https://m.example/"x'},
        {"scope": ["files read"]},  # a scope token has no space
        {"scope": ['a"b']},
    ],
)
def test_a_challenge_refuses_what_its_header_cannot_carry(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"cannot carry|not a scope token"):
        bearer_challenge("invalid_token", **bad)


# ================================================================== the metadata, served


@pytest.mark.parametrize("path", [WELL_KNOWN_RESOURCE_PATH, WELL_KNOWN_RESOURCE_PATH + "/mcp"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_metadata_is_served_at_the_well_known_paths(path: str, method: str) -> None:
    srv = make_server(resource_metadata=METADATA)
    # No token and a foreign Origin are fine: the document is public.
    request = req(method, target=path, origin="https://app.example")
    assert srv.check_head(request) == METADATA.response()
    reply = srv.handle_request(request, now=0)
    assert isinstance(reply.decision, HttpResponse) and loads(reply.decision.body)["resource"]


@pytest.mark.parametrize(
    ("config", "method", "target", "host", "status"),
    [
        ({}, "GET", WELL_KNOWN_RESOURCE_PATH, "localhost:8000", 404),  # none configured
        (
            {"resource_metadata": METADATA},
            "GET",
            WELL_KNOWN_RESOURCE_PATH + "/x",
            "localhost:1",
            404,
        ),
        ({"resource_metadata": METADATA}, "POST", WELL_KNOWN_RESOURCE_PATH, "localhost:1", 405),
        ({"resource_metadata": METADATA}, "GET", WELL_KNOWN_RESOURCE_PATH, "evil.example", 421),
        (
            {"resource_metadata": METADATA, "allowed_hosts": None},
            "GET",
            WELL_KNOWN_RESOURCE_PATH,
            "evil.example",
            200,
        ),
    ],
)
def test_metadata_refusals(
    config: dict[str, Any], method: str, target: str, host: str, status: int
) -> None:
    srv = make_server(**config)
    answer = srv.check_head(req(method, target=target, host=host))
    assert answer is not None and answer.status == status
    if status == 405:
        assert answer.header("allow") == "GET, HEAD"


# ================================================================== principals bind state


def _session_for(srv: HttpServer, principal: str | None) -> str:
    reply = srv.handle_request(req(body=initialize()), now=0, principal=principal)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    done = srv.handle_request(
        req(body=note("notifications/initialized"), **in_session(sid)), now=0, principal=principal
    )
    assert isinstance(done.decision, HttpResponse) and done.decision.status == 202
    return sid


def test_a_full_table_evicts_the_callers_own_idle_session_first() -> None:
    # One principal could push everybody else's sessions out of a full table; it now
    # replaces its own idle ones while it has any.
    srv = make_server(max_sessions=3)
    alice = _session_for(srv, "alice")
    bob = _session_for(srv, "bob")
    first = _session_for(srv, "mallory")
    second = _session_for(srv, "mallory")  # the table was full: mallory's own went
    assert set(srv.sessions()) == {alice, bob, second} and first not in srv.sessions()
    for _ in range(5):
        _session_for(srv, "mallory")
    assert {alice, bob} <= set(srv.sessions())
    # Without an idle session of its own, the least recently used one goes, as before;
    # so does it without authentication.
    _session_for(srv, "carol")
    assert alice not in srv.sessions() and bob in srv.sessions()
    _session_for(srv, None)
    assert bob not in srv.sessions()


def test_a_principal_at_its_session_quota_replaces_its_own_idle_session_or_gets_429() -> None:
    # One caller could otherwise hold the whole table (every other caller then 503).
    srv = make_server(max_sessions=10, max_sessions_per_principal=2)
    first = _session_for(srv, "mallory")
    second = _session_for(srv, "mallory")
    third = _session_for(srv, "mallory")  # at the quota: its least recently used idle one went
    assert set(srv.sessions()) == {second, third}
    for sid in (second, third):  # both busy: nothing of its own to replace
        get = req("GET", accept="text/event-stream", **in_session(sid))
        assert srv.handle_request(get, now=0, principal="mallory").events == ()
    refused = srv.handle_request(req(body=initialize()), now=0, principal="mallory")
    assert isinstance(refused.decision, HttpResponse) and refused.decision.status == 429
    assert refused.decision.header("retry-after") == "1"
    assert error_of(refused.decision)["code"] == ErrorCode.INTERNAL_ERROR
    assert refused.events == () and set(srv.sessions()) == {second, third}
    # Other callers, and unauthenticated ones, are not held to mallory's count.
    others = [_session_for(srv, "alice"), _session_for(srv, "alice"), _session_for(srv, None)]
    others += [_session_for(srv, None), _session_for(srv, None)]
    assert set(srv.sessions()) == {second, third, *others}
    # A session that ends gives its place back.
    ended = srv.handle_request(req("DELETE", **in_session(second)), now=1, principal="mallory")
    assert isinstance(ended.decision, HttpResponse) and ended.decision.status == 204
    fourth = _session_for(srv, "mallory")
    assert first not in srv.sessions() and {third, fourth} <= set(srv.sessions())
    assert _session_for(srv, "alice") in srv.sessions()  # alice at 2 replaced her own
    assert sum(1 for s in srv.sessions() if s in others[:2]) == 1


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_the_session_quota_is_a_positive_int(value: object) -> None:
    with pytest.raises(ValueError, match="max_sessions_per_principal"):
        make_server(max_sessions_per_principal=value)


@pytest.mark.parametrize("intruder", ["mallory", None])
def test_a_legacy_session_serves_only_the_principal_that_created_it(
    intruder: str | None,
) -> None:
    srv = make_server()
    sid = _session_for(srv, "alice")
    unknown = srv.handle_request(
        req(body=rpc(2, "ping"), **in_session("no-such-session")), now=0, principal=intruder
    ).decision
    assert isinstance(unknown, HttpResponse) and unknown.status == 404
    requests = [
        req(body=rpc(2, "ping"), **in_session(sid)),
        req("GET", accept="text/event-stream", **in_session(sid)),
        req("DELETE", **in_session(sid)),
    ]
    for request in requests:
        refused = srv.handle_request(request, now=5, principal=intruder)
        # Exactly what an unknown session gets: its existence does not leak.
        assert refused.decision == unknown and refused.events == ()
    assert srv.sessions() == (sid,)
    mine = srv.handle_request(req(body=rpc(2, "ping"), **in_session(sid)), now=5, principal="alice")
    assert isinstance(mine.decision, AwaitResponse | HttpResponse)
    ended = srv.handle_request(req("DELETE", **in_session(sid)), now=5, principal="alice")
    assert isinstance(ended.decision, HttpResponse) and ended.decision.status == 204


def test_a_session_without_a_principal_refuses_an_authenticated_one() -> None:
    srv = make_server()
    sid = _session_for(srv, None)
    refused = srv.handle_request(req(body=rpc(2, "ping"), **in_session(sid)), now=0, principal="a")
    assert isinstance(refused.decision, HttpResponse) and refused.decision.status == 404


ASKS = {
    "ok": {
        "method": "elicitation/create",
        "params": {"message": "sure?", "requestedSchema": {"type": "object", "properties": {}}},
    }
}
CAPS: dict[str, Any] = {CC: {"elicitation": {"form": {}}}}


def _sealed_for(srv: HttpServer, principal: str | None) -> str:
    body = modern(1, "tools/call", {"name": "t"}, **CAPS)
    first = srv.handle_request(
        req(body=body, **modern_headers("tools/call", "t")), now=0, principal=principal
    )
    tagged = received(first)
    assert tagged.connection.principal == principal
    tagged.connection.send_input_required(1, ASKS, state={"step": 2}, now=0.0)
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady)
    token = loads(ready.response.body)["result"]["requestState"]
    assert isinstance(token, str)
    return token


def _retry(srv: HttpServer, token: str, principal: str | None) -> Any:
    body = modern(
        2,
        "tools/call",
        {"name": "t", "inputResponses": {"ok": {"action": "accept"}}, "requestState": token},
        **CAPS,
    )
    return srv.handle_request(
        req(body=body, **modern_headers("tools/call", "t")), now=1, principal=principal
    )


@pytest.mark.parametrize("other", ["bob", None])
def test_a_request_state_is_accepted_only_from_its_principal(other: str | None) -> None:
    srv = make_server(era="modern")
    token = _sealed_for(srv, "alice")
    refused = _retry(srv, token, other).decision
    assert isinstance(refused, HttpResponse) and refused.status == 200
    error = error_of(refused)
    assert error["code"] == ErrorCode.INVALID_PARAMS and "requestState" in error["message"]
    event = received(_retry(srv, token, "alice")).event
    assert isinstance(event, RequestReceived) and event.request_state == {"step": 2}


def test_a_connection_seals_for_its_principal() -> None:
    assert Connection("server").principal is None
    assert Connection("server", principal="alice").principal == "alice"


# ================================================================== CORS


def test_cors_is_off_by_default() -> None:
    srv = make_server()
    preflight = req("OPTIONS", origin="http://localhost:3000", access_control_request_method="POST")
    answer = srv.check_head(preflight)
    assert answer is not None and answer.status == 405
    assert srv.cors_headers(req(origin="http://localhost:3000")) == ()


def test_a_preflight_grants_what_an_allowed_origin_asks() -> None:
    srv = make_server(cors=True, resource_metadata=METADATA)
    preflight = req(
        "OPTIONS",
        origin="http://localhost:3000",
        access_control_request_method="POST",
        access_control_request_headers=(
            "authorization, content-type, Mcp-Param-Region, mcp-param-region"
        ),
    )
    answer = srv.check_head(preflight)
    assert answer is not None and answer.status == 204
    assert answer.header("access-control-allow-origin") == "http://localhost:3000"
    assert answer.header("access-control-allow-methods") == "POST, GET, DELETE"
    # The MCP request headers always (one preflight serves the session), and what else
    # was asked, once each.
    granted = (answer.header("access-control-allow-headers") or "").split(", ")
    assert [g.lower() for g in granted] == [
        "authorization",
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "last-event-id",
        "mcp-param-region",
    ]
    varies = [value for name, value in answer.headers if name == b"vary"]
    assert varies == [b"Origin", b"Access-Control-Request-Headers"]
    assert answer.header("access-control-max-age")
    # A foreign origin is refused before any CORS rule; a plain OPTIONS is no preflight.
    foreign = srv.check_head(req("OPTIONS", origin="https://evil.example"))
    assert foreign is not None and foreign.status == 403
    plain = srv.check_head(req("OPTIONS", origin="http://localhost:3000"))
    assert plain is not None and plain.status == 405
    # The metadata is public: any origin, GET and HEAD only.
    public = srv.check_head(
        req(
            "OPTIONS",
            target=WELL_KNOWN_RESOURCE_PATH,
            origin="https://app.example",
            access_control_request_method="GET",
        )
    )
    assert public is not None and public.status == 204
    assert public.header("access-control-allow-origin") == "*"
    assert public.header("access-control-allow-methods") == "GET, HEAD"
    assert public.header("access-control-allow-headers") is None


def test_cors_headers_expose_what_a_browser_client_reads() -> None:
    srv = make_server(cors=True)
    headers = dict(srv.cors_headers(req(origin="http://127.0.0.1:5173")))
    assert headers[b"access-control-allow-origin"] == b"http://127.0.0.1:5173"
    exposed = headers[b"access-control-expose-headers"].lower()
    for name in (b"mcp-session-id", b"mcp-protocol-version", b"www-authenticate", b"retry-after"):
        assert name in exposed
    assert headers[b"vary"] == b"Origin"
    # The answer depends on Origin, so caches are told even when there is none.
    assert srv.cors_headers(req()) == ((b"vary", b"Origin"),)  # not a browser
    assert srv.cors_headers(req(origin="https://evil.example")) == ((b"vary", b"Origin"),)


@pytest.mark.parametrize(
    "resource",
    [
        "http://mcp.example.com/mcp",  # clients fetch the metadata over https only
        "ftp://mcp.example.com/mcp",
        "https://:443/mcp",  # no host
    ],
)
def test_a_metadata_url_clients_would_not_follow_is_refused_at_start_up(resource: str) -> None:
    metadata = ProtectedResourceMetadata(resource=resource, authorization_servers=["https://a.b"])
    with pytest.raises(ValueError, match="resource_metadata URL"):
        HttpServerConfig(resource_metadata=metadata)
    with pytest.raises(ValueError, match="resource_metadata URL"):
        check_metadata_url(metadata.url)


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "http://127.0.0.1:8000/.well-known/oauth-protected-resource",  # loopback: plain http
        "http://localhost/.well-known/oauth-protected-resource",
        "http://[::1]:9/.well-known/oauth-protected-resource",
    ],
)
def test_an_https_or_loopback_metadata_url_is_taken(url: str) -> None:
    assert check_metadata_url(url) == url
    with pytest.raises(ValueError, match="fragment"):
        check_metadata_url(url + "#x")
    with pytest.raises(ValueError, match="cannot carry"):
        check_metadata_url(url + '"')


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("dpop_signing_alg_values_supported", "ES256"),
        ("dpop_signing_alg_values_supported", ["ES256", 1]),
        ("dpop_signing_alg_values_supported", 5),
        ("dpop_bound_access_tokens_required", "false"),
        ("dpop_bound_access_tokens_required", 1),
        ("dpop_bound_access_tokens_required", 0),
    ],
)
def test_the_dpop_fields_are_type_checked(field: str, value: Any) -> None:
    # A "false" string would go in the document as a true-ish value; 1 as a number.
    with pytest.raises(TypeError):
        attrs.evolve(METADATA, **{field: value})


def test_the_metadata_document_has_the_dpop_fields() -> None:
    # RFC 9728 section 2: dpop_signing_alg_values_supported, dpop_bound_access_tokens_required.
    metadata = ProtectedResourceMetadata(
        resource="https://mcp.example.com/mcp",
        authorization_servers=("https://auth.example.com",),
        dpop_signing_alg_values_supported=["ES256"],
        dpop_bound_access_tokens_required=False,
    )
    doc = metadata.document()
    assert doc["dpop_signing_alg_values_supported"] == ["ES256"]
    assert doc["dpop_bound_access_tokens_required"] is False
    assert "dpop_signing_alg_values_supported" not in METADATA.document()
    assert "dpop_bound_access_tokens_required" not in METADATA.document()
    # extra= overrides them (and only them: the typed RFC 9728 fields win over extra).
    overridden = attrs.evolve(
        metadata,
        extra={"dpop_signing_alg_values_supported": ["RS256"], "resource": "x"},
    ).document()
    assert overridden["dpop_signing_alg_values_supported"] == ["RS256"]
    assert overridden["resource"] == "https://mcp.example.com/mcp"
    with pytest.raises(TypeError):
        ProtectedResourceMetadata(
            resource="https://m.example",
            authorization_servers=["https://a"],
            dpop_signing_alg_values_supported="ES256",
        )

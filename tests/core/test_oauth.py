"""The OAuth client rules, with no I/O: challenges, discovery URLs, metadata checks,
PKCE, scopes, the authorization response (RFC 9207) and the token endpoint."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import (
    AuthorizationServerMetadata,
    BearerChallenge,
    ClientCredentials,
    OAuthError,
    OAuthToken,
    ProtectedResourceMetadata,
    authorization_server_metadata_urls,
    authorization_url,
    check_endpoint,
    is_internal,
    is_loopback,
    new_pkce,
    parse_authorization_response,
    parse_bearer_challenge,
    parse_protected_resource_metadata,
    parse_registration,
    parse_token_response,
    protected_resource_metadata_urls,
    registration_body,
    resource_matches,
    response_challenge,
    select_scope,
    token_request,
)
from mcp_sansio._json import dumps
from mcp_sansio._oauth import websocket_http_url

ISSUER = "https://auth.example.com"


def as_metadata(**fields: Any) -> AuthorizationServerMetadata:
    doc = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "code_challenge_methods_supported": ["S256"],
        **fields,
    }
    return AuthorizationServerMetadata.parse(
        dumps({k: v for k, v in doc.items() if v is not None}), ISSUER
    )


# ------------------------------------------------------------------ challenges


def test_a_bearer_challenge_is_read_with_quoted_and_bare_values() -> None:
    challenge = parse_bearer_challenge(
        [
            'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",'
            " "
            'scope="files:read files:write", error=insufficient_scope, '
            'error_description="say \\"please\\", twice"'
        ]
    )
    assert challenge == BearerChallenge(
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",
        scope="files:read files:write",
        error="insufficient_scope",
        error_description='say "please", twice',
    )


def test_the_bearer_challenge_is_found_among_others() -> None:
    values = ['Basic realm="x", charset=UTF-8', 'Negotiate abc==, bEaReR scope="a"']
    assert parse_bearer_challenge(values) == BearerChallenge(scope="a")
    assert parse_bearer_challenge(['Basic realm="x"']) is None
    assert parse_bearer_challenge([]) is None
    assert parse_bearer_challenge(["Bearer"]) == BearerChallenge()
    assert parse_bearer_challenge(['Bearer scope = "a b"']) == BearerChallenge(scope="a b")
    # A repeated parameter: the first counts; an empty one is absent.
    assert parse_bearer_challenge(['Bearer scope="a", scope="b", error=""']) == BearerChallenge(
        scope="a"
    )


@given(st.text(max_size=200))
def test_any_header_value_parses_without_error(value: str) -> None:
    challenge = parse_bearer_challenge([value])
    assert challenge is None or isinstance(challenge, BearerChallenge)


@given(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=60))
def test_a_quoted_value_round_trips(scope: str) -> None:
    quoted = scope.replace("\\", "\\\\").replace('"', '\\"')
    assert parse_bearer_challenge([f'Bearer scope="{quoted}"']) == BearerChallenge(scope=scope)


# ------------------------------------------------------------------ discovery URLs


def test_resource_metadata_urls_in_the_spec_order() -> None:
    header = BearerChallenge(resource_metadata="https://mcp.example.com/custom.json")
    assert protected_resource_metadata_urls("https://mcp.example.com/public/mcp", header) == [
        "https://mcp.example.com/custom.json",
        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_metadata_urls("https://mcp.example.com/", None) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    ]
    # The header naming a well-known URL is not asked twice.
    same = BearerChallenge(
        resource_metadata="https://m.example/.well-known/oauth-protected-resource"
    )
    assert protected_resource_metadata_urls("https://m.example", same) == [
        "https://m.example/.well-known/oauth-protected-resource"
    ]


def test_authorization_server_metadata_urls_in_the_spec_order() -> None:
    assert authorization_server_metadata_urls("https://auth.example.com/tenant1/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert authorization_server_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "server", "match"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/", "https://mcp.example.com/mcp", True),
        ("HTTPS://MCP.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/", True),
        ("https://mcp.example.com/mc", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp/deeper", "https://mcp.example.com/mcp", False),
        ("https://evil.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
        ("mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:bad/mcp", "https://mcp.example.com/mcp", False),
        # A WebSocket server's resource: its ws(s) URL or its http(s) twin, the same.
        ("wss://mcp.example.com/mcp", "wss://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp", "wss://mcp.example.com/mcp", True),
        ("HTTPS://mcp.example.com:443", "WSS://mcp.example.com/mcp", True),
        ("http://mcp.example.com/mcp", "ws://mcp.example.com:80/mcp", True),
        ("https://mcp.example.com/mcp", "ws://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "wss://mcp.example.com/mcp", False),
        # An HTTP server's is never a ws(s) one (RFC 9728 section 3.3: identical).
        ("wss://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("ws://mcp.example.com/mcp", "http://mcp.example.com/mcp", False),
    ],
)
def test_resource_matches(resource: str, server: str, match: bool) -> None:
    assert resource_matches(resource, server) is match


@pytest.mark.parametrize(
    "url",
    [
        "http://auth.example.com/token",
        "ftp://auth.example.com/token",
        "https:///token",
        "https://auth.example.com/token#frag",
        "https://auth.example.com:99999/token",
        "/token",
    ],
)
def test_an_endpoint_must_be_https_absolute_and_fragment_free(url: str) -> None:
    for loopback in (False, True):
        with pytest.raises(OAuthError):
            check_endpoint(url, "the endpoint", loopback=loopback)


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/t",
        "http://localhost:3000/t",
        "http://127.0.0.1/t",
        "http://[::1]:1/",
    ],
)
def test_https_or_loopback_endpoints_pass(url: str) -> None:
    assert check_endpoint(url, "the endpoint", loopback=True) == url


@pytest.mark.parametrize(
    "url", ["http://localhost:3000/t", "http://127.0.0.1:8500/v1/agent/self?x=1", "http://[::1]:1/"]
)
def test_plain_http_loopback_only_for_a_loopback_server(url: str) -> None:
    # A remote https server must not steer the client's OAuth requests to plain-http
    # services on the user's machine: loopback is for a server on loopback itself.
    with pytest.raises(OAuthError, match="https"):
        check_endpoint(url, "the endpoint", loopback=False)
    assert is_loopback(url)
    assert not is_loopback("https://mcp.example.com/mcp")
    challenge = BearerChallenge(resource_metadata=url)
    [first, *_] = protected_resource_metadata_urls("https://mcp.evil.example/mcp", challenge)
    with pytest.raises(OAuthError):
        check_endpoint(first, "the protected-resource metadata URL", loopback=False)
    doc = {"issuer": ISSUER, "token_endpoint": url}
    with pytest.raises(OAuthError, match="https"):
        AuthorizationServerMetadata.parse(dumps(doc), ISSUER)
    assert (
        AuthorizationServerMetadata.parse(dumps(doc), ISSUER, loopback=True).token_endpoint == url
    )


# ------------------------------------------------------------------ metadata


def test_protected_resource_metadata_is_read_and_checked() -> None:
    doc = {
        "resource": "https://mcp.example.com",
        "authorization_servers": [ISSUER],
        "scopes_supported": ["a", "b"],
    }
    prm = parse_protected_resource_metadata(dumps(doc), "https://mcp.example.com/mcp")
    assert prm.resource == "https://mcp.example.com"  # exactly as published: no "/"
    assert prm.authorization_servers == (ISSUER,)
    assert prm.scopes_supported == ("a", "b")
    with pytest.raises(OAuthError, match="not for the server"):
        parse_protected_resource_metadata(dumps(doc), "https://other.example.com/mcp")
    # The value a server serves: the same class, its document read back whole.
    served = ProtectedResourceMetadata(
        resource="https://mcp.example.com",
        authorization_servers=[ISSUER],
        scopes_supported="a b",
        resource_name="Files",
    )
    again = parse_protected_resource_metadata(served.response().body, served.resource)
    assert again.document() == served.document()


def test_protected_resource_metadata_fills_the_typed_fields() -> None:
    doc = {
        "resource": "https://m.example/mcp",
        "authorization_servers": [ISSUER],
        "resource_name": "Files",
        "bearer_methods_supported": ["header", "body"],
        "resource_documentation": "https://m.example/docs",
        "dpop_signing_alg_values_supported": ["ES256", "RS256"],
        "dpop_bound_access_tokens_required": True,
        "other": 1,
    }
    prm = parse_protected_resource_metadata(dumps(doc), "https://m.example/mcp")
    assert prm.resource_name == "Files"
    assert prm.bearer_methods_supported == ("header", "body")
    assert prm.resource_documentation == "https://m.example/docs"
    assert prm.dpop_signing_alg_values_supported == ("ES256", "RS256")
    assert prm.dpop_bound_access_tokens_required is True
    assert dict(prm.extra) == {"other": 1}
    assert prm.document() == doc  # (read back whole, as served)
    bare = parse_protected_resource_metadata(
        dumps({"resource": "https://m.example/mcp", "authorization_servers": [ISSUER]}),
        "https://m.example/mcp",
    )
    # Absent: no statement (RFC 9728), not the "header" a served document defaults to.
    assert bare.bearer_methods_supported is None and bare.resource_name is None
    assert bare.dpop_signing_alg_values_supported is None
    assert bare.dpop_bound_access_tokens_required is None
    assert "bearer_methods_supported" not in bare.document()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("resource_name", 1),
        ("resource_name", ""),
        ("bearer_methods_supported", "header"),
        ("bearer_methods_supported", [1]),
        ("resource_documentation", ["x"]),
        ("dpop_signing_alg_values_supported", "ES256"),
        ("dpop_signing_alg_values_supported", ["ES256", 1]),
        ("dpop_bound_access_tokens_required", "yes"),
        ("dpop_bound_access_tokens_required", 1),
        ("dpop_bound_access_tokens_required", 0),
    ],
)
def test_protected_resource_metadata_with_mistyped_fields_is_refused(
    field: str, value: Any
) -> None:
    doc = {"resource": "https://m.example/mcp", "authorization_servers": [ISSUER], field: value}
    with pytest.raises(OAuthError, match=field):
        parse_protected_resource_metadata(dumps(doc), "https://m.example/mcp")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (dumps({"authorization_servers": [ISSUER]}), "'resource'"),
        (dumps({"resource": "https://m.example"}), "no authorization server"),
        (dumps({"resource": "https://m.example", "authorization_servers": []}), "no authorization"),
        (dumps({"resource": "https://m.example", "authorization_servers": [1]}), "list of strings"),
    ],
)
def test_malformed_resource_metadata_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(OAuthError, match=message):
        parse_protected_resource_metadata(body, "https://m.example/mcp")


def test_authorization_server_metadata_is_read_with_rfc_8414_defaults() -> None:
    meta = as_metadata()
    assert meta.token_endpoint_auth_methods_supported == ("client_secret_basic",)
    assert meta.grant_types_supported == ("authorization_code", "implicit")
    assert meta.registration_endpoint is None
    assert not meta.client_id_metadata_document_supported
    assert not meta.authorization_response_iss_parameter_supported
    full = as_metadata(
        registration_endpoint=f"{ISSUER}/register",
        client_id_metadata_document_supported=True,
        authorization_response_iss_parameter_supported=True,
        token_endpoint_auth_methods_supported=["none"],
    )
    assert full.registration_endpoint == f"{ISSUER}/register"
    assert full.client_id_metadata_document_supported
    assert full.authorization_response_iss_parameter_supported


@pytest.mark.parametrize(
    "issuer", [ISSUER + "/", "https://AUTH.example.com", "https://evil.example"]
)
def test_metadata_naming_another_issuer_is_refused_without_normalization(issuer: str) -> None:
    with pytest.raises(OAuthError, match="names issuer"):
        as_metadata(issuer=issuer)


@pytest.mark.parametrize(
    "fields",
    [
        {"token_endpoint": "http://auth.example.com/token"},
        {"authorization_endpoint": "http://auth.example.com/authorize"},
        {"registration_endpoint": "http://auth.example.com/register"},
        {"token_endpoint": None},
    ],
)
def test_metadata_with_an_unusable_endpoint_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(OAuthError):
        as_metadata(**fields)


INTERNAL_URLS = [
    "https://169.254.169.254/latest/meta-data/iam/security-credentials/",  # link-local
    "https://127.0.0.1:8443/admin/delete?all=1",
    "https://127.0.0.2/",
    "https://10.0.0.5/internal",
    "https://172.16.0.1/",
    "https://192.168.1.1/",
    "https://100.100.100.200/latest/meta-data/",  # shared (Alibaba Cloud's metadata)
    "https://0.0.0.0/",
    "https://[::1]:9000/x",
    "https://[::]/",
    "https://[fe80::1]/",
    "https://[fe80::1%25eth0]/",
    "https://[fd00::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:a9fe:a9fe]/",  # 169.254.169.254
    "https://[::ffff:100.64.0.1]/",  # (shared: by its IPv4 rules, not IPv6's)
    "https://localhost/",
    "https://LOCALHOST.:8443/",
    "https://idp.localhost/",
    # What inet_aton (so getaddrinfo, so the connection) reads as 127.0.0.1.
    "https://127.1/",
    "https://2130706433/",
    "https://0x7f.0.0.1/",
    "https://0177.0.0.1/",
    "https://127.0.0.1./",
]


@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_an_internal_endpoint_only_for_an_internal_server(url: str) -> None:
    # The security review: a remote https MCP server named resource_metadata,
    # authorization servers and endpoints anywhere, so could have the client send
    # requests into the user's network (a cloud's metadata service, an admin page).
    assert is_internal(url)
    with pytest.raises(OAuthError, match="private network, and the MCP server is not"):
        check_endpoint(url, "the endpoint", loopback=False)
    # A server that is itself there: local development, a server on the LAN.
    assert check_endpoint(url, "the endpoint", loopback=False, internal=True) == url
    assert check_endpoint(url, "the endpoint", loopback=True) == url
    # The challenge of a remote server, the way the client's discovery reads it.
    server = "https://mcp.attacker.example/mcp"
    assert not is_internal(server)
    first = protected_resource_metadata_urls(server, BearerChallenge(resource_metadata=url))[0]
    with pytest.raises(OAuthError, match="private network"):
        check_endpoint(first, "the resource_metadata URL", loopback=False, internal=False)
    # An authorization server's endpoints, the registration endpoint among them.
    for field in ("token_endpoint", "registration_endpoint", "authorization_endpoint"):
        with pytest.raises(OAuthError, match=f"{field} is on the local machine"):
            as_metadata(**{field: url})
        doc = {"issuer": ISSUER, "token_endpoint": f"{ISSUER}/token", field: url}
        parsed = AuthorizationServerMetadata.parse(dumps(doc), ISSUER, internal=True)
        assert getattr(parsed, field) == url


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/t",
        "https://8.8.8.8/",
        "https://[2606:4700:4700::1111]/",
        "https://[::ffff:8.8.8.8]/",
        "https://10.0.0.5.example.com/",
        "https://1.2.3.4.5/",  # (not an address: a name)
        "https://08.0.0.1/",  # (not octal: a name to the resolver)
        "https://4294967296/",  # (past 32 bits: a name)
        "https://10.0.0.256/",  # (a last part past its byte: inet_aton refuses it)
        "https://[v1.x:y]/",  # (an IPvFuture literal: no address we know)
        # Names are not resolved (the sans-IO core does no I/O): the documented limit.
        "https://127.0.0.1.nip.io/",
        "https://localhost.example.com/",
    ],
)
def test_a_public_address_or_any_other_name_is_not_internal(url: str) -> None:
    assert not is_internal(url)
    assert check_endpoint(url, "the endpoint", loopback=False) == url


def test_is_internal_of_a_malformed_url_is_false() -> None:
    assert not is_internal("https://[::1/")  # (urlsplit raises: not a URL at all)


@pytest.mark.parametrize(
    "bad",
    [
        "\x1b[2K\x1b[1AOpen https://login.example/",  # rewrites the "Open this URL" line
        "\x1b[8m",  # hides what follows
        "\x9b2J",  # a C1 CSI
        "\u202e",  # a bidirectional override
        " ",
        "\x7f",
        "é",
    ],
)
def test_an_endpoint_with_a_character_no_uri_has_is_refused(bad: str) -> None:
    # The authorization URL is built on authorization_endpoint and shown to the user:
    # an authorization server must not reach the terminal through it (RFC 3986 section
    # 2: a URI is visible ASCII). urlsplit strips only tab, CR and LF.
    for url in (f"https://auth.example.com/authorize{bad}", f"http://127.0.0.1:1/a?x={bad}"):
        with pytest.raises(OAuthError, match="a character a URL may not have") as caught:
            check_endpoint(url, "the endpoint", loopback=True)
        assert "\x1b" not in str(caught.value) and "\u202e" not in str(caught.value)
    with pytest.raises(OAuthError, match="authorization_endpoint"):
        as_metadata(authorization_endpoint=f"{ISSUER}/authorize{bad}")


def test_the_2025_03_26_fallback_endpoints_are_at_the_origin() -> None:
    meta = AuthorizationServerMetadata.fallback("https://mcp.example.com")
    assert meta.authorization_endpoint == "https://mcp.example.com/authorize"
    assert meta.token_endpoint == "https://mcp.example.com/token"
    assert meta.registration_endpoint == "https://mcp.example.com/register"
    # That revision requires S256 of every authorization server: the fallback, which
    # has no metadata to say so, is the one case where it is assumed.
    assert meta.code_challenge_methods_supported == ("S256",)


# ------------------------------------------------------------------ scopes


def test_scope_selection_follows_the_spec_priority() -> None:
    prm = ProtectedResourceMetadata(
        resource="https://m.example", authorization_servers=(ISSUER,), scopes_supported=("x", "y")
    )
    challenged = BearerChallenge(scope="a b")
    assert select_scope(challenge=challenged, resource_metadata=prm, metadata=None) == "a b"
    assert select_scope(challenge=BearerChallenge(), resource_metadata=prm, metadata=None) == "x y"
    bare = ProtectedResourceMetadata(resource="https://m.example", authorization_servers=(ISSUER,))
    assert select_scope(challenge=None, resource_metadata=bare, metadata=None) is None
    # Step-up: the challenged scopes join the ones asked for before.
    step_up = BearerChallenge(scope="b c", error="insufficient_scope")
    assert select_scope(
        challenge=step_up, resource_metadata=prm, metadata=None, previous="a b"
    ) == ("a b c")


def test_offline_access_is_asked_for_only_when_the_server_lists_it() -> None:
    listed = as_metadata(scopes_supported=["a", "offline_access"])
    challenge = BearerChallenge(scope="a")
    assert select_scope(challenge=challenge, resource_metadata=None, metadata=listed) == (
        "a offline_access"
    )
    assert (
        select_scope(
            challenge=challenge, resource_metadata=None, metadata=listed, offline_access=False
        )
        == "a"
    )
    unlisted = as_metadata(scopes_supported=["a"])
    assert select_scope(challenge=challenge, resource_metadata=None, metadata=unlisted) == "a"
    # Never as the only scope: with nothing to ask for, the scope is omitted.
    assert select_scope(challenge=None, resource_metadata=None, metadata=listed) is None


# ------------------------------------------------------------------ PKCE and the request

RFC_7636_OCTETS = bytes.fromhex(
    "7418dfb49799e0254ffa607dd8adbbba16d4254d69d6bff05b58055853848d79"
)  # RFC 7636 appendix B: 116, 24, 223, 180, ... 141, 121


def test_pkce_matches_rfc_7636_appendix_b() -> None:
    pair = new_pkce(RFC_7636_OCTETS)
    assert pair.verifier == "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert pair.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    assert "dBjft" not in repr(pair)


def test_pkce_defaults_to_fresh_randomness_and_refuses_too_little() -> None:
    first, second = new_pkce(), new_pkce()
    assert len(first.verifier) == 43 and first.verifier != second.verifier
    with pytest.raises(ValueError, match="32 bytes"):
        new_pkce(b"short")


def test_the_authorization_url_carries_every_parameter() -> None:
    meta = as_metadata(authorization_endpoint=f"{ISSUER}/authorize?tenant=t1")
    pkce = new_pkce(RFC_7636_OCTETS)
    url = authorization_url(
        meta,
        client_id="https://client.example/meta.json",
        redirect_uri="http://127.0.0.1:3000/cb",
        pkce=pkce,
        state="s1",
        resource="https://mcp.example.com",
        scope="a b",
    )
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "auth.example.com", "/authorize")
    query = parse_qs(parts.query)
    assert query == {
        "tenant": ["t1"],
        "response_type": ["code"],
        "client_id": ["https://client.example/meta.json"],
        "redirect_uri": ["http://127.0.0.1:3000/cb"],
        "code_challenge": [pkce.challenge],
        "code_challenge_method": ["S256"],
        "state": ["s1"],
        "resource": ["https://mcp.example.com"],
        "scope": ["a b"],
    }
    assert "scope%20" not in url and "scope=a%20b" in url  # spaces as %20


def test_the_authorization_url_omits_an_absent_scope_and_needs_s256() -> None:
    kwargs: dict[str, Any] = {
        "client_id": "c",
        "redirect_uri": "http://localhost/cb",
        "pkce": new_pkce(),
        "state": "s",
        "resource": "https://m.example",
        "scope": None,
    }
    assert "scope" not in parse_qs(urlsplit(authorization_url(as_metadata(), **kwargs)).query)
    with pytest.raises(OAuthError, match="S256"):
        authorization_url(as_metadata(code_challenge_methods_supported=["plain"]), **kwargs)
    # No code_challenge_methods_supported: PKCE support unknown, refused (MUST).
    with pytest.raises(OAuthError, match="S256"):
        authorization_url(as_metadata(code_challenge_methods_supported=None), **kwargs)
    with pytest.raises(OAuthError, match="authorization_endpoint"):
        authorization_url(as_metadata(authorization_endpoint=None), **kwargs)


# ------------------------------------------------------------------ the response (RFC 9207)

CALLBACK = "http://localhost:3000/cb"


@pytest.mark.parametrize(
    ("advertised", "iss", "accepted"),
    [
        (True, ISSUER, True),
        (True, None, False),
        (True, ISSUER + "/", False),
        (True, "https://AUTH.example.com", False),
        (True, "https://auth.example.com:443", False),
        (False, ISSUER, True),
        (False, "https://evil.example", False),
        (False, None, True),
    ],
)
def test_the_iss_rules(advertised: bool, iss: str | None, accepted: bool) -> None:
    meta = as_metadata(authorization_response_iss_parameter_supported=advertised)
    query = "code=c1&state=s1" + (f"&iss={iss}" if iss is not None else "")
    if accepted:
        assert (
            parse_authorization_response(f"{CALLBACK}?{query}", state="s1", metadata=meta) == "c1"
        )
    else:
        with pytest.raises(OAuthError, match="iss"):
            parse_authorization_response(f"{CALLBACK}?{query}", state="s1", metadata=meta)


def test_the_state_must_match_and_errors_are_reported() -> None:
    meta = as_metadata()
    with pytest.raises(OAuthError, match="state"):
        parse_authorization_response(f"{CALLBACK}?code=c&state=other", state="s1", metadata=meta)
    with pytest.raises(OAuthError, match="state"):
        parse_authorization_response(f"{CALLBACK}?code=c", state="s1", metadata=meta)
    with pytest.raises(OAuthError, match="access_denied") as caught:
        parse_authorization_response(
            f"{CALLBACK}?error=access_denied&error_description=no&state=s1",
            state="s1",
            metadata=meta,
        )
    assert caught.value.error == "access_denied"
    with pytest.raises(OAuthError, match="no code"):
        parse_authorization_response(f"{CALLBACK}?state=s1", state="s1", metadata=meta)


@pytest.mark.parametrize(
    "arrived",
    [
        "https://localhost:3000/cb",
        "http://localhost:3001/cb",
        "http://127.0.0.1:3000/cb",
        "http://localhost:3000/other",
        "http://localhost/cb",
    ],
)
def test_the_response_must_arrive_at_the_redirect_uri(arrived: str) -> None:
    meta = as_metadata()
    query = "?code=c1&state=s1"
    assert (
        parse_authorization_response(
            CALLBACK + query, state="s1", metadata=meta, redirect_uri=CALLBACK
        )
        == "c1"
    )
    with pytest.raises(OAuthError, match="redirect URI"):
        parse_authorization_response(
            arrived + query, state="s1", metadata=meta, redirect_uri=CALLBACK
        )


def test_the_authorization_error_cannot_forge_a_log_line() -> None:
    # RFC 6749 section 4.1.2.1: error and error_description are %x20-21 / %x23-5B /
    # %x5D-7E, as at the token endpoint; the message is logged.
    query = urlencode(
        {
            "state": "s1",
            "error": "access_denied\nWARNING forged",
            "error_description": "x\x1b[31m\nforged line " + "d" * 300,
        }
    )
    with pytest.raises(OAuthError) as info:
        parse_authorization_response(f"{CALLBACK}?{query}", state="s1", metadata=as_metadata())
    text = str(info.value)
    assert all(0x20 <= ord(c) < 0x7F for c in text)
    assert text.startswith("authorization refused: access_denied?WARNING forged (x?[31m?forged")
    assert text.endswith("d...)") and len(text) < 450  # (cut at 200 characters)
    assert info.value.error == "access_denied?WARNING forged"


@pytest.mark.parametrize(
    ("redirect_uri", "arrived", "matches"),
    [
        # An empty path is "/": the same resource either way round.
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765/", True),
        ("http://127.0.0.1:8765/", "http://127.0.0.1:8765", True),
        ("https://app.example/cb", "https://app.example:443/cb", True),
        # Neither side parses (a port out of range, not a port): never a match, not
        # "both unparseable, hence equal".
        ("http://127.0.0.1:99999/cb", "http://127.0.0.1:0x/cb", False),
        ("http://127.0.0.1:99999/cb", "https://evil.example:99999/x", False),
        ("http://127.0.0.1:3000/cb", "http://127.0.0.1:99999/cb", False),
    ],
)
def test_redirect_uri_matching_edge_cases(redirect_uri: str, arrived: str, matches: bool) -> None:
    meta = as_metadata()
    query = "?code=c1&state=s1"
    if matches:
        got = parse_authorization_response(
            arrived + query, state="s1", metadata=meta, redirect_uri=redirect_uri
        )
        assert got == "c1"
    else:
        with pytest.raises(OAuthError, match="redirect URI"):
            parse_authorization_response(
                arrived + query, state="s1", metadata=meta, redirect_uri=redirect_uri
            )


def test_an_error_from_another_issuer_is_not_reported_as_the_servers() -> None:
    meta = as_metadata()
    with pytest.raises(OAuthError, match="iss") as caught:
        parse_authorization_response(
            f"{CALLBACK}?error=access_denied&state=s1&iss=https://evil.example",
            state="s1",
            metadata=meta,
        )
    assert caught.value.error is None


# ------------------------------------------------------------------ registration


def test_the_registration_body() -> None:
    meta = as_metadata(token_endpoint_auth_methods_supported=["client_secret_post", "none"])
    body = registration_body(
        client_name="me", redirect_uris=["http://127.0.0.1:1/cb"], metadata=meta, scope="a"
    )
    assert body == {
        "client_name": "me",
        "redirect_uris": ["http://127.0.0.1:1/cb"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
        "scope": "a",
    }
    web = registration_body(
        client_name="me", redirect_uris=["https://app.example/cb"], metadata=as_metadata()
    )
    assert web["application_type"] == "web"
    pinned = registration_body(
        client_name="me", redirect_uris=[], metadata=as_metadata(), application_type="web"
    )
    assert pinned["application_type"] == "web"
    assert web["token_endpoint_auth_method"] == "client_secret_basic"
    assert "scope" not in web


def test_the_registration_response() -> None:
    answer = {
        "client_id": "id",
        "client_secret": "s3cr3t",
        "token_endpoint_auth_method": "client_secret_post",
    }
    client = parse_registration(dumps(answer), ISSUER)
    assert client == ClientCredentials(
        client_id="id",
        client_secret="s3cr3t",
        token_endpoint_auth_method="client_secret_post",
        issuer=ISSUER,
    )
    assert "s3cr3t" not in repr(client)
    with pytest.raises(OAuthError, match="client_id"):
        parse_registration(dumps({"client_secret": "x"}), ISSUER)
    with pytest.raises(OAuthError, match="not supported"):
        parse_registration(
            dumps({"client_id": "id", "token_endpoint_auth_method": "private_key_jwt"}), ISSUER
        )


# ------------------------------------------------------------------ the token endpoint


def _form(body: bytes) -> dict[str, list[str]]:
    return parse_qs(body.decode())


def test_client_secret_basic_puts_the_encoded_pair_in_the_header() -> None:
    client = ClientCredentials(
        client_id="id:1",
        client_secret="s/e c",
        token_endpoint_auth_method="client_secret_basic",
        issuer=ISSUER,
    )
    headers, body = token_request(
        as_metadata(),
        client,
        grant_type="authorization_code",
        resource="https://m.example",
        code="c",
        code_verifier="v",
        redirect_uri=CALLBACK,
    )
    auth = dict(headers)["authorization"]
    assert base64.b64decode(auth.removeprefix("Basic ")).decode() == "id%3A1:s%2Fe%20c"
    assert _form(body) == {
        "grant_type": ["authorization_code"],
        "code": ["c"],
        "code_verifier": ["v"],
        "redirect_uri": [CALLBACK],
        "resource": ["https://m.example"],
    }


def test_client_secret_post_and_none_put_the_client_in_the_body() -> None:
    post = ClientCredentials(client_id="id", client_secret="sec", issuer=ISSUER)
    meta = as_metadata(token_endpoint_auth_methods_supported=["client_secret_post"])
    headers, body = token_request(
        meta, post, grant_type="refresh_token", resource="https://m.example", refresh_token="r"
    )
    assert "authorization" not in dict(headers)
    assert _form(body) == {
        "grant_type": ["refresh_token"],
        "refresh_token": ["r"],
        "resource": ["https://m.example"],
        "client_id": ["id"],
        "client_secret": ["sec"],
    }
    public = ClientCredentials(client_id="id")
    headers, body = token_request(
        meta, public, grant_type="client_credentials", resource=None, scope="a"
    )
    assert "authorization" not in dict(headers)
    assert _form(body) == {
        "grant_type": ["client_credentials"],
        "scope": ["a"],
        "client_id": ["id"],
    }
    # A secret and no stated method: Basic, the RFC 8414 default.
    headers, _ = token_request(as_metadata(), post, grant_type="client_credentials", resource=None)
    assert dict(headers)["authorization"].startswith("Basic ")


def test_a_token_response_is_dated_with_the_callers_clock() -> None:
    body = dumps(
        {"access_token": "at", "token_type": "bearer", "expires_in": 60, "refresh_token": "rt"}
    )
    token = parse_token_response(200, body, now=1000.0, requested_scope="a")
    assert token == OAuthToken(
        access_token="at", expires_at=1060.0, refresh_token="rt", scope="a", issued_at=1000.0
    )
    assert not token.expired(1000.0)
    assert not token.expired(1053.0)
    assert token.expired(1054.0)  # within the leeway: a tenth of the lifetime
    assert not token.expired(1059.0, leeway=0)
    assert "at" not in repr(token).replace("expires_at", "").replace("issued_at", "")
    kept = parse_token_response(
        200, dumps({"access_token": "b"}), now=0, previous_refresh_token="rt"
    )
    assert kept.refresh_token == "rt" and kept.expires_at is None and not kept.expired(1e12)


def test_an_empty_scope_in_a_token_response_is_no_scope_information() -> None:
    # Not a refusal of the whole token: as if the member were absent (the scope asked for).
    body = dumps({"access_token": "at", "token_type": "Bearer", "scope": ""})
    token = parse_token_response(200, body, now=0, requested_scope="a b")
    assert token.scope == "a b"
    assert parse_token_response(200, body, now=0).scope is None


@pytest.mark.parametrize(
    ("lifetime", "leeway"), [(20, 2.0), (1, 0.1), (0, 0.0), (3600, 30.0), (300, 30.0)]
)
def test_the_leeway_is_a_tenth_of_the_lifetime_at_most_30_seconds(
    lifetime: int, leeway: float
) -> None:
    token = parse_token_response(
        200, dumps({"access_token": "a", "expires_in": lifetime}), now=100.0
    )
    end = 100.0 + lifetime
    assert token.expired(end - leeway)
    assert lifetime == 0 or not token.expired(end - leeway - 0.01)
    # A token whose issue time is unknown (say, kept by an older storage): 30 seconds.
    undated = OAuthToken(access_token="a", expires_at=end)
    assert undated.expired(end - 30) and not undated.expired(end - 30.01)


@pytest.mark.parametrize("token", ["x\r\nX-Injected: 1", "a b", "tok\u00e9n", "a\tb", "a\x00"])
def test_an_access_token_that_is_not_visible_ascii_is_refused(token: str) -> None:
    body = dumps({"access_token": token, "token_type": "Bearer"})
    with pytest.raises(OAuthError, match="access_token") as caught:
        parse_token_response(200, body, now=0)
    assert token not in str(caught.value)  # a credential never goes into a message
    ok = "eyJhbGciOi.JIUzI1NiJ9-_~+/=:!#"
    assert parse_token_response(200, dumps({"access_token": ok}), now=0).access_token == ok


def test_a_client_secret_must_be_bound_to_its_issuer() -> None:
    # 2026-07-28 client-registration, "Authorization Server Binding": a secret is never
    # sent to whichever authorization server the MCP server names.
    with pytest.raises(ValueError, match="issuer"):
        ClientCredentials(client_id="id", client_secret="s3cr3t")
    assert ClientCredentials(client_id="id", client_secret="s", issuer=ISSUER).issuer == ISSUER
    assert ClientCredentials(client_id="public").issuer is None  # nothing to leak


@pytest.mark.parametrize(
    ("status", "body", "message", "error"),
    [
        (
            400,
            dumps({"error": "invalid_grant", "error_description": "used"}),
            "invalid_grant",
            "invalid_grant",
        ),
        (401, b"<html>", "status 401", None),
        (200, dumps({"access_token": "a", "token_type": "DPoP"}), "DPoP", None),
        (200, dumps({"access_token": "a", "expires_in": -1}), "expires_in", None),
        (200, dumps({"access_token": "a", "expires_in": "10"}), "expires_in", None),
        (200, dumps({"token_type": "Bearer"}), "access_token", None),
    ],
)
def test_a_refused_or_malformed_token_response_raises(
    status: int, body: bytes, message: str, error: str | None
) -> None:
    with pytest.raises(OAuthError, match=message) as caught:
        parse_token_response(status, body, now=0)
    assert caught.value.error == error


def test_which_answers_ask_for_authorization() -> None:
    bearer = ['Bearer error="insufficient_scope", scope="a b"']
    assert response_challenge(200, bearer) is None
    assert response_challenge(401, []) == BearerChallenge()  # a 401 asks, challenge or not
    assert response_challenge(401, ['Basic realm="x"']) == BearerChallenge()
    step_up = response_challenge(403, bearer)
    assert step_up is not None and step_up.scope == "a b"
    assert response_challenge(403, ['Bearer error="invalid_token"']) is None  # a refusal
    assert response_challenge(403, []) is None


@pytest.mark.parametrize(
    ("url", "twin"),
    [
        ("ws://127.0.0.1:8000/mcp?x=1", "http://127.0.0.1:8000/mcp?x=1"),
        ("WSS://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
    ],
)
def test_the_http_twin_of_a_websocket_url(url: str, twin: str) -> None:
    assert websocket_http_url(url) == twin


def test_a_websocket_servers_metadata_is_looked_for_at_its_http_twin() -> None:
    assert protected_resource_metadata_urls("wss://mcp.example.com/ws/mcp", None) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/ws/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]


def test_a_redirect_to_the_websocket_twin_of_the_redirect_uri_is_refused() -> None:
    metadata = AuthorizationServerMetadata.fallback("http://127.0.0.1:9000")
    with pytest.raises(OAuthError, match="did not arrive at the redirect URI"):
        parse_authorization_response(
            "ws://127.0.0.1:8123/cb?code=x&state=s",
            state="s",
            metadata=metadata,
            redirect_uri="http://127.0.0.1:8123/cb",
        )

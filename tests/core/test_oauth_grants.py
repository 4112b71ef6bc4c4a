"""The assertion grant rules, with no I/O: the JWT bearer grant request (RFC 7523
section 2.1), the token exchange for an ID-JAG (RFC 8693; enterprise-managed
authorization, section 4) and its response."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl

import pytest

from mcp_sansio import (
    AuthorizationServerMetadata,
    ClientCredentials,
    OAuthError,
    OAuthToken,
    jwt_bearer_request,
    parse_token_exchange_response,
    parse_token_response,
    token_exchange_request,
)
from mcp_sansio._json import dumps
from mcp_sansio._oauth import select_authorization_server
from mcp_sansio._oauth_grants import (
    AssertionRefusal,
    JwtTimes,
    check_grant_issuer,
    grant_scope,
    grant_token,
    jwt_times,
)

ISSUER = "https://auth.example.com"
IDP = "https://idp.example.com"
JWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2ln"
RESOURCE = "https://mcp.example.com/mcp"
JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def metadata(issuer: str = ISSUER, **fields: Any) -> AuthorizationServerMetadata:
    doc = {"issuer": issuer, "token_endpoint": f"{issuer}/token", **fields}
    return AuthorizationServerMetadata.parse(dumps(doc), issuer)


def form_of(request: tuple[list[tuple[str, str]], bytes]) -> tuple[dict[str, str], list[str]]:
    headers, body = request
    pairs = parse_qsl(body.decode("ascii"), keep_blank_values=True)
    assert len({k for k, _ in pairs}) == len(pairs)  # no parameter twice
    return dict(pairs), [v for k, v in headers if k == "authorization"]


def test_a_jwt_bearer_request_without_a_client_carries_no_client_identity() -> None:
    form, auth = form_of(
        jwt_bearer_request(metadata(), None, assertion=JWT, resource=RESOURCE, scope="a b")
    )
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": JWT,
        "resource": RESOURCE,
        "scope": "a b",
    }
    assert auth == []


def test_a_jwt_bearer_request_omits_an_absent_scope_and_resource() -> None:
    form, _ = form_of(jwt_bearer_request(metadata(), None, assertion=JWT, resource=None))
    assert set(form) == {"grant_type", "assertion"}


def test_a_jwt_bearer_request_authenticates_the_client_as_the_as_asks() -> None:
    client = ClientCredentials(client_id="c:1", client_secret="s/2", issuer=ISSUER)
    form, auth = form_of(jwt_bearer_request(metadata(), client, assertion=JWT, resource=RESOURCE))
    # RFC 8414's default is client_secret_basic: the form-urlencoded id and secret.
    assert auth == ["Basic " + base64.b64encode(b"c%3A1:s%2F2").decode()]
    assert "client_id" not in form and "client_secret" not in form
    post = metadata(token_endpoint_auth_methods_supported=["client_secret_post"])
    form, auth = form_of(jwt_bearer_request(post, client, assertion=JWT, resource=RESOURCE))
    assert auth == [] and form["client_id"] == "c:1" and form["client_secret"] == "s/2"
    public = ClientCredentials(client_id="pub")
    form, auth = form_of(jwt_bearer_request(metadata(), public, assertion=JWT, resource=None))
    assert auth == [] and form["client_id"] == "pub"


@pytest.mark.parametrize("assertion", ["", "a b", "jwt\n", "é.x.y"])
def test_an_assertion_that_is_not_visible_ascii_is_not_sent(assertion: str) -> None:
    with pytest.raises(OAuthError, match="JWT assertion") as info:
        jwt_bearer_request(metadata(), None, assertion=assertion, resource=RESOURCE)
    assert assertion.strip() == "" or assertion not in str(info.value)


def test_the_token_exchange_asks_for_an_id_jag_for_the_as_and_the_resource() -> None:
    idp_client = ClientCredentials(client_id="idp-client", client_secret="idp-s", issuer=IDP)
    idp = metadata(IDP, token_endpoint_auth_methods_supported=["client_secret_post"])
    form, auth = form_of(
        token_exchange_request(
            idp,
            idp_client,
            subject_token="id.token.jwt",
            audience=ISSUER,
            resource=RESOURCE,
            scope="chat.read chat.history",
        )
    )
    # enterprise-managed-authorization.mdx section 4's table and example, to the letter.
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "requested_token_type": JAG_TYPE,
        "audience": ISSUER,
        "resource": RESOURCE,
        "scope": "chat.read chat.history",
        "subject_token": "id.token.jwt",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "client_id": "idp-client",
        "client_secret": "idp-s",
    }
    assert auth == []
    assert "actor_token" not in form  # section 4: not used


def public_exchange(
    subject_token: str = "id.token.jwt", scope: str | None = None
) -> tuple[list[tuple[str, str]], bytes]:
    """The token exchange of a public IdP client."""
    return token_exchange_request(
        metadata(IDP),
        ClientCredentials(client_id="idp-client"),
        subject_token=subject_token,
        audience=ISSUER,
        resource=RESOURCE,
        scope=scope,
    )


def test_the_token_exchange_of_a_public_idp_client_names_it_and_omits_no_scope() -> None:
    form, auth = form_of(public_exchange())
    assert form["client_id"] == "idp-client" and "scope" not in form and auth == []
    with pytest.raises(OAuthError, match="ID token"):
        public_exchange(subject_token="")


def test_the_id_jag_is_read_from_the_exchange_response() -> None:
    body = dumps(
        {
            "issued_token_type": JAG_TYPE,
            "access_token": "jag.jwt.sig",
            "token_type": "N_A",
            "expires_in": 300,
        }
    )
    assert parse_token_exchange_response(200, body) == "jag.jwt.sig"


@pytest.mark.parametrize(
    ("status", "body", "match", "error"),
    [
        (
            400,
            dumps({"error": "invalid_grant", "error_description": "aud"}),
            "invalid_grant",
            "invalid_grant",
        ),
        (401, b"not json", "status 401", None),
        (200, b"[]", "not a JSON object", None),
        (200, dumps({"access_token": "x"}), "issued_token_type", None),
        (
            200,
            dumps(
                {
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "access_token": "x",
                }
            ),
            "is not",
            None,
        ),
        (200, dumps({"issued_token_type": JAG_TYPE}), "access_token", None),
        (200, dumps({"issued_token_type": JAG_TYPE, "access_token": "a b"}), "ID-JAG", None),
    ],
)
def test_a_refused_or_malformed_exchange_response_raises(
    status: int, body: bytes, match: str, error: str | None
) -> None:
    with pytest.raises(OAuthError, match=match) as info:
        parse_token_exchange_response(status, body)
    assert info.value.error == error


def test_offline_access_is_not_asked_of_the_idp() -> None:
    # Section 4: the exchange's scope names "scopes at the MCP Server"; a refresh token
    # is asked of the authorization server, with the ID-JAG.
    def exchange_scope(scope: str) -> str | None:
        form, _ = form_of(public_exchange(scope=scope))
        return form.get("scope")

    assert exchange_scope("chat.read offline_access chat.history") == "chat.read chat.history"
    assert exchange_scope("offline_access") is None


def test_without_a_client_a_jwt_bearer_grant_asks_for_no_refresh_token_and_keeps_none() -> None:
    client = ClientCredentials(client_id="c")
    assert grant_scope("read offline_access", client=None) == "read"
    assert grant_scope("offline_access", client=None) is None
    assert grant_scope(None, client=None) is None
    assert grant_scope("read offline_access", client=client) == "read offline_access"
    token = OAuthToken(access_token="a", refresh_token="r")
    assert grant_token(token, client=None).refresh_token is None
    assert grant_token(token, client=client) is token
    plain = OAuthToken(access_token="a")
    assert grant_token(plain, client=None) is plain


def test_a_workload_jwt_goes_only_to_its_issuer() -> None:
    check_grant_issuer(metadata(), ISSUER)
    with pytest.raises(OAuthError, match="not sent"):
        check_grant_issuer(metadata("https://other.example.com"), ISSUER)


def test_the_configured_authorization_server_is_chosen_when_listed() -> None:
    servers = ["https://a.example.com", ISSUER]
    assert select_authorization_server(servers, ISSUER) == ISSUER
    assert select_authorization_server(servers, None) == "https://a.example.com"
    # Not listed: the first, as without a preference (the flow then refuses it).
    assert select_authorization_server(servers, "https://b.example.com") == servers[0]


@pytest.mark.parametrize("error", ["invalid_grant", "invalid_client", "unauthorized_client"])
def test_a_refusal_of_the_assertion_covers_it_whatever_the_scope(error: str) -> None:
    refusal = AssertionRefusal.of(error, status=400, assertion=JWT, resource=RESOURCE, scope="a")
    assert refusal is not None and refusal.error == error
    assert refusal.repeated_by(assertion=JWT, resource=RESOURCE, scope="a")
    assert refusal.repeated_by(assertion=JWT, resource="https://x.example.com", scope="b")
    assert not refusal.repeated_by(assertion=JWT + "x", resource=RESOURCE, scope="a")
    assert JWT not in repr(refusal)


def test_another_refusal_covers_that_scope_and_resource_only() -> None:
    refusal = AssertionRefusal.of(
        "invalid_scope", status=400, assertion=JWT, resource=RESOURCE, scope="a b"
    )
    assert refusal is not None
    assert refusal.repeated_by(assertion=JWT, resource=RESOURCE, scope="b a")
    assert not refusal.repeated_by(assertion=JWT, resource=RESOURCE, scope="a")
    assert not refusal.repeated_by(assertion=JWT, resource=RESOURCE + "/x", scope="a b")


@pytest.mark.parametrize("error", [None, "", "server_error", "temporarily_unavailable"])
def test_a_refusal_that_may_not_stand_is_not_remembered(error: str | None) -> None:
    refusal = AssertionRefusal.of(error, status=400, assertion=JWT, resource=RESOURCE, scope=None)
    assert refusal is None


@pytest.mark.parametrize(
    ("status", "error"),
    [
        # Not an error response as RFC 6749 section 5.2 has it: it may pass when asked
        # again, whatever the body says.
        (429, "rate_limit_exceeded"),
        (429, "invalid_grant"),
        (500, "invalid_request"),
        (502, "invalid_grant"),
        (503, "service_unavailable"),
        (401, "invalid_grant"),  # (401 is for invalid_client only)
        (403, "invalid_grant"),
        (200, "invalid_grant"),
    ],
)
def test_only_a_400_or_a_401_invalid_client_refusal_stands(status: int, error: str) -> None:
    refusal = AssertionRefusal.of(error, status=status, assertion=JWT, resource=RESOURCE, scope="a")
    assert refusal is None


def test_a_401_invalid_client_refusal_stands() -> None:
    refusal = AssertionRefusal.of(
        "invalid_client", status=401, assertion=JWT, resource=RESOURCE, scope="a"
    )
    assert refusal is not None and refusal.error == "invalid_client"
    assert refusal.repeated_by(assertion=JWT, resource=None, scope=None)


@pytest.mark.parametrize("parse", ["exchange", "token"])
def test_the_peer_error_text_cannot_forge_a_log_line(parse: str) -> None:
    # RFC 6749 section 5.2: error and error_description are %x20-21 / %x23-5B /
    # %x5D-7E. The message is logged: a newline or ESC would forge a line.
    description = 'ok\nWARNING mcp_trio: forged\x1b[2J "q" \\ \u00e9'
    body = dumps({"error": "invalid_grant\r\n", "error_description": description})
    with pytest.raises(OAuthError) as info:
        if parse == "exchange":
            parse_token_exchange_response(400, body)
        else:
            parse_token_response(400, body, now=0.0)
    text = str(info.value)
    assert all(0x20 <= ord(c) < 0x7F and c not in '"\\' for c in text)
    assert "invalid_grant?? (ok?WARNING mcp_trio: forged?[2J ?q? ? ?)" in text
    assert info.value.error == "invalid_grant??"


def test_the_peer_error_text_is_bounded() -> None:
    def message(description: str) -> str:
        body = dumps({"error": "e" * 201, "error_description": description})
        return str(token_error_of(body))

    whole = "d" * 200
    assert f"({whole})" in message(whole)  # (at the bound: whole)
    over = message("d" * 201 + "tail")
    assert f"({'d' * 197}...)" in over and "tail" not in over
    assert f", {'e' * 197}... (" in over


def token_error_of(body: bytes) -> OAuthError:
    try:
        parse_token_exchange_response(400, body)
    except OAuthError as exc:
        return exc
    raise AssertionError("not refused")


def test_an_empty_description_is_left_out_as_in_an_authorization_response() -> None:
    body = dumps({"error": "invalid_grant", "error_description": ""})
    assert str(token_error_of(body)).endswith(": status 400, invalid_grant")


def _jws(claims: object) -> str:
    payload = base64.urlsafe_b64encode(dumps(claims)).rstrip(b"=").decode()
    return f"eyJhbGciOiJFUzI1NiJ9.{payload}.c2ln"


def test_the_time_claims_of_a_jwt_are_read_unverified() -> None:
    times = jwt_times(_jws({"nbf": 10, "iat": 9.5, "exp": 20, "sub": "x"}))
    assert times == JwtTimes(not_before=10.0, issued_at=9.5, expires_at=20.0)
    # A claim that is not a number is left out.
    assert jwt_times(_jws({"nbf": "10", "iat": True, "exp": None})) == JwtTimes()


@pytest.mark.parametrize(
    "assertion",
    [
        "opaque",
        "a.b.c.d.e",  # encrypted (JWE): nothing to read
        "eyJ9.!!!.c2ln",  # not base64url
        _jws([1, 2]),
        "eyJ9.bm90IGpzb24.c2ln",  # not JSON
        _jws({"iat": 1, "pad": "x" * 8192}),  # over the bound
    ],
)
def test_what_is_not_a_readable_jws_has_no_times(assertion: str) -> None:
    assert jwt_times(assertion) is None


NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("claims", "lapses_at"),
    [
        ({"iat": NOW}, NOW + 60),  # issued just now: perhaps the AS's clock is behind
        ({"iat": NOW - 299}, NOW + 60),
        ({"nbf": NOW + 600, "iat": NOW}, NOW + 660),  # not valid yet: a minute after nbf
        ({"iat": NOW, "exp": NOW + 10}, NOW + 60),
        ({"iat": NOW, "exp": NOW}, None),  # expired: never valid again
        ({"iat": NOW - 300}, None),  # older than any clock skew
        ({"exp": NOW + 10}, None),  # no start: nothing says it is young
        (None, None),  # not a JWS
    ],
)
def test_a_refusal_of_a_young_jwt_lapses(claims: dict[str, float] | None, lapses_at: float) -> None:
    assertion = JWT if claims is None else _jws(claims)
    refusal = AssertionRefusal.of(
        "invalid_grant", status=400, assertion=assertion, resource=RESOURCE, scope=None, now=NOW
    )
    assert refusal is not None and refusal.lapses_at == lapses_at
    assert refusal.repeated_by(assertion=assertion, resource=RESOURCE, scope=None, now=NOW)
    later = NOW + 86400 * 365
    assert refusal.repeated_by(assertion=assertion, resource=RESOURCE, scope=None, now=later) is (
        lapses_at is None
    )
    if lapses_at is not None:
        assert not refusal.repeated_by(
            assertion=assertion, resource=RESOURCE, scope=None, now=lapses_at
        )
        assert refusal.repeated_by(assertion=assertion, resource=RESOURCE, scope=None)  # no now
    # Without a clock, as before: it stands for good.
    plain = AssertionRefusal.of(
        "invalid_grant", status=400, assertion=assertion, resource=None, scope=None
    )
    assert plain is not None and plain.lapses_at is None and plain == refusal


@pytest.mark.parametrize(
    "error", ["unauthorized_client", "unsupported_grant_type", "invalid_client", "invalid_scope"]
)
def test_only_an_invalid_grant_refusal_of_a_young_jwt_lapses(error: str) -> None:
    # RFC 7523 section 3.1: a JWT outside its time window is refused with invalid_grant;
    # a refusal of the client, the grant type or the scope says nothing of the clocks.
    refusal = AssertionRefusal.of(
        error, status=400, assertion=_jws({"iat": NOW}), resource=RESOURCE, scope=None, now=NOW
    )
    assert refusal is not None and refusal.lapses_at is None

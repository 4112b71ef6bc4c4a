"""private_key_jwt and DPoP rules, with no I/O and no crypto: claims are built with a
fake signer (the JWS's third part is whatever it returns), then read back."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs

import pytest

from mcp_sansio import (
    AuthorizationServerMetadata,
    BearerChallenge,
    ClientCredentials,
    OAuthError,
    parse_bearer_challenge,
    parse_token_response,
    response_challenge,
    token_request,
)
from mcp_sansio._jose import (
    CLIENT_ASSERTION_TYPE,
    MAX_NONCE,
    access_token_hash,
    client_assertion,
    dpop_nonce_header,
    dpop_nonce_of,
    dpop_proof,
    has_dot_segments,
    htu,
    jwk_thumbprint,
    normalized_htu,
    remove_dot_segments,
)
from mcp_sansio._json import dumps, loads

ISSUER = "https://as.example/tenant"
JWK = {"kty": "EC", "crv": "P-256", "x": "eA", "y": "eQ"}


def fake_sign(data: bytes) -> bytes:
    return b"sig:" + data[:4]


def decode(jws: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """Header, claims, signature and signing input of a compact JWS."""
    parts = jws.split(".")
    assert len(parts) == 3

    def b64(s: str) -> bytes:
        return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))

    return loads(b64(parts[0])), loads(b64(parts[1])), b64(parts[2]), ".".join(parts[:2]).encode()


def metadata(**kwargs: Any) -> AuthorizationServerMetadata:
    return AuthorizationServerMetadata(issuer=ISSUER, token_endpoint=ISSUER + "/token", **kwargs)


# ---------------------------------------------------------------------- JOSE values


def test_rfc7638_thumbprint_example() -> None:
    # RFC 7638 section 3.1's key and its thumbprint (extra members are ignored).
    n = (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6t"
        "Soc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-"
        "65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08q"
        "NLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8a"
        "wapJzKnqDKgw"
    )
    key = {"kty": "RSA", "n": n, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"}
    assert jwk_thumbprint(key) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


@pytest.mark.parametrize("bad", [{"kty": "oct", "k": "x"}, {"kty": "EC", "crv": "P-256", "x": "a"}])
def test_thumbprint_refuses_other_keys(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"EC .* or RSA"):
        jwk_thumbprint(bad)


def test_ath_is_rfc9449s_example() -> None:
    # RFC 9449 section 7.1's access token and the ath of its proof.
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    assert access_token_hash(token) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Server.Example.com/mcp?x=1#f", "https://server.example.com/mcp"),
        ("HTTPS://server.example.com:443/mcp", "https://server.example.com/mcp"),
        ("http://127.0.0.1:80", "http://127.0.0.1/"),
        ("http://127.0.0.1:8080/a/b/", "http://127.0.0.1:8080/a/b/"),
        ("wss://h.example:443/ws", "wss://h.example/ws"),
        ("http://[::1]:9/x", "http://[::1]:9/x"),
    ],
)
def test_htu_drops_query_fragment_and_default_port(url: str, expected: str) -> None:
    assert htu(url) == expected
    assert normalized_htu(url) == expected


@pytest.mark.parametrize(
    "path",
    ["/%7Euser/m%63p", "/%6dcp", "/a%2fb", "/a/../mcp", "/%c3%a9", "/100%"],
)
def test_the_client_htu_keeps_the_path_as_sent(path: str) -> None:
    # The client signs the URI it sends (RFC 9449 section 4.2): a server comparing
    # without normalising (section 4.3 says SHOULD) still finds its request URI.
    url = "HTTPS://MCP.Example.com:443" + path + "?q=%6D#f"
    assert htu(url) == "https://mcp.example.com" + path
    proof = dpop_proof(jwk=JWK, alg="ES256", sign=fake_sign, method="POST", url=url, now=5, jti="j")
    assert loads(base64.urlsafe_b64decode(proof.split(".")[1] + "=="))["htu"] == htu(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [  # RFC 3986 section 6.2.2: one URI, written several ways, is one htu.
        ("http://h.example/%6Dcp", "http://h.example/mcp"),
        ("http://h.example/%6dcp", "http://h.example/mcp"),
        ("http://h.example/%41%7A%30%2D%2E%5F%7E", "http://h.example/Az0-._~"),
        ("http://h.example/a%2fb", "http://h.example/a%2Fb"),  # reserved: kept, upper hex
        ("http://h.example/%c3%a9", "http://h.example/%C3%A9"),
        ("http://h.example/%20", "http://h.example/%20"),
        ("http://h.example/100%", "http://h.example/100%"),  # not an escape: as is
        ("http://h.example/%zz%4", "http://h.example/%zz%4"),
        ("http://h.example/%256D", "http://h.example/%256D"),  # decoded once, not twice
        ("http://%48.example/", "http://h.example/"),
        ("HTTP://H.Example:80", "http://h.example/"),
        ("ws://h.example:80/ws", "ws://h.example/ws"),
        ("https://h.example:80/", "https://h.example:80/"),  # not https's default
        ("http://h.example:443/", "http://h.example:443/"),
        ("wss://h.example:443", "wss://h.example/"),
        ("http://h.example?q=%6D", "http://h.example/"),
    ],
)
def test_normalized_htu_is_syntax_normalised(url: str, expected: str) -> None:
    assert normalized_htu(url) == expected
    assert normalized_htu(expected) == expected  # (already normal: unchanged)


# RFC 3986 section 5.4 (base "http://a/b/c/d;p?q"): the references that are paths, and
# what they resolve to. Resolving merges a relative path onto "/b/c/" (section 5.2.3)
# and removes the dot segments (5.2.4); the merged URI, normalised, is that answer.
_RFC3986_5_4 = [
    ("g", "http://a/b/c/g"),
    ("./g", "http://a/b/c/g"),
    ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"),
    (";x", "http://a/b/c/;x"),
    ("g;x", "http://a/b/c/g;x"),
    (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"),
    ("..", "http://a/b/"),
    ("../", "http://a/b/"),
    ("../g", "http://a/b/g"),
    ("../..", "http://a/"),
    ("../../", "http://a/"),
    ("../../g", "http://a/g"),
    # section 5.4.2, abnormal examples
    ("../../../g", "http://a/g"),
    ("../../../../g", "http://a/g"),
    ("/./g", "http://a/g"),
    ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."),
    (".g", "http://a/b/c/.g"),
    ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"),
    ("./../g", "http://a/b/g"),
    ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"),
    ("g/../h", "http://a/b/c/h"),
    ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"),
]


@pytest.mark.parametrize(("reference", "expected"), _RFC3986_5_4)
def test_normalized_htu_removes_dot_segments_as_rfc_3986_resolves(
    reference: str, expected: str
) -> None:
    # RFC 9449 section 4.3: syntax-based normalisation, RFC 3986 section 6.2.2.3 too.
    merged = "http://a" + (reference if reference.startswith("/") else "/b/c/" + reference)
    assert normalized_htu(merged) == expected
    assert normalized_htu(expected) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [  # RFC 3986 section 5.2.4's own examples, and the edges of its rules
        ("/a/b/c/./../../g", "/a/g"),
        ("mid/content=5/../6", "mid/6"),
        ("/..", "/"),
        ("/.", "/"),
        ("/a/..", "/"),
        ("/a/../..", "/"),
        (".", ""),
        ("..", ""),
        ("../a", "a"),
        ("./a/./", "a/"),
        ("/a/.b/..c/.../", "/a/.b/..c/.../"),  # (dots, but no dot segment)
        ("/a//../b", "/a/b"),  # (an empty segment is one)
        ("", ""),
    ],
)
def test_remove_dot_segments(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected
    assert has_dot_segments(path) is (path != expected)


def test_remove_dot_segments_of_a_long_path_is_one_pass() -> None:
    # (a path of many segments, in a request a peer sends: its length, not its square)
    path = "/a" * 50_000 + "/.." * 25_000 + "/mcp"
    assert remove_dot_segments(path) == "/a" * 25_000 + "/mcp"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # Section 6.2.2.2 before 6.2.2.3: an escaped dot is a dot, then removed.
        ("http://h.example/a/%2E%2E/mcp", "http://h.example/mcp"),
        ("http://h.example/a/%2e./mcp", "http://h.example/mcp"),
        ("http://h.example/%2E/mcp", "http://h.example/mcp"),
        # RFC 3986 section 6.2.2's example, in http.
        ("hTTp://a/./b/../b/%63/%7bfoo%7d", "http://a/b/c/%7Bfoo%7D"),
        # An escaped "/" is no separator: one segment, kept.
        ("http://h.example/a%2Fb", "http://h.example/a%2Fb"),
        ("http://h.example/a%2F..%2Fmcp", "http://h.example/a%2F..%2Fmcp"),
        ("http://h.example/a/..%2Fmcp", "http://h.example/a/..%2Fmcp"),
    ],
)
def test_normalized_htu_decodes_escaped_dots_before_removing_them(url: str, expected: str) -> None:
    assert normalized_htu(url) == expected
    assert normalized_htu(expected) == expected


def test_an_escaped_slash_stays_another_uri() -> None:
    for url in ("http://h.example/a%2F..%2Fmcp", "http://h.example/a/..%2Fmcp"):
        assert normalized_htu(url) != normalized_htu("http://h.example/mcp")


@pytest.mark.parametrize(
    "url",
    ["http://user@h.example/mcp", "http://user:pw@h.example/mcp", "https://@h.example/"],
)
def test_normalized_htu_refuses_userinfo(url: str) -> None:
    # RFC 9110 section 4.2.4: an http(s) URI has no userinfo; one that does is refused,
    # not read as the same URI without it.
    with pytest.raises(ValueError, match="userinfo"):
        normalized_htu(url)


# ---------------------------------------------------------------------- client assertion


def test_client_assertion_claims() -> None:
    jws = client_assertion(
        client_id="cid", audience=ISSUER, alg="ES256", sign=fake_sign, now=1000.7, jti="j1"
    )
    header, claims, signature, signed = decode(jws)
    assert header == {"alg": "ES256", "typ": "JWT"}
    assert claims == {
        "iss": "cid", "sub": "cid", "aud": ISSUER, "jti": "j1", "iat": 1000, "exp": 1060
    }  # fmt: skip
    assert signature == fake_sign(signed)
    header, _, _, _ = decode(
        client_assertion(
            client_id="c", audience="a", alg="RS256", sign=fake_sign, now=0, jti="j", kid="k1"
        )
    )
    assert header == {"alg": "RS256", "typ": "JWT", "kid": "k1"}


def test_private_key_jwt_token_request() -> None:
    client = ClientCredentials(client_id="cid", private_key="PEM", issuer=ISSUER)
    audiences: list[str] = []

    def assertion(audience: str) -> str:
        audiences.append(audience)
        return "a.b.c"

    meta = metadata(token_endpoint_auth_methods_supported=("private_key_jwt",))
    headers, body = token_request(
        meta,
        client,
        grant_type="client_credentials",
        resource="https://mcp.example/mcp",
        client_assertion=assertion,
    )
    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    assert form == {
        "grant_type": "client_credentials",
        "resource": "https://mcp.example/mcp",
        "client_id": "cid",
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": "a.b.c",
    }
    assert audiences == [ISSUER]
    assert "authorization" not in dict(headers)
    # Without the signer the request is not made (no silent unauthenticated request).
    with pytest.raises(OAuthError, match="private_key_jwt"):
        token_request(meta, client, grant_type="client_credentials", resource=None)


@pytest.mark.parametrize(
    ("supported", "secret", "expected"),
    [
        (("private_key_jwt", "client_secret_basic"), "s", "jwt"),
        (("client_secret_basic",), "s", "basic"),  # a key the AS does not take: the secret
        (("client_secret_basic",), None, "jwt"),  # a key alone: the only way it has
    ],
)
def test_private_key_jwt_is_chosen_where_the_as_takes_it(
    supported: tuple[str, ...], secret: str | None, expected: str
) -> None:
    client = ClientCredentials(client_id="c", client_secret=secret, private_key="k", issuer=ISSUER)
    meta = metadata(token_endpoint_auth_methods_supported=supported)
    headers, body = token_request(
        meta, client, grant_type="client_credentials", resource=None, client_assertion=lambda a: "x"
    )
    assert ("client_assertion=x" in body.decode()) is (expected == "jwt")
    assert ("authorization" in dict(headers)) is (expected == "basic")


def test_a_private_key_must_be_bound_to_its_issuer() -> None:
    with pytest.raises(ValueError, match="private_key must be bound"):
        ClientCredentials(client_id="c", private_key="k")
    assert "PRIVATE" not in repr(
        ClientCredentials(client_id="c", private_key="PRIVATE", issuer=ISSUER)
    )


# ---------------------------------------------------------------------- DPoP


def test_dpop_proof_for_a_token_request_and_a_resource_request() -> None:
    proof = dpop_proof(
        jwk=JWK,
        alg="ES256",
        sign=fake_sign,
        method="POST",
        url=ISSUER + "/token?x",
        now=5.5,
        jti="j",
    )
    header, claims, signature, signed = decode(proof)
    assert header == {"typ": "dpop+jwt", "alg": "ES256", "jwk": JWK}
    assert claims == {"jti": "j", "htm": "POST", "htu": ISSUER + "/token", "iat": 5}
    assert signature == fake_sign(signed)
    proof = dpop_proof(
        jwk=JWK,
        alg="ES256",
        sign=fake_sign,
        method="GET",
        url="https://mcp.example/mcp",
        now=0,
        jti="k",
        access_token="tok",
        nonce="n-1",
    )
    _, claims, _, _ = decode(proof)
    assert claims["ath"] == access_token_hash("tok") and claims["nonce"] == "n-1"
    assert claims["htm"] == "GET"


def test_dpop_proof_never_carries_a_private_key() -> None:
    with pytest.raises(ValueError, match="public key only"):
        dpop_proof(
            jwk={**JWK, "d": "secret"},
            alg="ES256",
            sign=fake_sign,
            method="POST",
            url="https://a.example/",
            now=0,
            jti="j",
        )


def as_answer(error: str) -> bytes:
    return dumps({"error": error})


@pytest.mark.parametrize(
    ("status", "headers", "body", "error", "expected"),
    [
        (400, [("dpop-nonce", "n1")], as_answer("use_dpop_nonce"), None, "n1"),
        (400, [("dpop-nonce", "n1")], as_answer("invalid_grant"), None, None),
        (400, [], as_answer("use_dpop_nonce"), None, None),  # no nonce to use
        (400, [("dpop-nonce", "n1")], b"not json", None, None),
        (400, [("dpop-nonce", "n1")], b"[1]", None, None),
        (401, [("dpop-nonce", "n2")], b"", "use_dpop_nonce", "n2"),
        (401, [("dpop-nonce", "n2")], b"", "invalid_token", None),
        (200, [("dpop-nonce", "n2")], as_answer("use_dpop_nonce"), "use_dpop_nonce", None),
        (401, [("dpop-nonce", "")], b"", "use_dpop_nonce", None),
        (401, [("dpop-nonce", 'a"b')], b"", "use_dpop_nonce", None),
        (401, [("dpop-nonce", "x" * (MAX_NONCE + 1))], b"", "use_dpop_nonce", None),
        (401, [("dpop-nonce", "x" * MAX_NONCE)], b"", "use_dpop_nonce", "x" * MAX_NONCE),
    ],
)
def test_dpop_nonce_of(
    status: int,
    headers: list[tuple[str, str]],
    body: bytes,
    error: str | None,
    expected: str | None,
) -> None:
    assert dpop_nonce_of(status, headers, body=body, error=error) == expected


def test_a_dpop_challenge_is_read_like_a_bearer_one() -> None:
    www = ['DPoP error="use_dpop_nonce", resource_metadata="https://m.example/prm"']
    assert parse_bearer_challenge(www) == BearerChallenge(
        resource_metadata="https://m.example/prm", error="use_dpop_nonce"
    )
    assert response_challenge(401, ['DPoP algs="ES256"']) == BearerChallenge()


def test_metadata_dpop_algs() -> None:
    body = dumps(
        {
            "issuer": ISSUER,
            "token_endpoint": ISSUER + "/token",
            "dpop_signing_alg_values_supported": ["ES256", "RS256"],
        }
    )
    meta = AuthorizationServerMetadata.parse(body, ISSUER)
    assert meta.dpop_signing_alg_values_supported == ("ES256", "RS256")
    bare = AuthorizationServerMetadata.parse(
        dumps({"issuer": ISSUER, "token_endpoint": ISSUER + "/token"}), ISSUER
    )
    assert bare.dpop_signing_alg_values_supported is None


def test_token_response_with_dpop() -> None:
    dpop = dumps({"access_token": "t", "token_type": "DPoP", "expires_in": 10})
    token = parse_token_response(200, dpop, now=1.0, dpop_jkt="jkt")
    assert (token.token_type, token.dpop_jkt, token.expires_at) == ("DPoP", "jkt", 11.0)
    bearer = dumps({"access_token": "t", "token_type": "Bearer"})
    with pytest.raises(OAuthError, match="did not bind the token"):
        parse_token_response(200, bearer, now=1.0, dpop_jkt="jkt")
    # Without a proof, a DPoP token is not one we could use.
    with pytest.raises(OAuthError, match="only Bearer"):
        parse_token_response(200, dpop, now=1.0)
    assert parse_token_response(200, bearer, now=1.0).dpop_jkt is None


def test_a_dpop_nonce_challenge_wins_over_a_bearer_one() -> None:
    both = 'Bearer realm="mcp", DPoP error="use_dpop_nonce", algs="ES256"'
    challenge = parse_bearer_challenge([both])
    assert challenge is not None and challenge.error == "use_dpop_nonce"
    apart = parse_bearer_challenge(['Bearer realm="mcp"', 'DPoP error="use_dpop_nonce"'])
    assert apart is not None and apart.error == "use_dpop_nonce"
    # Otherwise the first one, as before.
    first = parse_bearer_challenge(['Bearer error="invalid_token", DPoP algs="ES256"'])
    assert first is not None and first.error == "invalid_token"


def test_the_nonce_header_of_any_answer() -> None:
    assert dpop_nonce_header([("content-type", "x"), ("dpop-nonce", "n-1")]) == "n-1"
    assert dpop_nonce_header([("dpop-nonce", "")]) is None
    assert dpop_nonce_header([("dpop-nonce", "bad nonce")]) is None
    assert dpop_nonce_header([]) is None


def test_the_token_endpoints_nonce_challenge_is_a_400_only() -> None:
    body = dumps({"error": "use_dpop_nonce"})
    headers = [("dpop-nonce", "n-1")]
    assert dpop_nonce_of(400, headers, body=body) == "n-1"
    for status in (200, 500, 403):
        assert dpop_nonce_of(status, headers, body=body) is None

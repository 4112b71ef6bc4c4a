"""The resource server's DPoP proof check (RFC 9449 section 4.3), with a fake signer."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pytest

from mcp_sansio._dpop_proof import (
    MAX_PROOF,
    DpopNonces,
    DpopRefusal,
    DpopVerified,
    check_dpop_proof,
    dpop_challenge,
    dpop_header,
    dpop_htu_candidates,
    dpop_htu_origins,
    dpop_request_htus,
)
from mcp_sansio._jose import access_token_hash, b64url, jwk_thumbprint, sign_jwt

JWK = {"kty": "EC", "crv": "P-256", "x": "eA", "y": "eQ"}
NOW = 1_800_000_000
URL = "https://mcp.example.com/mcp"
TOKEN = "tok-123"


def fake_sign(data: bytes) -> bytes:
    return hashlib.sha256(b"key" + data).digest()


def fake_verify(alg: str, jwk: Mapping[str, Any], data: bytes, sig: bytes) -> bool:
    return sig == fake_sign(data)


def proof(header: Mapping[str, Any] | None = None, **claims: Any) -> str:
    head = {"typ": "dpop+jwt", "alg": "ES256", "jwk": JWK, **(header or {})}
    body = {"jti": "j1", "htm": "POST", "htu": URL, "iat": NOW, "ath": access_token_hash(TOKEN)}
    body.update(claims)
    return sign_jwt(head, {k: v for k, v in body.items() if v is not None}, fake_sign)


def check(p: str, **kw: Any) -> DpopVerified | DpopRefusal:
    args: dict[str, Any] = {
        "method": "POST",
        "urls": dpop_htu_candidates(URL),
        "access_token": TOKEN,
        "now": NOW,
        "verify": fake_verify,
    }
    args.update(kw)
    return check_dpop_proof(p, **args)


def test_a_good_proof_is_verified() -> None:
    assert check(proof()) == DpopVerified(jkt=jwk_thumbprint(JWK), jti="j1", iat=NOW)


def test_htu_is_normalised_and_query_free() -> None:
    assert isinstance(check(proof(htu="HTTPS://MCP.example.com:443/mcp")), DpopVerified)
    assert isinstance(check(proof(htu=URL + "?a=1#f")), DpopVerified)
    # RFC 9449 section 4.3 check 9: RFC 3986 section 6.2.2 syntax normalisation too.
    assert isinstance(check(proof(htu="https://mcp.example.com/%6Dc%70")), DpopVerified)
    assert isinstance(
        check(proof(htu=URL), urls=dpop_htu_candidates("https://mcp.example.com/%6dcp")),
        DpopVerified,
    )
    assert isinstance(check(proof(htu="https://mcp.example.com/%6Dc")), DpopRefusal)


@pytest.mark.parametrize(
    "origin",
    [
        "https://mcp.example.com",
        "HTTPS://MCP.example.com:443",
        "http://127.0.0.1:8080",
        "wss://h.example",
        "https://h.example/base",
        "https://h.example/b%61se%2f",
        "ftp://x",
    ],
)
@pytest.mark.parametrize(
    "path",
    ["/mcp", "/%6Dcp", "/a%2fb", "/", "/../mcp", "/a/./b/../mcp", "/%2E%2E/mcp", "/..", "/.x/..y"],
)
def test_an_origin_worked_out_once_gives_the_same_candidates(origin: str, path: str) -> None:
    # BearerAuth parses its dpop_origin once; each request only adds its path.
    assert dpop_request_htus(dpop_htu_origins(origin), path) == dpop_htu_candidates(origin + path)


@pytest.mark.parametrize(
    "origin",
    [
        "https://h.example/",  # (+ "/mcp" would be "https://h.example//mcp")
        "https://h.example/base/",
        "https://h.example?x",
        "https://h.example/base?",
        "https://h.example#f",
        "https://user@h.example",
        "https://user:pw@h.example/base",
        "h.example",
        "https://",
        "http://[",
    ],
)
def test_an_origin_that_is_no_origin_is_refused(origin: str) -> None:
    with pytest.raises(ValueError):
        dpop_htu_origins(origin)


def test_websocket_accepts_both_forms() -> None:
    urls = dpop_htu_candidates("wss://mcp.example.com/ws")
    assert urls == ("wss://mcp.example.com/ws", "https://mcp.example.com/ws")
    for signed in urls:
        assert isinstance(
            check(proof(htu=signed, htm="GET"), method="GET", urls=urls), DpopVerified
        )
    assert dpop_htu_candidates("ftp://x/") == ("ftp://x/",)


@pytest.mark.parametrize(
    ("p", "kw", "error"),
    [
        (proof({"typ": "JWT"}), {}, "typ"),
        (proof({"alg": "none"}), {"algs": ("none", "ES256")}, "alg"),
        (proof({"alg": "HS256"}), {"algs": ("HS256",)}, "alg"),
        (proof({"alg": "PS256"}), {}, "alg"),
        (proof({"jwk": {**JWK, "d": "secret"}}), {}, "jwk"),
        (proof({"jwk": "nope"}), {}, "jwk"),
        (proof({"jwk": {"kty": "oct", "k": "x"}}), {}, "jwk"),
        (proof({"jwk": {"kty": "OKP", "x": "x"}}), {}, "jwk"),
        (proof(htm="GET"), {}, "htm"),
        (proof(htu="https://other.example.com/mcp"), {}, "htu"),
        (proof(htu=7), {}, "htu"),
        (proof(iat=NOW - 301), {}, "iat"),
        (proof(iat=NOW + 301), {}, "iat"),
        (proof(iat=True), {}, "iat"),
        (proof(iat=NOW - 20), {"window": 10}, "iat"),
        (proof(jti=None), {}, "jti"),
        (proof(jti=""), {}, "jti"),
        (proof(ath=None), {}, "ath"),
        (proof(ath=access_token_hash("stolen")), {}, "ath"),
        (proof()[:-4] + "AAAA", {}, "signature"),
        ("a.b", {}, "JWS"),
        ("a..c", {}, "JWS"),
        (f"{b64url(b'[1]')}.{b64url(b'{}')}.c", {}, "JWS"),
        ("!!!.e30.c", {}, "JWS"),
        # a URI urlsplit cannot parse is a refusal, not an exception
        (proof(htu="http://["), {}, "htu"),
        (proof(htu="https://mcp.example.com:99999/mcp"), {}, "htu"),
        # RFC 9110 section 4.2.4: userinfo is refused, not dropped
        (proof(htu="https://user@mcp.example.com/mcp"), {}, "htu"),
        (proof(htu="https://u:p@mcp.example.com/mcp"), {}, "htu"),
        # strict base64url: no padding, no characters the decoder would skip
        (proof() + "==", {}, "signature"),
        (proof()[:-5] + "!" + proof()[-5:], {}, "signature"),
        (proof().replace(".", "=.", 1), {}, "JWS"),
        (proof().replace(".", ".+", 1), {}, "JWS"),
    ],
)
def test_refusals(p: str, kw: dict[str, Any], error: str) -> None:
    result = check(p, **kw)
    assert isinstance(result, DpopRefusal)
    assert result.error == "invalid_dpop_proof"
    assert error in result.description


def test_a_proof_without_a_token_needs_no_ath() -> None:
    assert isinstance(check(proof(ath=None), access_token=None), DpopVerified)


def test_the_verified_jkt_is_the_proofs_key_for_the_caller_to_match() -> None:
    # The token's cnf.jkt is compared by the caller (BearerAuth: invalid_token, see
    # test_dpop_server's stolen-token test); the check names the key that signed.
    other = {**JWK, "x": JWK["y"], "y": JWK["x"]}
    result = check(proof({"jwk": other}))
    assert isinstance(result, DpopVerified)
    assert result.jkt == jwk_thumbprint(other) != jwk_thumbprint(JWK)


def test_nonce_required() -> None:
    nonces = DpopNonces(key=b"k" * 32)

    def valid(n: str) -> bool:
        return nonces.valid(n, NOW)

    missing = check(proof(), nonce_valid=valid)
    assert isinstance(missing, DpopRefusal) and missing.error == "use_dpop_nonce"
    stale = check(proof(nonce=nonces.issue(NOW - 301)), nonce_valid=valid)
    assert isinstance(stale, DpopRefusal) and stale.error == "use_dpop_nonce"
    assert isinstance(check(proof(nonce=nonces.issue(NOW - 5)), nonce_valid=valid), DpopVerified)


def test_stateless_nonces() -> None:
    nonces = DpopNonces(key=b"k" * 32, window=60)
    n = nonces.issue(NOW)
    assert nonces.valid(n, NOW) and nonces.valid(n, NOW + 60)
    assert not nonces.valid(n, NOW + 61)
    # a few seconds in the future is another replica's clock, more is refused
    assert nonces.valid(n, NOW - 5) and not nonces.valid(n, NOW - 6)
    assert not DpopNonces(key=b"k" * 32, skew=0).valid(n, NOW - 1)
    assert not DpopNonces(key=b"x" * 32).valid(n, NOW)  # another server's key
    assert not nonces.valid(n + "x", NOW)
    assert not nonces.valid("abc.def", NOW)
    assert not nonces.valid("1" * 13 + ".x", NOW)
    assert not nonces.valid(n.split(".")[0] + ".é", NOW)
    # digits of other scripts pass str.isdigit() but are no stamp of ours
    for stamp in ("\u0661\u0662\u0663", "\u00b2\u00b3", "\uff11\uff12"):
        assert not nonces.valid(f"{stamp}.x", NOW)
    # a stamp longer than 12 digits is refused even with a good MAC
    long = "0" * 3 + str(NOW)
    assert not nonces.valid(f"{long}.{nonces._mac(long)}", NOW)
    assert nonces.valid(f"{long[3:]}.{nonces._mac(long[3:])}", NOW)
    with pytest.raises(ValueError, match="16 bytes"):
        DpopNonces(key=b"short")


def test_dpop_header() -> None:
    assert dpop_header([(b"authorization", b"DPoP x")]) is None
    assert dpop_header([(b"dpop", b" a.b.c ")]) == "a.b.c"
    for bad in ([(b"dpop", b"a.b.c"), (b"dpop", b"d.e.f")], [(b"dpop", b"\xff")]):
        refusal = dpop_header(bad)
        assert isinstance(refusal, DpopRefusal) and refusal.error == "invalid_dpop_proof"
    assert isinstance(dpop_header([(b"dpop", b"a" * (MAX_PROOF + 1))]), DpopRefusal)
    assert dpop_header([(b"dpop", b"a" * MAX_PROOF)]) == "a" * MAX_PROOF


def test_insufficient_scope_challenge() -> None:
    found = dpop_challenge(
        "insufficient_scope",
        algs=("ES256",),
        description="needs admin",
        resource_metadata="https://m.example/prm",
        scope=("b", "a"),
        bearer_too=True,
    )
    assert found.status == 403
    assert [v.decode() for n, v in found.headers if n == b"www-authenticate"] == [
        'DPoP algs="ES256", error="insufficient_scope", resource_metadata="https://m.example/prm",'
        ' scope="a b", error_description="needs admin"',
        # (the Bearer challenge is bearer_challenge's own, parameters in its order)
        'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://m.example/prm"',
    ]
    assert dpop_challenge("invalid_request").status == 400
    plain = dpop_challenge("invalid_token", bearer_too=True)
    assert plain.status == 401
    assert [v for n, v in plain.headers if n == b"www-authenticate"][1] == b"Bearer"
    for bearer_too in (False, True):  # (a quote would end the header's parameter)
        with pytest.raises(ValueError, match="scope token"):
            dpop_challenge(None, scope=('a"b',), bearer_too=bearer_too)
    spaced = dpop_challenge(None, scope="b a")
    assert [v for n, v in spaced.headers if n == b"www-authenticate"] == [
        b'DPoP algs="ES256 RS256", scope="a b"'
    ]

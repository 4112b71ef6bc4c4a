"""DPoP proof signatures checked with cryptography: ES256 and RS256, real keys."""

from __future__ import annotations

import pytest

pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from mcp_sansio._dpop_proof import DpopVerified, check_dpop_proof, dpop_htu_candidates
from mcp_sansio._jose import b64url, dpop_proof, jwk_thumbprint
from mcp_trio._dpop_verify import verify_jws_signature
from mcp_trio._signing import SigningKey, new_dpop_key


def test_es256_and_rs256_verify_and_a_change_does_not() -> None:
    for key in (new_dpop_key(), SigningKey(rsa.generate_private_key(65537, 2048), "RS256")):
        sig = key.sign(b"input")
        assert verify_jws_signature(key.alg, key.public_jwk, b"input", sig)
        assert not verify_jws_signature(key.alg, key.public_jwk, b"inpuT", sig)
        other = "RS256" if key.alg == "ES256" else "ES256"
        assert not verify_jws_signature(other, key.public_jwk, b"input", sig)


def test_bad_keys_are_false() -> None:
    key = new_dpop_key()
    sig = key.sign(b"x")
    assert not verify_jws_signature("ES256", key.public_jwk, b"x", sig[:-1])
    # r || 0...0 || s: without the length check, s would read the same
    assert not verify_jws_signature("ES256", key.public_jwk, b"x", sig[:32] + bytes(32) + sig[32:])
    # strict base64url coordinates: padding or stray characters are no key
    for x in (key.public_jwk["x"] + "=", "!" + key.public_jwk["x"]):
        assert not verify_jws_signature("ES256", {**key.public_jwk, "x": x}, b"x", sig)
    assert not verify_jws_signature("ES256", {**key.public_jwk, "x": "AA"}, b"x", sig)
    assert not verify_jws_signature("ES256", {**key.public_jwk, "crv": "P-384"}, b"x", sig)
    assert not verify_jws_signature("ES256", {"kty": "EC", "crv": "P-256"}, b"x", sig)
    # An RSA key under 2048 bits is refused even with a good signature.
    small = rsa.generate_private_key(65537, 1024)
    pub = small.public_key().public_numbers()
    jwk = {"kty": "RSA", "n": b64url(_bytes(pub.n)), "e": b64url(_bytes(pub.e))}
    good = small.sign(b"x", padding.PKCS1v15(), hashes.SHA256())
    assert not verify_jws_signature("RS256", jwk, b"x", good)


def _bytes(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 7) // 8, "big")


def test_a_real_client_proof_passes_the_check() -> None:
    key = new_dpop_key()
    url = "https://mcp.example.com/mcp"
    p = dpop_proof(
        method="POST",
        url=url,
        sign=key.sign,
        alg=key.alg,
        jwk=key.public_jwk,
        jti="j",
        now=1000,
        access_token="tok",
    )
    result = check_dpop_proof(
        p,
        method="POST",
        urls=dpop_htu_candidates(url),
        access_token="tok",
        now=1010,
        verify=verify_jws_signature,
    )
    assert isinstance(result, DpopVerified)
    assert result.jkt == jwk_thumbprint(key.public_jwk)

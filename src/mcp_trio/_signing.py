"""Signing keys for private_key_jwt client assertions and DPoP proofs (the ``crypto`` extra).

The claims are :mod:`mcp_sansio._jose`'s; this module holds the key objects, which need a
crypto library (``cryptography``, the optional ``crypto`` extra: ``pip install
'mcp-trio[crypto]'``). It is imported only by a client configured with a private key
(:attr:`~mcp_trio.ClientCredentials.private_key`) or with ``OAuth(dpop=True)``, and
imports ``cryptography`` then; without it, that configuration raises :class:`ImportError`
naming the extra. Nothing here implements a cryptographic primitive.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, final

from mcp_sansio._jose import b64url, jwk_int

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

__all__ = ["SigningKey", "load_signing_key", "new_dpop_key", "new_jti", "require_crypto"]

_EXTRA: Final = "pip install 'mcp-trio[crypto]'"


def require_crypto(feature: str) -> None:
    """Import ``cryptography`` now, for ``feature``.

    Raises:
        ImportError: it is not installed (the message names the extra).
    """
    try:
        import cryptography.hazmat.primitives.asymmetric.ec  # noqa: F401, PLC0415 (lazy)
    except ImportError as exc:
        raise ImportError(f"{feature} needs the 'cryptography' package: {_EXTRA}") from exc


def _b64int(value: int, size: int | None = None) -> str:
    length = size if size is not None else max(1, (value.bit_length() + 7) // 8)
    return b64url(value.to_bytes(length, "big"))


@final
class SigningKey:
    """A private key and the JWS algorithm it signs with (``ES256``: P-256 and SHA-256;
    ``RS256``: RSA PKCS#1 v1.5 and SHA-256)."""

    def __init__(
        self, key: EllipticCurvePrivateKey | RSAPrivateKey, alg: str, kid: str | None = None
    ) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415 (lazy)

        if alg == "ES256":
            if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
                raise ValueError("ES256 needs a P-256 (secp256r1) EC private key")
        elif alg == "RS256":
            from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

            if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 2048:
                raise ValueError("RS256 needs an RSA private key of at least 2048 bits")
        else:
            raise ValueError(f"signing algorithm {alg!r} is not supported (ES256, RS256)")
        self._key = key
        self.alg = alg
        """The JWS ``alg``."""
        self.kid = kid
        """The key identifier sent in the JWS header, if any."""
        self.public_jwk = self._public_jwk()
        """The public key as a JWK (no private member): a DPoP proof's ``jwk`` header."""

    def _public_jwk(self) -> dict[str, str]:
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

        if isinstance(self._key, ec.EllipticCurvePrivateKey):
            numbers = self._key.public_key().public_numbers()
            return {
                "kty": "EC",
                "crv": "P-256",
                "x": _b64int(numbers.x, 32),
                "y": _b64int(numbers.y, 32),
            }
        public = self._key.public_key().public_numbers()
        return {"kty": "RSA", "n": _b64int(public.n), "e": _b64int(public.e)}

    def sign(self, data: bytes) -> bytes:
        """The JWS signature of ``data`` (RFC 7518 section 3: ``r || s`` for ES256)."""
        from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec, padding  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
            decode_dss_signature,
        )

        if isinstance(self._key, ec.EllipticCurvePrivateKey):
            r, s = decode_dss_signature(self._key.sign(data, ec.ECDSA(hashes.SHA256())))
            return r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return self._key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def load_signing_key(
    private_key: str | bytes | Mapping[str, Any], alg: str | None = None, kid: str | None = None
) -> SigningKey:
    """A :class:`SigningKey` from a PEM private key (PKCS#8 or traditional, unencrypted)
    or a private JWK (``EC`` P-256 or ``RSA``). ``alg`` defaults to the JWK's ``alg``,
    else to the key's type (``ES256`` for EC, ``RS256`` for RSA); ``kid`` to the JWK's.

    Raises:
        ImportError: ``cryptography`` is missing (see the module docs).
        ValueError: not a private key of a supported kind.
    """
    require_crypto("a private_key_jwt client key")
    from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        load_pem_private_key,
    )

    key: Any
    if isinstance(private_key, Mapping):
        jwk = private_key
        kty = jwk.get("kty")
        if kty == "EC":
            if jwk.get("crv") != "P-256":
                raise ValueError("an EC JWK must be on the P-256 curve")
            key = ec.derive_private_key(jwk_int(jwk, "d"), ec.SECP256R1())
        elif kty == "RSA":
            public = rsa.RSAPublicNumbers(jwk_int(jwk, "e"), jwk_int(jwk, "n"))
            p, q, d = jwk_int(jwk, "p"), jwk_int(jwk, "q"), jwk_int(jwk, "d")
            key = rsa.RSAPrivateNumbers(
                p, q, d, jwk_int(jwk, "dp"), jwk_int(jwk, "dq"), jwk_int(jwk, "qi"), public
            ).private_key()
        else:
            raise ValueError(f"a private JWK of type {kty!r} is not supported (EC, RSA)")
        alg = alg or (jwk.get("alg") if isinstance(jwk.get("alg"), str) else None)
        kid = kid or (jwk.get("kid") if isinstance(jwk.get("kid"), str) else None)
    else:
        data = private_key.encode("ascii") if isinstance(private_key, str) else private_key
        try:
            key = load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not an unencrypted PEM private key: {exc}") from None
    if alg is None:
        alg = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
    return SigningKey(key, alg, kid)


def new_dpop_key() -> SigningKey:
    """A fresh P-256 key for DPoP proofs (ES256).

    Raises:
        ImportError: ``cryptography`` is missing (see the module docs).
    """
    require_crypto("DPoP (OAuth(dpop=True))")
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    return SigningKey(ec.generate_private_key(ec.SECP256R1()), "ES256")


def new_jti() -> str:
    """A unique JWT ID (128 random bits)."""
    return secrets.token_urlsafe(16)

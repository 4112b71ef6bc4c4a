"""Signature checks of DPoP proofs with ``cryptography`` (imported lazily: the ``crypto``
extra), for :func:`mcp_sansio._dpop_proof.check_dpop_proof`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_sansio._jose import jwk_int

from ._signing import require_crypto

__all__ = ["verify_jws_signature"]


def verify_jws_signature(alg: str, jwk: Mapping[str, Any], data: bytes, signature: bytes) -> bool:
    """Whether ``signature`` (JWS encoding) is ``jwk``'s signature of ``data`` under
    ``alg``: ``ES256`` (P-256 only; ``r || s`` turned into DER for ``cryptography``) or
    ``RS256`` (at least 2048 bits). A key or signature it cannot use is ``False``.

    Raises:
        ImportError: ``cryptography`` is missing.
    """
    require_crypto("DPoP proof verification")
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415 (lazy)
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
        encode_dss_signature,
    )

    try:
        if alg == "ES256" and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256":
            if len(signature) != 64:
                return False
            ec_key = ec.EllipticCurvePublicNumbers(
                jwk_int(jwk, "x"), jwk_int(jwk, "y"), ec.SECP256R1()
            ).public_key()
            der = encode_dss_signature(
                int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            )
            ec_key.verify(der, data, ec.ECDSA(hashes.SHA256()))
            return True
        if alg == "RS256" and jwk.get("kty") == "RSA":
            rsa_key = rsa.RSAPublicNumbers(jwk_int(jwk, "e"), jwk_int(jwk, "n")).public_key()
            if rsa_key.key_size < 2048:
                return False
            rsa_key.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
            return True
    except (InvalidSignature, ValueError):  # (jwk_int: a member that is no integer)
        return False
    return False

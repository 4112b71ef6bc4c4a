"""``jwk_int``: the one reader of a JWK's integer members, for the signing keys
(``mcp_trio._signing``) and the DPoP proof checks (``mcp_trio._dpop_verify``). No I/O."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio._jose import b64url, jwk_int


@pytest.mark.parametrize("value", [0, 1, 65537, 2**255 - 19])
def test_a_member_is_an_unsigned_big_endian_integer(value: int) -> None:
    encoded = b64url(value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big"))
    assert jwk_int({"kty": "EC", "x": encoded}, "x") == value


@pytest.mark.parametrize("jwk", [{}, {"x": 5}, {"x": None}, {"x": b"AQAB"}])
def test_a_missing_member_is_named(jwk: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="the JWK has no 'x'"):
        jwk_int(jwk, "x")


@pytest.mark.parametrize("text", ["AQAB=", "AQ+B", "AQ/B", "AQ AB", "A", "é"])
def test_a_member_that_is_not_strict_base64url_is_refused(text: str) -> None:
    # The standard decoder would skip what it does not know, and read another key.
    with pytest.raises(ValueError, match=r"the JWK's 'x' is not base64url \(RFC 7518"):
        jwk_int({"x": text}, "x")

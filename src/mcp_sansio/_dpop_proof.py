"""A resource server's check of DPoP proofs (RFC 9449; SEP-1932 "DPoP Profile for MCP").

Theory of operation
-------------------
A client holding a DPoP-bound access token sends, with every request, ``Authorization:
DPoP <token>`` and one ``DPoP`` header: a compact JWS whose header carries the client's
public ``jwk`` and whose claims name the request (``htm``, ``htu``), the moment
(``iat``), a unique ``jti``, the token's hash (``ath``) and, when the server asked for
one, a ``nonce``. The server accepts the request when the proof is well formed, signed
by that ``jwk``, about *this* request, fresh, and the ``jwk``'s RFC 7638 thumbprint is
the token's ``cnf.jkt`` (section 4.3, section 7.1).

Everything here is data: :func:`check_dpop_proof` takes the proof, the request's
method, the URIs it may name, the token and ``now``, and returns a :class:`DpopVerified`
(with the key's thumbprint, for the caller to match with the token's ``cnf.jkt``) or a
:class:`DpopRefusal` carrying the RFC 9449 error. The
signature itself is checked by a ``verify`` callable the binding passes (its crypto
library stays there), and the time comes from the caller. A server that keeps no state
(SEP-1932) bounds replay by the ``iat`` window and, if it wants, by a nonce it can check
without a table: :class:`DpopNonces`, an HMAC of a timestamp under a server key.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Literal, final

import attrs

from ._errors import RemoteProtocolError
from ._http_auth import (
    BearerError,
    authorization_header,
    bearer_challenge_header,
    check_scopes,
)
from ._http_common import HttpResponse, json_response
from ._jose import (
    access_token_hash,
    b64url,
    b64url_decode,
    has_dot_segments,
    htu_origin,
    jwk_thumbprint,
    normalized_escapes,
    normalized_htu,
    remove_dot_segments,
)
from ._json import dumps, loads

__all__ = [
    "DEFAULT_DPOP_ALGS",
    "DpopError",
    "DpopNonces",
    "DpopRefusal",
    "DpopVerified",
    "authorization_credentials",
    "check_dpop_proof",
    "dpop_challenge",
    "dpop_header",
    "dpop_htu_candidates",
    "dpop_htu_origins",
    "dpop_request_htus",
]

DEFAULT_DPOP_ALGS: Final = ("ES256", "RS256")
"""The proof algorithms accepted by default: asymmetric only (RFC 9449 section 4.3)."""
MAX_PROOF: Final = 8192
"""The longest ``DPoP`` header looked at (an RSA-4096 proof is about 1.5 KB)."""
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})

DpopError = Literal["invalid_dpop_proof", "use_dpop_nonce", "invalid_token"]
"""RFC 9449 section 7.1 and section 12.2: the ``error`` of a DPoP challenge."""

Verify = Callable[[str, Mapping[str, Any], bytes, bytes], bool]
"""``(alg, public jwk, signing input, signature) -> bool``: the binding's signature check
(JWS encoding: ``r || s`` for ES256); a key it cannot use is ``False``, not an error."""


@final
@attrs.frozen(kw_only=True)
class DpopVerified:
    """A proof that passed every check."""

    jkt: str
    """The RFC 7638 thumbprint of the proof's key (the token's ``cnf.jkt``)."""
    jti: str
    """The proof's unique id (for a replay cache)."""
    iat: int
    """When the client says it made the proof (seconds since the epoch)."""


@final
@attrs.frozen(kw_only=True)
class DpopRefusal:
    """Why a request's DPoP proof (or its binding to the token) was refused."""

    error: DpopError
    """The RFC 9449 error code to put in the ``DPoP`` challenge."""
    description: str
    """A short, token-free explanation (``error_description``)."""


def dpop_header(headers: Iterable[tuple[bytes, bytes]]) -> str | DpopRefusal | None:
    """The request's one ``DPoP`` header: the proof, ``None`` when there is none, or a
    refusal when there are several or it is too long or not ASCII (RFC 9449 section 4.3
    step 1: exactly one)."""
    values = [value for name, value in headers if name == b"dpop"]
    if not values:
        return None
    if len(values) > 1:
        return _bad("several DPoP headers")
    if len(values[0]) > MAX_PROOF or not values[0].isascii():
        return _bad("malformed DPoP proof")
    return values[0].decode("ascii").strip(" \t")


def dpop_htu_candidates(url: str) -> tuple[str, ...]:
    """The ``htu`` values a proof for a request to ``url`` may carry, normalised
    (:func:`~mcp_sansio._jose.normalized_htu`, as :func:`check_dpop_proof` normalises
    the proof's).

    Plain HTTP gives one. A WebSocket handshake is an HTTP ``GET`` to the ``ws(s)`` URI,
    and clients differ on which they sign; both the ``http(s)`` twin and the ``ws(s)``
    form are accepted (the scheme is the only difference).

    Raises:
        ValueError: ``url`` does not parse, or has userinfo.
    """
    origin, path = htu_origin(url)
    return tuple(form + (path or "/") for form in _twins(origin))


def dpop_htu_origins(origin: str) -> tuple[str, ...]:
    """What :func:`dpop_htu_candidates` gives for every request to a server at
    ``origin`` before the request's path, worked out once: :func:`dpop_request_htus`
    adds the path. ``origin`` is ``scheme://host[:port]``, optionally with the path
    prefix the server is mounted under (``https://h.example/base``).

    Raises:
        ValueError: ``origin`` does not parse, has no scheme or host, or has userinfo,
            a query, a fragment or a trailing ``/`` (the request's path, which starts
            with one, goes right after it: ``https://h.example/`` would expect
            ``https://h.example//mcp``).
    """
    if "?" in origin or "#" in origin:
        raise ValueError(f"an origin has no query or fragment: {origin!r}")
    base, path = htu_origin(origin)
    scheme, _, host = base.partition("://")
    if not scheme or not host:
        raise ValueError(f"an origin is scheme://host[:port]: {origin!r}")
    if path.endswith("/"):
        raise ValueError(f"an origin has no trailing '/': {origin!r}")
    return tuple(form + path for form in _twins(base))


def dpop_request_htus(origins: Iterable[str], path: str) -> tuple[str, ...]:
    """The :func:`dpop_htu_candidates` of a request to ``path`` (``/…``, no query) at
    the server whose :func:`dpop_htu_origins` are ``origins``.

    A path with no dot segment is added as it is (its escapes normalised); one with
    them has them removed from the whole path, the origin's prefix and ``path``
    together, as from the URI the client sent (``/base`` and ``/../mcp`` is ``/mcp``)."""
    tail = normalized_escapes(path)
    if not has_dot_segments(tail):
        return tuple(origin + tail for origin in origins)
    urls = []
    for origin in origins:  # (scheme://host[:port] has no "/" after its "://")
        cut = origin.find("/", origin.index("://") + 3)
        cut = len(origin) if cut < 0 else cut
        urls.append(origin[:cut] + (remove_dot_segments(origin[cut:] + tail) or "/"))
    return tuple(urls)


def _twins(origin: str) -> tuple[str, ...]:
    scheme, sep, rest = origin.partition("://")
    twin = {"http": "ws", "https": "wss", "ws": "http", "wss": "https"}.get(scheme)
    return (origin, f"{twin}{sep}{rest}") if twin is not None else (origin,)


def _bad(description: str) -> DpopRefusal:
    return DpopRefusal(error="invalid_dpop_proof", description=description)


def _json_object(part: str) -> dict[str, Any] | None:
    try:
        value = loads(b64url_decode(part))
    except ValueError:  # (binascii.Error is one)
        return None
    return value if isinstance(value, dict) else None


def check_dpop_proof(
    proof: str,
    *,
    method: str,
    urls: Collection[str],
    access_token: str | None,
    now: float,
    verify: Verify,
    algs: Collection[str] = DEFAULT_DPOP_ALGS,
    window: float = 300.0,
    nonce_valid: Callable[[str], bool] | None = None,
) -> DpopVerified | DpopRefusal:
    """Check a DPoP proof against the request it came with (RFC 9449 section 4.3).

    Args:
        proof: the ``DPoP`` header's value (see :func:`dpop_header`).
        method: the request method (``htm``).
        urls: the normalised URIs the proof's ``htu`` may name
            (:func:`dpop_htu_candidates`).
        access_token: the token the request presents (``ath`` is then required and
            checked), or ``None`` for a proof without one.
        now: the current time, seconds since the epoch.
        verify: the signature check (see :data:`Verify`).
        algs: the accepted ``alg`` values; ``none`` and ``HS*`` are never accepted.
        window: how far ``iat`` may be from ``now``, either way, in seconds.
        nonce_valid: when given, a nonce is required and must pass it (else
            ``use_dpop_nonce``: answer with a fresh ``DPoP-Nonce``).

    Returns:
        :class:`DpopVerified`, or the :class:`DpopRefusal` to answer with. Whether its
        ``jkt`` is the token's ``cnf.jkt`` is the caller's check, once the token is
        verified (after this one: a bad proof costs no token check); when it is not,
        answer ``invalid_token``.
    """
    parts = proof.split(".")
    if len(parts) != 3 or not all(parts):
        return _bad("the DPoP proof is not a compact JWS")
    header, claims = _json_object(parts[0]), _json_object(parts[1])
    if header is None or claims is None:
        return _bad("the DPoP proof is not a compact JWS")
    if header.get("typ") != "dpop+jwt":
        return _bad("the DPoP proof's typ is not dpop+jwt")
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in algs or alg == "none" or alg.startswith("HS"):
        return _bad("the DPoP proof's alg is not accepted")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict) or not _PRIVATE_MEMBERS.isdisjoint(jwk):
        return _bad("the DPoP proof's jwk is not a public key")
    try:
        thumbprint = jwk_thumbprint(jwk)
    except (ValueError, binascii.Error):
        return _bad("the DPoP proof's jwk is not a public key")
    try:
        signature = b64url_decode(parts[2])
    except ValueError:
        return _bad("the DPoP proof's signature is not base64url")
    if not verify(alg, jwk, f"{parts[0]}.{parts[1]}".encode("ascii"), signature):
        return _bad("the DPoP proof's signature does not verify")
    jti, iat = claims.get("jti"), claims.get("iat")
    if not isinstance(jti, str) or not jti:
        return _bad("the DPoP proof has no jti")
    if claims.get("htm") != method:
        return _bad("the DPoP proof's htm is not the request method")
    claimed_htu = claims.get("htu")
    try:
        if not isinstance(claimed_htu, str) or normalized_htu(claimed_htu) not in urls:
            return _bad("the DPoP proof's htu is not the request URI")
    except ValueError:  # (unparsable, "http://[", a port past 65535; or userinfo)
        return _bad("the DPoP proof's htu is not the request URI")
    if isinstance(iat, bool) or not isinstance(iat, int | float) or abs(iat - now) > window:
        return _bad("the DPoP proof's iat is outside the acceptance window")
    if access_token is not None and claims.get("ath") != access_token_hash(access_token):
        return _bad("the DPoP proof's ath is not the access token's hash")
    if nonce_valid is not None:
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not nonce_valid(nonce):
            return DpopRefusal(error="use_dpop_nonce", description="A fresh DPoP nonce is required")
    return DpopVerified(jkt=thumbprint, jti=jti, iat=int(iat))


@final
@attrs.frozen(kw_only=True)
class DpopNonces:
    """Stateless server nonces (SEP-1932): ``"<time>.<HMAC(key, time)>"``, accepted for
    :attr:`window` seconds after :meth:`issue` made them, by any server holding
    :attr:`key`, and up to :attr:`skew` seconds *before* (another replica, its clock a
    little ahead, issued it). No table: a nonce cannot be revoked, only outlived."""

    key: bytes = attrs.field(repr=False)
    """The HMAC key (at least 16 bytes; keep it secret, share it across replicas)."""
    window: float = 300.0
    """Seconds a nonce stays valid."""
    skew: float = 5.0
    """How far in the future a nonce's time may be (the clock skew between replicas
    sharing :attr:`key`)."""

    def __attrs_post_init__(self) -> None:
        if len(self.key) < 16:
            raise ValueError("a DPoP nonce key needs at least 16 bytes")

    def _mac(self, stamp: str) -> str:
        return b64url(hmac.new(self.key, stamp.encode("ascii"), hashlib.sha256).digest())

    def issue(self, now: float) -> str:
        """A nonce made at ``now``."""
        stamp = str(int(now))
        return f"{stamp}.{self._mac(stamp)}"

    def valid(self, nonce: str, now: float) -> bool:
        """Whether ``nonce`` is one of ours, made no more than :attr:`window` ago (and
        no more than :attr:`skew` ahead)."""
        stamp, _, mac = nonce.partition(".")
        if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
            return False
        if not hmac.compare_digest(mac.encode("ascii", "replace"), self._mac(stamp).encode()):
            return False
        return -self.skew <= now - int(stamp) <= self.window


def authorization_credentials(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str] | None:
    """The request's ``Authorization`` scheme (lower-cased) and credentials, ``None``
    when it has none; ``("", "")`` when it has several or a malformed one (answer
    ``400 invalid_request``)."""
    try:
        found = authorization_header(headers)
    except RemoteProtocolError:
        return ("", "")
    if found is None:
        return None
    scheme, token = found
    return ("", "") if token is None else (scheme, token)


def dpop_challenge(
    error: DpopError | Literal["invalid_request", "insufficient_scope"] | None,
    *,
    algs: Iterable[str] = DEFAULT_DPOP_ALGS,
    description: str | None = None,
    resource_metadata: str | None = None,
    scope: Collection[str] = (),
    bearer_too: bool = False,
    nonce: str | None = None,
) -> HttpResponse:
    """A refusal with a ``WWW-Authenticate: DPoP algs="…"`` challenge (RFC 9449 section
    7.1), also a ``Bearer`` one when ``bearer_too`` (a server that still takes bearer
    tokens; it repeats an ``insufficient_scope``), and ``DPoP-Nonce`` when ``nonce`` is
    given (section 9: with ``use_dpop_nonce``). ``scope``, the scopes the request needs
    (a collection, or a space-separated string), goes in both. ``401``, ``403`` for
    ``insufficient_scope``, ``400`` for ``invalid_request``.

    Raises:
        ValueError: a scope that is no RFC 6750 scope token; with ``bearer_too``,
            anything :func:`~mcp_sansio.http.bearer_challenge` refuses."""
    scopes = " ".join(sorted(check_scopes(scope)))
    params = [f'algs="{" ".join(algs)}"']
    if error is not None:
        params.append(f'error="{error}"')
    if resource_metadata is not None:
        params.append(f'resource_metadata="{resource_metadata}"')
    if scopes:
        params.append(f'scope="{scopes}"')
    if description is not None:
        params.append(f'error_description="{description}"')
    headers = [(b"www-authenticate", ("DPoP " + ", ".join(params)).encode("ascii"))]
    if bearer_too:  # (its one error of ours: a Bearer token may lack a scope too)
        bearer_error: BearerError | None = (
            "insufficient_scope" if error == "insufficient_scope" else None
        )
        headers.append(bearer_challenge_header(bearer_error, resource_metadata, scope, None))
    if nonce is not None:
        headers.append((b"dpop-nonce", nonce.encode("ascii")))
    if error is None:
        return HttpResponse(status=401, headers=tuple(headers))
    body: dict[str, str] = {"error": error}
    if description is not None:
        body["error_description"] = description
    status = {"invalid_request": 400, "insufficient_scope": 403}.get(error, 401)
    return json_response(status, dumps(body), tuple(headers))

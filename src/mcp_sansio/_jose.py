"""Signed JWTs an OAuth client makes, sans-IO: private_key_jwt assertions and DPoP proofs.

Theory of operation
-------------------
A JWS is ``base64url(header) "." base64url(claims) "." base64url(signature)``; what is
signed is the first two parts. Everything here is the part that is data: the header and
the claims of an RFC 7523 client assertion (:func:`client_assertion`) and of an RFC 9449
DPoP proof (:func:`dpop_proof`), the ``ath`` hash, the ``htu`` of a request, the JWK
thumbprint a DPoP-bound token names (RFC 7638), and the ``use_dpop_nonce`` answers of an
authorization server or a resource server (:func:`dpop_nonce_of`). The signature itself
comes from a ``sign`` callable the caller passes (``signing input -> signature bytes``,
the JWS encoding: ``r || s`` for ES256): the key object and its crypto library live in
the binding (:mod:`mcp_trio._signing`), so this module needs nothing beyond the standard
library, and the time (``now``) and the unique ``jti`` come from the caller too.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from ._json import dumps, loads

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "access_token_hash",
    "b64url",
    "b64url_decode",
    "client_assertion",
    "dpop_nonce_header",
    "dpop_nonce_of",
    "dpop_proof",
    "has_dot_segments",
    "htu",
    "htu_origin",
    "htu_path",
    "jwk_int",
    "jwk_thumbprint",
    "normalized_escapes",
    "normalized_htu",
    "remove_dot_segments",
    "sign_jwt",
]

CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
"""RFC 7523 section 2.2: the ``client_assertion_type`` of a JWT client assertion."""
ASSERTION_LIFETIME: Final = 60
"""Seconds a client assertion is good for (RFC 7523 section 3: short-lived)."""
MAX_NONCE: Final = 512
"""The longest ``DPoP-Nonce`` kept (RFC 9449 section 8.1: an opaque ``NQCHAR`` string)."""
_NONCE_CHARS: Final = frozenset(chr(c) for c in range(0x21, 0x7F)) - {'"', "\\"}
# RFC 7638 section 3.2: the members of the thumbprint, per key type.
_THUMBPRINT_MEMBERS: Final = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n")}

Signer = Callable[[bytes], bytes]
"""The binding's key: signing input in, JWS signature bytes out."""


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 section 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


def b64url_decode(text: str) -> bytes:
    """Strict unpadded base64url (RFC 7515 section 2), what a JWS and a JWK carry.

    Raises:
        ValueError: padding or any other character (the standard decoder skips what it
            does not know), or a length no encoding has (``binascii.Error``).
    """
    if _B64URL.fullmatch(text) is None:
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwk_int(jwk: Mapping[str, Any], name: str) -> int:
    """The integer a JWK member holds (``x``, ``n``, ``d``, ...): unsigned, big-endian,
    strict unpadded base64url (RFC 7518 section 6).

    Raises:
        ValueError: the member is missing or not a string, or is not strict base64url
            (the lax decoder would skip what it does not know, making another key).
    """
    value = jwk.get(name)
    if not isinstance(value, str):
        raise ValueError(f"the JWK has no {name!r}")
    try:
        return int.from_bytes(b64url_decode(value), "big")
    except ValueError:  # (binascii.Error is one)
        raise ValueError(
            f"the JWK's {name!r} is not base64url (RFC 7518 section 6: unpadded, '-' and '_')"
        ) from None


def sign_jwt(header: Mapping[str, Any], claims: Mapping[str, Any], sign: Signer) -> str:
    """The compact JWS of ``claims`` under ``header``, signed by ``sign``."""
    signing_input = f"{b64url(dumps(dict(header)))}.{b64url(dumps(dict(claims)))}".encode("ascii")
    return f"{signing_input.decode('ascii')}.{b64url(sign(signing_input))}"


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The SHA-256 JWK thumbprint (RFC 7638) of a public ``EC`` or ``RSA`` key: what a
    DPoP-bound token's ``cnf.jkt`` names (RFC 9449 section 6.1).

    Raises:
        ValueError: another key type, or a required member missing.
    """
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or any(not isinstance(jwk.get(m), str) for m in members):
        raise ValueError("a JWK thumbprint needs an EC (crv, x, y) or RSA (n, e) public key")
    # Lexicographic member order, no whitespace (orjson keeps insertion order).
    return b64url(hashlib.sha256(dumps({m: jwk[m] for m in members})).digest())


def access_token_hash(access_token: str) -> str:
    """``ath`` (RFC 9449 section 4.2): base64url(SHA-256(the ASCII access token))."""
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest())


_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DEFAULT_PORTS: Final = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def _escape(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    return char if char in _UNRESERVED else "%" + match[1].upper()


def _split(url: str, *, escapes: bool) -> tuple[str, str]:
    """``url``'s ``scheme://host[:port]`` (scheme and host lower-cased, a default port
    dropped) and its path (empty when it is), its escapes normalised when ``escapes``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if escapes:
        if parts.username is not None:  # (RFC 9110 section 4.2.4: no userinfo in http(s))
            raise ValueError("a URI with userinfo")
        host = _ESCAPE.sub(_escape, host)
    host = host.lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    path = htu_path(parts.path) if escapes else parts.path
    return urlunsplit((scheme, netloc, "", "", "")), path


def htu(url: str) -> str:
    """The ``htu`` a client signs for a request to ``url`` (RFC 9449 section 4.2: the
    HTTP target URI without its query and fragment): scheme and host lower-cased, a
    default port (80 for ``http``/``ws``, 443 for ``https``/``wss``) dropped, an empty
    path ``/`` (RFC 3986 section 6.2.2.1 and 6.2.3), and the path as it is sent, its
    percent-escapes untouched: a server that compares without normalising (section 4.3
    says it SHOULD normalise, not MUST) still finds the URI it was sent.

    Raises:
        ValueError: ``url`` does not parse (``http://[``, a port past 65535).
    """
    origin, path = _split(url, escapes=False)
    return origin + (path or "/")


def htu_origin(url: str) -> tuple[str, str]:
    """``url``'s ``scheme://host[:port]`` and path, each normalised as
    :func:`normalized_htu` does (the path empty when it is).

    Raises:
        ValueError: ``url`` does not parse (``http://[``, a port past 65535), or has
            userinfo.
    """
    return _split(url, escapes=True)


def htu_path(path: str) -> str:
    """A URI path as :func:`normalized_htu` compares it (RFC 3986 section 6.2.2):
    :func:`normalized_escapes`, then :func:`remove_dot_segments`."""
    return remove_dot_segments(_ESCAPE.sub(_escape, path))


def normalized_escapes(path: str) -> str:
    """A URI path with its percent-escapes normalised (RFC 3986 section 6.2.2.1 and
    6.2.2.2): unreserved characters decoded (``%2E`` is ``.``), the others' hex in upper
    case (``%2f`` is ``%2F``, still not a ``/``)."""
    return _ESCAPE.sub(_escape, path)


_DOT_SEGMENT: Final = re.compile(r"(?:^|/)\.\.?(?:/|$)")


def has_dot_segments(path: str) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` segment (:func:`remove_dot_segments` would
    change it)."""
    return _DOT_SEGMENT.search(path) is not None


def remove_dot_segments(path: str) -> str:
    """``path`` without its ``.`` and ``..`` segments: RFC 3986 section 5.2.4's
    algorithm, which section 6.2.2.3 applies to normalise a URI (``/a/b/../c`` is
    ``/a/c``; a ``..`` above the root is dropped). Escapes are taken as they are: decode
    ``%2E`` first (:func:`normalized_escapes`, section 6.2.2.2) for it to count as a dot.

    One pass over ``path``, each step moving on from where the last one stopped (the
    RFC's input buffer is a position, not a string cut again and again, so a long path
    of many segments costs its length, not its length squared)."""
    if not has_dot_segments(path):
        return path
    out: list[str] = []  # (segments, each with its leading "/" if it had one)
    i, end = 0, len(path)
    while i < end:
        if path.startswith("../", i):  # A
            i += 3
        elif path.startswith("./", i) or path.startswith("/./", i):  # A
            i += 2
        elif path.startswith("/.", i) and i + 2 == end:  # B: "/." at the end becomes "/"
            out.append("/")
            i = end
        elif path.startswith("/../", i):  # C: "/../" becomes "/", one segment less
            i += 3
            if out:
                out.pop()
        elif path.startswith("/..", i) and i + 3 == end:  # C: at the end
            if out:
                out.pop()
            out.append("/")
            i = end
        elif end - i <= 2 and path[i:] in (".", ".."):  # D
            i = end
        else:  # E: the next segment, its "/" and all up to the "/" after it
            cut = path.find("/", i + 1 if path[i] == "/" else i)
            cut = end if cut < 0 else cut
            out.append(path[i:cut])
            i = cut
    return "".join(out)


def normalized_htu(url: str) -> str:
    """``url`` as a server compares a proof's ``htu`` with the request's URI (RFC 9449
    section 4.3 check 9: "ignoring any query and fragment parts", after RFC 3986
    section 6.2.2 syntax-based normalisation): without its query and fragment, scheme
    and host lower-cased (section 6.2.2.1), percent-encoded unreserved characters
    decoded and other escapes in upper-case hex (section 6.2.2.1 and 6.2.2.2), then dot
    segments removed (section 6.2.2.3: ``/a/../mcp`` and ``/a/%2E%2E/mcp`` are
    ``/mcp``), an empty path ``/`` and a default port (80 for ``http``/``ws``, 443 for
    ``https``/``wss``) dropped (section 6.2.3). An escaped ``/`` is not decoded
    (``/a%2Fb`` is not ``/a/b``, and ``/a%2F..%2Fmcp`` is one segment). Two spellings
    of one URI give one string (``/%6Dcp`` is ``/mcp``); both sides of the comparison
    go through it.

    Raises:
        ValueError: ``url`` does not parse (``http://[``, a port past 65535), or has
            userinfo (RFC 9110 section 4.2.4: an ``http(s)`` URI has none).
    """
    origin, path = _split(url, escapes=True)
    return origin + (path or "/")


def client_assertion(
    *,
    client_id: str,
    audience: str,
    alg: str,
    sign: Signer,
    now: float,
    jti: str,
    kid: str | None = None,
    lifetime: int = ASSERTION_LIFETIME,
) -> str:
    """An RFC 7523 client assertion for ``private_key_jwt`` (section 2.2; OpenID Connect
    Core section 9): ``iss`` = ``sub`` = ``client_id``, ``aud`` the authorization server's
    issuer identifier (``audience``), a unique ``jti``, ``iat`` ``now`` and ``exp``
    ``lifetime`` seconds later."""
    header: dict[str, Any] = {"alg": alg, "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid
    issued = int(now)
    claims = {
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "jti": jti,
        "iat": issued,
        "exp": issued + lifetime,
    }
    return sign_jwt(header, claims, sign)


def dpop_proof(
    *,
    jwk: Mapping[str, Any],
    alg: str,
    sign: Signer,
    method: str,
    url: str,
    now: float,
    jti: str,
    access_token: str | None = None,
    nonce: str | None = None,
) -> str:
    """A DPoP proof (RFC 9449 section 4.2) for a ``method`` request to ``url``: header
    ``typ: dpop+jwt``, the ``alg`` and the public ``jwk`` (never a private member);
    claims ``jti``, ``htm``, ``htu`` (:func:`htu`), ``iat``, with ``ath`` when it
    presents ``access_token`` (section 7) and the server's ``nonce`` if one is known.

    Raises:
        ValueError: ``jwk`` has a private member (``d``, ``p``, ...).
    """
    if any(member in jwk for member in ("d", "p", "q", "dp", "dq", "qi")):
        raise ValueError("a DPoP proof's jwk must be the public key only")
    claims: dict[str, Any] = {"jti": jti, "htm": method, "htu": htu(url), "iat": int(now)}
    if access_token is not None:
        claims["ath"] = access_token_hash(access_token)
    if nonce is not None:
        claims["nonce"] = nonce
    return sign_jwt({"typ": "dpop+jwt", "alg": alg, "jwk": dict(jwk)}, claims, sign)


def _valid_nonce(value: str | None) -> str | None:
    if value is None or not 0 < len(value) <= MAX_NONCE or not _NONCE_CHARS.issuperset(value):
        return None
    return value


def dpop_nonce_header(headers: Iterable[tuple[str, str]]) -> str | None:
    """The valid ``DPoP-Nonce`` of any answer (RFC 9449 sections 8.2 and 9: the next
    proof to that server must carry it), ``None`` without one or for an invalid one.
    ``headers`` are ``(lowercase name, value)`` pairs."""
    return _valid_nonce(next((v for n, v in headers if n == "dpop-nonce"), None))


def dpop_nonce_of(
    status: int, headers: Iterable[tuple[str, str]], *, body: bytes = b"", error: str | None = None
) -> str | None:
    """The nonce a server asks the next proof to carry, when its answer is a
    ``use_dpop_nonce`` challenge: an authorization server's ``400`` whose JSON body has
    ``"error": "use_dpop_nonce"`` (RFC 9449 section 8), or a resource server's ``401``
    whose ``WWW-Authenticate: DPoP`` challenge has ``error="use_dpop_nonce"`` (section 9:
    pass that challenge's ``error``), with a ``DPoP-Nonce`` header either way. ``None``
    for any other answer, or a nonce that is empty, too long or not ``NQCHAR``s.
    ``headers`` are ``(lowercase name, value)`` pairs."""
    if status == 401:
        refused = error
    elif status == 400:
        try:
            obj = loads(body)
        except ValueError:
            return None
        refused = obj.get("error") if isinstance(obj, dict) else None
    else:
        return None
    if refused != "use_dpop_nonce":
        return None
    return dpop_nonce_header(headers)

"""OAuth 2.1 for MCP clients, sans-IO: discovery, registration, authorization, tokens.

Theory of operation
-------------------
An MCP server that wants authorization answers ``401`` (or ``403`` with
``error="insufficient_scope"``) and a ``WWW-Authenticate: Bearer ...`` challenge. What the
client does next is a fixed sequence of HTTP exchanges with the server and its
authorization server (AS); every step is a pure function here, so the whole sequence is
testable without a socket and any binding (Trio, asyncio, a browser extension) can
drive it:

1. :func:`parse_bearer_challenge` reads the challenge (``resource_metadata``, ``scope``,
   ``error``).
2. :func:`protected_resource_metadata_urls` lists where the protected-resource metadata
   (RFC 9728) may be, in the order the spec says to try them;
   :func:`parse_protected_resource_metadata` reads one and refuses it when its
   ``resource`` is not the server we talk to.
3. :func:`authorization_server_metadata_urls` lists the AS metadata URLs (RFC 8414, then
   OpenID Connect Discovery); :meth:`AuthorizationServerMetadata.parse` refuses a
   document whose ``issuer`` is not the one the URL was built from.
4. Registration: pre-registered credentials, a Client ID Metadata Document URL (when the
   AS says it supports them) or Dynamic Client Registration
   (:func:`registration_body`, :func:`parse_registration`).
5. :func:`select_scope`, :func:`new_pkce` and :func:`authorization_url` build the
   authorization request; the user agent goes there and comes back to the redirect URI;
   :func:`parse_authorization_response` checks ``state`` and ``iss`` (RFC 9207) before
   the code may go anywhere.
6. :func:`token_request` (authorization code, refresh token or client credentials, with
   the AS's client authentication method) and :func:`parse_token_response`; a token's
   expiry is data (:attr:`OAuthToken.expires_at`), the caller passes ``now``. The
   assertion grants (workload identity, enterprise-managed authorization) are in
   :mod:`._oauth_grants`.

Everything the peer sends that breaks these rules raises :class:`OAuthError`. Nothing
here does I/O or reads a clock; randomness (``state``, the PKCE verifier) comes from
:mod:`secrets` unless the caller passes its own.

Specification: ``2025-11-25/basic/authorization`` and
``2026-07-28/basic/authorization/*`` (discovery, client registration, RFC 9207).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import attrs

from ._http_auth import (
    OFFLINE_ACCESS,
    WELL_KNOWN_RESOURCE_PATH,
    ProtectedResourceMetadata,
    without_offline_access,
)
from ._jose import CLIENT_ASSERTION_TYPE, b64url
from ._json import JSONDecodeError, loads

__all__ = [
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "ClientCredentials",
    "OAuthError",
    "OAuthToken",
    "PkcePair",
    "TokenEndpointAuthMethod",
    "authorization_server_metadata_urls",
    "authorization_url",
    "check_endpoint",
    "is_internal",
    "is_loopback",
    "legacy_authorization_server",
    "new_pkce",
    "parse_authorization_response",
    "parse_bearer_challenge",
    "parse_protected_resource_metadata",
    "parse_registration",
    "parse_token_response",
    "protected_resource_metadata_urls",
    "registration_body",
    "resource_matches",
    "response_challenge",
    "select_authorization_server",
    "select_scope",
    "token_request",
]

TokenEndpointAuthMethod: TypeAlias = Literal[
    "none", "client_secret_basic", "client_secret_post", "private_key_jwt"
]
"""The client authentication methods at the token endpoint we implement."""
# What Dynamic Client Registration may ask for and accept (preferred first): a registered
# client has no key of ours, so never private_key_jwt.
_AUTH_METHODS: Final[tuple[str, ...]] = ("none", "client_secret_basic", "client_secret_post")
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_MAX_LEEWAY: Final = 30.0
# RFC 6750 section 2.1's b64token is narrower; any visible ASCII is accepted (opaque
# tokens vary), and nothing that could break out of the Authorization header.
_TOKEN_CHARS: Final = frozenset(chr(c) for c in range(0x21, 0x7F))
# RFC 3986 section 2: a URI is visible ASCII (anything else is percent-encoded).
_URL_CHARS: Final = _TOKEN_CHARS
# RFC 6749 section 5.2: error and error_description are %x20-21 / %x23-5B / %x5D-7E.
_ERROR_CHARS: Final = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\"}
_MAX_ERROR_TEXT: Final = 200


class OAuthError(Exception):
    """Authorization could not be obtained: the server, the authorization server or
    the user's redirect broke a rule (the message says which), or the authorization
    server answered with an OAuth error (:attr:`error`)."""

    def __init__(self, message: str, *, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        """The OAuth ``error`` code the authorization server sent, if any."""


# ---------------------------------------------------------------------- challenge


@final
@attrs.frozen(kw_only=True)
class BearerChallenge:
    """A ``WWW-Authenticate: Bearer`` challenge (RFC 6750 section 3, RFC 9728 section 5.1)."""

    resource_metadata: str | None = None
    """The URL of the server's protected-resource metadata, if the server named it."""
    scope: str | None = None
    """The scopes the current operation needs (space-separated), if given."""
    error: str | None = None
    """``invalid_token``, ``insufficient_scope``, ...; ``None`` when absent."""
    error_description: str | None = None
    """The human-readable description, if any."""


def _auth_params(value: str) -> list[tuple[str, dict[str, str]]]:
    """The challenges in one ``WWW-Authenticate`` value: ``(scheme, params)`` pairs.

    RFC 9110 section 11.6.1: ``challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]``,
    challenges separated by commas; a token followed by ``=`` is a parameter, a token
    followed by a space (or the end) starts the next challenge.
    """
    out: list[tuple[str, dict[str, str]]] = []
    i, n = 0, len(value)
    params: dict[str, str] | None = None
    while i < n:
        while i < n and value[i] in " \t,":
            i += 1
        start = i
        while i < n and value[i] not in " \t,=":
            i += 1
        token = value[start:i]
        if not token:
            i += 1  # (a stray '=')
            continue
        j = i
        while j < n and value[j] in " \t":
            j += 1
        if j < n and value[j] == "=" and params is not None and not value[j:].startswith("=="):
            j += 1
            while j < n and value[j] in " \t":
                j += 1
            if j < n and value[j] == '"':
                j += 1
                chars: list[str] = []
                while j < n and value[j] != '"':
                    if value[j] == "\\" and j + 1 < n:
                        j += 1
                    chars.append(value[j])
                    j += 1
                i = j + 1
                params.setdefault(token.lower(), "".join(chars))
            else:
                start = j
                while j < n and value[j] not in " \t,":
                    j += 1
                params.setdefault(token.lower(), value[start:j])
                i = j
        elif j < n and value[j] == "=" and params is not None:
            # token68 (base64 with '=' padding): not an auth-param; skip it.
            while j < n and value[j] not in " \t,":
                j += 1
            i = j
        else:
            params = {}
            out.append((token.lower(), params))
            i = j
    return out


def parse_bearer_challenge(values: Iterable[str]) -> BearerChallenge | None:
    """The ``Bearer`` and ``DPoP`` challenges (RFC 9449 section 7.1: the same
    parameters) in the ``WWW-Authenticate`` header values, read as one.

    A server may offer both schemes, and the one that names the resource metadata or
    the scope need not come first (``DPoP algs="ES256", Bearer scope="files:read"``),
    so each of these is the first challenge's that has it. The ``error`` (and its
    ``error_description``) is the first challenge's that has one, except that a
    ``DPoP`` challenge with ``error="use_dpop_nonce"`` wins wherever it is (section
    7.2: ``Bearer realm="mcp", DPoP error="use_dpop_nonce"``); the ``resource_metadata``
    and ``scope`` of the challenge whose error is reported come before the others'.
    One pass over the values: the work is linear in their length, however many
    challenges they hold.

    Returns ``None`` when there is none (another scheme, or no header): the caller then
    discovers everything from the well-known URLs.
    """
    primary: dict[str, str] | None = None  # (the challenge whose error is reported)
    found: dict[str, str] = {}  # resource_metadata and scope: the first challenge's
    for value in values:
        for scheme, params in _auth_params(value):
            if scheme not in ("bearer", "dpop"):
                continue
            error = params.get("error") or None
            if (
                primary is None
                or (error is not None and not primary.get("error"))
                or (
                    scheme == "dpop"
                    and error == "use_dpop_nonce"
                    and primary.get("error") != "use_dpop_nonce"
                )
            ):
                primary = params
            for key in ("resource_metadata", "scope"):
                if key not in found and params.get(key):
                    found[key] = params[key]
    if primary is None:
        return None
    return BearerChallenge(
        resource_metadata=primary.get("resource_metadata") or found.get("resource_metadata"),
        scope=primary.get("scope") or found.get("scope"),
        error=primary.get("error") or None,
        error_description=primary.get("error_description"),
    )


def response_challenge(status: int, www_authenticate: Iterable[str]) -> BearerChallenge | None:
    """The challenge of an answer that asks for authorization, from its status and its
    ``WWW-Authenticate`` values: any ``401`` (an empty challenge if it has no ``Bearer``
    one), or a ``403`` with ``error="insufficient_scope"`` (a step-up); ``None`` for any
    other answer."""
    if status not in (401, 403):
        return None
    challenge = parse_bearer_challenge(www_authenticate)
    if status == 401:
        return challenge if challenge is not None else BearerChallenge()
    if challenge is not None and challenge.error == "insufficient_scope":
        return challenge
    return None


# ---------------------------------------------------------------------- URLs


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is a loopback name or address (``localhost``,
    ``127.0.0.1``, ``::1``)."""
    try:
        return (urlsplit(url).hostname or "").lower() in _LOOPBACK
    except ValueError:
        return False


#: An IPv4 address as ``inet_aton`` (so ``getaddrinfo``, so our HTTP client) reads it: one
#: to four dot-separated numbers, each decimal, octal (``0``...) or hex (``0x``...).
_INET_ATON = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)(?:\.(?:0[xX][0-9a-fA-F]*|[0-9]+)){0,3}")


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` (a URL's hostname) is written as, or ``None`` for a name.

    Written any way the resolver takes it: ``127.1``, ``2130706433`` and ``0x7f.0.0.1``
    are all ``127.0.0.1`` (``inet_aton``), and an IPv4-mapped IPv6 address is its IPv4
    address.
    """
    if ":" in host:
        try:
            v6 = ipaddress.IPv6Address(host.partition("%")[0])  # (without a zone ID)
        except ValueError:
            return None
        return v6.ipv4_mapped or v6
    if _INET_ATON.fullmatch(host) is None:
        return None
    parts = host.split(".")
    numbers = []
    for part in parts:
        if part[:2].lower() == "0x":
            numbers.append(int(part[2:] or "0", 16))
        elif part.startswith("0") and len(part) > 1:
            if not set(part) <= set("01234567"):
                return None  # (not octal: a name to the resolver, which finds none)
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *high, low = numbers
    if any(n > 0xFF for n in high) or low >= 1 << (8 * (4 - len(high))):
        return None
    value = low  # (the last number fills the bytes the others leave)
    for at, number in enumerate(high):
        value |= number << (8 * (3 - at))
    return ipaddress.IPv4Address(value)


def _internal_host(host: str) -> bool:
    name = host.lower().removesuffix(".")
    if name == "localhost" or name.endswith(".localhost"):  # (RFC 6761 section 6.3)
        return True
    address = _ip_literal(name)
    return address is not None and not address.is_global


def is_internal(url: str) -> bool:
    """Whether ``url``'s host is, as written, on the user's machine or network:
    ``localhost`` (or a name under ``.localhost``), or an IP address that is not global
    (:attr:`ipaddress.IPv4Address.is_global`): loopback, link-local (a cloud's metadata
    service, ``169.254.169.254``), private (``10.0.0.5``, ``fd00::1``), unspecified
    (``0.0.0.0``), shared (``100.64.0.0/10``) or reserved. An IPv4 address counts however
    the resolver would read it (``127.1``, ``2130706433``, ``[::ffff:127.0.0.1]``).

    Other names are not resolved (this is the sans-IO core): ``mcp.corp.example`` is not
    internal here, whatever address it has.
    """
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return _internal_host(host)


def check_endpoint(url: str, what: str, *, loopback: bool, internal: bool = False) -> str:
    """``url`` if it may carry OAuth traffic: absolute, no fragment, and ``https``
    (``2025-11-25/basic/authorization``, "Communication Security": authorization server
    endpoints MUST be served over HTTPS). Plain ``http`` only to a loopback host, and
    only when ``loopback`` is true: the caller passes it for an MCP server that is
    itself on loopback (tests, local tools), so a remote server cannot steer the
    client's requests to plain-http services on the user's machine.

    Nor to an internal host (:func:`is_internal`: ``localhost``, or a loopback,
    link-local, private or unspecified IP address), unless ``loopback`` or ``internal``
    is true: the caller passes ``internal`` for an MCP server that is itself internal
    (``is_internal(server_url)``: local development, a server on the LAN). A remote
    server names these URLs (its challenge's ``resource_metadata``, its authorization
    servers, their endpoints), so could otherwise have the client send requests into the
    user's network: ``https://169.254.169.254/...`` (a cloud's metadata service),
    ``https://10.0.0.5/admin`` (server-side request forgery, when the client runs on a
    server, as an agent connecting to the MCP URLs its users give does). Names are not
    resolved: one whose DNS answer is internal (``mcp.corp.example``, or an attacker's
    name that resolves to ``127.0.0.1``) passes, so a client that connects to servers
    it does not trust still needs its network to stop such requests (an egress proxy
    or firewall).

    Only visible ASCII, as in any URI (RFC 3986 §2): a space, a control character or
    anything beyond ASCII is refused. The authorization URL is built on the
    ``authorization_endpoint`` and shown to the user, so an authorization server that
    put an ESC sequence in it would write to the user's terminal.

    Raises:
        OAuthError: the URL is not acceptable.
    """
    if not _URL_CHARS.issuperset(url):
        raise OAuthError(f"{what} has a character a URL may not have (RFC 3986): {url!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 (a malformed port raises here)
    except ValueError as exc:
        raise OAuthError(f"{what} is not a valid URL: {url!r}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise OAuthError(f"{what} is not an absolute http(s) URL: {url!r}")
    if parts.fragment:
        raise OAuthError(f"{what} has a fragment: {url!r}")
    if scheme != "https" and not (loopback and host.lower() in _LOOPBACK):
        raise OAuthError(
            f"{what} must use https (http only on loopback, for a loopback server): {url!r}"
        )
    if not (loopback or internal) and _internal_host(host):
        raise OAuthError(
            f"{what} is on the local machine or a private network, and the MCP server is "
            f"not: {url!r} (refused: a remote server may not direct requests there)"
        )
    return url


def protected_resource_metadata_urls(
    server_url: str, challenge: BearerChallenge | None
) -> list[str]:
    """Where to look for the server's protected-resource metadata, in order: the
    challenge's ``resource_metadata``, then the path-based well-known URL, then the
    root one (``2026-07-28/basic/authorization/authorization-server-discovery``,
    "Protected Resource Metadata Discovery Requirements"). A WebSocket server's are its
    ``http(s)`` twin's (:func:`websocket_http_url`)."""
    server_url = websocket_http_url(server_url)
    origin = _origin(server_url)
    urls: list[str] = []
    if challenge is not None and challenge.resource_metadata:
        urls.append(challenge.resource_metadata)
    path = urlsplit(server_url).path.rstrip("/")
    if path:
        urls.append(f"{origin}{WELL_KNOWN_RESOURCE_PATH}{path}")
    urls.append(f"{origin}{WELL_KNOWN_RESOURCE_PATH}")
    return list(dict.fromkeys(urls))


def legacy_authorization_server(server_url: str) -> str:
    """The issuer a ``2025-03-26`` server without protected-resource metadata implies:
    its own origin (``2025-03-26/basic/authorization``, "Server Metadata Discovery")."""
    return _origin(server_url)


def select_authorization_server(authorization_servers: Sequence[str], preferred: str | None) -> str:
    """The authorization server to use of those the protected-resource metadata lists
    (RFC 9728 ``authorization_servers``; ``2025-11-25/basic/authorization``,
    "Authorization Server Location": the choice is the client's): ``preferred`` (the
    issuer the client's credentials are for) when listed, else the first. The list is
    not empty (:func:`parse_protected_resource_metadata` refuses that).
    """
    if preferred is not None and preferred in authorization_servers:
        return preferred
    return authorization_servers[0]


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """The AS metadata URLs for ``issuer``, in the spec's priority order: RFC 8414 path
    insertion, OpenID Connect path insertion, OpenID Connect path appending (without a
    path: RFC 8414, then OpenID Connect)."""
    origin = _origin(issuer)
    path = urlsplit(issuer).path.rstrip("/")  # RFC 8414 §3.1: a terminating "/" is removed
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


# A WebSocket URL's opening handshake is an HTTP request to its http(s) twin (RFC 6455
# section 3: the same host, port and resource name; WHATWG Fetch maps ws to http and
# wss to https): for OAuth it is that resource.
_WEBSOCKET_SCHEMES: Final = {"ws": "http", "wss": "https"}


def websocket_http_url(url: str) -> str:
    """The ``http(s)`` URL of a ``ws(s)`` one (anything else as it is): where OAuth
    discovery looks for a WebSocket server's protected-resource metadata, and a name of
    its resource (see :func:`resource_matches`)."""
    parts = urlsplit(url)
    scheme = _WEBSOCKET_SCHEMES.get(parts.scheme.lower())
    return url if scheme is None else urlunsplit(parts._replace(scheme=scheme))


def _norm_origin(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port, parts.path


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether the metadata's ``resource`` identifies the server at ``server_url``: the
    same origin (scheme and host in any case, default ports elided), and the server's
    path equal to, or below, the resource's path (a root resource covers ``/mcp``).
    RFC 9728 section 3.3 and ``2026-07-28`` authorization: a client refuses metadata for
    another resource, which is how a server cannot make us ask for tokens elsewhere.

    For a WebSocket server (a ``ws``/``wss`` ``server_url``) the resource may name it
    by its URL or by the ``http(s)`` twin (:func:`websocket_http_url`); for any other
    server the schemes must be the same (an ``https`` server's metadata never names a
    ``wss`` resource)."""
    try:
        if urlsplit(server_url).scheme.lower() in _WEBSOCKET_SCHEMES:
            resource, server_url = websocket_http_url(resource), websocket_http_url(server_url)
        r_scheme, r_host, r_port, r_path = _norm_origin(resource)
        s_scheme, s_host, s_port, s_path = _norm_origin(server_url)
    except ValueError:
        return False
    if (r_scheme, r_host, r_port) != (s_scheme, s_host, s_port) or not r_host:
        return False
    r_path, s_path = r_path.rstrip("/"), s_path.rstrip("/")
    return s_path == r_path or s_path.startswith(r_path + "/")


# ---------------------------------------------------------------------- metadata


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        obj = loads(body)
    except JSONDecodeError as exc:
        raise OAuthError(f"{what} is not JSON") from exc
    if type(obj) is not dict:
        raise OAuthError(f"{what} is not a JSON object")
    return obj


def _str(obj: Mapping[str, Any], key: str, what: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if type(value) is not str or not value:
        raise OAuthError(f"{what}: {key!r} must be a non-empty string")
    return value


def _strs(obj: Mapping[str, Any], key: str, what: str) -> tuple[str, ...] | None:
    value = obj.get(key)
    if value is None:
        return None
    if type(value) is not list or not all(type(v) is str for v in value):
        raise OAuthError(f"{what}: {key!r} must be a list of strings")
    return tuple(value)


def _bool(obj: Mapping[str, Any], key: str, what: str) -> bool | None:
    value = obj.get(key)
    if value is None or type(value) is bool:
        return value
    raise OAuthError(f"{what}: {key!r} must be true or false")


def parse_protected_resource_metadata(body: bytes, server_url: str) -> ProtectedResourceMetadata:
    """Read the Protected Resource Metadata document (RFC 9728) fetched for the server at
    ``server_url``: the same value a server serves (``resource_name``,
    ``bearer_methods_supported``, ``resource_documentation``,
    ``dpop_signing_alg_values_supported`` and ``dpop_bound_access_tokens_required`` in
    their fields, any other member in ``extra``). A member the document does not have is
    ``None`` (``bearer_methods_supported`` too: its absence is no statement, RFC 9728
    section 2). An ``offline_access`` in ``scopes_supported``, which a server should
    not list (``2026-07-28/basic/authorization#refresh-tokens``), is left out.

    Raises:
        OAuthError: not a valid document (a member of the wrong type too), no
            authorization server, or a ``resource`` that is not this server (see
            :func:`resource_matches`).
    """
    what = "the protected-resource metadata"
    obj = _json_object(body, what)
    resource = _str(obj, "resource", what, required=True)
    assert resource is not None
    if not resource_matches(resource, server_url):
        raise OAuthError(
            f"{what} is for {resource!r}, not for the server at {server_url!r}: refused"
        )
    servers = _strs(obj, "authorization_servers", what)
    if not servers:
        raise OAuthError(f"{what} names no authorization server")
    supported = _strs(obj, "scopes_supported", what)
    known = {
        "resource",
        "authorization_servers",
        "scopes_supported",
        "bearer_methods_supported",
        "resource_name",
        "resource_documentation",
        "dpop_signing_alg_values_supported",
        "dpop_bound_access_tokens_required",
    }
    try:
        return ProtectedResourceMetadata(
            resource=resource,
            authorization_servers=servers,
            # (A server's offline_access is not taken: the client asks for it when
            # its authorization server lists it, see select_scope.)
            scopes_supported=None if supported is None else without_offline_access(supported),
            bearer_methods_supported=_strs(obj, "bearer_methods_supported", what),
            resource_name=_str(obj, "resource_name", what),
            resource_documentation=_str(obj, "resource_documentation", what),
            dpop_signing_alg_values_supported=_strs(obj, "dpop_signing_alg_values_supported", what),
            dpop_bound_access_tokens_required=_bool(obj, "dpop_bound_access_tokens_required", what),
            extra={k: v for k, v in obj.items() if k not in known},
        )
    except ValueError as exc:  # (a resource that is no absolute URI, with a fragment)
        raise OAuthError(f"{what}: {exc}") from None


@final
@attrs.frozen(kw_only=True)
class AuthorizationServerMetadata:
    """An authorization server's metadata (RFC 8414 / OpenID Connect Discovery)."""

    issuer: str
    """The issuer identifier: identical to the one the metadata URL was built from."""
    authorization_endpoint: str | None = None
    """Where the user agent goes to authorize (``None``: no authorization code grant)."""
    token_endpoint: str
    """Where codes and refresh tokens are exchanged."""
    registration_endpoint: str | None = None
    """Dynamic Client Registration (RFC 7591), if offered."""
    scopes_supported: tuple[str, ...] | None = None
    """The scopes the AS knows of, if it says (``offline_access`` is requested only
    when listed here)."""
    token_endpoint_auth_methods_supported: tuple[str, ...] = ("client_secret_basic",)
    """How clients authenticate at the token endpoint (RFC 8414's default when absent)."""
    code_challenge_methods_supported: tuple[str, ...] | None = None
    """PKCE methods; we always use ``S256``, and only with an authorization server that
    lists it (``None``: it does not say, and is refused by :func:`authorization_url`)."""
    grant_types_supported: tuple[str, ...] = ("authorization_code", "implicit")
    """The grant types (RFC 8414's default when absent)."""
    client_id_metadata_document_supported: bool = False
    """Whether an HTTPS URL may be the ``client_id`` (Client ID Metadata Documents)."""
    authorization_response_iss_parameter_supported: bool = False
    """Whether authorization responses carry ``iss`` (RFC 9207): then it is required."""
    dpop_signing_alg_values_supported: tuple[str, ...] | None = None
    """The DPoP proof algorithms the AS takes (RFC 9449 section 5.1), if it says:
    DPoP is used (``OAuth(dpop=True)``) only where this lists ``ES256``."""

    @classmethod
    def parse(
        cls, body: bytes, issuer: str, *, loopback: bool = False, internal: bool = False
    ) -> AuthorizationServerMetadata:
        """Read a metadata document fetched from a URL built from ``issuer``
        (``loopback``: plain-http loopback endpoints are acceptable; ``internal``:
        endpoints on the local machine or a private network are, see
        :func:`check_endpoint`).

        Raises:
            OAuthError: not a valid document, or its ``issuer`` differs from
                ``issuer`` by as much as one character (RFC 8414 section 3.3:
                identical; ``2026-07-28`` authorization-server-discovery: MUST NOT be
                used otherwise), or an endpoint that may not carry OAuth traffic.
        """
        what = "the authorization server metadata"
        obj = _json_object(body, what)
        got = _str(obj, "issuer", what, required=True)
        if got != issuer:
            raise OAuthError(f"{what} names issuer {got!r}, not {issuer!r}: refused")
        token = _str(obj, "token_endpoint", what, required=True)
        assert token is not None
        auth = _str(obj, "authorization_endpoint", what)
        registration = _str(obj, "registration_endpoint", what)
        for url, name in ((auth, "authorization_endpoint"), (token, "token_endpoint")):
            if url is not None:
                check_endpoint(url, name, loopback=loopback, internal=internal)
        if registration is not None:
            check_endpoint(
                registration, "registration_endpoint", loopback=loopback, internal=internal
            )
        return cls(
            issuer=issuer,
            authorization_endpoint=auth,
            token_endpoint=token,
            registration_endpoint=registration,
            scopes_supported=_strs(obj, "scopes_supported", what),
            token_endpoint_auth_methods_supported=(
                _strs(obj, "token_endpoint_auth_methods_supported", what)
                or ("client_secret_basic",)
            ),
            code_challenge_methods_supported=_strs(obj, "code_challenge_methods_supported", what),
            grant_types_supported=(
                _strs(obj, "grant_types_supported", what) or ("authorization_code", "implicit")
            ),
            client_id_metadata_document_supported=obj.get("client_id_metadata_document_supported")
            is True,
            authorization_response_iss_parameter_supported=obj.get(
                "authorization_response_iss_parameter_supported"
            )
            is True,
            dpop_signing_alg_values_supported=_strs(obj, "dpop_signing_alg_values_supported", what),
        )

    @classmethod
    def fallback(cls, issuer: str) -> AuthorizationServerMetadata:
        """The default endpoints of ``2025-03-26/basic/authorization`` ("Fallbacks for
        Servers without Metadata Discovery"): ``/authorize``, ``/token`` and
        ``/register`` at the issuer's origin, for a server with no metadata at all.
        Such a server cannot say it supports PKCE ``S256``: that revision requires it of
        every authorization server, so the fallback assumes it (the only case where a
        client proceeds without ``code_challenge_methods_supported``)."""
        base = _origin(issuer)
        return cls(
            issuer=issuer,
            authorization_endpoint=f"{base}/authorize",
            token_endpoint=f"{base}/token",
            registration_endpoint=f"{base}/register",
            code_challenge_methods_supported=("S256",),  # assumed: see above
        )


# ---------------------------------------------------------------------- registration


@final
@attrs.frozen(kw_only=True)
class ClientCredentials:
    """An OAuth client's identity at one authorization server.

    Raises:
        ValueError: a ``client_secret`` or a ``private_key`` without its ``issuer``.
    """

    client_id: str
    """The client identifier (a URL for a Client ID Metadata Document)."""
    client_secret: str | None = attrs.field(default=None, repr=False)
    """The secret of a confidential client."""
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    """How to authenticate at the token endpoint (``None``: chosen from the AS's list)."""
    issuer: str | None = None
    """The issuer of the authorization server these credentials belong to; they are
    never used at another one (``2026-07-28`` client-registration, "Authorization Server
    Binding"). Required with a ``client_secret``; ``None`` only for a public client
    (a ``client_id`` alone, nothing to leak), used at whichever authorization server
    the MCP server names."""
    private_key: str | bytes | Mapping[str, Any] | None = attrs.field(
        default=None, repr=False, eq=False, hash=False
    )
    """A private key for ``private_key_jwt`` (RFC 7523 client assertions), used where
    the AS lists that method: an unencrypted PEM (PKCS#8 or traditional) or a private
    JWK, P-256 (``ES256``) or RSA (``RS256``). Needs the ``crypto`` extra
    (``pip install 'mcp-trio[crypto]'``); requires ``issuer``. Neither compared nor
    hashed (a JWK is a dict): credentials are equal whatever their keys."""
    signing_algorithm: str | None = None
    """The assertion's ``alg`` (``ES256`` or ``RS256``; default: the JWK's ``alg``, else
    the key's type)."""
    key_id: str | None = None
    """The ``kid`` of the assertion's header, if the AS needs it to pick the key."""

    def __attrs_post_init__(self) -> None:
        if self.private_key is not None and self.issuer is None:
            raise ValueError(
                "a private_key must be bound to its authorization server: pass issuer= "
                "(its assertions are for that one only)"
            )
        if self.client_secret is not None and self.issuer is None:
            raise ValueError(
                "a client_secret must be bound to its authorization server: pass issuer= "
                "(credentials are never sent to an authorization server the MCP server "
                "merely names)"
            )


def registration_body(
    *,
    client_name: str,
    redirect_uris: Sequence[str],
    metadata: AuthorizationServerMetadata,
    scope: str | None = None,
    application_type: Literal["native", "web"] | None = None,
) -> dict[str, Any]:
    """The JSON body of a Dynamic Client Registration request (RFC 7591).

    ``application_type`` (OIDC Registration; ``2026-07-28`` client registration: the
    client MUST say) defaults to ``native`` when every redirect URI is on a loopback
    host, else ``web``. ``grant_types`` includes ``refresh_token`` (SEP-2207). The
    requested authentication method is the first of ``none``, ``client_secret_basic``,
    ``client_secret_post`` the AS supports; the AS has the last word.
    """
    if application_type is None:
        loopback = all((urlsplit(u).hostname or "") in _LOOPBACK for u in redirect_uris)
        application_type = "native" if loopback else "web"
    supported = metadata.token_endpoint_auth_methods_supported
    method = next((m for m in _AUTH_METHODS if m in supported), "client_secret_basic")
    body: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": application_type,
    }
    if scope:
        body["scope"] = scope
    return body


def parse_registration(body: bytes, issuer: str) -> ClientCredentials:
    """Read a Dynamic Client Registration response (RFC 7591 section 3.2.1).

    Raises:
        OAuthError: no ``client_id``, or malformed fields.
    """
    what = "the client registration response"
    obj = _json_object(body, what)
    client_id = _str(obj, "client_id", what, required=True)
    assert client_id is not None
    secret = _str(obj, "client_secret", what)
    method = obj.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        raise OAuthError(f"{what}: token_endpoint_auth_method {method!r} is not supported")
    return ClientCredentials(
        client_id=client_id,
        client_secret=secret,
        token_endpoint_auth_method=method,
        issuer=issuer,
    )


def _auth_method(
    client: ClientCredentials, metadata: AuthorizationServerMetadata
) -> TokenEndpointAuthMethod:
    if client.token_endpoint_auth_method is not None:
        return client.token_endpoint_auth_method
    supported = metadata.token_endpoint_auth_methods_supported
    if client.private_key is not None and (
        "private_key_jwt" in supported or client.client_secret is None
    ):
        return "private_key_jwt"
    if client.client_secret is None:
        return "none"
    if "client_secret_post" in supported and "client_secret_basic" not in supported:
        return "client_secret_post"
    return "client_secret_basic"


# ---------------------------------------------------------------------- authorization


def select_scope(
    *,
    challenge: BearerChallenge | None,
    resource_metadata: ProtectedResourceMetadata | None,
    metadata: AuthorizationServerMetadata | None,
    previous: str | None = None,
    offline_access: bool = True,
) -> str | None:
    """The ``scope`` to request (``None``: omit it).

    ``2026-07-28`` authorization, "Scope Selection Strategy": the challenge's ``scope``
    if any, else every scope in the metadata's ``scopes_supported``, else none. On a
    step-up (``previous``: what was requested before) the challenged scopes are added
    to the previous ones rather than replacing them ("Step-Up Authorization Flow").
    ``offline_access`` is added only when the AS lists it in ``scopes_supported``
    ("Refresh Tokens"; SEP-2207); one a challenge names is left out, as one in the
    resource's metadata is (a challenge that names nothing else names no scope).
    """
    scopes: list[str] = []
    if previous:
        scopes += previous.split()
    # A server's offline_access is not taken, from a challenge as from its metadata
    # (parse_protected_resource_metadata): the AS's scopes_supported decides, below.
    challenged = [] if challenge is None or not challenge.scope else challenge.scope.split()
    challenged = list(without_offline_access(challenged))
    if challenged:
        scopes += challenged
    elif not previous and resource_metadata is not None and resource_metadata.scopes_supported:
        scopes += resource_metadata.scopes_supported
    if (
        offline_access
        and scopes
        and metadata is not None
        and metadata.scopes_supported is not None
        and OFFLINE_ACCESS in metadata.scopes_supported
    ):
        scopes.append(OFFLINE_ACCESS)
    if not scopes:
        return None
    return " ".join(dict.fromkeys(scopes))


@final
@attrs.frozen(kw_only=True)
class PkcePair:
    """A PKCE code verifier and its ``S256`` challenge (RFC 7636)."""

    verifier: str = attrs.field(repr=False)
    """The secret sent with the token request."""
    challenge: str
    """``BASE64URL(SHA256(verifier))``, sent with the authorization request."""


def new_pkce(entropy: bytes | None = None) -> PkcePair:
    """A PKCE pair. ``entropy`` (at least 32 bytes) makes it deterministic; by default
    32 bytes come from :mod:`secrets` (a 43-character verifier).

    Raises:
        ValueError: ``entropy`` shorter than 32 bytes.
    """
    if entropy is None:
        entropy = secrets.token_bytes(32)
    if len(entropy) < 32:
        raise ValueError("PKCE needs at least 32 bytes of entropy")
    verifier = b64url(entropy)[:128]
    return PkcePair(verifier=verifier, challenge=b64url(hashlib.sha256(verifier.encode()).digest()))


def check_code_grant_support(metadata: AuthorizationServerMetadata) -> str:
    """The authorization endpoint of an authorization server the authorization code
    grant can use; refuse one without it, or without PKCE ``S256`` in
    ``code_challenge_methods_supported``.

    2025-11-25 authorization, "Authorization Code Protection": PKCE support is known
    only from ``code_challenge_methods_supported``; when it is absent, or does not list
    ``S256``, the client MUST refuse to proceed. (:func:`authorization_url` checks this;
    a client checks it sooner too, before it registers.)

    Raises:
        OAuthError: the authorization server cannot be used.
    """
    endpoint = metadata.authorization_endpoint
    if endpoint is None:
        raise OAuthError("the authorization server has no authorization_endpoint")
    methods = metadata.code_challenge_methods_supported
    if methods is None or "S256" not in methods:
        raise OAuthError(
            "the authorization server does not list PKCE S256 in "
            "code_challenge_methods_supported: refused"
        )
    return endpoint


def authorization_url(
    metadata: AuthorizationServerMetadata,
    *,
    client_id: str,
    redirect_uri: str,
    pkce: PkcePair,
    state: str,
    resource: str,
    scope: str | None,
) -> str:
    """The authorization request URL (OAuth 2.1 section 4.1.1): ``response_type=code``,
    PKCE ``S256``, ``state``, and ``resource`` exactly as the protected-resource
    metadata publishes it (RFC 8707; no ``/`` appended).

    Raises:
        OAuthError: the AS has no authorization endpoint, or does not list ``S256`` in
            ``code_challenge_methods_supported`` (absent counts as not listed; only
            :meth:`AuthorizationServerMetadata.fallback` assumes it).
    """
    endpoint = check_code_grant_support(metadata)
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": pkce.challenge,
        "code_challenge_method": "S256",
        "state": state,
        "resource": resource,
    }
    if scope:
        params["scope"] = scope
    parts = urlsplit(endpoint)
    query = urlencode(
        [*parse_qsl(parts.query, keep_blank_values=True), *params.items()], quote_via=quote
    )
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def parse_authorization_response(
    redirect_url: str,
    *,
    state: str,
    metadata: AuthorizationServerMetadata,
    redirect_uri: str | None = None,
) -> str:
    """The authorization code from the redirect back to us, once it passed the checks.

    * the URL must be ``redirect_uri`` (when given) with a query: the same scheme,
      host, port and path (an empty path is ``/``); a URL that does not parse on either
      side never matches.
    * ``state`` must be the one sent (CSRF protection).
    * ``iss`` (RFC 9207 section 2.4; ``2026-07-28`` authorization, "Authorization
      Response Validation"): when present it must equal the recorded issuer by plain
      string comparison, with no normalization; it must be present when the AS
      advertises ``authorization_response_iss_parameter_supported``. This applies to
      error responses too: a mismatched error is not reported as the AS's.
    * an ``error`` becomes an :class:`OAuthError` with that code and its
      ``error_description``, both kept to the characters RFC 6749 allows (others
      become ``?``) and cut at 200 characters, as :func:`_token_error` does.

    Raises:
        OAuthError: any check failed, or there is no code.
    """
    if redirect_uri is not None:
        try:
            same = _endpoint_of(redirect_url) == _endpoint_of(redirect_uri)
        except ValueError:
            same = False  # either side unparseable (a bad port): never a match
        if not same:
            raise OAuthError(
                "the authorization response did not arrive at the redirect URI: refused"
            )
    query = urlsplit(redirect_url).query
    params: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(key, value)
    iss = params.get("iss")
    if iss is None and metadata.authorization_response_iss_parameter_supported:
        raise OAuthError(
            "the authorization response has no 'iss', which the authorization server "
            "said it sends (RFC 9207): refused"
        )
    if iss is not None and iss != metadata.issuer:
        raise OAuthError(
            f"the authorization response comes from issuer {iss!r}, not {metadata.issuer!r} "
            "(RFC 9207): refused"
        )
    received = params.get("state")
    if received is None or not hmac.compare_digest(received.encode(), state.encode()):
        raise OAuthError("the authorization response's state is not the one sent: refused")
    if "error" in params:
        # The peer's text, which ends up in logs: sanitized as _token_error does
        # (RFC 6749 section 4.1.2.1 allows the same characters as section 5.2).
        error = _error_text(params["error"])
        detail = _error_text(params.get("error_description"))
        raise OAuthError(f"authorization refused: {_described(error, detail)}", error=error)
    code = params.get("code")
    if not code:
        raise OAuthError("the authorization response carries no code")
    return code


def _endpoint_of(url: str) -> tuple[str, str, int | None, str]:
    """Scheme, host, port and path (an empty path is ``/``: the same resource).

    Raises:
        ValueError: ``url`` does not parse (a port out of range, say).
    """
    scheme, host, port, path = _norm_origin(url)
    return scheme, host, port, path or "/"


# ---------------------------------------------------------------------- tokens


@final
@attrs.frozen(kw_only=True)
class OAuthToken:
    """An access token and what came with it."""

    access_token: str = attrs.field(repr=False)
    """The token sent as ``Authorization: Bearer ...`` (``DPoP ...`` for a DPoP one)."""
    token_type: str = "Bearer"
    """The token type: ``Bearer``, or ``DPoP`` for a token bound to a DPoP key."""
    expires_at: float | None = None
    """When it expires (the ``now`` passed to :func:`parse_token_response` plus
    ``expires_in``); ``None`` when the AS did not say."""
    refresh_token: str | None = attrs.field(default=None, repr=False)
    """The refresh token, if one was issued."""
    scope: str | None = None
    """The scope granted (the one requested when the AS did not say)."""
    issued_at: float | None = None
    """When it was issued (the ``now`` passed to :func:`parse_token_response`), if known:
    with :attr:`expires_at`, its lifetime."""
    dpop_jkt: str | None = None
    """For a DPoP token, the thumbprint (RFC 7638) of the key it is bound to: only a
    client holding that key can use it (RFC 9449)."""

    def expired(self, now: float, *, leeway: float | None = None) -> bool:
        """Whether it has expired at ``now``, or will within ``leeway`` seconds.

        The default leeway is a tenth of the token's lifetime, at most 30 seconds (30
        when the lifetime is unknown): a token that lives 20 seconds is good for 18,
        rather than refreshed before every request."""
        if self.expires_at is None:
            return False
        if leeway is None:
            leeway = _MAX_LEEWAY
            if self.issued_at is not None:
                leeway = min(_MAX_LEEWAY, max(0.0, self.expires_at - self.issued_at) / 10)
        return now >= self.expires_at - leeway


def token_request(
    metadata: AuthorizationServerMetadata,
    client: ClientCredentials,
    *,
    grant_type: Literal["authorization_code", "refresh_token", "client_credentials"],
    resource: str | None,
    code: str | None = None,
    code_verifier: str | None = None,
    redirect_uri: str | None = None,
    refresh_token: str | None = None,
    scope: str | None = None,
    client_assertion: Callable[[str], str] | None = None,
) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and form body of a token request, with the client authenticated
    the way its registration (or the AS's list) says: HTTP Basic with the
    form-urlencoded id and secret (RFC 6749 section 2.3.1), the secret in the body, a
    signed JWT (``private_key_jwt``, RFC 7523 section 2.2: ``client_assertion(audience)``
    makes it, the audience being the AS's issuer), or only ``client_id`` for a public
    client. ``resource`` goes in every request
    (RFC 8707; ``2026-07-28`` authorization, "Resource Parameter Implementation").

    Returns:
        ``(headers, body)``; POST them to ``metadata.token_endpoint``.
    """
    form: list[tuple[str, str]] = [("grant_type", grant_type)]
    if grant_type == "authorization_code":
        assert code is not None and code_verifier is not None and redirect_uri is not None
        form += [("code", code), ("code_verifier", code_verifier), ("redirect_uri", redirect_uri)]
    elif grant_type == "refresh_token":
        assert refresh_token is not None
        form.append(("refresh_token", refresh_token))
    if resource is not None:
        form.append(("resource", resource))
    if scope:
        form.append(("scope", scope))
    return _authenticated_form(metadata, client, form, client_assertion)


def _authenticated_form(
    metadata: AuthorizationServerMetadata,
    client: ClientCredentials | None,
    form: list[tuple[str, str]],
    client_assertion: Callable[[str], str] | None = None,
) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and body of a form POST to ``metadata``'s token endpoint, with
    ``client`` authenticated as :func:`token_request` says (``None``: no client
    authentication and no ``client_id``, as the jwt-bearer grant allows, RFC 7523
    section 3.2.1)."""
    headers = [
        ("content-type", "application/x-www-form-urlencoded"),
        ("accept", "application/json"),
    ]
    if client is None:
        return headers, urlencode(form).encode("ascii")
    method = _auth_method(client, metadata)
    if method == "private_key_jwt":
        if client_assertion is None or client.private_key is None:
            raise OAuthError(
                "the client authenticates with private_key_jwt here, which needs its "
                "private_key (and is not available for this grant)"
            )
        form += [
            ("client_id", client.client_id),
            ("client_assertion_type", CLIENT_ASSERTION_TYPE),
            ("client_assertion", client_assertion(metadata.issuer)),
        ]
        return headers, urlencode(form).encode("ascii")
    if method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers.append(("authorization", "Basic " + base64.b64encode(pair.encode()).decode()))
    else:
        form.append(("client_id", client.client_id))
        if method == "client_secret_post" and client.client_secret is not None:
            form.append(("client_secret", client.client_secret))
    return headers, urlencode(form).encode("ascii")


def _error_text(value: object) -> str | None:
    """``value`` as RFC 6749 section 5.2 allows ``error`` and ``error_description`` to
    be (%x20-21 / %x23-5B / %x5D-7E), for a message that is logged: any other
    character (a newline, ESC: a forged log line) is replaced by ``?``, and the text
    is cut at :data:`_MAX_ERROR_TEXT` characters. ``None`` for anything but a string."""
    if type(value) is not str:
        return None
    text = "".join(c if c in _ERROR_CHARS else "?" for c in value[: _MAX_ERROR_TEXT + 1])
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."


def _described(error: str | None, detail: str | None) -> str:
    """An error code with its description (both from :func:`_error_text`), if any."""
    return f"{error} ({detail})" if detail else f"{error}"


def _token_error(status: int, body: bytes, refused: str) -> OAuthError:
    """The error of a token endpoint's refusal (RFC 6749 section 5.2): ``refused``, the
    status, and the ``error`` code (in :attr:`OAuthError.error`) and description when
    the body has them. Both are the peer's text, and end up in logs: characters
    section 5.2 does not allow become ``?``, and each is cut at 200 characters."""
    try:
        obj = _json_object(body, "the error response")
    except OAuthError:
        obj = {}
    error = _error_text(obj.get("error"))
    detail = _error_text(obj.get("error_description"))
    message = f"{refused}: status {status}"
    if error:
        message += f", {_described(error, detail)}"
    return OAuthError(message, error=error)


def parse_token_response(
    status: int,
    body: bytes,
    *,
    now: float,
    requested_scope: str | None = None,
    previous_refresh_token: str | None = None,
    dpop_jkt: str | None = None,
) -> OAuthToken:
    """Read a token endpoint response (OAuth 2.1 sections 3.2.3 and 3.2.4).

    ``now`` (seconds, the caller's clock) dates ``expires_in``. A refresh response
    without a new refresh token keeps ``previous_refresh_token``. ``dpop_jkt``: the
    request carried a DPoP proof of the key with that thumbprint; the token must then
    be a ``DPoP`` one (RFC 9449 section 5), bound to it. Without, only ``Bearer``.

    Raises:
        OAuthError: an error response (its ``error`` code), or a malformed one (an
            ``access_token`` must be visible ASCII: it goes into a header), or of
            another ``token_type``.
    """
    what = "the token response"
    if status != 200:
        raise _token_error(status, body, "the token request was refused")
    obj = _json_object(body, what)
    access = _str(obj, "access_token", what, required=True)
    assert access is not None
    if not _TOKEN_CHARS.issuperset(access):
        # (The token itself is never part of the message: it is a credential.)
        raise OAuthError(f"{what}: 'access_token' has characters outside visible ASCII")
    token_type = _str(obj, "token_type", what) or "Bearer"
    expected = "Bearer" if dpop_jkt is None else "DPoP"
    if token_type.lower() != expected.lower():
        if dpop_jkt is not None:
            raise OAuthError(
                f"{what}: token_type {token_type!r} to a request with a DPoP proof: "
                "the authorization server did not bind the token (RFC 9449 section 5)"
            )
        raise OAuthError(f"{what}: token_type {token_type!r} is not supported (only Bearer)")
    expires_in = obj.get("expires_in")
    if expires_in is not None and (type(expires_in) not in (int, float) or expires_in < 0):
        raise OAuthError(f"{what}: 'expires_in' must be a non-negative number")
    return OAuthToken(
        access_token=access,
        token_type=expected,
        dpop_jkt=dpop_jkt,
        expires_at=None if expires_in is None else now + expires_in,
        issued_at=now,
        refresh_token=_str(obj, "refresh_token", what) or previous_refresh_token,
        # An empty scope says nothing (RFC 6749 section 3.3 has no empty scope): the
        # one requested, as when the member is absent.
        scope=(None if obj.get("scope") == "" else _str(obj, "scope", what)) or requested_scope,
    )

"""Authorization of Streamable HTTP requests, server side, as values and pure functions.

Theory of operation
-------------------
A protected MCP server is an OAuth 2.1 *resource server* (``2025-06-18``, ``2025-11-25``
``basic/authorization``; ``2026-07-28/basic/authorization/``). It does three things, and
this module holds the parts of each that need no I/O:

* **Say where to get a token.** It serves OAuth 2.0 Protected Resource Metadata
  (RFC 9728, :class:`ProtectedResourceMetadata`) at the well-known URIs MCP clients try
  (path-based first, then the root; ``authorization-server-discovery#protected-resource-
  metadata-discovery-requirements``), and names that document in the ``resource_metadata``
  parameter of every ``401`` challenge.
* **Check the token on every request.** Clients send ``Authorization: Bearer <token>`` on
  every HTTP request (``authorization#token-requirements``); :func:`bearer_token` reads it.
  Verifying it (signature, expiry, and above all the *audience*: a token issued for
  another resource must be refused, RFC 8707 §2, ``security-considerations#token-audience-
  binding-and-validation``) is the deployer's job: it needs keys, clocks or an
  introspection endpoint, none of which belong here.
* **Refuse properly.** ``401`` for a missing, invalid or expired token, ``403
  insufficient_scope`` with every scope the operation needs in one challenge, ``400`` for
  a malformed ``Authorization`` header (``authorization#error-handling``; RFC 6750 §3):
  :func:`bearer_challenge`.
* **Check each operation's scopes** once the body says what it is
  (``authorization#runtime-insufficient-scope-errors``): :func:`insufficient_scope`
  decides, as a JSON-RPC error (what a message channel such as WebSocket answers);
  :func:`insufficient_scope_response` is the same refusal as the HTTP ``403``
  (``HttpServerConfig.required_scopes`` has :class:`~mcp_sansio.http.HttpServer` apply
  it to every POST).

Who is calling is a :class:`Principal`. The binding hands it to handlers, binds legacy
sessions to its :attr:`~Principal.subject` (``HttpServer.handle_request(principal=...)``),
and the modern era's ``requestState`` is sealed for it (``Connection(principal=...)``).
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final, Literal, TypeAlias, final
from urllib.parse import urlsplit

import attrs

from ._errors import ErrorData, RemoteProtocolError
from ._http_common import HttpRequest, HttpResponse, json_response
from ._json import dumps
from ._jsonrpc import error_response
from ._modern import SUBSCRIPTION_ID_KEY

__all__ = [
    "INSUFFICIENT_SCOPE_CODE",
    "TOKEN_EXPIRED_CODE",
    "WELL_KNOWN_RESOURCE_PATH",
    "BearerError",
    "Principal",
    "ProtectedResourceMetadata",
    "RequiredScopes",
    "authorization_header",
    "bearer_challenge",
    "bearer_challenge_header",
    "bearer_token",
    "check_metadata_url",
    "check_scopes",
    "insufficient_scope",
    "insufficient_scope_response",
    "scope_set",
    "token_expired",
]

WELL_KNOWN_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"
"""RFC 9728 §3: the well-known URI suffix of Protected Resource Metadata."""

BearerError = Literal["invalid_request", "invalid_token", "insufficient_scope"]
"""The error codes of RFC 6750 §3.1."""

_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750 §2.1: the credentials after ``Bearer``."""
_STATUS: Final = {"invalid_request": 400, "invalid_token": 401, "insufficient_scope": 403}


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(value))


def scope_set(value: str | Iterable[str]) -> frozenset[str]:
    """Scopes as a set: a string is an OAuth scope string, space-separated (RFC 6749
    §3.3), e.g. a token's ``scope`` claim."""
    return frozenset(value.split() if isinstance(value, str) else value)


def _expiry(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expires_at is seconds since the epoch (a number), not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"expires_at must be finite, not {value!r}")
    return float(value)


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):  # (a tuple of its characters, else)
        raise TypeError(f"a list of strings is expected, not the string {value!r}")
    return tuple(value)


@final
@attrs.frozen(kw_only=True)
class Principal:
    """Who is making a request: what the deployer's token verifier found out.

    Principals compare equal by :attr:`subject` and :attr:`scopes` (the claims are not
    compared).
    """

    subject: str
    """A stable id of the caller (the token's ``sub``, a client id, ...). Legacy sessions
    and modern ``requestState`` are bound to it: another subject cannot use them."""
    scopes: frozenset[str] = attrs.field(default=frozenset(), converter=scope_set)
    """The scopes the token grants (a space-separated string is split), implied ones
    included: a verifier that knows that ``files`` implies ``files:read`` lists both
    (``authorization#step-up-authorization-flow`` has servers account for scope
    hierarchies)."""
    claims: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_mapping, eq=False, repr=False
    )
    """Whatever else the verifier extracted (claims, client id, expiry), read-only."""
    expires_at: float | None = attrs.field(default=None, eq=False, converter=_expiry)
    """When the token stops being valid, in seconds since the epoch (its ``exp``), if
    the verifier says: a finite number (an ``int`` is taken as a ``float``; anything
    else, a ``datetime`` included, is a ``TypeError``, NaN or an infinity a
    ``ValueError``). Over Streamable HTTP a stream authenticated once at its start
    ends then, so that the client comes back with a fresh token: a legacy ``GET``
    stream resumably, a modern ``subscriptions/listen`` with :func:`token_expired`.
    A WebSocket connection, authenticated at its handshake, is closed then (code
    1008). The binding refuses a principal whose token has expired already (``401``
    ``invalid_token``), on any request or handshake. ``None``: a
    stream or connection lasts as long as the client keeps it."""
    dpop_jkt: str | None = attrs.field(default=None, eq=False)
    """The token's ``cnf.jkt`` (RFC 9449 section 6) when it is DPoP-bound: a
    ``BearerAuth(dpop=...)`` then accepts it only with a proof by that key, never as a
    plain ``Bearer`` token (section 7.1). ``None``: a bearer token."""

    def has_scopes(self, scopes: str | Iterable[str]) -> bool:
        """Whether every one of ``scopes`` (a space-separated string, or a collection)
        is granted."""
        return self.scopes.issuperset(scope_set(scopes))


def _check_resource(_inst: object, _attr: object, value: str) -> None:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc or parts.fragment or "#" in value:
        # authorization#canonical-server-uri: an absolute URI, no fragment.
        raise ValueError(f"resource must be an absolute URI without a fragment: {value!r}")


def _check_servers(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    if not value:
        # authorization-server-discovery#authorization-server-location: MUST hold one.
        raise ValueError("authorization_servers must name at least one authorization server")


def _check_strings(
    _inst: object, attr: attrs.Attribute[Any], value: tuple[Any, ...] | None
) -> None:
    if value is not None and not all(isinstance(item, str) for item in value):
        raise TypeError(f"{attr.name} must be a list of strings: {value!r}")


def _scopes_or_none(value: str | Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(value.split()) if isinstance(value, str) else tuple(value)


OFFLINE_ACCESS: Final = "offline_access"
"""The scope that asks the authorization server for a refresh token: the client's to
request, never a resource's scope (``2026-07-28/basic/authorization#refresh-tokens``:
servers "SHOULD NOT include ``offline_access`` in ``WWW-Authenticate`` scope or Protected
Resource Metadata ``scopes_supported``"; ``2025-06-18`` and ``2025-11-25`` have no such
rule, and their clients request ``scopes_supported`` as it is, so a server that serves
them may list it there on purpose)."""


def without_offline_access(scopes: Iterable[str]) -> tuple[str, ...]:
    """``scopes`` in their order, without :data:`OFFLINE_ACCESS` (the one filter: a
    server's challenge and metadata, a grant without a client, a required set)."""
    return tuple(s for s in scopes if s != OFFLINE_ACCESS)


@final
@attrs.frozen(kw_only=True)
class ProtectedResourceMetadata:
    """An OAuth 2.0 Protected Resource Metadata document (RFC 9728 §2), served by
    :class:`~mcp_sansio.http.HttpServer` when its config has one.

    MCP servers MUST serve it (``2026-07-28/basic/authorization#overview``); clients read
    ``authorization_servers`` from it to know where to get a token, and ``resource`` is
    what they ask the token for (RFC 8707).
    """

    resource: str = attrs.field(validator=_check_resource)
    """The server's canonical URI, e.g. ``"https://mcp.example.com/mcp"``: what clients
    put in the ``resource`` parameter, and the audience your verifier checks tokens for."""
    authorization_servers: tuple[str, ...] = attrs.field(
        converter=_strings, validator=_check_servers
    )
    """The issuer URLs of the authorization servers that issue tokens for it."""
    scopes_supported: tuple[str, ...] | None = attrs.field(default=None, converter=_scopes_or_none)
    """The scopes needed for basic use, a collection or a space-separated string (clients
    request these when a challenge names none; ``authorization#scope-selection-strategy``).
    ``offline_access`` is kept as given: a ``2026-07-28`` server SHOULD NOT list it
    (``authorization#refresh-tokens``), but a ``2025-06-18``/``2025-11-25`` client
    requests these scopes as they are, and gets a refresh token only when it is here
    (``serve_http`` logs a warning, once)."""
    bearer_methods_supported: tuple[str, ...] | None = attrs.field(
        default=("header",), converter=attrs.converters.optional(_strings)
    )
    """How tokens may be sent: MCP allows only the ``Authorization`` header. ``None``:
    the document says nothing (RFC 9728 section 2: the member is optional, and its
    absence is no statement); a client reading a document without it gets ``None``."""
    resource_name: str | None = None
    """A human-readable name of the server."""
    resource_documentation: str | None = None
    """A URL of documentation for developers."""
    dpop_signing_alg_values_supported: tuple[str, ...] | None = attrs.field(
        default=None,
        converter=attrs.converters.optional(_strings),
        validator=_check_strings,
    )
    """The DPoP proof algorithms the server accepts (RFC 9728 section 2; RFC 9449):
    ``BearerAuth(dpop=...)`` fills it in with its ``dpop_algs`` for the document
    ``serve_http`` serves. ``None``: not in the document."""
    dpop_bound_access_tokens_required: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bool))
    )
    """Whether the server takes DPoP-bound tokens only (RFC 9728 section 2):
    ``BearerAuth(dpop="required")`` sets it. ``None``: not in the document (which a
    client reads as ``false``)."""
    extra: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping, eq=False)
    """Any other RFC 9728 field (``jwks_uri``, ``resource_signing_alg_values_supported``,
    ...), put in the document as is. Of the typed fields it overrides only the two
    ``dpop_*`` ones (a member here wins over :attr:`dpop_signing_alg_values_supported`
    and :attr:`dpop_bound_access_tokens_required`); every other field wins over it."""

    @property
    def url(self) -> str:
        """The document's URL derived from :attr:`resource` (RFC 9728 §3.1: the
        well-known suffix inserted between the authority and the path), e.g.
        ``https://mcp.example.com/.well-known/oauth-protected-resource/mcp``: what goes
        in a challenge's ``resource_metadata``."""
        parts = urlsplit(self.resource)
        path = parts.path.rstrip("/")
        query = f"?{parts.query}" if parts.query else ""  # (kept, RFC 9728 §3.1)
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN_RESOURCE_PATH}{path}{query}"

    def paths(self, endpoint: str) -> frozenset[str]:
        """The paths the document is served at for an MCP ``endpoint`` path: the
        path-based well-known URI of :attr:`resource` and of ``endpoint`` (they differ
        behind a proxy that rewrites paths), and the root one."""
        found = {WELL_KNOWN_RESOURCE_PATH}
        for path in (urlsplit(self.resource).path, endpoint):
            if trimmed := path.rstrip("/"):
                found.add(WELL_KNOWN_RESOURCE_PATH + trimmed)
        return frozenset(found)

    def document(self) -> dict[str, Any]:
        """The JSON object (RFC 9728 §2)."""
        doc: dict[str, Any] = {}
        if self.dpop_signing_alg_values_supported is not None:
            doc["dpop_signing_alg_values_supported"] = list(self.dpop_signing_alg_values_supported)
        if self.dpop_bound_access_tokens_required is not None:
            doc["dpop_bound_access_tokens_required"] = self.dpop_bound_access_tokens_required
        doc.update(self.extra)
        doc["resource"] = self.resource
        doc["authorization_servers"] = list(self.authorization_servers)
        if self.scopes_supported is not None:
            doc["scopes_supported"] = list(self.scopes_supported)
        if self.bearer_methods_supported is not None:
            doc["bearer_methods_supported"] = list(self.bearer_methods_supported)
        if self.resource_name is not None:
            doc["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            doc["resource_documentation"] = self.resource_documentation
        return doc

    def response(self) -> HttpResponse:
        """The ``200`` answer to a ``GET`` of the document (public: no token needed, and
        any origin may read it)."""
        return json_response(
            200,
            dumps(self.document()),
            ((b"cache-control", b"public, max-age=3600"), (b"access-control-allow-origin", b"*")),
        )


def authorization_header(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str | None] | None:
    """The scheme of a request's ``Authorization`` header, lower-cased (an auth-scheme
    is case-insensitive, RFC 9110 §11.1), and its credentials when they are a
    ``token68`` (RFC 6750 §2.1, RFC 9449 section 7.1: ``Bearer`` and ``DPoP`` alike),
    ``None`` when they are not; ``None`` without the header.

    Raises:
        RemoteProtocolError: several ``Authorization`` headers.
    """
    values = [value for name, value in headers if name == b"authorization"]
    if not values:
        return None
    if len(values) > 1:
        raise RemoteProtocolError("several Authorization headers")
    scheme, _, rest = values[0].decode("latin-1").partition(" ")
    token = rest.strip(" ")
    return (scheme.lower(), token if _TOKEN68.fullmatch(token) is not None else None)


def bearer_token(request: HttpRequest) -> str | None:
    """The bearer token of ``request``'s ``Authorization`` header (RFC 6750 §2.1).

    Returns:
        The token, or ``None`` when there is no ``Authorization`` header or it uses
        another scheme (answer ``401`` without an error code, RFC 6750 §3.1).

    Raises:
        RemoteProtocolError: a malformed ``Bearer`` credential, or several
            ``Authorization`` headers (answer ``400 invalid_request``).
    """
    found = authorization_header(request.headers)
    if found is None or found[0] != "bearer":
        return None
    if found[1] is None:
        raise RemoteProtocolError("malformed Bearer credentials")
    return found[1]


_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 6750 §3: a scope token (``scope-token = 1*NQCHAR``)."""
_NQS_TEXT: Final = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]*")
"""RFC 6750 §3: what ``error_description`` may hold (``*NQSCHAR``), and a URL too: no
quote, no backslash, no control character, so nothing needs escaping."""


def _quoted(name: str, value: str) -> str:
    if _NQS_TEXT.fullmatch(value) is None:
        # RFC 6750 §3 allows no escaping in these values: refuse rather than send a
        # header a client misreads (or one h11 refuses, dropping the connection).
        raise ValueError(f"{name} has characters a Bearer challenge cannot carry: {value!r}")
    return f'{name}="{value}"'


def _scope_tokens(scope: Collection[str]) -> list[str]:
    tokens = scope.split() if isinstance(scope, str) else sorted(scope)
    for token in tokens:
        if _SCOPE_TOKEN.fullmatch(token) is None:
            raise ValueError(f"not a scope token (RFC 6750 §3): {token!r}")
    return tokens


def bearer_challenge_header(
    error: BearerError | None,
    resource_metadata: str | None,
    scope: Collection[str],
    description: str | None,
) -> tuple[bytes, bytes]:
    """The ``WWW-Authenticate: Bearer`` header of :func:`bearer_challenge` (which says
    what the arguments are and when it raises ``ValueError``)."""
    params = []
    if error is not None:
        params.append(_quoted("error", error))
    if scope:
        params.append(_quoted("scope", " ".join(_scope_tokens(scope))))
    if resource_metadata is not None:
        params.append(_quoted("resource_metadata", resource_metadata))
    if description is not None:
        params.append(_quoted("error_description", description))
    challenge = "Bearer " + ", ".join(params) if params else "Bearer"
    return (b"www-authenticate", challenge.encode("ascii"))


def bearer_challenge(
    error: BearerError | None = None,
    *,
    resource_metadata: str | None = None,
    scope: Collection[str] = (),
    description: str | None = None,
) -> HttpResponse:
    """A refusal with a ``WWW-Authenticate: Bearer`` challenge (RFC 6750 §3, RFC 9728 §5.1).

    Args:
        error: ``None`` (no credentials were sent: ``401`` with no error code),
            ``"invalid_token"`` (``401``: missing, expired, revoked, or for another
            audience), ``"insufficient_scope"`` (``403``) or ``"invalid_request"``
            (``400``: a malformed request).
        resource_metadata: the URL of the Protected Resource Metadata document
            (:attr:`ProtectedResourceMetadata.url`); MCP clients find the authorization
            server through it.
        scope: the scopes the request needs (a collection, or a space-separated
            string), all of them in one challenge
            (``authorization#scope-challenge-handling``).
        description: a human-readable ``error_description``.

    Returns:
        The response: the challenge header, and a JSON body ``{"error": ...,
        "error_description": ...}`` when there is an error.

    Raises:
        ValueError: a scope that is no RFC 6750 scope token, or a description or URL
            with a quote, a backslash, a control or a non-ASCII character (the header
            has no way to carry them).
    """
    headers = (bearer_challenge_header(error, resource_metadata, scope, description),)
    if error is None:
        return HttpResponse(status=401, headers=headers)
    body: dict[str, str] = {"error": error}
    if description is not None:
        body["error_description"] = description
    return json_response(_STATUS[error], dumps(body), headers)


def check_metadata_url(url: str) -> str:
    """``url`` if it may name the Protected Resource Metadata document in a challenge's
    ``resource_metadata``: an absolute ``https`` URL without a fragment (plain ``http``
    only on a loopback host: tests, local tools), which is what an MCP client fetches
    (``mcp_sansio.check_endpoint``, the check our client makes of it), with nothing a
    challenge cannot carry (see :func:`bearer_challenge`).

    Raises:
        ValueError: it is not; the message says why.
    """
    from ._oauth import OAuthError, check_endpoint  # noqa: PLC0415 (at start-up only)

    try:
        check_endpoint(url, "the resource_metadata URL", loopback=True)
    except OAuthError as exc:
        raise ValueError(str(exc)) from None
    bearer_challenge(resource_metadata=url)
    return url


# ------------------------------------------------------------------ per-operation scopes

RequiredScopes: TypeAlias = Callable[[Principal, str, dict[str, Any] | None], Collection[str]]
"""``(principal, method, params) -> scopes``: every scope one request needs (a
collection, or a space-separated string; empty: none), e.g. what a server declared for
the tool that ``tools/call`` names. It may look at the arguments and at who is calling
(``authorization#runtime-insufficient-scope-errors``: the scopes "may be determined
dynamically based on the specific request arguments and context"). It reads ``params``
and must not change it: it is the request's own, which its handler is given next."""

INSUFFICIENT_SCOPE_CODE: Final = 403
"""The JSON-RPC error code of a refusal for want of a scope.

No MCP revision defines one (``2026-07-28/basic/index#error-codes``;
``2025-11-25/schema``): ``-32020`` to ``-32099`` are the specification's own and MUST NOT
carry undefined codes, ``-32000`` to ``-32019`` SHOULD NOT be used by new
implementations, and the standard codes say something else (``-32600``/``-32602`` would
read as the client's bug, not as a token to widen). New codes SHOULD be allocated
outside ``-32768..-32000``: ``403``, the HTTP status the specification gives this very
refusal, so that one number means it on every transport."""


def check_scopes(scopes: str | Iterable[str]) -> frozenset[str]:
    """``scopes`` (a space-separated string, or a collection) as a set, each checked to
    be a scope token a challenge can carry (RFC 6750 §3: no space, quote or backslash).

    Raises:
        ValueError: one is not.
    """
    found = scope_set(scopes)
    _scope_tokens(found)
    return found


def insufficient_scope(
    principal: Principal,
    needed: str | Iterable[str],
    *,
    resource_metadata: str | None = None,
) -> ErrorData | None:
    """Whether ``principal`` may make a request that needs ``needed``: ``None`` when its
    token grants every one, else the JSON-RPC error to answer with.

    The error names *all* of ``needed`` (but ``offline_access``, which is never
    required: see :data:`OFFLINE_ACCESS`), not only the missing ones: a client asks for
    the scopes of one challenge together (``authorization#runtime-insufficient-scope-
    errors``: all scopes the operation needs "in a single challenge"). Its ``data``
    holds the parameters the HTTP challenge would (RFC 6750 §3, RFC 9728 §5.1), so a
    client reads both the same way::

        {"code": 403, "message": "Insufficient scope: the access token lacks files:write",
         "data": {"error": "insufficient_scope", "scope": "files:read files:write",
                  "resource_metadata": "https://..."}}

    Raises:
        ValueError: a needed scope is not a scope token (see :func:`check_scopes`).
    """
    # offline_access is no scope of the resource's (see OFFLINE_ACCESS): a server
    # should not ask for it in a challenge, nor refuse a token for want of it.
    wanted = frozenset(without_offline_access(check_scopes(needed)))
    missing = wanted - principal.scopes
    if not missing:
        return None
    data: dict[str, str] = {"error": "insufficient_scope", "scope": " ".join(sorted(wanted))}
    if resource_metadata is not None:
        data["resource_metadata"] = resource_metadata
    return ErrorData(
        code=INSUFFICIENT_SCOPE_CODE,
        message="Insufficient scope: the access token lacks " + " ".join(sorted(missing)),
        data=data,
    )


TOKEN_EXPIRED_CODE: Final = 401
"""The JSON-RPC error code that ends a stream which outlived the token it was opened with
(a modern ``subscriptions/listen`` over HTTP, :func:`token_expired`): ``401``, the HTTP
status of an expired token (``authorization#error-handling``), chosen as
:data:`INSUFFICIENT_SCOPE_CODE` is (no MCP revision defines one; codes outside
``-32768..-32000`` are free). A client tells it from the end of a subscription (a
result) and from any other failure: it authorizes again and listens again."""


def token_expired(
    *, resource_metadata: str | None = None, subscription_id: str | int | None = None
) -> ErrorData:
    """The error that answers a long-lived request whose token expired meanwhile.

    A stream is authenticated once, when it opens; one that would go on past its
    token's ``exp`` (``Principal.expires_at``) must end, or a revoked or expired
    credential keeps receiving notifications. The ``subscriptions/listen`` is
    answered with this error (not a result: that would say the subscription is over),
    and its ``data`` holds what a ``401 invalid_token`` challenge would (RFC 6750 §3,
    RFC 9728 §5.1)::

        {"code": 401, "message": "The access token expired: authorize and listen again",
         "data": {"error": "invalid_token", "resource_metadata": "https://...",
                  "io.modelcontextprotocol/subscriptionId": 4}}

    ``subscription_id`` (the listen request's id) goes under the key a graceful
    closure's result names it with in ``_meta``, so that a client with several listens
    can tell which one ended.

    This is our extension: ``basic/patterns/subscriptions#cancellation`` ends a listen
    by the client's cancellation, a result, or the transport closing. A client that
    does not know it sees a failed ``subscriptions/listen`` (a JSON-RPC error), as
    for any other refusal, and may listen again or not.
    """
    data: dict[str, str | int] = {"error": "invalid_token"}
    if resource_metadata is not None:
        data["resource_metadata"] = resource_metadata
    if subscription_id is not None:
        data[SUBSCRIPTION_ID_KEY] = subscription_id
    return ErrorData(
        code=TOKEN_EXPIRED_CODE,
        message="The access token expired: authorize and listen again",
        data=data,
    )


def insufficient_scope_response(
    error: ErrorData, request_ids: Iterable[str | int], *, batch: bool = False
) -> HttpResponse:
    """The HTTP refusal of a POST for ``error`` (from :func:`insufficient_scope`):
    ``403`` with ``WWW-Authenticate: Bearer error="insufficient_scope", scope="...",
    resource_metadata="...", error_description="..."``
    (``authorization#runtime-insufficient-scope-errors``), and ``error`` as the JSON-RPC
    answer to each request of the body (a batch: an array, one per request).

    Raises:
        ValueError: ``error`` holds a URL a challenge cannot carry.
    """
    data = error.data
    header = bearer_challenge_header(
        "insufficient_scope", data.get("resource_metadata"), data["scope"], error.message
    )
    answers = [error_response(rid, error) for rid in request_ids]
    body = (
        dumps(answers) if batch else dumps(answers[0] if answers else error_response(None, error))
    )
    return json_response(403, body, (header,))

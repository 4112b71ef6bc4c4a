"""Authorization of Streamable HTTP requests: the ``authenticate`` hook of
:func:`~mcp_trio.serve_http`, and :class:`BearerAuth`, the usual one.

An *authenticator* is an async callable that takes the request's head (an
:class:`~mcp_sansio.http.HttpRequest` with no body: method, target, headers; read-only)
and returns either the :class:`~mcp_sansio.http.Principal` making it, or the
:class:`~mcp_sansio.http.HttpResponse` to refuse it with. The server calls it for every
request to the MCP endpoint (``POST``, ``GET``, ``DELETE``), after the checks that need
no token (path, ``Origin``, ``Host``, media types) and before anything of MCP is looked
at; the Protected Resource Metadata document is served without it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextvars import ContextVar
from typing import Any, Final, Literal, TypeAlias, final

import attrs
import trio

from mcp_sansio import RemoteProtocolError
from mcp_sansio._dpop_proof import (
    DEFAULT_DPOP_ALGS,
    DpopError,
    DpopNonces,
    DpopRefusal,
    authorization_credentials,
    check_dpop_proof,
    dpop_challenge,
    dpop_header,
    dpop_htu_candidates,
    dpop_htu_origins,
    dpop_request_htus,
)
from mcp_sansio._http_auth import (
    OFFLINE_ACCESS,
    BearerError,
    Principal,
    ProtectedResourceMetadata,
    bearer_challenge,
    bearer_token,
    check_metadata_url,
    check_scopes,
    scope_set,
    without_offline_access,
)
from mcp_sansio._http_common import RETRY_SOON, HttpRequest, HttpResponse

# The sans-IO values, re-exported: an authenticator returns a Principal, or refuses with
# a bearer_challenge; serve_http's http_config takes the ProtectedResourceMetadata.
__all__ = [
    "Authenticate",
    "BearerAuth",
    "DpopNonces",
    "Principal",
    "ProtectedResourceMetadata",
    "bearer_challenge",
]

Authenticate: TypeAlias = Callable[[HttpRequest], Awaitable[Principal | HttpResponse]]
"""``async (request_head) -> Principal | HttpResponse``: who is calling, or the refusal."""

logger = logging.getLogger("mcp_trio")

_FAILED: Final = HttpResponse(
    status=500,
    headers=((b"content-type", b"text/plain; charset=utf-8"),),
    body=b"Internal Server Error: authentication failed\n",
)
UNAVAILABLE: Final = HttpResponse(status=503, headers=RETRY_SOON)
"""``503`` with ``Retry-After: 1``: a server too busy, too slow, or shutting down."""
_EXPIRED: Final = "The access token expired"
_HOST: Final = re.compile(r"[A-Za-z0-9._~\-]+(:[0-9]*)?|\[[0-9A-Fa-f:.]+\](:[0-9]*)?")
"""``host[:port]`` (RFC 9110 §7.2, without percent-escapes): what a DPoP ``htu`` is
built from when ``dpop_origin`` is not set."""

CONNECTION_SCHEME: ContextVar[str] = ContextVar("mcp_trio_connection_scheme", default="http")
"""The scheme of the connection the current task serves, for an origin-form request's
target URI (RFC 9110 section 7.1: it has no scheme of its own): ``"https"`` when
``serve_http`` serves TLS itself (``ssl_context``; its connection task sets it), else
``"http"``. What :class:`BearerAuth` builds a DPoP ``htu`` from without
``dpop_origin``."""


async def run_authenticate(
    authenticate: Authenticate, request: HttpRequest, timeout: float, what: str
) -> Principal | HttpResponse:
    """Run a server's ``authenticate`` hook on ``request`` (``what`` names it in logs: its
    method and path, never its headers, which hold the token): its principal or refusal;
    ``500`` if it fails (a bug of the hook, logged), ``503`` after ``timeout`` seconds."""
    with trio.move_on_after(timeout):
        try:
            found: object = await authenticate(request)
        except Exception as exc:
            # The exception's type only: its text may hold the token (int(token)). The
            # traceback is there at DEBUG, for whoever debugs the hook.
            logger.error("the authenticate hook failed for %s: %s", what, type(exc).__name__)
            logger.debug("the authenticate hook's exception", exc_info=True)
            return _FAILED
        if isinstance(found, HttpResponse):
            return found
        if isinstance(found, Principal):
            expires_at = found.expires_at
            if expires_at is not None:
                clock, judged = _expiry(authenticate)
                if not judged and expires_at <= clock():
                    # Any hook's principal whose token has expired is refused as
                    # BearerAuth's is (RFC 6750 section 3.1): over HTTP and at a
                    # WebSocket handshake alike.
                    return bearer_challenge("invalid_token", description=_EXPIRED)
            return found
        logger.error(  # (its type only: the value might be a token)
            "the authenticate hook returned a %s, neither a Principal nor an HttpResponse",
            type(found).__name__,
        )
        return _FAILED
    logger.error("the authenticate hook took over %s s for %s", timeout, what)
    return UNAVAILABLE


def _expiry(authenticate: Authenticate | None) -> tuple[Callable[[], float], bool]:
    """How ``authenticate``'s principals' ``expires_at`` is judged: the wall clock it is
    read by, and whether the hook judged it already. A :class:`BearerAuth` does, by its
    own ``clock``; any other hook's principal is judged by :func:`run_authenticate`, by
    ``time.time``. The one place that tells them apart: :func:`run_authenticate` and
    :func:`expiry_clock` both ask it."""
    if isinstance(authenticate, BearerAuth):
        return authenticate.clock, True
    return time.time, False


def expiry_clock(authenticate: Authenticate | None) -> Callable[[], float]:
    """The wall clock ``authenticate``'s principals were judged by (``expires_at``):
    a :class:`BearerAuth`'s own ``clock``, else ``time.time``. What is left of a
    token's life (a stream, a WebSocket connection) is measured by it too."""
    return _expiry(authenticate)[0]


def _check_url(_inst: object, _attr: object, value: str | None) -> None:
    if value is not None:
        check_metadata_url(value)


_OFFLINE_ACCESS_FATE: Final = {
    "hook": "a required_scopes hook named %r, which a server SHOULD NOT put in a "
    "challenge (2026-07-28 basic/authorization, Refresh Tokens): left out (logged once)",
    "required_scopes": "BearerAuth.required_scopes names %r, which a server SHOULD NOT "
    "put in a challenge (2026-07-28 basic/authorization, Refresh Tokens): left out, "
    "neither required nor challenged for (logged once)",
    "scopes_supported": "ProtectedResourceMetadata.scopes_supported names %r, which a "
    "2026-07-28 server SHOULD NOT advertise (basic/authorization, Refresh Tokens): "
    "served as given, for 2025-06-18/2025-11-25 clients, which request these scopes as "
    "they are (logged once)",
    "tool scopes=": "a tool, prompt or resource registered with scopes= names %r, which "
    "a server SHOULD NOT put in a challenge (2026-07-28 basic/authorization, Refresh "
    "Tokens): left out, neither required nor challenged for (logged once)",
}

_WARNED: set[str] = set()
"""The sources of :data:`_OFFLINE_ACCESS_FATE` already warned about (once per process,
whatever the call looks like: a cache keyed on the arguments would warn again)."""


def _warn_offline_access(source: str) -> None:
    """Log, once per ``source`` (a key of :data:`_OFFLINE_ACCESS_FATE`), that a
    server's scopes name ``offline_access``, and what became of it."""
    if source in _WARNED:
        return
    _WARNED.add(source)
    logger.warning(_OFFLINE_ACCESS_FATE[source], OFFLINE_ACCESS)


def _drop_offline_access(scopes: frozenset[str], source: str) -> frozenset[str]:
    """``scopes`` without ``offline_access`` (never a resource's scope: see
    :data:`~mcp_sansio.http.OFFLINE_ACCESS`), warning once per ``source`` (a key of
    :data:`_OFFLINE_ACCESS_FATE`) when it was there."""
    if OFFLINE_ACCESS not in scopes:
        return scopes
    _warn_offline_access(source)
    return frozenset(without_offline_access(scopes))


def _required(value: str | Collection[str]) -> frozenset[str]:
    return _drop_offline_access(scope_set(value), "required_scopes")


def note_advertised_scopes(metadata: ProtectedResourceMetadata) -> None:
    """Log, once per process, that the Protected Resource Metadata a server serves
    lists ``offline_access`` (kept: see ``ProtectedResourceMetadata.scopes_supported``)."""
    if metadata.scopes_supported is not None and OFFLINE_ACCESS in metadata.scopes_supported:
        _warn_offline_access("scopes_supported")


def hook_scopes(scopes: str | Collection[str]) -> frozenset[str]:
    """What a ``required_scopes`` hook returned at run time, checked
    (:func:`~mcp_sansio.http.check_scopes`): a scope that is no scope token is a
    ``ValueError``, and ``offline_access`` is left out, with a warning logged once
    per process (as :attr:`BearerAuth.required_scopes` leaves it out; a registration's
    ``scopes=`` is checked when registered)."""
    return _drop_offline_access(check_scopes(scopes), "hook")


def declared_scopes(authenticate: object) -> frozenset[str]:
    """The scopes an authenticator requires of every request and checks itself:
    :attr:`BearerAuth.required_scopes`, or the ``required_scopes`` of another
    authenticator that declares them the same way (a set, list or tuple of scope
    tokens; anything else there, a hook say, is not a declaration and gives none).

    A request refused ``insufficient_scope`` for the scopes of what it asks for (a
    tool's ``scopes=``, a ``required_scopes`` hook's) names these too: the challenge
    carries the scopes "needed to satisfy the current request" (2025-11-25
    basic/authorization.mdx, Runtime Insufficient Scope Errors), and a client that asks
    for exactly the challenged scopes (the TypeScript SDK's does) would otherwise get a
    token without these and be refused by the authenticator in turn, without end.

    Raises:
        ValueError: a declared scope is no scope token.
    """
    if isinstance(authenticate, BearerAuth):
        return authenticate.required_scopes
    declared = getattr(authenticate, "required_scopes", None)
    if not isinstance(declared, frozenset | set | list | tuple) or not all(
        isinstance(scope, str) for scope in declared
    ):
        return frozenset()
    return hook_scopes(declared)


@final
@attrs.frozen(kw_only=True)
class BearerAuth:
    """An authenticator for OAuth 2.1 bearer tokens (``basic/authorization``; RFC 6750).

    >>> async def verify(token: str) -> Principal | None:
    ...     claims = await my_jwt_check(token, audience="https://mcp.example.com/mcp")
    ...     return Principal(subject=claims["sub"], scopes=claims["scope"])
    >>> auth = BearerAuth(verify_token=verify, resource_metadata_url=metadata.url)
    >>> await server.serve_http(..., authenticate=auth)

    Answers, per ``2026-07-28/basic/authorization#error-handling``:

    * no ``Authorization: Bearer`` header: ``401`` with ``WWW-Authenticate: Bearer
      resource_metadata="…", scope="…"`` (the scope parameter when
      :attr:`required_scopes` is set);
    * a token :attr:`verify_token` refuses: ``401``, ``error="invalid_token"``;
    * a principal whose ``expires_at`` has passed (by :attr:`clock`): ``401``,
      ``error="invalid_token"``, checked before the scopes (a refresh, not a wider grant);
    * a token without every one of :attr:`required_scopes`: ``403``,
      ``error="insufficient_scope"``, all the required scopes in one challenge;
    * a malformed header: ``400``, ``error="invalid_request"``.

    Verifying the token is yours, and it **must** check that the token was issued for
    this server: its audience (``aud``, or the resource of an introspection answer) is
    the server's canonical URI (``ProtectedResourceMetadata.resource``). A token issued
    for another resource must be refused, never accepted and never passed on upstream
    (``2026-07-28/basic/authorization#token-handling``; RFC 8707 §2). Check expiry and
    signature (or introspect) too, list implied scopes in ``Principal.scopes`` (a
    server must account for scope hierarchies), and pass the expiry on
    (``Principal(expires_at=claims["exp"])``: a legacy GET stream ends with its token).
    """

    verify_token: Callable[[str], Awaitable[Principal | None]]
    """``async (token) -> Principal | None``: the principal the token stands for, or
    ``None`` when it is invalid, expired, revoked, or not issued for this server. An
    exception is a bug (the server answers ``500`` and logs it)."""
    resource_metadata_url: str | None = attrs.field(default=None, validator=_check_url)
    """The URL of the Protected Resource Metadata document
    (``ProtectedResourceMetadata.url``), named in every challenge so that clients find
    the authorization server (RFC 9728 §5.1): an absolute ``https`` URL (``http`` only on
    a loopback host), checked as ``HttpServerConfig.resource_metadata``'s is
    (:func:`~mcp_sansio.http.check_metadata_url`; ``ValueError`` here, not a client
    that cannot follow it later)."""
    required_scopes: frozenset[str] = attrs.field(default=frozenset(), converter=_required)
    """Scopes every request needs (empty: any valid token will do), checked on the head
    of every request. Scopes of one tool, resource or prompt are declared where it is
    registered (``@server.tool(scopes=...)``) and checked once the body says what is
    asked for. ``offline_access`` is left out, with a warning logged once: it would go
    in every challenge, where a server should not name it
    (``2026-07-28/basic/authorization#refresh-tokens``), and no token needs it (list it
    in ``ProtectedResourceMetadata.scopes_supported`` for legacy clients' refresh
    tokens)."""

    dpop: Literal["off", "allowed", "required"] = "off"
    """DPoP-bound tokens (RFC 9449; MCP's SEP-1932): ``"off"``, bearer tokens only, as
    before; ``"allowed"``, ``Authorization: DPoP`` with a proof too; ``"required"``,
    only DPoP. A token :attr:`verify_token` says is bound (``Principal.dpop_jkt``) is
    refused as a plain bearer token. Needs the ``crypto`` extra."""
    dpop_origin: str | None = None
    """``scheme://host[:port]`` clients reach the server at (behind a TLS proxy:
    ``https://…``): the proof's ``htu`` must be it plus the request path (for a
    WebSocket handshake its ``ws(s)`` twin too). ``None``: ``http://`` (``https://``
    when ``serve_http`` serves TLS itself, ``ssl_context=``) and the request's ``Host``
    (for an absolute-form target, its scheme and authority: RFC 9112 section 3.2.2 has
    the server ignore ``Host`` then). It may end in a path prefix a
    reverse proxy strips before the request reaches us (``https://h.example/base``:
    the proof names ``/base/mcp`` for our ``/mcp``); with DPoP on, one that does not
    parse, or has userinfo, a query, a fragment or a trailing ``/``, is a
    ``ValueError``."""
    dpop_algs: tuple[str, ...] = DEFAULT_DPOP_ALGS
    """The proof algorithms accepted (``ES256``, ``RS256``)."""
    dpop_window: float = 300.0
    """How far a proof's ``iat`` may be from now, either way, in seconds (SEP-1932)."""
    dpop_nonces: DpopNonces | None = None
    """When set, every proof must carry a nonce these issued (``401 use_dpop_nonce``
    with a fresh ``DPoP-Nonce`` otherwise); stateless, shareable across replicas."""
    dpop_replay_cache: int = 0
    """How many recent proofs (``jkt``, ``jti``) to remember and refuse again within
    twice :attr:`dpop_window` (RFC 9449 section 11.1); the oldest is forgotten past the
    bound. Only proofs of a token bound to their key are remembered (a stranger's
    self-signed proofs cannot flush it).
    ``0``: none (a stateless server relies on the window and nonces, SEP-1932)."""
    clock: Callable[[], float] = time.time
    """The wall clock (seconds since the epoch) proofs are checked against, and a
    principal's ``expires_at``: at each request, and for what is left of its token's
    life (a GET or listen stream, a WebSocket connection)."""

    _no_token: HttpResponse = attrs.field(init=False, eq=False, repr=False)
    """The answer to a request without a token (every client's first): built once, which
    also refuses a scope or URL a challenge cannot carry (``ValueError``) at once. With
    :attr:`dpop_nonces` it is rebuilt per request (a fresh nonce)."""
    _verify: Callable[[str, Mapping[str, Any], bytes, bytes], bool] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )
    """The proof signature check, imported when DPoP is on."""
    _seen: dict[tuple[str, str], float] = attrs.field(
        init=False, factory=dict, eq=False, repr=False
    )
    """The replay cache: (jkt, jti) -> when it may be forgotten, oldest first."""
    _htu_origins: tuple[str, ...] | None = attrs.field(
        init=False, default=None, eq=False, repr=False
    )
    """:attr:`dpop_origin`'s normalised forms (``dpop_htu_origins``), parsed once."""
    _algs: frozenset[str] = attrs.field(init=False, default=frozenset(), eq=False, repr=False)
    """:attr:`dpop_algs` as a set, made once."""

    def __attrs_post_init__(self) -> None:
        if self.dpop != "off":
            from ._dpop_verify import verify_jws_signature  # noqa: PLC0415 (lazy: crypto)

            object.__setattr__(self, "_verify", verify_jws_signature)
            object.__setattr__(self, "_algs", frozenset(self.dpop_algs))
            if self.dpop_origin is not None:  # (ValueError: one that does not parse)
                object.__setattr__(self, "_htu_origins", dpop_htu_origins(self.dpop_origin))
            object.__setattr__(self, "_no_token", self._dpop_refuse(None))
        else:
            object.__setattr__(self, "_no_token", self._refuse(None))

    def advertise(self, metadata: ProtectedResourceMetadata) -> ProtectedResourceMetadata:
        """``metadata`` saying what this authenticator takes (RFC 9728 section 2): with
        :attr:`dpop` on, ``dpop_signing_alg_values_supported`` is :attr:`dpop_algs`, and
        with ``"required"`` ``dpop_bound_access_tokens_required`` is ``true``. A field
        ``metadata`` sets already (or its ``extra`` overrides) is left as it is."""
        if self.dpop == "off":
            return metadata
        algs = metadata.dpop_signing_alg_values_supported
        required = metadata.dpop_bound_access_tokens_required
        return attrs.evolve(
            metadata,
            dpop_signing_alg_values_supported=self.dpop_algs if algs is None else algs,
            dpop_bound_access_tokens_required=(
                True if required is None and self.dpop == "required" else required
            ),
        )

    async def __call__(self, request: HttpRequest) -> Principal | HttpResponse:
        """Authenticate one request: the principal, or the refusal (see the class)."""
        if self.dpop != "off":
            return await self._dpop_call(request)
        try:
            token = bearer_token(request)
        except RemoteProtocolError as exc:
            return self._refuse("invalid_request", str(exc))
        if token is None:
            return self._no_token
        principal = await self.verify_token(token)
        if principal is None:
            return self._refuse("invalid_token", "The access token is invalid or expired")
        return self._accepted(principal)

    async def _dpop_call(self, request: HttpRequest) -> Principal | HttpResponse:
        credentials = authorization_credentials(request.headers)
        if credentials is None:
            return self._dpop_no_token()
        scheme, token = credentials
        if scheme == "bearer" and self.dpop == "allowed":
            principal = await self.verify_token(token)
            if principal is None or principal.dpop_jkt is not None:  # RFC 9449 section 7.1
                return self._dpop_refuse("invalid_token", "The access token is invalid")
            return self._accepted(principal)
        if scheme != "dpop":
            if scheme == "":
                return self._dpop_refuse("invalid_request", "Malformed Authorization header")
            return self._dpop_no_token()
        proof = dpop_header(request.headers)
        if proof is None:
            return self._dpop_refuse("invalid_dpop_proof", "A DPoP proof is required")
        if isinstance(proof, DpopRefusal):
            return self._dpop_refuse(proof.error, proof.description)
        assert self._verify is not None  # (set when DPoP is on)
        now = self.clock()
        nonces = self.dpop_nonces
        if self._htu_origins is not None:
            urls = dpop_request_htus(self._htu_origins, request.path)
        else:
            # The target URI (RFC 9110 section 7.1): an absolute-form target's scheme
            # and authority, not the Host header (RFC 9112 section 3.2.2: "MUST
            # ignore" it; the authority is what the 421 check vets), else
            # the connection's scheme (https when we serve TLS) and the Host header.
            host = request.host or "localhost"
            scheme = request.scheme or CONNECTION_SCHEME.get()
            # (A Host with "/", "?", "#" or "@" would move the request's path into a
            # query, a fragment or userinfo that the htu comparison ignores: a proof
            # signed for another path would pass. Only host[:port] characters here.)
            if _HOST.fullmatch(host) is None:
                return self._dpop_refuse("invalid_request", "Malformed Host header")
            try:
                urls = dpop_htu_candidates(f"{scheme}://{host}{request.path}")
            except ValueError:  # (a Host that is no host: "[", "h:abc")
                return self._dpop_refuse("invalid_request", "Malformed Host header")
        checked = check_dpop_proof(
            proof,
            method=request.method,
            urls=urls,
            access_token=token,
            now=now,
            verify=self._verify,
            algs=self._algs,
            window=self.dpop_window,
            nonce_valid=None if nonces is None else (lambda n: nonces.valid(n, now)),
        )
        if isinstance(checked, DpopRefusal):
            return self._dpop_refuse(checked.error, checked.description)
        replayed = "The DPoP proof was used before"
        key = (checked.jkt, checked.jti)
        if self.dpop_replay_cache and self._seen.get(key, 0.0) > now:
            return self._dpop_refuse("invalid_dpop_proof", replayed)
        principal = await self.verify_token(token)
        if principal is None:
            return self._dpop_refuse("invalid_token", "The access token is invalid")
        if principal.dpop_jkt != checked.jkt:
            return self._dpop_refuse(
                "invalid_token", "The access token is not bound to the DPoP key"
            )
        # Remembered only now, for a token bound to the proof's key: a stranger's
        # self-signed proofs with junk tokens cannot flush the cache. Checked again:
        # the same proof may have raced through ``verify_token``.
        if self.dpop_replay_cache and not self._remember(key, now):
            return self._dpop_refuse("invalid_dpop_proof", replayed)
        return self._accepted(principal)

    def _remember(self, key: tuple[str, str], now: float) -> bool:
        """Record a proof for :attr:`dpop_window` twice over (its ``iat`` may be that far
        either way); ``False`` if it is there already. Expired entries go first, then
        the oldest past the bound."""
        seen = self._seen
        while seen:
            oldest = next(iter(seen))
            if seen[oldest] > now and len(seen) < self.dpop_replay_cache:
                break
            del seen[oldest]
        if seen.get(key, 0.0) > now:
            return False
        seen[key] = now + 2 * self.dpop_window
        return True

    def _dpop_no_token(self) -> HttpResponse:
        return self._no_token if self.dpop_nonces is None else self._dpop_refuse(None)

    def _accepted(self, principal: Principal) -> Principal | HttpResponse:
        """``principal``, or the refusal of a verified token that has expired (by
        :attr:`clock`) or lacks a required scope: expiry first, for a client to refresh
        its token rather than ask for a wider one. With DPoP on, a DPoP challenge."""
        expires_at = principal.expires_at
        if expires_at is not None and expires_at <= self.clock():
            error: Literal["invalid_token", "insufficient_scope"] = "invalid_token"
            description = _EXPIRED
        elif not principal.has_scopes(self.required_scopes):
            error, description = "insufficient_scope", "The access token lacks a required scope"
        else:
            return principal
        if self.dpop == "off":
            return self._refuse(error, description)
        return self._dpop_refuse(error, description)

    def _dpop_refuse(
        self,
        error: DpopError | Literal["invalid_request", "insufficient_scope"] | None,
        description: str | None = None,
    ) -> HttpResponse:
        nonces = self.dpop_nonces
        return dpop_challenge(
            error,
            algs=self.dpop_algs,
            description=description,
            resource_metadata=self.resource_metadata_url,
            scope=self.required_scopes,
            bearer_too=self.dpop == "allowed",
            nonce=nonces.issue(self.clock()) if nonces is not None else None,
        )

    def _refuse(self, error: BearerError | None, description: str | None = None) -> HttpResponse:
        return bearer_challenge(
            error,
            resource_metadata=self.resource_metadata_url,
            scope=self.required_scopes,
            description=description,
        )

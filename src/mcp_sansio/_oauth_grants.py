"""OAuth assertion grants for MCP clients, sans-IO: the JWT bearer grant and the
token exchange that obtains an Identity Assertion JWT Authorization Grant (ID-JAG).

Theory of operation
-------------------
Two MCP authorization extensions let a client obtain a token without a user at the
authorization server (AS), by presenting a JWT the client got elsewhere:

* Workload identity federation (``io.modelcontextprotocol/auth/wif``, SEP-1933): the
  workload platform (Kubernetes, SPIFFE, a cloud) issued the client a JWT; the client
  sends it to the AS's token endpoint as the assertion of the JWT bearer grant
  (RFC 7523 section 2.1, :func:`jwt_bearer_request`).
* Enterprise-managed authorization (``io.modelcontextprotocol/enterprise-managed-
  authorization``, SEP-990; draft-ietf-oauth-identity-assertion-authz-grant): the
  user signed in to the client at the enterprise identity provider (IdP), which gave
  it an ID token. The client exchanges that ID token at the IdP for an ID-JAG made out
  to the AS and the MCP server (RFC 8693, :func:`token_exchange_request` and
  :func:`parse_token_exchange_response`), then presents the ID-JAG to the AS with the
  JWT bearer grant, authenticated as the client registered there.

The client never signs or verifies these JWTs: they are credentials that the platform
or the IdP issues and the AS checks. It reads one thing of them, unverified: the time
claims of a JWS's payload (``nbf``, ``iat``, ``exp``; :func:`jwt_times`), to know how
long the memory of a refusal lasts (:class:`AssertionRefusal`). Nothing here does I/O;
the token response is read by :func:`~mcp_sansio.parse_token_response`.
"""

from __future__ import annotations

import hashlib
from typing import Final, final

import attrs

from ._http_auth import without_offline_access
from ._json import loads
from ._modern import _b64decode  # (base64url without padding, as a JWS has it)
from ._oauth import (
    _TOKEN_CHARS,
    AuthorizationServerMetadata,
    ClientCredentials,
    OAuthError,
    OAuthToken,
    _authenticated_form,
    _json_object,
    _str,
    _token_error,
)

__all__ = [
    "AssertionRefusal",
    "check_grant_issuer",
    "grant_scope",
    "grant_token",
    "jwt_bearer_request",
    "parse_token_exchange_response",
    "token_exchange_request",
]

JWT_BEARER_GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
"""The JWT bearer grant (RFC 7523 section 2.1)."""
TOKEN_EXCHANGE_GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
"""The token exchange grant (RFC 8693 section 2.1)."""
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
"""An OpenID Connect ID token as the subject token (RFC 8693 section 3)."""
ID_JAG_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id-jag"
"""An Identity Assertion JWT Authorization Grant (draft-ietf-oauth-identity-assertion-
authz-grant)."""


# Refusals that say nothing of the request: it may succeed when made again.
_TRANSIENT_ERRORS: Final = frozenset({"server_error", "temporarily_unavailable"})
# Refusals of the assertion or the client as such, whatever the scope and resource
# (RFC 7523 section 3.1: a JWT that is not valid is "invalid_grant").
_WHOLE_ERRORS: Final = frozenset(
    {"invalid_grant", "invalid_client", "unauthorized_client", "unsupported_grant_type"}
)


def _assertion(value: str, what: str) -> str:
    # A JWT is three base64url parts: visible ASCII, as a token is. Refusing anything
    # else keeps a misconfigured source (an empty file, a trailing newline) from
    # reaching the AS as an odd "invalid_grant"; the value itself is never part of the
    # message.
    if not value or not _TOKEN_CHARS.issuperset(value):
        raise OAuthError(f"{what} is empty or has characters outside visible ASCII")
    return value


def check_grant_issuer(metadata: AuthorizationServerMetadata, issuer: str) -> None:
    """Check that the authorization server of ``metadata`` is ``issuer``, the one a
    workload JWT is made out to, before the JWT is sent: it is a bearer credential,
    for that authorization server only, never for one the MCP server merely names.

    Raises:
        OAuthError: another authorization server (the message says the JWT is not
            sent).
    """
    if metadata.issuer != issuer:
        raise OAuthError(
            f"the workload JWT is for the authorization server {issuer!r}, but the "
            f"server uses {metadata.issuer!r}: not sent"
        )


def grant_scope(scope: str | None, *, client: ClientCredentials | None) -> str | None:
    """The ``scope`` of a JWT bearer grant request by ``client`` (``None``: no client
    identity), from the one selected (:func:`~mcp_sansio.select_scope`):
    without a client, no ``offline_access`` (a refresh token could not be used: the
    refresh token grant needs the client's identity, OAuth 2.1 section 4.3.1)."""
    if client is not None:
        return scope
    return " ".join(without_offline_access((scope or "").split())) or None


def grant_token(token: OAuthToken, *, client: ClientCredentials | None) -> OAuthToken:
    """The token of a JWT bearer grant as the client keeps it: without a client
    identity, without its refresh token (it could not be used, see
    :func:`grant_scope`; a new JWT gets a new token)."""
    if client is None and token.refresh_token is not None:
        return attrs.evolve(token, refresh_token=None)
    return token


_MAX_CLAIMS_PART: Final = 8192
"""The longest JWT payload (base64url characters) :func:`jwt_times` decodes."""
_CLOCK_SKEW: Final = 300.0
"""Seconds by which an authorization server's clock may differ from ours (five
minutes, the leeway usual for JWT time checks, RFC 7519 section 4.1)."""
_RETRY_AFTER: Final = 60.0
"""Seconds a refusal of a young JWT stands before the JWT may be presented again."""


@final
@attrs.frozen(kw_only=True)
class JwtTimes:
    """The time claims of a JWT (RFC 7519 section 4.1), seconds since the epoch, as
    its payload says (unverified); ``None`` for a claim it does not have."""

    not_before: float | None = None
    """``nbf``: not valid before."""
    issued_at: float | None = None
    """``iat``: issued at."""
    expires_at: float | None = None
    """``exp``: not valid from then on."""


def jwt_times(assertion: str) -> JwtTimes | None:
    """The time claims of ``assertion``, a JWS in compact form (three base64url parts),
    read without verifying anything; ``None`` for anything else (an encrypted JWT, a
    payload over 8192 characters, or one that is not a JSON object). A claim that is
    not a number is left out."""
    parts = assertion.split(".")
    if len(parts) != 3 or len(parts[1]) > _MAX_CLAIMS_PART:
        return None
    try:
        payload = _b64decode(parts[1])
        claims = loads(payload)
    except ValueError:  # (binascii.Error and JSONDecodeError are ValueErrors)
        return None
    if type(claims) is not dict:
        return None

    def number(name: str) -> float | None:
        value = claims.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    return JwtTimes(not_before=number("nbf"), issued_at=number("iat"), expires_at=number("exp"))


def _lapses_at(assertion: str, now: float) -> float | None:
    """When a refusal of ``assertion`` at ``now`` stops standing (``None``: never).

    An authorization server whose clock is behind ours sees a JWT issued just now as
    issued in the future, or not yet valid, and refuses it (``invalid_grant``, RFC 7523
    section 3); it takes it once its clock gets there. So a refusal of a JWT that is
    young (its ``nbf`` or ``iat``, the later, under five minutes before ``now``, or
    after it) lapses a minute after the later of that time and ``now``: the JWT may
    then be presented once more, and each refusal while it is young lapses the same
    way (at most one request a minute, for five minutes of skew). A refusal of an
    expired JWT (``exp`` at or before ``now``), of one older than that, or of one
    whose times cannot be read stands for good."""
    times = jwt_times(assertion)
    if times is None or (times.expires_at is not None and times.expires_at <= now):
        return None
    starts = [t for t in (times.not_before, times.issued_at) if t is not None]
    if not starts or max(starts) <= now - _CLOCK_SKEW:
        return None
    return max(*starts, now) + _RETRY_AFTER


@final
@attrs.frozen(kw_only=True)
class AssertionRefusal:
    """A grant request the authorization server (or the IdP) refused for good,
    remembered so that the same assertion is not presented again (the workload
    identity extension: "surface errors without retrying"): its OAuth ``error`` and a
    digest of what was refused. Only an error response as RFC 6749 section 5.2 has it
    stands: status ``400`` with an ``error`` code (or ``401`` with
    ``invalid_client``), but not ``server_error`` or ``temporarily_unavailable``;
    anything else (``429``, any ``5xx``, a status alone, whatever its body says) may
    pass when asked again. A refusal of the assertion or the client as such
    (``invalid_grant``, ``invalid_client``, ``unauthorized_client``,
    ``unsupported_grant_type``) covers the assertion whatever the scope and resource;
    any other (``invalid_scope``, ``invalid_target``, ...) covers that assertion with
    that resource and that scope (as a set) only. The assertion itself is not kept.

    An ``invalid_grant`` refusal made while the JWT was young may be the authorization
    server's clock being behind ours: it lapses (:attr:`lapses_at`) and the JWT may be
    presented once more when it may have become valid there (see :func:`jwt_times`; the rule is
    ``_lapses_at``'s). One of an expired JWT never lapses."""

    error: str
    """The OAuth ``error`` code of the refusal."""
    digest: bytes = attrs.field(repr=False)
    """The SHA-256 of what was refused (see :meth:`of`)."""
    lapses_at: float | None = attrs.field(default=None, eq=False)
    """When the refusal stops standing (seconds since the epoch, the clock ``now`` was
    read from); ``None``: never. Not part of equality: one refusal, whenever made."""

    @classmethod
    def of(
        cls,
        error: str | None,
        *,
        status: int,
        assertion: str,
        resource: str | None,
        scope: str | None,
        now: float | None = None,
    ) -> AssertionRefusal | None:
        """The refusal with HTTP ``status`` and ``error`` of ``assertion`` (asked for
        ``resource`` and ``scope``) at ``now`` (the wall clock, seconds since the epoch;
        ``None``: it never lapses); ``None`` when it may not stand if asked again (see
        the class)."""
        if not error or error in _TRANSIENT_ERRORS:
            return None
        if not (status == 400 or (status == 401 and error == "invalid_client")):
            return None
        # RFC 7523 section 3.1: a JWT outside its time window is refused with
        # invalid_grant; another code is no sign of the clocks, and stands for good.
        lapses_at = None
        if now is not None and error == "invalid_grant":
            lapses_at = _lapses_at(assertion, now)
        return cls(
            error=error, digest=_digest(error, assertion, resource, scope), lapses_at=lapses_at
        )

    def repeated_by(
        self,
        *,
        assertion: str,
        resource: str | None,
        scope: str | None,
        now: float | None = None,
    ) -> bool:
        """Whether asking with ``assertion`` for ``resource`` and ``scope`` at ``now``
        would repeat the refused request (not once the refusal has lapsed; ``now``
        ``None``: whenever)."""
        if self.lapses_at is not None and now is not None and now >= self.lapses_at:
            return False
        return _digest(self.error, assertion, resource, scope) == self.digest


def _digest(error: str, assertion: str, resource: str | None, scope: str | None) -> bytes:
    parts = [assertion]
    if error not in _WHOLE_ERRORS:
        parts += [resource or "", " ".join(sorted(set((scope or "").split())))]
    return hashlib.sha256("\n".join(parts).encode()).digest()


def jwt_bearer_request(
    metadata: AuthorizationServerMetadata,
    client: ClientCredentials | None,
    *,
    assertion: str,
    resource: str | None,
    scope: str | None = None,
) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and form body of a JWT bearer grant request (RFC 7523 section 2.1):
    ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` and ``assertion``, with
    ``resource`` (RFC 8707; the workload identity extension lists it) and ``scope``.

    ``client`` is authenticated as :func:`~mcp_sansio.token_request` does (enterprise-
    managed authorization, section 5: "The MCP Client authenticates with its
    credentials as registered"); ``None`` sends no client authentication and no
    ``client_id`` (RFC 7523 section 3.2.1 makes it optional; workload identity
    federation needs no client registration).

    Returns:
        ``(headers, body)``; POST them to ``metadata.token_endpoint``.

    Raises:
        OAuthError: the assertion is empty or not visible ASCII.
    """
    form = [
        ("grant_type", JWT_BEARER_GRANT_TYPE),
        ("assertion", _assertion(assertion, "the JWT assertion")),
    ]
    if resource is not None:
        form.append(("resource", resource))
    if scope:
        form.append(("scope", scope))
    return _authenticated_form(metadata, client, form)


def token_exchange_request(
    idp: AuthorizationServerMetadata,
    client: ClientCredentials,
    *,
    subject_token: str,
    audience: str,
    resource: str,
    scope: str | None = None,
) -> tuple[list[tuple[str, str]], bytes]:
    """The headers and form body of the token exchange that asks the IdP for an ID-JAG
    (enterprise-managed authorization, section 4; RFC 8693 section 2.1):
    ``requested_token_type`` ID-JAG, ``audience`` the issuer of the MCP server's
    authorization server, ``resource`` the MCP server's RFC 9728 resource identifier,
    ``scope`` if any (without ``offline_access``: the scope names scopes "at the MCP
    Server", and a refresh token is asked for at the authorization server, with the
    ID-JAG), and the ID token as ``subject_token`` of type ``id_token``. No
    ``actor_token`` (section 4: not used). ``client`` is the client's registration at
    the IdP, authenticated the way the IdP's metadata (or the registration) says
    ("If the IdP requires client authentication [for single sign-on], then client
    authentication of the Token Exchange request is also required").

    Returns:
        ``(headers, body)``; POST them to ``idp.token_endpoint``.

    Raises:
        OAuthError: the ID token is empty or not visible ASCII.
    """
    form = [
        ("grant_type", TOKEN_EXCHANGE_GRANT_TYPE),
        ("requested_token_type", ID_JAG_TOKEN_TYPE),
        ("audience", audience),
        ("resource", resource),
    ]
    scope = " ".join(without_offline_access((scope or "").split()))
    if scope:
        form.append(("scope", scope))
    form += [
        ("subject_token", _assertion(subject_token, "the ID token")),
        ("subject_token_type", ID_TOKEN_TYPE),
    ]
    return _authenticated_form(idp, client, form)


def parse_token_exchange_response(status: int, body: bytes) -> str:
    """The ID-JAG from the IdP's token exchange response (enterprise-managed
    authorization, section 4.2; RFC 8693 section 2.2): ``issued_token_type`` must be
    the ID-JAG type, and the grant is in ``access_token`` ("for historical reasons";
    its ``token_type`` is ``N_A``, not a token for any server).

    Raises:
        OAuthError: an error response (section 4.2.1: RFC 6749 section 5.2; its
            ``error`` code in :attr:`~mcp_sansio.OAuthError.error`), or a malformed
            one.
    """
    what = "the token exchange response"
    if status != 200:
        raise _token_error(status, body, "the identity provider refused the token exchange")
    obj = _json_object(body, what)
    issued = _str(obj, "issued_token_type", what, required=True)
    if issued != ID_JAG_TOKEN_TYPE:
        raise OAuthError(f"{what}: issued_token_type {issued!r} is not {ID_JAG_TOKEN_TYPE!r}")
    grant = _str(obj, "access_token", what, required=True)
    assert grant is not None
    return _assertion(grant, f"{what}: the ID-JAG ('access_token')")

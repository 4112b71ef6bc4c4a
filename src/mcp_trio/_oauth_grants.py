"""OAuth assertion grants over Trio: workload identity federation and enterprise-managed
authorization (see :mod:`mcp_sansio._oauth_grants` for the rules).

Theory of operation
-------------------
The user configures one of :class:`WorkloadIdentity` or :class:`EnterpriseAuthorization`
in :class:`~mcp_trio.OAuth`; the flow of :mod:`mcp_trio._oauth` does discovery as usual
and, where it would send the user to authorize, calls :func:`workload_token` or
:func:`enterprise_token` instead. Each makes exactly one request to each endpoint it
needs: a refusal is reported as it came (its OAuth ``error`` kept), never retried and
never followed by another grant type (the workload identity extension: "surface errors
without retrying or switching grant types"). The JWTs come from the caller, fresh for
each authorization (a callable may fetch a new one: they are short-lived); the client
never signs or reads them. Every request goes through the flow's ``fetch``: https (http
to loopback only for a server on loopback), bounded in time and size.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs

from mcp_sansio._oauth import (
    AuthorizationServerMetadata,
    ClientCredentials,
    OAuthError,
    OAuthToken,
    check_endpoint,
    parse_token_response,
)
from mcp_sansio._oauth_grants import (
    jwt_bearer_request,
    parse_token_exchange_response,
    token_exchange_request,
)

__all__ = [
    "AssertionSource",
    "EnterpriseAuthorization",
    "WorkloadIdentity",
    "enterprise_token",
    "workload_token",
]

AssertionSource: TypeAlias = str | Callable[[], str] | Callable[[], Awaitable[str]]
"""A JWT, or a callable (plain or ``async``) that returns a fresh one each time it is
called. A plain callable runs in the event loop: keep it quick (read a file), or make
it ``async``."""

Fetch: TypeAlias = Callable[..., Awaitable[tuple[int, list[tuple[bytes, bytes]], bytes]]]
Discover: TypeAlias = Callable[[str], Awaitable[AuthorizationServerMetadata]]


@final
@attrs.frozen(kw_only=True)
class WorkloadIdentity:
    """Workload identity federation (the MCP ``io.modelcontextprotocol/auth/wif``
    extension, SEP-1933): the client presents the JWT its workload platform issued it
    (Kubernetes, SPIFFE, a cloud) with the JWT bearer grant (RFC 7523 section 2.1),
    with no user and no client registration. Pass it as ``OAuth(workload_identity=)``.

    The JWT is a bearer credential made out to one authorization server, so it is sent
    to that one only: ``issuer``, never one the MCP server merely names.
    """

    assertion: AssertionSource = attrs.field(repr=False)
    """The workload's JWT, or a callable returning a fresh one (see
    :data:`AssertionSource`)."""
    issuer: str
    """The issuer identifier of the authorization server the JWT is for (its ``aud``
    names it, or its token endpoint)."""


@final
@attrs.frozen(kw_only=True)
class EnterpriseAuthorization:
    """Enterprise-managed authorization (the MCP
    ``io.modelcontextprotocol/enterprise-managed-authorization`` extension, SEP-990; the
    Identity Assertion Authorization Grant): the user signed in to the client at the
    enterprise identity provider (IdP) and the client holds the ID token. For each
    authorization the client exchanges it at the IdP for an ID-JAG made out to the MCP
    server's authorization server and resource (RFC 8693), then presents that to the
    authorization server with the JWT bearer grant, authenticated as ``OAuth(client=)``
    (the client's registration there, which the IdP knows). Pass it as
    ``OAuth(enterprise=)``.

    Raises:
        ValueError: ``idp_client`` is bound to another issuer than ``idp_issuer``.
    """

    id_token: AssertionSource = attrs.field(repr=False)
    """The ID token from the single sign-on, or a callable returning a current one
    (see :data:`AssertionSource`)."""
    idp_issuer: str
    """The IdP's issuer identifier: its metadata (RFC 8414, then OpenID Connect
    Discovery) names the token endpoint, unless :attr:`idp_token_endpoint` is given."""
    idp_client: ClientCredentials
    """The client's registration at the IdP (the ID token's audience). Its
    ``issuer``, required with a secret, must be :attr:`idp_issuer`."""
    idp_token_endpoint: str | None = None
    """The IdP's token endpoint, when it is not to be discovered."""

    def __attrs_post_init__(self) -> None:
        if self.idp_client.issuer not in (None, self.idp_issuer):
            raise ValueError(
                f"idp_client is bound to {self.idp_client.issuer!r}, not to the "
                f"identity provider {self.idp_issuer!r}"
            )


async def _resolve(source: AssertionSource, what: str) -> str:
    """The JWT of ``source``: itself, or what calling (and awaiting) it returns.

    Raises:
        OAuthError: the callable returned something else than a string.
        Exception: whatever the callable raised.
    """
    if isinstance(source, str):
        return source
    value: object = source()
    if inspect.isawaitable(value):
        value = await value
    if type(value) is not str:
        raise OAuthError(f"the {what} callable returned {type(value).__name__}, not a str")
    return value


def _refused(exc: OAuthError, what: str) -> OAuthError:
    return OAuthError(f"{what} (not retried, and no other grant tried): {exc}", error=exc.error)


async def _post(
    fetch: Fetch, url: str, request: tuple[list[tuple[str, str]], bytes]
) -> tuple[int, bytes]:
    headers, body = request
    status, _, answer = await fetch("POST", url, headers=headers, body=body)
    return status, answer


async def workload_token(
    identity: WorkloadIdentity,
    metadata: AuthorizationServerMetadata,
    client: ClientCredentials | None,
    *,
    resource: str,
    scope: str | None,
    fetch: Fetch,
    now: Callable[[], float],
) -> OAuthToken:
    """A token from the JWT bearer grant with the workload's JWT, at ``metadata``'s
    token endpoint: one request. ``client`` (optional) authenticates the request.

    A refresh token that comes with it is dropped when there is no ``client`` (a
    refresh needs a client identity; a new JWT gets a new token).

    Raises:
        OAuthError: the authorization server is not ``identity.issuer`` (the JWT is
            not sent), refused the grant (its ``error``: ``invalid_grant``,
            ``invalid_scope``, ``unauthorized_client``, ...), or answered wrongly.
        trio.TooSlowError: no answer in time.
        Exception: from the assertion callable.
    """
    if metadata.issuer != identity.issuer:
        raise OAuthError(
            f"the workload JWT is for the authorization server {identity.issuer!r}, but the "
            f"server uses {metadata.issuer!r}: not sent"
        )
    assertion = await _resolve(identity.assertion, "workload JWT")
    request = jwt_bearer_request(
        metadata, client, assertion=assertion, resource=resource, scope=scope
    )
    status, answer = await _post(fetch, metadata.token_endpoint, request)
    try:
        token = parse_token_response(status, answer, now=now(), requested_scope=scope)
    except OAuthError as exc:
        raise _refused(exc, "the workload JWT (jwt-bearer grant) was refused") from None
    if client is None and token.refresh_token is not None:
        token = attrs.evolve(token, refresh_token=None)
    return token


async def enterprise_token(
    enterprise: EnterpriseAuthorization,
    metadata: AuthorizationServerMetadata,
    client: ClientCredentials,
    *,
    resource: str,
    scope: str | None,
    fetch: Fetch,
    discover: Discover,
    now: Callable[[], float],
    loopback: bool,
) -> OAuthToken:
    """A token for ``resource`` from ``metadata``'s authorization server by way of the
    IdP: its metadata (unless the token endpoint is configured), the token exchange
    of the ID token for an ID-JAG (``audience`` the authorization server's issuer,
    ``resource``, ``scope``), then the JWT bearer grant with the ID-JAG, ``client``
    authenticated. One request each.

    Raises:
        OAuthError: the IdP or the authorization server refused (the ``error`` kept) or
            answered wrongly; an IdP endpoint that may not carry OAuth traffic.
        trio.TooSlowError: no answer in time.
        Exception: from the ID token callable.
    """
    endpoint = enterprise.idp_token_endpoint
    if endpoint is None:
        idp = await discover(enterprise.idp_issuer)
    else:
        check_endpoint(endpoint, "the identity provider's token endpoint", loopback=loopback)
        idp = AuthorizationServerMetadata(issuer=enterprise.idp_issuer, token_endpoint=endpoint)
    id_token = await _resolve(enterprise.id_token, "ID token")
    exchange = token_exchange_request(
        idp,
        enterprise.idp_client,
        subject_token=id_token,
        audience=metadata.issuer,
        resource=resource,
        scope=scope,
    )
    status, answer = await _post(fetch, idp.token_endpoint, exchange)
    try:
        grant = parse_token_exchange_response(status, answer)
    except OAuthError as exc:
        raise _refused(exc, "no ID-JAG from the identity provider") from None
    request = jwt_bearer_request(metadata, client, assertion=grant, resource=resource, scope=scope)
    status, answer = await _post(fetch, metadata.token_endpoint, request)
    try:
        return parse_token_response(status, answer, now=now(), requested_scope=scope)
    except OAuthError as exc:
        raise _refused(exc, "the ID-JAG (jwt-bearer grant) was refused") from None

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
never signs or verifies them (it reads a JWT's time claims only, unverified, to know
how long a refusal stands: :func:`~mcp_sansio._oauth_grants.jwt_times`). A refusal
that stands (an ``AssertionRefusal``) is remembered by the :class:`~mcp_trio.OAuth`,
for all its clients (:class:`Refusals`): the same JWT (a string, or what a callable
returns again; an ID-JAG the IdP hands out again) is then refused at once, with no
request, so that a session's later requests do not present it again and again; until
the refusal lapses, for a JWT refused (``invalid_grant``) while young (the
authorization server's clock may be behind: see
:class:`~mcp_sansio._oauth_grants.AssertionRefusal`). Every
request goes through the flow's ``fetch``: https (http to loopback only for a server on
loopback), bounded in time and size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias, final

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
    AssertionRefusal,
    check_grant_issuer,
    grant_token,
    jwt_bearer_request,
    parse_token_exchange_response,
    token_exchange_request,
)

from ._oauth import call_user

__all__ = [
    "AssertionSource",
    "EnterpriseAuthorization",
    "Refusals",
    "WorkloadIdentity",
    "enterprise_token",
    "workload_token",
]

AssertionSource: TypeAlias = str | Callable[[], str] | Callable[[], Awaitable[str]]
"""A JWT, or a callable (plain or ``async``) that returns a fresh one each time it is
called. A plain callable runs in the event loop: keep it quick (read a file), or make
it ``async``."""


def _check_source(
    instance: object, attribute: attrs.Attribute[AssertionSource], value: AssertionSource
) -> None:
    if not (callable(value) or (isinstance(value, str) and value)):
        raise ValueError(f"{attribute.name} must be a non-empty str or a callable")


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
    to that one only: ``issuer``, never one the MCP server merely names (of those the
    protected-resource metadata lists, ``issuer`` is the one used).

    Raises:
        ValueError: ``assertion`` is neither a non-empty string nor a callable.
    """

    assertion: AssertionSource = attrs.field(repr=False, validator=_check_source)
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
    (the client's registration there, which the IdP knows), or as its Client ID
    Metadata Document (``OAuth(client_metadata_url=)``). Pass it as
    ``OAuth(enterprise=)``.

    Raises:
        ValueError: ``idp_client`` is bound to another issuer than ``idp_issuer``;
            ``id_token`` is neither a non-empty string nor a callable.
    """

    id_token: AssertionSource = attrs.field(repr=False, validator=_check_source)
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
        OAuthError: the callable returned something else than a string (or raised
            one).
        trio.TooSlowError: the callable raised it.
        CallbackFailed: the callable raised anything else.
    """
    if isinstance(source, str):
        return source
    value = await call_user(source, f"the {what} callable")
    if type(value) is not str:
        raise OAuthError(f"the {what} callable returned {type(value).__name__}, not a str")
    return value


def _refused(exc: OAuthError, what: str) -> OAuthError:
    return OAuthError(f"{what} (not retried, and no other grant tried): {exc}", error=exc.error)


_MAX_REFUSALS: Final = 8
"""How many refusals :class:`Refusals` keeps of each kind of assertion."""


@final
class Refusals:
    """What an :class:`~mcp_trio.OAuth` remembers of refused grants: up to eight
    (``_MAX_REFUSALS``) :class:`~mcp_sansio._oauth_grants.AssertionRefusal` of each kind
    of assertion (the workload JWT, the ID token, the ID-JAG), the one least recently
    refused or held back forgotten first. A refusal that depends on the resource and scope
    (``invalid_scope``) is one of several, for a few servers or scopes; beyond eight,
    the oldest may be presented (and refused) once more."""

    def __init__(self) -> None:
        self._kept: dict[str, OrderedDict[AssertionRefusal, None]] = {}

    def check(
        self, what: str, assertion: str, resource: str, scope: str | None, now: float
    ) -> None:
        """Refuse to present ``assertion`` at ``now`` (the wall clock) if that would
        repeat a refusal that still stands.

        Raises:
            OAuthError: it would (the refusal's ``error`` kept; no request made).
        """
        kept = self._kept.get(what, OrderedDict())
        refusal = next(
            (
                r
                for r in kept
                if r.repeated_by(assertion=assertion, resource=resource, scope=scope, now=now)
            ),
            None,
        )
        if refusal is not None:
            kept.move_to_end(refusal)  # (used again: the last to be forgotten)
            if refusal.lapses_at is not None:
                raise OAuthError(
                    f"the {what} was refused ({refusal.error}) while young, and is not "
                    f"presented again for {refusal.lapses_at - now:.0f} s (the authorization "
                    "server's clock may be behind)",
                    error=refusal.error,
                )
            raise OAuthError(
                f"the {what} was refused ({refusal.error}) and is not presented again: "
                "configure a new one",
                error=refusal.error,
            )

    def note(
        self,
        what: str,
        exc: OAuthError,
        status: int,
        assertion: str,
        resource: str,
        scope: str | None,
        now: float,
    ) -> None:
        """``assertion`` was refused at ``now`` with ``exc``, an answer with HTTP
        ``status``: remember it if the refusal stands (see
        :class:`~mcp_sansio._oauth_grants.AssertionRefusal`; until it lapses, for a
        young JWT)."""
        refusal = AssertionRefusal.of(
            exc.error, status=status, assertion=assertion, resource=resource, scope=scope, now=now
        )
        if refusal is None:
            return
        kept = self._kept.setdefault(what, OrderedDict())
        kept.pop(refusal, None)  # (the same refusal again: its new lapse time)
        kept[refusal] = None
        if len(kept) > _MAX_REFUSALS:
            kept.popitem(last=False)


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
    refusals: Refusals,
) -> OAuthToken:
    """A token from the JWT bearer grant with the workload's JWT, at ``metadata``'s
    token endpoint: one request. ``client`` (optional) authenticates the request.

    A refresh token that comes with it is dropped when there is no ``client``
    (:func:`~mcp_sansio._oauth_grants.grant_token`). A JWT ``refusals`` remembers as
    refused is not sent again; a new refusal is remembered there.

    Raises:
        OAuthError: the authorization server is not ``identity.issuer`` (the JWT is
            not sent), refused the grant now or before (its ``error``:
            ``invalid_grant``, ``invalid_scope``, ``unauthorized_client``, ...), or
            answered wrongly.
        trio.TooSlowError: no answer in time.
        CallbackFailed: the assertion callable raised.
    """
    what = "workload JWT"
    check_grant_issuer(metadata, identity.issuer)
    assertion = await _resolve(identity.assertion, what)
    refusals.check(what, assertion, resource, scope, now())
    request = jwt_bearer_request(
        metadata, client, assertion=assertion, resource=resource, scope=scope
    )
    status, answer = await _post(fetch, metadata.token_endpoint, request)
    try:
        token = parse_token_response(status, answer, now=now(), requested_scope=scope)
    except OAuthError as exc:
        refusals.note(what, exc, status, assertion, resource, scope, now())
        raise _refused(exc, "the workload JWT (jwt-bearer grant) was refused") from None
    return grant_token(token, client=client)


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
    internal: bool,
    refusals: Refusals,
) -> OAuthToken:
    """A token for ``resource`` from ``metadata``'s authorization server by way of the
    IdP: its metadata (unless the token endpoint is configured), the token exchange
    of the ID token for an ID-JAG (``audience`` the authorization server's issuer,
    ``resource``, ``scope``), then the JWT bearer grant with the ID-JAG, ``client``
    authenticated. One request each. An ID token ``refusals`` remembers as refused by
    the IdP is not sent again, nor an ID-JAG the authorization server refused (an IdP
    may hand out the same one again); a new refusal of either is remembered there.

    Raises:
        OAuthError: the IdP or the authorization server refused, now or before (the
            ``error`` kept), or answered wrongly; an IdP endpoint that may not carry
            OAuth traffic.
        trio.TooSlowError: no answer in time.
        CallbackFailed: the ID token callable raised.
    """
    endpoint = enterprise.idp_token_endpoint
    if endpoint is not None:
        check_endpoint(
            endpoint,
            "the identity provider's token endpoint",
            loopback=loopback,
            internal=internal,
        )
    what = "ID token"
    id_token = await _resolve(enterprise.id_token, what)
    refusals.check(what, id_token, resource, scope, now())  # (before any request to the IdP)
    if endpoint is None:
        idp = await discover(enterprise.idp_issuer)
    else:
        idp = AuthorizationServerMetadata(issuer=enterprise.idp_issuer, token_endpoint=endpoint)
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
        refusals.note(what, exc, status, id_token, resource, scope, now())
        raise _refused(exc, "no ID-JAG from the identity provider") from None
    # An IdP may hand out the same ID-JAG again while it is valid (one it caches): one
    # the authorization server refused for good is not presented again either.
    refusals.check("ID-JAG", grant, resource, scope, now())
    request = jwt_bearer_request(metadata, client, assertion=grant, resource=resource, scope=scope)
    status, answer = await _post(fetch, metadata.token_endpoint, request)
    try:
        return parse_token_response(status, answer, now=now(), requested_scope=scope)
    except OAuthError as exc:
        refusals.note("ID-JAG", exc, status, grant, resource, scope, now())
        raise _refused(exc, "the ID-JAG (jwt-bearer grant) was refused") from None

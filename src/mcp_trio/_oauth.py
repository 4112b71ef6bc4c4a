"""OAuth 2.1 for the Streamable HTTP and WebSocket clients: the flow, over Trio.

Theory of operation
-------------------
The rules are :mod:`mcp_sansio._oauth`'s; this module only moves their bytes and waits.
:class:`OAuth` is what the user configures (how the user agent is sent to the
authorization server, the client's identity, storage); each HTTP client binds it to its
server URL as an :class:`Authorizer`, which the channel consults (a WebSocket client
consults it at the opening handshake only, as for one request, and the connections to
one URL share one, so that a new connection starts with the token of the last:
:func:`mcp_trio._websocket.open_websocket_client`):

* before each request is framed, for the ``Authorization`` value (the current token);
* before every POST, to refresh a token that has expired when a refresh token exists
  (never the user, never an error: a refresh that fails or times out drops the token).
  A token is "expired" a tenth of its lifetime early, at most 30 seconds (by ``clock``,
  :func:`time.time` unless the :class:`OAuth` says otherwise). There is one refresh at
  a time, a task in the channel's nursery that everyone who needs it shares, apart
  from the flow's lock: a request waits for it (:meth:`Authorizer.ready`; it is
  bounded by ``timeout``); a one-way message (a notification, an answer to the
  server) only starts it (:meth:`Authorizer.refresh_soon`) and goes with the current
  token: its sender, the session's writer, never calls the authorization server.
  Refresh tokens may be single-use and the storage shared (by the clients of one
  :class:`OAuth`, or of one storage object, in any thread): their refreshes of one
  token take turns (:mod:`._oauth_turn`), and the refresh takes the storage's token
  instead when another client stored a newer one, reads it again after a refusal,
  and forgets the stored token only if it is still the one refused (and no flow
  began to save its own meanwhile). A refresh that ends while a flow is storing its token, or after,
  drops its outcome (memory and storage);
* when the server answers ``401``, or ``403`` with ``error="insufficient_scope"``, to a
  request other than a ``ping`` (:meth:`Authorizer.challenged`; a ping is treated as a
  one-way message is, below: see :mod:`mcp_trio._keepalive`, "Authorization"):
  discovery, registration, authorization and the token request, after which the
  channel sends the request again. The grant is
  decided once, from the :class:`OAuth`'s arguments (``OAuth._grant``): the user at
  ``on_authorize`` (authorization code), the client credentials grant, or an
  assertion grant (workload identity, enterprise-managed authorization:
  :mod:`._oauth_grants`, loaded only then), whose client is only ever the configured
  one, never registered, and which is asked once per flow, never retried. One flow at a time
  (a lock): a request refused with a token that has been replaced meanwhile is simply
  sent again, and requests refused together share one flow's failure. The flow runs in
  the channel's nursery, bounded by ``authorize_timeout``: a request that times out
  meanwhile fails, the flow goes on and its token serves the next requests. Issuer,
  metadata, resource, client and token are committed together once a token is
  obtained, so a failed flow leaves them as they were (a registration it obtained is
  kept in the storage, where the next flow finds it). A request gets at most
  ``max_authorizations`` such rounds (the step-up retry limit,
  ``2025-11-25/basic/authorization``, "Scope Challenge Handling"); then the refusal
  is its answer. The user is not asked again (nor the token refreshed again) when the
  server refuses (``401``) the token just issued, by a flow or a refresh, nor for a
  scope set the authorization server granted and the server still found insufficient
  (remembered per resource): those fail the request at once. Nor is the user asked,
  for a ``401``, more than :data:`_USER_AUTHORIZATIONS` times within
  :data:`_USER_AUTHORIZATION_WINDOW` (on Trio's clock): a server that takes each token
  once and then refuses it would otherwise have the user authorize for every request
  (the per-request bound is no bound across requests). An exception from
  ``on_authorize``, an assertion callable or the storage is that flow's failure (an
  :class:`OAuthError` naming what raised, its type only, for every request waiting
  on it), as is any refusal or malformed answer of the authorization server (or the
  IdP), never the channel's;
* when a one-way message (or a ``ping``) is refused with ``401``
  (:meth:`Authorizer.refreshed`): it waits for the shared refresh (started if need
  be), bounded well inside the writer's ``write_timeout``, and is sent once more with
  the new token; without one it is lost (a ping: the refusal is its answer). It never
  waits for a flow, which may be waiting for the user.

With ``OAuth(dpop=True)`` (RFC 9449) and an authorization server that takes ``ES256``
proofs, the token requests carry a proof of the :class:`OAuth`'s key, the token comes
back bound to it (``OAuthToken.dpop_jkt``; a stored one bound to another key is not
used), and every request presents it as ``Authorization: DPoP`` with a fresh proof, made
as the request is framed (:meth:`Authorizer.proof`, the pool's ``proof`` hook: a bearer
token's requests make none). A ``use_dpop_nonce`` answer is sent once more with the
nonce of that answer (:meth:`Authorizer.took_nonce`; the authorization server's in
``Authorizer._token_post``), never twice.

Every exchange with the metadata endpoints and the authorization server is one request
on a new connection (:func:`oauth_fetch`): ``https`` (plain ``http`` to loopback only
for a server on loopback), bounded in time (``timeout``) and size
(``max_response_size``), redirects not followed.
"""

from __future__ import annotations

import inspect
import logging
import secrets
import ssl
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Final, Literal, Protocol, TypeAlias, final
from urllib.parse import urlsplit

import h11
import trio

from mcp_sansio._jose import client_assertion, dpop_nonce_header, dpop_nonce_of, dpop_proof
from mcp_sansio._json import JSONDecodeError, dumps, loads
from mcp_sansio._oauth import (
    AuthorizationServerMetadata,
    BearerChallenge,
    ClientCredentials,
    OAuthError,
    OAuthToken,
    authorization_server_metadata_urls,
    authorization_url,
    check_code_grant_support,
    check_endpoint,
    is_internal,
    is_loopback,
    legacy_authorization_server,
    new_pkce,
    parse_authorization_response,
    parse_protected_resource_metadata,
    parse_registration,
    parse_token_response,
    protected_resource_metadata_urls,
    registration_body,
    response_challenge,
    select_authorization_server,
    select_scope,
    token_request,
    websocket_http_url,
)
from mcp_sansio.http import HttpRequest, ProtectedResourceMetadata

from ._http_config import HttpTransportConfig
from ._http_pool import Pool
from ._http_wire import WireError
from ._oauth_turn import Turn, note_save, refresh_turn
from ._util import check_count, check_seconds, is_websocket_url

if TYPE_CHECKING:
    # (Loaded for an assertion grant only, by whoever configures one: every HTTP
    # client imports this module.)
    from ._oauth_grants import EnterpriseAuthorization, Refusals, WorkloadIdentity
    from ._oauth_loopback import LoopbackRedirect
    from ._signing import SigningKey

__all__ = [
    "AuthorizeCallback",
    "Authorizer",
    "ClientCredentials",
    "InMemoryOAuthStorage",
    "OAuth",
    "OAuthError",
    "OAuthStorage",
    "OAuthToken",
    "fetch_authorization_redirect",
    "oauth_fetch",
]

logger = logging.getLogger("mcp_trio")

Grant: TypeAlias = Literal[
    "authorization_code", "client_credentials", "workload_identity", "enterprise"
]
"""How an :class:`OAuth` obtains a token (from its arguments: ``on_authorize``, neither,
``workload_identity``, ``enterprise``)."""
_ASSERTION_GRANTS: Final = frozenset({"workload_identity", "enterprise"})

AuthorizeCallback = Callable[[str], Awaitable[str]]
"""``OAuth(authorize=)``: sends the user agent to the authorization URL it is given and
returns the URL the authorization server redirected back to (the redirect URI with
``code``, ``state`` and perhaps ``iss`` in its query)."""

_DEFAULT_MAX_RESPONSE: Final = 256 * 1024
# What OAuth.authorize() sends the server to be challenged: a request any server
# refuses without a token before reading it.
_PROBE: Final = b'{"jsonrpc":"2.0","id":"mcp-trio-authorize","method":"ping"}'


class CallbackFailed(Exception):
    """A callable the user configured raised :attr:`error`: the flow reports it by
    :attr:`by`, its type only (the message may hold a secret)."""

    def __init__(self, by: str, error: Exception) -> None:
        super().__init__(by)
        self.by: Final = by
        """What raised: ``"on_authorize"``, ``"the workload JWT callable"``, ..."""
        self.error: Final = error
        """What it raised (also the ``__cause__``)."""


async def call_user(fn: Callable[..., object], by: str, *args: object) -> object:
    """What ``fn(*args)`` returns (awaited if it is awaitable): a callable the user
    configured, named ``by``.

    Raises:
        OAuthError: ``fn`` raised it (it declines, and says why).
        trio.TooSlowError: ``fn`` raised it.
        CallbackFailed: ``fn`` raised anything else.
    """
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except (OAuthError, trio.TooSlowError):
        raise
    except Exception as exc:
        raise CallbackFailed(by, exc) from exc
    return value


class OAuthStorage(Protocol):
    """Where an :class:`OAuth` keeps client registrations and tokens, so that they
    outlive the process (implement it over a keyring or a file; the default keeps them
    in memory). Registrations are keyed by the authorization server's issuer, tokens by
    the resource and the issuer: credentials are never used at another authorization
    server (``2026-07-28/basic/authorization/client-registration``, "Authorization
    Server Binding").

    Keep every field of an :class:`OAuthToken`, ``issued_at`` included: with
    ``expires_at`` it is the token's lifetime, which sets how early it is refreshed
    (without it, 30 seconds early: a short-lived token would be refreshed before
    every request). An exception from these methods fails the authorization that
    called them, not the client.

    Optional, for a storage that outlives the process: ``async load_server(server_url)
    -> tuple[str, str] | None`` and ``async save_server(server_url, resource,
    issuer)``. Where they exist (:class:`InMemoryOAuthStorage` and
    :class:`~mcp_trio.FileOAuthStorage` have them), the resource and issuer of the
    token obtained for a server are kept by the server's URL, and a new client of that
    server sends that token (unexpired) from its first request, with no ``401`` and no
    discovery first; refused, it authorizes as it would have. Without them (or when
    they raise: logged), the first request goes without a token, as before."""

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        """The registration obtained at ``issuer`` before, if any."""
        ...

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        """Keep the registration obtained at ``issuer``."""
        ...

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        """The token ``issuer`` issued for ``resource``, if any."""
        ...

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        """Keep (``None``: forget) the token ``issuer`` issued for ``resource``."""
        ...


@final
class InMemoryOAuthStorage:
    """:class:`OAuthStorage` in a dict: gone with the process."""

    def __init__(self) -> None:
        self.clients: dict[str, ClientCredentials] = {}
        """Registrations by issuer."""
        self.tokens: dict[tuple[str, str], OAuthToken] = {}
        """Tokens by ``(resource, issuer)``."""
        self.servers: dict[str, tuple[str, str]] = {}
        """The ``(resource, issuer)`` of each server URL's token."""

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        return self.clients.get(issuer)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        self.clients[issuer] = client

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        return self.tokens.get((resource, issuer))

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        if token is None:
            self.tokens.pop((resource, issuer), None)
        else:
            self.tokens[(resource, issuer)] = token

    async def load_server(self, server_url: str) -> tuple[str, str] | None:
        """The ``(resource, issuer)`` of the token of the server at ``server_url``."""
        return self.servers.get(server_url)

    async def save_server(self, server_url: str, resource: str, issuer: str) -> None:
        """Keep the ``(resource, issuer)`` of the token of the server at ``server_url``."""
        self.servers[server_url] = (resource, issuer)


@final
class OAuth:
    """OAuth 2.1 authorization for an HTTP or WebSocket client: pass it as ``auth=`` to
    :func:`~mcp_trio.open_client`, :func:`~mcp_trio.open_http_client` or
    :func:`~mcp_trio.open_websocket_client` (there it authorizes the opening handshake).

    When the server answers ``401``, the client discovers the authorization server
    (protected-resource metadata, then RFC 8414 / OpenID Connect metadata), registers
    (``client`` if given, else a Client ID Metadata Document when
    ``client_metadata_url`` is set and the authorization server supports them, else
    Dynamic Client Registration), sends the user agent to authorize with PKCE
    (``on_authorize``), exchanges the code for a token and sends the request again with
    ``Authorization: Bearer``. A ``403`` with ``error="insufficient_scope"`` asks again
    for the wider scope; an expired token is refreshed when a refresh token exists.

    Without ``on_authorize``, no user is involved: the client obtains its tokens with
    the client credentials grant (OAuth 2.1 section 4.2; the MCP
    ``oauth-client-credentials`` extension), which needs ``client`` with a secret or a
    private key (``private_key_jwt``); or,
    with ``workload_identity``, the JWT bearer grant with the workload's JWT (workload
    identity federation); or, with ``enterprise``, an ID-JAG from the enterprise
    identity provider, then the JWT bearer grant (enterprise-managed authorization).
    Those grants are asked once per authorization: a refusal fails it, with no retry
    and no other grant; a JWT refused for good is not presented again (a string
    assertion, or the same one a callable returns again, or an ID-JAG the identity
    provider hands out again: the authorization fails at once). An ``invalid_grant``
    refusal of a JWT that was young then (its ``nbf``/``iat`` under five minutes old,
    or ahead of ``clock``) may be the authorization server's clock being behind (RFC
    7523 section 3.1): it lapses a
    minute after that time, and the JWT may be presented once more (never an
    expired one).

    Args:
        redirect: a ready-made receiver of the redirect, for applications on the
            user's machine: ``redirect=LoopbackRedirect()`` (its ``redirect_uri``
            and ``on_authorize``: it opens the browser and listens on loopback).
            Instead of ``redirect_uri`` and ``on_authorize``.
        redirect_uri: where the authorization server sends the user agent back: an
            ``http`` URL on a loopback host your application listens on, or an
            ``https`` URL (``2025-11-25/basic/authorization``, "Communication
            Security": localhost or HTTPS).
        on_authorize: ``async (authorization_url) -> redirect_url``: show the user
            the URL (open a browser), wait for the redirect to ``redirect_uri`` and
            return the URL it arrived at (with its query). See
            :func:`fetch_authorization_redirect` for tests and headless servers. It
            may raise to decline (say :class:`OAuthError` when the user closed the
            browser): that authorization fails, and with it the request that needed
            it; any other exception is reported the same way (its type logged, the
            details at ``DEBUG``), never as the client's failure.
        client: pre-registered credentials (with ``issuer``: only for that
            authorization server, the one used when the protected-resource metadata
            lists several; without: for whichever one the server names). With a
            ``private_key`` it authenticates with ``private_key_jwt`` (RFC 7523) where
            the authorization server lists it (the key is loaded now; the ``crypto``
            extra).
        client_metadata_url: the HTTPS URL of this client's Client ID Metadata
            Document, used as ``client_id`` where supported.
        client_name: the name registered by Dynamic Client Registration.
        application_type: ``"native"`` / ``"web"`` for Dynamic Client Registration
            (default: ``native`` when ``redirect_uri`` is on a loopback host).
        scope: scopes to ask for when neither the challenge nor the metadata says.
        offline_access: ask for ``offline_access`` (a refresh token) when the
            authorization server lists it.
        storage: where registrations and tokens are kept (default: in memory). It
            may be shared (as this :class:`OAuth` is, by its clients), by clients in
            other threads too: their refreshes of one token take turns, and the one
            that comes second takes the token the first one stored (refresh tokens
            may be single-use). Separate processes sharing a file are not held back:
            they may still refresh one token at once. An exception it raises
            fails that authorization (see ``on_authorize``), or drops the token it
            was refreshing.
        ssl_context: TLS for the metadata and authorization server requests.
        timeout: seconds each of those requests may take.
        authorize_timeout: seconds one whole authorization (discovery, registration,
            the user at ``on_authorize``, the token request) may take. It runs apart
            from the refused request: that request's own timeout does not cut it
            short (the request may fail meanwhile; the token then serves the next
            ones). To give a user time before the first request, call
            :meth:`authorize` before connecting.
        max_response_size: the largest response body accepted from them, bytes.
        max_authorizations: authorization rounds one request may cause (a server
            that keeps refusing fails the request after that many, or at once when
            it refuses the token just issued, or a scope just granted).
        workload_identity: the workload's JWT and the authorization server it is for
            (:class:`WorkloadIdentity`): the JWT bearer grant (RFC 7523). ``client``
            (or ``client_metadata_url``) is optional then: it authenticates the
            request if given. Without a client identity (neither ``client`` nor a
            ``client_metadata_url`` the authorization server supports), no client is
            ever registered, no ``offline_access`` is asked for and no token
            refreshed (a new JWT gets a new token).
        enterprise: the ID token and the identity provider
            (:class:`EnterpriseAuthorization`): the token exchange for an ID-JAG, then
            the JWT bearer grant, which needs ``client`` (the client's registration at
            the authorization server) or ``client_metadata_url`` (where the
            authorization server supports Client ID Metadata Documents); never a
            Dynamic Client Registration.
        clock: the wall clock tokens are dated with (``expires_in``, expiry), seconds
            since the epoch (default :func:`time.time`). Pass another one to test
            expiry without waiting; the timeouts above are Trio's clock.
        dpop: ask for DPoP-bound tokens (RFC 9449) from an authorization server whose
            metadata lists ``ES256`` in ``dpop_signing_alg_values_supported`` (any
            other gets no proof and issues ``Bearer`` tokens): this :class:`OAuth`
            makes one P-256 key, every token request carries a proof of it, the token
            must come back as ``token_type`` ``DPoP`` (else the authorization fails),
            and every request to the server presents it as ``Authorization: DPoP``
            with a fresh proof (``ath``: the token's hash) in ``DPoP``. A server's
            ``use_dpop_nonce`` answer (``400`` from the authorization server, ``401``
            from the server) is retried once with its ``DPoP-Nonce``; the last nonce
            of each server is kept (of the last 32 servers). The key lives in memory
            only: a DPoP token kept in ``storage`` by another :class:`OAuth` (another
            process) is bound to another key, and is not used. Needs the ``crypto``
            extra (``pip install 'mcp-trio[crypto]'``).
        allow_private_networks: let a server with a public name have its OAuth
            endpoints (metadata, authorization server, token and registration
            endpoints) on this machine or a private network (``https://10.20.0.5``:
            a company's authorization server). By default such a URL is refused
            unless the MCP server is there too, so that a remote server cannot aim
            your requests into your network (SSRF). Set it only for servers you
            trust, as the URLs come from them. (Plain ``http`` stays loopback-only.)

    Raises:
        ValueError: ``redirect`` with ``redirect_uri`` or ``on_authorize``;
            ``redirect_uri`` is not ``https`` (or ``http`` on a loopback host),
            or is missing with ``on_authorize``; ``client_metadata_url`` is not an
            ``https`` URL with a path; no ``client`` with a secret for the client
            credentials grant, nor a ``client`` or ``client_metadata_url`` for
            ``enterprise``; a ``client`` bound to another issuer than
            ``workload_identity``'s; more than one of ``on_authorize``,
            ``workload_identity`` and ``enterprise``; a bound is not a positive
            ``int`` (not a ``bool``), or a timeout not a positive finite number; a
            ``client.private_key`` that is not a usable private key.
        ImportError: ``dpop=True`` or a ``client.private_key`` without the ``crypto``
            extra.
    """

    def __init__(
        self,
        *,
        redirect: LoopbackRedirect | None = None,
        redirect_uri: str | None = None,
        on_authorize: AuthorizeCallback | None = None,
        client: ClientCredentials | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcp-trio",
        application_type: Literal["native", "web"] | None = None,
        scope: str | None = None,
        offline_access: bool = True,
        storage: OAuthStorage | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 30.0,
        authorize_timeout: float = 300.0,
        max_response_size: int = _DEFAULT_MAX_RESPONSE,
        max_authorizations: int = 3,
        workload_identity: WorkloadIdentity | None = None,
        enterprise: EnterpriseAuthorization | None = None,
        clock: Callable[[], float] = time.time,
        dpop: bool = False,
        allow_private_networks: bool = False,
    ) -> None:
        if redirect is not None:
            if redirect_uri is not None or on_authorize is not None:
                raise ValueError("redirect= replaces redirect_uri= and on_authorize=: pass one")
            redirect_uri, on_authorize = redirect.redirect_uri, redirect.on_authorize
        grants = (on_authorize, workload_identity, enterprise)
        if sum(grant is not None for grant in grants) > 1:
            raise ValueError("pass at most one of on_authorize, workload_identity and enterprise")
        grant: Grant = "client_credentials"
        if on_authorize is not None:
            grant = "authorization_code"
        elif workload_identity is not None:
            grant = "workload_identity"
        elif enterprise is not None:
            grant = "enterprise"
        if enterprise is not None and client is None and client_metadata_url is None:
            raise ValueError(
                "enterprise needs client= or client_metadata_url=: the client's identity at "
                "the authorization server, which the identity provider names in the ID-JAG"
            )
        if (
            workload_identity is not None
            and client is not None
            and client.issuer not in (None, workload_identity.issuer)
        ):
            raise ValueError(
                f"client is bound to {client.issuer!r}, not to the workload's authorization "
                f"server {workload_identity.issuer!r}"
            )
        if on_authorize is not None and redirect_uri is None:
            raise ValueError("on_authorize needs a redirect_uri")
        if redirect_uri is not None and not _is_redirect_uri(redirect_uri):
            raise ValueError(
                f"redirect_uri must be an https URL, or http on a loopback host: {redirect_uri!r}"
            )
        if client_metadata_url is not None and not _is_https_with_path(client_metadata_url):
            raise ValueError(
                f"client_metadata_url must be an https URL with a path: {client_metadata_url!r}"
            )
        if grant == "client_credentials" and (
            client is None or (client.client_secret is None and client.private_key is None)
        ):
            raise ValueError(
                "without on_authorize (the client credentials grant), client= must be "
                "given with its client_secret or private_key"
            )
        if client is not None and client.private_key is not None and grant in _ASSERTION_GRANTS:
            raise ValueError(
                f"a client private_key (private_key_jwt) cannot be used with {grant}: its "
                "token requests authenticate the client otherwise (pass the client "
                "without private_key)"
            )
        self._client_key: SigningKey | None = None
        if client is not None and client.private_key is not None:
            from ._signing import load_signing_key  # noqa: PLC0415 (the crypto extra)

            self._client_key = load_signing_key(
                client.private_key, client.signing_algorithm, client.key_id
            )
        self.allow_private_networks: Final = allow_private_networks
        # DPoP (RFC 9449): one key for every client of this OAuth (their tokens are
        # bound to it), and the last nonce of each server (by origin), bounded.
        self.dpop: Final = dpop
        self._dpop_key: SigningKey | None = None
        self._dpop_jkt: str | None = None
        if dpop:
            from mcp_sansio._jose import jwk_thumbprint  # noqa: PLC0415

            from ._signing import new_dpop_key  # noqa: PLC0415 (the crypto extra)

            self._dpop_key = new_dpop_key()
            self._dpop_jkt = jwk_thumbprint(self._dpop_key.public_jwk)
        self._dpop_nonces: Final[OrderedDict[str, str]] = OrderedDict()
        check_seconds("timeout", timeout)
        check_seconds("authorize_timeout", authorize_timeout)
        check_count("max_response_size", max_response_size)
        check_count("max_authorizations", max_authorizations)
        self.redirect_uri: Final = redirect_uri
        self.on_authorize: Final = on_authorize
        self.client: Final = client
        self.client_metadata_url: Final = client_metadata_url
        self.client_name: Final = client_name
        self.application_type: Final = application_type
        self.scope: Final = scope
        self.offline_access: Final = offline_access
        self.storage: Final[OAuthStorage] = (
            storage if storage is not None else InMemoryOAuthStorage()
        )
        self.ssl_context: Final = ssl_context
        self.timeout: Final = timeout
        self.authorize_timeout: Final = authorize_timeout
        self.max_response_size: Final = max_response_size
        self.max_authorizations: Final = max_authorizations
        self.workload_identity: Final = workload_identity
        self.enterprise: Final = enterprise
        self.clock: Final = clock
        self._grant: Final = grant
        # Assertions refused for good, for every client of this OAuth.
        self._refusals: Final = _refusals() if grant in _ASSERTION_GRANTS else None
        # The Authorizer of each WebSocket URL, shared by its connections (a new one
        # has the token of the last, refreshed before its handshake if need be; see
        # Authorizer.connecting for what it does not inherit): the last
        # _MAX_WEBSOCKET_SERVERS used.
        self._websocket_authorizers: Final[OrderedDict[str, Authorizer]] = OrderedDict()

    def bind(
        self, server_url: str, *, legacy_fallback: Callable[[], bool] | None = None
    ) -> Authorizer:
        """The runtime state for one client of the server at ``server_url`` (the HTTP
        client calls this; one :class:`OAuth` may serve many clients).
        ``legacy_fallback`` says whether the session may be a ``2025-03-26`` one (see
        :class:`Authorizer`); by default it may."""
        return Authorizer(self, server_url, legacy_fallback=legacy_fallback)

    def _websocket_authorizer(self, url: str) -> Authorizer:
        """The :class:`Authorizer` of the WebSocket server at ``url`` (``ws(s)://``),
        shared by its connections: made, or the least recently used of
        ``_MAX_WEBSOCKET_SERVERS`` forgotten, if need be."""
        found = self._websocket_authorizers.pop(url, None)
        if found is None:
            found = self.bind(url)
        self._websocket_authorizers[url] = found
        if len(self._websocket_authorizers) > _MAX_WEBSOCKET_SERVERS:
            self._websocket_authorizers.popitem(last=False)
        return found

    async def authorize(self, server_url: str, *, legacy_fallback: bool = False) -> None:
        """Authorize for the server at ``server_url`` now, before connecting.

        The server is asked once without a token (a ``POST`` of a ``ping``, as the
        first request of a session would be refused; for a ``ws://``/``wss://`` URL,
        an opening handshake): its ``401`` challenge may name
        the protected-resource metadata, which a server may publish there only
        (``2025-11-25/basic/authorization``, "Protected Resource Metadata Discovery
        Requirements"). A server that takes that request without a token (a ``2xx``,
        or a ``400``: it judged the request itself, as a server with sessions does a
        ``ping`` outside one) needs none: nothing more is done (logged at ``INFO``),
        nor is the user asked. A token the storage kept for that server (see
        :class:`OAuthStorage`, ``load_server``) goes with that request: taken, nothing
        more is done either. Otherwise discovery (that URL, then the well-known ones),
        registration, the user at ``on_authorize`` (bounded by ``authorize_timeout``
        alone, not by any request's timeout) and the token request. The token goes to
        ``storage``, where a client of that server made with this :class:`OAuth` finds
        it at the server's first ``401``.

        Args:
            server_url: the server's MCP endpoint.
            legacy_fallback: for a ``2025-03-26`` server without protected-resource
                metadata, take its origin as the authorization server (that revision's
                rule). Off by default: later revisions require the metadata, and the
                fallback would send a registration to the server's own ``/register``.
                Never for a ``ws(s)`` URL (that rule is for the HTTP transport).

        Raises:
            OAuthError: no token could be obtained (the message says why).
            trio.TooSlowError: over ``authorize_timeout`` (or ``timeout`` for one
                request to the server or the authorization server).
        """
        if is_websocket_url(server_url):
            # A WebSocket server: the probe is a handshake without a token; the token
            # goes to the Authorizer its connections share (see open_websocket_client).
            from ._websocket import probe_handshake  # noqa: PLC0415 (WebSocket users only)

            try:
                refusal = await probe_handshake(
                    server_url, ssl_context=self.ssl_context, timeout=self.timeout
                )
            except ValueError as exc:  # (a malformed URL)
                raise OAuthError(f"the server URL is not valid: {exc}") from exc
            authorizer = self._websocket_authorizer(server_url)
            challenge = None
            if refusal is not None:
                found = authorizer.challenge_of(*refusal)
                challenge = found if found is not None else BearerChallenge()
        else:
            authorizer = self.bind(server_url, legacy_fallback=lambda: legacy_fallback)
            # The token the storage kept for this server, if any, goes with the probe:
            # taken, nothing more is done (no discovery); refused, it is not used again.
            await authorizer.ready()
            challenge = await authorizer.probe()
        sent = authorizer.authorization()
        if challenge is None:
            if sent is None:
                logger.info(
                    "OAuth: %s takes requests without a token: no authorization needed",
                    server_url,
                )
            else:
                logger.info("OAuth: %s takes the token stored for it", server_url)
            return
        with authorizer.connecting():
            await authorizer.challenged(401, challenge, sent)


_USER_AUTHORIZATIONS: Final = 3
"""How many times a ``401`` may have the user authorize (at ``on_authorize``) within
:data:`_USER_AUTHORIZATION_WINDOW`; past that, the request fails (the server keeps
refusing fresh tokens). A silent refresh, or a token found in the storage, is not held
back, nor is a step-up (a ``403``: bounded by ``max_authorizations``)."""
_USER_AUTHORIZATION_WINDOW: Final = 600.0
"""Seconds (on Trio's clock) over which :data:`_USER_AUTHORIZATIONS` counts."""
_MAX_WEBSOCKET_SERVERS: Final = 16
"""How many WebSocket servers' :class:`Authorizer` an :class:`OAuth` keeps."""
_MAX_DPOP_NONCES: Final = 32
"""How many servers' last DPoP nonce an :class:`OAuth` keeps."""


_RETRY_NONCE: Final[ContextVar[tuple[Authorizer, str, bool] | None]] = ContextVar(
    "mcp_trio_dpop_retry_nonce", default=None
)
"""The nonce of the ``use_dpop_nonce`` refusal a task's request got, whose, and whether
the request went again with it (:meth:`Authorizer.took_nonce`): the task that sends a
request frames it again (the pool's ``proof`` hook, or the WebSocket handshake), and
only that task sees this, so requests refused together each go again with their own
nonce (a server may take each nonce once: RFC 9449 section 9). Once the server took
that request (answered it, or refused it for its token: :meth:`Authorizer._retry_taken`),
the nonce is the one of the next proofs; the task's next proof forgets it."""

_TOKEN_ENDPOINT: Final = "as"
_RESOURCE_SERVER: Final = "rs"


def _log_failure(what: str, exc: BaseException) -> None:
    """A storage call (the user's code) raised: the traceback at debug level, one line
    naming the exception's type as a warning (its text may hold a secret)."""
    logger.debug("OAuth: %s", what, exc_info=exc)
    logger.warning("OAuth: %s: %s raised", what, type(exc).__name__)


def _nonce_key(role: str, url: str) -> str:
    """A server's nonces are its origin's (RFC 9449 sections 8 and 9: the server's),
    apart for its token endpoint (``role`` :data:`_TOKEN_ENDPOINT`) and its resources
    (:data:`_RESOURCE_SERVER`): one origin may be both, with two nonces."""
    parts = urlsplit(url)
    return f"{role} {parts.scheme}://{parts.netloc}"


def _never() -> bool:
    return False


def _refusals() -> Refusals:
    # (Its module is loaded already: by whoever made the WorkloadIdentity or the
    # EnterpriseAuthorization.)
    from ._oauth_grants import Refusals  # noqa: PLC0415

    return Refusals()


def _always() -> bool:
    return True


def _why(exc: OAuthError | trio.TooSlowError) -> str:
    return str(exc) if isinstance(exc, OAuthError) else "no answer in time"


def _is_json_object(body: bytes) -> bool:
    """Whether ``body`` is a JSON object (a metadata document, good or bad), not an
    HTML page or anything else an endpoint without metadata may answer with."""
    try:
        return type(loads(body)) is dict
    except JSONDecodeError:
        return False


def _check_pkce(metadata: AuthorizationServerMetadata) -> None:
    """Refuse an authorization server the authorization code grant cannot use: no
    authorization endpoint, or no PKCE ``S256`` in ``code_challenge_methods_supported``
    (``2026-07-28`` security-considerations, "Authorization Code Protection": clients
    "MUST verify PKCE support before proceeding with authorization", and refuse when
    it is absent). :func:`~mcp_sansio.authorization_url` refuses both too; this is
    the same refusal before anything is sent to the authorization server (a Dynamic
    Client Registration, a client saved to the storage).

    Raises:
        OAuthError: it cannot be used.
    """
    check_code_grant_support(metadata)


def _is_redirect_uri(url: str) -> bool:
    """``https``, or ``http`` on a loopback host (``2026-07-28`` security considerations:
    redirect URIs MUST be one or the other): what :func:`check_endpoint` accepts."""
    try:
        check_endpoint(url, "redirect_uri", loopback=True)
    except OAuthError:
        return False
    return True


def _is_https_with_path(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return (
        parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")
    ) and not parts.fragment


@final
class Authorizer:
    """An :class:`OAuth` bound to one server URL: the current token and the flow (see
    the module docs). The HTTP channel (or the WebSocket handshake) drives it; users do
    not need it.

    ``legacy_fallback`` (see :meth:`OAuth.bind`) says whether the session may be a
    ``2025-03-26`` one: only then does a server without protected-resource metadata
    have its authorization server at its own origin (and, with no metadata there
    either, at ``/authorize``, ``/token``, ``/register``). Since ``2025-06-18`` the
    metadata is required. Before the version is negotiated (a ``401`` to
    ``initialize``) a legacy session may still turn out to be ``2025-03-26``, so the
    fallback applies; a modern session, or one that negotiated another version, is
    refused."""

    def __init__(
        self, oauth: OAuth, server_url: str, *, legacy_fallback: Callable[[], bool] | None = None
    ) -> None:
        self.oauth = oauth
        self.server_url = server_url
        # A DPoP proof's htu is the HTTP target URI (RFC 9449 section 4.2, RFC 9110
        # section 7.1), a WebSocket handshake's too (RFC 6455 section 3: the same
        # request): the http(s) twin of a ws(s) URL; the server's nonces are its origin's.
        self._http_url = websocket_http_url(server_url)
        self.token: OAuthToken | None = None
        """The token in use."""
        self.issuer: str | None = None
        """The issuer of the authorization server in use: set with :attr:`metadata`,
        :attr:`resource` and :attr:`client` once a flow obtained a token there."""
        self.resource: str | None = None
        """The resource identifier (as the metadata publishes it) :attr:`token` is for."""
        self.metadata: AuthorizationServerMetadata | None = None
        self.client: ClientCredentials | None = None
        self._legacy_fallback = legacy_fallback if legacy_fallback is not None else _always
        if is_websocket_url(server_url):
            # No 2025-03-26 fallback (the server's origin as its authorization server):
            # that revision's rule is for its HTTP transport; this one has the
            # metadata, found at the http(s) twin of its URL, or nothing.
            self._legacy_fallback = _never
        # An assertion grant's client is only ever the configured one (none for a
        # workload without one): never registered, nor kept from a refresh.
        self._assertion = oauth._grant in _ASSERTION_GRANTS
        # The authorization server the configuration is for, if it says: the one chosen
        # when the protected-resource metadata lists several.
        self._preferred: str | None = None
        if oauth.workload_identity is not None:
            self._preferred = oauth.workload_identity.issuer
        elif oauth.client is not None:
            self._preferred = oauth.client.issuer
        # Plain-http loopback OAuth endpoints only for a server on loopback itself, and
        # endpoints on this machine or a private network only for a server there too
        # (check_endpoint: a remote server must not aim our requests into the network).
        self._loopback = is_loopback(server_url)
        self._internal = oauth.allow_private_networks or is_internal(server_url)
        self._resource_metadata: ProtectedResourceMetadata | None = None
        self._requested_scope: str | None = None
        self._header: bytes | None = None
        # Tokens put in use so far, and the event of the next (see new_token): what a
        # background stream refused with 401 waits for, rather than asking anyone.
        self._tokens_used = 0
        self._token_used = trio.Event()
        self._lock = trio.Lock()
        # The refresh under way (one at a time, shared by whoever needs it): set when it
        # ends. Apart from the flow's lock, so that waiting for a refresh is never
        # waiting for a user.
        self._refreshing: trio.Event | None = None
        # The header of a token just obtained from the authorization server (not a
        # refresh), until the server takes it: a 401 to it is not answered by asking
        # the user again (the server refuses what its authorization server issues).
        self._unconfirmed: bytes | None = None
        # When (trio.current_time()) a 401 last had the user authorize at on_authorize
        # (the last _USER_AUTHORIZATIONS times): see _check_reauthorization.
        self._user_authorized_at: deque[float] = deque(maxlen=_USER_AUTHORIZATIONS)
        # Scope sets the authorization server granted and the server still found
        # insufficient, by resource: never asked for again.
        self._refused_scopes: dict[str, set[frozenset[str]]] = {}
        # Failed flows so far, and the last failure: requests refused together share
        # one flow's outcome rather than each asking the user again.
        self._failures = 0
        self._last_failure: OAuthError | None = None
        # Bumped by a flow before it stores its token, and true while it does: a
        # refresh that saw another generation, or ends meanwhile, drops its outcome
        # (it would overwrite the flow's token in the storage with an older one).
        self._generation = 0
        self._storing = False
        # WebSocket handshakes under way with this (shared) Authorizer: see connecting.
        self._connecting = 0
        # Whether the storage was asked for this server's token (_load_stored: by the
        # first request's ready(), as a refresh), and where a token obtained here was
        # last recorded to be (_remember).
        self._primed = False
        self._recorded: tuple[str, str] | None = None

    # ------------------------------------------------------------------ the channel's side

    def authorization(self) -> bytes | None:
        """The ``Authorization`` header value for the next request (``None``: no token)."""
        return self._header

    def needs_refresh(self) -> bool:
        """Whether the token has expired and can be refreshed before the next request,
        or a refresh is under way, or the storage was not asked yet for the token
        of this server (:meth:`_load_stored`: before the first request)."""
        if self._refreshing is not None or not self._primed:
            return True
        token = self.token
        return (
            token is not None
            and token.refresh_token is not None
            and self.metadata is not None  # (a stored token's: refused, then refreshed)
            and token.expired(self.oauth.clock())
        )

    async def ready(self, nursery: trio.Nursery | None = None) -> None:
        """Before a request: wait for the refresh under way, or refresh the token first
        if it has expired and a refresh token exists. Never asks the user and never
        raises for the peer's sake: a refresh that fails or times out drops the token
        (the server's ``401`` then starts afresh). The refresh runs in ``nursery`` (one
        task, shared: see :meth:`refresh_soon`), else in the caller."""
        if self.needs_refresh():
            await self._shared_refresh(nursery)

    def refresh_soon(self, nursery: trio.Nursery) -> None:
        """Before a one-way message (whose sender, the session's writer, never waits
        for the authorization server): start refreshing an expired token in
        ``nursery``, if it can be and no refresh is under way; the message goes with
        the current token meanwhile."""
        if self._refreshing is None and self.needs_refresh():
            self._start_refresh(nursery)

    @contextmanager
    def connecting(self) -> Iterator[None]:
        """A WebSocket connection's opening handshake (the connections of one URL share
        this Authorizer: its token, issuer, metadata, client and resource). One begun
        while none is under way starts as a new HTTP client would: what the attempts of
        earlier connections learnt (a token refused as just issued, scopes refused) does
        not stop it from asking for another token; connections that overlap share one
        attempt, as the requests of one HTTP client do."""
        if not self._connecting:
            self._unconfirmed = None
            self._user_authorized_at.clear()
            self._refused_scopes.clear()
        self._connecting += 1
        try:
            yield
        finally:
            self._connecting -= 1

    def accepted(self, sent: bytes | None) -> None:
        """The server answered a request that carried ``sent`` without asking for
        authorization: a token just obtained is good. The request sent again with the
        nonce of its ``use_dpop_nonce`` refusal (:meth:`took_nonce`): that nonce is
        the server's, for the next proofs (unless the answer gives another:
        :meth:`answered`)."""
        if sent is not None and sent == self._unconfirmed:
            self._unconfirmed = None
        self._retry_taken()

    def _retry_taken(self) -> None:
        """The server took the request this task sent again with the nonce of its
        ``use_dpop_nonce`` refusal (:meth:`took_nonce`), if it did: it answered it, or
        refused it for something else than its nonce (its token: ``invalid_token``,
        ``insufficient_scope``). That nonce is the one of the next proofs: the request
        going once more after a refresh or a step-up carries it (not the stale one the
        server refused, which past the one nonce retry would fail the request)."""
        retry = _RETRY_NONCE.get()
        if retry is not None and retry[0] is self and retry[2]:
            _RETRY_NONCE.set(None)
            self._keep_nonce(_RESOURCE_SERVER, self._http_url, retry[1])

    async def refreshed(self, sent: bytes | None, nursery: trio.Nursery, timeout: float) -> bool:
        """A one-way message that carried ``sent`` was refused with ``401``: whether it
        may be sent once more, with a token replaced meanwhile or refreshed now. Waits
        at most ``timeout`` seconds for the refresh (the shared one, in ``nursery``),
        never for a flow under way, which may be waiting for the user."""
        self._retry_taken()  # (refused for its token, not its nonce)
        if sent != self._header:
            return self._header is not None
        done = self._refreshing
        if done is None:
            token = self.token
            if token is None or token.refresh_token is None or self.metadata is None:
                return False
            if sent == self._unconfirmed:
                return False  # refused as just issued: another would be refused too
            done = self._start_refresh(nursery)
        with trio.move_on_after(timeout):
            await done.wait()
        return self._header is not None and self._header != sent

    @property
    def tokens_used(self) -> int:
        """How many tokens were put in use so far (obtained, refreshed, or read from the
        storage): what :meth:`new_token` counts from."""
        return self._tokens_used

    async def new_token(self, since: int) -> None:
        """Wait until a token was put in use after ``since`` (a :attr:`tokens_used`),
        by the shared refresh or by a flow some request started: never starts either
        (the legacy GET stream, refused, waits so: see :mod:`mcp_trio._http_client`)."""
        while self._tokens_used == since:
            await self._token_used.wait()

    async def probe(self) -> BearerChallenge | None:
        """The server's challenge to a request with the token in use, if any (a stored
        one), else without one (a ``POST`` of a ``ping``): what :meth:`OAuth.authorize`
        starts from. ``None`` when the server takes it (it answers ``2xx``, or ``400``:
        it judged the request itself, past any authentication); an empty challenge when it answers
        otherwise, or not at all (discovery then tries the well-known URLs). Only the
        response head is read (the body may be an event stream kept open)."""
        oauth = self.oauth
        sent = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ]
        header = self._header  # (a stored token: see OAuth.authorize)
        if header is not None:
            sent.append(("authorization", header.decode("latin-1")))
            proof = self.proof("POST", header)
            if proof is not None:
                sent.append(("dpop", proof.decode("ascii")))
        try:
            status, headers, _ = await oauth_fetch(
                "POST",
                self.server_url,
                headers=sent,
                body=_PROBE,
                ssl_context=oauth.ssl_context,
                timeout=oauth.timeout,
                max_response_size=None,
            )
        except (OAuthError, trio.TooSlowError) as exc:
            logger.info("OAuth: the server did not answer a request without a token: %s", _why(exc))
            return BearerChallenge()
        if 200 <= status < 300 or status == 400:
            return None
        challenge = self.challenge_of(status, headers)
        return challenge if challenge is not None else BearerChallenge()

    @staticmethod
    def challenge_of(status: int, headers: Iterable[tuple[bytes, bytes]]) -> BearerChallenge | None:
        """The challenge of an answer (see :func:`~mcp_sansio.response_challenge`)."""
        if status not in (401, 403):
            return None  # (the common case: no header is decoded)
        values = [v.decode("latin-1") for n, v in headers if n == b"www-authenticate"]
        return response_challenge(status, values)

    async def challenged(
        self,
        status: int,
        challenge: BearerChallenge,
        sent: bytes | None,
        *,
        nursery: trio.Nursery | None = None,
    ) -> None:
        """The server refused a request that carried ``sent`` (its ``Authorization``
        value) with ``challenge``: get a token it should take. Returns when the
        request may be sent again.

        The flow is bounded by ``authorize_timeout``. With ``nursery`` it runs there,
        apart from the caller: cancelling the caller (the request's timeout) does not
        stop it half-way, and its token serves the next requests.

        Raises:
            OAuthError: no token could be obtained (the message says why; an exception
                from ``on_authorize`` or the storage is reported as one).
            trio.TooSlowError: an authorization server request took over ``timeout``,
                or the whole flow over ``authorize_timeout``.
        """
        if challenge.error != "use_dpop_nonce":  # (refused for its token, not its nonce)
            self._retry_taken()
        failures = self._failures
        if nursery is None:
            await self._challenged(status, challenge, sent, failures, None)
            return
        done = trio.Event()
        outcome: list[OAuthError | trio.TooSlowError | None] = []

        async def run() -> None:
            try:
                await self._challenged(status, challenge, sent, failures, nursery)
                outcome.append(None)
            except (OAuthError, trio.TooSlowError) as exc:
                outcome.append(exc)
            finally:
                done.set()

        nursery.start_soon(run, name="mcp oauth authorization")
        await done.wait()
        if not outcome:  # (cancelled: the client is closing)
            raise OAuthError("the authorization was cancelled")
        if outcome[0] is not None:
            raise outcome[0]

    async def _challenged(
        self,
        status: int,
        challenge: BearerChallenge,
        sent: bytes | None,
        failures: int,
        nursery: trio.Nursery | None,
    ) -> None:
        async with self._lock:
            if self._refreshing is not None:
                await self._refreshing.wait()  # (bounded by timeout: no user there)
            if sent != self._header:
                return  # refused a token replaced meanwhile: just send it again
            if failures != self._failures and self._last_failure is not None:
                # A flow for this very refusal failed while this one waited.
                raise OAuthError(str(self._last_failure), error=self._last_failure.error)
            try:
                with trio.fail_after(self.oauth.authorize_timeout):
                    await self._flow(status, challenge, sent, nursery)
                    await self._remember()
            except (OAuthError, trio.TooSlowError) as exc:
                self._failures += 1
                self._last_failure = (
                    exc if isinstance(exc, OAuthError) else OAuthError("it took too long")
                )
                raise
            except Exception as exc:
                # on_authorize, an assertion callable (CallbackFailed says which) or
                # the storage raised (the user closed the browser, a keyring is
                # locked): this flow's failure, never the client's. The message may
                # hold anything: its type only, the rest at DEBUG.
                by = "the storage"
                if isinstance(exc, CallbackFailed):
                    by, exc = exc.by, exc.error
                logger.debug("OAuth: the authorization failed", exc_info=True)
                logger.warning(
                    "OAuth: the authorization failed: %s raised by %s", type(exc).__name__, by
                )
                failure = OAuthError(f"{type(exc).__name__} raised by {by}")
                self._failures += 1
                self._last_failure = failure
                raise failure from exc

    # ------------------------------------------------------------------ the flow

    async def _flow(
        self,
        status: int,
        challenge: BearerChallenge,
        sent: bytes | None,
        nursery: trio.Nursery | None,
    ) -> None:
        """Discovery, registration, authorization, token. Nothing is committed (issuer,
        metadata, resource, client, token) until a token is obtained: a failed flow
        leaves the state as it was."""
        oauth = self.oauth
        step_up = status == 403
        if challenge.error == "use_dpop_nonce":
            # (The channel sends a request once more with the nonce: this is a refusal
            # of that one, or a challenge to a request without a DPoP proof.)
            raise OAuthError("the server keeps asking for a DPoP nonce: refused")
        if not step_up and sent is not None and sent == self._unconfirmed:
            raise OAuthError(
                "the server refused the token its authorization server just issued: "
                "not asking for another one (open a new client to try again)"
            )
        prm, issuer, resource = await self._locate(challenge)
        # The same authorization server: what we know of it is used again. A new one:
        # nothing from the old one is used there (2026-07-28 client-registration,
        # "Authorization Server Binding").
        known = issuer == self.issuer and self.metadata is not None
        if known:
            assert self.metadata is not None
            metadata = self.metadata
        else:
            metadata = await self._discover_server(issuer, legacy=prm is None)
            if self.issuer is not None:
                logger.info("OAuth: the authorization server changed to %s", issuer)
        if self._assertion:
            client = self._configured_client(metadata)
        elif known:
            client = self.client
        else:
            client = None
        previous = self._requested_scope if known else None
        current = self.token if known and resource == self.resource else None
        if not step_up:
            if current is None:
                if await self._try_stored(issuer, metadata, resource, prm, client, previous, sent):
                    return
            elif current.refresh_token is not None:
                await self._shared_refresh(nursery)
                if self._header is not None and self._header != sent:
                    return
                current = self.token  # (None: the refresh failed)
        scope = select_scope(
            challenge=challenge,
            resource_metadata=prm,
            metadata=metadata,
            previous=previous if step_up or current is not None else None,
            offline_access=oauth.offline_access,
        )
        if scope is None and oauth.scope:
            scope = oauth.scope
        if self._assertion:
            from mcp_sansio._oauth_grants import grant_scope  # noqa: PLC0415 (see the imports)

            scope = grant_scope(scope, client=client)
        interactive = oauth._grant == "authorization_code"
        if step_up:
            self._check_step_up(resource, scope, sent, previous)
        elif interactive:
            self._check_reauthorization()
        token, client = await self._new_token(metadata, client, resource, scope)
        # A refresh under way must not store the token this one replaces after it.
        self._generation += 1
        self._storing = True
        try:
            # (Said first: a refused refresh in turn, which forgets the token it read
            # in the storage, must not forget this one instead.)
            with note_save(oauth.storage, resource, issuer):
                await oauth.storage.save_token(resource, issuer, token)
        finally:
            self._storing = False
        self._commit(issuer, metadata, resource, prm, client, token, scope)
        self._unconfirmed = self._header
        if interactive and not step_up:
            self._user_authorized_at.append(trio.current_time())

    async def _locate(
        self, challenge: BearerChallenge
    ) -> tuple[ProtectedResourceMetadata | None, str, str]:
        """The protected-resource metadata (``None``: none, 2025-03-26), the issuer of
        the authorization server to use and the resource identifier.

        Raises:
            OAuthError: no metadata where it is required; an issuer that may not carry
                OAuth traffic.
        """
        prm = await self._discover_resource(challenge)
        if prm is not None:
            issuer = select_authorization_server(prm.authorization_servers, self._preferred)
            resource = prm.resource
        elif self._legacy_fallback():
            # 2025-03-26: no protected-resource metadata; the MCP server's origin.
            issuer = legacy_authorization_server(self.server_url)
            resource = self.server_url
        else:
            raise OAuthError(
                "the server publishes no protected-resource metadata (RFC 9728), which "
                "this protocol version requires"
            )
        check_endpoint(
            issuer, "the authorization server", loopback=self._loopback, internal=self._internal
        )
        return prm, issuer, resource

    async def _try_stored(
        self,
        issuer: str,
        metadata: AuthorizationServerMetadata,
        resource: str,
        prm: ProtectedResourceMetadata | None,
        client: ClientCredentials | None,
        scope: str | None,
        sent: bytes | None,
    ) -> bool:
        """Whether a token the storage kept for ``resource`` at ``issuer`` is now in
        use: as it is, or refreshed if it expired, or is the one refused (``sent``),
        and can be.

        The one refused is the stored token a new client sent from its first request
        (:meth:`_load_stored`), with no metadata then to refresh it by: expired or
        revoked mid-session, its refresh token serves now that discovery has the
        metadata, as for a token a flow obtained, not the user authorizing again. A
        token refreshed counts as just issued: refused too, the request fails (see
        :meth:`_flow`), as after :meth:`_refresh`."""
        oauth = self.oauth
        stored = self._usable(await oauth.storage.load_token(resource, issuer))
        if stored is None:
            return False
        if client is None and issuer == self.issuer:
            client = self.client  # (the one stored with the token _load_stored put in use)
        issued = False
        if self._encode(stored) == sent or stored.expired(oauth.clock()):
            if stored.refresh_token is None or (client is None and self._assertion):
                return False  # (an assertion grant refreshes with its configured client)
            stored, client, issued = await self._renew(
                stored, metadata, issuer, resource, client, _always
            )
            if stored is None or stored.expired(oauth.clock()):
                return False
        self._commit(issuer, metadata, resource, prm, client, stored, scope)
        if issued:
            self._unconfirmed = self._header
        return True

    async def _new_token(
        self,
        metadata: AuthorizationServerMetadata,
        client: ClientCredentials | None,
        resource: str,
        scope: str | None,
    ) -> tuple[OAuthToken, ClientCredentials | None]:
        """A token from the configured grant, and the client that obtained it
        (registered first if need be, but for an assertion grant)."""
        grant = self.oauth._grant
        if grant in _ASSERTION_GRANTS:
            return await self._assertion_grant(metadata, client, resource, scope), client
        if grant == "authorization_code":
            _check_pkce(metadata)  # (before a registration the flow could not use)
        client = await self._register(metadata, scope, client)
        if grant == "client_credentials":
            return await self._client_credentials(metadata, client, resource, scope), client
        return await self._authorize(metadata, client, resource, scope), client

    def _commit(
        self,
        issuer: str,
        metadata: AuthorizationServerMetadata,
        resource: str,
        prm: ProtectedResourceMetadata | None,
        client: ClientCredentials | None,
        token: OAuthToken,
        scope: str | None,
    ) -> None:
        """A flow succeeded: its authorization server, resource, client and token, all
        at once."""
        if issuer != self.issuer:
            self._unconfirmed = None
        if self.oauth._grant == "workload_identity":
            from mcp_sansio._oauth_grants import grant_token  # noqa: PLC0415 (see the imports)

            token = grant_token(token, client=client)  # (a stored one too)
        self.issuer, self.metadata, self.client = issuer, metadata, client
        self.resource, self._resource_metadata = resource, prm
        self._requested_scope = scope
        self._use(token)

    def _check_step_up(
        self, resource: str, scope: str | None, sent: bytes | None, granted_scope: str | None
    ) -> None:
        """Refuse a step-up that asks for what was granted already, or refused before
        (``2025-11-25`` authorization, "Scope Challenge Handling": retries are bounded)."""
        wanted = frozenset((scope or "").split())
        refused = self._refused_scopes.setdefault(resource, set())
        granted = frozenset((granted_scope or "").split())
        if sent is not None and sent == self._header and wanted == granted:
            refused.add(wanted)
        if wanted in refused:
            raise OAuthError(
                f"the server still asks for scope {scope!r}, which was granted already: "
                "not asking again"
            )

    def _check_reauthorization(self) -> None:
        """Refuse to have the user authorize for a ``401`` when they did so
        :data:`_USER_AUTHORIZATIONS` times within :data:`_USER_AUTHORIZATION_WINDOW`: a
        server that refuses the tokens it is given that soon (it took each one once,
        say; or their refresh fails, which drops them) would have the user authorize
        for every request."""
        times = self._user_authorized_at
        if len(times) < _USER_AUTHORIZATIONS:
            return
        elapsed = trio.current_time() - times[0]
        if elapsed < _USER_AUTHORIZATION_WINDOW:
            raise OAuthError(
                "the server keeps refusing fresh tokens: the user authorized "
                f"{_USER_AUTHORIZATIONS} times in {elapsed:.0f} s; not asking again "
                f"within {_USER_AUTHORIZATION_WINDOW:.0f} s of the first"
            )

    @staticmethod
    def _encode(token: OAuthToken) -> bytes:
        scheme = b"DPoP " if token.dpop_jkt is not None else b"Bearer "
        return scheme + token.access_token.encode()

    def _usable(self, token: OAuthToken | None) -> OAuthToken | None:
        """``token``, unless it is bound to a DPoP key this client does not hold (a
        stored token of another process, or of a client without ``dpop``)."""
        if token is None or token.dpop_jkt is None or token.dpop_jkt == self.oauth._dpop_jkt:
            return token
        logger.info("OAuth: a stored DPoP token is bound to another key: not used")
        return None

    # ------------------------------------------------------------------ DPoP, assertions

    def proof(self, method: str, authorization: bytes) -> bytes | None:
        """The ``DPoP`` header of a request to the server that carries
        ``authorization`` (``None`` unless that is a DPoP token): a fresh proof
        (RFC 9449 section 7) with ``ath`` and the server's last nonce."""
        if not authorization.startswith(b"DPoP "):
            return None
        key = self.oauth._dpop_key
        assert key is not None  # (a DPoP token is only ever used with our key)
        nonce = None
        retry = _RETRY_NONCE.get()
        if retry is not None and retry[0] is self:
            whose, given, sent = retry
            # The request sent again: its refusal's nonce (then, see accepted); any
            # later request of the task: the server's last, as usual.
            _RETRY_NONCE.set(None if sent else (whose, given, True))
            nonce = None if sent else given
        return self._dpop_proof(
            key,
            method,
            self._http_url,
            authorization[5:].decode("ascii"),
            role=_RESOURCE_SERVER,
            nonce=nonce,
        ).encode("ascii")

    def took_nonce(self, sent: bytes | None, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """The server refused a request that carried ``sent`` with a ``401``
        ``use_dpop_nonce`` challenge (RFC 9449 section 9): whether it gave a nonce, so
        that the request may be sent once more. The next proof this task makes (that
        request's, sent again) carries this very nonce: with requests refused at once,
        the origin's last nonce is another's, which a server that takes each nonce
        once refuses. It becomes the one of later proofs once the server took that
        request (:meth:`accepted`): before, another request would spend it first."""
        if sent is None or not sent.startswith(b"DPoP "):
            return False
        pairs = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        nonce = dpop_nonce_of(401, pairs, error="use_dpop_nonce")
        if nonce is None:
            return False
        _RETRY_NONCE.set((self, nonce, False))
        return True

    def answered(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """The server answered a request that carried a DPoP token: keep the
        ``DPoP-Nonce`` it gave, if any (RFC 9449 section 9: for the next proofs).
        Called for DPoP requests only."""
        for name, value in headers:
            if name == b"dpop-nonce":
                nonce = dpop_nonce_header([("dpop-nonce", value.decode("latin-1"))])
                if nonce is not None:
                    self._keep_nonce(_RESOURCE_SERVER, self._http_url, nonce)
                return

    def _keep_nonce(self, role: str, url: str, nonce: str) -> None:
        nonces = self.oauth._dpop_nonces
        origin = _nonce_key(role, url)
        nonces.pop(origin, None)
        nonces[origin] = nonce
        if len(nonces) > _MAX_DPOP_NONCES:
            nonces.popitem(last=False)

    def _dpop_proof(
        self,
        key: SigningKey,
        method: str,
        url: str,
        access_token: str | None = None,
        *,
        role: str,
        nonce: str | None = None,
    ) -> str:
        """A proof with ``nonce``, else the server's last one (if any)."""
        from ._signing import new_jti  # noqa: PLC0415 (loaded with the key)

        if nonce is None:
            nonce = self.oauth._dpop_nonces.get(_nonce_key(role, url))
        return dpop_proof(
            jwk=key.public_jwk,
            alg=key.alg,
            sign=key.sign,
            method=method,
            url=url,
            now=self.oauth.clock(),
            jti=new_jti(),
            access_token=access_token,
            nonce=nonce,
        )

    def _client_assertion(self, client: ClientCredentials) -> Callable[[str], str] | None:
        """What signs ``client``'s ``private_key_jwt`` assertions (for an audience), if
        it is the configured client with a key."""
        key = self.oauth._client_key
        if key is None or client is not self.oauth.client:
            return None
        clock = self.oauth.clock

        def assertion(audience: str) -> str:
            from ._signing import new_jti  # noqa: PLC0415 (loaded with the key)

            return client_assertion(
                client_id=client.client_id,
                audience=audience,
                alg=key.alg,
                kid=key.kid,
                sign=key.sign,
                now=clock(),
                jti=new_jti(),
            )

        return assertion

    async def _token_post(
        self,
        metadata: AuthorizationServerMetadata,
        headers: list[tuple[str, str]],
        body: bytes,
        **parse: str | None,
    ) -> OAuthToken:
        """POST a token request and read its answer. With ``dpop`` and an authorization
        server that takes ``ES256`` proofs, the request carries one (RFC 9449 section
        5), and is sent once more with the nonce of a ``use_dpop_nonce`` answer
        (section 8); the token must then be a DPoP one.

        Raises:
            OAuthError: refused, or malformed (see :func:`parse_token_response`).
            trio.TooSlowError: over ``timeout``.
        """
        oauth, endpoint = self.oauth, metadata.token_endpoint
        key = oauth._dpop_key
        algs = metadata.dpop_signing_alg_values_supported
        if key is None or algs is None or key.alg not in algs:
            status, _, answer = await self._fetch("POST", endpoint, headers=headers, body=body)
            return parse_token_response(status, answer, now=oauth.clock(), **parse)
        for attempt in range(2):
            proof = self._dpop_proof(key, "POST", endpoint, role=_TOKEN_ENDPOINT)
            status, got, answer = await self._fetch(
                "POST", endpoint, headers=[*headers, ("dpop", proof)], body=body
            )
            pairs = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in got]
            nonce = dpop_nonce_of(status, pairs, body=answer)
            if nonce is None:
                # RFC 9449 section 8.2: a nonce on any other answer is for the next one.
                given = dpop_nonce_header(pairs)
                if given is not None:
                    self._keep_nonce(_TOKEN_ENDPOINT, endpoint, given)
                break
            self._keep_nonce(_TOKEN_ENDPOINT, endpoint, nonce)
            if attempt:
                raise OAuthError(
                    "the authorization server asked for a DPoP nonce again after the "
                    "request carried the one it gave: refused"
                )
        return parse_token_response(
            status, answer, now=oauth.clock(), dpop_jkt=oauth._dpop_jkt, **parse
        )

    def _use(self, token: OAuthToken | None) -> None:
        self.token = token
        self._header = None if token is None else self._encode(token)
        if token is not None:
            self._primed = True  # (one in use: the storage need not be asked for one)
            self._tokens_used += 1
            self._token_used.set()
            self._token_used = trio.Event()

    async def _discover_resource(
        self, challenge: BearerChallenge
    ) -> ProtectedResourceMetadata | None:
        """The protected-resource metadata (``None`` when the server publishes none).

        Raises:
            OAuthError: a document that exists but is unacceptable (for another
                resource, malformed): never silently skipped for the next URL.
        """
        for url in protected_resource_metadata_urls(self.server_url, challenge):
            check_endpoint(
                url,
                "the protected-resource metadata URL",
                loopback=self._loopback,
                internal=self._internal,
            )
            status, _, body = await self._fetch("GET", url)
            if status == 200:
                return parse_protected_resource_metadata(body, self.server_url)
            if status >= 500:
                raise OAuthError(f"the protected-resource metadata at {url} failed: {status}")
        return None

    async def _discover_server(self, issuer: str, *, legacy: bool) -> AuthorizationServerMetadata:
        """The authorization server's metadata; for a ``2025-03-26`` server (``legacy``:
        no protected-resource metadata) without any, the default endpoints.

        Every URL is tried in the spec's priority order
        (``2026-07-28`` authorization-server-discovery: the client "MUST try" them all)
        until one answers ``200`` with a JSON object: an endpoint that fails (``5xx``),
        has nothing (``404``) or answers with something else (a web application's
        catch-all HTML page) is passed over for the next. A JSON object is the
        metadata: an unacceptable one (another ``issuer``, a bad endpoint) is refused
        outright, never passed over. The legacy default endpoints stand in only when no
        URL failed (a ``5xx`` says the metadata may exist).

        Raises:
            OAuthError: none found (the message names every URL tried, escaped by
                ``repr``, and what it answered), or a document that is unacceptable.
        """
        tried: list[str] = []
        failed = False
        for url in authorization_server_metadata_urls(issuer):
            status, _, body = await self._fetch("GET", url)
            if status == 200:
                if _is_json_object(body):
                    return AuthorizationServerMetadata.parse(
                        body, issuer, loopback=self._loopback, internal=self._internal
                    )
                tried.append(f"{url!r}: 200 but not a JSON object")
            else:
                failed = failed or status >= 500
                tried.append(f"{url!r}: {status}")
        if legacy and not failed:
            return AuthorizationServerMetadata.fallback(issuer)
        raise OAuthError(
            f"the authorization server {issuer!r} publishes no metadata ({'; '.join(tried)})"
        )

    async def _register(
        self,
        metadata: AuthorizationServerMetadata,
        scope: str | None,
        current: ClientCredentials | None,
    ) -> ClientCredentials:
        """The client's credentials at this authorization server (``current``: the
        ones in use there), in the spec's order (``2026-07-28`` client-registration):
        pre-registered, Client ID Metadata Document, a registration kept from before,
        Dynamic Client Registration. The caller commits them."""
        oauth, issuer = self.oauth, metadata.issuer
        if current is not None:
            return current
        client = self._configured_client(metadata)
        if client is None:
            client = await oauth.storage.load_client(issuer)
            if client is None or client.issuer != issuer:
                client = await self._dynamic_registration(metadata, scope)
                await oauth.storage.save_client(issuer, client)
        return client

    def _configured_client(self, metadata: AuthorizationServerMetadata) -> ClientCredentials | None:
        """The client the configuration names for this authorization server: ``client``,
        else the Client ID Metadata Document where the authorization server supports
        them (``None``: neither). The only client of an assertion grant: never one
        registered (from the storage, or Dynamic Client Registration), which neither the
        workload's JWT nor the IdP's ID-JAG can name.

        Raises:
            OAuthError: ``client`` is bound to another authorization server.
        """
        oauth, issuer = self.oauth, metadata.issuer
        if oauth.client is not None:
            if oauth.client.issuer not in (None, issuer):
                raise OAuthError(
                    f"the pre-registered client is for {oauth.client.issuer!r}, but the "
                    f"server now uses the authorization server {issuer!r}"
                )
            return oauth.client
        if oauth.client_metadata_url is not None and metadata.client_id_metadata_document_supported:
            return ClientCredentials(
                client_id=oauth.client_metadata_url, token_endpoint_auth_method="none"
            )
        return None

    async def _dynamic_registration(
        self, metadata: AuthorizationServerMetadata, scope: str | None
    ) -> ClientCredentials:
        endpoint = metadata.registration_endpoint
        if endpoint is None:
            raise OAuthError(
                "the authorization server offers no client registration: pass "
                "pre-registered credentials (client=) or a client_metadata_url"
            )
        oauth = self.oauth
        body = registration_body(
            client_name=oauth.client_name,
            redirect_uris=[oauth.redirect_uri] if oauth.redirect_uri is not None else [],
            metadata=metadata,
            scope=scope,
            application_type=oauth.application_type,
        )
        status, _, answer = await self._fetch(
            "POST",
            endpoint,
            headers=[("content-type", "application/json"), ("accept", "application/json")],
            body=dumps(body),
        )
        if status not in (200, 201):
            raise OAuthError(f"client registration was refused: status {status}")
        return parse_registration(answer, metadata.issuer)

    async def _authorize(
        self,
        metadata: AuthorizationServerMetadata,
        client: ClientCredentials,
        resource: str,
        scope: str | None,
    ) -> OAuthToken:
        oauth = self.oauth
        assert oauth.on_authorize is not None and oauth.redirect_uri is not None
        pkce = new_pkce()
        state = secrets.token_urlsafe(24)
        url = authorization_url(
            metadata,
            client_id=client.client_id,
            redirect_uri=oauth.redirect_uri,
            pkce=pkce,
            state=state,
            resource=resource,
            scope=scope,
        )
        assert metadata.authorization_endpoint is not None
        check_endpoint(
            metadata.authorization_endpoint,
            "the authorization endpoint",
            loopback=self._loopback,
            internal=self._internal,
        )
        redirect = await call_user(oauth.on_authorize, "on_authorize", url)
        if not isinstance(redirect, str):
            raise OAuthError(f"on_authorize returned {type(redirect).__name__}, not a str")
        code = parse_authorization_response(
            redirect, state=state, metadata=metadata, redirect_uri=oauth.redirect_uri
        )
        headers, body = token_request(
            metadata,
            client,
            grant_type="authorization_code",
            resource=resource,
            code=code,
            code_verifier=pkce.verifier,
            redirect_uri=oauth.redirect_uri,
            client_assertion=self._client_assertion(client),
        )
        return await self._token_post(metadata, headers, body, requested_scope=scope)

    async def _client_credentials(
        self,
        metadata: AuthorizationServerMetadata,
        client: ClientCredentials,
        resource: str,
        scope: str | None,
    ) -> OAuthToken:
        headers, body = token_request(
            metadata,
            client,
            grant_type="client_credentials",
            resource=resource,
            scope=scope,
            client_assertion=self._client_assertion(client),
        )
        return await self._token_post(metadata, headers, body, requested_scope=scope)

    async def _assertion_grant(
        self,
        metadata: AuthorizationServerMetadata,
        client: ClientCredentials | None,
        resource: str,
        scope: str | None,
    ) -> OAuthToken:
        """Workload identity or enterprise-managed authorization (:mod:`._oauth_grants`)."""
        from ._oauth_grants import enterprise_token, workload_token  # noqa: PLC0415

        oauth = self.oauth
        assert oauth._refusals is not None
        if oauth.workload_identity is not None:
            return await workload_token(
                oauth.workload_identity,
                metadata,
                client,
                resource=resource,
                scope=scope,
                fetch=self._fetch,
                now=oauth.clock,
                refusals=oauth._refusals,
            )
        assert oauth.enterprise is not None
        if client is None:  # (only client_metadata_url, which this one does not support)
            raise OAuthError(
                f"the authorization server {metadata.issuer!r} does not support Client ID "
                "Metadata Documents: enterprise-managed authorization there needs client="
            )
        return await enterprise_token(
            oauth.enterprise,
            metadata,
            client,
            resource=resource,
            scope=scope,
            fetch=self._fetch,
            discover=partial(self._discover_server, legacy=False),
            now=oauth.clock,
            loopback=self._loopback,
            internal=self._internal,
            refusals=oauth._refusals,
        )

    def _start_refresh(self, nursery: trio.Nursery) -> trio.Event:
        """Start the shared refresh in ``nursery``; its end is the event returned."""
        assert self._refreshing is None
        done = self._refreshing = trio.Event()
        nursery.start_soon(self._run_refresh, done, name="mcp oauth refresh")
        return done

    async def _run_refresh(self, done: trio.Event) -> None:
        try:
            await self._refresh()
        finally:
            self._refreshing = None
            done.set()

    async def _shared_refresh(self, nursery: trio.Nursery | None) -> None:
        """Join the refresh under way, or refresh now (in ``nursery``, else here)."""
        done = self._refreshing
        if done is None:
            if nursery is not None:
                done = self._start_refresh(nursery)
            else:
                self._refreshing = done = trio.Event()
                await self._run_refresh(done)
        await done.wait()

    async def _refresh(self) -> None:
        """Replace the token in use (see :meth:`_renew`); on refusal (or no answer
        within ``timeout``) forget it. A token replaced meanwhile (a flow finished, or
        is storing its token) is kept: the refresh's outcome is dropped, in memory and
        in the storage. A token obtained by refresh counts as just issued (a ``401`` to
        it is not answered by authorizing again). Never raises (but Cancelled)."""
        if not self._primed:
            await self._load_stored()
            return
        token, metadata, client = self.token, self.metadata, self.client
        issuer, resource = self.issuer, self.resource
        if token is None or token.refresh_token is None or metadata is None or issuer is None:
            return
        generation = self._generation

        def current() -> bool:
            return self.token is token and self._generation == generation and not self._storing

        try:
            new, client, issued = await self._renew(
                token, metadata, issuer, resource, client, current
            )
        except Exception as exc:  # (from the storage)
            _log_failure("the token could not be refreshed", exc)
            new, issued = None, False
        if not current():
            return  # replaced meanwhile
        if new is not None and self.client is None:
            self.client = client
        self._use(new)
        if issued:
            self._unconfirmed = self._header

    async def _renew(
        self,
        token: OAuthToken,
        metadata: AuthorizationServerMetadata,
        issuer: str,
        resource: str | None,
        client: ClientCredentials | None,
        current: Callable[[], bool],
    ) -> tuple[OAuthToken | None, ClientCredentials | None, bool]:
        """A token to replace ``token`` (expired, with a refresh token): the one in the
        storage if another client of it stored a newer one there (refresh tokens are
        single-use: the one in ``token`` may be spent), else one refreshed now and
        stored. Clients of one storage take turns (:func:`._oauth_turn.refresh_turn`,
        across threads and Trio runs too): the one that comes second waits for the
        first, then finds its token, rather than sending the same refresh token again
        (which an authorization server that detects reuse answers by revoking both:
        RFC 9700 section 4.14.2). After a refusal the storage is read again, and
        forgets ``token`` only if it still holds that very token. The storage is
        written only while ``current()``.

        Returns:
            The new token (``None``: none), the client, and whether the authorization
            server issued the token just now.

        Raises:
            Exception: from the storage.
        """
        storage, clock = self.oauth.storage, self.oauth.clock
        # One refresh at a time of this token of the storage, in the whole process: a
        # client that comes second takes the token the first one stored (no resource:
        # nothing stored, nobody to take turns with).
        taking: AbstractAsyncContextManager[Turn | None] = (
            nullcontext() if resource is None else refresh_turn(storage, resource, issuer)
        )
        async with taking as turn:
            for _ in range(2):  # (the token in the storage may need a refresh itself)
                stored = None if resource is None else await storage.load_token(resource, issuer)
                if stored is not None and stored != token and self._usable(stored) is not None:
                    if not stored.expired(clock()):
                        return stored, client, False  # another client refreshed it
                    if stored.refresh_token is None:
                        break
                    token = stored
                    continue
                break
            try:
                new, client = await self._refresh_exchange(token, metadata, resource, client)
            except (OAuthError, trio.TooSlowError) as exc:
                logger.info("OAuth: the token could not be refreshed: %s", _why(exc))
                saves = None if turn is None else turn.saves
                stored = None if resource is None else await storage.load_token(resource, issuer)
                if stored is not None and stored != token and self._usable(stored) is not None:
                    if not stored.expired(clock()):
                        return stored, client, False  # another client refreshed it meanwhile
                    return None, client, False
                # Forget only the very token refused: another one there (bound to another
                # process's DPoP key, say) is not this client's to erase, nor one a flow
                # began to save since the storage was read, or is saving still (begun
                # before, it may land after the read: slow writes). No checkpoint from this
                # check to the save: a later one comes after it.
                if stored is not None and stored == token and current():
                    assert resource is not None and turn is not None
                    if turn.saves == saves and not turn.saving:
                        await self._store(resource, issuer, None)
                return None, client, False
            if resource is not None and current():
                await self._store(resource, issuer, new)
            return new, client, True

    async def _load_stored(self) -> None:
        """Before the first request: put in use the token the storage kept for this
        server (its ``load_server``: the resource and issuer a flow of an earlier client
        recorded), unexpired, so that the request carries it, with no ``401`` and no
        discovery first. Nothing else is known yet (the authorization server's
        metadata): it is not refreshed ahead of its expiry, and a ``401`` to it starts
        the flow as without it, which refreshes it if it can (:meth:`_try_stored`),
        else has a new token obtained. Never raises (but Cancelled): a storage that
        fails is logged."""
        self._primed = True
        storage, url = self.oauth.storage, self.server_url
        load = getattr(storage, "load_server", None)
        if load is None:
            return
        try:
            found = await load(url)
            if found is None:
                return
            resource, issuer = found
            token = self._usable(await storage.load_token(resource, issuer))
            if token is None or token.expired(self.oauth.clock()):
                return
            client = None if self._assertion else await storage.load_client(issuer)
        except Exception as exc:
            _log_failure("the stored token could not be read", exc)
            return
        if self.token is not None:
            return  # (a flow put one in use meanwhile)
        if self.oauth._grant == "workload_identity":
            from mcp_sansio._oauth_grants import grant_token  # noqa: PLC0415 (see the imports)

            token = grant_token(token, client=client)
        self.issuer, self.resource, self.client = issuer, resource, client
        self._recorded = (resource, issuer)
        logger.debug("OAuth: using the token stored for %s", url)
        self._use(token)

    async def _remember(self) -> None:
        """A flow put a token in use: record where it is for this server's URL (the
        storage's ``save_server``, if it has one), for the next client's first request
        (:meth:`_load_stored`). A storage that fails is logged."""
        resource, issuer = self.resource, self.issuer
        save = getattr(self.oauth.storage, "save_server", None)
        if save is None or resource is None or issuer is None:
            return
        if self._recorded == (resource, issuer):
            return
        try:
            await save(self.server_url, resource, issuer)
        except Exception as exc:
            _log_failure("the server entry could not be stored", exc)
            return
        self._recorded = (resource, issuer)

    async def _store(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        """Save a refresh's outcome: a storage that fails is logged, not raised."""
        try:
            await self.oauth.storage.save_token(resource, issuer, token)
        except Exception as exc:
            _log_failure("the token could not be stored", exc)

    async def _refresh_exchange(
        self,
        token: OAuthToken,
        metadata: AuthorizationServerMetadata,
        resource: str | None,
        client: ClientCredentials | None,
    ) -> tuple[OAuthToken, ClientCredentials]:
        """The refresh token request: the new token and the client that asked.

        Raises:
            OAuthError: refused, or malformed.
            trio.TooSlowError: over ``timeout``.
        """
        assert token.refresh_token is not None
        if client is None:
            # An assertion grant refreshes with its configured client only, never a
            # registration of its own: without one it keeps no refresh token.
            assert not self._assertion
            client = await self._register(metadata, token.scope, None)
        headers, body = token_request(
            metadata,
            client,
            grant_type="refresh_token",
            resource=resource,
            refresh_token=token.refresh_token,
            client_assertion=self._client_assertion(client),
        )
        new = await self._token_post(
            metadata,
            headers,
            body,
            requested_scope=token.scope,
            previous_refresh_token=token.refresh_token,
        )
        return new, client

    async def _fetch(
        self,
        method: str,
        url: str,
        *,
        headers: Iterable[tuple[str, str]] = (("accept", "application/json"),),
        body: bytes = b"",
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        oauth = self.oauth
        check_endpoint(url, "the OAuth endpoint", loopback=self._loopback, internal=self._internal)
        return await oauth_fetch(
            method,
            url,
            headers=headers,
            body=body,
            ssl_context=oauth.ssl_context,
            timeout=oauth.timeout,
            max_response_size=oauth.max_response_size,
        )


async def oauth_fetch(
    method: str,
    url: str,
    *,
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = 30.0,
    max_response_size: int | None = _DEFAULT_MAX_RESPONSE,
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One HTTP request on a new connection (redirects are not followed), for OAuth
    metadata and authorization server endpoints.

    Returns:
        ``(status, headers, body)``; with ``max_response_size=None`` the head only (the
        body is not read: the connection is closed).

    Raises:
        OAuthError: the URL is not ``https`` (nor loopback: whether a loopback URL is
            acceptable is the caller's to check, see :func:`check_endpoint`), the
            connection failed, or the body is over ``max_response_size`` bytes.
        trio.TooSlowError: it took over ``timeout`` seconds.
    """
    check_endpoint(url, "the OAuth endpoint", loopback=True)
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = HttpRequest(
        method=method,
        target=target,
        headers=[("host", parts.netloc.rpartition("@")[2]), *headers],
        body=body,
    )
    transport = HttpTransportConfig(connect_timeout=timeout, max_idle_connections=0)
    pool = Pool(url, transport, ssl_context=ssl_context)
    with trio.fail_after(timeout):
        try:
            wire = await pool.send(request, None)
        except WireError as exc:
            raise OAuthError(f"{method} {url} failed: {exc}") from exc
        try:
            head = await pool.read_head(wire)
            chunks: list[bytes] = []
            size = 0
            while max_response_size is not None:
                event = await wire.next_event()
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > max_response_size:
                        raise OAuthError(
                            f"the response of {url} is over {max_response_size} bytes: refused"
                        )
                    chunks.append(bytes(event.data))
                else:
                    break
        except (WireError, h11.RemoteProtocolError) as exc:
            raise OAuthError(f"{method} {url} failed: {exc}") from exc
        finally:
            await wire.aclose()
    return head.status_code, list(head.headers), b"".join(chunks)


async def fetch_authorization_redirect(
    url: str, *, ssl_context: ssl.SSLContext | None = None, timeout: float = 30.0
) -> str:
    """An ``on_authorize`` for an authorization server that redirects at once, with no
    user interaction (test servers, the conformance suite, some machine-to-machine
    setups): GET the authorization URL without following the redirect and return its
    ``Location``. Not for real users, who must see and approve the request.

    Raises:
        OAuthError: the answer is not a redirect.
    """
    status, headers, _ = await oauth_fetch("GET", url, ssl_context=ssl_context, timeout=timeout)
    location = next((v.decode("latin-1") for n, v in headers if n == b"location"), None)
    if status not in (301, 302, 303, 307, 308) or not location:
        raise OAuthError(f"the authorization endpoint answered {status}, not a redirect")
    return location

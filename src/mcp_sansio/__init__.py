"""mcp_sansio: the Model Context Protocol as a sans-IO state machine.

No I/O, no clock, no tasks: bytes in, events out, bytes to send. Drive it from Trio
(:mod:`mcp_trio`), asyncio, threads or plain blocking code.

Events carry decoded JSON (the hot path never builds typed objects); ask for the typed
view with ``structure_params(event.params, mcp_sansio.types.CallToolRequestParams)``,
which raises a -32602 :class:`RemoteProtocolError` with a readable message (answer the
request with it).

A :class:`Connection` is not thread-safe: drive it from one thread at a time (one
event loop, or a lock around every call and the drain of its output after it).

``Event`` is the union of every event a :class:`Connection` returns (a type alias:
``help(Event)`` shows the union type's page, not this). Each is a frozen attrs class:

* :class:`RequestReceived` -- the peer's request, for the application to answer once;
* :class:`NotificationReceived` -- the peer's notification;
* :class:`SubscriptionNotificationReceived` -- one on a modern ``subscriptions/listen``;
* :class:`ResultReceived` / :class:`ErrorReceived` -- the answer to a request of ours;
* :class:`InputRequired` -- a modern server asks for input before it answers (MRTR);
* :class:`ProgressReceived` -- progress on a request of ours;
* :class:`RequestCancelled` -- the peer cancelled its request (answer it all the same);
* :class:`RequestTimedOut` -- a request of ours reached its deadline;
* :class:`ResponseIgnored` -- an answer to no request of ours in flight (late, unknown);
* :class:`InvalidMessageReceived` -- the peer sent something broken (answered if it can be);
* :class:`HandshakeCompleted` -- the era and version are settled;
* :class:`ConnectionClosed` -- the input ended (what will never be answered).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import ConnectionConfig as ConnectionConfig
from ._config import ConnectionConfigOptions as ConnectionConfigOptions
from ._config import Role as Role
from ._conn_receive import undeclared_input_request as undeclared_input_request
from ._connection import Connection as Connection
from ._errors import ErrorCode as ErrorCode
from ._errors import ErrorData as ErrorData
from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import ProtocolError as ProtocolError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._events import ConnectionClosed as ConnectionClosed
from ._events import ErrorReceived as ErrorReceived
from ._events import Event as Event
from ._events import HandshakeCompleted as HandshakeCompleted
from ._events import InputRequired as InputRequired
from ._events import InvalidMessageReceived as InvalidMessageReceived
from ._events import NotificationReceived as NotificationReceived
from ._events import ProgressReceived as ProgressReceived
from ._events import RequestCancelled as RequestCancelled
from ._events import RequestReceived as RequestReceived
from ._events import RequestTimedOut as RequestTimedOut
from ._events import ResponseIgnored as ResponseIgnored
from ._events import ResultReceived as ResultReceived
from ._events import SubscriptionNotificationReceived as SubscriptionNotificationReceived
from ._framing import LineSplitter as LineSplitter
from ._framing import MessageTooLarge as MessageTooLarge
from ._framing import SSEDecoder as SSEDecoder
from ._framing import SSEEvent as SSEEvent
from ._framing import encode_line as encode_line
from ._framing import encode_sse_comment as encode_sse_comment
from ._framing import encode_sse_event as encode_sse_event
from ._jsonrpc import RequestId as RequestId
from ._state import LifecycleState as LifecycleState
from ._versions import ALL_VERSIONS as ALL_VERSIONS
from ._versions import LATEST_LEGACY_VERSION as LATEST_LEGACY_VERSION
from ._versions import LATEST_VERSION as LATEST_VERSION
from ._versions import LEGACY_VERSIONS as LEGACY_VERSIONS
from ._versions import MODERN_VERSIONS as MODERN_VERSIONS
from ._versions import Era as Era

if TYPE_CHECKING:
    from ._http_auth import ProtectedResourceMetadata as ProtectedResourceMetadata
    from ._oauth import AuthorizationServerMetadata as AuthorizationServerMetadata
    from ._oauth import BearerChallenge as BearerChallenge
    from ._oauth import ClientCredentials as ClientCredentials
    from ._oauth import OAuthError as OAuthError
    from ._oauth import OAuthToken as OAuthToken
    from ._oauth import PkcePair as PkcePair
    from ._oauth import TokenEndpointAuthMethod as TokenEndpointAuthMethod
    from ._oauth import authorization_server_metadata_urls as authorization_server_metadata_urls
    from ._oauth import authorization_url as authorization_url
    from ._oauth import check_endpoint as check_endpoint
    from ._oauth import is_internal as is_internal
    from ._oauth import is_loopback as is_loopback
    from ._oauth import legacy_authorization_server as legacy_authorization_server
    from ._oauth import new_pkce as new_pkce
    from ._oauth import parse_authorization_response as parse_authorization_response
    from ._oauth import parse_bearer_challenge as parse_bearer_challenge
    from ._oauth import parse_protected_resource_metadata as parse_protected_resource_metadata
    from ._oauth import parse_registration as parse_registration
    from ._oauth import parse_token_response as parse_token_response
    from ._oauth import protected_resource_metadata_urls as protected_resource_metadata_urls
    from ._oauth import registration_body as registration_body
    from ._oauth import resource_matches as resource_matches
    from ._oauth import response_challenge as response_challenge
    from ._oauth import select_authorization_server as select_authorization_server
    from ._oauth import select_scope as select_scope
    from ._oauth import token_request as token_request
    from ._oauth_grants import AssertionRefusal as AssertionRefusal
    from ._oauth_grants import check_grant_issuer as check_grant_issuer
    from ._oauth_grants import grant_scope as grant_scope
    from ._oauth_grants import grant_token as grant_token
    from ._oauth_grants import jwt_bearer_request as jwt_bearer_request
    from ._oauth_grants import parse_token_exchange_response as parse_token_exchange_response
    from ._oauth_grants import token_exchange_request as token_exchange_request
    from ._oauth_redirect import redirect_request as redirect_request
    from ._oauth_redirect import redirect_state as redirect_state
    from ._serde import structure as structure
    from ._serde import structure_params as structure_params
    from ._serde import unstructure as unstructure

__all__ = [
    "ALL_VERSIONS",
    "LATEST_LEGACY_VERSION",
    "LATEST_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "AssertionRefusal",
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "ClientCredentials",
    "Connection",
    "ConnectionClosed",
    "ConnectionConfig",
    "ConnectionConfigOptions",
    "Era",
    "ErrorCode",
    "ErrorData",
    "ErrorReceived",
    "Event",
    "HandshakeCompleted",
    "InputRequired",
    "InvalidMessageReceived",
    "LifecycleState",
    "LineSplitter",
    "LocalProtocolError",
    "MessageTooLarge",
    "NotificationReceived",
    "OAuthError",
    "OAuthToken",
    "PkcePair",
    "ProgressReceived",
    "ProtectedResourceMetadata",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestCancelled",
    "RequestId",
    "RequestReceived",
    "RequestTimedOut",
    "ResponseIgnored",
    "ResultReceived",
    "Role",
    "SSEDecoder",
    "SSEEvent",
    "SubscriptionNotificationReceived",
    "TokenEndpointAuthMethod",
    "authorization_server_metadata_urls",
    "authorization_url",
    "check_endpoint",
    "check_grant_issuer",
    "encode_line",
    "encode_sse_comment",
    "encode_sse_event",
    "grant_scope",
    "grant_token",
    "is_internal",
    "is_loopback",
    "jwt_bearer_request",
    "legacy_authorization_server",
    "new_pkce",
    "parse_authorization_response",
    "parse_bearer_challenge",
    "parse_protected_resource_metadata",
    "parse_registration",
    "parse_token_exchange_response",
    "parse_token_response",
    "protected_resource_metadata_urls",
    "redirect_request",
    "redirect_state",
    "registration_body",
    "resource_matches",
    "response_challenge",
    "select_authorization_server",
    "select_scope",
    "structure",
    "structure_params",
    "token_exchange_request",
    "token_request",
    "undeclared_input_request",
    "unstructure",
]


# Loaded on first use, each from its module: the typed view (cattrs + the generated
# model), which the protocol core itself never needs and which is most of the import
# time; and the OAuth rules, which only an HTTP client that authorizes needs.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("structure", "structure_params", "unstructure"), "._serde"),
    **dict.fromkeys(
        (
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
        ),
        "._oauth",
    ),
    **dict.fromkeys(("redirect_request", "redirect_state"), "._oauth_redirect"),
    **dict.fromkeys(
        (
            "AssertionRefusal",
            "check_grant_issuer",
            "grant_scope",
            "grant_token",
            "jwt_bearer_request",
            "parse_token_exchange_response",
            "token_exchange_request",
        ),
        "._oauth_grants",
    ),
    "ProtectedResourceMetadata": "._http_auth",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

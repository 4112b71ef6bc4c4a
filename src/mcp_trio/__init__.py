"""mcp_trio: the Model Context Protocol on Trio.

A session runtime that drives :class:`mcp_sansio.Connection` over a message channel
(one reader task, one serialized write path, a timer, each request in its own task and
cancel scope, bounded concurrency), and transports: stdio (server and subprocess
client), WebSocket (a custom transport) and in-memory.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_sansio import ConnectionConfig as ConnectionConfig
    from mcp_sansio import Era as Era
    from mcp_sansio import NotificationReceived as NotificationReceived
    from mcp_sansio import ProgressReceived as ProgressReceived
    from mcp_sansio import RequestId as RequestId
    from mcp_sansio import Role as SessionRole
    from mcp_sansio import TokenEndpointAuthMethod as TokenEndpointAuthMethod
    from mcp_sansio.http import BearerError as BearerError
    from mcp_sansio.http import RequiredScopes as RequiredScopes
    from mcp_sansio.http import ResponseMode as ResponseMode
    from mcp_sansio.types import TaskStatus as TaskStatus

    from ._blocking import BlockingClient as BlockingClient
    from ._blocking import ElicitationFunction as ElicitationFunction
    from ._blocking import LogFunction as LogFunction
    from ._blocking import NotificationFunction as NotificationFunction
    from ._blocking import ProgressFunction as ProgressFunction
    from ._blocking import RootsFunction as RootsFunction
    from ._blocking import SamplingFunction as SamplingFunction
    from ._blocking_subscriptions import BlockingSubscription as BlockingSubscription
    from ._channel import Hold as Hold
    from ._channel import MemoryChannel as MemoryChannel
    from ._channel import MessageChannel as MessageChannel
    from ._channel import Reissue as Reissue
    from ._channel import StreamChannel as StreamChannel
    from ._channel import Take as Take
    from ._channel import memory_channel_pair as memory_channel_pair
    from ._client import Client as Client
    from ._client import open_client as open_client
    from ._client_callbacks import ElicitationCallback as ElicitationCallback
    from ._client_callbacks import LogCallback as LogCallback
    from ._client_callbacks import NotificationCallback as NotificationCallback
    from ._client_callbacks import RootsCallback as RootsCallback
    from ._client_callbacks import SamplingCallback as SamplingCallback
    from ._client_common import CallbackAnswerError as CallbackAnswerError
    from ._client_common import EraChoice as EraChoice
    from ._client_common import RootLike as RootLike
    from ._client_common import ToolOutput as ToolOutput
    from ._client_skills import InvalidSkillEntry as InvalidSkillEntry
    from ._client_skills import Skill as Skill
    from ._client_skills import SkillFile as SkillFile
    from ._client_skills import SkillListing as SkillListing
    from ._client_skills import SkillVerificationError as SkillVerificationError
    from ._client_subscriptions import Subscription as Subscription
    from ._client_targets import ClientTarget as ClientTarget
    from ._client_targets import InMemoryServer as InMemoryServer
    from ._client_tasks import TASKS_EXTENSION as TASKS_EXTENSION
    from ._client_tasks import TaskCancelled as TaskCancelled
    from ._client_tasks import TaskState as TaskState
    from ._client_tasks import ToolTask as ToolTask
    from ._config import RATE_LIMITED_CODE as RATE_LIMITED_CODE
    from ._config import RateLimit as RateLimit
    from ._config import SessionConfig as SessionConfig
    from ._context import Context as Context
    from ._context import ElicitationCompleter as ElicitationCompleter
    from ._context import ElicitationResult as ElicitationResult
    from ._context import SamplingResult as SamplingResult
    from ._errors import RequestTimeout as RequestTimeout
    from ._errors_base import HandshakeFailed as HandshakeFailed
    from ._errors_base import InputRequiredError as InputRequiredError
    from ._errors_base import LocalProtocolError as LocalProtocolError
    from ._errors_base import McpError as McpError
    from ._errors_base import RemoteProtocolError as RemoteProtocolError
    from ._errors_base import ServerExited as ServerExited
    from ._errors_base import SessionClosed as SessionClosed
    from ._errors_base import TokenExpired as TokenExpired
    from ._errors_base import TransportFailed as TransportFailed
    from ._handlers import Handlers as Handlers
    from ._handlers import InputRequiredResult as InputRequiredResult
    from ._handlers import NotificationContext as NotificationContext
    from ._handlers import NotificationHandler as NotificationHandler
    from ._handlers import RequestContext as RequestContext
    from ._handlers import RequestFacts as RequestFacts
    from ._handlers import RequestHandler as RequestHandler
    from ._http_auth import Authenticate as Authenticate
    from ._http_auth import BearerAuth as BearerAuth
    from ._http_auth import DpopNonces as DpopNonces
    from ._http_auth import Principal as Principal
    from ._http_auth import ProtectedResourceMetadata as ProtectedResourceMetadata
    from ._http_auth import bearer_challenge as bearer_challenge
    from ._http_client import HttpChannel as HttpChannel
    from ._http_client import open_http_client as open_http_client
    from ._http_config import HttpClientConfig as HttpClientConfig
    from ._http_config import HttpServerConfig as HttpServerConfig
    from ._http_config import HttpTransportConfig as HttpTransportConfig
    from ._http_context import HttpNotificationContext as HttpNotificationContext
    from ._http_context import HttpRequestContext as HttpRequestContext
    from ._http_server import HttpServeHandle as HttpServeHandle
    from ._http_server import HttpServerStatistics as HttpServerStatistics
    from ._http_server import serve_http as serve_http
    from ._jsonschema import Constraints as Constraints
    from ._jsonschema import Description as Description
    from ._memory import open_memory_pair as open_memory_pair
    from ._oauth import AuthorizeCallback as AuthorizeCallback
    from ._oauth import ClientCredentials as ClientCredentials
    from ._oauth import InMemoryOAuthStorage as InMemoryOAuthStorage
    from ._oauth import OAuth as OAuth
    from ._oauth import OAuthError as OAuthError
    from ._oauth import OAuthStorage as OAuthStorage
    from ._oauth import OAuthToken as OAuthToken
    from ._oauth import fetch_authorization_redirect as fetch_authorization_redirect
    from ._oauth_grants import AssertionSource as AssertionSource
    from ._oauth_grants import EnterpriseAuthorization as EnterpriseAuthorization
    from ._oauth_grants import WorkloadIdentity as WorkloadIdentity
    from ._oauth_loopback import LoopbackRedirect as LoopbackRedirect
    from ._oauth_store import FileOAuthStorage as FileOAuthStorage
    from ._open import connect_session as connect_session
    from ._open import open_session as open_session
    from ._server import Lifespan as Lifespan
    from ._server import Server as Server
    from ._server_content import Audio as Audio
    from ._server_content import Completion as Completion
    from ._server_content import EmbeddedResource as EmbeddedResource
    from ._server_content import Image as Image
    from ._server_content import Message as Message
    from ._server_content import ResourceLink as ResourceLink
    from ._server_content import ToolError as ToolError
    from ._server_content import ToolResult as ToolResult
    from ._server_rpc import CompletionRequest as CompletionRequest
    from ._server_rpc import ResourceNotFound as ResourceNotFound
    from ._session import Session as Session
    from ._session import SessionStatistics as SessionStatistics
    from ._stdio import ProcessChannel as ProcessChannel
    from ._stdio import StderrCallback as StderrCallback
    from ._stdio import open_stdio_client as open_stdio_client
    from ._stdio import serve_stdio as serve_stdio
    from ._tasks import TaskConfig as TaskConfig
    from ._tasks import TaskStart as TaskStart
    from ._tasks import TaskSupport as TaskSupport
    from ._util import SessionHook as SessionHook
    from ._validation import Schema as Schema
    from ._waiters import InputCallback as InputCallback
    from ._waiters import ProgressCallback as ProgressCallback
    from ._websocket import MCP_PATH as MCP_PATH
    from ._websocket import SUBPROTOCOL as SUBPROTOCOL
    from ._websocket import WebSocketChannel as WebSocketChannel
    from ._websocket import WebSocketServeHandle as WebSocketServeHandle
    from ._websocket import open_websocket_client as open_websocket_client
    from ._websocket import serve_websocket as serve_websocket

# Public names are imported on first use (PEP 562), so that a stdio server
# process starts without loading the HTTP, client and typed-model modules it
# does not use (cold start, see benchmarks/coldstart.py).
_LAZY: dict[str, str] = {
    # (the core's names that a client passes in or gets back, re-exported as they are)
    "ConnectionConfig": "mcp_sansio",
    "Era": "mcp_sansio",
    "NotificationReceived": "mcp_sansio",
    "ProgressReceived": "mcp_sansio",
    # (and the core's type aliases that our signatures name: a request id, a session's
    # role, the arguments of ClientCredentials, bearer_challenge, Server(required_scopes=)
    # and HttpServerConfig; the HTTP rules are loaded when one of theirs is first used)
    "RequestId": "mcp_sansio",
    "SessionRole": "mcp_sansio",  # (mcp_sansio.Role: see _RENAMED)
    "TokenEndpointAuthMethod": "mcp_sansio",
    "BearerError": "mcp_sansio.http",
    "RequiredScopes": "mcp_sansio.http",
    "ResponseMode": "mcp_sansio.http",
    # (the status a TaskState carries: the schema's, as mcp_sansio.types has it)
    "TaskStatus": "mcp_sansio.types",
    "BlockingClient": "._blocking",
    # (The type aliases of public signatures, so that a user can annotate the functions
    # and values they pass: BlockingClient's callbacks are plain functions, *Function;
    # open_client's and Session's are async ones, *Callback.)
    "ElicitationFunction": "._blocking",
    "LogFunction": "._blocking",
    "NotificationFunction": "._blocking",
    "ProgressFunction": "._blocking",
    "RootsFunction": "._blocking",
    "SamplingFunction": "._blocking",
    "BlockingSubscription": "._blocking_subscriptions",
    # (Hold, Reissue and Take: the callables a custom MessageChannel's attach_holds,
    # attach_reissue and attach_reader are given, so that one can be annotated)
    "Hold": "._channel",
    "MemoryChannel": "._channel",
    "MessageChannel": "._channel",
    "Reissue": "._channel",
    "StreamChannel": "._channel",
    "Take": "._channel",
    "memory_channel_pair": "._channel",
    "Client": "._client",
    "open_client": "._client",
    "ElicitationCallback": "._client_callbacks",
    "LogCallback": "._client_callbacks",
    "NotificationCallback": "._client_callbacks",
    "RootsCallback": "._client_callbacks",
    "SamplingCallback": "._client_callbacks",
    "CallbackAnswerError": "._client_common",
    "EraChoice": "._client_common",
    "RootLike": "._client_common",
    "ToolOutput": "._client_common",
    "InvalidSkillEntry": "._client_skills",
    "Skill": "._client_skills",
    "SkillFile": "._client_skills",
    "SkillListing": "._client_skills",
    "SkillVerificationError": "._client_skills",
    "Subscription": "._client_subscriptions",
    "ClientTarget": "._client_targets",
    "InMemoryServer": "._client_targets",
    "RATE_LIMITED_CODE": "._config",
    "RateLimit": "._config",
    "SessionConfig": "._config",
    "Context": "._context",
    "ElicitationCompleter": "._context",
    "ElicitationResult": "._context",
    "SamplingResult": "._context",
    # (the exceptions that need no trio come from _errors_base, so that a
    # BlockingClient script catching one does not load trio)
    "HandshakeFailed": "._errors_base",
    "InputRequiredError": "._errors_base",
    "LocalProtocolError": "._errors_base",
    "McpError": "._errors_base",
    "RemoteProtocolError": "._errors_base",
    "RequestTimeout": "._errors",
    "ServerExited": "._errors_base",
    "SessionClosed": "._errors_base",
    "TokenExpired": "._errors_base",
    "TransportFailed": "._errors_base",
    "Handlers": "._handlers",
    "InputRequiredResult": "._handlers",
    "NotificationContext": "._handlers",
    "NotificationHandler": "._handlers",
    "RequestContext": "._handlers",
    "RequestFacts": "._handlers",
    "RequestHandler": "._handlers",
    "Authenticate": "._http_auth",
    "BearerAuth": "._http_auth",
    "DpopNonces": "._http_auth",
    "Principal": "._http_auth",
    "ProtectedResourceMetadata": "._http_auth",
    "bearer_challenge": "._http_auth",
    "HttpChannel": "._http_client",
    "open_http_client": "._http_client",
    "HttpClientConfig": "._http_config",
    "HttpServerConfig": "._http_config",
    "HttpTransportConfig": "._http_config",
    "HttpNotificationContext": "._http_context",
    "HttpRequestContext": "._http_context",
    "HttpServeHandle": "._http_server",
    "HttpServerStatistics": "._http_server",
    "serve_http": "._http_server",
    "Constraints": "._jsonschema",
    "Description": "._jsonschema",
    "open_memory_pair": "._memory",
    "AuthorizeCallback": "._oauth",
    "ClientCredentials": "._oauth",
    "InMemoryOAuthStorage": "._oauth",
    "OAuth": "._oauth",
    "OAuthError": "._oauth",
    "OAuthStorage": "._oauth",
    "OAuthToken": "._oauth",
    "fetch_authorization_redirect": "._oauth",
    "LoopbackRedirect": "._oauth_loopback",
    "FileOAuthStorage": "._oauth_store",
    "AssertionSource": "._oauth_grants",
    "EnterpriseAuthorization": "._oauth_grants",
    "WorkloadIdentity": "._oauth_grants",
    "connect_session": "._open",
    "open_session": "._open",
    "Lifespan": "._server",
    "Server": "._server",
    "Audio": "._server_content",
    "Completion": "._server_content",
    "EmbeddedResource": "._server_content",
    "Image": "._server_content",
    "Message": "._server_content",
    "ResourceLink": "._server_content",
    "ToolError": "._server_content",
    "ToolResult": "._server_content",
    "CompletionRequest": "._server_rpc",
    "ResourceNotFound": "._server_rpc",
    "Session": "._session",
    "SessionStatistics": "._session",
    "ProcessChannel": "._stdio",
    "StderrCallback": "._stdio",
    "open_stdio_client": "._stdio",
    "serve_stdio": "._stdio",
    "TaskCancelled": "._client_tasks",
    "TaskState": "._client_tasks",
    "ToolTask": "._client_tasks",
    "TaskConfig": "._tasks",
    "TaskStart": "._tasks",
    "TaskSupport": "._tasks",
    "SessionHook": "._util",
    "Schema": "._validation",
    "InputCallback": "._waiters",
    "ProgressCallback": "._waiters",
    "TASKS_EXTENSION": "._client_tasks",
    "MCP_PATH": "._websocket",
    "SUBPROTOCOL": "._websocket",
    "WebSocketChannel": "._websocket",
    "WebSocketServeHandle": "._websocket",
    "open_websocket_client": "._websocket",
    "serve_websocket": "._websocket",
}

_RENAMED: dict[str, str] = {
    # The session's role, "client" or "server" (open_session, Session.role), which the
    # core calls Role. Not exported as Role: mcp_sansio.types.Role is another thing, the
    # "assistant" or "user" of a sampling or prompt message, which is what a Role next
    # to SamplingCallback would be taken for.
    "SessionRole": "Role",
}
"""Names exported under another name than their module gives them."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        imported = importlib.import_module(module, __name__)
    except AttributeError as exc:
        # Python turns an AttributeError out of a module's __getattr__ into "cannot
        # import name 'Server' from 'mcp_trio'" (and hasattr() into False), which hides
        # the real cause (e.g. an orjson too old for one of our modules): say it.
        raise ImportError(
            f"cannot import {name!r} from {__name__!r}: importing {module} failed: {exc}",
            name=__name__,
        ) from exc
    value = getattr(imported, _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0.dev0"

__all__ = [
    "MCP_PATH",
    "RATE_LIMITED_CODE",
    "SUBPROTOCOL",
    "TASKS_EXTENSION",
    "AssertionSource",
    "Audio",
    "Authenticate",
    "AuthorizeCallback",
    "BearerAuth",
    "BearerError",
    "BlockingClient",
    "BlockingSubscription",
    "CallbackAnswerError",
    "Client",
    "ClientCredentials",
    "ClientTarget",
    "Completion",
    "CompletionRequest",
    "ConnectionConfig",
    "Constraints",
    "Context",
    "Description",
    "DpopNonces",
    "ElicitationCallback",
    "ElicitationCompleter",
    "ElicitationFunction",
    "ElicitationResult",
    "EmbeddedResource",
    "EnterpriseAuthorization",
    "Era",
    "EraChoice",
    "FileOAuthStorage",
    "Handlers",
    "HandshakeFailed",
    "Hold",
    "HttpChannel",
    "HttpClientConfig",
    "HttpNotificationContext",
    "HttpRequestContext",
    "HttpServeHandle",
    "HttpServerConfig",
    "HttpServerStatistics",
    "HttpTransportConfig",
    "Image",
    "InMemoryOAuthStorage",
    "InMemoryServer",
    "InputCallback",
    "InputRequiredError",
    "InputRequiredResult",
    "InvalidSkillEntry",
    "Lifespan",
    "LocalProtocolError",
    "LogCallback",
    "LogFunction",
    "LoopbackRedirect",
    "McpError",
    "MemoryChannel",
    "Message",
    "MessageChannel",
    "NotificationCallback",
    "NotificationContext",
    "NotificationFunction",
    "NotificationHandler",
    "NotificationReceived",
    "OAuth",
    "OAuthError",
    "OAuthStorage",
    "OAuthToken",
    "Principal",
    "ProcessChannel",
    "ProgressCallback",
    "ProgressFunction",
    "ProgressReceived",
    "ProtectedResourceMetadata",
    "RateLimit",
    "Reissue",
    "RemoteProtocolError",
    "RequestContext",
    "RequestFacts",
    "RequestHandler",
    "RequestId",
    "RequestTimeout",
    "RequiredScopes",
    "ResourceLink",
    "ResourceNotFound",
    "ResponseMode",
    "RootLike",
    "RootsCallback",
    "RootsFunction",
    "SamplingCallback",
    "SamplingFunction",
    "SamplingResult",
    "Schema",
    "Server",
    "ServerExited",
    "Session",
    "SessionClosed",
    "SessionConfig",
    "SessionHook",
    "SessionRole",
    "SessionStatistics",
    "Skill",
    "SkillFile",
    "SkillListing",
    "SkillVerificationError",
    "StderrCallback",
    "StreamChannel",
    "Subscription",
    "Take",
    "TaskCancelled",
    "TaskConfig",
    "TaskStart",
    "TaskState",
    "TaskStatus",
    "TaskSupport",
    "TokenEndpointAuthMethod",
    "TokenExpired",
    "ToolError",
    "ToolOutput",
    "ToolResult",
    "ToolTask",
    "TransportFailed",
    "WebSocketChannel",
    "WebSocketServeHandle",
    "WorkloadIdentity",
    "__version__",
    "bearer_challenge",
    "connect_session",
    "fetch_authorization_redirect",
    "memory_channel_pair",
    "open_client",
    "open_http_client",
    "open_memory_pair",
    "open_session",
    "open_stdio_client",
    "open_websocket_client",
    "serve_http",
    "serve_stdio",
    "serve_websocket",
]

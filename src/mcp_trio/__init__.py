"""mcp_trio: the Model Context Protocol on Trio.

A session runtime that drives :class:`mcp_sansio.Connection` over a message channel
(one reader task, one serialized write path, a timer, each request in its own task and
cancel scope, bounded concurrency), and transports: stdio (server and subprocess
client), WebSocket (a custom transport) and in-memory.
"""

from __future__ import annotations

from ._channel import MemoryChannel as MemoryChannel
from ._channel import MessageChannel as MessageChannel
from ._channel import StreamChannel as StreamChannel
from ._channel import memory_channel_pair as memory_channel_pair
from ._config import SessionConfig as SessionConfig
from ._errors import HandshakeFailed as HandshakeFailed
from ._errors import InputRequiredError as InputRequiredError
from ._errors import McpError as McpError
from ._errors import RequestTimeout as RequestTimeout
from ._errors import ServerExited as ServerExited
from ._errors import SessionClosed as SessionClosed
from ._handlers import Handlers as Handlers
from ._handlers import NotificationContext as NotificationContext
from ._handlers import NotificationHandler as NotificationHandler
from ._handlers import RequestContext as RequestContext
from ._handlers import RequestHandler as RequestHandler
from ._memory import open_memory_pair as open_memory_pair
from ._open import connect_session as connect_session
from ._open import open_session as open_session
from ._session import Session as Session
from ._session import SessionStatistics as SessionStatistics
from ._stdio import ProcessChannel as ProcessChannel
from ._stdio import open_stdio_client as open_stdio_client
from ._stdio import serve_stdio as serve_stdio
from ._websocket import MCP_PATH as MCP_PATH
from ._websocket import SUBPROTOCOL as SUBPROTOCOL
from ._websocket import WebSocketChannel as WebSocketChannel
from ._websocket import open_websocket_client as open_websocket_client
from ._websocket import serve_websocket as serve_websocket

__version__ = "0.1.0.dev0"

__all__ = [
    "MCP_PATH",
    "SUBPROTOCOL",
    "Handlers",
    "HandshakeFailed",
    "InputRequiredError",
    "McpError",
    "MemoryChannel",
    "MessageChannel",
    "NotificationContext",
    "NotificationHandler",
    "ProcessChannel",
    "RequestContext",
    "RequestHandler",
    "RequestTimeout",
    "ServerExited",
    "Session",
    "SessionClosed",
    "SessionConfig",
    "SessionStatistics",
    "StreamChannel",
    "WebSocketChannel",
    "__version__",
    "connect_session",
    "memory_channel_pair",
    "open_memory_pair",
    "open_session",
    "open_stdio_client",
    "open_websocket_client",
    "serve_stdio",
    "serve_websocket",
]

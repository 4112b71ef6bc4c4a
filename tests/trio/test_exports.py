"""The runtime and transport names stay exported (flat, from ``mcp_trio``)."""

from __future__ import annotations

import trio

import mcp_sansio
import mcp_trio

RUNTIME_AND_TRANSPORTS = {
    "MCP_PATH",
    "SUBPROTOCOL",
    "Handlers",
    "HandshakeFailed",
    "InputRequiredError",
    "InputRequiredResult",
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
    "TokenExpired",
    "WebSocketChannel",
    "WebSocketServeHandle",
    "__version__",
    "connect_session",
    "memory_channel_pair",
    "open_memory_pair",
    "open_session",
    "open_stdio_client",
    "open_websocket_client",
    "serve_stdio",
    "serve_websocket",
}


def test_runtime_and_transport_names_are_exported() -> None:
    assert set(mcp_trio.__all__) >= RUNTIME_AND_TRANSPORTS
    for name in mcp_trio.__all__:
        assert hasattr(mcp_trio, name), name


def test_error_hierarchy() -> None:
    # The core's two protocol errors come through unchanged: one class, either import.
    assert mcp_trio.LocalProtocolError is mcp_sansio.LocalProtocolError
    assert mcp_trio.RemoteProtocolError is mcp_sansio.RemoteProtocolError


def test_the_http_rules_configurations_are_exported() -> None:
    # serve_http and open_http_client take them; they live in the sans-IO rules.
    from mcp_sansio import http  # noqa: PLC0415

    assert mcp_trio.HttpServerConfig is http.HttpServerConfig
    assert mcp_trio.HttpClientConfig is http.HttpClientConfig
    # The public module names everything it imports, the aliases of its signatures too.
    for name in ("HttpServer", "HttpClient", "Decision", "Output", "HeaderInput", "Principal"):
        assert name in http.__all__ and hasattr(http, name)
    assert issubclass(mcp_trio.ServerExited, mcp_trio.SessionClosed)
    assert issubclass(mcp_trio.TokenExpired, mcp_trio.SessionClosed)
    assert issubclass(mcp_trio.HandshakeFailed, mcp_trio.McpError)
    assert issubclass(mcp_trio.RequestTimeout, trio.TooSlowError)


def test_the_core_names_a_client_meets_are_exported_as_they_are() -> None:
    # The README passes a ConnectionConfig, reads client.era and takes ProgressReceived
    # in an on_progress callback: a user should not have to find them in mcp_sansio.
    for name in ("ConnectionConfig", "Era", "ProgressReceived"):
        assert name in mcp_trio.__all__, name
        assert getattr(mcp_trio, name) is getattr(mcp_sansio, name), name
        assert name in dir(mcp_trio), name

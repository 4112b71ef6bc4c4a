"""HTTPS and WSS over real sockets on 127.0.0.1, with certificates from a throwaway CA
(trustme): the client verifies the server, and refuses one its trust store does not
vouch for."""

from __future__ import annotations

import logging
import ssl

import pytest
import trio
import trio.testing

from mcp_trio import (
    SessionClosed,
    SessionConfig,
    open_websocket_client,
    serve_websocket,
)
from mcp_trio._http_client import open_http_client

from .helpers import client_config, server_config
from .test_http_support import IO_TIMEOUT, call, client_connection_config, start_server, text_of
from .test_websocket import echo_handlers


def _is_certificate_failure(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is a failed certificate check."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        if isinstance(current, BaseExceptionGroup):
            seen.extend(current.exceptions)
        seen.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_https_in_each_era(
    nursery: trio.Nursery,
    server_context: ssl.SSLContext,
    client_context: ssl.SSLContext,
    era: str,
) -> None:
    server = await start_server(nursery, ssl_context=server_context)
    assert server.url.startswith("https://127.0.0.1:")
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, ssl_context=client_context, connection_config=client_connection_config(era)
        ) as client:
            assert client.handshake is not None and client.handshake.era.value == era
            result = await client.request("tools/call", call("echo", text="over tls"))
            assert text_of(result) == "over tls"


async def test_https_client_refuses_an_untrusted_server(
    nursery: trio.Nursery, server_context: ssl.SSLContext
) -> None:
    server = await start_server(nursery, ssl_context=server_context)
    untrusting = ssl.create_default_context()  # the system's store: our CA is not in it
    with (
        trio.fail_after(IO_TIMEOUT),
        pytest.raises(SessionClosed, match="CERTIFICATE_VERIFY_FAILED") as info,
    ):
        async with open_http_client(
            server.url, ssl_context=untrusting, connection_config=client_connection_config()
        ):
            pass  # pragma: no cover - the handshake fails first
    assert _is_certificate_failure(info.value), info.value


async def _serve_wss(nursery: trio.Nursery, context: ssl.SSLContext) -> str:
    handle = await nursery.start(
        lambda task_status: serve_websocket(
            echo_handlers(),
            "127.0.0.1",
            0,
            ssl_context=context,
            connection_config=server_config(),
            task_status=task_status,
        )
    )
    url: str = handle.url
    assert url.startswith("wss://127.0.0.1:")
    return url


async def test_wss(
    nursery: trio.Nursery, server_context: ssl.SSLContext, client_context: ssl.SSLContext
) -> None:
    url = await _serve_wss(nursery, server_context)
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            url, ssl_context=client_context, connection_config=client_config()
        ) as session:
            result = await session.request("tools/call", call("echo", text="wss"))
            assert result["content"][0]["text"] == "wss"
            remote = getattr(session.channel, "remote", None)  # (a WebSocketChannel's)
            assert remote is not None and remote.is_ssl
            assert url.startswith(f"wss://127.0.0.1:{remote.port}/")


async def test_wss_client_refuses_an_untrusted_server(
    nursery: trio.Nursery, server_context: ssl.SSLContext
) -> None:
    url = await _serve_wss(nursery, server_context)
    config = SessionConfig(ws_connect_timeout=IO_TIMEOUT)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(trio.BrokenResourceError) as info:
        async with open_websocket_client(
            url,
            ssl_context=ssl.create_default_context(),
            config=config,
            connection_config=client_config(),
        ):
            pass  # pragma: no cover - the handshake fails first
    assert _is_certificate_failure(info.value), info.value


async def test_wss_connections_that_fail_or_leave_give_their_place_back(
    nursery: trio.Nursery,
    server_context: ssl.SSLContext,
    client_context: ssl.SSLContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # serve_websocket(max_connections=1) over TLS: a TLS handshake that fails (a client
    # that does not trust the server, one that speaks plain HTTP) or a client that
    # connects and leaves must free its place, or the server refuses everyone after.
    handle = await nursery.start(
        lambda task_status: serve_websocket(
            echo_handlers(),
            "127.0.0.1",
            0,
            ssl_context=server_context,
            connection_config=server_config(),
            max_connections=1,
            task_status=task_status,
        )
    )
    with trio.fail_after(IO_TIMEOUT):
        untrusting = ssl.create_default_context()  # (our CA is not in it)
        with pytest.raises(trio.BrokenResourceError):
            async with open_websocket_client(
                handle.url, ssl_context=untrusting, connection_config=client_config()
            ):
                pass  # pragma: no cover - the handshake fails first
        await trio.testing.wait_all_tasks_blocked()
        async with await trio.open_tcp_stream("127.0.0.1", handle.port) as plain:
            await plain.send_all(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            assert await plain.receive_some(100) == b""  # (closed: not TLS)
        await trio.testing.wait_all_tasks_blocked()
        tcp = await trio.open_tcp_stream("127.0.0.1", handle.port)
        await tcp.aclose()  # (connects and leaves at once)
        await trio.testing.wait_all_tasks_blocked()
        tls = trio.SSLStream(
            await trio.open_tcp_stream("127.0.0.1", handle.port),
            client_context,
            server_hostname="127.0.0.1",
        )
        await tls.do_handshake()  # (TLS, then no WebSocket handshake: leaves)
        await tls.aclose()
        await trio.testing.wait_all_tasks_blocked()
        async with open_websocket_client(
            handle.url, ssl_context=client_context, connection_config=client_config()
        ) as session:
            result = await session.request("tools/call", call("echo", text="served"))
            assert result["content"][0]["text"] == "served"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

"""The WebSocket server checks the opening handshake's ``Origin`` and ``Host`` as the
Streamable HTTP server checks a request's: a page of another site (browsers let any page
open a WebSocket to localhost) is refused ``403``, a DNS-rebinding ``Host`` ``421``, both
before ``authenticate`` runs. Real sockets on 127.0.0.1 (port 0), with ``fail_after``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest
import trio

from mcp_sansio._json import loads
from mcp_sansio.http import HttpRequest, HttpResponse
from mcp_trio import Principal, Server, WebSocketServeHandle, open_client

from .websocket_support import handshake_request

IO_TIMEOUT = 10


def _server() -> tuple[Server, list[str]]:
    server = Server("guarded")
    ran: list[str] = []

    @server.tool()
    async def shout(text: str) -> str:
        """Upper-cases ``text``."""
        ran.append(text)
        return text.upper()

    return server, ran


async def _serve(nursery: trio.Nursery, server: Server, **options: Any) -> int:
    handle = await nursery.start(partial(server.serve_websocket, "127.0.0.1", 0, **options))
    assert isinstance(handle, WebSocketServeHandle)
    assert handle.url == f"ws://127.0.0.1:{handle.port}/mcp"
    assert handle.port == handle.listeners[0].socket.getsockname()[1]
    return handle.port


async def _handshake(
    port: int, headers: Sequence[tuple[str, str]], path: str = "/mcp"
) -> tuple[int, bytes]:
    """A raw opening handshake of ``path`` with ``headers`` (``Host`` among them); the
    status and the body of the answer (none for ``101``)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        await stream.send_all(handshake_request(None, path=path, headers=headers))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some()
            assert chunk, data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = await stream.receive_some()
            assert chunk, body
            body += chunk
        return status, body
    finally:
        await stream.aclose()


def _message(body: bytes) -> str:
    """The JSON-RPC error message of a refusal's body (HTTP's shape)."""
    error = loads(body)
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32600
    return str(error["error"]["message"])


async def test_a_foreign_origin_is_refused_403_and_no_tool_runs(nursery: trio.Nursery) -> None:
    server, ran = _server()
    asked: list[HttpRequest] = []

    async def authenticate(head: HttpRequest) -> Principal | HttpResponse:
        asked.append(head)
        return Principal(subject="alice", scopes=frozenset())

    port = await _serve(nursery, server, authenticate=authenticate)
    url = f"ws://127.0.0.1:{port}/mcp"
    with trio.fail_after(IO_TIMEOUT):
        status, body = await _handshake(
            port, [("Host", f"127.0.0.1:{port}"), ("Origin", "https://evil.example")]
        )
        assert status == 403
        assert _message(body) == "Forbidden: Origin 'https://evil.example' is not allowed"
        with pytest.raises(Exception, match="403"):
            async with open_client(url, headers={"Origin": "https://evil.example"}) as client:
                await client.call_tool("shout", {"text": "pwned"})
        # a scheme or a port is part of the origin: http://localhost is not https://evil
        status, _ = await _handshake(port, [("Host", f"127.0.0.1:{port}"), ("Origin", "null")])
        assert status == 403
    assert ran == []
    assert asked == []  # refused before authenticate runs


async def test_a_rebinding_host_is_refused_421(nursery: trio.Nursery) -> None:
    server, ran = _server()
    port = await _serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        # DNS rebinding: the page's own name, which now resolves to 127.0.0.1
        status, body = await _handshake(port, [("Host", f"evil.example:{port}")])
        assert status == 421
        assert _message(body) == (
            f"Misdirected Request: Host 'evil.example:{port}' is not served here (allow it"
            " in serve_websocket's allowed_hosts, or with mcp-trio run --allow-host NAME)"
        )
        # with its Origin as well: the Origin is checked first, as HTTP does
        status, _ = await _handshake(
            port, [("Host", f"evil.example:{port}"), ("Origin", f"http://evil.example:{port}")]
        )
        assert status == 403
    assert ran == []


async def test_an_absolute_form_target_is_served_and_vetted_by_its_authority(
    nursery: trio.Nursery,
) -> None:
    """As HTTP (RFC 9112 section 3.2.2: the server "MUST ignore the received Host header
    field" and use the target's authority; RFC 6455 section 4.2.1 names "an absolute
    HTTP/HTTPS URI"): a handshake for ``http://127.0.0.1:PORT/mcp`` is served whatever
    its ``Host``, one for ``http://evil.example/mcp`` is refused ``421`` whatever its
    ``Host``. A query is no part of the path, as for HTTP."""
    server, _ = _server()
    port = await _serve(nursery, server)
    ours, evil = f"127.0.0.1:{port}", f"evil.example:{port}"
    with trio.fail_after(IO_TIMEOUT):
        for target in (f"http://{ours}/mcp", f"HTTPS://localhost:{port}/mcp?x=1", "/mcp?x=1"):
            assert (await _handshake(port, [("Host", evil)], target))[0] == (
                421 if target.startswith("/") else 101
            )
            assert (await _handshake(port, [("Host", ours)], target))[0] == 101
        status, body = await _handshake(port, [("Host", ours)], f"http://{evil}/mcp")
        assert status == 421
        assert _message(body).startswith(f"Misdirected Request: Host {evil!r} is not served")
        # Another path, or a target that is not the absolute form HTTP takes (RFC 6455:
        # a ws:// URI is the client's, not a request target): 404, as for HTTP.
        for target in (f"http://{ours}/other", f"ws://{ours}/mcp", f"http://u@{ours}/mcp"):
            assert (await _handshake(port, [("Host", ours)], target))[0] == 404


@pytest.mark.parametrize(
    "origin", ["http://localhost:5173", "http://127.0.0.1", "https://[::1]:8443", None]
)
async def test_localhost_pages_and_non_browsers_are_served(
    nursery: trio.Nursery, origin: str | None
) -> None:
    server, ran = _server()
    port = await _serve(nursery, server)
    headers = {} if origin is None else {"Origin": origin}
    with trio.fail_after(IO_TIMEOUT):
        for host in ("127.0.0.1", "localhost"):
            async with open_client(f"ws://{host}:{port}/mcp", headers=headers) as client:
                result = await client.call_tool("shout", {"text": "hi"})
                assert result.content[0].text == "HI"  # type: ignore[union-attr]
    assert ran == ["hi", "hi"]


async def test_custom_allow_lists(nursery: trio.Nursery) -> None:
    server, _ = _server()
    port = await _serve(
        nursery,
        server,
        allowed_origins=["https://app.example"],
        allowed_hosts=["mcp.example.com:*"],
    )
    with trio.fail_after(IO_TIMEOUT):
        mine = f"mcp.example.com:{port}"
        assert (await _handshake(port, [("Host", mine), ("Origin", "https://app.example")]))[
            0
        ] == 101
        assert (await _handshake(port, [("Host", mine)]))[0] == 101
        # the defaults are replaced, not added to
        assert (await _handshake(port, [("Host", mine), ("Origin", "http://localhost")]))[0] == 403
        assert (await _handshake(port, [("Host", f"127.0.0.1:{port}")]))[0] == 421


async def test_allowed_hosts_none_serves_any_host_and_star_any_origin(
    nursery: trio.Nursery,
) -> None:
    server, _ = _server()
    port = await _serve(nursery, server, allowed_origins=["*"], allowed_hosts=None)
    with trio.fail_after(IO_TIMEOUT):
        for host in (f"evil.example:{port}", "203.0.113.7"):
            headers = [("Host", host), ("Origin", "https://anyone.example")]
            assert (await _handshake(port, headers))[0] == 101


async def test_an_allow_list_given_as_one_string_is_a_type_error(nursery: trio.Nursery) -> None:
    server, _ = _server()
    with pytest.raises(TypeError, match="not the string"):
        await _serve(nursery, server, allowed_origins="https://app.example")
    with pytest.raises(TypeError, match="not the string"):
        await _serve(nursery, server, allowed_hosts="mcp.example.com")


async def test_a_refused_host_is_logged_once_and_only_the_first_16(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = _server()
    port = await _serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.WARNING, logger="mcp_trio"):
        for host in ["evil.example", "evil.example", *(f"h{i}.example" for i in range(20))]:
            assert (await _handshake(port, [("Host", host)]))[0] == 421
    warned = [r.getMessage() for r in caplog.records if "refused Host" in r.getMessage()]
    assert len(warned) == 16
    assert "'evil.example'" in warned[0] and "--allow-host" in warned[0]
    assert "serve_websocket's allowed_hosts" in warned[0]


async def test_a_host_wsproto_cannot_decode_is_dropped_without_a_traceback(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    server, ran = _server()
    port = await _serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.DEBUG, logger="mcp_trio"):
        for host in ("l\u043ecalhost".encode(), b"xn--localhost-"):  # (not IDNA)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(handshake_request(host, subprotocol=None))
            assert await stream.receive_some() == b""  # (dropped)
            await stream.aclose()
        # The server goes on serving.
        assert (await _handshake(port, [("Host", f"127.0.0.1:{port}")]))[0] == 101
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()] == [
        "WebSocket: dropped a handshake with an undecodable Host"
    ] * 2
    assert ran == []

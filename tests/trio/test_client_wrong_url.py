"""``open_client`` pointed at the wrong URL: the handshake's refusal names the URL and
the likely fix, where a bare ``HTTP: status 404`` (or ``400``) named neither.

Real sockets on 127.0.0.1: our ``serve_http`` (no endpoint but ``/mcp``), and a raw
server that answers every request with one fixed response.
"""

from __future__ import annotations

from functools import partial

import pytest
import trio

from mcp_sansio import ErrorData
from mcp_trio import HandshakeFailed
from mcp_trio._client import open_client
from mcp_trio._client_common import EraName
from mcp_trio._errors_base import name_the_endpoint
from mcp_trio._server import Server

from .test_http_support import Proxy

IO_TIMEOUT = 10.0

HINT_404 = "no MCP endpoint at {url!r} (mcp_trio's serve_http serves one at /mcp)"


def _server() -> Server:
    server = Server("wrong-url")

    @server.tool()
    def ping() -> str:
        return "pong"

    return server


@pytest.mark.parametrize("path", ["", "/", "/api", "/mcp/"])
@pytest.mark.parametrize("era", ["auto", "legacy", "modern"])
async def test_a_path_serve_http_does_not_serve(path: str, era: EraName) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(_server().serve_http, "127.0.0.1", 0))
            url = f"http://127.0.0.1:{handle.port}{path}"
            with pytest.raises(HandshakeFailed) as failed:
                async with open_client(url, era=era):
                    pytest.fail("opened")  # pragma: no cover
            said = f"HTTP: status 404: {HINT_404.format(url=url)}"
            assert failed.value.message == said
            assert str(failed.value) == f"{said} (code -32603)"
            assert failed.value.data == {"httpStatus": 404}
            async with open_client(f"http://127.0.0.1:{handle.port}/mcp", era=era) as client:
                assert (await client.call_tool("ping")).text == "pong"
            nursery.cancel_scope.cancel()


async def _answer_every_request(response: bytes, stream: trio.SocketStream) -> None:
    """Read one request head (and its body, by Content-Length), answer ``response``."""
    if b"\r\n\r\n" not in await Proxy._whole_request(stream):
        return
    await stream.send_all(response)
    await stream.aclose()


@pytest.mark.parametrize(
    ("response", "hinted"),
    [
        # What a WebSocket server (trio-websocket) answers a plain HTTP request.
        (b"HTTP/1.1 400 \r\ncontent-length: 0\r\n\r\n", True),
        # The server's own words say more than a guess: they are left alone.
        (
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
            b"content-length: 69\r\n\r\n"
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"nope!"}}',
            False,
        ),
    ],
)
async def test_a_bare_400_suggests_the_websocket_url(response: bytes, hinted: bool) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            serve = partial(trio.serve_tcp, partial(_answer_every_request, response), 0)
            (listener,) = await nursery.start(partial(serve, host="127.0.0.1"))
            port = listener.socket.getsockname()[1]
            url = f"http://127.0.0.1:{port}/mcp"
            with pytest.raises(HandshakeFailed) as failed:
                async with open_client(url, era="legacy"):
                    pytest.fail("opened")  # pragma: no cover
            nursery.cancel_scope.cancel()
    if hinted:
        assert failed.value.message == (
            f"HTTP: status 400: the server at {url!r} refused a plain HTTP request: if it"
            f" serves WebSocket (serve_websocket), connect to 'ws://127.0.0.1:{port}/mcp'"
        )
    else:
        assert "WebSocket" not in failed.value.message
        assert "nope!" in failed.value.message


def test_the_hint_is_given_for_a_404_or_a_bare_400_only() -> None:
    url = "https://example.com/api"

    def named(message: str, status: int | None) -> str:
        data = None if status is None else {"httpStatus": status}
        failed = HandshakeFailed(ErrorData(code=-32603, message=message, data=data))
        name_the_endpoint(failed, url)
        assert str(failed) == f"{failed.error.message} (code -32603)"
        assert failed.error.data == data
        return failed.error.message

    assert named("HTTP: status 404", 404) == f"HTTP: status 404: {HINT_404.format(url=url)}"
    assert named("HTTP: status 400", 400).endswith("connect to 'wss://example.com/api'")
    for unchanged, status in [
        ("HTTP: status 400: too big", 400),
        ("HTTP: status 403", 403),
        ("Unsupported protocol version", None),
    ]:
        assert named(unchanged, status) == unchanged

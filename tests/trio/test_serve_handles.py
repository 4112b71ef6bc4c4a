"""The serve handles of HTTP and WebSocket say where they listen, the same way."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio

from mcp_trio import Handlers, HttpServeHandle, WebSocketServeHandle, serve_http, serve_websocket
from mcp_trio._serve_handle import ListeningHandle


async def test_both_handles_name_their_first_listener() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            http: HttpServeHandle = await nursery.start(partial(serve_http, Handlers()))
            ws: WebSocketServeHandle = await nursery.start(serve_websocket, Handlers())
            for handle, scheme in ((http, "http"), (ws, "ws")):
                assert isinstance(handle, ListeningHandle)
                port = handle.listeners[0].socket.getsockname()[1]
                assert handle.port == port != 0
                assert handle.url == f"{scheme}://127.0.0.1:{port}/mcp"
            await http.aclose()
            await ws.aclose()


class _Socket:
    def __init__(self, name: tuple[Any, ...]) -> None:
        self.name = name

    def getsockname(self) -> tuple[Any, ...]:
        return self.name


class _Listener:
    def __init__(self, *name: Any) -> None:
        self.socket = _Socket(name)


class _Handle(ListeningHandle):
    def __init__(self, *listeners: Any) -> None:
        self._listeners = list(listeners)

    @property
    def listeners(self) -> list[trio.SocketListener]:
        return self._listeners


def test_an_ipv6_host_is_bracketed_and_the_first_listener_counts() -> None:
    handle = _Handle(_Listener("::1", 8123, 0, 0), _Listener("127.0.0.1", 9000))
    assert handle.port == 8123
    assert handle._url("ws", "/mcp") == "ws://[::1]:8123/mcp"
    assert _Handle(_Listener("10.0.0.1", 80))._url("https", "/x") == "https://10.0.0.1:80/x"

"""The socket servers of the ``ws`` and ``http`` groups: ``python -m benchmarks._net_server KIND``.

Binds ``127.0.0.1`` on a port the kernel picks, writes the port and a newline to stdout,
then serves until its stdin ends (the parent closes it to stop the server). ``KIND``:

``ws-floor``
    trio-websocket echo: accept any handshake, answer each text message with the canned
    1 KB result under the request's id (orjson), as a text message.
``ws``
    ``mcp_trio.serve_websocket`` with the low-level ``Handlers``.
``http-floor-json`` / ``http-floor-sse``
    trio + h11, HTTP/1.1 keep-alive: read a POST, answer ``200`` with the canned result
    under the request's id, as an ``application/json`` body (``Content-Length``) or as
    one ``text/event-stream`` event (chunked), in one write.
``http-floor-tight-json`` / ``http-floor-tight-sse``
    The same, reading with ``os.read`` and writing with ``os.write`` on the non-blocking
    socket (waiting only when nothing can be read, or written), as mcp_trio does,
    instead of ``receive_some`` / ``send_all``, which always yield.
``http-json`` / ``http-sse``
    ``mcp_trio._http_server.serve_http`` with the low-level ``Handlers``,
    ``HttpServerConfig(response_mode="json" | "sse")``.

Only loopback is ever bound.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Final, Literal

import h11
import trio
import trio_websocket

import mcp_trio
from mcp_sansio.http import HttpServerConfig
from mcp_trio._http_server import serve_http

from ._servers import SERVER_CONFIG, low_level_handlers
from ._trio import floor_answer, read_fd, write_fd

__all__ = ["KINDS", "main"]

HOST: Final = "127.0.0.1"
PATH: Final = "/mcp"
_CHUNK: Final = 65_536

Starter = Callable[..., Awaitable[None]]
"""``async def serve(*, task_status)``: serve, passing the bound port to ``started``."""


# -- WebSocket -----------------------------------------------------------------------------


async def _ws_floor_connection(request: trio_websocket.WebSocketRequest) -> None:
    ws = await request.accept()
    answer = floor_answer
    get_message, send_message = ws.get_message, ws.send_message
    try:
        while True:
            await send_message(answer(await get_message()).decode())
    except trio_websocket.ConnectionClosed:
        return


async def _ws_floor(*, task_status: trio.TaskStatus[int]) -> None:
    async with trio.open_nursery() as nursery:
        server: trio_websocket.WebSocketServer = await nursery.start(
            functools.partial(
                trio_websocket.serve_websocket, _ws_floor_connection, HOST, 0, ssl_context=None
            )
        )
        task_status.started(server.port)


async def _ws(*, task_status: trio.TaskStatus[int]) -> None:
    async with trio.open_nursery() as nursery:
        handle: mcp_trio.WebSocketServeHandle = await nursery.start(
            functools.partial(
                mcp_trio.serve_websocket,
                low_level_handlers(),
                HOST,
                0,
                connection_config=SERVER_CONFIG,
            )
        )
        task_status.started(handle.port)


# -- HTTP ----------------------------------------------------------------------------------


def _json_reply(payload: bytes) -> tuple[list[tuple[str, str]], bytes]:
    headers = [("content-type", "application/json"), ("content-length", str(len(payload)))]
    return headers, payload


def _sse_reply(payload: bytes) -> tuple[list[tuple[str, str]], bytes]:
    headers = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    return headers, b"event: message\ndata: " + payload + b"\n\n"


async def _http_floor_connection(
    reply: Callable[[bytes], tuple[list[tuple[str, str]], bytes]],
    stream: trio.SocketStream,
    *,
    tight: bool = False,
) -> None:
    """Answer every POST of one connection. Plain: ``receive_some`` / ``send_all`` on
    the stream. ``tight``: ``os.read`` / ``os.write`` on its socket (:func:`read_fd`,
    :func:`write_fd`), waiting only when nothing can be read, or written."""
    conn = h11.Connection(h11.SERVER)
    receive: Callable[[], Awaitable[bytes]]
    send: Callable[[bytes], Awaitable[object]]
    if tight:
        fd = stream.socket.fileno()
        receive, send = functools.partial(read_fd, fd, _CHUNK), functools.partial(write_fd, fd)
    else:
        receive, send = functools.partial(stream.receive_some, _CHUNK), stream.send_all
    answer = floor_answer
    try:
        while True:
            body = b""
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await receive())
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            headers, data = reply(answer(body))
            await send(
                conn.send(h11.Response(status_code=200, headers=headers))
                + conn.send(h11.Data(data=data))
                + conn.send(h11.EndOfMessage())
            )
            conn.start_next_cycle()
    except (
        h11.RemoteProtocolError,
        trio.BrokenResourceError,
        trio.ClosedResourceError,
        OSError,  # (tight: a reset connection, ConnectionError)
    ):
        return
    finally:
        await trio.aclose_forcefully(stream)


async def _http_floor(sse: bool, *, tight: bool = False, task_status: trio.TaskStatus[int]) -> None:
    handler = functools.partial(
        _http_floor_connection, _sse_reply if sse else _json_reply, tight=tight
    )
    async with trio.open_nursery() as nursery:
        listeners: list[trio.SocketListener] = await nursery.start(
            functools.partial(trio.serve_tcp, handler, 0, host=HOST)
        )
        task_status.started(listeners[0].socket.getsockname()[1])


async def _http(mode: Literal["json", "sse"], *, task_status: trio.TaskStatus[int]) -> None:
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(
            functools.partial(
                serve_http,
                low_level_handlers(),
                connection_config=SERVER_CONFIG,
                host=HOST,
                port=0,
                path=PATH,
                http_config=HttpServerConfig(response_mode=mode),
            )
        )
        task_status.started(handle.port)


KINDS: Final[dict[str, Starter]] = {
    "ws-floor": _ws_floor,
    "ws": _ws,
    "http-floor-json": functools.partial(_http_floor, False),
    "http-floor-sse": functools.partial(_http_floor, True),
    "http-floor-tight-json": functools.partial(_http_floor, False, tight=True),
    "http-floor-tight-sse": functools.partial(_http_floor, True, tight=True),
    "http-json": functools.partial(_http, "json"),
    "http-sse": functools.partial(_http, "sse"),
}
"""Server kind → its starter."""


async def main(kind: str) -> None:
    """Serve ``kind``, write the port to stdout, stop when stdin ends."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    async with trio.open_nursery() as nursery:
        port = await nursery.start(KINDS[kind])
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        while await stdin.receive_some(_CHUNK):
            pass
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])

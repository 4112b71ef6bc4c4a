"""Group ``http``: ``mcp_trio`` over Streamable HTTP (h11), against a trio + h11 floor.

The server runs in a child process (``python -m benchmarks._net_server``, loopback, a
port the kernel picks), the client in this one. HTTP/1.1 without pipelining: one
request per connection at a time, so ``in_flight`` requests use up to ``in_flight``
keep-alive connections on both sides (ours is configured with
``max_client_connections = max(in_flight, 16)`` and
``max_idle_connections = max(in_flight, 4)``, so as many as the floor's at 100). Throughput in
calls/s, with 1 and with 100 requests in flight, with JSON and with SSE responses.

``http.floor.json.1`` / ``.100``, ``http.floor.sse.1`` / ``.100``
    trio + h11 on both sides. The client POSTs each request (fresh id, orjson) on an
    idle keep-alive connection (or a new one) and reads the answer: an
    ``application/json`` body, or one ``text/event-stream`` event (``data:`` line) in a
    chunked body. The child answers with the canned 1 KB result under the request's id,
    head and body in one write.
``http.floor.tight.json.1`` / ``.100``, ``http.floor.tight.sse.1`` / ``.100``
    The same work through the cheapest paths, as mcp_trio takes them on a plain TCP
    socket: both sides write with ``os.write`` on the non-blocking socket
    (``wait_writable`` only when it is full) and read with ``os.read`` (``wait_readable``
    only when nothing is there), instead of ``send_all`` / ``receive_some``, which
    always yield. Head and body still go in one write; h11 does the same work. The
    honest lower bound: ``http.calls*`` report their ratio to it beside the target's
    ratio to ``http.floor.*``.
``http.calls.1`` / ``.100`` (JSON), ``http.calls.sse.1`` / ``.100`` (SSE)
    ``mcp_trio._http_server.serve_http`` (low-level ``Handlers``,
    ``HttpServerConfig(response_mode="json" | "sse")``) and
    ``mcp_trio._http_client.open_http_client``, ``Session.request``; legacy era (a
    session id, ``initialize`` first). The legacy client's GET stream stays open beside.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Final, final

import h11
import orjson
import trio

from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from ._harness import Case, Settings, Skip
from ._servers import CLIENT_CONFIG
from ._trio import (
    Driver,
    calls_case,
    driver,
    open_net_server,
    read_fd,
    until_closed,
    write_fd,
)
from .workloads import CALL_TOOL_PARAMS

__all__ = ["DESCRIPTION", "cases", "unavailable"]

DESCRIPTION: Final = "calls/s over Streamable HTTP (h11) at 1 and 100 in flight"

IN_FLIGHT: Final = 100
PATH: Final = "/mcp"
_CHUNK: Final = 65_536


def unavailable() -> str | None:
    """Why this group cannot run here (never: h11 is a dependency)."""
    return None


# -- the floor client ----------------------------------------------------------------------


def _sse_data(body: bytes) -> bytes:
    """The data of the one event in an SSE body."""
    return b"\n".join(line[6:] for line in body.split(b"\n") if line.startswith(b"data: "))


_Receive = Callable[[], Awaitable[bytes]]
_Send = Callable[[bytes], Awaitable[object]]


@final
class _HttpFloorClient:
    """POST each request on an idle keep-alive connection, read its answer there.

    Plain: ``send_all`` / ``receive_some`` on the stream. ``tight``: ``os.write`` /
    ``os.read`` on its socket (:func:`write_fd`, :func:`read_fd`): no yield when the
    kernel takes the request, or has the answer, at once.
    """

    def __init__(self, port: int, *, sse: bool, tight: bool) -> None:
        self._port = port
        self._host = f"127.0.0.1:{port}"
        self._sse = sse
        self._tight = tight
        self._idle: list[tuple[_Receive, _Send, h11.Connection]] = []
        self._all: list[trio.SocketStream] = []
        self._last_id = 0

    async def _connect(self) -> tuple[_Receive, _Send, h11.Connection]:
        stream = await trio.open_tcp_stream("127.0.0.1", self._port)
        self._all.append(stream)
        conn = h11.Connection(h11.CLIENT)
        if self._tight:
            fd = stream.socket.fileno()
            return functools.partial(read_fd, fd, _CHUNK), functools.partial(write_fd, fd), conn
        return functools.partial(stream.receive_some, _CHUNK), stream.send_all, conn

    async def call(self) -> Any:
        self._last_id = rid = self._last_id + 1
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": CALL_TOOL_PARAMS}
        )
        link = self._idle.pop() if self._idle else await self._connect()
        receive, send, conn = link
        head = h11.Request(
            method="POST",
            target=PATH,
            headers=[
                ("host", self._host),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("content-length", str(len(body))),
            ],
        )
        await send(_out(conn, head) + _out(conn, h11.Data(data=body)) + _out(conn))
        payload = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await receive())
            elif isinstance(event, h11.Data):
                payload += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.Response):
                assert event.status_code == 200, event
            else:
                raise RuntimeError(f"unexpected {event!r}")
        conn.start_next_cycle()
        self._idle.append(link)
        answer = orjson.loads(_sse_data(payload) if self._sse else payload)
        assert answer["id"] == rid, answer
        return answer["result"]

    async def aclose(self) -> None:
        for stream in self._all:
            await trio.aclose_forcefully(stream)


def _out(conn: h11.Connection, event: h11.Event | None = None) -> bytes:
    data = conn.send(h11.EndOfMessage() if event is None else event)
    assert data is not None
    return data


async def _floor(
    sse: bool, in_flight: int, *, tight: bool = False, task_status: trio.TaskStatus[Driver]
) -> None:
    kind = f"http-floor{'-tight' if tight else ''}-{'sse' if sse else 'json'}"
    async with open_net_server(kind) as (port, pid):
        client = _HttpFloorClient(port, sse=sse, tight=tight)
        try:
            await client.call()
            task_status.started(driver(client.call, in_flight=in_flight, server_pid=pid))
            await until_closed()
        finally:
            await client.aclose()


# -- mcp_trio ------------------------------------------------------------------------------


async def _ours(sse: bool, in_flight: int, *, task_status: trio.TaskStatus[Driver]) -> None:
    transport = HttpTransportConfig(
        max_client_connections=max(in_flight, 16), max_idle_connections=max(in_flight, 4)
    )
    async with (
        open_net_server("http-sse" if sse else "http-json") as (port, pid),
        open_http_client(
            f"http://127.0.0.1:{port}{PATH}", connection_config=CLIENT_CONFIG, transport=transport
        ) as client,
    ):
        call = functools.partial(client.request, "tools/call", CALL_TOOL_PARAMS)
        await call()

        def quiet() -> bool:
            return client.statistics().waiting_requests == 0

        task_status.started(driver(call, in_flight=in_flight, quiet=quiet, server_pid=pid))
        await until_closed()


# -- the group -----------------------------------------------------------------------------


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, floors first."""
    del settings  # --quick only shrinks the rounds
    found: list[Case | Skip] = []
    for sse, kind in ((False, "json"), (True, "sse")):
        floor = f"http.floor.{kind}"
        tight = f"http.floor.tight.{kind}"
        ours = "http.calls" if kind == "json" else "http.calls.sse"
        media = "text/event-stream" if sse else "application/json"
        found += [
            calls_case(
                f"{floor}.1",
                f"floor: trio + h11 POST echo child, {media}, 1 in flight",
                _floor,
                sse,
                in_flight=1,
            ),
            calls_case(
                f"{floor}.100",
                f"floor: the same, {media}, 100 in flight (100 connections)",
                _floor,
                sse,
                in_flight=IN_FLIGHT,
            ),
            calls_case(
                f"{tight}.1",
                f"tight floor: the same through os.read / os.write, {media}, 1 in flight",
                functools.partial(_floor, tight=True),
                sse,
                in_flight=1,
                reference=f"{floor}.1",
            ),
            calls_case(
                f"{tight}.100",
                f"tight floor: the same, {media}, 100 in flight (100 connections)",
                functools.partial(_floor, tight=True),
                sse,
                in_flight=IN_FLIGHT,
                reference=f"{floor}.100",
            ),
            calls_case(
                f"{ours}.1",
                f"open_http_client + serve_http (Handlers), legacy, {media}, 1 in flight",
                _ours,
                sse,
                in_flight=1,
                reference=f"{floor}.1",
                tight=f"{tight}.1",
            ),
            calls_case(
                f"{ours}.100",
                f"the same, {media}, 100 in flight (100 connections)",
                _ours,
                sse,
                in_flight=IN_FLIGHT,
                reference=f"{floor}.100",
                tight=f"{tight}.100",
            ),
        ]
    return found

"""Shared pieces of the Streamable HTTP binding tests (this module holds no tests).

Real sockets on 127.0.0.1, port 0. Tests that need time to pass use a ``MockClock`` at
real-time rate and ``jump`` it (never ``sleep``): socket I/O still works, and every
timeout in the server and client runs on that clock.
"""

from __future__ import annotations

import queue
import re
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar

import attrs
import h11
import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig, InputRequired
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpServerConfig
from mcp_trio import Handlers, InputRequiredResult, RequestTimeout, SessionConfig
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_context import HttpRequestContext
from mcp_trio._http_server import HttpServeHandle, serve_http
from mcp_trio._http_wire import H11Stream

from .helpers import CLIENT_CAPS

IO_TIMEOUT = 10

_T = TypeVar("_T")


@contextmanager
def served_in_thread(start: Callable[[trio.Nursery], Awaitable[_T]]) -> Iterator[_T]:
    """What ``start(nursery)`` returns, serving in a Trio run of its own in another
    thread (for blocking callers: the CLI's ``main``) until the block ends."""
    started: queue.Queue[tuple[_T, trio.lowlevel.TrioToken, trio.CancelScope]] = queue.Queue()

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            value = await start(nursery)
            started.put((value, trio.lowlevel.current_trio_token(), nursery.cancel_scope))
            await trio.sleep_forever()

    thread = threading.Thread(target=trio.run, args=(serve,))
    thread.start()
    value, token, scope = started.get(timeout=IO_TIMEOUT)
    try:
        yield value
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(IO_TIMEOUT)


LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SERVER_CAPS: dict[str, Any] = {
    "tools": {"listChanged": True},
    "logging": {},
    "resources": {"subscribe": True},
}
ERAS = ["legacy", "modern", "auto"]


def server_connection_config(**kwargs: Any) -> ConnectionConfig:
    return ConnectionConfig(
        implementation={"name": "http-test-server", "version": "1"},
        capabilities=SERVER_CAPS,
        **kwargs,
    )


def client_connection_config(era: str = "auto", **kwargs: Any) -> ConnectionConfig:
    return ConnectionConfig(
        implementation={"name": "http-test-client", "version": "1"},
        capabilities=CLIENT_CAPS,
        era=era,  # type: ignore[arg-type]
        **kwargs,
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def text_of(result: dict[str, Any]) -> str:
    content = result["content"][0]
    assert isinstance(content["text"], str)
    return content["text"]


@attrs.define
class App:
    """A handler table whose tools let tests steer and observe the server."""

    handlers: Handlers = attrs.field(factory=Handlers)
    started: list[HttpRequestContext] = attrs.field(factory=list)
    started_event: trio.Event = attrs.field(factory=trio.Event)
    release: trio.Event = attrs.field(factory=trio.Event)
    cancelled: list[Any] = attrs.field(factory=list)
    cancelled_event: trio.Event = attrs.field(factory=trio.Event)
    arrived: int = 0
    all_arrived: trio.Event = attrs.field(factory=trio.Event)
    expected: int = 0

    def __attrs_post_init__(self) -> None:
        self.handlers.set_request_handler("tools/call", self.tools_call)
        self.handlers.set_request_handler("tools/list", self.tools_list)

    async def tools_list(self, ctx: Any) -> dict[str, Any]:
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}

    async def tools_call(self, ctx: Any) -> dict[str, Any] | InputRequiredResult:
        assert isinstance(ctx, HttpRequestContext)
        params = ctx.params or {}
        name, args = params["name"], params.get("arguments") or {}
        if name == "echo":
            return _text(str(args.get("text", "")))
        if name == "progress":
            for step in range(1, int(args["steps"]) + 1):
                await ctx.report_progress(step, args["steps"])
            return _text("done")
        if name == "block":
            self.started.append(ctx)
            self.started_event.set()
            try:
                if args.get("progress"):
                    await ctx.report_progress(1)
                await self.release.wait()
                if args.get("progress"):
                    await ctx.report_progress(2)
            except trio.Cancelled:
                self.cancelled.append(ctx.request_id)
                self.cancelled_event.set()
                raise
            return _text("released")
        if name == "barrier":
            self.arrived += 1
            if self.arrived >= self.expected:
                self.all_arrived.set()
            await self.all_arrived.wait()
            return _text(f"{args['i']}")
        if name == "sample":
            self.started.append(ctx)
            self.started_event.set()
            try:
                answer = await ctx.send_request(
                    "sampling/createMessage",
                    {
                        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                        "maxTokens": 5,
                    },
                    timeout=args.get("timeout"),
                )
            except RequestTimeout:
                return _text("timed out")
            except trio.Cancelled:
                self.cancelled.append(ctx.request_id)
                self.cancelled_event.set()
                raise
            return _text(answer["content"]["text"])
        if name == "ask":
            if ctx.input_responses is None:
                ask = {"where": {"method": "roots/list", "params": {}}}
                return InputRequiredResult(input_requests=ask, state={"asked": 1})
            assert ctx.request_state == {"asked": 1}
            return _text(ctx.input_responses["where"]["roots"][0]["uri"])
        if name == "flood":
            try:
                for step in range(1, 10_000):
                    await ctx.report_progress(step, message="x" * 100_000)
            except trio.Cancelled:
                self.cancelled.append(ctx.request_id)
                self.cancelled_event.set()
                raise
            return _text("flooded")
        if name == "log":
            sent = await ctx.log("info", {"msg": "hello"})
            return _text(str(sent))
        raise ValueError(f"unknown tool {name}")


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def client_handlers() -> Handlers:
    """The client side: answers sampling and roots requests."""
    handlers = Handlers()

    @handlers.on_request("sampling/createMessage")
    async def sample(ctx: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}

    @handlers.on_request("roots/list")
    async def roots(ctx: Any) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///srv"}]}

    return handlers


async def provide_roots(event: InputRequired) -> dict[str, Any]:
    return {"where": {"roots": [{"uri": "file:///srv"}]}}


async def start_server(
    nursery: trio.Nursery,
    app: App | None = None,
    *,
    era: str = "auto",
    http: dict[str, Any] | None = None,
    transport: HttpTransportConfig | None = None,
    config: SessionConfig | None = None,
    **kwargs: Any,
) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            (app or App()).handlers,
            connection_config=server_connection_config(era=era),
            http_config=HttpServerConfig(**(http or {})),
            transport=transport,
            config=config,
            **kwargs,
        )
    )
    return handle


# ------------------------------------------------------------------------- raw HTTP


@attrs.frozen
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return loads(self.body)


def rpc(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)


def initialize_body(rid: int = 1) -> bytes:
    return rpc(
        rid,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    )


POST_HEADERS = (
    ("accept", "application/json, text/event-stream"),
    ("content-type", "application/json"),
)


def modern(rid: int, tool: str, **arguments: Any) -> tuple[tuple[tuple[str, str], ...], bytes]:
    """The headers and body of a 2026-07-28 ``tools/call`` (no session, anonymous)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = (
        *POST_HEADERS,
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    )
    return headers, rpc(rid, "tools/call", {**call(tool, **arguments), "_meta": meta})


class RawConnection:
    """A hand-driven HTTP/1.1 client connection (h11) for status-code tests."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.informational: list[int] = []

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(
        self,
        method: str,
        target: str = "/mcp",
        headers: tuple[tuple[str, str], ...] = POST_HEADERS,
        body: bytes = b"",
        *,
        host: str = "127.0.0.1",
        chunked: bool = False,
    ) -> None:
        all_headers = [("host", host), *headers]
        if chunked:
            all_headers.append(("transfer-encoding", "chunked"))
        elif body or method == "POST":
            all_headers.append(("content-length", str(len(body))))
        data = self.h11.send(h11.Request(method=method, target=target, headers=all_headers)) or b""
        if body:
            data += self.h11.send(h11.Data(data=body)) or b""
        data += self.h11.send(h11.EndOfMessage()) or b""
        await self.stream.send_all(data)

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
                continue
            return event

    async def head(self) -> h11.Response:
        event = await self.next_event()
        while isinstance(event, h11.InformationalResponse):
            self.informational.append(event.status_code)
            event = await self.next_event()
        assert isinstance(event, h11.Response), event
        return event

    async def body(self) -> bytes:
        """The rest of the current response's body, to its end."""
        body = bytearray()
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        return bytes(body)

    async def response(self) -> RawResponse:
        head = await self.head()
        body = await self.body()
        return RawResponse(
            status=head.status_code,
            headers={k.decode(): v.decode() for k, v in head.headers},
            body=body,
        )

    async def read_data(self) -> bytes:
        event = await self.next_event()
        assert isinstance(event, h11.Data), event
        return bytes(event.data)

    def next_cycle(self) -> None:
        self.h11.start_next_cycle()

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


async def raw_request(port: int, method: str, target: str = "/mcp", **kwargs: Any) -> RawResponse:
    conn = await RawConnection.open(port)
    try:
        await conn.send(method, target, **kwargs)
        return await conn.response()
    finally:
        await conn.aclose()


def server_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Record, in order, what the server writes without waiting (``write_nowait``: its
    writes on plain TCP); the client's writes are left out."""
    writes: list[bytes] = []
    original = H11Stream.write_nowait

    def spy(self: H11Stream, data: bytes) -> bytes | memoryview:
        if self.h11.our_role is h11.SERVER:
            writes.append(bytes(data))
        return original(self, data)

    monkeypatch.setattr(H11Stream, "write_nowait", spy)
    return writes


def session_headers(sid: str) -> tuple[tuple[str, str], ...]:
    """A legacy POST's headers in the session ``sid`` (started by :func:`raw_session`)."""
    return (*POST_HEADERS, ("mcp-session-id", sid), ("mcp-protocol-version", LEGACY))


async def raw_session(port: int) -> str:
    """A legacy session started by hand (initialize + initialized); returns its id."""
    response = await raw_request(port, "POST", body=initialize_body())
    assert response.status == 200, response
    sid = response.headers["mcp-session-id"]
    note = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    headers = session_headers(sid)
    assert (await raw_request(port, "POST", headers=headers, body=note)).status == 202
    return sid


async def unread_get_stream(port: int) -> RawConnection:
    """A legacy session's GET stream whose client reads nothing (a small receive buffer,
    so the server's writes back up soon): the connection, its request sent and the
    server settled."""
    sid = await raw_session(port)
    conn = await RawConnection.open(port)
    conn.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    headers = (
        ("accept", "text/event-stream"),
        ("mcp-session-id", sid),
        ("mcp-protocol-version", LEGACY),
    )
    await conn.send("GET", headers=headers)
    await trio.testing.wait_all_tasks_blocked()
    return conn


# ---------------------------------------------------------------------- fake servers


Route: TypeAlias = Callable[
    [str, str, dict[str, str], bytes], Awaitable[tuple[int, list[tuple[str, str]], bytes]]
]
"""``async (method, target, headers, body) -> (status, headers, body)``: a fake server."""


async def serve_routes(route: Route, stream: trio.SocketStream) -> None:
    """One connection of a hand-written HTTP/1.1 server (keep-alive): each request's
    answer is ``route``'s, with its ``content-length``; a client that leaves ends it."""
    conn = h11.Connection(h11.SERVER)
    while True:
        head: h11.Request | None = None
        body = b""
        while not isinstance(event := conn.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                try:
                    data = await stream.receive_some(65536)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            else:
                return
        assert head is not None
        headers = {k.decode(): v.decode() for k, v in head.headers}
        status, out_headers, payload = await route(
            head.method.decode(), head.target.decode(), headers, body
        )
        all_headers = [*out_headers, ("content-length", str(len(payload)))]
        out = [
            conn.send(h11.Response(status_code=status, headers=all_headers)),
            conn.send(h11.Data(data=payload)) if payload else b"",
            conn.send(h11.EndOfMessage()),
        ]
        try:
            await stream.send_all(b"".join(part for part in out if part))
        except trio.BrokenResourceError:
            return
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return
        conn.start_next_cycle()


async def read_request(
    conn: h11.Connection, stream: trio.SocketStream
) -> tuple[h11.Request, Any] | None:
    """A hand-written server's next request: its head and its JSON body (``None`` for
    an empty one), or ``None`` once the client has gone."""
    head: h11.Request | None = None
    body = b""
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            if not data:
                return None
            conn.receive_data(data)
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, loads(body) if body else None
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def respond(
    conn: h11.Connection,
    stream: trio.SocketStream,
    payload: bytes,
    *,
    status: int = 200,
    headers: tuple[tuple[str, str], ...] = (),
) -> None:
    """Answer the request just read: ``payload`` with its ``Content-Length``, head and
    body in one write."""
    all_headers = [*headers, ("content-length", str(len(payload)))]
    events = (h11.Response(status_code=status, headers=all_headers), h11.Data(data=payload))
    out = [conn.send(e) for e in (*events, h11.EndOfMessage())]
    await stream.send_all(b"".join(part for part in out if part))


async def fake_server_url(nursery: trio.Nursery, handler: Any) -> str:
    """Serve ``handler`` (one call per connection) on loopback; its MCP endpoint URL."""
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"


@attrs.frozen
class SeenRequest:
    """A request that went through a :class:`Proxy`."""

    method: str
    headers: dict[str, str]
    body: bytes

    @property
    def message(self) -> Any:
        return loads(self.body) if self.body else None

    @property
    def rpc_method(self) -> str | None:
        message = self.message
        return message.get("method") if isinstance(message, dict) else None


class _Recorder:
    """Parses one connection's upstream bytes into :class:`SeenRequest` s, as a server
    would (answering each with a pretend ``204`` so h11 reads the next)."""

    def __init__(self, seen: list[SeenRequest]) -> None:
        self.seen = seen
        self.h11: h11.Connection | None = h11.Connection(h11.SERVER)
        self.head: h11.Request | None = None
        self.body = bytearray()

    def feed(self, data: bytes) -> None:
        conn = self.h11
        if conn is None:
            return
        try:
            conn.receive_data(data)
            while True:
                event = conn.next_event()
                if isinstance(event, h11.Request):
                    self.head, self.body = event, bytearray()
                elif isinstance(event, h11.Data):
                    self.body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    assert self.head is not None
                    headers = {k.decode(): v.decode() for k, v in self.head.headers}
                    self.seen.append(
                        SeenRequest(self.head.method.decode(), headers, bytes(self.body))
                    )
                    conn.send(h11.Response(status_code=204, headers=[]))
                    conn.send(h11.EndOfMessage())
                    conn.start_next_cycle()
                else:
                    return
        except h11.ProtocolError:
            self.h11 = None  # (a connection closed after its request: nothing more to see)


_FORGOTTEN = (
    b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
    b"connection: close\r\n\r\n%s"
)
_NO_SESSION = dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Not Found: no session"}}
)


class Proxy:
    """A TCP proxy in front of the server; :meth:`cut` drops every connection open now.

    ``forget`` plays a server that forgets every session at once: each request that
    carries ``Mcp-Session-Id`` (``"requests"``: each JSON-RPC request that does) is
    answered ``404`` by the proxy itself, as the first request of its connection (so
    clients using it keep no idle connections). With ``hold_404`` set, such a ``404``
    sends its head, sets ``held_404``, and sends its body once ``hold_404`` is set. Set
    ``target`` to send new connections to another server (one that restarted, say).
    """

    def __init__(
        self,
        target: int,
        *,
        redirect: tuple[bytes, bytes] | None = None,
        forget: Literal["all", "requests"] | None = None,
    ) -> None:
        self.target = target
        self.redirect = redirect
        """``(path, location)``: answer requests for ``path`` with ``308`` to ``location``."""
        self.forget = forget
        self.hold_404: trio.Event | None = None
        self.held_404 = trio.Event()
        self.port = 0
        self.scopes: set[trio.CancelScope] = set()
        self.upstream = bytearray()
        """Everything clients sent (to check what went over the wire)."""
        self.seen: list[SeenRequest] = []
        """Every request clients sent, parsed, in the order they were complete."""

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]

    def url(self, path: str = "/mcp") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, client: trio.SocketStream) -> None:
        try:
            await self._forward(client)
        finally:
            await trio.aclose_forcefully(client)

    async def _forward(self, client: trio.SocketStream) -> None:
        first = await (self._whole_request(client) if self.forget else client.receive_some(65536))
        recorder = _Recorder(self.seen)
        recorder.feed(first)
        if self.forget and self._forgets(first):
            head, _, body = (_FORGOTTEN % (len(_NO_SESSION), _NO_SESSION)).partition(b"\r\n\r\n")
            await client.send_all(head + b"\r\n\r\n")
            if (hold := self.hold_404) is not None:
                self.held_404.set()
                await hold.wait()
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await client.send_all(body)  # (the client may have gone meanwhile)
            return
        if self.redirect is not None and first.split(b" ", 2)[1:2] == [self.redirect[0]]:
            await client.send_all(
                b"HTTP/1.1 308 Permanent Redirect\r\nlocation: "
                + self.redirect[1]
                + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            return
        self.upstream += first
        server = await trio.open_tcp_stream("127.0.0.1", self.target)
        scope = trio.CancelScope()
        self.scopes.add(scope)
        try:
            await server.send_all(first)
            with scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pipe, client, server, recorder, nursery.cancel_scope)
                    nursery.start_soon(self._pipe, server, client, None, nursery.cancel_scope)
        finally:
            self.scopes.discard(scope)
            await trio.aclose_forcefully(server)

    async def _pipe(
        self,
        src: trio.SocketStream,
        dst: trio.SocketStream,
        up: _Recorder | None,
        scope: trio.CancelScope,
    ) -> None:
        try:
            while data := await src.receive_some(65536):
                if up is not None:
                    self.upstream += data
                    up.feed(data)
                await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        scope.cancel()

    @staticmethod
    async def _whole_request(client: trio.SocketStream) -> bytes:
        data = bytearray()
        while b"\r\n\r\n" not in data and (chunk := await client.receive_some(65536)):
            data += chunk
        head = bytes(data).partition(b"\r\n\r\n")[0]
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        size = len(head) + 4 + (int(found.group(1)) if found else 0)
        while len(data) < size and (chunk := await client.receive_some(65536)):
            data += chunk
        return bytes(data)

    def _forgets(self, request: bytes) -> bool:
        head, _, body = request.partition(b"\r\n\r\n")
        if b"\r\nmcp-session-id:" not in head.lower():
            return False
        if self.forget == "all":
            return True
        message = loads(body) if body else None
        return isinstance(message, dict) and "id" in message and "method" in message

    def cut(self) -> None:
        for scope in list(self.scopes):
            scope.cancel()


async def start_proxied(
    nursery: trio.Nursery, app: App | None = None, **server_options: Any
) -> Proxy:
    """:func:`start_server` behind a started :class:`Proxy` (connect to ``proxy.url()``)."""
    server = await start_server(nursery, app, **server_options)
    proxy = Proxy(server.port)
    await proxy.start(nursery)
    return proxy

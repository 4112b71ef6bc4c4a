"""The WebSocket transport over real sockets on 127.0.0.1 (port 0), real clock, with an
absolute ``fail_after`` on every test."""

from __future__ import annotations

import ipaddress
import logging
import socket
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest
import trio
import trio.testing
import trio_websocket
import trio_websocket._impl
import wsproto.events

from mcp_sansio._json import dumps, loads
from mcp_trio import (
    MCP_PATH,
    SUBPROTOCOL,
    BearerAuth,
    Handlers,
    NotificationContext,
    Principal,
    RequestContext,
    Session,
    SessionClosed,
    SessionConfig,
    WebSocketChannel,
    open_client,
    open_websocket_client,
    serve_websocket,
)
from mcp_trio._websocket import _open_ws

from .helpers import client_config, server_config
from .websocket_support import handshake_request

IO_TIMEOUT = 10


@asynccontextmanager
async def raw(
    url: str, subprotocols: tuple[str, ...] = (SUBPROTOCOL,), queue: int = 1
) -> AsyncIterator[Any]:
    """A plain WebSocket client (no MCP session) over a stream the test owns."""
    async with _open_ws(
        url,
        subprotocols=list(subprotocols),
        max_message_size=1 << 20,
        connect_timeout=IO_TIMEOUT,
        message_queue_size=queue,
    ) as (ws, _, _):
        yield ws


def rejection(exc: BaseException) -> trio_websocket.ConnectionRejected:
    cause = exc.__cause__
    assert isinstance(cause, BaseExceptionGroup)
    found = cause.subgroup(trio_websocket.ConnectionRejected)
    assert found is not None
    first = found.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, trio_websocket.ConnectionRejected)
    return first


def echo_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def echo(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        return {"content": [{"type": "text", "text": ctx.params["arguments"]["text"]}]}

    return handlers


class Server:
    def __init__(self, port: int) -> None:
        self.port = port
        self.sessions: list[Session] = []
        self.connected = trio.Event()

    def url(self, path: str = MCP_PATH) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[Server]:
    yield await _start_server(nursery, SessionConfig(ws_max_message_size=1024))


async def _start_server(nursery: trio.Nursery, config: SessionConfig) -> Server:
    holder: list[Server] = []

    async def on_session(session: Session) -> None:
        holder[0].sessions.append(session)
        holder[0].connected.set()
        await trio.sleep_forever()

    handle = await nursery.start(
        lambda task_status: serve_websocket(
            echo_handlers(),
            "127.0.0.1",
            0,
            config=config,
            connection_config=server_config(),
            on_session=on_session,
            task_status=task_status,
        )
    )
    holder.append(Server(handle.port))
    return holder[0]


async def test_request_over_websocket(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        for era in ("legacy", "modern"):
            async with open_websocket_client(
                server.url(), connection_config=client_config(era=era)
            ) as session:
                result = await session.request(
                    "tools/call", {"name": "echo", "arguments": {"text": era}}
                )
                assert result["content"][0]["text"] == era
                channel = session.channel
                assert channel.ws.subprotocol == SUBPROTOCOL  # type: ignore[attr-defined]
        assert len(server.sessions) == 2


async def test_binary_frame_closes_with_1003(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with raw(server.url()) as ws:
            await ws.send_message(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
            with pytest.raises(trio_websocket.ConnectionClosed) as info:
                await ws.get_message()
            assert info.value.reason is not None
            assert info.value.reason.code == 1003
        (session,) = server.sessions
        await session.wait_closed()
        assert session.close_reason is not None
        assert "binary frame" in session.close_reason.reason


async def test_oversize_message_closes_with_1009(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with raw(server.url()) as ws:
            big = {"jsonrpc": "2.0", "method": "x", "params": {"pad": "a" * 2000}}
            await ws.send_message(dumps(big).decode())
            with pytest.raises(trio_websocket.ConnectionClosed) as info:
                await ws.get_message()
            assert info.value.reason is not None
            assert info.value.reason.code == 1009


async def test_text_frames_carry_one_message_each(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with raw(server.url()) as ws:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            await ws.send_message(dumps(init).decode())
            message = await ws.get_message()
            assert isinstance(message, str)
            assert loads(message)["result"]["serverInfo"]["name"] == "test-server"


async def test_subprotocol_and_path_are_required(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with raw(server.url(), subprotocols=()):
                raise AssertionError("unreachable")
        assert rejection(info.value).status_code == 400
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with open_websocket_client(server.url("/elsewhere")):
                raise AssertionError("unreachable")
        assert rejection(info.value).status_code == 404
        assert str(info.value) == (
            "the WebSocket handshake failed: the server answered HTTP 404"
            " (not found: MCP is served at /mcp)"
        )


async def test_client_requires_the_subprotocol(nursery: trio.Nursery) -> None:
    async def plain(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept()  # no subprotocol
        with pytest.raises(trio_websocket.ConnectionClosed):
            await ws.get_message()

    with trio.fail_after(IO_TIMEOUT):

        async def handle(stream: trio.SocketStream) -> None:
            async with trio.open_nursery() as ws_nursery:
                request = await trio_websocket.wrap_server_stream(ws_nursery, stream)
                await plain(request)
                ws_nursery.cancel_scope.cancel()
            await stream.aclose()

        listeners = await nursery.start(trio.serve_tcp, handle, 0)
        port = listeners[0].socket.getsockname()[1]
        with pytest.raises(SessionClosed, match="subprotocol"):
            async with open_websocket_client(f"ws://127.0.0.1:{port}/mcp"):
                raise AssertionError("unreachable")


async def test_keepalive_closes_a_peer_that_stops_answering_pings(nursery: trio.Nursery) -> None:
    config = SessionConfig(ws_ping_interval=0.05, ws_ping_timeout=0.2, close_timeout=0.2)
    server = await _start_server(nursery, config)
    with trio.fail_after(IO_TIMEOUT):
        # A raw client that never reads: its one-slot message queue fills with the
        # two answers, its reader blocks, and the server's pings go unanswered.
        async with raw(server.url(), queue=0) as ws:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            await ws.send_message(dumps(init).decode())
            await ws.send_message(dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).decode())
            await server.connected.wait()
            (session,) = server.sessions
            await session.wait_closed()
            assert session.close_reason is not None
            assert "1011" in session.close_reason.reason


async def test_keepalive_keeps_a_healthy_connection(nursery: trio.Nursery) -> None:
    config = SessionConfig(ws_ping_interval=0.02, ws_ping_timeout=1)
    server = await _start_server(nursery, config)
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            server.url(), config=config, connection_config=client_config()
        ) as session:
            for i in range(5):
                await trio.sleep(0.03)  # let pings go both ways
                result = await session.request(
                    "tools/call", {"name": "echo", "arguments": {"text": str(i)}}
                )
                assert result["content"][0]["text"] == str(i)
            assert not session.closed


async def test_a_cancelled_client_block_exits_without_waiting_for_the_close_reply(
    server: Server,
) -> None:
    # Cancelling the block also cancels trio-websocket's reader task, so nobody reads the
    # server's close reply: the close must not wait its whole close_timeout for it.
    # (The close is shielded, so a wait for the reply would outlast fail_after, then fail.)
    config = SessionConfig(close_timeout=2 * IO_TIMEOUT)
    with trio.fail_after(IO_TIMEOUT):
        with trio.CancelScope() as scope:
            async with open_websocket_client(
                server.url(), config=config, connection_config=client_config()
            ) as session:
                await server.connected.wait()
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        # The server saw the close frame the client sent before it stopped waiting.
        with trio.fail_after(IO_TIMEOUT):
            await server.sessions[0].wait_closed()
    assert session.closed


async def test_a_server_that_closes_during_the_handshake_fails_the_client_at_once(
    nursery: trio.Nursery,
) -> None:
    async def hang_up(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)  # the upgrade request
        await stream.aclose()

    listeners = await nursery.start(trio.serve_tcp, hang_up, 0)
    port = listeners[0].socket.getsockname()[1]
    # Without noticing that trio-websocket's reader ended, the client would wait for the
    # handshake until ws_connect_timeout.
    config = SessionConfig(ws_connect_timeout=2 * IO_TIMEOUT)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(SessionClosed, match="during the WebSocket"):
        async with open_websocket_client(
            f"ws://127.0.0.1:{port}{MCP_PATH}", config=config, connection_config=client_config()
        ):
            pass  # pragma: no cover - the handshake fails first


async def test_a_refused_connection_is_session_closed() -> None:
    # As over HTTP, and as open_client documents: not a bare OSError.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(SessionClosed, match="could not connect") as info:
            async with open_websocket_client(f"ws://127.0.0.1:{port}/mcp"):
                raise AssertionError("connected")  # pragma: no cover
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(SessionClosed, match="could not connect"):
        async with open_client(f"ws://127.0.0.1:{port}/mcp"):
            raise AssertionError("connected")  # pragma: no cover


# ================================================================== authentication


async def _verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    if token == "boom":
        raise ValueError(f"invalid literal for int(): {token!r}")  # (the token in its text)
    return Principal(subject="alice", scopes="mcp") if token == "s3cret" else None


async def _start_protected(
    nursery: trio.Nursery, authenticate: Any
) -> tuple[Server, list[Principal | None]]:
    seen: list[Principal | None] = []  # what the notification handler saw

    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def whoami(ctx: RequestContext) -> dict[str, Any]:
        principal = ctx.principal
        text = "nobody" if principal is None else principal.subject
        return {"content": [{"type": "text", "text": text}]}

    async def noted(ctx: NotificationContext) -> None:
        seen.append(ctx.principal)
        await trio.lowlevel.checkpoint()

    handlers.set_notification_handler("notifications/roots/list_changed", noted)
    handle = await nursery.start(
        lambda task_status: serve_websocket(
            handlers,
            "127.0.0.1",
            0,
            config=SessionConfig(ws_connect_timeout=5),
            connection_config=server_config(),
            authenticate=authenticate,
            task_status=task_status,
        )
    )
    return Server(handle.port), seen


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_handshake_is_authenticated(nursery: trio.Nursery, era: str) -> None:
    # The WebSocket server had no way to check a token: it served anybody.
    auth = BearerAuth(verify_token=_verify, resource_metadata_url="https://m.example/.wk")
    server, seen = await _start_protected(nursery, auth)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with open_websocket_client(server.url()):
                raise AssertionError("unreachable")
        refused = rejection(info.value)
        assert refused.status_code == 401
        challenge = dict(refused.headers or []).get(b"www-authenticate", b"")
        assert b'resource_metadata="https://m.example/.wk"' in challenge
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with open_websocket_client(server.url(), headers={"Authorization": "Bearer x"}):
                raise AssertionError("unreachable")
        assert rejection(info.value).status_code == 401
        async with open_websocket_client(
            server.url(),
            headers={"Authorization": "Bearer s3cret"},
            connection_config=client_config(era=era),
        ) as session:
            result = await session.request("tools/call", {"name": "whoami", "arguments": {}})
            assert result["content"][0]["text"] == "alice"
            if era == "legacy":
                await session.notify("notifications/roots/list_changed")
                await session.request("ping")  # (answered after the notification is taken)
                await trio.testing.wait_all_tasks_blocked()
                assert seen == [Principal(subject="alice", scopes="mcp")]


async def test_a_failing_or_slow_hook_refuses_the_handshake(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    auth = BearerAuth(verify_token=_verify)
    server, _ = await _start_protected(nursery, auth)
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.DEBUG, "mcp_trio"):
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with open_websocket_client(
                server.url(), headers={"Authorization": "Bearer boom"}
            ):
                raise AssertionError("unreachable")
        assert rejection(info.value).status_code == 500
    assert "the authenticate hook failed for WebSocket /mcp: ValueError" in caplog.text
    errors = "".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert "boom" not in errors  # (the traceback, token and all, is at DEBUG only)


async def test_a_slow_hook_is_503(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def hang(request: Any) -> Principal:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    server, _ = await _start_protected(nursery, hang)
    with trio.fail_after(IO_TIMEOUT * 10):
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with open_websocket_client(server.url()):
                raise AssertionError("unreachable")
        refused = rejection(info.value)
    assert refused.status_code == 503 and dict(refused.headers or [])[b"retry-after"] == b"1"


async def test_a_refusal_cut_short_goes_no_further(
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The 404 of a wrong path cut short by ws_connect_timeout (a peer that does not read:
    # the write blocks) went on to the auth hook and to accept a rejected handshake.
    real_send = trio_websocket._impl.WebSocketConnection._send

    async def blocked_reject(self: Any, event: Any) -> None:
        if isinstance(event, wsproto.events.RejectConnection):
            self._wsproto.send(event)  # the state moves first, as in the real _send
            await trio.sleep_forever()  # then the write blocks
        await real_send(self, event)

    monkeypatch.setattr(trio_websocket._impl.WebSocketConnection, "_send", blocked_reject)
    asked: list[str] = []

    async def hook(request: Any) -> Principal:
        asked.append(request.target)
        return Principal(subject="x")

    server, _ = await _start_protected(nursery, hook)
    with caplog.at_level(logging.DEBUG, "mcp_trio"):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(handshake_request("x", path="/other"))
        await trio.sleep(20)  # (virtual) past ws_connect_timeout
        await stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
    assert asked == []
    assert "connection failed" not in caplog.text


async def test_the_channel_gives_both_ends_addresses(server: Server) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            server.url(), connection_config=client_config()
        ) as session:
            await server.connected.wait()
            client, served = session.channel, server.sessions[0].channel
            assert isinstance(client, WebSocketChannel) and isinstance(served, WebSocketChannel)
            assert client.remote is not None and client.local is not None
            assert served.remote is not None and served.local is not None
            assert (client.remote.address, client.remote.port) == (
                ipaddress.ip_address("127.0.0.1"),
                server.port,
            )
            assert (served.remote.address, served.remote.port) == (
                client.local.address,
                client.local.port,
            )
            assert served.local.port == server.port
            assert not client.remote.is_ssl and not served.remote.is_ssl
        assert client.remote is None  # (closed)


def test_a_channel_without_a_socket_has_no_addresses() -> None:
    ws = cast(
        trio_websocket.WebSocketConnection,
        types.SimpleNamespace(remote="<a memory stream>", local="<a memory stream>"),
    )
    channel = WebSocketChannel(ws)
    assert channel.remote is None and channel.local is None

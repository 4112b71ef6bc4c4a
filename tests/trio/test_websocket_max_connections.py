"""``serve_websocket(max_connections=)`` bounds the TCP connections served at once, as
``HttpTransportConfig.max_connections`` bounds ``serve_http``'s: one more is answered
``503`` at accept, unread and without a session. Real sockets on 127.0.0.1 (port 0)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import (
    MCP_PATH,
    Server,
    Session,
    SessionConfig,
    open_websocket_client,
    serve_websocket,
)

from .helpers import client_config, server_config
from .test_websocket import echo_handlers

IO_TIMEOUT = 10


class _Served:
    def __init__(self, port: int, sessions: list[Session]) -> None:
        self.url = f"ws://127.0.0.1:{port}{MCP_PATH}"
        self.port = port
        self.sessions = sessions


@asynccontextmanager
async def _serving(**kwargs: Any) -> AsyncIterator[_Served]:
    sessions: list[Session] = []

    async def on_session(session: Session) -> None:
        sessions.append(session)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        handle = await nursery.start(
            lambda task_status: serve_websocket(
                echo_handlers(),
                connection_config=server_config(),
                on_session=on_session,
                task_status=task_status,
                **kwargs,
            )
        )
        yield _Served(handle.port, sessions)
        nursery.cancel_scope.cancel()


async def _echo(session: Session, text: str) -> str:
    result = await session.request("tools/call", {"name": "echo", "arguments": {"text": text}})
    return str(result["content"][0]["text"])


async def _turned_away(port: int) -> bytes:
    """What the server says to one more TCP connection (read to its end)."""
    extra = await trio.open_tcp_stream("127.0.0.1", port)
    answer = b""
    async with extra:
        while chunk := await extra.receive_some(4096):
            answer += chunk
    return answer


def _is_503(answer: bytes) -> bool:
    return (
        answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        and b"retry-after: 1\r\n" in answer
        and answer.endswith(b"\r\n\r\n")
    )


async def test_a_connection_over_the_bound_is_turned_away_at_accept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with _serving(max_connections=2) as served, AsyncExitStack() as clients:
            sessions = [
                await clients.enter_async_context(
                    open_websocket_client(served.url, connection_config=client_config())
                )
                for _ in range(2)
            ]
            with caplog.at_level(logging.WARNING, logger="mcp_trio"):
                assert _is_503(await _turned_away(served.port))
            assert [r.getMessage() for r in caplog.records] == [
                "refused a WebSocket connection: 2 are open (max_connections)"
            ]
            assert len(served.sessions) == 2  # (no session for the one turned away)
            assert [await _echo(s, f"still {i}") for i, s in enumerate(sessions)] == [
                "still 0",
                "still 1",
            ]


async def test_a_connection_leaving_makes_room_for_the_next() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with _serving(max_connections=2) as served, AsyncExitStack() as clients:
            first = await clients.enter_async_context(
                open_websocket_client(served.url, connection_config=client_config())
            )
            async with open_websocket_client(served.url, connection_config=client_config()):
                pass
            await trio.testing.wait_all_tasks_blocked()  # (the server's end has finished)
            second = await clients.enter_async_context(
                open_websocket_client(served.url, connection_config=client_config())
            )
            assert _is_503(await _turned_away(served.port))
            assert await _echo(first, "a") == "a"
            assert await _echo(second, "b") == "b"


async def test_a_connection_counts_from_its_accept_until_its_task_ends(
    clock: trio.testing.MockClock,
) -> None:
    # A TCP connection that never sends its handshake holds its place until the
    # handshake times out (ws_connect_timeout), as it holds its task.
    config = SessionConfig(ws_connect_timeout=5)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            _serving(max_connections=2, config=config) as served,
            await trio.open_tcp_stream("127.0.0.1", served.port) as silent,
            open_websocket_client(served.url, connection_config=client_config()) as session,
        ):
            assert _is_503(await _turned_away(served.port))
            assert await _echo(session, "served") == "served"
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(6)
            assert await silent.receive_some(10) == b""  # (closed, the handshake unread)
            await trio.testing.wait_all_tasks_blocked()
            async with open_websocket_client(
                served.url, connection_config=client_config()
            ) as another:
                assert await _echo(another, "room again") == "room again"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
async def test_max_connections_is_a_positive_integer(bad: Any) -> None:
    with trio.fail_after(IO_TIMEOUT):  # (taken, it would serve: fail, not hang)
        with pytest.raises(ValueError, match="max_connections"):
            await serve_websocket(None, max_connections=bad)
        with pytest.raises(ValueError, match="max_connections"):  # (the Server's passes it on)
            await Server("bounded").serve_websocket(max_connections=bad)


async def test_a_connection_that_leaves_before_its_handshake_frees_its_place_at_once() -> None:
    # Without a handshake, only its end tells: trio-websocket would wait for the request
    # until ws_connect_timeout (here an hour), and every client meanwhile be turned away.
    config = SessionConfig(ws_connect_timeout=3600)
    with trio.fail_after(IO_TIMEOUT):
        async with _serving(max_connections=2, config=config) as served:
            for first in (b"", b"GET /mcp HTTP/1.1\r\n", b"not http\r\n\r\n"):
                # (connects and leaves; half a handshake; one wsproto refuses, 400)
                async with await trio.open_tcp_stream("127.0.0.1", served.port) as tcp:
                    if first:
                        await tcp.send_all(first)
                    await trio.testing.wait_all_tasks_blocked()
            await trio.testing.wait_all_tasks_blocked()  # (the server saw each leave)
            async with (
                open_websocket_client(served.url, connection_config=client_config()) as a,
                open_websocket_client(served.url, connection_config=client_config()) as b,
            ):
                assert await _echo(a, "a") == "a"
                assert await _echo(b, "b") == "b"
                assert _is_503(await _turned_away(served.port))  # (still bounded)

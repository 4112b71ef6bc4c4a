"""A :class:`Server` on its transports: stdio (over in-memory streams) and WebSocket."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig
from mcp_sansio.http import HttpServerConfig
from mcp_trio import (
    Handlers,
    NotificationContext,
    Session,
    SessionConfig,
    StreamChannel,
    open_session,
    open_websocket_client,
)
from mcp_trio._server import Server


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test that takes it runs once per era."""
    value: str = request.param
    return value


def make_server() -> Server:
    server = Server("transports")

    @server.tool()
    def double(n: int) -> int:
        return 2 * n

    return server


def listening_client() -> tuple[Handlers, trio.MemoryReceiveChannel[str]]:
    handlers = Handlers()
    send, receive = trio.open_memory_channel[str](8)

    @handlers.on_notification("notifications/tools/list_changed")
    async def changed(ctx: NotificationContext) -> None:
        await send.send(ctx.method)

    return handlers, receive


async def exercise(server: Server, client: Session, era: str, heard: Any) -> None:
    result = await client.request("tools/call", {"name": "double", "arguments": {"n": 21}})
    assert result["structuredContent"] == {"result": 42}
    if era == "legacy":  # the session is watched: changes are announced
        server.add_tool(lambda: "hi", name="hello")
        assert await heard.receive() == "notifications/tools/list_changed"


async def test_serve_stdio(era: str) -> None:
    server = make_server()
    to_server, server_stdin = trio.testing.memory_stream_one_way_pair()
    server_stdout, from_server = trio.testing.memory_stream_one_way_pair()
    hooked: list[Session] = []

    async def on_session(session: Session) -> None:
        hooked.append(session)

    handlers, heard = listening_client()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            served = await nursery.start(
                lambda task_status: server.serve_stdio(
                    on_session=on_session,
                    stdin=server_stdin,
                    stdout=server_stdout,
                    task_status=task_status,
                )
            )
            channel = StreamChannel(to_server, from_server)
            config = ConnectionConfig(era=era)  # type: ignore[arg-type]
            async with open_session(
                channel, "client", handlers=handlers, connection_config=config
            ) as client:
                await client.start()
                await exercise(server, client, era, heard)
                assert hooked == [served]
            # the client is gone: stdin ends and the server returns on its own


async def test_serve_websocket(era: str) -> None:
    server = make_server()
    handlers, heard = listening_client()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = (await nursery.start(server.serve_websocket)).port
            config = ConnectionConfig(era=era)  # type: ignore[arg-type]
            async with open_websocket_client(
                f"ws://127.0.0.1:{port}/mcp", handlers=handlers, connection_config=config
            ) as client:
                await exercise(server, client, era, heard)
            nursery.cancel_scope.cancel()


async def test_serve_http_takes_the_servers_session_config_and_the_configured_endpoint() -> None:
    # Both were ignored: the session config went to stdio and WebSocket only, and the
    # path argument's default overrode HttpServerConfig.endpoint.
    config = SessionConfig(shutdown_grace_period=0.5, max_concurrent_handlers=1)
    server = Server("configured", session_config=config)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(
                partial(server.serve_http, port=0, http_config=HttpServerConfig(endpoint="/x"))
            )
            assert handle.url.endswith("/x")
            assert handle._endpoint.config is config
            other = await nursery.start(partial(server.serve_http, port=0, path="/y"))
            assert other.url.endswith("/y")
            nursery.cancel_scope.cancel()

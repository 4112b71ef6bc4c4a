"""In-memory transport: a client session and a server session in one process.

For tests and for embedding a server in an application. Messages travel through two
bounded ``trio`` memory channels (``SessionConfig.memory_buffer_size`` each way); a
full direction blocks its writer, as a full pipe would.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from mcp_sansio import ConnectionConfig

from ._channel import memory_channel_pair
from ._config import SessionConfig
from ._handlers import Handlers
from ._open import open_session
from ._session import Session

__all__ = ["open_memory_pair"]


@asynccontextmanager
async def open_memory_pair(
    *,
    server_handlers: Handlers | None = None,
    client_handlers: Handlers | None = None,
    server_config: SessionConfig | None = None,
    client_config: SessionConfig | None = None,
    server_connection_config: ConnectionConfig | None = None,
    client_connection_config: ConnectionConfig | None = None,
    start: bool = True,
) -> AsyncGenerator[tuple[Session, Session]]:
    """Open a connected ``(client, server)`` pair of sessions.

    Args:
        server_handlers: the server's handler table.
        client_handlers: the client's handler table (for server-to-client requests).
        server_config: the server's runtime configuration.
        client_config: the client's runtime configuration; its
            ``memory_buffer_size`` sizes both directions.
        server_connection_config: the server core's configuration (declare the
            capabilities your handlers serve, e.g. ``{"tools": {}}``).
        client_connection_config: the client core's configuration.
        start: run the client's handshake before the block starts.

    Resource handling:
        Both sessions are closed when the block exits; no task outlives it.
    """
    buffer = (client_config or SessionConfig()).memory_buffer_size
    client_channel, server_channel = memory_channel_pair(buffer)
    async with (
        open_session(
            server_channel,
            "server",
            handlers=server_handlers,
            config=server_config,
            connection_config=server_connection_config,
        ) as server,
        open_session(
            client_channel,
            "client",
            handlers=client_handlers,
            config=client_config,
            connection_config=client_connection_config,
        ) as client,
    ):
        if start:
            await client.start()
        yield client, server

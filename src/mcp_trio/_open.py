"""Opening sessions: :func:`open_session` and :func:`connect_session`.

trio-websocket's shape: an ``open_*`` async context manager for most callers, and a
``connect_*(nursery, ...)`` for callers who manage the nursery themselves.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from mcp_sansio import ConnectionConfig, Role

from ._channel import MessageChannel
from ._config import SessionConfig
from ._handlers import Handlers
from ._session import Session
from ._util import open_task_nursery

if TYPE_CHECKING:
    from mcp_sansio._http_auth import Principal

__all__ = ["connect_session", "open_session"]


async def connect_session(
    nursery: trio.Nursery,
    channel: MessageChannel,
    role: Role,
    *,
    handlers: Handlers | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    handler_nursery: trio.Nursery | None = None,
    principal: Principal | None = None,
    resource_metadata: str | None = None,
    base_scopes: Collection[str] = (),
    headers: Mapping[str, str] | None = None,
) -> Session:
    """Start a session's tasks in ``nursery`` and return it (for advanced callers).

    The caller must ``await session.aclose()`` (or let the peer close) for the tasks
    to end; :func:`open_session` does that for you.

    Args:
        nursery: where the session's reader, timer and supervisor run.
        channel: the transport.
        role: ``"client"`` or ``"server"``.
        handlers: the handler table (default: empty, every request gets -32601).
        config: runtime bounds and timeouts.
        connection_config: the core's configuration.
        handler_nursery: where handler tasks run (default: the session's own nursery).
            Handlers there are cancelled when the session closes.
        principal: server role: who the transport authenticated the peer as (handlers
            read it as ``ctx.principal``; a modern ``requestState`` is sealed for it).
        resource_metadata: server role: the URL of the protected-resource metadata,
            named in ``insufficient_scope`` errors (``data.resource_metadata``).
        base_scopes: server role: the scopes the transport's authenticator requires
            of every request and checked already (``BearerAuth.required_scopes``):
            an ``insufficient_scope`` error for a request that needs more names them
            too (see ``Session.base_scopes``).
        headers: server role: the header fields of the HTTP request that opened the
            transport (a WebSocket's opening handshake), which handlers read as
            ``ctx.headers``.

    Returns:
        The running session. A client still has to ``await session.start()``.
    """
    session = Session(
        channel,
        role,
        handlers=handlers,
        config=config,
        connection_config=connection_config,
        handler_nursery=handler_nursery,
        principal=principal,
        resource_metadata=resource_metadata,
        base_scopes=base_scopes,
        headers=headers,
    )
    await nursery.start(session._run)
    return session


@asynccontextmanager
async def open_session(
    channel: MessageChannel,
    role: Role,
    *,
    handlers: Handlers | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    handler_nursery: trio.Nursery | None = None,
    principal: Principal | None = None,
    resource_metadata: str | None = None,
    base_scopes: Collection[str] = (),
    headers: Mapping[str, str] | None = None,
) -> AsyncGenerator[Session, None]:
    """Run a session over ``channel`` for the duration of the ``async with`` block.

    Arguments as for :func:`connect_session`.

    Resource handling:
        On exit the session is closed (handlers cancelled, waiters failed with
        :class:`~mcp_trio.SessionClosed`) and the channel is closed; no task of the
        session outlives the block.

    Error handling:
        An exception from the block propagates unchanged. A failure inside the
        runtime (a bug) is raised as :class:`~mcp_trio.SessionClosed` from the
        exception group, never as a bare group.
    """
    async with open_task_nursery("session runtime", cancel_on_exit=False) as nursery:
        session = await connect_session(
            nursery,
            channel,
            role,
            handlers=handlers,
            config=config,
            connection_config=connection_config,
            handler_nursery=handler_nursery,
            principal=principal,
            resource_metadata=resource_metadata,
            base_scopes=base_scopes,
            headers=headers,
        )
        try:
            yield session
        finally:
            session._close_locally()

"""Where :func:`~mcp_trio.open_client` connects: a target turned into a running session.

* a command line (``str``, split with :func:`shlex.split`) or an argument list: stdio
  (a ``.py`` file that cannot be run as a program gets an error that says how to run
  it: unlike ``mcp-trio list``, ``open_client`` does not import a server file);
* ``http://`` / ``https://``: Streamable HTTP (``mcp_trio._http_client``, imported when
  first needed);
* ``ws://`` / ``wss://``: WebSocket;
* an object with ``handlers()`` and ``connection_config()`` (the high-level ``Server``),
  or a ``(Handlers, ConnectionConfig)`` pair: an in-memory server in this process (a
  server with ``connect_in_memory()`` is asked to connect itself, so that it tracks
  the session for its list-changed notifications);
* a :class:`~mcp_trio.MessageChannel`: a transport the caller built.

The session comes back unstarted (no handshake yet) unless the transport insists.
"""

from __future__ import annotations

import importlib
import os
import shlex
import ssl
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import attrs

from mcp_sansio import LEGACY_VERSIONS, MODERN_VERSIONS, ConnectionConfig, LifecycleState

from ._channel import MessageChannel
from ._client_common import not_a_program
from ._config import SessionConfig
from ._errors import HandshakeFailed, RequestTimeout
from ._errors_base import name_the_endpoint
from ._handlers import Handlers
from ._memory import open_memory_pair
from ._open import open_session
from ._session import Session
from ._stdio import StderrCallback, open_stdio_client
from ._util import is_url, is_websocket_url
from ._websocket import open_websocket_client

if TYPE_CHECKING:
    from mcp_sansio.http import HttpClientConfig

    from ._oauth import OAuth  # (the HTTP binding is imported when first used)

__all__ = [
    "ClientTarget",
    "InMemoryServer",
    "StderrCallback",
    "describe_target",
    "open_target",
    "start_target",
]


@runtime_checkable
class InMemoryServer(Protocol):
    """What an in-memory target provides (``mcp_trio.Server`` does)."""

    def handlers(self) -> Handlers:
        """The server's handler table."""
        ...  # pragma: no cover - a protocol

    def connection_config(self) -> ConnectionConfig:
        """The server core's configuration (capabilities, info, eras)."""
        ...  # pragma: no cover - a protocol


ClientTarget: TypeAlias = (
    str | Sequence[str] | InMemoryServer | tuple[Handlers, ConnectionConfig] | MessageChannel
)
"""What :func:`~mcp_trio.open_client` accepts as ``target``."""


def _in_memory(target: object) -> tuple[Handlers, ConnectionConfig] | None:
    if isinstance(target, InMemoryServer):
        return target.handlers(), target.connection_config()
    if (
        isinstance(target, tuple)
        and len(target) == 2
        and isinstance(target[0], Handlers)
        and isinstance(target[1], ConnectionConfig)
    ):
        return target[0], target[1]
    return None


def _command(target: object) -> list[str] | None:
    if isinstance(target, str):
        argv = shlex.split(target)
        if not argv:
            raise ValueError("an empty command line")
        return argv
    if isinstance(target, Sequence) and all(isinstance(a, str) for a in target):
        if not target:
            raise ValueError("an empty argument list")
        return list(target)
    return None


def describe_target(target: object) -> str:
    """``target`` named for an error message: the command line or URL as given, else
    what kind of object it is (nothing is called on it)."""
    if isinstance(target, str):
        return repr(target)
    if isinstance(target, MessageChannel):
        return f"a {type(target).__name__} (a MessageChannel)"
    if isinstance(target, Sequence) and target and all(isinstance(a, str) for a in target):
        return repr(shlex.join(target))
    if isinstance(target, tuple):
        return "an in-memory (Handlers, ConnectionConfig) server"
    return f"an in-memory {type(target).__name__}"


def _only_for(kind: str, **given: object) -> None:
    wrong = sorted(name for name, value in given.items() if value is not None)
    if wrong:
        raise TypeError(f"{', '.join(wrong)} cannot be used with {kind} target")


@asynccontextmanager
async def open_target(
    target: ClientTarget,
    *,
    handlers: Handlers,
    config: SessionConfig | None,
    connection_config: ConnectionConfig,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr: StderrCallback | None = None,
    ssl_context: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
    auth: OAuth | None = None,
    http_config: HttpClientConfig | None = None,
) -> AsyncGenerator[Session]:
    """Open a client session to ``target`` (see the module docstring).

    Raises:
        TypeError: a target of no known kind, or transport options that do not apply.
        ValueError: an empty command line.
    """
    opened: AbstractAsyncContextManager[Any]
    script: list[str] | None = None  # a command that names a .py file
    url = target if is_url(target) else ""
    if url and not is_websocket_url(url):
        _only_for("an HTTP", env=env, cwd=cwd, stderr=stderr)
        opened = _open_http(
            url, handlers, config, connection_config, ssl_context, headers, auth, http_config
        )
    elif url:
        _only_for("a WebSocket", env=env, cwd=cwd, stderr=stderr, http_config=http_config)
        opened = open_websocket_client(
            url,
            ssl_context=ssl_context,
            handlers=handlers,
            config=config,
            connection_config=connection_config,
            headers=headers,
            auth=auth,
            start=False,
        )
    elif auth is not None or http_config is not None:
        _only_for("a non-HTTP", http_config=http_config)
        _only_for("a non-URL", auth=auth)
    elif headers is not None:
        _only_for("a non-URL", headers=headers)
    elif isinstance(target, MessageChannel):
        _only_for("a channel", env=env, cwd=cwd, stderr=stderr, ssl_context=ssl_context)
        opened = open_session(
            target, "client", handlers=handlers, config=config, connection_config=connection_config
        )
    elif callable(connect := getattr(target, "connect_in_memory", None)):
        _only_for("an in-memory", env=env, cwd=cwd, stderr=stderr, ssl_context=ssl_context)
        fields = attrs.asdict(connection_config, recurse=False)
        opened = connect(client_handlers=handlers, client_config=config, start=False, **fields)
    elif (server := _in_memory(target)) is not None:
        _only_for("an in-memory", env=env, cwd=cwd, stderr=stderr, ssl_context=ssl_context)
        opened = _open_memory(server, handlers, config, connection_config)
    elif (argv := _command(target)) is not None:
        _only_for("a command", ssl_context=ssl_context)
        script = argv if argv[0].endswith(".py") else None
        opened = open_stdio_client(
            argv,
            env=env,
            cwd=cwd,
            stderr=stderr,
            handlers=handlers,
            config=config,
            connection_config=connection_config,
            start=False,
        )
    else:
        raise TypeError(
            "target must be a command line, an argument list, an http(s):// or ws(s):// "
            "URL, a Server, a (Handlers, ConnectionConfig) pair or a MessageChannel; "
            f"not {target!r}"
        )
    async with AsyncExitStack() as stack:
        try:
            session = await stack.enter_async_context(opened)
        except (FileNotFoundError, PermissionError) as exc:
            if script is None:
                raise
            raise type(exc)(not_a_program(script, exc, spawn="open_client")) from exc
        yield session


@asynccontextmanager
async def _open_memory(
    server: tuple[Handlers, ConnectionConfig],
    handlers: Handlers,
    config: SessionConfig | None,
    connection_config: ConnectionConfig,
) -> AsyncGenerator[Session]:
    async with open_memory_pair(
        server_handlers=server[0],
        server_connection_config=server[1],
        client_handlers=handlers,
        client_config=config,
        client_connection_config=connection_config,
        start=False,
    ) as (client, _server):
        yield client


def _open_http(
    url: str,
    handlers: Handlers,
    config: SessionConfig | None,
    connection_config: ConnectionConfig,
    ssl_context: ssl.SSLContext | None,
    headers: Mapping[str, str] | None,
    auth: OAuth | None,
    http_config: HttpClientConfig | None,
) -> AbstractAsyncContextManager[Any]:
    # Imported here: the HTTP binding (h11, pools) costs nothing until it is used.
    module = importlib.import_module("mcp_trio._http_client")
    opened: AbstractAsyncContextManager[Any] = module.open_http_client(
        url,
        handlers=handlers,
        connection_config=connection_config,
        config=config,
        ssl_context=ssl_context,
        headers=headers,
        auth=auth,
        http_config=http_config,
        start=False,
    )
    return opened


async def start_target(session: Session, target: object) -> None:
    """Run the handshake of a session :func:`open_target` opened (if the transport did
    not already), each of its requests bounded by the client's request timeout as well
    as the whole by ``SessionConfig.handshake_timeout``.

    Each request is timed by the core: the era probe by ``probe_timeout``,
    ``initialize`` and a pinned modern era's ``server/discover`` by ``request_timeout``
    (which ``open_client`` sets to ``timeout``). The probe keeps its own bound: a
    shorter one would take a server slow to start for a legacy one.

    Raises:
        RequestTimeout: as ``Session.start``, its message naming the method, the
            target (see :func:`describe_target`) and the handshake step.
        HandshakeFailed: as ``Session.start``; an HTTP server's 404 (no MCP endpoint
            at the URL's path) or bare 400 (a WebSocket server) says so, naming the URL.
        SessionClosed: as ``Session.start``.
    """
    if session.handshake is not None:
        return
    conn = session.connection
    versions = set(conn.config.supported_versions)
    legacy = conn.config.era != "modern" and not versions.isdisjoint(LEGACY_VERSIONS)
    modern = conn.config.era != "legacy" and not versions.isdisjoint(MODERN_VERSIONS)
    try:
        await session.start()
    except RequestTimeout as exc:
        if exc.method == "handshake":  # SessionConfig.handshake_timeout: which step?
            initializing = conn.lifecycle is LifecycleState.INITIALIZING
            exc.method = "initialize" if initializing else "server/discover"
            pending = conn.pending_requests()
            exc.request_id = pending[0] if len(pending) == 1 else None
            bound = session.config.handshake_timeout
            why = f"; SessionConfig.handshake_timeout ({bound:g} s) bounds the whole handshake"
        else:  # the core's deadline: the client's timeout, unless max_request_time
            if conn.config.max_request_time is None:
                exc.timeout = conn.config.request_timeout
            why = ""
        exc.detail = (
            f"while opening {describe_target(target)} ({_step(exc.method, legacy, modern)}){why}"
        )
        exc.args = (str(exc),)
        raise
    except HandshakeFailed as exc:
        if is_url(target) and not is_websocket_url(target):
            name_the_endpoint(exc, target)  # ("HTTP: status 404" named neither)
        raise


def _step(method: str, legacy: bool, modern: bool) -> str:
    """Which step of the handshake ``method`` is, for an error message."""
    if method == "initialize":
        return "the legacy handshake, after the era probe" if modern else "the legacy handshake"
    return "the era probe" if legacy else "the modern handshake"

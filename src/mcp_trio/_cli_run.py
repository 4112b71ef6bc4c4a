"""``mcp-trio run``: serve a :class:`~mcp_trio.Server` over stdio, HTTP or WebSocket.

stdio: stdout carries the protocol and nothing else (the server module is imported
with stdout pointed at stderr, and :func:`~mcp_trio.serve_stdio` keeps it that way);
logs and notices go to stderr. The server stops when its stdin ends.

HTTP / WebSocket: one line on stderr gives the URL once the socket listens (with
``--port 0``, the port the kernel chose), and ``mcp-trio: shutting down`` says when it
stops (stdio: both only when stdin is a terminal).

Signals: the first SIGINT (Ctrl-C) or SIGTERM stops the server -- gracefully for HTTP
and WebSocket (in-flight requests get the server's ``shutdown_grace_period``, 5 s by
default, then are answered "shutting down"), at once for stdio -- and the command exits
0. A second one stops it at once.

The server's lifespan (``Server(lifespan=...)``) is entered before it serves (one that
fails is one line, as a module that fails to import is), and exited after it stopped: a
graceful stop waits for its exit too (within the same bound), so that a clean-up that
awaits is not cancelled.
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO

import attrs
import trio

from mcp_sansio._http_common import LOCAL_HOSTS, LOCAL_ORIGINS

from ._cli_util import CliError, clip, terminal_safe
from ._config import SessionConfig
from ._server import Server
from ._util import is_loopback_host
from ._websocket import MCP_PATH

if TYPE_CHECKING:
    from mcp_sansio.http import HttpServerConfig

__all__ = ["LOG_RECORD_LIMIT", "SafeFormatter", "Transport", "configure_logging", "serve"]

Transport = Literal["stdio", "http", "ws"]
_EVERY_INTERFACE: Final = frozenset({"", "0.0.0.0", "::"})
_CLOSE_MARGIN: Final = 1.0
"""Seconds past the server's own bound on its graceful close (grace period and close
timeout) before the command stops waiting for it."""


LOG_RECORD_LIMIT: Final = 2000
"""Characters of a log record's message shown by the client commands (``-v``)."""
_LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SafeFormatter(logging.Formatter):
    """The client commands' log lines: a record's message clipped to
    :data:`LOG_RECORD_LIMIT` characters (the library logs what a server sent, its
    name say), and the whole line, traceback included, written
    :func:`~mcp_trio._cli_util.terminal_safe`."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = clip(record.message, LOG_RECORD_LIMIT)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def configure_logging(level: str, *, safe: bool = False) -> None:
    """Log records of ``level`` and above to stderr (never to stdout), unless logging
    is configured already (by the server's module); ``safe``: with a
    :class:`SafeFormatter` (the client commands, whose logs quote the server)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(_LOG_FORMAT) if safe else logging.Formatter(_LOG_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def serve(
    server: Server,
    transport: Transport,
    *,
    host: str,
    port: int,
    path: str,
    err: TextIO,
    allow_hosts: tuple[str, ...] = (),
    allow_origins: tuple[str, ...] = (),
) -> int:
    """Serve until stdin ends (stdio) or a signal arrives; returns the exit status.

    ``allow_hosts`` / ``allow_origins`` (HTTP, WebSocket): ``Host`` and ``Origin`` values
    accepted besides localhost's (DNS-rebinding protection refuses the rest).

    Raises:
        CliError: the socket could not be opened (port in use, bad address).
    """
    if transport == "ws" and path != MCP_PATH:
        raise CliError(f"the WebSocket transport serves {MCP_PATH} only, not {path!r}")
    http_config = None
    if transport == "http":  # (the HTTP rules are loaded for HTTP only)
        from mcp_sansio.http import HttpServerConfig  # noqa: PLC0415

        local = HttpServerConfig()  # (its defaults accept localhost's names only)
        http_config = attrs.evolve(
            local,
            allowed_hosts=(*(local.allowed_hosts or ()), *allow_hosts),
            allowed_origins=(*local.allowed_origins, *allow_origins),
        )
    allowed = ((*LOCAL_HOSTS, *allow_hosts), (*LOCAL_ORIGINS, *allow_origins))  # (WebSocket)
    run = functools.partial(_serve, server, transport, host, port, path, err, http_config, allowed)
    trio.run(run)
    return 0


def _describe(server: Server) -> str:
    return f"{server.name} {server.version}"


async def _serve(
    server: Server,
    transport: Transport,
    host: str,
    port: int,
    path: str,
    err: TextIO,
    http_config: HttpServerConfig | None = None,
    allowed: tuple[tuple[str, ...], tuple[str, ...]] = (LOCAL_HOSTS, LOCAL_ORIGINS),
) -> None:
    stop = trio.Event()
    served = trio.Event()  # (HTTP, WebSocket: the serve_* returned, its lifespan exited)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, signals, stop, nursery.cancel_scope)
            handle: Any = None
            # Whoever was told that the server serves is told that it stops, whatever the
            # transport (WebSocket said nothing, HTTP "shutting down").
            announced = transport != "stdio" or (sys.stdin is not None and sys.stdin.isatty())
            if transport == "stdio":
                if announced:
                    _notice(
                        err,
                        f"serving {_describe(server)} on stdin/stdout (JSON-RPC, one message "
                        "a line); point an MCP client at this command, or use --transport http",
                    )
                nursery.start_soon(_serve_stdio, server, stop)
            else:
                try:
                    if transport == "http":
                        serve_http = functools.partial(
                            server.serve_http, host, port, path, http_config=http_config
                        )
                        handle = await nursery.start(_serve_until_done, server, serve_http, served)
                        url = str(handle.url)
                        kind = "Streamable HTTP"
                    else:
                        hosts, origins = allowed
                        serve_ws = functools.partial(
                            server.serve_websocket,
                            host,
                            port,
                            allowed_hosts=hosts,
                            allowed_origins=origins,
                        )
                        handle = await nursery.start(_serve_until_done, server, serve_ws, served)
                        url = str(handle.url)
                        kind = "WebSocket"
                except OSError as exc:
                    reason = exc.strerror or str(exc)
                    raise CliError(f"cannot listen on {host}:{port}: {reason}") from exc
                except ImportError as exc:
                    raise CliError(f"the {transport} transport is not available: {exc}") from exc
                _notice(err, f"serving {_describe(server)} at {url} ({kind}; Ctrl-C to stop)")
                logs = logging.getLogger("mcp_trio").isEnabledFor
                # (`run` has no authentication; serve_http's own warning says it for HTTP)
                said = transport == "http" and logs(logging.WARNING)
                if not is_loopback_host(host) and not said:
                    _notice(
                        err,
                        "WARNING: no authentication: anyone who can connect to this port "
                        "can use every tool, resource and prompt; the Host check only "
                        "stops browsers (DNS rebinding), it is not access control",
                    )
                every = host in _EVERY_INTERFACE and allowed[0] == LOCAL_HOSTS
                if every and not logs(logging.INFO):
                    # (at --log-level info the server's own log line says it already)
                    _notice(
                        err,
                        "only loopback Host names are accepted (DNS-rebinding protection): "
                        "a client that names this machine any other way is refused; list "
                        "those names with --allow-host",
                    )
            await stop.wait()
            if announced:
                _notice(err, "shutting down")
            if handle is not None:
                # A backstop past the close's own bound: cutting it at the grace period
                # would skip the "shutting down" answers the close sends after it.
                config = server.session_config or SessionConfig()
                bound = config.shutdown_grace_period + config.close_timeout + _CLOSE_MARGIN
                bound += config.abandon_write_timeout  # (WebSocket: the answers' write)
                with trio.move_on_after(bound):
                    await handle.aclose()
                    # (and the serve_* returns: the server's lifespan exits uncancelled)
                    await served.wait()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def _lifespan(server: Server) -> AsyncIterator[None]:
    """The server's lifespan, entered here, where its ``serve_*`` would enter it (in the
    same task: it then enters none), so that one that fails to enter says so: its
    ``OSError`` (a database that refuses connections) read "cannot listen on ..."."""
    lifespan = server.open_lifespan()
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(lifespan)
        except Exception as exc:
            from ._cli_target import _where_it_failed as where_it_failed  # noqa: PLC0415

            raise CliError(f"the server's lifespan failed: {where_it_failed(exc)}") from exc
        yield


async def _serve_until_done(
    server: Server,
    serve: Callable[..., Awaitable[None]],
    served: trio.Event,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
) -> None:
    """``serve(task_status=...)`` in the server's lifespan, then ``served`` set."""
    try:
        async with _lifespan(server):
            await serve(task_status=task_status)
    finally:
        served.set()


async def _serve_stdio(server: Server, stop: trio.Event) -> None:
    try:
        async with _lifespan(server):
            await server.serve_stdio()
    finally:
        stop.set()


async def _watch_signals(signals: Any, stop: trio.Event, scope: trio.CancelScope) -> None:
    async for _ in signals:
        if stop.is_set():
            scope.cancel()
            return
        stop.set()


def _notice(err: TextIO, text: str) -> None:
    print(f"mcp-trio: {text}", file=err, flush=True)

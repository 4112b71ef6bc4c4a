"""``mcp-trio run --transport ws``: the ``Origin`` / ``Host`` flags apply as with HTTP."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest
import trio
import trio.testing

from mcp_sansio._http_common import LOCAL_HOSTS
from mcp_trio import Server, _cli_run

from .test_cli import TIMEOUT, _serve_and_read_url, assert_error, cli
from .trio.test_websocket_origin import _handshake


async def test_run_ws_accepts_the_hosts_and_origins_it_is_told_to() -> None:
    with trio.fail_after(TIMEOUT):
        args = ["--transport", "ws", "--port", "0", "--allow-host", "mcp.example.com"]
        args += ["--allow-origin", "https://app.example"]
        process, url, _ = await _serve_and_read_url(args)
        try:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            seen = {}
            for host, origin in [
                ("mcp.example.com", None),
                (f"mcp.example.com:{port}", "https://app.example"),
                (f"127.0.0.1:{port}", "http://localhost:3000"),  # localhost's still are
                ("evil.example", None),
                (f"127.0.0.1:{port}", "https://evil.example"),
            ]:
                headers = [("Host", host)] + ([] if origin is None else [("Origin", origin)])
                seen[host, origin] = (await _handshake(port, headers))[0]
            assert list(seen.values()) == [101, 101, 101, 421, 403], seen
        finally:
            process.kill()
            await process.wait()


def test_allow_flags_need_a_network_transport() -> None:
    result = cli("run", "examples/notes_server.py", "--allow-origin", "https://app.example")
    assert_error(result, 2, "--allow-origin: for --transport http or ws only")


class _Handle:
    url = "http://0.0.0.0:8000/mcp"

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _Unbound:
    """Stands in for a Server whose serve_http would bind every interface (no socket
    is opened: tests bind 127.0.0.1 only)."""

    name, version, session_config = "s", "1", None

    @asynccontextmanager
    async def open_lifespan(self) -> AsyncIterator[None]:  # (the command enters it)
        yield

    async def serve_http(self, *args: Any, task_status: Any, **kw: Any) -> None:
        task_status.started(_Handle())
        await trio.sleep_forever()

    serve_websocket = serve_http


@pytest.mark.parametrize(
    ("host", "allowed", "told"),
    [
        ("0.0.0.0", LOCAL_HOSTS, True),
        ("::", LOCAL_HOSTS, True),
        ("0.0.0.0", (*LOCAL_HOSTS, "mcp.example.com"), False),
        ("127.0.0.1", LOCAL_HOSTS, False),
    ],
)
async def test_run_on_every_interface_says_only_loopback_names_are_served(
    autojump_clock: trio.testing.MockClock, host: str, allowed: tuple[str, ...], told: bool
) -> None:
    err = io.StringIO()
    server = cast(Server, _Unbound())
    with trio.move_on_after(1):
        await _cli_run._serve(server, "http", host, 8000, "/mcp", err, None, (allowed, ()))
    assert ("only loopback Host names are accepted" in err.getvalue()) is told
    assert ("--allow-host" in err.getvalue()) is told


@pytest.mark.parametrize(
    ("transport", "host", "level", "told"),
    [
        ("ws", "0.0.0.0", logging.WARNING, True),
        ("ws", "::", logging.WARNING, True),
        ("ws", "192.0.2.7", logging.WARNING, True),
        ("ws", "mcp.example", logging.WARNING, True),
        ("ws", "127.0.0.1", logging.WARNING, False),
        ("ws", "127.0.0.2", logging.WARNING, False),
        ("ws", "::1", logging.WARNING, False),
        ("ws", "localhost", logging.WARNING, False),
        # HTTP: serve_http's own warning says it (test_http_misdirected), unless the
        # warnings are not logged (--log-level error).
        ("http", "0.0.0.0", logging.WARNING, False),
        ("http", "0.0.0.0", logging.ERROR, True),
        ("http", "127.0.0.1", logging.ERROR, False),
    ],
)
async def test_run_beyond_loopback_says_there_is_no_authentication(
    autojump_clock: trio.testing.MockClock, transport: str, host: str, level: int, told: bool
) -> None:
    # The security review: "only loopback Host names are served" read as access control,
    # but anyone who reaches the port sends "Host: localhost", and `run` asks for no
    # credential.
    mcp_logger = logging.getLogger("mcp_trio")
    saved = mcp_logger.level
    mcp_logger.setLevel(level)
    err = io.StringIO()
    try:
        with trio.move_on_after(1):
            await _cli_run._serve(
                cast(Server, _Unbound()), cast(Any, transport), host, 8000, "/mcp", err
            )
    finally:
        mcp_logger.setLevel(saved)
    said = "WARNING: no authentication: anyone who can connect to this port" in err.getvalue()
    assert said is told
    assert ("it is not access control" in err.getvalue()) is told


async def test_at_log_level_info_the_server_s_own_line_says_it_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mcp_logger = logging.getLogger("mcp_trio")
    level = mcp_logger.level
    mcp_logger.setLevel(logging.INFO)  # (setLevel: it clears the loggers' level caches)
    err = io.StringIO()
    try:
        with trio.move_on_after(1):
            await _cli_run._serve(
                cast(Server, _Unbound()),
                "http",
                "0.0.0.0",
                8000,
                "/mcp",
                err,
                None,
                (LOCAL_HOSTS, ()),
            )
    finally:
        mcp_logger.setLevel(level)
    assert "only loopback Host names" not in err.getvalue()

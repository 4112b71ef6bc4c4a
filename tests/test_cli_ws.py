"""``mcp-trio run --transport ws``: the ``Origin`` / ``Host`` flags apply as with HTTP."""

from __future__ import annotations

import trio

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

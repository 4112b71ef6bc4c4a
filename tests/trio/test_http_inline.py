"""A lone request of a legacy POST answered as JSON is served in its connection's task
(no handler task: the connection would only wait for the answer), yet as a task of its
own would serve it: in its own scope and in its own copy of the context."""

from __future__ import annotations

import contextvars
from functools import partial
from typing import Any

import pytest
import trio

from mcp_sansio._json import loads
from mcp_sansio.http import HttpServerConfig
from mcp_trio import Handlers
from mcp_trio._http_server import HttpServeHandle, serve_http

from .test_http_support import (
    IO_TIMEOUT,
    RawConnection,
    raw_session,
    rpc,
    server_connection_config,
    session_headers,
)

_MARK: contextvars.ContextVar[Any] = contextvars.ContextVar("test_http_inline_mark", default=None)


def _recording_handlers(seen: list[tuple[str, Any, Any]]) -> Handlers:
    """``tools/call``: note the task it runs in and the mark it finds, set its own mark
    (never reset), and check that the mark holds across a scheduler pass."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call_tool(ctx: Any) -> dict[str, Any]:
        found = _MARK.get()
        _MARK.set(ctx.request_id)
        await trio.sleep(0)  # (the next step of the handler runs in the same context)
        seen.append((trio.lowlevel.current_task().name, found, _MARK.get()))
        return {"content": [], "isError": False}

    return handlers


async def _post(conn: RawConnection, headers: Any, body: bytes) -> Any:
    await conn.send("POST", headers=headers, body=body)
    response = await conn.response()
    conn.next_cycle()
    assert response.status == 200, response
    return loads(response.body)


async def _serve(nursery: trio.Nursery, handlers: Handlers, mode: str) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            handlers,
            connection_config=server_connection_config(),
            http_config=HttpServerConfig(response_mode=mode),  # type: ignore[arg-type]
        )
    )
    return handle


@pytest.mark.parametrize(
    ("mode", "task"), [("json", "mcp http connection"), ("sse", "mcp http tools/call #{}")]
)
async def test_a_lone_legacy_request_answered_as_json_is_served_by_its_connection(
    nursery: trio.Nursery, mode: str, task: str
) -> None:
    seen: list[tuple[str, Any, Any]] = []
    server = await _serve(nursery, _recording_handlers(seen), mode)
    with trio.fail_after(IO_TIMEOUT):
        headers = session_headers(await raw_session(server.port))
        conn = await RawConnection.open(server.port)
        try:
            for rid in (1, 2):
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", {"name": "x"}))
                response = await conn.response()
                conn.next_cycle()
                assert response.status == 200, response
                assert str(rid).encode() in response.body
        finally:
            await conn.aclose()
    # Each finds no mark: what the first set stayed in its own copy of the context (in
    # the connection's, the second would find it), and held across its own steps.
    assert seen == [(task.format(1), None, 1), (task.format(2), None, 2)]

"""The wait before the head of an SSE response (``_Connection._let_handlers_start``):
every time an answer is given at once it goes out with the head in one write (two
scheduler passes are waited, whatever order trio runs a pass's tasks in), and only a
POST waits: a GET stream starts no handler, so its head is not held back."""

from __future__ import annotations

import pytest
import trio

from mcp_trio import _http_server
from mcp_trio._http_endpoint import ResponseSlot

from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    App,
    RawConnection,
    call,
    raw_session,
    rpc,
    server_writes,
    session_headers,
    start_server,
)


async def test_every_answer_given_at_once_goes_out_with_its_head(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One scheduler pass lets the handler answer first only in about half the runs
    # (trio runs a pass's tasks in either order): forty calls catch a single pass.
    writes = server_writes(monkeypatch)
    server = await start_server(nursery, App(), http={"response_mode": "sse"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        counts = []
        try:
            for rid in range(100, 140):
                writes.clear()
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", call("echo")))
                assert (await conn.head()).status_code == 200
                assert f'"id":{rid}'.encode() in await conn.body()
                conn.next_cycle()
                counts.append(len(writes))
        finally:
            await conn.aclose()
    assert counts == [1] * 40


async def test_only_a_posts_head_waits_for_handlers(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[str] = []
    original = _http_server._Connection._let_handlers_start

    async def spy(self: _http_server._Connection, slot: ResponseSlot) -> None:
        waited.append("wait")
        await original(self, slot)

    monkeypatch.setattr(_http_server._Connection, "_let_handlers_start", spy)
    server = await start_server(nursery, App(), http={"response_mode": "sse"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        conn = await RawConnection.open(server.port)
        try:
            get = (("accept", "text/event-stream"), ("mcp-session-id", sid))
            await conn.send("GET", headers=(*get, ("mcp-protocol-version", LEGACY)))
            assert (await conn.head()).status_code == 200
            assert b"id: " in await conn.read_data()  # the priming event
        finally:
            await conn.aclose()
        assert waited == []  # the GET stream's head went out at once
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=rpc(7, "tools/call", call("echo")))
            assert (await conn.head()).status_code == 200
            assert b'"id":7' in await conn.body()
        finally:
            await conn.aclose()
    assert waited == ["wait"]

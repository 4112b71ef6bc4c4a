"""The head of a POST's SSE response waits two scheduler passes for its handlers: an
answer given at once goes out with the head and the priming event in one write, and a
handler that waits for something still sees the head (and the priming event) written
before its answer. Either way the response is the same bytes, up to the stream's key
and the answer's text."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    raw_session,
    rpc,
    server_writes,
    session_headers,
    start_server,
)


def _shape(response: bytes) -> bytes:
    """A response without what differs between two calls: the date, the stream's key,
    the chunk sizes, the answer's id and text."""
    response = re.sub(rb"date: [^\r]*\r\n", b"", response)
    response = re.sub(rb"id: \d+:", b"id: K:", response)
    response = re.sub(rb"\r\n[0-9a-f]+\r\n", b"\r\n<size>\r\n", response)
    return re.sub(rb'"text":"[a-z]*"', b'"text":"T"', response).replace(b'"id":6', b'"id":5')


async def test_an_answer_given_at_once_goes_out_with_the_head_in_one_write(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = server_writes(monkeypatch)
    app = App()
    server = await start_server(nursery, app, http={"response_mode": "sse"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            # The fast path: the handler answers in its first step.
            writes.clear()
            await conn.send("POST", headers=headers, body=rpc(5, "tools/call", call("echo")))
            assert (await conn.head()).status_code == 200
            assert b'"id":5' in await conn.body()
            fast = writes[:]
            conn.next_cycle()
            # The general path: the handler waits, the head goes out before the answer.
            writes.clear()
            await conn.send("POST", headers=headers, body=rpc(6, "tools/call", call("block")))
            await app.started_event.wait()
            assert (await conn.head()).status_code == 200
            priming = await conn.read_data()
            assert priming.startswith(b"id: ") and b"data" in priming  # no answer yet
            app.release.set()
            assert b'"id":6' in await conn.body()
            slow = writes[:]
        finally:
            await conn.aclose()
    assert len(fast) == 1  # head, priming event, answer and end: one write
    assert fast[0].startswith(b"HTTP/1.1 200 ") and fast[0].endswith(b"0\r\n\r\n")
    assert len(slow) == 2 and slow[0].startswith(b"HTTP/1.1 200 ")
    assert b'"result"' not in slow[0] and slow[1].endswith(b"0\r\n\r\n")
    assert _shape(fast[0]) == _shape(b"".join(slow))

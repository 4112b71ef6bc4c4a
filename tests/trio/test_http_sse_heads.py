"""The head of an SSE response is framed from a cache of heads (h11 validates each set
of fields once): each response still gets the CORS fields of its own request."""

from __future__ import annotations

import trio

from mcp_trio._http_server import _stream_head

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    raw_session,
    rpc,
    session_headers,
    start_server,
)

_ORIGINS = ("http://a.example", "http://b.example")


async def test_each_sse_head_carries_the_cors_fields_of_its_own_request(
    nursery: trio.Nursery,
) -> None:
    http = {"response_mode": "sse", "cors": True, "allowed_origins": _ORIGINS}
    server = await start_server(nursery, App(), http=http)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        conn = await RawConnection.open(server.port)
        seen = []
        try:
            for rid, origin in enumerate((*_ORIGINS, _ORIGINS[0], None), start=5):
                headers = session_headers(sid)
                if origin is not None:
                    headers = (*headers, ("origin", origin))
                body = rpc(rid, "tools/call", call("echo", text="x"))
                await conn.send("POST", headers=headers, body=body)
                head = await conn.head()
                assert f'"id":{rid}'.encode() in await conn.body()
                conn.next_cycle()
                fields = dict(head.headers)
                assert fields[b"content-type"] == b"text/event-stream"
                seen.append(fields.get(b"access-control-allow-origin"))
        finally:
            await conn.aclose()
    assert seen == [b"http://a.example", b"http://b.example", b"http://a.example", None]


def test_the_cache_of_stream_heads_is_bounded() -> None:
    # 64 sets of fields at most (CORS echoes each allowed Origin); an evicted head is
    # made again, equal to the first.
    def fields(n: int) -> tuple[tuple[bytes, bytes], ...]:
        return ((b"content-type", b"text/event-stream"), (b"x-n", str(n).encode()))

    first = _stream_head(fields(0))
    for n in range(1, 100):
        _stream_head(fields(n))
    assert _stream_head.cache_info().currsize == _stream_head.cache_info().maxsize == 64
    again = _stream_head(fields(0))
    assert again is not first
    assert again == first
    assert again.status_code == 200

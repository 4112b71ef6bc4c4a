"""Requests written together, in one send, on one kept-alive connection (HTTP/1.1
pipelining, or two requests that simply arrive in one TCP segment): each is answered,
in order (RFC 9112 9.3.2), whatever kind of answer the one before it got.

The server reads the next request's bytes with the one before (they wait in h11); an
answer written from the handler's task must then not leave the connection parked as
idle, waiting for bytes that have come already (it would sit until
``keepalive_timeout`` and close, the later requests never answered)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import h11
import pytest
import trio

from mcp_sansio._json import dumps, loads

from .test_http_support import (
    IO_TIMEOUT,
    MODERN,
    POST_HEADERS,
    RawConnection,
    RawResponse,
    call,
    modern,
    raw_session,
    rpc,
    session_headers,
    start_server,
)

Fields = tuple[tuple[str, str], ...]


@attrs.frozen
class Sent:
    """One request to write, and what its answer must be."""

    method: str
    target: str
    headers: Fields
    body: bytes
    check: Callable[[RawResponse], None]


def frame(conn: h11.Connection, sent: Sent) -> bytes:
    """``sent`` framed by ``conn`` (as :meth:`RawConnection.send` frames it)."""
    fields = [("host", "127.0.0.1"), *sent.headers]
    if sent.body or sent.method == "POST":
        fields.append(("content-length", str(len(sent.body))))
    data = conn.send(h11.Request(method=sent.method, target=sent.target, headers=fields)) or b""
    if sent.body:
        data += conn.send(h11.Data(data=sent.body)) or b""
    return data + (conn.send(h11.EndOfMessage()) or b"")


async def send_together(port: int, requests: list[Sent]) -> list[RawResponse]:
    """Write ``requests`` in one send on one connection; their responses, in order."""
    conn = await RawConnection.open(port)
    try:
        # Each framed by a connection of its own: ours must read an answer before it
        # may send again.
        await conn.stream.send_all(b"".join(frame(h11.Connection(h11.CLIENT), r) for r in requests))
        responses = []
        for sent in requests:
            frame(conn.h11, sent)  # (already on the wire: brings our h11 to match)
            responses.append(await conn.response())
            conn.next_cycle()
        return responses
    finally:
        await conn.aclose()


def _sse_messages(body: bytes) -> list[Any]:
    lines = body.split(b"\n")
    return [loads(line[6:]) for line in lines if line.startswith(b"data: ") and len(line) > 6]


def _messages(response: RawResponse) -> list[Any]:
    """The JSON-RPC messages a response carries: its JSON body, or its stream's."""
    assert response.status == 200, response
    if response.headers["content-type"] == "text/event-stream":
        return _sse_messages(response.body)
    assert response.headers["content-type"] == "application/json"
    return [loads(response.body)]


def _echoed(rid: int, text: str) -> Callable[[RawResponse], None]:
    """The check of a ``tools/call`` answered ``text`` (after its progress, on a
    stream)."""

    def check(response: RawResponse) -> None:
        *before, answer = _messages(response)
        assert {m["method"] for m in before} <= {"notifications/progress"}
        assert answer["id"] == rid
        assert answer["result"]["content"][0]["text"] == text

    return check


def _status(status: int, rid: Any = None) -> Callable[[RawResponse], None]:
    def check(response: RawResponse) -> None:
        assert response.status == status, response
        if rid is not None:
            assert loads(response.body)["id"] == rid

    return check


_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}
_MODERN_HEADERS = (*POST_HEADERS, ("mcp-protocol-version", MODERN))


def modern_call(rid: int, sid: str) -> Sent:
    """A modern ``tools/call``."""
    return Sent("POST", "/mcp", *modern(rid, "echo", text=f"m{rid}"), _echoed(rid, f"m{rid}"))


def modern_progress(rid: int, sid: str) -> Sent:
    """A modern ``tools/call`` that reports progress (an SSE stream, unless the
    server answers only JSON)."""
    params = {**call("progress", steps=2), "_meta": {**_META, "progressToken": rid}}
    headers = (*_MODERN_HEADERS, ("mcp-method", "tools/call"), ("mcp-name", "progress"))
    return Sent("POST", "/mcp", headers, rpc(rid, "tools/call", params), _echoed(rid, "done"))


def legacy_call(rid: int, sid: str) -> Sent:
    """A ``tools/call`` in a legacy session."""
    body = rpc(rid, "tools/call", call("echo", text=f"l{rid}"))
    return Sent("POST", "/mcp", session_headers(sid), body, _echoed(rid, f"l{rid}"))


def legacy_progress(rid: int, sid: str) -> Sent:
    """A ``tools/call`` in a legacy session that reports progress."""
    params = {**call("progress", steps=2), "_meta": {"progressToken": rid}}
    body = rpc(rid, "tools/call", params)
    return Sent("POST", "/mcp", session_headers(sid), body, _echoed(rid, "done"))


def not_found(rid: int, sid: str) -> Sent:
    """A GET of a path not served: ``404``."""
    return Sent("GET", f"/nowhere/{rid}", (), b"", _status(404))


def bad_json(rid: int, sid: str) -> Sent:
    """A POST whose body is not JSON: ``400`` with a parse error."""
    return Sent("POST", "/mcp", _MODERN_HEADERS, b"{nope", _status(400))


def notification(rid: int, sid: str) -> Sent:
    """A notification in a legacy session: ``202``, no body."""
    body = dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    return Sent("POST", "/mcp", session_headers(sid), body, _status(202))


KINDS = [
    modern_call,
    modern_progress,
    legacy_call,
    legacy_progress,
    not_found,
    bad_json,
    notification,
]


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.__name__)
async def test_requests_written_together_are_each_answered_in_order(
    nursery: trio.Nursery, kind: Callable[[int, str], Sent], count: int, mode: str
) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        requests = [kind(rid, sid) for rid in range(1, count + 1)]
        # ... and a modern call after them: the connection is still in step.
        requests.append(modern_call(count + 1, sid))
        responses = await send_together(server.port, requests)
    assert len(responses) == len(requests)
    for sent, response in zip(requests, responses, strict=True):
        sent.check(response)
    assert server.statistics().open_responses == 0


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_every_kind_of_answer_mixed_in_one_write(nursery: trio.Nursery, mode: str) -> None:
    server = await start_server(nursery, http={"response_mode": mode})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        requests = [kind(rid, sid) for rid, kind in enumerate(KINDS * 2, 1)]
        responses = await send_together(server.port, requests)
    for sent, response in zip(requests, responses, strict=True):
        sent.check(response)

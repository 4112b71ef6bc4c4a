"""The HTTP server seen from a hand-driven h11 client: status codes, slow clients, SSE."""

from __future__ import annotations

from typing import Any

import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps
from mcp_trio import _http_server
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_server import _LINGER_BYTES
from mcp_trio._util import MAX_PEER_WARNINGS

from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    MODERN,
    POST_HEADERS,
    App,
    RawConnection,
    call,
    client_connection_config,
    initialize_body,
    raw_request,
    raw_session,
    rpc,
    session_headers,
    start_server,
    text_of,
    unread_get_stream,
)


def modern_call() -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return rpc(1, "tools/call", {**call("echo", text="hi"), "_meta": meta})


MODERN_HEADERS = (
    *POST_HEADERS,
    ("mcp-protocol-version", MODERN),
    ("mcp-method", "tools/call"),
    ("mcp-name", "echo"),
)


@pytest.mark.parametrize(
    ("method", "target", "headers", "host", "status"),
    [
        ("POST", "/other", POST_HEADERS, "127.0.0.1", 404),
        ("POST", "/mcp", (*POST_HEADERS, ("origin", "http://evil.example")), "127.0.0.1", 403),
        ("POST", "/mcp", (*POST_HEADERS, ("origin", "http://localhost:3000")), "127.0.0.1", 200),
        ("POST", "/mcp", POST_HEADERS, "evil.example", 421),
        ("POST", "/mcp", (("accept", "text/html"), ("content-type", "application/json")), "x", 406),
        ("POST", "/mcp", (("accept", "*/*"), ("content-type", "text/plain")), "127.0.0.1", 415),
        ("PUT", "/mcp", POST_HEADERS, "127.0.0.1", 405),
    ],
)
async def test_status_codes_end_to_end(
    nursery: trio.Nursery,
    method: str,
    target: str,
    headers: tuple[tuple[str, str], ...],
    host: str,
    status: int,
) -> None:
    server = await start_server(nursery)
    host = "127.0.0.1" if host == "x" else host
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(
            server.port, method, target, headers=headers, host=host, body=initialize_body()
        )
    assert response.status == status, response
    if status == 405:
        assert "POST" in response.headers["allow"]


async def test_a_modern_only_server_refuses_get_and_delete(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        for method in ("GET", "DELETE"):
            response = await raw_request(
                server.port, method, headers=(("accept", "text/event-stream"),)
            )
            assert response.status == 405 and response.headers["allow"] == "POST"
        answered = await raw_request(
            server.port, "POST", headers=MODERN_HEADERS, body=modern_call()
        )
        assert answered.status == 200 and answered.json()["result"]["content"][0]["text"] == "hi"


async def test_modern_header_mismatches_are_400(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    headers = (*POST_HEADERS, ("mcp-protocol-version", MODERN), ("mcp-method", "tools/list"))
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", headers=headers, body=modern_call())
    assert response.status == 400 and response.json()["error"]["code"] == -32020


@pytest.mark.parametrize("mode", ["auto", "sse"])
async def test_a_capability_the_client_lacks_is_400_in_either_mode(
    nursery: trio.Nursery, mode: str
) -> None:
    # -32021: "For HTTP, the response status code MUST be 400" (2026-07-28 schema). The
    # tool asks for the roots, which this client did not declare; nothing went out before.
    server = await start_server(nursery, http={"response_mode": mode})
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = rpc(1, "tools/call", {**call("ask"), "_meta": meta})
    headers = (*MODERN_HEADERS[:-1], ("mcp-name", "ask"))
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", headers=headers, body=body)
    assert response.status == 400, response
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == -32021
    with trio.fail_after(IO_TIMEOUT):  # and a call that succeeds is still a stream
        answered = await raw_request(
            server.port, "POST", headers=MODERN_HEADERS, body=modern_call()
        )
    assert answered.status == 200
    kind = "text/event-stream" if mode == "sse" else "application/json"
    assert answered.headers["content-type"] == kind
    assert b"hi" in answered.body


async def test_bad_json_is_400(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", body=b"{nope")
    assert response.status == 400 and response.json()["error"]["code"] == -32700


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_body_over_the_bound_is_413_and_never_read(
    nursery: trio.Nursery, chunked: bool
) -> None:
    server = await start_server(nursery, http={"max_body_size": 1_000})
    body = b"[" + b"1," * 4_000 + b"1]"
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", body=body, chunked=chunked)
            response = await conn.response()
            assert response.status == 413
            assert response.headers["connection"] == "close"
            assert await conn.stream.receive_some(65536) == b""  # and the connection ends
        finally:
            await conn.aclose()


async def test_a_refused_body_is_read_and_dropped_up_to_the_linger_bound_then_closed(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After answering 413 while the body is still coming, the server reads and drops
    # what the client goes on sending (a lingering close, RFC 9112 9.6), but at most
    # _LINGER_BYTES: a client that sends more is cut off there, not read for ever.
    monkeypatch.setattr(_http_server, "_LINGER_SECONDS", 3600.0)  # (only the bytes end it)
    server = await start_server(nursery, http={"max_body_size": 1_000})
    read_by_server = 0
    receive_some = trio.SocketStream.receive_some

    async def counted(self: trio.SocketStream, max_bytes: int | None = None) -> bytes:
        nonlocal read_by_server
        data = await receive_some(self, max_bytes)
        if self.socket.getsockname()[1] == server.port:  # (the server's end)
            read_by_server += len(data)
        return data

    monkeypatch.setattr(trio.SocketStream, "receive_some", counted)
    declared = 2 * _LINGER_BYTES
    chunk = b"0" * 65_536
    sent = 0
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        headers = [("host", "127.0.0.1"), *POST_HEADERS, ("content-length", str(declared))]
        head = conn.h11.send(h11.Request(method="POST", target="/mcp", headers=headers))
        assert head is not None
        try:
            await conn.stream.send_all(head)
            response = await conn.head()  # (answered before any of the body is read)
            assert response.status_code == 413
            assert (b"connection", b"close") in response.headers
            # Cut off long before the end of the body (a reset: input was left unread).
            with pytest.raises(trio.BrokenResourceError):
                while sent < declared:
                    await conn.stream.send_all(chunk)
                    sent += len(chunk)
        finally:
            await conn.aclose()
    dropped = read_by_server - len(head)
    # The last read starts under the bound and takes at most one 64 KiB chunk.
    assert _LINGER_BYTES <= dropped < _LINGER_BYTES + 65_536


async def test_an_oversize_head_is_431(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, transport=HttpTransportConfig(max_header_size=1_024))
    headers = (*POST_HEADERS, ("x-padding", "a" * 4_000))
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", headers=headers, body=b"{}")
    assert response.status == 431


async def test_garbage_is_400_and_the_connection_ends(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(b"NOT HTTP AT ALL\r\n\r\n")
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        await stream.aclose()
    assert data.startswith(b"HTTP/1.1 400 ")


async def test_keep_alive_serves_many_requests_on_one_connection(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            for _ in range(3):
                await conn.send("POST", headers=MODERN_HEADERS, body=modern_call())
                assert (await conn.response()).status == 200
                conn.next_cycle()
        finally:
            await conn.aclose()


async def test_expect_100_continue_is_honoured(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send(
                "POST", headers=(*MODERN_HEADERS, ("expect", "100-continue")), body=modern_call()
            )
            response = await conn.response()
            assert response.status == 200 and conn.informational == [100]
        finally:
            await conn.aclose()


async def test_a_slowloris_client_blocks_no_one_and_is_dropped(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(nursery, transport=HttpTransportConfig(header_timeout=5.0))
    with trio.fail_after(IO_TIMEOUT):
        slow = await trio.open_tcp_stream("127.0.0.1", server.port)
        for byte in b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ":
            await slow.send_all(bytes([byte]))  # one byte at a time, and never finishing
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            assert text_of(await client.request("tools/call", call("echo", text="ok"))) == "ok"
        assert server.statistics().connections >= 1
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(6)
        data = b""
        while chunk := await slow.receive_some(65536):
            data += chunk
        await slow.aclose()
    assert data.startswith(b"HTTP/1.1 408 ")


async def test_an_idle_connection_is_closed_after_the_keepalive_timeout(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(
        nursery, transport=HttpTransportConfig(header_timeout=2.0), era="modern"
    )
    with trio.fail_after(IO_TIMEOUT):
        silent = await trio.open_tcp_stream("127.0.0.1", server.port)
        await trio.testing.wait_all_tasks_blocked()
        assert server.statistics().connections == 1
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(3)
        assert await silent.receive_some(10) == b""  # closed without a word
        await silent.aclose()


async def test_too_many_connections_are_refused_at_accept(nursery: trio.Nursery) -> None:
    server = await start_server(nursery, transport=HttpTransportConfig(max_connections=2))
    with trio.fail_after(IO_TIMEOUT):
        held = [await trio.open_tcp_stream("127.0.0.1", server.port) for _ in range(2)]
        await trio.testing.wait_all_tasks_blocked()
        extra = await trio.open_tcp_stream("127.0.0.1", server.port)
        answer = b""
        while chunk := await extra.receive_some(4096):
            answer += chunk
        # Told why (and when to come back) rather than reset without a word.
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert b"retry-after: 1\r\n" in answer and answer.endswith(b"\r\n\r\n")
        for stream in [*held, extra]:
            await stream.aclose()


async def test_a_legacy_get_stream_has_sse_headers_and_keepalive_comments(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    server = await start_server(
        nursery, transport=HttpTransportConfig(sse_keepalive_interval=5.0), era="legacy"
    )
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        conn = await RawConnection.open(server.port)
        try:
            headers = (
                ("accept", "text/event-stream"),
                ("mcp-session-id", sid),
                ("mcp-protocol-version", LEGACY),
            )
            await conn.send("GET", headers=headers)
            head = await conn.head()
            fields = {k.decode(): v.decode() for k, v in head.headers}
            assert head.status_code == 200
            assert fields["content-type"] == "text/event-stream"
            assert fields["x-accel-buffering"] == "no"
            assert b"id: " in await conn.read_data()  # the priming event
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(6)
            assert await conn.read_data() == b": keep-alive\n\n"
            assert server.send_notification("notifications/tools/list_changed") == 1
            assert b"notifications/tools/list_changed" in await conn.read_data()
        finally:
            await conn.aclose()


async def test_a_legacy_request_without_a_session_is_400_and_unknown_session_404(
    nursery: trio.Nursery,
) -> None:
    server = await start_server(nursery)
    body = rpc(2, "tools/list")
    with trio.fail_after(IO_TIMEOUT):
        missing = await raw_request(server.port, "POST", body=body)
        unknown = await raw_request(
            server.port, "POST", headers=(*POST_HEADERS, ("mcp-session-id", "nope")), body=body
        )
    assert (missing.status, unknown.status) == (400, 404)


async def test_delete_ends_a_session(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        assert server.statistics().sessions == 1
        gone = await raw_request(server.port, "DELETE", headers=(("mcp-session-id", sid),))
    assert gone.status == 204 and server.statistics().sessions == 0


async def test_a_notification_is_accepted_with_202(nursery: trio.Nursery) -> None:
    app = App()
    got: list[Any] = []

    async def on_note(ctx: Any) -> None:
        got.append(ctx.session_id)

    app.handlers.set_notification_handler("notifications/roots/list_changed", on_note)
    server = await start_server(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        note = dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        headers = session_headers(sid)
        response = await raw_request(server.port, "POST", headers=headers, body=note)
        await trio.testing.wait_all_tasks_blocked()
    assert response.status == 202 and got == [sid]


async def test_a_client_that_stops_reading_is_dropped_and_its_request_cancelled(
    nursery: trio.Nursery,
) -> None:
    app = App()
    transport = HttpTransportConfig(max_response_buffer=64 * 1024)
    server = await start_server(nursery, app, transport=transport)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "p",
    }
    body = rpc(1, "tools/call", {**call("flood"), "_meta": meta})
    headers = (*POST_HEADERS, ("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"))
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=(*headers, ("mcp-name", "flood")), body=body)
            await app.cancelled_event.wait()  # never reading: the server gave up on us
        finally:
            await conn.aclose()
    assert server.statistics().modern_requests == 0


async def test_a_get_stream_nobody_reads_is_dropped_at_its_buffer_bound(
    nursery: trio.Nursery,
) -> None:
    # Broadcast notifications go out from the task that makes them; what the socket did
    # not take was written later by the connection, in a write the buffer's overflow
    # could not cancel, while the buffer went on growing (100 MiB, in the report).
    limit = 64 * 1024
    server = await start_server(nursery, transport=HttpTransportConfig(max_response_buffer=limit))
    with trio.fail_after(IO_TIMEOUT):
        conn = await unread_get_stream(server.port)
        connections = server.statistics().connections
        pad = {"_meta": {"pad": "z" * 1000}}
        try:
            while server.statistics().connections == connections:
                for _ in range(100):
                    server.send_notification("notifications/tools/list_changed", pad)
                    held = [len(slot.data) for slot in server._endpoint._responses.values()]
                    assert max(held, default=0) <= limit + 2_000
                await trio.sleep(0)
        finally:
            await conn.aclose()


@pytest.mark.parametrize(
    ("headers", "host", "status"),
    [
        ((("origin", "http://evil.example"),), "127.0.0.1", 403),
        ((), "evil.example", 421),
        ((), "127.0.0.1", 405),
    ],
)
async def test_a_refused_head_request_gets_its_status_without_a_body(
    nursery: trio.Nursery, headers: tuple[tuple[str, str], ...], host: str, status: int
) -> None:
    server = await start_server(nursery, era="modern")
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("HEAD", headers=headers, host=host)
            response = await conn.response()
            assert response.status == status and response.body == b""
            if status != 405:  # the length says what the same GET would get
                assert int(response.headers["content-length"]) > 0
        finally:
            await conn.aclose()


async def test_in_json_mode_a_cancelled_request_gets_an_empty_event_stream(
    nursery: trio.Nursery,
) -> None:
    # A POST of requests MUST be answered as application/json or as an event stream
    # (transports.mdx, sending messages), and a cancelled request gets no answer: the
    # POST whose only request was cancelled gets an event stream with no event.
    app = App()
    server = await start_server(nursery, app, http={"response_mode": "json"})
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        headers = session_headers(sid)
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=rpc(7, "tools/call", call("block")))
            await app.started_event.wait()
            cancel = dumps(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            )
            accepted = await raw_request(server.port, "POST", headers=headers, body=cancel)
            assert accepted.status == 202
            response = await conn.response()
        finally:
            await conn.aclose()
    assert app.cancelled == [7]
    assert (response.status, response.headers["content-type"], response.body) == (
        200,
        "text/event-stream",
        b"",
    )


@pytest.mark.parametrize("target", [b"/other", b"/mcp"])
async def test_an_early_refusal_of_a_malformed_chunked_body_is_answered(
    nursery: trio.Nursery, target: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    # Taking the end of a request refused early (so that a bodiless one keeps its
    # connection) raised on a malformed chunk: no answer, an ERROR traceback.
    server = await start_server(nursery)
    head = b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n" % target
    with trio.fail_after(IO_TIMEOUT):
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(head + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        await stream.aclose()
    assert data.startswith((b"HTTP/1.1 404 ", b"HTTP/1.1 415 ")), data
    assert b"connection: close" in data.lower()
    assert "HTTP connection failed" not in caplog.text


async def test_a_clients_invalid_message_is_logged_clipped(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # What the peer controls reaches the log clipped and escaped (one line): a
    # megabyte of it would otherwise be one log record.
    server = await start_server(nursery)
    level = "x\n" + "A" * 100_000
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        body = rpc(2, "logging/setLevel", {"level": level})
        response = await raw_request(server.port, "POST", headers=session_headers(sid), body=body)
    assert response.json()["error"]["code"] == -32602
    (logged,) = [
        r.getMessage()
        for r in caplog.records
        if "invalid message from an HTTP client" in r.getMessage()
    ]
    assert logged.startswith("invalid message from an HTTP client: Invalid params: unknown log")
    assert len(logged) < 1_000 and logged.endswith("more characters)")


async def test_a_sessions_invalid_messages_are_logged_up_to_a_bound(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # A client that sends junk for the life of its session floods no log: past the
    # bound, one line says the rest are only counted.
    server = await start_server(nursery)
    junk = dumps({"jsonrpc": "2.0", "id": 5, "result": "x"})  # (an answer: no reply)
    with trio.fail_after(IO_TIMEOUT):
        sid = await raw_session(server.port)
        for _ in range(MAX_PEER_WARNINGS + 5):
            response = await raw_request(
                server.port, "POST", headers=session_headers(sid), body=junk
            )
            assert response.status == 400
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == "WARNING" and "invalid message from an HTTP client" in r.getMessage()
    ]
    assert len(warned) == MAX_PEER_WARNINGS + 1
    assert "further ones are only counted" in warned[-1]


async def test_invalid_messages_of_no_session_share_one_bound(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    # An initialize that starts no session (and a modern request) has a Connection of
    # its own: what belongs to no session shares one bound, or a flood of such POSTs
    # would be logged in full. The bound is renewed each hour, so one noisy client does
    # not silence the others' warnings for the life of the server.
    server = await start_server(nursery)
    body = rpc(1, "initialize", {"protocolVersion": LEGACY})  # (no capabilities, no info)

    def warned() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelname == "WARNING" and "invalid message from an HTTP client" in r.getMessage()
        ]

    with trio.fail_after(IO_TIMEOUT):
        for _ in range(MAX_PEER_WARNINGS + 5):
            response = await raw_request(server.port, "POST", body=body)
            assert response.json()["error"]["code"] == -32602
    assert len(warned()) == MAX_PEER_WARNINGS + 1
    assert "further ones are only counted" in warned()[-1]
    await trio.sleep(3600)
    with trio.fail_after(IO_TIMEOUT):
        await raw_request(server.port, "POST", body=body)
    assert len(warned()) == MAX_PEER_WARNINGS + 2
    assert "further ones are only counted" not in warned()[-1]


async def test_a_request_answered_method_not_found_is_no_warning(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # A 2026-07-28 client's ping (removed in that revision; the official Python client
    # sends it) and a legacy session's server/discover are answered -32601: the client
    # asked, the answer tells it, so no warning (a DEBUG line says it).
    server = await start_server(nursery)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    modern = (*POST_HEADERS, ("mcp-protocol-version", MODERN), ("mcp-method", "ping"))
    caplog.set_level("DEBUG", logger="mcp_trio")
    with trio.fail_after(IO_TIMEOUT):
        ping = rpc(1, "ping", {"_meta": meta})
        response = await raw_request(server.port, "POST", headers=modern, body=ping)
        assert response.json()["error"]["code"] == -32601
        sid = await raw_session(server.port)
        discover = rpc(2, "server/discover", {})
        response = await raw_request(
            server.port, "POST", headers=session_headers(sid), body=discover
        )
        assert response.json()["error"]["code"] == -32601
    assert not [r for r in caplog.records if "invalid message" in r.getMessage()]
    noted = [r.getMessage() for r in caplog.records if r.getMessage().startswith("answered")]
    assert len(noted) == 2 and "ping" in noted[0] and "server/discover" in noted[1]

"""The legacy resumption rule both HTTP clients share (``ClientResponse.resume``,
``ClientRequest.failed_again`` / ``given_up``, ``HttpClient.resume_delay``). No I/O.

``2025-11-25/basic/transports.mdx``: the server MAY close the connection at any time
after an event with an id, and the client SHOULD poll; disconnection SHOULD NOT be read
as cancelling; ``retry`` MUST be respected. A resumption answered with a stream is the
server saying "come back later": never counted against ``max_resume_attempts``, only
waited for longer while it brings no message. An attempt that gets no stream (no
connection, an error status the server may get over) is counted; a refusal fails the
requests at once; either way the server is told of what the client gives up.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio._http_client import abandoned_request
from mcp_sansio._json import loads
from mcp_sansio.http import (
    MAX_REOPEN_DELAY,
    MIN_REOPEN_DELAY,
    ClientRequest,
    HttpClient,
    HttpClientConfig,
    reopen_delay,
)

from .test_http_client import JSON, SSE, error, legacy_client, modern, read, result, rpc, sse


def polled(client: HttpClient, sent: ClientRequest, body: bytes) -> ClientRequest:
    """The resumption after a stream of ``body`` that did not answer."""
    reader = client.response(sent, 200, SSE)
    assert read(reader, body) == []
    again = reader.resume()
    assert again is not None
    return again


def test_a_stream_that_brings_nothing_is_resumed_for_ever_at_the_server_s_retry() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\nretry: 100\ndata: \n\n")
    waits = [client.resume_delay(again)]
    for n in range(1, 40):
        again = polled(client, again, f"id: p{n}\ndata: \n\n".encode())
        assert again.given_up(0) is None  # (a stream came: nothing failed)
        assert again.request.header("last-event-id") == f"p{n}"
        waits.append(client.resume_delay(again))
    # The server's retry, which holds (later streams announce none): a server that polls
    # is polled at its pace ("SHOULD respect the retry field"), however long it takes.
    assert waits == pytest.approx([0.1] * 40)
    assert again.quiet == 40 and again.failed == 0 and again.retry_ms == 100


def test_without_a_retry_the_waits_grow_while_nothing_comes() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\ndata: \n\n")
    waits = [client.resume_delay(again)]
    for n in range(1, 10):
        again = polled(client, again, f"id: p{n}\ndata: \n\n".encode())
        waits.append(client.resume_delay(again))
    # From default_retry_ms (1 s) doubling, up to MAX_REOPEN_DELAY.
    assert waits[:7] == pytest.approx([1, 1, 2, 4, 8, 16, MAX_REOPEN_DELAY])
    assert set(waits[6:]) == {MAX_REOPEN_DELAY}


def test_a_message_on_a_resumed_stream_is_progress_junk_is_not() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\ndata: \n\n")
    again = polled(client, again, b"id: p1\ndata: \n\n")
    assert again.quiet == 2
    # data: that is not JSON, or JSON that is no JSON-RPC message: nothing new.
    # No "jsonrpc": junk, even with a "result" (a proxy's JSON, not the server's).
    for junk in (b"junk", b"[1, 2]", b'{"x": 1}', b'{"jsonrpc": "2.0"}', b'{"result": 1}'):
        reader = client.response(again, 200, SSE)
        read(reader, sse(("j", junk)))
        assert reader.events_with_data == 0, junk
        after = reader.resume()
        assert after is not None and after.quiet == 3
    note = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {}}'
    reader = client.response(again, 200, SSE)
    assert len(read(reader, sse(("m", note)))) == 1
    assert reader.events_with_data == 1
    after = reader.resume()
    assert after is not None and after.quiet == 0
    assert client.resume_delay(after) == 1.0  # (default_retry_ms: no retry announced)
    # An error answer (to some other request) is a message too: progress.
    reader = client.response(again, 200, SSE)
    assert len(read(reader, sse(("e", error(9, -32000))))) == 1
    assert reader.events_with_data == 1
    after = reader.resume()
    assert after is not None and after.quiet == 0


def test_a_resumed_stream_with_no_event_is_resumed_again_from_the_same_id() -> None:
    # A resumption answered with a stream that brings nothing at all, not even an event
    # id (a server with nothing new yet, a proxy's idle timeout): SSE keeps the last
    # event id across reconnections, so the next resumption sends the same one. A stream
    # came: quiet (the wait grows), not failed, nothing abandoned.
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\ndata: \n\n")
    assert again.last_event_id == "p0"
    for n, body in enumerate((b"", b": keep-alive\n\n", b"retry: 3000\n\n"), start=2):
        reader = client.response(again, 200, SSE)
        assert read(reader, body) == []
        assert reader.abandoned == ()
        after = reader.resume()
        assert after is not None and after.resumption, body
        assert after.request.header("last-event-id") == "p0"
        assert after.request_ids == (2,) and after.quiet == n and after.failed == 0
        assert after.given_up(0) is None
        again = after
    assert again.retry_ms == 3000  # (the empty stream's own retry holds)
    # Then the answer comes on the next one.
    reader = client.response(again, 200, SSE)
    (answer,) = read(reader, sse(("p1", result(2, {}))))
    assert answer["id"] == 2 and reader.resume() is None
    # A stream that never had an id (the POST's own) still cannot be resumed.
    first = client.response(client.post(rpc(3, "tools/call", {"name": "t"})), 200, SSE)
    (failed,) = read(first, b"")
    assert failed["id"] == 3 and first.resume() is None and first.abandoned == (3,)


def test_the_get_stream_resumed_without_a_new_retry_keeps_the_announced_one() -> None:
    client = legacy_client()
    reader = client.response(client.open_stream(), 200, SSE)
    read(reader, b"id: g0\nretry: 5000\ndata: \n\n")
    assert reader.retry_ms == 5000
    again = reader.resume()
    assert again is not None and again.retry_ms == 5000
    for n in range(1, 4):
        reader = client.response(again, 200, SSE)
        read(reader, f"id: g{n}\ndata: \n\n".encode())
        # (What both clients wait before reopening the GET stream.)
        assert reader.retry_ms == 5000, n
        resumed = reader.resume()
        assert resumed is not None and resumed.request.header("last-event-id") == f"g{n}"
        again = resumed


def test_retry_0_never_makes_a_tight_loop() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    note = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {}}'
    reader = client.response(sent, 200, SSE)
    assert len(read(reader, b"retry: 0\n" + sse(("m0", note)))) == 1
    again = reader.resume()
    assert again is not None and again.quiet == 0 and again.retry_ms == 0
    assert client.resume_delay(again) == MIN_REOPEN_DELAY


def test_the_wait_before_opening_a_stream_again_backs_off_from_a_floor() -> None:
    assert [reopen_delay(1000, quiet, 1000) for quiet in range(5)] == [1, 1, 1, 2, 4]
    assert [reopen_delay(0, quiet, 1000) for quiet in range(4)] == [
        MIN_REOPEN_DELAY,
        MIN_REOPEN_DELAY,
        1,
        2,
    ]
    assert [reopen_delay(0, quiet, 0) for quiet in range(4)] == [MIN_REOPEN_DELAY] * 4
    assert reopen_delay(500, 100, 1000) == MAX_REOPEN_DELAY
    assert reopen_delay(90_000, 100, 1000) == 90  # never sooner than the server's retry


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_an_error_status_to_a_resumption_is_tried_again_counted(status: int) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\nretry: 100\ndata: \n\n")
    for attempt in range(1, 4):
        reader = client.response(again, status, ())
        assert read(reader, b"busy") == []  # (no error: it is tried again)
        assert reader.abandoned == ()
        retried = reader.resume()
        assert retried is not None and retried.resumption
        assert retried.failed == attempt and retried.problem == f"status {status}"
        assert retried.request.header("last-event-id") == "p0"
        assert client.resume_delay(retried) >= client.resume_delay(again)
        again = retried
    assert again.given_up(3) is None
    why = again.given_up(2)
    assert why == (
        f"the stream could not be resumed: 3 attempts in a row failed (the last: status {status})"
    )
    # A stream, even one that brings nothing, starts the count again.
    assert polled(client, again, b"id: p1\ndata: \n\n").failed == 0


@pytest.mark.parametrize("how", ["status 503", "no connection"])
def test_after_a_resumption_that_got_no_stream_the_wait_grows_past_the_retry(how: str) -> None:
    # The server announced retry 100 ms; its retry is its pace while it answers with a
    # stream, not once it stops answering: each attempt that gets no stream waits
    # longer (reopen_delay, from default_retry_ms), until a stream comes again.
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\nretry: 100\ndata: \n\n")
    assert client.resume_delay(again) == pytest.approx(0.1)
    waits = []
    for _ in range(4):
        if how == "status 503":
            reader = client.response(again, 503, ())
            assert read(reader, b"") == []
            retried = reader.resume()
            assert retried is not None
        else:
            retried = again.failed_again("could not connect")
        assert retried.retry_ms == 100
        waits.append(client.resume_delay(retried))
        again = retried
    assert waits == pytest.approx([1, 2, 4, 8])
    # A stream again: the server's pace again.
    assert client.resume_delay(polled(client, again, b"id: p1\ndata: \n\n")) == 0.1


def test_a_resumption_that_gets_no_answer_is_tried_again_for_the_requests_still_waiting() -> None:
    client = legacy_client()
    sent = client.post(dumps_batch(rpc(2, "tools/call", {"name": "a"}), rpc(3, "ping")))
    again = polled(client, sent, b"id: p0\ndata: \n\n")
    assert again.request_ids == (2, 3)
    retried = again.failed_again("the server closed the connection", waiting={3})
    assert retried.request_ids == (3,) and retried.methods == ("ping",)
    assert retried.failed == 1 and retried.quiet == again.quiet + 1
    assert retried.request.header("last-event-id") == "p0"
    assert retried.given_up(0) == (
        "the stream could not be resumed: 1 attempt in a row failed "
        "(the last: the server closed the connection)"
    )
    assert again.failed_again("x").request_ids == (2, 3)


def dumps_batch(*messages: bytes) -> bytes:
    return b"[" + b",".join(messages) + b"]"


@pytest.mark.parametrize("status", [400, 403, 405, 409])
def test_a_refused_resumption_fails_its_requests_which_are_abandoned(status: int) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    again = polled(client, sent, b"id: p0\ndata: \n\n")
    reader = client.response(again, status, ())
    (failed,) = read(reader, b"")
    assert failed["id"] == 2 and failed["error"]["message"] == f"HTTP: status {status}"
    assert reader.resume() is None
    assert reader.abandoned == (2,) and reader.abandoned_why == f"status {status}"


@pytest.mark.parametrize("batch", [False, True])
def test_a_resumption_refused_with_a_json_rpc_error_fails_its_requests_as_ours(
    batch: bool,
) -> None:
    # Our server's 410 (an HttpServer's _resume): a JSON-RPC error with a message, id
    # null. It refuses the GET, not the request it resumes: not passed on as the
    # request's answer (which would read as the server's own -32600 for one request
    # waiting), but quoted in our error, and the request is abandoned (the server is
    # told), as for two requests waiting.
    client = legacy_client()
    body = rpc(2, "tools/call", {"name": "t"})
    if batch:
        body = dumps_batch(body, rpc(3, "ping"))
    again = polled(client, client.post(body), b"id: 3:7\ndata: \n\n")
    reader = client.response(again, 410, JSON)
    gone = "Gone: some events after '3:7' are no longer held"
    failed = read(reader, error(None, -32600, gone))
    assert [f["id"] for f in failed] == ([2, 3] if batch else [2])
    for f in failed:
        assert f["error"]["code"] == -32603
        assert f["error"]["message"] == f"HTTP: status 410: {gone}"
        assert f["error"]["data"] == {"httpStatus": 410}
    assert reader.resume() is None
    assert reader.abandoned == ((2, 3) if batch else (2,))
    assert reader.abandoned_why == f"status 410: {gone}"
    assert reader.unheard == ()  # (the server refused it: heard)


def test_a_legacy_stream_that_cannot_be_resumed_abandons_its_requests() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 200, SSE)
    (failed,) = read(reader, b": no event id\n\n")
    assert failed["error"]["message"] == "HTTP: the stream ended before the response arrived"
    assert reader.abandoned == (2,)
    assert reader.abandoned_why == "the stream ended before the response arrived"
    # Answered, or not a stream of the server's acceptance: nothing to abandon.
    answered = client.response(client.post(rpc(3, "ping")), 200, SSE)
    read(answered, sse(("1", result(3, {}))))
    assert answered.abandoned == ()
    refused = client.response(client.post(rpc(4, "ping")), 500, ())
    read(refused, b"")
    assert refused.abandoned == ()


@pytest.mark.parametrize("resumed", [False, True])
def test_a_stream_that_ends_after_an_oversize_event_was_dropped_abandons_its_requests(
    resumed: bool,
) -> None:
    # The dropped event was most likely the answer, which no later stream brings: the
    # request fails, saying why, and the server is told (it need not go on). Also when
    # the event had an id and a resumed stream then brings nothing.
    client = legacy_client(HttpClientConfig(max_event_size=64))
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    big = sse(("e1" if resumed else None, result(2, {"text": "x" * 100})))
    reader = client.response(sent, 200, SSE)
    if resumed:
        assert read(reader, big) == []
        again = reader.resume()
        assert again is not None and again.dropped == 64
        assert again.request.header("last-event-id") == "e1"
        reader = client.response(again, 200, SSE)
        big = b""
    (failed,) = read(reader, big)
    why = (
        "the stream ended before the response arrived (an SSE event over 64 bytes was"
        " dropped: HttpClientConfig.max_event_size)"
    )
    assert failed["id"] == 2 and failed["error"]["message"] == f"HTTP: {why}"
    assert reader.resume() is None
    assert reader.abandoned == (2,) and reader.abandoned_why == why


def test_an_initialize_is_never_abandoned() -> None:
    client = HttpClient("http://localhost/mcp")
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
    sent = client.post(rpc(1, "initialize", init))
    reader = client.response(sent, 200, SSE)
    (failed,) = read(reader, b": no event id\n\n")
    assert failed["id"] == 1 and reader.abandoned == ()


def test_a_modern_stream_is_never_abandoned() -> None:
    client = HttpClient("http://localhost/mcp")
    sent = client.post(modern(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 200, SSE)
    read(reader, b": nothing\n\n")
    assert reader.broken == (2,) and reader.abandoned == ()


def test_abandoned_request_is_a_cancellation_with_a_clipped_reason() -> None:
    message: Any = loads(abandoned_request(7, "x" * 500))
    assert message["method"] == "notifications/cancelled"
    assert message["params"]["requestId"] == 7
    assert message["params"]["reason"] == ("HTTP: " + "x" * 500)[:200]


@pytest.mark.parametrize(
    ("headers", "expected", "data"),
    [
        (
            ((b"content-type", b"text/html; charset=utf-8"),),
            "HTTP: status 200: Content-Type 'text/html; charset=utf-8' is neither "
            "application/json nor text/event-stream",
            {"httpStatus": 200, "contentType": "text/html; charset=utf-8"},
        ),
        (
            (),
            "HTTP: status 200: no Content-Type (application/json or text/event-stream expected)",
            {"httpStatus": 200},
        ),
    ],
)
def test_a_2xx_neither_json_nor_sse_names_its_content_type(
    headers: tuple[tuple[bytes, bytes], ...], expected: str, data: dict[str, Any]
) -> None:
    client = legacy_client(HttpClientConfig())
    reader = client.response(client.post(rpc(2, "ping")), 200, headers)
    assert reader.kind == "error"
    (failed,) = read(reader, result(2, {}))
    assert failed["error"]["message"] == expected
    assert failed["error"]["data"] == data

"""Which errors a response makes in place of an answer that never came
(``ClientResponse.unheard``): the server was not heard for them. No I/O.

A ``5xx`` without a JSON-RPC error body (a gateway's ``502``, ``503``), a stream that ends
unanswered, a ``202`` to a request: the errors are the client's own, listed, and last in
what ``feed_eof`` returns. A JSON-RPC error body the server sent with an error status
(forwarded, or quoted for a batch), a message of the server's too deep to pass on, a
``2xx`` JSON body past ``max_body_size`` and a stream that dropped an SSE event past
``max_event_size`` (resumed or not) are the server's words: never listed. The
Trio client marks the listed ones as its own (``mcp_trio._channel.LocalReply``), so a
keep-alive ping answered by one failed.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ErrorCode
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import ClientResponse, HttpClient, HttpClientConfig

from .test_http_client import JSON, error, legacy_client, result, rpc, sse

SSE = ((b"content-type", b"text/event-stream"),)
HTML = ((b"content-type", b"text/html"),)
BATCH = b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]"


def _answer(status: int, headers: Any, payload: bytes = BATCH) -> ClientResponse:
    client: HttpClient = legacy_client()
    return client.response(client.post(payload), status, headers)


def _end(reader: ClientResponse, body: bytes) -> list[dict[str, Any]]:
    out = reader.feed(body)
    return [loads(m) for m in [*out, *reader.feed_eof()]]


@pytest.mark.parametrize(
    ("status", "headers", "body"),
    [(502, HTML, b"<p>Bad Gateway</p>"), (503, (), b""), (500, JSON, b'{"oops": 1}')],
)
def test_an_error_status_without_a_json_rpc_error_is_not_the_servers_answer(
    status: int, headers: Any, body: bytes
) -> None:
    # Mutation: unheard never set (or set with heard=True) -> empty.
    reader = _answer(status, headers)
    messages = _end(reader, body)
    assert [m["id"] for m in messages] == [3, 4]
    assert all(m["error"]["code"] == ErrorCode.INTERNAL_ERROR for m in messages)
    assert reader.unheard == (3, 4)


def test_a_gateways_own_json_error_is_quoted_and_unheard() -> None:
    # {"error": {"code": 503, ...}} with no "jsonrpc": no JSON-RPC error, so quoted in
    # our error (one request or a batch), a Read with no dict (the bindings mark it the
    # transport's), and not the server's words. Mutation: any int code heard -> ();
    # passed on as it came (one request) -> code 503, and a dict.
    body = b'{"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}}'
    alone = _answer(503, JSON, rpc(2, "ping"))
    ((data, decoded),) = [*alone._feed(body), *alone._feed_eof(False)]
    assert decoded is None
    assert loads(data)["error"] == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "HTTP: status 503: unavailable",
        "data": {"httpStatus": 503},
    }
    assert alone.unheard == (2,)
    batch = _answer(503, JSON)
    assert [m["id"] for m in _end(batch, body)] == [3, 4]
    assert batch.unheard == (3, 4)


def test_a_rate_limiters_own_json_error_is_quoted_but_heard() -> None:
    # A 429 whose body is a JSON error of the limiter's own (no "jsonrpc"): something
    # of the server's answered (heard: README, "a refusal below 500"), but no JSON-RPC
    # error came: quoted in ours, no dict, so the bindings raise TransportFailed (README:
    # "an HTTP error without a JSON-RPC error in its body"). Mutation: forwarded as it
    # came -> code 429 with a dict.
    body = b'{"error": {"code": 429, "message": "slow down"}}'
    reader = _answer(429, JSON, rpc(2, "ping"))
    ((data, decoded),) = [*reader._feed(body), *reader._feed_eof(False)]
    assert decoded is None
    assert loads(data)["error"]["message"] == "HTTP: status 429: slow down"
    assert reader.unheard == ()


@pytest.mark.parametrize(("status", "body"), [(429, b""), (403, b"<p>no</p>"), (400, b"{}")])
def test_a_refusal_below_500_is_heard(status: int, body: bytes) -> None:
    # Something of the server's answered (a rate limit, a refusal): not silence.
    # Mutation: heard only for a JSON-RPC error body -> (3, 4).
    reader = _answer(status, HTML)
    assert [m["id"] for m in _end(reader, body)] == [3, 4]
    assert reader.unheard == ()


@pytest.mark.parametrize("status", [400, 500, 503])
def test_a_json_rpc_error_body_with_an_error_status_is_the_servers(status: int) -> None:
    # Alone: forwarded as it came. Mutation: forwarded errors listed -> (2,).
    alone = _answer(status, JSON, rpc(2, "ping"))
    (message,) = _end(alone, error(2, -32000, "busy"))
    assert message["error"] == {"code": -32000, "message": "busy"}
    assert alone.unheard == ()
    # For a batch: quoted in each request's error, still the server's words.
    # Mutation: _error_body not passing heard=spoke -> (3, 4).
    batch = _answer(status, JSON)
    messages = _end(batch, error(None, -32000, "busy"))
    assert [m["error"]["message"] for m in messages] == [f"HTTP: status {status}: busy"] * 2
    assert batch.unheard == ()


def test_the_servers_messages_come_first_and_the_own_errors_last() -> None:
    # A JSON body answers one request of the batch; the other's error is made here.
    reader = _answer(200, JSON)
    messages = _end(reader, result(3, {}))
    assert [m["id"] for m in messages] == [3, 4]
    assert "result" in messages[0] and "error" in messages[1]
    assert reader.unheard == (4,)


def test_a_stream_that_ends_unanswered_and_an_accepted_request_are_unheard() -> None:
    note = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    stream = _answer(200, SSE, rpc(2, "ping"))
    messages = _end(stream, sse((None, note)))  # (no event id: cannot be resumed)
    assert [m.get("id") for m in messages] == [None, 2]
    assert stream.unheard == (2,)
    accepted = _answer(202, (), rpc(2, "ping"))
    assert [m["id"] for m in _end(accepted, b"")] == [2]
    assert accepted.unheard == (2,)


def test_every_answer_came_or_one_too_deep_to_pass_on_is_heard() -> None:
    answered = _answer(200, JSON)
    assert len(_end(answered, b"[" + result(3, {}) + b"," + result(4, {}) + b"]")) == 2
    assert answered.unheard == ()
    # A batch item nests too deep to write again: its error is made here, but the
    # server did answer. Mutation: that error listed -> (3,).
    deep = b"[" * 300 + b"]" * 300
    body = b'[{"jsonrpc": "2.0", "id": 3, "result": {"v": ' + deep + b"}}," + result(4, {}) + b"]"
    reader = _answer(200, JSON)
    messages = _end(reader, body)
    assert messages[0]["error"]["message"] == "HTTP: a message nested too deep to pass on"
    assert reader.unheard == ()


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_json_body_past_the_bound_is_heard_though_the_error_is_ours(cut_short: bool) -> None:
    # The server sent a 2xx answer too large to read: the requests fail with the
    # client's error as before, but the server was heard (a keep-alive ping answered so
    # found it alive). Mutation: heard=True dropped (the old rule) -> (3, 4).
    client = legacy_client(HttpClientConfig(max_body_size=64))
    reader = client.response(client.post(BATCH), 200, JSON)
    assert reader.feed(b"[" + b" " * 100) == []
    messages = [loads(m) for m in reader.feed_eof(cut_short=cut_short)]
    assert [m["id"] for m in messages] == [3, 4]
    why = "HTTP: response body over 64 bytes (HttpClientConfig.max_body_size)"
    assert [m["error"]["message"] for m in messages] == [why, why]
    assert all(m["error"]["data"] == {"httpStatus": 200} for m in messages)
    assert reader.unheard == ()


def test_a_stream_that_dropped_an_event_past_the_bound_is_heard() -> None:
    # The answer came as an SSE event too large to read (dropped), then the stream
    # ended: the client's error as before, but the server was heard, as for a JSON body
    # past max_body_size. Mutation: heard=True dropped for the SSE case -> (2,).
    client = legacy_client(HttpClientConfig(max_body_size=64, max_event_size=64))
    reader = client.response(client.post(rpc(2, "ping")), 200, SSE)
    assert reader.feed(sse((None, result(2, {"pad": "x" * 200})))) == []
    (message,) = [loads(m) for m in reader.feed_eof()]
    assert message["id"] == 2
    assert "an SSE event over 64 bytes was dropped" in message["error"]["message"]
    assert reader.unheard == ()


def test_a_resumed_stream_ending_after_an_earlier_dropped_event_is_heard() -> None:
    # The mark comes from an earlier stream of the same request (after it went out, so
    # the server spoke since): the resumption that brings nothing more fails it with the
    # same error, heard too. Mutation: the mark not carried to the resumption -> the
    # plain "stream ended" error, unheard (2,).
    client = legacy_client(HttpClientConfig(max_event_size=64))
    note = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    first = client.response(client.post(rpc(2, "ping")), 200, SSE)
    first.feed(sse(("1", note), ("2", result(2, {"pad": "x" * 200}))))
    assert first.feed_eof() == []  # (resumed: it has an event id)
    again = first.resume()
    assert again is not None
    resumed = client.response(again, 200, SSE)
    (message,) = [loads(m) for m in resumed.feed_eof()]
    assert message["id"] == 2
    assert "an SSE event over 64 bytes was dropped" in message["error"]["message"]
    assert resumed.unheard == ()

"""Which unanswered requests a response leaves ``broken`` (to re-issue). No I/O.

A modern request whose answer broke after it was sent (an SSE stream that ended without
it, a JSON body cut short) is listed in ``ClientResponse.broken``, not failed: the client
MUST re-issue it with a new id (2026-07-28 changelog item 9). Nothing else is: an error
status, a whole answer that does not answer, an SSE event dropped for its size, any
legacy answer, a ``subscriptions/listen``, and never for anything the server wrote (an
error whose ``data`` says ``streamBroken`` is an answer).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio._json import dumps, loads
from mcp_sansio._versions import Era
from mcp_sansio.http import ClientResponse, HttpClient, HttpClientConfig

URL = "http://localhost:8000/mcp"
PV = "io.modelcontextprotocol/protocolVersion"
SSE = ((b"content-type", b"text/event-stream"),)
JSON = ((b"content-type", b"application/json"),)


def _request(era: Era, rid: int = 2, method: str = "tools/call") -> tuple[HttpClient, bytes]:
    client = HttpClient(URL, HttpClientConfig(era=era, max_event_size=2048))
    params: dict[str, Any] = {"name": "t"}
    if era is Era.MODERN:
        params["_meta"] = {PV: "2026-07-28"}
    else:
        client.session_id = "s"
    return client, dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def _answer(era: Era, status: int, headers: Any, method: str = "tools/call") -> ClientResponse:
    client, payload = _request(era, method=method)
    return client.response(client.post(payload), status, headers)


def _errors(messages: list[bytes]) -> list[dict[str, Any]]:
    return [obj["error"] for m in messages if "error" in (obj := loads(m))]


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_modern_sse_stream_that_ends_unanswered_broke(cut_short: bool) -> None:
    reader = _answer(Era.MODERN, 200, SSE)
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
    assert reader.feed(b"data: " + dumps(note) + b"\n\n") != []
    assert reader.feed_eof(cut_short=cut_short) == []  # (not failed: broken)
    assert reader.broken == (2,)
    assert reader.broken_why == "the stream ended before the response arrived"


def test_a_modern_json_body_cut_short_broke() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    reader.feed(b'{"jsonrpc": "2.0", "id": 2, "res')
    assert reader.feed_eof(cut_short=True) == []
    assert reader.broken == (2,)
    assert reader.broken_why == "the connection closed before the response body ended"
    assert reader.take_warnings() == []  # (a body cut short is no body "that is not JSON")


def test_a_json_body_cut_short_that_still_answers_is_the_answer() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    answer = dumps({"jsonrpc": "2.0", "id": 2, "result": {}})
    reader.feed(answer)
    assert reader.feed_eof(cut_short=True) == [answer]
    assert reader.broken == ()


def test_a_whole_json_body_that_does_not_answer_did_not_break() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    reader.feed(b"{}")
    (error,) = _errors(reader.feed_eof())
    assert error["message"] == "HTTP: the response did not answer the request"
    assert reader.broken == ()


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_an_error_status_did_not_break(status: int) -> None:
    reader = _answer(Era.MODERN, status, JSON)
    reader.feed(b"oops")
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert reader.broken == () and error["code"] == -32603


def test_a_stream_that_dropped_an_oversize_event_did_not_break() -> None:
    # The answer, most likely: re-issued, it would be too large again.
    reader = _answer(Era.MODERN, 200, SSE)
    reader.feed(b"data: " + b"x" * 4096 + b"\n\n")
    (error,) = _errors(reader.feed_eof())
    assert "max_event_size" in error["message"]
    assert error.get("data") is None and reader.broken == ()


@pytest.mark.parametrize("kind", [SSE, JSON])
def test_a_legacy_answer_never_broke(kind: Any) -> None:
    # (A legacy stream is resumed when it can be; else it fails as it always did.)
    reader = _answer(Era.LEGACY, 200, kind)
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert reader.broken == () and error["code"] == -32603


@pytest.mark.parametrize("kind", [SSE, JSON])
def test_a_listen_is_not_broken_but_fails_as_before(kind: Any) -> None:
    # (Its subscription ends: re-listening is the subscription's business.)
    reader = _answer(Era.MODERN, 200, kind, method="subscriptions/listen")
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert error["code"] == -32603 and reader.broken == ()


@pytest.mark.parametrize("kind", [SSE, JSON])
def test_an_error_that_says_stream_broken_is_an_answer(kind: Any) -> None:
    # The server's words never make a request broken: only the transport does.
    reader = _answer(Era.MODERN, 200, kind)
    error = {"code": -32000, "message": "declined", "data": {"streamBroken": True}}
    forged = dumps({"jsonrpc": "2.0", "id": 2, "error": error})
    out = reader.feed(b"data: " + forged + b"\n\n" if kind is SSE else forged)
    out += reader.feed_eof(cut_short=kind is JSON)
    assert out == [forged] and reader.broken == ()

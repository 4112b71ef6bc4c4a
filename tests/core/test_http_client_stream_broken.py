"""Which failed answers say the request's stream broke (``STREAM_BROKEN``). No I/O.

A modern request whose answer broke after it was sent (an SSE stream that ended without
it, a JSON body cut short) fails with ``data["streamBroken"] is True``: the client MUST
re-issue it with a new id (2026-07-28 changelog item 9). Nothing else says so: an error
status, a whole answer that does not answer, an SSE event dropped for its size, any
legacy answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio._json import dumps, loads
from mcp_sansio._versions import Era
from mcp_sansio.http import STREAM_BROKEN, ClientResponse, HttpClient, HttpClientConfig

URL = "http://localhost:8000/mcp"
PV = "io.modelcontextprotocol/protocolVersion"
SSE = ((b"content-type", b"text/event-stream"),)
JSON = ((b"content-type", b"application/json"),)


def _request(era: Era, rid: int = 2) -> tuple[HttpClient, bytes]:
    client = HttpClient(URL, HttpClientConfig(era=era, max_event_size=2048))
    params: dict[str, Any] = {"name": "t"}
    if era is Era.MODERN:
        params["_meta"] = {PV: "2026-07-28"}
    else:
        client.session_id = "s"
    return client, dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def _answer(era: Era, status: int, headers: Any) -> ClientResponse:
    client, payload = _request(era)
    return client.response(client.post(payload), status, headers)


def _errors(messages: list[bytes]) -> list[dict[str, Any]]:
    return [obj["error"] for m in messages if "error" in (obj := loads(m))]


@pytest.mark.parametrize("cut_short", [False, True])
def test_a_modern_sse_stream_that_ends_unanswered_broke(cut_short: bool) -> None:
    reader = _answer(Era.MODERN, 200, SSE)
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}
    assert reader.feed(b"data: " + dumps(note) + b"\n\n") != []
    (error,) = _errors(reader.feed_eof(cut_short=cut_short))
    assert error["code"] == -32603
    assert error["message"] == "HTTP: the stream ended before the response arrived"
    assert error["data"] == {STREAM_BROKEN: True} == {"streamBroken": True}


def test_a_modern_json_body_cut_short_broke() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    reader.feed(b'{"jsonrpc": "2.0", "id": 2, "res')
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert error["message"] == "HTTP: the connection closed before the response body ended"
    assert error["data"] == {"httpStatus": 200, STREAM_BROKEN: True}
    assert reader.take_warnings() == []  # (a body cut short is no body "that is not JSON")


def test_a_json_body_cut_short_that_still_answers_is_the_answer() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    answer = dumps({"jsonrpc": "2.0", "id": 2, "result": {}})
    reader.feed(answer)
    assert reader.feed_eof(cut_short=True) == [answer]


def test_a_whole_json_body_that_does_not_answer_did_not_break() -> None:
    reader = _answer(Era.MODERN, 200, JSON)
    reader.feed(b"{}")
    (error,) = _errors(reader.feed_eof())
    assert error["message"] == "HTTP: the response did not answer the request"
    assert STREAM_BROKEN not in error["data"]


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_an_error_status_did_not_break(status: int) -> None:
    reader = _answer(Era.MODERN, status, JSON)
    reader.feed(b"oops")
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert STREAM_BROKEN not in (error.get("data") or {})


def test_a_stream_that_dropped_an_oversize_event_did_not_break() -> None:
    # The answer, most likely: re-issued, it would be too large again.
    reader = _answer(Era.MODERN, 200, SSE)
    reader.feed(b"data: " + b"x" * 4096 + b"\n\n")
    (error,) = _errors(reader.feed_eof())
    assert "max_event_size" in error["message"]
    assert error.get("data") is None


@pytest.mark.parametrize("kind", [SSE, JSON])
def test_a_legacy_answer_never_broke(kind: Any) -> None:
    # (A legacy stream is resumed when it can be; else it fails as it always did.)
    reader = _answer(Era.LEGACY, 200, kind)
    (error,) = _errors(reader.feed_eof(cut_short=True))
    assert STREAM_BROKEN not in (error.get("data") or {})

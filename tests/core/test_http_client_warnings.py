"""What an HTTP answer's reader drops is reported, within a bound. No I/O.

A legacy GET stream lasts as long as the session: a peer sending junk events on it must
not grow the reader's ``warnings`` for all that time. The first ``max_warnings`` are
kept (until taken), then a note, and the rest only counted.
"""

from __future__ import annotations

import pytest

from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpClient, HttpClientConfig

URL = "http://localhost:8000/mcp"
SSE = ((b"content-type", b"text/event-stream"),)
NOTE = b"data: " + dumps({"jsonrpc": "2.0", "method": "notifications/message"}) + b"\n\n"
JUNK = b"data: not json\n\n"
NOT_JSON = "dropped a body that is not JSON"


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 1 << 20], ids=["bytewise", "chunks", "whole"])
def test_warnings_past_the_bound_are_only_counted(size: int) -> None:
    client = HttpClient(URL, HttpClientConfig(max_warnings=3))
    sent = client.post(dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}))
    reader = client.response(sent, 200, SSE)
    out: list[bytes] = []
    for part in chunks(JUNK * 1000 + NOTE, size):
        out += reader.feed(part)
    assert [loads(m)["method"] for m in out] == ["notifications/message"]  # (still read)
    assert reader.warnings == [
        *[NOT_JSON] * 3,
        "more than 3 warnings: further ones are only counted",
    ]
    assert reader.warnings_dropped == 997


def test_taken_warnings_are_forgotten_and_the_bound_holds_for_the_whole_answer() -> None:
    client = HttpClient(URL, HttpClientConfig(max_warnings=3))
    sent = client.post(dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}))
    reader = client.response(sent, 200, SSE)
    reader.feed(JUNK * 2)
    assert reader.take_warnings() == [NOT_JSON] * 2
    assert reader.warnings == [] and reader.take_warnings() == []
    reader.feed(JUNK * 5)
    assert reader.take_warnings() == [
        NOT_JSON,
        "more than 3 warnings: further ones are only counted",
    ]
    reader.feed(JUNK * 100)
    assert reader.take_warnings() == []  # (only counted from here on)
    assert reader.warnings_dropped == 104
    (failure,) = reader.feed_eof()  # (the call was not answered)
    assert loads(failure)["id"] == 1


def test_no_warning_is_kept_with_a_bound_of_zero() -> None:
    client = HttpClient(URL, HttpClientConfig(max_warnings=0))
    sent = client.post(dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}))
    reader = client.response(sent, 200, SSE)
    reader.feed(JUNK * 2)
    assert reader.warnings == ["more than 0 warnings: further ones are only counted"]
    assert reader.warnings_dropped == 2

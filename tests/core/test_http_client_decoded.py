"""What a ``ClientResponse`` reads, it hands on parsed: each message with the dict its
bytes parse to (``_feed``, ``_feed_eof``: the bindings pass it to
``Connection.receive_message`` as ``decoded``), never parsing a message twice.

The bytes are those ``feed`` / ``feed_eof`` return (as received, or serialized again
where the reader changed the message: a batch's elements, a ``tools/list`` with tools
dropped), and the dict is always what they parse to, so the connection takes exactly
what it would have read from them. Errors the reader makes itself come unparsed
(``None``). Every ``loads`` of the module is counted.
"""

from __future__ import annotations

import pytest

from mcp_sansio import _http_client
from mcp_sansio._http_client import Read
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import ClientResponse, HttpClient

from .helpers import count_parses
from .test_http_client import JSON, SSE, URL, legacy_client, modern, result, rpc, sse


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    return count_parses(monkeypatch, _http_client)


def read_all(reader: ClientResponse, body: bytes, *, cut_short: bool = False) -> list[Read]:
    got = reader._feed(body) + reader._feed_eof(cut_short)
    for data, decoded in got:
        assert type(data) is bytes
        if decoded is not None:  # exactly what the bytes say
            assert decoded == loads(data)
    return got


def test_a_json_answer_is_handed_on_as_received_with_its_parse(parses: list[bytes]) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    body = result(2, {"x": [1, 2.5, "é", None]})
    parses.clear()
    ((data, decoded),) = read_all(client.response(sent, 200, JSON), body)
    assert data == body
    assert decoded == loads(body)
    assert parses == [body]  # once


def test_sse_events_are_each_parsed_once(parses: list[bytes]) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "x"}))
    note = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"x": 1}})
    answer = result(2, {"content": []})
    parses.clear()
    got = read_all(client.response(sent, 200, SSE), sse(("1", note), ("2", answer)))
    assert got == [(note, loads(note)), (answer, loads(answer))]
    assert parses == [note, answer]


def test_a_batch_answer_s_elements_carry_what_they_serialize_to(parses: list[bytes]) -> None:
    client = legacy_client()
    sent = client.post(b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]")
    body = b"[" + result(3, {}) + b"," + result(4, {"big": 2**60}) + b"]"
    parses.clear()
    got = read_all(client.response(sent, 200, JSON), body)
    assert [decoded for _, decoded in got] == loads(body)
    assert parses == [body]


def test_a_tools_list_with_tools_dropped_carries_what_is_passed_on(
    parses: list[bytes],
) -> None:
    client = HttpClient(URL)
    listing = client.post(modern(1, "tools/list"))
    bad = {"type": "object", "properties": {"x": {"type": "number", "x-mcp-header": "X"}}}
    tools = [{"name": "bad", "inputSchema": bad}, {"name": "ok", "inputSchema": {}}]
    body = result(1, {"tools": tools, "nextCursor": "c"})
    parses.clear()
    ((_, decoded),) = read_all(client.response(listing, 200, JSON), body)
    assert decoded == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"tools": [{"name": "ok", "inputSchema": {}}], "nextCursor": "c"},
    }
    assert parses == [body]


def test_a_modern_body_cut_short_but_whole_is_parsed_once(parses: list[bytes]) -> None:
    client = HttpClient(URL)
    sent = client.post(modern(1, "tools/call", {"name": "x"}))
    body = result(1, {"content": []})
    parses.clear()
    ((data, decoded),) = read_all(client.response(sent, 200, JSON), body, cut_short=True)
    assert (data, decoded) == (body, loads(body))
    assert parses == [body]


def test_errors_made_here_come_unparsed() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    body = b'{"jsonrpc": "2.0", "id": 9, "result": {}}'  # (not an answer to 2)
    passed, (data, decoded) = read_all(client.response(sent, 200, JSON), body)
    assert passed == (body, loads(body))
    assert decoded is None
    assert loads(data)["id"] == 2 and loads(data)["error"]["code"] == -32603
    # The public feed gives the same bytes, without the parse.
    again = client.post(rpc(3, "ping"))
    reader = client.response(again, 200, JSON)
    assert reader.feed(result(3, {})) == []
    assert reader.feed_eof() == [result(3, {})]

"""What a ``ClientResponse`` reads, it hands on parsed: each message with the dict its
bytes parse to (``_feed``, ``_feed_eof``: the bindings pass it to
``Connection.receive_message`` as ``decoded``), never parsing a message twice.

The bytes are those ``feed`` / ``feed_eof`` return (as received, or serialized again
where the reader changed the message: a batch's elements, a ``tools/list`` with tools
dropped), and the dict is always what they parse to, so the connection takes exactly
what it would have read from them. Errors the reader makes itself come unparsed
(``None``: no answer of the server's; a binding marks them, ``transport_errors``); the
server's JSON-RPC error in an error status's body comes parsed. Every ``loads`` of the
module is counted.
"""

from __future__ import annotations

import pytest

from mcp_sansio import ErrorReceived, _http_client
from mcp_sansio._http_client import Read
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import ClientResponse, HttpClient, http_error, transport_errors

from .helpers import ConnectionPair, count_parses
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


@pytest.mark.parametrize("status", [400, 500])
def test_the_server_s_error_in_an_error_status_comes_parsed(status: int) -> None:
    """A JSON-RPC error in an error status's body is the server's words, re-addressed to
    our request: it comes with its dict, as any message of the server's (it came
    unparsed, as the errors made here do, so a binding could not tell them apart)."""
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    error = {"code": -32603, "message": "HTTP: the server's", "data": {"httpStatus": 1}}
    body = dumps({"jsonrpc": "2.0", "id": 2, "error": error})
    ((data, decoded),) = read_all(client.response(sent, status, JSON), body)
    assert decoded == {"jsonrpc": "2.0", "id": 2, "error": error} == loads(data)


def test_transport_errors_marks_the_errors_of_a_message_made_here() -> None:
    """``transport_errors``: what ``Connection.receive_message`` made of an
    ``http_error`` is marked ``transport`` (the connection cannot tell it from the
    peer's); the same bytes as the peer's are not."""
    pair = ConnectionPair()
    pair.handshake()
    conn = pair.client
    rid = conn.send_request("tools/list", {}, now=0.0)
    conn.data_to_send()
    made = http_error(rid, "status 500", data={"httpStatus": 500})
    (event,) = transport_errors(conn.receive_message(made, now=0.0))
    assert isinstance(event, ErrorReceived)
    assert (event.transport, event.local, event.error.code) == (True, False, -32603)
    other = conn.send_request("tools/list", {}, now=0.0)
    conn.data_to_send()
    (peer,) = conn.receive_message(http_error(other, "status 500"), now=0.0)
    assert isinstance(peer, ErrorReceived) and not peer.transport

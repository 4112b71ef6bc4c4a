"""HttpClient against hostile or odd server answers: the core never raises on peer input.

Each answer below used to raise out of ``ClientResponse.feed_eof`` (``TypeError``,
``RecursionError``). Now it becomes what the client makes of any other bad answer: an
unrecognised error, a tool dropped from ``tools/list`` with a warning
(``2026-07-28/basic/transports/streamable-http#schema-extension``), or a synthesised
error for the request it answered. No I/O.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    ResultReceived,
)
from mcp_sansio._http_common import MAX_SCHEMA_DEPTH
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import (
    ClientResponse,
    HeaderParam,
    HttpClient,
    HttpClientConfig,
    parse_header_params,
)

from .helpers import CLIENT_CAPS, SERVER_CAPS
from .test_fastpath import modern_pair

URL = "http://localhost:8000/mcp"
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
JSON = ((b"content-type", b"application/json"),)
SSE = ((b"content-type", b"text/event-stream"),)
DEEP = 300
"""Nesting orjson reads (up to 1024) but will not write (over 254)."""


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def rpc(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        out["params"] = params
    return dumps(out)


def modern(rid: Any, method: str) -> bytes:
    return rpc(rid, method, {"_meta": {PV: MODERN}})


def feed_all(reader: ClientResponse, body: bytes) -> list[bytes]:
    return reader.feed(body) + reader.feed_eof()


def legacy_client() -> HttpClient:
    client = HttpClient(URL)
    init = client.post(rpc(1, "initialize", {}))
    answer = dumps({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-03-26"}})
    feed_all(client.response(init, 200, (*JSON, (b"mcp-session-id", b"s"))), answer)
    assert client.era is Era.LEGACY
    return client


def list_tools(body: bytes, *, sse: bool = False) -> tuple[list[bytes], ClientResponse, HttpClient]:
    """Answer a modern ``tools/list`` (id 1) with ``body``."""
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))
    reader = client.response(client.post(modern(1, "tools/list")), 200, SSE if sse else JSON)
    if sse:
        body = b"data: " + body + b"\n\n"
    return feed_all(reader, body), reader, client


def tools_body(*tools: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":{"tools":[' + b",".join(tools) + b"]}}"


GOOD_TOOL = dumps(
    {
        "name": "good",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        },
    }
)


# ------------------------------------------------------------------ D8: error.code not an int


def _answer_error(client: HttpClient, payload: bytes, code: Any) -> tuple[list[Any], Any, bool]:
    reader = client.response(client.post(payload), 400, JSON)
    body = dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "bad"}})
    messages = [loads(m) for m in feed_all(reader, body)]
    return messages, client.era, reader.fell_back


@pytest.mark.parametrize(
    "code",
    [[], {"a": 1}, [-32020], {"code": -32022}, -32020.0],
    ids=["list", "object", "list-of-code", "object-with-code", "float"],
)
@pytest.mark.parametrize(
    ("era", "payload", "fallback"),
    [
        (None, modern(1, "server/discover"), True),  # the era probe
        (Era.MODERN, modern(1, "tools/list"), False),
        (None, rpc(1, "tools/list"), False),  # a legacy request
    ],
    ids=["probe", "modern", "legacy"],
)
def test_an_error_code_that_is_not_an_int_is_an_unrecognised_error(
    code: Any, era: Era | None, payload: bytes, fallback: bool
) -> None:
    got = _answer_error(HttpClient(URL, HttpClientConfig(era=era)), payload, code)
    reference = _answer_error(HttpClient(URL, HttpClientConfig(era=era)), payload, "nope")
    assert got == reference
    (message,), new_era, fell_back = got
    assert fell_back is fallback
    assert new_era is (Era.LEGACY if fallback else era)
    assert message["id"] == 1
    assert message["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert message["error"]["data"] == {"httpStatus": 400}
    if not fallback:
        assert message["error"]["message"] == "HTTP: status 400: bad"


# ------------------------------------------------------------ D9: x-mcp-header schema trouble


@pytest.mark.parametrize(
    ("prop", "why"),
    [
        (dumps({"type": ["string", "null"], "x-mcp-header": "R"}), "type is a JSON array"),
        (dumps({"type": {"const": "string"}, "x-mcp-header": "R"}), "type is a JSON object"),
        (dumps({"x-mcp-header": "R"}), "type is a JSON null"),
        (dumps({"type": "number", "x-mcp-header": "R"}), "type is 'number'"),
        (b'{"type":' + nested(900) + b',"x-mcp-header":"R"}', "type is a JSON array"),
        (b'{"type":"string","x-mcp-header":' + nested(900) + b"}", "a JSON array at p is not"),
        (dumps({"type": "string", "x-mcp-header": 7}), "a JSON number at p is not"),
    ],
    ids=["type-list", "type-object", "no-type", "number", "deep-type", "deep-name", "int-name"],
)
def test_annotations_on_odd_types_make_the_tool_invalid(prop: bytes, why: str) -> None:
    bad = b'{"name":"bad","inputSchema":{"type":"object","properties":{"p":' + prop + b"}}}"
    (message,), reader, client = list_tools(tools_body(bad, GOOD_TOOL))
    assert [t["name"] for t in loads(message)["result"]["tools"]] == ["good"]
    (warning,) = reader.warnings
    assert warning.startswith("dropped tool 'bad': x-mcp-header") and why in warning
    assert len(warning) < 200  # a peer's value is described, never copied into the warning
    assert client.header_params("bad") == ()
    assert client.header_params("good") == (HeaderParam(name="Region", path=("region",)),)


def test_a_deeply_nested_schema_drops_the_tool() -> None:
    bad = b'{"name":"bad","inputSchema":{"type":"object","allOf":' + nested(1000) + b"}}"
    (message,), reader, _ = list_tools(tools_body(bad, GOOD_TOOL))
    assert [t["name"] for t in loads(message)["result"]["tools"]] == ["good"]
    assert reader.warnings == [
        f"dropped tool 'bad': the schema at (root) nests deeper than {MAX_SCHEMA_DEPTH} "
        "levels, so its x-mcp-header annotations cannot be checked"
    ]


def test_a_bad_tool_whose_name_is_not_a_string() -> None:
    bad = b'{"name":' + nested(900) + b',"inputSchema":' + nested(900) + b"}"
    (message,), reader, _ = list_tools(tools_body(bad, GOOD_TOOL))
    assert [t["name"] for t in loads(message)["result"]["tools"]] == ["good"]
    assert reader.warnings[0].startswith("dropped tool without a name: ")


def test_a_legacy_tools_list_is_passed_on_whole() -> None:
    # x-mcp-header is a 2026-07-28 extension: no legacy revision gives it a meaning.
    client = legacy_client()
    body = tools_body(BAD_TOOL, GOOD_TOOL).replace(b'"id":1', b'"id":2', 1)
    reader = client.response(client.post(rpc(2, "tools/list")), 200, JSON)
    assert feed_all(reader, body) == [body]
    assert reader.warnings == []
    assert client.header_params("good") == ()  # nothing learnt: legacy requests send none


def _properties_chain(levels: int) -> dict[str, Any]:
    """``levels`` nested ``properties`` steps, the last one annotated."""
    schema: dict[str, Any] = {"type": "string", "x-mcp-header": "Deep"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"p": schema}}
    return schema


def test_the_schema_depth_bound() -> None:
    # The root is level 1; each ``properties`` step adds two (the keyword, the subschema).
    deepest = (MAX_SCHEMA_DEPTH - 1) // 2
    assert parse_header_params(_properties_chain(deepest)) == (
        HeaderParam(name="Deep", path=("p",) * deepest),
    )
    with pytest.raises(ValueError, match=f"deeper than {MAX_SCHEMA_DEPTH} levels"):
        parse_header_params(_properties_chain(deepest + 1))
    assert parse_header_params(loads(nested(MAX_SCHEMA_DEPTH))) == ()
    with pytest.raises(ValueError, match=r"at \(root\) nests deeper"):
        parse_header_params(loads(nested(MAX_SCHEMA_DEPTH + 1)))
    # instance data is not searched, so it may nest deeper
    deep_default = {"type": "object", "default": loads(nested(DEEP))}
    assert parse_header_params(deep_default) == ()


# ---------------------------------------------------- D10: answers too deep to serialize again


DEEP_TOOL = b'{"name":"deep","inputSchema":{"type":"object","default":' + nested(DEEP) + b"}}"
BAD_TOOL = dumps(
    {
        "name": "bad",
        "inputSchema": {
            "type": "object",
            "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
        },
    }
)


@pytest.mark.parametrize("sse", [False, True])
def test_a_deep_tools_list_result_with_nothing_dropped_is_passed_on_untouched(sse: bool) -> None:
    body = tools_body(DEEP_TOOL, GOOD_TOOL)
    (message,), reader, client = list_tools(body, sse=sse)
    assert message == body  # the very bytes received: never serialized again
    assert reader.warnings == [] and reader.unanswered == ()
    assert client.header_params("good") == (HeaderParam(name="Region", path=("region",)),)


@pytest.mark.parametrize("sse", [False, True])
def test_a_deep_tools_list_result_that_cannot_be_rewritten_fails_the_request(sse: bool) -> None:
    (message,), reader, _ = list_tools(tools_body(DEEP_TOOL, BAD_TOOL), sse=sse)
    assert loads(message) == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": ErrorCode.INTERNAL_ERROR,
            "message": "HTTP: a message nested too deep to pass on",
            "data": {"httpStatus": 200},
        },
    }
    assert reader.warnings[0].startswith("dropped tool 'bad': ")
    assert reader.warnings[1:] == ["dropped a message nested too deep to pass on"]
    assert reader.unanswered == ()


def test_the_connection_sees_the_kept_tools_and_the_failures() -> None:
    conn, _ = modern_pair()
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))

    def ask(tools: bytes) -> list[Any]:
        rid = conn.send_request("tools/list", now=0.0)
        (payload,) = conn.data_to_send()
        reader = client.response(client.post(payload), 200, JSON)
        body = dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
        body = body.replace(b"[]", b"[" + tools + b"]")
        return [e for m in feed_all(reader, body) for e in conn.receive_message(m, now=0.0)]

    type_array = dumps(
        {
            "name": "bad",
            "inputSchema": {
                "type": "object",
                "properties": {"r": {"type": ["string", "null"], "x-mcp-header": "R"}},
            },
        }
    )
    (event,) = ask(type_array + b"," + GOOD_TOOL)
    assert isinstance(event, ResultReceived)
    assert [t["name"] for t in event.result["tools"]] == ["good"]
    (event,) = ask(DEEP_TOOL + b"," + GOOD_TOOL)
    assert isinstance(event, ResultReceived)
    assert [t["name"] for t in event.result["tools"]] == ["deep", "good"]
    (event,) = ask(DEEP_TOOL + b"," + BAD_TOOL)
    assert isinstance(event, ErrorReceived) and event.method == "tools/list"
    assert event.error.code == ErrorCode.INTERNAL_ERROR


def test_batch_items_too_deep_to_serialize_again() -> None:
    client = legacy_client()
    batch = client.post(b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]")
    note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":' + nested(DEEP)
    body = (
        b'[{"jsonrpc":"2.0","id":3,"result":{"x":'
        + nested(DEEP)
        + b'}},{"jsonrpc":"2.0","id":4,"result":{}},'
        + note
        + b"}}]"
    )
    reader = client.response(batch, 200, JSON)
    three, four = (loads(m) for m in feed_all(reader, body))
    assert three["id"] == 3 and three["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert "nested too deep" in three["error"]["message"]
    assert four == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert reader.warnings == ["dropped a message nested too deep to pass on"] * 2


@pytest.mark.parametrize(
    ("message", "kept"),
    [(b'"Header mismatch"', "Header mismatch"), (nested(DEEP), "")],
    ids=["text", "deep"],
)
def test_a_modern_error_with_deep_data_is_passed_on_without_it(message: bytes, kept: str) -> None:
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))
    reader = client.response(client.post(modern(1, "tools/list")), 400, JSON)
    body = (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":'
        + message
        + b',"data":'
        + nested(DEEP)
        + b"}}"
    )
    (out,) = feed_all(reader, body)
    assert loads(out) == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": kept}}


def test_a_legacy_error_with_deep_data_is_passed_on_without_it() -> None:
    client = legacy_client()
    reader = client.response(client.post(rpc(2, "tools/list")), 400, JSON)
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no","data":'
    (out,) = feed_all(reader, body + nested(DEEP) + b"}}")
    assert loads(out) == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32600, "message": "no"}}


# -------------------------------------- a legacy stream that ends after its request was cancelled


CANCELLED = {"jsonrpc": "2.0", "method": "notifications/cancelled"}


def _cancel(rid: Any) -> bytes:
    return dumps({**CANCELLED, "params": {"requestId": rid, "reason": "gave up"}})


@pytest.mark.parametrize("era", [Era.LEGACY, Era.MODERN, None])
def test_the_request_a_cancellation_names_is_found_in_either_era(era: Era | None) -> None:
    client = HttpClient(URL, HttpClientConfig(era=era))
    assert client.cancelled_request(_cancel(7)) == 7
    assert client.cancelled_request(_cancel("a")) == "a"
    assert client.stream_cancellation(_cancel(7)) == (7 if era is Era.MODERN else None)


@pytest.mark.parametrize(
    "payload",
    [
        rpc(1, "tools/call", {"name": "notifications/cancelled"}),  # a request, not one
        b"[" + _cancel(7) + b"]",
        dumps(CANCELLED),
        dumps({**CANCELLED, "params": []}),
        dumps({**CANCELLED, "params": {"requestId": 1.5}}),
        dumps({**CANCELLED, "params": {}}),
        b'{"method":"notifications/cancelled"',  # not JSON: post() says so
        rpc(1, "ping"),
    ],
    ids=["mention", "batch", "no-params", "params-list", "float-id", "no-id", "not-json", "ping"],
)
def test_what_is_not_a_cancellation(payload: bytes) -> None:
    assert HttpClient(URL).cancelled_request(payload) is None


def test_a_stream_ended_after_its_request_was_cancelled_is_not_resumed() -> None:
    client = legacy_client()
    reader = client.response(client.post(rpc(2, "tools/call", {"name": "t"})), 200, SSE)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    assert len(reader.feed(b"id: 4:1\ndata: " + dumps(progress) + b"\n\n")) == 1
    reader.forget(client.cancelled_request(_cancel(2)) or 0)
    reader.forget(99)  # not one of its requests: ignored
    assert reader.unanswered == ()
    assert reader.feed_eof() == []  # no error for a request nobody waits for
    assert reader.resume() is None


def test_a_late_answer_to_a_cancelled_request_is_passed_on() -> None:
    client = legacy_client()
    reader = client.response(client.post(rpc(2, "tools/call", {"name": "t"})), 200, SSE)
    reader.forget(2)
    answer = dumps({"jsonrpc": "2.0", "id": 2, "result": {}})
    assert feed_all(reader, b"id: 4:1\ndata: " + answer + b"\n\n") == [answer]
    assert reader.resume() is None


def test_a_batch_stream_is_resumed_only_for_the_requests_still_awaited() -> None:
    client = legacy_client()
    batch = client.post(b"[" + rpc(2, "ping") + b"," + rpc(3, "tools/list") + b"]")
    reader = client.response(batch, 200, SSE)
    reader.forget(2)
    assert feed_all(reader, b"id: 4:1\ndata: \n\n") == []
    again = reader.resume()
    assert again is not None and again.request.method == "GET"
    assert again.request_ids == (3,) and again.methods == ("tools/list",)
    resumed = client.response(again, 200, SSE)
    resumed.forget(3)  # cancelled in turn, while the GET was on its way
    assert feed_all(resumed, b"") == [] and resumed.resume() is None


def test_a_cancellation_from_the_connection_ends_the_wait() -> None:
    """The whole flow: the client Connection cancels a request, the binding finds which
    one in the message it sends, and the stream's reader stops waiting for it."""
    conn = Connection(
        "client",
        ConnectionConfig(
            implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="legacy"
        ),
    )
    client = legacy_client()
    conn.start(now=0.0)
    (init,) = conn.data_to_send()
    answer = {
        "protocolVersion": "2025-03-26",
        "capabilities": SERVER_CAPS,
        "serverInfo": {"name": "s", "version": "1"},
    }
    conn.receive_message(
        dumps({"jsonrpc": "2.0", "id": loads(init)["id"], "result": answer}), now=0.0
    )
    conn.data_to_send()  # notifications/initialized
    rid = conn.send_request("tools/list", now=0.0)
    (payload,) = conn.data_to_send()
    reader = client.response(client.post(payload), 200, SSE)
    assert reader.feed(b"id: 1:1\ndata: \n\n") == []
    conn.cancel_request(rid)
    (cancel,) = conn.data_to_send()
    assert client.cancelled_request(cancel) == rid
    reader.forget(rid)
    assert reader.feed_eof() == [] and reader.resume() is None
    assert client.post(cancel).request.method == "POST"  # legacy: the notification goes out

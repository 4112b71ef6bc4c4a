"""The Streamable HTTP client rules, and client ↔ server flows over HTTP-shaped values. No I/O.

:class:`HttpPair` is an in-memory binding: it moves what a client ``Connection`` wants to
send through :class:`HttpClient` and :class:`HttpServer` and back, the way a real binding
would with sockets. It is also the reference for what a binding must do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    Event,
    HandshakeCompleted,
    LocalProtocolError,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    SubscriptionNotificationReceived,
)
from mcp_sansio import _http_client as http_client_module
from mcp_sansio._http_client import SSE_FIELD_ROOM, reissue_refused, split_broken
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import (
    FORGOTTEN_BEFORE_ANSWER,
    FORGOTTEN_TWICE,
    AwaitResponse,
    ClientRequest,
    ClientResponse,
    HeaderParam,
    HttpClient,
    HttpClientConfig,
    HttpRequest,
    HttpResponse,
    HttpServer,
    HttpServerConfig,
    OpenStream,
    ReplyNotCarried,
    ResponseReady,
    ServerEvent,
    SessionEnded,
    SessionPending,
    StreamData,
    pinned_http_config,
)
from tests.schema import validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS

URL = "http://localhost:8000/mcp"
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
JSON = ((b"content-type", b"application/json"),)
SSE = ((b"content-type", b"text/event-stream"),)


def rpc(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        out["params"] = params
    return dumps(out)


def modern(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    return rpc(rid, method, {**(params or {}), "_meta": {PV: MODERN, CC: {}}})


def result(rid: Any, value: dict[str, Any]) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid: Any, code: int, message: str = "x", data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return dumps({"jsonrpc": "2.0", "id": rid, "error": err})


def read(reader: ClientResponse, body: bytes, *, chunk: int | None = None) -> list[Any]:
    out: list[bytes] = []
    step = chunk or max(len(body), 1)
    for i in range(0, len(body), step):
        out += reader.feed(body[i : i + step])
    out += reader.feed_eof()
    return [loads(m) for m in out]


def sse(*events: tuple[str | None, bytes]) -> bytes:
    parts = []
    for event_id, data in events:
        head = f"id: {event_id}\n" if event_id is not None else ""
        parts.append(head.encode() + b"data: " + data + b"\n\n")
    return b"".join(parts)


def legacy_client(config: HttpClientConfig | None = None) -> HttpClient:
    client = HttpClient(URL, config)
    init = client.post(
        rpc(
            1,
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
    )
    reader = client.response(init, 200, (*JSON, (b"mcp-session-id", b"sess-1")))
    read(
        reader,
        result(
            1,
            {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"},
            },
        ),
    )
    return client


# ================================================================== request headers


def test_initialize_post_headers() -> None:
    client = HttpClient(URL)
    sent = client.post(rpc(1, "initialize", {"protocolVersion": LEGACY}))
    request = sent.request
    assert (request.method, request.target) == ("POST", "/mcp")
    assert request.header("host") == "localhost:8000"
    assert request.header("accept") == "application/json, text/event-stream"
    assert request.header("content-type") == "application/json"
    assert request.header("mcp-protocol-version") is None
    assert request.header("mcp-session-id") is None
    assert sent.request_ids == (1,) and sent.methods == ("initialize",) and not sent.modern


def test_the_session_and_version_follow_initialize() -> None:
    client = legacy_client()
    assert (client.session_id, client.protocol_version, client.era) == (
        "sess-1",
        LEGACY,
        Era.LEGACY,
    )
    sent = client.post(rpc(2, "tools/list"))
    assert sent.request.header("mcp-session-id") == "sess-1"
    assert sent.request.header("mcp-protocol-version") == LEGACY
    assert sent.with_session
    note = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert note.request_ids == () and note.request.header("mcp-session-id") == "sess-1"
    answer = client.post(result(7, {}))  # legacy clients answer server requests by POST
    assert answer.request_ids == ()
    get = client.open_stream()
    assert get.request.method == "GET" and get.request.header("accept") == "text/event-stream"
    assert get.request.header("last-event-id") is None
    delete = client.terminate()
    assert delete is not None and delete.request.method == "DELETE"
    assert delete.request.header("mcp-session-id") == "sess-1"
    assert client.session_id is None and client.terminate() is None
    with pytest.raises(LocalProtocolError):
        client.open_stream()


def test_a_session_id_that_is_not_visible_ascii_is_ignored() -> None:
    client = HttpClient(URL)
    init = client.post(rpc(1, "initialize", {}))
    reader = client.response(init, 200, (*JSON, (b"mcp-session-id", b"bad id")))
    read(reader, result(1, {"protocolVersion": LEGACY}))
    assert client.session_id is None and reader.warnings


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            modern(1, "tools/call", {"name": "get_weather"}),
            {"mcp-method": "tools/call", "mcp-name": "get_weather"},
        ),
        (
            modern(1, "tools/call", {"name": "héllo wörld"}),
            {"mcp-name": "=?base64?aMOpbGxvIHfDtnJsZA==?="},
        ),
        (
            modern(1, "resources/read", {"uri": "file:///projects/myapp/config.json"}),
            {"mcp-method": "resources/read", "mcp-name": "file:///projects/myapp/config.json"},
        ),
        (modern(1, "prompts/get", {"name": " padded "}), {"mcp-name": "=?base64?IHBhZGRlZCA=?="}),
        (modern(1, "tools/list"), {"mcp-method": "tools/list", "mcp-name": None}),
        (modern(1, "server/discover"), {"mcp-session-id": None, "mcp-protocol-version": MODERN}),
    ],
)
def test_modern_post_headers(payload: bytes, expected: dict[str, str | None]) -> None:
    client = HttpClient(URL)
    client.session_id = "stale"  # never sent with a modern request
    sent = client.post(payload)
    assert sent.modern
    assert sent.request.header("mcp-protocol-version") == MODERN
    for name, value in expected.items():
        assert sent.request.header(name) == value


def test_the_header_parameter_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # A server may list new tool names forever (generated, per user, or hostile): the
    # table kept an entry for every tool ever listed, with header parameters or not.
    monkeypatch.setattr(http_client_module, "_MAX_TOOLS_WITH_HEADERS", 3)
    with_header = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}
    client = HttpClient(URL)

    def listing(rid: int, names: list[str], schema: dict[str, Any]) -> None:
        tools = [{"name": name, "inputSchema": schema} for name in names]
        read(
            client.response(client.post(modern(rid, "tools/list")), 200, JSON),
            result(rid, {"tools": tools}),
        )

    listing(1, [f"plain{i}" for i in range(1_000)], {"type": "object"})
    assert client._tool_params == {}  # (tools without header parameters take no room)
    listing(2, ["a", "b", "c"], with_header)
    listing(3, ["d", "b"], with_header)  # over the bound: "a", listed longest ago, goes
    assert list(client._tool_params) == ["c", "d", "b"]
    assert client.header_params("a") == () and client.header_params("b")[0].name == "R"
    listing(4, ["b"], {"type": "object"})  # listed without them now: forgotten
    assert client.header_params("b") == () and list(client._tool_params) == ["c", "d"]


def test_mcp_param_headers_come_from_learnt_tools() -> None:
    client = HttpClient(URL)
    listing = client.post(modern(1, "tools/list"))
    tools = [
        {
            "name": "execute_sql",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "greeting": {"type": "string", "x-mcp-header": "Greeting"},
                    "limit": {"type": "integer", "x-mcp-header": "Limit"},
                    "dry": {"type": "boolean", "x-mcp-header": "Dry"},
                    "missing": {"type": "string", "x-mcp-header": "Missing"},
                    "query": {"type": "string"},
                },
            },
        },
        {
            "name": "broken",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {"type": "number", "x-mcp-header": "X"}},
            },
        },
        {"name": "plain", "inputSchema": {"type": "object"}},
    ]
    reader = client.response(listing, 200, JSON)
    (message,) = read(reader, result(1, {"tools": tools}))
    assert [t["name"] for t in message["result"]["tools"]] == ["execute_sql", "plain"]
    assert any("broken" in w for w in reader.warnings)
    assert client.header_params("execute_sql")[0] == HeaderParam(name="Region", path=("region",))
    call = client.post(
        modern(
            2,
            "tools/call",
            {
                "name": "execute_sql",
                "arguments": {
                    "region": "us-west1",
                    "greeting": "Hello, 世界",
                    "limit": 10.0,
                    "dry": False,
                    "missing": None,
                    "query": "SELECT 1",
                },
            },
        )
    )
    request = call.request
    assert request.header("mcp-param-region") == "us-west1"
    assert request.header("mcp-param-greeting") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert request.header("mcp-param-limit") == "10"
    assert request.header("mcp-param-dry") == "false"
    assert request.header("mcp-param-missing") is None
    huge = client.post(
        modern(3, "tools/call", {"name": "execute_sql", "arguments": {"limit": 2**60}})
    )
    assert huge.request.header("mcp-param-limit") is None  # cannot be mirrored: left out


def test_tools_list_results_without_bad_tools_are_untouched() -> None:
    client = HttpClient(URL)
    listing = client.post(modern(1, "tools/list"))
    body = result(
        1, {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "c"}
    )
    (message,) = read(client.response(listing, 200, JSON), body)
    assert message == loads(body)


def test_modern_clients_send_no_responses_and_cancel_by_closing() -> None:
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))
    cancel = dumps(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
    )
    assert client.stream_cancellation(cancel) == 4
    assert client.stream_cancellation(modern(1, "tools/list")) is None
    assert (
        client.stream_cancellation(dumps({"jsonrpc": "2.0", "method": "notifications/cancelled"}))
        is None
    )
    with pytest.raises(LocalProtocolError, match="closing"):
        client.post(cancel)
    with pytest.raises(ReplyNotCarried):  # a reply the era cannot carry: drop it, go on
        client.post(result(1, {}))
    with pytest.raises(LocalProtocolError, match="no responses") as batch:
        client.post(b"[" + result(1, {}) + b"]")
    assert not isinstance(batch.value, ReplyNotCarried)  # (a bug of the caller's)
    with pytest.raises(LocalProtocolError, match="session"):
        client.open_stream()
    legacy = HttpClient(URL)
    assert legacy.stream_cancellation(cancel) is None


@pytest.mark.parametrize("payload", [b"{", b"[]", b"[1]", b"3"])
def test_post_refuses_what_is_not_a_message(payload: bytes) -> None:
    with pytest.raises(LocalProtocolError):
        HttpClient(URL).post(payload)


@pytest.mark.parametrize("url", ["ftp://x/mcp", "/mcp", "http:///mcp"])
def test_urls_must_be_absolute_http(url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        HttpClient(url)


def test_target_keeps_the_query_and_host_the_port() -> None:
    sent = HttpClient("https://user@example.com/a/mcp?k=v").post(rpc(1, "initialize", {}))
    assert sent.request.target == "/a/mcp?k=v" and sent.request.header("host") == "example.com"


# ================================================================== reading responses


def test_json_body_single_and_batch() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    assert read(client.response(sent, 200, JSON), result(2, {})) == [loads(result(2, {}))]
    batch = client.post(b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]")
    assert batch.request_ids == (3, 4)
    body = b"[" + result(3, {}) + b"," + result(4, {}) + b"]"
    assert [m["id"] for m in read(client.response(batch, 200, JSON), body)] == [3, 4]


def test_a_json_answer_that_misses_a_request_fails_it() -> None:
    client = legacy_client()
    sent = client.post(b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]")
    messages = read(client.response(sent, 200, JSON), result(3, {}))
    assert messages[1]["id"] == 4 and messages[1]["error"]["code"] == ErrorCode.INTERNAL_ERROR


@pytest.mark.parametrize("chunk", [None, 1, 7])
def test_sse_body_in_any_chunking(chunk: int | None) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 200, ((b"Content-Type", b"text/event-stream; charset=utf-8"),))
    assert reader.kind == "sse"
    progress = dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 2, "progress": 1},
        }
    )
    body = (
        b"id: 9:0\nretry: 500\ndata: \n\n"
        + b": keep-alive\n\n"
        + sse(("9:1", progress), ("9:2", result(2, {"content": []})))
    )
    messages = read(reader, body, chunk=chunk)
    assert [m.get("method", m.get("id")) for m in messages] == ["notifications/progress", 2]
    assert reader.last_event_id == "9:2" and reader.retry_ms == 500
    assert reader.unanswered == () and reader.resume() is None


def test_a_broken_legacy_stream_is_resumed_with_last_event_id() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 200, SSE)
    assert read(reader, b"id: 9:0\ndata: \n\n") == []  # no error: it can still be resumed
    assert reader.unanswered == (2,) and reader.retry_ms == 1_000
    again = reader.resume()
    assert again is not None
    assert again.request.method == "GET"
    assert again.request.header("last-event-id") == "9:0"
    assert again.request.header("mcp-session-id") == "sess-1"
    assert again.request_ids == (2,) and again.methods == ("tools/call",)
    resumed = client.response(again, 200, SSE)
    assert read(resumed, sse(("9:1", result(2, {"content": []})))) == [
        loads(result(2, {"content": []}))
    ]


def test_a_broken_stream_without_an_id_fails_its_requests() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 200, SSE)
    (failure,) = read(reader, b"")
    assert failure["id"] == 2 and failure["error"]["code"] == ErrorCode.INTERNAL_ERROR
    modern_client = HttpClient(URL)
    call = modern_client.post(modern(3, "tools/call", {"name": "t"}))
    modern_reader = modern_client.response(call, 200, SSE)
    assert read(modern_reader, b"id: 1\ndata: \n\n") == []
    # Modern streams are never resumed: the request is left to re-issue (2026-07-28).
    assert modern_reader.resume() is None and modern_reader.broken == (3,)


def test_the_standalone_stream_is_always_resumable() -> None:
    client = legacy_client()
    get = client.open_stream()
    reader = client.response(get, 200, SSE)
    read(
        reader,
        sse(("3:1", dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))),
    )
    again = reader.resume()
    assert again is not None and again.request.header("last-event-id") == "3:1"


def test_oversize_events_and_bodies() -> None:
    client = HttpClient(URL, HttpClientConfig(max_event_size=64, max_body_size=64))
    sent = client.post(rpc(1, "initialize", {}))
    reader = client.response(sent, 200, SSE)
    assert (
        read(reader, sse((None, b'"' + b"x" * 100 + b'"')))[0]["error"]["code"]
        == ErrorCode.INTERNAL_ERROR
    )
    assert reader.warnings == ["dropped an SSE event over 64 bytes"]
    reader = client.response(client.post(rpc(2, "initialize", {})), 200, JSON)
    (failure,) = read(reader, b"[" + b" " * 100 + b"]", chunk=10)
    assert "over 64 bytes (HttpClientConfig.max_body_size)" in failure["error"]["message"]


def test_a_stream_that_ends_after_a_dropped_event_names_the_bound() -> None:
    client = HttpClient(URL, HttpClientConfig(max_event_size=64))
    reader = client.response(client.post(rpc(1, "initialize", {})), 200, SSE)
    (failure,) = read(reader, sse((None, b'"' + b"x" * 100 + b'"')))
    assert failure["error"]["message"] == (
        "HTTP: the stream ended before the response arrived"
        " (an SSE event over 64 bytes was dropped: HttpClientConfig.max_event_size)"
    )
    reader = client.response(client.post(rpc(2, "initialize", {})), 200, SSE)
    (failure,) = read(reader, b"")  # nothing dropped: nothing to blame
    assert failure["error"]["message"] == "HTTP: the stream ended before the response arrived"


def test_a_resumed_stream_still_names_the_dropped_event() -> None:
    # Legacy: the dropped event's id took effect, so the stream resumes after it; the
    # answer never comes, and the error says why.
    client = legacy_client(HttpClientConfig(max_event_size=64))
    reader = client.response(client.post(rpc(2, "ping")), 200, SSE)
    assert read(reader, sse(("7", b'"' + b"x" * 100 + b'"'))) == []
    again = reader.resume()
    assert again is not None and again.dropped == 64
    assert again.request.header("last-event-id") == "7"
    resumed = client.response(again, 200, SSE)
    (failure,) = read(resumed, b"")  # (no event id: not resumable again)
    assert failure["id"] == 2
    assert "dropped: HttpClientConfig.max_event_size" in failure["error"]["message"]


def test_the_message_bound_is_what_both_an_event_and_a_body_deliver() -> None:
    assert HttpClientConfig().max_message_size == 4 * 1024 * 1024 - SSE_FIELD_ROOM
    assert HttpClientConfig(max_event_size=5000, max_body_size=1000).max_message_size == 1000
    assert HttpClientConfig(max_event_size=5000).max_message_size == 5000 - SSE_FIELD_ROOM
    assert HttpClientConfig(max_event_size=SSE_FIELD_ROOM - 1).max_message_size == 0


def test_bodies_that_are_not_messages() -> None:
    client = legacy_client()
    reader = client.response(client.post(rpc(2, "ping")), 200, JSON)
    (failure,) = read(reader, b"not json")
    assert failure["id"] == 2 and reader.warnings == ["dropped a body that is not JSON"]
    reader = client.response(client.post(rpc(3, "ping")), 200, JSON)
    assert read(reader, b"[1]")[0]["id"] == 3
    with pytest.raises(LocalProtocolError):
        reader.feed(b"more")
    assert reader.feed_eof() == []


def test_an_empty_body_that_nothing_waits_on_is_no_warning() -> None:
    # A server that answers a notification 200 with an empty JSON body (transports.mdx
    # says 202), or the DELETE that ends a session (the Python SDK's): nothing to drop,
    # so nothing to warn of, each time it does so.
    client = legacy_client()
    notified = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    reader = client.response(notified, 200, JSON)
    assert read(reader, b"") == [] and reader.warnings == []
    delete = client.terminate()
    assert delete is not None
    reader = client.response(delete, 200, JSON)
    assert read(reader, b"") == [] and reader.warnings == []
    # A body that is there but no JSON is still said, as is an empty answer to a request.
    client = legacy_client()
    notified = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    reader = client.response(notified, 200, JSON)
    assert read(reader, b"oops") == []
    assert reader.warnings == ["dropped a body that is not JSON"]
    reader = client.response(client.post(rpc(2, "ping")), 200, JSON)
    (failure,) = read(reader, b"")
    assert failure["id"] == 2 and reader.warnings == ["dropped a body that is not JSON"]


@pytest.mark.parametrize("status", [202, 204])
def test_accepted(status: int) -> None:
    client = legacy_client()
    note = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert read(client.response(note, status, ()), b"") == []
    oops = client.post(rpc(2, "ping"))  # a server that accepts a request without answering it
    (failure,) = read(client.response(oops, status, ()), b"")
    assert failure["id"] == 2 and failure["error"]["data"] == {"httpStatus": status}


NO_SESSION = error(None, -32600, "Not Found: no such session")


def initialize_again(client: HttpClient, rid: int, session_id: bytes = b"sess-2") -> ClientRequest:
    """The new ``initialize`` after a lost session, answered with ``session_id``."""
    init = client.post(rpc(rid, "initialize", {"protocolVersion": LEGACY}))
    reader = client.response(init, 200, (*JSON, (b"mcp-session-id", session_id)))
    read(reader, result(rid, {"protocolVersion": LEGACY, "capabilities": {}}))
    return init


def session_of(client: HttpClient) -> tuple[str | None, str | None]:
    return client.session_id, client.protocol_version


def test_404_with_a_session_starts_a_new_one() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/list"))
    assert sent.session_id == "sess-1" and sent.with_session and not sent.resent
    reader = client.response(sent, 404, JSON)
    assert reader.session_expired == "restart" and reader.sent is sent
    # Never processed by the server: not failed, but to be sent again.
    assert read(reader, NO_SESSION) == [] and reader.resend == (2,)
    assert session_of(client) == (None, None)
    # Until the new initialize is answered, nothing else can go out.
    with pytest.raises(SessionPending) as pending:
        client.post(rpc(3, "tools/call", {"name": "echo"}))
    assert pending.value.request_ids == (3,)
    with pytest.raises(SessionPending) as pending:
        client.post(dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
    assert pending.value.request_ids == () and pending.value.deferrable
    # transports.mdx: "a new InitializeRequest without a session ID attached".
    init = initialize_again(client, 4)
    assert init.request.header("mcp-session-id") is None and not init.with_session
    assert session_of(client) == ("sess-2", LEGACY)
    again = client.post(rpc(2, "tools/list"))
    assert again.request.header("mcp-session-id") == "sess-2" and again.resent
    assert not client.post(rpc(5, "ping")).resent


@pytest.mark.parametrize(
    ("message", "deferrable"),
    [
        (rpc(3, "tools/list"), False),  # (its id is handed back instead)
        (dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}), True),
        (dumps({"jsonrpc": "2.0", "method": "x/custom", "params": {}}), True),
        (dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}), False),
        (dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}), False),
        (result("s-1", {}), False),  # an answer to the old session's request
        (error("s-1", -1), False),
        (dumps([{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]), False),
    ],
    ids=["request", "notification", "custom", "cancelled", "progress", "result", "error", "batch"],
)
def test_what_may_wait_for_the_new_session(message: bytes, deferrable: bool) -> None:
    client = legacy_client()
    client.response(client.post(rpc(2, "tools/list")), 404, JSON)
    with pytest.raises(SessionPending) as pending:
        client.post(message)
    assert pending.value.deferrable is deferrable


def test_a_refused_request_is_sent_again_once() -> None:
    client = legacy_client()
    lost = client.response(
        client.post(dumps([loads(rpc(2, "ping")), loads(rpc(3, "ping"))])), 404, JSON
    )
    assert lost.session_expired == "restart" and read(lost, NO_SESSION) == []
    assert lost.resend == (2, 3)
    initialize_again(client, 4)
    # Request 3 is cancelled before it is sent again: it is not watched any more.
    assert (
        client.cancelled_request(
            dumps(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
            )
        )
        == 3
    )
    assert not client.post(rpc(3, "ping")).resent
    # post() only says so: a binding may build the same POST twice (a fast path that
    # gives up before a byte went out), and it is still the one sending it again.
    assert client.post(rpc(2, "ping")).resent
    again = client.post(rpc(2, "ping"))
    assert again.resent
    read(client.response(again, 200, JSON), result(2, {}))  # answered: watched no more
    assert not client.post(rpc(2, "ping")).resent


def test_a_broken_initialize_stream_is_resumed_on_the_session_it_started() -> None:
    client = HttpClient(URL)
    init = client.post(rpc(1, "initialize", {"protocolVersion": LEGACY}))
    reader = client.response(init, 200, (*SSE, (b"mcp-session-id", b"sess-1")))
    log = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    assert read(reader, sse(("e1", log))) == [loads(log)]  # then the stream breaks
    again = reader.resume()
    assert again is not None and again.request_ids == (1,) and again.methods == ("initialize",)
    assert again.request.header("mcp-session-id") == "sess-1"
    assert again.request.header("last-event-id") == "e1"
    answer = result(1, {"protocolVersion": LEGACY, "capabilities": {}})
    assert read(client.response(again, 200, SSE), sse(("e2", answer))) == [loads(answer)]
    assert session_of(client) == ("sess-1", LEGACY)
    # A server without sessions: nothing to resume it on.
    sessionless = HttpClient(URL)
    init = sessionless.post(rpc(1, "initialize", {"protocolVersion": LEGACY}))
    reader = sessionless.response(init, 200, SSE)
    (failure,) = read(reader, sse(("e1", log)))[1:]
    assert failure["id"] == 1 and reader.resume() is None


def test_what_a_404_means_depends_on_the_session_it_was_sent_on() -> None:
    client = legacy_client()
    first, second = client.post(rpc(2, "tools/list")), client.post(rpc(3, "ping"))
    assert client.response(first, 404, JSON).session_expired == "restart"
    # Sent on the session already lost: sent again too, without starting another.
    late = client.response(second, 404, JSON)
    assert late.session_expired == "resend"
    assert read(late, NO_SESSION) == [] and late.resend == (3,)
    initialize_again(client, 4)
    # The new session is lost before it answered any request: the end, no loop.
    note = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert note.session_id == "sess-2"
    assert client.response(note, 404, JSON).session_expired == "end"
    assert client.session_id is None


def test_a_request_sent_again_and_refused_again_is_the_end() -> None:
    client = legacy_client()
    lost = client.post(rpc(2, "tools/list"))
    assert client.response(lost, 404, JSON).session_expired == "restart"
    initialize_again(client, 3)
    confirmed = client.post(rpc(4, "ping"))  # another request proves the new session
    read(client.response(confirmed, 200, JSON), result(4, {}))
    again = client.post(rpc(2, "tools/list"))
    assert again.resent
    reader = client.response(again, 404, JSON)
    assert reader.session_expired == "end"
    (failure,) = read(reader, NO_SESSION)
    assert failure["id"] == 2 and failure["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert failure["error"]["message"].startswith("HTTP: the server forgot")


def test_a_new_session_that_answered_may_be_replaced_in_turn() -> None:
    client = legacy_client()
    assert client.response(client.post(rpc(2, "ping")), 404, JSON).session_expired == "restart"
    initialize_again(client, 3)
    again = client.post(rpc(2, "ping"))
    read(client.response(again, 200, JSON), result(2, {}))
    later = client.post(rpc(4, "tools/list"))
    assert not later.resent  # (request 2 was answered: it is not watched any more)
    assert client.response(later, 404, JSON).session_expired == "restart"


@pytest.mark.parametrize("listened", [True, False])
def test_a_new_session_that_carries_the_get_stream_may_be_replaced_in_turn(
    listened: bool,
) -> None:
    # A client that only listens makes no requests: its new session works once the
    # GET stream is open on it (however long before the server forgets it again).
    client = legacy_client()
    assert client.response(client.open_stream(), 404, JSON).session_expired == "restart"
    initialize_again(client, 2)
    if listened:
        stream = client.response(client.open_stream(), 200, SSE)
        log = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
        assert read(stream, sse(("e1", log))) == [loads(log)]
    else:
        client.response(client.open_stream(), 405, JSON)  # (no GET stream: proves nothing)
    later = client.response(client.open_stream(), 404, JSON)
    assert later.session_expired == ("restart" if listened else "end")


def test_after_the_end_nothing_is_posted() -> None:
    # Without a session every POST would be refused (400): the conversation is over.
    client = legacy_client()
    first, second = client.post(rpc(2, "tools/list")), client.post(rpc(3, "tools/list"))
    assert client.response(first, 404, JSON).session_expired == "restart"
    initialize_again(client, 4)
    note = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert client.response(note, 404, JSON).session_expired == "end"
    for message in (
        rpc(5, "tools/list"),
        dumps({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
        rpc(6, "initialize", {"protocolVersion": LEGACY}),
    ):
        with pytest.raises(SessionEnded):
            client.post(message)
    # A 404 still to come for the lost session is the end too, not a request to resend.
    late = client.response(second, 404, JSON)
    assert late.session_expired == "end" and late.resend == ()
    (failure,) = read(late, NO_SESSION)
    assert failure["id"] == 3 and failure["error"]["code"] == ErrorCode.INTERNAL_ERROR


def test_answers_lost_with_their_session_fail_and_are_not_resumed() -> None:
    client = legacy_client()
    stream = client.response(client.post(rpc(2, "tools/call", {"name": "slow"})), 200, SSE)
    other = client.response(client.post(rpc(3, "tools/call", {"name": "slow"})), 200, SSE)
    progress = dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}
    )
    assert read(stream, sse(("e1", progress)))[0]["method"] == "notifications/progress"
    resumption = stream.resume()
    assert resumption is not None and resumption.request_ids == (2,)
    # The resumption GET finds the session gone: the request was processed, so it is
    # not sent again; its answer is lost.
    reader = client.response(resumption, 404, JSON)
    assert reader.session_expired == "restart"
    (failure,) = read(reader, NO_SESSION)
    assert failure["id"] == 2 and reader.resend == ()
    assert failure["error"]["message"] == "HTTP: the session expired before the answer came"
    # A stream of the lost session that ends early is not resumed on the new one.
    initialize_again(client, 4)
    _, cut = read(other, sse(("e1", progress)))
    assert other.resume() is None and cut["id"] == 3


@pytest.mark.parametrize(
    ("status", "body", "era", "passes_body"),
    [
        (
            400,
            error(
                1, -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": "x"}
            ),
            Era.MODERN,
            True,
        ),
        (400, error(None, -32020, "Header mismatch"), Era.MODERN, True),
        (400, error(1, -32021, "need", {"requiredCapabilities": {}}), Era.MODERN, True),
        (404, error(1, -32601, "Method not found"), Era.MODERN, True),
        (
            400,
            error(None, -32600, "Bad Request: Mcp-Session-Id header is required"),
            Era.LEGACY,
            False,
        ),
        (400, b"", Era.LEGACY, False),
        (404, b"<html>not found</html>", Era.LEGACY, False),
        (405, b"", Era.LEGACY, False),
        (500, b"", None, False),
    ],
)
def test_the_era_probe(status: int, body: bytes, era: Era | None, passes_body: bool) -> None:
    client = HttpClient(URL)
    sent = client.post(modern(1, "server/discover"))
    reader = client.response(sent, status, JSON if body.startswith(b"{") else ())
    (message,) = read(reader, body)
    assert client.era is era
    assert reader.fell_back is (era is Era.LEGACY)
    assert message["id"] == 1
    if passes_body:
        assert message["error"] == loads(body)["error"]
    else:
        assert message["error"]["code"] == ErrorCode.INTERNAL_ERROR  # not a modern code: fall back
        assert message["error"]["data"] == {"httpStatus": status}


def test_the_era_is_settled_by_success_and_then_sticks() -> None:
    client = HttpClient(URL)
    sent = client.post(modern(1, "server/discover"))
    read(client.response(sent, 200, JSON), result(1, {}))
    assert client.era is Era.MODERN
    later = client.post(modern(2, "tools/list"))
    reader = client.response(later, 400, ())
    read(reader, b"")
    assert client.era is Era.MODERN and not reader.fell_back


def test_an_initialize_after_a_32022_probe_makes_the_era_legacy() -> None:
    # The probe's -32022 marks a modern server, but it offered a legacy version of ours:
    # the core falls back to initialize, and its result settles the era as legacy (or
    # cancellations, replies to the server and the GET stream would be refused).
    client = HttpClient(URL)
    probe = client.post(modern(1, "server/discover"))
    offered = {"supported": ["2099-01-01", LEGACY], "requested": MODERN}
    read(client.response(probe, 400, JSON), error(1, -32022, "Unsupported", offered))
    assert client.era is Era.MODERN
    init = client.post(
        rpc(2, "initialize", {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {}})
    )
    answer = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {"name": "s"}}
    read(client.response(init, 200, (*JSON, (b"mcp-session-id", b"s1"))), result(2, answer))
    assert (client.era, client.protocol_version, client.session_id) == (Era.LEGACY, LEGACY, "s1")
    client.post(b'{"jsonrpc":"2.0","id":7,"result":{}}')  # a reply to the server
    client.post(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}')
    assert client.open_stream() is not None


def test_legacy_errors_keep_the_servers_message() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/list"))
    (message,) = read(
        client.response(sent, 400, JSON), error(None, -32600, "Invalid Request: nope")
    )
    assert message == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32600, "message": "Invalid Request: nope"},
    }
    batch = client.post(b"[" + rpc(3, "ping") + b"," + rpc(4, "ping") + b"]")
    messages = read(
        client.response(batch, 400, JSON), error(None, -32600, "Invalid Request: no batches")
    )
    assert [m["id"] for m in messages] == [3, 4]
    assert all("no batches" in m["error"]["message"] for m in messages)


@pytest.mark.parametrize(
    ("status", "location", "redirected"),
    [
        (307, "/other", True),
        (308, "http://localhost:8000/v2/mcp?x=1", True),
        (307, "http://localhost:9000/mcp", False),
        (307, "https://localhost:8000/mcp", False),
        (307, "http://evil.example/mcp", False),
        (307, None, False),
        (302, "/other", False),
        (301, "/other", False),
    ],
)
def test_redirects_only_to_the_same_origin(
    status: int, location: str | None, redirected: bool
) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    headers = () if location is None else ((b"location", location.encode()),)
    reader = client.response(sent, status, headers)
    messages = read(reader, b"")
    if redirected:
        assert reader.kind == "redirect" and messages == []
        assert reader.redirect is not None
        assert reader.redirect.request.body == sent.request.body
        assert reader.redirect.request.target == (location or "").removeprefix(
            "http://localhost:8000"
        )
    else:
        assert reader.redirect is None
        assert messages[0]["error"]["code"] == ErrorCode.INTERNAL_ERROR


def test_unexpected_content_types_are_errors() -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "ping"))
    reader = client.response(sent, 200, ((b"content-type", b"text/html"),))
    assert reader.kind == "error"
    data = {"httpStatus": 200, "contentType": "text/html"}
    assert read(reader, b"<html/>")[0]["error"]["data"] == data


# ================================================================== client <-> server, in memory


def default_app(pair: HttpPair, tagged: ServerEvent) -> None:
    event = tagged.event
    if not isinstance(event, RequestReceived):
        return
    conn = tagged.connection
    if event.method == "tools/list":
        conn.send_result(
            event.request_id, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        )
    elif event.method == "tools/call" and not pair.hold:
        if event.progress_token is not None:
            conn.send_progress(event.request_id, 1, total=2)
            conn.send_progress(event.request_id, 2, total=2)
        conn.send_result(event.request_id, {"content": [{"type": "text", "text": "hi"}]})
    else:
        pair.held.append(tagged)


class HttpPair:
    """A client ``Connection`` + :class:`HttpClient` talking to an :class:`HttpServer`."""

    def __init__(
        self,
        server: HttpServer,
        client_config: ConnectionConfig | None = None,
        *,
        chunk: int | None = None,
        app: Callable[[HttpPair, ServerEvent], None] = default_app,
    ) -> None:
        self.server = server
        self.conn = Connection(
            "client",
            client_config
            or ConnectionConfig(
                implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS
            ),
        )
        self.http = HttpClient(URL)
        self.chunk = chunk
        self.app = app
        self.hold = False
        self.held: list[ServerEvent] = []
        self.readers: dict[int, ClientResponse] = {}
        self.waiting: dict[int, ClientRequest] = {}
        self.stream_of: dict[Any, int] = {}
        self.client_events: list[Event] = []
        self.server_events: list[Any] = []
        self.statuses: list[int] = []
        self.wire: list[Any] = []
        self.requests: list[ClientRequest] = []
        self.ended: str | None = None
        self.now = 0.0

    # -- the binding's loop

    def pump(self) -> None:
        """Send what the client queued, deliver every answer, until nothing moves."""
        while True:
            moved = False
            for payload in self.conn.data_to_send():
                moved = True
                cancelled = self.http.stream_cancellation(payload)
                if cancelled is not None:
                    self.close_stream(self.stream_of[cancelled])
                    continue
                try:
                    sent = self.http.post(payload)
                except SessionPending as pending:  # its requests go on the new session
                    self.session_lost(restart=False, resend=pending.request_ids)
                    continue
                self.send(sent)
            for out in self.server.data_to_send():
                moved = True
                self.deliver(out)
            if not moved:
                return

    def send(self, sent: ClientRequest) -> None:
        self.requests.append(sent)
        if sent.request.body:
            self.wire.append(loads(sent.request.body))
        reply = self.server.handle_request(sent.request, now=self.now)
        decision = reply.decision
        if isinstance(decision, HttpResponse):
            self.statuses.append(decision.status)
            self.feed(
                self.http.response(sent, decision.status, decision.headers), decision.body, True
            )
        elif isinstance(decision, OpenStream):
            self.statuses.append(200)
            for rid in sent.request_ids:
                self.stream_of[rid] = decision.stream_id
            self.readers[decision.stream_id] = self.http.response(sent, 200, decision.headers)
            self.feed(
                self.readers[decision.stream_id], decision.data, decision.end, decision.stream_id
            )
        else:
            assert isinstance(decision, AwaitResponse)
            for rid in sent.request_ids:
                self.stream_of[rid] = decision.stream_id
            self.waiting[decision.stream_id] = sent
        self.on_server_events(reply.events)

    def deliver(self, out: Any) -> None:
        sid = out.stream_id
        if isinstance(out, ResponseReady):
            sent = self.waiting.pop(sid)
            self.statuses.append(out.response.status)
            reader = self.http.response(sent, out.response.status, out.response.headers)
            self.feed(reader, out.response.body, True, sid)
        elif isinstance(out, OpenStream):
            self.statuses.append(200)
            self.readers[sid] = self.http.response(self.waiting.pop(sid), 200, out.headers)
            self.feed(self.readers[sid], out.data, out.end, sid)
        else:
            assert isinstance(out, StreamData)
            if sid in self.readers:
                self.feed(self.readers[sid], out.data, out.end, sid)

    def feed(
        self, reader: ClientResponse, data: bytes, end: bool, stream_id: int | None = None
    ) -> None:
        step = self.chunk or max(len(data), 1)
        messages = [m for i in range(0, len(data), step) for m in reader.feed(data[i : i + step])]
        if end:
            messages += reader.feed_eof()
            if stream_id is not None:
                self.readers.pop(stream_id, None)
                self.on_server_events(self.server.stream_closed(stream_id, now=self.now))
        for message in messages:
            self.wire.append(loads(message))
            self.client_events += self.conn.receive_message(message, now=self.now)
        if end and reader.session_expired == "end":
            self.ended = "end"
        elif end and reader.session_expired:
            self.session_lost(restart=reader.session_expired == "restart", resend=reader.resend)
        if end and (again := reader.resume()) is not None:
            self.send(again)

    def session_lost(self, *, restart: bool, resend: tuple[Any, ...]) -> None:
        """The server forgot the session: start a new one, send again what it refused."""
        if restart:
            self.conn.restart_session(now=self.now)
        for rid in resend:
            self.conn.resend_request(rid)

    def on_server_events(self, events: Any) -> None:
        for tagged in events:
            self.server_events.append(tagged)
            if isinstance(tagged, ServerEvent):
                self.app(self, tagged)

    def close_stream(self, stream_id: int) -> None:
        """The client drops the HTTP response (a disconnect, or a modern cancellation)."""
        reader = self.readers.pop(stream_id, None)
        self.waiting.pop(stream_id, None)
        self.on_server_events(self.server.stream_closed(stream_id, now=self.now))
        if reader is not None:
            reader.feed_eof()

    # -- conveniences

    def start(self) -> HandshakeCompleted:
        self.conn.start(now=self.now)
        self.pump()
        done = [e for e in self.client_events if isinstance(e, HandshakeCompleted)]
        assert len(done) == 1, self.client_events
        return done[0]

    def held_request(self) -> tuple[Connection, RequestReceived]:
        (tagged,) = self.held
        assert isinstance(tagged.event, RequestReceived)
        return tagged.connection, tagged.event

    def events(self, cls: type[Any]) -> list[Any]:
        return [e for e in self.client_events if isinstance(e, cls)]


def dual_server(**cfg: Any) -> HttpServer:
    era = cfg.pop("era", "auto")
    return HttpServer(
        HttpServerConfig(**cfg),
        connection_config=ConnectionConfig(
            implementation={"name": "s", "version": "1"}, capabilities=SERVER_CAPS, era=era
        ),
    )


def validate_wire(pair: HttpPair, version: str) -> None:
    methods: dict[Any, str] = {}
    for message in pair.wire:
        if "method" in message and "id" in message:
            methods.setdefault(message["id"], message["method"])
    for message in pair.wire:
        method = methods.get(message.get("id")) if "result" in message else None
        validate_message(version, message, method)


@pytest.mark.parametrize("chunk", [None, 1])
def test_dual_client_and_dual_server_speak_modern(chunk: int | None) -> None:
    pair = HttpPair(dual_server(), chunk=chunk)
    done = pair.start()
    assert (done.era, done.protocol_version) == (Era.MODERN, MODERN)
    assert pair.http.era is Era.MODERN and pair.server.sessions() == ()
    rid = pair.conn.send_request(
        "tools/call", {"name": "echo", "arguments": {}}, progress=True, now=0.0
    )
    pair.pump()
    assert [e.progress for e in pair.events(ProgressReceived)] == [1, 2]
    (res,) = pair.events(ResultReceived)
    assert res.request_id == rid and res.result["content"][0]["text"] == "hi"
    assert pair.statuses == [200, 200]  # discover (JSON), tools/call (a stream, progress first)
    assert pair.server.statistics() == {"sessions": 0, "modern_requests": 0, "open_responses": 0}
    validate_wire(pair, MODERN)


def test_dual_client_falls_back_against_a_legacy_server() -> None:
    pair = HttpPair(dual_server(era="legacy"))
    done = pair.start()
    assert (done.era, done.protocol_version) == (Era.LEGACY, LEGACY)
    assert pair.statuses[0] == 400 and pair.http.era is Era.LEGACY
    assert pair.http.session_id in pair.server.sessions()
    handshakes = [
        e
        for e in pair.server_events
        if isinstance(e, ServerEvent) and isinstance(e.event, HandshakeCompleted)
    ]
    assert len(handshakes) == 1
    rid = pair.conn.send_request("tools/call", {"name": "echo"}, progress=True, now=0.0)
    pair.pump()
    assert [e.progress for e in pair.events(ProgressReceived)] == [1, 2]
    assert pair.events(ResultReceived)[0].request_id == rid
    # the GET stream carries what the server says on its own
    get = pair.http.open_stream()
    pair.send(get)
    pair.server.send_notification("notifications/tools/list_changed")
    pair.pump()
    assert any(m.get("method") == "notifications/tools/list_changed" for m in pair.wire)
    # DELETE ends the session
    delete = pair.http.terminate()
    assert delete is not None
    pair.send(delete)
    pair.pump()
    assert pair.server.sessions() == () and pair.statuses[-1] == 204
    validate_wire(pair, LEGACY)


def test_modern_only_server_and_client() -> None:
    pair = HttpPair(
        dual_server(era="modern"),
        ConnectionConfig(
            implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="modern"
        ),
    )
    assert pair.start().era is Era.MODERN
    pair.conn.send_request("tools/list", now=0.0)
    pair.pump()
    assert pair.events(ResultReceived)[0].result["tools"][0]["name"] == "echo"


def test_legacy_client_against_a_modern_only_server_fails_clearly() -> None:
    pair = HttpPair(
        dual_server(era="modern"),
        ConnectionConfig(implementation={"name": "c", "version": "1"}, era="legacy"),
    )
    pair.conn.start(now=0.0)
    pair.pump()
    (failure,) = pair.events(ErrorReceived)
    assert failure.method == "initialize" and MODERN in failure.error.message
    assert pair.statuses == [400]


def test_an_expired_session_is_started_anew_and_the_request_answered() -> None:
    server = dual_server(era="legacy", session_idle_timeout=10.0)
    pair = HttpPair(server)
    pair.start()
    (old,) = server.sessions()
    server.handle_timer(100.0)
    assert server.sessions() == ()
    rid = pair.conn.send_request("tools/list", now=0.0)
    pair.pump()
    (answer,) = pair.events(ResultReceived)
    assert answer.request_id == rid and answer.result["tools"][0]["name"] == "echo"
    assert len(pair.events(HandshakeCompleted)) == 2 and not pair.events(ErrorReceived)
    (new,) = server.sessions()
    assert new != old and pair.http.session_id == new
    inits = [s for s in pair.requests if s.methods == ("initialize",)]
    assert [s.session_id for s in inits] == [None, None]
    after = pair.requests[pair.requests.index(inits[1]) :]
    assert [(s.methods, s.session_id, s.resent) for s in after] == [
        (("initialize",), None, False),
        ((), new, False),  # notifications/initialized
        (("tools/list",), new, True),
    ]
    assert pair.statuses[-4:] == [404, 200, 202, 200]


class ForgetfulPair(HttpPair):
    """A server that forgets every session at once: whatever carries a session id gets
    404 (``requests_only``: only requests; notifications are taken)."""

    requests_only = False

    def send(self, sent: ClientRequest) -> None:
        if sent.with_session and (sent.request_ids or not self.requests_only):
            self.requests.append(sent)
            self.statuses.append(404)
            self.feed(self.http.response(sent, 404, JSON), NO_SESSION, True)
            return
        super().send(sent)


@pytest.mark.parametrize("requests_only", [False, True])
def test_a_server_that_forgets_every_session_gets_one_new_session(requests_only: bool) -> None:
    pair = ForgetfulPair(dual_server(era="legacy"))
    pair.requests_only = requests_only
    pair.conn.start(now=0.0)
    pair.pump()
    if requests_only:
        assert pair.ended is None
        rid = pair.conn.send_request("tools/list", now=0.0)
        pair.pump()
        (failure,) = pair.events(ErrorReceived)
        assert failure.request_id == rid
        assert failure.error.message.startswith("HTTP: the server forgot")
    assert pair.ended == "end"
    assert len(pair.events(HandshakeCompleted)) == 2  # the first session, and one more
    assert len(pair.server.sessions()) == 2  # (the server itself forgot neither)


def test_a_dropped_legacy_stream_resumes_without_losing_anything() -> None:
    pair = HttpPair(dual_server(era="legacy"))
    pair.start()
    pair.hold = True
    rid = pair.conn.send_request("tools/call", {"name": "echo"}, progress=True, now=0.0)
    pair.pump()
    conn, held = pair.held_request()
    conn.send_progress(held.request_id, 1)
    pair.pump()
    stream_id = pair.stream_of[rid]
    # the connection drops; the server goes on working
    reader = pair.readers.pop(stream_id)
    pair.server.stream_closed(stream_id, now=1)
    assert reader.feed_eof() == []
    conn.send_progress(held.request_id, 2)
    conn.send_result(held.request_id, {"content": []})
    pair.pump()
    assert pair.events(ResultReceived) == []
    again = reader.resume()
    assert again is not None and again.request.header("last-event-id") == f"{stream_id}:1"
    pair.send(again)
    pair.pump()
    assert [e.progress for e in pair.events(ProgressReceived)] == [1, 2]
    assert pair.events(ResultReceived)[0].request_id == rid


def test_modern_cancellation_closes_the_stream() -> None:
    pair = HttpPair(dual_server())
    pair.start()
    pair.hold = True
    rid = pair.conn.send_request("tools/call", {"name": "echo"}, now=0.0)
    pair.pump()
    conn, held = pair.held_request()
    pair.conn.cancel_request(rid, "user")
    pair.pump()
    cancelled = [
        e.event
        for e in pair.server_events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestCancelled)
    ]
    assert cancelled == [RequestCancelled(request_id=held.request_id, reason="stream closed")]
    conn.send_result(held.request_id, {"content": []})
    pair.pump()
    assert pair.events(ResultReceived) == [] and pair.events(ErrorReceived) == []
    assert not any(m.get("method") == "notifications/cancelled" for m in pair.wire)


def test_modern_subscription_over_http() -> None:
    pair = HttpPair(dual_server())
    pair.start()
    sub = pair.conn.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.pump()
    assert pair.server.send_notification("notifications/tools/list_changed") == 1
    pair.pump()
    got = pair.events(SubscriptionNotificationReceived)
    assert [(e.subscription_id, e.method) for e in got] == [
        (sub, "notifications/subscriptions/acknowledged"),
        (sub, "notifications/tools/list_changed"),
    ]
    pair.server.close()
    pair.pump()
    assert pair.events(ResultReceived)[0].request_id == sub


# ================================================================== corners


def test_an_initialize_error_teaches_nothing() -> None:
    client = HttpClient(URL)
    sent = client.post(rpc(1, "initialize", {}))
    read(client.response(sent, 200, JSON), error(1, -32602, "bad"))
    assert client.protocol_version is None and client.era is None
    sent = client.post(rpc(2, "initialize", {}))
    read(client.response(sent, 200, JSON), result(2, {"protocolVersion": 5}))
    assert client.protocol_version is None


def test_modern_errors_after_the_era_is_known() -> None:
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))
    sent = client.post(modern(1, "tools/list"))
    (message,) = read(client.response(sent, 400, JSON), error(1, -32020, "Header mismatch"))
    assert message["error"]["code"] == -32020 and client.era is Era.MODERN
    other = client.post(dumps({"jsonrpc": "2.0", "method": "notifications/vendor"}))
    assert other.request_ids == ()
    almost = dumps({"jsonrpc": "2.0", "method": "x", "params": {"t": "notifications/cancelled"}})
    assert client.stream_cancellation(almost) is None


def test_odd_tools_list_results() -> None:
    client = HttpClient(URL)
    values: list[dict[str, Any]] = [{"tools": "nope"}, {"tools": [{"inputSchema": {}}, 5]}]
    for rid, value in enumerate(values):
        sent = client.post(modern(rid, "tools/list"))
        (message,) = read(client.response(sent, 200, JSON), result(rid, value))
        assert message["result"] == value


def test_a_session_without_a_known_version_sends_no_version_header() -> None:
    client = HttpClient(URL)
    init = client.post(rpc(1, "initialize", {}))
    read(client.response(init, 200, (*JSON, (b"mcp-session-id", b"s"))), result(1, {}))
    assert client.session_id == "s" and client.protocol_version is None
    assert client.open_stream().request.header("mcp-protocol-version") is None
    delete = client.terminate()
    assert delete is not None and delete.request.header("mcp-protocol-version") is None


# ================================================================== rules both bindings share


def test_a_pinned_era_pins_the_http_config() -> None:
    assert pinned_http_config(None, "auto") is None
    given = HttpClientConfig(max_body_size=10)
    assert pinned_http_config(given, "auto") is given
    assert pinned_http_config(None, "legacy") == HttpClientConfig(era=Era.LEGACY)
    assert pinned_http_config(given, "modern") == HttpClientConfig(max_body_size=10, era=Era.MODERN)
    named = HttpClientConfig(era=Era.LEGACY)
    assert pinned_http_config(named, "modern") is named  # (the caller's word stands)


def test_which_answers_die_with_a_forgotten_session() -> None:
    client = legacy_client()
    first, second, third = (client.post(rpc(n, "ping")) for n in (2, 3, 4))
    pending = client.response(first, 200, SSE)
    refused = client.response(second, 404, ())
    assert refused.session_expired == "restart"
    assert pending.lost_with(refused)
    assert not refused.lost_with(refused)  # (its requests are sent again)
    again = client.response(third, 404, ())  # (a 404 of its own: sent again too)
    assert again.session_expired == "resend" and not again.lost_with(refused)
    other = HttpClient(URL)
    fresh = other.response(other.post(rpc(5, "ping")), 200, JSON)  # (no session)
    assert not fresh.lost_with(refused)
    assert "404" in FORGOTTEN_BEFORE_ANSWER and "404" in FORGOTTEN_TWICE


def test_split_broken_fails_a_listen_and_leaves_the_rest_to_reissue_in_order() -> None:
    # (Both bindings split a request written whole, its connection then lost, so.)
    sent = ClientRequest(
        request=HttpRequest(method="POST", target="/mcp"),
        request_ids=(1, 2, 3, 4),
        methods=("tools/call", "subscriptions/listen", "tools/call", "prompts/get"),
        modern=True,
    )
    assert split_broken(sent, {4, 2, 1}) == ((2,), (1, 4))  # (3: no longer waited for)
    assert split_broken(sent, ()) == ((), ())


@pytest.mark.parametrize(
    ("times", "said"), [(0, ""), (1, " (re-issued 1 time)"), (2, " (re-issued 2 times)")]
)
def test_reissue_refused_says_how_many_times_it_was_reissued(times: int, said: str) -> None:
    error = {"code": -32603, "message": f"HTTP: the stream ended{said}"}
    assert loads(reissue_refused(7, "the stream ended", times)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": error,
    }

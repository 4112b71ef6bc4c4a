"""The Streamable HTTP server rules of both eras, row by row, with HTTP-shaped values. No I/O."""

from __future__ import annotations

import itertools
import tracemalloc
from typing import Any

import pytest

from mcp_sansio import (
    ConnectionClosed,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    HandshakeCompleted,
    LocalProtocolError,
    RequestCancelled,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
    SSEDecoder,
    SSEEvent,
)
from mcp_sansio._http_server import _EVENT_COST, _STREAM_COST
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import (
    AwaitResponse,
    HeaderParam,
    HttpRequest,
    HttpResponse,
    HttpServer,
    HttpServerConfig,
    InMemoryEventStore,
    OpenStream,
    Reply,
    ResponseReady,
    ServerEvent,
    SessionClosed,
    SessionCreated,
    StreamData,
)
from tests.schema import validate_message

from .helpers import SERVER_CAPS

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
BASE = {
    "host": "localhost:8000",
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}
SSE_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)


# ================================================================== helpers


def make_server(
    *, era: str = "auto", versions: tuple[str, ...] | None = None, **cfg: Any
) -> HttpServer:
    store = cfg.pop("event_store", None)
    factory = cfg.pop("session_id_factory", None)
    conn_kw: dict[str, Any] = {"capabilities": SERVER_CAPS, "era": era}
    if versions is not None:
        conn_kw["supported_versions"] = versions
    return HttpServer(
        HttpServerConfig(**cfg),
        connection_config=ConnectionConfig(**conn_kw),
        event_store=store,
        session_id_factory=factory,
    )


def req(
    method: str = "POST", body: Any = None, target: str = "/mcp", **headers: str | None
) -> HttpRequest:
    merged: dict[str, str | None] = {**BASE, **{k.replace("_", "-"): v for k, v in headers.items()}}
    raw = body if isinstance(body, bytes) else (b"" if body is None else dumps(body))
    return HttpRequest(
        method=method,
        target=target,
        headers=[(k, v) for k, v in merged.items() if v is not None],
        body=raw,
    )


def initialize(rid: Any = 1, version: str = LEGACY) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"sampling": {}, "roots": {}},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }


def rpc(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        out["params"] = params
    return out


def note(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        out["params"] = params
    return out


def open_session(srv: HttpServer, version: str = LEGACY, now: float = 0.0) -> str:
    reply = srv.handle_request(req(body=initialize(version=version)), now=now)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == 200, reply.decision.body
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    done = srv.handle_request(
        req(
            body=note("notifications/initialized"), mcp_session_id=sid, mcp_protocol_version=version
        ),
        now=now,
    )
    assert isinstance(done.decision, HttpResponse) and done.decision.status == 202
    return sid


def in_session(sid: str, version: str = LEGACY) -> dict[str, str]:
    return {"mcp_session_id": sid, "mcp_protocol_version": version}


def modern(
    rid: Any, method: str, params: dict[str, Any] | None = None, **meta: Any
) -> dict[str, Any]:
    return rpc(rid, method, {**(params or {}), "_meta": {PV: MODERN, CC: {}, **meta}})


def modern_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    out = {"mcp_protocol_version": MODERN, "mcp_method": method}
    if name is not None:
        out["mcp_name"] = name
    return {**out, **extra}


def only(events: tuple[Any, ...] | list[Any], cls: type[Any]) -> Any:
    found = [e.event if isinstance(e, ServerEvent) else e for e in events]
    found = [e for e in found if isinstance(e, cls)]
    assert len(found) == 1, events
    return found[0]


def received(reply: Reply) -> ServerEvent:
    tagged = [
        e
        for e in reply.events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestReceived)
    ]
    assert len(tagged) == 1, reply.events
    return tagged[0]


def sse_messages(data: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    decoder.feed(data)
    out: list[SSEEvent] = []
    while (event := decoder.next_event()) is not None:
        assert isinstance(event, SSEEvent)
        out.append(event)
    return out


def payloads(data: bytes) -> list[Any]:
    return [loads(e.data) for e in sse_messages(data) if e.data]


def error_of(response: HttpResponse) -> dict[str, Any]:
    body = loads(response.body)
    assert "error" in body, body
    error: dict[str, Any] = body["error"]
    return error


def outputs(srv: HttpServer) -> dict[int, Any]:
    out = srv.data_to_send()
    by_id = {o.stream_id: o for o in out}
    assert len(by_id) == len(out), "one item per response"
    return by_id


# ================================================================== rules of both eras

ERAS = ["legacy", "modern"]


def first_post(era: str, srv: HttpServer) -> tuple[Any, dict[str, str]]:
    if era == "legacy":
        return initialize(), {}
    return modern(1, "server/discover"), modern_headers("server/discover")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("headers", "target", "status"),
    [
        ({}, "/other", 404),
        ({}, "/mcp/", 404),
        ({"origin": "http://evil.example"}, "/mcp", 403),
        ({"origin": "null"}, "/mcp", 403),
        ({"host": "evil.example:8000"}, "/mcp", 421),
        ({"host": None}, "/mcp", 421),
        ({"content_type": "text/plain"}, "/mcp", 415),
        ({"content_type": None}, "/mcp", 415),
        ({"accept": None}, "/mcp", 406),
        ({"accept": "application/json"}, "/mcp", 406),
        ({"accept": "text/event-stream"}, "/mcp", 406),
        ({"accept": "application/json, text/event-stream;q=0"}, "/mcp", 406),
        ({"content_length": "4194305"}, "/mcp", 413),
    ],
)
def test_post_refusals_of_both_eras(
    era: str, headers: dict[str, Any], target: str, status: int
) -> None:
    srv = make_server()
    body, extra = first_post(era, srv)
    request = req(body=body, target=target, **{**extra, **headers})
    head_only = srv.check_head(request)
    reply = srv.handle_request(request, now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == status
    assert head_only == reply.decision
    assert not srv.sessions()
    if status not in (404,):
        error = error_of(reply.decision)
        assert (
            loads(reply.decision.body)["id"] is None
        )  # "a JSON-RPC error response that has no id"
        validate_message(LEGACY, loads(reply.decision.body))
        assert error["code"] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://localhost:3000"},
        {"origin": "http://127.0.0.1"},
        {"accept": "*/*"},
        {"accept": "application/*, text/*"},
        {"content_type": "application/json; charset=utf-8"},
        {"host": "127.0.0.1:9"},
    ],
)
def test_allowed_variants_pass(era: str, headers: dict[str, str]) -> None:
    srv = make_server()
    body, extra = first_post(era, srv)
    reply = srv.handle_request(req(body=body, **{**extra, **headers}), now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == 200


@pytest.mark.parametrize("era", ERAS)
def test_body_over_the_bound_is_413(era: str) -> None:
    srv = make_server(max_body_size=64)
    body, extra = first_post(era, srv)
    reply = srv.handle_request(req(body=dumps(body) + b" " * 64, **extra), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 413


@pytest.mark.parametrize("era", ERAS)
def test_malformed_json_is_400_parse_error(era: str) -> None:
    srv = make_server()
    _, extra = first_post(era, srv)
    reply = srv.handle_request(req(body=b"{nope", **extra), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.PARSE_ERROR


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("target", "host", "status"),
    [
        ("http://localhost:8000/mcp", "localhost:8000", 200),
        ("http://localhost:8000/mcp?x=1", None, 200),  # (HTTP/1.0 may send no Host)
        ("HTTP://LOCALHOST/mcp", "localhost", 200),
        ("http://localhost:8000/other", "localhost:8000", 404),
        # RFC 9112 3.2.2: the target's authority, not Host, is what the request is for.
        ("http://localhost:8000/mcp", "evil.example", 200),
        ("http://evil.example/mcp", "localhost:8000", 421),
        ("http://evil.example:8000/mcp", "127.0.0.1:8000", 421),
    ],
)
def test_absolute_form_targets_are_served_and_checked_by_their_authority(
    era: str, target: str, host: str | None, status: int
) -> None:
    srv = make_server()
    body, extra = first_post(era, srv)
    headers: dict[str, Any] = {**extra, "host": host}
    request = req(body=body, target=target, **headers)
    reply = srv.handle_request(request, now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == status
    assert srv.check_head(request) == (None if status == 200 else reply.decision)
    if status == 421:
        assert "evil.example" in error_of(reply.decision)["message"]


def test_checks_can_be_relaxed() -> None:
    srv = make_server(allowed_hosts=None, allowed_origins=("*",))
    reply = srv.handle_request(
        req(body=initialize(), host="mcp.example.com", origin="https://anything.example"), now=0
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200


def test_endpoint_must_be_a_path() -> None:
    with pytest.raises(ValueError, match="absolute path"):
        HttpServerConfig(endpoint="mcp")
    with pytest.raises(ValueError, match="no version"):
        HttpServer(connection_config=ConnectionConfig(era="legacy", supported_versions=(MODERN,)))


@pytest.mark.parametrize(
    ("era", "method", "allow"),
    [
        ("modern", "GET", b"POST"),
        ("modern", "DELETE", b"POST"),
        ("auto", "PUT", b"POST, GET, DELETE"),
        ("auto", "OPTIONS", b"POST, GET, DELETE"),
        ("legacy", "PATCH", b"POST, GET, DELETE"),
    ],
)
def test_methods_not_offered_are_405(era: str, method: str, allow: bytes) -> None:
    srv = make_server(era=era)
    reply = srv.handle_request(req(method, accept="text/event-stream"), now=0)
    assert reply.decision == HttpResponse(status=405, headers=((b"allow", allow),))


# ================================================================== legacy: sessions


def test_initialize_mints_a_session_id() -> None:
    srv = make_server()
    reply = srv.handle_request(req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse)
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None and len(sid) >= 22  # >= 128 bits of URL-safe Base64
    assert all(0x21 <= ord(c) <= 0x7E for c in sid)
    created = only(reply.events, SessionCreated)
    assert created.session_id == sid and srv.session_connection(sid) is created.connection
    body = loads(reply.decision.body)
    validate_message(LEGACY, body, "initialize")
    assert body["result"]["protocolVersion"] == LEGACY
    other = srv.handle_request(req(body=initialize()), now=0).decision
    assert isinstance(other, HttpResponse) and other.header("mcp-session-id") != sid


def test_session_id_factory_is_injected_and_checked() -> None:
    ids = iter(["fixed-1", "fixed-1", "fixed-2"])
    srv = make_server(session_id_factory=lambda: next(ids))
    assert open_session(srv) == "fixed-1"
    assert open_session(srv) == "fixed-2"  # a collision is retried
    same = make_server(session_id_factory=lambda: "dup")
    open_session(same)
    with pytest.raises(LocalProtocolError, match="already in use"):
        same.handle_request(req(body=initialize()), now=0)
    for bad in ["", "has space", "tab\t", "é"]:
        srv = make_server(session_id_factory=lambda bad=bad: bad)
        with pytest.raises(LocalProtocolError, match="visible ASCII"):
            srv.handle_request(req(body=initialize()), now=0)
        assert not srv.sessions()


def test_failed_initialize_makes_no_session() -> None:
    srv = make_server()
    bad = rpc(1, "initialize", {"protocolVersion": LEGACY})
    reply = srv.handle_request(req(body=bad), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    assert reply.decision.header("mcp-session-id") is None
    assert error_of(reply.decision)["code"] == ErrorCode.INVALID_PARAMS
    assert not srv.sessions()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 400),
        ({"mcp_session_id": "unknown"}, 404),
        ({"mcp_session_id": "SID", "mcp_protocol_version": "1999-01-01"}, 400),
        ({"mcp_session_id": "SID", "mcp_protocol_version": "2025-06-18"}, 200),
        ({"mcp_session_id": "SID"}, 200),
        ({"mcp_session_id": "SID", "mcp_protocol_version": LEGACY}, 200),
    ],
)
def test_legacy_request_header_rules(headers: dict[str, str], status: int) -> None:
    srv = make_server()
    sid = open_session(srv)
    headers = {k: (sid if v == "SID" else v) for k, v in headers.items()}
    reply = srv.handle_request(req(body=rpc(5, "ping"), **headers), now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == status
    if status == 200:
        assert loads(reply.decision.body) == {"jsonrpc": "2.0", "id": 5, "result": {}}
    else:
        assert "error" in loads(reply.decision.body)


def test_unknown_header_version_on_a_legacy_only_server_is_plain_400() -> None:
    srv = make_server(era="legacy")
    sid = open_session(srv)
    reply = srv.handle_request(
        req(body=rpc(2, "ping"), mcp_session_id=sid, mcp_protocol_version=MODERN), now=0
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.INVALID_REQUEST  # not a modern error


def test_initialize_with_an_unsupported_header_version_is_400() -> None:
    srv = make_server(era="legacy")
    reply = srv.handle_request(req(body=initialize(), mcp_protocol_version="2099-01-01"), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert not srv.sessions()


def test_second_initialize_in_a_session_is_refused() -> None:
    srv = make_server()
    sid = open_session(srv)
    reply = srv.handle_request(req(body=initialize(7), **in_session(sid)), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (note("notifications/roots/list_changed"), 202),
        ({"jsonrpc": "2.0", "id": 99, "result": {}}, 202),  # a late/unknown response: accepted
        (note("notifications/initialized"), 400),  # out of order: cannot be accepted
        ({"jsonrpc": "2.0", "method": 5}, 400),
    ],
)
def test_notifications_and_responses(body: Any, status: int) -> None:
    srv = make_server()
    sid = open_session(srv)
    reply = srv.handle_request(req(body=body, **in_session(sid)), now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == status
    assert (reply.decision.body == b"") == (status == 202)


def test_delete_ends_the_session() -> None:
    srv = make_server()
    sid = open_session(srv)
    reply = srv.handle_request(req("DELETE", **in_session(sid)), now=1)
    assert reply.decision == HttpResponse(status=204)
    assert only(reply.events, SessionClosed) == SessionClosed(session_id=sid, reason="deleted")
    assert only(reply.events, ConnectionClosed) == ConnectionClosed(unanswered=(), abandoned=())
    after = srv.handle_request(req(body=rpc(2, "ping"), **in_session(sid)), now=2)
    assert isinstance(after.decision, HttpResponse) and after.decision.status == 404
    again = srv.handle_request(req("DELETE", **in_session(sid)), now=2)
    assert isinstance(again.decision, HttpResponse) and again.decision.status == 404
    missing = srv.handle_request(req("DELETE"), now=2)
    assert isinstance(missing.decision, HttpResponse) and missing.decision.status == 400


def test_delete_can_be_disabled() -> None:
    srv = make_server(allow_delete=False)
    sid = open_session(srv)
    reply = srv.handle_request(req("DELETE", **in_session(sid)), now=1)
    assert reply.decision == HttpResponse(status=405, headers=((b"allow", b"POST, GET"),))
    assert srv.sessions() == (sid,)


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 400),
        ({"mcp_session_id": "nope"}, 404),
        ({"mcp_session_id": "SID", "accept": "application/json"}, 406),
        ({"mcp_session_id": "SID", "mcp_protocol_version": MODERN}, 405),
        ({"mcp_session_id": "SID", "mcp_protocol_version": "bogus"}, 400),
        ({"mcp_session_id": "SID", "last_event_id": "garbage"}, 400),
        ({"mcp_session_id": "SID"}, 200),
    ],
)
def test_get_rules(headers: dict[str, str], status: int, request: pytest.FixtureRequest) -> None:
    srv = make_server()
    sid = open_session(srv)
    headers = {k: (sid if v == "SID" else v) for k, v in headers.items()}
    reply = srv.handle_request(req("GET", **{"accept": "text/event-stream", **headers}), now=0)
    if status == 200:
        assert isinstance(reply.decision, OpenStream)
        assert reply.decision.headers == SSE_HEADERS
    else:
        assert isinstance(reply.decision, HttpResponse) and reply.decision.status == status


def test_get_stream_can_be_disabled() -> None:
    srv = make_server(standalone_stream=False)
    sid = open_session(srv)
    reply = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 405
    srv.send_notification("notifications/tools/list_changed")
    assert srv.data_to_send() == []  # nowhere to go: dropped


# ================================================================== legacy: full flow


def test_legacy_flow_sse_json_get_delete() -> None:
    srv = make_server(response_mode=lambda method, era: "json" if method == "tools/list" else "sse")
    sid = open_session(srv)
    conn = srv.session_connection(sid)
    assert conn is not None

    # a request answered as JSON, later
    reply = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=1)
    assert isinstance(reply.decision, AwaitResponse)
    tagged = received(reply)
    assert (tagged.session_id, tagged.stream_id, tagged.connection) == (
        sid,
        reply.decision.stream_id,
        conn,
    )
    conn.send_result(2, {"tools": []})
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.stream_id == reply.decision.stream_id
    assert ready.response.status == 200
    validate_message(LEGACY, loads(ready.response.body), "tools/list")
    assert srv.stream_closed(ready.stream_id, now=1) == []

    # the GET stream, opened before the server has something to say
    get = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=2)
    assert isinstance(get.decision, OpenStream)
    get_id = get.decision.stream_id
    (priming,) = sse_messages(get.decision.data)
    assert priming.data == "" and priming.id is not None and priming.retry == 1000

    # a request answered on an SSE stream, with progress and a server request in between
    call = rpc(3, "tools/call", {"name": "t", "_meta": {"progressToken": "tok"}})
    reply = srv.handle_request(req(body=call, **in_session(sid)), now=3)
    assert isinstance(reply.decision, OpenStream)
    post_id = reply.decision.stream_id
    (priming,) = sse_messages(reply.decision.data)
    assert priming.id == f"{post_id}:0" and priming.data == ""
    assert conn.send_progress(3, 0.5, message="half")
    sampling = conn.send_request(
        "sampling/createMessage", {"messages": [], "maxTokens": 1}, related_request_id=3, now=0.0
    )
    assert srv.send_notification("notifications/tools/list_changed") == 1
    out = outputs(srv)
    assert set(out) == {post_id, get_id}
    on_post = payloads(out[post_id].data)
    assert [m.get("method") for m in on_post] == [
        "notifications/progress",
        "sampling/createMessage",
    ]
    for message in on_post:
        validate_message(LEGACY, message)
    assert [m["method"] for m in payloads(out[get_id].data)] == ["notifications/tools/list_changed"]
    assert not out[post_id].end and not out[get_id].end
    ids = [e.id for e in sse_messages(out[post_id].data)]
    assert ids == [f"{post_id}:1", f"{post_id}:2"]

    # the client answers the server's request with a POST: 202
    answer = {
        "jsonrpc": "2.0",
        "id": sampling,
        "result": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"},
    }
    back = srv.handle_request(req(body=answer, **in_session(sid)), now=4)
    assert back.decision == HttpResponse(status=202)
    assert only(back.events, ResultReceived).request_id == sampling

    conn.send_result(3, {"content": []})
    out = outputs(srv)
    assert isinstance(out[post_id], StreamData) and out[post_id].end
    (result,) = payloads(out[post_id].data)
    validate_message(LEGACY, result, "tools/call")
    assert srv.stream_closed(post_id, now=5) == []

    # DELETE ends the GET stream too
    gone = srv.handle_request(req("DELETE", **in_session(sid)), now=6)
    assert gone.decision == HttpResponse(status=204)
    out = outputs(srv)
    assert out[get_id] == StreamData(stream_id=get_id, data=b"", end=True)
    assert srv.statistics() == {"sessions": 0, "modern_requests": 0, "open_responses": 0}


def test_json_mode_sends_related_messages_on_the_get_stream() -> None:
    srv = make_server(response_mode="json")
    sid = open_session(srv)
    conn = srv.session_connection(sid)
    assert conn is not None
    get = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    assert isinstance(get.decision, OpenStream)
    reply = srv.handle_request(
        req(
            body=rpc(2, "tools/call", {"name": "t", "_meta": {"progressToken": 1}}),
            **in_session(sid),
        ),
        now=0,
    )
    assert isinstance(reply.decision, AwaitResponse)
    conn.send_progress(2, 1)
    conn.send_log("info", "hello", request_id=2)
    out = outputs(srv)
    assert list(out) == [get.decision.stream_id]
    assert [m["method"] for m in payloads(out[get.decision.stream_id].data)] == [
        "notifications/progress",
        "notifications/message",
    ]
    conn.send_result(2, {"content": []})
    out = outputs(
        srv,
    )
    assert isinstance(out[reply.decision.stream_id], ResponseReady)


def test_early_answers_and_pending_requests_share_the_stream() -> None:
    srv = make_server(versions=("2025-03-26",))
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    batch = [
        rpc(2, "ping"),
        rpc(3, "tools/list"),
        note("notifications/roots/list_changed"),
        rpc(4, "sampling/createMessage"),  # a server-to-client method: refused at once
    ]
    reply = srv.handle_request(req(body=batch, **in_session(sid, "2025-03-26")), now=0)
    assert isinstance(reply.decision, OpenStream)
    early = payloads(reply.decision.data)
    assert [m["id"] for m in early] == [2, 4]
    assert early[1]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    conn.send_result(3, {"tools": []})
    out = outputs(srv)[reply.decision.stream_id]
    assert out.end and [m["id"] for m in payloads(out.data)] == [3]


@pytest.mark.parametrize(
    ("version", "batch", "status"),
    [
        ("2025-03-26", [rpc(2, "ping"), rpc(3, "ping")], 200),
        ("2025-03-26", [note("notifications/roots/list_changed")], 202),
        ("2025-03-26", [], 400),
        ("2025-03-26", [initialize(9)], 400),
        ("2025-06-18", [rpc(2, "ping")], 400),
        (LEGACY, [rpc(2, "ping")], 400),
    ],
)
def test_batches_only_in_2025_03_26(version: str, batch: list[Any], status: int) -> None:
    srv = make_server()
    sid = open_session(srv, version)
    reply = srv.handle_request(req(body=batch, **in_session(sid, version)), now=0)
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == status
    if status == 200:
        body = loads(reply.decision.body)
        assert body == [
            {"jsonrpc": "2.0", "id": 2, "result": {}},
            {"jsonrpc": "2.0", "id": 3, "result": {}},
        ]
        validate_message("2025-03-26", body)
    if status == 400:
        assert error_of(reply.decision)["code"] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("version", "body", "batch"),
    [
        ("2025-03-26", b" \r\n\t[" + dumps(rpc(2, "tools/list")) + b"]", True),
        ("2025-03-26", b"\n[" + dumps(note("notifications/roots/list_changed")) + b"]", True),
        ("2025-03-26", b"  []", True),  # (refused: still a batch)
        (LEGACY, b" [" + dumps(rpc(2, "ping")) + b"]", True),  # (refused: not allowed)
        ("2025-03-26", b" " + dumps(rpc(2, "tools/list")), False),
        # An object whose values begin with "[": one message, not a batch.
        ("2025-03-26", dumps(rpc("[2]", "tools/call", {"name": "[x", "arguments": {}})), False),
        ("2025-03-26", dumps(note("notifications/roots/list_changed", {"x": "[1]"})), False),
    ],
)
def test_a_reply_says_whether_the_body_was_a_batch(version: str, body: bytes, batch: bool) -> None:
    # A binding answering a request itself (a 503 for want of a handler) may replace
    # the decision only for a body that is that one request: it reads that here, from
    # the parse, not from the body's first bytes.
    srv = make_server()
    sid = open_session(srv, version)
    reply = srv.handle_request(req(body=body, **in_session(sid, version)), now=0)
    assert reply.batch is batch


def test_a_modern_array_is_refused_and_said_a_batch() -> None:
    srv = make_server()
    headers = modern_headers("tools/list")
    one = srv.handle_request(req(body=b" " + dumps(modern(1, "tools/list")), **headers), now=0)
    assert not one.batch
    refused = srv.handle_request(req(body=[modern(1, "tools/list")], **headers), now=0)
    assert isinstance(refused.decision, HttpResponse) and refused.decision.status == 400
    assert refused.batch


@pytest.mark.parametrize(("version", "size"), [(LEGACY, 10), ("2025-03-26", 1)])
def test_answers_in_a_refused_batch_end_their_requests(version: str, size: int) -> None:
    # Refused whole (400), as before; but each request of ours the batch answers ends
    # with -32603 at once, as over stdio, rather than waiting for an answer that came.
    srv = HttpServer(
        connection_config=ConnectionConfig(capabilities=SERVER_CAPS, max_batch_size=size)
    )
    sid = open_session(srv, version)
    conn = srv.session_connection(sid)
    assert conn is not None
    asked, waiting = conn.send_request("ping", now=0), conn.send_request("ping", now=0)
    outputs(srv)
    batch = [{"jsonrpc": "2.0", "id": asked, "result": {}}, rpc(2, "ping")]
    reply = srv.handle_request(req(body=batch, **in_session(sid, version)), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.INVALID_REQUEST
    events = [e.event for e in reply.events if isinstance(e, ServerEvent)]
    (ended,) = [e for e in events if isinstance(e, ErrorReceived)]
    assert (ended.request_id, ended.error.code) == (asked, ErrorCode.INTERNAL_ERROR)
    assert ended.error.message.startswith("Answered in a batch")
    assert conn.pending_requests() == (waiting,)
    assert outputs(srv) == {}  # (the core's own -32600 is the 400's)


def test_batch_limit() -> None:
    srv = HttpServer(
        connection_config=ConnectionConfig(
            capabilities=SERVER_CAPS, supported_versions=("2025-03-26",), max_batch_size=2
        )
    )
    sid = open_session(srv, "2025-03-26")
    reply = srv.handle_request(
        req(body=[rpc(i, "ping") for i in range(3)], **in_session(sid, "2025-03-26")), now=0
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400


def test_json_mode_batch_answer_collects_every_response() -> None:
    srv = make_server(versions=("2025-03-26",), response_mode="json")
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    reply = srv.handle_request(
        req(body=[rpc(2, "tools/list"), rpc(3, "ping")], **in_session(sid, "2025-03-26")), now=0
    )
    assert isinstance(reply.decision, AwaitResponse)
    conn.send_result(2, {"tools": []})
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady)
    assert [m["id"] for m in loads(ready.response.body)] == [3, 2]


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_legacy_cancellation_by_notification(mode: Any) -> None:
    srv = make_server(response_mode=mode)
    sid = open_session(srv)
    conn = srv.session_connection(sid)
    assert conn is not None
    reply = srv.handle_request(
        req(body=rpc(2, "tools/call", {"name": "t"}), **in_session(sid)), now=0
    )
    assert isinstance(reply.decision, AwaitResponse | OpenStream)
    stream_id = reply.decision.stream_id
    cancel = srv.handle_request(
        req(
            body=note("notifications/cancelled", {"requestId": 2, "reason": "user"}),
            **in_session(sid),
        ),
        now=1,
    )
    assert cancel.decision == HttpResponse(status=202)
    assert only(cancel.events, RequestCancelled) == RequestCancelled(request_id=2, reason="user")
    conn.send_result(2, {"content": []})  # dropped by the core
    (out,) = srv.data_to_send()
    if mode == "json":
        # a POST of requests is answered as JSON or as an event stream (transports.mdx):
        # with no answer to give, an empty stream
        assert out == ResponseReady(
            stream_id=stream_id, response=HttpResponse(status=200, headers=SSE_HEADERS)
        )
    else:
        assert out == StreamData(stream_id=stream_id, data=b"", end=True)


def test_a_duplicate_request_id_is_answered_on_its_own_post() -> None:
    srv = make_server()
    sid = open_session(srv)
    first = srv.handle_request(
        req(body=rpc(2, "tools/call", {"name": "t"}), **in_session(sid)), now=0
    )
    assert isinstance(first.decision, OpenStream)
    dup = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=0)
    assert isinstance(dup.decision, HttpResponse) and dup.decision.status == 400
    assert "Duplicate" in error_of(dup.decision)["message"]
    assert srv.data_to_send() == []  # the first stream saw nothing


# ================================================================== legacy: resumability


def start_call(srv: HttpServer, sid: str, rid: int = 2) -> tuple[Any, int]:
    reply = srv.handle_request(
        req(
            body=rpc(rid, "tools/call", {"name": "t", "_meta": {"progressToken": rid}}),
            **in_session(sid),
        ),
        now=0,
    )
    assert isinstance(reply.decision, OpenStream)
    conn = srv.session_connection(sid)
    assert conn is not None
    return conn, reply.decision.stream_id


def resume(srv: HttpServer, sid: str, last: str, now: float = 1.0) -> Any:
    return srv.handle_request(
        req("GET", accept="text/event-stream", last_event_id=last, **in_session(sid)), now=now
    ).decision


def test_resume_after_a_disconnect_replays_and_goes_on_live() -> None:
    srv = make_server()
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    conn.send_progress(2, 1)
    first = outputs(srv)[stream_id]
    (seen,) = sse_messages(first.data)
    assert srv.stream_closed(stream_id, now=1) == []  # a disconnect is not a cancellation
    conn.send_progress(2, 2)
    conn.send_progress(2, 3)
    assert srv.data_to_send() == []  # nobody attached: kept in the store
    assert seen.id is not None
    again = resume(srv, sid, seen.id)
    assert isinstance(again, OpenStream) and not again.end
    *replayed, priming = sse_messages(again.data)
    assert [loads(e.data)["params"]["progress"] for e in replayed] == [2, 3]
    assert [e.id for e in replayed] == [f"{stream_id}:2", f"{stream_id}:3"]
    # then a priming event under a fresh id (event ids are unique in the session): the
    # stream's position, and a suffix counted per session
    assert (priming.data, priming.id, priming.retry) == ("", f"{stream_id}:3.1", 1000)
    conn.send_result(2, {"content": []})
    out = outputs(srv)[again.stream_id]
    assert out.end and payloads(out.data)[0]["id"] == 2
    assert [e.id for e in sse_messages(out.data)] == [f"{stream_id}:4"]
    # after the end, the stream can still be replayed from any id it gave, priming ones too
    for cursor, ids in ((f"{stream_id}:0", (1, 2, 3, 4)), (f"{stream_id}:3.1", (4,))):
        replay = resume(srv, sid, cursor, now=2)
        assert isinstance(replay, OpenStream) and replay.end
        assert [e.id for e in sse_messages(replay.data)] == [f"{stream_id}:{i}" for i in ids]
        assert payloads(replay.data)[-1]["id"] == 2  # (and no new priming: it ends)
    nothing_new = resume(srv, sid, f"{stream_id}:4", now=2)
    assert isinstance(nothing_new, OpenStream) and nothing_new.end
    assert nothing_new.data == b""


def test_event_ids_are_unique_across_the_sessions_streams() -> None:
    # transports.mdx (2025-03-26 to 2025-11-25), resumability: an event id "MUST be
    # globally unique across all streams within that session". Streams opened again
    # (a second GET, a resumption) once primed under an id already sent.
    srv = make_server()
    sid = open_session(srv)
    seen: list[str | None] = []

    def get(**headers: str) -> OpenStream:
        reply = srv.handle_request(
            req("GET", accept="text/event-stream", **headers, **in_session(sid)), now=1
        )
        assert isinstance(reply.decision, OpenStream)
        seen.extend(e.id for e in sse_messages(reply.decision.data))
        return reply.decision

    def flush() -> None:
        for out in outputs(srv).values():
            seen.extend(e.id for e in sse_messages(out.data))

    first = get()
    srv.send_notification("notifications/tools/list_changed")
    flush()
    srv.stream_closed(first.stream_id, now=1)
    get()  # a new GET, nothing queued: only its priming event
    conn, stream_id = start_call(srv, sid)
    seen.append(f"{stream_id}:0")  # (its priming)
    conn.send_progress(2, 1)
    flush()
    srv.stream_closed(stream_id, now=1)
    resumed = resume(srv, sid, f"{stream_id}:1")
    seen.extend(e.id for e in sse_messages(resumed.data))
    conn.send_result(2, {"content": []})
    flush()
    assert None not in seen and len(seen) == 7, seen
    assert len(set(seen)) == len(seen), seen
    # and every priming id is a cursor that resumes where it stands
    after_priming = resume(srv, sid, seen[-2] or "")  # the resumption's priming
    assert [p["id"] for p in payloads(after_priming.data)] == [2]


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_the_servers_own_cancellation_goes_where_its_request_went(how: str) -> None:
    # A request the server makes for the client's request 3 goes out on 3's stream, and
    # so does its cancellation; it used to be routed by its own id (2, here: the
    # stream of the client's unrelated request 2).
    srv = make_server(response_mode="sse")
    sid = open_session(srv)
    _conn, stream_a = start_call(srv, sid, rid=2)
    conn, stream_b = start_call(srv, sid, rid=3)
    srv.data_to_send()
    first = conn.send_request("ping", now=0, related_request_id=3, timeout=5)
    ours = conn.send_request("ping", now=0, related_request_id=3, timeout=5)
    assert ours == 2 and first == 1  # our ids: 2 is also the id of the client's request A
    assert [m["id"] for m in payloads(outputs(srv)[stream_b].data)] == [1, 2]
    if how == "timeout":
        srv.handle_timer(10.0)
    else:
        conn.cancel_request(ours)
        conn.cancel_request(first)
    out = outputs(srv)
    assert list(out) == [stream_b], (stream_a, stream_b, list(out))
    cancelled = payloads(out[stream_b].data)
    assert {m["method"] for m in cancelled} == {"notifications/cancelled"}
    assert sorted(m["params"]["requestId"] for m in cancelled) == [1, 2]


@pytest.mark.parametrize(
    ("version", "primed"),
    [("2024-11-05", False), ("2025-03-26", False), ("2025-06-18", False), (LEGACY, True)],
)
def test_only_sessions_from_2025_11_25_get_priming_events(version: str, primed: bool) -> None:
    # The priming event (an id and an empty data field) came in 2025-11-25: a client of an
    # earlier revision reads every event's data as a message, and an empty one fails to
    # parse (the official SDKs stopped sending it to them too).
    srv = make_server()
    sid = open_session(srv, version)
    reply = srv.handle_request(
        req(body=rpc(2, "tools/call", {"name": "t"}), **in_session(sid, version)), now=0
    )
    post = reply.decision
    assert isinstance(post, OpenStream)
    get = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(sid, version)), now=0
    )
    assert isinstance(get.decision, OpenStream)
    srv.stream_closed(post.stream_id, now=1)
    again = srv.handle_request(
        req(
            "GET",
            accept="text/event-stream",
            last_event_id=f"{post.stream_id}:0",
            **in_session(sid, version),
        ),
        now=1,
    ).decision
    assert isinstance(again, OpenStream)
    for data in (post.data, get.decision.data, again.data):
        events = sse_messages(data)
        assert [e.data for e in events] == ([""] if primed else []), data
        if primed:
            assert events[0].id is not None and events[0].retry is not None


def test_priming_events_take_no_room_in_the_event_store() -> None:
    # Resumptions whose answers are lost on the way must not push real events out of a
    # bounded store (a priming event is an id, not a message).
    srv = make_server(event_store=InMemoryEventStore(max_events_per_stream=3))
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    srv.stream_closed(stream_id, now=1)  # the client got only the priming id ...:0
    conn.send_progress(2, 1)
    conn.send_progress(2, 2)
    outputs(srv)
    for _ in range(4):
        again = resume(srv, sid, f"{stream_id}:0")
        assert isinstance(again, OpenStream)
        assert [p["params"]["progress"] for p in payloads(again.data)] == [1, 2]
        srv.stream_closed(again.stream_id, now=1)


def test_a_newer_resume_replaces_the_stale_response() -> None:
    srv = make_server()
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    again = resume(srv, sid, f"{stream_id}:0")
    assert isinstance(again, OpenStream)
    out = outputs(srv)
    assert out[stream_id] == StreamData(stream_id=stream_id, data=b"", end=True)
    conn.send_progress(2, 1)
    assert list(outputs(srv)) == [again.stream_id]
    assert srv.stream_closed(stream_id, now=2) == []  # the stale one closing changes nothing
    conn.send_progress(2, 2)
    assert list(outputs(srv)) == [again.stream_id]


@pytest.mark.parametrize(
    ("store", "sent", "cursor", "status"),
    [
        (InMemoryEventStore(max_events_per_stream=2), 5, 0, 410),  # per-stream bound crossed
        (InMemoryEventStore(max_events_per_stream=2), 5, 3, 200),  # the tail is still held
        (InMemoryEventStore(max_bytes=300), 5, 0, 410),  # total bound crossed
        (InMemoryEventStore(max_bytes=0), 3, 3, 200),  # nothing missed: fine without events
        (InMemoryEventStore(max_bytes=0), 3, 1, 410),
        (InMemoryEventStore(max_events_per_stream=0), 3, 3, 200),
        (InMemoryEventStore(max_events_per_stream=0), 3, 2, 410),
        (InMemoryEventStore(), 3, 9, 400),  # a cursor we never sent
    ],
)
def test_resume_never_skips_events_silently(
    store: InMemoryEventStore, sent: int, cursor: int, status: int
) -> None:
    srv = make_server(event_store=store)
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    srv.stream_closed(stream_id, now=0)
    for i in range(sent):
        conn.send_progress(2, i + 1, message="x" * 50)
    srv.data_to_send()
    decision = resume(srv, sid, f"{stream_id}:{cursor}")
    if status == 200:
        assert isinstance(decision, OpenStream)
        assert len(payloads(decision.data)) == sent - cursor
    else:
        assert isinstance(decision, HttpResponse) and decision.status == status


def test_resume_of_an_unknown_or_foreign_stream_is_410() -> None:
    srv = make_server()
    sid = open_session(srv)
    other = open_session(srv)
    conn, stream_id = start_call(srv, other)
    conn.send_progress(2, 1)
    srv.data_to_send()
    for cursor in [f"{stream_id}:0", "999:0"]:
        decision = resume(srv, sid, cursor)
        assert isinstance(decision, HttpResponse) and decision.status == 410
        validate_message(LEGACY, loads(decision.body))


def test_event_store_bounds() -> None:
    one = 2 + _EVENT_COST  # an event of b"ab", as the store counts it
    bound = 2 * _STREAM_COST + 3 * one
    store = InMemoryEventStore(max_events_per_stream=3, max_bytes=bound)
    for seq in range(1, 5):
        store.append("s", 1, seq, b"ab")
    assert [seq for seq, _ in store.replay("s", 1, 0) or ()] == [2, 3, 4]
    assert store.held_bytes == _STREAM_COST + 3 * one
    store.append("s", 2, 1, b"ab")  # a second stream: stream 1 (least recent) loses one
    assert store.held_bytes == bound
    assert store.replay("s", 1, 0) == [(3, b"ab"), (4, b"ab")]
    store.append("s", 3, 1, b"x" * bound)  # alone over the bound: nothing is kept
    assert store.replay("s", 3, 0) is None and store.replay("s", 1, 0) is None
    assert store.held_bytes == 0 and store.held_events == 0
    store.append("s", 4, 1, b"ab")
    store.discard_session("s")
    assert store.held_bytes == 0 and store.held_events == 0
    with pytest.raises(ValueError, match="negative"):
        InMemoryEventStore(max_bytes=-1)


@pytest.mark.parametrize("streams", [1, 20_000])
def test_event_store_memory_stays_near_its_bound(streams: int) -> None:
    # What orjson.dumps returns for a short message holds a 4 KiB buffer (orjson 3.13),
    # and in a legacy session every POST answered as SSE is a stream of its own: counting
    # message lengths alone let the store's real memory grow to ~50 times max_bytes.
    bound = 256 * 1024
    store = InMemoryEventStore(max_events_per_stream=20_000, max_bytes=bound)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1, 20_001):
            message = dumps({"jsonrpc": "2.0", "id": i, "result": {}})
            store.append("s", i % streams, i, message)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert store.held_bytes <= bound
    assert store.held_events > 200  # (it keeps what fits)
    assert held <= 1.5 * bound, held


def test_an_event_store_that_keeps_no_events_keeps_no_streams() -> None:
    store = InMemoryEventStore(max_events_per_stream=0)  # "no resumption"
    for stream in range(1, 1_001):  # each legacy POST stream is a new key
        store.append("s", stream, 1, b"ab")
    assert store.held_events == 0 and store.held_bytes == 0
    assert len(store._streams) == 0  # an emptied stream's key used to stay forever
    assert store.replay("s", 1000, 0) is None


def test_standalone_backlog_waits_for_the_first_get() -> None:
    srv = make_server()
    sid = open_session(srv)
    srv.send_notification("notifications/tools/list_changed")
    srv.send_notification("notifications/prompts/list_changed")
    assert srv.data_to_send() == []
    get = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(sid)), now=0
    ).decision
    assert isinstance(get, OpenStream)
    assert [m["method"] for m in payloads(get.data)] == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    ]
    # a second GET replaces the first (a client reconnecting before we noticed the drop)
    second = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(sid)), now=1
    ).decision
    assert isinstance(second, OpenStream) and payloads(second.data) == []
    assert outputs(srv)[get.stream_id].end
    srv.send_notification("notifications/tools/list_changed")
    assert list(outputs(srv)) == [second.stream_id]


def test_release_stream_for_polling() -> None:
    srv = make_server(retry_ms=250)
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    conn.send_progress(2, 1)
    srv.release_stream(stream_id)
    out = outputs(srv)[stream_id]
    assert out.end and out.data.endswith(b"retry: 250\n\n")
    decoder = SSEDecoder()
    decoder.feed(out.data)
    assert decoder.retry == 250 and decoder.last_event_id == f"{stream_id}:1"
    srv.stream_closed(stream_id, now=1)
    conn.send_progress(2, 2)
    again = resume(srv, sid, decoder.last_event_id)
    assert isinstance(again, OpenStream) and len(payloads(again.data)) == 1
    with pytest.raises(LocalProtocolError):
        srv.release_stream(stream_id)  # no longer attached
    json_srv = make_server(response_mode="json")
    jsid = open_session(json_srv)
    pending = json_srv.handle_request(
        req(body=rpc(2, "tools/list"), **in_session(jsid)), now=0
    ).decision
    assert isinstance(pending, AwaitResponse)
    with pytest.raises(LocalProtocolError):
        json_srv.release_stream(pending.stream_id)


def test_a_released_stream_announces_no_retry_when_none_is_configured() -> None:
    # retry_ms=None: no retry field, as in the priming events; it used to send
    # "retry: 0", telling clients to come back at once where none was configured.
    srv = make_server(retry_ms=None)
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    conn.send_progress(2, 1)
    srv.release_stream(stream_id)
    out = outputs(srv)[stream_id]
    assert out.end and b"retry:" not in out.data
    decoder = SSEDecoder()
    decoder.feed(out.data)
    assert decoder.retry is None and decoder.last_event_id == f"{stream_id}:1"


def test_a_released_stream_announces_a_retry_of_0() -> None:
    # retry_ms=0 is configured, not absent: "reconnect at once", as the priming event says.
    srv = make_server(retry_ms=0)
    sid = open_session(srv)
    conn, stream_id = start_call(srv, sid)
    conn.send_progress(2, 1)
    srv.release_stream(stream_id)
    out = outputs(srv)[stream_id]
    assert out.end and out.data.endswith(b"retry: 0\n\n")
    decoder = SSEDecoder()
    decoder.feed(out.data)
    assert decoder.retry == 0 and decoder.last_event_id == f"{stream_id}:1"


# ================================================================== legacy: eviction


def test_idle_sessions_expire_with_injected_time() -> None:
    srv = make_server(session_idle_timeout=60.0)
    sids = [open_session(srv, now=float(i)) for i in range(100)]
    busy = sids[0]
    get = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(busy)), now=0
    ).decision
    assert isinstance(get, OpenStream)
    assert srv.next_deadline() == 61.0  # sids[1], the least recently active idle session
    srv.handle_request(req(body=rpc(9, "ping"), **in_session(sids[1])), now=50.0)  # activity
    events = srv.handle_timer(100.0)
    closed = [e for e in events if isinstance(e, SessionClosed)]
    assert {e.session_id for e in closed} == set(sids[2:41])  # idle since t <= 40
    assert all(e.reason == "expired" for e in closed)
    assert (
        sum(isinstance(e, ServerEvent) and isinstance(e.event, ConnectionClosed) for e in events)
        == 39
    )
    assert busy in srv.sessions() and sids[1] in srv.sessions()
    srv.handle_timer(1_000.0)
    assert srv.sessions() == (busy,)  # a session with a response in progress stays
    srv.stream_closed(get.stream_id, now=1_000.0)
    assert srv.next_deadline() == 1_060.0
    srv.handle_timer(1_060.0)
    assert srv.sessions() == ()
    assert srv.next_deadline() is None


def test_a_full_session_table_evicts_the_least_recently_used_idle_session() -> None:
    srv = make_server(max_sessions=3, session_idle_timeout=None)
    a, b, c = (open_session(srv, now=float(i)) for i in range(3))
    srv.handle_request(req(body=rpc(5, "ping"), **in_session(a)), now=10)  # a is fresh again
    srv.handle_request(req("GET", accept="text/event-stream", **in_session(b)), now=11)  # b is busy
    reply = srv.handle_request(req(body=initialize()), now=12)
    assert only(reply.events, SessionClosed) == SessionClosed(session_id=c, reason="evicted")
    assert set(srv.sessions()) == {a, b, reply.decision.header("mcp-session-id")}  # type: ignore[union-attr]
    assert srv.handle_timer(10_000) == []  # no idle timeout configured


def test_a_full_table_of_busy_sessions_is_503() -> None:
    srv = make_server(max_sessions=2)
    for sid in (open_session(srv), open_session(srv)):
        srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    reply = srv.handle_request(req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 503
    assert reply.decision.header("retry-after") == "1"
    assert len(srv.sessions()) == 2


def test_closing_a_session_ends_its_responses() -> None:
    srv = make_server(response_mode=lambda m, e: "json" if m == "tools/list" else "sse")
    sid = open_session(srv)
    conn = srv.session_connection(sid)
    assert conn is not None
    waiting = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=0).decision
    streaming = srv.handle_request(
        req(body=rpc(3, "tools/call", {"name": "t"}), **in_session(sid)), now=0
    ).decision
    assert isinstance(waiting, AwaitResponse) and isinstance(streaming, OpenStream)
    reply = srv.handle_request(req("DELETE", **in_session(sid)), now=1)
    closed = only(reply.events, ConnectionClosed)
    assert closed.abandoned == (2, 3)
    out = outputs(srv)
    assert isinstance(out[waiting.stream_id], ResponseReady)
    assert out[waiting.stream_id].response.status == 404
    assert out[streaming.stream_id] == StreamData(stream_id=streaming.stream_id, data=b"", end=True)
    conn.send_result(3, {"content": []})  # a late answer of a handler goes nowhere
    assert srv.data_to_send(connection=conn) == []
    assert srv.stream_closed(waiting.stream_id, now=2) == []


def test_server_requests_time_out_through_handle_timer() -> None:
    srv = make_server()
    sid = open_session(srv)
    conn = srv.session_connection(sid)
    assert conn is not None
    rid = conn.send_request("roots/list", now=0.0, timeout=5.0)
    assert srv.next_deadline() == 5.0
    events = srv.handle_timer(5.0)
    timed_out = [e for e in events if isinstance(e, ServerEvent)]
    assert timed_out[0].event == RequestTimedOut(request_id=rid, method="roots/list")
    assert timed_out[0].session_id == sid
    get = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(sid)), now=6
    ).decision
    assert isinstance(get, OpenStream)
    assert [m["method"] for m in payloads(get.data)] == ["roots/list", "notifications/cancelled"]


# ================================================================== modern


def modern_reply(srv: HttpServer, body: Any, **headers: str) -> Reply:
    return srv.handle_request(req(body=body, **headers), now=0)


TOOL_CALL = modern(1, "tools/call", {"name": "get_weather", "arguments": {"region": "us-west1"}})
TYPED = modern(1, "tools/call", {"name": "typed", "arguments": {"n": 42, "flag": True}})
REGION = {"mcp_param_region": "us-west1"}
HEADER_PARAMS = {
    "get_weather": (HeaderParam(name="Region", path=("region",)),),
    "typed": (HeaderParam(name="N", path=("n",)), HeaderParam(name="Flag", path=("flag",))),
}


@pytest.mark.parametrize(
    ("body", "headers", "code", "status"),
    [
        # the happy case, for reference
        (TOOL_CALL, modern_headers("tools/call", "get_weather", **REGION), None, 200),
        # MCP-Protocol-Version
        (TOOL_CALL, {"mcp_method": "tools/call", "mcp_name": "get_weather", **REGION}, -32020, 400),
        (
            TOOL_CALL,
            modern_headers("tools/call", "get_weather", mcp_protocol_version=LEGACY, **REGION),
            -32020,
            400,
        ),
        # no _meta at all: the envelope rung (-32602) comes before any header check
        (modern(1, "tools/list") | {"params": {}}, modern_headers("tools/list"), -32602, 400),
        (
            rpc(1, "tools/list", {"_meta": {PV: "2099-01-01", CC: {}}}),
            modern_headers("tools/list", mcp_protocol_version="2099-01-01"),
            -32022,
            400,
        ),
        # Mcp-Method
        (
            TOOL_CALL,
            {"mcp_protocol_version": MODERN, "mcp_name": "get_weather", **REGION},
            -32020,
            400,
        ),
        (TOOL_CALL, modern_headers("tools/list", "get_weather", **REGION), -32020, 400),
        (TOOL_CALL, modern_headers("TOOLS/CALL", "get_weather", **REGION), -32020, 400),
        # Mcp-Name
        (TOOL_CALL, modern_headers("tools/call", **REGION), -32020, 400),
        (TOOL_CALL, modern_headers("tools/call", "other", **REGION), -32020, 400),
        (
            TOOL_CALL,
            modern_headers("tools/call", "=?base64?Z2V0X3dlYXRoZXI=?=", **REGION),
            None,
            200,
        ),
        (TOOL_CALL, modern_headers("tools/call", "=?base64?not*base64?=", **REGION), -32020, 400),
        (
            modern(1, "tools/call", {"name": "héllo wörld"}),
            modern_headers("tools/call", "=?base64?aMOpbGxvIHfDtnJsZA==?="),
            None,
            200,
        ),
        (
            modern(1, "tools/call", {"name": "héllo"}),
            modern_headers("tools/call", "h\x01llo"),
            -32020,
            400,
        ),
        (modern(1, "prompts/get", {"name": "p"}), modern_headers("prompts/get", "p"), None, 200),
        (modern(1, "prompts/get", {"name": "p"}), modern_headers("prompts/get"), -32020, 400),
        (
            modern(1, "resources/read", {"uri": "file:///a b"}),
            modern_headers("resources/read", "file:///a b"),
            None,
            200,
        ),
        (
            modern(1, "resources/read", {"uri": "file:///a"}),
            modern_headers("resources/read", "file:///b"),
            -32020,
            400,
        ),
        (modern(1, "tools/list"), modern_headers("tools/list", "ignored"), None, 200),
        # Mcp-Param-* of a string parameter
        (TOOL_CALL, modern_headers("tools/call", "get_weather"), -32020, 400),
        (
            TOOL_CALL,
            modern_headers("tools/call", "get_weather", mcp_param_region="us-east1"),
            -32020,
            400,
        ),
        (
            TOOL_CALL,
            modern_headers("tools/call", "get_weather", mcp_param_region="=?base64?dXMtd2VzdDE=?="),
            None,
            200,
        ),
        (
            TOOL_CALL,
            modern_headers("tools/call", "get_weather", mcp_param_region="us\x7fwest"),
            -32020,
            400,
        ),
        (
            modern(1, "tools/call", {"name": "get_weather", "arguments": {}}),
            modern_headers("tools/call", "get_weather", **REGION),
            -32020,
            400,
        ),
        (
            modern(1, "tools/call", {"name": "get_weather", "arguments": {"region": None}}),
            modern_headers("tools/call", "get_weather"),
            None,
            200,
        ),
        (
            TOOL_CALL,
            modern_headers("tools/call", "get_weather", mcp_param_unknown="x", **REGION),
            None,
            200,
        ),
        # Mcp-Param-* of integer and boolean parameters: compared as values
        (
            TYPED,
            modern_headers("tools/call", "typed", mcp_param_n="42", mcp_param_flag="true"),
            None,
            200,
        ),
        (
            TYPED,
            modern_headers("tools/call", "typed", mcp_param_n="42.0", mcp_param_flag="true"),
            None,
            200,
        ),
        (
            TYPED,
            modern_headers("tools/call", "typed", mcp_param_n="43", mcp_param_flag="true"),
            -32020,
            400,
        ),
        (
            TYPED,
            modern_headers("tools/call", "typed", mcp_param_n="42", mcp_param_flag="TRUE"),
            -32020,
            400,
        ),
        (TYPED, modern_headers("tools/call", "typed", mcp_param_n="42"), -32020, 400),
        # removed methods are unknown
        (modern(1, "ping"), modern_headers("ping"), -32601, 404),
        (modern(1, "initialize"), modern_headers("initialize"), -32601, 404),
    ],
)
def test_modern_header_validation(
    body: Any, headers: dict[str, str], code: int | None, status: int
) -> None:
    srv = make_server(tool_header_params=lambda name: HEADER_PARAMS.get(name, ()))
    reply = modern_reply(srv, body, **headers)
    decision = reply.decision
    if code is None:
        assert isinstance(decision, AwaitResponse | HttpResponse), decision
        if isinstance(decision, HttpResponse):
            assert decision.status == 200
        return
    assert isinstance(decision, HttpResponse)
    assert decision.status == status
    message = loads(decision.body)
    assert message["error"]["code"] == code
    assert message["id"] == 1
    validate_message(MODERN, message)
    if code == -32022:
        assert message["error"]["data"] == {
            "supported": [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
            "requested": "2099-01-01",
        }
    assert srv.statistics()["modern_requests"] == 0


def test_modern_unknown_method_is_404_when_the_application_says_so() -> None:
    srv = make_server()
    reply = modern_reply(srv, modern(1, "vendor/thing"), **modern_headers("vendor/thing"))
    assert isinstance(reply.decision, AwaitResponse)
    received(reply).connection.send_error(1, ErrorCode.METHOD_NOT_FOUND, "Method not found")
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.response.status == 404
    assert loads(ready.response.body)["error"]["code"] == -32601


@pytest.mark.parametrize(
    "meta",
    [
        {PV: MODERN},
        {CC: {}},
        {PV: MODERN, CC: None},
        {PV: MODERN, CC: "x"},
        {PV: MODERN, CC: []},
        {PV: 20260728, CC: {}},
        {PV: None, CC: {}},
    ],
)
def test_a_malformed_envelope_is_invalid_params_at_400(meta: dict[str, Any]) -> None:
    # basic/index.mdx#_meta: a request missing a required field is malformed: -32602,
    # and on HTTP the status MUST be 400 (not the 200 of an ordinary -32602).
    srv = make_server(era="modern")
    body = rpc(1, "tools/list", {"_meta": meta})
    reply = modern_reply(srv, body, **modern_headers("tools/list"))
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.INVALID_PARAMS
    assert not reply.events


@pytest.mark.parametrize(
    ("era", "header", "body"),
    [
        ("auto", "2099-01-01", rpc(1, "tools/list")),
        ("modern", "2099-01-01", rpc(1, "tools/list")),
        ("modern", "2099-01-01", rpc(1, "tools/list", {"_meta": {PV: "2099-01-01"}})),
        ("modern", LEGACY, rpc(1, "tools/list")),
        ("modern", LEGACY, initialize()),
    ],
)
def test_a_version_not_implemented_is_32022_before_anything_else(
    era: str, header: str, body: dict[str, Any]
) -> None:
    # streamable-http.mdx#protocol-version-header: MUST be 400 with an
    # UnsupportedProtocolVersionError listing ours, whatever else the request lacks (a
    # client of a later revision retries with one; a legacy client can show them).
    srv = make_server(era=era)
    reply = srv.handle_request(req(body=body, mcp_protocol_version=header), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    error = error_of(reply.decision)
    assert error["code"] == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"]["requested"] == header
    assert MODERN in error["data"]["supported"]
    assert not srv.sessions()


def test_a_body_claiming_another_version_is_a_mismatch_first() -> None:
    # The conformance suite's order: header against _meta (-32020) before support.
    srv = make_server(era="modern")
    body = modern(1, "tools/list")
    reply = modern_reply(
        srv, body, **modern_headers("tools/list", mcp_protocol_version="2099-01-01")
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] == ErrorCode.HEADER_MISMATCH


def test_a_missing_mcp_param_header_for_a_body_value_is_refused() -> None:
    srv = make_server(
        tool_header_params=lambda name: (HeaderParam(name="Region", path=("region",)),)
    )
    reply = modern_reply(srv, TOOL_CALL, **modern_headers("tools/call", "get_weather"))
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert "Mcp-Param-Region" in error_of(reply.decision)["message"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ([modern(1, "tools/list")], 400, ErrorCode.INVALID_REQUEST),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, 400, ErrorCode.INVALID_REQUEST),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": 3},
            400,
            ErrorCode.INVALID_PARAMS,
        ),
        (note("notifications/cancelled", {"requestId": 1}), 202, None),
    ],
)
def test_modern_bodies(body: Any, status: int, code: int | None) -> None:
    srv = make_server(era="modern")
    reply = modern_reply(srv, body, **modern_headers("tools/list"))
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == status
    if code is not None:
        assert error_of(reply.decision)["code"] == code


def test_modern_ignores_session_ids_and_last_event_id() -> None:
    srv = make_server()
    reply = modern_reply(
        srv,
        modern(1, "server/discover"),
        **modern_headers("server/discover", mcp_session_id="stale", last_event_id="1:1"),
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    assert reply.decision.header("mcp-session-id") is None
    validate_message(MODERN, loads(reply.decision.body), "server/discover")
    assert srv.sessions() == ()


def test_modern_only_server_refuses_initialize_naming_its_versions() -> None:
    srv = make_server(era="modern")
    reply = srv.handle_request(req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    error = error_of(reply.decision)
    assert error["code"] == ErrorCode.HEADER_MISMATCH
    assert MODERN in error["message"] and error["data"] == {"supported": [MODERN]}
    assert srv.sessions() == ()


def test_modern_sse_stream_carries_progress_then_the_result_and_ends() -> None:
    srv = make_server(response_mode="sse")
    reply = modern_reply(
        srv,
        modern(
            1,
            "tools/call",
            {"name": "t"},
            progressToken="p",
            **{"io.modelcontextprotocol/logLevel": "info"},
        ),
        **modern_headers("tools/call", "t"),
    )
    # Opened by its first message, not before: see the -32021 test below.
    assert isinstance(reply.decision, AwaitResponse)
    tagged = received(reply)
    assert tagged.session_id is None and tagged.stream_id == reply.decision.stream_id
    conn = tagged.connection
    conn.send_progress(1, 1, total=2)
    conn.send_log("info", "working", request_id=1)
    conn.send_log("debug", "too chatty", request_id=1)  # below the request's level: not sent
    out = outputs(srv)[reply.decision.stream_id]
    assert isinstance(out, OpenStream) and out.headers == SSE_HEADERS and not out.end
    events = sse_messages(out.data)
    assert all(e.id is None for e in events)  # modern streams are not resumable
    assert [loads(e.data)["method"] for e in events] == [
        "notifications/progress",
        "notifications/message",
    ]
    conn.send_result(1, {"content": []})
    out = outputs(srv)[reply.decision.stream_id]
    assert out.end
    (result,) = payloads(out.data)
    validate_message(MODERN, result, "tools/call")
    assert srv.stream_closed(reply.decision.stream_id, now=1) == []  # finished: no cancellation
    assert srv.statistics() == {"sessions": 0, "modern_requests": 0, "open_responses": 0}


def test_modern_sse_mode_answers_an_error_with_a_status_of_its_own_as_json() -> None:
    # "For HTTP, the response status code MUST be 400" (-32021, 2026-07-28 schema): a
    # stream opened before the handler ran could only ever say 200.
    srv = make_server(response_mode="sse")
    refused = modern_reply(
        srv, modern(1, "tools/call", {"name": "t"}), **modern_headers("tools/call", "t")
    )
    assert isinstance(refused.decision, AwaitResponse)
    received(refused).connection.send_error(
        1,
        ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "need elicitation",
        {"requiredCapabilities": {"elicitation": {}}},
    )
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.response.status == 400
    validate_message(MODERN, loads(ready.response.body))
    # Any other answer is still an event stream, even one with nothing before it.
    for rid, answer in ((2, "result"), (3, "error")):
        reply = modern_reply(
            srv, modern(rid, "tools/call", {"name": "t"}), **modern_headers("tools/call", "t")
        )
        conn = received(reply).connection
        if answer == "result":
            conn.send_result(rid, {"content": []})
        else:
            conn.send_error(rid, ErrorCode.INTERNAL_ERROR, "broke")
        (opened,) = srv.data_to_send(connection=conn)
        assert isinstance(opened, OpenStream) and opened.headers == SSE_HEADERS and opened.end
        (message,) = payloads(opened.data)
        assert message["id"] == rid and answer in message
    assert srv.statistics()["modern_requests"] == 0


def test_modern_auto_mode_answers_json_unless_something_comes_first() -> None:
    srv = make_server()
    fast = modern_reply(srv, modern(1, "tools/list"), **modern_headers("tools/list"))
    assert isinstance(fast.decision, AwaitResponse)
    received(fast).connection.send_error(
        1,
        ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "need sampling",
        {"requiredCapabilities": {"sampling": {}}},
    )
    (ready,) = srv.data_to_send()
    assert (
        isinstance(ready, ResponseReady) and ready.response.status == 400
    )  # -32021 is 400 on HTTP
    validate_message(MODERN, loads(ready.response.body))

    slow = modern_reply(
        srv,
        modern(2, "tools/call", {"name": "t"}, progressToken=2),
        **modern_headers("tools/call", "t"),
    )
    assert isinstance(slow.decision, AwaitResponse)
    conn = received(slow).connection
    conn.send_progress(2, 1)
    (opened,) = srv.data_to_send(connection=conn)
    assert isinstance(opened, OpenStream) and opened.stream_id == slow.decision.stream_id
    assert opened.headers == SSE_HEADERS and not opened.end
    conn.send_result(2, {"content": []})
    (last,) = srv.data_to_send(connection=conn)
    assert isinstance(last, StreamData) and last.end


def test_modern_json_mode_drops_notifications() -> None:
    srv = make_server(response_mode="json")
    reply = modern_reply(
        srv,
        modern(1, "tools/call", {"name": "t"}, progressToken=1),
        **modern_headers("tools/call", "t"),
    )
    conn = received(reply).connection
    conn.send_progress(1, 1)
    assert srv.data_to_send() == []
    conn.send_result(1, {"content": []})
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.response.status == 200


@pytest.mark.parametrize("mode", ["auto", "json", "sse"])
def test_closing_a_modern_stream_cancels_the_request(mode: Any) -> None:
    srv = make_server(response_mode=mode)
    reply = modern_reply(
        srv,
        modern(7, "tools/call", {"name": "t"}, progressToken=7),
        **modern_headers("tools/call", "t"),
    )
    assert isinstance(reply.decision, AwaitResponse | OpenStream)
    conn = received(reply).connection
    events = srv.stream_closed(reply.decision.stream_id, now=1)
    cancelled = only(events, RequestCancelled)
    assert cancelled == RequestCancelled(request_id=7, reason="stream closed")
    (tagged,) = events
    assert isinstance(tagged, ServerEvent)
    assert tagged.connection is conn and tagged.stream_id == reply.decision.stream_id
    assert conn.send_progress(7, 1) is False
    conn.send_result(7, {"content": []})  # dropped: one answer per request, none after a cancel
    assert srv.data_to_send() == []
    assert srv.statistics()["modern_requests"] == 0
    assert srv.stream_closed(reply.decision.stream_id, now=2) == []


def test_subscriptions_listen_is_a_long_lived_stream() -> None:
    srv = make_server()
    listen = modern(4, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    reply = modern_reply(srv, listen, **modern_headers("subscriptions/listen"))
    assert isinstance(reply.decision, OpenStream)
    (ack,) = payloads(reply.decision.data)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    validate_message(MODERN, ack)
    other = modern_reply(
        srv,
        modern(4, "subscriptions/listen", {"notifications": {"promptsListChanged": True}}),
        **modern_headers("subscriptions/listen"),
    )
    assert isinstance(other.decision, OpenStream)  # same id from another client: no collision
    assert srv.send_notification("notifications/tools/list_changed") == 1
    out = outputs(srv)
    assert list(out) == [reply.decision.stream_id]
    (changed,) = payloads(out[reply.decision.stream_id].data)
    assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 4
    validate_message(MODERN, changed)
    assert srv.stream_closed(reply.decision.stream_id, now=1) == []  # no handler to cancel
    assert srv.send_notification("notifications/tools/list_changed") == 0
    events = srv.close()
    assert events == []
    out = outputs(srv)
    (closing,) = payloads(out[other.decision.stream_id].data)
    assert closing["id"] == 4 and closing["result"]["resultType"] == "complete"
    assert out[other.decision.stream_id].end


def test_close_shuts_everything_down() -> None:
    srv = make_server()
    sid = open_session(srv)
    pending = modern_reply(srv, modern(1, "tools/list"), **modern_headers("tools/list"))
    streaming = srv.handle_request(
        req(
            body=modern(2, "tools/call", {"name": "t"}, progressToken=2),
            **modern_headers("tools/call", "t"),
        ),
        now=0,
    )
    received(streaming).connection.send_progress(2, 1)
    srv.data_to_send()
    answered = modern_reply(srv, modern(3, "tools/list"), **modern_headers("tools/list"))
    received(answered).connection.send_result(3, {"tools": []})  # queued, not yet drained
    events = srv.close()
    assert {type(e.event) for e in events if isinstance(e, ServerEvent)} == {
        RequestCancelled,
        ConnectionClosed,
    }
    # Both modern requests still running are cancelled (an embedder stops their
    # handlers on these events), the one answered on an open stream too ...
    cancelled = {
        e.event.request_id
        for e in events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestCancelled)
    }
    assert cancelled == {1, 2}
    # ... and a handler that answers afterwards is dropped silently, not refused.
    received(streaming).connection.send_result(2, {"content": []})
    assert only(events, SessionClosed) == SessionClosed(session_id=sid, reason="shutdown")
    out = outputs(srv)
    assert isinstance(pending.decision, AwaitResponse)
    refused = out[pending.decision.stream_id].response
    assert refused.status == 503
    error = {"code": -32603, "message": "server shutting down"}  # (as every transport's)
    assert loads(refused.body) == {"jsonrpc": "2.0", "id": 1, "error": error}
    validate_message(MODERN, loads(refused.body))
    assert isinstance(streaming.decision, AwaitResponse)  # opened lazily by the progress
    assert out[streaming.decision.stream_id].end
    # Its last event says why it ends: a stream that just ends reads as a lost connection.
    last = payloads(out[streaming.decision.stream_id].data)[-1]
    assert last["id"] == 2 and last["error"]["message"] == "server shutting down"
    validate_message(MODERN, last)
    # An answer queued before the close still goes out (it was lost).
    assert isinstance(answered.decision, AwaitResponse)
    assert loads(out[answered.decision.stream_id].response.body)["result"]["tools"] == []


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_close_answers_the_legacy_requests_in_flight(mode: str) -> None:
    # Every request gets one answer: a stream that ends without one sends the client
    # resuming (SSE), a 404 restarting its session (JSON), against a server going away.
    srv = make_server(response_mode=mode)
    sid = open_session(srv)
    replies = [
        srv.handle_request(
            req(body=rpc(rid, "tools/list"), mcp_session_id=sid, mcp_protocol_version=LEGACY),
            now=0,
        )
        for rid in (7, 8)
    ]
    srv.data_to_send()
    events = srv.close()
    # The handlers are abandoned as before (an embedder stops them on this event), and
    # one that answers afterwards is dropped silently.
    (closed,) = [e.event for e in events if isinstance(e, ServerEvent)]
    assert isinstance(closed, ConnectionClosed) and set(closed.abandoned) == {7, 8}
    received(replies[0]).connection.send_result(7, {"tools": []})
    out = outputs(srv)
    for rid, reply in zip((7, 8), replies, strict=True):
        assert isinstance(reply.decision, AwaitResponse | OpenStream)
        done = out[reply.decision.stream_id]
        if mode == "json":
            assert done.response.status == 200  # (legacy: a JSON-RPC error is a 200)
            (answer,) = [loads(done.response.body)]
        else:
            assert done.end
            (answer,) = payloads(done.data)
        assert answer["id"] == rid and answer["error"]["message"] == "server shutting down"
        validate_message(LEGACY, answer)


def test_too_many_modern_requests_is_503() -> None:
    srv = make_server(max_modern_requests=2)
    for rid in (1, 2):
        assert isinstance(
            modern_reply(srv, modern(rid, "tools/list"), **modern_headers("tools/list")).decision,
            AwaitResponse,
        )
    reply = modern_reply(srv, modern(3, "tools/list"), **modern_headers("tools/list"))
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 503
    assert reply.decision.header("retry-after") == "1"
    assert loads(reply.decision.body)["id"] == 3


# ================================================================== both eras on one endpoint


def test_dual_era_endpoint_tells_the_eras_apart_per_request() -> None:
    srv = make_server()
    assert srv.serves_legacy and srv.serves_modern
    sid = open_session(srv)
    # a modern request (headers and _meta) is served statelessly, even with a session id
    m = srv.handle_request(
        req(body=modern(2, "tools/list"), **modern_headers("tools/list"), mcp_session_id=sid), now=0
    )
    tagged = received(m)
    assert isinstance(tagged.event, RequestReceived)
    assert tagged.session_id is None and tagged.event.era is Era.MODERN
    assert tagged.connection is not srv.session_connection(sid)
    # a body with modern _meta but legacy headers is a modern request with a mismatch
    mixed = srv.handle_request(req(body=modern(3, "tools/list"), **in_session(sid)), now=0)
    assert isinstance(mixed.decision, HttpResponse) and mixed.decision.status == 400
    assert error_of(mixed.decision)["code"] == ErrorCode.HEADER_MISMATCH
    # an unknown header version is answered as a modern server would
    unknown = srv.handle_request(
        req(body=rpc(4, "tools/list"), mcp_protocol_version="2099-01-01"), now=0
    )
    assert isinstance(unknown.decision, HttpResponse) and unknown.decision.status == 400
    assert error_of(unknown.decision)["code"] == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    # a legacy request in the session is legacy
    legacy = srv.handle_request(req(body=rpc(5, "tools/list"), **in_session(sid)), now=0)
    legacy_event = received(legacy).event
    assert isinstance(legacy_event, RequestReceived) and legacy_event.era is Era.LEGACY
    assert received(legacy).session_id == sid
    # a legacy-shaped request without a session is the legacy 400 (not a modern error)
    lost = srv.handle_request(req(body=rpc(6, "tools/list")), now=0)
    assert isinstance(lost.decision, HttpResponse) and lost.decision.status == 400
    assert error_of(lost.decision)["code"] == ErrorCode.INVALID_REQUEST


def test_legacy_only_server_answers_modern_requests_without_a_modern_error() -> None:
    srv = make_server(era="legacy")
    assert not srv.serves_modern
    reply = srv.handle_request(
        req(body=modern(1, "server/discover"), **modern_headers("server/discover")), now=0
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400
    assert error_of(reply.decision)["code"] not in (-32020, -32021, -32022)


def test_stream_ids_are_unique_across_sessions_and_eras() -> None:
    srv = make_server()
    seen: set[int] = set()
    for i in itertools.count():
        if i == 5:
            break
        sid = open_session(srv)
        a = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=0).decision
        b = modern_reply(srv, modern(2, "tools/list"), **modern_headers("tools/list")).decision
        assert isinstance(a, OpenStream) and isinstance(b, AwaitResponse)
        assert a.stream_id not in seen and b.stream_id not in seen
        seen |= {a.stream_id, b.stream_id}


def test_handshake_event_is_tagged_with_its_session() -> None:
    srv = make_server()
    reply = srv.handle_request(req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse)
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    done = srv.handle_request(req(body=note("notifications/initialized"), **in_session(sid)), now=0)
    (tagged,) = done.events
    assert isinstance(tagged, ServerEvent) and isinstance(tagged.event, HandshakeCompleted)
    assert tagged.session_id == sid and tagged.stream_id is None


# ================================================================== corners


def test_resume_of_the_standalone_stream_and_of_a_json_answer() -> None:
    srv = make_server(response_mode=lambda m, e: "json" if m == "tools/list" else "sse")
    sid = open_session(srv)
    get = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    assert isinstance(get.decision, OpenStream)
    (priming,) = sse_messages(get.decision.data)
    assert priming.id is not None
    srv.stream_closed(get.decision.stream_id, now=0)
    srv.send_notification("notifications/tools/list_changed")
    again = resume(srv, sid, priming.id)
    assert isinstance(again, OpenStream) and not again.end
    assert [m["method"] for m in payloads(again.data)] == ["notifications/tools/list_changed"]
    srv.send_notification("notifications/prompts/list_changed")
    assert list(outputs(srv)) == [again.stream_id]
    waiting = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=0)
    assert isinstance(waiting.decision, AwaitResponse)
    gone = resume(srv, sid, f"{waiting.decision.stream_id}:0")  # JSON answers have no events
    assert isinstance(gone, HttpResponse) and gone.status == 410


@pytest.mark.parametrize(("version", "status"), [("1999-01-01", 400), (MODERN, 405), (LEGACY, 204)])
def test_delete_checks_the_version_header(version: str, status: int) -> None:
    srv = make_server()
    sid = open_session(srv)
    reply = srv.handle_request(
        req("DELETE", mcp_session_id=sid, mcp_protocol_version=version), now=0
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == status


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_modern_version_is_405_only_where_the_modern_era_is_served(method: str) -> None:
    # transports.mdx (legacy revisions): an unsupported MCP-Protocol-Version MUST be
    # 400. A dual-era server tells a modern client that the method is not offered to
    # it (405, Allow: POST); to a legacy-only server the version is unsupported.
    accept = "text/event-stream" if method == "GET" else None
    for era, status in (("auto", 405), ("legacy", 400)):
        srv = make_server(era=era)
        sid = open_session(srv)
        reply = srv.handle_request(
            req(method, mcp_session_id=sid, mcp_protocol_version=MODERN, accept=accept), now=0
        )
        assert isinstance(reply.decision, HttpResponse), era
        assert reply.decision.status == status, era
        assert (b"allow", b"POST") not in reply.decision.headers or status == 405


def test_cancelling_part_of_a_batch_keeps_its_stream_open() -> None:
    srv = make_server(versions=("2025-03-26",))
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    headers = in_session(sid, "2025-03-26")
    batch = [rpc(2, "tools/call", {"name": "a"}), rpc(3, "tools/call", {"name": "b"})]
    reply = srv.handle_request(req(body=batch, **headers), now=0)
    assert isinstance(reply.decision, OpenStream)
    srv.handle_request(
        req(body=note("notifications/cancelled", {"requestId": 2}), **headers), now=0
    )
    assert srv.data_to_send() == []
    conn.send_result(3, {"content": []})
    out = outputs(srv)[reply.decision.stream_id]
    assert out.end and [m["id"] for m in payloads(out.data)] == [3]


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_request_cancelled_in_its_own_batch_gets_no_stream(mode: Any) -> None:
    srv = make_server(versions=("2025-03-26",), response_mode=mode)
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    headers = in_session(sid, "2025-03-26")
    cancel = note("notifications/cancelled", {"requestId": 5})
    reply = srv.handle_request(req(body=[rpc(5, "tools/list"), cancel], **headers), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 202
    assert conn.inflight_requests() == () and srv.statistics()["open_responses"] == 0
    # With another request beside it, the POST carries that one only.
    batch = [
        rpc(6, "tools/list"),
        rpc(7, "tools/list"),
        note("notifications/cancelled", {"requestId": 6}),
    ]
    reply = srv.handle_request(req(body=batch, **headers), now=0)
    assert isinstance(reply.decision, OpenStream | AwaitResponse)
    streams = {
        e.event.request_id: e.stream_id
        for e in reply.events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestReceived)
    }
    assert streams[6] is None and streams[7] == reply.decision.stream_id
    conn.send_result(7, {"tools": []})
    (out,) = srv.data_to_send()
    if isinstance(out, ResponseReady):
        answers = loads(out.response.body)
    else:
        assert isinstance(out, StreamData) and out.end
        answers = payloads(out.data)
    assert [m["id"] for m in answers] == [7]


def test_a_batch_cancelling_an_earlier_request_and_reusing_its_id() -> None:
    srv = make_server(versions=("2025-03-26",))
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    headers = in_session(sid, "2025-03-26")
    first = srv.handle_request(req(body=rpc(7, "tools/call", {"name": "a"}), **headers), now=0)
    assert isinstance(first.decision, OpenStream)
    cancel = note("notifications/cancelled", {"requestId": 7})
    batch = [cancel, rpc(7, "tools/call", {"name": "b"})]  # the cancel comes first
    refused = srv.handle_request(req(body=batch, **headers), now=0)
    # The cancelled request is not answered yet (its answer, dropped, may still come):
    # its id is still taken, so the second request is a duplicate.
    assert isinstance(refused.decision, HttpResponse)
    assert loads(refused.decision.body)[0]["error"]["message"] == "Duplicate request id 7"
    ended = outputs(srv)
    assert ended[first.decision.stream_id].end and not payloads(
        ended[first.decision.stream_id].data
    )
    conn.send_result(7, {"content": []})  # the cancelled one's answer: dropped
    assert outputs(srv) == {}
    second = srv.handle_request(req(body=[rpc(7, "tools/call", {"name": "b"})], **headers), now=0)
    assert isinstance(second.decision, OpenStream)  # now the id is free
    conn.send_result(7, {"content": []})
    out = outputs(srv)
    assert list(out) == [second.decision.stream_id]
    assert [m["id"] for m in payloads(out[second.decision.stream_id].data)] == [7]


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_nested_batch_element_is_an_invalid_request(mode: Any) -> None:
    srv = make_server(versions=("2025-03-26",), response_mode=mode)
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    batch = [[rpc(7, "tools/list")], rpc(8, "ping")]
    reply = srv.handle_request(req(body=batch, **in_session(sid, "2025-03-26")), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    invalid, pong = loads(reply.decision.body)
    assert invalid["id"] is None and invalid["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert pong == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert conn.inflight_requests() == () and srv.statistics()["open_responses"] == 0


def test_a_batch_element_nested_deeper_than_orjson_writes_is_served() -> None:
    srv = make_server(versions=("2025-03-26",), response_mode="json")
    sid = open_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    deep = b"[" * 300 + b"]" * 300  # orjson reads 1024 levels, writes 254
    body = (
        b'[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{"x":'
        + deep
        + b"}}}]"
    )
    reply = srv.handle_request(req(body=body, **in_session(sid, "2025-03-26")), now=0)
    assert isinstance(reply.decision, AwaitResponse)
    assert conn.inflight_requests() == (2,)
    conn.send_result(2, {"content": []})
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady)
    assert [m["id"] for m in loads(ready.response.body)] == [2]


def test_closing_a_session_with_a_replaced_get_response() -> None:
    srv = make_server()
    sid = open_session(srv)
    first = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    second = srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
    assert isinstance(first.decision, OpenStream) and isinstance(second.decision, OpenStream)
    srv.data_to_send()
    srv.handle_request(req("DELETE", **in_session(sid)), now=1)
    out = outputs(srv)
    assert list(out) == [second.decision.stream_id] and out[second.decision.stream_id].end
    assert srv.stream_closed(first.decision.stream_id, now=2) == []


def test_broadcast_skips_sessions_that_cannot_take_it() -> None:
    srv = make_server()
    open_session(srv)
    waiting = srv.handle_request(req(body=initialize()), now=0)  # not initialized yet
    assert isinstance(waiting.decision, HttpResponse)
    call = modern_reply(
        srv, modern(1, "tools/call", {"name": "t"}), **modern_headers("tools/call", "t")
    )
    assert isinstance(call.decision, AwaitResponse)
    assert srv.send_notification("notifications/tools/list_changed") == 1
    bare = HttpServer(connection_config=ConnectionConfig(capabilities={}))
    open_session(bare)
    assert bare.send_notification("notifications/tools/list_changed") == 0  # not declared


def test_a_notification_for_named_sessions_only() -> None:
    srv = make_server()
    subscribed, bystander = open_session(srv), open_session(srv)
    gets = {
        sid: srv.handle_request(req("GET", accept="text/event-stream", **in_session(sid)), now=0)
        for sid in (subscribed, bystander)
    }
    srv.data_to_send()
    listen = modern(
        4, "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["file:///a"]}}
    )
    stream = modern_reply(srv, listen, **modern_headers("subscriptions/listen"))
    assert isinstance(stream.decision, OpenStream)
    params = {"uri": "file:///a"}
    method = "notifications/resources/updated"
    assert srv.send_notification(method, params, sessions=[subscribed, "gone"]) == 2
    out = outputs(srv)
    get = gets[subscribed].decision
    assert isinstance(get, OpenStream)
    assert set(out) == {get.stream_id, stream.decision.stream_id}
    (update,) = payloads(out[get.stream_id].data)
    assert update == {"jsonrpc": "2.0", "method": method, "params": params}
    # No legacy session named: the listen streams only.
    assert srv.send_notification(method, params, sessions=()) == 1
    assert list(outputs(srv)) == [stream.decision.stream_id]


def test_no_idle_timeout_means_no_deadline() -> None:
    srv = make_server(session_idle_timeout=None)
    open_session(srv)
    assert srv.next_deadline() is None


@pytest.mark.parametrize(
    "cursor",
    ["1:\u00b2", "\u00b9:0", "1:" + "9" * 5000, "1", ":", "1:-1", "a:b", "1:0.", "1:0.x", "1:.1"],
)
def test_hostile_last_event_ids_are_400(cursor: str) -> None:
    srv = make_server()
    sid = open_session(srv)
    decision = resume(srv, sid, cursor)
    assert isinstance(decision, HttpResponse) and decision.status == 400


@pytest.mark.parametrize(("length", "status"), [("\u00b2", 200), ("9" * 5000, 413), ("", 200)])
def test_hostile_content_lengths(length: str, status: int) -> None:
    srv = make_server()
    reply = srv.handle_request(req(body=initialize(), content_length=length), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == status


def test_input_required_round_trip_across_two_posts() -> None:
    # Two requests, two per-request connections: the sealed requestState made by the first
    # is opened by the second because they share one ConnectionConfig (and its key).
    srv = make_server()
    caps: dict[str, Any] = {CC: {"elicitation": {"form": {}}}}
    first = modern_reply(
        srv, modern(1, "tools/call", {"name": "t"}, **caps), **modern_headers("tools/call", "t")
    )
    tagged = received(first)
    asks = {
        "ok": {
            "method": "elicitation/create",
            "params": {"message": "sure?", "requestedSchema": {"type": "object", "properties": {}}},
        }
    }
    tagged.connection.send_input_required(1, asks, state={"step": 2}, now=0.0)
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.response.status == 200
    body = loads(ready.response.body)
    validate_message(MODERN, body, "tools/call")
    retry = modern(
        2,
        "tools/call",
        {
            "name": "t",
            "inputResponses": {"ok": {"action": "accept", "content": {}}},
            "requestState": body["result"]["requestState"],
        },
        **caps,
    )
    second = modern_reply(srv, retry, **modern_headers("tools/call", "t"))
    event = received(second).event
    assert isinstance(event, RequestReceived)
    assert event.request_state == {"step": 2} and event.input_responses is not None


# ================================================================== binding shortcuts


def test_a_request_whose_head_was_checked_is_not_checked_again() -> None:
    srv = make_server(era="modern")
    body = modern(1, "tools/list")
    wrong_path = req(body=body, target="/elsewhere", **modern_headers("tools/list"))
    refusal = srv.check_head(wrong_path)
    assert refusal is not None and refusal.status == 404
    reply = srv.handle_request(wrong_path, now=0.0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 404
    # The binding checked the head before reading the body: the checks are skipped.
    good = req(body=body, **modern_headers("tools/list"))
    assert srv.check_head(good) is None
    checked = srv.handle_request(good, now=0.0, head_checked=True)
    assert isinstance(checked.decision, AwaitResponse)
    event = received(checked).event
    assert isinstance(event, RequestReceived) and event.method == "tools/list"


def test_collecting_without_draining_leaves_queued_output_for_a_full_pass() -> None:
    srv = make_server()
    sid = open_session(srv)
    reply = srv.handle_request(req(body=rpc(5, "tools/list"), **in_session(sid)), now=0.0)
    assert isinstance(reply.decision, OpenStream)
    assert srv.data_to_send(drain_all=False) == []  # handle_request drained what it used
    conn = received(reply).connection
    conn.send_result(5, {"tools": []})
    assert srv.data_to_send(drain_all=False) == []  # only routed output is collected
    (out,) = srv.data_to_send()
    assert isinstance(out, StreamData) and out.end
    assert payloads(out.data)[0]["id"] == 5

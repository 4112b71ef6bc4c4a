"""Edge cases of the Connection, one rule each, both roles."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorData,
    ErrorReceived,
    HandshakeCompleted,
    InvalidMessageReceived,
    LifecycleState,
    LocalProtocolError,
    ProgressReceived,
    RequestReceived,
    SubscriptionNotificationReceived,
)
from mcp_sansio._json import loads

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair
from .test_connection_legacy import feed, only, ready_pair
from .test_connection_modern import CC, modern_pair, modern_request


def test_constructor_checks() -> None:
    with pytest.raises(ValueError, match="role"):
        Connection("peer")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no supported version"):
        Connection("client", ConnectionConfig(supported_versions=("2026-07-28",), era="legacy"))
    with pytest.raises(ValueError, match="unknown"):
        ConnectionConfig(supported_versions=("1999-01-01",))


def test_introspection_after_handshake() -> None:
    pair = ready_pair()
    assert pair.client.peer_info == {"name": "s", "version": "1"}
    assert pair.client.instructions == "hello"
    assert pair.server.peer_capabilities == CLIENT_CAPS
    pair.client.send_request("tools/list", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.server.request_era(req.request_id) is Era.LEGACY
    assert pair.server.request_era("nope") is None
    pair.server.send_result(req.request_id, {"tools": []})
    (payload,) = pair.server.data_to_send()
    assert loads(payload)["id"] == req.request_id  # (its routing: tests/core/test_routing.py)


def test_client_must_use_start_for_handshake_methods() -> None:
    pair = ready_pair()
    for method in ("initialize", "server/discover"):
        with pytest.raises(LocalProtocolError, match="start"):
            pair.client.send_request(method, now=0.0)


def test_client_notifications_need_a_settled_era() -> None:
    client = Connection("client", ConnectionConfig())
    with pytest.raises(LocalProtocolError, match="era"):
        client.send_notification("notifications/roots/list_changed")
    legacy = Connection("client", ConnectionConfig(era="legacy"))
    legacy.start(now=0.0)
    with pytest.raises(LocalProtocolError, match="ready"):
        legacy.send_notification("notifications/roots/list_changed")


def test_modern_server_rejects_unknown_notification_with_no_listener() -> None:
    pair = modern_pair()
    with pytest.raises(LocalProtocolError, match="no session"):
        pair.server.send_notification("vendor/custom")


def test_send_log_rules() -> None:
    pair = ready_pair()
    with pytest.raises(LocalProtocolError, match="only a server"):
        pair.client.send_log("info", "x")
    pair.server.receive_eof()
    assert not pair.server.send_log("info", "x")


@pytest.mark.parametrize(
    ("code", "message", "data", "raised"),
    [
        (-32000, "boom", {"ids": {1, 2}}, TypeError),
        (-32000, "boom", object(), TypeError),
        ("E1", "boom", None, LocalProtocolError),
        (True, "boom", None, LocalProtocolError),
        (-32000.0, "boom", None, LocalProtocolError),
        (-32000, None, None, LocalProtocolError),
        (-32000, b"boom", None, LocalProtocolError),
    ],
)
def test_an_error_that_cannot_be_sent_leaves_the_request_answerable(
    code: Any, message: Any, data: Any, raised: type[Exception]
) -> None:
    # Every request gets exactly one answer: an error the core cannot write (data that
    # is not JSON, a code that is not an int) raises and changes nothing, so the
    # request can still be answered. It used to be dropped first, then never answered.
    # A code or message of the wrong type is the caller's mistake, LocalProtocolError
    # as for the core's other arguments (it was a TypeError); data is the JSON
    # library's to refuse, a TypeError as for send_result.
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    with pytest.raises(raised):
        pair.server.send_error(req.request_id, code, message, data)
    assert pair.server.inflight_requests() == (req.request_id,)
    assert pair.server.data_to_send() == []
    pair.server.send_error(req.request_id, -32603, "Internal error")
    answer = only(pair.deliver(pair.server), ErrorReceived)
    assert answer.error.code == -32603


@pytest.mark.parametrize("data", [None, {"field": "name"}, 0, ""])
def test_an_error_goes_out_as_its_error_data_says(data: Any) -> None:
    # send_error writes the error object itself: what ErrorData.to_wire() gives (the
    # code an int, also from an ErrorCode; data left out only when None).
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_error(req.request_id, ErrorCode.INVALID_PARAMS, "bad", data)
    (wire,) = [loads(p) for p in pair.server.data_to_send()]
    error = ErrorData(code=ErrorCode.INVALID_PARAMS, message="bad", data=data)
    assert wire == {"jsonrpc": "2.0", "id": req.request_id, "error": error.to_wire()}
    assert ("data" in wire["error"]) is (data is not None)


def test_progress_for_cancelled_request_is_quietly_dropped() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.client.cancel_request(rid)
    pair.deliver(pair.client)
    assert not pair.server.send_progress(req.request_id, 1)
    with pytest.raises(LocalProtocolError):
        pair.server.send_progress("never-seen", 1)


def test_cancelled_requests_lists_those_whose_answer_will_be_dropped() -> None:
    # Cancelled by the peer, or abandoned by a close: listed until the application
    # answers (the answer is dropped), so a binding can free them once none can come.
    pair = ready_pair()
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    one, two = (e.request_id for e in pair.deliver(pair.client) if isinstance(e, RequestReceived))
    assert pair.server.cancelled_requests() == ()
    pair.client.cancel_request(first)
    pair.deliver(pair.client)
    assert pair.server.cancelled_requests() == (one,)
    pair.server.receive_eof()
    assert pair.server.cancelled_requests() == (one, two)
    pair.server.send_result(one, {"content": []})
    pair.server.send_error(two, -32603, "cancelled")
    assert pair.server.cancelled_requests() == ()
    assert pair.server.data_to_send() == []


@pytest.mark.parametrize(
    ("progress", "total"),
    [(float("nan"), None), (float("inf"), None), (2, float("nan")), (2, float("-inf"))],
)
def test_progress_must_be_a_finite_number(progress: float, total: float | None) -> None:
    # JSON has no NaN or infinity (orjson writes null), and NaN would pass the
    # "progress must increase" check (progress.mdx: it MUST increase).
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.server.send_progress(req.request_id, 1)
    pair.deliver(pair.server)
    with pytest.raises(LocalProtocolError, match="not a finite number"):
        pair.server.send_progress(req.request_id, progress, total)
    assert pair.server.data_to_send() == []  # nothing sent, nothing changed:
    assert pair.server.send_progress(req.request_id, 1.5)  # still "after 1"


@pytest.mark.parametrize(
    "params",
    [
        None,
        {"progressToken": "nope", "progress": 1},
        {"progressToken": 2, "progress": "x"},
        {"progressToken": 2, "progress": 5, "total": "x", "message": 7},
    ],
)
def test_incoming_progress_edge_cases(params: dict[str, Any] | None) -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    assert rid == 2
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/progress"}
    if params is not None:
        msg["params"] = params
    events, _ = feed(pair.client, msg)
    if params and params.get("progress") == 5:
        p = only(events, ProgressReceived)
        assert (p.total, p.message) == (None, None)
        # not increasing: ignored
        events, _ = feed(pair.client, msg)
    assert not any(isinstance(e, ProgressReceived) for e in events)


def test_cancel_notification_edge_cases() -> None:
    server = Connection("server", ConnectionConfig())
    feed(
        server,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
        },
    )
    assert feed(server, {"jsonrpc": "2.0", "method": "notifications/cancelled"}) == ([], [])
    # cancelling initialize is ignored (lifecycle.mdx)
    events, _ = feed(
        server, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    )
    assert events == []


def test_initialized_out_of_order_is_reported() -> None:
    server = Connection("server", ConnectionConfig())
    events, out = feed(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert isinstance(events[0], InvalidMessageReceived) and out == []


def test_rejected_initialize_lets_the_client_start_again() -> None:
    client = Connection("client", ConnectionConfig(era="legacy"))
    rid = client.start(now=0.0)
    client.data_to_send()
    events, _ = feed(
        client, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad"}}
    )
    assert only(events, ErrorReceived).method == "initialize"
    assert client.lifecycle is LifecycleState.IDLE
    client.start(now=0.0)


def test_initialize_result_without_capabilities_fails_the_handshake() -> None:
    client = Connection("client", ConnectionConfig(era="legacy"))
    rid = client.start(now=0.0)
    events, _ = feed(
        client, {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25"}}
    )
    assert "capabilities" in only(events, ErrorReceived).error.message


def test_discover_offering_only_legacy_versions_falls_back() -> None:
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    _, out = feed(
        client,
        {"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": ["2025-06-18"]}},
    )
    assert out[0]["method"] == "initialize"


@pytest.mark.parametrize("result", [{}, {"supportedVersions": "2026-07-28"}])
def test_a_discover_answer_that_is_no_discover_result_falls_back(result: Any) -> None:
    # versioning.mdx: anything but a modern answer identifies a legacy server (one that
    # answers every method with a result, say); it used to end the handshake.
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    _, out = feed(client, {"jsonrpc": "2.0", "id": rid, "result": result})
    assert out[0]["method"] == "initialize"
    modern_only = Connection("client", ConnectionConfig(era="modern"))
    rid = modern_only.start(now=0.0)
    modern_only.data_to_send()
    events, out = feed(modern_only, {"jsonrpc": "2.0", "id": rid, "result": result})
    assert only(events, ErrorReceived).error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert out == []


def test_discover_with_nothing_in_common_is_an_error() -> None:
    client = Connection("client", ConnectionConfig(era="modern"))
    rid = client.start(now=0.0)
    client.data_to_send()
    events, out = feed(
        client, {"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": ["2099-01-01"]}}
    )
    assert only(events, ErrorReceived).error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert out == []


@pytest.mark.parametrize("result_type", ["bogus", "input_required", 7])
def test_a_discover_result_of_another_type_fails_the_handshake(result_type: Any) -> None:
    # basic/index.mdx: a resultType the client does not recognise is invalid (and
    # server/discover may not ask for input).
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    result = {"supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": result_type}
    events, out = feed(client, {"jsonrpc": "2.0", "id": rid, "result": result})
    error = only(events, ErrorReceived)
    assert error.error.code == ErrorCode.INTERNAL_ERROR and "Invalid result" in error.error.message
    assert out == [] and client.era is None
    assert not [e for e in events if isinstance(e, HandshakeCompleted)]


@pytest.mark.parametrize(
    ("supported", "falls_back"),
    [(["2099-01-01"], False), ([], False), (["2099-01-01", "2025-06-18"], True)],
)
def test_unsupported_version_falls_back_only_to_an_offered_legacy_version(
    supported: list[str], falls_back: bool
) -> None:
    # A -32022 identifies a modern server: retry with a version it offers, never fall
    # back to initialize blindly (2026-07-28/basic/transports/stdio, basic/versioning).
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    error = {"code": -32022, "message": "x", "data": {"supported": supported}}
    events, out = feed(client, {"jsonrpc": "2.0", "id": rid, "error": error})
    if falls_back:
        assert [m["method"] for m in out] == ["initialize"]
        assert events == []
    else:
        assert out == []
        (failed,) = events
        assert isinstance(failed, ErrorReceived) and failed.error.code == -32022
        assert client.lifecycle is not LifecycleState.READY


def test_modern_requests_cannot_be_batched() -> None:
    pair = ready_pair("2025-03-26")
    _, out = feed(pair.server, [modern_request(1, "tools/list")])
    assert out[0][0]["error"]["code"] == ErrorCode.INVALID_REQUEST


def test_listen_with_a_bad_filter_is_invalid_params() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(server, modern_request(1, "subscriptions/listen", {"notifications": 5}))
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS


def test_retry_fields_only_on_input_methods() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(server, modern_request(1, "tools/list", {"inputResponses": {}}))
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    _, out = feed(server, modern_request(2, "tools/call", {"name": "t", "inputResponses": 5}))
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS


def test_retry_without_request_state_is_delivered() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    events, _ = feed(
        server, modern_request(1, "tools/call", {"name": "t", "inputResponses": {"a": {}}})
    )
    req = only(events, RequestReceived)
    assert req.input_responses == {"a": {}} and req.request_state is None


def test_answer_for_cancelled_modern_input_request_is_dropped() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    feed(server, modern_request(1, "tools/call", {"name": "t"}, **{CC: {"elicitation": {}}}))
    feed(
        server, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    )
    assert not server.send_input_required(1, {}, now=0.0)
    assert server.data_to_send() == []


def test_input_required_that_cannot_be_written_leaves_the_request_answerable() -> None:
    # As for send_error: a reply the core cannot write raises and changes nothing, so
    # the request can still be answered (it used to be taken first, then never answered).
    pair = modern_pair()
    pair.client.send_request("tools/call", {"name": "t", "arguments": {}}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    schema = {"type": "object", "properties": {"ok": {"enum": {1, 2}}}}  # a set: not JSON
    odd = {
        "confirm": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Sure?", "requestedSchema": schema},
        }
    }
    with pytest.raises(TypeError):
        pair.server.send_input_required(req.request_id, odd, now=0.0)
    assert pair.server.inflight_requests() == (req.request_id,)
    assert pair.server.data_to_send() == []
    pair.server.send_error(req.request_id, -32603, "Internal error")
    assert only(pair.deliver(pair.server), ErrorReceived).error.code == -32603


def test_retry_keeps_asking_for_progress() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_input_required(
        req.request_id, {"r": {"method": "roots/list", "params": {}}}, now=0.0
    )
    pair.deliver(pair.server)
    rid2 = pair.client.retry_with_input(rid, {"r": {"roots": []}}, now=0.0)
    retry = only(pair.deliver(pair.client), RequestReceived)
    assert retry.progress_token == rid2


def test_server_tears_down_a_subscription_with_cancelled() -> None:
    pair = modern_pair()
    sid = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.exchange()
    events, _ = feed(
        pair.client,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": sid}},
    )
    ev = only(events, SubscriptionNotificationReceived)
    assert ev.method == "notifications/cancelled"
    assert pair.client.pending_requests() == ()


def test_modern_client_notification_and_eof_with_handshake() -> None:
    pair = modern_pair()
    pair.client.send_notification("vendor/hello", {"x": 1})
    assert pair.deliver(pair.client)[0].method == "vendor/hello"  # type: ignore[union-attr]
    (closed,) = pair.client.receive_eof()
    assert closed.unanswered == ()  # type: ignore[union-attr]


def test_handshake_completed_carries_peer_info() -> None:
    pair = ConnectionPair()
    client_events, _ = pair.handshake()
    done = only(client_events, HandshakeCompleted)
    assert done.peer_info == {"name": "test-server", "version": "1"}
    assert pair.client.peer_info == done.peer_info


def test_unserializable_result_changes_nothing() -> None:
    pair = ready_pair()
    pair.client.send_request("tools/list", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    with pytest.raises(TypeError):
        pair.server.send_result(req.request_id, {"tools": [object()]})
    assert pair.server.inflight_requests() == (req.request_id,)
    pair.server.send_error(req.request_id, ErrorCode.INTERNAL_ERROR, "Internal error")
    assert only(pair.deliver(pair.server), ErrorReceived).error.code == ErrorCode.INTERNAL_ERROR


@pytest.mark.parametrize("close", ["receive_eof", "half_close", "send_failed"])
@pytest.mark.parametrize(
    "chunk", [b'{"jsonrpc":"2.0","id":7,"method":"ping"}\n', b'{"jsonrp', b"\n"]
)
def test_receive_bytes_after_close_drops_the_bytes(close: str, chunk: bytes) -> None:
    # As receive_message does: a read that races the binding's own close (a chunk
    # already taken when the close came) must not raise "feed() called after
    # feed_eof()" -- the session runtime once crashed on exactly that.
    pair = ready_pair()
    server = pair.server
    server.receive_bytes(b'{"jsonrpc":"2.0","id":1,"method":"ping"', now=0.0)  # held
    if close == "receive_eof":
        server.receive_eof(now=0.0)
    elif close == "half_close":
        server.receive_eof(now=0.0, keep_answering=True)
    else:
        server.send_failed()
    server.data_to_send()
    assert server.receive_bytes(chunk, now=1.0) == []
    assert server.data_to_send() == []
    assert server.receive_bytes_eof(now=1.0) == []
    assert server.receive_eof(now=1.0) == []

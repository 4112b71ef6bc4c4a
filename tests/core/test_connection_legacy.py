"""The legacy era (2024-11-05 ... 2025-11-25) through client/server pairs, no I/O."""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

import pytest

from mcp_sansio import (
    LEGACY_VERSIONS,
    Connection,
    ConnectionClosed,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    HandshakeCompleted,
    InvalidMessageReceived,
    LifecycleState,
    LocalProtocolError,
    NotificationReceived,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    RequestTimedOut,
    ResponseIgnored,
    ResultReceived,
)
from mcp_sansio._json import dumps, loads
from tests.schema import validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair, handshaken, validate_wire

T = TypeVar("T")


def legacy_pair(version: str = "2025-11-25", **server_kw: Any) -> ConnectionPair:
    client = ConnectionConfig(
        implementation={"name": "c", "version": "1"},
        capabilities=CLIENT_CAPS,
        supported_versions=(version,),
        era="legacy",
    )
    server = ConnectionConfig(
        implementation={"name": "s", "version": "1"},
        capabilities=server_kw.pop("capabilities", SERVER_CAPS),
        instructions="hello",
        **server_kw,
    )
    return ConnectionPair(client, server)


def ready_pair(version: str = "2025-11-25", **server_kw: Any) -> ConnectionPair:
    pair = legacy_pair(version, **server_kw)
    pair.handshake()
    return pair


def only(events: list[Any], cls: type[T]) -> T:
    found = [e for e in events if isinstance(e, cls)]
    assert len(found) == 1, events
    return found[0]


def feed(conn: Connection, obj: Any, now: float = 0.0) -> tuple[list[Any], list[Any]]:
    """Feed one message to ``conn``; return (events, decoded messages it sent)."""
    events = conn.receive_message(dumps(obj), now=now)
    return events, [loads(p) for p in conn.data_to_send()]


# ---------------------------------------------------------------- handshake


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_handshake_each_version(version: str) -> None:
    pair = legacy_pair(version)
    client_events, server_events = pair.handshake()
    done = only(client_events, HandshakeCompleted)
    assert done.era is Era.LEGACY
    assert done.protocol_version == version
    # (2024-11-05 has no `completions` capability: its completion/complete is ungated.)
    lacking = {"completions"} if version == "2024-11-05" else set()
    assert "completions" in SERVER_CAPS
    assert done.peer_capabilities == {k: v for k, v in SERVER_CAPS.items() if k not in lacking}
    assert done.peer_info == {"name": "s", "version": "1"}
    assert done.instructions == "hello"
    sdone = only(server_events, HandshakeCompleted)
    # (No elicitation before 2025-06-18: the client leaves it out of its initialize.)
    old = version in ("2024-11-05", "2025-03-26")
    assert sdone.peer_capabilities == {
        k: v for k, v in CLIENT_CAPS.items() if not (old and k == "elicitation")
    }
    assert pair.client.lifecycle is LifecycleState.READY
    assert pair.server.lifecycle is LifecycleState.READY
    assert pair.server.protocol_version == version
    assert [m.get("method") for _, m in pair.wire] == [
        "initialize",
        None,
        "notifications/initialized",
    ]
    validate_wire(pair, version)


def test_server_offers_latest_when_requested_version_unknown() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(
        server,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {}},
        },
    )
    assert out[0]["result"]["protocolVersion"] == "2025-11-25"


def test_client_refuses_a_version_it_does_not_support() -> None:
    client = Connection("client", ConnectionConfig(era="legacy"))
    rid = client.start(now=0.0)
    client.data_to_send()
    events, out = feed(
        client,
        {
            "jsonrpc": "2.0",
            "id": rid,
            "result": {"protocolVersion": "2099-01-01", "capabilities": {}, "serverInfo": {}},
        },
    )
    err = only(events, ErrorReceived)
    assert err.method == "initialize"
    assert "2099-01-01" in err.error.message
    assert out == []  # no notifications/initialized
    assert client.lifecycle is LifecycleState.FAILED
    with pytest.raises(LocalProtocolError):
        client.send_request("tools/list", now=0.0)


def test_initialize_with_bad_params_is_invalid_params_and_can_be_retried() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert server.lifecycle is LifecycleState.IDLE
    _, out = feed(
        server,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        },
    )
    assert out[0]["result"]["protocolVersion"] == "2025-06-18"


def test_second_initialize_is_refused() -> None:
    pair = ready_pair()
    _, out = feed(
        pair.server,
        {
            "jsonrpc": "2.0",
            "id": 99,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        },
    )
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert pair.server.protocol_version == "2025-11-25"


def test_start_twice_or_as_server_raises() -> None:
    pair = legacy_pair()
    pair.client.start(now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.client.start(now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.server.start(now=0.0)


def test_initialize_cannot_be_cancelled() -> None:
    client = Connection("client", ConnectionConfig(era="legacy"))
    rid = client.start(now=0.0)
    with pytest.raises(LocalProtocolError):
        client.cancel_request(rid)


# ---------------------------------------------------------------- pre-initialisation


def test_client_cannot_send_requests_before_ready() -> None:
    pair = legacy_pair()
    with pytest.raises(LocalProtocolError):
        pair.client.send_request("tools/list", now=0.0)
    pair.client.start(now=0.0)
    with pytest.raises(LocalProtocolError, match="before the session is ready"):
        pair.client.send_request("tools/list", now=0.0)
    assert pair.client.send_request("ping", now=0.0)  # ping is allowed while initializing


def test_server_refuses_requests_before_initialize() -> None:
    legacy_only = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS, era="legacy"))
    events, out = feed(legacy_only, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert only(events, InvalidMessageReceived).request_id == 1
    dual = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(dual, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    # a dual-era server reads it as a modern request with no envelope (the ladder)
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS


def test_ping_before_initialize_is_answered() -> None:
    server = Connection("server", ConnectionConfig())
    _, out = feed(server, {"jsonrpc": "2.0", "id": "p", "method": "ping"})
    assert out == [{"jsonrpc": "2.0", "id": "p", "result": {}}]


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_a_client_answers_a_ping_before_the_initialize_result(era: str) -> None:
    # ping.mdx: the receiver MUST respond promptly; a server may ping before it has
    # answered initialize (or the era probe), when the client's era is not set yet.
    client = Connection("client", ConnectionConfig(era=era))  # type: ignore[arg-type]
    client.start(now=0.0)
    client.data_to_send()
    _, out = feed(client, {"jsonrpc": "2.0", "id": "p", "method": "ping"})
    assert out == [{"jsonrpc": "2.0", "id": "p", "result": {}}]


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_a_client_refuses_other_requests_before_the_initialize_result(era: str) -> None:
    # lifecycle.mdx: "The server SHOULD NOT send requests other than pings and logging
    # before receiving the initialized notification". Refused for that reason, not as
    # a modern server's request: the era is not set yet, and may well be legacy.
    config = ConnectionConfig(era=era, capabilities=CLIENT_CAPS)  # type: ignore[arg-type]
    client = Connection("client", config)
    client.start(now=0.0)
    client.data_to_send()
    early = {"jsonrpc": "2.0", "id": "s", "method": "sampling/createMessage", "params": {}}
    events, out = feed(client, early)
    message = (
        "Invalid Request: 'sampling/createMessage' before the session is initialized "
        "(only ping is answered before the initialize result)"
    )
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": "s",
            "error": {"code": ErrorCode.INVALID_REQUEST, "message": message},
        }
    ]
    assert only(events, InvalidMessageReceived).request_id == "s"
    assert client.pending_requests() != ()  # (the handshake goes on)


@pytest.mark.parametrize(
    "config",
    [ConnectionConfig(era="modern"), ConnectionConfig(supported_versions=("2026-07-28",))],
)
def test_a_modern_client_answers_no_ping_even_before_its_era_is_set(
    config: ConnectionConfig,
) -> None:
    # 2026-07-28: servers send no requests (ping included), and a client MUST NOT
    # write responses (transports/stdio): the request is reported, not answered. So
    # for a client that can only ever be modern (pinned, or modern versions only).
    client = Connection("client", config)
    client.start(now=0.0)
    client.data_to_send()
    events, out = feed(client, {"jsonrpc": "2.0", "id": "p", "method": "ping"})
    assert out == []
    assert only(events, InvalidMessageReceived).error.code == -32601
    refused = client.receive_message(b"{not json", now=0.0)
    assert client.data_to_send() == [] and [type(e) for e in refused] == [InvalidMessageReceived]


@pytest.mark.parametrize(
    ("declared", "allowed"),
    [
        ({}, {"form"}),
        ({"applyDefaults": True}, {"form"}),  # (naming neither mode: form)
        ({"form": {}}, {"form"}),
        ({"url": {}}, {"url"}),
        ({"form": {}, "url": {}}, {"form", "url"}),
    ],
)
def test_a_client_refuses_elicitation_in_a_mode_it_did_not_declare(
    declared: dict[str, Any], allowed: set[str]
) -> None:
    # elicitation.mdx: a request in a mode not declared in the client's capabilities
    # MUST get -32602 (an empty object declares form mode, for compatibility).
    pair = handshaken("legacy", capabilities={"elicitation": declared})
    form = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    url = {"mode": "url", "message": "Sign in", "url": "https://x.example/a", "elicitationId": "e"}
    for _ in range(2):  # the second time too (nothing cached for a fast path)
        for mode, params in (("form", form), ("url", url), ("form", {**form, "mode": "form"})):
            events, out = feed(
                pair.client,
                {"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": params},
            )
            if mode in allowed:
                assert only(events, RequestReceived).params == params
                pair.client.send_result(9, {"action": "decline"})
                pair.client.data_to_send()
            else:
                (reply,) = out
                assert (reply["id"], reply["error"]["code"]) == (9, -32602), reply
                assert "not declared" in reply["error"]["message"]
                assert not events or not any(isinstance(e, RequestReceived) for e in events)


def test_an_elicitation_mode_that_is_not_a_string_is_invalid_params() -> None:
    pair = ready_pair()
    params = {"mode": ["url"], "message": "?", "requestedSchema": {"type": "object"}}
    _, out = feed(
        pair.client, {"jsonrpc": "2.0", "id": 4, "method": "elicitation/create", "params": params}
    )
    assert [(m["id"], m["error"]["code"]) for m in out] == [(4, -32602)]


def test_server_may_ping_and_log_before_initialized_but_nothing_else() -> None:
    pair = legacy_pair()
    pair.client.start(now=0.0)
    pair.deliver(pair.client)  # server has answered initialize; initialized not yet seen
    assert pair.server.lifecycle is LifecycleState.ANSWERED
    pair.server.send_request("ping", now=0.0)
    assert pair.server.send_log("info", "warming up")
    with pytest.raises(LocalProtocolError):
        pair.server.send_request("roots/list", now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.server.send_notification("notifications/tools/list_changed")


# ---------------------------------------------------------------- capabilities


def test_client_refuses_to_send_for_undeclared_server_capability() -> None:
    pair = ready_pair(capabilities={"tools": {}})
    before = pair.client.pending_requests()
    with pytest.raises(LocalProtocolError, match="resources"):
        pair.client.send_request("resources/list", now=0.0)
    with pytest.raises(LocalProtocolError, match=r"resources\.subscribe"):
        pair.client.send_request("resources/subscribe", {"uri": "x"}, now=0.0)
    assert pair.client.pending_requests() == before
    assert pair.client.data_to_send() == []


def test_server_answers_method_not_found_for_undeclared_capability() -> None:
    pair = ready_pair(capabilities={"tools": {}})
    _, out = feed(pair.server, {"jsonrpc": "2.0", "id": 7, "method": "prompts/list"})
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND


def test_server_cannot_sample_without_client_capability() -> None:
    pair = handshaken("legacy", capabilities={})
    with pytest.raises(LocalProtocolError, match="sampling"):
        pair.server.send_request(
            "sampling/createMessage", {"messages": [], "maxTokens": 1}, now=0.0
        )


def test_client_refuses_request_for_its_undeclared_capability() -> None:
    pair = handshaken("legacy", capabilities={})
    _, out = feed(pair.client, {"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND


def test_wrong_direction_methods() -> None:
    pair = ready_pair()
    with pytest.raises(LocalProtocolError):
        pair.client.send_request("sampling/createMessage", now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.server.send_request("tools/list", now=0.0)
    _, out = feed(pair.server, {"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    _, out = feed(pair.client, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND


def test_custom_methods_reach_the_application() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("vendor/thing", {"x": 1}, now=0.0)
    events = pair.deliver(pair.client)
    req = only(events, RequestReceived)
    assert req.method == "vendor/thing"
    pair.server.send_error(req.request_id, ErrorCode.METHOD_NOT_FOUND, "Method not found")
    err = only(pair.deliver(pair.server), ErrorReceived)
    assert err.request_id == rid
    assert err.error.code == ErrorCode.METHOD_NOT_FOUND


# ---------------------------------------------------------------- requests and answers


@pytest.mark.parametrize("sender", ["client", "server"])
def test_request_result_round_trip_either_way(sender: str) -> None:
    pair = ready_pair()
    conn = pair.client if sender == "client" else pair.server
    method = "tools/list" if sender == "client" else "roots/list"
    rid = conn.send_request(method, {}, now=0.0)
    req = only(pair.deliver(conn), RequestReceived)
    assert (req.method, req.era, req.protocol_version) == (method, Era.LEGACY, "2025-11-25")
    result: dict[str, Any] = {"tools": []} if sender == "client" else {"roots": []}
    pair.peer(conn).send_result(req.request_id, result)
    res = only(pair.deliver(pair.peer(conn)), ResultReceived)
    assert (res.request_id, res.method, res.result) == (rid, method, result)
    assert conn.pending_requests() == ()
    assert pair.peer(conn).inflight_requests() == ()
    validate_wire(pair, "2025-11-25")


@pytest.mark.parametrize("sender", ["client", "server"])
def test_ping_is_answered_by_the_core(sender: str) -> None:
    pair = ready_pair()
    conn = pair.client if sender == "client" else pair.server
    rid = conn.send_request("ping", now=0.0)
    assert pair.deliver(conn) == []
    assert only(pair.deliver(pair.peer(conn)), ResultReceived).request_id == rid


def test_answering_twice_or_unknown_raises_and_changes_nothing() -> None:
    pair = ready_pair()
    pair.client.send_request("tools/list", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_result(req.request_id, {"tools": []})
    with pytest.raises(LocalProtocolError):
        pair.server.send_result(req.request_id, {"tools": []})
    with pytest.raises(LocalProtocolError):
        pair.server.send_error(12345, -1, "x")
    assert len(pair.server.data_to_send()) == 1


def test_unknown_duplicate_and_late_responses_are_reported() -> None:
    pair = ready_pair()
    client = pair.client
    rid = client.send_request("tools/list", now=0.0)
    events, _ = feed(client, {"jsonrpc": "2.0", "id": 999, "result": {}})
    assert only(events, ResponseIgnored).reason == "unknown"
    feed(client, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
    assert only(events, ResponseIgnored).reason == "duplicate"
    rid2 = client.send_request("tools/list", now=0.0)
    client.cancel_request(rid2)
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid2, "result": {"tools": []}})
    assert only(events, ResponseIgnored).reason == "late"
    events, _ = feed(client, {"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}})
    ignored = only(events, ResponseIgnored)
    assert ignored.request_id is None and ignored.error is not None


def _client_remembering(count: int) -> Connection:
    """A legacy client after its handshake, remembering ``count`` finished ids."""
    client = Connection("client", ConnectionConfig(era="legacy", remembered_ids=count))
    client.start(now=0.0)
    feed(
        client,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"protocolVersion": "2025-11-25", "capabilities": SERVER_CAPS},
        },
    )
    return client


def test_remembered_ids_are_bounded() -> None:
    client = _client_remembering(3)
    ids = [client.send_request("ping", now=0.0) for _ in range(10)]
    for rid in ids:
        client.cancel_request(rid)
    events, _ = feed(client, {"jsonrpc": "2.0", "id": ids[0], "result": {}})
    assert only(events, ResponseIgnored).reason == "unknown"  # forgotten: over the bound
    events, _ = feed(client, {"jsonrpc": "2.0", "id": ids[-1], "result": {}})
    assert only(events, ResponseIgnored).reason == "late"


def test_answered_ids_are_remembered_within_the_bound() -> None:
    client = _client_remembering(3)
    ids = [client.send_request("ping", now=0.0) for _ in range(10)]
    for rid in ids:
        events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {}})
        assert only(events, ResultReceived).request_id == rid
    events, _ = feed(client, {"jsonrpc": "2.0", "id": ids[0], "result": {}})
    assert only(events, ResponseIgnored).reason == "unknown"  # forgotten: over the bound
    events, _ = feed(client, {"jsonrpc": "2.0", "id": ids[-1], "result": {}})
    assert only(events, ResponseIgnored).reason == "duplicate"


@pytest.mark.parametrize("count", [0, 1, 3, 4, 5])
def test_remembered_ids_are_the_last_finished(count: int) -> None:
    # The window is the last `count` ids to finish, in the order they finished (not
    # the order they were sent), whether answered (fast path) or cancelled; its
    # bookkeeping stays within the bound.
    client = _client_remembering(count)
    ids = [client.send_request("ping", now=0.0) for _ in range(6)]
    finished = []
    for i, rid in enumerate(reversed(ids)):
        if i % 2:
            client.cancel_request(rid)
            finished.append((rid, "late"))
        else:
            events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {}})
            assert only(events, ResultReceived).request_id == rid
            finished.append((rid, "duplicate"))
        # (two generations, each within the bound, the rank built at most once each)
        assert len(client._finished_out) <= count and len(client._finished_before) <= max(count, 1)
    kept = finished[len(finished) - count :]
    for rid, why in finished:
        events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {}})
        assert only(events, ResponseIgnored).reason == (why if (rid, why) in kept else "unknown")


def test_duplicate_inbound_request_id_is_refused() -> None:
    pair = ready_pair()
    msg = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    events, out = feed(pair.server, msg)
    assert isinstance(events[0], RequestReceived)
    events, out = feed(pair.server, msg)
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert "Duplicate" in out[0]["error"]["message"]
    pair.server.send_result(5, {"tools": []})  # the original is still answerable


def test_pending_table_is_bounded() -> None:
    pair = ready_pair()
    client = Connection(
        "client", ConnectionConfig(era="legacy", max_pending_requests=2, capabilities={})
    )
    client.start(now=0.0)
    with pytest.raises(LocalProtocolError, match="too many"):
        client.send_request("ping", now=0.0)  # initialize already occupies one slot...
        client.send_request("ping", now=0.0)
    assert pair


def test_inflight_table_is_bounded() -> None:
    pair = ready_pair(max_inflight_requests=2)
    for _i in range(3):
        pair.client.send_request("tools/list", now=0.0)
    events = pair.deliver(pair.client)
    assert len([e for e in events if isinstance(e, RequestReceived)]) == 2
    err = only(pair.deliver(pair.server), ErrorReceived)
    assert err.error.code == ErrorCode.INTERNAL_ERROR
    assert "Too many" in err.error.message


# ---------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("raw", "code", "rid"),
    [
        (b"{not json", ErrorCode.PARSE_ERROR, None),
        (b'"a string"', ErrorCode.INVALID_REQUEST, None),
        (b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}', ErrorCode.INVALID_REQUEST, 3),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', ErrorCode.INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', ErrorCode.INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', ErrorCode.INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": 4, "method": 12}', ErrorCode.INVALID_REQUEST, 4),
        (b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": [1]}', -32602, 4),
        (b"[]", ErrorCode.INVALID_REQUEST, None),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', ErrorCode.INVALID_REQUEST, None),
    ],
)
def test_invalid_input_gets_an_error_and_the_session_goes_on(
    raw: bytes, code: int, rid: Any
) -> None:
    pair = ready_pair()
    events = pair.server.receive_message(raw, now=0.0)
    out = [loads(p) for p in pair.server.data_to_send()]
    assert len(out) == 1
    assert out[0]["error"]["code"] == code
    assert out[0]["id"] == rid
    assert isinstance(events[0], InvalidMessageReceived)
    # still alive
    pair.client.send_request("ping", now=0.0)
    assert only(pair.deliver(pair.server) or pair.exchange()[0], ResultReceived)


def test_invalid_notifications_and_responses_are_reported_not_answered() -> None:
    pair = ready_pair()
    for raw in (
        b'{"jsonrpc": "2.0", "method": 5}',
        b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "result": 5}',
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}',
        b'{"jsonrpc": "2.0", "id": [], "error": {"code": 1, "message": "m"}}',
        b'{"jsonrpc": "2.0"}',
    ):
        events = pair.server.receive_message(raw, now=0.0)
        assert isinstance(events[0], InvalidMessageReceived), raw
        assert pair.server.data_to_send() == [], raw


@pytest.mark.parametrize(
    "answer",
    [
        {"jsonrpc": "2.0", "result": [1, 2]},
        {"jsonrpc": "2.0", "result": "done"},
        {"jsonrpc": "2.0", "error": {"message": "no code"}},
        {"jsonrpc": "2.0", "error": "boom"},
        {"jsonrpc": "2.0", "result": {}, "error": {"code": 1, "message": "both"}},
        {"result": {}},  # no "jsonrpc"
        {"jsonrpc": "1.0", "error": {"code": 1, "message": "m"}},
    ],
)
def test_a_malformed_answer_ends_its_request_with_an_error(answer: dict[str, Any]) -> None:
    # Every request gets exactly one answer: one that came malformed must not leave the
    # request waiting (with no timeout, forever).
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    other = pair.client.send_request("tools/call", {"name": "u"}, now=0.0)
    pair.client.data_to_send()
    events = pair.client.receive_message(dumps({**answer, "id": rid}), now=0.0)
    assert [type(e) for e in events] == [InvalidMessageReceived, ErrorReceived]
    ended = events[1]
    assert isinstance(ended, ErrorReceived) and ended.request_id == rid
    assert ended.error.code == ErrorCode.INTERNAL_ERROR and "answer" in ended.error.message
    assert list(pair.client.pending_requests()) == [other]
    assert pair.client.data_to_send() == []  # no reply to an answer
    # Not an answer to a request in flight: only reported.
    (reported,) = pair.client.receive_message(dumps({**answer, "id": 999}), now=0.0)
    assert isinstance(reported, InvalidMessageReceived)
    assert pair.client.data_to_send() == []


def _deliver_oversize(
    conn: Connection, raw: bytes, how: str, terminator: bytes = b"\n"
) -> list[Any]:
    """Feed ``raw`` as one message, as one line, or a byte at a time (refused while
    the line is still arriving); return the events."""
    if how == "message":
        return conn.receive_message(raw, now=0.0)
    if how == "line":
        return conn.receive_bytes(raw + terminator, now=0.0)
    return [e for b in raw + terminator for e in conn.receive_bytes(bytes([b]), now=0.0)]


def test_oversize_message_is_refused() -> None:
    server = Connection("server", ConnectionConfig(max_message_size=100))
    events = server.receive_message(
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping"' + b" " * 100, now=0.0
    )
    assert isinstance(events[0], InvalidMessageReceived)
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert out["id"] == 1  # found in its first bytes: the request gets its answer
    validate_message("2025-11-25", out)


@pytest.mark.parametrize(
    ("head", "answered_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":', 7),
        (b' { "id" : "a-b" , "jsonrpc" : "2.0" , "method" : "x", "params":', "a-b"),
        (b'{"jsonrpc":"2.0","id":-3,"method":"x","params":', -3),
        (b'{"jsonrpc":"2.0","id":"caf\xc3\xa9","method":"x","params":', "caf\u00e9"),
        # Not found: the id comes later, is escaped, is no id, or it is a batch.
        (b'{"method":"x","jsonrpc":"2.0","id":7,"params":', None),
        (b'{"jsonrpc":"2.0","id":"a\\"b","method":"x","params":', None),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"x","params":', None),
        (b'{"jsonrpc":"2.0","id":null,"method":"x","params":', None),
        (b'{"jsonrpc":"2.0","id":1234567890123456789012,"method":"x","params":', None),
        (b'{"jsonrpc":"1.0","id":7,"method":"x","params":', None),
        (b'[{"jsonrpc":"2.0","id":7,"method":"x","params":', None),
        (b'{"jsonrpc":"2.0","id":7,"params":', None),
        (b"\x00\xff garbage", None),
    ],
)
def test_an_oversize_request_is_answered_under_the_id_in_its_head(
    head: bytes, answered_id: Any
) -> None:
    body = head + b'"' + b"x" * 1200 + b'"}}'
    for deliver in ("message", "line", "bytewise"):
        pair = ready_pair(max_message_size=1000)
        server = pair.server
        events = _deliver_oversize(server, body, deliver)
        assert [type(e) for e in events] == [InvalidMessageReceived], deliver
        (out,) = [loads(p) for p in server.data_to_send()]
        assert out["id"] == answered_id, deliver
        assert out["error"]["code"] == ErrorCode.INVALID_REQUEST
        assert "too large" in out["error"]["message"]


def test_an_oversize_request_reusing_an_id_in_flight_is_answered_with_null() -> None:
    pair = ready_pair(max_message_size=1000)
    pair.client.send_request("tools/call", {"name": "slow"}, now=0.0)
    (received,) = pair.deliver(pair.client)
    assert isinstance(received, RequestReceived)
    rid = received.request_id
    body = b'{"jsonrpc":"2.0","id":%s,"method":"x","params":"%s"}' % (
        dumps(rid),
        b"x" * 1200,
    )
    pair.server.receive_message(body, now=0.0)
    (out,) = [loads(p) for p in pair.server.data_to_send()]
    assert out["id"] is None  # not an answer to the request in flight
    pair.server.send_result(rid, {"content": []})
    assert isinstance(only(pair.deliver(pair.server), ResultReceived), ResultReceived)


BIG = "x" * 1200


@pytest.mark.parametrize(
    ("body", "answered_id"),
    [
        # The TypeScript SDK's order: the id last, after the payload.
        ({"method": "tools/call", "params": {"a": BIG}, "jsonrpc": "2.0", "id": 9}, 9),
        ({"method": "x", "params": {"a": BIG}, "jsonrpc": "2.0", "id": "s-1"}, "s-1"),
        ({"jsonrpc": "2.0", "method": "x", "params": {"a": BIG}, "id": 4}, 4),
        # An "id" that is not the top-level one is never taken for it.
        ({"method": "x", "params": {"a": BIG, "id": 5}, "jsonrpc": "2.0"}, None),
        ({"method": "x", "params": {"a": BIG + ' "id":5}'}, "jsonrpc": "2.0"}, None),
        ({"params": {"a": BIG}, "method": "x", "jsonrpc": "2.0", "id": 6}, None),
        ({"method": "x", "params": {"a": BIG}, "jsonrpc": "2.0", 'x"id': 7}, None),
        ({"method": "x", "params": {"a": BIG}, "jsonrpc": "2.0", "id": "i" * 128}, "i" * 128),
    ],
)
def test_an_oversize_request_is_answered_under_the_id_at_its_end(
    body: dict[str, Any], answered_id: Any
) -> None:
    for deliver in ("message", "line", "bytewise"):
        server = ready_pair(max_message_size=1000).server
        raw = dumps(body)
        _deliver_oversize(server, raw, deliver, b"\r\n")
        (out,) = [loads(p) for p in server.data_to_send()]
        assert out["id"] == answered_id, deliver


def test_an_oversize_text_message_with_a_lone_surrogate_is_refused_quietly() -> None:
    server = ready_pair(max_message_size=1000).server
    text = '{"jsonrpc":"2.0","id":1,"method":"x","params":"' + "\ud800" * 1200 + '"}'
    (event,) = server.receive_message(text, now=0.0)
    assert isinstance(event, InvalidMessageReceived)
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["id"] == 1


def test_nothing_is_said_about_an_oversize_message_after_the_end() -> None:
    for keep_answering in (False, True):
        pair = ready_pair(max_message_size=1000)
        pair.server.receive_eof(keep_answering=keep_answering)
        pair.server.data_to_send()
        raw = dumps({"jsonrpc": "2.0", "id": 3, "method": "x", "params": BIG})
        assert pair.server.receive_message(raw, now=0.0) == []
        assert pair.server.data_to_send() == []


def test_a_late_oversize_answer_is_ignored_like_any_late_answer() -> None:
    pair = handshaken("legacy", max_message_size=1000)
    rid = pair.client.send_request("tools/call", {"name": "slow"}, timeout=1.0, now=0.0)
    pair.deliver(pair.client)
    pair.client.handle_timer(5.0)  # it timed out: a courtesy cancel goes out
    pair.client.data_to_send()
    raw = dumps({"result": {"content": BIG}, "jsonrpc": "2.0", "id": rid})
    (ignored,) = pair.client.receive_message(raw, now=0.0)
    assert isinstance(ignored, ResponseIgnored) and ignored.request_id == rid
    assert pair.client.data_to_send() == []  # no reply to an answer


def test_an_oversize_probe_answer_is_no_reason_to_fall_back() -> None:
    # Only a modern server answers server/discover at length: the handshake fails with
    # the error, it does not go on with initialize.
    client = Connection("client", ConnectionConfig(max_message_size=1000))
    rid = client.start(now=0.0)
    client.data_to_send()
    raw = dumps({"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": [BIG]}})
    (failed,) = client.receive_message(raw, now=0.0)
    assert isinstance(failed, ErrorReceived) and failed.method == "server/discover"
    assert "too large" in failed.error.message
    assert client.data_to_send() == []


@pytest.mark.parametrize("deliver", ["message", "line", "bytewise"])
def test_an_oversize_answer_ends_its_request_with_an_error(deliver: str) -> None:
    pair = handshaken("legacy", max_message_size=2000)
    rid = pair.client.send_request("tools/call", {"name": "big"}, now=0.0)
    other = pair.client.send_request("tools/call", {"name": "small"}, now=0.0)
    first = pair.deliver(pair.client)[0]
    assert isinstance(first, RequestReceived)
    pair.server.send_result(first.request_id, {"content": [{"type": "text", "text": "x" * 3000}]})
    (payload,) = pair.server.data_to_send()
    client = pair.client
    (error,) = _deliver_oversize(client, payload, deliver)
    assert isinstance(error, ErrorReceived) and error.request_id == rid
    assert error.error.code == ErrorCode.INTERNAL_ERROR
    assert "too large" in error.error.message
    assert error.error.data == {"maxMessageSize": 2000}  # (what tells it from the peer's)
    assert client.data_to_send() == []  # nothing to say to the server about it
    assert list(client.pending_requests()) == [other]


@pytest.mark.parametrize("deliver", ["message", "line", "bytewise"])
def test_an_oversize_error_answer_ends_its_request(deliver: str) -> None:
    # An error answer (a huge error.data) is an answer too: it ends the request it
    # answers, and is not answered as if it were a request.
    pair = handshaken("legacy", max_message_size=1000)
    rid = pair.client.send_request("tools/call", {"name": "x"}, now=0.0)
    pair.client.data_to_send()
    error = {"code": -32000, "message": "boom", "data": "x" * 5000}
    raw = dumps({"jsonrpc": "2.0", "id": rid, "error": error})
    (ended,) = _deliver_oversize(pair.client, raw, deliver)
    assert isinstance(ended, ErrorReceived) and ended.request_id == rid
    assert ended.error.code == ErrorCode.INTERNAL_ERROR
    assert ended.error.data == {"maxMessageSize": 1000}
    assert pair.client.data_to_send() == []  # nothing sent back for an answer
    assert pair.client.pending_requests() == ()


@pytest.mark.parametrize("kind", ["result", "error"])
@pytest.mark.parametrize("deliver", ["message", "line", "bytewise"])
def test_an_oversize_answer_with_its_id_out_of_sight_is_not_answered(
    kind: str, deliver: str
) -> None:
    # The id sits in the middle, between two large members: neither the head nor the
    # tail shows it. A response is never answered (an {"id": null} error would be one):
    # it is only reported, and the request waits for its timeout.
    pair = handshaken("legacy", max_message_size=1000)
    rid = pair.client.send_request("tools/call", {"name": "x"}, now=0.0)
    pair.client.data_to_send()
    big = "x" * 3000
    value: Any = {"x": big} if kind == "result" else {"code": 1, "message": big}
    raw = b'{"jsonrpc":"2.0","%s":%s,"id":%s,"z":"%s"}' % (
        kind.encode(),
        dumps(value),
        dumps(rid),
        big.encode(),
    )
    (reported,) = _deliver_oversize(pair.client, raw, deliver)
    assert isinstance(reported, InvalidMessageReceived) and reported.request_id is None
    assert reported.error.code == ErrorCode.INVALID_REQUEST
    assert "its id is not in sight" in reported.error.message
    assert pair.client.data_to_send() == []
    assert pair.client.pending_requests() == (rid,)


@pytest.mark.parametrize(
    ("head", "tail"),
    [
        # "jsonrpc" and an id of null first (an error answer to an unreadable request)
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m","data":', b"}}"),
        # an id with an escape, which the id reader does not take, before "result"
        (b'{"jsonrpc":"2.0","id":"a\\"b","result":{"k":', b"}}"),
        # the id first and "jsonrpc" last
        (b'{"id":7,"result":{"k":', b'},"jsonrpc":"2.0"}'),
        # a number id the id reader does not take, whitespace between the tokens
        (b'{ "id" : 1.5e3 , "jsonrpc" : "2.0" , "error" : {"message":', b"}}"),
    ],
)
@pytest.mark.parametrize("deliver", ["message", "line"])
def test_an_oversize_answer_after_leading_id_members_is_not_answered(
    head: bytes, tail: bytes, deliver: str
) -> None:
    # "jsonrpc" and "id" members before "result"/"error" still show an answer: it is
    # reported, never answered (an {"id": null} error would answer a response).
    server = ready_pair(max_message_size=1000).server
    raw = head + b'"' + b"x" * 5000 + b'"' + tail
    (reported,) = _deliver_oversize(server, raw, deliver)
    assert isinstance(reported, InvalidMessageReceived) and reported.request_id is None
    assert "its id is not in sight" in reported.error.message
    assert server.data_to_send() == []


def test_an_oversize_request_with_its_id_out_of_sight_is_answered_with_null() -> None:
    server = ready_pair(max_message_size=1000).server
    raw = b'{"jsonrpc":"2.0","method":"x","params":{"a":"%s"},"id":7,"z":"%s"}' % (
        b"x" * 5000,
        b"x" * 5000,
    )
    (refused,) = server.receive_bytes(raw + b"\n", now=0.0)
    assert isinstance(refused, InvalidMessageReceived) and refused.request_id is None
    (reply,) = [loads(p) for p in server.data_to_send()]
    assert reply["id"] is None and reply["error"]["code"] == ErrorCode.INVALID_REQUEST


# JSON the parser cannot hold, though valid: a number past float range, an integer of
# 400 digits (Python's json writes such), a lone surrogate escape, nesting past its depth.
UNREADABLE_VALUES = [b"1e400", b"1" * 400, b'"\\ud800"', b"[" * 1100 + b"]" * 1100]


@pytest.mark.parametrize(
    "value", UNREADABLE_VALUES, ids=["1e400", "400-digits", "surrogate", "deep"]
)
def test_an_unreadable_request_is_answered_under_its_id(value: bytes) -> None:
    pair = ready_pair()
    body = b'{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"a":' + value + b"}}"
    (event,) = pair.server.receive_message(body, now=0.0)
    assert isinstance(event, InvalidMessageReceived) and event.request_id == 21
    (out,) = [loads(p) for p in pair.server.data_to_send()]
    assert out["id"] == 21  # it used to be null: the request was never answered
    assert out["error"]["code"] == ErrorCode.PARSE_ERROR
    validate_message("2025-11-25", out)
    # and with the id last, as the TypeScript SDK writes it
    body = b'{"method":"x","params":{"a":' + value + b'},"jsonrpc":"2.0","id":"t"}'
    pair.server.receive_message(body, now=0.0)
    assert [loads(p)["id"] for p in pair.server.data_to_send()] == ["t"]


@pytest.mark.parametrize(
    "value", UNREADABLE_VALUES, ids=["1e400", "400-digits", "surrogate", "deep"]
)
def test_an_unreadable_answer_ends_its_request_with_an_error(value: bytes) -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    other = pair.client.send_request("tools/call", {"name": "u"}, now=0.0)
    pair.client.data_to_send()
    body = b'{"jsonrpc":"2.0","id":%s,"result":{"a":%s}}' % (dumps(rid), value)
    (error,) = pair.client.receive_message(body, now=0.0)
    assert isinstance(error, ErrorReceived) and error.request_id == rid
    assert error.error.code == ErrorCode.INTERNAL_ERROR
    assert error.error.message.startswith("Parse error: ")
    assert pair.client.data_to_send() == []  # nothing said to the server about it
    assert list(pair.client.pending_requests()) == [other]


def test_an_unreadable_request_reusing_an_id_in_flight_is_answered_with_null() -> None:
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "slow"}, now=0.0)
    (received,) = pair.deliver(pair.client)
    assert isinstance(received, RequestReceived)
    body = b'{"jsonrpc":"2.0","id":%s,"method":"x","params":{"a":1e400}}' % dumps(
        received.request_id
    )
    pair.server.receive_message(body, now=0.0)
    (out,) = [loads(p) for p in pair.server.data_to_send()]
    assert out["id"] is None  # not an answer to the request in flight


def test_garbage_is_still_a_parse_error_with_a_null_id() -> None:
    server = ready_pair().server
    for junk in (b"{nope", b"", b"\xff", b'{"jsonrpc":"2.0","method":"x","params":{"a":1e400}}'):
        server.receive_message(junk, now=0.0)
        (out,) = [loads(p) for p in server.data_to_send()]
        assert out["id"] is None and out["error"]["code"] == ErrorCode.PARSE_ERROR


# ---------------------------------------------------------------- byte streams


def test_receive_bytes_one_at_a_time_and_whole() -> None:
    msgs = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(5)]
    stream = b"".join(dumps(m) + b"\n" for m in msgs)
    whole = Connection("server", ConnectionConfig())
    whole.receive_bytes(stream, now=0.0)
    bytewise = Connection("server", ConnectionConfig())
    for i in range(len(stream)):
        bytewise.receive_bytes(stream[i : i + 1], now=0.0)
    assert whole.bytes_to_send() == bytewise.bytes_to_send()
    assert bytewise.bytes_to_send() == b""


def test_receive_bytes_oversize_line_resynchronises() -> None:
    server = Connection("server", ConnectionConfig(max_message_size=64))
    events = server.receive_bytes(
        b"x" * 200 + b"\n" + dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + b"\n", now=0.0
    )
    assert isinstance(events[0], InvalidMessageReceived)
    out = [loads(line) for line in server.bytes_to_send().splitlines()]
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert out[1] == {"jsonrpc": "2.0", "id": 1, "result": {}}


# ---------------------------------------------------------------- cancellation


def test_client_cancels_and_server_answer_is_dropped() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "slow"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.client.cancel_request(rid, "user gave up")
    cancelled = only(pair.deliver(pair.client), RequestCancelled)
    assert (cancelled.request_id, cancelled.reason) == (req.request_id, "user gave up")
    pair.server.send_result(req.request_id, {"content": []})  # silently dropped
    assert pair.server.data_to_send() == []
    assert pair.server.inflight_requests() == ()
    validate_wire(pair, "2025-11-25")


def test_a_cancelled_requests_progress_does_not_outlive_it() -> None:
    # The peer cancels a request that had progress; a later request reusing its id
    # starts its own progress afresh.
    pair = ready_pair()
    token = {"_meta": {"progressToken": "t"}}
    rid = pair.client.send_request("tools/list", token, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.server.send_progress(req.request_id, 5)
    pair.client.cancel_request(rid)
    only(pair.deliver(pair.client), RequestCancelled)
    pair.server.send_result(req.request_id, {"tools": []})  # dropped: cancelled
    pair.server.data_to_send()
    feed(
        pair.server,
        {"jsonrpc": "2.0", "id": req.request_id, "method": "tools/list", "params": token},
    )
    assert pair.server.send_progress(req.request_id, 1)  # not "must increase (1 after 5)"


def _call(rid: int | str, name: str = "x") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name}}


def _cancel(rid: int | str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


def test_a_cancelled_requests_late_answer_is_dropped_however_late() -> None:
    # The answer is dropped silently however many other requests the peer cancels
    # meanwhile: the request stays known until it is answered (no remembered_ids window).
    pair = ready_pair(remembered_ids=4)
    server = pair.server
    feed(server, {**_call("slow"), "params": {"name": "slow", "_meta": {"progressToken": 1}}})
    feed(server, _cancel("slow"))
    for rid in range(10):  # more than remembered_ids, each answered
        feed(server, _call(rid))
        feed(server, _cancel(rid))
        server.send_error(rid, -32603, "late")
    assert server.send_progress("slow", 1.0) is False
    server.send_result("slow", {"content": []})
    assert server.data_to_send() == []
    with pytest.raises(LocalProtocolError, match="no request 'slow' awaits an answer"):
        server.send_result("slow", {"content": []})  # once answered, it is gone


def test_a_cancelled_request_holds_its_place_until_answered() -> None:
    # max_inflight_requests bounds the peer's requests in flight *and* those it
    # cancelled that are not answered yet: the table of the latter cannot grow past it.
    pair = ready_pair(max_inflight_requests=2)
    server = pair.server
    feed(server, _call(1))
    feed(server, _cancel(1))
    feed(server, _call(2))
    events, out = feed(server, _call(3))  # over the bound: 1 still holds its place
    assert out[0]["id"] == 3 and out[0]["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert "Too many requests in flight" in out[0]["error"]["message"]
    server.send_result(1, {"content": []})  # dropped; its place is free
    assert server.data_to_send() == []
    events, out = feed(server, _call(3))
    assert only(events, RequestReceived).request_id == 3 and out == []


def test_a_cancelled_unanswered_id_is_not_reused() -> None:
    # Until its (dropped) answer comes, a new request under the cancelled one's id would
    # get that answer: it is refused as a duplicate (the fast path defers to the other).
    pair = ready_pair()
    server = pair.server
    feed(server, _call(1))
    feed(server, _cancel(1))
    events, out = feed(server, _call(1))
    assert out[0]["error"]["message"] == "Duplicate request id 1"
    assert server.inflight_requests() == ()
    server.send_result(1, {"content": []})  # the cancelled one's: dropped
    events, out = feed(server, _call(1))
    assert only(events, RequestReceived).request_id == 1 and out == []


def test_answers_to_requests_abandoned_by_a_close_are_dropped() -> None:
    pair = ready_pair(remembered_ids=2)
    server = pair.server
    for rid in range(5):
        feed(server, _call(rid))
    (closed,) = server.receive_eof()
    assert isinstance(closed, ConnectionClosed) and closed.abandoned == (0, 1, 2, 3, 4)
    for rid in range(5):  # more than remembered_ids: all are still known
        server.send_result(rid, {"content": []})
    assert server.data_to_send() == []


def test_server_cancels_its_request_to_the_client() -> None:
    pair = ready_pair()
    rid = pair.server.send_request("roots/list", now=0.0)
    req = only(pair.deliver(pair.server), RequestReceived)
    pair.server.cancel_request(rid)
    assert only(pair.deliver(pair.server), RequestCancelled).request_id == req.request_id
    pair.client.send_error(req.request_id, -32603, "late")
    assert pair.client.data_to_send() == []


def test_cancel_unknown_request_raises() -> None:
    pair = ready_pair()
    with pytest.raises(LocalProtocolError):
        pair.client.cancel_request(42)


def test_cancel_for_initialize_or_unknown_is_ignored_by_receiver() -> None:
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
    events, out = feed(
        server,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}},
    )
    assert events == [] and out == []


# ---------------------------------------------------------------- progress


def test_progress_ties_to_request_and_must_increase() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.progress_token == rid
    assert pair.server.has_progress_token(req.request_id)
    assert pair.server.send_progress(req.request_id, 1, 10, "one")
    with pytest.raises(LocalProtocolError, match="increase"):
        pair.server.send_progress(req.request_id, 1)
    assert pair.server.send_progress(req.request_id, 2.5)
    events = [e for e in pair.deliver(pair.server) if isinstance(e, ProgressReceived)]
    assert [(e.request_id, e.progress, e.total, e.message) for e in events] == [
        (rid, 1, 10, "one"),
        (rid, 2.5, None, None),
    ]
    pair.server.send_result(req.request_id, {"content": []})
    with pytest.raises(LocalProtocolError, match="not in flight"):
        pair.server.send_progress(req.request_id, 3)
    pair.deliver(pair.server)
    # a progress notification after completion is ignored by the client
    events, _ = feed(
        pair.client,
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": rid, "progress": 9},
        },
    )
    assert events == []
    validate_wire(pair, "2025-11-25")


def test_progress_without_token_sends_nothing() -> None:
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert not pair.server.send_progress(req.request_id, 1)
    assert pair.server.data_to_send() == []


def test_progress_params_are_not_mutated() -> None:
    pair = ready_pair()
    params: dict[str, Any] = {"name": "t", "_meta": {"traceparent": "00-abc"}}
    pair.client.send_request("tools/call", params, progress=True, now=0.0)
    assert params == {"name": "t", "_meta": {"traceparent": "00-abc"}}
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.params is not None
    assert req.params["_meta"]["traceparent"] == "00-abc"


# ---------------------------------------------------------------- timers


def test_timeout_cancels_and_reports() -> None:
    pair = ready_pair()
    client = pair.client
    assert client.next_deadline() is None
    rid = client.send_request("tools/call", {"name": "t"}, now=100.0, timeout=5.0)
    assert client.next_deadline() == 105.0
    assert client.handle_timer(104.9) == []
    events = client.handle_timer(105.0)
    assert events == [RequestTimedOut(request_id=rid, method="tools/call")]
    sent = [loads(p) for p in client.data_to_send()]
    assert sent[-1]["method"] == "notifications/cancelled"
    assert sent[-1]["params"] == {"requestId": rid, "reason": "timeout"}
    assert client.next_deadline() is None
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
    assert only(events, ResponseIgnored).reason == "late"


def test_progress_resets_timeout_up_to_the_maximum_total() -> None:
    pair = handshaken("legacy", request_timeout=5.0, max_request_time=12.0)
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.client.next_deadline() == 5.0
    pair.server.send_progress(req.request_id, 1)
    assert isinstance(pair.deliver(pair.server, now=4.0)[0], ProgressReceived)
    assert pair.client.next_deadline() == 9.0
    pair.server.send_progress(req.request_id, 2)
    pair.deliver(pair.server, now=8.0)
    assert pair.client.next_deadline() == 12.0  # capped by max_request_time
    assert pair.client.handle_timer(12.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_progress_resets_a_per_request_timeout() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0, timeout=5.0, progress=True)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_progress(req.request_id, 1)
    pair.deliver(pair.server, now=4.0)
    assert pair.client.next_deadline() == 9.0
    assert pair.client.handle_timer(9.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_progress_never_brings_a_deadline_nearer() -> None:
    # A driver that gives the time to send_request but not to receive_message (where it
    # defaults to 0) re-armed the timer at 0 + timeout: long past on a real clock, so
    # the request timed out at the next tick. Progress only ever moves it later.
    pair = ready_pair()
    client = pair.client
    client.send_request("tools/call", {"name": "t"}, now=1000.0, timeout=5.0, progress=True)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_progress(req.request_id, 1)
    pair.deliver(pair.server)  # (no now=)
    assert client.next_deadline() == 1005.0
    pair.server.send_progress(req.request_id, 2)
    pair.deliver(pair.server, now=1003.0)
    assert client.next_deadline() == 1008.0


@pytest.mark.parametrize("call", ["start", "send_request", "restart_session", "retry"])
def test_the_calls_that_start_a_timer_need_the_time(call: str) -> None:
    # A default of 0.0 timed the era probe out at once under a real clock (a README
    # example called start() without it): the time is a required keyword now.
    conn = Connection("client", ConnectionConfig())
    method = {
        "start": conn.start,
        "send_request": lambda: conn.send_request("ping"),  # type: ignore[call-arg]
        "restart_session": conn.restart_session,
        "retry": lambda: conn.retry_with_input(1, {}),  # type: ignore[call-arg]
    }[call]
    with pytest.raises(TypeError, match="now"):
        method()  # type: ignore[operator]


def test_the_timer_heap_stays_bounded_under_an_early_live_deadline() -> None:
    # Stale entries leave the heap from its top only: under request A's earlier deadline,
    # each progress notification re-arming B (and each quick request answered) left one.
    pair = ready_pair()
    client = pair.client
    a = client.send_request("tools/call", {"name": "a"}, now=0.0, timeout=30.0)
    b = client.send_request("tools/call", {"name": "b"}, now=1.0, timeout=30.0, progress=True)
    (_req_a, req_b) = [e for e in pair.deliver(pair.client) if isinstance(e, RequestReceived)]
    for i in range(1, 2_001):
        pair.server.send_progress(req_b.request_id, i)
        pair.deliver(pair.server, now=1.0 + i / 1000)
        quick = client.send_request("ping", now=2.0, timeout=30.0)
        assert pair.deliver(pair.client) == []  # the server's core answers ping itself
        pair.deliver(pair.server, now=2.0)
        assert quick not in client.pending_requests()
        assert len(client._timers) <= 2 * len(client.pending_requests()) + 65
    assert client.next_deadline() == 30.0  # A's, untouched
    assert client.handle_timer(30.0) == [RequestTimedOut(request_id=a, method="tools/call")]
    assert client.next_deadline() == pytest.approx(33.0)  # B's, re-armed at its last progress
    assert b in client.pending_requests()


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.nan, -math.inf])
def test_a_request_timeout_is_more_than_0_seconds(bad: float) -> None:
    # 0 left no time for an answer: the request raced its own timer (an answer read
    # before the binding ran handle_timer came back, one read after timed out).
    pair = ready_pair()
    said = f"timeout must be more than 0 seconds (or None for no timeout), not {bad!r}"
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        pair.client.send_request("tools/call", {"name": "t"}, timeout=bad, now=0.0)
    assert pair.client.pending_requests() == () and pair.client.data_to_send() == []
    for field in ("request_timeout", "max_request_time"):
        kwargs: dict[str, Any] = {field: bad}
        with pytest.raises(ValueError, match=f"^{field} must be more than 0 seconds"):
            ConnectionConfig(**kwargs)
    assert pair.client.send_request("tools/call", {"name": "t"}, timeout=0.5, now=5.0)
    assert pair.client.next_deadline() == 5.5


@pytest.mark.parametrize("bad", [-1.0, math.nan, -math.inf])
def test_a_probe_timeout_is_0_or_more_seconds(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^probe_timeout must be 0 or more seconds"):
        ConnectionConfig(probe_timeout=bad)
    assert ConnectionConfig(probe_timeout=0).probe_timeout == 0  # (falls back at once)


def test_a_timeout_that_is_no_number_is_a_type_error_naming_it() -> None:
    # (was Python's "'>=' not supported between instances of 'str' and 'int'")
    pair = ready_pair()
    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds .*, not str '5'$"):
        pair.client.send_request("tools/call", {"name": "t"}, timeout="5", now=0.0)  # type: ignore[arg-type]
    assert pair.client.pending_requests() == () and pair.client.data_to_send() == []
    for field in ("request_timeout", "max_request_time", "probe_timeout"):
        kwargs: dict[str, Any] = {field: "5"}
        with pytest.raises(TypeError, match=f"^{field} must be a number of seconds"):
            ConnectionConfig(**kwargs)


@pytest.mark.parametrize("how", ["capped", "same-tick"])
def test_re_arming_to_the_same_deadline_adds_no_timer(how: str) -> None:
    # Progress under max_request_time's cap, or several in one read (one `now`), re-arm
    # a request to the deadline it has: no new heap entry (they used to pile up, each
    # one looking live, and every later arm scanned them all).
    pair = handshaken(
        "legacy", request_timeout=5.0, max_request_time=10.0 if how == "capped" else None
    )
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True)
    req = only(pair.deliver(pair.client), RequestReceived)
    for i in range(1, 5_001):
        pair.server.send_progress(req.request_id, i)
        pair.deliver(pair.server, now=8.0 if how == "capped" else 3.0)
    assert len(pair.client._timers) <= 3  # (the handshake's stale entries, and this one)
    expected = 10.0 if how == "capped" else 8.0
    assert pair.client.next_deadline() == expected
    assert pair.client.handle_timer(expected) == [
        RequestTimedOut(request_id=rid, method="tools/call")
    ]


def test_an_infinite_timeout_is_no_deadline() -> None:
    # next_deadline says None for never, not an infinite time (which blocking waits
    # such as select() cannot take).
    pair = ready_pair()
    pair.client.send_request("tools/call", {"name": "t"}, timeout=math.inf, now=0.0)
    assert pair.client.next_deadline() is None
    assert pair.client._timers == []


def test_default_request_timeout_applies() -> None:
    client = Connection("client", ConnectionConfig(era="legacy", request_timeout=3.0))
    client.start(now=10.0)
    assert client.next_deadline() == 13.0
    events = client.handle_timer(13.0)
    assert isinstance(events[0], RequestTimedOut)
    # initialize is never cancelled on the wire
    assert [loads(p)["method"] for p in client.data_to_send()] == ["initialize"]


# ---------------------------------------------------------------- logging


def test_set_level_is_handled_by_the_core_and_filters_logs() -> None:
    pair = ready_pair()
    assert pair.server.send_log("debug", "all levels before setLevel")
    pair.client.send_request("logging/setLevel", {"level": "warning"}, now=0.0)
    c, s = pair.exchange()
    assert s == []
    assert isinstance(c[0], NotificationReceived)
    assert isinstance(c[1], ResultReceived)
    assert not pair.server.send_log("info", "filtered")
    assert pair.server.send_log("error", {"x": 1}, logger="db")
    note = only(pair.deliver(pair.server), NotificationReceived)
    assert note.params == {"level": "error", "data": {"x": 1}, "logger": "db"}
    with pytest.raises(LocalProtocolError):
        pair.server.send_log("loud", "x")
    _, out = feed(
        pair.server,
        {"jsonrpc": "2.0", "id": 50, "method": "logging/setLevel", "params": {"level": "x"}},
    )
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    validate_wire(pair, "2025-11-25")


def test_no_logs_without_logging_capability() -> None:
    pair = ready_pair(capabilities={"tools": {}})
    assert not pair.server.send_log("error", "x")


# ---------------------------------------------------------------- notifications


def test_list_changed_needs_the_capability() -> None:
    pair = ready_pair(capabilities={"tools": {}})
    with pytest.raises(LocalProtocolError):
        pair.server.send_notification("notifications/tools/list_changed")
    pair2 = ready_pair()
    pair2.server.send_notification("notifications/tools/list_changed")
    assert only(pair2.deliver(pair2.server), NotificationReceived).method == (
        "notifications/tools/list_changed"
    )
    pair2.client.send_notification("notifications/roots/list_changed")
    assert only(pair2.deliver(pair2.client), NotificationReceived)
    validate_wire(pair2, "2025-11-25")


def test_progress_and_cancel_have_their_own_methods() -> None:
    pair = ready_pair()
    with pytest.raises(LocalProtocolError):
        pair.client.send_notification("notifications/cancelled", {"requestId": 1})
    with pytest.raises(LocalProtocolError):
        pair.client.send_notification("notifications/progress", {})


# ---------------------------------------------------------------- batching


def batch_pair() -> ConnectionPair:
    return ready_pair("2025-03-26")


def test_batch_is_answered_as_one_array() -> None:
    pair = batch_pair()
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": 3, "method": "nope/none", "params": [1]},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "x"}},
    ]
    events, out = feed(pair.server, batch)
    assert out == []  # waits for the application's answers
    reqs = [e for e in events if isinstance(e, RequestReceived)]
    assert [r.request_id for r in reqs] == [1, 4]
    pair.server.send_result(1, {"tools": []})
    assert pair.server.data_to_send() == []
    pair.server.send_result(4, {"content": []})
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    assert sorted(r["id"] for r in reply) == [1, 2, 3, 4]
    validate_wire(pair, "2025-03-26")
    validate_message("2025-03-26", reply)


def test_batch_of_notifications_gets_nothing_back() -> None:
    pair = batch_pair()
    _, out = feed(
        pair.server,
        [{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}] * 2,
    )
    assert out == []


def test_batch_rules() -> None:
    pair = batch_pair()
    _, out = feed(pair.server, [])
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    _, out = feed(
        pair.server,
        [
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {}},
            }
        ],
    )
    assert out[0][0]["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert "batch" in out[0][0]["error"]["message"]


def test_batch_size_is_bounded() -> None:
    pair = ready_pair("2025-03-26", max_batch_size=3)
    _, out = feed(pair.server, [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(4)])
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("receiver", ["client", "server"])
def test_answers_in_a_refused_batch_end_their_requests(receiver: str) -> None:
    # The batch is refused whole (one -32600, id null, for its requests, from a server;
    # a client answers nothing without an id), but every request must get exactly one
    # answer: those it answered end with -32603, or they would wait forever (no
    # timeout) for an answer that already came.
    pair = ready_pair("2025-11-25")
    conn = pair.client if receiver == "client" else pair.server
    method = "tools/list" if receiver == "client" else "roots/list"
    a, b, c = (conn.send_request(method, now=0.0) for _ in range(3))
    conn.data_to_send()
    batch = [
        {"jsonrpc": "2.0", "id": a, "result": {"tools": [], "roots": []}},
        {"jsonrpc": "2.0", "id": b, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "id": a, "result": {}},  # (twice: it ended already)
        {"jsonrpc": "2.0", "id": 99, "method": "ping"},
        {"jsonrpc": "2.0", "id": "unknown", "result": {}},
        {"jsonrpc": "2.0", "id": True, "result": {}},
        "junk",
    ]
    events, out = feed(conn, batch)
    refusal = {
        "code": ErrorCode.INVALID_REQUEST,
        "message": "Invalid Request: batches are allowed only in protocol version 2025-03-26",
    }
    reported = only(events, InvalidMessageReceived)
    assert (reported.request_id, reported.error.code) == (None, refusal["code"])
    assert reported.error.message == refusal["message"]
    answered = [{"jsonrpc": "2.0", "id": None, "error": refusal}]
    assert out == ([] if receiver == "client" else answered)
    errors = [e for e in events if isinstance(e, ErrorReceived)]
    assert [(e.request_id, e.method, e.error.code) for e in errors] == [
        (a, method, ErrorCode.INTERNAL_ERROR),
        (b, method, ErrorCode.INTERNAL_ERROR),
    ]
    assert errors[0].error.message == (
        "Answered in a batch, which protocol version 2025-11-25 does not allow "
        "(only 2025-03-26 allows batches)"
    )
    assert conn.pending_requests() == (c,)  # (not answered: still waiting)


def test_answers_in_an_oversize_batch_end_their_requests() -> None:
    pair = ready_pair("2025-03-26", max_batch_size=3)
    ids = [pair.server.send_request("ping", now=0.0) for _ in range(4)]
    pair.server.data_to_send()
    events, out = feed(pair.server, [{"jsonrpc": "2.0", "id": i, "result": {}} for i in ids])
    assert [m["error"]["code"] for m in out] == [ErrorCode.INVALID_REQUEST]
    errors = [e for e in events if isinstance(e, ErrorReceived)]
    assert [e.request_id for e in errors] == ids
    assert errors[0].error.message == "Answered in a batch larger than 3, refused whole"
    assert pair.server.pending_requests() == ()


def test_an_initialize_answered_in_a_batch_fails_the_handshake() -> None:
    pair = legacy_pair("2025-03-26")
    pair.client.start(now=0.0)
    (sent,) = [loads(p) for p in pair.client.data_to_send()]
    pair.server.receive_message(dumps(sent), now=0.0)
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    events, _ = feed(pair.client, [reply])
    error = only(events, ErrorReceived)
    assert (error.request_id, error.method) == (sent["id"], "initialize")
    assert error.error.message == (
        "Answered in a batch, before a protocol version was agreed (only 2025-03-26 allows batches)"
    )
    assert pair.client.lifecycle is not LifecycleState.READY


def test_cancelled_request_leaves_the_batch() -> None:
    pair = batch_pair()
    feed(
        pair.server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ],
    )
    feed(
        pair.server,
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}},
    )
    pair.server.send_result(1, {"tools": []})
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    assert [r["id"] for r in reply] == [1]


def test_duplicate_id_within_a_batch() -> None:
    pair = batch_pair()
    _, _out = feed(
        pair.server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        ],
    )
    pair.server.send_result(1, {"tools": []})
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    assert sorted(("error" in r) for r in reply) == [False, True]


# ---------------------------------------------------------------- close


def test_eof_lists_unanswered_requests_and_answers_are_dropped() -> None:
    pair = ready_pair()
    a = pair.client.send_request("tools/list", now=0.0)
    b = pair.client.send_request("tools/call", {"name": "x"}, now=0.0)
    pair.deliver(pair.client)
    (closed,) = pair.client.receive_eof()
    assert closed == ConnectionClosed(unanswered=(a, b), abandoned=())
    assert pair.client.closed
    assert pair.client.receive_eof() == []
    with pytest.raises(LocalProtocolError):
        pair.client.send_request("tools/list", now=0.0)
    (sclosed,) = pair.server.receive_eof()
    assert isinstance(sclosed, ConnectionClosed)
    assert sorted(map(str, sclosed.abandoned)) == sorted(map(str, [a, b]))
    pair.server.send_result(a, {"tools": []})  # dropped, no crash
    assert pair.server.data_to_send() == []
    assert pair.server.lifecycle is LifecycleState.CLOSED


def test_send_failed_closes() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/list", now=0.0)
    (closed,) = pair.client.send_failed()
    assert closed == ConnectionClosed(unanswered=(rid,))
    assert pair.client.receive_message(b"{}", now=0.0) == []


def test_half_close_keeps_answering_the_requests_in_flight() -> None:
    """stdio's shutdown: the client closes the server's input and reads on."""
    pair = ready_pair()
    slow = pair.client.send_request("tools/call", {"name": "slow"}, progress=True, now=0.0)
    other = pair.client.send_request("tools/list", now=0.0)
    pair.deliver(pair.client)
    asked = pair.server.send_request("roots/list", now=0.0)  # the server's own, never answered now
    (closed,) = pair.server.receive_eof(keep_answering=True)
    assert closed == ConnectionClosed(unanswered=(asked,), abandoned=())
    assert pair.server.closed and pair.server.lifecycle is LifecycleState.CLOSED
    assert pair.server.receive_message(b'{"jsonrpc":"2.0","id":99,"method":"ping"}', now=0.0) == []
    with pytest.raises(LocalProtocolError):
        pair.server.send_request("roots/list", now=0.0)  # nothing could answer it
    with pytest.raises(LocalProtocolError):
        pair.server.send_notification("notifications/tools/list_changed")
    assert not pair.server.send_log("info", "session-wide")  # only about a request in flight
    pair.server.data_to_send()  # (the roots/list request went out before the eof)
    assert pair.server.send_progress(slow, 1)
    assert pair.server.send_log("info", "about it", request_id=slow)
    pair.server.send_result(other, {"tools": []})
    client_events = pair.deliver(pair.server)
    assert [type(e).__name__ for e in client_events] == [
        "ProgressReceived",
        "NotificationReceived",
        "ResultReceived",
    ]
    # The binding gives up on the rest: the second close abandons it.
    (ended,) = pair.server.receive_eof()
    assert ended == ConnectionClosed(unanswered=(), abandoned=(slow,))
    pair.server.send_result(slow, {"content": []})  # dropped, no crash
    assert pair.server.data_to_send() == []
    assert not pair.server.send_log("info", "late", request_id=slow)
    assert pair.server.receive_eof() == []


def test_half_close_with_nothing_in_flight_is_a_close() -> None:
    pair = ready_pair()
    (closed,) = pair.server.receive_eof(keep_answering=True)
    assert closed == ConnectionClosed(unanswered=())
    assert pair.server.receive_eof() == []


def test_a_failed_write_ends_a_half_close() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/list", now=0.0)
    pair.deliver(pair.client)
    pair.server.receive_eof(keep_answering=True)
    (ended,) = pair.server.send_failed()
    assert ended == ConnectionClosed(unanswered=(), abandoned=(rid,))
    pair.server.send_error(rid, -32603, "too late")  # dropped
    assert pair.server.data_to_send() == []


def test_a_second_half_close_changes_nothing() -> None:
    pair = ready_pair()
    rid = pair.client.send_request("tools/list", now=0.0)
    pair.deliver(pair.client)
    pair.server.receive_eof(keep_answering=True)
    assert pair.server.receive_eof(keep_answering=True) == []
    assert pair.server.inflight_requests() == (rid,)


def test_the_end_of_a_half_close_sends_the_partial_batch_of_answers() -> None:
    pair = ready_pair("2025-03-26")
    feed(
        pair.server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "ping"},
        ],
    )
    pair.server.receive_eof(keep_answering=True)
    pair.server.send_result(1, {"tools": []})
    assert pair.server.data_to_send() == []  # waiting for id 2
    (ended,) = pair.server.receive_eof()
    assert ended == ConnectionClosed(unanswered=(), abandoned=(2,))
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    assert sorted(r["id"] for r in reply) == [1, 3]  # given answers are not lost


def test_a_failed_write_during_a_half_close_sends_nothing_more() -> None:
    pair = ready_pair("2025-03-26")
    feed(
        pair.server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ],
    )
    pair.server.receive_eof(keep_answering=True)
    pair.server.send_result(1, {"tools": []})
    (ended,) = pair.server.send_failed()
    assert ended == ConnectionClosed(unanswered=(), abandoned=(2,))
    assert pair.server.data_to_send() == []  # the transport is broken


def test_an_unterminated_last_line_is_a_message() -> None:
    pair = ready_pair()
    events = pair.server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0)
    assert events == []  # no newline yet
    (event,) = pair.server.receive_bytes_eof(now=0.0)
    assert isinstance(event, RequestReceived) and event.request_id == 7
    assert pair.server.receive_bytes_eof(now=0.0) == []  # once
    with pytest.raises(LocalProtocolError):
        pair.server.receive_bytes(b"{}\n", now=0.0)  # the stream is over
    pair.server.receive_eof()
    assert pair.server.receive_bytes_eof(now=0.0) == []


@pytest.mark.parametrize("keep_answering", [False, True])
def test_receive_eof_takes_an_unterminated_last_line_first(keep_answering: bool) -> None:
    # receive_eof() alone lost it silently: only receive_bytes_eof() first delivered it.
    pair = ready_pair()
    server = pair.server
    assert server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0) == []
    request, closed = server.receive_eof(now=0.0, keep_answering=keep_answering)
    assert isinstance(request, RequestReceived) and request.request_id == 7
    assert isinstance(closed, ConnectionClosed)
    if keep_answering:
        server.send_result(7, {"tools": []})
        assert [loads(p)["id"] for p in server.data_to_send()] == [7]
    else:
        assert closed.abandoned == (7,)
    assert server.receive_bytes_eof(now=0.0) == []  # taken once


@pytest.mark.parametrize(
    ("line", "reply"),
    [
        (b'{"jsonrpc":"2.0","id":9,"method":"ping"}', (9, None)),
        (b'{"jsonrpc":', (None, ErrorCode.PARSE_ERROR)),
        (b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}', (3, ErrorCode.INVALID_REQUEST)),
    ],
)
@pytest.mark.parametrize("mode", ["abandon", "keep_answering", "fail_inflight"])
def test_receive_eof_sends_nothing_for_the_last_line_unless_the_output_goes_on(
    line: bytes, reply: tuple[Any, Any], mode: str
) -> None:
    # The core answers a ping, an invalid line and a duplicate id by itself; a plain
    # receive_eof() (abandon: nothing more is sent) queued that reply all the same.
    # What was queued before the call stays to be drained.
    server = ready_pair().server
    feed(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    server.receive_message(dumps({"jsonrpc": "2.0", "id": 4, "method": "ping"}), now=0.0)  # queued
    assert server.receive_bytes(line, now=0.0) == []
    if mode == "fail_inflight":
        server.receive_eof(now=0.0, fail_inflight=(ErrorCode.INTERNAL_ERROR, "bye"))
    else:
        server.receive_eof(now=0.0, keep_answering=mode == "keep_answering")
    sent = [
        (m["id"], m["error"]["code"] if "error" in m else None)
        for m in map(loads, server.data_to_send())
    ]
    assert sent[0] == (4, None)  # the ping answered before the call
    assert (reply in sent) is (mode != "abandon"), sent


def test_receive_eof_after_receive_bytes_eof_takes_nothing_twice() -> None:
    server = ready_pair().server
    server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0)
    (request,) = server.receive_bytes_eof(now=0.0)
    assert isinstance(request, RequestReceived)
    (closed,) = server.receive_eof()
    assert closed == ConnectionClosed(unanswered=(), abandoned=(7,))


def test_a_refused_receive_eof_takes_no_last_line() -> None:
    server = ready_pair().server
    server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0)
    with pytest.raises(ValueError, match="keep_answering"):
        server.receive_eof(keep_answering=True, fail_inflight=(-32603, "bye"))
    assert server.inflight_requests() == () and not server.closed  # no state changed
    (request,) = server.receive_bytes_eof(now=0.0)
    assert isinstance(request, RequestReceived)


@pytest.mark.parametrize("error", [(True, "bye"), (-32603.0, "bye"), (-32603, None)])
@pytest.mark.parametrize("inflight", [False, True])
def test_a_fail_inflight_error_that_cannot_be_sent_is_refused_first(
    error: tuple[Any, Any], inflight: bool
) -> None:
    # send_error's rule (a code that is an int, no bool; a message that is a str),
    # checked before anything: it raised only with a request in flight (a TypeError,
    # after taking the last line), and an idle server closed with it unnoticed.
    server = ready_pair().server
    if inflight:
        feed(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0)
    with pytest.raises(LocalProtocolError, match="code is an int"):
        server.receive_eof(now=0.0, fail_inflight=error)
    assert server.inflight_requests() == ((3,) if inflight else ()) and not server.closed
    assert server.data_to_send() == []
    request, closed = server.receive_eof(now=0.0, fail_inflight=(ErrorCode.INTERNAL_ERROR, "bye"))
    assert isinstance(request, RequestReceived) and request.request_id == 7
    assert closed == ConnectionClosed(unanswered=(), abandoned=(*((3,) if inflight else ()), 7))


def test_send_failed_takes_no_last_line() -> None:
    # The output is broken: a request nobody can answer is not delivered.
    server = ready_pair().server
    server.receive_bytes(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', now=0.0)
    assert server.send_failed() == [ConnectionClosed(unanswered=(), abandoned=())]


def test_an_unterminated_oversize_last_line_is_refused() -> None:
    config = ConnectionConfig(implementation={"name": "s", "version": "1"}, max_message_size=64)
    server = Connection("server", config)
    start = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * 50
    assert server.receive_bytes(start, now=0.0) == []  # too long: dropped, the rest skipped...
    assert server.data_to_send() == []
    (event,) = server.receive_bytes_eof(now=0.0)  # ...and refused where it ends
    assert isinstance(event, InvalidMessageReceived) and event.request_id == 1
    (answer,) = [loads(p) for p in server.data_to_send()]
    assert (answer["id"], answer["error"]["code"]) == (1, ErrorCode.INVALID_REQUEST)
    assert server.receive_bytes_eof(now=0.0) == []


def test_half_close_finishes_a_batch_in_flight() -> None:
    pair = ready_pair("2025-03-26")
    feed(
        pair.server,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        ],
    )
    pair.server.receive_eof(keep_answering=True)
    assert pair.server.data_to_send() == []  # the batch waits for its last answer
    pair.server.send_result(1, {"tools": []})
    (reply,) = [loads(p) for p in pair.server.data_to_send()]
    assert sorted(r["id"] for r in reply) == [1, 2]


def test_a_close_can_answer_the_requests_in_flight_first() -> None:
    """A server shutting down: the peer's requests get an error rather than nothing, and
    their handlers are abandoned as by any close (a late answer is dropped)."""
    pair = ready_pair()
    slow = pair.client.send_request("tools/call", {"name": "slow"}, now=0.0)
    other = pair.client.send_request("tools/list", now=0.0)
    pair.deliver(pair.client)
    with pytest.raises(ValueError, match="keep_answering"):
        pair.server.receive_eof(keep_answering=True, fail_inflight=(-32603, "bye"))
    (closed,) = pair.server.receive_eof(fail_inflight=(-32603, "server shutting down"))
    assert closed == ConnectionClosed(unanswered=(), abandoned=(slow, other))
    pair.server.send_result(slow, {"content": []})  # dropped, no crash
    errors = pair.deliver(pair.server)
    assert all(isinstance(e, ErrorReceived) for e in errors)
    answered = [(e.request_id, e.error.message) for e in errors if isinstance(e, ErrorReceived)]
    assert answered == [(slow, "server shutting down"), (other, "server shutting down")]
    assert pair.server.receive_eof(fail_inflight=(-32603, "again")) == []

"""The modern era (2026-07-28) and dual-era selection, through connection pairs, no I/O."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import (
    Connection,
    ConnectionClosed,
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorReceived,
    HandshakeCompleted,
    InputRequired,
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
    SubscriptionNotificationReceived,
)
from mcp_sansio._json import dumps, loads
from mcp_sansio._modern import LOG_LEVELS
from tests.schema import validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair, handshaken, validate_wire

T = TypeVar("T")
V = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
SUB = "io.modelcontextprotocol/subscriptionId"


def only(events: list[Any], cls: type[T]) -> T:
    found = [e for e in events if isinstance(e, cls)]
    assert len(found) == 1, events
    return found[0]


def modern_pair(**server_kw: Any) -> ConnectionPair:
    server = {"implementation": {"name": "s", "version": "1"}, "instructions": "hi", **server_kw}
    return handshaken("modern", implementation={"name": "c", "version": "1"}, server=server)


def modern_request(rid: Any, method: str, params: dict[str, Any] | None = None, **meta: Any) -> Any:
    m = {PV: V, CC: {}, **meta}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": m}}


def feed(conn: Connection, obj: Any, now: float = 0.0) -> tuple[list[Any], list[Any]]:
    events = conn.receive_message(dumps(obj), now=now)
    return events, [loads(p) for p in conn.data_to_send()]


# ---------------------------------------------------------------- era selection


def test_auto_client_probes_and_stays_modern() -> None:
    pair = ConnectionPair()
    client_events, server_events = pair.handshake()
    done = only(client_events, HandshakeCompleted)
    assert (done.era, done.protocol_version) == (Era.MODERN, V)
    assert done.peer_capabilities == SERVER_CAPS
    assert done.instructions == "be nice"
    assert server_events == []
    assert pair.client.era is Era.MODERN
    assert pair.server.lifecycle is LifecycleState.IDLE  # no session was made
    (probe,) = [m for s, m in pair.wire if s == "client"]
    assert probe["method"] == "server/discover"
    validate_wire(pair, V)


def test_auto_client_falls_back_to_initialize_with_a_legacy_server() -> None:
    server = ConnectionConfig(capabilities=SERVER_CAPS, era="legacy")
    pair = ConnectionPair(ConnectionConfig(capabilities=CLIENT_CAPS), server)
    client_events, server_events = pair.handshake()
    done = only(client_events, HandshakeCompleted)
    assert (done.era, done.protocol_version) == (Era.LEGACY, "2025-11-25")
    assert only(server_events, HandshakeCompleted).era is Era.LEGACY
    methods = [m.get("method") for s, m in pair.wire if s == "client"]
    assert methods == ["server/discover", "initialize", "notifications/initialized"]


def test_probe_timeout_falls_back_to_initialize() -> None:
    client = Connection("client", ConnectionConfig(probe_timeout=2.0))
    client.start(now=0.0)
    (probe,) = [loads(p) for p in client.data_to_send()]
    assert client.next_deadline() == 2.0
    assert client.handle_timer(2.0) == []
    (init,) = [loads(p) for p in client.data_to_send()]
    assert init["method"] == "initialize"
    # the late discover answer is dropped
    events, _ = feed(client, {"jsonrpc": "2.0", "id": probe["id"], "result": {}})
    assert events[0].reason == "late"


@pytest.mark.parametrize(
    ("code", "falls_back"),
    [
        (ErrorCode.METHOD_NOT_FOUND, True),
        (-32000, True),
        (ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY, False),
    ],
)
def test_probe_errors(code: int, falls_back: bool) -> None:
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    events, out = feed(
        client, {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": "x"}}
    )
    if falls_back:
        assert [m["method"] for m in out] == ["initialize"]
        assert events == []
    else:
        assert out == []
        assert only(events, ErrorReceived).method == "server/discover"


def test_unsupported_version_on_probe_retries_with_a_common_version() -> None:
    client = Connection("client", ConnectionConfig())
    rid = client.start(now=0.0)
    client.data_to_send()
    _, out = feed(
        client,
        {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": [V, "2025-11-25"], "requested": V},
            },
        },
    )
    assert out[0]["method"] == "server/discover"
    assert out[0]["params"]["_meta"][PV] == V


def test_pinned_modern_never_falls_back() -> None:
    client = Connection("client", ConnectionConfig(era="modern"))
    rid = client.start(now=0.0)
    assert client.next_deadline() is None
    client.data_to_send()
    events, out = feed(
        client, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}}
    )
    assert out == []
    assert only(events, ErrorReceived).error.code == -32601


@pytest.mark.parametrize(
    ("request_timeout", "max_request_time", "deadline"),
    [(3.0, None, 4.0), (None, 5.0, 6.0), (3.0, 2.0, 3.0)],
)
def test_a_pinned_modern_discover_times_out_as_any_request(
    request_timeout: float | None, max_request_time: float | None, deadline: float
) -> None:
    # A pinned modern client has no initialize to fall back to: its discover is bounded
    # by request_timeout (and max_request_time) as a legacy client's initialize is, and
    # its timeout is reported, else a silent server is waited for for ever.
    config = ConnectionConfig(
        era="modern", request_timeout=request_timeout, max_request_time=max_request_time
    )
    client = Connection("client", config)
    rid = client.start(now=1.0)
    (probe,) = [loads(p) for p in client.data_to_send()]
    assert probe["method"] == "server/discover"
    assert client.next_deadline() == deadline
    assert client.handle_timer(deadline - 0.5) == []
    assert client.handle_timer(deadline) == [
        RequestTimedOut(request_id=rid, method="server/discover")
    ]
    (cancel,) = [loads(p) for p in client.data_to_send()]
    assert cancel["method"] == "notifications/cancelled"
    assert cancel["params"] == {"requestId": rid, "reason": "timeout"}
    assert client.next_deadline() is None
    assert (client.era, client.lifecycle) == (None, LifecycleState.IDLE)
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": {}})
    assert events[0].reason == "late"
    # The handshake may be tried again.
    again = client.start(now=10.0)
    assert again != rid
    assert [loads(p)["method"] for p in client.data_to_send()] == ["server/discover"]


@pytest.mark.parametrize("era", ["modern", "auto"])
def test_the_discover_retried_with_a_common_version_times_out_as_any_request(
    era: Literal["modern", "auto"],
) -> None:
    # The server named its modern versions: the retry is no probe (no fallback on a
    # timeout), and request_timeout bounds it in either era.
    client = Connection("client", ConnectionConfig(era=era, request_timeout=3.0))
    rid = client.start(now=0.0)
    client.data_to_send()
    error = {"code": -32022, "message": "no", "data": {"supported": [V], "requested": V}}
    _, out = feed(client, {"jsonrpc": "2.0", "id": rid, "error": error}, now=1.0)
    [retry] = out
    assert retry["method"] == "server/discover"
    assert client.next_deadline() == 4.0
    assert client.handle_timer(4.0) == [
        RequestTimedOut(request_id=retry["id"], method="server/discover")
    ]
    assert [loads(p)["method"] for p in client.data_to_send()] == ["notifications/cancelled"]


def test_modern_only_server_refuses_initialize_naming_its_versions() -> None:
    server = Connection("server", ConnectionConfig(era="modern"))
    _, out = feed(
        server,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
        },
    )
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert V in out[0]["error"]["message"]


def test_one_channel_serves_both_eras() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    events, _ = feed(server, modern_request(1, "tools/list"))
    assert only(events, RequestReceived).era is Era.MODERN
    server.send_result(1, {"tools": []})
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["result"]["resultType"] == "complete"
    feed(
        server,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        },
    )
    feed(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    events, _ = feed(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    req = only(events, RequestReceived)
    assert (req.era, req.protocol_version) == (Era.LEGACY, "2025-06-18")
    server.send_result(3, {"tools": []})
    (out,) = [loads(p) for p in server.data_to_send()]
    assert "resultType" not in out["result"]  # legacy results are not decorated
    events, _ = feed(server, modern_request(4, "tools/list"))
    assert only(events, RequestReceived).era is Era.MODERN


# ---------------------------------------------------------------- envelope and ladder


def test_client_envelope_on_every_request() -> None:
    pair = modern_pair()
    params = {"name": "t", "_meta": {"traceparent": "00-1-2-01", "baggage": "a=b"}}
    pair.client.send_request("tools/call", params, log_level="info", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.params is not None
    meta = req.params["_meta"]
    assert meta[PV] == V
    assert meta[CC] == CLIENT_CAPS
    assert meta["io.modelcontextprotocol/clientInfo"] == {"name": "c", "version": "1"}
    assert meta["io.modelcontextprotocol/logLevel"] == "info"
    assert meta["traceparent"] == "00-1-2-01" and meta["baggage"] == "a=b"
    assert req.client_capabilities == CLIENT_CAPS
    assert params["_meta"] == {"traceparent": "00-1-2-01", "baggage": "a=b"}  # not mutated


@pytest.mark.parametrize(
    ("meta", "code"),
    [
        ({PV: V}, ErrorCode.INVALID_PARAMS),  # no clientCapabilities
        ({PV: 5, CC: {}}, ErrorCode.INVALID_PARAMS),
        ({PV: V, CC: []}, ErrorCode.INVALID_PARAMS),
        ({PV: "2030-01-01", CC: {}}, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
        ({PV: "2025-11-25", CC: {}}, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
    ],
)
def test_validation_ladder(meta: dict[str, Any], code: int) -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(
        server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    )
    assert out[0]["error"]["code"] == code
    if code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION:
        assert out[0]["error"]["data"]["requested"] == meta[PV]
        assert V in out[0]["error"]["data"]["supported"]
    validate_message(V, out[0])


@pytest.mark.parametrize(
    "method", ["ping", "logging/setLevel", "resources/subscribe", "initialize"]
)
def test_removed_methods_are_not_found(method: str) -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    _, out = feed(server, modern_request(1, method, {"uri": "x", "level": "info"}))
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND


def test_modern_capability_gating() -> None:
    server = Connection("server", ConnectionConfig(capabilities={"tools": {}}))
    _, out = feed(server, modern_request(1, "prompts/list"))
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    pair = modern_pair(capabilities={"tools": {}})
    with pytest.raises(LocalProtocolError, match="prompts"):
        pair.client.send_request("prompts/list", now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.client.send_request("ping", now=0.0)


def test_discover_and_results_are_decorated() -> None:
    pair = modern_pair(cache_ttl_ms=5000, cache_scope="public")
    pair.client.send_request("tools/list", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_result(req.request_id, {"tools": []})
    res = only(pair.deliver(pair.server), ResultReceived)
    assert res.result["resultType"] == "complete"
    assert res.result["ttlMs"] == 5000 and res.result["cacheScope"] == "public"
    assert res.result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "s",
        "version": "1",
    }
    pair.client.send_request("tools/call", {"name": "x", "arguments": {}}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_result(req.request_id, {"content": []})
    res = only(pair.deliver(pair.server), ResultReceived)
    assert "ttlMs" not in res.result
    validate_wire(pair, V)


def test_unknown_result_type_is_an_invalid_result() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/list", now=0.0)
    events, _ = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "weird"}})
    assert only(events, ErrorReceived).request_id == rid


def test_absent_result_type_means_complete() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/list", now=0.0)
    events, _ = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})
    assert only(events, ResultReceived).result == {"tools": []}


# ---------------------------------------------------------------- servers never send requests


def test_modern_server_cannot_send_requests_and_client_refuses_them() -> None:
    pair = modern_pair()
    with pytest.raises(LocalProtocolError, match="input-required"):
        pair.server.send_request("roots/list", now=0.0)
    events, out = feed(pair.client, {"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
    # refused, and not answered: a client MUST NOT write responses (transports/stdio)
    assert out == []
    assert only(events, InvalidMessageReceived).error.code == ErrorCode.METHOD_NOT_FOUND
    for bad in (b"{not json", b'{"jsonrpc": "2.0", "id": 2}', b"[]"):
        refused = pair.client.receive_message(bad, now=0.0)
        assert pair.client.data_to_send() == [], bad
        assert [type(e) for e in refused] == [InvalidMessageReceived], bad


# ---------------------------------------------------------------- progress, logging, cancel


def test_progress_flows_server_to_client_only() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.progress_token == rid
    assert pair.server.send_progress(req.request_id, 0.5, 1.0)
    assert only(pair.deliver(pair.server), ProgressReceived).progress == 0.5
    with pytest.raises(LocalProtocolError, match="server to client"):
        pair.client.send_progress(1, 1)
    validate_wire(pair, V)


def test_logging_only_when_the_request_asked_and_at_or_above() -> None:
    pair = modern_pair()
    pair.client.send_request("tools/call", {"name": "a"}, now=0.0)
    quiet = only(pair.deliver(pair.client), RequestReceived)
    assert not pair.server.send_log("emergency", "x", request_id=quiet.request_id)
    pair.client.send_request("tools/call", {"name": "b"}, log_level="warning", now=0.0)
    loud = only(pair.deliver(pair.client), RequestReceived)
    assert not pair.server.send_log("info", "x", request_id=loud.request_id)
    assert pair.server.send_log("error", "boom", request_id=loud.request_id)
    assert not pair.server.send_log("error", "no request")  # no legacy session either
    note = only(pair.deliver(pair.server), NotificationReceived)
    assert note.method == "notifications/message"
    validate_wire(pair, V)


def test_no_log_messages_without_the_logging_capability() -> None:
    # server/utilities/logging: servers that emit log messages MUST declare `logging`.
    caps = {k: v for k, v in SERVER_CAPS.items() if k != "logging"}
    pair = modern_pair(capabilities=caps)
    pair.client.send_request("tools/call", {"name": "b"}, log_level="debug", now=0.0)
    asked = only(pair.deliver(pair.client), RequestReceived)
    assert not pair.server.send_log("error", "boom", request_id=asked.request_id)
    assert pair.server.data_to_send() == []


def test_a_cancelled_requests_log_level_does_not_outlive_it() -> None:
    # A server that reads a cancellation forgets the request's logLevel with it: a later
    # request reusing the id without one must not be logged for.
    server = modern_pair().server
    asked = modern_request(3, "tools/list")
    asked["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
    feed(server, asked)
    feed(
        server, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}
    )
    server.send_result(3, {"tools": []})  # dropped: cancelled
    events, _ = feed(server, modern_request(3, "tools/list"))
    only(events, RequestReceived)
    assert not server.send_log("info", "x", request_id=3)


def test_cancellation_on_a_shared_channel() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.client.cancel_request(rid)
    assert only(pair.deliver(pair.client), RequestCancelled).request_id == req.request_id
    pair.server.send_result(req.request_id, {"content": []})
    assert pair.server.data_to_send() == []
    validate_wire(pair, V)


def test_forget_request_sends_nothing() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.client.data_to_send()
    pair.client.forget_request(rid)
    assert pair.client.data_to_send() == []
    events, _ = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
    assert events[0].reason == "late"


# ---------------------------------------------------------------- input required (MRTR)

ELICIT = {
    "confirm": {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Sure?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    }
}


def test_input_required_round_trip() -> None:
    pair = modern_pair()
    rid = pair.client.send_request(
        "tools/call", {"name": "delete", "arguments": {"path": "/x"}}, now=0.0
    )
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.input_responses is None
    pair.server.send_input_required(req.request_id, ELICIT, state={"step": 1}, now=0.0)
    need = only(pair.deliver(pair.server), InputRequired)
    assert need.request_id == rid and need.round == 1
    assert need.input_requests == ELICIT and need.request_state
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    rid2 = pair.client.retry_with_input(rid, answers, now=0.0)
    assert rid2 != rid
    retry = only(pair.deliver(pair.client), RequestReceived)
    assert retry.input_responses == answers
    assert retry.request_state == {"step": 1}
    assert retry.params is not None and retry.params["arguments"] == {"path": "/x"}
    pair.server.send_result(retry.request_id, {"content": [{"type": "text", "text": "gone"}]})
    done = only(pair.deliver(pair.server), ResultReceived)
    assert done.request_id == rid2
    validate_wire(pair, V)


def test_send_input_required_takes_the_time_the_receive_calls_get() -> None:
    # It defaulted to 0.0: a server fed receive_* with time.monotonic() (hours of
    # uptime) sealed requestState at 0, so the retry found it expired. The time is a
    # required keyword now, and the state sealed at it opens at the same clock.
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    caps: dict[str, Any] = {CC: {"elicitation": {}}}
    feed(server, modern_request(1, "tools/call", {"name": "t"}, **caps), now=50_000.0)
    with pytest.raises(TypeError, match="now"):
        server.send_input_required(1, ELICIT, state={"step": 1})  # type: ignore[call-arg]
    assert server.send_input_required(1, ELICIT, state={"step": 1}, now=50_000.0)
    (out,) = [loads(p) for p in server.data_to_send()]
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    retry = {"name": "t", "requestState": out["result"]["requestState"], "inputResponses": answers}
    events, _ = feed(server, modern_request(2, "tools/call", retry, **caps), now=50_001.0)
    assert only(events, RequestReceived).request_state == {"step": 1}


def test_a_shared_state_clock_lets_another_process_open_the_state() -> None:
    # Two server processes share the key; each passes its own monotonic `now` (origins
    # thousands of seconds apart). Expiry counted in that `now` refused a state sealed
    # by the other; counted in a shared clock, it is accepted, and still expires.
    wall = [1_000_000.0]
    key = b"k" * 32

    def server() -> Connection:
        config = ConnectionConfig(
            capabilities=SERVER_CAPS,
            request_state_key=key,
            request_state_ttl=60,
            request_state_clock=lambda: wall[0],
        )
        return Connection("server", config)

    first, second = server(), server()
    caps: dict[str, Any] = {CC: {"elicitation": {}}}
    feed(first, modern_request(1, "tools/call", {"name": "t"}, **caps), now=10.0)
    assert first.send_input_required(1, ELICIT, state={"step": 1}, now=10.0)
    (out,) = [loads(p) for p in first.data_to_send()]
    token = out["result"]["requestState"]
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    retry = {"name": "t", "requestState": token, "inputResponses": answers}
    events, _ = feed(second, modern_request(2, "tools/call", retry, **caps), now=5_000.0)
    assert only(events, RequestReceived).request_state == {"step": 1}
    wall[0] += 61
    events, _ = feed(second, modern_request(3, "tools/call", retry, **caps), now=5_001.0)
    assert "expired" in only(events, InvalidMessageReceived).error.message


def test_input_required_only_for_three_methods_and_modern() -> None:
    pair = modern_pair()
    pair.client.send_request("tools/list", now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    with pytest.raises(LocalProtocolError):
        pair.server.send_input_required(req.request_id, ELICIT, now=0.0)
    with pytest.raises(LocalProtocolError):
        pair.server.send_input_required(999, ELICIT, now=0.0)
    pair.server.send_result(req.request_id, {"tools": []})


@pytest.mark.parametrize(
    ("result", "why"),
    [
        ({"resultType": "input_required"}, "send_input_required"),
        ({"resultType": "input_required", "inputRequests": ELICIT}, "send_input_required"),
        ({"resultType": "partial", "content": []}, "resultType 'partial'"),
    ],
)
def test_send_result_sends_complete_results_only(result: dict[str, Any], why: str) -> None:
    # mrtr.mdx: an input_required result carries checked input requests or a state
    # (send_input_required); basic/index.mdx: no result type but the core's without an
    # extension. send_result used to send all three, the first two unchecked.
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    feed(server, modern_request(1, "tools/call", {"name": "t"}))  # declares no elicitation
    with pytest.raises(LocalProtocolError, match=why):
        server.send_result(1, result)
    assert server.inflight_requests() != () and server.data_to_send() == []
    server.send_result(1, {"content": [], "resultType": "complete"})
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["result"]["resultType"] == "complete"


def test_input_required_for_a_cancelled_request_is_dropped_and_frees_its_place() -> None:
    # The cancelled request holds its place until answered; send_input_required is an
    # answer too: it returns False, sends nothing, and gives the place back.
    config = ConnectionConfig(capabilities=SERVER_CAPS, max_inflight_requests=1)
    server = Connection("server", config)
    caps: dict[str, Any] = {CC: {"elicitation": {}}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    feed(server, modern_request(1, "tools/call", {"name": "t"}, **caps))
    feed(server, cancel)
    _, refused = feed(server, modern_request(2, "tools/call", {"name": "t"}, **caps))
    assert refused[0]["error"]["code"] == ErrorCode.INTERNAL_ERROR  # the place is held
    assert server.send_input_required(1, ELICIT, now=0.0) is False
    assert server.data_to_send() == []
    events, out = feed(server, modern_request(3, "tools/call", {"name": "t"}, **caps))
    assert out == [] and only(events, RequestReceived).request_id == 3
    with pytest.raises(LocalProtocolError):  # answered: a second answer is an error
        server.send_input_required(1, ELICIT, now=0.0)


def test_input_required_needs_the_client_capability() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    feed(server, modern_request(1, "tools/call", {"name": "t"}))  # declares no elicitation
    assert not server.send_input_required(1, ELICIT, now=0.0)
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["error"]["code"] == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert "elicitation" in out["error"]["data"]["requiredCapabilities"]
    assert server.inflight_requests() == ()


def test_input_rounds_are_bounded() -> None:
    pair = handshaken("modern", max_input_rounds=2)
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    for _ in range(2):
        req = only(pair.deliver(pair.client), RequestReceived)
        pair.server.send_input_required(req.request_id, ELICIT, now=0.0)
        need = only(pair.deliver(pair.server), InputRequired)
        if need.round < 2:
            pair.client.retry_with_input(need.request_id, {}, now=0.0)
    with pytest.raises(LocalProtocolError, match="rounds"):
        pair.client.retry_with_input(need.request_id, {}, now=0.0)
    pair.client.abandon_request(need.request_id)
    with pytest.raises(LocalProtocolError):
        pair.client.retry_with_input(need.request_id, {}, now=0.0)


@pytest.mark.parametrize("end", ["receive_eof", "send_failed"])
def test_a_call_awaiting_input_is_unanswered_when_the_connection_closes(end: str) -> None:
    # A call whose question is on the user's screen (InputRequired, no retry yet) can
    # never be retried once the input ends: ConnectionClosed lists it with the calls in
    # flight, under the id the driver holds. It used to be forgotten silently, so a
    # driver that waits on ConnectionClosed for its calls' ends never learnt of it.
    pair = modern_pair()
    asked, dropped, sent = (
        pair.client.send_request("tools/call", {"name": name}, now=0.0) for name in "abc"
    )
    requests = [e for e in pair.deliver(pair.client) if isinstance(e, RequestReceived)]
    for request in requests[:2]:
        pair.server.send_input_required(request.request_id, ELICIT, now=0.0)
    rounds = [e for e in pair.deliver(pair.server) if isinstance(e, InputRequired)]
    assert [e.request_id for e in rounds] == [asked, dropped]
    pair.client.abandon_request(dropped)  # (given up: not the connection's to list)
    closed = only(getattr(pair.client, end)(), ConnectionClosed)
    assert closed.unanswered == (sent, asked) and closed.abandoned == ()
    with pytest.raises(LocalProtocolError):
        pair.client.retry_with_input(asked, {}, now=0.0)


def test_a_round_past_the_awaiting_input_bound_ends_its_call() -> None:
    # At most max_pending_requests calls await input. A round past that bound ends its
    # own call with a local error, as a round that asks too much ends, while the calls
    # already awaiting input keep their rounds. The oldest used to be dropped with no
    # event: its driver never learnt that it ended, and its retry was refused.
    pair = handshaken("modern", max_pending_requests=2)
    ids: list[Any] = []
    events: list[Any] = []
    for name in "abc":  # (one at a time: each round frees its place in flight)
        ids.append(pair.client.send_request("tools/call", {"name": name}, now=0.0))
        request = only(pair.deliver(pair.client), RequestReceived)
        pair.server.send_input_required(request.request_id, ELICIT, now=0.0)
        events += pair.deliver(pair.server)
    a, b, c = ids
    assert [type(e) for e in events] == [InputRequired, InputRequired, ErrorReceived]
    assert [e.request_id for e in events] == ids
    refused = events[2]
    assert isinstance(refused, ErrorReceived) and refused.local
    assert refused.error.code == ErrorCode.INTERNAL_ERROR
    assert refused.error.data == {"maxPendingRequests": 2}
    assert "max_pending_requests" in refused.error.message
    with pytest.raises(LocalProtocolError, match="not awaiting"):
        pair.client.retry_with_input(c, {}, now=0.0)  # (ended: not resurrected)
    # A late answer to the refused call is dropped, as for any finished call.
    late: dict[str, Any] = {"jsonrpc": "2.0", "id": c, "result": {"content": []}}
    ignored = only(pair.client.receive_message(dumps(late), now=0.0), ResponseIgnored)
    assert ignored.request_id == c and ignored.reason == "duplicate"
    # The calls awaiting input kept their rounds; a freed place takes a new round.
    answered = pair.client.retry_with_input(a, {"confirm": {"action": "decline"}}, now=0.0)
    d = pair.client.send_request("tools/call", {"name": "d"}, now=0.0)
    request = [e for e in pair.deliver(pair.client) if isinstance(e, RequestReceived)][-1]
    pair.server.send_input_required(request.request_id, ELICIT, now=0.0)
    assert only(pair.deliver(pair.server), InputRequired).request_id == d
    # The close lists each call that has not ended once, and the refused one not at all.
    closed = only(pair.client.receive_eof(), ConnectionClosed)
    assert closed.unanswered == (answered, b, d)


def test_expired_request_state_is_refused() -> None:
    pair = modern_pair(request_state_ttl=10.0)
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    pair.server.send_input_required(req.request_id, ELICIT, now=0.0)
    only(pair.deliver(pair.server), InputRequired)
    pair.client.retry_with_input(rid, {}, now=0.0)
    events = pair.deliver(pair.client, now=11.0)
    assert not any(isinstance(e, RequestReceived) for e in events)
    err = only(pair.deliver(pair.server), ErrorReceived)
    assert err.error.code == ErrorCode.INVALID_PARAMS


@given(st.integers(min_value=0, max_value=10_000), st.sampled_from("AQgw_-=x"))
def test_tampered_request_state_is_always_refused(position: int, char: str) -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    params = {"name": "t", "arguments": {"a": 1}}
    feed(server, modern_request(1, "tools/call", params, **{CC: {"elicitation": {}}}))
    assert server.send_input_required(1, ELICIT, state={"secret": "s"}, now=0.0)
    (out,) = [loads(p) for p in server.data_to_send()]
    token: str = out["result"]["requestState"]
    i = position % len(token)
    tampered = token[:i] + char + token[i + 1 :]
    if tampered == token:
        tampered = token + char
    retry = {**params, "requestState": tampered, "inputResponses": {}}
    events, out2 = feed(server, modern_request(2, "tools/call", retry))
    assert not any(isinstance(e, RequestReceived) for e in events)
    assert out2[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    # and the same token bound to different arguments is refused too
    other = {"name": "t", "arguments": {"a": 2}, "requestState": token, "inputResponses": {}}
    _, out3 = feed(server, modern_request(3, "tools/call", other))
    assert out3[0]["error"]["code"] == ErrorCode.INVALID_PARAMS


# ---------------------------------------------------------------- subscriptions


def test_a_listen_stream_is_not_timed_out_by_the_configured_timeouts() -> None:
    # An open subscription may stay quiet for ever; request_timeout and max_request_time
    # used to cancel it after their time (an explicit per-request timeout still applies).
    pair = handshaken("modern", request_timeout=30, max_request_time=60)
    listen = {"notifications": {"toolsListChanged": True}}
    sid = pair.client.send_request("subscriptions/listen", listen, now=0.0)
    pair.deliver(pair.client)
    pair.deliver(pair.server)
    assert pair.client.next_deadline() is None
    assert pair.client.handle_timer(10_000.0) == []
    assert sid in pair.client.pending_requests()
    other = pair.client.send_request("subscriptions/listen", listen, now=0.0, timeout=5.0)
    assert pair.client.next_deadline() == 5.0
    assert pair.client.handle_timer(5.0) == [
        RequestTimedOut(request_id=other, method="subscriptions/listen")
    ]


def test_subscriptions_listen_ack_tagging_and_teardown() -> None:
    pair = modern_pair()
    sid = pair.client.send_request(
        "subscriptions/listen",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]}},
        now=0.0,
    )
    assert pair.deliver(pair.client) == []  # the core owns the listen stream
    assert pair.server.subscriptions() == (sid,)
    ack = only(pair.deliver(pair.server), SubscriptionNotificationReceived)
    assert ack.subscription_id == sid
    assert ack.method == "notifications/subscriptions/acknowledged"
    pair.server.send_notification("notifications/tools/list_changed")
    pair.server.send_notification("notifications/prompts/list_changed")  # not asked for
    pair.server.send_notification("notifications/resources/updated", {"uri": "file:///a"})
    pair.server.send_notification("notifications/resources/updated", {"uri": "file:///b"})
    events = pair.deliver(pair.server)
    assert [
        (e.subscription_id, e.method)
        for e in events
        if isinstance(e, SubscriptionNotificationReceived)
    ] == [
        (sid, "notifications/tools/list_changed"),
        (sid, "notifications/resources/updated"),
    ]
    for _, msg in pair.wire:
        if (
            msg.get("method", "").startswith("notifications/")
            and msg["method"] != "notifications/cancelled"
        ):
            assert msg["params"]["_meta"][SUB] == sid
    pair.client.cancel_request(sid)
    assert pair.deliver(pair.client) == []
    assert pair.server.subscriptions() == ()
    validate_wire(pair, V)


def test_a_cancelled_subscription_holds_no_place() -> None:
    # The core serves a listen and no handler ever answers it: once the client cancels
    # it, it is over, and (unlike a cancelled request) holds no max_inflight place.
    pair = modern_pair(max_inflight_requests=1)
    for _ in range(3):
        sid = pair.client.send_request(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
        )
        pair.exchange()
        assert pair.server.subscriptions() == (sid,)
        pair.client.cancel_request(sid)
        assert pair.deliver(pair.client) == []
    events, out = feed(pair.server, modern_request(99, "tools/list"))
    assert only(events, RequestReceived).request_id == 99 and out == []


def test_server_ends_a_subscription_gracefully() -> None:
    pair = modern_pair()
    sid = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.exchange()
    pair.server.end_subscription(sid)
    # Its result (subscriptions.mdx: SHOULD), then the notifications/cancelled that ends
    # the stream on a shared channel (cancellation.mdx: MUST), which the client, having
    # taken the result, ignores.
    res = only(pair.deliver(pair.server), ResultReceived)
    out = [m for sender, m in pair.wire[-2:]]
    assert [m.get("method") for m in out] == [None, "notifications/cancelled"]
    assert out[0]["id"] == sid and out[1]["params"]["requestId"] == sid
    assert res.request_id == sid
    with pytest.raises(LocalProtocolError):
        pair.server.end_subscription(sid)
    validate_wire(pair, V)


def test_over_http_the_streams_close_ends_a_subscription() -> None:
    pair = modern_pair()
    sid = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.exchange()
    pair.server.end_subscription(sid, notify=False)
    (message,) = pair.server.data_to_send()
    assert loads(message)["id"] == sid


@pytest.mark.parametrize("answer", ["error", "result"])
def test_a_subscription_answered_otherwise_is_over(answer: str) -> None:
    pair = modern_pair()
    sid = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.exchange()
    if answer == "error":
        pair.server.send_error(sid, -32603, "the listener broke")
    else:
        pair.server.send_result(sid, {})
    assert len(pair.server.data_to_send()) == 1  # its one answer
    assert pair.server.subscriptions() == ()
    with pytest.raises(LocalProtocolError):
        pair.server.end_subscription(sid)  # no second answer for the same id
    pair.server.send_notification("notifications/tools/list_changed")
    assert pair.server.data_to_send() == []


def test_two_subscriptions_are_demultiplexed() -> None:
    pair = modern_pair()
    a = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    b = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"promptsListChanged": True}}, now=0.0
    )
    pair.exchange()
    pair.server.send_notification("notifications/prompts/list_changed")
    ev = only(pair.deliver(pair.server), SubscriptionNotificationReceived)
    assert ev.subscription_id == b and a != b


def test_unsubscribed_change_with_no_session_is_a_no_op_not_an_error() -> None:
    pair = modern_pair()
    pair.server.send_notification("notifications/tools/list_changed")
    assert pair.server.data_to_send() == []


@pytest.mark.parametrize(
    ("field", "key", "items"),
    [
        ("max_resource_subscriptions", "resourceSubscriptions", ["file:///a", "file:///b"]),
        ("max_task_ids", "taskIds", ["t1", "t2"]),
    ],
)
def test_the_listen_filter_bounds_are_configured(field: str, key: str, items: list[str]) -> None:
    caps = {**SERVER_CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    pair = modern_pair(capabilities=caps, **{field: 1})
    # One item is within the bound; two are past it: -32602, naming the bound.
    _, sent = feed(
        pair.server, modern_request(1, "subscriptions/listen", {"notifications": {key: items}})
    )
    assert sent[0]["error"]["code"] == -32602 and "more than 1" in sent[0]["error"]["message"]
    assert pair.server.subscriptions() == ()
    meta: dict[str, Any] = {CC: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    feed(
        pair.server,
        modern_request(2, "subscriptions/listen", {"notifications": {key: items[:1]}}, **meta),
    )
    assert pair.server.subscriptions() == (2,)


@pytest.mark.parametrize(
    ("field", "least"),
    [("max_resource_subscriptions", 0), ("max_task_ids", 0), ("max_input_rounds", 1)],
)
def test_the_count_bounds_are_checked_up_front(field: str, least: int) -> None:
    # One below the least value is refused, and so are values of the wrong type (a str
    # used to reach a comparison with a length inside receive_message; bool is an int
    # to Python).
    fine: dict[str, Any] = {field: least}
    assert getattr(ConnectionConfig(**fine), field) == least
    for bad in (least - 1, "5", 2.5, True, None):
        kwargs: dict[str, Any] = {field: bad}
        with pytest.raises(ValueError, match=f"{field} must be an integer of {least} or more"):
            ConnectionConfig(**kwargs)


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("cache_ttl_ms", -1, "cache_ttl_ms must be an integer of 0 or more"),
        ("cache_ttl_ms", 1.5, "cache_ttl_ms must be an integer of 0 or more"),
        ("cache_ttl_ms", True, "cache_ttl_ms must be an integer of 0 or more"),
        ("cache_scope", "everyone", "cache_scope must be 'public' or 'private'"),
        ("cache_scope", None, "cache_scope must be 'public' or 'private'"),
        ("log_level", "verbose", "log_level must be one of"),
        ("log_level", "DEBUG", "log_level must be one of"),
    ],
)
def test_caching_hints_and_log_level_are_checked_up_front(
    field: str, bad: object, message: str
) -> None:
    # They used to be taken, and then every modern result of such a server (or every
    # request of such a client) raised LocalProtocolError in decorate_result (or in
    # build_request_meta): a server that could answer nothing, found out late.
    kwargs: dict[str, Any] = {field: bad}
    with pytest.raises(ValueError, match=message):
        ConnectionConfig(**kwargs)
    with pytest.raises(ValueError, match=message):
        attrs.evolve(ConnectionConfig(), **kwargs)


def test_valid_caching_hints_and_log_levels_are_taken() -> None:
    for ttl in (0, 60_000):
        for scope in ("public", "private"):
            config = ConnectionConfig(cache_ttl_ms=ttl, cache_scope=scope)
            assert (config.cache_ttl_ms, config.cache_scope) == (ttl, scope)
    for level in (None, *LOG_LEVELS):
        assert ConnectionConfig(log_level=level).log_level == level


@pytest.mark.parametrize(
    ("field", "key"),
    [("max_resource_subscriptions", "resourceSubscriptions"), ("max_task_ids", "taskIds")],
)
def test_a_zero_listen_filter_bound_refuses_only_a_filter_that_names_one(
    field: str, key: str
) -> None:
    caps = {**SERVER_CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    pair = modern_pair(capabilities=caps, **{field: 0})
    meta: dict[str, Any] = {CC: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    _, sent = feed(
        pair.server,
        modern_request(1, "subscriptions/listen", {"notifications": {key: ["x"]}}, **meta),
    )
    assert sent[0]["error"]["code"] == -32602 and "more than 0" in sent[0]["error"]["message"]
    listen = {"notifications": {"toolsListChanged": True}}
    feed(pair.server, modern_request(2, "subscriptions/listen", listen, **meta))
    assert pair.server.subscriptions() == (2,)


def test_listens_for_tells_whether_a_stream_would_take_a_notification() -> None:
    caps = {**SERVER_CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    pair = modern_pair(capabilities=caps)
    note = ("notifications/tasks", {"taskId": "t1"})
    assert not pair.server.listens_for(*note)  # (no stream at all)
    meta: dict[str, Any] = {CC: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    listen = {"notifications": {"taskIds": ["t2"], "toolsListChanged": True}}
    feed(pair.server, modern_request(1, "subscriptions/listen", listen, **meta))
    assert not pair.server.listens_for(*note)  # (another task's)
    assert pair.server.listens_for("notifications/tasks", {"taskId": "t2"})
    assert pair.server.listens_for("notifications/tools/list_changed")

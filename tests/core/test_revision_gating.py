"""Methods gated by the negotiated revision, and the requests a server serves before
``notifications/initialized``: client/server pairs and HTTP-shaped values, no I/O.

* A standard method of *another* revision (``elicitation/create`` in a 2025-03-26
  session, ``notifications/elicitation/complete`` in a 2025-06-18 one) is no custom
  method: sending it raises and changes nothing, a request for it is answered -32601, a
  notification of it is reported and dropped. Names no revision defines still pass.
* Legacy lifecycle: once the server has answered ``initialize`` it serves the client's
  requests (lifecycle.mdx only asks the client to wait for that *response*), while what
  the server itself may send still waits for ``notifications/initialized``.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import attrs
import orjson
import pytest

from mcp_sansio import (
    LEGACY_VERSIONS,
    Connection,
    ConnectionConfig,
    ErrorCode,
    HandshakeCompleted,
    InvalidMessageReceived,
    LifecycleState,
    LocalProtocolError,
    NotificationReceived,
    RequestReceived,
    ResultReceived,
    _conn_handshake,
)
from mcp_sansio._json import dumps, loads
from mcp_sansio._modern import MODERN_REMOVED_METHODS
from mcp_sansio._tasks import declares_tasks
from mcp_sansio._versions import FOREIGN_METHODS, REVISIONS, declares_extension, has_capability
from mcp_sansio.http import AwaitResponse, HttpResponse, ResponseReady, ServerEvent
from tests.schema import SPEC, validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair, handshaken, validate_wire
from .test_http_server import in_session, initialize, make_server, note, req, rpc

T = TypeVar("T")
MODERN = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
ELICIT = {
    "message": "Name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
TASKS_CAPS: dict[str, Any] = {"tasks": {"list": {}, "cancel": {}, "requests": {}}}


def only(events: list[Any], cls: type[T]) -> T:
    found = [e for e in events if isinstance(e, cls)]
    assert len(found) == 1, events
    return found[0]


def feed(conn: Connection, obj: Any) -> tuple[list[Any], list[Any]]:
    """Feed one message to ``conn``; return (events, decoded messages it sent)."""
    events = conn.receive_message(dumps(obj), now=0.0)
    return events, [loads(p) for p in conn.data_to_send()]


def legacy_pair(version: str, **server: Any) -> ConnectionPair:
    client_caps = {**CLIENT_CAPS, **TASKS_CAPS}
    return ConnectionPair(
        ConnectionConfig(
            implementation={"name": "c", "version": "1"},
            capabilities=client_caps,
            supported_versions=(version,),
            era="legacy",
        ),
        ConnectionConfig(
            implementation={"name": "s", "version": "1"},
            capabilities=server.pop("capabilities", {**SERVER_CAPS, **TASKS_CAPS}),
            **server,
        ),
    )


def ready_pair(version: str) -> ConnectionPair:
    pair = legacy_pair(version)
    pair.handshake()
    return pair


def modern_pair() -> ConnectionPair:
    return handshaken("modern")


def untouched(conn: Connection, call: Any, match: str) -> None:
    """``call`` raises LocalProtocolError matching ``match`` and changes nothing."""
    pending = conn.pending_requests()
    with pytest.raises(LocalProtocolError, match=match):
        call()
    assert conn.pending_requests() == pending
    assert conn.data_to_send() == []


# ================================================================== the table, from the spec


@functools.cache
def schema_methods(version: str) -> frozenset[str]:
    """Every method the official schema of ``version`` defines (either direction)."""
    schema = orjson.loads((SPEC / "schema" / version / "schema.json").read_bytes())
    defs: dict[str, Any] = schema.get("$defs") or schema["definitions"]
    out: set[str] = set()
    for union in ("ClientRequest", "ServerRequest", "ClientNotification", "ServerNotification"):
        for ref in defs.get(union, {}).get("anyOf", []):
            out.add(defs[ref["$ref"].split("/")[-1]]["properties"]["method"]["const"])
    return frozenset(out)


@pytest.mark.parametrize("version", sorted(REVISIONS))
def test_foreign_methods_are_what_the_schemas_say(version: str) -> None:
    every = frozenset().union(*(schema_methods(v) for v in REVISIONS))
    expected = every - schema_methods(version)
    if version == MODERN:  # the tasks extension keeps these two (extensions/tasks)
        expected -= {"tasks/get", "tasks/cancel"}
    assert FOREIGN_METHODS[version] == expected


def _schema_defs(version: str) -> dict[str, Any]:
    schema = orjson.loads((SPEC / "schema" / version / "schema.json").read_bytes())
    defs: dict[str, Any] = schema.get("$defs") or schema["definitions"]
    return defs


def _block_types(defs: dict[str, Any], union: Any) -> frozenset[str]:
    """The ``type`` consts of the content blocks a schema union admits (through arrays
    and named unions)."""
    found: set[str] = set()
    for option in union.get("anyOf", [union] if "$ref" in union else []):
        if option.get("type") == "array":
            found |= _block_types(defs, option["items"])
            continue
        target = defs[option["$ref"].split("/")[-1]]
        if "anyOf" in target:
            found |= _block_types(defs, target)
        else:
            found.add(target["properties"]["type"]["const"])
    return frozenset(found)


@pytest.mark.parametrize("version", sorted(REVISIONS))
def test_the_data_model_facts_are_what_the_schemas_say(version: str) -> None:
    defs = _schema_defs(version)
    revision = REVISIONS[version]
    tool_content = defs["CallToolResult"]["properties"]["content"]["items"]
    assert revision.content_types == _block_types(defs, tool_content)
    prompt_content = defs["PromptMessage"]["properties"]["content"]
    assert revision.content_types == _block_types(defs, prompt_content)
    sampling = defs["SamplingMessage"]["properties"]["content"]
    assert revision.sampling_content_types == _block_types(defs, sampling)
    structured = defs["CallToolResult"]["properties"].get("structuredContent")
    assert revision.structured_output is (structured is not None)
    assert revision.structured_output is ("outputSchema" in defs["Tool"]["properties"])
    is_object = structured is not None and structured.get("type") == "object"
    assert revision.structured_content_is_object is is_object
    assert revision.elicitation_modes is ("ElicitRequestURLParams" in defs)
    sampling = defs["ClientCapabilities"]["properties"]["sampling"]
    assert revision.sampling_context is ("context" in sampling.get("properties", {}))


def test_the_modern_removals_are_foreign_there() -> None:
    assert FOREIGN_METHODS[MODERN] >= MODERN_REMOVED_METHODS


# ================================================================== requests: sending


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_server_does_not_elicit_before_2025_06_18(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client of another library, which declares elicitation anyway (ours leaves it
    # out of an initialize of these versions: tests/core/test_newer_fields.py).
    monkeypatch.setattr(_conn_handshake, "_capabilities_of", lambda version, caps: caps)
    pair = ready_pair(version)
    assert "elicitation" in pair.server.peer_capabilities  # declared: still no such request
    untouched(
        pair.server,
        lambda: pair.server.send_request("elicitation/create", ELICIT, now=0.0),
        f"'elicitation/create' does not exist in protocol version {version}",
    )
    # the id was not used: the next request takes the first one
    rid = pair.server.send_request("roots/list", now=0.0)
    assert rid == 1
    assert [m["method"] for m in map(loads, pair.server.data_to_send())] == ["roots/list"]


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_server_elicits_from_2025_06_18(version: str) -> None:
    pair = ready_pair(version)
    rid = pair.server.send_request("elicitation/create", ELICIT, now=0.0)
    req_event = only(pair.deliver(pair.server), RequestReceived)
    assert req_event.method == "elicitation/create"
    pair.client.send_result(req_event.request_id, {"action": "decline"})
    assert only(pair.deliver(pair.client), ResultReceived).request_id == rid
    validate_wire(pair, version)


@pytest.mark.parametrize(
    ("version", "role", "method"),
    [
        ("2025-06-18", "client", "tasks/get"),
        ("2025-06-18", "server", "tasks/list"),
        ("2025-03-26", "client", "tasks/result"),
        ("2025-11-25", "client", "subscriptions/listen"),
        ("2025-11-25", "server", "server/discover"),
    ],
)
def test_legacy_sender_refuses_other_revisions_requests(
    version: str, role: str, method: str
) -> None:
    pair = ready_pair(version)
    conn = pair.client if role == "client" else pair.server
    untouched(
        conn,
        lambda: conn.send_request(method, {"taskId": "t"}, now=0.0),
        f"'{method}' does not exist in protocol version {version}",
    )


@pytest.mark.parametrize("method", ["elicitation/create", "sampling/createMessage", "roots/list"])
def test_modern_client_refuses_server_requests(method: str) -> None:
    pair = modern_pair()
    untouched(pair.client, lambda: pair.client.send_request(method, {}, now=0.0), "modern era")


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_custom_requests_still_pass_both_ways(version: str) -> None:
    pair = ready_pair(version)
    for sender in (pair.client, pair.server):
        rid = sender.send_request("vendor/thing", {"x": 1}, now=0.0)
        got = only(pair.deliver(sender), RequestReceived)
        assert got.method == "vendor/thing"
        pair.peer(sender).send_result(got.request_id, {"ok": True})
        assert only(pair.deliver(pair.peer(sender)), ResultReceived).request_id == rid


def test_tasks_exist_in_2025_11_25() -> None:
    pair = ready_pair("2025-11-25")
    pair.client.send_request("tasks/get", {"taskId": "t"}, now=0.0)
    assert only(pair.deliver(pair.client), RequestReceived).method == "tasks/get"


# ================================================================== requests: receiving


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_client_answers_elicitation_with_method_not_found_before_2025_06_18(
    version: str,
) -> None:
    pair = ready_pair(version)
    events, out = feed(
        pair.client, {"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": ELICIT}
    )
    assert out == [
        {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {
                "code": ErrorCode.METHOD_NOT_FOUND,
                "message": "Method not found: elicitation/create does not exist in protocol "
                f"version {version}",
            },
        }
    ]
    assert only(events, InvalidMessageReceived).request_id == 9
    assert not [e for e in events if isinstance(e, RequestReceived)]
    assert pair.client.inflight_requests() == ()
    validate_message(version, out[0])


@pytest.mark.parametrize(
    ("version", "method"),
    [
        ("2025-06-18", "tasks/get"),
        ("2025-03-26", "tasks/list"),
        ("2025-11-25", "subscriptions/listen"),
    ],
)
def test_legacy_server_answers_other_revisions_requests_with_method_not_found(
    version: str, method: str
) -> None:
    pair = ready_pair(version)
    for attempt in range(2):  # and the verdict is not cached as a pass
        events, out = feed(pair.server, {"jsonrpc": "2.0", "id": attempt, "method": method})
        assert out[0]["error"] == {
            "code": ErrorCode.METHOD_NOT_FOUND,
            "message": f"Method not found: {method} does not exist in protocol version {version}",
        }
        assert only(events, InvalidMessageReceived).request_id == attempt


def test_legacy_server_in_a_batch_answers_method_not_found() -> None:
    pair = ready_pair("2025-03-26")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": "t"}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    _, out = feed(pair.server, batch)
    (replies,) = out
    assert replies == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": ErrorCode.METHOD_NOT_FOUND,
                "message": "Method not found: tasks/get does not exist in protocol version "
                "2025-03-26",
            },
        },
        {"jsonrpc": "2.0", "id": 2, "result": {}},
    ]


@pytest.mark.parametrize("method", ["elicitation/create", "sampling/createMessage", "roots/list"])
def test_modern_server_answers_server_requests_with_method_not_found(method: str) -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS, era="modern"))
    msg = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {"_meta": {PV: MODERN, CC: {}}}}
    events, out = feed(server, msg)
    assert out[0]["error"] == {
        "code": ErrorCode.METHOD_NOT_FOUND,
        "message": f"Method not found: {method} does not exist in protocol version {MODERN}",
    }
    assert only(events, InvalidMessageReceived).request_id == 5
    validate_message(MODERN, out[0])


def test_modern_server_still_passes_custom_and_extension_methods() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS, era="modern"))
    for rid, method in enumerate(["vendor/thing", "tasks/get", "tasks/cancel"]):
        msg = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": method,
            "params": {"_meta": {PV: MODERN, CC: {}}},
        }
        events, out = feed(server, msg)
        assert only(events, RequestReceived).method == method
        assert out == []


# ================================================================== notifications


@pytest.mark.parametrize(
    ("version", "role", "method"),
    [
        ("2025-06-18", "server", "notifications/elicitation/complete"),
        ("2024-11-05", "server", "notifications/tasks/status"),
        ("2025-06-18", "client", "notifications/tasks/status"),
        ("2025-11-25", "server", "notifications/subscriptions/acknowledged"),
    ],
)
def test_legacy_sender_refuses_other_revisions_notifications(
    version: str, role: str, method: str
) -> None:
    pair = ready_pair(version)
    conn = pair.client if role == "client" else pair.server
    untouched(
        conn,
        lambda: conn.send_notification(method, {"elicitationId": "e"}),
        f"'{method}' does not exist in protocol version {version}",
    )


def test_notifications_of_the_revision_and_custom_ones_still_go_out() -> None:
    pair = ready_pair("2025-11-25")
    pair.server.send_notification("notifications/elicitation/complete", {"elicitationId": "e"})
    pair.client.send_notification("notifications/tasks/status", _task_status())
    for sender in (pair.client, pair.server):
        sender.send_notification("notifications/vendor/thing", {"x": 1})
    client_events, server_events = pair.exchange()
    assert [e.method for e in client_events if isinstance(e, NotificationReceived)] == [
        "notifications/elicitation/complete",
        "notifications/vendor/thing",
    ]
    assert [e.method for e in server_events if isinstance(e, NotificationReceived)] == [
        "notifications/tasks/status",
        "notifications/vendor/thing",
    ]
    validate_wire(pair, "2025-11-25")


def _task_status() -> dict[str, Any]:
    return {
        "taskId": "t",
        "status": "working",
        "createdAt": "2025-11-25T00:00:00Z",
        "lastUpdatedAt": "2025-11-25T00:00:00Z",
        "ttl": None,
    }


def test_modern_client_refuses_legacy_notifications() -> None:
    pair = modern_pair()
    for method in ("notifications/initialized", "notifications/roots/list_changed"):
        untouched(
            pair.client,
            lambda m=method: pair.client.send_notification(m),
            f"does not exist in protocol version {MODERN}",
        )
    pair.client.send_notification("notifications/vendor/thing")
    assert [loads(p)["method"] for p in pair.client.data_to_send()] == [
        "notifications/vendor/thing"
    ]


@pytest.mark.parametrize(
    ("version", "role", "method"),
    [
        ("2025-06-18", "client", "notifications/elicitation/complete"),
        ("2025-03-26", "server", "notifications/tasks/status"),
    ],
)
def test_other_revisions_notifications_are_reported_not_delivered(
    version: str, role: str, method: str
) -> None:
    pair = ready_pair(version)
    conn = pair.client if role == "client" else pair.server
    events, out = feed(conn, {"jsonrpc": "2.0", "method": method, "params": {"elicitationId": "e"}})
    assert out == []  # notifications are never answered
    (event,) = events
    assert isinstance(event, InvalidMessageReceived)
    assert event.request_id is None
    assert event.error.code == ErrorCode.METHOD_NOT_FOUND
    assert event.error.message == (
        f"Method not found: {method} does not exist in protocol version {version}"
    )
    # a custom one is still delivered
    events, _ = feed(conn, {"jsonrpc": "2.0", "method": "notifications/vendor/x"})
    assert only(events, NotificationReceived).method == "notifications/vendor/x"


def test_modern_client_drops_legacy_only_notifications() -> None:
    pair = modern_pair()
    events, out = feed(
        pair.client,
        {"jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": {}},
    )
    assert out == []
    assert only(events, InvalidMessageReceived).error.code == ErrorCode.METHOD_NOT_FOUND


# ================================================================== before initialized


def answered_pair(version: str = "2025-11-25", **server: Any) -> ConnectionPair:
    """The server has answered initialize; the client's initialized is still on its way."""
    pair = legacy_pair(version, **server)
    pair.client.start(now=0.0)
    pair.deliver(pair.client)  # initialize -> the server answers it
    pair.deliver(pair.server)  # the client is READY, its initialized queued
    assert pair.server.lifecycle is LifecycleState.ANSWERED
    assert pair.client.lifecycle is LifecycleState.READY
    return pair


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_server_serves_requests_before_initialized_arrives(version: str) -> None:
    pair = answered_pair(version)
    initialized = pair.client.data_to_send()  # held back: it arrives after the request
    rid = pair.client.send_request("tools/list", now=0.0)
    events = pair.deliver(pair.client)
    got = only(events, RequestReceived)
    assert (got.method, got.protocol_version) == ("tools/list", version)
    assert pair.server.inflight_requests() == (rid,)
    pair.server.send_result(rid, {"tools": []})
    assert only(pair.deliver(pair.server), ResultReceived).result == {"tools": []}
    # ...then initialized moves the session to READY, as ever
    events = [e for p in initialized for e in pair.server.receive_message(p, now=0.0)]
    assert only(events, HandshakeCompleted).protocol_version == version
    assert pair.server.lifecycle is LifecycleState.READY
    validate_wire(pair, version)


def test_server_before_initialized_still_checks_methods() -> None:
    pair = answered_pair("2025-06-18", capabilities={"tools": {}, "logging": {}})
    for rid, method in enumerate(["prompts/list", "tasks/get", "roots/list"]):
        _, out = feed(pair.server, {"jsonrpc": "2.0", "id": rid, "method": method})
        assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND, method
    _, out = feed(
        pair.server,
        {"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel", "params": {"level": "info"}},
    )
    assert out == [{"jsonrpc": "2.0", "id": 9, "result": {}}]
    _, out = feed(pair.server, initialize_request(10))
    assert out[0]["error"] == {
        "code": ErrorCode.INVALID_REQUEST,
        "message": "Invalid Request: already initialized",
    }
    assert pair.server.lifecycle is LifecycleState.ANSWERED


def initialize_request(rid: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
    }


def test_server_before_initialized_still_sends_only_pings_and_logs() -> None:
    pair = answered_pair()
    pair.client.data_to_send()  # initialized, lost in transit for now
    rid = pair.client.send_request("tools/call", {"name": "t", "arguments": {}}, now=0.0)
    only(pair.deliver(pair.client), RequestReceived)
    untouched(
        pair.server,
        lambda: pair.server.send_request("roots/list", related_request_id=rid, now=0.0),
        "before the session is ready",
    )
    assert pair.server.send_log("info", "working", request_id=rid)
    pair.server.send_result(rid, {"content": []})
    assert [m.get("method", "result") for m in map(loads, pair.server.data_to_send())] == [
        "notifications/message",
        "result",
    ]


def test_a_verdict_before_initialized_is_not_cached_for_the_fast_path() -> None:
    pair = answered_pair()
    initialized = pair.client.data_to_send()
    pair.client.send_request("tools/list", now=0.0)
    only(pair.deliver(pair.client), RequestReceived)
    assert pair.server._accept_ok == set()
    for payload in initialized:
        pair.server.receive_message(payload, now=0.0)
    pair.client.send_request("tools/list", now=0.0)
    only(pair.deliver(pair.client), RequestReceived)
    assert pair.server._accept_ok == {"tools/list"}


def test_server_still_refuses_requests_before_answering_initialize() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS, era="legacy"))
    _, out = feed(server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert out[0]["error"] == {
        "code": ErrorCode.INVALID_REQUEST,
        "message": "Invalid Request: 'tools/list' before the session is initialized",
    }
    # and a failed handshake serves nothing either
    _, out = feed(server, {**initialize_request(2), "params": {"protocolVersion": "x"}})
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert server.lifecycle is LifecycleState.IDLE
    _, out = feed(server, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert out[0]["error"]["code"] == ErrorCode.INVALID_REQUEST


def test_http_request_racing_initialized_is_served() -> None:
    """Over Streamable HTTP the initialized POST and the next request race: the request
    that wins is served, and initialized still completes the session."""
    srv = make_server(response_mode=lambda method, era: "json")
    reply = srv.handle_request(req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    reply = srv.handle_request(req(body=rpc(2, "tools/list"), **in_session(sid)), now=1)
    assert isinstance(reply.decision, AwaitResponse)
    (tagged,) = [e for e in reply.events if isinstance(e, ServerEvent)]
    assert isinstance(tagged.event, RequestReceived) and tagged.event.method == "tools/list"
    done = srv.handle_request(req(body=note("notifications/initialized"), **in_session(sid)), now=2)
    assert isinstance(done.decision, HttpResponse) and done.decision.status == 202
    assert any(
        isinstance(e, ServerEvent) and isinstance(e.event, HandshakeCompleted) for e in done.events
    )
    conn = srv.session_connection(sid)
    assert conn is not None and conn.lifecycle is LifecycleState.READY
    conn.send_result(2, {"tools": []})
    (ready,) = srv.data_to_send()
    assert isinstance(ready, ResponseReady) and ready.response.status == 200
    assert loads(ready.response.body) == {"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}
    validate_message("2025-11-25", loads(ready.response.body), "tools/list")


# ================================================================== extensions

SKILLS = "io.modelcontextprotocol/skills"
TASKS = "io.modelcontextprotocol/tasks"


@pytest.mark.parametrize(
    ("declared", "counts"),
    [({}, True), ({"directoryRead": True}, True), (None, False), (True, False), ("yes", False)],
)
def test_an_extension_is_declared_by_an_object_only(declared: Any, counts: bool) -> None:
    """basic/versioning.mdx, "Extension Negotiation": identifiers map to settings
    objects. One rule for every extension, the skills gate and the tasks test alike."""
    caps = {"extensions": {SKILLS: declared, TASKS: declared}}
    assert declares_extension(caps, SKILLS) is counts
    assert has_capability(caps, ("extensions", SKILLS)) is counts
    assert declares_tasks(caps) is counts
    assert declares_extension(None, SKILLS) is False
    assert declares_extension({"extensions": []}, SKILLS) is False


def _skills_pair(era: str, declared: Any) -> ConnectionPair:
    extensions = {} if declared == "absent" else {"extensions": {SKILLS: declared}}
    with attrs.validators.disabled():  # (a peer's: our ConnectionConfig refuses a non-object)
        server = ConnectionConfig(capabilities={**SERVER_CAPS, **extensions})
    return handshaken(era, server=server)  # type: ignore[arg-type]


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("declared", ["absent", None, True])
def test_a_client_sends_skills_methods_only_to_a_server_that_declares_them(
    era: str, declared: Any
) -> None:
    pair = _skills_pair(era, declared)
    for method in ("skills/list", "skills/get"):
        untouched(
            pair.client,
            lambda method=method: pair.client.send_request(
                method, {"uri": "skill://a/SKILL.md"}, now=0.0
            ),
            f"did not declare the 'extensions.{SKILLS}' capability needed for '{method}'",
        )


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_client_sends_skills_methods_to_a_server_that_declares_them(era: str) -> None:
    pair = _skills_pair(era, {})
    for method in ("skills/list", "skills/get"):
        pair.client.send_request(method, {"uri": "skill://a/SKILL.md"}, now=0.0)
        _, server_events = pair.exchange()
        assert only(server_events, RequestReceived).method == method


@pytest.mark.parametrize("declared", ["absent", None])
def test_a_server_that_does_not_declare_skills_answers_method_not_found(declared: Any) -> None:
    extensions = {} if declared == "absent" else {"extensions": {SKILLS: declared}}
    caps = {**SERVER_CAPS, **extensions}
    with attrs.validators.disabled():  # (a peer's: our ConnectionConfig refuses a null)
        modern = Connection("server", ConnectionConfig(capabilities=caps, era="modern"))
        legacy = legacy_pair("2025-11-25", capabilities=caps)
    legacy.handshake()
    for rid, method in enumerate(["skills/list", "skills/get"]):
        meta = {"_meta": {PV: MODERN, CC: {}}}
        for server, params in ((modern, meta), (legacy.server, {})):
            msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
            events, out = feed(server, msg)
            assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND, out
            assert f"capability 'extensions.{SKILLS}' not declared" in out[0]["error"]["message"]
            assert not [e for e in events if isinstance(e, RequestReceived)]


@pytest.mark.parametrize(
    ("setting", "counts"),
    [(True, True), (False, False), (None, False), ("yes", False), (1, False), ("absent", False)],
)
def test_an_extension_setting_is_declared_by_true_only(setting: Any, counts: bool) -> None:
    """ext-skills: ``directoryRead`` is a boolean setting whose default is ``false``."""
    settings = {} if setting == "absent" else {"directoryRead": setting}
    caps = {"extensions": {SKILLS: settings}}
    assert has_capability(caps, ("extensions", SKILLS, "directoryRead")) is counts
    assert has_capability({"extensions": {SKILLS: None}}, ("extensions", SKILLS, "x")) is False


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("declared", ["absent", None, {}, {"directoryRead": False}])
def test_a_client_reads_directories_only_where_directory_read_is_declared(
    era: str, declared: Any
) -> None:
    """ext-skills: "Clients MUST NOT call resources/directory/read against a server that
    has not declared directoryRead: true"."""
    pair = _skills_pair(era, declared)
    untouched(
        pair.client,
        lambda: pair.client.send_request("resources/directory/read", {"uri": "skill://a"}, now=0.0),
        f"did not declare the 'extensions.{SKILLS}.directoryRead' capability needed for"
        " 'resources/directory/read'",
    )
    pair = _skills_pair(era, {"directoryRead": True})
    pair.client.send_request("resources/directory/read", {"uri": "skill://a"}, now=0.0)
    _, server_events = pair.exchange()
    assert only(server_events, RequestReceived).method == "resources/directory/read"


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(
    ("method", "capability"),
    [
        ("resources/directory/read", f"extensions.{SKILLS}.directoryRead"),
        ("skills/list", f"extensions.{SKILLS}"),
        ("tools/list", "tools"),
    ],
)
def test_a_client_sends_no_gated_method_to_a_server_that_declares_nothing(
    era: str, method: str, capability: str
) -> None:
    """A modern server whose ``server/discover`` result declares ``capabilities: {}`` has
    declared nothing: the gates hold as in a legacy session (they used to be skipped
    when the modern capabilities were empty)."""
    pair = handshaken(era, server={"capabilities": {}})  # type: ignore[arg-type]
    assert pair.client.peer_capabilities == {}
    untouched(
        pair.client,
        lambda: pair.client.send_request(method, {"uri": "skill://a"}, now=0.0),
        f"did not declare the {capability!r} capability needed for {method!r}",
    )


def test_a_discover_result_without_capabilities_leaves_them_unknown() -> None:
    """A discover result with no ``capabilities`` object (which the schema requires) says
    nothing of what the server declares: gated methods are sent, as before."""
    client = Connection("client", ConnectionConfig(era="modern"))
    rid = client.start(now=0.0)
    client.data_to_send()
    events, _ = feed(
        client, {"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": [MODERN]}}
    )
    assert only(events, HandshakeCompleted).peer_capabilities == {}
    client.send_request("resources/directory/read", {"uri": "skill://a"}, now=0.0)
    [sent] = [loads(b) for b in client.data_to_send()]
    assert sent["method"] == "resources/directory/read"


@pytest.mark.parametrize("declared", ["absent", {}, {"directoryRead": False}])
def test_a_server_without_directory_read_answers_method_not_found(declared: Any) -> None:
    """ext-skills, Error Handling: such a server "responds as the base protocol
    specifies for an unknown method"."""
    extensions = {} if declared == "absent" else {"extensions": {SKILLS: declared}}
    caps = {**SERVER_CAPS, **extensions}
    with attrs.validators.disabled():  # (a peer's: our ConnectionConfig refuses a null)
        modern = Connection("server", ConnectionConfig(capabilities=caps, era="modern"))
        legacy = legacy_pair("2025-11-25", capabilities=caps)
    legacy.handshake()
    meta = {"_meta": {PV: MODERN, CC: {}}}
    for server, params in ((modern, meta), (legacy.server, {})):
        msg = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/directory/read",
            "params": {"uri": "skill://a", **params},
        }
        events, out = feed(server, msg)
        assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND, out
        assert not [e for e in events if isinstance(e, RequestReceived)]

"""The tasks extension's rules (mcp_sansio._tasks) and the core's part in it, no I/O."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    ErrorData,
    ErrorReceived,
    LocalProtocolError,
    RequestReceived,
    ResultReceived,
)
from mcp_sansio._json import dumps, loads
from mcp_sansio._tasks import (
    NAME_KEYS,
    TASKS_EXTENSION,
    TERMINAL_STATUSES,
    TRANSITIONS,
    Task,
    UpdateParams,
    check_create_task_result,
    declares_tasks,
    format_timestamp,
    may_return_task,
    missing_tasks_capability,
    parse_task_id,
    parse_task_state,
    parse_update_params,
    task_not_found,
    without_tasks_extension,
)

from .helpers import CLIENT_CAPS, SERVER_CAPS, handshaken
from .test_connection_modern import feed, modern_pair, modern_request, only

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
CC = "io.modelcontextprotocol/clientCapabilities"


def task(**kw: Any) -> Task:
    return Task.created("t1", now=kw.pop("now", 0.0), ttl_ms=kw.pop("ttl_ms", 60_000), **kw)


# ---------------------------------------------------------------- negotiation


@pytest.mark.parametrize(
    ("caps", "declared"),
    [
        (None, False),
        ({}, False),
        ({"extensions": {}}, False),
        ({"extensions": []}, False),
        ({"extensions": {TASKS_EXTENSION: True}}, False),
        ({"extensions": {TASKS_EXTENSION: {}}}, True),
    ],
)
def test_declaring_the_extension_takes_an_object(caps: Any, declared: bool) -> None:
    assert declares_tasks(caps) is declared
    assert may_return_task("tools/call", caps) is declared
    assert may_return_task("prompts/get", caps) is False


def test_the_missing_capability_error_names_the_extension() -> None:
    error = missing_tasks_capability("tasks/get")
    assert error.code == -32021
    assert error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    assert "tasks/get" in error.message
    assert task_not_found("x").code == ErrorCode.INVALID_PARAMS


def test_legacy_capabilities_lose_only_the_tasks_extension() -> None:
    caps: dict[str, Any] = {"tools": {}}
    assert without_tasks_extension(caps) is caps
    both: dict[str, Any] = {"tools": {}, "extensions": {TASKS_EXTENSION: {}, "x/y": {}}}
    assert without_tasks_extension(both) == {"tools": {}, "extensions": {"x/y": {}}}
    assert without_tasks_extension({"extensions": {TASKS_EXTENSION: {}}}) == {}


def test_http_routes_task_methods_by_task_id() -> None:
    assert NAME_KEYS == {"tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


# ---------------------------------------------------------------- the record


def test_a_new_task_is_working_and_its_wire_shape_is_flat() -> None:
    t = task(now=0.0, poll_interval_ms=500)
    assert t.status == "working" and not t.terminal
    assert t.to_wire() == {
        "taskId": "t1",
        "status": "working",
        "createdAt": "1970-01-01T00:00:00.000Z",
        "lastUpdatedAt": "1970-01-01T00:00:00.000Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    }
    created = t.create_result()
    assert created["resultType"] == "task" and "task" not in created
    check_create_task_result(created)
    check_create_task_result({**created, "statusMessage": "queued"})


def test_timestamps_are_iso_8601_utc() -> None:
    assert format_timestamp(1_764_066_600.25) == "2025-11-25T10:30:00.250Z"


# The spec's state diagram, written out here (not read from the table under test):
# working and input_required go to each other, stay (a new message) or end; an ended
# task goes nowhere.
_RUNNING = ("working", "input_required")
_ENDED = ("completed", "failed", "cancelled")
_ALLOWED = {(status, then) for status in _RUNNING for then in _RUNNING + _ENDED}


def test_the_table_is_the_spec_diagram() -> None:
    assert set(TRANSITIONS) == set(_RUNNING + _ENDED)
    assert {(s, then) for s, nexts in TRANSITIONS.items() for then in nexts} == _ALLOWED
    assert set(TERMINAL_STATUSES) == set(_ENDED)


@pytest.mark.parametrize("status", _RUNNING + _ENDED)
@pytest.mark.parametrize("then", _RUNNING + _ENDED)
def test_transitions_follow_the_table(status: Any, then: Any) -> None:
    # Reach `status` legally first (every status is one step from working).
    t = task() if status == "working" else task().moved_to(status, now=1.0)
    if (status, then) in _ALLOWED:
        moved = t.moved_to(then, now=2.0, message="m")
        assert moved.status == then and moved.last_updated_at == 2.0
        assert moved.status_message == "m" and moved.created_at == 0.0
    else:
        assert status in _ENDED
        with pytest.raises(LocalProtocolError):
            t.moved_to(then, now=2.0)


def test_a_terminal_task_keeps_its_message() -> None:
    done = task().moved_to("completed", now=1.0)
    with pytest.raises(LocalProtocolError):
        done.with_message("again", now=2.0)
    assert task().with_message("half", now=3.0).to_wire()["statusMessage"] == "half"


@pytest.mark.parametrize(
    "kw",
    [{"ttl_ms": 0}, {"ttl_ms": 1.5}, {"ttl_ms": True}, {"poll_interval_ms": -1}],
)
def test_durations_are_positive_integers(kw: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        task(**kw)


def test_an_unlimited_ttl_is_null_and_never_expires() -> None:
    t = Task.created("t", now=0.0, ttl_ms=None)
    assert t.to_wire()["ttlMs"] is None


def test_ids_and_statuses_are_checked() -> None:
    with pytest.raises(LocalProtocolError):
        Task.created("", now=0.0, ttl_ms=None)
    with pytest.raises(LocalProtocolError):
        Task(task_id="x", status="done", created_at=0, last_updated_at=0, ttl_ms=None)  # type: ignore[arg-type]


def test_detailed_tasks_carry_exactly_their_payload() -> None:
    working = task()
    assert working.detailed() == {"resultType": "complete", **working.to_wire()}
    asking = working.moved_to("input_required", now=1.0)
    requests = {"k": {"method": "elicitation/create", "params": {}}}
    assert asking.detailed(input_requests=requests)["inputRequests"] == requests
    done = working.moved_to("completed", now=1.0)
    assert done.detailed(result={"content": []})["result"] == {"content": []}
    failed = working.moved_to("failed", now=1.0)
    wire = failed.detailed(error=ErrorData(code=-32603, message="boom", data={"x": 1}))
    assert wire["error"] == {"code": -32603, "message": "boom", "data": {"x": 1}}
    assert "data" not in failed.detailed(error=ErrorData(code=-32603, message="boom"))["error"]
    for shape in (working, asking, done, failed):
        assert "result" not in shape.to_wire() and "requestState" not in shape.create_result()
    with pytest.raises(LocalProtocolError):
        done.detailed()
    with pytest.raises(LocalProtocolError):
        working.detailed(result={})
    with pytest.raises(LocalProtocolError):
        failed.detailed()
    with pytest.raises(LocalProtocolError):
        asking.detailed()
    with pytest.raises(LocalProtocolError):
        working.detailed(input_requests={})


def test_a_result_kept_encoded_is_embedded_as_it_is() -> None:
    done = task().moved_to("completed", now=1.0)
    result = {"content": [{"type": "text", "text": "\u00e9"}], "resultType": "complete"}
    encoded = dumps(result)
    answer = done.detailed(result=encoded)
    assert loads(dumps(answer)) == loads(dumps(done.detailed(result=result)))
    assert encoded in dumps(answer)  # (the bytes themselves: not decoded and encoded again)
    with pytest.raises(LocalProtocolError):
        task().detailed(result=encoded)


@pytest.mark.parametrize(
    "bad",
    [
        {"resultType": "complete"},
        {"resultType": "task", "taskId": "t"},
        {**task().create_result(), "taskId": 3},
        {**task().create_result(), "status": "done"},
        {**task().create_result(), "status": ["working"]},
        {**task().create_result(), "taskId": ""},
        {**task().create_result(), "result": {}},
        {**task().create_result(), "requestState": "s"},
        {**task().create_result(), "inputRequests": {}},
        # What a client refuses to read (parse_task_state) is not sent either.
        {**task().create_result(), "statusMessage": 5},
        {**task().create_result(), "pollIntervalMs": "500"},
        {**task().create_result(), "pollIntervalMs": -1},
        {**task().create_result(), "pollIntervalMs": None},
        {**task().create_result(), "pollIntervalMs": True},
        {**task().create_result(), "createdAt": 0},
        {**task().create_result(), "lastUpdatedAt": None},
        {**task().create_result(), "ttlMs": "60000"},
        {**task().create_result(), "ttlMs": -1},
        {**task().create_result(), "ttlMs": False},
    ],
)
def test_malformed_create_task_results_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        check_create_task_result(bad)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("createdAt", "2025-11-25T10:30:00.000Z"),
        ("createdAt", 0),
        ("createdAt", None),
        ("lastUpdatedAt", "2025-11-25T10:30:00.000Z"),
        ("lastUpdatedAt", 1.5),
        ("lastUpdatedAt", ["2025-11-25T10:30:00.000Z"]),
        ("ttlMs", None),
        ("ttlMs", 0),
        ("ttlMs", 60_000.0),
        ("ttlMs", 1.5),
        ("ttlMs", "60000"),
        ("ttlMs", -1),
        ("ttlMs", -0.5),
        ("ttlMs", True),
        ("ttlMs", float("inf")),
        ("ttlMs", {}),
    ],
)
def test_a_create_task_result_goes_out_exactly_when_a_client_reads_it(
    name: str, value: Any
) -> None:
    # The server's check and the client's reading (parse_task_state) agree on the
    # Task's timestamps (strings) and ttlMs (a non-negative number, or null).
    created = {**task().create_result(), name: value}
    refused_by_client = isinstance(parse_task_state(created, detailed=False), ErrorData)
    if refused_by_client:
        with pytest.raises(LocalProtocolError, match="CreateTaskResult"):
            check_create_task_result(created)
    else:
        check_create_task_result(created)


# ---------------------------------------------------------------- params


@pytest.mark.parametrize("params", [None, {}, {"taskId": 1}, {"taskId": ""}, []])
def test_a_task_id_is_a_non_empty_string(params: Any) -> None:
    assert isinstance(parse_task_id(params), ErrorData)
    assert isinstance(parse_update_params(params), ErrorData)


def test_update_params_need_an_input_responses_object() -> None:
    assert parse_task_id({"taskId": "a"}) == "a"
    assert isinstance(parse_update_params({"taskId": "a"}), ErrorData)
    assert isinstance(parse_update_params({"taskId": "a", "inputResponses": []}), ErrorData)
    parsed = parse_update_params({"taskId": "a", "inputResponses": {"k": {"action": "accept"}}})
    assert parsed == UpdateParams(task_id="a", input_responses={"k": {"action": "accept"}})


# ---------------------------------------------------------------- the connection


def test_a_task_result_goes_out_only_where_the_extension_was_declared() -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    created = task().create_result()
    feed(server, modern_request(1, "tools/call", {"name": "t"}))
    with pytest.raises(LocalProtocolError, match="did not declare"):
        server.send_result(1, created)
    feed(server, modern_request(2, "prompts/get", {"name": "p"}, **{CC: EXT}))
    with pytest.raises(LocalProtocolError, match="did not declare"):
        server.send_result(2, created)
    feed(server, modern_request(3, "tools/call", {"name": "t"}, **{CC: EXT}))
    with pytest.raises(LocalProtocolError, match="carries no result"):
        server.send_result(3, {**created, "result": {}})
    with pytest.raises(LocalProtocolError, match="resultType 'other'"):
        server.send_result(3, {"resultType": "other"})
    with pytest.raises(LocalProtocolError, match="ttlMs"):
        server.send_result(3, {**created, "ttlMs": "60000"})  # (a client refuses it)
    # Refused calls changed nothing: every request can still be answered.
    assert server.data_to_send() == []
    server.send_result(3, created)
    (out,) = [loads(p) for p in server.data_to_send()]
    assert out["result"]["resultType"] == "task" and out["result"]["taskId"] == "t1"
    assert "io.modelcontextprotocol/serverInfo" in out["result"]["_meta"]
    server.send_result(1, {"content": []})
    server.send_error(2, -32601, "no")


def test_a_declaring_client_receives_the_task_and_others_refuse_it() -> None:
    pair = handshaken("modern", capabilities={**CLIENT_CAPS, **EXT})
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert req.client_capabilities is not None and declares_tasks(req.client_capabilities)
    pair.server.send_result(req.request_id, task().create_result())
    got = only(pair.deliver(pair.server), ResultReceived)
    assert got.request_id == rid and got.result["taskId"] == "t1"
    # tasks/update's inputResponses are its own params, not an MRTR retry.
    pair.client.send_request("tasks/update", {"taskId": "t1", "inputResponses": {"k": {}}}, now=0.0)
    update = only(pair.deliver(pair.client), RequestReceived)
    assert update.params is not None and update.params["inputResponses"] == {"k": {}}
    assert update.input_responses is None


def test_a_client_that_did_not_declare_the_extension_refuses_a_task() -> None:
    # A server that sends one anyway (not ours: the core would refuse) is answered with
    # an invalid result, locally.
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.deliver(pair.client)
    raw = {"jsonrpc": "2.0", "id": rid, "result": task().create_result()}
    events, _ = feed(pair.client, raw)
    error = only(events, ErrorReceived).error
    assert error.code == ErrorCode.INTERNAL_ERROR and "resultType" in error.message


def test_a_legacy_session_is_not_offered_the_extension() -> None:
    caps = {**SERVER_CAPS, **EXT}
    pair = handshaken("legacy", server={"capabilities": caps})
    assert pair.client.peer_capabilities == SERVER_CAPS
    modern = handshaken("modern", server={"capabilities": caps})
    assert modern.client.peer_capabilities["extensions"] == {TASKS_EXTENSION: {}}


# ---------------------------------------------------------------- Streamable HTTP


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.parametrize(
    ("name", "status"), [("t-1", 200), ("other", 400), (None, 400), ("=?base64?dC0x?=", 200)]
)
def test_http_checks_mcp_name_against_the_task_id(
    method: str, name: str | None, status: int
) -> None:
    # streamable HTTP routing headers: Mcp-Name mirrors params.taskId (Base64 allowed).
    from mcp_sansio.http import HttpResponse  # noqa: PLC0415

    from .test_http_server import make_server, modern, modern_headers, req  # noqa: PLC0415

    server = make_server()
    params: dict[str, Any] = {"taskId": "t-1"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    body = modern(1, method, params, **{CC: EXT})
    reply = server.handle_request(req(body=body, **modern_headers(method, name)), now=0.0)
    if status == 400:
        assert isinstance(reply.decision, HttpResponse)
        assert reply.decision.status == 400
        assert loads(reply.decision.body)["error"]["code"] == -32020
    else:
        assert not isinstance(reply.decision, HttpResponse) or reply.decision.status == 200
        assert any(isinstance(getattr(e, "event", None), RequestReceived) for e in reply.events)


def test_http_names_the_task_in_mcp_name() -> None:
    from mcp_sansio._http_common import MCP_NAME_KEYS  # noqa: PLC0415

    assert {k: MCP_NAME_KEYS[k] for k in NAME_KEYS} == NAME_KEYS

"""A modern client's core holds every input-required round to the client's rules before
the application sees it, as the legacy era holds a server's requests: no I/O.

* 2026-07-28 basic/patterns/mrtr.mdx: "Servers MUST NOT send an inputRequests that the
  client has not declared support for in its capabilities". A round asking for
  sampling, roots, an elicitation mode or tool use the client never declared ends the
  request with a local ``ErrorReceived`` (-32602, what a legacy client answers an
  undeclared elicitation mode), as the legacy era refuses such a request in the core.
* A round of more than ``ConnectionConfig.max_input_requests`` questions ends it too
  (-32603), however many: no driver is handed 5000 questions.
* Nothing is asked, nothing is sent, nothing awaits input afterwards.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    ErrorReceived,
    InputRequired,
    LocalProtocolError,
    RequestReceived,
    ResultReceived,
    undeclared_input_request,
)
from mcp_sansio._json import dumps, loads

from .helpers import ConnectionPair, handshaken

SAMPLE = {"messages": [], "maxTokens": 5}
FORM = {"mode": "form", "message": "?", "requestedSchema": {"type": "object", "properties": {}}}
URL = {"mode": "url", "message": "Go", "url": "https://x.example/", "elicitationId": "e"}
SAMPLING = {"method": "sampling/createMessage", "params": SAMPLE}
TOOL_USE = {"method": "sampling/createMessage", "params": {**SAMPLE, "tools": []}}
ELICIT_FORM = {"method": "elicitation/create", "params": FORM}
ELICIT_BARE = {
    "method": "elicitation/create",
    "params": {k: v for k, v in FORM.items() if k != "mode"},
}
ELICIT_URL = {"method": "elicitation/create", "params": URL}
ROOTS = {"method": "roots/list"}


def client(capabilities: dict[str, Any], **config: Any) -> tuple[ConnectionPair, Connection]:
    """A client's core that declared ``capabilities``, after the handshake: modern
    unless ``config`` says another ``era``."""
    pair = handshaken(config.pop("era", "modern"), capabilities=capabilities, **config)
    return pair, pair.client


def answered(conn: Connection, requests: dict[str, Any]) -> list[Any]:
    """A tools/call of ``conn``'s, answered input_required with ``requests``: the events.

    (Written by hand: the server's own core never sends what the client did not declare.)
    """
    rid = conn.send_request("tools/call", {"name": "t", "arguments": {}}, now=0.0)
    conn.data_to_send()
    result = {"resultType": "input_required", "inputRequests": requests, "requestState": "s"}
    return conn.receive_message(dumps({"jsonrpc": "2.0", "id": rid, "result": result}), now=0.0)


def refused(conn: Connection, requests: dict[str, Any]) -> ErrorReceived:
    (event,) = answered(conn, requests)
    assert isinstance(event, ErrorReceived) and event.local, event
    assert event.method == "tools/call"
    # The request is over: nothing pending, nothing awaiting input, nothing sent.
    assert conn.pending_requests() == ()
    assert conn.data_to_send() == []
    with pytest.raises(LocalProtocolError, match="not awaiting input"):
        conn.retry_with_input(event.request_id, {}, now=0.0)
    return event


@pytest.mark.parametrize(
    ("capabilities", "asked", "why"),
    [
        ({}, SAMPLING, "sampling was not declared"),
        ({"elicitation": {}}, SAMPLING, "sampling was not declared"),
        ({"sampling": {}}, TOOL_USE, "sampling.tools"),
        ({}, ELICIT_FORM, "elicitation mode 'form'"),
        ({"elicitation": {"form": {}}}, ELICIT_URL, "elicitation mode 'url'"),
        ({"elicitation": {}}, ELICIT_URL, "elicitation mode 'url'"),  # {}: form only
        ({"elicitation": {"url": {}}}, ELICIT_BARE, "elicitation mode 'form'"),
        ({"sampling": {}}, ROOTS, "roots were not declared"),
    ],
    ids=[
        "sampling-undeclared",
        "sampling-elicitation-only",
        "tool-use",
        "elicitation-undeclared",
        "url-to-form-only",
        "url-to-empty-elicitation",
        "bare-form-to-url-only",
        "roots",
    ],
)
def test_an_undeclared_input_request_ends_the_request(
    capabilities: dict[str, Any], asked: dict[str, Any], why: str
) -> None:
    _, conn = client(capabilities)
    event = refused(conn, {"q": asked})
    assert event.error.code == ErrorCode.INVALID_PARAMS
    assert event.error.message.startswith("input_required refused: inputRequests['q']")
    assert why in event.error.message


@pytest.mark.parametrize(
    ("capabilities", "asked"),
    [
        ({"sampling": {}}, SAMPLING),
        ({"sampling": {"tools": {}}}, TOOL_USE),
        ({"elicitation": {}}, ELICIT_FORM),
        ({"elicitation": {}}, ELICIT_BARE),
        ({"elicitation": {"url": {}}}, ELICIT_URL),
        ({"elicitation": {"form": {}, "url": {}}}, ELICIT_URL),
        ({"roots": {}}, ROOTS),
    ],
)
def test_a_declared_input_request_reaches_the_driver(
    capabilities: dict[str, Any], asked: dict[str, Any]
) -> None:
    _, conn = client(capabilities)
    (event,) = answered(conn, {"q": asked})
    assert isinstance(event, InputRequired) and event.input_requests == {"q": asked}


@pytest.mark.parametrize("bound", [1, 3, 1_024])
def test_more_questions_than_the_bound_end_the_request(bound: int) -> None:
    caps: dict[str, Any] = {"elicitation": {}}
    config = {} if bound == 1_024 else {"max_input_requests": bound}
    _, conn = client(caps, **config)
    assert conn.config.max_input_requests == bound
    # At the bound: handed over whole.
    (event,) = answered(conn, {f"q{i}": ELICIT_FORM for i in range(bound)})
    assert isinstance(event, InputRequired) and len(event.input_requests) == bound
    conn.abandon_request(event.request_id)
    # One more: refused before anyone is asked.
    over = refused(conn, {f"q{i}": ELICIT_FORM for i in range(bound + 1)})
    assert over.error.code == ErrorCode.INTERNAL_ERROR
    assert over.error.data == {"maxInputRequests": bound}
    assert f"asked {bound + 1} questions in one round" in over.error.message


def test_the_count_is_checked_before_what_is_asked() -> None:
    # 5000 undeclared questions: one error about their number, built without reading
    # them all.
    _, conn = client({})
    event = refused(conn, {f"q{i}": SAMPLING for i in range(5_000)})
    assert event.error.data == {"maxInputRequests": 1_024}


def test_the_first_refused_entry_is_named() -> None:
    _, conn = client({"elicitation": {}})
    event = refused(conn, {"ok": ELICIT_FORM, "no": SAMPLING, "later": ROOTS})
    assert "inputRequests['no'] (sampling/createMessage)" in event.error.message


def test_a_refused_round_leaves_the_connection_usable() -> None:
    pair, conn = client({"elicitation": {}})
    refused(conn, {"q": SAMPLING})
    rid = conn.send_request("tools/list", now=0.0)
    (request,) = pair.deliver(conn)
    assert isinstance(request, RequestReceived)
    pair.server.send_result(request.request_id, {"tools": []})
    (answer,) = pair.deliver(pair.server)
    assert isinstance(answer, ResultReceived) and answer.request_id == rid


def test_the_bound_is_validated() -> None:
    with pytest.raises(ValueError, match="max_input_requests"):
        ConnectionConfig(max_input_requests=0)


def test_undeclared_input_request_is_the_rule_in_public() -> None:
    declared: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
    assert undeclared_input_request({}, {}) is None
    assert undeclared_input_request({"a": ELICIT_FORM, "b": SAMPLING}, declared) is None
    why = undeclared_input_request({"a": ELICIT_FORM, "b": ELICIT_URL}, declared)
    assert why is not None and why.startswith("inputRequests['b'] (elicitation/create)")
    why = undeclared_input_request({"a": ROOTS}, declared)
    assert why is not None and "roots" in why
    assert undeclared_input_request({"a": "x"}, declared) == (
        "inputRequests['a'] is not a request object"
    )
    why = undeclared_input_request({"a": {"method": "tools/call"}}, declared)
    assert why is not None and "'tools/call'" in why
    # The server's text is quoted clipped.
    long = {"method": "elicitation/create", "params": {"mode": "m" * 10_000}}
    why = undeclared_input_request({"a": long}, declared)
    assert (
        why is not None
        and len(why) < 300
        and why.endswith("more characters) was not declared in the client's capabilities")
    )


# -- the answers (client/elicitation.mdx: "Clients SHOULD validate all responses against
# the provided schema"): retry_with_input refuses, and changes nothing, an answer that
# does not have its result's shape or does not fit the form asked.

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5},
        "size": {"type": "string", "enum": ["s", "m"]},
        "tone": {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}, "maxItems": 2},
        "picks": {  # (a titled multi-select: its choices are its items' anyOf consts)
            "type": "array",
            "items": {"anyOf": [{"const": "p", "title": "P"}, {"const": "q", "title": "Q"}]},
        },
    },
    "required": ["name"],
}
FORM_ASKED = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": SCHEMA}}
EVERYTHING = {"form": FORM_ASKED, "url": ELICIT_URL, "sample": SAMPLING, "roots": ROOTS}
CAN_ANSWER: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
NAN, INF = math.nan, math.inf
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


def awaiting(requests: dict[str, Any]) -> tuple[Connection, InputRequired]:
    _, conn = client(CAN_ANSWER)
    (event,) = answered(conn, requests)
    assert isinstance(event, InputRequired)
    return conn, event


@pytest.mark.parametrize(
    "answers",
    [
        {"form": {"action": "accept", "content": {"name": "Ann"}}},
        {
            "form": {
                "action": "accept",
                "content": {
                    "name": "Ann",
                    "size": "m",
                    "tone": "a",
                    "age": 3.0,  # (an integer: JSON Schema counts 3.0 as one)
                    "ratio": 0.5,
                    "ok": False,
                    "tags": ["y", "x"],
                    "picks": ["q", "p"],
                    "other": [1],  # (a field the form does not name: not the client's to judge)
                },
            }
        },
        {"form": {"action": "decline"}, "url": {"action": "accept"}},
        {"form": {"action": "cancel"}, "sample": SAMPLED, "roots": {"roots": []}},
        {"roots": {"roots": [{"uri": "file:///w", "name": "w"}]}},
        {},  # (unanswered questions: the server asks them again, mrtr.mdx)
    ],
)
def test_answers_that_fit_are_sent(answers: dict[str, Any]) -> None:
    conn, event = awaiting(EVERYTHING)
    conn.retry_with_input(event.request_id, answers, now=0.0)
    (retry,) = conn.data_to_send()
    assert loads(retry)["params"].get("inputResponses", {}) == answers


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"zzz": {"action": "decline"}}, "inputResponses['zzz'] answers no question asked"),
    ({"form": 5}, "an answer is an object, not int"),
    ({"form": {"content": {"name": "Ann"}}}, "action is 'accept', 'decline' or 'cancel'"),
    ({"form": {"action": "yes"}}, "action is 'accept', 'decline' or 'cancel'"),
    ({"form": {"action": "accept", "content": [1]}}, "content is an object"),
    ({"form": {"action": "accept"}}, "required field 'name' is missing"),
    ({"form": {"action": "accept", "content": {"name": 5}}}, "'name': expected a string"),
    ({"form": {"action": "accept", "content": {"name": ""}}}, "'name': its length"),
    ({"form": {"action": "accept", "content": {"name": "A", "size": "xl"}}}, "'size': not"),
    ({"form": {"action": "accept", "content": {"name": "A", "tone": "b"}}}, "'tone': not"),
    ({"form": {"action": "accept", "content": {"name": "A", "age": 2.5}}}, "an integer"),
    ({"form": {"action": "accept", "content": {"name": "A", "age": -1}}}, "out of bounds"),
    ({"form": {"action": "accept", "content": {"name": "A", "age": True}}}, "a number"),
    ({"form": {"action": "accept", "content": {"name": "A", "ok": "yes"}}}, "a boolean"),
    ({"form": {"action": "accept", "content": {"name": "A", "tags": "x"}}}, "list of strings"),
    ({"form": {"action": "accept", "content": {"name": "A", "tags": ["z"]}}}, "choices"),
    (
        {"form": {"action": "accept", "content": {"name": "A", "tags": ["x", "y", "x"]}}},
        "number of items",
    ),
    (
        {"form": {"action": "accept", "content": {"name": "A", "picks": ["p", "r"]}}},
        "'picks': a value is not",
    ),
    ({"form": {"action": "accept", "content": {"name": "A", "ratio": NAN}}}, "a finite number"),
    ({"form": {"action": "accept", "content": {"name": "A", "ratio": -INF}}}, "a finite number"),
    ({"sample": {**SAMPLED, "role": "system"}}, "role is 'user' or 'assistant'"),
    ({"sample": {k: v for k, v in SAMPLED.items() if k != "model"}}, "names its model"),
    ({"sample": {**SAMPLED, "content": "hi"}}, "content is a content block"),
    ({"roots": {"roots": "/"}}, "roots are a list of objects with a uri"),
    ({"roots": {"roots": [{"name": "no uri"}]}}, "roots are a list of objects with a uri"),
]
"""Answers that do not fit the round asked (``EVERYTHING``), and what is said of each."""


@pytest.mark.parametrize(("answers", "problem"), REFUSED)
def test_answers_that_do_not_fit_are_refused(answers: dict[str, Any], problem: str) -> None:
    conn, event = awaiting(EVERYTHING)
    with pytest.raises(LocalProtocolError, match="cannot retry with these answers") as info:
        conn.retry_with_input(event.request_id, answers, now=0.0)
    assert problem in str(info.value)
    # Nothing changed: nothing sent, and the round can still be answered.
    assert conn.data_to_send() == []
    conn.retry_with_input(event.request_id, {"form": {"action": "decline"}}, now=0.0)
    assert len(conn.data_to_send()) == 1


# -- a legacy client's answer to an elicitation/create is held to the same rule, as it is
# sent (send_result): one depth of checking in both eras.


def legacy_asked() -> tuple[Connection, Any]:
    """A legacy client's core, asked ``FORM_ASKED``: it and the request's id."""
    _, conn = client(CAN_ANSWER, era="legacy")
    asked = {"jsonrpc": "2.0", "id": "e1", **FORM_ASKED}
    (event,) = conn.receive_message(dumps(asked), now=0.0)
    assert isinstance(event, RequestReceived) and event.method == "elicitation/create"
    return conn, event.request_id


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"name": "Ann"}},
        {"action": "accept", "content": {"name": "Ann", "picks": ["q"], "ratio": 0.5}},
        {"action": "decline"},
    ],
)
def test_a_legacy_answer_that_fits_is_sent(answer: dict[str, Any]) -> None:
    conn, rid = legacy_asked()
    conn.send_result(rid, answer)
    (sent,) = conn.data_to_send()
    assert loads(sent) == {"jsonrpc": "2.0", "id": rid, "result": answer}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (answers["form"], problem)
        for answers, problem in REFUSED
        if set(answers) == {"form"} and isinstance(answers["form"], dict)
    ],
)
def test_a_legacy_answer_that_does_not_fit_is_refused(answer: dict[str, Any], problem: str) -> None:
    conn, rid = legacy_asked()
    with pytest.raises(LocalProtocolError, match="cannot send this answer") as info:
        conn.send_result(rid, answer)
    assert problem in str(info.value)
    # Nothing changed: nothing sent, and the request can still be answered.
    assert conn.data_to_send() == []
    conn.send_result(rid, {"action": "decline"})
    assert len(conn.data_to_send()) == 1


def test_a_form_that_requires_a_non_string_is_the_servers_mistake_not_a_missing_answer() -> None:
    # A hostile form's "required" may hold anything; a dict there raised TypeError
    # (unhashable) out of retry_with_input, which promises LocalProtocolError at most.
    form = {
        "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {**SCHEMA, "required": [{"x": 1}, 5]}},
    }
    conn, event = awaiting({"form": form})
    answers = {"form": {"action": "accept", "content": {"name": "Ann"}}}
    conn.retry_with_input(event.request_id, answers, now=0.0)
    (retry,) = conn.data_to_send()
    assert loads(retry)["params"]["inputResponses"] == answers


# -- a task-augmented elicitation/create (2025-11-25 tasks) is answered with its task.

TASK = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2025-11-25T10:30:00.000Z",
    "lastUpdatedAt": "2025-11-25T10:30:00.000Z",
    "ttl": 60000,
}


def task_asked(task_augmented: bool = True) -> tuple[Connection, Any]:
    """A legacy client's core that declared 2025-11-25 tasks for elicitation (the core
    lets an application on the bare core serve them), asked ``FORM_ASKED`` with a
    ``task``: it and the request's id."""
    caps = {**CAN_ANSWER, "tasks": {"requests": {"elicitation": {"create": {}}}}}
    pair, _ = client(caps, era="legacy")
    params: dict[str, Any] = {"message": "?", "requestedSchema": SCHEMA}
    if task_augmented:
        params["task"] = {"ttl": 60000}
    asked = {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": params}
    (event,) = pair.client.receive_message(dumps(asked), now=0.0)
    assert isinstance(event, RequestReceived) and event.method == "elicitation/create"
    return pair.client, event.request_id


@pytest.mark.parametrize(
    "task", [TASK, {**TASK, "ttl": None, "pollInterval": 500, "statusMessage": "queued"}]
)
def test_a_task_augmented_elicitation_is_answered_with_a_create_task_result(
    task: dict[str, Any],
) -> None:
    # tasks.mdx (2025-11-25): "Receivers that accept a task-augmented request MUST return
    # a CreateTaskResult": not an ElicitResult, so the form is not what it is held to.
    conn, rid = task_asked()
    conn.send_result(rid, {"task": task})
    (sent,) = conn.data_to_send()
    assert loads(sent) == {"jsonrpc": "2.0", "id": rid, "result": {"task": task}}


@pytest.mark.parametrize(
    "task",
    [
        5,
        {k: v for k, v in TASK.items() if k != "ttl"},
        {**TASK, "status": "done"},
        {**TASK, "status": ["working"]},
        {**TASK, "taskId": 1},
        {**TASK, "ttl": "60000"},
        {k: v for k, v in TASK.items() if k != "createdAt"},
        # The schema's Task: createdAt and lastUpdatedAt strings, ttl an integer or null.
        {**TASK, "createdAt": 0},
        {**TASK, "lastUpdatedAt": None},
        {**TASK, "ttl": True},
        {**TASK, "ttl": 1.5},
        # The schema's optional members: pollInterval an integer, statusMessage a string.
        {**TASK, "pollInterval": "500"},
        {**TASK, "pollInterval": 1.5},
        {**TASK, "pollInterval": None},
        {**TASK, "statusMessage": 5},
        {**TASK, "statusMessage": None},
    ],
)
def test_a_malformed_create_task_result_is_refused(task: Any) -> None:
    conn, rid = task_asked()
    with pytest.raises(LocalProtocolError, match="CreateTaskResult"):
        conn.send_result(rid, {"task": task})
    # Nothing changed: nothing sent, and the request can still be answered.
    assert conn.data_to_send() == []
    conn.send_result(rid, {"task": TASK})
    assert len(conn.data_to_send()) == 1


def test_a_task_augmented_elicitation_may_still_be_answered_in_place() -> None:
    # (An ElicitResult stays held to the form, task or not.)
    conn, rid = task_asked()
    with pytest.raises(LocalProtocolError, match="required field 'name' is missing"):
        conn.send_result(rid, {"action": "accept"})
    conn.send_result(rid, {"action": "accept", "content": {"name": "Ann"}})
    assert len(conn.data_to_send()) == 1


def test_a_task_is_no_answer_to_a_request_that_asked_for_none() -> None:
    conn, rid = task_asked(task_augmented=False)
    with pytest.raises(LocalProtocolError, match="action is 'accept', 'decline' or 'cancel'"):
        conn.send_result(rid, {"task": TASK})


# -- the form is checked in form mode only: a URL-mode request has no form to fill.

URL_WITH_A_FORM = {
    "method": "elicitation/create",
    "params": {**URL, "requestedSchema": SCHEMA},  # (stray: SCHEMA requires 'name')
}


def test_a_url_elicitation_is_accepted_without_content_modern() -> None:
    conn, event = awaiting({"url": URL_WITH_A_FORM})
    conn.retry_with_input(event.request_id, {"url": {"action": "accept"}}, now=0.0)
    (retry,) = conn.data_to_send()
    assert loads(retry)["params"]["inputResponses"] == {"url": {"action": "accept"}}


def test_a_url_elicitation_is_accepted_without_content_legacy() -> None:
    _, conn = client(CAN_ANSWER, era="legacy")
    (event,) = conn.receive_message(
        dumps({"jsonrpc": "2.0", "id": "u1", **URL_WITH_A_FORM}), now=0.0
    )
    assert isinstance(event, RequestReceived) and event.method == "elicitation/create"
    conn.send_result(event.request_id, {"action": "accept"})
    (sent,) = conn.data_to_send()
    assert loads(sent)["result"] == {"action": "accept"}

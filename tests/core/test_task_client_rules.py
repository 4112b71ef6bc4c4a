"""The tasks extension's client-side rules and its status notifications, in the core:
reading what a server reports about a task, the polling interval, and the
``taskIds`` of a ``subscriptions/listen`` filter."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ErrorData
from mcp_sansio import _modern as m
from mcp_sansio._tasks import (
    TASKS_EXTENSION,
    TASKS_NOTIFICATION,
    Task,
    TaskState,
    parse_task_state,
    poll_delay,
    status_notification,
)

WORKING: dict[str, Any] = Task.created("t1", now=0.0, ttl_ms=None, poll_interval_ms=500).to_wire()


def test_a_well_formed_task_is_read_in_each_status() -> None:
    state = parse_task_state(WORKING, expected_id="t1")
    assert isinstance(state, TaskState)
    assert (state.status, state.ttl_ms, state.poll_interval_ms, state.terminal) == (
        "working",
        None,
        500,
        False,
    )
    done = parse_task_state({**WORKING, "status": "completed", "result": {"content": []}})
    assert isinstance(done, TaskState) and done.result == {"content": []} and done.terminal
    failed = parse_task_state(
        {**WORKING, "status": "failed", "error": {"code": -32603, "message": "x", "data": 1}}
    )
    assert isinstance(failed, TaskState) and failed.error == ErrorData(
        code=-32603, message="x", data=1
    )
    asking = {"q": {"method": "elicitation/create", "params": {}}}
    waiting = parse_task_state({**WORKING, "status": "input_required", "inputRequests": asking})
    assert isinstance(waiting, TaskState) and waiting.input_requests == asking
    # A CreateTaskResult carries no payload, whatever its status.
    seed = parse_task_state({**WORKING, "status": "completed"}, detailed=False)
    assert isinstance(seed, TaskState) and seed.result is None
    cancelled = parse_task_state({**WORKING, "status": "cancelled", "statusMessage": "bye"})
    assert isinstance(cancelled, TaskState) and cancelled.status_message == "bye"


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        ([], "not an object"),
        ({**WORKING, "taskId": ""}, "taskId"),
        ({**WORKING, "taskId": "t2"}, "expected task"),
        ({**WORKING, "status": "done"}, "unknown status"),
        ({**WORKING, "createdAt": None}, "createdAt"),
        ({**WORKING, "statusMessage": 3}, "statusMessage"),
        ({**WORKING, "ttlMs": "1"}, "ttlMs"),
        ({**WORKING, "ttlMs": True}, "ttlMs"),
        ({**WORKING, "pollIntervalMs": None}, "pollIntervalMs"),
        ({**WORKING, "pollIntervalMs": -1}, "pollIntervalMs"),
        ({**WORKING, "status": "completed", "result": []}, "result"),
        ({**WORKING, "status": "failed"}, "JSON-RPC error"),
        ({**WORKING, "status": "failed", "error": {"code": True, "message": "x"}}, "error"),
        ({**WORKING, "status": "input_required", "inputRequests": {"q": {}}}, "inputRequests"),
    ],
)
def test_a_malformed_task_is_an_error_naming_the_fault(obj: Any, why: str) -> None:
    error = parse_task_state(obj, expected_id="t1")
    assert isinstance(error, ErrorData)
    assert error.code == -32603 and why in error.message


@pytest.mark.parametrize(
    ("suggested", "seconds"),
    [(None, 1.0), (1, 0.1), (0, 0.1), (2500, 2.5), (3_600_000, 60.0)],
)
def test_the_poll_interval_is_the_servers_clamped(suggested: int | None, seconds: float) -> None:
    assert poll_delay(suggested) == seconds
    assert poll_delay(suggested, minimum_ms=10, maximum_ms=10) == 0.01


def test_a_status_notification_is_the_detailed_task_without_its_discriminator() -> None:
    task = Task.created("t1", now=0.0, ttl_ms=1000)
    detailed = task.moved_to("completed", now=1.0).detailed(result={"content": []})
    params = status_notification(detailed)
    assert "resultType" not in params and params["result"] == {"content": []}
    assert params == {k: v for k, v in detailed.items() if k != "resultType"}


def test_the_filter_reads_task_ids_within_its_bound() -> None:
    flt = m.parse_listen_filter({"notifications": {"taskIds": ["a", "b", "a"]}})
    assert isinstance(flt, m.SubscriptionFilter) and flt.task_ids == ("a", "b")
    assert flt.to_wire() == {"taskIds": ["a", "b"]}
    assert flt.matches(TASKS_NOTIFICATION, {"taskId": "a"})
    assert not flt.matches(TASKS_NOTIFICATION, {"taskId": "c"})
    assert not flt.matches(TASKS_NOTIFICATION, {"taskId": 1})
    assert not m.SubscriptionFilter().matches(TASKS_NOTIFICATION, {"taskId": "a"})
    at_bound = m.parse_listen_filter({"notifications": {"taskIds": ["x"] * 3}}, max_task_ids=3)
    assert isinstance(at_bound, m.SubscriptionFilter)
    past = m.parse_listen_filter({"notifications": {"taskIds": ["x"] * 4}}, max_task_ids=3)
    assert isinstance(past, ErrorData) and past.code == -32602
    for bad in ("a", [1], None):
        error = m.parse_listen_filter({"notifications": {"taskIds": bad}})
        assert isinstance(error, ErrorData) and "taskIds" in error.message


def test_task_ids_are_honored_only_by_a_server_with_the_extension() -> None:
    flt = m.SubscriptionFilter(task_ids=["a"])
    assert flt.honored_by({}).task_ids == ()
    assert flt.honored_by({"extensions": {TASKS_EXTENSION: {}}}).task_ids == ("a",)

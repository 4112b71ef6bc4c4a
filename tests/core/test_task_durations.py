"""Reading a task's durations (``ttlMs``, ``pollIntervalMs``), which the extension's
schema types ``number`` and its prose calls integer milliseconds."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mcp_sansio import ErrorData
from mcp_sansio._tasks import TaskState, parse_task_state

STAMP = "2026-01-01T00:00:00Z"


def read(**durations: Any) -> TaskState | ErrorData:
    created = {"taskId": "t", "status": "working", "createdAt": STAMP, "lastUpdatedAt": STAMP}
    return parse_task_state({**created, **durations}, detailed=False)


@pytest.mark.parametrize(
    ("written", "read_as"),
    [(60_000, 60_000), (60_000.0, 60_000), (0.0, 0), (250.5, 251), (0.001, 1), (99.999, 100)],
)
def test_a_duration_is_a_number_of_milliseconds_rounded_up(written: Any, read_as: int) -> None:
    # 60000.0 is an integer (JSON Schema: any number with a zero fraction); a fraction
    # is rounded up (a poll no sooner, a TTL no shorter, than the server said).
    state = read(ttlMs=written, pollIntervalMs=written)
    assert isinstance(state, TaskState)
    assert state.ttl_ms == read_as and state.poll_interval_ms == read_as
    assert type(state.ttl_ms) is int and type(state.poll_interval_ms) is int


@pytest.mark.parametrize("bad", [-1, -0.5, math.inf, math.nan, True, "5", [5]])
@pytest.mark.parametrize("name", ["ttlMs", "pollIntervalMs"])
def test_a_duration_that_is_no_non_negative_number_is_refused(name: str, bad: Any) -> None:
    refused = read(**{"ttlMs": 1, name: bad})
    assert isinstance(refused, ErrorData)
    assert refused.message.endswith(f"{name} must be a non-negative number of milliseconds")


def test_a_null_ttl_is_unlimited() -> None:
    state = read(ttlMs=None)
    assert isinstance(state, TaskState) and state.ttl_ms is None

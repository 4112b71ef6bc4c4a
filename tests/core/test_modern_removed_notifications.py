"""A modern-only server (supported versions 2026-07-28 alone) reports the notifications
2026-07-28 removed (changelog.mdx) as invalid, as it does notifications/initialized, instead
of handing them to the application. A dual-era server cannot tell which era a
notification belongs to, so it leaves them alone."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    InvalidMessageReceived,
    NotificationReceived,
)
from mcp_sansio._json import dumps

from .helpers import SERVER_CAPS

REMOVED = (
    "notifications/roots/list_changed",
    "notifications/elicitation/complete",
    "notifications/tasks/status",
)


def notify(conn: Connection, method: str, params: dict[str, Any] | None = None) -> list[Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    events = conn.receive_message(dumps(msg), now=0.0)
    assert conn.data_to_send() == []  # a notification is never answered
    return events


def modern_only_server() -> Connection:
    config = ConnectionConfig(capabilities=SERVER_CAPS, supported_versions=("2026-07-28",))
    return Connection("server", config)


@pytest.mark.parametrize("method", REMOVED)
@pytest.mark.parametrize("params", [None, {}])
def test_modern_only_server_reports_removed_notifications(
    method: str, params: dict[str, Any] | None
) -> None:
    server = modern_only_server()
    (event,) = notify(server, method, params)
    assert isinstance(event, InvalidMessageReceived), event
    assert event.error.code == ErrorCode.METHOD_NOT_FOUND
    assert event.error.message == (
        f"Method not found: {method} does not exist in protocol version 2026-07-28"
    )


def test_modern_only_server_still_passes_other_notifications() -> None:
    server = modern_only_server()
    (event,) = notify(server, "com.example/ping-me", {"x": 1})
    assert event == NotificationReceived(method="com.example/ping-me", params={"x": 1})


@pytest.mark.parametrize("method", REMOVED)
def test_dual_era_server_leaves_them_to_the_application(method: str) -> None:
    # Before any session, the notification may belong to a legacy session to come.
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    (event,) = notify(server, method, {})
    assert event == NotificationReceived(method=method, params={})

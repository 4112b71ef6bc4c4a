"""``BlockingClient``: a roots callable that returns a bad root is the application's
bug, answered as the trio ``Callbacks`` answer it: a ``CallbackAnswerError`` naming the
problem (logged, and sent to the server as -32603 with that message), not a bare
"Internal error"."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from mcp_trio import McpError
from tests.test_blocking_client import spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")


def test_legacy_bad_roots_are_refused_by_name(caplog: pytest.LogCaptureFixture) -> None:
    def bad() -> list[Any]:
        return [{"uri": "file:///a", "name": 5}]

    with (
        caplog.at_level(logging.ERROR, logger="mcp_trio"),
        spawn(era="legacy", roots=bad) as client,
        pytest.raises(McpError, match="name: expected a string") as info,
    ):
        # The server relays the error it was answered.
        client.call_tool("ask", {"what": ["roots"]})
    assert "Internal error" not in str(info.value)
    (refused,) = [r.getMessage() for r in caplog.records if "is refused" in r.getMessage()]
    assert "the roots callback returned" in refused and "name: expected a string" in refused

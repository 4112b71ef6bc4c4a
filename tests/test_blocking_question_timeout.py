"""The blocking client: the time its ``on_elicitation`` / ``on_sampling`` takes to answer
a legacy server is not counted against the call's ``timeout`` (the core holds the
client's timers while the question is open; see ``tests/core/test_question_holds_timers.py``).

The callback does not sleep: it moves the client's clock (``CallClock`` reads
``time.monotonic``) on by a minute, as a user who took that long would.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

import mcp_trio._blocking
from tests.test_blocking_client import spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")


@pytest.mark.parametrize("era", ["legacy", "auto"])
@pytest.mark.parametrize("what", ["elicit", "sample"])
def test_a_slow_answer_does_not_time_the_call_out(
    era: str, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skipped = [0.0]
    clock = SimpleNamespace(monotonic=lambda: time.monotonic() + skipped[0])
    monkeypatch.setattr(mcp_trio._blocking, "time", clock)

    def elicit(params: Any) -> dict[str, Any]:
        skipped[0] += 60  # the user thinks for a minute
        return {"action": "accept", "content": {"name": "Ada"}}

    def sample(params: Any) -> dict[str, Any]:
        skipped[0] += 60  # the model, and a human who reviews its answer
        return {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}

    with spawn(era=era, timeout=5, on_elicitation=elicit, on_sampling=sample) as client:
        text = client.call_tool("ask", {"what": [what]}).text
        assert text == {"elicit": "elicit=accept:Ada", "sample": "sample=4"}[what]
        # The timer runs again afterwards: a plain call still gets its answer in time.
        assert client.call_tool("echo", {"text": "after"}).text == "after"

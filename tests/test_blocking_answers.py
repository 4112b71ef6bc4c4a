"""The blocking client checks its callbacks' answers as the Trio client does
(``tests/trio/test_client_answers.py`` has the rules; input it never declared:
``tests/test_input_required_reason.py``)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from mcp_sansio import types as t
from mcp_trio import McpError
from mcp_trio._client_common import CallbackAnswerError
from tests.test_blocking_client import spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")


def test_legacy_bad_answer_is_refused_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    def no_model(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "4"}}

    with (
        caplog.at_level(logging.ERROR, logger="mcp_trio"),
        spawn(era="legacy", on_sampling=no_model, roots=["file:///a"]) as client,
    ):
        # The server relays the error it was answered, which names the problem.
        with pytest.raises(McpError, match="model: required field missing"):
            client.call_tool("ask", {"what": ["sample"]})
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///a"
    (refused,) = [r.getMessage() for r in caplog.records if "is refused" in r.getMessage()]
    assert "invalid CreateMessageResult: model: required field missing" in refused


def test_modern_bad_answer_fails_the_call() -> None:
    def wrong(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"n": 5})  # the form asks a string

    with spawn("sansio", on_elicitation=wrong) as client:
        with pytest.raises(CallbackAnswerError, match="field 'n': expected a string"):
            client.call_tool("greet")
        assert client.connection.pending_requests() == ()

"""A modern server's input request the client never declared fails the call with an
:class:`InputRequiredError` that says why (its message and ``reason``), not only with
the text of a missing callback; both clients, the trio ``Callbacks`` and
``BlockingClient``."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mcp_sansio import InputRequired
from mcp_sansio import types as t
from mcp_trio import InputRequiredError
from mcp_trio._client_callbacks import Callbacks
from mcp_trio._client_common import build_capabilities
from tests.test_blocking_client import spawn

WITH_TOOLS = {
    "method": "sampling/createMessage",
    "params": {"messages": [], "maxTokens": 5, "tools": []},
}
URL = {
    "method": "elicitation/create",
    "params": {"mode": "url", "message": "m", "url": "https://example.com/", "elicitationId": "e"},
}


def event(**requests: Any) -> InputRequired:
    return InputRequired(
        request_id=1, method="tools/call", input_requests=requests, request_state=None, round=1
    )


SAMPLING = build_capabilities(sampling=True, elicitation=False, roots=False)
"""What a client with ``on_sampling`` alone declares."""


async def never(params: Any) -> Any:
    raise AssertionError("not run")  # pragma: no cover


def test_callbacks_say_what_was_not_declared() -> None:
    async def main() -> None:
        with pytest.raises(InputRequiredError) as info:
            await Callbacks(on_sampling=never, capabilities=SAMPLING).provide_input(
                event(s=WITH_TOOLS)
            )
        assert info.value.reason is not None and "sampling.tools" in info.value.reason
        assert str(info.value).endswith(f"refused: {info.value.reason}")
        assert "['s']" in str(info.value)
        # No callback at all: no reason, the message as before.
        with pytest.raises(InputRequiredError) as info:
            await Callbacks(capabilities={}).provide_input(event(s=WITH_TOOLS))
        assert info.value.reason is None
        assert str(info.value) == "tools/call needs input: ['s']"

    trio.run(main)


def test_blocking_client_says_what_was_not_declared() -> None:
    def form_only(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
        raise AssertionError("not run")  # pragma: no cover

    with (
        spawn("sansio", on_elicitation=form_only) as client,
        pytest.raises(InputRequiredError) as info,
    ):
        client._provide_input(event(q=URL))
    assert info.value.reason is not None and "'url'" in info.value.reason
    assert f"refused: {info.value.reason}" in str(info.value)

"""``prompts/get`` arguments are ``{[key: string]: string}`` in every revision: the
client refuses to send anything else (``TypeError``, before sending), and a server
answers a peer that sends it anyway with -32602."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio

from mcp_sansio import ErrorCode
from mcp_trio import McpError
from mcp_trio._client_common import named_params
from mcp_trio._server import Server
from mcp_trio.testing import ERAS, client_for

IO_TIMEOUT = 10.0


def echo_server(calls: list[dict[str, Any]]) -> Server:
    server = Server("prompts")

    @server.prompt()
    def echo(text: str) -> str:
        calls.append({"text": text})
        return f"echo {text}"

    return server


@pytest.mark.parametrize(
    ("value", "shown"),
    [(3, "int 3"), (None, "NoneType None"), (True, "bool True"), (["x"], "list ['x']")],
)
def test_a_prompt_argument_that_is_no_string_is_a_type_error(value: Any, shown: str) -> None:
    expected = rf"prompt arguments must be strings .* 'text' is {re.escape(shown)}"
    with pytest.raises(TypeError, match=expected):
        named_params("echo", {"ok": "fine", "text": value}, strings=True)
    assert named_params("echo", {"text": "x"}, strings=True) == {
        "name": "echo",
        "arguments": {"text": "x"},
    }
    assert named_params("echo", {"text": value})["arguments"] == {"text": value}  # (a tool's)


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_refuses_before_sending(era: str) -> None:
    calls: list[dict[str, Any]] = []
    with trio.fail_after(IO_TIMEOUT):
        async with client_for(echo_server(calls), era=era) as client:  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="'text' is int 3"):
                await client.get_prompt("echo", {"text": 3})  # type: ignore[dict-item]
            assert calls == []
            result = await client.get_prompt("echo", {"text": "3"})
    assert calls == [{"text": "3"}]
    assert result.messages[0].content.text == "echo 3"  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("value", [3, None, True, ["x"], {"a": "b"}, 1.5])
async def test_a_peer_s_non_string_prompt_argument_is_invalid_params(era: str, value: Any) -> None:
    calls: list[dict[str, Any]] = []
    with trio.fail_after(IO_TIMEOUT):
        async with client_for(echo_server(calls), era=era) as client:  # type: ignore[arg-type]
            params = {"name": "echo", "arguments": {"text": value}}
            with pytest.raises(McpError) as caught:
                await client.request("prompts/get", params)
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert "object of strings" in caught.value.message
    assert calls == []

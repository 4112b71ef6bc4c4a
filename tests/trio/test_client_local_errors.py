"""A server's answer the client cannot use raises ``RemoteProtocolError``, never an
``McpError`` that would pass for the server's own error.

2026-07-28 basic/index.mdx, Error Codes: "Implementations surfacing local errors in
JSON-RPC-shaped structures should ensure they cannot be mistaken for errors received from
the peer." The core reports such an answer as ``ErrorReceived(local=True)`` (code -32603);
the Trio client raised ``McpError(-32603)`` for it, exactly as for a server that answered
-32603 itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ErrorCode, RemoteProtocolError
from mcp_trio import McpError

from .test_client_hostile import HandDriven, first_time_only, hand_driven


def answering(**answer: Any) -> Any:
    async def script(server: HandDriven, message: dict[str, Any]) -> bool:
        await server.send({"jsonrpc": "2.0", "id": message["id"], **answer})
        return True

    return script


@pytest.mark.parametrize(
    ("method", "result", "why"),
    [
        ("tools/call", {"resultType": "weird"}, "unrecognized resultType 'weird'"),
        ("tools/list", {"resultType": "input_required", "requestState": "s"}, "may not return"),
        ("tools/call", {"resultType": "input_required", "requestState": 7}, "not a string"),
    ],
)
async def test_an_unusable_result_raises_remote_protocol_error(
    method: str, result: dict[str, Any], why: str, autojump_clock: MockClock
) -> None:
    async with hand_driven({method: first_time_only(answering(result=result))}) as client:
        with pytest.raises(RemoteProtocolError, match=why) as info:
            if method == "tools/call":
                await client.call_tool("t")
            else:
                await client.list_tools()
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        assert await client.list_tools() == []  # (the session goes on)


async def test_the_servers_own_internal_error_is_still_an_mcp_error(
    autojump_clock: MockClock,
) -> None:

    error = {"code": -32603, "message": "Invalid result: unrecognized resultType 'weird'"}
    async with hand_driven({"tools/call": answering(error=error)}) as client:
        with pytest.raises(McpError) as info:
            await client.call_tool("t")
        assert info.value.code == ErrorCode.INTERNAL_ERROR

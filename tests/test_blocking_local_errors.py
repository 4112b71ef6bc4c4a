"""The blocking client raises ``RemoteProtocolError`` for a server's answer it cannot use,
never an ``McpError`` that would pass for the server's own error (2026-07-28
basic/index.mdx, Error Codes), as the Trio client does
(``tests/trio/test_client_local_errors.py``)."""

from __future__ import annotations

import sys

import pytest

from mcp_sansio import ErrorCode, RemoteProtocolError
from mcp_trio import McpError
from mcp_trio._blocking import BlockingClient

WAIT = 5.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

# A modern stdio server: tools/call answers a resultType nobody knows, tools/list asks for
# input (which it may not), prompts/list fails with the server's own -32603.
SERVER = r"""
import json, sys

for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, rid = message.get("method"), message.get("id")
    if rid is None:
        continue
    if method == "server/discover":
        result = {
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "prompts": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "odd", "version": "0"}},
        }
        answer = {"result": result}
    elif method == "tools/call":
        answer = {"result": {"resultType": "weird"}}
    elif method == "tools/list":
        answer = {"result": {"resultType": "input_required", "requestState": "s"}}
    else:
        answer = {"error": {"code": -32603, "message": "Invalid result: it is the server's"}}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, **answer}) + "\n")
    sys.stdout.flush()
"""


def test_an_unusable_result_is_a_remote_protocol_error_and_the_servers_error_is_not() -> None:
    with BlockingClient.stdio(
        [sys.executable, "-c", SERVER],
        era="modern",
        timeout=WAIT,
        handshake_timeout=WAIT,
        stop_timeout=1.0,
    ) as client:
        with pytest.raises(RemoteProtocolError, match="unrecognized resultType 'weird'") as info:
            client.call_tool("t")
        assert info.value.code == ErrorCode.INTERNAL_ERROR
        with pytest.raises(RemoteProtocolError, match="tools/list may not return"):
            client.list_tools()
        with pytest.raises(McpError, match="it is the server's") as refused:
            client.list_prompts()
        assert refused.value.code == ErrorCode.INTERNAL_ERROR

"""A scripted stdio run (``mcp-trio run app.py < requests.jsonl``) answers every request.

The end of stdin is the client's shutdown: requests still running when
``shutdown_grace_period`` ends are answered -32603 "server shutting down" (as
Streamable HTTP answers them) before they are cancelled, not left out of the transcript.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorCode, LineSplitter
from mcp_sansio._json import dumps, loads
from mcp_trio import Server, SessionConfig

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "script", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(rid: int, seconds: float) -> dict[str, Any]:
    params = {"name": "wait", "arguments": {"seconds": seconds}, "_meta": ENVELOPE}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def test_a_request_outliving_the_grace_period_is_answered_shutting_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server("slow", session_config=SessionConfig(shutdown_grace_period=5))

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleep."""
        await trio.sleep(seconds)
        return "done"

    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    script = b"".join(dumps(message) + b"\n" for message in (call(1, 2), call(2, 8)))
    await to_server.send_all(script)
    await to_server.aclose()  # the whole script, then the end of input
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: server.serve_stdio(stdin=stdin, stdout=stdout))
        splitter, answers = LineSplitter(), []
        while chunk := await from_server.receive_some():
            splitter.feed(chunk)
            while (line := splitter.next_message()) is not None:
                assert isinstance(line, bytes)
                answers.append(loads(line))
    assert trio.current_time() - start == pytest.approx(5)
    assert [answer["id"] for answer in answers] == [1, 2]
    assert answers[0]["result"]["content"][0]["text"] == "done"
    assert answers[1]["error"] == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "server shutting down",
    }

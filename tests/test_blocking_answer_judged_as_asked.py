"""The blocking client judges a callback's elicitation answer against the form as the
server sent it, as the core does as it sends it (``tests/trio/test_answer_judged_as_asked.py``
has the why): a form outside the spec's (``anyOf`` on a string field), which the typed
form drops, cannot make them disagree."""

from __future__ import annotations

import sys
from typing import Any, Literal

import pytest

from mcp_sansio import types as t
from mcp_trio._blocking import BlockingClient
from mcp_trio._client_common import CallbackAnswerError
from tests.test_blocking_client import ROOT, TIMEOUT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")

#: A server from the core alone (argv[1]: its era). Asked ``tools/call``, it asks an
#: elicitation whose string field lists its choices as ``anyOf`` consts (written by hand:
#: a legacy core's request is raw), and the call's text is the answer it got, as JSON.
SERVER = r"""
import sys
from mcp_sansio import Connection, ConnectionConfig, RequestReceived
from mcp_sansio._json import dumps, loads

era = sys.argv[1]
conn = Connection("server", ConnectionConfig(
    era=era, capabilities={"tools": {}}, implementation={"name": "asker", "version": "1"}))
asked = {"method": "elicitation/create", "params": {"message": "f?", "requestedSchema": {
    "type": "object", "properties": {"f": {"type": "string", "anyOf": [{"const": "a"}]}}}}}
call = None
def done(rid, got):
    conn.send_result(rid, {"content": [{"type": "text", "text": dumps(got).decode()}]})
while line := sys.stdin.buffer.readline():
    message = loads(line)
    if message.get("id") == "e1" and "method" not in message:
        done(call, message)
    else:
        for event in conn.receive_message(line, now=0.0):
            if not isinstance(event, RequestReceived):
                continue
            if event.method == "tools/list":
                conn.send_result(event.request_id, {"tools": []})
            elif era == "modern" and event.input_responses is None:
                conn.send_input_required(event.request_id, {"q": asked}, now=0.0)
            elif era == "modern":
                done(event.request_id, event.input_responses)
            else:
                call = event.request_id
                sys.stdout.buffer.write(dumps({"jsonrpc": "2.0", "id": "e1", **asked}) + b"\n")
    for out in conn.data_to_send():
        sys.stdout.buffer.write(out + b"\n")
    sys.stdout.buffer.flush()
"""


def spawn(era: Literal["legacy", "modern"], value: str) -> BlockingClient:
    def answer(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"f": value}}

    return BlockingClient.stdio(
        [sys.executable, "-c", SERVER, era],
        cwd=ROOT,
        era=era,
        on_elicitation=answer,
        timeout=TIMEOUT,
        handshake_timeout=TIMEOUT,
        stop_timeout=2.0,
    )


def test_a_legacy_server_is_told_the_callbacks_mistake() -> None:
    with spawn("legacy", "zzz") as client:
        text = client.call_tool("t").text
    assert '"code":-32603' in text
    assert "on_elicitation accepted with content that does not fit" in text
    assert "'f': not one of its choices" in text


def test_a_modern_call_fails_with_the_callbacks_mistake() -> None:
    with spawn("modern", "zzz") as client:
        with pytest.raises(CallbackAnswerError, match="'f': not one of its choices"):
            client.call_tool("t")
        assert client.connection.pending_requests() == ()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_choice_of_the_form_goes_through(era: Literal["legacy", "modern"]) -> None:
    with spawn(era, "a") as client:
        text = client.call_tool("t").text
    assert '{"action":"accept","content":{"f":"a"}}' in text

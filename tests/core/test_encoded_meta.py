"""The constant ``_meta`` objects of the modern hot paths are encoded once.

A modern server's ``serverInfo`` and a modern client's request envelope go out in
every message; the fast paths embed them already encoded (an orjson ``Fragment``).
tests/core/test_fastpath.py checks that the bytes are those of the general path; these
tests pin what happens when the configured ``implementation`` cannot be encoded.
"""

from __future__ import annotations

from typing import Literal

import pytest

from mcp_sansio import Connection, ConnectionConfig
from mcp_sansio._json import dumps, loads

from .helpers import SERVER_CAPS

V = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": V,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_request(rid: int) -> bytes:
    params = {"name": "x", "_meta": ENVELOPE}
    return dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def test_a_server_info_that_cannot_be_encoded_fails_each_reply_alike() -> None:
    info = {"name": "s", "version": object()}
    server = Connection("server", ConnectionConfig(implementation=info, capabilities=SERVER_CAPS))
    for rid in (1, 2):  # the second reply comes after the first failed: no shortcut learnt
        server.receive_message(modern_request(rid), now=0.0)
        with pytest.raises(TypeError):
            server.send_result(rid, {"content": []})
        assert server.inflight_requests() == (rid,)  # no state changed: still answerable
        server.send_error(rid, -32603, "no")
        (payload,) = server.data_to_send()
        assert loads(payload) == {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {"code": -32603, "message": "no"},
        }


def test_a_server_info_is_encoded_as_the_general_path_decorates() -> None:
    info = {"name": "s", "version": "1", "title": "Ünïcode"}
    server = Connection("server", ConnectionConfig(implementation=info, capabilities=SERVER_CAPS))
    for rid in (1, 2, 3):  # the first reply learns the shortcut, the others take it
        server.receive_message(modern_request(rid), now=0.0)
        server.send_result(rid, {"content": []})
        (payload,) = server.data_to_send()
        assert loads(payload)["result"] == {
            "content": [],
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": info},
        }


@pytest.mark.parametrize("era", ["modern", "auto"])
def test_a_client_info_that_cannot_be_encoded_fails_start_and_changes_nothing(
    era: Literal["modern", "auto"],
) -> None:
    # The envelope is encoded where it is built, before the probe is registered: the
    # probe's TypeError leaves no request in flight, no timer and nothing to send, and
    # start() may be called again (it raised "already started" over a probe that never
    # went out when the envelope was first encoded with the message).
    info = {"name": "c", "version": object()}
    client = Connection("client", ConnectionConfig(implementation=info, era=era))
    for _ in (1, 2):
        with pytest.raises(TypeError):
            client.start(now=0.0)
        assert client.pending_requests() == ()
        assert client.next_deadline() is None
        assert client.data_to_send() == []

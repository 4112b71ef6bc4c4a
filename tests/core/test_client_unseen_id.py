"""A message of the server's whose id cannot be seen (a stray stdout line, a line cut
short) is reported to the client, never answered: an error with a null id is a JSON-RPC
server's answer, and writing one back for every stray line filled the server's stdin
while the server filled its stdout (a stdio handshake deadlocked on 64 KiB of junk)."""

from __future__ import annotations

from typing import Literal

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    InvalidMessageReceived,
)
from mcp_sansio._json import loads

from .helpers import ConnectionPair

JUNK = [b"starting up...", b"{not json", b'{"jsonrpc":"2.0","id":', b"\xff"]


def client(era: Literal["auto", "legacy", "modern"]) -> Connection:
    return Connection(
        "client", ConnectionConfig(implementation={"name": "c", "version": "1"}, era=era)
    )


def assert_reported_only(conn: Connection, junk: bytes) -> None:
    events = conn.receive_bytes(junk + b"\n", now=0.0)
    (event,) = [e for e in events if isinstance(e, InvalidMessageReceived)]
    assert event.request_id is None
    assert event.error.code == ErrorCode.PARSE_ERROR
    assert conn.bytes_to_send() == b""


@pytest.mark.parametrize("junk", JUNK)
@pytest.mark.parametrize("era", ["auto", "legacy", "modern"])
def test_junk_before_the_era_is_settled_is_not_answered(
    era: Literal["auto", "legacy", "modern"], junk: bytes
) -> None:
    conn = client(era)
    conn.start(now=0.0)
    conn.bytes_to_send()  # (the probe or initialize)
    assert_reported_only(conn, junk)


@pytest.mark.parametrize("junk", JUNK)
def test_junk_in_a_legacy_session_is_not_answered(junk: bytes) -> None:
    pair = ConnectionPair(
        client_config=ConnectionConfig(implementation={"name": "c", "version": "1"}, era="legacy")
    )
    pair.handshake()
    assert_reported_only(pair.client, junk)
    # The server's side of the same rule is unchanged: JSON-RPC answers it, id null.
    pair.server.receive_bytes(junk + b"\n", now=0.0)
    (out,) = [loads(line) for line in pair.server.bytes_to_send().splitlines()]
    assert out["id"] is None
    assert out["error"]["code"] == ErrorCode.PARSE_ERROR


def test_a_request_with_its_id_in_sight_is_still_answered_under_it() -> None:
    pair = ConnectionPair(
        client_config=ConnectionConfig(implementation={"name": "c", "version": "1"}, era="legacy")
    )
    pair.handshake()
    pair.client.receive_bytes(
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":1e400}}\n', now=0.0
    )
    (out,) = [loads(line) for line in pair.client.bytes_to_send().splitlines()]
    assert out["id"] == 7
    assert out["error"]["code"] == ErrorCode.PARSE_ERROR

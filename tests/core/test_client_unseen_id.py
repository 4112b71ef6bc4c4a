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
    ConnectionConfigOptions,
    ErrorCode,
    InvalidMessageReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import ConnectionPair, handshaken

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
    pair = handshaken("legacy")
    assert_reported_only(pair.client, junk)
    # The server's side of the same rule is unchanged: JSON-RPC answers it, id null.
    pair.server.receive_bytes(junk + b"\n", now=0.0)
    (out,) = [loads(line) for line in pair.server.bytes_to_send().splitlines()]
    assert out["id"] is None
    assert out["error"]["code"] == ErrorCode.PARSE_ERROR


def test_a_request_with_its_id_in_sight_is_still_answered_under_it() -> None:
    pair = handshaken("legacy")
    pair.client.receive_bytes(
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":1e400}}\n', now=0.0
    )
    (out,) = [loads(line) for line in pair.client.bytes_to_send().splitlines()]
    assert out["id"] == 7
    assert out["error"]["code"] == ErrorCode.PARSE_ERROR


# The same rule for what is read whole but has no id to answer under: a batch refused
# whole (not allowed in the agreed version, empty, too large) and an invalid request
# whose id cannot be used. A client reports them; a server answers them with id null
# (JSON-RPC 2.0 §5: "If there was an error in detecting the id ... it MUST be Null").
NO_USABLE_ID: list[tuple[str, object]] = [
    ("2025-11-25", [{"jsonrpc": "2.0", "id": 9, "method": "ping"}]),  # no batches here
    ("2025-06-18", [{"jsonrpc": "2.0", "method": "notifications/message"}]),
    ("2025-03-26", []),  # an empty batch
    ("2025-03-26", [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(3)]),  # > 2
    ("2025-11-25", {"jsonrpc": "2.0", "id": True, "method": "ping"}),
    ("2025-11-25", {"jsonrpc": "2.0", "id": None, "method": "ping"}),
    ("2025-11-25", {"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
    ("2025-11-25", {"jsonrpc": "1.0", "id": [1], "method": "ping"}),
    ("2025-11-25", 5),  # not an object
    ("2025-11-25", "ping"),
]


def session(version: str) -> ConnectionPair:
    both: ConnectionConfigOptions = {"supported_versions": (version,), "max_batch_size": 2}
    return handshaken("legacy", **both, server={**both, "era": "legacy"})


@pytest.mark.parametrize(("version", "message"), NO_USABLE_ID)
@pytest.mark.parametrize("receiver", ["client", "server"])
def test_a_message_with_no_usable_id_is_answered_by_a_server_only(
    receiver: str, version: str, message: object
) -> None:
    pair = session(version)
    conn = pair.client if receiver == "client" else pair.server
    events = conn.receive_message(dumps(message), now=0.0)
    (event,) = [e for e in events if isinstance(e, InvalidMessageReceived)]
    assert (event.request_id, event.error.code) == (None, ErrorCode.INVALID_REQUEST)
    out = [loads(m) for m in conn.data_to_send()]
    if receiver == "client":
        assert out == []
    else:
        error = {"code": event.error.code, "message": event.error.message}
        assert out == [{"jsonrpc": "2.0", "id": None, "error": error}]


def test_a_batch_before_the_era_is_settled_is_not_answered() -> None:
    conn = client("auto")
    conn.start(now=0.0)
    conn.bytes_to_send()  # (the probe)
    batch = [{"jsonrpc": "2.0", "id": 9, "method": "ping"}]
    (event,) = conn.receive_message(dumps(batch), now=0.0)
    assert isinstance(event, InvalidMessageReceived)
    assert (event.request_id, event.error.code) == (None, ErrorCode.INVALID_REQUEST)
    assert conn.bytes_to_send() == b""


def test_an_array_in_a_split_batch_is_not_answered() -> None:
    # receive_decoded: an element of a batch that the binding split itself.
    pair = session("2025-03-26")
    (event,) = pair.client.receive_decoded([{"jsonrpc": "2.0", "id": 9, "method": "ping"}], now=0.0)
    assert isinstance(event, InvalidMessageReceived)
    assert event.request_id is None
    assert pair.client.data_to_send() == []

"""``receive_message(data, decoded=...)`` is ``receive_message(data)`` without the parse.

The Streamable HTTP layers parse each message to route it, then hand the parsed value
to the connection with the bytes (``decoded``), so that no message is parsed twice.
Each test drives two connections brought to the same state, feeds one the bytes alone
and its twin the bytes with what they parse to, and compares everything observable
(events, bytes on the wire, tables; see ``test_fastpath.observe``): requests,
results, errors and notifications, on both paths of ``receive_message``, a batch where
2025-03-26 allows one and where nothing does, a message over ``max_message_size``
(judged by the bytes, whatever ``decoded`` is), and a closed connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sansio import Connection, Event, InvalidMessageReceived
from mcp_sansio._json import dumps, loads

from .helpers import handshaken
from .test_fastpath import (
    _with_pending,
    legacy_pair,
    modern_pair,
    observe,
    outcome,
    requests,
    responses,
)

Pair = Callable[[], tuple[Connection, Connection]]


def both_ways(
    plain: Connection, parsed: Connection, data: bytes, decoded: Any
) -> tuple[list[Event], list[Any]]:
    """Feed ``data`` to ``plain`` and ``data`` with ``decoded`` to ``parsed``; assert
    the same outcome and state; return the events and what was sent (parsed)."""
    expected = outcome(lambda: plain.receive_message(data, now=0.0))
    got = outcome(lambda: parsed.receive_message(data, now=0.0, decoded=decoded))
    assert got == expected
    state = observe(parsed)
    assert state == observe(plain)
    assert expected[0] == "returned"
    events: list[Event] = expected[1]
    return events, [loads(payload) for payload, *_ in state[0]]


def twins(make: Pair, side: int) -> tuple[Connection, Connection]:
    return make()[side], make()[side]


# ---------------------------------------------------------------- every kind of message


@settings(max_examples=200, deadline=None)
@given(st.lists(requests(), min_size=1, max_size=4))
def test_legacy_server_takes_decoded_requests_alike(messages: list[Any]) -> None:
    plain, parsed = twins(legacy_pair, 1)
    for message in messages:
        both_ways(plain, parsed, dumps(message), loads(dumps(message)))


@settings(max_examples=200, deadline=None)
@given(st.lists(requests(modern=True), min_size=1, max_size=4))
def test_modern_server_takes_decoded_requests_alike(messages: list[Any]) -> None:
    plain, parsed = twins(modern_pair, 1)
    for message in messages:
        both_ways(plain, parsed, dumps(message), loads(dumps(message)))


@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
@settings(max_examples=200, deadline=None)
@given(messages=st.lists(responses(), min_size=1, max_size=4))
def test_client_takes_decoded_responses_alike(make: Pair, messages: list[Any]) -> None:
    plain, parsed = twins(_with_pending(make), 0)
    base = plain._next_id - 5  # the ids of the five requests in flight are base+1..base+5
    for message in messages:
        if type(message.get("id")) is int:
            message["id"] += base
        both_ways(plain, parsed, dumps(message), loads(dumps(message)))


@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
def test_each_kind_of_message_alike(make: Pair) -> None:
    """A request, a notification (progress, cancellation), a result and an error answer,
    taken down the fast path and the general one: the same as from the bytes."""
    plain, parsed = twins(_with_pending(make), 0)
    rid = plain._next_id - 4  # the second request in flight: the one with progress
    token = rid
    for message in (
        {"jsonrpc": "2.0", "id": 90, "method": "roots/list"},  # a request of the server's
        {"jsonrpc": "2.0", "id": 91, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1},
        },
        {"jsonrpc": "2.0", "id": rid, "result": {"content": []}},  # fast path
        {"jsonrpc": "2.0", "id": rid - 1, "error": {"code": -32000, "message": "no"}},
        {"jsonrpc": "2.0", "id": rid + 1, "result": "not an object"},  # invalid answer
        {"jsonrpc": "2.0", "id": rid, "result": {}},  # late: ignored
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 90}},
    ):
        both_ways(plain, parsed, dumps(message), message)


# ---------------------------------------------------------------- batches


def batch_pair(version: str) -> tuple[Connection, Connection]:
    """A ready legacy client and server of ``version``."""
    pair = handshaken("legacy", supported_versions=(version,))
    return pair.client, pair.server


BATCH = [
    {"jsonrpc": "2.0", "id": 7, "method": "ping"},
    {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
    {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
    [{"jsonrpc": "2.0", "id": 9, "method": "ping"}],  # (an array in a batch: invalid)
    {"jsonrpc": "2.0", "id": 10},
]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
@pytest.mark.parametrize("batch", [BATCH, []], ids=["batch", "empty"])
def test_a_decoded_list_is_a_batch_as_the_bytes_are(version: str, batch: list[Any]) -> None:
    """A list is a batch (2025-03-26: each element answered, the replies in one array)
    or refused whole (-32600, where no batch is allowed, and an empty one), as from the
    bytes; not an invalid element, as receive_decoded takes a list."""
    (_, plain), (_, parsed) = batch_pair(version), batch_pair(version)
    events, sent = both_ways(plain, parsed, dumps(batch), loads(dumps(batch)))
    if version == "2025-03-26" and batch:
        # tools/list and the notification reach the application, the invalid elements
        # are reported; the replies wait for tools/list's answer, then go in one array.
        assert sorted(type(e).__name__ for e in events) == [
            "InvalidMessageReceived",
            "InvalidMessageReceived",
            "NotificationReceived",
            "RequestReceived",
        ]
        assert sent == []
        for conn in (plain, parsed):
            conn.send_result(8, {"tools": []})
        (replies,) = [loads(m) for m in parsed.data_to_send()]
        assert [replies] == [loads(m) for m in plain.data_to_send()]
        # (The nested array is answered -32600; the id-only element, an answer, is not.)
        assert [(r["id"], "error" in r) for r in replies] == [(7, False), (None, True), (8, False)]
    else:
        (refused,) = events
        assert isinstance(refused, InvalidMessageReceived)
        assert refused.error.code == -32600
        assert [m["error"]["code"] for m in sent] == [-32600]


# ---------------------------------------------------------------- size, null, closed


@pytest.mark.parametrize(
    "decoded",
    [
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},  # what the bytes parse to
        {"jsonrpc": "2.0", "id": 6, "method": "ping"},  # (or anything else: unread)
        None,
    ],
)
def test_the_size_bound_applies_to_the_bytes(decoded: Any) -> None:
    """Over ``max_message_size`` bytes, ``decoded`` is not read: the message is refused
    under the id seen in the bytes (-32600), as without it."""
    data = dumps({"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"pad": "x" * 300}})

    def make() -> tuple[Connection, Connection]:
        pair = handshaken("auto", server={"max_message_size": 256})
        return pair.client, pair.server

    plain, parsed = twins(make, 1)
    _, (answer,) = both_ways(plain, parsed, data, decoded)
    assert answer["id"] == 5 and answer["error"]["code"] == -32600
    # Within the bound, the decoded value is what is taken.
    small = dumps({"jsonrpc": "2.0", "id": 11, "method": "ping"})
    _, (pong,) = both_ways(plain, parsed, small, loads(small))
    assert pong == {"jsonrpc": "2.0", "id": 11, "result": {}}


def test_none_parses_the_bytes() -> None:
    """``decoded=None`` is "parse it": a JSON ``null`` (or anything) read from the bytes."""
    for data in (b"null", b"[1", dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})):
        plain, parsed = twins(legacy_pair, 1)
        both_ways(plain, parsed, data, None)


def test_a_closed_connection_drops_decoded_messages() -> None:
    plain, parsed = twins(legacy_pair, 1)
    plain.receive_eof(now=0.0)
    parsed.receive_eof(now=0.0)
    message = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
    assert both_ways(plain, parsed, dumps(message), message) == ([], [])

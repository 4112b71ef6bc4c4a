"""The window of our finished request ids (``remembered_ids``): a late or duplicate
answer is told as such exactly while its id is among the last ``remembered_ids`` to
finish, across any number of generation flips, and never crashes the connection;
the setting itself is a count. No I/O."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest

from mcp_sansio import Connection, ConnectionConfig, ResponseIgnored, ResultReceived
from mcp_sansio._json import dumps

from .helpers import SERVER_CAPS


def _client(count: int) -> Connection:
    """A legacy client after its handshake, remembering ``count`` finished ids."""
    client = Connection(
        "client",
        ConnectionConfig(era="legacy", remembered_ids=count, max_pending_requests=10_000),
    )
    client.start(now=0.0)
    _answer(client, 1)
    return client


def _answer(client: Connection, rid: Any) -> list[Any]:
    result: dict[str, Any] = {}
    if rid == 1:
        result = {"protocolVersion": "2025-11-25", "capabilities": SERVER_CAPS}
    events = client.receive_message(dumps({"jsonrpc": "2.0", "id": rid, "result": result}), now=0.0)
    client.data_to_send()
    return events


def _ignored(client: Connection, rid: Any) -> str:
    events = _answer(client, rid)
    found = [e for e in events if isinstance(e, ResponseIgnored)]
    assert len(found) == 1, events
    return found[0].reason


def test_a_late_answer_after_two_flips_is_told_not_crashed() -> None:
    # A late answer builds the index of the older generation; once two more
    # generations have filled, that index must not be used for the new older one
    # (it was: a KeyError out of receive_message, a peer crashing the connection).
    client = _client(2)
    a, b = (client.send_request("ping", now=0.0) for _ in range(2))
    client.cancel_request(a)
    client.cancel_request(b)  # generation full: a, b become the older one
    assert _ignored(client, a) == "late"  # (the index of [a, b] is built)
    flips = [client.send_request("ping", now=0.0) for _ in range(4)]
    for rid in flips:  # two more generations: [c, d] then [e, f] is the older one
        client.cancel_request(rid)
    assert _ignored(client, flips[2]) == "late"
    assert _ignored(client, flips[3]) == "late"
    assert _ignored(client, a) == "unknown"


def _run(count: int, seed: int, steps: int) -> None:
    """Random sends, answers, cancellations and repeated answers, checked against a
    reference model: the last ``count`` finished ids and why each finished."""
    r = random.Random(seed)
    client = _client(count)
    sent: list[Any] = []
    pending: list[Any] = []
    window: deque[Any] = deque(maxlen=count)
    why: dict[Any, str] = {}
    for _ in range(steps):
        step = r.choice(["send", "send", "answer", "cancel", "again"])
        if step == "send":
            rid = client.send_request("ping", now=0.0)
            sent.append(rid)
            pending.append(rid)
        elif step in ("answer", "cancel") and pending:
            rid = pending.pop(r.randrange(len(pending)))
            if step == "answer":
                events = _answer(client, rid)
                assert [e.request_id for e in events if isinstance(e, ResultReceived)] == [rid]
                why[rid] = "duplicate"
            else:
                client.cancel_request(rid)
                why[rid] = "late"
            window.append(rid)
        elif step == "again" and len(sent) > len(pending):
            rid = r.choice([rid for rid in sent if rid not in pending])
            assert _ignored(client, rid) == (why[rid] if rid in window else "unknown")
        # what is held: two generations and the older one's index, each within the bound
        assert len(client._finished_out) < max(count, 1)
        assert len(client._finished_before) <= max(count, 1)
        assert client._finished_rank is None or len(client._finished_rank) <= max(count, 1)


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 7])
def test_the_window_matches_a_reference_model(count: int) -> None:
    for seed in range(4):
        _run(count, seed, 400)


@pytest.mark.parametrize("bad", [-5, -1, True, False, 2.0, "3", None])
def test_remembered_ids_is_a_count(bad: object) -> None:
    with pytest.raises(ValueError, match="remembered_ids"):
        ConnectionConfig(remembered_ids=bad)  # type: ignore[arg-type]


def test_remembered_ids_may_be_zero() -> None:
    client = _client(0)
    rid = client.send_request("ping", now=0.0)
    client.cancel_request(rid)
    assert _ignored(client, rid) == "unknown"

"""receive_message's fast path reads the envelope with subscripts: a missing member
raises KeyError there, which must send the message to the general path unchanged.

Each case is delivered to twin connections, one down the fast path and one down the
general path (tests/core/test_fastpath.py's twins), and everything observable must
match: the events (errors under the message's id included), bytes and tables. Each
missing member here is a ``break`` in place of the ``except KeyError``: if the fast
path let the KeyError out, or delivered the message itself, the twins would differ.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ResultReceived
from mcp_sansio._json import dumps

from .test_fastpath import _with_pending, deliver, legacy_pair, modern_pair

PAIRS = {"legacy": legacy_pair, "modern": modern_pair}


def _requests(era: str) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"name": "x"}
    if era == "modern":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return [
        {"id": 90, "method": "tools/call", "params": params},  # no "jsonrpc"
        {"jsonrpc": "2.0", "method": "tools/call", "params": params},  # no "id"
        {"jsonrpc": "2.0", "id": 91, "method": "tools/call", "params": params},  # control
    ]


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_requests_missing_members_take_the_general_path(era: str) -> None:
    (_, fast), (_, general) = PAIRS[era](), PAIRS[era]()
    for message in _requests(era):
        deliver(fast, general, dumps(message))


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_responses_missing_members_take_the_general_path(era: str) -> None:
    make = _with_pending(PAIRS[era])
    (fast, _), (general, _) = make(), make()
    first = fast.pending_requests()[0]  # a plain tools/call of the client's, in flight
    assert first == general.pending_requests()[0]
    for message in [
        {"id": first, "result": {"content": []}},  # no "jsonrpc"
        {"jsonrpc": "2.0", "result": {"content": []}},  # no "id"
        {"jsonrpc": "2.0", "id": first},  # neither "result" nor "error"
        {"jsonrpc": "2.0", "id": 10_000, "result": {"content": []}},  # not ours
        {"jsonrpc": "2.0", "id": first, "result": {"content": []}},  # control
    ]:
        deliver(fast, general, dumps(message))
    assert first not in fast.pending_requests()


def test_the_control_response_is_the_fast_paths() -> None:
    # (So the cases above do reach the fast path's reads.)
    client, _ = _with_pending(legacy_pair)()
    first = client.pending_requests()[0]
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": first, "result": {"content": []}}
    (event,) = client.receive_message(dumps(message), now=0.0)
    assert type(event) is ResultReceived and event.request_id == first

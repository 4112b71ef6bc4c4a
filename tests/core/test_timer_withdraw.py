"""``Connection.handle_timer(now, withdraw=)``: a binding takes back what it never wrote.

For each expired request a ``notifications/cancelled`` would be sent for, the core
first asks ``withdraw(rid)``: ``True`` (the binding took the request out of its queue
with none of it written) means the peer never saw the id, so nothing is sent for it;
the request still ends as ``RequestTimedOut``. ``initialize``, a request held for a
new session (and anything on a closed connection) send no cancellation anyway:
the binding is not asked.
"""

from __future__ import annotations

from typing import Literal

import pytest

from mcp_sansio import ConnectionConfig, RequestId, RequestTimedOut
from mcp_sansio._json import loads

from .helpers import CLIENT_CAPS, ConnectionPair, handshaken


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_withdrawn_request_times_out_with_no_cancellation(
    era: Literal["legacy", "modern"],
) -> None:
    client = handshaken(era).client
    one = client.send_request("tools/call", {"name": "a"}, now=0.0, timeout=1)
    two = client.send_request("tools/call", {"name": "b"}, now=0.0, timeout=1)
    three = client.send_request("tools/list", now=0.0, timeout=5)
    client.data_to_send()
    asked: list[RequestId] = []

    def withdraw(rid: RequestId) -> bool:
        asked.append(rid)
        return rid == one  # the binding still had it queued: taken back

    events = client.handle_timer(1.0, withdraw=withdraw)
    assert sorted(asked) == [one, two]
    assert events == [
        RequestTimedOut(request_id=one, method="tools/call"),
        RequestTimedOut(request_id=two, method="tools/call"),
    ]
    sent = [loads(m) for m in client.data_to_send()]
    assert [(m["method"], m["params"]["requestId"]) for m in sent] == [
        ("notifications/cancelled", two)
    ]
    assert client.pending_requests() == (three,)
    assert client.next_deadline() == 5


def test_initialize_and_held_requests_are_not_asked() -> None:
    asked: list[RequestId] = []

    def withdraw(rid: RequestId) -> bool:
        asked.append(rid)
        return True

    # initialize: the lifecycle forbids cancelling it, so there is nothing to spare.
    pair = ConnectionPair(
        ConnectionConfig(
            implementation={"name": "c", "version": "1"},
            capabilities=CLIENT_CAPS,
            era="legacy",
            request_timeout=1,
        )
    )
    pair.client.start(now=0.0)
    events = pair.client.handle_timer(2.0, withdraw=withdraw)
    assert [e.method for e in events if isinstance(e, RequestTimedOut)] == ["initialize"]
    # Held for a new session (never sent on it): nothing to cancel.
    client = handshaken("legacy").client
    client.restart_session(now=0.0)
    client.send_request("tools/list", now=0.0, timeout=1)
    client.data_to_send()
    events = client.handle_timer(1.0, withdraw=withdraw)
    assert [e.method for e in events if isinstance(e, RequestTimedOut)] == ["tools/list"]
    assert asked == []


def test_without_withdraw_every_expired_request_is_cancelled() -> None:
    client = handshaken("legacy").client
    rid = client.send_request("tools/list", now=0.0, timeout=1)
    client.data_to_send()
    assert client.handle_timer(1.0) == [RequestTimedOut(request_id=rid, method="tools/list")]
    (message,) = client.data_to_send()
    assert loads(message)["params"] == {"requestId": rid, "reason": "timeout"}

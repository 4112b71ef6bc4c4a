"""``Connection.refuse_listen``: the server's hook over a modern ``subscriptions/listen``
(which the core serves itself, so no handler could refuse it). Asked once per valid
listen and about nothing else; its error is the whole answer, with no event and
nothing left behind. No I/O."""

from __future__ import annotations

from typing import Any

from mcp_sansio import ErrorData, ErrorReceived, SubscriptionNotificationReceived
from mcp_sansio._json import loads

from .test_connection_modern import modern_pair, only

NOTES = {"notifications": {"resourceSubscriptions": ["notes://secret"]}}
REFUSAL = ErrorData(
    code=403,
    message="Insufficient scope",
    data={"error": "insufficient_scope", "scope": "notes"},
)


def test_a_refused_listen_is_answered_its_error_with_no_event_and_leaves_nothing() -> None:
    pair = modern_pair()
    asked: list[tuple[Any, Any]] = []

    def refuse(rid: Any, params: Any) -> ErrorData | None:
        asked.append((rid, params))
        return REFUSAL

    pair.server.refuse_listen = refuse
    # Not asked about other requests (the hot path pays nothing for it).
    pair.client.send_request("tools/list", None, now=0.0)
    pair.client.send_request("tools/call", {"name": "t", "arguments": {}}, now=0.0)
    assert len(pair.deliver(pair.client)) == 2 and asked == []
    pair.server.data_to_send()  # (unanswered: no handler here)

    lid = pair.client.send_request("subscriptions/listen", NOTES, now=0.0)
    server_events = pair.deliver(pair.client)
    # The refusal is the hook's decision, not a broken message: no event at all (an
    # InvalidMessageReceived would be logged by the binding as the peer's fault).
    assert server_events == []
    assert len(asked) == 1 and asked[0][0] == lid
    assert asked[0][1]["notifications"] == NOTES["notifications"]
    answer = pair.server.data_to_send()
    assert [loads(p) for p in answer] == [{"jsonrpc": "2.0", "id": lid, "error": REFUSAL.to_wire()}]
    client_events = pair.client.receive_message(answer[0], now=0.0)
    assert only(client_events, ErrorReceived).error == REFUSAL
    # Nothing was acknowledged or kept: no subscription, no request in flight.
    assert pair.server.subscriptions() == ()
    assert lid not in pair.server.inflight_requests()
    assert not pair.server.listens_for("notifications/resources/updated", {"uri": "notes://secret"})

    # Allowed now (a wider token), a listen is acknowledged and delivers.
    pair.server.refuse_listen = None
    again = pair.client.send_request("subscriptions/listen", NOTES, now=0.0)
    pair.exchange()
    assert pair.server.subscriptions() == (again,)
    pair.server.send_notification("notifications/resources/updated", {"uri": "notes://secret"})
    delivered = pair.deliver(pair.server)
    assert only(delivered, SubscriptionNotificationReceived).subscription_id == again


def test_an_allowed_listen_is_acknowledged() -> None:
    pair = modern_pair()
    pair.server.refuse_listen = lambda rid, params: None
    lid = pair.client.send_request("subscriptions/listen", NOTES, now=0.0)
    pair.exchange()
    assert pair.server.subscriptions() == (lid,)
    assert pair.server.listens_for("notifications/resources/updated", {"uri": "notes://secret"})


def test_an_invalid_listen_is_refused_before_the_hook_is_asked() -> None:
    pair = modern_pair()
    asked: list[Any] = []

    def refuse(rid: Any, params: Any) -> ErrorData | None:
        asked.append(rid)  # pragma: no cover (not asked)
        return None  # pragma: no cover

    pair.server.refuse_listen = refuse
    bad = {"notifications": {"resourceSubscriptions": "notes://secret"}}  # (not a list)
    lid = pair.client.send_request("subscriptions/listen", bad, now=0.0)
    pair.deliver(pair.client)
    answer = [loads(p) for p in pair.server.data_to_send()]
    assert [a["id"] for a in answer] == [lid] and answer[0]["error"]["code"] == -32602
    assert asked == []

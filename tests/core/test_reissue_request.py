"""``Connection.reissue_request``: a modern request whose answer was lost (Streamable
HTTP: its response stream broke) is sent again as a new request, with a new id
(2026-07-28 changelog: "clients MUST re-issue it as a new request with a new request
ID"), keeping what the core holds for it: its params (an input round's too), its
deadline, its progress callback's token mapping and its listen; the old id is finished.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
    RequestReceived,
    RequestTimedOut,
    ResponseIgnored,
    ResultReceived,
    SubscriptionNotificationReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import handshaken

ELICIT = {
    "confirm": {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Sure?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    }
}


def _sent(client: Connection) -> list[dict[str, Any]]:
    out = [loads(p) for p in client.data_to_send()]
    assert all(type(m) is dict for m in out)
    return out


def _answer(client: Connection, rid: Any, now: float = 0.0) -> list[Any]:
    return client.receive_message(
        dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": []}}), now=now
    )


def _progress(client: Connection, token: Any, now: float = 0.0) -> list[Any]:
    params = {"progressToken": token, "progress": 1}
    return client.receive_message(
        dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}), now=now
    )


def test_a_reissue_is_a_new_request_with_the_same_method_and_params() -> None:
    client = handshaken("modern").client
    rid = client.send_request("tools/call", {"name": "t", "arguments": {"a": 1}}, now=0.0)
    (first,) = _sent(client)
    new = client.reissue_request(rid, now=1.0)
    assert new != rid and client.pending_requests() == (new,)
    (again,) = _sent(client)
    assert again["id"] == new and again["method"] == "tools/call"
    assert again["params"] == first["params"]
    # The old id is finished: its late answer is dropped, the new one answers.
    (ignored,) = _answer(client, rid)
    assert isinstance(ignored, ResponseIgnored) and ignored.reason == "late"
    (done,) = _answer(client, new)
    assert isinstance(done, ResultReceived) and done.request_id == new
    assert client.data_to_send() == []  # (nothing cancels the old one)


def test_the_deadline_stands_across_a_reissue() -> None:
    client = handshaken("modern", max_request_time=30.0).client
    rid = client.send_request("tools/call", {"name": "t"}, now=0.0, timeout=10.0)
    client.data_to_send()
    new = client.reissue_request(rid, now=8.0)
    client.data_to_send()
    assert client.next_deadline() == 10.0  # not re-armed from now (8 + 10)
    assert client.handle_timer(9.9) == []
    (timed_out,) = client.handle_timer(10.0)
    assert isinstance(timed_out, RequestTimedOut) and timed_out.request_id == new
    assert client.pending_requests() == () and client.next_deadline() is None


def test_progress_moves_to_the_new_token_and_rearms_as_before() -> None:
    client = handshaken("modern").client
    rid = client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True, timeout=10.0)
    (first,) = _sent(client)
    assert first["params"]["_meta"]["progressToken"] == rid
    assert len(_progress(client, rid, now=0.0)) == 1  # (1 on the old token)
    new = client.reissue_request(rid, now=5.0)
    (again,) = _sent(client)
    assert again["params"]["_meta"]["progressToken"] == new
    assert _progress(client, rid, now=6.0) == []  # the old token is ignored
    assert client.next_deadline() == 10.0
    (event,) = _progress(client, new, now=6.0)  # 1 again: a new token counts afresh
    assert isinstance(event, ProgressReceived) and event.request_id == new
    assert client.next_deadline() == 16.0  # progress on the new token re-arms it


def test_an_input_round_retry_is_reissued_with_its_input_responses() -> None:
    pair = handshaken("modern")
    client, server = pair.client, pair.server
    client.send_request("tools/call", {"name": "t"}, now=0.0)
    (req,) = [e for e in pair.deliver(client) if isinstance(e, RequestReceived)]
    server.send_input_required(req.request_id, ELICIT, state={"step": 1}, now=0.0)
    (need,) = [e for e in pair.deliver(server) if isinstance(e, InputRequired)]
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    retry = client.retry_with_input(need.request_id, answers, now=0.0)
    (sent,) = _sent(client)
    new = client.reissue_request(retry, now=1.0)
    (again,) = _sent(client)
    assert again["id"] == new != retry
    assert again["params"]["inputResponses"] == answers == sent["params"]["inputResponses"]
    assert again["params"]["requestState"] == sent["params"]["requestState"]
    # The server takes it as the retry it is.
    (got,) = server.receive_message(dumps(again), now=1.0)
    assert isinstance(got, RequestReceived) and got.input_responses == answers


def test_reissues_are_bounded_by_max_reissues() -> None:
    client = handshaken("modern", max_reissues=2).client
    rid = client.send_request("tools/call", {"name": "t"}, now=0.0)
    for n in range(2):
        assert client.reissue_count(rid) == n
        rid = client.reissue_request(rid, now=0.0)
    assert client.reissue_count(rid) == 2
    client.data_to_send()
    with pytest.raises(LocalProtocolError, match="max_reissues"):
        client.reissue_request(rid, now=0.0)
    assert client.pending_requests() == (rid,) and client.data_to_send() == []


@pytest.mark.parametrize("case", ["unknown", "finished", "legacy", "off", "deadline", "closed"])
def test_refusals_change_nothing(case: str) -> None:
    pair = handshaken(
        "legacy" if case == "legacy" else "modern", max_reissues=0 if case == "off" else 1
    )
    client = pair.client
    rid = client.send_request("tools/call", {"name": "t"}, now=0.0, timeout=5.0)
    client.data_to_send()
    if case == "finished":
        _answer(client, rid)
    if case == "closed":
        client.receive_eof()
    target = 999 if case == "unknown" else rid
    before = (client.pending_requests(), client.next_deadline())
    with pytest.raises(LocalProtocolError):
        client.reissue_request(target, now=5.0 if case == "deadline" else 1.0)
    assert (client.pending_requests(), client.next_deadline()) == before
    assert client.data_to_send() == []
    assert client.reissue_count(target) == 0


def test_a_listen_moves_to_the_new_id() -> None:
    pair = handshaken("modern")
    client, server = pair.client, pair.server
    flt = {"notifications": {"toolsListChanged": True}}
    rid = client.send_request("subscriptions/listen", flt, now=0.0)
    client.data_to_send()
    new = client.reissue_request(rid, now=0.0)
    pair.deliver(client)  # the server serves the new listen
    server.send_notification("notifications/tools/list_changed")
    events = pair.deliver(server)
    subs = [e for e in events if isinstance(e, SubscriptionNotificationReceived)]
    assert subs and {e.subscription_id for e in subs} == {new}
    # A notification naming the old listen is not taken as the subscription's.
    tagged = {"_meta": {"io.modelcontextprotocol/subscriptionId": rid}}
    old = client.receive_message(
        dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": tagged}),
        now=0.0,
    )
    assert not [e for e in old if isinstance(e, SubscriptionNotificationReceived)]
    assert client.pending_requests() == (new,)

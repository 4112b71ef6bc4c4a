"""Legacy client: the time the user takes to answer the server is not counted.

While a server's ``elicitation/create`` or ``sampling/createMessage`` awaits the
client's answer, the client's own requests' timers stand still (a legacy question names
none of them: it holds them all). When it is answered, ``next_deadline`` says "now",
and ``handle_timer`` moves every deadline (``max_request_time`` too) on by the time the
question was open, as a modern input round, whose retry's timers start afresh, does not
count it either. No I/O: the clock is the ``now`` each call is given.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    ConnectionClosed,
    RequestId,
    RequestReceived,
    RequestTimedOut,
)

from .helpers import ConnectionPair, handshaken

FORM: dict[str, Any] = {
    "message": "Delete note 1?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}
SAMPLE: dict[str, Any] = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    "maxTokens": 10,
}
QUESTIONS = {"elicitation/create": FORM, "sampling/createMessage": SAMPLE}
ANSWERS: dict[str, dict[str, Any]] = {
    "elicitation/create": {"action": "accept", "content": {"ok": True}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "hello"},
        "model": "m",
    },
}


def ask(pair: ConnectionPair, method: str, *, now: float) -> RequestId:
    """The server asks the client ``method`` at ``now``: the id the client got."""
    pair.server.send_request(method, QUESTIONS[method], now=now)
    (event,) = pair.deliver(pair.server, now=now)
    assert isinstance(event, RequestReceived) and event.method == method
    return event.request_id


def call(pair: ConnectionPair, *, now: float, timeout: float | None = None) -> RequestId:
    """The client calls a tool at ``now`` (the server gets it)."""
    rid = pair.client.send_request("tools/call", {"name": "delete"}, now=now, timeout=timeout)
    (event,) = pair.deliver(pair.client, now=now)
    assert isinstance(event, RequestReceived)
    return rid


@pytest.mark.parametrize("method", sorted(QUESTIONS))
def test_a_question_open_holds_the_timer_and_its_time_is_not_counted(method: str) -> None:
    pair = handshaken("legacy")
    client = pair.client
    rid = call(pair, now=0.0, timeout=2)
    assert client.next_deadline() == 2.0
    question = ask(pair, method, now=1.0)  # 1 s of the 2 is left
    assert client.next_deadline() is None  # (nothing is due while the user answers)
    assert client.handle_timer(50.0) == []  # (a binding's stale wake-up expires nothing)
    assert client.pending_requests() == (rid,)
    client.send_result(question, ANSWERS[method])  # answered at 100
    assert client.next_deadline() == 1.0  # a time past: call handle_timer now
    assert client.handle_timer(100.0) == []  # the pause is counted: 99 s
    assert client.next_deadline() == 101.0  # the second that was left
    assert client.handle_timer(100.9) == []
    assert client.handle_timer(101.0) == [RequestTimedOut(request_id=rid, method="tools/call")]
    assert client.next_deadline() is None


def test_max_request_time_does_not_count_the_question_either() -> None:
    # As a modern input round: its retry's timeout and max_request_time start afresh.
    pair = handshaken("legacy", max_request_time=10)
    client = pair.client
    rid = call(pair, now=0.0)
    assert client.next_deadline() == 10.0
    question = ask(pair, "elicitation/create", now=4.0)
    client.send_error(question, -32603, "the user went away")  # (an error ends it too)
    assert client.handle_timer(64.0) == []  # open 60 s
    assert client.next_deadline() == 70.0
    assert client.handle_timer(70.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_progress_then_a_question_keeps_each_bound() -> None:
    # timeout 5 re-armed by progress at 3 (deadline 8), max_request_time 20; a question
    # open from 6 to 16 moves both on by 10: 18 and 30.
    pair = handshaken("legacy", max_request_time=20)
    client = pair.client
    rid = client.send_request("tools/call", {"name": "x"}, now=0.0, timeout=5, progress=True)
    pair.deliver(client, now=0.0)
    client.receive_message(
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progressToken":' + str(rid).encode() + b',"progress":1}}',
        now=3.0,
    )
    assert client.next_deadline() == 8.0
    question = ask(pair, "elicitation/create", now=6.0)
    client.send_result(question, ANSWERS["elicitation/create"])
    assert client.handle_timer(16.0) == []
    assert client.next_deadline() == 18.0


def test_a_request_sent_while_the_user_answers_gets_its_whole_timeout_after() -> None:
    pair = handshaken("legacy")
    client = pair.client
    question = ask(pair, "elicitation/create", now=0.0)
    rid = call(pair, now=5.0, timeout=2)  # another task calls meanwhile
    assert client.next_deadline() is None
    assert client.handle_timer(30.0) == []
    client.send_result(question, ANSWERS["elicitation/create"])
    assert client.handle_timer(30.0) == []
    assert client.next_deadline() == 32.0
    assert client.handle_timer(32.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_overlapping_questions_make_one_pause_until_the_last_answer() -> None:
    pair = handshaken("legacy")
    client = pair.client
    rid = call(pair, now=0.0, timeout=3)
    first = ask(pair, "elicitation/create", now=1.0)
    second = ask(pair, "sampling/createMessage", now=2.0)
    client.send_result(first, ANSWERS["elicitation/create"])
    assert client.next_deadline() is None  # still one question open
    assert client.handle_timer(10.0) == []
    client.send_result(second, ANSWERS["sampling/createMessage"])
    assert client.handle_timer(20.0) == []
    assert client.next_deadline() == 22.0  # 2 of the 3 s were left at 1
    assert client.handle_timer(22.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_a_question_the_server_withdraws_ends_the_pause() -> None:
    pair = handshaken("legacy")
    client = pair.client
    rid = call(pair, now=0.0, timeout=2)
    question = ask(pair, "elicitation/create", now=1.0)
    pair.server.cancel_request(question, reason="no longer needed")
    pair.deliver(pair.server, now=6.0)
    assert client.next_deadline() == 1.0  # over: count it now
    assert client.handle_timer(6.0) == []
    assert client.next_deadline() == 7.0
    client.send_result(question, ANSWERS["elicitation/create"])  # (dropped, changes nothing)
    assert client.next_deadline() == 7.0
    assert client.handle_timer(7.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_roots_list_is_no_question_for_the_user() -> None:
    # Answered by the application at once: the timers run on.
    pair = handshaken("legacy")
    client = pair.client
    rid = call(pair, now=0.0, timeout=2)
    pair.server.send_request("roots/list", now=1.0)
    (event,) = pair.deliver(pair.server, now=1.0)
    assert isinstance(event, RequestReceived)
    assert client.next_deadline() == 2.0
    assert client.handle_timer(2.0) == [RequestTimedOut(request_id=rid, method="tools/call")]


def test_a_close_while_the_user_answers_leaves_no_timer() -> None:
    pair = handshaken("legacy")
    client = pair.client
    rid = call(pair, now=0.0, timeout=2)
    ask(pair, "elicitation/create", now=1.0)
    (closed,) = client.receive_eof(now=3.0)
    assert isinstance(closed, ConnectionClosed) and closed.unanswered == (rid,)
    assert client.next_deadline() is None
    assert client.handle_timer(100.0) == []

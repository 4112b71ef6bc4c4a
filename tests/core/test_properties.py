"""Property tests: arbitrary input never breaks the core; races never double-answer."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from mcp_sansio import (
    ConnectionClosed,
    ErrorReceived,
    Event,
    RequestCancelled,
    RequestReceived,
    RequestTimedOut,
    ResponseIgnored,
    ResultReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import ConnectionPair
from .test_connection_legacy import ready_pair

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
envelope_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])
messages = st.dictionaries(
    envelope_keys,
    st.one_of(
        json_values,
        st.just("2.0"),
        st.sampled_from(["ping", "tools/list", "notifications/cancelled", "initialize"]),
    ),
    max_size=6,
)


def _check_replies(pair: ConnectionPair) -> None:
    for payload in pair.server.data_to_send():
        reply = loads(payload)
        for item in reply if isinstance(reply, list) else [reply]:
            assert item["jsonrpc"] == "2.0"
            assert ("result" in item) != ("error" in item) or "method" in item


@given(st.binary(max_size=200))
def test_arbitrary_bytes_get_an_error_reply_or_nothing(data: bytes) -> None:
    pair = ready_pair()
    events = pair.server.receive_message(data, now=0.0)
    _check_replies(pair)
    assert all(isinstance(e, Event.__args__) for e in events)
    events = pair.server.receive_bytes(data + b"\n", now=0.0)
    _check_replies(pair)


@given(st.one_of(messages, json_values, st.lists(messages, max_size=3)))
def test_arbitrary_json_never_raises(value: Any) -> None:
    for version in ("2025-11-25", "2025-03-26"):
        pair = ready_pair(version)
        pair.server.receive_message(dumps(value), now=0.0)
        _check_replies(pair)
        pair.client.receive_message(dumps(value), now=0.0)
        pair.client.data_to_send()
    # the session still works afterwards
    pair.client.send_request("ping", now=0.0)
    pair.exchange()


class RaceMachine(RuleBasedStateMachine):
    """Send, answer, cancel, time out, duplicate and late responses, EOF, in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.pair = ready_pair()
        self.now = 0.0
        self.sent: set[Any] = set()
        self.finished: dict[Any, str] = {}
        self.server_has: list[Any] = []
        self.closed = False

    @initialize()
    def setup(self) -> None:
        self.pair.client.data_to_send()

    def _record(self, events: list[Any]) -> None:
        for e in events:
            if isinstance(e, ResultReceived | ErrorReceived | RequestTimedOut):
                assert e.request_id not in self.finished, ("answered twice", e)
                self.finished[e.request_id] = type(e).__name__
            elif isinstance(e, ConnectionClosed):
                for rid in e.unanswered:
                    assert rid not in self.finished
                    self.finished[rid] = "closed"
            elif isinstance(e, ResponseIgnored):
                assert e.request_id is None or e.request_id in self.finished

    def _server_events(self) -> None:
        for e in self.pair.deliver(self.pair.client, now=self.now):
            if isinstance(e, RequestReceived):
                self.server_has.append(e.request_id)
            elif isinstance(e, RequestCancelled):
                self.server_has.remove(e.request_id)

    @precondition(lambda self: not self.closed)
    @rule(timeout=st.one_of(st.none(), st.floats(min_value=0.5, max_value=5)))
    def send(self, timeout: float | None) -> None:
        rid = self.pair.client.send_request("tools/list", now=self.now, timeout=timeout)
        self.sent.add(rid)

    @precondition(lambda self: not self.closed)
    @rule()
    def deliver_to_server(self) -> None:
        self._server_events()

    @precondition(lambda self: bool(self.server_has))
    @rule(data=st.data(), error=st.booleans())
    def answer(self, data: st.DataObject, error: bool) -> None:
        rid = data.draw(st.sampled_from(self.server_has))
        self.server_has.remove(rid)
        if error:
            self.pair.server.send_error(rid, -32000, "nope")
        else:
            self.pair.server.send_result(rid, {"tools": []})

    @rule()
    def deliver_to_client(self) -> None:
        self._record(self.pair.deliver(self.pair.server, now=self.now))

    @precondition(lambda self: bool(self.pair.client.pending_requests()))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self.pair.client.pending_requests()))
        self.pair.client.cancel_request(rid)
        self.finished[rid] = "cancelled"

    @rule(step=st.floats(min_value=0, max_value=3))
    def tick(self, step: float) -> None:
        self.now += step
        self._record(self.pair.client.handle_timer(self.now))

    @precondition(lambda self: bool(self.finished))
    @rule(data=st.data())
    def replay_response(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.finished, key=str)))
        events = self.pair.client.receive_message(
            dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": []}}), now=0.0
        )
        assert [type(e) for e in events] == [ResponseIgnored] or self.closed

    @precondition(lambda self: not self.closed)
    @rule()
    def eof(self) -> None:
        self.closed = True
        self._record(self.pair.client.receive_eof())

    @invariant()
    def tables_consistent(self) -> None:
        pending = set(self.pair.client.pending_requests())
        assert pending.isdisjoint(self.finished)
        assert pending | set(self.finished) == self.sent
        if self.closed:
            assert not pending


RaceMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
test_races = RaceMachine.TestCase

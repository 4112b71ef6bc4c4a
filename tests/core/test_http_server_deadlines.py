"""``HttpServer`` timers and eviction against a brute-force model, with many sessions. No I/O.

The server keeps two indexes so that ``next_deadline`` (asked after every HTTP request by
the Trio binding), ``handle_timer`` and eviction need not walk the session table: the
sessions with no response in progress in LRU order, and a heap of the connections'
deadlines. These tests check that what the indexes answer is what a walk of every session
would answer, and that the work per call does not grow with the number of sessions.

Connections are taken from ``SessionCreated`` events, not ``session_connection()`` (which
makes the server watch a connection used without a drain), so that the model does not
help the server see what it should see by itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import Connection, RequestTimedOut
from mcp_sansio.http import (
    AwaitResponse,
    HttpResponse,
    HttpServer,
    OpenStream,
    ResponseReady,
    ServerEvent,
    SessionClosed,
    SessionCreated,
)

from .test_http_server import in_session, initialize, make_server, note, req, rpc

IDLE = 100.0


@attrs.define
class Model:
    """What a walk of the session table would see: LRU order, activity, open responses."""

    timeout: float | None = IDLE
    sessions: OrderedDict[str, Model.Session] = attrs.Factory(OrderedDict)
    handle_owner: dict[int, str] = attrs.Factory(dict)

    @attrs.define
    class Session:
        conn: Connection
        last_active: float
        handles: set[int] = attrs.Factory(set)

    def touch(self, sid: str, now: float) -> None:
        session = self.sessions[sid]
        session.last_active = max(session.last_active, now)
        self.sessions.move_to_end(sid)

    def evictable(self) -> str | None:
        return next((sid for sid, s in self.sessions.items() if not s.handles), None)

    def next_deadline(self) -> float | None:
        deadlines = [d for s in self.sessions.values() if (d := s.conn.next_deadline()) is not None]
        idle = self.evictable()
        if idle is not None and self.timeout is not None:
            deadlines.append(self.sessions[idle].last_active + self.timeout)
        return min(deadlines, default=None)

    def drop(self, sid: str) -> None:
        for handle in self.sessions.pop(sid).handles:
            del self.handle_owner[handle]


def create(srv: HttpServer, model: Model, now: float) -> str | None:
    """``initialize`` + ``initialized``; checks the eviction (or 503) the model predicts."""
    full = len(model.sessions) >= srv.config.max_sessions
    victim = model.evictable() if full else None
    reply = srv.handle_request(req(body=initialize()), now=now)
    if full and victim is None:
        assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 503
        return None
    closed = [e for e in reply.events if isinstance(e, SessionClosed)]
    assert closed == ([SessionClosed(session_id=victim, reason="evicted")] if victim else [])
    if victim is not None:
        model.drop(victim)
    created = next(e for e in reply.events if isinstance(e, SessionCreated))
    sid = created.session_id
    model.sessions[sid] = Model.Session(conn=created.connection, last_active=now)
    done = srv.handle_request(
        req(body=note("notifications/initialized"), **in_session(sid)), now=now
    )
    assert isinstance(done.decision, HttpResponse) and done.decision.status == 202
    model.touch(sid, now)
    return sid


def open_get(srv: HttpServer, model: Model, sid: str, now: float) -> int:
    decision = srv.handle_request(
        req("GET", accept="text/event-stream", **in_session(sid)), now=now
    ).decision
    assert isinstance(decision, OpenStream)
    model.touch(sid, now)
    model.sessions[sid].handles.add(decision.stream_id)
    model.handle_owner[decision.stream_id] = sid
    return decision.stream_id


def post(srv: HttpServer, model: Model, sid: str, body: Any, now: float) -> Any:
    decision = srv.handle_request(req(body=body, **in_session(sid)), now=now).decision
    model.touch(sid, now)
    if not isinstance(decision, HttpResponse):
        model.sessions[sid].handles.add(decision.stream_id)
        model.handle_owner[decision.stream_id] = sid
    return decision


def close_stream(srv: HttpServer, model: Model, handle: int, now: float) -> None:
    assert srv.stream_closed(handle, now=now) == []
    sid = model.handle_owner.pop(handle, None)
    if sid is not None:
        model.sessions[sid].handles.discard(handle)
        model.touch(sid, now)


def ask(srv: HttpServer, model: Model, sid: str, now: float, timeout: float, **kw: Any) -> Any:
    """A handler sends a request to the client, then the binding drains (the contract)."""
    conn = model.sessions[sid].conn
    rid = conn.send_request("ping", now=now, timeout=timeout, **kw)
    srv.data_to_send(connection=conn)
    return rid


def timer(srv: HttpServer, model: Model, now: float) -> list[Any]:
    """``handle_timer``, checked against the walk of the table the model does."""
    expired: list[str] = []
    if model.timeout is not None:
        for sid, s in model.sessions.items():
            if s.handles:
                continue
            if s.last_active + model.timeout > now:
                break
            expired.append(sid)
    for sid in expired:
        model.drop(sid)
    due = [
        sid
        for sid, s in model.sessions.items()
        if (d := s.conn.next_deadline()) is not None and d <= now
    ]
    events = srv.handle_timer(now)
    closed = [e for e in events if isinstance(e, SessionClosed)]
    assert closed == [SessionClosed(session_id=sid, reason="expired") for sid in expired]
    timed_out = [
        e.session_id
        for e in events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestTimedOut)
    ]
    assert list(dict.fromkeys(timed_out)) == due  # in session order, as the walk runs them
    for sid in due:
        d = model.sessions[sid].conn.next_deadline()
        assert d is None or d > now
    return events


def check(srv: HttpServer, model: Model) -> None:
    assert srv.sessions() == tuple(model.sessions)
    assert srv.next_deadline() == model.next_deadline()


# ================================================================== many sessions


def populate(
    n: int, *, timeout: float | None = IDLE, **config: Any
) -> tuple[HttpServer, Model, list[str]]:
    """``n`` sessions: every third has a GET stream, every fifth an outbound request."""
    srv = make_server(session_idle_timeout=timeout, max_sessions=n, **config)
    model = Model(timeout=timeout)
    sids = []
    for i in range(n):
        sid = create(srv, model, float(i))
        assert sid is not None
        sids.append(sid)
    for i, sid in enumerate(sids):
        if i % 3 == 0:
            open_get(srv, model, sid, float(n + i))
        if i % 5 == 0:
            ask(srv, model, sid, float(n), timeout=float(10 * n - 7 * i))
    return srv, model, sids


@pytest.mark.parametrize("timeout", [IDLE, None])
def test_an_answer_never_brings_the_deadline_forward(timeout: float | None) -> None:
    """What the Trio binding relies on when a handler served in its connection's task
    answers: its timer need not be re-armed then, only when the response closes (see
    ``Endpoint._serve_request``). An answer arms no timer (only requests of ours have
    one) and its session stays busy, not idle, until its response is closed."""
    srv, model, sids = populate(30, timeout=timeout, response_mode="json")
    lone = make_server(session_idle_timeout=timeout, response_mode="json")
    alone = Model(timeout=timeout)
    sid = create(lone, alone, 0.0)  # (its deadline: none while it is busy)
    assert sid is not None
    _answer_each(lone, alone, [sid])
    _answer_each(srv, model, sids[:10])  # with and without a GET, or a request of ours


def _answer_each(srv: HttpServer, model: Model, sids: list[str]) -> None:
    now = 100.0
    for i, sid in enumerate(sids):
        rid = 1_000 + i
        decision = post(srv, model, sid, rpc(rid, "tools/list"), now)
        assert isinstance(decision, AwaitResponse)
        before = srv.next_deadline()
        conn = model.sessions[sid].conn
        if i % 2:
            conn.send_result(rid, {"tools": []})
        else:
            conn.send_error(rid, -32000, "no")
        (ready,) = srv.data_to_send(connection=conn)
        assert isinstance(ready, ResponseReady) and ready.stream_id == decision.stream_id
        assert srv.next_deadline() == before
        close_stream(srv, model, decision.stream_id, now)
        check(srv, model)
        now += 1.0


def test_next_deadline_is_the_minimum_over_every_session() -> None:
    n = 300
    srv, model, sids = populate(n)
    check(srv, model)
    assert srv.next_deadline() == 1.0 + IDLE  # sids[1]: the oldest session without a GET
    # The client answers the earliest outbound request: the deadline moves later.
    last = sids[-1 - (n - 1) % 5]
    conn = model.sessions[last].conn
    (rid,) = conn.pending_requests()
    post(srv, model, last, {"jsonrpc": "2.0", "id": rid, "result": {}}, float(2 * n))
    check(srv, model)
    # Sessions without a GET become active again, one by one, oldest first: the idle
    # deadline walks along; then a GET ends and its session is the youngest idle one.
    for sid in sids[:30]:
        if not model.sessions[sid].handles:
            post(srv, model, sid, rpc(1, "ping"), float(3 * n))
        check(srv, model)
    get = next(iter(model.sessions[sids[0]].handles))
    close_stream(srv, model, get, float(4 * n))
    check(srv, model)


def test_handle_timer_runs_exactly_the_due_sessions_in_session_order() -> None:
    srv, model, _ = populate(200)
    now = 200.0
    while model.sessions:
        now = max(now + 37.0, model.next_deadline() or now)
        timer(srv, model, now)
        check(srv, model)
        if model.next_deadline() is None:
            break
    # Left: the sessions with a GET stream, whose outbound requests all timed out.
    assert model.sessions and all(s.handles for s in model.sessions.values())
    assert srv.next_deadline() is None


def test_eviction_takes_the_least_recently_active_session_without_a_response() -> None:
    srv, model, sids = populate(120, timeout=None)
    for round_ in range(40):
        now = 1_000.0 + round_
        if round_ % 4 == 0:  # an idle session turns busy, a busy one turns idle
            idle = model.evictable()
            assert idle is not None
            open_get(srv, model, idle, now)
            busy = next(h for s in model.sessions.values() for h in s.handles)
            close_stream(srv, model, busy, now)
        assert create(srv, model, now) is not None
        check(srv, model)
    for sid in list(model.sessions):
        if not model.sessions[sid].handles:
            open_get(srv, model, sid, 2_000.0)
    assert create(srv, model, 2_001.0) is None  # every session is busy: 503
    check(srv, model)
    assert sids  # (populated)


def test_a_deadline_that_moved_later_unseen_is_found() -> None:
    srv, model, sids = populate(50, timeout=None)
    sid = sids[45]
    conn = model.sessions[sid].conn
    (rid,) = conn.pending_requests()
    assert srv.next_deadline() == model.next_deadline() == 50.0 + 10 * 50 - 7 * 45
    conn.cancel_request(rid)  # no drain: the server does not hear of it
    check(srv, model)
    conn.handle_timer(10_000.0)  # the binding runs a connection's timer itself
    check(srv, model)


def test_a_closed_session_leaves_the_deadlines() -> None:
    srv, model, sids = populate(40)
    for sid in sids[::5]:
        reply = srv.handle_request(req("DELETE", **in_session(sid)), now=500.0)
        assert SessionClosed(session_id=sid, reason="deleted") in reply.events
        model.drop(sid)
        check(srv, model)
    # Stale handles of closed sessions are ignored.
    close_stream(srv, model, 10_000, 501.0)
    check(srv, model)


def test_progress_from_the_client_rearms_the_timer() -> None:
    srv, model, sids = populate(30, timeout=None)
    sid = sids[1]
    rid = ask(srv, model, sid, 0.0, timeout=5.0, progress=True)
    check(srv, model)
    assert srv.next_deadline() == 5.0
    progress = note("notifications/progress", {"progressToken": rid, "progress": 1})
    post(srv, model, sid, progress, 4.0)
    assert srv.next_deadline() == model.next_deadline() == 9.0
    events = timer(srv, model, 9.0)
    assert [e.session_id for e in events if isinstance(e, ServerEvent)] == [sid]


def test_the_heap_of_deadlines_stays_bounded() -> None:
    srv, model, sids = populate(10, timeout=None)
    conn = model.sessions[sids[3]].conn
    for i in range(1_000):  # each earlier than the last: every one is a new heap entry
        ask(srv, model, sids[3], 0.0, timeout=60.0 - i / 100)
        assert srv.next_deadline() == conn.next_deadline() == 60.0 - i / 100
    check(srv, model)
    assert len(srv._timers) <= 2 * len(sids) + 64 + 1  # private: the bound is the point


# ================================================================== work per call


@pytest.fixture
def deadline_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts ``Connection.next_deadline`` calls (every session's, any server's)."""
    calls = [0]
    original = Connection.next_deadline

    def counting(self: Connection) -> float | None:
        calls[0] += 1
        return original(self)

    monkeypatch.setattr(Connection, "next_deadline", counting)
    yield calls


def work_per_call(n: int, calls: list[int]) -> list[int]:
    srv, model, sids = populate(n)
    counts = []

    def measure(step: Any) -> None:
        calls[0] = 0
        step()
        counts.append(calls[0])

    busy = next(iter(model.sessions[sids[0]].handles))
    measure(srv.next_deadline)
    measure(lambda: srv.handle_request(req(body=rpc(9, "ping"), **in_session(sids[1])), now=2e3))
    measure(srv.next_deadline)
    measure(lambda: srv.stream_closed(busy, now=2e3))
    measure(srv.next_deadline)
    measure(lambda: srv.handle_timer(102.0))  # sids[2] expires (idle since 2), nothing else
    measure(srv.next_deadline)
    measure(lambda: srv.handle_request(req(body=initialize()), now=2e3))  # evicts
    measure(srv.next_deadline)
    return counts


def test_work_per_call_does_not_grow_with_the_sessions(deadline_calls: list[int]) -> None:
    small = work_per_call(30, deadline_calls)
    large = work_per_call(600, deadline_calls)
    assert small == large
    assert max(large) <= 3


# ================================================================== random operations


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, int, int, int]]:
    kinds = st.sampled_from(
        [
            "create",
            "create",
            "ping",
            "get",
            "call",
            "answer_call",
            "close_stream",
            "ask",
            "ask_progress",
            "progress",
            "answer",
            "cancel",
            "delete",
            "timer",
            "drain_all",
        ]
    )
    op = st.tuples(kinds, st.integers(0, 1_000), st.integers(0, 40), st.integers(1, 80))
    return draw(st.lists(op, max_size=60))


@given(ops=operations(), timeout=st.sampled_from([None, 50.0]), cap=st.integers(1, 6))
def test_random_operations_agree_with_a_walk_of_the_table(
    ops: list[tuple[str, int, int, int]], timeout: float | None, cap: int
) -> None:
    srv = make_server(session_idle_timeout=timeout, max_sessions=cap)
    model = Model(timeout=timeout)
    now = 0.0
    ids = iter(range(1_000_000))
    for kind, pick, dt, span in ops:
        now += dt
        sids = list(model.sessions)
        sid = sids[pick % len(sids)] if sids else None
        conn = model.sessions[sid].conn if sid is not None else None
        if kind == "create" or sid is None or conn is None:
            create(srv, model, now)
        elif kind == "ping":
            post(srv, model, sid, rpc(next(ids), "ping"), now)
        elif kind == "get":
            open_get(srv, model, sid, now)
        elif kind == "call":
            decision = post(srv, model, sid, rpc(next(ids), "tools/call", {"name": "t"}), now)
            assert isinstance(decision, OpenStream)
        elif kind == "answer_call" and conn.inflight_requests():
            conn.send_result(conn.inflight_requests()[0], {"content": []})
            srv.data_to_send(connection=conn)
        elif kind == "close_stream" and model.handle_owner:
            handles = sorted(model.handle_owner)
            close_stream(srv, model, handles[pick % len(handles)], now)
        elif kind in ("ask", "ask_progress"):
            ask(srv, model, sid, now, timeout=float(span), progress=kind == "ask_progress")
        elif kind in ("progress", "answer", "cancel") and conn.pending_requests():
            rid = conn.pending_requests()[pick % len(conn.pending_requests())]
            if kind == "progress":
                body = note("notifications/progress", {"progressToken": rid, "progress": pick})
                post(srv, model, sid, body, now)
            elif kind == "answer":
                post(srv, model, sid, {"jsonrpc": "2.0", "id": rid, "result": {}}, now)
            else:
                conn.cancel_request(rid)
                if pick % 2:
                    srv.data_to_send(connection=conn)
        elif kind == "delete":
            srv.handle_request(req("DELETE", **in_session(sid)), now=now)
            model.drop(sid)
        elif kind == "timer":
            now = max(now, model.next_deadline() or now)
            timer(srv, model, now)
        elif kind == "drain_all":
            srv.data_to_send()
        check(srv, model)
    srv.close()
    assert srv.next_deadline() is None


def test_timers_run_in_session_order_not_deadline_order() -> None:
    srv, model, sids = populate(20, timeout=None)
    for i, sid in enumerate(sids):  # later sessions, earlier deadlines
        ask(srv, model, sid, 100.0, timeout=100.0 - i)
    post(srv, model, sids[7], rpc(1, "ping"), 150.0)  # sids[7] is now the most recent
    events = timer(srv, model, 10_000.0)
    order = [e.session_id for e in events if isinstance(e, ServerEvent)]
    assert list(dict.fromkeys(order)) == list(model.sessions)  # every one, in LRU order
    assert order[-1] == sids[7]
    check(srv, model)


def test_progress_fed_with_an_earlier_clock_leaves_the_deadline() -> None:
    # (It moved the deadline earlier, to 65: progress never brings one nearer now.)
    srv, model, sids = populate(10, timeout=None)
    rid = ask(srv, model, sids[2], 60.0, timeout=10.0, progress=True)
    assert srv.next_deadline() == 70.0
    progress = note("notifications/progress", {"progressToken": rid, "progress": 1})
    post(srv, model, sids[2], progress, 55.0)  # `now` is the caller's: not checked
    assert srv.next_deadline() == model.next_deadline() == 70.0


def test_a_session_keeps_its_later_deadlines_after_a_timer() -> None:
    srv, model, sids = populate(10, timeout=None)
    for timeout in (30.0, 10.0, 20.0):
        ask(srv, model, sids[4], 0.0, timeout=timeout)
    assert srv.next_deadline() == 10.0
    for now in (10.0, 20.0, 30.0):
        events = timer(srv, model, now)
        assert [e.session_id for e in events if isinstance(e, ServerEvent)] == [sids[4]]
        check(srv, model)


def test_a_request_armed_on_an_events_connection_is_seen_without_a_drain() -> None:
    # The connection from SessionCreated (not session_connection), used by hand and
    # never drained: its new, earlier deadline still counts.
    srv, model, sids = populate(40, timeout=None)
    conn = model.sessions[sids[5]].conn
    conn.send_request("ping", now=0.0, timeout=1.0)
    assert srv.next_deadline() == 1.0
    check(srv, model)


def test_a_fetched_connection_is_watched_until_it_is_drained(
    deadline_calls: list[int],
) -> None:
    srv, model, sids = populate(40, timeout=None)
    assert srv.session_connection("no such session") is None
    conn = srv.session_connection(sids[9])
    assert conn is model.sessions[sids[9]].conn
    conn.send_request("ping", now=0.0, timeout=1.0)  # no drain: seen all the same
    check(srv, model)
    assert srv.next_deadline() == 1.0
    srv.data_to_send(connection=conn)
    deadline_calls[0] = 0
    srv.next_deadline()
    assert deadline_calls[0] == 1  # drained: no longer looked at on every call

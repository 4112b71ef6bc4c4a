"""Legacy Streamable HTTP: how long the events of an ended stream are kept.

A POST answered as SSE is a stream of its own; once its requests are answered it ends,
and its events stay in the event store so that a client whose connection broke before
the final answer reached it can resume it with ``Last-Event-ID``
(``2025-11-25/basic/transports.mdx``, "Resumability and Redelivery"). They used to stay
until the session ended: every call of a long-lived session left ~1.3 KB behind, and a
busy client filled the store's 16 MiB in minutes. Now only the last
``HttpServerConfig.max_ended_streams`` streams of a session to end are kept (the store's
optional ``discard_stream``); a resumption of an older one is ``410``, as for any
events no longer held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from mcp_sansio.http import (
    AwaitResponse,
    EventStore,
    HttpResponse,
    HttpServerConfig,
    InMemoryEventStore,
    OpenStream,
)

from .test_http_server import (
    in_session,
    make_server,
    note,
    open_session,
    outputs,
    payloads,
    req,
    resume,
    rpc,
    start_call,
)


def _answered_call(srv: Any, sid: str, rid: int) -> int:
    """A ``tools/call`` answered as SSE after one progress event: its stream, ended."""
    conn, stream_id = start_call(srv, sid, rid)
    conn.send_progress(rid, 1)
    conn.send_result(rid, {"content": []})
    assert outputs(srv)[stream_id].end
    return stream_id


def _replayed(srv: Any, sid: str, stream_id: int) -> list[Any] | int:
    """The messages a resumption of ``stream_id`` from its start gets, or its status."""
    decision = resume(srv, sid, f"{stream_id}:0")
    if isinstance(decision, HttpResponse):
        return decision.status
    assert isinstance(decision, OpenStream) and decision.end
    return payloads(decision.data)


def test_only_the_last_ended_streams_of_a_session_are_kept_for_replay() -> None:
    store = InMemoryEventStore()
    srv = make_server(event_store=store, max_ended_streams=2)
    sid = open_session(srv)
    other = open_session(srv)  # (its streams are its own: not counted with sid's)
    theirs = _answered_call(srv, other, 2)
    live_conn, live = start_call(srv, sid, 99)  # in progress the whole time: not counted
    live_conn.send_progress(99, 1)
    ended = [_answered_call(srv, sid, rid) for rid in range(2, 7)]
    assert [_replayed(srv, sid, s) for s in ended[:3]] == [410, 410, 410]
    for rid, stream_id in zip((5, 6), ended[3:], strict=True):
        replay = _replayed(srv, sid, stream_id)
        assert isinstance(replay, list)
        assert [m.get("id") for m in replay] == [None, rid]  # the progress, the answer
    assert len(store._streams) == 2 + 1 + 1  # sid's last two, its live one, other's
    assert isinstance(_replayed(srv, other, theirs), list)
    outputs(srv)
    live_conn.send_result(99, {"content": []})  # it ends: sid's oldest kept one goes
    assert _replayed(srv, sid, ended[3]) == 410
    assert isinstance(_replayed(srv, sid, live), list)


def test_a_stream_that_stored_no_event_does_not_count() -> None:
    """The bound counts the streams whose events are kept (``max_ended_streams``: "a
    session's ended streams whose events are kept"): a call answered as JSON, or one
    cancelled before any event, leaves nothing to replay, so it pushes no kept stream
    out."""
    store = InMemoryEventStore()
    srv = make_server(
        event_store=store,
        max_ended_streams=1,
        response_mode=lambda method, era: "json" if method == "tools/list" else "sse",
    )
    sid = open_session(srv)
    kept = _answered_call(srv, sid, 2)
    conn = srv.session_connection(sid)
    assert conn is not None
    for rid in range(3, 6):  # answered as JSON: no event stored
        reply = srv.handle_request(req(body=rpc(rid, "tools/list"), **in_session(sid)), now=0)
        assert isinstance(reply.decision, AwaitResponse)
        conn.send_result(rid, {"tools": []})
        assert outputs(srv)[reply.decision.stream_id].response.status == 200
    _, cancelled = start_call(srv, sid, 9)  # cancelled before any event of it
    cancel = note("notifications/cancelled", {"requestId": 9})
    reply = srv.handle_request(req(body=cancel, **in_session(sid)), now=0)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 202
    assert outputs(srv)[cancelled].end
    replay = _replayed(srv, sid, kept)
    assert isinstance(replay, list) and [m.get("id") for m in replay] == [None, 2]
    _answered_call(srv, sid, 10)  # one that stored events: now the kept one goes
    assert _replayed(srv, sid, kept) == 410


def test_a_long_lived_session_holds_a_bounded_store() -> None:
    """The soak's case: one session, many sequential calls, the default bound (64)."""
    store = InMemoryEventStore()
    srv = make_server(event_store=store)
    sid = open_session(srv)
    held = []
    for rid in range(2, 302):
        _answered_call(srv, sid, rid)
        held.append(store.held_bytes)
    bound = HttpServerConfig().max_ended_streams
    assert bound == 64
    assert len(store._streams) == bound
    # Flat from the bound on (but for the ids' digits: the answers grow a little).
    assert max(held[bound:]) < 1.05 * held[bound - 1]
    srv.handle_request(req("DELETE", **in_session(sid)), now=1)
    assert store.held_bytes == 0  # (the session's end drops the rest, as before)


def test_no_ended_stream_is_kept_with_a_bound_of_0() -> None:
    store = InMemoryEventStore()
    srv = make_server(event_store=store, max_ended_streams=0)
    sid = open_session(srv)
    stream_id = _answered_call(srv, sid, 2)
    assert _replayed(srv, sid, stream_id) == 410
    assert store.held_bytes == 0


class _OldStore:
    """A custom store written before ``discard_stream``: the protocol's three methods."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, int], list[tuple[int, bytes]]] = {}

    def append(self, session_id: str, stream: int, seq: int, message: bytes) -> None:
        self.events.setdefault((session_id, stream), []).append((seq, bytes(message)))

    def replay(
        self, session_id: str, stream: int, after: int
    ) -> Sequence[tuple[int, bytes]] | None:
        held = self.events.get((session_id, stream))
        return None if held is None else [e for e in held if e[0] > after]

    def discard_session(self, session_id: str) -> None:
        for key in [k for k in self.events if k[0] == session_id]:
            del self.events[key]


def test_a_store_without_discard_stream_works_as_before() -> None:
    """The method is optional: such a store keeps every ended stream, as before."""
    store = _OldStore()
    typed: EventStore = store  # (still an EventStore for a type checker)
    srv = make_server(event_store=typed, max_ended_streams=1)
    sid = open_session(srv)
    ended = [_answered_call(srv, sid, rid) for rid in range(2, 5)]
    assert all(isinstance(_replayed(srv, sid, s), list) for s in ended)
    assert len(store.events) == 3


def test_discard_stream_of_the_in_memory_store() -> None:
    store = InMemoryEventStore()
    store.append("s", 1, 1, b"ab")
    store.append("s", 1, 2, b"cd")
    store.append("s", 2, 1, b"ef")
    store.append("t", 1, 1, b"gh")
    before = store.held_bytes
    store.discard_stream("s", 1)
    store.discard_stream("s", 9)  # (none held: nothing happens)
    assert store.replay("s", 1, 0) is None
    assert store.replay("s", 2, 0) == [(1, b"ef")] and store.replay("t", 1, 0) == [(1, b"gh")]
    assert store.held_events == 2 and store.held_bytes < before
    store.discard_session("s")
    store.discard_session("t")
    assert store.held_bytes == 0


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_max_ended_streams_is_a_count(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_ended_streams"):
        HttpServerConfig(max_ended_streams=bad)

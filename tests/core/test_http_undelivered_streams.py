"""Legacy Streamable HTTP: an ended stream its client never got the end of is kept apart.

A session keeps its last ``HttpServerConfig.max_ended_streams`` ended streams for
``Last-Event-ID`` replay (``tests/core/test_http_ended_streams.py``). A stream that ends
while no connection is attached (its connection broke, or was released for polling)
sent its answer to the store only: it is the very one its client will come back for,
after the ``retry`` it was told. It used to be counted with the delivered ones, so a
busy session (more than 64 other calls ending within that ``retry``: about 80 calls/s
with the defaults) pushed it out, and the resumption got ``410``. Such streams are now
counted apart, with a bound of their own (the same number); once replayed whole they
count as delivered. The store's own bounds (``max_bytes``) hold for all of them. No I/O.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio.http import HttpResponse, InMemoryEventStore, OpenStream

from .test_http_ended_streams import _answered_call
from .test_http_server import make_server, open_session, outputs, payloads, resume, start_call


def _answered_while_away(srv: Any, sid: str, rid: int, how: str = "closed") -> int:
    """A ``tools/call`` whose connection goes (``how``: it broke, or the server released
    it) after one progress event (``<stream>:1``); then it is answered: its stream ends
    with no connection attached."""
    conn, stream_id = start_call(srv, sid, rid)
    conn.send_progress(rid, 1)
    if how == "released":
        srv.release_stream(stream_id)
    assert outputs(srv)[stream_id].data
    assert srv.stream_closed(stream_id, now=0) == []
    conn.send_result(rid, {"content": [{"type": "text", "text": f"answer {rid}"}]})
    assert srv.data_to_send() == []  # (to the store only)
    return stream_id


def _resumed(srv: Any, sid: str, stream_id: int) -> list[Any] | int:
    """What a resumption of ``stream_id`` after its progress event gets: its messages,
    or its status."""
    decision = resume(srv, sid, f"{stream_id}:1")
    if isinstance(decision, HttpResponse):
        return decision.status
    assert isinstance(decision, OpenStream) and decision.end
    return payloads(decision.data)


@pytest.mark.parametrize("how", ["closed", "released"])
def test_answers_delivered_meanwhile_do_not_push_out_an_undelivered_one(how: str) -> None:
    store = InMemoryEventStore()
    srv = make_server(event_store=store, max_ended_streams=2)
    sid = open_session(srv)
    away = _answered_while_away(srv, sid, 2, how)
    delivered = [_answered_call(srv, sid, rid) for rid in range(3, 8)]  # more than 2
    replay = _resumed(srv, sid, away)
    assert isinstance(replay, list), replay
    (answer,) = replay
    assert answer["id"] == 2 and answer["result"]["content"][0]["text"] == "answer 2"
    assert _resumed(srv, sid, delivered[0]) == 410  # (the delivered ones: bounded as before)


def test_an_undelivered_stream_replayed_whole_counts_as_delivered() -> None:
    srv = make_server(event_store=InMemoryEventStore(), max_ended_streams=2)
    sid = open_session(srv)
    away = _answered_while_away(srv, sid, 2)
    assert isinstance(_resumed(srv, sid, away), list)
    assert isinstance(_resumed(srv, sid, away), list)  # (its last copy may be lost too)
    _answered_call(srv, sid, 3)  # one more delivered: it is still among the last two
    assert isinstance(_resumed(srv, sid, away), list)
    _answered_call(srv, sid, 4)
    assert _resumed(srv, sid, away) == 410


def test_an_undelivered_stream_replayed_whole_leaves_the_undelivered_count() -> None:
    """Counted as delivered once replayed whole, it no longer takes a place among the
    undelivered: more of those than their bound do not push it out."""
    srv = make_server(event_store=InMemoryEventStore(), max_ended_streams=2)
    sid = open_session(srv)
    away = _answered_while_away(srv, sid, 2)
    assert isinstance(_resumed(srv, sid, away), list)
    later = [_answered_while_away(srv, sid, rid) for rid in range(3, 6)]  # more than 2
    assert isinstance(_resumed(srv, sid, away), list)
    assert [_resumed(srv, sid, s) == 410 for s in later] == [True, False, False]


def test_undelivered_streams_have_a_bound_of_their_own() -> None:
    store = InMemoryEventStore()
    srv = make_server(event_store=store, max_ended_streams=2)
    sid = open_session(srv)
    away = [_answered_while_away(srv, sid, rid) for rid in range(2, 7)]
    assert len(store._streams) == 2
    _answered_call(srv, sid, 7)  # a delivered one, counted apart: none of those goes
    assert len(store._streams) == 3
    assert [_resumed(srv, sid, s) == 410 for s in away] == [True, True, True, False, False]


def test_no_undelivered_stream_is_kept_with_a_bound_of_0() -> None:
    store = InMemoryEventStore()
    srv = make_server(event_store=store, max_ended_streams=0)
    sid = open_session(srv)
    away = _answered_while_away(srv, sid, 2)
    assert _resumed(srv, sid, away) == 410
    assert store.held_bytes == 0


def test_the_store_s_byte_bound_holds_for_undelivered_streams() -> None:
    """Counted apart, they are bounded by the store's own ``max_bytes`` too: past it,
    the oldest go (a resumption of one is ``410``)."""
    store = InMemoryEventStore(max_bytes=8 * 1024)
    srv = make_server(event_store=store)  # (64 of each: the bytes bind first)
    sid = open_session(srv)
    away = [_answered_while_away(srv, sid, rid) for rid in range(2, 42)]
    assert store.held_bytes <= store.max_bytes
    assert _resumed(srv, sid, away[0]) == 410
    assert isinstance(_resumed(srv, sid, away[-1]), list)

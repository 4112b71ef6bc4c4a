"""A legacy client starting a new session in place of one the server forgot, no I/O.

``Connection.restart_session`` and ``Connection.resend_request``: over Streamable HTTP a
404 to a request with ``Mcp-Session-Id`` means the server forgot the session, and the
client MUST send a new ``initialize`` (``basic/transports.mdx``, "Session Management").
The server here is a fresh server connection swapped in: it knows nothing of the first
session, as a server that restarted would not.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pytest

from mcp_sansio import (
    Connection,
    ConnectionClosed,
    ConnectionConfig,
    ErrorCode,
    ErrorReceived,
    HandshakeCompleted,
    LifecycleState,
    LocalProtocolError,
    RequestId,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair, handshaken

T = TypeVar("T")


def client_config(**kw: Any) -> ConnectionConfig:
    return ConnectionConfig(
        implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="legacy", **kw
    )


def server_config(name: str, **kw: Any) -> ConnectionConfig:
    caps = kw.pop("capabilities", SERVER_CAPS)
    return ConnectionConfig(implementation={"name": name, "version": "1"}, capabilities=caps, **kw)


def ready(**client_kw: Any) -> ConnectionPair:
    pair = ConnectionPair(client_config(**client_kw), server_config("one"))
    pair.handshake()
    return pair


def forget(pair: ConnectionPair, name: str = "two", **kw: Any) -> None:
    """The server forgot the session: what answers now knows nothing of it."""
    pair.server = Connection("server", server_config(name, **kw))


def only(events: list[Any], cls: type[T]) -> T:
    found = [e for e in events if isinstance(e, cls)]
    assert len(found) == 1, events
    return found[0]


def sent(conn: Connection) -> list[Any]:
    return [loads(m) for m in conn.data_to_send()]


def test_a_new_session_replaces_the_forgotten_one() -> None:
    pair = ready()
    first_initialize = pair.wire[0][1]
    rid = pair.client.send_request("tools/list", now=0.0)
    (lost,) = sent(pair.client)  # refused with 404: the server never processed it
    forget(pair, "two", supported_versions=("2025-06-18",))
    init_id = pair.client.restart_session(now=1.0)
    assert pair.client.lifecycle is LifecycleState.INITIALIZING
    pair.client.resend_request(rid)  # held until the new session is ready
    pair.wire.clear()
    client_events, server_events = pair.exchange()
    done = only(client_events, HandshakeCompleted)
    assert done.protocol_version == "2025-06-18" and done.peer_info == {
        "name": "two",
        "version": "1",
    }
    assert (pair.client.protocol_version, pair.client.lifecycle) == (
        "2025-06-18",
        LifecycleState.READY,
    )
    assert pair.client.peer_info == {"name": "two", "version": "1"}
    # The same initialize as the first time (the version is negotiated again), then
    # notifications/initialized, then the request, unchanged, before anything else.
    from_client = [m for who, m in pair.wire if who == "client"]
    assert from_client == [
        {**first_initialize, "id": init_id},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        lost,
    ]
    served = only(server_events, RequestReceived)
    assert served.request_id == rid
    pair.server.send_result(rid, {"tools": []})
    answered, _ = pair.exchange()
    assert only(answered, ResultReceived).request_id == rid


def test_capabilities_are_checked_again_on_the_new_session() -> None:
    pair = ready()
    pair.client.send_request("tools/list", now=0.0)  # checked once, then cached
    pair.client.data_to_send()
    forget(pair, capabilities={})
    pair.client.restart_session(now=0.0)
    pair.exchange()
    assert pair.client.lifecycle is LifecycleState.READY
    with pytest.raises(LocalProtocolError, match="'tools' capability"):
        pair.client.send_request("tools/list", now=0.0)


def test_requests_sent_while_the_new_session_starts_are_held_and_timed() -> None:
    # No session can carry them yet, but their timeouts count from the call, exactly as
    # if they had gone out (a caller's timeout= must hold whatever the server does).
    pair = ready(request_timeout=10.0)
    forget(pair)
    pair.client.restart_session(now=0.0)
    (initialize,) = pair.client.data_to_send()
    timed = pair.client.send_request("tools/list", now=1.0, timeout=2.0)
    ping = pair.client.send_request("ping", now=1.0)
    kept = pair.client.send_request("prompts/list", now=1.5)
    cancelled = pair.client.send_request("resources/list", now=1.5)
    pair.client.cancel_request(cancelled)  # (as closing the client does)
    assert pair.client.data_to_send() == []
    with pytest.raises(LocalProtocolError, match="before the session is ready"):
        pair.client.send_notification("notifications/roots/list_changed")
    assert pair.client.next_deadline() == 3.0
    (timeout,) = pair.client.handle_timer(3.0)
    assert isinstance(timeout, RequestTimedOut) and timeout.request_id == timed
    assert pair.client.data_to_send() == []  # the server never saw it: nothing to cancel
    pair.server.receive_message(initialize, now=0.0)  # (answered by the server connection itself)
    pair.wire.clear()
    done, served = pair.exchange(now=4.0)
    assert only(done, HandshakeCompleted).peer_info == {"name": "two", "version": "1"}
    assert [m.get("method") for who, m in pair.wire if who == "client"] == [
        "notifications/initialized",
        "ping",
        "prompts/list",
    ]
    assert only(done, ResultReceived).request_id == ping  # (the server answers pings itself)
    assert only(served, RequestReceived).request_id == kept
    assert pair.client.next_deadline() == 11.5  # 10 s (request_timeout) from its call


def test_requests_held_for_the_new_session_are_checked_against_the_old_one() -> None:
    # The best knowledge there is until the new session answers; once it has, the
    # checks are made again on its facts (test_capabilities_are_checked_again_...).
    pair = ConnectionPair(client_config(), server_config("one", capabilities={"tools": {}}))
    pair.handshake()
    forget(pair)  # (which would allow logging)
    init_id = pair.client.restart_session(now=0.0)
    with pytest.raises(LocalProtocolError, match="'logging' capability"):
        pair.client.send_request("logging/setLevel", {"level": "info"}, now=0.0)
    assert pair.client.pending_requests() == (init_id,)
    rid = pair.client.send_request("tools/list", now=0.0)
    pair.wire.clear()
    pair.exchange()
    assert pair.client.lifecycle is LifecycleState.READY
    assert [m.get("id") for who, m in pair.wire if who == "client"] == [init_id, None, rid]
    pair.client.send_request("logging/setLevel", {"level": "info"}, now=0.0)  # the new one's facts


def modern_client() -> Connection:
    return handshaken("auto").client


def restarting_client() -> Connection:
    pair = ready()
    pair.client.restart_session(now=0.0)
    return pair.client


def closed_client() -> Connection:
    pair = ready()
    pair.client.receive_eof()
    return pair.client


@pytest.mark.parametrize(
    "make",
    [
        lambda: Connection("server"),
        lambda: Connection("client", client_config()),  # not started
        restarting_client,
        modern_client,
        closed_client,
    ],
    ids=["server", "not-started", "restarting", "modern", "closed"],
)
def test_what_cannot_be_restarted(make: Any) -> None:
    conn: Connection = make()
    conn.data_to_send()
    before = (conn.lifecycle, conn.era, conn.pending_requests())
    with pytest.raises(LocalProtocolError):
        conn.restart_session(now=0.0)
    assert (conn.lifecycle, conn.era, conn.pending_requests()) == before
    assert conn.data_to_send() == []


def test_resend_request_sends_the_same_request_again() -> None:
    pair = ready()
    rid = pair.client.send_request("tools/call", {"name": "x"}, progress=True, now=0.0)
    original = pair.client.data_to_send()
    pair.client.resend_request(rid)  # a ready session: at once
    assert pair.client.data_to_send() == original
    with pytest.raises(LocalProtocolError, match="not in flight"):
        pair.client.resend_request(999_999)
    init_id = pair.client.restart_session(now=0.0)
    with pytest.raises(LocalProtocolError, match="initialize is not sent again"):
        pair.client.resend_request(init_id)
    pair.client.receive_eof()
    with pytest.raises(LocalProtocolError, match="closed"):
        pair.client.resend_request(rid)


def refuse_with_an_error(pair: ConnectionPair, init_id: RequestId) -> list[Any]:
    failure = {"jsonrpc": "2.0", "id": init_id, "error": {"code": -32600, "message": "no"}}
    return pair.client.receive_message(dumps(failure), now=0.0)


def refuse_with_a_version(pair: ConnectionPair, init_id: int) -> list[Any]:
    answer = {"protocolVersion": "1999-01-01", "capabilities": {}}
    return pair.client.receive_message(
        dumps({"jsonrpc": "2.0", "id": init_id, "result": answer}), now=0.0
    )


def time_out(pair: ConnectionPair, init_id: int) -> list[Any]:
    return pair.client.handle_timer(100.0)


@pytest.mark.parametrize(
    ("refuse", "lifecycle", "why"),
    [
        (refuse_with_an_error, LifecycleState.IDLE, "initialize failed: no"),
        (refuse_with_a_version, LifecycleState.FAILED, "'1999-01-01'"),
        (time_out, LifecycleState.INITIALIZING, "initialize timed out"),
    ],
    ids=["error", "version", "timeout"],
)
def test_a_refused_new_session_fails_the_held_requests_first(
    refuse: Any, lifecycle: LifecycleState, why: str
) -> None:
    pair = ready(request_timeout=5.0)
    rid = pair.client.send_request("tools/list", timeout=1000.0, now=0.0)
    pair.client.data_to_send()
    init_id = pair.client.restart_session(now=1.0)
    pair.client.resend_request(rid)
    pair.client.data_to_send()
    events = refuse(pair, init_id)
    held, end = events
    assert isinstance(held, ErrorReceived) and held.request_id == rid
    assert held.error.code == ErrorCode.INTERNAL_ERROR and why in held.error.message
    assert held.error.message.startswith("the session was lost and a new one could not be")
    assert end.request_id == init_id and end.method == "initialize"
    assert isinstance(end, RequestTimedOut if refuse is time_out else ErrorReceived)
    # The held request's error is the core's, never the server's (basic/index.mdx, Error
    # Codes); so is the initialize's when its result names a version we do not speak.
    assert held.local
    assert not isinstance(end, ErrorReceived) or end.local is (refuse is refuse_with_a_version)
    # Marked so (the bindings end it with the session, whose failure follows), where
    # each told it from the rest by "local, while restarting, not the initialize".
    assert held.held
    assert not isinstance(end, ErrorReceived) or not end.held
    assert pair.client.pending_requests() == () and pair.client.lifecycle is lifecycle
    assert pair.client.data_to_send() == []


def test_held_requests_cancelled_or_timed_out_are_never_sent_nor_announced() -> None:
    pair = ready()
    cancelled = pair.client.send_request("tools/list", now=0.0)
    forgotten = pair.client.send_request("prompts/list", now=0.0)
    timed = pair.client.send_request("resources/list", timeout=1.0, now=0.0)
    kept = pair.client.send_request("ping", now=0.0)
    pair.client.data_to_send()
    init_id = pair.client.restart_session(now=0.0)
    for rid in (cancelled, forgotten, timed, kept):
        pair.client.resend_request(rid)
    pair.client.cancel_request(cancelled)  # the new session never saw it: no notification
    pair.client.forget_request(forgotten)
    (timeout,) = pair.client.handle_timer(2.0)
    assert isinstance(timeout, RequestTimedOut) and timeout.request_id == timed
    assert [m["method"] for m in sent(pair.client)] == ["initialize"]
    answer = {"protocolVersion": "2025-11-25", "capabilities": SERVER_CAPS}
    pair.client.receive_message(dumps({"jsonrpc": "2.0", "id": init_id, "result": answer}), now=0.0)
    assert [m.get("method") for m in sent(pair.client)] == ["notifications/initialized", "ping"]


def test_the_end_of_input_while_restarting_lists_the_held_requests() -> None:
    pair = ready()
    rid = pair.client.send_request("tools/list", now=0.0)
    init_id = pair.client.restart_session(now=0.0)
    pair.client.resend_request(rid)
    (closed,) = pair.client.receive_eof()
    assert isinstance(closed, ConnectionClosed)
    assert set(closed.unanswered) == {rid, init_id}
    with pytest.raises(LocalProtocolError):
        pair.client.restart_session(now=0.0)


HELD_ANSWERS = {
    "result": {"result": {"tools": []}},
    "error": {"error": {"code": -32000, "message": "stale"}},
    "malformed": {"result": []},
}


@pytest.mark.parametrize("answer", HELD_ANSWERS.values(), ids=HELD_ANSWERS.keys())
@pytest.mark.parametrize("then", ["answered", "refused"])
def test_an_answer_to_a_held_request_ends_it_for_good(answer: dict[str, Any], then: str) -> None:
    # A stray answer (a stream of the old session, a confused server) to a request held
    # for the new session: the request is done, is not sent again, and neither the
    # answer to the new initialize nor its refusal trips over it.
    pair = ready()
    rid = pair.client.send_request("tools/list", now=0.0)
    kept = pair.client.send_request("prompts/list", now=0.0)
    pair.client.data_to_send()
    init_id = pair.client.restart_session(now=0.0)
    pair.client.resend_request(rid)
    pair.client.resend_request(kept)
    pair.client.data_to_send()
    events = pair.client.receive_message(dumps({"jsonrpc": "2.0", "id": rid, **answer}), now=0.0)
    assert [getattr(e, "request_id", None) for e in events][-1] == rid
    assert pair.client.pending_requests() == (kept, init_id)
    if then == "answered":
        result = {"protocolVersion": "2025-11-25", "capabilities": SERVER_CAPS}
        done = pair.client.receive_message(
            dumps({"jsonrpc": "2.0", "id": init_id, "result": result}), now=0.0
        )
        assert isinstance(done[-1], HandshakeCompleted)
        assert [m.get("id") for m in sent(pair.client)] == [None, kept]  # initialized, kept
    else:
        held, end = refuse_with_an_error(pair, init_id)
        assert isinstance(held, ErrorReceived) and held.request_id == kept
        assert isinstance(end, ErrorReceived) and end.request_id == init_id
    assert pair.client.pending_requests() == ((kept,) if then == "answered" else ())

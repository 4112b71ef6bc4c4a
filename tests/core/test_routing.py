"""Routing: ``Connection(..., routing=True)`` and ``messages_to_send``.

A binding that routes the output by request (Streamable HTTP: each response goes to its
request's stream; :class:`~mcp_sansio.http.HttpServer` makes its connections so) drains
with ``messages_to_send``, which gives each message with the request it belongs to. Only
a connection made with ``routing=True`` notes these ids; any other refuses the call, so
that the bindings that write everything to one channel (stdio, WebSocket, memory) pay
nothing for them. A routing connection may still be drained with ``data_to_send`` or
``bytes_to_send``: the ids of what they took are dropped, and the ids never outnumber the
longest the queue has been.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    LocalProtocolError,
    RequestId,
    RequestReceived,
    RequestTimedOut,
)
from mcp_sansio._json import dumps, loads

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair

Role = Literal["client", "server"]


def legacy(role: Role, *, routing: bool = False, **kw: Any) -> Connection:
    caps = CLIENT_CAPS if role == "client" else SERVER_CAPS
    config = ConnectionConfig(
        implementation={"name": role, "version": "1"}, capabilities=caps, era="legacy", **kw
    )
    return Connection(role, config, routing=routing)


def ready(
    client: Connection | None = None, server: Connection | None = None
) -> tuple[Connection, Connection]:
    """A legacy client and server, handshake done, queues empty."""
    pair = ConnectionPair()
    pair.client = client if client is not None else legacy("client")
    pair.server = server if server is not None else legacy("server")
    pair.handshake()
    return pair.client, pair.server


def deliver(sender: Connection, receiver: Connection) -> list[Any]:
    return [e for m in sender.data_to_send() for e in receiver.receive_message(m, now=0.0)]


def request_of(client: Connection, server: Connection, method: str, **kw: Any) -> RequestId:
    """Send ``method`` from the client; return its id once the server holds it."""
    rid = client.send_request(method, {"name": "x"} if method == "tools/call" else {}, **kw)
    (received,) = deliver(client, server)
    assert isinstance(received, RequestReceived) and received.request_id == rid
    return rid


def routed(conn: Connection) -> list[tuple[Any, RequestId | None]]:
    """``messages_to_send``, each message decoded."""
    return [(loads(payload), related) for payload, related in conn.messages_to_send()]


# ---------------------------------------------------------------- off by default


@pytest.mark.parametrize("role", ["client", "server"])
def test_a_connection_without_routing_refuses_messages_to_send(role: Role) -> None:
    client, server = ready()
    conn = client if role == "client" else server
    conn.send_request("ping", now=0.0)
    with pytest.raises(LocalProtocolError, match=r"routing=True.*data_to_send"):
        conn.messages_to_send()
    # Nothing was drained: the message is still there for the right drain.
    (message,) = conn.data_to_send()
    assert loads(message)["method"] == "ping"


def test_a_connection_without_routing_keeps_no_ids() -> None:
    client, server = ready()
    for _ in range(3):
        request_of(client, server, "tools/call", now=0.0)
    for rid in server.inflight_requests():
        server.send_result(rid, {"content": []})
    assert len(server.data_to_send()) == 3
    assert server._out_ids == []  # (the ids nobody reads are not noted)


def test_routing_is_off_when_not_asked_for() -> None:
    """``Connection(role, config)``, as stdio, WebSocket and memory make it: no ids."""
    config = ConnectionConfig(
        implementation={"name": "server", "version": "1"}, capabilities=SERVER_CAPS, era="legacy"
    )
    client, server = ready(server=Connection("server", config))
    rid = request_of(client, server, "tools/call", now=0.0)
    server.send_result(rid, {"content": []})
    assert server._out_ids == []
    with pytest.raises(LocalProtocolError, match=r"routing=True"):
        server.messages_to_send()
    (message,) = server.data_to_send()
    assert loads(message)["id"] == rid


# ---------------------------------------------------------------- what each message names


def test_each_message_names_the_request_it_belongs_to() -> None:
    client, server = ready(
        legacy("client", routing=True, request_timeout=5.0), legacy("server", routing=True)
    )
    # The server's answer, progress and log about the client's request: that request.
    rid = request_of(client, server, "tools/call", now=0.0, progress=True)
    assert server.send_progress(rid, 1, 2)
    assert server.send_log("info", "working", request_id=rid)
    server.send_result(rid, {"content": []})
    # Requests the server makes for it (the first checked, the second down the fast
    # path), and a cancellation: routed as the request.
    roots = server.send_request("roots/list", now=0.0, related_request_id=rid)
    assert "roots/list" in server._send_ok  # (so the second takes the fast path)
    server.send_request("roots/list", now=0.0, related_request_id=rid)
    server.cancel_request(roots)
    # A notification of the session: no request.
    server.send_notification("notifications/tools/list_changed")
    assert [(m.get("method", m.get("id")), related) for m, related in routed(server)] == [
        ("notifications/progress", rid),
        ("notifications/message", rid),
        (rid, rid),
        ("roots/list", rid),
        ("roots/list", rid),
        ("notifications/cancelled", rid),
        ("notifications/tools/list_changed", None),
    ]
    # The client's own request and the cancellations of its timeouts (the tools/call's
    # answer was never delivered): no request of the peer's.
    mine = client.send_request("tools/list", now=0.0)
    timed_out = client.handle_timer(10.0)
    assert all(isinstance(e, RequestTimedOut) for e in timed_out)
    assert [e.request_id for e in timed_out if isinstance(e, RequestTimedOut)] == [rid, mine]
    assert [(m["method"], related) for m, related in routed(client)] == [
        ("tools/list", None),
        ("notifications/cancelled", None),
        ("notifications/cancelled", None),
    ]


def test_a_subscription_notification_names_its_listen() -> None:
    pair = ConnectionPair(
        ConnectionConfig(
            implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="modern"
        )
    )
    pair.server = Connection(
        "server",
        ConnectionConfig(implementation={"name": "s", "version": "1"}, capabilities=SERVER_CAPS),
        routing=True,
    )
    pair.handshake()
    listen = pair.client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    pair.deliver(pair.client)
    routed(pair.server)  # (its acknowledgement)
    pair.server.send_notification("notifications/tools/list_changed")
    ((message, related),) = routed(pair.server)
    assert message["method"] == "notifications/tools/list_changed" and related == listen


# ---------------------------------------------------------------- the ids stay in step


def test_ids_stay_in_step_with_the_other_drains() -> None:
    client, server = ready(server=legacy("server", routing=True))
    first, second, third = (request_of(client, server, "tools/call", now=0.0) for _ in "abc")
    server.send_result(first, {"content": []})
    server.send_result(second, {"content": []})
    assert len(server.data_to_send()) == 2  # (their ids are left behind: dropped later)
    assert server.messages_to_send() == []
    server.send_result(third, {"content": []})
    assert [(m["id"], related) for m, related in routed(server)] == [(third, third)]
    for drain in (server.data_to_send, server.bytes_to_send):
        for _ in range(50):
            rid = request_of(client, server, "tools/call", now=0.0)
            server.send_result(rid, {"content": []})
            assert drain()
            # Bounded: no more ids than the longest the queue has been (one message).
            assert len(server._out_ids) <= 1
    rid = request_of(client, server, "tools/call", now=0.0)
    server.send_result(rid, {"content": []})
    server.send_notification("notifications/tools/list_changed")
    assert [related for _, related in routed(server)] == [rid, None]


def test_receive_eof_drops_the_last_lines_answers_with_their_ids() -> None:
    client, server = ready(server=legacy("server", routing=True))
    rid = request_of(client, server, "tools/call", now=0.0)
    server.send_result(rid, {"content": []})
    # An unterminated last line, a ping, which the core answers: that answer is dropped
    # at the end of input (nothing more is sent), and so is its id.
    server.receive_bytes(dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}), now=0.0)
    server.receive_eof(now=0.0)
    assert [(m["id"], related) for m, related in routed(server)] == [(rid, rid)]

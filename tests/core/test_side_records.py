"""An answered request leaves no side record behind, whichever path recorded it.

``send_result`` asks one flag (``_side_records``) before it looks at the side tables of
the peer's requests (progress sent, a modern ``logLevel``, a listen's subscription, a
batch's place): every place that adds to one of them must raise that flag, or the result
would leave the entry there (a batch would never be answered). One test per such place.
"""

from __future__ import annotations

from typing import Any

from mcp_sansio import Connection, Event, RequestReceived
from mcp_sansio._json import dumps

from .test_fastpath import CC, LL, PV, V, legacy_pair, modern_pair


def _tables(server: Connection) -> tuple[Any, ...]:
    return (
        dict(server._inbound_progress),
        dict(server._inbound_log_level),
        dict(server._subscriptions),
        dict(server._batches),
    )


def test_progress_sent_is_forgotten_with_the_result() -> None:
    client, server = legacy_pair()
    rid = client.send_request("tools/call", {"name": "x"}, now=0.0, progress=True)
    for message in client.data_to_send():
        server.receive_message(message, now=0.0)
    assert server.send_progress(rid, 1.0)
    assert server._inbound_progress == {rid: 1.0}
    server.send_result(rid, {"content": []})
    assert _tables(server) == ({}, {}, {}, {})
    assert server.data_to_send()[-1] == dumps(
        {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}
    )


def test_log_level_of_the_general_path_is_forgotten_with_the_result() -> None:
    _, server = modern_pair()
    meta = {PV: V, CC: {}, LL: "warning"}
    obj = {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"_meta": meta}}
    events: list[Event] = []
    server._receive_one(obj, 0.0, events, None)  # (the general path, as a fallback takes it)
    (event,) = events
    assert isinstance(event, RequestReceived)
    assert server._inbound_log_level == {50: "warning"}
    server.send_result(50, {"content": []})
    assert _tables(server) == ({}, {}, {}, {})


def test_log_level_of_the_fast_path_is_forgotten_with_the_result() -> None:
    _, server = modern_pair()
    meta = {PV: V, CC: {}, LL: "warning"}
    message = {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"_meta": meta}}
    (event,) = server.receive_message(dumps(message), now=0.0)
    assert isinstance(event, RequestReceived)
    assert server._inbound_log_level == {50: "warning"}
    server.send_result(50, {"content": []})
    assert _tables(server) == ({}, {}, {}, {})


def test_a_listen_answered_ends_its_subscription() -> None:
    client, server = modern_pair()
    rid = client.send_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, now=0.0
    )
    for message in client.data_to_send():
        server.receive_message(message, now=0.0)
    assert server.subscriptions() == (rid,)
    server.send_result(rid, {})
    assert server.subscriptions() == ()
    assert _tables(server) == ({}, {}, {}, {})


def test_a_batch_answered_result_by_result_goes_out_once_whole() -> None:
    client, server = legacy_pair(supported_versions=("2025-03-26",))
    assert server.protocol_version == "2025-03-26"
    requests = []
    for _ in range(2):
        client.send_request("tools/call", {"name": "x"}, now=0.0)
        requests.append(client.data_to_send()[0])
    server.receive_message(b"[" + b",".join(requests) + b"]", now=0.0)
    first, second = server.inflight_requests()
    server.send_result(first, {"content": []})
    assert server.data_to_send() == []  # (the batch's answer waits for its last reply)
    server.send_result(second, {"content": []})
    (answer,) = server.data_to_send()
    assert answer == dumps(
        [
            {"jsonrpc": "2.0", "id": first, "result": {"content": []}},
            {"jsonrpc": "2.0", "id": second, "result": {"content": []}},
        ]
    )
    assert _tables(server) == ({}, {}, {}, {})

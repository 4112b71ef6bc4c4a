"""A peer's odd but well-formed JSON: never an exception out of the core, never a table
that grows with what the peer chooses to send."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ErrorCode,
    ErrorReceived,
    InputRequired,
    InvalidMessageReceived,
    LocalProtocolError,
    NotificationReceived,
    RequestReceived,
)
from mcp_sansio._json import dumps, loads

from .test_fastpath import legacy_pair, modern_pair

UNHASHABLE: list[Any] = [[1], {"a": 1}]


def _message(**members: Any) -> bytes:
    return dumps({"jsonrpc": "2.0", **members})


@pytest.mark.parametrize("rid", UNHASHABLE)
@pytest.mark.parametrize("pair", [legacy_pair, modern_pair])
def test_client_ignores_a_cancellation_with_a_list_or_object_id(pair: Any, rid: Any) -> None:
    client, _ = pair()
    params = {"requestId": rid}
    events = client.receive_message(
        _message(method="notifications/cancelled", params=params), now=0.0
    )
    assert events == []
    assert client.data_to_send() == []


@pytest.mark.parametrize("sub_id", UNHASHABLE)
@pytest.mark.parametrize("pair", [legacy_pair, modern_pair])
def test_notification_with_a_list_or_object_subscription_id_is_plain(
    pair: Any, sub_id: Any
) -> None:
    client, _ = pair()
    params = {"_meta": {"io.modelcontextprotocol/subscriptionId": sub_id}}
    events = client.receive_message(
        _message(method="notifications/tools/list_changed", params=params), now=0.0
    )
    assert events == [
        NotificationReceived(method="notifications/tools/list_changed", params=params)
    ]


@pytest.mark.parametrize("level", [*UNHASHABLE, 3, None, "bogus"])
def test_set_level_with_a_bad_level_is_invalid_params(level: Any) -> None:
    _, server = legacy_pair()
    (event,) = server.receive_message(
        _message(id=99, method="logging/setLevel", params={"level": level}), now=0.0
    )
    assert isinstance(event, InvalidMessageReceived)
    (reply,) = server.data_to_send()
    assert loads(reply)["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert loads(reply)["id"] == 99
    # The session goes on: a good level is taken.
    server.receive_message(
        _message(id=100, method="logging/setLevel", params={"level": "info"}), now=0.0
    )
    assert loads(server.data_to_send()[0])["result"] == {}


def _accept_caches(conn: Connection) -> int:
    return len(conn._accept_ok) + len(conn._modern_accept_ok)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_verdict_caches_do_not_grow_with_the_peers_method_names(era: str) -> None:
    client, server = legacy_pair() if era == "legacy" else modern_pair()
    before = _accept_caches(server)
    for n in range(200):
        client.send_request(f"x-vendor/method-{n}", {"n": n}, now=0.0)
        (message,) = client.data_to_send()
        (event,) = server.receive_message(message, now=0.0)
        assert isinstance(event, RequestReceived) and event.method == f"x-vendor/method-{n}"
        server.send_result(event.request_id, {"n": n})
        (answer,) = server.data_to_send()
        client.receive_message(answer, now=0.0)
    assert _accept_caches(server) == before
    assert not server.inflight_requests() and not client.pending_requests()


def test_legacy_client_caches_only_the_revisions_server_requests() -> None:
    client, server = legacy_pair()
    before = _accept_caches(client)
    for n in range(50):
        server.send_request(f"x-vendor/ask-{n}", now=0.0)
        (message,) = server.data_to_send()
        (event,) = client.receive_message(message, now=0.0)
        assert isinstance(event, RequestReceived)
        client.send_result(event.request_id, {})
        server.receive_message(client.data_to_send()[0], now=0.0)
    assert _accept_caches(client) == before


def _input_required(client: Connection, method: str, result: dict[str, Any]) -> list[Any]:
    rid = client.send_request(method, {"name": "x"}, now=0.0)
    client.data_to_send()
    return client.receive_message(_message(id=rid, result=result), now=0.0)


@pytest.mark.parametrize(
    ("method", "result", "why"),
    [
        (
            "tools/call",
            {"resultType": "input_required", "inputRequests": {}, "requestState": 12345},
            "requestState is not a string",
        ),
        (
            "tools/call",
            {"resultType": "input_required", "inputRequests": [1, 2]},
            "inputRequests is not an object",
        ),
        ("tools/call", {"resultType": "input_required"}, "no inputRequests or requestState"),
        (
            "tools/call",
            {"resultType": "input_required", "inputRequests": {"a": {"method": "x/y"}}},
            "unsupported input request",
        ),
        (
            "tools/list",
            {"resultType": "input_required", "requestState": "s"},
            "tools/list may not return input_required",
        ),
    ],
)
def test_modern_client_refuses_a_bad_input_required_result(
    method: str, result: dict[str, Any], why: str
) -> None:
    client, _ = modern_pair()
    (event,) = _input_required(client, method, result)
    assert isinstance(event, ErrorReceived), event
    assert event.error.code == ErrorCode.INTERNAL_ERROR and why in event.error.message
    # Nothing is kept for a retry: the request ended with the error.
    assert not client._awaiting_input and not client.pending_requests()
    with pytest.raises(LocalProtocolError, match="not awaiting input"):
        client.retry_with_input(event.request_id, {}, now=0.0)


def test_modern_client_delivers_a_good_input_required_result() -> None:
    client, _ = modern_pair()
    ask = {"method": "elicitation/create", "params": {"message": "?"}}
    (event,) = _input_required(
        client,
        "tools/call",
        {"resultType": "input_required", "inputRequests": {"a": ask}, "requestState": "st"},
    )
    assert isinstance(event, InputRequired)
    assert event.input_requests == {"a": ask} and event.request_state == "st"
    retry = client.retry_with_input(event.request_id, {"a": {"action": "decline"}}, now=0.0)
    (sent,) = client.data_to_send()
    params = loads(sent)["params"]
    assert loads(sent)["id"] == retry
    assert params["requestState"] == "st" and params["inputResponses"] == {
        "a": {"action": "decline"}
    }
    with pytest.raises(LocalProtocolError, match="not awaiting input"):
        client.retry_with_input(event.request_id, {}, now=0.0)


@pytest.mark.parametrize("responses", [["not", "a", "mapping"], {"a": {1, 2}}])
def test_failed_retry_changes_nothing(responses: Any) -> None:
    client, _ = modern_pair()
    (event,) = _input_required(
        client, "tools/call", {"resultType": "input_required", "requestState": "st"}
    )
    assert isinstance(event, InputRequired)
    with pytest.raises((LocalProtocolError, TypeError)):
        client.retry_with_input(event.request_id, responses, now=0.0)
    assert client.data_to_send() == [] and not client.pending_requests()
    # Still awaiting input: a good retry goes out under the next id.
    retry = client.retry_with_input(event.request_id, {}, now=0.0)
    (sent,) = client.data_to_send()
    assert isinstance(event.request_id, int)
    assert loads(sent)["id"] == retry == event.request_id + 1


def test_receive_decoded_takes_one_message_never_a_batch() -> None:
    client, server = legacy_pair()
    (event,) = server.receive_decoded([{"jsonrpc": "2.0", "id": 5, "method": "ping"}], now=0.0)
    assert isinstance(event, InvalidMessageReceived)
    assert loads(server.data_to_send()[0]) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": ErrorCode.INVALID_REQUEST,
            "message": "Invalid Request: not a JSON object",
        },
    }
    rid = client.send_request("tools/list", now=0.0)
    (event,) = server.receive_decoded(loads(client.data_to_send()[0]), now=0.0)
    assert isinstance(event, RequestReceived) and event.request_id == rid
    server.receive_eof()
    assert server.receive_decoded({"jsonrpc": "2.0", "id": 9, "method": "ping"}, now=0.0) == []
    assert server.data_to_send() == []

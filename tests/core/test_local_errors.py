"""Errors the client core makes itself are marked as such, no I/O.

2026-07-28 basic/index.mdx, Error Codes: "Implementations surfacing local errors in
JSON-RPC-shaped structures should ensure they cannot be mistaken for errors received from
the peer." A result the client cannot use (an unknown ``resultType``, ``input_required``
where the method may not ask, a malformed ``InputRequiredResult``) and a handshake answer
that settles no version end the request with an ``ErrorReceived`` whose ``local`` is true;
the server's own error, even the same code, has ``local`` false.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import Connection, ConnectionConfig, ErrorCode, ErrorReceived, ResultReceived

from .test_connection_legacy import feed, only
from .test_connection_modern import modern_pair

INPUT = {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {}}}


@pytest.mark.parametrize(
    ("method", "result", "why"),
    [
        ("tools/call", {"resultType": "weird"}, "unrecognized resultType 'weird'"),
        ("tools/call", {"resultType": 42}, "unrecognized resultType 42"),
        ("tools/list", {"resultType": "input_required", "requestState": "s"}, "may not return"),
        ("tools/call", {"resultType": "input_required"}, "no inputRequests or requestState"),
        ("tools/call", {"resultType": "input_required", "requestState": 7}, "not a string"),
        ("tools/call", {"resultType": "input_required", "inputRequests": []}, "not an object"),
        (
            "tools/call",
            {"resultType": "input_required", "inputRequests": {"q": {"method": "tools/list"}}},
            "unsupported input request 'q'",
        ),
    ],
)
def test_a_result_the_client_cannot_use_ends_the_request_with_a_local_error(
    method: str, result: dict[str, Any], why: str
) -> None:
    pair = modern_pair()
    params = {"name": "t"} if method == "tools/call" else None
    rid = pair.client.send_request(method, params, now=0.0)
    pair.client.data_to_send()
    events, out = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "result": result})
    error = only(events, ErrorReceived)
    assert error.request_id == rid and error.method == method
    assert error.local is True
    assert error.error.code == ErrorCode.INTERNAL_ERROR and why in error.error.message
    assert out == [] and pair.client.pending_requests() == ()


def test_the_servers_own_error_is_not_local() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.client.data_to_send()
    answer = {"code": -32603, "message": "Invalid result: unrecognized resultType 'weird'"}
    events, _ = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "error": answer})
    error = only(events, ErrorReceived)
    assert error.local is False
    assert error.error.code == ErrorCode.INTERNAL_ERROR


def test_a_usable_input_required_result_is_no_error() -> None:
    pair = modern_pair()
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.client.data_to_send()
    result = {"resultType": "input_required", "inputRequests": {"q": INPUT}}
    events, _ = feed(pair.client, {"jsonrpc": "2.0", "id": rid, "result": result})
    assert not [e for e in events if isinstance(e, ErrorReceived | ResultReceived)]


@pytest.mark.parametrize(
    ("result", "code"),
    [
        ({"resultType": "bogus", "supportedVersions": ["2026-07-28"]}, ErrorCode.INTERNAL_ERROR),
        ({"supportedVersions": ["2099-01-01"]}, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
    ],
)
def test_a_discover_result_that_settles_nothing_is_a_local_error(
    result: dict[str, Any], code: ErrorCode
) -> None:
    client = Connection("client", ConnectionConfig(era="modern"))
    rid = client.start(now=0.0)
    client.data_to_send()
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": result})
    error = only(events, ErrorReceived)
    assert error.local is True and error.error.code == code


def test_a_discover_error_of_the_servers_is_not_local() -> None:
    client = Connection("client", ConnectionConfig(era="modern"))
    rid = client.start(now=0.0)
    client.data_to_send()
    refused = {"code": -32022, "message": "no", "data": {"supported": ["2099-01-01"]}}
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "error": refused})
    error = only(events, ErrorReceived)
    assert error.local is False and error.error.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION


def test_an_initialize_result_with_a_version_we_do_not_speak_is_a_local_error() -> None:
    client = Connection("client", ConnectionConfig(era="legacy"))
    rid = client.start(now=0.0)
    client.data_to_send()
    result = {"protocolVersion": "1999-01-01", "capabilities": {}}
    events, _ = feed(client, {"jsonrpc": "2.0", "id": rid, "result": result})
    error = only(events, ErrorReceived)
    assert error.local is True and error.method == "initialize"
    assert error.error.code == ErrorCode.INVALID_PARAMS

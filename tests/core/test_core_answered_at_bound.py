"""Requests the core answers itself (``ping``, ``server/discover``, ``logging/setLevel``)
are answered also when the peer's requests fill ``max_inflight_requests``: they take no
in-flight place (ping.mdx: "The receiver MUST respond promptly with an empty response").
Ordinary requests past the bound are still refused."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from mcp_sansio import (
    LEGACY_VERSIONS,
    Connection,
    ConnectionConfig,
    ErrorCode,
    RequestReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import SERVER_CAPS, handshaken

V = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"


def feed(conn: Connection, obj: Any) -> tuple[list[Any], list[Any]]:
    events = conn.receive_message(dumps(obj), now=0.0)
    return events, [loads(p) for p in conn.data_to_send()]


def req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def modern_req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return req(rid, method, {**(params or {}), "_meta": {PV: V, CC: {}}})


def assert_too_many(out: list[Any], rid: Any) -> None:
    assert len(out) == 1 and out[0]["id"] == rid, out
    assert out[0]["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert "Too many requests in flight" in out[0]["error"]["message"]


def busy_legacy_server(version: str) -> Connection:
    """A legacy server in a ``version`` session whose one in-flight place is taken."""
    server = Connection(
        "server", ConnectionConfig(capabilities=SERVER_CAPS, max_inflight_requests=1)
    )
    init = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    feed(server, req(0, "initialize", init))
    feed(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    events, out = feed(server, req(1, "tools/list"))  # held by the application
    assert [type(e) for e in events] == [RequestReceived] and out == []
    return server


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_server_answers_ping_at_the_bound(version: str) -> None:
    server = busy_legacy_server(version)
    for rid, params in ((2, None), (3, {}), (4, {"_meta": {"progressToken": "p"}})):
        events, out = feed(server, req(rid, "ping", params))
        assert events == [] and out == [{"jsonrpc": "2.0", "id": rid, "result": {}}]
    # The pings took no place: the bound still holds for ordinary requests.
    assert server.inflight_requests() == (1,)
    _, out = feed(server, req(5, "tools/list"))
    assert_too_many(out, 5)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_server_answers_logging_set_level_at_the_bound(version: str) -> None:
    server = busy_legacy_server(version)
    events, out = feed(server, req(2, "logging/setLevel", {"level": "error"}))
    assert events == [] and out == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    # A bad level is still the core's own -32602, not "too many".
    _, out = feed(server, req(3, "logging/setLevel", {"level": "loud"}))
    assert out[0]["error"]["code"] == ErrorCode.INVALID_PARAMS
    assert server.inflight_requests() == (1,)


def test_legacy_server_ping_in_a_batch_at_the_bound() -> None:
    server = busy_legacy_server("2025-03-26")
    _, out = feed(server, [req(2, "ping"), req(3, "tools/list")])
    (replies,) = out
    by_id = {r["id"]: r for r in replies}
    assert by_id[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert "Too many requests in flight" in by_id[3]["error"]["message"]


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_legacy_client_answers_ping_at_the_bound(version: str) -> None:
    pair = handshaken(
        "legacy",
        supported_versions=(version,),
        max_inflight_requests=1,
        server={"supported_versions": (version,)},
    )
    client = pair.client
    events, out = feed(client, req("s1", "roots/list"))  # held by the application
    assert [type(e) for e in events] == [RequestReceived] and out == []
    events, out = feed(client, req("s2", "ping"))
    assert events == [] and out == [{"jsonrpc": "2.0", "id": "s2", "result": {}}]
    assert client.inflight_requests() == ("s1",)
    _, out = feed(client, req("s3", "roots/list"))
    assert_too_many(out, "s3")


@pytest.mark.parametrize("era", ["modern", "auto"])
def test_modern_server_answers_discover_at_the_bound(era: Literal["modern", "auto"]) -> None:
    config = ConnectionConfig(capabilities=SERVER_CAPS, era=era, max_inflight_requests=1)
    server = Connection("server", config)
    events, out = feed(server, modern_req(1, "tools/list"))  # held by the application
    assert [type(e) for e in events] == [RequestReceived] and out == []
    events, out = feed(server, modern_req(2, "server/discover"))
    assert events == [] and len(out) == 1 and out[0]["id"] == 2, out
    assert V in out[0]["result"]["supportedVersions"]
    assert server.inflight_requests() == (1,)
    _, out = feed(server, modern_req(3, "tools/list"))
    assert_too_many(out, 3)


def test_a_method_the_core_refuses_is_refused_for_itself_at_the_bound() -> None:
    # A modern ping is no method of 2026-07-28: at the bound it gets that -32601 (the
    # core's own answer, no place taken), as it would below the bound.
    server = Connection(
        "server", ConnectionConfig(capabilities=SERVER_CAPS, max_inflight_requests=1)
    )
    feed(server, modern_req(1, "tools/list"))
    _, out = feed(server, modern_req(2, "ping"))
    assert out[0]["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
    assert "does not exist in protocol version 2026-07-28" in out[0]["error"]["message"]
    assert server.inflight_requests() == (1,)

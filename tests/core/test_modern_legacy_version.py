"""A modern request whose ``_meta`` names a version the server speaks only through
``initialize`` (2025-11-25 on a dual-era server) is answered -32022 with that version
still in ``data.supported`` (a dual-era client reads it to fall back to initialize),
and a message that says how the version is served, so the answer does not read as
"unsupported, but supported"."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import Connection, ConnectionConfig, ErrorCode, ErrorData
from mcp_sansio import _modern as m
from mcp_sansio._json import dumps, loads
from tests.schema import validate_message

from .helpers import SERVER_CAPS

V = "2026-07-28"
ALL = [V, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def envelope(version: str) -> dict[str, Any]:
    return {"_meta": {m.PROTOCOL_VERSION_KEY: version, m.CLIENT_CAPABILITIES_KEY: {}}}


@pytest.mark.parametrize("version", ALL[1:])
def test_a_legacy_version_per_request_says_it_is_served_through_initialize(
    version: str,
) -> None:
    server = Connection("server", ConnectionConfig(capabilities=SERVER_CAPS))
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": envelope(version)}
    server.receive_message(dumps(request), now=0.0)
    (answer,) = [loads(p) for p in server.data_to_send()]
    assert answer["error"] == {
        "code": ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        "message": f"Unsupported protocol version in a request's _meta: {version} is served "
        "through the initialize handshake (send initialize first), not per request; per "
        f"request this server accepts {V}",
        "data": {"supported": ALL, "requested": version},  # unchanged: clients rely on it
    }
    validate_message(V, answer)


def test_a_version_the_server_does_not_speak_is_just_unsupported() -> None:
    err = m.validate_envelope(
        "tools/list", envelope("2030-01-01"), supported_versions=ALL, stateless_versions=[V]
    )
    assert err == ErrorData(
        code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        message="Unsupported protocol version",
        data={"supported": ALL, "requested": "2030-01-01"},
    )


def test_without_per_request_versions_the_message_names_none() -> None:
    err = m.validate_envelope(
        "tools/list",
        envelope("2025-11-25"),
        supported_versions=["2025-11-25"],
        stateless_versions=[],
    )
    assert isinstance(err, ErrorData)
    assert err.message == (
        "Unsupported protocol version in a request's _meta: 2025-11-25 is served through "
        "the initialize handshake (send initialize first), not per request"
    )
    assert err.data == {"supported": ["2025-11-25"], "requested": "2025-11-25"}

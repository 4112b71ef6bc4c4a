"""Fields newer than the negotiated revision are left out of what the core writes, no I/O.

lifecycle.mdx: "Both parties MUST respect the negotiated protocol version." The core
wrote the progress ``message`` (2025-03-26) in a 2024-11-05 session, and a client
declared ``"elicitation": {"form": {}}`` (elicitation: 2025-06-18; its modes:
2025-11-25) in an ``initialize`` offering 2024-11-05 or 2025-03-26. The table is
``mcp_sansio._revision_fields.FIELDS_SINCE``.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    ALL_VERSIONS,
    LEGACY_VERSIONS,
    Connection,
    ConnectionConfig,
    ProgressReceived,
    RequestReceived,
)
from mcp_sansio._json import loads
from mcp_sansio._revision_fields import LACKING
from mcp_sansio._versions import REVISIONS

from .helpers import validate_wire
from .test_connection_legacy import only, ready_pair
from .test_connection_modern import modern_pair


def test_the_table_agrees_with_the_revisions() -> None:
    # (The fields themselves are read off the schemas: tests/core/test_revision_fields.py.)
    for version in LEGACY_VERSIONS:
        revision, lacking = REVISIONS[version], LACKING.get(version, {})
        assert ("elicitation" in lacking.get("ClientCapabilities", ())) is (
            "elicitation/create" not in revision.server_requests
        ), version
        modes = lacking.get("ElicitationCapability", frozenset())
        assert modes == (frozenset() if revision.elicitation_modes else {"form", "url"})
    # (Progress has a message from 2025-03-26 on, the modern revision included.)
    progress = {v: LACKING.get(v, {}).get("ProgressNotificationParams") for v in ALL_VERSIONS}
    assert [v for v, lacks in progress.items() if lacks and "message" in lacks] == ["2024-11-05"]


def _progress_params(pair: Any, rid: Any) -> list[dict[str, Any]]:
    return [
        msg["params"]
        for sender, msg in pair.wire
        if sender == "server" and msg.get("method") == "notifications/progress"
    ]


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_progress_message_only_where_the_revision_has_it(version: str) -> None:
    pair = ready_pair(version)
    rid = pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.server.send_progress(req.request_id, 1, 10, "one")
    event = only(pair.deliver(pair.server), ProgressReceived)
    (params,) = _progress_params(pair, rid)
    if version == "2024-11-05":
        assert params == {"progressToken": rid, "progress": 1, "total": 10}
        assert event.message is None
    else:
        assert params["message"] == "one" and event.message == "one"
    validate_wire(pair, version)


def test_modern_progress_keeps_its_message() -> None:
    pair = modern_pair()
    pair.client.send_request("tools/call", {"name": "t"}, progress=True, now=0.0)
    req = only(pair.deliver(pair.client), RequestReceived)
    assert pair.server.send_progress(req.request_id, 1, None, "one")
    assert only(pair.deliver(pair.server), ProgressReceived).message == "one"


def _initialize_capabilities(version: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    client = Connection(
        "client",
        ConnectionConfig(capabilities=capabilities, supported_versions=(version,), era="legacy"),
    )
    client.start(now=0.0)
    (sent,) = [loads(m) for m in client.data_to_send()]
    assert sent["method"] == "initialize" and sent["params"]["protocolVersion"] == version
    assert client.config.capabilities == capabilities  # (ours, unchanged)
    declared: dict[str, Any] = sent["params"]["capabilities"]
    return declared


FORM = {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {"form": {}}}


@pytest.mark.parametrize(
    ("version", "elicitation"),
    [
        ("2024-11-05", None),
        ("2025-03-26", None),
        ("2025-06-18", {}),  # (an empty object: form, the one kind there is)
        ("2025-11-25", {"form": {}}),
    ],
)
def test_initialize_declares_what_the_offered_version_defines(
    version: str, elicitation: dict[str, Any] | None
) -> None:
    declared = _initialize_capabilities(version, FORM)
    assert declared.get("elicitation") == elicitation
    assert declared["sampling"] == {} and declared["roots"] == {"listChanged": True}


@pytest.mark.parametrize(
    ("version", "capability", "declared"),
    [
        ("2025-06-18", {"form": {}, "url": {}}, {}),
        ("2025-06-18", {"url": {}}, None),  # (URLs only: no kind 2025-06-18 has)
        ("2025-06-18", {}, {}),
        ("2025-11-25", {"url": {}}, {"url": {}}),
        ("2025-03-26", {}, None),
    ],
)
def test_elicitation_modes_before_2025_11_25(
    version: str, capability: dict[str, Any], declared: dict[str, Any] | None
) -> None:
    got = _initialize_capabilities(version, {"elicitation": capability})
    assert got.get("elicitation") == declared


def test_a_client_of_every_version_offers_its_newest_and_declares_all() -> None:
    # Offering 2025-11-25 (any older one is the server's to pick), the whole of it.
    client = Connection(
        "client", ConnectionConfig(capabilities=FORM, supported_versions=LEGACY_VERSIONS)
    )
    client.start(now=0.0)
    (sent,) = [loads(m) for m in client.data_to_send()]
    assert sent["params"]["capabilities"] == FORM

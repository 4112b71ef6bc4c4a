"""The legacy POST's headers, built once per session id and version
(``HttpClient._legacy_post``): each POST carries those of the session in use, exactly
what building them for each message gives."""

from __future__ import annotations

from mcp_sansio._json import dumps
from mcp_sansio.http import HttpClient, HttpRequest

URL = "http://example.com:8080/mcp?x=1"


def _call(rid: int) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {}})


def _expected(version: str | None, session: str | None) -> HttpRequest:
    headers = [
        ("Host", "example.com:8080"),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
    ]
    if version is not None:
        headers.append(("MCP-Protocol-Version", version))
    if session is not None:
        headers.append(("Mcp-Session-Id", session))
    return HttpRequest(method="POST", target="/mcp?x=1", headers=headers)


def test_each_post_carries_the_session_and_version_in_use() -> None:
    client = HttpClient(URL)
    states = [
        (None, None),
        (None, None),
        ("2025-06-18", None),
        ("2025-06-18", "s-1"),
        ("2025-06-18", "s-1"),
        ("2025-06-18", "s-2"),  # another session, same version
        ("2025-03-26", "s-2"),  # another version, same session
        (None, None),  # (terminated)
        ("2025-06-18", "s-1"),  # the first session again
    ]
    for rid, (version, session) in enumerate(states):
        client.protocol_version, client.session_id = version, session
        body = _call(rid)
        sent = client.post(body)
        want = _expected(version, session)
        assert sent.request.headers == want.headers, (version, session)
        assert sent.request == want.with_body(body)
        assert sent.session_id == session
        assert sent.request.header("mcp-session-id") == session


def test_terminate_then_post_carries_no_session() -> None:
    client = HttpClient(URL)
    client.protocol_version, client.session_id = "2025-06-18", "s-1"
    assert client.post(_call(1)).request.header("mcp-session-id") == "s-1"
    assert client.terminate() is not None
    after = client.post(_call(2)).request
    assert after.header("mcp-session-id") is None
    assert after.header("mcp-protocol-version") is None
    assert after.headers == _expected(None, None).headers


def test_a_modern_post_is_built_apart_from_the_legacy_ones() -> None:
    client = HttpClient(URL)
    client.protocol_version, client.session_id = "2025-06-18", "s-1"
    client.post(_call(1))
    modern = dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"io.modelcontextprotocol/protocolVersion": "V"}},
        }
    )
    request = client.post(modern).request
    assert request.header("mcp-session-id") is None
    assert request.header("mcp-protocol-version") == "V"
    assert request.header("mcp-method") == "tools/call"
    assert request.header("mcp-name") == "t"
    # ... and the legacy one after it is the session's still.
    assert client.post(_call(3)).request.header("mcp-session-id") == "s-1"

"""The legacy POST's headers, built once per session id and version
(``HttpClient._legacy_post``): each POST carries those of the session in use, exactly
what building them for each message gives. And the message's shape check and the
answer's ``Content-Type`` lookup (``field_value``, no header table)."""

from __future__ import annotations

import pytest

from mcp_sansio._errors import LocalProtocolError
from mcp_sansio._http_common import field_value
from mcp_sansio._json import dumps
from mcp_sansio.http import HttpClient, HttpRequest, HttpResponse

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


@pytest.mark.parametrize("payload", [b"[]", b"1", b'"x"', b"null", b"[1]", b'[{"a":1},2]'])
def test_what_is_not_a_message_or_batch_is_refused(payload: bytes) -> None:
    with pytest.raises(LocalProtocolError, match="not a JSON-RPC message or batch"):
        HttpClient(URL).post(payload)


def test_a_message_and_a_batch_are_posted_with_their_requests() -> None:
    client = HttpClient(URL)
    one = client.post(_call(1))
    assert (one.request_ids, one.methods) == ((1,), ("tools/call",))
    batch = client.post(b"[" + _call(2) + b"," + _call(3) + b"]")
    assert (batch.request_ids, batch.methods) == ((2, 3), ("tools/call", "tools/call"))


@pytest.mark.parametrize(
    ("headers", "kind"),
    [
        ([(b"Content-Type", b"application/json")], "json"),
        ([(b"content-type", b" Application/JSON; charset=utf-8 ")], "json"),
        ([(b"Content-Type", b"text/event-stream")], "sse"),
        ([(b"x-other", b"application/json")], "error"),
        # Repeated fields are one value joined with ", " (as header() reads them): no
        # media type a 2xx answer may have.
        ([(b"Content-Type", b"application/json"), (b"content-type", b"text/html")], "error"),
        ([(b"content-type", b"application/json"), (b"content-type", b"application/json")], "error"),
    ],
)
def test_the_answers_kind_is_read_from_its_content_type(
    headers: list[tuple[bytes, bytes]], kind: str
) -> None:
    client = HttpClient(URL)
    assert client.response(client.post(_call(1)), 200, headers).kind == kind


def test_field_value_is_what_header_returns() -> None:
    response = HttpResponse(
        status=200,
        headers=[(b"A", b"1"), (b"b", b"\xe9"), (b"a", b"2"), (b"c", b""), (b"A", b" 3 ")],
    )
    for name in ("a", "b", "c", "d"):
        assert field_value(response.headers, name.encode()) == response.header(name)

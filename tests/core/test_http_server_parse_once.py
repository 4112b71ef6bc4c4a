"""``HttpServer.handle_request`` parses each POST's body once.

It parses the body to route it (era, session, ``initialize``, scopes), then hands the
parsed message to the connection with the bytes (``receive_message(..., decoded=)``),
which does not parse it again; a batch's elements go one by one
(``receive_decoded``). Every ``loads`` of the core is replaced by a counting one.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import _conn_receive, _http_server, _jsonrpc
from mcp_sansio.http import HttpResponse, HttpServer

from .helpers import count_parses
from .test_http_server import (
    in_session,
    initialize,
    make_server,
    modern,
    modern_headers,
    note,
    open_session,
    req,
    rpc,
)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The texts the core parses, in order."""
    return count_parses(monkeypatch, _conn_receive, _http_server, _jsonrpc)


def post(srv: HttpServer, body: Any, parsed: list[bytes], **headers: str) -> HttpResponse:
    """POST ``body``; assert that it was parsed once, and nothing else."""
    parsed.clear()
    request = req(body=body, **headers)
    reply = srv.handle_request(request, now=0.0)
    assert parsed == [request.body]
    decision = reply.decision
    assert isinstance(decision, HttpResponse), decision
    return decision


def test_a_modern_request_is_parsed_once(parsed: list[bytes]) -> None:
    srv = make_server()
    answer = post(srv, modern(1, "server/discover"), parsed, **modern_headers("server/discover"))
    assert answer.status == 200


def test_a_legacy_session_s_messages_are_each_parsed_once(parsed: list[bytes]) -> None:
    srv = make_server(response_mode="json")
    opened = post(srv, initialize(), parsed)  # (the session's connection made for it)
    assert opened.status == 200
    sid = opened.header("mcp-session-id")
    assert sid is not None
    headers = in_session(sid)
    assert post(srv, note("notifications/initialized"), parsed, **headers).status == 202
    assert post(srv, rpc(2, "ping"), parsed, **headers).status == 200
    assert post(srv, {"jsonrpc": "2.0", "id": 3, "result": {}}, parsed, **headers).status == 202


def test_a_batch_is_parsed_once(parsed: list[bytes]) -> None:
    srv = make_server(response_mode="json")
    sid = open_session(srv, "2025-03-26")
    batch = [rpc(2, "ping"), note("notifications/roots/list_changed"), rpc(3, "ping")]
    answer = post(srv, batch, parsed, **in_session(sid, "2025-03-26"))
    assert answer.status == 200

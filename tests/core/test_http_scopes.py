"""Per-operation scopes, sans-IO: the decision and its JSON-RPC error, the ``403
insufficient_scope`` challenge, and :class:`HttpServer` refusing a POST (both eras, a
2025-03-26 batch whole) before anything of it is served. No I/O."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ErrorCode, RequestReceived
from mcp_sansio._json import loads
from mcp_sansio.http import (
    INSUFFICIENT_SCOPE_CODE,
    TOKEN_EXPIRED_CODE,
    AwaitResponse,
    HttpResponse,
    HttpServer,
    HttpServerConfig,
    OpenStream,
    Principal,
    ProtectedResourceMetadata,
    ServerEvent,
    check_scopes,
    insufficient_scope,
    insufficient_scope_response,
    token_expired,
)

from .test_http_server import (
    in_session,
    initialize,
    make_server,
    modern,
    modern_headers,
    note,
    open_session,
    outputs,
    payloads,
    received,
    req,
    rpc,
)

METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp", authorization_servers=["https://auth.example.com"]
)
WK = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
READER = Principal(subject="alice", scopes="files:read")
WRITER = Principal(subject="alice", scopes="files:read files:write")


# ================================================================== the decision


def test_a_principal_with_every_needed_scope_passes() -> None:
    assert insufficient_scope(WRITER, {"files:write"}) is None
    assert insufficient_scope(WRITER, "files:read files:write") is None
    assert insufficient_scope(READER, ()) is None
    assert insufficient_scope(Principal(subject="nobody"), "") is None


def test_the_error_names_every_needed_scope_and_says_which_are_missing() -> None:
    error = insufficient_scope(READER, ["files:write", "files:read", "admin"], resource_metadata=WK)
    assert error is not None
    assert error.code == INSUFFICIENT_SCOPE_CODE == 403
    # All of them, the granted one too (one challenge for the whole operation).
    assert error.data == {
        "error": "insufficient_scope",
        "scope": "admin files:read files:write",
        "resource_metadata": WK,
    }
    assert error.message == "Insufficient scope: the access token lacks admin files:write"
    bare = insufficient_scope(READER, "files:write")
    assert bare is not None and "resource_metadata" not in bare.data


@pytest.mark.parametrize("bad", ['a"b', "a\\b", ["a b"], ["é"], ["tab\t"]])
def test_what_a_challenge_cannot_carry_is_no_scope(bad: Any) -> None:
    with pytest.raises(ValueError, match="scope token"):
        check_scopes(bad)
    with pytest.raises(ValueError, match="scope token"):
        insufficient_scope(READER, bad)
    assert check_scopes("b a  a") == frozenset({"a", "b"})


def test_the_http_refusal_is_403_with_one_challenge_and_the_json_rpc_error() -> None:
    error = insufficient_scope(READER, "files:write", resource_metadata=WK)
    assert error is not None
    response = insufficient_scope_response(error, [7])
    assert response.status == 403
    assert response.header("content-type") == "application/json"
    assert response.header("www-authenticate") == (
        'Bearer error="insufficient_scope", scope="files:write", '
        f'resource_metadata="{WK}", '
        'error_description="Insufficient scope: the access token lacks files:write"'
    )
    assert loads(response.body) == {"jsonrpc": "2.0", "id": 7, "error": error.to_wire()}
    batch = insufficient_scope_response(error, [1, "two"], batch=True)
    assert [a["id"] for a in loads(batch.body)] == [1, "two"]
    assert loads(insufficient_scope_response(error, []).body)["id"] is None


# ================================================================== HttpServer


def _needs(calls: list[tuple[Principal, str, Any]] | None = None) -> Any:
    """A hook: ``tools/call`` of ``write`` needs ``files:write``, of ``both`` also
    ``files:read``; anything else nothing."""

    def required_scopes(principal: Principal, method: str, params: Any) -> Any:
        if calls is not None:
            calls.append((principal, method, params))
        name = (params or {}).get("name")
        if method == "tools/call" and name == "write":
            return "files:write"
        if method == "tools/call" and name == "both":
            return ["files:read", "files:write"]
        return ()

    return required_scopes


def _server(**cfg: Any) -> HttpServer:
    return make_server(required_scopes=_needs(), resource_metadata=METADATA, **cfg)


def _call(rid: Any, name: str) -> dict[str, Any]:
    return rpc(rid, "tools/call", {"name": name, "arguments": {}})


def _modern_call(srv: HttpServer, name: str, principal: Any) -> Any:
    body = modern(1, "tools/call", {"name": name, "arguments": {}})
    return srv.handle_request(
        req(body=body, **modern_headers("tools/call", name)), now=0, principal=principal
    )


def _assert_refused(decision: Any, scope: str, ids: Any) -> None:
    assert isinstance(decision, HttpResponse) and decision.status == 403
    challenge = decision.header("www-authenticate")
    assert challenge is not None
    assert challenge.startswith(f'Bearer error="insufficient_scope", scope="{scope}", ')
    assert f'resource_metadata="{WK}"' in challenge
    body = loads(decision.body)
    answers = body if isinstance(body, list) else [body]
    assert [a["id"] for a in answers] == ids
    assert all(a["error"]["code"] == 403 for a in answers)


def test_modern_a_call_without_the_scope_is_refused_before_anything_is_served() -> None:
    calls: list[Any] = []
    srv = make_server(era="modern", required_scopes=_needs(calls), resource_metadata=METADATA)
    reply = _modern_call(srv, "both", READER)
    _assert_refused(reply.decision, "files:read files:write", [1])
    assert reply.events == () and srv.statistics()["modern_requests"] == 0
    principal, method, params = calls[0]
    assert (principal, method, params["name"]) == (READER, "tools/call", "both")
    # The same call with the scope is served; another tool needs nothing.
    served = _modern_call(srv, "both", WRITER)
    assert isinstance(served.decision, AwaitResponse)
    assert isinstance(received(served).event, RequestReceived)
    assert isinstance(_modern_call(srv, "read", READER).decision, AwaitResponse)


@pytest.mark.parametrize("who", ["alice", None])
def test_no_principal_no_check(who: str | None) -> None:
    # A bare subject (a binding that knows no scopes) or no authentication at all:
    # nothing to check the scopes of.
    srv = _server(era="modern")
    assert isinstance(_modern_call(srv, "write", who).decision, AwaitResponse)


def test_a_header_mismatch_is_answered_before_the_scopes() -> None:
    srv = _server(era="modern")
    body = modern(1, "tools/call", {"name": "write", "arguments": {}})
    reply = srv.handle_request(
        req(body=body, **modern_headers("tools/call", "other")), now=0, principal=READER
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 400


def _legacy_session(srv: HttpServer, version: str = "2025-11-25") -> str:
    reply = srv.handle_request(req(body=initialize(version=version)), now=0, principal=READER)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 200
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    done = srv.handle_request(
        req(body=note("notifications/initialized"), **in_session(sid, version)),
        now=0,
        principal=READER,
    )
    assert isinstance(done.decision, HttpResponse) and done.decision.status == 202
    return sid


def test_legacy_a_refused_call_leaves_the_session_as_it_was() -> None:
    srv = _server()
    sid = _legacy_session(srv)  # (initialize needs no scope)
    refused = srv.handle_request(
        req(body=_call(5, "write"), **in_session(sid)), now=1, principal=READER
    )
    _assert_refused(refused.decision, "files:write", [5])
    assert refused.events == () and srv.sessions() == (sid,)
    # The same id again, after a step-up (same subject, wider token): served, so the
    # refused one never reached the session.
    again = srv.handle_request(
        req(body=_call(5, "write"), **in_session(sid)), now=2, principal=WRITER
    )
    event = received(again).event
    assert isinstance(event, RequestReceived) and event.request_id == 5
    # Notifications carry no operation: not checked.
    cancelled = note("notifications/cancelled", {"requestId": 99})
    quiet = srv.handle_request(req(body=cancelled, **in_session(sid)), now=3, principal=READER)
    assert isinstance(quiet.decision, HttpResponse) and quiet.decision.status == 202


def test_a_2025_03_26_batch_is_refused_whole_in_one_challenge() -> None:
    srv = _server(versions=("2025-03-26",))
    sid = _legacy_session(srv, "2025-03-26")
    batch = [
        _call(1, "read"),
        _call(2, "write"),
        note("notifications/roots/list_changed"),
        _call(3, "both"),
    ]
    headers = in_session(sid, "2025-03-26")
    refused = srv.handle_request(req(body=batch, **headers), now=1, principal=READER)
    # Every scope of every request in one challenge; every request answered the error.
    _assert_refused(refused.decision, "files:read files:write", [1, 2, 3])
    # Only the requests are refused: the notification still reaches the session.
    assert [type(e.event).__name__ for e in refused.events if isinstance(e, ServerEvent)] == [
        "NotificationReceived"
    ]
    served = srv.handle_request(req(body=batch, **headers), now=2, principal=WRITER)
    ids = [
        e.event.request_id
        for e in served.events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestReceived)
    ]
    assert ids == [1, 2, 3]


def test_a_refused_batch_still_delivers_the_answer_to_a_server_request() -> None:
    srv = _server(versions=("2025-03-26",))
    sid = _legacy_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    rid = conn.send_request("roots/list", now=0.0, timeout=60.0)
    srv.data_to_send()
    batch = [{"jsonrpc": "2.0", "id": rid, "result": {"roots": []}}, _call(2, "write")]
    refused = srv.handle_request(
        req(body=batch, **in_session(sid, "2025-03-26")), now=1, principal=READER
    )
    _assert_refused(refused.decision, "files:write", [2])
    assert conn.pending_requests() == ()  # answered, not left to time out
    assert [type(e.event).__name__ for e in refused.events if isinstance(e, ServerEvent)] == [
        "ResultReceived"
    ]


def _needed_by_id(reply: Any) -> dict[Any, Any]:
    return {
        e.event.request_id: e.needed_scopes
        for e in reply.events
        if isinstance(e, ServerEvent) and isinstance(e.event, RequestReceived)
    }


def test_a_served_request_carries_the_scopes_it_was_checked_to_need() -> None:
    # What the hook said, handed on with the request: the binding reads it rather
    # than asking the hook again (a task keeps it).
    calls: list[Any] = []
    srv = make_server(era="modern", required_scopes=_needs(calls), resource_metadata=METADATA)
    assert _needed_by_id(_modern_call(srv, "both", WRITER)) == {1: {"files:read", "files:write"}}
    assert _needed_by_id(_modern_call(srv, "read", READER)) == {1: frozenset()}
    assert len(calls) == 2
    # No principal, or no hook: nothing was checked.
    assert _needed_by_id(_modern_call(srv, "write", None)) == {1: None}
    bare = make_server(era="modern", resource_metadata=METADATA)
    assert _needed_by_id(_modern_call(bare, "write", WRITER)) == {1: None}
    assert len(calls) == 2


def test_each_request_of_a_batch_carries_its_own_scopes() -> None:
    srv = _server(versions=("2025-03-26",))
    sid = _legacy_session(srv, "2025-03-26")
    batch = [_call(1, "read"), _call("two", "write"), note("notifications/roots/list_changed")]
    served = srv.handle_request(
        req(body=batch, **in_session(sid, "2025-03-26")), now=1, principal=WRITER
    )
    assert _needed_by_id(served) == {1: frozenset(), "two": {"files:write"}}
    others = [
        e.needed_scopes
        for e in served.events
        if isinstance(e, ServerEvent) and not isinstance(e.event, RequestReceived)
    ]
    assert others == [None]  # (the notification: no request, nothing checked)
    single = srv.handle_request(
        req(body=_call(3, "both"), **in_session(sid, "2025-03-26")), now=2, principal=WRITER
    )
    assert _needed_by_id(single) == {3: {"files:read", "files:write"}}


def test_nothing_needed_is_never_checked() -> None:
    # A principal with no scope at all passes when the hook asks for none (and the
    # check is skipped: no challenge is built for an empty need).
    srv = _server()
    reply = _modern_call(srv, "read", Principal(subject="nobody"))
    assert isinstance(reply.decision, AwaitResponse)


def test_without_a_hook_the_check_is_never_entered() -> None:
    def forbidden(*args: Any) -> Any:
        raise AssertionError("no hook: nothing to check")  # pragma: no cover

    modern_srv = make_server(era="modern", resource_metadata=METADATA)
    modern_srv._scope_refusal = forbidden  # type: ignore[method-assign,assignment]
    assert isinstance(_modern_call(modern_srv, "write", READER).decision, AwaitResponse)
    legacy_srv = make_server(resource_metadata=METADATA)
    legacy_srv._scope_refusal = forbidden  # type: ignore[method-assign,assignment]
    sid = _legacy_session(legacy_srv)
    reply = legacy_srv.handle_request(
        req(body=_call(5, "write"), **in_session(sid)), now=1, principal=READER
    )
    assert isinstance(received(reply).event, RequestReceived)


def test_without_resource_metadata_the_challenge_names_none() -> None:
    srv = make_server(era="modern", required_scopes=_needs())
    decision = _modern_call(srv, "write", READER).decision
    assert isinstance(decision, HttpResponse) and decision.status == 403
    assert "resource_metadata" not in (decision.header("www-authenticate") or "")


@pytest.mark.parametrize("bad", [RuntimeError("bug"), ['a"b']])
def test_a_failing_hook_refuses_the_request(bad: Any) -> None:
    def hook(principal: Principal, method: str, params: Any) -> Any:
        if isinstance(bad, Exception):
            raise bad
        return bad

    srv = make_server(era="modern", required_scopes=hook)
    reply = _modern_call(srv, "write", READER)
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 500
    body = loads(reply.decision.body)
    assert body["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert body["id"] == 1  # (basic/index: an error answer carries the request's id)
    assert reply.events == ()


def test_a_failing_hook_answers_each_request_of_a_batch_under_its_id() -> None:
    def hook(principal: Principal, method: str, params: Any) -> Any:
        raise RuntimeError("bug")

    srv = make_server(required_scopes=hook, versions=("2025-03-26",))
    sid = _legacy_session(srv, "2025-03-26")
    batch = [_call(1, "read"), note("notifications/roots/list_changed"), _call("b", "write")]
    reply = srv.handle_request(
        req(body=batch, **in_session(sid, "2025-03-26")), now=1, principal=READER
    )
    assert isinstance(reply.decision, HttpResponse) and reply.decision.status == 500
    answers = loads(reply.decision.body)
    assert [a["id"] for a in answers] == [1, "b"]
    assert {a["error"]["code"] for a in answers} == {ErrorCode.INTERNAL_ERROR}
    assert [type(e.event).__name__ for e in reply.events if isinstance(e, ServerEvent)] == [
        "NotificationReceived"
    ]


@pytest.mark.parametrize(
    ("resource", "why"),
    [
        ('https://mcp.example.com/a"b', "resource_metadata has characters"),
        ("https://mcp.example.com/é", "a character a URL may not have"),  # (no URI has it)
    ],
)
def test_a_metadata_url_no_challenge_can_carry_is_refused_at_start_up(
    resource: str, why: str
) -> None:
    # It would go in every insufficient_scope challenge, which cannot carry it: refused
    # when configured, not answered 500 (and logged nowhere) on every such request.
    odd = ProtectedResourceMetadata(resource=resource, authorization_servers=["https://a.example"])
    with pytest.raises(ValueError, match=why):
        HttpServerConfig(resource_metadata=odd)
    HttpServerConfig(resource_metadata=METADATA)  # (a plain URL is fine)


def _junk(rid: Any) -> dict[str, Any]:
    """A batch element the core answers with an error of its own (an id that is no id)."""
    return {"jsonrpc": "2.0", "id": rid, "method": "ping"}


@pytest.mark.parametrize("hook", ["scopes", "failing"])
def test_a_refused_batch_still_answers_its_invalid_elements(hook: str) -> None:
    def boom(principal: Principal, method: str, params: Any) -> Any:
        raise RuntimeError("bug")

    srv = make_server(
        required_scopes=_needs() if hook == "scopes" else boom,
        resource_metadata=METADATA,
        versions=("2025-03-26",),
    )
    sid = _legacy_session(srv, "2025-03-26")
    conn = srv.session_connection(sid)
    assert conn is not None
    batch = [_call(2, "write"), _junk(True), note("notifications/roots/list_changed"), _junk(None)]
    reply = srv.handle_request(
        req(body=batch, **in_session(sid, "2025-03-26")), now=1, principal=READER
    )
    assert isinstance(reply.decision, HttpResponse)
    assert reply.decision.status == (403 if hook == "scopes" else 500)
    answers = loads(reply.decision.body)
    # One answer per element that needs one: the refused request under its id, and each
    # invalid element its own -32600 (id null), in one array (JSON-RPC 2.0 §6).
    assert [(a["id"], a["error"]["code"]) for a in answers] == [
        (2, 403 if hook == "scopes" else ErrorCode.INTERNAL_ERROR),
        (None, ErrorCode.INVALID_REQUEST),
        (None, ErrorCode.INVALID_REQUEST),
    ]
    assert conn.data_to_send() == []  # (nothing left over for another response)
    assert [type(e.event).__name__ for e in reply.events if isinstance(e, ServerEvent)] == [
        "InvalidMessageReceived",
        "NotificationReceived",
        "InvalidMessageReceived",
    ]


# ================================================================== a token that expires


def test_the_token_expired_error_says_what_a_401_challenge_would() -> None:
    error = token_expired(resource_metadata=WK)
    assert error.code == TOKEN_EXPIRED_CODE == 401
    assert error.data == {"error": "invalid_token", "resource_metadata": WK}
    assert "expired" in error.message
    assert token_expired().data == {"error": "invalid_token"}
    assert token_expired(subscription_id="l-1").data == {
        "error": "invalid_token",
        "io.modelcontextprotocol/subscriptionId": "l-1",
    }


def _listen(srv: HttpServer, rid: int = 4) -> int:
    body = modern(rid, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    reply = srv.handle_request(
        req(body=body, **modern_headers("subscriptions/listen")), now=0, principal=READER
    )
    assert isinstance(reply.decision, OpenStream)
    return reply.decision.stream_id


def test_an_expired_token_ends_a_listen_with_an_error_not_a_result() -> None:
    srv = make_server(resource_metadata=METADATA)
    stream_id = _listen(srv)
    assert srv.is_listen(stream_id)
    srv.send_notification("notifications/tools/list_changed")  # queued, not yet drained
    assert srv.token_expired(stream_id)
    out = outputs(srv)[stream_id]
    changed, answer = payloads(out.data)
    assert changed["method"] == "notifications/tools/list_changed"  # what was queued first
    # An error (a result would say the subscription is over), naming the metadata.
    assert answer["id"] == 4 and "result" not in answer
    assert answer["error"]["code"] == TOKEN_EXPIRED_CODE
    assert answer["error"]["data"] == {
        "error": "invalid_token",
        "resource_metadata": WK,
        "io.modelcontextprotocol/subscriptionId": 4,  # (which listen it ends)
    }
    assert out.end
    assert not srv.is_listen(stream_id)
    assert srv.send_notification("notifications/tools/list_changed") == 0
    assert not srv.token_expired(stream_id)  # over: nothing more to end
    assert srv.stream_closed(stream_id, now=1) == []
    assert not srv.token_expired(stream_id)


def test_an_expired_token_spares_a_listen_already_answered() -> None:
    # The server ended the subscription (a result, queued, not yet drained) just as
    # the token expired: that result is the one answer, and it ends the stream.
    srv = make_server(resource_metadata=METADATA)
    stream_id = _listen(srv)
    srv._modern[stream_id].conn.send_result(4, {"resultType": "complete"})
    assert not srv.token_expired(stream_id)
    out = outputs(srv)[stream_id]
    (answer,) = [p for p in payloads(out.data) if "id" in p]
    assert answer["id"] == 4 and answer["result"]["resultType"] == "complete"
    assert out.end and not srv.is_listen(stream_id)


def test_an_expired_token_releases_a_legacy_stream_and_spares_plain_requests() -> None:
    srv = make_server()
    sid = open_session(srv)
    get = srv.handle_request(req("GET", **in_session(sid)), now=0)
    assert isinstance(get.decision, OpenStream)
    assert not srv.is_listen(get.decision.stream_id)
    assert srv.token_expired(get.decision.stream_id)
    released = outputs(srv)[get.decision.stream_id]
    assert released.end and released.data.endswith(b"retry: 1000\n\n")
    # A modern request's stream ends with its own answer: the expiry leaves it be.
    call = modern(1, "tools/list")
    pending = srv.handle_request(req(body=call, **modern_headers("tools/list")), now=0)
    assert isinstance(pending.decision, AwaitResponse)
    assert not srv.is_listen(pending.decision.stream_id)
    assert not srv.token_expired(pending.decision.stream_id)
    assert not srv.token_expired(12345)  # no such response
    # Nor does it end a legacy response that is no stream (JSON).
    json_srv = make_server(response_mode="json")
    sid = open_session(json_srv)
    json_call = json_srv.handle_request(req(body=rpc(9, "tools/list"), **in_session(sid)), now=0)
    assert isinstance(json_call.decision, AwaitResponse)
    assert not json_srv.token_expired(json_call.decision.stream_id)


@pytest.mark.parametrize(
    "method", ["notifications/custom/thing", "notifications/elicitation/complete"]
)
def test_a_notification_no_listen_can_ask_for_is_not_an_error_of_a_broadcast(
    method: str,
) -> None:
    # A dual-era server: a custom (or legacy-only) notification goes to the legacy
    # sessions named; an open modern listen cannot ask for it, which is no error.
    srv = make_server(resource_metadata=METADATA)
    stream_id = _listen(srv)
    assert srv.send_notification(method, {"x": 1}) == 0
    assert srv.is_listen(stream_id)
    assert srv.send_notification("notifications/tools/list_changed") == 1  # still served

"""Per-operation scopes (``@server.tool(scopes=...)`` and friends, ``Server(required_scopes=
...)``): refused before the function runs, with a ``403 insufficient_scope`` challenge
over Streamable HTTP (our OAuth client steps up on it), with the JSON-RPC error 403 on
WebSocket (the session goes on), and not checked with no principal (in memory)."""

from __future__ import annotations

import datetime
import logging
import math
import socket
import time
from functools import partial
from typing import Any, Literal

import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio import (
    BearerAuth,
    Handlers,
    HttpServerConfig,
    McpError,
    Principal,
    ProtectedResourceMetadata,
    ResourceNotFound,
    Server,
    open_client,
    serve_http,
)
from mcp_trio._websocket import open_websocket_client

from .helpers import client_config
from .oauth_support import oauth
from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    POST_HEADERS,
    RawConnection,
    initialize_body,
    raw_request,
)
from .test_oauth_e2e import FakeAS

Era = Literal["legacy", "modern"]
ERAS: list[Era] = ["legacy", "modern"]
MODERN = "2026-07-28"
TOKENS = {
    "reader": Principal(subject="alice", scopes="files:read"),
    "writer": Principal(subject="alice", scopes="files:read files:write"),
    "admin": Principal(subject="root", scopes="files:read files:write admin notes prompts"),
}


def files_server(**kwargs: Any) -> Server:
    """``read`` needs nothing, ``write`` ``files:write``; deleting under ``/etc`` also
    ``admin`` (the server's hook, from the arguments); a note, its template and a
    prompt need ``notes`` or ``prompts``."""

    def dynamic(principal: Principal, method: str, params: Any) -> Any:
        arguments = (params or {}).get("arguments") or {}
        if method == "tools/call" and str(arguments.get("path", "")).startswith("/etc"):
            return "admin"
        if method == "tools/call" and arguments.get("path") == "boom":
            raise RuntimeError("the policy has a bug")
        return ()

    server = Server("files", required_scopes=dynamic, **kwargs)

    @server.tool()
    async def read(path: str) -> str:
        return f"read {path}"

    @server.tool(scopes="files:write")
    async def write(path: str) -> str:
        return f"wrote {path}"

    @server.tool(scopes=["files:write"])
    async def delete(path: str) -> str:
        return f"deleted {path}"

    @server.resource("notes://secret", scopes="notes")
    async def secret() -> str:
        return "the secret"

    @server.resource("notes://{id}", scopes={"notes"})
    async def note(id: str) -> str:
        if id == "missing":
            raise ResourceNotFound(f"notes://{id}")
        return f"note {id}"

    @server.prompt(scopes="prompts")
    async def review(language: Literal["python", "rust"]) -> str:
        return f"review {language}"

    return server


async def verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    return TOKENS.get(token)


def test_scopes_are_checked_when_registered() -> None:
    server = Server("s")
    with pytest.raises(ValueError, match="scope token"):
        server.add_tool(lambda: None, name="t", scopes=['say "hi"'])
    with pytest.raises(ValueError, match="scope token"):
        server.add_resource(lambda: "", "a://b", scopes=["a\\b"])
    with pytest.raises(ValueError, match="scope token"):
        server.add_prompt(lambda: "", name="p", scopes=["é"])
    assert not server._registry.tools and not server._registry.resources


async def test_without_a_principal_nothing_is_checked() -> None:
    # In memory (as on stdio, or HTTP without authenticate) nobody is authenticated:
    # there is no token whose scopes could be checked.
    with trio.fail_after(IO_TIMEOUT):
        async with files_server().connect_in_memory() as client:
            result = await client.request(
                "tools/call", {"name": "delete", "arguments": {"path": "/etc/x"}}
            )
            assert result["content"][0]["text"] == "deleted /etc/x"


async def _serve_ws(nursery: trio.Nursery) -> str:
    auth = BearerAuth(verify_token=verify)
    handle = await nursery.start(
        partial(files_server().serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    return str(handle.url)


async def _refused(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(McpError) as info:
        await session.request(method, params)
    error = info.value.error
    assert error.code == 403, error
    assert error.data["error"] == "insufficient_scope"
    return {"scope": error.data["scope"], "message": error.message}


@pytest.mark.parametrize("era", ERAS)
async def test_websocket_answers_a_json_rpc_error_and_the_session_goes_on(
    nursery: trio.Nursery, era: Era
) -> None:
    url = await _serve_ws(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            url,
            headers={"Authorization": "Bearer reader"},
            connection_config=client_config(era=era),
        ) as session:
            listed = await session.request("tools/list")
            assert [t["name"] for t in listed["tools"]] == ["read", "write", "delete"]
            call = {"name": "write", "arguments": {"path": "a"}}
            assert await _refused(session, "tools/call", call) == {
                "scope": "files:write",
                "message": "Insufficient scope: the access token lacks files:write",
            }
            # Declared and dynamic scopes together, in one error.
            dangerous = {"name": "delete", "arguments": {"path": "/etc/passwd"}}
            assert (await _refused(session, "tools/call", dangerous))["scope"] == (
                "admin files:write"
            )
            assert (await _refused(session, "resources/read", {"uri": "notes://secret"}))[
                "scope"
            ] == "notes"
            assert (await _refused(session, "resources/read", {"uri": "notes://7"}))[
                "scope"
            ] == "notes"
            review = {"name": "review", "arguments": {"language": "rust"}}
            assert (await _refused(session, "prompts/get", review))["scope"] == "prompts"
            complete = {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "language", "value": "r"},
            }
            assert (await _refused(session, "completion/complete", complete))["scope"] == (
                "prompts"
            )
            complete_note = {
                "ref": {"type": "ref/resource", "uri": "notes://{id}"},
                "argument": {"name": "id", "value": "7"},
            }
            assert (await _refused(session, "completion/complete", complete_note))["scope"] == (
                "notes"
            )
            if era == "legacy":
                subscribe = {"uri": "notes://secret"}
                assert (await _refused(session, "resources/subscribe", subscribe))["scope"] == (
                    "notes"
                )
            else:  # the modern equivalent, refused before it is acknowledged
                listen = {"notifications": {"resourceSubscriptions": ["a://b", "notes://7"]}}
                assert (await _refused(session, "subscriptions/listen", listen))["scope"] == (
                    "notes"
                )
            # The session goes on: what needs nothing is served.
            result = await session.request(
                "tools/call", {"name": "read", "arguments": {"path": "a"}}
            )
            assert result["content"][0]["text"] == "read a"
        async with open_websocket_client(
            url, headers={"Authorization": "Bearer admin"}, connection_config=client_config(era=era)
        ) as session:
            result = await session.request("tools/call", dangerous)
            assert result["content"][0]["text"] == "deleted /etc/passwd"
            read = await session.request("resources/read", {"uri": "notes://7"})
            assert read["contents"][0]["text"] == "note 7"


@pytest.mark.parametrize("era", ERAS)
async def test_websocket_errors_name_the_metadata_bearer_auth_knows(
    nursery: trio.Nursery, era: Era
) -> None:
    # Over HTTP the 403 challenge names the protected-resource metadata; on WebSocket
    # the JSON-RPC error's data does too, when the server knows it (BearerAuth's URL).
    async def error_data(url: str, method: str, params: dict[str, Any]) -> Any:
        async with open_websocket_client(
            url,
            headers={"Authorization": "Bearer reader"},
            connection_config=client_config(era=era),
        ) as session:
            with pytest.raises(McpError) as info:
                await session.request(method, params)
            assert info.value.error.code == 403
            return info.value.error.data

    auth = BearerAuth(verify_token=verify, resource_metadata_url=METADATA.url)
    handle = await nursery.start(
        partial(files_server().serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    url = handle.url
    call = {"name": "write", "arguments": {"path": "a"}}
    with trio.fail_after(IO_TIMEOUT):
        assert await error_data(url, "tools/call", call) == {
            "error": "insufficient_scope",
            "scope": "files:write",
            "resource_metadata": METADATA.url,
        }
        if era == "modern":  # a listen is refused by the core's hook: the same data
            listen = {"notifications": {"resourceSubscriptions": ["notes://7"]}}
            data = await error_data(url, "subscriptions/listen", listen)
            assert data["resource_metadata"] == METADATA.url
        # A BearerAuth without the URL: nothing to name.
        bare = await _serve_ws(nursery)
        assert "resource_metadata" not in await error_data(bare, "tools/call", call)


async def test_a_failing_policy_refuses_the_request_not_the_session(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    url = await _serve_ws(nursery)
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.ERROR):
        async with open_websocket_client(url, headers={"Authorization": "Bearer admin"}) as session:
            with pytest.raises(McpError) as info:
                await session.request("tools/call", {"name": "read", "arguments": {"path": "boom"}})
            assert info.value.error.code == -32603
            await session.request("tools/call", {"name": "read", "arguments": {"path": "ok"}})
    failures = [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in failures] == [
        "required_scopes failed for 'tools/call' (request 2)"
    ]  # once, not once per layer


def _listen_server(hook: Any) -> Server:
    """A server whose one resource declares no scope; ``hook`` is its
    ``required_scopes``."""
    server = Server("s", required_scopes=hook)

    @server.resource("notes://public")
    async def public() -> str:
        return "public"  # pragma: no cover (only listened to)

    return server


def _admin_to_listen(principal: Principal, method: str, params: Any) -> Any:
    return "admin" if method == "subscriptions/listen" else ()


LISTEN_PUBLIC = {"notifications": {"resourceSubscriptions": ["notes://public"]}}


async def _acknowledged(session: Any) -> None:
    """Send a listen and wait for its acknowledgement (then leave it)."""
    acked = trio.Event()

    async def on_ack(ctx: Any) -> None:
        acked.set()

    session.handlers.set_notification_handler("notifications/subscriptions/acknowledged", on_ack)
    async with trio.open_nursery() as inner:
        inner.start_soon(partial(session.request, "subscriptions/listen", LISTEN_PUBLIC))
        await acked.wait()
        inner.cancel_scope.cancel()


async def test_the_server_hook_adds_scopes_to_a_listen_on_websocket(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # subscriptions/listen is served by the core, not a handler: the server's hook is
    # asked about it all the same (its resource declares nothing here).
    auth = BearerAuth(verify_token=verify)
    handle = await nursery.start(
        partial(_listen_server(_admin_to_listen).serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    url = handle.url
    modern = client_config(era="modern")
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.DEBUG, logger="mcp_trio"):
        async with open_websocket_client(
            url, headers={"Authorization": "Bearer reader"}, connection_config=modern
        ) as session:
            assert (await _refused(session, "subscriptions/listen", LISTEN_PUBLIC)) == {
                "scope": "admin",
                "message": "Insufficient scope: the access token lacks admin",
            }
            await session.request("resources/list")  # (the session goes on)
        async with open_websocket_client(
            url, headers={"Authorization": "Bearer admin"}, connection_config=modern
        ) as session:
            await _acknowledged(session)
    # A refusal is an answer, not a peer's broken message: nothing logged above debug.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_failing_hook_on_a_listen_is_logged_once(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(principal: Principal, method: str, params: Any) -> Any:
        raise RuntimeError("the policy has a bug")

    auth = BearerAuth(verify_token=verify)
    handle = await nursery.start(
        partial(_listen_server(boom).serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    url = handle.url
    with trio.fail_after(IO_TIMEOUT), caplog.at_level(logging.WARNING, logger="mcp_trio"):
        async with open_websocket_client(
            url,
            headers={"Authorization": "Bearer admin"},
            connection_config=client_config(era="modern"),
        ) as session:
            with pytest.raises(McpError) as info:
                await session.request("subscriptions/listen", LISTEN_PUBLIC)
            assert info.value.error.code == -32603
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("ERROR", "required_scopes failed for 'subscriptions/listen' (request 2)")
    ]


# ================================================================== Streamable HTTP

METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp", authorization_servers=["https://auth.example.com"]
)


async def test_http_answers_403_with_the_challenge_before_the_tool_runs(
    nursery: trio.Nursery,
) -> None:
    ran: list[str] = []
    server = files_server()

    @server.tool(scopes="files:write admin")
    async def wipe(path: str) -> str:
        ran.append(path)  # pragma: no cover (refused before it runs)
        return "wiped"  # pragma: no cover

    handle = await nursery.start(
        partial(
            server.serve_http,
            port=0,
            authenticate=BearerAuth(verify_token=verify, resource_metadata_url=METADATA.url),
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    body = dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "wipe",
                "arguments": {"path": "/"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    )
    headers = (
        *POST_HEADERS,
        ("authorization", "Bearer writer"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", "wipe"),
    )
    with trio.fail_after(IO_TIMEOUT):
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
    assert refused.status == 403
    assert refused.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="admin files:write", '
        f'resource_metadata="{METADATA.url}", '
        'error_description="Insufficient scope: the access token lacks admin"'
    )
    answer = loads(refused.body)
    assert answer["id"] == 3 and answer["error"]["code"] == 403
    assert ran == []


def _modern_post(method: str, params: dict[str, Any], token: str, name: str | None = None) -> Any:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = dumps({"jsonrpc": "2.0", "id": 5, "method": method, "params": {**params, "_meta": meta}})
    headers = (
        *POST_HEADERS,
        ("authorization", f"Bearer {token}"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", method),
        *((("mcp-name", name),) if name is not None else ()),
    )
    return headers, body


async def _serve_files(nursery: trio.Nursery, server: Any, **kwargs: Any) -> Any:
    auth = BearerAuth(verify_token=verify, resource_metadata_url=METADATA.url)
    http_config = HttpServerConfig(resource_metadata=METADATA, **kwargs)
    serve = server.serve_http if isinstance(server, Server) else partial(serve_http, server)
    return await nursery.start(partial(serve, port=0, authenticate=auth, http_config=http_config))


async def test_http_config_scopes_add_to_the_declared_ones(nursery: trio.Nursery) -> None:
    def extra(principal: Principal, method: str, params: Any) -> Any:
        return "admin" if (params or {}).get("name") == "read" else ()

    handle = await _serve_files(nursery, files_server(), required_scopes=extra)
    with trio.fail_after(IO_TIMEOUT):
        # The tool's own scope still counts (the config's hook does not replace it).
        headers, body = _modern_post(
            "tools/call", {"name": "write", "arguments": {}}, "reader", "write"
        )
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert (
            refused.status == 403 and 'scope="files:write"' in refused.headers["www-authenticate"]
        )
        # And the config's counts too.
        headers, body = _modern_post(
            "tools/call", {"name": "read", "arguments": {}}, "writer", "read"
        )
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert refused.status == 403 and 'scope="admin"' in refused.headers["www-authenticate"]


async def test_http_listen_needs_the_scopes_of_its_resources(nursery: trio.Nursery) -> None:
    handle = await _serve_files(nursery, files_server())
    listen = {"notifications": {"resourceSubscriptions": ["notes://secret"]}}
    with trio.fail_after(IO_TIMEOUT):
        headers, body = _modern_post("subscriptions/listen", listen, "reader")
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
    assert refused.status == 403 and 'scope="notes"' in refused.headers["www-authenticate"]
    assert loads(refused.body)["id"] == 5


async def test_http_the_server_hook_adds_scopes_to_a_listen(nursery: trio.Nursery) -> None:
    handle = await _serve_files(nursery, _listen_server(_admin_to_listen))
    with trio.fail_after(IO_TIMEOUT):
        headers, body = _modern_post("subscriptions/listen", LISTEN_PUBLIC, "reader")
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
    assert refused.status == 403 and 'scope="admin"' in refused.headers["www-authenticate"]


async def test_the_server_hook_is_asked_only_about_what_handlers_serve(
    nursery: trio.Nursery,
) -> None:
    asked: list[str] = []

    def record(principal: Principal, method: str, params: Any) -> Any:
        asked.append(method)
        return ()

    server = Server("s", required_scopes=record)

    @server.tool()
    async def read() -> str:
        return "read"

    handle = await _serve_files(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        for method, params, name in [
            ("server/discover", {}, None),
            ("nothing/here", {}, None),
            ("tools/call", {"name": "read", "arguments": {}}, "read"),
        ]:
            headers, body = _modern_post(method, params, "reader", name)
            answer = await raw_request(handle.port, "POST", headers=headers, body=body)
            assert answer.status == (404 if method == "nothing/here" else 200), answer
    assert asked == ["tools/call"]


@pytest.mark.parametrize("where", ["handlers", "http_config"])
@pytest.mark.parametrize("bad", ["raises", "no scope token"])
async def test_a_failing_hook_over_http_is_logged_and_answered_under_the_id(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, where: str, bad: str
) -> None:
    def hook(principal: Principal, method: str, params: Any) -> Any:
        if bad == "raises":
            raise RuntimeError("the policy has a bug")
        return ['say "hi"']  # (no challenge can carry it: as good as raising)

    async def tool(ctx: Any) -> dict[str, Any]:  # pragma: no cover (refused first)
        return {"content": []}

    if where == "handlers":
        handle = await _serve_files(nursery, Handlers({"tools/call": tool}, required_scopes=hook))
    else:
        handle = await _serve_files(nursery, Handlers({"tools/call": tool}), required_scopes=hook)
    headers, body = _modern_post("tools/call", {"name": "x"}, "reader", "x")
    with caplog.at_level(logging.ERROR), trio.fail_after(IO_TIMEOUT):
        answer = await raw_request(handle.port, "POST", headers=headers, body=body)
    assert answer.status == 500
    assert loads(answer.body)["id"] == 5
    failures = [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in failures] == ["required_scopes failed for 'tools/call'"]


async def test_both_hooks_over_http_are_checked_and_logged(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # A Server's hook and the config's (their union): the config's bad value is
    # logged and answered 500; what it does not touch is served.
    def bad(principal: Principal, method: str, params: Any) -> Any:
        return ["a\\b"] if (params or {}).get("name") == "read" else ()

    handle = await _serve_files(nursery, files_server(), required_scopes=bad)
    with caplog.at_level(logging.ERROR), trio.fail_after(IO_TIMEOUT):
        headers, body = _modern_post(
            "tools/call", {"name": "read", "arguments": {}}, "admin", "read"
        )
        answer = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert answer.status == 500
        headers, body = _modern_post(
            "tools/call", {"name": "write", "arguments": {}}, "admin", "write"
        )
        served = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert served.status == 200
    failures = [r for r in caplog.records if r.exc_info]
    assert [r.getMessage() for r in failures] == ["required_scopes failed for 'tools/call'"]


# ------------------------------------------------------------------ step-up, end to end


async def _protected(nursery: trio.Nursery) -> tuple[FakeAS, str]:
    asrv = FakeAS()
    listeners = await nursery.start(partial(trio.serve_tcp, asrv.serve, 0, host="127.0.0.1"))
    asrv.issuer = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    with socket.socket() as probe:  # the metadata names the server's URL: pick its port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    prm = ProtectedResourceMetadata(
        resource=url, authorization_servers=[asrv.issuer], scopes_supported=["files:read"]
    )

    async def verify_issued(token: str) -> Principal | None:
        await trio.lowlevel.checkpoint()
        got = asrv.tokens.get(token)
        if got is None or got[1] != url:
            return None
        return Principal(subject="alice", scopes=got[0])

    auth = BearerAuth(verify_token=verify_issued, resource_metadata_url=prm.url)
    await nursery.start(
        partial(
            files_server().serve_http,
            port=port,
            http_config=HttpServerConfig(resource_metadata=prm),
            authenticate=auth,
        )
    )
    return asrv, url


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_steps_up_on_the_403_and_the_call_succeeds(
    nursery: trio.Nursery, era: Era
) -> None:
    asrv, url = await _protected(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(url, era=era, auth=oauth()) as client:
            assert (await client.call_tool("read", {"path": "a"})).text == "read a"
            assert [a.get("scope") for a in asrv.authorizations] == ["files:read"]
            # files:write is missing: 403, a step-up asking for both, the call again.
            assert (await client.call_tool("write", {"path": "b"})).text == "wrote b"
            assert [a.get("scope") for a in asrv.authorizations] == [
                "files:read",
                "files:read files:write",
            ]
            # The wider token serves what the first one did, with no new authorization.
            assert (await client.call_tool("read", {"path": "c"})).text == "read c"
            assert (await client.call_tool("delete", {"path": "d"})).text == "deleted d"
    assert len(asrv.authorizations) == 2


# ================================================================== streams end with their token


async def _session_with(port: int, token: str) -> tuple[tuple[str, str], ...]:
    """A legacy session opened with ``token``; the headers of its requests."""
    auth = ("authorization", f"Bearer {token}")
    response = await raw_request(
        port, "POST", headers=(*POST_HEADERS, auth), body=initialize_body()
    )
    assert response.status == 200, response
    session = (auth, ("mcp-session-id", response.headers["mcp-session-id"]))
    headers = (*POST_HEADERS, *session, ("mcp-protocol-version", LEGACY))
    note = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (await raw_request(port, "POST", headers=headers, body=note)).status == 202
    return (("accept", "text/event-stream"), *session, ("mcp-protocol-version", LEGACY))


async def test_a_get_stream_ends_resumably_when_its_token_expires(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def verify_expiring(token: str) -> Principal | None:
        await trio.lowlevel.checkpoint()
        life = {"short": 60.0, "long": None}.get(token, -1.0)
        if life is not None and life < 0:
            return None
        expires = None if life is None else time.time() + life
        return Principal(subject="alice", scopes="files:read", expires_at=expires)

    server = files_server()
    handle = await nursery.start(
        partial(
            server.serve_http,
            port=0,
            authenticate=BearerAuth(verify_token=verify_expiring),
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    with trio.fail_after(IO_TIMEOUT + 300):
        # A token that lasts: the stream stays open (keep-alive comments only).
        get = await _session_with(handle.port, "long")
        steady = await RawConnection.open(handle.port)
        await steady.send("GET", headers=get)
        assert (await steady.head()).status_code == 200
        with trio.move_on_after(150) as waited:
            await steady.body()
        assert waited.cancelled_caught
        await steady.aclose()
        # A token of 60 s: the stream ends then, with a retry field to resume by.
        get = await _session_with(handle.port, "short")
        conn = await RawConnection.open(handle.port)
        started = trio.current_time()
        await conn.send("GET", headers=get)
        assert (await conn.head()).status_code == 200
        body = await conn.body()
        assert 59 < trio.current_time() - started <= 60  # (wall time moved a little)
        assert body.rstrip().endswith(b"retry: 1000")
        await conn.aclose()
        assert len(handle.http.sessions()) == 2  # the session goes on
        # What is sent while the client is away is replayed when it comes back.
        last_id = [line for line in body.split(b"\n") if line.startswith(b"id:")][-1]
        server.add_tool(lambda: "x", name="added")  # (tools/list_changed to each session)
        again = await RawConnection.open(handle.port)
        await again.send("GET", headers=(*get, ("last-event-id", last_id[3:].strip().decode())))
        assert (await again.head()).status_code == 200
        replayed = await again.body()
        assert b"notifications/tools/list_changed" in replayed
        await again.aclose()


async def test_expiries_of_streams_that_ended_are_not_kept(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def verify_hour(token: str) -> Principal | None:
        await trio.lowlevel.checkpoint()
        return Principal(subject="alice", expires_at=time.time() + 3600)

    handle = await nursery.start(
        partial(
            files_server().serve_http, port=0, authenticate=BearerAuth(verify_token=verify_hour)
        )
    )
    endpoint = handle._endpoint
    with trio.fail_after(IO_TIMEOUT):
        # One stream stays open, its expiry first in the heap: the others' cannot be
        # dropped from its top as they end, only by the rebuild.
        steady = await RawConnection.open(handle.port)
        await steady.send("GET", headers=await _session_with(handle.port, "any"))
        assert (await steady.head()).status_code == 200
        get = await _session_with(handle.port, "any")
        for _ in range(50):  # streams the client closes, long before their token expires
            conn = await RawConnection.open(handle.port)
            await conn.send("GET", headers=get)
            assert (await conn.head()).status_code == 200
            await conn.aclose()
            await trio.testing.wait_all_tasks_blocked()
            assert len(endpoint._releases) <= 2 * len(endpoint._release_of) + 17
        assert len(endpoint._release_of) == 1
        await steady.aclose()


async def test_without_a_stream_expiry_the_timer_asks_only_the_core(
    nursery: trio.Nursery,
) -> None:
    # Tokens without an expiry (the usual case): no stream has a release time, and
    # re-arming the timer after each request asks the core alone.
    handle = await _serve_files(nursery, files_server())
    endpoint: Any = handle._endpoint
    asked: list[str] = []
    merged = endpoint._next_deadline

    def counting() -> Any:
        asked.append("merged")
        return merged()

    endpoint._next_deadline = counting
    with trio.fail_after(IO_TIMEOUT):
        get = await _session_with(handle.port, "reader")
        headers = (*get[1:], *POST_HEADERS)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body = dumps({**call, "params": {"name": "read", "arguments": {"path": "a"}}})
        answer = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert answer.status == 200 and b"read a" in answer.body
    assert asked == [] and not endpoint._releases


def test_an_expiry_is_a_finite_number() -> None:
    assert Principal(subject="a", expires_at=10).expires_at == 10.0
    assert isinstance(Principal(subject="a", expires_at=10).expires_at, float)
    assert Principal(subject="a").expires_at is None
    for bad in (datetime.datetime.now(datetime.UTC), "10", True):
        with pytest.raises(TypeError, match="expires_at"):
            Principal(subject="a", expires_at=bad)
    for bad_number in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            Principal(subject="a", expires_at=bad_number)


def test_a_server_without_declared_scopes_checks_nothing_per_request() -> None:
    server = files_server()
    registry = server._registry
    assert registry.scoped == 5  # write, delete, the note, its template, review
    server.remove_resource("notes://{id}")
    server.remove_tool("write")
    assert registry.scoped == 3
    plain = Server("plain")
    plain.add_tool(lambda: "", name="scoped", scopes="s")  # (a tool: no template is)
    for i in range(20):
        plain.add_resource(lambda id: id, f"t{i}://{{id}}")
    scanned: list[str] = []
    find = plain._registry._serving_template

    def counting(uri: str) -> Any:
        scanned.append(uri)
        return find(uri)

    plain._registry._serving_template = counting  # type: ignore[method-assign]
    assert plain._required_scopes(TOKENS["reader"], "resources/read", {"uri": "t3://x"}) == set()
    assert scanned == []  # no template declares a scope: none is matched for the check
    plain.add_resource(lambda id: id, "s://{id}", scopes="s")
    assert plain._required_scopes(TOKENS["reader"], "resources/read", {"uri": "s://x"}) == {"s"}
    assert scanned == ["s://x"]


def test_the_scopes_of_a_template_read_are_those_of_the_template_that_serves_it() -> None:
    """A URI whose variables do not convert for the first template that matches it is
    served by the next (see ``Registry.resolve_template``): that one's scopes count, so
    a typed template with none does not open a later one that declares some."""
    server = Server("notes")
    server.add_resource(lambda id: f"{id}", "notes://{id}")  # (untyped: any text)
    server.add_resource(lambda n: f"{n}", "pages://{n}")

    def by_id(id: int) -> str:
        return str(id)

    def by_name(name: str) -> str:
        return name

    server.add_resource(by_id, "items://{id}")
    server.add_resource(by_name, "items://{name}", scopes="admin")
    server.add_resource(by_id, "rows://{id}", scopes="rows")
    server.add_resource(by_name, "rows://{name}")
    reader = TOKENS["reader"]

    def needed(uri: str) -> frozenset[str]:
        return server._required_scopes(reader, "resources/read", {"uri": uri})

    assert needed("items://7") == set()
    assert needed("items://groceries") == {"admin"}
    assert needed("rows://7") == {"rows"}
    assert needed("rows://groceries") == set()
    assert needed("notes://groceries") == set()

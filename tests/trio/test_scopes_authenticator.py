"""An ``insufficient_scope`` refusal names the scopes the authenticator requires of every
request (``BearerAuth(required_scopes=...)``) beside those of the operation.

2025-11-25 basic/authorization.mdx, Runtime Insufficient Scope Errors: the challenge's
``scope`` gives "the minimum scopes needed for the operation", and servers SHOULD include
"the scopes needed to satisfy the current request". A token holding the server-wide
``files:read`` that calls a tool needing ``files:write`` was challenged for
``files:write`` alone; a client that asks for exactly the challenged scopes (the
TypeScript SDK's) got a token without ``files:read``, which the authenticator then
refused for ``files:read``, without end. ``HttpServerConfig(required_scopes=...)`` and
``Server(required_scopes=...)`` were already named; the authenticator's were not.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import attrs
import pytest
import trio

from mcp_sansio.http import HttpRequest
from mcp_trio import (
    BearerAuth,
    Context,
    HttpServerConfig,
    McpError,
    Principal,
    ProtectedResourceMetadata,
    Server,
    open_client,
)
from mcp_trio._http_auth import declared_scopes
from mcp_trio._websocket import open_websocket_client

from .helpers import client_config
from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    POST_HEADERS,
    initialize_body,
    raw_request,
    rpc,
)

Era = Literal["legacy", "modern"]
ERAS: list[Era] = ["legacy", "modern"]
MODERN = "2026-07-28"
METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp", authorization_servers=["https://auth.example.com"]
)
TOKENS = {
    "reader": Principal(subject="alice", scopes="files:read"),
    "writer": Principal(subject="alice", scopes="files:write"),
    "both": Principal(subject="alice", scopes="files:read files:write"),
}


async def verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    return TOKENS.get(token)


def files_server() -> Server:
    server = Server("files")

    @server.tool()
    async def read(path: str) -> str:
        return f"read {path}"

    @server.tool(scopes="files:write")
    async def write(path: str) -> str:
        return f"wrote {path}"

    @server.resource("notes://{id}", scopes="files:write")
    async def note(id: str) -> str:
        return f"note {id}"  # pragma: no cover (only listened to)

    return server


@attrs.frozen
class Declaring:
    """An authenticator of the user's that declares the scopes it requires as
    ``BearerAuth`` does (a ``required_scopes`` collection)."""

    required_scopes: frozenset[str]

    async def __call__(self, head: HttpRequest) -> Any:
        token = (head.header("authorization") or "").removeprefix("Bearer ")
        principal = await verify(token)
        assert principal is not None and principal.has_scopes(self.required_scopes)
        return principal


def test_what_an_authenticator_declares() -> None:
    assert declared_scopes(BearerAuth(verify_token=verify, required_scopes="b a")) == {"a", "b"}
    assert declared_scopes(Declaring(frozenset({"x"}))) == {"x"}
    assert declared_scopes(verify) == frozenset()  # (a plain function declares nothing)

    class Hooked:
        def required_scopes(self) -> str:  # pragma: no cover (not called)
            return "x"

    assert declared_scopes(Hooked()) == frozenset()  # (not a collection of scopes)
    with pytest.raises(ValueError, match="scope token"):
        declared_scopes(Declaring(frozenset({'say "hi"'})))


def _modern_call(name: str, token: str) -> tuple[tuple[tuple[str, str], ...], bytes]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": {"path": "p"}, "_meta": meta}
    headers = (
        *POST_HEADERS,
        ("authorization", f"Bearer {token}"),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
    )
    return headers, rpc(5, "tools/call", params)


async def _call(port: int, era: Era, name: str, token: str) -> Any:
    if era == "modern":
        headers, body = _modern_call(name, token)
        return await raw_request(port, "POST", headers=headers, body=body)
    auth = ("authorization", f"Bearer {token}")
    created = await raw_request(port, "POST", headers=(*POST_HEADERS, auth), body=initialize_body())
    assert created.status == 200, created
    session = (
        ("mcp-session-id", created.headers["mcp-session-id"]),
        ("mcp-protocol-version", LEGACY),
    )
    call = rpc(5, "tools/call", {"name": name, "arguments": {"path": "p"}})
    return await raw_request(port, "POST", headers=(*POST_HEADERS, auth, *session), body=call)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("declared", ["bearer", "duck"])
async def test_http_challenge_names_the_authenticators_scopes_too(
    nursery: trio.Nursery, era: Era, declared: str
) -> None:
    authenticate: Any = (
        BearerAuth(
            verify_token=verify, resource_metadata_url=METADATA.url, required_scopes="files:read"
        )
        if declared == "bearer"
        else Declaring(frozenset({"files:read"}))
    )
    handle = await nursery.start(
        partial(
            files_server().serve_http,
            port=0,
            authenticate=authenticate,
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    with trio.fail_after(IO_TIMEOUT):
        refused = await _call(handle.port, era, "write", "reader")
        assert refused.status == 403
        challenge = refused.headers["www-authenticate"]
        # Every scope the request needs, so that a token granted on it is enough.
        assert 'scope="files:read files:write"' in challenge
        assert 'error_description="Insufficient scope: the access token lacks files:write"' in (
            challenge
        )
        # With both, it is served; a request that needs nothing more is unchanged.
        served = await _call(handle.port, era, "write", "both")
        assert served.status == 200 and b"wrote p" in served.body
        served = await _call(handle.port, era, "read", "reader")
        assert served.status == 200 and b"read p" in served.body


async def _ws_refusal(url: str, era: Era, method: str, params: dict[str, Any]) -> Any:
    async with open_websocket_client(
        url, headers={"Authorization": "Bearer reader"}, connection_config=client_config(era=era)
    ) as session:
        with pytest.raises(McpError) as info:
            await session.request(method, params)
        assert info.value.error.code == 403
        served = await session.request("tools/call", {"name": "read", "arguments": {"path": "p"}})
        assert served["content"][0]["text"] == "read p"  # (nothing more needed: served)
        return info.value.error.data


@pytest.mark.parametrize("era", ERAS)
async def test_websocket_error_names_the_authenticators_scopes_too(
    nursery: trio.Nursery, era: Era
) -> None:
    auth = BearerAuth(
        verify_token=verify, resource_metadata_url=METADATA.url, required_scopes="files:read"
    )
    handle = await nursery.start(
        partial(files_server().serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    call = {"name": "write", "arguments": {"path": "p"}}
    with trio.fail_after(IO_TIMEOUT):
        assert await _ws_refusal(handle.url, era, "tools/call", call) == {
            "error": "insufficient_scope",
            "scope": "files:read files:write",
            "resource_metadata": METADATA.url,
        }
        if era == "modern":  # a listen is refused by the core's hook: the same scopes
            listen = {"notifications": {"resourceSubscriptions": ["notes://7"]}}
            data = await _ws_refusal(handle.url, era, "subscriptions/listen", listen)
            assert data["scope"] == "files:read files:write"


@pytest.mark.parametrize("transport", ["http", "websocket"])
async def test_a_hook_that_names_only_offline_access_needs_nothing_on_either_transport(
    nursery: trio.Nursery, transport: str
) -> None:
    # One rule (scopes_needed) on both: WebSocket's session added the authenticator's
    # scopes once the hook had answered anything, even what was then dropped
    # (offline_access), where HTTP added them only to scopes actually needed.
    server = Server("edge", required_scopes=lambda principal, method, params: "offline_access")

    @server.tool()
    async def needed(ctx: Context) -> list[str] | None:
        return None if ctx.needed_scopes is None else sorted(ctx.needed_scopes)

    auth = BearerAuth(verify_token=verify, required_scopes="files:read")
    serve = server.serve_http if transport == "http" else server.serve_websocket
    handle = await nursery.start(partial(serve, port=0, authenticate=auth))
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(
            handle.url, headers={"Authorization": "Bearer reader"}, era="legacy"
        ) as client:
            result = await client.call_tool("needed")
    assert result.structured_content == {"result": []}

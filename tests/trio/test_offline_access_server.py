"""``offline_access`` is never advertised by a server (``2026-07-28/basic/authorization``,
"Refresh Tokens": servers "SHOULD NOT include ``offline_access`` in ``WWW-Authenticate``
scope or Protected Resource Metadata ``scopes_supported``"): left out of challenges (with
one warning) whether ``BearerAuth.required_scopes`` or a scope hook names it, kept in
the metadata a dual-era server serves (with one warning: 2025-06-18/11-25 have no such
rule), and ignored by the client in a server's metadata and challenges."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

import attrs
import pytest
import trio

from mcp_sansio import parse_protected_resource_metadata
from mcp_sansio._http_auth import scope_set
from mcp_sansio._json import dumps, loads
from mcp_sansio._oauth import AuthorizationServerMetadata, parse_bearer_challenge, select_scope
from mcp_sansio.http import insufficient_scope
from mcp_trio import (
    BearerAuth,
    Context,
    HttpServerConfig,
    McpError,
    Principal,
    ProtectedResourceMetadata,
    Server,
)
from mcp_trio._http_auth import _WARNED, _warn_offline_access, hook_scopes
from mcp_trio._websocket import open_websocket_client

from .helpers import client_config
from .test_http_support import raw_request
from .test_scopes import METADATA, _modern_post

IO_TIMEOUT = 10
TOKENS = {
    "reader": Principal(subject="alice", scopes="files:read"),
    "writer": Principal(subject="alice", scopes="files:read files:write"),
}


async def verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    return TOKENS.get(token)


@pytest.fixture(autouse=True)
def _fresh_warning() -> Iterator[None]:
    _WARNED.clear()  # (logged once per process)
    yield
    _WARNED.clear()


# ------------------------------------------------------------------ configuration


@pytest.mark.parametrize("scopes", [["mcp", "offline_access"], "mcp offline_access"])
def test_resource_metadata_keeps_offline_access(scopes: Any) -> None:
    # A dual-era server lists it on purpose: 2025-06-18/11-25 clients request
    # scopes_supported as it is, and get a refresh token only with it there.
    metadata = ProtectedResourceMetadata(
        resource="https://rs.example/mcp",
        authorization_servers=["https://as.example"],
        scopes_supported=scopes,
    )
    assert metadata.document()["scopes_supported"] == ["mcp", "offline_access"]


async def test_serving_offline_access_in_metadata_warns_once(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    metadata = ProtectedResourceMetadata(
        resource="https://rs.example/mcp",
        authorization_servers=["https://as.example"],
        scopes_supported="mcp offline_access",
    )
    auth = BearerAuth(verify_token=verify, resource_metadata_url=metadata.url)
    config = HttpServerConfig(resource_metadata=metadata)
    with trio.fail_after(IO_TIMEOUT):
        for _ in range(2):
            handle = await nursery.start(
                partial(offline_server().serve_http, port=0, authenticate=auth, http_config=config)
            )
            served = await raw_request(handle.port, "GET", "/.well-known/oauth-protected-resource")
            assert loads(served.body)["scopes_supported"] == ["mcp", "offline_access"]
    # (Two servers: each warning once, the tool's scopes= one at the first registration.)
    registered, warning = warnings_of(caplog)
    assert "registered with scopes=" in registered
    assert "scopes_supported" in warning and "served as given" in warning
    assert "logged once" in warning


@pytest.mark.parametrize(
    "scopes", [{"mcp", "offline_access"}, "offline_access", "mcp offline_access"]
)
@pytest.mark.parametrize("dpop", ["off", "allowed"])
def test_bearer_auth_leaves_offline_access_out_of_its_challenges(
    scopes: Any, dpop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    auth = BearerAuth(verify_token=verify, required_scopes=scopes, dpop=dpop)
    assert auth.required_scopes == scope_set(scopes) - {"offline_access"}
    BearerAuth(verify_token=verify, required_scopes=scopes, dpop=dpop)
    [warning] = warnings_of(caplog)
    assert "required_scopes" in warning and "logged once" in warning


async def test_bearer_auth_challenge_without_offline_access(nursery: trio.Nursery) -> None:
    auth = BearerAuth(
        verify_token=verify,
        resource_metadata_url=METADATA.url,
        required_scopes="files:read offline_access",
    )
    handle = await nursery.start(
        partial(
            offline_server().serve_http,
            port=0,
            authenticate=auth,
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    with trio.fail_after(IO_TIMEOUT):
        headers, body = _modern_post("tools/list", {}, "", None)
        headers = tuple(h for h in headers if h[0] != "authorization")
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert refused.status == 401
        www = refused.headers["www-authenticate"]
        assert 'scope="files:read"' in www and "offline_access" not in www
        # A token without offline_access is served: nobody required it.
        headers, body = _modern_post("tools/list", {}, "reader")
        served = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert served.status == 200, served.body


def test_the_client_leaves_a_servers_offline_access_out() -> None:
    # A server that lists it all the same is still used: the client asks for
    # offline_access only when its authorization server lists it.
    document = {
        "resource": "https://rs.example/mcp",
        "authorization_servers": ["https://as.example"],
        "scopes_supported": ["mcp", "offline_access"],
    }
    found = parse_protected_resource_metadata(dumps(document), "https://rs.example/mcp")
    assert found.scopes_supported == ("mcp",)


def test_the_client_leaves_a_challenges_offline_access_out() -> None:
    # As from the metadata: asked for only when the authorization server lists it.
    metadata = parse_protected_resource_metadata(
        dumps(
            {
                "resource": "https://rs.example/mcp",
                "authorization_servers": ["https://as.example"],
                "scopes_supported": ["mcp"],
            }
        ),
        "https://rs.example/mcp",
    )
    quiet = AuthorizationServerMetadata.fallback("https://as.example")
    listing = attrs.evolve(quiet, scopes_supported=("mcp", "files:write", "offline_access"))
    challenge = parse_bearer_challenge(['Bearer scope="files:write offline_access"'])
    assert select_scope(challenge=challenge, resource_metadata=metadata, metadata=quiet) == (
        "files:write"
    )
    assert select_scope(challenge=challenge, resource_metadata=metadata, metadata=listing) == (
        "files:write offline_access"
    )
    # A challenge naming only offline_access names no scope: the metadata's are asked for.
    alone = parse_bearer_challenge(['Bearer scope="offline_access"'])
    assert select_scope(challenge=alone, resource_metadata=metadata, metadata=quiet) == "mcp"


def test_a_challenge_never_names_offline_access() -> None:
    reader = TOKENS["reader"]
    error = insufficient_scope(reader, "files:write offline_access")
    assert error is not None and error.data["scope"] == "files:write"
    # Lacking only offline_access is lacking nothing.
    assert insufficient_scope(reader, ["files:read", "offline_access"]) is None


# ------------------------------------------------------------------ a hook at run time


def offline_server() -> Server:
    """``write`` declares ``files:write offline_access``; the server's hook names
    ``offline_access`` for every ``tools/call`` too."""

    def hook(principal: Principal, method: str, params: Any) -> Any:
        return "offline_access" if method == "tools/call" else ()

    server = Server("files", required_scopes=hook)

    @server.tool(scopes="files:write offline_access")
    async def write(path: str) -> str:
        return f"wrote {path}"

    @server.tool()
    async def read(path: str) -> str:
        return f"read {path}"

    @server.tool(scopes="files:read")
    async def needed(ctx: Context) -> str:
        # What the call was checked to need, handed on (to a task, say): no
        # offline_access, which nobody required.
        return " ".join(sorted(ctx.needed_scopes or ()))

    return server


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "offline_access" in r.getMessage()]


async def test_a_hook_naming_offline_access_over_http(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    auth = BearerAuth(verify_token=verify, resource_metadata_url=METADATA.url)
    handle = await nursery.start(
        partial(
            offline_server().serve_http,
            port=0,
            authenticate=auth,
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    call = {"name": "write", "arguments": {"path": "a"}}
    with trio.fail_after(IO_TIMEOUT):
        headers, body = _modern_post("tools/call", call, "reader", "write")
        refused = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert refused.status == 403
        www = refused.headers["www-authenticate"]
        assert 'scope="files:write"' in www and "offline_access" not in www
        assert loads(refused.body)["error"]["data"]["scope"] == "files:write"
        # The writer lacks offline_access only: served.
        headers, body = _modern_post("tools/call", call, "writer", "write")
        served = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert served.status == 200, served.body
        assert loads(served.body)["result"]["content"][0]["text"] == "wrote a"
        headers, body = _modern_post("tools/call", {"name": "needed"}, "reader", "needed")
        served = await raw_request(handle.port, "POST", headers=headers, body=body)
        assert loads(served.body)["result"]["content"][0]["text"] == "files:read"
    # One for the tool's scopes= (at registration), one for the hook's result.
    registered, hook = warnings_of(caplog)
    assert "registered with scopes=" in registered and "hook" not in registered
    assert "required_scopes hook" in hook
    assert all("SHOULD NOT" in w and "logged once" in w for w in (registered, hook))


async def test_a_hook_naming_offline_access_on_websocket(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    auth = BearerAuth(verify_token=verify)
    handle = await nursery.start(
        partial(offline_server().serve_websocket, "127.0.0.1", 0, authenticate=auth)
    )
    call = {"name": "write", "arguments": {"path": "a"}}
    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            str(handle.url),
            headers={"Authorization": "Bearer reader"},
            connection_config=client_config(era="modern"),
        ) as session:
            with pytest.raises(McpError) as info:
                await session.request("tools/call", call)
            assert info.value.error.data["scope"] == "files:write"
            with pytest.raises(McpError):
                await session.request("tools/call", call)
        async with open_websocket_client(
            str(handle.url),
            headers={"Authorization": "Bearer writer"},
            connection_config=client_config(era="modern"),
        ) as session:
            result = await session.request("tools/call", call)
            assert result["content"][0]["text"] == "wrote a"
            result = await session.request("tools/call", {"name": "needed", "arguments": {}})
            assert result["content"][0]["text"] == "files:read"
    assert len(warnings_of(caplog)) == 2  # (the tool's scopes=, the hook's)


def test_a_tools_offline_access_is_dropped_at_registration_with_its_label(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    server = Server("files")

    @server.tool(scopes=["files:read", "offline_access"])
    async def read() -> str:
        return "ok"

    @server.prompt(scopes="offline_access files:read")
    async def ask() -> str:
        return "ok"

    # Warned once, when registered, naming where it came from (not a hook).
    [warning] = warnings_of(caplog)
    assert "registered with scopes=" in warning and "hook" not in warning
    hook = server.handlers().required_scopes
    assert hook is not None
    needed = hook(Principal(subject="u", scopes="files:read"), "tools/call", {"name": "read"})
    assert set(needed) == {"files:read"}
    assert len(warnings_of(caplog)) == 1  # (nothing more at the request)


def test_the_offline_access_warning_is_logged_once_however_called(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    _warn_offline_access("hook")
    _warn_offline_access(source="hook")
    assert hook_scopes("a offline_access") == {"a"}
    assert len(warnings_of(caplog)) == 1
    _warn_offline_access("scopes_supported")  # (another source: its own warning)
    assert len(warnings_of(caplog)) == 2

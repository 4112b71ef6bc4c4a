"""The public API does not change by accident, and the core stays free of I/O."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mcp_sansio
import mcp_trio

ROOT = Path(__file__).resolve().parents[1]

EXPECTED_SANSIO = {
    "ALL_VERSIONS",
    "LATEST_LEGACY_VERSION",
    "LATEST_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "Connection",
    "ConnectionClosed",
    "ConnectionConfig",
    "ConnectionConfigOptions",
    "Era",
    "ErrorCode",
    "ErrorData",
    "ErrorReceived",
    "Event",
    "HandshakeCompleted",
    "InputRequired",
    "InvalidMessageReceived",
    "LifecycleState",
    "LineSplitter",
    "LocalProtocolError",
    "MessageTooLarge",
    "NotificationReceived",
    "ProgressReceived",
    "ProtocolError",
    "RemoteProtocolError",
    "RequestCancelled",
    "RequestId",
    "RequestReceived",
    "RequestTimedOut",
    "ResponseIgnored",
    "ResultReceived",
    "Role",
    "SSEDecoder",
    "SSEEvent",
    "SubscriptionNotificationReceived",
    "encode_line",
    "encode_sse_comment",
    "encode_sse_event",
    "structure",
    "structure_params",
    "undeclared_input_request",
    "unstructure",
    "AuthorizationServerMetadata",
    "BearerChallenge",
    "ClientCredentials",
    "OAuthError",
    "OAuthToken",
    "PkcePair",
    "ProtectedResourceMetadata",
    "TokenEndpointAuthMethod",
    "authorization_server_metadata_urls",
    "authorization_url",
    "check_endpoint",
    "is_internal",
    "is_loopback",
    "legacy_authorization_server",
    "new_pkce",
    "parse_authorization_response",
    "parse_bearer_challenge",
    "parse_protected_resource_metadata",
    "parse_registration",
    "parse_token_response",
    "protected_resource_metadata_urls",
    "redirect_request",
    "redirect_state",
    "registration_body",
    "resource_matches",
    "response_challenge",
    "select_authorization_server",
    "select_scope",
    "token_request",
    "AssertionRefusal",
    "check_grant_issuer",
    "grant_scope",
    "grant_token",
    "jwt_bearer_request",
    "token_exchange_request",
    "parse_token_exchange_response",
}


def test_sansio_all_is_what_we_decided() -> None:
    assert set(mcp_sansio.__all__) == EXPECTED_SANSIO
    for name in mcp_sansio.__all__:
        assert hasattr(mcp_sansio, name), name


def test_the_lazy_exports_name_their_modules_whole() -> None:
    # Each lazily loaded module's public names, and nothing else, come from it.
    from mcp_sansio import _oauth, _oauth_grants, _oauth_redirect, _serde  # noqa: PLC0415

    lazy: dict[str, str] = mcp_sansio._LAZY
    by_module = {m: {n for n, where in lazy.items() if where == m} for m in set(lazy.values())}
    assert by_module["._oauth"] == set(_oauth.__all__)
    assert by_module["._oauth_redirect"] == set(_oauth_redirect.__all__)
    assert by_module["._oauth_grants"] == set(_oauth_grants.__all__)
    assert by_module["._http_auth"] == {"ProtectedResourceMetadata"}
    assert by_module["._serde"] == {"structure", "structure_params", "unstructure"}
    assert hasattr(_serde, "structure_params")


def modules_loaded(code: str, *watched: str) -> list[str]:
    """Which of ``watched`` a fresh interpreter has imported once it has run ``code``."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    return out.split(",") if out else []


def test_core_imports_no_io() -> None:
    code = "import mcp_sansio, mcp_sansio.types, mcp_sansio._oauth"
    bad = modules_loaded(code, "trio", "asyncio", "socket", "h11", "selectors", "ssl")
    assert bad == [], f"mcp_sansio imported {bad}"


def test_mcp_trio_loads_what_it_uses_on_first_use() -> None:
    code = "import mcp_trio\nfrom mcp_trio import Handlers, serve_stdio"
    heavy = ("mcp_sansio.types", "cattrs", "mcp_trio._http_server", "mcp_trio._client", "h11")
    loaded = modules_loaded(code, *heavy)
    assert loaded == [], f"a stdio server process loaded {loaded}"
    assert set(mcp_trio.__all__) <= set(dir(mcp_trio))
    assert mcp_trio.Server.__name__ == "Server"


def test_a_high_level_stdio_server_starts_without_the_typed_models_or_other_transports() -> None:
    # mcp_sansio.types costs ~100 ms of start-up; typed values are recognised without it.
    code = """
import mcp_trio
server = mcp_trio.Server("s", "1")

@server.tool()
async def forecast(city: str, days: int = 1) -> str:
    return f"{city} {days}"

server.handlers()
"""
    heavy = ("mcp_sansio.types", "mcp_trio._http_server", "mcp_sansio.http")
    transports = ("mcp_trio._websocket", "trio_websocket", "h11")
    loaded = modules_loaded(code, *heavy, *transports)
    assert loaded == [], f"a high-level stdio server loaded {loaded}"


def test_the_cli_loads_the_http_rules_for_http_only() -> None:
    # `mcp-trio run app.py` (stdio) imported the whole sans-IO HTTP stack to read two
    # default tuples of HttpServerConfig.
    http = ("mcp_sansio.http", "mcp_sansio._http_server", "mcp_sansio._http_client")
    loaded = modules_loaded("import mcp_trio._cli_run", *http)
    assert loaded == [], f"the CLI loaded {loaded}"


def test_an_http_client_loads_the_assertion_grants_only_when_one_is_configured() -> None:
    code = """
import mcp_trio, mcp_trio._http_client
client = mcp_trio.ClientCredentials(client_id="c", client_secret="s", issuer="https://as.example")
mcp_trio.OAuth(client=client).bind("https://mcp.example/mcp")
"""
    loaded = modules_loaded(code, "mcp_trio._oauth_grants", "mcp_sansio._oauth_grants")
    assert loaded == [], f"an HTTP client loaded {loaded}"

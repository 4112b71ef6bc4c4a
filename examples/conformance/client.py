"""The client side of the official MCP conformance suite, written with mcp_trio's API.

The suite runs ``python examples/conformance/client.py <mock-server-url>`` with
``MCP_CONFORMANCE_SCENARIO`` naming the scenario and ``MCP_CONFORMANCE_PROTOCOL_VERSION``
the revision ("2026-07-28" selects the modern, stateless lifecycle). One program serves
every scenario listed in ``shared/conformance/README.md``; the ``auth/*`` ones go through
:class:`mcp_trio.OAuth`, whose authorization step fetches the mock's authorization URL
without following its redirect (no browser: the mock approves at once).
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from mcp_sansio import (
    parse_protected_resource_metadata,
    protected_resource_metadata_urls,
    unstructure,
)
from mcp_sansio import types as t
from mcp_trio import (
    Client,
    ClientCredentials,
    EnterpriseAuthorization,
    OAuth,
    OAuthError,
    SkillFile,
    SkillVerificationError,
    WorkloadIdentity,
    fetch_authorization_redirect,
    open_client,
)

Scenario = Callable[[Client, dict[str, Any]], Awaitable[None]]


async def on_elicitation(params: Any) -> dict[str, Any]:
    """Accept, filling every field from its schema default (SEP-1034)."""
    schema = getattr(params, "requested_schema", None)
    properties = getattr(schema, "properties", None) or {}
    content: dict[str, Any] = {}
    for name, prop in properties.items():
        spec = prop if isinstance(prop, dict) else t_unstructure(prop)
        if "default" in spec:
            content[name] = spec["default"]
        elif spec.get("type") == "string":
            content[name] = "conformance"
        elif spec.get("type") == "boolean":
            content[name] = True
        elif spec.get("type") in ("integer", "number"):
            content[name] = 1
    return {"action": "accept", "content": content}


def t_unstructure(value: Any) -> dict[str, Any]:
    out = unstructure(value)
    return out if isinstance(out, dict) else {}


async def on_sampling(params: t.CreateMessageRequestParams) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "This is a test response from the client"},
        "model": "test-model",
        "stopReason": "endTurn",
    }


async def list_and_call_first(client: Client, _ctx: dict[str, Any]) -> None:
    if client.server_capabilities.tools is None:
        return  # (not declared: the library refuses tools/list, as for initialize below)
    tools = await client.list_tools()
    if tools:
        await client.call_tool(tools[0].name, {})


async def tools_call(client: Client, _ctx: dict[str, Any]) -> None:
    await client.list_tools()
    await client.call_tool("add_numbers", {"a": 5, "b": 3})


async def initialize(client: Client, _ctx: dict[str, Any]) -> None:
    # A client only asks for what the server declared (lifecycle.mdx, capability
    # negotiation); the library refuses undeclared methods with LocalProtocolError.
    if client.server_capabilities.tools is not None:
        await client.list_tools()


async def elicitation_defaults(client: Client, _ctx: dict[str, Any]) -> None:
    await client.list_tools()
    await client.call_tool("test_client_elicitation_defaults", {})


async def sse_retry(client: Client, _ctx: dict[str, Any]) -> None:
    await client.list_tools()
    await client.call_tool("test_reconnection", {})


async def schema_preservation(client: Client, _ctx: dict[str, Any]) -> None:
    tools = await client.list_tools()
    schema = next(tool.input_schema for tool in tools if tool.name == "json_schema_2020_12_tool")
    await client.call_tool("json_schema_echo", {"schema": schema})


async def request_state(client: Client, _ctx: dict[str, Any]) -> None:
    tools = await client.list_tools()
    for tool in tools:
        await client.call_tool(tool.name, {})


async def standard_headers(client: Client, _ctx: dict[str, Any]) -> None:
    tools = await client.list_tools()
    for tool in tools:
        await client.call_tool(tool.name, {})
    for resource in await client.list_resources():
        await client.read_resource(resource.uri)
    for prompt in await client.list_prompts():
        await client.get_prompt(prompt.name, {})


async def custom_headers(client: Client, ctx: dict[str, Any]) -> None:
    await client.list_tools()
    for call in ctx.get("toolCalls", []):
        await client.call_tool(call["name"], call.get("arguments") or {})


async def invalid_tool_headers(client: Client, _ctx: dict[str, Any]) -> None:
    tools = await client.list_tools()
    if any(tool.name == "valid_tool" for tool in tools):
        await client.call_tool("valid_tool", {"region": "us-west1"})


async def skills_listed(client: Client, _ctx: dict[str, Any]) -> None:
    """The host builds its registry from the entries alone: no skill file is fetched
    until a skill is loaded (SEP-2640, Lazy Retrieval)."""
    for skill in await client.list_skills():
        print(f"skill {skill.name}: {skill.description}", file=sys.stderr)


async def skills_load(client: Client, _ctx: dict[str, Any]) -> None:
    """Load each listed skill and read its files, every one verified against the entry;
    a skill that fails verification is refused and nothing more of it is read."""
    for skill in await client.list_skills():
        try:
            await client.load_skill(skill)
            for file in skill.resources:
                if isinstance(file, SkillFile) and file.uri != skill.uri:
                    await client.read_skill_file(skill, file.uri)
        except SkillVerificationError as refused:
            print(f"refused skill {skill.uri}: {refused.reason}", file=sys.stderr)


SCENARIOS: dict[str, Scenario] = {
    "sep-2640-client-no-prefetch": skills_listed,
    "sep-2640-client-verify-digest": skills_load,
    "sep-2640-client-verify-size": skills_load,
    "sep-2640-client-verify-frontmatter": skills_load,
    "initialize": initialize,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
    "json-schema-2020-12-preservation": schema_preservation,
    "json-schema-ref-no-deref": initialize,
    "request-metadata": list_and_call_first,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
}


#: The Client ID Metadata Document URL the suite expects (auth/basic-cimd).
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def harness_issuer_of(url: str) -> str:
    """TEST-HARNESS SHORTCUT: NOT A PATTERN TO COPY.

    ``auth/client-credentials-basic`` and ``auth/enterprise-managed-authorization`` give a
    client secret, and ``auth/wif-jwt-bearer`` a workload JWT, but not the
    authorization server they belong to; :class:`~mcp_trio.ClientCredentials` and
    :class:`~mcp_trio.WorkloadIdentity` refuse a secret or JWT without its ``issuer``.
    So, for those scenarios against the suite's mock (:data:`HARNESS_ISSUER`), the
    issuer is read from the metadata of the very server the credential is then sent
    for: precisely what binding a credential to its issuer prevents (a server that
    names an authorization server it controls would receive it). A real application
    is configured with the issuer, out of band, when the client is registered.

    A plain ``urllib`` GET in a thread: mcp_trio has no public HTTP fetch (its OAuth
    requests are internal), and the mock is plain http on localhost."""

    def get(where: str) -> bytes | None:
        try:
            with urllib.request.urlopen(where, timeout=10) as answer:
                body: bytes = answer.read(1 << 20)
                return body
        except urllib.error.HTTPError:
            return None

    for where in protected_resource_metadata_urls(url, None):
        body = await trio.to_thread.run_sync(get, where)
        if body is not None:
            return parse_protected_resource_metadata(body, url).authorization_servers[0]
    raise OAuthError(f"no protected-resource metadata for {url}")


#: The scenarios whose credentials come without their issuer (see harness_issuer_of).
HARNESS_ISSUER = frozenset(
    {
        "auth/client-credentials-basic",
        "auth/client-credentials-jwt",
        "auth/enterprise-managed-authorization",
        "auth/wif-jwt-bearer",
    }
)


async def oauth_for(url: str, scenario: str, context: dict[str, Any]) -> OAuth | None:
    """OAuth for the auth/* scenarios: pre-registered credentials when the context
    has them (bound to the context's issuer), our metadata document URL where the
    server supports those. A secret without an issuer is used only in
    the :data:`HARNESS_ISSUER` scenarios (see :func:`harness_issuer_of`); elsewhere it
    is dropped and the ``client_id`` used as a public client's. Workload identity
    presents the context's valid JWT (no client: the extension needs no
    registration); enterprise-managed authorization the context's ID token, IdP and
    IdP client. A ``private_key_pem`` (auth/client-credentials-jwt) makes the client
    authenticate with ``private_key_jwt``. The authorization code flow asks for DPoP
    tokens where the authorization server offers them (auth/dpop, auth/dpop-nonce)."""
    if not scenario.startswith("auth/"):
        return None
    if scenario == "auth/wif-jwt-bearer":
        identity = WorkloadIdentity(
            assertion=context["valid_jwt"], issuer=await harness_issuer_of(url)
        )
        return OAuth(workload_identity=identity)
    client = None
    if "client_id" in context:
        secret = context.get("client_secret")
        key = context.get("private_key_pem")
        issuer = context.get("issuer")
        if key is not None and issuer is None:
            issuer = await harness_issuer_of(url)  # (auth/client-credentials-jwt only)
        if secret is not None and issuer is None:
            if scenario in HARNESS_ISSUER:
                issuer = await harness_issuer_of(url)
            else:
                secret = None
        client = ClientCredentials(
            client_id=context["client_id"],
            client_secret=secret,
            issuer=issuer,
            private_key=key,
            signing_algorithm=context.get("signing_algorithm"),
        )
    if scenario in ("auth/client-credentials-basic", "auth/client-credentials-jwt"):
        return OAuth(client=client)  # no user: the client credentials grant
    if scenario == "auth/enterprise-managed-authorization":
        enterprise = EnterpriseAuthorization(
            id_token=context["idp_id_token"],
            idp_issuer=context["idp_issuer"],
            idp_client=ClientCredentials(client_id=context["idp_client_id"]),
            idp_token_endpoint=context.get("idp_token_endpoint"),
        )
        return OAuth(client=client, enterprise=enterprise)
    return OAuth(
        redirect_uri="http://localhost:3000/callback",
        on_authorize=fetch_authorization_redirect,
        client=client,
        client_metadata_url=CIMD_URL,
        client_name="mcp-trio-conformance-client",
        # DPoP-bound tokens where the authorization server offers them (ES256):
        # auth/dpop and auth/dpop-nonce; the others issue Bearer tokens as before.
        dpop=True,
    )


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "tools_call")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    run = SCENARIOS.get(scenario, list_and_call_first)
    async with open_client(
        url,
        era="modern" if version == "2026-07-28" else "legacy",
        on_elicitation=on_elicitation,
        on_sampling=on_sampling,
        client_info={"name": "mcp-trio-conformance-client", "version": "1.0.0"},
        timeout=30,
        auth=await oauth_for(url, scenario, context),
    ) as client:
        await run(client, context)
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[-1]))

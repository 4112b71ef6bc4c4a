"""Our DPoP client (``OAuth(dpop=True)``) against a real ``serve_http`` protected by
``BearerAuth(dpop="required")`` on 127.0.0.1: ``test_oauth_dpop``'s fake authorization
server issues the bound tokens; its MCP front passes DPoP requests through untouched."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Literal

import attrs
import pytest
import trio

pytest.importorskip("cryptography")

from mcp_sansio._dpop_proof import DpopNonces
from mcp_sansio._jose import dpop_proof
from mcp_trio import BearerAuth, Principal, ProtectedResourceMetadata
from mcp_trio._oauth import oauth_fetch
from mcp_trio._signing import new_dpop_key

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT, App, raw_request, start_server
from .test_oauth import list_and_call
from .test_oauth_dpop import DpopFake


@attrs.define
class PassThrough(DpopFake):
    statuses: list[int] = attrs.field(factory=list)  # of the DPoP requests, upstream

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if not headers.get("authorization", "").startswith("DPoP "):
            return await super().mcp(headers, body)
        forwarded = [
            (k, v) for k, v in headers.items() if k not in ("host", "content-length", "connection")
        ]
        status, answer_headers, answer = await oauth_fetch(
            "POST", self.upstream, headers=forwarded, body=body, max_response_size=1 << 20
        )
        self.statuses.append(status)
        keep = [
            (k.decode(), v.decode())
            for k, v in answer_headers
            if k.decode().startswith(("content-type", "mcp-", "www-authenticate", "dpop-nonce"))
        ]
        return status, keep, answer


async def start(nursery: trio.Nursery, nonces: DpopNonces | None) -> PassThrough:
    fake = PassThrough(upstream="")
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"

    async def verify_token(token: str) -> Principal | None:
        jkt = fake.bound.get(token)
        return None if jkt is None else Principal(subject="alice", dpop_jkt=jkt)

    auth = BearerAuth(
        verify_token=verify_token, dpop="required", dpop_origin=fake.base, dpop_nonces=nonces
    )
    upstream = await start_server(nursery, App(), authenticate=auth)
    fake.upstream = upstream.url
    return fake


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("nonce", [False, True])
async def test_our_client_against_a_dpop_required_server(
    nursery: trio.Nursery, era: Literal["modern", "legacy"], nonce: bool
) -> None:
    nonces = DpopNonces(key=b"k" * 32) if nonce else None
    fake = await start(nursery, nonces)
    assert await list_and_call(fake, oauth(dpop=True), era) == "hi"
    assert fake.bound  # a bound token was issued, and accepted with its proofs:
    # with a nonce required, the first request is refused once (use_dpop_nonce), the
    # client retries with the server's nonce, and every later request carries one.
    assert fake.statuses[0] == (401 if nonce else 200)
    assert fake.statuses.count(401) == int(nonce)


async def test_a_stolen_token_with_another_key_is_refused(nursery: trio.Nursery) -> None:
    fake = await start(nursery, None)
    assert await list_and_call(fake, oauth(dpop=True)) == "hi"
    [token] = fake.bound
    key = new_dpop_key()  # the thief's own key: a good proof, but not the token's key
    proof = dpop_proof(
        jwk=key.public_jwk,
        alg=key.alg,
        sign=key.sign,
        method="POST",
        url=fake.url,
        now=time.time(),
        jti="x",
        access_token=token,
    )
    headers = [
        ("authorization", f"DPoP {token}"),
        ("dpop", proof),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    status, answer, _ = await oauth_fetch(
        "POST", fake.url, headers=headers, body=body, max_response_size=1 << 16
    )
    assert status == 401
    www = [v.decode() for k, v in answer if k == b"www-authenticate"]
    assert any('error="invalid_token"' in w for w in www)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("off", {}),
        ("allowed", {"dpop_signing_alg_values_supported": ["ES256"]}),
        (
            "required",
            {
                "dpop_signing_alg_values_supported": ["ES256"],
                "dpop_bound_access_tokens_required": True,
            },
        ),
    ],
)
async def test_the_served_metadata_says_what_bearer_auth_takes(
    nursery: trio.Nursery, mode: Literal["off", "allowed", "required"], expected: dict[str, Any]
) -> None:
    # RFC 9728 section 2: serve_http fills in the DPoP fields from its BearerAuth.
    async def verify_token(token: str) -> Principal | None:
        return None

    auth = BearerAuth(verify_token=verify_token, dpop=mode, dpop_algs=("ES256",))
    metadata = ProtectedResourceMetadata(
        resource="https://mcp.example.com/mcp", authorization_servers=["https://a.example"]
    )
    server = await start_server(
        nursery, App(), authenticate=auth, http={"resource_metadata": metadata}
    )
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "GET", "/.well-known/oauth-protected-resource")
    assert response.status == 200
    assert response.json() == {**metadata.document(), **expected}

"""What the OAuth tests (``test_oauth.py``, ``test_oauth_e2e.py``,
``test_oauth_grants.py``, ``test_oauth_shared_refresh.py``, the keep-alive and GET
stream ones) share."""

from __future__ import annotations

import base64
import hashlib
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

import attrs
import trio
import trio.testing

from mcp_sansio._json import dumps
from mcp_trio import (
    ClientCredentials,
    InMemoryOAuthStorage,
    OAuth,
    OAuthToken,
    fetch_authorization_redirect,
)

from .test_http_support import serve_routes

REDIRECT = "http://127.0.0.1:9/callback"


def s256(verifier: str) -> str:
    """The PKCE ``S256`` challenge of ``verifier``."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def oauth(**kwargs: Any) -> OAuth:
    """An :class:`OAuth` with the test redirect URI and a user agent that follows the
    authorization server's redirect at once; ``kwargs`` override."""
    options: dict[str, Any] = {
        "redirect_uri": REDIRECT,
        "on_authorize": fetch_authorization_redirect,
    }
    return OAuth(**{**options, **kwargs})


class Storage:
    """An :class:`~mcp_trio.OAuthStorage` in memory, without ``load_server`` (a new
    client discovers, then finds the stored token at its first ``401``), whose
    ``save_token`` takes ``save_seconds`` (a keyring: Trio's clock) and is recorded."""

    def __init__(self, save_seconds: float = 0.0) -> None:
        self.memory = InMemoryOAuthStorage()
        self.tokens = self.memory.tokens
        self.save_seconds = save_seconds
        self.saved: list[OAuthToken | None] = []

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        return await self.memory.load_client(issuer)

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        await self.memory.save_client(issuer, client)

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        return await self.memory.load_token(resource, issuer)

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        if self.save_seconds:
            await trio.sleep(self.save_seconds)
        self.saved.append(token)
        await self.memory.save_token(resource, issuer, token)


class User:
    """An ``on_authorize`` that counts its prompts (``prompts``) and follows the
    authorization server's redirect at once; past ``answers`` prompts (if given), it
    never answers (the user is away)."""

    def __init__(self, answers: int | None = None) -> None:
        self.prompts = 0
        self.answers = answers

    async def __call__(self, url: str) -> str:
        self.prompts += 1
        if self.answers is not None and self.prompts > self.answers:
            await trio.sleep_forever()
        return await fetch_authorization_redirect(url)


async def let_pass(clock: trio.testing.MockClock, count: int, step: float) -> None:
    """Let ``count`` steps of ``step`` seconds pass on ``clock`` (real sockets: each
    step waits for every task to block, and lets the loopback I/O through)."""
    for _ in range(count):
        await trio.testing.wait_all_tasks_blocked()
        clock.jump(step)
        await trio.sleep(0.05)
    await trio.testing.wait_all_tasks_blocked()


@attrs.define
class FakeIdP:
    """An enterprise identity provider on 127.0.0.1: OpenID Connect metadata and a
    token endpoint that exchanges an ID token for an ID-JAG (RFC 8693), which it adds
    to ``grants`` (the authorization server's ``assertions``, shared). Knobs for its
    misbehaviours; it records the exchanges."""

    grants: set[str]
    id_tokens: set[str] = attrs.field(factory=lambda: {"id-token-1"})
    base: str = ""
    error: str | None = None
    error_status: int = 400
    issued_token_type: str = "urn:ietf:params:oauth:token-type:id-jag"
    padding: int = 0
    hang: bool = False
    same_grant: bool = False  # hand out one ID-JAG again and again (as if cached)
    paths: list[str] = attrs.field(factory=list)
    exchanges: list[dict[str, str]] = attrs.field(factory=list)

    @property
    def issuer(self) -> str:
        return self.base + "/tenant"

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        path = target.partition("?")[0]
        self.paths.append(f"{method} {path}")
        js = [("content-type", "application/json")]
        if method == "GET" and path == "/.well-known/openid-configuration/tenant":
            meta = {
                "issuer": self.issuer,
                "token_endpoint": f"{self.issuer}/token",
                "token_endpoint_auth_methods_supported": ["client_secret_post"],
                "grant_types_supported": ["urn:ietf:params:oauth:grant-type:token-exchange"],
            }
            return 200, js, dumps(meta)
        if method == "POST" and path == "/tenant/token":
            form = dict(parse_qsl(body.decode()))
            self.exchanges.append(form)
            if self.hang:
                await trio.sleep_forever()
            if self.error is not None:
                refusal = {"error": self.error, "error_description": "policy"}
                return self.error_status, js, dumps(refusal)
            if form.get("subject_token") not in self.id_tokens:
                return 400, js, dumps({"error": "invalid_grant"})
            number = 0 if self.same_grant else len(self.exchanges)
            grant = f"jag-{number}.{form['audience']}.{form['resource']}"
            self.grants.add(grant)
            answer: dict[str, Any] = {
                "issued_token_type": self.issued_token_type,
                "access_token": grant,
                "token_type": "N_A",
                "expires_in": 300,
            }
            if self.padding:
                answer["padding"] = "x" * self.padding
            return 200, js, dumps(answer)
        return 404, [], b""

    async def serve(self, stream: trio.SocketStream) -> None:
        await serve_routes(self.route, stream)


async def start_idp(nursery: trio.Nursery, grants: set[str], **knobs: Any) -> FakeIdP:
    """A :class:`FakeIdP` listening on 127.0.0.1 (its issuer has a path: ``/tenant``)."""
    idp = FakeIdP(grants=grants, **knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, idp.serve, 0, host="127.0.0.1"))
    idp.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    return idp

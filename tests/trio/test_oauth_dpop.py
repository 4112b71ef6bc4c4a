"""DPoP (RFC 9449) and private_key_jwt (RFC 7523) end to end: ``test_oauth``'s fake
authorization server and protected MCP server on 127.0.0.1, taught DPoP and client
assertions, with every proof and assertion verified here with ``cryptography``."""

from __future__ import annotations

import base64
import builtins
import contextlib
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import attrs
import pytest
import trio
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from mcp_sansio import BearerChallenge, OAuthToken
from mcp_sansio._jose import CLIENT_ASSERTION_TYPE, access_token_hash, jwk_thumbprint
from mcp_sansio._json import dumps, loads
from mcp_trio import (
    Client,
    ClientCredentials,
    EnterpriseAuthorization,
    FileOAuthStorage,
    InMemoryOAuthStorage,
    McpError,
    OAuth,
    OAuthError,
    SessionClosed,
    WorkloadIdentity,
    open_client,
)
from mcp_trio._oauth import _MAX_DPOP_NONCES
from mcp_trio._signing import load_signing_key
from mcp_trio._websocket import _handshake_rounds, _HandshakeRejected

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT, App, start_server
from .test_oauth import Fake, list_and_call

AS_NONCE = "as-nonce-1"
JS = [("content-type", "application/json")]

PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey


def _b64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def _int(s: str) -> int:
    return int.from_bytes(_b64(s), "big")


def _b64int(n: int) -> str:
    return (
        base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()
    )


def verify(jws: str, key: PublicKey | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of ``jws`` once its signature verifies against ``key`` (by
    default its header's ``jwk``). Raises ``InvalidSignature`` otherwise."""
    h64, c64, s64 = jws.split(".")
    header, claims, signature = loads(_b64(h64)), loads(_b64(c64)), _b64(s64)
    signed = f"{h64}.{c64}".encode()
    if key is None:
        jwk = header["jwk"]
        assert jwk["kty"] == "EC" and jwk["crv"] == "P-256"
        key = ec.EllipticCurvePublicNumbers(
            _int(jwk["x"]), _int(jwk["y"]), ec.SECP256R1()
        ).public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        assert header["alg"] == "ES256" and len(signature) == 64
        der = encode_dss_signature(
            int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
        )
        key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
    else:
        assert header["alg"] == "RS256"
        key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
    return header, claims


@attrs.define
class DpopFake(Fake):
    """:class:`Fake` with DPoP at its token endpoint (``algs`` advertised) and its MCP
    endpoint, and client assertions at its token endpoint (``client_key``)."""

    algs: list[str] | None = attrs.field(factory=lambda: ["ES256"])
    auth_methods: list[str] | None = None
    as_nonce: bool = False  # the token endpoint asks for AS_NONCE
    as_nonce_always: bool = False  # ... and again, whatever the proof carries
    rs_nonce: bool = False  # the MCP endpoint asks for a nonce (a new one each time)
    rs_nonce_always: bool = False
    bind: bool = True  # issue DPoP tokens to a request with a proof
    client_key: PublicKey | None = None
    # what happened
    token_proofs: list[str] = attrs.field(factory=list)
    mcp_proofs: list[tuple[str, str]] = attrs.field(factory=list)  # (token, proof)
    bound: dict[str, str] = attrs.field(factory=dict)  # token -> jkt
    client_assertions: list[dict[str, str]] = attrs.field(factory=list)
    rs_nonces: list[str] = attrs.field(factory=list)

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        path = target.partition("?")[0]
        if method == "POST" and path == self.as_path + "/token":
            form = dict(parse_qsl(body.decode()))
            if "client_assertion" in form:
                self.client_assertions.append(form)
            proof = headers.get("dpop")
            if proof is not None:
                self.token_proofs.append(proof)
                _, claims = verify(proof)
                if self.as_nonce_always or (self.as_nonce and claims.get("nonce") != AS_NONCE):
                    refusal = dumps({"error": "use_dpop_nonce"})
                    return 400, [*JS, ("dpop-nonce", AS_NONCE)], refusal
        status, out, answer = await super().route(method, target, headers, body)
        if method == "GET" and path == "/.well-known/oauth-authorization-server" + self.as_path:
            meta = loads(answer)
            if self.algs is not None:
                meta["dpop_signing_alg_values_supported"] = self.algs
            if self.auth_methods is not None:
                meta["token_endpoint_auth_methods_supported"] = self.auth_methods
            return status, out, dumps(meta)
        if method == "POST" and path == self.as_path + "/token" and status == 200:
            proof = headers.get("dpop")
            if proof is not None and self.bind:
                token = loads(answer)
                header, _ = verify(proof)
                self.bound[token["access_token"]] = jwk_thumbprint(header["jwk"])
                answer = dumps({**token, "token_type": "DPoP"})
        return status, out, answer

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        auth = headers.get("authorization", "")
        if auth.startswith("DPoP "):
            token = auth[5:]
            proof = headers.get("dpop", "")
            self.mcp_proofs.append((token, proof))
            _, claims = verify(proof)
            if self.rs_nonce_always or (
                self.rs_nonce and claims.get("nonce") not in self.rs_nonces
            ):
                nonce = f"rs-{len(self.rs_nonces)}"
                self.rs_nonces.append(nonce)
                www = 'DPoP error="use_dpop_nonce", error_description="fresh"'
                return 401, [("www-authenticate", www), ("dpop-nonce", nonce)], b""
            headers = {k: v for k, v in headers.items() if k != "dpop"}
            headers["authorization"] = "Bearer " + token
        return await super().mcp(headers, body)


FakeT = TypeVar("FakeT", bound=DpopFake)


async def start_fake(nursery: trio.Nursery, cls: type[FakeT], **knobs: Any) -> FakeT:
    upstream = await start_server(nursery, App())
    fake = cls(upstream=upstream.url, **knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    return fake


async def start_dpop(nursery: trio.Nursery, **knobs: Any) -> DpopFake:
    return await start_fake(nursery, DpopFake, **knobs)


# ------------------------------------------------------------------ DPoP


async def test_dpop_binds_the_token_and_proves_every_request(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery)
    auth = oauth(dpop=True)
    assert await list_and_call(fake, auth) == "hi"
    # The token request: a proof of the client's key (RFC 9449 section 5).
    [proof] = fake.token_proofs
    header, claims = verify(proof)
    assert header["typ"] == "dpop+jwt" and "d" not in header["jwk"]
    assert claims["htm"] == "POST" and claims["htu"] == fake.issuer + "/token"
    assert "ath" not in claims and "nonce" not in claims
    [token] = fake.bound
    assert fake.bound[token] == auth._dpop_jkt
    # Every MCP request: Authorization: DPoP, a fresh proof of the same key, with ath.
    assert len(fake.mcp_proofs) >= 2
    jtis = set()
    for sent, proof in fake.mcp_proofs:
        header, claims = verify(proof)
        assert sent == token
        assert jwk_thumbprint(header["jwk"]) == fake.bound[token]
        assert claims["htm"] == "POST" and claims["htu"] == fake.url
        assert claims["ath"] == access_token_hash(token)
        jtis.add(claims["jti"])
    assert len(jtis) == len(fake.mcp_proofs)


async def test_the_authorization_servers_nonce_is_used_once_asked(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery, as_nonce=True)
    assert await list_and_call(fake, oauth(dpop=True)) == "hi"
    first, second = fake.token_proofs
    assert "nonce" not in verify(first)[1]
    assert verify(second)[1]["nonce"] == AS_NONCE
    assert len(fake.token_requests) == 1  # (the refused one never reached the grant)


async def test_a_second_use_dpop_nonce_from_the_authorization_server_fails(
    nursery: trio.Nursery,
) -> None:
    fake = await start_dpop(nursery, as_nonce_always=True)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="DPoP nonce again"):
        await oauth(dpop=True).authorize(fake.url)
    assert len(fake.token_proofs) == 2


async def test_the_servers_nonce_is_retried_once_then_remembered(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery, rs_nonce=True)
    assert await list_and_call(fake, oauth(dpop=True)) == "hi"
    # The first request was refused for its nonce, sent once more with it; the rest
    # carried it from the start.
    nonces = [verify(proof)[1].get("nonce") for _, proof in fake.mcp_proofs]
    assert nonces[0] is None
    assert nonces[1:] == ["rs-0"] * (len(nonces) - 1)
    assert fake.rs_nonces == ["rs-0"]
    assert len(fake.token_proofs) == 1  # a nonce is no reason to authorize again


@attrs.define
class SingleUseNonces(DpopFake):
    """Its MCP endpoint takes each nonce it gives once, and gives a new one with each
    ``use_dpop_nonce`` refusal (RFC 9449 section 9 lets a server ask for a new nonce
    whenever it likes)."""

    given: set[str] = attrs.field(factory=set)
    refusals: int = 0

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if headers.get("authorization", "").startswith("DPoP "):
            nonce = verify(headers.get("dpop", ""))[1].get("nonce")
            if nonce not in self.given:
                self.refusals += 1
                fresh = f"once-{self.refusals}"
                self.given.add(fresh)
                www = 'DPoP error="use_dpop_nonce"'
                return 401, [("www-authenticate", www), ("dpop-nonce", fresh)], b""
            self.given.remove(nonce)
        return await super().mcp(headers, body)


async def test_requests_refused_together_each_go_again_with_their_own_nonce(
    nursery: trio.Nursery,
) -> None:
    # Before, each went again with the origin's last nonce, another request's: the
    # server took it once, and refused the others (about half the calls failed).
    fake = await start_fake(nursery, SingleUseNonces)
    texts: list[str] = []

    async def call(client: Client) -> None:
        texts.append((await client.call_tool("echo", {"text": "hi"})).text)

    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=oauth(dpop=True)) as client:
            await client.list_tools()
            async with trio.open_nursery() as calls:
                for _ in range(20):
                    calls.start_soon(call, client)
            await call(client)  # one after the other, each refused first
            await call(client)
    assert texts == ["hi"] * 22
    assert len(fake.token_proofs) == 1  # no new authorization


async def test_a_server_that_keeps_asking_for_a_nonce_fails_the_request(
    nursery: trio.Nursery,
) -> None:
    fake = await start_dpop(nursery)
    auth = oauth(dpop=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=auth) as client:
            await client.list_tools()
            fake.rs_nonce_always = True
            before = len(fake.mcp_proofs)
            with pytest.raises(McpError, match="401"):
                await client.list_tools()
            # Sent twice (the second with the nonce), then its refusal is the answer:
            # no loop, and no new authorization.
            assert len(fake.mcp_proofs) - before == 2
            assert len(fake.token_proofs) == 1
            fake.rs_nonce_always = False
            assert await client.list_tools()  # the session goes on


@pytest.mark.parametrize("algs", [None, ["RS256"]])
async def test_no_dpop_where_the_authorization_server_does_not_take_es256(
    nursery: trio.Nursery, algs: list[str] | None
) -> None:
    fake = await start_dpop(nursery, algs=algs)
    assert await list_and_call(fake, oauth(dpop=True)) == "hi"
    assert not fake.token_proofs and not fake.mcp_proofs
    assert fake.bearer_seen  # Bearer, as without dpop


async def test_without_dpop_no_proof_is_sent(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery)
    assert await list_and_call(fake, oauth()) == "hi"
    assert not fake.token_proofs and not fake.mcp_proofs


async def test_a_bearer_token_for_a_proof_fails_the_authorization(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery, bind=False)
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="did not bind"):
        await oauth(dpop=True).authorize(fake.url)


async def test_a_refresh_carries_a_proof_and_keeps_the_token_bound(
    nursery: trio.Nursery,
) -> None:
    fake = await start_dpop(nursery, refresh_tokens=True)
    now = [1000.0]
    auth = oauth(dpop=True, clock=lambda: now[0])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=auth) as client:
            await client.list_tools()
            now[0] += 7200  # expired: refreshed before the next request
            await client.list_tools()
    assert [r["grant_type"] for r in fake.token_requests] == ["authorization_code", "refresh_token"]
    assert len(fake.token_proofs) == 2 and len(fake.bound) == 2
    last_token, _ = fake.mcp_proofs[-1]
    assert fake.bound[last_token] == auth._dpop_jkt


async def test_a_stored_dpop_token_is_used_only_with_its_key(nursery: trio.Nursery) -> None:
    fake = await start_dpop(nursery)
    storage = InMemoryOAuthStorage()
    first = oauth(dpop=True, storage=storage)
    assert await list_and_call(fake, first) == "hi"
    assert await list_and_call(fake, first) == "hi"  # the same key: the stored token
    assert len(fake.authorizations) == 1
    # Another OAuth (another process): another key; the stored token is not presented.
    other = oauth(dpop=True, storage=storage)
    assert await list_and_call(fake, other) == "hi"
    assert len(fake.authorizations) == 2
    assert {fake.bound[t] for t, _ in fake.mcp_proofs} == {first._dpop_jkt, other._dpop_jkt}
    for token, proof in fake.mcp_proofs:  # never a token with another key's proof
        assert jwk_thumbprint(verify(proof)[0]["jwk"]) == fake.bound[token]
    # Without dpop, a DPoP token is of no use either.
    assert await list_and_call(fake, oauth(storage=storage)) == "hi"
    assert len(fake.authorizations) == 3


async def test_nonces_are_kept_for_a_bounded_number_of_servers() -> None:
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth.bind("http://127.0.0.1:1/mcp")
    authorizer._use(_dpop_token(auth))
    for n in range(_MAX_DPOP_NONCES + 1):
        authorizer._keep_nonce("rs", f"http://127.0.0.1:{n + 1}/x", f"n{n}")
    assert len(auth._dpop_nonces) == _MAX_DPOP_NONCES
    assert "rs http://127.0.0.1:1" not in auth._dpop_nonces  # the oldest went
    # A nonce refreshed moves to the end.
    authorizer._keep_nonce("rs", "http://127.0.0.1:2/x", "again")
    assert next(reversed(auth._dpop_nonces)) == "rs http://127.0.0.1:2"


async def _never_called(url: str) -> str:
    raise AssertionError(url)


def _dpop_token(auth: OAuth) -> OAuthToken:
    return OAuthToken(access_token="tok-ws", token_type="DPoP", dpop_jkt=auth._dpop_jkt)


@attrs.frozen
class _Opened:
    handshake_headers: tuple[tuple[bytes, bytes], ...] = ()


async def test_the_websocket_handshake_carries_a_proof_and_takes_a_nonce() -> None:
    url = "ws://127.0.0.1:9/mcp?x=1"
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth._websocket_authorizer(url)
    authorizer._use(_dpop_token(auth))
    seen: list[list[tuple[bytes, bytes]]] = []

    @contextlib.asynccontextmanager
    async def connect(more: list[tuple[bytes, bytes]]) -> AsyncIterator[Any]:
        seen.append(more)
        if len(seen) == 1:
            headers = (
                (b"www-authenticate", b'DPoP error="use_dpop_nonce"'),
                (b"dpop-nonce", b"ws-nonce"),
            )
            raise _HandshakeRejected("refused", 401, headers)
        yield (_Opened(((b"dpop-nonce", b"ws-next"),)), None)

    async with contextlib.AsyncExitStack() as stack:
        opened: Any = await _handshake_rounds(stack, connect, authorizer, 3)
        assert isinstance(opened[0], _Opened)
    first, second = (dict(more) for more in seen)
    assert first[b"authorization"] == b"DPoP tok-ws"
    claims = verify(first[b"dpop"].decode())[1]
    # htu: the HTTP target URI of the handshake (RFC 9449 section 4.2), http for ws.
    assert claims["htm"] == "GET" and claims["htu"] == "http://127.0.0.1:9/mcp"
    assert claims["ath"] == access_token_hash("tok-ws") and "nonce" not in claims
    assert verify(second[b"dpop"].decode())[1]["nonce"] == "ws-nonce"
    # The accepting answer's DPoP-Nonce is the next proof's (RFC 9449 section 9).
    third = authorizer.proof("GET", b"DPoP tok-ws")
    assert third is not None and verify(third.decode())[1]["nonce"] == "ws-next"


async def test_a_websocket_server_that_always_asks_for_a_nonce_is_retried_once() -> None:
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth._websocket_authorizer("wss://127.0.0.1:9/mcp")
    authorizer._use(_dpop_token(auth))
    seen: list[list[tuple[bytes, bytes]]] = []

    @contextlib.asynccontextmanager
    async def connect(more: list[tuple[bytes, bytes]]) -> AsyncIterator[Any]:
        seen.append(more)
        nonce = f"n{len(seen)}".encode()
        headers = ((b"www-authenticate", b'DPoP error="use_dpop_nonce"'), (b"dpop-nonce", nonce))
        if seen:  # (always: a generator all the same)
            raise _HandshakeRejected("refused", 401, headers)
        yield None

    with trio.fail_after(IO_TIMEOUT):
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises((_HandshakeRejected, SessionClosed)):
                await _handshake_rounds(stack, connect, authorizer, 3)
    nonces = [verify(dict(more)[b"dpop"].decode())[1].get("nonce") for more in seen]
    assert nonces[:2] == [None, "n1"]
    assert nonces.count("n1") == 1 and len(seen) <= 5
    assert verify(dict(seen[0])[b"dpop"].decode())[1]["htu"] == "https://127.0.0.1:9/mcp"


@attrs.define
class RotatingFake(DpopFake):
    """Gives the next nonce on every answer (RFC 9449 sections 8.2 and 9) and takes
    only the last one given, at its token endpoint and at its MCP endpoint apart."""

    as_current: str = "as-0"
    rs_current: str = "rs-0"
    as_refusals: int = 0
    rs_refusals: int = 0

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method == "POST" and target.partition("?")[0] == self.as_path + "/token":
            if verify(headers["dpop"])[1].get("nonce") != self.as_current:
                self.as_refusals += 1
                refusal = dumps({"error": "use_dpop_nonce"})
                return 400, [*JS, ("dpop-nonce", self.as_current)], refusal
            status, out, answer = await super().route(method, target, headers, body)
            self.as_current = f"as-{int(self.as_current[3:]) + 1}"
            return status, [*out, ("dpop-nonce", self.as_current)], answer
        return await super().route(method, target, headers, body)

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if not headers.get("authorization", "").startswith("DPoP "):
            return await super().mcp(headers, body)
        if verify(headers["dpop"])[1].get("nonce") != self.rs_current:
            self.rs_refusals += 1
            www = 'DPoP error="use_dpop_nonce"'
            return 401, [("www-authenticate", www), ("dpop-nonce", self.rs_current)], b""
        status, out, answer = await super().mcp(headers, body)
        self.rs_current = f"rs-{int(self.rs_current[3:]) + 1}"
        return status, [*out, ("dpop-nonce", self.rs_current)], answer


async def test_a_nonce_on_an_accepted_request_is_the_next_proofs(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, RotatingFake)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=oauth(dpop=True)) as client:
            for _ in range(4):
                await client.list_tools()
    assert fake.rs_refusals == 1  # the first request only: no nonce yet


async def test_the_token_endpoints_nonce_of_a_200_is_the_next_requests(
    nursery: trio.Nursery,
) -> None:
    fake = await start_fake(nursery, RotatingFake, refresh_tokens=True)
    now = [1000.0]
    auth = oauth(dpop=True, clock=lambda: now[0])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=auth) as client:
            await client.list_tools()
            now[0] += 7200  # expired: refreshed before the next request
            await client.list_tools()
    assert fake.as_refusals == 1  # the code grant's; the refresh carried "as-1"
    assert [verify(p)[1].get("nonce") for p in fake.token_proofs][-1] == "as-1"
    # One origin, two nonces: the token endpoint's never sent to the MCP endpoint.
    assert fake.rs_refusals == 1
    assert {k.split()[0] for k in auth._dpop_nonces} == {"as", "rs"}


@attrs.define
class RevokingFake(DpopFake):
    """Takes a nonce until it rotates them (``good.clear()``); refuses a token in
    ``revoked`` with ``invalid_token``, after the proof's nonce (RFC 9449 section 7.1:
    the proof first). ``seen``: each DPoP request's nonce and answer."""

    good: set[str] = attrs.field(factory=set)
    revoked: set[str] = attrs.field(factory=set)
    seen: list[tuple[str | None, str]] = attrs.field(factory=list)

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        auth = headers.get("authorization", "")
        if auth.startswith("DPoP "):
            nonce = verify(headers.get("dpop", ""))[1].get("nonce")
            if nonce not in self.good:
                fresh = f"n{len(self.seen)}"
                self.good.add(fresh)
                self.seen.append((nonce, "use_dpop_nonce"))
                www = 'DPoP error="use_dpop_nonce"'
                return 401, [("www-authenticate", www), ("dpop-nonce", fresh)], b""
            if auth[5:] in self.revoked:
                self.seen.append((nonce, "invalid_token"))
                return 401, [("www-authenticate", 'DPoP error="invalid_token"')], b""
            self.seen.append((nonce, "ok"))
        return await super().mcp(headers, body)


async def test_a_nonce_taken_by_a_request_refused_for_its_token_is_kept(
    nursery: trio.Nursery,
) -> None:
    # The server rotated its nonce and revoked the token: the request is refused for
    # its nonce, goes again with the new one, which the server takes (it refuses the
    # token). Refreshed, the request goes once more: with that nonce, not the stale
    # one (refused for its nonce again, past the one nonce retry: the call failed).
    fake = await start_fake(nursery, RevokingFake, refresh_tokens=True)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=oauth(dpop=True)) as client:
            await client.list_tools()
            fake.good.clear()
            fake.revoked.update(fake.tokens)
            await client.list_tools()
    *_, stale, retried, refreshed = fake.seen
    assert stale[1] == "use_dpop_nonce" and retried[1] == "invalid_token"
    assert refreshed == (retried[0], "ok")


@attrs.define
class BothSchemesFake(DpopFake):
    """Takes Bearer and DPoP (RFC 9449 section 7.2): its nonce challenge names both."""

    asked: int = 0

    async def mcp(
        self, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        auth = headers.get("authorization", "")
        if auth.startswith("DPoP ") and verify(headers["dpop"])[1].get("nonce") != "n1":
            self.asked += 1
            www = 'Bearer realm="mcp", DPoP error="use_dpop_nonce", algs="ES256"'
            return 401, [("www-authenticate", www), ("dpop-nonce", "n1")], b""
        return await super().mcp(headers, body)


async def test_a_nonce_challenge_after_a_bearer_challenge(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, BothSchemesFake)
    with trio.fail_after(IO_TIMEOUT):
        assert await list_and_call(fake, oauth(dpop=True)) == "hi"
    assert fake.asked == 1 and len(fake.token_proofs) == 1


# ------------------------------------------------------------------ private_key_jwt


def _es256_pem() -> tuple[str, PublicKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem.decode(), key.public_key()


def _rs256_jwk() -> tuple[dict[str, str], PublicKey]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.private_numbers()
    jwk = {
        "kty": "RSA",
        "kid": "rsa-1",
        "n": _b64int(numbers.public_numbers.n),
        "e": _b64int(numbers.public_numbers.e),
        "d": _b64int(numbers.d),
        "p": _b64int(numbers.p),
        "q": _b64int(numbers.q),
        "dp": _b64int(numbers.dmp1),
        "dq": _b64int(numbers.dmq1),
        "qi": _b64int(numbers.iqmp),
    }
    return jwk, key.public_key()


@pytest.mark.parametrize("kind", ["es256-pem", "rs256-jwk"])
async def test_client_credentials_with_private_key_jwt(nursery: trio.Nursery, kind: str) -> None:
    private: Any
    private, public = _es256_pem() if kind == "es256-pem" else _rs256_jwk()
    fake = await start_dpop(nursery, algs=None, auth_methods=["private_key_jwt"])
    client = ClientCredentials(client_id="svc", private_key=private, issuer="placeholder")
    client = attrs.evolve(client, issuer=fake.issuer)
    auth = OAuth(client=client)  # no on_authorize: the client credentials grant
    assert await list_and_call(fake, auth) == "hi"
    with trio.fail_after(IO_TIMEOUT):
        await auth.authorize(fake.url)  # (a stored token: no second assertion)
    [form] = fake.client_assertions
    assert form["grant_type"] == "client_credentials"
    assert form["client_assertion_type"] == CLIENT_ASSERTION_TYPE
    assert form["client_id"] == "svc" and "client_secret" not in form
    header, claims = verify(form["client_assertion"], public)
    assert header.get("kid") == (None if kind == "es256-pem" else "rsa-1")
    assert claims["iss"] == claims["sub"] == "svc"
    assert claims["aud"] == fake.issuer
    assert claims["exp"] - claims["iat"] == 60
    assert fake.token_auth == [None]  # no Basic header


async def test_each_assertion_has_its_own_jti(nursery: trio.Nursery) -> None:
    private, public = _es256_pem()
    fake = await start_dpop(nursery, algs=None, auth_methods=["private_key_jwt"])
    client = ClientCredentials(client_id="svc", private_key=private, issuer="x")
    auth = OAuth(client=attrs.evolve(client, issuer=fake.issuer))
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=auth) as mcp:
            await mcp.list_tools()
            fake.tokens.clear()  # the server forgets the token: a new grant
            await mcp.list_tools()
    jtis = [verify(f["client_assertion"], public)[1]["jti"] for f in fake.client_assertions]
    assert len(jtis) == 2 and len(set(jtis)) == 2


@pytest.mark.parametrize(
    ("private_key", "alg", "match"),
    [
        ("not a pem", None, "not an unencrypted PEM"),
        ({"kty": "oct", "k": "x"}, None, "not supported"),
        ({"kty": "EC", "crv": "P-384", "d": "AQ"}, None, "P-256"),
        ({"kty": "EC", "crv": "P-256"}, None, "no 'd'"),
        # RFC 7518 section 6: unpadded base64url, nothing a lax decoder would skip or
        # read as standard base64 (each of these made a key before)
        ({"kty": "EC", "crv": "P-256", "d": "AQ=="}, None, "not base64url"),
        ({"kty": "EC", "crv": "P-256", "d": "A+8"}, None, "not base64url"),
        ({"kty": "EC", "crv": "P-256", "d": "AQ!"}, None, "not base64url"),
        (None, "HS256", "not supported"),  # (None: a real P-256 PEM)
        (None, "RS256", "RSA private key"),
    ],
)
def test_an_unusable_private_key_is_refused_up_front(
    private_key: Any, alg: str | None, match: str
) -> None:
    if private_key is None:
        private_key = _es256_pem()[0]
    client = ClientCredentials(
        client_id="c", private_key=private_key, signing_algorithm=alg, issuer="https://a.example"
    )
    with pytest.raises(ValueError, match=match):
        OAuth(client=client)


def test_a_small_rsa_key_is_refused() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="2048"):
        load_signing_key(pem)


# ------------------------------------------------------------------ the crypto extra


def test_without_cryptography_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_crypto(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cryptography" or name.startswith("cryptography."):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    for name in [m for m in sys.modules if m == "cryptography" or m.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "__import__", no_crypto)
    with pytest.raises(ImportError, match=r"pip install 'mcp-trio\[crypto\]'"):
        oauth(dpop=True)
    client = ClientCredentials(client_id="c", private_key="k", issuer="https://a.example")
    with pytest.raises(ImportError, match=r"private_key_jwt.*mcp-trio\[crypto\]"):
        OAuth(client=client)
    # Everything else works without it.
    assert oauth().dpop is False


async def test_the_file_storage_keeps_a_tokens_binding(tmp_path: Path) -> None:
    token = OAuthToken(access_token="t", token_type="DPoP", dpop_jkt="thumb", issued_at=1.0)
    await FileOAuthStorage(tmp_path / "o.json").save_token("https://r", "https://i", token)
    assert await FileOAuthStorage(tmp_path / "o.json").load_token("https://r", "https://i") == token


async def test_the_file_storage_never_writes_a_private_key(tmp_path: Path) -> None:
    client = ClientCredentials(
        client_id="c", private_key="-----PRIVATE-----", key_id="k", issuer="https://i"
    )
    path = tmp_path / "o.json"
    await FileOAuthStorage(path).save_client("https://i", client)
    assert "PRIVATE" not in path.read_text() and "key_id" not in path.read_text()
    loaded = await FileOAuthStorage(path).load_client("https://i")
    assert loaded == ClientCredentials(client_id="c", issuer="https://i")
    bearer = OAuthToken(access_token="t", issued_at=1.0)
    await FileOAuthStorage(path).save_token("https://r", "https://i", bearer)
    assert "dpop_jkt" not in path.read_text()
    assert await FileOAuthStorage(path).load_token("https://r", "https://i") == bearer


def test_a_private_key_client_with_an_assertion_grant_is_refused_up_front() -> None:
    pem, _ = _es256_pem()
    issuer = "https://as.example.com"
    client = ClientCredentials(client_id="c", private_key=pem, issuer=issuer)
    with pytest.raises(ValueError, match=r"private_key_jwt.*workload_identity"):
        OAuth(client=client, workload_identity=WorkloadIdentity(assertion="j", issuer=issuer))
    ema = EnterpriseAuthorization(
        id_token="t",
        idp_issuer="https://idp.example.com",
        idp_client=ClientCredentials(
            client_id="i", client_secret="s", issuer="https://idp.example.com"
        ),
    )
    with pytest.raises(ValueError, match=r"private_key_jwt.*enterprise"):
        OAuth(client=client, enterprise=ema)


def test_client_credentials_with_a_jwk_hash_and_compare_without_the_key() -> None:
    jwk, _ = _rs256_jwk()
    issuer = "https://as.example.com"
    one = ClientCredentials(client_id="c", private_key=jwk, issuer=issuer)
    other = ClientCredentials(client_id="c", private_key={**jwk, "d": "x"}, issuer=issuer)
    assert hash(one) == hash(other) and one == other
    assert one != ClientCredentials(client_id="d", private_key=jwk, issuer=issuer)


def test_a_p384_key_is_refused_as_es256() -> None:
    key = ec.generate_private_key(ec.SECP384R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="P-256"):
        load_signing_key(pem, "ES256")


def test_a_nonce_challenge_to_a_bearer_request_is_not_taken() -> None:
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth.bind("http://127.0.0.1:1/mcp")
    headers = [(b"www-authenticate", b'DPoP error="use_dpop_nonce"'), (b"dpop-nonce", b"n")]
    assert not authorizer.took_nonce(b"Bearer tok", headers)
    assert not authorizer.took_nonce(None, headers)
    assert authorizer.took_nonce(b"DPoP tok", headers)
    # The request sent again carries it; once the server took that request, it is
    # the server's nonce for the next proofs (before, another request could spend it).
    proof = authorizer.proof("POST", b"DPoP tok")
    assert proof is not None and verify(proof.decode())[1]["nonce"] == "n"
    assert auth._dpop_nonces == {}
    authorizer.accepted(b"DPoP tok")
    assert auth._dpop_nonces == {"rs http://127.0.0.1:1": "n"}


def test_a_nonce_is_the_servers_only_once_a_request_carrying_it_was_taken() -> None:
    # Refused for its nonce, the request has not gone again (no proof since): an
    # answer to something else meanwhile does not make that nonce the server's.
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth.bind("http://127.0.0.1:1/mcp")
    headers = [(b"www-authenticate", b'DPoP error="use_dpop_nonce"'), (b"dpop-nonce", b"n")]
    assert authorizer.took_nonce(b"DPoP tok", headers)
    authorizer.accepted(None)
    assert auth._dpop_nonces == {}
    authorizer.proof("POST", b"DPoP tok")  # (then its retry, taken)
    authorizer.accepted(b"DPoP tok")
    assert auth._dpop_nonces == {"rs http://127.0.0.1:1": "n"}


def test_a_refusals_nonce_goes_only_to_its_own_authorizers_proof() -> None:
    # Two clients in one task (two WebSocket clients opened one after the other), the
    # first one's nonce retry not gone yet: the second one's proof, to another server,
    # does not carry the first server's nonce; the first one's retry still does.
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    first, second = auth.bind("http://127.0.0.1:1/mcp"), auth.bind("http://127.0.0.1:2/mcp")
    headers = [(b"www-authenticate", b'DPoP error="use_dpop_nonce"'), (b"dpop-nonce", b"n1")]
    assert first.took_nonce(b"DPoP tok", headers)
    proof = second.proof("GET", b"DPoP tok2")
    assert proof is not None and "nonce" not in verify(proof.decode())[1]
    proof = first.proof("GET", b"DPoP tok")
    assert proof is not None and verify(proof.decode())[1]["nonce"] == "n1"


async def test_a_users_dpop_header_is_refused_with_dpop() -> None:
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    with pytest.raises(ValueError, match="'DPoP' is written by the HTTP transport"):
        async with open_client("http://127.0.0.1:9/mcp", auth=auth, headers={"DPoP": "x"}):
            raise AssertionError("opened")  # pragma: no cover


async def test_a_nonce_challenge_that_reaches_the_flow_is_refused() -> None:
    # The channel retries a nonce challenge itself: one reaching the flow (a request
    # without a proof, or a second one) is a refusal, never a new authorization.
    auth = OAuth(redirect_uri="http://127.0.0.1:9/cb", on_authorize=_never_called, dpop=True)
    authorizer = auth.bind("http://127.0.0.1:1/mcp")
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="keeps asking"):
        await authorizer.challenged(401, BearerChallenge(error="use_dpop_nonce"), None)


@attrs.define
class MethodsFake(DpopFake):
    """Records the proof of every non-POST request to its MCP endpoint."""

    others: list[tuple[str, str | None]] = attrs.field(factory=list)

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method != "POST" and target.partition("?")[0] == "/mcp":
            self.others.append((method, headers.get("dpop")))
        return await super().route(method, target, headers, body)


async def test_the_get_stream_and_delete_prove_their_own_method(nursery: trio.Nursery) -> None:
    fake = await start_fake(nursery, MethodsFake)
    assert await list_and_call(fake, oauth(dpop=True), era="legacy") == "hi"
    methods = {method for method, _ in fake.others}
    assert methods == {"GET", "DELETE"}  # (the legacy session's GET stream, its end)
    for method, proof in fake.others:
        assert proof is not None and verify(proof)[1]["htm"] == method


async def test_a_refresh_never_takes_a_stored_token_of_another_key(
    nursery: trio.Nursery,
) -> None:
    fake = await start_dpop(nursery, refresh_tokens=True)
    storage = InMemoryOAuthStorage()
    now = [1000.0]
    first = oauth(dpop=True, storage=storage, clock=lambda: now[0])
    other = oauth(dpop=True, storage=storage, clock=lambda: now[0])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="modern", auth=first) as client:
            await client.list_tools()
            now[0] += 3000
            # Another process (another key) authorizes and stores its own token.
            assert await list_and_call(fake, other) == "hi"
            now[0] += 1000  # first's token expired, the stored one not
            await client.list_tools()
    assert fake.token_requests[-1]["grant_type"] == "refresh_token"
    for token, proof in fake.mcp_proofs:  # never a token with another key's proof
        assert jwk_thumbprint(verify(proof)[0]["jwk"]) == fake.bound[token]


@attrs.define
class PostsFake(DpopFake):
    """Records the method and headers of every POST to its MCP endpoint."""

    posts: list[tuple[str, dict[str, str]]] = attrs.field(factory=list)

    async def route(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        if method == "POST" and target.partition("?")[0] == "/mcp":
            self.posts.append((str(loads(body).get("method")), dict(headers)))
        return await super().route(method, target, headers, body)


async def test_each_legacy_post_carries_the_current_token_and_its_own_proof(
    nursery: trio.Nursery,
) -> None:
    # A legacy POST's own headers are built once per session id and version
    # (HttpClient._legacy_post); the token and its proof are added per request: a token
    # refreshed in the middle of a session goes out at once, and no proof goes twice.
    fake = await start_fake(nursery, PostsFake, refresh_tokens=True)
    now = [1000.0]
    auth = oauth(dpop=True, clock=lambda: now[0])
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(fake.url, era="legacy", auth=auth) as client:
            await client.list_tools()
            await client.list_tools()
            now[0] += 7200  # expired: refreshed before the next request
            await client.call_tool("echo", {"text": "hi"})
            await client.list_tools()
    assert [r["grant_type"] for r in fake.token_requests] == ["authorization_code", "refresh_token"]
    first, second = fake.bound  # (in the order issued)
    proved = [(m, h) for m, h in fake.posts if h.get("authorization", "").startswith("DPoP ")]
    calls = [(m, h["authorization"][5:]) for m, h in proved if m in ("tools/list", "tools/call")]
    assert calls == [
        ("tools/list", first),
        ("tools/list", first),
        ("tools/call", second),
        ("tools/list", second),
    ]
    jtis = set()
    for _, headers in proved:
        token = headers["authorization"][5:]
        _, claims = verify(headers["dpop"])
        assert claims["htm"] == "POST" and claims["ath"] == access_token_hash(token)
        jtis.add(claims["jti"])
    assert len(jtis) == len(proved)
    # ... with the session's own headers, the same on each POST after initialize.
    session = [h for m, h in proved if m != "initialize"]
    assert len({h["mcp-session-id"] for h in session}) == 1
    assert {h["mcp-protocol-version"] for h in session} == {"2025-11-25"}

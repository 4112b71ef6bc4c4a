"""BearerAuth(dpop=...): the resource server's DPoP checks (RFC 9449 section 7) on
request heads, with real ES256 proofs made by the client side's helpers."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

pytest.importorskip("cryptography")

from mcp_sansio._dpop_proof import DpopNonces
from mcp_sansio._jose import access_token_hash, dpop_proof, jwk_thumbprint, sign_jwt
from mcp_sansio.http import HttpRequest, HttpResponse
from mcp_trio import _http_auth
from mcp_trio._http_auth import BearerAuth, Principal, ProtectedResourceMetadata
from mcp_trio._signing import SigningKey, new_dpop_key

NOW = 1_800_000_000.0
HOST = "mcp.example.com"
KEY = new_dpop_key()
TOKENS = {"bound": jwk_thumbprint(KEY.public_jwk), "plain": None}


async def verify_token(token: str) -> Principal | None:
    if token not in TOKENS:
        return None
    return Principal(subject="alice", dpop_jkt=TOKENS[token])


def auth(**kw: Any) -> BearerAuth:
    return BearerAuth(verify_token=verify_token, clock=lambda: NOW, **kw)


def request(
    token: str | None,
    scheme: str = "DPoP",
    key: SigningKey = KEY,
    *,
    method: str = "POST",
    url: str = f"http://{HOST}/mcp",
    target: str = "/mcp",
    **claims: Any,
) -> HttpRequest:
    headers = [("host", HOST)]
    if token is not None:
        headers.append(("authorization", f"{scheme} {token}"))
    if scheme == "DPoP" and token is not None:
        args: dict[str, Any] = {"now": NOW, "jti": "j", "access_token": token}
        args.update(claims)
        proof = dpop_proof(
            jwk=key.public_jwk, alg=key.alg, sign=key.sign, method=method, url=url, **args
        )
        headers.append(("dpop", proof))
    return HttpRequest(method=method, target=target, headers=headers)


def signed_as(htu: str, target: str = "/mcp", jti: str = "j") -> HttpRequest:
    """A POST of the token ``bound`` to ``target`` with a proof whose ``htu`` claim is
    ``htu`` exactly as written (``dpop_proof`` would normalise it as a client does)."""
    head = {"typ": "dpop+jwt", "alg": KEY.alg, "jwk": dict(KEY.public_jwk)}
    claims = {"jti": jti, "htm": "POST", "htu": htu, "iat": int(NOW)}
    claims["ath"] = access_token_hash("bound")
    headers = [
        ("host", HOST),
        ("authorization", "DPoP bound"),
        ("dpop", sign_jwt(head, claims, KEY.sign)),
    ]
    return HttpRequest(method="POST", target=target, headers=headers)


def challenge(found: Principal | HttpResponse) -> tuple[int, list[str]]:
    assert isinstance(found, HttpResponse)
    return found.status, [v.decode() for n, v in found.headers if n == b"www-authenticate"]


async def test_required_accepts_a_bound_token_with_its_proof() -> None:
    found = await auth(dpop="required")(request("bound", target="/mcp?x=1"))
    assert found == Principal(subject="alice")


async def test_required_refuses_bearer_and_missing_credentials() -> None:
    status, [www] = challenge(await auth(dpop="required")(request("plain", "Bearer")))
    assert status == 401 and www.startswith('DPoP algs="ES256 RS256"')
    status, [www] = challenge(await auth(dpop="required")(request(None)))
    assert (status, www) == (401, 'DPoP algs="ES256 RS256"')


async def test_allowed_takes_bearer_but_not_a_bound_token_as_bearer() -> None:
    assert isinstance(await auth(dpop="allowed")(request("plain", "Bearer")), Principal)
    status, wwws = challenge(await auth(dpop="allowed")(request("bound", "Bearer")))
    assert status == 401 and 'error="invalid_token"' in wwws[0] and wwws[1] == "Bearer"


async def test_a_stolen_token_with_another_key_is_refused() -> None:
    status, [www] = challenge(await auth(dpop="required")(request("bound", key=new_dpop_key())))
    assert status == 401 and 'error="invalid_token"' in www
    # an unbound token presented as DPoP is no better
    status, [www] = challenge(await auth(dpop="required")(request("plain")))
    assert 'error="invalid_token"' in www


@pytest.mark.parametrize(
    ("kw", "what"),
    [
        ({"method": "GET"}, "htm"),
        ({"url": "http://other.example/mcp"}, "htu"),
        ({"now": NOW - 301}, "iat"),
        ({"access_token": "other"}, "ath"),
    ],
)
async def test_a_bad_proof_is_invalid_dpop_proof(kw: dict[str, Any], what: str) -> None:
    req = request("bound", **kw)
    if "method" in kw:
        req = HttpRequest(method="POST", target="/mcp", headers=req.headers)
    status, [www] = challenge(await auth(dpop="required")(req))
    assert status == 401 and 'error="invalid_dpop_proof"' in www and what in www


async def test_two_proofs_or_none_are_refused() -> None:
    req = request("bound")
    twice = HttpRequest(method="POST", target="/mcp", headers=[*req.headers, req.headers[-1]])
    status, [www] = challenge(await auth(dpop="required")(twice))
    assert status == 401
    assert 'error="invalid_dpop_proof"' in www and "several" in www
    bare = HttpRequest(method="POST", target="/mcp", headers=req.headers[:-1])
    _, [www] = challenge(await auth(dpop="required")(bare))
    assert 'error="invalid_dpop_proof"' in www


async def test_a_malformed_authorization_is_400() -> None:
    bad = HttpRequest(method="POST", target="/mcp", headers=[("authorization", "DPoP a b")])
    status, _ = challenge(await auth(dpop="required")(bad))
    assert status == 400


async def test_a_server_nonce_is_required_then_accepted() -> None:
    nonces = DpopNonces(key=b"n" * 32)
    a = auth(dpop="required", dpop_nonces=nonces)
    found = await a(request("bound"))
    assert isinstance(found, HttpResponse) and found.status == 401
    assert 'error="use_dpop_nonce"' in challenge(found)[1][0]
    nonce = found.header("dpop-nonce")
    assert nonce is not None and nonces.valid(nonce, NOW)
    assert isinstance(await a(request("bound", nonce=nonce)), Principal)


async def test_the_websocket_handshake_accepts_both_forms() -> None:
    a = auth(dpop="required", dpop_origin="https://mcp.example.com")
    for url in ("wss://mcp.example.com/ws", "https://mcp.example.com/ws"):
        req = request("bound", method="GET", url=url, target="/ws")
        assert isinstance(await a(req), Principal)


async def test_off_keeps_todays_answer_to_dpop() -> None:
    found = await auth()(request("bound"))
    assert isinstance(found, HttpResponse) and found.status == 401
    assert challenge(found)[1] == ["Bearer"]


async def test_the_replay_cache_refuses_a_proof_used_twice_and_is_bounded() -> None:
    a = auth(dpop="required", dpop_replay_cache=2)
    assert isinstance(await a(request("bound", jti="one")), Principal)
    status, [www] = challenge(await a(request("bound", jti="one")))
    assert status == 401 and "used before" in www
    assert isinstance(await a(request("bound", jti="two")), Principal)
    assert isinstance(await a(request("bound", jti="three")), Principal)
    assert len(a._seen) == 2  # past the bound, "one" was forgotten
    assert isinstance(await a(request("bound", jti="one")), Principal)
    # without a cache a replay within the window passes (the stateless default)
    b = auth(dpop="required")
    assert isinstance(await b(request("bound", jti="one")), Principal)
    assert isinstance(await b(request("bound", jti="one")), Principal)


async def test_a_proof_racing_itself_through_verify_token_is_accepted_once() -> None:
    # Both copies pass the replay cache's first look before either is recorded: the
    # token check (verify_token, a checkpoint) holds each until both are inside it.
    # The second look, after it, lets exactly one through.
    inside = 0
    both_inside = trio.Event()

    async def slow_verify(token: str) -> Principal | None:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_inside.set()
        await both_inside.wait()
        return await verify_token(token)

    a = BearerAuth(
        verify_token=slow_verify, clock=lambda: NOW, dpop="required", dpop_replay_cache=4
    )
    same = request("bound", jti="raced")
    found: list[Principal | HttpResponse] = []

    async def send() -> None:
        found.append(await a(same))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            nursery.start_soon(send)
    assert inside == 2  # (both went past the first look)
    [accepted] = [f for f in found if isinstance(f, Principal)]
    assert accepted.subject == "alice"
    [(status, [www])] = [challenge(f) for f in found if isinstance(f, HttpResponse)]
    assert status == 401 and "used before" in www
    assert len(a._seen) == 1


def clocked(**kw: Any) -> tuple[BearerAuth, list[float]]:
    clock = [NOW]
    return BearerAuth(verify_token=verify_token, clock=lambda: clock[0], **kw), clock


async def test_an_unparsable_host_is_400_not_500() -> None:
    for host in ("[", "h:abc", "h:99999"):
        req = request("bound")
        headers: list[tuple[bytes | str, bytes | str]] = [("host", host), *req.headers[1:]]
        found = await auth(dpop="required")(
            HttpRequest(method="POST", target="/mcp", headers=headers)
        )
        status, [www] = challenge(found)
        assert status == 400 and 'error="invalid_request"' in www and "Host" in www


async def test_a_host_that_would_steer_the_htu_to_another_path_is_refused() -> None:
    # A proof signed for /other, replayed at /mcp with a Host that pushes "/mcp" into
    # a fragment, a query or userinfo (all ignored by the htu comparison).
    for host in (f"{HOST}/other#", f"{HOST}/other?", f"u@{HOST}", f"{HOST}/other/x/.."):
        req = signed_as(f"http://{HOST}/other")
        headers: list[tuple[bytes | str, bytes | str]] = [("host", host), *req.headers[1:]]
        found = await auth(dpop="required")(
            HttpRequest(method="POST", target="/mcp", headers=headers)
        )
        status, [www] = challenge(found)
        assert status == 400 and 'error="invalid_request"' in www and "Host" in www, host


async def test_a_host_with_a_port_or_an_ip_literal_builds_the_htu() -> None:
    for host in (f"{HOST}:8080", "my_host.local", "[::1]:8000", "127.0.0.1"):
        req = signed_as(f"http://{host}/mcp")
        headers: list[tuple[bytes | str, bytes | str]] = [("host", host), *req.headers[1:]]
        found = await auth(dpop="required")(
            HttpRequest(method="POST", target="/mcp", headers=headers)
        )
        assert isinstance(found, Principal), (host, found)


def _sent_as(req: HttpRequest, target: str, host: str) -> HttpRequest:
    """``req`` with ``target`` and the ``Host`` header ``host``."""
    headers: list[tuple[bytes | str, bytes | str]] = [("host", host), *req.headers[1:]]
    return HttpRequest(method="POST", target=target, headers=headers)


@pytest.mark.parametrize("scheme", ["http", "https", "HTTPS"])
async def test_an_absolute_form_target_is_the_htu_whatever_the_host_header(scheme: str) -> None:
    # RFC 9112 section 3.2.2: given the absolute form, a server "MUST ignore the
    # received Host header field": its 421 check vets the target's authority, and the
    # htu is the target URI (RFC 9110 section 7.1), scheme included.
    target = f"{scheme}://{HOST}/mcp"
    uri = f"{scheme.lower()}://{HOST}/mcp"
    # A proof signed for another origin, with a Host header naming it: refused.
    req = _sent_as(signed_as("http://evil.example/mcp"), target, "evil.example")
    assert req.host == HOST  # (what the 421 check vets)
    status, [www] = challenge(await auth(dpop="required")(req))
    assert status == 401 and 'error="invalid_dpop_proof"' in www
    # The target's own proof, through a proxy whose Host header is its own: taken.
    found = await auth(dpop="required")(_sent_as(signed_as(uri), target, "proxy.internal"))
    assert isinstance(found, Principal)
    # (The other scheme's is not the target URI.)
    other = f"{'http' if uri.startswith('https') else 'https'}://{HOST}/mcp"
    found = await auth(dpop="required")(_sent_as(signed_as(other), target, HOST))
    assert isinstance(found, HttpResponse) and found.status == 401


async def test_an_unparsable_htu_is_invalid_dpop_proof() -> None:
    req = request("bound")
    head = {"typ": "dpop+jwt", "alg": KEY.alg, "jwk": dict(KEY.public_jwk)}
    for bad in ("http://[", f"http://{HOST}:99999/mcp"):
        claims = {"jti": "j", "htm": "POST", "htu": bad, "iat": int(NOW)}
        claims["ath"] = access_token_hash("bound")
        headers: list[tuple[bytes | str, bytes | str]] = [*req.headers[:-1]]
        headers.append(("dpop", sign_jwt(head, claims, KEY.sign)))
        found = await auth(dpop="required")(
            HttpRequest(method="POST", target="/mcp", headers=headers)
        )
        status, [www] = challenge(found)
        assert status == 401 and 'error="invalid_dpop_proof"' in www and "htu" in www


async def test_an_equivalent_htu_written_differently_is_accepted() -> None:
    # RFC 9449 section 4.3 check 9, RFC 3986 section 6.2.2: case, default port and
    # percent-encoding of unreserved characters do not make another URI.
    a = auth(dpop="required", dpop_origin="HTTPS://MCP.Example.com:443")
    for i, (signed, target) in enumerate(
        [
            ("https://mcp.example.com/%6Dcp", "/mcp"),
            ("HTTPS://mcp.EXAMPLE.com:443/m%63p?x=%41", "/mcp"),
            ("https://mcp.example.com/mcp", "/%6dcp"),
            ("https://mcp.example.com/a%2fb", "/a%2Fb"),
        ]
    ):
        found = await a(signed_as(signed, target, jti=f"j{i}"))
        assert isinstance(found, Principal), (signed, target)
    found = await a(signed_as("https://mcp.example.com/a/b", "/a%2Fb"))
    assert challenge(found)[0] == 401  # (a reserved "/" escaped is another path)


async def test_the_clients_htu_with_its_escapes_as_sent_is_accepted() -> None:
    # The client signs the path as it sends it (escapes untouched); the server
    # normalises both that and its request's, so either spelling matches.
    a = auth(dpop="required", dpop_origin=f"https://{HOST}")
    url = f"https://{HOST}/%7Euser/m%63p"
    for i, target in enumerate(["/%7Euser/m%63p", "/~user/mcp", "/%7euser/%6D%63p?q=1"]):
        found = await a(request("bound", url=url, target=target, jti=f"j{i}"))
        assert isinstance(found, Principal), target
    status, [www] = challenge(await a(request("bound", url=url, target="/~user/mc", jti="x")))
    assert status == 401 and "htu" in www


async def test_an_htu_with_userinfo_is_refused() -> None:
    # RFC 9110 section 4.2.4: http(s) URIs have no userinfo; it is not dropped.
    a = auth(dpop="required", dpop_origin=f"https://{HOST}")
    for i, signed in enumerate(
        [f"https://evil@{HOST}/mcp", f"https://u:p@{HOST}/mcp", f"https://{HOST}/mcp"]
    ):
        found = await a(signed_as(signed, jti=f"j{i}"))
        if "@" not in signed:
            assert isinstance(found, Principal)
            continue
        status, [www] = challenge(found)
        assert status == 401 and 'error="invalid_dpop_proof"' in www and "htu" in www


@pytest.mark.parametrize(
    "origin",
    [
        f"https://{HOST}/",
        f"https://{HOST}/base/",
        f"https://{HOST}?x",
        f"https://{HOST}#f",
        f"https://user@{HOST}",
        HOST,
    ],
)
def test_a_dpop_origin_that_is_no_origin_is_refused_at_construction(origin: str) -> None:
    # Accepted silently before, then every proof was refused (https://h//mcp) or the
    # query was dropped without a word.
    with pytest.raises(ValueError, match=r"origin|userinfo"):
        auth(dpop="required", dpop_origin=origin)


async def test_a_dpop_origin_with_a_path_prefix_expects_it_in_the_htu() -> None:
    a = auth(dpop="required", dpop_origin=f"https://{HOST}/base")
    found = await a(request("bound", url=f"https://{HOST}/base/mcp", target="/mcp"))
    assert isinstance(found, Principal)
    found = await a(request("bound", url=f"https://{HOST}/mcp", target="/mcp", jti="k"))
    assert challenge(found)[0] == 401


async def test_a_replayed_proof_costs_no_token_check() -> None:
    # The replay cache's first look comes before verify_token: a proof it knows is
    # refused without a call to the deployer's verifier (which may be remote).
    calls: list[str] = []

    async def counting_verify(token: str) -> Principal | None:
        calls.append(token)
        return await verify_token(token)

    a = BearerAuth(
        verify_token=counting_verify, clock=lambda: NOW, dpop="required", dpop_replay_cache=4
    )
    assert isinstance(await a(request("bound", jti="once")), Principal)
    assert calls == ["bound"]
    status, [www] = challenge(await a(request("bound", jti="once")))
    assert status == 401 and "used before" in www
    assert calls == ["bound"]


async def test_junk_tokens_cannot_flush_the_replay_cache() -> None:
    a = auth(dpop="required", dpop_replay_cache=2)
    assert isinstance(await a(request("bound", jti="victim")), Principal)
    stranger = new_dpop_key()
    for i in range(5):  # self-signed proofs, junk or stolen tokens: never remembered
        found = await a(request("junk", key=stranger, jti=f"e{i}"))
        assert 'error="invalid_token"' in challenge(found)[1][0]
        found = await a(request("bound", key=stranger, jti=f"s{i}"))
        assert 'error="invalid_token"' in challenge(found)[1][0]
    assert list(a._seen) == [(TOKENS["bound"], "victim")]
    status, [www] = challenge(await a(request("bound", jti="victim")))
    assert status == 401 and "used before" in www


async def test_the_replay_cache_remembers_twice_the_window() -> None:
    a, clock = clocked(dpop="required", dpop_replay_cache=10)
    # a proof dated at the window's far end stays acceptable for 2 x window
    assert isinstance(await a(request("bound", jti="one", now=NOW + 300)), Principal)
    for at in (NOW + 300, NOW + 599):
        clock[0] = at
        status, [www] = challenge(await a(request("bound", jti="one", now=NOW + 300)))
        assert status == 401 and "used before" in www
    clock[0] = NOW + 601  # expired: forgotten by the next proof remembered
    assert isinstance(await a(request("bound", jti="two", now=NOW + 601)), Principal)
    assert list(a._seen) == [(TOKENS["bound"], "two")]


async def test_the_tokenless_refusal_carries_a_fresh_nonce() -> None:
    nonces = DpopNonces(key=b"n" * 32)
    a, clock = clocked(dpop="required", dpop_nonces=nonces)
    clock[0] = NOW + 3600
    for req in (request(None), request("plain", "Bearer")):
        found = await a(req)
        assert isinstance(found, HttpResponse) and found.status == 401
        nonce = found.header("dpop-nonce")
        assert nonce is not None and nonces.valid(nonce, clock[0])


@pytest.mark.parametrize("mode", ["required", "allowed"])
async def test_a_refused_scope_gets_a_dpop_challenge(mode: Any) -> None:
    a = auth(dpop=mode, required_scopes=("admin",))
    status, wwws = challenge(await a(request("bound")))
    assert status == 403
    assert wwws[0].startswith('DPoP algs="ES256 RS256", error="insufficient_scope"')
    assert 'scope="admin"' in wwws[0]
    if mode == "allowed":
        assert wwws[1] == 'Bearer error="insufficient_scope", scope="admin"'
        status, wwws = challenge(await a(request("plain", "Bearer")))
        assert status == 403 and len(wwws) == 2
    else:
        assert len(wwws) == 1


def test_advertise_fills_in_the_dpop_metadata() -> None:
    # RFC 9728 section 2, for the document serve_http serves.
    metadata = ProtectedResourceMetadata(
        resource="https://mcp.example.com/mcp", authorization_servers=["https://a.example"]
    )
    assert auth().advertise(metadata) is metadata
    allowed = auth(dpop="allowed", dpop_algs=("ES256",)).advertise(metadata).document()
    assert allowed["dpop_signing_alg_values_supported"] == ["ES256"]
    assert "dpop_bound_access_tokens_required" not in allowed
    required = auth(dpop="required").advertise(metadata).document()
    assert required["dpop_signing_alg_values_supported"] == ["ES256", "RS256"]
    assert required["dpop_bound_access_tokens_required"] is True
    # What the metadata says already stays; extra= overrides either.
    own = attrs.evolve(
        metadata,
        dpop_signing_alg_values_supported=["RS256"],
        dpop_bound_access_tokens_required=False,
    )
    kept = auth(dpop="required").advertise(own).document()
    assert kept["dpop_signing_alg_values_supported"] == ["RS256"]
    assert kept["dpop_bound_access_tokens_required"] is False
    extra = attrs.evolve(metadata, extra={"dpop_bound_access_tokens_required": False})
    assert (
        auth(dpop="required").advertise(extra).document()["dpop_bound_access_tokens_required"]
        is False
    )


@pytest.mark.parametrize("mode", ["allowed", "required"])
def test_a_scope_no_challenge_can_carry_is_refused_at_construction(mode: Any) -> None:
    # As with dpop="off": a ValueError now, not a broken WWW-Authenticate header later.
    with pytest.raises(ValueError, match="scope token"):
        auth(dpop=mode, required_scopes={'a"b'})


async def test_dpop_origin_is_parsed_once_and_checked_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def counted(name: str) -> Any:
        real = getattr(_http_auth, name)

        def wrapper(*args: Any) -> Any:
            calls.append(name)
            return real(*args)

        return wrapper

    for name in ("dpop_htu_origins", "dpop_htu_candidates"):
        monkeypatch.setattr(_http_auth, name, counted(name))
    a = auth(dpop="required", dpop_origin=f"https://{HOST}")
    for jti in ("a", "b", "c"):
        found = await a(request("bound", url=f"https://{HOST}/mcp", jti=jti))
        assert isinstance(found, Principal)
    assert calls == ["dpop_htu_origins"]
    with pytest.raises(ValueError):
        auth(dpop="required", dpop_origin="https://[")
    auth(dpop="off", dpop_origin="https://[")  # (not looked at without DPoP)

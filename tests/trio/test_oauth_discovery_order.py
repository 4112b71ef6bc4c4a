"""What the OAuth client reads before it authorizes: a ``WWW-Authenticate`` header with a
``DPoP`` challenge before the ``Bearer`` one, authorization server metadata behind
endpoints that fail or answer with something else, and PKCE support checked before
anything is sent to the authorization server. The fakes are ``test_oauth``'s, with a
few answers changed."""

from __future__ import annotations

from functools import partial
from typing import Any

import attrs
import pytest
import trio

from mcp_sansio._json import dumps
from mcp_trio import ClientCredentials, McpError, OAuth, OAuthError

from .oauth_support import oauth
from .test_http_support import IO_TIMEOUT, App, start_server
from .test_oauth import Fake, list_and_call

RFC8414 = "/.well-known/oauth-authorization-server/tenant"
OIDC_INSERT = "/.well-known/openid-configuration/tenant"
OIDC_APPEND = "/tenant/.well-known/openid-configuration"

Answer = tuple[int, list[tuple[str, str]], bytes]
HTML: Answer = (200, [("content-type", "text/html")], b"<html>app shell</html>")
FAILED: Answer = (500, [], b"")
ARRAY: Answer = (200, [("content-type", "application/json")], b"[1]")
MISSING: Answer = (404, [], b"")


@attrs.define
class Changed(Fake):
    """:class:`Fake`, but the authorization server metadata is at ``metadata_at``,
    some GETs get the answers of ``answers`` (by path), and ``dpop_first`` puts a bare
    ``DPoP`` challenge before the server's ``Bearer`` one."""

    metadata_at: str = RFC8414
    answers: dict[str, Answer] = attrs.field(factory=dict)
    dpop_first: bool = False

    async def route(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Answer:
        path = target.partition("?")[0]
        if method == "GET" and path in self.answers:
            self.paths.append(f"{method} {path}")
            return self.answers[path]
        if method == "GET" and path == self.metadata_at:
            self.paths.append(f"{method} {path}")
            target = "/.well-known/oauth-authorization-server" + self.as_path
            return await super().route(method, target, headers, body)
        if method == "GET" and path == "/.well-known/oauth-authorization-server" + self.as_path:
            return MISSING  # (only at metadata_at)
        return await super().route(method, target, headers, body)

    async def mcp(self, headers: dict[str, str], body: bytes) -> Answer:
        status, out, answer = await super().mcp(headers, body)
        if self.dpop_first:
            out = [(k, 'DPoP algs="ES256", ' + v if k == "www-authenticate" else v) for k, v in out]
        return status, out, answer


async def start_changed(nursery: trio.Nursery, **knobs: Any) -> Changed:
    upstream = await start_server(nursery, App())
    fake = Changed(upstream=upstream.url, as_path="/tenant", **knobs)
    listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
    fake.base = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    return fake


def as_metadata(fake: Fake, **changes: Any) -> Answer:
    meta: dict[str, Any] = {
        "issuer": fake.issuer,
        "authorization_endpoint": f"{fake.issuer}/authorize",
        "token_endpoint": f"{fake.issuer}/token",
        "registration_endpoint": f"{fake.issuer}/register",
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_post", "none"],
        "authorization_response_iss_parameter_supported": True,
    }
    meta.update(changes)
    return (
        200,
        [("content-type", "application/json")],
        dumps({k: v for k, v in meta.items() if v is not None}),
    )


# ------------------------------------------------------------------ Bearer after DPoP


async def test_a_bearer_challenge_after_a_bare_dpop_one_is_followed(
    nursery: trio.Nursery,
) -> None:
    # The metadata is only where the challenge says, and the challenge's scope (not the
    # metadata's) is asked for.
    fake = await start_changed(
        nursery, dpop_first=True, prm_path="/custom-prm", prm_scopes=["other"]
    )
    assert await list_and_call(fake, oauth()) == "hi"
    assert "GET /custom-prm" in fake.paths
    [authorization] = fake.authorizations
    assert authorization["scope"] == "read"


async def test_a_step_up_behind_a_bare_dpop_challenge_is_one(nursery: trio.Nursery) -> None:
    fake = await start_changed(nursery, dpop_first=True, call_scope="write")
    assert await list_and_call(fake, oauth()) == "hi"
    first, step_up = fake.authorizations
    assert first["scope"] == "read"
    assert set(step_up["scope"].split()) == {"read", "write"}


# ------------------------------------------------------------------ AS metadata discovery


@pytest.mark.parametrize(
    "first", [FAILED, HTML, ARRAY, MISSING], ids=["500", "html", "array", "404"]
)
async def test_a_failing_metadata_endpoint_is_passed_over_for_the_next(
    nursery: trio.Nursery, first: Answer
) -> None:
    fake = await start_changed(nursery, metadata_at=OIDC_INSERT, answers={RFC8414: first})
    assert await list_and_call(fake, oauth()) == "hi"
    tried = [
        p for p in fake.paths if p.startswith(("GET /.well-known/oauth-a", "GET /.well-known/op"))
    ]
    assert tried[:2] == [f"GET {RFC8414}", f"GET {OIDC_INSERT}"]


async def test_the_last_endpoint_is_tried_too(nursery: trio.Nursery) -> None:
    fake = await start_changed(
        nursery, metadata_at=OIDC_APPEND, answers={RFC8414: FAILED, OIDC_INSERT: HTML}
    )
    assert await list_and_call(fake, oauth()) == "hi"
    assert len(fake.authorizations) == 1


async def test_metadata_for_another_issuer_is_refused_without_trying_the_next(
    nursery: trio.Nursery,
) -> None:
    fake = await start_changed(nursery, metadata_at=OIDC_INSERT)
    fake.answers[RFC8414] = as_metadata(fake, issuer="https://attacker.example")
    with pytest.raises(McpError, match="names issuer"):
        await list_and_call(fake, oauth())
    assert f"GET {OIDC_INSERT}" not in fake.paths
    assert not fake.registrations and not fake.authorizations


async def test_when_none_answers_the_error_names_every_url_and_why(
    nursery: trio.Nursery,
) -> None:
    fake = await start_changed(
        nursery,
        metadata_at="/nowhere",
        answers={RFC8414: FAILED, OIDC_INSERT: HTML},
    )
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError) as caught:
        await oauth().authorize(fake.url)
    message = str(caught.value)
    assert f"'{fake.base}{RFC8414}': 500" in message
    assert f"'{fake.base}{OIDC_INSERT}': 200 but not a JSON object" in message
    assert f"'{fake.base}{OIDC_APPEND}': 404" in message
    assert not fake.registrations


async def test_the_2025_03_26_default_endpoints_stand_in_for_pages_that_are_no_metadata(
    nursery: trio.Nursery,
) -> None:
    # A 2025-03-26 server (no protected-resource metadata) whose origin answers every
    # path with its application's page: no metadata, so the default endpoints.
    root = "/.well-known/oauth-authorization-server"
    fake = await start_changed(
        nursery,
        no_prm=True,
        metadata_at="/nowhere",
        answers={root: HTML, "/.well-known/openid-configuration": HTML},
    )
    fake.as_path = ""  # (the default endpoints are at the origin)
    assert await list_and_call(fake, oauth(), era="legacy") == "hi"
    assert fake.authorizations[0]["resource"] == fake.url
    # A failing endpoint is no absence of metadata: no default endpoints then.
    failing = await start_changed(
        nursery, no_prm=True, metadata_at="/nowhere", answers={root: FAILED}
    )
    failing.as_path = ""
    with pytest.raises(McpError, match=": 500"):
        await list_and_call(failing, oauth(), era="legacy")
    assert not failing.registrations and not failing.authorizations


# ------------------------------------------------------------------ PKCE before registering


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"code_challenge_methods_supported": None}, "PKCE S256"),
        ({"code_challenge_methods_supported": ["plain"]}, "PKCE S256"),
        ({"authorization_endpoint": None}, "no authorization_endpoint"),
    ],
)
async def test_pkce_support_is_checked_before_registering(
    nursery: trio.Nursery, changes: dict[str, Any], message: str
) -> None:
    fake = await start_changed(nursery)
    fake.answers[RFC8414] = as_metadata(fake, **changes)
    with pytest.raises(McpError, match=message):
        await list_and_call(fake, oauth())
    assert "POST /tenant/register" not in fake.paths
    assert not fake.registrations and not fake.authorizations


async def test_grants_without_pkce_do_not_need_it(nursery: trio.Nursery) -> None:
    fake = await start_changed(nursery)
    fake.answers[RFC8414] = as_metadata(
        fake, code_challenge_methods_supported=None, authorization_endpoint=None
    )
    client = ClientCredentials(client_id="machine", client_secret="s3cr3t", issuer=fake.issuer)
    assert await list_and_call(fake, OAuth(client=client)) == "hi"
    [request] = fake.token_requests
    assert request["grant_type"] == "client_credentials"

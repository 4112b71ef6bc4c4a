"""``run_authenticate`` refuses a principal whose token has expired by the very clock
``expiry_clock`` names for its hook (a ``BearerAuth``'s own, else the wall clock): the
server's two questions about a token's life never disagree."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import pytest

from mcp_sansio.http import HttpRequest, HttpResponse
from mcp_trio import BearerAuth, Principal
from mcp_trio._http_auth import expiry_clock, run_authenticate

REQUEST = HttpRequest(method="POST", target="/mcp", headers=((b"authorization", b"Bearer t"),))
Hook = Callable[[HttpRequest], Awaitable[Principal | HttpResponse]]


def hooks(expires_at: float) -> list[Hook]:
    principal = Principal(subject="dave", expires_at=expires_at)

    async def plain(request: HttpRequest) -> Principal:
        return principal

    async def verify(token: str) -> Principal:
        return principal

    return [
        plain,
        BearerAuth(verify_token=verify),
        BearerAuth(verify_token=verify, clock=lambda: 999.0),  # (long before the wall clock)
        BearerAuth(verify_token=verify, clock=lambda: 1e12),  # (long after)
    ]


@pytest.mark.parametrize("expires_at", [1.0, 999.0, 1000.0, time.time() + 3600, 2e12])
@pytest.mark.parametrize("which", range(4))
async def test_a_token_is_refused_when_its_hook_s_expiry_clock_says_it_expired(
    expires_at: float, which: int
) -> None:
    hook = hooks(expires_at)[which]
    found = await run_authenticate(hook, REQUEST, 10.0, "POST /mcp")
    expired = expires_at <= expiry_clock(hook)()
    assert isinstance(found, HttpResponse) is expired
    if expired:
        assert isinstance(found, HttpResponse) and found.status == 401
        challenge = b" ".join(v for k, v in found.headers if k == b"www-authenticate")
        assert b'error="invalid_token"' in challenge

"""A bearer token the server finds malformed (an inner space, a character that is not
ASCII: a token pasted with junk) is answered ``400`` with ``WWW-Authenticate: Bearer
error="invalid_request"`` (RFC 6750 section 3.1): the Trio and the blocking clients
name that challenge. Before, the bare ``400`` got the hint for a WebSocket server
("if it serves WebSocket, connect to ws://..."), which sent the user the wrong way."""

from __future__ import annotations

from functools import partial

import pytest
import trio

from mcp_sansio import ErrorData
from mcp_trio import (
    BearerAuth,
    BlockingClient,
    HandshakeFailed,
    Principal,
    ProtectedResourceMetadata,
    Server,
    open_client,
)
from mcp_trio._errors_base import name_the_endpoint

from .test_http_support import IO_TIMEOUT


async def _verify(token: str) -> Principal | None:
    return Principal(subject="alice") if token == "good" else None


def _check(message: str) -> None:
    assert "WebSocket" not in message
    named = "status 400: the server refused the credentials sent (WWW-Authenticate: Bearer"
    assert f'{named} error="invalid_request"' in message


@pytest.mark.parametrize("token", ["goo d", "goodé"])
async def test_a_malformed_token_is_named_by_its_challenge(
    nursery: trio.Nursery, token: str
) -> None:
    metadata = ProtectedResourceMetadata(
        resource="http://127.0.0.1/mcp", authorization_servers=["http://127.0.0.1:9"]
    )
    auth = BearerAuth(verify_token=_verify, resource_metadata_url=metadata.url)
    handle = await nursery.start(partial(Server("s").serve_http, port=0, authenticate=auth))
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(HandshakeFailed) as refused:
            async with open_client(handle.url, headers={"Authorization": f"Bearer {token}"}):
                pytest.fail("opened")  # pragma: no cover
        _check(refused.value.message)

        def blocking() -> str:
            with pytest.raises(HandshakeFailed) as refused:
                BlockingClient.http(handle.url, bearer=token).close()
            return refused.value.message

        _check(await trio.to_thread.run_sync(blocking))


def test_a_400_with_a_challenge_gets_no_websocket_hint() -> None:
    # (However the core words it: a 400 that carries a challenge is about credentials.)
    data = {"httpStatus": 400, "wwwAuthenticate": 'Bearer error="invalid_request"'}
    failed = HandshakeFailed(ErrorData(code=-32603, message="HTTP: status 400", data=data))
    name_the_endpoint(failed, "http://127.0.0.1:1/mcp")
    assert failed.error.message == "HTTP: status 400"

"""A modern ``subscriptions/listen`` over Streamable HTTP must not outlive its token: the
server answers it with the error ``401 invalid_token`` at ``Principal.expires_at``, and
our client listens again with the same filter, once per expiry, never in a loop."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_sansio.http import TOKEN_EXPIRED_CODE
from mcp_trio import (
    BearerAuth,
    HttpServerConfig,
    McpError,
    Principal,
    ProtectedResourceMetadata,
    Server,
    _client_subscriptions,
    open_client,
)

from .test_http_support import IO_TIMEOUT, RawConnection

MODERN = "2026-07-28"
METADATA = ProtectedResourceMetadata(
    resource="https://mcp.example.com/mcp", authorization_servers=["https://auth.example.com"]
)


class Tokens:
    """A verifier whose tokens last ``life`` seconds from each check (``None``: no
    expiry), and refuse everything once ``revoked``; it counts the listens it saw."""

    def __init__(self, life: float | None) -> None:
        self.life = life
        self.revoked = False
        self.checks = 0

    async def __call__(self, token: str) -> Principal | None:
        await trio.lowlevel.checkpoint()
        self.checks += 1
        if self.revoked:
            return None
        expires = None if self.life is None else time.time() + self.life
        return Principal(subject="alice", expires_at=expires)


async def _serve(nursery: trio.Nursery, tokens: Tokens) -> tuple[Server, Any]:
    server = Server("watched")

    @server.tool()
    async def noop() -> str:
        return "ok"

    auth = BearerAuth(verify_token=tokens, resource_metadata_url=METADATA.url)
    handle = await nursery.start(
        partial(
            server.serve_http,
            port=0,
            authenticate=auth,
            http_config=HttpServerConfig(resource_metadata=METADATA),
        )
    )
    return server, handle


async def _until_end(conn: RawConnection) -> bytes:
    body = bytearray()
    while not isinstance(event := await conn.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data), event
        body += event.data
    return bytes(body)


def _listen_body(rid: int = 7) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta}
    return dumps({"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params})


async def test_the_server_answers_a_listen_with_401_when_its_token_expires(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=60.0)
    server, handle = await _serve(nursery, tokens)
    with trio.fail_after(IO_TIMEOUT + 120):
        conn = await RawConnection.open(handle.port)
        started = trio.current_time()
        headers = (
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "subscriptions/listen"),
            ("authorization", "Bearer short"),
        )
        await conn.send("POST", headers=headers, body=_listen_body())
        assert (await conn.head()).status_code == 200
        body = await _until_end(conn)
        assert 59 < trio.current_time() - started <= 60  # (wall time moved a little)
        messages = [loads(line[5:]) for line in body.split(b"\n") if line.startswith(b"data:")]
        ack, answer = [m for m in messages if m]
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert answer["id"] == 7 and "result" not in answer
        assert answer["error"]["code"] == TOKEN_EXPIRED_CODE == 401
        assert answer["error"]["data"] == {
            "error": "invalid_token",
            "resource_metadata": METADATA.url,
            "io.modelcontextprotocol/subscriptionId": 7,
        }
        await conn.aclose()
        assert server is not None


async def test_a_listen_with_a_token_that_never_expires_stays_open(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=None)
    _, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 1000):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
            client.subscribe(tools=True) as sub,
        ):
            await trio.sleep(900)
            assert not sub.ended and not handle._endpoint._releases


async def test_the_client_listens_again_once_per_expiry(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=60.0)
    server, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 1000):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
            client.subscribe(tools=True) as sub,
        ):
            first = sub.subscription_id
            checks = tokens.checks
            await trio.sleep(150)  # two expiries: two new listens, the same subscription
            assert not sub.ended
            assert tokens.checks == checks + 2
            assert sub.subscription_id not in (None, first)
            server.add_tool(lambda: "x", name="added")  # reaches the third listen
            with trio.fail_after(5):
                note = await sub.receive()
            assert note.method == "notifications/tools/list_changed"
            # Revoked: the next expiry's new listen is refused (401): the iteration
            # ends with that failure, after exactly one attempt.
            tokens.revoked = True
            checks = tokens.checks
            with pytest.raises(McpError, match="status 401") as failed:
                async for _ in sub:
                    pass
            assert sub.end_reason is not None
            assert failed.value.code != TOKEN_EXPIRED_CODE  # (the HTTP refusal)
            await trio.sleep(300)
            assert tokens.checks == checks + 1


async def test_a_listen_that_expires_again_at_once_is_not_opened_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    tokens = Tokens(life=0.25)  # a server handing out tokens that are about to expire
    _, handle = await _serve(nursery, tokens)
    url = f"http://127.0.0.1:{handle.port}/mcp"
    with trio.fail_after(IO_TIMEOUT + 100):
        async with (
            open_client(url, era="modern", headers={"Authorization": "Bearer t"}) as client,
        ):
            checks = tokens.checks
            async with client.subscribe(tools=True) as sub:
                with pytest.raises(McpError) as failed:
                    async for _ in sub:
                        pass
            assert failed.value.code == TOKEN_EXPIRED_CODE
            assert tokens.checks == checks + 2  # the listen, and one new listen
            await trio.sleep(10)
            assert tokens.checks == checks + 2


def test_the_client_knows_the_code_without_loading_http() -> None:
    assert _client_subscriptions._TOKEN_EXPIRED == TOKEN_EXPIRED_CODE

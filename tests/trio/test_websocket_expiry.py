"""A WebSocket session ends with the token it was authenticated with: the server closes
the connection (code 1008, ``invalid_token``) at ``Principal.expires_at``, refuses a token
expired already at the handshake, and the client raises :class:`~mcp_trio.TokenExpired`.
Real sockets on 127.0.0.1 (port 0), trio's autojump clock for the token's lifetime (the
server turns the wall-clock ``expires_at`` into trio time once, at the handshake), an
absolute ``fail_after`` on every test, pings off (a ping is one more timer)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
import trio_websocket
import wsproto
import wsproto.events

from mcp_trio import (
    MCP_PATH,
    BearerAuth,
    Handlers,
    Principal,
    RequestContext,
    Server,
    Session,
    SessionClosed,
    SessionConfig,
    TokenExpired,
    WebSocketChannel,
    open_client,
    open_websocket_client,
    serve_websocket,
)

from .helpers import client_config, server_config
from .test_websocket import rejection

IO_TIMEOUT = 100_000  # (virtual seconds: the clock jumps)
LIFETIME = 3600.0  # how long a "short" token lasts
CONFIG = SessionConfig(ws_ping_interval=None)
ERAS = ["legacy", "modern"]


@attrs.define
class Protected:
    url: str
    sessions: list[Session] = attrs.field(factory=list)  # the server's
    started: list[str] = attrs.field(factory=list)  # handlers that began
    cancelled: list[str] = attrs.field(factory=list)  # handlers that were cancelled
    cancelled_at: list[float] = attrs.field(factory=list)  # when (trio time)


async def _verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    now = time.time()
    if token == "short":
        return Principal(subject="alice", scopes="mcp", expires_at=now + LIFETIME)
    if token == "forever":
        return Principal(subject="alice", scopes="mcp")
    if token == "old":
        return Principal(subject="alice", scopes="mcp", expires_at=now - 1)
    return None


async def start(
    nursery: trio.Nursery, authenticate: Any = None, config: SessionConfig = CONFIG
) -> Protected:
    handlers = Handlers()
    holder: list[Protected] = []

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        name = ctx.params["name"]
        holder[0].started.append(name)
        if name in ("hang", "stubborn"):
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                holder[0].cancelled.append(name)
                holder[0].cancelled_at.append(trio.current_time())
                if name == "stubborn":  # (a slow clean-up)
                    with trio.CancelScope(shield=True):
                        await trio.sleep(10)
                raise
        return {"content": [{"type": "text", "text": name}]}

    async def on_session(session: Session) -> None:
        holder[0].sessions.append(session)
        await trio.sleep_forever()

    auth = authenticate or BearerAuth(
        verify_token=_verify, resource_metadata_url="https://m.example/.wk"
    )
    handle = await nursery.start(
        lambda task_status: serve_websocket(
            handlers,
            "127.0.0.1",
            0,
            config=config,
            connection_config=server_config(),
            on_session=on_session,
            authenticate=auth,
            task_status=task_status,
        )
    )
    holder.append(Protected(handle.url))
    return holder[0]


def _client(setup: Protected, token: str, era: str) -> Any:
    return open_websocket_client(
        setup.url,
        headers={"Authorization": f"Bearer {token}"},
        config=CONFIG,
        connection_config=client_config(era=era),
    )


@asynccontextmanager
async def _connected(
    nursery: trio.Nursery, token: str, era: str, authenticate: Any = None
) -> AsyncIterator[tuple[Protected, Session, float]]:
    """A server, and a client session with ``token`` to it, within ``IO_TIMEOUT``: the
    server's records, the session, when it began."""
    setup = await start(nursery, authenticate)
    with trio.fail_after(IO_TIMEOUT):
        began = trio.current_time()
        async with _client(setup, token, era) as session:
            yield setup, session, began


async def _ends_at_expiry(session: Session, began: float) -> None:
    """``session`` answers, then ends with its token, ``LIFETIME`` after ``began``."""
    assert await _call(session, "echo") == "echo"
    await session.wait_closed()
    assert LIFETIME - 1 < trio.current_time() - began <= LIFETIME  # (wall time moved)
    assert isinstance(session.close_reason, TokenExpired)


async def _call(session: Session, name: str) -> str:
    result = await session.request("tools/call", {"name": name, "arguments": {}})
    return str(result["content"][0]["text"])


@pytest.mark.parametrize("era", ERAS)
async def test_the_session_ends_when_its_token_expires(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    # The token was checked at the handshake only: the session outlived it forever.
    async with _connected(nursery, "short", era) as (setup, session, began):
        await _ends_at_expiry(session, began)
        reason = session.close_reason
        assert "access token expired" in str(reason)
        assert "1008" in str(reason) and "invalid_token" in str(reason)
        with pytest.raises(TokenExpired, match="access token expired"):
            await session.request("ping")
    await trio.testing.wait_all_tasks_blocked()
    [served] = setup.sessions
    assert isinstance(served.close_reason, TokenExpired)


@pytest.mark.parametrize("era", ERAS)
async def test_a_request_in_flight_at_expiry_is_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    async with _connected(nursery, "short", era) as (setup, session, _):
        with pytest.raises(TokenExpired, match="access token expired"):
            await _call(session, "hang")  # (the server never answers it)
    await trio.testing.wait_all_tasks_blocked()
    assert setup.started == ["hang"]
    assert setup.cancelled == ["hang"]  # as any close cancels it: nothing crashed


@pytest.mark.parametrize("era", ERAS)
async def test_a_token_without_expiry_never_ends_the_session(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    async with _connected(nursery, "forever", era) as (setup, session, _):
        await trio.sleep(10 * LIFETIME)
        assert session.close_reason is None
        assert await _call(session, "echo") == "echo"
    [served] = setup.sessions
    assert served.close_reason is not None
    assert not isinstance(served.close_reason, TokenExpired)  # (the client left)


async def _refused_handshake(setup: Protected, token: str) -> Any:
    """The handshake's refusal (``401``) of a legacy client with ``token``."""
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(SessionClosed, match="handshake failed") as info:
            async with _client(setup, token, "legacy"):
                raise AssertionError("unreachable")
    refused = rejection(info.value)
    assert refused.status_code == 401
    return refused


@pytest.mark.parametrize("dpop", ["off", "allowed"])
async def test_a_token_expired_at_the_handshake_is_refused(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, dpop: str
) -> None:
    # It was accepted (to be closed at once, now): a 401 challenge is what a client
    # with OAuth knows how to answer (refresh, authorize again).
    auth = BearerAuth(
        verify_token=_verify,
        resource_metadata_url="https://m.example/.wk",
        dpop=dpop,  # type: ignore[arg-type]
    )
    setup = await start(nursery, auth)
    refused = await _refused_handshake(setup, "old")
    [challenge] = [
        value
        for name, value in refused.headers or []
        if name == b"www-authenticate" and b"invalid_token" in value
    ]
    assert challenge.startswith(b"DPoP " if dpop == "allowed" else b"Bearer ")
    assert b'resource_metadata="https://m.example/.wk"' in challenge
    assert b"expired" in challenge
    assert setup.sessions == []


async def test_any_hook_s_expired_principal_is_refused(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    async def hook(request: Any) -> Principal:
        await trio.lowlevel.checkpoint()
        return Principal(subject="bob", expires_at=time.time() - 1)

    setup = await start(nursery, hook)
    refused = await _refused_handshake(setup, "whatever")
    challenge = dict(refused.headers or []).get(b"www-authenticate", b"")
    assert challenge.startswith(b"Bearer ") and b'error="invalid_token"' in challenge


@pytest.mark.parametrize("era", ERAS)
async def test_the_client_s_calls_and_subscriptions_raise_token_expired(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: Literal["legacy", "modern"]
) -> None:
    # What a user of open_client sees: a typed error that says why, not "connection lost".
    server = Server("expiring", session_config=CONFIG)
    release = trio.Event()

    @server.tool()
    async def slow() -> str:
        await release.wait()
        return "done"

    auth = BearerAuth(verify_token=_verify)
    url = (await nursery.start(partial(server.serve_websocket, authenticate=auth))).url
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(
            url, era=era, config=CONFIG, headers={"Authorization": "Bearer short"}
        ) as client:
            if era == "modern":  # a listen open at expiry ends with it too
                async with client.subscribe(tools=True) as sub:
                    with pytest.raises(TokenExpired, match="access token expired"):
                        async for _ in sub:
                            pass
            else:
                with pytest.raises(TokenExpired, match="access token expired"):
                    await client.call_tool("slow")
            with pytest.raises(TokenExpired):
                await client.call_tool("slow")


class _SilentClient:
    """A WebSocket client on wsproto over plain TCP that reads only when told: it does
    not answer the server's close frame (trio-websocket's reader would)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.ws = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)

    async def handshake(self, token: str) -> None:
        auth = [(b"authorization", f"Bearer {token}".encode())]
        request = wsproto.events.Request(
            host="127.0.0.1", target=MCP_PATH, subprotocols=["mcp"], extra_headers=auth
        )
        await self.stream.send_all(self.ws.send(request))
        assert isinstance(await self.event(), wsproto.events.AcceptConnection)

    async def event(self) -> wsproto.events.Event:
        while True:
            for event in self.ws.events():
                return event
            self.ws.receive_data(await self.stream.receive_some(65536) or None)

    async def send(self, message: dict[str, Any]) -> None:
        await self.stream.send_all(self.ws.send(wsproto.events.TextMessage(json.dumps(message))))


async def test_the_handlers_are_cancelled_at_expiry_if_the_client_does_not_answer_the_close(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # They ran on until the client answered the close frame (close_timeout, here 30 s):
    # the session's end waited for its reader to see the close, for its reason. And the
    # close frame goes out at expiry, not once the handlers have unwound (here 10 s).
    config = SessionConfig(ws_ping_interval=None, close_timeout=30, shutdown_grace_period=60)
    setup = await start(nursery, config=config)
    port = setup.url.rsplit(":", 1)[1].split("/", 1)[0]
    with trio.fail_after(IO_TIMEOUT):
        began = trio.current_time()
        async with await trio.open_tcp_stream("127.0.0.1", int(port)) as stream:
            client = _SilentClient(stream)
            await client.handshake("short")
            params = {"protocolVersion": "2025-06-18", "capabilities": {}}
            params["clientInfo"] = {"name": "silent", "version": "1"}
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
            await client.send(initialize)
            assert isinstance(await client.event(), wsproto.events.TextMessage)
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "stubborn", "arguments": {}}
            await client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            closing = await client.event()  # (and then no answer to it)
            assert LIFETIME - 1 < trio.current_time() - began <= LIFETIME
            assert isinstance(closing, wsproto.events.CloseConnection)
            assert closing.code == 1008
            assert closing.reason == "invalid_token: the access token expired"
            [served] = setup.sessions
            await served.wait_closed()
        assert setup.cancelled == ["stubborn"]
        assert LIFETIME - 1 < setup.cancelled_at[0] - began <= LIFETIME
        assert isinstance(served.close_reason, TokenExpired)  # (the reader saw no close)


async def test_the_handlers_are_cancelled_at_expiry_while_the_reader_is_paused(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The server's reader does not read while max_unanswered_requests are unanswered:
    # the expiry waited close_timeout for it to see the close.
    config = SessionConfig(
        ws_ping_interval=None,
        close_timeout=30,
        max_concurrent_handlers=1,
        max_unanswered_requests=1,
    )
    setup = await start(nursery, config=config)
    with trio.fail_after(IO_TIMEOUT):
        ended: list[float] = []
        async with _client(setup, "short", "legacy") as session:
            began = trio.current_time()

            async def hang() -> None:
                with pytest.raises(TokenExpired, match="access token expired"):
                    await _call(session, "hang")
                ended.append(trio.current_time() - began)

            async with trio.open_nursery() as calls:
                for _ in range(3):
                    calls.start_soon(hang)
        [served] = setup.sessions
        with trio.fail_after(1):  # (virtual: the handler's end is the session's)
            await served.wait_closed()
        assert setup.cancelled == ["hang"]
        assert LIFETIME - 1 < setup.cancelled_at[0] - began <= LIFETIME
        assert len(ended) == 3 and all(LIFETIME - 1 < t <= LIFETIME for t in ended)
        assert LIFETIME - 1 < trio.current_time() - began <= LIFETIME + 1
        assert isinstance(served.close_reason, TokenExpired)


async def test_a_client_s_close_with_1008_invalid_token_is_no_expiry_at_the_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Peer input: the server's own principal did not expire; a client's 1008 close is
    # an ordinary close, whatever its reason says.
    setup = await start(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with trio_websocket.open_websocket_url(
            setup.url, subprotocols=["mcp"], extra_headers=[(b"authorization", b"Bearer forever")]
        ) as ws:
            while not setup.sessions:
                await trio.sleep(0.01)
            await ws.aclose(1008, "invalid_token: the access token expired")
        [served] = setup.sessions
        await served.wait_closed()
    assert isinstance(served.close_reason, SessionClosed)
    assert not isinstance(served.close_reason, TokenExpired)
    assert "1008" in str(served.close_reason)


class _ClosedWs:
    """A WebSocket closed by the peer with ``reason``."""

    def __init__(self, code: int, reason: str | None) -> None:
        self.reason = trio_websocket.CloseReason(code, reason)

    async def send_message(self, message: str) -> None:
        await trio.lowlevel.checkpoint()
        raise trio_websocket.ConnectionClosed(self.reason)

    async def get_message(self) -> str:
        await trio.lowlevel.checkpoint()
        raise trio_websocket.ConnectionClosed(self.reason)


@pytest.mark.parametrize("client", [True, False])
@pytest.mark.parametrize(
    ("code", "reason", "expired"),
    [
        (1008, "invalid_token: the access token expired", True),
        (1008, "invalid_token", True),
        (1008, "some other policy", False),
        (1008, None, False),
        (1000, "invalid_token", False),
    ],
)
async def test_the_client_tells_an_expiry_close_from_others(
    code: int, reason: str | None, expired: bool, client: bool
) -> None:
    # Reading or writing, a close for an expired token is TokenExpired, which a caller
    # can catch to connect again with a fresh token; any other close is as before. Only
    # at the client's end: a server's token does not expire.
    expired = expired and client
    channel = WebSocketChannel(_ClosedWs(code, reason), client=client)  # type: ignore[arg-type]
    with pytest.raises(SessionClosed) as read:
        await channel.receive()
    assert isinstance(read.value, TokenExpired) is expired
    assert read.value.reason.startswith("the server ended the session") is expired
    if expired:
        with pytest.raises(TokenExpired, match=f"code {code}"):
            await channel.send(b"{}")
    else:
        with pytest.raises(trio.BrokenResourceError):
            await channel.send(b"{}")


@pytest.mark.parametrize("era", ERAS)
async def test_a_bearer_auth_s_clock_times_the_session_too(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    # Its clock accepted the token (expired by the wall clock, with LIFETIME left by its
    # own), then the lifetime was measured by time.time(): closed with 1008 at once.
    async def verify(token: str) -> Principal:
        await trio.lowlevel.checkpoint()
        return Principal(subject="alice", expires_at=time.time() - 10)

    auth = BearerAuth(verify_token=verify, clock=lambda: time.time() - 10 - LIFETIME)
    async with _connected(nursery, "short", era, auth) as (_, session, began):
        await _ends_at_expiry(session, began)

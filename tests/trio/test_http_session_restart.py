"""A Streamable HTTP server that forgets the session: the client starts a new one.

``2025-11-25/basic/transports.mdx``, "Session Management": "When a client receives HTTP
404 in response to a request containing an ``MCP-Session-Id``, it MUST start a new
session by sending a new ``InitializeRequest`` without a session ID attached." Real
servers on 127.0.0.1; a :class:`Proxy` in between sees what goes over the wire, sends
new connections to another server (one that restarted), or plays a server that
forgets every session at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

import mcp_trio
from mcp_sansio import ConnectionConfig, ErrorCode, LocalProtocolError
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import MIN_REOPEN_DELAY, HttpServerConfig
from mcp_trio import McpError, Session, SessionClosed, SessionConfig
from mcp_trio._channel import SessionLost
from mcp_trio._http_client import _MAX_DEFERRED, HttpChannel, open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_server import HttpServeHandle, serve_http

from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    SERVER_CAPS,
    App,
    Proxy,
    SeenRequest,
    call,
    client_connection_config,
    rpc,
    text_of,
)

ONE_CONNECTION_EACH = HttpTransportConfig(max_idle_connections=0)
"""Every request on a connection of its own: what the proxy sees first is each request."""


def session_ids(prefix: str, made: list[str]) -> Callable[[], str]:
    """A session id factory that counts: each legacy session is one ``initialize``."""

    def make() -> str:
        made.append(f"{prefix}{len(made) + 1}")
        return made[-1]

    return make


def recording(app: App) -> list[str | None]:
    """Make ``app``'s ``tools/call`` note the session each call ran in."""
    sessions: list[str | None] = []
    tools_call = app.tools_call

    async def noting(ctx: Any) -> Any:
        sessions.append(ctx.session_id)
        return await tools_call(ctx)

    app.handlers.set_request_handler("tools/call", noting)
    return sessions


async def start(
    nursery: trio.Nursery,
    app: App,
    made: list[str],
    prefix: str = "s",
    *,
    name: str = "http-test-server",
    capabilities: dict[str, Any] = SERVER_CAPS,
    http: HttpServerConfig | None = None,
) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            app.handlers,
            connection_config=ConnectionConfig(
                implementation={"name": name, "version": "1"},
                capabilities=capabilities,
                era="legacy",
            ),
            http_config=http,
            session_id_factory=session_ids(prefix, made),
        )
    )
    return handle


async def started_proxy(nursery: trio.Nursery, port: int, **options: Any) -> Proxy:
    """A :class:`Proxy` in front of ``port``, listening."""
    proxy = Proxy(port, **options)
    await proxy.start(nursery)
    return proxy


def legacy_client(url: str, **options: Any) -> AbstractAsyncContextManager[Session]:
    """``open_http_client`` pinned to the legacy era (sessions are legacy only)."""
    return open_http_client(url, connection_config=client_connection_config("legacy"), **options)


def initializes(seen: list[SeenRequest]) -> list[SeenRequest]:
    return [r for r in seen if r.rpc_method == "initialize"]


@asynccontextmanager
async def stalling_proxy(
    nursery: trio.Nursery, made: list[str] | None = None
) -> AsyncIterator[tuple[Proxy, Callable[[], None]]]:
    """A proxy in front of a server, and ``stall()``: from then on the proxy forgets
    every session and sends new connections to a port that never answers (so the new
    session never starts)."""
    old = await start(nursery, App(), [] if made is None else made)
    silent = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    proxy = await started_proxy(nursery, old.port)

    def stall() -> None:
        proxy.target = silent.socket.getsockname()[1]
        proxy.forget = "all"

    try:
        yield proxy, stall
    finally:
        await silent.aclose()


async def test_an_expired_session_is_started_anew_and_the_request_answered(
    nursery: trio.Nursery, clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    app, made = App(), list[str]()
    sessions = recording(app)
    server = await start(nursery, app, made, http=HttpServerConfig(session_idle_timeout=5.0))
    proxy = await started_proxy(nursery, server.port)
    transport = HttpTransportConfig(open_get_stream=False)  # a GET stream keeps it alive
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(proxy.url(), transport=transport) as client:
            first = client.handshake
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(6)
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().sessions == 0  # the server forgot it
            with caplog.at_level(logging.WARNING, logger="mcp_trio"):
                result = await client.request("tools/call", call("echo", text="again"))
            assert text_of(result) == "again"
            assert text_of(await client.request("tools/call", call("echo", text="on"))) == "on"
            assert not client.closed
            assert made == ["s1", "s2"] and sessions == ["s2", "s2"]
            assert client.channel.http.session_id == "s2"  # type: ignore[attr-defined]
            assert client.handshake is not None and client.handshake is not first
            assert client.handshake.protocol_version == LEGACY
    # On the wire: a second initialize, without a session id, then the session's
    # notifications/initialized and the refused request again, with the new id.
    assert [r.headers.get("mcp-session-id") for r in initializes(proxy.seen)] == [None, None]
    after = proxy.seen[proxy.seen.index(initializes(proxy.seen)[1]) + 1 :]
    assert [(r.rpc_method, r.headers.get("mcp-session-id")) for r in after] == [
        ("notifications/initialized", "s2"),
        ("tools/call", "s2"),
        ("tools/call", "s2"),
        (None, "s2"),  # DELETE at the end
    ]
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "a new one was started" in warning.getMessage()
    assert "resource subscriptions, the logging level" in warning.getMessage()


async def test_requests_in_flight_on_the_forgotten_session_fail_and_others_go_on(
    nursery: trio.Nursery,
) -> None:
    old_app, new_app, made = App(), App(), list[str]()
    old = await start(nursery, old_app, made, "old-")
    new = await start(nursery, new_app, made, "new-")
    proxy = await started_proxy(nursery, old.port)
    outcome: list[BaseException] = []
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(
            proxy.url(),
            transport=ONE_CONNECTION_EACH,
        ) as client:

            async def in_flight() -> None:
                try:
                    await client.request("tools/call", call("block"))
                except McpError as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as inner:
                inner.start_soon(in_flight)
                await old_app.started_event.wait()  # its answer will come on its stream
                proxy.target = new.port  # the server restarted: it knows no session
                result = await client.request("tools/call", call("echo", text="after"))
                assert text_of(result) == "after"
            (failure,) = outcome
            assert isinstance(failure, McpError) and failure.code == ErrorCode.INTERNAL_ERROR
            assert failure.message.startswith("HTTP: ")
            assert "forgot the session" in failure.message
            assert made == ["old-1", "new-2"]
            # The GET stream is open again, on the new session.
            await trio.testing.wait_all_tasks_blocked()
            gets = [r for r in proxy.seen if r.method == "GET"]
            assert [r.headers["mcp-session-id"] for r in gets] == ["old-1", "new-2"]
        old_app.release.set()


async def test_a_client_that_only_listens_goes_on_after_each_restart(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # No requests, only the GET stream: each new session is proven by its GET stream,
    # so the server may restart again later (and again) without ending the client.
    # (The autojump clock: the resumption waits MIN_REOPEN_DELAY even with retry 0.)
    made: list[str] = []
    fast = HttpServerConfig(retry_ms=0)  # (resume the cut GET stream at once)
    servers = [await start(nursery, App(), made, prefix, http=fast) for prefix in "abc"]
    proxy = await started_proxy(nursery, servers[0].port)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(proxy.url()) as client:
            for server in servers[1:]:
                await trio.testing.wait_all_tasks_blocked()  # the GET stream is open
                proxy.target = server.port  # it restarted: it knows no session
                proxy.cut()  # the GET stream breaks, and its resumption gets 404
                await trio.sleep(MIN_REOPEN_DELAY)  # (virtual time)
                await trio.testing.wait_all_tasks_blocked()
            assert not client.closed
            assert made == ["a1", "b2", "c3"]
    gets = [r.headers["mcp-session-id"] for r in proxy.seen if r.method == "GET"]
    assert gets == ["a1", "a1", "b2", "b2", "c3"]  # each: opened, resumed (404)


async def test_the_forgotten_sessions_get_stream_is_closed(nursery: trio.Nursery) -> None:
    # The old server is still there (another instance, say): its GET stream would
    # still bring what it says to a session the client has left.
    made: list[str] = []
    old = await start(nursery, App(), made, "old-")
    new = await start(nursery, App(), made, "new-")
    proxy = await started_proxy(nursery, old.port)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(proxy.url()) as client:
            await trio.testing.wait_all_tasks_blocked()
            assert old.statistics().open_responses == 1  # the GET stream
            proxy.target = new.port
            await client.request("tools/list")  # 404: a new session
            await trio.testing.wait_all_tasks_blocked()
            assert (old.statistics().open_responses, new.statistics().open_responses) == (0, 1)
    assert made == ["old-1", "new-2"]


async def test_the_client_shows_the_new_sessions_server(nursery: trio.Nursery) -> None:
    made: list[str] = []
    old = await start(nursery, App(), made, "old-", name="first")
    new = await start(nursery, App(), made, "new-", name="second", capabilities={"tools": {}})
    proxy = await started_proxy(nursery, old.port)
    with trio.fail_after(IO_TIMEOUT):
        async with mcp_trio.open_client(proxy.url(), era="legacy") as client:
            assert client.server_info is not None and client.server_info.name == "first"
            assert client.server_capabilities.resources is not None
            proxy.target = new.port
            proxy.cut()  # the connections to the old server go with it
            output = await client.call_tool("echo", {"text": "hi"})
            assert output.text == "hi"
            info, capabilities = client.server_info, client.server_capabilities
            assert info is not None and info.name == "second"
            assert capabilities.resources is None
            assert client.session.connection.peer_capabilities == {"tools": {}}
            with pytest.raises(LocalProtocolError, match="'resources' capability"):
                await client.list_resources()  # checked against the new session's
    assert made == ["old-1", "new-2"]


async def test_a_server_that_forgets_every_new_session_ends_it(nursery: trio.Nursery) -> None:
    made: list[str] = []
    server = await start(nursery, App(), made)
    proxy = await started_proxy(nursery, server.port, forget="all")
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(
            proxy.url(),
            transport=ONE_CONNECTION_EACH,
        ) as client:
            # notifications/initialized gets 404: a new session; its notifications/
            # initialized gets 404 too: no third one.
            await client.wait_closed()
            assert client.close_reason is not None
            assert "the new session started in its place too" in client.close_reason.reason
            with pytest.raises(SessionClosed):
                await client.request("tools/list")
    assert made == ["s1", "s2"] and len(initializes(proxy.seen)) == 2


async def test_a_request_refused_again_on_the_new_session_fails_and_ends_it(
    nursery: trio.Nursery,
) -> None:
    made: list[str] = []
    server = await start(nursery, App(), made)
    proxy = await started_proxy(nursery, server.port, forget="requests")
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(
            proxy.url(),
            transport=ONE_CONNECTION_EACH,
        ) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/list")
            assert info.value.code == ErrorCode.INTERNAL_ERROR
            assert info.value.message.startswith("HTTP: the server forgot the new session too")
            await client.wait_closed()
            assert client.close_reason is not None
            assert "open a new client" in client.close_reason.reason
    assert made == ["s1", "s2"]
    sent = [(r.rpc_method, r.headers.get("mcp-session-id")) for r in proxy.seen if r.rpc_method]
    assert [m for m in sent if m[0] == "tools/list"] == [("tools/list", "s1"), ("tools/list", "s2")]


async def test_requests_made_while_the_new_session_starts_wait_for_it(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    app, made = App(), list[str]()
    sessions = recording(app)
    server = await start(nursery, app, made, http=HttpServerConfig(session_idle_timeout=5.0))
    transport = HttpTransportConfig(open_get_stream=False)
    results: dict[int, str] = {}
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(server.url, transport=transport) as client:
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(6)
            await trio.testing.wait_all_tasks_blocked()

            async def one(i: int) -> None:
                results[i] = text_of(await client.request("tools/call", call("echo", text=i)))

            async with trio.open_nursery() as inner:
                for i in range(5):
                    inner.start_soon(one, i)
            await client.request("ping")
    assert results == {i: str(i) for i in range(5)}
    assert made == ["s1", "s2"] and set(sessions) == {"s2"}


async def test_a_new_session_the_server_refuses_fails_the_request_and_ends_it(
    nursery: trio.Nursery,
) -> None:
    made: list[str] = []
    old = await start(nursery, App(), made, "old-")
    full = await start(nursery, App(), made, "new-", http=HttpServerConfig(max_sessions=0))
    proxy = await started_proxy(nursery, old.port)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(
            proxy.url(),
            transport=ONE_CONNECTION_EACH,
        ) as client:
            proxy.target = full.port  # restarted, and it takes no session (503)
            # The held request ends with the session, not with an error the server
            # never sent (the core's, for it: ErrorReceived.local).
            with pytest.raises(SessionClosed, match="did not start a new one") as info:
                await client.request("tools/list")
            assert "too many sessions" in info.value.reason
            await client.wait_closed()
            assert client.close_reason is not None
            assert "did not start a new one" in client.close_reason.reason
    assert made == ["old-1"]
    assert len(initializes(proxy.seen)) == 2


async def test_a_new_session_that_never_comes_ends_it_in_handshake_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    made: list[str] = []
    with trio.fail_after(IO_TIMEOUT):
        async with (
            stalling_proxy(nursery, made) as (proxy, stall),
            legacy_client(
                proxy.url(),
                config=SessionConfig(handshake_timeout=5.0),
                transport=HttpTransportConfig(max_idle_connections=0, open_get_stream=False),
            ) as client,
        ):
            # The refused request cannot be sent before the new session, so it waits.
            stall()
            with pytest.raises(SessionClosed) as info:
                await client.request("tools/list")
            assert "did not start a new one in 5 s" in info.value.reason


async def test_a_requests_timeout_counts_while_it_waits_for_the_new_session(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # No bound on the restart itself (handshake_timeout=None, no request_timeout), and
    # the new initialize is never answered: a request's own timeout= still holds, from
    # the moment it was made, as it would for a request on the wire.
    with trio.fail_after(IO_TIMEOUT):
        async with (
            stalling_proxy(nursery) as (proxy, stall),
            legacy_client(
                proxy.url(), config=SessionConfig(handshake_timeout=None), transport=QUIET
            ) as client,
        ):
            stall()
            async with trio.open_nursery() as inner:
                inner.start_soon(partial(client.request, "tools/list"))  # refused: a restart
                await trio.testing.wait_all_tasks_blocked()
                assert len(initializes(proxy.seen)) == 2  # (the session read the loss)
                made = trio.current_time()
                with pytest.raises(mcp_trio.RequestTimeout):
                    await client.request("tools/call", call("echo", text="x"), timeout=0.5)
                assert trio.current_time() - made == pytest.approx(0.5)
                inner.cancel_scope.cancel()
            assert not client.closed
    # Never on the wire: neither the request nor a cancellation of it.
    assert [r.rpc_method for r in proxy.seen if r.method == "POST"] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "initialize",
    ]


async def test_closing_while_the_new_session_starts_announces_no_held_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Closing cancels the requests in flight first, with notifications/cancelled; the
    # ones held for the new session were never sent on it: nothing to announce.
    outcomes: list[SessionClosed] = []

    async def request(method: str) -> None:
        try:
            await client.request(method)
        except SessionClosed as exc:
            outcomes.append(exc)

    with trio.fail_after(IO_TIMEOUT):
        async with (
            stalling_proxy(nursery) as (proxy, stall),
            trio.open_nursery() as inner,
            legacy_client(
                proxy.url(), config=SessionConfig(handshake_timeout=None), transport=QUIET
            ) as client,
        ):
            stall()
            inner.start_soon(request, "tools/list")  # refused: held to be sent again
            await trio.testing.wait_all_tasks_blocked()
            inner.start_soon(request, "resources/list")  # made meanwhile: held
            await trio.testing.wait_all_tasks_blocked()
            assert len(client.connection.pending_requests()) == 3  # with initialize
    assert [exc.reason for exc in outcomes] == ["the session was closed locally"] * 2
    assert posted(proxy) == [
        ("initialize", None),
        ("notifications/initialized", "s1"),
        ("tools/list", "s1"),
        ("initialize", None),
    ]


# ------------------------------------------------------------------ the gap
#
# Between the 404's head (the HTTP client forgets the session: nothing can be posted
# until the new initialize) and the moment the session reads the loss, the session
# may write, and the task reading the 404 may be cancelled. Driven on the channel
# itself, with a 404 whose body the proxy holds back.

INIT_PARAMS: dict[str, Any] = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"},
}
QUIET = HttpTransportConfig(max_idle_connections=0, open_get_stream=False)


def notification(method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)


async def raw_channel(nursery: trio.Nursery, proxy: Proxy, rid: int = 1) -> HttpChannel:
    channel = HttpChannel(proxy.url(), transport=QUIET)
    await nursery.start(channel.run)
    await initialize(channel, rid)
    return channel


async def initialize(channel: HttpChannel, rid: int) -> None:
    await channel.send(rpc(rid, "initialize", INIT_PARAMS))
    assert loads(await channel.receive())["id"] == rid
    await channel.send(notification("notifications/initialized"))


async def forget_and_hold(proxy: Proxy, channel: HttpChannel, rid: int) -> trio.Event:
    """Request ``rid`` gets a 404 whose head has been read and whose body is held."""
    proxy.forget, proxy.hold_404 = "requests", trio.Event()
    await channel.send(rpc(rid, "tools/list"))
    await proxy.held_404.wait()
    proxy.forget = None  # (the new session is not forgotten)
    await trio.testing.wait_all_tasks_blocked()
    return proxy.hold_404


def posted(proxy: Proxy) -> list[tuple[str | None, str | None]]:
    return [
        (r.rpc_method, r.headers.get("mcp-session-id")) for r in proxy.seen if r.method == "POST"
    ]


async def test_what_is_written_before_the_loss_is_read_waits_for_the_new_session(
    nursery: trio.Nursery,
) -> None:
    made: list[str] = []
    proxy = await started_proxy(nursery, (await start(nursery, App(), made)).port)
    channel = await raw_channel(nursery, proxy)
    try:
        with trio.fail_after(IO_TIMEOUT):
            body = await forget_and_hold(proxy, channel, 2)
            # The session has not read the loss: no session can carry what it writes.
            # Nothing is handed straight back (it would be written again at once, and
            # again: a busy loop); a request joins the loss, a notification waits.
            await channel.send(rpc(3, "tools/list"))
            await channel.send(rpc(4, "ping"))
            await channel.send(notification("notifications/cancelled", {"requestId": 4}))
            await channel.send(notification("notifications/roots/list_changed"))
            await channel.send(dumps({"jsonrpc": "2.0", "id": "old-1", "result": {}}))
            body.set()
            await trio.testing.wait_all_tasks_blocked()  # request 2 joins the loss too
            with pytest.raises(SessionLost) as lost:
                await channel.receive()
            assert lost.value.restart and lost.value.resend == (3, 2)
            # What the session then does: a new initialize, then what it held.
            await initialize(channel, 5)
            for rid in lost.value.resend:
                await channel.send(rpc(rid, "tools/list"))
            assert {loads(await channel.receive())["id"] for _ in range(2)} == {2, 3}
    finally:
        await channel.aclose()
    assert made == ["s1", "s2"]
    assert posted(proxy) == [
        ("initialize", None),
        ("notifications/initialized", "s1"),
        ("tools/list", "s1"),  # 404
        ("initialize", None),
        ("notifications/initialized", "s2"),
        ("notifications/roots/list_changed", "s2"),  # it waited for the new session
        ("tools/list", "s2"),
        ("tools/list", "s2"),
    ]


async def test_the_loss_is_told_even_when_its_404_is_no_longer_read(
    nursery: trio.Nursery,
) -> None:
    proxy = await started_proxy(nursery, (await start(nursery, App(), [])).port)
    channel = await raw_channel(nursery, proxy)
    try:
        with trio.fail_after(IO_TIMEOUT):
            body = await forget_and_hold(proxy, channel, 2)
            # Nobody waits for request 2 any more: the task reading its 404 stops.
            await channel.send(notification("notifications/cancelled", {"requestId": 2}))
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(SessionLost) as lost:
                await channel.receive()
            assert lost.value.restart and lost.value.resend == ()
            body.set()
            await initialize(channel, 3)
            await channel.send(rpc(4, "tools/list"))
            assert loads(await channel.receive())["id"] == 4
    finally:
        await channel.aclose()


async def test_a_request_cancelled_while_its_404_is_read_still_starts_a_new_session(
    nursery: trio.Nursery,
) -> None:
    app, made = App(), list[str]()
    sessions = recording(app)
    proxy = await started_proxy(nursery, (await start(nursery, app, made)).port)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(proxy.url(), transport=QUIET) as client:
            proxy.forget, proxy.hold_404 = "requests", trio.Event()
            async with trio.open_nursery() as inner:
                inner.start_soon(partial(client.request, "tools/call", call("echo", text="x")))
                await proxy.held_404.wait()
                proxy.forget = None
                await trio.testing.wait_all_tasks_blocked()
                inner.cancel_scope.cancel()  # (as a caller's timeout would)
            proxy.hold_404.set()
            result = await client.request("tools/call", call("echo", text="after"))
            assert text_of(result) == "after"
            assert not client.closed
    assert made == ["s1", "s2"] and sessions == ["s2"]
    assert len(initializes(proxy.seen)) == 2


async def test_after_the_end_nothing_is_posted_without_a_session(nursery: trio.Nursery) -> None:
    made: list[str] = []
    proxy = await started_proxy(nursery, (await start(nursery, App(), made)).port)
    outcomes: dict[str, BaseException] = {}

    async def request(name: str) -> None:
        try:
            await client.request("tools/list")
        except (McpError, SessionClosed) as exc:
            outcomes[name] = exc

    with trio.fail_after(IO_TIMEOUT):
        async with legacy_client(proxy.url(), transport=QUIET) as client:
            async with trio.open_nursery() as inner:
                # The server forgets s1: a new session, s2, starts at the 404's head.
                proxy.forget, proxy.hold_404 = "requests", trio.Event()
                inner.start_soon(request, "refused")
                await proxy.held_404.wait()
                await trio.testing.wait_all_tasks_blocked()
                assert made == ["s1", "s2"]
                # It forgets s2 before it answered anything: the end, at that 404's head.
                first, proxy.hold_404, proxy.held_404 = proxy.hold_404, trio.Event(), trio.Event()
                inner.start_soon(request, "ending")
                await proxy.held_404.wait()
                await trio.testing.wait_all_tasks_blocked()
                # Until the session reads the end, what it writes has no session to go to.
                inner.start_soon(request, "after")
                await trio.testing.wait_all_tasks_blocked()
                first.set()
                proxy.hold_404.set()
            await client.wait_closed()
    assert isinstance(outcomes["ending"], McpError)  # (refused: an HTTP error)
    assert isinstance(outcomes["after"], SessionClosed)
    assert "the new session started in its place too" in outcomes["after"].reason
    assert posted(proxy) == [
        ("initialize", None),
        ("notifications/initialized", "s1"),
        ("tools/list", "s1"),
        ("initialize", None),
        ("notifications/initialized", "s2"),
        ("tools/list", "s2"),
    ]


async def test_tool_schemas_of_the_forgotten_session_are_not_used(nursery: trio.Nursery) -> None:
    made: list[str] = []
    old_app = App()

    async def typed_tools(ctx: Any) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        tool = {"name": "echo", "inputSchema": {"type": "object"}, "outputSchema": schema}
        return {"tools": [tool]}

    old_app.handlers.set_request_handler("tools/list", typed_tools)
    old = await start(nursery, old_app, made, "old-")
    new = await start(nursery, App(), made, "new-")  # its echo has no outputSchema
    proxy = await started_proxy(nursery, old.port)
    with trio.fail_after(IO_TIMEOUT):
        async with mcp_trio.open_client(proxy.url(), era="legacy") as client:
            (tool,) = await client.list_tools()
            assert tool.output_schema is not None
            proxy.target = new.port
            proxy.cut()
            await trio.testing.wait_all_tasks_blocked()  # (the cut connections are closed)
            output = await client.call_tool("echo", {"text": "hi"})
            assert output.text == "hi" and output.structured_content is None
    assert made == ["old-1", "new-2"]
    # Not checked against the old session's schema (and listed again to find it stale).
    assert [r.rpc_method for r in proxy.seen].count("tools/list") == 1


async def test_notifications_waiting_for_the_new_session_are_bounded(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await started_proxy(nursery, (await start(nursery, App(), [])).port)
    channel = await raw_channel(nursery, proxy)
    try:
        with trio.fail_after(IO_TIMEOUT):
            body = await forget_and_hold(proxy, channel, 2)
            with caplog.at_level(logging.WARNING, logger="mcp_trio"):
                for i in range(_MAX_DEFERRED + 1):
                    await channel.send(notification("x/changed", {"i": i}))
            (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert "a notification was dropped" in warning.getMessage()
            body.set()
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(SessionLost):
                await channel.receive()
            await initialize(channel, 3)
    finally:
        await channel.aclose()
    waited = [r.message["params"]["i"] for r in proxy.seen if r.rpc_method == "x/changed"]
    assert waited == list(range(_MAX_DEFERRED))

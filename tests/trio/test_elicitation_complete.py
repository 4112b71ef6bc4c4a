"""``ctx.elicitation_completer(id)``: a handler that sent the user to a URL tells the
client, later, that the out-of-band interaction is over
(``notifications/elicitation/complete``, client/elicitation.mdx, 2025-11-25 only): on
its own session (in memory, WebSocket, stdio) or, over Streamable HTTP, on the session's
GET stream; to that client and no other; after the request was answered; ``False`` once
the session is gone. Refused (-32021) where the notification does not exist (before
2025-11-25, and in the modern era, which removed it) and to a client without URL mode."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from functools import partial
from typing import Any, cast
from unittest.mock import patch

import pytest
import trio
import trio.testing

from mcp_sansio import Era, ErrorCode, LocalProtocolError, RequestReceived
from mcp_sansio import types as t
from mcp_trio import (
    Context,
    ElicitationCompleter,
    McpError,
    NotificationReceived,
    RequestFacts,
    StreamChannel,
    ToolError,
    open_client,
)
from mcp_trio._server import Server

from ..schema import validate

COMPLETE = "notifications/elicitation/complete"
URL_CAPS: dict[str, Any] = {"elicitation": {"url": {}}}


class Payments:
    """A server whose ``pay`` tool sends the user to a payment page and keeps the
    completer for when the payment provider calls back (a webhook, out of band)."""

    def __init__(self) -> None:
        self.server = Server("payments")
        self.pending: dict[str, ElicitationCompleter] = {}
        self.done: dict[str, ElicitationCompleter] = {}

        @self.server.tool()
        async def pay(order: str, ctx: Context) -> str:
            complete = ctx.elicitation_completer(order)
            answer = await ctx.elicit_url(
                f"https://pay.example.com/{order}", "Pay the order", elicitation_id=order
            )
            if answer.accepted:
                self.pending[order] = complete
            return answer.action

    async def paid(self, order: str) -> bool:
        """The provider's callback: the user paid ``order``."""
        self.done[order] = complete = self.pending.pop(order)
        return await complete()

    async def paid_again(self, order: str) -> bool:
        """The provider calls back again (the completer sends it again)."""
        return await self.done[order]()


class Client:
    """What one client heard: the ``notifications/elicitation/complete`` it got."""

    def __init__(self) -> None:
        self.completed: list[dict[str, Any] | None] = []
        self.arrived = trio.Event()

    def on_notification(self, note: NotificationReceived) -> None:
        assert note.method == COMPLETE
        self.completed.append(note.params)
        self.arrived.set()

    @staticmethod
    async def on_elicitation(params: Any) -> t.ElicitResult:
        assert isinstance(params, t.ElicitRequestURLParams)
        return t.ElicitResult(action="accept")

    def opened(self, target: Any, **options: Any) -> Any:
        return open_client(
            target,
            era="legacy",
            on_elicitation=self.on_elicitation,
            on_notification=self.on_notification,
            capabilities=URL_CAPS,
            **options,
        )


@asynccontextmanager
async def served(server: Server) -> AsyncIterator[str]:
    """``server`` over Streamable HTTP on 127.0.0.1, for the block: its URL."""
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(partial(server.serve_http, port=0))
        yield handle.url
        nursery.cancel_scope.cancel()


def check_notification(params: dict[str, Any] | None) -> None:
    message = {"jsonrpc": "2.0", "method": COMPLETE, "params": params}
    validate("2025-11-25", "ElicitationCompleteNotification", message)


async def test_in_memory_the_completion_reaches_the_client_after_the_call() -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        async with client.opened(payments.server) as session:
            assert (await session.call_tool("pay", {"order": "o-1"})).text == "accept"
            assert client.completed == []  # (the call is answered: nothing sent yet)
            assert await payments.paid("o-1") is True
            await client.arrived.wait()
    assert client.completed == [{"elicitationId": "o-1"}]
    check_notification(client.completed[0])


async def test_a_random_id_is_in_the_result_so_that_it_can_be_completed() -> None:
    server = Server("random")
    pending: list[ElicitationCompleter] = []

    @server.tool()
    async def link(ctx: Context) -> str:
        answer = await ctx.elicit_url("https://example.com/link", "Link your account")
        assert answer.elicitation_id is not None  # (none given: a random one was sent)
        pending.append(ctx.elicitation_completer(answer.elicitation_id))
        return answer.elicitation_id

    client = Client()
    with trio.fail_after(10):
        async with client.opened(server) as session:
            sent = (await session.call_tool("link")).text
            assert await pending[0]() is True
            await client.arrived.wait()
    assert client.completed == [{"elicitationId": sent}]


async def test_in_memory_a_completion_after_the_client_left_goes_nowhere() -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        async with client.opened(payments.server) as session:
            await session.call_tool("pay", {"order": "o-1"})
        assert await payments.paid("o-1") is False
    assert client.completed == []


async def test_the_completer_holds_its_session_weakly() -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        async with client.opened(payments.server) as session:
            await session.call_tool("pay", {"order": "o-1"})
        del session
        gc.collect()
        complete = payments.pending["o-1"]
        assert complete.elicitation_id == "o-1"
        assert repr(complete) == "<ElicitationCompleter 'o-1'>"
        assert await payments.paid("o-1") is False


@asynccontextmanager
async def served_on(server: Server, transport: str) -> AsyncIterator[Any]:
    """``server`` served on ``transport`` for the block: what a client opens."""
    async with trio.open_nursery() as nursery:
        if transport == "stdio":
            to_server, stdin = trio.testing.memory_stream_one_way_pair()
            stdout, from_server = trio.testing.memory_stream_one_way_pair()
            nursery.start_soon(partial(server.serve_stdio, stdin=stdin, stdout=stdout))
            yield StreamChannel(to_server, from_server)
        else:
            serve = server.serve_http if transport == "http" else server.serve_websocket
            handle = await nursery.start(partial(serve, port=0))
            yield handle.url
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("transport", ["stdio", "websocket", "http", "memory"])
async def test_each_transport_carries_the_completion_after_the_call(transport: str) -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        if transport == "memory":
            target: AbstractAsyncContextManager[Any] = nullcontext(payments.server)
        else:
            target = served_on(payments.server, transport)
        async with target as where, client.opened(where) as session:
            assert (await session.call_tool("pay", {"order": "o-1"})).text == "accept"
            assert await payments.paid("o-1") is True
            await client.arrived.wait()
        assert await payments.paid_again("o-1") is False  # (the session is gone)
    assert client.completed == [{"elicitationId": "o-1"}]


async def test_a_request_context_of_no_known_transport_has_no_session_to_complete_on() -> None:
    class Elsewhere(RequestFacts):
        """A transport of the user's own, whose request context has no session."""

    event = RequestReceived(
        request_id=1, method="tools/call", params={}, era=Era.LEGACY, protocol_version="2025-11-25"
    )
    ctx = Context(cast(Any, Elsewhere(event)))
    with (
        patch.object(Context, "client_capabilities", URL_CAPS),
        pytest.raises(RuntimeError, match="no session"),
    ):
        ctx.elicitation_completer("e-1")


async def test_over_http_the_completion_goes_on_the_get_stream_of_that_client_only() -> None:
    payments, alice, bob = Payments(), Client(), Client()
    with trio.fail_after(10):
        async with (
            served(payments.server) as url,
            alice.opened(url) as alice_session,
            bob.opened(url) as bob_session,
        ):
            assert (await alice_session.call_tool("pay", {"order": "a-1"})).text == "accept"
            assert (await bob_session.call_tool("pay", {"order": "b-1"})).text == "accept"
            assert await payments.paid("a-1") is True
            await alice.arrived.wait()
            # (bob's own comes after whatever was sent to him before: alice's, were it
            # sent to every session)
            assert await payments.paid("b-1") is True
            await bob.arrived.wait()
    # client/elicitation.mdx: "MUST only send the notification to the client that
    # initiated the elicitation request".
    assert alice.completed == [{"elicitationId": "a-1"}]
    assert bob.completed == [{"elicitationId": "b-1"}]


async def test_over_http_a_completion_after_the_session_ended_goes_nowhere() -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        async with served(payments.server) as url:
            async with client.opened(url) as session:
                await session.call_tool("pay", {"order": "o-1"})
            # (the client ended its session with DELETE on the way out)
            assert await payments.paid("o-1") is False
    assert client.completed == []


async def test_over_http_a_completion_after_the_server_stopped_goes_nowhere() -> None:
    payments, client = Payments(), Client()
    with trio.fail_after(10):
        async with client.opened(payments.server) as session:  # (in memory, meanwhile)
            await session.call_tool("pay", {"order": "mem"})
        async with served(payments.server) as url, client.opened(url) as session:
            await session.call_tool("pay", {"order": "o-1"})
        assert await payments.paid("o-1") is False
        assert await payments.paid("mem") is False


async def test_the_low_level_http_context_notifies_its_session() -> None:
    # HttpRequestContext.notify_session: what RequestContext.session.notify is elsewhere.
    server = Server("raw")
    kept: list[Any] = []

    @server.tool()
    async def keep(ctx: Context) -> str:
        kept.append(ctx.request_context)
        return "kept"

    heard: list[NotificationReceived] = []
    arrived = trio.Event()

    def on_notification(note: NotificationReceived) -> None:
        heard.append(note)
        arrived.set()

    with trio.fail_after(10):
        async with (
            served(server) as url,
            open_client(url, era="legacy", on_notification=on_notification) as session,
        ):
            await session.call_tool("keep")
            (raw,) = kept
            assert await raw.notify_session("notifications/custom/ping", {"n": 1}) is True
            await arrived.wait()
            with pytest.raises(LocalProtocolError, match="capability"):
                # (the core's own checks stand: we declared no resources.subscribe)
                await raw.notify_session("notifications/resources/updated", {"uri": "x:/"})
    assert [(n.method, n.params) for n in heard] == [("notifications/custom/ping", {"n": 1})]


# ------------------------------------------------------------------ refused


def refusing_server(elicitation_id: Any = "e-1") -> Server:
    server = Server("refusing")

    @server.tool()
    async def complete_later(ctx: Context) -> str:
        try:
            ctx.elicitation_completer(elicitation_id)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}") from None
        return "made"

    return server


async def call_refused(server: Server, **options: Any) -> McpError:
    with trio.fail_after(10):
        async with open_client(server, **options) as session:
            with pytest.raises(McpError) as info:
                await session.call_tool("complete_later")
    return info.value


async def test_it_needs_2025_11_25() -> None:
    error = await call_refused(
        refusing_server(), era="legacy", protocol_version="2025-06-18", capabilities=URL_CAPS
    )
    assert error.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.message == (
        "notifications/elicitation/complete does not exist in protocol version 2025-06-18, "
        "the version of this session (it needs one of 2025-11-25)"
    )


async def test_the_modern_era_has_no_such_notification() -> None:
    # 2026-07-28 changelog, minor change 11: removed; the client retries instead.
    error = await call_refused(refusing_server(), era="modern", capabilities=URL_CAPS)
    assert error.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.message.startswith(
        "notifications/elicitation/complete does not exist in protocol version 2026-07-28"
    )
    assert "by retrying its request" in error.message
    assert error.data == {"protocolVersion": "2026-07-28", "supported": ["2025-11-25"]}


async def test_a_client_without_url_mode_started_no_url_elicitation() -> None:
    error = await call_refused(refusing_server(), era="legacy")
    assert error.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}


@pytest.mark.parametrize(
    ("elicitation_id", "problem"),
    [
        (7, "TypeError: elicitation_id must be a string"),
        ("", "ValueError: elicitation_id '' cannot be sent"),
        ("\udc80", "ValueError: elicitation_id '\\udc80' cannot be sent"),
    ],
)
async def test_an_id_that_cannot_be_sent_is_refused_at_once(
    elicitation_id: Any, problem: str
) -> None:
    with trio.fail_after(10):
        async with open_client(
            refusing_server(elicitation_id), era="legacy", capabilities=URL_CAPS
        ) as session:
            result = await session.call_tool("complete_later")
    assert result.is_error
    assert result.text.startswith(problem)

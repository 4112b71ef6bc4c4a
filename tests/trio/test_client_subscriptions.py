"""``client.subscribe()``: change notifications in both eras, from an in-memory server.

The server sends notifications from inside a tool call (``notify``), so each one is on
the wire before the call's answer; ``wait_all_tasks_blocked`` then lets the client's
notification handlers run.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from mcp_sansio import Connection, ConnectionConfig, Era, NotificationReceived
from mcp_sansio._json import dumps, loads
from mcp_trio import McpError, MemoryChannel, SessionClosed, memory_channel_pair, open_session
from mcp_trio._client import Client, open_client
from mcp_trio._client_common import MAX_UNREAD as _MAX_UNREAD
from mcp_trio._client_common import within as _within
from mcp_trio._client_subscriptions import Subscription

from .client_server_app import Recorder, make_handlers
from .client_server_app import server_config as app_config

ERAS = ("legacy", "modern")
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


async def notify(client: Client, method: str, params: dict[str, Any] | None = None) -> None:
    await client.call_tool("notify", {"method": method, "params": params})
    await trio.testing.wait_all_tasks_blocked()


def drain(sub: Subscription) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    while True:
        try:
            note = sub.receive_nowait()
        except trio.WouldBlock:
            return out
        out.append((note.method, (note.params or {}).get("uri")))


@pytest.mark.parametrize("era", ERAS)
async def test_subscribe_filters_and_delivers(era: str, autojump_clock: MockClock) -> None:
    target = (make_handlers(), app_config())
    async with (
        open_client(target, era=era) as client,  # type: ignore[arg-type]
        client.subscribe(tools=True, resources=["file:///r0.txt"]) as updates,
    ):
        assert updates.honored == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["file:///r0.txt"],
        }
        assert (updates.subscription_id is None) == (era == "legacy")
        await notify(client, TOOLS_CHANGED)
        await notify(client, PROMPTS_CHANGED)  # not asked for
        await notify(client, UPDATED, {"uri": "file:///r1.txt"})  # another resource
        await notify(client, UPDATED, {"uri": "file:///r0.txt"})
        assert drain(updates) == [(TOOLS_CHANGED, None), (UPDATED, "file:///r0.txt")]
        await notify(client, RESOURCES_CHANGED)
        assert drain(updates) == []


@pytest.mark.parametrize("era", ERAS)
async def test_async_iteration_and_coalescing(era: str, autojump_clock: MockClock) -> None:
    async with (
        open_client((make_handlers(), app_config()), era=era) as client,  # type: ignore[arg-type]
        client.subscribe(prompts=True, resource_list=True) as updates,
    ):
        for _ in range(3):
            await notify(client, PROMPTS_CHANGED)
        await notify(client, RESOURCES_CHANGED)
        received: list[NotificationReceived] = []
        async for note in updates:
            received.append(note)
            if len(received) == 2:
                break
        assert [n.method for n in received] == [PROMPTS_CHANGED, RESOURCES_CHANGED]
        assert drain(updates) == []


async def test_legacy_subscriptions_share_resource_subscriptions(
    autojump_clock: MockClock,
) -> None:
    recorder = Recorder()
    uri = "file:///r0.txt"
    async with open_client((make_handlers(recorder), app_config()), era="legacy") as client:
        async with client.subscribe(resources=[uri]) as first:
            async with client.subscribe(resources=[uri, uri]) as second:
                assert recorder.subscribed == [uri]
                await notify(client, UPDATED, {"uri": uri})
                assert drain(first) == drain(second) == [(UPDATED, uri)]
            assert recorder.unsubscribed == []
            assert second.ended and second.end_reason == "the subscription was closed"
        assert recorder.unsubscribed == [uri]


async def test_legacy_server_without_subscribe_honours_less(autojump_clock: MockClock) -> None:
    recorder = Recorder()
    caps: dict[str, Any] = {"tools": {}, "resources": {}}
    async with (
        open_client(
            (make_handlers(recorder), app_config(capabilities=caps)), era="legacy"
        ) as client,
        client.subscribe(tools=True, resources=["file:///r0.txt"]) as updates,
    ):
        assert updates.honored == {}
    assert recorder.subscribed == []


@pytest.mark.parametrize("era", ERAS)
async def test_session_close_fails_the_iteration(era: str, autojump_clock: MockClock) -> None:
    async with (
        open_client((make_handlers(), app_config()), era=era) as client,  # type: ignore[arg-type]
        client.subscribe(tools=True) as updates,
    ):
        await notify(client, TOOLS_CHANGED)
        await client.session.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert updates.ended
        assert (await updates.receive()).method == TOOLS_CHANGED  # read before the end
        with pytest.raises(SessionClosed):
            await updates.receive()


async def test_modern_server_ends_the_subscription(autojump_clock: MockClock) -> None:
    async with (
        open_client((make_handlers(), app_config()), era="modern") as client,
        client.subscribe(tools=True) as updates,
    ):
        await client.call_tool("end_subscriptions")
        async for _note in updates:
            pytest.fail("nothing was sent")  # pragma: no cover
        assert updates.end_reason == "the server ended the subscription"
        with pytest.raises(trio.EndOfChannel):
            updates.receive_nowait()


async def test_modern_subscriptions_are_demultiplexed(autojump_clock: MockClock) -> None:
    async with (
        open_client((make_handlers(), app_config()), era="modern") as client,
        client.subscribe(tools=True) as tools,
        client.subscribe(resources=["file:///r2.txt"]) as resources,
    ):
        assert tools.subscription_id != resources.subscription_id
        assert client.session.connection.pending_requests()  # the two listen requests
        await notify(client, TOOLS_CHANGED)
        await notify(client, UPDATED, {"uri": "file:///r2.txt"})
        assert drain(tools) == [(TOOLS_CHANGED, None)]
        assert drain(resources) == [(UPDATED, "file:///r2.txt")]
    # both listen requests were cancelled on the way out
    assert client.session.connection.pending_requests() == ()


class HandDriven:
    """A modern server core driven by hand, which can slip raw messages onto the wire."""

    def __init__(self, channel: MemoryChannel) -> None:
        self.channel = channel
        self.conn = Connection(
            "server",
            ConnectionConfig(era="modern", capabilities={"tools": {"listChanged": True}}),
        )
        self.before_ack: list[dict[str, Any]] = []
        self.subscription_ids: list[Any] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.channel.send(dumps(message))

    async def tagged(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification tagged with the (one) subscription's id."""
        [sid] = self.subscription_ids
        tagged = {**params, "_meta": {SUBSCRIPTION_ID: sid}}
        await self.send({"jsonrpc": "2.0", "method": method, "params": tagged})

    async def serve(self) -> None:
        try:
            while True:
                data = await self.channel.receive()
                self.conn.receive_message(data, now=trio.current_time())
                for message in self.conn.data_to_send():
                    decoded = loads(message)
                    if decoded.get("method") == "notifications/subscriptions/acknowledged":
                        sid = decoded["params"]["_meta"][SUBSCRIPTION_ID]
                        self.subscription_ids.append(sid)
                        for early in self.before_ack:
                            early["params"]["_meta"] = {SUBSCRIPTION_ID: sid}
                            await self.send(early)
                    await self.channel.send(message)
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            pass


@asynccontextmanager
async def subscribed(
    before_ack: Sequence[tuple[str, dict[str, Any]]] = (), **filters: Any
) -> AsyncGenerator[tuple[HandDriven, Client, Subscription]]:
    """A modern client subscribed (``filters``) through a :class:`HandDriven` server,
    which sends ``before_ack`` (method, params) ahead of the acknowledgment."""
    client_channel, server_channel = memory_channel_pair()
    server = HandDriven(server_channel)
    server.before_ack += [{"jsonrpc": "2.0", "method": m, "params": p} for m, p in before_ack]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve)
        async with (
            open_client(client_channel, era="modern") as client,
            client.subscribe(**filters) as updates,
        ):
            yield server, client, updates
        nursery.cancel_scope.cancel()


async def test_modern_notification_overtaking_its_acknowledgment_is_kept(
    autojump_clock: MockClock,
) -> None:
    async with subscribed([(TOOLS_CHANGED, {})], tools=True) as (_server, _client, updates):
        await trio.testing.wait_all_tasks_blocked()
        assert drain(updates) == [(TOOLS_CHANGED, None)]


async def test_modern_notifications_not_asked_for_are_dropped(autojump_clock: MockClock) -> None:
    # A server may tag anything with our subscription id; what we did not ask for is
    # dropped, which also bounds the queue by what we asked for (it grew per new URI).
    early = [(PROMPTS_CHANGED, {}), (UPDATED, {"uri": "file:///early"}), (TOOLS_CHANGED, {})]
    async with subscribed(early, tools=True) as (server, _client, updates):
        for i in range(1_000):
            await server.tagged(UPDATED, {"uri": f"file:///not-mine/{i}"})
        await server.tagged(RESOURCES_CHANGED, {})
        await trio.testing.wait_all_tasks_blocked()
        assert drain(updates) == [(TOOLS_CHANGED, None)]


async def test_modern_server_cancels_the_subscription(autojump_clock: MockClock) -> None:
    async with subscribed(tools=True) as (server, client, updates):
        [sid] = server.subscription_ids
        cancel = {"requestId": sid, "reason": "shutting down"}
        await server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        async for _note in updates:
            pytest.fail("nothing was sent")  # pragma: no cover
        assert updates.end_reason is not None
        assert "shutting down" in updates.end_reason
        assert client.session.connection.pending_requests() == ()


async def test_modern_listen_refused(autojump_clock: MockClock) -> None:
    # The server's core refuses a filter past its bounds with -32602. (A malformed one,
    # resources=[1], the client refuses itself now: TypeError, nothing sent.)
    config = app_config(max_resource_subscriptions=1)
    async with open_client((make_handlers(), config), era="modern") as client:
        with pytest.raises(McpError, match="names more than 1 URIs"):
            async with client.subscribe(resources=["file:///a", "file:///b"]):
                pytest.fail("refused")  # pragma: no cover


async def test_a_modern_server_closing_its_session_ends_the_subscription_gracefully(
    autojump_clock: MockClock,
) -> None:
    # 2026-07-28 subscriptions.mdx: a server ending a subscription on its own initiative
    # (shutdown) SHOULD answer the listen request with a result before the stream closes.
    client_channel, server_channel = memory_channel_pair()
    async with (
        open_session(
            server_channel,
            "server",
            handlers=make_handlers(),
            connection_config=app_config(),
        ) as server,
        open_client(client_channel, era="modern") as client,
        client.subscribe(tools=True) as updates,
    ):
        await trio.testing.wait_all_tasks_blocked()
        assert server.connection.subscriptions() != ()
        await server.aclose()
        async for _note in updates:
            pytest.fail("nothing was sent")  # pragma: no cover
        assert updates.end_reason == "the server ended the subscription"  # its result


async def test_updates_of_sub_resources_are_delivered_and_bounded(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The schema: the updated URI "might be a sub-resource of the one that the client
    # actually subscribed to". Each counts as its own unread notification, up to a bound.
    resources = ["file:///project/", "mem://note"]
    async with subscribed(resources=resources) as (server, _client, updates):
        uris = [
            "file:///project/src/main.py",
            "mem://note#title",
            "mem://note/1",
            "mem://notes",  # another resource that merely starts alike
            "file:///elsewhere",
        ]
        for uri in uris:
            await server.tagged(UPDATED, {"uri": uri})
        await trio.testing.wait_all_tasks_blocked()
        assert drain(updates) == [(UPDATED, uri) for uri in uris[:3]]
        for i in range(_MAX_UNREAD + 10):
            await server.tagged(UPDATED, {"uri": f"file:///project/{i}"})
        await trio.testing.wait_all_tasks_blocked()
        unread = drain(updates)
        assert len(unread) == _MAX_UNREAD and unread[0] == (UPDATED, "file:///project/10")
        assert "dropped the oldest" in caplog.text


@pytest.mark.parametrize(
    ("uri", "subscribed", "within"),
    [
        ("mem://note", "mem://note", True),
        ("mem://note/1", "mem://note", True),
        ("mem://note?x", "mem://note", True),
        ("mem://note#t", "mem://note", True),
        ("mem://notes", "mem://note", False),  # another resource that starts alike
        ("file:///dir/a", "file:///dir/", True),
        ("file:///dir", "file:///dir/", True),  # the directory itself
        ("mem://note?x=1#t", "mem://note?x=1", True),
        ("mem://note?x=10", "mem://note?x=1", False),
        ("mem://note?x=1/evil", "mem://note?x=1", False),  # a "/" inside a query value
        ("mem://a#b/c", "mem://a#b", False),  # a fragment has no parts
        ("urn:a:b:c", "urn:a:b", False),
    ],
)
def test_what_a_sub_resource_is(uri: str, subscribed: str, within: bool) -> None:
    assert _within(uri, subscribed) is within


async def test_legacy_subscribe_resource_is_counted_with_the_blocks(
    autojump_clock: MockClock,
) -> None:
    recorder = Recorder()
    a, b = "file:///r0.txt", "file:///r1.txt"
    async with open_client((make_handlers(recorder), app_config()), era="legacy") as client:
        await client.subscribe_resource(a)
        await client.subscribe_resource(a)  # (held already: nothing sent)
        async with client.subscribe(resources=[a]):
            pass
        assert recorder.subscribed == [a] and recorder.unsubscribed == []
        await client.unsubscribe_resource(a)
        assert recorder.unsubscribed == [a]
        # A block first: inside it, subscribe_resource() / unsubscribe_resource() send
        # nothing; the explicit one outlives the block, and its end is sent.
        async with client.subscribe(resources=[b]) as updates:
            await client.subscribe_resource(b)
            await client.unsubscribe_resource(b)
            await client.subscribe_resource(b)
        assert recorder.subscribed == [a, b] and recorder.unsubscribed == [a]
        await client.unsubscribe_resource(b)
        assert recorder.unsubscribed == [a, b]
        assert updates.ended and client._hub._uri_refs == {}


@pytest.mark.parametrize("era", ERAS)
async def test_subscribe_refuses_a_string_of_uris(era: str, autojump_clock: MockClock) -> None:
    async with open_client((make_handlers(None), app_config()), era=Era(era)) as client:
        with pytest.raises(TypeError, match="URIs must be a list of strings"):
            async with client.subscribe(resources="file:///a"):
                pytest.fail("opened")  # pragma: no cover
        with pytest.raises(TypeError, match="task ids must be a list of strings"):
            async with client.subscribe(tasks="t1"):
                pytest.fail("opened")  # pragma: no cover
        with pytest.raises(TypeError, match="URI must be a string, not int"):
            async with client.subscribe(resources=[1]):  # type: ignore[list-item]
                pytest.fail("opened")  # pragma: no cover

"""Change notifications: list changes and resource updates, to legacy sessions and to
modern ``subscriptions/listen`` streams."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig, LocalProtocolError
from mcp_trio import McpError, Session, open_memory_pair
from mcp_trio._server import Server

from ..schema import validate
from .test_server import Inbox, connect

LIST_CHANGED = (
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
)
METHODS = (
    *LIST_CHANGED,
    "notifications/resources/updated",
    "notifications/subscriptions/acknowledged",
)


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test that takes it runs once per era."""
    value: str = request.param
    return value


def make_server() -> Server:
    server = Server("notify")
    server.add_tool(lambda: "a", name="a")
    server.add_prompt(lambda: "p", name="p")
    server.add_resource(lambda: "r", "res://one")
    server.add_resource(lambda: "r", "res://two")
    return server


@asynccontextmanager
async def listening(
    server: Server, era: str, inbox: Inbox, **wanted: Any
) -> AsyncGenerator[Session]:
    """A client that hears about changes: a legacy session, or a modern client with a
    ``subscriptions/listen`` stream open for ``wanted``."""
    async with (
        connect(server, era, handlers=inbox.handlers) as client,
        trio.open_nursery() as nursery,
    ):
        if era == "modern":
            params = {"notifications": wanted}
            nursery.start_soon(client.request, "subscriptions/listen", params)
            ack = await inbox.next()
            assert ack.method == "notifications/subscriptions/acknowledged"
            assert ack.subscription_id is not None
        yield client
        nursery.cancel_scope.cancel()


def every_list() -> dict[str, Any]:
    return {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}


async def test_registry_changes_are_announced(era: str) -> None:
    server = make_server()
    inbox = Inbox(*METHODS)
    async with listening(server, era, inbox, **every_list()) as client:
        server.add_tool(lambda: "b", name="b")
        first = await inbox.next()
        assert first.method == "notifications/tools/list_changed"
        assert client.handshake is not None
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": first.method}
        if first.params is not None:
            message["params"] = first.params
        validate(client.handshake.protocol_version, "ToolListChangedNotification", message)
        server.remove_prompt("p")
        assert (await inbox.next()).method == "notifications/prompts/list_changed"
        server.add_resource(lambda x: x, "res://{x}")
        assert (await inbox.next()).method == "notifications/resources/list_changed"
        # a burst is coalesced into one notification per list
        for name in ("c", "d", "e"):
            server.add_tool(lambda: None, name=name)
        assert (await inbox.next()).method == "notifications/tools/list_changed"
        await inbox.assert_empty()
        # explicit notifications go out at once, and only once
        await server.notify_prompts_changed()
        assert (await inbox.next()).method == "notifications/prompts/list_changed"
        await inbox.assert_empty()
        tools = await client.request("tools/list")
        assert [t["name"] for t in tools["tools"]] == ["a", "b", "c", "d", "e"]


async def test_modern_subscriptions_get_only_what_they_asked_for() -> None:
    server = make_server()
    inbox = Inbox(*METHODS)
    async with listening(server, "modern", inbox, promptsListChanged=True):
        server.add_tool(lambda: "b", name="b")
        await server.notify_tools_changed()
        await server.notify_resource_updated("res://one")
        server.add_prompt(lambda: "q", name="q")
        note = await inbox.next()
        assert note.method == "notifications/prompts/list_changed"
        await inbox.assert_empty()


async def test_resource_updates_reach_subscribers_only(era: str) -> None:
    server = make_server()
    inbox = Inbox(*METHODS)
    async with listening(server, era, inbox, resourceSubscriptions=["res://one"]) as client:
        if era == "legacy":
            assert await client.request("resources/subscribe", {"uri": "res://one"}) == {}
        await server.notify_resource_updated("res://two")
        await server.notify_resource_updated("res://one")
        note = await inbox.next()
        assert note.method == "notifications/resources/updated"
        assert note.params is not None
        assert note.params["uri"] == "res://one"
        await inbox.assert_empty()
        if era == "legacy":
            await client.request("resources/unsubscribe", {"uri": "res://one"})
            await server.notify_resource_updated("res://one")
            await inbox.assert_empty()


async def test_sessions_are_forgotten_when_they_close(era: str) -> None:
    server = make_server()
    async with connect(server, era):
        await trio.testing.wait_all_tasks_blocked()
        assert len(server._tracker.sessions) == 1
    assert len(server._tracker.sessions) == 0
    # no session: changes and notifications go nowhere, without error
    server.add_tool(lambda: "b", name="b")
    await server.notify_tools_changed()
    await server.notify_resource_updated("res://one")


async def test_own_transport_with_a_session_hook(era: str) -> None:
    """``on_session=server.track_session`` (here through the hook that also runs a
    user's ``on_session``) for a transport run by hand."""
    server = make_server()
    hooked: list[Session] = []

    async def on_session(session: Session) -> None:
        hooked.append(session)
        await trio.sleep_forever()

    inbox = Inbox(*METHODS)
    async with (
        open_memory_pair(
            server_handlers=server.handlers(),
            server_connection_config=server.connection_config(),
            client_handlers=inbox.handlers,
            client_connection_config=ConnectionConfig(era=era),  # type: ignore[arg-type]
        ) as (client, session),
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(server._tracker.hook(on_session), session)
        await trio.testing.wait_all_tasks_blocked()
        assert hooked == [session]
        assert list(server._tracker.sessions) == [session]
        if era == "legacy":
            server.add_tool(lambda: "z", name="z")
            assert (await inbox.next()).method == "notifications/tools/list_changed"
        assert len((await client.request("tools/list"))["tools"]) == 1 + (era == "legacy")
        nursery.cancel_scope.cancel()
    assert not server._tracker.sessions


async def test_a_session_may_subscribe_to_a_bounded_number_of_resources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("mcp_trio._server_rpc.MAX_SUBSCRIPTIONS_PER_SESSION", 3)
    server = make_server()
    inbox = Inbox(*METHODS)
    async with listening(server, "legacy", inbox) as client:
        for n in range(3):
            await client.request("resources/subscribe", {"uri": f"res://{n}"})
        await client.request("resources/subscribe", {"uri": "res://0"})  # already: fine
        with pytest.raises(McpError) as caught:
            await client.request("resources/subscribe", {"uri": "res://3"})
        assert caught.value.error.code == -32602 and "unsubscribe" in caught.value.error.message
        await client.request("resources/unsubscribe", {"uri": "res://1"})
        await client.request("resources/subscribe", {"uri": "res://3"})
        await server.notify_resource_updated("res://3")
        note = await inbox.next()
        assert note.params is not None and note.params["uri"] == "res://3"


async def test_a_legacy_session_reaches_prompts_added_later_when_declared_up_front() -> None:
    # The README's recipe: capabilities are fixed at initialize, so a server that starts
    # without prompts declares them to let legacy clients list what comes later.
    late = Server("late")
    declared = Server(
        "declared",
        connection_config=ConnectionConfig(capabilities={"prompts": {"listChanged": True}}),
    )
    for server, reachable in ((late, False), (declared, True)):
        async with connect(server, "legacy") as client:
            server.add_prompt(lambda: "hello", name="p")
            if reachable:
                listing = await client.request("prompts/list")
                assert [p["name"] for p in listing["prompts"]] == ["p"]
            else:
                with pytest.raises(LocalProtocolError, match="'prompts' capability"):
                    await client.request("prompts/list")


NOTIFIERS = {
    "notify_tools_changed": lambda server: server.notify_tools_changed(),
    "notify_prompts_changed": lambda server: server.notify_prompts_changed(),
    "notify_resources_changed": lambda server: server.notify_resources_changed(),
    "notify_resource_updated": lambda server: server.notify_resource_updated("res://one"),
}


@pytest.mark.parametrize("notify", NOTIFIERS.values(), ids=NOTIFIERS.keys())
async def test_notifying_with_no_session_is_a_cancel_point(notify: Any) -> None:
    # Nothing to wait on: it was no cancel point, so a publisher looping on updates
    # could not be stopped (by a timeout, or its nursery's cancellation).
    server = make_server()
    with trio.CancelScope() as scope:
        scope.cancel()
        await notify(server)
        pytest.fail("not cancelled")  # pragma: no cover
    assert scope.cancelled_caught
    await notify(server)  # (uncancelled: goes nowhere, without error)


async def test_a_cancelled_notification_is_not_sent(era: str) -> None:
    # To a session whose sends go out at once (no cancel point either): the cancel
    # point comes before anything is sent, so a cancelled call sends nothing (a list
    # change included).
    server = make_server()
    inbox = Inbox(*METHODS)
    wanted = {**every_list(), "resourceSubscriptions": ["res://one", "res://two"]}
    async with listening(server, era, inbox, **wanted) as client:
        if era == "legacy":
            for uri in ("res://one", "res://two"):
                assert await client.request("resources/subscribe", {"uri": uri}) == {}
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope() as scope:
            scope.cancel()
            await server.notify_resource_updated("res://one")
        assert scope.cancelled_caught
        with trio.CancelScope() as scope:
            scope.cancel()
            await server.notify_tools_changed()
        assert scope.cancelled_caught
        await server.notify_resource_updated("res://two")
        note = await inbox.next()
        assert note.method == "notifications/resources/updated"
        assert note.params is not None
        assert note.params["uri"] == "res://two"
        await inbox.assert_empty()

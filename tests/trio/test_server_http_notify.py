"""``Server.serve_http``: change notifications reach HTTP clients, in both eras.

Real sockets on 127.0.0.1 (port 0) and the library's own client (``open_client``).
Legacy clients hear on their session's GET stream; modern ones on the
``subscriptions/listen`` stream of ``client.subscribe``. A :class:`Tap` records what a
client's session receives before the client filters it. That a client heard *nothing*
is checked with a later notification it does hear on the same stream (the sentinel,
``prompts/list_changed``), then ``wait_all_tasks_blocked``: what came before has been
handled by then.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import (
    Client,
    HttpServeHandle,
    NotificationContext,
    NotificationHandler,
    Server,
    open_client,
)

IO_TIMEOUT = 10
TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
RESOURCES = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"
CHANGES = (TOOLS, PROMPTS, RESOURCES, UPDATED)


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The clients' era: every test that takes it runs once per era."""
    value: str = request.param
    return value


def make_server() -> Server:
    server = Server("http-notify")
    server.add_tool(lambda: "a", name="a")
    server.add_prompt(lambda: "p", name="p")
    server.add_resource(lambda: "one", "res://one")
    server.add_resource(lambda: "two", "res://two")

    @server.tool()
    async def grow(name: str) -> str:
        """Register a tool, and announce a resource list change, from inside a call."""
        server.add_tool(lambda: name, name=name)
        await server.notify_resources_changed()
        return "grown"

    return server


async def serve(nursery: trio.Nursery, server: Server, **options: Any) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(server.serve_http, "127.0.0.1", 0, **options)
    )
    return handle


class Tap:
    """The change notifications a client's session receives, in the order its handlers
    ran, before the client's own filtering (a legacy subscription drops what it did not
    ask for)."""

    def __init__(self, client: Client) -> None:
        self.heard: list[tuple[str, str | None]] = []
        self._changed = trio.Event()
        handlers = client.session.handlers
        for method in CHANGES:
            handlers.set_notification_handler(
                method, self._recording(handlers.notification_handler(method))
            )

    def _recording(self, inner: NotificationHandler | None) -> NotificationHandler:
        async def record(ctx: NotificationContext) -> None:
            self.heard.append((ctx.method, (ctx.params or {}).get("uri")))
            self._changed.set()
            self._changed = trio.Event()
            if inner is not None:
                await inner(ctx)

        return record

    def count(self, method: str) -> int:
        return sum(m == method for m, _ in self.heard)

    def updates(self) -> list[str | None]:
        return [uri for m, uri in self.heard if m == UPDATED]

    async def wait_for(self, method: str, times: int = 1) -> None:
        while self.count(method) < times:
            await self._changed.wait()


async def sentinel(server: Server, *taps: Tap) -> None:
    """Send ``prompts/list_changed`` and wait until every tap has heard it, and every
    task is blocked: whatever was sent before it has been handled."""
    expected = [tap.count(PROMPTS) + 1 for tap in taps]
    await server.notify_prompts_changed()
    for tap, times in zip(taps, expected, strict=True):
        await tap.wait_for(PROMPTS, times)
    await trio.testing.wait_all_tasks_blocked()


async def test_list_changes_reach_every_client(nursery: trio.Nursery, era: str) -> None:
    server = make_server()
    handle = await serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(handle.url, era=era) as first,  # type: ignore[arg-type]
            open_client(handle.url, era=era) as second,  # type: ignore[arg-type]
            first.subscribe(tools=True, prompts=True, resource_list=True) as updates,
            second.subscribe(tools=True, prompts=True, resource_list=True),
        ):
            taps = (Tap(first), Tap(second))
            server.add_tool(lambda: "b", name="b")  # announced by the server's watcher
            assert (await updates.receive()).method == TOOLS
            await server.notify_prompts_changed()  # explicit: at once
            assert (await updates.receive()).method == PROMPTS
            server.add_resource(lambda x: x, "res://{x}")
            assert (await updates.receive()).method == RESOURCES
            for name in ("c", "d", "e"):  # a burst costs one notification
                server.add_tool(lambda: None, name=name)
            await taps[0].wait_for(TOOLS, 2)
            await sentinel(server, *taps)
            for tap in taps:
                assert [m for m, _ in tap.heard] == [TOOLS, PROMPTS, RESOURCES, TOOLS, PROMPTS]
            tools = await first.list_tools()
            assert [t.name for t in tools] == ["a", "grow", "b", "c", "d", "e"]


async def test_a_tool_that_changes_the_registry(nursery: trio.Nursery, era: str) -> None:
    server = make_server()
    handle = await serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(handle.url, era=era) as client,  # type: ignore[arg-type]
            client.subscribe(tools=True, resource_list=True) as updates,
        ):
            result = await client.call_tool("grow", {"name": "extra"})
            assert result.text == "grown"
            heard = {(await updates.receive()).method for _ in range(2)}
            assert heard == {TOOLS, RESOURCES}
            assert "extra" in [t.name for t in await client.list_tools()]


@pytest.mark.parametrize(
    ("watcher_era", "bystander_era"),
    [
        ("legacy", "legacy"),
        ("legacy", "modern"),
        ("modern", "legacy"),
        ("modern", "modern"),
    ],
)
async def test_resource_updates_reach_subscribers_only(
    nursery: trio.Nursery, watcher_era: str, bystander_era: str
) -> None:
    server = make_server()
    handle = await serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            open_client(handle.url, era=watcher_era) as watcher,  # type: ignore[arg-type]
            open_client(handle.url, era=bystander_era) as bystander,  # type: ignore[arg-type]
            watcher.subscribe(prompts=True, resources=["res://one"]) as updates,
            bystander.subscribe(prompts=True, tools=True),
        ):
            taps = (Tap(watcher), Tap(bystander))
            await server.notify_resource_updated("res://two")
            await server.notify_resource_updated("res://one")
            await sentinel(server, *taps)
            assert taps[0].updates() == ["res://one"]
            assert taps[1].updates() == []
            note = updates.receive_nowait()
            assert note.method == UPDATED
            assert note.params is not None and note.params["uri"] == "res://one"


async def test_unsubscribing_stops_resource_updates(nursery: trio.Nursery) -> None:
    server = make_server()
    handle = await serve(nursery, server)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(handle.url, era="legacy") as client:
            tap = Tap(client)
            async with client.subscribe(resources=["res://one"]) as updates:
                await server.notify_resource_updated("res://one")
                note = await updates.receive()
                assert (note.method, note.params) == (UPDATED, {"uri": "res://one"})
            # leaving the block sent resources/unsubscribe
            await client.subscribe_resource("res://two")
            await client.unsubscribe_resource("res://two")
            await server.notify_resource_updated("res://one")
            await server.notify_resource_updated("res://two")
            await sentinel(server, tap)
            assert tap.updates() == ["res://one"]


async def test_a_session_that_ends_takes_its_subscriptions_along(nursery: trio.Nursery) -> None:
    """The same session id comes back (the id factory repeats itself): a new session
    under it starts with no subscription."""
    server = make_server()
    handle = await serve(nursery, server, session_id_factory=lambda: "the-only-id")
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(handle.url, era="legacy") as first:
            await first.subscribe_resource("res://one")
            assert handle.http.sessions() == ("the-only-id",)
        assert handle.statistics().sessions == 0  # DELETE ended it
        async with open_client(handle.url, era="legacy") as second:
            assert handle.http.sessions() == ("the-only-id",)
            tap = Tap(second)
            await server.notify_resource_updated("res://one")
            await sentinel(server, tap)
            assert tap.updates() == []
            await second.subscribe_resource("res://one")
            await server.notify_resource_updated("res://one")
            await sentinel(server, tap)
            assert tap.updates() == ["res://one"]


async def test_serving_ends_cleanly(era: str) -> None:
    """After ``aclose`` nothing of the HTTP server is left: its watcher (here in the
    caller's handler nursery) ends, and notifying reaches nobody, without error."""
    server = make_server()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as handler_nursery, trio.open_nursery() as nursery:
            handle = await serve(nursery, server, handler_nursery=handler_nursery)
            async with (
                open_client(handle.url, era=era) as client,  # type: ignore[arg-type]
                client.subscribe(tools=True) as updates,
            ):
                await server.notify_tools_changed()
                assert (await updates.receive()).method == TOOLS
            await handle.aclose()
        server.add_tool(lambda: "late", name="late")
        await server.notify_tools_changed()
        await server.notify_resource_updated("res://one")

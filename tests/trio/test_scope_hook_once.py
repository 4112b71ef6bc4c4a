"""The ``required_scopes`` hook is asked once per request, on every transport, a
task-augmented ``tools/call`` included (the task keeps the scopes its call was checked
to need instead of asking again), and what a request was checked to need is on its
context (``ctx.needed_scopes``) without keeping the request alive afterwards."""

from __future__ import annotations

import gc
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, Literal

import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig
from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_sansio.http import HttpServerConfig
from mcp_trio import (
    BearerAuth,
    Context,
    Principal,
    Server,
    open_http_client,
    open_session,
    open_websocket_client,
)
from mcp_trio._channel import memory_channel_pair

IO_TIMEOUT = 10

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
ALICE = Principal(subject="alice", scopes="files:write run")


async def verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    return ALICE if token == "alice" else None


class Hook:
    """A ``required_scopes`` hook that counts what it is asked (and asks for "run"
    on every tools/call)."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def __call__(self, principal: Principal, method: str, params: Any) -> list[str]:
        self.asked[method] += 1
        return ["run"] if method == "tools/call" else []


def counted_server(hook: Hook, seen: list[frozenset[str] | None]) -> Server:
    server = Server("s", required_scopes=hook)

    @server.tool(scopes="files:write", task="required")
    async def export(ctx: Context) -> str:
        """Exports everything (as a task)."""
        return "exported"

    @server.tool(scopes="files:write")
    async def peek(ctx: Context) -> str:
        """Peeks (no task)."""
        assert ctx.needed_scopes == ctx.request_context.needed_scopes
        seen.append(ctx.needed_scopes)
        return "peeked"

    return server


Transport = Literal["http", "websocket", "memory"]
Connect = Callable[[], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def serving(
    nursery: trio.Nursery, transport: Transport, server: Server, auth: Any = None
) -> AsyncIterator[Connect]:
    auth = auth if auth is not None else BearerAuth(verify_token=verify)
    config = ConnectionConfig(era="modern", capabilities=EXT)
    headers = {"Authorization": "Bearer alice"}
    if transport == "http":
        handle = await nursery.start(partial(server.serve_http, port=0, authenticate=auth))
        yield partial(open_http_client, handle.url, headers=headers, connection_config=config)
    elif transport == "websocket":
        url = (
            await nursery.start(partial(server.serve_websocket, "127.0.0.1", 0, authenticate=auth))
        ).url
        yield partial(open_websocket_client, url, headers=headers, connection_config=config)
    else:
        # A session that a transport authenticated as ALICE (what serve_websocket
        # builds), over memory channels.
        tasks = server._methods.tasks

        @asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            client_channel, server_channel = memory_channel_pair()
            async with tasks.running(inherit=False) as tasks_nursery:
                with tasks.serving(tasks_nursery):
                    async with (
                        open_session(
                            server_channel,
                            "server",
                            handlers=server.handlers(),
                            connection_config=server.connection_config(),
                            principal=ALICE,
                        ),
                        open_session(client_channel, "client", connection_config=config) as client,
                    ):
                        await client.start()
                        yield client

        yield connect


@pytest.mark.parametrize("transport", ["http", "websocket", "memory"])
async def test_the_hook_is_asked_once_per_request(
    nursery: trio.Nursery, transport: Transport
) -> None:
    hook = Hook()
    seen: list[frozenset[str] | None] = []
    server = counted_server(hook, seen)
    with trio.fail_after(IO_TIMEOUT):
        async with serving(nursery, transport, server) as connect, connect() as client:
            created = await client.request("tools/call", {"name": "export", "arguments": {}})
            assert hook.asked["tools/call"] == 1  # the task's call: checked once, not twice
            run = server._methods.tasks.lookup(created["taskId"])
            assert run is not None and run.scopes == {"files:write", "run"}
            while (await client.request("tasks/get", {"taskId": created["taskId"]}))[
                "status"
            ] != "completed":
                await trio.testing.wait_all_tasks_blocked()
            assert hook.asked["tasks/get"] >= 1
            asked = hook.asked["tasks/get"]
            await client.request("tasks/get", {"taskId": created["taskId"]})
            assert hook.asked["tasks/get"] == asked + 1
            await client.request("tools/call", {"name": "peek", "arguments": {}})
            assert hook.asked["tools/call"] == 2  # a plain call: once too
            assert seen == [frozenset({"files:write", "run"})]
        nursery.cancel_scope.cancel()


async def test_over_http_a_task_keeps_the_http_configs_scopes_too(nursery: trio.Nursery) -> None:
    # What the call was checked to need is what the task needs: over HTTP that includes
    # what HttpServerConfig.required_scopes adds (each hook asked once about the call).
    class Audit(Hook):
        def __call__(self, principal: Principal, method: str, params: Any) -> list[str]:
            super().__call__(principal, method, params)
            return ["audit"] if method == "tools/call" else []

    async def auditor(token: str) -> Principal:
        await trio.lowlevel.checkpoint()
        return Principal(subject="alice", scopes="files:write run audit")

    hook, config_hook = Hook(), Audit()
    server = counted_server(hook, [])
    auth = BearerAuth(verify_token=auditor)
    http_config = HttpServerConfig(required_scopes=config_hook)
    config = ConnectionConfig(era="modern", capabilities=EXT)
    with trio.fail_after(IO_TIMEOUT):
        handle = await nursery.start(
            partial(server.serve_http, port=0, authenticate=auth, http_config=http_config)
        )
        headers = {"Authorization": "Bearer alice"}
        async with open_http_client(handle.url, headers=headers, connection_config=config) as c:
            created = await c.request("tools/call", {"name": "export", "arguments": {}})
            assert hook.asked["tools/call"] == config_hook.asked["tools/call"] == 1
            run = server._methods.tasks.lookup(created["taskId"])
            assert run is not None and run.scopes == {"files:write", "run", "audit"}
        nursery.cancel_scope.cancel()


async def test_without_a_principal_the_hook_is_not_asked() -> None:
    hook = Hook()
    seen: list[frozenset[str] | None] = []
    server = counted_server(hook, seen)
    with trio.fail_after(IO_TIMEOUT):
        async with server.connect_in_memory(era="modern", capabilities=EXT) as client:
            await client.request("tools/call", {"name": "export", "arguments": {}})
            await client.request("tools/call", {"name": "peek", "arguments": {}})
    assert hook.asked == {}
    assert seen == [None]  # nothing was checked (nobody is authenticated)


async def test_an_idle_http_connection_keeps_no_principal_nor_params(
    nursery: trio.Nursery,
) -> None:
    # Each request is authenticated anew: once answered, neither its principal nor
    # its params are kept (not by the scope check, nor by what it handed on), though
    # the keep-alive connection stays open.
    principals: list[weakref.ref[Principal]] = []
    params_seen: list[str] = []

    async def fresh(request: Any) -> Principal:
        await trio.lowlevel.checkpoint()
        principal = Principal(subject="alice", scopes="files:write run")
        principals.append(weakref.ref(principal))
        return principal

    class Watching(Hook):
        def __call__(self, principal: Principal, method: str, params: Any) -> list[str]:
            if method == "tools/call":
                params_seen.append(params["arguments"]["x"][0])
            return super().__call__(principal, method, params)

    hook = Watching()
    server = counted_server(hook, [])
    auth = fresh
    with trio.fail_after(IO_TIMEOUT):
        async with serving(nursery, "http", server, auth) as connect, connect() as client:
            for name in ("peek", "export"):
                # (a string made at run time: no constant of this code holds it)
                marker = "-".join(("unique", name, "marker"))
                await client.request("tools/call", {"name": name, "arguments": {"x": [marker]}})
            del marker
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            assert len(principals) == 3  # server/discover, then the two calls
            assert all(ref() is None for ref in principals)
            assert len(params_seen) == 2
            wanted = set(params_seen)
            params_seen.clear()
            kept = [
                o
                for o in gc.get_objects()
                if type(o) is list and o and type(o[0]) is str and o[0] in wanted
            ]
            assert kept == []
        nursery.cancel_scope.cancel()

"""A task needs the OAuth scopes its ``tools/call`` needed: ``tasks/get``, ``tasks/update``,
``tasks/cancel`` and a ``subscriptions/listen`` naming it, over HTTP and WebSocket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig
from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_trio import (
    BearerAuth,
    Client,
    Context,
    McpError,
    Principal,
    Server,
    open_http_client,
    open_websocket_client,
)

IO_TIMEOUT = 10

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
FORM = {"type": "object", "properties": {"ok": {"type": "string"}}, "required": ["ok"]}
TOKENS = {
    "writer": Principal(subject="alice", scopes="files:read files:write run"),
    "writer2": Principal(subject="alice", scopes="files:write run"),
    "reader": Principal(subject="alice", scopes="files:read files:write"),
    "mallory": Principal(subject="mallory", scopes="files:read files:write run"),
}


async def verify(token: str) -> Principal | None:
    await trio.lowlevel.checkpoint()
    return TOKENS.get(token)


def task_server(asking: trio.Event) -> Server:
    # The tool declares files:write; the server's hook adds "run" to every tools/call.
    server = Server(
        "s", required_scopes=lambda p, method, params: ["run"] if method == "tools/call" else []
    )

    @server.tool(scopes="files:write", task="required")
    async def export(ctx: Context) -> str:
        """Exports everything, once confirmed."""
        asking.set()
        answer = await ctx.elicit("Really export everything?", FORM)
        return f"exported ({answer.content})"

    return server


Transport = Literal["http", "websocket"]


@asynccontextmanager
async def serving(
    nursery: trio.Nursery, transport: Transport, server: Server
) -> AsyncIterator[Any]:
    auth = BearerAuth(verify_token=verify)
    config = ConnectionConfig(era="modern", capabilities=EXT)
    if transport == "http":
        handle = await nursery.start(partial(server.serve_http, port=0, authenticate=auth))
        url = handle.url

        def connect(token: str) -> Any:
            return open_http_client(
                url, headers={"Authorization": f"Bearer {token}"}, connection_config=config
            )

    else:
        url = (
            await nursery.start(partial(server.serve_websocket, "127.0.0.1", 0, authenticate=auth))
        ).url

        def connect(token: str) -> Any:
            return open_websocket_client(
                url, headers={"Authorization": f"Bearer {token}"}, connection_config=config
            )

    yield connect


async def refused(client: Client, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(McpError) as info:
        await client.request(method, params)
    return info.value.code


@pytest.mark.parametrize("transport", ["http", "websocket"])
async def test_a_task_needs_the_scopes_of_its_call(
    nursery: trio.Nursery, transport: Transport
) -> None:
    asking = trio.Event()
    server = task_server(asking)
    with trio.fail_after(IO_TIMEOUT):
        async with (
            serving(nursery, transport, server) as connect,
            connect("writer") as writer,
            connect("reader") as reader,
            connect("writer2") as writer2,
            connect("mallory") as mallory,
        ):
            created = await writer.request("tools/call", {"name": "export", "arguments": {}})
            task_id = created["taskId"]
            await asking.wait()
            await trio.testing.wait_all_tasks_blocked()
            got = await writer.request("tasks/get", {"taskId": task_id})
            assert got["status"] == "input_required"
            key = next(iter(got["inputRequests"]))
            answer = {key: {"action": "accept", "content": {"ok": "yes"}}}
            # Same subject, but no "run" (the hook's scope): it can neither read, steer,
            # cancel nor listen to the task.
            for method, params in (
                ("tasks/get", {"taskId": task_id}),
                ("tasks/update", {"taskId": task_id, "inputResponses": answer}),
                ("tasks/cancel", {"taskId": task_id}),
                ("subscriptions/listen", {"notifications": {"taskIds": [task_id]}}),
            ):
                assert await refused(reader, method, params) == 403, method
            # Another subject, scopes or not: the task is unknown to it (not a 403).
            assert await refused(mallory, "tasks/get", {"taskId": task_id}) == -32602
            # Another token of the subject with every scope the call needed steers it.
            await writer2.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
            while (got := await writer2.request("tasks/get", {"taskId": task_id}))[
                "status"
            ] != "completed":
                await trio.testing.wait_all_tasks_blocked()
            assert got["result"]["content"][0]["text"].startswith("exported")
            # Unknown ids need no scope: the handler tells.
            assert await refused(reader, "tasks/get", {"taskId": "nope"}) == -32602
        nursery.cancel_scope.cancel()


async def test_without_a_principal_no_task_needs_a_scope() -> None:
    # In memory (as on stdio, or HTTP without authenticate) nobody is authenticated:
    # the task records no scope, and tasks/get is served.
    asking = trio.Event()
    server = task_server(asking)
    with trio.fail_after(IO_TIMEOUT):
        async with server.connect_in_memory(era="modern", capabilities=EXT) as client:
            created = await client.request("tools/call", {"name": "export", "arguments": {}})
            await asking.wait()
            run = server._methods.tasks.lookup(created["taskId"])
            assert run is not None and run.scopes == frozenset()
            got = await client.request("tasks/get", {"taskId": created["taskId"]})
            assert got["status"] in ("working", "input_required")
            await client.request("tasks/cancel", {"taskId": created["taskId"]})


def test_scopes_of_reads_only_well_formed_ids() -> None:
    runner = Server("s")._methods.tasks
    alice = Principal(subject="alice")
    for method, params in (
        ("tasks/get", None),
        ("tasks/get", {"taskId": 3}),
        ("subscriptions/listen", {"notifications": {"taskIds": "x"}}),
        ("subscriptions/listen", {"notifications": [1]}),
    ):
        assert runner.scopes_of(alice, method, params) == frozenset()

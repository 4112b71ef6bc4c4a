"""``notifications/tasks`` from our server: on ``subscriptions/listen`` streams that name
the task in ``taskIds``, with the task's full state, to its owner only, bounded."""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig
from mcp_trio import (
    TASKS_EXTENSION,
    BearerAuth,
    Context,
    McpError,
    Principal,
    Server,
    Session,
    SessionClosed,
    TaskConfig,
    open_client,
    open_http_client,
)
from mcp_trio._tasks import TaskRun, TaskRunner

from .test_server import Inbox

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
TASKS = "notifications/tasks"
ACK = "notifications/subscriptions/acknowledged"
FORM: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}


def make_server(config: TaskConfig | None = None) -> Server:
    server = Server("notify", task_config=config)

    @server.tool(task=True)
    async def ask(ctx: Context) -> str:
        """Works, asks, works, answers."""
        await trio.sleep(1)
        answer = await ctx.elicit("Name?", FORM)
        await trio.sleep(2)
        return f"hi {(answer.content or {}).get('name')}"

    @server.tool(task=True)
    async def slow(seconds: float = 10) -> str:
        """Sleeps, then answers."""
        await trio.sleep(seconds)
        return "slept"

    return server


async def test_each_change_is_pushed_with_the_full_state(autojump_clock: MockClock) -> None:
    server = make_server()
    inbox, others = Inbox(TASKS, ACK), Inbox(TASKS, ACK)
    async with (
        server.connect_in_memory(
            era="modern", capabilities=EXT, client_handlers=inbox.handlers
        ) as c,
        server.connect_in_memory(
            era="modern", capabilities=EXT, client_handlers=others.handlers
        ) as other,
        trio.open_nursery() as nursery,
    ):
        created = await c.request("tools/call", {"name": "ask", "arguments": {}})
        task_id = created["taskId"]
        listen = {"notifications": {"taskIds": [task_id, task_id], "toolsListChanged": True}}
        nursery.start_soon(c.request, "subscriptions/listen", listen)
        ack = await inbox.next()
        assert ack.method == ACK
        assert ack.params is not None
        assert ack.params["notifications"] == {"taskIds": [task_id], "toolsListChanged": True}
        # Another client listening for another task hears nothing of this one.
        slow_id = (
            await other.request("tools/call", {"name": "slow", "arguments": {"seconds": 4}})
        )["taskId"]
        nursery.start_soon(
            other.request, "subscriptions/listen", {"notifications": {"taskIds": [slow_id]}}
        )
        assert (await others.next()).method == ACK

        asked = await inbox.next()  # (the tool asks after a second)
        got = await c.request("tasks/get", {"taskId": task_id})
        assert asked.method == TASKS and asked.subscription_id == ack.subscription_id
        params = dict(asked.params or {})
        params.pop("_meta")
        assert params == {k: v for k, v in got.items() if k not in ("resultType", "_meta")}
        assert params["status"] == "input_required" and "inputRequests" in params

        key = next(iter(params["inputRequests"]))
        answer = {"action": "accept", "content": {"name": "Ada"}}
        await c.request("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
        working = await inbox.next()
        assert working.params is not None and working.params["status"] == "working"
        done = await inbox.next()
        assert done.params is not None and done.params["status"] == "completed"
        assert done.params["result"]["content"][0]["text"] == "hi Ada"
        finished = await others.next()
        assert finished.params is not None and finished.params["taskId"] == slow_id
        await inbox.assert_empty()
        nursery.cancel_scope.cancel()


async def test_task_ids_without_the_extension_are_refused(autojump_clock: MockClock) -> None:
    server = make_server()
    async with server.connect_in_memory(era="modern", capabilities={}) as c:
        with pytest.raises(McpError) as info:
            await c.request("subscriptions/listen", {"notifications": {"taskIds": ["x"]}})
        assert info.value.code == -32021
        assert info.value.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


async def test_a_server_without_task_tools_honors_no_task_ids(autojump_clock: MockClock) -> None:
    server = Server("plain")
    server.add_tool(lambda: "a", name="a")
    inbox = Inbox(ACK)
    async with (
        server.connect_in_memory(
            era="modern", capabilities=EXT, client_handlers=inbox.handlers
        ) as c,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(c.request, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}})
        ack = await inbox.next()
        assert ack.params is not None and ack.params["notifications"] == {}
        nursery.cancel_scope.cancel()


async def test_the_queue_of_notifications_is_bounded(autojump_clock: MockClock) -> None:
    runner = TaskRunner(TaskConfig(max_pending_notifications=2))
    delivered: list[tuple[str | None, str, str | None]] = []
    gate = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        await gate.wait()
        delivered.append((owner, params["status"], params.get("statusMessage")))

    runner.deliver = deliver

    async with runner.running():
        run = TaskRun(runner, "optional", owner="alice")
        assert run.start()
        for n in range(5):
            run.set_message(f"step {n}")  # five changes while delivery is stuck...
        run.settle({"content": []}, None)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
    # ...and the end: only the newest two were kept.
    assert delivered == [("alice", "working", "step 4"), ("alice", "completed", None)]


async def test_another_principal_never_hears_of_a_task() -> None:
    # Over Streamable HTTP with authentication: bob asks for alice's task id and is
    # acknowledged (the ack only echoes what was asked), but never told anything.
    tokens = {"alice": Principal(subject="alice"), "bob": Principal(subject="bob")}

    async def verify(token: str) -> Principal | None:
        return tokens.get(token)

    auth = BearerAuth(verify_token=verify, resource_metadata_url="http://127.0.0.1/.well-known/x")
    server = make_server(TaskConfig(poll_interval_ms=100))
    config = ConnectionConfig(era="modern", capabilities=EXT)
    bob_inbox = Inbox(TASKS, ACK)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(
                partial(server.serve_http, "127.0.0.1", 0, authenticate=auth)
            )
            async with (
                open_client(
                    handle.url,
                    era="modern",
                    capabilities=EXT,
                    headers={"Authorization": "Bearer alice"},
                ) as alice,
                open_http_client(
                    handle.url,
                    connection_config=config,
                    handlers=bob_inbox.handlers,
                    headers={"Authorization": "Bearer bob"},
                ) as bob,
            ):
                task = await alice.call_tool_as_task("slow", {"seconds": 1})
                assert task.task_id is not None
                watch = {"notifications": {"taskIds": [task.task_id]}}
                nursery.start_soon(partial(listen, bob, watch))
                assert (await bob_inbox.next()).method == ACK
                async with alice.subscribe(tasks=[task.task_id]) as updates:
                    assert updates.honored == {"taskIds": [task.task_id]}
                    note = await updates.receive()
                    assert note.params is not None and note.params["status"] == "completed"
                with pytest.raises(McpError):
                    await bob.request("tasks/get", {"taskId": task.task_id})
                await bob_inbox.assert_empty()
            nursery.cancel_scope.cancel()


async def listen(session: Session, params: dict[str, Any]) -> None:
    with contextlib.suppress(SessionClosed):  # (ended with the session)
        await session.request("subscriptions/listen", params)

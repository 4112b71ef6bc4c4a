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


async def test_an_end_pushed_to_a_listener_does_not_collect_the_task(
    autojump_clock: MockClock,
) -> None:
    # A notification may have reached another stream of the owner, or nobody: only the
    # caller's own tasks/get of the end (or a cancel of the running task) collects it.
    server = make_server(TaskConfig(max_tasks_per_owner=1, retention_after_fetch_ms=0))
    inbox = Inbox(TASKS, ACK)
    async with (
        server.connect_in_memory(
            era="modern", capabilities=EXT, client_handlers=inbox.handlers
        ) as c,
        trio.open_nursery() as nursery,
    ):

        async def call(seconds: float) -> dict[str, Any]:
            return await c.request(
                "tools/call", {"name": "slow", "arguments": {"seconds": seconds}}
            )

        task_id = (await call(1))["taskId"]
        nursery.start_soon(
            c.request, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}
        )
        assert (await inbox.next()).method == ACK
        done = await inbox.next()
        assert done.params is not None and done.params["status"] == "completed"
        await trio.testing.wait_all_tasks_blocked()
        assert (await call(1))["resultType"] == "complete"  # (still held: the quota is full)
        got = await c.request("tasks/get", {"taskId": task_id})
        assert got["status"] == "completed"
        assert (await call(1))["resultType"] == "task"  # (fetched: it made room)
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


async def test_the_queue_keeps_the_latest_state_per_task_and_is_bounded(
    autojump_clock: MockClock,
) -> None:
    runner = TaskRunner(TaskConfig(max_pending_notifications=2))
    delivered: list[tuple[str | None, str, str | None]] = []
    gate = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        await gate.wait()
        delivered.append((owner, params["status"], params.get("statusMessage")))

    runner.deliver = deliver

    async with runner.running():
        chatty, quiet, third = (TaskRun(runner, "optional", owner=o) for o in "abc")
        assert chatty.start() and quiet.start() and third.start()
        quiet.settle({"content": []}, None)  # an end...
        for n in range(5):
            chatty.set_message(f"step {n}")  # ...then a chatty task: one entry, its latest
        third.set_message("x")  # a third task: past the bound, but the end is kept
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
    assert delivered == [("b", "completed", None), ("c", "working", "x")]


async def test_delivery_goes_on_while_any_serve_block_is_open(autojump_clock: MockClock) -> None:
    # Several serve blocks share one runner, each with a delivery loop: whichever block
    # ends, the others deliver every later change (each end, a few times, since
    # trio's wake-up order is random).
    for close in [0, 1, 2] * 3:
        assert await three_blocks_one_closing(close) == [
            "before 0",
            "before 1",
            "before 2",
            "after",
        ], close


async def three_blocks_one_closing(close: int) -> list[str | None]:
    runner = TaskRunner(TaskConfig())
    delivered: list[str | None] = []

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        delivered.append(params.get("statusMessage"))

    runner.deliver = deliver
    ends = [trio.Event() for _ in range(3)]

    async def block(end: trio.Event, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with runner.running(inherit=False):
            task_status.started()
            await end.wait()

    async with trio.open_nursery() as nursery:
        for end in ends:
            await nursery.start(block, end)
        run = TaskRun(runner, "optional")
        assert run.start()
        for n, end in enumerate(ends):
            run.set_message(f"before {n}")
            await trio.testing.wait_all_tasks_blocked()
            if n == close:
                end.set()
                await trio.testing.wait_all_tasks_blocked()
        run.set_message("after")
        await trio.testing.wait_all_tasks_blocked()
        for end in ends:
            end.set()
    return delivered


async def test_a_blocks_delivery_cut_short_is_left_to_another(autojump_clock: MockClock) -> None:
    runner = TaskRunner(TaskConfig())
    delivered: list[str | None] = []
    hung = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        if not hung.is_set():
            hung.set()
            await trio.sleep_forever()  # (the first try hangs: its block ends under it)
        delivered.append(params.get("statusMessage"))

    runner.deliver = deliver
    ends = [trio.Event(), trio.Event()]

    async def block(end: trio.Event, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with runner.running(inherit=False):
            task_status.started()
            await end.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(block, ends[0])
        run = TaskRun(runner, "optional")
        assert run.start()
        run.set_message("one")
        await hung.wait()  # the first block's loop is stuck delivering it
        await nursery.start(block, ends[1])
        ends[0].set()  # ...and its block ends: the second block's loop delivers it
        await trio.testing.wait_all_tasks_blocked()
        assert delivered == ["one"]
        ends[1].set()


async def test_what_waits_when_the_last_block_closes_is_dropped(autojump_clock: MockClock) -> None:
    # The only block ends while its loop delivers one state (cut short) and another
    # waits: neither is kept, or a block opened later would send them stale.
    runner = TaskRunner(TaskConfig())
    delivered: list[str | None] = []
    hung = trio.Event()

    async def deliver(owner: str | None, params: dict[str, Any]) -> None:
        if not hung.is_set():
            hung.set()
            await trio.sleep_forever()
        delivered.append(params.get("statusMessage"))

    runner.deliver = deliver

    async def block(end: trio.Event, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with runner.running(inherit=False):
            task_status.started()
            await end.wait()

    async with trio.open_nursery() as nursery:
        end = trio.Event()
        await nursery.start(block, end)
        first, second = TaskRun(runner, "optional"), TaskRun(runner, "optional")
        assert first.start() and second.start()
        first.set_message("one")
        await hung.wait()  # (delivering "one", for ever)
        second.set_message("two")  # (waits behind it)
        end.set()
    assert not runner._outbox
    first.set_message("three")  # (no block is open: nothing to queue it for)
    async with trio.open_nursery() as nursery:
        end = trio.Event()
        await nursery.start(block, end)
        await trio.testing.wait_all_tasks_blocked()
        assert delivered == []
        second.set_message("four")  # (a change while a block is open is delivered)
        await trio.testing.wait_all_tasks_blocked()
        assert delivered == ["four"]
        end.set()


async def test_no_listener_no_send(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sessions none of whose listen streams names a task are not sent its changes.
    sent: list[str] = []
    original = Session.notify

    async def counting(self: Session, method: str, params: Any = None) -> None:
        if method == TASKS:
            sent.append((params or {}).get("status", ""))
        await original(self, method, params)

    monkeypatch.setattr(Session, "notify", counting)
    server = make_server()
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(open_client(server, era="modern", capabilities=EXT))
            for _ in range(5)
        ]
        listening = await clients[1].call_tool_as_task("slow", {"seconds": 5})
        assert listening.task_id is not None
        async with clients[1].subscribe(tasks=[listening.task_id]) as sub:
            await clients[0].call_tool("slow", {"seconds": 1})  # nobody listens to it
            assert sent == []
            note = await sub.receive()
            assert note.params is not None and note.params["status"] == "completed"
    assert sent == ["completed"]  # one session, one send: its own task's end


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

"""A task's ``statusMessage`` is at most ``TaskConfig.max_status_message_bytes`` long: a
longer one is cut (the tool goes on), whether a progress message or a failure's.

Every test runs on the ``autojump_clock``: the tools' sleeps take no real time.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ErrorData
from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_trio import Context, McpError, Server, TaskConfig

EXT: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
FORM: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "string"}}}
CAP = 64


def test_task_config_max_status_message_bytes() -> None:
    assert TaskConfig().max_status_message_bytes == 4096
    assert TaskConfig(max_status_message_bytes=3).max_status_message_bytes == 3
    for bad in (2, 0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="max_status_message_bytes"):
            TaskConfig(max_status_message_bytes=bad)  # type: ignore[arg-type]


def server() -> Server:
    s = Server("s", task_config=TaskConfig(max_status_message_bytes=CAP))

    @s.tool(task="required")
    async def chatty(ctx: Context, size: int) -> str:
        """Reports a long progress message, asks, then works on."""
        await ctx.report_progress(1, 2, "é" * size)
        await ctx.elicit("Name?", FORM)
        await trio.sleep(10)
        return "done"

    @s.tool(task="required")
    async def busy(ctx: Context, size: int) -> str:
        """Reports a long progress message, then works on (never asks)."""
        await ctx.report_progress(1, 2, "é" * size)
        await trio.sleep(10)
        return "done"

    @s.tool(task="required")
    async def crashing(size: int) -> str:
        """Fails with a long message."""
        await trio.sleep(1)
        raise McpError(ErrorData(code=-32000, message="x" * size))

    return s


async def get(c: Any, task_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = await c.request("tasks/get", {"taskId": task_id})
    return answer


async def test_a_long_progress_message_is_cut(autojump_clock: MockClock) -> None:
    async with server().connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "chatty", "arguments": {"size": 10_000}})
        await trio.sleep(1)
        asking = await get(c, created["taskId"])
        message = asking["statusMessage"]
        assert asking["status"] == "input_required"  # (the tool went on)
        assert message == "é" * ((CAP - 3) // 2) + "\u2026"
        assert len(message.encode()) <= CAP
        key = next(iter(asking["inputRequests"]))
        await c.request(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {key: {"action": "accept", "content": {"n": "x"}}},
            },
        )
        working = await get(c, created["taskId"])
        assert working["status"] == "working" and working["statusMessage"] == message
        await c.request("tasks/cancel", {"taskId": created["taskId"]})


async def test_a_long_progress_message_is_cut_while_the_task_works(
    autojump_clock: MockClock,
) -> None:
    # Cut when it is set, not only when the task moves on: a task that stays working
    # shows it cut too.
    async with server().connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "busy", "arguments": {"size": 1000}})
        await trio.sleep(1)
        working = await get(c, created["taskId"])
        assert working["status"] == "working"
        assert working["statusMessage"] == "é" * ((CAP - 3) // 2) + "\u2026"
        await c.request("tasks/cancel", {"taskId": created["taskId"]})


async def test_a_short_progress_message_is_kept(autojump_clock: MockClock) -> None:
    async with server().connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "chatty", "arguments": {"size": 32}})
        await trio.sleep(1)
        assert (await get(c, created["taskId"]))["statusMessage"] == "é" * 32  # (64 bytes)
        await c.request("tasks/cancel", {"taskId": created["taskId"]})


@pytest.mark.parametrize("size", [1, 1000], ids=["fits", "cut"])
async def test_a_lone_surrogate_in_a_progress_message_is_replaced(
    autojump_clock: MockClock, size: int
) -> None:
    # No JSON text can carry one (os.fsdecode of a name that is not UTF-8, say): kept as
    # it was, the task's tasks/get could not be encoded.
    s = Server("s", task_config=TaskConfig(max_status_message_bytes=CAP))

    @s.tool(task="required")
    async def listing(ctx: Context) -> str:
        """Reports the file it reads, then works on."""
        await ctx.report_progress(1, 2, "file \udcff" + "x" * size)
        await trio.sleep(10)
        return "done"

    async with s.connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "listing", "arguments": {}})
        await trio.sleep(1)
        working = await get(c, created["taskId"])
        expected = "file \ufffd" + "x" * size
        if size > 1:
            expected = expected[: CAP - 3 - 2] + "\u2026"  # (U+FFFD is 3 bytes)
        assert working["status"] == "working" and working["statusMessage"] == expected
        await c.request("tasks/cancel", {"taskId": created["taskId"]})


async def test_a_lone_surrogate_in_a_failure_message_fails_the_task_plainly(
    autojump_clock: MockClock,
) -> None:
    # The tool's error cannot be encoded: the task fails with the server's internal
    # error instead (as a plain call is answered), and tasks/get can be encoded.
    s = Server("s")

    @s.tool(task="required")
    async def failing() -> str:
        """Fails with a message no JSON text can carry."""
        raise McpError(ErrorData(code=-32000, message="cannot read \udcff"))

    async with s.connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "failing", "arguments": {}})
        await trio.sleep(1)
        failed = await get(c, created["taskId"])
        assert failed["status"] == "failed"
        assert failed["error"] == {"code": -32603, "message": "Internal error"}
        assert failed["statusMessage"] == "Internal error"


async def test_a_long_failure_message_is_cut_in_the_status_only(
    autojump_clock: MockClock,
) -> None:
    async with server().connect_in_memory(era="modern", capabilities=EXT) as c:
        created = await c.request("tools/call", {"name": "crashing", "arguments": {"size": 500}})
        await trio.sleep(2)
        failed = await get(c, created["taskId"])
        assert failed["status"] == "failed"
        assert failed["error"]["message"] == "x" * 500  # (the error is whole: it is counted)
        assert failed["statusMessage"] == "x" * (CAP - 3) + "\u2026"

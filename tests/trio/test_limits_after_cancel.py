"""What the per-request rate limits hold is not sent once the request was cancelled,
whatever the handler makes of the cancellation, and a failure to send it never replaces
the handler's own outcome.

A handler that turns the cancellation into an error, or swallows it and returns, came
back to the flush of what the limits held with its scope cancelled; on a server with
``log_rate_limit`` only (no progress timer, so no nursery and no checkpoint before the
flush), the "N dropped" log message was queued in the core before the first
checkpoint, and went out after ``notifications/cancelled`` with whatever the session
wrote next. A handler ended by a ``BaseException`` that is not an ``Exception``
(``KeyboardInterrupt``...), alone or beside an error, is not answered, and sends
nothing held either. Observed on the wire, as in ``test_limits_on_error``."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ProgressReceived, RequestId
from mcp_trio import Context, McpError, RateLimit, RequestContext, Server
from mcp_trio._context import _answered

from .test_limits_on_error import cancel_midway, chatter, of, wire
from .test_server import connect

LIMITS: dict[str, dict[str, Any]] = {
    "logs-only": {
        "progress_interval": None,
        "log_rate_limit": RateLimit(per_second=0.001, burst=1),
    },
    "progress-only": {"progress_interval": 1, "log_rate_limit": None},
    "both": {"progress_interval": 1, "log_rate_limit": RateLimit(per_second=0.001, burst=1)},
}


def make_server(reached: trio.Event, limits: dict[str, Any]) -> Server:
    server = Server("s", **limits)

    @server.tool()
    async def ends(how: str, ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # (held, with a progress interval)
        await ctx.info("first")
        await ctx.info("second")  # (dropped, with a log rate limit)
        reached.set()
        try:
            await trio.sleep_forever()
        finally:
            if how == "raise":
                raise RuntimeError("cancelled")  # (a cancellation turned into an error)
            if how == "return":
                return "swallowed"  # noqa: B012 (the cancellation swallowed, on purpose)

    return server


@pytest.mark.parametrize("how", ["raise", "return"])
@pytest.mark.parametrize("limits", list(LIMITS))
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_nothing_held_goes_out_after_the_cancellation(
    era: str, limits: str, how: str, autojump_clock: trio.testing.MockClock
) -> None:
    reached = trio.Event()
    async with wire(era, server=make_server(reached, LIMITS[limits])) as (client, read):
        rid = await cancel_midway(client, reached, {"name": "ends", "arguments": {"how": how}})
    held_progress = LIMITS[limits]["progress_interval"] is not None
    dropped_logs = LIMITS[limits]["log_rate_limit"] is not None
    before = ["progress 1", *([] if held_progress else ["progress 2"]), "log first"]
    # (only what went out before the cancellation: no held report, no count, no answer)
    assert of(read, rid) == [*before, *([] if dropped_logs else ["log second"])]


@pytest.mark.parametrize(
    "failure", [trio.BrokenResourceError("gone"), trio.ClosedResourceError("closed")], ids=repr
)
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_failed_flush_keeps_the_handler_s_error(
    era: str,
    failure: Exception,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The count of dropped log messages cannot be written (the session going away, as
    # a transport would say it): the client still gets the handler's McpError, not an
    # internal error about the write.
    server = Server("s", log_rate_limit=RateLimit(per_second=0.001, burst=1))
    log = RequestContext.log

    async def failing(self: RequestContext, level: str, data: Any, **kw: Any) -> bool:
        if kw.get("logger") == "mcp_trio":  # (the count of dropped messages)
            raise failure
        return await log(self, level, data, **kw)

    monkeypatch.setattr(RequestContext, "log", failing)

    @server.tool()
    async def refuses(ctx: Context) -> str:
        await ctx.info("first")
        await ctx.info("second")  # (dropped)
        raise McpError.from_code(-32001, "refused on purpose")

    async with connect(server, era, log_level="debug") as client:
        with pytest.raises(McpError) as info:
            await client.request("tools/call", {"name": "refuses", "arguments": {}})
    assert info.value.code == -32001
    assert "refused on purpose" in str(info.value)


class _Stop(BaseException):
    """Stands for KeyboardInterrupt, SystemExit...: not an ``Exception``, nothing answers
    it (it ends the server)."""


def _raising(how: str) -> BaseException:
    refused = McpError.from_code(-32001, "refused on purpose")
    if how == "stop":
        return _Stop()
    return BaseExceptionGroup("the handler's nursery", [_Stop(), refused])


@pytest.mark.parametrize("how", ["stop", "stop and McpError"])
async def test_a_handler_ended_by_a_base_exception_sends_nothing_held(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    # Not answered (the exception ends the server): what the limits hold stays held,
    # even beside an error that would be answered.
    server = Server("s", progress_interval=1, log_rate_limit=RateLimit(per_second=0.001, burst=1))

    @server.tool()
    async def ends(ctx: Context) -> str:
        await chatter(ctx)
        raise _raising(how)

    read: list[Any] = []
    sent: list[RequestId] = []
    with pytest.raises(BaseException) as ended:
        async with wire("legacy", server=server) as (client, read):

            async def on_progress(event: ProgressReceived) -> None:
                pass

            await client.request(
                "tools/call",
                {"name": "ends", "arguments": {}},
                on_progress=on_progress,
                on_sent=sent.append,
            )
    assert _stops(ended.value)
    assert of(read, sent[0]) == ["progress 1", "log first"]


def _stops(exc: BaseException) -> bool:
    """Whether ``exc`` is, or holds, a :class:`_Stop`."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_stops(inner) for inner in exc.exceptions)
    return isinstance(exc, _Stop)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_cancelled_handler_s_error_beside_the_cancellation_sends_nothing_held(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The handler's nursery ends with the cancellation and an McpError of a subtask
    # (a group): the request was cancelled, so nothing more goes out on it.
    reached = trio.Event()
    server = Server("s", progress_interval=1, log_rate_limit=RateLimit(per_second=0.001, burst=1))

    async def refuse_when_cancelled() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise McpError.from_code(-32001, "refused on purpose")

    @server.tool()
    async def ends(ctx: Context) -> str:
        await chatter(ctx)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(refuse_when_cancelled)
            reached.set()
            await trio.sleep_forever()

    async with wire(era, server=server) as (client, read):
        rid = await cancel_midway(client, reached, {"name": "ends", "arguments": {}})
    assert of(read, rid) == ["progress 1", "log first"]


@pytest.mark.parametrize(
    ("exc", "answered"),
    [
        (McpError.from_code(-32001, "x"), True),
        (ExceptionGroup("g", [McpError.from_code(-32001, "x"), RuntimeError()]), True),
        (_Stop(), False),
        (KeyboardInterrupt(), False),
        (BaseExceptionGroup("g", [_Stop(), McpError.from_code(-32001, "x")]), False),
        (BaseExceptionGroup("g", [McpError.from_code(-32001, "x"), KeyboardInterrupt()]), False),
    ],
    ids=repr,
)
def test_which_endings_are_answered(exc: BaseException, answered: bool) -> None:
    assert _answered(exc) is answered

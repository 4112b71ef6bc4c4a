"""What the per-request rate limits still hold when a handler ends -- a progress report
held by ``progress_interval``, the count of log messages ``log_rate_limit`` dropped --
goes out before the answer, whatever the answer is: a result, a protocol error
(``McpError``), a plain exception (a tool error, ``-32603`` elsewhere); nothing goes out
after it. A cancelled request is answered with nothing, and nothing more is sent on it.

Observed on the wire: every event the client's core reads, in the order it reads them."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import (
    ErrorReceived,
    Event,
    InputRequired,
    NotificationReceived,
    ProgressReceived,
    RequestId,
    ResultReceived,
)
from mcp_trio import Context, InputRequiredError, McpError, RateLimit, Server, Session

from .test_server import connect


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def chatter(ctx: Context) -> None:
    """One report sent, one held; one log message sent, one dropped."""
    await ctx.report_progress(1)
    await ctx.report_progress(2)  # held: the interval (1 s) is not over
    await ctx.info("first")
    await ctx.info("second")  # dropped: past the burst of one


def make_server(reached: trio.Event | None = None) -> Server:
    server = Server("s", progress_interval=1, log_rate_limit=RateLimit(per_second=0.001, burst=1))

    @server.tool()
    async def ends(how: str, ctx: Context) -> str:
        await chatter(ctx)
        if how == "mcp":
            raise McpError.from_code(-32001, "refused on purpose")
        if how == "plain":
            raise RuntimeError("a bug")
        if how == "group":  # (a handler's own nursery: the error comes in a group)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)
                raise McpError.from_code(-32001, "refused on purpose")
        if how == "ask":  # (modern: answered input_required, the handler to run again)
            await ctx.elicit("Sure?", bool)
        if how == "asks":  # (two asks at once: the first round asks both)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ctx.elicit, "Sure?", bool)
                nursery.start_soon(ctx.elicit, "Really?", bool)
        if how in ("hang", "hang, then raise"):
            assert reached is not None
            reached.set()
            try:
                await trio.sleep_forever()
            finally:
                if how == "hang, then raise":  # (a cancellation turned into an error)
                    raise RuntimeError("cancelled")
        return "done"

    @server.prompt()
    async def broken(ctx: Context) -> str:
        await chatter(ctx)
        raise RuntimeError("a bug")

    return server


@asynccontextmanager
async def wire(
    era: str, reached: trio.Event | None = None, *, server: Server | None = None
) -> AsyncGenerator[Any]:
    """A client of ``server`` (by default this module's), and every event its core
    read, in order."""
    read: list[Event] = []
    caps: dict[str, Any] = {"elicitation": {}}
    if server is None:
        server = make_server(reached)
    async with connect(server, era, log_level="debug", capabilities=caps) as client:
        conn = client.connection
        receive = conn.receive_message

        def recording(data: Any, **kwargs: Any) -> list[Event]:
            events = receive(data, **kwargs)
            read.extend(events)
            return events

        conn.receive_message = recording  # type: ignore[method-assign]
        yield client, read


def of(read: list[Event], rid: RequestId) -> list[str]:
    """What was read for the request ``rid`` (its progress, the logs, its answer)."""
    out: list[str] = []
    for event in read:
        if isinstance(event, ProgressReceived) and event.request_id == rid:
            out.append(f"progress {event.progress:g}")
        elif isinstance(event, NotificationReceived) and event.method == "notifications/message":
            data = (event.params or {}).get("data")
            out.append(
                f"log {data['dropped']} dropped" if isinstance(data, dict) else f"log {data}"
            )
        elif isinstance(event, ResultReceived | ErrorReceived) and event.request_id == rid:
            out.append("result" if isinstance(event, ResultReceived) else "error")
        elif isinstance(event, InputRequired) and event.request_id == rid:
            out.append("input required")
    return out


async def request(client: Session, method: str, params: dict[str, Any]) -> RequestId:
    """Send a request asking for progress; its id, once it is answered."""
    sent: list[RequestId] = []

    async def on_progress(event: ProgressReceived) -> None:
        pass

    with suppress(McpError, InputRequiredError):
        await client.request(method, params, on_progress=on_progress, on_sent=sent.append)
    await trio.testing.wait_all_tasks_blocked()
    return sent[0]


async def cancel_midway(client: Session, reached: trio.Event, params: dict[str, Any]) -> RequestId:
    """Call a tool asking for progress, cancel the call once the handler has set
    ``reached``, then let the session go on (past the progress interval, and one more
    request written): its id."""
    sent: list[RequestId] = []

    async def on_progress(event: ProgressReceived) -> None:
        pass

    with trio.move_on_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: client.request(
                    "tools/call", params, on_progress=on_progress, on_sent=sent.append
                )
            )
            await reached.wait()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()  # (notifications/cancelled goes out)
    await trio.sleep(5)  # (past the progress interval: a held report would be due)
    await client.request("tools/list")  # (the session goes on, and writes again)
    await trio.testing.wait_all_tasks_blocked()
    return sent[0]


EVERYTHING = ["progress 1", "log first", "progress 2", "log 1 dropped"]


@pytest.mark.parametrize("how", ["return", "mcp", "plain", "group"])
async def test_what_is_held_goes_out_before_a_tool_answer(
    era: str, how: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with wire(era) as (client, read):
        rid = await request(client, "tools/call", {"name": "ends", "arguments": {"how": how}})
        answer = "error" if how in ("mcp", "group") else "result"  # (plain: isError)
        assert of(read, rid) == [*EVERYTHING, answer]


@pytest.mark.parametrize("how", ["ask", "asks"])
async def test_what_is_held_goes_out_before_input_required(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with wire("modern") as (client, read):
        rid = await request(client, "tools/call", {"name": "ends", "arguments": {"how": how}})
        assert of(read, rid) == [*EVERYTHING, "input required"]


async def test_what_is_held_goes_out_before_an_internal_error(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with wire(era) as (client, read):
        with pytest.raises(McpError) as info:
            await client.request("prompts/get", {"name": "broken"})
        assert info.value.code == -32603
        await trio.testing.wait_all_tasks_blocked()
        (answer,) = [e for e in read if isinstance(e, ErrorReceived)]
        # (No progress token was given: no progress.)
        assert of(read, answer.request_id) == ["log first", "log 1 dropped", "error"]


@pytest.mark.parametrize("how", ["hang", "hang, then raise"])
async def test_a_cancelled_request_gets_nothing_more(
    era: str, how: str, autojump_clock: trio.testing.MockClock
) -> None:
    reached = trio.Event()
    async with wire(era, reached) as (client, read):
        rid = await cancel_midway(client, reached, {"name": "ends", "arguments": {"how": how}})
        assert of(read, rid) == ["progress 1", "log first"]

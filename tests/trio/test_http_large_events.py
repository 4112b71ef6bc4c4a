"""One SSE event larger than ``max_response_buffer`` goes out whole to a client that
reads: the bound is on bytes piling up for a slow reader, not on the size of one
message. (It used to close the connection with no status line: a legacy answer, or an
answer after a notification, over the bound failed with "the server closed the
connection before it answered", and a modern client re-issued the request, so the tool
ran twice and failed anyway.)"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Literal

import pytest
import trio
import trio.testing

from mcp_sansio.http import StreamData
from mcp_trio import Context, Server, open_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_endpoint import ResponseSlot

from .test_http_support import IO_TIMEOUT, start_server, unread_get_stream

Era = Literal["legacy", "modern"]
LIMIT = 64 * 1024
BIG = 3 * LIMIT  # one message, well over the bound (and well under max_message_size)


def _server(runs: list[str]) -> Server:
    server = Server("big-events")

    @server.tool()
    async def big_answer(n: int) -> str:
        """An answer of ``n`` bytes."""
        runs.append("big_answer")
        return "a" * n

    @server.tool()
    async def big_log(ctx: Context, n: int) -> str:
        """A log message of ``n`` bytes, then a small answer."""
        runs.append("big_log")
        await ctx.info("l" * n)
        return "done"

    @server.tool()
    async def small_log(ctx: Context, n: int) -> str:
        """A small log message, then an answer of ``n`` bytes."""
        runs.append("small_log")
        await ctx.info("small")
        return "a" * n

    return server


async def _call(
    caplog: pytest.LogCaptureFixture, era: Era, tool: str, n: int
) -> tuple[str, list[Any], list[str]]:
    """Call ``tool`` over HTTP (``max_response_buffer=LIMIT``); its text, the log
    messages received and the tools run. No response was dropped on the way (a legacy
    client may resume a dropped one from the event store: the call would succeed)."""
    caplog.set_level(logging.DEBUG, logger="mcp_trio")
    runs: list[str] = []
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    server = _server(runs)
    transport = HttpTransportConfig(max_response_buffer=LIMIT)
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0, transport=transport))
            async with open_client(handle.url, era=era, on_log=on_log) as client:
                if era == "legacy":
                    await client.set_logging_level("info")
                text = (await client.call_tool(tool, {"n": n})).text
            nursery.cancel_scope.cancel()
    assert not [r for r in caplog.records if "max_response_buffer" in r.getMessage()]
    return text, logs, runs


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_answer_over_the_buffer_bound_arrives_whole(
    caplog: pytest.LogCaptureFixture, era: Era
) -> None:
    # Legacy: every answer is an SSE event; modern: a JSON body (not bounded by it).
    text, _logs, runs = await _call(caplog, era, "big_answer", BIG)
    assert text == "a" * BIG
    assert runs == ["big_answer"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_log_over_the_buffer_bound_then_the_answer_arrive_whole(
    caplog: pytest.LogCaptureFixture, era: Era
) -> None:
    # Modern: the stream broke, the client re-issued the request (the tool ran twice)
    # and it failed again.
    text, logs, runs = await _call(caplog, era, "big_log", BIG)
    assert text == "done"
    assert logs == ["l" * BIG]
    assert runs == ["big_log"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_answer_over_the_buffer_bound_after_a_small_log_arrives_whole(
    caplog: pytest.LogCaptureFixture, era: Era
) -> None:
    # The small log may still be waiting when the answer is routed: the large answer
    # is let in beside it, not counted as a slow reader.
    text, logs, runs = await _call(caplog, era, "small_log", BIG)
    assert text == "a" * BIG
    assert logs == ["small"]
    assert runs == ["small_log"]


async def test_a_get_stream_nobody_reads_is_still_dropped_with_events_over_the_bound(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    # Each event is over the bound: one is let into the buffer whole, and the next one
    # waiting beside it ends the stream, as many small events do
    # (test_http_raw.py::test_a_get_stream_nobody_reads_is_dropped_at_its_buffer_bound).
    event = 2 * LIMIT
    server = await start_server(nursery, transport=HttpTransportConfig(max_response_buffer=LIMIT))
    with trio.fail_after(IO_TIMEOUT):
        conn = await unread_get_stream(server.port)
        connections = server.statistics().connections
        pad = {"_meta": {"pad": "z" * event}}
        sent = 0
        try:
            while server.statistics().connections == connections:
                server.send_notification("notifications/tools/list_changed", pad)
                sent += 1
                held = [len(slot.data) for slot in server._endpoint._responses.values()]
                assert max(held, default=0) <= LIMIT + event + 1_000
                await trio.sleep(0)
        finally:
            await conn.aclose()
    assert sent < 100  # cut at once, not after the kernel's buffers took it all
    # A live response is lost: said as a warning that names the bound to raise.
    (record,) = [r for r in caplog.records if "max_response_buffer" in r.getMessage()]
    assert record.levelno == logging.WARNING


def _piece(size: int) -> StreamData:
    return StreamData(stream_id=1, data=b"x" * size)


def _overflowed(slot: ResponseSlot) -> bool:
    return slot.overflow  # (read anew: mypy keeps what an assert narrowed it to)


@pytest.mark.parametrize("order", ["big first", "small first"])
def test_the_buffer_bound_does_not_count_the_largest_piece_waiting(order: str) -> None:
    # A handler that logs, then answers, may route both before the connection's task
    # has its turn to write, in either order (trio runs a pass's tasks in either
    # order): an event over the bound is let in beside a small one, whichever came first.
    slot = ResponseSlot(1, LIMIT)
    pieces = [BIG, 100] if order == "big first" else [100, BIG]
    for size in pieces:
        slot.push(_piece(size))
    assert not slot.overflow and len(slot.data) == BIG + 100
    # Beside the largest piece, at most LIMIT bytes wait; the piece past that is not kept.
    before = len(slot.data)
    while not _overflowed(slot):
        before = len(slot.data)
        slot.push(_piece(1_000))
    assert len(slot.data) == before <= BIG + LIMIT
    assert before > BIG + LIMIT - 1_000
    slot.push(_piece(1))  # (nothing more is kept for a connection being dropped)
    assert len(slot.data) == before


def test_an_emptied_buffer_lets_the_next_piece_in_whole() -> None:
    slot = ResponseSlot(1, LIMIT)
    slot.push(_piece(BIG))
    slot.data.clear()  # (written)
    slot.push(_piece(LIMIT))
    slot.push(_piece(LIMIT))  # beside the largest waiting (LIMIT, not the BIG written)
    assert not slot.overflow
    slot.push(_piece(1))
    assert slot.overflow

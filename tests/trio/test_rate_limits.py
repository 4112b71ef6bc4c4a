"""Rate limits of a :class:`Server`: ``completion/complete`` per client, progress
coalesced and log messages bounded per request (completion.mdx: "Implementations MUST
... implement appropriate rate limiting"; progress.mdx and logging.mdx: SHOULD).

Time is virtual (``autojump_clock``): nothing here sleeps for real.
"""

from __future__ import annotations

import gc
import itertools
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ProgressReceived
from mcp_sansio.http import HttpRequest
from mcp_trio import (
    RATE_LIMITED_CODE,
    TASKS_EXTENSION,
    CompletionRequest,
    Context,
    Handlers,
    LocalProtocolError,
    McpError,
    NotificationContext,
    Principal,
    RateLimit,
    Server,
    Session,
    open_client,
)
from mcp_trio._util import KeyedBuckets, TokenBucket

from .test_server import connect


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


def completing_server(**options: Any) -> Server:
    server = Server("rl", **options)

    @server.prompt()
    async def p(x: str) -> str:
        """p"""
        return x

    @server.completion("ref/prompt", "p", "x")
    async def comp(req: CompletionRequest) -> list[str]:
        return ["a"]

    return server


PROMPT_P = {"type": "ref/prompt", "name": "p"}
COMPLETE = {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "x", "value": ""}}


async def complete(client: Session) -> dict[str, Any]:
    result: dict[str, Any] = await client.request("completion/complete", COMPLETE)
    return result


# ------------------------------------------------------------------ the buckets


def test_a_bucket_gives_burst_then_rate() -> None:
    bucket = TokenBucket(RateLimit(per_second=2, burst=3), now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)  # (nothing taken)
    assert bucket.take(0.25) == pytest.approx(0.25)  # (half a token there: still none)
    assert bucket.take(0.5) == 0.0
    assert bucket.take(100.0) == 0.0  # refilled to burst, not beyond
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]


def test_a_token_given_back_never_lifts_a_bucket_past_its_burst() -> None:
    bucket = TokenBucket(RateLimit(per_second=1, burst=3), now=0.0)
    assert bucket.take(0.0) == bucket.take(100.0) == 0.0  # (full again in between)
    bucket.give_back()
    bucket.give_back()
    assert [bucket.take(100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(100.0) > 0


def test_the_table_of_buckets_is_bounded() -> None:
    buckets = KeyedBuckets(RateLimit(per_second=1, burst=1, max_keys=2))
    assert buckets.take("a", 0.0) == 0.0
    assert buckets.take("a", 0.0) > 0  # a's bucket is empty
    assert buckets.take("b", 0.0) == 0.0
    assert buckets.take("a", 0.0) > 0  # (a used last: b is the oldest now)
    assert buckets.take("c", 0.0) == 0.0  # past the bound: b is forgotten
    assert len(buckets) == 2
    assert buckets.take("a", 0.0) > 0  # a was kept...
    assert buckets.take("b", 0.0) == 0.0  # ...b starts afresh (and c goes)
    assert len(buckets) == 2


def test_a_bucket_keyed_by_an_object_dies_with_it() -> None:
    class Owner:
        pass

    buckets = KeyedBuckets(RateLimit(per_second=1, burst=1))
    first = Owner()
    assert buckets.take(("session", 1), 0.0, first) == 0.0
    assert buckets.take(("session", 1), 0.0, first) > 0
    del first
    gc.collect()
    # Another object under the same key (an id() reused) is another client.
    second = Owner()
    assert buckets.take(("session", 1), 0.0, second) == 0.0


def test_rate_limit_values_are_checked() -> None:
    with pytest.raises(ValueError, match="burst"):
        RateLimit(per_second=1, burst=0)
    with pytest.raises(ValueError, match="per_second"):
        RateLimit(per_second=0, burst=1)
    with pytest.raises(ValueError, match="progress_interval"):
        Server("s", progress_interval=0)


# ------------------------------------------------------------------ completion


async def test_completion_past_the_limit_is_refused(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = completing_server(completion_rate_limit=RateLimit(per_second=2, burst=3))
    async with connect(server, era) as client, connect(server, era) as other:
        for _ in range(3):
            assert (await complete(client))["completion"]["values"] == ["a"]
        with pytest.raises(McpError) as info:
            await complete(client)
        assert info.value.error.code == RATE_LIMITED_CODE == 429
        assert info.value.error.data == {"retryAfter": pytest.approx(0.5)}
        assert "retry in 0.5 s" in info.value.error.message
        # Another session has a bucket of its own; the session goes on.
        assert (await complete(other))["completion"]["values"] == ["a"]
        assert (await client.request("prompts/list"))["prompts"][0]["name"] == "p"
        await trio.sleep(0.5)  # (virtual time) one token back
        assert (await complete(client))["completion"]["values"] == ["a"]
        with pytest.raises(McpError):
            await complete(client)


async def test_a_burst_of_completions_is_mostly_refused(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    # The proof that opened this work: 2000 at once, all served. Now the default
    # bucket (50 at once, 20 a second) serves 50 and refuses the rest, each answered.
    server = completing_server()
    served = refused = 0
    async with connect(server, era) as client:

        async def one() -> None:
            nonlocal served, refused
            try:
                await complete(client)
                served += 1
            except McpError as exc:
                assert exc.error.code == RATE_LIMITED_CODE
                refused += 1

        async with trio.open_nursery() as nursery:
            for _ in range(2000):
                nursery.start_soon(one)
    assert (served, refused) == (50, 1950)  # (virtual time stands still meanwhile)


async def test_no_completion_limit(era: str, autojump_clock: trio.testing.MockClock) -> None:
    server = completing_server(completion_rate_limit=None)
    async with connect(server, era) as client:
        for _ in range(200):
            await complete(client)


async def test_anonymous_modern_http_requests_are_limited_per_address(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over HTTP a modern request carries nothing that tells its sender apart (no session,
    # no principal) but the address it came from: one bucket per IP address, so one
    # hasty client cannot starve the others. A legacy HTTP session has its own.
    server = completing_server(completion_rate_limit=RateLimit(per_second=0.001, burst=2))
    with trio.fail_after(20):
        handle = await nursery.start(partial(server.serve_http, "127.0.0.1", 0))
        async with (
            open_client(handle.url, era="modern") as first,
            open_client(handle.url, era="modern") as second,  # (the same address)
            open_client(handle.url, era="legacy") as legacy,
        ):
            assert (await first.complete(PROMPT_P, "x", "")).values == ["a"]
            assert (await second.complete(PROMPT_P, "x", "")).values == ["a"]
            with pytest.raises(McpError) as info:
                await first.complete(PROMPT_P, "x", "")
            assert info.value.error.code == RATE_LIMITED_CODE
            for _ in range(2):
                await legacy.complete(PROMPT_P, "x", "")
            with pytest.raises(McpError):
                await legacy.complete(PROMPT_P, "x", "")
            # Another address (all of 127/8 is loopback) has a bucket of its own.
            dial = trio.open_tcp_stream
            monkeypatch.setattr(trio, "open_tcp_stream", partial(dial, local_address="127.0.0.2"))
            async with open_client(handle.url, era="modern") as elsewhere:
                for _ in range(2):
                    assert (await elsewhere.complete(PROMPT_P, "x", "")).values == ["a"]
                with pytest.raises(McpError):
                    await elsewhere.complete(PROMPT_P, "x", "")


async def test_principals_are_limited_per_issuer_and_subject(nursery: trio.Nursery) -> None:
    # Keyed by who is calling, not by the connection: the same principal over two
    # clients shares one bucket; the same subject from another issuer does not.
    server = completing_server(completion_rate_limit=RateLimit(per_second=0.001, burst=2))

    async def authenticate(request: HttpRequest) -> Principal:
        await trio.lowlevel.checkpoint()
        token = request.header("authorization") or ""
        issuer, _, subject = token.removeprefix("Bearer ").partition("/")
        return Principal(subject=subject, claims={"iss": issuer})

    def as_(token: str) -> Any:
        return open_client(handle.url, era="modern", headers={"Authorization": f"Bearer {token}"})

    with trio.fail_after(20):
        handle = await nursery.start(
            partial(server.serve_http, "127.0.0.1", 0, authenticate=authenticate)
        )
        async with as_("a/alice") as one, as_("a/alice") as two, as_("b/alice") as other:
            await one.complete(PROMPT_P, "x", "")
            await two.complete(PROMPT_P, "x", "")
            for client in (one, two):
                with pytest.raises(McpError) as info:
                    await client.complete(PROMPT_P, "x", "")
                assert info.value.error.code == RATE_LIMITED_CODE
            for _ in range(2):
                await other.complete(PROMPT_P, "x", "")


# ------------------------------------------------------------------ progress


def progress_server(**options: Any) -> Server:
    server = Server("s", **options)

    @server.tool()
    async def flood(steps: int, pause: float, ctx: Context) -> list[bool]:
        sent = []
        for i in range(1, steps + 1):
            sent.append(await ctx.report_progress(i, steps, f"step {i}"))
            await trio.sleep(pause)
        return sent

    @server.tool()
    async def then_quiet(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # held: the interval is not over
        await trio.sleep(5)
        return "done"

    @server.tool()
    async def then_done(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # held, then sent before the answer
        return "done"

    @server.tool()
    async def past_the_end(ctx: Context) -> str:
        await ctx.report_progress(1, 10)  # sent at 0: the next may go at 0.05
        await trio.sleep(0.01)
        await ctx.report_progress(2, 10)  # held: its timer wakes at 0.05
        await trio.sleep(0.01)
        await ctx.report_progress(10, 10)  # final: sent at once (0.02), the next at 0.07
        await trio.sleep(0.01)
        await ctx.report_progress(11)  # held: the timer, woken at 0.05, waits on
        await trio.sleep(1)
        return "done"

    @server.tool()
    async def not_a_number(value: str, total: bool, ctx: Context) -> str:
        await ctx.report_progress(1)
        number = float(value)
        try:
            if total:
                await ctx.report_progress(2, number)
            else:
                await ctx.report_progress(number)
        except LocalProtocolError as exc:
            return str(exc)
        return "accepted"

    @server.tool()
    async def backwards(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # held
        try:
            await ctx.report_progress(2)
        except LocalProtocolError as exc:
            return str(exc)
        return "accepted"

    return server


@asynccontextmanager
async def recording(server: Server, era: str) -> AsyncGenerator[Any]:
    seen: list[tuple[float, float, float | None, str | None]] = []

    async def on_progress(event: ProgressReceived) -> None:
        seen.append((trio.current_time(), event.progress, event.total, event.message))

    async with connect(server, era) as client:

        async def call(name: str, **arguments: Any) -> dict[str, Any]:
            params = {"name": name, "arguments": arguments}
            result: dict[str, Any] = await client.request(
                "tools/call", params, on_progress=on_progress
            )
            return result

        yield call, seen


async def test_progress_is_coalesced(era: str, autojump_clock: trio.testing.MockClock) -> None:
    # 1000 reports, one a millisecond, with a 50 ms interval: about one in 50 goes out.
    server = progress_server(progress_interval=0.05)
    async with recording(server, era) as (call, seen):
        result = await call("flood", steps=1000, pause=0.001)
    assert all(result["structuredContent"]["result"])  # (held ones count as sent)
    assert 15 <= len(seen) <= 25
    times = [t for t, *_ in seen[:-1]]  # (the final one does not wait)
    assert all(later - earlier >= 0.05 - 1e-9 for earlier, later in itertools.pairwise(times))
    assert [p for _, p, _, _ in seen] == sorted({p for _, p, _, _ in seen})
    assert seen[0][1:] == (1, 1000, "step 1")
    assert seen[-1][1:] == (1000, 1000, "step 1000")  # the final one, always


async def test_the_final_report_goes_out_at_once(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=60)
    async with recording(server, era) as (call, seen):
        start = trio.current_time()
        await call("flood", steps=3, pause=1)
    assert [p for _, p, _, _ in seen] == [1, 3]  # (2 held, then superseded)
    assert seen[1][0] - start == pytest.approx(2)  # (not held until the tool returns)


async def test_a_held_report_goes_out_when_the_interval_ends(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=0.05)
    async with recording(server, era) as (call, seen):
        start = trio.current_time()
        await call("then_quiet")
    assert [p for _, p, _, _ in seen] == [1, 2]
    assert seen[1][0] - start == pytest.approx(0.05, abs=0.01)  # not 5 s later


async def test_a_held_report_goes_out_before_the_answer(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=60)
    async with recording(server, era) as (call, seen):
        assert (await call("then_done"))["structuredContent"] == {"result": "done"}
    assert [p for _, p, _, _ in seen] == [1, 2]


async def test_a_held_report_still_must_increase(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=60)
    async with recording(server, era) as (call, _):
        result = await call("backwards")
    assert result["structuredContent"] == {"result": "progress must increase (2 after 2)"}


async def test_a_held_report_waits_for_an_interval_moved_meanwhile(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=0.05)
    async with recording(server, era) as (call, seen):
        start = trio.current_time()
        await call("past_the_end")
    sent = [(round(at - start, 3), progress) for at, progress, _, _ in seen]
    assert sent == [(0.0, 1), (0.02, 10), (0.07, 11)]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("total", [False, True])
@pytest.mark.parametrize("interval", [0.05, None])
async def test_progress_must_be_a_finite_number(
    era: str,
    value: str,
    total: bool,
    interval: float | None,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # (Refused before it is held, too: a NaN would pass every "must increase" check.)
    server = progress_server(progress_interval=interval)
    async with recording(server, era) as (call, seen):
        result = await call("not_a_number", value=value, total=total)
        await trio.testing.wait_all_tasks_blocked()
    assert result["structuredContent"]["result"].endswith("is not a finite number")
    assert [progress for _, progress, _, _ in seen] == [1]


async def test_progress_interval_none_sends_every_report(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = progress_server(progress_interval=None)
    async with recording(server, era) as (call, seen):
        await call("flood", steps=200, pause=0)
    assert len(seen) == 200


# ------------------------------------------------------------------ logs


def logging_server(**options: Any) -> Server:
    server = Server("s", **options)

    @server.tool()
    async def chatty(count: int, level: str, then: str, ctx: Context) -> list[bool]:
        sent = [await ctx.log(level, f"line {i}") for i in range(count)]
        if then:
            await trio.sleep(1)
            sent.append(await ctx.log(level, then))
        return sent

    @server.tool()
    async def mixed(ctx: Context) -> list[bool]:
        sent = [await ctx.warning(f"w{i}") for i in range(3)]
        sent += [await ctx.debug(f"d{i}") for i in range(5)]  # filtered: not counted
        sent += [await ctx.error(f"e{i}") for i in range(2)]  # past the limit: counted
        return sent

    @server.tool()
    async def filtered_first(ctx: Context) -> list[bool]:
        sent = [await ctx.debug(f"d{i}") for i in range(5)]  # filtered: no token used
        sent += [await ctx.warning(f"w{i}") for i in range(3)]
        sent += [await ctx.debug(f"d{i}") for i in range(2)]  # no token, but filtered
        return sent

    @server.tool()
    async def escalating(ctx: Context) -> list[bool]:
        sent = [await ctx.info(f"i{i}") for i in range(5)]  # the last two dropped
        await trio.sleep(1)
        sent.append(await ctx.error("boom"))
        return sent

    @server.tool()
    async def mixed_fanout(ctx: Context) -> list[bool]:
        sent: list[bool] = []

        async def one(level: str, i: int) -> None:
            sent.append(await ctx.log(level, f"{level} {i}"))

        async with trio.open_nursery() as nursery:
            for i in range(100):  # (in one scheduling batch: all check before one sends)
                nursery.start_soon(one, "info", i)
                nursery.start_soon(one, "debug", i)
        return sent

    @server.tool()
    async def fanout(n: int, ctx: Context) -> int:
        sent = 0

        async def one(i: int) -> None:
            nonlocal sent
            if await ctx.info(f"line {i}"):
                sent += 1

        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, i)
        return sent

    return server


class Inbox:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.handlers = Handlers()
        self.handlers.set_notification_handler("notifications/message", self._got)

    async def _got(self, ctx: NotificationContext) -> None:
        self.messages.append(dict(ctx.params or {}))


async def run_logging(server: Server, era: str, name: str, **arguments: Any) -> Any:
    inbox = Inbox()
    options = {"log_level": "debug"} if era == "modern" else {}
    async with connect(server, era, handlers=inbox.handlers, **options) as client:
        params = {"name": name, "arguments": arguments}
        result = await client.request("tools/call", params)
        await trio.testing.wait_all_tasks_blocked()
    return result["structuredContent"]["result"], inbox.messages


async def test_logs_past_the_limit_are_dropped_and_counted(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = logging_server(log_rate_limit=RateLimit(per_second=1, burst=3))
    sent, messages = await run_logging(server, era, "chatty", count=10, level="info", then="after")
    assert sent == [True] * 3 + [False] * 7 + [True]  # (never waits: dropped at once)
    assert [m["data"] for m in messages[:3]] == ["line 0", "line 1", "line 2"]
    summary = messages[3]
    assert summary["level"] == "warning" and summary["logger"] == "mcp_trio"
    assert summary["data"]["dropped"] == 7
    assert "7 log messages" in summary["data"]["message"]
    assert messages[4]["data"] == "after"
    assert len(messages) == 5


async def test_drops_are_counted_at_the_handlers_end(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = logging_server(log_rate_limit=RateLimit(per_second=1, burst=3))
    sent, messages = await run_logging(server, era, "chatty", count=500, level="error", then="")
    assert sent.count(True) == 3
    assert [m["data"] for m in messages[:3]] == ["line 0", "line 1", "line 2"]
    assert messages[3]["data"]["dropped"] == 497
    assert len(messages) == 4


async def test_filtered_levels_are_not_counted(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = logging_server(log_rate_limit=RateLimit(per_second=1, burst=3))
    inbox = Inbox()
    options = {"log_level": "warning"} if era == "modern" else {}
    async with connect(server, era, handlers=inbox.handlers, **options) as client:
        if era == "legacy":
            await client.request("logging/setLevel", {"level": "warning"})
        result = await client.request("tools/call", {"name": "mixed", "arguments": {}})
        await trio.testing.wait_all_tasks_blocked()
    assert result["structuredContent"]["result"] == [True] * 3 + [False] * 7
    assert [m["data"] for m in inbox.messages[:3]] == ["w0", "w1", "w2"]
    assert inbox.messages[3]["data"]["dropped"] == 2
    assert len(inbox.messages) == 4


async def test_filtered_messages_use_no_token(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = logging_server(log_rate_limit=RateLimit(per_second=0.001, burst=3))
    inbox = Inbox()
    options = {"log_level": "warning"} if era == "modern" else {}
    async with connect(server, era, handlers=inbox.handlers, **options) as client:
        if era == "legacy":
            await client.request("logging/setLevel", {"level": "warning"})
        result = await client.request("tools/call", {"name": "filtered_first", "arguments": {}})
        await trio.testing.wait_all_tasks_blocked()
    assert result["structuredContent"]["result"] == [False] * 5 + [True] * 3 + [False] * 2
    assert [m["data"] for m in inbox.messages] == ["w0", "w1", "w2"]  # (no drops counted)


async def test_the_drop_summary_takes_a_graver_level(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    # Drops announced before an error go out at error (a client filtering at error
    # still learns of them); before anything milder, at warning.
    server = logging_server(log_rate_limit=RateLimit(per_second=0.001, burst=3))
    sent, messages = await run_logging(server, era, "escalating")
    assert sent == [True] * 3 + [False] * 2 + [False]  # (no token left for the error)
    assert messages[3]["level"] == "warning"  # (at the handler's end)
    assert messages[3]["data"]["dropped"] == 3 and len(messages) == 4
    server = logging_server(log_rate_limit=RateLimit(per_second=1, burst=3))
    sent, messages = await run_logging(server, era, "escalating")
    assert sent == [True] * 3 + [False] * 2 + [True]
    summary = messages[3]
    assert summary["logger"] == "mcp_trio" and summary["data"]["dropped"] == 2
    assert summary["level"] == "error"
    assert messages[4]["data"] == "boom" and messages[4]["level"] == "error"


async def test_concurrent_logs_share_the_bucket(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    # 200 subtasks of one handler log at once: each takes its token before it waits
    # to send, so no more than the burst goes out.
    server = logging_server(log_rate_limit=RateLimit(per_second=0.001, burst=3))
    sent, messages = await run_logging(server, era, "fanout", n=200)
    lines = [m for m in messages if m.get("logger") != "mcp_trio"]
    assert sent == 3 and len(lines) == 3
    # (Dropped before any line went out, they are counted once one has: the client
    # wants their level.)
    assert messages[3]["logger"] == "mcp_trio" and messages[3]["data"]["dropped"] == 197
    assert len(messages) == 4


async def test_drops_before_any_went_out_count_only_wanted_levels(
    era: str, autojump_clock: trio.testing.MockClock
) -> None:
    server = logging_server(log_rate_limit=RateLimit(per_second=0.001, burst=3))
    inbox = Inbox()
    options = {"log_level": "info"} if era == "modern" else {}
    async with connect(server, era, handlers=inbox.handlers, **options) as client:
        if era == "legacy":
            await client.request("logging/setLevel", {"level": "info"})
        params = {"name": "mixed_fanout", "arguments": {}}
        result = await client.request("tools/call", params)
        await trio.testing.wait_all_tasks_blocked()
    assert result["structuredContent"]["result"].count(True) == 3
    assert all(m["data"].startswith("info ") for m in inbox.messages[:3])  # (any three)
    assert inbox.messages[3]["data"]["dropped"] == 97  # (the debug ones were not wanted)
    assert len(inbox.messages) == 4


async def test_no_log_limit(era: str, autojump_clock: trio.testing.MockClock) -> None:
    server = logging_server(log_rate_limit=None)
    sent, messages = await run_logging(server, era, "chatty", count=600, level="info", then="")
    assert all(sent) and len(messages) == 600


async def test_limits_over_http(era: str, nursery: trio.Nursery) -> None:
    # A real transport: progress coalesced and logs bounded on the request's stream.
    server = Server("s", progress_interval=60, log_rate_limit=RateLimit(per_second=0.001, burst=2))

    @server.tool()
    async def both(ctx: Context) -> str:
        for i in range(1, 101):
            await ctx.report_progress(i, 100)
            await ctx.info(f"line {i}")
        return "ok"

    logs: list[Any] = []
    progress: list[float] = []

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    async def on_progress(event: ProgressReceived) -> None:
        progress.append(event.progress)

    with trio.fail_after(20):
        handle = await nursery.start(partial(server.serve_http, "127.0.0.1", 0))
        async with open_client(
            handle.url,
            era=era,  # type: ignore[arg-type]
            on_log=on_log,
            log_level="debug",
        ) as client:
            if era == "legacy":
                await client.set_logging_level("debug")
            await client.call_tool("both", {}, on_progress=on_progress)
            await trio.testing.wait_all_tasks_blocked()
    assert progress == [1, 100]
    assert logs[:2] == ["line 1", "line 2"]
    assert logs[2]["dropped"] == 98 and len(logs) == 3


async def test_a_report_held_when_the_task_starts_is_not_sent(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # (Once the task exists the request is answered: nothing more may go out on it.)
    caplog.set_level(logging.DEBUG, logger="mcp_trio.server")
    server = Server("s", progress_interval=60)

    @server.tool(task="optional", task_start="explicit")
    async def prepped(ctx: Context) -> str:
        await ctx.report_progress(1)
        await ctx.report_progress(2)  # held
        ctx.start_task()
        await trio.sleep(1)
        return "done"

    seen: list[float] = []

    async def on_progress(event: ProgressReceived) -> None:
        seen.append(event.progress)

    capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    with trio.fail_after(100):
        async with open_client(server, era="modern", capabilities=capabilities) as client:
            output = await client.call_tool("prepped", on_progress=on_progress)
    assert output.text == "done"
    assert seen == [1]
    assert "held progress" not in caplog.text

"""A lone request of a legacy POST answered as JSON is served in its connection's task
(no handler task: the connection would only wait for the answer), yet as a task of its
own would serve it: in its own scope and in its own copy of the context."""

from __future__ import annotations

import contextvars
import inspect
import math
import types
from collections.abc import Coroutine, Generator
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_sansio.http import HttpServerConfig
from mcp_trio import Handlers, SessionConfig
from mcp_trio._http_endpoint import _in_context, _Slots
from mcp_trio._http_server import HttpServeHandle, serve_http

from .test_http_support import (
    IO_TIMEOUT,
    POST_HEADERS,
    RawConnection,
    raw_request,
    raw_session,
    rpc,
    server_connection_config,
    session_headers,
)

_MARK: contextvars.ContextVar[Any] = contextvars.ContextVar("test_http_inline_mark", default=None)


def _recording_handlers(seen: list[tuple[str, Any, Any]]) -> Handlers:
    """``tools/call``: note the task it runs in and the mark it finds, set its own mark
    (never reset), and check that the mark holds across a scheduler pass."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call_tool(ctx: Any) -> dict[str, Any]:
        found = _MARK.get()
        _MARK.set(ctx.request_id)
        await trio.sleep(0)  # (the next step of the handler runs in the same context)
        seen.append((trio.lowlevel.current_task().name, found, _MARK.get()))
        return {"content": [], "isError": False}

    return handlers


async def _post(conn: RawConnection, headers: Any, body: bytes) -> Any:
    await conn.send("POST", headers=headers, body=body)
    response = await conn.response()
    conn.next_cycle()
    assert response.status == 200, response
    return loads(response.body)


async def _serve(nursery: trio.Nursery, handlers: Handlers, mode: str) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            handlers,
            connection_config=server_connection_config(),
            http_config=HttpServerConfig(response_mode=mode),  # type: ignore[arg-type]
        )
    )
    return handle


@pytest.mark.parametrize(
    ("mode", "task"), [("json", "mcp http connection"), ("sse", "mcp http tools/call #{}")]
)
async def test_a_lone_legacy_request_answered_as_json_is_served_by_its_connection(
    nursery: trio.Nursery, mode: str, task: str
) -> None:
    seen: list[tuple[str, Any, Any]] = []
    server = await _serve(nursery, _recording_handlers(seen), mode)
    with trio.fail_after(IO_TIMEOUT):
        headers = session_headers(await raw_session(server.port))
        conn = await RawConnection.open(server.port)
        try:
            for rid in (1, 2):
                await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", {"name": "x"}))
                response = await conn.response()
                conn.next_cycle()
                assert response.status == 200, response
                assert str(rid).encode() in response.body
        finally:
            await conn.aclose()
    # Each finds no mark: what the first set stayed in its own copy of the context (in
    # the connection's, the second would find it), and held across its own steps.
    assert seen == [(task.format(1), None, 1), (task.format(2), None, 2)]


# ------------------------------------------------------------------ as a task would be


def _blocking_handlers(log: list[tuple[Any, str]], release: dict[Any, trio.Event]) -> Handlers:
    """``tools/call``: waits for ``release[name]`` (a tool per test request), noting
    whether it ended answered or cancelled."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call_tool(ctx: Any) -> dict[str, Any]:
        name = ctx.params["name"]
        try:
            await release[name].wait()
        except trio.Cancelled:
            log.append((name, "cancelled"))
            raise
        log.append((name, "done"))
        return {"content": [{"type": "text", "text": name}], "isError": False}

    return handlers


async def _serve_with(nursery: trio.Nursery, handlers: Handlers, **kwargs: Any) -> HttpServeHandle:
    handle: HttpServeHandle = await nursery.start(
        partial(
            serve_http,
            handlers,
            connection_config=server_connection_config(),
            http_config=HttpServerConfig(response_mode="json"),
            **kwargs,
        )
    )
    return handle


async def _call(port: int, headers: Any, rid: Any, name: str, out: list[Any]) -> None:
    conn = await RawConnection.open(port)
    try:
        await conn.send("POST", headers=headers, body=rpc(rid, "tools/call", {"name": name}))
        response = await conn.response()
        out.append((name, response.status, response.body))
    finally:
        await conn.aclose()


async def _until(predicate: Any) -> None:
    while not predicate():
        await trio.sleep(0)


async def test_a_cancellation_reaches_the_inline_handler_it_names_only(
    nursery: trio.Nursery,
) -> None:
    # Two sessions, each with request id 1 served inline: cancelling it in one session
    # cancels that handler, not the other one's.
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event(), "b": trio.Event()}
    server = await _serve_with(nursery, _blocking_handlers(log, release))
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        b = session_headers(await raw_session(server.port))
        nursery.start_soon(_call, server.port, a, 1, "a", out)
        nursery.start_soon(_call, server.port, b, 1, "b", out)
        await _until(lambda: server.statistics().running_handlers == 2)
        note = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}'
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=a, body=note)
            assert (await conn.response()).status == 202
        finally:
            await conn.aclose()
        await _until(lambda: len(log) == 1)
        assert log == [("a", "cancelled")]
        release["b"].set()
        await _until(lambda: len(out) == 2)
    assert log == [("a", "cancelled"), ("b", "done")]
    answered = {name: (status, body) for name, status, body in out}
    assert answered["b"][0] == 200 and loads(answered["b"][1])["id"] == 1
    assert answered["a"] == (200, b"")  # not answered: an empty event stream, as before
    assert server.statistics().running_handlers == 0


async def test_shutdown_gives_an_inline_handler_its_grace_period(nursery: trio.Nursery) -> None:
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event()}
    server = await _serve_with(
        nursery, _blocking_handlers(log, release), config=SessionConfig(shutdown_grace_period=60)
    )
    out: list[Any] = []
    closed = trio.Event()

    async def close() -> None:
        await server.aclose()
        closed.set()

    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        nursery.start_soon(_call, server.port, a, 7, "a", out)
        await _until(lambda: server.statistics().running_handlers == 1)
        nursery.start_soon(close)
        await trio.testing.wait_all_tasks_blocked()  # (shutdown waits for the handler)
        assert not closed.is_set() and not out
        release["a"].set()
        await closed.wait()
    assert log == [("a", "done")]
    [(_, status, body)] = out
    assert status == 200 and loads(body)["result"]["content"][0]["text"] == "a"


async def test_shutdown_cancels_an_inline_handler_after_its_grace_period(
    nursery: trio.Nursery,
) -> None:
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event()}
    server = await _serve_with(
        nursery,
        _blocking_handlers(log, release),
        config=SessionConfig(shutdown_grace_period=0.01, close_timeout=0.01),
    )
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        nursery.start_soon(_call, server.port, a, 7, "a", out)
        await _until(lambda: server.statistics().running_handlers == 1)
        await server.aclose()
        assert log == [("a", "cancelled")]
        await _until(lambda: len(out) == 1)
    assert server.statistics().running_handlers == 0
    [(_, status, body)] = out
    assert status == 200 and loads(body)["error"]["message"] == "server shutting down"


async def test_inline_handlers_hold_their_slots(nursery: trio.Nursery) -> None:
    # max_concurrent_handlers=1: a second request waits for the inline one's slot.
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event(), "b": trio.Event()}
    release["b"].set()
    server = await _serve_with(
        nursery, _blocking_handlers(log, release), config=SessionConfig(max_concurrent_handlers=1)
    )
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        nursery.start_soon(_call, server.port, a, 1, "a", out)
        await _until(lambda: server.statistics().running_handlers == 1)
        nursery.start_soon(_call, server.port, a, 2, "b", out)
        slots = server._server.endpoint.slots
        await _until(lambda: len(slots.waiting) == 1)
        assert log == [] and out == []  # b waits for a's slot
        release["a"].set()
        await _until(lambda: len(out) == 2)
    assert log == [("a", "done"), ("b", "done")]
    assert sorted((name, status) for name, status, _ in out) == [("a", 200), ("b", 200)]


async def test_requests_waiting_for_a_handler_slot_get_it_in_arrival_order(
    nursery: trio.Nursery,
) -> None:
    log: list[tuple[Any, str]] = []
    release = {name: trio.Event() for name in "abcd"}
    server = await _serve_with(
        nursery, _blocking_handlers(log, release), config=SessionConfig(max_concurrent_handlers=1)
    )
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        slots = server._server.endpoint.slots
        for rid, name in enumerate("abcd"):
            nursery.start_soon(_call, server.port, a, rid, name, out)
            # (counted once it asked for a slot: a runs, the rest wait, in this order)
            await _until(lambda n=rid + 1: server.statistics().running_handlers == n)
        assert len(slots.waiting) == 3
        for name in "dcba":  # each is released before it runs: the slot's order decides
            release[name].set()
        await _until(lambda: len(out) == 4)
    assert log == [(name, "done") for name in "abcd"]


async def test_a_slot_given_back_to_a_waiter_cancelled_before_it_runs_is_its_own() -> None:
    """The waiter was handed the slot (it is no longer free, and no one else's): a
    cancellation that comes before it runs is not delivered at that wait, so it holds
    the slot and gives it back when done, as a ``trio.CapacityLimiter`` borrower did.
    A wait that raised then would lose the slot for good."""
    slots = _Slots(1, 1)
    assert slots.take_nowait(None)
    scope = trio.CancelScope()
    held: list[bool] = []

    async def wait() -> None:
        with scope:
            assert await slots.take(None, math.inf)
            held.append(True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert len(slots.waiting) == 1
        slots.give_back(None)  # to the waiter...
        scope.cancel()  # ... cancelled before it runs
        assert slots.free == 0 and not slots.take_nowait(None)  # (handed on, not freed)
    assert held == [True] and slots.free == 0
    slots.give_back(None)
    assert slots.free == 1 and slots.take_nowait(None)


async def test_handler_slots_are_bounded_and_skip_a_waiter_that_gave_up() -> None:
    slots = _Slots(2, 2)
    assert slots.take_nowait(None) and slots.take_nowait(None) and not slots.take_nowait(None)
    order: list[str] = []
    scopes = {name: trio.CancelScope() for name in "bcd"}

    async def wait(name: str) -> None:
        with scopes[name]:
            assert await slots.take(None, math.inf)
            order.append(name)

    async with trio.open_nursery() as nursery:
        for name in "bcd":
            nursery.start_soon(wait, name)
            await trio.testing.wait_all_tasks_blocked()  # (parked in this order)
        scopes["c"].cancel()  # gives up while it waits: it has no slot
        await trio.testing.wait_all_tasks_blocked()
        assert len(slots.waiting) == 2 and order == []
        for first in "bd":  # (one at a time: trio runs the tasks woken in a pass in any order)
            slots.give_back(None)
            await trio.testing.wait_all_tasks_blocked()
            assert order[-1] == first
    assert order == ["b", "d"] and slots.free == 0 and not slots.take_nowait(None)
    slots.give_back(None)
    slots.give_back(None)
    assert slots.free == 2 and not slots.waiting


async def test_a_client_leaving_mid_handler_leaves_the_server_serving(
    nursery: trio.Nursery,
) -> None:
    # A legacy client leaving cancels nothing: the handler ends as it would, its
    # answer has nowhere to go, and the server goes on.
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event(), "b": trio.Event()}
    release["b"].set()
    server = await _serve_with(nursery, _blocking_handlers(log, release))
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        conn = await RawConnection.open(server.port)
        await conn.send("POST", headers=a, body=rpc(1, "tools/call", {"name": "a"}))
        await _until(lambda: server.statistics().running_handlers == 1)
        await conn.aclose()
        release["a"].set()
        await _until(lambda: server.statistics().running_handlers == 0)
        await _call(server.port, a, 2, "b", out)
    assert log == [("a", "done"), ("b", "done")]
    assert out[0][1] == 200 and loads(out[0][2])["id"] == 2


# ------------------------------------------------------------------ _in_context


@types.coroutine
def _foreign_yield() -> Generator[str, Any, Any]:
    return (yield "not a trio trap")  # trio throws a TypeError in, as into a task


async def _marked(mark: str, body: Any) -> Any:
    _MARK.set(mark)
    try:
        return await body()
    finally:
        _MARK.set((_MARK.get(), "finally"))


async def test_in_context_runs_each_step_in_its_context_and_returns_the_value() -> None:
    _MARK.set("outer")
    context = contextvars.copy_context()

    async def body() -> Any:
        await trio.sleep(0)
        return _MARK.get()

    assert await _in_context(context, _marked("inner", body)) == "inner"
    assert _MARK.get() == "outer" and context[_MARK] == ("inner", "finally")


async def test_in_context_passes_what_trio_throws_in_to_the_coroutine() -> None:
    async def body() -> Any:
        try:
            await _foreign_yield()
        except TypeError:
            return ("caught", _MARK.get())
        raise AssertionError("not thrown in")

    _MARK.set("outer")
    assert await _in_context(contextvars.copy_context(), _marked("inner", body)) == (
        "caught",
        "inner",
    )
    assert _MARK.get() == "outer"


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
async def test_in_context_raises_what_the_coroutine_raises(error: type[BaseException]) -> None:
    async def body() -> Any:
        await trio.sleep(0)
        raise error("from the handler")

    context = contextvars.copy_context()
    with pytest.raises(error, match="from the handler"):
        await _in_context(context, _marked("inner", body))
    assert context[_MARK] == ("inner", "finally")


async def test_a_cancellation_reaches_the_coroutine_in_its_context() -> None:
    seen: list[Any] = []

    async def body() -> Any:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append(_MARK.get())
            raise

    with trio.CancelScope() as scope:
        scope.cancel()
        await _in_context(contextvars.copy_context(), _marked("inner", body))
    assert scope.cancelled_caught and seen == ["inner"]


def test_closing_in_context_closes_the_coroutine_in_its_context() -> None:
    context = contextvars.copy_context()

    async def body() -> Any:
        await _foreign_yield()

    coro: Coroutine[Any, Any, Any] = _marked("inner", body)
    runner = _in_context(context, coro)
    assert runner.send(None) == "not a trio trap"
    runner.close()  # (GeneratorExit, thrown into the coroutine, ends it)
    assert context[_MARK] == ("inner", "finally")
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED  # not left suspended


async def test_ending_the_session_cancels_its_inline_handler(nursery: trio.Nursery) -> None:
    log: list[tuple[Any, str]] = []
    release = {"a": trio.Event()}
    server = await _serve_with(nursery, _blocking_handlers(log, release))
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        nursery.start_soon(_call, server.port, a, 1, "a", out)
        await _until(lambda: server.statistics().running_handlers == 1)
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("DELETE", headers=a)
            assert (await conn.response()).status == 204
        finally:
            await conn.aclose()
        await _until(lambda: len(out) == 1)
    assert log == [("a", "cancelled")]
    [(_, status, body)] = out
    assert status == 404 and "the session ended" in loads(body)["error"]["message"]
    assert server.statistics().running_handlers == 0


async def test_an_inline_handler_that_fails_is_answered_with_an_error(
    nursery: trio.Nursery,
) -> None:
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call_tool(ctx: Any) -> dict[str, Any]:
        await trio.sleep(0)
        raise RuntimeError("boom")

    server = await _serve_with(nursery, handlers)
    out: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        a = session_headers(await raw_session(server.port))
        await _call(server.port, a, 3, "a", out)
        await _call(server.port, a, 4, "a", out)  # the server goes on
    for (_, status, body), rid in zip(out, (3, 4), strict=True):
        answer = loads(body)
        assert status == 200 and answer["id"] == rid and "error" in answer
    assert server.statistics().running_handlers == 0


async def test_the_requests_of_a_batch_answered_as_json_run_at_once(
    nursery: trio.Nursery,
) -> None:
    # Only a lone request is served inline: a 2025-03-26 batch's requests run side by
    # side (here the first waits for the second to start).
    started = trio.Event()
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call_tool(ctx: Any) -> dict[str, Any]:
        if ctx.params["name"] == "first":
            await started.wait()
        else:
            started.set()
        return {"content": [{"type": "text", "text": ctx.params["name"]}], "isError": False}

    server = await _serve_with(nursery, handlers)
    version = "2025-03-26"
    init = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "r", "version": "1"},
    }
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", body=rpc(1, "initialize", init))
        sid = response.headers["mcp-session-id"]
        headers = (*POST_HEADERS, ("mcp-session-id", sid), ("mcp-protocol-version", version))
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        assert (await raw_request(server.port, "POST", headers=headers, body=note)).status == 202
        batch = b"[%s,%s]" % (
            rpc(2, "tools/call", {"name": "first"}),
            rpc(3, "tools/call", {"name": "second"}),
        )
        response = await raw_request(server.port, "POST", headers=headers, body=batch)
    assert response.status == 200
    assert sorted(answer["id"] for answer in loads(response.body)) == [2, 3]

"""A session runs a request handler the same way on both of its paths.

With nothing to refuse (a handler, no principal or no ``required_scopes``) the handler
task awaits the handler in its own frame (``Session._serve_request``); otherwise it goes
through :func:`mcp_trio._pool.call_request_handler`, as the HTTP endpoint does. Both
must answer the same and log the same, whatever the handler returns or raises.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from mcp_sansio import ConnectionConfig, ErrorData
from mcp_trio import (
    Handlers,
    InputRequiredResult,
    McpError,
    Principal,
    RequestContext,
    Session,
    open_session,
)
from mcp_trio._channel import memory_channel_pair
from mcp_trio._pool import handler_failed

ALICE = Principal(subject="alice")

Behaviour = Callable[[], Awaitable[Any]]


async def _result() -> Any:
    return {"content": [], "isError": False}


async def _after_a_checkpoint() -> Any:
    await trio.lowlevel.checkpoint()
    return {"content": [], "waited": True}


async def _a_list() -> Any:
    return [1, 2]


async def _a_dict_subclass() -> Any:
    return OrderedDict(content=[])


async def _none() -> Any:
    return None


async def _input_required() -> Any:
    return InputRequiredResult(input_requests={"k": {"method": "roots/list"}})


async def _unserializable() -> Any:
    return {"content": object()}


async def _mcp_error() -> Any:
    raise McpError(ErrorData(code=-32001, message="refused on purpose", data={"why": 1}))


async def _exception() -> Any:
    raise ValueError("a bug in the handler")


async def _exception_group() -> Any:
    raise ExceptionGroup("the handler's nursery", [ValueError("a"), KeyError("b")])


async def _mcp_error_in_a_group() -> Any:
    raise ExceptionGroup("the handler's nursery", [McpError.from_code(-32001, "refused")])


BEHAVIOURS: dict[str, Behaviour] = {
    "result": _result,
    "result after a checkpoint": _after_a_checkpoint,
    "a list": _a_list,
    "a dict subclass": _a_dict_subclass,
    "None": _none,
    "input required (legacy era)": _input_required,
    "unserializable": _unserializable,
    "McpError": _mcp_error,
    "exception": _exception,
    "exception group": _exception_group,
    "McpError in a group": _mcp_error_in_a_group,
}


@asynccontextmanager
async def _sessions(handlers: Handlers, *, general: bool) -> AsyncIterator[tuple[Session, Session]]:
    """A started server and client session in memory, the server on its general path
    (a principal, and a ``required_scopes`` hook that asks for nothing) or not."""
    if general:
        handlers.required_scopes = lambda principal, method, params: []
    client_channel, server_channel = memory_channel_pair()
    async with (
        open_session(
            server_channel,
            "server",
            handlers=handlers,
            connection_config=ConnectionConfig(capabilities={"tools": {}}),
            principal=ALICE if general else None,
        ) as server,
        open_session(
            client_channel, "client", connection_config=ConnectionConfig(era="legacy")
        ) as client,
    ):
        await client.start()
        yield server, client


async def _served(behaviour: Behaviour, *, general: bool) -> tuple[object, ...]:
    """What a client sees of one ``tools/call`` served by ``behaviour``: the server
    session on its general path (a principal, and a ``required_scopes`` hook that
    asks for nothing) or not."""
    handlers = Handlers()

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> Any:
        return await behaviour()

    with trio.fail_after(10):
        async with _sessions(handlers, general=general) as (server, client):
            try:
                result = await client.request("tools/call", {"name": "t", "arguments": {}})
            except McpError as exc:
                seen: tuple[object, ...] = ("error", exc.code, exc.error.message, exc.error.data)
            else:
                seen = ("result", result)
            assert server.statistics().running_handlers == 0
            return seen


def _logged(caplog: pytest.LogCaptureFixture) -> list[tuple[object, ...]]:
    records: list[tuple[object, ...]] = [
        (r.levelname, r.getMessage(), None if r.exc_info is None else type(r.exc_info[1]))
        for r in caplog.records
        if r.name == "mcp_trio" and r.levelno >= logging.WARNING
    ]
    caplog.clear()
    return records


@pytest.mark.parametrize("name", list(BEHAVIOURS))
async def test_both_paths_answer_and_log_the_same(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Mutations: the inline path skips the result check (a list, a dict subclass or
    # None is sent as it is, or logged as unsendable), answers McpError or a group as
    # -32603, or logs a failure other than call_request_handler does -> they differ.
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    inline = await _served(BEHAVIOURS[name], general=False)
    inline_logged = _logged(caplog)
    general = await _served(BEHAVIOURS[name], general=True)
    general_logged = _logged(caplog)
    assert inline == general
    assert inline_logged == general_logged
    if name.startswith("result"):
        assert inline[0] == "result" and inline_logged == []
    else:
        assert inline[0] == "error" and (name.startswith("McpError") or inline_logged)


async def _cancelled() -> trio.Cancelled:
    """A real ``trio.Cancelled`` (it has no public constructor)."""
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            return exc
    raise AssertionError("not cancelled")


async def test_what_is_not_the_handlers_failure_is_raised_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # (The cases a session cannot answer: they end the handler's task.)
    cancelled = await _cancelled()
    with pytest.raises(trio.Cancelled):
        handler_failed(cancelled, "tools/call", 1)
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        handler_failed(interrupt, "tools/call", 1)
    only = BaseExceptionGroup("g", [cancelled])
    with pytest.raises(BaseExceptionGroup) as info:
        handler_failed(only, "tools/call", 1)
    assert info.value is only
    stop = BaseExceptionGroup("g", [interrupt, ValueError("x")])
    with pytest.raises(BaseExceptionGroup) as info:
        handler_failed(stop, "tools/call", 1)
    assert info.value is stop
    assert caplog.records == []
    # Failures beside a cancellation: logged, and the cancellation alone goes on.
    both = BaseExceptionGroup("g", [cancelled, ValueError("x")])
    with pytest.raises(BaseExceptionGroup) as info:
        handler_failed(both, "tools/call", 1)
    assert info.value.exceptions == (cancelled,)
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ["handler for 'tools/call' (request 1) failed"]


@pytest.mark.parametrize("general", [False, True], ids=["inline", "general"])
async def test_a_cancelled_handler_whose_nursery_failed_too_is_logged_and_the_session_goes_on(
    general: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # The peer cancels a request whose handler has a child task that fails as it is
    # cancelled: the handler raises a group of its cancellation and that failure. On
    # both paths the failure is logged, the cancellation ends the handler (nothing is
    # answered) and the session goes on. (Mutant: the inline path catches Exception,
    # not BaseException -> the group escapes the handler's task and ends the session.)
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    running = trio.Event()
    handlers = Handlers()

    async def child() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            raise ValueError("its cleanup failed") from None

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> Any:
        assert ctx.params is not None
        if ctx.params["name"] == "hang":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child)
                running.set()
                await trio.sleep_forever()
        return {"content": [], "name": ctx.params["name"]}

    with trio.fail_after(10):
        async with _sessions(handlers, general=general) as (server, client):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.request, "tools/call", {"name": "hang"})
                await running.wait()
                nursery.cancel_scope.cancel()  # (the client tells the server)
            result = await client.request("tools/call", {"name": "after"})
            assert result["name"] == "after"
            await trio.testing.wait_all_tasks_blocked()
            assert server.statistics().running_handlers == 0
    logged = [
        (r.getMessage(), type(r.exc_info[1]) if r.exc_info else None)
        for r in caplog.records
        if r.name == "mcp_trio" and r.levelno >= logging.WARNING
    ]
    assert logged == [("handler for 'tools/call' (request 2) failed", ExceptionGroup)]

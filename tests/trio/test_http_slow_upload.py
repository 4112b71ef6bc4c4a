"""One slow upload stalls no other request, and does not end the session (HTTP client).

Each request is a POST of its own, on a connection of its own: a server slow to read
one large body must hold up neither the requests after it nor the session. The body is
written by the request's own task, within ``write_timeout``: a write that times out
fails that request alone (-32603 ``HTTP: ...``, as any POST lost while it is written);
one whose caller gives up (its ``timeout=``, a cancel scope) ends with its caller, at
its deadline, and its connection is dropped (over modern HTTP that *is* the
cancellation); either way the session goes on.

A hand-written HTTP/1.1 server (h11, loopback, port 0, a small receive buffer) answers
every request at once, but never reads a body larger than :data:`STALL_ABOVE` until
the test says so. It closes each connection after its answer, so that every request
needs a new one (no idle kept-alive connection to start it on). The clock is the
``autojump_clock``: loopback I/O is done before the run loop would sleep, so virtual
time moves only for timers, and "at once" is exact.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import attrs
import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_trio import McpError, RequestTimeout, SessionConfig
from mcp_trio._http_client import open_http_client

from .slow_reader_support import (
    BIG,
    DISCOVER,
    INITIALIZED,
    LONG,
    NO_GET,
    STALL_ABOVE,
    listen,
    read_body,
    read_head,
    respond,
    result,
    text_block,
)
from .test_http_support import call, client_connection_config, text_of

_WRITE_TIMEOUT = 30.0


@attrs.define
class _SlowReader:
    """The fake server (see the module docs)."""

    stuck: trio.Event = attrs.field(factory=trio.Event)
    """Set when the head of a large POST has come (its body is not read)."""
    drain: trio.Event = attrs.field(factory=trio.Event)
    """Set by the test: read the large body now, to its end or the connection's."""
    drained: trio.Event = attrs.field(factory=trio.Event)
    got: list[Literal["whole", "cut"]] = attrs.field(factory=list)
    """How each large body ended: all of it came, or the client dropped the connection."""
    methods: list[str] = attrs.field(factory=list)
    """The JSON-RPC method of each message read whole, in order."""

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        head = await read_head(conn, stream)
        if head is None:
            return
        size = int(dict(head.headers).get(b"content-length", b"0"))
        if size > STALL_ABOVE:
            self.stuck.set()
            await self.drain.wait()
            self.got.append("cut" if await read_body(conn, stream) is None else "whole")
            self.drained.set()
            return
        body = await read_body(conn, stream)
        if body is None:
            return
        if head.method == b"DELETE":
            await respond(conn, stream, 200, b"")
            return
        message = loads(body)
        self.methods.append(message["method"])
        rid = message.get("id")
        if rid is None:
            await respond(conn, stream, 202, b"")
        elif message["method"] == "server/discover":
            await respond(conn, stream, 200, result(rid, DISCOVER))
        elif message["method"] == "initialize":
            await respond(conn, stream, 200, result(rid, INITIALIZED), session="s1")
        else:
            text = message["params"]["arguments"]["text"]
            await respond(conn, stream, 200, result(rid, {"content": [text_block(text)]}))


async def _serve(nursery: trio.Nursery) -> tuple[_SlowReader, str]:
    server = _SlowReader()
    return server, await listen(nursery, server.handle)


def _client(url: str, era: str, write_timeout: float = _WRITE_TIMEOUT) -> Any:
    return open_http_client(
        url,
        connection_config=client_connection_config(era),
        config=SessionConfig(write_timeout=write_timeout),
        transport=NO_GET,
    )


async def _echo(client: Any, text: str, **kwargs: Any) -> str:
    return text_of(await client.request("tools/call", call("echo", text=text), **kwargs))


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_small_request_is_answered_while_a_large_body_is_stuck(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, era) as client, trio.open_nursery() as calls:
            calls.start_soon(partial(_echo, client, BIG))
            await server.stuck.wait()
            began = trio.current_time()
            assert await _echo(client, "small") == "small"
            assert trio.current_time() == began  # it waited for nothing
            calls.cancel_scope.cancel()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_body_write_that_times_out_fails_that_request_alone(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, era, write_timeout=5) as client:
            began = trio.current_time()
            with pytest.raises(McpError) as info:
                await _echo(client, BIG)
            assert trio.current_time() - began == pytest.approx(5)
            assert info.value.code == -32603
            assert info.value.message.startswith("HTTP: writing timed out after 5 s")
            assert await _echo(client, "after") == "after"  # the session goes on
            server.drain.set()
            await server.drained.wait()
    assert server.got == ["cut"]  # its connection was dropped


@pytest.mark.parametrize("how", ["timeout", "cancel scope"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_caller_who_gives_up_during_its_own_stuck_upload_returns_on_time(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str, how: str
) -> None:
    """It returns at its deadline, not ``write_timeout`` later; the rest of its body is
    never written (the connection is dropped: over modern HTTP, that is how the server
    learns of the cancellation), and the session goes on."""
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, era) as client:
            began = trio.current_time()
            if how == "timeout":
                with pytest.raises(RequestTimeout):
                    await _echo(client, BIG, timeout=1)
            else:
                with trio.move_on_after(1):
                    await _echo(client, BIG)
            assert trio.current_time() - began == pytest.approx(1)
            server.drain.set()
            await server.drained.wait()
            assert server.got == ["cut"]  # (not a byte more was written after it)
            assert await _echo(client, "after") == "after"
    if era == "modern":
        assert "notifications/cancelled" not in server.methods

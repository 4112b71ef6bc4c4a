"""Closing an HTTP client with requests in flight tells the server, as the stdio and
WebSocket clients do (``Session.aclose``: a courtesy ``notifications/cancelled`` for each,
bounded): legacy, those notifications are POSTed (before the ``DELETE``, which a server
may refuse: ``405``), within half of ``close_timeout``; modern, the request's response
stream is closed, which is the cancellation (``2026-07-28/basic/transports/
streamable-http``, "Cancellation": closing the SSE response stream MUST be treated by
the server as cancellation of that request) and no notification is sent.

A hand-written server (h11, loopback, port 0) answers the handshake, takes
notifications (``202``), refuses ``DELETE`` (``405``), and answers a ``tools/call`` with
an SSE head, then nothing until the client closes the connection."""

from __future__ import annotations

import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_trio import SessionClosed, SessionConfig
from mcp_trio._http_client import _MAX_ONE_WAY, open_http_client

from .slow_reader_support import (
    DISCOVER,
    INITIALIZED,
    LONG,
    NO_GET,
    listen,
    read_body,
    read_head,
    respond,
    result,
)
from .test_http_support import call, client_connection_config


class _Server:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []
        self.call_started = trio.Event()
        self.call_closed = trio.Event()
        self.held = 0
        """``notifications/test`` POSTs read, their ``202`` held until :attr:`release`."""
        self.release = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        head = await read_head(conn, stream)
        if head is None:
            return
        if head.method == b"DELETE":
            self.seen.append(("DELETE", None))
            await respond(conn, stream, 405, b"")
            return
        body = await read_body(conn, stream)
        if body is None:
            return
        message = loads(body)
        method, rid = message.get("method", "answer"), message.get("id")
        self.seen.append((method, (message.get("params") or {}).get("requestId")))
        if rid is None:
            if method == "notifications/test":
                self.held += 1
                await self.release.wait()
            await respond(conn, stream, 202, b"")
        elif method == "server/discover":
            await respond(conn, stream, 200, result(rid, DISCOVER))
        elif method == "initialize":
            await respond(conn, stream, 200, result(rid, INITIALIZED), session="s1")
        else:  # tools/call: a stream that brings nothing, until the client hangs up
            headers = [("content-type", "text/event-stream")]
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
            self.call_started.set()
            with trio.move_on_after(LONG):
                while await stream.receive_some(1024):
                    pass
            self.call_closed.set()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_closing_with_a_request_in_flight_tells_the_server(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, era: str
) -> None:
    server = _Server()
    url = await listen(nursery, server.handle)
    with trio.fail_after(LONG):
        async with open_http_client(
            url,
            connection_config=client_connection_config(era),
            config=SessionConfig(close_timeout=4.0),
            transport=NO_GET,
        ) as client:

            async def slow() -> None:
                with pytest.raises(SessionClosed):
                    await client.request("tools/call", call("slow"))

            nursery.start_soon(slow)
            await server.call_started.wait()
            began = trio.current_time()
        assert trio.current_time() - began <= 2.0  # (half of close_timeout at most)
        await server.call_closed.wait()  # the call's stream is closed either way
    cancels = [r for m, r in server.seen if m == "notifications/cancelled"]
    if era == "legacy":
        assert len(cancels) == 1  # told, before the DELETE
        assert [m for m, _ in server.seen][-2:] == ["notifications/cancelled", "DELETE"]
    else:
        assert cancels == []  # (closing the stream is the cancellation)


async def test_a_cancellation_waits_for_room_among_the_one_way_messages_and_goes_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Legacy: the one-way queue full (the server holds their 202s), a call cancelled:
    # its notifications/cancelled waits for room (send_nowait leaves it to send()),
    # then goes once, after the others. Mutation: send_nowait saying it took the
    # cancellation with no room -> none sent. (Dropping send_nowait's room check is no
    # mutation of the wire: the cancellation is then stopped and posted by send_nowait,
    # which finds no room and leaves it to send() all the same, once.)
    server = _Server()
    url = await listen(nursery, server.handle)
    with trio.fail_after(LONG):
        async with open_http_client(
            url, connection_config=client_connection_config("legacy"), transport=NO_GET
        ) as client:
            scope = trio.CancelScope()

            async def cancelled() -> None:
                with scope:
                    await client.request("tools/call", call("slow"))

            nursery.start_soon(cancelled)
            await server.call_started.wait()
            for n in range(_MAX_ONE_WAY):
                await client.notify("notifications/test", {"n": n})
            await trio.testing.wait_all_tasks_blocked()
            assert server.held == 1  # (one at a time: the rest queued, the queue full)
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert [m for m, _ in server.seen].count("notifications/cancelled") == 0
            server.release.set()
            await server.call_closed.wait()
            while len(server.seen) < 3 + _MAX_ONE_WAY:
                await trio.sleep(0.01)
            await trio.testing.wait_all_tasks_blocked()
    methods = [m for m, _ in server.seen]
    assert methods.count("notifications/cancelled") == 1
    assert methods[-2:] == ["notifications/cancelled", "DELETE"]  # (after the others)

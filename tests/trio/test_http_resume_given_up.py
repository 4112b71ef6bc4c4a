"""A legacy request whose answer the client gives up on is failed as the transport's and
cancelled on the server: the HTTP client over real sockets, against our real server.

``2025-11-25/basic/transports.mdx``: disconnection SHOULD NOT be read as cancelling; to
cancel, the client SHOULD send a ``CancelledNotification``. So when the client gives up
an answer the server may still be working on, it says so:

* a resumption refused ``410`` (the event store no longer holds what followed the
  client's last event id): our server's refusal is a JSON-RPC error (id null), which
  answers the ``GET``, not the request it resumes. With one request waiting it used to be
  passed on as that request's answer (the server's own ``-32600``: no
  :class:`~mcp_trio.TransportFailed`, and the server was never told);
* a POST written whole whose connection breaks before the answer's head (a JSON
  response): the server may have the request. It used to fail with no cancellation,
  where a stream that ends with no event id (the same, one step later) was cancelled.
  Never an ``initialize``, though: the lifecycle forbids cancelling it
  (``2025-11-25/basic/utilities/cancellation.mdx``: it "MUST NOT be cancelled by
  clients"); the handshake fails, and that is all.

The clock is the ``autojump_clock``: loopback I/O is done before the run loop would
sleep, so virtual time moves only for timers (the client's ``retry`` wait).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio.http import InMemoryEventStore
from mcp_trio import HandshakeFailed, TransportFailed
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_context import HttpRequestContext

from .test_http_support import (
    IO_TIMEOUT,
    App,
    Proxy,
    _Recorder,
    call,
    client_connection_config,
    start_proxied,
    start_server,
)

NO_GET = HttpTransportConfig(open_get_stream=False)


class DropsInitialize(Proxy):
    """A :class:`Proxy` that reads the first ``initialize`` POST whole, then closes its
    connection before any answer (the server never gets it); all else goes through."""

    dropped = False

    async def _forward(self, client: trio.SocketStream) -> None:
        if self.dropped:
            return await super()._forward(client)
        request = await self._whole_request(client)
        _Recorder(self.seen).feed(request)
        assert b'"initialize"' in request
        self.dropped = True


class _Runs:
    """A ``tools/call`` handler that reports progress 1, then (once ``go`` is set) 2 and
    3, then waits for ever; it notes when it is cancelled."""

    def __init__(self) -> None:
        self.app = App()
        self.app.handlers.set_request_handler("tools/call", self.tools_call)
        self.go = trio.Event()
        self.moved_on = trio.Event()
        self.cancelled: list[Any] = []
        self.cancelled_event = trio.Event()

    async def tools_call(self, ctx: Any) -> dict[str, Any]:
        assert isinstance(ctx, HttpRequestContext)
        try:
            await ctx.report_progress(1)
            await self.go.wait()
            await ctx.report_progress(2)
            await ctx.report_progress(3)
            self.moved_on.set()
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(ctx.request_id)
            self.cancelled_event.set()
            raise
        raise AssertionError("unreachable")


async def test_a_refused_resumption_of_one_request_fails_it_as_ours_and_cancels_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    runs = _Runs()
    # One event kept per stream: progress 2 and 3, sent while the client is away, leave
    # only 3, and a resumption from 1 is refused (410: the events after it are gone).
    store = InMemoryEventStore(max_events_per_stream=1)
    server = await start_server(nursery, runs.app, event_store=store)
    proxy = Proxy(server.port)
    await proxy.start(nursery)
    progressed = trio.Event()

    async def on_progress(event: Any) -> None:
        progressed.set()

    async def drop_then_go() -> None:
        await progressed.wait()  # the client has event 1's id
        proxy.cut()
        runs.go.set()
        await runs.moved_on.wait()  # (2 and 3 are sent, to the store only)

    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), transport=NO_GET
        ) as client:
            nursery.start_soon(drop_then_go)
            with pytest.raises(TransportFailed) as failed:
                await client.request("tools/call", call("runs"), on_progress=on_progress)
            await runs.cancelled_event.wait()  # the server was told: the handler ends
    assert runs.moved_on.is_set()  # (it was refused while the handler still ran)
    assert "HTTP: status 410: Gone: some events after" in str(failed.value)
    (resumed,) = [seen for seen in proxy.seen if seen.method == "GET"]
    assert resumed.headers["last-event-id"].endswith(":1")
    (cancelled,) = [
        seen.message for seen in proxy.seen if seen.rpc_method == "notifications/cancelled"
    ]
    assert cancelled["params"]["requestId"] == runs.cancelled[0]
    assert "status 410" in cancelled["params"]["reason"]


async def test_a_request_whose_connection_breaks_before_the_answer_is_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A JSON response: nothing is written until the answer, so a connection cut while
    # the handler runs leaves the client with no head (the pool's ReadFailed).
    app = App()
    proxy = await start_proxied(nursery, app, http={"response_mode": "json"})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), transport=NO_GET
        ) as client:

            async def cut_once_started() -> None:
                await app.started_event.wait()
                proxy.cut()

            nursery.start_soon(cut_once_started)
            with pytest.raises(TransportFailed, match="before it answered"):
                await client.request("tools/call", call("block"))
            await app.cancelled_event.wait()  # the server was told: the handler ends
    (started,) = app.started
    assert app.cancelled == [started.request_id]
    (cancelled,) = [
        seen.message for seen in proxy.seen if seen.rpc_method == "notifications/cancelled"
    ]
    assert cancelled["params"]["requestId"] == started.request_id
    assert "before it answered" in cancelled["params"]["reason"]


async def test_an_initialize_whose_connection_breaks_before_the_answer_is_not_cancelled(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = await start_server(nursery, App())
    proxy = DropsInitialize(server.port)
    await proxy.start(nursery)
    with trio.fail_after(IO_TIMEOUT):
        with pytest.raises(HandshakeFailed, match="before it answered"):
            async with open_http_client(
                proxy.url(), connection_config=client_connection_config("legacy"), transport=NO_GET
            ):
                raise AssertionError("unreachable")
        await trio.testing.wait_all_tasks_blocked()  # (the proxy has read all it was sent)
    assert proxy.dropped
    assert [seen.rpc_method for seen in proxy.seen] == ["initialize"]

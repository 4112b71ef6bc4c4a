"""A request that ends early ends alone, and at once: the HTTP client over real sockets.

* Cancelled by its caller (or timed out): the client stops reading its answer. A legacy
  SSE stream that the server then ends is not resumed (no ``GET`` + ``Last-Event-ID``
  for a request nobody waits for), so its connection slot is free for the next request
  without waiting out the server's ``retry`` (each resumption would cost
  ``retry_ms``; ``max_resume_attempts`` of them held the only slot for seconds).
* Refused: a same-origin redirect to a target no request line may carry fails that
  request with a clear error; the client goes on.

The clock is the ``autojump_clock``: loopback I/O is done before the run loop would
sleep, so virtual time moves only for timers. "Answered at once" is therefore exact:
no virtual time passed, where a resumption would have cost ``retry_ms``.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import h11
import pytest
import trio
import trio.testing

import mcp_sansio._http_client
from mcp_sansio._json import dumps, loads
from mcp_trio import McpError, RequestTimeout
from mcp_trio._http_client import HttpChannel, open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    App,
    call,
    client_connection_config,
    fake_server_url,
    read_request,
    respond,
    rpc,
    start_proxied,
    start_server,
    text_of,
)

RETRY_MS = 1_000
"""The server's ``retry``: what each resumption of a stream would cost the client."""
ONE_SLOT = HttpTransportConfig(max_client_connections=1, open_get_stream=False)
"""One connection slot, held by a request until its task ends; no GET stream."""


async def _ignore(event: Any) -> None:
    pass


async def _cancel_on_progress(client: Any) -> None:
    """Call ``block`` (which reports progress, then waits) and cancel it on its first
    progress report: the server has it, and its answer is an open SSE stream."""
    with trio.CancelScope() as scope:

        async def on_progress(event: Any) -> None:
            scope.cancel()

        await client.request("tools/call", call("block", progress=True), on_progress=on_progress)


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
async def test_a_legacy_request_given_up_frees_its_slot_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, how: str
) -> None:
    app = App()
    proxy = await start_proxied(nursery, app, http={"retry_ms": RETRY_MS})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), transport=ONE_SLOT
        ) as client:
            if how == "cancelled":
                await _cancel_on_progress(client)
            else:
                with pytest.raises(RequestTimeout):
                    await client.request(
                        "tools/call", call("block", progress=True), timeout=2, on_progress=_ignore
                    )
            await app.cancelled_event.wait()  # the notifications/cancelled arrived
            await trio.testing.wait_all_tasks_blocked()
            channel = client.channel
            assert isinstance(channel, HttpChannel)
            assert channel._streams == {}  # its task has ended...
            assert channel._pool.limiter.borrowed_tokens == 0  # ...and given its slot back
            began = trio.current_time()
            assert text_of(await client.request("tools/call", call("echo", text="n"))) == "n"
            assert trio.current_time() == began  # no resume backoff waited for the slot
    assert b"last-event-id" not in proxy.upstream.lower()  # the stream was not resumed
    assert len(app.cancelled) == 1


async def test_a_legacy_request_cancelled_while_waiting_for_a_slot_is_never_sent(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    app = App()
    proxy = await start_proxied(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), transport=ONE_SLOT
        ) as client:
            async with trio.open_nursery() as holders:
                holders.start_soon(client.request, "tools/call", call("block"))
                await app.started_event.wait()  # it holds the only slot
                with trio.move_on_after(1):
                    await client.request("tools/call", call("echo", text="never"))
                app.release.set()
            assert text_of(await client.request("tools/call", call("echo", text="n"))) == "n"
    assert b"never" not in proxy.upstream


async def test_a_cancelled_modern_request_frees_its_slot_at_once(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    app = App()
    server = await start_server(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern"), transport=ONE_SLOT
        ) as client:
            await _cancel_on_progress(client)
            await app.cancelled_event.wait()  # closing the stream cancelled the handler
            began = trio.current_time()
            assert text_of(await client.request("tools/call", call("echo", text="m"))) == "m"
            assert trio.current_time() == began


async def test_a_request_not_cancelled_is_still_resumed(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """The other side: an SSE stream that drops before its request is answered is
    resumed (one ``retry`` later) and the answer arrives."""
    app = App()
    proxy = await start_proxied(nursery, app, http={"retry_ms": RETRY_MS})
    progressed = trio.Event()
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), transport=ONE_SLOT
        ) as client:

            async def drop_then_release() -> None:
                await progressed.wait()
                proxy.cut()
                app.release.set()

            nursery.start_soon(drop_then_release)

            async def on_progress(event: Any) -> None:
                progressed.set()

            began = trio.current_time()
            result = await client.request(
                "tools/call", call("block", progress=True), on_progress=on_progress
            )
            assert text_of(result) == "released"
            assert trio.current_time() - began == pytest.approx(RETRY_MS / 1000)
    assert b"last-event-id" in proxy.upstream.lower()
    assert app.cancelled == []


async def _init_2025_03_26(channel: HttpChannel) -> None:
    params = {
        "protocolVersion": "2025-03-26",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    await channel.send(rpc(1, "initialize", params))
    assert loads(await channel.receive())["id"] == 1
    await channel.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


async def test_cancelling_one_request_of_a_batch_keeps_reading_for_the_other(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A 2025-03-26 batch shares one response: cancelling one of its requests must not
    stop the other's answer, and the stream is not resumed for the cancelled one."""
    app = App()
    proxy = await start_proxied(nursery, app, http={"retry_ms": RETRY_MS})
    channel = HttpChannel(proxy.url(), transport=ONE_SLOT)
    await nursery.start(channel.run)

    def block(rid: int) -> dict[str, Any]:
        params = {**call("block", progress=True), "_meta": {"progressToken": rid}}
        return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}

    try:
        with trio.fail_after(IO_TIMEOUT):
            await _init_2025_03_26(channel)
            await channel.send(dumps([block(2), block(3)]))
            reports = [loads(await channel.receive()) for _ in range(2)]
            assert {m["params"]["progressToken"] for m in reports} == {2, 3}
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
            await channel.send(dumps({**cancel, "params": {"requestId": 2}}))
            await app.cancelled_event.wait()
            app.release.set()
            answers: list[dict[str, Any]] = []
            while not answers:
                message = loads(await channel.receive())
                if "id" in message:
                    answers.append(message)
            assert answers[0]["id"] == 3 and text_of(answers[0]["result"]) == "released"
            began = trio.current_time()
            await channel.send(rpc(4, "tools/call", call("echo", text="b")))  # needs the slot
            assert loads(await channel.receive())["id"] == 4
            assert trio.current_time() == began
    finally:
        await channel.aclose()
    assert b"last-event-id" not in proxy.upstream.lower()


# ------------------------------------------------------------------ bad redirects


@pytest.mark.parametrize("location", [b"/mcp x", b"/mcp\x01", b"/\xc3\xa9", b"/a%zz"])
async def test_a_redirect_to_a_bad_target_fails_only_its_request(
    nursery: trio.Nursery, location: bytes
) -> None:
    proxy = await start_proxied(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(),
            connection_config=client_connection_config("modern"),
            transport=HttpTransportConfig(max_idle_connections=0),  # the proxy sees each POST
        ) as client:
            proxy.redirect = (b"/mcp", location)
            with pytest.raises(McpError, match="not a valid request target") as info:
                await client.request("tools/call", call("echo", text="r"))
            assert info.value.data == {"httpStatus": 308}
            proxy.redirect = None
            assert text_of(await client.request("tools/call", call("echo", text="s"))) == "s"


@pytest.mark.parametrize("location", [b"/mcp x", b"/\xc3\xa9"])
async def test_a_request_h11_refuses_to_frame_fails_alone(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, location: bytes
) -> None:
    """The safety net under the check above: whatever target reaches the pool, h11's
    refusal fails that request, never the client."""
    monkeypatch.setattr(mcp_sansio._http_client, "_redirect_target", lambda base, loc: loc)
    proxy = await start_proxied(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(),
            connection_config=client_connection_config("legacy"),
            transport=HttpTransportConfig(max_idle_connections=0),
        ) as client:
            proxy.redirect = (b"/mcp", location)
            with pytest.raises(McpError, match="cannot send POST '/"):
                await client.request("tools/call", call("echo", text="r"))
            proxy.redirect = None
            assert text_of(await client.request("tools/call", call("echo", text="s"))) == "s"


async def test_a_first_post_h11_refuses_fails_alone(nursery: trio.Nursery) -> None:
    """A request whose own headers h11 refuses (a method name with a line break, mirrored
    into ``Mcp-Method``) fails alone, on the fast path (an idle kept-alive connection)
    and the ordinary one (a new connection) alike; the connection is not spoilt."""
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            for _ in range(2):
                with pytest.raises(McpError, match="cannot send POST '/mcp'"):
                    await client.request("tools/\ncall", call("echo", text="r"))
                assert text_of(await client.request("tools/call", call("echo", text="s"))) == "s"


JSON = ("content-type", "application/json")
SSE = ("content-type", "text/event-stream")


async def _server_that_never_answers(stream: trio.SocketStream) -> None:
    """A legacy server whose answer to a tools/call never comes: each stream (the POST's,
    then every resumption) is primed under a new id and ends at once, ``retry: 0``."""
    with suppress(trio.BrokenResourceError):  # (a client that gave up may reset a connection)
        await _never_answer(stream)


async def _never_answer(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    primed = 0
    while (found := await read_request(conn, stream)) is not None:
        head, message = found
        session = ("mcp-session-id", "s1")
        if message is not None and message.get("method") == "initialize":
            caps: dict[str, Any] = {"tools": {}}
            result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": {}}
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            await respond(conn, stream, answer, headers=(session, JSON))
        elif head.method == b"POST" and "id" not in message:
            await respond(conn, stream, b"", status=202, headers=(session,))  # a notification
        else:  # the call, or a resumption of its stream: a priming event, then the end
            primed += 1
            event = f"id: 2:0.{primed}\nretry: 0\ndata: \n\n".encode()
            await respond(conn, stream, event, headers=(session, SSE))
        conn.start_next_cycle()


async def test_resumptions_that_bring_no_message_back_off_until_the_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Each resumption is primed under a new id (ids are unique in a session), so a new
    # id is not progress: only a message is. The server is there, though (it answers
    # each with a stream: it polls), so the client keeps resuming, waiting longer each
    # time, well past max_resume_attempts (which counts attempts that get no stream);
    # the request's own timeout ends it (test_http_client_polling has the rest).
    url = await fake_server_url(nursery, _server_that_never_answers)
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=2)
    async with open_http_client(
        url, connection_config=client_connection_config("legacy"), transport=transport
    ) as client:
        started = trio.current_time()
        with pytest.raises(RequestTimeout):
            await client.request("tools/call", call("echo"), timeout=IO_TIMEOUT * 10)
        assert trio.current_time() - started == pytest.approx(IO_TIMEOUT * 10)

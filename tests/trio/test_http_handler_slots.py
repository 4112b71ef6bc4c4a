"""Streamable HTTP: the handler slots (``max_concurrent_handlers``) are shared by every
client of a server, so one client may hold only its share of them
(``HttpTransportConfig.max_client_handlers``), and a request waits for one at most
``handler_slot_timeout``, then gets ``503`` with ``Retry-After`` (a notification for a
handler too), unless its modern client leaves first. Real sockets on 127.0.0.1 (port 0);
timing on ``autojump_clock``."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, NoReturn, cast

import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps
from mcp_trio import SessionConfig
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_endpoint import Endpoint, _Slots
from mcp_trio._http_wire import WireError

from .test_http_support import (
    IO_TIMEOUT,
    POST_HEADERS,
    App,
    RawConnection,
    call,
    modern,
    raw_request,
    raw_session,
    rpc,
    session_headers,
    start_server,
    text_of,
)

_TIMEOUT = 5.0


async def test_one_legacy_session_holds_only_its_share_of_the_handler_slots(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # A legacy client's calls that never end (they outlive their connections) held
    # every slot: every other client's requests then waited, with no bound, until that
    # session expired (30 minutes by default).
    app = App()
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=4),
        transport=HttpTransportConfig(max_client_handlers=2, handler_slot_timeout=_TIMEOUT),
    )
    held: list[RawConnection] = []
    try:
        with trio.fail_after(IO_TIMEOUT):
            greedy = session_headers(await raw_session(server.port))
            for rid in (2, 3):
                conn = await RawConnection.open(server.port)
                held.append(conn)
                await conn.send("POST", headers=greedy, body=rpc(rid, "tools/call", call("block")))
            while len(app.started) < 2:
                await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            third = await raw_request(
                server.port, "POST", headers=greedy, body=rpc(4, "tools/call", call("block"))
            )
            waited = trio.current_time() - start
            other = session_headers(await raw_session(server.port))
            start = trio.current_time()
            answer = await raw_request(
                server.port,
                "POST",
                headers=other,
                body=rpc(2, "tools/call", call("echo", text="hi")),
            )
            other_waited = trio.current_time() - start
    finally:
        for conn in held:
            await conn.aclose()
    # Over its share (2 of 4 slots) the greedy session's third call waits its bounded
    # time and is refused; it never ran. The other session is served at once.
    assert third.status == 503 and third.headers["retry-after"] == "1"
    error = third.json()
    assert error["id"] == 4 and "server busy" in error["error"]["message"]
    assert "share" in error["error"]["message"]
    assert abs(waited - _TIMEOUT) < 0.5
    assert len(app.started) == 2
    assert answer.status == 200 and b'"hi"' in answer.body and other_waited < 0.5


# Whether a refused request's POST is that request alone (503) or a batch (answered in
# the batch) is read from the core's parse (Reply.batch), not from the body's bytes:
# whitespace before the JSON, or a string value that begins with "[", change nothing.
_PREFIXES = pytest.mark.parametrize("prefix", [b"", b" \r\n\t"])


@_PREFIXES
@pytest.mark.parametrize("text", ["late", "[late]"])
async def test_a_request_waits_for_a_handler_slot_a_bounded_time_then_gets_503(
    nursery: trio.Nursery, autojump_clock: Any, prefix: bytes, text: str
) -> None:
    # Modern, anonymous: no share ties two requests together, but the wait is bounded.
    app = App()
    server = await start_server(
        nursery,
        app,
        era="modern",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=_TIMEOUT),
    )
    blocker = await RawConnection.open(server.port)
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers, body = modern(1, "block")
            await blocker.send("POST", headers=headers, body=body)
            await app.started_event.wait()
            start = trio.current_time()
            headers, body = modern(7, "echo", text=text)
            refused = await raw_request(server.port, "POST", headers=headers, body=prefix + body)
            waited = trio.current_time() - start
            app.release.set()
            assert (await blocker.response()).status == 200
            served = await raw_request(server.port, "POST", headers=headers, body=body)
    finally:
        await blocker.aclose()
    assert refused.status == 503 and refused.headers["retry-after"] == "1"
    error = refused.json()
    assert error["id"] == 7 and "server busy" in error["error"]["message"]
    assert abs(waited - _TIMEOUT) < 0.5
    # Nothing of it ran, and the server serves again once a slot is free.
    assert served.status == 200 and text_of(served.json()["result"]) == text
    assert server.statistics().running_handlers == 0


async def test_a_modern_client_that_leaves_while_its_request_waits_frees_its_place_at_once(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # Closing the connection is a modern request's cancellation: it was noticed only
    # after the wait (up to handler_slot_timeout), the request holding its place in
    # line meanwhile, then started for nobody (or refused, and counted, as busy).
    app = App()
    server = await start_server(
        nursery,
        app,
        era="modern",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=60),
    )
    endpoint = server._server.endpoint
    blocker, leaver = [await RawConnection.open(server.port) for _ in range(2)]
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers, body = modern(1, "block")
            await blocker.send("POST", headers=headers, body=body)
            await app.started_event.wait()
            headers, body = modern(2, "block")
            await leaver.send("POST", headers=headers, body=body)
            while not endpoint.slots.waiting:
                await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            await leaver.aclose()
            await trio.testing.wait_all_tasks_blocked()
            # Out of the line at once, and out of the core: nothing of it is in progress.
            assert not endpoint.slots.waiting
            assert trio.current_time() - start < 0.5
            assert server.statistics().modern_requests == 1
            app.release.set()
            assert (await blocker.response()).status == 200
            await trio.testing.wait_all_tasks_blocked()
    finally:
        await blocker.aclose()
        await leaver.aclose()
    assert [ctx.request_id for ctx in app.started] == [1]  # the second never ran
    assert endpoint._busy_refused == 0  # (nor was it refused as busy)
    assert endpoint.slots.free == 1 and server.statistics().running_handlers == 0


async def test_a_slot_that_comes_as_the_client_leaves_is_given_back() -> None:
    # Both in one scheduler batch: the slot is granted to the waiter and its client
    # leaves. The request does not start, so the slot must not stay taken.
    holder = SimpleNamespace(slots=_Slots(1, 1))
    slots = holder.slots
    assert slots.take_nowait(None)
    leave = trio.Event()

    async def left() -> NoReturn:
        await leave.wait()
        raise WireError("the client closed the connection")

    async def wait() -> None:
        with pytest.raises(WireError):
            await Endpoint._take_watching(cast(Any, holder), None, math.inf, left)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        slots.give_back(None)  # granted to the waiter...
        leave.set()  # ... whose client leaves in the same batch
    assert slots.free == 1 and not slots.waiting and slots.take_nowait(None)


async def test_a_legacy_client_leaving_while_its_request_waits_cancels_nothing(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # Legacy: a client leaving cancels nothing (it may resume the stream, or it sends
    # notifications/cancelled): the request keeps its place and runs when a slot frees.
    app = App()
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(max_client_handlers=1, handler_slot_timeout=60),
    )
    endpoint = server._server.endpoint
    blocker, leaver = [await RawConnection.open(server.port) for _ in range(2)]
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers = session_headers(await raw_session(server.port))
            await blocker.send("POST", headers=headers, body=rpc(2, "tools/call", call("block")))
            await app.started_event.wait()
            await leaver.send("POST", headers=headers, body=rpc(3, "tools/call", call("block")))
            while not endpoint.slots.waiting:
                await trio.testing.wait_all_tasks_blocked()
            await leaver.aclose()
            await trio.testing.wait_all_tasks_blocked()
            assert len(endpoint.slots.waiting) == 1
            app.release.set()
            assert (await blocker.response()).status == 200
            while len(app.started) < 2:
                await trio.testing.wait_all_tasks_blocked()
    finally:
        await blocker.aclose()
        await leaver.aclose()
    assert [ctx.request_id for ctx in app.started] == [2, 3]


async def _batching_session(port: int) -> tuple[tuple[str, str], ...]:
    """A 2025-03-26 session (the revision with batches) started by hand: its headers."""
    init = rpc(
        1,
        "initialize",
        {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    )
    sid = (await raw_request(port, "POST", body=init)).headers["mcp-session-id"]
    headers = (*POST_HEADERS, ("mcp-session-id", sid), ("mcp-protocol-version", "2025-03-26"))
    note = dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (await raw_request(port, "POST", headers=headers, body=note)).status == 202
    return headers


@_PREFIXES
async def test_a_batch_request_without_a_slot_is_answered_in_the_batch(
    nursery: trio.Nursery, autojump_clock: Any, prefix: bytes
) -> None:
    # A 2025-03-26 batch whose first request runs: the one that found no slot in time
    # is answered "server busy" beside the other's answer (one answer each), not 503.
    app = App()
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=_TIMEOUT),
    )
    with trio.fail_after(IO_TIMEOUT):
        headers = await _batching_session(server.port)
        batch = rpc(2, "tools/call", call("block")) + b"," + rpc(3, "tools/list")
        batch = prefix + b"[" + batch + b"]"
        conn = await RawConnection.open(server.port)
        try:
            await conn.send("POST", headers=headers, body=batch)
            await app.started_event.wait()
            await trio.sleep(_TIMEOUT + 1)  # the second waits its bounded time
            app.release.set()
            response = await conn.response()
        finally:
            await conn.aclose()
    assert response.status == 200
    # (SSE or JSON, per the response mode: both answers are in it)
    text = response.body.decode()
    assert '"id":2' in text.replace(" ", "") and "released" in text
    assert '"id":3' in text.replace(" ", "") and "server busy" in text


async def test_a_waiter_at_its_share_is_passed_over_not_in_the_way() -> None:
    slots = _Slots(3, 1)
    a, b = ("session", "a"), ("session", "b")
    assert slots.take_nowait(a) and not slots.take_nowait(a)  # a is at its share
    got: list[str] = []

    async def wait(key: tuple[str, str], name: str) -> None:
        if await slots.take(key, math.inf):
            got.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, a, "a2")
        await trio.testing.wait_all_tasks_blocked()
        # a's waiter, first in line, does not keep b (under its share) from a free slot.
        assert slots.take_nowait(b) and not slots.take_nowait(b)
        assert slots.take_nowait(None) and slots.free == 0
        slots.give_back(b)  # a free slot, but a2's client is still at its share
        await trio.testing.wait_all_tasks_blocked()
        assert got == [] and slots.free == 1
        slots.give_back(a)  # now it may take one
        await trio.testing.wait_all_tasks_blocked()
        assert got == ["a2"] and slots.held == {a: 1} and slots.free == 1


async def test_a_wait_for_a_slot_ends_at_its_deadline_holding_none(autojump_clock: Any) -> None:
    slots = _Slots(1, 1)
    assert slots.take_nowait(None)
    start = trio.current_time()
    assert not await slots.take(None, start + _TIMEOUT)
    assert trio.current_time() - start == _TIMEOUT and not slots.waiting
    slots.give_back(None)
    assert slots.free == 1 and slots.take_nowait(None)


async def test_a_request_waiting_for_a_slot_is_refused_as_soon_as_the_server_stops(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # It was refused only once it got a slot: after shutdown_grace_period, when the
    # running handlers were cancelled. Now the stop refuses it at once.
    app = App()
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1, shutdown_grace_period=3),
        transport=HttpTransportConfig(handler_slot_timeout=60),
    )
    conns = [await RawConnection.open(server.port) for _ in range(2)]
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers = session_headers(await raw_session(server.port))
            await conns[0].send("POST", headers=headers, body=rpc(2, "tools/call", call("block")))
            await app.started_event.wait()
            second = rpc(3, "tools/call", call("echo", text="b"))
            await conns[1].send("POST", headers=headers, body=second)
            slots = server._server.endpoint.slots
            while not slots.waiting:
                await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            nursery.start_soon(server.aclose)
            refused = await conns[1].response()
            waited = trio.current_time() - start
    finally:
        for conn in conns:
            await conn.aclose()
    assert b"server shutting down" in refused.body and b'"b"' not in refused.body
    assert waited < 0.5
    assert len(app.started) == 1


def _note(n: int) -> bytes:
    return dumps(
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {"n": n}}
    )


async def test_a_notification_waits_for_a_handler_slot_then_gets_503_not_202(
    nursery: trio.Nursery, autojump_clock: Any
) -> None:
    # A notification for a handler of the user's that found no slot was dropped and
    # its POST answered 202 ("accepted"): lost without a word to the client. It waits
    # as a request does; if no slot comes in time, its POST is 503 with Retry-After
    # (transports.mdx: a server that cannot accept the input MUST answer an HTTP error
    # status), and nothing of it ran, so the client may send it again.
    app = App()
    heard: list[int] = []
    hold = trio.Event()

    async def roots_changed(ctx: Any) -> None:
        heard.append(ctx.params["n"])
        await hold.wait()  # (holds its slot)

    app.handlers.set_notification_handler("notifications/roots/list_changed", roots_changed)
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=_TIMEOUT),
    )
    blocker, waiter = [await RawConnection.open(server.port) for _ in range(2)]
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers = session_headers(await raw_session(server.port))
            await blocker.send("POST", headers=headers, body=rpc(2, "tools/call", call("block")))
            await app.started_event.wait()
            # A slot that frees within the bound: the notification is taken, and runs.
            await waiter.send("POST", headers=headers, body=_note(1))
            await trio.sleep(_TIMEOUT / 2)
            app.release.set()
            assert (await waiter.response()).status == 202
            assert (await blocker.response()).status == 200
            while heard != [1]:
                await trio.testing.wait_all_tasks_blocked()
            # None within the bound (the first holds it): refused, and not run.
            start = trio.current_time()
            refused = await raw_request(server.port, "POST", headers=headers, body=_note(2))
            waited = trio.current_time() - start
            assert heard == [1]
            hold.set()
            again = await raw_request(server.port, "POST", headers=headers, body=_note(2))
            while heard != [1, 2]:
                await trio.testing.wait_all_tasks_blocked()
    finally:
        await blocker.aclose()
        await waiter.aclose()
    assert refused.status == 503 and refused.headers["retry-after"] == "1"
    error = refused.json()
    assert error["id"] is None and "server busy" in error["error"]["message"]
    assert abs(waited - _TIMEOUT) < 0.5
    assert again.status == 202


async def test_a_notification_in_a_batch_without_a_slot_is_warned_of(
    nursery: trio.Nursery, autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A 2025-03-26 batch of notifications: one that finds no slot cannot be refused
    # alone (the others were taken; a 503 would have them sent, and run, twice). The
    # batch is 202, and the refusal goes into the busy warning, not a DEBUG line.
    app = App()
    heard: list[int] = []
    hold = trio.Event()

    async def roots_changed(ctx: Any) -> None:
        heard.append(ctx.params["n"])
        await hold.wait()

    app.handlers.set_notification_handler("notifications/roots/list_changed", roots_changed)
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=_TIMEOUT),
    )
    with trio.fail_after(IO_TIMEOUT):
        headers = await _batching_session(server.port)
        batch = b"[" + _note(1) + b"," + _note(2) + b"]"
        answer = await raw_request(server.port, "POST", headers=headers, body=batch)
        hold.set()
    assert answer.status == 202 and heard == [1]
    (warning,) = [r for r in caplog.records if "refused as busy" in r.getMessage()]
    assert warning.levelname == "WARNING" and "1 message(s)" in warning.getMessage()


async def test_a_request_cancelled_while_it_waits_for_a_slot_is_not_counted_as_busy(
    nursery: trio.Nursery, autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A legacy request cancelled (notifications/cancelled, another POST) while it waits
    # for a handler slot leaves the line when its wait ends: nobody was refused, so
    # the "refused as busy" warning (an operator's sign to add slots) says nothing of
    # it. One that was not cancelled still is.
    app = App()
    server = await start_server(
        nursery,
        app,
        era="legacy",
        config=SessionConfig(max_concurrent_handlers=1),
        transport=HttpTransportConfig(handler_slot_timeout=_TIMEOUT),
    )
    blocker = await RawConnection.open(server.port)
    waiter = await RawConnection.open(server.port)
    try:
        with trio.fail_after(IO_TIMEOUT):
            headers = session_headers(await raw_session(server.port))
            await blocker.send("POST", headers=headers, body=rpc(2, "tools/call", call("block")))
            await app.started_event.wait()
            await waiter.send("POST", headers=headers, body=rpc(3, "tools/call", call("echo")))
            await trio.testing.wait_all_tasks_blocked()
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 3},
            }
            answer = await raw_request(server.port, "POST", headers=headers, body=dumps(cancel))
            assert answer.status == 202
        await trio.sleep(_TIMEOUT + 1)  # (past the wait's bound)
        assert not [r for r in caplog.records if "refused as busy" in r.getMessage()]
        with trio.fail_after(IO_TIMEOUT):
            refused = await raw_request(
                server.port, "POST", headers=headers, body=rpc(4, "tools/call", call("echo"))
            )
            app.release.set()
            assert (await blocker.response()).status == 200
    finally:
        await blocker.aclose()
        await waiter.aclose()
    assert len(app.started) == 1  # (the cancelled one never ran)
    assert refused.status == 503
    (warning,) = [r for r in caplog.records if "refused as busy" in r.getMessage()]
    assert "1 message(s)" in warning.getMessage()

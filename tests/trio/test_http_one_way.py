"""One-way POSTs of the HTTP client (notifications, answers to the server's requests).

Such a message is sent in the order of the others of its kind by a task of the
channel's, never by the session's writer: a server slow to read a large one (a
sampling result, say) holds up neither the client's requests nor the session, and one
whose write (or answer) takes longer than ``write_timeout`` is lost alone, with a
warning, as the module docs of ``mcp_trio._http_client`` say. Refused ``503`` with
``Retry-After`` (a server with no handler slot for it, or over its connection bound:
nothing of it ran), it is sent again once, after that delay (at most
``RETRY_AFTER_CAP``), never past the session's close; refused again, it is lost with
a warning.

A hand-written HTTP/1.1 server (h11, loopback, port 0, a small receive buffer) answers
every request at once, but never reads a body larger than :data:`STALL_ABOVE` until the
test says so, refuses the first ``refusals`` one-way messages with ``503`` (or the
status ``refused``) and ``Retry-After``, and never answers the one-way messages of the
method ``silent`` (it reads them whole). It closes each connection after its answer.
The clock is the ``autojump_clock``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Literal

import attrs
import h11
import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio import SessionConfig
from mcp_trio._handlers import Handlers
from mcp_trio._http_client import _MAX_ONE_WAY, open_http_client

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

_ASK = {"jsonrpc": "2.0", "id": "ask-1", "method": "roots/list"}
"""What the server asks the client in the stream of a ``tools/call`` of ``ask``."""


@attrs.define
class _Server:
    """The fake server (see the module docs)."""

    refusals: int = 0
    """How many one-way messages (from the first) are refused ``503``."""
    refused: int = 503
    """The status they are refused with (``Retry-After`` whatever it is)."""
    retry_after: bytes = b"1"
    silent: str | None = None
    """A one-way message's method the server reads but never answers (unless it refuses
    it: ``refusals``): seen with status ``0``."""
    stuck: trio.Event = attrs.field(factory=trio.Event)
    """Set when the head of a large POST has come (its body is not read)."""
    drain: trio.Event = attrs.field(factory=trio.Event)
    """Set by the test: read the large body now, to its end or the connection's."""
    drained: trio.Event = attrs.field(factory=trio.Event)
    got: list[Literal["whole", "cut"]] = attrs.field(factory=list)
    """How each large body ended: all of it came, or the client dropped the connection."""
    seen: list[tuple[str, float, int]] = attrs.field(factory=list)
    """Each message read whole: its method (``answer`` for a response), when, and the
    status it was answered with."""
    answered: trio.Event = attrs.field(factory=trio.Event)
    """Set when a one-way message was read (whatever its answer)."""
    cuts: int = 0
    """How many one-way messages (from the first, but ``notifications/initialized``)
    are read whole and their connection then closed, unanswered: seen with status
    ``-1``."""

    def one_way(self) -> list[tuple[str, float, int]]:
        return [
            s
            for s in self.seen
            if s[0] not in ("initialize", "server/discover", "tools/call", "DELETE")
        ]

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
            self.seen.append(("DELETE", trio.current_time(), 200))
            await respond(conn, stream, 200, b"")
            return
        message = loads(body)
        method = message.get("method", "answer")
        rid = message.get("id")
        if method == "answer" or rid is None:
            status = 202
            if method != "notifications/initialized" and self.cuts:
                self.cuts -= 1
                status = -1
            elif method != "notifications/initialized" and self.refusals:
                self.refusals -= 1
                status = self.refused
            elif method == self.silent:
                status = 0
            self.seen.append((method, trio.current_time(), status))
            self.answered.set()
            if status == 0:
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.receive_some(1)  # (until the client gives up on it)
            elif status == 202:
                await respond(conn, stream, status, b"")
            elif status == -1:
                await stream.aclose()  # (read, never answered: the connection cut)
            else:
                await _refuse(conn, stream, status, self.retry_after)
            return
        self.seen.append((method, trio.current_time(), 200))
        if method == "server/discover":
            await respond(conn, stream, 200, result(rid, DISCOVER))
        elif method == "initialize":
            await respond(conn, stream, 200, result(rid, INITIALIZED), session="s1")
        elif message["params"]["name"] == "ask":
            # A server request in the call's stream, then the call's answer.
            events = [dumps(_ASK), result(rid, {"content": [text_block("asked")]})]
            sse = b"".join(b"data: " + event + b"\n\n" for event in events)
            await respond(conn, stream, 200, sse, sse=True)
        else:
            text = message["params"]["arguments"]["text"]
            await respond(conn, stream, 200, result(rid, {"content": [text_block(text)]}))


async def _refuse(
    conn: h11.Connection, stream: trio.SocketStream, status: int, retry_after: bytes
) -> None:
    """Answer ``status`` with ``Retry-After`` (``respond`` has it on a ``503`` only)."""
    headers = [(b"content-length", b"0"), (b"connection", b"close"), (b"retry-after", retry_after)]
    head = conn.send(h11.Response(status_code=status, headers=headers))
    await stream.send_all((head or b"") + (conn.send(h11.EndOfMessage()) or b""))
    await stream.aclose()


async def _serve(nursery: trio.Nursery, **kwargs: Any) -> tuple[_Server, str]:
    server = _Server(**kwargs)
    return server, await listen(nursery, server.handle)


def _big_roots() -> Handlers:
    """The client's handlers: its answer to ``roots/list`` is large."""
    handlers = Handlers()

    @handlers.on_request("roots/list")
    async def roots(ctx: Any) -> dict[str, Any]:
        return {"roots": [{"uri": "file:///" + BIG}]}

    return handlers


def _client(url: str, era: str, write_timeout: float = 5.0, **kwargs: Any) -> Any:
    return open_http_client(
        url,
        connection_config=client_connection_config(era),
        config=SessionConfig(write_timeout=write_timeout),
        transport=NO_GET,
        **kwargs,
    )


async def _echo(client: Any, text: str, **kwargs: Any) -> str:
    return text_of(await client.request("tools/call", call("echo", text=text), **kwargs))


def _lost(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "one-way message" in r.getMessage()
    ]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_stuck_notification_is_lost_alone_and_holds_up_no_request(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    era: str,
) -> None:
    """A large notification the server does not read: the requests after it are
    answered at once; at ``write_timeout`` it is lost, with a warning, and the session
    goes on (it used to end: the writer's own bound fired first)."""
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, era) as client:
            began = trio.current_time()
            await client.notify("notifications/big", {"data": BIG})
            await server.stuck.wait()
            assert await _echo(client, "small") == "small"
            assert trio.current_time() == began  # it waited for nothing
            while not _lost(caplog):
                await trio.sleep(0.5)
            assert trio.current_time() - began == pytest.approx(5, abs=0.5)
            assert "timed out after 5" in _lost(caplog)[0]
            assert await _echo(client, "after") == "after"  # the session goes on
            assert client.close_reason is None
            server.drain.set()
            await server.drained.wait()
    assert server.got == ["cut"]  # its connection was dropped


async def test_a_stuck_answer_to_the_server_is_lost_alone(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The same for the answer to a server's request (legacy: a large ``roots/list``
    result): the call that brought the request is answered, so is the next, and the
    answer alone is lost."""
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, "legacy", handlers=_big_roots()) as client:
            began = trio.current_time()
            result = await client.request("tools/call", call("ask"))
            assert text_of(result) == "asked"
            await server.stuck.wait()
            assert await _echo(client, "small") == "small"
            assert trio.current_time() == began
            while not _lost(caplog):
                await trio.sleep(0.5)
            assert await _echo(client, "after") == "after"
            assert client.close_reason is None
            server.drain.set()
            await server.drained.wait()
    assert server.got == ["cut"]


async def test_one_way_messages_keep_their_order_behind_a_stuck_one(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The notifications after a stuck one wait for it (one-way messages keep their
    order: a progress notification before the answer it precedes), then go out."""
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/big", {"data": BIG})
            await client.notify("notifications/first")
            await client.notify("notifications/second")
            await server.stuck.wait()
            assert await _echo(client, "small") == "small"
            assert [s[0] for s in server.one_way()] == ["notifications/initialized"]
            while len(server.one_way()) < 3:
                await server.answered.wait()
                server.answered = trio.Event()
            assert [s[0] for s in server.one_way()] == [
                "notifications/initialized",
                "notifications/first",
                "notifications/second",
            ]
            assert len(_lost(caplog)) == 1
            server.drain.set()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_notification_refused_503_is_sent_again_after_retry_after(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    era: str,
) -> None:
    server, url = await _serve(nursery, refusals=1, retry_after=b"2")
    with trio.fail_after(LONG):
        async with _client(url, era) as client:
            await client.notify("notifications/busy")
            while len(server.one_way()) < 2 + (era == "legacy"):
                await server.answered.wait()
                server.answered = trio.Event()
            busy = [(t, s) for m, t, s in server.one_way() if m == "notifications/busy"]
            assert [s for _, s in busy] == [503, 202]
            assert busy[1][0] - busy[0][0] == pytest.approx(2)
            assert await _echo(client, "after") == "after"
    assert not _lost(caplog)


async def test_an_answer_refused_503_is_sent_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An answer to a server's request may be refused ``503`` too (a server over its
    connection bound turns the POST away unread): sent again the same way."""
    server, url = await _serve(nursery, refusals=1)
    handlers = Handlers()

    @handlers.on_request("roots/list")
    async def roots(ctx: Any) -> dict[str, Any]:
        return {"roots": []}

    with trio.fail_after(LONG):
        async with _client(url, "legacy", handlers=handlers) as client:
            assert text_of(await client.request("tools/call", call("ask"))) == "asked"
            while [s[2] for s in server.one_way() if s[0] == "answer"] != [503, 202]:
                await server.answered.wait()
                server.answered = trio.Event()
    assert not _lost(caplog)


@pytest.mark.parametrize("cuts", [1, 2])
async def test_an_answer_whose_connection_broke_after_it_was_written_is_sent_again(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    cuts: int,
) -> None:
    """The connection of an answer to a server's request is cut after the answer was
    written, before the server's ``202``: the server may never have had it, and its
    handler would wait for it for ever (``ctx.sample`` has no bound of its own). It
    is sent once more at once, on another connection (a second copy is harmless: the
    server ignores an answer to a request no longer pending); cut again, it is lost
    with a warning (it was lost silently, never sent again). The session goes on."""
    server, url = await _serve(nursery, cuts=cuts)
    handlers = Handlers()

    @handlers.on_request("roots/list")
    async def roots(ctx: Any) -> dict[str, Any]:
        return {"roots": []}

    with trio.fail_after(LONG):
        async with _client(url, "legacy", handlers=handlers) as client:
            began = trio.current_time()
            assert text_of(await client.request("tools/call", call("ask"))) == "asked"
            while len([s for s in server.one_way() if s[0] == "answer"]) < 2:
                await server.answered.wait()
                server.answered = trio.Event()
            answers = [(t, s) for m, t, s in server.one_way() if m == "answer"]
            assert [s for _, s in answers] == [-1, 202 if cuts == 1 else -1]
            assert answers[1][0] == began  # at once, waiting for nothing
            await trio.testing.wait_all_tasks_blocked()
            if cuts == 1:
                assert not _lost(caplog)
            else:
                [lost] = _lost(caplog)
                assert lost.startswith(
                    "HTTP: a one-way message was lost: the server closed the connection"
                )
            assert await _echo(client, "after") == "after"
            assert client.close_reason is None
    assert len([s for s in server.one_way() if s[0] == "answer"]) == 2


async def test_a_notification_refused_503_twice_is_lost_with_a_warning(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Once more only, and a ``Retry-After`` far off is waited for a few seconds at most."""
    server, url = await _serve(nursery, refusals=5, retry_after=b"3600")
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/busy")
            while not _lost(caplog):
                await trio.sleep(0.5)
            busy = [(t, s) for m, t, s in server.one_way() if m == "notifications/busy"]
            assert [s for _, s in busy] == [503, 503]
            assert 0 < busy[1][0] - busy[0][0] <= 5
            assert "503" in _lost(caplog)[0]
            assert await _echo(client, "after") == "after"


@pytest.mark.parametrize(
    ("read", "why"),
    [(True, "the session closed before its Retry-After"), (False, "the session is closing")],
)
async def test_no_notification_is_sent_again_past_the_close(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    read: bool,
    why: str,
) -> None:
    """The session closes while a refused notification waits for its ``Retry-After``
    (``read``), or as its ``503`` comes: the close does not wait for it (not even the
    half of ``close_timeout`` it gives the queue), and it is not sent again: the
    ``DELETE`` is the last the server gets."""
    server, url = await _serve(nursery, refusals=1, retry_after=b"3")
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/busy")
            while not server.one_way() or server.one_way()[-1][2] != 503:
                await server.answered.wait()
                server.answered = trio.Event()
            if read:
                await trio.testing.wait_all_tasks_blocked()  # (its wait began)
            began = trio.current_time()
        assert trio.current_time() - began < 0.5
        await trio.sleep(10)
    assert [s[2] for s in server.one_way() if s[0] == "notifications/busy"] == [503]
    assert server.seen[-1][0] == "DELETE"
    assert _lost(caplog) == [f"HTTP: a one-way message was refused: status 503 ({why})"]


@pytest.mark.parametrize("status", [429, 500])
async def test_only_a_503_is_sent_again(
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    """A ``429`` or ``500`` with ``Retry-After``: lost with a warning after one attempt
    (only a ``503`` says nothing of it ran)."""
    server, url = await _serve(nursery, refusals=1, refused=status, retry_after=b"1")
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/busy")
            while not _lost(caplog):
                await trio.sleep(0.5)
            await trio.sleep(10)
            assert await _echo(client, "after") == "after"
    assert [s[2] for s in server.one_way() if s[0] == "notifications/busy"] == [status]
    assert _lost(caplog) == [f"HTTP: a one-way message was refused: status {status}"]


async def test_a_notification_the_server_never_answers_is_lost_at_write_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The server reads a notification whole and never answers it (its write is done:
    only ``_send_one_way``'s own bound ends it): at ``write_timeout`` it is lost with a
    warning, the next one goes, and the session goes on."""
    server, url = await _serve(nursery, silent="notifications/silent")
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            began = trio.current_time()
            await client.notify("notifications/silent")
            await client.notify("notifications/next")
            while len(server.one_way()) < 3:
                await server.answered.wait()
                server.answered = trio.Event()
            assert [(m, s) for m, _, s in server.one_way()] == [
                ("notifications/initialized", 202),
                ("notifications/silent", 0),
                ("notifications/next", 202),
            ]
            assert server.one_way()[2][1] - began == pytest.approx(5)
            assert _lost(caplog) == [
                "HTTP: a one-way message was lost: sending it timed out after 5 s"
            ]
            assert await _echo(client, "after") == "after"
            assert client.close_reason is None


async def test_a_notification_waiting_for_room_goes_once_there_is_some(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue is full behind a stuck notification (``_MAX_ONE_WAY``, the stuck one
    among them): the next one waits (the session's writer does, backpressure) until the
    stuck one is lost and so leaves room, then goes, after the others, in order."""
    server, url = await _serve(nursery)
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/big", {"data": BIG})
            for n in range(1, _MAX_ONE_WAY):
                await client.notify(f"notifications/n{n}")
            await server.stuck.wait()
            await trio.sleep(1)
            began = trio.current_time()
            await client.notify(f"notifications/n{_MAX_ONE_WAY}")  # (no room: it waits)
            assert trio.current_time() - began == pytest.approx(4)  # the big one lost
            while len(server.one_way()) < 1 + _MAX_ONE_WAY:
                await server.answered.wait()
                server.answered = trio.Event()
            assert [s[0] for s in server.one_way()] == [
                "notifications/initialized",
                *(f"notifications/n{n}" for n in range(1, _MAX_ONE_WAY + 1)),
            ]
            assert [lost[:40] for lost in _lost(caplog)] == [
                "HTTP: a one-way message was lost: sendin"
            ]
            assert client.close_reason is None
            server.drain.set()


async def test_a_notification_with_no_room_in_time_is_lost_alone(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """No room comes for longer than ``write_timeout`` (the first one-way message is
    refused ``503``, waits 4 s, and is then never answered: 9 s): the one waiting for
    room gives up before the session's writer's own bound (which would end the
    session), and is lost alone, with a warning; the others go, in order."""
    server, url = await _serve(nursery, refusals=1, retry_after=b"4", silent="notifications/slow")
    with trio.fail_after(LONG):
        async with _client(url, "legacy") as client:
            await client.notify("notifications/slow")
            for n in range(1, _MAX_ONE_WAY):
                await client.notify(f"notifications/n{n}")
            began = trio.current_time()
            await client.notify("notifications/unlucky")  # (no room in time: lost)
            assert trio.current_time() - began == pytest.approx(4.5)
            assert client.close_reason is None
            while len(server.one_way()) < 2 + _MAX_ONE_WAY:
                await server.answered.wait()
                server.answered = trio.Event()
            assert [(m, s) for m, _, s in server.one_way()] == [
                ("notifications/initialized", 202),
                ("notifications/slow", 503),
                ("notifications/slow", 0),
                *((f"notifications/n{n}", 202) for n in range(1, _MAX_ONE_WAY)),
            ]
            assert _lost(caplog) == [
                f"HTTP: a one-way message was lost: {_MAX_ONE_WAY} before it wait for the "
                "server to take them",
                "HTTP: a one-way message was lost: sending it timed out after 5 s",
            ]
            assert await _echo(client, "after") == "after"
            assert client.close_reason is None

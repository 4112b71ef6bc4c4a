"""The legacy GET stream is kept open for as long as the session lasts.

``2025-11-25/basic/transports.mdx``: the client MAY open the GET stream at any time, and
resumes a stream that broke with ``Last-Event-ID`` after the server's ``retry``. A
stream that ends and cannot be resumed (no event id, the events are gone) is opened
again; a ``404`` starts a new session; a server that cannot be reached any more ends
the session (``SessionClosed``) after ``max_resume_attempts`` attempts that back off;
a ``405`` means the server offers no GET stream and is never retried.

Real sockets on 127.0.0.1, port 0: hand-written servers whose GETs follow a script,
and real ones that stop and start again.
The clock is the ``autojump_clock``: loopback I/O is done before the run loop would
sleep, so virtual time moves only for timers, and the client's waits are exact.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import attrs
import h11
import pytest
import trio
import trio.testing

import mcp_trio
from mcp_sansio._json import dumps
from mcp_sansio.http import MAX_REOPEN_DELAY, HttpClientConfig
from mcp_trio import Handlers, NotificationContext, SessionClosed
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    LEGACY,
    App,
    client_connection_config,
    read_request,
    respond,
    start_server,
)

SESSION = ("mcp-session-id", "s1")
SSE = ("content-type", "text/event-stream")
JSON = ("content-type", "application/json")


def log_event(n: int, *, event_id: str | None = None) -> bytes:
    """An SSE event carrying a ``notifications/message`` (``data`` is ``n``)."""
    params = {"level": "info", "data": n}
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    head = f"id: {event_id}\n".encode() if event_id is not None else b""
    return head + b"data: " + dumps(note) + b"\n\n"


@attrs.frozen
class GetAnswer:
    """How the scripted server answers one GET."""

    status: int = 200
    body: bytes = b""
    """For a 200, the SSE events (then the stream ends, unless ``hold``)."""
    hold: bool = False
    """Keep the stream open after ``body``."""
    drop: bool = False
    """Close the connection without an answer."""
    redirect: bool = False
    """Answer ``307`` back to the endpoint itself (a redirect loop)."""


@attrs.define
class ScriptedServer:
    """A legacy server written by hand: ``initialize``, notifications, ``DELETE``; its
    GETs are answered from ``script`` in turn (the last answer once it runs out)."""

    script: list[GetAnswer]
    gets: list[tuple[float, str | None]] = attrs.field(factory=list)
    """Each GET: when it came, and its ``Last-Event-ID``."""
    empty_json: bool = False
    """Answer notifications and the ``DELETE`` ``200`` with an empty JSON body (as the
    Python SDK answers its ``DELETE``), not ``202``/``204``."""
    deleted: bool = False

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (found := await read_request(conn, stream)) is not None:
            head, message = found
            if head.method == b"GET":
                headers = {k.decode(): v.decode() for k, v in head.headers}
                self.gets.append((trio.current_time(), headers.get("last-event-id")))
                answer = self.script[min(len(self.gets), len(self.script)) - 1]
                if answer.drop:
                    await stream.aclose()
                    return
                if answer.redirect:
                    location = (SESSION, ("location", "/mcp"))
                    await respond(conn, stream, b"", status=307, headers=location)
                    conn.start_next_cycle()
                    continue
                if answer.hold:
                    response = h11.Response(status_code=200, headers=[SESSION, SSE])
                    out = [conn.send(response), conn.send(h11.Data(data=answer.body))]
                    await stream.send_all(b"".join(part for part in out if part))
                    await trio.sleep_forever()
                headers_out = (SESSION, SSE) if answer.status == 200 else (SESSION,)
                await respond(conn, stream, answer.body, status=answer.status, headers=headers_out)
            elif message is not None and message.get("method") == "initialize":
                result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {}}
                answer_body = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
                await respond(conn, stream, answer_body, headers=(SESSION, JSON))
            elif message is not None and "id" in message:  # ping
                answer_body = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                await respond(conn, stream, answer_body, headers=(SESSION, JSON))
            else:  # a notification (202), the DELETE at the end (204)
                self.deleted = self.deleted or head.method == b"DELETE"
                if self.empty_json:
                    await respond(conn, stream, b"", headers=(SESSION, JSON))
                else:
                    await respond(conn, stream, b"", status=202 if message else 204)
            conn.start_next_cycle()


async def serve(nursery: trio.Nursery, server: ScriptedServer) -> str:
    listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/mcp"


class Heard:
    """Client handlers that pass on the ``data`` of each ``notifications/message``."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[Any](100)
        self.handlers = Handlers()
        self.handlers.set_notification_handler("notifications/message", self._heard)

    async def _heard(self, ctx: NotificationContext) -> None:
        assert ctx.params is not None
        await self.send.send(ctx.params["data"])


def legacy(url: str, heard: Heard, **options: Any) -> Any:
    return open_http_client(
        url,
        connection_config=client_connection_config("legacy"),
        handlers=heard.handlers,
        **options,
    )


# ------------------------------------------------------------------ opened again


async def test_a_stream_without_event_ids_is_opened_again_after_retry(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Nothing to resume from: a new GET, after the retry the server announced.
    ended = GetAnswer(body=b"retry: 3000\n\n" + log_event(1))
    server = ScriptedServer([ended, GetAnswer(body=log_event(2), hold=True)])
    url = await serve(nursery, server)
    heard = Heard()
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, heard) as client:
            assert await heard.receive.receive() == 1
            assert await heard.receive.receive() == 2  # on the second GET
            assert not client.closed
    (first, _), (second, last_event_id) = server.gets
    assert last_event_id is None
    assert second - first == pytest.approx(3.0)


async def test_a_stream_whose_events_are_gone_is_opened_afresh(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The resumption is refused (410: the events after that id are no longer held):
    # the stream is opened again without Last-Event-ID, rather than given up.
    server = ScriptedServer(
        [
            GetAnswer(body=b"retry: 0\n\n" + log_event(1, event_id="e1")),
            GetAnswer(status=410),
            GetAnswer(body=log_event(2), hold=True),
        ]
    )
    url = await serve(nursery, server)
    heard = Heard()
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, heard):
            assert [await heard.receive.receive() for _ in "ab"] == [1, 2]
    assert [last for _, last in server.gets] == [None, "e1", None]


async def test_a_server_that_offers_no_get_stream_is_not_asked_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    server = ScriptedServer([GetAnswer(status=405)])
    url = await serve(nursery, server)
    with trio.fail_after(100):  # (virtual time)
        async with legacy(url, Heard()) as client:
            await trio.sleep(2 * MAX_REOPEN_DELAY)
            assert not client.closed
    assert len(server.gets) == 1


@pytest.mark.parametrize("answer", [GetAnswer(drop=True), GetAnswer(redirect=True)])
async def test_a_server_that_never_gives_a_stream_keeps_its_session(
    answer: GetAnswer, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A dropped connection or a redirect loop, before any stream came, means "no GET
    # stream" as any other answer does; the POSTs work, the session goes on.
    server = ScriptedServer([answer])
    url = await serve(nursery, server)
    with trio.fail_after(600):  # (virtual time)
        async with legacy(url, Heard()) as client:
            await trio.sleep(240)
            tried = len(server.gets)
            await trio.sleep(240)
            assert len(server.gets) == tried  # given up, quietly
            assert not client.closed, client.close_reason
            assert await client.request("ping") == {}
    config = HttpTransportConfig()
    assert tried <= (config.max_resume_attempts + 1) * (config.max_redirects + 1)


async def test_a_first_get_dropped_once_is_tried_again(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # One dropped connection (a keep-alive race, say) is not "no GET stream".
    server = ScriptedServer([GetAnswer(drop=True), GetAnswer(body=log_event(2), hold=True)])
    url = await serve(nursery, server)
    heard = Heard()
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, heard):
            assert await heard.receive.receive() == 2
    assert len(server.gets) == 2


async def test_a_first_get_dropped_before_its_head_holds_up_no_request(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The session's first requests wait for its first GET's head, or for that attempt
    # to fail: not for the next attempt, default_retry_ms later (5 s here).
    server = ScriptedServer([GetAnswer(drop=True), GetAnswer(body=log_event(2), hold=True)])
    url = await serve(nursery, server)
    slow = HttpClientConfig(default_retry_ms=5000)
    start = trio.current_time()
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, Heard(), http_config=slow):
            entered = trio.current_time() - start
    assert entered < 1


async def test_the_last_event_id_outlives_a_resumption_that_brought_no_event(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # As EventSource: the id to resume from is the last one seen, on any stream.
    server = ScriptedServer(
        [
            GetAnswer(body=b"retry: 1000\n\n" + log_event(1, event_id="e1")),
            GetAnswer(body=b""),  # resumed: nothing new yet, the stream ends
            GetAnswer(body=log_event(2), hold=True),
        ]
    )
    url = await serve(nursery, server)
    heard = Heard()
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, heard):
            assert await heard.receive.receive() == 1
            assert await heard.receive.receive() == 2
    assert [last for _, last in server.gets] == [None, "e1", "e1"]


async def test_a_stream_that_fails_to_open_again_ends_the_session(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # It worked once: a server that then answers every GET with 503 has stopped
    # carrying the session's messages. The attempts back off, then the session ends.
    server = ScriptedServer([GetAnswer(body=b"retry: 1000\n\n"), GetAnswer(status=503)])
    url = await serve(nursery, server)
    transport = HttpTransportConfig(max_resume_attempts=2)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, Heard(), transport=transport) as client:
            await client.wait_closed()
            reason = client.close_reason
    assert reason is not None
    assert "GET stream cannot be opened again: status 503" in str(reason)
    times = [when - server.gets[0][0] for when, _ in server.gets]
    assert times == pytest.approx([0, 1, 2, 4])  # retry, then doubling; three 503s


async def test_a_stream_redirected_in_a_loop_once_one_came_ends_the_session(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A redirect loop is a failed attempt too, counted as a 503 is (not a stream that
    # stops quietly): past max_resume_attempts the session ends.
    server = ScriptedServer([GetAnswer(body=b"retry: 1000\n\n"), GetAnswer(redirect=True)])
    url = await serve(nursery, server)
    transport = HttpTransportConfig(max_resume_attempts=1, max_redirects=1)
    with trio.fail_after(IO_TIMEOUT):
        async with legacy(url, Heard(), transport=transport) as client:
            await client.wait_closed()
            reason = client.close_reason
    assert reason is not None
    assert "GET stream cannot be opened again: too many redirects" in str(reason)


# ------------------------------------------------------------------ the server restarts


async def test_a_listening_client_follows_a_server_that_restarts(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A client that only listens: the server stops (its GET stream ends, then no
    # connection can be made), then starts again on the same port knowing no session.
    # The GET stream is tried again until it gets the 404 that starts a new session,
    # whose GET stream brings what the new server says.
    async def run(server: mcp_trio.Server, port: int, scope: trio.CancelScope, **kw: Any) -> None:
        with scope:
            await server.serve_http("127.0.0.1", port, **kw)

    def make(name: str) -> mcp_trio.Server:
        server = mcp_trio.Server(name)
        server.add_tool(lambda: 0, name="zero")  # (a server with tools announces changes)
        return server

    first, scope = make("first"), trio.CancelScope()
    handle = await nursery.start(run, first, 0, scope)
    port = handle.port
    heard: list[str] = []
    with trio.fail_after(100):  # (virtual time)
        async with mcp_trio.open_client(handle.url, era="legacy") as client:
            got, arrived = trio.open_memory_channel[str](10)

            async def listen(task_status: trio.TaskStatus[None]) -> None:
                async with client.subscribe(tools=True) as subscription:
                    task_status.started()
                    async for note in subscription:
                        await got.send(note.method)

            async with trio.open_nursery() as inner:
                await inner.start(listen)
                first.add_tool(lambda: 1, name="one")
                heard.append(await arrived.receive())
                scope.cancel()  # the server stops
                await trio.sleep(3)  # (virtual) the client finds no server, twice
                second, scope = make("second"), trio.CancelScope()
                await nursery.start(run, second, port, scope)
                await trio.sleep(10)  # (virtual) it finds the new one: a new session
                assert client.server_info is not None and client.server_info.name == "second"
                second.add_tool(lambda: 2, name="two")
                heard.append(await arrived.receive())
                assert not client.session.closed
                inner.cancel_scope.cancel()
    scope.cancel()
    assert heard == ["notifications/tools/list_changed"] * 2


async def test_a_server_gone_for_good_ends_the_session(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # README: "The session ends (SessionClosed) when no connection can be made."
    stop = trio.CancelScope()

    async def host(task_status: trio.TaskStatus[Any]) -> None:
        with stop:
            async with trio.open_nursery() as servers:
                task_status.started(await start_server(servers, App()))
                await trio.sleep_forever()

    handle = await nursery.start(host)
    with trio.fail_after(100):  # (virtual time)
        async with mcp_trio.open_client(handle.url, era="legacy") as client:
            async with client.subscribe(tools=True) as subscription:
                await trio.testing.wait_all_tasks_blocked()  # its GET stream is open
                stopped = trio.current_time()
                stop.cancel()
                with pytest.raises(SessionClosed, match="cannot be reached any more"):
                    async for _ in subscription:
                        pass  # pragma: no cover
            waited = trio.current_time() - stopped
            reason = client.session.close_reason
    assert reason is not None and "could not connect" in str(reason)
    # The retry (1 s), then max_resume_attempts + 1 (6) refusals, waits doubling between
    # them: 1 + 1+2+4+8+16.
    assert waited == pytest.approx(32)


# ------------------------------------------------------------------ warnings as they come


async def test_warnings_of_a_long_stream_are_logged_as_they_come_and_bounded(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    junk = 200
    body = b"data: not json\n\n" * junk + log_event(1)
    server = ScriptedServer([GetAnswer(body=body, hold=True)])
    url = await serve(nursery, server)
    heard = Heard()
    with caplog.at_level(logging.WARNING, logger="mcp_trio"), trio.fail_after(IO_TIMEOUT):
        async with legacy(url, heard, http_config=HttpClientConfig(max_warnings=10)):
            assert await heard.receive.receive() == 1
            # The stream is still open: what was dropped is already in the log.
            logged = [r.getMessage() for r in caplog.records if r.name == "mcp_trio"]
    assert logged == [
        *["HTTP: dropped a body that is not JSON"] * 10,
        "HTTP: more than 10 warnings: further ones are only counted",
    ]


async def test_an_empty_json_answer_to_a_one_way_message_is_no_warning(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # transports.mdx: a notification is answered 202; a server that says 200 with an
    # empty JSON body loses nothing, so it is noted at DEBUG, once per answer (a
    # warning would come with each notification).
    server = ScriptedServer([GetAnswer(status=405)], empty_json=True)
    url = await serve(nursery, server)
    with caplog.at_level(logging.DEBUG, logger="mcp_trio"), trio.fail_after(IO_TIMEOUT):
        async with legacy(url, Heard()) as client:
            await client.request("ping")
    assert server.deleted
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    (noted,) = [r for r in caplog.records if "one-way message was answered" in r.getMessage()]
    assert noted.getMessage() == "HTTP: a one-way message was answered 200 (json), not 202"

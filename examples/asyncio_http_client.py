"""An MCP client over Streamable HTTP with asyncio and h11, driving the sans-IO core by hand.

No ``mcp_trio``: a :class:`~mcp_sansio.Connection` speaks MCP, an
:class:`~mcp_sansio.http.HttpClient` says what each message's HTTP request is and what
each answer means, h11 frames HTTP/1.1, and asyncio moves the bytes. The order of the
calls into the core is the point ("Driving HttpClient" in ``help(mcp_sansio.http)``).

Run a server, then the client (``auto``, the default, probes for the modern era and
falls back to a legacy session)::

    mcp-trio run examples/notes_server.py --transport http       # http://127.0.0.1:8000/mcp
    python examples/asyncio_http_client.py http://127.0.0.1:8000/mcp [auto|legacy|modern]

It lists the tools, adds a note, starts ``summarize_notes`` with progress and cancels
it after the first report, then deletes the note it added, which the server asks the
user to confirm: an ``elicitation/create`` request in the legacy era, an ``input_required``
result in the modern era.

A modern request whose answer is lost after it went out (the connection ends before
the answer does, or before its head) is re-issued under a new id, as the spec requires.

Left out, to stay short (each is in the module docs named above): keep-alive (one TCP
connection per HTTP request), TLS, redirects, starting a new session when the server
forgets one (a 404 ends this client's calls), resuming a legacy stream after a
connection that failed (a stream the server ends is resumed) or telling the server of one
given up (``ClientResponse.abandoned``: POST it ``abandoned_request``), and sending a
notification again (``ClientRequest.again``).
"""

from __future__ import annotations

import asyncio
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import h11

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    ErrorCode,
    ErrorReceived,
    Event,
    HandshakeCompleted,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
    RequestId,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
)
from mcp_sansio.http import (
    ClientRequest,
    ClientResponse,
    HttpClient,
    ReplyNotCarried,
    http_error,
    pinned_http_config,
    reissue_refused,
    split_broken,
)

Answer = ResultReceived | ErrorReceived | RequestTimedOut
EraName = Literal["auto", "legacy", "modern"]
ERAS: tuple[EraName, ...] = get_args(EraName)


def now() -> float:
    return time.monotonic()


def say_yes(params: dict[str, Any]) -> dict[str, Any]:
    """The user of this example: accepts a form of yes/no questions (all yes), declines
    any other."""
    print("question:", params.get("message"))
    fields = (params.get("requestedSchema") or {}).get("properties") or {}
    if fields and all(f.get("type") == "boolean" for f in fields.values()):
        return {"action": "accept", "content": dict.fromkeys(fields, True)}
    return {"action": "decline"}


@dataclass(eq=False)
class Call:
    """A request of ours, under the id it goes by now (a modern retry or re-issue
    gives it a new one)."""

    request_id: RequestId
    answer: asyncio.Future[Answer]
    on_progress: Callable[[ProgressReceived], None] | None = None


@dataclass(eq=False)
class Exchange:
    """One HTTP request in flight: its task, and its answer once the head came."""

    task: asyncio.Task[None] | None = None
    response: ClientResponse | None = None


class Client:
    """An MCP client for the endpoint ``url``; ``era`` as ``ConnectionConfig.era``."""

    def __init__(self, url: str, era: EraName = "auto") -> None:
        self.url = url
        config = ConnectionConfig(
            implementation={"name": "asyncio-http-client", "version": "1"},
            capabilities={"elicitation": {"form": {}}},
            era=era,
            request_timeout=30,
        )
        self.conn = Connection("client", config)
        # A pinned era is the HTTP layer's too (no probe); "auto" leaves it to learn.
        self.http = HttpClient(url, pinned_http_config(None, era))
        self.calls: dict[RequestId, Call] = {}  # by the id each goes by now
        self.exchanges: dict[RequestId, Exchange] = {}  # where each one's answer comes
        self.tasks: set[asyncio.Task[None]] = set()
        self.one_way: set[asyncio.Task[None]] = set()  # POSTs without requests
        self.ready: asyncio.Future[HandshakeCompleted] = asyncio.get_running_loop().create_future()
        self.wake = asyncio.Event()  # the next deadline may have moved
        self.timers = asyncio.create_task(self._timers())

    # ------------------------------------------------------------------ the core's output

    def flush(self) -> list[asyncio.Task[None]]:
        """Send what the core queued (after *every* call into it): one HTTP request per
        message. Returns the tasks that carry them, or close a stream to cancel."""
        started = []
        for payload in self.conn.data_to_send():
            # A cancellation (the caller's, or a timeout's): stop reading the request's
            # answer. Modern: closing its connection *is* the cancellation, and the
            # notification is not sent; legacy: it is POSTed as usual.
            rid = self.http.stream_cancellation(payload)
            if rid is not None:
                if (task := self._stop_reading(rid)) is not None:
                    started.append(task)
                continue
            if (rid := self.http.cancelled_request(payload)) is not None:
                self._stop_reading(rid)
            try:
                sent = self.http.post(payload)
            except ReplyNotCarried:
                continue  # modern: a reply to the server has no way to travel; drop it
            started.append(self._start(sent))
        self.wake.set()
        return started

    def _stop_reading(self, rid: RequestId) -> asyncio.Task[None] | None:
        """Forget ``rid`` on its answer; close that connection once it carries no other."""
        exchange = self.exchanges.pop(rid, None)
        if exchange is None:
            return None
        if exchange.response is not None:
            exchange.response.forget(rid)  # (a legacy stream is not resumed for it)
            if exchange.response.unanswered:
                return None  # (a 2025-03-26 batch: others still wait on it)
        assert exchange.task is not None
        exchange.task.cancel()
        return exchange.task

    def _start(self, sent: ClientRequest) -> asyncio.Task[None]:
        """Send ``sent`` and read its answer, in a task of its own."""
        exchange = Exchange()
        for rid in sent.request_ids:
            self.exchanges[rid] = exchange
        task = exchange.task = asyncio.create_task(self._exchange(sent, exchange))
        self.tasks.add(task)
        if not sent.request_ids:
            self.one_way.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self.tasks.discard(task)
            self.one_way.discard(task)
            for rid in sent.request_ids:  # (unless a resumption carries it on)
                if self.exchanges.get(rid) is exchange:
                    del self.exchanges[rid]

        task.add_done_callback(finished)
        return task

    # ------------------------------------------------------------------ one HTTP exchange

    async def _exchange(self, sent: ClientRequest, exchange: Exchange) -> None:
        """Send ``sent``, feed its answer to the connection as it comes."""
        parts = urllib.parse.urlsplit(self.url)
        request = sent.request
        headers = list(request.headers)  # Host and the MCP headers: the core's
        if request.method == "POST":  # framing is ours (h11 wants it)
            headers.append((b"content-length", str(len(request.body)).encode()))
        h = h11.Connection(h11.CLIENT)
        out: list[h11.Event] = [
            h11.Request(method=request.method, target=request.target, headers=headers),
            *([h11.Data(data=request.body)] if request.body else []),
            h11.EndOfMessage(),
        ]
        response: ClientResponse | None = None
        cut_short = True
        written = ended = False  # the request is out whole; the connection ended
        try:
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        except OSError as exc:
            self._fail(sent.request_ids, f"could not connect: {exc}")
            return
        try:
            writer.transport.set_write_buffer_limits(high=0)  # (drain: until all is out)
            writer.write(b"".join(h.send(event) or b"" for event in out))
            await writer.drain()
            written = True
            while True:
                event = h.next_event()
                if event is h11.NEED_DATA:
                    data = await reader.read(65536)
                    ended = not data
                    h.receive_data(data)  # (b"": the end)
                elif isinstance(event, h11.Response):
                    response = exchange.response = self.http.response(
                        sent, event.status_code, event.headers, follow_redirects=False
                    )
                elif isinstance(event, h11.Data) and response is not None:
                    self._receive(response.feed(bytes(event.data)))
                elif isinstance(event, h11.EndOfMessage):
                    cut_short = False
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    break
        except OSError:
            ended = True  # the connection failed: the body was cut short
        except h11.RemoteProtocolError:
            pass  # HTTP broke (a malformed head is the server's answer, broken)
        finally:
            writer.close()  # (and on our own cancellation: that closes the stream)
        if response is None:  # no head: the transport failed these requests
            why = "the connection closed before the response"
            if sent.modern and written and ended:
                # Out whole, then the connection ended: the server may have had it, so
                # it is re-issued (a subscriptions/listen fails: the subscription's).
                fail, reissue = split_broken(sent, sent.request_ids)
                self._fail(fail, why)
                self._reissue(reissue, why)
            else:
                self._fail(sent.request_ids, why)
            return
        # The end of the body: what it still holds, and errors for what it did not answer.
        self._receive(response.feed_eof(cut_short=cut_short))
        self._reissue(response.broken, response.broken_why)  # modern: the stream broke
        if response.session_expired:  # 404: see "Session expiry" in the module docs
            self._fail(response.resend, "the server forgot the session")
        again = response.resume()  # legacy: a stream that ended early goes on, by GET
        if again is not None:
            await asyncio.sleep(self.http.resume_delay(again))
            self._start(again)

    def _reissue(self, rids: Iterable[RequestId], why: str) -> None:
        """Modern: send these requests again under new ids (their answers were lost after
        they went out), or fail them when the core will not (re-issued too often, or
        past their deadline), worded as the mcp_trio clients do."""
        for rid in rids:
            try:
                self._moved(rid, self.conn.reissue_request(rid, now=now()))
            except LocalProtocolError:
                error = reissue_refused(rid, why, self.conn.reissue_count(rid))
                self._handle(self.conn.receive_message(error, now=now()))
        self.flush()

    def _fail(self, rids: Iterable[RequestId], why: str) -> None:
        """HTTP, not the server, kept these answers from coming: fail them alike."""
        for rid in rids:
            self._handle(self.conn.receive_message(http_error(rid, why), now=now()))
        self.flush()

    def _receive(self, messages: list[bytes]) -> None:
        for message in messages:
            self._handle(self.conn.receive_message(message, now=now()))
        self.flush()

    async def _timers(self) -> None:
        while True:
            deadline = self.conn.next_deadline()
            delay = None if deadline is None else max(0.0, deadline - now())
            try:
                async with asyncio.timeout(delay):
                    await self.wake.wait()
            except TimeoutError:
                self._handle(self.conn.handle_timer(now()))  # (timeouts cancel: flush)
                self.flush()
            self.wake.clear()

    # ------------------------------------------------------------------ events

    def _handle(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, HandshakeCompleted):
                self.ready.set_result(event)
            elif isinstance(event, ResultReceived | ErrorReceived | RequestTimedOut):
                call = self.calls.pop(event.request_id, None)
                if call is not None:
                    call.answer.set_result(event)
                elif not self.ready.done():  # initialize (or a pinned discover) failed
                    self.ready.set_exception(ConnectionError(f"no handshake: {event}"))
            elif isinstance(event, ProgressReceived):
                call = self.calls.get(event.request_id)
                if call is not None and call.on_progress is not None:
                    call.on_progress(event)
            elif isinstance(event, InputRequired):  # modern: the server asks in a result
                # (The core let through only what we declared: form elicitation.)
                answers = {
                    key: say_yes(ask.get("params") or {})
                    for key, ask in event.input_requests.items()
                }
                new = self.conn.retry_with_input(event.request_id, answers, now=now())
                self._moved(event.request_id, new)
            elif isinstance(event, RequestReceived):  # legacy: the server asks by request
                if event.method == "elicitation/create":
                    self.conn.send_result(event.request_id, say_yes(event.params or {}))
                else:
                    why = f"Method not found: {event.method}"
                    self.conn.send_error(event.request_id, ErrorCode.METHOD_NOT_FOUND, why)
            # Anything else (notifications, late answers the core dropped) is not needed here.

    def _moved(self, old: RequestId, new: RequestId) -> None:
        """A modern call goes on under a new id (``retry_with_input``, ``reissue_request``)."""
        call = self.calls.pop(old, None)
        if call is not None:
            call.request_id = new
            self.calls[new] = call

    # ------------------------------------------------------------------ the API

    async def open(self) -> HandshakeCompleted:
        """Discover the server (modern) or initialize a session (legacy)."""
        self.conn.start(now=now())
        self.flush()
        done = await self.ready
        if self.http.session_id is not None:
            # Legacy: once the server has taken notifications/initialized (its 202),
            # listen on the session's GET stream for what it says on its own.
            await asyncio.gather(*self.one_way)
            self._start(self.http.open_stream())
        return done

    def start(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        on_progress: Callable[[ProgressReceived], None] | None = None,
    ) -> Call:
        """Send a request; await ``call.answer``, or :meth:`cancel` it."""
        progress = on_progress is not None
        rid = self.conn.send_request(method, params, now=now(), progress=progress)
        call = self.calls[rid] = Call(rid, asyncio.get_running_loop().create_future(), on_progress)
        self.flush()
        return call

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its result (an error or a timeout raises)."""
        answer = await self.start(method, params).answer
        if isinstance(answer, ResultReceived):
            return answer.result
        if isinstance(answer, ErrorReceived):
            raise RuntimeError(f"{method}: {answer.error.code} {answer.error.message}")
        raise TimeoutError(f"{method}: no answer in time")

    async def cancel(self, call: Call, reason: str) -> None:
        """Cancel ``call``; return once the server has been told (legacy: the 202 of
        its ``notifications/cancelled``; modern: its stream is closed)."""
        del self.calls[call.request_id]
        call.answer.cancel()
        self.conn.cancel_request(call.request_id, reason)
        await asyncio.gather(*self.flush(), return_exceptions=True)

    async def close(self) -> None:
        """Stop every exchange, then end the legacy session (``DELETE``), if any."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        ending = self.http.terminate()
        if ending is not None:
            await self._start(ending)
        self.timers.cancel()


async def main(url: str, era: EraName) -> None:
    client = Client(url, era)
    try:
        done = await client.open()
        name = (done.peer_info or {}).get("name")
        print(f"connected: {done.era.value} era, protocol {done.protocol_version}, server {name}")
        await demo(client)
    finally:
        await client.close()


async def demo(client: Client) -> None:
    tools = await client.request("tools/list")
    print("tools:", ", ".join(sorted(tool["name"] for tool in tools["tools"])))

    note = {"title": "Lemons", "body": "Buy two.", "tags": ["home"]}
    added = await client.request("tools/call", {"name": "add_note", "arguments": note})
    note_id = added["structuredContent"]["id"]
    print(f"add_note: #{note_id}")

    # A call with progress, cancelled once it has reported.
    reported = asyncio.Event()

    def progress(event: ProgressReceived) -> None:
        total = "?" if event.total is None else f"{event.total:g}"
        print(f"progress: {event.progress:g}/{total} {event.message}")
        reported.set()

    call = client.start("tools/call", {"name": "summarize_notes"}, on_progress=progress)
    await reported.wait()
    await client.cancel(call, "the user pressed stop")
    print("summarize_notes: cancelled")

    # The server asks the user to confirm (say_yes answers).
    deleted = await client.request(
        "tools/call", {"name": "delete_note", "arguments": {"note_id": note_id}}
    )
    print("delete_note:", deleted["content"][0]["text"])


if __name__ == "__main__":
    era = sys.argv[2] if len(sys.argv) > 2 else "auto"
    if len(sys.argv) not in (2, 3) or era not in ERAS:
        sys.exit(f"usage: {sys.argv[0]} URL [{'|'.join(ERAS)}]")
    asyncio.run(main(sys.argv[1], era))

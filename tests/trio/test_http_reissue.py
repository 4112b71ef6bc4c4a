"""A modern request whose response stream breaks is re-issued with a new id.

2026-07-28 removed SSE resumability (changelog item 9): "A broken response stream loses
the in-flight request; clients MUST re-issue it as a new request with a new request ID".
The client re-issues a request whose answer broke after it was sent (an SSE stream that
ends without the answer, a JSON body cut short, a connection dropped before the head),
at most ``ConnectionConfig.max_reissues`` times; never one refused with an error status,
cancelled by its caller, or timed out, and its timeout keeps counting across re-issues.

A hand-written HTTP/1.1 server (h11, loopback, port 0) plays each ``tools/call`` by a
script, one step per POST, and records what it got. The clock is the
``autojump_clock``: loopback I/O is done before the run loop would sleep, so virtual
time moves only for timers.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import attrs
import h11
import pytest
import trio
import trio.testing

from mcp_sansio import ConnectionConfig
from mcp_sansio._json import dumps
from mcp_trio import McpError, RequestTimeout, SessionConfig
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    call,
    client_connection_config,
    fake_server_url,
    read_request,
    respond,
    text_of,
)

_DISCOVER = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake", "version": "0"}},
}
_JSON = ("content-type", "application/json")
_SSE = ("content-type", "text/event-stream")
NO_GET = HttpTransportConfig(open_get_stream=False)
_LINGER_0 = struct.pack("ii", 1, 0)
LONG = 60
"""``fail_after`` for tests whose requests wait for their timeouts (virtual seconds)."""


def _answer(rid: Any, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}]}
    return dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def _event(message: dict[str, Any]) -> bytes:
    return b"data: " + dumps(message) + b"\n\n"


@attrs.define
class Script:
    """The fake server: ``steps[i]`` plays the ``i``-th ``tools/call`` (then ``answer``).

    * ``answer``: a JSON body with the result ``ok <i>``;
    * ``sse-answer``: an SSE stream with a progress report (if asked for), then the result;
    * ``sse-cut``: an SSE stream with a progress report (if asked for), then the
      connection closed mid-stream (a chunked body that never ends);
    * ``sse-end``: the same, but the stream ends properly, without the answer;
    * ``json-cut``: a JSON body whose ``content-length`` promises more than comes;
    * ``drop``: the connection closed with no answer at all (``reset``: reset);
    * ``late-cut``: as ``sse-cut``, after ``delay`` seconds;
    * ``hang``: an SSE head, then nothing until the client closes the connection;
    * ``wait-answer``: an SSE stream with a progress report (if asked for), then the
      result once ``go`` is set;
    * ``500`` / ``400``: that status, with a plain body;
    * ``ask``: an input-required result (``roots/list``);
    * ``forged-json`` / ``forged-sse``: an error whose ``data`` says ``streamBroken``.
    """

    steps: list[str]
    delay: float = 0.0
    calls: list[dict[str, Any]] = attrs.field(factory=list)
    arrived: trio.Event = attrs.field(factory=trio.Event)
    """Set (and replaced) as each ``tools/call`` arrives."""
    hung_up: list[int] = attrs.field(factory=list)
    """The calls (by index) whose connection the client closed while they hung."""
    hung_up_event: trio.Event = attrs.field(factory=trio.Event)
    go: trio.Event = attrs.field(factory=trio.Event)

    async def handle(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        while (found := await read_request(conn, stream)) is not None:
            _head, message = found
            if message["method"] == "server/discover":
                answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": _DISCOVER})
                await respond(conn, stream, answer, headers=(_JSON,))
                conn.start_next_cycle()
                continue
            index = len(self.calls)
            self.calls.append(message)
            self.arrived.set()
            self.arrived = trio.Event()
            step = self.steps[index] if index < len(self.steps) else "answer"
            if not await self._play(step, index, message, conn, stream):
                return
            conn.start_next_cycle()

    async def _play(
        self, step: str, index: int, message: dict[str, Any], conn: h11.Connection, stream: Any
    ) -> bool:
        """Play ``step``; whether the connection may serve another request."""
        rid = message["id"]
        if step == "answer":
            await respond(conn, stream, _answer(rid, f"ok {index}"), headers=(_JSON,))
            return True
        if step == "ask":
            ask = {"where": {"method": "roots/list", "params": {}}}
            result = {"resultType": "input_required", "inputRequests": ask, "requestState": "s"}
            answer = dumps({"jsonrpc": "2.0", "id": rid, "result": result})
            await respond(conn, stream, answer, headers=(_JSON,))
            return True
        if step.startswith("forged"):
            error = {"code": -32000, "message": "declined", "data": {"streamBroken": True}}
            forged = dumps({"jsonrpc": "2.0", "id": rid, "error": error})
            if step == "forged-json":
                await respond(conn, stream, forged, headers=(_JSON,))
                return True
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=[_SSE])))
            await stream.send_all(conn.send(h11.Data(data=b"data: " + forged + b"\n\n")))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            return True
        if step == "garbage":  # a malformed head, the connection left open
            await stream.send_all(b"HTTP/1.1 2x0 nonsense\r\n\r\n")
            while await stream.receive_some(65536):
                pass
            return False
        if step in ("500", "400"):
            await respond(conn, stream, b"no", status=int(step), headers=(_JSON,))
            return True
        if step in ("drop", "reset"):
            if step == "reset":  # (SO_LINGER 0: the close sends a reset)
                stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
            await stream.aclose()
            return False
        if step == "json-cut":
            body = _answer(rid, "cut")
            head = h11.Response(
                status_code=200, headers=[_JSON, ("content-length", str(len(body)))]
            )
            await stream.send_all(conn.send(head) + conn.send(h11.Data(data=body[:10])))
            await stream.aclose()
            return False
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=[_SSE])))
        token = message["params"].get("_meta", {}).get("progressToken")
        if token is not None:
            report = {"progressToken": token, "progress": 1}
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": report}
            await stream.send_all(conn.send(h11.Data(data=_event(note))))
        if step == "wait-answer":
            await self.go.wait()
        if step in ("sse-answer", "wait-answer"):
            final = {"jsonrpc": "2.0", "id": rid, "result": {"content": []}}
            await stream.send_all(conn.send(h11.Data(data=_event(final))))
            await stream.send_all(conn.send(h11.EndOfMessage()))
            return True
        if step == "sse-end":
            await stream.send_all(conn.send(h11.EndOfMessage()))
            return True
        if step == "late-cut":
            await trio.sleep(self.delay)
        if step == "hang":
            while await stream.receive_some(65536):
                pass
            self.hung_up.append(index)
            self.hung_up_event.set()
            return False
        assert step in ("sse-cut", "late-cut"), step
        await stream.aclose()
        return False


async def _serve(nursery: trio.Nursery, *steps: str, delay: float = 0.0) -> tuple[Script, str]:
    script = Script(list(steps), delay)
    return script, await fake_server_url(nursery, script.handle)


def _client(url: str, transport: HttpTransportConfig = NO_GET, **config: Any) -> Any:
    return open_http_client(
        url,
        connection_config=attrs.evolve(client_connection_config("modern"), **config),
        transport=transport,
        config=SessionConfig(),
    )


async def _ignore(event: Any) -> None:
    pass


def _same_request(first: dict[str, Any], second: dict[str, Any]) -> None:
    """The second is the first re-issued: a new id, the same method and params."""
    assert second["id"] != first["id"]
    assert second["method"] == first["method"] == "tools/call"
    assert second["params"] == first["params"]


@pytest.mark.parametrize("broken", ["sse-cut", "sse-end", "json-cut", "drop", "reset"])
async def test_a_broken_response_is_reissued_with_a_new_id(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, broken: str
) -> None:
    script, url = await _serve(nursery, broken)
    sent: list[Any] = []
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            result = await client.request("tools/call", call("echo", text="x"), on_sent=sent.append)
            assert len(client._waiters) == 0  # (the old id's waiter too is gone)
    assert text_of(result) == "ok 1"
    assert len(script.calls) == 2
    _same_request(*script.calls)
    assert sent == [c["id"] for c in script.calls]  # on_sent is told the new id


async def test_broken_more_often_than_max_reissues_fails_saying_so(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "sse-cut", "sse-cut")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=1) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("echo"))
            assert info.value.code == -32603
            assert "stream ended before the response arrived" in info.value.message
            assert info.value.message.endswith("(re-issued 1 time)")
            assert len(script.calls) == 2
            _same_request(*script.calls)
            # The session goes on; each request has its own count.
            assert text_of(await client.request("tools/call", call("echo"))) == "ok 3"
    ids = [c["id"] for c in script.calls]
    assert len(set(ids)) == len(ids)


async def test_max_reissues_counts_every_reissue(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "json-cut", "drop")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=3) as client:
            result = await client.request("tools/call", call("echo"))
            assert len(client._waiters) == 0
    assert text_of(result) == "ok 3"
    assert len({c["id"] for c in script.calls}) == 4


async def test_max_reissues_0_fails_as_before(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=0) as client:
            with pytest.raises(McpError) as info:
                await client.request("tools/call", call("echo"))
    assert info.value.message == "HTTP: the stream ended before the response arrived"
    assert info.value.data is None
    assert len(script.calls) == 1


@pytest.mark.parametrize("status", ["500", "400"])
async def test_an_error_status_is_not_reissued(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, status: str
) -> None:
    script, url = await _serve(nursery, status)
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            with pytest.raises(McpError, match=f"status {status}") as info:
                await client.request("tools/call", call("echo"))
    assert "re-issued" not in info.value.message
    assert len(script.calls) == 1


async def test_a_cancelled_call_is_not_reissued(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "hang")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            async with trio.open_nursery() as callers:
                callers.start_soon(client.request, "tools/call", call("echo"))
                await script.arrived.wait()
                callers.cancel_scope.cancel()
            await script.hung_up_event.wait()  # its stream closed: that is the cancellation
            await trio.testing.wait_all_tasks_blocked()
    assert script.hung_up == [0]
    assert len(script.calls) == 1


async def test_cancelled_during_a_reissue_sends_nothing_more(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "hang")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=5) as client:
            async with trio.open_nursery() as callers:
                callers.start_soon(client.request, "tools/call", call("echo"))
                while len(script.calls) < 2:
                    await script.arrived.wait()
                callers.cancel_scope.cancel()
            await script.hung_up_event.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert len(script.calls) == 2  # (not a third)
    assert script.hung_up == [1]


async def test_the_timeout_keeps_counting_across_reissues(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The first stream breaks after 6 s; the re-issued one hangs: the caller's 10 s
    # end 10 s after the call began, not 10 s after the re-issue.
    script, url = await _serve(nursery, "late-cut", "hang", delay=6.0)
    with trio.fail_after(LONG):
        async with _client(url) as client:
            began = trio.current_time()
            with pytest.raises(RequestTimeout):
                await client.request("tools/call", call("echo"), timeout=10)
            assert trio.current_time() - began == pytest.approx(10)
            await script.hung_up_event.wait()  # the re-issued request's stream closed
    assert len(script.calls) == 2


async def test_progress_reaches_the_callback_from_every_attempt(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "sse-answer")
    reports: list[float] = []

    async def on_progress(event: Any) -> None:
        reports.append(event.progress)

    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            result = await client.request(
                "tools/call", call("echo"), on_progress=on_progress, timeout=10
            )
    assert result == {"content": []}
    # A new request, with a progress token of its own, whose reports count afresh.
    first, second = (c["params"]["_meta"]["progressToken"] for c in script.calls)
    assert first != second
    assert reports == [1, 1]


async def test_progress_rearms_the_timeout_across_reissues(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Broken at 6 s, after a progress report at 0 s; the re-issued request reports
    # progress at once (6 s), then hangs: its timeout of 10 s counts from that report.
    script, url = await _serve(nursery, "late-cut", "hang", delay=6.0)

    async def on_progress(event: Any) -> None:
        pass

    with trio.fail_after(LONG):
        async with _client(url) as client:
            began = trio.current_time()
            with pytest.raises(RequestTimeout):
                await client.request(
                    "tools/call", call("echo"), timeout=10, on_progress=on_progress
                )
            assert trio.current_time() - began == pytest.approx(16)
    assert len(script.calls) == 2


def test_max_reissues_is_a_count() -> None:
    assert ConnectionConfig().max_reissues == 1
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="max_reissues"):
            ConnectionConfig(max_reissues=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("with_progress", [False, True])
async def test_the_retry_of_an_input_round_is_reissued_with_its_answers(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, with_progress: bool
) -> None:
    # The core re-issues the retry it holds (inputResponses, requestState): the user is
    # not asked again, and the server gets the retry a second time under a new id.
    script, url = await _serve(nursery, "ask", "sse-cut")
    asked: list[Any] = []

    async def roots(event: Any) -> dict[str, Any]:
        asked.append(event)
        return {"where": {"roots": []}}

    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            result = await client.request(
                "tools/call",
                call("echo"),
                on_input_required=roots,
                on_progress=_ignore if with_progress else None,
            )
    assert text_of(result) == "ok 2" and len(asked) == 1
    assert [c["params"].get("requestState") for c in script.calls] == [None, "s", "s"]
    retry, again = script.calls[1:]
    assert again["params"]["inputResponses"] == {"where": {"roots": []}}
    if with_progress:
        token = again["params"]["_meta"]["progressToken"]
        assert token == again["id"] != retry["params"]["_meta"]["progressToken"]
        del again["params"]["_meta"]["progressToken"], retry["params"]["_meta"]["progressToken"]
    assert again["id"] != retry["id"] and again["params"] == retry["params"]


async def test_the_time_an_input_round_waits_after_a_reissue_is_not_counted(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Broken, re-issued, then the server asks for input and the user takes 30 s: the
    # timeout of 10 s stops while the user answers (as the core's always does), and
    # the retry is answered.
    script, url = await _serve(nursery, "sse-cut", "ask")

    async def roots(event: Any) -> dict[str, Any]:
        await trio.sleep(30)
        return {"where": {"roots": []}}

    with trio.fail_after(LONG):
        async with _client(url) as client:
            result = await client.request(
                "tools/call", call("echo"), on_input_required=roots, timeout=10
            )
    assert text_of(result) == "ok 2"
    assert len(script.calls) == 3


async def test_a_reissued_request_that_asks_for_input_is_answered(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "ask")

    async def roots(event: Any) -> dict[str, Any]:
        return {"where": {"roots": []}}

    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            result = await client.request("tools/call", call("echo"), on_input_required=roots)
    assert text_of(result) == "ok 2"
    assert script.calls[2]["params"]["inputResponses"] == {"where": {"roots": []}}
    assert len({c["id"] for c in script.calls}) == 3


@pytest.mark.parametrize("forged", ["forged-json", "forged-sse"])
async def test_an_error_saying_stream_broken_is_an_answer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, forged: str
) -> None:
    # Only the transport says a stream broke: the server's words are an answer, and a
    # tool does not run twice because a server wrote ``streamBroken`` in an error.
    script, url = await _serve(nursery, forged)
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            with pytest.raises(McpError, match="declined") as info:
                await client.request("tools/call", call("echo"))
    assert info.value.data == {"streamBroken": True}
    assert len(script.calls) == 1


async def test_a_malformed_head_is_an_answer_not_a_break(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # The server answered, badly (HTTP/1.1 broken on a live connection): the request
    # fails and is not sent again, so the tool does not run twice.
    script, url = await _serve(nursery, "garbage")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            with pytest.raises(McpError, match=r"broke HTTP/1\.1"):
                await client.request("tools/call", call("echo"))
    assert len(script.calls) == 1


# ---------------------------------------------------------------------- callbacks and chains


async def test_progress_and_holds_follow_the_new_id(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Progress reported under the re-issued request's id reaches the caller's callback,
    # and so does the channel's word that it holds that request back (OAuth: the hook
    # attach_holds gives it; told here as the channel would tell it); the old id's is
    # nobody's any more.
    script, url = await _serve(nursery, "sse-cut", "wait-answer")
    reports: list[tuple[Any, float]] = []
    held: list[tuple[Any, bool]] = []

    async def on_progress(event: Any) -> None:
        reports.append((event.request_id, event.progress))

    def on_held(rid: Any, holding: bool) -> None:
        held.append((rid, holding))

    results: list[Any] = []

    async def caller(client: Any) -> None:
        results.append(
            await client.request(
                "tools/call", call("echo"), on_progress=on_progress, on_held=on_held
            )
        )

    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            async with trio.open_nursery() as callers:
                callers.start_soon(caller, client)
                while len(script.calls) < 2:
                    await script.arrived.wait()
                await trio.testing.wait_all_tasks_blocked()
                first, second = (c["id"] for c in script.calls)
                hold = client._channel._held  # (what the channel calls)
                hold((first, second), True)
                hold((first, second), False)
                script.go.set()
            assert client._on_held == {} and len(client._waiters) == 0
    assert results == [{"content": []}]
    assert reports == [(first, 1), (second, 1)]
    assert held == [(second, True), (second, False)]


@pytest.mark.parametrize("broken", ["drop", "reset", "sse-cut", "sse-end", "json-cut"])
async def test_a_listen_is_never_reissued(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, broken: str
) -> None:
    # On every path: the connection dropped before the head (the channel's own read,
    # HttpChannel._broke), and a stream that broke (ClientResponse.broken). Its
    # subscription is keyed by the first listen's id: listening again is its business.
    script, url = await _serve(nursery, broken)
    params = {"notifications": {"toolsListChanged": True}}
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url) as client:
            with pytest.raises(McpError) as info:
                await client.request("subscriptions/listen", params)
            assert text_of(await client.request("tools/call", call("echo"))) == "ok 1"
    assert "re-issued" not in info.value.message
    assert [c["method"] for c in script.calls] == ["subscriptions/listen", "tools/call"]


async def test_a_chain_of_reissues_gives_the_caller_one_answer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Broken three times (each way), answered the fourth: the caller walks the chain of
    # new ids (on_sent and on_progress told each), gets the one answer, and nothing of
    # the chain is left behind.
    script, url = await _serve(nursery, "sse-cut", "drop", "sse-end", "sse-answer")
    sent: list[Any] = []
    reports: list[Any] = []

    async def on_progress(event: Any) -> None:
        reports.append(event.request_id)

    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=3) as client:
            result = await client.request(
                "tools/call", call("echo"), on_sent=sent.append, on_progress=on_progress
            )
            assert len(client._waiters) == 0 and client._queued == {}
            assert client._conn.reissue_count(sent[-1]) == 0  # (answered: not in flight)
            assert text_of(await client.request("tools/call", call("echo"))) == "ok 4"
    assert result == {"content": []}
    ids = [c["id"] for c in script.calls]
    assert sent == ids[:4] and len(set(ids)) == 5
    assert reports == [ids[0], ids[2], ids[3]]  # (a drop reports nothing)
    for earlier, later in zip(script.calls[:3], script.calls[1:4], strict=True):
        _same_params(earlier, later)


def _same_params(first: dict[str, Any], second: dict[str, Any]) -> None:
    """The same params but the progress token (each re-issue's own: its id)."""
    one, two = (dict(c["params"], _meta=dict(c["params"]["_meta"])) for c in (first, second))
    assert [p["_meta"].pop("progressToken") for p in (one, two)] == [first["id"], second["id"]]
    assert one == two


async def test_cancelled_further_down_a_chain_cancels_the_newest(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    script, url = await _serve(nursery, "sse-cut", "json-cut", "hang")
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, max_reissues=5) as client:
            async with trio.open_nursery() as callers:
                callers.start_soon(client.request, "tools/call", call("echo"))
                while len(script.calls) < 3:
                    await script.arrived.wait()
                callers.cancel_scope.cancel()
            await script.hung_up_event.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert len(script.calls) == 3  # (not a fourth)
            assert len(client._waiters) == 0 and client._queued == {}
    assert script.hung_up == [2]


async def test_a_caller_cancelled_behind_a_chain_cancels_its_newest_link(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # Re-issued three times in a row before the caller's task ran again (the channel's
    # hook called here, with no checkpoint between), then the caller is cancelled: the
    # newest link is taken back unsent (Session._abandon_reissued walks the chain to
    # it), and nothing of the chain is left. (The links between were never written
    # here, as a real break's would have been: only the newest is checked on the wire.)
    # One connection, held by the first call's stream: no link can be written before
    # the caller's cancellation runs (with more, the writer may win that race in trio's
    # random order and the newest link goes out, then is cancelled on the wire).
    script, url = await _serve(nursery, "wait-answer")
    one = attrs.evolve(NO_GET, max_client_connections=1)
    with trio.fail_after(IO_TIMEOUT):
        async with _client(url, one, max_reissues=5) as client:
            async with trio.open_nursery() as callers:
                callers.start_soon(client.request, "tools/call", call("echo"))
                while not script.calls:
                    await script.arrived.wait()
                await trio.testing.wait_all_tasks_blocked()
                chain: list[Any] = [script.calls[0]["id"]]
                for _ in range(3):
                    waiter = client._waiters.get(chain[-1])
                    assert client._reissue(chain[-1]) is None
                    chain.append(waiter.outcome.request_id)
                callers.cancel_scope.cancel()
            assert chain[-1] not in client._conn._pending  # (taken back, not in flight)
            assert len(client._waiters) == 0 and client._queued == {}
            script.go.set()  # (the first stream ends: its answer is late, dropped)
            text_of(await client.request("tools/call", call("echo")))  # (its connection)
            await trio.testing.wait_all_tasks_blocked()
    assert chain[-1] not in [c["id"] for c in script.calls]  # never sent

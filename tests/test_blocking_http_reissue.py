"""``BlockingClient.http`` re-issues a modern request whose response stream broke, as the
Trio client does (``tests/trio/test_http_reissue.py``).

2026-07-28 removed SSE resumability (changelog item 9): "A broken response stream loses
the in-flight request; clients MUST re-issue it as a new request with a new request ID".
A hand-written server on 127.0.0.1 (``RawServer``: a thread per connection) plays each
``tools/call`` by a script, one step per POST, and records what it got.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trio

import mcp_trio._blocking_http as blocking_http
from mcp_sansio import Connection, ConnectionConfig
from mcp_sansio._json import dumps, loads
from mcp_trio import HandshakeFailed, McpError
from mcp_trio._blocking import BlockingClient, CallClock
from mcp_trio._blocking_http import Broken, HttpLink, HttpTransport
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_blocking_http import (
    TIMEOUT,
    RawServer,
    connect,
    legacy_server,
    modern_answer,
    respond,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets and selectors")

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)
_LINGER_0 = struct.pack("ii", 1, 0)
_JSON = {"Content-Type": "application/json"}


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(message: dict[str, Any]) -> bytes:
    return _chunk(b"data: " + dumps(message) + b"\n\n")


def _answer(rid: Any, text: str) -> bytes:
    result = {"content": [{"type": "text", "text": text}]}
    return dumps({"jsonrpc": "2.0", "id": rid, "result": result})


class Script:
    """The server: ``steps[i]`` plays the ``i``-th request but ``server/discover`` (then
    ``answer``); ``discover`` plays ``server/discover``.

    * ``answer``: a JSON body with the result ``ok <i>``;
    * ``sse-cut``: an SSE stream with a progress report (if asked for), then the
      connection closed mid-stream (a chunked body that never ends);
    * ``sse-end``: the same, the stream ended properly, without the answer;
    * ``json-cut``: a JSON body whose ``content-length`` promises more than comes;
    * ``drop``: the connection closed with no answer at all (``reset``: reset);
    * ``garbage``: a malformed head, the connection left open until the client closes it;
    * ``ack-cut`` (a listen): its acknowledgment, then the connection closed.
    """

    def __init__(self, *steps: str, discover: str = "answer") -> None:
        self.steps = list(steps)
        self.discover = discover
        self.calls: list[dict[str, Any]] = []
        self.discovers = 0
        self._lock = threading.Lock()

    def __call__(self, sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body)
        assert isinstance(message, dict)
        if message.get("method") == "server/discover":
            with self._lock:
                self.discovers += 1
            if self.discover == "answer":
                respond(sock, "200 OK", _JSON, modern_answer(body))
            else:
                self._play(self.discover, 0, message, sock)
            return
        with self._lock:
            index = len(self.calls)
            self.calls.append(message)
        step = self.steps[index] if index < len(self.steps) else "answer"
        self._play(step, index, message, sock)

    def _play(self, step: str, index: int, message: dict[str, Any], sock: socket.socket) -> None:
        rid = message["id"]
        if step == "answer":
            respond(sock, "200 OK", _JSON, _answer(rid, f"ok {index}"))
        elif step in ("drop", "reset"):
            if step == "reset":  # (SO_LINGER 0: the close sends a reset)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_0)
        elif step == "json-cut":
            body = _answer(rid, "cut")
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:10])
            )
        elif step == "garbage":
            sock.sendall(b"HTTP/1.1 2x0 nonsense\r\n\r\n")
            while sock.recv(65536):
                pass
        elif step == "ack-cut":
            params = {"notifications": {"toolsListChanged": True}}
            ack = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {**params, "_meta": {"io.modelcontextprotocol/subscriptionId": rid}},
            }
            sock.sendall(_SSE_HEAD + _event(ack))
        else:
            assert step in ("sse-cut", "sse-end"), step
            out = _SSE_HEAD
            token = (message.get("params") or {}).get("_meta", {}).get("progressToken")
            if token is not None:
                report = {"progressToken": token, "progress": 1}
                note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": report}
                out += _event(note)
            if step == "sse-end":
                out += b"0\r\n\r\n"
            sock.sendall(out)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[Script, str]]]:
    servers: list[RawServer] = []

    def start(*steps: str, discover: str = "answer") -> tuple[Script, str]:
        script = Script(*steps, discover=discover)
        servers.append(RawServer(script))
        return script, servers[-1].url

    yield start
    for started in servers:
        started.close()


def _modern(url: str, **config: Any) -> BlockingClient:
    return connect(
        url,
        era="modern",
        timeout=5.0,
        connection_config=ConnectionConfig(**config),
        transport=HttpTransportConfig(open_get_stream=False),
    )


def _same_request(first: dict[str, Any], second: dict[str, Any]) -> None:
    """The second is the first re-issued: a new id, the same method and params (but the
    progress token: the new id, as the core makes it)."""
    assert second["id"] != first["id"]
    assert second["method"] == first["method"] == "tools/call"
    params = [dict(c["params"], _meta=dict(c["params"]["_meta"])) for c in (first, second)]
    assert [p["_meta"].pop("progressToken") for p in params] == [first["id"], second["id"]]
    assert params[0] == params[1]


@pytest.mark.parametrize("broken", ["sse-cut", "sse-end", "json-cut", "drop", "reset"])
def test_a_broken_response_is_reissued_with_a_new_id(
    serve: Callable[..., tuple[Script, str]], broken: str
) -> None:
    script, url = serve(broken)
    with _modern(url) as client:
        assert client.call_tool("echo", {"text": "x"}).text == "ok 1"
        assert not client._moved and not client._awaited and not client._progress
        assert client.call_tool("echo").text == "ok 2"  # (the session goes on)
    assert len(script.calls) == 3
    _same_request(*script.calls[:2])


def test_progress_follows_the_new_id(serve: Callable[..., tuple[Script, str]]) -> None:
    script, url = serve("sse-cut", "sse-cut")
    reports: list[tuple[Any, float]] = []
    with _modern(url, max_reissues=2) as client:
        result = client.call_tool(
            "echo", on_progress=lambda e: reports.append((e.request_id, e.progress))
        )
    assert result.text == "ok 2"
    ids = [c["id"] for c in script.calls]
    tokens = [c["params"]["_meta"]["progressToken"] for c in script.calls]
    assert len(set(ids)) == 3 and tokens == ids  # a new token with each new id
    assert reports == [(ids[0], 1), (ids[1], 1)]  # each reaches the caller's callback


def test_broken_more_often_than_max_reissues_fails_as_the_trio_client_does(
    serve: Callable[..., tuple[Script, str]],
) -> None:
    script, url = serve("sse-cut", "sse-cut", "answer", "sse-cut", "sse-cut")
    with _modern(url, max_reissues=1) as client:
        with pytest.raises(McpError) as blocking:
            client.call_tool("echo")
        assert len(script.calls) == 2
        _same_request(*script.calls)
        assert client.call_tool("echo").text == "ok 2"  # each request has its own count

    async def trio_client() -> McpError:
        config = ConnectionConfig(era="modern", max_reissues=1)
        transport = HttpTransportConfig(open_get_stream=False)
        with trio.fail_after(TIMEOUT):
            async with open_http_client(url, connection_config=config, transport=transport) as s:
                with pytest.raises(McpError) as info:
                    await s.request("tools/call", {"name": "echo", "arguments": {}})
        return info.value

    expected = trio.run(trio_client)
    assert len(script.calls) == 5
    assert blocking.value.code == expected.code == -32603
    assert blocking.value.message == expected.message
    broke = "HTTP: the stream ended before the response arrived"
    assert expected.message == f"{broke} (re-issued 1 time)"
    assert blocking.value.data == expected.data


def test_max_reissues_0_fails_at_once(serve: Callable[..., tuple[Script, str]]) -> None:
    script, url = serve("drop")
    with _modern(url, max_reissues=0) as client, pytest.raises(McpError) as info:
        client.call_tool("echo")
    assert info.value.message.startswith("HTTP: the server closed the connection")
    assert "re-issued" not in info.value.message
    assert len(script.calls) == 1


def test_a_malformed_head_is_an_answer_not_a_break(
    serve: Callable[..., tuple[Script, str]],
) -> None:
    script, url = serve("garbage")
    with _modern(url) as client, pytest.raises(McpError, match=r"broke HTTP/1\.1"):
        client.call_tool("echo")
    assert len(script.calls) == 1


def test_a_call_given_up_on_is_not_reissued(serve: Callable[..., tuple[Script, str]]) -> None:
    # The callback raises on the report that comes before the break: the call ends with
    # its exception (its request cancelled), and the break that follows sends nothing.
    script, url = serve("sse-cut")

    def on_progress(event: Any) -> None:
        raise LookupError("given up")

    with _modern(url) as client:
        with pytest.raises(LookupError):
            client.call_tool("echo", on_progress=on_progress)
        assert client.call_tool("other").text == "ok 1"
        assert not client._moved and not client._awaited
    assert [c["params"]["name"] for c in script.calls] == ["echo", "other"]


def _read_to_the_break(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wait that reads something reads on until a stream's break is read too: the
    progress report and the break land in the inbox together (as one TLS record, or
    one read of a fast server, can bring them), so one ``take`` meets both."""
    real = blocking_http._wait

    def wait(
        http: HttpTransport, timeout: float, clock: CallClock, *, reading: bool, **wake: Any
    ) -> None:
        real(http, timeout, clock, reading=reading, **wake)
        for _ in range(100):  # (bounded: a server that never breaks fails the test)
            if not reading or not http.inbox or any(isinstance(i, Broken) for i in http.inbox):
                return
            real(http, TIMEOUT, clock, reading=True)

    monkeypatch.setattr(blocking_http, "_wait", wait)


def test_ctrl_c_with_the_break_in_the_same_read_is_not_reissued(
    serve: Callable[..., tuple[Script, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C in the progress callback; the break behind it in the inbox is taken with no
    # callback (HttpLink._take_uncalled) as the call is given up: the request fails
    # there, the core is not asked to re-issue it (no new id made, then cancelled).
    script, url = serve("sse-cut")
    reissued: list[Any] = []
    real = Connection.reissue_request

    def reissue(conn: Connection, rid: Any, *, now: float) -> Any:
        reissued.append(rid)
        return real(conn, rid, now=now)

    def on_progress(event: Any) -> None:
        raise KeyboardInterrupt

    with _modern(url) as client:
        monkeypatch.setattr(Connection, "reissue_request", reissue)
        _read_to_the_break(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("echo", on_progress=on_progress)
        assert reissued == []
        assert not client._conn._pending and not client._moved and not client._progress
        monkeypatch.undo()
        assert client.call_tool("other").text == "ok 1"
    assert [c["params"]["name"] for c in script.calls] == ["echo", "other"]


def test_ctrl_c_just_after_a_reissue_cancels_the_new_request(
    serve: Callable[..., tuple[Script, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C lands once the core made the new request, before the call waits for it:
    # the call gives up the newest of its requests (BlockingClient._newest), which is
    # never sent; the tool runs once.
    script, url = serve("sse-cut")
    real = HttpLink.queue
    interrupted: list[bool] = []

    with _modern(url) as client:

        def queue(link: HttpLink, *, own: bool = False) -> None:
            if client._moved and not interrupted:  # (re-issued, not yet handed over)
                interrupted.append(True)
                raise KeyboardInterrupt
            real(link, own=own)

        monkeypatch.setattr(HttpLink, "queue", queue)
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("echo")
        assert not client._conn._pending and not client._moved and not client._progress
        monkeypatch.undo()
        assert client.call_tool("other").text == "ok 1"
    assert [c["params"]["name"] for c in script.calls] == ["echo", "other"]


class _HalfClosing(RawServer):
    """Answers ``server/discover``; of a ``tools/call`` it reads the head only, then
    half-closes (its end of input for the client, which is still writing the body) and
    reads nothing more until ``done``."""

    def __init__(self) -> None:
        self.posts = 0
        self.done = threading.Event()
        super().__init__(lambda sock, head, body: None)

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(TIMEOUT)
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            if b"\r\nmcp-method: tools/call\r\n" in head.lower() + b"\r\n":
                self.posts += 1
                sock.shutdown(socket.SHUT_WR)
                self.done.wait(TIMEOUT)
                return
            length = next(
                int(line.partition(b":")[2])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            )
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                body += chunk
            respond(sock, "200 OK", _JSON, modern_answer(body))
        except OSError:
            pass
        finally:
            sock.close()


def test_a_request_not_written_whole_is_not_reissued() -> None:
    # The server half-closes while the client is still writing the body: the connection
    # is lost, but the request was not written whole (the server may not have it): the
    # call fails; one POST.
    server = _HalfClosing()
    try:
        with _modern(server.url) as client:
            with pytest.raises(McpError, match="closed the connection") as info:
                client.call_tool("echo", {"text": "x" * 8_000_000})
            server.done.set()
            assert "re-issued" not in info.value.message
            assert not client._conn._pending and not client._moved
    finally:
        server.done.set()
        server.close()
    assert server.posts == 1


def test_the_handshake_is_not_reissued(serve: Callable[..., tuple[Script, str]]) -> None:
    # No call waits for server/discover (the Trio session's rule: nobody waits, so it
    # fails; the handshake decides what that means).
    script, url = serve(discover="sse-cut")
    with pytest.raises(HandshakeFailed, match="stream ended before the response arrived"):
        _modern(url).close()
    assert script.discovers == 1


def test_a_listen_is_not_reissued(serve: Callable[..., tuple[Script, str]]) -> None:
    # Its subscription ends (keyed by the first listen's id): listening again is the
    # caller's business.
    script, url = serve("ack-cut")
    with _modern(url) as client:
        broke = pytest.raises(McpError, match="stream ended before the response arrived")
        with client.subscribe(tools=True) as updates, broke:
            updates.receive(timeout=5)
        assert client.call_tool("echo").text == "ok 1"
    assert [c["method"] for c in script.calls] == ["subscriptions/listen", "tools/call"]


def test_a_listen_dropped_before_its_head_is_not_reissued(
    serve: Callable[..., tuple[Script, str]],
) -> None:
    script, url = serve("drop")
    with _modern(url) as client:
        with pytest.raises(McpError, match="closed the connection"), client.subscribe(tools=True):
            pass
        assert client.call_tool("echo").text == "ok 1"
    assert [c["method"] for c in script.calls] == ["subscriptions/listen", "tools/call"]


@pytest.mark.parametrize("broken", ["sse-end", "json-cut", "drop"])
def test_a_legacy_session_is_unaffected(broken: str) -> None:
    # A legacy stream without an event id cannot be resumed, and nothing is re-issued:
    # the call fails at once, as it always did.
    calls: list[Any] = []

    def on_request(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        calls.append(message["id"])
        if broken == "sse-end":
            sock.sendall(_SSE_HEAD + b"0\r\n\r\n")
        elif broken == "json-cut":
            body = _answer(message["id"], "cut")
            sock.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:10])
            )

    server = RawServer(legacy_server(on_request))
    try:
        with (
            connect(server.url, era="legacy", timeout=5.0) as client,
            pytest.raises(McpError) as info,
        ):
            client.call_tool("echo")
    finally:
        server.close()
    assert "re-issued" not in info.value.message
    assert len(calls) == 1
    assert info.value.code == -32603

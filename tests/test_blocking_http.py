"""``BlockingClient.http``: the blocking client over Streamable HTTP, both eras.

Against our real Trio server (``python -m tests.blocking_server_app http`` in a
subprocess) and against hostile servers written here on plain sockets (each connection
served by a thread of the test's: the client itself has none). Every wait is bounded.
"""

from __future__ import annotations

import itertools
import logging
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trustme

import mcp_sansio._http_client
from mcp_sansio import Connection, ConnectionConfig, Era, RequestReceived
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import MIN_REOPEN_DELAY, HttpClientConfig
from mcp_trio import (
    HandshakeFailed,
    HttpTransportConfig,
    McpError,
    SessionClosed,
    TransportFailed,
    _blocking,
)
from mcp_trio._blocking import BlockingClient
from mcp_trio._blocking_http import HttpLink, HttpTransport, Resend

from .test_api import modules_loaded
from .test_blocking_client import ipv6_off

ROOT = Path(__file__).resolve().parents[1]
APP = [sys.executable, "-m", "tests.blocking_server_app", "http"]
TIMEOUT = 20.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets and selectors")


class ServerProcess:
    """Our Trio server over HTTP in a subprocess (``port`` ``0``: any)."""

    def __init__(self, port: int = 0, token: str = "-", *tls: str) -> None:
        self.process = subprocess.Popen(
            [*APP, str(port), token, *tls], stdout=subprocess.PIPE, cwd=ROOT
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(TIMEOUT)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    started = ServerProcess()
    yield started
    started.stop()


def answer_elicitation(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "ada"}}


def answer_sampling(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}


def connect(url: str, **options: Any) -> BlockingClient:
    options.setdefault("timeout", TIMEOUT)
    options.setdefault("handshake_timeout", TIMEOUT)
    return BlockingClient.http(url, **options)


@pytest.fixture(scope="module", params=["modern", "legacy"])
def client(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[BlockingClient]:
    with connect(
        server.url(),
        era="auto" if request.param == "modern" else "legacy",
        on_elicitation=answer_elicitation,
        on_sampling=answer_sampling,
        roots=["file:///work"],
    ) as opened:
        yield opened


# ---------------------------------------------------------------------- our server


def test_handshake(client: BlockingClient) -> None:
    expected = "2026-07-28" if client.era is Era.MODERN else "2025-11-25"
    assert client.protocol_version == expected
    assert client.server_info is not None
    assert client.server_info.name == "client-test-server"
    assert client.instructions == "Call add to add numbers."


def test_tools(client: BlockingClient) -> None:
    names = [tool.name for tool in client.list_tools()]  # three pages
    assert names[:3] == ["echo", "add", "fail"] and len(names) == 9
    assert client.call_tool("echo", {"text": "over http"}).text == "over http"
    assert client.call_tool("add", {"a": 2, "b": 3}).structured_content == {"sum": 5}
    with pytest.raises(McpError):
        client.call_tool("nope")


def test_progress(client: BlockingClient) -> None:
    seen: list[float] = []
    result = client.call_tool(
        "slow", {"steps": 3, "delay": 0.01}, on_progress=lambda e: seen.append(e.progress)
    )
    assert result.text == "done" and seen == [1, 2, 3]


def test_the_server_asks_during_a_call(client: BlockingClient) -> None:
    """Legacy: elicitation, sampling and roots come as requests on the call's SSE stream
    and are answered with POSTs while that stream stays open; modern: input_required."""
    result = client.call_tool("ask", {"what": ["elicit", "sample", "roots"]})
    assert result.text == "elicit=accept:ada;sample=sampled;roots=file:///work"


def test_a_call_that_times_out_is_cancelled(client: BlockingClient) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        client.call_tool("sleep", {"seconds": 30}, timeout=0.3)
    assert time.monotonic() - started < 5
    assert client.call_tool("echo", {"text": "after"}).text == "after"


class CountingProxy:
    """A TCP relay on 127.0.0.1 to ``port`` that counts the connections it accepts
    (a thread per direction of each: the client itself has none)."""

    def __init__(self, port: int) -> None:
        self._upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            far = socket.create_connection(("127.0.0.1", self._upstream), timeout=TIMEOUT)
            self._sockets += [near, far]
            for sock in (near, far):  # (relayed pieces go at once, as the ends wrote them)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for source, sink in ((near, far), (far, near)):
                thread = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                self._threads.append(thread)
                thread.start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(TIMEOUT)
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # (wakes accept(); close() does not)
        self.listener.close()
        for sock in self._sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(TIMEOUT)


@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_many_calls_reuse_connections(server: ServerProcess, era: str) -> None:
    """Calls one after another reuse a kept-alive connection: the server accepts a
    handful of connections for 30 calls, not one each."""
    proxy = CountingProxy(server.port)
    quiet = HttpTransportConfig(open_get_stream=False)
    try:
        with connect(proxy.url(), era=era, transport=quiet) as client:
            client.call_tool("echo", {"text": "warm"})
            before = proxy.accepted
            for i in range(30):
                assert client.call_tool("echo", {"text": str(i)}).text == str(i)
            assert proxy.accepted - before <= 1, proxy.accepted - before
    finally:
        proxy.close()


def test_legacy_get_stream(server: ServerProcess) -> None:
    """What a legacy server says on its own comes on the session's GET stream, read
    while calls wait."""
    heard: list[str] = []
    with connect(server.url(), era="legacy", on_notification=lambda n: heard.append(n.method)):
        pass  # (opened and closed: the DELETE)
    with connect(
        server.url(), era="legacy", on_notification=lambda n: heard.append(n.method)
    ) as client:
        client.call_tool("broadcast")
        for _ in range(100):  # (bounded: the stream is read while each ping waits)
            if heard:
                break
            client.ping()
        assert heard == ["notifications/resources/list_changed"]
    quiet = HttpTransportConfig(open_get_stream=False)
    heard.clear()
    with connect(
        server.url(),
        era="legacy",
        transport=quiet,
        on_notification=lambda n: heard.append(n.method),
    ) as client:
        client.call_tool("broadcast")
        for _ in range(20):
            client.ping()
        assert heard == []


def test_legacy_session_expiry_starts_a_new_session() -> None:
    """The server restarts (it forgets every session): the next request gets 404, the
    client initializes a new session and sends the request again."""
    first = ServerProcess()
    port = first.port
    with connect(first.url(), era="legacy") as client:
        assert client.call_tool("echo", {"text": "one"}).text == "one"
        link = client._link
        assert isinstance(link, HttpLink)
        old = link.http.http.session_id
        first.stop()
        second = ServerProcess(port)
        try:
            assert client.call_tool("echo", {"text": "two"}).text == "two"
            new = link.http.http.session_id
            assert new is not None and new != old
            assert client.protocol_version == "2025-11-25"
        finally:
            second.stop()


@pytest.mark.parametrize("era", ["auto", "legacy", "modern"])
def test_unreachable_server(era: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed: nobody listens
    with pytest.raises(SessionClosed, match="cannot be reached"):
        connect(f"http://127.0.0.1:{port}/mcp", era=era)


class Resolver:
    """``socket.getaddrinfo`` with the name ``mcp.test`` resolving to ``addresses`` (none:
    it does not resolve); every call recorded, as ``(host, flags)``. No DNS query."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *addresses: tuple[str, int]) -> None:
        self.addresses = addresses
        self.calls: list[tuple[str, int]] = []
        self._real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)

    def getaddrinfo(
        self,
        host: str,
        port: object,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[Any]:
        self.calls.append((host, flags))
        if host != "mcp.test":
            return self._real(host, port, family, type, proto, flags)  # type: ignore[arg-type]
        if flags & socket.AI_NUMERICHOST or not self.addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", a) for a in self.addresses]

    def names(self) -> list[str]:
        """The hosts looked up as names (not as address literals)."""
        return [host for host, flags in self.calls if not flags & socket.AI_NUMERICHOST]


@pytest.fixture
def blackhole() -> Iterator[tuple[str, int]]:
    """An address on 127.0.0.1 that never answers a connection attempt: a listener whose
    accept queue (backlog 0) is full, so the kernel drops the SYNs."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    address = listener.getsockname()
    filler = socket.create_connection(address, timeout=TIMEOUT)
    try:
        yield address
    finally:
        filler.close()
        listener.close()


def test_a_name_that_does_not_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    Resolver(monkeypatch)
    with pytest.raises(SessionClosed, match="could not resolve"):
        connect("http://mcp.test/mcp", handshake_timeout=None)


def test_an_address_literal_is_not_looked_up(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolver = Resolver(monkeypatch)
    with connect(server.url(), era="legacy") as client:
        assert client.call_tool("echo", {"text": "literal"}).text == "literal"
    assert resolver.calls and resolver.names() == []


def test_an_address_that_never_answers_leaves_time_for_the_next(
    raw: Callable[..., RawServer],
    blackhole: tuple[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name with two addresses, the first never answering: each attempt has its share
    of ``connect_timeout`` (2 s of 4), so the second is reached; the name is resolved
    once, and later connections (one per request here) go to the address that answered.
    Connecting does not count against ``write_timeout``."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(legacy_server(serve))
    resolver = Resolver(monkeypatch, blackhole, ("127.0.0.1", server.port))
    transport = HttpTransportConfig(open_get_stream=False, connect_timeout=4.0)
    started = time.monotonic()
    with connect(
        f"http://mcp.test:{server.port}/mcp",
        era="legacy",
        transport=transport,
        write_timeout=1.0,
    ) as client:
        assert client.list_tools() == []
        assert client.list_tools() == []
    assert time.monotonic() - started < 3.5  # one wait of 2 s, not one per connection
    assert server.connections >= 4  # (initialize, initialized, two tools/list)
    assert resolver.names() == ["mcp.test"]


def test_a_server_that_moved_is_followed(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name resolves elsewhere now and the old address refuses: the name is
    resolved again and the request reaches the server where it is (one connection per
    request here: the servers close each)."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    first, second = raw(legacy_server(serve)), raw(legacy_server(serve))
    resolver = Resolver(monkeypatch, ("127.0.0.1", first.port))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect("http://mcp.test/mcp", era="legacy", transport=transport) as client:
        assert client.list_tools() == []
        first.close()  # (nobody listens there any more)
        resolver.addresses = (("127.0.0.1", second.port),)
        assert client.list_tools() == []
        assert second.connections >= 1
    assert resolver.names() == ["mcp.test", "mcp.test"]


def test_a_moved_server_whose_old_address_never_answers_is_followed(
    raw: Callable[..., RawServer],
    blackhole: tuple[str, int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server moved and its old address now drops connection attempts (no refusal):
    the known address has half of ``connect_timeout``, then the name is resolved again
    and the new address has the rest."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    first, second = raw(legacy_server(serve)), raw(legacy_server(serve))
    resolver = Resolver(monkeypatch, ("127.0.0.1", first.port))
    transport = HttpTransportConfig(open_get_stream=False, connect_timeout=1.0)
    with connect("http://mcp.test/mcp", era="legacy", transport=transport) as client:
        assert client.list_tools() == []
        link = client._link
        assert isinstance(link, HttpLink)
        link.http._addresses = [(socket.AF_INET, blackhole)]  # (where it was: silent now)
        resolver.addresses = (("127.0.0.1", second.port),)
        started = time.monotonic()
        assert client.list_tools() == []
        assert 0.4 < time.monotonic() - started < 0.9  # (half of connect_timeout)
        assert second.connections >= 1
    assert resolver.names() == ["mcp.test", "mcp.test"]


def test_a_request_h11_cannot_frame_makes_no_connection(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL path with a space: the request fails before a name is looked up or a
    connection made for it."""
    server = raw(legacy_server(lambda sock, head, message: None))
    resolver = Resolver(monkeypatch, ("127.0.0.1", server.port))
    with pytest.raises(HandshakeFailed, match="cannot send POST"):
        connect(f"http://127.0.0.1:{server.port}/a b", era="legacy", handshake_timeout=2)
    assert server.connections == 0
    assert resolver.calls == []  # (not even the address literal's)


def test_a_server_gone_for_good_after_resolving_again(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving again gives the same address, which still refuses: unreachable (once
    more, not in a loop)."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(legacy_server(serve))
    resolver = Resolver(monkeypatch, ("127.0.0.1", server.port))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect("http://mcp.test/mcp", era="legacy", transport=transport) as client:
        assert client.list_tools() == []
        server.close()
        with pytest.raises(SessionClosed, match="cannot be reached"):
            client.list_tools()
    assert resolver.names() == ["mcp.test", "mcp.test"]


def test_an_address_family_the_system_lacks_is_skipped(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """IPv6 off (its sockets cannot be made: ``EAFNOSUPPORT``): the IPv4 address after
    the IPv6 one is tried, as one that refuses -- no raw ``OSError`` out of the call."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(legacy_server(serve))
    infos = ipv6_off(monkeypatch, server.port)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(f"http://mcp.test:{server.port}/mcp", era="legacy", transport=transport) as client:
        assert client.list_tools() == []
    del infos[1:]  # (IPv6 only: no address can be tried)
    with pytest.raises(SessionClosed, match=r"cannot be reached.*EAFNOSUPPORT"):
        connect(f"http://mcp.test:{server.port}/mcp", era="legacy", transport=transport)


def test_ctrl_c_in_a_callback_leaves_no_request_for_another(
    raw: Callable[..., RawServer],
) -> None:
    """Two ``roots/list`` requests in one read; Ctrl-C in the callback for the first:
    both are answered with an error, and the callback is not called again (the second
    is not left for the cancellation's loop to hand to it)."""
    answers: list[dict[str, Any]] = []
    both = threading.Event()
    stop = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        if "method" not in message:  # an answer to the server's request
            answers.append(message)
            if len(answers) == 2:
                both.set()
            respond(sock, "202 Accepted", {}, b"")
            return
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        asks = (dumps({"jsonrpc": "2.0", "id": f"srv-{n}", "method": "roots/list"}) for n in (1, 2))
        sock.sendall(b"".join(b"data: " + ask + b"\n\n" for ask in asks))  # one write
        stop.wait(TIMEOUT)

    server = raw(legacy_server(serve))
    calls = 0

    def roots() -> list[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise KeyboardInterrupt
        return ["file:///r"]

    transport = HttpTransportConfig(open_get_stream=False)
    try:
        with connect(server.url, era="legacy", roots=roots, transport=transport) as client:
            with pytest.raises(KeyboardInterrupt):
                client.call_tool("x")
            assert calls == 1
        assert both.wait(TIMEOUT)
    finally:
        stop.set()
    assert calls == 1
    assert sorted(a["id"] for a in answers) == ["srv-1", "srv-2"]
    assert all(a["error"]["message"] == _blocking._INTERRUPTED for a in answers)


def test_a_server_gone_mid_session() -> None:
    first = ServerProcess()
    with connect(first.url(), era="legacy") as client:
        assert client.call_tool("echo", {"text": "one"}).text == "one"
        first.stop()
        with pytest.raises(SessionClosed, match="cannot be reached"):
            client.call_tool("echo", {"text": "two"})


def test_a_modern_client_outlives_a_server_that_restarts() -> None:
    # A modern request stands alone (no session to lose): one that finds no server fails
    # alone, and the next one, once the server is back on its port, is answered.
    first = ServerProcess()
    with connect(first.url(), era="modern") as client:
        assert client.call_tool("echo", {"text": "one"}).text == "one"
        first.stop()
        with pytest.raises(McpError) as failed:
            client.call_tool("echo", {"text": "two"})
        assert failed.value.error.code == -32603
        assert "could not connect" in failed.value.error.message
        again = ServerProcess(first.port)
        try:
            assert client.call_tool("echo", {"text": "three"}).text == "three"
        finally:
            again.stop()


@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_bearer_token(era: str) -> None:
    guarded = ServerProcess(0, "s3cret")
    try:
        with pytest.raises(HandshakeFailed, match="WWW-Authenticate: Bearer"):
            connect(guarded.url(), era=era)
        with pytest.raises(HandshakeFailed, match="invalid_token"):
            connect(guarded.url(), era=era, bearer="wrong")
        with connect(guarded.url(), era=era, bearer="s3cret") as client:
            assert client.call_tool("echo", {"text": "in"}).text == "in"
    finally:
        guarded.stop()


def test_bearer_and_authorization_header_clash() -> None:
    with pytest.raises(ValueError, match="not both"):
        BlockingClient.http("http://127.0.0.1:1/mcp", bearer="a", headers={"authorization": "b"})
    with pytest.raises(ValueError, match="itself"):
        BlockingClient.http("http://127.0.0.1:1/mcp", headers={"Mcp-Session-Id": "x"})
    with pytest.raises(ValueError, match="not an absolute"):
        BlockingClient.http("ftp://127.0.0.1/mcp")


def test_https(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    secure = ServerProcess(0, "-", str(tmp_path / "cert.pem"), str(tmp_path / "key.pem"))
    try:
        # Certificates are verified by default: this CA is not in the system's store.
        with pytest.raises(SessionClosed, match="CERTIFICATE_VERIFY_FAILED"):
            connect(secure.url("https"))
        context = ssl.create_default_context()
        ca.configure_trust(context)
        for era in ("auto", "legacy"):
            with connect(secure.url("https"), ssl_context=context, era=era) as client:
                assert client.call_tool("echo", {"text": "tls"}).text == "tls"
                assert client.call_tool("slow", {"steps": 2, "delay": 0.01}).text == "done"
    finally:
        secure.stop()


# ---------------------------------------------------------------------- hostile servers


Handler = Callable[[socket.socket, bytes, bytes], None]
"""Serves one request: the connection, its head and its body."""


class RawServer:
    """HTTP/1.1 by hand on 127.0.0.1; ``handler`` serves each request (one thread per
    connection, closed after one request unless the handler keeps it)."""

    def __init__(
        self,
        handler: Handler,
        *,
        stall_above: int | None = None,
        release: threading.Event | None = None,
    ) -> None:
        self.handler = handler
        self._stall_above = stall_above  # a larger body is not read until release
        self._release = release
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.most_at_once = 0
        self._open = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._open += 1
                self.most_at_once = max(self.most_at_once, self._open)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            thread.start()  # (before close() can see it: joining one not started raises)
            self._threads.append(thread)

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
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if self._stall_above is not None and length > self._stall_above:
                assert self._release is not None
                self._release.wait(TIMEOUT)
                return
            while len(body) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                body += chunk
            self.handler(sock, head, body)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= 1
            sock.close()

    def close(self) -> None:
        with suppress(OSError):  # (wakes the accepting thread: the port refuses from now)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for thread in self._threads:
            thread.join(TIMEOUT)


@pytest.fixture
def raw() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler, **options: Any) -> RawServer:
        servers.append(RawServer(handler, **options))
        return servers[-1]

    yield start
    for started in servers:
        started.close()


def modern_answer(body: bytes) -> bytes:
    """What a modern server's core answers to ``server/discover`` (or ``tools/list``)."""
    conn = Connection(
        "server",
        ConnectionConfig(
            era="modern",
            capabilities={"tools": {}},
            implementation={"name": "raw", "version": "1"},
        ),
    )
    for event in conn.receive_message(body, now=0.0):
        if isinstance(event, RequestReceived):
            conn.send_result(event.request_id, {"tools": []})
    (out,) = conn.data_to_send()
    return out


def respond(sock: socket.socket, status: str, headers: dict[str, str], body: bytes) -> None:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers.items())]
    lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")  # (one request per connection: see RawServer)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


def discover_then(misbehave: Handler) -> Handler:
    """Answer ``server/discover`` properly; ``misbehave`` on every other request."""

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"server/discover" in body:
            respond(sock, "200 OK", {"Content-Type": "application/json"}, modern_answer(body))
        else:
            misbehave(sock, head, body)

    return handler


def modern(url: str, **options: Any) -> BlockingClient:
    options.setdefault("timeout", 5.0)
    return connect(url, era="modern", **options)


def test_garbage(raw: Callable[..., RawServer]) -> None:
    server = raw(discover_then(lambda sock, head, body: sock.sendall(b"garbage\r\n\r\n")))
    with modern(server.url) as client, pytest.raises(McpError, match=r"broke HTTP/1\.1"):
        client.list_tools()


def test_closed_without_answering(raw: Callable[..., RawServer]) -> None:
    server = raw(discover_then(lambda sock, head, body: None))
    with modern(server.url) as client, pytest.raises(McpError, match="closed the connection"):
        client.list_tools()


@pytest.mark.parametrize("whole", [True, False])
def test_oversized_head(raw: Callable[..., RawServer], whole: bool) -> None:
    def huge(sock: socket.socket, head: bytes, body: bytes) -> None:
        if whole:  # a complete head, in one piece
            respond(sock, "200 OK", {"X-Junk": "j" * 5000, "Content-Type": "text/plain"}, b"")
        else:  # a head that never ends
            sock.sendall(b"HTTP/1.1 200 OK\r\nX-Junk: " + b"j" * 100_000)
            sock.recv(1)

    server = raw(discover_then(huge))
    bounds = HttpTransportConfig(max_header_size=4096)
    with (
        modern(server.url, transport=bounds) as client,
        pytest.raises(McpError, match="a response head over 4096 bytes"),
    ):
        client.list_tools()


def test_oversized_body(raw: Callable[..., RawServer]) -> None:
    def big(sock: socket.socket, head: bytes, body: bytes) -> None:
        respond(sock, "200 OK", {"Content-Type": "application/json"}, b" " * 2000 + body)

    server = raw(discover_then(big))
    small = HttpClientConfig(max_body_size=1000)
    with (
        modern(server.url, http_config=small) as client,
        pytest.raises(McpError, match="response body over 1000 bytes"),
    ):
        client.list_tools()


def test_oversized_sse_event(raw: Callable[..., RawServer]) -> None:
    def big(sock: socket.socket, head: bytes, body: bytes) -> None:
        answer = modern_answer(body)
        event = b"data: " + b"x" * 3000 + b"\n\ndata: " + answer + b"\n\n"
        respond(sock, "200 OK", {"Content-Type": "text/event-stream"}, event)

    server = raw(discover_then(big))
    with modern(server.url, http_config=HttpClientConfig(max_event_size=2000)) as client:
        assert client.list_tools() == []  # the oversized event is dropped, the next one read
    small = HttpClientConfig(max_event_size=100)
    with (
        modern(server.url, http_config=small) as client,
        pytest.raises(McpError, match="stream ended before the response"),
    ):
        client.list_tools()  # (the answer itself is over the bound)


def test_a_modern_stream_that_ends_unanswered_fails_the_call(
    raw: Callable[..., RawServer],
) -> None:
    # (Re-issued once, as ConnectionConfig.max_reissues allows, then it fails: the call
    # is not left waiting for an answer that cannot come.)
    def unanswered(sock: socket.socket, head: bytes, body: bytes) -> None:
        respond(sock, "200 OK", {"Content-Type": "text/event-stream"}, b": nothing\n\n")

    server = raw(discover_then(unanswered))
    with (
        modern(server.url) as client,
        pytest.raises(
            McpError, match=r"stream ended before the response arrived \(re-issued 1 time\)"
        ),
    ):
        client.list_tools()


def test_slowloris(raw: Callable[..., RawServer]) -> None:
    stop = threading.Event()

    def slow(sock: socket.socket, head: bytes, body: bytes) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.05):
            sock.sendall(b"X")  # one header line that never ends

    server = raw(discover_then(slow))
    try:
        with modern(server.url, timeout=0.5) as client:
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                client.list_tools()
            assert time.monotonic() - started < 5
    finally:
        stop.set()


def test_endless_stream_of_comments(raw: Callable[..., RawServer]) -> None:
    stop = threading.Event()

    def chatter(sock: socket.socket, head: bytes, body: bytes) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        while not stop.wait(0.02):
            sock.sendall(b": still here\n")

    server = raw(discover_then(chatter))
    try:
        with modern(server.url, timeout=0.5) as client, pytest.raises(TimeoutError):
            client.list_tools()
    finally:
        stop.set()


def test_handshake_never_answered(raw: Callable[..., RawServer]) -> None:
    stop = threading.Event()

    def silent(sock: socket.socket, head: bytes, body: bytes) -> None:
        stop.wait(TIMEOUT)

    server = raw(silent)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            connect(server.url, handshake_timeout=0.5)
        assert time.monotonic() - started < 5
    finally:
        stop.set()


def test_connect_timeout() -> None:
    """A listener whose backlog is full never completes the connection."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the accept queue (never accepted)
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
            started = time.monotonic()
            with pytest.raises((SessionClosed, TimeoutError)):
                connect(f"http://127.0.0.1:{port}/mcp", connect_timeout=0.3, handshake_timeout=5)
            assert time.monotonic() - started < 5
        finally:
            for filler in fillers:
                filler.close()


def test_redirects_are_not_followed(raw: Callable[..., RawServer]) -> None:
    def moved(sock: socket.socket, head: bytes, body: bytes) -> None:
        respond(sock, "307 Temporary Redirect", {"Location": "/elsewhere"}, b"")

    server = raw(discover_then(moved))
    with (
        modern(server.url) as client,
        pytest.raises(McpError, match=r"not followed \(Location: /elsewhere\)"),
    ):
        client.list_tools()
    assert server.connections == 2  # discover, tools/list: no request to /elsewhere


def test_modern_cancellation_closes_the_connection(raw: Callable[..., RawServer]) -> None:
    """Modern: a request given up is cancelled by closing its connection, never by a
    ``notifications/cancelled`` POST."""
    closed = threading.Event()
    bodies: list[bytes] = []

    def hang(sock: socket.socket, head: bytes, body: bytes) -> None:
        bodies.append(body)
        if b"tools/call" in body:
            sock.recv(1)  # until the client closes it
            closed.set()
        else:
            respond(sock, "200 OK", {"Content-Type": "application/json"}, modern_answer(body))

    server = raw(discover_then(hang))
    with modern(server.url) as client:
        with pytest.raises(TimeoutError):
            client.call_tool("slow", timeout=0.3)
        assert closed.wait(TIMEOUT)
        assert client.list_tools() == []
    assert not any(b"notifications/cancelled" in body for body in bodies)


def test_error_status(raw: Callable[..., RawServer]) -> None:
    server = raw(discover_then(lambda sock, head, body: respond(sock, "500 Oops", {}, b"")))
    with modern(server.url) as client, pytest.raises(McpError, match="status 500"):
        client.list_tools()


@pytest.mark.parametrize("give_up", [False, True])
def test_one_way_posts_are_bounded(raw: Callable[..., RawServer], give_up: bool) -> None:
    """A legacy server floods a call's stream with requests and never answers the POSTs
    carrying our answers: one of those is open at a time (they go in order, each once
    the one before is taken or given up), at most ``max_client_connections`` wait (the
    stream is not read meanwhile); with a short ``write_timeout`` each fails after it
    and the next ones go out."""
    session = "s1"
    verbs: list[bytes] = []

    def legacy(sock: socket.socket, head: bytes, body: bytes) -> None:
        verbs.append(head.split(b" ", 1)[0])
        message = loads(body) if body else None
        method = message.get("method") if isinstance(message, dict) else None
        if method == "initialize" and isinstance(message, dict):
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            headers = {"Content-Type": "application/json", "Mcp-Session-Id": session}
            respond(sock, "200 OK", headers, answer)
        elif method == "notifications/initialized" or head.startswith(b"DELETE"):
            respond(sock, "202 Accepted", {}, b"")
        elif head.startswith(b"GET"):
            respond(sock, "405 Method Not Allowed", {}, b"")
        elif method == "tools/list":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            for n in range(40):
                ping = dumps({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"})
                sock.sendall(b"data: " + ping + b"\n\n")
            sock.recv(1)  # until the client closes it
        else:  # our answers to the pings: never answered
            sock.recv(1)

    server = raw(legacy)
    bounds = HttpTransportConfig(max_client_connections=3, open_get_stream=False)
    with connect(
        server.url,
        era="legacy",
        transport=bounds,
        timeout=1.0,
        write_timeout=0.2 if give_up else TIMEOUT,
    ) as client:
        with pytest.raises(TimeoutError):
            client.list_tools()
        if give_up:  # answers failed, and others went out (the server counts late)
            assert server.connections > 3 + 3 + 3
        else:  # initialize, initialized, the call's stream, 1 answer; nothing more
            assert server.connections == 3 + 1
            assert server.most_at_once <= 1 + 1
    assert b"DELETE" in verbs  # the session is ended on close


@pytest.mark.parametrize("what", ["bound", "flood"])
def test_a_one_way_answer_that_stops_after_its_head(
    raw: Callable[..., RawServer], what: str
) -> None:
    """The server answers ``notifications/initialized`` with a head promising a body
    that never comes. ``bound``: that answer is given up after ``write_timeout`` (the
    connection closed) like one with no head; ``flood``: while it lasts, it is not taken
    for an unanswered one-way POST (the server took it), so the answer streams are
    still read with ``max_client_connections=1``."""
    closed = threading.Event()
    stop = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        if what == "bound":
            closed.wait(TIMEOUT)  # answered once the client gave up the one-way answer
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)
        else:  # an SSE answer whose event comes in a later packet
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            stop.wait(0.2)  # (a slow server: bounded)
            sock.sendall(b"data: " + answer + b"\n\n")
            sock.recv(1)  # until the client closes it

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"notifications/initialized" in body:
            sock.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 10\r\n\r\n")
            if not sock.recv(1):  # (until the client closes it)
                closed.set()
        else:
            inner(sock, head, body)

    server = raw(handler)
    limit = 0.3 if what == "bound" else TIMEOUT
    connections = 1 if what == "flood" else 4
    transport = HttpTransportConfig(open_get_stream=False, max_client_connections=connections)
    try:
        with connect(
            server.url,
            era="legacy",
            transport=transport,
            write_timeout=limit,
            timeout=3.0,
            close_timeout=TIMEOUT,
        ) as client:
            started = time.monotonic()
            assert client.list_tools() == []
            assert time.monotonic() - started < 2.5
            if what == "bound":
                assert closed.is_set()
            started = time.monotonic()
        # close() does not wait for the rest of an answer the server took already
        assert time.monotonic() - started < 2.5
    finally:
        stop.set()


def legacy_server(on_request: Callable[[socket.socket, bytes, dict[str, Any]], None]) -> Handler:
    """A legacy server by hand: ``initialize`` (session ``s1``), ``202`` for notifications
    and ``DELETE``, ``405`` for a GET without ``Last-Event-ID``; ``on_request`` serves
    the rest (the connection, the head, the message or ``{}`` for a GET)."""

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        assert isinstance(message, dict)
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "by hand", "version": "1"},
            }
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            headers = {"Content-Type": "application/json", "Mcp-Session-Id": "s1"}
            respond(sock, "200 OK", headers, answer)
        elif "id" not in message and (method is not None or head.startswith(b"DELETE")):
            respond(sock, "202 Accepted", {}, b"")
        elif head.startswith(b"GET") and b"last-event-id" not in head.lower():
            respond(sock, "405 Method Not Allowed", {}, b"")
        else:
            on_request(sock, head, message)

    return handler


def test_the_answers_to_one_way_messages_and_the_delete_are_not_warned_of(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture
) -> None:
    """The official Python server answers the closing ``DELETE`` 200, JSON, with an empty
    body; some servers answer a notification so (not 202). Neither is warned of: the
    ``DELETE``'s answer is not read (as the Trio client's), a one-way message's empty
    body is noted at DEBUG."""
    verbs: list[bytes] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        verbs.append(head.split(b" ", 1)[0])
        json = {"Content-Type": "application/json"}
        if head.startswith(b"DELETE"):
            respond(sock, "200 OK", json, b"session ended")  # (no JSON: not read)
        elif b'"method":"notifications/initialized"' in body:
            respond(sock, "200 OK", json, b"")
        else:
            inner(sock, head, body)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    options = {"era": "legacy", "transport": transport, "timeout": 5.0}
    with caplog.at_level("DEBUG", logger="mcp_trio"), connect(server.url, **options) as client:
        assert client.list_tools() == []
    assert b"DELETE" in verbs
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    (noted,) = [r for r in caplog.records if "one-way message was answered" in r.getMessage()]
    assert noted.levelno == logging.DEBUG and "200" in noted.getMessage()


def test_legacy_stream_resumed_with_last_event_id(raw: Callable[..., RawServer]) -> None:
    """A call's SSE stream that ends before the answer is resumed: GET with
    ``Last-Event-ID`` after the server's ``retry``."""
    heads: list[bytes] = []
    calls: list[Any] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        heads.append(head)
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        if message:  # the POST: a priming event, then the connection ends
            calls.append(message["id"])
            sock.sendall(sse + b"id: e1\nretry: 10\ndata:\n\n")
        else:  # the resumption
            answer = dumps({"jsonrpc": "2.0", "id": calls[0], "result": {"tools": []}})
            sock.sendall(sse + b"id: e2\ndata: " + answer + b"\n\n")

    server = raw(legacy_server(serve))
    with connect(server.url, era="legacy", timeout=5.0) as client:
        assert client.list_tools() == []
    assert heads[-1].startswith(b"GET") and b"last-event-id: e1" in heads[-1].lower()


def test_answers_to_the_server_go_out_before_the_call_returns(
    raw: Callable[..., RawServer],
) -> None:
    """Legacy: the server pings on a call's stream right before the call's result; the
    answer to the ping is written before the call returns (as over stdio), not left for
    the next call."""
    pong = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        ping = dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
        sock.sendall(sse + b"\r\n\r\ndata: " + ping + b"\n\ndata: " + answer + b"\n\n")

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b'"p1"' in body and b'"result"' in body:  # our answer to the ping
            pong.set()
            respond(sock, "202 Accepted", {}, b"")
        else:
            inner(sock, head, body)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        assert client.list_tools() == []
        assert pong.wait(TIMEOUT)  # (no other call, no close: written by list_tools)


def test_a_session_forgotten_twice_ends(raw: Callable[..., RawServer]) -> None:
    """Every request with a session id gets 404: one new session is started (its
    initialize goes out again), and when it is lost too, the session ends."""
    initialized: list[str] = []

    def forgetful(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"mcp-session-id" in head.lower():
            respond(sock, "404 Not Found", {}, b"")
            return
        message = loads(body)
        assert isinstance(message, dict)
        initialized.append(message["method"])
        result = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "forgetful", "version": "1"},
        }
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        headers = {"Content-Type": "application/json", "Mcp-Session-Id": f"s{len(initialized)}"}
        respond(sock, "200 OK", headers, answer)

    server = raw(forgetful)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        with pytest.raises(SessionClosed, match="forgot the HTTP session"):
            client.list_tools()
        with pytest.raises(SessionClosed, match="forgot the HTTP session"):
            client.list_tools()
    assert initialized == ["initialize", "initialize"]


@pytest.mark.parametrize("refused", [False, True])
def test_a_new_session_that_does_not_start_closes_the_client(
    raw: Callable[..., RawServer], refused: bool
) -> None:
    """After a ``404`` the new session's ``initialize`` is bounded by
    ``handshake_timeout`` even when calls have no timeout (as the Trio session's); a
    refused one closes the client too."""
    stop = threading.Event()
    initializes: list[str] = []

    def forgetful(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        assert isinstance(message, dict)
        if message.get("method") != "initialize":
            if "id" in message:
                respond(sock, "404 Not Found", {}, b"")  # (the session is forgotten)
            else:
                respond(sock, "202 Accepted", {}, b"")
            return
        initializes.append("initialize")
        if len(initializes) == 1:
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            }
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            headers = {"Content-Type": "application/json", "Mcp-Session-Id": "s1"}
            respond(sock, "200 OK", headers, answer)
        elif refused:
            error = {"code": -32600, "message": "no more sessions"}
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)
        else:
            stop.wait(TIMEOUT)  # never answered

    server = raw(forgetful)
    transport = HttpTransportConfig(open_get_stream=False)
    try:
        with connect(
            server.url, era="legacy", transport=transport, timeout=None, handshake_timeout=0.5
        ) as client:
            started = time.monotonic()
            # (timeout: a bound on the test, ten times the limit)
            # The held request ends with the session, not with an error the server
            # never sent (the core's, for it: ErrorReceived.local).
            why = (
                "did not start a new one: no more sessions"
                if refused
                else r"did not start a new one in 0\.5 s"
            )
            with pytest.raises(SessionClosed, match=why):
                client.list_tools(timeout=5.0)
            with pytest.raises(SessionClosed, match=why):
                client.list_tools(timeout=5.0)
            assert time.monotonic() - started < 3.0
    finally:
        stop.set()
    assert initializes == ["initialize", "initialize"]


class SkewedTime:
    """``mcp_trio._blocking``'s ``time`` module, its clock moved on at will: the user's
    pause between calls, with no sleep."""

    def __init__(self) -> None:
        self.skew = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skew

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def test_a_new_session_has_its_time_in_calls_not_between_them(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server forgets the session (a ``404`` to our answer to its ping) and so the
    call fails; the user pauses an hour before the next call, far past
    ``handshake_timeout`` and the new ``initialize``'s own ``timeout``. Nothing runs
    between calls, so the pause counts for neither: the next call goes on with the new
    session."""
    clock = SkewedTime()
    monkeypatch.setattr(_blocking, "time", clock)
    stop = threading.Event()
    sessions: list[str] = []

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        assert isinstance(message, dict)
        forgotten = b"mcp-session-id: s1" in head.lower() and len(sessions) == 1
        if message.get("method") == "initialize":
            sessions.append(f"s{len(sessions) + 1}")
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            }
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            headers = {"Content-Type": "application/json", "Mcp-Session-Id": sessions[-1]}
            respond(sock, "200 OK", headers, answer)
        elif forgotten and "result" in message:  # our answer to the ping: s1 is gone
            respond(sock, "404 Not Found", {}, b"")
        elif "id" not in message:
            respond(sock, "202 Accepted", {}, b"")
        elif forgotten:  # the first tools/list: a ping, never an answer
            ping = dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
            sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
            sock.sendall(sse + b"data: " + ping + b"\n\n")
            stop.wait(TIMEOUT)
        else:
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    try:
        with connect(
            server.url, era="legacy", transport=transport, timeout=5.0, handshake_timeout=0.3
        ) as client:
            with pytest.raises(McpError, match="forgot the session"):
                client.list_tools()
            clock.skew += 3600.0  # (the user's own business)
            assert client.list_tools() == []
    finally:
        stop.set()
    assert sessions == ["s1", "s2"]


class FirstFailure(Exception):
    pass


@pytest.mark.parametrize("first", [FirstFailure, KeyboardInterrupt])
def test_a_callback_exception_is_not_replaced_by_a_later_one(
    raw: Callable[..., RawServer], first: type[BaseException]
) -> None:
    """Two log messages in one read, each callback raising: the first exception ends
    the call, and no later callback's (run while the call is given up) replaces it --
    nothing is handled after the loop raised, the writing of what is queued neither."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        ping = dumps({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        logs = [
            dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": data},
                }
            )
            for data in ("one", "two")
        ]
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        events = b"".join(b"data: " + m + b"\n\n" for m in (ping, *logs, answer))
        sock.sendall(sse + events)  # (one write: all of it in the inbox at once)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b'"p1"' in body and b'"result"' in body:  # our answer to the ping
            respond(sock, "202 Accepted", {}, b"")
        else:
            inner(sock, head, body)

    def on_log(params: Any) -> None:
        if params.data == "one":
            raise first("the first")
        raise ValueError("a later one")

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    client = connect(server.url, era="legacy", transport=transport, timeout=5.0, on_log=on_log)
    with client, pytest.raises(first, match="the first"):
        client.list_tools()


def test_ctrl_c_waits_for_one_bounded_write_only(raw: Callable[..., RawServer]) -> None:
    """Ctrl-C during a call while an answer to the server cannot be written (it waits
    for a connection: ``max_client_connections=1``, and the server never answers the
    first one): the call is given up after one bounded write (the cancellation's, a
    second at most), not two (no courtesy write of what is queued before it)."""
    stop = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        pings = b"".join(
            b"data: " + dumps({"jsonrpc": "2.0", "id": f"p{n}", "method": "ping"}) + b"\n\n"
            for n in (1, 2)
        )
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + pings)
        stop.wait(TIMEOUT)  # never an answer

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b'"result"' in body:  # an answer to a ping: taken, never answered
            stop.wait(TIMEOUT)
        else:
            inner(sock, head, body)

    fired: list[float] = []

    def interrupt(signum: int, frame: Any) -> None:
        fired.append(time.monotonic())
        raise KeyboardInterrupt

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False, max_client_connections=1)
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        with connect(server.url, era="legacy", transport=transport, timeout=10.0) as client:
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                client.list_tools()
            late = time.monotonic() - fired[0]
            signal.setitimer(signal.ITIMER_REAL, 0)
            stop.set()  # (close() need not wait for the held answers)
            assert 0.9 < late < 1.6
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        stop.set()


def test_a_405_to_the_get_stream_is_closed_at_its_head_its_body_unread(
    raw: Callable[..., RawServer],
) -> None:
    """ "No GET stream" is judged at the head, and the connection closed then: the body
    (here one that never ends) is not read, which would hold a socket for the session."""
    hung_up = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET"):
            sock.sendall(
                b"HTTP/1.1 405 Method Not Allowed\r\nTransfer-Encoding: chunked\r\n"
                b"Content-Type: text/plain\r\n\r\n5\r\nhello\r\n"  # (and no end)
            )
            with suppress(ConnectionError):  # (reset: closed with the chunk unread)
                while sock.recv(1024):
                    pass
            hung_up.set()
        else:
            inner(sock, head, body)

    server = raw(handler)
    with connect(server.url, era="legacy", timeout=TIMEOUT) as client:
        client.call_tool("x")  # (after the GET's head: it holds back the requests)
        assert hung_up.wait(TIMEOUT / 2), "the 405's connection was left open"


def test_a_get_stream_that_keeps_ending_is_polled_less_and_less(
    raw: Callable[..., RawServer],
) -> None:
    """The server ends each GET stream at once, with nothing in it: it is opened again
    after ``retry``, then twice as long each time (not every ``retry`` for ever)."""
    gets: list[float] = []
    answer_now = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        respond(sock, "200 OK", {"Content-Type": "application/json"}, b"")

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET"):
            gets.append(time.monotonic())
            sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
            sock.sendall(sse + b"\r\n\r\nretry: 10\n\n")
        elif b"tools/call" in body:
            answer_now.wait(1.0)  # (a slow tool: the GET stream is read meanwhile)
            message = loads(body)
            assert isinstance(message, dict)
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    with connect(server.url, era="legacy", http_config=fast, timeout=5.0) as client:
        client.call_tool("slow")
    # 10 ms, 10, 20, 40, ... 640: about 8 in the second (every 10 ms: about 100).
    assert 3 <= len(gets) <= 12, len(gets)


def test_a_get_stream_whose_resumption_is_refused_is_opened_afresh(
    raw: Callable[..., RawServer],
) -> None:
    """The GET stream ends; its resumption is refused with ``410`` (the events are
    gone): it is opened again afresh, as the Trio client's, not given up for the rest
    of the session (only a ``405``, or a refusal before any stream came, means "no GET
    stream"): what the server says on its own was lost for good."""
    gets: list[str] = []
    fresh_again = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        respond(sock, "200 OK", {"Content-Type": "application/json"}, b"")

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
        if head.startswith(b"GET"):
            resumed = b"last-event-id: e1" in head.lower()
            gets.append("resume" if resumed else "fresh")
            if resumed:
                respond(sock, "410 Gone", {}, b"")
            elif len(gets) == 1:
                sock.sendall(sse + b"\r\n\r\nid: e1\nretry: 10\ndata:\n\n")  # (then it ends)
            else:
                fresh_again.set()
                sock.sendall(sse + b"\r\n\r\nretry: 10\n\n")
        elif b"tools/call" in body:
            fresh_again.wait(TIMEOUT)  # (a slow tool: the GET stream is read meanwhile)
            message = loads(body)
            assert isinstance(message, dict)
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    with connect(server.url, era="legacy", http_config=fast, timeout=2 * TIMEOUT) as client:
        client.call_tool("slow")
    assert fresh_again.is_set()
    assert gets[:3] == ["fresh", "resume", "fresh"]


def test_a_get_stream_that_cannot_be_opened_again_ends_the_session(
    raw: Callable[..., RawServer],
) -> None:
    """The GET stream came once, then every attempt to open it again is refused ``503``:
    after ``max_resume_attempts`` more, the session ends (``SessionClosed``, saying why),
    as the Trio client's; it did not say so, and a client that only waited for a long
    call never learnt that what the server says on its own stopped coming."""
    gets: list[bytes] = []
    stop = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        stop.wait(TIMEOUT)  # (a call that never ends: only the session's end ends it)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET"):
            gets.append(head)
            if len(gets) == 1:
                sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
                sock.sendall(sse + b"\r\n\r\nid: e1\nretry: 10\ndata:\n\n")  # (then it ends)
            else:
                respond(sock, "503 Service Unavailable", {}, b"")
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    transport = HttpTransportConfig(max_resume_attempts=2)
    try:
        with (
            connect(
                server.url, era="legacy", http_config=fast, transport=transport, timeout=TIMEOUT
            ) as client,
            pytest.raises(SessionClosed, match="GET stream cannot be opened again: status 503"),
        ):
            client.call_tool("slow")
    finally:
        stop.set()
    assert len(gets) == 1 + 3  # the stream, then max_resume_attempts + 1 refused


def test_a_get_stream_dropped_every_time_is_not_asked_for_again(
    raw: Callable[..., RawServer],
) -> None:
    """A server whose POSTs work closes every GET unanswered (a proxy that takes no
    streams): after ``max_resume_attempts`` more attempts it offers no GET stream, as
    the Trio client's rule says, and is not asked again (it was, once a call)."""
    gets: list[bytes] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET"):
            gets.append(head)  # (closed unanswered, by RawServer)
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    transport = HttpTransportConfig(max_resume_attempts=2)
    with connect(
        server.url, era="legacy", http_config=fast, transport=transport, timeout=TIMEOUT
    ) as client:
        deadline = time.monotonic() + TIMEOUT
        while len(gets) < 3 and time.monotonic() < deadline:
            assert client.list_tools() == []  # (the client's loop runs only in its calls)
        for _ in range(3):
            assert client.list_tools() == []
    assert len(gets) == 3  # max_resume_attempts + 1, then no more


@pytest.mark.parametrize("failure", ["dropped", "503"])
def test_a_get_stream_is_resumed_from_its_last_event_id_after_a_failed_attempt(
    raw: Callable[..., RawServer], failure: str
) -> None:
    """The GET stream ends after event ``e1``; its resumption gets no stream (the
    connection dropped before an answer, or a ``503``): the next attempt still resumes
    from ``e1``, as the Trio client's (it was opened afresh, and what the server said in
    between was lost)."""
    gets: list[bytes] = []
    third = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        third.wait(TIMEOUT)  # (a slow tool: the GET stream is read meanwhile)
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
        if head.startswith(b"GET"):
            gets.append(head.lower())
            if len(gets) == 1:
                sock.sendall(sse + b"\r\n\r\nid: e1\nretry: 10\ndata:\n\n")  # (then it ends)
            elif len(gets) == 2:
                if failure == "503":
                    respond(sock, "503 Service Unavailable", {}, b"")
                # (else closed unanswered, by RawServer)
            else:
                third.set()
                sock.sendall(sse + b"\r\n\r\nretry: 10\n\n")
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    with connect(server.url, era="legacy", http_config=fast, timeout=TIMEOUT) as client:
        client.call_tool("slow")
    assert third.is_set()
    assert b"last-event-id" not in gets[0]
    assert b"last-event-id: e1" in gets[1]
    assert b"last-event-id: e1" in gets[2]


def test_after_a_get_that_got_no_stream_the_wait_follows_the_stream_s_retry(
    raw: Callable[..., RawServer],
) -> None:
    """The GET stream (``retry: 300``) ends; its resumption gets no answer: the next
    attempt waits from the stream's ``retry`` (0.3 s), as the Trio client's (the core's
    ``GetStream``); it waited from ``default_retry_ms`` (10 ms, at least 0.1 s), polling
    a server that asked for 0.3 s three times as often."""
    gets: list[float] = []
    third = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        third.wait(TIMEOUT)  # (a slow tool: the GET stream is read meanwhile)
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
        if head.startswith(b"GET"):
            gets.append(time.monotonic())
            if len(gets) == 1:
                sock.sendall(sse + b"\r\n\r\nid: e1\nretry: 300\ndata:\n\n")  # (then it ends)
            elif len(gets) == 3:
                third.set()
                sock.sendall(sse + b"\r\n\r\nretry: 300\n\n")
            # (the second: closed unanswered, by RawServer)
        else:
            inner(sock, head, body)

    server = raw(handler)
    fast = HttpClientConfig(default_retry_ms=10)
    with connect(server.url, era="legacy", http_config=fast, timeout=TIMEOUT) as client:
        client.call_tool("slow")
    assert third.is_set()
    assert gets[1] - gets[0] >= 0.25
    assert gets[2] - gets[1] >= 0.25  # (it was 0.1)


def test_a_get_stream_that_cannot_reach_the_server_any_more_ends_the_session(
    raw: Callable[..., RawServer],
) -> None:
    """The GET stream ends, and the server stops taking connections while a call waits:
    after ``max_resume_attempts`` more attempts the session ends, saying the server
    cannot be reached any more, as the Trio client words it."""
    called = threading.Event()
    stop = threading.Event()
    listeners: list[socket.socket] = []  # (the server's, once it is started)

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        called.set()
        stop.wait(TIMEOUT)  # (a call that never ends: only the session's end ends it)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET"):
            sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close"
            sock.sendall(sse + b"\r\n\r\nid: e1\nretry: 10\ndata:\n\n")
            called.wait(TIMEOUT)  # (the call is out: then no new connection is taken)
            with suppress(OSError):
                listeners[0].shutdown(socket.SHUT_RDWR)
            listeners[0].close()
        else:
            inner(sock, head, body)

    server = raw(handler)
    listeners.append(server.listener)
    fast = HttpClientConfig(default_retry_ms=10)
    transport = HttpTransportConfig(max_resume_attempts=2)
    try:
        with (
            connect(
                server.url, era="legacy", http_config=fast, transport=transport, timeout=TIMEOUT
            ) as client,
            pytest.raises(SessionClosed, match=r"cannot be reached any more: 127\.0\.0\.1:"),
        ):
            client.call_tool("slow")
    finally:
        stop.set()


def test_a_new_session_asks_for_the_get_stream_again(raw: Callable[..., RawServer]) -> None:
    """The first session's GET is refused ``405``; the server forgets that session and
    the client starts another: it asks that one for a GET stream, as the Trio client
    does (each session's GET stream starts afresh: a restarted server may offer one)."""
    gets: list[bytes] = []
    sessions = itertools.count(1)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        assert isinstance(message, dict)
        method = message.get("method")
        fields = dict(line.partition(b":")[::2] for line in head.lower().split(b"\r\n")[1:])
        sid = fields.get(b"mcp-session-id", b"").strip()
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "by hand", "version": "1"},
            }
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
            headers = {"Content-Type": "application/json", "Mcp-Session-Id": f"s{next(sessions)}"}
            respond(sock, "200 OK", headers, answer)
        elif sid == b"s1" and not head.startswith(b"GET") and method == "tools/list":
            respond(sock, "404 Not Found", {}, b"")
        elif "id" not in message and (method is not None or head.startswith(b"DELETE")):
            respond(sock, "202 Accepted", {}, b"")
        elif head.startswith(b"GET"):
            gets.append(sid)
            respond(sock, "405 Method Not Allowed", {}, b"")
        else:
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(handler)
    with connect(server.url, era="legacy", timeout=TIMEOUT) as client:
        assert client.list_tools() == []  # (404 on s1: sent again on s2)
        assert client.list_tools() == []
    assert gets == [b"s1", b"s2"]


def test_requests_wait_for_initialized_to_be_taken(raw: Callable[..., RawServer]) -> None:
    """The server holds its answer to ``notifications/initialized`` a while: no request
    may arrive before that answer (the session is not ready before it)."""
    held = threading.Event()
    early: list[str] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        if held.is_set():
            early.append(str(message.get("method")))
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"notifications/initialized" in body:
            held.set()
            threading.Event().wait(0.3)  # (a slow server: bounded)
            held.clear()
        inner(sock, head, body)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        assert client.list_tools() == []
    assert early == []


def test_requests_wait_for_initialized_refused_503_to_be_taken_on_retry(
    raw: Callable[..., RawServer],
) -> None:
    """The server refuses ``notifications/initialized`` with ``503`` and ``Retry-After``
    (over its connection bound, say): no request may arrive before the retry is taken
    (one did, a ``Retry-After`` early: the retry was queued behind it)."""
    seen: list[tuple[str, int]] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        seen.append((str(message.get("method")), 200))
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"notifications/initialized" not in body:
            inner(sock, head, body)
        elif not seen:
            seen.append(("notifications/initialized", 503))
            respond(sock, "503 Service Unavailable", {"Retry-After": "1"}, b"")
        else:
            seen.append(("notifications/initialized", 202))
            respond(sock, "202 Accepted", {}, b"")

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        assert client.list_tools() == []
    assert seen == [
        ("notifications/initialized", 503),
        ("notifications/initialized", 202),
        ("tools/list", 200),
    ]


@pytest.mark.parametrize("answered", [True, False])
def test_the_get_stream_opens_after_initialized_and_before_requests(
    raw: Callable[..., RawServer], answered: bool
) -> None:
    """Legacy: the GET stream goes out once the server has taken
    ``notifications/initialized`` (a server may refuse it before), and the first
    request waits for its head (what the server says right away is not missed), for
    ``connect_timeout`` at most."""
    log: list[str] = []
    taken = threading.Event()
    stop = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        log.append(str(message.get("method")))
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"notifications/initialized" in body:
            log.append("initialized")
            stop.wait(0.3)  # (a slow server: bounded)
            taken.set()
            inner(sock, head, body)
        elif head.startswith(b"GET"):
            log.append("GET" if taken.is_set() else "GET too early")
            if not taken.is_set():
                respond(sock, "400 Bad Request", {}, b"")
                return
            if not answered:
                stop.wait(TIMEOUT)  # never a head
                return
            stop.wait(0.3)  # (a slow server: bounded)
            log.append("GET answered")
            note = dumps({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"})
            sse = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
            sock.sendall(sse + b"data: " + note + b"\n\n")
            sock.recv(1)  # until the client closes it
        else:
            inner(sock, head, body)

    heard: list[str] = []
    server = raw(handler)
    bounds = HttpTransportConfig(connect_timeout=0.5)
    try:
        with connect(
            server.url,
            era="legacy",
            transport=bounds,
            timeout=5.0,
            on_notification=lambda n: heard.append(n.method),
        ) as client:
            started = time.monotonic()
            assert client.list_tools() == []
            assert time.monotonic() - started < 3.0
            if answered:
                for _ in range(20):  # (bounded: the stream is read while each ping waits)
                    if heard:
                        break
                    client.ping()
    finally:
        stop.set()
    if answered:
        assert log[:4] == ["initialized", "GET", "GET answered", "tools/list"]
        assert heard == ["notifications/resources/list_changed"]
    else:  # the request went after connect_timeout
        assert log[:3] == ["initialized", "GET", "tools/list"]


def test_write_timeout(raw: Callable[..., RawServer]) -> None:
    """A server that stops reading a large request: the request fails after
    ``write_timeout`` without progress, the session goes on."""
    release = threading.Event()

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    server = raw(legacy_server(serve), stall_above=1_000_000, release=release)
    try:
        with connect(server.url, era="legacy", write_timeout=0.3, timeout=10.0) as client:
            started = time.monotonic()
            with pytest.raises(McpError, match=r"writing timed out after 0\.3 s"):
                client.call_tool("echo", {"text": "x" * 50_000_000})
            assert time.monotonic() - started < 5
            assert client.call_tool("echo", {"text": "small"}).content == []
    finally:
        release.set()


# ---------------------------------------------------------------------- the proof


def test_stdio_users_load_nothing_of_http() -> None:
    http = ("h11", "mcp_trio._blocking_http", "mcp_sansio.http", "trio")
    assert modules_loaded("import mcp_trio._blocking", *http) == []


def test_ctrl_c_in_a_callback_leaves_no_message_past_a_resend_for_another() -> None:
    """Ctrl-C in a callback: the messages in the inbox behind a ``Resend`` are handed
    over with no callback (their requests answered with an error), the ``Resend`` done
    in its turn; nothing is left for the loop that cancels the call."""
    http = HttpTransport(
        "http://127.0.0.1:9/mcp",
        http_config=None,
        transport=None,
        ssl_context=None,
        headers=None,
        write_timeout=None,
    )
    link = HttpLink(http, close_timeout=1.0)
    order: list[object] = []

    def handle(events: list[Any]) -> None:
        order.append(("called", events))
        raise KeyboardInterrupt

    conn: Any = SimpleNamespace(
        receive_message=lambda message, now: [message],
        resend_request=lambda rid: order.append(("resent", rid)),
        data_to_send=lambda: [],
    )
    link.attach(
        _blocking.Hooks(
            conn=conn,
            clock=_blocking.CallClock(),
            handle=handle,
            handle_uncalled=lambda events: order.append(("uncalled", events)),
            fail=lambda failure: None,
            failed=lambda: False,
            handshaken=lambda: False,
            restart=lambda now: None,
            reissue=lambda rid: 0,
        )
    )
    http.inbox.extend([b"srv-1", Resend(("r1",)), b"srv-2", b"srv-3"])
    with pytest.raises(KeyboardInterrupt):
        link.take()
    assert order == [
        ("called", [b"srv-1"]),
        ("resent", "r1"),
        ("uncalled", [b"srv-2", b"srv-3"]),
    ]
    assert not http.inbox


@pytest.mark.parametrize("era", ["auto", "legacy", "modern"])
def test_no_mcp_endpoint_at_the_url_says_so(raw: Callable[..., RawServer], era: str) -> None:
    # (it was a bare "HTTP: status 404": neither the URL nor serve_http's path)
    server = raw(lambda sock, head, body: respond(sock, "404 Not Found", {}, b""))
    url = f"http://127.0.0.1:{server.port}/api"
    with pytest.raises(HandshakeFailed) as failed:
        connect(url, era=era)
    assert failed.value.message == (
        f"HTTP: status 404: no MCP endpoint at {url!r} (mcp_trio's serve_http serves one at /mcp)"
    )


def test_a_bare_400_suggests_the_websocket_url(raw: Callable[..., RawServer]) -> None:
    # What a WebSocket server (serve_websocket) answers a plain HTTP request.
    server = raw(lambda sock, head, body: respond(sock, "400 ", {}, b""))
    with pytest.raises(HandshakeFailed) as failed:
        connect(server.url)
    assert failed.value.message.endswith(
        f"if it serves WebSocket (serve_websocket), connect to 'ws://127.0.0.1:{server.port}/mcp'"
    )


def polling_server(
    resume: Callable[[int, Any], bytes | None], gets: list[float], cancelled: list[Any]
) -> Handler:
    """A legacy server whose ``tools/call`` stream, and each resumption of it, is
    ``resume(n, call_id)`` (``n``: 0 for the POST, then 1, 2, ...): a whole response, or
    ``None`` to close the connection unanswered. Notes when each resumption came, and the
    ``notifications/cancelled`` it got."""
    calls: list[Any] = []

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        if message.get("method") == "ping":
            answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)
            return
        if message:
            calls.append(message["id"])
        else:
            gets.append(time.monotonic())
        stream = resume(len(gets) if not message else 0, calls[0])
        if stream is not None:
            sock.sendall(stream)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            cancelled.append(message["params"])
        inner(sock, head, body)

    return handler


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def test_a_server_that_polls_answers_a_long_call(raw: Callable[..., RawServer]) -> None:
    """Each resumption brings a new event id and nothing else, more often in a row than
    ``max_resume_attempts``: the server is there (it polls), so the client resumes until
    the answer comes, however long (no timeout), waiting longer while nothing comes."""
    gets: list[float] = []
    cancelled: list[Any] = []
    polls = 7

    def resume(n: int, rid: Any) -> bytes:
        if n < polls:
            return SSE_HEAD + f"id: p{n}\nretry: 10\ndata:\n\n".encode()
        result = {"content": [{"type": "text", "text": f"after {n} polls"}]}
        answer = dumps({"jsonrpc": "2.0", "id": rid, "result": result})
        return SSE_HEAD + b"id: end\ndata: " + answer + b"\n\n"

    server = raw(polling_server(resume, gets, cancelled))
    fast = HttpClientConfig(default_retry_ms=10)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(
        server.url, era="legacy", http_config=fast, transport=transport, timeout=None
    ) as client:
        result = client.call_tool("long")
    assert result.text == f"after {polls} polls"
    assert len(gets) == polls and not cancelled
    gaps = [b - a for a, b in itertools.pairwise(gets)]
    assert min(gaps) >= MIN_REOPEN_DELAY * 0.9  # (the floor, retry 10 ms or not)


@pytest.mark.parametrize("how", ["status 503", "dropped"])
def test_resumptions_that_get_no_stream_are_bounded_and_cancelled(
    raw: Callable[..., RawServer], how: str
) -> None:
    """Resumptions that get an error status (or no answer): after ``max_resume_attempts``
    of them in a row the call fails, saying why, and the server is told."""
    gets: list[float] = []
    cancelled: list[Any] = []

    def resume(n: int, rid: Any) -> bytes | None:
        if n == 0:
            return SSE_HEAD + b"id: p0\nretry: 10\ndata:\n\n"
        if how == "dropped":
            return None
        return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    server = raw(polling_server(resume, gets, cancelled))
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=2)
    fast = HttpClientConfig(default_retry_ms=10)
    with connect(
        server.url, era="legacy", http_config=fast, transport=transport, timeout=None
    ) as client:
        with pytest.raises(McpError) as failed:
            client.call_tool("long")
        message = failed.value.message
        assert message.startswith("HTTP: the stream could not be resumed: 3 attempts in a row")
        assert ("status 503" in message) == (how == "status 503")
        client.ping()  # (the cancellation went out before this)
    assert len(gets) == 3
    assert [c["reason"][:36] for c in cancelled] == ["HTTP: the stream could not be resume"]


def test_a_message_per_resumption_with_retry_0_is_not_a_tight_loop(
    raw: Callable[..., RawServer],
) -> None:
    """Each resumption brings a real message and ends, ``retry: 0``: progress, so no
    backoff, but the resumptions are spaced by ``MIN_REOPEN_DELAY`` at least."""
    gets: list[float] = []
    note = dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})

    def resume(n: int, rid: Any) -> bytes:
        return SSE_HEAD + f"id: m{n}\nretry: 0\ndata: ".encode() + note + b"\n\n"

    server = raw(polling_server(resume, gets, []))
    transport = HttpTransportConfig(open_get_stream=False)
    with (
        connect(server.url, era="legacy", transport=transport, timeout=0.5) as client,
        pytest.raises(TimeoutError),
    ):
        client.call_tool("long")
    assert 1 <= len(gets) <= 0.5 / MIN_REOPEN_DELAY + 1
    gaps = [b - a for a, b in itertools.pairwise(gets)]
    assert min(gaps, default=MIN_REOPEN_DELAY) >= MIN_REOPEN_DELAY * 0.9


def recording(handler: Handler, heads: list[bytes]) -> Handler:
    """``handler``, noting the head of each resumption (a GET with ``Last-Event-ID``)."""

    def record(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"GET") and b"last-event-id" in head.lower():
            heads.append(head)
        handler(sock, head, body)

    return record


def test_a_resumed_stream_with_no_event_is_resumed_from_the_same_id(
    raw: Callable[..., RawServer],
) -> None:
    """A resumption answered with a stream that brings no event at all (a server with
    nothing new yet, a proxy's idle timeout): SSE keeps the last event id, so the call
    is resumed again from the same one, not failed (nor cancelled on the server)."""
    gets: list[float] = []
    cancelled: list[Any] = []
    heads: list[bytes] = []

    def resume(n: int, rid: Any) -> bytes:
        if n == 0:
            return SSE_HEAD + b"id: p0\nretry: 10\ndata:\n\n"
        if n < 3:
            return SSE_HEAD  # (then the end: nothing in it)
        answer = dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
        return SSE_HEAD + b"id: end\ndata: " + answer + b"\n\n"

    server = raw(recording(polling_server(resume, gets, cancelled), heads))
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=0)
    with connect(server.url, era="legacy", transport=transport, timeout=None) as client:
        assert client.call_tool("long").content == []
    assert len(gets) == 3 and not cancelled
    assert all(b"last-event-id: p0" in head.lower() for head in heads)


def test_a_resumption_that_finds_no_server_is_tried_again_counted(
    raw: Callable[..., RawServer],
) -> None:
    """The server goes away after the call's stream ended: each resumption is refused a
    connection. Counted as attempts that got no stream and tried again, up to
    ``max_resume_attempts``: then the call fails, saying why (as the Trio client's)."""
    server: RawServer

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        with suppress(OSError):  # (every later connection is refused: as RawServer.close)
            server.listener.shutdown(socket.SHUT_RDWR)
        server.listener.close()
        sock.sendall(SSE_HEAD + b"id: p0\nretry: 10\ndata:\n\n")

    server = raw(legacy_server(serve))
    transport = HttpTransportConfig(open_get_stream=False, max_resume_attempts=2)
    fast = HttpClientConfig(default_retry_ms=10)
    with (
        connect(
            server.url, era="legacy", http_config=fast, transport=transport, timeout=None
        ) as client,
        pytest.raises(McpError) as failed,
    ):
        client.call_tool("long")
    message = failed.value.message
    assert message.startswith("HTTP: the stream could not be resumed: 3 attempts in a row failed")
    assert "could not connect" in message, message


def test_a_refused_resumption_fails_the_call_and_tells_the_server(
    raw: Callable[..., RawServer],
) -> None:
    """A 4xx to a resumption: the events are gone, and so is the answer; the server,
    which may still be working on the call, is told (``notifications/cancelled``)."""
    gets: list[float] = []
    cancelled: list[Any] = []

    def resume(n: int, rid: Any) -> bytes:
        if n == 0:
            return SSE_HEAD + b"id: p0\nretry: 10\ndata:\n\n"
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    server = raw(polling_server(resume, gets, cancelled))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=None) as client:
        with pytest.raises(McpError, match="status 400"):
            client.call_tool("long")
        client.ping()  # (the cancellation went out before this)
    assert len(gets) == 1
    assert [c["reason"] for c in cancelled] == ["HTTP: status 400"]


def _one_way_server(
    on_notification: Callable[[socket.socket, dict[str, Any]], None],
) -> Handler:
    """A legacy server whose answer to ``notifications/test`` is ``on_notification``'s;
    ``tools/list`` is answered at once."""

    def serve(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        answer = dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": []}})
        respond(sock, "200 OK", {"Content-Type": "application/json"}, answer)

    inner = legacy_server(serve)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if b"notifications/test" in body:
            on_notification(sock, loads(body))
        else:
            inner(sock, head, body)

    return handler


def test_a_request_does_not_wait_for_a_notification_s_answer(
    raw: Callable[..., RawServer],
) -> None:
    """A server slow to answer a notification (one that waits for a handler slot, say)
    holds up no request after it (it did, up to ``write_timeout``): only
    ``notifications/initialized`` does (test_requests_wait_for_initialized_to_be_taken)."""
    release = threading.Event()

    def hold(sock: socket.socket, message: dict[str, Any]) -> None:
        release.wait(TIMEOUT)

    server = raw(_one_way_server(hold))
    transport = HttpTransportConfig(open_get_stream=False)
    try:
        with connect(
            server.url, era="legacy", transport=transport, timeout=5.0, write_timeout=3.0
        ) as client:
            client.notify("notifications/test")  # (returns once written)
            began = time.monotonic()
            assert client.list_tools() == []
            assert time.monotonic() - began < 1.0  # not write_timeout
    finally:
        release.set()


def _refusing(refusals: int, seen: list[float]) -> Callable[[socket.socket, dict[str, Any]], None]:
    def refuse(sock: socket.socket, message: dict[str, Any]) -> None:
        seen.append(time.monotonic())
        if len(seen) <= refusals:
            respond(sock, "503 Service Unavailable", {"Retry-After": "1"}, b"")
        else:
            respond(sock, "202 Accepted", {}, b"")

    return refuse


@pytest.mark.parametrize("refusals", [1, 2])
def test_a_notification_refused_503_is_sent_again_once_after_retry_after(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture, refusals: int
) -> None:
    """``503`` with ``Retry-After`` (a server with no handler slot for it: nothing of it
    ran): sent again once, after that delay; refused again, lost with a warning."""
    seen: list[float] = []
    server = raw(_one_way_server(_refusing(refusals, seen)))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        assert client.list_tools() == []
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < 2 and time.monotonic() < deadline:
            client.list_tools()  # (the client's loop runs only in its calls)
    assert len(seen) == 2
    assert 0.9 <= seen[1] - seen[0] < 5.0
    lost = [r.getMessage() for r in caplog.records if "one-way message" in r.getMessage()]
    assert lost == (
        [] if refusals == 1 else ["HTTP: a one-way message was refused again: status 503"]
    )


@pytest.mark.parametrize("cuts", [1, 2])
def test_a_notification_whose_connection_broke_after_it_was_written_is_sent_again(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture, cuts: int
) -> None:
    """The server reads a one-way message whole and closes the connection unanswered
    (a proxy cut it): it may never have had it (an answer to its request it would wait
    for in vain), so it is sent once more at once, as the Trio client's; cut again, it
    is lost with a warning."""
    seen: list[float] = []

    def cut(sock: socket.socket, message: dict[str, Any]) -> None:
        seen.append(time.monotonic())
        if len(seen) > cuts:
            respond(sock, "202 Accepted", {}, b"")
        # (else closed unanswered, by RawServer)

    server = raw(_one_way_server(cut))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < 2 and time.monotonic() < deadline:
            client.list_tools()  # (the client's loop runs only in its calls)
        assert client.list_tools() == []
    assert len(seen) == 2
    assert seen[1] - seen[0] < 1.0  # at once
    lost = [r.getMessage() for r in caplog.records if "one-way message" in r.getMessage()]
    if cuts == 1:
        assert lost == []
    else:
        [message] = lost
        assert message.startswith(
            "HTTP: a one-way message was lost: the server closed the connection"
        )


def test_a_notification_sent_again_after_a_cut_then_refused_503_is_not_said_closing(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture
) -> None:
    """A notification whose connection was cut after it was written is sent again, and
    that is refused ``503`` with ``Retry-After``: lost (sent once more already), and the
    warning says so without "(closing)": nothing is closing."""
    seen: list[float] = []

    def cut_then_refuse(sock: socket.socket, message: dict[str, Any]) -> None:
        seen.append(time.monotonic())
        if len(seen) == 2:
            respond(sock, "503 Service Unavailable", {"Retry-After": "1"}, b"")
        elif len(seen) > 2:
            respond(sock, "202 Accepted", {}, b"")
        # (the first closed unanswered, by RawServer)

    server = raw(_one_way_server(cut_then_refuse))
    transport = HttpTransportConfig(open_get_stream=False)

    def lost() -> list[str]:
        return [r.getMessage() for r in caplog.records if "one-way message" in r.getMessage()]

    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        deadline = time.monotonic() + TIMEOUT
        while not lost() and time.monotonic() < deadline:
            client.list_tools()  # (the client's loop runs only in its calls)
        assert lost() == ["HTTP: a one-way message was refused: status 503"]
    assert len(seen) == 2


def _refused_once(status: str, retry_after: str, seen: list[str], came: threading.Event) -> Handler:
    """A legacy server that answers the first ``notifications/test`` ``status`` with
    ``Retry-After``, and any later one ``202``; ``seen`` is what it was sent after
    ``notifications/initialized``, ``DELETE`` included."""

    def refuse(sock: socket.socket, message: dict[str, Any]) -> None:
        seen.append("notifications/test")
        came.set()
        if seen.count("notifications/test") == 1:
            respond(sock, status, {"Retry-After": retry_after}, b"")
        else:
            respond(sock, "202 Accepted", {}, b"")

    inner = _one_way_server(refuse)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        if head.startswith(b"DELETE"):
            seen.append("DELETE")
        elif b'"method":"ping"' in body.replace(b" ", b""):
            seen.append("ping")
        inner(sock, head, body)

    return handler


@pytest.mark.parametrize("read", ["in a call", "in the close"])
def test_a_notification_refused_503_holds_up_no_call_nor_the_close(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture, read: str
) -> None:
    """A notification refused ``503`` with ``Retry-After`` waits for it, and nothing
    waits for it: a call that ends returns at once (it waited up to a second for the
    retry), and the close drops it with a warning and returns at once, with no POST
    after its ``DELETE`` (a ``503`` read only in the close was sent again after the
    ``DELETE``, and the close waited for it)."""
    seen: list[str] = []
    came = threading.Event()
    server = raw(_refused_once("503 Service Unavailable", "1", seen, came))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        assert came.wait(TIMEOUT)
        if read == "in a call":
            began = time.monotonic()
            client.ping()  # (reads the 503: the retry waits for its Retry-After)
            assert time.monotonic() - began < 0.5
        began = time.monotonic()
    assert time.monotonic() - began < 0.5
    assert [s for s in seen if s != "ping"] == ["notifications/test", "DELETE"]
    lost = [r.getMessage() for r in caplog.records if "one-way message" in r.getMessage()]
    assert lost == ["HTTP: a one-way message was refused: status 503 (closing)"]


@pytest.mark.parametrize("status", ["429 Too Many Requests", "500 Internal Server Error"])
def test_a_notification_refused_other_than_503_is_not_sent_again(
    raw: Callable[..., RawServer], caplog: pytest.LogCaptureFixture, status: str
) -> None:
    """Only a ``503`` is retried (the server did not run it): a ``429`` or ``500``, even
    with ``Retry-After: 0``, loses the message with a warning after one attempt."""
    seen: list[str] = []
    came = threading.Event()
    server = raw(_refused_once(status, "0", seen, came))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        assert came.wait(TIMEOUT)
        client.ping()  # (reads the refusal; a retry, due at once, would go in it)
        client.ping()
    assert [s for s in seen if s != "ping"] == ["notifications/test", "DELETE"]
    lost = [r.getMessage() for r in caplog.records if "one-way message" in r.getMessage()]
    assert lost == [f"HTTP: a one-way message was refused: status {status[:3]}"]


def test_a_far_retry_after_is_waited_for_a_few_seconds_at_most(
    raw: Callable[..., RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Retry-After: 3600`` is waited for ``RETRY_AFTER_CAP`` seconds at most (made
    short here, so that the test is)."""
    monkeypatch.setattr(mcp_sansio._http_client, "RETRY_AFTER_CAP", 0.3)
    seen: list[float] = []
    came = threading.Event()

    def refuse(sock: socket.socket, message: dict[str, Any]) -> None:
        seen.append(time.monotonic())
        came.set()
        status = "503 Service Unavailable" if len(seen) == 1 else "202 Accepted"
        respond(sock, status, {"Retry-After": "3600"}, b"")

    server = raw(_one_way_server(refuse))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test")
        assert came.wait(TIMEOUT)
        deadline = time.monotonic() + 5.0
        while len(seen) < 2 and time.monotonic() < deadline:
            client.ping()  # (the client's loop runs only in its calls)
    assert len(seen) == 2
    assert 0.25 <= seen[1] - seen[0] < 2.0


def test_one_way_posts_keep_their_order(raw: Callable[..., RawServer]) -> None:
    """A notification the server is slow to take (it holds its answer a while): the one
    written after it reaches the server only once the first is answered, as the Trio
    client's queue sends them (it overtook the first: each went on its own connection at
    once)."""
    came = threading.Event()
    seen: list[str] = []

    def slow_first(sock: socket.socket, message: dict[str, Any]) -> None:
        name = message["params"]["n"]
        seen.append(f"{name} came")
        if name == "first":
            came.wait(0.5)  # (until the second comes: bounded)
            seen.append("first answered")
        else:
            came.set()
        respond(sock, "202 Accepted", {}, b"")

    server = raw(_one_way_server(slow_first))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test", {"n": "first"})
        client.notify("notifications/test", {"n": "second"})
        assert client.list_tools() == []
    assert seen == ["first came", "first answered", "second came"]


def test_a_one_way_post_sent_again_after_a_cut_keeps_its_place(
    raw: Callable[..., RawServer],
) -> None:
    """A notification whose connection broke after it was written is sent again in its
    place: before the one written after it, which was waiting behind it (mutation: the
    copy queued last -> the second overtakes it)."""
    first_out = threading.Event()
    seen: list[str] = []

    def cut_first_once(sock: socket.socket, message: dict[str, Any]) -> None:
        name = message["params"]["n"]
        seen.append(name)
        if seen == ["first"]:
            # Closed unanswered (by RawServer) once the second is queued behind it:
            # the client reads nothing between its calls.
            first_out.wait(TIMEOUT)
            return
        respond(sock, "202 Accepted", {}, b"")

    server = raw(_one_way_server(cut_first_once))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test", {"n": "first"})
        first_out.set()
        client.notify("notifications/test", {"n": "second"})
        assert client.list_tools() == []
    assert seen == ["first", "first", "second"]


def test_one_way_posts_free_to_go_together_still_go_one_at_a_time(
    raw: Callable[..., RawServer],
) -> None:
    """A notification refused ``503`` with ``Retry-After`` waits for it in its place, and
    one written meanwhile waits behind it: when the delay is over, both are free to go
    in the same pass, and the second still waits for the head of the answer to the
    first (mutation: a one-way POST started without holding back those after it in
    the same pass -> both go at once, the second overtaking)."""
    came = threading.Event()
    seen: list[str] = []

    def refuse_first_once(sock: socket.socket, message: dict[str, Any]) -> None:
        name = message["params"]["n"]
        if name == "first" and not seen:
            seen.append("first refused")
            respond(sock, "503 Service Unavailable", {"Retry-After": "1"}, b"")
            return
        seen.append(f"{name} came")
        if name == "first":
            came.wait(0.5)  # (until the second comes: bounded)
            seen.append("first answered")
        else:
            came.set()
        respond(sock, "202 Accepted", {}, b"")

    server = raw(_one_way_server(refuse_first_once))
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era="legacy", transport=transport, timeout=5.0) as client:
        client.notify("notifications/test", {"n": "first"})
        assert client.list_tools() == []
        client.notify("notifications/test", {"n": "second"})
        deadline = time.monotonic() + TIMEOUT
        while "second came" not in seen and time.monotonic() < deadline:
            client.list_tools()  # (the client's loop runs only in its calls)
    assert seen == ["first refused", "first came", "first answered", "second came"]


def test_transport_failures_raise_transport_failed_and_server_errors_do_not(
    raw: Callable[..., RawServer],
) -> None:
    """An error status, a connection closed before the answer: ``TransportFailed`` (an
    ``McpError``), as the Trio client's; the server's own ``-32603`` (even worded as
    ours, even in a ``500``'s body) stays a plain ``McpError``. A gateway's ``502`` or a
    rate limiter's ``429`` whose body is a JSON error of its own (no ``jsonrpc``) is no
    JSON-RPC error: ``TransportFailed``, its message quoted (mutation: the core passing
    it on as it came -> McpError, code 502)."""
    fake = {"code": -32603, "message": "HTTP: not ours", "data": {"httpStatus": 500}}
    not_rpc = {"gateway": (502, "Bad Gateway: upstream reset"), "limiter": (429, "slow down")}

    def misbehave(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body)
        how = message["params"]["name"]
        error = dumps({"jsonrpc": "2.0", "id": message["id"], "error": fake})
        json = {"Content-Type": "application/json"}
        if how == "status":
            respond(sock, "500 Oops", {}, b"")
        elif how == "fake":
            respond(sock, "200 OK", json, error)
        elif how == "fake-in-500":
            respond(sock, "500 Oops", json, error)
        elif how in not_rpc:  # (a JSON error of a gateway's or rate limiter's own)
            status, text = not_rpc[how]
            own = dumps({"error": {"code": status, "message": text}})
            respond(sock, f"{status} No", json, own)
        # ("hang-up": closed unanswered)

    server = raw(discover_then(misbehave))
    with modern(server.url) as client:
        with pytest.raises(TransportFailed) as status:
            client.call_tool("status")
        assert (status.value.code, status.value.data) == (-32603, {"httpStatus": 500})
        with pytest.raises(TransportFailed, match="HTTP: "):
            client.call_tool("hang-up")
        for how, (code, text) in not_rpc.items():
            with pytest.raises(TransportFailed) as own:
                client.call_tool(how)
            assert (own.value.code, own.value.data) == (-32603, {"httpStatus": code})
            assert own.value.message == f"HTTP: status {code}: {text}"
        for how in ("fake", "fake-in-500"):
            with pytest.raises(McpError) as error:
                client.call_tool(how)
            assert type(error.value) is McpError
            assert error.value.message == "HTTP: not ours"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_close_from_another_thread_tells_the_server(
    raw: Callable[..., RawServer], era: str
) -> None:
    """Closed from another thread while a call waits: legacy, the server is told
    (``notifications/cancelled``, before the ``DELETE``), as the Trio client's close
    does, so that it stops the request rather than finish it for nobody; modern, the
    call's connection is closed, which is the cancellation, and nothing is POSTed."""
    came, hung_up = threading.Event(), threading.Event()
    seen: list[str] = []

    def hold(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        seen.append(str(message.get("method")))
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        came.set()
        with suppress(OSError):
            while sock.recv(1024):
                pass
        hung_up.set()

    inner = legacy_server(hold)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        if head.startswith(b"DELETE"):
            seen.append("DELETE")
        elif message.get("method") == "notifications/cancelled":
            seen.append("notifications/cancelled")
        if era == "modern" and b"server/discover" in body:
            respond(sock, "200 OK", {"Content-Type": "application/json"}, modern_answer(body))
            return
        inner(sock, head, body)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(server.url, era=era, transport=transport, timeout=TIMEOUT) as client:

        def close_when_called() -> None:
            assert came.wait(TIMEOUT)
            client.close()

        closer = threading.Thread(target=close_when_called)
        closer.start()
        try:
            with pytest.raises(SessionClosed, match="the client was closed"):
                client.call_tool("slow")
        finally:
            closer.join(TIMEOUT)
    assert hung_up.wait(TIMEOUT)
    if era == "legacy":
        assert seen == ["tools/call", "notifications/cancelled", "DELETE"]
    else:
        assert seen == ["tools/call"]


def test_a_close_sends_the_delete_once_the_cancellation_is_taken(
    raw: Callable[..., RawServer],
) -> None:
    """Legacy: the closing ``DELETE`` waits for the server to take the cancellation the
    close wrote (its answer's head), as the Trio client's close awaits its 202: sent
    on a connection of its own, it could otherwise overtake it, and the cancellation
    find the session gone. For half of ``close_timeout`` at most: here the server holds
    the cancellation's answer until the ``DELETE`` comes, which it does, no sooner."""
    came, deleted = threading.Event(), threading.Event()
    closed_at: list[float] = []
    deleted_at: list[float] = []

    def hold(sock: socket.socket, head: bytes, message: dict[str, Any]) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        came.set()
        with suppress(OSError):
            while sock.recv(1024):
                pass

    inner = legacy_server(hold)

    def handler(sock: socket.socket, head: bytes, body: bytes) -> None:
        message = loads(body) if body else {}
        if head.startswith(b"DELETE"):
            deleted_at.append(time.monotonic())
            deleted.set()
        elif message.get("method") == "notifications/cancelled":
            deleted.wait(TIMEOUT)  # (its answer held until the DELETE comes)
        inner(sock, head, body)

    server = raw(handler)
    transport = HttpTransportConfig(open_get_stream=False)
    with connect(
        server.url, era="legacy", transport=transport, close_timeout=1.0, timeout=TIMEOUT
    ) as client:

        def close_when_called() -> None:
            assert came.wait(TIMEOUT)
            closed_at.append(time.monotonic())
            client.close()

        closer = threading.Thread(target=close_when_called)
        closer.start()
        try:
            with pytest.raises(SessionClosed, match="the client was closed"):
                client.call_tool("slow")
        finally:
            closer.join(TIMEOUT)
    assert deleted.is_set(), "no DELETE"
    # (The client's clock runs no faster than time.monotonic(): half of close_timeout
    # after the close began, at the earliest.)
    assert deleted_at[0] - closed_at[0] >= 0.5

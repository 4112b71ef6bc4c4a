"""The blocking client (``mcp_trio._blocking``) against servers that misbehave.

Each fake server is a small legacy stdio server (``SERVER`` below, run with ``python -c``)
whose ``tools/call`` does what its mode says. Most write what they receive to their
stderr, which goes to a pipe of the test's (:class:`Notes`), so a test can wait for the
server to have received something without sleeping.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mcp_sansio import ConnectionConfig
from mcp_sansio import types as t
from mcp_trio import ServerExited, SessionClosed
from mcp_trio._blocking import BlockingClient
from mcp_trio._blocking_bytes import ByteLink, ProcessTransport

WAIT = 5.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

SERVER = r"""
import json, os, signal, sys, time

mode = sys.argv[1]
if mode.startswith("stubborn"):  # takes its time to stop: SIGKILL only
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
out = sys.stdout.buffer


def line(message):
    return json.dumps(message).encode() + b"\n"


def send(*messages):
    out.write(b"".join(line(message) for message in messages))
    out.flush()


def note(text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def ok(rid):
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "ok"}]}}


def log(data):
    params = {"level": "error", "data": data}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}


calls = 0
for raw in sys.stdin.buffer:
    if not raw.endswith(b"\n"):  # cut off by the end of input (a client stopping mid-write)
        break
    message = json.loads(raw)
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/call":
        calls += 1
        if mode == "ping_and_result":
            send({"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"}, ok(rid))
        elif mode.startswith("big_ping_slow_reader"):
            send({"jsonrpc": "2.0", "id": "x" * 200_000, "method": "ping"}, ok(rid))
            time.sleep(0.2)  # reads its input late: the answer cannot be written at once
            if mode.endswith("_then_log"):
                send(log("late"))  # arrives while close() is still writing the answer
        elif mode == "stubborn_big_ping":  # then stops reading (and ignores SIGTERM)
            send({"jsonrpc": "2.0", "id": "x" * 300_000, "method": "ping"}, ok(rid))
            time.sleep(60)
        elif mode == "big_ping_late_log":  # never answers; logs once the call gave up
            send({"jsonrpc": "2.0", "id": "x" * 200_000, "method": "ping"}, log("first"))
            time.sleep(0.6)  # reads its input late: the answer cannot be written at once
            send(log("late"))  # arrives while the cancellation waits to be written
        elif mode == "two_roots":  # in one write; never answers the call
            send(*({"jsonrpc": "2.0", "id": f"srv-{n}", "method": "roots/list"} for n in (1, 2)))
        elif mode == "logs_then_roots" and calls == 1:
            roots = {"jsonrpc": "2.0", "id": "srv-roots", "method": "roots/list"}
            send(log("first"), log("second"), roots)
        elif mode == "stderr_flood":
            sys.stderr.buffer.write(b"e" * 1_000_000)
            sys.stderr.flush()
            send(ok(rid))
        elif mode == "die_loudly":
            sys.stderr.buffer.write(b"e" * 1_000_000 + b"last words\n")
            sys.stderr.flush()
            os._exit(3)
        elif mode == "flood":
            pings = [{"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"} for i in range(1000)]
            chunk = b"".join(line(ping) for ping in pings)
            while True:  # never reads its input again
                out.write(chunk)
                out.flush()
        elif mode == "unterminated_then_exit":
            out.write(json.dumps(ok(rid)).encode())  # no newline: the output just ends
            out.flush()
            os._exit(0)
        elif mode != "silent":
            send(ok(rid))
    elif method == "notifications/initialized" and mode == "chatty":
        send(*(log("y" * 2_000) for _ in range(100)))  # blocks until the client reads
    elif method is None:
        ident = str(rid)
        kind = "error " if "error" in message else "answer "
        note(kind + (ident if len(ident) < 64 else f"<{len(ident)} chars>"))
    else:
        note(method)
if mode == "stubborn":
    time.sleep(60)
"""


def spawn(mode: str, **options: Any) -> BlockingClient:
    options.setdefault("timeout", WAIT)
    options.setdefault("handshake_timeout", WAIT)
    options.setdefault("stop_timeout", 1.0)
    return BlockingClient.stdio([sys.executable, "-c", SERVER, mode], era="legacy", **options)


class Notes:
    """The lines a fake server writes to its stderr (pass ``stderr=notes.fd``)."""

    def __init__(self) -> None:
        self._read_fd, self.fd = os.pipe()
        self._partial = b""
        self.lines: list[str] = []

    def wait_for(self, expected: str) -> None:
        deadline = time.monotonic() + WAIT
        with selectors.DefaultSelector() as selector:
            selector.register(self._read_fd, selectors.EVENT_READ)
            while expected not in self.lines:
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"{expected!r} not among {self.lines}"
                if not selector.select(remaining):
                    continue
                chunk = os.read(self._read_fd, 65_536)
                assert chunk, f"the server's stderr ended; {expected!r} not among {self.lines}"
                *complete, self._partial = (self._partial + chunk).split(b"\n")
                self.lines += [text.decode() for text in complete]

    def close(self) -> None:
        os.close(self._read_fd)
        os.close(self.fd)


@pytest.fixture
def notes() -> Iterator[Notes]:
    opened = Notes()
    try:
        yield opened
    finally:
        opened.close()


# ---------------------------------------------------------------------- queued output


def test_answers_queued_with_the_result_are_written_at_once(notes: Notes) -> None:
    with spawn("ping_and_result", stderr=notes.fd) as client:
        assert client.call_tool("x").text == "ok"
        notes.wait_for("answer srv-ping")  # while the client is idle


def test_a_timed_out_request_is_cancelled_on_the_wire_at_once(notes: Notes) -> None:
    with spawn("silent", stderr=notes.fd) as client:
        with pytest.raises(TimeoutError):
            client.call_tool("x", timeout=0.2)
        notes.wait_for("notifications/cancelled")


def test_the_handshake_writes_the_initialized_notification(notes: Notes) -> None:
    with spawn("silent", stderr=notes.fd):
        notes.wait_for("notifications/initialized")


def test_close_writes_what_is_left(notes: Notes) -> None:
    client = spawn("big_ping_slow_reader", stderr=notes.fd)
    try:
        assert client.call_tool("x").text == "ok"  # 200 kB answer: more than a pipe holds
    finally:
        client.close()
    notes.wait_for("answer <200000 chars>")


def test_close_writes_what_is_left_past_a_failing_callback(
    notes: Notes, caplog: pytest.LogCaptureFixture
) -> None:
    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        raise RuntimeError(params.data)

    client = spawn("big_ping_slow_reader_then_log", stderr=notes.fd, on_log=on_log)
    try:
        assert client.call_tool("x").text == "ok"
    finally:
        client.close()  # the log arrives meanwhile: its failure is logged, not raised
    notes.wait_for("answer <200000 chars>")
    assert "a callback failed while closing" in caplog.text and "late" in caplog.text


# ---------------------------------------------------------------------- callbacks


def test_a_failing_callback_does_not_drop_the_rest_of_the_read(
    notes: Notes, caplog: pytest.LogCaptureFixture
) -> None:
    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        raise RuntimeError(params.data)

    options: dict[str, Any] = {"on_log": on_log, "roots": ["file:///r"], "stderr": notes.fd}
    with spawn("logs_then_roots", **options) as client:
        with pytest.raises(RuntimeError, match="first"):  # the first failure is raised
            client.call_tool("x")
        notes.wait_for("answer srv-roots")  # the request after the failures was answered
        assert "a callback failed after another one had" in caplog.text
        assert "second" in caplog.text
        assert client.call_tool("y").text == "ok"


@pytest.mark.parametrize("late", [RuntimeError, TimeoutError, SessionClosed, KeyboardInterrupt])
def test_a_callback_failing_while_a_call_is_given_up(
    notes: Notes, caplog: pytest.LogCaptureFixture, late: type[BaseException]
) -> None:
    """A callback fails (the call is given up) while a large answer to the server waits
    to be written; the server's next log arrives while the cancellation waits behind
    it. That callback's exception is logged and the cancellation still written (a
    ``TimeoutError`` or ``SessionClosed`` of the callback's too: not taken for the
    cancellation's own); Ctrl-C is raised."""

    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        raise (ValueError if params.data == "first" else late)(params.data)

    with spawn("big_ping_late_log", stderr=notes.fd, on_log=on_log) as client:
        with pytest.raises(ValueError if late is not KeyboardInterrupt else late) as caught:
            client.call_tool("x")
        if late is not KeyboardInterrupt:
            assert str(caught.value) == "first"
            assert "a callback failed while request" in caplog.text and "late" in caplog.text
            notes.wait_for("notifications/cancelled")  # before close(): by the call
        else:
            assert isinstance(caught.value.__context__, ValueError)


def test_ctrl_c_in_a_callback_logs_an_earlier_callback_failure(
    notes: Notes, caplog: pytest.LogCaptureFixture
) -> None:
    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        raise (RuntimeError if params.data == "first" else KeyboardInterrupt)(params.data)

    options: dict[str, Any] = {"on_log": on_log, "roots": ["file:///r"], "stderr": notes.fd}
    with spawn("logs_then_roots", **options) as client:
        with pytest.raises(KeyboardInterrupt, match="second"):
            client.call_tool("x")
        assert "a callback failed before the call was interrupted" in caplog.text
        assert "first" in caplog.text


def test_ctrl_c_in_a_callback_still_answers_the_server(notes: Notes) -> None:
    """Two roots requests in one read; the roots callback gets Ctrl-C: both requests
    are answered (with an error; the second without a callback) and the call raises."""
    asked: list[int] = []

    def roots() -> list[str]:
        asked.append(1)
        raise KeyboardInterrupt

    with spawn("two_roots", stderr=notes.fd, roots=roots) as client:
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("x")
        notes.wait_for("error srv-1")
        notes.wait_for("error srv-2")
        assert asked == [1]


@contextmanager
def server_process(client: BlockingClient) -> Iterator[subprocess.Popen[bytes]]:
    """The server ``client`` spawned, killed after the block if it still runs."""
    link = client._link
    assert isinstance(link, ByteLink) and isinstance(link.transport, ProcessTransport)
    process = link.transport.process
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@contextmanager
def ctrl_c_on_alarm() -> Iterator[None]:
    """In the block, ``SIGALRM`` raises ``KeyboardInterrupt`` as Ctrl-C would (arm it
    with ``signal.setitimer``); after it, the timer is off and the handler restored."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_ctrl_c_while_closing_does_not_leave_the_server_running() -> None:
    """A server that ignores its input's end and SIGTERM; Ctrl-C while ``close()``
    waits for it: the server is killed, not left running, and Ctrl-C is raised."""
    client = spawn("stubborn", stop_timeout=WAIT)
    with server_process(client) as process, ctrl_c_on_alarm():
        assert client.call_tool("x").text == "ok"
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            client.close()
        signal.setitimer(signal.ITIMER_REAL, 0)
        assert process.wait(WAIT) == -signal.SIGKILL


def test_ctrl_c_while_closing_writes_kills_the_server_at_once() -> None:
    """Ctrl-C during ``close()``'s last writes (an answer the server does not read):
    the server is killed at once, not stopped gracefully (``stop_timeout`` twice)."""
    client = spawn("stubborn_big_ping", stop_timeout=WAIT, stderr=subprocess.DEVNULL)
    with server_process(client) as process, ctrl_c_on_alarm():
        assert client.call_tool("x").text == "ok"
        assert client._link.unwritten()  # (the 300 kB answer to its ping)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.close()
        assert time.monotonic() - started < WAIT  # (not 2 x stop_timeout)
        assert process.wait(WAIT) == -signal.SIGKILL


def test_system_exit_while_closing_stops_the_server_gracefully() -> None:
    """``sys.exit()`` in a callback during ``close()``'s last writes is not Ctrl-C: the
    server still gets its input's end (and exits by itself), not SIGKILL."""

    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        raise SystemExit(params.data)

    client = spawn("big_ping_slow_reader_then_log", on_log=on_log, stop_timeout=WAIT)
    with server_process(client) as process:
        assert client.call_tool("x").text == "ok"
        with pytest.raises(SystemExit, match="late"):
            client.close()
        assert process.wait(WAIT) == 0


# ---------------------------------------------------------------------- stderr=PIPE


def test_a_piped_stderr_is_read_and_closed() -> None:
    with spawn("stderr_flood", stderr=subprocess.PIPE) as client:
        assert client.call_tool("x").text == "ok"  # 1 MB of stderr does not block it
        assert isinstance(client._link, ByteLink)
        transport = client._link.transport
        assert isinstance(transport, ProcessTransport)
        stderr = transport.process.stderr
        assert stderr is not None and not stderr.closed
    assert stderr.closed


def test_server_exited_carries_the_tail_of_a_piped_stderr() -> None:
    with (
        spawn("die_loudly", stderr=subprocess.PIPE) as client,
        pytest.raises(ServerExited) as info,
    ):
        client.call_tool("x")
    assert info.value.returncode == 3
    tail = info.value.stderr_tail
    assert len(tail) == 65_536
    assert tail.endswith(b"eeelast words\n")  # the last bytes, not the first
    assert "last words" in str(info.value)


# ---------------------------------------------------------------------- limits


def test_descriptors_past_fd_setsize() -> None:
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2_048 if hard == resource.RLIM_INFINITY else min(2_048, hard)
    if wanted < 1_200:
        pytest.skip("cannot open more than 1024 files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held: list[int] = []
    try:
        held += (os.open(os.devnull, os.O_RDONLY) for _ in range(1_100))
        with spawn("ping_and_result", stderr=subprocess.DEVNULL) as client:
            assert isinstance(client._link, ByteLink)
            transport = client._link.transport
            assert min(transport.read_fd(), transport.write_fd()) >= 1_024
            assert client.call_tool("x").text == "ok"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_outbox_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server floods pings and never reads: we stop reading at the bound, so its own
    writes block, and ``write_timeout`` ends the session."""
    size = 4_096
    client = spawn(
        "flood",
        stderr=subprocess.DEVNULL,
        connection_config=ConnectionConfig(max_message_size=size),
        write_timeout=0.5,
        stop_timeout=0.2,
    )
    peak = 0
    link = client._link
    assert isinstance(link, ByteLink)
    wait = link.wait

    def watched(timeout: float) -> None:
        nonlocal peak
        wait(timeout)  # (a read, its events handled)
        peak = max(peak, len(link.outbox))

    monkeypatch.setattr(link, "wait", watched)
    with client, pytest.raises(ServerExited, match="stopped reading"):
        client.call_tool("x")
    limit = 4 * size  # _OUTBOX_MESSAGES maximum-size messages
    assert limit <= peak < limit + 65_536  # passed only by what one read brings


def test_our_own_large_request_does_not_stop_reading() -> None:
    """The bound counts replies only: while a request far above it is written, we read,
    so a server that writes before it reads again cannot deadlock us."""
    with spawn(
        "chatty",
        stderr=subprocess.DEVNULL,
        connection_config=ConnectionConfig(max_message_size=4_096),
        write_timeout=WAIT,
    ) as client:
        assert client.call_tool("x", {"blob": "x" * 200_000}).text == "ok"


def test_an_unterminated_last_answer_is_an_answer() -> None:
    # A server that writes its answer without a final newline and exits: the line is
    # a message all the same (the core's receive_bytes_eof), not a lost answer.
    with spawn("unterminated_then_exit") as client:
        assert client.call_tool("t").text == "ok"
        with pytest.raises(ServerExited):
            client.call_tool("t")

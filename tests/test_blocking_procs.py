from __future__ import annotations

import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal

import pytest

from mcp_sansio import ProgressReceived
from mcp_trio import ServerExited, SessionClosed
from mcp_trio._blocking import BlockingClient

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "tests" / "trio" / "stdio_procs_app.py")
BLOCKING_APP = [sys.executable, "-m", "tests.blocking_server_app", "stdio"]
TIMEOUT = 15.0

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_a_server_that_dies_while_a_helper_holds_its_stdout_is_noticed(
    pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this system")
    client = BlockingClient.stdio(
        [sys.executable, APP, "helper"], stderr=subprocess.PIPE, stop_timeout=0.5, era="legacy"
    )
    transport = client._link.transport  # type: ignore[attr-defined]  # (to find the helper)
    try:
        with client:
            start = time.monotonic()
            # Its stdout never ends while the helper lives: only its exit says it is gone.
            with pytest.raises(ServerExited) as info:
                client.call_tool("crash", timeout=TIMEOUT)
            assert time.monotonic() - start < TIMEOUT / 2
            assert info.value.returncode == 3
            assert info.value.reason == "the server exited"
    finally:
        found = re.search(rb"helper pid (\d+)", bytes(transport._tail))
        if found is not None:
            with suppress(ProcessLookupError):
                os.kill(int(found[1]), signal.SIGKILL)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the server with a pidfd")
def test_a_server_behind_a_wrapper_is_stopped_at_close_too() -> None:
    # The server of mode ``linger`` through a shell that does not exec it: the shell's
    # child, not ours, and it stays after its stdin ends.
    wrapped = ["sh", "-c", '"$0" "$1" linger; true', sys.executable, APP]
    with BlockingClient.stdio(wrapped, stop_timeout=0.5, era="legacy") as client:
        server = int(client.call_tool("pid", timeout=TIMEOUT).text)
        pidfd = os.pidfd_open(server)
    try:
        # (Signalled alone, the shell exited and the server went on, orphaned.)
        assert select.select([pidfd], [], [], 5)[0] == [pidfd]  # it exited
    finally:
        with suppress(ProcessLookupError):
            os.kill(server, signal.SIGKILL)
        os.close(pidfd)


def _in_another_thread(call: Callable[[], object], within: float = TIMEOUT) -> BaseException | None:
    """Run ``call`` in a new thread, wait for it (``within`` s at most: it must be done
    by then); what it raised (``None``: nothing)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # (reported to the test)
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(within)
    assert not thread.is_alive()
    return raised[0] if raised else None


def test_a_call_from_a_second_thread_meanwhile_is_a_clear_error() -> None:
    # (Before: BufferError from the outbox, duplicate request ids on the wire.)
    failures: list[BaseException | None] = []
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT) as client:

        def on_progress(event: ProgressReceived) -> None:  # (inside the call, its thread)
            failures.append(_in_another_thread(lambda: client.call_tool("echo", {"text": "x"})))
            failures.append(_in_another_thread(lambda: client.notify("notifications/x")))

        result = client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert result.text == "done"
        assert len(failures) == 2
        for failure in failures:
            assert isinstance(failure, RuntimeError)
            assert str(failure).startswith("BlockingClient used by two threads at once")
        # Free again once the call is over: any thread may make the next one.
        assert _in_another_thread(lambda: client.call_tool("echo", {"text": "y"})) is None
        assert client.call_tool("echo", {"text": "z"}).text == "z"


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watches the helper with a pidfd")
def test_a_helper_left_by_a_server_that_exits_at_the_end_of_its_input_is_stopped() -> None:
    # The server exits cleanly when its stdin ends, before any signal: its helper, in
    # its process group, is signalled once it is reaped. (Before: it ran on.)
    client = BlockingClient.stdio(
        [sys.executable, APP, "helper"], stderr=subprocess.PIPE, stop_timeout=0.5, era="legacy"
    )
    transport = client._link.transport  # type: ignore[attr-defined]  # (to find the helper)
    with client:
        client.call_tool("pid", timeout=TIMEOUT)
        found = re.search(rb"helper pid (\d+)", bytes(transport._tail))
        assert found is not None
        helper = int(found[1])
        pidfd = os.pidfd_open(helper)
    try:
        assert transport.process.returncode == 0  # (it exited by itself)
        assert select.select([pidfd], [], [], 5)[0] == [pidfd]  # the helper exited
    finally:
        with suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
        os.close(pidfd)


def _closed_by(client: BlockingClient) -> list[int]:
    """The threads that close ``client``'s link (filled as it happens)."""
    closers: list[int] = []
    link: Any = client._link  # (its close on the instance, for this client only)
    real = link.close

    def close(*, urgent: bool = False) -> None:
        closers.append(threading.get_ident())
        real(urgent=urgent)

    link.close = close
    return closers


def test_close_from_another_thread_still_ends_a_waiting_call() -> None:
    # The progress and the result may come in one read: the result is handled after the
    # close was asked for, and the call must not return it (it did, now and then).
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, stop_timeout=0.5) as client:
        closers = _closed_by(client)

        def on_progress(event: ProgressReceived) -> None:
            assert _in_another_thread(client.close) is None
            assert closers == []  # (only asked: the call's own thread closes it)

        with pytest.raises(SessionClosed, match="the client was closed"):
            client.call_tool("slow", {"steps": 2, "delay": 0}, on_progress=on_progress)
        # Closed by the thread that used the connection, not under its feet.
        assert closers == [threading.get_ident()]


def test_close_from_another_thread_wakes_a_call_waiting_for_the_server() -> None:
    # The server reports progress, then sleeps for longer than the test waits: only the
    # wake-up of the call's wait can end it in time.
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, stop_timeout=0.5) as client:
        closers = _closed_by(client)
        link: Any = client._link
        real = link._select
        progressed = threading.Event()
        waiting = threading.Event()  # (the call waits again after the progress)

        def select(*args: Any) -> Any:
            if progressed.is_set():
                waiting.set()
            return real(*args)

        link._select = select

        def close_when_waiting() -> None:
            assert waiting.wait(TIMEOUT)
            client.close()

        closer = threading.Thread(target=close_when_waiting)
        closer.start()
        start = time.monotonic()
        try:
            with pytest.raises(SessionClosed, match="the client was closed"):
                client.call_tool(
                    "slow",
                    {"steps": 1, "delay": 4 * TIMEOUT},
                    on_progress=lambda event: progressed.set(),
                    timeout=4 * TIMEOUT,
                )
        finally:
            closer.join(TIMEOUT)
        assert not closer.is_alive()
        assert time.monotonic() - start < TIMEOUT / 2
        assert closers == [threading.get_ident()]


def test_a_close_asked_as_the_call_ends_is_done_by_the_calls_thread() -> None:
    # The call may end before it sees the request (between its last look and its
    # return): the client is closed then, as the call's thread leaves it.
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, stop_timeout=0.5) as client:
        closers = _closed_by(client)
        with client._in_use():  # (as a call does, around everything it does)
            assert _in_another_thread(client.close) is None
            assert closers == []
        assert closers == [threading.get_ident()]
        with pytest.raises(SessionClosed, match="the client was closed"):
            client.call_tool("echo", {"text": "x"})


def test_a_close_asked_just_before_the_call_lets_go_is_not_lost() -> None:
    # The narrowest window: the call has looked for a request (none) and is about to
    # free the connection when another thread's close() lands (it sees the call still
    # running, so leaves the close to it, and returns). The close was lost: the client
    # stayed open, its wake-up byte unread, so every later wait woke at once. The
    # window is made deterministic: the other thread closes right before the call's
    # thread takes the state lock to let go.
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, stop_timeout=0.5) as client:
        closers = _closed_by(client)
        me = threading.get_ident()
        real = client._state
        armed = False

        class Lock:  # (client._state, with the other thread's close() let in first)
            def __enter__(self) -> bool:
                nonlocal armed
                if armed and threading.get_ident() == me:
                    armed = False
                    assert _in_another_thread(client.close) is None
                    assert client._close_asked
                    assert closers == []  # (only asked: the call's own thread closes it)
                return real.__enter__()

            def __exit__(self, *exc: Any) -> None:
                real.__exit__(*exc)

        client._state = Lock()  # type: ignore[assignment]
        with client._in_use():  # (as a call does, around everything it does)
            armed = True  # (the next take of the lock by this thread: letting go)
        assert not armed
        assert closers == [me]
        assert client._user is None
        with pytest.raises(SessionClosed, match="the client was closed"):
            client.call_tool("echo", {"text": "x"})


"""The blocking client and the processes around its stdio server.

The servers are ``tests/trio/stdio_procs_app.py`` (see its modes) and
``tests/blocking_server_app.py``; every wait is bounded.
"""


def _written(client: BlockingClient) -> bytearray:
    """Everything ``client`` writes to its server from now on."""
    written = bytearray()
    transport: Any = client._link.transport  # type: ignore[attr-defined]
    real = transport.write

    def write(data: memoryview) -> int:
        sent: int = real(data)
        written.extend(data[:sent])
        return sent

    transport.write = write
    return written


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_what_a_second_thread_would_change_or_send_meanwhile_is_refused_untouched(
    era: Literal["legacy", "modern"],
) -> None:
    # notify, subscribe (legacy: even one that sends nothing) and set_roots from another
    # thread during a call: refused before anything is queued or changed.
    failures: list[BaseException | None] = []

    def subscribe(client: BlockingClient) -> None:
        with client.subscribe(tools=True):
            pass

    with BlockingClient.stdio(
        BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, era=era, roots=["file:///a"]
    ) as client:
        written = _written(client)
        roots = client._options.roots

        def on_progress(event: ProgressReceived) -> None:
            failures.append(_in_another_thread(lambda: client.notify("notifications/x")))
            failures.append(_in_another_thread(lambda: subscribe(client)))
            failures.append(_in_another_thread(lambda: client.set_roots(["file:///b"])))

        result = client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert result.text == "done"
        assert client.call_tool("echo", {"text": "after"}).text == "after"  # (all written)
        assert len(failures) == 3
        for failure in failures:
            assert isinstance(failure, RuntimeError)
            assert str(failure).startswith("BlockingClient used by two threads at once")
        assert client._options.roots is roots
        assert not client._subscriptions and not client._listens
    assert b'"after"' in written
    for never in (b"notifications/x", b"subscriptions/listen", b"roots/list_changed"):
        assert never not in written


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_subscribe_block_left_in_another_thread_meanwhile_is_refused_at_once(
    era: Literal["legacy", "modern"], caplog: pytest.LogCaptureFixture
) -> None:
    # Leaving the block sends (modern: the listen's cancellation; legacy: the last
    # resources/unsubscribe) and changes what the loop reads: from another thread during
    # a call it is refused, before anything is sent or changed. (Before: modern, the
    # cancellation was queued under the call's feet, then the courtesy write was
    # refused, logged and tried again until the call ended, ~70,000 records a second;
    # legacy, the counts were taken down and no resources/unsubscribe was ever sent.)
    caplog.set_level(logging.DEBUG, logger="mcp_trio")
    failures: list[BaseException | None] = []
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, era=era) as client:
        block = client.subscribe(tools=True, resources=["file:///a"])
        updates = block.__enter__()
        listens, refs = dict(client._listens), dict(client._uri_refs)
        assert listens or refs  # (a listen, or a resources/subscribe, to leave)
        written = _written(client)

        def on_progress(event: ProgressReceived) -> None:
            left = _in_another_thread(lambda: block.__exit__(None, None, None), within=5.0)
            failures.append(left)

        before = len(caplog.records)
        result = client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert result.text == "done"
        assert [record.getMessage() for record in caplog.records[before:]] == []
        assert len(failures) == 1
        assert isinstance(failures[0], RuntimeError)
        assert str(failures[0]).startswith("BlockingClient used by two threads at once")
        # The block is gone for its reader; the connection is as it was.
        assert updates.ended
        assert updates.receive(timeout=0) is None
        assert client._listens == listens and client._uri_refs == refs
        assert client.call_tool("echo", {"text": "after"}).text == "after"
        for never in (b"notifications/cancelled", b"resources/unsubscribe"):
            assert never not in written
    if era == "modern":  # (the listen left open ends with the session: cancelled at close)
        assert b"the client is closing" in written


def test_the_courtesy_cancellation_from_another_thread_is_refused_at_once() -> None:
    # _abandon cancels on the wire, then writes for a second, logging and retrying a
    # failure of the write (a callback's): from another thread it is refused before
    # anything is queued. (Before: it queued the cancellation unguarded, and its retry
    # took the refusal of every write for a callback's failure, until the call ended.)
    failures: list[BaseException | None] = []
    with BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT) as client:
        written = _written(client)

        def on_progress(event: ProgressReceived) -> None:
            running = event.request_id  # (its result may be read already: kept either way)
            failures.append(_in_another_thread(lambda: client._abandon(running), within=5.0))

        result = client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert result.text == "done"  # (not cancelled)
        assert len(failures) == 1
        assert isinstance(failures[0], RuntimeError)
        assert str(failures[0]).startswith("BlockingClient used by two threads at once")
        assert b"notifications/cancelled" not in written


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_what_a_second_thread_would_change_without_sending_is_refused_untouched(
    era: Literal["legacy", "modern"],
) -> None:
    # Calls that may send nothing: set_logging_level (modern: only the level later
    # requests carry), subscribe_resource of a URI a block holds already and
    # unsubscribe_resource of one a block still needs (legacy). From another thread
    # during a call they are refused, nothing changed. (Before: they returned, having
    # changed it.)
    failures: list[BaseException | None] = []
    with (
        BlockingClient.stdio(BLOCKING_APP, cwd=ROOT, timeout=TIMEOUT, era=era) as client,
        client.subscribe(resources=["file:///a", "file:///b"]),
    ):
        calls: list[Callable[[], object]] = [lambda: client.set_logging_level("debug")]
        if era == "legacy":
            client.subscribe_resource("file:///b")  # (held twice: by the block, by this)
            calls.append(lambda: client.subscribe_resource("file:///a"))
            calls.append(lambda: client.unsubscribe_resource("file:///b"))
        state = (dict(client._uri_refs), set(client._uri_explicit), client._log_level)

        def on_progress(event: ProgressReceived) -> None:
            failures.extend(_in_another_thread(call) for call in calls)

        client.call_tool("slow", {"steps": 1, "delay": 0}, on_progress=on_progress)
        assert (client._uri_refs, client._uri_explicit, client._log_level) == state
        assert len(failures) == len(calls)
        for failure in failures:
            assert isinstance(failure, RuntimeError)
            assert str(failure).startswith("BlockingClient used by two threads at once")

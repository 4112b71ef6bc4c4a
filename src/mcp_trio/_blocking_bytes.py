"""Byte links of :class:`~mcp_trio.BlockingClient`: a subprocess's pipes (stdio) or a TCP
socket, newline-delimited JSON, driven with ``selectors``; no I/O loop of its own.

Theory of operation
-------------------
The client's loop asks a :class:`ByteLink` when its own timer is due
(:meth:`~ByteLink.next_deadline`: ``write_timeout``) and has it wait
(:meth:`~ByteLink.wait`): on a selector (not ``select()``, which fails on descriptors
past ``FD_SETSIZE``) for reading, for writing while the outbox holds bytes, and for a
piped stderr. Readable input goes to the core's ``receive_bytes`` and the events to the
client. Reading while writing means a server that writes a lot while we write a lot
cannot deadlock us.

Memory is bounded: what handling the server's messages queues (answers, cancellations)
may exceed ``_OUTBOX_MESSAGES`` maximum-size messages only by what one read produces;
above that we stop reading until it drains, so a server that floods us with requests
without reading its input blocks on its own output, and ``write_timeout`` then ends the
session. Our own requests do not count (``_own`` marks where they lie in the outbox):
however large one is, we keep reading while we write it. A piped stderr is read in the
same loop and only its last ``_STDERR_TAIL_SIZE`` bytes are kept, for
:class:`~mcp_trio.ServerExited`.

A spawned server's exit is watched too (a pidfd in the same selector where the system
has one, else a look at the process on every pass, at least every ``_EXIT_POLL_EVERY``
seconds): ``_EXIT_GRACE`` after it, the session ends with ``ServerExited`` even if the
end of its output never comes -- a process it started (a helper, a daemon) may hold its
stdout open for ever.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import time
from collections import deque
from contextlib import suppress
from typing import IO, TYPE_CHECKING, Final, Protocol, final

from ._errors_base import ServerExited, SessionClosed
from ._process_group import signal_group, stop_group

if TYPE_CHECKING:
    from ._blocking import Hooks

__all__ = ["ByteLink", "ByteTransport", "ProcessTransport", "SocketTransport"]

_READ_SIZE: Final = 65_536
_OUTBOX_MESSAGES: Final = 4
"""Reading stops while the outbox holds this many ``max_message_size`` messages' worth of
output queued in reply to the server (not counting our own requests)."""
_STDERR_TAIL_SIZE: Final = 65_536
"""Bytes of a piped stderr kept for :class:`ServerExited` (as the Trio client's default)."""
_EXIT_POLL: Final = 0.05
"""Seconds between looks at a process that may have exited while its stderr stays open."""
_EXIT_GRACE: Final = 1.0
"""Seconds after the server's exit for the rest of its output (as the Trio client's
``exit_status_timeout``), before the session ends without it."""
_EXIT_POLL_EVERY: Final = 0.25
"""Without a pidfd: the longest wait between looks at whether the server exited."""


class ByteTransport(Protocol):
    """A byte pipe with file descriptors to wait on, non-blocking."""

    def read_fd(self) -> int: ...
    def write_fd(self) -> int: ...
    def side_fd(self) -> int | None:
        """A descriptor to read whenever it is readable (a piped stderr), or ``None``."""
        ...

    def exit_fd(self) -> int | None:
        """A descriptor readable once the server process has exited (a pidfd), or
        ``None`` (none: see :meth:`exited`)."""
        ...

    def exited(self) -> bool | None:
        """Whether the server process has exited; ``None``: there is no process."""
        ...

    def read(self) -> bytes | None:
        """Bytes available: ``b""`` at the end of input, ``None`` if none after all."""
        ...

    def read_side(self) -> None:
        """Read what :meth:`side_fd` has (it is readable)."""
        ...

    def write(self, data: memoryview) -> int:
        """Write some of ``data`` without blocking; return how much (``0``: it would
        block). Raises ``OSError`` if broken."""
        ...

    def failure(self, what: str) -> SessionClosed:
        """Why the input ended or a write failed, for the waiting callers."""
        ...

    def close(self, *, urgent: bool = False) -> None:
        """Release it; ``urgent``: a spawned server killed at once."""
        ...


def _wait_readable(fd: int, timeout: float) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout))


@final
class ProcessTransport:
    def __init__(self, process: subprocess.Popen[bytes], stop_timeout: float) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin: IO[bytes] = process.stdin
        self._stdout: IO[bytes] = process.stdout
        self._stderr: IO[bytes] | None = process.stderr  # stderr=subprocess.PIPE
        self._stderr_ended = False
        self._tail = bytearray()
        self._stop_timeout = stop_timeout
        self._pidfd: IO[bytes] | None = None  # (a file: closed if the client is dropped)
        if hasattr(os, "pidfd_open"):  # (Linux 5.3 and later)
            with suppress(OSError):  # (ENOSYS, EPERM under some sandboxes: poll instead)
                self._pidfd = os.fdopen(os.pidfd_open(process.pid), "rb", buffering=0)
        for stream in (self._stdin, self._stdout, self._stderr):
            if stream is not None:
                os.set_blocking(stream.fileno(), False)

    def read_fd(self) -> int:
        return self._stdout.fileno()

    def write_fd(self) -> int:
        return self._stdin.fileno()

    def side_fd(self) -> int | None:
        if self._stderr is None or self._stderr_ended:
            return None
        return self._stderr.fileno()

    def exit_fd(self) -> int | None:
        return None if self._pidfd is None else self._pidfd.fileno()

    def exited(self) -> bool | None:
        return self.process.poll() is not None

    def read(self) -> bytes | None:
        try:
            return os.read(self._stdout.fileno(), _READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return None

    def read_side(self) -> None:
        """Keep the last ``_STDERR_TAIL_SIZE`` bytes of the server's stderr."""
        assert self._stderr is not None
        try:
            chunk = os.read(self._stderr.fileno(), _READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return
        except OSError:  # pragma: no cover - a pipe's read end does not fail
            chunk = b""
        if not chunk:
            self._stderr_ended = True  # closed in close(): the selector may still hold it
            return
        self._tail += chunk
        del self._tail[: max(0, len(self._tail) - _STDERR_TAIL_SIZE)]

    def write(self, data: memoryview) -> int:
        try:
            return os.write(self._stdin.fileno(), data)
        except BlockingIOError:
            return 0

    def failure(self, what: str) -> SessionClosed:
        self._wait(self._stop_timeout)
        code = self.process.returncode
        reason = what if code is None else "the server exited"
        return ServerExited(reason, code, bytes(self._tail))

    def _wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the process to exit, reading its stderr meanwhile
        (a server blocked on a full stderr pipe could not exit); whether it has."""
        deadline = time.monotonic() + timeout
        while (fd := self.side_fd()) is not None:
            remaining = deadline - time.monotonic()
            if _wait_readable(fd, min(_EXIT_POLL, max(0.0, remaining))):
                self.read_side()
                if remaining > 0:
                    continue
            if remaining <= 0 or self.process.poll() is not None:
                break
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(max(0.0, deadline - time.monotonic()))
        return self.process.returncode is not None

    def _stop_group(self, *, urgent: bool) -> None:
        """The server is reaped: what is left of its process group gets SIGTERM, then
        SIGKILL ``stop_timeout`` later if any remains (``urgent``: SIGKILL at once;
        :func:`stop_group`)."""
        pid, grace = self.process.pid, self._stop_timeout
        for pause in stop_group(pid, grace, time.monotonic, urgent=urgent):
            time.sleep(pause)

    def close(self, *, urgent: bool = False) -> None:
        """Close stdin and wait; SIGTERM and wait; SIGKILL (the stdio shutdown; the
        signals to its process group); then the same for what the server left in its
        group (:meth:`_stop_group`). Interrupted meanwhile (Ctrl-C while the server
        takes its time), it kills the server and its group at once rather than leave
        them running, and raises. ``urgent`` (Ctrl-C came before: the caller is on its
        way out): SIGKILL at once."""
        process = self.process
        stops = (signal.SIGKILL,) if urgent else (None, signal.SIGTERM, signal.SIGKILL)
        try:
            with suppress(OSError):
                self._stdin.close()
            for stop in stops:
                if stop is not None and process.poll() is None:
                    signal_group(self.process, stop)
                if self._wait(self._stop_timeout):
                    break
            process.wait()
            self._stop_group(urgent=urgent)
        except BaseException:
            if process.poll() is None:
                signal_group(self.process, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                process.wait(self._stop_timeout)  # (reaped, unless interrupted again)
            if process.returncode is not None:
                with suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
            raise
        finally:
            self._stdout.close()
            if self._stderr is not None:
                self._stderr.close()
            if self._pidfd is not None:
                self._pidfd.close()


@final
class SocketTransport:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)

    def read_fd(self) -> int:
        return self.sock.fileno()

    def write_fd(self) -> int:
        return self.sock.fileno()

    def side_fd(self) -> int | None:
        return None

    def exit_fd(self) -> int | None:
        return None

    def exited(self) -> bool | None:
        return None

    def read(self) -> bytes | None:
        try:
            return self.sock.recv(_READ_SIZE)
        except BlockingIOError:  # pragma: no cover - the selector said readable
            return None
        except ConnectionResetError:
            return b""

    def read_side(self) -> None:  # pragma: no cover - there is no side_fd()
        pass

    def write(self, data: memoryview) -> int:
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0

    def failure(self, what: str) -> SessionClosed:
        return SessionClosed(what.replace("the server", "the peer"))

    def close(self, *, urgent: bool = False) -> None:
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@final
class ByteLink:
    """The client's messages as bytes over a :class:`ByteTransport` (see the module
    docs): an outbox, written as the transport takes it."""

    def __init__(
        self, transport: ByteTransport, *, max_message_size: int, write_timeout: float | None
    ) -> None:
        self.transport: Final = transport
        self.outbox = bytearray()
        self._written = 0  # bytes ever written: the outbox starts at this offset
        self._own: deque[tuple[int, int]] = deque()  # offsets of our requests' bytes
        self._outbox_limit = _OUTBOX_MESSAGES * max_message_size
        self._write_timeout = write_timeout
        self._write_since: float | None = None
        self._selector = selectors.DefaultSelector()
        self._hooks: Hooks | None = None
        self._exit_deadline: float | None = None  # the server exited: the end by then

    def attach(self, hooks: Hooks) -> None:
        self._hooks = hooks

    @property
    def hooks(self) -> Hooks:
        assert self._hooks is not None
        return self._hooks

    def message_bound(self) -> tuple[int, str] | None:
        return None  # (the core's max_message_size only)

    def begin(self) -> None:
        pass

    def queue(self, *, own: bool = False) -> None:
        """Move the core's output to the outbox; ``own``: our requests, not replies."""
        data = self.hooks.conn.bytes_to_send()
        if own and data:
            start = self._written + len(self.outbox)
            self._own.append((start, start + len(data)))
        self.outbox += data

    def unwritten(self) -> bool:
        return bool(self.outbox)

    def _replies_queued(self) -> int:
        """Bytes in the outbox queued in reply to what we read (the rest are ours)."""
        written = self._written
        return len(self.outbox) - sum(end - max(start, written) for start, end in self._own)

    def next_deadline(self) -> float | None:
        """When waiting to write is given up (``write_timeout`` after the last progress),
        or when a server that exited is taken for gone (``_EXIT_GRACE`` after)."""
        limit = self._write_timeout
        gone = self._exit_deadline
        if not self.outbox or limit is None:
            self._write_since = None
            return gone
        if self._write_since is None:
            self._write_since = self.hooks.clock.now()
        written = self._write_since + limit
        return written if gone is None else min(written, gone)

    def handle_timer(self, now: float) -> None:
        """The server exited (its output still held open by another process), or it
        stopped reading for ``write_timeout``: the session ends."""
        if self._exit_deadline is not None and self._exit_deadline <= now:
            self._lost("the server exited")
            return
        self.hooks.conn.send_failed()
        self._lost("the server stopped reading its input (write_timeout)")

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds; move what is ready (the read to the core)."""
        hooks, transport = self.hooks, self.transport
        # Backpressure: above the limit, the server waits for us to read.
        reading = self._replies_queued() < self._outbox_limit
        watching = self._exit_deadline is None
        exit_fd = transport.exit_fd() if watching else None
        polling = watching and exit_fd is None and transport.exited() is not None
        if polling:
            timeout = min(timeout, _EXIT_POLL_EVERY)
        readable, writable, side, ended = self._select(reading, bool(self.outbox), timeout, exit_fd)
        if ended or (polling and transport.exited()):
            self._exit_deadline = hooks.clock.now() + _EXIT_GRACE
        if side:
            transport.read_side()
        if writable:
            self._write()
        if readable and not hooks.failed():
            data = transport.read()
            if data == b"":
                # An unterminated last line is a message too (a server that exits
                # right after writing its answer without a newline).
                try:
                    hooks.handle(hooks.conn.receive_bytes_eof(now=hooks.clock.now()))
                finally:
                    self._lost("the server closed its output")
            elif data is not None:
                hooks.handle(hooks.conn.receive_bytes(data, now=hooks.clock.now()))

    def flush(self, *, within: float | None) -> None:
        """Write what the transport takes now (``within`` is HTTP's); the rest waits for
        the next call (or ``close()``), whose ``write_timeout`` clock starts afresh."""
        while self.outbox and not self.hooks.failed() and self._write():
            pass
        self._write_since = None

    def goodbye(self, now: float) -> None:
        """Nothing to say before closing (the server sees its input end)."""
        return None

    def close(self, *, urgent: bool = False) -> None:
        self._selector.close()
        self.transport.close(urgent=urgent)

    def _select(
        self, reading: bool, writing: bool, timeout: float, exit_fd: int | None
    ) -> tuple[bool, bool, bool, bool]:
        """Wait; whether the input is readable, the output writable, the side readable,
        ``exit_fd`` readable (the server exited)."""
        transport = self.transport
        read_fd, write_fd, side_fd = transport.read_fd(), transport.write_fd(), transport.side_fd()
        wanted: dict[int, int] = {}
        if reading:
            wanted[read_fd] = selectors.EVENT_READ
        if writing:
            wanted[write_fd] = wanted.get(write_fd, 0) | selectors.EVENT_WRITE
        if side_fd is not None:
            wanted[side_fd] = wanted.get(side_fd, 0) | selectors.EVENT_READ
        if exit_fd is not None:
            wanted[exit_fd] = selectors.EVENT_READ
        wake = self.hooks.wake
        if wake is not None:  # (another thread asks the call to end: the client reads it)
            wanted[wake.fileno()] = selectors.EVENT_READ
        selector = self._selector
        for fd in [fd for fd in selector.get_map() if fd not in wanted]:
            selector.unregister(fd)
        registered = selector.get_map()
        for fd, events in wanted.items():
            key = registered.get(fd)
            if key is None:
                selector.register(fd, events)
            elif key.events != events:
                selector.modify(fd, events)
        readable = writable = side = ended = False
        for key, events in selector.select(timeout):
            if key.fd == read_fd and reading and events & selectors.EVENT_READ:
                readable = True
            if key.fd == write_fd and writing and events & selectors.EVENT_WRITE:
                writable = True
            if key.fd == side_fd and events & selectors.EVENT_READ:
                side = True
            if key.fd == exit_fd:
                ended = True
        return readable, writable, side, ended

    def _write(self) -> int:
        """Write some of the outbox; how much (``0``: it would block, or it failed)."""
        try:
            with memoryview(self.outbox) as view:
                sent = self.transport.write(view)
        except OSError:
            self.hooks.conn.send_failed()
            self._lost("the server stopped reading its input")
            return 0
        if sent:
            self._write_since = None
        del self.outbox[:sent]
        self._written += sent
        while self._own and self._own[0][1] <= self._written:
            self._own.popleft()
        return sent

    def _lost(self, what: str) -> None:
        self.outbox.clear()
        self._own.clear()
        self.hooks.fail(self.transport.failure(what))

"""The stdio transport (MCP specification, ``basic/transports.mdx``, section "stdio").

Server: :func:`serve_stdio` reads newline-delimited JSON-RPC from this process's stdin
and writes to its stdout. Nothing else may reach stdout, so while it serves, file
descriptor 1 is pointed at stderr (stray ``print()`` calls and C extensions land
there) and the protocol writes to a private duplicate of the original stdout; fd 0
reads ``/dev/null``, so that a child process a handler starts cannot take the client's
messages (the protocol reads a private duplicate of the original stdin). Logs go to
stderr.

Client: :func:`open_stdio_client` spawns the server, talks to its stdin/stdout, keeps a
bounded tail of its stderr, and shuts it down as the specification describes: close
its stdin, wait; SIGTERM, wait; SIGKILL. If the server dies, every waiting request
fails with :class:`~mcp_trio.ServerExited`, which carries the exit status and the
tail of stderr.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import partial
from typing import ClassVar, final

import trio

from mcp_sansio import ConnectionConfig

from ._channel import Framing, MessageChannel, StreamChannel
from ._config import SessionConfig
from ._errors import ServerExited
from ._handlers import Handlers
from ._open import open_session
from ._process_group import signal_group, stop_group
from ._session import Session
from ._util import (
    SessionHook,
    open_task_nursery,
    plain_interrupt,
    run_hook,
    stdout_fd_to_stderr,
)

__all__ = ["ProcessChannel", "StderrCallback", "open_stdio_client", "serve_stdio"]

StderrCallback = Callable[[bytes], object]
"""``stderr=`` of :func:`~mcp_trio.open_stdio_client` and
:func:`~mcp_trio.open_client`: called with each chunk the server writes to stderr
(e.g. ``sys.stderr.buffer.write``); what it returns is ignored."""


# ---------------------------------------------------------------------- server


def closed_stdio() -> str | None:
    """Which of stdin / stdout (fds 0 and 1) is closed, for an error message; ``None``
    if both are open. A process started with one closed (``<&-``, ``>&-``) hands that
    number to the next file it opens (Trio's own wakeup socket, say), and the protocol
    would use whatever that is: one Python found closed at startup
    (``sys.__stdout__`` is ``None``) counts as closed too."""
    for fd, name, stream in ((0, "stdin", sys.__stdin__), (1, "stdout", sys.__stdout__)):
        try:
            os.fstat(fd)
        except OSError:
            return f"{name} (fd {fd}) is closed"
        if stream is None:
            return f"{name} (fd {fd}) was closed when Python started"
    return None


@contextmanager
def _stdin_from_devnull() -> Iterator[None]:
    """File descriptor 0 reads ``/dev/null`` meanwhile: a child process a handler
    starts inherits fd 0, and reading it would take the client's next message (or fail
    with EAGAIN: FdStream made it non-blocking). ``input()`` sees the end of input."""
    saved = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


@contextmanager
def _claim_stdio() -> Iterator[tuple[int, int]]:
    """Private duplicates of fds 0 and 1; meanwhile fd 0 reads ``/dev/null`` and fd 1
    points at stderr.

    Raises:
        OSError: (``EBADF``) fd 0 or fd 1 is closed.
    """
    closed = closed_stdio()  # (before os.dup, which would take the free number)
    if closed is not None:
        raise OSError(errno.EBADF, f"serve_stdio needs stdin and stdout: {closed}")
    stdin_fd = os.dup(0)
    stdout_fd = os.dup(1)
    try:
        # The server MUST NOT write anything but messages to stdout, and the messages
        # on stdin are the protocol's alone.
        with _stdin_from_devnull(), stdout_fd_to_stderr():
            yield stdin_fd, stdout_fd
    finally:
        # FdStream made the shared file descriptions non-blocking; undo that for
        # whoever uses them after us (a shell, a parent process).
        for fd in (0, 1):
            with suppress(OSError):
                os.set_blocking(fd, True)


@plain_interrupt
async def serve_stdio(
    handlers: Handlers | None = None,
    *,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    handler_nursery: trio.Nursery | None = None,
    on_session: SessionHook | None = None,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
    task_status: trio.TaskStatus[Session] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve one MCP session on stdin/stdout until stdin ends.

    Args:
        handlers: the request and notification handlers.
        config: runtime bounds; ``shutdown_grace_period`` is how long running
            handlers may go on after stdin ends before they are cancelled.
        connection_config: the core's configuration (our capabilities, info, ...).
        handler_nursery: where handler tasks run (default: the session's own).
        on_session: runs beside the session (e.g. to send notifications); cancelled
            when the session closes.
        stdin: read from this stream instead of file descriptor 0 (tests, embedding).
        stdout: write to this stream instead of file descriptor 1.
        task_status: ``nursery.start(serve_stdio, ...)`` returns the session.

    Returns:
        When stdin has ended and every handler has finished or been cancelled.

    Raises:
        ValueError: only one of ``stdin`` / ``stdout`` was given.
        OSError: (``EBADF``) file descriptor 0 or 1 is closed.

    Resource handling:
        Uses ``trio.lowlevel.FdStream`` on duplicates of fds 0 and 1: pipes, sockets,
        terminals or regular files (``< requests.jsonl``). While serving, fd 0 reads
        ``/dev/null`` (a child process a handler starts cannot take the client's
        messages) and fd 1 points at stderr; both are restored, and set blocking
        again, on return.
    """
    config = config if config is not None else SessionConfig()
    serve = partial(
        _serve,
        handlers=handlers,
        config=config,
        connection_config=connection_config,
        handler_nursery=handler_nursery,
        on_session=on_session,
        task_status=task_status,
    )
    if (stdin is None) != (stdout is None):
        raise ValueError("pass both stdin and stdout, or neither")
    if stdin is not None and stdout is not None:
        await serve(StreamChannel(stdout, stdin, read_chunk_size=config.read_chunk_size))
        return
    with _claim_stdio() as (stdin_fd, stdout_fd):
        channel = StreamChannel(
            trio.lowlevel.FdStream(stdout_fd),
            trio.lowlevel.FdStream(stdin_fd),
            read_chunk_size=config.read_chunk_size,
        )
        try:
            await serve(channel)
        finally:
            with trio.CancelScope(shield=True):
                await channel.aclose()


async def _serve(
    channel: MessageChannel,
    *,
    handlers: Handlers | None,
    config: SessionConfig,
    connection_config: ConnectionConfig | None,
    handler_nursery: trio.Nursery | None,
    on_session: SessionHook | None,
    task_status: trio.TaskStatus[Session],
) -> None:
    async with open_session(
        channel,
        "server",
        handlers=handlers,
        config=config,
        connection_config=connection_config,
        handler_nursery=handler_nursery,
    ) as session:
        task_status.started(session)
        await run_hook(session, on_session)


# ---------------------------------------------------------------------- client


@final
class _StderrTail:
    """The last ``size`` bytes of the server's stderr, optionally forwarded."""

    def __init__(self, size: int, forward: StderrCallback | None) -> None:
        self._size = size
        self._forward = forward
        self._buffer = bytearray()
        self.done = trio.Event()

    def bytes(self) -> bytes:
        return bytes(self._buffer)

    async def pump(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            while chunk := await stream.receive_some(65_536):
                self._buffer += chunk
                if len(self._buffer) > self._size:
                    del self._buffer[: len(self._buffer) - self._size]
                if self._forward is not None:
                    self._forward(bytes(chunk))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.done.set()


@final
class ProcessChannel(MessageChannel):
    """NDJSON to a child's stdin/stdout; its end is reported as :class:`ServerExited`.

    The channel of a session opened by :func:`open_stdio_client`
    (``session.channel``): ``process`` is the ``trio.Process``, and
    :meth:`stderr_tail` the last bytes it wrote to stderr.
    """

    framing: ClassVar[Framing] = "ndjson"

    def __init__(self, process: trio.Process, tail: _StderrTail, config: SessionConfig) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stream = StreamChannel(
            process.stdin, process.stdout, read_chunk_size=config.read_chunk_size
        )
        self.process = process
        self._tail = tail
        self._wait = config.exit_status_timeout
        self._gone = False  # exited, its stdout held open by another process (_watch_exit)

    def stderr_tail(self) -> bytes:
        """The last bytes the server wrote to stderr (``stderr_tail_size`` at most)."""
        return self._tail.bytes()

    async def send(self, message: bytes) -> None:
        try:
            await self._stream.send(message)
        except trio.BrokenResourceError:
            raise await self._exited("the server stopped reading its stdin") from None

    def send_nowait(self, message: bytes) -> bool:
        # False on a broken pipe too: send() then raises ServerExited.
        return self._stream.send_nowait(message)

    async def receive(self) -> bytes:
        try:
            return await self._stream.receive()
        except (trio.EndOfChannel, trio.BrokenResourceError):
            raise await self._exited("the server closed its stdout") from None
        except trio.ClosedResourceError:
            if not self._gone:
                raise
            code = self.process.returncode
            raise ServerExited("the server exited", code, self._tail.bytes()) from None

    async def _watch_exit(self) -> None:
        """Runs beside the session: once the server has exited, its last bytes get
        ``exit_status_timeout`` to arrive; then its stdout is closed, which ends the
        session with :class:`ServerExited`. The end of its stdout alone would not
        come while a process it started still holds it (a helper, a daemon)."""
        await self.process.wait()
        await trio.sleep(self._wait)
        self._gone = True
        assert self.process.stdout is not None
        await self.process.stdout.aclose()  # (a waiting read: ClosedResourceError)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def _exited(self, what: str) -> ServerExited:
        with trio.move_on_after(self._wait):
            await self.process.wait()
            await self._tail.done.wait()
        code = self.process.returncode
        reason = what if code is None else "the server exited"
        return ServerExited(reason, code, self._tail.bytes())


async def _stop_group(process: trio.Process, config: SessionConfig) -> None:
    """The server is reaped: what is left of its process group gets SIGTERM, then
    SIGKILL ``terminate_timeout`` later if any remains (:func:`stop_group`)."""
    for pause in stop_group(process.pid, config.terminate_timeout, trio.current_time):
        await trio.sleep(pause)


async def _stop_process(process: trio.Process, config: SessionConfig) -> None:
    """stdin is closed already: wait; SIGTERM, wait; SIGKILL, wait (the signals to its
    process group); then the same for what the server left in its group
    (:func:`_stop_group`). Shielded."""
    with trio.CancelScope(shield=True):
        with trio.move_on_after(config.stdin_close_timeout):
            await process.wait()
        if process.returncode is None:
            signal_group(process, signal.SIGTERM)
            with trio.move_on_after(config.terminate_timeout):
                await process.wait()
        if process.returncode is None:
            signal_group(process, signal.SIGKILL)
            await process.wait()
        await _stop_group(process, config)


@asynccontextmanager
async def open_stdio_client(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr: StderrCallback | None = None,
    handlers: Handlers | None = None,
    config: SessionConfig | None = None,
    connection_config: ConnectionConfig | None = None,
    start: bool = True,
) -> AsyncGenerator[Session]:
    """Spawn an MCP server and talk to it over its stdin/stdout.

    Args:
        command: the program and its arguments (no shell).
        env: the server's environment (default: ours).
        cwd: the server's working directory.
        stderr: called with each chunk of the server's stderr; the last
            ``config.stderr_tail_size`` bytes are kept either way, for errors.
        handlers: handlers for the server's requests and notifications.
        config: runtime bounds and the shutdown waits (``stdin_close_timeout``,
            ``terminate_timeout``).
        connection_config: the client core's configuration.
        start: run the handshake before the block starts.

    Resource handling:
        On exit: the session is closed, the server's stdin is closed, and the server
        gets ``stdin_close_timeout`` seconds to exit, then SIGTERM and
        ``terminate_timeout`` seconds, then SIGKILL. This happens even when the block
        is cancelled. The server runs in a new session (``setsid``), and the signals
        go to its whole process group: a server started through a wrapper
        (``sh -c``) is stopped too, and Ctrl-C in a terminal reaches only us (the
        close above then stops the server). Once the server has exited, what it left
        in its group (a helper) gets SIGTERM, then SIGKILL ``terminate_timeout``
        later; a daemon meant to outlive it starts a session of its own. The server
        has no controlling terminal: one that prompts on ``/dev/tty`` (``ssh``
        asking for a password, ``sudo``) cannot; use keys, an agent or
        ``SSH_ASKPASS``.

    Error handling:
        If the server exits or closes its stdout, waiting requests fail with
        :class:`~mcp_trio.ServerExited` (exit status, stderr tail).
    """
    config = config if config is not None else SessionConfig()
    process = await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        # A process group of its own, signalled whole at close (a server behind a
        # wrapper, its helpers). Ctrl-C in a terminal no longer reaches it directly:
        # our close stops it (stdin, SIGTERM, SIGKILL), as for any other exit.
        start_new_session=True,
    )
    tail = _StderrTail(config.stderr_tail_size, stderr)
    try:
        async with open_task_nursery("stdio client", cancel_on_exit=True) as nursery:
            assert process.stderr is not None
            nursery.start_soon(tail.pump, process.stderr)
            channel = ProcessChannel(process, tail, config)
            nursery.start_soon(channel._watch_exit)
            try:
                async with open_session(
                    channel,
                    "client",
                    handlers=handlers,
                    config=config,
                    connection_config=connection_config,
                ) as session:
                    if start:
                        await session.start()
                    yield session
            finally:
                await _stop_process(process, config)
                with trio.CancelScope(shield=True) as scope:
                    scope.deadline = trio.current_time() + config.exit_status_timeout
                    await tail.done.wait()
    finally:
        with trio.CancelScope(shield=True):
            await _stop_process(process, config)
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    await pipe.aclose()

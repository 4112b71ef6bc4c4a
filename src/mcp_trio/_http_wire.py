"""One HTTP/1.1 connection: an h11 state machine over a trio stream, both roles.

h11 parses and frames; this class only moves its bytes, the way h11's own
``examples/trio-server.py`` does. Every write is bounded by a timeout given per call
(a peer that stops reading must not hold a task forever).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final, TypeAlias, cast, final

import h11
import trio

__all__ = ["H11Stream", "WireError"]

READ_CHUNK: Final = 65_536
_DIRECT_WRITES: Final = os.name == "posix"
"""Sockets are file descriptors that ``os.write`` takes (not so on Windows)."""

H11Event: TypeAlias = (
    h11.Request
    | h11.InformationalResponse
    | h11.Response
    | h11.Data
    | h11.EndOfMessage
    | h11.ConnectionClosed
)


class WireError(Exception):
    """The connection is unusable: the peer vanished, broke HTTP, or was too slow."""


@final
class H11Stream:
    """An h11 connection over ``stream``.

    Args:
        stream: the byte stream (TCP, or TLS over TCP).
        role: ``h11.CLIENT`` or ``h11.SERVER``.
        max_header_size: the largest head accepted.
    """

    def __init__(
        self, stream: trio.abc.Stream, role: type[h11.CLIENT | h11.SERVER], max_header_size: int
    ) -> None:
        self.stream = stream
        self.h11 = h11.Connection(role, max_incomplete_event_size=max_header_size)
        self.received = 0
        """Bytes received in the current request/response cycle (head included)."""
        self.ended = False
        """Whether the peer's end of input was read."""
        self.authorization: bytes | None = None
        """Client: the ``Authorization`` value of the request last sent (which token a
        ``401`` refused)."""
        self.writes_directly: bool = _DIRECT_WRITES and type(stream) is trio.SocketStream
        """Whether :meth:`write_nowait` can write (plain TCP on POSIX)."""
        self.read_at_once = False
        """Client: the next :meth:`receive` takes what the socket already has without a
        scheduler round trip (the first read of an answer, by a task that has just
        started: set by the pool, only where :attr:`writes_directly`)."""

    async def receive(self) -> bool:
        """Read once and hand the bytes to h11. Returns ``False`` at end of input.

        Raises:
            WireError: the stream broke.
        """
        data: bytes | bytearray
        try:
            if self.read_at_once:
                self.read_at_once = False
                data = await self._read_at_once()
            else:
                data = await self.stream.receive_some(READ_CHUNK)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise WireError(f"reading failed: {exc!r}") from exc
        self.h11.receive_data(bytes(data))
        self.received += len(data)
        if not data:
            self.ended = True
        return bool(data)

    async def _read_at_once(self) -> bytes:
        """``receive_some`` of a plain TCP stream, minus its yield when the bytes are
        already there (trio yields after every read, for fairness; this read is the
        first of a task that has just been scheduled, so nothing waits on it). Still a
        cancellation point, as trio's read is: cancelled, it raises before reading."""
        stream = self.stream
        assert isinstance(stream, trio.SocketStream)
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                # fileno() is -1 once the stream is closed: EBADF, reported as a failed read.
                return os.read(stream.socket.fileno(), READ_CHUNK)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(stream.socket)

    async def next_event(self) -> H11Event:
        """The next h11 event, reading as needed.

        Raises:
            h11.RemoteProtocolError: the peer broke HTTP/1.1.
            WireError: the stream broke (end of input mid-message is h11's error).
        """
        while (event := self.next_event_nowait()) is None:
            await self.receive()
        return event

    def next_event_nowait(self) -> H11Event | None:
        """The next h11 event from the bytes already received, or ``None`` when h11
        needs more (lets callers skip timers and scheduler round trips).

        Raises:
            h11.RemoteProtocolError: the peer broke HTTP/1.1.
            WireError: the peer sent a second message before the first was answered.
        """
        event = self.h11.next_event()
        if event is h11.NEED_DATA:
            return None
        if event is h11.PAUSED:
            raise WireError("the peer sent more than one message at a time")
        assert not isinstance(event, type)
        return cast(H11Event, event)

    async def send(self, events: Iterable[h11.Event], timeout: float | None) -> None:
        """Frame ``events`` with h11 and write them, within ``timeout`` seconds
        (``None``: no bound here, the caller's scope bounds the write).

        Raises:
            WireError: the write failed or timed out (h11 is told: ``send_failed``).
        """
        rest = self.write_nowait(self.frame(events))
        if rest:
            await self.write(rest, timeout)

    def frame(self, events: Iterable[h11.Event]) -> bytes:
        """The bytes of ``events`` (h11 records them as sent: write them next)."""
        return b"".join(self.h11.send(e) or b"" for e in events)

    def write_nowait(self, data: bytes) -> bytes | memoryview:
        """Write what the socket takes at once, without a scheduler round trip (trio's
        ``send_all`` yields even when the kernel took everything, which costs each
        request a task step on both sides). Only plain TCP on POSIX: a TLS stream has
        its own framing, so it always goes through :meth:`write`.

        Returns:
            What is left to write with :meth:`write` (empty when all is out).

        Raises:
            WireError: the write failed (h11 is told: ``send_failed``).
        """
        stream = self.stream
        if not self.writes_directly or not data:
            return data
        assert isinstance(stream, trio.SocketStream)
        try:
            # fileno() is -1 once the stream is closed: EBADF, reported like trio's error.
            sent = os.write(stream.socket.fileno(), data)
        except BlockingIOError:
            return data
        except OSError as exc:
            self.h11.send_failed()
            raise WireError(f"writing failed: {exc!r}") from exc
        return memoryview(data)[sent:] if sent < len(data) else b""

    async def write(self, data: bytes | memoryview, timeout: float | None) -> None:
        """Write ``data`` (framed by :meth:`frame`) within ``timeout`` seconds (``None``:
        the caller's scope bounds the write).

        Raises:
            WireError: the write failed or timed out (h11 is told: ``send_failed``).
        """
        if timeout is None:
            # Unbounded here: the caller bounds it (no cancel scope to set up).
            await self._send_all(data)
            return
        with trio.move_on_after(timeout) as scope:
            await self._send_all(data)
        if scope.cancelled_caught:
            self.h11.send_failed()
            raise WireError(f"writing timed out after {timeout} s")

    async def _send_all(self, data: bytes | memoryview) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.h11.send_failed()
            raise WireError(f"writing failed: {exc!r}") from exc

    def next_cycle(self) -> bool:
        """After a complete exchange: get ready for the next one on this connection.

        Returns:
            ``False`` when the connection cannot be reused (either side wants it closed).
        """
        if self.h11.our_state is not h11.DONE or self.h11.their_state is not h11.DONE:
            return False
        self.h11.start_next_cycle()
        self.received = len(self.h11.trailing_data[0])
        return True

    def is_stale(self) -> bool:
        """Whether an idle connection has something to read: the peer closed it (or sent
        what it should not have). Checked before reusing a kept-alive connection."""
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        if not isinstance(stream, trio.SocketStream):
            return False
        return bool(self.h11.trailing_data[0]) or stream.socket.is_readable()

    def close_nowait(self) -> None:
        """Close a plain TCP connection at once (what ``aclose`` does, minus its yield)."""
        assert isinstance(self.stream, trio.SocketStream)
        self.stream.socket.close()

    async def aclose(self) -> None:
        """Close the stream at once (no TLS close_notify wait)."""
        await trio.aclose_forcefully(self.stream)

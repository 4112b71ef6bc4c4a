"""Message channels: what a session reads from and writes to.

A :class:`MessageChannel` moves JSON-RPC messages between two peers. The session
writes one message per :meth:`~MessageChannel.send` and reads with
:meth:`~MessageChannel.receive`. Two framings exist:

* ``"message"`` -- each ``receive()`` returns one complete JSON text (WebSocket,
  in-memory);
* ``"ndjson"`` -- each ``receive()`` returns the next chunk of a newline-delimited
  byte stream (stdio); the core splits it (``Connection.receive_bytes``), bounds each
  line and answers an oversize one with -32600.

Implementations here: :func:`memory_channel_pair` (in-memory, bounded) and
:class:`StreamChannel` (NDJSON over a ``trio.abc.Stream`` or a send/receive stream
pair). The WebSocket channel lives in :mod:`mcp_trio._websocket`.

Fast paths
----------
A message that can move without waiting moves without a scheduler round trip. Trio's
own ``send``/``receive``/``send_all``/``receive_some`` always yield once, even when
the data is there or the buffer has room, so a call crossing two sessions paid two
or three extra scheduler ticks per side for nothing:

* :meth:`MessageChannel.send_nowait` sends a message whole if that needs no waiting
  (the session's writer tries it before it shields and awaits a ``send``);
* ``receive`` returns data already there (a memory channel's buffer, a readable
  pipe) without yielding, and waits on the channel or the file descriptor otherwise.
  It still checks for cancellation first, and after :data:`RECEIVE_BUDGET` receives
  in a row that did not wait it yields once, so a peer that never pauses cannot
  starve the other tasks.
* **Taking a message in passing** (:meth:`MessageChannel.attach_reader`): while the
  session's reader is parked in ``receive`` on an empty channel, a message that
  arrives (a memory channel's ``send_nowait``, an HTTP response read by its own task)
  is offered to the session's ``take`` callback in the task that brought it, instead
  of waking the reader for it: a scheduler round trip less per message. ``take``
  refuses (and the message is buffered as before) whenever taking it could reorder
  messages or re-enter the session; see ``Session._take_message``.

Pipes (``trio.lowlevel.FdStream``, what stdio uses on both sides) are read and written
with ``os.read``/``os.write`` on the non-blocking descriptor directly; a pipe write of
at most ``PIPE_BUF`` bytes is all-or-nothing (POSIX), which is what ``send_nowait``
needs. Other streams go through their own ``send_all``/``receive_some``.
"""

from __future__ import annotations

import abc
import errno
import math
import os
import select
import stat
from collections.abc import Callable
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar, final

import trio

from mcp_sansio import RequestId

__all__ = [
    "Decoded",
    "Hold",
    "Inbox",
    "LocalReply",
    "MemoryChannel",
    "MessageChannel",
    "Reissue",
    "SessionLost",
    "StreamChannel",
    "Take",
    "memory_channel_pair",
]

Framing = Literal["message", "ndjson"]


@final
class LocalReply(bytes):
    """A JSON-RPC error response a channel made itself (the Streamable HTTP client's
    ``http_error`` for a request lost on the way, or refused with an error status, a
    gateway's own JSON error quoted: no JSON-RPC answer came), not one the peer sent.
    The wire bytes, marked by their type. The session reads it as the request's answer
    (as plain ``bytes``: the parser takes exact types); its request fails with
    :class:`~mcp_trio.TransportFailed` (the core's ``ErrorReceived.transport``), not
    as the peer's ``McpError``; and unless :attr:`heard`, it is no word from the peer:
    it stores no ``_heard_at``, and a keep-alive ``ping`` failed by one failed
    (:mod:`mcp_trio._keepalive`).
    """

    heard: bool
    """The peer did answer (an error status below 500, say): its ``_heard_at`` is
    stored."""

    def __new__(cls, data: bytes, *, heard: bool = False) -> LocalReply:
        self = super().__new__(cls, data)
        self.heard = heard  # (no __slots__ for a bytes subclass: in its __dict__)
        return self


@final
class Decoded(bytes):
    """A message of the peer's that a channel has parsed already (the Streamable HTTP
    client reads each answer to track its requests): the wire bytes, with the dict they
    parse to in :attr:`decoded`, which the session hands to ``Connection.receive_message``
    (``decoded=``) so that no message is parsed twice. The bytes are still what the
    core's ``max_message_size`` is checked against. (Bytes, as every message a channel
    delivers, so a copy of them: a ``bytes`` subclass has no other constructor. A memcpy
    costs a fraction of the parse it saves: 43 against 357 µs for 1 MiB, 0.15 against
    0.46 µs for 1 KB.)"""

    decoded: dict[str, Any]

    def __new__(cls, data: bytes, decoded: dict[str, Any]) -> Decoded:
        self = super().__new__(cls, data)
        self.decoded = decoded  # (no __slots__ for a bytes subclass: in its __dict__)
        return self


T = TypeVar("T")
Take = Callable[[bytes], bool]
"""What :meth:`MessageChannel.attach_reader` is given: the session's ``take(message)``.

It receives one whole message (a JSON text, as ``receive`` would return it) and acts
on it at once, in the caller's task; it returns ``True`` if it took the message (then
the channel must not deliver it again), ``False`` if it refused it (then the channel
buffers it for ``receive`` as usual). It never waits and never raises. The Streamable
HTTP channel may hand it a :class:`LocalReply` or a :class:`Decoded`: ``bytes``, but
not of the exact type orjson parses (``orjson.loads(bytes(message))`` does)."""
Hold = Callable[[tuple[RequestId, ...], bool], None]
"""What :meth:`MessageChannel.attach_holds` is given: the session's
``held(request_ids, holding)``.

It receives the ids of the requests concerned and ``True`` when the channel starts
holding them back while it obtains credentials for them (an OAuth refresh or
authorization), ``False`` when it stops, however that ends; it returns nothing. The
channel calls it in its own task; it must not raise nor wait."""

Reissue = Callable[[RequestId], int | None]
"""What :meth:`MessageChannel.attach_reissue` is given: the session's
``reissue(request_id)``.

The channel calls it for a modern request of ours whose response stream broke after
the request was written (its answer is lost; 2026-07-28: the client MUST re-issue it
as a new request with a new id), from ``receive`` (in the session's reader, after the
messages that came before the break); it must not raise nor wait. It
returns ``None`` when it queued the request again (under a new id, written by its
caller's task: the channel delivers nothing for the old one), else how many times the
request was re-issued before (``0``: never), and the channel fails it with an error saying so."""


@final
class SessionLost(Exception):
    """What a channel's ``receive`` raises when the peer has forgotten the session
    (Streamable HTTP: a ``404`` to a request that carried ``Mcp-Session-Id``) and the
    conversation goes on in a new one. Not the end of input: the session starts the new
    one (``restart``) and sends ``resend`` again, then reads on.

    Args:
        restart: start a new session (``Connection.restart_session``): the one in use is
            gone. ``False``: a new one is already being started or running.
        resend: our requests the peer never processed, to send again on the new session
            (``Connection.resend_request``).
    """

    def __init__(self, *, restart: bool, resend: tuple[RequestId, ...]) -> None:
        super().__init__("the peer forgot the session")
        self.restart: Final = restart
        self.resend: Final = resend


RECEIVE_BUDGET = 16
"""How many receives in a row may return without yielding to the scheduler."""
_PIPE_BUF: int = getattr(select, "PIPE_BUF", 512)  # POSIX's minimum where unknown


class MessageChannel(abc.ABC):
    """A bidirectional channel of JSON-RPC messages.

    Error handling:
        ``send`` raises ``trio.BrokenResourceError`` when the peer is gone and
        ``trio.ClosedResourceError`` after our own ``aclose``. ``receive`` raises
        ``trio.EndOfChannel`` at the end of input, or :class:`~mcp_trio.SessionClosed`
        (or a subclass) when it knows better why the input ended; the session uses
        that as the reason it closed. The HTTP channel's ``receive`` may also raise
        ``SessionLost`` (the server forgot the session; the session starts a new one
        and reads on). A client's WebSocket channel raises
        :class:`~mcp_trio.TokenExpired` (a ``SessionClosed``) from ``send`` as well as
        ``receive`` when the server closed the connection because the token expired.
        Other exceptions are bugs.
    """

    framing: ClassVar[Framing] = "message"
    """What ``receive`` returns: one message, or a chunk of an NDJSON stream."""
    atomic_send: ClassVar[bool] = False
    """Whether a cancelled ``send`` is guaranteed to have sent nothing (a trio memory
    channel). If not (byte streams, WebSockets: half a frame may be out), the session
    shields each write from cancellation and bounds it with ``write_timeout``."""
    half_close: ClassVar[bool] = False
    """Whether the output outlives the end of input (two pipes, a byte stream): after
    ``receive`` raised ``trio.EndOfChannel`` the session still answers the peer's
    requests in flight, within ``shutdown_grace_period``. If not, the end of input
    ends the conversation: the peer is gone, and the handlers of its requests are
    cancelled at once."""

    @abc.abstractmethod
    async def send(self, message: bytes) -> None:
        """Send one message: a JSON text, UTF-8, without a line terminator."""

    def send_nowait(self, message: bytes) -> bool:
        """Send ``message`` now if that needs no waiting.

        Returns:
            ``True`` if it went out whole; ``False`` if nothing of it was sent (the
            channel is full, or cannot tell; also when it is broken or closed): then
            :meth:`send` it, which waits, or raises what went wrong. The default
            always returns ``False``.
        """
        return False

    @abc.abstractmethod
    async def receive(self) -> bytes | str:
        """Wait for the next message (or NDJSON chunk)."""

    def message_bound(self) -> tuple[int, str] | None:
        """A bound of the transport's own on the messages it delivers: the size in bytes
        and the setting that raises it; ``None`` (the default): only the core's
        ``ConnectionConfig.max_message_size``. A client checks the smaller before a
        request whose answer's size it can foresee (a skill file)."""
        return None

    def send_bound(self) -> tuple[int, str] | None:
        """A bound on the messages the peer takes without ending the connection, as
        :meth:`message_bound` gives it (the size, in characters of the JSON text, and
        the setting that raises it); ``None`` (the default): none, a message too large
        for the peer costs only its own request (it is refused on arrival, or the
        transport fails that exchange alone). The session sends nothing larger: a
        request of its caller's raises ``ValueError``, an answer becomes a -32603 error
        and a notification is dropped (see ``Session``). The caller compares the
        encoded length first (bytes: never fewer than characters)."""
        return None

    def finish_write(self, deadline: float = math.inf) -> None:
        """The session is closing and about to cancel the :meth:`send` in progress, if
        any: let that message go out whole instead, by ``deadline`` (trio time: what its
        ``write_timeout`` left it; ``math.inf``: no bound) and within a bound of the
        channel's own, so that the channel's close (:meth:`aclose`) can follow it (a
        WebSocket: the message, then the close frame). Called without waiting, before
        the cancel. The default does nothing: the send is cancelled."""
        del deadline

    def attach_reader(self, take: Take) -> None:
        """Offer messages to ``take`` while the reader is parked in :meth:`receive` with
        nothing buffered (see the module docs). Only channels of framing ``"message"``
        can; the default ignores it (every message goes through ``receive``)."""
        del take

    def attach_holds(self, held: Hold) -> None:
        """Tell ``held`` when requests wait on the transport's own credentials: once
        (``True``) when it starts holding them back to obtain a token (the HTTP
        client's OAuth: a refresh, or an authorization that may wait for the user),
        once (``False``) when it stops, however that ends. The default ignores it:
        other transports hold nothing back (a WebSocket is authorized at its
        handshake)."""
        del held

    def attach_reissue(self, reissue: Reissue) -> None:
        """Hand ``reissue`` the requests whose answer the transport lost after they
        were written, to send again (see :data:`Reissue`). The default ignores it:
        only the modern Streamable HTTP client loses answers that way (a message
        channel either delivers the answer or closes)."""
        del reissue

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close both directions; the peer sees the end of input. Idempotent."""


@final
class Inbox(Generic[T]):
    """The receiving end of a channel that queues whole messages, with the fast paths
    of the module docs: ``receive`` returns what is queued without yielding (within
    :data:`RECEIVE_BUDGET`), and while the reader is parked on an empty queue, a
    message arriving is first :meth:`offer`-ed to the session's ``take``.

    Whoever queues a message calls :meth:`offer` (or :meth:`unpark`) first: once a
    message is on its way to the reader, offers stop until the reader parks again, so
    nothing overtakes it.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[T]) -> None:
        self._receive = receive
        self.take: Take | None = None
        """The session's ``take`` (``MessageChannel.attach_reader``)."""
        self._streak = 0  # receives in a row that did not yield
        self._parked = False  # the reader waits in receive() with nothing queued

    def offer(self, message: bytes) -> bool:
        """Whether the session took ``message`` in passing; if not, queue it next."""
        if self._parked:
            take = self.take
            if take is not None and take(message):
                return True
            self._parked = False  # queued for the reader: nothing may overtake it
        return False

    def unpark(self) -> None:
        """Stop offers until the reader parks again (before queueing something that
        must not be overtaken, or that was not offered)."""
        self._parked = False

    async def receive(self) -> T:
        if self._streak < RECEIVE_BUDGET:
            # Checked before taking a message, so a cancelled receive takes nothing.
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                message = self._receive.receive_nowait()
            except trio.WouldBlock:
                # Empty: park until a message is queued, and meanwhile let arriving
                # messages be offered to the session directly.
                self._streak = 0
                self._parked = True
                try:
                    return await self._receive.receive()
                finally:
                    self._parked = False
            self._streak += 1
            return message
        # Over budget: yield once (more may be queued; not parked).
        self._streak = 0
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._receive.aclose()


@final
class MemoryChannel(MessageChannel):
    """One end of an in-memory channel pair; see :func:`memory_channel_pair`."""

    atomic_send: ClassVar[bool] = True

    def __init__(
        self, send: trio.MemorySendChannel[bytes], receive: trio.MemoryReceiveChannel[bytes]
    ) -> None:
        self._send = send
        self._inbox = Inbox(receive)
        self._peer: MemoryChannel | None = None  # the other end, when made as a pair

    def attach_reader(self, take: Take) -> None:
        self._inbox.take = take

    async def send(self, message: bytes) -> None:
        peer = self._peer
        if peer is not None:
            peer._inbox.unpark()  # the message wakes the reader: nothing may overtake it
        await self._send.send(message)

    def send_nowait(self, message: bytes) -> bool:
        peer = self._peer
        if peer is not None and peer._inbox.offer(message):
            return True
        try:
            self._send.send_nowait(message)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def receive(self) -> bytes:
        return await self._inbox.receive()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._inbox.aclose()


def memory_channel_pair(max_buffer_size: int = 256) -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected in-memory channels.

    Args:
        max_buffer_size: messages buffered in each direction; a sender blocks when
            its direction is full (backpressure, never an unbounded queue).

    Returns:
        ``(a, b)``: what ``a`` sends, ``b`` receives, and the other way round.
    """
    a_send, b_receive = trio.open_memory_channel[bytes](max_buffer_size)
    b_send, a_receive = trio.open_memory_channel[bytes](max_buffer_size)
    a, b = MemoryChannel(a_send, a_receive), MemoryChannel(b_send, b_receive)
    a._peer, b._peer = b, a
    return a, b


@final
class StreamChannel(MessageChannel):
    """Newline-delimited JSON over byte streams (MCP stdio framing).

    Args:
        send_stream: where messages are written, each followed by ``\\n``.
        receive_stream: where chunks of input are read from.
        read_chunk_size: the largest chunk read at once.

    See the MCP specification, ``basic/transports.mdx``, section "stdio".
    """

    framing: ClassVar[Framing] = "ndjson"
    half_close: ClassVar[bool] = True  # stdio: the client ends our input, reads on

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        read_chunk_size: int = 65_536,
    ) -> None:
        self.send_stream = send_stream
        self.receive_stream = receive_stream
        self._chunk = read_chunk_size
        # Pipes get the direct path (see the module docstring); the FdStream keeps
        # owning the descriptor (closing it, waking our waits with notify_closing).
        self._send_fd = send_stream if isinstance(send_stream, trio.lowlevel.FdStream) else None
        self._send_pipe = self._send_fd is not None and _is_pipe(self._send_fd.fileno())
        self._receive_fd = (
            receive_stream if isinstance(receive_stream, trio.lowlevel.FdStream) else None
        )
        # A regular file (`mcp-trio run server.py < requests.jsonl`) never blocks a
        # read, and epoll refuses to watch it (EPERM): never wait for one.
        self._receive_file = self._receive_fd is not None and _is_regular_file(
            self._receive_fd.fileno()
        )
        self._streak = 0
        self._drained = False  # whether the last read emptied the pipe

    @classmethod
    def from_stream(
        cls, stream: trio.abc.Stream, *, read_chunk_size: int = 65_536
    ) -> StreamChannel:
        """A channel over one bidirectional stream (a socket, a stapled pair)."""
        return cls(stream, stream, read_chunk_size=read_chunk_size)

    async def send(self, message: bytes) -> None:
        if self._send_fd is None:
            await self.send_stream.send_all(message + b"\n")
            return
        # No yield before the first write (FdStream.send_all always yields once):
        # only a full pipe waits.
        view = memoryview(message + b"\n")
        while view:
            fd = self._send_fd.fileno()
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
            except OSError as exc:
                raise _stream_error(exc) from exc

    def send_nowait(self, message: bytes) -> bool:
        if not self._send_pipe or len(message) >= _PIPE_BUF:
            return False  # a partial write could not be taken back (the line ends with \n)
        data = message + b"\n"
        assert self._send_fd is not None
        try:
            os.write(self._send_fd.fileno(), data)  # all or nothing (<= PIPE_BUF)
        except OSError:
            return False  # full, or broken or closed: send() waits or raises
        return True

    async def receive(self) -> bytes:
        if self._receive_fd is None:
            data = await self.receive_stream.receive_some(self._chunk)
            if not data:
                raise trio.EndOfChannel
            return bytes(data)
        if self._drained and not self._receive_file:
            # The last read emptied the pipe: a read now would most likely fail
            # (EAGAIN) and cost a system call for nothing, so wait for data first.
            # (If some came meanwhile, the wait takes one scheduler tick.)
            self._streak = 0
            fd = self._receive_fd.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("file was already closed")
            await trio.lowlevel.wait_readable(fd)
        elif self._streak >= RECEIVE_BUDGET:
            self._streak = 0
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            fd = self._receive_fd.fileno()
            try:
                data = os.read(fd, self._chunk)
            except BlockingIOError:
                self._streak = 0
                await trio.lowlevel.wait_readable(fd)
                continue
            except OSError as exc:
                raise _stream_error(exc) from exc
            if not data:
                raise trio.EndOfChannel
            self._streak += 1
            self._drained = len(data) < self._chunk
            return data

    async def aclose(self) -> None:
        try:
            await self.send_stream.aclose()
        finally:
            if self.receive_stream is not self.send_stream:  # type: ignore[comparison-overlap]
                await self.receive_stream.aclose()


def _is_regular_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def _stream_error(exc: OSError) -> trio.BrokenResourceError | trio.ClosedResourceError:
    """What ``FdStream`` raises for ``exc`` (a descriptor closed under us, or broken)."""
    if exc.errno == errno.EBADF:
        return trio.ClosedResourceError("file was already closed")
    return trio.BrokenResourceError(str(exc))

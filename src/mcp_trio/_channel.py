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
"""

from __future__ import annotations

import abc
from typing import ClassVar, Literal, final

import trio

__all__ = ["MemoryChannel", "MessageChannel", "StreamChannel", "memory_channel_pair"]

Framing = Literal["message", "ndjson"]


class MessageChannel(abc.ABC):
    """A bidirectional channel of JSON-RPC messages.

    Error handling:
        ``send`` raises ``trio.BrokenResourceError`` when the peer is gone and
        ``trio.ClosedResourceError`` after our own ``aclose``. ``receive`` raises
        ``trio.EndOfChannel`` at the end of input, or :class:`~mcp_trio.SessionClosed`
        (or a subclass) when it knows better why the input ended; the session uses
        that as the reason it closed. Other exceptions are bugs.
    """

    framing: ClassVar[Framing] = "message"
    """What ``receive`` returns: one message, or a chunk of an NDJSON stream."""
    atomic_send: ClassVar[bool] = False
    """Whether a cancelled ``send`` is guaranteed to have sent nothing (a trio memory
    channel). If not (byte streams, WebSockets: half a frame may be out), the session
    shields each write from cancellation and bounds it with ``write_timeout``."""

    @abc.abstractmethod
    async def send(self, message: bytes) -> None:
        """Send one message: a JSON text, UTF-8, without a line terminator."""

    @abc.abstractmethod
    async def receive(self) -> bytes | str:
        """Wait for the next message (or NDJSON chunk)."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close both directions; the peer sees the end of input. Idempotent."""


@final
class MemoryChannel(MessageChannel):
    """One end of an in-memory channel pair; see :func:`memory_channel_pair`."""

    atomic_send: ClassVar[bool] = True

    def __init__(
        self, send: trio.MemorySendChannel[bytes], receive: trio.MemoryReceiveChannel[bytes]
    ) -> None:
        self._send = send
        self._receive = receive

    async def send(self, message: bytes) -> None:
        await self._send.send(message)

    async def receive(self) -> bytes:
        return await self._receive.receive()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_channel_pair(max_buffer_size: int = 16) -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected in-memory channels.

    Args:
        max_buffer_size: messages buffered in each direction; a sender blocks when
            its direction is full (backpressure, never an unbounded queue).

    Returns:
        ``(a, b)``: what ``a`` sends, ``b`` receives, and the other way round.
    """
    a_send, b_receive = trio.open_memory_channel[bytes](max_buffer_size)
    b_send, a_receive = trio.open_memory_channel[bytes](max_buffer_size)
    return MemoryChannel(a_send, a_receive), MemoryChannel(b_send, b_receive)


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

    @classmethod
    def from_stream(
        cls, stream: trio.abc.Stream, *, read_chunk_size: int = 65_536
    ) -> StreamChannel:
        """A channel over one bidirectional stream (a socket, a stapled pair)."""
        return cls(stream, stream, read_chunk_size=read_chunk_size)

    async def send(self, message: bytes) -> None:
        await self.send_stream.send_all(message + b"\n")

    async def receive(self) -> bytes:
        data = await self.receive_stream.receive_some(self._chunk)
        if not data:
            raise trio.EndOfChannel
        return bytes(data)

    async def aclose(self) -> None:
        try:
            await self.send_stream.aclose()
        finally:
            if self.receive_stream is not self.send_stream:  # type: ignore[comparison-overlap]
                await self.receive_stream.aclose()

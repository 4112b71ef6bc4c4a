"""Byte framing: newline-delimited JSON (stdio, TCP) and Server-Sent Events (HTTP).

Theory of operation
===================

Both decoders turn a byte stream, cut at arbitrary points by the transport, into
whole messages. They share one shape:

* ``feed(data)`` does all the work, eagerly. It splits ``data`` into lines and puts each
  finished message (or a :class:`MessageTooLarge` marker) on an internal queue, in
  stream order. Whatever follows the last line terminator is the *incomplete line*;
  it is the only thing carried over to the next ``feed``.
* ``next_message()`` / ``next_event()`` pops that queue, ``None`` when it is empty. Call
  it until ``None`` after every ``feed`` (the h11 pattern).
* ``feed_eof()`` says the stream ended. Feeding after it is a caller bug
  (:class:`LocalProtocolError`).

Why eager: ``bytes.split`` cuts a chunk into lines in one C call, far cheaper per message
than a Python-level ``find`` loop over a shared ``bytearray`` (measured ~160 ns against
~900 ns per small message). Small messages are the common case on stdio.

Never re-scan. Every input byte is searched for a terminator exactly once. Each chunk is
searched only from its own start: bytes carried over in the incomplete line were already
searched and are never looked at again, only appended to (a ``bytearray``, amortised
O(1)). While a line is incomplete, the next chunk is searched with ``find`` (memchr
speed), so a large message arriving in many small pieces costs O(its size), not
O(size * pieces).

Bounded memory. A peer may send a line that never ends. Each decoder has a limit (of a
message, of an event). When the limit is crossed, the policy is to *resynchronise*: emit
one :class:`MessageTooLarge` in the message's place, drop the bytes already held, drop
the rest of that message as it arrives (never holding it), and carry on with the next
one. A line's report keeps its first and last few bytes, where JSON-RPC libraries put
the id, so the caller can still answer the request (or end the request of its own that
it answers) with a JSON-RPC error; an id not found is ``null``. The session goes on.
The alternative, failing the whole stream, lets one bad message end a session that the
protocol could have kept. So after every ``feed`` returns,
``buffered_bytes`` (the incomplete line, plus for SSE the event being assembled) is at
most the limit (+1 for :class:`LineSplitter`; see there). During one ``feed(data)`` the
peak is that bound plus ``len(data)``: the chunk is split before it is checked.
Finished messages waiting in the queue are at most the chunk they came from, if you
drain after every feed.

The limit is checked on whole lines and on the incomplete line, with rules chosen so the
outcome never depends on how the stream was chunked: a message is reported too large
exactly when its complete length would exceed the limit. Only the ``size_seen`` of an SSE
event's report depends on chunking: it is how much had arrived when the limit was crossed.
"""

from __future__ import annotations

from collections import deque
from typing import Final, final

import attrs

from ._errors import LocalProtocolError

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "LineSplitter",
    "MessageTooLarge",
    "SSEDecoder",
    "SSEEvent",
    "encode_line",
    "encode_sse_comment",
    "encode_sse_event",
]

DEFAULT_MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
"""Default bound, in bytes, on one newline-delimited message or one SSE event."""

# JSON whitespace (RFC 8259 section 2) other than the newline that ends the line.
_JSON_WHITESPACE: Final = b" \t\r"
_COLON: Final = 0x3A
_UTF8_BOM: Final = b"\xef\xbb\xbf"
# Retry values longer than this many significant digits are ignored: int() of very long
# digit strings is slow (and limited), and 10**18 ms is already ~30 million years.
_MAX_RETRY_DIGITS: Final = 18
_HEAD_SIZE: Final = 256  # bytes of an oversize message kept (MessageTooLarge.head)
_TAIL_SIZE: Final = 160  # ... and at its end (MessageTooLarge.tail)


@final
@attrs.frozen(kw_only=True)
class MessageTooLarge:
    """Marker returned in place of a message (or SSE event) longer than the limit.

    It appears once per oversize message, at that message's position in the stream.
    The decoder has dropped the message, so the caller only has to report it (for a
    JSON-RPC peer: an error response, under the id found in :attr:`head` or
    :attr:`tail`, else null) and keep reading.
    """

    size_seen: int
    """Bytes of the message (at least ``limit + 1``). A line's whole size, without its
    terminator; for an SSE event, what had arrived when it was found too large (that
    depends on how the input was chunked: the rest is discarded unread)."""
    limit: int
    """The limit that was exceeded, in bytes."""
    head: bytes = attrs.field(default=b"", eq=False)
    """A line's first ``min(256, limit + 1)`` bytes, however the input was chunked. With
    :attr:`tail`, enough to find the id of a JSON-RPC message (it is written first or
    last), so that its request can still be answered (``Connection`` does). Empty for an
    SSE event."""
    tail: bytes = attrs.field(default=b"", eq=False)
    """A line's last ``min(160, limit + 1)`` bytes (see :attr:`head`)."""


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"the size limit must be at least 1 byte, got {limit}")


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    # Messages are sliced out of the chunk; slices of a bytearray would be bytearrays.
    return data if type(data) is bytes else bytes(data)


# --------------------------------------------------------------------------------------
# Newline-delimited messages (MCP stdio transport)
# --------------------------------------------------------------------------------------


@final
class LineSplitter:
    r"""Split a byte stream into newline-delimited messages (MCP stdio framing).

    Each message ends with ``\n``; one ``\r`` just before it is removed, so ``\r\n`` works
    too. Lines that are empty or hold only JSON whitespace (space, tab, CR) are skipped.
    Messages are returned as ``bytes`` without their terminator, ready for the JSON parser.

    See the MCP specification, ``basic/transports.mdx``, section "stdio": messages are
    delimited by newlines and MUST NOT contain embedded newlines.

    Resource handling:
        A message longer than ``max_message_size`` bytes (terminator excluded) is
        replaced by one :class:`MessageTooLarge`, at its end (its newline, or the end
        of the stream); its bytes are dropped as they arrive, but for its first and last
        few (:attr:`MessageTooLarge.head`, :attr:`MessageTooLarge.tail`). After every
        :meth:`feed` returns, :attr:`buffered_bytes` is at most ``max_message_size + 1``
        (a line of exactly the limit may still be waiting for the ``\n`` after its
        ``\r``). Within one ``feed(data)``, add ``len(data)``. Messages waiting in the
        queue are extra, and are at most the chunk they came from if you drain after every feed.

    Error handling:
        Nothing the peer sends makes this class raise.
    """

    __slots__ = (
        "_discarding",
        "_eof",
        "_head",
        "_large_head",
        "_large_size",
        "_large_tail",
        "_limit",
        "_out",
        "_partial",
        "_tail",
    )

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """Create a splitter.

        Args:
            max_message_size: The largest message accepted, in bytes, excluding its
                line terminator.

        Raises:
            ValueError: ``max_message_size`` is less than 1.
        """
        _check_limit(max_message_size)
        self._limit = max_message_size
        self._head = min(_HEAD_SIZE, max_message_size + 1)  # see MessageTooLarge.head
        self._tail = min(_TAIL_SIZE, max_message_size + 1)
        self._large_head = b""  # of the oversize line being skipped
        self._large_tail = bytearray()  # its last bytes so far
        self._large_size = 0  # its bytes so far
        self._partial = bytearray()  # the incomplete last line
        self._out: deque[bytes | MessageTooLarge] = deque()
        self._discarding = False  # inside an oversize line: drop input up to a newline
        self._eof = False

    @property
    def max_message_size(self) -> int:
        """The largest message accepted, in bytes, excluding its line terminator."""
        return self._limit

    @property
    def buffered_bytes(self) -> int:
        """Bytes of the incomplete line held while waiting for its newline."""
        return len(self._partial)

    @property
    def skipping(self) -> bool:
        """Whether an oversize line is being skipped up to its newline (at the end of the
        stream it is reported as too large)."""
        return self._discarding

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes received from the peer. An empty ``data`` is allowed and does nothing.

        Args:
            data: The next bytes of the stream, cut anywhere.

        Raises:
            LocalProtocolError: :meth:`feed_eof` was already called.
        """
        if self._eof:
            raise LocalProtocolError("feed() called after feed_eof()")
        if not data:
            return
        data = _as_bytes(data)
        if self._discarding or self._partial:
            # Mid-line: memchr for the end of it rather than splitting the whole chunk.
            end = data.find(b"\n")
            if end < 0:
                if self._discarding:
                    self._skip(data)
                else:
                    self._partial += data
                    self._check_partial()
                return
            if self._discarding:
                self._skip(data[:end])
                self._end_large()
            else:
                self._partial += data[:end]
                line = bytes(self._partial)
                self._partial.clear()
                self._add_line(line)
            data = data[end + 1 :]
        lines = data.split(b"\n")
        rest = lines.pop()
        for line in lines:
            self._add_line(line)
        if rest:
            self._partial += rest
            self._check_partial()

    def feed_eof(self) -> None:
        """Mark the end of the stream. Calling it again does nothing.

        An unterminated last line is then handled as if it ended with ``\\n``: returned
        as a final message unless it is blank, or reported as too large. Bytes of an
        oversize line being skipped are simply dropped.
        """
        if self._eof:
            return
        self._eof = True
        if self._discarding:
            self._end_large()
        elif self._partial:
            line = bytes(self._partial)
            self._partial.clear()
            self._add_line(line)

    def next_message(self) -> bytes | MessageTooLarge | None:
        """Return the next message, in stream order.

        Returns:
            The next message without its terminator; or a :class:`MessageTooLarge` where
            a message was too long; or ``None`` when no complete message is buffered
            (feed more data, or the stream is over after :meth:`feed_eof`).
        """
        out = self._out
        return out.popleft() if out else None

    def _add_line(self, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self._limit:
            self._out.append(
                MessageTooLarge(
                    size_seen=len(line),
                    limit=self._limit,
                    head=line[: self._head],
                    tail=line[-self._tail :],
                )
            )
        elif line and (line[0] not in _JSON_WHITESPACE or line.strip(_JSON_WHITESPACE)):
            self._out.append(line)

    def _check_partial(self) -> None:
        # The line may still end in "\r\n", so it is certainly too long only once it
        # holds more than limit + 1 bytes; a longer complete line is caught by _add_line.
        partial = self._partial
        if len(partial) > self._limit + 1:
            self._large_head = bytes(partial[: self._head])
            self._large_size = 0
            self._large_tail.clear()
            self._skip(partial)
            partial.clear()
            self._discarding = True

    def _skip(self, data: bytes | bytearray) -> None:
        """Bytes of the oversize line: count them, keep the last few (and a \r)."""
        self._large_size += len(data)
        keep = self._tail + 1
        tail = self._large_tail
        tail += data[-keep:]
        del tail[:-keep]

    def _end_large(self) -> None:
        """The oversize line ended: report it in its place."""
        self._discarding = False
        tail, size = bytes(self._large_tail), self._large_size
        if tail.endswith(b"\r"):  # (the \r of a \r\n is no part of the message)
            size -= 1
            tail = tail[:-1]
        tail = tail[-self._tail :]
        self._out.append(
            MessageTooLarge(size_seen=size, limit=self._limit, head=self._large_head, tail=tail)
        )


def encode_line(payload: bytes) -> bytes:
    r"""Frame one message for a newline-delimited stream.

    Args:
        payload: One serialized JSON-RPC message (orjson never emits a raw newline).

    Returns:
        ``payload`` followed by ``\n``.

    Raises:
        LocalProtocolError: ``payload`` contains ``\n``, which would split it in two.
    """
    if b"\n" in payload:
        raise LocalProtocolError("a newline-delimited message must not contain a newline")
    return payload + b"\n"


# --------------------------------------------------------------------------------------
# Server-Sent Events (MCP Streamable HTTP transport)
# --------------------------------------------------------------------------------------


@final
@attrs.frozen(kw_only=True)
class SSEEvent:
    """One event decoded from (or to be written to) a ``text/event-stream``."""

    data: str
    """The data lines of the event, joined with ``\\n``."""
    event: str = "message"
    """The event type; ``"message"`` when the event gave none (or an empty one)."""
    id: str | None = None
    """The ``id`` field given in this event, or ``None`` if it had none.

    Unlike the browser's ``lastEventId`` this does not carry over from earlier events; for
    that (what to send as ``Last-Event-ID`` when reconnecting) use
    :attr:`SSEDecoder.last_event_id`. An empty string means the event reset the id.
    """
    retry: int | None = None
    """The ``retry`` field (reconnection time in milliseconds) given in this event, if any."""


@final
class SSEDecoder:
    """Decode a ``text/event-stream`` body into :class:`SSEEvent` values.

    Implements the WHATWG HTML "event stream interpretation" algorithm
    (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
    lines end with CRLF, LF or CR (a CR at the end of one chunk and an LF at the start of
    the next count as one CRLF); one leading UTF-8 byte order mark is skipped; lines
    starting with ``:`` are comments and are ignored; a field without a colon has an
    empty value; one space after the colon is removed; text is decoded as UTF-8 with
    invalid bytes replaced by U+FFFD. A blank line dispatches the event; an event without
    any ``data`` line is not dispatched, but its ``id`` still takes effect. At the end of
    the stream an unfinished event is discarded.

    Resource handling:
        The size of an event is the total length of its lines (every line since the
        previous blank line, comments included, terminators excluded). An event that
        would exceed ``max_event_size`` is replaced by one :class:`MessageTooLarge` and
        the rest of it, up to the blank line that ends it, is dropped as it arrives.
        Fields processed before the limit was crossed keep their effect (``retry`` at
        once, ``id`` when the blank line arrives); later ones are lost with the event.
        After every :meth:`feed` returns, :attr:`buffered_bytes` is at most
        ``max_event_size``; within one ``feed(data)``, add ``len(data)``.

    Error handling:
        Nothing the peer sends makes this class raise.
    """

    __slots__ = (
        "_block_id",
        "_block_retry",
        "_cr_pending",
        "_data",
        "_discarding",
        "_dropped_line",
        "_eof",
        "_event_size",
        "_event_type",
        "_head",
        "_id_buffer",
        "_last_event_id",
        "_limit",
        "_out",
        "_partial",
        "_retry",
    )

    def __init__(self, max_event_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """Create a decoder for one event stream.

        Args:
            max_event_size: The largest event accepted, in bytes (see "Resource handling").

        Raises:
            ValueError: ``max_event_size`` is less than 1.
        """
        _check_limit(max_event_size)
        self._limit = max_event_size
        self._out: deque[SSEEvent | MessageTooLarge] = deque()
        self._eof = False
        # Stream-level state.
        self._head: bytes | None = b""  # first bytes, until we know if they are a BOM
        self._cr_pending = False  # the last chunk ended with CR: skip an LF right after
        self._partial = bytearray()  # the incomplete last line
        self._discarding = False  # inside an oversize event: skip to its blank line
        self._dropped_line = False  # while discarding: part of the current line was dropped
        self._last_event_id = ""
        self._retry: int | None = None
        # The event being assembled.
        self._event_size = 0
        self._data: list[bytes] = []
        self._event_type = b""
        self._id_buffer = ""  # the spec's "last event ID buffer"
        self._block_id: str | None = None
        self._block_retry: int | None = None

    @property
    def max_event_size(self) -> int:
        """The largest event accepted, in bytes."""
        return self._limit

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the event being assembled: its lines so far and the incomplete line.

        Events already decoded and waiting for :meth:`next_event` are not counted.
        """
        return self._event_size + len(self._partial)

    @property
    def last_event_id(self) -> str:
        """The spec's "last event ID string": the id to resume from, ``""`` if none.

        Set when an event is dispatched (or would be, had it data), from the most recent
        ``id`` field so far; an ``id`` containing NUL is ignored. Send it as
        ``Last-Event-ID`` when reconnecting, unless it is empty.
        """
        return self._last_event_id

    @property
    def retry(self) -> int | None:
        """The most recent valid ``retry`` value (milliseconds), or ``None`` if none yet."""
        return self._retry

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes of the response body. An empty ``data`` is allowed and does nothing.

        Args:
            data: The next bytes of the stream, cut anywhere.

        Raises:
            LocalProtocolError: :meth:`feed_eof` was already called.
        """
        if self._eof:
            raise LocalProtocolError("feed() called after feed_eof()")
        if not data:
            return
        if type(data) is not bytes:
            data = bytes(data)
        if self._head is not None:
            data = self._head + data
            if len(data) < len(_UTF8_BOM) and _UTF8_BOM.startswith(data):
                self._head = data
                return
            self._head = None
            if data.startswith(_UTF8_BOM):
                data = data[len(_UTF8_BOM) :]
                if not data:
                    return
        if self._cr_pending:
            self._cr_pending = False
            if data[0] == 0x0A:
                data = data[1:]
                if not data:
                    return
        if 0x0D in data:  # (an int: a plain memchr, unlike a bytes needle)
            # Make every terminator an LF; a trailing CR may be the first half of a CRLF.
            self._cr_pending = data[-1] == 0x0D
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        start = 0
        if self._partial or self._dropped_line:
            end = data.find(b"\n")
            if end < 0:
                self._add_partial(data)
                return
            if self._discarding:
                line = b""  # the part already dropped makes it a non-blank line
            else:
                self._partial += data[:end]
                line = bytes(self._partial)
                self._partial.clear()
            self._add_line(line)
            start = end + 1
        if not self._discarding and self._event_size + len(data) - start <= self._limit:
            # No line of this chunk can take the event past the bound (the usual case:
            # the bound is megabytes, a chunk a few kilobytes): no size check per line.
            start = self._assemble(data, start)
        else:
            lines = data[start:].split(b"\n")
            start = len(data) - len(lines.pop())
            for line in lines:
                self._add_line(line)
        if start < len(data):
            self._add_partial(data[start:])

    def feed_eof(self) -> None:
        """Mark the end of the stream. Calling it again does nothing.

        Per the spec, an event not yet ended by a blank line is discarded.
        """
        if self._eof:
            return
        self._eof = True
        self._head = None
        self._partial.clear()
        self._reset_event()

    def next_event(self) -> SSEEvent | MessageTooLarge | None:
        """Return the next event, in stream order.

        Returns:
            The next dispatched event; or a :class:`MessageTooLarge` where an event was
            too large; or ``None`` when no complete event is buffered.
        """
        out = self._out
        return out.popleft() if out else None

    def _add_partial(self, data: bytes) -> None:
        if self._discarding:
            self._dropped_line = True
            return
        self._partial += data
        size = self._event_size + len(self._partial)
        if size > self._limit:
            self._partial.clear()
            self._dropped_line = True
            self._start_discarding(size)

    def _start_discarding(self, size_seen: int) -> None:
        self._discarding = True
        self._out.append(MessageTooLarge(size_seen=size_seen, limit=self._limit))
        self._reset_event()  # but not the last event ID buffer: ids already read count

    def _reset_event(self) -> None:
        self._event_size = 0
        self._data = []
        self._event_type = b""
        self._block_id = None
        self._block_retry = None

    def _add_line(self, line: bytes) -> None:
        if self._discarding:
            if not line and not self._dropped_line:
                self._discarding = False
                self._last_event_id = self._id_buffer
                self._reset_event()
            self._dropped_line = False
            return
        if not line:
            self._dispatch()
            return
        size = self._event_size + len(line)
        if size > self._limit:
            self._start_discarding(size)
            return
        self._event_size = size
        if line[0] == _COLON:
            return
        colon = line.find(b":")
        if colon < 0:
            name = line
            value = b""
        else:
            name = line[:colon]
            start = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
            value = line[start:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event_type = value
        elif name == b"id":
            if b"\0" not in value:
                self._id_buffer = self._block_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            digits = value.lstrip(b"0")
            if len(digits) <= _MAX_RETRY_DIGITS:
                self._retry = self._block_retry = int(digits or b"0")

    def _assemble(self, data: bytes, start: int) -> int:
        """:meth:`_add_line` for each line of ``data`` from ``start``, none of which can take
        the event past the bound (:meth:`feed` checked), with the event held in local
        variables: one attribute read and write each per chunk, not per line. Lines are
        found with ``find`` (a memchr), not ``split``, which compares byte by byte: a
        large event costs a scan, not a loop per byte.

        Returns:
            Where the incomplete last line starts (``len(data)`` if none).
        """
        out = self._out
        size, data_lines, kind = self._event_size, self._data, self._event_type
        id_buffer, block_id, block_retry = self._id_buffer, self._block_id, self._block_retry
        stop = len(data)
        while start < stop and (end := data.find(b"\n", start)) >= 0:
            if end == start:  # a blank line (as _dispatch and _reset_event)
                start += 1
                self._last_event_id = id_buffer
                if data_lines:
                    value = data_lines[0] if len(data_lines) == 1 else b"\n".join(data_lines)
                    out.append(
                        SSEEvent(
                            data=value.decode("utf-8", "replace"),
                            event=kind.decode("utf-8", "replace") or "message",
                            id=block_id,
                            retry=block_retry,
                        )
                    )
                    data_lines = []
                size, kind, block_id, block_retry = 0, b"", None, None
                continue
            size += end - start
            if data[start : start + 6] == b"data: ":  # (the usual line: its value copied once)
                data_lines.append(data[start + 6 : end])
                start = end + 1
                continue
            name, _, value = data[start:end].partition(b":")
            start = end + 1
            value = value.removeprefix(b" ")
            if name == b"data":
                data_lines.append(value)
            elif name == b"id":
                if b"\0" not in value:
                    id_buffer = block_id = value.decode("utf-8", "replace")
            elif name == b"event":
                kind = value
            elif name == b"retry" and value.isdigit():
                digits = value.lstrip(b"0")
                if len(digits) <= _MAX_RETRY_DIGITS:
                    self._retry = block_retry = int(digits or b"0")
            # (anything else, a comment included, is ignored but counts to the size)
        self._event_size, self._data, self._event_type = size, data_lines, kind
        self._id_buffer, self._block_id, self._block_retry = id_buffer, block_id, block_retry
        return start

    def _dispatch(self) -> None:
        self._last_event_id = self._id_buffer
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            self._out.append(
                SSEEvent(
                    data=data.decode("utf-8", "replace"),
                    event=self._event_type.decode("utf-8", "replace") or "message",
                    id=self._block_id,
                    retry=self._block_retry,
                )
            )
        self._reset_event()


def _encode_field_value(value: str, what: str, forbidden: str) -> bytes:
    if value.isascii() and value.isprintable():
        return value.encode()  # (the usual id: no CR, LF or NUL, nothing to check)
    for char in forbidden:
        if char in value:
            raise LocalProtocolError(f"an SSE {what} must not contain {char!r}")
    try:
        return value.encode()
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"an SSE {what} must be encodable as UTF-8") from exc


def encode_sse_event(
    data: str | bytes,
    *,
    event: str | None = None,
    id: str | None = None,
    retry: int | None = None,
) -> bytes:
    r"""Encode one event for a ``text/event-stream``, ending with the blank line.

    ``data`` is split at line breaks into several ``data:`` lines, which the decoder joins
    again with ``\n``. An event stream cannot carry a CR inside data: CRLF and CR become
    LF, as in the decoded result.

    Args:
        data: The event data. ``bytes`` must be UTF-8; they are not checked (orjson
            output always is), so other bytes reach the peer as U+FFFD.
        event: The event type; ``None`` leaves it out (the peer sees ``"message"``).
        id: The event id; ``""`` resets the peer's last event id.
        retry: The reconnection time to advertise, in milliseconds.

    Returns:
        The encoded event.

    Raises:
        LocalProtocolError: ``event`` or ``id`` contains CR or LF, ``id`` contains NUL, a
            string is not encodable as UTF-8 (lone surrogates), or ``retry`` is negative.
    """
    fields: list[bytes] = []
    if event is not None:
        fields.append(b"event: " + _encode_field_value(event, "event type", "\r\n"))
    if id is not None:
        fields.append(b"id: " + _encode_field_value(id, "event id", "\r\n\0"))
    if retry is not None:
        if retry < 0:
            raise LocalProtocolError(f"an SSE retry time must not be negative, got {retry}")
        fields.append(b"retry: %d" % retry)
    if isinstance(data, str):
        data = _encode_field_value(data, "event data", "")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    fields.append(b"data: " + data.replace(b"\n", b"\ndata: "))
    fields.append(b"\n")
    return b"\n".join(fields)


def encode_sse_comment(text: str = "") -> bytes:
    r"""Encode a comment line, e.g. a keep-alive (``b": \n\n"``), ending with a blank line.

    Args:
        text: The comment text.

    Returns:
        The encoded comment.

    Raises:
        LocalProtocolError: ``text`` contains CR or LF, or is not encodable as UTF-8.
    """
    return b": " + _encode_field_value(text, "comment", "\r\n") + b"\n\n"

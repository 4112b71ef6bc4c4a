"""An MCP server on stdin/stdout with asyncio, driving the sans-IO core by hand.

No ``mcp_trio``: the loop below is all a binding does for stdio. The core answers
``initialize``, ``ping``, ``logging/setLevel``, ``server/discover`` and the
``subscriptions/listen`` acknowledgement itself; every other request reaches
:func:`answer`, which answers each one (``-32601`` for a method it does not serve).

Run: ``python examples/asyncio_stdio_server.py`` (both eras, one tool: ``add``).
"""

from __future__ import annotations

import asyncio
import sys
import time

from mcp_sansio import Connection, ConnectionConfig, ErrorCode, Event, RequestReceived

ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}


def answer(conn: Connection, event: Event) -> None:
    """Answer a request the core handed over; other events need nothing here (nothing
    runs long, so a cancellation finds its request answered already)."""
    if not isinstance(event, RequestReceived):
        return
    rid, params = event.request_id, event.params or {}
    args = params.get("arguments") or {}
    if event.method == "tools/list":
        conn.send_result(rid, {"tools": [ADD]})
    elif event.method != "tools/call":
        conn.send_error(rid, ErrorCode.METHOD_NOT_FOUND, f"Method not found: {event.method}")
    elif params.get("name") != "add" or not all(type(args.get(k)) is int for k in "ab"):
        conn.send_error(rid, ErrorCode.INVALID_PARAMS, "call add with integers a and b")
    else:
        text = str(args["a"] + args["b"])
        conn.send_result(rid, {"content": [{"type": "text", "text": text}]})


async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Serve one client until the end of its input."""
    config = ConnectionConfig(
        implementation={"name": "asyncio-adder", "version": "1"}, capabilities={"tools": {}}
    )
    conn = Connection("server", config)
    while True:
        deadline = conn.next_deadline()  # (only a server that sends requests has any)
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            data = await asyncio.wait_for(reader.read(65536), wait)
        except TimeoutError:
            events = conn.handle_timer(time.monotonic())
        else:
            if not data:
                break
            events = conn.receive_bytes(data, now=time.monotonic())
        for event in events:
            answer(conn, event)
        writer.write(conn.bytes_to_send())  # after *every* call into the core
        await writer.drain()
    # The end of input: a half-close (a stdio client closes our stdin to stop us and
    # may still read). It takes an unterminated last line first (receive_bytes_eof),
    # and keeps the requests in flight answerable; then drain, and end it.
    for event in conn.receive_eof(now=time.monotonic(), keep_answering=True):
        answer(conn, event)
    conn.receive_eof(now=time.monotonic())  # whatever is still unanswered is abandoned
    writer.write(conn.bytes_to_send())
    await writer.drain()


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    await serve(reader, writer)


if __name__ == "__main__":
    asyncio.run(main())

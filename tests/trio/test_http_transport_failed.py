"""A request the HTTP transport failed raises :class:`~mcp_trio.TransportFailed` (an
``McpError``: ``except McpError`` still catches it), never the server's own errors: a
JSON-RPC ``-32603`` the server sent, or its JSON-RPC error in an error status's body,
stay plain ``McpError``.

A hand-written modern server (h11, loopback, port 0) answers ``server/discover``, then
``tools/call`` of the tool named ``how`` as that name says: ``500`` with no body, a
JSON-RPC ``-32603`` error that reads like ours (``200``), the same in a ``500``'s body, a
connection closed before any answer, or an echo."""

from __future__ import annotations

import h11
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_trio import McpError, Session, TransportFailed
from mcp_trio._http_client import open_http_client

from .slow_reader_support import DISCOVER, LONG, NO_GET, listen, read_body, read_head, respond
from .slow_reader_support import result as result_of
from .test_http_support import call, client_connection_config

_FAKE = {"code": -32603, "message": "HTTP: not ours", "data": {"httpStatus": 500}}
"""An error the server sends that looks like one the client makes."""


async def _handle(stream: trio.SocketStream) -> None:
    conn = h11.Connection(h11.SERVER)
    if await read_head(conn, stream) is None:
        return
    body = await read_body(conn, stream)
    if body is None:
        return
    message = loads(body)
    rid = message.get("id")
    if message.get("method") == "server/discover":
        await respond(conn, stream, 200, result_of(rid, DISCOVER))
        return
    how = message["params"]["name"]
    if how == "status":
        await respond(conn, stream, 500, b"")
    elif how == "fake":
        await respond(conn, stream, 200, dumps({"jsonrpc": "2.0", "id": rid, "error": _FAKE}))
    elif how == "fake-in-500":
        await respond(conn, stream, 500, dumps({"jsonrpc": "2.0", "id": rid, "error": _FAKE}))
    elif how == "hang-up":
        await stream.aclose()
    else:
        await respond(conn, stream, 200, result_of(rid, {"content": []}))


async def _fails(client: Session, how: str) -> McpError:
    try:
        await client.request("tools/call", call(how))
    except McpError as exc:
        return exc
    raise AssertionError(f"{how}: no error")


async def test_transport_failures_raise_transport_failed_and_server_errors_do_not(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    url = await listen(nursery, _handle)
    with trio.fail_after(LONG):
        async with open_http_client(
            url, connection_config=client_connection_config("modern"), transport=NO_GET
        ) as client:
            status = await _fails(client, "status")
            assert type(status) is TransportFailed
            assert (status.code, status.data) == (-32603, {"httpStatus": 500})
            assert status.message.startswith("HTTP: status 500")
            hung_up = await _fails(client, "hang-up")
            assert type(hung_up) is TransportFailed
            assert hung_up.message.startswith("HTTP: ")
            # The server's own errors, even one worded as ours: McpError, as before.
            fake = await _fails(client, "fake")
            assert type(fake) is McpError
            assert (fake.code, fake.message) == (-32603, "HTTP: not ours")
            fake_in_500 = await _fails(client, "fake-in-500")
            assert type(fake_in_500) is McpError
            assert fake_in_500.message == "HTTP: not ours"
            assert await client.request("tools/call", call("echo")) == {"content": []}
            assert client.close_reason is None

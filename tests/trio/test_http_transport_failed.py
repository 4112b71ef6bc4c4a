"""A request the HTTP transport failed raises :class:`~mcp_trio.TransportFailed` (an
``McpError``: ``except McpError`` still catches it), never the server's own errors: a
JSON-RPC ``-32603`` the server sent, or its JSON-RPC error in an error status's body,
stay plain ``McpError``. A gateway's or a rate limiter's own JSON error (``{"error":
{"code": 502, ...}}``, no ``jsonrpc``) is no JSON-RPC error: ``TransportFailed`` too, its
message quoted.

A hand-written modern server (h11, loopback, port 0) answers ``server/discover``, then
``tools/call`` of the tool named ``how`` as that name says: ``500`` with no body, a
JSON-RPC ``-32603`` error that reads like ours (``200``), the same in a ``500``'s body, a
gateway's ``502`` or a rate limiter's ``429`` with a JSON error of its own, a
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
_NOT_RPC = {"gateway": (502, "Bad Gateway: upstream reset"), "limiter": (429, "slow down")}
"""A status, and the message of the JSON error of its own (no ``jsonrpc``) that comes
with it, for the tool named so."""


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
    elif how in _NOT_RPC:
        status, text = _NOT_RPC[how]
        await respond(conn, stream, status, dumps({"error": {"code": status, "message": text}}))
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


async def test_a_json_error_that_is_not_json_rpc_is_the_transports(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    # A gateway's 502 (the server unheard) or a rate limiter's 429 (heard: something of
    # the server's answered) whose body is a JSON error of its own, no "jsonrpc": no
    # JSON-RPC error came, so TransportFailed (README: "an HTTP error without a JSON-RPC
    # error in its body"), its message quoted; never a "server error" whose code is an
    # HTTP status. Mutation: the core passing it on as it came (McpError, code 502), or
    # the session marking only unheard replies -> McpError.
    url = await listen(nursery, _handle)
    with trio.fail_after(LONG):
        async with open_http_client(
            url, connection_config=client_connection_config("modern"), transport=NO_GET
        ) as client:
            for how, (status, text) in _NOT_RPC.items():
                failed = await _fails(client, how)
                assert type(failed) is TransportFailed, how
                assert (failed.code, failed.data) == (-32603, {"httpStatus": status})
                assert failed.message == f"HTTP: status {status}: {text}"
            assert await client.request("tools/call", call("echo")) == {"content": []}
            assert client.close_reason is None

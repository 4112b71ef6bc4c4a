"""Keep-alive over Streamable HTTP (legacy era): the client pings with a POST; the server
(``serve_http``) never pings, whatever its ``SessionConfig.ping_interval`` says (it may
have no stream to the client: see ``mcp_trio._keepalive``)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpClientConfig
from mcp_trio import SessionConfig
from mcp_trio._http_client import open_http_client
from mcp_trio._http_config import HttpTransportConfig

from .test_http_support import (
    IO_TIMEOUT,
    App,
    Proxy,
    call,
    client_connection_config,
    start_proxied,
    start_server,
)


async def test_a_legacy_http_client_pings_and_the_server_does_not(
    nursery: trio.Nursery, clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Mutation: no keep-alive task started -> no ping POST comes (fail_after).
    caplog.set_level(logging.DEBUG, logger="mcp_trio")
    server_config = SessionConfig(ping_interval=1, ping_timeout=1)  # (serve_http: unused)
    proxy = await start_proxied(nursery, config=server_config)
    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(), connection_config=client_connection_config("legacy"), config=config
        ) as client:
            heard = client._heard_at
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(5)  # a whole interval of silence: a ping (and, for the server, five)
            while client._heard_at == heard:  # (real sockets: the answer is on its way)
                await trio.sleep(0.001)
            await trio.testing.wait_all_tasks_blocked()
            assert not client.closed
    posts = [seen.message for seen in proxy.seen if seen.method == "POST"]
    pings = [m for m in posts if isinstance(m, dict) and m.get("method") == "ping"]
    assert len(pings) == 1
    # The client answered nothing: no request of the server's ever reached it.
    assert not [m for m in posts if isinstance(m, dict) and "method" not in m]
    assert any("ping_interval is ignored" in r.getMessage() for r in caplog.records)


async def test_a_ping_waiting_for_a_free_connection_is_ours_and_withdrawn_unannounced(
    nursery: trio.Nursery, clock: trio.testing.MockClock
) -> None:
    # Every connection carries a long tool call the server works on in silence; each
    # interval a ping waits for a free connection past its timeout. That wait is ours:
    # the session stays. The core then cancels the ping, which the server never had: no
    # notifications/cancelled POST (nor the ping) reaches it. Mutation: the wait not
    # held (attach_holds) / a held ping's timeout taken for a dead peer -> the session
    # closes, failing both calls; a cancellation of a request not yet out POSTed as
    # usual (HttpChannel.send) -> one per interval.
    app = App()
    proxy = await start_proxied(nursery, app)
    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_http_client(
            proxy.url(),
            connection_config=client_connection_config("legacy"),
            config=config,
            transport=HttpTransportConfig(max_client_connections=2),
        ) as client:
            async with trio.open_nursery() as calls:
                for _ in range(2):
                    calls.start_soon(client.request, "tools/call", call("block"))
                while len(app.started) < 2:
                    await trio.sleep(0.01)
                for _ in range(4):  # pings due, held, timed out and tried again
                    await trio.testing.wait_all_tasks_blocked()
                    clock.jump(6)
                    await trio.sleep(0.05)
                await trio.testing.wait_all_tasks_blocked()
                assert not client.closed, client.close_reason
                assert client.statistics().waiting_requests == 2
                app.release.set()
            assert not client.closed
    methods = [seen.rpc_method for seen in proxy.seen if seen.method == "POST"]
    assert "tools/call" in methods
    assert "notifications/cancelled" not in methods
    assert "ping" not in methods


_BOUND = 16 * 1024
"""The client's ``HttpClientConfig.max_body_size`` in the gateway tests."""


class _Gateway(Proxy):
    """A gateway whose backend died: it takes each POST and answers ``502`` (or closes
    the connection without an answer); a GET gets ``405``."""

    def __init__(self, target: int, mode: str) -> None:
        super().__init__(target)
        self.mode = mode
        self.dead = False

    async def _forward(self, client: trio.SocketStream) -> None:
        if not self.dead:
            await super()._forward(client)
            return
        data = await client.receive_some(65536)
        if data.startswith(b"GET "):
            await client.send_all(
                b"HTTP/1.1 405 Method Not Allowed\r\nallow: POST, DELETE\r\n"
                b"content-length: 0\r\nconnection: close\r\n\r\n"
            )
        elif self.mode == "502":
            await client.send_all(
                b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/html\r\n"
                b"content-length: 11\r\nconnection: close\r\n\r\n<p>down</p>"
            )
        elif self.mode == "503":
            await client.send_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n"
                b"connection: close\r\n\r\n"
            )
        elif self.mode == "json-503":
            # A gateway's own JSON error (no "jsonrpc", no "id"): not the server's words.
            body = b'{"error": {"code": 503, "message": "unavailable", "status": "UNAVAILABLE"}}'
            await client.send_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
        elif self.mode == "429":
            # The server's HTTP layer refusing, for a while: something of it answered.
            await client.send_all(
                b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\n"
                b"content-length: 0\r\nconnection: close\r\n\r\n"
            )
        elif self.mode == "rpc-503" and data.startswith(b"POST "):
            # The server's own JSON-RPC error, with a 5xx (a DELETE gets nothing).
            while not data.rstrip().endswith(b"}") and (more := await client.receive_some(65536)):
                data += more
            rid = loads(data.partition(b"\r\n\r\n")[2]).get("id")
            body = dumps(
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": "busy"}}
            )
            await client.send_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
        elif self.mode == "oversize":
            # A whole 200 answer of the server's, past the client's max_body_size.
            body = b"[" + b" " * _BOUND + b"]"
            await client.send_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
        # "drop": closed without an answer, after the POST was written


@pytest.mark.parametrize(
    ("mode", "heard"),
    [
        ("drop", False),
        ("502", False),
        ("503", False),
        ("json-503", False),
        ("rpc-503", True),
        ("429", True),
        ("oversize", True),
    ],
)
async def test_whose_words_a_failed_answer_to_the_ping_is(
    nursery: trio.Nursery, clock: trio.testing.MockClock, mode: str, heard: bool
) -> None:
    # Not heard: the client's own -32603 "HTTP: ..." error (mcp_trio._channel.LocalReply)
    # for a connection dropped after the POST, and the error ClientResponse makes (or
    # passes on) for a 5xx without a JSON-RPC error response (ClientResponse.unheard):
    # the ping failed, the session ends. Heard: a 503 whose body is the server's JSON-RPC
    # error for the ping (busy, but alive), and a refusal below 500 (a 429 with no body):
    # the session stays, and so does a whole 200 answer past max_body_size (the caller's
    # error is the client's, the words were the server's). Mutation: a LocalReply
    # counted as an answer or stored in
    # _heard_at; unheard left empty, or the binding not wrapping those errors -> the
    # session never ends; every message of an error status taken for the channel's own,
    # or a 4xx without a JSON-RPC body unheard, or an over-size body (the old rule) ->
    # it closes.
    server = await start_server(nursery)
    gateway = _Gateway(server.port, mode)
    await gateway.start(nursery)
    config = SessionConfig(ping_interval=5, ping_timeout=5)
    with trio.fail_after(1000):
        async with open_http_client(
            gateway.url(),
            connection_config=client_connection_config("legacy"),
            config=config,
            http_config=HttpClientConfig(max_body_size=_BOUND),
        ) as client:
            gateway.dead = True
            for scope in list(gateway.scopes):
                scope.cancel()  # (its connections to the backend go with it)
            before = client._heard_at
            for _ in range(3):
                await trio.testing.wait_all_tasks_blocked()
                clock.jump(5)
                await trio.sleep(0.05)
            await trio.testing.wait_all_tasks_blocked()
            if heard:
                assert client._heard_at > before
                assert not client.closed, client.close_reason
            else:
                assert client._heard_at == before
                assert client.closed
                reason = str(client.close_reason)
                assert "a ping failed" in reason
                assert "connection failure" in reason


async def test_a_request_that_waited_for_a_connection_is_cancelled_once_it_is_out(
    nursery: trio.Nursery,
) -> None:
    # The withdrawal above is only for a request not yet out: one that waited for the
    # only connection, then went out, is cancelled with notifications/cancelled as
    # usual. Mutation: the stream not marked out before its POST (_exchange) -> that
    # cancellation is withheld.
    app = App()
    proxy = await start_proxied(nursery, app)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            proxy.url(),
            connection_config=client_connection_config("legacy"),
            transport=HttpTransportConfig(max_client_connections=1),
        ) as client:
            scopes = [trio.CancelScope(), trio.CancelScope()]

            async def blocked(scope: trio.CancelScope) -> None:
                with scope:
                    await client.request("tools/call", call("block"))

            async with trio.open_nursery() as calls:
                for scope in scopes:
                    calls.start_soon(blocked, scope)
                    while len(app.started) < 1:
                        await trio.sleep(0.01)
                await trio.testing.wait_all_tasks_blocked()
                scopes[0].cancel()  # (frees the connection: the second goes out)
                while len(app.started) < 2:
                    await trio.sleep(0.01)
                scopes[1].cancel()
                while len(app.cancelled) < 2:
                    await trio.sleep(0.01)
    methods = [seen.rpc_method for seen in proxy.seen if seen.method == "POST"]
    assert methods.count("notifications/cancelled") == 2

"""``ctx.headers``: the HTTP request's header fields, read-only, in both eras over
Streamable HTTP; over WebSocket the opening handshake's (which were ``None``, though
the handshake is an HTTP request with headers); ``None`` on stdio and in memory."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from mcp_trio import Context, StreamChannel, open_client
from mcp_trio._server import Server

from .test_http_support import RawConnection, modern


def make_server() -> Server:
    server = Server("headers")

    @server.tool()
    async def tenant(ctx: Context) -> dict[str, Any]:
        headers = ctx.headers
        if headers is None:
            return {"headers": None}
        return {
            "tenant": headers.get("X-Tenant"),
            "exact": headers["x-tenant"],
            "upper": headers["X-TENANT"],
            "has": "x-TeNaNt" in headers,
            "absent": headers.get("x-absent"),
            "odd_key": headers.get(7),  # type: ignore[call-overload]
            "names": [name for name in headers if name.startswith("x-")],
            "count": len(headers) == len(set(headers)),
        }

    return server


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_tool_reads_the_request_headers_over_http(era: str) -> None:
    server = make_server()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            async with open_client(
                handle.url,
                era=era,  # type: ignore[arg-type]
                headers={"X-Tenant": "acme", "X-Other": "1"},
            ) as client:
                result = await client.call_tool("tenant")
            nursery.cancel_scope.cancel()
    assert result.structured_content == TENANT


async def test_each_request_of_a_kept_alive_connection_has_its_own_headers() -> None:
    # (the head is taken as each request is read: the second is not given the first's)
    server = make_server()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, port=0))
            conn = await RawConnection.open(handle.port)
            tenants = []
            for rid, tenant in enumerate(["acme", "globex"]):
                headers, body = modern(rid, "tenant")
                repeated = (("x-tenant", tenant), ("X-Tenant", "eu"))
                await conn.send("POST", headers=(*headers, *repeated), body=body)
                response = await conn.response()
                conn.next_cycle()
                tenants.append(response.json()["result"]["structuredContent"]["tenant"])
            await conn.aclose()
            nursery.cancel_scope.cancel()
    assert tenants == ["acme, eu", "globex, eu"]  # (a repeated field: joined, in order)


TENANT = {
    "tenant": "acme",
    "exact": "acme",
    "upper": "acme",
    "has": True,
    "absent": None,
    "odd_key": None,
    "names": ["x-tenant", "x-other"],
    "count": True,
}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_tool_reads_the_handshake_headers_over_websocket(era: str) -> None:
    server = make_server()

    @server.tool()
    async def handshake(ctx: Context) -> dict[str, Any]:
        assert ctx.headers is not None
        return {name: ctx.headers[name] for name in ("host", "authorization", "upgrade")}

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_websocket, port=0))
            host = f"127.0.0.1:{handle.port}"
            async with open_client(
                handle.url,
                era=era,  # type: ignore[arg-type]
                headers={"X-Tenant": "acme", "X-Other": "1", "Authorization": "Bearer t"},
            ) as client:
                first = await client.call_tool("tenant")
                again = await client.call_tool("tenant")  # (each request: the same head)
                seen = await client.call_tool("handshake")
            nursery.cancel_scope.cancel()
    assert first.structured_content == again.structured_content == TENANT
    seen_headers = dict(seen.structured_content or {})
    # (The upgrade token is case-insensitive, RFC 9110 §7.8; wsproto's spelling varies by version.)
    assert str(seen_headers.pop("upgrade")).lower() == "websocket"
    assert seen_headers == {
        "host": host,
        "authorization": "Bearer t",  # (what an authenticate hook sees, as over HTTP)
    }


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_no_headers_on_stdio_or_in_memory(era: str) -> None:
    server = make_server()
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    with trio.fail_after(10):
        async with open_client(server, era=era) as client:  # type: ignore[arg-type]
            in_memory = await client.call_tool("tenant")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(server.serve_stdio, stdin=stdin, stdout=stdout))
            channel = StreamChannel(to_server, from_server)
            async with open_client(channel, era=era) as client:  # type: ignore[arg-type]
                stdio = await client.call_tool("tenant")
    assert in_memory.structured_content == stdio.structured_content == {"headers": None}

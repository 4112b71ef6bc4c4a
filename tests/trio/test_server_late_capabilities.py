"""A server that gains a kind of item after it started serving declares it to the
clients that come afterwards, in both eras and over every transport: its capabilities
are read when they are declared (``ConnectionConfig.capabilities_source``), not fixed
when ``serve_*`` starts. A legacy session already open keeps what its ``initialize``
told it (lifecycle.mdx)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import ErrorCode, LineSplitter, LocalProtocolError
from mcp_sansio._json import dumps, loads
from mcp_trio import open_client
from mcp_trio._server import Server

from .test_server import connect

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


def late() -> str:
    """Registered after serving started."""
    return "late"


async def test_tools_added_after_serve_http_started_are_declared_to_new_clients() -> None:
    server = Server("late")

    @server.prompt()
    def hello(name: str) -> str:
        return f"hello {name}"

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(server.serve_http, "127.0.0.1", 0)
            async with open_client(handle.url, era="legacy") as before:
                assert before.server_capabilities.tools is None
                server.add_tool(late)
                for era in ("legacy", "modern"):
                    async with open_client(handle.url, era=era) as after:
                        assert after.server_capabilities.tools is not None, era
                        assert [t.name for t in await after.list_tools()] == ["late"]
                        assert (await after.call_tool("late", {})).structured_content == {
                            "result": "late"
                        }
                # The session opened before keeps what it was told.
                assert before.server_capabilities.tools is None
                with pytest.raises(LocalProtocolError, match="'tools' capability"):
                    await before.list_tools()
                assert [p.name for p in await before.list_prompts()] == ["hello"]
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_capabilities_follow_registrations_between_sessions(era: str) -> None:
    server = Server("grows")
    async with connect(server, era) as client:
        assert client.handshake is not None
        assert "tools" not in client.handshake.peer_capabilities
    server.add_tool(late)
    async with connect(server, era) as client:
        assert client.handshake is not None
        assert client.handshake.peer_capabilities["tools"] == {"listChanged": True}
    server.remove_tool("late")
    async with connect(server, era) as client:
        assert client.handshake is not None
        assert "tools" not in client.handshake.peer_capabilities


async def test_a_modern_stdio_channel_sees_what_was_registered_since_it_opened() -> None:
    """Over one modern channel (stdio here; WebSocket and memory alike) each request is
    judged by the capabilities of now: after the tool is added, ``server/discover``
    declares ``tools`` and ``tools/list`` is served, where it was -32601 before."""
    server = Server("channel")
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    splitter = LineSplitter()

    async def ask(rid: int, method: str) -> dict[str, Any]:
        params = {"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}}
        await to_server.send_all(
            dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"
        )
        while (line := splitter.next_message()) is None:
            splitter.feed(await from_server.receive_some())
        assert isinstance(line, bytes)
        answer: dict[str, Any] = loads(line)
        assert answer["id"] == rid
        return answer

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: server.serve_stdio(stdin=stdin, stdout=stdout))
            assert "tools" not in (await ask(1, "server/discover"))["result"]["capabilities"]
            assert (await ask(2, "tools/list"))["error"]["code"] == ErrorCode.METHOD_NOT_FOUND
            server.add_tool(late)
            discovered = await ask(3, "server/discover")
            assert discovered["result"]["capabilities"]["tools"] == {"listChanged": True}
            listed = await ask(4, "tools/list")
            assert [tool["name"] for tool in listed["result"]["tools"]] == ["late"]
            await to_server.aclose()


async def test_a_modern_listen_is_honoured_by_what_is_registered_now() -> None:
    # A listen for prompt-list changes, opened after the server's first prompt was added
    # while it served: the acknowledgment honours it (the capabilities of now).
    server = Server("late listen")
    server.add_tool(late)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(server.serve_http, "127.0.0.1", 0)

            @server.prompt()
            def hello(name: str) -> str:
                return f"hello {name}"

            async with (
                open_client(handle.url, era="modern") as client,
                client.subscribe(tools=True, prompts=True) as sub,
            ):
                assert sub.honored.get("promptsListChanged") is True, sub.honored
                assert sub.honored.get("toolsListChanged") is True, sub.honored
            nursery.cancel_scope.cancel()


async def test_skills_declared_after_serving_started_reach_new_clients() -> None:
    # declare_skills() after the capabilities were computed (a client came before):
    # the next client is told of the extension.
    server = Server("skills later")
    server.add_tool(late)
    async with connect(server, "modern") as client:
        assert client.handshake is not None
        before = client.handshake.peer_capabilities
    server.declare_skills()
    async with connect(server, "modern") as client:
        assert client.handshake is not None
        after = client.handshake.peer_capabilities
    assert after != before and "resources" in after, after

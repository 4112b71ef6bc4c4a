"""Every server feature group, over every transport, in both eras.

The fixture server of the conformance suite (examples/conformance/server.py) is served
in memory, over stdio (a real subprocess running ``mcp-trio run``), over Streamable HTTP
and over WebSocket (real sockets on 127.0.0.1), and driven through ``open_client``.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_trio import Client, McpError, Server, open_client

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "examples" / "conformance" / "server.py"
TRANSPORTS = ["memory", "stdio", "http", "ws"]


def load_server() -> Server:
    value = runpy.run_path(str(FIXTURES))["server"]
    assert isinstance(value, Server)
    return value


@asynccontextmanager
async def connect(transport: str, era: str, **options: Any) -> AsyncIterator[Client]:
    server = load_server()
    async with trio.open_nursery() as nursery:
        if transport == "memory":
            target: Any = server
        elif transport == "stdio":
            target = [sys.executable, "-m", "mcp_trio", "run", str(FIXTURES)]
        elif transport == "http":
            handle = await nursery.start(
                lambda task_status: server.serve_http("127.0.0.1", 0, task_status=task_status)
            )
            target = f"http://127.0.0.1:{handle.port}/mcp"
        else:
            handle = await nursery.start(
                lambda task_status: server.serve_websocket("127.0.0.1", 0, task_status=task_status)
            )
            target = handle.url
        async with open_client(target, era=era, **options) as client:  # type: ignore[arg-type]
            yield client
        nursery.cancel_scope.cancel()


async def accept(params: Any) -> dict[str, Any]:
    schema = params.requested_schema.properties or {}
    values = {"name": "Alice", "ok": True, "context": "c", "username": "u", "email": "e@x"}
    return {"action": "accept", "content": {k: values[k] for k in schema if k in values}}


async def sample(params: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "test-model",
        "stopReason": "endTurn",
    }


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools(transport: str, era: str) -> None:
    with trio.fail_after(30):
        async with connect(transport, era) as client:
            names = [tool.name for tool in await client.list_tools()]
            assert names[:2] == ["test_simple_text", "test_image_content"]  # registration order
            out = await client.call_tool("test_simple_text")
            assert out.text == "This is a simple text response for testing."
            assert (await client.call_tool("test_error_handling")).is_error
            mixed = await client.call_tool("test_multiple_content_types")
            assert [block.type for block in mixed.content] == ["text", "image", "resource"]
            seen: list[float] = []

            async def progress(event: Any) -> None:
                seen.append(event.progress)

            done = await client.call_tool("test_tool_with_progress", on_progress=progress)
            assert done.text == "Progress complete"
            assert seen == [0, 50, 100]
            bad = await client.call_tool("test_sampling", {"prompt": 5})
            assert bad.is_error  # validated before the handler runs
            with pytest.raises(McpError) as unknown:
                await client.call_tool("no_such_tool")
            assert unknown.value.code == -32602


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_resources_prompts_completion(transport: str, era: str) -> None:
    with trio.fail_after(30):
        async with connect(transport, era) as client:
            uris = [resource.uri for resource in await client.list_resources()]
            assert "test://static-text" in uris
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
            binary = await client.read_resource("test://static-binary")
            assert binary.contents[0].blob  # type: ignore[union-attr]
            data = await client.read_resource("test://template/42/data")
            assert "42" in data.contents[0].text  # type: ignore[union-attr]
            with pytest.raises(McpError) as missing:
                await client.read_resource("test://missing")
            assert missing.value.code == (-32002 if era == "legacy" else -32602)
            prompt = await client.get_prompt(
                "test_prompt_with_arguments", {"arg1": "a1", "arg2": "a2"}
            )
            assert "a1" in str(prompt.messages) and "a2" in str(prompt.messages)
            completion = await client.complete(
                {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "pa"
            )
            assert completion.values == ["paris", "park", "party"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_asking_the_client(transport: str, era: str) -> None:
    with trio.fail_after(30):
        async with connect(transport, era, on_elicitation=accept, on_sampling=sample) as client:
            out = await client.call_tool("test_sampling", {"prompt": "capital?"})
            assert "Paris" in out.text
            out = await client.call_tool("test_elicitation", {"message": "who?"})
            assert "accept" in out.text
            if era == "modern":
                out = await client.call_tool("test_input_required_result_multi_round")
                assert "state-ok" in out.text

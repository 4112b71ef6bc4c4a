"""The conformance fixture server, in memory, in both eras (the suite itself runs over HTTP)."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from mcp_trio import McpError, Server
from mcp_trio.testing import client_for

SERVER = Path(__file__).resolve().parents[2] / "examples" / "conformance" / "server.py"


@pytest.fixture
def server() -> Server:
    namespace = runpy.run_path(str(SERVER))
    value = namespace["server"]
    assert isinstance(value, Server)
    return value


async def accept(params: Any) -> dict[str, Any]:
    schema = params.requested_schema.properties or {}
    values = {"name": "Alice", "ok": True, "context": "c", "username": "u", "email": "e@x"}
    return {"action": "accept", "content": {k: values[k] for k in schema}}


async def sample(params: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "test-model",
        "stopReason": "endTurn",
    }


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_content_tools(server: Server, era: str) -> None:
    async with client_for(server, era=era) as client:  # type: ignore[arg-type]
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert all(tool.description for tool in tools.values())
        schema = tools["json_schema_2020_12_tool"].input_schema
        assert schema["$defs"]["address"]["$anchor"] == "addressDef"
        assert "if" in schema and "allOf" in schema
        out = await client.call_tool("test_simple_text")
        assert out.text == "This is a simple text response for testing."
        out = await client.call_tool("test_error_handling")
        assert out.is_error
        out = await client.call_tool("test_multiple_content_types")
        assert [block.type for block in out.content] == ["text", "image", "resource"]
        out = await client.call_tool("json_schema_2020_12_tool", {"name": "x", "email": "e"})
        assert not out.is_error
        seen: list[float] = []

        async def progress(event: Any) -> None:
            seen.append(event.progress)

        await client.call_tool("test_tool_with_progress", on_progress=progress)
        assert seen == [0, 50, 100]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_resources_prompts_completion(server: Server, era: str) -> None:
    async with client_for(server, era=era) as client:  # type: ignore[arg-type]
        text = await client.read_resource("test://static-text")
        assert text.contents[0].text == "This is the content of the static text resource."  # type: ignore[union-attr]
        data = await client.read_resource("test://template/123/data")
        assert "123" in data.contents[0].text  # type: ignore[union-attr]
        with pytest.raises(McpError) as info:
            await client.read_resource("test://nope")
        assert info.value.code == (-32002 if era == "legacy" else -32602)
        prompt = await client.get_prompt(
            "test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"}
        )
        assert "testValue1" in str(prompt.messages)
        done = await client.complete(
            {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "arg1", "par"
        )
        assert done.values == ["paris", "park", "party"]


async def test_input_required_fixtures_modern(server: Server) -> None:
    async with client_for(
        server, era="modern", on_elicitation=accept, on_sampling=sample, roots=["file:///r"]
    ) as client:
        for name in (
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities",
        ):
            out = await client.call_tool(name)
            assert not out.is_error, (name, out.text)
        assert "Alice" in (await client.call_tool("test_input_required_result_elicitation")).text
        prompt = await client.get_prompt("test_input_required_result_prompt")
        assert prompt.messages


async def test_legacy_sampling_and_elicitation(server: Server) -> None:
    async with client_for(
        server, era="legacy", on_elicitation=accept, on_sampling=sample
    ) as client:
        out = await client.call_tool("test_sampling", {"prompt": "capital?"})
        assert "Paris" in out.text
        out = await client.call_tool("test_elicitation", {"message": "who?"})
        assert "accept" in out.text


async def test_missing_capability_is_32021(server: Server) -> None:
    async with client_for(server, era="modern") as client:
        with pytest.raises(McpError) as info:
            await client.call_tool("test_missing_capability")
        assert info.value.code == -32021


async def test_legacy_titled_enums_reach_the_client(server: Server) -> None:
    asked: list[Any] = []

    async def record(params: Any) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {}}

    async with client_for(server, era="legacy", on_elicitation=record) as client:
        out = await client.call_tool("test_elicitation_sep1330_enums")
    assert not out.is_error, out.text
    (params,) = asked
    legacy = params.requested_schema.properties["legacyEnum"]
    assert list(legacy.enum_names) == ["Option One", "Option Two", "Option Three"]

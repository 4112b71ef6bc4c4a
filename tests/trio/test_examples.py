"""``examples/notes_server.py``: every tool, resource, prompt and completion, in both eras.

The example is loaded from its file, as ``mcp-trio run`` would; each test gets a fresh
server (``create_server()``: a new store of the seed notes) and a client in memory.
The ``autojump_clock`` makes ``summarize_notes``'s pauses take no real time (pytest-trio
uses the clock a test asks for itself, not one a fixture asks for).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import Era, ErrorCode, ProgressReceived
from mcp_sansio import types as t
from mcp_trio import Client, McpError, Server
from mcp_trio.testing import ERAS, client_for

EraName = Literal["legacy", "modern"]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "notes_server.py"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notes_server_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


notes_example = _load_example()


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> EraName:
    return cast(EraName, request.param)


@pytest.fixture
def server() -> Server:
    made: Server = notes_example.create_server()
    return made


@pytest.fixture
async def client(server: Server, era: EraName) -> AsyncGenerator[Client]:
    async with client_for(server, era=era) as connected:
        yield connected


ElicitationAnswer = Callable[[Any], Any]


def answering(action: str, content: dict[str, Any] | None = None) -> ElicitationAnswer:
    """An ``on_elicitation`` callback that records the question and gives one answer."""
    asked: list[Any] = []

    async def on_elicitation(params: Any) -> dict[str, Any]:
        asked.append(params)
        return {"action": action} if content is None else {"action": action, "content": content}

    on_elicitation.asked = asked  # type: ignore[attr-defined]
    return on_elicitation


# ---------------------------------------------------------------------- the module


def test_the_module_exposes_a_server() -> None:
    assert isinstance(notes_example.server, Server)
    assert notes_example.server.name == "notes"


async def test_it_connects_in_each_era(client: Client, era: EraName) -> None:
    assert client.era is Era(era)
    info = client.server_info
    assert info is not None and (info.name, info.title) == ("notes", "Notes")
    assert client.instructions and "notes://note/{id}" in client.instructions


async def test_tools_are_listed_with_schemas(client: Client) -> None:
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert set(tools) == {"add_note", "search_notes", "summarize_notes", "delete_note"}
    add = tools["add_note"].input_schema
    assert add["required"] == ["title", "body"]
    assert add["properties"]["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": 'labels to find it by, e.g. ["work", "ideas"].',
        "default": [],
    }
    search = tools["search_notes"]
    assert search.input_schema["properties"]["limit"]["maximum"] == 50
    assert search.output_schema is not None
    assert set(search.output_schema["properties"]) == {"query", "total", "hits"}
    assert tools["summarize_notes"].output_schema is None
    delete = tools["delete_note"]
    assert delete.annotations is not None and delete.annotations.destructive_hint is True


# ---------------------------------------------------------------------- tools


async def test_add_note_returns_the_note(client: Client) -> None:
    added = await client.call_tool(
        "add_note", {"title": " Trio tips ", "body": "Open a nursery.", "tags": ["Trio", "trio"]}
    )
    assert not added.is_error
    assert added.structured_content == {
        "id": 5,
        "title": "Trio tips",
        "body": "Open a nursery.",
        "tags": ["trio"],
    }
    found = await client.call_tool("search_notes", {"query": "nursery"})
    assert [hit["id"] for hit in found.structured_content["hits"]] == [1, 5]


async def test_add_note_logs(server: Server, era: EraName, autojump_clock: MockClock) -> None:
    logs: list[t.LoggingMessageNotificationParams] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with client_for(server, era=era, on_log=on_log) as client:
        await client.call_tool("add_note", {"title": "x", "body": "y"})
    assert [(log.level, log.data) for log in logs] == [("info", "added note 5: x")]


async def test_add_note_checks_its_arguments(client: Client) -> None:
    missing = await client.call_tool("add_note", {"title": "no body"})
    assert missing.is_error and "body" in missing.text
    empty = await client.call_tool("add_note", {"title": "", "body": "b"})
    assert empty.is_error


async def test_search_notes_is_structured_and_limited(client: Client) -> None:
    found = await client.call_tool("search_notes", {"query": "python", "limit": 1})
    assert found.structured_content == {
        "query": "python",
        "total": 2,
        "hits": [
            {
                "id": 1,
                "title": "Structured concurrency",
                "tags": ["trio", "python"],
                "snippet": "Every task lives inside a nursery, so no task outlives the…",
                "uri": "notes://note/1",
            }
        ],
    }
    every_word = await client.call_tool("search_notes", {"query": "sockets clocks"})
    assert [hit["title"] for hit in every_word.structured_content["hits"]] == ["Sans-IO"]
    nothing = await client.call_tool("search_notes", {"query": "zebra"})
    assert nothing.structured_content == {"query": "zebra", "total": 0, "hits": []}
    too_many = await client.call_tool("search_notes", {"query": "x", "limit": 51})
    assert too_many.is_error


async def test_summarize_notes_reports_progress(client: Client, autojump_clock: MockClock) -> None:
    events: list[ProgressReceived] = []

    async def on_progress(event: ProgressReceived) -> None:
        events.append(event)

    summary = await client.call_tool("summarize_notes", {}, on_progress=on_progress)
    assert summary.text.splitlines()[0] == "4 notes, tags: home, mcp, python, trio"
    assert summary.structured_content is None
    assert [(e.progress, e.total) for e in events] == [(i, 4) for i in range(5)]
    assert events[0].message == "reading 'Structured concurrency'"
    assert events[-1].message == "done"


async def test_summarize_notes_by_tag(client: Client, autojump_clock: MockClock) -> None:
    tagged = await client.call_tool("summarize_notes", {"tag": "PYTHON"})
    assert tagged.text.splitlines() == [
        "2 notes, tags: mcp, python, trio",
        "- #1 Structured concurrency: Every task lives inside a nursery, so no task "
        "outlives the block that started it.",
        "- #4 Sans-IO: Keep the protocol logic free of sockets and clocks: bytes in, events out.",
    ]
    none = await client.call_tool("summarize_notes", {"tag": "nope"})
    assert none.text == "No notes tagged 'nope'."


async def test_summarize_an_empty_store(era: EraName, autojump_clock: MockClock) -> None:
    empty = notes_example.create_server(notes_example.NoteStore(seed=()))
    async with client_for(empty, era=era) as client:
        assert (await client.call_tool("summarize_notes", {})).text == "No notes."


async def test_delete_note_asks_the_user(server: Server, era: EraName) -> None:
    yes = answering("accept", {"delete": True})
    async with client_for(server, era=era, on_elicitation=yes) as client:
        deleted = await client.call_tool("delete_note", {"note_id": 3})
        assert deleted.text == "Deleted note 3, 'Groceries'."
        (question,) = yes.asked  # type: ignore[attr-defined]
        assert question.message == "Delete note 3, 'Groceries'?"
        assert set(question.requested_schema.properties) == {"delete"}
        gone = await client.call_tool("delete_note", {"note_id": 3})
        assert gone.is_error and gone.text == "There is no note 3."


@pytest.mark.parametrize(
    ("action", "content", "expected"),
    [
        ("accept", {"delete": False}, "Kept note 2: the user said no."),
        ("decline", None, "Kept note 2: the user declined."),
        ("cancel", None, "Kept note 2: the user cancelled."),
    ],
)
async def test_delete_note_keeps_the_note_unless_confirmed(
    server: Server, era: EraName, action: str, content: dict[str, Any] | None, expected: str
) -> None:
    async with client_for(server, era=era, on_elicitation=answering(action, content)) as client:
        kept = await client.call_tool("delete_note", {"note_id": 2})
        assert (kept.is_error, kept.text) == (False, expected)
        read = await client.read_resource("notes://note/2")
        assert isinstance(read.contents[0], t.TextResourceContents)


async def test_delete_note_without_elicitation_needs_confirm(client: Client) -> None:
    refused = await client.call_tool("delete_note", {"note_id": 1})
    assert refused.is_error and "confirm=true" in refused.text
    confirmed = await client.call_tool("delete_note", {"note_id": 1, "confirm": True})
    assert confirmed.text == "Deleted note 1, 'Structured concurrency'."
    index = await client.read_resource("notes://index")
    assert "[1]" not in _text(index)


# ---------------------------------------------------------------------- resources


def _text(result: t.ReadResourceResult) -> str:
    (contents,) = result.contents
    assert isinstance(contents, t.TextResourceContents)
    assert contents.mime_type == "text/markdown"
    return contents.text


async def test_resources_and_templates_are_listed(client: Client) -> None:
    (index,) = await client.list_resources()
    assert (index.uri, index.name, index.mime_type) == ("notes://index", "index", "text/markdown")
    (template,) = await client.list_resource_templates()
    assert (template.uri_template, template.name) == ("notes://note/{id}", "note")


async def test_read_the_index(client: Client) -> None:
    assert _text(await client.read_resource("notes://index")) == (
        "# Notes\n\n"
        "- [1] Structured concurrency #trio #python\n"
        "- [2] MCP in one paragraph #mcp\n"
        "- [3] Groceries #home\n"
        "- [4] Sans-IO #python #mcp\n"
    )


async def test_read_a_note_through_the_template(client: Client) -> None:
    assert _text(await client.read_resource("notes://note/3")) == (
        "# Groceries\n\nOat milk, coffee beans, two lemons, rye bread.\n\n#home\n"
    )


@pytest.mark.parametrize("uri", ["notes://note/99", "notes://note/abc", "notes://other"])
async def test_a_missing_note_is_not_found(client: Client, era: EraName, uri: str) -> None:
    with pytest.raises(McpError) as caught:
        await client.read_resource(uri)
    assert caught.value.code in (ErrorCode.RESOURCE_NOT_FOUND, ErrorCode.INVALID_PARAMS)


async def test_changes_are_announced_to_subscribers(client: Client) -> None:
    with trio.fail_after(5):
        async with client.subscribe(resources=["notes://index", "notes://note/2"]) as updates:
            await client.call_tool("add_note", {"title": "x", "body": "y"})
            first = await updates.receive()
            assert first.method == "notifications/resources/updated"
            assert first.params is not None and first.params["uri"] == "notes://index"
            await client.call_tool("delete_note", {"note_id": 2, "confirm": True})
            seen = set()
            for _ in range(2):
                params = (await updates.receive()).params
                assert params is not None
                seen.add(params["uri"])
            assert seen == {"notes://index", "notes://note/2"}


# ---------------------------------------------------------------------- prompts


async def test_the_prompt_is_listed(client: Client) -> None:
    (prompt,) = await client.list_prompts()
    assert (prompt.name, prompt.title) == ("review_note", "Review a note")
    assert prompt.arguments is not None
    (argument,) = prompt.arguments
    assert (argument.name, argument.required) == ("note_id", True)


async def test_review_note_embeds_the_note(client: Client) -> None:
    result = await client.get_prompt("review_note", {"note_id": "4"})
    first, second = result.messages
    assert first.role == second.role == "user"
    assert isinstance(first.content, t.EmbeddedResource)
    embedded = first.content.resource
    assert isinstance(embedded, t.TextResourceContents)
    assert embedded.uri == "notes://note/4" and embedded.text.startswith("# Sans-IO")
    assert isinstance(second.content, t.TextContent)
    assert "better title" in second.content.text


@pytest.mark.parametrize("arguments", [{"note_id": "99"}, {"note_id": "x"}, {}])
async def test_review_note_needs_a_real_note(client: Client, arguments: dict[str, str]) -> None:
    with pytest.raises(McpError) as caught:
        await client.get_prompt("review_note", arguments)
    assert caught.value.code == ErrorCode.INVALID_PARAMS


# ---------------------------------------------------------------------- completion


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("", ["1", "2", "3", "4"]), ("3", ["3"]), ("SANS", ["4"]), ("con", ["1"]), ("zz", [])],
)
async def test_note_ids_complete_the_prompt_argument(
    client: Client, typed: str, expected: list[str]
) -> None:
    completion = await client.complete(t.PromptReference(name="review_note"), "note_id", typed)
    assert completion.values == expected


async def test_note_ids_complete_the_template_variable(client: Client) -> None:
    ref = t.ResourceTemplateReference(uri="notes://note/{id}")
    assert (await client.complete(ref, "id", "gro")).values == ["3"]

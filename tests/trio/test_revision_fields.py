"""A legacy session is sent only the fields its revision defines (lifecycle.mdx: "MUST
respect the negotiated protocol version"): no ``title`` before 2025-06-18, no ``icons``
before 2025-11-25, no tool ``annotations`` before 2025-03-26, no ``lastModified`` or
``_meta`` on what a server describes before 2025-06-18, no ``completions`` capability
before 2025-03-26. Every message the server sends validates against its revision's
schema with no property the schema does not define."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
import trio

from mcp_sansio import LEGACY_VERSIONS
from mcp_sansio._json import loads
from mcp_trio import Audio, EmbeddedResource, Image, ResourceLink, Session, ToolResult
from mcp_trio._server import Server

from ..schema import validate_message

ICONS = [{"src": "https://example.com/i.png", "mimeType": "image/png"}]
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
LATER = {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}
META = {"com.example/k": 1}


def rich_server() -> Server:
    """A server that uses every field some legacy revision lacks."""
    server = Server("rich", "1", title="Rich", website_url="https://example.com", icons=ICONS)

    @server.tool(
        title="Fancy",
        icons=ICONS,
        annotations={"readOnlyHint": True, "title": "Fancy A"},
        meta=META,
    )
    async def fancy(n: int) -> int:
        """Has every descriptor field."""
        return n

    @server.tool(output_schema=False)
    async def media() -> list[Any]:
        """Every content type, with annotations and _meta."""
        return [
            {"type": "text", "text": "t", "annotations": LATER, "_meta": META},
            Image(PNG, "image/png", annotations=LATER),
            Audio(b"RIFF....WAVEfmt ", "audio/wav", annotations=LATER),
            ResourceLink("mem://static", "static", title="Static"),
            {"type": "resource_link", "uri": "mem://s", "name": "s", "icons": ICONS},
            EmbeddedResource("mem://x", "hi", "text/plain", annotations=LATER),
            {
                "type": "resource",
                "resource": {"uri": "mem://y", "text": "y", "_meta": META},
                "_meta": META,
            },
        ]

    @server.tool()
    async def meta_result() -> ToolResult:
        """A result with _meta (every revision has it)."""
        return ToolResult("x", meta=META)

    @server.resource(
        "mem://static",
        mime_type="text/plain",
        title="Static",
        icons=ICONS,
        annotations=LATER,
        meta=META,
    )
    async def static() -> str:
        """Static."""
        return "hello"

    @server.resource("mem://typed")
    async def typed() -> Any:
        """Contents with _meta."""
        from mcp_sansio.types import TextResourceContents  # noqa: PLC0415

        return TextResourceContents(uri="mem://typed", text="t", meta=META)

    @server.resource(
        "mem://t/{id}", mime_type="text/plain", title="Tmpl", icons=ICONS, annotations=LATER
    )
    async def tmpl(id: str) -> str:
        """T."""
        return id

    @server.prompt(title="Greet", icons=ICONS, meta=META)
    async def greet(name: str) -> list[Any]:
        """Greets."""
        return [
            Audio(b"RIFF....WAVEfmt ", "audio/wav"),
            {"type": "resource_link", "uri": "mem://s", "name": "s", "icons": ICONS},
            "hi " + name,
        ]

    return server


@asynccontextmanager
async def recorded(server: Server, version: str) -> AsyncGenerator[tuple[Session, list[Any]]]:
    """A legacy client pinned to ``version``, and every message it read from the
    server, from the ``initialize`` result on."""
    read: list[Any] = []
    with trio.fail_after(10):
        async with server.connect_in_memory(
            era="legacy",
            supported_versions=(version,),
            implementation={"name": "c", "version": "1"},
            start=False,
        ) as client:
            conn = client.connection
            receive = conn.receive_message

            def recording(data: Any, **kwargs: Any) -> Any:
                decoded = kwargs.get("decoded")
                read.append(loads(data) if decoded is None else decoded)
                return receive(data, **kwargs)

            conn.receive_message = recording  # type: ignore[method-assign]
            await client.start()
            yield client, read


WORK: list[tuple[str, dict[str, Any]]] = [
    ("tools/list", {}),
    ("tools/call", {"name": "fancy", "arguments": {"n": 1}}),
    ("tools/call", {"name": "media", "arguments": {}}),
    ("tools/call", {"name": "meta_result", "arguments": {}}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "mem://static"}),
    ("resources/read", {"uri": "mem://typed"}),
    ("resources/read", {"uri": "mem://t/7"}),
    ("prompts/list", {}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "x"}}),
    (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}},
    ),
]


async def exchange(version: str) -> list[tuple[str | None, Any]]:
    """Run :data:`WORK` against :func:`rich_server` in ``version`` (one request at a
    time): each message read, with the method of the request a result answers."""
    async with recorded(rich_server(), version) as (client, read):
        for method, params in WORK:
            await client.request(method, params)
    methods = iter(["initialize", *(method for method, _ in WORK)])
    return [(next(methods) if "result" in message else None, message) for message in read]


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
async def test_every_message_fits_the_revision_strictly(version: str) -> None:
    messages = await exchange(version)
    assert [method for method, _ in messages if method] == [
        "initialize",
        *(method for method, _ in WORK),
    ]
    for method, message in messages:
        validate_message(version, message, method, strict=True)


# What each revision is sent: everything it defines, nothing else.
TOOL_FIELDS = {
    "2024-11-05": {"name", "description", "inputSchema"},
    "2025-03-26": {"name", "description", "inputSchema", "annotations"},
    "2025-06-18": {"name", "description", "inputSchema", "annotations", "title", "outputSchema"}
    | {"_meta"},
}
TOOL_FIELDS["2025-11-25"] = TOOL_FIELDS["2025-06-18"] | {"icons"}
TOOL_FIELDS["2026-07-28"] = TOOL_FIELDS["2025-11-25"]


@pytest.mark.parametrize("version", [*LEGACY_VERSIONS, "2026-07-28"])
async def test_each_revision_gets_the_fields_it_defines(version: str) -> None:
    server = rich_server()
    era: Literal["legacy", "modern"] = "modern" if version == "2026-07-28" else "legacy"
    async with server.connect_in_memory(era=era, supported_versions=(version,)) as client:
        tools = (await client.request("tools/list"))["tools"]
        resources = (await client.request("resources/list"))["resources"]
        templates = (await client.request("resources/templates/list"))["resourceTemplates"]
        prompts = (await client.request("prompts/list"))["prompts"]
        assert client.handshake is not None
        info = client.handshake.peer_info or {}
        capabilities = client.handshake.peer_capabilities
    assert set(tools[0]) == TOOL_FIELDS[version]
    titled = version not in ("2024-11-05", "2025-03-26")
    iconic = version in ("2025-11-25", "2026-07-28")
    described = {"name", "description", "mimeType", "annotations"}
    later = {"title", "_meta"} if titled else set()
    assert set(resources[0]) == {"uri"} | described | later | ({"icons"} if iconic else set())
    assert set(templates[0]) == {"uriTemplate"} | described | (
        {"title", "icons"} if iconic else {"title"} if titled else set()
    )
    assert set(prompts[0]) == {"name", "description", "arguments"} | later | (
        {"icons"} if iconic else set()
    )
    assert resources[0]["annotations"] == (
        LATER if titled else {"audience": ["user"], "priority": 0.5}
    )
    assert tools[0].get("annotations") == (
        None if version == "2024-11-05" else {"readOnlyHint": True, "title": "Fancy A"}
    )
    if era == "legacy":
        assert ("completions" in capabilities) is (version != "2024-11-05")
        assert set(info) == {"name", "version"} | (
            {"title", "websiteUrl", "icons"} if iconic else {"title"} if titled else set()
        )


async def test_a_list_that_changes_is_fitted_again() -> None:
    server = rich_server()
    async with (
        server.connect_in_memory(era="legacy", supported_versions=("2024-11-05",)) as old,
        server.connect_in_memory(era="legacy", supported_versions=("2025-11-25",)) as new,
    ):
        assert [t["name"] for t in (await old.request("tools/list"))["tools"]] == [
            "fancy",
            "media",
            "meta_result",
        ]

        @server.tool(title="Late", icons=ICONS)
        async def late() -> str:
            return "x"

        server.remove_tool("media")
        listed = (await old.request("tools/list"))["tools"]
        assert [t["name"] for t in listed] == ["fancy", "meta_result", "late"]
        assert "title" not in listed[-1]
        assert "icons" not in listed[-1]
        # What the older revision was sent is a copy: the newest still gets everything.
        assert (await new.request("tools/list"))["tools"][-1]["icons"] == ICONS
        assert server._registry.tools["fancy"].definition["title"] == "Fancy"


async def test_content_keeps_what_the_revision_defines() -> None:
    server = rich_server()
    async with server.connect_in_memory(era="legacy", supported_versions=("2025-06-18",)) as c:
        result = await c.request("tools/call", {"name": "media", "arguments": {}})
        read = await c.request("resources/read", {"uri": "mem://typed"})
    text, image, audio, link, iconic_link, embedded, raw = result["content"]
    assert text == {"type": "text", "text": "t", "annotations": LATER, "_meta": META}
    assert image["annotations"] == audio["annotations"] == embedded["annotations"] == LATER
    assert link == {"type": "resource_link", "uri": "mem://static", "name": "static"} | {
        "title": "Static"
    }
    assert iconic_link == {"type": "resource_link", "uri": "mem://s", "name": "s"}
    assert raw["_meta"] == raw["resource"]["_meta"] == META
    assert read["contents"][0]["_meta"] == META
    async with server.connect_in_memory(era="legacy", supported_versions=("2025-03-26",)) as c:
        result = await c.request("tools/call", {"name": "media", "arguments": {}})
        read = await c.request("resources/read", {"uri": "mem://typed"})
    text, image, audio, link, iconic_link, embedded, raw = result["content"]
    early = {"audience": ["user"], "priority": 0.5}
    assert text == {"type": "text", "text": "t", "annotations": early}
    assert image["annotations"] == audio["annotations"] == embedded["annotations"] == early
    assert link["type"] == iconic_link["type"] == "text"
    assert raw == {"type": "resource", "resource": {"uri": "mem://y", "text": "y"}}
    assert read["contents"] == [{"uri": "mem://typed", "text": "t"}]

"""Serving and loading skills (the skills extension) end to end, in memory, both eras."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio

import mcp_trio._client_common
import mcp_trio._client_skills
from mcp_sansio import ConnectionConfig, ErrorCode
from mcp_sansio._http_client import SSE_FIELD_ROOM
from mcp_sansio.skills import (
    MAX_SKILL_RESOURCES,
    MAX_SKILL_TOTAL_SIZE,
    SKILLS_EXTENSION,
    build_skill,
    read_message_size,
    sha256_digest,
)
from mcp_trio import (
    BlockingClient,
    Client,
    HttpClientConfig,
    LocalProtocolError,
    McpError,
    RemoteProtocolError,
    RequestContext,
    Server,
    SessionConfig,
    SkillVerificationError,
    open_client,
)
from mcp_trio._server_skills import _apply, _Prepared, read_skill_dir

SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract PDFs\nlicense: Apache-2.0\n"
    "metadata:\n  version: '2.1'\n---\n\n# PDF\n\nSee references/FORMS.md.\n"
)
FILES: dict[str, bytes | str] = {
    "SKILL.md": SKILL_MD,
    "references/FORMS.md": "# Forms\n",
    "templates/regional/eu.md": "EU\n",
    "assets/logo.bin": b"\x89\xff\x00",
}
URI = "skill://acme/pdf-processing/SKILL.md"
ROOT = "skill://acme/pdf-processing"
EraName = Literal["legacy", "modern"]
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])


def make_server(page_size: int = 50) -> tuple[Server, list[str]]:
    """A server with one skill, and the methods it was asked (in order)."""
    server = Server("skills", page_size=page_size)
    server.add_skill(FILES, prefix="acme")
    asked: list[str] = []
    handlers = server.handlers()
    for method in ("skills/list", "skills/get", "resources/read", "resources/directory/read"):
        inner = handlers.request_handler(method)
        assert inner is not None

        async def spy(ctx: RequestContext, inner: Any = inner) -> Any:
            asked.append(f"{ctx.method} {(ctx.params or {}).get('uri', '')}".strip())
            return await inner(ctx)

        handlers.set_request_handler(method, spy)
    return server, asked


def tamper(server: Server, uri: str, text: str) -> None:
    """Serve ``text`` at ``uri`` instead of the file the manifest describes."""

    async def evil(ctx: RequestContext) -> dict[str, Any]:
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}

    real = server.handlers().request_handler("resources/read")
    assert real is not None

    async def route(ctx: RequestContext) -> Any:
        if (ctx.params or {}).get("uri") == uri:
            return await evil(ctx)
        return await real(ctx)

    server.handlers().set_request_handler("resources/read", route)


@ERAS
async def test_list_get_load_and_read_verified(era: EraName) -> None:
    server, asked = make_server()
    async with open_client(server, era=era) as client:
        caps = client._completed.peer_capabilities
        assert caps["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
        assert "resources" in caps  # the extension requires it
        [skill] = await client.list_skills()
        assert asked == ["skills/list"]  # listing fetches no file (Lazy Retrieval)
        assert skill.uri == URI
        assert skill.frontmatter == {
            "name": "pdf-processing",
            "description": "Extract PDFs",
            "license": "Apache-2.0",
            "metadata": {"version": "2.1"},
        }
        assert isinstance(skill.resources, tuple)
        assert {f.uri: f.size for f in skill.resources} == {
            URI: len(SKILL_MD.encode()),
            f"{ROOT}/assets/logo.bin": 3,
            f"{ROOT}/references/FORMS.md": 8,
            f"{ROOT}/templates/regional/eu.md": 3,
        }
        assert skill.file(f"{ROOT}/assets/logo.bin").digest == sha256_digest(b"\x89\xff\x00")
        assert await client.get_skill(URI) == skill
        assert await client.load_skill(skill) == SKILL_MD
        assert await client.read_skill_file(skill, "references/FORMS.md") == b"# Forms\n"
        assert await client.read_skill_file(skill, f"{ROOT}/assets/logo.bin") == b"\x89\xff\x00"
        assert asked[-3:] == [
            f"resources/read {URI}",
            f"resources/read {ROOT}/references/FORMS.md",
            f"resources/read {ROOT}/assets/logo.bin",
        ]


@ERAS
async def test_skill_files_are_ordinary_resources(era: EraName) -> None:
    server, _ = make_server()
    async with open_client(server, era=era) as client:
        listed = {r.uri: r for r in await client.list_resources()}
        skill_md = listed[URI]
        assert (skill_md.name, skill_md.description, skill_md.mime_type) == (
            "pdf-processing",
            "Extract PDFs",
            "text/markdown",
        )
        assert listed[f"{ROOT}/assets/logo.bin"].mime_type == "application/octet-stream"
        read = await client.request("resources/read", {"uri": URI})
        assert read["contents"] == [{"uri": URI, "mimeType": "text/markdown", "text": SKILL_MD}]


async def test_caching_hints_in_the_modern_era_only() -> None:
    server, _ = make_server()
    async with open_client(server, era="modern") as client:
        for method, params in (("skills/list", None), ("skills/get", {"uri": URI})):
            result = await client.request(method, params)
            assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == (
                "complete",
                0,
                "private",
            )
            assert "nextCursor" not in result
    async with open_client(server, era="legacy") as client:
        result = await client.request("skills/list")
        assert "ttlMs" not in result
        assert "cacheScope" not in result


@ERAS
async def test_directory_read(era: EraName) -> None:
    server, _ = make_server()
    async with open_client(server, era=era) as client:
        root = await client.request("resources/directory/read", {"uri": ROOT})
        assert [(r["name"], r["mimeType"]) for r in root["resources"]] == [
            ("SKILL.md", "text/markdown"),
            ("assets", "inode/directory"),
            ("references", "inode/directory"),
            ("templates", "inode/directory"),
        ]
        sub = await client.request("resources/directory/read", {"uri": f"{ROOT}/templates"})
        assert sub["resources"] == [
            {"uri": f"{ROOT}/templates/regional", "name": "regional", "mimeType": "inode/directory"}
        ]
        for uri in (URI, f"{ROOT}/nothing", "skill://acme", "skill://other", ROOT + "/"):
            with pytest.raises(McpError) as err:
                await client.request("resources/directory/read", {"uri": uri})
            assert err.value.code == ErrorCode.INVALID_PARAMS


@ERAS
async def test_read_resource_directory_follows_every_page(era: EraName) -> None:
    server = Server("dirs", page_size=1)
    files = {
        "SKILL.md": "---\nname: a-skill\ndescription: d\n---\n",
        "t/one.md": "1\n",
        "t/two.md": "2\n",
        "t/s/x": "",
    }
    server.add_skill(files)
    asked: list[Any] = []
    real = server.handlers().request_handler("resources/directory/read")
    assert real is not None

    async def spy(ctx: RequestContext) -> Any:
        asked.append(ctx.params)
        return await real(ctx)

    server.handlers().set_request_handler("resources/directory/read", spy)
    async with open_client(server, era=era) as client:
        children = await client.read_resource_directory("skill://a-skill/t")
        assert [(r.name, r.mime_type) for r in children] == [
            ("one.md", "text/markdown"),
            ("s", "inode/directory"),
            ("two.md", "text/markdown"),
        ]
        assert [p["uri"] for p in asked] == ["skill://a-skill/t"] * 3  # (every page)
        assert [p.get("cursor") is None for p in asked] == [True, False, False]


async def test_read_resource_directory_is_bounded() -> None:
    server, _ = make_server()
    pages = iter(range(10**6))

    async def endless(ctx: RequestContext) -> dict[str, Any]:
        uri = f"skill://x/{next(pages)}"
        return {"resources": [{"uri": uri, "name": "n"}], "nextCursor": uri}

    async def looping(ctx: RequestContext) -> dict[str, Any]:
        return {"resources": [], "nextCursor": "again"}

    server.handlers().set_request_handler("resources/directory/read", endless)
    async with open_client(server, era="modern") as client:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_trio._client_common, "MAX_LIST_ITEMS", 3)
            with pytest.raises(RemoteProtocolError, match="more than 3 items"):
                await client.read_resource_directory("skill://x")
        # The same cursor again is followed (cursors are opaque), up to the page bound.
        server.handlers().set_request_handler("resources/directory/read", looping)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_trio._client_common, "MAX_LIST_PAGES", 3)
            with pytest.raises(RemoteProtocolError, match="more than 3 pages"):
                await client.read_resource_directory("skill://x")


@ERAS
async def test_read_resource_directory_needs_directory_read_declared(era: EraName) -> None:
    server, _ = make_server()
    caps = server.capabilities()
    caps["extensions"] = {SKILLS_EXTENSION: {}}
    config = attrs.evolve(server.connection_config(), capabilities=caps, capabilities_source=None)
    async with open_client((server.handlers(), config), era=era) as client:
        assert len(await client.list_skills()) == 1
        with pytest.raises(LocalProtocolError, match="directoryRead"):
            await client.read_resource_directory(ROOT)


@ERAS
async def test_bad_requests_get_invalid_params_and_the_session_goes_on(era: EraName) -> None:
    server, _ = make_server()
    async with open_client(server, era=era) as client:
        for method, params in (
            ("skills/get", {"uri": "skill://mcp-conformance-nonexistent/SKILL.md"}),
            ("skills/get", {"uri": f"{ROOT}/references/FORMS.md"}),
            ("skills/get", {}),
            ("skills/get", {"uri": 7}),
            ("skills/list", {"cursor": "forged"}),
            ("skills/list", {"cursor": 7}),
            ("resources/directory/read", {"uri": None}),
        ):
            with pytest.raises(McpError) as err:
                await client.request(method, params)
            assert err.value.code == ErrorCode.INVALID_PARAMS, (method, params)
        with pytest.raises(McpError, match=r"No skill is served at skill://x/SKILL\.md"):
            await client.get_skill("skill://x/SKILL.md")
        assert len(await client.list_skills()) == 1


async def test_skills_list_paginates() -> None:
    server = Server("skills", page_size=2)
    for name in ("a", "b", "c", "d", "e"):
        server.add_skill({"SKILL.md": f"---\nname: {name}\ndescription: {name}\n---\n"})
    async with open_client(server, era="modern") as client:
        first = await client.request("skills/list")
        assert [e["frontmatter"]["name"] for e in first["skills"]] == ["a", "b"]
        assert isinstance(first["nextCursor"], str)
        second = await client.request("skills/list", {"cursor": first["nextCursor"]})
        assert [e["frontmatter"]["name"] for e in second["skills"]] == ["c", "d"]
        assert [skill.name for skill in await client.list_skills()] == ["a", "b", "c", "d", "e"]


async def test_a_cursor_of_another_list_is_refused_though_the_key_is_shared() -> None:
    server = Server("skills", page_size=1)
    for name in ("a", "b"):
        server.add_skill({"SKILL.md": f"---\nname: {name}\ndescription: {name}\n---\n"})
    async with open_client(server, era="modern") as client:
        resources = await client.request("resources/list")
        skills = await client.request("skills/list")
        for method, cursor in (
            ("skills/list", resources["nextCursor"]),
            ("resources/list", skills["nextCursor"]),
        ):
            with pytest.raises(McpError, match="stale cursor") as err:
                await client.request(method, {"cursor": cursor})
            assert err.value.code == ErrorCode.INVALID_PARAMS


async def test_a_server_without_skills_does_not_declare_or_answer() -> None:
    server = Server("plain")
    async with open_client(server, era="modern") as client:
        assert "extensions" not in client._completed.peer_capabilities
        with pytest.raises(LocalProtocolError, match="did not declare"):
            await client.list_skills()
        with pytest.raises(LocalProtocolError, match="did not declare"):
            await client.request("skills/list")  # (the core gates it, whoever sends)
    # (The server's -32601 for a peer that sends it all the same: the core's
    # tests/core/test_revision_gating.py.)


@ERAS
async def test_an_extension_declared_as_null_is_not_declared(era: EraName) -> None:
    """Extensions map to settings objects (basic/versioning.mdx): ``null`` declares
    nothing, so nothing of the extension is sent (and the server serves nothing)."""
    server, asked = make_server()
    caps = {**server.capabilities(), "extensions": {SKILLS_EXTENSION: None}}
    async with contextlib.AsyncExitStack() as stack:
        # (A peer's config: ours refuses a null extension, here and where open_client
        # sets the server's up.)
        with attrs.validators.disabled():
            config = attrs.evolve(
                server.connection_config(), capabilities=caps, capabilities_source=None
            )
            client = await stack.enter_async_context(
                open_client((server.handlers(), config), era=era)
            )
        with pytest.raises(LocalProtocolError, match="did not declare"):
            await client.list_skills()
        with pytest.raises(LocalProtocolError, match="did not declare"):
            await client.get_skill(URI)
    assert asked == []


async def test_skills_added_after_the_handlers_were_built_are_served() -> None:
    server = Server("late")
    server.handlers()
    server.add_skill({"SKILL.md": "---\nname: late\ndescription: d\n---\n"})
    async with open_client(server, era="legacy") as client:
        assert [s.name for s in await client.list_skills()] == ["late"]


# --------------------------------------------------------------------------- verification


async def _loaded(client: Client) -> Any:
    [skill] = await client.list_skills()
    return skill


@ERAS
@pytest.mark.parametrize(
    ("served", "reason"),
    [
        (SKILL_MD.replace("# PDF", "# FDP"), "digest mismatch"),
        (SKILL_MD + "extra bytes\n", "size mismatch"),
    ],
)
async def test_tampered_skill_md_is_refused(era: EraName, served: str, reason: str) -> None:
    server, _ = make_server()
    tamper(server, URI, served)
    async with open_client(server, era=era) as client:
        skill = await _loaded(client)
        with pytest.raises(SkillVerificationError, match=reason) as err:
            await client.load_skill(skill)
        assert err.value.uri == URI


@ERAS
async def test_an_entry_rendered_with_yaml_1_2_loads(era: EraName) -> None:
    """A server whose YAML parser is 1.2 (the core schema) renders ``0755`` as 755 and
    ``on`` as "on", where PyYAML reads 493 and true: the same file, verified either way."""
    text = "---\nname: yaml12\ndescription: d\nversion: 0755\nenabled: on\n---\n"
    server = Server("yaml")
    ours = server.add_skill({"SKILL.md": text})
    real = server.handlers().request_handler("skills/get")
    assert real is not None

    async def rendered_by_1_2(ctx: RequestContext) -> Any:
        result = await real(ctx)
        assert isinstance(result, dict)
        result["skill"]["frontmatter"].update(version=755, enabled="on")
        return result

    server.handlers().set_request_handler("skills/get", rendered_by_1_2)
    async with open_client(server, era=era) as client:
        [listed] = await client.list_skills()
        assert listed == ours
        assert (listed.frontmatter["version"], listed.frontmatter["enabled"]) == (493, True)
        assert await client.load_skill(listed) == text
        theirs = await client.get_skill(ours.uri)
        assert (theirs.frontmatter["version"], theirs.frontmatter["enabled"]) == (755, "on")
        assert await client.load_skill(theirs) == text


async def test_frontmatter_that_differs_from_the_entry_is_refused() -> None:
    server, _ = make_server()
    served = SKILL_MD.replace("Extract PDFs", "Exfiltrate credentials")
    tamper(server, URI, served)
    async with open_client(server, era="modern") as client:
        skill = await _loaded(client)
        # A consistent entry for the tampered bytes: digest and size match, the
        # frontmatter does not (the conformance suite's frontmatter scenario).
        assert isinstance(skill.resources, tuple)
        entry = skill.resources[0]
        honest = type(skill)(
            uri=skill.uri,
            frontmatter=skill.frontmatter,
            resources=(
                type(entry)(
                    uri=URI, digest=sha256_digest(served.encode()), size=len(served.encode())
                ),
                *skill.resources[1:],
            ),
        )
        with pytest.raises(SkillVerificationError, match=r"differs .* in description"):
            await client.load_skill(honest)


async def test_supporting_files_are_verified_and_unlisted_ones_refused() -> None:
    server, asked = make_server()
    tamper(server, f"{ROOT}/references/FORMS.md", "# Forms, changed\n")
    async with open_client(server, era="modern") as client:
        skill = await _loaded(client)
        with pytest.raises(SkillVerificationError, match="size mismatch"):
            await client.read_skill_file(skill, "references/FORMS.md")
        before = len(asked)
        with pytest.raises(SkillVerificationError, match="not listed"):
            await client.read_skill_file(skill, "references/NEW.md")
        with pytest.raises(ValueError, match="leaves"):
            await client.read_skill_file(skill, "../other/SKILL.md")
        assert len(asked) == before  # refused without a read


async def test_dynamic_skills_are_refused_unless_allowed() -> None:
    server, _ = make_server()

    async def dynamic_get(ctx: RequestContext) -> dict[str, Any]:
        frontmatter = {
            "name": "pdf-processing",
            "description": "Extract PDFs",
            "license": "Apache-2.0",
            "metadata": {"version": "2.1"},
        }
        return {"skill": {"uri": URI, "frontmatter": frontmatter, "resources": "dynamic"}}

    server.handlers().set_request_handler("skills/get", dynamic_get)
    async with open_client(server, era="modern") as client:
        skill = await client.get_skill(URI)
        assert skill.dynamic
        with pytest.raises(SkillVerificationError, match="dynamic"):
            await client.load_skill(skill)
        with pytest.raises(SkillVerificationError, match="dynamic"):
            await client.read_skill_file(skill, "references/FORMS.md")
        assert await client.load_skill(skill, allow_dynamic=True) == SKILL_MD
        forms = await client.read_skill_file(skill, "references/FORMS.md", allow_dynamic=True)
        assert forms == b"# Forms\n"


def serve_dynamic(server: Server) -> None:
    """Answer ``skills/get`` with the served skill's entry, as ``"dynamic"``."""

    async def dynamic_get(ctx: RequestContext) -> dict[str, Any]:
        frontmatter = {
            "name": "pdf-processing",
            "description": "Extract PDFs",
            "license": "Apache-2.0",
            "metadata": {"version": "2.1"},
        }
        return {"skill": {"uri": URI, "frontmatter": frontmatter, "resources": "dynamic"}}

    server.handlers().set_request_handler("skills/get", dynamic_get)


@pytest.mark.parametrize(
    "reference",
    [
        ROOT + "/../other/SKILL.md",
        ROOT + "/%2e%2e/other/SKILL.md",
        "%2e%2e/other/SKILL.md",
        "a\\..\\..\\other\\SKILL.md",
        ROOT + "//x",
    ],
)
async def test_a_dynamic_skill_reads_nothing_outside_its_directory(reference: str) -> None:
    server, asked = make_server()
    server.add_skill({"SKILL.md": "---\nname: other\ndescription: d\n---\n"})
    serve_dynamic(server)
    async with open_client(server, era="modern") as client:
        skill = await client.get_skill(URI)
        with pytest.raises(ValueError, match="leaves the skill"):
            await client.read_skill_file(skill, reference, allow_dynamic=True)
        assert not [a for a in asked if a.startswith("resources/read")]


@ERAS
async def test_a_file_over_max_message_size_is_refused_before_it_is_asked(era: EraName) -> None:
    data = bytes(range(256)) * 400  # not UTF-8: sent as a base64 blob
    server, asked = make_server()
    server.add_skill({"SKILL.md": SKILL_MD.replace("pdf-processing", "big"), "data.bin": data})
    async with open_client(server, era=era) as client:
        big = await client.get_skill("skill://big/SKILL.md")
    file = big.file("skill://big/data.bin")
    needed = read_message_size(file)
    assert needed > len(base64.b64encode(data))

    def limited(size: int) -> ConnectionConfig:
        return ConnectionConfig(max_message_size=size)

    async with open_client(server, era=era, connection_config=limited(needed - 1)) as client:
        asked.clear()
        message = rf"data.bin is 102400 bytes.*max_message_size of {needed - 1}.*>= {needed}"
        with pytest.raises(LocalProtocolError, match=message):
            await client.read_skill_file(big, "data.bin")
        assert await client.load_skill(big)  # (a small SKILL.md fits)
        assert asked == ["resources/read skill://big/SKILL.md"]  # data.bin: never asked
    async with open_client(server, era=era, connection_config=limited(needed)) as client:
        assert await client.read_skill_file(big, "data.bin") == data
    skill_md = big.file(big.uri)
    async with open_client(
        server, era=era, connection_config=limited(read_message_size(skill_md) - 1)
    ) as client:
        with pytest.raises(LocalProtocolError, match="max_message_size"):
            await client.load_skill(big)


@ERAS
@pytest.mark.parametrize("fill", ['"', "\\", "\t", "\x1b"])
async def test_text_json_escapes_is_sent_as_a_blob_so_the_checked_size_holds(
    era: EraName, fill: str
) -> None:
    # Valid UTF-8 of a text type, but JSON-escaped 2 to 6 times its size: a blob
    # (4/3) is smaller, and fits the size the client checks before asking.
    data = (fill * 40_000).encode()
    server = Server("esc")
    server.add_skill({"SKILL.md": "---\nname: esc\ndescription: d\n---\n", "data.json": data})
    async with open_client(server, era=era) as client:
        skill = await client.get_skill("skill://esc/SKILL.md")
        [contents] = (await client.read_resource("skill://esc/data.json")).contents
        assert getattr(contents, "blob", None) is not None
    limited = ConnectionConfig(
        max_message_size=read_message_size(skill.file(skill.root + "/data.json"))
    )
    async with open_client(server, era=era, connection_config=limited) as client:
        assert await client.read_skill_file(skill, "data.json") == data
        assert await client.load_skill(skill)  # (ordinary text is still text)


@ERAS
async def test_an_answer_over_the_bound_after_the_check_says_why(era: EraName) -> None:
    # Another server may send such text as text: the read fails once it is answered,
    # with an error that names the file, the setting and the reason.
    data = ('"' * 40_000).encode()
    server = Server("esc")
    server.add_skill({"SKILL.md": "---\nname: esc\ndescription: d\n---\n", "data.json": data})
    tamper(server, "skill://esc/data.json", data.decode())
    async with open_client(server, era=era) as client:
        skill = await client.get_skill("skill://esc/SKILL.md")
    needed = read_message_size(skill.file(skill.root + "/data.json"))
    limited = ConnectionConfig(max_message_size=needed)
    async with open_client(server, era=era, connection_config=limited) as client:
        message = (
            rf"skill://esc/data.json: the resources/read answer was over the {needed} bytes"
            r".*max_message_size.*6 times as JSON escapes it"
        )
        with pytest.raises(McpError, match=message) as caught:
            await client.read_skill_file(skill, "data.json")
        assert caught.value.error.code == ErrorCode.INTERNAL_ERROR
        assert await client.load_skill(skill)  # (the session goes on)


@ERAS
async def test_a_servers_own_error_that_reads_too_large_is_not_taken_for_ours(
    era: EraName,
) -> None:
    """Only the core's refusal (its ``data`` names ``maxMessageSize``) is explained as
    this client's bound; the server's own -32603 is raised as it came, whatever it says."""
    server, _ = make_server()
    handlers = server.handlers()

    async def refuse(ctx: RequestContext) -> Any:
        raise McpError.from_code(ErrorCode.INTERNAL_ERROR, "Message too large: over 5 bytes")

    handlers.set_request_handler("resources/read", refuse)
    async with open_client(server, era=era) as client:
        skill = await client.get_skill(URI)
        with pytest.raises(McpError) as caught:
            await client.load_skill(skill)
    assert caught.value.error.message == "Message too large: over 5 bytes"
    assert caught.value.error.data is None


@ERAS
async def test_over_http_the_check_takes_the_transports_bound_which_open_client_raises(
    era: EraName,
) -> None:
    data = bytes(range(256)) * 400  # not UTF-8: a base64 blob of 136 KB
    server, asked = make_server()
    server.add_skill({"SKILL.md": SKILL_MD.replace("pdf-processing", "big"), "data.bin": data})
    core = ConnectionConfig(max_message_size=1024 * 1024)  # (not the bound that binds)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(partial(server.serve_http, "127.0.0.1", 0))
            async with open_client(handle.url, era=era, connection_config=core) as client:
                big = await client.get_skill("skill://big/SKILL.md")
            needed = read_message_size(big.file("skill://big/data.bin"))
            # An SSE event holds the message and its other fields (1 KiB allowed).
            tight = HttpClientConfig(max_event_size=needed + SSE_FIELD_ROOM - 1)
            async with open_client(
                handle.url, era=era, connection_config=core, http_config=tight
            ) as client:
                asked.clear()
                message = rf"HttpClientConfig: .* of {needed - 1}; connect with it >= {needed}"
                with pytest.raises(LocalProtocolError, match=message):
                    await client.read_skill_file(big, "data.bin")
                assert asked == []  # refused before it was asked
            fits = HttpClientConfig(max_event_size=needed + SSE_FIELD_ROOM, max_body_size=needed)
            async with open_client(
                handle.url, era=era, connection_config=core, http_config=fits
            ) as client:
                assert await client.read_skill_file(big, "data.bin") == data
            # Asked without the check, an answer over the bounds fails naming the one
            # that dropped it (an SSE event or a JSON body, as the server answers).
            small = HttpClientConfig(max_event_size=64 * 1024, max_body_size=64 * 1024)
            async with open_client(
                handle.url, era=era, connection_config=core, http_config=small
            ) as client:
                with pytest.raises(McpError, match=r"HttpClientConfig\.max_(event|body)_size"):
                    await client.read_resource("skill://big/data.bin")
            nursery.cancel_scope.cancel()


async def test_over_websocket_the_check_takes_ws_max_message_size() -> None:
    data = bytes(range(256)) * 400
    server, asked = make_server()
    server.add_skill({"SKILL.md": SKILL_MD.replace("pdf-processing", "big"), "data.bin": data})
    core = ConnectionConfig(max_message_size=1024 * 1024)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            url = (await nursery.start(server.serve_websocket)).url
            async with open_client(url, connection_config=core) as client:
                big = await client.get_skill("skill://big/SKILL.md")
            needed = read_message_size(big.file("skill://big/data.bin"))
            for size, fits in ((needed - 1, False), (needed, True)):
                config = SessionConfig(ws_max_message_size=size)
                async with open_client(url, connection_config=core, config=config) as client:
                    if fits:
                        assert await client.read_skill_file(big, "data.bin") == data
                        continue
                    asked.clear()
                    with pytest.raises(
                        LocalProtocolError,
                        match=rf"SessionConfig\.ws_max_message_size of {needed - 1}; .*>= {needed}",
                    ):
                        await client.read_skill_file(big, "data.bin")
                    assert asked == []
            nursery.cancel_scope.cancel()


async def test_http_config_is_for_http_targets_only() -> None:
    server, _ = make_server()
    with pytest.raises(TypeError, match="http_config cannot be used with a non-HTTP target"):
        async with open_client(server, http_config=HttpClientConfig()):
            pass  # pragma: no cover


async def test_a_malformed_entry_or_a_mismatched_get_is_a_protocol_error() -> None:
    server, _ = make_server()

    async def wrong(ctx: RequestContext) -> dict[str, Any]:
        return {"skill": {"uri": "skill://b/SKILL.md", "frontmatter": {}, "resources": []}}

    server.handlers().set_request_handler("skills/get", wrong)
    async with open_client(server, era="modern") as client:
        with pytest.raises(RemoteProtocolError, match="invalid skill entry"):
            await client.get_skill(URI)
        with pytest.raises(RemoteProtocolError, match="invalid skill entry"):
            await client.get_skill("skill://b/SKILL.md")


@ERAS
async def test_a_malformed_entry_costs_only_itself_and_is_reported(era: EraName) -> None:
    server, _ = make_server()
    real = server.handlers().request_handler("skills/list")
    assert real is not None

    async def spoiled(ctx: RequestContext) -> Any:
        result = await real(ctx)
        assert isinstance(result, dict)
        [good] = result["skills"]
        other = {"uri": "skill://b/SKILL.md", "frontmatter": {"name": "b", "description": "d"}}
        broken = {"uri": "skill://c/SKILL.md", "frontmatter": {"name": "c", "description": "d"}}
        return {
            "skills": [
                {"uri": "skill://x/SKILL.md"},
                good,
                7,
                {**broken, "resources": None},
                {**other, "resources": "dynamic"},
                {**other, "resources": []},  # (b twice: neither is held)
            ]
        }

    server.handlers().set_request_handler("skills/list", spoiled)
    async with open_client(server, era=era) as client:
        listing = await client.list_skills()
        assert [skill.uri for skill in listing] == [URI]
        assert [(i.uri, i.reason) for i in listing.invalid] == [
            (
                "skill://x/SKILL.md",
                "invalid skill entry skill://x/SKILL.md: no 'frontmatter' object",
            ),
            (None, "invalid skill entry: not an object"),
            (
                "skill://c/SKILL.md",
                "invalid skill entry skill://c/SKILL.md: 'resources' must be an array or 'dynamic'",
            ),
            ("skill://b/SKILL.md", "invalid skill entry skill://b/SKILL.md: listed 2 times"),
            (
                "skill://b/SKILL.md",
                "invalid skill entry skill://b/SKILL.md: 'resources' omits SKILL.md"
                " (and listed 2 times)",
            ),
        ]
        # The entries kept are still the server's, and load verified.
        assert await client.load_skill(listing[0]) == SKILL_MD


async def test_skills_list_follows_a_repeated_cursor() -> None:
    """pagination.mdx: cursors are opaque, so a stateful server may hand out the same
    one twice ("go on from where you are"); the listing follows it, up to the page
    bound when the server never stops."""
    server, _ = make_server()
    asked: list[Any] = []

    async def stateful(ctx: RequestContext) -> dict[str, Any]:
        asked.append((ctx.params or {}).get("cursor"))
        name = f"s{len(asked)}"
        frontmatter = {"name": name, "description": "d"}
        entry = {"uri": f"skill://{name}/SKILL.md", "frontmatter": frontmatter}
        page: dict[str, Any] = {"skills": [{**entry, "resources": "dynamic"}]}
        return page if len(asked) == 3 else {**page, "nextCursor": "again"}

    async def looping(ctx: RequestContext) -> dict[str, Any]:
        return {"skills": [], "nextCursor": "again"}

    server.handlers().set_request_handler("skills/list", stateful)
    async with open_client(server, era="modern") as client:
        listing = await client.list_skills()
        assert [s.uri for s in listing] == [f"skill://s{i}/SKILL.md" for i in (1, 2, 3)]
        assert asked == [None, "again", "again"]
        server.handlers().set_request_handler("skills/list", looping)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_trio._client_skills, "MAX_LIST_PAGES", 3)
            with pytest.raises(RemoteProtocolError, match="more than 3 pages"):
                await client.list_skills()


@pytest.mark.parametrize("bound", ["MAX_LIST_ITEMS", "MAX_LIST_PAGES"])
async def test_a_listing_of_invalid_entries_is_bounded_too(bound: str) -> None:
    """Refused entries are kept (as reports): they count against the listing's bounds."""
    server, _ = make_server()
    pages = iter(range(10**6))

    async def endless(ctx: RequestContext) -> dict[str, Any]:
        return {"skills": [7, {"uri": "x"}], "nextCursor": str(next(pages))}

    server.handlers().set_request_handler("skills/list", endless)
    async with open_client(server, era="modern") as client:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(mcp_trio._client_skills, bound, 3)
            what = "skills" if bound == "MAX_LIST_ITEMS" else "pages"
            with pytest.raises(RemoteProtocolError, match=f"more than 3 {what}"):
                await client.list_skills()


# --------------------------------------------------------------------------- directories


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


async def test_add_skills_dir_serves_nested_skills(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "git-workflow/SKILL.md": "---\nname: git-workflow\ndescription: Git\n---\n",
            "git-workflow/scripts/check.sh": "#!/bin/sh\n",
            "git-workflow/.hidden": "skipped\n",
            "billing/refunds/SKILL.md": "---\nname: refunds\ndescription: Refunds\n---\n",
            "billing/refunds/email/SKILL.md": "---\nname: email\ndescription: Mail\n---\n",
        },
    )
    os.symlink(tmp_path / "git-workflow/scripts/check.sh", tmp_path / "git-workflow/link.sh")
    server = Server("dir")
    added = server.add_skills_dir(tmp_path, prefix="acme")
    assert [s.uri for s in added] == [
        "skill://acme/billing/refunds/SKILL.md",
        "skill://acme/billing/refunds/email/SKILL.md",
        "skill://acme/git-workflow/SKILL.md",
    ]
    refunds, _, git = added
    assert isinstance(refunds.resources, tuple)
    # Completeness extends to nested skills: their files are the enclosing one's too.
    assert [f.uri for f in refunds.resources] == [
        "skill://acme/billing/refunds/SKILL.md",
        "skill://acme/billing/refunds/email/SKILL.md",
    ]
    assert isinstance(git.resources, tuple)
    assert [f.uri.rsplit("/", 2)[-2:] for f in git.resources] == [
        ["git-workflow", "SKILL.md"],
        ["scripts", "check.sh"],
    ]
    async with open_client(server, era="modern") as client:
        for skill in await client.list_skills():
            await client.load_skill(skill)
        assert await client.read_skill_file(git, "scripts/check.sh") == b"#!/bin/sh\n"


def test_add_skill_refuses(tmp_path: Path) -> None:
    write(tmp_path, {"wrong-dir/SKILL.md": "---\nname: other\ndescription: d\n---\n"})
    server = Server("refuse")
    with pytest.raises(ValueError, match="not its directory"):
        server.add_skill(tmp_path / "wrong-dir")
    with pytest.raises(ValueError, match="not a skill directory"):
        server.add_skill(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a directory"):
        server.add_skills_dir(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a valid skill-path segment"):
        server.add_skill({"SKILL.md": "---\nname: c\ndescription: d\n---\n"}, prefix="a b")
    with pytest.raises(ValueError, match=r"needs a SKILL\.md"):
        server.add_skill({"README.md": "x"})
    server.add_skill({"SKILL.md": "---\nname: a\ndescription: d\n---\n"})
    with pytest.raises(ValueError, match="already served"):
        server.add_skill({"SKILL.md": "---\nname: a\ndescription: d\n---\n"})

    @server.resource("skill://b/SKILL.md")
    async def taken() -> str:
        return "mine"

    with pytest.raises(ValueError, match="already registered"):
        server.add_skill({"SKILL.md": "---\nname: b\ndescription: d\n---\n"})
    assert "extensions" in server.capabilities()


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files read with ``Path.read_bytes`` from now on, in order."""
    read: list[str] = []
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        read.append(self.name)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return read


def test_a_directory_past_the_file_limit_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = tmp_path / "big"
    write(skill, {"SKILL.md": "---\nname: big\ndescription: d\n---\n"})
    for i in range(MAX_SKILL_RESOURCES - 1):  # with SKILL.md: exactly the limit
        (skill / f"f{i:03}").write_bytes(b"")
    assert len(read_skill_dir(skill)) == MAX_SKILL_RESOURCES
    (skill / "f511").write_bytes(b"")
    (skill / "f512").write_bytes(b"")
    read = _record_reads(monkeypatch)
    with pytest.raises(ValueError, match="more than 512 files"):
        Server("big").add_skill(skill)
    assert len(read) == MAX_SKILL_RESOURCES  # the 513th file and the 514th: never read
    assert "f511" not in read
    assert "f512" not in read


def test_a_directory_past_the_byte_limit_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = tmp_path / "heavy"
    skill_md = "---\nname: heavy\ndescription: d\n---\n"
    write(skill, {"SKILL.md": skill_md, "z-later.txt": "never read\n"})
    with open(skill / "a.bin", "wb") as file:  # sparse: the limit, less SKILL.md
        file.truncate(MAX_SKILL_TOTAL_SIZE - len(skill_md))
    read = _record_reads(monkeypatch)
    with pytest.raises(ValueError, match=f"more than {MAX_SKILL_TOTAL_SIZE} bytes"):
        Server("heavy").add_skill(skill)  # ("z-later.txt": past the limit)
    assert read == ["SKILL.md", "a.bin"]
    (skill / "z-later.txt").unlink()
    with open(skill / "b.bin", "wb") as file:  # one byte past it, before z
        file.truncate(1)
    read.clear()
    with pytest.raises(ValueError, match=f"more than {MAX_SKILL_TOTAL_SIZE} bytes"):
        read_skill_dir(skill)
    assert read == ["SKILL.md", "a.bin"]
    (skill / "b.bin").unlink()
    assert sum(map(len, read_skill_dir(skill).values())) == MAX_SKILL_TOTAL_SIZE  # at it


def test_add_skills_dir_serves_all_or_nothing(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a-good/SKILL.md": "---\nname: a-good\ndescription: d\n---\n",
            "z bad/SKILL.md": "---\nname: z-bad\ndescription: d\n---\n",
        },
    )
    server = Server("atomic")
    with pytest.raises(ValueError, match="not a valid skill name"):
        server.add_skills_dir(tmp_path)  # ("z bad": after "a-good", which is not served)
    assert "extensions" not in server.capabilities()
    assert server.handlers().request_handler("skills/list") is None
    assert not server._registry.resources
    # A resource taken at a later skill's file: nothing of the earlier one is served.
    (tmp_path / "z bad/SKILL.md").unlink()
    (tmp_path / "z bad").rmdir()
    write(tmp_path, {"b-taken/SKILL.md": "---\nname: b-taken\ndescription: d\n---\n"})

    @server.resource("skill://b-taken/SKILL.md")
    async def taken() -> str:
        return "mine"

    with pytest.raises(ValueError, match="already registered"):
        server.add_skills_dir(tmp_path)
    assert list(server._registry.resources) == ["skill://b-taken/SKILL.md"]
    assert "extensions" not in server.capabilities()
    server.remove_resource("skill://b-taken/SKILL.md")
    assert [s.name for s in server.add_skills_dir(tmp_path)] == ["a-good", "b-taken"]


BRACED = {
    "SKILL.md": "---\nname: b-brace\ndescription: d\n---\n",
    "templates/{project}.md": "# {project}\n",
}


def test_a_file_name_that_is_not_a_uri_path_is_refused_and_nothing_is_served(
    tmp_path: Path,
) -> None:
    server = Server("braces")
    with pytest.raises(ValueError, match=r"'templates/\{project\}\.md' cannot be a URI path"):
        server.add_skill(BRACED)
    assert not server._registry.resources
    assert not server._registry.templates
    assert "extensions" not in server.capabilities()
    # Renamed, it is served: the refusal left nothing at its URIs.
    server.add_skill({"SKILL.md": BRACED["SKILL.md"], "templates/project.md": "# p\n"})
    write(tmp_path, {"a-good/SKILL.md": "---\nname: a-good\ndescription: d\n---\n"})
    write(tmp_path, {f"c-brace/{path}": text for path, text in BRACED.items()})
    (tmp_path / "c-brace/SKILL.md").write_text(BRACED["SKILL.md"].replace("b-brace", "c-brace"))
    with pytest.raises(ValueError, match="cannot be a URI path"):
        server.add_skills_dir(tmp_path)
    assert sorted(server._registry.resources) == [
        "skill://b-brace/SKILL.md",
        "skill://b-brace/templates/project.md",
    ]
    assert len(server._skills or ()) == 1


async def test_a_skill_file_uri_that_is_not_rfc_3986_is_refused_whole() -> None:
    # (build_skill refuses "{" in a file name; a skill built otherwise is never taken
    # for a template, nor served half-way: its URI is not an RFC 3986 URI, and the whole
    # skill is refused before anything is registered. Until resource URIs were checked
    # against RFC 3986, it was served as a plain resource.)
    files = {"SKILL.md": BRACED["SKILL.md"].encode(), "t.md": b"# {project}\n"}
    built = build_skill("skill://b-brace/SKILL.md", files)
    assert isinstance(built.resources, tuple)
    braced = attrs.evolve(built.resources[1], uri="skill://b-brace/{project}.md")
    skill = attrs.evolve(built, resources=(built.resources[0], braced))
    prepared = _Prepared(skill, {"SKILL.md": files["SKILL.md"], "{project}.md": files["t.md"]})
    server = Server("braces")
    with pytest.raises(ValueError, match=r"'skill://b-brace/\{project\}\.md' is not an RFC 3986"):
        _apply(server, [prepared])
    assert not server._registry.resources
    assert not server._registry.templates
    _apply(server, [_Prepared(built, {k: bytes(v) for k, v in files.items()})])
    assert sorted(server._registry.resources) == sorted(f.uri for f in built.resources)
    async with open_client(server, era="modern") as client:
        assert await client.read_skill_file(built, "t.md") == b"# {project}\n"


NESTED = {
    "outer/SKILL.md": "---\nname: outer\ndescription: Outer\n---\n",
    "outer/notes.md": "notes\n",
    "outer/inner/SKILL.md": "---\nname: inner\ndescription: Inner\n---\n",
}


@pytest.mark.parametrize("how", ["dir", "outer-first", "inner-first"])
async def test_a_nested_skill_md_carries_its_own_name_and_description(
    tmp_path: Path, how: str
) -> None:
    write(tmp_path, NESTED)
    server = Server("nested")
    if how == "dir":
        server.add_skills_dir(tmp_path)
    elif how == "outer-first":
        server.add_skill(tmp_path / "outer")
        server.add_skill(tmp_path / "outer/inner", prefix="outer")
    else:
        server.add_skill(tmp_path / "outer/inner", prefix="outer")
        server.add_skill(tmp_path / "outer")
    async with open_client(server, era="modern") as client:
        listed = {r.uri: (r.name, r.description) for r in await client.list_resources()}
        assert listed == {
            "skill://outer/SKILL.md": ("outer", "Outer"),
            "skill://outer/notes.md": ("notes.md", None),
            "skill://outer/inner/SKILL.md": ("inner", "Inner"),
        }
        for skill in await client.list_skills():
            await client.load_skill(skill)


@ERAS
async def test_a_frontmatter_integer_beyond_64_bits_is_refused_when_added(era: EraName) -> None:
    server = Server("ints")
    server.add_skill({"SKILL.md": "---\nname: ok\ndescription: d\nn: 18446744073709551615\n---\n"})
    big = "---\nname: big\ndescription: d\nmetadata:\n  build: 18446744073709551616\n---\n"
    with pytest.raises(ValueError, match="beyond 64 bits"):
        server.add_skill({"SKILL.md": big})
    async with open_client(server, era=era) as client:
        [skill] = await client.list_skills()  # (the page is still sent)
        assert skill.frontmatter["n"] == 2**64 - 1
        assert await client.get_skill(skill.uri) == skill


SERVE_ONE_SKILL = """
import trio
from mcp_trio import Server
server = Server("blocking-skills")
server.add_skill({"SKILL.md": %r, "references/FORMS.md": "# Forms\\n"}, prefix="acme")
trio.run(server.serve_stdio)
"""


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_blocking_client_loads_skills_too(tmp_path: Path, era: EraName) -> None:
    app = tmp_path / "app.py"
    app.write_text(SERVE_ONE_SKILL % SKILL_MD)
    with BlockingClient.stdio([sys.executable, str(app)], era=era, timeout=20) as client:
        listing = client.list_skills()
        [skill] = listing
        assert listing.invalid == ()
        assert client.get_skill(URI) == skill
        [child] = client.read_resource_directory(f"{ROOT}/references")
        assert (child.uri, child.mime_type) == (f"{ROOT}/references/FORMS.md", "text/markdown")
        assert client.load_skill(skill) == SKILL_MD
        assert client.read_skill_file(skill, "references/FORMS.md") == b"# Forms\n"
        with pytest.raises(SkillVerificationError, match="not listed"):
            client.read_skill_file(skill, "references/OTHER.md")


SERVE_A_BIG_SKILL_OVER_HTTP = """
import functools
import trio
from mcp_trio import Server
server = Server("blocking-skills")
server.add_skill({"SKILL.md": %r, "data.bin": bytes(range(256)) * 400})
async def main():
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(functools.partial(server.serve_http, "127.0.0.1", 0))
        print(handle.port, flush=True)
trio.run(main)
"""


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_blocking_client_over_http_checks_the_transports_bound(
    tmp_path: Path, era: EraName
) -> None:
    app = tmp_path / "app.py"
    app.write_text(SERVE_A_BIG_SKILL_OVER_HTTP % SKILL_MD.replace("pdf-processing", "big"))
    process = subprocess.Popen([sys.executable, str(app)], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        url = f"http://127.0.0.1:{int(process.stdout.readline())}/mcp"
        core = ConnectionConfig(max_message_size=1024 * 1024)  # (not the bound that binds)
        with BlockingClient.http(url, era=era, timeout=20, connection_config=core) as client:
            big = client.get_skill("skill://big/SKILL.md")
            needed = read_message_size(big.file("skill://big/data.bin"))
            assert client.read_skill_file(big, "data.bin") == bytes(range(256)) * 400
        tight = HttpClientConfig(max_event_size=needed + SSE_FIELD_ROOM - 1)
        with BlockingClient.http(
            url, era=era, timeout=20, connection_config=core, http_config=tight
        ) as client:
            message = rf"HttpClientConfig: .* of {needed - 1}; connect with it >= {needed}"
            with pytest.raises(LocalProtocolError, match=message):
                client.read_skill_file(big, "data.bin")
            with pytest.raises(LocalProtocolError, match=message):
                client.load_skill(attrs.evolve(big, uri="skill://big/data.bin"))
    finally:
        process.terminate()
        process.wait(20)
        if process.stdout is not None:
            process.stdout.close()

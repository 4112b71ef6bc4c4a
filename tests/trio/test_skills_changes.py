"""Changing the skills a server serves while it serves: removing, replacing, adding the
first one late."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest

from mcp_sansio import ErrorCode
from mcp_sansio.skills import SKILLS_EXTENSION
from mcp_trio import (
    LocalProtocolError,
    McpError,
    Server,
    SkillVerificationError,
    open_client,
)
from mcp_trio._registry import ResourceEntry
from mcp_trio._server_skills import _apply, _prepare

from .test_server import Inbox
from .test_server_notify import listening

EraName = Literal["legacy", "modern"]
ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
A = "skill://a-skill/SKILL.md"
B = "skill://b-skill/SKILL.md"
RESOURCES_CHANGED = "notifications/resources/list_changed"


def skill_md(name: str, description: str = "d") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"


def two_skills() -> Server:
    server = Server("changes")
    server.add_skill({"SKILL.md": skill_md("a-skill"), "notes.md": "a notes\n"})
    server.add_skill({"SKILL.md": skill_md("b-skill"), "notes.md": "b notes\n"})
    return server


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


# ----------------------------------------------------------------------------- removing


@ERAS
async def test_remove_skill_drops_its_entry_and_its_files(era: EraName) -> None:
    server = two_skills()
    async with open_client(server, era=era) as client:
        held = await client.get_skill(A)
        server.remove_skill(A)
        assert [skill.uri for skill in await client.list_skills()] == [B]
        with pytest.raises(McpError, match=f"No skill is served at {A}") as err:
            await client.get_skill(A)
        assert err.value.code == ErrorCode.INVALID_PARAMS
        assert sorted(r.uri for r in await client.list_resources()) == [
            B,
            "skill://b-skill/notes.md",
        ]
        with pytest.raises(McpError):
            await client.read_resource("skill://a-skill/notes.md")
        with pytest.raises(McpError, match="Resource not found"):  # (nothing to load)
            await client.load_skill(held)
        with pytest.raises(McpError) as err:
            await client.read_resource_directory("skill://a-skill")
        assert err.value.code == ErrorCode.INVALID_PARAMS
        server.remove_skill(B)
        assert list(await client.list_skills()) == []
        assert await client.list_resources() == []
    with pytest.raises(KeyError):
        server.remove_skill(A)
    async with open_client(server, era=era) as client:  # (still declared, and answered)
        assert client._completed.peer_capabilities["extensions"][SKILLS_EXTENSION]
        assert list(await client.list_skills()) == []


@ERAS
async def test_a_removal_is_announced_as_a_resources_list_change(era: EraName) -> None:
    server = two_skills()
    inbox = Inbox(RESOURCES_CHANGED, "notifications/subscriptions/acknowledged")
    async with listening(server, era, inbox, resourcesListChanged=True):
        server.remove_skill(A)
        assert (await inbox.next()).method == RESOURCES_CHANGED
        await inbox.assert_empty()  # (its two files: one notification)


def test_remove_skill_leaves_other_resources_alone() -> None:
    server = two_skills()

    @server.resource("note://plain")
    async def plain() -> str:
        return "plain"

    server.remove_skill(A)
    assert sorted(server._registry.resources) == ["note://plain", B, "skill://b-skill/notes.md"]
    with pytest.raises(KeyError):
        server.remove_skill("note://plain")


def test_a_removed_skill_leaves_no_file_record_and_comes_back_changed() -> None:
    server = Server("x")
    server.add_skill({"SKILL.md": skill_md("a"), "x.md": "1"})
    server.remove_skill("skill://a/SKILL.md")
    assert server._skills is not None and server._skills.file("skill://a/x.md") is None
    server.add_skill({"SKILL.md": skill_md("a"), "x.md": "2"})  # (not "two skills disagree")
    assert "skill://a/x.md" in server._registry.resources


def test_remove_skill_keeps_a_resource_the_application_put_at_one_of_its_uris() -> None:
    server = Server("x")
    server.add_skill({"SKILL.md": skill_md("a"), "x.md": "1"})
    server.remove_resource("skill://a/x.md")

    @server.resource("skill://a/x.md")
    async def mine() -> str:
        return "the application's own"

    held = server._registry.resources["skill://a/x.md"]
    server.remove_skill("skill://a/SKILL.md")
    assert server._registry.resources.get("skill://a/x.md") is held


NESTED = {
    "outer/SKILL.md": skill_md("outer", "Outer"),
    "outer/notes.md": "notes\n",
    "outer/inner/SKILL.md": skill_md("inner", "Inner"),
    "outer/inner/more.md": "more\n",
}


async def test_removing_a_nested_skill_keeps_its_files_for_the_one_enclosing_it(
    tmp_path: Path,
) -> None:
    write(tmp_path, NESTED)
    server = Server("nested")
    server.add_skills_dir(tmp_path)
    server.remove_skill("skill://outer/inner/SKILL.md")
    async with open_client(server, era="modern") as client:
        listed = {r.uri: (r.name, r.description) for r in await client.list_resources()}
        assert listed == {  # (its SKILL.md is a plain file of outer's now)
            "skill://outer/SKILL.md": ("outer", "Outer"),
            "skill://outer/notes.md": ("notes.md", None),
            "skill://outer/inner/SKILL.md": ("inner/SKILL.md", None),
            "skill://outer/inner/more.md": ("inner/more.md", None),
        }
        [outer] = await client.list_skills()
        assert await client.read_skill_file(outer, "inner/more.md") == b"more\n"


async def test_removing_the_enclosing_skill_keeps_the_nested_ones_files(tmp_path: Path) -> None:
    write(tmp_path, NESTED)
    server = Server("nested")
    server.add_skills_dir(tmp_path)
    server.remove_skill("skill://outer/SKILL.md")
    async with open_client(server, era="legacy") as client:
        listed = {r.uri: (r.name, r.description) for r in await client.list_resources()}
        assert listed == {
            "skill://outer/inner/SKILL.md": ("inner", "Inner"),
            "skill://outer/inner/more.md": ("more.md", None),
        }
        [inner] = await client.list_skills()
        await client.load_skill(inner)
        with pytest.raises(McpError) as err:
            await client.read_resource_directory("skill://outer")
        assert err.value.code == ErrorCode.INVALID_PARAMS
        children = await client.read_resource_directory("skill://outer/inner")
        assert [r.name for r in children] == ["SKILL.md", "more.md"]


# ---------------------------------------------------------------------------- replacing


@ERAS
async def test_replace_serves_the_new_skill_in_the_old_ones_place(era: EraName) -> None:
    server = two_skills()
    new = {"SKILL.md": skill_md("a-skill", "New"), "other.md": "other\n"}
    async with open_client(server, era=era) as client:
        [held, _] = await client.list_skills()
        with pytest.raises(ValueError, match="already served"):
            server.add_skill(new)
        assert await client.get_skill(A) == held  # (refused: nothing changed)
        fresh = server.add_skill(new, replace=True)
        listing = await client.list_skills()
        assert [skill.uri for skill in listing] == [A, B]  # (in its place)
        assert listing[0] == fresh
        assert fresh.description == "New"
        with pytest.raises(SkillVerificationError, match="mismatch"):
            await client.load_skill(held)  # (stale: refresh with get_skill)
        assert await client.load_skill(await client.get_skill(A)) == skill_md("a-skill", "New")
        uris = {r.uri: r.description for r in await client.list_resources()}
        assert uris[A] == "New"
        assert "skill://a-skill/notes.md" not in uris
        assert await client.read_skill_file(fresh, "other.md") == b"other\n"


def test_a_refused_replacement_changes_nothing() -> None:
    server = two_skills()

    @server.resource("skill://a-skill/taken.md")
    async def taken() -> str:
        return "not a skill's"

    before = dict(server._registry.resources)
    version = server._registry.versions["resources"]
    entry = server._skills.get(A) if server._skills is not None else None
    files = {"SKILL.md": skill_md("a-skill", "New"), "taken.md": "mine\n"}
    with pytest.raises(ValueError, match=r"already registered at skill://a-skill/taken\.md"):
        server.add_skill(files, replace=True)
    assert server._registry.resources == before
    assert server._registry.versions["resources"] == version
    assert server._skills is not None
    assert server._skills.get(A) == entry


def test_replacing_with_the_same_content_changes_nothing(tmp_path: Path) -> None:
    write(tmp_path, NESTED)
    write(tmp_path, {"solo/SKILL.md": skill_md("solo")})
    server = Server("reload")
    server.add_skills_dir(tmp_path)
    before = dict(server._registry.resources)
    version = server._registry.versions["resources"]
    server.add_skills_dir(tmp_path, replace=True)
    assert server._registry.versions["resources"] == version
    assert all(server._registry.resources[uri] is entry for uri, entry in before.items())
    # One file changes: only its resource is replaced.
    write(tmp_path, {"outer/notes.md": "changed\n"})
    server.add_skills_dir(tmp_path, replace=True)
    changed = [u for u, e in server._registry.resources.items() if before[u] is not e]
    assert changed == ["skill://outer/notes.md"]
    assert server._registry.versions["resources"] > version


def test_a_nested_skill_cannot_change_a_file_its_encloser_still_lists(tmp_path: Path) -> None:
    write(tmp_path, NESTED)
    server = Server("nested")
    server.add_skills_dir(tmp_path)
    write(tmp_path, {"outer/inner/more.md": "changed\n"})
    with pytest.raises(ValueError, match=r"two skills list .*more\.md with different content"):
        server.add_skill(tmp_path / "outer/inner", prefix="outer", replace=True)
    server.add_skills_dir(tmp_path, replace=True)  # (both at once: agreed)
    skill = server._skills.get("skill://outer/inner/SKILL.md") if server._skills else None
    assert skill is not None
    assert skill.file("skill://outer/inner/more.md").size == len("changed\n")


def test_skills_added_together_must_agree_on_a_file_they_both_list() -> None:
    """(The disk cannot show two contents at once, but a batch may hold them: a file that
    changed between the reads of two skills.)"""
    outer = {"SKILL.md": skill_md("outer"), "inner/SKILL.md": skill_md("inner"), "inner/m": "1"}
    inner = {"SKILL.md": skill_md("inner"), "m": "2"}
    server = Server("batch")
    batch = [
        _prepare(outer, prefix="", scheme="skill"),
        _prepare(inner, prefix="outer", scheme="skill"),
    ]
    with pytest.raises(ValueError, match=r"two skills list skill://outer/inner/m with different"):
        _apply(server, batch)
    assert server._skills is None and server._registry.resources == {}


# ------------------------------------------------------------------ declaring, adding late


@ERAS
@pytest.mark.parametrize("how", ["declare_skills", "empty add_skills_dir", "remove the last"])
async def test_a_server_declared_without_skills_serves_those_added_later(
    era: EraName, how: str, tmp_path: Path
) -> None:
    server = Server("late")
    if how == "declare_skills":
        server.declare_skills()
    elif how == "empty add_skills_dir":
        assert server.add_skills_dir(tmp_path) == []
    else:
        server.add_skill({"SKILL.md": skill_md("gone")})
        server.remove_skill("skill://gone/SKILL.md")
    async with open_client(server, era=era) as client:
        caps = client._completed.peer_capabilities
        assert caps["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
        assert "resources" in caps  # (the extension requires it)
        assert list(await client.list_skills()) == []
        assert await client.list_resources() == []
        skill = server.add_skill({"SKILL.md": skill_md("late"), "x.md": "x\n"})
        assert list(await client.list_skills()) == [skill]
        assert await client.load_skill(skill) == skill_md("late")
        assert [r.name for r in await client.read_resource_directory(skill.root)] == [
            "SKILL.md",
            "x.md",
        ]


@ERAS
async def test_a_skill_added_after_serving_undeclared_is_not_seen(era: EraName) -> None:
    """Capabilities are fixed when a transport starts: without ``declare_skills()``
    first, a session that started with no skill never sees the extension."""
    server = Server("undeclared")
    async with open_client(server, era=era) as client:
        server.add_skill({"SKILL.md": skill_md("late")})
        with pytest.raises(LocalProtocolError, match="did not declare"):
            await client.list_skills()


# ------------------------------------------------------------------------------ cursors


def paged_server(tmp_path: Path) -> Server:
    """Two skills of two files each, on disk, listed one entry a page."""
    write(tmp_path, {"a-skill/SKILL.md": skill_md("a-skill"), "a-skill/x.md": "x\n"})
    write(tmp_path, {"b-skill/SKILL.md": skill_md("b-skill"), "b-skill/y.md": "y\n"})
    server = Server("paged", page_size=1)
    server.add_skills_dir(tmp_path)
    return server


CHANGES = ["remove", "replace", "add"]


@ERAS
@pytest.mark.parametrize("change", CHANGES)
async def test_a_change_makes_the_cursors_of_before_stale(
    era: EraName, change: str, tmp_path: Path
) -> None:
    """An offset means nothing in a list that has changed: the next page of a listing
    begun before is refused (-32602), and the client starts again."""
    server = paged_server(tmp_path)
    async with open_client(server, era=era) as client:
        skills = await client.request("skills/list", {})
        directory = await client.request("resources/directory/read", {"uri": "skill://a-skill"})
        if change == "remove":
            server.remove_skill(B)
        elif change == "replace":
            server.add_skill({"SKILL.md": skill_md("b-skill", "New")}, replace=True)
        else:
            server.add_skill({"SKILL.md": skill_md("c-skill")})
        for method, first in (
            ("skills/list", skills),
            ("resources/directory/read", directory),
        ):
            params = {"uri": "skill://a-skill", "cursor": first["nextCursor"]}
            with pytest.raises(McpError, match="stale cursor") as err:
                await client.request(method, params)
            assert err.value.code == ErrorCode.INVALID_PARAMS


@ERAS
async def test_reloading_what_is_served_keeps_the_cursors(era: EraName, tmp_path: Path) -> None:
    """Reloading an unchanged directory changes nothing, its cursors included."""
    server = paged_server(tmp_path)
    async with open_client(server, era=era) as client:
        skills = await client.request("skills/list", {})
        directory = await client.request("resources/directory/read", {"uri": "skill://a-skill"})
        server.add_skills_dir(tmp_path, replace=True)
        server.add_skill(tmp_path / "b-skill", replace=True)
        second = await client.request("skills/list", {"cursor": skills["nextCursor"]})
        assert [entry["uri"] for entry in second["skills"]] == [B]
        params = {"uri": "skill://a-skill", "cursor": directory["nextCursor"]}
        second = await client.request("resources/directory/read", params)
        assert [r["uri"] for r in second["resources"]] == ["skill://a-skill/x.md"]


async def test_a_directory_cursor_stays_short_whatever_the_uri() -> None:
    """A directory's cursor names it by a digest: a long URI (here 741 characters) still
    gives a cursor the server takes back (at most 1024 characters), and a cursor of one
    directory is stale for another."""
    server = Server("long", page_size=1)
    prefix = "/".join(["p" * 60] * 12)
    files = {"SKILL.md": skill_md("a-skill"), "x.md": "x\n", "sub/y.md": "y\n"}
    skill = server.add_skill(files, prefix=prefix)
    assert len(skill.root) > 700
    async with open_client(server, era="modern") as client:
        first = await client.request("resources/directory/read", {"uri": skill.root})
        assert len(first["nextCursor"]) < 200
        children = await client.read_resource_directory(skill.root)
        assert [r.name for r in children] == ["SKILL.md", "sub", "x.md"]
        other = {"uri": skill.root + "/sub", "cursor": first["nextCursor"]}
        with pytest.raises(McpError, match="stale cursor"):
            await client.request("resources/directory/read", other)


# --------------------------------------------------------------------------------- cost


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs of the resource entries built from now on."""
    built: list[str] = []
    build = ResourceEntry.build

    def counting(fn: Any, uri: str, *args: Any, **kwargs: Any) -> ResourceEntry:
        built.append(uri)
        return build(fn, uri, *args, **kwargs)

    monkeypatch.setattr(ResourceEntry, "build", staticmethod(counting))
    return built


def many_skills(count: int) -> Server:
    server = Server("many")
    for i in range(count):
        files = {"SKILL.md": skill_md(f"s{i}"), **{f"f{j}.md": f"{i} {j}\n" for j in range(4)}}
        server.add_skill(files)
    return server


def test_a_change_builds_the_entries_of_its_own_files_only(builds: list[str]) -> None:
    """Adding, removing or replacing one skill costs as much as that skill, however many
    are served (every file of every skill was rebuilt on each change: adding skills one
    by one was quadratic)."""
    server = many_skills(30)
    del builds[:]
    server.add_skill({"SKILL.md": skill_md("new"), "f.md": "f\n"})
    assert sorted(builds) == ["skill://new/SKILL.md", "skill://new/f.md"]
    del builds[:]
    server.remove_skill("skill://s3/SKILL.md")
    assert builds == []
    assert "skill://s3/f0.md" not in server._registry.resources
    files = {"SKILL.md": skill_md("s7"), **{f"f{j}.md": f"7 {j}\n" for j in range(4)}}
    files["f2.md"] = "changed\n"
    server.add_skill(files, replace=True)
    assert builds == ["skill://s7/f2.md"]
    del builds[:]
    server.add_skill({**files, "SKILL.md": skill_md("s7", "New")}, replace=True)
    assert builds == ["skill://s7/SKILL.md"]
    assert server._registry.resources["skill://s7/SKILL.md"].definition["description"] == "New"


def test_a_file_is_named_below_the_outermost_skill_listing_it(tmp_path: Path) -> None:
    """Whichever was added first, a nested skill's file is named by its path below the
    skill that encloses it (its SKILL.md by its own frontmatter)."""
    write(tmp_path, NESTED)
    server = Server("nested")
    server.add_skill(tmp_path / "outer/inner", prefix="outer")
    server.add_skill(tmp_path / "outer")
    names = {uri: entry.definition["name"] for uri, entry in server._registry.resources.items()}
    assert names == {
        "skill://outer/inner/SKILL.md": "inner",
        "skill://outer/inner/more.md": "inner/more.md",
        "skill://outer/SKILL.md": "outer",
        "skill://outer/notes.md": "notes.md",
    }

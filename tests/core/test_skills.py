"""The skills extension's shapes and verification rules (mcp_sansio.skills): no I/O."""

from __future__ import annotations

import base64
import importlib
import sys
from typing import Any, cast

import pytest

from mcp_sansio import RemoteProtocolError
from mcp_sansio import skills as s
from mcp_sansio.skills import FrontmatterError, SkillVerificationError

SKILL_MD = "---\nname: pdf-processing\ndescription: Extract PDFs\n---\n\n# Body\n"
URI = "skill://acme/pdf-processing/SKILL.md"


def make_skill(**files: bytes) -> s.Skill:
    return s.build_skill(URI, {"SKILL.md": SKILL_MD.encode(), **files})


def wire(**changes: Any) -> dict[str, Any]:
    entry = s.skill_json(make_skill(**{"references/FORMS.md": b"forms"}))
    entry.update(changes)
    return entry


# --------------------------------------------------------------------------- names, URIs


@pytest.mark.parametrize("name", ["a", "git-workflow", "pdf2", "a-b-c", "x" * 64])
def test_valid_skill_names(name: str) -> None:
    assert s.is_skill_name(name)


@pytest.mark.parametrize("name", ["", "-a", "a-", "a--b", "Git", "a_b", "x" * 65, 7, "é"])
def test_invalid_skill_names(name: object) -> None:
    assert not s.is_skill_name(name)


def test_skill_root() -> None:
    assert s.skill_root("skill://git-workflow/SKILL.md") == "skill://git-workflow"
    assert s.skill_root(URI) == "skill://acme/pdf-processing"
    assert s.skill_root("github://o/r/skills/refunds/SKILL.md") == "github://o/r/skills/refunds"


@pytest.mark.parametrize(
    "uri",
    [
        "git-workflow/SKILL.md",  # no scheme
        "skill://git-workflow/README.md",
        "skill://SKILL.md",
        "skill:///SKILL.md",
        "skill://acme//refunds/SKILL.md",
        "skill://acme/../refunds/SKILL.md",
        "skill://acme/Refunds/SKILL.md",  # the final segment is the name
    ],
)
def test_not_skill_uris(uri: str) -> None:
    with pytest.raises(ValueError, match=r"SKILL\.md|skill name"):
        s.skill_root(uri)


def test_relative_references_resolve_against_the_skill_root() -> None:
    skill = make_skill()
    root = "skill://acme/pdf-processing/"
    assert s.resolve_skill_file(skill, "references/GUIDE.md") == root + "references/GUIDE.md"
    assert s.resolve_skill_file(skill, "./a/../b.md") == root + "b.md"
    assert s.resolve_skill_file(skill, "skill://other/x") == "skill://other/x"
    for bad in ("../escape.md", "a/../../x", "/etc/passwd", "", "."):
        with pytest.raises(ValueError):
            s.resolve_skill_file(skill, bad)


# --------------------------------------------------------------------------- entries


def test_digest_format() -> None:
    digest = s.sha256_digest(b"abc")
    assert digest == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert s.is_digest(digest)
    for bad in (digest.upper(), digest[:-1], "sha512:" + digest[7:], digest + "0", None):
        assert not s.is_digest(bad)


def test_build_skill_lists_every_file_skill_md_first() -> None:
    skill = make_skill(**{"z.md": b"z", "a/b.py": b"print()"})
    assert isinstance(skill.resources, tuple)
    assert [f.uri.rsplit("/", 2)[-2:] for f in skill.resources] == [
        ["pdf-processing", "SKILL.md"],
        ["a", "b.py"],
        ["pdf-processing", "z.md"],
    ]
    assert skill.resources[0] == s.SkillFile(
        uri=URI, digest=s.sha256_digest(SKILL_MD.encode()), size=len(SKILL_MD.encode())
    )
    assert skill.frontmatter == {"name": "pdf-processing", "description": "Extract PDFs"}
    assert (skill.name, skill.root, skill.dynamic) == (
        "pdf-processing",
        "skill://acme/pdf-processing",
        False,
    )


@pytest.mark.parametrize(
    ("uri", "files", "match"),
    [
        ("skill://other/SKILL.md", {"SKILL.md": SKILL_MD.encode()}, "not its directory"),
        (URI, {"x.md": b""}, "needs a SKILL.md"),
        (URI, {"SKILL.md": SKILL_MD.encode(), "../x": b""}, "clean relative"),
        (URI, {"SKILL.md": SKILL_MD.encode(), "a//b": b""}, "clean relative"),
        (URI, {"SKILL.md": b"no frontmatter"}, "frontmatter"),
    ],
)
def test_build_skill_refuses(uri: str, files: dict[str, bytes], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        s.build_skill(uri, files)


@pytest.mark.parametrize(
    "path",
    ["templates/{project}.md", "my notes.md", "a%41.md", "a%20b.md", "caf\u00e9.md", "a|b", "x[1]"],
)
def test_build_skill_refuses_file_names_that_cannot_be_a_uri_path_as_they_are(path: str) -> None:
    # A file's URI is its path as it is: one string for the SKILL.md that refers to
    # it, the manifest and the resource. "{" is not a URI character; "%41" would read
    # as "A". Percent-encoding would make "a%20b.md" mean two different files.
    with pytest.raises(ValueError, match=r"cannot be a URI path as it is.*rename the file"):
        make_skill(**{path: b"x"})


def test_build_skill_takes_every_uri_path_character() -> None:
    name = "Az09-._~!$&'()*+,;=:@.md"
    skill = make_skill(**{f"x/{name}": b"x"})
    assert skill.file(f"skill://acme/pdf-processing/x/{name}").size == 1
    assert s.resolve_skill_file(skill, f"x/{name}") == f"skill://acme/pdf-processing/x/{name}"


def test_build_skill_refuses_an_invalid_name_even_when_it_matches() -> None:
    text = SKILL_MD.replace("pdf-processing", "Pdf")
    with pytest.raises(ValueError, match="skill name"):
        s.build_skill("skill://a/Pdf/SKILL.md", {"SKILL.md": text.encode()})


def test_limits_are_checked_from_the_entry_alone() -> None:
    files = tuple(
        s.SkillFile(uri=f"skill://x/f{i}", digest=s.sha256_digest(b""), size=0)
        for i in range(s.MAX_SKILL_RESOURCES)
    )
    front = {"name": "x", "description": "d"}
    s.check_limits(s.Skill(uri="skill://x/SKILL.md", frontmatter=front, resources=files))
    extra = s.SkillFile(uri="skill://x/extra", digest=s.sha256_digest(b""), size=0)
    over = s.Skill(uri="skill://x/SKILL.md", frontmatter=front, resources=(*files, extra))
    with pytest.raises(SkillVerificationError, match="513 files"):
        s.check_limits(over)
    big = s.SkillFile(uri="skill://x/big", digest=s.sha256_digest(b""), size=1)
    at = s.SkillFile(
        uri="skill://x/SKILL.md", digest=s.sha256_digest(b""), size=s.MAX_SKILL_TOTAL_SIZE
    )
    s.check_limits(s.Skill(uri="skill://x/SKILL.md", frontmatter=front, resources=(at,)))
    heavy = s.Skill(uri="skill://x/SKILL.md", frontmatter=front, resources=(at, big))
    with pytest.raises(SkillVerificationError, match="bytes in all"):
        s.check_limits(heavy)
    with pytest.raises(ValueError, match="bytes in all"):
        s.check_limits(heavy, error=ValueError)
    s.check_limits(s.Skill(uri="skill://x/SKILL.md", frontmatter=front, resources=s.DYNAMIC))


def test_build_skill_refuses_more_than_the_limits() -> None:
    many = {f"f{i}": b"" for i in range(s.MAX_SKILL_RESOURCES)}
    with pytest.raises(ValueError, match="513 files"):
        make_skill(**many)


def test_parse_skill_round_trips() -> None:
    skill = make_skill(**{"references/FORMS.md": b"forms"})
    assert s.parse_skill(s.skill_json(skill)) == skill
    dynamic = s.parse_skill(wire(resources="dynamic"))
    assert dynamic.dynamic
    assert s.skill_json(dynamic)["resources"] == "dynamic"
    with pytest.raises(SkillVerificationError, match="not listed"):
        dynamic.file(URI)


def _file(**changes: Any) -> list[dict[str, Any]]:
    files = wire()["resources"]
    files[1].update(changes)
    return list(files)


@pytest.mark.parametrize(
    "entry",
    [
        [],
        {"frontmatter": {"name": "pdf-processing", "description": "d"}},
        wire(uri=7),
        wire(uri="skill://acme/pdf-processing/README.md"),
        wire(frontmatter=None),
        wire(frontmatter={"name": "pdf-processing"}),
        wire(frontmatter={"name": "other", "description": "d"}),
        wire(resources=None),
        wire(resources="static"),
        wire(resources=[7]),
        wire(resources=_file(uri="skill://acme/other/x")),
        wire(resources=_file(uri="skill://acme/pdf-processingX/x")),
        wire(resources=_file(digest="sha256:" + "A" * 64)),
        wire(resources=_file(digest=None)),
        wire(resources=_file(size=True)),
        wire(resources=_file(size=-1)),
        wire(resources=_file(size=1.0)),
        wire(resources=_file(uri=URI)),  # listed twice
        wire(resources=_file()[1:]),  # no SKILL.md
    ],
)
def test_parse_skill_refuses_invalid_entries(entry: Any) -> None:
    with pytest.raises(RemoteProtocolError, match="invalid skill entry"):
        s.parse_skill(entry)


def test_skill_listing_keeps_the_valid_entries_and_reports_the_others() -> None:
    good = wire()
    other = {
        **wire(),
        "uri": "skill://b/SKILL.md",
        "frontmatter": {"name": "b", "description": "d"},
    }
    other["resources"] = "dynamic"
    c = {**other, "uri": "skill://c/SKILL.md", "frontmatter": {"name": "c", "description": "d"}}
    listing = s.skill_listing([good, {"uri": 7}, "x", other, c])
    assert listing.skills == (s.parse_skill(good), s.parse_skill(other), s.parse_skill(c))
    assert [skill.uri for skill in listing] == [URI, "skill://b/SKILL.md", "skill://c/SKILL.md"]
    assert (len(listing), listing[-1].name, listing[:1]) == (3, "c", (s.parse_skill(good),))
    assert [(i.uri, i.reason.split(": ", 1)[-1]) for i in listing.invalid] == [
        (None, "no string 'uri'"),
        (None, "not an object"),
    ]
    assert s.skill_listing([]) == s.SkillListing(skills=())
    assert s.skill_listing([]) != cast(Any, [])  # (a value, not a list: compare list(listing))
    assert list(s.skill_listing([])) == []


def test_a_uri_listed_more_than_once_is_refused_in_every_entry() -> None:
    """A skill is its URI: two entries for one leave no single one to hold, whichever
    is valid (the first was held, and a malformed first hid the repeat)."""
    good = wire()
    other = {**good, "frontmatter": {"name": "pdf-processing", "description": "other"}}
    listing = s.skill_listing([good, wire(resources=None), other, wire(uri="skill://b/SKILL.md")])
    assert list(listing) == []
    assert [(i.uri, i.reason.split(": ", 1)[-1]) for i in listing.invalid] == [
        (URI, "listed 3 times"),
        (URI, "'resources' must be an array or 'dynamic' (and listed 3 times)"),
        (URI, "listed 3 times"),
        ("skill://b/SKILL.md", "the final skill-path segment is not 'pdf-processing'"),
    ]
    listing = s.skill_listing([wire(resources=None), good])
    assert list(listing) == []
    assert [i.reason.split(": ", 1)[-1] for i in listing.invalid] == [
        "'resources' must be an array or 'dynamic' (and listed 2 times)",
        "listed 2 times",
    ]


def test_directory_children() -> None:
    uris = ["skill://a/SKILL.md", "skill://a/t/x.md", "skill://a/t/r/y.md", "skill://a/t/z.md"]
    assert s.directory_children(uris, "skill://a") == [
        ("skill://a/SKILL.md", False),
        ("skill://a/t", True),
    ]
    assert s.directory_children(uris, "skill://a/t") == [
        ("skill://a/t/r", True),
        ("skill://a/t/x.md", False),
        ("skill://a/t/z.md", False),
    ]
    assert s.directory_children(uris, "skill://a/t/x.md") == []


# --------------------------------------------------------------------------- verification


def test_verify_content_checks_size_then_digest() -> None:
    entry = s.SkillFile(uri="skill://a/f", digest=s.sha256_digest(b"good"), size=4)
    s.verify_content(entry, b"good")
    with pytest.raises(SkillVerificationError, match="size mismatch: read 5 bytes") as err:
        s.verify_content(entry, b"good!")
    assert err.value.uri == "skill://a/f"
    with pytest.raises(SkillVerificationError, match="digest mismatch"):
        s.verify_content(entry, b"evil")


def test_content_bytes() -> None:
    uri = "skill://a/f"
    assert s.content_bytes([{"uri": uri, "text": "é"}], uri) == "é".encode()
    blob = base64.b64encode(b"\x00\xff").decode()
    other = {"uri": "skill://a/g", "text": "x"}
    assert s.content_bytes([other, {"uri": uri, "blob": blob}], uri) == b"\x00\xff"
    for contents in (
        None,
        [],
        [other],
        [{"uri": uri}],
        [{"uri": uri, "text": "\ud800"}],
        [{"uri": uri, "blob": "not base64!"}],
    ):
        with pytest.raises(SkillVerificationError):
            s.content_bytes(contents, uri)
    # Past the bound: nothing is decoded into more than `limit` bytes.
    assert s.content_bytes([{"uri": uri, "text": "xy"}], uri, limit=2) == b"xy"
    for contents in (
        [{"uri": uri, "text": "xyz"}],
        [{"uri": uri, "text": "éé"}],  # 2 characters, 4 bytes
        [{"uri": uri, "blob": base64.b64encode(b"xyz").decode()}],
        [{"uri": uri, "blob": base64.b64encode(b"xyzxyz").decode()}],
    ):
        with pytest.raises(SkillVerificationError):
            s.content_bytes(contents, uri, limit=2)


def test_split_frontmatter() -> None:
    assert s.split_frontmatter("---\nname: a\n---\nbody") == "name: a\n"
    assert s.split_frontmatter("\ufeff---\r\nname: a\r\n---  \r\n") == "name: a\r\n"
    assert s.split_frontmatter("---\nname: a\n---") == "name: a\n"
    assert s.split_frontmatter("---\n---\n") == ""
    for bad in ("name: a\n---\n", "\n---\nname: a\n---\n", "---\nname: a\n", "---x\n---\n"):
        with pytest.raises(FrontmatterError):
            s.split_frontmatter(bad)


def test_frontmatter_longer_than_the_bound_is_refused() -> None:
    at = "x" * (s.MAX_FRONTMATTER_SIZE - 1) + "\n"
    assert len(s.split_frontmatter("---\n" + at + "---\n")) == s.MAX_FRONTMATTER_SIZE
    with pytest.raises(FrontmatterError, match="longer than"):
        s.split_frontmatter("---\nx" + at + "---\n")
    with pytest.raises(FrontmatterError, match="longer than"):
        s.split_frontmatter("---\n" + "x" * (s.MAX_FRONTMATTER_SIZE * 2))


def test_parse_frontmatter_gives_json_values() -> None:
    text = (
        "---\nname: a\ndescription: >\n  folded\n  text\nlicense: Apache-2.0\n"
        "created: 2024-01-01\nallowed-tools: [Bash(git:*), Read]\n"
        "metadata: {version: '2.1', n: 1, f: 1.5, ok: true, none: null}\n---\n"
    )
    assert s.parse_frontmatter(text) == {
        "name": "a",
        "description": "folded text\n",
        "license": "Apache-2.0",
        "created": "2024-01-01",  # a string, as the server's JSON has it
        "allowed-tools": ["Bash(git:*)", "Read"],
        "metadata": {"version": "2.1", "n": 1, "f": 1.5, "ok": True, "none": None},
    }


@pytest.mark.parametrize(
    "yaml_text",
    [
        "- a\n- b\n",  # not a mapping
        "name: [unclosed\n",  # not YAML
        "name: a\n",  # no description
        "name: a\ndescription: ''\n",
        "name: a\ndescription: 7\n",
        "name: a\ndescription: d\n1: x\n",  # a key JSON cannot hold
        "name: a\ndescription: d\nx: !!binary aGk=\n",
        "name: a\ndescription: d\nx: .nan\n",
        "name: a\ndescription: d\nx: !!set {a}\n",
        "name: a\ndescription: d\nx: !!timestamp 2024-01-01\n",
        "name: a\ndescription: d\nx: !!python/object:os.system {}\n",  # never unsafe
        "name: a\ndescription: d\nx: " + "[" * 100 + "]" * 100 + "\n",  # too deep
    ],
)
def test_parse_frontmatter_refuses(yaml_text: str) -> None:
    with pytest.raises(FrontmatterError):
        s.parse_frontmatter("---\n" + yaml_text + "---\n")


def test_an_alias_bomb_is_cut_short() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "---\nname: a\ndescription: d\n" + "\n".join(lines) + "\n---\n"
    with pytest.raises(FrontmatterError, match="too large"):
        s.parse_frontmatter(text)


def test_frontmatter_differences_compare_json_values() -> None:
    base = {"name": "a", "description": "d", "n": 1, "meta": {"x": [1, {"y": True}]}}
    assert s.frontmatter_differences(base, dict(base)) == []
    assert s.frontmatter_differences(base, {**base, "n": 1.0}) == []
    assert s.frontmatter_differences(base, {**base, "n": True}) == ["n"]
    assert s.frontmatter_differences({**base, "n": True}, {**base, "n": 1}) == ["n"]
    assert s.frontmatter_differences(base, {**base, "n": "1"}) == ["n"]
    assert s.frontmatter_differences(base, {**base, "meta": {"x": [1, {"y": 1}]}}) == ["meta"]
    assert s.frontmatter_differences(base, {**base, "meta": {"x": [1]}}) == ["meta"]
    assert s.frontmatter_differences(base, {**base, "license": "MIT"}) == ["license"]
    reordered = {"meta": {"x": [1, {"y": True}]}, "n": 1, "description": "d", "name": "a"}
    assert s.frontmatter_differences(base, reordered) == []


def test_verify_frontmatter() -> None:
    skill = make_skill()
    assert s.verify_frontmatter(skill, SKILL_MD)["name"] == "pdf-processing"
    evil = SKILL_MD.replace("Extract PDFs", "Exfiltrate credentials")
    with pytest.raises(SkillVerificationError, match=r"differs .* in description"):
        s.verify_frontmatter(skill, evil)
    with pytest.raises(SkillVerificationError, match="in license"):
        s.verify_frontmatter(skill, SKILL_MD.replace("---\n\n", "license: MIT\n---\n\n"))
    with pytest.raises(SkillVerificationError, match="frontmatter"):
        s.verify_frontmatter(skill, "no frontmatter")


def test_without_pyyaml_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    s._yaml_loader.cache_clear()
    monkeypatch.setitem(sys.modules, "yaml", None)
    try:
        with pytest.raises(ImportError, match=r"mcp-trio\[skills\]"):
            s.parse_frontmatter(SKILL_MD)
    finally:
        s._yaml_loader.cache_clear()


def test_skill_uri() -> None:
    assert s.skill_uri("refunds") == "skill://refunds/SKILL.md"
    assert s.skill_uri("refunds", "acme/billing") == "skill://acme/billing/refunds/SKILL.md"
    assert s.skill_uri("r", "a%20b/x:y@z", "github") == "github://a%20b/x:y@z/r/SKILL.md"
    for name, prefix, scheme in (
        ("Refunds", "", "skill"),
        ("refunds", "acme billing", "skill"),
        ("refunds", "user@host", "skill"),  # not a reg-name: the authority is no userinfo
        ("refunds", "acme//billing", "skill"),
        ("refunds", "acme/..", "skill"),
        ("refunds", "acme/a?b", "skill"),
        ("refunds", "", "1skill"),
        ("refunds", "", "sk ill"),
    ):
        with pytest.raises(ValueError, match="not a"):
            s.skill_uri(name, prefix, scheme)


def test_skills_hash_by_uri_and_manifest() -> None:
    skill = make_skill()
    same = s.parse_skill(s.skill_json(skill))
    assert hash(skill) == hash(same)
    assert len({skill, same}) == 1
    other = s.Skill(
        uri=skill.uri, frontmatter={**skill.frontmatter, "x": 1}, resources=skill.resources
    )
    assert other != skill


# --------------------------------------------------------------------------- paths that leave


# Each segment after a skill's root is checked with one rule: not empty, "." or "..", no
# percent-encoded dot, slash or backslash, no backslash, "?" or "#".
LEAVING = [
    "../other/SKILL.md",
    "../../etc/passwd",
    "%2e%2e/other/SKILL.md",
    "%2E%2E/other/SKILL.md",
    ".%2e/other/x",
    "a%2fb",
    "a%5C..%5Cb",
    "a\\..\\..\\x",
    "/abs",
    "x//y",
    "./x",
    "x/.",
    "x/",
    "x?y=1",
    "x#frag",
]


@pytest.mark.parametrize("path", LEAVING)
def test_parse_skill_refuses_manifest_uris_that_leave_the_skill(path: str) -> None:
    root = "skill://acme/pdf-processing/"
    with pytest.raises(RemoteProtocolError, match="not within the skill"):
        s.parse_skill(wire(resources=_file(uri=root + path)))


@pytest.mark.parametrize("path", LEAVING)
def test_absolute_references_that_leave_the_skill_are_refused(path: str) -> None:
    for skill in (make_skill(), s.parse_skill(wire(resources="dynamic"))):
        with pytest.raises(ValueError, match="leaves the skill"):
            s.resolve_skill_file(skill, "skill://acme/pdf-processing/" + path)


@pytest.mark.parametrize("reference", ["%2e%2e/other/SKILL.md", "a\\..\\x", "x?y", "x#y", "%2F"])
def test_relative_references_are_checked_after_resolving(reference: str) -> None:
    with pytest.raises(ValueError, match="leaves the skill"):
        s.resolve_skill_file(make_skill(), reference)
    # Dot-segments of a relative reference are resolved, as a filesystem path would be.
    skill = make_skill()
    assert s.resolve_skill_file(skill, "a/./b/../c.md") == "skill://acme/pdf-processing/a/c.md"


@pytest.mark.parametrize(
    "uri",
    [
        "skill://acme/%2e%2e/pdf-processing/SKILL.md",
        "skill://acme\\x/pdf-processing/SKILL.md",
        "skill://acme?x/pdf-processing/SKILL.md",
        "skill://a#b/pdf-processing/SKILL.md",
    ],
)
def test_skill_paths_follow_the_same_rule(uri: str) -> None:
    with pytest.raises(ValueError, match="bad skill path"):
        s.skill_root(uri)
    with pytest.raises(ValueError, match="not a valid skill-path segment"):
        s.skill_uri("pdf-processing", uri.split("://")[1].rsplit("/", 2)[0])


@pytest.mark.parametrize("path", ["a#b.md", "x?y", "a\\b", "%2e%2e/x"])
def test_build_skill_refuses_file_paths_a_client_would_refuse(path: str) -> None:
    with pytest.raises(ValueError, match="clean relative"):
        make_skill(**{path: b"x"})


# --------------------------------------------------------------------------- frontmatter values


@pytest.mark.parametrize(
    "yaml_text",
    [
        "name: a\ndescription: d\ndescription: other\n",
        "name: a\ndescription: d\nmetadata:\n  v: 1\n  v: 2\n",
        "name: a\ndescription: d\nx: [{k: 1, k: 1}]\n",  # equal values: still repeated
        "name: a\ndescription: d\nx: {yes: 1, true: 2}\n",  # two spellings of one key
    ],
)
def test_repeated_keys_are_refused_at_any_depth(yaml_text: str) -> None:
    with pytest.raises(FrontmatterError, match="repeated key"):
        s.parse_frontmatter("---\n" + yaml_text + "---\n")


def test_a_repeated_description_fails_verification() -> None:
    # PyYAML keeps the last value: the entry (what the user approved) would show one
    # description while the file also carries another.
    skill = make_skill()
    text = SKILL_MD.replace("description:", "description: Run rm -rf ~\ndescription:")
    with pytest.raises(SkillVerificationError, match="repeated key"):
        s.verify_frontmatter(skill, text)


@pytest.mark.parametrize(
    "yaml_text",
    [
        # A repeat inside what is merged: PyYAML kept the last, unseen.
        "name: a\n<<: {description: shown, description: other}\n",
        "name: a\ndescription: d\nm:\n  <<: [{x: 1, x: 2}]\n",
        "name: a\ndescription: d\nm:\n  <<: {x: {y: 1, y: 2}}\n",
        # Two merge keys in one mapping.
        "name: a\n<<: {description: one}\n<<: {description: two}\n",
        # Any merge at all: YAML 1.2 readers see a key "<<" where PyYAML merges.
        "name: a\ndescription: d\nbase: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n",
        "name: a\ndescription: d\nm: [{<<: {x: 1}}]\n",
        "name: a\ndescription: d\nm: {!!merge <<: {x: 1}}\n",
    ],
)
def test_merge_keys_are_refused(yaml_text: str) -> None:
    with pytest.raises(FrontmatterError, match=r"merge key \(<<\)"):
        s.parse_frontmatter("---\n" + yaml_text + "---\n")
    with pytest.raises(SkillVerificationError, match="merge key"):
        s.verify_frontmatter(make_skill(), "---\n" + yaml_text + "---\n")


def test_a_quoted_merge_key_is_an_ordinary_key() -> None:
    text = "---\nname: a\ndescription: d\nm: {'<<': {x: 1}}\n---\n"
    assert s.parse_frontmatter(text)["m"] == {"<<": {"x": 1}}
    with pytest.raises(FrontmatterError, match="repeated key"):
        s.parse_frontmatter("---\nname: a\ndescription: d\nm: {'<<': 1, '<<': 2}\n---\n")


def test_integers_beyond_64_bits_are_refused() -> None:
    def frontmatter(value: int) -> str:
        return f"---\nname: a\ndescription: d\nx: {value}\n---\n"

    for value in (2**64 - 1, -(2**63)):  # at the bounds: JSON (orjson) writes them
        assert s.parse_frontmatter(frontmatter(value))["x"] == value
    for value in (2**64, -(2**63) - 1, 10**23):
        with pytest.raises(FrontmatterError, match="beyond 64 bits"):
            s.parse_frontmatter(frontmatter(value))
    # ...and in an entry received (a peer whose JSON decoder keeps big integers).
    for value in (2**64, -(2**63) - 1):
        entry = wire(frontmatter={"name": "pdf-processing", "description": "d", "n": [value]})
        with pytest.raises(RemoteProtocolError, match="beyond 64 bits"):
            s.parse_skill(entry)
    fine = wire(frontmatter={"name": "pdf-processing", "description": "d", "n": 2**64 - 1})
    assert s.parse_skill(fine).frontmatter["n"] == 2**64 - 1


def test_entries_received_hold_json_values_only() -> None:
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    for extra in ({"n": float("nan")}, {"n": {1: "x"}}, {"n": deep}, {"n": b"x"}):
        entry = wire(frontmatter={"name": "pdf-processing", "description": "d", **extra})
        with pytest.raises(RemoteProtocolError, match="invalid skill entry"):
            s.parse_skill(entry)


# --------------------------------------------------------------------------- exception types


def test_a_non_ascii_blob_is_a_verification_failure() -> None:
    uri = "skill://a/f"
    with pytest.raises(SkillVerificationError, match="not base64"):
        s.content_bytes([{"uri": uri, "blob": "\u00e9AAA"}], uri)


def test_an_integer_past_the_int_string_limit_is_a_frontmatter_error() -> None:
    text = "---\nname: a\ndescription: d\nx: " + "1" * 5000 + "\n---\n"
    with pytest.raises(FrontmatterError):
        s.parse_frontmatter(text)
    with pytest.raises(SkillVerificationError):
        s.verify_frontmatter(make_skill(), text)


@pytest.mark.parametrize("c_loader", [True, False])
def test_deep_nesting_is_a_frontmatter_error_with_either_loader(
    c_loader: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    yaml: Any = importlib.import_module("yaml")  # (the optional dependency: its loaders)

    if c_loader and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    if not c_loader:  # (the pure-Python loader recurses once per level of nesting)
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    s._yaml_loader.cache_clear()
    try:
        text = "---\nname: a\ndescription: d\nx: " + "[" * 20000 + "]" * 20000 + "\n---\n"
        with pytest.raises(FrontmatterError):
            s.parse_frontmatter(text)
        with pytest.raises(SkillVerificationError):
            s.verify_frontmatter(make_skill(), text)
    finally:
        s._yaml_loader.cache_clear()


def test_read_message_size_is_base64_and_envelope() -> None:
    def size_of(n: int) -> int:
        return s.read_message_size(s.SkillFile(uri="skill://a/f", digest="", size=n))

    assert size_of(3) - size_of(0) == 4
    assert size_of(4) - size_of(0) == 8
    assert size_of(3 * 1024) - size_of(0) == 4 * 1024
    # The largest file a skill may hold (16 MiB) needs a bound above the 4 MiB default.
    assert 4 * 1024 * 1024 < size_of(s.MAX_SKILL_TOTAL_SIZE) < 23 * 1024 * 1024


def test_text_answer_is_text_no_larger_than_base64() -> None:
    assert s.text_answer("# Caf\u00e9\n".encode()) == "# Caf\u00e9\n"
    assert s.text_answer(b"\xff\xfe") is None  # not UTF-8
    # 3 bytes: base64 takes 4. '"aa' escapes to 4 bytes: text; '""a' to 5: a blob.
    assert s.text_answer(b'"aa') == '"aa'
    assert s.text_answer(b'""a') is None
    assert s.text_answer(b"\x1b") is None  # \u001b: 6 bytes
    assert s.text_answer(b"") == ""


# -------------------------------------------------------------------- YAML 1.1 and 1.2

AMBIGUOUS = (
    "---\nname: pdf-processing\ndescription: Extract PDFs\nversion: 0755\nenabled: on\n"
    "x: 1e3\ny: 1:30\nz: 0o17\nw: 0x1F\nh: 1_000\nk: 0b101\nl: yes\nn: ~\ne:\nb: True\n"
    "f: .5\nm: =\n---\n"
)


@pytest.mark.parametrize("c_loader", [True, False])
def test_frontmatter_read_as_yaml_1_2_follows_the_core_schema(
    c_loader: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    yaml: Any = importlib.import_module("yaml")
    if c_loader and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML built without libyaml")
    if not c_loader:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    s._yaml_loader.cache_clear()
    try:
        core = s.parse_frontmatter(AMBIGUOUS, version="1.2")
        assert {k: v for k, v in core.items() if k not in ("name", "description")} == {
            "version": 755,
            "enabled": "on",
            "x": 1000.0,
            "y": "1:30",
            "z": 15,
            "w": 31,
            "h": "1_000",
            "k": "0b101",
            "l": "yes",
            "n": None,
            "e": None,
            "b": True,
            "f": 0.5,
            "m": "=",
        }
        with pytest.raises(FrontmatterError):  # (YAML 1.1 has "=" as a value key)
            s.parse_frontmatter(AMBIGUOUS)
        legacy = s.parse_frontmatter(AMBIGUOUS.replace("m: =\n", ""))
        assert (legacy["version"], legacy["enabled"], legacy["x"], legacy["y"]) == (
            493,
            True,
            "1e3",
            90,
        )
        assert (legacy["z"], legacy["h"], legacy["k"], legacy["l"]) == ("0o17", 1000, 5, True)
    finally:
        s._yaml_loader.cache_clear()


@pytest.mark.parametrize(
    ("yaml_text", "value"),
    [
        ("x: !!int 0755", 755),
        ("x: !!int 0o17", 15),
        ("x: !!int -0x1f", None),
        ("x: !!float 1e3", 1000.0),
        ("x: !!float -.INF", None),  # (read, then refused as JSON cannot hold it)
        ("x: !!float 1_0", None),
        ("x: !!bool FALSE", False),
        ("x: !!bool yes", None),
        ("x: .NaN", None),
        ("<<: {a: 1}", None),  # (a merge key is refused by either reading)
        ("x: 1\nx: 1", None),  # (and so is a repeated key)
        ("'<<': 1", "<<"),
    ],
)
def test_yaml_1_2_explicit_tags_merge_keys_and_repeats(yaml_text: str, value: Any) -> None:
    text = f"---\nname: a\ndescription: d\n{yaml_text}\n---\n"
    if value is None:
        with pytest.raises(FrontmatterError):
            s.parse_frontmatter(text, version="1.2")
    elif value == "<<":
        assert s.parse_frontmatter(text, version="1.2")["<<"] == 1
    else:
        assert s.parse_frontmatter(text, version="1.2")["x"] == value


def test_verification_accepts_an_entry_rendered_by_either_yaml_version() -> None:
    text = AMBIGUOUS.replace("m: =\n", "")
    legacy = s.parse_frontmatter(text)
    core = s.parse_frontmatter(text, version="1.2")
    assert legacy != core
    skill = s.build_skill(URI, {"SKILL.md": text.encode()})
    assert skill.frontmatter == legacy  # (our server renders with YAML 1.1)
    assert s.verify_frontmatter(skill, text) == legacy
    rendered_by_1_2 = s.Skill(uri=URI, frontmatter=core, resources=skill.resources)
    assert s.verify_frontmatter(rendered_by_1_2, text) == core
    # One reading or the other, never a mix of both, nor what neither reads.
    for mixed in ({**core, "enabled": True}, {**legacy, "version": 755}, {**core, "x": "1e3"}):
        with pytest.raises(SkillVerificationError, match="differs from the entry's in"):
            s.verify_frontmatter(s.Skill(uri=URI, frontmatter=mixed, resources="dynamic"), text)
    # A file only YAML 1.2 reads ("=" is YAML 1.1's value key) is verified that way.
    only = s.Skill(uri=URI, frontmatter={**core, "m": "="}, resources="dynamic")
    assert s.verify_frontmatter(only, AMBIGUOUS)["m"] == "="
    with pytest.raises(SkillVerificationError, match="not valid YAML"):
        s.verify_frontmatter(s.Skill(uri=URI, frontmatter=core, resources="dynamic"), AMBIGUOUS)


@pytest.mark.parametrize("brk", ["\x85", "\u2028", "\u2029"])
def test_the_yaml_1_2_reading_refuses_what_yaml_1_1_reads_as_a_line_break(brk: str) -> None:
    """The 1.2 reading has PyYAML's (YAML 1.1) syntax, where U+0085, U+2028 and U+2029
    break lines; YAML 1.2 reads them as ordinary characters. It refuses them rather than
    give what neither version reads (``x: on<U+2028>y: 0755`` was ``x: "on", y: 755``:
    two keys, as in 1.1, typed as in 1.2)."""
    text = f"---\nname: a\ndescription: d\nx: on{brk}y: 0755\n---\n"
    with pytest.raises(FrontmatterError, match="U\\+0085, U\\+2028 or U\\+2029"):
        s.parse_frontmatter(text, version="1.2")
    hybrid = s.Skill(
        uri="skill://a/SKILL.md",
        frontmatter={"name": "a", "description": "d", "x": "on", "y": 755},
        resources="dynamic",
    )
    with pytest.raises(SkillVerificationError):
        s.verify_frontmatter(hybrid, text)
    if brk != "\x85":  # (PyYAML refuses U+0085 in a plain scalar)
        legacy = s.parse_frontmatter(text)
        assert (legacy["x"], legacy["y"]) == (True, 493)
        entry = s.Skill(uri="skill://a/SKILL.md", frontmatter=legacy, resources="dynamic")
        assert s.verify_frontmatter(entry, text) == legacy  # (the YAML 1.1 reading holds)
    quoted = f"---\nname: a\ndescription: d\nx: 'a{brk}b'\n---\n"
    with pytest.raises(FrontmatterError):  # (anywhere, quoted too)
        s.parse_frontmatter(quoted, version="1.2")

"""The skills extension (SEP-2640, ``io.modelcontextprotocol/skills``) as values and pure
functions: the ``Skill`` entry, skill URIs, digests, frontmatter, and the host's
verification rules.

Spec: ``specification/stable/skills.mdx`` of modelcontextprotocol/ext-skills; the skill
format itself (``SKILL.md``, its YAML frontmatter, naming) is the Agent Skills
specification (https://agentskills.io/specification).

Theory of operation
-------------------
A server publishes each skill as an *entry*: the URI of its ``SKILL.md``, the
frontmatter rendered verbatim as JSON, and a complete manifest of its files with their
``sha256:`` digests and sizes. A host builds its registry from entries alone, fetches
nothing ahead of need (Lazy Retrieval), and checks every file it reads against the
manifest: size first, then digest, and for ``SKILL.md`` the frontmatter field by field
(Integrity and Verification). Everything here is such a check or such a shape; the
bindings do the reading.

YAML: frontmatter is parsed with PyYAML's ``safe_load`` (the ``skills`` extra),
imported on first use. A subset parser of our own would refuse valid skills that use
YAML beyond the subset (folded scalars, flow collections, anchors...), and refusing a
valid skill is a failure of its own; PyYAML's safe loader is the standard one. Two
changes make its output JSON: timestamps stay strings (the server rendered them to JSON
as written), and anything JSON cannot hold (binary, sets, non-string keys, NaN) is
refused. The parsed value is walked with a node budget, so an alias bomb in a small
frontmatter cannot blow up the comparison. Three more refusals keep the entry and the
file one value: a key repeated in a mapping (PyYAML would keep the last, so a reader of
the file could see what the entry hides); a merge key (``<<``) anywhere: YAML 1.1
readers merge (and disagree on a repeat inside what is merged), YAML 1.2 readers keep
``<<`` as an ordinary key, so no one value is "the frontmatter" (a quoted ``'<<'`` is
an ordinary key for everyone, and allowed); and an integer beyond 64 bits (our JSON
cannot send it; a peer's decoder reads it as a float).

YAML 1.1 and 1.2: PyYAML reads YAML 1.1, where ``on``/``yes`` are ``true``, ``0755`` is
493 and ``1:30`` is 90; a YAML 1.2 parser (the core schema: the ``yaml`` and ``js-yaml``
packages of JavaScript, ruamel.yaml) reads them as ``"on"``, 755 and ``"1:30"``, and
``1e3`` as 1000.0 where YAML 1.1 has a string. The spec names no YAML version, so a
server may have rendered its entry either way from the same file. The host's
frontmatter check accepts a file that matches the entry under either reading: PyYAML's,
then, when that differs, a second one. The second is not a YAML 1.2 parser: it is
PyYAML's parser (YAML 1.1 *syntax*) with the 1.2 core schema's resolution of plain
scalars and its ``!!int``/``!!float``/``!!bool`` rules (a SafeLoader subclass). So it
must not read a source the two syntaxes read differently: U+0085, U+2028 and U+2029 are
line breaks in YAML 1.1 and ordinary characters in 1.2 (``x: on<U+2028>y: 0755`` is two
keys to one and one key to the other), and a source holding any of them is refused by
the second reading (the first still applies); syntax YAML 1.2 added that PyYAML does not
parse is refused, never read otherwise. Our server renders with YAML 1.1, as every
PyYAML-based one does; authors who want a string quote it, and then every reader agrees.
A host acts on the entry's ``frontmatter`` once :func:`verify_frontmatter` accepts the
file, not on a parse of its own: ``parse_frontmatter(text)`` is the YAML 1.1 reading,
which may not be the one that matched.

Paths: every segment of a skill URI -- its skill path, a manifest file's path below the
root, a resolved reference -- passes one rule (``_is_clean_segment``), so nothing names
a file outside its skill for any reader, however it decodes or resolves the URI.

File names: a server writes a file's path into its URI as it is (``build_skill``), so
the path a ``SKILL.md`` refers to, the manifest URI and the resource are one string,
with no encoding for either side to get wrong. A name that cannot be a URI path
segment as it is (RFC 3986: a space, ``{``, ``}``, ``%``, a non-ASCII letter...) is
refused with ``ValueError``: rename the file. (Percent-encoding it instead would make
every relative reference ambiguous: is ``a%20b.md`` a file of that name, or ``a b.md``?)
A client takes whatever URIs a server lists, and matches them exactly.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, final, overload

import attrs

from . import _versions
from ._errors import RemoteProtocolError
from ._json import dumps

__all__ = [
    "DIRECTORY_MIME_TYPE",
    "DIRECTORY_READ",
    "DYNAMIC",
    "MAX_FRONTMATTER_SIZE",
    "MAX_SKILL_RESOURCES",
    "MAX_SKILL_TOTAL_SIZE",
    "SKILLS_EXTENSION",
    "SKILLS_GET",
    "SKILLS_LIST",
    "SKILL_MD",
    "SKILL_MD_MIME_TYPE",
    "FrontmatterError",
    "InvalidSkillEntry",
    "Skill",
    "SkillFile",
    "SkillListing",
    "SkillVerificationError",
    "build_skill",
    "check_limits",
    "content_bytes",
    "directory_children",
    "frontmatter_differences",
    "is_digest",
    "is_skill_name",
    "parse_frontmatter",
    "parse_skill",
    "read_message_size",
    "resolve_skill_file",
    "sha256_digest",
    "skill_json",
    "skill_listing",
    "skill_root",
    "skill_uri",
    "split_frontmatter",
    "text_answer",
    "verify_content",
    "verify_frontmatter",
]

SKILLS_EXTENSION: Final = _versions.SKILLS_EXTENSION
"""The extension's identifier, a key of ``capabilities.extensions``. A connection sends
and serves ``skills/list`` and ``skills/get`` only when the server declares it (the
revision tables gate them: :class:`~mcp_sansio.LocalProtocolError` on the client,
-32601 at the server)."""
SKILLS_LIST: Final = "skills/list"
SKILLS_GET: Final = "skills/get"
DIRECTORY_READ: Final = "resources/directory/read"
"""Optional, gated by the ``directoryRead`` setting of the extension."""
SKILL_MD: Final = "SKILL.md"
SKILL_MD_MIME_TYPE: Final = "text/markdown"
"""The ``mimeType`` of a ``SKILL.md`` resource (Resource Metadata)."""
DIRECTORY_MIME_TYPE: Final = "inode/directory"
DYNAMIC: Final = "dynamic"
"""``resources`` of a skill whose content is generated: no digests to publish."""

MAX_SKILL_RESOURCES: Final = 512
"""Limits: files per skill, ``SKILL.md`` included (every host MUST accept this many)."""
MAX_SKILL_TOTAL_SIZE: Final = 16 * 1024 * 1024
"""Limits: the sum of ``size`` over a skill's files, in bytes."""
MAX_FRONTMATTER_SIZE: Final = 64 * 1024
"""Our bound on the YAML frontmatter of one ``SKILL.md``, in characters."""
_MAX_FRONTMATTER_NODES: Final = 10_000
_MAX_FRONTMATTER_DEPTH: Final = 64
# Room for the JSON-RPC envelope of a resources/read answer beside its content and URIs:
# jsonrpc, id, contents, mimeType, _meta and a modern era's resultType and cache fields.
_READ_ENVELOPE: Final = 4096
# The integers our JSON (orjson) writes and reads exactly: a signed or unsigned 64-bit one.
# Beyond, orjson refuses to encode and decodes as a float: not the value the author wrote.
_MIN_INT: Final = -(2**63)
_MAX_INT: Final = 2**64 - 1

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# Agent Skills, "name field": 1-64 characters, lowercase letters, digits and hyphens, no
# leading, trailing or doubled hyphen.
_NAME = re.compile(r"(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# RFC 3986: reg-name = *( unreserved / pct-encoded / sub-delims ); segment adds ":" and "@".
_REG_NAME = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+")
_SEGMENT = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+")
# A file name a server uses in a URI as it is: a segment's characters, without "%" (a
# literal "%41" would read as "A"), so the file path and the URI path are one string.
_FILE_SEGMENT = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@]+")
# A path segment of a skill URI must stay where it is, for every reader: not empty, "."
# or ".." (dot-segments, RFC 3986 5.2.4), no percent-encoded dot, slash or backslash
# (which some resolvers decode into one), no backslash (a separator on Windows), no "?"
# or "#" (which would end the path).
_BAD_SEGMENT = re.compile(r"[\\?#]|%(?:2[eEfF]|5[cC])")
_FRONTMATTER_OPEN = re.compile(r"---[ \t]*\r?\n")
_FRONTMATTER_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.MULTILINE)


class SkillVerificationError(Exception):
    """Skill content is not what its entry describes: a size or digest mismatch, a
    frontmatter discrepancy, a read of a file the entry does not list, or an entry the
    host refuses to load (over the limits, ``"dynamic"`` when not allowed). The content
    MUST NOT be used; to recover from a stale entry, fetch it again with ``skills/get``
    (spec: Integrity and Verification)."""

    def __init__(self, uri: str, reason: str) -> None:
        super().__init__(f"{uri}: {reason}")
        self.uri = uri
        """The file (or skill) that failed."""
        self.reason = reason
        """Why, for the user."""


class FrontmatterError(ValueError):
    """A ``SKILL.md`` has no usable YAML frontmatter."""


@final
@attrs.frozen(kw_only=True)
class SkillFile:
    """One file of a skill (``SkillResource``)."""

    uri: str
    """The file's resource URI."""
    digest: str
    """``sha256:`` and 64 lowercase hex digits: the SHA-256 of the raw bytes."""
    size: int
    """Length of the raw bytes."""


@final
@attrs.frozen(kw_only=True)
class Skill:
    """A skill entry, as ``skills/list`` and ``skills/get`` return it."""

    uri: str
    """The URI of the skill's ``SKILL.md``."""
    frontmatter: Mapping[str, Any] = attrs.field(hash=False)
    """The frontmatter, verbatim as JSON (``name`` and ``description`` always). (Not
    hashed: a skill is hashed by its URI and manifest.)"""
    resources: tuple[SkillFile, ...] | Literal["dynamic"]
    """Every file of the skill, ``SKILL.md`` first, or ``"dynamic"``."""

    @property
    def name(self) -> str:
        """The skill's name (a label, not an identifier: see the spec's Names)."""
        return str(self.frontmatter["name"])

    @property
    def description(self) -> str:
        """What the skill does and when to use it, from its frontmatter."""
        return str(self.frontmatter["description"])

    @property
    def root(self) -> str:
        """The skill's root directory URI (``uri`` without ``/SKILL.md``)."""
        return self.uri[: -len(SKILL_MD) - 1]

    @property
    def dynamic(self) -> bool:
        """Whether the server publishes no digests for it (no content integrity)."""
        return self.resources == DYNAMIC

    def file(self, uri: str) -> SkillFile:
        """The manifest entry of ``uri``.

        Raises:
            SkillVerificationError: the manifest does not list it (spec: "a host MUST
                treat a read of an unlisted file within the skill as a verification
                failure"), or the skill is dynamic.
        """
        if isinstance(self.resources, tuple):
            for entry in self.resources:
                if entry.uri == uri:
                    return entry
        raise SkillVerificationError(uri, f"not listed in the manifest of {self.uri}")


@final
@attrs.frozen(kw_only=True)
class InvalidSkillEntry:
    """An entry of a ``skills/list`` result that is not a valid ``Skill`` entry: it
    MUST NOT be loaded (spec: Resources), and is reported rather than dropped."""

    uri: str | None
    """The entry's ``uri``, when it is a string (to name it to the user)."""
    reason: str
    """Why it is refused."""


@final
@attrs.frozen(kw_only=True)
class SkillListing(Sequence[Skill]):
    """The entries of a ``skills/list`` listing: a sequence of the valid ones, in the
    server's order, and :attr:`invalid`, the ones refused. One malformed entry costs
    that entry only: the others are still the server's skills, each checked on its
    own.

    A value: it equals a listing with the same entries and refusals, never a list or
    a tuple (``listing == []`` is false, as ``() == []`` is); compare
    ``list(listing)``, or ``listing.skills``."""

    skills: tuple[Skill, ...]
    """The valid entries, in order."""
    invalid: tuple[InvalidSkillEntry, ...] = ()
    """The entries refused (malformed, or of a URI listed more than once), in order."""

    def __len__(self) -> int:
        return len(self.skills)

    @overload
    def __getitem__(self, index: int) -> Skill: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Skill, ...]: ...
    def __getitem__(self, index: int | slice) -> Skill | tuple[Skill, ...]:
        return self.skills[index]


# ---------------------------------------------------------------------------------- URIs


def _is_clean_segment(segment: str) -> bool:
    """Whether ``segment`` may be a path segment of a skill URI (see ``_BAD_SEGMENT``):
    the one rule for skill paths, file paths, manifest URIs and resolved references."""
    return segment not in ("", ".", "..") and _BAD_SEGMENT.search(segment) is None


def is_skill_name(value: object) -> bool:
    """Whether ``value`` is a valid Agent Skills ``name``."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def skill_uri(name: str, prefix: str = "", scheme: str = "skill") -> str:
    """``<scheme>://<prefix>/<name>/SKILL.md`` (no prefix: ``<scheme>://<name>/SKILL.md``).

    Raises:
        ValueError: an invalid scheme or name, or a prefix segment that is empty or not a
            valid URI path segment (the first, which is the URI's authority, not a valid
            ``reg-name``; RFC 3986, as Resource Mapping asks).
    """
    if _SCHEME.fullmatch(scheme + "://") is None:
        raise ValueError(f"not a URI scheme: {scheme!r}")
    if not is_skill_name(name):
        raise ValueError(f"not a valid skill name: {name!r}")
    segments = [*prefix.split("/"), name] if prefix else [name]
    for index, segment in enumerate(segments[:-1]):
        pattern = _REG_NAME if index == 0 else _SEGMENT
        if not _is_clean_segment(segment) or pattern.fullmatch(segment) is None:
            raise ValueError(f"not a valid skill-path segment: {segment!r} in {prefix!r}")
    return f"{scheme}://{'/'.join(segments)}/{SKILL_MD}"


def skill_root(uri: str) -> str:
    """The root directory URI of the skill whose ``SKILL.md`` is at ``uri``.

    ``<scheme>://<skill-path>/SKILL.md``: one or more ``/``-separated segments, none
    empty, a dot-segment, or holding a backslash, ``?``, ``#`` or a percent-encoded
    dot, slash or backslash; the last a valid skill name (spec: Resource Mapping).

    Raises:
        ValueError: ``uri`` is not the URI of a ``SKILL.md`` of that form.
    """
    match = _SCHEME.match(uri)
    suffix = "/" + SKILL_MD
    if match is None or not uri.endswith(suffix):
        raise ValueError(f"not the URI of a skill's {SKILL_MD}: {uri!r}")
    segments = uri[match.end() : -len(suffix)].split("/")
    if not all(_is_clean_segment(segment) for segment in segments):
        raise ValueError(f"not the URI of a skill's {SKILL_MD} (bad skill path): {uri!r}")
    if not is_skill_name(segments[-1]):
        raise ValueError(f"the final skill-path segment of {uri!r} is not a valid skill name")
    return uri[: -len(suffix)]


def resolve_skill_file(skill: Skill, reference: str) -> str:
    """The URI of a file of ``skill``: a URI as is, or a relative reference (POSIX path)
    resolved against the skill's root (spec: Relative References). Either way, a URI
    within the skill's root must reach a file within it: each segment after the root
    is checked with the rule of :func:`skill_root` (no ``..``, ``%2e%2e``, ``\\``,
    ``?``, ``#``...), after ``.`` and ``..`` of a relative reference are resolved.

    Raises:
        ValueError: an absolute path, an empty one, or one that leaves the skill.
    """
    if _SCHEME.match(reference):
        if reference.startswith(skill.root + "/"):
            _check_file_path(reference[len(skill.root) + 1 :], reference)
        return reference
    parts: list[str] = []
    for segment in reference.split("/"):
        if segment in ("", "."):
            if not segment and not parts and reference.startswith("/"):
                raise ValueError(f"not a relative reference: {reference!r}")
            continue
        if segment == "..":
            if not parts:
                raise ValueError(f"{reference!r} leaves the skill's directory")
            parts.pop()
        else:
            parts.append(segment)
    if not parts:
        raise ValueError(f"{reference!r} names no file")
    path = "/".join(parts)
    _check_file_path(path, reference)
    return skill.root + "/" + path


def _check_file_path(path: str, what: str) -> None:
    """``path`` (a file's path below a skill's root) names a file within the skill.

    Raises:
        ValueError: a segment of it does not (see :func:`_is_clean_segment`).
    """
    for segment in path.split("/"):
        if not _is_clean_segment(segment):
            raise ValueError(f"{what!r} leaves the skill's directory or is not a clean path")


# ------------------------------------------------------------------------------- entries


def sha256_digest(data: bytes) -> str:
    """``sha256:{hex}`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: object) -> bool:
    """Whether ``value`` is ``sha256:`` and 64 lowercase hexadecimal characters."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def parse_skill(entry: object) -> Skill:
    """A ``Skill`` entry received from a server, checked.

    Raises:
        RemoteProtocolError: the entry is malformed: no string ``uri`` naming a
            ``SKILL.md``, no ``frontmatter`` object with string ``name`` (equal to the
            final skill-path segment) and ``description``, ``resources`` neither an
            array nor ``"dynamic"``, or a file without a URI within the skill, a
            ``sha256:`` digest and a size, listed twice, or no entry for ``SKILL.md``
            (spec: Skill Entries); or a frontmatter holding what the rules of
            :func:`parse_frontmatter` refuse (an integer beyond 64 bits, too many
            nodes or too deep). Such an entry MUST NOT be loaded.
    """
    if not isinstance(entry, Mapping):
        raise RemoteProtocolError("invalid skill entry: not an object")
    uri = entry.get("uri")
    if not isinstance(uri, str):
        raise RemoteProtocolError("invalid skill entry: no string 'uri'")
    try:
        root = skill_root(uri)
    except ValueError as exc:
        raise RemoteProtocolError(f"invalid skill entry: {exc}") from None
    frontmatter = entry.get("frontmatter")
    if not isinstance(frontmatter, Mapping):
        raise RemoteProtocolError(f"invalid skill entry {uri}: no 'frontmatter' object")
    name = frontmatter.get("name")
    if not isinstance(name, str) or not isinstance(frontmatter.get("description"), str):
        raise RemoteProtocolError(
            f"invalid skill entry {uri}: frontmatter needs string 'name' and 'description'"
        )
    if root.rsplit("/", 1)[-1] != name:
        raise RemoteProtocolError(
            f"invalid skill entry {uri}: the final skill-path segment is not {name!r}"
        )
    try:
        fields: dict[str, Any] = _json_value(frontmatter, [_MAX_FRONTMATTER_NODES], 0)
    except FrontmatterError as exc:
        raise RemoteProtocolError(f"invalid skill entry {uri}: {exc}") from None
    resources = entry.get("resources")
    if resources == DYNAMIC:
        return Skill(uri=uri, frontmatter=fields, resources=DYNAMIC)
    if not isinstance(resources, list):
        raise RemoteProtocolError(
            f"invalid skill entry {uri}: 'resources' must be an array or {DYNAMIC!r}"
        )
    files = tuple(_parse_file(uri, root, item) for item in resources)
    uris = {file.uri for file in files}
    if len(uris) != len(files):
        raise RemoteProtocolError(f"invalid skill entry {uri}: a file is listed twice")
    if uri not in uris:
        raise RemoteProtocolError(f"invalid skill entry {uri}: 'resources' omits {SKILL_MD}")
    return Skill(uri=uri, frontmatter=fields, resources=files)


def skill_listing(entries: Iterable[object]) -> SkillListing:
    """The entries of a ``skills/list`` listing (all its pages), each checked with
    :func:`parse_skill` on its own: a malformed one is reported in ``invalid`` with the
    reason. A skill is identified by its URI, so two entries for one leave no single
    one to hold: every entry of a URI listed more than once is refused and reported
    (valid or not, whichever comes first)."""
    listed = list(entries)
    uris = [entry.get("uri") if isinstance(entry, Mapping) else None for entry in listed]
    counts = Counter(uri for uri in uris if isinstance(uri, str))
    skills: list[Skill] = []
    invalid: list[InvalidSkillEntry] = []
    for entry, uri in zip(listed, uris, strict=True):
        named = uri if isinstance(uri, str) else None
        reason = None
        try:
            skill = parse_skill(entry)
        except RemoteProtocolError as exc:
            reason = str(exc)
        if named is not None and counts[named] > 1:
            repeated = f"listed {counts[named]} times"
            reason = (
                f"invalid skill entry {named}: {repeated}"
                if reason is None
                else f"{reason} (and {repeated})"
            )
        if reason is not None:
            invalid.append(InvalidSkillEntry(uri=named, reason=reason))
        else:
            skills.append(skill)
    return SkillListing(skills=tuple(skills), invalid=tuple(invalid))


def _parse_file(skill_uri: str, root: str, item: object) -> SkillFile:
    if not isinstance(item, Mapping):
        raise RemoteProtocolError(f"invalid skill entry {skill_uri}: a resource is not an object")
    uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
    if not isinstance(uri, str) or not uri.startswith(root + "/"):
        raise RemoteProtocolError(
            f"invalid skill entry {skill_uri}: resource {uri!r} is not within the skill"
        )
    try:
        _check_file_path(uri[len(root) + 1 :], uri)
    except ValueError:
        raise RemoteProtocolError(
            f"invalid skill entry {skill_uri}: resource {uri!r} is not within the skill"
        ) from None
    if not is_digest(digest):
        raise RemoteProtocolError(
            f"invalid skill entry {skill_uri}: {uri} has no sha256:<64 lowercase hex> digest"
        )
    if type(size) is not int or size < 0:
        raise RemoteProtocolError(f"invalid skill entry {skill_uri}: {uri} has no valid size")
    assert isinstance(digest, str)
    return SkillFile(uri=uri, digest=digest, size=size)


def skill_json(skill: Skill) -> dict[str, Any]:
    """The wire form of ``skill``."""
    resources: Any = (
        DYNAMIC
        if skill.resources == DYNAMIC
        else [{"uri": f.uri, "digest": f.digest, "size": f.size} for f in skill.resources]
    )
    return {"uri": skill.uri, "frontmatter": dict(skill.frontmatter), "resources": resources}


def build_skill(uri: str, files: Mapping[str, bytes]) -> Skill:
    """The entry of the skill whose ``SKILL.md`` is at ``uri``, for a server.

    Args:
        uri: the URI of its ``SKILL.md``.
        files: every file, by path relative to the skill's root (``/``-separated),
            ``SKILL.md`` included.

    Each file's URI is ``<root>/<path>``, the path as it is (see "File names" in the
    module docs).

    Raises:
        ValueError: a path that is not a clean relative path, or that cannot be a URI
            path as it is (a segment holding anything but letters, digits and
            ``-._~!$&'()*+,;=:@``: a space, ``{``, ``%``, a non-ASCII letter...); no
            ``SKILL.md``; a frontmatter without ``name``/``description`` or whose
            ``name`` is not the final skill-path segment; or more files or bytes than
            the spec's limits (servers SHOULD NOT serve such a skill: no host need
            accept it).
        ImportError: PyYAML is not installed.
    """
    root = skill_root(uri)
    if SKILL_MD not in files:
        raise ValueError(f"{root}: a skill needs a {SKILL_MD}")
    for path in files:
        try:
            _check_file_path(path, path)
        except ValueError:
            raise ValueError(f"{root}: not a clean relative file path: {path!r}") from None
        if not all(_FILE_SEGMENT.fullmatch(segment) for segment in path.split("/")):
            raise ValueError(
                f"{root}: the file path {path!r} cannot be a URI path as it is: a file"
                " name may hold only ASCII letters, digits and -._~!$&'()*+,;=:@"
                " (RFC 3986 path characters); rename the file"
            )
    frontmatter = parse_frontmatter(files[SKILL_MD].decode("utf-8"))
    if root.rsplit("/", 1)[-1] != frontmatter["name"]:
        raise ValueError(
            f"{uri}: the frontmatter name {frontmatter['name']!r} is not its directory"
        )
    if not is_skill_name(frontmatter["name"]):
        raise ValueError(f"{uri}: {frontmatter['name']!r} is not a valid skill name")
    ordered = [SKILL_MD, *sorted(p for p in files if p != SKILL_MD)]
    resources = tuple(
        SkillFile(uri=f"{root}/{path}", digest=sha256_digest(files[path]), size=len(files[path]))
        for path in ordered
    )
    skill = Skill(uri=uri, frontmatter=frontmatter, resources=resources)
    check_limits(skill, error=ValueError)
    return skill


def check_limits(skill: Skill, *, error: type[Exception] | None = None) -> None:
    """Check ``skill`` against the spec's Limits (512 files, 16 MiB in all); a dynamic
    skill has nothing to count.

    Raises:
        SkillVerificationError: over a limit (or ``error(message)`` if given).
    """
    if not isinstance(skill.resources, tuple):
        return
    reason = None
    total = sum(f.size for f in skill.resources)
    if len(skill.resources) > MAX_SKILL_RESOURCES:
        reason = f"{len(skill.resources)} files, more than the {MAX_SKILL_RESOURCES} allowed"
    elif total > MAX_SKILL_TOTAL_SIZE:
        reason = f"{total} bytes in all, more than the {MAX_SKILL_TOTAL_SIZE} allowed"
    if reason is not None:
        if error is not None:
            raise error(f"{skill.uri}: {reason}")
        raise SkillVerificationError(skill.uri, reason)


def directory_children(uris: Iterable[str], directory: str) -> list[tuple[str, bool]]:
    """The direct children of ``directory`` among the files ``uris``: ``(uri,
    is_directory)`` pairs, sorted, each once (for ``resources/directory/read``)."""
    prefix = directory + "/"
    children: dict[str, bool] = {}
    for uri in uris:
        if uri.startswith(prefix):
            head, sep, _ = uri[len(prefix) :].partition("/")
            children[prefix + head] = children.get(prefix + head, False) or bool(sep)
    return sorted(children.items())


# --------------------------------------------------------------------------- verification


def verify_content(entry: SkillFile, data: bytes) -> None:
    """Check the raw bytes read for ``entry``: the size first (a length that differs
    fails "whether or not the host goes on to compute the digest"), then the digest.

    Raises:
        SkillVerificationError: either differs; the content MUST NOT be used.
    """
    if len(data) != entry.size:
        raise SkillVerificationError(
            entry.uri, f"size mismatch: read {len(data)} bytes, the entry says {entry.size}"
        )
    actual = sha256_digest(data)
    if actual != entry.digest:
        raise SkillVerificationError(
            entry.uri, f"digest mismatch: read {actual}, the entry says {entry.digest}"
        )


def content_bytes(contents: object, uri: str, *, limit: int = MAX_SKILL_TOTAL_SIZE) -> bytes:
    """The raw bytes of ``uri`` in a ``resources/read`` result's ``contents``: a text
    item's UTF-8 encoding, a blob item's decoded base64.

    Raises:
        SkillVerificationError: no item for ``uri``, a malformed one, or more than
            ``limit`` bytes.
    """
    if isinstance(contents, list):
        for item in contents:
            if isinstance(item, Mapping) and item.get("uri") == uri:
                text, blob = item.get("text"), item.get("blob")
                if isinstance(text, str):
                    if len(text) > limit:
                        break
                    try:
                        data = text.encode("utf-8")
                    except UnicodeEncodeError:
                        raise SkillVerificationError(uri, "the text is not Unicode") from None
                elif isinstance(blob, str) and len(blob) <= (limit + 2) // 3 * 4:
                    try:
                        data = base64.b64decode(blob, validate=True)
                    except ValueError:  # (binascii.Error, or non-ASCII characters)
                        raise SkillVerificationError(uri, "the blob is not base64") from None
                else:
                    break
                if len(data) > limit:
                    break
                return data
    raise SkillVerificationError(uri, "resources/read returned no usable content for it")


def read_message_size(entry: SkillFile) -> int:
    """The size of the ``resources/read`` answer that carries ``entry``'s file as a blob,
    in bytes, at most: its bytes base64-encoded (4 for every 3) and the JSON-RPC envelope
    around them. A server may send any file so, so a client whose messages are bounded
    below this (``ConnectionConfig.max_message_size``) should not ask for it.

    A file sent as text is not always smaller: JSON escapes ``"`` and ``\\`` in 2 bytes
    and a control character in up to 6 (``\\u001b``), so text full of them can be up to
    6 times the file's size. No bound short of that holds for any server; ours (see
    :func:`text_answer`) sends as text only what is no larger than its base64, so its
    every answer is within this size.
    """
    return 4 * ((entry.size + 2) // 3) + 2 * len(entry.uri.encode("utf-8")) + _READ_ENVELOPE


def text_answer(data: bytes) -> str | None:
    """The text a server answers a ``resources/read`` of a file holding ``data`` with, or
    ``None`` to answer with a blob: ``data`` decoded, when it is UTF-8 and, JSON-escaped,
    no longer than its base64 form. So every answer is within :func:`read_message_size`,
    which a client checks before it asks (see there); text is what nearly every text
    file gets.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    escaped = len(dumps(text)) - 2  # (less the quotes around it)
    return text if escaped <= 4 * ((len(data) + 2) // 3) else None


def split_frontmatter(text: str) -> str:
    """The YAML source of the frontmatter that begins ``text`` (a ``SKILL.md``): the
    lines between an opening ``---`` line and the next ``---`` line. A leading
    byte-order mark is skipped.

    Raises:
        FrontmatterError: no such block, or one over :data:`MAX_FRONTMATTER_SIZE`.
    """
    start = 1 if text.startswith("\ufeff") else 0
    opening = _FRONTMATTER_OPEN.match(text, start)
    if opening is None:
        raise FrontmatterError(f"{SKILL_MD} does not begin with a --- frontmatter line")
    window = text[opening.end() : opening.end() + MAX_FRONTMATTER_SIZE + 8]
    closing = _FRONTMATTER_CLOSE.search(window)
    if closing is None:
        if len(window) > MAX_FRONTMATTER_SIZE:
            raise FrontmatterError(f"frontmatter longer than {MAX_FRONTMATTER_SIZE} characters")
        raise FrontmatterError("the frontmatter has no closing --- line")
    if closing.start() > MAX_FRONTMATTER_SIZE:
        raise FrontmatterError(f"frontmatter longer than {MAX_FRONTMATTER_SIZE} characters")
    return window[: closing.start()]


# The YAML 1.2 core schema's tag resolution of plain scalars (YAML 1.2.2, 10.3.2): each
# (tag, pattern, possible first characters). Anything else is a string.
_CORE_FLOAT: Final = r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
_CORE_INF_NAN: Final = r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
_CORE_SCHEMA: Final = (
    ("null", r"~|null|Null|NULL|", "~nN"),
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", "-+0123456789"),
    ("float", _CORE_FLOAT, "-+.0123456789"),
    ("float", _CORE_INF_NAN, "-+."),
)
_YAML_TAG: Final = "tag:yaml.org,2002:"
# Line breaks in YAML 1.1 only (1.2 reads them as content: YAML 1.2.2, 5.4).
_YAML_11_BREAKS: Final = re.compile("[\x85\u2028\u2029]")


def _core_schema(yaml: Any, loader: Any) -> None:
    """Make ``loader`` (a SafeLoader subclass) read plain scalars as the YAML 1.2 core
    schema does, and construct ``!!int``, ``!!float`` and ``!!bool`` by its rules (a
    leading ``0`` is decimal; ``0o`` octal; no ``_``, sexagesimal or ``yes``/``on``).
    The merge key's resolver stays, so that ``<<`` is refused by either loader."""
    resolvers: dict[Any, list[Any]] = {
        first: [(tag, rx) for tag, rx in found if tag == _YAML_TAG + "merge"]
        for first, found in loader.yaml_implicit_resolvers.items()
    }
    for tag, pattern, first in _CORE_SCHEMA:
        compiled = re.compile(f"^(?:{pattern})$")
        for char in [*first, ""] if tag == "null" else first:
            resolvers.setdefault(char, []).append((_YAML_TAG + tag, compiled))
    loader.yaml_implicit_resolvers = {k: v for k, v in resolvers.items() if v}

    def refuse(node: Any, what: str) -> Any:
        return yaml.constructor.ConstructorError(
            None, None, f"{node.value!r} is not {what} in the YAML 1.2 core schema", node.start_mark
        )

    def construct_int(self: Any, node: Any) -> int:
        value = self.construct_scalar(node)
        if re.fullmatch(r"[-+]?[0-9]+", value):
            return int(value, 10)
        if re.fullmatch(r"0o[0-7]+|0x[0-9a-fA-F]+", value):
            return int(value[2:], 8 if value[1] == "o" else 16)
        raise refuse(node, "an integer")

    def construct_float(self: Any, node: Any) -> float:
        value = self.construct_scalar(node)
        if re.fullmatch(_CORE_FLOAT, value):
            return float(value)
        if re.fullmatch(_CORE_INF_NAN, value):
            return float(value.replace(".", "").lower())  # ("inf", "-inf", "nan")
        raise refuse(node, "a float")

    def construct_bool(self: Any, node: Any) -> bool:
        value = self.construct_scalar(node)
        if value in ("true", "True", "TRUE"):
            return True
        if value in ("false", "False", "FALSE"):
            return False
        raise refuse(node, "a boolean")

    loader.add_constructor(_YAML_TAG + "int", construct_int)
    loader.add_constructor(_YAML_TAG + "float", construct_float)
    loader.add_constructor(_YAML_TAG + "bool", construct_bool)


@functools.cache
def _yaml_loader(version: Literal["1.1", "1.2"] = "1.1") -> tuple[Any, Any]:
    """PyYAML and its safe loader (the C one when built with libyaml) without the
    timestamp resolver, so dates stay strings, refusing a key repeated in one mapping
    (PyYAML would keep the last: the entry and a reader could then see different
    values) and any merge key (see the module docs): imported on first use (an
    optional dependency)."""
    try:
        yaml = importlib.import_module("yaml")
    except ImportError as exc:
        raise ImportError(
            "skill frontmatter is YAML, which needs PyYAML: pip install 'mcp-trio[skills]'"
        ) from exc
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def construct_mapping(self: Any, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        "found a merge key (<<), which skill frontmatter may not use: YAML"
                        " 1.2 readers take it as an ordinary key; write the keys out",
                        key_node.start_mark,
                    )
                key = self.construct_object(key_node, deep=deep)
                try:
                    repeated = key in seen
                except TypeError:
                    continue  # (unhashable: the base constructor refuses it)
                if repeated:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found a repeated key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return base.construct_mapping(self, node, deep)

    loader: Any = type("SkillFrontmatterLoader", (base,), {"construct_mapping": construct_mapping})
    loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    if version == "1.2":
        _core_schema(yaml, loader)
    return yaml, loader


def parse_frontmatter(text: str, *, version: Literal["1.1", "1.2"] = "1.1") -> dict[str, Any]:
    """The frontmatter of a ``SKILL.md`` as JSON values (``yaml.safe_load``, never the
    unsafe loader), plain scalars read as YAML ``version`` does: 1.1 (PyYAML's) or the
    1.2 core schema, with PyYAML's (YAML 1.1) syntax (see "YAML 1.1 and 1.2" in the
    module docs).

    Raises:
        FrontmatterError: no frontmatter block, invalid YAML, a key repeated in a
            mapping, a merge key (``<<``), not a mapping, a value JSON cannot hold (an
            integer beyond 64 bits included), too big or deep, or no string ``name``
            and ``description``; for ``"1.2"`` also U+0085, U+2028 or U+2029 anywhere
            (line breaks to YAML 1.1, not to 1.2).
        ImportError: PyYAML is not installed (``pip install 'mcp-trio[skills]'``).
    """
    source = split_frontmatter(text)
    if version == "1.2" and _YAML_11_BREAKS.search(source) is not None:
        # PyYAML scans YAML 1.1 syntax, where these are line breaks; YAML 1.2 reads them
        # as ordinary characters (YAML 1.2.2, 5.4): no 1.2 reading to give.
        raise FrontmatterError(
            "the frontmatter holds U+0085, U+2028 or U+2029, line breaks in YAML 1.1 but"
            " not in YAML 1.2: it has no YAML 1.2 reading here"
        )
    yaml, loader = _yaml_loader(version)
    try:
        value = yaml.load(source, Loader=loader)  # (a SafeLoader subclass, never the unsafe one)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"the frontmatter is not valid YAML: {exc}") from None
    except ValueError as exc:  # (an integer past Python's int-string limit, say)
        raise FrontmatterError(f"the frontmatter cannot be read: {exc}") from None
    except RecursionError:  # (the pure-Python loader recurses per level of nesting)
        raise FrontmatterError("the frontmatter is too deeply nested") from None
    if not isinstance(value, dict):
        raise FrontmatterError("the frontmatter is not a YAML mapping")
    budget = [_MAX_FRONTMATTER_NODES]
    result = _json_value(value, budget, 0)
    assert isinstance(result, dict)
    for field in ("name", "description"):
        if not isinstance(result.get(field), str) or not result[field]:
            raise FrontmatterError(f"the frontmatter has no {field!r} string")
    return result


def _json_value(value: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_FRONTMATTER_DEPTH:
        raise FrontmatterError("the frontmatter is too large or too deeply nested")
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if not _MIN_INT <= value <= _MAX_INT:
            raise FrontmatterError(
                f"the frontmatter holds an integer beyond 64 bits ({value.bit_length()} bits),"
                " which JSON peers cannot be relied on to read"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FrontmatterError(f"the frontmatter holds {value}, which JSON cannot")
        return value
    if isinstance(value, list):
        return [_json_value(v, budget, depth + 1) for v in value]
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise FrontmatterError("the frontmatter has a key that is not a string")
        return {k: _json_value(v, budget, depth + 1) for k, v in value.items()}
    raise FrontmatterError(f"the frontmatter holds a {type(value).__name__}, which JSON cannot")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``, objects ignore order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def frontmatter_differences(parsed: Mapping[str, Any], entry: Mapping[str, Any]) -> list[str]:
    """The fields whose values differ between a file's frontmatter and an entry's
    (present in one only, or different JSON values), sorted."""
    return sorted(
        key
        for key in {*parsed, *entry}
        if key not in parsed or key not in entry or not _same(parsed[key], entry[key])
    )


def verify_frontmatter(skill: Skill, text: str) -> dict[str, Any]:
    """Parse the frontmatter of ``skill``'s ``SKILL.md`` (``text``) and compare it field by
    field with the entry's (spec: Frontmatter Verification). It matches when it does
    read as YAML 1.1 or with the YAML 1.2 core schema's rules: see the module docs.

    Returns:
        The parsed frontmatter, equal to the entry's: act on ``skill.frontmatter``, not
        on a parse of ``text`` of your own (``parse_frontmatter(text)`` is the YAML 1.1
        reading, which may not be the one that matched).

    Raises:
        SkillVerificationError: it cannot be parsed or a field differs; the skill MUST
            NOT be loaded.
        ImportError: PyYAML is not installed.
    """
    reason = ""
    # YAML 1.1 (PyYAML's reading) first, then 1.2 (the core schema), as the server may
    # have read it: the file matches the entry under either.
    for version in ("1.1", "1.2"):
        try:
            parsed = parse_frontmatter(text, version=version)
        except FrontmatterError as exc:
            reason = reason or str(exc)
            continue
        differ = frontmatter_differences(parsed, skill.frontmatter)
        if not differ:
            return parsed
        reason = reason or "frontmatter differs from the entry's in " + ", ".join(differ)
    raise SkillVerificationError(skill.uri, reason)

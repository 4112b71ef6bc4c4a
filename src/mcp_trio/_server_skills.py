"""Serving skills (the skills extension, ``io.modelcontextprotocol/skills``): the skills a
:class:`~mcp_trio.Server` serves, and its ``skills/list``, ``skills/get`` and
``resources/directory/read`` handlers.

Each file of a skill is also an ordinary resource of the server (``resources/read``,
``resources/list``), registered by :meth:`Server.add_skill <mcp_trio.Server.add_skill>`.
Files are read once, when the skill is added: what is served is always what the
manifest's digests describe.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from mcp_sansio import ErrorCode
from mcp_sansio.skills import (
    DIRECTORY_MIME_TYPE,
    DIRECTORY_READ,
    MAX_SKILL_RESOURCES,
    MAX_SKILL_TOTAL_SIZE,
    SKILL_MD,
    SKILL_MD_MIME_TYPE,
    SKILLS_EXTENSION,
    SKILLS_GET,
    SKILLS_LIST,
    Skill,
    build_skill,
    directory_children,
    parse_frontmatter,
    skill_json,
    skill_uri,
    text_answer,
)

from ._errors import McpError
from ._handlers import Handlers, RequestContext
from ._pagination import list_result
from ._registry import ResourceEntry

if TYPE_CHECKING:
    from ._server import Server

__all__ = [
    "ServedFile",
    "SkillStore",
    "add_skill",
    "add_skills_dir",
    "mime_type_of",
    "read_skill_dir",
    "remove_skill",
]

# The MIME types of the files skills usually hold; anything else is text/plain when it
# is UTF-8 and application/octet-stream when not. (Not the `mimetypes` module: it reads
# the machine's /etc/mime.types, so the answer would depend on the machine.)
_MIME_TYPES: Final = {
    ".md": SKILL_MD_MIME_TYPE,
    ".markdown": SKILL_MD_MIME_TYPE,
    ".txt": "text/plain",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
    ".js": "text/javascript",
    ".ts": "text/x-typescript",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".html": "text/html",
    ".css": "text/css",
    ".csv": "text/csv",
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
    ".zip": "application/zip",
}


def mime_type_of(path: str, data: bytes) -> str:
    """The ``mimeType`` of a skill file (``SKILL.md``: ``text/markdown``, as the spec's
    Resource Metadata asks; other Markdown files too)."""
    if path == SKILL_MD or path.endswith("/" + SKILL_MD):
        return SKILL_MD_MIME_TYPE
    known = _MIME_TYPES.get(os.path.splitext(path)[1].lower())
    if known is not None:
        return known
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


def read_skill_dir(path: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every file of the skill directory ``path``, by ``/``-separated relative path.

    Regular files only: symbolic links and names starting with ``.`` are skipped (not
    served, not listed). Reading stops with ``ValueError`` past the spec's limits
    (:data:`~mcp_sansio.skills.MAX_SKILL_RESOURCES` files,
    :data:`~mcp_sansio.skills.MAX_SKILL_TOTAL_SIZE` bytes), so a huge directory is not
    read whole.

    Raises:
        ValueError: not a directory, or over a limit.
        OSError: a file cannot be read.
    """
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"not a skill directory: {root}")
    files: dict[str, bytes] = {}
    total = 0
    for top, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            full = Path(top, name)
            if name.startswith(".") or not stat.S_ISREG(full.lstat().st_mode):
                continue
            if len(files) >= MAX_SKILL_RESOURCES:
                raise ValueError(f"{root}: more than {MAX_SKILL_RESOURCES} files")
            size = full.stat().st_size
            if total + size > MAX_SKILL_TOTAL_SIZE:
                raise ValueError(f"{root}: more than {MAX_SKILL_TOTAL_SIZE} bytes")
            data = full.read_bytes()
            total += len(data)
            files[full.relative_to(root).as_posix()] = data
    return files


def _uri_param(ctx: RequestContext) -> str:
    uri = (ctx.params or {}).get("uri")
    if not isinstance(uri, str):
        raise McpError.from_code(
            ErrorCode.INVALID_PARAMS, f"Invalid params: {ctx.method} needs a string 'uri'"
        )
    return uri


@final
@attrs.frozen(kw_only=True)
class ServedFile:
    """One file served as a resource for the skills that list it."""

    entry: ResourceEntry
    """The resource entry registered for it."""
    digest: str
    """Its ``sha256:`` digest, on which every skill listing it agrees."""
    listers: frozenset[str]
    """The URIs of the skills that list it (more than one: nested skills)."""
    label: tuple[str, str | None]
    """The ``name`` and ``description`` its entry was built with."""


@final
class SkillStore:
    """The skills one server serves, by the URI of their ``SKILL.md``, in the order they
    were added, and the files they list, each with the resource entry registered for it.

    Its existence is the server's declaration of the extension: once created (the first
    ``add_skill``, ``add_skills_dir`` or ``declare_skills``), the server declares
    ``io.modelcontextprotocol/skills`` however many skills it holds, zero included.

    Args:
        page_size: entries per page of ``skills/list`` and ``resources/directory/read``.
        key: the HMAC key of the pagination cursors (the server's, shared with its
            other lists: the list versions keep their cursors apart).
    """

    def __init__(self, page_size: int, key: bytes) -> None:
        self._page_size = page_size
        self._key = key
        self._skills: dict[str, Skill] = {}
        self._files: dict[str, ServedFile] = {}  # by file URI
        self._version = 0

    def __len__(self) -> int:
        return len(self._skills)

    def get(self, uri: str) -> Skill | None:
        return self._skills.get(uri)

    def skills(self) -> list[Skill]:
        """Every skill served, in order."""
        return list(self._skills.values())

    def file(self, uri: str) -> ServedFile | None:
        """The file ``uri`` as served, if a skill lists it."""
        return self._files.get(uri)

    def capability(self) -> dict[str, Any]:
        """The server's ``capabilities.extensions`` entry."""
        return {SKILLS_EXTENSION: {"directoryRead": True}}

    def update(
        self,
        skills: Mapping[str, Skill | None],
        files: Mapping[str, ServedFile | None],
    ) -> None:
        """Serve the skills ``skills`` (``None``: stop serving the one at that URI; a
        skill served already keeps its place, a new one comes last), whose files are
        now ``files`` (``None``: no skill lists it any more). Cursors of before go
        stale only when the skills served change by value (reloading what is served
        changes nothing)."""
        changed = False
        for uri, skill in skills.items():
            if skill is None:
                changed = self._skills.pop(uri, None) is not None or changed
            elif self._skills.get(uri) != skill:
                self._skills[uri] = skill
                changed = True
        for uri, served in files.items():
            if served is None:
                self._files.pop(uri, None)
            else:
                self._files[uri] = served
        if changed:
            self._version += 1

    def install(self, handlers: Handlers) -> None:
        """Answer the extension's methods through ``handlers``."""
        handlers.set_request_handler(SKILLS_LIST, self.list_skills)
        handlers.set_request_handler(SKILLS_GET, self.get_skill)
        handlers.set_request_handler(DIRECTORY_READ, self.read_directory)

    async def list_skills(self, ctx: RequestContext) -> dict[str, Any]:
        """``skills/list``: every skill, in the order added, paginated (an entry is
        never split across pages). The core adds ``ttlMs``/``cacheScope`` in the
        modern era."""
        return list_result(
            ctx.params,
            "skills",
            list(self._skills.values()),
            self._page_size,
            list_version=f"skills:{self._version}",
            key=self._key,
            render=skill_json,
        )

    async def get_skill(self, ctx: RequestContext) -> dict[str, Any]:
        """``skills/get``: the entry of one skill; -32602 for a URI that names none."""
        uri = _uri_param(ctx)
        skill = self._skills.get(uri)
        if skill is None:
            raise McpError.from_code(ErrorCode.INVALID_PARAMS, f"No skill is served at {uri}")
        return {"skill": skill_json(skill)}

    async def read_directory(self, ctx: RequestContext) -> dict[str, Any]:
        """``resources/directory/read``: the direct children of a directory of a served
        skill (its root or a subdirectory), files with their resource metadata and
        subdirectories as ``inode/directory``; -32602 for anything else."""
        uri = _uri_param(ctx)
        files = [
            f.uri
            for skill in self._skills.values()
            if isinstance(skill.resources, tuple)
            and (uri == skill.root or uri.startswith(skill.root + "/"))
            for f in skill.resources
        ]
        children = directory_children(dict.fromkeys(files), uri)
        if not children and not any(uri == skill.root for skill in self._skills.values()):
            raise McpError.from_code(ErrorCode.INVALID_PARAMS, f"{uri} is not a directory resource")
        return list_result(
            ctx.params,
            "resources",
            children,
            self._page_size,
            # (A digest of the URI, not the URI: a cursor holds its list version, and
            # a long URI would make it longer than a cursor may be.)
            list_version=f"dir:{_uri_digest(uri)}:{self._version}",
            key=self._key,
            render=self._child,
        )

    def _child(self, child: tuple[str, bool]) -> dict[str, Any]:
        """One entry of a ``resources/directory/read`` page."""
        uri, is_directory = child
        mime_type = DIRECTORY_MIME_TYPE if is_directory else self._mime_type(uri)
        return {"uri": uri, "name": uri.rsplit("/", 1)[-1], "mimeType": mime_type}

    def _mime_type(self, uri: str) -> str:
        served = self._files.get(uri)
        mime_type = None if served is None else served.entry.mime_type
        return mime_type or "application/octet-stream"


def _uri_digest(uri: str) -> str:
    """A short digest of ``uri``, naming its directory listing in a cursor."""
    return hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()[:32]


_BINARY_PREFIXES: Final = ("image/", "audio/", "video/", "application/pdf", "application/zip")


def _reader(data: bytes, mime_type: str) -> Any:
    """The resource function of one skill file: its text when it is not a binary type
    and :func:`~mcp_sansio.skills.text_answer` gives one (UTF-8, and no larger
    JSON-escaped than base64: the answer then fits the size a client checks before it
    asks; the client hashes the UTF-8 encoding, the same bytes), else the bytes as a
    blob."""
    value: str | bytes = data
    if not mime_type.startswith(_BINARY_PREFIXES) and mime_type != "application/octet-stream":
        text = text_answer(data)
        if text is not None:
            value = text

    async def read() -> str | bytes:
        return value

    return read


@final
class _Prepared:
    """A skill built and checked, not yet served: its entry, its files by URI and
    their MIME types."""

    def __init__(self, skill: Skill, files: Mapping[str, bytes]) -> None:
        assert isinstance(skill.resources, tuple)
        self.skill = skill
        self.data = {f"{skill.root}/{path}": data for path, data in files.items()}
        self.mime_types = {f.uri: mime_type_of(f.uri, self.data[f.uri]) for f in skill.resources}


def _prepare(
    source: str | os.PathLike[str] | Mapping[str, bytes | str], *, prefix: str, scheme: str
) -> _Prepared:
    """Read and build one skill; nothing is served yet."""
    if isinstance(source, Mapping):
        files = {
            path: data.encode("utf-8") if isinstance(data, str) else bytes(data)
            for path, data in source.items()
        }
        if SKILL_MD not in files:
            raise ValueError(f"a skill needs a {SKILL_MD}")
        name = parse_frontmatter(files[SKILL_MD].decode("utf-8"))["name"]
    else:
        files = read_skill_dir(source)
        name = Path(source).resolve().name  # (build_skill checks it is the frontmatter's)
    return _Prepared(build_skill(skill_uri(name, prefix.strip("/"), scheme), files), files)


def _apply(
    server: Server,
    batch: Sequence[_Prepared] = (),
    *,
    remove: Collection[str] = (),
    replace: bool = False,
) -> None:
    """Change the skills ``server`` serves in one step: stop serving the skills at the
    URIs ``remove``, and serve every skill of ``batch`` (with ``replace``, in the place
    of one served at its URI, if any).

    Every check is made, and every resource entry built, before anything changes: a
    refusal changes nothing. Then the resources and the skills change together, with no
    checkpoint between, so no request sees one without the other, and a replaced skill
    is never absent.

    Files: one resource per file URI, whichever skills list it (a nested skill's files
    are also files of the skill that encloses it), and every skill that lists it must
    agree on its digest. A ``SKILL.md`` resource carries its own skill's ``name`` and
    ``description`` while that skill is served; any other file is named by its path
    below the root of the outermost skill listing it (whatever the order they were
    added in). A file no skill lists any more stops being a resource (the registry's
    change count moves: sessions get ``notifications/resources/list_changed``, as the
    Resources spec asks of a server that declares ``listChanged``); one whose entry
    would not change keeps it. A URI held by a resource that is not a skill's file is
    refused. Files are plain resources, never templates, whatever their URIs hold
    (``Server.add_resource`` would take a ``{`` for a template).

    Cost: only the files the skills removed, replaced or added list are looked at (a
    file's entry depends on nothing else), so one change costs as much as it changes,
    however many skills are served; an entry is built only for a file whose content or
    name changes.

    Raises:
        KeyError: a URI of ``remove`` names no skill served.
        ValueError: a skill of ``batch`` is served already (without ``replace``) or is
            in it twice, two skills list a file with different content, or a file's URI
            is another resource's.
    """
    served = server._skills
    # The server's store is not created until the checks pass (a refusal changes
    # nothing); an empty one stands in for it meanwhile.
    store = served if served is not None else SkillStore(1, b"")
    for uri in remove:
        if store.get(uri) is None:
            raise KeyError(uri)
    incoming: dict[str, _Prepared] = {}
    for prepared in batch:
        uri = prepared.skill.uri
        if uri in incoming or (store.get(uri) is not None and not replace and uri not in remove):
            raise ValueError(f"a skill is already served at {uri}")
        incoming[uri] = prepared
    if not incoming and not remove:
        server._skill_store()  # (nothing to serve yet: the extension is declared)
        return
    # The skills served as they were no longer (removed, or replaced), and the files
    # the change touches: those they list, and those the incoming skills list.
    leaving = {uri for uri in [*remove, *incoming] if store.get(uri) is not None}
    touched: dict[str, None] = {}
    for uri in leaving:
        old = store.get(uri)
        assert old is not None and isinstance(old.resources, tuple)
        touched.update((f.uri, None) for f in old.resources)
    # File URI -> (digest, the incoming skills listing it), of batch.
    arriving: dict[str, tuple[str, list[str]]] = {}
    for uri, prepared in incoming.items():
        assert isinstance(prepared.skill.resources, tuple)
        for file in prepared.skill.resources:
            digest, listers = arriving.setdefault(file.uri, (file.digest, []))
            if digest != file.digest:
                raise ValueError(f"two skills list {file.uri} with different content")
            listers.append(uri)
            touched[file.uri] = None
    resources = server._registry.resources
    files: dict[str, ServedFile | None] = {}
    for uri in touched:
        mine = store.file(uri)
        kept = frozenset() if mine is None else mine.listers - leaving
        digest, listers = arriving.get(uri, ("", []))
        if kept:  # (a skill the change leaves alone still lists it: its digest holds)
            assert mine is not None
            if listers and digest != mine.digest:
                raise ValueError(f"two skills list {uri} with different content")
            digest = mine.digest
        if not kept and not listers:
            files[uri] = None  # (no skill lists it any more)
            continue
        held = resources.get(uri)
        if held is not None and (mine is None or held is not mine.entry):
            raise ValueError(f"a resource is already registered at {uri}")
        every = kept.union(listers)
        # The skill whose SKILL.md it is, if one is served after the change.
        owner = incoming[uri].skill if uri in incoming else None
        if owner is None and uri not in leaving:
            owner = store.get(uri)
        outermost = min(every, key=len)  # (their roots all lead to the file: nested)
        label = (
            (owner.name, owner.description)
            if owner is not None
            else (uri[len(outermost) - len(SKILL_MD) :], None)
        )
        if mine is not None and mine.digest == digest and mine.label == label:
            entry = mine.entry  # (the same file, described the same: nothing changes)
        else:
            if mine is not None and mine.digest == digest:
                reader, mime_type = mine.entry.fn, mine.entry.mime_type
            else:
                prepared = incoming[listers[0]]
                mime_type = prepared.mime_types[uri]
                reader = _reader(prepared.data[uri], mime_type)
            entry = ResourceEntry.build(
                reader,
                uri,
                name=label[0],
                description=label[1],
                mime_type=mime_type,
                title=None,
                icons=None,
                annotations=None,
                meta=None,
            )
        files[uri] = ServedFile(entry=entry, digest=digest, listers=every, label=label)
    store = server._skill_store()
    registry = server._registry
    for uri, change in files.items():  # nothing can fail
        mine = store.file(uri)
        held = resources.get(uri)
        if change is None:
            if mine is not None and held is mine.entry:
                registry.remove("resources", uri)
        elif held is not change.entry:
            if held is not None:
                registry.remove("resources", uri)
            registry.add(change.entry)
    changes: dict[str, Skill | None] = {uri: None for uri in remove if uri not in incoming}
    changes.update((uri, prepared.skill) for uri, prepared in incoming.items())
    store.update(changes, files)


def add_skill(
    server: Server,
    source: str | os.PathLike[str] | Mapping[str, bytes | str],
    *,
    prefix: str,
    scheme: str,
    replace: bool,
) -> Skill:
    """:meth:`Server.add_skill <mcp_trio.Server.add_skill>`."""
    prepared = _prepare(source, prefix=prefix, scheme=scheme)
    _apply(server, [prepared], replace=replace)
    return prepared.skill


def add_skills_dir(
    server: Server, path: str | os.PathLike[str], *, prefix: str, scheme: str, replace: bool
) -> list[Skill]:
    """:meth:`Server.add_skills_dir <mcp_trio.Server.add_skills_dir>`: every skill is
    read and built first, then all are served, or none."""
    root = Path(path)
    if not root.is_dir():
        raise ValueError(f"not a directory: {root}")
    batch = []
    for top, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        here = Path(top)
        skill_md = here / SKILL_MD
        if skill_md.is_file() and not skill_md.is_symlink():
            parent = "" if here == root else here.parent.relative_to(root).as_posix()
            where = "/".join(p for p in (prefix.strip("/"), parent) if p and p != ".")
            batch.append(_prepare(here, prefix=where, scheme=scheme))
    _apply(server, batch, replace=replace)
    return [prepared.skill for prepared in batch]


def remove_skill(server: Server, uri: str) -> None:
    """:meth:`Server.remove_skill <mcp_trio.Server.remove_skill>`."""
    _apply(server, remove=(uri,))

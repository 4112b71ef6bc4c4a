"""Serving skills (the skills extension, ``io.modelcontextprotocol/skills``): the skills a
:class:`~mcp_trio.Server` serves, and its ``skills/list``, ``skills/get`` and
``resources/directory/read`` handlers.

Each file of a skill is also an ordinary resource of the server (``resources/read``,
``resources/list``), registered by :meth:`Server.add_skill <mcp_trio.Server.add_skill>`.
Files are read once, when the skill is added: what is served is always what the
manifest's digests describe.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, final

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
class SkillStore:
    """The skills one server serves, by the URI of their ``SKILL.md``, in the order they
    were added, and the resource entries it registered for their files.

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
        # File URI -> the resource entry registered for it, and the file's digest.
        self._files: dict[str, tuple[ResourceEntry, str]] = {}
        self._version = 0

    def __len__(self) -> int:
        return len(self._skills)

    def get(self, uri: str) -> Skill | None:
        return self._skills.get(uri)

    def skills(self) -> list[Skill]:
        """Every skill served, in order."""
        return list(self._skills.values())

    def files(self) -> list[tuple[str, tuple[ResourceEntry, str]]]:
        """Every file's URI, resource entry and digest."""
        return list(self._files.items())

    def file(self, uri: str) -> tuple[ResourceEntry, str] | None:
        """The resource entry registered for the file ``uri`` and its digest."""
        return self._files.get(uri)

    def capability(self) -> dict[str, Any]:
        """The server's ``capabilities.extensions`` entry."""
        return {SKILLS_EXTENSION: {"directoryRead": True}}

    def replace_all(
        self, skills: list[Skill], files: Mapping[str, tuple[ResourceEntry, str]]
    ) -> None:
        """Serve ``skills`` (in that order) whose files have the entries ``files``, in
        place of what was served (list and directory cursors of before go stale)."""
        self._skills = {skill.uri: skill for skill in skills}
        self._files = dict(files)
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
            list_version=f"dir:{uri}:{self._version}",
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
        mime_type = None if served is None else served[0].mime_type
        return mime_type or "application/octet-stream"


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
    ``description`` while that skill is served, and is a plain file of the skill that
    encloses it otherwise. A file no skill lists any more stops being a resource (the
    registry's change count moves: sessions get ``notifications/resources/list_changed``,
    as the Resources spec asks of a server that declares ``listChanged``); one whose
    entry would not change keeps it. A URI held by a resource that is not a skill's file
    is refused. Files are plain resources, never templates, whatever their URIs hold
    (``Server.add_resource`` would take a ``{`` for a template).

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
    current = {skill.uri: skill for skill in store.skills()}
    for uri in remove:
        if uri not in current:
            raise KeyError(uri)
    incoming: dict[str, _Prepared] = {}
    for prepared in batch:
        uri = prepared.skill.uri
        if uri in incoming or (uri in current and not replace and uri not in remove):
            raise ValueError(f"a skill is already served at {uri}")
        incoming[uri] = prepared
    if not incoming and not remove:
        server._skill_store()  # (nothing to serve yet: the extension is declared)
        return
    # What is served after: a replaced skill keeps its place, new ones come last.
    after = [
        incoming[uri].skill if uri in incoming else skill
        for uri, skill in current.items()
        if uri in incoming or uri not in remove
    ]
    after.extend(prepared.skill for uri, prepared in incoming.items() if uri not in current)
    new_files: dict[str, tuple[bytes, str]] = {}  # file URI -> (data, MIME type), of batch
    for prepared in incoming.values():
        for uri, data in prepared.data.items():
            new_files.setdefault(uri, (data, prepared.mime_types[uri]))
    listed: dict[str, tuple[str, Skill]] = {}  # file URI -> (digest, first skill listing it)
    for skill in after:
        assert isinstance(skill.resources, tuple)
        for file in skill.resources:
            digest, _ = listed.setdefault(file.uri, (file.digest, skill))
            if digest != file.digest:
                raise ValueError(f"two skills list {file.uri} with different content")
    resources = server._registry.resources
    owners = {skill.uri: skill for skill in after}  # SKILL.md URI -> its skill
    entries: dict[str, tuple[ResourceEntry, str]] = {}
    for uri, (digest, lister) in listed.items():
        mine = store.file(uri)
        held = resources.get(uri)
        if held is not None and (mine is None or held is not mine[0]):
            raise ValueError(f"a resource is already registered at {uri}")
        mime_type: str | None
        if uri in new_files:
            data, mime_type = new_files[uri]
            reader = _reader(data, mime_type)
        else:  # (a file of a skill kept as it was: its entry has what we need)
            assert mine is not None
            reader, mime_type = mine[0].fn, mine[0].mime_type
        own = owners.get(uri)
        entry = ResourceEntry.build(
            reader,
            uri,
            name=own.name if own is not None else uri[len(lister.root) + 1 :],
            description=own.description if own is not None else None,
            mime_type=mime_type,
            title=None,
            icons=None,
            annotations=None,
            meta=None,
        )
        if mine is not None and mine[1] == digest and mine[0].definition == entry.definition:
            entry = mine[0]  # (the same file, described the same: nothing changes)
        entries[uri] = entry, digest
    store = server._skill_store()
    registry = server._registry
    for uri in [uri for uri, _ in store.files() if uri not in entries]:  # nothing can fail
        mine = store.file(uri)
        if mine is not None and resources.get(uri) is mine[0]:
            registry.remove("resources", uri)
    for uri, (entry, _) in entries.items():
        held = resources.get(uri)
        if held is not entry:
            if held is not None:
                registry.remove("resources", uri)
            registry.add(entry)
    store.replace_all(after, entries)


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

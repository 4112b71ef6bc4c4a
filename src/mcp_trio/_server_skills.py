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
from collections.abc import Mapping
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

__all__ = ["SkillStore", "add_skill", "add_skills_dir", "mime_type_of", "read_skill_dir"]

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
    were added.

    Args:
        page_size: entries per page of ``skills/list`` and ``resources/directory/read``.
        key: the HMAC key of the pagination cursors (the server's, shared with its
            other lists: the list versions keep their cursors apart).
    """

    def __init__(self, page_size: int, key: bytes) -> None:
        self._page_size = page_size
        self._key = key
        self._skills: dict[str, Skill] = {}
        self._mime_types: dict[str, str] = {}
        self._version = 0

    def __len__(self) -> int:
        return len(self._skills)

    def get(self, uri: str) -> Skill | None:
        return self._skills.get(uri)

    def capability(self) -> dict[str, Any]:
        """The server's ``capabilities.extensions`` entry."""
        return {SKILLS_EXTENSION: {"directoryRead": True}}

    def digest_of(self, uri: str) -> str | None:
        """The digest of a file some served skill lists (nested skills share files)."""
        for skill in self._skills.values():
            if isinstance(skill.resources, tuple):
                for file in skill.resources:
                    if file.uri == uri:
                        return file.digest
        return None

    def add(self, skill: Skill, mime_types: Mapping[str, str]) -> None:
        """Serve ``skill``, whose files have the MIME types ``mime_types`` (by URI)."""
        if skill.uri in self._skills:
            raise ValueError(f"a skill is already served at {skill.uri}")
        self._skills[skill.uri] = skill
        self._mime_types.update(mime_types)
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
        mime_type = (
            DIRECTORY_MIME_TYPE
            if is_directory
            else self._mime_types.get(uri, "application/octet-stream")
        )
        return {"uri": uri, "name": uri.rsplit("/", 1)[-1], "mimeType": mime_type}


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


def _serve(server: Server, batch: list[_Prepared]) -> None:
    """Serve every skill of ``batch``, or none: every check is made, and every resource
    entry built, before anything changes. A file two skills share (a nested skill's
    files are also files of the skill that encloses it) is one resource; a ``SKILL.md``
    resource always carries its own skill's ``name`` and ``description``, whichever
    skill registered it. Files are plain resources, never templates, whatever their
    URIs hold (``Server.add_resource`` would take a ``{`` for a template)."""
    if not batch:
        return
    # The server's store is not created until the checks pass (a refusal changes
    # nothing); an empty one stands in for it meanwhile.
    served = server._skills
    store = served if served is not None else SkillStore(1, b"")
    resources = server._registry.resources
    digests: dict[str, str] = {}  # file URI -> digest, within the batch
    skill_mds: dict[str, Skill] = {}  # SKILL.md URI -> its skill, within the batch
    for prepared in batch:
        skill = prepared.skill
        if store.get(skill.uri) is not None or skill.uri in skill_mds:
            raise ValueError(f"a skill is already served at {skill.uri}")
        skill_mds[skill.uri] = skill
        assert isinstance(skill.resources, tuple)
        for file in skill.resources:
            if digests.setdefault(file.uri, file.digest) != file.digest:
                raise ValueError(f"two skills list {file.uri} with different content")
            if file.uri in resources and store.digest_of(file.uri) != file.digest:
                raise ValueError(f"a resource is already registered at {file.uri}")
    entries: dict[str, tuple[ResourceEntry, bool]] = {}  # URI -> (entry, replaces one)
    for prepared in batch:
        skill = prepared.skill
        assert isinstance(skill.resources, tuple)
        for file in skill.resources:
            if file.uri in entries:
                continue  # (shared with a skill of the batch before it)
            replaces = file.uri in resources
            if replaces and file.uri != skill.uri:
                continue  # (served already, by a skill that shares it)
            # (A SKILL.md served as a plain file of an enclosing skill is replaced: it
            # is now a skill's SKILL.md, with its name and description.)
            own = skill_mds.get(file.uri, store.get(file.uri))
            entry = ResourceEntry.build(
                _reader(prepared.data[file.uri], prepared.mime_types[file.uri]),
                file.uri,
                name=own.name if own is not None else file.uri[len(skill.root) + 1 :],
                description=own.description if own is not None else None,
                mime_type=prepared.mime_types[file.uri],
                title=None,
                icons=None,
                annotations=None,
                meta=None,
            )
            entries[file.uri] = entry, replaces
    store = server._skill_store()
    for uri, (entry, replaces) in entries.items():  # nothing can fail from here on
        if replaces:
            server._registry.remove("resources", uri)
        server._registry.add(entry)
    for prepared in batch:
        store.add(prepared.skill, prepared.mime_types)


def add_skill(
    server: Server,
    source: str | os.PathLike[str] | Mapping[str, bytes | str],
    *,
    prefix: str,
    scheme: str,
) -> Skill:
    """:meth:`Server.add_skill <mcp_trio.Server.add_skill>`."""
    prepared = _prepare(source, prefix=prefix, scheme=scheme)
    _serve(server, [prepared])
    return prepared.skill


def add_skills_dir(
    server: Server, path: str | os.PathLike[str], *, prefix: str, scheme: str
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
    _serve(server, batch)
    return [prepared.skill for prepared in batch]

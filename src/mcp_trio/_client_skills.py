"""The client side of the skills extension (``io.modelcontextprotocol/skills``): listing
entries, and loading a skill or reading its files with the host's verification.

Spec (ext-skills ``skills.mdx``), Integrity and Verification: nothing is fetched ahead
of need (listing fetches no file); every file read is checked against the entry's size
and digest and not returned unless it matches; a ``SKILL.md`` is also parsed and its
frontmatter compared field by field with the entry's. The checks are the pure functions
of :mod:`mcp_sansio.skills`.

Each flow is written once, as a generator that yields the requests it needs
(``(method, params)``) and is sent their results; :func:`run_async` drives one for
:class:`~mcp_trio.Client`, :func:`run_sync` for :class:`~mcp_trio.BlockingClient`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any

from mcp_sansio import ErrorCode, ErrorData, LocalProtocolError, RemoteProtocolError
from mcp_sansio import types as t
from mcp_sansio.skills import (
    DIRECTORY_READ,
    DYNAMIC,
    MAX_SKILL_TOTAL_SIZE,
    SKILLS_GET,
    SKILLS_LIST,
    InvalidSkillEntry,
    Skill,
    SkillFile,
    SkillListing,
    SkillVerificationError,
    check_limits,
    content_bytes,
    parse_skill,
    read_message_size,
    resolve_skill_file,
    skill_listing,
    verify_content,
    verify_frontmatter,
)

from ._client_common import MAX_LIST_ITEMS, MAX_LIST_PAGES, Pager
from ._errors_base import McpError

__all__ = [
    "InvalidSkillEntry",
    "Skill",
    "SkillFile",
    "SkillListing",
    "SkillVerificationError",
    "get_skill",
    "list_skills",
    "load_skill",
    "read_resource_directory",
    "read_skill_file",
    "run_async",
    "run_sync",
]

Step = tuple[str, dict[str, Any] | None]
"""A request a flow needs: ``(method, params)``."""
Flow = Generator[Step, dict[str, Any], Any]
"""A flow: yields requests, is sent their raw results, returns its value."""


async def run_async(
    flow: Flow, request: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
) -> Any:
    """Run ``flow``, making its requests with ``await request(method, params)``; an
    error answer (``McpError``) is raised in the flow, where it asked."""
    try:
        step = next(flow)
        while True:
            try:
                result = await request(*step)
            except McpError as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value


def run_sync(flow: Flow, request: Callable[[str, dict[str, Any] | None], dict[str, Any]]) -> Any:
    """Run ``flow``, making its requests with ``request(method, params)`` (as
    :func:`run_async`)."""
    try:
        step = next(flow)
        while True:
            try:
                result = request(*step)
            except McpError as exc:
                step = flow.throw(exc)
            else:
                step = flow.send(result)
    except StopIteration as done:
        return done.value


def list_skills() -> Flow:
    """The listing of ``skills/list``, through all pages (bounded as the other lists):
    a :class:`~mcp_sansio.skills.SkillListing` of the valid entries, the malformed ones
    and every one of a URI listed more than once reported in its ``invalid``. A
    malformed page (no ``skills`` array, a ``nextCursor`` that is not a string, too
    many pages or entries) fails the whole listing. Cursors are opaque: one that
    repeats is followed like any other (``server/utilities/pagination.mdx``)."""
    entries: list[object] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        result = yield SKILLS_LIST, None if cursor is None else {"cursor": cursor}
        page = result.get("skills")
        if not isinstance(page, list):
            raise RemoteProtocolError(f"invalid {SKILLS_LIST} result: no 'skills' array")
        if len(entries) + len(page) > MAX_LIST_ITEMS:
            raise RemoteProtocolError(f"{SKILLS_LIST}: more than {MAX_LIST_ITEMS} skills")
        entries.extend(page)
        cursor = result.get("nextCursor")
        if cursor is None:
            return skill_listing(entries)
        if not isinstance(cursor, str):
            raise RemoteProtocolError(f"invalid {SKILLS_LIST} result: nextCursor is not a string")
    raise RemoteProtocolError(f"{SKILLS_LIST}: more than {MAX_LIST_PAGES} pages")


def read_resource_directory(uri: str) -> Flow:
    """The direct children of the directory resource ``uri``
    (``resources/directory/read``), through all pages, bounded as the other lists
    (:class:`~mcp_trio._client_common.Pager`): ``Resource`` objects, as the server
    lists them (a live view: not a skill's manifest, which a held entry is)."""
    pages = Pager(DIRECTORY_READ, "resources", t.Resource)
    while True:
        result = yield DIRECTORY_READ, {"uri": uri, **(pages.params() or {})}
        if not pages.add(result):
            return pages.items


def get_skill(uri: str) -> Flow:
    """The entry of ``skills/get`` for the ``SKILL.md`` at ``uri``."""
    result = yield SKILLS_GET, {"uri": uri}
    skill = parse_skill(result.get("skill"))
    if skill.uri != uri:
        raise RemoteProtocolError(f"{SKILLS_GET} for {uri} answered the entry of {skill.uri}")
    return skill


def _read(uri: str, max_message_size: int, setting: str) -> Generator[Step, dict[str, Any], bytes]:
    try:
        result = yield "resources/read", {"uri": uri}
    except McpError as exc:
        # The core's refusal of an answer over max_message_size (-32603, its data
        # naming the bound): past the check made before asking, only text JSON
        # escapes can get there.
        error = exc.error
        if error.code != ErrorCode.INTERNAL_ERROR or not (
            isinstance(error.data, dict) and "maxMessageSize" in error.data
        ):
            raise
        raise McpError(
            ErrorData(
                code=error.code,
                message=f"{uri}: the resources/read answer was over the {max_message_size}"
                f" bytes this client takes in one message ({setting}):"
                ' a file sent as text can grow up to 6 times as JSON escapes it (", \\,'
                " control characters); connect with a larger one to read it",
                data=error.data,
            )
        ) from exc
    return content_bytes(result.get("contents"), uri, limit=MAX_SKILL_TOTAL_SIZE)


def _check_message_size(entry: SkillFile, max_message_size: int, setting: str) -> None:
    """Refuse, before asking, a read whose answer may not fit in one message.

    Raises:
        LocalProtocolError: it may not: the message names the setting and the size.
    """
    needed = read_message_size(entry)
    if needed > max_message_size:
        raise LocalProtocolError(
            f"{entry.uri} is {entry.size} bytes: its resources/read answer may take"
            f" {needed} bytes (base64 and envelope), over this client's"
            f" {setting} of {max_message_size}; connect with it >= {needed} to read it"
        )


def load_skill(
    skill: Skill,
    *,
    allow_dynamic: bool,
    max_message_size: int,
    setting: str = "ConnectionConfig.max_message_size",
) -> Flow:
    """Fetch and verify ``skill``'s ``SKILL.md``; its text. ``max_message_size``: the
    largest answer the client takes, bounded by ``setting`` (named in errors).

    Raises:
        SkillVerificationError: over the limits, dynamic when not allowed, or the file
            fails its size, digest or frontmatter check.
        LocalProtocolError: the file's answer may be over ``max_message_size`` (see
            :func:`~mcp_sansio.skills.read_message_size`); nothing is sent.
    """
    if skill.resources == DYNAMIC:
        if not allow_dynamic:
            raise SkillVerificationError(
                skill.uri, "its resources are 'dynamic': no digests to verify it against"
            )
        data = yield from _read(skill.uri, max_message_size, setting)
    else:
        check_limits(skill)  # (the spec: checkable, and declined, before any read)
        entry = skill.file(skill.uri)
        _check_message_size(entry, max_message_size, setting)
        data = yield from _read(skill.uri, max_message_size, setting)
        verify_content(entry, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillVerificationError(skill.uri, "it is not UTF-8 text") from None
    verify_frontmatter(skill, text)
    return text


def read_skill_file(
    skill: Skill,
    reference: str,
    *,
    allow_dynamic: bool,
    max_message_size: int,
    setting: str = "ConnectionConfig.max_message_size",
) -> Flow:
    """Fetch and verify one file of ``skill`` (a URI, or a path relative to its root).

    Raises:
        SkillVerificationError: not listed in the entry, or a size or digest mismatch.
        ValueError: a reference that leaves the skill.
        LocalProtocolError: as for :func:`load_skill`.
    """
    uri = resolve_skill_file(skill, reference)
    if skill.resources == DYNAMIC:
        if not allow_dynamic:
            raise SkillVerificationError(
                uri, "the skill's resources are 'dynamic': nothing to verify it against"
            )
        if not uri.startswith(skill.root + "/"):
            raise SkillVerificationError(uri, f"not a file of {skill.uri}")
        return (yield from _read(uri, max_message_size, setting))
    entry = skill.file(uri)
    _check_message_size(entry, max_message_size, setting)
    data = yield from _read(uri, max_message_size, setting)
    verify_content(entry, data)
    return data

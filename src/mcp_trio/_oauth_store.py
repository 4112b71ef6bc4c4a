"""An :class:`~mcp_trio.OAuthStorage` in a JSON file, readable by its owner alone.

The file holds ``{"clients": {...}, "tokens": {...}, "servers": {...}}``: registrations
by issuer, tokens by resource and issuer, each the
fields of :class:`~mcp_trio.ClientCredentials` / :class:`~mcp_trio.OAuthToken`, and
for each server URL the resource and issuer of its token (``load_server``); and
``"namespaces": {NAME: {"clients": {...}, "tokens": {...}}}``, the same for each
storage made with a ``namespace``. Every save writes a new file (mode ``0600``, in a
directory created ``0700``), flushes it to the disk and renames it over the old one,
so a reader never sees half a file and a crash loses at most that save. An entry that
is not what it should be reads as absent (logged): the next authorization replaces it.
A file that does not parse as a JSON object, or is over 1 MiB, reads as empty (logged)
but is never written over, since it may hold what others saved: a save is then
dropped, logged as an error, until the file is repaired or removed. A save that would
make the file larger than that is dropped the same way.

The file work (reads, the write, its ``fsync``) runs in a worker thread
(:func:`trio.to_thread.run_sync`), never on the Trio thread, where a slow disk would stall
every task; one call at a time per storage (a :class:`trio.Lock`), so that saves are
applied in the order they were made; and one at a time per file in the whole process
(a :class:`threading.Lock` of the resolved path, taken in the worker thread; kept
while in use only, and never shared with another file), so that
storages of one file (``namespace=``) never read the file while another is replacing
it (a save's read, change and write are one step: else the last rename wins and the
other save is lost). A save, once called, is made, in the file or in memory: it is
shielded from cancellation (waiting for its turn included), since a rotated refresh
token it drops could not be used again. Separate processes are not locked out (no
``flock``: a process that hangs would stall every other); see :class:`FileOAuthStorage`.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar, final

import attrs
import trio

from mcp_sansio import ClientCredentials, OAuthToken
from mcp_sansio._oauth import _AUTH_METHODS

__all__ = ["FileOAuthStorage"]

logger = logging.getLogger("mcp_trio")

_MAX_FILE_SIZE: Final = 1024 * 1024
_FILE_LOCKS: Final[dict[str, _FileLock]] = {}
"""The lock of each file in use in the process, by resolved path: made at a file's first
use and dropped when its last user is done (as many as the worker threads at most)."""
_FILE_LOCKS_LOCK: Final = threading.Lock()


@final
class _FileLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock: Final = threading.Lock()
        self.users = 0


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold the lock of ``path`` (resolved: two spellings of one file share it; another
    file never waits for it). In a worker thread: resolving may touch the disk."""
    key = os.path.realpath(path)
    with _FILE_LOCKS_LOCK:
        entry = _FILE_LOCKS.get(key)
        if entry is None:
            entry = _FILE_LOCKS[key] = _FileLock()
        entry.users += 1
    try:
        with entry.lock:
            yield
    finally:
        with _FILE_LOCKS_LOCK:
            entry.users -= 1
            if not entry.users:
                del _FILE_LOCKS[key]


@final
class FileOAuthStorage:
    """Registrations and tokens in the JSON file ``path`` (mode ``0600``): they outlive
    the process (an :class:`~mcp_trio.OAuthStorage`).

    Args:
        path: the file (its directory is created, mode ``0700``, if need be).
        namespace: keep this storage's registrations and tokens apart from those of
            storages of the same file with another namespace (or none). Tokens are
            keyed by resource and issuer only, so an application that authorizes as
            several identities (a user, a service with the client credentials grant,
            several client IDs) gives each its own namespace, or a run as one would
            use the token of another. Registrations are keyed by issuer only, and an
            authorization server compares redirect URIs exactly: an application whose
            redirect URI changes (another port) puts it in the namespace, so that a
            registration made for another one is not reused.

    The file is read and written whole at each call (small, and shared safely by
    the storages of one process, which take turns, and by processes that take turns;
    two processes saving at the same moment may lose one save). It is at most 1 MiB:
    a file over that, or one that is not a JSON object, reads as empty and is not
    written over, nor is a save made that would take it over that: such a save is
    logged as an error and kept in this object's memory only, so that this process
    still finds what it saved (and does not ask the user again). Anyone who can read
    the file holds the tokens: keep it in the user's own directories.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        namespace: str | None = None,
    ) -> None:
        self.path: Final = Path(path)
        self.namespace: Final = namespace
        # Saves the file could not take ("clients"/"tokens" -> key -> entry, None for a
        # token removed): this process reads them before the file.
        # Touched on the Trio thread only.
        self._unsaved: Final[dict[str, dict[str, Any]]] = {
            "clients": {},
            "tokens": {},
            "servers": {},
        }
        # One call at a time does the file work (in a worker thread): see the module docs.
        self._lock: Final = trio.Lock()
        # The storages of one file and namespace keep one token for a resource and
        # issuer: their refreshes of it take turns (mcp_trio._oauth_turn). (Absolute,
        # not resolved: no disk access here; a symbolic link's two names do not.)
        self._refresh_turn_key: Final = ("file", os.path.abspath(self.path), namespace)

    async def load_client(self, issuer: str) -> ClientCredentials | None:
        return _build(ClientCredentials, await self._load("clients", issuer))

    async def save_client(self, issuer: str, client: ClientCredentials) -> None:
        # A private key is configuration, never written to a file (registrations carry
        # none); the entry has the fields it had before keys existed.
        entry = attrs.asdict(client, filter=lambda a, _: a.name not in _KEY_FIELDS)
        await self._save("clients", issuer, entry, "registration")

    async def load_token(self, resource: str, issuer: str) -> OAuthToken | None:
        return _build(OAuthToken, await self._load("tokens", _token_key(resource, issuer)))

    async def save_token(self, resource: str, issuer: str, token: OAuthToken | None) -> None:
        entry = None
        if token is not None:
            # (A bearer token's entry as before: readers that predate DPoP take it.)
            entry = attrs.asdict(token, filter=lambda a, v: a.name != "dpop_jkt" or v is not None)
        await self._save("tokens", _token_key(resource, issuer), entry, "token")

    async def load_server(self, server_url: str) -> tuple[str, str] | None:
        """The resource and the issuer of the token last obtained for the server at
        ``server_url`` (see :class:`~mcp_trio.OAuthStorage`): its first request carries
        that token, with no discovery first."""
        found = await self._load("servers", server_url)
        if (
            isinstance(found, dict)
            and set(found) == {"resource", "issuer"}
            and all(isinstance(value, str) for value in found.values())
        ):
            return found["resource"], found["issuer"]
        if found is not None:
            logger.warning("OAuth: a stored server entry is malformed: ignored")
        return None

    async def save_server(self, server_url: str, resource: str, issuer: str) -> None:
        """Keep where the token for the server at ``server_url`` is (its resource and
        issuer)."""
        entry = {"resource": resource, "issuer": issuer}
        await self._save("servers", server_url, entry, "server entry")

    async def _load(self, part: str, key: str) -> object:
        async with self._lock:
            unsaved = self._unsaved[part]
            if key in unsaved:
                return unsaved[key]
            return await trio.to_thread.run_sync(self._load_file, part, key)

    def _load_file(self, part: str, key: str) -> object:
        # (In a worker thread.)
        with _file_lock(self.path):
            return self._part(self._read() or {}, part).get(key)

    async def _save(self, part: str, key: str, entry: dict[str, Any] | None, what: str) -> None:
        # Shielded whole: a save cancelled before its thread starts would be in neither
        # the file nor _unsaved (a refresh's rotated token lost). Bounded by the file
        # work of the saves before it.
        with trio.CancelScope(shield=True):
            async with self._lock:
                saved = await trio.to_thread.run_sync(self._save_file, part, key, entry, what)
                if saved:
                    self._unsaved[part].pop(key, None)
                else:
                    self._unsaved[part][key] = entry

    def _save_file(self, part: str, key: str, entry: dict[str, Any] | None, what: str) -> bool:
        """Whether the file now holds ``entry`` (in a worker thread)."""
        with _file_lock(self.path):
            return self._save_locked(part, key, entry, what)

    def _save_locked(self, part: str, key: str, entry: dict[str, Any] | None, what: str) -> bool:
        data = self._read()
        if data is None:
            self._not_saved(what)
            return False
        entries = self._part(data, part)
        if entry is None:
            entries.pop(key, None)
        else:
            entries[key] = entry
        return self._write(data, what)

    def _not_saved(self, what: str) -> None:
        # Written over, the file would lose what else it holds (other identities'
        # registrations and tokens), which is only unreadable to us.
        logger.error(
            "OAuth: the %s is kept in memory only: %s cannot be read (see above), and "
            "is not written over; repair or remove it",
            what,
            self.path,
        )

    def _part(self, data: dict[str, Any], part: str) -> dict[str, Any]:
        """``data``'s ``part`` (``"clients"``, ``"tokens"`` or ``"servers"``) in this storage's
        namespace: made, or a malformed one replaced, if need be."""
        home = data
        if self.namespace is not None:
            home = _dict_in(_dict_in(data, "namespaces"), self.namespace)
        return _dict_in(home, part)

    def unreadable(self) -> str | None:
        """Why the file cannot be read (so that it reads as empty and is not written
        over), or ``None`` if it can (or does not exist). It reads the file here, in
        the caller's thread: for start-up checks, before the event loop runs."""
        return self._parse()[1]

    def _read(self) -> dict[str, Any] | None:
        """The file's object: ``{}`` if there is no file, ``None`` (logged) if it
        cannot be read (see :meth:`unreadable`)."""
        data, reason = self._parse()
        if reason is not None:
            logger.warning("OAuth: %s %s: ignored", self.path, reason)
        return data

    def _parse(self) -> tuple[dict[str, Any] | None, str | None]:
        """The file's object (``{}`` if there is no file), else why there is none."""
        try:
            with self.path.open("rb") as file:
                text = file.read(_MAX_FILE_SIZE + 1)
        except FileNotFoundError:
            return {}, None
        if len(text) > _MAX_FILE_SIZE:
            return None, f"is over {_MAX_FILE_SIZE} bytes"
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # (RecursionError: nested too deep)
            return None, "is not JSON"
        if not isinstance(data, dict):
            return None, "is not a JSON object"
        return data, None

    def _write(self, data: dict[str, Any], what: str) -> bool:
        """Whether ``data`` is now the file's."""
        text = json.dumps(data, indent=1, sort_keys=True).encode()
        if len(text) > _MAX_FILE_SIZE:
            # It could not be read back: the file as it is stays readable.
            logger.error(
                "OAuth: the %s is kept in memory only: %s would be over %d bytes (remove "
                "identities no longer used, or the file)",
                what,
                self.path,
                _MAX_FILE_SIZE,
            )
            return False
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.")
        try:
            os.chmod(temporary, 0o600)  # (mkstemp's own mode, said out loud)
            with os.fdopen(fd, "wb") as file:
                file.write(text)
                # On the disk before the rename: else a crash may leave an empty file
                # where the old one was (the rename reaching the disk first).
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return True


def _dict_in(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data[key]``, made a dict (empty) if it is not one."""
    found = data.get(key)
    if isinstance(found, dict):
        return found
    made: dict[str, Any] = {}
    data[key] = made
    return made


def _token_key(resource: str, issuer: str) -> str:
    return f"{resource} {issuer}"  # (a space is in neither URL)


_T = TypeVar("_T", ClientCredentials, OAuthToken)
_TIMES: Final = frozenset({"expires_at", "issued_at"})
_KEY_FIELDS: Final = frozenset({"private_key", "signing_algorithm", "key_id"})


def _build(kind: type[_T], found: object) -> _T | None:
    """``kind`` from a stored entry; ``None`` for no entry or a malformed one."""
    if found is None:
        return None
    if (
        isinstance(found, dict)
        and set(attrs.fields_dict(kind)).issuperset(found)
        and all(_fits(name, value) for name, value in found.items())
    ):
        try:
            return kind(**found)
        except (TypeError, ValueError):  # (a field missing; a secret with no issuer)
            pass
    logger.warning("OAuth: a stored %s is malformed: ignored", kind.__name__)
    return None


def _fits(name: str, value: object) -> bool:
    if value is None:
        return name not in ("client_id", "access_token", "token_type")
    if name in _TIMES:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "token_endpoint_auth_method":
        # (Another string would be taken as "none": the secret silently not sent. The
        # methods are the sans-IO rules' own list.)
        return isinstance(value, str) and value in _AUTH_METHODS
    return isinstance(value, str)

"""``FileOAuthStorage``: registrations and tokens survive the process, in a file only
its owner may read; a malformed entry reads as absent, a file that does not parse is
never written over."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio import TokenEndpointAuthMethod
from mcp_trio import ClientCredentials, FileOAuthStorage, OAuthToken
from mcp_trio._oauth_store import _FILE_LOCKS

from .test_http_support import IO_TIMEOUT

ISSUER = "https://as.example"
RESOURCE = "https://mcp.example/mcp"
SERVER = "https://mcp.example/mcp/"  # (its URL: the resource may differ)


def stall_fsync(
    monkeypatch: pytest.MonkeyPatch, *, first_only: bool = False
) -> tuple[threading.Event, threading.Event]:
    """Make ``os.fsync`` (every call, or the first only) stop until ``release`` is set:
    returns ``in_fsync`` (set once a call stops there) and ``release``."""
    in_fsync, release = threading.Event(), threading.Event()
    fsync = os.fsync

    def stalled_fsync(fd: int) -> None:
        if not (first_only and in_fsync.is_set()):
            in_fsync.set()
            release.wait(IO_TIMEOUT)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", stalled_fsync)
    return in_fsync, release


async def test_what_is_saved_is_loaded_by_another_storage_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "mcp-trio" / "oauth.json"
    client = ClientCredentials(client_id="cid", client_secret="s", issuer=ISSUER)
    token = OAuthToken(
        access_token="at", expires_at=200.5, refresh_token="rt", scope="mcp", issued_at=100
    )
    store = FileOAuthStorage(path)
    assert await store.load_client(ISSUER) is None
    assert await store.load_token(RESOURCE, ISSUER) is None
    await store.save_client(ISSUER, client)
    await store.save_token(RESOURCE, ISSUER, token)
    again = FileOAuthStorage(path)
    assert await again.load_client(ISSUER) == client
    assert await again.load_token(RESOURCE, ISSUER) == token
    assert await again.load_token(RESOURCE, "https://other.example") is None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [p.name for p in path.parent.iterdir()] == ["oauth.json"]  # no temporary left
    await again.save_token(RESOURCE, ISSUER, None)
    assert await store.load_token(RESOURCE, ISSUER) is None
    assert await store.load_client(ISSUER) == client


async def test_a_namespace_keeps_registrations_and_tokens_apart(tmp_path: Path) -> None:
    path = tmp_path / "oauth.json"
    user, service, plain = (FileOAuthStorage(path, namespace=n) for n in ("user", "svc", None))
    await user.save_client(ISSUER, ClientCredentials(client_id="registered"))
    await user.save_token(RESOURCE, ISSUER, OAuthToken(access_token="the user's"))
    assert await service.load_client(ISSUER) is None
    assert await service.load_token(RESOURCE, ISSUER) is None  # not the user's token
    assert await plain.load_token(RESOURCE, ISSUER) is None
    await service.save_token(RESOURCE, ISSUER, OAuthToken(access_token="the service's"))
    await plain.save_token(RESOURCE, ISSUER, OAuthToken(access_token="no namespace"))
    again = FileOAuthStorage(path, namespace="user")
    assert await again.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="the user's")
    assert await again.load_client(ISSUER) == ClientCredentials(client_id="registered")
    assert await service.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="the service's")
    assert await plain.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="no namespace")
    await service.save_token(RESOURCE, ISSUER, None)
    assert await service.load_token(RESOURCE, ISSUER) is None
    assert await again.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="the user's")


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize(
    "malformed",
    [3, [], {"resource": RESOURCE}, {"resource": RESOURCE, "issuer": 5}, {"x": 1, "y": 2}],
)
async def test_where_a_server_s_token_is_is_kept_by_its_url(
    tmp_path: Path, namespace: str | None, malformed: object
) -> None:
    """``save_server`` / ``load_server`` (a new client's first request carries the
    token, with no discovery): by the server's URL, in the namespace; an entry that is
    not a resource and an issuer reads as absent."""
    path = tmp_path / "oauth.json"
    store = FileOAuthStorage(path, namespace=namespace)
    assert await store.load_server(SERVER) is None
    await store.save_server(SERVER, RESOURCE, ISSUER)
    assert await FileOAuthStorage(path, namespace=namespace).load_server(SERVER) == (
        RESOURCE,
        ISSUER,
    )
    assert await FileOAuthStorage(path, namespace="other").load_server(SERVER) is None
    data = json.loads(path.read_bytes())
    home = data if namespace is None else data["namespaces"][namespace]
    home["servers"][SERVER] = malformed
    path.write_text(json.dumps(data))
    assert await FileOAuthStorage(path, namespace=namespace).load_server(SERVER) is None


@pytest.mark.parametrize("method", ["none", "client_secret_basic", "client_secret_post"])
async def test_every_token_endpoint_auth_method_is_kept(
    tmp_path: Path, method: TokenEndpointAuthMethod
) -> None:
    path = tmp_path / "oauth.json"
    client = ClientCredentials(
        client_id="c", client_secret="s", issuer=ISSUER, token_endpoint_auth_method=method
    )
    await FileOAuthStorage(path).save_client(ISSUER, client)
    assert await FileOAuthStorage(path).load_client(ISSUER) == client


_MALFORMED_PARTS: list[object] = [
    {"clients": [], "tokens": 3},
    {
        "clients": {ISSUER: {"client_id": 5}},
        "tokens": {f"{RESOURCE} {ISSUER}": {"access_token": "a", "expires_at": "soon"}},
    },
    {
        "clients": {ISSUER: {"client_id": "c", "client_secret": "s"}},  # no issuer
        "tokens": {f"{RESOURCE} {ISSUER}": {"access_token": "a", "extra": 1}},
    },
    {"tokens": {f"{RESOURCE} {ISSUER}": {"access_token": None}}},
    {"clients": {ISSUER: {}}, "tokens": {f"{RESOURCE} {ISSUER}": {}}},  # required missing
    {"clients": {ISSUER: {"issuer": ISSUER}}, "tokens": {f"{RESOURCE} {ISSUER}": {"scope": "a"}}},
    {"clients": {ISSUER: "c"}, "tokens": {f"{RESOURCE} {ISSUER}": ["a"]}},
    # Not one of the methods (it would act as "none": the secret silently not sent).
    {"clients": {ISSUER: {"client_id": "c", "token_endpoint_auth_method": "bogus"}}},
    {"clients": {ISSUER: {"client_id": "c", "token_endpoint_auth_method": 3}}},
    {"clients": {ISSUER: {"client_id": "c", "token_endpoint_auth_method": ["none"]}}},
    {"clients": {ISSUER: {"client_id": "c", "token_endpoint_auth_method": {}}}},
]


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize(
    "content",
    [
        b'{"namespaces": 3}',
        b'{"namespaces": {"ns": []}}',
        *_MALFORMED_PARTS,
    ],
)
async def test_a_malformed_entry_reads_as_absent_and_is_replaced(
    tmp_path: Path, content: bytes | object, namespace: str | None
) -> None:
    path = tmp_path / "oauth.json"
    if not isinstance(content, bytes):  # the storage's part: where its namespace says
        content = json.dumps(content if namespace is None else {"namespaces": {namespace: content}})
        content = content.encode()
    path.write_bytes(content)
    store = FileOAuthStorage(path, namespace=namespace)
    assert await store.load_client(ISSUER) is None
    assert await store.load_token(RESOURCE, ISSUER) is None
    await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="new"))
    assert await store.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="new")


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not json", "is not JSON"),
        (b'{"namespaces": {"other": {}}', "is not JSON"),  # (cut short: an edit gone wrong)
        (b"[1, 2]", "is not a JSON object"),
        (b"[" * 100_000, "is not JSON"),  # nested too deep for the parser
        (b" " * (1024 * 1024 + 1), "is over 1048576 bytes"),  # over the bound
    ],
)
async def test_a_file_that_does_not_parse_reads_as_empty_and_is_not_written_over(
    tmp_path: Path,
    content: bytes,
    reason: str,
    namespace: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # It may hold other identities' registrations and tokens: a save as if it were
    # empty would lose them all.
    path = tmp_path / "oauth.json"
    path.write_bytes(content)
    store = FileOAuthStorage(path, namespace=namespace)
    assert store.unreadable() == reason
    assert await store.load_client(ISSUER) is None
    assert await store.load_token(RESOURCE, ISSUER) is None
    await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="new"))
    await store.save_client(ISSUER, ClientCredentials(client_id="new"))
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["oauth.json"]
    warnings = {r.getMessage() for r in caplog.records if r.levelname == "WARNING"}
    assert warnings == {f"OAuth: {path} {reason}: ignored"}
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        f"OAuth: the {what} is kept in memory only: {path} cannot be read (see above), and "
        "is not written over; repair or remove it"
        for what in ("token", "registration")
    ]
    # This process still finds what it saved (else every request would authorize anew),
    # another storage of the file does not.
    assert await store.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="new")
    assert await store.load_client(ISSUER) == ClientCredentials(client_id="new")
    assert await FileOAuthStorage(path, namespace=namespace).load_client(ISSUER) is None
    await store.save_token(RESOURCE, ISSUER, None)  # (a removal is remembered too)
    assert await store.load_token(RESOURCE, ISSUER) is None
    path.unlink()  # (removed: saves work again, and go to the file)
    assert store.unreadable() is None
    await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="newer"))
    again = FileOAuthStorage(path, namespace=namespace)
    assert await again.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="newer")
    assert await store.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="newer")


async def test_a_save_that_would_go_over_the_bound_is_kept_in_memory_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "oauth.json"
    user = FileOAuthStorage(path, namespace="user")
    await user.save_token(RESOURCE, ISSUER, OAuthToken(access_token="the user's"))
    bound = 1024 * 1024
    # Another identity's token that takes the file to the bound exactly: saved.
    other = FileOAuthStorage(path, namespace="other")
    await other.save_token(RESOURCE, ISSUER, OAuthToken(access_token=""))
    room = bound - len(path.read_bytes())
    await other.save_token(RESOURCE, ISSUER, OAuthToken(access_token="t" * room))
    assert len(path.read_bytes()) == bound
    assert await other.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="t" * room)
    # One byte more: the save is dropped, the file as it was (still readable).
    kept = path.read_bytes()
    await other.save_token(RESOURCE, ISSUER, OAuthToken(access_token="t" * (room + 1)))
    assert path.read_bytes() == kept
    assert await user.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="the user's")
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        f"OAuth: the token is kept in memory only: {path} would be over {bound} bytes "
        "(remove identities no longer used, or the file)"
    ]
    # Kept in memory for this process (another one reads the file as it is).
    longer = OAuthToken(access_token="t" * (room + 1))
    assert await other.load_token(RESOURCE, ISSUER) == longer
    fresh = FileOAuthStorage(path, namespace="other")
    assert await fresh.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="t" * room)


async def test_a_failed_write_leaves_the_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "oauth.json"
    store = FileOAuthStorage(path)
    await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="old"))

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="new"))
    assert [p.name for p in tmp_path.iterdir()] == ["oauth.json"]
    assert await store.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="old")


async def test_the_new_file_is_on_the_disk_before_it_replaces_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "oauth.json"
    done: list[tuple[str, int]] = []  # (what, the file's inode)
    fsync, replace = os.fsync, os.replace

    def record_fsync(fd: int) -> None:
        done.append(("fsync", os.fstat(fd).st_ino))
        fsync(fd)

    def record_replace(src: str, dst: Path) -> None:
        done.append(("replace", os.stat(src).st_ino))
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "replace", record_replace)
    await FileOAuthStorage(path).save_token(RESOURCE, ISSUER, OAuthToken(access_token="t"))
    [(first, synced), (then, renamed)] = done
    assert (first, then) == ("fsync", "replace") and synced == renamed


async def test_the_file_work_runs_in_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow disk (fsync can take seconds) must not stall every task of the Trio thread.
    path = tmp_path / "oauth.json"
    threads: list[threading.Thread] = []
    fsync, open_ = os.fsync, Path.open

    def record_fsync(fd: int) -> None:
        threads.append(threading.current_thread())
        fsync(fd)

    def record_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return open_(self, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(Path, "open", record_open)
    store = FileOAuthStorage(path)
    await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="t"))
    assert await store.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="t")
    assert await store.load_client(ISSUER) is None
    assert len(threads) == 4  # (the save's read and fsync, two loads)
    assert threading.main_thread() not in threads


async def test_saves_take_turns_and_none_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A save reads, changes and writes the whole file: two at once would each write
    # what it read, and the first one's change would be lost.
    path = tmp_path / "oauth.json"
    store = FileOAuthStorage(path)
    in_fsync, release = stall_fsync(monkeypatch)
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.save_token, RESOURCE, ISSUER, OAuthToken(access_token="a"))
            await trio.to_thread.run_sync(in_fsync.wait, IO_TIMEOUT)
            nursery.start_soon(store.save_client, ISSUER, ClientCredentials(client_id="c"))
            nursery.start_soon(store.load_client, ISSUER)
            await trio.testing.wait_all_tasks_blocked()
            # The second save and the load wait their turn, in the Trio thread.
            assert store._lock.statistics().tasks_waiting == 2
            release.set()
    again = FileOAuthStorage(path)
    assert await again.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="a")
    assert await again.load_client(ISSUER) == ClientCredentials(client_id="c")


async def test_a_save_cancelled_while_it_writes_is_finished_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker thread cannot be stopped half-way: the save completes (the file then
    # holds it), and the storage's memory agrees with the file.
    path = tmp_path / "oauth.json"
    store = FileOAuthStorage(path)
    in_fsync, release = stall_fsync(monkeypatch)
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.save_token, RESOURCE, ISSUER, OAuthToken(access_token="a"))
            await trio.to_thread.run_sync(in_fsync.wait, IO_TIMEOUT)
            nursery.cancel_scope.cancel()
            release.set()
    assert await FileOAuthStorage(path).load_token(RESOURCE, ISSUER) == OAuthToken(access_token="a")
    assert not store._lock.locked()


async def test_two_storages_of_one_file_take_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # namespace= puts several identities in one file: their read-change-write must not
    # interleave (each would rename its own copy over the other's save).
    path = tmp_path / "oauth.json"
    alice = FileOAuthStorage(path, namespace="alice")
    (tmp_path / "link").symlink_to(tmp_path)
    bob = FileOAuthStorage(tmp_path / "link" / "oauth.json", namespace="bob")  # (another spelling)
    both = threading.Barrier(2, timeout=1)  # (both writers at fsync at once, if they could)
    fsync = os.fsync

    def meeting_fsync(fd: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait()  # (times out: the other waits for the file, as it should)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", meeting_fsync)
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(alice.save_token, RESOURCE, ISSUER, OAuthToken(access_token="a"))
            nursery.start_soon(bob.save_token, RESOURCE, ISSUER, OAuthToken(access_token="b"))
    again = [FileOAuthStorage(path, namespace=n) for n in ("alice", "bob")]
    assert await again[0].load_token(RESOURCE, ISSUER) == OAuthToken(access_token="a")
    assert await again[1].load_token(RESOURCE, ISSUER) == OAuthToken(access_token="b")


async def test_a_file_never_waits_for_another_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each file has its own lock (kept while in use only): a save to one file is not
    # held up, shielded, by a slow disk under another.
    slow = FileOAuthStorage(tmp_path / "network" / "oauth.json")
    files = [FileOAuthStorage(tmp_path / "home" / f"tokens{i}.json") for i in range(40)]
    in_fsync, release = stall_fsync(monkeypatch, first_only=True)
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow.save_token, RESOURCE, ISSUER, OAuthToken(access_token="a"))
            await trio.to_thread.run_sync(in_fsync.wait, IO_TIMEOUT)
            for store in files:  # (with 16 hashed locks, some would share the slow one)
                await store.save_token(RESOURCE, ISSUER, OAuthToken(access_token="b"))
            assert list(_FILE_LOCKS) == [os.path.realpath(slow.path)]
            release.set()
    assert not _FILE_LOCKS  # (dropped when unused)
    assert await slow.load_token(RESOURCE, ISSUER) == OAuthToken(access_token="a")


async def test_a_save_cancelled_while_it_waits_for_its_turn_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A refresh stores the rotated token it got while another save is on a slow disk,
    # and the client closes meanwhile: the save is made all the same.
    path = tmp_path / "oauth.json"
    store = FileOAuthStorage(path)
    in_fsync, release = stall_fsync(monkeypatch)
    token = OAuthToken(access_token="new", refresh_token="r2")
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.save_client, ISSUER, ClientCredentials(client_id="c"))
            await trio.to_thread.run_sync(in_fsync.wait, IO_TIMEOUT)

            async def cancelled_save() -> None:
                with trio.CancelScope() as mine:
                    mine.cancel()  # (it waits for the lock: save_client holds it)
                    await store.save_token(RESOURCE, ISSUER, token)

            nursery.start_soon(cancelled_save)
            await trio.testing.wait_all_tasks_blocked()
            release.set()
    assert await FileOAuthStorage(path).load_token(RESOURCE, ISSUER) == token

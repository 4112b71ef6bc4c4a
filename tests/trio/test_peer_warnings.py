"""Warnings about what a peer sends are bounded per session: the first
``MAX_PEER_WARNINGS`` at WARNING, one line that says the rest are only counted, and
the rest at DEBUG, so a peer sending junk for the life of a session floods no log."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from mcp_sansio import Role
from mcp_sansio._json import dumps
from mcp_trio import _blocking_http, _http_client, open_session
from mcp_trio._util import MAX_PEER_WARNINGS

from .helpers import handshaken, legacy_handshake, raw_pair, server_config

WHAT = "invalid message from the peer"


def _junk(i: int) -> bytes:
    # An answer no request can take (its result is no object): reported, not answered.
    return dumps({"jsonrpc": "2.0", "id": i, "result": "x"})


@pytest.mark.parametrize("role", ["client", "server"])
async def test_invalid_messages_warn_up_to_the_bound_then_are_counted_at_debug(
    role: Role, autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_trio")
    channel, peer = raw_pair("memory")
    async with handshaken(channel, peer, role) as session:
        for i in range(MAX_PEER_WARNINGS + 100):
            await peer.send_bytes(_junk(i))
        await trio.testing.wait_all_tasks_blocked()
        await peer.send({"jsonrpc": "2.0", "id": "alive", "method": "ping"})
        assert await peer.receive() == {"jsonrpc": "2.0", "id": "alive", "result": {}}
        assert not session.closed
    ours = [r for r in caplog.records if r.getMessage().startswith(WHAT)]
    warned = [r.getMessage() for r in ours if r.levelno == logging.WARNING]
    assert len(warned) == MAX_PEER_WARNINGS + 1
    assert warned[-1] == (
        f"{WHAT}: more than {MAX_PEER_WARNINGS} from this peer; further ones are only "
        "counted (at DEBUG)"
    )
    counted = [r.getMessage() for r in ours if r.levelno == logging.DEBUG]
    assert len(counted) == 100
    assert counted[-1].startswith(f"{WHAT} ({MAX_PEER_WARNINGS + 100}): Invalid Response")


async def test_each_session_has_its_own_bound(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(2):
        channel, peer = raw_pair("memory")
        async with handshaken(channel, peer, "client"):
            for i in range(MAX_PEER_WARNINGS):
                await peer.send_bytes(_junk(i))
            await trio.testing.wait_all_tasks_blocked()
    warned = [r for r in caplog.records if r.getMessage().startswith(WHAT)]
    assert len(warned) == 2 * MAX_PEER_WARNINGS
    assert all(r.levelno == logging.WARNING for r in warned)


class _Warned:
    """What the HTTP clients' ``log_warnings`` reads of a ``ClientResponse``."""

    def __init__(self, warnings: list[str]) -> None:
        self.warnings = warnings

    def take_warnings(self) -> list[str]:
        taken, self.warnings = self.warnings, []
        return taken


@pytest.mark.parametrize("client", ["trio", "blocking"])
def test_the_http_clients_log_the_server_s_words_clipped_on_one_line(
    client: str, caplog: pytest.LogCaptureFixture
) -> None:
    module = _http_client if client == "trio" else _blocking_http
    # (a core warning may quote the server: a tool's name, its x-mcp-header value)
    quoted = "dropped tool 'x" + "y" * 100_000 + "\nWARNING forged \x1b[2J': why"
    with caplog.at_level(logging.WARNING, logger="mcp_trio"):
        module.log_warnings(cast(Any, _Warned([quoted])))
    (record,) = caplog.records
    logged = record.getMessage()
    assert logged.startswith("HTTP: dropped tool 'xyyy")
    assert "\n" not in logged and "\x1b" not in logged and len(logged) < 1_000


PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"


@pytest.mark.parametrize(
    ("era", "asked"),
    [
        # 2026-07-28 removed ping; the official Python client still sends it.
        ("modern", {"method": "ping", "params": {"_meta": {PV: "2026-07-28", CC: {}}}}),
        # A legacy session: a method of the other era, one of a capability not declared,
        # and one the server never serves (a client's own).
        ("legacy", {"method": "server/discover"}),
        ("legacy", {"method": "prompts/list"}),
        ("legacy", {"method": "sampling/createMessage", "params": {"messages": []}}),
    ],
)
async def test_a_request_answered_method_not_found_is_no_warning(
    era: str, asked: dict[str, Any], autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # An answered request the server does not serve is not an invalid message: the
    # client asked, -32601 tells it; a warning each time would flood a server's log.
    caplog.set_level(logging.DEBUG, logger="mcp_trio")
    channel, peer = raw_pair("memory")
    async with open_session(channel, "server", connection_config=server_config()) as session:
        if era == "legacy":
            await legacy_handshake(session, peer)
        for i in range(3):
            await peer.send({"jsonrpc": "2.0", "id": i, **asked})
            answer = await peer.receive()
            assert answer["id"] == i and answer["error"]["code"] == -32601
    ours = [r for r in caplog.records if r.getMessage().startswith(WHAT)]
    assert ours == []
    noted = [r for r in caplog.records if r.getMessage().startswith("answered -32601")]
    assert len(noted) == 3 and all(r.levelno == logging.DEBUG for r in noted)
    assert asked["method"] in noted[0].getMessage()


async def test_a_client_still_warns_of_a_servers_request_it_did_not_declare(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # lifecycle.mdx: only use capabilities that were successfully negotiated. A server's
    # elicitation to a client that declared none breaks that: said, and answered -32601.
    channel, peer = raw_pair("memory")
    async with handshaken(channel, peer, "client"):
        asked = {"message": "?", "requestedSchema": {"type": "object", "properties": {}}}
        await peer.send(
            {"jsonrpc": "2.0", "id": "e", "method": "elicitation/create", "params": asked}
        )
        assert (await peer.receive())["error"]["code"] == -32601
    (warned,) = [r for r in caplog.records if r.getMessage().startswith(WHAT)]
    assert warned.levelno == logging.WARNING and "elicitation/create" in warned.getMessage()

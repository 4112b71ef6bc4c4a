"""How long ``open_client`` waits for a server that never answers, and what it says.

``timeout`` (the client's default per-request timeout) bounds ``initialize`` and a
pinned modern ``server/discover``, not the era probe (``probe_timeout``: a server slow to
start must not be taken for a legacy one); ``SessionConfig.handshake_timeout`` stays an
upper bound of the whole. The error names the method, the target and the handshake step.
Every test but the stdio one runs on the ``autojump_clock`` against a silent peer.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig
from mcp_trio import RequestTimeout, SessionConfig
from mcp_trio._channel import memory_channel_pair
from mcp_trio._client import open_client
from mcp_trio._client_targets import describe_target

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config


async def _open_silent(**kwargs: Any) -> tuple[RequestTimeout, float, list[bytes]]:
    """Open a client to a peer that reads everything and answers nothing: the error,
    how long it took, and what the peer received."""
    ours, theirs = memory_channel_pair()
    received: list[bytes] = []

    async def read() -> None:
        while True:
            try:
                received.append(await theirs.receive())
            except trio.EndOfChannel:  # the client closed its end
                return

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        with trio.fail_after(1000), pytest.raises(RequestTimeout) as failed:
            async with open_client(ours, **kwargs):
                pytest.fail("opened")  # pragma: no cover
        nursery.cancel_scope.cancel()
    return failed.value, trio.current_time() - started, received


@pytest.mark.parametrize(
    ("era", "took", "said"),
    [
        (
            "legacy",
            2,
            "initialize timed out after 2 s (request 1): while opening a MemoryChannel"
            " (a MessageChannel) (the legacy handshake)",
        ),
        (
            "modern",
            2,
            "server/discover timed out after 2 s (request 1): while opening a"
            " MemoryChannel (a MessageChannel) (the modern handshake)",
        ),
        # the era probe waits its own probe_timeout (10 s), then initialize timeout
        (
            "auto",
            12,
            "initialize timed out after 2 s (request 2): while opening a MemoryChannel"
            " (a MessageChannel) (the legacy handshake, after the era probe)",
        ),
    ],
)
async def test_timeout_bounds_each_handshake_request(
    era: str, took: float, said: str, autojump_clock: MockClock
) -> None:
    error, elapsed, received = await _open_silent(era=era, timeout=2)
    assert elapsed == pytest.approx(took)
    assert str(error) == said
    assert error.timeout == 2 and error.request_id == (2 if era == "auto" else 1)
    methods = [json.loads(message)["method"] for message in received]
    sent = {"legacy": ["initialize"], "modern": ["server/discover"]}
    # (a modern request still in flight is cancelled as the client closes)
    assert [m for m in methods if m != "notifications/cancelled"] == sent.get(
        era, ["server/discover", "initialize"]
    )


async def test_larger_timeout_leaves_probe_timeout(autojump_clock: MockClock) -> None:
    # probe_timeout (10 s) < timeout: the probe keeps its own bound
    error, elapsed, _ = await _open_silent(timeout=20)
    assert elapsed == pytest.approx(10 + 20)
    assert error.method == "initialize"


async def test_handshake_timeout_stays_an_upper_bound(autojump_clock: MockClock) -> None:
    for era, step, method in [
        ("modern", "the modern handshake", "server/discover"),
        ("auto", "the era probe", "server/discover"),
        ("legacy", "the legacy handshake", "initialize"),
    ]:
        config = SessionConfig(handshake_timeout=1.5)
        error, elapsed, _ = await _open_silent(era=era, timeout=5, config=config)
        assert elapsed == pytest.approx(1.5)
        assert str(error) == (
            f"{method} timed out (request 1): while opening a MemoryChannel (a MessageChannel)"
            f" ({step}); SessionConfig.handshake_timeout (1.5 s) bounds the whole handshake"
        )
    # no timeout at all: the pinned modern handshake waits handshake_timeout (30 s)
    error, elapsed, _ = await _open_silent(era="modern")
    assert elapsed == pytest.approx(30)
    assert error.method == "server/discover"


async def test_connection_config_timeout_bounds_the_probe_too(autojump_clock: MockClock) -> None:
    # The core's own request_timeout, given without timeout=: the core times initialize.
    error, elapsed, _ = await _open_silent(connection_config=ConnectionConfig(request_timeout=3))
    assert elapsed == pytest.approx(10 + 3)
    assert str(error).startswith("initialize timed out after 3 s (request 2): while opening")


async def test_connection_config_timeout_bounds_a_pinned_modern_discover(
    autojump_clock: MockClock,
) -> None:
    # The core times a pinned modern server/discover by its request_timeout, as it does
    # initialize: without timeout= it is not left to handshake_timeout (30 s).
    config = ConnectionConfig(request_timeout=3)
    error, elapsed, _ = await _open_silent(era="modern", connection_config=config)
    assert elapsed == pytest.approx(3)
    assert str(error) == (
        "server/discover timed out after 3 s (request 1): while opening a MemoryChannel"
        " (a MessageChannel) (the modern handshake)"
    )


async def test_answering_server_opens_under_a_small_timeout(autojump_clock: MockClock) -> None:
    for era in ("auto", "legacy", "modern"):
        async with open_client((make_handlers(), app_config()), era=era, timeout=0.5) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"


def test_describe_target() -> None:
    assert describe_target("python server.py") == "'python server.py'"
    assert describe_target(["python", "my server.py"]) == "\"python 'my server.py'\""
    assert describe_target("http://127.0.0.1:1/mcp") == "'http://127.0.0.1:1/mcp'"
    handlers, config = make_handlers(), app_config()
    assert describe_target((handlers, config)) == "an in-memory (Handlers, ConnectionConfig) server"
    assert describe_target(memory_channel_pair()[0]) == "a MemoryChannel (a MessageChannel)"

    class Server:
        pass

    assert describe_target(Server()) == "an in-memory Server"


async def test_stdio_error_names_the_command() -> None:
    # A real process (no autojump): it exits at once when its stdin closes.
    argv = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    with trio.fail_after(60), pytest.raises(RequestTimeout) as failed:
        async with open_client(argv, era="legacy", timeout=0.2):
            pytest.fail("opened")  # pragma: no cover
    assert str(failed.value).startswith("initialize timed out after 0.2 s (request 1): while")
    assert repr("import sys; sys.stdin.read()") in str(failed.value)  # (shlex.join quotes it)

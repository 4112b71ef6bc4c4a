"""``BlockingClient`` mirrors ``Client``: a client-wide ``on_progress`` (the default of
``call_tool``, ``read_resource`` and ``get_prompt``, which take one each too),
``notify``, ``subscribe_resource`` / ``unsubscribe_resource`` and ``set_roots``; and it
refuses locally what ``Client`` refuses (a name or URI that is not a string).

Over stdio (the spawned test server) and over TCP to a Trio server run in a thread of
this process, which records what it received.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from mcp_sansio import Era, LocalProtocolError, ProgressReceived
from mcp_trio import Client, StreamChannel, open_session
from mcp_trio._blocking import BlockingClient
from tests.trio.client_server_app import Recorder, make_handlers, server_config

ROOT = Path(__file__).resolve().parents[1]
APP = [sys.executable, "-m", "tests.blocking_server_app"]
TIMEOUT = 20.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")


def spawn(era: str, **options: Any) -> BlockingClient:
    options.setdefault("timeout", TIMEOUT)
    options.setdefault("handshake_timeout", TIMEOUT)
    options["era"] = era
    return BlockingClient.stdio([*APP, "stdio"], cwd=ROOT, stop_timeout=2.0, **options)


# ---------------------------------------------------------------------- the API


def test_the_methods_of_client_it_has() -> None:
    client = {name for name in dir(Client) if not name.startswith("_")}
    blocking = {name for name in dir(BlockingClient) if not name.startswith("_")}
    # session / aclose / tasks: the Trio client's own. (subscribe: both have it; the
    # blocking one reads notifications while a call waits.)
    rest = {"aclose", "call_tool_as_task", "log_level", "session", "task"}
    assert client - blocking == rest
    for name in ("stdio", "tcp", "http"):
        assert "on_progress" in inspect.signature(getattr(BlockingClient, name)).parameters
    for name in ("call_tool", "read_resource", "get_prompt"):
        assert "on_progress" in inspect.signature(getattr(BlockingClient, name)).parameters


# ---------------------------------------------------------------------- stdio


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_client_wide_on_progress(era: str) -> None:
    seen: list[float] = []
    with spawn(era, on_progress=lambda event: seen.append(event.progress)) as client:
        assert client.call_tool("slow", {"steps": 3}).text == "done"
        assert seen == [1, 2, 3]
        mine: list[ProgressReceived] = []
        assert client.call_tool("slow", {"steps": 2}, on_progress=mine.append).text == "done"
        assert [event.progress for event in mine] == [1, 2] and seen == [1, 2, 3]
        # (no progress from these; the callbacks are taken all the same)
        assert client.read_resource("file:///r0.txt", on_progress=mine.append).contents
        assert client.get_prompt("greet", {"name": "x"}, on_progress=mine.append).messages


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_set_roots(era: str) -> None:
    with spawn(era, roots=["file:///a"]) as client:
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///a"
        client.set_roots(["file:///b", "file:///c"])
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///b,file:///c"
        client.set_roots(lambda: ["file:///d"])
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///d"
        with pytest.raises(ValueError, match="file://"):
            client.set_roots(["https://example.com"])
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///d"
    with spawn(era) as client, pytest.raises(LocalProtocolError, match="roots="):
        client.set_roots(["file:///a"])


def test_subscriptions_are_legacy_only() -> None:
    with spawn("modern") as client:
        assert client.era is Era.MODERN
        for method in (client.subscribe_resource, client.unsubscribe_resource):
            with pytest.raises(LocalProtocolError, match="modern era"):
                method("file:///r0.txt")
            with pytest.raises(TypeError, match="resource URI must be a string"):
                method(3)  # type: ignore[arg-type]


def test_names_and_uris_that_are_no_strings_are_refused_before_sending() -> None:
    with spawn("legacy") as client:
        with pytest.raises(TypeError, match="tool name must be a string, not int 3"):
            client.call_tool(3, {})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="argument 'q' holds a value of type set"):
            client.call_tool("echo", {"q": {1}})
        with pytest.raises(TypeError, match="resource URI must be a string"):
            client.read_resource(b"file:///r0.txt")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="prompt name must be a string"):
            client.get_prompt(None, {})  # type: ignore[arg-type]
        assert client.connection.pending_requests() == ()
        assert client.call_tool("echo", {"text": "still"}).text == "still"


# ---------------------------------------------------------------------- TCP, recorded


class _Served:
    """A Trio server on 127.0.0.1 (newline-delimited JSON over TCP) in a thread."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.notes: list[str] = []
        self.port = 0
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        handlers = make_handlers(self.recorder)

        async def noted(ctx: Any) -> None:
            self.notes.append(ctx.method)

        for method in ("notifications/roots/list_changed", "notifications/custom"):
            handlers.set_notification_handler(method, noted)

        async def one(stream: trio.SocketStream) -> None:
            channel = StreamChannel.from_stream(stream)
            async with open_session(
                channel, "server", handlers=handlers, connection_config=server_config()
            ) as session:
                await session.wait_closed()

        with trio.CancelScope() as self._scope:
            async with trio.open_nursery() as nursery:
                serve = functools.partial(trio.serve_tcp, host="127.0.0.1")
                listeners = await nursery.start(serve, one, 0)
                self.port = listeners[0].socket.getsockname()[1]
                self._token = trio.lowlevel.current_trio_token()
                self._ready.set()

    def __enter__(self) -> _Served:
        self._thread.start()
        assert self._ready.wait(TIMEOUT)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._scope is not None and self._token is not None
        trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
        self._thread.join(TIMEOUT)


@pytest.fixture
def served() -> Iterator[_Served]:
    with _Served() as server:
        yield server


def test_tcp_legacy_subscriptions_roots_and_notify(served: _Served) -> None:
    updates: list[str] = []
    with BlockingClient.tcp(
        "127.0.0.1",
        served.port,
        era="legacy",
        timeout=TIMEOUT,
        roots=["file:///a"],
        on_notification=lambda event: updates.append(event.method),
    ) as client:
        client.subscribe_resource("file:///r1.txt")
        client.unsubscribe_resource("file:///r1.txt")
        assert served.recorder.subscribed == ["file:///r1.txt"]
        assert served.recorder.unsubscribed == ["file:///r1.txt"]
        client.set_roots(["file:///b"])
        client.notify("notifications/custom", {"x": 1})
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///b"
        # (the server handled both notifications before it answered the call)
        assert served.notes == ["notifications/roots/list_changed", "notifications/custom"]


def test_tcp_legacy_subscribe_blocks_share_one_resource_subscription(served: _Served) -> None:
    with BlockingClient.tcp("127.0.0.1", served.port, era="legacy", timeout=TIMEOUT) as client:
        with client.subscribe(resources=["file:///r1.txt"]) as outer:
            with client.subscribe(resources=["file:///r1.txt"]):
                assert served.recorder.subscribed == ["file:///r1.txt"]
            assert served.recorder.unsubscribed == []  # (the outer block still wants it)
            assert not outer.ended
        assert served.recorder.unsubscribed == ["file:///r1.txt"]


def test_tcp_modern_set_roots_sends_nothing(served: _Served) -> None:
    with BlockingClient.tcp(
        "127.0.0.1", served.port, era="modern", timeout=TIMEOUT, roots=["file:///a"]
    ) as client:
        client.set_roots(["file:///b"])  # (a modern server asks each time)
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///b"
    assert served.notes == []

"""The blocking client (``mcp_trio._blocking``) against real server processes.

Plain synchronous tests: no trio here. The servers come from ``blocking_server_app.py``
(run as ``python -m tests.blocking_server_app`` from the repository root).
"""

from __future__ import annotations

import ast
import copy
import errno
import inspect
import math
import pickle
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
import pytest

import mcp_trio._blocking
import mcp_trio._blocking_bytes
import mcp_trio._blocking_dial
import mcp_trio._blocking_http
import mcp_trio._blocking_subscriptions
import mcp_trio._client_common
import mcp_trio._client_skills
import mcp_trio._http_h11
import mcp_trio._process_group
import mcp_trio._text
import mcp_trio._validation
from mcp_sansio import (
    ConnectionConfig,
    Era,
    ErrorCode,
    ErrorData,
    LocalProtocolError,
    NotificationReceived,
    ProgressReceived,
    RemoteProtocolError,
)
from mcp_sansio import types as t
from mcp_trio import HandshakeFailed, InputRequiredError, McpError, ServerExited, SessionClosed
from mcp_trio._blocking import BlockingClient, _Options

ROOT = Path(__file__).resolve().parents[1]
APP = [sys.executable, "-m", "tests.blocking_server_app"]
TIMEOUT = 20.0  # seconds: an absolute bound on every wait of these tests

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")


def spawn(mode: str = "stdio", **options: Any) -> BlockingClient:
    options.setdefault("timeout", TIMEOUT)
    options.setdefault("handshake_timeout", TIMEOUT)
    options.setdefault("stop_timeout", 2.0)
    return BlockingClient.stdio([*APP, mode], cwd=ROOT, **options)


@pytest.fixture(scope="module", params=["modern", "legacy"])
def client(request: pytest.FixtureRequest) -> Iterator[BlockingClient]:
    with spawn(era="auto" if request.param == "modern" else "legacy") as opened:
        yield opened


# ---------------------------------------------------------------------- the basics


def test_handshake(client: BlockingClient) -> None:
    assert client.era in (Era.MODERN, Era.LEGACY)
    expected = "2026-07-28" if client.era is Era.MODERN else "2025-11-25"
    assert client.protocol_version == expected
    assert client.server_info == t.Implementation(name="client-test-server", version="2.0")
    tools = client.server_capabilities.tools
    assert tools is not None and tools.list_changed
    assert client.instructions == "Call add to add numbers."
    assert client.connection.era is client.era


def test_tools(client: BlockingClient) -> None:
    names = [tool.name for tool in client.list_tools()]  # three pages
    assert names[:3] == ["echo", "add", "fail"] and len(names) == 9
    assert client.call_tool("echo", {"text": "blocking"}).text == "blocking"
    assert client.call_tool("add", {"a": 2, "b": 2}).structured_content == {"sum": 4}
    assert client.call_tool("fail").is_error
    with pytest.raises(McpError) as info:
        client.call_tool("nope")
    assert info.value.code == ErrorCode.INVALID_PARAMS


def test_resources_prompts_completion(client: BlockingClient) -> None:
    assert [r.name for r in client.list_resources()] == ["r0", "r1", "r2"]
    assert client.list_resource_templates()[0].uri_template == "file:///{name}.txt"
    content = client.read_resource("file:///r2.txt").contents[0]
    assert isinstance(content, t.TextResourceContents)
    assert content.text == "contents of file:///r2.txt"
    assert [p.name for p in client.list_prompts()] == ["greet", "plain"]
    got = client.get_prompt("greet", {"who": "sync"})
    assert got.messages[0].content == t.TextContent(text="Hello sync")
    done = client.complete(t.PromptReference(name="greet"), "colour", "b")
    assert done.values == ["blue"]


def test_progress(client: BlockingClient) -> None:
    seen: list[ProgressReceived] = []
    result = client.call_tool("slow", {"steps": 3, "delay": 0.01}, on_progress=seen.append)
    assert result.text == "done"
    assert [event.progress for event in seen] == [1, 2, 3]


def test_timeout_cancels_and_the_client_goes_on(client: BlockingClient) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"^tools/call timed out after 0\.3 s \(request \d+\)$"):
        client.call_tool("sleep", {"seconds": 30}, timeout=0.3)
    assert time.monotonic() - started < 5
    assert client.call_tool("echo", {"text": "still here"}).text == "still here"
    assert client.connection.pending_requests() == ()


def test_progress_keeps_a_call_with_a_timeout_alive(client: BlockingClient) -> None:
    # Progress is asked for even without a callback: 1.5 s of steps 0.25 s apart, 1 s
    # timeout (reset by each progress report; wide margins: the machine may be busy).
    result = client.call_tool("slow", {"steps": 6, "delay": 0.25}, timeout=1.0)
    assert result.text == "done"


@pytest.mark.parametrize("timeout", [math.inf, 1e300])
def test_an_infinite_timeout_waits(client: BlockingClient, timeout: float) -> None:
    # It used to reach select() whole, which raised OverflowError.
    result = client.call_tool("slow", {"steps": 2, "delay": 0.01}, timeout=timeout)
    assert result.text == "done"


def test_ping_is_legacy_only(client: BlockingClient) -> None:
    if client.era is Era.LEGACY:
        client.ping()
    else:
        with pytest.raises(LocalProtocolError):
            client.ping()


# ---------------------------------------------------------------------- callbacks


def elicit(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"name": "Sync"})


def sample(params: t.CreateMessageRequestParams) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_callbacks(era: str) -> None:
    with spawn(
        era=era, on_elicitation=elicit, on_sampling=sample, roots=lambda: ["file:///w"]
    ) as client:
        result = client.call_tool("ask")
        assert result.text == "elicit=accept:Sync;sample=4;roots=file:///w"


def test_legacy_callback_failures_are_answered_as_errors() -> None:
    def broken(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        raise RuntimeError("no model")

    with spawn(era="legacy", on_sampling=broken, roots=["file:///a"]) as client:
        with pytest.raises(McpError):  # the server's handler failed on our -32603
            client.call_tool("ask", {"what": ["sample"]})
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///a"


@pytest.mark.parametrize(
    "error",
    [
        ErrorData(code=-32000, message="no", data={"not": {"json"}}),  # TypeError
        ErrorData(code=True, message="no"),  # the core's LocalProtocolError
    ],
)
def test_a_callback_error_that_cannot_be_written_is_answered_all_the_same(
    error: ErrorData,
) -> None:
    def odd(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        raise McpError(error)

    with spawn(era="legacy", on_sampling=odd, roots=["file:///a"]) as client:
        with pytest.raises(McpError):  # the server's handler failed on our -32603
            client.call_tool("ask", {"what": ["sample"]})
        assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///a"


def test_modern_round_limit_is_checked_before_the_user_is_asked() -> None:
    asked: list[str] = []

    def counting(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
        asked.append(params.message)
        return elicit(params)

    config = ConnectionConfig(max_input_rounds=1)  # the first question is already too many
    with spawn(era="modern", on_elicitation=counting, connection_config=config) as client:
        with pytest.raises(RemoteProtocolError, match="max_input_rounds is 1"):
            client.call_tool("ask", {"what": ["elicit"]})
        assert asked == []
        assert client.connection.pending_requests() == ()
        assert not client.connection._awaiting_input  # abandoned, not kept


def test_modern_without_a_callback() -> None:
    with (
        spawn(era="modern", capabilities={"sampling": {}}) as client,
        pytest.raises(InputRequiredError),
    ):
        client.call_tool("ask", {"what": ["sample"]})


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_logs_and_notifications(era: str) -> None:
    logs: list[tuple[str, Any]] = []
    notes: list[NotificationReceived] = []
    with spawn(
        era=era,
        on_log=lambda params: logs.append((params.level, params.data)),
        on_notification=notes.append,
    ) as client:
        client.call_tool("log")
        assert [level for level, _ in logs] == ["debug", "info", "error"]
        client.set_logging_level("error")
        client.call_tool("log")
        assert [level for level, _ in logs][3:] == ["error"]
        if era == "legacy":
            client.call_tool("notify", {"method": "notifications/tools/list_changed"})
            assert [n.method for n in notes] == ["notifications/tools/list_changed"]


# ---------------------------------------------------------------------- a sans-IO server


def test_against_a_server_written_with_the_core_alone() -> None:
    def name(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
        assert params.message == "Your name?"
        return t.ElicitResult(action="accept", content={"n": "Core"})

    with spawn("sansio", on_elicitation=name) as client:
        assert client.era is Era.MODERN
        assert client.server_info == t.Implementation(name="sansio-server", version="1")
        assert [tool.name for tool in client.list_tools()] == ["greet"]
        assert client.call_tool("greet").text == "hello Core (asked)"


# ---------------------------------------------------------------------- tools/call results


def listings(client: BlockingClient) -> str:
    """How many times the rogue server has been asked for its tools (this time too)."""
    description = client.list_tools()[0].description
    assert description is not None
    return description


NOT_INT = {"structuredContent": {"n": "not-int"}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_results_are_checked_against_the_tools_output_schema(era: str) -> None:
    # As mcp_trio.Client does (OutputSchemas): a schema is known once the tools are
    # listed, and a result is rejected only after one more listing.
    with spawn("rogue", era=era) as client:
        assert client.call_tool("typed", NOT_INT).structured_content == {"n": "not-int"}
        assert listings(client) == "listing 1"  # a call did not list the tools to learn
        mismatch = r"'typed': structuredContent does not match the tool's outputSchema: "
        with pytest.raises(RemoteProtocolError, match=mismatch + "structuredContent.n: exp"):
            client.call_tool("typed", NOT_INT)
        with pytest.raises(RemoteProtocolError, match="an outputSchema but the result has no"):
            client.call_tool("typed")
        assert listings(client) == "listing 4"  # each rejection listed again, once
        assert client.call_tool("typed", {"structuredContent": {"n": 1}}).structured_content
        assert client.call_tool("typed", {"isError": True, **NOT_INT}).is_error  # unchecked
        assert listings(client) == "listing 5"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_structured_content_is_an_object_where_the_revision_says_so(era: str) -> None:
    with spawn("rogue", era=era) as client:
        array = {"structuredContent": [1, 2]}  # of a tool whose schema is not even known
        if client.era is Era.MODERN:  # 2026-07-28: any JSON value
            assert client.call_tool("typed", array).structured_content == [1, 2]
            return
        expected = "must be an object in protocol version 2025-11-25, not an array"
        with pytest.raises(RemoteProtocolError, match=expected):
            client.call_tool("typed", array)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_tool_changed_unheard_of_is_listed_again_before_its_result_is_rejected(
    era: str,
) -> None:
    with spawn("rogue", era=era) as client:
        client.list_tools()
        client.call_tool("change", {"type": "string"})  # and the server says nothing
        assert client.call_tool("typed", NOT_INT).structured_content == {"n": "not-int"}
        assert listings(client) == "listing 3"  # listed again once, for the first result
        with pytest.raises(RemoteProtocolError, match="n: expected string, got integer"):
            client.call_tool("typed", {"structuredContent": {"n": 1}})
        assert listings(client) == "listing 5"  # once more before rejecting, no more


@pytest.mark.parametrize("lists", ["fail", "hang"])
def test_when_listing_again_fails_the_result_is_rejected(lists: str) -> None:
    with spawn("rogue", era="legacy") as client:
        client.list_tools()
        client.call_tool("change", {"lists": lists})
        started = time.monotonic()
        with pytest.raises(RemoteProtocolError, match="does not match the tool's outputSchema"):
            client.call_tool("typed", NOT_INT, timeout=0.3)  # the listing gets that long too
        assert time.monotonic() - started < TIMEOUT / 4
        assert client.connection.pending_requests() == ()  # the listing was cancelled
        client.call_tool("change", {"lists": "ok"})
        assert listings(client) == "listing 3"


def test_a_listing_takes_a_timeout() -> None:
    with spawn("rogue", era="legacy") as client:
        client.call_tool("change", {"lists": "hang"})
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="tools/list"):
            client.list_tools(timeout=0.3)
        assert time.monotonic() - started < TIMEOUT / 4
        assert client.connection.pending_requests() == ()  # cancelled on the wire
        client.call_tool("change", {"lists": "ok"})
        assert client.list_tools(timeout=5)


def test_a_tools_list_changed_notification_forgets_the_schemas() -> None:
    # Legacy: the server says the tools changed (before its result): the client knows
    # no schema, so it accepts the result as it is, without listing again.
    with spawn("rogue", era="legacy") as client:
        client.list_tools()
        told = {**NOT_INT, "listChanged": True}
        assert client.call_tool("typed", told).structured_content == {"n": "not-int"}
        assert client.call_tool("typed", NOT_INT).structured_content == {"n": "not-int"}
        assert listings(client) == "listing 2"


# ---------------------------------------------------------------------- failures


def test_server_crash_fails_the_call_with_its_exit_status() -> None:
    with spawn(stderr=subprocess.DEVNULL) as client:
        with pytest.raises(ServerExited) as info:
            client.call_tool("crash")
        assert info.value.returncode == 3
        with pytest.raises(ServerExited):
            client.list_tools()


def test_handshake_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="handshake") as caught:
        spawn("mute", era="legacy", handshake_timeout=0.3, stop_timeout=0.2)
    assert type(caught.value) is TimeoutError  # (no private type; copied and pickled)
    assert str(pickle.loads(pickle.dumps(copy.copy(caught.value)))) == str(caught.value)
    assert time.monotonic() - started < 5


def test_a_server_that_stops_reading() -> None:
    with spawn("deaf", write_timeout=0.3, stop_timeout=0.2) as client:
        started = time.monotonic()
        with pytest.raises(ServerExited, match="stopped reading"):
            client.call_tool("big", {"blob": "x" * 1_000_000})
        assert time.monotonic() - started < 5


def test_a_server_that_exits_at_once() -> None:
    with pytest.raises(ServerExited) as info:
        BlockingClient.stdio([sys.executable, "-c", "import sys; sys.exit(7)"], timeout=TIMEOUT)
    assert info.value.returncode == 7


def test_pinned_modern_against_a_legacy_only_server() -> None:
    # The sansio server is modern-only; a pinned legacy client gets -32601 for initialize.
    with pytest.raises(HandshakeFailed):
        spawn("sansio", era="legacy")


def test_an_era_read_from_a_client_can_be_passed_back() -> None:
    with spawn(era="legacy") as first:
        era = first.era
    with spawn(era=era) as again:
        assert again.era is Era.LEGACY


def test_close_is_idempotent_and_final() -> None:
    client = spawn()
    client.close()
    client.close()
    with pytest.raises(SessionClosed):
        client.list_tools()


# ---------------------------------------------------------------------- TCP


def test_tcp() -> None:
    with subprocess.Popen([*APP, "tcp"], cwd=ROOT, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            with BlockingClient.tcp("127.0.0.1", port, timeout=TIMEOUT) as client:
                assert client.call_tool("echo", {"text": "tcp"}).text == "tcp"
                assert [p.name for p in client.list_prompts()] == ["greet", "plain"]
        finally:
            server.terminate()


@pytest.fixture
def blackholes() -> Iterator[list[tuple[str, int]]]:
    """Three addresses on 127.0.0.1 that never answer a connection attempt: listeners
    whose accept queue (backlog 0) is full, so the kernel drops the SYNs."""
    with ExitStack() as stack:
        addresses = []
        for _ in range(3):
            listener = stack.enter_context(socket.create_server(("127.0.0.1", 0), backlog=0))
            address = listener.getsockname()
            stack.enter_context(socket.create_connection(address, timeout=TIMEOUT))
            addresses.append(address)
        yield addresses


def test_tcp_addresses_share_one_connect_timeout(
    blackholes: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name with three addresses that never answer: one ``connect_timeout`` in all,
    not one each; the name is looked up as a name, once."""
    looked_up: list[str] = []

    def getaddrinfo(host: str, port: object, *args: Any, flags: int = 0, **kw: Any) -> Any:
        if flags & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not a literal")
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", a) for a in blackholes]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        BlockingClient.tcp("mcp.test", 1, connect_timeout=1.0)
    assert time.monotonic() - started < 2.0
    assert looked_up == ["mcp.test"]


class _SlowClock:
    """``time`` for ``_blocking_dial`` whose ``monotonic()`` jumps ``lag`` seconds ahead
    at each name lookup: a slow resolver, with no real wait."""

    def __init__(self, lag: float) -> None:
        self.lag = lag
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def test_tcp_connect_timeout_counts_from_the_resolver_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A resolver slower than ``connect_timeout`` leaves the timeout whole for
    connecting: it is counted once the name is resolved (the resolver has none)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = listener.getsockname()
        clock = _SlowClock(lag=5.0)

        def getaddrinfo(host: str, port: object, *args: Any, flags: int = 0, **kw: Any) -> Any:
            if flags & socket.AI_NUMERICHOST:
                raise socket.gaierror(socket.EAI_NONAME, "not a literal")
            clock.offset += clock.lag
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", address)]

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(mcp_trio._blocking_dial, "time", clock)
        with mcp_trio._blocking_dial.dial("mcp.test", address[1], 1.0) as sock:
            assert sock.getpeername() == address


def test_tcp_with_no_time_still_tries_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``connect_timeout`` 0: one attempt all the same, and a ``TimeoutError`` that says
    what ran out if it was not connected at once (never "no address")."""
    attempts: list[object] = []
    real = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        attempts.append(address)
        real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = listener.getsockname()
        try:
            sock = mcp_trio._blocking_dial.dial("127.0.0.1", address[1], 0.0)
        except TimeoutError as exc:
            assert "timed out after 0 s (1 of its 1 addresses tried)" in str(exc)
        else:
            assert sock.getpeername() == address
            sock.close()
        assert attempts == [address]


def ipv6_off(monkeypatch: pytest.MonkeyPatch, port: int) -> list[tuple[Any, ...]]:
    """``mcp.test`` resolves to ``::1`` then ``127.0.0.1`` (on ``port``), and IPv6
    sockets cannot be made (``EAFNOSUPPORT``). Returns the resolver's list, to change."""
    real_socket = socket.socket
    infos: list[tuple[Any, ...]] = [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
    ]

    def getaddrinfo(host: str, port: object, *args: Any, flags: int = 0, **kw: Any) -> Any:
        assert host == "mcp.test"
        if flags & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not a literal")
        return infos

    def no_ipv6(family: int = -1, *args: Any, **kw: Any) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real_socket(family, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "socket", no_ipv6)
    return infos


def test_tcp_an_address_family_the_system_lacks_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IPv6 off (its sockets cannot be made: ``EAFNOSUPPORT``): the IPv4 address after
    the IPv6 one is tried, as for an address that refuses."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        ipv6_off(monkeypatch, port)
        with mcp_trio._blocking_dial.dial("mcp.test", port, TIMEOUT) as sock:
            assert sock.getpeername() == ("127.0.0.1", port)


# ---------------------------------------------------------------------- the proof


@pytest.mark.parametrize(
    "module",
    [
        mcp_trio._blocking,
        mcp_trio._blocking_bytes,
        mcp_trio._blocking_dial,
        mcp_trio._blocking_http,
        mcp_trio._blocking_subscriptions,
        mcp_trio._http_h11,
        mcp_trio._process_group,
        mcp_trio._client_common,
        mcp_trio._client_skills,
        mcp_trio._text,
        mcp_trio._validation,
    ],
)
def test_no_event_loop_is_imported(module: Any) -> None:
    """The blocking client's code imports the core and the standard library only (the
    shared exception classes of ``_errors_base`` aside, the validator of ``_validation``,
    the escaper of ``_text`` and the process-group signals of ``_process_group``);
    its HTTP transport (loaded on first use) h11 too, and the transport's configuration."""
    tree = ast.parse(Path(module.__file__).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or "").split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"mcp_sansio", "attrs", "._client_common"}
    allowed.update(("._errors_base", "._validation", "._client_skills", "._text"))
    allowed.update(("._blocking", "._blocking_bytes", "._blocking_dial", "._blocking_http"))
    allowed.update(("._blocking_subscriptions", "._process_group"))
    allowed.update(("._http_config", "._http_h11"))
    if module in (mcp_trio._blocking_http, mcp_trio._http_h11):
        allowed.add("h11")
    assert imported <= allowed, imported - allowed
    # No thread is started: _blocking's ``threading`` is a lock that makes a second
    # thread's call meanwhile an error (BlockingClient._in_use).
    threads = set() if module is mcp_trio._blocking else {"threading"}
    assert not imported & ({"trio", "asyncio", "anyio"} | threads)


def python_lines(code: str) -> list[str]:
    """The lines a fresh interpreter prints as it runs ``code`` (in the repository)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=TIMEOUT,
    ).stdout.split("\n")


def test_a_client_runs_where_trio_cannot_be_imported() -> None:
    """The real proof: with ``import trio`` made to fail, the client still loads and
    talks to a server (the server is a process of its own, on trio)."""
    code = f"""
import sys
sys.modules["trio"] = None  # (any import of trio now raises ImportError)
from mcp_trio._blocking import BlockingClient
from mcp_trio._errors_base import McpError
with BlockingClient.stdio({[*APP, "stdio"]!r}, timeout={TIMEOUT}) as client:
    print(client.call_tool("echo", {{"text": "no trio"}}).text)
    try:
        client.call_tool("nope")
    except McpError as exc:
        print(type(exc).__name__)
print(sorted(m for m in ("trio", "asyncio", "mcp_trio._errors") if sys.modules.get(m)))
"""
    out = python_lines(code)
    assert out[:3] == ["no trio", "McpError", "[]"]


@pytest.mark.parametrize("transport", ["stdio", "tcp", "http"])
def test_declaring_the_tasks_extension_is_refused(transport: str) -> None:
    """The blocking client has no task handling: a server would answer a declared
    client with a CreateTaskResult, which came back as an empty output. Refused before
    anything is started or connected."""
    caps: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    with pytest.raises(ValueError, match="does not handle tasks"):
        if transport == "stdio":
            BlockingClient.stdio(["/nonexistent/server"], capabilities=caps)
        elif transport == "tcp":
            BlockingClient.tcp("127.0.0.1", 1, capabilities=caps)
        else:
            BlockingClient.http("http://127.0.0.1:1/mcp", capabilities=caps)
    # Other extensions are declared as given.
    other: dict[str, Any] = {"extensions": {"example.com/x": {}}}
    with pytest.raises(OSError):
        BlockingClient.stdio(["/nonexistent/server"], capabilities=other)


@pytest.mark.parametrize("transport", ["stdio", "tcp", "http"])
def test_every_option_is_a_parameter_of_each_constructor(transport: str) -> None:
    """The constructors hand their ``locals()`` to ``_Options.of``, which picks the
    options by name: each must be a keyword parameter there, with the same default."""
    parameters = inspect.signature(getattr(BlockingClient, transport)).parameters
    for field in attrs.fields(_Options):
        parameter = parameters[field.name]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default == field.default, field.name


def test_the_package_hands_out_the_exceptions_without_trio() -> None:
    """``except mcp_trio.McpError`` in a blocking script loaded trio (~75 ms): the
    trio-free exceptions are now looked up in ``_errors_base``."""
    code = """
import sys
sys.modules["trio"] = None  # (any import of trio now raises ImportError)
from mcp_trio import BlockingClient, HandshakeFailed, InputRequiredError, McpError
from mcp_trio import LocalProtocolError, RemoteProtocolError, ServerExited, SessionClosed
import mcp_sansio
assert LocalProtocolError is mcp_sansio.LocalProtocolError
assert RemoteProtocolError is mcp_sansio.RemoteProtocolError
print(sorted(m for m in ("trio", "mcp_trio._errors") if sys.modules.get(m)))
"""
    out = python_lines(code)
    assert out[0] == "[]"


def test_the_exceptions_are_the_same_classes_everywhere() -> None:
    import trio  # noqa: PLC0415 -- (the Trio binding's side of the check)

    import mcp_trio  # noqa: PLC0415
    import mcp_trio._errors  # noqa: PLC0415
    import mcp_trio._errors_base  # noqa: PLC0415

    for name in (
        "McpError",
        "HandshakeFailed",
        "InputRequiredError",
        "SessionClosed",
        "LocalProtocolError",
        "RemoteProtocolError",
    ):
        assert getattr(mcp_trio, name) is getattr(mcp_trio._errors_base, name)
        assert getattr(mcp_trio._errors, name) is getattr(mcp_trio._errors_base, name)
    assert mcp_trio.ServerExited is mcp_trio._errors_base.ServerExited
    assert issubclass(mcp_trio.RequestTimeout, trio.TooSlowError)


# ---------------------------------------------------------------------- shared helpers


def _client_config(**changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "era": "auto",
        "protocol_version": None,
        "log_level": None,
        "client_info": None,
        "sampling": False,
        "elicitation": False,
        "roots": False,
        "capabilities": None,
        "timeout": None,
    }
    arguments.update(changes)
    base = arguments.pop("base", None)
    return mcp_trio._client_common.client_config(base, **arguments)


def test_client_config_sets_what_the_arguments_say_over_the_base() -> None:
    base = ConnectionConfig(max_message_size=1234, request_timeout=5.0)
    config = _client_config(
        base=base,
        protocol_version="2025-06-18",
        client_info={"name": "me", "version": "1"},
        sampling=True,
        roots=True,
        capabilities={"experimental": {"x": {}}},
    )
    assert config.era == "legacy"
    assert config.supported_versions == ("2025-06-18",)
    assert config.implementation == {"name": "me", "version": "1"}
    assert config.capabilities == {
        "sampling": {},
        "roots": {"listChanged": True},
        "experimental": {"x": {}},
    }
    assert config.max_message_size == 1234
    assert config.request_timeout == 5.0  # kept: no timeout given
    assert _client_config(base=base, timeout=7.0).request_timeout == 7.0
    default = _client_config(elicitation=True)
    assert default.supported_versions == ConnectionConfig().supported_versions
    assert default.capabilities == {"elicitation": {"form": {}}}
    assert default.implementation["name"] == "mcp-trio"


@pytest.mark.parametrize("era", list(Era))
def test_client_config_takes_an_era_as_its_name(era: Era) -> None:
    # The core and the HTTP pin (pinned_http_config) get the plain name either way.
    config = _client_config(era=era)
    assert config.era == era.value and type(config.era) is str


def test_client_config_checks_the_era_then_the_log_level() -> None:
    with pytest.raises(ValueError, match="era must be"):
        _client_config(era="both", log_level="loud")
    with pytest.raises(LocalProtocolError, match="unknown log level"):
        _client_config(log_level="loud", client_info=42)
    with pytest.raises(TypeError, match="client_info"):
        _client_config(client_info=42)


def test_named_and_request_params() -> None:
    common = mcp_trio._client_common
    assert common.named_params("add", None) == {"name": "add"}
    arguments = {"a": 1}
    params = common.named_params("add", arguments)
    assert params == {"name": "add", "arguments": {"a": 1}}
    assert params["arguments"] is not arguments
    assert common.request_params(None, Era.LEGACY, "debug") is None
    assert common.request_params(None, Era.MODERN, None) is None
    original = {"x": 1}
    copied = common.request_params(original, Era.LEGACY, "debug")
    assert copied == {"x": 1}
    assert copied is not original
    key = common.LOG_LEVEL_KEY
    assert common.request_params(None, Era.MODERN, "info") == {"_meta": {key: "info"}}
    assert common.request_params({"x": 1, "_meta": {"k": 2}}, Era.MODERN, "info") == {
        "x": 1,
        "_meta": {"k": 2, key: "info"},
    }


@pytest.mark.parametrize("command", ["", "   ", []])
def test_an_empty_command_is_a_clear_error(command: Any) -> None:
    with pytest.raises(ValueError, match="command is empty"):
        BlockingClient.stdio(command)


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, [1.0, math.nan], {"deep": [{"x": math.inf}]}, (math.nan,)],
)
def test_nan_and_infinities_in_arguments_are_refused(value: Any) -> None:
    # The JSON library would send null in their place: a different value, silently.
    with pytest.raises(ValueError, match="argument 'x' holds NaN or an infinity"):
        mcp_trio._client_common.named_params("t", {"ok": 1.5, "x": value})
    assert mcp_trio._client_common.named_params("t", {"x": [1.5, {"y": -0.0}], "s": "nan"})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("notadict", "arguments must be a mapping of names to values .*, not str 'notadict'"),
        ([("a", 1)], "arguments must be a mapping .*, not list"),
        ({1: 2}, "argument names must be strings, not 1"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_a_type_error(
    client: BlockingClient, arguments: Any, message: str
) -> None:
    # (it was an AttributeError from .items(), or a TypeError from the JSON encoder)
    with pytest.raises(TypeError, match=message):
        client.call_tool("echo", arguments)
    with pytest.raises(TypeError, match=message):
        client.get_prompt("greet", arguments)
    assert client.call_tool("echo", {"text": "still here"}).text == "still here"


def test_a_top_level_integer_beyond_64_bits_is_named(client: BlockingClient) -> None:
    # (it was the JSON library's "Integer exceeds 64-bit range", naming no argument)
    said = "^argument 'big' holds the integer 1.18e\\+21, beyond 64 bits, which JSON cannot"
    with pytest.raises(TypeError, match=said):
        client.call_tool("echo", {"text": "x", "big": 2**70})
    assert client.connection.pending_requests() == ()
    assert client.call_tool("echo", {"text": "still here"}).text == "still here"


@pytest.mark.parametrize(
    ("timeout", "error", "said"),
    [
        (0, ValueError, "timeout must be more than 0 seconds (or None for no timeout), not 0"),
        (-1, ValueError, "timeout must be more than 0 seconds (or None for no timeout), not -1"),
        ("5", TypeError, "timeout must be a number of seconds (or None), not str '5'"),
    ],
)
def test_a_timeout_that_is_no_positive_number_is_refused_naming_it(
    client: BlockingClient, timeout: Any, error: type[Exception], said: str
) -> None:
    # (0 raced the timer; "5" was "'>=' not supported ..."; the client's own timeout
    # was named as the core's request_timeout)
    with pytest.raises(error, match=f"^{re.escape(said)}$"):
        spawn(timeout=timeout)
    with pytest.raises(error, match=f"^{re.escape(said)}$"):
        client.call_tool("echo", {"text": "x"}, timeout=timeout)
    assert client.connection.pending_requests() == ()
    assert client.call_tool("echo", {"text": "still here"}).text == "still here"


def test_a_prompt_argument_that_is_no_string_is_refused_before_sending(
    client: BlockingClient,
) -> None:
    # prompts/get arguments are {[key: string]: string} in every revision; this server
    # does not check, and answered "Hello 3".
    with pytest.raises(TypeError, match=r"prompt arguments must be strings .* 'who' is int 3"):
        client.get_prompt("greet", {"who": 3})  # type: ignore[dict-item]
    got = client.get_prompt("greet", {"who": "3"})
    assert got.messages[0].content == t.TextContent(text="Hello 3")


def test_roots_are_file_uris_checked_before_the_server_starts(tmp_path: Any) -> None:
    marker = tmp_path / "started"
    with pytest.raises(ValueError, match=r"file://"):
        BlockingClient.stdio(
            [sys.executable, "-c", f"open({str(marker)!r}, 'w')"], roots=["https://x.example/"]
        )
    assert not marker.exists()  # refused before the program was spawned
    with spawn(era="legacy", roots=(r for r in ["file:///g"])) as client:
        for _ in range(2):  # a generator is taken once, so the second answer is the same
            assert client.call_tool("ask", {"what": ["roots"]}).text == "roots=file:///g"

"""The ``mcp-trio`` command, driven as a user would: ``python -m mcp_trio ...`` in a subprocess.

Every subprocess has a timeout; the servers it starts are on loopback, port 0. The
finer points (argument coercion, rendering, target resolution, the terminal form) are
tested in-process in ``test_cli_units.py``.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest
import trio

import mcp_trio
from mcp_sansio import Era

ROOT = Path(__file__).resolve().parents[1]
NOTES = "examples/notes_server.py"
PYTHON = shlex.quote(sys.executable)
STDIO_COMMAND = f"{PYTHON} -m mcp_trio run {NOTES}"
TIMEOUT = 30


def cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_trio", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def assert_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    """Exit status ``code``, nothing on stdout, one ``mcp-trio: error:`` line on stderr."""
    assert result.returncode == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mcp-trio: error: "), lines[0]
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ---------------------------------------------------------------------- basics


def test_version() -> None:
    result = cli("--version")
    assert (result.returncode, result.stdout) == (0, f"mcp-trio {mcp_trio.__version__}\n")


def test_no_command_is_a_usage_error() -> None:
    assert_error(cli(), 2, "a command is required")


def test_demo_runs_end_to_end() -> None:
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for section in (
        "Transport  Streamable HTTP at http://127.0.0.1:",
        "Client     modern era, protocol 2026-07-28",
        "== Tools (tools/list)",
        "search_notes(query: string, limit?: integer = 10)",
        "== Structured output: search_notes",
        '"title": "Structured concurrency"',
        "[server info] added note 5: Try mcp-trio",
        "== Progress: summarize_notes",
        "progress: 5/5 (100%) done",
        "== Elicitation: delete_note",
        "Deleted note 3, 'Groceries'.",
        "== Resource: notes://index",
        "== Resource template: notes://note/{id}",
        "review_note(note_id=...), typed '':  1, 2, 4, 5",
        "== Prompt: review_note",
        "user: [resource: notes://note/4, text/markdown]",
        "== The same server, legacy era (initialize)",
        "protocol 2025-11-25",
        "== Try it yourself",
        "run examples/notes_server.py --transport http --port 8000",
        "npx @modelcontextprotocol/inspector ",
        '"mcpServers"',
    ):
        assert section in out, section
    assert result.stderr == ""


def test_demo_in_memory() -> None:
    result = cli("demo", "--in-memory")
    assert result.returncode == 0, result.stderr
    assert "Transport  in memory (forced with --in-memory)" in result.stdout
    assert "Deleted note 3, 'Groceries'." in result.stdout


# ---------------------------------------------------------------------- list


def test_list_a_server_file_in_memory() -> None:
    result = cli("list", NOTES)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("Server notes 1.0, protocol 2026-07-28 (modern era)\n")
    for expected in (
        "Tools (4)",
        "  add_note(title: string, body: string, tags?: string[] = [])",
        "      Add a note.",
        "Resources (1)\n  notes://index  All notes (text/markdown)",
        "Resource templates (1)\n  notes://note/{id}  A note (text/markdown)",
        "Prompts (1)\n  review_note(note_id)  Review a note",
    ):
        assert expected in out, expected


def test_list_a_stdio_command() -> None:
    result = cli("list", STDIO_COMMAND, "prompts", "--era", "legacy")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Server notes 1.0, protocol 2025-11-25 (legacy era)",
        "",
        "Prompts (1)",
        "  review_note(note_id)  Review a note",
        "      Ask the model to review a note and suggest a better title and tags.",
    ]


def test_list_raw_is_json_of_the_kinds_asked() -> None:
    result = cli("list", NOTES, "resources", "--raw")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert set(listing) == {"resources", "resourceTemplates"}
    assert listing["resources"][0]["uri"] == "notes://index"
    assert listing["resourceTemplates"][0]["uriTemplate"] == "notes://note/{id}"


# ---------------------------------------------------------------------- call


def test_call_with_args_prints_structured_content() -> None:
    result = cli("call", NOTES, "search_notes", "--arg", "query=python", "--arg", "limit=1")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert (found["total"], [hit["id"] for hit in found["hits"]]) == (2, [1])


def test_call_args_follow_the_schema() -> None:
    result = cli(
        "call",
        NOTES,
        "add_note",
        "--arg",
        "title=123",
        "--arg",
        "body=true",
        "--arg",
        'tags=["A", "b"]',
        "--raw",
    )
    assert result.returncode == 0, result.stderr
    raw = json.loads(result.stdout)
    assert raw["structuredContent"] == {"id": 5, "title": "123", "body": "true", "tags": ["a", "b"]}
    assert raw["content"][0]["type"] == "text"
    assert "[server info] added note 5: 123" in result.stderr


def test_call_shows_progress_as_lines_without_a_terminal() -> None:
    result = cli("call", NOTES, "summarize_notes", "--arg", "tag=python")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("2 notes, tags: mcp, python, trio\n- #1 Structured")
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress:")]
    assert progress == [
        "progress: 0/2 (0%) reading 'Structured concurrency'",
        "progress: 1/2 (50%) reading 'Sans-IO'",
        "progress: 2/2 (100%) done",
    ]


def test_call_quiet() -> None:
    result = cli("call", NOTES, "summarize_notes", "-a", "tag=home", "-q")
    assert result.returncode == 0
    assert result.stderr == ""


def test_call_a_stdio_command() -> None:
    args = ("delete_note", "--era", "modern", "-a", "note_id=2", "-a", "confirm=true")
    result = cli("call", STDIO_COMMAND, *args)
    assert (result.returncode, result.stdout) == (0, "Deleted note 2, 'MCP in one paragraph'.\n")


def _read_terminal(fd: int, until: bytes | None, deadline: float) -> bytes:
    seen = b""
    while time.monotonic() < deadline and (until is None or until not in seen):
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: every process on the terminal has exited
                break
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_call_on_a_terminal_asks_the_user() -> None:
    pty = pytest.importorskip("pty")
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "mcp_trio", "call", NOTES, "delete_note", "-a", "note_id=3"]
    with subprocess.Popen(argv, cwd=ROOT, stdin=terminal, stdout=terminal, stderr=terminal) as proc:
        os.close(terminal)
        try:
            deadline = time.monotonic() + TIMEOUT
            question = _read_terminal(controller, b"[y/n]: ", deadline)
            assert b"The server asks: Delete note 3, 'Groceries'?" in question
            os.write(controller, b"y\n")
            answer = _read_terminal(controller, None, deadline)
            assert proc.wait(timeout=TIMEOUT) == 0
        finally:
            proc.kill()
            os.close(controller)
    assert b"Deleted note 3, 'Groceries'." in answer


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("list", "no/such/server.py"), 1, "no such file: no/such/server.py"),
        (("list", "ftp://example.com/mcp"), 2, "unsupported URL 'ftp://example.com/mcp'"),
        (("call", NOTES, "search_note"), 1, "unknown tool 'search_note'; did you mean"),
        (("run", NOTES, "--port", "70000"), 2, "a port is 0 to 65535"),
        (("run", NOTES, "--allow-host", "x"), 2, "--allow-host: for --transport http or ws only"),
        (("list", NOTES, "-H", "A: b"), 2, "--header is for http(s):// and ws(s):// targets"),
        (("list", NOTES, "--header", "no colon"), 2, "not a header 'NAME: VALUE'"),
        (
            ("list", "http://127.0.0.1:9/mcp", "-H", "Host: x"),
            2,
            "header 'Host' is written by the HTTP transport itself",
        ),
        (
            ("call", NOTES, "search_notes", "--arg", "limit=123456789012345678901234"),
            2,
            "the arguments cannot be sent as JSON: Integer exceeds 64-bit range",
        ),
    ],
)
def test_errors_are_one_line(args: tuple[str, ...], code: int, fragment: str) -> None:
    assert_error(cli(*args), code, fragment)


def test_tool_error_prints_nothing_on_stdout() -> None:
    result = cli("call", NOTES, "delete_note", "-a", "note_id=1")
    assert_error(result, 1, "call again with confirm=true")
    assert result.stdout == ""


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_connection_refused(scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{free_port()}/mcp"
    assert_error(cli("list", url), 1, f"cannot connect to {url}")


def test_a_program_that_is_not_an_mcp_server() -> None:
    echo = f"{PYTHON} -c \"import sys; [print(line, end='', flush=True) for line in sys.stdin]\""
    assert_error(cli("list", echo), 1, "the handshake failed")
    verbose = cli("list", echo, "--verbose")
    assert verbose.returncode == 1
    assert "invalid message from the peer" in verbose.stderr


def test_a_server_that_dies_at_start() -> None:
    command = f"{PYTHON} -c \"raise SystemExit('no config found')\""
    assert_error(cli("list", command), 1, "(exit status 1): no config found")


# ---------------------------------------------------------------------- run


async def test_run_stdio_serves_open_client(tmp_path: Path) -> None:
    # A server that prints at import and in a tool: stdout must stay the protocol's.
    app = tmp_path / "noisy.py"
    app.write_text(
        "from mcp_trio import Server\n"
        "print('hello from the import')\n"
        "app = Server('noisy')\n"
        "@app.tool()\n"
        "def shout(text: str) -> str:\n"
        "    print('hello from the tool')\n"
        "    return text.upper()\n"
    )
    stderr = bytearray()
    argv = [sys.executable, "-m", "mcp_trio", "run", f"{app}:app"]
    with trio.fail_after(TIMEOUT):
        async with mcp_trio.open_client(argv, stderr=stderr.extend) as client:
            assert (await client.call_tool("shout", {"text": "hi"})).text == "HI"
    assert b"hello from the import" in stderr
    assert b"hello from the tool" in stderr


_SLOW_APP = (
    "import trio\n"
    "from mcp_trio import Server\n"
    "app = Server('slow')\n"
    "@app.tool()\n"
    "async def slow(seconds: float) -> str:\n"
    "    await trio.sleep(seconds)\n"
    "    return 'slept'\n"
)
_SCRIPT = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "script", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.3}},
    },
    {"jsonrpc": "2.0", "id": 3, "method": "ping"},
]


@pytest.mark.parametrize(
    ("stdin", "last_newline"), [("file", True), ("pipe", True), ("file", False)]
)
def test_run_stdio_answers_a_script_to_its_end(
    tmp_path: Path, stdin: str, last_newline: bool
) -> None:
    """`mcp-trio run app.py < requests.jsonl`: the end of input is the client's
    shutdown, and requests still running are answered within the grace period; a last
    line without its newline is a request too."""
    app = tmp_path / "slow.py"
    app.write_text(_SLOW_APP)
    script = tmp_path / "requests.jsonl"
    text = "\n".join(json.dumps(message) for message in _SCRIPT)
    script.write_text(text + "\n" if last_newline else text)
    argv = [sys.executable, "-m", "mcp_trio", "run", f"{app}:app"]
    if stdin == "file":  # a regular file: epoll cannot watch it
        with script.open("rb") as source:
            result = subprocess.run(
                argv, cwd=ROOT, stdin=source, capture_output=True, timeout=TIMEOUT, check=False
            )
    else:
        result = subprocess.run(
            argv,
            cwd=ROOT,
            input=script.read_bytes(),
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    answers = {a["id"]: a for a in map(json.loads, result.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3]
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "slept"}]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_run_stdio_the_example(era: Literal["legacy", "modern"]) -> None:
    argv = [sys.executable, "-m", "mcp_trio", "run", NOTES]
    with trio.fail_after(TIMEOUT):
        async with mcp_trio.open_client(argv, cwd=ROOT, era=era) as client:
            assert client.era is Era(era)
            found = await client.call_tool("search_notes", {"query": "groceries"})
            assert found.structured_content["total"] == 1


async def _serve_and_read_url(
    args: list[str], *, stdout_closed: bool = False
) -> tuple[trio.Process, str, bytearray]:
    argv = [sys.executable, "-m", "mcp_trio", "run", NOTES, *args]
    if stdout_closed:  # started with no fd 1 at all (`... 1>&-`): sys.stdout is None
        argv = ["sh", "-c", 'exec "$0" "$@" 1>&-', *argv]
    process = await trio.lowlevel.open_process(
        argv,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=None if stdout_closed else subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    seen = bytearray()
    while (found := re.search(rb"(http|ws)://\S+", seen)) is None:
        chunk = await process.stderr.receive_some()
        assert chunk, f"the server exited: {seen.decode()}"
        seen += chunk
    return process, found.group().decode(), seen


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_run_over_the_network(transport: str, signum: signal.Signals) -> None:
    with trio.fail_after(TIMEOUT):
        process, url, seen = await _serve_and_read_url(["--transport", transport, "--port", "0"])
        try:
            assert re.match(rf"{transport}://127\.0\.0\.1:\d+/mcp$", url)
            assert not url.endswith(":0/mcp")
            async with mcp_trio.open_client(url) as client:
                summary = await client.call_tool("summarize_notes", {"tag": "home"})
                assert summary.text.startswith("1 notes")
            process.send_signal(signum)
            assert await process.wait() == 0
        finally:
            process.kill()
            await process.wait()
        assert process.stderr is not None and process.stdout is not None
        while chunk := await process.stderr.receive_some():
            seen += chunk
        assert await process.stdout.receive_some() == b""
    assert "Traceback" not in seen.decode()
    # Both transports say they stop (WebSocket said nothing).
    assert seen.decode().endswith("mcp-trio: shutting down\n")


async def test_run_over_the_network_needs_no_stdout() -> None:
    with trio.fail_after(TIMEOUT):
        process, url, seen = await _serve_and_read_url(
            ["--transport", "http", "--port", "0"], stdout_closed=True
        )
        try:
            async with mcp_trio.open_client(url) as client:
                summary = await client.call_tool("summarize_notes", {"tag": "home"})
                assert summary.text.startswith("1 notes")
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
        finally:
            process.kill()
            await process.wait()
        assert process.stderr is not None
        while chunk := await process.stderr.receive_some():
            seen += chunk
    assert "Traceback" not in seen.decode()


async def test_run_http_on_a_custom_path() -> None:
    with trio.fail_after(TIMEOUT):
        process, url, _ = await _serve_and_read_url(
            ["--transport", "http", "--port", "0", "--path", "/notes"]
        )
        try:
            assert url.endswith("/notes")
            async with mcp_trio.open_client(url, era="legacy") as client:
                assert len(await client.list_tools()) == 4
        finally:
            process.terminate()
            assert await process.wait() == 0


async def test_run_http_accepts_the_hosts_it_is_told_to() -> None:
    # DNS-rebinding protection: only localhost's names by default (421 for the rest).
    with trio.fail_after(TIMEOUT):
        args = ["--transport", "http", "--port", "0", "--allow-host", "mcp.example.com"]
        process, url, _ = await _serve_and_read_url(args)
        try:
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            statuses = []
            for host in ("mcp.example.com", "mcp.example.com:8000", "evil.example"):
                stream = await trio.open_tcp_stream("127.0.0.1", port)
                request = f"GET /mcp HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                await stream.send_all(request.encode())
                head = await stream.receive_some()
                statuses.append(int(head.split(b" ", 2)[1]))
                await stream.aclose()
            assert statuses[2] == 421 and 421 not in statuses[:2], statuses  # any port
        finally:
            process.kill()
            await process.wait()


def test_run_on_a_port_in_use() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("run", NOTES, "--transport", "http", "--port", str(port))
    assert_error(result, 1, f"cannot listen on 127.0.0.1:{port}")


async def test_run_stdio_exits_cleanly_on_sigterm() -> None:
    with trio.fail_after(TIMEOUT):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "mcp_trio", "run", NOTES],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
            b'"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
        )
        answer = b""
        while b"\n" not in answer:
            answer += await process.stdout.receive_some()
        assert json.loads(answer)["result"]["serverInfo"]["name"] == "notes"
        process.send_signal(signal.SIGTERM)
        assert await process.wait() == 0
        assert await process.stdout.receive_some() == b""
        # Not a terminal: it announced nothing, so it does not announce its end.
        assert process.stderr is not None
        told = b""
        while chunk := await process.stderr.receive_some():
            told += chunk
        assert b"shutting down" not in told


def test_what_a_served_file_prints_goes_to_stderr(tmp_path: Path) -> None:
    app = tmp_path / "chatty.py"
    app.write_text(
        "import mcp_trio\n"
        "server = mcp_trio.Server('chatty')\n"
        "@server.tool()\n"
        "def hello() -> dict[str, int]:\n"
        "    print('debugging output')\n"
        "    return {'n': 1}\n"
    )
    result = cli("call", str(app), "hello", "--raw")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["structuredContent"] == {"n": 1}  # stdout: JSON alone
    assert "debugging output" in result.stderr
    listed = cli("list", str(app), "tools")
    assert listed.returncode == 0 and "hello" in listed.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("demo", "--in-memory"),
        ("list", NOTES),
        ("list", NOTES, "--raw"),
        ("call", NOTES, "search_notes", "--arg", "query=python"),
    ],
)
def test_a_reader_that_went_away_stops_every_command_quietly(args: tuple[str, ...]) -> None:
    """`mcp-trio ... | head`: the reader closed its end before we wrote. Every command
    stops at the first write with exit status 1 and nothing on stderr (no "Broken
    pipe" line, no traceback)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: EPIPE, every time
    try:
        result = subprocess.run(
            [sys.executable, "-m", "mcp_trio", *args],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, "")


_NOISY_IMPORT = """
import os, subprocess, sys
import mcp_trio

print("printed at import")
os.write(1, b"written to fd 1 at import\\n")
subprocess.run([sys.executable, "-c", "print('a child at import')"], check=True)
server = mcp_trio.Server("noisy")
"""

_NOISY_DIRECT = """
import sys
import trio
import mcp_trio

print("printed before serving, still buffered")
trio.run(mcp_trio.Server("noisy").serve_stdio)
"""


@pytest.mark.parametrize("how", ["run", "direct"])
def test_nothing_but_messages_reaches_stdout(tmp_path: Path, how: str) -> None:
    """stdio: the server MUST NOT write anything to stdout that is not an MCP message,
    whatever the module does while imported (below Python too) or left buffered."""
    app = tmp_path / "noisy.py"
    app.write_text(_NOISY_IMPORT if how == "run" else _NOISY_DIRECT)
    argv = (
        [sys.executable, "-m", "mcp_trio", "run", str(app)]
        if how == "run"
        else [
            sys.executable,
            str(app),
        ]
    )
    script = "".join(json.dumps(message) + "\n" for message in _SCRIPT[:2])
    # (buffered stdout, as by default: the print is still in Python's buffer at serving)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    result = subprocess.run(
        argv,
        cwd=ROOT,
        input=script.encode(),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [1], result.stdout
    noise = result.stderr.decode()
    expected = ["printed at import", "written to fd 1", "a child at import"]
    for text in expected if how == "run" else ["printed before serving"]:
        assert text in noise, noise

"""The pieces of ``mcp-trio``, in this process: ``main()`` and its usage errors, target
resolution, ``--arg`` values, rendering, the progress display and the terminal form."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ErrorData, ProgressReceived, structure
from mcp_sansio import types as t
from mcp_trio import (
    McpError,
    RequestTimeout,
    Server,
    ServerExited,
    SessionClosed,
    ToolOutput,
    _cli_demo,
    _cli_run,
)
from mcp_trio._cli import main, parse_args
from mcp_trio._cli_client import arg_value, parse_arguments
from mcp_trio._cli_demo import demo
from mcp_trio._cli_form import MAX_TRIES, fill_form
from mcp_trio._cli_render import (
    ProgressDisplay,
    readable_json,
    render_listing,
    render_tool_output,
    tool_signature,
)
from mcp_trio._cli_target import client_target, load_server, split_spec
from mcp_trio._cli_util import CliError, UsageError, describe, one_line
from mcp_trio._client import open_client
from mcp_trio._util import is_url

from .trio.test_http_support import served_in_thread, start_proxied

ROOT = Path(__file__).resolve().parents[1]
NOTES = str(ROOT / "examples" / "notes_server.py")


@pytest.fixture(autouse=True)
def _isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a target adds to sys.path and sys.modules: undo it after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if not name.startswith(("mcp_trio", "mcp_sansio", "trio", "_")) or name.startswith(
            "_mcp_trio_target_"
        ):
            del sys.modules[name]


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------------- main()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "a command is required"),
        (("frobnicate",), "invalid choice: 'frobnicate'"),
        (("list",), "the following arguments are required: TARGET"),
        (("call", "x.py", "t", "--timeout", "soon"), "not a number of seconds: 'soon'"),
        (("call", "x.py", "t", "--timeout", "-1"), "the timeout must be 0 or more seconds"),
        (("call", "x.py", "t", "--timeout", "nan"), "not 'nan'"),
        (("run", "x.py", "--port", "http"), "not a port number: 'http'"),
        (("run", "x.py", "--path", "mcp"), "the path must start with '/'"),
        (("run", "x.py", "--transport", "carrier-pigeon"), "invalid choice"),
        (("run", "x.py", "--port", "8001"), "--port needs --transport http or ws"),
        (("run", "x.py", "--host", "0.0.0.0", "--path", "/m"), "--host, --path need --transport"),
        (("list", "x.py", "--era", "medieval"), "invalid choice: 'medieval'"),
        (("list", "   "), "the target is empty"),
        (("list", "gopher://h/mcp"), "unsupported URL 'gopher://h/mcp'"),
        (("list", NOTES, "widgets"), "unknown KIND 'widgets'"),
        (("call", NOTES), "the following arguments are required: TOOL"),
        (("call", NOTES, "t", "--json", "[1]"), "--json must be a JSON object"),
        (("call", NOTES, "t", "--json", "{"), "--json is not valid JSON"),
        (("call", NOTES, "t", "--arg", "query"), "--arg needs KEY=VALUE, not 'query'"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragment: str
) -> None:
    code, out, err = run_main(capsys, *args)
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith("mcp-trio: error: ") and fragment in line


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "--help")
    assert code == 0
    for command in ("run", "list", "call", "demo"):
        assert re.search(rf"^\s+{command}\s", out, re.M), command
    code, out, _ = run_main(capsys, "call", "--help")
    assert code == 0
    assert "--arg" in out and "examples:" in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("list", f"{NOTES}:nothing"), "has no attribute 'nothing'"),
        (("call", NOTES, "search_notes", "-a", "query=x", "-a", "limit=0"), "must be >= 1, got 0"),
        (("run", NOTES, "--transport", "ws", "--path", "/x"), "serves /mcp only, not '/x'"),
        (("run", "no_such_module_here"), "no such module: no_such_module_here"),
        (("call", "no-such-program-xyz --flag", "t"), "No such file or directory"),
    ],
)
def test_runtime_errors(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fragment: str
) -> None:
    code, out, err = run_main(capsys, *args)
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    assert line.startswith("mcp-trio: error: ") and fragment in line


def test_call_json_then_args_override(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--json", '{"query": "zebra", "limit": 5}', "-a", "query=mcp", "-q")
    code, out, err = run_main(capsys, "call", NOTES, "search_notes", *args)
    assert (code, err) == (0, "")
    assert json.loads(out)["query"] == "mcp"


def test_list_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "list", NOTES, "tool", "--era", "legacy")
    assert code == 0
    assert out.splitlines()[:3] == [
        "Server notes 1.0, protocol 2025-11-25 (legacy era)",
        "",
        "Tools (4)",
    ]


def test_list_a_kind_the_server_lacks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    app = tmp_path / "tools_only.py"
    app.write_text(
        "from mcp_trio import Server\nserver = Server('t')\n@server.tool()\ndef a() -> None: ...\n"
    )
    code, _, err = run_main(capsys, "list", str(app), "prompts")
    assert (code, err) == (1, "mcp-trio: error: the server offers no prompts\n")
    code, out, _ = run_main(capsys, "list", str(app))
    assert code == 0 and "Prompts" not in out and "Tools (1)\n  a()" in out


def test_list_a_server_with_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    app = tmp_path / "empty.py"
    app.write_text("from mcp_trio import Server\nserver = Server('empty')\n")
    code, out, _ = run_main(capsys, "list", str(app))
    assert code == 0
    assert out.endswith("(the server offers no tools, resources or prompts)\n")


def test_a_tool_error_with_raw(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "call", NOTES, "delete_note", "-a", "note_id=7", "--raw")
    assert code == 1
    assert '"isError": true' in out
    assert err == "mcp-trio: error: tool 'delete_note' reported an error: There is no note 7.\n"


def test_a_tool_with_no_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    app = tmp_path / "quiet.py"
    app.write_text(
        "from mcp_trio import Server\nserver = Server('q')\n"
        "@server.tool()\ndef nothing() -> None: ...\n"
    )
    assert run_main(capsys, "call", str(app), "nothing") == (0, "", "")


def test_a_bug_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("mcp_trio._cli.trio.run", broken)
    with pytest.raises(ZeroDivisionError):
        main(["list", NOTES])


def test_a_client_command_runs_from_a_thread_other_than_the_main_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (An app's or a test's worker thread: SIGTERM is watched on the main thread only,
    # where signals arrive; elsewhere Trio refuses the receiver, and main() crashed.)
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(main(["list", NOTES]))
        except BaseException as exc:  # (reported to the test)
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert outcome == [0]
    assert "add_note" in capsys.readouterr().out


def test_interrupted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("mcp_trio._cli.trio.run", interrupted)
    assert run_main(capsys, "list", NOTES) == (130, "", "mcp-trio: error: interrupted\n")


async def test_demo_falls_back_to_memory(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    async def no_http(*args: Any, **kwargs: Any) -> None:
        raise ImportError("no HTTP here")

    monkeypatch.setattr(Server, "serve_http", no_http)
    out = io.StringIO()
    assert await demo(out) == 0
    transcript = out.getvalue()
    expected = "Transport  in memory (Streamable HTTP did not work here: ImportError: no HTTP here)"
    assert expected in transcript
    assert "Deleted note 3, 'Groceries'." in transcript


# ---------------------------------------------------------------------- targets


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("server.py", ("server.py", None)),
        ("server.py:app", ("server.py", "app")),
        ("pkg.mod:factory.make", ("pkg.mod", "factory.make")),
        ("C:\\servers\\x.py", ("C:\\servers\\x.py", None)),
        ("a:b:c", ("a:b", "c")),
        (":app", (":app", None)),
    ],
)
def test_split_spec(spec: str, expected: tuple[str, str | None]) -> None:
    assert split_spec(spec) == expected


def test_client_targets(tmp_path: Path) -> None:
    assert client_target(" http://h/mcp ") == "http://h/mcp"
    assert client_target("WSS://h/MCP") == "wss://h/MCP"
    spaced = tmp_path / "my servers" / "notes app.py"
    spaced.parent.mkdir()
    spaced.write_text("from mcp_trio import Server\nserver = Server('spaced')\n")
    loaded = client_target(str(spaced))
    assert isinstance(loaded, Server) and loaded.name == "spaced"
    assert client_target("python -m srv") == "python -m srv"
    assert isinstance(client_target(NOTES), Server)
    assert isinstance(client_target("mcp_trio.demo:create_server"), Server)
    program = tmp_path / "srv"
    program.write_text("#!/bin/sh\n")
    assert client_target(str(program)) == str(program)
    assert client_target(Path(sys.executable).name) == Path(sys.executable).name
    with pytest.raises(CliError, match="no such file"):
        client_target(str(tmp_path / "missing"))
    with pytest.raises(CliError, match="is not a file, a module, a command or a URL"):
        client_target("no_such_thing_anywhere")
    with pytest.raises(UsageError):
        client_target("gopher://h")


def test_a_bare_word_is_the_program_on_path_not_a_file_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The security review: `mcp-trio list notes` in a checkout holding notes.py imported
    # that file (its code ran) though the program `notes` was on PATH.
    bin_dir, repo = tmp_path / "bin", tmp_path / "repo"
    bin_dir.mkdir()
    repo.mkdir()
    program = bin_dir / "shadowed_notes"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    ran = tmp_path / "ran"
    (repo / "shadowed_notes.py").write_text(
        f"open({str(ran)!r}, 'w').close()\n"
        "from mcp_trio import Server\nserver = Server('from-the-checkout')\n"
    )
    (repo / "here").write_text("#!/bin/sh\n")
    (repo / "here").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(repo)
    assert client_target("shadowed_notes") == "shadowed_notes"  # spawned from PATH
    assert not ran.exists()
    assert client_target("./here") == "./here"  # a program here: by its path
    # The file here, by its name with the suffix (or an attribute: a server spec).
    loaded = client_target("shadowed_notes.py")
    assert isinstance(loaded, Server) and loaded.name == "from-the-checkout"
    assert ran.exists()
    # With no such program, a bare word is still a module (this directory's first).
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert isinstance(client_target("shadowed_notes"), Server)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("http://h/mcp", True),
        ("HTTPS://h", True),
        ("Ws://h", True),
        ("wss://h", True),
        ("https:/h", False),
        ("httpx://h", False),
        ("ftp://h", False),
        (" http://h", False),  # (the command line strips first)
        ("python -m srv", False),
        (b"http://h", False),
        (None, False),
    ],
)
def test_is_url(target: object, expected: bool) -> None:
    """The one test of "is this target a URL" that the library and the CLI share."""
    assert is_url(target) is expected


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_load_server_finds_the_server(tmp_path: Path) -> None:
    only = _write(tmp_path, "only.py", "from mcp_trio import Server\napp = Server('only')\n")
    assert load_server(only).name == "only"
    factory = _write(
        tmp_path,
        "factory.py",
        "from mcp_trio import Server\ndef make() -> Server:\n    return Server('made')\n",
    )
    assert load_server(f"{factory}:make").name == "made"


@pytest.mark.parametrize(
    ("text", "attribute", "fragment"),
    [
        ("x = 1\n", None, "has no mcp_trio.Server named 'server'"),
        (
            "from mcp_trio import Server\na = Server('a')\nb = Server('b')\n",
            None,
            "holds several servers (a, b); pick one",
        ),
        ("x = 1\n", "x", ":x is a int, not an mcp_trio.Server"),
        ("def f():\n    raise RuntimeError('nope')\n", "f", "f() failed: RuntimeError: nope"),
        ("import no_such_dependency_xyz\n", None, "ModuleNotFoundError"),
        ("def broken(:\n", None, "SyntaxError"),
        ("raise ValueError('bad config')\n", None, "ValueError: bad config ("),
    ],
)
def test_load_server_errors(
    tmp_path: Path, text: str, attribute: str | None, fragment: str
) -> None:
    path = _write(tmp_path, "target.py", text)
    spec = path if attribute is None else f"{path}:{attribute}"
    with pytest.raises(CliError) as caught:
        load_server(spec)
    assert fragment in caught.value.message
    assert "\n" not in caught.value.message


def test_load_server_from_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "my_mcp_app.py", "from mcp_trio import Server\nserver = Server('mod')\n")
    assert load_server("my_mcp_app").name == "mod"
    _write(tmp_path, "my_broken_app.py", "import missing_dependency_xyz\n")
    with pytest.raises(CliError, match="could not import my_broken_app: ModuleNotFoundError"):
        load_server("my_broken_app")
    with pytest.raises(CliError, match=r"neither a \.py file nor a module name"):
        load_server("not a module")


# ---------------------------------------------------------------------- arguments


def test_parse_arguments() -> None:
    assert parse_arguments(["a=1", "b==x", "c="], '{"a": 0, "d": true}') == (
        {"a": 0, "d": True},
        {"a": "1", "b": "=x", "c": ""},
    )
    with pytest.raises(UsageError):
        parse_arguments(["=v"], None)


@pytest.mark.parametrize(
    "text", ['{"n": NaN}', '{"n": Infinity}', '{"n": -Infinity}', '{"n": 1e999}']
)
def test_json_arguments_are_strict_json(text: str) -> None:
    # Python's json takes these and orjson would send them as null: refuse them.
    with pytest.raises(UsageError, match="--json is not valid JSON"):
        parse_arguments([], text)


@pytest.mark.parametrize(
    ("text", "schema", "expected"),
    [
        ("3", {"type": "integer"}, 3),
        ("3", {"type": "string"}, "3"),
        ("3.5", {"type": "number"}, 3.5),
        ("3.0", {"type": "integer"}, 3.0),
        ("true", {"type": "boolean"}, True),
        ("true", {"type": "string"}, "true"),
        ("null", {"anyOf": [{"type": "string"}, {"type": "null"}]}, None),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ('{"a": 1}', {"type": ["object", "null"]}, {"a": 1}),
        ("[1]", {"anyOf": [{"$ref": "#/$defs/X"}]}, [1]),
        ("hello", {"type": "integer"}, "hello"),
        ("7", None, 7),
        ('"quoted"', {"type": "string"}, "quoted"),
        # Not JSON (or not a finite number): the text itself, never null on the wire.
        ("NaN", {"type": "number"}, "NaN"),
        ("Infinity", None, "Infinity"),
        ("1e999", {"type": "number"}, "1e999"),
        # Integers are exact at any size (the wire then refuses what it cannot carry).
        ("123456789012345678901234", {"type": "integer"}, 123456789012345678901234),
    ],
)
def test_arg_value(text: str, schema: Any, expected: Any) -> None:
    assert arg_value(text, schema) == expected


# ---------------------------------------------------------------------- rendering


def _output(result: dict[str, Any]) -> ToolOutput:
    return ToolOutput.from_wire(result)


def test_render_content_blocks() -> None:
    output = _output(
        {
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "A" * 2000, "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
                {"type": "resource", "resource": {"uri": "x://t", "text": "inside\n"}},
                {
                    "type": "resource",
                    "resource": {"uri": "x://b", "blob": "AAAA", "mimeType": "b/b"},
                },
            ]
        }
    )
    assert render_tool_output(output).splitlines() == [
        "hello",
        "[image: image/png, 8 bytes]",
        "[audio: audio/wav, 1.5 kB]",
        "[resource link: file:///a (a)]",
        "[resource: x://t]",
        "inside",
        "[resource: x://b, b/b, 3 bytes]",
    ]


@pytest.mark.parametrize(
    ("content", "structured", "expected"),
    [
        (['{"a":[1,2],"b":"x"}', "note"], {"a": [1, 2], "b": "x"}, 'note\n{"a": [1, 2], "b": "x"}'),
        (["hi there"], {"result": "hi there"}, "hi there"),
        (["7"], {"result": 7}, "7"),
        (['["a", "b"]'], {"result": ["a", "b"]}, '["a", "b"]'),
        (["something else"], {"result": 7}, 'something else\n{"result": 7}'),
        ([], {"k": None}, '{"k": null}'),
    ],
)
def test_render_structured_content_once(content: list[str], structured: Any, expected: str) -> None:
    blocks = [{"type": "text", "text": text} for text in content]
    output = _output({"content": blocks, "structuredContent": structured})
    assert render_tool_output(output) == expected


def test_readable_json_breaks_only_long_lines() -> None:
    assert readable_json({"a": [1, 2]}) == '{"a": [1, 2]}'
    value = {
        "items": [{"name": "x" * 30, "tags": ["a", "b"]}, {"name": "y" * 30, "tags": []}],
        "n": 2,
    }
    assert readable_json(value, width=70) == (
        "{\n"
        '  "items": [\n'
        '    {"name": "' + "x" * 30 + '", "tags": ["a", "b"]},\n'
        '    {"name": "' + "y" * 30 + '", "tags": []}\n'
        "  ],\n"
        '  "n": 2\n'
        "}"
    )


def test_tool_signature_and_listing() -> None:
    tool = structure(
        {
            "name": "f",
            "title": "Eff",
            "description": "Does f.\n\nAt length.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer"},
                    "b": {"enum": ["x", "y"], "default": "x"},
                    "c": {"type": ["string", "null"]},
                    "d": {"const": 1},
                    "e": {},
                },
                "required": ["a"],
            },
        },
        t.Tool,
    )
    assert (
        tool_signature(tool)
        == 'f(a: integer, b?: "x" | "y" = "x", c?: string | null, d?: 1, e?: any)'
    )
    listing = render_listing("tools", [tool])
    assert listing.splitlines()[1:] == [
        f"  {tool_signature(tool)}  Eff",
        "      Does f. At length.",
    ]
    assert render_listing("prompts", []) == "Prompts (0)\n  (none)"


# ---------------------------------------------------------------------- progress


def _event(progress: float, total: float | None, message: str | None = None) -> ProgressReceived:
    return ProgressReceived(request_id=1, progress=progress, total=total, message=message)


async def test_progress_as_plain_lines() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, indent="  ")
    await display.on_progress(_event(1, 4, "one"))
    await display.on_progress(_event(2, None))
    await display.on_log(
        structure(
            {"level": "info", "data": {"k": 1}, "logger": "db"}, t.LoggingMessageNotificationParams
        )
    )
    display.close()
    assert stream.getvalue() == (
        '  progress: 1/4 (25%) one\n  progress: 2\n  [server db info] {"k": 1}\n'
    )


async def test_progress_bar_on_a_terminal() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, terminal=True)
    await display.on_progress(_event(1, 2, "half"))
    display.line("a log line")
    await display.on_progress(_event(3, None))
    display.close()
    bar_half = "[" + "█" * 12 + "░" * 12 + "] 1/2 half"
    assert stream.getvalue() == (
        f"\r\x1b[2K{bar_half}\r\x1b[2Ka log line\n{bar_half}\r\x1b[2K[3]\r\x1b[2K"
    )


def test_progress_bar_in_ascii() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    display = ProgressDisplay(stream, terminal=True)
    display.progress(2, 2, None)
    stream.seek(0)
    assert stream.buffer.getvalue().decode() == "\r\x1b[2K[" + "#" * 24 + "] 2/2"


def test_quiet_shows_nothing() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, quiet=True)
    display.progress(1, 2, "x")
    display.line("y")
    assert stream.getvalue() == ""


# ---------------------------------------------------------------------- errors


def test_describe() -> None:
    assert describe(ZeroDivisionError()) is None
    problem = describe(McpError(ErrorData(code=-32602, message="bad")))
    assert (
        problem is not None and problem.message == "the server answered with an error: bad (-32602)"
    )
    exited = ServerExited("the server exited", 1, b"Traceback...\n  ...\nValueError: boom\n")
    problem = describe(exited)
    assert (
        problem is not None
        and problem.message == "the server exited (exit status 1): ValueError: boom"
    )
    grouped = describe(ExceptionGroup("g", [SessionClosed("gone"), SessionClosed("gone too")]))
    assert grouped is not None and grouped.message == "the connection closed: gone"
    assert describe(ExceptionGroup("g", [SessionClosed("x"), ZeroDivisionError()])) is None
    slow = describe(trio.TooSlowError())
    assert slow is not None and slow.message == "timed out"
    late = describe(RequestTimeout("tools/call", 3, timeout=2.0))
    assert late is not None and late.message == "tools/call timed out after 2 s (request 3)"
    refused = OSError("all attempts failed")
    refused.__cause__ = ConnectionRefusedError(
        111, "Error connecting to ('h', 1): Connection refused"
    )
    problem = describe(refused)
    assert problem is not None and problem.message == "all attempts failed (Connection refused)"
    missing = describe(FileNotFoundError(2, "No such file or directory", "prog"))
    assert missing is not None and missing.message == "No such file or directory: prog"


def test_one_line() -> None:
    assert one_line("  a\n\n  b  \n") == "a b"
    assert one_line("x" * 10, limit=5) == "xxxx…"


# ---------------------------------------------------------------------- the form


def _answers(*lines: str | None) -> Any:
    queue = list(lines)
    asked: list[str] = []

    def ask(question: str) -> str | None:
        asked.append(question)
        return queue.pop(0)

    ask.asked = asked  # type: ignore[attr-defined]
    return ask


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean", "description": "Really?"},
        "color": {"type": "string", "enum": ["red", "green"]},
        "size": {"type": "integer", "default": 3},
        "ratio": {"type": "number"},
        "note": {"type": "string", "title": "A note"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "level": {"type": "string", "oneOf": [{"const": "lo"}, {"const": "hi"}]},
    },
    "required": ["ok", "color"],
}


def test_fill_form() -> None:
    said: list[str] = []
    ask = _answers("maybe", "y", "2", "", "0.5", "", "a, b", "hi")
    content = fill_form("Proceed?", SCHEMA, ask, said.append)
    assert content == {
        "ok": True,
        "color": "green",
        "size": 3,
        "ratio": 0.5,
        "tags": ["a", "b"],
        "level": "hi",
    }
    assert said == ["The server asks: Proceed?", "  (answer y or n)"]
    assert ask.asked[0] == "  ok (Really?) [y/n]: "
    assert ask.asked[2] == "  color [1) red / 2) green]: "
    assert ask.asked[3] == "  size [integer] (default: 3): "
    assert ask.asked[5] == "  A note [string] (optional): "


def test_fill_form_cancel_and_retries() -> None:
    assert fill_form("?", SCHEMA, _answers(None), lambda _: None) is None
    assert fill_form("?", SCHEMA, _answers(*[""] * MAX_TRIES), lambda _: None) is None
    said: list[str] = []
    assert fill_form("?", SCHEMA, _answers("n", "blue", "red", "x", None), said.append) is None
    assert said[1:] == [
        "  (answer one of red, green)",
        "  (not a whole number: x)",
    ]
    bad_tags = {"type": "object", "properties": {"t": SCHEMA["properties"]["tags"]}}
    said.clear()
    assert fill_form("?", bad_tags, _answers("c", None), said.append) is None
    assert said[1] == "  (not one of a, b: c)"


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "http://x/mcp", "tools", "prompts", "--era", "legacy"],
        ["list", "http://x/mcp", "--era", "legacy", "tools", "prompts"],
        ["list", "http://x/mcp", "tools", "--era", "legacy", "prompts"],
        ["list", "--era", "legacy", "http://x/mcp", "tools", "prompts"],
    ],
)
def test_list_kinds_may_come_after_options(argv: list[str]) -> None:
    args = parse_args(argv)
    assert (args.target, args.kinds, args.era) == ("http://x/mcp", ["tools", "prompts"], "legacy")


def test_unknown_arguments_are_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "http://x/mcp", "tool", "--era", "legacy", "stray", "--nope"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_server_exited_shows_the_last_lines_of_a_long_stderr_tail() -> None:
    long_line = b"x" * 2000 + b"y"
    tail = b"".join(b"noise %d\n" % i for i in range(5000)) + long_line + b"\nFATAL: boom\n"
    exited = ServerExited("the server exited", 7, tail)
    text = str(exited)
    lines = text.splitlines()
    assert lines[0].startswith("the server exited (exit status 7); stderr tail (4982 earlier")
    assert lines[-1] == "FATAL: boom" and len(lines) == 21
    assert lines[-2] == "… " + "x" * 499 + "y"  # a long line's end, where its point is
    assert exited.stderr_tail == tail  # all of it, for whoever wants it
    short = ServerExited("gone", 0, b"one\ntwo\n")
    assert str(short) == "gone (exit status 0); stderr tail:\none\ntwo"
    assert str(ServerExited("gone", None)) == "gone (exit status None)"


def test_list_sends_the_extra_headers(capsys: pytest.CaptureFixture[str]) -> None:
    with served_in_thread(start_proxied) as proxy:
        argv = ["list", proxy.url(), "tools", "--era", "legacy", "-H", "Authorization: Bearer x"]
        assert main(argv) == 0, capsys.readouterr().err
    assert "echo" in capsys.readouterr().out
    assert proxy.seen and all(s.headers["authorization"] == "Bearer x" for s in proxy.seen)


async def test_run_http_gives_in_flight_calls_the_whole_graceful_close(
    autojump_clock: MockClock,
) -> None:
    # The command stopped waiting for the close at 5 s, the grace period's default: the
    # close's "shutting down" answers, due at that very moment, never went out.
    server = Server("slow")
    started = trio.Event()

    @server.tool()
    async def slow() -> str:
        started.set()
        await trio.sleep(100)
        return "done"  # pragma: no cover

    err = io.StringIO()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cli_run._serve, server, "http", "127.0.0.1", 0, "/mcp", err)
        while (found := re.search(r"http://\S+", err.getvalue())) is None:
            await trio.sleep(0.01)
        outcome: list[BaseException] = []

        async def call(client: Any) -> None:
            try:
                await client.call_tool("slow")
            except McpError as exc:
                outcome.append(exc)

        async with open_client(found.group(), era="modern") as client, trio.open_nursery() as calls:
            calls.start_soon(call, client)
            await started.wait()
            os.kill(os.getpid(), signal.SIGTERM)
        (error,) = outcome
        assert "shutting down" in str(error)


def test_the_demo_names_a_public_server_where_there_is_no_examples_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (an installed wheel: no examples/ beside the package, nor in the current directory)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_cli_demo, "__file__", str(tmp_path / "site" / "mcp_trio" / "x.py"))
    target, absolute = _cli_demo._example()
    assert target == absolute == "mcp_trio.demo:create_server"
    assert not target.split(":")[0].split(".")[-1].startswith("_")
    made, example = client_target(target), client_target(NOTES)
    assert isinstance(made, Server) and isinstance(example, Server)
    assert made.name == example.name

"""``mcp-trio`` facing a hostile (or buggy) server: escape sequences in what it sends are
shown, not obeyed, on a terminal; ``read --out -`` refuses a terminal; a listing's
fields are bounded.

The terminal is faked: ``sys.stdout`` / ``sys.stderr`` replaced by a ``StringIO`` whose
``isatty()`` is true (what the CLI asks).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_sansio import structure
from mcp_sansio import types as t
from mcp_trio import _oauth_loopback
from mcp_trio._cli import main
from mcp_trio._cli_auth import AuthOptions, client_auth
from mcp_trio._cli_form import (
    FIELD_LIMIT,
    MAX_CHOICES,
    MESSAGE_LIMIT,
    fill_form,
    terminal_elicitation,
)
from mcp_trio._cli_render import LISTING_LIMITS, LOG_LIMIT, ProgressDisplay, render_listing
from mcp_trio._cli_run import LOG_RECORD_LIMIT, SafeFormatter
from mcp_trio._cli_util import clip, error_line, terminal_safe, terminal_safe_json

# What must never reach a terminal raw: C0 controls but tab and newline, DEL, C1
# controls, and the bidirectional overrides and isolates. (A CRLF line end is harmless.)
UNSAFE = re.compile("\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
OWN_BAR = "\r\x1b[2K"  # what the progress display itself draws on a terminal

HOSTILE_APP = r'''
import mcp_trio
from mcp_trio import Context, ToolError

server = mcp_trio.Server("evil\x1b]0;pwned\x07", "1\x9b2J")


@server.tool(title="T\x1b[8mhidden", description="clears \x1b[2J the screen \u202eRLO")
async def hello(ctx: Context) -> str:
    await ctx.info("log \x1b]0;pwned\x07")
    await ctx.report_progress(1, 2, "step \x1b[2J")
    return "result \x1b]8;;http://evil\x07link\x1b]8;;\x07 \x9b2J"


@server.tool()
async def fail() -> str:
    """Fails."""
    raise ToolError("bad \x1b[2J news")


@server.resource("app://text", title="R\x1b[5m", mime_type="text/plain")
async def text() -> str:
    """Res \x1b[2J."""
    return "line1\r\nline2 \x1b[2J\rover"


@server.prompt()
async def greet() -> str:
    """Greets \x07."""
    return "hi \x1b]0;pwned\x07"
'''


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a target adds to sys.path and sys.modules: undo it after each test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("_mcp_trio_target_") or not name.startswith(
            ("mcp_trio", "mcp_sansio", "trio", "_")
        ):
            del sys.modules[name]


@pytest.fixture
def app(tmp_path: Path) -> str:
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE_APP)
    return str(path)


def on_terminal(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    out, err = Terminal(), Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def assert_safe(text: str) -> None:
    found = UNSAFE.search(text.replace(OWN_BAR, ""))
    assert found is None, f"{found.group()!r} reached the terminal in {text!r}"


# ---------------------------------------------------------------------- the rule


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, tab\tand\nnewline", "plain text, tab\tand\nnewline"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),  # CSI: clear the screen
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # OSC: retitle the terminal
        ("\x1b]8;;http://e\x1b\\x\x1b]8;;\x1b\\", "\\x1b]8;;http://e\\x1b\\x\\x1b]8;;\\x1b\\"),
        ("lone \x1b", "lone \\x1b"),
        ("back\x08space del\x7f nul\x00", "back\\x08space del\\x7f nul\\x00"),
        ("c1 \x9b2J \x90dcs\x9c \x85", "c1 \\x9b2J \\x90dcs\\x9c \\x85"),
        ("crlf\r\nkept", "crlf\r\nkept"),
        ("lone\rcr \r\r\n", "lone\\rcr \\r\r\n"),
        ("rlo \u202etxt.exe \u2066iso\u2069", "rlo \\u202etxt.exe \\u2066iso\\u2069"),
        ("ünïcödé 日本 🙂 \u200d", "ünïcödé 日本 🙂 \u200d"),
    ],
)
def test_terminal_safe(text: str, shown: str) -> None:
    assert terminal_safe(text) == shown
    assert UNSAFE.search(terminal_safe(text)) is None


def test_terminal_safe_json_is_the_same_json() -> None:
    value = {"k\x9b": ["\x1b[2J \x7f \x85 \u202e x", 1]}
    text = terminal_safe_json(json.dumps(value, ensure_ascii=False, indent=2))
    assert UNSAFE.search(text) is None
    assert "\\u009b" in text and "\\u202e" in text
    assert json.loads(text) == value


def test_clip() -> None:
    assert clip("abc", 3) == "abc"
    assert clip("abcdef", 4) == "abcd… (2 more characters)"


def test_error_lines_are_safe_on_or_off_a_terminal() -> None:
    stream = io.StringIO()  # (not a terminal: stderr is for people, a log is read later)
    error_line("the server said \x1b]0;pwned\x07 \x9b2J", stream)
    assert stream.getvalue() == "mcp-trio: error: the server said \\x1b]0;pwned\\x07 \\x9b2J\n"


# ---------------------------------------------------------------------- every command


def test_list_on_a_terminal(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "list", app)
    assert code == 0, err
    assert_safe(out)
    assert out.startswith("Server evil\\x1b]0;pwned\\x07 1\\x9b2J, protocol")
    assert "hello()  T\\x1b[8mhidden\n      clears \\x1b[2J the screen \\u202eRLO" in out
    assert "app://text  R\\x1b[5m (text/plain)\n      Res \\x1b[2J." in out
    assert "Greets \\x07." in out


def test_list_raw_on_a_terminal_is_the_same_json(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "list", app, "tools", "--raw")
    assert code == 0, err
    assert_safe(out)
    (hello,) = [tool for tool in json.loads(out)["tools"] if tool["name"] == "hello"]
    assert hello["description"] == "clears \x1b[2J the screen \u202eRLO"


def test_call_on_a_terminal(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "call", app, "hello")
    assert code == 0, err
    assert_safe(out)
    assert_safe(err)
    assert out == "result \\x1b]8;;http://evil\\x07link\\x1b]8;;\\x07 \\x9b2J\n"
    assert "step \\x1b[2J" in err  # the progress message
    assert "[server info] log \\x1b]0;pwned\\x07" in err  # the log message
    code, out, err = on_terminal(monkeypatch, "call", app, "hello", "--raw")
    assert code == 0, err
    assert_safe(out)
    assert json.loads(out)["content"][0]["text"].endswith("link\x1b]8;;\x07 \x9b2J")


def test_a_tool_error_on_a_terminal(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "call", app, "fail")
    assert (code, out) == (1, "")
    assert_safe(err)
    assert err == "mcp-trio: error: tool 'fail' reported an error: bad \\x1b[2J news\n"


def test_read_and_prompt_on_a_terminal(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "read", app, "app://text")
    assert code == 0, err
    assert out == "line1\r\nline2 \\x1b[2J\\rover\n"  # (a CRLF line end is harmless)
    code, out, err = on_terminal(monkeypatch, "prompt", app, "greet")
    assert code == 0, err
    assert out == "user: hi \\x1b]0;pwned\\x07\n"


def test_piped_stdout_is_the_server_s_text(capsys: pytest.CaptureFixture[str], app: str) -> None:
    # Not a terminal: `mcp-trio read ... > file` keeps the text as the server sent it...
    assert main(["read", app, "app://text"]) == 0
    assert capsys.readouterr().out == "line1\r\nline2 \x1b[2J\rover\n"
    assert main(["call", app, "hello"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "result \x1b]8;;http://evil\x07link\x1b]8;;\x07 \x9b2J\n"
    # ... while stderr, for people only, is safe anyway.
    assert_safe(captured.err)
    assert "progress: 1/2 (50%) step \\x1b[2J" in captured.err


def _on_a_real_terminal(*args: str) -> tuple[int, bytes]:
    """``python -m mcp_trio ARGS`` with stdout and stderr on a pseudo-terminal."""
    pty = pytest.importorskip("pty")
    controller, terminal = pty.openpty()
    argv = [sys.executable, "-m", "mcp_trio", *args]
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal) as proc:
        os.close(terminal)
        seen = b""
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready, _, _ = select.select([controller], [], [], 0.1)
                if not ready:
                    continue
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # EIO: every process on the terminal has exited
                    break
                if not chunk:
                    break
                seen += chunk
            code = proc.wait(timeout=60)
        finally:
            proc.kill()
            os.close(controller)
    return code, seen


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_a_real_terminal(app: str) -> None:
    # The same, with the process's own stdout and stderr on a terminal.
    code, seen = _on_a_real_terminal("read", app, "app://text")
    assert code == 0, seen
    assert b"\x1b" not in seen
    assert b"line2 \\x1b[2J\\rover" in seen
    code, seen = _on_a_real_terminal("read", app, "app://text", "--out", "-")
    assert code == 2
    assert b"\x1b" not in seen
    assert b"use --out FILE or pipe it" in seen


# ---------------------------------------------------------------------- read --out -


def test_read_out_dash_refuses_a_terminal(monkeypatch: pytest.MonkeyPatch, app: str) -> None:
    code, out, err = on_terminal(monkeypatch, "read", app, "app://text", "--out", "-")
    assert (code, out) == (2, "")
    assert err.startswith("mcp-trio: error: --out - writes the resource's bytes as they are")
    assert "use --out FILE or pipe it" in err


def test_read_out_dash_to_a_pipe(capfdbinary: pytest.CaptureFixture[bytes], app: str) -> None:
    assert main(["read", app, "app://text", "-o", "-"]) == 0
    assert capfdbinary.readouterr().out == b"line1\r\nline2 \x1b[2J\rover"  # byte-exact


# ---------------------------------------------------------------------- bounds


def test_a_listing_bounds_each_field() -> None:
    huge = 10_000_000
    tool = t.Tool(
        name="big",
        title="T" * huge + "\n  fake_tool()",
        description="D\x1b" * huge,
        input_schema={
            "type": "object",
            "properties": {"choice": {"enum": [f"value{i}" for i in range(100_000)]}},
        },
    )
    resource = t.Resource(uri="app://" + "u" * huge, name="r", mime_type="m" * huge)
    lines = render_listing("tools", [tool]).splitlines()
    assert len(lines) == 3  # heading, entry, description: a newline cannot fake an entry
    head_limit, title_limit = LISTING_LIMITS["head"], LISTING_LIMITS["title"]
    assert len(lines[1]) < head_limit + title_limit + 100
    assert lines[1].startswith("  big(choice?: ")
    assert f"… ({huge + len(' fake_tool()') - title_limit} more characters)" in lines[1]
    assert len(lines[2]) <= 6 + LISTING_LIMITS["description"]
    (entry,) = render_listing("resources", [resource]).splitlines()[1:]
    assert len(entry) < head_limit + LISTING_LIMITS["extra"] + 100
    assert entry.endswith(f"m… ({huge - LISTING_LIMITS['extra']} more characters))")


def test_the_server_line_is_bounded(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "long_name.py"
    path.write_text('import mcp_trio\nserver = mcp_trio.Server("n" * 100_000 + "\\nx", "1.0")\n')
    assert main(["list", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("Server nnn")
    assert f"n… ({100_002 - 200} more characters) 1.0, protocol " in first
    assert len(first) < 400


async def test_log_lines_and_progress_are_bounded_and_safe() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, terminal=False)
    data = "\x1b[2J" + "x" * 10_000_000
    params = {"level": "info", "data": data, "logger": "db\x1b"}
    await display.on_log(structure(params, t.LoggingMessageNotificationParams))
    display.progress(1, None, "first\nsecond \x9b2J" + "y" * 10_000)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[server db\\x1b info] \\x1b[2Jxxx")
    assert lines[0].endswith(f"… ({len(data) - LOG_LIMIT} more characters)")
    assert len(lines[0]) < LOG_LIMIT + 100
    assert lines[1].startswith("progress: 1 first second \\x9b2Jyyy")
    assert len(lines[1]) < 500


# ---------------------------------------------------------------------- questions


def test_the_form_is_bounded() -> None:
    asked: list[str] = []
    schema = {
        "properties": {
            "pick": {
                "type": "string",
                "title": "P" * 10_000,
                "description": "line one\nline two",
                "enum": [f"c{i}" for i in range(1000)],
            }
        }
    }

    def ask(question: str) -> str:
        asked.append(question)
        return "1000"  # (a choice past those listed can still be picked by number)

    content = fill_form("m" * 100_000, schema, ask, lambda text: None)
    assert content == {"pick": "c999"}
    (question,) = asked
    assert "\n" not in question
    assert len(question) < 5000
    assert f"{MAX_CHOICES}) c{MAX_CHOICES - 1} / … ({1000 - MAX_CHOICES} more)]" in question


async def test_the_form_on_a_terminal_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK\x9b8m"}}}
    params = structure(
        {"mode": "form", "message": "Delete \x1b[2J?", "requestedSchema": schema},
        t.ElicitRequestFormParams,
    )
    answer: dict[str, Any] = await terminal_elicitation(params)
    assert answer == {"action": "accept", "content": {"ok": True}}
    url = structure(
        {"mode": "url", "message": "go", "url": "https://e/\x1b]0;pwned\x07", "elicitationId": "1"},
        t.ElicitRequestURLParams,
    )
    assert await terminal_elicitation(url) == {"action": "decline"}
    shown = err.getvalue()
    assert_safe(shown)
    assert "The server asks: Delete \\x1b[2J?" in shown
    assert "OK\\x9b8m [y/n] (optional): " in shown
    assert "open https://e/\\x1b]0;pwned\\x07 (declined" in shown


def test_the_oauth_url_is_shown_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[_oauth_loopback.LoopbackRedirect] = []
    real = _oauth_loopback.LoopbackRedirect

    def recorded(**kwargs: Any) -> _oauth_loopback.LoopbackRedirect:
        made.append(real(**kwargs))
        return made[-1]

    monkeypatch.setattr(_oauth_loopback, "LoopbackRedirect", recorded)
    err = Terminal()
    options = AuthOptions(oauth=True, browser=False, token_store="none")
    client_auth(options, "https://mcp.example/mcp", {}, err)
    (redirect,) = made
    redirect.on_url("https://as.example/authorize?x=\x1b]0;pwned\x07")
    assert_safe(err.getvalue())
    assert "https://as.example/authorize?x=\\x1b]0;pwned\\x07" in err.getvalue()


def test_a_wrong_answer_lists_the_choices_bounded() -> None:
    choices = [f"choice-{i}-" + "x" * 5000 for i in range(2000)]
    schema = {
        "properties": {
            "c": {"type": "string", "enum": choices},
            "a": {"type": "array", "items": {"enum": choices}},
        },
        "required": ["c", "a"],
    }
    answers = iter(["nope", "choice-0-" + "x" * 5000, "n" * 100_000])
    said: list[str] = []
    assert fill_form("hi", schema, lambda question: next(answers, None), said.append) is None
    wrong_choice, wrong_items = said[1:]
    more = f"… ({2000 - MAX_CHOICES} more)"
    assert wrong_choice.startswith("  (answer one of choice-0-xxx")  # (… choice-19-xxx…)
    assert wrong_choice.endswith(f"… ({5010 - FIELD_LIMIT} more characters), {more})")
    assert len(wrong_choice) < MAX_CHOICES * (FIELD_LIMIT + 40) + 100
    assert wrong_items.startswith("  (not one of choice-0-xxx")
    assert f", {more}: nnnn" in wrong_items  # (the answer is echoed, clipped too)
    assert wrong_items.endswith(f"… ({100_000 - FIELD_LIMIT} more characters))")
    assert len(wrong_items) < MAX_CHOICES * (FIELD_LIMIT + 40) + 2 * FIELD_LIMIT + 100


def test_a_wrong_number_is_echoed_clipped() -> None:
    said: list[str] = []
    schema = {"properties": {"n": {"type": "integer"}}}
    answers = iter(["9" * 5 + "x" * 100_000])
    assert fill_form("hi", schema, lambda question: next(answers, None), said.append) is None
    (shown,) = said[1:]
    more = f"… ({100_005 - FIELD_LIMIT} more characters)"
    assert shown == f"  (not a whole number: 99999{'x' * (FIELD_LIMIT - 5)}{more})"


def test_a_default_is_shown_on_one_line_clipped() -> None:
    asked: list[str] = []
    schema = {"properties": {"d": {"type": "string", "default": "d\n" + "e" * 100_000}}}

    def ask(question: str) -> str:
        asked.append(question)
        return ""

    assert fill_form("hi", schema, ask, lambda text: None) == {"d": "d\n" + "e" * 100_000}
    (question,) = asked
    assert "\n" not in question
    assert "(default: d eee" in question
    assert question.endswith(f"… ({100_002 - FIELD_LIMIT} more characters)): ")


async def test_a_url_elicitation_is_clipped(monkeypatch: pytest.MonkeyPatch) -> None:
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    url = "https://e/" + "u" * 100_000
    params = structure(
        {"mode": "url", "message": "go", "url": url, "elicitationId": "1"},
        t.ElicitRequestURLParams,
    )
    assert await terminal_elicitation(params) == {"action": "decline"}
    (line,) = err.getvalue().splitlines()
    assert f"uuu… ({len(url) - MESSAGE_LIMIT} more characters) (declined" in line
    assert len(line) < MESSAGE_LIMIT + 200


async def test_a_log_line_s_logger_is_clipped() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, terminal=False)
    params = {"level": "info", "data": "d", "logger": "L" * 100_000}
    await display.on_log(structure(params, t.LoggingMessageNotificationParams))
    (line,) = stream.getvalue().splitlines()
    assert line == f"[server {'L' * 100}… ({100_000 - 100} more characters) info] d"


def test_the_server_version_is_bounded(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "long_version.py"
    path.write_text('import mcp_trio\nserver = mcp_trio.Server("n", "1\\n" + "9" * 100_000)\n')
    assert main(["list", str(path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"Server n 1 {'9' * 98}… ({100_002 - 100} more characters), protocol ")


def test_library_log_lines_are_safe_and_clipped() -> None:
    formatter = SafeFormatter("%(levelname)s %(name)s: %(message)s")
    record = logging.LogRecord(
        "mcp_trio",
        logging.INFO,
        __file__,
        1,
        "server %s %s",
        ("evil\x1b]0;pwned\x07", "v" * 100_000),
        None,
    )
    line = formatter.format(record)
    assert_safe(line)
    assert line.startswith("INFO mcp_trio: server evil\\x1b]0;pwned\\x07 vvv")
    assert line.endswith(f"… ({len(record.getMessage()) - LOG_RECORD_LIMIT} more characters)")
    try:
        raise ValueError("bad \x9b2J")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = formatter.format(record)
    assert_safe(line)
    assert "ValueError: bad \\x9b2J" in line


def test_verbose_client_commands_log_safely(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(logging.root, "handlers", [])  # (pytest's capture is there)
    monkeypatch.setattr(logging.root, "level", logging.WARNING)
    path = tmp_path / "named.py"
    path.write_text('import mcp_trio\nserver = mcp_trio.Server("n", "1")\n')
    assert on_terminal(monkeypatch, "list", "-v", str(path))[0] == 0
    (handler,) = logging.root.handlers
    assert isinstance(handler, logging.StreamHandler)
    assert isinstance(handler.formatter, SafeFormatter)
    assert isinstance(handler.stream, Terminal)
    # As _session.py logs a restarted session's server name and version:
    logging.getLogger("mcp_trio").warning("server %s", "evil\x1b[2J" + "n" * 100_000)
    shown = handler.stream.getvalue()
    assert_safe(shown)
    assert "mcp_trio: server evil\\x1b[2Jnnn" in shown
    assert max(map(len, shown.splitlines())) < LOG_RECORD_LIMIT + 200

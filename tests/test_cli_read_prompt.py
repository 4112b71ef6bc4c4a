"""``mcp-trio``: the ``read`` and ``prompt`` commands, the ``list`` kinds people type, and
the wording of errors (an internal error's ``-v`` hint, a request HTTP failed).

In this process through ``main()``, except where the server's logs matter (``-v``): those
run ``python -m mcp_trio`` in a subprocess, since pytest holds this process's logging.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_sansio import ErrorCode
from mcp_trio import McpError, TransportFailed
from mcp_trio._cli import main
from mcp_trio._cli_client import ClientOptions, Target, _hint_traceback, list_kind
from mcp_trio._cli_util import describe

APP = '''
from mcp_sansio import types as t
import mcp_trio

server = mcp_trio.Server("app", "1.0")


@server.tool()
async def boom(x: int) -> int:
    """Fails."""
    raise RuntimeError(f"kaboom {x}")


@server.resource("app://text", mime_type="text/plain")
async def text() -> str:
    """Some text."""
    return "hello\\nworld"


@server.resource("app://blob", mime_type="application/octet-stream")
async def blob() -> bytes:
    """Some bytes."""
    return bytes(range(256)) * 8


@server.resource("app://two")
async def two() -> list[t.TextResourceContents]:
    """Two parts."""
    return [t.TextResourceContents(uri="app://two#1", text="one"),
            t.TextResourceContents(uri="app://two#2", text="two")]


@server.resource("app://broken")
async def broken() -> str:
    """Fails."""
    raise ValueError("res broke")


@server.resource("app://item/{id}")
async def item(id: int) -> str:
    """An item."""
    return f"item {id}"


@server.resource("app://junk", mime_type="application/octet-stream")
async def junk() -> list[t.BlobResourceContents]:
    """A blob that is not base64."""
    return [t.BlobResourceContents(uri="app://junk", blob="!!not base64@@")]


@server.prompt()
async def greet(name: str, mood: str = "glad") -> str:
    """Greet someone."""
    return f"Hello {name}, {mood} to see you"
'''


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
    path = tmp_path / "app.py"
    path.write_text(APP)
    return str(path)


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---------------------------------------------------------------------- list KIND


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("tools", "tools"),
        ("tool", "tools"),
        ("Tool", "tools"),
        ("resource", "resources"),
        ("template", "templates"),
        ("templates", "templates"),
        ("resource-templates", "templates"),
        ("prompt", "prompts"),
        ("prompts", "prompts"),
        ("toolz", None),
        ("s", None),
    ],
)
def test_list_kinds_singular_or_plural(text: str, kind: str | None) -> None:
    assert list_kind(text) == kind


def test_list_templates_alone(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, out, err = run_main(capsys, "list", app, "templates")
    assert code == 0, err
    assert "app://item/{id}" in out
    assert "app://text" not in out  # (the resources themselves: not asked for)
    code, out, err = run_main(capsys, "list", app, "template", "--raw")
    assert code == 0, err
    assert '"resourceTemplates"' in out
    assert '"resources"' not in out


def test_list_an_unknown_kind_names_them_all(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, _, err = run_main(capsys, "list", app, "widgets")
    assert code == 2
    assert "unknown KIND 'widgets' (choose from tools, resources, templates, prompts)" in err


# ---------------------------------------------------------------------- read


def test_read_prints_text(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, out, err = run_main(capsys, "read", app, "app://text")
    assert (code, out) == (0, "hello\nworld\n"), err
    code, out, _ = run_main(capsys, "read", app, "app://item/7")
    assert (code, out) == (0, "item 7\n")


def test_read_summarizes_a_blob_and_writes_its_bytes(
    capsys: pytest.CaptureFixture[str], app: str, tmp_path: Path
) -> None:
    code, out, err = run_main(capsys, "read", app, "app://blob")
    assert code == 0, err
    assert out == "[resource: app://blob, application/octet-stream, 2.0 kB]\n"
    target = tmp_path / "blob.bin"
    code, out, err = run_main(capsys, "read", app, "app://blob", "--out", str(target))
    assert (code, out) == (0, ""), err
    assert target.read_bytes() == bytes(range(256)) * 8


def test_read_out_of_a_blob_that_is_not_base64_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], app: str, tmp_path: Path
) -> None:
    target = tmp_path / "junk.bin"
    code, out, err = run_main(capsys, "read", app, "app://junk", "--out", str(target))
    assert (code, out) == (1, "")
    assert "the server sent a blob that is not base64" in err and "Traceback" not in err
    assert not target.exists()


def test_read_out_to_stdout(capfdbinary: pytest.CaptureFixture[bytes], app: str) -> None:
    code = main(["read", app, "app://text", "-o", "-"])
    assert code == 0
    assert capfdbinary.readouterr().out == b"hello\nworld"  # (the bytes, no newline added)


def test_read_several_contents(
    capsys: pytest.CaptureFixture[str], app: str, tmp_path: Path
) -> None:
    code, out, err = run_main(capsys, "read", app, "app://two")
    assert code == 0, err
    assert out == "[resource: app://two#1]\none\n[resource: app://two#2]\ntwo\n"
    code, out, err = run_main(capsys, "read", app, "app://two", "--out", str(tmp_path / "x"))
    assert code == 1
    assert "--out writes one content; app://two has 2" in err
    assert not (tmp_path / "x").exists()


def test_read_raw_and_not_found(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, out, err = run_main(capsys, "read", app, "app://text", "--raw", "--era", "legacy")
    assert code == 0, err
    assert '"text": "hello\\nworld"' in out
    code, out, err = run_main(capsys, "read", app, "app://nothing")
    assert (code, out) == (1, "")
    assert "the server answered with an error:" in err
    assert "app://nothing" in err


# ---------------------------------------------------------------------- prompt


def test_prompt_with_arguments(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, out, err = run_main(capsys, "prompt", app, "greet", "--arg", "name=Ada")
    assert (code, out) == (0, "user: Hello Ada, glad to see you\n"), err
    args = ("--arg", "name=Ada", "-a", "mood=3", "--raw")
    code, out, err = run_main(capsys, "prompt", app, "greet", *args)
    assert code == 0, err
    assert '"text": "Hello Ada, 3 to see you"' in out


def test_prompt_errors(capsys: pytest.CaptureFixture[str], app: str) -> None:
    code, _, err = run_main(capsys, "prompt", app, "nope")
    assert code == 1
    assert "nope" in err
    code, _, err = run_main(capsys, "prompt", app, "greet", "--arg", "name")
    assert code == 2
    assert "--arg needs KEY=VALUE" in err


# ---------------------------------------------------------------------- error wording


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_trio", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


HINT = "(-v shows the server's traceback)"


def test_an_internal_error_hints_at_v_and_v_shows_the_traceback(app: str) -> None:
    quiet = cli("call", app, "boom", "--arg", "x=3")
    assert quiet.returncode == 1
    assert quiet.stderr.strip().endswith(f"failed with an internal error {HINT}"), quiet.stderr
    assert "kaboom" not in quiet.stderr
    verbose = cli("call", app, "boom", "--arg", "x=3", "-v")
    assert verbose.returncode == 1
    assert "RuntimeError: kaboom 3" in verbose.stderr  # the hint is true
    assert HINT not in verbose.stderr


def test_a_spawned_server_s_internal_error_hints_at_v_too(app: str) -> None:
    command = f"{sys.executable} -m mcp_trio run {app}"
    quiet = cli("read", command, "app://broken")
    assert quiet.returncode == 1
    assert quiet.stderr.strip().endswith(HINT), quiet.stderr
    verbose = cli("read", command, "app://broken", "-v")
    assert "ValueError: res broke" in verbose.stderr  # forwarded from its stderr
    assert HINT not in verbose.stderr


def test_no_hint_for_a_url() -> None:
    # A remote server's logs are not ours to show.
    url = Target("http://127.0.0.1:1/mcp", "http://127.0.0.1:1/mcp")
    assert not _hint_traceback(url, ClientOptions())
    assert _hint_traceback(Target("app.py", "python app.py"), ClientOptions())
    assert not _hint_traceback(Target("app.py", "python app.py"), ClientOptions(verbose=True))


def test_a_request_http_failed_was_not_answered() -> None:
    why = "HTTP: the server closed the connection before it answered"
    problem = describe(TransportFailed.from_code(ErrorCode.INTERNAL_ERROR, why))
    assert problem is not None
    assert problem.message == f"the request failed: {why}"
    # The server's own -32603, even worded as ours, is the server's answer (it was
    # told apart by the prefix alone).
    worded = describe(McpError.from_code(ErrorCode.INTERNAL_ERROR, why))
    assert worded is not None
    assert worded.message == f"the server answered with an error: {why} (-32603)"
    answered = describe(McpError.from_code(ErrorCode.INTERNAL_ERROR, "Internal error"))
    assert answered is not None
    assert answered.message == "the server answered with an error: Internal error (-32603)"

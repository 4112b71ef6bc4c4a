"""``BlockingClient.stdio("notes.py")``: a server file is not a program, and the error
says how to run one, as ``open_client``'s does (``tests/trio/test_client_transports.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp_trio._blocking import BlockingClient

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX command lines")


@posix_only
@pytest.mark.parametrize(
    ("how", "error", "spawn"),
    [
        ("notes.py", FileNotFoundError, "[sys.executable, 'notes.py']"),
        (
            ["notes.py", "--port", "1"],
            FileNotFoundError,
            "[sys.executable, 'notes.py', '--port', '1']",
        ),
        ("{path}", PermissionError, "[sys.executable, '{path}']"),  # (not executable)
    ],
)
def test_a_server_file_that_is_not_a_program_says_how_to_run_it(
    how: str | list[str], error: type[OSError], spawn: str, tmp_path: Path
) -> None:
    server_file = tmp_path / "notes.py"
    server_file.write_text("raise SystemExit('a server file, never run here')\n")
    command = how.format(path=server_file) if isinstance(how, str) else how
    with pytest.raises(error) as caught:
        BlockingClient.stdio(command, cwd=tmp_path)
    message = str(caught.value)
    first = command.split()[0] if isinstance(command, str) else command[0]
    assert message.startswith(f"cannot run {first!r} as a program")
    assert f"BlockingClient.stdio({spawn.format(path=server_file)})" in message
    assert "open_client(server)" in message
    assert isinstance(caught.value.__cause__, error)


@posix_only
def test_other_commands_that_cannot_run_fail_as_before() -> None:
    with pytest.raises(FileNotFoundError) as caught:
        BlockingClient.stdio("no-such-command-xyz")
    assert caught.value.filename == "no-such-command-xyz"
    assert "sys.executable" not in str(caught.value)

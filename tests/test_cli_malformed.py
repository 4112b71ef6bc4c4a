"""``mcp-trio`` facing a server whose answers the wire accepts but a careless reader
would choke on: JSON nested as deep as the parser reads, text that looks like such JSON,
a tool schema of the wrong shape, a blob that is not ASCII, an answer over the client's
own size bound, and text stdout's encoding cannot write. Each is one line and an exit
status (or a result), never a traceback.

The server is a raw JSON-RPC stdio script (no library: it sends what the library would
refuse to), spawned by the CLI as any command target.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from mcp_sansio import types as t
from mcp_sansio._json import loads
from mcp_trio._cli import main
from mcp_trio._cli_render import (
    TYPE_DEPTH,
    ProgressDisplay,
    _compact,
    _same,
    tool_signature,
)
from mcp_trio._cli_util import EXIT_FAILURE

WIRE_SERVER = r"""
import json, os, sys

sys.setrecursionlimit(10_000)  # (json.dumps of the deep schema)
MODE = sys.argv[1]
DEPTH = int(os.environ.get("DEPTH", "1000"))


def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(rid, result):
    send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}))


def tool(schema):
    return {"name": "t", "inputSchema": schema}


def tools():
    if MODE == "badrequired":
        return [tool({"type": "object", "required": 5}), {**tool({"type": "object",
                "properties": {"a": {}}, "required": [["a"], "a"]}), "name": "u"}]
    if MODE == "badprops":
        return [tool({"type": "object", "properties": [1, 2]})]
    if MODE == "deepschema":
        s = {"type": "string"}
        for _ in range(DEPTH):
            s = {"anyOf": [s]}
        return [tool({"type": "object", "properties": {"a": s}})]
    return [tool({"type": "object", "properties": {"a": {"type": "integer"}}})]


for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None or method is None:
        continue
    if method == "initialize" and MODE == "noinit":
        continue
    if method == "initialize":
        answer(rid, {"protocolVersion": msg["params"]["protocolVersion"],
                     "capabilities": {"tools": {}, "resources": {}},
                     "serverInfo": {"name": "wire", "version": "1"}})
    elif method == "tools/list":
        answer(rid, {"tools": tools()})
    elif method == "tools/call":
        if MODE == "deepstruct":  # (written by hand: json.dumps recurses)
            send('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":'
                 '{"a":%s%s}}}' % (json.dumps(rid), "[" * DEPTH, "]" * DEPTH))
        elif MODE == "deeptext":
            answer(rid, {"content": [{"type": "text", "text": "[" * 100_000}],
                         "structuredContent": {"a": 1}})
        elif MODE == "huge":
            answer(rid, {"content": [{"type": "text", "text": "x" * (5 * 1024 * 1024)}]})
        else:
            text = "args " + json.dumps(msg["params"]["arguments"]) + " a \u2192 b"
            answer(rid, {"content": [{"type": "text", "text": text}]})
    elif method == "resources/read":
        answer(rid, {"contents": [{"uri": "x://y", "blob": "\u00e9\u00e9\u00e9\u00e9"}]})
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": rid,
                         "error": {"code": -32601, "message": "Method not found"}}))
"""


@pytest.fixture
def server(tmp_path: Path) -> Path:
    path = tmp_path / "wire_server.py"
    path.write_text(WIRE_SERVER)
    return path


def target(server: Path, mode: str) -> str:
    return f"{sys.executable} {server} {mode}"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_that_looks_like_deep_json_is_shown(
    capsys: pytest.CaptureFixture[str], server: Path
) -> None:
    code, out, err = run(capsys, "call", target(server, "deeptext"), "t")
    assert code == 0, err
    assert out.startswith("[" * 100_000 + "\n")
    assert out.endswith('{"a": 1}\n')


def test_a_malformed_input_schema_is_read_as_the_spec_shapes_it(
    capsys: pytest.CaptureFixture[str], server: Path
) -> None:
    code, out, err = run(capsys, "list", target(server, "badrequired"), "tools")
    assert code == 0, err
    assert "  t()\n" in out
    assert "  u(a: any)\n" in out  # ("a" is required: the list's one string)
    code, out, err = run(capsys, "call", target(server, "badprops"), "t", "--arg", "a=1")
    assert code == 0, err
    assert out == 'args {"a": 1} a \u2192 b\n'


@pytest.mark.parametrize("raw", [False, True])
def test_json_as_deep_as_the_wire_reads_is_shown(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: Path,
    raw: bool,
) -> None:
    depth = 1000  # (with the envelope's 4 levels: within the parser's 1024)
    monkeypatch.setenv("DEPTH", str(depth))
    code, out, err = run(capsys, "call", target(server, "deepstruct"), "t", *["--raw"] * raw)
    assert code == 0, err
    loaded = loads(out)  # (orjson: json recurses)
    value = loaded["structuredContent"]["a"] if raw else loaded["a"]
    for _ in range(depth - 1):
        (value,) = value
    assert value == []


def test_a_deep_schema_is_listed_cut(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, server: Path
) -> None:
    monkeypatch.setenv("DEPTH", "500")
    code, out, err = run(capsys, "list", target(server, "deepschema"), "tools")
    assert code == 0, err
    assert "  t(a?: …)" in out
    code, out, err = run(capsys, "list", target(server, "deepschema"), "tools", "--raw")
    assert code == 0, err
    schema = loads(out)["tools"][0]["inputSchema"]["properties"]["a"]
    for _ in range(500):
        (schema,) = schema["anyOf"]
    assert schema == {"type": "string"}


def test_a_blob_that_is_not_ascii_is_one_line(
    capsys: pytest.CaptureFixture[str], server: Path, tmp_path: Path
) -> None:
    out_file = tmp_path / "out.bin"
    code, _, err = run(capsys, "read", target(server, "blob"), "x://y", "--out", str(out_file))
    assert code == EXIT_FAILURE
    assert err.startswith("mcp-trio: error: the server sent a blob that is not base64 (")
    assert err.count("\n") == 1
    assert not out_file.exists()


def test_an_answer_over_the_client_s_bound_is_not_blamed_on_the_server(
    capsys: pytest.CaptureFixture[str], server: Path
) -> None:
    code, out, err = run(capsys, "call", target(server, "huge"), "t")
    assert code == EXIT_FAILURE
    assert out == ""
    assert err == (
        "mcp-trio: error: the server's answer is larger than 4194304 bytes, the most "
        "mcp-trio reads in one message\n"
    )


def test_stdout_not_in_utf_8_gets_the_server_s_text_in_utf_8(server: Path) -> None:
    # On Windows a redirected stdout is in the ANSI code page (cp1252), which has no "→".
    env = {**os.environ, "PYTHONIOENCODING": "cp1252"}
    result = subprocess.run(
        [sys.executable, "-m", "mcp_trio", "call", target(server, "ok"), "t", "--arg", "a=1"],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.replace(b"\r\n", b"\n") == 'args {"a": 1} a \u2192 b\n'.encode()


class Cp1252Terminal(io.StringIO):
    """A terminal whose encoding has no "→"."""

    encoding = "cp1252"

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text.encode(self.encoding)  # (what a real one raises)
        return super().write(text)


def test_a_terminal_shows_what_its_encoding_lacks_as_an_escape(
    monkeypatch: pytest.MonkeyPatch, server: Path
) -> None:
    out = Cp1252Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    code = main(["call", target(server, "ok"), "t", "--arg", "a=1", "-q"])
    assert code == 0
    assert out.getvalue() == 'args {"a": 1} a \\u2192 b\n'


def test_a_handshake_timeout_names_the_cli_s_option(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, server: Path
) -> None:
    monkeypatch.chdir(server.parent)  # (a short target: the error line is clipped at 300)
    never = f"{sys.executable} {server.name} noinit"
    code, _, err = run(capsys, "list", never, "--timeout", "0.2", "--era", "legacy")
    assert code == EXIT_FAILURE
    head = f"mcp-trio: error: cannot connect to {never}: initialize timed out"
    assert err.startswith(head)  # (then " (request 1)" when the session knows it)
    assert err.endswith(
        f": while opening '{never}' (the legacy handshake); the handshake may take 0.2 s "
        "(--timeout, at most 30 s)\n"
    )


async def test_a_log_message_nested_too_deep_for_json_dumps_is_shown() -> None:
    stream = io.StringIO()
    data: Any = []
    for _ in range(1000):
        data = [data]
    params = t.LoggingMessageNotificationParams(level="info", data=data)
    await ProgressDisplay(stream, terminal=False).on_log(params)
    assert stream.getvalue().startswith("[server info] [[[[")
    assert stream.getvalue().count("\n") == 1


def test_a_deep_log_message_s_text_grows_with_its_size_not_the_depth_squared() -> None:
    data: Any = ["é"]
    for _ in range(1000):
        data = [data]
    tracemalloc.start()
    try:
        text = _compact(data)  # (on_log's: the whole text is built before it is clipped)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text == "[" * 1001 + '"é"' + "]" * 1001
    assert peak < 200_000  # (indented first, 1000 levels are 2 MB of text)


def test_a_deep_items_schema_is_listed_cut() -> None:
    schema: Any = {"type": "string"}
    for _ in range(1000):
        schema = {"type": "array", "items": schema}
    tool = t.Tool(name="t", input_schema={"type": "object", "properties": {"a": schema}})
    signature = tool_signature(tool)
    assert signature == "t(a?: …" + "[]" * (TYPE_DEPTH + 1) + ")"  # (cut past TYPE_DEPTH)


def test_values_nested_too_deep_to_compare_are_not_the_same() -> None:
    # (A text block that differs from the structured content is shown, even when
    # comparing them runs out of stack.)
    a: Any = [1]
    b: Any = [2]
    for _ in range(5000):
        a, b = [a], [b]
    assert not _same(a, b)
    assert not _same(a, a[0])

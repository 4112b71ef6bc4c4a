"""``mcp-trio demo``: the notes server and a client, in this process, in a few seconds.

It serves :mod:`mcp_trio._cli_notes` (the code of ``examples/notes_server.py``) on a
local port over Streamable HTTP -- or in memory if HTTP cannot be used, and says
which -- connects a client, and prints a short transcript: the tools, a structured
result, a tool reporting progress, an elicitation answered by a stand-in user, the
resources, a completion and a prompt, then the same server in the legacy era. It ends
with how to run the example yourself and how to point other clients at it.

Needs no terminal: on a pipe, progress is printed as plain lines.
"""

from __future__ import annotations

import functools
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO

import trio

from mcp_sansio import types as t

from ._cli_notes import create_server
from ._cli_render import (
    ProgressDisplay,
    pretty_json,
    render_contents,
    render_prompt,
    render_tool_output,
    tool_signature,
)
from ._cli_util import one_line
from ._client import Client, open_client
from ._server import Server

__all__ = ["demo"]

_HTTP_START_TIMEOUT: Final = 5.0
_REQUEST_TIMEOUT: Final = 10.0


class _Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def section(self, title: str) -> None:
        self.line()
        self.line(f"== {title}")

    def block(self, text: str, indent: str = "   ") -> None:
        for row in text.rstrip("\n").splitlines() or [""]:
            self.line(f"{indent}{row}".rstrip())


async def demo(out: TextIO, *, in_memory: bool = False) -> int:
    """Run the demo, printing its transcript on ``out``; returns the exit status."""
    say = _Transcript(out)
    server = create_server()
    async with trio.open_nursery() as nursery:
        target: str | Server = server
        how = "in memory (forced with --in-memory)"
        if not in_memory:
            target, how = await _try_http(server, nursery)
        say.line("mcp-trio demo: the notes server of examples/notes_server.py, in this process")
        say.line()
        say.line(f"Transport  {how}")
        await _modern_tour(target, say)
        await _legacy_tour(target, say)
        nursery.cancel_scope.cancel()
    _next_steps(say)
    return 0


async def _try_http(server: Server, nursery: trio.Nursery) -> tuple[str | Server, str]:
    """Serve over HTTP on a free local port and check a client gets through; fall back
    to in memory (with the reason) if anything fails."""
    scope = trio.CancelScope()

    async def serve(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await server.serve_http("127.0.0.1", 0, "/mcp", task_status=task_status)

    try:
        with trio.fail_after(_HTTP_START_TIMEOUT):
            handle = await nursery.start(serve)
            url = str(handle.url)
            async with open_client(url, timeout=_HTTP_START_TIMEOUT) as probe:
                await probe.list_tools()
    except Exception as exc:
        scope.cancel()
        reason = one_line(f"{type(exc).__name__}: {exc}", 120)
        return server, f"in memory (Streamable HTTP did not work here: {reason})"
    return url, f"Streamable HTTP at {url}"


async def _answer_as_user(
    params: t.ElicitRequestFormParams | t.ElicitRequestURLParams, say: _Transcript
) -> dict[str, Any]:
    if isinstance(params, t.ElicitRequestURLParams):
        return {"action": "decline"}
    say.block(f"the server asks: {params.message!r} -- the demo user answers yes")
    return {"action": "accept", "content": {"delete": True}}


def _call_line(name: str, arguments: Mapping[str, Any]) -> str:
    return f"{name} {json.dumps(arguments)}"


async def _modern_tour(target: str | Server, say: _Transcript) -> None:
    display = ProgressDisplay(say.out, indent="   ")
    async with open_client(
        target,
        timeout=_REQUEST_TIMEOUT,
        on_log=display.on_log,
        on_elicitation=functools.partial(_answer_as_user, say=say),
    ) as client:
        _describe_client(client, say)

        say.section("Tools (tools/list)")
        for tool in await client.list_tools():
            say.block(tool_signature(tool))

        args: dict[str, Any] = {"query": "python", "limit": 2}
        say.section(f"Structured output: {_call_line('search_notes', args)}")
        say.block(render_tool_output(await client.call_tool("search_notes", args)))

        args = {"title": "Try mcp-trio", "body": "Run mcp-trio demo.", "tags": ["mcp"]}
        say.section(f"Logging: {_call_line('add_note', args)}")
        added = await client.call_tool("add_note", args)
        say.block(f"added note {added.structured_content['id']}")

        say.section("Progress: summarize_notes {}")
        summary = await client.call_tool("summarize_notes", {}, on_progress=display.on_progress)
        display.close()
        say.block(summary.text)

        say.section('Elicitation: delete_note {"note_id": 3}')
        deleted = await client.call_tool("delete_note", {"note_id": 3})
        say.block(deleted.text)

        say.section("Resource: notes://index")
        say.block(render_contents((await client.read_resource("notes://index")).contents))
        say.section("Resource template: notes://note/{id} with id=4")
        say.block(render_contents((await client.read_resource("notes://note/4")).contents))

        say.section("Completion")
        prompt_ref = t.PromptReference(name="review_note")
        values = (await client.complete(prompt_ref, "note_id", "")).values
        say.block(f"review_note(note_id=...), typed '':  {', '.join(values)}")
        template_ref = t.ResourceTemplateReference(uri="notes://note/{id}")
        values = (await client.complete(template_ref, "id", "sans")).values
        say.block(f"notes://note/{{id}}, typed 'sans':  {', '.join(values)}")

        say.section('Prompt: review_note(note_id="4")')
        say.block(render_prompt(await client.get_prompt("review_note", {"note_id": "4"})))


async def _legacy_tour(target: str | Server, say: _Transcript) -> None:
    async with open_client(target, era="legacy", timeout=_REQUEST_TIMEOUT) as client:
        say.section("The same server, legacy era (initialize)")
        say.block(f"protocol {client.protocol_version}")
        found = await client.call_tool("search_notes", {"query": "trio"})
        titles = [hit["title"] for hit in found.structured_content["hits"]]
        say.block(f'search_notes {{"query": "trio"}} -> {", ".join(titles)}')


def _describe_client(client: Client, say: _Transcript) -> None:
    info = client.server_info
    name = f"{info.name} {info.version}" if info is not None else "?"
    say.line(f"Server     {name}")
    say.line(f"Client     {client.era.value} era, protocol {client.protocol_version}")


def _example() -> tuple[str, str]:
    """How to name the example server: (for a command in this directory, absolute)."""
    here = Path.cwd() / "examples" / "notes_server.py"
    if here.is_file():
        return "examples/notes_server.py", str(here)
    checkout = Path(__file__).resolve().parents[2] / "examples" / "notes_server.py"
    if checkout.is_file():
        return str(checkout), str(checkout)
    # Installed from a wheel: examples/ is not there, the same server is in the package
    # (under a public name: mcp_trio.demo).
    return "mcp_trio.demo:create_server", "mcp_trio.demo:create_server"


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _command() -> str:
    """How to type ``mcp-trio`` here: by name if it is on PATH, else by its path."""
    if shutil.which("mcp-trio") is not None:
        return "mcp-trio"
    script = Path(sys.executable).parent / "mcp-trio"
    if script.is_file():
        return _relative(script)
    return f"{_relative(Path(sys.executable))} -m mcp_trio"


def _next_steps(say: _Transcript) -> None:
    short, absolute = _example()
    command = _command()
    config = {
        "mcpServers": {
            "notes": {"command": sys.executable, "args": ["-m", "mcp_trio", "run", absolute]}
        }
    }
    say.section("Try it yourself")
    say.block(
        "\n".join(
            [
                "Serve it over stdio (what desktop apps and the Inspector spawn):",
                f"  {command} run {short}",
                "Serve it over HTTP (the URL is printed on stderr):",
                f"  {command} run {short} --transport http --port 8000",
                "List and call, from a file, a command or a URL:",
                f"  {command} list {short}",
                f"  {command} call {short} search_notes --arg query=trio",
                f"  {command} call http://127.0.0.1:8000/mcp summarize_notes",
                "Open it in the MCP Inspector:",
                f"  npx @modelcontextprotocol/inspector {command} run {short}",
                "Or add it to a desktop app's MCP configuration (command and args):",
            ]
        )
    )
    say.block(pretty_json(config), indent="     ")

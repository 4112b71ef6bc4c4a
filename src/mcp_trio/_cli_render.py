"""How ``mcp-trio`` shows things to people: listings, results, progress and server logs.

Results go to stdout, readably: text as text, structured content as indented JSON,
binary content as a short placeholder (``[image: image/png, 2.1 kB]``). Progress and
the server's log messages go to stderr: a bar redrawn in place on a terminal, plain
lines anywhere else (a pipe, a CI log).

Hostile text: a listing shows each field of an item on one line, clipped
(:data:`LISTING_LIMITS`), so a 10 MB name or title cannot flood the terminal or fake
more entries; progress messages and log lines on stderr are clipped and shown
:func:`~mcp_trio._cli_util.terminal_safe` (escape sequences as ``\\x1b``). The
rendered results on stdout are made safe where they are printed (on a terminal only:
see :mod:`mcp_trio._cli_client`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TextIO

from mcp_sansio import ProgressReceived, unstructure
from mcp_sansio import types as t

from ._cli_util import clip, one_line, terminal_safe
from ._client_common import ToolOutput

__all__ = [
    "LISTING_LIMITS",
    "LOG_LIMIT",
    "PROGRESS_LIMIT",
    "ProgressDisplay",
    "pretty_json",
    "readable_json",
    "render_contents",
    "render_listing",
    "render_prompt",
    "render_tool_output",
    "tool_signature",
]


LISTING_LIMITS: Final = {"head": 400, "title": 200, "extra": 100, "description": 160}
"""Characters of each field shown in a listing: the signature or URI (``head``), the
title, the MIME type (``extra``) and the description (folded to one line)."""
LOG_LIMIT: Final = 2000
"""Characters of a server log message shown on stderr."""
PROGRESS_LIMIT: Final = 300
"""Characters of a progress message shown on stderr (folded to one line)."""


READABLE_DEPTH: Final = 32
"""JSON nested deeper than this is shown by :func:`readable_json` on one line: its
line-fitting walk recurses (and costs the size times the depth)."""
TYPE_DEPTH: Final = 16
"""How deep a listing's signature follows a parameter's schema (``anyOf``, ``items``);
deeper is ``…``."""


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept as is), for machines (``--raw``).

    What ``json.dumps(value, indent=2, ensure_ascii=False)`` writes, without recursing:
    the wire accepts JSON nested 1024 deep, deeper than Python's encoder can go."""
    return _json_text(value, 2)


def _json_text(value: Any, indent: int | None) -> str:
    """What ``json.dumps(value, indent=indent, ensure_ascii=False)`` writes, without
    recursing. With ``indent=None`` on one line, in time and space linear in the text of
    ``value`` however deep it nests (indenting is quadratic in the depth: 2 KB nested
    1000 deep is 2 MB indented)."""
    parts: list[str] = []
    todo: list[str | tuple[Any, int]] = [(value, 0)]  # text to write, or (value, depth)
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        value, depth = item
        if isinstance(value, dict | list | tuple) and value:
            if indent is None:
                inner, sep, close = "", ", ", ""
            else:
                inner, sep = "\n" + " " * (indent * (depth + 1)), ","
                close = "\n" + " " * (indent * depth)
            todo.append(close + ("}" if isinstance(value, dict) else "]"))
            members = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            for index in range(len(members) - 1, -1, -1):
                key, member = members[index]
                todo.append((member, depth + 1))
                head = inner if index == 0 else sep + inner
                if isinstance(value, dict):
                    name = key if isinstance(key, str) else json.dumps(key)  # (as json does)
                    head += json.dumps(name, ensure_ascii=False) + ": "
                todo.append(head)
            parts.append("{" if isinstance(value, dict) else "[")
        else:
            parts.append(json.dumps(value, ensure_ascii=False))
    return "".join(parts)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` deep."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        members = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        todo.extend((m, depth + 1) for m in members if isinstance(m, dict | list | tuple) and m)
    return False


def readable_json(value: Any, width: int = 80) -> str:
    """``value`` as JSON for people: indented, but an array or object that fits in the
    line is kept on it (nested past :data:`READABLE_DEPTH`: on one line, as
    ``json.dumps`` writes it; indented, its text would grow with the square of the depth)."""
    if isinstance(value, dict | list | tuple) and _deeper_than(value, READABLE_DEPTH):
        return _json_text(value, None)
    return _readable(value, width, 0, 0)


def _readable(value: Any, width: int, indent: int, column: int) -> str:
    flat = json.dumps(value, ensure_ascii=False)
    if column + len(flat) <= width or not isinstance(value, dict | list) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        rows = [pad + _readable(item, width, indent + 2, len(pad)) for item in value]
    else:
        rows = []
        for key, item in value.items():
            head = f"{pad}{json.dumps(key, ensure_ascii=False)}: "
            rows.append(head + _readable(item, width, indent + 2, len(head)))
    close = "]" if isinstance(value, list) else "}"
    opening = "[" if isinstance(value, list) else "{"
    return opening + "\n" + ",\n".join(rows) + "\n" + " " * indent + close


def _size(b64: str) -> str:
    n = len(b64) * 3 // 4 - b64[-2:].count("=")
    return f"{n} bytes" if n < 1000 else f"{n / 1000:.1f} kB"


def _as_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # (a server's "[[[[...": nested past the stack)
        return _NOT_JSON


def _same(value: Any, other: Any) -> bool:
    """``value == other``, false when they nest too deep to compare."""
    try:
        return bool(value == other)
    except RecursionError:
        return False


_NOT_JSON = object()


def _compact(value: Any) -> str:
    """``value`` as JSON on one line (nested too deep for ``json.dumps``: written
    without recursing, in linear time, non-ASCII kept)."""
    try:
        return json.dumps(value)
    except RecursionError:
        return _json_text(value, None)


# ---------------------------------------------------------------------- content


def render_block(block: Any) -> str:
    """One content block, readably."""
    if isinstance(block, t.TextContent):
        return block.text
    if isinstance(block, t.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, t.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, t.ResourceLink):
        return f"[resource link: {block.uri} ({block.name})]"
    if isinstance(block, t.EmbeddedResource):
        return render_contents([block.resource], heading=True)
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def render_contents(
    contents: Iterable[t.TextResourceContents | t.BlobResourceContents], *, heading: bool = False
) -> str:
    """Resource contents: text as text (under ``[resource: uri]`` when ``heading``),
    blobs as a placeholder."""
    parts: list[str] = []
    for item in contents:
        mime = f", {item.mime_type}" if item.mime_type else ""
        if isinstance(item, t.TextResourceContents):
            parts.append(f"[resource: {item.uri}{mime}]\n{item.text}" if heading else item.text)
        else:
            parts.append(f"[resource: {item.uri}{mime}, {_size(item.blob)}]")
    return "\n".join(part.rstrip("\n") for part in parts)


def render_tool_output(output: ToolOutput) -> str:
    """A tool's result: its content, then its structured content as JSON.

    Servers send structured content twice, for clients that read one or the other: as
    ``structuredContent`` and as a text block of its JSON. It is shown once. When it is
    a wrapped non-object result (``{"result": value}``), the value alone is shown.
    """
    structured = output.structured_content
    wrapped = isinstance(structured, dict) and set(structured) == {"result"}
    show_structured = structured is not None
    parts: list[str] = []
    for block in output.content:
        if structured is not None and isinstance(block, t.TextContent):
            value = _as_json(block.text)
            if _same(value, structured):
                continue
            if wrapped and block.text == structured["result"]:
                show_structured = False  # a string result, sent as plain text
            elif wrapped and _same(value, structured["result"]):
                show_structured = False
                parts.append(readable_json(value))
                continue
        parts.append(render_block(block))
    if show_structured:
        parts.append(readable_json(structured))
    return "\n".join(part.rstrip("\n") for part in parts)


def render_prompt(result: t.GetPromptResult) -> str:
    """A prompt's messages, each under its role."""
    lines = []
    for message in result.messages:
        first, *rest = render_block(message.content).splitlines() or [""]
        lines.append(f"{message.role}: {first}")
        lines.extend(f"    {row}" if row.strip() else "" for row in rest)
    return "\n".join(lines)


# ---------------------------------------------------------------------- listings


def _type_name(schema: Any, depth: int = 0) -> str:
    if depth > TYPE_DEPTH:
        return "…"
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(_compact(v) for v in schema["enum"])
    if "const" in schema:
        return _compact(schema["const"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_name(member, depth + 1) for member in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"{_type_name(schema.get('items'), depth + 1)}[]"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def tool_signature(tool: t.Tool) -> str:
    """``name(arg: type, opt?: type = default)`` from a tool's input schema."""
    schema = tool.input_schema
    props = schema.get("properties")
    # (Read as the spec shapes them, whatever a server sent: names in a list of strings.)
    listed = schema.get("required")
    required = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    args = []
    for name, prop in (props if isinstance(props, Mapping) else {}).items():
        text = f"{name}{'' if name in required else '?'}: {_type_name(prop)}"
        if isinstance(prop, Mapping) and "default" in prop:
            text += f" = {_compact(prop['default'])}"
        args.append(text)
    return f"{tool.name}({', '.join(args)})"


def _prompt_signature(prompt: t.Prompt) -> str:
    args = [f"{a.name}{'' if a.required else '?'}" for a in prompt.arguments or ()]
    return f"{prompt.name}({', '.join(args)})"


def _field(text: str, kind: str) -> str:
    """One field of a listing entry: on one line, at most its limit (and a marker)."""
    limit = LISTING_LIMITS[kind]
    if kind == "description":
        return one_line(text, limit)  # (a preview: the rest is in --raw)
    return clip(one_line(text, None), limit)


def _entry(head: str, title: str | None, extra: str | None, description: str | None) -> str:
    line = f"  {_field(head, 'head')}"
    if title:
        line += f"  {_field(title, 'title')}"
    if extra:
        line += f" ({_field(extra, 'extra')})"
    if description:
        line += f"\n      {_field(description, 'description')}"
    return line


def render_listing(kind: str, items: Sequence[Any]) -> str:
    """A section of ``mcp-trio list``: a heading, then one entry per item."""
    heading = {
        "tools": "Tools",
        "resources": "Resources",
        "templates": "Resource templates",
        "prompts": "Prompts",
    }[kind]
    lines = [f"{heading} ({len(items)})"]
    for item in items:
        if isinstance(item, t.Tool):
            lines.append(_entry(tool_signature(item), item.title, None, item.description))
        elif isinstance(item, t.Resource):
            lines.append(_entry(item.uri, item.title, item.mime_type, item.description))
        elif isinstance(item, t.ResourceTemplate):
            lines.append(_entry(item.uri_template, item.title, item.mime_type, item.description))
        elif isinstance(item, t.Prompt):
            lines.append(_entry(_prompt_signature(item), item.title, None, item.description))
    if not items:
        lines.append("  (none)")
    return "\n".join(lines)


def raw_items(items: Sequence[Any]) -> list[Any]:
    """Typed items as their JSON (wire) form."""
    return [unstructure(item) for item in items]


# ---------------------------------------------------------------------- stderr


class ProgressDisplay:
    """Progress reports and server log messages, on stderr.

    On a terminal, progress is one bar redrawn in place (and cleared when done, or
    before a log line is printed); elsewhere each report is a plain line.

    Args:
        stream: where to write (stderr).
        terminal: draw a bar (default: whether ``stream`` is a terminal).
        quiet: show nothing.
        indent: put before each line.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        terminal: bool | None = None,
        quiet: bool = False,
        indent: str = "",
    ) -> None:
        self._stream = stream
        self._indent = indent
        self._terminal = stream.isatty() if terminal is None else terminal
        self._quiet = quiet
        self._bar: str | None = None
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            "█░".encode(encoding)
            self._fill, self._empty = "█", "░"
        except (UnicodeEncodeError, LookupError):
            self._fill, self._empty = "#", "-"

    @property
    def quiet(self) -> bool:
        """Whether nothing is shown."""
        return self._quiet

    async def on_progress(self, event: ProgressReceived) -> None:
        """A ``ProgressCallback``: show one report."""
        self.progress(event.progress, event.total, event.message)

    async def on_log(self, params: t.LoggingMessageNotificationParams) -> None:
        """A ``LogCallback``: show one server log message (at most :data:`LOG_LIMIT`
        characters of it)."""
        data = params.data if isinstance(params.data, str) else _compact(params.data)
        source = f"server {clip(params.logger, 100)}" if params.logger else "server"
        self.line(f"[{source} {params.level}] {clip(data, LOG_LIMIT)}")

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Show a progress report (its message on one line, at most
        :data:`PROGRESS_LIMIT` characters, :func:`~mcp_trio._cli_util.terminal_safe`)."""
        if self._quiet:
            return
        if message:
            message = terminal_safe(clip(one_line(message, None), PROGRESS_LIMIT))
        count = f"{progress:g}" + (f"/{total:g}" if total else "")
        if not self._terminal:
            pct = f" ({100 * progress / total:.0f}%)" if total else ""
            tail = f" {message}" if message else ""
            self._write(f"{self._indent}progress: {count}{pct}{tail}\n")
            return
        width = 24
        if total:
            done = max(0, min(width, round(width * progress / total)))
            bar = f"[{self._fill * done}{self._empty * (width - done)}] {count}"
        else:
            bar = f"[{count}]"
        text = self._indent + (f"{bar} {message}" if message else bar)
        columns = shutil.get_terminal_size((80, 24)).columns
        self._bar = text[: max(10, columns - 1)]
        self._write(f"\r\x1b[2K{self._bar}")

    def line(self, text: str) -> None:
        """Print a line (the bar, if any, is cleared first and drawn again after),
        :func:`~mcp_trio._cli_util.terminal_safe`."""
        if self._quiet:
            return
        text = terminal_safe(text)
        if self._terminal and self._bar is not None:
            self._write(f"\r\x1b[2K{self._indent}{text}\n{self._bar}")
        else:
            self._write(f"{self._indent}{text}\n")

    def close(self) -> None:
        """Clear the bar."""
        if self._terminal and self._bar is not None:
            self._write("\r\x1b[2K")
        self._bar = None

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()

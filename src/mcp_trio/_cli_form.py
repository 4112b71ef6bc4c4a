"""Answering a server's elicitation form on the terminal (``mcp-trio call``).

Only when stdin and stderr are both terminals: otherwise the client does not declare
the ``elicitation`` capability, and the server must do without (or fail clearly). The
questions go to stderr and the answers come from stdin; end of input (Ctrl-D) cancels.
Only form mode is offered; a URL-mode request is declined.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import trio

from mcp_sansio import types as t
from mcp_sansio import unstructure

__all__ = ["MAX_TRIES", "fill_form", "terminal_elicitation"]

MAX_TRIES = 3
"""Invalid answers to one field before the form is cancelled."""

_YES = frozenset({"y", "yes", "true", "1"})
_NO = frozenset({"n", "no", "false", "0"})


class _Cancelled(Exception):
    pass


def _choices(prop: Mapping[str, Any]) -> list[Any]:
    """The values a property offers (``enum``, or the ``const`` of each ``oneOf``)."""
    return list(prop.get("enum") or [o.get("const") for o in prop.get("oneOf") or ()])


def _parse(text: str, prop: Mapping[str, Any]) -> Any:
    """The value of one answer; raises ``ValueError`` if it does not fit ``prop``."""
    kind = prop.get("type")
    choices = _choices(prop)
    if kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    if kind == "array":
        items = prop.get("items") or {}
        allowed = items.get("enum") or [o.get("const") for o in items.get("anyOf") or ()]
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if allowed and v not in allowed]
        if bad:
            raise ValueError(f"not one of {', '.join(map(str, allowed))}: {', '.join(bad)}")
        return values
    if choices and text not in choices:
        if text.isdigit() and 1 <= int(text) <= len(choices):
            return choices[int(text) - 1]
        raise ValueError(f"answer one of {', '.join(map(str, choices))}")
    return text


def _question(name: str, prop: Mapping[str, Any], required: bool) -> str:
    label = prop.get("title") or name
    about = f" ({prop['description']})" if prop.get("description") else ""
    kind = prop.get("type")
    choices = _choices(prop)
    if kind == "boolean":
        hint = " [y/n]"
    elif choices:
        hint = " [" + " / ".join(f"{i}) {c}" for i, c in enumerate(choices, 1)) + "]"
    elif kind == "array":
        hint = " [comma-separated]"
    else:
        hint = f" [{kind}]" if kind else ""
    if "default" in prop:
        hint += f" (default: {prop['default']})"
    elif not required:
        hint += " (optional)"
    return f"  {label}{about}{hint}: "


def fill_form(
    message: str,
    schema: Mapping[str, Any],
    ask: Callable[[str], str | None],
    say: Callable[[str], None],
) -> dict[str, Any] | None:
    """Ask for each field of a flat form.

    Args:
        message: the server's message.
        schema: the requested schema (``properties``, ``required``).
        ask: shows a question and returns the answer line (``None`` at end of input).
        say: shows a line.

    Returns:
        The content, or ``None`` if the user cancelled.
    """
    say(f"The server asks: {message}")
    required = set(schema.get("required") or ())
    content: dict[str, Any] = {}
    try:
        for name, prop in (schema.get("properties") or {}).items():
            value = _field(name, prop, name in required, ask, say)
            if value is not None:
                content[name] = value
    except _Cancelled:
        return None
    return content


def _field(
    name: str,
    prop: Mapping[str, Any],
    required: bool,
    ask: Callable[[str], str | None],
    say: Callable[[str], None],
) -> Any:
    for _ in range(MAX_TRIES):
        answer = ask(_question(name, prop, required))
        if answer is None:
            raise _Cancelled
        text = answer.strip()
        if not text:
            if "default" in prop:
                return prop["default"]
            if not required:
                return None
            say("  (an answer is required)")
            continue
        try:
            return _parse(text, prop)
        except ValueError as exc:
            say(f"  ({exc})")
    raise _Cancelled


def _ask_terminal(question: str) -> str | None:
    sys.stderr.write(question)
    sys.stderr.flush()
    line = sys.stdin.readline()
    return line if line else None


def _say_terminal(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def terminal_elicitation(
    params: t.ElicitRequestFormParams | t.ElicitRequestURLParams,
) -> dict[str, Any]:
    """An ``ElicitationCallback`` that asks on the terminal (stdin/stderr)."""
    if isinstance(params, t.ElicitRequestURLParams):
        _say_terminal(f"The server asks you to open {params.url} (declined: not supported here)")
        return {"action": "decline"}
    schema = unstructure(params.requested_schema)
    content = await trio.to_thread.run_sync(
        fill_form, params.message, schema, _ask_terminal, _say_terminal, abandon_on_cancel=True
    )
    if content is None:
        return {"action": "cancel"}
    return {"action": "accept", "content": content}

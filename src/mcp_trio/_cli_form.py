"""Answering a server's elicitation form on the terminal (``mcp-trio call``).

Only when stdin and stderr are both terminals: otherwise the client does not declare
the ``elicitation`` capability, and the server must do without (or fail clearly). The
questions go to stderr and the answers come from stdin; end of input (Ctrl-D) cancels.
Only form mode is offered; a URL-mode request is declined.

Everything shown comes from the server: it is written
:func:`~mcp_trio._cli_util.terminal_safe`, and each label, description and choice is
clipped (:data:`FIELD_LIMIT`; at most :data:`MAX_CHOICES` choices are listed, the others
can still be typed).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import trio

from mcp_sansio import types as t
from mcp_sansio import unstructure

from ._cli_util import clip, one_line, terminal_safe

__all__ = [
    "FIELD_LIMIT",
    "MAX_CHOICES",
    "MAX_TRIES",
    "MESSAGE_LIMIT",
    "fill_form",
    "terminal_elicitation",
]

MAX_TRIES = 3
"""Invalid answers to one field before the form is cancelled."""
FIELD_LIMIT = 200
"""Characters shown of a field's label, description, choice or default."""
MAX_CHOICES = 20
"""Choices listed in a question."""
MESSAGE_LIMIT = 4000
"""Characters shown of the server's message (and of a URL)."""

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
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            what = "a whole number" if kind == "integer" else "a number"
            raise ValueError(f"not {what}: {_short(text)}") from None
    if kind == "array":
        items = prop.get("items") or {}
        allowed = items.get("enum") or [o.get("const") for o in items.get("anyOf") or ()]
        values = [v.strip() for v in text.split(",") if v.strip()]
        bad = [v for v in values if allowed and v not in allowed]
        if bad:
            raise ValueError(f"not one of {_listing(allowed)}: {_short(', '.join(bad))}")
        return values
    if choices and text not in choices:
        if text.isdigit() and 1 <= int(text) <= len(choices):
            return choices[int(text) - 1]
        raise ValueError(f"answer one of {_listing(choices)}")
    return text


def _listing(choices: list[Any]) -> str:
    """The first :data:`MAX_CHOICES` choices, each clipped, and how many more there are."""
    listed = [_short(c) for c in choices[:MAX_CHOICES]]
    if len(choices) > MAX_CHOICES:
        listed.append(f"… ({len(choices) - MAX_CHOICES} more)")
    return ", ".join(listed)


def _short(value: object) -> str:
    """A value of the schema, on one line, clipped to :data:`FIELD_LIMIT`."""
    return clip(one_line(str(value), None), FIELD_LIMIT)


def _question(name: str, prop: Mapping[str, Any], required: bool) -> str:
    label = _short(prop.get("title") or name)
    about = f" ({_short(prop['description'])})" if prop.get("description") else ""
    kind = prop.get("type")
    choices = _choices(prop)
    if kind == "boolean":
        hint = " [y/n]"
    elif choices:
        listed = [f"{i}) {_short(c)}" for i, c in enumerate(choices[:MAX_CHOICES], 1)]
        if len(choices) > MAX_CHOICES:
            listed.append(f"… ({len(choices) - MAX_CHOICES} more)")
        hint = " [" + " / ".join(listed) + "]"
    elif kind == "array":
        hint = " [comma-separated]"
    else:
        hint = f" [{_short(kind)}]" if kind else ""
    if "default" in prop:
        hint += f" (default: {_short(prop['default'])})"
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
    say(f"The server asks: {clip(message, MESSAGE_LIMIT)}")
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
    sys.stderr.write(terminal_safe(question))
    sys.stderr.flush()
    line = sys.stdin.readline()
    return line if line else None


def _say_terminal(text: str) -> None:
    print(terminal_safe(text), file=sys.stderr, flush=True)


async def terminal_elicitation(
    params: t.ElicitRequestFormParams | t.ElicitRequestURLParams,
) -> dict[str, Any]:
    """An ``ElicitationCallback`` that asks on the terminal (stdin/stderr)."""
    if isinstance(params, t.ElicitRequestURLParams):
        url = clip(params.url, MESSAGE_LIMIT)
        _say_terminal(f"The server asks you to open {url} (declined: not supported here)")
        return {"action": "decline"}
    schema = unstructure(params.requested_schema)
    content = await trio.to_thread.run_sync(
        fill_form, params.message, schema, _ask_terminal, _say_terminal, abandon_on_cancel=True
    )
    if content is None:
        return {"action": "cancel"}
    return {"action": "accept", "content": content}

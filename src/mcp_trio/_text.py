"""Peer text made safe to show: the one escaper and the one clipper, shared by the CLI,
the clients' answer errors (the blocking client's too: this module imports no event loop)
and the server's checks (re-exported by ``_util``)."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["LOG_TEXT_LIMIT", "clip", "for_log", "terminal_safe"]

# (A pattern string, compiled by re on first use and cached there: not at import, on
# every stdio server's cold start.)
_UNSAFE: Final = (
    # C0 controls but tab and newline (a carriage return only alone: CRLF line ends are
    # harmless), DEL, C1 controls, and the bidirectional embeddings, overrides and
    # isolates, which reorder the text shown around them ("Trojan Source").
    "\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
)


def _escape_match(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` (peer data, say) with what a terminal would act on written as Python
    writes it in a ``repr``: control characters but newline and tab (``\\x1b``, a lone
    carriage return ``\\r``; a CRLF line end is kept), DEL (``\\x7f``), C1 controls
    (``\\x9b``) and the bidirectional overrides and isolates (``\\u202e``).

    With ``one_line``, every character :meth:`str.isprintable` calls not printable is
    escaped so, line breaks and tabs too (``\\n``, ``\\t``, ``\\u2028``): for text put
    inside one line of a log or of an error message sent to the peer."""
    if one_line:
        if text.isprintable():
            return text
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return re.sub(_UNSAFE, _escape_match, text)


def clip(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and ``… (N more characters)``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


LOG_TEXT_LIMIT: Final = 500
"""The most characters of one piece of peer text that :func:`for_log` keeps."""


def for_log(text: str, limit: int = LOG_TEXT_LIMIT) -> str:
    """``text`` (what a peer sent, or an error message quoting it) made fit for one
    line of a log: clipped to ``limit`` characters, then escaped
    (:func:`terminal_safe` with ``one_line``), so a peer forges no log line (a newline),
    drives no terminal (an ESC sequence) and writes no megabyte into the log."""
    return terminal_safe(clip(text, limit), one_line=True)

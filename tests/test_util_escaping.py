"""The one escaper and the one clipper of peer text (``_util``), which the CLI, the
client's answer errors and the server's form checks share."""

from __future__ import annotations

from mcp_trio import _cli_util
from mcp_trio._text import LOG_TEXT_LIMIT, for_log
from mcp_trio._util import clip, terminal_safe

HOSTILE = "a\x1b[2J\u202eb\tc\r\nd\re\u2028f\u00a0g"


def test_terminal_safe_keeps_line_structure() -> None:
    assert terminal_safe(HOSTILE) == "a\\x1b[2J\\u202eb\tc\r\nd\\re\u2028f\u00a0g"


def test_terminal_safe_one_line_escapes_every_unprintable() -> None:
    # Line breaks and tabs too (a log line, an error message sent to the peer).
    assert terminal_safe(HOSTILE, one_line=True) == (
        "a\\x1b[2J\\u202eb\\tc\\r\\nd\\re\\u2028f\\xa0g"
    )
    assert terminal_safe("plain text", one_line=True) == "plain text"


def test_clip_and_the_cli_share_the_helpers() -> None:
    assert clip("abcdef", 6) == "abcdef"
    assert clip("abcdef", 4) == "abcd… (2 more characters)"
    assert _cli_util.clip is clip
    assert _cli_util.terminal_safe is terminal_safe


def test_for_log_clips_then_escapes_onto_one_line() -> None:
    assert for_log("plain") == "plain"
    assert for_log("a\nb\x1b[2J" + "c" * 10, limit=6) == "a\\nb\\x1b[2… (11 more characters)"
    clipped = "\\x1b" * LOG_TEXT_LIMIT + f"… ({10_000 - LOG_TEXT_LIMIT} more characters)"
    assert for_log("\x1b" * 10_000) == clipped

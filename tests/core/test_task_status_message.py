"""A task's ``statusMessage`` is bounded: :func:`bounded_status_message` cuts it between
two characters, with an ellipsis."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio._tasks import bounded_status_message


def test_a_message_that_fits_is_kept_as_it_is() -> None:
    assert bounded_status_message("", 3) == ""
    assert bounded_status_message("abc", 3) == "abc"
    assert bounded_status_message("é" * 8, 16) == "é" * 8  # (16 bytes exactly)


def test_a_longer_message_is_cut_with_an_ellipsis() -> None:
    assert bounded_status_message("abcd", 3) == "\u2026"
    assert bounded_status_message("abcdefgh", 7) == "abcd\u2026"
    # Cut inside "é" (two bytes) or "😀" (four): the whole character goes.
    assert bounded_status_message("aé" * 10, 5) == "a\u2026"
    assert bounded_status_message("😀" * 10, 10) == "😀\u2026"
    assert bounded_status_message("😀" * 10, 9) == "😀\u2026"


def test_a_lone_surrogate_in_the_cut_part_is_dropped() -> None:
    assert bounded_status_message("ab\ud800" + "x" * 10, 8) == "ab\u2026"


@given(st.text(), st.integers(min_value=3, max_value=64))
def test_the_cut_fits_and_keeps_a_prefix(message: str, max_bytes: int) -> None:
    cut = bounded_status_message(message, max_bytes)
    if len(message.encode("utf-8", "surrogatepass")) <= max_bytes:
        assert cut == message
    else:
        assert cut.endswith("\u2026")
        assert len(cut.encode()) <= max_bytes
        prefix = cut[:-1]
        assert message.startswith(prefix)
        # The longest such prefix: one more character would not fit.
        nxt = message[len(prefix)]
        if not "\ud800" <= nxt <= "\udfff":
            assert len((prefix + nxt).encode()) + 3 > max_bytes

"""A task's ``statusMessage`` is bounded: :func:`bounded_status_message` cuts it between
two characters, with an ellipsis."""

from __future__ import annotations

import re

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
    # Too long by its last character only, the one that is not ASCII.
    assert bounded_status_message("x" * 8 + "é", 8) == "xxxxx\u2026"


def test_a_lone_surrogate_becomes_a_replacement_character() -> None:
    # (os.fsdecode of a file name that is not UTF-8, say: no JSON text can carry it.)
    assert bounded_status_message("file \udcff.txt", 64) == "file \ufffd.txt"
    assert bounded_status_message("\ud83d\ude00", 64) == "\ufffd\ufffd"  # (not a pair in a str)
    # In a message that is cut, too, in the part kept or where the cut falls.
    assert bounded_status_message("ab\ud800" + "x" * 10, 8) == "ab\ufffd\u2026"
    assert bounded_status_message("ab\ud800" + "x" * 10, 7) == "ab\u2026"
    assert bounded_status_message("\udcff" * 10_000, 9) == "\ufffd\ufffd\u2026"


def test_an_ascii_message_is_cut_as_any_other() -> None:
    assert bounded_status_message("x" * 10_000, 10) == "x" * 7 + "\u2026"
    assert bounded_status_message("x" * 10, 10) == "x" * 10


#: Any code point, lone surrogates (category Cs) included: st.text() leaves them out.
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()))


@given(_ANY_TEXT, st.integers(min_value=3, max_value=64))
def test_the_cut_fits_and_keeps_a_prefix(message: str, max_bytes: int) -> None:
    cut = bounded_status_message(message, max_bytes)
    encoded = cut.encode()  # (strict: no lone surrogate is left)
    assert len(encoded) <= max_bytes
    clean = re.sub("[\ud800-\udfff]", "\ufffd", message)
    if len(clean.encode()) <= max_bytes:
        assert cut == clean
    else:
        assert cut.endswith("\u2026")
        prefix = cut[:-1]
        assert clean.startswith(prefix)
        # The longest such prefix: one more character would not fit.
        assert len((prefix + clean[len(prefix)]).encode()) + 3 > max_bytes

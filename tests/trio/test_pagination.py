"""Cursors: round trips, tampering, staleness, and walking a whole list."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import ErrorCode
from mcp_trio._pagination import InvalidCursor, decode_cursor, encode_cursor, paginate

KEY = b"k" * 32
OTHER_KEY = b"o" * 32


@given(st.integers(0, 2**63), st.text(max_size=20))
def test_round_trip(offset: int, version: str) -> None:
    cursor = encode_cursor(offset, list_version=version, key=KEY)
    assert decode_cursor(cursor, list_version=version, key=KEY) == offset


def test_cursor_is_url_safe_and_opaque() -> None:
    cursor = encode_cursor(12, list_version="v1", key=KEY)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_invalid_cursor_is_invalid_params() -> None:
    assert InvalidCursor.error_code == ErrorCode.INVALID_PARAMS
    assert int(InvalidCursor.error_code) == -32602
    assert issubclass(InvalidCursor, ValueError)


def test_stale_version_is_rejected() -> None:
    cursor = encode_cursor(5, list_version="v1", key=KEY)
    with pytest.raises(InvalidCursor, match="stale"):
        decode_cursor(cursor, list_version="v2", key=KEY)


def test_other_key_is_rejected() -> None:
    cursor = encode_cursor(5, list_version="v1", key=KEY)
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor, list_version="v1", key=OTHER_KEY)


def test_forged_offset_is_rejected() -> None:
    cursor = encode_cursor(5, list_version="v1", key=KEY)
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    payload, tag = raw[:-16], raw[-16:]
    assert json.loads(payload) == {"o": 5, "v": "v1"}
    forged = base64.urlsafe_b64encode(b'{"o":500,"v":"v1"}' + tag).rstrip(b"=").decode()
    with pytest.raises(InvalidCursor):
        decode_cursor(forged, list_version="v1", key=KEY)


@given(st.integers(0, 1000), st.data())
def test_any_single_character_change_is_rejected(offset: int, data: st.DataObject) -> None:
    cursor = encode_cursor(offset, list_version="v", key=KEY)
    index = data.draw(st.integers(0, len(cursor) - 1))
    replacement = data.draw(
        st.sampled_from("AQgw-_Zz09").filter(lambda c: c != cursor[index]), label="replacement"
    )
    tampered = cursor[:index] + replacement + cursor[index + 1 :]
    # The last character may carry only padding bits that the decoder ignores; such a
    # change decodes to the very same bytes, so it is the same cursor.
    if base64.urlsafe_b64decode(tampered + "=" * (-len(tampered) % 4)) == (
        base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    ):
        return
    with pytest.raises(InvalidCursor):
        decode_cursor(tampered, list_version="v", key=KEY)


@given(st.text(max_size=60) | st.from_regex(r"[A-Za-z0-9_-]{0,60}", fullmatch=True))
def test_garbage_only_ever_raises_invalid_cursor(garbage: str) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(garbage, list_version="v", key=KEY)


def _sign(payload: bytes) -> str:
    tag = hmac.new(KEY, b"mcp-trio pagination cursor v1\x00" + payload, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(payload + tag[:16]).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"[]",
        b'{"o":1}',
        b'{"o":-1,"v":"v"}',
        b'{"o":true,"v":"v"}',
        b'{"o":1.5,"v":"v"}',
    ],
)
def test_signed_but_malformed_payload_is_rejected(payload: bytes) -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor(_sign(payload), list_version="v", key=KEY)


def test_overlong_cursor_is_rejected_before_decoding() -> None:
    with pytest.raises(InvalidCursor):
        decode_cursor("A" * 2000, list_version="v", key=KEY)


@pytest.mark.parametrize("offset", [-1, True])
def test_encode_rejects_bad_offsets(offset: int) -> None:
    with pytest.raises(ValueError, match="offset"):
        encode_cursor(offset, list_version="v", key=KEY)


@given(st.lists(st.integers(), max_size=40), st.integers(1, 12))
def test_paginate_walks_the_whole_list_once(items: list[int], page_size: int) -> None:
    seen: list[int] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = paginate(items, cursor, page_size, list_version="v", key=KEY)
        pages += 1
        assert len(page) <= page_size
        seen.extend(page)
        if cursor is None:
            break
        assert len(page) == page_size
    assert seen == items
    assert pages == max(1, -(-len(items) // page_size))


def test_paginate_first_page_and_end() -> None:
    assert paginate([], None, 3, list_version="v", key=KEY) == ([], None)
    assert paginate([1, 2, 3], None, 3, list_version="v", key=KEY) == ([1, 2, 3], None)
    page, cursor = paginate([1, 2, 3, 4], None, 3, list_version="v", key=KEY)
    assert page == [1, 2, 3]
    assert cursor is not None
    assert decode_cursor(cursor, list_version="v", key=KEY) == 3


def test_paginate_rejects_stale_and_out_of_range_cursors() -> None:
    _, cursor = paginate(list(range(10)), None, 3, list_version="v1", key=KEY)
    assert cursor is not None
    with pytest.raises(InvalidCursor):
        paginate(list(range(10)), cursor, 3, list_version="v2", key=KEY)
    with pytest.raises(InvalidCursor, match="past the end"):
        paginate([1], encode_cursor(5, list_version="v", key=KEY), 3, list_version="v", key=KEY)


def test_paginate_rejects_bad_page_size() -> None:
    with pytest.raises(ValueError, match="page_size"):
        paginate([1], None, 0, list_version="v", key=KEY)

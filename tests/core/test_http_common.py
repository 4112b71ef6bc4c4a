"""Header-level rules shared by the Streamable HTTP server and client. No I/O."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio._http_common import (
    _split_entry,
    header_value_matches,
    host_allowed,
    is_json_content_type,
    json_response,
    media_type_allowed,
    origin_allowed,
)
from mcp_sansio.http import (
    HeaderParam,
    HttpRequest,
    HttpResponse,
    decode_header_value,
    encode_header_value,
    parse_header_params,
)

# ------------------------------------------------------------------ values


def test_request_headers_are_case_insensitive_and_keep_repeats() -> None:
    req = HttpRequest(
        method="POST",
        target="/mcp?x=1",
        headers=[(b"Accept", b"application/json"), ("ACCEPT", "text/event-stream")],
    )
    assert req.header("accept") == "application/json, text/event-stream"
    assert req.header("Accept") == req.header("ACCEPT")
    assert req.header("missing") is None
    assert req.path == "/mcp"
    assert req.headers[0] == (b"accept", b"application/json")
    # Latin-1 text, with repeats (joined) or without (the table built in one pass).
    for extra in [(b"X-C", b"1")], [(b"X-B", b"\xe0"), (b"X-C", b"1")]:
        req = HttpRequest(method="GET", target="/", headers=[(b"X-B", b"caf\xe9"), *extra])
        assert req.header("x-c") == "1"
        assert req.header("x-b") == ("caf\xe9" if len(extra) == 1 else "caf\xe9, \xe0")


def _general(headers: Any) -> tuple[tuple[bytes, bytes], ...]:
    """What the header converter gives, spelled out field by field."""

    def raw(v: Any) -> bytes:
        return v.encode("latin-1") if isinstance(v, str) else bytes(v)

    return tuple((raw(name).lower(), raw(value).strip(b" \t")) for name, value in headers)


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"X-A", b" 1 \t"), (b"x-b", b"\t2")],
        ((b"X-A", b"1"), [b"Accept", b" a/b "]),  # (a tuple of them; a list as a pair)
        [("X-A", " 1 "), (b"x-b", "2")],  # text
        [(bytearray(b"X-A"), bytearray(b" 1 "))],  # not bytes: converted to bytes
        [{b"X-A": 1, b" 1 ": 2}],  # (a two-key dict unpacks as its keys)
        ["ab"],  # (a two-character text unpacks as two names)
    ],
)
def test_headers_are_stored_as_their_fields_say(headers: Any) -> None:
    stored = HttpRequest(method="GET", target="/", headers=headers).headers
    assert stored == _general(headers)
    assert all(type(name) is bytes and type(value) is bytes for name, value in stored)


_FIELD_NAMES = st.sampled_from([b"X-A", b"x-a", b"X-a", b"Host", b"HOST", b"\xe9", b""])
_FIELD_VALUES = st.binary(max_size=6) | st.sampled_from([b" \t v \t ", b"\x80\xff", b"", b"\t"])


@given(
    st.lists(st.tuples(_FIELD_NAMES, _FIELD_VALUES), max_size=6),
    st.sampled_from([list, tuple]),
)
def test_byte_pairs_are_stored_and_looked_up_as_spelled_out(
    fields: list[tuple[bytes, bytes]], kind: Any
) -> None:
    """Repeated names in any case, whitespace, obs-text and empty values: stored as the
    field-by-field conversion stores them, and each name's value is its fields' values
    in order, joined (with or without a repeat: the two ways the table is built)."""
    request = HttpRequest(method="GET", target="/", headers=kind(fields))
    assert request.headers == _general(fields)
    for name in {name.lower() for name, _ in fields}:
        found = [value.strip(b" \t").decode("latin-1") for n, value in fields if n.lower() == name]
        assert request.header(name.decode("latin-1")) == ", ".join(found)
    assert request.header("absent") is None


@pytest.mark.parametrize("headers", [[(b"a", b"1", b"2")], [(b"a",)], [b"a"], [1]])
def test_headers_that_are_not_pairs_are_refused_as_ever(headers: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as refused:
        HttpRequest(method="GET", target="/", headers=headers)
    with pytest.raises(refused.type):
        _general(headers)


def test_request_accepts_a_mapping_and_trims_whitespace() -> None:
    req = HttpRequest(method="GET", target="/", headers={"Mcp-Session-Id": "  abc \t"})
    assert req.header("mcp-session-id") == "abc"
    assert HttpResponse(status=200, headers={"X-A": "1"}).header("x-a") == "1"


@pytest.mark.parametrize(
    ("target", "path", "host", "scheme"),
    [
        ("/mcp", "/mcp", "header.example", None),
        ("/mcp?x=1", "/mcp", "header.example", None),
        # Absolute form (RFC 9112 3.2.2): its authority in place of the Host header.
        ("http://127.0.0.1:8000/mcp", "/mcp", "127.0.0.1:8000", "http"),
        ("HTTPS://Localhost/mcp?x=1", "/mcp", "Localhost", "https"),
        ("http://[::1]:9/mcp", "/mcp", "[::1]:9", "http"),
        ("http://localhost", "/", "localhost", "http"),  # (an empty path is "/")
        ("http://localhost?x=1", "/", "localhost", "http"),
        ("https://localhost?x=1", "/", "localhost", "https"),
        ("HTTPS://Localhost", "/", "Localhost", "https"),  # (lower case with no path too)
        ("HTTP://localhost?x=1", "/", "localhost", "http"),
        # Not a target this form names: userinfo, no host, another scheme, a fragment.
        ("http://user@localhost/mcp", "http://user@localhost/mcp", "header.example", None),
        ("https://user@localhost/mcp", "https://user@localhost/mcp", "header.example", None),
        ("http:///mcp", "http:///mcp", "header.example", None),
        ("ftp://localhost/mcp", "ftp://localhost/mcp", "header.example", None),
        ("http://localhost/mcp#top", "http://localhost/mcp#top", "header.example", None),
        ("https://localhost/mcp#top", "https://localhost/mcp#top", "header.example", None),
        ("*", "*", "header.example", None),
    ],
)
def test_path_host_and_scheme_of_each_target_form(
    target: str, path: str, host: str, scheme: str | None
) -> None:
    request = HttpRequest(method="POST", target=target, headers={"Host": "header.example"})
    assert (request.path, request.host, request.scheme) == (path, host, scheme)
    assert HttpRequest(method="POST", target="/mcp").host is None


def test_with_body_keeps_the_head_and_its_lookup_table() -> None:
    head = HttpRequest(method="POST", target="/mcp", headers=[(b"X-A", b" 1 ")])
    assert head.header("x-a") == "1"  # builds the table
    full = head.with_body(b"{}")
    assert full == HttpRequest(method="POST", target="/mcp", headers=[(b"x-a", b"1")], body=b"{}")
    assert full.headers is head.headers and full._index is head._index
    assert (head.body, full.header("X-A")) == (b"", "1")
    assert HttpRequest(method="GET", target="/").with_body(b"x").header("a") is None


# ------------------------------------------------------------------ value encoding (spec table)

SPEC_ENCODINGS = [
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("value", "encoded"), SPEC_ENCODINGS)
def test_encoding_examples_of_the_spec(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(True, "true"), (False, "false"), (42, "42"), (-7, "-7"), ("", "=?base64??=")],
)
def test_encoding_of_other_types(value: Any, encoded: str) -> None:
    assert encode_header_value(value) == encoded


def test_integers_outside_the_safe_range_are_refused() -> None:
    with pytest.raises(ValueError, match="safe range"):
        encode_header_value(2**53)


@pytest.mark.parametrize(
    "raw",
    [
        "bad\x01control",
        "non-ascii é",
        "=?base64?not base64!?=",
        "=?base64?/w==?=",  # valid Base64 of invalid UTF-8
    ],
)
def test_decoding_refuses_invalid_values(raw: str) -> None:
    assert decode_header_value(raw) is None


def test_decoding_keeps_plain_values_and_tabs() -> None:
    assert decode_header_value("a\tb c") == "a\tb c"
    assert decode_header_value("=?BASE64?x?=") == "=?BASE64?x?="  # markers are case-sensitive


@given(st.text())
def test_encoding_round_trips_and_is_header_safe(value: str) -> None:
    encoded = encode_header_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert encoded == encoded.strip()
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize(
    ("decoded", "body", "matches"),
    [
        ("42", 42, True),
        ("42.0", 42, True),
        ("42", 42.0, True),
        ("43", 42, False),
        ("x", 42, False),
        ("nan", 42, False),
        ("-7", -7, True),
        ("4.2e1", 42, True),
        # Only JSON's spelling of a number: a gateway reading the header must see the
        # same value as the server reading the body.
        ("1_000", 1000, False),
        ("4_2", 42, False),
        ("+42", 42, False),
        (" 42", 42, False),
        ("42 ", 42, False),
        ("042", 42, False),
        ("42.", 42, False),
        ("\u0664\u0662", 42, False),  # (Arabic-Indic digits: int() reads them as 42)
        ("1e400", 42, False),
        ("1e+2", 100, True),
        ("1E-2", 0.01, True),
        # Numbers too long for Python to read or compare: refused, not raised out of
        # the server (which dropped the connection and logged a traceback).
        ("9" * 400, 42, False),
        ("9" * 5_000, 42, False),
        ("inf", float("inf"), False),
        ("true", True, True),
        ("True", True, False),
        ("false", False, True),
        ("1", True, False),
        ("abc", "abc", True),
        ("abc", "ABC", False),
        ("{}", {}, False),
    ],
)
def test_header_values_match_the_body(decoded: str, body: Any, matches: bool) -> None:
    assert header_value_matches(decoded, body) is matches


# ------------------------------------------------------------------ media types


@pytest.mark.parametrize(
    ("accept", "media", "allowed"),
    [
        ("application/json, text/event-stream", "application/json", True),
        ("application/json, text/event-stream", "text/event-stream", True),
        ("application/json", "text/event-stream", False),
        ("*/*", "text/event-stream", True),
        ("text/*", "text/event-stream", True),
        ("text/*", "application/json", False),
        ("application/json;q=0, */*", "application/json", False),
        ("application/json;q=0.5", "application/json", True),
        ("application/json;q=bogus", "application/json", False),
        ("Application/JSON", "application/json", True),
        ("garbage, ,", "application/json", False),
        (None, "application/json", False),
    ],
)
def test_accept_rules(accept: str | None, media: str, allowed: bool) -> None:
    assert media_type_allowed(accept, media) is allowed


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("APPLICATION/JSON", True),
        ("text/plain", False),
        ("application/json-seq", False),
        (None, False),
    ],
)
def test_content_type_rules(value: str | None, ok: bool) -> None:
    assert is_json_content_type(value) is ok


# ------------------------------------------------------------------ origin and host

LOCAL = ("localhost:*", "127.0.0.1:*", "[::1]:*")


@pytest.mark.parametrize(
    ("host", "allowed", "ok"),
    [
        ("localhost:8000", LOCAL, True),
        ("LOCALHOST", LOCAL, True),
        ("127.0.0.1:1", LOCAL, True),
        ("[::1]:8080", LOCAL, True),
        ("[::1]", LOCAL, True),
        ("evil.example:8000", LOCAL, False),
        ("localhost.evil.example", LOCAL, False),
        ("example.com", ("example.com",), True),
        ("example.com:443", ("example.com",), False),
        ("example.com:443", ("example.com:443",), True),
        ("[::1", LOCAL, False),
        (None, LOCAL, False),
    ],
)
def test_host_rules(host: str | None, allowed: tuple[str, ...], ok: bool) -> None:
    assert host_allowed(host, allowed) is ok


@pytest.mark.parametrize(
    ("origin", "allowed", "ok"),
    [
        ("http://localhost:3000", ("http://localhost:*",), True),
        ("http://localhost", ("http://localhost:*",), True),
        ("https://localhost:3000", ("http://localhost:*",), False),
        ("http://evil.example", ("http://localhost:*",), False),
        ("null", ("http://localhost:*",), False),
        ("null", ("null",), True),
        ("https://app.example", ("https://app.example",), True),
        ("https://app.example", ("*",), True),
        ("not a url", ("http://localhost:*",), False),
    ],
)
def test_origin_rules(origin: str, allowed: tuple[str, ...], ok: bool) -> None:
    assert origin_allowed(origin, allowed) is ok


# ------------------------------------------------------------------ x-mcp-header annotations


def test_the_spec_example_tool_is_valid() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "opts": {
                "type": "object",
                "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}},
            },
        },
        "required": ["region", "query"],
    }
    params = parse_header_params(schema)
    assert params == (
        HeaderParam(name="Region", path=("region",)),
        HeaderParam(name="Dry-Run", path=("opts", "dry")),
    )
    assert params[0].header == "mcp-param-region"
    assert params[1].value_in({"opts": {"dry": True}}) is True
    assert params[1].value_in({"opts": 3}) is None
    assert parse_header_params({"type": "object"}) == ()
    assert parse_header_params(None) == ()


def _prop(**extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": {"type": "string", **extra}}}


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (_prop(**{"x-mcp-header": ""}), "token"),
        (_prop(**{"x-mcp-header": "Has Space"}), "token"),
        (_prop(**{"x-mcp-header": "Bad\r\nName"}), "token"),
        (_prop(**{"x-mcp-header": "Trailing\n"}), "token"),  # ($ matched before a last \n)
        (_prop(**{"x-mcp-header": 7}), "token"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "x-mcp-header": "Same"},
                    "b": {"type": "string", "x-mcp-header": "SAME"},
                },
            },
            "unique",
        ),
        (
            {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
            "only string",
        ),
        (
            {"type": "object", "properties": {"o": {"type": "object", "x-mcp-header": "O"}}},
            "only string",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "l": {"type": "array", "items": {"type": "string", "x-mcp-header": "L"}}
                },
            },
            "reachable",
        ),
        (
            {"oneOf": [{"type": "object", "properties": {"a": {"x-mcp-header": "A"}}}]},
            "reachable",
        ),
        ({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}, "reachable"),
        ({"type": "string", "x-mcp-header": "Root"}, "reachable"),
    ],
)
def test_invalid_annotations_make_the_tool_invalid(schema: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_header_params(schema)


def test_annotation_text_inside_values_is_not_an_annotation() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"type": "object", "default": {"x-mcp-header": "NotOne"}}},
    }
    assert parse_header_params(schema) == ()


def test_accept_parameters_other_than_q_are_ignored() -> None:
    assert media_type_allowed("application/json;level=1", "application/json")


def test_annotations_under_composition_keywords_that_are_fine() -> None:
    schema = {"allOf": [{"type": "object"}], "properties": {"a": {"type": "string"}}}
    assert parse_header_params(schema) == ()


def test_header_lookups_follow_the_fields_through_copies_and_mixed_types() -> None:
    req = HttpRequest(
        method="POST",
        target="/mcp",
        headers=[(b"X-A", b" 1 "), (b"x-a", b"2"), (b"x-b", "str value"), ("X-C", b"3")],
    )
    assert req.headers == ((b"x-a", b"1"), (b"x-a", b"2"), (b"x-b", b"str value"), (b"x-c", b"3"))
    assert (req.header("X-A"), req.header("x-b"), req.header("x-c")) == ("1, 2", "str value", "3")
    copy = attrs.evolve(req, body=b"{}")  # a copy looks its fields up afresh
    assert copy.header("x-a") == "1, 2" and copy == attrs.evolve(req, body=b"{}")
    assert copy != req and req == HttpRequest(method="POST", target="/mcp", headers=req.headers)
    assert "_index" not in repr(req)
    tuple_form = HttpRequest(method="GET", target="/", headers=((b"Host", b"h"),))
    assert tuple_form.header("host") == "h"
    assert HttpResponse(status=200, headers=[(b"A", b"x"), (b"a", b"y")]).header("a") == "x, y"


def test_header_pairs_of_any_bytes_like_type_are_normalized_alike() -> None:
    class Name(bytes):
        pass

    expected = ((b"x-a", b"1"), (b"x-b", b"2"))
    cases: list[list[tuple[Any, Any]]] = [
        [(b"X-A", b" 1"), (b"X-B", b"2\t")],  # (the one-comprehension path)
        [(bytearray(b"X-A"), b"1"), (b"X-B", bytearray(b" 2 "))],
        [(Name(b"X-A"), Name(b"1 ")), ("X-B", "2")],
    ]
    for fields in cases:
        for given_as in (fields, tuple(fields)):
            normalized = HttpResponse(status=200, headers=given_as).headers
            assert normalized == expected
            assert all(type(n) is bytes and type(v) is bytes for n, v in normalized)
    with pytest.raises(ValueError, match="unpack"):
        HttpResponse(status=200, headers=[(b"x-a", b"1", b"extra")])  # type: ignore[list-item]


def test_the_same_accept_value_gives_the_same_answer_every_time() -> None:
    accept = "text/event-stream;q=0, application/json"
    for _ in range(3):
        assert media_type_allowed(accept, "application/json")
        assert not media_type_allowed(accept, "text/event-stream")


def test_a_json_response_is_the_response_its_fields_say() -> None:
    fast = json_response(200, b"{}")
    slow = HttpResponse(status=200, headers={"Content-Type": "application/json"}, body=b"{}")
    assert fast == slow and fast.header("CONTENT-TYPE") == "application/json"
    assert fast.header("content-length") is None
    extra = json_response(404, b"[]", ((b"mcp-session-id", b"s"),))
    assert extra.headers == ((b"content-type", b"application/json"), (b"mcp-session-id", b"s"))
    assert "_index" not in repr(fast) and fast == attrs.evolve(fast)


def test_host_entries_give_the_same_answer_every_time() -> None:
    # (the allow list's entries are split once; each request's Host afresh)
    for _ in range(2):
        assert host_allowed("LOCALHOST:1", LOCAL) and host_allowed("[::1]", LOCAL)
        assert not host_allowed("evil.example:1", LOCAL)
        assert not host_allowed("example.com:443", ("example.com",))


def test_allow_list_entries_split_once_are_bounded_and_still_right_past_the_bound() -> None:
    # host_allowed keeps the split of each allow-list entry (an lru cache of 64): a
    # longer list, or many lists, evicts the oldest; an evicted entry is split again.
    entries = [f"host{i}.example:{8000 + i}" for i in range(150)]
    assert host_allowed("host149.example:8149", entries)
    assert _split_entry.cache_info().currsize == _split_entry.cache_info().maxsize == 64
    assert host_allowed("HOST0.example:8000", entries)  # (split again, after eviction)
    assert not host_allowed("host0.example:8001", entries)

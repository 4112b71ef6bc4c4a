"""Each distinct header field is validated by h11 once (``_http_h11.head_fields``),
through h11's private header API: what is relied on of it, the fallback to h11's public
path, and that nothing h11 would refuse gets through the kept fields."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import h11
import h11._headers
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio.http import HttpRequest, HttpResponse
from mcp_trio import _http_h11
from mcp_trio._http_client import open_http_client

from .test_http_support import (
    IO_TIMEOUT,
    App,
    RawConnection,
    call,
    client_connection_config,
    initialize_body,
    modern,
    server_writes,
    start_server,
    text_of,
)

Field = tuple[bytes, bytes]
Fields = tuple[Field, ...]


@contextmanager
def public_path() -> Iterator[None]:
    """As with an h11 whose private header API is missing: every message is a list."""
    with mock.patch.object(_http_h11, "_H11", None), mock.patch.object(_http_h11, "_VALIDATED", {}):
        yield


@contextmanager
def empty_table() -> Iterator[dict[Field, Any]]:
    table: dict[Field, Any] = {}
    with mock.patch.object(_http_h11, "_VALIDATED", table):
        yield table


@pytest.fixture(params=["private", "public"])
def path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both paths: h11's private header API (the installed h11's), and the fallback."""
    with public_path() if request.param == "public" else empty_table():
        yield request.param


# ------------------------------------------------------------------ what is relied on


def test_the_installed_h11s_private_header_api_is_what_head_fields_relies_on() -> None:
    """Pinned: an h11 that changes any of this fails here (the probe then falls back to
    the public path, slower but right); see the theory in ``_http_h11``."""
    assert _http_h11._H11 is not None
    validated = h11._headers.normalize_and_validate([(b"Mcp-Session-Id", b"a b")])
    assert isinstance(validated, h11._headers.Headers)
    assert validated._full_items == [(b"Mcp-Session-Id", b"mcp-session-id", b"a b")]
    headers = h11._headers.Headers([(b"Host", b"host", b"x")])
    request = h11.Request(method="GET", target="/", headers=headers)
    assert request.headers is headers  # (taken as it is: not checked again)
    response = h11.Response(status_code=200, headers=headers)
    assert response.headers is headers
    assert headers.raw_items() == [(b"Host", b"x")]
    assert list(headers) == [(b"host", b"x")]


def break_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    # A validator that lower-cases but checks nothing.
    monkeypatch.setattr(
        h11._headers,
        "normalize_and_validate",
        lambda fields: h11._headers.Headers([(n, n.lower(), v) for n, v in fields]),
    )


def rename_items(monkeypatch: pytest.MonkeyPatch) -> None:
    class Renamed:
        def __init__(self, items: Any) -> None:
            self.items = items

    monkeypatch.setattr(h11._headers, "normalize_and_validate", Renamed)


def copy_given_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    # An h11 whose events copy (and check) whatever they are given.
    real = h11.Request.__init__

    def init(self: h11.Request, *, headers: Any, **kwargs: Any) -> None:
        real(self, headers=list(headers), **kwargs)

    monkeypatch.setattr(h11.Request, "__init__", init)


@pytest.mark.parametrize(
    "change",
    [
        lambda mp: mp.delattr(h11._headers, "normalize_and_validate"),
        lambda mp: mp.delattr(h11._headers, "Headers"),
        break_validator,
        rename_items,
        copy_given_headers,
    ],
    ids=["no-validator", "no-headers", "no-check", "no-full-items", "events-copy"],
)
def test_an_h11_that_differs_gets_the_public_path(
    monkeypatch: pytest.MonkeyPatch, change: Any
) -> None:
    assert _http_h11._h11_private() is not None
    change(monkeypatch)
    assert _http_h11._h11_private() is None


def test_on_the_public_path_nothing_is_kept_and_the_head_is_the_same() -> None:
    request = HttpRequest(
        method="POST", target="/mcp", headers=[("host", "a"), ("accept", "*/*")], body=b"{}"
    )
    extra = [(b"user-agent", b"mcp-trio")]
    with empty_table() as table:
        private = _http_h11.request_events(request, extra)
        assert set(table) == {(b"host", b"a"), (b"accept", b"*/*"), (b"user-agent", b"mcp-trio")}
    with public_path():
        public = _http_h11.request_events(request, extra)
        assert not _http_h11._VALIDATED
    assert isinstance(private[0], h11.Request) and isinstance(public[0], h11.Request)
    assert isinstance(private[0].headers, h11._headers.Headers)
    assert private == public
    wire = [h11.Connection(h11.CLIENT) for _ in range(2)]
    assert [wire[0].send(e) for e in private] == [wire[1].send(e) for e in public]


# ------------------------------------------------------------------ nothing h11 refuses


NAMES = st.sampled_from(
    [
        b"host",
        b"X-Thing",
        b"transfer-encoding",
        b"Content-Length",
        b"Connection",
        b"Authorization",
        b"dpop",
        b"bad name",
        b"a:b",
        b"",
    ]
)
VALUES = st.sampled_from(
    [
        b"1",
        b"chunked",
        b"Chunked",
        b"gzip",
        b"close",
        b"a\r\nb",
        b"a\nb",
        b"a\x00",
        b" a",
        b"",
        b"\xe9t\xe9",
        b"a b",
    ]
)


def outcome(fields: Fields, length: bytes | None) -> tuple[str, Any]:
    """What h11 makes of ``fields`` and the length, through ``head_fields``: the request
    as it goes out, or the refusal."""
    try:
        head = h11.Request(method="POST", target="/", headers=_http_h11.head_fields(fields, length))
    except h11.LocalProtocolError as exc:
        return "refused", str(exc)
    return "sent", h11.Connection(h11.CLIENT).send(head)


def kept(fields: Fields) -> set[Field]:
    """Which of ``fields`` the table should hold once they were given: those before the
    first that h11's validator refuses or that names a Content-Length or
    Transfer-Encoding, and of those only the library's own (``host``, ``connection``
    here), not a user's or a credential."""
    kept = set()
    for name, value in fields:
        try:
            h11._headers.normalize_and_validate([(name, value)])
        except h11.LocalProtocolError:
            break
        lower = name.lower()
        if lower in (b"content-length", b"transfer-encoding"):
            break
        if lower in (b"host", b"connection"):
            kept.add((name, value))
    return kept


@given(
    fields=st.lists(st.tuples(NAMES, VALUES), max_size=5).map(tuple),
    length=st.sampled_from([None, b"0", b"17"]),
)
def test_the_kept_sets_let_through_exactly_what_h11_does(
    fields: Fields, length: bytes | None
) -> None:
    """Any fields (illegal ones, Transfer-Encoding in any case or coding, none or two,
    Content-Length equal to ours or not, credentials), given once and again: the same
    request on the wire, or the same refusal, as h11's public path; a refused field,
    and a credential, is not kept."""
    with public_path():
        expected = outcome(fields, length)
    with empty_table() as table:
        assert outcome(fields, length) == expected
        assert set(table) == kept(fields)
        assert outcome(fields, length) == expected  # (from the table, when kept)


def test_a_session_id_with_a_line_break_is_refused_every_time() -> None:
    """A value taken from the server (its session id) goes out only if h11 takes it."""
    request = HttpRequest(
        method="POST",
        target="/mcp",
        headers=[("host", "a"), ("mcp-session-id", "1\r\nx-injected: 1")],
        body=b"{}",
    )
    with empty_table() as table:
        for _ in range(2):
            with pytest.raises(_http_h11.Unframeable, match="Illegal header value"):
                _http_h11.request_events(request, [])
        assert list(table) == [(b"host", b"a")]  # (the field before it, valid)


def test_fields_with_a_content_length_of_their_own_are_not_kept() -> None:
    """h11 merges two equal lengths and refuses two that differ: such fields (a hook's
    response) take the public path, which does; the length is not kept."""
    fields = ((b"host", b"a"), (b"content-length", b"2"))
    with empty_table() as table:
        head = h11.Request(method="POST", target="/", headers=_http_h11.head_fields(fields, b"2"))
        assert list(head.headers) == [(b"host", b"a"), (b"content-length", b"2")]
        with pytest.raises(h11.LocalProtocolError, match="conflicting Content-Length"):
            h11.Request(method="POST", target="/", headers=_http_h11.head_fields(fields, b"3"))
        assert list(table) == [(b"host", b"a")]


def test_transfer_encoding_fields_are_not_kept_and_two_are_refused_every_time() -> None:
    """Like Content-Length, h11 checks Transfer-Encoding across fields (two are refused):
    such fields take the public path every time, and are not kept."""
    coding = (b"transfer-encoding", b"chunked")
    with empty_table() as table:
        for _ in range(2):
            fields = _http_h11.head_fields(((b"host", b"a"), coding), None)
            head = h11.Request(method="POST", target="/", headers=fields)
            assert list(head.headers) == [(b"host", b"a"), coding]
        assert list(table) == [(b"host", b"a")]
        for _ in range(2):
            fields = _http_h11.head_fields(((b"host", b"a"), coding, coding), None)
            with pytest.raises(h11.LocalProtocolError, match="multiple Transfer-Encoding"):
                h11.Request(method="POST", target="/", headers=fields)
        assert list(table) == [(b"host", b"a")]


def test_the_table_is_bounded() -> None:
    """Past the bound the table forgets every field, then keeps those sent again."""
    forgotten = 0
    with empty_table() as table:
        for i in range(_http_h11.VALIDATED_MAX * 2 + 1):
            before = len(table)
            fields = ((b"host", b"a"), (b"mcp-name", str(i).encode()))
            headers = _http_h11.head_fields(fields, b"0")
            assert list(headers) == [*fields, (b"content-length", b"0")]
            assert fields[1] in table
            assert len(table) <= _http_h11.VALIDATED_MAX
            forgotten += len(table) < before
        assert forgotten == 2  # (at the 256th name, and at the 511th)
        assert (b"host", b"a") in table  # (sent again after)


def test_the_kept_fields_are_not_shared_with_the_events() -> None:
    fields = ((b"host", b"a"),)
    with empty_table() as table:
        first = _http_h11.head_fields(fields, None)
        assert isinstance(first, h11._headers.Headers)
        first._full_items.append((b"x", b"x", b"y"))
        assert list(_http_h11.head_fields(fields, None)) == [(b"host", b"a")]
        assert table == {(b"host", b"a"): (b"host", b"host", b"a")}


@pytest.mark.parametrize(
    "name", ["authorization", "Proxy-Authorization", "DPoP", "cookie", "set-cookie"]
)
def test_a_credential_is_checked_every_time_and_never_kept(name: str) -> None:
    """The table is the module's: a closed client's token must not stay in it."""
    secret = (name.encode(), b"Bearer s3cret")
    with empty_table() as table:
        for _ in range(2):
            headers = _http_h11.head_fields(((b"host", b"a"), secret), None)
            assert list(headers) == [(b"host", b"a"), (name.lower().encode(), b"Bearer s3cret")]
            assert list(table) == [(b"host", b"a")]
        with pytest.raises(h11.LocalProtocolError, match="Illegal header value"):
            _http_h11.head_fields(((name.encode(), b"Bearer s3cret\r\nx: 1"),), None)


@pytest.mark.parametrize("name", ["X-API-Key", "x-custom", "mcp-param-region", "Mcp-Param-Key"])
def test_a_field_the_library_does_not_write_or_that_may_be_secret_is_never_kept(
    name: str,
) -> None:
    """A user's header (``headers={"X-API-Key": ...}``) and a tool's argument
    (``Mcp-Param-*``) are checked each time, not left in the module's table when the client
    is gone."""
    field = (name.encode(), b"sk-live-s3cret")
    with empty_table() as table:
        for _ in range(2):
            headers = _http_h11.head_fields(((b"host", b"a"), field), b"0")
            assert list(headers) == [
                (b"host", b"a"),
                (name.lower().encode(), b"sk-live-s3cret"),
                (b"content-length", b"0"),
            ]
            assert list(table) == [(b"host", b"a")]
        with pytest.raises(h11.LocalProtocolError, match="Illegal header value"):
            _http_h11.head_fields(((name.encode(), b"s3cret\r\nx: 1"),), None)


def test_only_short_fields_are_kept_so_the_table_is_bounded_in_bytes() -> None:
    """A field longer than ``FIELD_MAX`` (name and value) is checked each time, so the
    table holds at most ``VALIDATED_MAX * FIELD_MAX`` bytes: 300 distinct 60 KB
    ``Mcp-Name`` values leave none of them in it."""
    room = _http_h11.FIELD_MAX - len(b"mcp-name")
    longest = (b"mcp-name", b"u" * room)
    too_long = (b"mcp-name", b"v" * (room + 1))
    with empty_table() as table:
        for _ in range(2):
            headers = _http_h11.head_fields((longest, too_long), None)
            assert list(headers) == [longest, too_long]
        assert list(table) == [longest]
        for i in range(300):
            field = (b"mcp-name", b"%d" % i + b"w" * 60_000)
            assert list(_http_h11.head_fields((field,), None)) == [field]
        assert list(table) == [longest]
        most = 0
        for i in range(_http_h11.VALIDATED_MAX * 2):
            _http_h11.head_fields(((b"mcp-name", (b"%d" % i).rjust(room, b"x")),), None)
            size = sum(len(name) + len(value) for name, value in table)
            assert size <= _http_h11.VALIDATED_MAX * _http_h11.FIELD_MAX
            most = max(most, size)
        assert most == _http_h11.VALIDATED_MAX * _http_h11.FIELD_MAX  # (filled, not past)


async def test_a_closed_clients_extra_header_is_not_left_in_the_table(
    nursery: trio.Nursery,
) -> None:
    """End to end: after a client that sent ``X-API-Key`` is closed, it is not in the
    module's table (its ``Accept`` and session id, say, are)."""
    server = await start_server(nursery, http={"response_mode": "json"})
    with empty_table() as table:
        with trio.fail_after(IO_TIMEOUT):
            async with open_http_client(
                server.url,
                headers={"X-API-Key": "sk-live-s3cret"},
                connection_config=client_connection_config("legacy"),
            ) as client:
                assert text_of(await client.request("tools/call", call("echo", text="a"))) == "a"
        names = {name.lower() for name, _ in table}
        assert {b"accept", b"mcp-session-id"} <= names
        assert b"x-api-key" not in names
        assert not [value for _, value in table if b"s3cret" in value]


# ------------------------------------------------------------------ both ends, both paths


async def test_a_sessions_heads_are_validated_once(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client and server: once the session's fields have been seen, h11 checks no head
    again (it still parses what it receives: ``_parsed``, no regexes)."""
    checked: list[Any] = []
    real = h11._headers.normalize_and_validate  # (what h11._events calls, by its own name)

    def spy(headers: Any, _parsed: bool = False) -> Any:
        if not _parsed:
            checked.append(headers)
        return real(headers, _parsed=_parsed)

    monkeypatch.setattr(h11._events, "normalize_and_validate", spy)
    server = await start_server(nursery, http={"response_mode": "json"})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:
            for text in "ab":
                assert text_of(await client.request("tools/call", call("echo", text=text))) == text
            checked.clear()
            for text in "cde":
                assert text_of(await client.request("tools/call", call("echo", text=text))) == text
            assert checked == []


async def test_a_modern_request_checks_again_only_the_fields_that_changed(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``resources/read`` names its URI (``Mcp-Name``): only that field is checked
    again, client and server, where the whole head was."""
    checked: list[Any] = []
    real = h11._headers.normalize_and_validate

    def spy(headers: Any, _parsed: bool = False) -> Any:
        if not _parsed:
            checked.append(headers)
        return real(headers, _parsed=_parsed)

    async def read(ctx: Any) -> dict[str, Any]:
        uri = ctx.params["uri"]
        return {"contents": [{"uri": uri, "text": uri}]}

    app = App()
    app.handlers.set_request_handler("resources/read", read)
    assert _http_h11._H11 is not None
    monkeypatch.setattr(h11._events, "normalize_and_validate", spy)  # (h11's, given a list)
    monkeypatch.setattr(_http_h11, "_H11", _http_h11._H11._replace(validate=spy))  # (ours)
    server = await start_server(nursery, app, http={"response_mode": "json"})
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("modern")
        ) as client:
            for uri in ("file:///a", "file:///b"):
                assert (await client.request("resources/read", {"uri": uri}))["contents"]
            for uri in ("file:///c", "file:///d"):
                checked.clear()
                assert (await client.request("resources/read", {"uri": uri}))["contents"]
                assert checked == [[(b"mcp-name", uri.encode())]]


async def test_calls_go_through_on_both_paths(nursery: trio.Nursery, path: str) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with open_http_client(
            server.url, connection_config=client_connection_config("legacy")
        ) as client:
            for text in ("a", "b"):
                assert text_of(await client.request("tools/call", call("echo", text=text))) == text
    assert bool(_http_h11._VALIDATED) == (path == "private")


async def test_the_servers_answers_are_the_same_on_both_paths(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON answer with CORS (twice, on one connection), an error answer (406: no
    Accept) and one that closes (413, its body unread): byte for byte what h11's public
    path writes."""
    writes = server_writes(monkeypatch)
    server = await start_server(
        nursery, http={"response_mode": "json", "cors": True, "max_body_size": 1000}
    )
    origin = ("origin", "http://localhost:3000")
    headers, body = modern(1, "echo", text="hi")

    async def exchange() -> list[bytes]:
        writes.clear()
        conn = await RawConnection.open(server.port)
        for _ in range(2):
            await conn.send("POST", headers=(*headers, origin), body=body)
            assert (await conn.response()).status == 200
            conn.next_cycle()
        await conn.send("POST", headers=(("content-type", "application/json"),), body=body)
        assert (await conn.response()).status == 406
        await conn.aclose()
        conn = await RawConnection.open(server.port)
        await conn.send("POST", body=b"x" * 1001)
        assert (await conn.response()).status == 413
        await conn.aclose()
        return [bytes(w) for w in writes]

    with trio.fail_after(IO_TIMEOUT):
        private = await exchange()
        with public_path():
            public = await exchange()
    assert private == public
    assert len(private) == 4
    assert b"access-control-allow-origin: http://localhost:3000\r\n" in private[0]
    assert private[0].count(b"content-length:") == 1
    assert b"connection: close\r\n" in private[-1]


async def test_a_hooks_answer_with_its_own_content_length_has_one(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    writes = server_writes(monkeypatch)
    refusal = HttpResponse(
        status=401,
        headers=[("content-type", "text/plain"), ("Content-Length", "4")],
        body=b"no!\n",
    )

    async def authenticate(request: HttpRequest) -> HttpResponse:
        return refusal

    server = await start_server(nursery, authenticate=authenticate)
    with trio.fail_after(IO_TIMEOUT):
        conn = await RawConnection.open(server.port)
        await conn.send("POST", body=initialize_body())
        response = await conn.response()
        await conn.aclose()
    assert (response.status, response.body) == (401, b"no!\n")
    head = b"".join(writes).partition(b"\r\n\r\n")[0].lower()
    assert head.count(b"content-length:") == 1

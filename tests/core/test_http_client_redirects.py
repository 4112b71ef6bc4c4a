"""Which redirects HttpClient follows, and what it makes of the rest. No I/O.

A same-origin ``307`` / ``308`` is followed only to a valid ``origin-form``
request-target (RFC 9112 section 3.2.1): anything else (a space, a control character,
non-ASCII, a broken ``%`` escape) would be an illegal request line, which h11 refuses
to write. Such a redirect is an error for the redirected request alone, like any other
unusable answer; a ``Location`` that is not even a URL (a bad port, a broken IPv6
address) is a redirect to nowhere, never an exception.
"""

from __future__ import annotations

from typing import Any

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sansio import ErrorCode
from mcp_sansio._json import dumps, loads
from mcp_sansio._versions import Era
from mcp_sansio.http import ClientResponse, HttpClient, HttpClientConfig, http_error

URL = "http://localhost:8000/mcp"
PV = "io.modelcontextprotocol/protocolVersion"


def rpc(rid: Any, method: str, params: dict[str, Any] | None = None) -> bytes:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        out["params"] = params
    return dumps(out)


def legacy_client() -> HttpClient:
    client = HttpClient(URL, HttpClientConfig(era=Era.LEGACY))
    client.session_id = "s"
    return client


def redirected(client: HttpClient, location: bytes, status: int = 307) -> ClientResponse:
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    return client.response(sent, status, ((b"location", location),))


def read(reader: ClientResponse, *, by_byte: bool = False) -> list[Any]:
    body = b"<html>moved</html>"
    chunks = [body[i : i + 1] for i in range(len(body))] if by_byte else [body]
    out = [m for chunk in chunks for m in reader.feed(chunk)]
    return [loads(m) for m in out + reader.feed_eof()]


BAD_TARGETS = [
    b"/mcp x",
    b"/mcp\x01",
    b"/mcp\x7f",
    b"/mcp\tx",  # urlsplit would drop the tab and aim at "/mcpx"
    b"/mc\rp",
    b"/\xc3\xa9",  # UTF-8 bytes, read as latin-1 text: non-ASCII
    b"/a%zz",
    b"/a%2",
    b"/a\\b",
    b"/{x}",
    b"/mcp?q=a|b",
    b"/mcp?<x>",
    b'/mcp"',
    b"http://localhost:8000/m cp",
    b"//localhost:8000/m^cp",
]


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("location", BAD_TARGETS)
@pytest.mark.parametrize("by_byte", [False, True])
def test_a_same_origin_redirect_to_a_bad_target_fails_its_request(
    location: bytes, status: int, by_byte: bool
) -> None:
    client = legacy_client()
    reader = redirected(client, location, status)
    assert reader.kind == "error" and reader.redirect is None
    (message,) = read(reader, by_byte=by_byte)
    assert message["id"] == 2
    assert message["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert message["error"]["data"] == {"httpStatus": status}
    text = message["error"]["message"]
    assert text.startswith(f"HTTP: status {status}: the redirect's Location ")
    assert text.endswith(" is not a valid request target")
    assert reader.unanswered == () and reader.resume() is None
    assert client.session_id == "s"  # nothing else changed
    # Something of the server's answered (a 3xx): heard, not a gateway's silence
    # (ClientResponse.unheard). Mutation: that error listed as unheard -> (2,).
    assert reader.unheard == ()


def test_the_location_shown_in_the_error_is_cut_short() -> None:
    (message,) = read(redirected(legacy_client(), b"/" + b"x " * 5_000))
    assert len(message["error"]["message"]) < 200


def test_a_bad_redirect_does_not_settle_the_era_probe() -> None:
    client = HttpClient(URL)
    sent = client.post(rpc(1, "server/discover", {"_meta": {PV: "2026-07-28"}}))
    reader = client.response(sent, 307, ((b"location", b"/mcp x"),))
    (message,) = read(reader)
    assert message["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert client.era is None and not reader.fell_back


@pytest.mark.parametrize(
    ("location", "target"),
    [
        (b"/v2/mcp", "/v2/mcp"),
        (b"/mcp?x=1&y=%20z", "/mcp?x=1&y=%20z"),
        (b"/a/b;c=d/@:!$&'()*+,=-._~", "/a/b;c=d/@:!$&'()*+,=-._~"),
        (b"/mcp?q=/a?b", "/mcp?q=/a?b"),
        (b"/mcp#frag", "/mcp"),  # a fragment is not part of a request-target
        (b"?page=2", "/mcp?page=2"),
        (b"other", "/other"),
        (b"//localhost:8000/x", "/x"),
        (b"HTTP://LOCALHOST:8000/y", "/y"),
        (b"http://localhost:8000", "/"),
        (b"/", "/"),
    ],
)
def test_a_same_origin_redirect_to_a_valid_target_is_followed(location: bytes, target: str) -> None:
    reader = redirected(legacy_client(), location)
    assert reader.kind == "redirect" and read(reader) == []
    assert reader.redirect is not None
    assert reader.redirect.request.target == target
    assert reader.redirect.request_ids == (2,)


@pytest.mark.parametrize(
    "location",
    [
        b"http://localhost:99999/mcp",
        b"http://localhost:abc/mcp",
        b"http://[::1/mcp",
        b"http://localhost:8001/mcp x",
        b"https://localhost:8000/mcp",
    ],
)
def test_a_location_that_is_no_url_of_this_origin_is_a_plain_error(location: bytes) -> None:
    reader = redirected(legacy_client(), location)
    assert reader.kind == "error" and reader.redirect is None
    (message,) = read(reader)
    shown = location.decode("latin-1")
    assert message["error"]["message"] == (
        f"HTTP: status 307: the redirect is not followed (Location: {shown})"
    )
    assert message["error"]["data"] == {"httpStatus": 307, "location": shown}


def test_a_client_that_follows_no_redirects_names_the_location() -> None:
    # (BlockingClient.http follows none: the core words its error, as the Trio client's.)
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 307, ((b"location", b"/v2"),), follow_redirects=False)
    assert reader.kind == "error" and reader.redirect is None
    (message,) = read(reader)
    assert message["error"]["message"] == (
        "HTTP: status 307: the redirect is not followed (Location: /v2)"
    )
    assert message["error"]["data"] == {"httpStatus": 307, "location": "/v2"}


def test_a_3xx_without_a_location_is_a_plain_status() -> None:
    # Nothing to name, nothing redirected to: not worded as a redirect.
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    reader = client.response(sent, 300, (), follow_redirects=False)
    assert reader.kind == "error" and reader.redirect is None
    (message,) = read(reader)
    assert message["error"]["message"] == "HTTP: status 300"
    assert message["error"]["data"] == {"httpStatus": 300}


@pytest.mark.parametrize(
    ("challenge", "body", "text"),
    [
        (
            b'Bearer resource_metadata="http://localhost:8000/.well-known/x"',
            b"",
            "HTTP: status 401: the server wants authorization (WWW-Authenticate: Bearer"
            ' resource_metadata="http://localhost:8000/.well-known/x")',
        ),
        (None, b"", "HTTP: status 401: the server wants authorization"),
        (
            b"Bearer",
            dumps({"jsonrpc": "2.0", "id": None, "error": {"message": "no token"}}),
            "HTTP: status 401: no token; the server wants authorization (WWW-Authenticate: Bearer)",
        ),
    ],
)
def test_a_401_names_the_challenge(challenge: bytes | None, body: bytes, text: str) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    headers = [] if challenge is None else [(b"www-authenticate", challenge)]
    reader = client.response(sent, 401, headers)
    (message,) = [loads(m) for m in reader.feed(body) + reader.feed_eof()]
    assert message["id"] == 2
    assert message["error"]["code"] == ErrorCode.INTERNAL_ERROR
    assert message["error"]["message"] == text
    shown = "" if challenge is None else challenge.decode()
    assert message["error"]["data"] == {"httpStatus": 401, "wwwAuthenticate": shown}


def test_http_error_is_the_one_builder() -> None:
    assert loads(http_error(7, "gone")) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "HTTP: gone"},
    }
    assert loads(http_error("a", "x", data={"httpStatus": 502}))["error"]["data"] == {
        "httpStatus": 502
    }


_TEXT = st.text(
    st.one_of(
        st.characters(codec="latin-1"),
        st.sampled_from("/?#%:@.[]"),
    ),
    max_size=40,
)


@given(location=st.one_of(_TEXT, _TEXT.map(lambda t: "/" + t), _TEXT.map(lambda t: URL + t)))
def test_any_location_is_followed_only_where_h11_can_go(location: str) -> None:
    """Whatever the server puts in ``Location``, the core never raises, and a target it
    follows is one h11 writes as a request line."""
    client = legacy_client()
    reader = redirected(client, location.encode("latin-1"))
    messages = read(reader)
    if reader.redirect is not None:
        assert messages == []
        target = reader.redirect.request.target
        h11.Request(method="POST", target=target, headers=[("host", "localhost:8000")])
    else:
        assert [m["id"] for m in messages] == [2]

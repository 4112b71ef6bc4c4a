"""The loopback redirect receiver (``LoopbackRedirect``): one valid redirect ends it,
anything else is answered and waited past, everything is bounded; and with
``OAuth(redirect=...)``, the whole flow against a fake authorization server with a
fake browser (an HTTP client in the test).

Real sockets on 127.0.0.1 only; the deadlines run on the ``autojump_clock``."""

from __future__ import annotations

import errno
import logging
import math
import socket
from typing import Any
from urllib.parse import urlencode

import h11
import pytest
import trio
import trio.testing

from mcp_sansio import redirect_request
from mcp_trio import (
    FileOAuthStorage,
    LoopbackRedirect,
    OAuth,
    OAuthError,
    _oauth_loopback,
    fetch_authorization_redirect,
    open_client,
)
from mcp_trio._oauth import oauth_fetch

from .test_http_support import IO_TIMEOUT
from .test_oauth_e2e import start

AUTHORIZE = "https://as.example/authorize?" + urlencode({"client_id": "c", "state": "st8"})


async def raw(port: int, data: bytes) -> bytes:
    """Send ``data`` to the listener and read its whole answer (it closes)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        answer = b""
        while chunk := await stream.receive_some(65536):
            answer += chunk
    return answer


async def get(port: int, target: str, *headers: str) -> int:
    """A browser's ``GET``: the status of the answer."""
    head = "".join(f"{h}\r\n" for h in ("host: 127.0.0.1", *headers))
    answer = await raw(port, f"GET {target} HTTP/1.1\r\n{head}\r\n".encode())
    return int(answer.split(b" ", 2)[1])


def receiver(**kwargs: Any) -> tuple[LoopbackRedirect, list[str]]:
    """A receiver that opens no browser and records what it showed the user."""
    shown: list[str] = []
    options: dict[str, Any] = {"open_browser": False, "on_url": shown.append}
    return LoopbackRedirect(**{**options, **kwargs}), shown


async def authorize_in_background(
    nursery: trio.Nursery, redirect: LoopbackRedirect, url: str = AUTHORIZE
) -> list[object]:
    """Start ``on_authorize(url)``; the list gets its result (or exception) at the end.
    Returns once the receiver listens."""
    outcome: list[object] = []

    async def run() -> None:
        try:
            outcome.append(await redirect.on_authorize(url))
        except OAuthError as exc:
            outcome.append(exc)

    nursery.start_soon(run)
    await trio.testing.wait_all_tasks_blocked()
    return outcome


async def test_one_valid_redirect_ends_it_and_the_rest_is_answered() -> None:
    redirect, shown = receiver()
    assert redirect.redirect_uri == f"http://127.0.0.1:{redirect.port}/callback"
    port = redirect.port
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            outcome = await authorize_in_background(nursery, redirect)
            assert shown == [AUTHORIZE]
            assert await get(port, "/favicon.ico") == 404
            assert await get(port, "/callback?code=c&state=forged") == 400
            assert await get(port, "/callback?code=c") == 400
            answer = await raw(port, b"POST /callback?state=st8 HTTP/1.1\r\nhost: x\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 405 ")
            assert (await raw(port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
            assert outcome == []  # none of those ended it
            page = await raw(port, b"GET /callback?code=c1&state=st8 HTTP/1.1\r\nhost: x\r\n\r\n")
    assert page.startswith(b"HTTP/1.1 200 ")
    assert b"referrer-policy: no-referrer" in page and b"cache-control: no-store" in page
    assert b"You may close this window" in page
    assert outcome == [f"{redirect.redirect_uri}?code=c1&state=st8"]
    with pytest.raises(OSError):  # it no longer listens
        await trio.open_tcp_stream("127.0.0.1", port)


async def test_an_error_redirect_ends_it_with_the_error_shown_escaped() -> None:
    redirect, _ = receiver()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            outcome = await authorize_in_background(nursery, redirect)
            target = "/callback?" + urlencode({"error": "<b>denied</b>", "state": "st8"})
            page = await raw(redirect.port, f"GET {target} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    assert b"&lt;b&gt;denied&lt;/b&gt;" in page and b"<b>" not in page
    assert outcome == [f"{redirect.redirect_uri}?{target.partition('?')[2]}"]


async def test_the_error_page_keeps_the_characters_the_error_may_have() -> None:
    # The rule of the error the flow raises (parse_authorization_response), then escaped.
    redirect, _ = receiver()
    error = {"error": "denied\u202e", "error_description": "x" * 300 + "\n", "state": "st8"}
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            await authorize_in_background(nursery, redirect)
            target = "/callback?" + urlencode(error)
            page = await raw(redirect.port, f"GET {target} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    text = page.partition(b"\r\n\r\n")[2].decode()
    assert f"refused: denied? ({'x' * 197}...)" in text
    assert "\u202e" not in text and "x" * 198 not in text


async def test_head_is_answered_without_a_body_and_waited_past() -> None:
    redirect, _ = receiver()
    port = redirect.port
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            outcome = await authorize_in_background(nursery, redirect)
            for target, status in [("/", b"404"), ("/callback?code=c&state=st8", b"405")]:
                answer = await raw(port, f"HEAD {target} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
                assert answer.startswith(b"HTTP/1.1 " + status)
                assert answer.endswith(b"\r\n\r\n")  # the head only
                assert b"content-length: " in answer  # (what a GET would have)
            assert outcome == []  # neither ended it
            assert await get(port, "/callback?code=c&state=st8") == 200
    assert outcome == [f"{redirect.redirect_uri}?code=c&state=st8"]


@pytest.mark.parametrize(
    "failure", [OSError("socket trouble"), h11.LocalProtocolError("h11 trouble")]
)
async def test_a_failing_connection_is_dropped_and_the_wait_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, failure: Exception
) -> None:
    calls: list[str] = []

    def fails_first(method: str, target: str, **kwargs: str) -> tuple[int, str | None]:
        calls.append(target)
        if len(calls) == 1:
            raise failure
        return redirect_request(method, target, **kwargs)

    monkeypatch.setattr(_oauth_loopback, "redirect_request", fails_first)
    redirect, _ = receiver()
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            outcome = await authorize_in_background(nursery, redirect)
            dropped = await raw(redirect.port, b"GET /x HTTP/1.1\r\nhost: x\r\n\r\n")
            assert dropped == b""  # that connection only
            assert outcome == []
            assert await get(redirect.port, "/callback?state=st8") == 200
    assert outcome == [f"{redirect.redirect_uri}?state=st8"]
    assert calls == ["/x", "/callback?state=st8"]
    assert str(failure) in caplog.text


async def test_a_failing_listener_fails_the_authorization_with_an_oauth_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def out_of_descriptors(self: trio.SocketListener) -> trio.SocketStream:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(trio.SocketListener, "accept", out_of_descriptors)
    redirect, _ = receiver()
    with trio.fail_after(IO_TIMEOUT), pytest.raises(OAuthError, match="Too many open") as caught:
        await redirect.on_authorize(AUTHORIZE)
    assert isinstance(caught.value.__cause__, OSError)


async def test_a_request_over_the_size_or_header_bounds_is_refused_and_waited_past() -> None:
    redirect, _ = receiver(max_request_size=1024, max_headers=5)
    port = redirect.port
    with trio.fail_after(IO_TIMEOUT):
        async with trio.open_nursery() as nursery:
            outcome = await authorize_in_background(nursery, redirect)
            assert await get(port, "/callback?state=st8&pad=" + "x" * 2000) == 431
            assert await get(port, "/callback?state=st8&pad=" + "x" * 20_000) == 431
            assert await get(port, "/callback?state=st8", *(f"x-{i}: 1" for i in range(5))) == 431
            assert await get(port, "/callback?state=st8", *(f"x-{i}: 1" for i in range(4))) == 200
    assert outcome == [f"{redirect.redirect_uri}?state=st8"]


async def test_connections_are_bounded_in_number_and_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    redirect, _ = receiver(max_connections=2, connection_timeout=5)
    port = redirect.port
    async with trio.open_nursery() as nursery:
        outcome = await authorize_in_background(nursery, redirect)
        idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        await trio.testing.wait_all_tasks_blocked()
        extra = await trio.open_tcp_stream("127.0.0.1", port)
        assert await extra.receive_some(100) == b""  # over the bound: closed at once
        await extra.aclose()
        start = trio.current_time()
        for stream in idle:  # silent ones are dropped after connection_timeout
            assert await stream.receive_some(100) == b""
            await stream.aclose()
        assert trio.current_time() - start == pytest.approx(5)
        assert outcome == []
        assert await get(port, "/callback?state=st8") == 200  # room again
    assert outcome == [f"{redirect.redirect_uri}?state=st8"]


async def test_no_redirect_in_time_fails_the_authorization(
    autojump_clock: trio.testing.MockClock,
) -> None:
    redirect, _ = receiver(timeout=60)
    with pytest.raises(OAuthError, match="within 60 seconds"):
        await redirect.on_authorize(AUTHORIZE)
    assert trio.current_time() == pytest.approx(60)


async def test_a_url_without_state_or_a_taken_port_fails_at_once() -> None:
    redirect, _ = receiver()
    with pytest.raises(OAuthError, match="no state"):
        await redirect.on_authorize("https://as.example/authorize?client_id=c")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy, _ = receiver(port=taken.getsockname()[1])
        with pytest.raises(OAuthError, match="in use"):
            await busy.on_authorize(AUTHORIZE)


class _Warned(logging.Handler):
    """Sets its event at a warning (logged in the Trio thread, after the opener)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = trio.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.event.set()


async def test_the_browser_is_opened_in_a_thread_and_its_failure_is_not_the_flows() -> None:
    opened: list[str] = []

    def opener(url: str) -> bool:
        opened.append(url)
        return False  # no browser here

    def broken(url: str) -> bool:
        raise RuntimeError("no display")

    logger = logging.getLogger("mcp_trio")
    for open_with, warning in [(opener, "no browser could be opened"), (broken, "RuntimeError")]:
        warned = _Warned()
        logger.addHandler(warned)
        try:
            redirect, shown = receiver(open_browser=True, opener=open_with)
            with trio.fail_after(IO_TIMEOUT):
                async with trio.open_nursery() as nursery:
                    outcome = await authorize_in_background(nursery, redirect)
                    await warned.event.wait()
                    assert await get(redirect.port, "/callback?state=st8") == 200
        finally:
            logger.removeHandler(warned)
        assert shown == [AUTHORIZE]
        assert outcome == [f"{redirect.redirect_uri}?state=st8"]
        assert warning in warned.messages[0]
    assert opened == [AUTHORIZE]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"host": "localhost"},
        {"host": "0.0.0.0"},
        {"path": "callback"},
        {"path": "/cb?x=1"},
        {"port": 70000},
        {"port": 8123.0},
        {"port": True},
        {"timeout": 0},
        {"timeout": math.nan},
        {"connection_timeout": math.inf},
        {"connection_timeout": False},
        {"max_connections": 0},
        {"max_connections": 1.5},
        {"max_request_size": 8192.0},
        {"max_headers": True},
    ],
)
def test_what_a_receiver_refuses_to_be(kwargs: dict[str, Any]) -> None:
    # Checked up front, naming the argument: a float or a bool passed on used to fail
    # only at the first authorization, as "TypeError raised by on_authorize".
    [name] = kwargs
    with pytest.raises(ValueError, match=f"^{name} must be|^(host|path|port) must be"):
        LoopbackRedirect(**kwargs)


def test_oauth_takes_the_receivers_redirect_uri_and_not_both() -> None:
    redirect = LoopbackRedirect(port=8123, host="::1", path="/cb")
    assert OAuth(redirect=redirect).redirect_uri == "http://[::1]:8123/cb"
    with pytest.raises(ValueError, match="redirect="):
        OAuth(redirect=redirect, redirect_uri="http://127.0.0.1:1/x")


# ------------------------------------------------------------------ the whole flow


def fake_browser(url: str) -> bool:
    """The user's browser (``opener``, in its worker thread): it follows the
    authorization server's redirect to the loopback receiver."""

    async def visit() -> None:
        location = await fetch_authorization_redirect(url)
        status, _, body = await oauth_fetch("GET", location)
        assert status == 200 and b"close this window" in body

    trio.from_thread.run(visit)
    return True


async def test_open_client_authorizes_through_the_loopback_receiver(
    nursery: trio.Nursery, tmp_path: Any
) -> None:
    s = await start(nursery, prm_scopes=["mcp"])
    redirect, shown = receiver(open_browser=True, opener=fake_browser)
    store = FileOAuthStorage(tmp_path / "oauth.json", namespace=redirect.redirect_uri)
    auth = OAuth(client_name="loopback test", redirect=redirect, storage=store)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    [asked] = s.asrv.authorizations
    assert asked["redirect_uri"] == redirect.redirect_uri
    assert len(shown) == 1 and shown[0].startswith(f"{s.asrv.issuer}/authorize?")
    # Another process with the same store: the stored token serves, nobody is asked.
    nobody, asked_again = receiver(port=redirect.port)
    auth = OAuth(client_name="loopback test", redirect=nobody, storage=store)
    with trio.fail_after(IO_TIMEOUT):
        async with open_client(s.url, auth=auth) as client:
            assert (await client.call_tool("whoami", {})).text == "alice ['mcp']"
    assert asked_again == [] and len(s.asrv.authorizations) == 1


def test_the_default_on_url_shows_the_url_terminal_safe(capsys: pytest.CaptureFixture[str]) -> None:
    # The URL is made of the authorization server's metadata: an ESC sequence in it
    # would erase the line and print another URL (or hide it, ESC[8m) on the terminal.
    _oauth_loopback.show_url("https://as.example/authorize\x1b[2K\x1b[1A\x1b[8m?\u202estate=x")
    err = capsys.readouterr().err
    assert err == (
        "Open this URL to authorize:\n"
        "  https://as.example/authorize\\x1b[2K\\x1b[1A\\x1b[8m?\\u202estate=x\n"
    )

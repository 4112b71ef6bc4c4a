"""Which request to a native client's loopback listener is the authorization response
(RFC 8252 section 7.3): the rules of :func:`mcp_sansio.redirect_request`."""

from __future__ import annotations

import pytest

from mcp_sansio import redirect_request, redirect_state

URI = "http://127.0.0.1:8123/callback"


def test_the_redirect_with_its_state_is_the_response() -> None:
    status, url = redirect_request(
        "GET", "/callback?code=c1&state=s1&iss=x", redirect_uri=URI, state="s1"
    )
    assert (status, url) == (200, f"{URI}?code=c1&state=s1&iss=x")


def test_an_error_response_with_the_state_is_the_response_too() -> None:
    # The authorization server's refusal ends the wait: the flow reports it.
    status, url = redirect_request(
        "GET", "/callback?error=access_denied&state=s1", redirect_uri=URI, state="s1"
    )
    assert status == 200 and url == f"{URI}?error=access_denied&state=s1"


@pytest.mark.parametrize(
    ("method", "target", "status"),
    [
        ("GET", "/favicon.ico", 404),
        ("GET", "/", 404),
        ("GET", "/callback/", 404),
        ("GET", "/callbackx?state=s1", 404),
        ("POST", "/callback?code=c&state=s1", 405),
        ("HEAD", "/callback?code=c&state=s1", 405),
        ("GET", "/callback?code=c", 400),
        ("GET", "/callback", 400),
        ("GET", "/callback?code=c&state=s2", 400),
        ("GET", "/callback?code=c&state=", 400),
        ("GET", "/callback?code=c&state=s1&state=s1", 400),  # several: refused
        ("GET", "/callback?code=c&state=S1", 400),
    ],
)
def test_anything_else_is_answered_and_not_taken(method: str, target: str, status: int) -> None:
    assert redirect_request(method, target, redirect_uri=URI, state="s1") == (status, None)


def test_an_empty_redirect_path_is_the_root() -> None:
    assert redirect_request("GET", "/?state=s", redirect_uri="http://[::1]:9", state="s") == (
        200,
        "http://[::1]:9/?state=s",
    )


@pytest.mark.parametrize(
    ("url", "state"),
    [
        ("https://as.example/authorize?client_id=c&state=abc", "abc"),
        ("https://as.example/authorize?client_id=c", None),
        ("https://as.example/authorize?state=", None),
        ("https://as.example/authorize?state=a&state=b", None),
    ],
)
def test_the_state_of_an_authorization_url(url: str, state: str | None) -> None:
    assert redirect_state(url) == state

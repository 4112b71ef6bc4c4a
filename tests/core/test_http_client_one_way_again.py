"""A one-way message sent again, once (the rule both HTTP bindings ask the core): after a
``503`` with ``Retry-After`` (:meth:`ClientResponse.retry_delay`, the clock passed in),
or after its connection broke once it was written (:meth:`ClientRequest.again`). No I/O."""

from __future__ import annotations

import email.utils

import pytest

from mcp_sansio import _http_client as http_client_module
from mcp_sansio._json import dumps
from mcp_sansio.http import RETRY_AFTER_CAP, ClientRequest, HttpClient

from .test_http_client import URL, legacy_client, rpc

NOTE = dumps({"jsonrpc": "2.0", "method": "notifications/test"})
WHEN = "Wed, 21 Oct 2015 07:28:00 GMT"
AT = email.utils.parsedate_to_datetime(WHEN).timestamp()


def _delay(value: bytes | None, now: float = AT, status: int = 503) -> float | None:
    client = legacy_client()
    sent = client.post(NOTE)
    headers = [(b"content-length", b"0")]
    if value is not None:
        headers.append((b"retry-after", value))
    return client.response(sent, status, headers).retry_delay(now)


def test_retry_after_takes_seconds_or_an_http_date_at_the_clock_given() -> None:
    """RFC 9110 section 10.2.3: delay-seconds or an HTTP-date, which is read against the
    ``now`` given (a past one: at once); at most ``RETRY_AFTER_CAP``; anything else is
    no ``Retry-After`` (the message is then lost)."""
    assert RETRY_AFTER_CAP == 5.0
    assert _delay(b"3") == 3.0
    assert _delay(b" 0 ") == 0.0
    assert _delay(b"7") == RETRY_AFTER_CAP
    assert _delay(WHEN.encode(), now=AT - 2.5) == 2.5
    assert _delay(WHEN.encode(), now=AT - 120) == RETRY_AFTER_CAP
    assert _delay(WHEN.encode(), now=AT + 60) == 0.0
    assert _delay(b"-1") is None
    assert _delay(b"soon") is None
    assert _delay(b"Wed, 21 Oct 2015 07:28:00") is None  # (no zone: not an HTTP-date)
    # Latin-1 superscripts are str.isdigit() but no number (float() raised, and the
    # ValueError ended the session): no valid Retry-After, so the message is lost.
    for junk in (b"\xb2", b"\xb9", b"1\xb3"):
        assert _delay(junk) is None
    assert _delay(None) is None


def test_the_first_retry_after_counts() -> None:
    client = legacy_client()
    sent = client.post(NOTE)
    reader = client.response(sent, 503, [(b"retry-after", b"2"), (b"retry-after", b"4")])
    assert reader.retry_delay(AT) == 2.0


@pytest.mark.parametrize("status", [429, 500, 502, 504])
def test_only_a_503_is_retried(status: int) -> None:
    """Any other refusal may have run something of it (or will again): lost."""
    assert _delay(b"1", status=status) is None


def test_a_request_refused_503_is_not_sent_again_by_the_transport() -> None:
    """A request's caller gets the refusal (the rule is for one-way messages)."""
    client = legacy_client()
    sent = client.post(rpc(7, "tools/list"))
    assert client.response(sent, 503, [(b"retry-after", b"1")]).retry_delay(AT) is None


def test_the_cap_is_read_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """(The blocking client's test shortens it so.)"""
    monkeypatch.setattr(http_client_module, "RETRY_AFTER_CAP", 0.3)
    assert _delay(b"3600") == 0.3


@pytest.mark.parametrize("first", ["retried", "resent"])
@pytest.mark.parametrize("second", ["retried", "resent"])
def test_a_one_way_message_goes_again_once_whatever_the_reasons(first: str, second: str) -> None:
    """Refused then cut, cut then refused, or twice the same: one more POST, never a
    loop; the copy is the same POST, marked."""
    client = HttpClient(URL)
    sent = client.post(NOTE)
    assert sent.sent_again == ""
    again = sent.again(first)  # type: ignore[arg-type]
    assert isinstance(again, ClientRequest)
    assert again.sent_again == first
    assert again.request == sent.request
    assert again.again(second) is None  # type: ignore[arg-type]

"""``now`` on the ``receive_*`` calls: required, because a received message can start a
timer, and a made-up time (the old default, ``0.0``) behind the real clock starts it
already expired.

The case: an ``auto`` client whose ``server/discover`` a legacy server refuses (-32601)
falls back to ``initialize``, timed from the ``now`` of the call that took the refusal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from mcp_sansio import (
    Connection,
    ConnectionClosed,
    ConnectionConfig,
    Event,
    InputRequired,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
)
from mcp_sansio._json import dumps, loads

from .helpers import CLIENT_CAPS
from .test_connection_modern import ELICIT, modern_pair, only

START = 1_000.0  # a real loop's clock (trio's starts anywhere; time.monotonic() is large)
TIMEOUT = 30.0


def probing_client() -> tuple[Connection, bytes]:
    """A client whose probe went out at ``START``, and the refusal a legacy server sends."""
    client = Connection(
        "client",
        ConnectionConfig(
            implementation={"name": "c", "version": "1"},
            capabilities=CLIENT_CAPS,
            request_timeout=TIMEOUT,
        ),
    )
    probe = client.start(now=START)
    (sent,) = client.data_to_send()
    assert loads(sent)["method"] == "server/discover"
    refusal = {"jsonrpc": "2.0", "id": probe, "error": {"code": -32601, "message": "no"}}
    return client, dumps(refusal)


def test_the_fallback_initialize_is_timed_from_the_receive_now() -> None:
    client, refusal = probing_client()
    assert client.receive_message(refusal, now=START + 1.0) == []
    (sent,) = client.data_to_send()
    assert loads(sent)["method"] == "initialize"
    assert client.next_deadline() == START + 1.0 + TIMEOUT
    assert client.handle_timer(START + 2.0) == []  # waiting for the server, as it should


def test_a_now_behind_the_clock_would_time_the_initialize_out_at_once() -> None:
    """What the old default did: ``initialize`` expired before the server could answer."""
    client, refusal = probing_client()
    client.receive_message(refusal, now=0.0)
    assert client.next_deadline() == TIMEOUT  # long past on the loop's clock
    (expired,) = client.handle_timer(START + 2.0)
    assert isinstance(expired, RequestTimedOut) and expired.method == "initialize"


def _call(conn: Connection, name: str) -> Callable[..., Any]:
    return getattr(conn, name)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("receive_bytes", (b"\n",)),
        ("receive_message", (b"{}",)),
        ("receive_decoded", ({},)),
        ("receive_bytes_eof", ()),
    ],
)
def test_every_receive_call_requires_now(name: str, args: tuple[Any, ...]) -> None:
    conn = Connection("server", ConnectionConfig())
    parameter = inspect.signature(_call(conn, name)).parameters["now"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert parameter.default is inspect.Parameter.empty
    with pytest.raises(TypeError, match="now"):
        _call(conn, name)(*args)


def test_receive_eof_needs_now_only_when_a_line_is_held() -> None:
    client, refusal = probing_client()
    client.receive_bytes(refusal, now=START)  # no newline: held, not taken
    with pytest.raises(ValueError, match="pass now"):
        client.receive_eof()
    assert client.data_to_send() == []  # nothing changed: the line is still held
    (closed,) = client.receive_eof(now=START + 1.0, keep_answering=True)
    assert isinstance(closed, ConnectionClosed)
    (sent,) = client.data_to_send()  # the last line was the refusal: initialize went out
    assert loads(sent)["method"] == "initialize"
    # Nothing held any more (the line was taken): now may be left out.
    assert client.receive_eof() == []


def test_receive_eof_needs_now_while_an_oversize_line_is_skipped() -> None:
    server = Connection("server", ConnectionConfig(max_message_size=16))
    server.receive_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"', now=0.0)
    with pytest.raises(ValueError, match="pass now"):
        server.receive_eof()
    events = server.receive_eof(now=0.0)
    assert isinstance(events[-1], ConnectionClosed)


def test_receive_eof_without_now_on_a_message_transport() -> None:
    server = Connection("server", ConnectionConfig())
    assert not any(isinstance(e, ResultReceived) for e in server.receive_eof())


def test_a_now_behind_the_clock_would_take_an_expired_request_state() -> None:
    """The other harm of a default: ``requestState`` is opened at the ``now`` received
    with the retry (no ``request_state_clock``), so ``0.0`` found it never expired."""
    pair = modern_pair(request_state_ttl=10.0)

    def retry_at(now: float) -> list[Event]:
        rid = pair.client.send_request("tools/call", {"name": "t"}, now=START)
        req = only(pair.deliver(pair.client, now=START), RequestReceived)
        pair.server.send_input_required(req.request_id, ELICIT, now=START)
        only(pair.deliver(pair.server, now=START), InputRequired)
        pair.client.retry_with_input(rid, {}, now=START)
        return pair.deliver(pair.client, now=now)

    assert not any(isinstance(e, RequestReceived) for e in retry_at(START + 11.0))
    assert any(isinstance(e, RequestReceived) for e in retry_at(0.0))  # expired, taken

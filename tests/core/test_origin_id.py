"""A call that goes out again under a new id (a modern input round's retry, a re-issue)
stays known to the driver by the id it first had: no I/O.

* Every event about our request (result, error, input required, progress, timeout)
  carries ``origin_id``, the id ``send_request`` returned, once ``request_id`` is a
  later one; ``None`` while it is that id. A driver needs no map of its own.
* ``cancel_request`` and ``forget_request`` of a call awaiting input (its question on
  the user's screen) give it up as ``abandon_request`` does, with nothing sent, instead
  of raising "not in flight".
"""

from __future__ import annotations

import pytest

from mcp_sansio import (
    ErrorReceived,
    InputRequired,
    LocalProtocolError,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    RequestTimedOut,
    ResultReceived,
)

from .helpers import ConnectionPair, handshaken

ASK = {
    "q": {
        "method": "elicitation/create",
        "params": {
            "message": "?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    }
}
YES = {"q": {"action": "accept", "content": {"ok": True}}}


def received(pair: ConnectionPair) -> RequestReceived:
    (request,) = pair.deliver(pair.client)
    assert isinstance(request, RequestReceived)
    return request


def asked(pair: ConnectionPair, request: RequestReceived) -> InputRequired:
    pair.server.send_input_required(request.request_id, ASK, now=0.0)
    (event,) = pair.deliver(pair.server)
    assert isinstance(event, InputRequired)
    return event


def test_a_plain_call_has_no_origin() -> None:
    pair = handshaken("modern")
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True)
    request = received(pair)
    pair.server.send_progress(request.request_id, 1)
    pair.server.send_result(request.request_id, {"content": []})
    progress, result = pair.deliver(pair.server)
    assert isinstance(progress, ProgressReceived) and progress.origin_id is None
    assert isinstance(result, ResultReceived) and result.request_id == rid
    assert result.origin_id is None


def test_every_round_names_the_first_id() -> None:
    pair = handshaken("modern")
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True)
    round1 = asked(pair, received(pair))
    assert round1.request_id == first and round1.origin_id is None
    second = pair.client.retry_with_input(first, YES, now=0.0)
    round2 = asked(pair, received(pair))
    assert round2.request_id == second and round2.origin_id == first
    third = pair.client.retry_with_input(second, YES, now=0.0)
    request = received(pair)
    pair.server.send_progress(request.request_id, 1, 2)
    pair.server.send_result(request.request_id, {"content": []})
    progress, result = pair.deliver(pair.server)
    assert isinstance(progress, ProgressReceived)
    assert (progress.request_id, progress.origin_id) == (third, first)
    assert isinstance(result, ResultReceived)
    assert (result.request_id, result.origin_id) == (third, first)


def test_an_error_after_a_retry_names_the_first_id() -> None:
    pair = handshaken("modern")
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    asked(pair, received(pair))
    second = pair.client.retry_with_input(first, YES, now=0.0)
    pair.server.send_error(received(pair).request_id, -32602, "no")
    (error,) = pair.deliver(pair.server)
    assert isinstance(error, ErrorReceived) and not error.local
    assert (error.request_id, error.origin_id) == (second, first)


def test_a_timeout_after_a_retry_names_the_first_id() -> None:
    pair = handshaken("modern", request_timeout=5.0)
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    asked(pair, received(pair))
    second = pair.client.retry_with_input(first, YES, now=1.0)
    (timed_out,) = pair.client.handle_timer(100.0)
    assert isinstance(timed_out, RequestTimedOut)
    assert (timed_out.request_id, timed_out.origin_id) == (second, first)


def test_a_reissue_names_the_first_id_through_a_retry() -> None:
    pair = handshaken("modern", max_reissues=2)
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    asked(pair, received(pair))
    second = pair.client.retry_with_input(first, YES, now=0.0)
    pair.client.data_to_send()  # (the stream broke: the server never saw it)
    third = pair.client.reissue_request(second, now=0.0)
    pair.client.data_to_send()  # (and again)
    fourth = pair.client.reissue_request(third, now=0.0)
    request = received(pair)
    pair.server.send_result(request.request_id, {"content": []})
    (result,) = pair.deliver(pair.server)
    assert isinstance(result, ResultReceived)
    assert (result.request_id, result.origin_id) == (fourth, first)


def test_a_reissue_of_a_plain_call_names_its_id() -> None:
    pair = handshaken("modern")
    first = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    pair.client.data_to_send()
    second = pair.client.reissue_request(first, now=0.0)
    request = received(pair)
    pair.server.send_result(request.request_id, {"content": []})
    (result,) = pair.deliver(pair.server)
    assert isinstance(result, ResultReceived)
    assert (result.request_id, result.origin_id) == (second, first)


@pytest.mark.parametrize("give_up", ["cancel_request", "forget_request", "abandon_request"])
def test_a_call_awaiting_input_is_given_up_by_any_of_the_three(give_up: str) -> None:
    pair = handshaken("modern")
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    asked(pair, received(pair))
    getattr(pair.client, give_up)(rid)
    assert pair.client.data_to_send() == []  # the server holds nothing of it
    with pytest.raises(LocalProtocolError, match="not awaiting input"):
        pair.client.retry_with_input(rid, YES, now=0.0)
    # Given up once: cancelling it again is the caller's mistake, as for any finished id.
    with pytest.raises(LocalProtocolError, match="not in flight"):
        pair.client.cancel_request(rid)


def test_cancelling_a_call_in_flight_still_tells_the_server() -> None:
    pair = handshaken("modern")
    rid = pair.client.send_request("tools/call", {"name": "t"}, now=0.0)
    received(pair)
    pair.client.cancel_request(rid, "user")
    (cancelled,) = pair.deliver(pair.client)
    assert isinstance(cancelled, RequestCancelled) and cancelled.request_id == rid

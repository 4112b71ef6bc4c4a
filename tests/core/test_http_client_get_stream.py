"""The legacy GET stream's reconnect rules both HTTP clients drive (``GetStream``). No I/O.

``2025-11-25/basic/transports.mdx``, "Listening for Messages from the Server" and
"Resumability and Redelivery": the client MAY open the GET stream; a ``405`` means the
server offers none; a stream that ends is resumed with ``Last-Event-ID``; ``retry`` is
respected. Past ``max_attempts`` attempts in a row that got no stream the client gives up.
"""

from __future__ import annotations

import pytest

from mcp_sansio.http import (
    MIN_REOPEN_DELAY,
    ClientRequest,
    GetDecision,
    GetStream,
    HttpClient,
    HttpClientConfig,
    reopen_delay,
)

from .test_http_client import SSE, initialize_again, legacy_client, read, rpc

RETRY_MS = 200  # the default_retry_ms of these tests' clients


def client_and_stream(max_attempts: int = 2) -> tuple[HttpClient, GetStream]:
    client = legacy_client(HttpClientConfig(default_retry_ms=RETRY_MS))
    return client, client.get_stream(max_attempts)


def next_request(get: GetStream) -> ClientRequest:
    request = get.request()
    assert request is not None
    assert request.request.method == "GET" and request.request_ids == ()
    return request


def streamed(client: HttpClient, get: GetStream, body: bytes) -> GetDecision:
    """An attempt that got a stream of ``body``, which then ended."""
    reader = client.response(next_request(get), 200, SSE)
    read(reader, body)
    return get.answered(reader)


def refused(client: HttpClient, get: GetStream, status: int) -> GetDecision:
    """An attempt answered ``status`` (its head: enough)."""
    return get.answered(client.response(next_request(get), status, ()))


def reopen(delay: float) -> GetDecision:
    return GetDecision(action="reopen", delay=delay)


JSON = ((b"content-type", b"application/json"),)
MESSAGE = b'data: {"jsonrpc": "2.0", "method": "notifications/message"}\n\n'


def test_a_stream_that_ends_is_resumed_from_its_last_event_id_after_its_retry() -> None:
    client, get = client_and_stream()
    first = next_request(get)
    assert first.request.header("last-event-id") is None
    assert streamed(client, get, b"retry: 500\nid: e1\n" + MESSAGE) == reopen(0.5)
    again = next_request(get)
    assert again.request.header("last-event-id") == "e1"
    assert get.opened and not get.over


def test_the_wait_grows_while_nothing_comes_and_resets_when_a_message_does() -> None:
    client, get = client_and_stream()
    waits = [streamed(client, get, b"retry: 100\nid: e\n\n").delay for _ in range(5)]
    # The server's retry, then twice as long each time from default_retry_ms.
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6])
    assert streamed(client, get, b"id: e\n" + MESSAGE) == reopen(0.1)


def test_a_stream_without_an_id_leaves_the_last_id_seen_in_place() -> None:
    """As EventSource: the last event id is kept across reconnections."""
    client, get = client_and_stream()
    streamed(client, get, b"id: e1\n" + MESSAGE)
    streamed(client, get, MESSAGE)  # (resumed from e1; no id of its own)
    assert next_request(get).request.header("last-event-id") == "e1"
    streamed(client, get, b"id: e2\n" + MESSAGE)
    assert next_request(get).request.header("last-event-id") == "e2"


def test_a_stream_without_an_id_that_dropped_an_event_leaves_the_last_id_in_place() -> None:
    """A resumed stream that dropped an event over ``max_event_size`` cannot be resumed
    from itself (``ClientResponse.resume``: the dropped event is lost): with no id of its
    own, the stream goes on from the last id seen before it, as EventSource would."""
    config = HttpClientConfig(default_retry_ms=RETRY_MS, max_event_size=64)
    client = legacy_client(config)
    get = client.get_stream(2)
    streamed(client, get, b"id: e1\n" + MESSAGE)
    assert streamed(client, get, b"data: " + b"x" * 200 + b"\n\n").action == "reopen"
    assert next_request(get).request.header("last-event-id") == "e1"


def test_without_an_event_id_the_stream_is_opened_afresh() -> None:
    client, get = client_and_stream()
    streamed(client, get, MESSAGE)
    assert next_request(get).request.header("last-event-id") is None


@pytest.mark.parametrize("status", [410, 400, 403])
def test_a_refused_resumption_opens_the_stream_afresh_not_counted(status: int) -> None:
    """A refusal under 500 to a resumption: the events are gone. Not a failed attempt:
    a server that refuses every resumption is never given up on (bound 0 here)."""
    client, get = client_and_stream(max_attempts=0)
    for _ in range(3):
        streamed(client, get, b"id: e1\n" + MESSAGE)
        resume = next_request(get)
        assert resume.request.header("last-event-id") == "e1"
        # Quiet: the refused attempt brought no message (one came on the stream).
        assert get.answered(client.response(resume, status, ())) == reopen(0.2)
        assert next_request(get).request.header("last-event-id") is None


def test_a_refusal_of_a_get_that_resumed_nothing_is_counted() -> None:
    """Only a *resumption* refused under 500 is let off: a fresh GET (the stream had no
    event id) refused ``403`` once a stream came is a failed attempt, so a server that
    refuses every one is given up on, not polled for the rest of the session."""
    client, get = client_and_stream(max_attempts=1)
    streamed(client, get, MESSAGE)
    assert refused(client, get, 403).action == "reopen"
    assert refused(client, get, 403) == GetDecision(
        action="give_up", reason="the session's GET stream cannot be opened again: status 403"
    )


def test_405_means_no_get_stream_even_once_one_came() -> None:
    client, get = client_and_stream()
    streamed(client, get, b"id: e1\n" + MESSAGE)
    assert refused(client, get, 405) == GetDecision(action="not_offered", reason="status 405")
    assert get.over and get.request() is None


@pytest.mark.parametrize("status", [200, 400, 406, 500, 503])
def test_any_answer_but_a_stream_before_one_ever_came_means_none(status: int) -> None:
    """200 here: a JSON body, not a stream."""
    client, get = client_and_stream()
    reader = client.response(next_request(get), status, (() if status != 200 else JSON))
    assert get.answered(reader) == GetDecision(action="not_offered", reason=f"status {status}")
    assert get.request() is None


@pytest.mark.parametrize("status", [500, 503])
def test_error_statuses_once_a_stream_came_are_counted_then_the_session_ends(status: int) -> None:
    """A resumption answered ``5xx`` (500 too: only a status under 500 refuses the
    events) is a failed attempt: the next one still resumes from the last event id."""
    client, get = client_and_stream(max_attempts=2)
    streamed(client, get, b"retry: 100\nid: e1\n" + MESSAGE)
    decisions = [refused(client, get, status) for _ in range(2)]
    third = next_request(get)
    assert third.request.header("last-event-id") == "e1"
    decisions.append(get.answered(client.response(third, status, ())))
    # Each waits longer (no message), from the last stream's retry; then it gives up.
    assert decisions[:2] == [reopen(reopen_delay(100, 1, RETRY_MS)), reopen(0.2)]
    assert decisions[2] == GetDecision(
        action="give_up",
        reason=f"the session's GET stream cannot be opened again: status {status}",
    )
    assert get.over and get.request() is None


def test_a_stream_resets_the_count_of_failed_attempts() -> None:
    client, get = client_and_stream(max_attempts=2)
    streamed(client, get, b"id: e1\n" + MESSAGE)
    for _ in range(5):
        assert get.no_answer("the server closed the connection").action == "reopen"
        assert refused(client, get, 503).action == "reopen"
        streamed(client, get, b"id: e1\n" + MESSAGE)
    assert not get.over


def test_after_an_attempt_that_got_no_stream_it_still_resumes_from_the_last_id() -> None:
    client, get = client_and_stream()
    streamed(client, get, b"id: e1\n" + MESSAGE)
    next_request(get)
    get.no_answer("the server closed the connection")
    assert next_request(get).request.header("last-event-id") == "e1"
    refused(client, get, 502)
    assert next_request(get).request.header("last-event-id") == "e1"


def test_after_an_attempt_that_got_no_stream_the_wait_follows_the_stream_s_retry() -> None:
    """The last stream's retry (1 s here), not default_retry_ms (0.2 s), is where the
    back-off starts: the server said how often to come back."""
    client, get = client_and_stream()
    assert streamed(client, get, b"retry: 1000\nid: e1\n\n") == reopen(1.0)
    next_request(get)
    assert get.no_answer("the server closed the connection") == reopen(1.0)
    assert refused(client, get, 503) == reopen(2.0)


def test_dropped_every_time_before_a_stream_came_means_none_quietly() -> None:
    """A server whose POSTs work and which drops every GET (a proxy that takes no
    streams): after max_attempts more, there is no GET stream, and the session goes on."""
    _, get = client_and_stream(max_attempts=2)
    decisions = [get.no_answer("too many redirects") for _ in range(3)]
    assert [d.action for d in decisions] == ["reopen", "reopen", "not_offered"]
    assert decisions[0].delay == pytest.approx(0.2)
    assert decisions[1].delay == pytest.approx(0.2)  # (from default_retry_ms: no stream yet)
    assert decisions[2].reason == "too many redirects"
    assert get.request() is None


@pytest.mark.parametrize("opened", [False, True])
def test_a_server_that_cannot_be_reached_ends_the_session(opened: bool) -> None:
    client, get = client_and_stream(max_attempts=1)
    if opened:
        streamed(client, get, b"id: e1\n" + MESSAGE)
    next_request(get)
    assert get.no_answer("connection refused", connected=False).action == "reopen"
    assert get.no_answer("connection refused", connected=False) == GetDecision(
        action="give_up", reason="the server cannot be reached any more: connection refused"
    )


def test_the_last_failure_says_why_it_gave_up() -> None:
    """A connection that failed earlier in the row does not make a 503 "unreachable"."""
    client, get = client_and_stream(max_attempts=1)
    streamed(client, get, b"id: e1\n" + MESSAGE)
    get.no_answer("connection refused", connected=False)
    assert refused(client, get, 503).reason.endswith("cannot be opened again: status 503")


def test_a_stream_of_a_session_that_is_gone_stops() -> None:
    client, get = client_and_stream()
    request = next_request(get)
    reader = client.response(request, 200, SSE)
    assert client.terminate() is not None  # (the session ends meanwhile)
    read(reader, b"id: e1\n" + MESSAGE)
    assert get.answered(reader) == GetDecision(action="stop")
    assert get.request() is None
    assert get.no_answer("the server closed the connection") == GetDecision(action="stop")


def test_a_404_to_the_get_stream_stops_it_and_a_new_session_has_its_own() -> None:
    client, get = client_and_stream()
    streamed(client, get, b"id: e1\n" + MESSAGE)
    assert refused(client, get, 404) == GetDecision(action="stop")
    assert get.request() is None
    assert client.session_id is None


def test_a_404_to_the_first_get_stops_it() -> None:
    """Not "no GET stream": the session is gone, and the new one asks for its own."""
    client, get = client_and_stream()
    assert refused(client, get, 404) == GetDecision(action="stop")
    assert not get.over and get.request() is None


def test_the_stream_of_a_session_replaced_since_stops() -> None:
    """A 404 to a POST replaced the session: the old session's ``GetStream`` sends
    nothing more, not even a GET that opens a stream on the new session (whose own
    ``GetStream`` does, with counts of its own)."""
    client, get = client_and_stream(max_attempts=0)
    streamed(client, get, b"id: e1\n" + MESSAGE)
    lost = client.response(client.post(rpc(2, "tools/list")), 404, JSON)
    assert lost.session_expired == "restart"
    initialize_again(client, 3)
    assert get.request() is None
    assert get.no_answer("the server closed the connection") == GetDecision(action="stop")
    fresh = client.get_stream(0)
    request = next_request(fresh)
    assert request.session_id == "sess-2" and request.request.header("last-event-id") is None
    assert fresh.answered(client.response(request, 503, ())).action == "not_offered"


def test_no_legacy_session_no_request() -> None:
    client = HttpClient("http://example.test/mcp")
    assert client.get_stream(2).request() is None


def test_never_less_than_the_minimum_wait() -> None:
    client, get = client_and_stream()
    assert streamed(client, get, b"retry: 0\nid: e\n" + MESSAGE) == reopen(MIN_REOPEN_DELAY)


def test_one_way() -> None:
    """A POST with no request in it (a notification, an answer to the server's)."""
    client = legacy_client()
    assert client.post(b'{"jsonrpc": "2.0", "method": "notifications/progress"}').one_way
    assert client.post(b'{"jsonrpc": "2.0", "id": "s1", "result": {}}').one_way
    assert not client.post(rpc(2, "tools/list")).one_way
    assert not client.open_stream().one_way
    terminate = client.terminate()
    assert terminate is not None and not terminate.one_way

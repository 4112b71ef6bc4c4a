"""Group ``core``: the sans-IO core against raw orjson, no I/O, no event loop.

Every case moves the workloads of :mod:`benchmarks.workloads` (a 159-byte ``tools/call``
request and its 1,024-byte text result) and is divided by a floor measured in the same
run:

``core.floor``
    The least a JSON-RPC round trip can do in Python with our JSON library: the client
    dumps the request, the server loads it, the server dumps the result, the client loads
    it (``orjson.dumps`` / ``orjson.loads``, pre-built dicts, nothing else).
``core.loads.*``, ``core.parse.*``, ``core.serialize.*``, ``core.typed.*``
    Parse and serialize of each of the five workloads, against ``orjson.loads`` /
    ``orjson.dumps`` of the same message (see :mod:`benchmarks._messages`).
``core.roundtrip.legacy`` / ``core.roundtrip.modern``
    One ``tools/call`` through two :class:`~mcp_sansio.Connection` objects, bytes in and
    bytes out: client ``send_request`` → ``data_to_send`` → server ``receive_message``
    (``RequestReceived``) → ``send_result`` → ``data_to_send`` → client
    ``receive_message`` (``ResultReceived``). Legacy: both sides after an ``initialize``
    handshake. Modern: a client pinned to ``era="modern"`` (after ``server/discover``)
    against a dual-era server; every request carries the ``_meta`` envelope and every
    result gets ``resultType`` and server info, so more bytes cross than in the floor.
``core.floor.modern``
    The floor for the bytes the modern round trip actually moves (informational: how
    much of the modern figure is the heavier messages rather than the core).
``core.dispatch100.legacy`` / ``core.dispatch100.modern``
    100 requests in flight: send 100, deliver them, answer all 100, deliver the answers.
    Reported per call, so it compares with the floor directly.
``core.rss_growth``
    Resident memory growth over 10,000 legacy round trips, after a warm-up of 10,000.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any, Final, Literal

import orjson

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    HandshakeCompleted,
    RequestReceived,
    ResultReceived,
)

from ._harness import RSS_CALLS, Bench, Case, SampledCase, Settings, Skip, TimedCase
from ._messages import message_cases
from .workloads import (
    CALL_TOOL_PARAMS,
    CALL_TOOL_REQUEST,
    CALL_TOOL_REQUEST_BYTES,
    CALL_TOOL_RESPONSE,
    CALL_TOOL_RESULT,
)

__all__ = ["DESCRIPTION", "cases", "unavailable"]

DESCRIPTION: Final = "sans-IO core (mcp_sansio) against raw orjson; no I/O"

Era = Literal["legacy", "modern"]

CLIENT_INFO: Final = {"name": "bench-client", "version": "1"}
SERVER_INFO: Final = {"name": "bench-server", "version": "1"}
SERVER_CAPS: Final[dict[str, Any]] = {"tools": {}}
IN_FLIGHT: Final = 100

_STATM: Final = "/proc/self/statm"


def unavailable() -> str | None:
    """Why this group cannot run here (never: it needs only the core)."""
    return None


# -- helpers -------------------------------------------------------------------------------


def connected_pair(era: Era) -> tuple[Connection, Connection]:
    """A client pinned to ``era`` and a dual-era server, handshake done, queues empty."""
    client = Connection("client", ConnectionConfig(era=era, implementation=CLIENT_INFO))
    server = Connection(
        "server", ConnectionConfig(implementation=SERVER_INFO, capabilities=SERVER_CAPS)
    )
    client.start(now=0.0)
    done = []
    for _ in range(3):  # legacy: initialize, result, initialized; modern: discover, result
        for message in client.data_to_send():
            done += server.receive_message(message, now=0.0)
        for message in server.data_to_send():
            done += client.receive_message(message, now=0.0)
    assert any(isinstance(ev, HandshakeCompleted) for ev in done), done
    assert client.era is not None and client.era.value == era, client.era
    assert not client.data_to_send() and not server.data_to_send()
    return client, server


def _round_trip_once(client: Connection, server: Connection) -> tuple[bytes, bytes]:
    """One checked round trip; returns the two messages that crossed."""
    rid = client.send_request("tools/call", CALL_TOOL_PARAMS, now=0.0)
    (request,) = client.data_to_send()
    (received,) = server.receive_message(request, now=0.0)
    assert isinstance(received, RequestReceived), received
    assert received.params is not None and received.params["name"] == "get_forecast"
    server.send_result(received.request_id, CALL_TOOL_RESULT)
    (response,) = server.data_to_send()
    (answer,) = client.receive_message(response, now=0.0)
    assert isinstance(answer, ResultReceived) and answer.request_id == rid, answer
    assert answer.result["content"] == CALL_TOOL_RESULT["content"]
    return request, response


def _quiet(client: Connection, server: Connection) -> Callable[[], None]:
    """A check that every request of the round was answered and delivered."""

    def check() -> None:
        assert not client.pending_requests(), "a request went unanswered"
        assert not server.inflight_requests(), "a request was not answered"

    return check


# -- (a) the floor -------------------------------------------------------------------------


def _floor_setup(request: dict[str, Any], response: dict[str, Any]) -> Bench:
    dumps, loads = orjson.dumps, orjson.loads
    request_bytes, response_bytes = dumps(request), dumps(response)

    def run(n: int) -> None:
        for _ in range(n):
            dumps(request)  # client serializes its request
            loads(request_bytes)  # server parses it
            dumps(response)  # server serializes its result
            loads(response_bytes)  # client parses it

    return Bench(run)


def _floor() -> Bench:
    return _floor_setup(CALL_TOOL_REQUEST, CALL_TOOL_RESPONSE)


def _floor_modern() -> Bench:
    client, server = connected_pair("modern")
    request, response = _round_trip_once(client, server)
    return _floor_setup(orjson.loads(request), orjson.loads(response))


# -- (c), (d) round trips ------------------------------------------------------------------


def _round_trip(era: Era) -> Bench:
    client, server = connected_pair(era)
    request, _ = _round_trip_once(client, server)
    if era == "legacy":
        assert len(request) == len(CALL_TOOL_REQUEST_BYTES), request
    params, result = CALL_TOOL_PARAMS, CALL_TOOL_RESULT
    send_request, client_out, client_in = (
        client.send_request,
        client.data_to_send,
        client.receive_message,
    )
    server_out, server_in, send_result = (
        server.data_to_send,
        server.receive_message,
        server.send_result,
    )

    def run(n: int) -> None:
        for _ in range(n):
            send_request("tools/call", params, now=0.0)
            for message in client_out():
                for event in server_in(message, now=0.0):
                    send_result(event.request_id, result)  # type: ignore[union-attr,arg-type]
            for message in server_out():
                client_in(message, now=0.0)

    return Bench(run, _quiet(client, server))


def _dispatch(era: Era) -> Bench:
    client, server = connected_pair(era)
    _round_trip_once(client, server)
    params, result = CALL_TOOL_PARAMS, CALL_TOOL_RESULT
    send_request, client_out, client_in = (
        client.send_request,
        client.data_to_send,
        client.receive_message,
    )
    server_out, server_in, send_result = (
        server.data_to_send,
        server.receive_message,
        server.send_result,
    )
    batch = range(IN_FLIGHT)

    def run(n: int) -> None:
        for _ in range(n):
            for _ in batch:
                send_request("tools/call", params, now=0.0)
            received = [event for message in client_out() for event in server_in(message, now=0.0)]
            for event in received:
                send_result(event.request_id, result)  # type: ignore[union-attr,arg-type]
            for message in server_out():
                client_in(message, now=0.0)

    # Prove the shape once: 100 requests really are in flight together.
    for _ in batch:
        send_request("tools/call", params, now=0.0)
    assert len(client.pending_requests()) == IN_FLIGHT
    events = [event for message in client_out() for event in server_in(message, now=0.0)]
    assert len(server.inflight_requests()) == IN_FLIGHT
    for event in events:
        assert isinstance(event, RequestReceived)
        send_result(event.request_id, result)
    answers = [event for message in server_out() for event in client_in(message, now=0.0)]
    assert len(answers) == IN_FLIGHT and all(isinstance(a, ResultReceived) for a in answers)
    return Bench(run, _quiet(client, server))


# -- memory --------------------------------------------------------------------------------


def _rss_kib() -> float:
    with open(_STATM, encoding="ascii") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 1024


def _rss_growth() -> float:
    bench = _round_trip("legacy")
    bench.run(RSS_CALLS)  # warm-up: fills the bounded id memories, the allocator's pools
    gc.collect()
    before = _rss_kib()
    bench.run(RSS_CALLS)
    gc.collect()
    assert bench.check is not None
    bench.check()
    return _rss_kib() - before


# -- the group -----------------------------------------------------------------------------


def cases(settings: Settings) -> list[Case | Skip]:
    """The cases of this group, floors first (the others are divided by them)."""
    del settings  # --quick only shrinks the rounds; the workloads stay the same
    found: list[Case | Skip] = [
        TimedCase(
            name="core.floor",
            title="floor: orjson dumps+loads of request and result (client+server)",
            setup=_floor,
        ),
        TimedCase(
            name="core.roundtrip.legacy",
            title="core: tools/call round trip, legacy era",
            setup=lambda: _round_trip("legacy"),
            reference="core.floor",
        ),
        TimedCase(
            name="core.floor.modern",
            title="floor: orjson dumps+loads of the modern-era messages",
            setup=_floor_modern,
            reference="core.floor",
        ),
        TimedCase(
            name="core.roundtrip.modern",
            title="core: tools/call round trip, modern era",
            setup=lambda: _round_trip("modern"),
            reference="core.floor",
        ),
        TimedCase(
            name="core.dispatch100.legacy",
            title="core: 100 in flight, legacy, per call",
            setup=lambda: _dispatch("legacy"),
            ops_per_call=IN_FLIGHT,
            reference="core.floor",
        ),
        TimedCase(
            name="core.dispatch100.modern",
            title="core: 100 in flight, modern, per call",
            setup=lambda: _dispatch("modern"),
            ops_per_call=IN_FLIGHT,
            reference="core.floor",
        ),
    ]
    found += message_cases()
    if sys.platform.startswith("linux") and os.path.exists(_STATM):
        found.append(
            SampledCase(
                name="core.rss_growth",
                title=f"core: RSS growth over {RSS_CALLS:,} legacy round trips",
                sample=_rss_growth,
                unit="KiB",
            )
        )
    else:
        found.append(Skip(name="core.rss_growth", reason=f"needs Linux {_STATM}"))
    return found

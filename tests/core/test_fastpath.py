"""The shortcuts of the hot path give exactly what the general path gives.

:class:`~mcp_sansio.Connection` takes shortcuts for the common case: ``send_request``
skips the checks a method already passed, ``receive_message`` delivers a request of an
already accepted method or an ordinary result in one pass, a modern ``send_result``
decorates a plain result inline, and events are built without ``__init__``. Each test
here drives two connections brought to the same state by the same calls, one as it is
and one down the general path (its verdict caches emptied before every call, and its
input handed to the general dispatcher the fast path falls back to), and compares
everything observable: events, bytes on the wire and the request each belongs to (the
twins are made with ``routing=True``), exceptions, tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sansio import (
    Connection,
    ConnectionConfig,
    Era,
    Event,
    RequestReceived,
    ResultReceived,
    _modern,
)
from mcp_sansio._errors import LocalProtocolError
from mcp_sansio._json import Fragment, dumps, loads
from mcp_sansio._jsonrpc import decode

from .helpers import CLIENT_CAPS, SERVER_CAPS

T = TypeVar("T")

V = "2026-07-28"
PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
CI = "io.modelcontextprotocol/clientInfo"
LL = "io.modelcontextprotocol/logLevel"
KEY = b"k" * 32  # a fixed requestState key, so that both twins seal alike


# ---------------------------------------------------------------- twins


def forget_verdicts(conn: Connection) -> None:
    """Make ``conn``'s next call check everything again, down the general path."""
    conn._send_ok.clear()
    conn._accept_ok.clear()
    conn._modern_accept_ok.clear()
    conn._server_meta = None


def receive_general(conn: Connection, data: bytes) -> list[Event]:
    """What ``conn.receive_message(data)`` does without its fast path."""
    events: list[Event] = []
    obj = decode(data)
    if type(obj) is list:
        conn._receive_batch(obj, 0.0, events)
    else:
        conn._receive_one(obj, 0.0, events, None)
    return events


def drain(conn: Connection) -> list[tuple[Any, ...]]:
    """What ``conn`` queued, drained: each message in a tuple, with the request it
    belongs to where ``conn`` notes it (``routing=True``, as the twins here)."""
    if conn._routing:
        return list(conn.messages_to_send())
    return [(payload,) for payload in conn.data_to_send()]


def observe(conn: Connection) -> Any:
    """Everything a call may have changed, drained."""
    return (
        drain(conn),
        conn.pending_requests(),
        conn.inflight_requests(),
        dict(conn._inflight),
        dict(conn._inbound_log_level),
        dict(conn._finished_out),
        dict(conn._finished_before),
        dict(conn._progress_in),
        set(conn._listening),
        tuple(conn._awaiting_input),
        conn._next_id,
        tuple(conn._held),
    )


def outcome(call: Callable[[], T]) -> tuple[str, Any]:
    try:
        return ("returned", call())
    except Exception as exc:  # compared, not swallowed: both twins must raise alike
        return ("raised", (type(exc), str(exc)))


def same(
    fast: Connection,
    general: Connection,
    call: Callable[[Connection], Any],
    general_call: Callable[[Connection], Any] | None = None,
) -> Any:
    """Make ``call`` on ``fast`` and its general twin on ``general`` (by default,
    ``call`` with every verdict forgotten); assert identical outcomes and state."""
    forget_verdicts(general)
    expected = outcome(lambda: (general_call or call)(general))
    got = outcome(lambda: call(fast))
    assert got == expected
    assert observe(fast) == observe(general)
    return got


def _answer_all(sender: Connection, receiver: Connection) -> None:
    for payload in sender.data_to_send():
        for event in receiver.receive_message(payload, now=0.0):
            if isinstance(event, RequestReceived):
                receiver.send_result(event.request_id, {"content": []})
    for payload in receiver.data_to_send():
        sender.receive_message(payload, now=0.0)


WARM_METHODS = ("tools/call", "tools/list", "resources/read", "prompts/get")


def legacy_pair(**client_kw: Any) -> tuple[Connection, Connection]:
    """A legacy client and server, READY, each method of WARM_METHODS answered once."""
    client = Connection(
        "client",
        ConnectionConfig(
            implementation={"name": "c", "version": "1"},
            capabilities=CLIENT_CAPS,
            era="legacy",
            **client_kw,
        ),
        routing=True,
    )
    server = Connection(
        "server",
        ConnectionConfig(
            implementation={"name": "s", "version": "1"},
            capabilities=SERVER_CAPS,
            request_state_key=KEY,
        ),
        routing=True,
    )
    client.start(now=0.0)
    for _ in range(2):
        _answer_all(client, server)
    for method in WARM_METHODS:
        client.send_request(method, {"name": "x"}, now=0.0)
    _answer_all(client, server)
    for method in ("sampling/createMessage", "roots/list"):
        server.send_request(method, {}, now=0.0)
    _answer_all(server, client)
    return client, server


def modern_connections(**server_kw: Any) -> tuple[Connection, Connection]:
    """A modern client and a dual-era server, not started."""
    client = Connection(
        "client",
        ConnectionConfig(
            implementation={"name": "c", "version": "1"}, capabilities=CLIENT_CAPS, era="modern"
        ),
        routing=True,
    )
    server = Connection(
        "server",
        ConnectionConfig(
            implementation={"name": "s", "version": "1"},
            capabilities=SERVER_CAPS,
            request_state_key=KEY,
            **server_kw,
        ),
        routing=True,
    )
    return client, server


def modern_pair(**server_kw: Any) -> tuple[Connection, Connection]:
    """A modern client and a dual-era server, each method of WARM_METHODS answered once."""
    client, server = modern_connections(**server_kw)
    client.start(now=0.0)
    _answer_all(client, server)
    for method in WARM_METHODS:
        client.send_request(method, {"name": "x"}, now=0.0)
    _answer_all(client, server)
    return client, server


# ---------------------------------------------------------------- the events built inline


def no_general_path(monkeypatch: pytest.MonkeyPatch, conn: Connection) -> None:
    """Make ``conn`` fail a test if a message leaves its fast path.

    (The method is patched on the class, not the instance: an instance attribute over a
    method is no shape of the class's, and a compiled class refuses it.)"""

    def refuse(*args: object) -> None:
        raise AssertionError("the message left the fast path")

    monkeypatch.setattr(type(conn), "_receive_one", refuse)


def assert_is_init(event: Any) -> None:
    """``event`` has every field set, equals its attrs-built twin, and is frozen."""
    values = {a.name: getattr(event, a.name) for a in attrs.fields(type(event))}
    assert event == type(event)(**values)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.method = "x"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_fast_path_events_are_init(monkeypatch: pytest.MonkeyPatch, era: str) -> None:
    client, server = legacy_pair() if era == "legacy" else modern_pair()
    no_general_path(monkeypatch, server)
    no_general_path(monkeypatch, client)
    rid = client.send_request("tools/call", {"name": "x"}, progress=True, now=0.0)
    (request,) = client.data_to_send()
    (received,) = server.receive_message(request, now=0.0)
    assert isinstance(received, RequestReceived)
    assert_is_init(received)
    assert (received.request_id, received.method, received.era.value) == (rid, "tools/call", era)
    assert received.progress_token == rid
    assert (received.client_capabilities is None) is (era == "legacy")
    server.send_result(rid, {"content": []})
    (response,) = server.data_to_send()
    (answer,) = client.receive_message(response, now=0.0)
    assert isinstance(answer, ResultReceived)
    assert_is_init(answer)
    assert (answer.request_id, answer.method) == (rid, "tools/call")


# ---------------------------------------------------------------- messages

# Mostly well-formed messages (the fast path's diet), each part sometimes wrong.


def often(draw: st.DrawFn, usual: Any, unusual: st.SearchStrategy[Any]) -> Any:
    """``usual`` four times in five, else something drawn from ``unusual``."""
    return usual if draw(st.integers(0, 4)) else draw(unusual)


ids = st.sampled_from([True, None, 1.5, [1], "a", "b", 3])
methods = st.sampled_from(
    ["ping", "initialize", "sampling/createMessage", "roots/list", "no", 7, ["tools/call"]]
)


@st.composite
def metas(draw: st.DrawFn, modern: bool) -> Any:
    if not draw(st.integers(0, 5)):
        return draw(st.sampled_from([None, "not an object", ["x"]]))
    meta: dict[str, Any] = {}
    if modern or not draw(st.integers(0, 3)):
        meta[PV] = often(draw, V, st.sampled_from(["2025-11-25", "1999-01-01", 5]))
    if modern or not draw(st.integers(0, 3)):
        meta[CC] = often(draw, {}, st.sampled_from([{"sampling": {}}, None, "x"]))
    if draw(st.booleans()):
        meta[CI] = draw(st.sampled_from([{"name": "c", "version": "1"}, None, 3]))
    if not draw(st.integers(0, 4)):
        meta[LL] = draw(st.sampled_from(["info", "loud", None, 3]))
    if not draw(st.integers(0, 2)):
        meta["progressToken"] = draw(st.sampled_from([1, "t", True, 1.5, None]))
    if not draw(st.integers(0, 4)):
        meta["traceparent"] = "00-trace"
    return meta


@st.composite
def param_objects(draw: st.DrawFn, modern: bool) -> Any:
    kind = often(draw, "object", st.sampled_from(["absent", "null", "list"]))
    if kind != "object":
        return {"absent": ..., "null": None, "list": [1]}[kind]
    params: dict[str, Any] = {"name": "x"}
    if not draw(st.integers(0, 5)):
        params["requestState"] = draw(st.sampled_from(["garbage", 3]))
    if not draw(st.integers(0, 5)):
        params["inputResponses"] = draw(st.sampled_from([{}, {"k": {}}, "x"]))
    if draw(st.booleans()) or modern:
        params["_meta"] = draw(metas(modern))
    return params


@st.composite
def requests(draw: st.DrawFn, modern: bool = False) -> Any:
    message: dict[str, Any] = {"jsonrpc": often(draw, "2.0", st.just("1.0"))}
    message["method"] = often(draw, draw(st.sampled_from(WARM_METHODS)), methods)
    if draw(st.integers(0, 9)):
        message["id"] = often(draw, draw(st.integers(1, 12)), ids)
    params = draw(param_objects(modern))
    if params is not ...:
        message["params"] = params
    return message


results: st.SearchStrategy[Any] = st.one_of(
    st.just({"content": []}),
    st.fixed_dictionaries(
        {"content": st.just([])},
        optional={
            "resultType": st.sampled_from(["complete", "input_required", "other", None]),
            "inputRequests": st.just({"k": {"method": "roots/list", "params": {}}}),
            "requestState": st.just("s"),
        },
    ),
    st.sampled_from([None, [], "x"]),
)


@st.composite
def responses(draw: st.DrawFn) -> Any:
    message: dict[str, Any] = {"jsonrpc": often(draw, "2.0", st.just("1.0"))}
    if draw(st.integers(0, 9)):
        message["id"] = often(draw, draw(st.integers(0, 6)), ids)
    if draw(st.integers(0, 9)):
        message["result"] = draw(results)
    if not draw(st.integers(0, 9)):
        message["error"] = {"code": -1, "message": "no"}
    if not draw(st.integers(0, 19)):
        message["method"] = draw(st.sampled_from(["ping", 7]))
    return message


def as_bytes(message: Any) -> bytes:
    return dumps(message)


# ---------------------------------------------------------------- receive_message


def deliver(fast: Connection, general: Connection, message: bytes) -> None:
    same(
        fast,
        general,
        lambda conn: conn.receive_message(message, now=0.0),
        lambda conn: receive_general(conn, message),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(requests(), min_size=1, max_size=4))
def test_legacy_server_receives_requests_alike(messages: list[Any]) -> None:
    (_, fast), (_, general) = legacy_pair(), legacy_pair()
    for message in messages:
        deliver(fast, general, as_bytes(message))


@settings(max_examples=300, deadline=None)
@given(st.lists(requests(modern=True), min_size=1, max_size=4))
def test_modern_server_receives_requests_alike(messages: list[Any]) -> None:
    (_, fast), (_, general) = modern_pair(), modern_pair()
    for message in messages:
        deliver(fast, general, as_bytes(message))


@settings(max_examples=200, deadline=None)
@given(st.lists(requests(), min_size=1, max_size=4))
def test_legacy_client_receives_requests_alike(messages: list[Any]) -> None:
    (fast, _), (general, _) = legacy_pair(), legacy_pair()
    for message in messages:
        deliver(fast, general, as_bytes(message))


def _with_pending(
    pair: Callable[[], tuple[Connection, Connection]],
) -> Callable[[], tuple[Connection, Connection]]:
    """``pair()``, whose client then has five requests of its own in flight."""

    def make() -> tuple[Connection, Connection]:
        client, server = pair()
        client.send_request("tools/call", {"name": "x"}, now=0.0)
        client.send_request("tools/call", {"name": "x"}, progress=True, now=0.0)
        client.send_request("resources/read", {"uri": "x"}, now=0.0)
        client.send_request("tools/list", now=0.0)
        if client.era is Era.MODERN:
            client.send_request("subscriptions/listen", {"notifications": {}}, now=0.0)
        else:
            client.send_request("ping", now=0.0)
        client.data_to_send()
        return client, server

    return make


def _restarting(
    pair: Callable[[], tuple[Connection, Connection]],
) -> Callable[[], tuple[Connection, Connection]]:
    """``pair()``, whose client then starts a new session and holds its requests for
    it (``resend_request``): an answer to a held request must end it on both paths."""

    def make() -> tuple[Connection, Connection]:
        client, server = pair()
        in_flight = client.pending_requests()
        client.restart_session(now=0.0)
        for rid in in_flight:
            client.resend_request(rid)
        client.data_to_send()
        return client, server

    return make


@pytest.mark.parametrize("era", ["legacy", "modern", "restarting"])
@settings(max_examples=300, deadline=None)
@given(messages=st.lists(responses(), min_size=1, max_size=4))
def test_client_receives_responses_alike(era: str, messages: list[Any]) -> None:
    make = _with_pending(legacy_pair if era != "modern" else modern_pair)
    if era == "restarting":
        make = _restarting(make)
    (fast, _), (general, _) = make(), make()
    base = fast._next_id - 5  # the ids of the five requests in flight are base+1..base+5
    base -= era == "restarting"  # (and the new initialize's)
    for message in messages:
        if type(message.get("id")) is int:
            message["id"] += base  # 1-5 ours, 0 answered before, 6 unknown
        deliver(fast, general, as_bytes(message))


# ---------------------------------------------------------------- sending


send_params = st.one_of(
    st.none(),
    st.just({"name": "x"}),
    st.just({"name": "x", "_meta": None}),
    st.just({"name": "x", "_meta": {"traceparent": "t"}}),
    st.just({"name": "x", "_meta": "not an object"}),
    st.just({"name": object()}),  # not JSON: TypeError, nothing changes
)


@pytest.mark.parametrize("era", ["legacy", "modern"])
@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from([*WARM_METHODS, "ping", "initialize", "sampling/createMessage"]),
            send_params,
            st.booleans(),
            st.sampled_from([None, None, "info", "loud"]),
            st.sampled_from([None, None, 5.0]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_client_sends_requests_alike(
    era: str, calls: list[tuple[str, Any, bool, str | None, float | None]]
) -> None:
    make = legacy_pair if era == "legacy" else modern_pair
    (fast, _), (general, _) = make(), make()
    for method, params, progress, log_level, timeout in calls:
        if era == "legacy" and log_level is not None:
            continue  # a modern-only argument
        same(fast, general, _send(method, params, progress, log_level, timeout))


def _send(
    method: str, params: Any, progress: bool, log_level: str | None, timeout: float | None
) -> Callable[[Connection], Any]:
    return lambda conn: conn.send_request(
        method, params, progress=progress, log_level=log_level, timeout=timeout, now=0.0
    )


@pytest.mark.parametrize(
    "config", [{}, {"cache_ttl_ms": 5, "cache_scope": "public"}], ids=["default", "hints"]
)
@settings(max_examples=150, deadline=None)
@given(
    method=st.sampled_from([*WARM_METHODS, "resources/list"]),
    result=st.one_of(
        st.fixed_dictionaries(
            {"content": st.just([])},
            optional={
                "resultType": st.sampled_from(["complete", "input_required", 3]),
                "_meta": st.sampled_from([None, {"k": 1}, "x"]),
                "ttlMs": st.sampled_from([1, -2]),
                "extra": st.just(object()),
            },
        ),
        st.just([]),
    ),
)
def test_modern_server_sends_results_alike(
    config: dict[str, Any], method: str, result: Any
) -> None:
    (client, fast), (_, general) = modern_pair(**config), modern_pair(**config)
    rid = client.send_request(method, {"name": "x"}, now=0.0)
    (request,) = client.data_to_send()
    fast.receive_message(request, now=0.0)
    general.receive_message(request, now=0.0)
    assert fast._server_meta is not None  # (valid hints: the fast path is on)
    same(fast, general, lambda conn: conn.send_result(rid, result))


def test_modern_envelope_is_built_once_per_version() -> None:
    client, server = modern_pair()
    first = client.send_request("tools/call", {"name": "x"}, now=0.0)
    second = client.send_request("tools/call", None, now=0.0)
    payloads = [loads(p) for p in client.data_to_send()]
    assert [p["id"] for p in payloads] == [first, second]
    assert payloads[0]["params"]["_meta"] == payloads[1]["params"]["_meta"]
    assert payloads[1]["params"] == {"_meta": payloads[0]["params"]["_meta"]}
    assert set(payloads[0]["params"]["_meta"]) == {PV, CC, CI}
    del server


def test_receive_bytes_takes_the_same_path_as_receive_message() -> None:
    (_, by_line), (_, by_message) = legacy_pair(), legacy_pair()
    message = {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "x"}}
    events = by_line.receive_bytes(
        dumps(message) + b"\n" + dumps({**message, "id": 100}) + b"\n", now=0.0
    )
    expected = by_message.receive_message(dumps(message), now=0.0) + by_message.receive_message(
        dumps({**message, "id": 100}), now=0.0
    )
    assert events == expected
    assert [e.era for e in events if isinstance(e, RequestReceived)] == [Era.LEGACY] * 2


@settings(max_examples=100, deadline=None)
@given(
    params=send_params.filter(
        lambda p: p is None or (type(p["name"]) is str and p.get("_meta") != "not an object")
    ),
    progress=st.booleans(),
    log_level=st.sampled_from([None, "info"]),
)
def test_modern_envelope_is_what_the_modern_module_builds(
    params: Any, progress: bool, log_level: str | None
) -> None:
    client, _ = modern_pair()
    for _ in range(2):  # the second request reuses the envelope the first one built
        rid = client.send_request(
            "tools/call", params, progress=progress, log_level=log_level, now=0.0
        )
        (payload,) = client.data_to_send()
        expected = _modern.attach_meta(
            params,
            _modern.build_request_meta(
                protocol_version=V,
                client_capabilities=CLIENT_CAPS,
                client_info={"name": "c", "version": "1"},
                log_level=log_level,
                progress_token=rid if progress else None,
            ),
        )
        sent = loads(payload)
        assert sent == {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": expected}
        assert list(sent["params"]) == list(expected)  # the same key order, too
        assert list(sent["params"]["_meta"]) == list(expected["_meta"])


TRICKY: list[Any] = [
    {"method": ["tools/call"], "params": {"name": "x"}},
    {"method": {"m": 1}, "params": {"_meta": {PV: V, CC: {}}}},
    {"method": "tools/call", "params": {"_meta": "not an object"}},
    {"method": "tools/call", "params": {"_meta": ["x"]}},
    {"method": "tools/call", "params": {"_meta": {"progressToken": ["x"]}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, CI: None}}},
    {"method": "tools/call", "params": {"_meta": {PV: [V], CC: {}}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, "progressToken": 1}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, LL: "debug"}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, LL: None}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, "progressToken": None}}},
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, "progressToken": True}}},
    {
        "method": "tools/call",
        "params": {"_meta": {PV: V, CC: {}, CI: {"name": "c"}, LL: "error", "progressToken": "t"}},
    },
    {"method": "tools/call", "params": {"_meta": {PV: V, CC: {}, CI: {}, "traceparent": "t"}}},
    {"method": "tools/list", "params": {"_meta": {PV: V, CC: {}}, "requestState": "x"}},
    {"method": "tools/call", "id": {"x": 1}},
    {"method": "tools/call", "params": "x"},
]


@pytest.mark.parametrize("message", TRICKY)
@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
def test_tricky_requests_alike(
    make: Callable[[], tuple[Connection, Connection]], message: dict[str, Any]
) -> None:
    (_, fast), (_, general) = make(), make()
    full = {"jsonrpc": "2.0", "id": 77, **message}
    deliver(fast, general, as_bytes(full))


# ---------------------------------------------------------------- the fast paths are taken


def _general_path_forbidden(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("took the general path")


@pytest.mark.parametrize(
    "meta",
    [
        {PV: V, CC: {}},
        {PV: V, CC: {}, CI: {"name": "c", "version": "1"}},
        {PV: V, CC: {}, LL: "warning", "progressToken": 7},
        {PV: V, CC: {}, CI: {}, "progressToken": "t", "traceparent": "t"},
    ],
)
def test_modern_requests_with_envelope_extras_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, meta: dict[str, Any]
) -> None:
    _, server = modern_pair()
    monkeypatch.setattr(Connection, "_receive_one", _general_path_forbidden)
    message = {"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"_meta": meta}}
    (event,) = server.receive_message(dumps(message), now=0.0)
    assert isinstance(event, RequestReceived)
    assert event.era is Era.MODERN and event.client_capabilities == {}
    assert event.progress_token == meta.get("progressToken")
    assert server.has_progress_token(50) is ("progressToken" in meta)
    assert server._inbound_log_level == ({50: meta[LL]} if LL in meta else {})
    server.send_result(50, {"content": []})
    assert server._inbound_log_level == {}


@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
def test_plain_requests_take_the_send_fast_path(
    monkeypatch: pytest.MonkeyPatch, make: Callable[[], tuple[Connection, Connection]]
) -> None:
    client, server = make()
    monkeypatch.setattr(Connection, "_send_request", _general_path_forbidden)
    first = client.send_request("tools/call", {"name": "x"}, now=0.0)
    second = client.send_request("tools/list", now=0.0)
    assert client.pending_requests() == (first, second)
    entry = client._pending[first]
    assert (entry.method, entry.era, entry.progress_token) == ("tools/call", client.era, None)
    assert (entry.deadline, entry.rounds, entry.timeout, entry.request_state) == (
        None,
        0,
        None,
        None,
    )
    _answer_all(client, server)
    assert not client.pending_requests()


@pytest.mark.parametrize("params", [{"name": "x"}, None])
@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
def test_the_send_fast_path_records_what_the_general_path_records(
    make: Callable[[], tuple[Connection, Connection]], params: dict[str, Any] | None
) -> None:
    # The record keeps the params as sent, the envelope a dict (re-issue and retry send
    # them again, and read them); the caller's params are not changed.
    (fast, _), (general, _) = make(), make()
    given = None if params is None else dict(params)
    same(fast, general, lambda conn: conn.send_request("tools/call", given, now=0.0))
    assert given == params
    (rid,) = fast.pending_requests()
    recorded = fast._pending[rid].params
    assert recorded == general._pending[rid].params
    if fast.era is Era.MODERN:
        assert recorded is not None and type(recorded["_meta"]) is dict


@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
@pytest.mark.parametrize("close", ["eof", "half-close", "send_failed"])
def test_closed_connection_refuses_methods_it_sent_before(
    make: Callable[[], tuple[Connection, Connection]], close: str
) -> None:
    client, _ = make()
    if close == "send_failed":
        client.send_failed()
    else:
        client.send_request("tools/call", {"name": "x"}, now=0.0)  # (so a half-close holds)
        client.receive_eof(keep_answering=close == "half-close")
    for method in WARM_METHODS:
        with pytest.raises(LocalProtocolError, match="closed"):
            client.send_request(method, {"name": "x"}, now=0.0)
    assert client.data_to_send() == [] or close != "send_failed"


def test_modern_envelope_is_rebuilt_when_the_era_is_settled() -> None:
    # The fast path of send_request takes the cached envelope as that of the settled
    # version: one left from before (with a verdict: the fast path's first request) must
    # not go out.
    client, server = modern_connections()
    client.start(now=0.0)  # (server/discover carries an envelope built for its version)
    stale = {PV: "2000-01-01", CC: {}}
    client._envelope = ("2000-01-01", stale, Fragment(dumps(stale)))
    client._send_ok.add("tools/call")
    _answer_all(client, server)
    for params in ({"name": "x"}, None):
        client.send_request("tools/call", params, now=0.0)
        (payload,) = client.data_to_send()
        assert loads(payload)["params"]["_meta"][PV] == V


NOT_OBJECTS: list[Any] = [
    [],
    [{"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "x"}}],
    ["jsonrpc"],
    "jsonrpc",
    "",
    0,
    7.5,
    None,
    True,
    False,
]


@pytest.mark.parametrize("value", NOT_OBJECTS, ids=repr)
@pytest.mark.parametrize("side", ["client", "server"])
@pytest.mark.parametrize("make", [legacy_pair, modern_pair], ids=["legacy", "modern"])
def test_messages_that_are_not_objects_take_the_general_path_alike(
    make: Callable[[], tuple[Connection, Connection]], side: str, value: Any
) -> None:
    # The fast path tells an object by subscripting it ("jsonrpc"): anything else (a
    # batch, a string, a number, null) must leave it before any change, as a dict
    # test did.
    pick = 0 if side == "client" else 1
    fast, general = make()[pick], make()[pick]
    deliver(fast, general, as_bytes(value))

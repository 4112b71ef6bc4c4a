"""``ctx.elicit`` asks only what the negotiated revision can carry: no elicitation before
2025-06-18, no URL mode before 2025-11-25, and a form checked against that revision's
``PrimitiveSchemaDefinition`` (2025-06-18: no multi-select, no titled options, defaults
only on booleans; 2025-11-25 and 2026-07-28 share the richer one). ``ctx.sample`` sends
no content type the revision's ``SamplingMessage`` lacks (audio before 2025-03-26)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal

import pytest
import trio
import trio.testing

import mcp_trio
from mcp_sansio import ConnectionConfig, ErrorCode, LifecycleState, _conn_handshake
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpResponse
from mcp_trio import Handlers, McpError, RequestContext, SessionConfig
from mcp_trio._context import Context
from mcp_trio._http_config import HttpTransportConfig
from mcp_trio._http_endpoint import Endpoint
from mcp_trio._server import Server
from mcp_trio._server_forms import form_spec

from ..core.test_http_server import in_session, initialize, make_server, note
from ..core.test_http_server import req as core_req
from ..core.test_http_server import rpc as core_rpc
from ..schema import validate
from .test_http_support import POST_HEADERS, RawConnection, raw_request, rpc
from .test_server_context import ALL_CAPS, Asker, accept, text

MULTI: dict[str, Any] = {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}}
TITLED_MULTI: dict[str, Any] = {
    "type": "array",
    "items": {"anyOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
}
TITLED: dict[str, Any] = {
    "type": "string",
    "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}],
}
LEGACY_TITLED: dict[str, Any] = {
    "type": "string",
    "enum": ["r", "g"],
    "enumNames": ["Red", "Green"],
}


def form(**fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": fields}


def legacy(server: Server, version: str, brain: Any = None, **options: Any) -> Asker:
    """A legacy client pinned to ``version``."""
    return Asker(server, "legacy", brain or accept(), supported_versions=(version,), **options)


def elicit_params(version: str, params: dict[str, Any]) -> None:
    """Validate the params of an ``elicitation/create`` against ``version``'s schema."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": params}
    validate(version, "ElicitRequest", message)


# ================================================================== none before 2025-06-18


def asking_server() -> Server:
    server = Server("asking")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Name?", str)
        except McpError as exc:  # the tool author's fallback
            return f"cannot ask: {exc.code} {exc.message}"
        return f"asked: {answer.data}"

    @server.tool()
    async def ask_plainly(ctx: Context) -> str:
        await ctx.elicit("Name?", str)
        return "unreachable"

    return server


@pytest.fixture
def declares_anyway(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client is one of another library, which declares in its ``initialize`` what
    the version it offers does not define (ours leaves that out:
    tests/core/test_newer_fields.py), so that the server's own gate is what refuses."""
    monkeypatch.setattr(_conn_handshake, "_capabilities_of", lambda version, caps: caps)


@pytest.mark.usefixtures("declares_anyway")
@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
async def test_elicit_is_refused_in_a_revision_without_elicitation(version: str) -> None:
    asker = legacy(asking_server(), version)  # the client declares elicitation anyway
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask")) == (
            f"cannot ask: {ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY} elicitation/create "
            f"does not exist in protocol version {version}, the version of this session (it "
            "needs one of 2025-11-25, 2025-06-18)"
        )
        with pytest.raises(McpError) as info:
            await asker.call(client, "ask_plainly")
    assert not asker.asked  # nothing went to the client
    # the same error as for a client without the capability
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {
        "protocolVersion": version,
        "supported": ["2025-11-25", "2025-06-18"],
    }


async def test_elicit_without_the_capability_in_an_old_revision() -> None:
    asker = legacy(asking_server(), "2025-03-26", capabilities={"sampling": {}})
    async with asker.connect() as client:
        with pytest.raises(McpError) as info:
            await asker.call(client, "ask_plainly")
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_elicit_is_sent_from_2025_06_18(version: str) -> None:
    asker = legacy(asking_server(), version, accept({"value": "Ada"}))
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask")) == "asked: Ada"
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    elicit_params(version, params)
    # "mode" came with 2025-11-25; a 2025-06-18 request has none
    assert ("mode" in params) is (version == "2025-11-25")


async def test_sampling_and_roots_are_not_gated() -> None:
    server = Server("roots")

    @server.tool()
    async def roots(ctx: Context) -> str:
        return str(len(await ctx.list_roots()))

    asker = legacy(server, "2024-11-05", lambda method, params: {"roots": []})
    async with asker.connect() as client:
        assert text(await asker.call(client, "roots")) == "0"
    assert [m for m, _ in asker.asked] == ["roots/list"]


# ================================================================== URL mode


def paying_server() -> Server:
    server = Server("pay")

    @server.tool()
    async def pay(ctx: Context) -> str:
        answer = await ctx.elicit_url("https://example.com/pay", "Pay", elicitation_id="e1")
        return answer.action

    return server


@pytest.mark.usefixtures("declares_anyway")
async def test_url_mode_is_refused_before_2025_11_25() -> None:
    asker = legacy(paying_server(), "2025-06-18", capabilities=ALL_CAPS)
    async with asker.connect() as client:
        with pytest.raises(McpError) as info:
            await asker.call(client, "pay")
    assert not asker.asked
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.message == (
        "URL-mode elicitation does not exist in protocol version 2025-06-18, the version of "
        "this session (it needs one of 2025-11-25, 2026-07-28)"
    )


async def test_url_mode_in_2025_11_25() -> None:
    asker = legacy(paying_server(), "2025-11-25", capabilities=ALL_CAPS)
    async with asker.connect() as client:
        assert text(await asker.call(client, "pay")) == "accept"
    ((_, params),) = asker.asked
    validate("2025-11-25", "ElicitRequestURLParams", params)


# ================================================================== the form, by revision


def form_server(schema: Any) -> Server:
    server = Server("forms")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Choose", schema)
        except TypeError as exc:  # a form the session cannot carry: at the call
            return f"TypeError: {exc}"
        return f"{answer.action}: {answer.data}"

    return server


REFUSED_IN_2025_06_18 = [
    pytest.param(
        form(colors=MULTI),
        "elicitation field 'colors': multi-select (a list of enum strings) fields exist only "
        "in protocol versions 2025-11-25, 2026-07-28, and this session speaks 2025-06-18",
        id="multi-select",
    ),
    pytest.param(
        form(colors=TITLED_MULTI),
        "elicitation field 'colors': multi-select (a list of enum strings) fields exist only "
        "in protocol versions 2025-11-25, 2026-07-28, and this session speaks 2025-06-18",
        id="titled-multi-select",
    ),
    pytest.param(
        form(color=TITLED),
        "elicitation field 'color': titled-option (oneOf) fields exist only in protocol "
        "versions 2025-11-25, 2026-07-28, and this session speaks 2025-06-18",
        id="titled-single-select",
    ),
    pytest.param(
        form(name={"type": "string", "default": "Ada"}),
        "elicitation field 'name': ['default'] are not allowed on 'string' fields in "
        "protocol version 2025-06-18",
        id="string-default",
    ),
    pytest.param(
        form(age={"type": "integer", "default": 3}),
        "elicitation field 'age': ['default'] are not allowed on 'integer' fields in "
        "protocol version 2025-06-18",
        id="number-default",
    ),
    pytest.param(
        form(color={"type": "string", "enum": ["r", "g"], "default": "r"}),
        "elicitation field 'color': ['default'] are not allowed on 'string' fields in "
        "protocol version 2025-06-18",
        id="enum-default",
    ),
]


@pytest.mark.parametrize(("schema", "message"), REFUSED_IN_2025_06_18)
async def test_a_form_2025_06_18_cannot_carry_is_refused_at_the_call(
    schema: dict[str, Any], message: str
) -> None:
    asker = legacy(form_server(schema), "2025-06-18")
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask")) == f"TypeError: {message}"
    assert not asker.asked
    with pytest.raises(TypeError) as info:
        form_spec(schema, protocol_version="2025-06-18")
    assert str(info.value) == message


@pytest.mark.parametrize(
    "schema", [pytest.param(p.values[0], id=p.id) for p in REFUSED_IN_2025_06_18]
)
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_same_form_goes_out_in_2025_11_25_and_2026_07_28(
    schema: dict[str, Any], era: str
) -> None:
    version = "2025-11-25" if era == "legacy" else "2026-07-28"
    options = {"supported_versions": (version,)} if era == "legacy" else {}
    asker = Asker(form_server(schema), era, lambda m, p: {"action": "decline"}, **options)
    async with asker.connect() as client:
        assert client.handshake is not None
        assert client.handshake.protocol_version == version
        assert text(await asker.call(client, "ask")) == "decline: None"
    ((_, params),) = asker.asked
    assert params == {"mode": "form", "message": "Choose", "requestedSchema": schema}
    validate(version, "ElicitRequestFormParams", params)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(form(color=LEGACY_TITLED), id="enum-with-enumNames"),
        pytest.param(form(ok={"type": "boolean", "default": True}), id="boolean-default"),
        pytest.param(
            form(mail={"type": "string", "format": "email", "minLength": 3, "title": "Mail"}),
            id="string",
        ),
        pytest.param(form(n={"type": "number", "minimum": 0, "maximum": 9}), id="number"),
    ],
)
async def test_what_2025_06_18_carries_goes_out(schema: dict[str, Any]) -> None:
    asker = legacy(form_server(schema), "2025-06-18", lambda m, p: {"action": "decline"})
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask")) == "decline: None"
    ((_, params),) = asker.asked
    assert params == {"message": "Choose", "requestedSchema": schema}
    elicit_params("2025-06-18", params)


@dataclasses.dataclass
class Stay:
    nights: int
    breakfast: bool = False
    room: Literal["single", "double"] = "single"


async def test_a_form_from_a_type_leaves_off_the_defaults_2025_06_18_cannot_show() -> None:
    server = Server("booking")

    @server.tool()
    async def book(ctx: Context) -> str:
        answer = await ctx.elicit("How long?", Stay)
        return repr(answer.data)

    asker = legacy(server, "2025-06-18", accept({"nights": 2}))
    async with asker.connect() as client:
        # the user left room empty: the type's own default still applies
        assert text(await asker.call(client, "book")) == (
            "Stay(nights=2, breakfast=False, room='single')"
        )
    ((_, params),) = asker.asked
    assert params == {
        "message": "How long?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "nights": {"type": "integer"},
                "breakfast": {"type": "boolean", "default": False},
                "room": {"type": "string", "enum": ["single", "double"]},
            },
            "required": ["nights"],
        },
    }
    elicit_params("2025-06-18", params)
    # a multi-select from a type is refused as well
    with pytest.raises(TypeError, match="multi-select"):
        form_spec(list[Literal["a", "b"]], protocol_version="2025-06-18")
    assert form_spec(list[Literal["a", "b"]], protocol_version="2025-11-25").schema["properties"][
        "value"
    ]["type"] == ("array")


# ================================================== served before notifications/initialized


async def _sse_messages(conn: RawConnection, want: int) -> list[dict[str, Any]]:
    """Read ``want`` JSON-RPC messages from an SSE response on ``conn``."""
    found: list[dict[str, Any]] = []
    buffer = b""
    while len(found) < want:
        buffer += await conn.read_data()
        *lines, buffer = buffer.split(b"\n")
        found += [loads(line[6:]) for line in lines if line.startswith(b"data: {")]
    return found


CONFIG = ConnectionConfig(
    implementation={"name": "asking", "version": "1"}, capabilities={"tools": {}}
)


@pytest.mark.parametrize("api", ["Server", "Handlers"])
async def test_a_tool_served_before_initialized_asks_once_it_comes(
    nursery: trio.Nursery, api: str
) -> None:
    """Over HTTP the first tools/call may arrive before notifications/initialized; its
    question waits for that POST instead of failing."""
    started = trio.Event()
    if api == "Server":
        server = Server("asking")

        @server.tool()
        async def ask(ctx: Context) -> str:
            started.set()
            answer = await ctx.elicit("Name?", str)
            return f"asked: {answer.data}"

        serve = functools.partial(server.serve_http, "127.0.0.1", 0)
    else:
        handlers = Handlers()

        @handlers.on_request("tools/call")
        async def ask_by_hand(ctx: RequestContext) -> dict[str, Any]:
            started.set()
            form = {"type": "object", "properties": {"value": {"type": "string"}}}
            params = {"mode": "form", "message": "Name?", "requestedSchema": form}
            answer = await ctx.send_request("elicitation/create", params)
            text = f"asked: {answer['content']['value']}"
            return {"content": [], "structuredContent": {"result": text}}

        serve = functools.partial(mcp_trio.serve_http, handlers, connection_config=CONFIG)

    handle = await nursery.start(serve)
    version = "2025-11-25"
    init = rpc(
        1,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    )
    with trio.fail_after(10):
        first = await raw_request(handle.port, "POST", body=init)
        session = first.headers["mcp-session-id"]
        headers = (*POST_HEADERS, ("mcp-session-id", session), ("mcp-protocol-version", version))
        call = await RawConnection.open(handle.port)
        try:
            await call.send("POST", headers=headers, body=rpc(2, "tools/call", {"name": "ask"}))
            await started.wait()  # served, and waiting: no initialized yet
            note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            reply = await raw_request(handle.port, "POST", headers=headers, body=note)
            assert reply.status == 202
            assert (await call.head()).status_code == 200
            (question,) = await _sse_messages(call, 1)
            assert question["method"] == "elicitation/create"
            answer = {"action": "accept", "content": {"value": "Ada"}}
            body = dumps({"jsonrpc": "2.0", "id": question["id"], "result": answer})
            reply = await raw_request(handle.port, "POST", headers=headers, body=body)
            assert reply.status == 202
            (result,) = await _sse_messages(call, 1)
        finally:
            await call.aclose()
    assert result["id"] == 2
    assert result["result"]["structuredContent"] == {"result": "asked: Ada"}


# ================================================================== sampling content


def sampling_server(content: dict[str, Any]) -> Server:
    server = Server("listener")

    @server.tool()
    async def hear(ctx: Context) -> str:
        answer = await ctx.sample([{"role": "user", "content": content}], max_tokens=5)
        return answer.text

    return server


AUDIO: dict[str, Any] = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
HEARD = {"role": "assistant", "content": {"type": "text", "text": "a beep"}, "model": "m"}


async def test_audio_in_a_sampling_message_is_refused_in_2024_11_05() -> None:
    asker = legacy(sampling_server(AUDIO), "2024-11-05", lambda m, p: HEARD, capabilities=ALL_CAPS)
    async with asker.connect() as client:
        with pytest.raises(McpError) as info:
            await asker.call(client, "hear")
    assert not asker.asked
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.message.startswith(
        "audio content in a sampling message does not exist in protocol version 2024-11-05"
    )
    assert "2025-03-26, 2025-06-18" in info.value.message


@pytest.mark.parametrize("version", ["2025-03-26", "2025-11-25"])
async def test_audio_in_a_sampling_message_goes_out_where_it_exists(version: str) -> None:
    asker = legacy(sampling_server(AUDIO), version, lambda m, p: HEARD, capabilities=ALL_CAPS)
    async with asker.connect() as client:
        assert text(await asker.call(client, "hear")) == "a beep"
    ((_, params),) = asker.asked
    message = {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": params}
    validate(version, "CreateMessageRequest", message)
    assert params["messages"][0]["content"] == AUDIO


def context_server() -> Server:
    server = Server("contextual")

    @server.tool()
    async def recall(ctx: Context) -> str:
        answer = await ctx.sample("what did we say?", max_tokens=5, include_context="thisServer")
        return answer.text

    return server


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
async def test_include_context_is_free_before_2025_11_25(version: str) -> None:
    # No sampling.context before 2025-11-25: includeContext is sent as asked (the
    # client "MAY ignore this request"), to a client that declared plain sampling.
    asker = legacy(context_server(), version, lambda m, p: HEARD, capabilities=ALL_CAPS)
    async with asker.connect() as client:
        assert text(await asker.call(client, "recall")) == "a beep"
    ((_, params),) = asker.asked
    message = {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": params}
    validate(version, "CreateMessageRequest", message)
    assert params["includeContext"] == "thisServer"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_include_context_needs_sampling_context_from_2025_11_25(era: str) -> None:
    # client/sampling.mdx (2025-11-25, 2026-07-28): thisServer and allServers "SHOULD NOT"
    # be used "unless the client declares sampling.context capability".
    asker = Asker(context_server(), era, lambda m, p: HEARD, capabilities=ALL_CAPS)
    async with asker.connect() as client:
        assert client.handshake is not None
        assert client.handshake.protocol_version in ("2025-11-25", "2026-07-28")
        with pytest.raises(McpError) as info:
            await asker.call(client, "recall")
    assert not asker.asked
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.data == {"requiredCapabilities": {"sampling": {"context": {}}}}
    caps = {**ALL_CAPS, "sampling": {"context": {}}}
    asker = Asker(context_server(), era, lambda m, p: HEARD, capabilities=caps)
    async with asker.connect() as client:
        assert text(await asker.call(client, "recall")) == "a beep"
    assert asker.asked[0][1]["includeContext"] == "thisServer"


async def test_http_waiters_for_initialized_each_keep_their_own_patience(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """One request giving up leaves the session's other waiters waiting; the last one
    out empties the table."""
    http = make_server()
    reply = http.handle_request(core_req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse)
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    conn = http.session_connection(sid)
    assert conn is not None and conn.lifecycle is LifecycleState.ANSWERED
    endpoint = Endpoint(
        http, Handlers(), SessionConfig(handshake_timeout=10), HttpTransportConfig()
    )
    waited: dict[str, float] = {}

    async def wait(name: str, after: float) -> None:
        await trio.sleep(after)
        start = trio.current_time()
        await endpoint.until_initialized(conn)
        waited[name] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, "first", 0)
        nursery.start_soon(wait, "second", 8)
        await trio.sleep(11)  # the first gives up at 10; the second waits on
        assert set(waited) == {"first"}
        done = http.handle_request(
            core_req(body=note("notifications/initialized"), **in_session(sid)), now=11
        )
        await endpoint.handle_events(done.events)
    assert waited["first"] == pytest.approx(10)
    assert waited["second"] == pytest.approx(3)  # woken by the notification at 11
    assert endpoint._initialized == {}


async def test_http_a_cancelled_wait_for_initialized_leaves_no_entry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    http = make_server()
    reply = http.handle_request(core_req(body=initialize()), now=0)
    assert isinstance(reply.decision, HttpResponse)
    conn = http.session_connection(reply.decision.header("mcp-session-id") or "")
    assert conn is not None
    endpoint = Endpoint(http, Handlers(), SessionConfig(), HttpTransportConfig())
    with trio.move_on_after(1):
        await endpoint.until_initialized(conn)
    assert endpoint._initialized == {}


async def test_http_initialized_last_in_a_batch_wakes_its_waiters_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """2025-03-26: in a batch ``[tools/call, notifications/initialized]`` the call may
    wait for a handler slot; the waiters are woken before that, not after."""
    http = make_server()
    reply = http.handle_request(core_req(body=initialize(version="2025-03-26")), now=0)
    assert isinstance(reply.decision, HttpResponse)
    sid = reply.decision.header("mcp-session-id")
    assert sid is not None
    conn = http.session_connection(sid)
    assert conn is not None
    endpoint = Endpoint(
        http,
        Handlers(),
        SessionConfig(max_concurrent_handlers=1, handshake_timeout=10),
        HttpTransportConfig(),
    )
    waited: list[float] = []

    async def wait() -> None:
        await endpoint.until_initialized(conn)
        waited.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        endpoint.nursery = nursery
        nursery.start_soon(wait)
        assert endpoint.slots.take_nowait(None)  # every handler slot is busy
        await trio.sleep(1)
        batch = [core_rpc(2, "tools/call", {"name": "x"}), note("notifications/initialized")]
        done = http.handle_request(core_req(body=batch, **in_session(sid, "2025-03-26")), now=1)
        nursery.start_soon(endpoint.handle_events, done.events)
        await trio.sleep(3)
        assert waited == [pytest.approx(1)]
        endpoint.slots.give_back(None)

"""The :class:`Context`: asking the client for input with the same handler code in
both eras -- server-to-client requests in a legacy session, multi round-trip requests
(the handler re-run on the retry) in the modern era."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable
from typing import Any, Literal

import pytest
import trio
import trio.testing

import mcp_sansio._modern
from mcp_sansio import ErrorCode, InputRequired
from mcp_trio import Handlers, McpError, RequestContext, Session
from mcp_trio._context import Context, ElicitationResult
from mcp_trio._server import Server
from mcp_trio._server_forms import form_spec

from ..schema import validate
from .test_server import connect

ALL_CAPS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}

Brain = Callable[[str, dict[str, Any]], dict[str, Any]]
"""What the test client answers: ``(method, params) -> result``."""


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test that takes it runs once per era."""
    value: str = request.param
    return value


@dataclasses.dataclass
class Stay:
    nights: int
    breakfast: bool = False
    room: Literal["single", "double"] = "single"
    note: str | None = None


class Asker:
    """A client that answers the server's questions with a :data:`Brain`, in either era,
    and records what it was asked."""

    def __init__(self, server: Server, era: str, brain: Brain, **options: Any) -> None:
        self.server, self.era, self.brain = server, era, brain
        self.options = {"capabilities": ALL_CAPS, **options}
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.rounds: list[list[str]] = []
        self.handlers = Handlers()
        for method in ("elicitation/create", "sampling/createMessage", "roots/list"):
            self.handlers.set_request_handler(method, self._legacy)

    def _answer(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        params = {k: v for k, v in (params or {}).items() if k != "_meta"}
        self.asked.append((method, params))
        return self.brain(method, params)

    async def _legacy(self, ctx: RequestContext) -> dict[str, Any]:
        return self._answer(ctx.method, ctx.params)

    async def _modern(self, event: InputRequired) -> dict[str, Any]:
        self.rounds.append(sorted(event.input_requests))
        return {
            key: self._answer(request["method"], request.get("params"))
            for key, request in event.input_requests.items()
        }

    async def request(self, client: Session, method: str, params: dict[str, Any]) -> Any:
        callback = self._modern if self.era == "modern" else None
        return await client.request(method, params, on_input_required=callback)

    async def call(self, client: Session, name: str, **arguments: Any) -> Any:
        result = await self.request(client, "tools/call", {"name": name, "arguments": arguments})
        assert client.handshake is not None
        validate(client.handshake.protocol_version, "CallToolResult", result)
        return result

    def connect(self) -> Any:
        return connect(self.server, self.era, handlers=self.handlers, **self.options)


def text(result: dict[str, Any]) -> str:
    value: str = result["content"][0]["text"]
    return value


def accept(content: dict[str, Any] | None = None) -> Brain:
    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == "elicitation/create"
        return {"action": "accept", "content": content} if content else {"action": "accept"}

    return brain


def booking_server() -> tuple[Server, list[int]]:
    server = Server("booking")
    runs: list[int] = []

    @server.tool()
    async def book(city: str, ctx: Context) -> str:
        runs.append(1)
        answer = await ctx.elicit(f"How long in {city}?", Stay)
        if not answer.accepted:
            return f"no booking ({answer.action})"
        assert isinstance(answer.data, Stay)
        stay = answer.data
        return f"{city}: {stay.nights} nights, {stay.room}, breakfast={stay.breakfast}"

    return server, runs


async def test_elicit_a_form(era: str) -> None:
    server, runs = booking_server()
    asker = Asker(server, era, accept({"nights": 3, "room": "double"}))
    async with asker.connect() as client:
        result = await asker.call(client, "book", city="Paris")
        assert client.handshake is not None
        version = client.handshake.protocol_version
    assert text(result) == "Paris: 3 nights, double, breakfast=False"
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    validate(version, "ElicitRequestFormParams", params)
    assert params == {
        "mode": "form",
        "message": "How long in Paris?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "nights": {"type": "integer"},
                "breakfast": {"type": "boolean", "default": False},
                "room": {"type": "string", "enum": ["single", "double"], "default": "single"},
                "note": {"type": "string"},
            },
            "required": ["nights"],
        },
    }
    # the modern era re-runs the handler once the answer is there
    assert len(runs) == (2 if era == "modern" else 1)
    assert asker.rounds == ([["elicit-0"]] if era == "modern" else [])


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicit_refused(era: str, action: str) -> None:
    server, _ = booking_server()
    asker = Asker(server, era, lambda method, params: {"action": action})
    async with asker.connect() as client:
        result = await asker.call(client, "book", city="Oslo")
    assert text(result) == f"no booking ({action})"


async def test_elicit_scalars_and_schemas(era: str) -> None:
    server = Server("forms")
    results: list[ElicitationResult[Any]] = []

    @server.tool()
    async def ask(ctx: Context) -> str:
        results.clear()
        results.append(await ctx.elicit("Name?", str))
        results.append(
            await ctx.elicit("Age?", {"type": "object", "properties": {"age": {"type": "integer"}}})
        )
        return "ok"

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        props = params["requestedSchema"]["properties"]
        content = {"value": "Ada"} if "value" in props else {"age": 36}
        return {"action": "accept", "content": content}

    asker = Asker(server, era, brain)
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask")) == "ok"
    assert [r.data for r in results] == ["Ada", {"age": 36}]
    assert asker.asked[0][1]["requestedSchema"]["required"] == ["value"]
    if era == "modern":
        assert asker.rounds == [["elicit-0"], ["elicit-1"]]


def test_form_schema_errors() -> None:
    @dataclasses.dataclass
    class Nested:
        stay: Stay

    with pytest.raises(TypeError, match=r"'stay'.* not object"):
        form_spec(Nested)
    with pytest.raises(TypeError, match="flat object"):
        form_spec({"type": "object", "$defs": {}})
    with pytest.raises(TypeError, match="'x'"):
        form_spec({"type": "object", "properties": {"x": {"type": "object"}}})
    with pytest.raises(TypeError, match="unions"):
        form_spec(
            {
                "type": "object",
                "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
            }
        )
    with pytest.raises(TypeError, match="enum values"):
        form_spec({"type": "object", "properties": {"x": {"enum": ["a", 1], "type": "string"}}})
    with pytest.raises(TypeError, match="lists of enum"):
        form_spec(
            {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}}}}
        )


def test_form_strings_have_only_the_formats_the_spec_allows() -> None:
    # client/elicitation.mdx: StringSchema.format is email, uri, date or date-time; a
    # uuid.UUID or datetime.time field (format uuid / time) would make the client
    # refuse the whole request.
    @dataclasses.dataclass
    class Booking:
        ref: uuid.UUID

    @dataclasses.dataclass
    class Arrival:
        at: datetime.time

    for form in (Booking, Arrival):
        with pytest.raises(TypeError, match="format is one of email, uri, date, date-time"):
            form_spec(form)
    for fmt in ("email", "uri", "date", "date-time"):
        schema = {"type": "object", "properties": {"x": {"type": "string", "format": fmt}}}
        assert form_spec(schema).schema["properties"]["x"]["format"] == fmt


@pytest.fixture
def unchecked_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client whose core sends any answer: the server's own check is under test, and
    ``Connection.retry_with_input`` (modern) or ``send_result`` (a legacy elicitation's
    answer) would refuse these answers first."""
    monkeypatch.setattr(mcp_sansio._modern, "input_responses_problem", lambda *_: None)
    monkeypatch.setattr(mcp_sansio._modern, "elicit_result_problem", lambda *_: None)


@pytest.mark.usefixtures("unchecked_answers")
async def test_an_answer_that_breaks_the_schema_is_invalid_params(era: str) -> None:
    server, _ = booking_server()
    asker = Asker(server, era, accept({"nights": "three"}))
    async with asker.connect() as client:
        with pytest.raises(McpError) as info:
            await asker.call(client, "book", city="Rome")
    assert info.value.code == ErrorCode.INVALID_PARAMS
    assert "content.nights" in info.value.message


async def test_sample_and_roots(era: str) -> None:
    server = Server("thinker")

    @server.tool()
    async def think(topic: str, ctx: Context) -> str:
        roots = await ctx.list_roots()
        answer = await ctx.sample(
            f"Say something about {topic}",
            max_tokens=20,
            system_prompt="Be brief.",
            temperature=0.2,
        )
        return f"{answer.text} ({answer.model}, {answer.stop_reason}) in {roots[0].uri}"

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "roots/list":
            return {"roots": [{"uri": "file:///work", "name": "work"}]}
        assert params == {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Say something about trio"}}
            ],
            "maxTokens": 20,
            "systemPrompt": "Be brief.",
            "temperature": 0.2,
        }
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Trio is neat."},
            "model": "test-model",
            "stopReason": "endTurn",
        }

    asker = Asker(server, era, brain)
    async with asker.connect() as client:
        result = await asker.call(client, "think", topic="trio")
    assert text(result) == "Trio is neat. (test-model, endTurn) in file:///work"
    assert [m for m, _ in asker.asked] == ["roots/list", "sampling/createMessage"]
    if era == "modern":
        assert asker.rounds == [["roots-0"], ["sample-1"]]


async def test_multi_round_with_side_effects(era: str) -> None:
    server = Server("rounds")
    effects: list[str] = []

    @server.tool()
    async def wizard(ctx: Context) -> dict[str, Any]:
        effects.append("before")
        first = await ctx.elicit("First?", str)
        effects.append("between")
        second = await ctx.elicit("Second?", str)
        sampled = await ctx.sample([f"{first.data} and {second.data}"], max_tokens=5)
        effects.append("after")
        return {"first": first.data, "second": second.data, "sampled": sampled.text}

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "sampling/createMessage":
            return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
        return {"action": "accept", "content": {"value": params["message"].rstrip("?").lower()}}

    asker = Asker(server, era, brain)
    async with asker.connect() as client:
        result = await asker.call(client, "wizard")
    assert result["structuredContent"] == {"first": "first", "second": "second", "sampled": "ok"}
    if era == "legacy":
        assert effects == ["before", "between", "after"]
    else:
        assert asker.rounds == [["elicit-0"], ["elicit-1"], ["sample-2"]]
        # what comes before an ask repeats on every round
        assert effects.count("before") == 4
        assert effects.count("between") == 3
        assert effects.count("after") == 1
    assert len(asker.asked) == 3  # but each question is asked once


async def test_a_changed_question_is_asked_again() -> None:
    server = Server("fickle")
    runs: list[int] = []

    @server.tool()
    async def fickle(ctx: Context) -> str:
        runs.append(1)
        answer = await ctx.elicit(f"Question {min(len(runs), 2)}?", str)
        return f"{answer.data}"

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"value": params["message"]}}

    asker = Asker(server, "modern", brain)
    async with asker.connect() as client:
        result = await asker.call(client, "fickle")
    assert text(result) == "Question 2?"
    assert asker.rounds == [["elicit-0"], ["elicit-0"]]
    assert len(runs) == 3


async def test_missing_client_capabilities(era: str) -> None:
    server = Server("needy")

    @server.tool()
    async def needy(what: str, ctx: Context) -> str:
        if what == "form":
            await ctx.elicit("x?", str)
        elif what == "url":
            await ctx.elicit_url("https://example.com/pay", "Pay")
        elif what == "sample-tools":
            await ctx.sample(
                "x", max_tokens=1, tools=[{"name": "t", "inputSchema": {"type": "object"}}]
            )
        else:
            await ctx.list_roots()
        return "unreachable"

    asker = Asker(server, era, accept(), capabilities={"elicitation": {"url": {}}, "sampling": {}})
    async with asker.connect() as client:
        for what, missing in (
            ("form", {"elicitation": {"form": {}}}),
            ("sample-tools", {"sampling": {"tools": {}}}),
            ("roots", {"roots": {}}),
        ):
            with pytest.raises(McpError) as info:
                await asker.call(client, "needy", what=what)
            assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert info.value.data == {"requiredCapabilities": missing}
        assert not asker.asked


async def test_elicit_url(era: str) -> None:
    server = Server("pay")

    @server.tool()
    async def pay(ctx: Context) -> str:
        answer = await ctx.elicit_url("https://example.com/pay", "Please pay", elicitation_id="e1")
        return answer.action

    asker = Asker(server, era, accept(), capabilities={"elicitation": {"url": {}}})
    async with asker.connect() as client:
        assert text(await asker.call(client, "pay")) == "accept"
        assert client.handshake is not None
        version = client.handshake.protocol_version
    ((_, params),) = asker.asked
    validate(version, "ElicitRequestURLParams", params)
    expected = {"mode": "url", "message": "Please pay", "url": "https://example.com/pay"}
    assert params == (expected if era == "modern" else {**expected, "elicitationId": "e1"})


async def test_prompts_resources_and_sync_handlers_ask_too(era: str) -> None:
    server = Server("everywhere")

    @server.prompt()
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", str)
        return f"Greet {answer.data}"

    @server.resource("secret://{name}")
    def secret(name: str, ctx: Context) -> str:  # runs in a worker thread
        answer = trio.from_thread.run(ctx.elicit, f"Reveal {name}?", bool)
        return "revealed" if answer.data else "hidden"

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        value = "Ada" if params["message"] == "Name?" else True
        return {"action": "accept", "content": {"value": value}}

    asker = Asker(server, era, brain)
    async with asker.connect() as client:
        prompt = await asker.request(client, "prompts/get", {"name": "greet"})
        assert prompt["messages"][0]["content"]["text"] == "Greet Ada"
        read = await asker.request(client, "resources/read", {"uri": "secret://x"})
        assert read["contents"][0]["text"] == "revealed"


async def test_context_introspection(era: str) -> None:
    server = Server("mirror")
    seen: dict[str, Any] = {}

    @server.tool()
    async def mirror(ctx: Context) -> str:
        seen.update(
            era=ctx.era.value,
            method=ctx.method,
            request_id=ctx.request_id,
            version=ctx.protocol_version,
            client=(ctx.client_info or {}).get("name"),
            caps=ctx.client_capabilities,
            cancelled=ctx.cancelled,
            server=ctx.server,
            raw=ctx.request_context.method,
            meta_keys=sorted(ctx.meta),
        )
        return "ok"

    async with connect(server, era, capabilities={"roots": {}}) as client:
        await client.request("tools/call", {"name": "mirror", "arguments": {}})
        assert client.handshake is not None
        assert seen["version"] == client.handshake.protocol_version
    assert seen["era"] == era
    assert (seen["method"], seen["raw"], seen["client"]) == (
        "tools/call",
        "tools/call",
        "test-client",
    )
    assert seen["caps"] == {"roots": {}}
    assert seen["cancelled"] is False
    assert seen["server"] is server
    assert isinstance(seen["request_id"], int)
    if era == "modern":
        assert "io.modelcontextprotocol/protocolVersion" in seen["meta_keys"]
    else:
        assert seen["meta_keys"] == []


async def test_completion_handlers_cannot_ask_in_the_modern_era() -> None:
    server = Server("complete")

    @server.prompt()
    def p(x: str) -> str:
        return x

    @server.completion("ref/prompt", "p", "x")
    async def complete(request: Any, ctx: Context) -> list[str]:
        await ctx.elicit("?", str)
        return []

    asker = Asker(server, "modern", accept())
    async with asker.connect() as client:
        params = {
            "ref": {"type": "ref/prompt", "name": "p"},
            "argument": {"name": "x", "value": ""},
        }
        with pytest.raises(McpError) as info:
            await client.request("completion/complete", params)
    assert info.value.code == ErrorCode.INTERNAL_ERROR


async def test_concurrent_asks_share_a_round(era: str) -> None:
    server = Server("parallel")

    @server.tool()
    async def both(ctx: Context) -> list[str]:
        answers: dict[str, str] = {}

        async def ask(question: str) -> None:
            answer = await ctx.elicit(question, str)
            answers[question] = str(answer.data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "Left?")
            nursery.start_soon(ask, "Right?")
        return [answers["Left?"], answers["Right?"]]

    def brain(method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"value": params["message"].lower()}}

    asker = Asker(server, era, brain)
    async with asker.connect() as client:
        result = await asker.call(client, "both")
    assert result["structuredContent"] == {"result": ["left?", "right?"]}
    assert sorted(p["message"] for _, p in asker.asked) == ["Left?", "Right?"]
    if era == "modern":
        assert asker.rounds == [["elicit-0", "elicit-1"]]


@pytest.mark.parametrize(
    ("tool", "answer", "problem"),
    [
        ("form", [], "an object"),  # (modern: the core refuses it first)
        ("form", {"action": "maybe"}, "unknown action"),
        ("form", {"action": "accept", "content": [1]}, "content must be an object"),
        ("sample", [], "an object"),
        ("sample", {"role": "assistant", "content": [1], "model": "m"}, "content blocks"),
        ("sample", {"role": "assistant", "content": {"type": "text", "text": ""}}, "model"),
        ("roots", {"roots": "/"}, "roots must be a list"),
        ("roots", {"roots": [{"name": "no uri"}]}, "invalid roots response"),
    ],
)
@pytest.mark.usefixtures("unchecked_answers")
async def test_malformed_answers_are_invalid_params(
    era: str, tool: str, answer: Any, problem: str
) -> None:
    server = Server("strict")

    @server.tool()
    async def ask(kind: str, ctx: Context) -> str:
        if kind == "form":
            await ctx.elicit("x?", str)
        elif kind == "sample":
            await ctx.sample("x", max_tokens=1, include_context="thisServer")
        else:
            await ctx.list_roots()
        return "unreachable"

    caps = {**ALL_CAPS, "sampling": {"context": {}}}
    asker = Asker(server, era, lambda method, params: answer, capabilities=caps)
    async with asker.connect() as client:
        if era == "legacy" and not isinstance(answer, dict):
            return  # a legacy client cannot send a non-object result
        with pytest.raises(McpError) as info:
            await asker.call(client, "ask", kind=tool)
    assert info.value.code == ErrorCode.INVALID_PARAMS
    assert problem in info.value.message


async def test_legacy_ask_timeout(autojump_clock: trio.testing.MockClock) -> None:
    server = Server("impatient")
    client_cancelled = trio.Event()

    @server.tool()
    async def impatient(ctx: Context) -> str:
        try:
            await ctx.elicit("Still there?", bool, timeout=5)
        except trio.TooSlowError:
            return f"gave up at {trio.current_time():.0f}"
        return "answered"

    handlers = Handlers()

    @handlers.on_request("elicitation/create")
    async def never(ctx: RequestContext) -> dict[str, Any]:
        try:
            await trio.sleep_forever()
        finally:
            client_cancelled.set()

    start = trio.current_time()
    async with connect(server, "legacy", handlers=handlers, capabilities=ALL_CAPS) as client:
        result = await client.request("tools/call", {"name": "impatient", "arguments": {}})
        await client_cancelled.wait()  # the server cancelled its request
    assert result["content"][0]["text"] == f"gave up at {start + 5:.0f}"

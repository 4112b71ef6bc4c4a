"""The high-level client against an in-memory server, in both eras.

The server is a plain ``Handlers`` table (``client_server_app.py``). Every test runs on
the ``autojump_clock``: timeouts and the server's sleeps take no real time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, Era, ErrorCode, LocalProtocolError, ProgressReceived
from mcp_sansio import types as t
from mcp_trio import (
    TASKS_EXTENSION,
    Handlers,
    HandshakeFailed,
    McpError,
    RequestTimeout,
    SessionClosed,
)
from mcp_trio._client import Client, ToolOutput, open_client
from mcp_trio._server import Server

from .client_server_app import COLOURS, RESOURCES, TOOL_NAMES, Recorder, make_handlers
from .client_server_app import server_config as app_config

ERAS = ("legacy", "modern")
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
VERSION = {"legacy": "2025-11-25", "modern": "2026-07-28"}


def server(recorder: Recorder | None = None, **config: Any) -> tuple[Handlers, ConnectionConfig]:
    return make_handlers(recorder), app_config(**config)


# ---------------------------------------------------------------------- handshake


@pytest.mark.parametrize("era", ERAS)
async def test_handshake_facts(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        assert client.era is Era(era)
        assert client.protocol_version == VERSION[era]
        assert client.server_info == t.Implementation(name="client-test-server", version="2.0")
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        assert caps.resources is not None and caps.resources.subscribe is True
        assert client.instructions == "Call add to add numbers."
        assert client.session.handshake is not None


async def test_auto_era_prefers_modern(autojump_clock: MockClock) -> None:
    async with open_client(server()) as client:
        assert client.era is Era.MODERN


async def test_auto_era_falls_back_to_a_legacy_only_server(autojump_clock: MockClock) -> None:
    async with open_client(server(era="legacy")) as client:
        assert client.era is Era.LEGACY
        assert client.protocol_version == "2025-11-25"
        assert [tool.name for tool in await client.list_tools()] == list(TOOL_NAMES)


async def test_pinned_modern_against_a_legacy_only_server_fails(autojump_clock: MockClock) -> None:
    with pytest.raises(HandshakeFailed):
        async with open_client(server(era="legacy"), era="modern"):
            pytest.fail("no handshake possible")  # pragma: no cover


async def test_pinned_protocol_version(autojump_clock: MockClock) -> None:
    async with open_client(server(), protocol_version="2025-06-18") as client:
        assert client.era is Era.LEGACY
        assert client.protocol_version == "2025-06-18"
    async with open_client(server(), protocol_version="2026-07-28", era="modern") as client:
        assert client.era is Era.MODERN


@pytest.mark.parametrize(
    ("era", "version", "message"),
    [
        ("modern", "2025-06-18", "legacy-era"),
        ("auto", "1999-01-01", "unknown protocol version"),
        ("ancient", None, "era must be"),
    ],
)
async def test_bad_era_or_version(
    era: str, version: str | None, message: str, autojump_clock: MockClock
) -> None:
    with pytest.raises(ValueError, match=message):
        async with open_client(server(), era=era, protocol_version=version):  # type: ignore[arg-type]
            pytest.fail("refused before connecting")  # pragma: no cover


@pytest.mark.parametrize("era", ERAS)
async def test_an_era_read_from_a_client_can_be_passed_back(
    era: str, autojump_clock: MockClock
) -> None:
    async with open_client(server(), era=era) as first:  # type: ignore[arg-type]
        seen = first.era
    # Era is a str enum: equal to its name, printed as it.
    assert seen == era and str(seen) == era and f"{seen}" == era
    async with open_client(server(), era=seen) as again:
        assert again.era is seen
        # The core is configured with the plain name, as when a string is given.
        assert repr(again.session.connection.config.era) == repr(era)


async def test_an_era_and_a_version_of_the_other_era_are_refused(
    autojump_clock: MockClock,
) -> None:
    with pytest.raises(ValueError, match=r"2025-06-18 is legacy-era, not modern$"):
        async with open_client(server(), era=Era.MODERN, protocol_version="2025-06-18"):
            pytest.fail("refused before connecting")  # pragma: no cover
    async with open_client(server(), era=Era.LEGACY, protocol_version="2025-06-18") as client:
        assert client.protocol_version == "2025-06-18"


async def test_bad_log_level_is_refused_up_front(autojump_clock: MockClock) -> None:
    with pytest.raises(LocalProtocolError, match="unknown log level"):
        async with open_client(server(), log_level="loud"):
            pytest.fail("refused before connecting")  # pragma: no cover


# ---------------------------------------------------------------------- tools


@pytest.mark.parametrize("era", ERAS)
async def test_list_tools_follows_every_page(era: str, autojump_clock: MockClock) -> None:
    recorder = Recorder()
    async with open_client(server(recorder), era=era) as client:  # type: ignore[arg-type]
        tools = await client.list_tools()
    assert [tool.name for tool in tools] == list(TOOL_NAMES)
    assert all(isinstance(tool, t.Tool) for tool in tools)
    assert tools[0].input_schema == {"type": "object"}
    cursors = [(params or {}).get("cursor") for params in recorder.list_params]
    assert cursors == [None, "3", "6"]


@pytest.mark.parametrize("era", ERAS)
async def test_call_tool(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        echoed = await client.call_tool("echo", {"text": "hi"})
        assert isinstance(echoed, ToolOutput)
        assert echoed.text == "hi"
        assert echoed.is_error is False
        assert echoed.structured_content is None
        assert echoed.content == [t.TextContent(text="hi")]
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"sum": 5}
        assert added.text == "5"
        assert isinstance(added.result, t.CallToolResult)
        failed = await client.call_tool("fail")
        assert failed.is_error is True
        assert failed.text == "it broke"
        with pytest.raises(McpError) as info:
            await client.call_tool("nope")
        assert info.value.code == ErrorCode.INVALID_PARAMS


async def test_tool_result_text_joins_text_blocks_only(autojump_clock: MockClock) -> None:
    result = ToolOutput.from_wire(
        {
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "text", "text": "b"},
            ],
            "_meta": {"k": 1},
        }
    )
    assert result.text == "a\nb"
    assert result.meta == {"k": 1}


@pytest.mark.parametrize("era", ERAS)
async def test_progress_per_call_and_by_default(era: str, autojump_clock: MockClock) -> None:
    default: list[ProgressReceived] = []
    per_call: list[ProgressReceived] = []

    async def on_default(event: ProgressReceived) -> None:
        default.append(event)

    async def on_call(event: ProgressReceived) -> None:
        per_call.append(event)

    async with open_client(server(), era=era, on_progress=on_default) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("slow", {"steps": 3}, on_progress=on_call)).text == "done"
        assert [(e.progress, e.total, e.message) for e in per_call] == [
            (1, 3, "step 1"),
            (2, 3, "step 2"),
            (3, 3, "step 3"),
        ]
        assert default == []
        await client.call_tool("slow", {"steps": 2})
        assert [e.progress for e in default] == [1, 2]


async def ignore(event: ProgressReceived) -> None:
    pass


@pytest.mark.parametrize("era", ERAS)
async def test_timeouts(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era, timeout=5) as client:  # type: ignore[arg-type]
        with pytest.raises(RequestTimeout):
            await client.call_tool("sleep", {"seconds": 10})  # the client's default
        with pytest.raises(RequestTimeout):
            await client.call_tool("sleep", {"seconds": 3}, timeout=1)  # per call
        assert (await client.call_tool("sleep", {"seconds": 3})).text == "slept"
        # progress resets the clock: 6 steps of 1 s each under the 5 s default
        assert (await client.call_tool("slow", {"steps": 6}, on_progress=ignore)).text == "done"
        # with no callback too: a call with a timeout asks for progress all the same
        assert (await client.call_tool("slow", {"steps": 6})).text == "done"
        assert (await client.call_tool("slow", {"steps": 3}, timeout=1.5)).text == "done"
    # and when the timeout is the core's own setting
    core = ConnectionConfig(request_timeout=1.5)
    async with open_client(server(), era=era, connection_config=core) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("slow", {"steps": 3})).text == "done"


@pytest.mark.parametrize("era", ERAS)
async def test_listings_and_completions_take_a_timeout(era: str, autojump_clock: MockClock) -> None:
    handlers = Handlers()

    async def stuck(ctx: Any) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    methods = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")
    for method in (*methods, "completion/complete"):
        handlers.set_request_handler(method, stuck)
    caps: dict[str, Any] = {"tools": {}, "resources": {}, "prompts": {}, "completions": {}}
    target = (handlers, ConnectionConfig(capabilities=caps))
    async with open_client(target, era=era) as client:  # type: ignore[arg-type]
        calls = [
            client.list_tools,
            client.list_resources,
            client.list_resource_templates,
            client.list_prompts,
        ]
        for call in calls:
            started = trio.current_time()
            with pytest.raises(RequestTimeout):
                await call(timeout=2)
            assert trio.current_time() - started == pytest.approx(2)
        with pytest.raises(RequestTimeout):
            await client.complete(t.PromptReference(name="p"), "a", "", timeout=2)
        assert client.session.connection.pending_requests() == ()


# ---------------------------------------------------------------------- resources, prompts


@pytest.mark.parametrize("era", ERAS)
async def test_resources(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        resources = await client.list_resources()
        assert [r.uri for r in resources] == [r["uri"] for r in RESOURCES]  # 2 pages
        assert resources[0].mime_type == "text/plain"
        templates = await client.list_resource_templates()
        assert templates == [t.ResourceTemplate(uri_template="file:///{name}.txt", name="files")]
        read = await client.read_resource("file:///r1.txt")
        assert isinstance(read, t.ReadResourceResult)
        content = read.contents[0]
        assert isinstance(content, t.TextResourceContents)
        assert content.text == "contents of file:///r1.txt"
        with pytest.raises(McpError) as info:
            await client.read_resource("file:///missing")
        assert info.value.code == -32002
        assert info.value.data == {"uri": "file:///missing"}


@pytest.mark.parametrize("era", ERAS)
async def test_prompts(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        prompts = await client.list_prompts()
        assert [p.name for p in prompts] == ["greet", "plain"]
        assert prompts[0].arguments == [t.PromptArgument(name="who", required=True)]
        got = await client.get_prompt("greet", {"who": "Ada"})
        assert got.description == "a greeting"
        assert got.messages[0].content == t.TextContent(text="Hello Ada")
        plain = await client.get_prompt("plain")
        assert plain.messages[0].content == t.TextContent(text="Hello nobody")


@pytest.mark.parametrize("era", ERAS)
async def test_complete(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        done = await client.complete(t.PromptReference(name="greet"), "colour", "gr")
        assert done == t.CompleteResultCompletion(values=["green", "grey"], total=2, has_more=False)
        upper = await client.complete(
            {"type": "ref/resource", "uri": "file:///{name}.txt"}, "name", "", {"upper": "yes"}
        )
        assert upper.values == [c.upper() for c in COLOURS]


@pytest.mark.parametrize("arguments", ["notadict", [("text", "hi")], {1: "x"}])
async def test_arguments_that_are_not_a_json_object_are_a_type_error(
    arguments: Any, autojump_clock: MockClock
) -> None:
    # The README promises a TypeError at once; "notadict" was an AttributeError.
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    async with open_client(server(), era="modern", capabilities=caps) as client:
        with pytest.raises(TypeError, match="must be"):
            await client.call_tool("echo", arguments)
        with pytest.raises(TypeError, match="must be"):
            await client.call_tool_as_task("echo", arguments)
        with pytest.raises(TypeError, match="must be"):
            await client.get_prompt("greet", arguments)
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"


@pytest.mark.parametrize("number", [2**64, -(2**70)])
async def test_a_top_level_integer_beyond_64_bits_is_named(
    number: int, autojump_clock: MockClock
) -> None:
    # The common case sends a top-level int unlooked at: the JSON library refused it,
    # with its own message ("Integer exceeds 64-bit range"), naming no argument.
    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    async with open_client(server(), era="modern", capabilities=caps) as client:
        said = r"^argument 'big' holds the integer -?\d\.\d\de\+\d\d, beyond 64 bits, which"
        with pytest.raises(TypeError, match=said):
            await client.call_tool("echo", {"text": "x", "big": number})
        with pytest.raises(TypeError, match=said):
            await client.call_tool_as_task("echo", {"text": "x", "big": number})
        assert client.session.connection.pending_requests() == ()
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"


async def test_complete_says_what_ref_must_be(autojump_clock: MockClock) -> None:
    async with open_client(server()) as client:
        with pytest.raises(TypeError) as caught:
            await client.complete(("ref/prompt", "greet"), "colour", "gr")  # type: ignore[arg-type]
        message = str(caught.value)
        assert message.startswith("ref must be a types.PromptReference, a types.Resource")
        assert message.endswith("not ('ref/prompt', 'greet')")
        assert "must return" not in message  # (what a callback's answer must be)
        done = await client.complete({"type": "ref/prompt", "name": "greet"}, "colour", "gr")
        assert done.values == ["green", "grey"]


# ---------------------------------------------------------------------- logging, ping


LogSink = list[tuple[str, Any]]


def log_sink() -> tuple[LogSink, Any]:
    seen: LogSink = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        assert params.logger == "app"
        seen.append((params.level, params.data))

    return seen, on_log


@pytest.mark.parametrize("era", ERAS)
async def test_logging_everything_by_default_then_a_chosen_level(
    era: str, autojump_clock: MockClock
) -> None:
    seen, on_log = log_sink()
    async with open_client(server(), era=era, on_log=on_log) as client:  # type: ignore[arg-type]
        await client.call_tool("log")
        await trio.testing.wait_all_tasks_blocked()
        assert [level for level, _ in seen] == ["debug", "info", "error"]
        assert seen[0][1] == {"said": "debug"}
        seen.clear()
        await client.set_logging_level("error")
        assert client.log_level == "error"
        await client.call_tool("log")
        await trio.testing.wait_all_tasks_blocked()
        assert [level for level, _ in seen] == ["error"]
        with pytest.raises(LocalProtocolError):
            await client.set_logging_level("chatty")


@pytest.mark.parametrize("era", ERAS)
async def test_log_level_option(era: str, autojump_clock: MockClock) -> None:
    seen, on_log = log_sink()
    async with open_client(server(), era=era, on_log=on_log, log_level="info") as client:  # type: ignore[arg-type]
        await client.call_tool("log")
        await trio.testing.wait_all_tasks_blocked()
        assert [level for level, _ in seen] == ["info", "error"]


async def test_modern_without_on_log_asks_for_no_logs(autojump_clock: MockClock) -> None:
    recorder = Recorder()
    async with open_client(server(recorder), era="modern") as client:
        assert client.log_level is None
        await client.call_tool("log")
    assert all(LOG_LEVEL_KEY not in meta for meta in recorder.call_meta)
    _, on_log = log_sink()
    async with open_client(server(recorder), era="modern", on_log=on_log) as client:
        assert client.log_level == "debug"
        await client.call_tool("echo", {"text": "x"})
    assert recorder.call_meta[-1][LOG_LEVEL_KEY] == "debug"


async def test_legacy_log_level_without_the_logging_capability_is_skipped(
    autojump_clock: MockClock,
) -> None:
    caps: dict[str, Any] = {"tools": {}}
    async with open_client(server(capabilities=caps), era="legacy", log_level="info") as client:
        assert client.log_level is None
        with pytest.raises(LocalProtocolError, match="logging"):
            await client.set_logging_level("info")


async def test_ping(autojump_clock: MockClock) -> None:
    async with open_client(server(), era="legacy") as client:
        await client.ping()
    async with open_client(server(), era="modern") as client:
        with pytest.raises(LocalProtocolError, match="modern era"):
            await client.ping()


@pytest.mark.parametrize("era", ERAS)
async def test_raw_request_and_notify(era: str, autojump_clock: MockClock) -> None:
    async with open_client(server(), era=era, roots=["file:///r"]) as client:  # type: ignore[arg-type]
        result = await client.request("tools/call", {"name": "echo", "arguments": {"text": "r"}})
        assert result["content"] == [{"type": "text", "text": "r"}]
        if era == "legacy":
            await client.notify("notifications/roots/list_changed")
    if era == "legacy":
        # roots.mdx: only a client that declared roots (with listChanged) sends it
        async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
            with pytest.raises(LocalProtocolError, match=r"roots\.listChanged"):
                await client.notify("notifications/roots/list_changed")
        # and set_roots does not try, so it changes the roots and raises nothing
        roots_caps: dict[str, Any] = {"roots": {}}
        async with open_client(
            server(),
            era="legacy",
            roots=["file:///a"],
            capabilities=roots_caps,
        ) as client:
            await client.set_roots(["file:///b"])
            assert (await client.call_tool("ask", {"what": ["roots"]})).text == "roots=file:///b"


async def test_legacy_resource_subscription_methods(autojump_clock: MockClock) -> None:
    recorder = Recorder()
    async with open_client(server(recorder), era="legacy") as client:
        await client.subscribe_resource("file:///r0.txt")
        await client.unsubscribe_resource("file:///r0.txt")
    assert recorder.subscribed == recorder.unsubscribed == ["file:///r0.txt"]
    async with open_client(server(), era="modern") as client:
        with pytest.raises(LocalProtocolError, match=r"client.subscribe\(resources"):
            await client.subscribe_resource("file:///r0.txt")
        with pytest.raises(LocalProtocolError):
            await client.unsubscribe_resource("file:///r0.txt")


# ---------------------------------------------------------------------- callbacks (legacy)


async def elicit(params: t.ElicitRequestFormParams | t.ElicitRequestURLParams) -> t.ElicitResult:
    assert isinstance(params, t.ElicitRequestFormParams)
    assert params.message == "Your name?"
    return t.ElicitResult(action="accept", content={"name": "Ada"})


async def sample(params: t.CreateMessageRequestParams) -> dict[str, Any]:
    assert params.max_tokens == 5
    return {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}


@pytest.mark.parametrize("era", ERAS)
async def test_callbacks_answer_the_server(era: str, autojump_clock: MockClock) -> None:
    recorder = Recorder()

    async def roots() -> Iterable[Any]:
        return [t.Root(uri="file:///a"), "file:///b", {"uri": "file:///c", "name": "c"}]

    async with open_client(
        server(recorder),
        era=era,  # type: ignore[arg-type]
        on_elicitation=elicit,
        on_sampling=sample,
        roots=roots,
    ) as client:
        result = await client.call_tool("ask")
        assert result.text == "elicit=accept:Ada;sample=4;roots=file:///a,file:///b,file:///c"
        await client.set_roots(["file:///z"])
        assert (await client.call_tool("ask", {"what": ["roots"]})).text == "roots=file:///z"
    # The modern era's roots capability has no listChanged (2026-07-28 client/roots).
    assert recorder.client_capabilities[0] == {
        "sampling": {},
        "elicitation": {"form": {}},
        "roots": {} if era == "modern" else {"listChanged": True},
    }


@pytest.mark.parametrize("era", ERAS)
async def test_capabilities_follow_the_callbacks(era: str, autojump_clock: MockClock) -> None:
    recorder = Recorder()
    async with open_client(server(recorder), era=era, roots=["file:///r"]) as client:  # type: ignore[arg-type]
        await client.call_tool("echo", {"text": "x"})
    async with open_client(
        server(recorder),
        era=era,  # type: ignore[arg-type]
        on_elicitation=elicit,
        capabilities={"elicitation": {"form": {}, "url": {}}, "experimental": {"x": {}}},
    ) as client:
        await client.call_tool("echo", {"text": "x"})
    async with open_client(server(recorder), era=era) as client:  # type: ignore[arg-type]
        await client.call_tool("echo", {"text": "x"})
    assert recorder.client_capabilities == [
        {"roots": {} if era == "modern" else {"listChanged": True}},
        {"elicitation": {"form": {}, "url": {}}, "experimental": {"x": {}}},
        {},
    ]


@pytest.mark.parametrize(
    ("era", "code"),
    [
        ("legacy", ErrorCode.INTERNAL_ERROR),
        ("modern", ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY),
    ],
)
async def test_a_server_cannot_ask_a_client_without_callbacks(
    era: str, code: int, autojump_clock: MockClock
) -> None:
    async with open_client(server(), era=era) as client:  # type: ignore[arg-type]
        # Legacy: the server's core refuses to send a request the client has no
        # capability for; its handler fails, and the call is answered -32603.
        # Modern: the server's core answers -32021 instead of asking.
        with pytest.raises(McpError) as info:
            await client.call_tool("ask", {"what": ["sample"]})
        assert info.value.code == code


async def test_legacy_callback_errors_reach_the_server_as_errors(autojump_clock: MockClock) -> None:
    async def refuse(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        raise McpError.from_code(-1, "the user said no")

    async def wrong(params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
        return "not a result"  # type: ignore[return-value]

    for callback in (refuse, wrong):
        async with open_client(server(), era="legacy", on_sampling=callback) as client:
            with pytest.raises(McpError):  # the server's handler failed on the error
                await client.call_tool("ask", {"what": ["sample"]})
    # Modern: the callback's exception is the caller's (no retry is sent).
    async with open_client(server(), era="modern", on_sampling=refuse) as client:
        with pytest.raises(McpError, match="the user said no"):
            await client.call_tool("ask", {"what": ["sample"]})
    async with open_client(server(), era="modern", on_sampling=wrong) as client:
        with pytest.raises(TypeError, match="on_sampling must return"):
            await client.call_tool("ask", {"what": ["sample"]})


async def test_set_roots_needs_the_roots_capability(autojump_clock: MockClock) -> None:
    async with open_client(server(), era="legacy") as client:
        with pytest.raises(LocalProtocolError, match="roots="):
            await client.set_roots(["file:///a"])
    async with open_client(server(), era="modern", roots=["file:///a"]) as client:
        with pytest.raises(TypeError):
            await client.set_roots([42])  # type: ignore[list-item]
        await client.set_roots(["file:///b"])  # modern: nothing to send


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_roots_are_file_uris(era: str, autojump_clock: MockClock) -> None:
    # client/roots.mdx: a root's uri MUST be a file:// URI.
    for bad in ("https://example.com/x", "relative/path", "FILE:/x"):
        with pytest.raises(ValueError, match=r"file://"):
            async with open_client(server(), era=era, roots=[bad]):  # type: ignore[arg-type]
                pass  # pragma: no cover

    async def wrong() -> list[str]:
        return ["ftp://x/y"]

    async with open_client(server(), era=era, roots=(r for r in ["file:///a"])) as client:  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"file://"):
            await client.set_roots(["ftp://x/y"])
        # a generator is taken once: the server can ask again and again
        for _ in range(2):
            assert (await client.call_tool("ask", {"what": ["roots"]})).text == "roots=file:///a"
        await client.set_roots(wrong)
        # legacy: the server asked, and got -32603; modern: the call itself fails
        with pytest.raises(McpError if era == "legacy" else ValueError):
            await client.call_tool("ask", {"what": ["roots"]})


async def test_client_info(autojump_clock: MockClock) -> None:
    seen: list[Any] = []
    handlers = make_handlers()

    async def echo_info(ctx: Any) -> dict[str, Any]:
        seen.append(ctx.session.connection.peer_info)
        return {"content": []}

    handlers.set_request_handler("tools/call", echo_info)
    async with open_client((handlers, app_config()), era="legacy") as client:
        await client.call_tool("x")
    async with open_client(
        (handlers, app_config()), era="legacy", client_info=t.Implementation(name="me", version="9")
    ) as client:
        await client.call_tool("x")
    assert seen[0]["name"] == "mcp-trio"
    assert seen[1] == {"name": "me", "version": "9"}


# ---------------------------------------------------------------------- targets


@pytest.mark.parametrize("era", ERAS)
async def test_the_high_level_server(era: str, autojump_clock: MockClock) -> None:
    app = Server("real", "1.0", instructions="Adds.")

    @app.tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async with open_client(app, era=era) as client:  # type: ignore[arg-type]
        assert client.era is Era(era)
        assert client.instructions == "Adds."
        [tool] = await client.list_tools()
        assert (tool.name, tool.description) == ("add", "Add two numbers.")
        output = await client.call_tool("add", {"a": 1, "b": 2})
        assert output.structured_content == {"result": 3}
        assert output.text == "3"
        async with client.subscribe(tools=True) as updates:

            @app.tool
            async def sub(a: int, b: int) -> int:
                return a - b

            note = await updates.receive()
            assert note.method == "notifications/tools/list_changed"
        assert len(await client.list_tools()) == 2


class TinyServer:
    """Stands in for the high-level ``Server``: ``handlers()`` and ``connection_config()``."""

    def handlers(self) -> Handlers:
        return make_handlers()

    def connection_config(self) -> ConnectionConfig:
        return app_config()


async def test_server_object_target(autojump_clock: MockClock) -> None:
    async with open_client(TinyServer()) as client:
        assert (await client.call_tool("echo", {"text": "obj"})).text == "obj"


@pytest.mark.parametrize(
    ("target", "kwargs", "error"),
    [
        (42, {}, TypeError),
        ("", {}, ValueError),
        ([], {}, ValueError),  # an empty argument list
        ("ws://127.0.0.1:1/mcp", {"cwd": "/"}, TypeError),
        ("http://127.0.0.1:1/mcp", {"env": {}}, TypeError),
        ("python server.py", {"ssl_context": object()}, TypeError),
        (server(), {"stderr": print}, TypeError),
    ],
)
async def test_bad_targets(
    target: Any, kwargs: dict[str, Any], error: type[Exception], autojump_clock: MockClock
) -> None:
    with pytest.raises(error):
        async with open_client(target, **kwargs):
            pytest.fail("refused before connecting")  # pragma: no cover


async def test_closed_session_fails_requests(autojump_clock: MockClock) -> None:
    async with open_client(server()) as client:
        await client.aclose()
        with pytest.raises(SessionClosed):
            await client.list_tools()


async def test_client_type_is_exported_shape(autojump_clock: MockClock) -> None:
    async with open_client(server()) as client:
        assert isinstance(client, Client)


async def test_call_tool_refuses_nan_before_sending() -> None:
    server = Server("s")

    @server.tool()
    def show(x: float | None = None) -> str:
        return repr(x)

    async with open_client(server) as client:
        with pytest.raises(ValueError, match="NaN or an infinity"):
            await client.call_tool("show", {"x": float("nan")})
        assert (await client.call_tool("show", {"x": 1.5})).text == "1.5"

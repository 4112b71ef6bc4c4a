"""``mcp_trio.testing``: ``client_for`` and the pytest fixtures, used as a user would.

The fixtures come from ``mcp_trio.pytest_plugin``, named in ``pytest_plugins`` as a
``conftest.py`` names it where mcp-trio is not installed. The README's recipe itself, run
by pytest with warnings as errors, is in ``test_pytest_plugin.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, Era
from mcp_trio import Context, Handlers, McpError, ProgressReceived, RequestContext, Server
from mcp_trio._client import Client
from mcp_trio._client_common import EraChoice

from .client_server_app import make_handlers, server_config

pytest_plugins = ["mcp_trio.pytest_plugin"]
ERAS = ("legacy", "modern")


class AppServer:
    """A user's server object."""

    def handlers(self) -> Handlers:
        return make_handlers()

    def connection_config(self) -> ConnectionConfig:
        return server_config()


@pytest.fixture
def mcp_server() -> AppServer:
    return AppServer()


@pytest.fixture(params=ERAS)
def mcp_era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_the_fixture_in_both_eras(mcp_client: Client, mcp_era: str) -> None:
    assert mcp_client.era is Era(mcp_era)
    assert (await mcp_client.call_tool("echo", {"text": "fixture"})).text == "fixture"


def tiny_handlers() -> Handlers:
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        return {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}

    @handlers.on_request("tools/call")
    async def call(ctx: RequestContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "hello"}]}

    @handlers.on_request("resources/subscribe")
    async def subscribe(ctx: RequestContext) -> dict[str, Any]:
        return {}

    return handlers


@pytest.mark.parametrize("era", ERAS)
async def test_client_for_a_bare_handler_table(era: str, autojump_clock: MockClock) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415 - see the module docstring

    async with client_for(tiny_handlers(), era=era, timeout=5) as client:  # type: ignore[arg-type]
        assert client.era is Era(era)
        assert [tool.name for tool in await client.list_tools()] == ["hi"]
        assert (await client.call_tool("hi")).text == "hello"


async def test_client_for_a_pair_and_a_server(autojump_clock: MockClock) -> None:
    from mcp_trio import testing  # noqa: PLC0415 - see the module docstring

    eras, client_for = testing.ERAS, testing.client_for

    assert eras == ERAS
    async with client_for((make_handlers(), server_config()), era="legacy") as client:
        assert client.era is Era.LEGACY
    async with client_for(AppServer()) as client:
        assert client.era is Era.MODERN


def test_capabilities_for() -> None:
    from mcp_trio.testing import capabilities_for  # noqa: PLC0415

    assert capabilities_for(tiny_handlers()) == {
        "logging": {},
        "tools": {"listChanged": True},
        "resources": {"subscribe": True},
    }
    assert capabilities_for(Handlers()) == {"logging": {}}


# -- a failing callback fails the test --------------------------------------------------

fallback = Server("fallback", progress_interval=None)


@fallback.tool()
async def ask_all(ctx: Context) -> str:
    """Asks the client every question it can; a refused one falls back (a dry run)."""
    answers: list[str] = []
    try:
        answers.append((await ctx.elicit("Delete 3 files?", bool)).action)
    except McpError:
        answers.append("no elicitation")
    try:
        answers.append((await ctx.sample("Summarize.", max_tokens=5)).text or "")
    except McpError:
        answers.append("no sampling")
    try:
        answers.append(str(len(await ctx.list_roots())))
    except McpError:
        answers.append("no roots")
    return ", ".join(answers)


@fallback.tool()
async def chatty(ctx: Context) -> str:
    """Logs and reports progress, which the client's callbacks receive."""
    await ctx.info("working")
    await ctx.report_progress(1, 1, "done")
    return "done"


async def on_elicitation(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"value": True}}


async def on_sampling(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}


async def roots() -> list[str]:
    return ["file:///tmp"]


ANSWERING = {"on_elicitation": on_elicitation, "on_sampling": on_sampling, "roots": roots}
FALLEN_BACK = {
    "on_elicitation": "no elicitation, ok, 1",
    "on_sampling": "accept, no sampling, 1",
    "roots": "accept, ok, no roots",
}
"""What ``ask_all`` returns when the one callback named fails (legacy)."""


def failing(name: str) -> Any:
    """A callback for ``name`` whose ``assert`` fails (the test's wrong expectation)."""
    if name == "on_notification":

        def plain(note: Any) -> None:
            assert note.method == "notifications/other", name

        return plain

    async def callback(*args: Any) -> None:
        assert not args, name  # (roots takes no argument: it fails all the same)
        raise AssertionError(name)

    return callback


def notes(exc: BaseException) -> list[str]:
    return list(getattr(exc, "__notes__", []))


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("name", ["on_elicitation", "on_sampling", "roots"])
async def test_a_request_callback_fails_the_block_even_when_the_tool_swallows_it(
    era: str, name: str, autojump_clock: MockClock
) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    options = {**ANSWERING, name: failing(name)}
    returned = []
    with pytest.raises(AssertionError) as info:
        async with client_for(fallback, era=era, timeout=5, **options) as client:  # type: ignore[arg-type]
            # Legacy: the server got -32603 for that question and fell back, and the
            # call returns as if all were well. Modern: the exception comes out of it.
            returned.append((await client.call_tool("ask_all")).text)
    if era == "legacy":
        assert returned == [FALLEN_BACK[name]]
    else:
        assert returned == []
    assert str(info.value).splitlines()[0] == name
    assert f"(raised in the {name} callback given to client_for)" in notes(info.value)
    # Raised again at the block's end in legacy; in modern, the call raised it already
    # (and not twice).
    again = [note for note in notes(info.value) if note.startswith("(raised again")]
    assert len(again) == (1 if era == "legacy" else 0)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("name", ["on_log", "on_progress", "on_notification"])
async def test_a_notification_callback_fails_the_block(
    era: str, name: str, autojump_clock: MockClock
) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    finished = []
    with pytest.raises(AssertionError) as info:
        # (log messages go to on_notification when there is no on_log; a modern server
        # sends them when asked for a level)
        options = {name: failing(name), "log_level": "info"}
        async with client_for(fallback, era=era, **options) as client:  # type: ignore[arg-type]
            assert (await client.call_tool("chatty")).text == "done"
            finished.append(era)
    assert finished == [era]  # the session went on: only the block's end raised it
    assert str(info.value).splitlines()[0] == name
    assert notes(info.value) == [
        f"(raised in the {name} callback given to client_for)",
        "(raised again as client_for closed the client: the session had gone on past it, "
        "so the test could have passed)",
    ]
    # the original traceback, down to the assert in the callback
    assert info.traceback[-1].name in {"plain", "callback"}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("how", ["call_tool", "request"])
async def test_a_calls_own_progress_callback_fails_the_block(
    era: EraChoice, how: str, autojump_clock: MockClock
) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    finished = []
    with pytest.raises(AssertionError) as info:
        async with client_for(fallback, era=era) as client:
            if how == "call_tool":
                result = await client.call_tool("chatty", on_progress=failing("call's"))
                assert result.text == "done"
            else:
                params = {"name": "chatty", "arguments": {}}
                await client.request("tools/call", params, on_progress=failing("call's"))
            finished.append(era)
    assert finished == [era]  # the call went on: the session logged it, the block raised it
    assert str(info.value).splitlines()[0] == "call's"
    assert notes(info.value)[0] == (
        "(raised in the on_progress callback given to a call of client_for's client)"
    )


async def test_a_refusal_is_an_answer_not_a_failure(autojump_clock: MockClock) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    async def refuse(params: Any) -> None:
        raise McpError.from_code(-32600, "the user is away")

    async def on_log(params: Any) -> None:
        raise McpError.from_code(-32600, "not an answer: a failure")

    options = {**ANSWERING, "on_elicitation": refuse}
    async with client_for(fallback, era="legacy", **options) as client:
        assert (await client.call_tool("ask_all")).text == "no elicitation, ok, 1"
    with pytest.raises(McpError, match="not an answer"):
        async with client_for(fallback, era="legacy", on_log=on_log) as client:
            await client.call_tool("chatty")


async def test_several_failures_come_in_a_group(autojump_clock: MockClock) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    options = {"on_log": failing("on_log"), "on_progress": failing("on_progress")}
    with pytest.RaisesGroup(
        pytest.RaisesExc(AssertionError, match=r"^on_log\n"),
        pytest.RaisesExc(AssertionError, match=r"^on_progress\n"),
        match=r"client callbacks failed \((on_log, on_progress|on_progress, on_log)\)$",
    ):
        async with client_for(fallback, era="modern", **options) as client:
            await client.call_tool("chatty")
            await client.call_tool("chatty")  # (each callback's first failure only)

    # The block's own exception comes with them, not in their place.
    with pytest.RaisesGroup(
        pytest.RaisesExc(AssertionError, match=r"^on_log\n"),
        pytest.RaisesExc(ValueError, match="^the test's own$"),
        match=r"client callbacks failed \(on_log\), and the block raised$",
    ):
        async with client_for(fallback, era="legacy", on_log=failing("on_log")) as client:
            await client.call_tool("chatty")
            raise ValueError("the test's own")


async def test_an_async_on_notification_is_still_refused() -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    async def on_notification(note: Any) -> None:
        pass

    with pytest.raises(TypeError, match="on_notification must be a plain function"):
        async with client_for(fallback, on_notification=on_notification):
            pass  # pragma: no cover


# -- progress coalescing, off for a test --------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_progress_interval_none_set_on_a_server_sends_every_report(
    era: str, autojump_clock: MockClock
) -> None:
    from mcp_trio.testing import client_for  # noqa: PLC0415

    server = Server("module level")  # (as a module's server: made with the default)

    @server.tool()
    async def steps(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3)
        return "done"

    async def run() -> list[float]:
        seen: list[float] = []

        async def on_progress(event: ProgressReceived) -> None:
            seen.append(event.progress)

        async with client_for(server, era=era) as client:  # type: ignore[arg-type]
            assert (await client.call_tool("steps", on_progress=on_progress)).text == "done"
        return seen

    assert await run() == [1, 3]  # quick reports merged: the first and the final one
    server.progress_interval = None  # what a test's fixture does
    assert await run() == [1, 2, 3]

"""A lone surrogate (``"\\ud800"``: what ``os.fsdecode`` makes of a name that is not
UTF-8) in what a tool asks the client: no JSON text can carry one (orjson refuses it).

The message, prose for the user, is sent with U+FFFD in its place, in either era and in
a task; anywhere else (the schema, which the answer is checked against) it is a
``ValueError`` from the ask, before anything is sent or recorded. The session goes on.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio._tasks import TASKS_EXTENSION
from mcp_trio import Context, Server
from mcp_trio._context import _digest

from .test_server_context import Asker, accept, text

FORM = {"type": "object", "properties": {"ok": {"type": "string"}}}
BAD_FORM = {"type": "object", "properties": {"caf\udce9": {"type": "string"}}}
NAME = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # "caf\udce9.txt"


def asking_server(schema: dict[str, Any], *, catch: bool = True) -> Server:
    server = Server("files")

    @server.tool()
    async def delete(ctx: Context) -> str:
        try:
            answer = await ctx.elicit(f"Delete {NAME}?", schema)
        except ValueError as exc:
            if not catch:
                raise
            return f"refused: {exc}"
        return f"{answer.action} {answer.content}"

    @server.tool()
    async def hello() -> str:
        return "still here"

    return server


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_lone_surrogate_in_the_message_is_sent_as_u_fffd(era: str) -> None:
    asker = Asker(asking_server(FORM), era, accept({"ok": "yes"}))
    async with asker.connect() as client:
        result = await asker.call(client, "delete")
    # The client was asked (the surrogate replaced), answered, and the tool got the
    # answer: in the modern era the retry matched the question it answers (its digest
    # is the same in both rounds).
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    assert params["message"] == "Delete caf\ufffd.txt?"
    assert text(result) == "accept {'ok': 'yes'}"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_lone_surrogate_in_the_schema_is_a_value_error(era: str) -> None:
    asker = Asker(asking_server(BAD_FORM), era, accept({"ok": "yes"}))
    async with asker.connect() as client:
        result = await asker.call(client, "delete")
        # The tool caught it: a clear error naming where, in either era the same.
        assert text(result) == (
            "refused: cannot ask the client (elicitation/create): "
            "params['requestedSchema']['properties']['caf\\udce9'] (the key) holds a lone "
            "surrogate, which no JSON text can carry (decode it without surrogateescape, "
            "or replace it)"
        )
        assert asker.asked == []  # nothing was sent
        assert text(await asker.call(client, "hello")) == "still here"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_uncaught_value_error_fails_the_call_not_the_session(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    asker = Asker(asking_server(BAD_FORM, catch=False), era, accept({"ok": "yes"}))
    async with asker.connect() as client:
        result = await asker.call(client, "delete")
        assert result["isError"] is True
        assert text(result) == "Tool 'delete' failed with an internal error"
        assert text(await asker.call(client, "hello")) == "still here"
    assert "holds a lone surrogate" in caplog.text


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_an_elicit_url_message_is_sent_as_u_fffd(era: str) -> None:
    server = Server("s")

    @server.tool()
    async def sign_in(ctx: Context) -> str:
        answer = await ctx.elicit_url("https://example.com/login", f"Sign in to open {NAME}")
        return answer.action

    asker = Asker(server, era, accept())
    async with asker.connect() as client:
        assert text(await asker.call(client, "sign_in")) == "accept"
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    assert params["message"] == "Sign in to open caf\ufffd.txt"
    assert params["url"] == "https://example.com/login"


async def test_elicit_url_and_sample_refuse_it_too() -> None:
    server = Server("s")
    where: list[str] = []

    @server.tool()
    async def go(ctx: Context) -> str:
        # A URL is ASCII (RFC 3986): the URL check refuses the surrogate first.
        with pytest.raises(ValueError, match=r"is not a valid URL: '\\udc80' at 20"):
            await ctx.elicit_url("https://example.com/\udc80", "Sign in")
        with pytest.raises(ValueError, match="lone surrogate") as info:
            await ctx.sample(["Summarise caf\udce9"], max_tokens=10)
        where.append(str(info.value).split(": ")[1].split(" holds")[0])
        return "done"

    asker = Asker(server, "modern", accept())
    async with asker.connect() as client:
        assert text(await asker.call(client, "go")) == "done"
    assert where == ["params['messages'][0]['content']['text']"]
    assert asker.asked == []


async def test_in_a_task_the_question_is_sent_as_u_fffd_and_a_bad_schema_fails_the_task(
    autojump_clock: MockClock,
) -> None:
    server = Server("tasks")

    @server.tool(task="required")
    async def ask(ctx: Context, bad: bool = False) -> str:
        answer = await ctx.elicit(f"Delete {NAME}?", BAD_FORM if bad else FORM)
        return str(answer.action)

    caps: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
    async with server.connect_in_memory(era="modern", capabilities=caps) as client:
        created = await client.request("tools/call", {"name": "ask", "arguments": {}})
        while (got := await client.request("tasks/get", {"taskId": created["taskId"]}))[
            "status"
        ] != "input_required":
            await trio.sleep(0.1)
        ((key, request),) = got["inputRequests"].items()
        assert request["params"]["message"] == "Delete caf\ufffd.txt?"
        answer = {key: {"action": "accept", "content": {"ok": "y"}}}
        await client.request(
            "tasks/update", {"taskId": created["taskId"], "inputResponses": answer}
        )
        while (got := await client.request("tasks/get", {"taskId": created["taskId"]}))[
            "status"
        ] != "completed":
            await trio.sleep(0.1)
        assert got["result"]["content"][0]["text"] == "accept"
        # The schema's surrogate: the tool fails (its error logged) before anything is
        # asked, and its task completes with that failure; tasks/get reports it.
        bad = await client.request("tools/call", {"name": "ask", "arguments": {"bad": True}})
        while (got := await client.request("tasks/get", {"taskId": bad["taskId"]}))[
            "status"
        ] == "working":
            await trio.sleep(0.1)
        assert got["status"] == "completed" and got["result"]["isError"] is True


def test_the_digest_takes_a_lone_surrogate_and_stays_what_it_was() -> None:
    def old(request: dict[str, Any]) -> str:  # the digest before: UTF-8 only
        text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    plain = {"method": "elicitation/create", "params": {"message": "Café ☕ 😀"}}
    assert _digest(plain) == old(plain)  # answers sealed before still match
    digests = {
        _digest({"method": "m", "params": {"message": message}})
        for message in ("\ud800", "\udc00", "\ufffd", "\ud83d\ude00", "😀", "", "\\ud800")
    }
    assert len(digests) == 7  # distinct texts, distinct digests
    lone = {"method": "m", "params": {"message": "a\ud800b"}}
    assert _digest(lone) == _digest({"params": {"message": "a\ud800b"}, "method": "m"})

"""Every kind of message our server and our client send in a legacy session fits the
negotiated revision's schema strictly: no property its definition lacks (lifecycle.mdx:
"Both parties MUST respect the negotiated protocol version").

The walk: a client with every callback, pinned to one revision, asks a server for
everything it serves, and the server asks back everything it can (sampling with
messages that use every later field, elicitation where the revision has it, roots,
progress, logs, change notifications). Each message either side sends is recorded and
checked against its definition in that revision, and a result against the result type
of the request it answers. ``test_revision_fields`` covers the server's answers field
by field; this is the walk of both directions."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import jsonschema
import pytest
import trio

from mcp_sansio import LEGACY_VERSIONS
from mcp_sansio._json import loads
from mcp_sansio._versions import REVISIONS
from mcp_trio import Context, Message
from mcp_trio._client import Client, open_client
from mcp_trio._server import Server

from ..schema import validate_message
from .test_revision_fields import ICONS, LATER, META, rich_server

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
# A block with every field some legacy revision lacks.
TEXT = {"type": "text", "text": "hi", "annotations": LATER, "_meta": META}


def asking_server() -> Server:
    """:func:`rich_server`, and a tool that asks the client everything it can."""
    server = rich_server()

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Progress, a log, sampling, elicitation, roots."""
        await ctx.report_progress(1, 2, "half")
        await ctx.log("info", {"k": 1})
        sampled = await ctx.sample(
            [
                {"role": "user", "content": TEXT, "_meta": META},
                Message.user({"type": "text", "text": "more", "_meta": META}),
            ],
            max_tokens=5,
            system_prompt="s",
            metadata={"m": 1},
        )
        answers = [sampled.model]
        if REVISIONS[ctx.protocol_version].elicitation_modes:
            elicited = await ctx.elicit("Your name?", FORM)
            answers.append(elicited.action)
        roots = await ctx.list_roots()
        answers.append(str(roots[0].uri))
        return " ".join(answers)

    return server


async def on_sampling(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": TEXT, "model": "m", "_meta": META}


async def on_elicitation(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "A"}}


async def progressed(*_: Any) -> None:
    pass


ROOTS = [{"uri": "file:///w", "name": "w", "_meta": META}]


@asynccontextmanager
async def recorded(
    server: Server, version: str
) -> AsyncGenerator[tuple[Client, list[tuple[str, Any]]]]:
    """A client of ``server`` pinned to ``version``, with every callback, and each
    message that crosses once the handshake is done, as ``(who sent it, message)``."""
    wire: list[tuple[str, Any]] = []
    with trio.fail_after(10):
        async with open_client(
            server,
            era="legacy",
            protocol_version=version,
            on_sampling=on_sampling,
            on_elicitation=on_elicitation,
            roots=ROOTS,
            client_info={"name": "c", "version": "1", "title": "C", "icons": ICONS},
        ) as client:
            conn = client.session.connection
            receive, drain = conn.receive_message, conn.data_to_send

            def receiving(data: Any, **kwargs: Any) -> Any:
                decoded = kwargs.get("decoded")
                wire.append(("server", loads(data) if decoded is None else decoded))
                return receive(data, **kwargs)

            def draining() -> list[bytes]:
                out = drain()
                wire.extend(("client", loads(message)) for message in out)
                return out

            conn.receive_message = receiving  # type: ignore[method-assign]
            conn.data_to_send = draining  # type: ignore[method-assign]
            yield client, wire


async def walk(version: str) -> list[tuple[str, Any]]:
    server = asking_server()
    async with recorded(server, version) as (client, wire):
        await client.set_logging_level("debug")
        await client.ping()
        await client.list_tools()
        assert (await client.call_tool("ask", {}, on_progress=progressed)).text
        await client.subscribe_resource("mem://static")
        await server.notify_resource_updated("mem://static")
        server.remove_tool("media")  # (notifications/tools/list_changed)
        await client.list_resources()
        # (A reference's title came in 2025-06-18, the context in 2025-06-18 too.)
        greet = {"type": "ref/prompt", "name": "greet", "title": "Greet"}
        await client.complete(greet, "name", "", {"a": "b"})
        await client.list_prompts()
        await client.get_prompt("greet", {"name": "x"})
        await client.read_resource("mem://static")
        await client.list_resource_templates()
        await client.set_roots([*ROOTS, "file:///v"])
        await client.unsubscribe_resource("mem://static")
        await client.ping()  # (what was sent before it has been answered)
    return wire


def checked(version: str, wire: list[tuple[str, Any]]) -> set[str]:
    """Check each message of ``wire`` strictly (every one that does not fit is named,
    with why); the kinds of message seen."""
    asked: dict[tuple[str, Any], str] = {}  # (sender, id) -> method
    kinds: set[str] = set()
    unfit: list[str] = []
    for sender, message in wire:
        method = message.get("method")
        if method is not None and "id" in message:
            asked[sender, message["id"]] = method
        answered = None
        if method is None:
            other = "server" if sender == "client" else "client"
            answered = asked.get((other, message.get("id")))
        kind = f"{sender} {method or f'answer to {answered}'}"
        kinds.add(kind)
        try:
            validate_message(version, message, answered, strict=True)
        except jsonschema.ValidationError as exc:
            unfit.append(f"{kind}: {exc.message} at {list(exc.absolute_path)}")
    assert not unfit, "\n".join(unfit)
    return kinds


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
async def test_everything_both_sides_send_fits_the_revision(version: str) -> None:
    kinds = checked(version, await walk(version))
    elicits = bool(REVISIONS[version].elicitation_modes)
    expected = {
        "client logging/setLevel",
        "client ping",
        "client tools/call",
        "client resources/subscribe",
        "client completion/complete",
        "client notifications/roots/list_changed",
        "client answer to sampling/createMessage",
        "client answer to roots/list",
        "server sampling/createMessage",
        "server roots/list",
        "server notifications/progress",
        "server notifications/message",
        "server notifications/resources/updated",
        "server notifications/tools/list_changed",
        "server answer to resources/list",
        "server answer to tools/call",
        "server answer to completion/complete",
        "server answer to prompts/get",
    } | ({"server elicitation/create", "client answer to elicitation/create"} if elicits else set())
    assert expected <= kinds, expected - kinds

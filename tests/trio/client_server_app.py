"""The server the client tests talk to, built from a plain ``Handlers`` table.

Imported by ``test_client*.py`` (in memory, WebSocket) and run as a script for the stdio
tests: ``python client_server_app.py`` serves stdio.

It offers: 7 tools over 3 pages of ``tools/list``; ``tools/call`` of ``echo``, ``add``
(structured), ``fail`` (``isError``), ``slow`` (progress), ``sleep``, ``log``, ``notify``
(sends the notification named in its arguments) and ``ask`` (legacy: asks the client
for elicitation, sampling and roots); resources (2 pages), templates, read; prompts;
completion; resource (un)subscription bookkeeping.
"""

from __future__ import annotations

from typing import Any

import trio

from mcp_sansio import Connection, ConnectionConfig, Era, ErrorCode
from mcp_trio import Handlers, InputRequiredResult, McpError, RequestContext, serve_stdio

CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "completions": {},
    "logging": {},
}
TOOL_NAMES = ("echo", "add", "fail", "slow", "sleep", "log", "notify", "end_subscriptions", "ask")
RESOURCES = [
    {"uri": f"file:///r{i}.txt", "name": f"r{i}", "mimeType": "text/plain"} for i in range(3)
]
COLOURS = ("red", "green", "blue", "grey")


def server_config(**kwargs: Any) -> ConnectionConfig:
    kwargs.setdefault("capabilities", CAPABILITIES)
    return ConnectionConfig(
        implementation={"name": "client-test-server", "version": "2.0"},
        instructions="Call add to add numbers.",
        **kwargs,
    )


def connection_of(ctx: Any) -> Connection:
    """The server core of a request (an HTTP request's context has no session)."""
    conn: Connection = ctx.connection if hasattr(ctx, "connection") else ctx.session.connection
    return conn


async def server_request(ctx: Any, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """Legacy: a server-to-client request, over the session or an HTTP request's stream."""
    if hasattr(ctx, "send_request"):
        result: dict[str, Any] = await ctx.send_request(method, params)
    else:
        result = await ctx.session.request(method, params)
    return result


def page(items: list[dict[str, Any]], params: dict[str, Any] | None, size: int) -> dict[str, Any]:
    """One page of ``items``; the cursor is the offset as a string."""
    cursor = (params or {}).get("cursor")
    start = 0 if cursor is None else int(cursor)
    out: dict[str, Any] = {"items": items[start : start + size]}
    if start + size < len(items):
        out["nextCursor"] = str(start + size)
    return out


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


class Recorder:
    """What the server saw, for assertions."""

    def __init__(self) -> None:
        self.subscribed: list[str] = []
        self.unsubscribed: list[str] = []
        self.list_params: list[dict[str, Any] | None] = []
        self.client_capabilities: list[dict[str, Any] | None] = []
        self.call_meta: list[dict[str, Any]] = []


def make_handlers(recorder: Recorder | None = None) -> Handlers:
    seen = recorder if recorder is not None else Recorder()
    handlers = Handlers()
    tools = [
        {"name": name, "inputSchema": {"type": "object"}, "description": f"the {name} tool"}
        for name in TOOL_NAMES
    ]

    @handlers.on_request("tools/list")
    async def list_tools(ctx: RequestContext) -> dict[str, Any]:
        seen.list_params.append(ctx.params)
        result = page(tools, ctx.params, 3)
        result["tools"] = result.pop("items")
        return result

    @handlers.on_request("tools/call")
    async def call_tool(ctx: RequestContext) -> dict[str, Any] | InputRequiredResult:
        assert ctx.params is not None
        name = ctx.params["name"]
        args = ctx.params.get("arguments") or {}
        seen.call_meta.append(ctx.params.get("_meta") or {})
        seen.client_capabilities.append(
            ctx.client_capabilities
            if ctx.era is Era.MODERN
            else connection_of(ctx).peer_capabilities
        )
        if name == "echo":
            return text(args["text"])
        if name == "add":
            total = args["a"] + args["b"]
            return {**text(f"{total}"), "structuredContent": {"sum": total}}
        if name == "fail":
            return {**text("it broke"), "isError": True}
        if name == "slow":
            for step in range(1, args["steps"] + 1):
                await ctx.report_progress(step, args["steps"], f"step {step}")
                await trio.sleep(args.get("delay", 1))
            return text("done")
        if name == "sleep":
            await trio.sleep(args["seconds"])
            return text("slept")
        if name == "log":
            for level in ("debug", "info", "error"):
                await ctx.log(level, {"said": level}, logger="app")
            return text("logged")
        if name == "notify":
            await ctx.session.notify(args["method"], args.get("params"))
            return text("notified")
        if name == "end_subscriptions":
            conn = ctx.session.connection
            for sid in conn.subscriptions():
                conn.end_subscription(sid)  # flushed with this call's answer
            return text("ended")
        if name == "ask":
            return await ask(ctx, args.get("what", ["elicit", "sample", "roots"]))
        raise McpError.from_code(ErrorCode.INVALID_PARAMS, f"no tool {name!r}")

    @handlers.on_request("resources/list")
    async def list_resources(ctx: RequestContext) -> dict[str, Any]:
        result = page(RESOURCES, ctx.params, 2)
        result["resources"] = result.pop("items")
        return result

    @handlers.on_request("resources/templates/list")
    async def list_templates(ctx: RequestContext) -> dict[str, Any]:
        return {"resourceTemplates": [{"uriTemplate": "file:///{name}.txt", "name": "files"}]}

    @handlers.on_request("resources/read")
    async def read(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        uri = ctx.params["uri"]
        if not any(r["uri"] == uri for r in RESOURCES):
            raise McpError.from_code(-32002, "Resource not found", {"uri": uri})
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": f"contents of {uri}"}]}

    @handlers.on_request("resources/subscribe")
    async def subscribe(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        seen.subscribed.append(ctx.params["uri"])
        return {}

    @handlers.on_request("resources/unsubscribe")
    async def unsubscribe(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        seen.unsubscribed.append(ctx.params["uri"])
        return {}

    @handlers.on_request("prompts/list")
    async def list_prompts(ctx: RequestContext) -> dict[str, Any]:
        return {
            "prompts": [
                {"name": "greet", "arguments": [{"name": "who", "required": True}]},
                {"name": "plain"},
            ]
        }

    @handlers.on_request("prompts/get")
    async def get_prompt(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        who = (ctx.params.get("arguments") or {}).get("who", "nobody")
        return {
            "description": "a greeting",
            "messages": [{"role": "user", "content": {"type": "text", "text": f"Hello {who}"}}],
        }

    @handlers.on_request("completion/complete")
    async def complete(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        prefix = ctx.params["argument"]["value"]
        values = [c for c in COLOURS if c.startswith(prefix)]
        context = (ctx.params.get("context") or {}).get("arguments") or {}
        if context.get("upper") == "yes":
            values = [v.upper() for v in values]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    return handlers


ELICIT = {
    "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
    "maxTokens": 5,
}
QUESTIONS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "elicit": ("elicitation/create", ELICIT),
    "sample": ("sampling/createMessage", SAMPLE),
    "roots": ("roots/list", None),
}


async def ask(ctx: Any, what: list[str]) -> dict[str, Any] | InputRequiredResult:
    """Ask the client: server-to-client requests (legacy) or input_required (modern)."""
    if ctx.era is Era.MODERN:
        if ctx.input_responses is None:
            return InputRequiredResult(
                input_requests={
                    key: {"method": QUESTIONS[key][0], "params": QUESTIONS[key][1] or {}}
                    for key in what
                },
                state=what,
            )
        answers = ctx.input_responses
    else:
        answers = {key: await server_request(ctx, *QUESTIONS[key]) for key in what}
    said: list[str] = []
    if "elicit" in answers:
        elicited = answers["elicit"]
        said.append(f"elicit={elicited['action']}:{(elicited.get('content') or {}).get('name')}")
    if "sample" in answers:
        said.append(f"sample={answers['sample']['content']['text']}")
    if "roots" in answers:
        said.append("roots=" + ",".join(r["uri"] for r in answers["roots"]["roots"]))
    return text(";".join(said))


def main() -> None:
    trio.run(lambda: serve_stdio(make_handlers(), connection_config=server_config()))


if __name__ == "__main__":
    main()

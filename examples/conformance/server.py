"""The server fixtures of the official MCP conformance suite, written with mcp_trio's API.

Served by ``mcp-trio run examples/conformance/server.py --transport http --port N`` at
``http://127.0.0.1:N/mcp``: the legacy lifecycle (initialize, sessions) and the
2026-07-28 stateless lifecycle on the same endpoint. The fixtures and their exact
behaviour are listed in ``shared/conformance/README.md``.
"""

from __future__ import annotations

import base64
import itertools
from typing import Any

import trio

from mcp_trio import (
    CompletionRequest,
    Context,
    InputRequiredResult,
    McpError,
    Message,
    Server,
    ToolResult,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAF"
    "BQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = Server(
    "mcp-trio-conformance",
    "1.0.0",
    instructions="Fixtures for the official MCP conformance suite.",
)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image() -> dict[str, Any]:
    return {"type": "image", "data": PNG, "mimeType": "image/png"}


# ------------------------------------------------------------------ tools, both eras


@server.tool()
async def test_simple_text() -> ToolResult:
    """Returns a fixed text."""
    return ToolResult([text("This is a simple text response for testing.")])


@server.tool()
async def test_image_content() -> ToolResult:
    """Returns a 1x1 PNG."""
    return ToolResult([image()])


@server.tool()
async def test_audio_content() -> ToolResult:
    """Returns a tiny WAV."""
    return ToolResult([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}])


@server.tool()
async def test_embedded_resource() -> ToolResult:
    """Returns an embedded text resource."""
    resource = {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }
    return ToolResult([{"type": "resource", "resource": resource}])


@server.tool()
async def test_multiple_content_types() -> ToolResult:
    """Returns text, an image and a resource."""
    resource = {
        "uri": "test://mixed-content-resource",
        "mimeType": "application/json",
        "text": '{"test":"data","value":123}',
    }
    return ToolResult(
        [text("Multiple content types test:"), image(), {"type": "resource", "resource": resource}]
    )


@server.tool()
async def test_error_handling() -> ToolResult:
    """Always fails, as a tool result."""
    return ToolResult([text("This tool intentionally returns an error for testing")], is_error=True)


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100 before answering."""
    for step, value in enumerate((0, 50, 100)):
        if step:
            await trio.sleep(0.05)
        await ctx.report_progress(value, 100, f"step {step + 1}")
    return "Progress complete"


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, Any] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Accepts input described with JSON Schema 2020-12 features."""
    return f"Received contact for {name or 'anonymous'}"


# ------------------------------------------------------------------ tools, legacy era


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Logs three info messages while it works."""
    for i, message in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if i:
            await trio.sleep(0.05)
        await ctx.info(message)
    return "Logging complete"


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to answer the prompt."""
    answer = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {answer.text}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email."""
    schema = {
        "type": "object",
        "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks for a form whose fields have defaults (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    result = await ctx.elicit("Please confirm your details", schema)
    return f"Elicitation completed: action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks for a form with every enum style (SEP-1330)."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    result = await ctx.elicit("Please choose", schema)
    return f"Elicitation completed: action={result.action}, content={result.content}"


# ------------------------------------------------------------------ tools, modern era


@server.tool(
    input_schema={
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "Where to run",
                "x-mcp-header": "Region",
            }
        },
    }
)
async def test_x_mcp_header(region: str | None = None) -> str:
    """Echoes the region, which is mirrored into the Mcp-Param-Region header."""
    return f"region={region}"


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability."""
    answer = await ctx.sample("Say hello", max_tokens=10)
    return answer.text


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the user through an input-required result (never a request on the stream)."""
    result = await ctx.elicit(
        "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"Hello, {result.content}"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs, but only a request that asked for logs gets them."""
    await ctx.info("This is only sent when the request set a logLevel")
    return "done"


_added = itertools.count(1)


@server.tool()
async def test_trigger_tool_change() -> str:
    """Adds a tool, so that tools/list_changed goes out."""
    name = f"dynamic_tool_{next(_added)}"

    async def dynamic() -> str:
        return "dynamic"

    server.add_tool(dynamic, name=name, description="A tool added at run time")
    await server.notify_tools_changed()
    return f"added {name}"


@server.tool()
async def test_trigger_prompt_change() -> str:
    """Adds a prompt, so that prompts/list_changed goes out."""
    name = f"dynamic_prompt_{next(_added)}"

    async def dynamic() -> str:
        return "dynamic"

    server.add_prompt(dynamic, name=name, description="A prompt added at run time")
    await server.notify_prompts_changed()
    return f"added {name}"


# ------------------------------------------------------------------ input-required results

ELICIT_NAME = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "What is your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
SAMPLE_CAPITAL = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}
        ],
        "maxTokens": 100,
    },
}
LIST_ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def _elicit_ok(message: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"],
            },
        },
    }


def _answers(ctx: Context) -> dict[str, Any]:
    return ctx.request_context.input_responses or {}


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> ToolResult | InputRequiredResult:
    """Asks for the user's name with an input-required result (no requestState)."""
    answer = _answers(ctx).get("user_name")
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return InputRequiredResult(input_requests={"user_name": ELICIT_NAME})
    name = (answer.get("content") or {}).get("name", "there")
    return ToolResult([text(f"Hello, {name}!")])


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> ToolResult | InputRequiredResult:
    """Asks the client's model a question."""
    answer = _answers(ctx).get("capital")
    if not isinstance(answer, dict):
        return InputRequiredResult(input_requests={"capital": SAMPLE_CAPITAL})
    reply = (answer.get("content") or {}).get("text", "")
    return ToolResult([text(f"The model said: {reply}")])


@server.tool()
async def test_input_required_result_list_roots(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Asks for the client's roots."""
    answer = _answers(ctx).get("roots")
    if not isinstance(answer, dict):
        return InputRequiredResult(input_requests={"roots": LIST_ROOTS})
    roots = answer.get("roots") or []
    return ToolResult([text(f"Roots: {[r.get('uri') for r in roots]}")])


@server.tool()
async def test_input_required_result_request_state(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Needs an answer and its own requestState back."""
    state = ctx.request_context.request_state
    if state != {"step": "confirm"} or "confirm" not in _answers(ctx):
        return InputRequiredResult(
            input_requests={"confirm": _elicit_ok("Proceed?")}, state={"step": "confirm"}
        )
    return ToolResult([text("state-ok: confirmed")])


@server.tool()
async def test_input_required_result_multiple_inputs(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Needs three answers of different kinds at once."""
    answers = _answers(ctx)
    wanted = {"confirm": _elicit_ok("Proceed?"), "capital": SAMPLE_CAPITAL, "roots": LIST_ROOTS}
    if ctx.request_context.request_state != {"step": "all"} or not all(
        key in answers for key in wanted
    ):
        return InputRequiredResult(input_requests=wanted, state={"step": "all"})
    return ToolResult([text("state-ok: all inputs received")])


@server.tool()
async def test_input_required_result_multi_round(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Two rounds, each with its own state."""
    state = ctx.request_context.request_state
    answers = _answers(ctx)
    if state == {"step": 1} and "step1" in answers:
        return InputRequiredResult(
            input_requests={"step2": _elicit_ok("Step 2: continue?")}, state={"step": 2}
        )
    if state == {"step": 2} and "step2" in answers:
        return ToolResult([text("state-ok: both rounds done")])
    return InputRequiredResult(
        input_requests={"step1": _elicit_ok("Step 1: continue?")}, state={"step": 1}
    )


@server.tool()
async def test_input_required_result_tampered_state(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Its requestState is HMAC-protected: a tampered one is refused by the core."""
    if ctx.request_context.request_state == {"step": "sealed"} and "confirm" in _answers(ctx):
        return ToolResult([text("state-ok")])
    return InputRequiredResult(
        input_requests={"confirm": _elicit_ok("Proceed?")}, state={"step": "sealed"}
    )


@server.tool()
async def test_input_required_result_capabilities(
    ctx: Context,
) -> ToolResult | InputRequiredResult:
    """Asks only for what the client declared it can give."""
    caps = ctx.client_capabilities or {}
    answers = _answers(ctx)
    if answers:
        return ToolResult([text(f"received {sorted(answers)}")])
    wanted: dict[str, Any] = {}
    if "sampling" in caps:
        wanted["capital"] = SAMPLE_CAPITAL
    if "elicitation" in caps:
        wanted["user_name"] = ELICIT_NAME
    if "roots" in caps:
        wanted["roots"] = LIST_ROOTS
    if not wanted:
        return ToolResult([text("nothing can be asked of this client")])
    return InputRequiredResult(input_requests=wanted)


# ------------------------------------------------------------------ tasks extension
#
# io.modelcontextprotocol/tasks (2026-07-28, --spec-version default): the scenarios
# tasks-* call these with and without the extension in the request's capabilities.

NAME_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


@server.tool()
async def greet(name: str) -> ToolResult:
    """Greets someone (never a task)."""
    return ToolResult([text(f"Hello, {name}!")])


@server.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> ToolResult:
    """Sleeps ``seconds``, then answers: a task for a client with the tasks extension."""
    await trio.sleep(seconds)
    return ToolResult([text(f"Computed {label!r} in {seconds} s")])


@server.tool(task="required")
async def failing_job() -> ToolResult:
    """Fails with a tool error after a moment; runs only as a task."""
    await trio.sleep(0.5)
    return ToolResult([text("The job failed: the input was rejected")], is_error=True)


@server.tool(task="optional")
async def protocol_error_job() -> ToolResult:
    """Fails with a protocol (JSON-RPC) error: its task ends failed."""
    await trio.sleep(0.1)
    raise McpError.from_code(-32603, "The job crashed")


@server.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context) -> ToolResult:
    """Asks for confirmation through the task, then 'deletes' the file."""
    answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_FORM)
    confirmed = answer.accepted and bool((answer.content or {}).get("confirm"))
    return ToolResult([text(f"{'Deleted' if confirmed else 'Kept'} {filename}")])


@server.tool(task="optional")
async def multi_input(ctx: Context) -> ToolResult:
    """Asks two questions at once through the task."""
    answers: list[str] = []

    async def ask(message: str) -> None:
        answer = await ctx.elicit(message, NAME_FORM)
        answers.append(str((answer.content or {}).get("name")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "First name?")
        nursery.start_soon(ask, "Second name?")
    return ToolResult([text(f"Received {sorted(answers)}")])


@server.tool(task="required", task_start="explicit")
async def test_tool_with_task(ctx: Context) -> ToolResult:
    """Asks for a name (an input-required round), then goes on as a task."""
    answer = await ctx.elicit("What is your name?", NAME_FORM)
    ctx.start_task()
    await trio.sleep(0.2)
    return ToolResult([text(f"Hello, {(answer.content or {}).get('name')}!")])


# ------------------------------------------------------------------ resources


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
async def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource (a PNG)."""
    return base64.b64decode(PNG)


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json")
async def template_data(id: str) -> str:
    """Data for an id."""
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


# ------------------------------------------------------------------ skills (SEP-2640)

server.add_skill(
    {
        "SKILL.md": "---\nname: pdf-processing\n"
        "description: Extract, fill, and assemble PDF documents\n"
        "license: Apache-2.0\nmetadata:\n  version: '2.1.0'\n---\n\n"
        "# PDF processing\n\nPick the matching template from `templates/`.\n",
        "references/FORMS.md": "# Forms\n\nHow to fill the forms.\n",
        "templates/invoice.md": "# Invoice\n",
        "templates/regional/eu-invoice.md": "# EU invoice\n",
    }
)


# ------------------------------------------------------------------ prompts


@server.prompt()
async def test_simple_prompt() -> list[Message]:
    """A prompt with no arguments."""
    return [Message("user", "This is a simple prompt for testing.")]


@server.prompt()
async def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
    """A prompt with two required arguments."""
    return [Message("user", f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]


@server.prompt()
async def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that embeds a resource."""
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        Message("user", {"type": "resource", "resource": resource}),
        Message("user", "Please process the embedded resource above."),
    ]


@server.prompt()
async def test_prompt_with_image() -> list[Message]:
    """A prompt that carries an image."""
    return [Message("user", image()), Message("user", "Please analyze the image above.")]


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
    """Asks for context with an input-required result before it answers."""
    answer = _answers(ctx).get("user_context")
    if not isinstance(answer, dict) or answer.get("action") != "accept":
        return InputRequiredResult(
            input_requests={
                "user_context": {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": "What context should the prompt use?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"context": {"type": "string"}},
                            "required": ["context"],
                        },
                    },
                }
            }
        )
    context = (answer.get("content") or {}).get("context", "")
    return [Message("user", f"Prompt with context: {context}")]


@server.completion("ref/prompt", "test_prompt_with_arguments", "arg1")
async def complete_arg1(request: CompletionRequest) -> list[str]:
    """Suggestions for arg1."""
    return [v for v in ("paris", "park", "party") if v.startswith(request.value)]

"""What a server's handler asks of the client is checked against the spec before it is
sent: a URL-mode elicitation's ``url`` is a valid web URL, a form's keywords have the
types a client reads them with, and sampling with tools waits for the revision that has
it. Each refusal reaches the handler at the call; nothing goes to the client."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ErrorCode, RemoteProtocolError
from mcp_trio import McpError
from mcp_trio._client_common import elicitation_params
from mcp_trio._context import Context
from mcp_trio._server import Server
from mcp_trio._server_forms import check_elicitation_url, form_spec

from ..schema import validate
from .test_server_context import ALL_CAPS, Asker, accept, text


@pytest.fixture(params=["legacy", "modern"])
def era(request: pytest.FixtureRequest) -> str:
    """The client's era: every test that takes it runs once per era."""
    value: str = request.param
    return value


def refusing_server() -> Server:
    """A server whose tools report what the call raised (or what came back)."""
    server = Server("checks")

    @server.tool()
    async def go(ctx: Context, url: str) -> str:
        try:
            return (await ctx.elicit_url(url, "Please sign in")).action
        except (ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}"

    @server.tool()
    async def ask(ctx: Context, schema: dict[str, Any]) -> str:
        try:
            return (await ctx.elicit("Fill in", schema)).action
        except (ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {exc}"

    return server


def options(era: str, version: str = "2025-11-25") -> dict[str, Any]:
    return {"supported_versions": (version,)} if era == "legacy" else {}


# ================================================================== elicit_url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("not a url at all", "is not a valid URL: it has no scheme"),
        ("", "is not a valid URL: it has no scheme"),
        ("/relative/path", "is not a valid URL: it has no scheme"),
        ("https://exa mple.com/", "is not a valid URL: ' ' at 11 must be percent-encoded"),
        ("https://例え.jp/", "is not a valid URL: '例' at 8 must be percent-encoded"),
        ("javascript:alert(1)", "is not a web URL: its scheme is 'javascript'"),
        ("ftp://example.com/file", "is not a web URL: its scheme is 'ftp'"),
        ("mailto:someone@example.com", "is not a web URL: its scheme is 'mailto'"),
        ("https:/no-host", "has no host"),
        ("https://", "has no host"),
    ],
)
async def test_elicit_url_refuses_what_is_not_a_valid_url(era: str, url: str, why: str) -> None:
    # client/elicitation.mdx: "The url parameter MUST contain a valid URL."
    asker = Asker(refusing_server(), era, accept(), **options(era))
    async with asker.connect() as client:
        said = text(await asker.call(client, "go", url=url))
    assert said.startswith(f"ValueError: elicitation URL {url!r} ")
    assert why in said
    assert asker.asked == []


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/connect?state=x%20y#top",
        "http://127.0.0.1:8080/callback",
        "HTTPS://[::1]/pay",
        "https://xn--r8jz45g.jp/",
    ],
)
async def test_elicit_url_sends_a_valid_web_url(era: str, url: str) -> None:
    asker = Asker(refusing_server(), era, accept(), **options(era))
    async with asker.connect() as client:
        assert text(await asker.call(client, "go", url=url)) == "accept"
        assert client.handshake is not None
        version = client.handshake.protocol_version
    ((method, params),) = asker.asked
    assert method == "elicitation/create"
    assert params["url"] == url
    validate(version, "ElicitRequestURLParams", params)


def test_a_refused_url_is_shown_clipped_and_escaped() -> None:
    url = "https://example.com/" + "a" * 5000 + " \x1b[31m"
    with pytest.raises(ValueError) as info:
        check_elicitation_url(url)
    message = str(info.value)
    assert len(message) < 600
    clipped = url[:200] + "… (4826 more characters)"
    assert message.startswith(f"elicitation URL {clipped!r} ")
    assert "' ' at 5020 must be percent-encoded" in message
    with pytest.raises(ValueError) as info:
        check_elicitation_url("https://exa\x1bmple.com/")
    assert "\x1b" not in str(info.value)  # repr escapes it: the message is safe to print
    with pytest.raises(TypeError, match="an elicitation URL is a string, not bytes"):
        check_elicitation_url(b"https://example.com/")


# ================================================================== form keyword types


def form(**fields: Any) -> dict[str, Any]:
    return {"type": "object", "properties": fields}


#: Forms whose keywords are all allowed but whose values have the wrong type, or that a
#: client cannot fill in: each is refused at ``ctx.elicit`` (the schema's
#: PrimitiveSchemaDefinition, read as our client reads it).
WRONG_VALUES = [
    pytest.param(
        form(a={"type": "string", "default": 5}),
        "properties.a.default: expected a string, got a number",
        id="string-default-int",
    ),
    pytest.param(
        form(a={"type": "boolean", "default": "yes"}),
        "properties.a.default: expected a boolean, got a string",
        id="boolean-default-string",
    ),
    pytest.param(
        form(a={"type": "number", "minimum": "0"}),
        "properties.a.minimum: expected a number, got a string",
        id="number-minimum-string",
    ),
    pytest.param(
        form(a={"type": "integer", "maximum": True}),
        "properties.a.maximum: expected a number, got a boolean",
        id="integer-maximum-bool",
    ),
    pytest.param(
        form(a={"type": "string", "minLength": "1"}),
        "properties.a.minLength: expected an integer, got a string",
        id="minLength-string",
    ),
    pytest.param(
        form(a={"type": "string", "title": 5}),
        "properties.a.title: expected a string, got a number",
        id="title-int",
    ),
    pytest.param(
        form(a={"type": "string", "enum": ["r", "g"], "enumNames": ["Red", 2]}),
        "properties.a.enumNames[1]: expected a string, got a number",
        id="enumNames-int",
    ),
    pytest.param(
        # TitledSingleSelectEnumSchema requires each option's title (2025-11-25 and
        # 2026-07-28 alike); untitled options are an ``enum``.
        form(a={"type": "string", "oneOf": [{"const": "p"}]}),
        "properties.a.oneOf[0].title: required field missing",
        id="oneOf-without-title",
    ),
    pytest.param(
        form(a={"type": "array", "items": {"anyOf": [{"const": "p"}]}}),
        "properties.a.items.anyOf[0].title: required field missing",
        id="titled-multi-without-title",
    ),
    pytest.param(
        form(a={"type": "array", "items": {"type": "string", "enum": ["x"]}, "minItems": 0.5}),
        "properties.a.minItems: expected an integer, got a number",
        id="minItems-float",
    ),
]

#: Refused by the server's own check before the client's reading: a form no answer fits.
UNFILLABLE = [
    pytest.param(
        {**form(a={"type": "string"}), "required": "a"},
        "an elicitation schema's required is a list of field names, not str",
        id="required-not-a-list",
    ),
    pytest.param(
        {**form(a={"type": "string"}), "required": ["zzz"]},
        "an elicitation schema requires fields it does not have: ['zzz']",
        id="required-unknown-field",
    ),
    pytest.param(
        form(a={"type": "string", "title": None}),
        "elicitation field 'a': ['title'] must not be null",
        id="null-keyword",
    ),
]

CLIENT_REFUSES = (
    "an elicitation schema that a client would refuse (client/elicitation, "
    "PrimitiveSchemaDefinition): "
)


@pytest.mark.parametrize(("schema", "problem"), WRONG_VALUES)
async def test_a_form_keyword_of_the_wrong_type_is_refused_at_the_call(
    era: str, schema: dict[str, Any], problem: str
) -> None:
    asker = Asker(refusing_server(), era, accept(), **options(era))
    async with asker.connect() as client:
        said = text(await asker.call(client, "ask", schema=schema))
    assert said == f"TypeError: {CLIENT_REFUSES}{problem}"
    assert asker.asked == []
    # Our client would have answered -32602 to this very schema.
    with pytest.raises(RemoteProtocolError) as info:
        elicitation_params({"mode": "form", "message": "m", "requestedSchema": schema})
    assert info.value.error_code == ErrorCode.INVALID_PARAMS
    assert problem in info.value.message


@pytest.mark.parametrize(("schema", "problem"), UNFILLABLE)
async def test_a_form_no_answer_could_fit_is_refused_at_the_call(
    era: str, schema: dict[str, Any], problem: str
) -> None:
    asker = Asker(refusing_server(), era, accept(), **options(era))
    async with asker.connect() as client:
        said = text(await asker.call(client, "ask", schema=schema))
    assert said == f"TypeError: {problem}"
    assert asker.asked == []


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
@pytest.mark.parametrize(("schema", "problem"), WRONG_VALUES)
def test_form_spec_refuses_the_wrong_type_in_every_revision(
    version: str, schema: dict[str, Any], problem: str
) -> None:
    # (2025-06-18 refuses some for their shape first: a default, a titled option.)
    with pytest.raises(TypeError):
        form_spec(schema, protocol_version=version)


@pytest.mark.parametrize(
    "schema",
    [
        form(a={"type": "string", "default": "x", "minLength": 1, "format": "email"}),
        form(a={"type": "boolean", "default": False}),
        form(a={"type": "integer", "minimum": 0, "maximum": 9, "default": 3}),
        form(a={"type": "number", "minimum": 0.5}),
        form(a={"type": "string", "oneOf": [{"const": "p", "title": "P"}], "default": "p"}),
        form(a={"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}),
        {
            **form(a={"type": "array", "items": {"anyOf": [{"const": "p", "title": "P"}]}}),
            "required": ["a"],
        },
    ],
)
async def test_well_typed_forms_still_go_out(era: str, schema: dict[str, Any]) -> None:
    asker = Asker(refusing_server(), era, lambda m, p: {"action": "decline"}, **options(era))
    async with asker.connect() as client:
        assert text(await asker.call(client, "ask", schema=schema)) == "decline"
        assert client.handshake is not None
        version = client.handshake.protocol_version
    ((_, params),) = asker.asked
    assert params["requestedSchema"] == schema
    validate(version, "ElicitRequestFormParams", params)
    elicitation_params(params)  # and our client reads it


# ================================================================== sampling with tools


def sampling_server(**arguments: Any) -> Server:
    server = Server("sampler")

    @server.tool()
    async def samples(ctx: Context) -> str:
        return (await ctx.sample("hi", max_tokens=5, **arguments)).text

    return server


TOOLS = [{"name": "t", "inputSchema": {"type": "object"}}]
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
TOOL_CAPS = {**ALL_CAPS, "sampling": {"tools": {}}}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"tools": TOOLS}, id="tools"),
        pytest.param({"tool_choice": {"mode": "auto"}}, id="tool_choice"),
        pytest.param({"tools": TOOLS, "tool_choice": {"mode": "none"}}, id="both"),
    ],
)
async def test_sampling_with_tools_is_refused_before_2025_11_25(
    version: str, arguments: dict[str, Any]
) -> None:
    # The client declares sampling.tools anyway: the revision has no such parameters.
    asker = Asker(
        sampling_server(**arguments),
        "legacy",
        lambda m, p: SAMPLED,
        supported_versions=(version,),
        capabilities=TOOL_CAPS,
    )
    async with asker.connect() as client:
        with pytest.raises(McpError) as info:
            await asker.call(client, "samples")
    assert asker.asked == []
    assert info.value.code == ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert info.value.message == (
        "tool use in sampling (the tools and toolChoice parameters) does not exist in "
        f"protocol version {version}, the version of this session (it needs one of "
        "2025-11-25, 2026-07-28)"
    )
    assert info.value.data == {
        "protocolVersion": version,
        "supported": ["2025-11-25", "2026-07-28"],
    }


async def test_sampling_without_tools_still_goes_out_before_2025_11_25() -> None:
    asker = Asker(
        sampling_server(),
        "legacy",
        lambda m, p: SAMPLED,
        supported_versions=("2025-06-18",),
        capabilities=TOOL_CAPS,
    )
    async with asker.connect() as client:
        assert text(await asker.call(client, "samples")) == "ok"
    ((method, params),) = asker.asked
    assert method == "sampling/createMessage"
    assert "tools" not in params


async def test_sampling_with_tools_goes_out_in_2025_11_25_and_2026_07_28(era: str) -> None:
    arguments = {"tools": TOOLS, "tool_choice": {"mode": "auto"}}
    asker = Asker(
        sampling_server(**arguments),
        era,
        lambda m, p: SAMPLED,
        capabilities=TOOL_CAPS,
        **options(era),
    )
    async with asker.connect() as client:
        assert text(await asker.call(client, "samples")) == "ok"
        assert client.handshake is not None
        version = client.handshake.protocol_version
    ((method, params),) = asker.asked
    assert (params["tools"], params["toolChoice"]) == (TOOLS, {"mode": "auto"})
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    validate(version, "CreateMessageRequest", message)

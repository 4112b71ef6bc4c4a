"""``completion/complete`` as ``server/utilities/completion.mdx`` has it: ``hasMore`` says
whether options exist beyond the (at most 100) sent, and a ``ref/resource`` names a URI or a
URI template (the schema's ``ResourceTemplateReference.uri``: "The URI or URI template of
the resource", in every revision).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, Literal, cast

import pytest
import trio

from mcp_sansio import ErrorCode
from mcp_trio import EraChoice, McpError, Session
from mcp_trio._server import Server
from mcp_trio._server_content import MAX_COMPLETION_VALUES, Completion
from mcp_trio._server_rpc import CompletionRequest

from ..schema import validate

ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])
MANY = [f"v{i}" for i in range(150)]


@asynccontextmanager
async def connect(server: Server, era: str) -> AsyncGenerator[Session]:
    with trio.fail_after(10):
        async with server.connect_in_memory(
            era=cast(EraChoice, era), implementation={"name": "t", "version": "1"}
        ) as client:
            yield client


async def complete(
    client: Session, ref: dict[str, str], name: str, value: str = "", **context: str
) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = {"arguments": context}
    result = await client.request("completion/complete", params)
    assert client.handshake is not None
    validate(client.handshake.protocol_version, "CompleteResult", result)
    completion: dict[str, Any] = result["completion"]
    return completion


# ------------------------------------------------------------------ hasMore


@pytest.mark.parametrize(
    ("completion", "has_more"),
    [
        (Completion(MANY, has_more=False), True),  # cut: there are more, whatever it says
        (Completion(MANY, has_more=True), True),
        (Completion(MANY), True),
        (Completion(MANY[:MAX_COMPLETION_VALUES], has_more=False), False),  # all of them
        (Completion(MANY[:MAX_COMPLETION_VALUES], has_more=True), True),  # the author knows
        (Completion(MANY[:3]), None),
    ],
)
def test_has_more_is_true_whenever_values_are_cut(
    completion: Completion, has_more: bool | None
) -> None:
    out = completion.to_json()
    assert out["values"] == [str(v) for v in completion.values[:MAX_COMPLETION_VALUES]]
    assert out.get("hasMore") is has_more


def has_more_server() -> Server:
    server = Server("has-more")

    @server.prompt()
    def pick(plain: str = "", explicit: str = "") -> str:
        """Pick."""
        return plain + explicit

    @server.completion("ref/prompt", "pick", "plain")
    def plain(request: CompletionRequest) -> list[str]:
        return MANY[: int(request.value)] if request.value else MANY

    @server.completion("ref/prompt", "pick", "explicit")
    def explicit(request: CompletionRequest) -> Completion:
        return Completion(MANY, total=len(MANY), has_more=False)

    return server


@ERAS
async def test_a_cut_completion_says_has_more_on_the_wire(era: str) -> None:
    pick = {"type": "ref/prompt", "name": "pick"}
    async with connect(has_more_server(), era) as client:
        # A plain list of 150 strings: 100 sent, hasMore true, total 150.
        many = await complete(client, pick, "plain")
        assert many == {"values": MANY[:100], "total": 150, "hasMore": True}
        # Exactly 100: nothing cut, nothing more.
        hundred = await complete(client, pick, "plain", "100")
        assert hundred == {"values": MANY[:100], "total": 100, "hasMore": False}
        few = await complete(client, pick, "plain", "2")
        assert few == {"values": MANY[:2], "total": 2, "hasMore": False}
        # Completion(150 values, has_more=False): cut, so hasMore is true all the same.
        cut = await complete(client, pick, "explicit")
        assert cut == {"values": MANY[:100], "total": 150, "hasMore": True}


# ------------------------------------------------------------------ ref/resource by URI


def uri_server() -> Server:
    server = Server("by-uri")
    asked: list[CompletionRequest] = []

    @server.resource("repo://{owner}/{name}", scopes="repos")
    async def repo(owner: str, name: str) -> str:
        return owner + name

    @server.resource("doc://{kind}/{id}")
    async def doc(kind: Literal["guide", "api"], id: str) -> str:
        return kind + id

    @server.resource("repo://fixed/one")
    async def fixed() -> str:
        return "fixed"

    @server.completion("ref/resource", "repo://{owner}/{name}")
    async def names(request: CompletionRequest) -> list[str]:
        asked.append(request)
        return [f"{request.context.get('owner')}-{request.argument}"]

    server.asked = asked  # type: ignore[attr-defined]
    return server


@ERAS
async def test_a_concrete_uri_completes_for_the_template_it_matches(era: str) -> None:
    """completion.mdx: a ``ResourceTemplateReference``'s ``uri`` is "a URI or URI template"
    (the schema says so in every revision, so both eras): the first template that matches
    the URI completes, its other variables filled in from the URI."""
    server = uri_server()
    asked: list[CompletionRequest] = server.asked  # type: ignore[attr-defined]
    template = {"type": "ref/resource", "uri": "repo://{owner}/{name}"}
    concrete = {"type": "ref/resource", "uri": "repo://octo/x%20y"}
    async with connect(server, era) as client:
        assert (await complete(client, template, "name", "", owner="octo"))["values"] == [
            "octo-name"
        ]
        assert (await complete(client, concrete, "name", "m"))["values"] == ["octo-name"]
        assert asked[-1] == CompletionRequest(
            ref_type="ref/resource",
            ref="repo://{owner}/{name}",
            argument="name",
            value="m",
            context={"owner": "octo"},  # not the name: it is what is being completed
        )
        # What the request resolves wins over the URI.
        assert (await complete(client, concrete, "name", "", owner="given"))["values"] == [
            "given-name"
        ]
        await complete(client, concrete, "owner", "o")
        assert asked[-1].context == {"name": "x y"}  # (decoded, as resources/read has it)
        # A template's fixed choices, by a URI too.
        by_uri = {"type": "ref/resource", "uri": "doc://guide/7"}
        assert (await complete(client, by_uri, "kind", "a"))["values"] == ["api"]
        # A concrete resource is itself, not a template's match: nothing to complete.
        fixed = {"type": "ref/resource", "uri": "repo://fixed/one"}
        assert (await complete(client, fixed, "name", ""))["values"] == []
    assert len(asked) == 4


@ERAS
@pytest.mark.parametrize(
    "uri",
    [
        "nope://a/b",  # no template matches
        "repo://octo",  # one segment short
        "repo://{a}/{b}",  # a template, not ours (not matched as a URI)
        "repo://{owner}/x",
        "repo://..%2F..%2Fetc/x",  # a {x} value is one segment (as resources/read has it)
        "repo://octo/..",
    ],
)
async def test_a_uri_nothing_matches_is_still_unknown(era: str, uri: str) -> None:
    async with connect(uri_server(), era) as client:
        params = {
            "ref": {"type": "ref/resource", "uri": uri},
            "argument": {"name": "name", "value": ""},
        }
        with pytest.raises(McpError) as info:
            await client.request("completion/complete", params)
    assert info.value.error.code == ErrorCode.INVALID_PARAMS
    assert info.value.error.message == f"Unknown resource template: {uri}"
    assert info.value.error.data == {"uri": uri}


def test_a_concrete_uri_needs_the_scopes_of_the_template_it_matches() -> None:
    """The scope check finds the template as completion does: a URI is no way around it."""
    registry = uri_server()._registry

    def needs(uri: str) -> frozenset[str]:
        ref = {"type": "ref/resource", "uri": uri}
        params = {"ref": ref, "argument": {"name": "name", "value": ""}}
        return registry.scopes_for("completion/complete", params)

    assert needs("repo://{owner}/{name}") == {"repos"}
    assert needs("repo://octo/x") == {"repos"}
    assert needs("doc://guide/7") == frozenset()
    assert needs("repo://fixed/one") == frozenset()  # the resource itself, unscoped
    assert needs("repo://{a}/{b}") == frozenset()  # names nothing: refused by the handler

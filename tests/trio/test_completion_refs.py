"""``completion/complete`` as ``server/utilities/completion.mdx`` has it: ``hasMore`` says
whether options exist beyond the (at most 100) sent, and a ``ref/resource`` names a URI or a
URI template (the schema's ``ResourceTemplateReference.uri``: "The URI or URI template of
the resource", in every revision).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from mcp_trio import Session
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
            era=era, implementation={"name": "t", "version": "1"}
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

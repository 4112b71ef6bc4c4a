"""What the README says of errors a newcomer meets, checked in both eras."""

from __future__ import annotations

import pytest
from trio.testing import MockClock

from mcp_trio import LocalProtocolError, McpError, ResourceNotFound, Server
from mcp_trio._client import open_client


def notes() -> Server:
    server = Server("notes")

    @server.resource("notes://{id}")
    async def note(id: int) -> str:
        raise ResourceNotFound(f"notes://{id}")

    return server


@pytest.mark.parametrize(("era", "code"), [("legacy", -32002), ("modern", -32602)])
async def test_resource_not_found_has_the_code_of_its_era(
    era: str, code: int, autojump_clock: MockClock
) -> None:
    async with open_client(notes(), era=era) as client:  # type: ignore[arg-type]
        with pytest.raises(McpError) as caught:
            await client.read_resource("notes://9")
        assert caught.value.error.code == code
        # (legacy said only "Resource not found": the URI was in data alone)
        assert caught.value.error.message == "Resource not found: notes://9"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_listing_an_undeclared_capability_is_a_local_error(
    era: str, autojump_clock: MockClock
) -> None:
    async with open_client(Server("bare"), era=era) as client:  # type: ignore[arg-type]
        with pytest.raises(LocalProtocolError):
            await client.list_resources()
        with pytest.raises(LocalProtocolError):
            await client.list_prompts()

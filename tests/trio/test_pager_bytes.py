"""Auto-pagination's byte budget: each page may be as large as a message, so a server
that pages one huge item at a time is stopped by the bytes the pages hold
(``MAX_LIST_BYTES``), not only by their number and items."""

from __future__ import annotations

from typing import Any

import pytest
from trio.testing import MockClock

from mcp_sansio import ConnectionConfig, RemoteProtocolError
from mcp_sansio import types as t
from mcp_trio import Handlers, RequestContext, _client_common
from mcp_trio._client import open_client
from mcp_trio._client_common import MAX_LIST_BYTES, MAX_LIST_PAGES, Pager

CAPABILITIES: dict[str, Any] = {"tools": {}}
DESCRIPTION = "d" * 4_000_000  # (one string, shared by every page: the test stays small)


def test_the_default_budget() -> None:
    assert MAX_LIST_BYTES == 64 * 1024 * 1024


def _page(n: int) -> dict[str, Any]:
    tool = {"name": f"t{n}", "description": DESCRIPTION, "inputSchema": {"type": "object"}}
    return {"tools": [tool], "nextCursor": str(n + 1)}


def test_pages_past_the_byte_budget_are_refused() -> None:
    pages = Pager("tools/list", "tools", t.Tool)
    taken = 0
    with pytest.raises(RemoteProtocolError, match=f"more than {MAX_LIST_BYTES} bytes"):
        while pages.add(_page(taken)):
            taken += 1
    # The first page is not counted; 16 more of 4 MB fit in 64 MiB, the 17th goes past
    # it: far below the page bound.
    assert taken == 1 + MAX_LIST_BYTES // 4_000_000 == 17
    assert taken < MAX_LIST_PAGES


def test_nesting_too_deep_to_encode_is_counted_too() -> None:
    deep: Any = "x" * 1024 * 1024
    for _ in range(600):  # (orjson writes 254 levels; the parser reads 1024)
        deep = {"a": [deep]}
    schema = {"type": "object", "properties": {"a": deep}}
    pages = Pager("tools/list", "tools", t.Tool)
    taken = 0
    with pytest.raises(RemoteProtocolError, match="bytes of pages"):
        while pages.add({"tools": [{"name": "t", "inputSchema": schema}], "nextCursor": ""}):
            taken += 1
    assert taken == 64  # (each page a little over 1 MiB, the first not counted)


async def test_a_client_stops_listing_past_the_budget(autojump_clock: MockClock) -> None:
    calls: list[Any] = []
    handlers = Handlers()

    @handlers.on_request("tools/list")
    async def huge_pages(ctx: RequestContext) -> dict[str, Any]:
        calls.append((ctx.params or {}).get("cursor"))
        return _page(len(calls))

    async with open_client(
        (handlers, ConnectionConfig(era="legacy", capabilities=CAPABILITIES)), era="legacy"
    ) as client:
        with pytest.raises(RemoteProtocolError, match="bytes of pages"):
            await client.list_tools()
    assert len(calls) == 18  # (the 18th went past: 17 counted x 4 MB > 64 MiB)


def test_a_one_page_listing_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[Any] = []
    page_bytes = _client_common._page_bytes

    def counting(items: Any) -> int:
        measured.append(items)
        return page_bytes(items)

    monkeypatch.setattr(_client_common, "_page_bytes", counting)
    pages = Pager("tools/list", "tools", t.Tool)
    assert not pages.add({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
    assert measured == []  # (within the message bound: writing it out again costs ~15 µs)
    pages = Pager("tools/list", "tools", t.Tool)
    assert pages.add(_page(0))
    assert not pages.add({"tools": _page(1)["tools"]})
    assert measured == [_page(1)["tools"]]

"""The "publishes no metadata" error names every URL tried; an issuer comes from a
server's Protected Resource Metadata (peer data), so each URL is written as ``repr``
writes it: no escape sequence or bidirectional override reaches a terminal or a log."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from mcp_trio import OAuthError
from mcp_trio._oauth import Authorizer


class Nowhere:
    """An authorizer whose fetches all answer 404."""

    _loopback = False
    fetched: list[str]

    async def _fetch(self, method: str, url: str, **kwargs: Any) -> tuple[int, list[Any], bytes]:
        await trio.lowlevel.checkpoint()
        self.fetched.append(url)
        return 404, [], b""


async def test_each_tried_url_is_escaped() -> None:
    issuer = "https://as.example/t\x1b[2J\x1b[31menant\u202e"
    nowhere = Nowhere()
    nowhere.fetched = []
    with pytest.raises(OAuthError) as info:
        await Authorizer._discover_server(nowhere, issuer, legacy=False)  # type: ignore[arg-type]
    message = str(info.value)
    assert len(nowhere.fetched) == 3
    assert message.isprintable(), message
    for url in nowhere.fetched:
        assert f"{url!r}: 404" in message

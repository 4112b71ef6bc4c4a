"""``notifications/initialized`` whose POST the server never answers (legacy): lost at
``write_timeout`` with a warning, as any one-way message, and the session goes on (it is
a notification: the session is initialized on the client's side once it is sent)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from .slow_reader_support import LONG
from .test_http_one_way import _client, _echo, _lost, _serve


async def test_a_stuck_initialized_is_lost_alone_and_the_session_goes_on(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server, url = await _serve(nursery, silent="notifications/initialized")
    with trio.fail_after(LONG):
        began = trio.current_time()
        async with _client(url, "legacy") as client:
            assert await _echo(client, "after") == "after"
            # (The handshake waited nine tenths of write_timeout for it, not the whole
            # of it: the writer's own bound, which ended the session.)
            assert trio.current_time() - began == pytest.approx(4.5)
            assert client.close_reason is None
            while not _lost(caplog):
                await trio.sleep(0.5)
            assert await _echo(client, "later") == "later"
            assert client.close_reason is None
            assert _lost(caplog) == [
                "HTTP: a one-way message was lost: sending it timed out after 5 s"
            ]
    assert [(m, s) for m, _, s in server.one_way()][:1] == [("notifications/initialized", 0)]

"""``open_client(on_notification=)``: the notifications no other callback takes, as
``BlockingClient``'s ``on_notification`` gets them, in both eras."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from mcp_sansio import Era
from mcp_trio import Handlers, NotificationContext, NotificationReceived
from mcp_trio._client import open_client
from mcp_trio._client_callbacks import Callbacks

from .client_server_app import make_handlers
from .client_server_app import server_config as app_config

ERAS = (Era.LEGACY, Era.MODERN)
TOOLS_CHANGED = "notifications/tools/list_changed"


def server() -> Any:
    return make_handlers(None), app_config()


def methods(seen: list[NotificationReceived]) -> list[str]:
    return [note.method for note in seen]


@pytest.mark.parametrize("era", ERAS)
async def test_log_messages_reach_on_notification_without_on_log(
    era: Era, autojump_clock: MockClock
) -> None:
    seen: list[NotificationReceived] = []
    async with open_client(
        server(), era=era, log_level="debug", on_notification=seen.append
    ) as client:
        await client.call_tool("log")
        await trio.testing.wait_all_tasks_blocked()
    assert methods(seen) == ["notifications/message"] * 3
    assert all(isinstance(note, NotificationReceived) for note in seen)
    assert [note.params["data"] for note in seen if note.params] == [
        {"said": "debug"},
        {"said": "info"},
        {"said": "error"},
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_on_log_takes_the_log_messages(era: Era, autojump_clock: MockClock) -> None:
    seen: list[NotificationReceived] = []
    logged: list[str] = []

    async def on_log(params: Any) -> None:
        logged.append(params.level)

    async with open_client(server(), era=era, on_log=on_log, on_notification=seen.append) as client:
        await client.call_tool("log")
        await trio.testing.wait_all_tasks_blocked()
    assert logged == ["debug", "info", "error"]
    assert seen == []


async def test_legacy_notifications_all_reach_it_in_order(autojump_clock: MockClock) -> None:
    seen: list[NotificationReceived] = []
    sent = [
        ("notifications/custom/thing", {"n": 1}),
        (TOOLS_CHANGED, None),
        ("notifications/resources/updated", {"uri": "file:///a"}),
        ("notifications/custom/thing", {"n": 2}),
    ]
    async with (
        open_client(server(), era="legacy", on_notification=seen.append) as client,
        client.subscribe(tools=True) as updates,
    ):
        for method, params in sent:
            await client.call_tool("notify", {"method": method, "params": params})
        await trio.testing.wait_all_tasks_blocked()
        # A subscription gets its own copy of what it asked for.
        assert updates.receive_nowait().method == TOOLS_CHANGED
    assert [(note.method, note.params) for note in seen] == sent


async def test_modern_subscription_notifications_are_the_subscriptions(
    autojump_clock: MockClock,
) -> None:
    seen: list[NotificationReceived] = []
    async with (
        open_client(server(), era="modern", on_notification=seen.append) as client,
        client.subscribe(tools=True) as updates,
    ):
        await client.call_tool("notify", {"method": TOOLS_CHANGED, "params": None})
        with trio.fail_after(5):
            assert (await updates.receive()).method == TOOLS_CHANGED
        await trio.testing.wait_all_tasks_blocked()
    assert seen == []


@pytest.mark.parametrize("era", ERAS)
async def test_a_failing_on_notification_is_logged_and_the_session_goes_on(
    era: Era, autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    def on_notification(note: NotificationReceived) -> None:
        calls.append(note.method)
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="mcp_trio"):
        async with open_client(
            server(), era=era, log_level="debug", on_notification=on_notification
        ) as client:
            await client.call_tool("log")
            await trio.testing.wait_all_tasks_blocked()
            assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"
    assert calls == ["notifications/message"] * 3
    failures = [r for r in caplog.records if "on_notification failed" in r.getMessage()]
    assert len(failures) == 3
    assert failures[0].exc_info is not None and "boom" in str(failures[0].exc_info[1])


async def test_a_notification_of_a_listen_is_not_passed_on() -> None:
    # Modern: whatever arrives on a subscriptions/listen (a custom method included)
    # belongs to that subscription; the others are passed on.
    seen: list[NotificationReceived] = []
    callbacks = Callbacks(on_notification=seen.append, capabilities={})
    handlers = Handlers()
    callbacks.install(handlers)
    handler = handlers.notification_handler("notifications/custom/thing")
    assert handler is not None
    session: Any = None
    await handler(NotificationContext(session=session, method="x/a", params=None))
    await handler(
        NotificationContext(session=session, method="x/b", params=None, subscription_id=7)
    )
    assert methods(seen) == ["x/a"]
    assert Handlers().notification_handler("x/a") is None


async def test_an_async_on_notification_is_refused_at_open() -> None:
    async def on_notification(note: NotificationReceived) -> None:  # pragma: no cover
        pass

    class Caller:
        async def __call__(self, note: NotificationReceived) -> None:  # pragma: no cover
            pass

    for given in (on_notification, Caller()):
        with pytest.raises(TypeError, match="on_notification must be a plain function"):
            async with open_client(server(), on_notification=given):
                pytest.fail("opened")  # pragma: no cover


async def test_an_awaitable_returned_is_closed_and_logged(
    caplog: pytest.LogCaptureFixture, autojump_clock: MockClock
) -> None:
    made: list[Any] = []

    async def later() -> None:  # pragma: no cover (closed, never run)
        pass

    def on_notification(note: NotificationReceived) -> Any:
        made.append(later())
        return made[-1]

    with caplog.at_level(logging.ERROR, logger="mcp_trio"):
        async with open_client(server(), era=Era.LEGACY, on_notification=on_notification) as client:
            await client.call_tool("notify", {"method": TOOLS_CHANGED})
            await trio.testing.wait_all_tasks_blocked()
    (coroutine,) = made
    assert coroutine.cr_frame is None  # (closed: no "never awaited" warning)
    assert "on_notification returned an awaitable, which is not awaited" in caplog.text


async def test_a_failing_on_notification_logs_a_clipped_method(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The method is the server's to choose: the log line names it clipped.
    def on_notification(note: NotificationReceived) -> None:
        raise RuntimeError("boom")

    method = "x/" + "A" * 100_000
    async with open_client(server(), era="legacy", on_notification=on_notification) as client:
        await client.call_tool("notify", {"method": method, "params": None})
        await trio.testing.wait_all_tasks_blocked()
    (failure,) = [
        r.getMessage() for r in caplog.records if "on_notification failed" in r.getMessage()
    ]
    assert failure.startswith("on_notification failed (for 'x/AAA")
    assert len(failure) < 1_000 and failure.endswith("more characters)')")

"""``BlockingClient.subscribe()``: change notifications in a ``with`` block, both eras,
against a real server process (``blocking_server_app.py``, stdio)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_sansio import (
    Era,
    NotificationReceived,
    RemoteProtocolError,
    RequestId,
    SubscriptionNotificationReceived,
)
from mcp_trio import McpError, _blocking
from mcp_trio._blocking import BlockingClient
from mcp_trio._blocking_subscriptions import BlockingSubscription
from mcp_trio._client_common import MAX_UNREAD

from .test_blocking_client import TIMEOUT, spawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="select() on pipes is POSIX")

TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
UPDATED = "notifications/resources/updated"


@pytest.fixture(scope="module", params=["modern", "legacy"])
def client(request: pytest.FixtureRequest) -> Iterator[BlockingClient]:
    with spawn(era=request.param) as opened:
        yield opened


def notify(client: BlockingClient, method: str, params: dict[str, str] | None = None) -> None:
    client.call_tool("notify", {"method": method, "params": params})


def test_what_was_asked_for_arrives_merged_and_the_rest_not(client: BlockingClient) -> None:
    with client.subscribe(tools=True, resources=["file:///a"]) as updates:
        assert updates.honored["toolsListChanged"] is True
        assert updates.honored["resourceSubscriptions"] == ["file:///a"]
        assert (updates.subscription_id is not None) is (client.era is Era.MODERN)
        notify(client, PROMPTS)  # (not asked for)
        notify(client, TOOLS)
        notify(client, TOOLS)  # (merged with the one unread)
        notify(client, UPDATED, {"uri": "file:///a"})
        notify(client, UPDATED, {"uri": "file:///other"})
        got = [updates.receive(timeout=TIMEOUT) for _ in range(2)]
        assert [(n.method, (n.params or {}).get("uri")) for n in got if n] == [
            (TOOLS, None),
            (UPDATED, "file:///a"),
        ]
        with pytest.raises(TimeoutError):
            updates.receive(timeout=0)
        notify(client, TOOLS)  # (the subscription went on)
        note = updates.receive(timeout=TIMEOUT)
        assert note is not None and note.method == TOOLS
    assert updates.ended and updates.end_reason == "the subscription was closed"
    assert updates.receive() is None
    assert client._listens == {} and client._subscriptions == [] and client._uri_refs == {}
    assert client.connection.pending_requests() == ()  # (the listen was cancelled)
    # Nothing is delivered to a closed block; the client goes on.
    notify(client, TOOLS)
    assert client.call_tool("echo", {"text": "x"}).text == "x"


def test_modern_iteration_ends_when_the_server_ends_the_listen() -> None:
    with spawn(era="modern") as client, client.subscribe(tools=True) as updates:
        notify(client, TOOLS)
        client.call_tool("end_subscriptions")
        note = updates.receive(timeout=TIMEOUT)
        assert note is not None and note.method == TOOLS
        assert updates.receive(timeout=TIMEOUT) is None
        assert list(updates) == []  # (iteration is over)
        assert updates.end_reason == "the server ended the subscription"
        assert client._listens == {}


def test_legacy_overlapping_blocks_share_one_resource_subscription() -> None:
    notes: list[NotificationReceived] = []
    with spawn(era="legacy", on_notification=notes.append) as client:
        with client.subscribe(resources=["file:///a"]) as outer:
            with client.subscribe(resources=["file:///a"]) as inner:
                assert client._uri_refs == {"file:///a": 2}
                notify(client, UPDATED, {"uri": "file:///a"})
                assert outer.receive(timeout=TIMEOUT) == inner.receive(timeout=TIMEOUT)
            assert client._uri_refs == {"file:///a": 1}
        assert client._uri_refs == {}
        # on_notification saw it too, as it sees every legacy notification.
        assert [note.method for note in notes] == [UPDATED]


@pytest.mark.parametrize(
    ("arguments", "raised", "message"),
    [
        ({"name": "sleep", "arguments": {"seconds": 60}}, TimeoutError, "never acknowledged it"),
        ({"name": "nope"}, McpError, "no tool 'nope'"),
        ({"name": "echo", "arguments": {"text": "x"}}, RemoteProtocolError, "before ack"),
    ],
)
def test_a_listen_that_is_not_acknowledged_fails_subscribe(
    arguments: dict[str, Any], raised: type[Exception], message: str
) -> None:
    # The listen goes out as a tools/call: never acknowledged, it is answered late
    # (past the timeout: cancelled), with an error, or with a result.
    with spawn(era="modern") as client:
        sent = client._conn.send_request

        def instead(method: str, params: Any, **kwargs: Any) -> RequestId:
            return sent("tools/call", arguments, **kwargs)

        client._conn.send_request = instead  # type: ignore[method-assign,assignment]
        with pytest.raises(raised, match=message), client.subscribe(tools=True, timeout=0.5):
            pytest.fail("not acknowledged")  # pragma: no cover
        client._conn.send_request = sent  # type: ignore[method-assign]
        assert client._listens == {}
        assert client.call_tool("echo", {"text": "y"}).text == "y"


def test_unread_notifications_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    def never(done: object, timeout: float | None) -> None:
        raise AssertionError("no waiting here")

    sub = BlockingSubscription(
        never, tools=False, prompts=False, resource_list=False, resources=["r:"]
    )
    with caplog.at_level(logging.WARNING, logger="mcp_trio"):
        for i in range(MAX_UNREAD + 1):
            sub._put(NotificationReceived(method=UPDATED, params={"uri": f"r:/{i}"}))
    assert len(sub._pending) == MAX_UNREAD
    first = sub.receive()
    assert first is not None and first.params == {"uri": "r:/1"}
    assert "dropped the oldest" in caplog.text


# ---------------------------------------------------------------------- review fixes


def sent_methods(client: BlockingClient, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods ``client.request`` sends from now on (recorded, then sent)."""
    sent: list[str] = []
    request = client.request

    def spy(method: str, params: Any = None, **kwargs: Any) -> Any:
        sent.append(method)
        return request(method, params, **kwargs)

    monkeypatch.setattr(client, "request", spy)
    return sent


def test_legacy_subscribe_resource_is_counted_with_the_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with spawn(era="legacy") as client:
        sent = sent_methods(client, monkeypatch)
        client.subscribe_resource("file:///a")
        client.subscribe_resource("file:///a")  # (held already: nothing sent)
        with client.subscribe(resources=["file:///a"]) as updates:
            assert client._uri_refs == {"file:///a": 2}
        assert sent == ["resources/subscribe"]  # (the explicit one outlives the block)
        notify(client, UPDATED, {"uri": "file:///a"})
        client.unsubscribe_resource("file:///a")
        assert sent[-1] == "resources/unsubscribe" and client._uri_refs == {}
        sent.clear()
        # A block first: subscribe_resource() inside it sends nothing, nor does the
        # block's exit; unsubscribe_resource() does.
        with client.subscribe(resources=["file:///b"]) as updates:
            client.subscribe_resource("file:///b")
            client.unsubscribe_resource("file:///b")  # (the block still holds it)
            client.subscribe_resource("file:///b")
        assert sent == ["resources/subscribe"]
        client.unsubscribe_resource("file:///b")
        assert sent == ["resources/subscribe", "resources/unsubscribe"]
        assert client._uri_refs == {} and updates.ended


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_subscribe_refuses_a_string_of_uris(era: str) -> None:
    with spawn(era=era) as client:
        string = pytest.raises(TypeError, match="URIs must be a list of strings")
        with string, client.subscribe(resources="file:///a"):
            pytest.fail("opened")  # pragma: no cover
        number = pytest.raises(TypeError, match="URI must be a string, not int")
        with number, client.subscribe(resources=[1]):  # type: ignore[list-item]
            pytest.fail("opened")  # pragma: no cover
        assert client._subscriptions == [] and client._listens == {}


def test_an_async_on_notification_is_refused_at_open() -> None:
    async def on_notification(note: NotificationReceived) -> None:  # pragma: no cover
        pass

    with pytest.raises(TypeError, match="on_notification must be a plain function"):
        spawn(era="legacy", on_notification=on_notification)


def test_an_awaitable_on_notification_returns_is_closed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[Any] = []

    async def later() -> None:  # pragma: no cover (closed, never run)
        pass

    def on_notification(note: NotificationReceived) -> Any:
        made.append(later())
        return made[-1]

    with (
        spawn(era="legacy", on_notification=on_notification) as client,
        caplog.at_level(logging.ERROR, logger="mcp_trio"),
    ):
        notify(client, TOOLS)
        assert client.call_tool("echo", {"text": "x"}).text == "x"
    (coroutine,) = made
    assert coroutine.cr_frame is None  # (closed: no "never awaited" warning)
    assert "on_notification returned an awaitable" in caplog.text


def test_a_failure_while_waiting_for_the_ack_cancels_the_listen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with spawn(era="modern") as client:
        wait = client._wait

        def interrupted(done: Any, timeout: float | None) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(client, "_wait", interrupted)
        with pytest.raises(KeyboardInterrupt), client.subscribe(tools=True):
            pytest.fail("opened")  # pragma: no cover
        monkeypatch.setattr(client, "_wait", wait)
        assert client._listens == {}
        assert client.call_tool("echo", {"text": "y"}).text == "y"
        assert client.connection.pending_requests() == ()  # (cancelled on the wire)


def test_the_server_cancelling_a_listen_ends_it() -> None:
    def cancelled(sid: RequestId) -> SubscriptionNotificationReceived:
        return SubscriptionNotificationReceived(
            subscription_id=sid, method="notifications/cancelled", params={"reason": "x"}
        )

    with spawn(era="modern") as client, client.subscribe(tools=True) as updates:
        assert updates.subscription_id is not None
        client._listened(cancelled(updates.subscription_id))
        assert client._listens == {}
        assert updates.receive(timeout=0) is None  # (ended, not failed)
        assert updates.end_reason == "the server cancelled the subscription"
        # Cancelled before it was acknowledged: a failure.
        pending = BlockingSubscription(
            client._wait, tools=True, prompts=False, resource_list=False, resources=()
        )
        client._listens["early"] = pending
        client._listened(cancelled("early"))
        assert client._listens == {} and pending.ended
        with pytest.raises(RemoteProtocolError, match="before acknowledging"):
            pending.receive(timeout=0)


def test_legacy_honors_only_what_the_server_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    with spawn(era="legacy") as client:
        sent = sent_methods(client, monkeypatch)
        declared = {"tools": {"listChanged": True}, "prompts": {}, "resources": {}}
        monkeypatch.setattr(client._conn, "_peer_capabilities", declared)
        asked = {"tools": True, "prompts": True, "resource_list": True}
        with client.subscribe(**asked, resources=["file:///a"]) as updates:
            assert updates.honored == {"toolsListChanged": True}
        assert sent == []  # (no resources.subscribe: no resources/subscribe)
        declared["resources"] = {"subscribe": True, "listChanged": True}
        with client.subscribe(**asked, resources=["file:///a"]) as updates:
            assert updates.honored == {
                "toolsListChanged": True,
                "resourcesListChanged": True,
                "resourceSubscriptions": ["file:///a"],
            }
        assert sent == ["resources/subscribe", "resources/unsubscribe"]


def test_legacy_a_failed_resources_subscribe_is_undone(monkeypatch: pytest.MonkeyPatch) -> None:
    with spawn(era="legacy") as client:
        request = client.request
        sent: list[tuple[str, Any]] = []

        def failing(method: str, params: Any = None, **kwargs: Any) -> Any:
            sent.append((method, params))
            if params == {"uri": "file:///bad"}:
                raise McpError.from_code(-32602, "no such resource")
            return request(method, params, **kwargs)

        monkeypatch.setattr(client, "request", failing)
        with (
            pytest.raises(McpError, match="no such resource"),
            client.subscribe(tools=True, resources=["file:///a", "file:///bad"]),
        ):
            pytest.fail("opened")  # pragma: no cover
        assert client._subscriptions == [] and client._uri_refs == {}
        assert sent[-1] == ("resources/unsubscribe", {"uri": "file:///a"})


def test_the_ack_wait_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_blocking, "_LISTEN_ACK_TIMEOUT", 0.3)  # (30 s: too long to wait)
    with spawn(era="modern") as client:
        sent = client._conn.send_request

        def instead(method: str, params: Any, **kwargs: Any) -> RequestId:
            return sent("tools/call", {"name": "sleep", "arguments": {"seconds": 60}}, **kwargs)

        monkeypatch.setattr(client._conn, "send_request", instead)
        with (
            pytest.raises(TimeoutError, match=r"waited 0\.3 s"),
            client.subscribe(tools=True, timeout=60),
        ):
            pytest.fail("opened")  # pragma: no cover
        assert client._listens == {}

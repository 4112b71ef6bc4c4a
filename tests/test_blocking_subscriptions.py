"""``BlockingClient.subscribe()``: change notifications in a ``with`` block, both eras,
against a real server process (``blocking_server_app.py``, stdio)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_sansio import Era, NotificationReceived, RemoteProtocolError, RequestId
from mcp_trio import McpError
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

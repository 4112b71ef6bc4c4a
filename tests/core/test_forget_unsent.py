"""``Connection.forget_request`` for a request the peer never received.

A binding that takes back a request none of which was written (``mcp_trio``'s
writer) tells the core with ``forget_request``: nothing goes out for it, ever, and
everything it held is free (its place against ``max_pending_requests``, its timer,
its progress token). Whatever the peer sends naming it is dropped.
"""

from __future__ import annotations

from typing import Literal

import pytest

from mcp_sansio import (
    LocalProtocolError,
    ProgressReceived,
    ResponseIgnored,
)
from mcp_sansio._json import dumps

from .helpers import handshaken


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_forgotten_unsent_request_leaves_nothing_behind(
    era: Literal["legacy", "modern"],
) -> None:
    pair = handshaken(era, max_pending_requests=1)
    client = pair.client
    rid = client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True, timeout=5)
    assert client.next_deadline() == 5
    client.data_to_send()  # (the binding takes it back before writing it)
    client.forget_request(rid)
    assert client.data_to_send() == []  # no notifications/cancelled: never issued
    assert client.pending_requests() == () and client.next_deadline() is None
    assert client.handle_timer(10.0) == [] and client.data_to_send() == []
    with pytest.raises(LocalProtocolError):
        client.cancel_request(rid)  # (nothing to cancel any more)
    # What the peer might send naming it is dropped, and answered with nothing.
    progress = {"progressToken": rid, "progress": 1}
    events = client.receive_message(
        dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}),
        now=1.0,
    )
    assert not any(isinstance(e, ProgressReceived) for e in events)
    events = client.receive_message(dumps({"jsonrpc": "2.0", "id": rid, "result": {}}), now=1.0)
    assert [type(e) for e in events] == [ResponseIgnored]
    assert client.data_to_send() == []
    # Its place is free (max_pending_requests=1).
    client.send_request("tools/list", now=1.0)

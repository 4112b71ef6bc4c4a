"""What ``send_result`` checks and fits in a legacy answer follows the session's revision.

The methods whose answer is checked (a client's ``elicitation/create``, against its form)
or fitted to the negotiated revision (``RESULTS_FITTED``, in a revision that lacks some
fields: lifecycle.mdx, both parties "MUST respect the negotiated protocol version") are
settled with the session's version, so that any other answer costs one test. A new
session (``restart_session``) settles them again, for its own revision.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import Connection, ConnectionConfig, LocalProtocolError, RequestReceived
from mcp_sansio._json import loads

from .helpers import SERVER_CAPS, handshaken


def server(version: str) -> Connection:
    config = ConnectionConfig(
        implementation={"name": "s", "version": "1"},
        capabilities=SERVER_CAPS,
        supported_versions=(version,),
    )
    return Connection("server", config)


def deliver(sender: Connection, receiver: Connection) -> list[Any]:
    return [e for m in sender.data_to_send() for e in receiver.receive_message(m, now=0.0)]


def asked(server: Connection, client: Connection, method: str, params: Any) -> RequestReceived:
    rid = server.send_request(method, params, now=0.0)
    (request,) = deliver(server, client)
    assert isinstance(request, RequestReceived) and request.request_id == rid
    return request


def fitted(version: str, root: dict[str, Any]) -> dict[str, Any]:
    """``root`` as a session of ``version`` takes it (``Root._meta`` came in 2025-06-18)."""
    return {"uri": root["uri"]} if version in ("2024-11-05", "2025-03-26") else root


@pytest.mark.parametrize(
    ("first", "then"), [("2025-11-25", "2025-03-26"), ("2025-03-26", "2025-11-25")]
)
def test_a_new_sessions_answers_fit_its_revision(first: str, then: str) -> None:
    """A client's ``roots/list`` answer loses a root's ``_meta`` (2025-06-18's) in a
    session of a revision before it, whichever revision the session before had."""
    pair = handshaken("legacy", server={"supported_versions": (first,)})
    client = pair.client
    root = {"uri": "file:///a", "_meta": {"k": 1}}
    request = asked(pair.server, client, "roots/list", {})
    client.send_result(request.request_id, {"roots": [root]})
    (answer,) = client.data_to_send()
    assert loads(answer)["result"]["roots"] == [fitted(first, root)]
    # The server forgot the session: a new one, of the other revision.
    client.restart_session(now=0.0)
    new = server(then)
    for _ in range(2):
        deliver(client, new)
        deliver(new, client)
    assert client.protocol_version == then
    request = asked(new, client, "roots/list", {})
    client.send_result(request.request_id, {"roots": [root]})
    (answer,) = client.data_to_send()
    assert loads(answer)["result"]["roots"] == [fitted(then, root)]


def test_an_elicitation_answer_is_checked_in_a_session_that_fits_nothing() -> None:
    """2025-11-25 lacks no field (nothing is fitted), and the elicitation's answer is
    still held to its form."""
    pair = handshaken("legacy", server={"supported_versions": ("2025-11-25",)})
    form = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = asked(
        pair.server, pair.client, "elicitation/create", {"message": "n?", "requestedSchema": form}
    )
    with pytest.raises(LocalProtocolError, match="cannot send this answer"):
        pair.client.send_result(request.request_id, {"action": "accept", "content": {"n": "x"}})
    pair.client.send_result(request.request_id, {"action": "accept", "content": {"n": 1}})
    (answer,) = pair.client.data_to_send()
    assert loads(answer)["result"] == {"action": "accept", "content": {"n": 1}}

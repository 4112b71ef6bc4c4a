"""A legacy server's ``sampling/createMessage`` and ``elicitation/create`` carry, in their
params, what the client must have declared: no I/O.

* "Servers MUST NOT send tool-enabled sampling requests to Clients that have not
  declared support for tool use via the sampling.tools capability" (2025-11-25
  client/sampling.mdx); "Servers MUST NOT send elicitation requests with modes that are
  not supported by the client" (client/elicitation.mdx; ``elicitation: {}`` is form
  mode). Sending one raises and changes nothing, also after a plain request of the same
  method went out (whose verdict must not be reused for the next one).
* Tool use in sampling and URL mode exist from 2025-11-25: in an earlier session they
  are refused whatever the client declares, as the binding's ``Context`` refuses them.
* What the server may send, the client accepts: the two sides keep one rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import (
    LEGACY_VERSIONS,
    LocalProtocolError,
    RequestReceived,
)

from .helpers import ConnectionPair, handshaken

MODES_FROM = "2025-11-25"  # elicitation modes, and tool use in sampling
ELICITING = ("2025-06-18", "2025-11-25")
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
TOOLS = {**SAMPLE, "tools": [{"name": "x", "inputSchema": {"type": "object"}}]}
TOOL_CHOICE = {**SAMPLE, "toolChoice": {"mode": "auto"}}
FORM = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
URL = {"mode": "url", "message": "Sign in", "url": "https://x.example/a", "elicitationId": "e"}
ANSWERS: dict[str, dict[str, Any]] = {
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "ok"},
        "model": "m",
    },
    "elicitation/create": {"action": "decline"},
}


def ready(version: str, client_caps: dict[str, Any]) -> ConnectionPair:
    pair = handshaken("legacy", capabilities=client_caps, supported_versions=(version,))
    assert pair.server.protocol_version == version
    return pair


def sent(pair: ConnectionPair, method: str, params: dict[str, Any]) -> None:
    """The server sends it, and the client takes it as a request to serve."""
    rid = pair.server.send_request(method, params, now=0.0)
    (received,) = [e for e in pair.deliver(pair.server) if isinstance(e, RequestReceived)]
    assert (received.method, received.params) == (method, params)
    pair.client.send_result(received.request_id, ANSWERS[method])
    pair.deliver(pair.client)
    assert rid not in pair.server.pending_requests()


def refused(pair: ConnectionPair, method: str, params: dict[str, Any], match: str) -> None:
    """The server refuses to send it, and nothing changed: no message, no id used."""
    before = ping(pair)
    pending = pair.server.pending_requests()
    with pytest.raises(LocalProtocolError, match=match):
        pair.server.send_request(method, params, now=0.0)
    assert pair.server.pending_requests() == pending
    assert pair.server.data_to_send() == []
    assert ping(pair) == before + 1


def ping(pair: ConnectionPair) -> int:
    """The id of a ping the server sends and the client answers."""
    rid = pair.server.send_request("ping", now=0.0)
    pair.exchange()
    assert isinstance(rid, int) and rid not in pair.server.pending_requests()
    return rid


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
@pytest.mark.parametrize("plain_first", [False, True], ids=["first", "after-plain"])
@pytest.mark.parametrize("params", [TOOLS, TOOL_CHOICE], ids=["tools", "toolChoice"])
def test_tool_enabled_sampling_needs_sampling_tools(
    version: str, plain_first: bool, params: dict[str, Any]
) -> None:
    pair = ready(version, {"sampling": {}})
    if plain_first:
        sent(pair, "sampling/createMessage", SAMPLE)
    match = "sampling.tools" if version == MODES_FROM else f"does not exist in.*{version}"
    for _ in range(2):  # a refusal is not remembered either
        refused(pair, "sampling/createMessage", params, match)
    sent(pair, "sampling/createMessage", SAMPLE)  # the plain one still goes


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_tool_enabled_sampling_goes_where_it_exists_and_was_declared(version: str) -> None:
    pair = ready(version, {"sampling": {"tools": {}}})
    sent(pair, "sampling/createMessage", SAMPLE)
    for params in (TOOLS, TOOL_CHOICE):
        if version == MODES_FROM:
            sent(pair, "sampling/createMessage", params)
        else:  # (sampling.tools names nothing before 2025-11-25)
            refused(pair, "sampling/createMessage", params, f"does not exist in.*{version}")


@pytest.mark.parametrize("version", ELICITING)
@pytest.mark.parametrize("plain_first", [False, True], ids=["first", "after-form"])
@pytest.mark.parametrize("declared", [{}, {"form": {}}], ids=["empty", "form"])
def test_url_elicitation_needs_url_mode(
    version: str, plain_first: bool, declared: dict[str, Any]
) -> None:
    pair = ready(version, {"elicitation": declared})
    if plain_first:
        sent(pair, "elicitation/create", FORM)
    match = "'url' was not declared" if version == MODES_FROM else f"does not exist in.*{version}"
    for _ in range(2):
        refused(pair, "elicitation/create", URL, match)
    sent(pair, "elicitation/create", FORM)


def test_form_elicitation_needs_form_mode() -> None:
    # A client that declared URL mode only has not declared form mode (a request without
    # a mode is a form one).
    pair = ready(MODES_FROM, {"elicitation": {"url": {}}})
    sent(pair, "elicitation/create", URL)
    for params in (FORM, {"mode": "form", **FORM}):
        refused(pair, "elicitation/create", params, "'form' was not declared")
    sent(pair, "elicitation/create", URL)


def test_both_modes_declared_both_go() -> None:
    pair = ready(MODES_FROM, {"elicitation": {"form": {}, "url": {}}})
    for params in (FORM, URL, {"mode": "form", **FORM}, URL):
        sent(pair, "elicitation/create", params)


def test_url_mode_before_2025_11_25_whatever_is_declared() -> None:
    pair = ready("2025-06-18", {"elicitation": {"form": {}, "url": {}}})
    refused(pair, "elicitation/create", URL, "'url' does not exist in protocol version 2025-06-18")
    sent(pair, "elicitation/create", FORM)


@pytest.mark.parametrize("mode", [["url"], None, 1])
def test_an_elicitation_mode_that_is_no_mode_is_refused(mode: Any) -> None:
    pair = ready(MODES_FROM, {"elicitation": {"form": {}, "url": {}}})
    refused(pair, "elicitation/create", {**FORM, "mode": mode}, "not declared")

"""The ``core`` group's message cases: parse and serialize of each workload, three ways.

For every message of :mod:`benchmarks.workloads` (``request``: the 159-byte ``tools/call``;
``result``: its 1 KB text result; ``tools_list``: the 23 KB ``tools/list`` result with 50
tools; ``resource``: the 1 MiB base64 ``resources/read`` result; ``progress``: a
``notifications/progress``):

``core.loads.<message>`` / ``core.dumps.<message>``
    The floors: ``orjson.loads`` of its bytes, ``orjson.dumps`` of its pre-built dict.
``core.parse.<message>``
    What the core does with the bytes it receives: ``mcp_sansio._jsonrpc.decode`` +
    ``classify`` (the decoded value and its JSON-RPC kind). Reference: ``core.loads``.
``core.serialize.<message>``
    What the core does to send it: build the JSON-RPC envelope around the params or
    result (``_jsonrpc.request`` / ``result_response`` / ``notification``) and dump it.
    Reference: ``core.dumps``.
``core.typed.parse.<message>`` / ``core.typed.serialize.<message>``
    The typed data model (``mcp_sansio.types``, cattrs): bytes to a typed value
    (``loads`` + ``structure``: ``CallToolRequest``, ``CallToolResult``,
    ``ListToolsResult``, ``ReadResourceResult``, ``ProgressNotification``) and back
    (``unstructure`` + envelope + ``dumps``). What an application pays for typed values
    over plain dicts. References: ``core.loads`` / ``core.dumps``.

No targets: these are for reading (the issue's targets are on round trips).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import orjson

from mcp_sansio import structure, unstructure
from mcp_sansio import types as t
from mcp_sansio._jsonrpc import Notification, Request, Response, classify, decode, result_response
from mcp_sansio._jsonrpc import notification as notification_message
from mcp_sansio._jsonrpc import request as request_message

from ._harness import Bench, Case, TimedCase
from .workloads import (
    CALL_TOOL_REQUEST,
    CALL_TOOL_REQUEST_BYTES,
    CALL_TOOL_RESPONSE,
    CALL_TOOL_RESPONSE_BYTES,
    PROGRESS_NOTIFICATION,
    PROGRESS_NOTIFICATION_BYTES,
    READ_RESOURCE_RESPONSE,
    READ_RESOURCE_RESPONSE_BYTES,
    TOOLS_LIST_RESPONSE,
    TOOLS_LIST_RESPONSE_BYTES,
)

__all__ = ["MESSAGES", "SETUPS", "Message", "message_cases"]


def _request_parts(message: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    rid, method, params = message["id"], message["method"], message["params"]
    return lambda: request_message(rid, method, params)


def _result_parts(message: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    rid, result = message["id"], message["result"]
    return lambda: result_response(rid, result)


def _notification_parts(message: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    method, params = message["method"], message["params"]
    return lambda: notification_message(method, params)


_Kind = type[Request] | type[Response] | type[Notification]


class Message:
    """One workload: its bytes, its dict, how the core builds it, its typed class."""

    def __init__(
        self,
        name: str,
        data: bytes,
        message: dict[str, Any],
        kind: _Kind,
        build: Callable[[], dict[str, Any]],
        typed: Any,
    ) -> None:
        self.name = name
        self.data = data
        self.message = message
        self.kind = kind
        self.build = build
        self.typed = typed
        # A response's typed value is its result; a request's or notification's, the
        # whole message.
        self.typed_part = "result" if kind is Response else None


MESSAGES: Final = (
    Message(
        "request",
        CALL_TOOL_REQUEST_BYTES,
        CALL_TOOL_REQUEST,
        Request,
        _request_parts(CALL_TOOL_REQUEST),
        t.CallToolRequest,
    ),
    Message(
        "result",
        CALL_TOOL_RESPONSE_BYTES,
        CALL_TOOL_RESPONSE,
        Response,
        _result_parts(CALL_TOOL_RESPONSE),
        t.CallToolResult,
    ),
    Message(
        "tools_list",
        TOOLS_LIST_RESPONSE_BYTES,
        TOOLS_LIST_RESPONSE,
        Response,
        _result_parts(TOOLS_LIST_RESPONSE),
        t.ListToolsResult,
    ),
    Message(
        "resource",
        READ_RESOURCE_RESPONSE_BYTES,
        READ_RESOURCE_RESPONSE,
        Response,
        _result_parts(READ_RESOURCE_RESPONSE),
        t.ReadResourceResult,
    ),
    Message(
        "progress",
        PROGRESS_NOTIFICATION_BYTES,
        PROGRESS_NOTIFICATION,
        Notification,
        _notification_parts(PROGRESS_NOTIFICATION),
        t.ProgressNotification,
    ),
)
"""The five workloads, in the issue's order."""


def _loads(m: Message) -> Bench:
    data, loads = m.data, orjson.loads

    def run(n: int) -> None:
        for _ in range(n):
            loads(data)

    return Bench(run)


def _dumps(m: Message) -> Bench:
    message, dumps = m.message, orjson.dumps

    def run(n: int) -> None:
        for _ in range(n):
            dumps(message)

    return Bench(run)


def _parse(m: Message) -> Bench:
    data, kind = m.data, m.kind
    assert type(classify(decode(data))) is kind

    def run(n: int) -> None:
        for _ in range(n):
            classify(decode(data))

    return Bench(run)


def _serialize(m: Message) -> Bench:
    build, dumps = m.build, orjson.dumps
    assert dumps(build()) == m.data

    def run(n: int) -> None:
        for _ in range(n):
            dumps(build())

    return Bench(run)


def _typed_parse(m: Message) -> Bench:
    data, cls, part, loads = m.data, m.typed, m.typed_part, orjson.loads
    value = structure(loads(data) if part is None else loads(data)[part], cls)
    assert isinstance(value, cls)

    if part is None:

        def run(n: int) -> None:
            for _ in range(n):
                structure(loads(data), cls)

    else:

        def run(n: int) -> None:
            for _ in range(n):
                structure(loads(data)[part], cls)

    return Bench(run)


def _typed_serialize(m: Message) -> Bench:
    part, dumps = m.typed_part, orjson.dumps
    if part is None:
        value = structure(m.message, m.typed)
        assert orjson.loads(dumps(unstructure(value))) == m.message  # (key order may differ)

        def run(n: int) -> None:
            for _ in range(n):
                dumps(unstructure(value))

    else:
        value = structure(m.message[part], m.typed)
        rid = m.message["id"]
        assert orjson.loads(dumps(result_response(rid, unstructure(value)))) == m.message

        def run(n: int) -> None:
            for _ in range(n):
                dumps(result_response(rid, unstructure(value)))

    return Bench(run)


_KINDS: Final = (
    # (what, setup, its reference's "what"; None for a floor, title)
    ("loads", _loads, None, "floor: orjson loads of the {name} message ({size})"),
    ("parse", _parse, "loads", "core: decode+classify the {name} message"),
    ("typed.parse", _typed_parse, "loads", "typed: loads+structure into {typed}"),
    ("dumps", _dumps, None, "floor: orjson dumps of the {name} message"),
    ("serialize", _serialize, "dumps", "core: build the {name} message's envelope and dump it"),
    ("typed.serialize", _typed_serialize, "dumps", "typed: unstructure {typed} and dump it"),
)
"""The cases of each message, floors before the cases divided by them."""

SETUPS: Final[dict[str, Callable[[Message], Bench]]] = {kind: setup for kind, setup, _, _ in _KINDS}
"""Each kind's setup by its name (group ``sdk`` measures ours with them)."""


def message_cases() -> list[Case]:
    """Every kind of :data:`_KINDS` for every message of :data:`MESSAGES`."""
    return [
        TimedCase(
            name=f"core.{kind}.{m.name}",
            title=title.format(name=m.name, size=f"{len(m.data):,} B", typed=m.typed.__name__),
            setup=functools.partial(setup, m),
            reference=None if floor is None else f"core.{floor}.{m.name}",
        )
        for m in MESSAGES
        for kind, setup, floor, title in _KINDS
    ]

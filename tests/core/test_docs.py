"""What ``help()`` shows of the core's public API: pydoc renders class and function
docstrings, never the attribute docstrings under attrs fields. No I/O."""

from __future__ import annotations

import pydoc
import re
from typing import Any, get_args

import attrs
import pytest

import mcp_sansio
import mcp_sansio.http
from mcp_sansio._json import dumps, loads

# Every public configuration object of the core (a frozen attrs class named *Config).
CONFIGS = [
    value
    for module in (mcp_sansio, mcp_sansio.http)
    for name in module.__all__
    if name.endswith("Config") and attrs.has(value := getattr(module, name))
]


def test_every_public_config_is_checked() -> None:
    names = {cls.__name__ for cls in CONFIGS}
    assert {"ConnectionConfig", "HttpServerConfig", "HttpClientConfig"} <= names


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda cls: cls.__name__)
def test_a_configs_attributes_section_names_every_field(cls: Any) -> None:
    # In sync with the fields: a new field without its line in "Attributes:" fails here.
    doc = cls.__doc__ or ""
    assert "Attributes:" in doc
    section = doc.split("Attributes:", 1)[1].split("Raises:", 1)[0]
    listed = re.findall(r"^        (\w+): ", section, re.M)
    assert listed == [field.name for field in attrs.fields(cls)]
    shown = pydoc.plain(pydoc.render_doc(cls))
    assert all(f"{name}: " in shown for name in listed)  # what help() prints


def test_the_package_docstring_lists_every_event() -> None:
    # help(mcp_sansio.Event) shows UnionType's page: the package docstring says what an
    # Event is, one line for each member of the union, kept in step with it here.
    doc = mcp_sansio.__doc__ or ""
    members = [cls.__name__ for cls in get_args(mcp_sansio.Event)]
    assert members and all(f":class:`{name}`" in doc for name in members)
    assert "not thread-safe" in doc


def test_public_docstrings_point_at_public_names() -> None:
    doc = mcp_sansio.Connection.receive_bytes.__doc__ or ""
    assert "_receive" not in doc and "InvalidMessageReceived" in doc


_MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}


@pytest.mark.parametrize(
    ("era", "method", "params", "served"),
    [
        ("legacy", "ping", {}, True),
        ("legacy", "logging/setLevel", {"level": "info"}, True),
        ("legacy", "server/discover", {}, False),  # -32601: not in the revision
        ("legacy", "tools/list", {}, None),
        ("legacy", "foo/bar", {}, None),
        ("modern", "server/discover", {}, True),
        ("modern", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, True),
        ("modern", "ping", {}, False),
        ("modern", "tools/list", {}, None),
    ],
)
def test_what_the_readme_says_the_core_answers_itself(
    era: str, method: str, params: dict[str, Any], served: bool | None
) -> None:
    # README "Driving the core by hand": served (answered, no event), refused (-32601,
    # reported), or the application's (None: a RequestReceived, nothing sent).
    caps = {"tools": {"listChanged": True}, "logging": {}}
    server = mcp_sansio.Connection("server", mcp_sansio.ConnectionConfig(capabilities=caps))
    if era == "legacy":
        server.receive_message(
            dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _INIT}), now=0.0
        )
        server.receive_message(
            dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), now=0.0
        )
        server.data_to_send()
    else:
        params = {**params, "_meta": _MODERN_META}
    events = server.receive_message(
        dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}), now=0.0
    )
    sent = [loads(p) for p in server.data_to_send()]
    if served is None:
        assert [type(e) for e in events] == [mcp_sansio.RequestReceived] and sent == []
    elif served:
        assert events == [] and sent  # (a listen's answer is its acknowledgement)
        assert all("error" not in m for m in sent)
    else:
        assert [type(e) for e in events] == [mcp_sansio.InvalidMessageReceived]
        assert sent[0]["error"]["code"] == mcp_sansio.ErrorCode.METHOD_NOT_FOUND

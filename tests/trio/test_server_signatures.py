"""``Server.serve_http`` and ``Server.connect_in_memory`` name their keyword arguments,
with their types, so that a type checker catches a misspelt or mistyped one.

The ``type: ignore`` comments below are the test of that half: ``mypy --strict`` (run on
the tests) reports an unused one, so a signature that took ``**options: Any`` again
would fail the type check. The run-time half: a misspelt name is refused at the call.
"""

from __future__ import annotations

import typing

import attrs
import pytest

from mcp_sansio import ConnectionConfig, ConnectionConfigOptions
from mcp_trio._server import Server


async def test_serve_http_refuses_a_misspelt_keyword() -> None:
    server = Server("typo")
    with pytest.raises(TypeError, match="authenticte"):
        await server.serve_http(port=0, authenticte=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="on_session"):  # (serve_websocket's, not this)
        await server.serve_http(port=0, on_session=None)  # type: ignore[call-arg]


async def test_connect_in_memory_refuses_a_misspelt_or_mistyped_keyword() -> None:
    server = Server("typo")
    with pytest.raises(TypeError, match="erra"):
        async with server.connect_in_memory(erra="modern"):  # type: ignore[call-arg]
            pytest.fail("connected")  # pragma: no cover
    with pytest.raises(ValueError, match="era must be one of"):
        async with server.connect_in_memory(era="Modern"):  # type: ignore[arg-type]
            pytest.fail("connected")  # pragma: no cover


def test_connection_config_options_are_connection_config_s_fields() -> None:
    # One key per field of ConnectionConfig, typed as the field is: a field added there
    # must be added here, or connect_in_memory's signature would hide it again.
    fields = {field.name: field.type for field in attrs.fields(ConnectionConfig)}
    hints = ConnectionConfigOptions.__annotations__
    typed = {name: getattr(hint, "__forward_arg__", hint) for name, hint in hints.items()}
    assert typed == fields
    assert ConnectionConfigOptions.__required_keys__ == frozenset()
    assert typing.get_type_hints(ConnectionConfigOptions)  # (every name resolves)

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

"""``mcp_trio``'s lazy exports (PEP 562) report why a submodule failed to import."""

from __future__ import annotations

import types

import pytest

import mcp_trio


def failing_import(exc: Exception) -> types.SimpleNamespace:
    def import_module(name: str, package: str | None = None) -> types.ModuleType:
        raise exc

    return types.SimpleNamespace(import_module=import_module)


def test_an_attribute_error_in_a_submodule_is_not_cannot_import_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An orjson without Fragment made `from mcp_trio import Server` say only "cannot
    # import name 'Server'": Python's import machinery rewrites an AttributeError.
    cause = AttributeError("module 'orjson' has no attribute 'Fragment'")
    monkeypatch.delitem(vars(mcp_trio), "Server", raising=False)
    monkeypatch.setattr(mcp_trio, "importlib", failing_import(cause))
    with pytest.raises(ImportError) as caught:
        exec("from mcp_trio import Server", {})
    assert "has no attribute 'Fragment'" in str(caught.value)
    assert "._server" in str(caught.value)
    assert caught.value.__cause__ is cause
    with pytest.raises(ImportError, match="Fragment"):
        _ = mcp_trio.Server


def test_an_import_error_in_a_submodule_is_raised_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cause = ModuleNotFoundError("No module named 'h11'", name="h11")
    monkeypatch.delitem(vars(mcp_trio), "serve_http", raising=False)
    monkeypatch.setattr(mcp_trio, "importlib", failing_import(cause))
    with pytest.raises(ModuleNotFoundError) as caught:
        exec("from mcp_trio import serve_http", {})
    assert caught.value is cause


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    assert not hasattr(mcp_trio, "NoSuchThing")
    with pytest.raises(ImportError, match="cannot import name 'NoSuchThing'"):
        exec("from mcp_trio import NoSuchThing", {})

"""Users annotate what they hand the library -- a callback, a target, an era, a root --
with the type aliases of its public signatures, so each one is exported by ``mcp_trio``
itself (in ``__all__``, the very object the signature names) and documented where it is
defined (``SamplingCallback``: the ``async def`` it stands for)."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

import mcp_trio
from mcp_sansio import types as t
from mcp_trio import _LAZY, _RENAMED  # (private: the lazy table, its renames)

from .test_public_signatures import BUILT_INTERNALLY, namespace, signatures

CORE_COPIES = {"TaskStatus"}
"""Aliases a core module keeps a copy of (equal, not the same object): mcp_sansio._tasks
has its own TaskStatus, which TaskState names, so that it does not load mcp_sansio.types;
mcp_trio exports the schema's (mcp_sansio.types.TaskStatus). One object once types takes
_tasks' alias; until then an equal one is accepted."""
EXPORTED_AS = {core: ours for ours, core in _RENAMED.items()}
"""The aliases mcp_trio exports under another name (the core's Role as SessionRole)."""


def aliases_named() -> Iterator[tuple[str, str, object]]:
    """(signature, alias name, alias value) for each type alias a public signature of
    ``mcp_trio`` names in its annotations (a capitalised name bound to a generic
    alias, a union, a ``Literal``, a ``Callable``...)."""
    for label, func in signatures():
        if label in BUILT_INTERNALLY:
            continue
        ns = namespace(sys.modules[func.__module__])
        for text in func.__annotations__.values():
            for node in ast.walk(ast.parse(str(text), mode="eval")):
                if isinstance(node, ast.Name) and node.id[0].isupper():
                    value = ns.get(node.id)
                    if typing.get_origin(value) is not None:
                        yield label, node.id, value


def test_every_alias_a_public_signature_names_is_exported_by_mcp_trio() -> None:
    named = list(aliases_named())
    assert {"SamplingCallback", "ClientTarget", "EraChoice", "RequestId"} <= {
        name for _, name, _ in named
    }  # (the scan finds them)
    missing = set()
    for label, name, value in named:
        ours = EXPORTED_AS.get(name, name)
        exported = getattr(mcp_trio, ours, None)
        same = exported == value if name in CORE_COPIES else exported is value
        if ours not in mcp_trio.__all__ or not same:
            missing.add(f"{label}: {name}")
    assert not missing, "\n".join(sorted(missing))


def documented(module: types.ModuleType, name: str) -> bool | None:
    """Whether ``name``'s assignment in ``module`` is followed by a docstring (followed
    through ``from ... import name`` to where it is made; at the top level or in an
    ``if TYPE_CHECKING:`` block, for an alias made at run time on first use, as
    ``SessionHook`` is); ``None``: not found."""
    tree = ast.parse(inspect.getsource(module))
    body = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            body.extend(node.body)
    for i, node in enumerate(body):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, ast.Assign | ast.AnnAssign) and any(
            isinstance(t, ast.Name) and t.id == name for t in targets
        ):
            after = body[i + 1] if i + 1 < len(body) else None
            return isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
    for imported in ast.walk(tree):
        if isinstance(imported, ast.ImportFrom) and any(a.name == name for a in imported.names):
            package = module.__name__ if hasattr(module, "__path__") else module.__package__
            relative = "." * imported.level + (imported.module or "")
            source = importlib.import_module(relative, package)
            return documented(source, name)
    return None


def test_the_aliases_mcp_trio_defines_are_documented() -> None:
    undocumented: list[str] = []
    for name in mcp_trio.__all__:
        where = _LAZY.get(name, "")
        value = getattr(mcp_trio, name)
        if not where.startswith(".") or typing.get_origin(value) is None:
            continue  # (not an alias, or the core's)
        if not documented(importlib.import_module(where, "mcp_trio"), name):
            undocumented.append(name)
    assert not undocumented


def test_the_aliases_annotate_a_users_code() -> None:
    # A callback written apart from the call, annotated (mypy checks this file).
    async def on_sampling(params: t.CreateMessageRequestParams) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    def on_log(params: t.LoggingMessageNotificationParams) -> None:
        pass

    callbacks: tuple[mcp_trio.SamplingCallback, mcp_trio.LogFunction] = (on_sampling, on_log)
    era: mcp_trio.EraChoice = mcp_trio.Era.LEGACY
    target: mcp_trio.ClientTarget = "python server.py"
    rid: mcp_trio.RequestId = 7
    assert callbacks[0] is on_sampling and era == "legacy" and target == "python server.py"
    assert rid == 7 and typing.get_args(mcp_trio.TaskSupport) == ("optional", "required")


def test_a_users_function_annotated_with_the_aliases_has_resolvable_hints() -> None:
    # SessionHook held the string "Session": get_type_hints (pydantic, typer, cattrs,
    # DI frameworks) raised NameError in a module that does not import Session itself.
    def on_session_factory(hook: mcp_trio.SessionHook, role: mcp_trio.SessionRole) -> None:
        pass

    hints = typing.get_type_hints(on_session_factory, globalns={"mcp_trio": mcp_trio})
    assert typing.get_args(hints["hook"])[0] == [mcp_trio.Session]
    for name in mcp_trio.__all__:
        value = getattr(mcp_trio, name)
        if typing.get_origin(value) is not None:
            assert "ForwardRef" not in repr(typing.get_args(value)), name

            # A Callable alias holds its argument types in a list, where a string (the
            # way RequestHandler was written) is no ForwardRef: resolve a user's
            # annotation for real, in a namespace that has only the alias.
            def annotated() -> None:
                pass

            annotated.__annotations__ = {"x": f"mcp_trio.{name}"}
            typing.get_type_hints(annotated, globalns={"mcp_trio": mcp_trio})


def test_the_role_names_say_which_role() -> None:
    # mcp_sansio.Role (the session's: client or server) and mcp_sansio.types.Role (a
    # message's: assistant or user) share a name; mcp_trio exports the session's as
    # SessionRole, and no Role that a sampling callback's author would mistake.
    assert typing.get_args(mcp_trio.SessionRole) == ("client", "server")
    assert not hasattr(mcp_trio, "Role")
    assert mcp_trio.TaskStatus is t.TaskStatus  # (the schema's, not a private copy)
    assert issubclass(mcp_trio.CallbackAnswerError, ValueError)
    assert "CallbackAnswerError" in mcp_trio.__all__

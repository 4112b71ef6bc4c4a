"""Every type a public signature of ``mcp_trio`` names can be imported by its user.

A class must be exported by ``mcp_trio`` or by a public module of the core
(``mcp_sansio``, ``.types``, ``.http``, ``.skills``); a type alias (``Take``, ``Hold``:
a ``Callable[...]`` that a custom channel is handed; ``SamplingCallback``,
``ClientTarget``...) must be exported by one of them under the name the signature uses,
so that users can annotate what they pass. No exceptions.
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import sys
import types
import typing
from typing import Any

import mcp_sansio
import mcp_sansio.http
import mcp_sansio.skills
import mcp_sansio.types
import mcp_trio

# Made by the library, never by a user: their constructors take internal parts.
BUILT_INTERNALLY = {
    "BlockingClient.__init__",
    "BlockingSubscription.__init__",
    "Client.__init__",
    "Context.__init__",
    "HttpRequestContext.__init__",
    "HttpServeHandle.__init__",
    "ProcessChannel.__init__",
    "RequestContext.__init__",
    "ToolTask.__init__",
    "ToolTask.from_call",
    "WebSocketServeHandle.__init__",
    "OAuth.bind",  # (the HTTP client's hook; returns its runtime state)
}
PUBLIC = [mcp_trio, mcp_sansio, mcp_sansio.types, mcp_sansio.http, mcp_sansio.skills]


def namespace(module: types.ModuleType) -> dict[str, Any]:
    """The module's globals with its ``if TYPE_CHECKING:`` imports run (and the
    ``typing`` and ``collections.abc`` names, which attrs-made ``__init__`` may use)."""
    ns = {**vars(typing), **vars(collections.abc), **vars(module)}
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            block = ast.Module(body=node.body, type_ignores=[])
            exec(compile(block, module.__name__, "exec"), ns)
    return ns


def signatures() -> typing.Iterator[tuple[str, Any]]:
    for name in mcp_trio.__all__:
        obj = getattr(mcp_trio, name)
        if inspect.isclass(obj):
            for key, attr in [("__init__", obj.__init__), *vars(obj).items()]:
                member = attr.fget if isinstance(attr, property) else attr
                member = getattr(member, "__func__", member)
                if inspect.isfunction(member) and (key == "__init__" or key[0] != "_"):
                    yield f"{name}.{key}", member
        elif inspect.isfunction(obj):
            yield name, inspect.unwrap(obj)


def classes_in(hint: Any) -> typing.Iterator[type]:
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        yield hint
    for arg in typing.get_args(hint):
        yield from classes_in(arg)
    if isinstance(hint, list):  # (Callable's argument list)
        for arg in hint:
            yield from classes_in(arg)


def test_public_signatures_name_only_importable_types() -> None:
    exported = {id(getattr(m, n)) for m in PUBLIC for n in dir(m) if not n.startswith("_")}
    unreachable: set[str] = set()
    for label, func in signatures():
        if label in BUILT_INTERNALLY:
            continue
        ns = namespace(sys.modules[func.__module__])
        for hint in typing.get_type_hints(func, globalns=ns).values():
            for cls in classes_in(hint):
                ours = cls.__module__.split(".")[0] in ("mcp_trio", "mcp_sansio")
                where = f"{cls.__module__}.{cls.__qualname__}"
                if ours and id(cls) not in exported:
                    unreachable.add(f"{label}: {where}")
        for text in func.__annotations__.values():
            for node in ast.walk(ast.parse(str(text), mode="eval")):
                if not isinstance(node, ast.Name):
                    continue
                value = ns.get(node.id)
                alias = typing.get_origin(value) is not None and node.id[0].isupper()
                # (mcp_sansio._tasks' TaskStatus is an equal copy of the schema's, which
                # mcp_trio exports: see CORE_COPIES in test_public_aliases)
                copy = node.id == "TaskStatus" and value == mcp_trio.TaskStatus
                if (
                    alias
                    and not copy
                    and all(getattr(m, node.id, None) is not value for m in PUBLIC)
                ):
                    unreachable.add(f"{label}: alias {node.id}")
    assert not unreachable, "\n".join(sorted(unreachable))


def test_a_custom_channel_can_annotate_its_hooks() -> None:
    # MessageChannel.attach_reader / attach_holds hand a channel these callables.
    assert "Take" in mcp_trio.__all__ and "Hold" in mcp_trio.__all__
    seen: list[tuple[tuple[mcp_sansio.RequestId, ...], bool]] = []

    def take(message: bytes) -> bool:
        return False

    def held(ids: tuple[mcp_sansio.RequestId, ...], holding: bool) -> None:
        seen.append((ids, holding))

    hooks: tuple[mcp_trio.Take, mcp_trio.Hold] = (take, held)
    assert hooks[0](b"{}") is False
    hooks[1]((1,), True)
    assert seen == [((1,), True)]
    assert mcp_trio.NotificationReceived is mcp_sansio.NotificationReceived

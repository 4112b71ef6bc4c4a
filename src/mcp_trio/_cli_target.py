"""What the ``mcp-trio`` commands point at: a server to load, or a server to connect to.

``run`` takes a *server spec*: ``path/to/file.py[:name]`` or ``package.module[:name]``,
where ``name`` (default: ``server``, or the module's only :class:`~mcp_trio.Server`) is
an attribute holding a ``Server``, or a function returning one.

``list`` and ``call`` take a server spec too (the server is loaded and connected to in
memory), or a URL (``http(s)://``, ``ws(s)://``), or a command line (``"python
server.py"``: anything with a space, or a program on ``PATH``) to spawn and speak to over
stdio. Which is which is decided here, in this order: URL, an existing ``.py`` file, a
command with arguments, a ``.py`` path, an existing path (a program), a bare word (no
``.``, ``:`` or ``/``) that names a program on ``PATH``, an importable module (those of
the current directory first, as with ``python -m``), a program on ``PATH``.

A bare word is the program before it is a module: ``mcp-trio list notes`` run in a
directory that holds ``notes.py`` (an untrusted checkout, say) spawns the ``notes`` on
``PATH`` and does not import that file, which would run its code. A file of the current
directory is named with its suffix or as a path: ``notes.py``, ``./notes``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Final

from ._cli_util import CliError, UsageError
from ._server import Server
from ._util import is_url, stdout_fd_to_stderr

__all__ = ["client_target", "load_server", "split_spec"]

_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DOTTED_NAME: Final = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""A module name, or an attribute path in it."""


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"a/b.py:app"`` -> ``("a/b.py", "app")``; no attribute -> ``(spec, None)``.

    The colon must be followed by a Python name, so ``C:\\x.py`` stays whole.
    """
    where, colon, attribute = spec.rpartition(":")
    if colon and where and _DOTTED_NAME.match(attribute):
        return where, attribute
    return spec, None


def load_server(spec: str) -> Server:
    """Import the server a spec names (see the module docstring).

    Whatever the module prints while it is imported goes to stderr: stdout may be the
    protocol's.

    Raises:
        CliError: no such file or module, it failed to import, or it holds no server.
    """
    where, attribute = split_spec(spec)
    with stdout_fd_to_stderr(), contextlib.redirect_stdout(sys.stderr):
        if where.endswith(".py") or os.sep in where or "/" in where:
            module = _import_file(Path(where))
        elif _DOTTED_NAME.match(where):
            module = _import_module(where)
        else:
            raise CliError(f"{spec!r} is neither a .py file nor a module name")
        return _pick_server(module, attribute, where)


def client_target(text: str) -> str | Server:
    """What ``open_client`` should connect to for a ``list``/``call`` target.

    Returns:
        the URL, the command line, or the loaded server (in memory).

    Raises:
        UsageError: an empty target or a URL scheme we do not speak.
        CliError: a file or module that does not load, or nothing by that name.
    """
    text = text.strip()
    if not text:
        raise UsageError("the target is empty")
    if is_url(text):
        scheme, rest = text.split("://", 1)
        return f"{scheme.lower()}://{rest}"
    if _SCHEME.match(text):
        raise UsageError(f"unsupported URL {text!r} (use http://, https://, ws:// or wss://)")
    where, attribute = split_spec(text)
    if where.endswith(".py") and Path(where).is_file():
        return load_server(text)  # even with spaces in its path
    if any(ch.isspace() for ch in text):
        return text  # a command line: spawned, spoken to over stdio
    if where.endswith(".py"):
        return load_server(text)  # says which file is missing
    if attribute is None and (os.sep in where or "/" in where):
        if Path(where).is_file():
            return text  # a program given by its path
        raise CliError(f"no such file: {where}")
    if attribute is None and "." not in where and shutil.which(text) is not None:
        return text  # a bare word: the program, not ./NAME.py (see the module docstring)
    if _DOTTED_NAME.match(where) and (attribute is not None or _module_exists(where)):
        return load_server(text)
    if attribute is None and shutil.which(text) is not None:
        return text
    raise CliError(f"{text!r} is not a file, a module, a command or a URL")


def _module_exists(name: str) -> bool:
    _cwd_on_path()
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _cwd_on_path() -> None:
    # As `python -m` does: modules of the current directory can be imported.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise CliError(f"no such file: {path}")
    resolved = path.resolve()
    directory = str(resolved.parent)
    # As running the file as a script would: its own directory is importable.
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = resolved.stem
    if not name.isidentifier() or name in sys.modules:
        name = f"_mcp_trio_target_{abs(hash(str(resolved)))}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py path always has one
        raise CliError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise CliError(f"could not import {path}: {_where_it_failed(exc)}") from exc
    return module


def _import_module(name: str) -> ModuleType:
    _cwd_on_path()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise CliError(f"no such module: {name} (and no file {name!r})") from exc
        raise CliError(f"could not import {name}: {_where_it_failed(exc)}") from exc
    except Exception as exc:
        raise CliError(f"could not import {name}: {_where_it_failed(exc)}") from exc


def _where_it_failed(exc: BaseException) -> str:
    """``Type: message (file, line n)`` at the innermost frame (the user's code)."""
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        what = f"{type(exc).__name__}: {exc.msg}"
        if exc.filename and exc.lineno:
            return f"{what} ({exc.filename}, line {exc.lineno})"
        return what
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        return f"{what} ({last.filename}, line {last.lineno})"
    return what  # pragma: no cover - a raised exception has a traceback


def _pick_server(module: ModuleType, attribute: str | None, label: str) -> Server:
    if attribute is None:
        if isinstance(default := getattr(module, "server", None), Server):
            return default
        found = [name for name, value in vars(module).items() if isinstance(value, Server)]
        if len(found) == 1:
            server: Server = getattr(module, found[0])
            return server
        if found:
            names = ", ".join(sorted(found))
            raise CliError(f"{label} holds several servers ({names}); pick one: {label}:NAME")
        raise CliError(f"{label} has no mcp_trio.Server named 'server'; name it: {label}:NAME")
    value: object = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CliError(f"{label} has no attribute {attribute!r}") from None
    if inspect.isfunction(value):
        try:
            value = value()
        except Exception as exc:
            raise CliError(f"{label}:{attribute}() failed: {_where_it_failed(exc)}") from exc
    if not isinstance(value, Server):
        raise CliError(f"{label}:{attribute} is a {type(value).__name__}, not an mcp_trio.Server")
    return value

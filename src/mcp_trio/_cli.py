"""The ``mcp-trio`` command (also ``python -m mcp_trio``).

Commands: ``run`` (serve a server), ``list``, ``call``, ``read`` and ``prompt`` (a
client for people),
``demo`` (the bundled notes server and a client, end to end). The commands live in
``_cli_*.py``; this module parses the command line and turns expected failures into
one line on stderr (see :mod:`mcp_trio._cli_util`): exit status 0 on success, 1 on a
runtime failure, 2 on a usage error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn

import trio

from . import __version__
from ._cli_auth import DEFAULT_REDIRECT_PORT, AuthOptions
from ._cli_client import (
    LIST_KINDS,
    ClientOptions,
    Target,
    call_command,
    list_command,
    list_kind,
    parse_arguments,
    prompt_command,
    read_command,
)
from ._cli_demo import demo
from ._cli_run import configure_logging, serve
from ._cli_target import load_server
from ._cli_util import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    CliError,
    UsageError,
    describe,
    error_line,
)
from ._stdio import closed_stdio

__all__ = ["main", "parse_args"]

EXIT_TERMINATED = 128 + int(signal.SIGTERM)
"""A client command stopped by SIGTERM (after its shutdown), as a shell reports a
process the signal ended."""

_DESCRIPTION = """\
Model Context Protocol on Trio: serve an mcp_trio.Server, or talk to any MCP server.

Start with:  mcp-trio demo
"""

_RUN_EPILOG = """\
TARGET is path/to/file.py[:NAME] or package.module[:NAME]; NAME is the attribute that
holds the mcp_trio.Server (default: "server", or the module's only Server), or a
function that returns one.

examples:
  mcp-trio run examples/notes_server.py
  mcp-trio run examples/notes_server.py --transport http --port 8000
  mcp-trio run myapp.mcp:server --transport ws --port 0
"""

_TARGET_HELP = """\
TARGET is a server file or module (loaded and connected in memory, as for "run"),
a command line in quotes (spawned, spoken to over stdio), or a URL: http(s)://.../mcp
(Streamable HTTP) or ws(s)://.../mcp (WebSocket). A bare word that names a program on
PATH is that program, even where the current directory holds NAME.py: name a file of
the current directory with its suffix or as a path (notes.py, ./notes).
"""

_LIST_EPILOG = (
    _TARGET_HELP
    + """
examples:
  mcp-trio list examples/notes_server.py
  mcp-trio list "python examples/notes_server.py" tools
  mcp-trio list examples/notes_server.py templates
  mcp-trio list http://127.0.0.1:8000/mcp --raw
"""
)

_READ_EPILOG = (
    _TARGET_HELP
    + """
Text is printed as it is; binary contents (blobs) as their size: --out FILE writes
the resource's bytes to FILE ("-": stdout, when it is not a terminal), --raw prints
the JSON result.

examples:
  mcp-trio read examples/notes_server.py notes://index
  mcp-trio read examples/notes_server.py notes://note/1 --out note.md
"""
)

_PROMPT_EPILOG = (
    _TARGET_HELP
    + """
Prompt arguments are strings: --arg KEY=VALUE for each (repeat it).

examples:
  mcp-trio prompt examples/notes_server.py review_note --arg note_id=1
"""
)

_CALL_EPILOG = (
    _TARGET_HELP
    + """
Arguments: --json gives an object; each --arg KEY=VALUE then sets one key. VALUE is
read as JSON when it parses and the tool's schema allows that type (numbers, booleans,
lists, null), otherwise it is a string: --arg limit=3 is a number, --arg title=123
stays "123" for a string parameter.

Progress goes to stderr (a bar on a terminal). When stdin is a terminal, questions the
server asks (elicitation) are answered there. A tool that reports an error exits 1;
when it failed with an internal error, -v shows the server's traceback (a server file
or a command: its logs).

examples:
  mcp-trio call examples/notes_server.py search_notes --arg query=trio --arg limit=3
  mcp-trio call examples/notes_server.py add_note --json '{"title": "t", "body": "b"}'
  mcp-trio call "python examples/notes_server.py" summarize_notes --raw
"""
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (a :class:`UsageError`)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {port}")
    return port


def _path(text: str) -> str:
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(f"the path must start with '/', not {text!r}")
    return text


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if math.isnan(value) or value < 0:
        raise argparse.ArgumentTypeError(f"the timeout must be 0 or more seconds, not {text!r}")
    return None if value == 0 else value


def _any_port(host: str) -> str:
    """``--allow-host NAME`` means that name on any port (``NAME:PORT``: that one)."""
    bracketed = host.startswith("[")
    has_port = host.rsplit("]", 1)[-1].startswith(":") if bracketed else ":" in host
    return host if has_port else f"{host}:*"


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise argparse.ArgumentTypeError(f"not a header 'NAME: VALUE': {text!r}")
    return name.strip(), value.strip()


def _pairs(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--arg KEY=VALUE`` (``-a``), repeated, into ``pairs``."""
    parser.add_argument(
        "--arg",
        "-a",
        dest="pairs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=help_text,
    )


def _client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--era",
        choices=("auto", "legacy", "modern"),
        default="auto",
        help="protocol era: auto probes (server/discover, then initialize) (default: auto)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="give up on a request after this long without an answer or progress; "
        "0: never (default: 60)",
    )
    parser.add_argument(
        "--header",
        "-H",
        dest="headers",
        action="append",
        default=[],
        type=_header,
        metavar="'NAME: VALUE'",
        help="an extra HTTP/WebSocket request header (repeat it), e.g. 'Authorization: Bearer …'",
    )
    _auth_options(parser)
    parser.add_argument("--raw", action="store_true", help="print the JSON result")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress and no server logs on stderr"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show this process's logs and a spawned server's stderr",
    )


def _auth_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "authorization (http(s):// and ws(s):// targets)",
        # (the formatter keeps descriptions as written: lines of help's width)
        "The values of --bearer and --client-secret are visible to other users of this\n"
        "machine (in the process list) and kept in shell history: prefer --bearer-env\n"
        "and --client-secret-env.",
    )
    bearer = group.add_mutually_exclusive_group()
    bearer.add_argument(
        "--bearer", metavar="TOKEN", help="send this bearer token (visible to other local users)"
    )
    bearer.add_argument(
        "--bearer-env", metavar="NAME", help="send the bearer token in the variable NAME"
    )
    group.add_argument(
        "--oauth",
        action="store_true",
        help="authorize with OAuth in the browser (the redirect comes to 127.0.0.1)",
    )
    group.add_argument(
        "--no-browser",
        dest="browser",
        action="store_false",
        help="with --oauth: print the URL to open, do not open a browser",
    )
    group.add_argument(
        "--redirect-port",
        type=_port,
        metavar="PORT",
        help=f"with --oauth: the redirect port; 0 picks a free one and keeps nothing "
        f"between runs (default: {DEFAULT_REDIRECT_PORT})",
    )
    group.add_argument("--client-id", metavar="ID", help="a client registered beforehand")
    secret = group.add_mutually_exclusive_group()
    secret.add_argument(
        "--client-secret",
        metavar="SECRET",
        help="its secret (needs --issuer; visible to other local users); without --oauth: "
        "the client credentials grant",
    )
    secret.add_argument(
        "--client-secret-env", metavar="NAME", help="--client-secret, in the variable NAME"
    )
    group.add_argument(
        "--issuer", metavar="URL", help="the authorization server --client-id is registered at"
    )
    group.add_argument("--scope", help="scopes to ask for when the server does not say")
    group.add_argument(
        "--token-store",
        metavar="FILE",
        help="keep registrations and tokens in FILE (mode 0600), or 'none' (default: "
        "mcp-trio/oauth.json in the user's configuration directory: $XDG_CONFIG_HOME or "
        "~/.config; %%APPDATA%% on Windows)",
    )


def _from_env(flag: str, name: str | None) -> str | None:
    """The value of the variable ``name`` (``--bearer-env NAME``), if a name was given."""
    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        raise UsageError(f"{flag}: the variable {name} is not set")
    return value


def _auth(args: argparse.Namespace) -> AuthOptions:
    # (argparse refuses --bearer with --bearer-env, --client-secret with its -env)
    bearer = _from_env("--bearer-env", args.bearer_env) if args.bearer is None else args.bearer
    secret = args.client_secret
    if secret is None:
        secret = _from_env("--client-secret-env", args.client_secret_env)
    options = AuthOptions(
        bearer=bearer,
        oauth=args.oauth,
        browser=args.browser,
        client_id=args.client_id,
        client_secret=secret,
        issuer=args.issuer,
        scope=args.scope,
        token_store=args.token_store,
        redirect_port=args.redirect_port,
    )
    options.check()
    return options


def build_parser() -> argparse.ArgumentParser:
    """The ``mcp-trio`` argument parser."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(prog="mcp-trio", description=_DESCRIPTION, formatter_class=formatter)
    parser.add_argument("--version", action="version", version=f"mcp-trio {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="serve a server over stdio, HTTP or WebSocket",
        description="Serve an mcp_trio.Server until stdin ends (stdio) or Ctrl-C / SIGTERM.",
        epilog=_RUN_EPILOG,
        formatter_class=formatter,
    )
    run.add_argument("target", metavar="TARGET", help="file.py[:NAME] or module[:NAME]")
    run.add_argument(
        "--transport",
        choices=("stdio", "http", "ws"),
        default="stdio",
        help="stdio (default), http (Streamable HTTP) or ws (WebSocket)",
    )
    # (defaults applied in _dispatch: given with stdio, they are a mistake to point out)
    run.add_argument("--host", help="interface to listen on (default: 127.0.0.1)")
    run.add_argument("--port", type=_port, help="port; 0 picks a free one (default: 8000)")
    run.add_argument("--path", type=_path, help="HTTP endpoint (default: /mcp)")
    run.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        metavar="HOST",
        help="HTTP, WebSocket: a Host name to accept besides localhost's, on any port (repeat it; "
        "'name:443' for one port only), e.g. the public name behind a proxy",
    )
    run.add_argument(
        "--allow-origin",
        dest="allow_origins",
        action="append",
        metavar="ORIGIN",
        help="HTTP, WebSocket: a browser Origin to accept besides localhost's (repeat it; "
        "'https://app.example:*' for any port, '*' for any)",
    )
    run.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="what the server logs to stderr (default: warning)",
    )

    list_ = commands.add_parser(
        "list",
        help="list a server's tools, resources and prompts",
        description="List what an MCP server offers.",
        epilog=_LIST_EPILOG,
        formatter_class=formatter,
    )
    list_.add_argument("target", metavar="TARGET", help="server file/module, command or URL")
    list_.add_argument(
        "kinds",
        metavar="KIND",
        nargs="*",  # no choices=: argparse checks the empty default against them
        help="tools, resources, templates or prompts, singular or plural (default: all "
        "the server offers; resources come with their templates)",
    )
    _client_options(list_)

    call = commands.add_parser(
        "call",
        help="call a tool and print its result",
        description="Call one tool of an MCP server and print its result.",
        epilog=_CALL_EPILOG,
        formatter_class=formatter,
    )
    call.add_argument("target", metavar="TARGET", help="server file/module, command or URL")
    call.add_argument("tool", metavar="TOOL", help="the tool's name")
    _pairs(call, "one argument (repeat it); VALUE is JSON or a string")
    call.add_argument("--json", dest="json_args", metavar="OBJECT", help="all arguments, as JSON")
    _client_options(call)

    read = commands.add_parser(
        "read",
        help="read a resource and print it",
        description="Read one resource of an MCP server (resources/read) and print it.",
        epilog=_READ_EPILOG,
        formatter_class=formatter,
    )
    read.add_argument("target", metavar="TARGET", help="server file/module, command or URL")
    read.add_argument("uri", metavar="URI", help="the resource's URI")
    read.add_argument(
        "--out", "-o", metavar="FILE", help="write its bytes to FILE ('-': stdout, not a terminal)"
    )
    _client_options(read)

    prompt = commands.add_parser(
        "prompt",
        help="get a prompt and print its messages",
        description="Get one prompt of an MCP server (prompts/get) and print its messages.",
        epilog=_PROMPT_EPILOG,
        formatter_class=formatter,
    )
    prompt.add_argument("target", metavar="TARGET", help="server file/module, command or URL")
    prompt.add_argument("prompt", metavar="NAME", help="the prompt's name")
    _pairs(prompt, "one argument (repeat it); VALUE is a string")
    _client_options(prompt)

    demo = commands.add_parser(
        "demo",
        help="run the bundled notes server and a client, and show what they do",
        description="Serve the notes example in this process, connect a client to it, and "
        "print what each MCP feature does. Takes a few seconds.",
    )
    demo.add_argument(
        "--in-memory", action="store_true", help="connect in memory instead of over HTTP"
    )
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    out, err = sys.stdout, sys.stderr
    if args.command == "run":
        given = [
            f"--{name}" for name in ("host", "port", "path") if getattr(args, name) is not None
        ]
        if given and args.transport == "stdio":
            verb = "needs" if len(given) == 1 else "need"
            raise UsageError(f"{', '.join(given)} {verb} --transport http or ws (stdio has none)")
        allowed = [
            f"--{flag}"
            for flag, values in (
                ("allow-host", args.allow_hosts),
                ("allow-origin", args.allow_origins),
            )
            if values
        ]
        if allowed and args.transport == "stdio":
            raise UsageError(f"{', '.join(allowed)}: for --transport http or ws only")
        if args.transport == "stdio" and (closed := closed_stdio()) is not None:
            # (checked before the import: a file it opens would take the free number)
            raise CliError(f"the stdio transport needs stdin and stdout: {closed}")
        server = load_server(args.target)
        configure_logging(args.log_level)  # after the import: a module's own setup wins
        return serve(
            server,
            args.transport,
            host=args.host if args.host is not None else "127.0.0.1",
            port=args.port if args.port is not None else 8000,
            path=args.path if args.path is not None else "/mcp",
            allow_hosts=tuple(_any_port(name) for name in args.allow_hosts or ()),
            allow_origins=tuple(args.allow_origins or ()),
            err=err,
        )
    if args.command in ("list", "call", "read", "prompt"):
        options = ClientOptions(
            era=args.era,
            timeout=args.timeout,
            raw=args.raw,
            quiet=args.quiet,
            verbose=args.verbose,
            headers=tuple(args.headers),
            auth=_auth(args),
        )
        if args.command == "list":
            # "tool" means "tools": forgive the singular.
            kinds = []
            for text in args.kinds:
                kind = list_kind(text)
                if kind is None:
                    known = ", ".join(LIST_KINDS)
                    raise UsageError(f"unknown KIND {text!r} (choose from {known})")
                kinds.append(kind)
            target = _client_target(args.target, options)
            command = functools.partial(
                list_command, target, list(dict.fromkeys(kinds)), options, out, err
            )
            with contextlib.redirect_stdout(err):  # (see below)
                return trio.run(_terminable, command)
        if args.command == "read":
            target = _client_target(args.target, options)
            command = functools.partial(read_command, target, args.uri, args.out, options, out, err)
            with contextlib.redirect_stdout(err):  # (see below)
                return trio.run(_terminable, command)
        if args.command == "prompt":
            _, pairs = parse_arguments(args.pairs, None)
            target = _client_target(args.target, options)
            command = functools.partial(
                prompt_command, target, args.prompt, pairs, options, out, err
            )
            with contextlib.redirect_stdout(err):  # (see below)
                return trio.run(_terminable, command)
        base, pairs = parse_arguments(args.pairs, args.json_args)
        target = _client_target(args.target, options)
        command = functools.partial(call_command, target, args.tool, base, pairs, options, out, err)
        # What a server file's tools print() while served in this process goes to stderr:
        # stdout is for the result alone (`mcp-trio call app.py tool --raw | jq`), and
        # the result is written to ``out``, the real stdout.
        with contextlib.redirect_stdout(err):
            return trio.run(_terminable, command)
    if args.command == "demo":
        return trio.run(functools.partial(demo, out, in_memory=args.in_memory))
    raise UsageError(
        "a command is required: run, list, call, read, prompt or demo (see 'mcp-trio --help')"
    )


class _Terminated(CliError):
    """SIGTERM stopped a client command (after its shutdown: see :func:`_terminable`)."""

    exit_code = EXIT_TERMINATED


async def _terminable(command: Callable[[], Awaitable[int]]) -> int:
    """Run a client command (``list``, ``call``, ``read``, ``prompt``); SIGTERM stops it
    as Ctrl-C does: the command is cancelled, its shutdown runs (a server it spawned is
    stopped, not orphaned), and it exits :data:`EXIT_TERMINATED`. (``run`` handles
    its signals itself.) Only on the main thread: signals go to it alone (Trio refuses
    the receiver elsewhere), so :func:`main` called from another thread (an app's, a
    test's) runs the command as it is.

    Raises:
        _Terminated: SIGTERM came.
    """
    if threading.current_thread() is not threading.main_thread():
        return await command()
    terminated = False
    watching = trio.CancelScope()
    with trio.open_signal_receiver(signal.SIGTERM) as signals, trio.CancelScope() as scope:

        async def watch() -> None:
            nonlocal terminated
            with watching:
                if watching.cancel_called:
                    return  # (the command ended before this task first ran)
                async for _ in signals:
                    terminated = True
                    scope.cancel()
                    return

        # (A system task: a nursery here would wrap the command's errors in a group.
        # It ends before the receiver does, whatever the command did.)
        trio.lowlevel.spawn_system_task(watch)
        try:
            code = await command()
        finally:
            watching.cancel()
    if terminated:
        raise _Terminated("terminated")
    return code


def _client_target(text: str, options: ClientOptions) -> Target:
    target = Target.resolve(text)
    # After the target is imported, so that a server module's own logging setup wins.
    if options.verbose:
        configure_logging("info", safe=True)
    else:
        # A client for people: the library's warnings (and an in-memory server's logs)
        # would break the one-line errors; -v shows them.
        logging.basicConfig(handlers=[logging.NullHandler()])
    return target


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, options anywhere: ``list URL --era legacy tools`` too (argparse
    alone stops taking a ``*`` positional at the first option after it)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "list" and not any(e.startswith("-") for e in extra):
        args.kinds += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-trio`` and ``python -m mcp_trio``; returns the exit status."""
    try:
        return _dispatch(parse_args(argv))
    except SystemExit as exc:  # --help, --version, or sys.exit() in a server module
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return EXIT_FAILURE
    except BaseException as exc:
        if _reader_gone(exc):
            # Our reader went away (`mcp-trio demo | head`): stop quietly, and keep
            # the interpreter's final flush of stdout from failing again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_FAILURE
        if _interrupted(exc):
            error_line("interrupted")
            return EXIT_INTERRUPTED
        problem = describe(exc)
        if problem is None:
            raise
        error_line(problem.message)
        return problem.exit_code


def _reader_gone(exc: BaseException) -> bool:
    """A write to stdout failed with EPIPE, raised directly or out of a Trio nursery
    (with nothing else wrong beside it)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(BrokenPipeError)[1] is None
    return isinstance(exc, BrokenPipeError)


def _interrupted(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(KeyboardInterrupt) is not None
    return isinstance(exc, KeyboardInterrupt)

"""``python -m benchmarks``: run groups, print the table, write JSON, check targets."""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

from ._bytecodes import BytecodeCount, count_bytecodes, report
from ._harness import Case, Result, Settings, Skip, TimedCase, measure, measure_interleaved, resolve
from ._profile import profile
from ._registry import GROUPS, GroupModule, load
from ._report import DASH, environment, failures, markdown, to_json

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Seeded benchmarks of mcp-trio, each figure next to its floor.",
    )
    parser.add_argument(
        "groups",
        nargs="*",
        metavar="GROUP",
        default=["all"],
        help=f"'all' (the default) or group names: {', '.join(GROUPS)}",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 3 short rounds a case (seconds)"
    )
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write results as JSON")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a measured case misses its target"
    )
    parser.add_argument(
        "--rounds", type=int, metavar="N", help="rounds per case (default 7, --quick 3)"
    )
    parser.add_argument(
        "--profile", metavar="CASE", help="profile one timed case (cProfile) instead of a run"
    )
    parser.add_argument(
        "--bytecodes",
        metavar="CASE",
        help="count the Python bytecodes of one operation of a case and of its reference",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        metavar="TEXT",
        help="run only cases whose name contains TEXT (and the floors they divide by)",
    )
    parser.add_argument("--list", action="store_true", help="list the groups and exit")
    return parser


def _selected(names: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    chosen: list[str] = []
    unknown: list[tuple[str, str]] = []
    for name in names:
        if name == "all":
            chosen += [g for g in GROUPS if g not in chosen]
        elif name in GROUPS:
            if name not in chosen:
                chosen.append(name)
        else:
            unknown.append((name, f"unknown group (known: all, {', '.join(GROUPS)})"))
    return chosen, unknown


def _references(case: Case | Skip | None) -> list[str]:
    """The cases ``case`` is divided by: its reference, and its tight floor."""
    if case is None or isinstance(case, Skip):
        return []
    tight = case.tight if isinstance(case, TimedCase) else None
    return [name for name in (case.reference, tight) if name is not None]


def _matching(cases: Sequence[Case | Skip], keyword: str | None) -> list[Case | Skip]:
    """The cases named by ``-k``, plus every reference (and tight floor) they need, in
    the group's order."""
    if keyword is None:
        return list(cases)
    by_name = {case.name: case for case in cases}
    wanted = {case.name for case in cases if keyword in case.name}
    todo = list(wanted)
    while todo:
        for reference in _references(by_name.get(todo.pop())):
            if reference not in wanted:
                wanted.add(reference)
                todo.append(reference)
    return [case for case in cases if case.name in wanted]


def _utf8_safe() -> None:
    # The table uses non-ASCII signs; never die on a terminal that cannot show them.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _list() -> int:
    for group in GROUPS.values():
        loaded = load(group)
        status = "ready" if not isinstance(loaded, str) else f"skipped: {loaded}"
        print(f"{group.name:<10} {group.summary}  [{status}]")
    return 0


def _timed_cases(modules: dict[str, GroupModule], settings: Settings) -> dict[str, TimedCase]:
    return {
        case.name: case
        for module in modules.values()
        for case in module.cases(settings)
        if isinstance(case, TimedCase)
    }


def _profile(name: str, modules: dict[str, GroupModule], settings: Settings) -> int:
    case = _timed_cases(modules, settings).get(name)
    if case is None:
        print(f"no timed case named {name!r} in the selected groups", file=sys.stderr)
        return 2
    print(profile(case, settings.min_round_ns))
    return 0


def _bytecodes(name: str, modules: dict[str, GroupModule], settings: Settings) -> int:
    cases = _timed_cases(modules, settings)
    case = cases.get(name)
    if case is None:
        print(f"no timed case named {name!r} in the selected groups", file=sys.stderr)
        return 2
    try:
        counted = count_bytecodes(case)
    except ValueError as exc:  # (a case timed in another process)
        print(f"--bytecodes: {exc}", file=sys.stderr)
        return 2
    theirs: list[tuple[str, BytecodeCount]] = []
    for reference_name in _references(case):
        reference = cases.get(reference_name)
        kind = "its reference" if reference_name == case.reference else "its tight floor"
        if reference is not None:
            with suppress(ValueError):  # (a reference timed in another process: no ratio)
                theirs.append((kind, count_bytecodes(reference)))
    print(report(counted, *theirs))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    _utf8_safe()
    args = _parser().parse_args(argv)
    if args.list:
        return _list()
    settings = Settings.for_run(quick=args.quick)
    if args.rounds is not None:
        if args.rounds < 1:
            print("--rounds must be at least 1", file=sys.stderr)
            return 2
        settings = Settings(
            rounds=args.rounds, min_round_ns=settings.min_round_ns, quick=settings.quick
        )
    names, unknown = _selected(args.groups)
    if unknown:
        for name, reason in unknown:
            print(f"{name}: {reason}", file=sys.stderr)
        return 2
    if args.json is not None and not args.json.parent.is_dir():
        print(f"--json: no directory {args.json.parent}", file=sys.stderr)
        return 2
    skipped: list[tuple[str, str]] = []
    modules: dict[str, GroupModule] = {}
    for name in names:
        loaded = load(GROUPS[name])
        if isinstance(loaded, str):
            skipped.append((name, loaded))
        else:
            modules[name] = loaded
    if args.profile is not None:
        return _profile(args.profile, modules, settings)
    if args.bytecodes is not None:
        return _bytecodes(args.bytecodes, modules, settings)

    selected = {
        group: _matching(module.cases(settings), args.keyword) for group, module in modules.items()
    }
    if args.keyword is not None and modules and not any(selected.values()):
        print(f"-k {args.keyword}: no case of {', '.join(modules)} matches", file=sys.stderr)
        return 2
    results: list[Result] = []
    errors: list[tuple[str, str]] = []
    done: dict[str, Result] = {}
    for group, cases in selected.items():
        by_name = {case.name: case for case in cases if not isinstance(case, Skip)}
        for case in cases:
            if isinstance(case, Skip):
                skipped.append((case.name, case.reason))
                continue
            print(f"{case.name}: ", end="", file=sys.stderr, flush=True)
            # Measured again in the same rounds: each reference already measured.
            references = [
                reference
                for name in _references(case)
                if name in done
                and type(reference := by_name.get(name)) is type(case)
                and reference is not None
            ]
            paired: list[float] | None = None
            tight: list[float] | None = None
            try:
                if references:
                    figures, iterations, figures_of = measure_interleaved(
                        case, references, settings
                    )
                    of = dict(zip([r.name for r in references], figures_of, strict=True))
                    paired = of.get(case.reference) if case.reference is not None else None
                    tight_name = case.tight if isinstance(case, TimedCase) else None
                    tight = of.get(tight_name) if tight_name is not None else None
                else:
                    figures, iterations = measure(case, settings)
            except Exception as exc:  # one broken case (a dead child, ...) spoils no other
                errors.append((case.name, f"{type(exc).__name__}: {exc}"))
                print(f"failed: {exc!r}", file=sys.stderr)
                continue
            result = resolve(group, case, figures, iterations, done, paired, tight)
            done[case.name] = result
            results.append(result)
            print(f"{result.median:.4g} {result.unit}", file=sys.stderr)

    env = environment(settings)
    print(
        f"mcp-trio benchmarks — Python {env['python']} ({env['implementation']}), "
        f"orjson {env['orjson']}, {env['machine']}; {settings.rounds} rounds of "
        f"≥ {env['min_round_ms']:g} ms; median (min{DASH}max); gc off while timing"
    )
    print()
    if results:
        print(markdown(results))
        print()
    for name, reason in skipped:
        print(f"skipped: {name}: {reason}")
    for name, problem in errors:
        print(f"error: {name}: {problem}")
    missed = failures(results)
    for line in missed:
        print(line)
    if args.json is not None:
        document = to_json(settings, results, skipped, errors)
        args.json.write_text(
            json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return 1 if errors or (args.check and missed) else 0

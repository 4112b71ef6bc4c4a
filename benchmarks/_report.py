"""Turning results into the markdown table, the JSON file and the check verdict."""

from __future__ import annotations

import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from ._harness import Result, Settings, Unit, higher_is_better

__all__ = ["DASH", "TIMES", "environment", "failures", "markdown", "to_json"]

TIMES = "\u00d7"
"""The multiplication sign of ratios (spelled as an escape: ruff's RUF001)."""
DASH = "\u2013"
"""The en dash of ranges."""


def _num(value: float, unit: Unit) -> str:
    if unit in ("calls/s", "KiB"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _figure(value: float, unit: Unit) -> str:
    return f"{_num(value, unit)} {unit}"


def _median(value: float, unit: Unit) -> str:
    """The median cell: a throughput also says what it is per call."""
    if unit == "calls/s" and value > 0:
        return f"{_figure(value, unit)} ({_num(1e6 / value, 'µs')} µs/call)"
    return _figure(value, unit)


def _verdict(ok: bool | None) -> str:
    return {True: "✓", False: "✗ MISSED", None: ""}[ok]


def markdown(results: Sequence[Result]) -> str:
    """The results as a markdown table, each figure next to its reference (and, for the
    cases that have one, its tight floor: the ratio to the honest lower bound)."""
    lines = [
        f"| case | what | median | min {DASH} max | reference (median) | ratio | target | ok "
        "| tight floor (median) | ratio to tight |",
        "| --- | --- | ---: | ---: | --- | ---: | --- | --- | --- | ---: |",
    ]
    for r in results:
        reference = (
            ""
            if r.reference is None or r.reference_median is None
            else f"{r.reference} ({_figure(r.reference_median, r.unit)})"
        )
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}{TIMES}"
        target = "" if r.target is None else r.target.describe(r.unit)
        spread = f"{_num(r.min, r.unit)} {DASH} {_num(r.max, r.unit)}"
        tight = (
            ""
            if r.tight is None or r.tight_median is None
            else f"{r.tight} ({_figure(r.tight_median, r.unit)})"
        )
        tight_ratio = "" if r.tight_ratio is None else f"{r.tight_ratio:.2f}{TIMES}"
        lines.append(
            f"| `{r.name}` | {r.title} | {_median(r.median, r.unit)} | {spread} "
            f"| {reference} | {ratio} | {target} | {_verdict(r.ok)} | {tight} | {tight_ratio} |"
        )
    return "\n".join(lines)


def failures(results: Sequence[Result]) -> list[str]:
    """One line per missed target, and per target that could not be checked (its
    reference has no figure: it failed or was skipped)."""
    missed = []
    for r in results:
        if r.ok is None and r.target is not None:
            missed.append(
                f"target not checked: {r.name}: no figure for its reference {r.reference}"
            )
        elif r.ok is False:
            assert r.target is not None
            figure = (
                f"ratio {r.ratio:.2f}{TIMES}"
                if r.target.on == "ratio"
                else _figure(r.median, r.unit)
            )
            missed.append(
                f"target missed: {r.name}: {figure}, target {r.target.describe(r.unit)} "
                f"({r.target.why})"
            )
    return missed


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment(settings: Settings) -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "orjson": _version("orjson"),
        "mcp-trio": _version("mcp-trio"),
        "rounds": settings.rounds,
        "min_round_ms": settings.min_round_ns / 1e6,
        "quick": settings.quick,
        "gc": "collected, then disabled during each timed round",
    }


def to_json(
    settings: Settings,
    results: Sequence[Result],
    skipped: Sequence[tuple[str, str]],
    errors: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The document ``--json`` writes."""
    return {
        "environment": environment(settings),
        "results": [{**r.to_json(), "higher_is_better": higher_is_better(r.unit)} for r in results],
        "skipped": [{"name": name, "reason": reason} for name, reason in skipped],
        "errors": [{"name": name, "error": error} for name, error in errors],
        "failed": [r.name for r in results if r.ok is not True and r.target is not None],
    }

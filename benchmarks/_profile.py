"""``--profile CASE``: where one timed case spends its time, by module and by function.

cProfile charges a fixed cost to every Python call, so it inflates code made of many
small calls. Read the shares as "where to look", and confirm any change with the
unprofiled figures of a normal run.
"""

from __future__ import annotations

import cProfile
import gc
import pstats
from collections import defaultdict
from typing import Any

from ._harness import TimedCase, calibrate

__all__ = ["profile"]

_Key = tuple[str, int, str]


def _area(key: _Key) -> str:
    filename, _, function = key
    if filename.startswith("<attrs generated"):
        return "attrs-generated __init__ (events, message values, table entries)"
    if "mcp_sansio" in filename:
        return "mcp_sansio/" + filename.rsplit("mcp_sansio", 1)[1].lstrip("/\\")
    if "benchmarks" in filename:
        return "benchmark loop"
    if filename == "~":
        if "orjson" in function:
            return "orjson (dumps/loads)"
        return "builtins (dict/list methods, isinstance, len, ...)"
    return filename.rsplit("/", 1)[-1]


def _where(key: _Key) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    if filename.startswith("<attrs generated"):
        return f"{filename.rsplit(' ', 1)[-1].rstrip('>')}.{function}"
    if "mcp_sansio" in filename:
        filename = "mcp_sansio/" + filename.rsplit("mcp_sansio", 1)[1].lstrip("/\\")
    elif filename.startswith("<"):
        filename = filename.split(" ", 1)[0] + ">"
    else:
        filename = filename.rsplit("/", 1)[-1]
    return f"{filename}:{line}({function})"


def profile(case: TimedCase, min_round_ns: int, top: int = 25) -> str:
    """Profile one calibrated round of ``case``; return a markdown report."""
    bench = case.setup()
    n = calibrate(bench.run, min_round_ns)
    ops = n * case.ops_per_call
    profiler = cProfile.Profile()
    gc.collect()
    gc.disable()
    try:
        profiler.runcall(bench.run, n)
    finally:
        gc.enable()
    raw: dict[_Key, tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    # cProfile lists the profiled callable itself; its own time is the loop glue.
    total = sum(entry[2] for entry in raw.values())
    by_area: dict[str, float] = defaultdict(float)
    for key, entry in raw.items():
        by_area[_area(key)] += entry[2]

    def us(seconds: float) -> str:
        return f"{seconds / ops * 1e6:.3f}"

    lines = [
        f"## profile: `{case.name}` — {case.title}",
        "",
        f"{ops:,} operations profiled; {us(total)} µs/op under the profiler "
        "(cProfile inflates many small calls: compare with the unprofiled table).",
        "",
        "| area | µs/op | share |",
        "| --- | ---: | ---: |",
    ]
    for area, seconds in sorted(by_area.items(), key=lambda item: -item[1]):
        lines.append(f"| {area} | {us(seconds)} | {seconds / total:.0%} |")
    lines += [
        "",
        f"Top {top} functions by own time:",
        "",
        "| function | calls/op | own µs/op | cumulative µs/op | share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    ranked = sorted(raw.items(), key=lambda item: -item[1][2])[:top]
    for key, (_, calls, own, cumulative, _) in ranked:
        lines.append(
            f"| `{_where(key)}` | {calls / ops:.2f} | {us(own)} | {us(cumulative)} "
            f"| {own / total:.1%} |"
        )
    return "\n".join(lines)

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
from typing import Any, Final

from ._harness import TimedCase, calibrate

__all__ = ["STDLIB", "TRIO", "area", "layer", "profile", "where"]

_Key = tuple[str, int, str]


def _package_path(filename: str) -> str | None:
    """``package/module.py`` for a file of ours (wherever the copy is) or under
    site-packages, else ``None``."""
    for marker in ("/mcp_trio/", "/mcp_sansio/"):
        if marker in filename:
            return marker[1:] + filename.rsplit(marker, 1)[1]
    if "site-packages/" in filename:
        return filename.rsplit("site-packages/", 1)[1]
    return None


def area(filename: str, function: str = "") -> str:
    """The module (or kind of code) a profiled or traced function belongs to."""
    if filename.startswith("<attrs generated"):
        package = filename.rsplit(" ", 1)[-1].split(".", 1)[0]
        return f"{package}/ (attrs-generated methods: events, values, table entries)"
    if filename == "~":
        if "orjson" in function:
            return "orjson (dumps/loads)"
        if "select.epoll" in function or "poll" in function:
            return "epoll (the I/O check of each scheduler tick)"
        return "builtins (dict/list methods, isinstance, len, ...)"
    if "/benchmarks/" in filename:
        return "benchmark loop"
    module = _package_path(filename)
    if module is not None:
        return module
    return filename.rsplit("/", 1)[-1]


TRIO: Final = "Trio (scheduler, channels, locks, cancel scopes)"
STDLIB: Final = "standard library (contextlib, collections, ...)"
_LAYERS: Final = (
    ("mcp_trio/", "session runtime (mcp_trio)"),
    ("mcp_sansio/", "core (mcp_sansio)"),
    ("trio/", TRIO),
    ("outcome/", TRIO),
    ("sniffio/", TRIO),
    ("epoll", TRIO),
    ("orjson", "orjson"),
    ("benchmark loop", "benchmark loop"),
)


def layer(module: str) -> str:
    """The layer (session runtime, core, Trio, a third-party package by name, the
    standard library, ...) of what :func:`area` returned."""
    for prefix, name in _LAYERS:
        if module.startswith(prefix):
            return name
    if "/" in module and module.endswith(".py"):
        # A site-packages module (area() keeps its package): h11, wsproto,
        # trio_websocket, attrs, cattrs, ... each under its own name.
        return module.split("/", 1)[0]
    if module.endswith(".py"):
        return STDLIB
    return "other (builtins, other packages)"


def where(key: _Key) -> str:
    """``module:line(function)`` of a profiled or traced function."""
    filename, line, function = key
    if filename == "~":
        return function
    if filename.startswith("<attrs generated"):
        return f"{filename.rsplit(' ', 1)[-1].rstrip('>')}.{function}"
    module = _package_path(filename)
    if module is not None:
        filename = module
    elif filename.startswith("<"):
        filename = filename.split(" ", 1)[0] + ">"
    else:
        filename = filename.rsplit("/", 1)[-1]
    return f"{filename}:{line}({function})"


def profile(case: TimedCase, min_round_ns: int, top: int = 25) -> str:
    """Profile one calibrated round of ``case``; return a markdown report."""
    bench = case.setup()
    try:
        if bench.self_timed:
            raise ValueError(f"{case.name} runs in another process: profile it there")
        n = calibrate(bench.run, min_round_ns)
        ops = n * case.ops_per_call
        profiler = cProfile.Profile()
        gc.collect()
        gc.disable()
        try:
            if bench.in_thread is None:
                profiler.runcall(bench.run, n)
            else:  # the work happens in the case's event-loop thread: profile that one
                bench.in_thread(profiler.enable)
                try:
                    bench.run(n)
                finally:
                    bench.in_thread(profiler.disable)
        finally:
            gc.enable()
    finally:
        if bench.close is not None:
            bench.close()
    raw: dict[_Key, tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    # cProfile lists the profiled callable itself; its own time is the loop glue.
    total = sum(entry[2] for entry in raw.values())
    by_area: dict[str, float] = defaultdict(float)
    by_layer: dict[str, float] = defaultdict(float)
    for key, entry in raw.items():
        module = area(key[0], key[2])
        by_area[module] += entry[2]
        by_layer[layer(module)] += entry[2]

    def us(seconds: float) -> str:
        return f"{seconds / ops * 1e6:.3f}"

    lines = [
        f"## profile: `{case.name}` — {case.title}",
        "",
        f"{ops:,} operations profiled; {us(total)} µs/op under the profiler "
        "(cProfile inflates many small calls: compare with the unprofiled table).",
        "",
        "| layer | µs/op | share |",
        "| --- | ---: | ---: |",
    ]
    for name, seconds in sorted(by_layer.items(), key=lambda item: -item[1]):
        lines.append(f"| {name} | {us(seconds)} | {seconds / total:.0%} |")
    lines += [
        "",
        "| module | µs/op | share |",
        "| --- | ---: | ---: |",
    ]
    for name, seconds in sorted(by_area.items(), key=lambda item: -item[1]):
        lines.append(f"| {name} | {us(seconds)} | {seconds / total:.0%} |")
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
            f"| `{where(key)}` | {calls / ops:.2f} | {us(own)} | {us(cumulative)} "
            f"| {own / total:.1%} |"
        )
    return "\n".join(lines)

"""Every performance target of the project, in one place.

A target is keyed by case name (``<group>.<what>``, see each group's module). Most are a
ratio to the case's *reference* (its floor: the least work any implementation must do,
measured in the same run on the same machine), so they hold on a slow CI runner as well
as on a laptop. ``python -m benchmarks --check`` exits non-zero when one is missed.

The ``ws`` and ``sdk`` groups have no targets: their ratios are for reading.
"""

from __future__ import annotations

from typing import Final, Literal, final

import attrs

__all__ = ["TARGETS", "Target"]


@final
@attrs.frozen(kw_only=True)
class Target:
    """A bound on a case's median, or on its ratio to its reference."""

    on: Literal["ratio", "value"]
    """What is bounded: the ratio to the reference, or the median itself."""
    op: Literal["<=", ">=", "<"]
    """How the bound compares."""
    bound: float
    """The bound."""
    why: str
    """Where the target comes from, for the reader of the report."""

    def met(self, *, median: float, ratio: float | None) -> bool | None:
        """Whether the bound holds; ``None`` when a ratio target has no reference."""
        figure = ratio if self.on == "ratio" else median
        if figure is None:
            return None
        if self.op == "<=":
            return figure <= self.bound
        if self.op == ">=":
            return figure >= self.bound
        return figure < self.bound

    def describe(self, unit: str = "") -> str:
        """The target as the table shows it, e.g. ``≤ 2.5x`` (with a times sign), ``< 1024 KiB``."""
        op = {"<=": "≤", ">=": "≥", "<": "<"}[self.op]
        if self.on == "ratio":
            return f"{op} {self.bound:g}\u00d7"
        return f"{op} {self.bound:g} {unit}".rstrip()

    def to_json(self) -> dict[str, object]:
        """The machine-readable form."""
        return {"on": self.on, "op": self.op, "bound": self.bound, "why": self.why}


def _ratio(op: Literal["<=", ">=", "<"], bound: float, why: str) -> Target:
    return Target(on="ratio", op=op, bound=bound, why=why)


_MIB_IN_KIB: Final = 1024.0

TARGETS: Final[dict[str, Target]] = {
    # -- core (benchmarks/core.py): the pure core against raw orjson ---------------------
    "core.roundtrip.legacy": _ratio(
        "<=", 2.5, "a legacy tools/call round trip through two Connections ≤ 2.5x the floor"
    ),
    "core.roundtrip.modern": _ratio(
        "<=", 2.5, "a modern tools/call round trip through two Connections ≤ 2.5x the floor"
    ),
    "core.dispatch100.legacy": _ratio(
        "<=", 2.5, "per call, 100 in flight ≤ 2.5x the floor, as one at a time (O(1) tables)"
    ),
    "core.dispatch100.modern": _ratio(
        "<=", 2.5, "per call, 100 in flight ≤ 2.5x the floor, as one at a time (O(1) tables)"
    ),
    "core.rss_growth": Target(
        on="value",
        op="<",
        bound=_MIB_IN_KIB,
        why="RSS growth over 10,000 calls < 1 MiB (every table is bounded)",
    ),
    # -- inmemory (benchmarks/inmemory.py): Session over memory channels vs a Trio floor ----
    "inmemory.roundtrip": _ratio(
        "<=", 1.3, "in-memory round trip ≤ 1.3x the Trio floor (memory channels + orjson echo)"
    ),
    "inmemory.roundtrip.100": _ratio(
        "<=", 1.3, "in-memory, 100 in flight, per call ≤ 1.3x the Trio floor at 100 in flight"
    ),
    "inmemory.rss_growth": Target(
        on="value",
        op="<",
        bound=_MIB_IN_KIB,
        why="RSS growth over 10,000 in-memory calls < 1 MiB",
    ),
    # -- stdio (benchmarks/stdio.py): a server child over pipes vs a Trio NDJSON echo -----
    "stdio.calls.1": _ratio(">=", 0.8, "stdio ≥ 0.8x the floor's calls/s at 1 in flight"),
    "stdio.calls.100": _ratio(">=", 0.5, "stdio ≥ 0.5x the floor's calls/s at 100 in flight"),
    "stdio.rss_growth": Target(
        on="value",
        op="<",
        bound=_MIB_IN_KIB,
        why="the server child's RSS growth over 10,000 calls < 1 MiB",
    ),
    # -- http (benchmarks/http.py): Streamable HTTP vs a trio + h11 echo ---------------------
    "http.calls.1": _ratio(">=", 0.8, "HTTP (JSON) ≥ 0.8x the floor's calls/s at 1 in flight"),
    "http.calls.100": _ratio(">=", 0.7, "HTTP (JSON) ≥ 0.7x the floor's calls/s at 100 in flight"),
    "http.calls.sse.1": _ratio(">=", 0.8, "HTTP (SSE) ≥ 0.8x the floor's calls/s at 1 in flight"),
    "http.calls.sse.100": _ratio(
        ">=", 0.7, "HTTP (SSE) ≥ 0.7x the floor's calls/s at 100 in flight"
    ),
    # -- coldstart (benchmarks/coldstart.py) -------------------------------------------------
    "coldstart.stdio": _ratio(
        "<=",
        1.3,
        "spawn → initialize answered ≤ 1.3x a bare trio + orjson interpreter answering a line",
    ),
}
"""Case name → target."""

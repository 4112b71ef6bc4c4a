"""Cases, timing and results: the part every group shares.

Theory of operation
-------------------
A group hands back :class:`Case` values; the harness measures each one in *rounds* and
reports the median and the spread (min to max) over the rounds, never a mean: one
scheduler hiccup should move the max, not the headline figure.

* A :class:`TimedCase` is a ``setup()`` that returns ``run(n)``, a callable doing ``n``
  operations. The harness calibrates ``n`` once so that one round lasts at least
  :attr:`Settings.min_round_ns` (the calibration doubles as warm-up), then times each
  round with :func:`time.perf_counter_ns` and divides by ``n`` (times
  ``ops_per_call``, for cases whose one call does a batch of operations).
* A :class:`SampledCase` measures something that is not a duration (memory, a cold
  start) and returns one figure per round.

The garbage collector is collected, then disabled, around every timed round (and
re-enabled after, also on error), so that a collection triggered by an earlier case's
garbage does not land inside a later case. Everything the core allocates on the hot
path is freed by reference counting; the RSS case checks that nothing accumulates.

A case may name a *reference*: another case of the same group whose median it is
divided by (the "floor"). The reference is then measured again, *paired* with the case
(:func:`measure_paired`): both are set up together and their rounds alternate (reference,
case, case, reference, ...), so that the two medians of a ratio come from the same
seconds of the same machine. On a shared machine the speed drifts by tens of percent
within a minute; measured minutes apart, a floor and its case would each catch a
different drift. Targets are looked up by case name in :mod:`benchmarks.targets`.

A timed case may also name a *tight* floor (:attr:`TimedCase.tight`): the same minimal
echo written with Trio's cheapest calls (no yield where Trio offers a call that does not,
one write for everything queued), the honest lower bound. It is measured in the same
rounds as the case and its reference (:func:`measure_interleaved`: reference, tight,
case, case, tight, reference, ...) and its ratio is reported beside the other; targets
stay on the reference.
"""

from __future__ import annotations

import functools
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Final, Literal, final

import attrs

from .targets import TARGETS, Target

__all__ = [
    "RSS_CALLS",
    "Bench",
    "Case",
    "Result",
    "SampledCase",
    "Settings",
    "Skip",
    "TimedCase",
    "measure",
    "measure_interleaved",
    "measure_paired",
    "resolve",
]

Unit = Literal["µs", "calls/s", "KiB", "ms"]
"""What a figure counts. ``µs`` and ``calls/s`` come from timed cases (µs per operation,
or its inverse); the others from sampled cases."""

_HIGHER_IS_BETTER: Final = frozenset({"calls/s"})

RSS_CALLS: Final = 10_000
"""Calls between two readings of resident memory in the ``*.rss_growth`` cases (and
of their warm-up)."""


@final
@attrs.frozen(kw_only=True)
class Settings:
    """How hard to measure."""

    rounds: int = 7
    """Rounds per case; the median is over these."""
    min_round_ns: int = 50_000_000
    """Calibrate each timed case so that one round lasts at least this long."""
    quick: bool = False
    """Whether this is a ``--quick`` run (groups may shrink their workloads)."""

    @classmethod
    def for_run(cls, *, quick: bool) -> Settings:
        """The defaults of a full run, or of a ``--quick`` smoke run."""
        if quick:
            return cls(rounds=3, min_round_ns=20_000_000, quick=True)
        return cls()


@final
@attrs.frozen
class Bench:
    """What a timed case's ``setup`` returns: the loop to time, and its check."""

    run: Callable[[int], object]
    """Does ``n`` calls. Bind everything it touches to locals first: the loop is timed."""
    check: Callable[[], None] | None = None
    """Called after every round, untimed: asserts the run did what it claims."""
    close: Callable[[], None] | None = None
    """Called once when the case is done (or failed): stops the threads, sessions and
    processes ``setup`` started."""
    in_thread: Callable[[Callable[[], object]], object] | None = None
    """Runs a callable in the thread that does ``run``'s work, when that is not the
    calling thread (a Trio group's event loop): ``--profile`` enables cProfile there."""
    self_timed: bool = False
    """``run(n)`` returns the nanoseconds its timed part took (work done in another
    process, which times itself so that the round trip to it is not counted)."""


@final
@attrs.frozen(kw_only=True)
class TimedCase:
    """A case measured as time per operation."""

    name: str
    """Dotted id, ``<group>.<what>``; the key into :data:`benchmarks.targets.TARGETS`."""
    title: str
    """One line for the table."""
    setup: Callable[[], Bench]
    """Builds the state (untimed) and returns the loop to time."""
    ops_per_call: int = 1
    """Operations one call of ``run`` does (100 for "100 requests in flight")."""
    unit: Unit = "µs"
    """``µs`` per operation, or ``calls/s``."""
    reference: str | None = None
    """Name of the case whose median this one is divided by."""
    tight: str | None = None
    """Name of a second, stricter reference: the same floor written with Trio's cheapest
    calls (a ``*.floor.tight`` case). Measured in the same alternating rounds as the case
    and its reference; its ratio is for reading, targets use :attr:`reference`."""


@final
@attrs.frozen(kw_only=True)
class SampledCase:
    """A case that measures one figure per round by itself (memory, cold start)."""

    name: str
    """Dotted id, ``<group>.<what>``."""
    title: str
    """One line for the table."""
    sample: Callable[[], float]
    """Measures once and returns the figure, in ``unit``."""
    unit: Unit
    """What the figure counts."""
    reference: str | None = None
    """Name of the case whose median this one is divided by."""
    close: Callable[[], None] | None = None
    """Called once after the last sample (or a failed one): stops what ``sample`` kept
    running between samples (a fixture warmed up once)."""
    max_rounds: int | None = None
    """At most this many samples, whatever the settings say (an expensive sample in a
    ``--quick`` run)."""


@final
@attrs.frozen(kw_only=True)
class Skip:
    """A case that cannot run here; the report prints ``skipped: <name>: <reason>``."""

    name: str
    """The case's dotted id."""
    reason: str
    """Why it cannot run, in a few words."""


Case = TimedCase | SampledCase


@final
@attrs.frozen(kw_only=True)
class Result:
    """One measured case, with its reference and target applied."""

    group: str
    """The group that ran it."""
    name: str
    """The case's dotted id."""
    title: str
    """The case's one-line description."""
    unit: Unit
    """What the figures count."""
    median: float
    """Median over the rounds."""
    min: float
    """Smallest round."""
    max: float
    """Largest round."""
    rounds: int
    """How many rounds were run."""
    iterations: int | None
    """Operations per round (timed cases)."""
    reference: str | None = None
    """Name of the reference case, if any."""
    reference_median: float | None = None
    """The reference's median, in its own unit, over the rounds paired with this case's."""
    ratio: float | None = None
    """``median / reference_median``."""
    target: Target | None = None
    """The target for this case, from :mod:`benchmarks.targets`."""
    ok: bool | None = None
    """Whether the target is met; ``None`` when there is no target (or no reference)."""
    tight: str | None = None
    """Name of the tight floor, if the case has one (:attr:`TimedCase.tight`)."""
    tight_median: float | None = None
    """The tight floor's median over the rounds paired with this case's."""
    tight_ratio: float | None = None
    """``median / tight_median``: the ratio to the honest lower bound (no target)."""

    def to_json(self) -> dict[str, object]:
        """The machine-readable form written by ``--json``."""
        return {
            "group": self.group,
            "name": self.name,
            "title": self.title,
            "unit": self.unit,
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "rounds": self.rounds,
            "iterations": self.iterations,
            "reference": self.reference,
            "reference_median": self.reference_median,
            "ratio": self.ratio,
            "target": None if self.target is None else self.target.to_json(),
            "ok": self.ok,
            "tight": self.tight,
            "tight_median": self.tight_median,
            "tight_ratio": self.tight_ratio,
        }


def _time_once(run: Callable[[int], object], n: int, self_timed: bool = False) -> int:
    """Nanoseconds for ``run(n)``, with the garbage collector off (or, ``self_timed``,
    the nanoseconds ``run`` returns)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        inside = run(n)
        elapsed = time.perf_counter_ns() - t0
    finally:
        gc.enable()
    if self_timed:
        assert isinstance(inside, int), f"a self-timed run returned {inside!r}"
        return inside
    return elapsed


def calibrate(run: Callable[[int], object], min_round_ns: int, self_timed: bool = False) -> int:
    """How many calls make one round last at least ``min_round_ns``.

    Doubles ``n`` until a run takes a tenth of the budget, then scales up linearly with
    10% headroom. The runs it makes warm caches and lazily built state.
    """
    n = 1
    while True:
        elapsed = _time_once(run, n, self_timed)
        if elapsed >= min_round_ns // 10:
            break
        n *= 2
    return max(n, int(n * min_round_ns * 1.1 / max(elapsed, 1)) + 1)


def _calibrated(bench: Bench, settings: Settings) -> int:
    """Calls per round for ``bench`` (see :func:`calibrate`), checked after."""
    n = calibrate(bench.run, settings.min_round_ns, bench.self_timed)
    if bench.check is not None:
        bench.check()
    return n


def _round(case: TimedCase, bench: Bench, n: int) -> float:
    """One timed round of ``n`` calls, checked after; the figure in ``case``'s unit."""
    elapsed = _time_once(bench.run, n, bench.self_timed)
    if bench.check is not None:
        bench.check()
    us_per_op = elapsed / 1_000 / (n * case.ops_per_call)
    return 1e6 / us_per_op if case.unit == "calls/s" else us_per_op


def _rounds(settings: Settings, *cases: Case) -> int:
    """The rounds to run: ``settings.rounds``, capped by any sampled case's ``max_rounds``."""
    rounds = settings.rounds
    for case in cases:
        if isinstance(case, SampledCase) and case.max_rounds is not None:
            rounds = min(rounds, case.max_rounds)
    return rounds


def _alternate(
    mine: Callable[[], float], theirs: Callable[[], float], rounds: int
) -> tuple[list[float], list[float]]:
    """``rounds`` figures of each, in alternating order (``theirs`` first in even rounds,
    ``mine`` first in odd ones), so that neither always runs just after the collector's
    ``gc.collect()`` of the other."""
    figures, (reference,) = _interleave(mine, [theirs], rounds)
    return figures, reference


def _interleave(
    mine: Callable[[], float], references: Sequence[Callable[[], float]], rounds: int
) -> tuple[list[float], list[list[float]]]:
    """``rounds`` figures of ``mine`` and of each reference, in mirrored order: the
    references then ``mine`` in even rounds, ``mine`` then the references reversed in odd
    ones (A B C, C B A, A B C, ...), so that each reference sits as close to ``mine`` on
    average as the others, and nothing always runs just after another's collection."""
    figures: list[float] = []
    reference: list[list[float]] = [[] for _ in references]
    for i in range(rounds):
        if i % 2 == 0:
            for figures_of, theirs in zip(reference, references, strict=True):
                figures_of.append(theirs())
            figures.append(mine())
        else:
            figures.append(mine())
            for figures_of, theirs in reversed(list(zip(reference, references, strict=True))):
                figures_of.append(theirs())
    return figures, reference


def _open(case: TimedCase, stack: ExitStack) -> Bench:
    bench = case.setup()
    if bench.close is not None:
        stack.callback(bench.close)
    return bench


def measure(case: Case, settings: Settings) -> tuple[list[float], int | None]:
    """Run ``case``; return one figure per round (in the case's unit) and ``n``."""
    with ExitStack() as stack:
        if isinstance(case, SampledCase):
            if case.close is not None:
                stack.callback(case.close)
            return [case.sample() for _ in range(_rounds(settings, case))], None
        bench = _open(case, stack)
        n = _calibrated(bench, settings)
        figures = [_round(case, bench, n) for _ in range(settings.rounds)]
    return figures, n * case.ops_per_call


def measure_paired(
    case: Case, reference: Case, settings: Settings
) -> tuple[list[float], int | None, list[float]]:
    """Run ``case`` and its ``reference`` (of the same kind) in alternating rounds (see
    :func:`_alternate`); return the case's figures, its operations per round, and the
    reference's figures from the same rounds."""
    figures, iterations, (ref_figures,) = measure_interleaved(case, [reference], settings)
    return figures, iterations, ref_figures


def measure_interleaved(
    case: Case, references: Sequence[Case], settings: Settings
) -> tuple[list[float], int | None, list[list[float]]]:
    """Run ``case`` and its ``references`` (of the same kind: its reference, and its tight
    floor) in interleaved rounds (see :func:`_interleave`); return the case's figures,
    its operations per round, and each reference's figures from the same rounds."""
    with ExitStack() as stack:
        if isinstance(case, SampledCase):
            sampled = [r for r in references if isinstance(r, SampledCase)]
            assert len(sampled) == len(references), (case.name, [r.name for r in references])
            for close in (*(r.close for r in sampled), case.close):  # (the case's closes first)
                if close is not None:
                    stack.callback(close)
            rounds = _rounds(settings, case, *sampled)
            mine, theirs = _interleave(case.sample, [r.sample for r in sampled], rounds)
            return mine, None, theirs
        timed = [reference for reference in references if isinstance(reference, TimedCase)]
        assert len(timed) == len(references), (case.name, [r.name for r in references])
        bench = _open(case, stack)
        ref_benches = [_open(reference, stack) for reference in timed]  # (closed first)
        n = _calibrated(bench, settings)
        counts = [_calibrated(ref_bench, settings) for ref_bench in ref_benches]
        figures, ref_figures = _interleave(
            lambda: _round(case, bench, n),
            [
                functools.partial(_round, reference, ref_bench, m)
                for reference, ref_bench, m in zip(timed, ref_benches, counts, strict=True)
            ],
            settings.rounds,
        )
    return figures, n * case.ops_per_call, ref_figures


def resolve(
    group: str,
    case: Case,
    figures: Sequence[float],
    iterations: int | None,
    done: dict[str, Result],
    reference_figures: Sequence[float] | None = None,
    tight_figures: Sequence[float] | None = None,
) -> Result:
    """Summarise ``figures`` and apply the case's reference and target.

    The reference's median comes from ``reference_figures`` (its rounds paired with the
    case's, see :func:`measure_paired`) when given, else from its own result in ``done``;
    likewise the tight floor's (:attr:`TimedCase.tight`) from ``tight_figures``.
    """
    median = statistics.median(figures)
    ref = done.get(case.reference) if case.reference is not None else None
    ref_median: float | None = None if ref is None else ref.median
    if reference_figures:
        ref_median = statistics.median(reference_figures)
    ratio = None if not ref_median else median / ref_median
    tight = case.tight if isinstance(case, TimedCase) else None
    tight_median: float | None = None
    if tight_figures:
        tight_median = statistics.median(tight_figures)
    elif tight is not None and tight in done:
        tight_median = done[tight].median
    tight_ratio = None if not tight_median else median / tight_median
    target = TARGETS.get(case.name)
    ok = None if target is None else target.met(median=median, ratio=ratio)
    return Result(
        group=group,
        name=case.name,
        title=case.title,
        unit=case.unit,
        median=median,
        min=min(figures),
        max=max(figures),
        rounds=len(figures),
        iterations=iterations,
        reference=case.reference,
        reference_median=ref_median,
        ratio=ratio,
        target=target,
        ok=ok,
        tight=tight,
        tight_median=tight_median,
        tight_ratio=tight_ratio,
    )


def higher_is_better(unit: Unit) -> bool:
    """Whether a bigger figure in ``unit`` is the better one."""
    return unit in _HIGHER_IS_BETTER

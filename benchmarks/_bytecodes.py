"""``--bytecodes CASE``: how many Python bytecodes one operation of a case executes.

Why count bytecodes: on the shared 2-core machines these benchmarks run on, the time of an
operation follows the number of bytecodes the interpreter runs far more closely than the
number of machine instructions (callgrind). Measured in November 2026 on the in-memory
cases: ours against the floor, 1.13x the instructions, 1.42x the bytecodes, 1.61x the
time; over five cases the time per bytecode stays within 9-12 ns. Each bytecode's dispatch
costs about the same whatever it does, and a long path through many different functions
predicts worse than a short loop. So a cut of bytecodes (a frame that only forwards, a check
made twice, an object built and dropped) is worth more than its instruction count says.

The count is exact and does not depend on the machine's load: ``sys.settrace`` with
``f_trace_opcodes`` sees every bytecode of every traced frame (Trio's scheduler, channels
and cancel scopes included; C code such as orjson counts for the one call that enters it).
Trio shuffles the order of a scheduler batch at random, so two runs may differ by a few
bytecodes. Tracing is slow: the counted round is short, and its time means nothing.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any, Final

from ._harness import Bench, TimedCase
from ._profile import STDLIB, TRIO, area, layer, where

__all__ = ["BytecodeCount", "count_bytecodes", "report"]

OPERATIONS: Final = 400
"""Operations counted per case (whole calls of ``run``: at least this many)."""
_WARM_UP: Final = 50


class BytecodeCount:
    """Bytecodes and frame entries by code object, over ``ops`` operations of one case.

    Standard-library frames run on Trio's behalf (its cancel scopes' ``contextmanager``,
    the ``UserDict`` of its instruments: the nearest caller outside the standard
    library is Trio's) are also counted in :attr:`for_trio`, so that the layer table
    charges them to Trio, whose cost they are.
    """

    def __init__(self, name: str, ops: int) -> None:
        self.name = name
        self.ops = ops
        self.bytecodes: Counter[CodeType] = Counter()
        self.entries: Counter[CodeType] = Counter()  # calls, and resumptions of coroutines
        self.for_trio: Counter[CodeType] = Counter()  # (standard library called by Trio)
        self._layers: dict[CodeType, str] = {}

    def _layer(self, code: CodeType) -> str:
        found = self._layers.get(code)
        if found is None:
            found = self._layers[code] = layer(area(code.co_filename))
        return found

    def _for_trio(self, frame: FrameType) -> bool:
        """Whether ``frame`` is standard library run for Trio: its nearest caller
        outside the standard library is Trio's code."""
        if self._layer(frame.f_code) != STDLIB:
            return False
        caller = frame.f_back
        while caller is not None and self._layer(caller.f_code) == STDLIB:
            caller = caller.f_back
        return caller is not None and self._layer(caller.f_code) == TRIO

    def tracer(self, frame: FrameType, event: str, arg: object) -> Any:
        """The trace function (``sys.settrace``): counts ``opcode`` and ``call`` events."""
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.bytecodes[frame.f_code] += 1
        elif event == "call":
            self.entries[frame.f_code] += 1
            if self._for_trio(frame):
                return self._trio_tracer
        return self.tracer

    def _trio_tracer(self, frame: FrameType, event: str, arg: object) -> Any:
        """The local trace function of a standard-library frame run for Trio."""
        if event == "opcode":
            self.bytecodes[frame.f_code] += 1
            self.for_trio[frame.f_code] += 1
        return self._trio_tracer

    @property
    def per_op(self) -> float:
        """Bytecodes per operation."""
        return sum(self.bytecodes.values()) / self.ops

    def start(self) -> None:
        """Trace this thread from here on, frames already running included."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            frame.f_trace = self.tracer
            frame.f_trace_opcodes = True
            frame = frame.f_back
        sys.settrace(self.tracer)

    @staticmethod
    def stop() -> None:
        """Stop tracing this thread."""
        sys.settrace(None)


def count_bytecodes(case: TimedCase, operations: int = OPERATIONS) -> BytecodeCount:
    """Count the bytecodes of at least ``operations`` operations of ``case``, after a
    warm-up (lazily built state is not counted)."""
    bench = case.setup()
    try:
        if bench.self_timed:
            raise ValueError(f"{case.name} runs in another process: count it there")
        bench.run(max(1, _WARM_UP // case.ops_per_call))
        calls = max(1, -(-operations // case.ops_per_call))
        counted = BytecodeCount(case.name, calls * case.ops_per_call)
        _traced(bench, counted, lambda: bench.run(calls))
    finally:
        if bench.close is not None:
            bench.close()
    return counted


def _traced(bench: Bench, counted: BytecodeCount, run: Callable[[], object]) -> None:
    if bench.in_thread is None:
        counted.start()
        try:
            run()
        finally:
            counted.stop()
        return
    # The work happens in the case's event-loop thread: trace that one.
    bench.in_thread(counted.start)
    try:
        run()
    finally:
        bench.in_thread(counted.stop)


def report(counted: BytecodeCount, *references: tuple[str, BytecodeCount], top: int = 30) -> str:
    """A markdown report of ``counted`` and its ratio to each of ``references``, pairs of
    what it is to the case (``"its reference"``, ``"its tight floor"``) and its count."""
    ops = counted.ops
    total = sum(counted.bytecodes.values())
    by_layer: dict[str, int] = defaultdict(int)
    by_module: dict[str, int] = defaultdict(int)
    for code, n in counted.bytecodes.items():
        module = area(code.co_filename)
        by_module[module] += n
        for_trio = counted.for_trio[code]
        by_layer[TRIO] += for_trio
        by_layer[layer(module)] += n - for_trio
    lines = [f"## bytecodes: `{counted.name}`", ""]
    summary = f"{counted.per_op:,.0f} bytecodes per operation ({ops:,} operations counted)"
    for kind, reference in references:
        ratio = counted.per_op / reference.per_op
        summary += (
            f"; {kind} `{reference.name}`: {reference.per_op:,.0f} per operation,"
            f" ratio {ratio:.2f}\u00d7"
        )
    lines += [summary + ".", "", "| layer | bytecodes/op | share |", "| --- | ---: | ---: |"]
    for name, n in sorted(by_layer.items(), key=lambda item: -item[1]):
        if n:
            lines.append(f"| {name} | {n / ops:,.1f} | {n / total:.0%} |")
    if counted.for_trio:
        lines += [
            "",
            f"(Trio's layer includes {counted.for_trio.total() / ops:,.1f} bytecodes/op of "
            "standard-library code Trio calls: its cancel scopes' contextmanager, ...; the "
            "module table lists them under their own modules.)",
        ]
    lines += ["", "| module | bytecodes/op | share |", "| --- | ---: | ---: |"]
    for name, n in sorted(by_module.items(), key=lambda item: -item[1]):
        if n / ops >= 0.5:
            lines.append(f"| {name} | {n / ops:,.1f} | {n / total:.0%} |")
    lines += [
        "",
        f"Top {top} functions by bytecodes:",
        "",
        "| function | entries/op | bytecodes/op | share |",
        "| --- | ---: | ---: | ---: |",
    ]
    for code, n in counted.bytecodes.most_common(top):
        if n / ops < 0.05:  # (the counting's own frames: once per round)
            break
        name = where((code.co_filename, code.co_firstlineno, code.co_qualname))
        entries = counted.entries[code] / ops
        lines.append(f"| `{name}` | {entries:.2f} | {n / ops:,.1f} | {n / total:.1%} |")
    return "\n".join(lines)

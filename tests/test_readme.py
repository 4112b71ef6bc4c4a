"""The README's code must run as written, and print what its comments say."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
_PRINTED = re.compile(r"^\s*print\(.*\)\s+# (?P<expected>.+)$")


def test_readme_python_blocks_run(capsys: object) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {"__name__": "readme"})


def test_readme_prints_what_its_comments_say() -> None:
    # A one-line `print(...)  # text` promises that text: check each against what the
    # call printed (a wrong promise, "True working" for "True input_required", misled
    # a reader).
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    checked = 0
    for number, block in enumerate(blocks):
        lines = block.splitlines()
        promised = {
            index + 1: match["expected"]
            for index, line in enumerate(lines)
            if (match := _PRINTED.match(line)) is not None
        }
        if not promised:
            continue
        name = f"README block {number}"
        printed: dict[int, list[str]] = {}

        exec(
            compile(block, name, "exec"), {"__name__": "readme", "print": _recorder(name, printed)}
        )
        for line, expected in promised.items():
            got = printed.get(line)
            assert got, f"{name}, line {line}: never printed {expected!r}"
            assert got == [expected] * len(got), f"{name}, line {line}: {lines[line - 1]!r}"
            checked += 1
    assert checked >= 5, "the README's printed promises were not found"


def _recorder(name: str, printed: dict[int, list[str]]) -> Any:
    """A ``print`` that records, by line, what the code compiled as ``name`` prints."""

    def recording(*args: Any, sep: str = " ", **kwargs: Any) -> None:
        caller = sys._getframe(1)
        if caller.f_code.co_filename == name:  # (not the library's own print calls)
            printed.setdefault(caller.f_lineno, []).append(sep.join(map(str, args)))

    return recording

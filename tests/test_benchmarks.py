"""The benchmark tool's bookkeeping: every target names a case, the SDK pin is one version.

Nothing here times anything (timings are never test assertions); the figures come from
``python -m benchmarks``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from benchmarks import _registry, sdk
from benchmarks._harness import Settings, Skip
from benchmarks.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent


def _case_names() -> set[str]:
    names: set[str] = set()
    for group in _registry.GROUPS.values():
        if group.name == "sdk":  # no targets; may be unavailable here
            continue
        module = _registry.load(group)
        assert not isinstance(module, str), f"{group.name}: {module}"
        for case in module.cases(Settings.for_run(quick=False)):
            if not isinstance(case, Skip):
                names.add(case.name)
    return names


def test_every_target_names_a_case() -> None:
    # A target keyed by a name no case has would never be checked.
    names = _case_names()
    assert set(TARGETS) <= names, sorted(set(TARGETS) - names)


def test_the_bench_extra_pins_the_sdk_version_the_group_was_written_against() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["bench"] == [f"mcp=={sdk.SDK_VERSION}"]

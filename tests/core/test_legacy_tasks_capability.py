"""The check that keeps a binding that serves tasks as the modern extension only from
declaring the 2025-11-25 ``tasks`` capability (the core itself lets it through)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio._tasks import TASKS_EXTENSION, refuse_legacy_tasks


@pytest.mark.parametrize(
    "capabilities",
    [{"tasks": {}}, {"tasks": {"list": {}}, "extensions": {TASKS_EXTENSION: {}}}],
)
def test_a_legacy_tasks_capability_is_refused(capabilities: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"capabilities\['tasks'\] \(the 2025-11-25 tasks\)"):
        refuse_legacy_tasks(capabilities)


@pytest.mark.parametrize(
    "capabilities", [{}, {"extensions": {TASKS_EXTENSION: {}}}, {"tools": {}, "roots": {}}]
)
def test_capabilities_without_it_pass(capabilities: dict[str, Any]) -> None:
    refuse_legacy_tasks(capabilities)

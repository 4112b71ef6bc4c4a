"""The named benchmark groups, and how a group plugs in.

A group is a module ``benchmarks/<module>.py`` with three names:

``DESCRIPTION: str``
    One line for ``--list``.
``unavailable() -> str | None``
    Why the group cannot run here (a missing optional dependency, a platform), or
    ``None``. Called before anything is measured; it must be cheap and must not raise.
``cases(settings: Settings) -> list[Case | Skip]``
    The cases, each a :class:`~benchmarks._harness.TimedCase` or
    :class:`~benchmarks._harness.SampledCase`, floors (references) first.

To add a group: write the module and register it below. Give its cases names
``<group>.<what>``; targets keyed by those names in :mod:`benchmarks.targets` then apply
by themselves.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Final, Protocol, cast, final

import attrs

from ._harness import Case, Settings, Skip

__all__ = ["GROUPS", "Group", "GroupModule", "load"]


class GroupModule(Protocol):
    """What a group module provides."""

    DESCRIPTION: str

    def unavailable(self) -> str | None:
        """Why the group cannot run here, or ``None``."""

    def cases(self, settings: Settings) -> Sequence[Case | Skip]:
        """The group's cases, references first."""


@final
@attrs.frozen(kw_only=True)
class Group:
    """A registered group."""

    name: str
    """What the command line calls it."""
    module: str
    """Its module under :mod:`benchmarks`."""
    summary: str
    """What it measures, for ``--list``."""


GROUPS: Final[dict[str, Group]] = {
    group.name: group
    for group in (
        Group(name="core", module="core", summary="the sans-IO core against raw orjson"),
        Group(
            name="inmemory",
            module="inmemory",
            summary="mcp_trio over in-memory channels against a bare Trio channel floor",
        ),
        Group(
            name="stdio",
            module="stdio",
            summary="calls/s over a subprocess's stdin/stdout at 1 and 100 in flight",
        ),
        Group(
            name="ws",
            module="ws",
            summary="calls/s over trio-websocket at 1 and 100 in flight",
        ),
        Group(
            name="http",
            module="http",
            summary="calls/s over Streamable HTTP (h11) at 1 and 100 in flight",
        ),
        Group(
            name="coldstart",
            module="coldstart",
            summary="spawn a stdio server and get initialize answered, against a bare interpreter",
        ),
        Group(
            name="sdk",
            module="sdk",
            summary="the same workloads through the official `mcp` SDK, ours / theirs",
        ),
    )
}
"""Every group, in the order ``all`` runs them."""


def load(group: Group) -> GroupModule | str:
    """Import ``group``'s module, or say why it cannot run here."""
    qualified = f"{__package__}.{group.module}"
    try:
        module: ModuleType = importlib.import_module(qualified)
    except ModuleNotFoundError as exc:
        if exc.name == qualified:
            return f"benchmarks/{group.module}.py does not exist"
        return f"cannot import {exc.name!r}"
    loaded = cast(GroupModule, module)
    reason = loaded.unavailable()
    return loaded if reason is None else reason

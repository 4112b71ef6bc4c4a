"""Seeded benchmarks for mcp-trio: ``python -m benchmarks [GROUP ...] [--quick] [--json PATH]``.

See ``benchmarks/README.md`` for the workloads, the method and the targets.
"""

from __future__ import annotations

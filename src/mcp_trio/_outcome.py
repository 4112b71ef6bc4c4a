"""Compatibility alias: ``NeedInput`` is :class:`mcp_trio.InputRequiredResult`."""

from __future__ import annotations

from ._handlers import InputRequiredResult as NeedInput

__all__ = ["NeedInput"]

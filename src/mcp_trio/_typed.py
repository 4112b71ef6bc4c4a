"""The typed models of ``mcp_sansio.types``, without importing them.

That module defines every model of the schema, which costs a server about 100 ms of
start-up. Code that only *recognises* typed values (``isinstance``, ``issubclass``)
needs no import: no value or annotation can be one of its classes before someone
imported it.
"""

from __future__ import annotations

import sys

__all__ = ["loaded_models"]


_found: dict[tuple[str, ...], tuple[type, ...]] = {}


def loaded_models(*names: str) -> tuple[type, ...]:
    """The classes ``names`` of ``mcp_sansio.types``, or ``()`` while it is not imported.

    Called on every tool result: once the module is there, the tuple is kept."""
    found = _found.get(names)
    if found is not None:
        return found
    module = sys.modules.get("mcp_sansio.types")
    if module is None:
        return ()
    found = _found[names] = tuple(getattr(module, name) for name in names)
    return found

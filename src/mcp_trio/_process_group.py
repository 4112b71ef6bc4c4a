"""Signals to a spawned server's process group, for both stdio clients (the Trio one in
``_stdio`` and ``BlockingClient``'s in ``_blocking_bytes``): no event loop here.

Both clients start the server leading a process group of its own
(``start_new_session=True``), so that a server behind a wrapper that does not exec it
(``sh -c 'server; true'``) is stopped with it.
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Protocol

__all__ = ["signal_group"]


class _Process(Protocol):
    """What both ``trio.Process`` and ``subprocess.Popen`` offer."""

    @property
    def pid(self) -> int: ...

    def send_signal(self, sig: int) -> None: ...


def signal_group(process: _Process, signum: int) -> None:
    """Send ``signum`` to the process group ``process`` leads; to the process alone where
    there are no groups, or if it left the group (``setsid``). Nothing if both are
    gone."""
    if hasattr(os, "killpg"):
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
            return
    with suppress(ProcessLookupError):
        process.send_signal(signum)

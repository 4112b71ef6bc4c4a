"""Signals to a spawned server's process group, for both stdio clients (the Trio one in
``_stdio`` and ``BlockingClient``'s in ``_blocking_bytes``): no event loop here.

Both clients start the server leading a process group of its own
(``start_new_session=True``), so that a server behind a wrapper that does not exec it
(``sh -c 'server; true'``) is stopped with it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Final, Protocol

__all__ = ["GROUP_POLL", "signal_group", "stop_group"]

GROUP_POLL: Final = 0.05
"""Seconds between looks at what a server left in its process group (not our children:
there is nothing to wait on)."""


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


def stop_group(
    group: int, grace: float, now: Callable[[], float], *, urgent: bool = False
) -> Iterator[float]:
    """Stop what is left of the process group ``group`` once its leader, the server, is
    reaped (a helper it started, the server behind a wrapper): SIGTERM, then SIGKILL
    ``grace`` seconds later (on the clock ``now``) if any remains; ``urgent``: SIGKILL
    at once; nothing if the group is empty. It sends the signals and yields how long
    to sleep before its next look, which each client does its own way (``trio.sleep``,
    ``time.sleep``).

    A server that exits cleanly at the end of its stdin would otherwise leave its
    helpers running, often holding its stdout. A daemon meant to outlive the server
    starts a session of its own (``setsid``, as daemons do), so it is not in the group
    and not signalled. (The group's id stays reserved while any member lives; an empty
    group's id is free again only once the system's process ids wrap around.)"""
    if not hasattr(os, "killpg"):  # pragma: no cover - POSIX groups only
        return
    for stop in (signal.SIGKILL,) if urgent else (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(group, stop)
        except (ProcessLookupError, PermissionError):
            return  # (empty: nothing was left, or all of it has exited; or a member setuid)
        if stop == signal.SIGKILL:
            return
        deadline = now() + grace
        while (left := deadline - now()) > 0:
            try:
                os.killpg(group, 0)
            except OSError:
                return  # (gone)
            yield min(GROUP_POLL, left)

"""Finding and reaching a host for :class:`~mcp_trio.BlockingClient` (``tcp`` and
``http``): no threads, so the system's resolver blocks, and a name's addresses are
tried one after another within one deadline, each for its share of it."""

from __future__ import annotations

import socket
import time
from typing import Final

__all__ = ["Address", "attempt_deadline", "dial", "resolve"]

_ATTEMPT_FLOOR: Final = 2.0
"""Seconds: the least time one of several addresses is given before the next is tried
(unless less is left), as Go's ``net.Dialer`` (``partialDeadline``)."""

Address = tuple[int, tuple[object, ...]]
"""An address family and a socket address, as ``getaddrinfo`` gives them."""


def resolve(host: str, port: int) -> list[Address]:
    """The addresses to connect to: an address literal as it is, with no DNS query
    (``AI_NUMERICHOST``); a name through the system's resolver, which blocks for as long
    as it takes (no timeout of ours applies: without threads it cannot be interrupted).

    Raises:
        OSError: the name does not resolve (``socket.gaierror``).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:  # (a name, not a literal)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(family, address) for family, _, _, _, address in infos]


def attempt_deadline(now: float, deadline: float, left: int) -> float:
    """When to give up on one address, with ``left`` to try (this one too) before the
    shared ``deadline``: an equal share of what remains, at least ``_ATTEMPT_FLOOR``
    (or all that remains), so an address that never answers leaves time for the next."""
    remaining = deadline - now
    share = max(remaining / left, _ATTEMPT_FLOOR)
    return deadline if left <= 1 or share >= remaining else now + share


def dial(host: str, port: int, timeout: float) -> socket.socket:
    """A connected (blocking) TCP socket to ``host``: its addresses tried in turn within
    ``timeout`` seconds in all (counted once the name is resolved: :func:`resolve` has no
    timeout), each for its share (:func:`attempt_deadline`); the first is tried
    whatever ``timeout`` is (``0``: one non-blocking ``connect()``, which nearly always
    fails, as TCP's handshake is not done at once: a ``TimeoutError``). An address whose
    socket cannot be made (its family not supported: IPv6 off) is skipped, as one that
    refuses.

    Raises:
        OSError: the name does not resolve, or no address answered (the last
            attempt's error).
        TimeoutError: no address answered and the time ran out.
    """
    addresses = resolve(host, port)
    deadline = time.monotonic() + timeout
    error: OSError | None = None
    tried = 0
    for left, (family, address) in zip(range(len(addresses), 0, -1), addresses, strict=True):
        now = time.monotonic()
        if now >= deadline and error is not None:
            break
        sock: socket.socket | None = None
        tried += 1
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            # (0 makes the socket non-blocking: a connection not made at once is late.)
            sock.settimeout(max(0.0, attempt_deadline(now, deadline, left) - now))
            sock.connect(address)
        except OSError as exc:
            if sock is not None:
                sock.close()
            error = exc
            continue
        sock.settimeout(None)
        return sock
    if error is None:  # pragma: no cover - getaddrinfo gives an address or raises
        raise OSError(f"{host!r} has no address")
    if tried < len(addresses) or isinstance(error, TimeoutError | BlockingIOError):
        raise TimeoutError(
            f"connecting to {host}:{port} timed out after {timeout:g} s"
            f" ({tried} of its {len(addresses)} addresses tried)"
        ) from error
    raise error

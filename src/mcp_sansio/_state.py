"""The legacy-era lifecycle, as tables.

Theory of operation
-------------------
A legacy session is a short handshake followed by normal operation:

    client                       server
      | -- initialize -------->    |     both: IDLE -> INITIALIZING
      | <------- result -------    |     server: INITIALIZING -> ANSWERED
      | -- initialized ------->    |     client: INITIALIZING -> READY (on the result)
      |                            |     server: ANSWERED -> READY (on the notification)

A client may *restart* a ready session: over Streamable HTTP the server can forget a
session (it answers ``404``), and the client must then start a new one with a new
``initialize`` (``basic/transports.mdx``, "Session Management"). The client goes from
READY back to IDLE and on into INITIALIZING, exactly as the first time.

Two rules, after h11's ``_state.py``:

1. Everything that changes the lifecycle state lives in this file (the transition
   table below). The connection asks "what does this input do here?" and gets a new
   state or a refusal.
2. This file does not know which role we play. Inputs are named for what happened in
   the handshake, not for who did it; the connection maps role-specific facts onto
   them.

What each state *permits* (which methods may be sent, and which of the peer's requests
are served, before READY) is also data here, for the same reason: one place to read the
pre-initialisation rules of ``2025-11-25/basic/lifecycle.mdx``. Sending and accepting
differ in ANSWERED: the server waits for ``notifications/initialized`` before it sends
anything but pings and logs, yet serves the client's requests as soon as its
``initialize`` result is out.

The modern era has no lifecycle: each request stands alone (``versioning.mdx``), so it
never touches these tables.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["HandshakeInput", "LifecycleState", "transition"]


class LifecycleState(enum.Enum):
    """Where a legacy session is in its life."""

    IDLE = "idle"
    """Nothing has happened yet."""
    INITIALIZING = "initializing"
    """``initialize`` is in flight."""
    ANSWERED = "answered"
    """The ``initialize`` result is out; waiting for ``notifications/initialized``."""
    READY = "ready"
    """Normal operation."""
    FAILED = "failed"
    """The handshake failed (e.g. no common version); only closing remains."""
    CLOSED = "closed"
    """The input ended."""


class HandshakeInput(enum.Enum):
    """Things that move the lifecycle."""

    INITIALIZE = "initialize"
    """The initialize request was sent/received."""
    ANSWER = "answer"
    """The initialize result was sent/received."""
    REJECT = "reject"
    """The initialize request was refused (an error response)."""
    CONFIRM = "confirm"
    """``notifications/initialized`` was sent/received."""
    FAIL = "fail"
    """The handshake cannot complete (version we do not support)."""
    CLOSE = "close"
    """End of input."""
    RESTART = "restart"
    """The peer forgot the session (Streamable HTTP ``404``): a new one starts over."""


S, H = LifecycleState, HandshakeInput

_TRANSITIONS: Mapping[tuple[LifecycleState, HandshakeInput], LifecycleState] = MappingProxyType(
    {
        (S.IDLE, H.INITIALIZE): S.INITIALIZING,
        (S.INITIALIZING, H.ANSWER): S.ANSWERED,
        (S.INITIALIZING, H.REJECT): S.IDLE,
        (S.INITIALIZING, H.FAIL): S.FAILED,
        (S.ANSWERED, H.CONFIRM): S.READY,
        (S.READY, H.RESTART): S.IDLE,
        **{(state, H.CLOSE): S.CLOSED for state in S},
    }
)


def transition(state: LifecycleState, event: HandshakeInput) -> LifecycleState | None:
    """The state after ``event`` in ``state``, or ``None`` when it is not allowed there."""
    return _TRANSITIONS.get((state, event))


#: Requests we may *send* in each state before READY (lifecycle.mdx: "The client SHOULD
#: NOT send requests other than pings before the server has responded to the initialize
#: request"; "The server SHOULD NOT send requests other than pings and logging before
#: receiving the initialized notification").
PRE_READY_REQUESTS: Mapping[LifecycleState, frozenset[str]] = MappingProxyType(
    {
        S.IDLE: frozenset({"initialize", "ping"}),
        S.INITIALIZING: frozenset({"ping"}),
        S.ANSWERED: frozenset({"ping"}),
    }
)

#: States in which the peer's requests are *accepted* and served as in READY. ANSWERED is
#: one: the rule for the client ends when the server "has responded to the initialize
#: request", not at ``notifications/initialized``, and over Streamable HTTP the POST of
#: that notification and the client's next request may well arrive in either order. In
#: the states before them, what is accepted is what may be sent (PRE_READY_REQUESTS).
SERVING_STATES = frozenset({S.ANSWERED, S.READY})

#: Notifications a server may send before READY (logging, and progress/cancel for
#: requests that are already in flight).
PRE_READY_SERVER_NOTIFICATIONS = frozenset(
    {"notifications/message", "notifications/progress", "notifications/cancelled"}
)

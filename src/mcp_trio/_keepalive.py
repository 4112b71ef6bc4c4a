"""Keep-alive: ``ping`` a legacy-era peer that has gone quiet (``SessionConfig.ping_interval``).

Theory of operation
-------------------
The 2024-11-05 … 2025-11-25 revisions say (``basic/utilities/ping``): implementations
SHOULD periodically issue pings to detect connection health, at a configurable frequency,
avoiding excessive pinging; a timeout SHOULD be treated as a connection failure, and ping
failures SHOULD be logged. The 2026-07-28 revision removed ``ping`` (its changelog, item
5), so a modern-era session never pings.

Any message from the peer proves it alive, so only silence is probed: the session's
reader stores the time of each message it reads (``Session._heard_at``: one attribute
store, the only cost on the hot path), and this task, asleep otherwise, reads it when it
wakes. A ping goes out once the peer has said nothing for ``ping_interval`` seconds; a
busy session sends none. One ping at a time: the next is timed from the last message
heard, which the ping's own answer is.

The ping is an ordinary request of ours with ``ping_timeout`` as its timeout, so the
core's timer times it out (no wait on a stuck write: see ``Session._timer_loop``; the
core's ``max_request_time`` caps it, and the close reason then names that). An answer
of any kind, an error included, is an answer: the peer is alive. No answer in time
closes the session as a connection failure: every waiter fails with
:class:`~mcp_trio.SessionClosed` whose reason says so and whose ``__cause__`` is the
ping's :class:`~mcp_trio.RequestTimeout`, and a warning is logged on the ``mcp_trio``
logger, as a timed-out write does (``write_timeout``). Running handlers are cancelled at
once (no ``shutdown_grace_period``: nobody would read their answers).

Only the peer's silence ends the session, so a timeout is weighed first. The peer spoke
after the ping went out (``_heard_at``): its answer is late, not missing; go on. Our side
held the ping back (``Session.request(on_held=)``: the HTTP client waiting for a free
connection, or for an OAuth token's refresh): the time was ours, so try again an interval later,
rather than clock the ping from its write (the HTTP client's write returns before the
POST has a connection, so the session never sees that moment), which would need a new
hook through every channel. The core cancels a held ping that times out as any
request; one still waiting for its connection (or for a refresh, after a ``401``) never
went out, or was refused, so the HTTP
client withdraws it and sends no ``notifications/cancelled`` (the server never had
it): while long calls take every connection, each interval costs no POST, only a
ping queued for a connection until its timeout. That rule is the channel's, for any
request. A forgotten session being started anew: its own bound
(``handshake_timeout``) applies. The HTTP client's own -32603 ``HTTP: ...`` errors for
a request lost on the way (a connection dropped after the POST) are the channel's words,
not the peer's (``mcp_trio._channel.LocalReply``: the reader stores no ``_heard_at`` for
them), and so are the errors ``ClientResponse`` makes in place of an answer that never
came (``ClientResponse.unheard``: a ``5xx`` without a JSON-RPC error response, a
gateway's ``502`` or ``503``), so a ping failed by one, with nothing heard since it went
out, failed: the session closes, the error as ``__cause__``. A JSON-RPC error the server
sent, whatever the status, is its answer, and so is a refusal below 500 (a ``429``), a
``2xx`` body past ``HttpClientConfig.max_body_size`` and an SSE event past
``max_event_size`` (the error is the client's; the answer, too large to read, was the
server's).

Authorization (an HTTP client with :class:`~mcp_trio.OAuth`). A ping never asks the
user to authorize, nor starts any authorization: nobody asked for it, and the user at
``on_authorize`` (a browser window, a login) must only ever see a prompt for something
they did: a ping every interval of a session left open overnight, refused since its
token lapsed, would otherwise open a browser at each interval, or at each end of
``authorize_timeout`` the user did not answer, and hold the session's health on a
person. The ping's question (is the server there?) is answered by the ``401`` itself,
the server's words (below 500, as above): the session stays, and the next request of
the user's asks them, one authorization at a time (the flow's lock: requests refused
meanwhile wait for it and share its outcome; pings never join it). What needs no user
is still done: an expired token is refreshed before the ping, and a ``401`` to it waits
for the shared refresh and tries once more, both held (our wait: a ping that times out
meanwhile is tried an interval later). A refresh that fails drops the token, as before
any request: the ping then goes without one, and its ``401`` answers it. The HTTP
client sees only methods, so a ``ping`` the user sends is treated alike: it asks for
the server, not for access. The legacy GET stream, which the client keeps open on its
own, keeps the same rule: refused, it asks nobody, and waits for the shared refresh or
the token a request of the user's brings, then opens again; the refusal is not counted
as a failed re-open, so the session stays (:mod:`mcp_trio._http_client`, "GET stream").
So the only prompt the user ever sees answers a request of theirs.

The ping is left out of ``statistics().waiting_requests`` (``Session._ping_id``), and no
ping is sent while the core's request table (``max_pending_requests``) has one free place
or none: that place is the user's; the keep-alive tries again an interval later.

Which sessions ping: those that run on :class:`~mcp_trio.Session` (stdio, WebSocket,
in-memory, either role; the Streamable HTTP client, each ping a POST) once a
legacy-era handshake has completed, and not while a session the server forgot is being
started anew. The Streamable HTTP *server* (``serve_http``) does not run sessions on
``Session`` and never pings, whatever its ``SessionConfig`` says: a legacy server can
only reach the client on the GET stream, which the client may never open, and its SSE
streams carry ``sse_keepalive_interval`` comments already; it is the client's ping
that checks that connection (``serve_http`` logs at debug level that it ignores
``ping_interval``). :class:`~mcp_trio.BlockingClient` has no keep-alive: its user calls
``ping()``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ._errors import LocalProtocolError, McpError, RequestTimeout, SessionClosed

if TYPE_CHECKING:
    from mcp_sansio import RequestId

    from ._session import Session

__all__ = ["keep_alive"]

logger = logging.getLogger("mcp_trio")


async def keep_alive(session: Session, interval: float, timeout: float) -> None:
    """Ping ``session``'s peer after each ``interval`` seconds it stays silent, until the
    session closes; close it if a ping gets no answer within ``timeout`` seconds.

    Runs in the session's I/O nursery (started when ``ping_interval`` is set); returns at
    once for a session that does not settle on the legacy era.
    """
    await session._handshake_done.wait()
    handshake = session.handshake
    if handshake is None or handshake.era != "legacy":
        return  # (modern: no ping; a failed handshake: the session is closing)
    conn = session.connection
    limits = conn.config
    while True:
        # Sleep until the peer has been silent for a whole interval.
        while (due := session._heard_at + interval) > trio.current_time():
            await trio.sleep_until(due)
        restarting = session._restarting
        if restarting is not None:
            await restarting.wait()  # (its own bound, handshake_timeout, applies)
            continue
        if session.closed:
            return
        if limits.max_pending_requests - len(conn.pending_requests()) <= 1:
            # The last place in the core's request table is the user's: no ping now.
            logger.debug("%s session: no ping sent (the request table is full)", session.role)
            await trio.sleep(interval)
            continue
        ping = _Ping(session, trio.current_time())
        try:
            await session.request("ping", timeout=timeout, on_sent=ping.sent_as, on_held=ping.held)
        except McpError as exc:
            # An error is an answer (the peer is alive), unless the channel made it (an
            # HTTP client's: no answer came, see LocalReply), which stores no _heard_at.
            if session._heard_at < ping.sent:
                if not ping.ours_to_blame():
                    _fail(session, f"a ping failed ({exc})", exc)
                    return
                await trio.sleep(interval)
        except LocalProtocolError as exc:
            # The core takes no request now: try again an interval later.
            logger.debug("%s session: no ping sent (%s)", session.role, exc)
            await trio.sleep(interval)
        except RequestTimeout as exc:
            if session._heard_at >= ping.sent:
                continue  # the peer spoke meanwhile: its answer is late, not missing
            if ping.ours_to_blame():
                # The wait was ours (a free connection, a token, a new session), not
                # the peer's silence: try again an interval later.
                logger.debug("%s session: a ping held back on our side timed out", session.role)
                await trio.sleep(interval)
                continue
            limit, name = timeout, "SessionConfig.ping_timeout"
            cap = limits.max_request_time
            if cap is not None and cap < timeout:
                limit, name = cap, "ConnectionConfig.max_request_time"
            _fail(session, f"the peer did not answer a ping within {limit:g} s ({name})", exc)
            return
        except SessionClosed:
            return
        finally:
            session._ping_id = None


class _Ping:
    """One keep-alive ping: when it was sent, whether our side held it back."""

    __slots__ = ("sent", "session", "was_held")

    def __init__(self, session: Session, sent: float) -> None:
        self.session = session
        self.sent = sent
        self.was_held = False

    def sent_as(self, rid: RequestId) -> None:
        """``Session.request(on_sent=)``: the ping's id, which ``statistics()`` leaves out
        while its waiter is there."""
        self.session._ping_id = rid

    def held(self, _rid: object, held: bool) -> None:
        """``Session.request(on_held=)``: the transport held the ping back (a free
        connection, a token)."""
        if held:
            self.was_held = True

    def ours_to_blame(self) -> bool:
        """Whether the ping's failure may be our side's: it was held back, or a new
        session is started in place of a forgotten one (which has its own bound)."""
        return self.was_held or self.session._restarting is not None


def _fail(session: Session, why: str, cause: BaseException) -> None:
    """Close ``session``: its peer is taken for dead (a connection failure)."""
    logger.warning("%s session: %s; closing (connection failure)", session.role, why)
    failure = SessionClosed(f"{why}: connection failure")
    failure.__cause__ = cause
    session._begin_close(failure, graceful=False)

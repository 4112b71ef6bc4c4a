"""Small helpers shared by the session, the transports and the command line."""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Hashable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeAlias, TypeGuard, TypeVar, final

import trio

from mcp_sansio import ErrorCode, InvalidMessageReceived
from mcp_sansio._config import require_count as check_count  # (one rule, one message)

from ._errors import SessionClosed
from ._text import clip, for_log, terminal_safe  # (trio-free: the blocking client's too)

if TYPE_CHECKING:
    from ._config import RateLimit
    from ._session import Session

    SessionHook: TypeAlias = Callable[[Session], Awaitable[None]]
    """``async def on_session(session)``: runs beside a served session; cancelled when it
    closes. An exception is logged and closes that session. (Made on first use at run
    time, see ``__getattr__``.)"""
else:

    def __getattr__(name: str) -> Any:
        # SessionHook names Session, whose module imports this one: the alias is made
        # on first use, with the class itself. (A "Session" string in it would be a
        # forward reference that typing.get_type_hints cannot resolve in a user's
        # module: NameError for a function annotated with mcp_trio.SessionHook.)
        if name == "SessionHook":
            from ._session import Session  # noqa: PLC0415 (it imports this module)

            hook = Callable[[Session], Awaitable[None]]
            globals()[name] = hook
            return hook
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "HTTP_SCHEMES",
    "MAX_PEER_WARNINGS",
    "REFUSED_HOSTS_LOGGED",
    "URL_SCHEMES",
    "WEBSOCKET_SCHEMES",
    "KeyedBuckets",
    "PeerWarnings",
    "RefusedHosts",
    "SessionHook",
    "TokenBucket",
    "check_count",
    "check_seconds",
    "clip",
    "is_internal_failure",
    "is_loopback_host",
    "is_url",
    "is_websocket_url",
    "open_task_nursery",
    "plain_interrupt",
    "run_hook",
    "terminal_safe",
    "turn_away",
    "undecorated",
    "url_host",
]

logger = logging.getLogger("mcp_trio")

HTTP_SCHEMES: Final = ("http://", "https://")
WEBSOCKET_SCHEMES: Final = ("ws://", "wss://")
URL_SCHEMES: Final = HTTP_SCHEMES + WEBSOCKET_SCHEMES
"""The URL targets ``open_client`` takes (compared in any case: RFC 3986 section 3.1)."""


def is_url(target: object) -> TypeGuard[str]:
    """Whether ``target`` is a URL ``open_client`` takes: a ``str`` that starts with
    one of :data:`URL_SCHEMES` (the scheme in any case)."""
    return isinstance(target, str) and target[:8].lower().startswith(URL_SCHEMES)


def is_websocket_url(url: str) -> bool:
    """Whether ``url`` is a ``ws://`` or ``wss://`` one (the scheme in any case)."""
    return url[:6].lower().startswith(WEBSOCKET_SCHEMES)


def is_loopback_host(host: str | None) -> bool:
    """Whether a server bound to ``host`` listens on loopback only: a loopback address,
    or ``localhost`` (any other name may resolve anywhere; ``None`` and ``""`` are every
    interface)."""
    if not host:
        return False
    import ipaddress  # noqa: PLC0415 -- (stdlib, for this check only)

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # (a name: only localhost's is surely loopback)
        return host.lower() == "localhost"


def url_host(host: str) -> str:
    """``host`` as a URL or a ``Host`` header writes it: an IPv6 address in brackets
    (RFC 3986 section 3.2.2)."""
    return f"[{host}]" if ":" in host else host


_TURNED_AWAY: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)
_TURN_AWAY_TIMEOUT: Final = 0.1


async def turn_away(stream: trio.SocketStream, *, tls: bool) -> None:
    """A connection over a server's ``max_connections`` (``serve_http``,
    ``serve_websocket``): say ``503`` with ``Retry-After: 1`` (plain HTTP only: over
    ``tls`` the handshake is the work the bound is there to spare) without reading
    anything, and close. Run in an accept loop, it never waits: a new socket's send
    buffer is empty, and the write is bounded anyway."""
    if not tls:
        with trio.move_on_after(_TURN_AWAY_TIMEOUT), suppress(trio.BrokenResourceError, OSError):
            await stream.send_all(_TURNED_AWAY)
            await stream.send_eof()
    await trio.aclose_forcefully(stream)


def check_seconds(name: str, value: object) -> None:
    """Check a timeout given as an argument: a positive, finite number of seconds
    (not a ``bool``).

    Raises:
        ValueError: it is not (the message names ``name``).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive, finite number of seconds, not {value!r}")


def is_internal_failure(group: BaseExceptionGroup[BaseException]) -> bool:
    """Errors (not cancellations, not KeyboardInterrupt & co) came out of our tasks."""
    if group.subgroup(lambda e: not isinstance(e, Exception | trio.Cancelled)) is not None:
        return False
    return group.subgroup(lambda e: not isinstance(e, trio.Cancelled)) is not None


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _lone_interrupt(group: BaseExceptionGroup[BaseException]) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` in ``group`` when there is nothing else in it (the
    first, if Trio put several), else ``None``."""
    interrupts, rest = group.split(KeyboardInterrupt)
    if interrupts is None or rest is not None:
        return None
    leaf: BaseException = interrupts
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, KeyboardInterrupt)
    return leaf


def plain_interrupt(
    serve: Callable[_P, Awaitable[_R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """Decorate a ``serve_*`` function: Ctrl-C comes out of it as a bare
    ``KeyboardInterrupt``, not one wrapped by the nurseries it passed through, so that
    ``except KeyboardInterrupt:`` around ``trio.run(serve_*)`` catches it (and an
    uncaught one prints one line, not a tree). A group holding anything else beside it
    propagates unchanged.

    Apply it once per entry point, outermost: an entry point that calls another one
    (``Server.serve_stdio`` calls :func:`~mcp_trio.serve_stdio` inside more nurseries)
    calls it :func:`undecorated`."""

    @functools.wraps(serve)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return await serve(*args, **kwargs)
        except BaseExceptionGroup as group:
            interrupt = _lone_interrupt(group)
            if interrupt is None:
                raise
            raise interrupt from None  # (its own traceback still says where it landed)

    return wrapper


def undecorated(
    serve: Callable[_P, Coroutine[Any, Any, _R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """``serve``, a function decorated with :func:`plain_interrupt`, without it (the
    ``__wrapped__`` ``functools.wraps`` keeps): for a caller that applies it itself.

    Raises:
        KeyError: ``serve`` is not decorated (a bug).
    """
    bare: Callable[_P, Coroutine[Any, Any, _R]] = vars(serve)["__wrapped__"]
    return bare


@asynccontextmanager
async def open_task_nursery(
    what: str,
    *,
    cancel_on_exit: bool,
    translate: Callable[[BaseExceptionGroup[BaseException]], BaseException | None] | None = None,
) -> AsyncGenerator[trio.Nursery]:
    """A nursery for our background tasks that does not wrap the body's exception.

    An exception from the ``async with`` body propagates unchanged (it is held while
    the nursery closes, then re-raised). Errors from the background tasks (bugs) are
    raised as :class:`SessionClosed` *from* the exception group, as trio's "Designing
    for multiple errors" recommends; cancellations pass through untouched.

    Args:
        what: names the runtime in the error message.
        cancel_on_exit: cancel the background tasks when the body ends (otherwise the
            body must arrange for them to finish).
        translate: names a known failure of the background tasks better (returns
            the exception to raise from the group, or ``None``).
    """
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                body_error = exc
            finally:
                if cancel_on_exit:
                    nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if not is_internal_failure(group):
            raise
        better = translate(group) if translate is not None else None
        if better is not None:
            raise better from group
        raise SessionClosed(f"internal error in the {what} (see __cause__)") from group
    if body_error is not None:
        raise body_error


async def run_hook(session: Session, hook: SessionHook | None) -> None:
    """Serve ``session`` until it closes, running ``hook`` beside it."""
    async with trio.open_nursery() as nursery:
        if hook is not None:
            nursery.start_soon(_guarded_hook, session, hook)
        await session.wait_closed()
        nursery.cancel_scope.cancel()


async def _guarded_hook(session: Session, hook: SessionHook) -> None:
    try:
        await hook(session)
    except Exception:
        logger.exception("session hook failed; closing the session")
        await session.aclose()


def rearm(scope: trio.CancelScope, deadline: float | None) -> None:
    """Set a timer scope's deadline from a core's ``next_deadline()`` (``None``: never).

    Only when it changed: trio's setter re-registers the deadline on every assignment,
    and this runs after every call into the core.
    """
    value = math.inf if deadline is None else deadline
    if scope.deadline != value:
        scope.deadline = value


@contextmanager
def stdout_fd_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr meanwhile, so that nothing but MCP messages
    reaches stdout: not what code writes below Python (``os.write(1, ...)``, a child
    process), and not what Python still buffered from earlier prints (flushed to stderr
    on the way in). Nothing is done without a stdout at all (fd 1 closed)."""
    try:
        saved = os.dup(1)
    except OSError:
        yield
        return
    os.dup2(2, 1)
    try:
        if sys.stdout is not None:  # (None: Python started with fd 1 closed)
            sys.stdout.flush()
        yield
    finally:
        with suppress(OSError, ValueError):  # (fd 1 is restored whatever the flush says)
            if sys.stdout is not None:
                sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


MAX_PEER_WARNINGS: Final = 64
"""How many warnings about what one peer sent (invalid messages) a session logs; the
same bound as ``HttpClientConfig.max_warnings`` (one HTTP response's warnings)."""


@final
class PeerWarnings:
    """Warnings about what one peer sent, bounded: the first :data:`MAX_PEER_WARNINGS`
    at WARNING (the peer's text clipped and escaped: :func:`for_log`), then one that
    says the rest are only counted, each at DEBUG. A peer sending junk for the life of
    a session floods no log; the first ones show what it does."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0
        """Warnings so far, those past the bound included."""

    def warn(self, what: str, text: str) -> None:
        """Log ``what: text`` (``text`` the peer's) as the bound allows."""
        self.count += 1
        if self.count <= MAX_PEER_WARNINGS:
            logger.warning("%s: %s", what, for_log(text))
            return
        if self.count == MAX_PEER_WARNINGS + 1:
            logger.warning(
                "%s: more than %d from this peer; further ones are only counted (at DEBUG)",
                what,
                MAX_PEER_WARNINGS,
            )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s (%d): %s", what, self.count, for_log(text))

    def invalid(self, what: str, event: InvalidMessageReceived, *, server: bool) -> None:
        """Log ``event`` as :meth:`warn` does (``what``: which peer), unless it reports
        a request a ``server`` answered -32601 (a 2026-07-28 client's ``ping``, a
        method of the other era or of a capability not declared): the client asked,
        the answer tells it, so that is no invalid message, and only DEBUG says it
        (uncounted). A client keeps the warning: a server's request for what the client
        did not declare breaks the negotiation (``lifecycle.mdx``)."""
        error = event.error
        if server and event.request_id is not None and error.code == ErrorCode.METHOD_NOT_FOUND:
            logger.debug("answered -32601: %s", for_log(error.message))
            return
        self.warn(what, error.message)


REFUSED_HOSTS_LOGGED: Final = 16
"""How many distinct ``Host`` values refused ``421`` get a warning (a scanner trying
many names is not logged for each)."""


@final
class RefusedHosts:
    """The ``Host`` values a server's DNS-rebinding guard refused ``421``, for a warning
    once per distinct value (the first :data:`REFUSED_HOSTS_LOGGED` of them, each cut at
    100 characters) that names the setting that would serve it."""

    def __init__(self, source: str, setting: str) -> None:
        self._source = source  # ("", or "WebSocket: " before the message)
        self._setting = setting
        self._seen: set[str] = set()

    def note(self, host: str | None) -> None:
        shown = repr(host if host is None or len(host) <= 100 else host[:100] + "...")
        if shown in self._seen or len(self._seen) >= REFUSED_HOSTS_LOGGED:
            return
        self._seen.add(shown)
        logger.warning(
            "%srefused Host %s with 421 (DNS-rebinding protection): to serve it, add it to "
            "%s (mcp-trio run --allow-host NAME)",
            self._source,
            shown,
            self._setting,
        )


@final
class TokenBucket:
    """The state of one :class:`~mcp_trio.RateLimit` bucket. The caller passes the time
    in (Trio's clock), so the arithmetic needs no clock of its own."""

    __slots__ = ("_limit", "_stamp", "_tokens")

    def __init__(self, limit: RateLimit, now: float) -> None:
        self._limit = limit
        self._tokens = float(limit.burst)
        self._stamp = now

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            limit = self._limit
            self._tokens = min(limit.burst, self._tokens + (now - self._stamp) * limit.per_second)
            self._stamp = now

    def take(self, now: float) -> float:
        """Take a token at ``now``.

        Returns:
            ``0.0`` when one was taken; else the seconds until one will be there
            (nothing taken).
        """
        self._refill(now)
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self._limit.per_second

    def give_back(self) -> None:
        """Return a token taken with :meth:`take` that was not used (never past the
        burst)."""
        self._tokens = min(float(self._limit.burst), self._tokens + 1)


@final
class KeyedBuckets:
    """One :class:`TokenBucket` per key (a client), at most ``limit.max_keys`` of them:
    the least recently used is forgotten past that.

    A key may name an object that lives shorter than the table (a session): pass it as
    ``owner`` and the bucket is kept only while that very object lives, so another
    object that gets the same ``id()`` later starts afresh."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        """The limit each bucket applies."""
        self._buckets: OrderedDict[Hashable, tuple[TokenBucket, weakref.ref[Any] | None]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: Hashable, now: float, owner: object = None) -> float:
        """Take a token from ``key``'s bucket (see :meth:`TokenBucket.take`)."""
        entry = self._buckets.get(key)
        if entry is not None and entry[1] is not None and entry[1]() is not owner:
            entry = None  # (an id() reused by a new object: not the same client)
        if entry is None:
            ref = None if owner is None else weakref.ref(owner)
            entry = (TokenBucket(self.limit, now), ref)
            self._buckets[key] = entry
        self._buckets.move_to_end(key)
        if len(self._buckets) > self.limit.max_keys:
            self._buckets.popitem(last=False)
        return entry[0].take(now)

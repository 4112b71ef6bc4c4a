"""Configuration of a :class:`~mcp_sansio.Connection`: one frozen value, documented defaults."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypedDict, final

import attrs

from ._modern import CACHE_SCOPES, LOG_LEVELS
from ._versions import ALL_VERSIONS, REVISIONS, Era

__all__ = [
    "ConnectionConfig",
    "ConnectionConfigOptions",
    "Role",
    "check_count",
    "check_request_timeout",
    "require_count",
]

Role = Literal["client", "server"]


def _default_info() -> dict[str, Any]:
    return {"name": "mcp-sansio", "version": "0.1.0"}


def _check_versions(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    unknown = [v for v in value if v not in REVISIONS]
    if unknown or not value:
        raise ValueError(f"unknown or empty protocol versions: {unknown or value!r}")


# basic/index.mdx#meta: a key is an optional prefix (dot-separated labels that start
# with a letter and end with a letter or digit, hyphens inside, then "/") and a name
# (empty, or alphanumerics at both ends with "-", "_", "." inside); versioning.mdx:
# an extension id follows these rules "with a mandatory prefix".
# (A pattern string, compiled by re on first use and cached there: most configurations
# declare no extensions, and a compile at import is on every stdio server's cold start.)
_EXTENSION_ID: Final = (
    r"(?:[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)*[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?/"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?"
)


def _check_capabilities(_inst: object, _attr: object, value: object) -> None:
    if not isinstance(value, Mapping) or "extensions" not in value:
        return
    extensions = value["extensions"]
    # (The schema's extensions is {[key]: JSONObject}, optional but not nullable.)
    if not isinstance(extensions, Mapping):
        raise ValueError(f"capabilities.extensions must be an object, not {extensions!r}")
    for key, settings in extensions.items():
        if not isinstance(key, str) or re.fullmatch(_EXTENSION_ID, key) is None:
            raise ValueError(
                f"extension id {key!r} breaks the _meta key naming rule with its mandatory "
                "prefix (basic/versioning#extension-negotiation): dot-separated labels "
                "(a letter first, a letter or digit last, hyphens inside), '/', then a name, "
                "e.g. 'com.example/my-extension'"
            )
        if not isinstance(settings, Mapping):
            raise ValueError(
                f"capabilities.extensions[{key!r}] must be an object (its settings, {{}} "
                f"for none), not {settings!r}"
            )


_ERAS = ("auto", "legacy", "modern")


def _check_era(_inst: object, _attr: object, value: object) -> None:
    if value not in _ERAS:  # (an Era is a str enum: Era.MODERN == "modern")
        names = ", ".join(repr(era) for era in _ERAS)
        raise ValueError(f"era must be one of {names}, not {value!r}")


def _check_timeout(_inst: object, attr: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not _at_least(attr.name, value, 0):  # (NaN too)
        raise ValueError(f"{attr.name} must be 0 or more seconds (or None), not {value!r}")


def _check_request_timeout(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        check_request_timeout(attr.name, value)


def check_request_timeout(name: str, value: object) -> None:
    """Check a request's timeout (not ``None``): seconds, more than 0 (``math.inf``:
    none, as ``None``).

    0 is refused: no answer can come in no time, so such a request would only race its
    own timer (an answer read before the timer fires came back, one read after did not),
    and it means "never" to some (this package's CLI ``--timeout 0``, aiohttp) and "at
    once" to others (trio's ``fail_after``); ``None`` says "no timeout" plainly.

    Raises:
        TypeError: ``value`` is not a number (the message names ``name``).
        ValueError: it is 0, below 0 or NaN (the message names ``name``).
    """
    if not _at_least(name, value, 0) or value == 0:
        raise ValueError(
            f"{name} must be more than 0 seconds (or None for no timeout), not {value!r}"
        )


def _at_least(name: str, value: Any, least: float) -> bool:
    """``value >= least``, for a number of seconds named ``name`` (NaN: ``False``).

    Raises:
        TypeError: ``value`` is no number (``>=`` says so in terms of no name).
    """
    try:
        return bool(value >= least)
    except TypeError:
        raise TypeError(
            f"{name} must be a number of seconds (or None), not {type(value).__name__}"
            f" {value!r:.60}"
        ) from None


def _check_cache_scope(_inst: object, _attr: object, value: str) -> None:
    if not isinstance(value, str) or value not in CACHE_SCOPES:
        raise ValueError(f"cache_scope must be 'public' or 'private', not {value!r}")


def _check_log_level(_inst: object, _attr: object, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or value not in LOG_LEVELS):
        raise ValueError(f"log_level must be one of {LOG_LEVELS} or None, not {value!r}")


def require_count(name: str, value: object, least: int = 1) -> None:
    """Check a bound: an ``int`` (not a ``bool``) of at least ``least``.

    Raises:
        ValueError: it is not (the message names ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of {least} or more, not {value!r}")


def check_count(least: int) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """A validator: :func:`require_count` on the field, named after it."""

    def check(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
        require_count(attr.name, value, least)

    return check


@final
@attrs.frozen(kw_only=True)
class ConnectionConfig:
    """Everything a connection needs to know up front.

    Every bound has a default; ``None`` for a timeout means "no timeout". Each field
    has its own docstring in the source; in brief:

    Attributes:
        implementation: our ``Implementation`` (``clientInfo`` / ``serverInfo``).
        capabilities: our ``ClientCapabilities`` or ``ServerCapabilities``.
        capabilities_source: server: a function returning the current capabilities.
        instructions: server: instructions for the client's model.
        supported_versions: the protocol versions we speak, preferred first.
        era: ``"auto"``, ``"legacy"`` or ``"modern"`` (or an :class:`Era`, equal to its
            name): client: probe or pin the era; server: the eras served.
        request_timeout: seconds a request of ours may wait without progress.
        max_request_time: seconds a request of ours may take in all.
        probe_timeout: client, ``"auto"``: seconds to wait for ``server/discover``.
        max_pending_requests: our requests in flight at most (a further send raises);
            client, modern: also our calls awaiting input at most (a further round
            ends its call with a local -32603, ``data.maxPendingRequests``).
        max_inflight_requests: the peer's requests awaiting our answer at most, those
            it cancelled that we have not answered yet included (-32603 above).
        max_batch_size: the largest batch accepted (2025-03-26).
        max_message_size: the largest message accepted, in bytes.
        max_input_rounds: client, modern: the input-required round that is refused.
        max_input_requests: client, modern: questions (``inputRequests``) one
            input-required round may hold (more: the request fails).
        max_reissues: client, modern: times one request may be re-issued
            (:meth:`Connection.reissue_request`; ``0``: never).
        max_resource_subscriptions: server, modern: URIs one listen may name.
        max_task_ids: server, modern: task ids one listen may name.
        remembered_ids: our finished request ids remembered, to tell late and
            duplicate answers (the last this many to finish; held in two
            generations of up to this many each, and once a late or duplicate
            answer came, an index of the older one: up to three times as many).
        request_state_key: server, modern: the HMAC key of ``requestState``.
        request_state_ttl: server, modern: seconds a ``requestState`` stays valid.
        request_state_clock: server, modern: the clock of its expiry (``None``: ``now``).
        cache_ttl_ms: server, modern: ``ttlMs`` on cacheable results.
        cache_scope: server, modern: ``cacheScope`` on cacheable results.
        log_level: client, modern: the ``logLevel`` of every request envelope.

    Raises:
        TypeError: a timeout that is no number (the message names the field).
        ValueError: a timeout below 0 (or NaN), or a ``request_timeout`` or
            ``max_request_time`` of 0 (see :func:`check_request_timeout`: ``None``
            means no timeout); a bound checked here that is not an
            ``int`` in its range (``bool`` is refused); an unknown ``era``; a
            ``cache_scope`` other than ``"public"`` / ``"private"``, a ``log_level``
            that is not one of the spec's levels (``"debug"`` to ``"emergency"``); an
            extension id (a key of ``capabilities["extensions"]``) without a valid prefix,
            or an ``extensions`` or extension value that is no mapping (``None`` too).
    """

    implementation: dict[str, Any] = attrs.field(factory=_default_info)
    """Our ``Implementation`` object (``clientInfo`` / ``serverInfo``): name, version, ...
    A modern connection encodes it once, for the ``_meta`` it sends with every
    message: change it by building a new config, never in place."""
    capabilities: dict[str, Any] = attrs.field(factory=dict, validator=_check_capabilities)
    """Our capabilities (``ClientCapabilities`` or ``ServerCapabilities``). Each key of
    ``extensions`` is an extension id: a ``_meta`` key with a prefix, such as
    ``"com.example/my-extension"`` (basic/versioning#extension-negotiation), and its
    value an object of the extension's settings (``{}`` for none)."""
    capabilities_source: Callable[[], dict[str, Any]] | None = attrs.field(default=None, eq=False)
    """Server: where our current capabilities are read instead of ``capabilities`` when
    they are declared: as a legacy session initializes, and as a modern request is
    checked (``server/discover``, ``subscriptions/listen``, a method's first request
    on a channel; every request over HTTP). A server that gains tools (prompts,
    resources) after it started serving so declares them to the clients that come
    afterwards; a legacy session keeps what its ``initialize`` result said. Called
    that often: return a value computed when it changed, and build a new object then
    rather than change the one returned before. ``None``: ``capabilities``, fixed (a
    config evolved with other ``capabilities`` sets this to ``None`` too, or they are
    not the ones declared)."""
    instructions: str | None = None
    """Server only: instructions for the client's model."""
    supported_versions: tuple[str, ...] = attrs.field(
        default=ALL_VERSIONS, validator=_check_versions
    )
    """The versions we speak, in order of preference (newest first)."""
    era: Literal["auto", "legacy", "modern"] | Era = attrs.field(
        default="auto", validator=_check_era
    )
    """Client: ``auto`` probes with ``server/discover`` and falls back to
    ``initialize``; ``legacy`` / ``modern`` pin the era. Server: which eras to serve
    (``auto`` serves both on one channel)."""
    request_timeout: float | None = attrs.field(default=None, validator=_check_request_timeout)
    """Seconds a request of ours may wait without any progress before it is cancelled
    (not a modern ``subscriptions/listen``: an open stream may stay quiet for ever).
    More than 0; ``None`` (or ``math.inf``): no timeout."""
    max_request_time: float | None = attrs.field(default=None, validator=_check_request_timeout)
    """Seconds a request of ours may take in total, progress or not (again not a
    ``subscriptions/listen``). More than 0; ``None`` (or ``math.inf``): no limit."""
    probe_timeout: float = attrs.field(default=10.0, validator=_check_timeout)
    """Client, ``auto`` era: seconds to wait for ``server/discover`` before falling back."""
    max_pending_requests: int = 10_000
    """How many requests of ours may be in flight (a further send raises)."""
    max_inflight_requests: int = 10_000
    """How many of the peer's requests may await our answer (further ones get -32603),
    counting those it cancelled that we have not answered yet."""
    max_batch_size: int = 1_000
    """Largest accepted JSON-RPC batch (2025-03-26 only)."""
    max_message_size: int = 4 * 1024 * 1024
    """Largest message accepted, in bytes. A larger one is dropped unread, and the request
    it belongs to (its id is taken from its first or last bytes) fails instead of waiting."""
    max_input_rounds: int = attrs.field(default=8, validator=check_count(1))
    """Client, modern era: the input-required round that is refused: a request's first
    ``max_input_rounds - 1`` rounds are answered, and when the server asks once more the
    request fails (``1``: no round is answered). Also the bound of the rounds of
    questions one task handle answers (the tasks extension)."""
    max_input_requests: int = attrs.field(default=1_024, validator=check_count(1))
    """Client, modern era: most questions (``inputRequests`` entries) one input-required
    round may hold; a round with more ends the request with a local
    :class:`~mcp_sansio.ErrorReceived` (-32603, ``data`` of ``{"maxInputRequests": ...}``)
    before the application sees any of them."""
    max_reissues: int = attrs.field(default=1, validator=check_count(0))
    """Client, modern era: how many times one request of ours may be re-issued
    (:meth:`~mcp_sansio.Connection.reissue_request`: its response stream broke, and
    "clients MUST re-issue it as a new request with a new request ID", 2026-07-28
    changelog); a further re-issue is refused (``0``: never)."""
    max_resource_subscriptions: int = attrs.field(default=1_024, validator=check_count(0))
    """Server, modern era: most URIs one ``subscriptions/listen`` may name
    (``resourceSubscriptions``); more is -32602 (``0``: none)."""
    max_task_ids: int = attrs.field(default=1_024, validator=check_count(0))
    """Server, modern era: most task ids one ``subscriptions/listen`` may name
    (``taskIds``, the tasks extension); more is -32602 (``0``: none)."""
    remembered_ids: int = attrs.field(default=1_024, validator=check_count(0))
    """How many of our finished request ids are remembered to tell late/duplicate
    answers from the peer."""
    request_state_key: bytes = attrs.field(factory=lambda: secrets.token_bytes(32))
    """Server, modern era: HMAC key that protects ``requestState`` (share it across
    processes that serve the same clients)."""
    request_state_ttl: float = 600.0
    """Server, modern era: seconds an input-required ``requestState`` stays valid."""
    request_state_clock: Callable[[], float] | None = attrs.field(default=None, eq=False)
    """Server, modern era: the clock a ``requestState``'s expiry is counted in (e.g.
    ``time.time``), for processes that share ``request_state_key``: a state one seals,
    another opens. ``None``: the ``now`` given to the connection (a clock of one
    process). The Trio binding's servers use wall-clock time."""
    cache_ttl_ms: int = attrs.field(default=0, validator=check_count(0))
    """Server, modern era: ``ttlMs`` on cacheable results."""
    cache_scope: str = attrs.field(default="private", validator=_check_cache_scope)
    """Server, modern era: ``cacheScope`` on cacheable results (``"private"``: the safe
    default; ``"public"`` lets shared caches serve the result across users)."""
    log_level: str | None = attrs.field(default=None, validator=_check_log_level)
    """Client, modern era: ``logLevel`` put in every request envelope (``None``: no logs)."""


class ConnectionConfigOptions(TypedDict, total=False):
    """The keyword arguments of :class:`ConnectionConfig`, each optional and defaulting
    as there, typed as its field is: for a function that passes them on
    (``**options: Unpack[ConnectionConfigOptions]``, as
    ``mcp_trio.Server.connect_in_memory`` does), so that type checkers and editors see
    every name and type. A test keeps it equal to ``ConnectionConfig``'s fields."""

    implementation: dict[str, Any]
    capabilities: dict[str, Any]
    capabilities_source: Callable[[], dict[str, Any]] | None
    instructions: str | None
    supported_versions: tuple[str, ...]
    era: Literal["auto", "legacy", "modern"] | Era
    request_timeout: float | None
    max_request_time: float | None
    probe_timeout: float
    max_pending_requests: int
    max_inflight_requests: int
    max_batch_size: int
    max_message_size: int
    max_input_rounds: int
    max_input_requests: int
    max_reissues: int
    max_resource_subscriptions: int
    max_task_ids: int
    remembered_ids: int
    request_state_key: bytes
    request_state_ttl: float
    request_state_clock: Callable[[], float] | None
    cache_ttl_ms: int
    cache_scope: str
    log_level: str | None

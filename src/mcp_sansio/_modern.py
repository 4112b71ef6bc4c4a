"""The rules of the modern era (MCP revision 2026-07-28) as pure functions and frozen values.

Theory of operation
-------------------
The modern era has no handshake and no session: every request carries its own envelope in
``params._meta`` (protocol version, client capabilities, optionally client identity, log
level and progress token), and the server judges each request on its own
(`basic/index#meta <https://modelcontextprotocol.io/specification/2026-07-28/basic/index#meta>`_).
So the era's rules are naturally *functions of one message*: nothing here keeps state, reads a
clock or does I/O. The stateful :class:`~mcp_sansio._connection.Connection` calls these
functions and owns every table; this module only answers questions such as "is this envelope
acceptable, and if not, which error goes on the wire?".

Everything works on plain decoded JSON (dicts and lists), because the hot path never
structures messages into typed classes. Functions never mutate their arguments: each one that
"adds" something returns a new dict (shallow copies; nested values are shared, so treat them
as read-only).

Errors follow the core's split:

* a problem the *peer* caused is returned as :class:`~mcp_sansio._errors.ErrorData`, ready to be
  sent as the ``error`` member of a JSON-RPC response;
* a problem the *caller* caused (a handler that returns a malformed result, a short key, ...)
  raises :class:`~mcp_sansio._errors.LocalProtocolError`;
* :meth:`RequestStateCodec.open` raises :class:`~mcp_sansio._errors.RemoteProtocolError`
  carrying ``error_code=-32602``, because refusing a ``requestState`` is a decision the caller
  usually wants to unwind through several frames of its own code.

The one piece of cryptography, :class:`RequestStateCodec`, exists because a multi round-trip
request (MRTR) is *stateless on the server*: whatever the server wants to remember between the
first attempt and the retry travels through the client inside ``requestState``, which the
specification tells servers to treat as attacker-controlled input
(`basic/patterns/mrtr <https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr>`_).
The codec seals that state with HMAC-SHA256 and binds it to the originating request, the
caller's principal and an expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, final

import attrs

from mcp_sansio import _json
from mcp_sansio._errors import ErrorCode, ErrorData, LocalProtocolError, RemoteProtocolError
from mcp_sansio._tasks import TASKS_NOTIFICATION, declares_tasks

__all__ = [
    "CACHEABLE_METHODS",
    "CACHE_SCOPES",
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "DEFAULT_CACHE_SCOPE",
    "DEFAULT_TTL_MS",
    "EXTENSION_CACHEABLE_METHODS",
    "INPUT_REQUEST_METHODS",
    "LOG_LEVELS",
    "LOG_LEVEL_KEY",
    "MODERN_ERROR_CODES",
    "MODERN_INPUT_REQUIRED_METHODS",
    "MODERN_REMOVED_METHODS",
    "OTEL_BAGGAGE_KEY",
    "OTEL_TRACEPARENT_KEY",
    "OTEL_TRACESTATE_KEY",
    "PROGRESS_TOKEN_KEY",
    "PROTOCOL_VERSION_KEY",
    "REQUEST_SCOPED_NOTIFICATIONS",
    "RESULT_TYPE_COMPLETE",
    "RESULT_TYPE_INPUT_REQUIRED",
    "SERVER_INFO_KEY",
    "SUBSCRIPTIONS_ACKNOWLEDGED_METHOD",
    "SUBSCRIPTIONS_LISTEN_METHOD",
    "SUBSCRIPTION_ID_KEY",
    "Envelope",
    "InputRequiredResult",
    "RequestStateCodec",
    "SubscriptionFilter",
    "attach_meta",
    "build_acknowledged_notification",
    "build_acknowledged_params",
    "build_discover_result",
    "build_input_required_result",
    "build_listen_closed_result",
    "build_request_meta",
    "build_retry_params",
    "check_client_capabilities",
    "classify_result",
    "decorate_result",
    "elicit_result_problem",
    "input_responses_problem",
    "is_cacheable_request",
    "is_modern_request",
    "may_require_input",
    "parse_input_required",
    "parse_input_responses",
    "parse_listen_filter",
    "parse_request_state",
    "parse_unsupported_version",
    "required_capabilities_for_input_requests",
    "select_version",
    "should_log",
    "tag_subscription_notification",
    "validate_envelope",
]

# ---------------------------------------------------------------------------------------------
# _meta keys (basic/index#meta, "Reserved keys")
# ---------------------------------------------------------------------------------------------

#: Request ``_meta``: the protocol revision this request speaks. Required on every request.
PROTOCOL_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
#: Request ``_meta``: the client's capabilities for *this* request. Required on every request.
CLIENT_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
#: Request ``_meta``: the client's ``Implementation`` (name, version). Optional, SHOULD be sent.
CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
#: Request ``_meta``: the minimum log level for this request. Absent means "no log messages".
LOG_LEVEL_KEY: Final = "io.modelcontextprotocol/logLevel"
#: Result ``_meta``: the server's ``Implementation``. SHOULD be on every result.
SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
#: Notification (and listen-result) ``_meta``: the id of the ``subscriptions/listen`` request.
SUBSCRIPTION_ID_KEY: Final = "io.modelcontextprotocol/subscriptionId"
#: Request ``_meta``: opts the request into ``notifications/progress`` (unchanged from legacy).
PROGRESS_TOKEN_KEY: Final = "progressToken"

#: OpenTelemetry trace context (W3C Trace Context). Passed through untouched: nothing in this
#: module reads, validates or rewrites it, and :func:`attach_meta` keeps it.
OTEL_TRACEPARENT_KEY: Final = "traceparent"
#: OpenTelemetry trace state (W3C Trace Context). Passed through untouched.
OTEL_TRACESTATE_KEY: Final = "tracestate"
#: OpenTelemetry baggage (W3C Baggage). Passed through untouched.
OTEL_BAGGAGE_KEY: Final = "baggage"

# The keys build_request_meta() owns; `extra` may not smuggle in a second copy.
_ENVELOPE_KEYS: Final = frozenset(
    {
        PROTOCOL_VERSION_KEY,
        CLIENT_CAPABILITIES_KEY,
        CLIENT_INFO_KEY,
        LOG_LEVEL_KEY,
        PROGRESS_TOKEN_KEY,
    }
)

# ---------------------------------------------------------------------------------------------
# Methods
# ---------------------------------------------------------------------------------------------

#: Methods of the 2025-11-25 core that 2026-07-28 removed (changelog.mdx, major changes 2, 4,
#: 5, 6 and minor change 11). ``tasks/get`` and ``tasks/cancel`` are not listed: they live on
#: in the ``io.modelcontextprotocol/tasks`` extension.
MODERN_REMOVED_METHODS: Final = frozenset(
    {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
        "tasks/list",
        "tasks/result",
        "notifications/tasks/status",
    }
)

#: The only client requests a server may answer with ``resultType: "input_required"``
#: (basic/patterns/mrtr#supported-requests).
MODERN_INPUT_REQUIRED_METHODS: Final = frozenset({"tools/call", "resources/read", "prompts/get"})

#: The request objects allowed as values of ``inputRequests`` (schema ``InputRequest``). In the
#: modern era these are never sent as JSON-RPC requests; they only travel inside results.
INPUT_REQUEST_METHODS: Final = frozenset(
    {"elicitation/create", "sampling/createMessage", "roots/list"}
)

#: Extension methods whose results extend ``CacheableResult``: the skills extension's
#: (``io.modelcontextprotocol/skills``, ext-skills ``skills.mdx``: "ttlMs and cacheScope are
#: REQUIRED").
EXTENSION_CACHEABLE_METHODS: Final = frozenset({"skills/list", "skills/get"})

#: Methods whose complete results MUST carry ``ttlMs`` and ``cacheScope``
#: (server/utilities/caching#cacheable-results), and those of the extensions.
CACHEABLE_METHODS: Final = (
    frozenset(
        {
            "server/discover",
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "resources/read",
        }
    )
    | EXTENSION_CACHEABLE_METHODS
)

#: Notifications that belong to one in-flight request and so never go on a
#: ``subscriptions/listen`` stream (changelog major change 4; server/utilities/logging).
REQUEST_SCOPED_NOTIFICATIONS: Final = frozenset({"notifications/progress", "notifications/message"})

#: ``subscriptions/listen``: opens a long-lived notification stream.
SUBSCRIPTIONS_LISTEN_METHOD: Final = "subscriptions/listen"
#: The first message of every subscription stream.
SUBSCRIPTIONS_ACKNOWLEDGED_METHOD: Final = "notifications/subscriptions/acknowledged"

#: Error codes only a modern server emits (basic/index#error-codes). Seeing one in answer to a
#: ``server/discover`` probe identifies a modern server (basic/versioning#backward-compatibility).
MODERN_ERROR_CODES: Final = frozenset(
    {
        int(ErrorCode.HEADER_MISMATCH),
        int(ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY),
        int(ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
    }
)

# ---------------------------------------------------------------------------------------------
# Results and caching
# ---------------------------------------------------------------------------------------------

#: ``resultType`` of an ordinary, final result.
RESULT_TYPE_COMPLETE: Final = "complete"
#: ``resultType`` of an MRTR interim result.
RESULT_TYPE_INPUT_REQUIRED: Final = "input_required"

#: The allowed values of ``cacheScope`` (schema ``CacheableResult``).
CACHE_SCOPES: Final = frozenset({"public", "private"})
#: ``ttlMs`` used when neither the result nor the server configuration gives one: "immediately
#: stale", which is also what clients assume when the field is absent (caching#time-to-live).
DEFAULT_TTL_MS: Final = 0
#: ``cacheScope`` used when neither the result nor the server configuration gives one. Private
#: is the safe default: a wrong "public" lets shared caches leak per-user data
#: (caching#security-considerations), a wrong "private" only costs cache hits.
DEFAULT_CACHE_SCOPE: Final = "private"

# ---------------------------------------------------------------------------------------------
# Logging (server/utilities/logging; deprecated in 2026-07-28 but still in force)
# ---------------------------------------------------------------------------------------------

#: The syslog severities, least severe first (RFC 5424 order).
LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_LEVEL_RANK: Final = {level: rank for rank, level in enumerate(LOG_LEVELS)}


def _invalid(message: str) -> ErrorData:
    return ErrorData(code=ErrorCode.INVALID_PARAMS, message=message)


def _is_id(value: object) -> bool:
    """A JSON-RPC id or progress token: a string or an integer, never a bool."""
    return isinstance(value, str | int) and not isinstance(value, bool)


def _is_level(value: object) -> bool:
    return isinstance(value, str) and value in _LEVEL_RANK


# =============================================================================================
# 1-2. The client's envelope
# =============================================================================================


def build_request_meta(
    *,
    protocol_version: str,
    client_capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any] | None,
    log_level: str | None = None,
    progress_token: str | int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``_meta`` object a modern client puts on every request.

    See `basic/index#meta
    <https://modelcontextprotocol.io/specification/2026-07-28/basic/index#meta>`_.

    Args:
        protocol_version: The revision this request speaks, e.g. ``"2026-07-28"``.
        client_capabilities: The client's capabilities for this request (``{}`` = none).
        client_info: The client's ``Implementation`` (``name``, ``version``), or ``None`` when the
            client is configured not to identify itself.
        log_level: The minimum log level the server may emit for this request, or ``None`` for
            no log messages at all.
        progress_token: Opts the request into progress notifications; unique among the
            client's active requests.
        extra: Further keys (e.g. ``traceparent``), copied as they are.

    Returns:
        A new dict. Nested values are shared with the arguments, not copied.

    Raises:
        LocalProtocolError: An argument has the wrong type, ``log_level`` is not one of
            :data:`LOG_LEVELS`, or ``extra`` contains one of the envelope's own keys.
    """
    if not isinstance(protocol_version, str) or not protocol_version:
        raise LocalProtocolError("protocol_version must be a non-empty string")
    if not (type(client_capabilities) is dict or isinstance(client_capabilities, Mapping)):
        raise LocalProtocolError("client_capabilities must be a mapping")
    if client_info is not None and not (
        type(client_info) is dict or isinstance(client_info, Mapping)
    ):
        raise LocalProtocolError("client_info must be a mapping or None")
    if log_level is not None and not _is_level(log_level):
        raise LocalProtocolError(f"log_level must be one of {LOG_LEVELS}, not {log_level!r}")
    if progress_token is not None and not _is_id(progress_token):
        raise LocalProtocolError("progress_token must be a string or an integer")
    meta: dict[str, Any] = {}
    if extra:
        clash = _ENVELOPE_KEYS.intersection(extra)
        if clash:
            raise LocalProtocolError(
                f"extra must not contain envelope keys {sorted(clash)}; pass them as arguments"
            )
        meta.update(extra)
    meta[PROTOCOL_VERSION_KEY] = protocol_version
    meta[CLIENT_CAPABILITIES_KEY] = client_capabilities
    if client_info is not None:
        meta[CLIENT_INFO_KEY] = client_info
    if log_level is not None:
        meta[LOG_LEVEL_KEY] = log_level
    if progress_token is not None:
        meta[PROGRESS_TOKEN_KEY] = progress_token
    return meta


def attach_meta(params: Mapping[str, Any] | None, meta: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``meta`` into ``params["_meta"]``, returning new dicts.

    Keys already in ``params["_meta"]`` that ``meta`` does not name (``traceparent``, vendor
    keys, ...) are kept; where both name a key, ``meta`` wins.

    Args:
        params: The request or notification params, or ``None`` for none.
        meta: The keys to add, e.g. from :func:`build_request_meta`.

    Returns:
        A new params dict with a new ``_meta`` dict. Neither argument is modified.

    Raises:
        LocalProtocolError: ``params`` is not a mapping, or its ``_meta`` is not a mapping.
    """
    if params is None:
        return {"_meta": dict(meta)}
    if not (type(params) is dict or isinstance(params, Mapping)):
        raise LocalProtocolError("params must be a mapping or None")
    existing = params.get("_meta")
    if existing is None:
        merged = dict(meta)
    elif type(existing) is dict or isinstance(existing, Mapping):
        merged = {**existing, **meta}
    else:
        raise LocalProtocolError("params['_meta'] must be a mapping")
    out = dict(params)
    out["_meta"] = merged
    return out


def is_modern_request(params: Any) -> bool:
    """Whether a request carries the modern per-request envelope.

    A dual-era server serves such a request statelessly; an ``initialize`` request selects
    legacy semantics instead (basic/versioning, "A dual-era server selects its behavior from
    how the client opens").

    Args:
        params: The request's ``params`` as decoded from the wire.

    Returns:
        ``True`` if ``params._meta`` names a protocol version (of any type: a malformed
        envelope is still a modern request, and :func:`validate_envelope` reports it).
    """
    if not (type(params) is dict or isinstance(params, Mapping)):
        return False
    meta = params.get("_meta")
    return (type(meta) is dict or isinstance(meta, Mapping)) and PROTOCOL_VERSION_KEY in meta


# =============================================================================================
# 3. The server's validation ladder
# =============================================================================================


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
@final
class Envelope:
    """A request's validated modern envelope (``params._meta``).

    The dicts are the ones decoded from the wire, not copies: treat them as read-only.

    Attributes:
        protocol_version: the revision the request speaks; one of the server's
            accepted versions.
        client_capabilities: the client's capabilities for this request. Never
            inferred from earlier requests.
        client_info: the client's self-reported ``Implementation``, or ``None``. For
            display only.
        log_level: the minimum log level for this request; ``None`` means send no
            ``notifications/message``.
        progress_token: the request's progress token, or ``None`` if it did not ask
            for progress.
        meta: the whole ``_meta`` object, including keys this module does not interpret.
    """

    __slots__ = (
        "client_capabilities",
        "client_info",
        "log_level",
        "meta",
        "progress_token",
        "protocol_version",
    )

    def __init__(
        self,
        *,
        protocol_version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        log_level: str | None,
        progress_token: str | int | None,
        meta: dict[str, Any],
    ) -> None:
        self.protocol_version: Final = protocol_version
        self.client_capabilities: Final = client_capabilities
        self.client_info: Final = client_info
        self.log_level: Final = log_level
        self.progress_token: Final = progress_token
        self.meta: Final = meta


def validate_envelope(
    method: str,
    params: Any,
    *,
    supported_versions: Sequence[str],
    stateless_versions: Collection[str] | None = None,
) -> Envelope | ErrorData:
    """Check a modern request's envelope, in the order the specification implies.

    The ladder (first failing rung wins):

    1. ``method`` was removed in 2026-07-28 (``initialize``, ``ping``, ...) → ``-32601``. For
       ``initialize`` the message and ``data.supported`` name the server's versions, because a
       legacy client has no other way to learn them (basic/versioning).
    2. ``params`` or ``params._meta`` missing or not an object → ``-32602``.
    3. ``protocolVersion`` missing or not a string, ``clientCapabilities`` missing or not an
       object → ``-32602`` (basic/index#meta: "A request missing any required field is
       malformed").
    4. The version is not one of the accepted versions → ``-32022`` with
       ``data={"supported": [...], "requested": v}`` (basic/versioning). Versions are compared
       as members of an enumerated set, never as dates. A version the server speaks only
       through ``initialize`` (2025-11-25 on a dual-era server) is in ``supported`` too, and
       the message says so: it is served through the handshake, not per request.
    5. ``clientInfo`` present but not an object, ``logLevel`` present but not a known level
       (server/utilities/logging#error-handling), ``progressToken`` present but not a string or
       integer → ``-32602``. These come after the version check because their meaning belongs
       to the version.

    Only requests carry an envelope: do not call this for notifications.

    Args:
        method: The request's method.
        params: The request's ``params`` as decoded from the wire (``None`` if absent).
        supported_versions: Every version the server speaks, in its order of preference; this
            is the ``supported`` list of the ``-32022`` error.
        stateless_versions: The versions accepted *in an envelope* (a dual-era server lists
            only its modern versions here, since a legacy version needs ``initialize``).
            Defaults to ``supported_versions``.

    Returns:
        The :class:`Envelope`, or the :class:`ErrorData` to answer with.
    """
    if method in MODERN_REMOVED_METHODS:
        if method == "initialize":
            versions = ", ".join(supported_versions)
            return ErrorData(
                code=ErrorCode.METHOD_NOT_FOUND,
                message=f"initialize is not used by this server; supported versions: {versions}",
                data={"supported": list(supported_versions)},
            )
        return ErrorData(
            code=ErrorCode.METHOD_NOT_FOUND,
            message=f"Method not found: {method} was removed in protocol version 2026-07-28",
        )
    if not (type(params) is dict or isinstance(params, Mapping)):
        return _invalid("Request params must be an object carrying _meta")
    meta = params.get("_meta")
    if meta is None:
        return _invalid(f"Missing params._meta: {PROTOCOL_VERSION_KEY} is required")
    if not (type(meta) is dict or isinstance(meta, Mapping)):
        return _invalid("params._meta must be an object")
    if PROTOCOL_VERSION_KEY not in meta:
        return _invalid(f"Missing required _meta field {PROTOCOL_VERSION_KEY}")
    version = meta[PROTOCOL_VERSION_KEY]
    if not isinstance(version, str):
        return _invalid(f"_meta field {PROTOCOL_VERSION_KEY} must be a string")
    if CLIENT_CAPABILITIES_KEY not in meta:
        return _invalid(f"Missing required _meta field {CLIENT_CAPABILITIES_KEY}")
    capabilities = meta[CLIENT_CAPABILITIES_KEY]
    if not (type(capabilities) is dict or isinstance(capabilities, Mapping)):
        return _invalid(f"_meta field {CLIENT_CAPABILITIES_KEY} must be an object")
    accepted = supported_versions if stateless_versions is None else stateless_versions
    if version not in accepted:
        message = "Unsupported protocol version"
        if version in supported_versions:
            # A legacy version this server speaks, but only after an initialize handshake.
            # data.supported still lists it: that is how a dual-era client learns to fall
            # back to initialize (a version unknown here is just "Unsupported").
            per_request = ", ".join(v for v in supported_versions if v in accepted)
            message = (
                f"Unsupported protocol version in a request's _meta: {version} is served "
                "through the initialize handshake (send initialize first), not per request"
                + (f"; per request this server accepts {per_request}" if per_request else "")
            )
        return ErrorData(
            code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            message=message,
            data={"supported": list(supported_versions), "requested": version},
        )
    client_info = meta.get(CLIENT_INFO_KEY)
    if CLIENT_INFO_KEY in meta and not (
        type(client_info) is dict or isinstance(client_info, Mapping)
    ):
        return _invalid(f"_meta field {CLIENT_INFO_KEY} must be an object")
    log_level = meta.get(LOG_LEVEL_KEY)
    if LOG_LEVEL_KEY in meta and not _is_level(log_level):
        return _invalid(f"Invalid log level {log_level!r}; expected one of {', '.join(LOG_LEVELS)}")
    progress_token = meta.get(PROGRESS_TOKEN_KEY)
    if PROGRESS_TOKEN_KEY in meta and not _is_id(progress_token):
        return _invalid("_meta field progressToken must be a string or an integer")
    return Envelope(
        protocol_version=version,
        client_capabilities=capabilities,  # type: ignore[arg-type]  # decoded JSON: a dict
        client_info=client_info,
        log_level=log_level,
        progress_token=progress_token,
        meta=meta,  # type: ignore[arg-type]  # decoded JSON: a dict
    )


def _missing_capabilities(
    declared: Mapping[str, Any], required: Mapping[str, Any]
) -> dict[str, Any]:
    missing: dict[str, Any] = {}
    for name, want in required.items():
        if not (type(want) is dict or isinstance(want, Mapping)):
            raise LocalProtocolError(f"required capability {name!r} must be a mapping")
        have = declared.get(name)
        if not (type(have) is dict or isinstance(have, Mapping)):
            missing[name] = dict(want)
            continue
        sub = _missing_capabilities(have, want)
        if sub:
            missing[name] = sub
    return missing


def elicitation_modes(elicitation: object) -> frozenset[str]:
    """The elicitation modes a client's ``elicitation`` capability declares: an object
    naming neither ``form`` nor ``url`` declares form mode (client/elicitation#capabilities);
    anything but an object declares none."""
    if not isinstance(elicitation, Mapping):
        return frozenset()
    return frozenset(m for m in ("form", "url") if m in elicitation) or frozenset({"form"})


def check_client_capabilities(
    envelope_caps: Mapping[str, Any], required: Mapping[str, Any]
) -> ErrorData | None:
    """Whether the request's declared capabilities cover what the server needs.

    ``required`` has the shape of ``ClientCapabilities``; a capability is satisfied when the
    client declared it as an object, and, recursively, each sub-capability named in
    ``required`` too (``{"sampling": {"tools": {}}}`` needs ``sampling.tools``). An
    ``elicitation`` object with neither ``form`` nor ``url`` counts as ``form`` only
    (client/elicitation#capabilities).

    Args:
        envelope_caps: :attr:`Envelope.client_capabilities`.
        required: What processing this request needs.

    Returns:
        ``None`` if everything is declared; otherwise the ``-32021`` error whose
        ``data.requiredCapabilities`` lists the missing capabilities (basic/index#meta; schema
        ``MissingRequiredClientCapabilityError``).

    Raises:
        LocalProtocolError: A value in ``required`` is not a mapping.
    """
    elicitation = envelope_caps.get("elicitation")
    if (
        isinstance(elicitation, Mapping)
        and "form" not in elicitation
        and "form" in elicitation_modes(elicitation)
    ):
        envelope_caps = {**envelope_caps, "elicitation": {**elicitation, "form": {}}}
    missing = _missing_capabilities(envelope_caps, required)
    if not missing:
        return None
    names = ", ".join(sorted(missing))
    return ErrorData(
        code=ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"This request requires client capabilities the client did not declare: {names}",
        data={"requiredCapabilities": missing},
    )


def required_capabilities_for_input_requests(
    input_requests: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The client capabilities a set of ``inputRequests`` relies on.

    A server MUST NOT send input requests the client has not declared support for
    (mrtr#server-requirements-basic-workflow). Feed the answer to
    :func:`check_client_capabilities` before :func:`build_input_required_result`.

    Args:
        input_requests: The planned ``inputRequests`` map.

    Returns:
        A ``ClientCapabilities``-shaped dict: ``elicitation.<mode>`` per elicitation mode
        (``form`` when ``mode`` is absent), ``sampling`` (with ``tools`` when the request
        carries ``tools`` or ``toolChoice``, ``context`` when ``includeContext`` is set to
        anything but ``"none"``), ``roots``.

    Raises:
        LocalProtocolError: An entry is not one of :data:`INPUT_REQUEST_METHODS`.
    """
    needed: dict[str, dict[str, Any]] = {}
    for key, request in input_requests.items():
        method = (
            request.get("method")
            if (type(request) is dict or isinstance(request, Mapping))
            else None
        )
        params = (
            request.get("params")
            if (type(request) is dict or isinstance(request, Mapping))
            else None
        )
        if not (type(params) is dict or isinstance(params, Mapping)):
            params = {}
        if method == "elicitation/create":
            mode = params.get("mode", "form")
            needed.setdefault("elicitation", {})[str(mode)] = {}
        elif method == "sampling/createMessage":
            sampling = needed.setdefault("sampling", {})
            if "tools" in params or "toolChoice" in params:
                sampling["tools"] = {}
            if params.get("includeContext", "none") != "none":
                sampling["context"] = {}
        elif method == "roots/list":
            needed.setdefault("roots", {})
        else:
            raise LocalProtocolError(f"inputRequests[{key!r}] has unsupported method {method!r}")
    return needed


# =============================================================================================
# 5. Results
# =============================================================================================


def may_require_input(method: str) -> bool:
    """Whether a server may answer ``method`` with an input-required result.

    Args:
        method: A client request method.

    Returns:
        ``True`` for ``tools/call``, ``resources/read`` and ``prompts/get`` only
        (mrtr#supported-requests).
    """
    return method in MODERN_INPUT_REQUIRED_METHODS


def _check_ttl(ttl_ms: object) -> int:
    if not isinstance(ttl_ms, int) or isinstance(ttl_ms, bool) or ttl_ms < 0:
        raise LocalProtocolError(f"ttlMs must be an integer >= 0, not {ttl_ms!r}")
    return ttl_ms


def _check_scope(scope: object) -> str:
    if not isinstance(scope, str) or scope not in CACHE_SCOPES:
        raise LocalProtocolError(f"cacheScope must be 'public' or 'private', not {scope!r}")
    return scope


def decorate_result(
    method: str,
    result: Mapping[str, Any],
    *,
    server_info: Mapping[str, Any] | None,
    ttl_ms: int | None = None,
    cache_scope: str | None = None,
) -> dict[str, Any]:
    """Add the fields every modern result carries.

    * ``resultType``: ``"complete"`` when absent; an existing string is kept (``"input_required"``
      or an extension's type).
    * ``_meta["io.modelcontextprotocol/serverInfo"]`` when ``server_info`` is given and the
      result does not already name one (basic/index#meta, per-response fields).
    * For a complete result of a :data:`CACHEABLE_METHODS` method, ``ttlMs`` and
      ``cacheScope`` (both required there, server/utilities/caching). Precedence: the value
      already in the result (a handler may set per-page TTLs), then ``ttl_ms`` /
      ``cache_scope``, then :data:`DEFAULT_TTL_MS` / :data:`DEFAULT_CACHE_SCOPE`.
    * An input-required result carries no caching hints: any are removed.

    Args:
        method: The request's method.
        result: The handler's result object.
        server_info: The server's ``Implementation``, or ``None`` if configured not to send it.
        ttl_ms: The server's configured freshness hint for this method, in ms (>= 0).
        cache_scope: The server's configured scope for this method, ``"public"``/``"private"``.

    Returns:
        A new dict; ``result`` is not modified.

    Raises:
        LocalProtocolError: ``result`` or its ``_meta`` is not a mapping; ``resultType`` is not
            a string; ``"input_required"`` for a method that may not require input; a ttl or
            scope (configured or in the result) is invalid.
    """
    if ttl_ms is not None:
        _check_ttl(ttl_ms)
    if cache_scope is not None:
        _check_scope(cache_scope)
    if not (type(result) is dict or isinstance(result, Mapping)):
        raise LocalProtocolError("result must be a mapping")
    out = dict(result)
    result_type = out.setdefault("resultType", RESULT_TYPE_COMPLETE)
    if not isinstance(result_type, str):
        raise LocalProtocolError("resultType must be a string")
    if result_type == RESULT_TYPE_INPUT_REQUIRED and not may_require_input(method):
        raise LocalProtocolError(f"{method} may not return an input_required result")
    if server_info is not None:
        existing = out.get("_meta")
        if existing is None:
            out["_meta"] = {SERVER_INFO_KEY: server_info}
        elif type(existing) is dict or isinstance(existing, Mapping):
            out["_meta"] = {SERVER_INFO_KEY: server_info, **existing}
        else:
            raise LocalProtocolError("result['_meta'] must be a mapping")
    if result_type == RESULT_TYPE_INPUT_REQUIRED:
        out.pop("ttlMs", None)
        out.pop("cacheScope", None)
    elif result_type == RESULT_TYPE_COMPLETE and method in CACHEABLE_METHODS:
        default_ttl = DEFAULT_TTL_MS if ttl_ms is None else ttl_ms
        default_scope = DEFAULT_CACHE_SCOPE if cache_scope is None else cache_scope
        out["ttlMs"] = _check_ttl(out.get("ttlMs", default_ttl))
        out["cacheScope"] = _check_scope(out.get("cacheScope", default_scope))
    return out


def build_discover_result(
    *,
    supported_versions: Sequence[str],
    capabilities: Mapping[str, Any],
    server_info: Mapping[str, Any] | None,
    instructions: str | None = None,
    ttl_ms: int | None = None,
    cache_scope: str | None = None,
) -> dict[str, Any]:
    """The result of ``server/discover`` (server/discover#discoverresult).

    Args:
        supported_versions: Every version the server speaks, most preferred first. A dual-era
            server may list legacy versions too; a client picking one then uses ``initialize``.
        capabilities: The server's ``ServerCapabilities``.
        server_info: The server's ``Implementation`` (SHOULD be given), or ``None``.
        instructions: Optional guidance for the model.
        ttl_ms: Freshness hint; :data:`DEFAULT_TTL_MS` when ``None``.
        cache_scope: Cache scope; :data:`DEFAULT_CACHE_SCOPE` when ``None``.

    Returns:
        A new ``DiscoverResult`` dict, decorated as by :func:`decorate_result`.

    Raises:
        LocalProtocolError: ``supported_versions`` is empty or holds a non-string,
            ``capabilities`` is not a mapping, ``instructions`` is not a string, or a caching
            hint is invalid.
    """
    versions = list(supported_versions)
    if not versions or not all(isinstance(v, str) for v in versions):
        raise LocalProtocolError("supported_versions must be a non-empty sequence of strings")
    if not (type(capabilities) is dict or isinstance(capabilities, Mapping)):
        raise LocalProtocolError("capabilities must be a mapping")
    result: dict[str, Any] = {
        "resultType": RESULT_TYPE_COMPLETE,
        "supportedVersions": versions,
        "capabilities": capabilities,
    }
    if instructions is not None:
        if not isinstance(instructions, str):
            raise LocalProtocolError("instructions must be a string")
        result["instructions"] = instructions
    return decorate_result(
        "server/discover",
        result,
        server_info=server_info,
        ttl_ms=ttl_ms,
        cache_scope=cache_scope,
    )


def build_listen_closed_result(
    subscription_id: str | int, *, server_info: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The result that ends a ``subscriptions/listen`` stream gracefully.

    See subscriptions#graceful-closure: a server ending a subscription on its own initiative
    SHOULD answer the listen request with this before closing the stream.

    Args:
        subscription_id: The JSON-RPC id of the ``subscriptions/listen`` request.
        server_info: The server's ``Implementation``, or ``None``.

    Returns:
        ``{"resultType": "complete", "_meta": {subscriptionId, serverInfo?}}``.

    Raises:
        LocalProtocolError: ``subscription_id`` is not a string or integer.
    """
    if not _is_id(subscription_id):
        raise LocalProtocolError("subscription_id must be a string or an integer")
    meta: dict[str, Any] = {SUBSCRIPTION_ID_KEY: subscription_id}
    if server_info is not None:
        meta[SERVER_INFO_KEY] = server_info
    return {"resultType": RESULT_TYPE_COMPLETE, "_meta": meta}


def _invalid_result(message: str, data: Any = None) -> ErrorData:
    # There is no wire code for "the peer sent a bad result"; -32603 marks it as an internal
    # failure of this exchange. The caller surfaces it locally, never sends it back, and
    # never as the peer's error (the connection: ErrorReceived(local=True)).
    return ErrorData(code=ErrorCode.INTERNAL_ERROR, message=message, data=data)


def classify_result(
    result: Any, *, method: str | None = None
) -> Literal["complete", "input_required"] | ErrorData:
    """What kind of result a client received (basic/index#resulttype).

    Args:
        result: The ``result`` member of a response, as decoded.
        method: The request's method; if given, an input-required result for a method that may
            not require input is refused.

    Returns:
        ``"complete"`` (also when ``resultType`` is absent: servers of earlier revisions omit
        it) or ``"input_required"``; otherwise an :class:`ErrorData` (code ``-32603``) for the
        caller to surface locally: a result that is not an object, a ``resultType`` the client
        does not recognize (which MUST be considered invalid), or a forbidden input-required
        result.
    """
    if not (type(result) is dict or isinstance(result, Mapping)):
        return _invalid_result("Invalid result: not an object")
    result_type = result.get("resultType", RESULT_TYPE_COMPLETE)
    if result_type == RESULT_TYPE_COMPLETE:
        return "complete"
    if result_type == RESULT_TYPE_INPUT_REQUIRED:
        if method is not None and not may_require_input(method):
            return _invalid_result(
                f"Invalid result: {method} may not return input_required",
                {"resultType": result_type},
            )
        return "input_required"
    return _invalid_result(
        f"Invalid result: unrecognized resultType {result_type!r}", {"resultType": result_type}
    )


# =============================================================================================
# 6. Logging
# =============================================================================================


def should_log(request_level: str | None, message_level: str) -> bool:
    """Whether a server may emit a ``notifications/message`` for a request.

    Only if the request set ``io.modelcontextprotocol/logLevel`` (server/utilities/logging:
    "The server MUST NOT emit notifications/message for a request that does not include this
    field"), and only at or above that level. Such messages go on that request's response
    stream only, never on a ``subscriptions/listen`` stream.

    Args:
        request_level: :attr:`Envelope.log_level`.
        message_level: The severity of the message to emit.

    Returns:
        ``True`` if the message may be sent.

    Raises:
        LocalProtocolError: Either level is not one of :data:`LOG_LEVELS`.
    """
    if not _is_level(message_level):
        raise LocalProtocolError(f"unknown log level {message_level!r}")
    if request_level is None:
        return False
    if not _is_level(request_level):
        raise LocalProtocolError(f"unknown log level {request_level!r}")
    return _LEVEL_RANK[message_level] >= _LEVEL_RANK[request_level]


# =============================================================================================
# 7. Multi round-trip requests
# =============================================================================================

_STATE_VERSION: Final = 1
_STATE_LABEL: Final = b"mcp-sansio requestState v1\x00"
# Top-level params that legitimately change between the first attempt and the retry.
_DIGEST_EXCLUDED: Final = frozenset({"_meta", "inputResponses", "requestState"})
# orjson refuses to serialize deeper than 254 levels; stop well before.
_MAX_DEPTH: Final = 200
_MIN_KEY_BYTES: Final = 16


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(value: Any, depth: int = 0) -> Any:
    """A copy with every object's keys sorted, so equal JSON digests equally."""
    if depth > _MAX_DEPTH:
        raise ValueError("value is nested too deeply")
    if type(value) is dict or isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("object keys must be strings")
        return {k: _canonical(value[k], depth + 1) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_canonical(v, depth + 1) for v in value]
    return value


def _dumps(value: Any) -> bytes:
    try:
        return _json.dumps(value)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise ValueError(str(exc)) from exc


@final
@attrs.frozen
class RequestStateCodec:
    """Seals and opens MRTR ``requestState`` strings.

    Wire format (opaque to clients, documented for operators)::

        <payload>.<mac>

    ``payload`` is the unpadded base64url of the JSON object
    ``{"v": 1, "d": <digest>, "x": <expiry>, "s": <state>}`` where ``d`` is the unpadded
    base64url SHA-256 of the JSON array ``[method, principal, params]`` (``params`` without the
    top-level ``_meta``, ``inputResponses`` and ``requestState`` members, object keys sorted
    recursively), ``x`` is ``now + ttl`` in the caller's clock, and ``s`` is the application
    state. ``mac`` is the unpadded base64url HMAC-SHA256, under ``key``, of
    ``b"mcp-sansio requestState v1\\x00" + payload``. The state is integrity-protected, not
    encrypted: do not put secrets in it.

    This implements the SHOULDs of mrtr#server-requirements-basic-workflow: the principal, a
    short expiry and the originating request are all bound and checked. It does not make a
    state single-use; a server that needs that must track redemptions itself.

    Error handling: :meth:`open` raises :class:`RemoteProtocolError` with
    ``error_code=-32602`` for anything the client could have caused; :class:`LocalProtocolError`
    means the caller misused the codec. Anything else is a bug.
    """

    key: bytes = attrs.field(repr=False)
    """The HMAC key, at least 16 bytes (32 random bytes recommended)."""
    ttl: float = attrs.field(default=300.0, kw_only=True)
    """How long a sealed state stays valid, in the caller's clock units (seconds)."""
    previous_keys: tuple[bytes, ...] = attrs.field(default=(), kw_only=True, repr=False)
    """Older keys still accepted by :meth:`open` (never used to seal), for key rotation."""
    max_size: int = attrs.field(default=64 * 1024, kw_only=True)
    """The longest token sealed or accepted, in characters."""

    def __attrs_post_init__(self) -> None:
        for key in (self.key, *self.previous_keys):
            if not isinstance(key, bytes) or len(key) < _MIN_KEY_BYTES:
                raise LocalProtocolError(
                    f"requestState keys must be at least {_MIN_KEY_BYTES} bytes"
                )
        if not isinstance(self.ttl, int | float) or not (0 < self.ttl < math.inf):
            raise LocalProtocolError("ttl must be a positive, finite number")
        if not isinstance(self.max_size, int) or self.max_size < 1:
            raise LocalProtocolError("max_size must be a positive integer")

    @staticmethod
    def _mac(key: bytes, payload: str) -> str:
        mac = hmac.new(key, _STATE_LABEL + payload.encode("ascii"), hashlib.sha256)
        return _b64encode(mac.digest())

    @staticmethod
    def _digest(method: str, params: Mapping[str, Any] | None, principal: str | None) -> str:
        if params is None:
            params = {}
        if not (type(params) is dict or isinstance(params, Mapping)):
            raise ValueError("params must be an object")
        salient = {k: v for k, v in params.items() if k not in _DIGEST_EXCLUDED}
        raw = _dumps([method, principal, _canonical(salient)])
        return _b64encode(hashlib.sha256(raw).digest())

    def seal(
        self,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        state: Any,
        now: float,
        principal: str | None = None,
    ) -> str:
        """Seal application state into a ``requestState`` string.

        Args:
            method: The method of the request being answered with input-required.
            params: That request's params (``_meta``, ``inputResponses`` and ``requestState``
                are ignored, so a retry's params match).
            state: Any JSON-serializable value the server wants back on the retry.
            now: The current time, in the same clock :meth:`open` will be given.
            principal: The authenticated principal, or ``None`` if there is none; the state is
                refused when presented by a different one.

        Returns:
            An opaque, URL-safe ASCII string.

        Raises:
            LocalProtocolError: ``now`` is not finite, ``state`` or ``params`` cannot be
                serialized, or the token would exceed :attr:`max_size`.
        """
        if not isinstance(now, int | float) or not math.isfinite(now):
            raise LocalProtocolError("now must be a finite number")
        try:
            digest = self._digest(method, params, principal)
            raw = _dumps({"v": _STATE_VERSION, "d": digest, "x": now + self.ttl, "s": state})
        except ValueError as exc:
            raise LocalProtocolError(f"cannot seal requestState: {exc}") from exc
        payload = _b64encode(raw)
        token = f"{payload}.{self._mac(self.key, payload)}"
        if len(token) > self.max_size:
            raise LocalProtocolError(
                f"sealed requestState is {len(token)} characters, over max_size={self.max_size}"
            )
        return token

    def open(
        self,
        token: Any,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        now: float,
        principal: str | None = None,
    ) -> Any:
        """Verify a ``requestState`` from a retry and return the state sealed in it.

        Args:
            token: The ``requestState`` member of the retry's params, as decoded (any type).
            method: The retry's method.
            params: The retry's params.
            now: The current time, same clock as :meth:`seal`.
            principal: The retry's authenticated principal, or ``None``.

        Returns:
            The ``state`` given to :meth:`seal` (as JSON decodes it: tuples become lists).

        Raises:
            RemoteProtocolError: ``error_code=-32602``: the token is not a string, too long,
                malformed, tampered with, sealed under another key, issued for a different
                request or principal, or expired (``now >= expiry``).
            LocalProtocolError: ``now`` is not finite.
        """
        if not isinstance(now, int | float) or not math.isfinite(now):
            raise LocalProtocolError("now must be a finite number")

        def refuse(why: str) -> RemoteProtocolError:
            return RemoteProtocolError(
                f"Invalid requestState: {why}", error_code=ErrorCode.INVALID_PARAMS
            )

        if not isinstance(token, str):
            raise refuse("not a string")
        if len(token) > self.max_size:
            raise refuse("too long")
        payload, dot, mac = token.partition(".")
        if not dot or not token.isascii():
            raise refuse("malformed")
        # Compare the *encoded* MAC so that no second spelling of a valid token is accepted.
        if not any(
            hmac.compare_digest(self._mac(key, payload), mac)
            for key in (self.key, *self.previous_keys)
        ):
            raise refuse("verification failed")
        try:
            body = _json.loads(_b64decode(payload))
        except ValueError:  # binascii.Error and JSONDecodeError are ValueErrors
            raise refuse("malformed") from None
        if (
            not isinstance(body, dict)
            or body.get("v") != _STATE_VERSION
            or not isinstance(body.get("d"), str)
            or not isinstance(body.get("x"), int | float)
            or isinstance(body.get("x"), bool)
            or "s" not in body
        ):
            raise refuse("malformed")
        try:
            digest = self._digest(method, params, principal)
        except ValueError:
            raise refuse("issued for a different request") from None
        if not hmac.compare_digest(digest, body["d"]):
            raise refuse("issued for a different request")
        if now >= body["x"]:
            raise refuse("expired")
        return body["s"]


def build_input_required_result(
    input_requests: Mapping[str, Mapping[str, Any]] | None,
    request_state: str | None,
) -> dict[str, Any]:
    """An ``InputRequiredResult`` (mrtr#inputrequiredresult).

    The caller checks first that the method may require input (:func:`may_require_input`; also
    enforced by :func:`decorate_result`) and that the client declared the capabilities the
    requests need (:func:`required_capabilities_for_input_requests`).

    Args:
        input_requests: Server-assigned key → ``{"method": ..., "params": ...}``, each an
            ``elicitation/create``, ``sampling/createMessage`` or ``roots/list`` request.
            ``None`` or empty for none.
        request_state: An opaque state string (e.g. from :meth:`RequestStateCodec.seal`), or
            ``None``.

    Returns:
        ``{"resultType": "input_required", "inputRequests"?: {...}, "requestState"?: "..."}``.
        Pass it through :func:`decorate_result` to add ``serverInfo``.

    Raises:
        LocalProtocolError: Both are absent (at least one is required), a request is not one
            of :data:`INPUT_REQUEST_METHODS`, lacks the ``params`` object its method requires,
            or ``request_state`` is not a string.
    """
    result: dict[str, Any] = {"resultType": RESULT_TYPE_INPUT_REQUIRED}
    if input_requests:
        requests: dict[str, Any] = {}
        for key, request in input_requests.items():
            if not isinstance(key, str):
                raise LocalProtocolError("inputRequests keys must be strings")
            if not (type(request) is dict or isinstance(request, Mapping)):
                raise LocalProtocolError(f"inputRequests[{key!r}] must be a mapping")
            method = request.get("method")
            if method not in INPUT_REQUEST_METHODS:
                raise LocalProtocolError(
                    f"inputRequests[{key!r}] has unsupported method {method!r}"
                )
            params = request.get("params")
            if params is None and method != "roots/list":
                raise LocalProtocolError(f"inputRequests[{key!r}] ({method}) needs params")
            if params is not None and not (type(params) is dict or isinstance(params, Mapping)):
                raise LocalProtocolError(f"inputRequests[{key!r}] params must be a mapping")
            requests[key] = dict(request)
        result["inputRequests"] = requests
    if request_state is not None:
        if not isinstance(request_state, str):
            raise LocalProtocolError("request_state must be a string")
        result["requestState"] = request_state
    if len(result) == 1:
        raise LocalProtocolError("an input_required result needs inputRequests or requestState")
    return result


def parse_input_responses(params: Any) -> dict[str, Any] | ErrorData | None:
    """The ``inputResponses`` of a retried request (server side).

    Args:
        params: The request's params as decoded.

    Returns:
        ``None`` if absent (a first attempt, or a retry with nothing to answer); the map of
        key → response object; or a ``-32602`` :class:`ErrorData` if it is not an object of
        objects (mrtr#error-handling). Which keys are present is the handler's business: a
        missing answer SHOULD lead to a new input-required result, not an error.
    """
    if not (type(params) is dict or isinstance(params, Mapping)):
        return None
    responses = params.get("inputResponses")
    if responses is None:
        return None
    if not (type(responses) is dict or isinstance(responses, Mapping)):
        return _invalid("inputResponses must be an object")
    for key, value in responses.items():
        if not (type(value) is dict or isinstance(value, Mapping)):
            return _invalid(f"inputResponses[{key!r}] must be an object")
    return dict(responses)


def parse_request_state(params: Any) -> str | ErrorData | None:
    """The ``requestState`` of a retried request (server side), unverified.

    Args:
        params: The request's params as decoded.

    Returns:
        ``None`` if absent, the string, or a ``-32602`` :class:`ErrorData` if it is not a
        string. Verify it with :meth:`RequestStateCodec.open`.
    """
    if not (type(params) is dict or isinstance(params, Mapping)):
        return None
    state = params.get("requestState")
    if state is None or isinstance(state, str):
        return state
    return _invalid("requestState must be a string")


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
@final
class InputRequiredResult:
    """An input-required result, as a client reads it (the connection turns it into
    an :class:`InputRequired` event).

    Attributes:
        input_requests: key → request object the client must fulfil before retrying
            (may be empty).
        request_state: the opaque state to echo back verbatim on the retry, or ``None``
            (then send none).
    """

    __slots__ = ("input_requests", "request_state")

    def __init__(
        self, *, input_requests: dict[str, dict[str, Any]], request_state: str | None
    ) -> None:
        self.input_requests: Final = input_requests
        self.request_state: Final = request_state


def parse_input_required(result: Any) -> InputRequiredResult | ErrorData:
    """Read an input-required result (client side).

    Args:
        result: A result that :func:`classify_result` called ``"input_required"``.

    Returns:
        The :class:`InputRequiredResult`, or an :class:`ErrorData` (code ``-32603``, for local
        surfacing) if it is malformed: neither ``inputRequests`` nor ``requestState``, a
        request that is not an object with a supported ``method``, non-object ``params``, or a
        non-string ``requestState``.
    """
    if not (type(result) is dict or isinstance(result, Mapping)):
        return _invalid_result("Invalid input_required result: not an object")
    raw_requests = result.get("inputRequests")
    state = result.get("requestState")
    if raw_requests is None and state is None:
        return _invalid_result("Invalid input_required result: no inputRequests or requestState")
    if state is not None and not isinstance(state, str):
        return _invalid_result("Invalid input_required result: requestState is not a string")
    if raw_requests is None:
        raw_requests = {}
    if not (type(raw_requests) is dict or isinstance(raw_requests, Mapping)):
        return _invalid_result("Invalid input_required result: inputRequests is not an object")
    requests: dict[str, dict[str, Any]] = {}
    for key, request in raw_requests.items():
        if (
            not (type(request) is dict or isinstance(request, Mapping))
            or request.get("method") not in INPUT_REQUEST_METHODS
            or not isinstance(request.get("params", {}), Mapping)
        ):
            return _invalid_result(
                f"Invalid input_required result: unsupported input request {key!r}"
            )
        requests[key] = dict(request)
    return InputRequiredResult(input_requests=requests, request_state=state)


_ELICIT_ACTIONS: Final = frozenset({"accept", "decline", "cancel"})
_ROLES: Final = frozenset({"user", "assistant"})


def input_responses_problem(
    input_requests: Mapping[str, Any], input_responses: Mapping[str, Any]
) -> str | None:
    """What is wrong with a client's ``inputResponses`` to ``input_requests`` (a round
    :func:`parse_input_required` read), for people; ``None`` when nothing is.

    Every key answers a question asked (keys are the server's, "unique within the
    scope of the request": an answer under another key answers nothing, or the wrong
    question); a question may go unanswered (mrtr.mdx: the server "SHOULD respond with
    a new InputRequiredResult requesting the missing information again"). Each answer
    has its result's shape:
    ``CreateMessageResult`` (``role``, ``content``, ``model``), ``ListRootsResult``
    (``roots``, each with a ``uri``), and an elicitation's answer fits its form
    (:func:`elicit_result_problem`, the rule a legacy answer is held to as well).
    """
    for key in input_responses:
        if key not in input_requests:
            return f"inputResponses[{key!r}] answers no question asked"
    for key, response in input_responses.items():
        why = _response_problem(input_requests[key], response)
        if why is not None:
            return f"inputResponses[{key!r}]: {why}"
    return None


def _response_problem(request: Mapping[str, Any], response: Any) -> str | None:
    if not isinstance(response, Mapping):
        return f"an answer is an object, not {type(response).__name__}"
    method = request.get("method")
    if method == "sampling/createMessage":
        if response.get("role") not in _ROLES:
            return "a CreateMessageResult's role is 'user' or 'assistant'"
        if not isinstance(response.get("model"), str):
            return "a CreateMessageResult names its model (a string)"
        if not isinstance(response.get("content"), Mapping | list):
            return "a CreateMessageResult's content is a content block or a list of them"
        return None
    if method == "roots/list":
        roots = response.get("roots")
        if not isinstance(roots, list) or not all(
            isinstance(root, Mapping) and isinstance(root.get("uri"), str) for root in roots
        ):
            return "a ListRootsResult's roots are a list of objects with a uri"
        return None
    return elicit_result_problem(request.get("params"), response)


def elicit_result_problem(params: Mapping[str, Any] | None, response: Any) -> str | None:
    """What is wrong with a client's answer (``response``) to an ``elicitation/create``
    asked with ``params``, for people; ``None`` when nothing is. One rule for both eras:
    :meth:`Connection.retry_with_input` applies it to a modern round's answers, and
    :meth:`Connection.send_result` to a legacy request's.

    The answer is an ``ElicitResult``: an object whose ``action`` is ``accept``,
    ``decline`` or ``cancel``, whose ``content`` (if any) is an object. And
    client/elicitation.mdx: "Clients SHOULD validate all responses against the provided
    schema": an accepted form's ``content`` holds its ``required`` fields, and each
    field it names is of the field's ``type`` (a ``number`` finite: JSON has no NaN),
    one of its choices (``enum``, ``oneOf`` consts; a multi-select's ``items``' ``enum``
    or ``anyOf`` consts), within its ``minLength``/``maxLength``,
    ``minimum``/``maximum``, ``minItems``/``maxItems``: every constraint of the
    restricted schemas a form may use (``PrimitiveSchemaDefinition``), but ``format``,
    which JSON Schema makes an annotation. A form's other keywords are not checked.
    """
    if not isinstance(response, Mapping):
        return f"an answer is an object, not {type(response).__name__}"
    params = params if isinstance(params, Mapping) else {}
    action = response.get("action")
    if action not in _ELICIT_ACTIONS:
        return "an ElicitResult's action is 'accept', 'decline' or 'cancel'"
    content = response.get("content")
    if content is not None and not isinstance(content, Mapping):
        return "an ElicitResult's content is an object"
    if action != "accept" or params.get("mode", "form") != "form":
        return None
    schema = params.get("requestedSchema")
    if not isinstance(schema, Mapping):
        return None
    return _form_problem(schema, content or {})


def _form_problem(schema: Mapping[str, Any], content: Mapping[str, Any]) -> str | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        # (A server's form may name a non-string: the server's mistake, not a missing
        # answer; a dict there would not even hash.)
        if isinstance(name, str) and name not in content:
            return f"the form's required field {name!r} is missing"
    for name, value in content.items():
        field = properties.get(name)
        if isinstance(field, Mapping):
            why = _field_problem(field, value)
            if why is not None:
                return f"the form's field {name!r}: {why}"
    return None


def _choices(field: Mapping[str, Any]) -> list[Any] | None:
    """A string field's (or a multi-select's items') allowed values, if it lists them."""
    enum = field.get("enum")
    if isinstance(enum, list):
        return enum
    for key in ("oneOf", "anyOf"):
        options = field.get(key)
        if isinstance(options, list):
            return [o.get("const") for o in options if isinstance(o, Mapping)]
    return None


def _out_of(value: float, field: Mapping[str, Any], low: str, high: str) -> bool:
    least, most = field.get(low), field.get(high)
    number = int | float
    return (isinstance(least, number) and value < least) or (
        isinstance(most, number) and value > most
    )


def _field_problem(field: Mapping[str, Any], value: Any) -> str | None:
    kind = field.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return "expected a string"
        choices = _choices(field)
        if choices is not None and value not in choices:
            return "not one of its choices"
        if _out_of(len(value), field, "minLength", "maxLength"):
            return "its length is out of bounds"
    elif kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "expected a number"
        if kind == "integer" and not (isinstance(value, int) or value.is_integer()):
            return "expected an integer"
        if isinstance(value, float) and not math.isfinite(value):
            return "expected a finite number"
        if _out_of(value, field, "minimum", "maximum"):
            return "out of bounds"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return "expected a boolean"
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "expected a list of strings"
        items = field.get("items")
        choices = _choices(items) if isinstance(items, Mapping) else None
        if choices is not None and any(v not in choices for v in value):
            return "a value is not one of its choices"
        if _out_of(len(value), field, "minItems", "maxItems"):
            return "its number of items is out of bounds"
    return None


def build_retry_params(
    original_params: Mapping[str, Any] | None,
    input_responses: Mapping[str, Any] | None,
    request_state: str | None,
) -> dict[str, Any]:
    """The params of an MRTR retry (client side, mrtr#client-requirements-basic-workflow).

    The original params are kept (including ``_meta``: refresh it with :func:`attach_meta` if
    the progress token must change), any earlier ``inputResponses``/``requestState`` are
    dropped, and the new ones added. The retry needs a new JSON-RPC id.

    Args:
        original_params: The params of the first attempt.
        input_responses: Key → the client's result for each input request; omitted when
            ``None`` or empty.
        request_state: The exact ``requestState`` of the input-required result, or ``None``
            if it had none (then the retry MUST NOT carry one).

    Returns:
        A new params dict.

    Raises:
        LocalProtocolError: ``request_state`` is not a string, or ``input_responses`` is not a
            mapping.
    """
    out = {
        k: v
        for k, v in (original_params or {}).items()
        if k not in ("inputResponses", "requestState")
    }
    if input_responses:
        if not (type(input_responses) is dict or isinstance(input_responses, Mapping)):
            raise LocalProtocolError("input_responses must be a mapping")
        out["inputResponses"] = dict(input_responses)
    if request_state is not None:
        if not isinstance(request_state, str):
            raise LocalProtocolError("request_state must be a string")
        out["requestState"] = request_state
    return out


def is_cacheable_request(method: str, params: Any) -> bool:
    """Whether a client may cache the complete result of this request.

    Args:
        method: The request's method.
        params: The request's params.

    Returns:
        ``True`` for :data:`CACHEABLE_METHODS`, except MRTR retries (params with
        ``inputResponses`` or ``requestState``), which MUST NOT be cached
        (server/utilities/caching#cache-key).
    """
    if method not in CACHEABLE_METHODS:
        return False
    return not (
        (type(params) is dict or isinstance(params, Mapping))
        and ("inputResponses" in params or "requestState" in params)
    )


# =============================================================================================
# 8. Subscriptions
# =============================================================================================


def _unique(uris: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(uris))


def _uri_set_of(flt: SubscriptionFilter) -> frozenset[str]:
    return frozenset(flt.resource_subscriptions)


def _task_set_of(flt: SubscriptionFilter) -> frozenset[str]:
    return frozenset(flt.task_ids)


@final
@attrs.frozen(kw_only=True)
class SubscriptionFilter:
    """The ``notifications`` filter of ``subscriptions/listen`` (schema ``SubscriptionFilter``).

    Every type is opt-in: the server MUST NOT send a notification type the client did not ask
    for (basic/patterns/subscriptions).
    """

    tools_list_changed: bool = False
    """Deliver ``notifications/tools/list_changed``."""
    prompts_list_changed: bool = False
    """Deliver ``notifications/prompts/list_changed``."""
    resources_list_changed: bool = False
    """Deliver ``notifications/resources/list_changed``."""
    resource_subscriptions: tuple[str, ...] = attrs.field(default=(), converter=_unique)
    """Deliver ``notifications/resources/updated`` for these URIs (order kept, duplicates
    dropped)."""
    task_ids: tuple[str, ...] = attrs.field(default=(), converter=_unique)
    """The tasks extension: deliver ``notifications/tasks`` for these task ids (order kept,
    duplicates dropped; ext-tasks "Task Status Notifications")."""
    # (Factories of module-level functions, not ``@_uri_set.default`` methods: the same
    # code in attrs' __init__, and a shape a compiler of the annotations, mypyc, keeps.)
    _uri_set: frozenset[str] = attrs.field(
        init=False, repr=False, eq=False, default=attrs.Factory(_uri_set_of, takes_self=True)
    )
    _task_set: frozenset[str] = attrs.field(
        init=False, repr=False, eq=False, default=attrs.Factory(_task_set_of, takes_self=True)
    )

    def matches(self, method: str, params: Mapping[str, Any] | None = None) -> bool:
        """Whether a notification belongs on a stream opened with this filter.

        Args:
            method: The notification's method.
            params: Its params (``uri`` is read for ``notifications/resources/updated``).

        Returns:
            ``True`` for a list-changed notification the filter opted into, or a
            ``notifications/resources/updated`` whose ``uri`` is exactly one of
            :attr:`resource_subscriptions`, or a ``notifications/tasks`` whose ``taskId`` is
            one of :attr:`task_ids`. Anything else (request-scoped notifications, unknown
            types) is ``False``.
        """
        if method == "notifications/tools/list_changed":
            return self.tools_list_changed
        if method == "notifications/prompts/list_changed":
            return self.prompts_list_changed
        if method == "notifications/resources/list_changed":
            return self.resources_list_changed
        if method == "notifications/resources/updated" and (
            type(params) is dict or isinstance(params, Mapping)
        ):
            uri = params.get("uri")
            return isinstance(uri, str) and uri in self._uri_set
        if method == TASKS_NOTIFICATION and isinstance(params, Mapping):
            task_id = params.get("taskId")
            return isinstance(task_id, str) and task_id in self._task_set
        return False

    def honored_by(self, capabilities: Mapping[str, Any]) -> SubscriptionFilter:
        """The subset a server with these capabilities can honor (for the acknowledgment).

        Args:
            capabilities: The server's ``ServerCapabilities``.

        Returns:
            A filter keeping each list-changed type only if the matching capability declares
            ``listChanged: true``, the resource URIs only if ``resources.subscribe`` is
            ``true``, and the task ids only if ``extensions`` declares the tasks extension.
        """

        def flag(section: str, name: str) -> bool:
            entry = capabilities.get(section)
            return (type(entry) is dict or isinstance(entry, Mapping)) and entry.get(name) is True

        return SubscriptionFilter(
            tools_list_changed=self.tools_list_changed and flag("tools", "listChanged"),
            prompts_list_changed=self.prompts_list_changed and flag("prompts", "listChanged"),
            resources_list_changed=(
                self.resources_list_changed and flag("resources", "listChanged")
            ),
            resource_subscriptions=(
                self.resource_subscriptions if flag("resources", "subscribe") else ()
            ),
            task_ids=self.task_ids if declares_tasks(capabilities) else (),
        )

    def to_wire(self) -> dict[str, Any]:
        """The JSON object: only the types opted into (omitted = not subscribed)."""
        out: dict[str, Any] = {}
        if self.tools_list_changed:
            out["toolsListChanged"] = True
        if self.prompts_list_changed:
            out["promptsListChanged"] = True
        if self.resources_list_changed:
            out["resourcesListChanged"] = True
        if self.resource_subscriptions:
            out["resourceSubscriptions"] = list(self.resource_subscriptions)
        if self.task_ids:
            out["taskIds"] = list(self.task_ids)
        return out


_FILTER_FLAGS: Final = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


def parse_listen_filter(
    params: Any, *, max_resource_subscriptions: int = 1024, max_task_ids: int = 1024
) -> SubscriptionFilter | ErrorData:
    """Read the filter of a ``subscriptions/listen`` request (server side).

    Args:
        params: The request's params as decoded.
        max_resource_subscriptions: The most URIs one subscription may name.
        max_task_ids: The most task ids (``taskIds``, the tasks extension) it may name.

    Returns:
        The :class:`SubscriptionFilter`, or a ``-32602`` :class:`ErrorData` when
        ``params.notifications`` is missing (it is required) or not an object, a flag is not a
        boolean, ``resourceSubscriptions`` is not a list of strings, or it names more than
        ``max_resource_subscriptions`` URIs, or ``taskIds`` is not a list of strings or
        names more than ``max_task_ids``. Unknown filter fields are ignored.
    """
    if not (type(params) is dict or isinstance(params, Mapping)) or "notifications" not in params:
        return _invalid("subscriptions/listen requires params.notifications")
    wanted = params["notifications"]
    if not (type(wanted) is dict or isinstance(wanted, Mapping)):
        return _invalid("params.notifications must be an object")
    for wire in _FILTER_FLAGS:
        if wire in wanted and not isinstance(wanted[wire], bool):
            return _invalid(f"notifications.{wire} must be a boolean")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        return _invalid("notifications.resourceSubscriptions must be an array of strings")
    if len(uris) > max_resource_subscriptions:
        return _invalid(
            f"notifications.resourceSubscriptions names more than {max_resource_subscriptions} URIs"
        )
    task_ids = wanted.get("taskIds", [])
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        return _invalid("notifications.taskIds must be an array of strings")
    if len(task_ids) > max_task_ids:
        return _invalid(f"notifications.taskIds names more than {max_task_ids} tasks")
    return SubscriptionFilter(
        tools_list_changed=wanted.get("toolsListChanged", False),
        prompts_list_changed=wanted.get("promptsListChanged", False),
        resources_list_changed=wanted.get("resourcesListChanged", False),
        resource_subscriptions=uris,
        task_ids=task_ids,
    )


def build_acknowledged_params(
    subscription_id: str | int, honored: SubscriptionFilter
) -> dict[str, Any]:
    """The params of ``notifications/subscriptions/acknowledged``.

    It MUST be the first message carrying the subscription id (subscriptions#acknowledgment).

    Args:
        subscription_id: The JSON-RPC id of the ``subscriptions/listen`` request.
        honored: The subset the server agreed to honor (see
            :meth:`SubscriptionFilter.honored_by`).

    Returns:
        ``{"_meta": {subscriptionId: id}, "notifications": {...}}``.

    Raises:
        LocalProtocolError: ``subscription_id`` is not a string or integer.
    """
    return tag_subscription_notification({"notifications": honored.to_wire()}, subscription_id)


def build_acknowledged_notification(
    subscription_id: str | int, honored: SubscriptionFilter
) -> dict[str, Any]:
    """The whole ``notifications/subscriptions/acknowledged`` JSON-RPC message.

    Args:
        subscription_id: The JSON-RPC id of the ``subscriptions/listen`` request.
        honored: The subset the server agreed to honor.

    Returns:
        ``{"jsonrpc": "2.0", "method": ..., "params": build_acknowledged_params(...)}``.

    Raises:
        LocalProtocolError: ``subscription_id`` is not a string or integer.
    """
    return {
        "jsonrpc": "2.0",
        "method": SUBSCRIPTIONS_ACKNOWLEDGED_METHOD,
        "params": build_acknowledged_params(subscription_id, honored),
    }


def tag_subscription_notification(
    notification_params: Mapping[str, Any] | None, subscription_id: str | int
) -> dict[str, Any]:
    """Mark a notification as delivered on a subscription stream.

    Every notification on a ``subscriptions/listen`` stream MUST carry the subscription id in
    ``_meta`` (basic/index#meta; subscriptions#receiving-notifications).

    Args:
        notification_params: The notification's params, or ``None``.
        subscription_id: The JSON-RPC id of the ``subscriptions/listen`` request.

    Returns:
        New params with ``_meta["io.modelcontextprotocol/subscriptionId"]`` set; other
        ``_meta`` keys are kept.

    Raises:
        LocalProtocolError: ``subscription_id`` is not a string or integer, or the params or
            their ``_meta`` are not mappings.
    """
    if not _is_id(subscription_id):
        raise LocalProtocolError("subscription_id must be a string or an integer")
    return attach_meta(notification_params, {SUBSCRIPTION_ID_KEY: subscription_id})


# =============================================================================================
# Client-side version selection
# =============================================================================================


def parse_unsupported_version(error: Any) -> tuple[str, ...] | None:
    """The server's supported versions from an ``UnsupportedProtocolVersionError``.

    Args:
        error: The ``error`` member of a JSON-RPC error response, as decoded.

    Returns:
        The ``data.supported`` versions if ``error`` is a well-formed ``-32022`` error;
        otherwise ``None``.
    """
    if (
        not (type(error) is dict or isinstance(error, Mapping))
        or error.get("code") != ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    ):
        return None
    data = error.get("data")
    supported = data.get("supported") if (type(data) is dict or isinstance(data, Mapping)) else None
    if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
        return None
    return tuple(supported)


def select_version(offered: Iterable[str], preferred: Sequence[str]) -> str | None:
    """Pick a mutually supported version (basic/versioning#protocol-version-negotiation).

    Args:
        offered: The server's versions (``supportedVersions`` or ``data.supported``).
        preferred: The client's versions, most preferred first.

    Returns:
        The first of ``preferred`` that the server offers, or ``None`` if none is.
    """
    available = set(offered)
    return next((v for v in preferred if v in available), None)

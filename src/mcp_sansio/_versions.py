"""The protocol revisions we speak, as data.

Revisions are an enumerated set: a version string we do not list is unknown, whatever
its date. Nothing here compares dates. Each :class:`Revision` says which era it belongs
to, whether JSON-RPC batching is allowed, which methods travel in which direction
with which capability gate, and the facts of its data model that a binding adapts
what it sends to (content block types, structured tool output, elicitation modes).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, final

__all__ = [
    "ALL_VERSIONS",
    "FOREIGN_METHODS",
    "JSON_SCHEMA_DIALECT",
    "LATEST_LEGACY_VERSION",
    "LATEST_VERSION",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "REVISIONS",
    "Era",
    "Revision",
]


#: The JSON Schema dialect of a schema that declares none (basic/index.mdx, "JSON Schema
#: Usage", 2025-11-25 on); a schema that declares another is one we cannot validate.
JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


class Era(enum.StrEnum):
    """How a revision establishes version and capabilities.

    A ``str`` enum: ``Era.LEGACY == "legacy"`` and ``str(Era.LEGACY) == "legacy"``, so an
    era read from a client (``client.era``) can be passed back wherever an ``era=``
    string is taken, and encodes to JSON as its value. Compare with ``is`` or ``==``.
    """

    #: ``initialize`` handshake, then a session (2024-11-05 ... 2025-11-25).
    LEGACY = "legacy"
    #: Stateless; every request carries its version and capabilities in ``_meta``.
    MODERN = "modern"


#: A capability path such as ``("resources", "subscribe")``: the peer must have
#: declared ``capabilities["resources"]["subscribe"]`` (truthy).
CapabilityPath = tuple[str, ...]


# Not an attrs class: a private record on a stdio server's import path (see
# tests/test_stdio_import_cost.py).
@final
class Revision:
    """What one protocol revision allows (read-only).

    Attributes:
        version: the version string, e.g. ``"2025-06-18"``.
        era: legacy (handshake) or modern (per-request envelope).
        batching: whether JSON-RPC batch arrays are allowed (only 2025-03-26).
        client_requests: requests a client may send, each with the server capability it
            needs.
        server_requests: requests a server may send, each with the client capability it
            needs.
        client_notifications: notifications a client may send.
        server_notifications: notifications a server may send, each with the server
            capability that allows it.
        content_types: the ``type`` of every content block of tool results and prompt
            messages: ``audio`` came in 2025-03-26, ``resource_link`` in 2025-06-18.
        sampling_content_types: the content block types of a ``SamplingMessage``: ``audio``
            came in 2025-03-26, ``tool_use`` and ``tool_result`` in 2025-11-25.
        structured_output: whether ``CallToolResult.structuredContent`` and
            ``Tool.outputSchema`` exist (since 2025-06-18).
        structured_content_is_object: whether ``structuredContent`` must be an object
            (2025-06-18 and 2025-11-25; from 2026-07-28 it may be any JSON value).
        elicitation_modes: whether elicitation has modes, form and URL (since 2025-11-25).
        sampling_context: whether a client declares ``sampling.context`` (since
            2025-11-25); from then on a server SHOULD NOT ask ``includeContext``
            ``thisServer`` or ``allServers`` without it (``client/sampling``,
            "Capabilities"), before, it asks without one and the client "MAY ignore"
            it.
        sse_priming: whether a Streamable HTTP server starts an SSE stream with a
            priming event, an id and an empty ``data`` field (since 2025-11-25,
            ``basic/transports#sending-messages``): a client of an earlier revision reads
            every event's data as a JSON-RPC message, and an empty one as a parse error.
    """

    __slots__ = (
        "batching",
        "client_notifications",
        "client_requests",
        "content_types",
        "elicitation_modes",
        "era",
        "sampling_content_types",
        "sampling_context",
        "server_notifications",
        "server_requests",
        "sse_priming",
        "structured_content_is_object",
        "structured_output",
        "version",
    )

    def __init__(
        self,
        *,
        version: str,
        era: Era,
        batching: bool,
        client_requests: Mapping[str, CapabilityPath | None],
        server_requests: Mapping[str, CapabilityPath | None],
        client_notifications: frozenset[str],
        server_notifications: Mapping[str, CapabilityPath | None],
        content_types: frozenset[str],
        sampling_content_types: frozenset[str],
        structured_output: bool,
        structured_content_is_object: bool,
        elicitation_modes: bool,
        sampling_context: bool,
        sse_priming: bool,
    ) -> None:
        self.version: Final = version
        self.era: Final = era
        self.batching: Final = batching
        self.client_requests: Final = client_requests
        self.server_requests: Final = server_requests
        self.client_notifications: Final = client_notifications
        self.server_notifications: Final = server_notifications
        self.content_types: Final = content_types
        self.sampling_content_types: Final = sampling_content_types
        self.structured_output: Final = structured_output
        self.structured_content_is_object: Final = structured_content_is_object
        self.elicitation_modes: Final = elicitation_modes
        self.sampling_context: Final = sampling_context
        self.sse_priming: Final = sse_priming


def _ro(d: dict[str, CapabilityPath | None]) -> Mapping[str, CapabilityPath | None]:
    return MappingProxyType(d)


#: The skills extension (SEP-2640): its identifier, and the gate of its methods. Not a
#: revision's method: an extension's, which both eras carry, so each table lists it
#: (a client calls them "only after observing the server's declaration").
#: ``resources/directory/read`` is gated by the extension's ``directoryRead`` setting:
#: "Clients MUST NOT call resources/directory/read against a server that has not
#: declared directoryRead: true", and such a server answers it as an unknown method.
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
_SKILLS_METHODS: dict[str, CapabilityPath | None] = {
    "skills/list": ("extensions", SKILLS_EXTENSION),
    "skills/get": ("extensions", SKILLS_EXTENSION),
    "resources/directory/read": ("extensions", SKILLS_EXTENSION, "directoryRead"),
}

_BASE_CLIENT_REQUESTS: dict[str, CapabilityPath | None] = {
    **_SKILLS_METHODS,
    "initialize": None,
    "ping": None,
    "completion/complete": None,
    "logging/setLevel": ("logging",),
    "prompts/get": ("prompts",),
    "prompts/list": ("prompts",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "tools/call": ("tools",),
    "tools/list": ("tools",),
}
_BASE_SERVER_REQUESTS: dict[str, CapabilityPath | None] = {
    "ping": None,
    "sampling/createMessage": ("sampling",),
    "roots/list": ("roots",),
}
_BASE_CLIENT_NOTIFICATIONS = frozenset(
    {
        "notifications/cancelled",
        "notifications/progress",
        "notifications/initialized",
        "notifications/roots/list_changed",
    }
)
_BASE_SERVER_NOTIFICATIONS: dict[str, CapabilityPath | None] = {
    "notifications/cancelled": None,
    "notifications/progress": None,
    "notifications/message": ("logging",),
    "notifications/resources/updated": ("resources", "subscribe"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
}

# 2025-03-26 added the `completions` server capability (2024-11-05 had none).
_CLIENT_REQUESTS_2025 = {**_BASE_CLIENT_REQUESTS, "completion/complete": ("completions",)}
# 2025-06-18 added elicitation.
_SERVER_REQUESTS_2025_06 = {**_BASE_SERVER_REQUESTS, "elicitation/create": ("elicitation",)}
# 2025-11-25 added URL elicitation completion and the experimental tasks utility.
_TASK_METHODS: dict[str, CapabilityPath | None] = {
    "tasks/get": ("tasks",),
    "tasks/result": ("tasks",),
    "tasks/list": ("tasks", "list"),
    "tasks/cancel": ("tasks", "cancel"),
}

# The modern era: no handshake, no ping, no setLevel, no resource subscribe/unsubscribe;
# servers never send requests (they return input-required results instead);
# subscriptions/listen carries change notifications.
_MODERN_CLIENT_REQUESTS: dict[str, CapabilityPath | None] = {
    "server/discover": None,
    "completion/complete": ("completions",),
    "prompts/get": ("prompts",),
    "prompts/list": ("prompts",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "tools/call": ("tools",),
    "tools/list": ("tools",),
    "subscriptions/listen": None,
    **_SKILLS_METHODS,
}
_MODERN_SERVER_NOTIFICATIONS: dict[str, CapabilityPath | None] = {
    "notifications/progress": None,
    "notifications/cancelled": None,
    "notifications/message": None,
    "notifications/subscriptions/acknowledged": None,
    "notifications/resources/updated": ("resources", "subscribe"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
}


_BASE_CONTENT_TYPES = frozenset({"text", "image", "resource"})
_CONTENT_TYPES_2025_03 = _BASE_CONTENT_TYPES | {"audio"}
_CONTENT_TYPES_2025_06 = _CONTENT_TYPES_2025_03 | {"resource_link"}
_BASE_SAMPLING_TYPES = frozenset({"text", "image"})
_SAMPLING_TYPES_2025_03 = _BASE_SAMPLING_TYPES | {"audio"}
_SAMPLING_TYPES_2025_11 = _SAMPLING_TYPES_2025_03 | {"tool_use", "tool_result"}


def _legacy(
    version: str,
    *,
    batching: bool = False,
    client_requests: dict[str, CapabilityPath | None],
    server_requests: dict[str, CapabilityPath | None],
    client_notifications: frozenset[str] = _BASE_CLIENT_NOTIFICATIONS,
    server_notifications: dict[str, CapabilityPath | None] = _BASE_SERVER_NOTIFICATIONS,
    content_types: frozenset[str] = _CONTENT_TYPES_2025_06,
    sampling_content_types: frozenset[str] = _SAMPLING_TYPES_2025_03,
    structured_output: bool = True,
    elicitation_modes: bool = False,
    sampling_context: bool = False,
    sse_priming: bool = False,
) -> Revision:
    return Revision(
        version=version,
        era=Era.LEGACY,
        batching=batching,
        client_requests=_ro(client_requests),
        server_requests=_ro(server_requests),
        client_notifications=client_notifications,
        server_notifications=_ro(server_notifications),
        content_types=content_types,
        sampling_content_types=sampling_content_types,
        structured_output=structured_output,
        structured_content_is_object=structured_output,
        elicitation_modes=elicitation_modes,
        sampling_context=sampling_context,
        sse_priming=sse_priming,
    )


REVISIONS: Mapping[str, Revision] = MappingProxyType(
    {
        "2024-11-05": _legacy(
            "2024-11-05",
            client_requests=_BASE_CLIENT_REQUESTS,
            server_requests=_BASE_SERVER_REQUESTS,
            content_types=_BASE_CONTENT_TYPES,
            sampling_content_types=_BASE_SAMPLING_TYPES,
            structured_output=False,
        ),
        "2025-03-26": _legacy(
            "2025-03-26",
            batching=True,
            client_requests=_CLIENT_REQUESTS_2025,
            server_requests=_BASE_SERVER_REQUESTS,
            content_types=_CONTENT_TYPES_2025_03,
            structured_output=False,
        ),
        "2025-06-18": _legacy(
            "2025-06-18",
            client_requests=_CLIENT_REQUESTS_2025,
            server_requests=_SERVER_REQUESTS_2025_06,
        ),
        "2025-11-25": _legacy(
            "2025-11-25",
            client_requests={**_CLIENT_REQUESTS_2025, **_TASK_METHODS},
            server_requests={**_SERVER_REQUESTS_2025_06, **_TASK_METHODS},
            client_notifications=_BASE_CLIENT_NOTIFICATIONS | {"notifications/tasks/status"},
            server_notifications={
                **_BASE_SERVER_NOTIFICATIONS,
                "notifications/elicitation/complete": None,
                "notifications/tasks/status": None,
            },
            sampling_content_types=_SAMPLING_TYPES_2025_11,
            elicitation_modes=True,
            sampling_context=True,
            sse_priming=True,
        ),
        "2026-07-28": Revision(
            version="2026-07-28",
            era=Era.MODERN,
            batching=False,
            client_requests=_ro(_MODERN_CLIENT_REQUESTS),
            server_requests=_ro({}),
            client_notifications=frozenset({"notifications/cancelled"}),
            server_notifications=_ro(_MODERN_SERVER_NOTIFICATIONS),
            content_types=_CONTENT_TYPES_2025_06,
            sampling_content_types=_SAMPLING_TYPES_2025_11,
            structured_output=True,
            structured_content_is_object=False,
            elicitation_modes=True,
            sampling_context=True,
            sse_priming=True,
        ),
    }
)


def _defined(revision: Revision) -> frozenset[str]:
    """Every method ``revision`` defines: requests and notifications, both directions."""
    return frozenset(
        (
            *revision.client_requests,
            *revision.server_requests,
            *revision.client_notifications,
            *revision.server_notifications,
        )
    )


#: Names the modern revision leaves to the tasks extension (``io.modelcontextprotocol/tasks``,
#: ``docs/extensions/tasks/overview.mdx``): there they are an extension's methods, as free
#: as any custom method, not leftovers of 2025-11-25.
_MODERN_EXTENSION_METHODS = frozenset({"tasks/get", "tasks/cancel"})

_STANDARD_METHODS = frozenset().union(*(_defined(r) for r in REVISIONS.values()))

#: For each version, the standard methods it lacks: a request or notification (of either
#: direction) that some *other* revision defines and this one does not, such as
#: ``elicitation/create`` before 2025-06-18 or ``notifications/elicitation/complete`` before
#: 2025-11-25. In a session of that version such a name is no custom method: sending it is a
#: :class:`LocalProtocolError`, a request for it is answered -32601. A name that no revision
#: defines (a vendor method) is not listed and passes as before.
FOREIGN_METHODS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        version: _STANDARD_METHODS
        - _defined(revision)
        - (_MODERN_EXTENSION_METHODS if revision.era is Era.MODERN else frozenset())
        for version, revision in REVISIONS.items()
    }
)

#: Every version we speak, newest first (the order of preference).
ALL_VERSIONS: tuple[str, ...] = (
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
)
LEGACY_VERSIONS: tuple[str, ...] = tuple(v for v in ALL_VERSIONS if REVISIONS[v].era is Era.LEGACY)
MODERN_VERSIONS: tuple[str, ...] = tuple(v for v in ALL_VERSIONS if REVISIONS[v].era is Era.MODERN)
LATEST_VERSION = ALL_VERSIONS[0]
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[0]


def has_capability(capabilities: Mapping[str, object], path: CapabilityPath | None) -> bool:
    """Whether ``capabilities`` declares ``path``.

    A core capability or flag is declared by anything but ``null`` and ``false`` (an
    object such as ``"tools": {}``, a flag such as ``"subscribe": true``). An extension,
    ``("extensions", identifier)``, is declared by an object only: ``extensions`` maps
    identifiers to settings objects, an empty one for no settings (basic/versioning.mdx,
    "Extension Negotiation"), so ``null``, ``true`` or a string declare nothing. The one
    rule for every extension: :func:`declares_extension`. A setting of an extension,
    ``("extensions", identifier, setting)``, is declared by ``true`` only (a boolean
    setting whose default is ``false``, as the skills extension's ``directoryRead``).
    """
    if path is None:
        return True
    node: object = capabilities
    for key in path:
        if not (type(node) is dict or isinstance(node, Mapping)) or key not in node:
            return False
        node = node[key]
    if path[0] == "extensions":
        return isinstance(node, Mapping) if len(path) == 2 else node is True
    return node is not None and node is not False


def declares_extension(capabilities: Mapping[str, object] | None, identifier: str) -> bool:
    """Whether ``capabilities`` (a peer's, or a request's ``clientCapabilities``; ``None``
    for none) declare the extension ``identifier``: with an object (its settings)."""
    return bool(capabilities) and has_capability(capabilities or {}, ("extensions", identifier))

"""Which fields of what a server describes came in which revision, as data.

A server builds its answers in the newest revision's terms. A session of an older
revision must be sent only what that revision defines (lifecycle.mdx: both parties
"MUST respect the negotiated protocol version"): every schema lets an object carry
properties it does not define, so a tolerant peer ignores a ``title`` it does not
know, but a strict one (``additionalProperties: false``, as generated validators and
typed models often are) refuses the whole message.

:data:`FIELDS_SINCE` says, for each object a server sends of which some revision lacks
a field (and those a client sends: its capabilities and ``clientInfo``, a progress
notification's params, ``completion/complete``'s, its roots), the first revision whose
schema has that field; it is read off each revision's ``schema.json``
(``tests/core/test_revision_fields.py`` checks it against them). :func:`fit` takes
such an object, built for the newest revision, and leaves out what the session's
revision lacks, in the objects it holds too (a resource's ``annotations``, a prompt's
``arguments``, a tool result's content blocks and a completion's ``ref``, which a
``type`` tells apart). The
connection applies it by method (:data:`RESULTS_FITTED` in ``send_result``,
:data:`PARAMS_FITTED` in ``send_request``), so every driver sends a legacy session what
its revision defines. Content types a revision lacks altogether (audio, resource
links) are a binding's to translate or refuse, not this table's.

Capabilities are the one open object (every schema: "not a closed set: any server can
define its own, additional capabilities"): ``extensions`` is not in the table, so an
extension a binding serves in a legacy session (skills) is declared there, as the
extension's own SDK does on a 2025 session. One it does not serve there is the
binding's to leave out (``without_tasks_extension``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, cast

from ._versions import LEGACY_VERSIONS

__all__ = [
    "CONTENT_DEFINITIONS",
    "FIELDS_SINCE",
    "LACKING",
    "NESTED",
    "PARAMS_FITTED",
    "RESULTS_FITTED",
    "UNIONS",
    "fit",
    "fit_params",
    "fit_result",
]

_2025_03: Final = "2025-03-26"
_2025_06: Final = "2025-06-18"
_2025_11: Final = "2025-11-25"

#: ``(definition, field, the first revision whose schema has it)``: the fields of what a
#: server sends that some legacy revision lacks (2024-11-05 has every field not listed).
#: ``ElicitationCapability`` is ``ClientCapabilities.elicitation``, and
#: ``ProgressNotificationParams`` and ``CompleteRequestParams`` the ``params`` of a
#: progress notification and of ``completion/complete``, which older schemas write out
#: in place.
FIELDS_SINCE: tuple[tuple[str, str, str], ...] = (
    # initialize
    ("ServerCapabilities", "completions", _2025_03),
    ("ServerCapabilities", "tasks", _2025_11),
    ("Implementation", "title", _2025_06),
    ("Implementation", "description", _2025_11),
    ("Implementation", "icons", _2025_11),
    ("Implementation", "websiteUrl", _2025_11),
    # the lists
    ("Tool", "annotations", _2025_03),
    ("Tool", "title", _2025_06),
    ("Tool", "outputSchema", _2025_06),
    ("Tool", "_meta", _2025_06),
    ("Tool", "icons", _2025_11),
    ("Tool", "execution", _2025_11),
    ("Resource", "title", _2025_06),
    ("Resource", "_meta", _2025_06),
    ("Resource", "icons", _2025_11),
    ("ResourceTemplate", "title", _2025_06),
    ("ResourceTemplate", "_meta", _2025_06),
    ("ResourceTemplate", "icons", _2025_11),
    ("Prompt", "title", _2025_06),
    ("Prompt", "_meta", _2025_06),
    ("Prompt", "icons", _2025_11),
    ("PromptArgument", "title", _2025_06),
    ("Annotations", "lastModified", _2025_06),
    # a tool's result (``tools.mdx``: a tool that returns structured content SHOULD also
    # return it serialized in a TextContent block, which is what an older client reads)
    ("CallToolResult", "structuredContent", _2025_06),
    # content and resource contents
    ("TextContent", "_meta", _2025_06),
    ("ImageContent", "_meta", _2025_06),
    ("AudioContent", "_meta", _2025_06),
    ("EmbeddedResource", "_meta", _2025_06),
    ("ResourceLink", "icons", _2025_11),
    ("ResourceContents", "_meta", _2025_06),
    # sampling (a server asks; the messages hold content blocks, as above)
    ("SamplingMessage", "_meta", _2025_11),
    # what a client or either side sends (the core, and a client's answers)
    ("Root", "_meta", _2025_06),
    ("CompleteRequestParams", "context", _2025_06),
    ("PromptReference", "title", _2025_06),
    ("ClientCapabilities", "elicitation", _2025_06),
    ("ClientCapabilities", "tasks", _2025_11),
    ("ElicitationCapability", "form", _2025_11),
    ("ElicitationCapability", "url", _2025_11),
    ("ProgressNotificationParams", "message", _2025_03),
    ("ProgressNotificationParams", "_meta", _2025_11),
)

#: The objects an object holds, which :func:`fit` fits too: ``definition -> ((field,
#: definition of its value, whether the value is a list of them), ...)``; ``None``: one
#: or a list (content: a ``SamplingMessage`` holds either). ``ResourceContents`` stands
#: for both ``TextResourceContents`` and ``BlobResourceContents`` (the same fields came
#: at the same time); ``ContentBlock`` and ``Reference`` for the definition a ``type``
#: names (:data:`UNIONS`).
NESTED: Mapping[str, tuple[tuple[str, str, bool | None], ...]] = MappingProxyType(
    {
        "Resource": (("annotations", "Annotations", False),),
        "ResourceTemplate": (("annotations", "Annotations", False),),
        "Prompt": (("arguments", "PromptArgument", True),),
        "TextContent": (("annotations", "Annotations", False),),
        "ImageContent": (("annotations", "Annotations", False),),
        "AudioContent": (("annotations", "Annotations", False),),
        "ResourceLink": (("annotations", "Annotations", False),),
        "EmbeddedResource": (
            ("annotations", "Annotations", False),
            ("resource", "ResourceContents", False),
        ),
        "ClientCapabilities": (("elicitation", "ElicitationCapability", False),),
        "CompleteRequestParams": (("ref", "Reference", False),),
        "ListRootsResult": (("roots", "Root", True),),
        "ListToolsResult": (("tools", "Tool", True),),
        "ListPromptsResult": (("prompts", "Prompt", True),),
        "ListResourcesResult": (("resources", "Resource", True),),
        "ListResourceTemplatesResult": (("resourceTemplates", "ResourceTemplate", True),),
        "ReadResourceResult": (("contents", "ResourceContents", True),),
        "CallToolResult": (("content", "ContentBlock", None),),
        "GetPromptResult": (("messages", "PromptMessage", True),),
        "PromptMessage": (("content", "ContentBlock", None),),
        "CreateMessageRequestParams": (("messages", "SamplingMessage", True),),
        "SamplingMessage": (("content", "ContentBlock", None),),
        "CreateMessageResult": (("content", "ContentBlock", None),),
    }
)

#: The definition of a content block by its ``type`` (``ContentBlock``; a
#: ``SamplingMessage`` holds some of them).
CONTENT_DEFINITIONS: Mapping[str, str] = MappingProxyType(
    {
        "text": "TextContent",
        "image": "ImageContent",
        "audio": "AudioContent",
        "resource": "EmbeddedResource",
        "resource_link": "ResourceLink",
    }
)

#: The objects of more than one definition that :data:`NESTED` names, each the
#: definition its ``type`` names: ``ContentBlock`` (:data:`CONTENT_DEFINITIONS`) and
#: ``Reference``, ``completion/complete``'s ``ref`` (``ResourceReference`` before
#: 2025-06-18, the same fields). One of a type not here, or of none, is left as it is: a
#: content type the revision lacks is its sender's to refuse or translate.
UNIONS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "ContentBlock": CONTENT_DEFINITIONS,
        "Reference": MappingProxyType(
            {"ref/prompt": "PromptReference", "ref/resource": "ResourceTemplateReference"}
        ),
    }
)


def _lacking(version: str) -> Mapping[str, frozenset[str]]:
    """What ``version`` lacks of :data:`FIELDS_SINCE`: every field that came in a later
    revision (``LEGACY_VERSIONS`` is newest first; no dates are compared)."""
    age = LEGACY_VERSIONS.index(version)
    out: dict[str, set[str]] = {}
    for definition, field, since in FIELDS_SINCE:
        if LEGACY_VERSIONS.index(since) < age:
            out.setdefault(definition, set()).add(field)
    return MappingProxyType({key: frozenset(value) for key, value in out.items()})


#: For each legacy version that lacks some of :data:`FIELDS_SINCE`: definition -> the
#: fields it lacks. A version not here (the newest legacy one, a modern one) lacks none.
LACKING: Mapping[str, Mapping[str, frozenset[str]]] = MappingProxyType(
    {version: lacking for version in LEGACY_VERSIONS if (lacking := _lacking(version))}
)


def fit(definition: str, value: Mapping[str, Any], version: str) -> Mapping[str, Any]:
    """``value``, a ``definition`` object (``"Tool"``, ``"ServerCapabilities"``...)
    built for the newest revision, without the fields ``version``'s schema lacks, in it
    and in the objects it holds (:data:`NESTED`).

    Returns ``value`` itself when nothing is left out (for every version not in
    :data:`LACKING` without a look), else a new dict; ``value`` is never changed.
    """
    lacking = LACKING.get(version)
    if lacking is None:
        return value
    return _fit(lacking, definition, value)


def _fit(
    lacking: Mapping[str, frozenset[str]], definition: str, value: Mapping[str, Any]
) -> Mapping[str, Any]:
    drop = lacking.get(definition)
    out: dict[str, Any] | None = None
    if drop is not None and not drop.isdisjoint(value):
        out = {key: item for key, item in value.items() if key not in drop}
    for field, inner, many, fit_held in _HELD.get(definition, ()):
        held = value.get(field)
        if held is None or (drop is not None and field in drop):
            continue
        fitted: Any = held
        # (A list is tried before a ``None`` row's one object: ``isinstance`` of a list
        # against the ``Mapping`` ABC is slow, and content mostly comes as a list.)
        if many is False:
            if isinstance(held, Mapping):
                fitted = fit_held(lacking, inner, held)
        elif isinstance(held, list):
            items = [fit_held(lacking, inner, i) if isinstance(i, Mapping) else i for i in held]
            if any(new is not old for new, old in zip(items, held, strict=True)):
                fitted = items
        elif many is None and isinstance(held, Mapping):
            fitted = fit_held(lacking, inner, held)
        if fitted is not held:
            if out is None:
                out = dict(value)
            out[field] = fitted
    return value if out is None else out


def _fit_by_type(
    lacking: Mapping[str, frozenset[str]], union: str, value: Mapping[str, Any]
) -> Mapping[str, Any]:
    """A ``union`` object (:data:`UNIONS`) as :func:`_fit` fits the definition its
    ``type`` names; one of another type, or of none, as it is."""
    kind = value.get("type")
    named = UNIONS[union].get(kind) if isinstance(kind, str) else None
    return value if named is None else _fit(lacking, named, value)


_Fitter = Callable[[Mapping[str, frozenset[str]], str, Mapping[str, Any]], Mapping[str, Any]]

#: :data:`NESTED` with the function that fits each row's objects (whether a row holds a
#: union is looked up once here, not per object in ``_fit``).
_HELD: Mapping[str, tuple[tuple[str, str, bool | None, _Fitter], ...]] = {
    definition: tuple(
        (field, inner, many, _fit_by_type if inner in UNIONS else _fit)
        for field, inner, many in rows
    )
    for definition, rows in NESTED.items()
}


#: The requests whose params the core fits to a legacy session's revision (what the
#: binding builds in the newest terms, the core sends in the session's), by method: the
#: params' definition. A server's ``sampling/createMessage`` (its messages and their
#: content), a client's ``completion/complete`` (its ``context``, its ``ref``'s
#: ``title``).
PARAMS_FITTED: Mapping[str, str] = MappingProxyType(
    {
        "sampling/createMessage": "CreateMessageRequestParams",
        "completion/complete": "CompleteRequestParams",
    }
)

#: The requests whose results the core fits the same way, by the request's method: the
#: result's definition. A server's answers (the lists' objects, a tool's result and its
#: content blocks, a prompt's messages' content, a resource's contents) and a client's,
#: to ``sampling/createMessage`` (its content) and ``roots/list`` (each root's
#: ``_meta``). A content type the revision lacks altogether (audio, a resource link) is
#: left as it is: the binding's to translate or refuse.
RESULTS_FITTED: Mapping[str, str] = MappingProxyType(
    {
        # a server's
        "tools/list": "ListToolsResult",
        "tools/call": "CallToolResult",
        "prompts/list": "ListPromptsResult",
        "prompts/get": "GetPromptResult",
        "resources/list": "ListResourcesResult",
        "resources/templates/list": "ListResourceTemplatesResult",
        "resources/read": "ReadResourceResult",
        # a client's
        "sampling/createMessage": "CreateMessageResult",
        "roots/list": "ListRootsResult",
    }
)


def fit_params(method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
    """The params of a ``method`` request without the fields ``version`` lacks
    (:data:`PARAMS_FITTED`); ``params`` itself when nothing is left out, else a new
    dict (``params`` is never changed)."""
    definition = PARAMS_FITTED.get(method)
    lacking = LACKING.get(version)
    if definition is None or lacking is None:
        return params
    # (_fit returns its value itself or a new dict.)
    return cast("dict[str, Any]", _fit(lacking, definition, params))


def fit_result(method: str, result: dict[str, Any], version: str) -> dict[str, Any]:
    """The result of a ``method`` request in :data:`RESULTS_FITTED` without the fields
    ``version``, one in :data:`LACKING`, lacks; ``result`` itself when nothing is left
    out, else a new dict (``result`` is never changed).

    The caller checks both (``send_result``, where a session with nothing to fit pays
    one lookup a result and no call); another method or version is a ``KeyError``.
    """
    return cast("dict[str, Any]", _fit(LACKING[version], RESULTS_FITTED[method], result))

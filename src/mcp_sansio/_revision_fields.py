"""Which fields of what a server describes came in which revision, as data.

A server builds its answers in the newest revision's terms. A session of an older
revision must be sent only what that revision defines (lifecycle.mdx: both parties
"MUST respect the negotiated protocol version"): every schema lets an object carry
properties it does not define, so a tolerant peer ignores a ``title`` it does not
know, but a strict one (``additionalProperties: false``, as generated validators and
typed models often are) refuses the whole message.

:data:`FIELDS_SINCE` says, for each object a server sends of which some revision lacks
a field (and the few a client sends: its capabilities, a progress notification's
params), the first revision whose schema has that field; it is read off each
revision's ``schema.json`` (``tests/core/test_revision_fields.py`` checks it against
them). :func:`fit` takes such an object, built for the newest revision, and leaves out
what the session's revision lacks, in the objects it holds too (a resource's
``annotations``, a prompt's ``arguments``). Content types a revision lacks altogether
(audio, resource links) are a binding's to translate, not this table's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ._versions import LEGACY_VERSIONS

__all__ = ["FIELDS_SINCE", "LACKING", "NESTED", "fit"]

_2025_03: Final = "2025-03-26"
_2025_06: Final = "2025-06-18"
_2025_11: Final = "2025-11-25"

#: ``(definition, field, the first revision whose schema has it)``: the fields of what a
#: server sends that some legacy revision lacks (2024-11-05 has every field not listed).
#: ``ElicitationCapability`` is ``ClientCapabilities.elicitation`` and
#: ``ProgressNotificationParams`` a progress notification's ``params``, which older
#: schemas write out in place.
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
    # content and resource contents
    ("TextContent", "_meta", _2025_06),
    ("ImageContent", "_meta", _2025_06),
    ("AudioContent", "_meta", _2025_06),
    ("EmbeddedResource", "_meta", _2025_06),
    ("ResourceLink", "icons", _2025_11),
    ("ResourceContents", "_meta", _2025_06),
    # what a client or either side sends (the core)
    ("ClientCapabilities", "elicitation", _2025_06),
    ("ClientCapabilities", "tasks", _2025_11),
    ("ElicitationCapability", "form", _2025_11),
    ("ElicitationCapability", "url", _2025_11),
    ("ProgressNotificationParams", "message", _2025_03),
    ("ProgressNotificationParams", "_meta", _2025_11),
)

#: The objects an object holds, which :func:`fit` fits too: ``definition -> ((field,
#: definition of its value, whether the value is a list of them), ...)``.
#: ``ResourceContents`` stands for both ``TextResourceContents`` and
#: ``BlobResourceContents`` (the same fields came at the same time).
NESTED: Mapping[str, tuple[tuple[str, str, bool], ...]] = MappingProxyType(
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
    for field, inner, many in NESTED.get(definition, ()):
        held = value.get(field)
        if held is None or (drop is not None and field in drop):
            continue
        fitted: Any = held
        if not many:
            if isinstance(held, Mapping):
                fitted = _fit(lacking, inner, held)
        elif isinstance(held, list):
            items = [_fit(lacking, inner, i) if isinstance(i, Mapping) else i for i in held]
            if any(new is not old for new, old in zip(items, held, strict=True)):
                fitted = items
        if fitted is not held:
            if out is None:
                out = dict(value)
            out[field] = fitted
    return value if out is None else out

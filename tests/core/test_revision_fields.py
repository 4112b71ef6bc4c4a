"""``mcp_sansio._revision_fields``: the table of which field came in which revision is
the schemas' (read off each ``schema.json``), ``fit`` leaves out what a revision lacks,
and the core's ``initialize`` answer sends a legacy session only the capabilities and
``serverInfo`` fields its revision defines."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcp_sansio import LEGACY_VERSIONS, ConnectionConfig
from mcp_sansio._revision_fields import FIELDS_SINCE, LACKING, NESTED, fit
from tests.schema import _defs, validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair

# ``ResourceContents`` in the table stands for both kinds of contents.
_CONTENTS = ("TextResourceContents", "BlobResourceContents")


def _fields(version: str, definition: str) -> set[str] | None:
    """The properties of ``definition`` in ``version``'s schema (``None``: no such
    definition there)."""
    defs = _defs(version)
    if definition == "ResourceContents":
        found = [set(defs[name]["properties"]) for name in _CONTENTS]
        assert found[0] - {"text"} == found[1] - {"blob"}
        return found[0] - {"text"}
    if definition == "Annotations" and definition not in defs:
        # 2024-11-05 writes it out where it is used (``Annotated``).
        return set(defs["Resource"]["properties"]["annotations"]["properties"])
    if definition == "ElicitationCapability":  # (written out in ClientCapabilities)
        held = defs["ClientCapabilities"]["properties"].get("elicitation")
        return None if held is None else set(held.get("properties", {}))
    if definition == "ProgressNotificationParams" and definition not in defs:
        # Before 2025-11-25 written out in the notification.
        return set(defs["ProgressNotification"]["properties"]["params"]["properties"])
    schema = defs.get(definition)
    return None if schema is None else set(schema.get("properties", {}))


DEFINITIONS = sorted({definition for definition, _, _ in FIELDS_SINCE} | set(NESTED))


@pytest.mark.parametrize("definition", DEFINITIONS)
def test_the_table_is_read_off_the_schemas(definition: str) -> None:
    # For each definition: a field the table lists is in every schema from the one it
    # names on and in none before (where the definition exists); and every field some
    # legacy schema has and an older one lacks is listed.
    since = {field: v for d, field, v in FIELDS_SINCE if d == definition}
    oldest_first = LEGACY_VERSIONS[::-1]
    seen: set[str] | None = None
    for version in oldest_first:
        fields = _fields(version, definition)
        if fields is None:
            continue
        for field, first in since.items():
            came = oldest_first.index(version) >= oldest_first.index(first)
            assert (field in fields) is came, (definition, field, version)
        if seen is not None:
            assert fields >= seen, (definition, version, seen - fields)  # nothing removed
            assert fields - seen <= set(since), (definition, version, fields - seen)
        seen = fields


def test_lacking_is_the_table_per_version() -> None:
    assert LACKING["2024-11-05"]["ServerCapabilities"] == {"completions", "tasks"}
    assert LACKING["2025-03-26"]["Tool"] == {"title", "outputSchema", "_meta", "icons"} | {
        "execution"
    }
    assert LACKING["2025-06-18"]["Tool"] == {"icons", "execution"}
    assert "Annotations" not in LACKING["2025-06-18"]
    assert "2025-11-25" not in LACKING
    assert "2026-07-28" not in LACKING


def test_nested_names_the_held_definition() -> None:
    for definition, held in NESTED.items():
        for field, inner, many in held:
            prop = _defs("2025-11-25")[definition]["properties"][field]
            if inner == "ResourceContents":
                continue  # (below)
            if inner == "ElicitationCapability":  # (written out in place: its fields)
                assert set(prop["properties"]) == {"form", "url"}
                continue
            target = prop["items"] if many else prop
            assert target["$ref"].rsplit("/", 1)[1] == inner, (definition, field)


def test_nested_contents_of_an_embedded_resource_are_either_kind() -> None:
    prop = _defs("2025-11-25")["EmbeddedResource"]["properties"]["resource"]
    assert {ref["$ref"].rsplit("/", 1)[1] for ref in prop["anyOf"]} == set(_CONTENTS)


RESOURCE: dict[str, Any] = {
    "uri": "mem://x",
    "name": "x",
    "title": "X",
    "icons": [{"src": "https://example.com/i.png"}],
    "annotations": {"priority": 1, "lastModified": "2025-01-01T00:00:00Z"},
    "_meta": {"k": 1},
}


def test_fit_leaves_out_what_the_revision_lacks_in_held_objects_too() -> None:
    before = copy.deepcopy(RESOURCE)
    assert fit("Resource", RESOURCE, "2024-11-05") == {
        "uri": "mem://x",
        "name": "x",
        "annotations": {"priority": 1},
    }
    assert fit("Resource", RESOURCE, "2025-06-18") == {
        k: v for k, v in RESOURCE.items() if k != "icons"
    }
    assert before == RESOURCE  # (never changed in place)
    prompt = {"name": "p", "arguments": [{"name": "a", "title": "A"}, {"name": "b"}]}
    assert fit("Prompt", prompt, "2025-03-26") == {
        "name": "p",
        "arguments": [{"name": "a"}, {"name": "b"}],
    }


def test_fit_returns_what_needs_nothing_as_it_is() -> None:
    assert fit("Resource", RESOURCE, "2025-11-25") is RESOURCE
    assert fit("Resource", RESOURCE, "2026-07-28") is RESOURCE
    plain = {"uri": "mem://x", "name": "x", "annotations": {"priority": 1}}
    assert fit("Resource", plain, "2024-11-05") is plain
    prompt = {"name": "p", "arguments": [{"name": "a"}]}
    assert fit("Prompt", prompt, "2024-11-05") is prompt
    assert fit("Unknown", RESOURCE, "2024-11-05") is RESOURCE


INFO = {
    "name": "s",
    "version": "1",
    "title": "S",
    "description": "d",
    "websiteUrl": "https://example.com",
    "icons": [{"src": "https://example.com/i.png"}],
}


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_answers_with_what_the_revision_defines(version: str) -> None:
    client = ConnectionConfig(
        implementation={"name": "c", "version": "1"},
        capabilities=CLIENT_CAPS,
        supported_versions=(version,),
        era="legacy",
    )
    server = ConnectionConfig(implementation=INFO, capabilities=SERVER_CAPS)
    pair = ConnectionPair(client, server)
    pair.handshake()
    ((_, answer),) = [(s, m) for s, m in pair.wire if s == "server"]
    result = answer["result"]
    expected_info = {
        "2024-11-05": {"name", "version"},
        "2025-03-26": {"name", "version"},
        "2025-06-18": {"name", "version", "title"},
        "2025-11-25": set(INFO),
    }[version]
    assert set(result["serverInfo"]) == expected_info
    assert ("completions" in result["capabilities"]) is (version != "2024-11-05")
    assert SERVER_CAPS["completions"] == {}  # (what was configured is left as it was)
    assert INFO["title"] == "S"
    validate_message(version, answer, "initialize", strict=True)

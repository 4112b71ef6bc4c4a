"""``mcp_sansio._revision_fields``: the table of which field came in which revision is
the schemas' (read off each ``schema.json``), ``fit`` leaves out what a revision lacks,
and the core's ``initialize`` answer sends a legacy session only the capabilities and
``serverInfo`` fields its revision defines."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mcp_sansio import LEGACY_VERSIONS, ConnectionConfig, RequestReceived
from mcp_sansio._revision_fields import (
    CONTENT_DEFINITIONS,
    FIELDS_SINCE,
    LACKING,
    NESTED,
    UNIONS,
    fit,
    fit_params,
)
from tests.schema import _defs, validate_message

from .helpers import CLIENT_CAPS, SERVER_CAPS, ConnectionPair, handshaken

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
    if definition == "CompleteRequestParams" and definition not in defs:
        # Before 2025-11-25 written out in the request, with the ``_meta`` of every
        # request's params (``Request``) left to the base.
        held = defs["CompleteRequest"]["properties"]["params"]["properties"]
        return set(held) | set(defs["Request"]["properties"]["params"]["properties"])
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


def _refs(schema: Any) -> set[str]:
    """The definitions ``schema`` refers to, at any depth."""
    if isinstance(schema, dict):
        found = {schema["$ref"].rsplit("/", 1)[1]} if "$ref" in schema else set()
        return found.union(*(_refs(value) for value in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_refs(value) for value in schema))
    return set()


def test_nested_names_the_held_definition() -> None:
    for definition, held in NESTED.items():
        for field, inner, many in held:
            prop = _defs("2025-11-25")[definition]["properties"][field]
            if inner == "ResourceContents":
                continue  # (below)
            if inner in UNIONS:
                # Of the definitions the union's types name (content: one block or a
                # list, fitted either way), or of 2025-11-25's sampling tool use, which
                # no legacy revision has in part.
                assert many is (None if inner == "ContentBlock" else False), (definition, field)
                named = _refs(prop)
                for union in ("ContentBlock", "SamplingMessageContentBlock"):
                    if union in named:
                        named = named - {union} | _refs(_defs("2025-11-25")[union])
                assert named, (definition, field)
                assert named <= set(UNIONS[inner].values()) | {
                    "ToolUseContent",
                    "ToolResultContent",
                }, (definition, field, named)
                continue
            if inner == "ElicitationCapability":  # (written out in place: its fields)
                assert set(prop["properties"]) == {"form", "url"}
                continue
            target = prop["items"] if many else prop
            assert target["$ref"].rsplit("/", 1)[1] == inner, (definition, field)


def test_unions_are_the_definitions_by_type() -> None:
    defs = _defs("2025-11-25")
    assert UNIONS["ContentBlock"] is CONTENT_DEFINITIONS
    assert set(CONTENT_DEFINITIONS.values()) == _refs(defs["ContentBlock"])
    ref = defs["CompleteRequestParams"]["properties"]["ref"]
    assert set(UNIONS["Reference"].values()) == _refs(ref)
    for union in UNIONS.values():
        for kind, definition in union.items():
            assert defs[definition]["properties"]["type"]["const"] == kind


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_completion_ref_goes_with_the_fields_of_its_revision(version: str) -> None:
    # PromptReference.title came in 2025-06-18 (a ResourceTemplateReference has none
    # in any revision: left as it is); the params are checked strictly.
    params: dict[str, Any] = {
        "ref": {"type": "ref/prompt", "name": "greet", "title": "Greet"},
        "argument": {"name": "name", "value": ""},
    }
    before = copy.deepcopy(params)
    fitted = fit_params("completion/complete", params, version)
    assert params == before
    old = version in ("2024-11-05", "2025-03-26")
    assert ("title" not in fitted["ref"]) is old
    assert (fitted is params) is not old
    request = {"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": fitted}
    validate_message(version, request, strict=True)
    resource = {"type": "ref/resource", "uri": "mem://{x}", "title": "not a field"}
    template = {**params, "ref": resource}
    assert fit_params("completion/complete", template, version) is template


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


# ---------------------------------------------------------------------- what a client sends

ICONS = [{"src": "https://example.com/i.png"}]
TEXT = {
    "type": "text",
    "text": "t",
    "annotations": {"priority": 1, "lastModified": "2025-01-01T00:00:00Z"},
    "_meta": {"k": 1},
}
OLD_TEXT = {"type": "text", "text": "t", "annotations": {"priority": 1}}


def legacy_pair(version: str, client_caps: dict[str, Any] = CLIENT_CAPS) -> ConnectionPair:
    return handshaken(
        "legacy", implementation=INFO, capabilities=client_caps, supported_versions=(version,)
    )


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_asks_with_what_the_revision_defines(version: str) -> None:
    # Both parties "MUST respect the negotiated protocol version" (lifecycle.mdx): the
    # clientInfo is an Implementation, fitted as the serverInfo is; the tasks extension
    # is modern-only, as a legacy server does not offer it either.
    caps = {**CLIENT_CAPS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    pair = legacy_pair(version, caps)
    ((_, asked), _) = [(s, m) for s, m in pair.wire if s == "client"][:2]
    params = asked["params"]
    assert (
        set(params["clientInfo"])
        == {
            "2024-11-05": {"name", "version"},
            "2025-03-26": {"name", "version"},
            "2025-06-18": {"name", "version", "title"},
            "2025-11-25": set(INFO),
        }[version]
    )
    assert "extensions" not in params["capabilities"]
    assert caps["extensions"] and INFO["title"] == "S"  # (what was configured is kept)
    validate_message(version, asked, strict=True)


def test_initialize_keeps_an_extension_the_binding_serves() -> None:
    # Capabilities are not a closed set in any revision ("any client can define its
    # own, additional capabilities"): an extension other than tasks goes as it is.
    caps: dict[str, Any] = {
        "extensions": {"com.example/x": {}, "io.modelcontextprotocol/tasks": {}}
    }
    pair = legacy_pair("2024-11-05", caps)
    asked = pair.wire[0][1]
    assert asked["params"]["capabilities"] == {"extensions": {"com.example/x": {}}}


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_completion_context_only_where_the_revision_has_it(version: str) -> None:
    pair = legacy_pair(version)
    params = {
        "ref": {"type": "ref/prompt", "name": "p"},
        "argument": {"name": "a", "value": ""},
        "context": {"arguments": {"b": "c"}},
    }
    before = copy.deepcopy(params)
    for _ in range(2):  # (the second goes by the fast path, where one was sent before)
        pair.client.send_request("completion/complete", params, now=0.0)
        pair.deliver(pair.client)
    sent = [m for s, m in pair.wire if s == "client" and m.get("method") == "completion/complete"]
    has = version in ("2025-06-18", "2025-11-25")
    assert [("context" in m["params"]) for m in sent] == [has, has]
    assert params == before
    for message in sent:
        validate_message(version, message, strict=True)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_client_answers_with_what_the_revision_defines(version: str) -> None:
    pair = legacy_pair(version)
    pair.server.send_request("roots/list", None, now=0.0)
    message = {"role": "user", "content": {"type": "text", "text": "q"}}
    pair.server.send_request(
        "sampling/createMessage", {"messages": [message], "maxTokens": 1}, now=0.0
    )
    asked = [e for e in pair.deliver(pair.server) if isinstance(e, RequestReceived)]
    roots: dict[str, Any] = {"roots": [{"uri": "file:///w", "name": "w", "_meta": {"k": 1}}]}
    sampled = {"role": "assistant", "content": TEXT, "model": "m", "_meta": {"k": 1}}
    before = copy.deepcopy((roots, sampled))
    for event, result in zip(asked, (roots, sampled), strict=True):
        pair.client.send_result(event.request_id, result)
    pair.deliver(pair.client)
    roots_answer, sampled_answer = (m for s, m in pair.wire[-2:])
    assert (roots, sampled) == before  # (never changed in place)
    titled = version in ("2025-06-18", "2025-11-25")
    assert (
        roots_answer["result"] == roots
        if titled
        else {"roots": [{"uri": "file:///w", "name": "w"}]}
    )
    assert sampled_answer["result"] == (
        sampled if titled else {**sampled, "content": OLD_TEXT}
    )  # (a result's own _meta is every revision's)
    validate_message(version, roots_answer, "roots/list", strict=True)
    validate_message(version, sampled_answer, "sampling/createMessage", strict=True)


# ---------------------------------------------------------------------- what a server asks


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_sampling_request_holds_what_the_revision_defines(version: str) -> None:
    pair = legacy_pair(version)
    blocks: Any = [TEXT, TEXT] if version == "2025-11-25" else TEXT  # (lists: 2025-11-25)
    params: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": blocks, "_meta": {"k": 1}},
            {"role": "user", "content": {"type": "text", "text": "plain"}},
        ],
        "maxTokens": 1,
    }
    before = copy.deepcopy(params)
    pair.server.send_request("sampling/createMessage", params, now=0.0)
    pair.deliver(pair.server)
    asked = pair.wire[-1][1]
    assert params == before
    first, second = asked["params"]["messages"]
    assert second == params["messages"][1]
    if version == "2025-11-25":
        assert first == params["messages"][0]
    else:
        titled = version == "2025-06-18"
        assert first == {"role": "user", "content": TEXT if titled else OLD_TEXT}
    validate_message(version, asked, strict=True)


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_list_content_of_a_sampling_message_is_fitted_block_by_block(version: str) -> None:
    """A revision before 2025-11-25 has no list of blocks as a message's content; a
    list is the sender's to refuse or translate, but each block in it still loses the
    fields the revision lacks (a block's ``_meta`` and ``lastModified`` before
    2025-06-18, a link's ``icons`` before 2025-11-25), as a single block does."""
    pair = legacy_pair(version)
    link = {"type": "resource_link", "uri": "mem://r", "name": "r", "icons": ICONS}
    message = {"role": "user", "content": [TEXT, link]}
    params: dict[str, Any] = {"messages": [message], "maxTokens": 1}
    before = copy.deepcopy(params)
    pair.server.send_request("sampling/createMessage", params, now=0.0)
    pair.deliver(pair.server)
    asked = pair.wire[-1][1]
    assert params == before
    titled = version == "2025-06-18"
    assert asked["params"]["messages"] == [
        {
            "role": "user",
            "content": [
                TEXT if titled else OLD_TEXT,
                {k: v for k, v in link.items() if k != "icons"},
            ],
        }
    ]


# ---------------------------------------------------------------------- what a server answers

LINK_ANNOTATIONS = {"priority": 1, "lastModified": "2025-01-01T00:00:00Z"}
TOOL = {
    "name": "t",
    "title": "T",
    "description": "d",
    "inputSchema": {"type": "object"},
    "outputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True},
    "execution": {"taskSupport": "forbidden"},
    "icons": ICONS,
    "_meta": {"k": 1},
}
PROMPT = {
    "name": "p",
    "title": "P",
    "arguments": [{"name": "a", "title": "A", "required": True}],
    "icons": ICONS,
    "_meta": {"k": 1},
}
TEMPLATE = {
    "uriTemplate": "mem://{x}",
    "name": "x",
    "title": "X",
    "annotations": LINK_ANNOTATIONS,
    "icons": ICONS,
    "_meta": {"k": 1},
}
CONTENTS = {"uri": "mem://x", "mimeType": "text/plain", "text": "x", "_meta": {"k": 1}}
IMAGE = {"type": "image", "data": "AAAA", "mimeType": "image/png", "_meta": {"k": 1}}
EMBEDDED = {"type": "resource", "resource": CONTENTS, "annotations": LINK_ANNOTATIONS}

# Each method a server answers, its params, and a result built in the newest revision's
# terms (every block a type each legacy revision has: the others are the driver's).
SERVER_ANSWERS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("tools/list", {}, {"tools": [TOOL, {"name": "u", "inputSchema": {"type": "object"}}]}),
    (
        "tools/call",
        {"name": "t"},
        {"content": [TEXT, IMAGE, EMBEDDED], "structuredContent": {"x": 1}, "isError": False},
    ),
    ("prompts/list", {}, {"prompts": [PROMPT]}),
    (
        "prompts/get",
        {"name": "p"},
        {
            "messages": [
                {"role": "user", "content": TEXT},
                {"role": "assistant", "content": EMBEDDED},
            ]
        },
    ),
    ("resources/list", {}, {"resources": [RESOURCE], "nextCursor": "c"}),
    ("resources/templates/list", {}, {"resourceTemplates": [TEMPLATE]}),
    ("resources/read", {"uri": "mem://x"}, {"contents": [CONTENTS, {**CONTENTS, "text": "y"}]}),
]


def _answered(version: str, method: str, params: dict[str, Any], result: dict[str, Any]) -> Any:
    """What the server core sends, in a ``version`` session, for ``result``."""
    pair = legacy_pair(version)
    pair.client.send_request(method, params, now=0.0)
    (asked,) = [e for e in pair.deliver(pair.client) if isinstance(e, RequestReceived)]
    pair.server.send_result(asked.request_id, result)
    pair.deliver(pair.server)
    return pair.wire[-1][1]


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
@pytest.mark.parametrize(
    ("method", "params", "result"), SERVER_ANSWERS, ids=[m for m, _, _ in SERVER_ANSWERS]
)
def test_a_server_answers_with_what_the_revision_defines(
    version: str, method: str, params: dict[str, Any], result: dict[str, Any]
) -> None:
    # lifecycle.mdx: both parties "MUST: Respect the negotiated protocol version". The
    # core fits any driver's answers, not only mcp_trio's Server's: a strict client of
    # an older revision (additionalProperties: false) would refuse the whole result.
    before = copy.deepcopy(result)
    answer = _answered(version, method, params, result)
    assert result == before  # (never changed in place)
    validate_message(version, answer, method, strict=True)
    if version == "2025-11-25":
        assert answer["result"] == result  # (the newest legacy revision: nothing to fit)


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_tool_result_loses_only_what_the_revision_lacks(version: str) -> None:
    _, params, result = SERVER_ANSWERS[1]
    answer = _answered(version, "tools/call", params, result)["result"]
    structured = version in ("2025-06-18", "2025-11-25")
    assert ("structuredContent" in answer) is structured
    assert answer["content"] == (
        result["content"]
        if structured
        else [
            OLD_TEXT,
            {k: v for k, v in IMAGE.items() if k != "_meta"},
            {
                "type": "resource",
                "resource": {k: v for k, v in CONTENTS.items() if k != "_meta"},
                "annotations": {"priority": 1},
            },
        ]
    )
    assert answer["isError"] is False


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26"])
def test_a_content_type_the_revision_lacks_is_the_drivers(version: str) -> None:
    # What the core cannot do: a block of a type the revision lacks altogether goes as
    # it is (mcp_trio's Server translates it first); its fields are fitted all the same.
    link = {"type": "resource_link", "uri": "mem://x", "name": "x", "icons": ICONS}
    answer = _answered(version, "tools/call", {"name": "t"}, {"content": [link]})
    assert answer["result"] == {"content": [{k: v for k, v in link.items() if k != "icons"}]}

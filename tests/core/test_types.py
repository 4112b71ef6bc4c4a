"""The generated data model (``mcp_sansio.types``) and its converter (``mcp_sansio._serde``)."""

from __future__ import annotations

import collections
import enum
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_sansio import _serde, types
from mcp_sansio._errors import ErrorCode, LocalProtocolError, RemoteProtocolError

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared" / "spec"
EXAMPLES = SPEC / "schema" / "2026-07-28" / "examples"

needs_spec = pytest.mark.skipif(
    not SPEC.is_dir(), reason=f"the shared spec folder is not beside the repository ({SPEC})"
)


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*/*.json")) if EXAMPLES.is_dir() else []


# --- The spec's own examples ----------------------------------------------------------------

#: Example folders named after an alias rather than a class. They are structured through the
#: alias itself (``dict[str, InputRequest]``...), so the union dispatch is exercised too.
ALIAS_EXAMPLES = {"InputRequests", "InputResponses"}


@needs_spec
@pytest.mark.parametrize("path", example_files(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_spec_example_round_trips(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    target = getattr(types, path.parent.name)
    assert attrs.has(target) or path.parent.name in ALIAS_EXAMPLES
    value = _serde.structure(data, target)
    assert _serde.unstructure(value) == data


@needs_spec
def test_every_example_folder_is_a_type() -> None:
    folders = {p.parent.name for p in example_files()}
    assert folders
    assert folders <= set(types.__all__)


@needs_spec
def test_examples_pick_the_right_union_members() -> None:
    data = json.loads(
        (EXAMPLES / "InputRequests" / "elicitation-and-sampling-input-requests.json").read_text()
    )
    requests = _serde.structure(data, types.InputRequests)
    assert isinstance(requests["github_login"], types.ElicitRequest)
    assert isinstance(requests["github_login"].params, types.ElicitRequestFormParams)
    assert isinstance(requests["capital_of_france"], types.CreateMessageRequest)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"type": "text", "text": "hi"}, types.TextContent),
        ({"type": "resource_link", "uri": "file:///a", "name": "a"}, types.ResourceLink),
        (
            {"type": "resource", "resource": {"uri": "file:///a", "blob": "AA=="}},
            types.EmbeddedResource,
        ),
    ],
)
def test_content_block_dispatches_on_type(data: dict[str, Any], expected: type) -> None:
    assert type(_serde.structure(data, types.ContentBlock)) is expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"type": "string", "maxLength": 3}, types.StringSchema),
        ({"type": "integer", "minimum": 1}, types.NumberSchema),
        ({"type": "boolean"}, types.BooleanSchema),
        ({"type": "string", "enum": ["a"]}, types.UntitledSingleSelectEnumSchema),
        (
            {"type": "string", "oneOf": [{"const": "a", "title": "A"}]},
            types.TitledSingleSelectEnumSchema,
        ),
        ({"type": "string", "enum": ["a"], "enumNames": ["A"]}, types.LegacyTitledEnumSchema),
        (
            {"type": "array", "items": {"type": "string", "enum": ["a"]}},
            types.UntitledMultiSelectEnumSchema,
        ),
        (
            {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
            types.TitledMultiSelectEnumSchema,
        ),
    ],
)
def test_primitive_schema_dispatch(data: dict[str, Any], expected: type) -> None:
    value = _serde.structure(data, types.PrimitiveSchemaDefinition)
    assert type(value) is expected
    assert _serde.unstructure(value) == data


def test_resource_contents_dispatch_on_required_key() -> None:
    text = {"uri": "file:///a", "text": "hello"}
    blob = {"uri": "file:///a", "blob": "aGVsbG8="}
    result = _serde.structure({"contents": [text, blob]}, types.ReadResourceResult)
    first, second = result.contents
    assert isinstance(first, types.TextResourceContents)
    assert isinstance(second, types.BlobResourceContents)


# --- Both revisions -------------------------------------------------------------------------

LEGACY_MESSAGES: list[tuple[type, dict[str, Any]]] = [
    (
        types.InitializeRequest,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {"listChanged": True}, "tasks": {"list": {}}},
                "clientInfo": {"name": "c", "version": "1"},
            },
        },
    ),
    (
        types.CallToolRequest,
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "tools/call",
            "params": {"name": "t", "_meta": {"progressToken": 7}, "task": {"ttl": 60}},
        },
    ),
    (types.CallToolResult, {"content": [], "structuredContent": {"a": 1}}),
    (types.ListToolsRequest, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    (
        types.CreateMessageRequest,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 5},
        },
    ),
    (
        types.GetTaskResult,
        {"taskId": "t", "status": "working", "createdAt": "x", "lastUpdatedAt": "y", "ttl": None},
    ),
    (
        types.ElicitRequestURLParams,
        {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e"},
    ),
]


@pytest.mark.parametrize(("cls", "data"), LEGACY_MESSAGES, ids=lambda v: getattr(v, "__name__", ""))
def test_legacy_revision_round_trips(cls: type, data: dict[str, Any]) -> None:
    assert _serde.unstructure(_serde.structure(data, cls)) == data


def test_absent_optional_fields_are_omitted_and_constants_written() -> None:
    assert _serde.unstructure(types.TextContent(text="hi")) == {"type": "text", "text": "hi"}
    assert _serde.unstructure(types.ListToolsRequest(id=1)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
    }
    # A required but nullable member is written even when it is null.
    task = types.Task(task_id="t", status="working", created_at="x", last_updated_at="y", ttl=None)
    assert _serde.unstructure(task)["ttl"] is None


def test_wire_names() -> None:
    tool = types.Tool(name="t", input_schema={"type": "object"})
    assert _serde.unstructure(tool) == {"name": "t", "inputSchema": {"type": "object"}}
    meta = types.RequestMetaObject(
        protocol_version="2026-07-28", client_capabilities=types.ClientCapabilities()
    )
    assert _serde.unstructure(meta) == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def test_numbers_keep_their_json_type() -> None:
    params = _serde.structure(
        {"progressToken": 1, "progress": 50}, types.ProgressNotificationParams
    )
    assert _serde.unstructure(params) == {"progressToken": 1, "progress": 50}
    assert json.dumps(_serde.unstructure(params), sort_keys=True) == (
        '{"progress": 50, "progressToken": 1}'  # not 50.0
    )


# --- Extensible objects ---------------------------------------------------------------------


def test_unknown_capability_keys_survive() -> None:
    data = {
        "tools": {"listChanged": True, "x-vendor-hint": 3},
        "x-future": {"enabled": True},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    caps = _serde.structure(data, types.ServerCapabilities)
    assert caps.extra == {"x-future": {"enabled": True}}
    assert caps.tools is not None
    assert caps.tools.extra == {"x-vendor-hint": 3}
    assert _serde.unstructure(caps) == data


def test_vendor_meta_keys_survive() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "com.example/tenant": {"id": 7},
    }
    data = {"name": "get_weather", "arguments": {"city": "Paris"}, "_meta": meta}
    params = _serde.structure_params(data, types.CallToolRequestParams)
    assert params.meta == meta
    assert _serde.unstructure(params) == data
    typed = _serde.structure(meta, types.RequestMetaObject)
    assert typed.protocol_version == "2026-07-28"
    assert typed.extra == {"traceparent": meta["traceparent"], "com.example/tenant": {"id": 7}}
    assert _serde.unstructure(typed) == meta


def test_result_keeps_unknown_members() -> None:
    data = {"resultType": "complete", "x-cost": 0.25, "_meta": {"traceparent": "00-1"}}
    result = _serde.structure(data, types.Result)
    assert result.extra == {"x-cost": 0.25}
    assert _serde.unstructure(result) == data


def test_closed_objects_drop_unknown_members() -> None:
    text = _serde.structure({"type": "text", "text": "hi", "bogus": 1}, types.TextContent)
    assert _serde.unstructure(text) == {"type": "text", "text": "hi"}


# --- Errors ---------------------------------------------------------------------------------


def invalid_params(data: Any, cls: Any) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        _serde.structure_params(data, cls)
    assert info.value.error_code == ErrorCode.INVALID_PARAMS
    assert int(info.value.error_code) == -32602
    return info.value


def test_structure_params_missing_field() -> None:
    error = invalid_params({"arguments": {}}, types.CallToolRequestParams)
    assert error.message == "invalid params: name: required field missing"
    assert error.error_data().to_wire() == {"code": -32602, "message": error.message}


def test_a_structure_error_answers_the_request_it_came_in() -> None:
    # It is the application's to send (a -32602 for the request): .code reads as on
    # ErrorData, read-only; LocalProtocolError has it too.
    error = invalid_params({"name": 5}, types.CallToolRequestParams)
    assert error.code == error.error_code == ErrorCode.INVALID_PARAMS
    with pytest.raises(AttributeError):
        error.code = 1  # type: ignore[misc]
    assert LocalProtocolError("x").code == ErrorCode.INTERNAL_ERROR
    assert "answer that request" in (RemoteProtocolError.__doc__ or "")


@pytest.mark.parametrize(
    ("data", "cls", "message"),
    [
        ({"name": 5}, types.CallToolRequestParams, "name: expected a string, got a number"),
        ("x", types.CallToolRequestParams, "invalid params: expected an object, got a string"),
        ({"uri": "u", "_meta": []}, types.ReadResourceRequestParams, "_meta: expected an object"),
        (
            {"messages": [{"role": "user", "content": {"type": "text"}}], "maxTokens": 1},
            types.CreateMessageRequestParams,
            "messages[0].content.text: required field missing",
        ),
        (
            {"messages": [], "maxTokens": 1, "includeContext": "everything"},
            types.CreateMessageRequestParams,
            'includeContext: expected "allServers" or "none" or "thisServer", got "everything"',
        ),
        (
            {"ref": {"type": "ref/nope"}, "argument": {"name": "a", "value": "b"}},
            types.CompleteRequestParams,
            "ref: does not match PromptReference or ResourceTemplateReference",
        ),
        (
            {"_meta": {"io.modelcontextprotocol/protocolVersion": 1}},
            types.SubscriptionsListenRequestParams,
            "notifications: required field missing",
        ),
        ({"level": True}, types.SetLevelRequestParams, "level: expected"),
        ({"progressToken": 1.5, "progress": 1}, types.ProgressNotificationParams, "progressToken"),
    ],
)
def test_structure_params_names_the_bad_member(data: Any, cls: type, message: str) -> None:
    assert message in invalid_params(data, cls).message


def test_literal_choices_are_named_in_one_order_whatever_was_imported_first() -> None:
    # typing's cache compares Literal members as a set: a ``Literal[...] | None`` written
    # earlier with the same values in another order is handed back for ours. A fresh
    # interpreter shows it; the message must not depend on it.
    script = (
        "from typing import Literal\n"
        "first = Literal['thisServer', 'none', 'allServers'] | None\n"
        "from mcp_sansio import _serde, types\n"
        "try:\n"
        "    _serde.structure_params({'messages': [], 'maxTokens': 1, 'includeContext': 1},"
        " types.CreateMessageRequestParams)\n"
        "except Exception as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert 'expected "allServers" or "none" or "thisServer", got 1' in out


def test_structure_params_reads_missing_params_as_empty() -> None:
    assert _serde.structure_params(None, types.PaginatedRequestParams) == (
        types.PaginatedRequestParams()
    )


def test_structure_error_is_a_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match=r"invalid Tool: inputSchema: required field"):
        _serde.structure({"name": "t"}, types.Tool)


# --- Hypothesis round trips -----------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)
SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    str: st.text(max_size=5),
    int: st.integers(-(2**53), 2**53),
    float: st.floats(allow_nan=False, allow_infinity=False),
    bool: st.booleans(),
}
#: Keys no class names, for the ``extra`` of extensible classes.
vendor_keys = st.from_regex(r"x-[a-z]{1,6}", fullmatch=True)

#: A legacy titled enum without ``enumNames`` is, on the wire, exactly an untitled one, and
#: reads back as that: give it names so that the round trip can tell them apart.
FIELD_OVERRIDES: dict[tuple[type, str], st.SearchStrategy[Any]] = {
    (types.LegacyTitledEnumSchema, "enum_names"): st.lists(st.text(max_size=3), max_size=2),
}


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """Values of a (resolved) field type of ``mcp_sansio.types``."""
    origin = get_origin(tp)
    if tp is Any:
        return json_values
    if tp is NoneType:
        return st.none()
    if tp in SCALARS:
        return SCALARS[tp]
    if origin is Literal:
        return st.sampled_from(get_args(tp))
    if origin is list:
        return st.lists(strategy_for(get_args(tp)[0]), max_size=2)
    if origin is dict:
        return st.dictionaries(st.text(max_size=4), strategy_for(get_args(tp)[1]), max_size=2)
    if origin in (Union, UnionType):
        return st.one_of([strategy_for(m) for m in get_args(tp)])
    if attrs.has(tp):
        return st.deferred(lambda: instances(tp))
    raise AssertionError(f"no strategy for {tp!r}")


def instances(cls: type) -> st.SearchStrategy[Any]:
    attrs.resolve_types(cls)
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for field in attrs.fields(cls):
        if field.name == "extra":
            kwargs[field.name] = st.dictionaries(vendor_keys, json_values, max_size=2)
        else:
            override = FIELD_OVERRIDES.get((cls, field.name))
            kwargs[field.name] = strategy_for(field.type) if override is None else override
    return st.builds(cls, **kwargs)


MODEL_CLASSES = [getattr(types, name) for name in types.__all__ if attrs.has(getattr(types, name))]


@pytest.mark.parametrize("cls", MODEL_CLASSES, ids=lambda c: c.__name__)
def test_round_trip(cls: type) -> None:
    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(instances(cls))
    def check(value: Any) -> None:
        data = _serde.unstructure(value)
        assert json.loads(json.dumps(data)) == data  # plain JSON, no Python objects left
        assert _serde.structure(data, cls) == value

    check()


# --- The generator --------------------------------------------------------------------------


@needs_spec
@pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None, reason="the generator formats with ruff"
)
def test_generated_module_is_in_sync(tmp_path: Path) -> None:
    """``types.py`` is exactly what ``python tools/gen_types.py`` writes today."""
    output = tmp_path / "types.py"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "tools" / "gen_types.py"),
            "--spec-dir",
            str(SPEC / "schema"),
            "--output",
            str(output),
        ],
        check=True,
        capture_output=True,
    )
    committed = (REPO / "src" / "mcp_sansio" / "types.py").read_text(encoding="utf-8")
    assert output.read_text(encoding="utf-8") == committed, (
        "src/mcp_sansio/types.py is out of date: run python tools/gen_types.py"
    )


def test_plain_json_in_any_members_is_copied_and_typed_values_in_it_unstructured() -> None:
    tool = _serde.structure({"name": "x", "inputSchema": {"type": "object"}}, types.Tool)
    inner = {"deep": [1, 2.5, None, True, "s"]}
    result = types.CallToolResult(content=[], structured_content={"found": [tool, inner]})
    out = _serde.unstructure(result)
    assert out == {
        "content": [],
        "structuredContent": {
            "found": [{"name": "x", "inputSchema": {"type": "object"}}, inner],
        },
    }
    assert out["structuredContent"]["found"][1] is not inner  # a copy, as before
    assert out["structuredContent"]["found"][1]["deep"] is not inner["deep"]


def test_a_union_tagged_by_a_string_constant_is_picked_by_its_tag() -> None:
    members = list(get_args(types.ContentBlock))
    found = _serde._discriminator(members)
    assert found is not None
    key, by_tag = found
    assert key == "type"
    assert {tag: cls.__name__ for tag, cls in by_tag.items()} == {
        "text": "TextContent",
        "image": "ImageContent",
        "audio": "AudioContent",
        "resource_link": "ResourceLink",
        "resource": "EmbeddedResource",
    }
    # A member without the tag, or two members sharing a value: no shortcut.
    assert _serde._discriminator([types.TextContent, types.Tool]) is None
    assert _serde._discriminator([types.TextContent, types.TextContent]) is None


@pytest.mark.parametrize(
    "data",
    [
        {"type": "text", "text": "hi"},
        {"type": "text"},  # the tagged class does not fit: the general rule decides
        {"type": "video", "data": "AA=="},
        {"type": 1, "text": "hi"},
        {"text": "hi"},
    ],
)
def test_the_tag_shortcut_picks_what_the_general_rule_picks(data: dict[str, Any]) -> None:
    members = list(get_args(types.ContentBlock))
    general = _serde._pick(members, data)
    try:
        value = _serde.structure(data, types.ContentBlock)
    except RemoteProtocolError:
        assert general is None or not _serde._fits(general, data)
    else:
        assert type(value) is general


# The converter's short paths (a constant compared directly, a scalar union member taken by
# its type, a JSON object copied in one step) give what the general rules give.


def test_a_constant_member_is_compared_with_its_json_type() -> None:
    assert _serde.structure(1, Literal[1]) == 1
    for wrong, shown in ((True, "true"), (1.0, "1.0"), ("1", '"1"')):
        with pytest.raises(RemoteProtocolError, match=f"expected 1, got {shown}"):
            _serde.structure(wrong, Literal[1])
    request = {"jsonrpc": 2.0, "id": 1, "method": "tools/call", "params": {"name": "t"}}
    with pytest.raises(RemoteProtocolError, match=r'jsonrpc: expected "2\.0", got 2\.0'):
        _serde.structure(request, types.CallToolRequest)


def test_a_scalar_union_takes_each_member_by_its_type_and_refuses_the_rest() -> None:
    class Code(enum.IntEnum):
        A = 3

    for value in (1, "a", Code.A):  # (a subclass is still an int)
        assert _serde.structure(value, types.RequestId) is value
    for wrong, kind in ((True, "a boolean"), (1.5, "a number"), (None, "null")):
        with pytest.raises(RemoteProtocolError, match=f"a string or an integer, got {kind}"):
            _serde.structure(wrong, types.RequestId)


def test_a_json_object_member_is_a_copy_with_string_keys() -> None:
    arguments = {"a": [1], "b": {"c": 2}}
    params = _serde.structure({"name": "t", "arguments": arguments}, types.CallToolRequestParams)
    assert params.arguments == arguments and params.arguments is not arguments
    assert params.arguments["a"] is arguments["a"]  # values are kept as they are

    class Subclass(dict[str, Any]):
        pass

    data = {"name": "t", "arguments": Subclass(a=1)}
    got = _serde.structure(data, types.CallToolRequestParams).arguments
    assert type(got) is dict and got == {"a": 1}
    bad = {"name": "t", "arguments": {1: "x"}}
    with pytest.raises(RemoteProtocolError, match=r"arguments\[1\]: expected a string"):
        _serde.structure_params(bad, types.CallToolRequestParams)


def test_json_members_are_unstructured_as_deep_copies_and_typed_values_in_them_unstructured() -> (
    None
):
    class Code(enum.IntEnum):
        A = 3

    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
    }
    tool = types.Tool(
        name="x",
        input_schema=collections.OrderedDict(schema, code=Code.A, pair=(1, 2)),
        meta={"k": types.TextContent(text="hi")},
        title=None,
    )
    out = _serde.unstructure(tool)
    assert out == {
        "name": "x",
        "inputSchema": {**schema, "code": Code.A, "pair": [1, 2]},
        "_meta": {"k": {"type": "text", "text": "hi"}},
    }
    copied = out["inputSchema"]
    # An enum in a JSON member goes out as its value's JSON (orjson writes an IntEnum as
    # its integer); cattrs keeps it as is or turns it into the int, by version.
    assert type(copied) is dict and copied["code"] == 3 and isinstance(copied["code"], int)
    assert copied["properties"] is not schema["properties"]
    assert copied["properties"]["a"] is not schema["properties"]["a"]
    assert copied["required"] is not schema["required"]
    plain = types.Tool(name="x", input_schema=schema, title="T")
    out = _serde.unstructure(plain)
    assert out == {"name": "x", "inputSchema": schema, "title": "T"}
    assert (
        out["inputSchema"] is not schema
        and out["inputSchema"]["required"] is not schema["required"]
    )
